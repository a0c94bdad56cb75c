//! Group conversations with attention (SPEC §8, seed 003's heart flow).
//!
//! Smallville's personas talk two at a time (§3.7, unchanged). When three or more gather in an
//! arena, or a game opens a channel, the talk is a **chat stream** ([`GroupStreams`]), and each
//! persona decides how closely to follow it — the attention model, which also bounds what the
//! town spends on models: a chatting persona replies by a draw (no call unless it speaks), and
//! only focused sub-flows run the deliberate observe → think → plan → execute cycle.
//!
//! The pieces, in the order a step uses them:
//! - [`attention`]: one persona's sub-flow for one stream (state, interest, willingness, the
//!   chance to focus, SPEC §8's formulas), pure and seeded;
//! - [`social`]: the persona's global social state, its limits, its [`Engagement`] (may it
//!   focus unaddressed?), and the [`Attention`] that keeps every sub-flow within them;
//! - [`stream`]: the streams, their lines, and the [`GroupCommand`]s game code sends (open a
//!   channel, post, close), validated as untrusted input;
//! - [`prompts`]: the three model calls — join (yes/no), a casual reply, the focused cycle —
//!   each with its parser and fail-safe;
//! - the heart flow in the ECS (`heart`): streams opened where people gather, hearing, time,
//!   at most one call per free persona per step, landing between steps;
//! - [`talk`]: an arena's talk as a tile event bystanders perceive (its members do not);
//! - [`tools`]: `open_channel` and `post_to_channel`, the director's skills for group talk;
//! - [`save`]: what a save keeps of all this, so a loaded town goes on talking where it
//!   stopped (SPEC §11).
//!
//! ## What a game sees
//!
//! | message | when |
//! | --- | --- |
//! | [`GroupStreamOpened`] / [`GroupStreamClosed`] | a stream opens (people gather, a channel opens) or closes |
//! | [`GroupLineSpoken`] | a line (or an emoji) was said in a stream, by a persona or by game code; also an [`EntityEvent`] on the persona who said it |
//! | [`GroupAttentionChanged`] | a persona's sub-flow moved (`Absent` / `Chat` / `Focused`); also an [`EntityEvent`] on the persona |
//! | [`GroupRefused`] | a [`GroupCommand`] was refused, and why |
//! | [`ModelCallFailed`](crate::cognition::ModelCallFailed) | a group prompt fell back to its fail-safe |
//!
//! ## What talk costs
//!
//! Focused cycles are the calls, so they go where talk is what a persona is there for
//! ([`GroupSettings::focus_needs_social`]): a social action — a meeting, a party, drinks with
//! friends, a meal out — focuses by SPEC §8's draws; anyone else (a walk in the park, a shift
//! at the counter) listens in `Chat` and focuses only to answer a line that named it or that
//! game code or the player said into the stream, at the longer beat of
//! [`GroupSettings::peeking_cycle_every`]. A household at a meal at home is not asked to join
//! its own table's talk until someone speaks to the table
//! ([`GroupSettings::quiet_household_meals`]).
//!
//! ## The player in a group, and thinking with tools
//!
//! The player speaks into a group through the dialogue API:
//! [`DialogueRequest::to_group`](crate::dialogue::DialogueRequest::to_group) says a line to
//! the persona *and everyone in the conversation around it* — a post under the player's name
//! in that arena's stream (validated like every post); whoever it names hears their name, and
//! each listener's attention decides who answers. A persona in no group answers one to one.
//!
//! A focused cycle may look one thing up before it decides
//! ([`GroupSettings::think_with_tools`]): its prompt lists the persona's read-only tools (its
//! [`ToolAllowList`](crate::dialogue::ToolAllowList), or the built-ins); a `use_tool` plan
//! runs the tool in the world with the dialogue's checks and outcome events
//! ([`ToolCalled`](crate::dialogue::ToolCalled) / [`ToolRefused`](crate::dialogue::ToolRefused),
//! the speaker "the group in …"), and the cycle is asked again with what it found.
//!
//! Each persona carries a [`GroupAttention`] (its sub-flows, for an inspector). Lines said
//! are heard by everyone following the stream (and, in an arena, by everyone present), one
//! embedding per line for all of them; each listener remembers what it heard of a stream a
//! **passage** at a time — one chat memory of up to [`GroupSettings::passage_lines`] lines,
//! as Smallville remembers a conversation, not a memory per line (a crowd's talk otherwise
//! stored more memories than everything else the town did, and drained the reflection
//! trigger a line at a time).
//!
//! **One world** (SPEC §16): a passage has an event memory over it (same vector, its
//! description's first 160 characters), which retrieval finds — chat memories are no candidates; a prompt shows first what
//! the persona recalls with the latest lines it heard as focal point
//! ([`GroupSettings::recall_memories`]; the passages of the talk itself left out), so a fact
//! told elsewhere can come up at the table; and when a persona that followed a stream (`Chat`
//! or `Focused`) leaves it — it left the arena, or the stream closed — its next thought stores
//! the planning thought and memo of an after-chat over the last lines it heard there
//! ([`Scratch::group_after_chats`](crate::persona::Scratch::group_after_chats)).
//!
//! ```
//! use bevy::prelude::*;
//! use bevy_generative_agents::group::{GroupCommand, GroupPlugin};
//!
//! fn notice_board(mut commands: MessageWriter<GroupCommand>) {
//!     commands.write(GroupCommand::open_channel("notice board"));
//!     commands.write(GroupCommand::post_to_channel(
//!         "notice board",
//!         "Mayor",
//!         "The summer fair is on Saturday at noon in the square.",
//!     ));
//! }
//! # let _ = notice_board;
//! ```
//!
//! **Layer** (see `tests/layers.rs`): right above [`dialogue`](crate::dialogue).

pub mod attention;
mod heart;
pub mod prompts;
pub mod save;
pub mod social;
pub mod stream;
pub mod talk;
pub mod tools;

pub use attention::{AttentionSettings, Change, ChatState, SubFlow, reply_probability};
pub use heart::{
    GroupAttention, RELEVANCE_MEMORIES, RELEVANT_AT, RELEVANT_FROM, memory_relevance, relevance,
};
pub use social::{Attention, Engagement, Limits, MEAL_WORDS, SocialState, is_meal};
pub use stream::{GroupCommand, GroupLine, GroupStream, GroupStreams, StreamKey};

use bevy::prelude::*;

use crate::clock::{AgentSystems, PollSystems, SimPoll, SimStep};
use crate::dialogue::{DialogueRequest, GroupTalkRouted};

/// Settings of the group conversations.
#[derive(Resource, Reflect, Debug, Clone, PartialEq)]
#[reflect(Resource, Default)]
pub struct GroupSettings {
    /// Whether the heart flow runs (default on).
    pub enabled: bool,
    /// Awake personas in one arena that open a stream (3; at least 2).
    pub min_gathering: usize,
    /// Most members of one arena's stream (12; at least 2): those already in it stay, then
    /// newcomers in entity order. The rest of a crowded arena is not in the conversation and
    /// does not hear it — a chat is a circle, not a stadium, and every member remembers every
    /// line (1,000 personas in one town otherwise filled 23 GB).
    pub max_members: usize,
    /// Lines of the stream a prompt shows (8).
    pub recent_lines: usize,
    /// Poignancy of a passage's memory (2), and of one with a line naming the listener (5).
    pub line_poignancy: u8,
    /// See `line_poignancy`.
    pub named_poignancy: u8,
    /// Most lines of one conversation a listener remembers as one chat memory (8; at least 1):
    /// what it heard of a stream is kept as a **passage** — one memory holding the lines, as
    /// Smallville keeps one chat memory per conversation — stored once it holds this many
    /// lines or its window of the clock ([`Self::passage_seconds`]) ends. 1 stores every line
    /// apart.
    pub passage_lines: usize,
    /// The windows of the clock passages are cut by, in game seconds (300: 09:00–09:05,
    /// 09:05–09:10, …): a stream's last lines reach memory when their window ends, and
    /// everyone who heard the same lines in a window remembers the same passage.
    pub passage_seconds: f32,
    /// Game seconds between two cycles of one focused sub-flow (30): observing, thinking
    /// and planning take a person a moment, and it bounds the spend of a lively stream.
    pub focus_cycle_every: f32,
    /// Game seconds between two cycles of a focused sub-flow while the persona is busy
    /// (PEEKING: working, studying) or not out to talk (its [`Engagement`] is not social, so
    /// it focuses only to answer an address; 120): it glances at the talk between two things
    /// it has to do, four times less often than at leisure — a workplace where the talk never
    /// stops (a shop counter, a class), or walkers who name each other at every line, would
    /// otherwise cost a call every half minute all day. In lean rounds a listening persona
    /// answers on this beat of the clock, so those who address each other share a round.
    pub peeking_cycle_every: f32,
    /// Whether FOCUSED cycles need a social action (on): a persona follows a stream closely
    /// only while its action is social — a meeting, a party, drinks with friends, a meal out
    /// ([`Engagement::of`]) — or to answer a line that named it or that game code or the
    /// player said into the stream (one focused cycle, within
    /// [`AttentionSettings::addressed_focus`] seconds); otherwise it listens (`Chat`), which
    /// calls a model only when a reply draw wins. A morning walk where others
    /// talk was a focused cycle every half minute. Off: everyone focuses by SPEC §8's draws
    /// alone.
    pub focus_needs_social: bool,
    /// Whether a household at a meal at home keeps quiet (on): when everyone in the arena's
    /// conversation lives there (the arena is in the sector of each one's `living_area`) and
    /// a persona's action is a meal ([`is_meal`]), it is not asked to join nor focuses until
    /// someone speaks to the table — a line naming it, or one game code or the player says
    /// into the stream ([`Engagement::AtTable`]). A family's breakfast otherwise ran a focused
    /// cycle per member every half minute: more than half of a morning's prompt tokens.
    pub quiet_household_meals: bool,
    /// Whether a focused cycle may think with the persona's read-only tools (on): one look-up
    /// per cycle at most, costing one more call when it is used.
    pub think_with_tools: bool,
    /// Memories a group prompt recalls (3): those retrieval ranks first with the latest lines
    /// the persona heard of the conversation as focal point (SPEC §16), shown before the
    /// latest things it remembers being said. 0 recalls nothing.
    pub recall_memories: usize,
    /// SPEC §8's constants.
    pub attention: AttentionSettings,
}

impl Default for GroupSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            min_gathering: 3,
            max_members: 12,
            recent_lines: 8,
            line_poignancy: 2,
            named_poignancy: 5,
            passage_lines: 8,
            passage_seconds: 300.0,
            focus_cycle_every: 30.0,
            peeking_cycle_every: 120.0,
            focus_needs_social: true,
            quiet_household_meals: true,
            think_with_tools: true,
            recall_memories: 3,
            attention: AttentionSettings::default(),
        }
    }
}

/// A stream opened.
#[derive(Message, Debug, Clone, PartialEq, Eq)]
pub struct GroupStreamOpened {
    /// Which.
    pub stream: StreamKey,
}

/// A stream closed.
#[derive(Message, Debug, Clone, PartialEq, Eq)]
pub struct GroupStreamClosed {
    /// Which.
    pub stream: StreamKey,
}

/// A line was said in a stream: a [`Message`] always, and an [`EntityEvent`] on the persona
/// who said it when a persona did (SPEC §16's one event convention; a game's post has no
/// persona to aim at, so only the message is written).
#[derive(Message, Debug, Clone, PartialEq, Eq)]
pub struct GroupLineSpoken {
    /// Where.
    pub stream: StreamKey,
    /// Its position in the stream.
    pub seq: u64,
    /// Who said it (a persona's name, or the name game code posted under).
    pub speaker: String,
    /// The persona who said it, if a persona did.
    pub persona: Option<Entity>,
    /// What was said.
    pub text: String,
    /// Whether it is an emoji reply.
    pub emoji: bool,
    /// The game time it was said.
    pub time: chrono::NaiveDateTime,
}

impl Event for GroupLineSpoken {
    type Trigger<'a> = bevy::ecs::event::EntityTrigger;
}

impl EntityEvent for GroupLineSpoken {
    /// The persona who said it (triggered only when a persona did).
    fn event_target(&self) -> Entity {
        self.persona.unwrap_or(Entity::PLACEHOLDER)
    }
}

/// A persona's sub-flow moved: an [`EntityEvent`] on the persona (observers) and a
/// [`Message`] (SPEC §16's one event convention).
#[derive(EntityEvent, Message, Debug, Clone, PartialEq, Eq)]
pub struct GroupAttentionChanged {
    /// The persona.
    #[event_target]
    pub persona: Entity,
    /// Its name.
    pub name: String,
    /// The stream.
    pub stream: StreamKey,
    /// Before.
    pub from: ChatState,
    /// After.
    pub to: ChatState,
}

/// A [`GroupCommand`] was refused.
#[derive(Message, Debug, Clone, PartialEq, Eq)]
pub struct GroupRefused {
    /// Why, for a log or a toast.
    pub why: String,
}

/// Where the group conversations run in a step (other step systems order against it).
#[derive(SystemSet, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GroupSystems {
    /// The heart flow's step (after perception, before thoughts).
    Step,
}

/// Group conversations: the streams, the heart flow each step, calls landed between steps.
#[derive(Debug, Default)]
pub struct GroupPlugin;

impl Plugin for GroupPlugin {
    fn build(&self, app: &mut App) {
        app.register_type::<GroupSettings>()
            .register_type::<Engagement>()
            .init_resource::<GroupSettings>()
            .init_resource::<GroupStreams>()
            .init_resource::<heart::GroupCalls>()
            .init_resource::<heart::LastRounds>()
            .add_message::<GroupCommand>()
            .add_message::<GroupStreamOpened>()
            .add_message::<GroupStreamClosed>()
            .add_message::<GroupLineSpoken>()
            .add_message::<GroupAttentionChanged>()
            .add_message::<GroupRefused>()
            // "To everyone here" from the dialogue API is routed here.
            .add_message::<DialogueRequest>()
            .init_resource::<GroupTalkRouted>();
        tools::register_group_tools(app);
        app.add_systems(
            SimPoll,
            (
                heart::route_group_talk,
                heart::apply_commands,
                heart::land_group_calls,
            )
                .chain()
                .after(PollSystems::LandThoughts)
                .before(PollSystems::SendOutcomes),
        )
        .add_systems(
            SimStep,
            (heart::group_step, talk::show_talks)
                .chain()
                .in_set(GroupSystems::Step)
                .after(AgentSystems::Perceive)
                .before(AgentSystems::Think),
        );
    }
}
