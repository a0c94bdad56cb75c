//! Talking to a persona (SPEC §7, seed 002's two-stage planner): the player — or any game
//! code — sends a persona a message; the persona answers in its own voice and may use tools
//! that act in the town.
//!
//! ## Sending and hearing
//!
//! Write a [`DialogueRequest`] message: [`DialogueRequest::say`] (a message from a named
//! speaker), [`DialogueRequest::whisper`] (an inner voice: stored as a thought with a poignancy,
//! expiring after 30 days), [`DialogueRequest::interview`] (a stateless question: nothing is
//! written to memory, only read-only tools) or [`DialogueRequest::to_group`] (said into the
//! group conversation around the persona, where the listeners' attention decides who answers:
//! see [`group`](crate::group); one to one when there is none). The answer arrives as outcome events — each an
//! [`EntityEvent`] on the persona (observers) and a [`Message`]:
//!
//! | event | fires when | carries |
//! | --- | --- | --- |
//! | [`ToolCalled`] | a tool ran | tool, arguments, result, a line a player understands |
//! | [`ToolRefused`] | a call was refused (not allowed, bad arguments, unknown tool, step limit, repeated) | tool, why |
//! | [`DialogueReplied`] | the reply is ready (the persona is free again) | the reply, the tool calls made |
//! | [`DialogueRemembered`] | a `say`'s background stage is over | the exchange's importance, whether it was kept |
//! | [`ModelCallFailed`](crate::cognition::ModelCallFailed) | a prompt of the turn fell back to its fail-safe | kind, reason |
//!
//! While the model writes, the reply streams into the persona's [`DialogueStream`] (the
//! exchange so far, the partial reply, the tool lines) and its
//! [`ChatStream`](crate::cognition::ChatStream) (speaker = listener = the persona: a bubble).
//! One [`DialogueSessions`] entry per (persona, speaker) keeps the turns.
//!
//! A text box needs only: write `DialogueRequest::say(selected, "Player", text)`, show the
//! selected persona's [`DialogueStream`], and list [`ToolCalled::line`]s.
//!
//! ## One turn (SPEC §7.1–§7.4)
//!
//! 1. **Pre-processing**: the persona's identity and behaviour rules; memories retrieved with
//!    the message as focal point (skipped for greetings of ≤ 8 characters); the game's
//!    pre-start tools ([`DialogueSettings::prestart`]), shown as `【tool】(k=v)` and their output
//!    in `<prestart>` (this turn) or `<prestart keep="true">` (kept in later turns' history).
//! 2. **Planner loop**: strict JSON, a tool call or finish; each tool result goes back to the
//!    planner, so N tools cost N+1 planner calls; at most [`DialogueSettings::max_tool_steps`]
//!    tool steps; the same tool with the same arguments after a success ends the loop; unknown
//!    or refused tools are reported back; prose is the reply.
//! 3. **Final output** when the planner finished without a message.
//! 4. **Background**, after the reply has landed ([`DialogueReplied`]) and the persona is free
//!    again, as seed 002 runs it: importance (the chat poignancy prompt of the memory stream);
//!    if it reaches [`DialogueSettings::memory_threshold`] (3), the exchange — both what was
//!    said and the reply — stored as a chat memory for the chat history and an event over it
//!    that retrieval finds, the planning thought and memo of an after-chat (as a
//!    pair chat leaves them, SPEC §16: one `after_chat` call in lean mode), the speaker's
//!    profile (≤ 1,000 characters, [`SpeakerProfiles`], kept in saves) updated; reflection
//!    follows through the normal trigger. So a fact a player tells a persona can reach its
//!    retrieval, its reflections, its later conversations and its plans. `<think>` and
//!    pre-start blocks never reach a reply or a memory.
//!
//! ## Busy means busy
//! A persona is answered only when it can answer (SPEC §16):
//! - **thinking, talking, in a pair chat or a group call**: the request waits in line until
//!   the persona is free, then is answered in order;
//! - **acting in a stage scene** ([`Held`](crate::clock::Held)): `say`, `to_group` and `whisper`
//!   wait until the scene has let it go (after its aftermath), so nothing a turn's tools do is
//!   overwritten by the scene; an interview (outside the world) is answered;
//! - **asleep** (its current action is sleeping): as [`DialogueSettings::sleepers`] says —
//!   [`Sleepers::Wake`] (the default) answers as if it were up; [`Sleepers::StayAsleep`] answers
//!   `say` and `to_group` at once with "`<first name>` is asleep." ([`DialogueReplied`] with no
//!   planner call) — no model call, no memory, no tool. A whisper and an interview are served
//!   as usual either way.
//!
//! Model calls run off the main thread; tool handlers run in the world between steps
//! ([`tools`]). Until its reply lands the persona is [`AwaitingCognition`](crate::clock::AwaitingCognition):
//! it does not start thoughts, and a Lockstep clock waits for the answer. The background stage
//! holds a small entity of its own (`Name` "dialogue background") `AwaitingCognition`
//! instead, so a Lockstep clock (and a save) waits for it while the persona goes on; its
//! memories are stored when the persona's mind is home.
//!
//! **Layer** (see `tests/layers.rs`): right above [`cognition`](crate::cognition); imports it
//! and everything below.

pub mod control;
pub mod grammar;
pub mod prompts;
mod serve;
pub mod tools;
mod turn;

pub use control::{Appointment, Appointments, ControlError};
pub use grammar::tool_call_grammar;
pub(crate) use serve::run_read_only_tool;
pub use serve::{DialogueSessions, DialogueStream, SessionTurn};
pub use tools::{
    AppDialogueExt, BUILT_IN_TOOLS, ToolAllowList, ToolCall, ToolError, ToolHandler, ToolRegistry,
    ToolResult, ToolSpec,
};

use std::collections::BTreeMap;

use bevy::prelude::*;
use chrono::NaiveDateTime;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::clock::{AgentSystems, PollSystems, SimPoll, SimStep};

/// What a request asks of the persona.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DialogueMode {
    /// A message to answer (SPEC §7).
    Say(String),
    /// An inner voice, stored as a thought (the original's whisper).
    Whisper(String),
    /// A stateless question: answered from memory, nothing written, read-only tools only.
    Interview(String),
    /// Said to the persona and everyone in the group conversation around it (SPEC §8): the
    /// line goes into that stream, where the attention of each listener decides who answers.
    /// Routed by the group conversations ([`GroupTalkRouted`]); a persona in no group
    /// conversation, or an app without them, answers it one to one like [`DialogueMode::Say`].
    ToGroup(String),
}

/// Present when a plugin routes [`DialogueMode::ToGroup`] requests into group conversations
/// (the group conversations' plugin inserts it). Without it such a request is a `Say`.
#[derive(Resource, Debug, Clone, Copy, Default)]
pub struct GroupTalkRouted;

/// A message to a persona (write it with a `MessageWriter<DialogueRequest>`). Requests to one
/// persona are answered one at a time, in order.
#[derive(Message, Debug, Clone, PartialEq, Eq)]
pub struct DialogueRequest {
    /// The persona.
    pub persona: Entity,
    /// Who speaks (the player, another character); keys the session and the profile.
    pub speaker: String,
    /// What is asked.
    pub mode: DialogueMode,
}

impl DialogueRequest {
    /// `speaker` says `text` to `persona`.
    pub fn say(persona: Entity, speaker: impl Into<String>, text: impl Into<String>) -> Self {
        Self {
            persona,
            speaker: speaker.into(),
            mode: DialogueMode::Say(text.into()),
        }
    }

    /// `speaker` says `text` to `persona` and everyone in the group conversation around it
    /// (one to one when there is none).
    pub fn to_group(persona: Entity, speaker: impl Into<String>, text: impl Into<String>) -> Self {
        Self {
            persona,
            speaker: speaker.into(),
            mode: DialogueMode::ToGroup(text.into()),
        }
    }

    /// An inner voice telling `persona` `text`.
    pub fn whisper(persona: Entity, text: impl Into<String>) -> Self {
        Self {
            persona,
            speaker: "inner voice".into(),
            mode: DialogueMode::Whisper(text.into()),
        }
    }

    /// An interviewer asks `persona` `question`; nothing is remembered.
    pub fn interview(persona: Entity, question: impl Into<String>) -> Self {
        Self {
            persona,
            speaker: "Interviewer".into(),
            mode: DialogueMode::Interview(question.into()),
        }
    }
}

/// A pre-start tool (SPEC §7.1): run before the planner on every `say` turn; string arguments
/// may contain `{{question}}`, replaced by the message.
#[derive(Debug, Clone, PartialEq, Reflect)]
pub struct PrestartTool {
    /// The tool's name (any registered tool; the allow-list does not apply: the game chose it).
    pub tool: String,
    /// Its arguments as JSON text.
    pub args: String,
    /// Whether its result stays in later turns' history (`<prestart keep="true">`).
    pub keep: bool,
}

/// The dialogue's tunables.
#[derive(Resource, Reflect, Debug, Clone, PartialEq)]
#[reflect(Resource, Debug, Default)]
pub struct DialogueSettings {
    /// Most tool steps per turn (SPEC §7.2: 12).
    pub max_tool_steps: u32,
    /// Memories retrieved for a message.
    pub memories: usize,
    /// Messages of at most this many characters retrieve nothing (greetings).
    pub greeting_chars: usize,
    /// A message is cut to this many characters.
    pub max_message_chars: usize,
    /// Earlier turns shown to the planner.
    pub history_turns: usize,
    /// Pre-start tools.
    pub prestart: Vec<PrestartTool>,
    /// Behaviour rules added to the persona's identity.
    pub rules: String,
    /// Days a whispered thought is remembered.
    pub whisper_days: i64,
    /// What a sleeping persona does when spoken to (see the module docs, "Busy means busy").
    pub sleepers: Sleepers,
    /// The importance (1–10, the chat poignancy of the memory stream) an exchange needs to be
    /// remembered (seed 002: `if importance >= threshold: store_memory`). The seed leaves the
    /// number open; 3 keeps a greeting or small talk (rated 1–2) out of memory and anything
    /// with news in. The speaker's profile is updated either way; 0 or 1 keeps everything.
    pub memory_threshold: u8,
}

/// What a sleeping persona does when spoken to (`say`, `to_group`); a whisper and an interview
/// are always served.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Reflect)]
pub enum Sleepers {
    /// It wakes to answer, as if it were up (the default: a game may talk at any hour, and a
    /// newly spawned town is in bed at midnight).
    #[default]
    Wake,
    /// It stays asleep: the reply is "`<first name>` is asleep." at once — no model call, no
    /// memory, no tool.
    StayAsleep,
}

impl Default for DialogueSettings {
    fn default() -> Self {
        Self {
            max_tool_steps: 12,
            memories: 8,
            greeting_chars: 8,
            max_message_chars: 4_000,
            history_turns: 6,
            prestart: Vec::new(),
            rules: "Stay in character. Speak briefly, in the first person. Use a tool only when it helps; never claim to have done what no tool did.".into(),
            whisper_days: 30,
            sleepers: Sleepers::Wake,
            memory_threshold: 3,
        }
    }
}

/// What a persona knows of each speaker (SPEC §7.4), at most 1,000 characters each. Saved.
#[derive(Component, Reflect, Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[reflect(Component)]
pub struct SpeakerProfiles(pub BTreeMap<String, String>);

/// One tool call of a turn.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCallRecord {
    /// The tool.
    pub tool: String,
    /// Its arguments.
    pub args: Value,
    /// Its result, or why it did not run.
    pub result: Result<Value, String>,
}

/// A persona answered (the turn is over). For a whisper `reply` is the stored thought.
#[derive(EntityEvent, Message, Debug, Clone, PartialEq)]
pub struct DialogueReplied {
    /// The persona.
    #[event_target]
    pub persona: Entity,
    /// Its name.
    pub name: String,
    /// Who spoke to it.
    pub speaker: String,
    /// The game time the turn ended.
    pub time: NaiveDateTime,
    /// What was asked.
    pub mode: DialogueMode,
    /// The reply.
    pub reply: String,
    /// The tool calls, in order (refused ones too).
    pub tool_calls: Vec<ToolCallRecord>,
    /// Planner calls made.
    pub planner_calls: u32,
    /// Whether the final-output prompt wrote the reply.
    pub final_output: bool,
}

/// The background stage of a `say` is over (SPEC §7.4): the exchange was weighed and, if it
/// mattered enough ([`DialogueSettings::memory_threshold`]), remembered. Fires after the turn's
/// [`DialogueReplied`]; the persona may already be doing something else.
#[derive(EntityEvent, Message, Debug, Clone, PartialEq)]
pub struct DialogueRemembered {
    /// The persona.
    #[event_target]
    pub persona: Entity,
    /// Who spoke to it.
    pub speaker: String,
    /// The exchange's importance, 1–10.
    pub importance: u8,
    /// Whether the exchange was stored as memories (a chat, an event over it, the after-chat
    /// thoughts); the speaker's profile is updated either way.
    pub remembered: bool,
}

/// A tool ran for a persona.
#[derive(EntityEvent, Message, Debug, Clone, PartialEq)]
pub struct ToolCalled {
    /// The persona.
    #[event_target]
    pub persona: Entity,
    /// Who it is talking to.
    pub speaker: String,
    /// The tool.
    pub tool: String,
    /// The (validated) arguments.
    pub args: Value,
    /// What the handler returned.
    pub result: Result<Value, String>,
    /// The call as a player reads it ("📅 added: buy flowers at Bakery, 16:00").
    pub line: String,
}

/// Why a tool call did not run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RefusalReason {
    /// No tool has this name.
    Unknown,
    /// The persona may not use it.
    NotAllowed,
    /// The arguments break the schema (the first problem).
    BadArguments(String),
    /// The turn's tool steps are used up.
    StepLimit,
}

/// A tool call was refused; its handler did not run.
#[derive(EntityEvent, Message, Debug, Clone, PartialEq)]
pub struct ToolRefused {
    /// The persona.
    #[event_target]
    pub persona: Entity,
    /// Who it is talking to.
    pub speaker: String,
    /// The tool as the model named it.
    pub tool: String,
    /// Why.
    pub reason: RefusalReason,
}

/// The dialogue's systems, for ordering against them.
#[derive(SystemSet, Debug, Clone, PartialEq, Eq, Hash)]
pub enum DialogueSystems {
    /// Requests are queued, turns started, served and landed (in [`SimPoll`]).
    Drive,
}

/// Talking to personas: requests, turns, tools, the control API's appointments.
#[derive(Default)]
pub struct DialoguePlugin;

impl Plugin for DialoguePlugin {
    fn build(&self, app: &mut App) {
        app.init_resource::<DialogueSettings>()
            .init_resource::<DialogueSessions>()
            .init_resource::<serve::DialogueQueue>()
            .init_resource::<serve::ActiveTurns>()
            .register_type::<DialogueSettings>()
            .register_type::<SpeakerProfiles>()
            .register_type::<ToolAllowList>()
            .register_type::<DialogueStream>()
            .add_message::<DialogueRequest>()
            .add_message::<DialogueReplied>()
            .add_message::<DialogueRemembered>()
            .add_message::<ToolCalled>()
            .add_message::<ToolRefused>()
            .add_systems(
                SimPoll,
                (serve::queue_requests, serve::drive_dialogues)
                    .chain()
                    .in_set(DialogueSystems::Drive)
                    .after(PollSystems::LandThoughts)
                    .before(PollSystems::SendOutcomes),
            )
            .add_systems(
                SimStep,
                control::keep_appointments
                    .in_set(AgentSystems::Think)
                    .before(crate::cognition::think::start_conversations),
            );
        tools::register_built_ins(app);
    }
}
