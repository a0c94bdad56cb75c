//! The heart flow in the ECS (SPEC §8): streams open where people gather, each persona's
//! attention follows them, and the few model calls the attention allows run off the main
//! thread.
//!
//! **Every step** (`group_step`, in [`SimStep`] after perception, before thoughts start; minds
//! are home then in Lockstep):
//! 1. *Streams*: an arena where [`GroupSettings::min_gathering`] awake personas (not in a
//!    one-to-one conversation) stand opens a stream; its members are the awake personas there.
//!    Whoever leaves the arena leaves the stream (its sub-flow goes `Absent`); a stream with
//!    fewer than two members closes.
//! 2. *Memories*: what each persona heard of a stream becomes one chat memory a passage at a
//!    time, when the passage is full or its window of the clock has ended, and the mind is
//!    home (`due_passages`) — with an event node over it, which retrieval finds (SPEC §16).
//! 3. *Social state* from the persona's action ([`SocialState::from_activity`]), limits
//!    applied (asleep: every stream left); and its [`Engagement`] (issue 49): only a social
//!    action focuses unaddressed ([`GroupSettings::focus_needs_social`]), and a household at
//!    a meal at home is not even asked to join ([`GroupSettings::quiet_household_meals`]) —
//!    a focused sub-flow it may no longer hold drops to `Chat`.
//! 4. *Hearing*: each new line of another speaker raises interest by its relevance (words the
//!    line shares with who the persona is and what it does) and, when the persona is named,
//!    willingness; a line naming it, or one of game code's, **addresses** it (it may focus
//!    there until a focused cycle answered).
//! 5. *Time*: [`Attention::tick`] over the step's game seconds — decay, idle chats leave,
//!    focus draws (seeded per persona and step), limits, forgetting.
//!    A persona that followed a stream until it left it (the arena, or the stream closed)
//!    queues the conversation's after-chat for its next thought (SPEC §16).
//! 6. *One call at most per persona*, only for a persona that is free (mind home, no thought,
//!    turn or conversation running): a focused stream with new lines runs the FOCUSED cycle
//!    ([`GroupFocus`]) — every [`GroupSettings::focus_cycle_every`] seconds, or
//!    [`GroupSettings::peeking_cycle_every`] for a busy persona or one not out to talk; else a chatting stream whose reply draw wins gets a line
//!    ([`GroupReply`]); else a due join question ([`GroupJoin`]) — a yes joins and speaks an
//!    opening line. Its prompt shows what it recalls with the talk's latest lines as focal
//!    point, then the latest things it remembers being said. The persona is
//!    [`AwaitingCognition`] while the call runs: it starts no
//!    thought, a Lockstep clock waits for it, and Smallville's one-to-one conversation never
//!    runs for it at the same time.
//!
//! **Between steps** (`land_group_calls`, in [`SimPoll`]): finished calls land — lines are said
//! into their stream, the sub-flows move (`spoke`, `no_reply`, joined), and the outcome
//! messages go out. A line's embedding is computed in the same task, so every listener's
//! passage holding it costs one embedding for all of them (a passage's vector is its lines'
//! mean).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::sync::Arc;

use bevy::prelude::*;
use bevy::tasks::Task;
use bevy::utils::Parallel;
use chrono::NaiveDateTime;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::clock::{AwaitingCognition, Held, SimClock, poll_landing, spawn_landing};
use crate::cognition::ModelCallFailed;
use crate::dialogue::prompts::truncate_chars;
use crate::dialogue::{
    DialogueMode, DialogueRequest, RefusalReason, ToolAllowList, ToolRegistry, run_read_only_tool,
};
use crate::llm::{EMBED_KIND, LlmClient};
use crate::memory::{ChatLine, NewMemory};
use crate::persona::{
    ChattingWith, GroupAfterChat, Mind, MindState, PERSONA_BATCHES, Persona, Scratch, name_hash,
};
use crate::prompt::{
    FailureLog, FailureReason, ModelFailure, PromptContext, PromptLibrary, run_prompt,
};
use crate::settings::AgentSettings;

use super::attention::{Change, ChatState, SubFlow};
use super::prompts::{
    FocusPlan, GroupFocus, GroupJoin, GroupReply, GroupRound, GroupScene, OfferedTool, RoundPlan,
    RoundSeat,
};
use super::social::{Attention, Engagement, SocialState, is_meal};
use super::stream::{
    GroupCommand, GroupLine, GroupStreams, StreamKey, check_channel_name, check_post, check_speaker,
};
use super::{
    GroupAttentionChanged, GroupLineSpoken, GroupRefused, GroupSettings, GroupStreamClosed,
    GroupStreamOpened,
};

/// A persona's attention to group conversations: its sub-flows and what it has heard.
#[derive(Component, Debug, Clone, Default)]
pub struct GroupAttention {
    /// The sub-flows and the social state.
    pub attention: Attention<StreamKey>,
    /// The last line of each stream the persona has heard.
    pub seen: BTreeMap<StreamKey, u64>,
    /// For each focused stream: the last line the persona's previous cycle observed, and the
    /// step from which the next cycle may run.
    pub cycles: BTreeMap<StreamKey, (u64, u64)>,
    /// Lines heard but not yet stored: their passage is still open, or the mind was out.
    pub(super) pending: Vec<PendingMemory>,
    /// The activity the social state was last read from, that state, and whether the activity
    /// is a meal (an action lasts many steps; reading the words of its description again each
    /// step is wasted).
    social_of: Option<(String, SocialState, bool)>,
    /// Lean mode: per focused stream, the line the last round planned for the persona's next
    /// cycle (see [`PlannedLine`]).
    pub(super) planned: BTreeMap<StreamKey, PlannedLine>,
    /// The words of who the persona is and what it does, and what they were read from (its
    /// identity changes daily and its action every few minutes, but it hears lines every step
    /// of a gathering).
    words_of: PersonaWords,
}

/// [`persona_words`] of an identity and an activity, kept with them. The default — no words,
/// of an empty identity and activity — is itself such a triple.
#[derive(Debug, Clone, Default)]
struct PersonaWords {
    identity: String,
    activity: String,
    words: BTreeSet<String>,
}

/// Reads the persona's [`persona_words`] into `cache` unless it holds those of this identity
/// and activity already.
fn refresh_words(cache: &mut PersonaWords, identity: &str, activity: &str) {
    if cache.identity != identity || cache.activity != activity {
        *cache = PersonaWords {
            identity: identity.to_owned(),
            activity: activity.to_owned(),
            words: persona_words(identity, activity),
        };
    }
}

/// A line a lean round planned for a seat's next cycle (and the one for the cycle after): said
/// then without a call if the talk went about as the round expected and the cycle comes within
/// two beats; otherwise dropped, and the cycle sits in a new round. Lines from the round's own seats are the exchange it
/// planned; a line from anyone else may pass (a group talks over itself), unless it names
/// the persona — that deserves a real answer — or [`MAX_INTERJECTIONS`] such lines came.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct PlannedLine {
    /// The line, with its memory's embedding (made with the round's).
    pub(super) said: Said,
    /// The lines planned for the cycles after, in order (each checked the same way then).
    pub(super) later: Vec<Said>,
    /// The stream's last line when the round was asked.
    pub(super) after: u64,
    /// The round's seats.
    pub(super) seats: Vec<Entity>,
    /// The last step at which it may be said.
    pub(super) until: u64,
}

/// Beats a join question waits for its stream's next round after the last one (rounds come
/// every two or three beats while the talk goes as planned; the join question of one who
/// declines waits a minute anyway, `AttentionSettings::join_every`).
const JOIN_WAIT_BEATS: u64 = 4;

/// Most lines from outside a round that its planned lines outlive (see [`PlannedLine`]).
const MAX_INTERJECTIONS: usize = 2;

impl PlannedLine {
    /// Whether the talk in `stream` went about as the round expected, at `step`, for the
    /// persona `name` (`first_name`).
    fn still_fits(
        &self,
        stream: &super::stream::GroupStream,
        step: u64,
        name: &str,
        first_name: &str,
    ) -> bool {
        let mut interjections = stream
            .lines_after(self.after)
            .filter(|line| !line.persona.is_some_and(|p| self.seats.contains(&p)));
        step <= self.until
            && interjections
                .by_ref()
                .take(MAX_INTERJECTIONS + 1)
                .enumerate()
                .all(|(i, line)| i < MAX_INTERJECTIONS && !names(&line.text, name, first_name))
    }
}

impl GroupAttention {
    /// The social state for `activity` (awake) and whether it is a meal ([`is_meal`]), from
    /// the last step's when it is unchanged.
    fn social_for(&mut self, activity: &str) -> (SocialState, bool) {
        match &self.social_of {
            Some((last, social, meal)) if last == activity => (*social, *meal),
            _ => {
                let social = SocialState::from_activity(false, activity);
                let meal = is_meal(activity);
                self.social_of = Some((activity.to_owned(), social, meal));
                (social, meal)
            }
        }
    }
}

/// A heard line on its way into a listener's memory.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct PendingMemory {
    /// What everyone who heard it remembers alike (one copy, however many heard it).
    pub(super) heard: Arc<HeardLine>,
    /// Whether the line names this listener.
    pub(super) named: bool,
}

/// A line as every listener remembers it.
#[derive(Debug, PartialEq)]
pub(super) struct HeardLine {
    pub(super) time: NaiveDateTime,
    pub(super) speaker: String,
    /// The speaker's name as a keyword.
    pub(super) speaker_keyword: String,
    pub(super) line: String,
    /// The memory's object: `the group in <place>`.
    pub(super) object: String,
    pub(super) description: String,
    pub(super) embedding: Vec<f32>,
}

/// A line a call produced, with the embedding of its memory description.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Said {
    pub(super) text: String,
    pub(super) emoji: bool,
    pub(super) description: String,
    pub(super) embedding: Option<Vec<f32>>,
}

/// What a call came back with.
#[derive(Debug)]
enum Landed {
    /// The join question: yes/no, and the opening line after a yes.
    Joined { yes: bool, said: Option<Said> },
    /// A casual reply (or silence).
    Replied(Option<Said>),
    /// A focused cycle: a line or emoji, or `no_reply`.
    Focused(Option<Said>),
    /// A lean round's seat: as `Focused`, and the line planned for its next cycle. Staying
    /// quiet counts as planning `no_reply` only when the whole table was quiet (the round asks
    /// that only one or two speak; the rest are listening) and the seat's cycle was due (a
    /// listener seated only to plan its answer decided nothing).
    Round {
        said: Option<Said>,
        then: Option<Box<PlannedLine>>,
        quiet_counts: bool,
    },
    /// A focused cycle that wants to look something up first: the tool runs in the world,
    /// then the cycle is asked again.
    LookUp(Box<LookUp>),
    /// A post from game code, embedded for the listeners' memories.
    Posted {
        seq: u64,
        embedding: Option<Vec<f32>>,
    },
}

/// A focused cycle's look-up, waiting for the world to run the tool.
#[derive(Debug)]
struct LookUp {
    tool: String,
    args: serde_json::Map<String, serde_json::Value>,
    focus: GroupFocus,
    ctx: PromptContext,
}

struct Call {
    persona: Option<Entity>,
    name: String,
    stream: StreamKey,
    place: String,
    failures: FailureLog,
    task: Task<Landed>,
    /// The answer, once the task finished (it may wait for earlier calls to land).
    done: Option<Landed>,
    /// For a call of no persona (a game's post being embedded): an entity
    /// [`AwaitingCognition`] until it lands, so a Lockstep clock waits for it as for a
    /// persona's call and the line reaches its listeners at the same step on every run.
    waiter: Option<Entity>,
}

impl Call {
    /// `someone`'s call in the stream `key`.
    fn of(someone: &Someone, key: &StreamKey, failures: FailureLog, task: Task<Landed>) -> Self {
        Self {
            persona: Some(someone.entity),
            name: someone.name.clone(),
            stream: key.clone(),
            place: place_of(key),
            failures,
            task,
            done: None,
            waiter: None,
        }
    }
}

/// Lean rounds: the step of each open stream's last round (a join question waits for the next
/// one, see [`JOIN_WAIT_BEATS`]).
#[derive(Resource, Default)]
pub(super) struct LastRounds(pub(super) BTreeMap<StreamKey, u64>);

/// Calls in flight.
#[derive(Resource, Default)]
pub(super) struct GroupCalls(Vec<Call>);

impl GroupCalls {
    /// Calls in flight (or finished and waiting for an earlier one to land).
    pub(super) fn len(&self) -> usize {
        self.0.len()
    }
}

/// Drops every group call in flight (cancelling it) and the waiters of the calls of no
/// persona: a load replaces them (see `save::restore`).
pub(super) fn drop_calls(world: &mut World) {
    let calls = world.remove_resource::<GroupCalls>().unwrap_or_default();
    for waiter in calls.0.iter().filter_map(|call| call.waiter) {
        if let Ok(entity) = world.get_entity_mut(waiter) {
            entity.despawn();
        }
    }
    world.insert_resource(GroupCalls::default());
}

/// `DialogueRequest::to_group` (the player's "to everyone here"): a post under the speaker's
/// name into the arena stream the persona stands in, validated like any post; with no such
/// stream the persona answers it one to one (a `Say`, next frame).
pub(super) fn route_group_talk(
    mut requests: MessageReader<DialogueRequest>,
    streams: Res<GroupStreams>,
    mut posts: MessageWriter<GroupCommand>,
    mut commands: Commands,
) {
    for request in requests.read() {
        let DialogueMode::ToGroup(text) = &request.mode else {
            continue;
        };
        match streams.arena_stream_of(request.persona) {
            Some(stream) => {
                posts.write(GroupCommand::Post {
                    stream: stream.key.clone(),
                    speaker: request.speaker.clone(),
                    text: text.clone(),
                });
            }
            None => {
                commands.write_message(DialogueRequest::say(
                    request.persona,
                    request.speaker.clone(),
                    text.clone(),
                ));
            }
        }
    }
}

/// Game code's commands since the last step.
#[expect(
    clippy::too_many_arguments,
    reason = "a system: one writer per outcome message"
)]
pub(super) fn apply_commands(
    mut commands: MessageReader<GroupCommand>,
    mut streams: ResMut<GroupStreams>,
    mut calls: ResMut<GroupCalls>,
    mut ecs: Commands,
    clock: Option<Res<SimClock>>,
    client: Option<Res<LlmClient>>,
    mut opened: MessageWriter<GroupStreamOpened>,
    mut closed: MessageWriter<GroupStreamClosed>,
    mut spoken: MessageWriter<GroupLineSpoken>,
    mut refused: MessageWriter<GroupRefused>,
) {
    let now = clock.as_ref().map(|c| c.now()).unwrap_or_default();
    let step = clock.as_ref().map_or(0, |c| c.step());
    for command in commands.read() {
        let result = match command {
            GroupCommand::OpenChannel { name, members } => {
                streams.open_channel(name, members, now).map(|key| {
                    if let Some(stream) = key {
                        opened.write(GroupStreamOpened { stream });
                    }
                })
            }
            GroupCommand::CloseChannel { name } => check_channel_name(name).and_then(|name| {
                let key = StreamKey::Channel(name);
                streams
                    .close(&key)
                    .map(|_| {
                        closed.write(GroupStreamClosed { stream: key });
                    })
                    .ok_or_else(|| "no such channel".to_string())
            }),
            GroupCommand::Post {
                stream,
                speaker,
                text,
            } => check_speaker(speaker).and_then(|speaker| {
                let text = check_post(text)?;
                let seq = streams
                    .say(stream, &speaker, None, &text, false, now)
                    .ok_or_else(|| format!("the stream {stream} is not open"))?;
                spoken.write(GroupLineSpoken {
                    stream: stream.clone(),
                    seq,
                    speaker: speaker.clone(),
                    persona: None,
                    text: text.clone(),
                    emoji: false,
                    time: now,
                });
                if let Some(client) = &client {
                    streams.await_embedding(stream, seq);
                    let place = place_of(stream);
                    let description = memory_description(&speaker, &place, &text);
                    let client: LlmClient = LlmClient::clone(client);
                    let embed_text = description.clone();
                    let waiter = ecs
                        .spawn((Name::new("group post"), AwaitingCognition::new(step)))
                        .id();
                    calls.0.push(Call {
                        persona: None,
                        name: speaker,
                        stream: stream.clone(),
                        place,
                        failures: FailureLog::default(),
                        done: None,
                        waiter: Some(waiter),
                        task: spawn_landing(async move {
                            Landed::Posted {
                                seq,
                                embedding: client.embed_one(embed_text).await.ok(),
                            }
                        }),
                    });
                }
                Ok(())
            }),
        };
        if let Err(why) = result {
            refused.write(GroupRefused { why });
        }
    }
}

/// Where a stream's talk is, for prompts and memories.
fn place_of(key: &StreamKey) -> String {
    match key {
        StreamKey::Arena(_) => format!("the {}", key.label()),
        StreamKey::Channel(name) => format!("the #{name} channel"),
    }
}

/// How a group's memories and tool calls name it: `the group in <place>` (a memory's object,
/// a tool call's speaker). [`place_in_group`] reads the place back.
fn group_in(place: &str) -> String {
    format!("{GROUP_IN}{place}")
}

/// The place of a name [`group_in`] made, if `name` is one.
fn place_in_group(name: &str) -> Option<&str> {
    name.strip_prefix(GROUP_IN)
}

const GROUP_IN: &str = "the group in ";

/// What a follower remembers of a line.
fn memory_description(speaker: &str, place: &str, text: &str) -> String {
    format!("{speaker} said in {place}: \"{text}\"")
}

/// Whether `text` names `first_name` or `name` as a whole word (any case).
fn names(text: &str, name: &str, first_name: &str) -> bool {
    names_lowercased(&text.to_lowercase(), name, first_name)
}

/// [`names`] of a text already lowercased (a line heard by many is lowercased once).
fn names_lowercased(lower: &str, name: &str, first_name: &str) -> bool {
    LoweredName::of(name, first_name).named_in(lower)
}

/// A listener's name and first name lowercased once, for the lines it hears.
struct LoweredName {
    name: String,
    first: String,
}

impl LoweredName {
    fn of(name: &str, first_name: &str) -> Self {
        Self {
            name: name.to_lowercase(),
            first: first_name.to_lowercase(),
        }
    }

    /// Whether the lowercased `lower` names the first name as a whole word, or the name.
    fn named_in(&self, lower: &str) -> bool {
        (!self.first.is_empty()
            && lower
                .split(|c: char| !c.is_alphanumeric())
                .any(|w| w == self.first))
            || (!self.name.is_empty() && lower.contains(&self.name))
    }
}

/// Content words (4+ letters, lowercased) of `text`.
fn content_words(text: &str) -> BTreeSet<String> {
    words_of(text).map(str::to_lowercase).collect()
}

/// The words of `text` with 4+ letters, as written.
fn words_of(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().count() >= 4)
}

/// A line's relevance to a persona, 0–1: a base for hearing it at all, plus the words it
/// shares with who the persona is and what it does (three shared words is fully relevant).
pub fn relevance(line: &str, persona_words: &BTreeSet<String>) -> f32 {
    (0.25 + shared_words(line, persona_words) as f32 / 3.0).min(1.0)
}

/// The latest memories (events and thoughts, newest first) a heard line is weighed against.
pub const RELEVANCE_MEMORIES: usize = 30;
/// Cosine similarity at which a line starts to count as relevant to a memory (unrelated
/// sentences sit below it).
pub const RELEVANT_FROM: f32 = 0.2;
/// Cosine similarity at which a line is fully relevant (two sentences about one thing).
pub const RELEVANT_AT: f32 = 0.6;

/// A line's relevance to a persona's memories, 0–1 (SPEC §8, §16): a base of 0.25 for hearing
/// it at all, plus how close its embedding comes to the closest of `memories` (the persona's
/// latest, see [`RELEVANCE_MEMORIES`]) — cosine similarity from [`RELEVANT_FROM`] (nothing
/// added) to [`RELEVANT_AT`] (fully relevant). `None` when nothing can be compared (no
/// memories, an empty or mismatched vector): the caller weighs the words instead.
pub fn memory_relevance<'a>(
    line: &[f32],
    memories: impl IntoIterator<Item = &'a [f32]>,
) -> Option<f32> {
    let norm = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
    let line_norm = norm(line);
    if line_norm == 0.0 || !line_norm.is_finite() {
        return None;
    }
    let best = memories
        .into_iter()
        .filter(|m| m.len() == line.len())
        .filter_map(|m| {
            let m_norm = norm(m);
            (m_norm > 0.0 && m_norm.is_finite())
                .then(|| line.iter().zip(m).map(|(a, b)| a * b).sum::<f32>() / (line_norm * m_norm))
        })
        .fold(None, |best: Option<f32>, c| {
            Some(best.map_or(c, |b| b.max(c)))
        })?;
    let closeness = ((best - RELEVANT_FROM) / (RELEVANT_AT - RELEVANT_FROM)).clamp(0.0, 1.0);
    Some((0.25 + 0.75 * closeness).min(1.0))
}

/// The embeddings of the persona's latest [`RELEVANCE_MEMORIES`] events and thoughts, not
/// counting its memories of group talk itself: a conversation's own echo would make every
/// further line of it relevant (interest would only ever rise).
fn latest_memory_vectors(memory: &crate::memory::AssociativeMemory) -> Vec<&[f32]> {
    memory
        .nodes()
        .iter()
        .rev()
        .filter(|node| {
            node.kind != crate::memory::NodeKind::Chat && place_in_group(&node.object).is_none()
        })
        .filter_map(|node| memory.embedding(&node.embedding_key))
        .take(RELEVANCE_MEMORIES)
        .collect()
}

/// How many distinct [`content_words`] of `line` are among `persona_words` — without
/// building the line's set: every line a crowd says is weighed by each of its listeners.
fn shared_words(line: &str, persona_words: &BTreeSet<String>) -> usize {
    let mut shared: Vec<&str> = Vec::new();
    let mut lower = String::new();
    for word in words_of(line) {
        lower.clear();
        if word.is_ascii() {
            lower.extend(word.bytes().map(|b| char::from(b.to_ascii_lowercase())));
        } else {
            lower.push_str(&word.to_lowercase());
        }
        if let Some(known) = persona_words.get(lower.as_str())
            && !shared.contains(&known.as_str())
        {
            shared.push(known);
        }
    }
    shared.len()
}

/// The per-persona, per-step random stream of the heart flow: seeded by name and step only,
/// so it does not depend on iteration order, timing or other personas.
fn heart_rng(name: &str, step: u64) -> ChaCha8Rng {
    let hash = name.bytes().fold(0x84_22_23_25_cb_f2_9c_e4u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    ChaCha8Rng::seed_from_u64(hash ^ step.wrapping_mul(0xd6e8_feb8_6659_fd93) ^ 0x0068_6561_7274)
}

/// What the step knows about one persona. Only what every persona needs each step is read
/// up front; the words of who it is (for hearing) and its identity and recent chats (for a
/// prompt) are read from its mind when a line reaches it or a call starts — most personas,
/// most steps, are in no stream and hear nothing.
struct Someone {
    entity: Entity,
    name: String,
    first_name: String,
    arena: String,
    /// The `world:sector` of its `living_area` (empty when it has none): where it is at home.
    home: String,
    asleep: bool,
    activity: String,
    /// In a one-to-one conversation.
    chatting: bool,
    /// Mind home and no work running: may start a call.
    free: bool,
}

/// Who a persona is and what it remembers of recent chats, for a prompt.
#[derive(Default)]
struct Details {
    identity: String,
    memories: Vec<String>,
}

/// The persona's identity and the three latest things it remembers being said (its mind is
/// home: `gather` only lists such personas).
fn details(world: &World, someone: &Someone) -> Details {
    details_of(world.get::<Mind>(someone.entity).and_then(Mind::get))
}

/// [`details`] of a mind (none when it is out).
fn details_of(state: Option<&MindState>) -> Details {
    state
        .map(|state| Details {
            identity: state.scratch.identity_summary(),
            memories: latest_said(&state.associative, 3),
        })
        .unwrap_or_default()
}

/// The `n` latest things remembered being said, newest first: each line of a group passage
/// as a memory of that one line reads (`<speaker> said in <place>: "<line>"`), any other chat
/// memory by its description — a prompt shows three lines, not three passages of eight.
fn latest_said(memory: &crate::memory::AssociativeMemory, n: usize) -> Vec<String> {
    let mut said = Vec::with_capacity(n);
    for node in memory.chats() {
        if said.len() >= n {
            break;
        }
        let lines = node.filling.chat_lines();
        match place_in_group(&node.object) {
            Some(place) if lines.len() > 1 => {
                for line in lines.iter().rev().take(n - said.len()) {
                    said.push(memory_description(&line.speaker, place, &line.line));
                }
            }
            _ => said.push(node.description.clone()),
        }
    }
    said
}

/// Most lines of a group conversation its after-chat thinks over (the last ones).
const AFTER_CHAT_LINES: usize = Scratch::MAX_GROUP_AFTER_CHAT_LINES;

/// The after-chat a persona leaving the conversation `key` has due (SPEC §16): the last lines
/// it heard or said there — its latest passages of it, then the lines not remembered yet — and
/// who else spoke; `None` when it heard nothing of it.
fn group_after_chat(
    state: &MindState,
    group: &GroupAttention,
    key: &StreamKey,
) -> Option<GroupAfterChat> {
    let object = group_in(&place_of(key));
    let mut lines: Vec<(String, String)> = group
        .pending
        .iter()
        .filter(|p| p.heard.object == object)
        .map(|p| (p.heard.speaker.clone(), p.heard.line.clone()))
        .collect();
    for node in state.associative.chats().filter(|n| n.object == object) {
        if lines.len() >= AFTER_CHAT_LINES {
            break;
        }
        let said = node.filling.chat_lines();
        let earlier = said
            .iter()
            .map(|l| (l.speaker.clone(), l.line.clone()))
            .collect::<Vec<_>>();
        lines.splice(0..0, earlier);
    }
    if lines.is_empty() {
        return None;
    }
    let lines = lines.split_off(lines.len().saturating_sub(AFTER_CHAT_LINES));
    let mut others: Vec<&str> = Vec::new();
    for (speaker, _) in &lines {
        if *speaker != state.scratch.name && !others.contains(&speaker.as_str()) {
            others.push(speaker);
        }
    }
    let partner = if others.is_empty() {
        place_of(key)
    } else {
        crate::cognition::vocabulary::names_list(&others)
    };
    Some(GroupAfterChat {
        partner,
        object,
        lines,
    })
}

/// How many lines of a conversation the focal point of a group prompt's recall is made of.
const RECALL_FOCAL_LINES: usize = 3;

/// What a persona (`state`) recalls for a prompt about `key` (SPEC §16): the memories retrieval ranks
/// first with the latest lines it heard of that conversation as focal point — the mean of
/// their vectors, from the lines it has not remembered yet or else its latest passage of the
/// conversation — leaving out the passages of the conversation itself (the prompt shows its
/// lines). Read without marking anything accessed. At most `n` descriptions; none when the
/// persona heard nothing of it yet or its mind is out.
fn recall(
    state: Option<&MindState>,
    group: Option<&GroupAttention>,
    key: &StreamKey,
    now: NaiveDateTime,
    n: usize,
    agent: &AgentSettings,
) -> Vec<String> {
    let Some(state) = state.filter(|_| n > 0) else {
        return Vec::new();
    };
    let memory = &state.associative;
    let object = group_in(&place_of(key));
    let heard: Vec<&[f32]> = group
        .map(|g| {
            g.pending
                .iter()
                .rev()
                .filter(|p| p.heard.object == object)
                .take(RECALL_FOCAL_LINES)
                .map(|p| p.heard.embedding.as_slice())
                .collect()
        })
        .unwrap_or_default();
    let heard = if heard.is_empty() {
        memory
            .chats()
            .find(|node| node.object == object)
            .and_then(|node| memory.embedding(&node.embedding_key))
            .into_iter()
            .collect()
    } else {
        heard
    };
    let dim = memory.embeddings().dim();
    let heard: Vec<&[f32]> = heard.into_iter().filter(|v| v.len() == dim).collect();
    if heard.is_empty() {
        return Vec::new();
    }
    let mut focal = vec![0.0f32; dim];
    for vector in &heard {
        for (sum, x) in focal.iter_mut().zip(vector.iter()) {
            *sum += x;
        }
    }
    let params = crate::cognition::vocabulary::retrieval_params(state, agent);
    // Room for the conversation's own passages, which are left out.
    let wanted = n + RECALL_FOCAL_LINES * 2;
    let Ok(ids) = crate::memory::retrieve_unmarked(memory, &focal, now, wanted, &params) else {
        return Vec::new();
    };
    ids.into_iter()
        .filter_map(|id| memory.node(id))
        .filter(|node| node.object != object)
        .map(|node| node.description.clone())
        .take(n)
        .collect()
}

/// `details` with `recalled` memories first, then the latest things remembered being said
/// that are not among them.
fn with_recall(mut details: Details, recalled: Vec<String>) -> Details {
    if recalled.is_empty() {
        return details;
    }
    let mut memories = recalled;
    for said in details.memories {
        if !memories.contains(&said) {
            memories.push(said);
        }
    }
    details.memories = memories;
    details
}

/// Whether a persona's place is a whole arena (`world:sector:arena`): outdoors its address is
/// shorter, and people passing each other in the street hold no group conversation.
fn is_arena(address: &str) -> bool {
    let mut parts = address.split(':');
    parts
        .by_ref()
        .take(3)
        .filter(|p| !p.trim().is_empty())
        .count()
        == 3
}

/// The `world:sector` part of an address (`world:sector:arena…`), when it has both.
fn sector_of(address: &str) -> Option<&str> {
    let mut parts = address.splitn(3, ':');
    let world = parts.next().filter(|p| !p.trim().is_empty())?;
    let sector = parts.next().filter(|p| !p.trim().is_empty())?;
    address.get(..world.len() + 1 + sector.len())
}

/// Whether `someone` stands in its home's sector.
fn at_home(someone: &Someone) -> bool {
    !someone.home.is_empty() && sector_of(&someone.arena) == Some(someone.home.as_str())
}

/// The content words of who the persona is and what it does: what makes a line relevant.
fn persona_words(identity: &str, activity: &str) -> BTreeSet<String> {
    let mut words = content_words(identity);
    words.extend(content_words(activity));
    words
}

/// The step a focused cycle comes due again: a beat (`every` steps) later, or in rounds on
/// the clock's next beat, so a stream's focused personas fall due together.
fn next_cycle(step: u64, every: u64, on_the_beat: bool) -> u64 {
    if on_the_beat {
        (step / every + 1) * every
    } else {
        step + every
    }
}

/// One step of the heart flow (see the module docs).
pub(super) fn group_step(world: &mut World) {
    let settings = world
        .get_resource::<GroupSettings>()
        .cloned()
        .unwrap_or_default();
    if !settings.enabled {
        return;
    }
    let Some((now, step, secs)) = world
        .get_resource::<SimClock>()
        .map(|c| (c.now(), c.step(), c.sec_per_step() as f32))
    else {
        return;
    };
    let people = gather(world);
    let mut changes: Vec<GroupAttentionChanged> = Vec::new();
    let mut opened = Vec::new();
    let mut closed = Vec::new();

    // 1. Streams.
    let mut by_arena: BTreeMap<&str, Vec<&Someone>> = BTreeMap::new();
    for someone in &people {
        if !someone.asleep && !someone.chatting && is_arena(&someone.arena) {
            by_arena.entry(&someone.arena).or_default().push(someone);
        }
    }
    {
        let mut streams = world.resource_mut::<GroupStreams>();
        for (arena, present) in &by_arena {
            let key = StreamKey::Arena((*arena).to_string());
            if present.len() >= settings.min_gathering.max(2) && streams.open(key.clone(), now) {
                opened.push(key);
            }
        }
        for key in streams.arena_keys() {
            let StreamKey::Arena(arena) = &key else {
                continue;
            };
            let present: Vec<Entity> = by_arena
                .get(arena.as_str())
                .map(|p| p.iter().map(|s| s.entity).collect())
                .unwrap_or_default();
            if present.len() < 2 {
                streams.close(&key);
                closed.push(key);
            } else if let Some(stream) = streams.get_mut(&key) {
                stream.members = circle(&stream.members, &present, settings.max_members);
            }
        }
    }

    // 2–6, persona by persona (in entity order; each draws from its own stream).
    let library = world.get_resource::<PromptLibrary>().cloned();
    let client = world.get_resource::<LlmClient>().cloned();
    let agent = world
        .get_resource::<AgentSettings>()
        .cloned()
        .unwrap_or_default();
    let retries = agent.prompt_retries;
    // A persona's prompt context for one call, and the log that hears its failures (none
    // without a client).
    let context_for = |someone: &Someone| {
        let (client, library) = (client.clone()?, library.clone()?);
        let failures = FailureLog::default();
        let ctx = PromptContext::new(client, library)
            .with_retries(retries)
            .with_affinity(&someone.name)
            .with_failure_log(failures.clone());
        Some((ctx, failures))
    };
    let rounds_on = world
        .get_resource::<AgentSettings>()
        .is_some_and(|s| s.lean.group_rounds);
    // The streams are read-only from here on: lent out of the world for the loop (no copy;
    // the scope puts them back, change ticks and all, even if the loop unwinds).
    let names_by_entity: BTreeMap<Entity, &str> =
        people.iter().map(|p| (p.entity, p.name.as_str())).collect();
    let mut starts: Vec<(Entity, Call)> = Vec::new();
    let mut rounds: BTreeMap<StreamKey, PendingRound> = BTreeMap::new();
    // Lean rounds: per stream, its focused personas with nothing new to answer (their index
    // in `people`, the last line they looked at), and who has been seated as one.
    let mut listeners: BTreeMap<StreamKey, Vec<(usize, u64)>> = BTreeMap::new();
    let mut seated: BTreeSet<Entity> = BTreeSet::new();
    // Lean rounds: join questions, asked in their stream's round (see below).
    let mut joiners: Vec<(usize, StreamKey)> = Vec::new();
    // A focused cycle comes due again a beat later; in rounds the cycles keep the clock's
    // beat, so a stream's focused personas fall due together.
    let beat = |every: f32| (every / secs.max(1.0)).ceil().max(1.0) as u64;
    let every = beat(settings.focus_cycle_every);
    // A busy (PEEKING) persona's cycles keep a longer beat — a whole number of `every`, so in
    // rounds they still fall on its stream's beat.
    let peek_every = beat(settings.peeking_cycle_every).div_ceil(every).max(1) * every;
    // The last step at which a line a round plans this step may be said.
    let plan_until = step + 2 * every;
    let next_cycle = |on_the_beat: bool| next_cycle(step, every, on_the_beat);
    // 2. Memories, when the mind is home: each persona stores only its own heard lines, so
    // all of them at once, before the persona-by-persona loop. A prompt this step sees the
    // chats from before them (read first, only for those with something to store).
    let mut details_before = flush_all_memories(world, &people, &settings, now);
    // The arena conversations held by a household at home: every member lives there.
    let households: BTreeSet<StreamKey> = if settings.quiet_household_meals {
        let home_of: HashMap<Entity, &str> =
            people.iter().map(|p| (p.entity, p.home.as_str())).collect();
        world
            .get_resource::<GroupStreams>()
            .into_iter()
            .flat_map(GroupStreams::iter)
            .filter(|stream| {
                let StreamKey::Arena(arena) = &stream.key else {
                    return false;
                };
                let Some(sector) = sector_of(arena) else {
                    return false;
                };
                !stream.members.is_empty()
                    && stream
                        .members
                        .iter()
                        .all(|m| home_of.get(m).is_some_and(|home| *home == sector))
            })
            .map(|stream| stream.key.clone())
            .collect()
    } else {
        BTreeSet::new()
    };
    let lent = world.try_resource_scope(|world, streams: Mut<GroupStreams>| {
        let streams: &GroupStreams = &streams;
        let reach = Reach::of(streams);
        let cx = HearingContext {
            streams,
            reach: &reach,
            opened: &opened,
            settings: &settings,
            step,
            secs,
            rounds_on,
            every,
            peek_every,
            households: &households,
        };
        let mut hearings = hear_everyone(world, &people, &mut details_before, &cx);
        for (index, someone) in people.iter().enumerate() {
            let Some(Hearing {
                mut group,
                moved,
                mut details_now,
                observed,
                call,
                looked_before,
                listening,
            }) = hearings.get_mut(index).and_then(Option::take)
            else {
                continue;
            };
            for (key, looked) in listening {
                listeners.entry(key).or_default().push((index, looked));
            }
            // In rounds the join question waits for its stream's round.
            let call = match call {
                Some((CallKind::Join, key)) if rounds_on => {
                    joiners.push((index, key));
                    None
                }
                call => call,
            };
            if let Some((kind, key)) = call
                && let Some(stream) = streams.get(&key)
                && let Some((ctx, failures)) = context_for(someone)
            {
                let details = details_now
                    .take()
                    .unwrap_or_else(|| details(world, someone));
                let recalled = recall(
                    world.get::<Mind>(someone.entity).and_then(Mind::get),
                    Some(&group),
                    &key,
                    now,
                    settings.recall_memories,
                    &agent,
                );
                let details = with_recall(details, recalled);
                let scene = scene_in(stream, someone, details, &names_by_entity, &settings, step);
                let new_lines = observed;
                let tools = if kind == CallKind::Focus && settings.think_with_tools {
                    offered_tools(world, someone.entity)
                } else {
                    Vec::new()
                };
                let planned = group.planned.remove(&key).filter(|line| {
                    line.still_fits(stream, step, &someone.name, &someone.first_name)
                });
                let task = if kind == CallKind::Focus
                    && rounds_on
                    && let Some(line) = planned
                {
                    let PlannedLine {
                        said,
                        mut later,
                        after,
                        seats,
                        ..
                    } = line;
                    if !later.is_empty() {
                        let next = PlannedLine {
                            said: later.remove(0),
                            later,
                            after,
                            seats,
                            until: plan_until,
                        };
                        group.planned.insert(key.clone(), next);
                    }
                    say_planned(said)
                } else if kind == CallKind::Focus && rounds_on {
                    let seat = Seat {
                        persona: someone.entity,
                        scene,
                        looked: looked_before,
                        until: plan_until,
                        role: SeatRole::Focused,
                    };
                    seat_in_round(&mut rounds, &key, ctx, seat, step)
                } else {
                    spawn_call(kind, ctx, scene, new_lines, tools)
                };
                starts.push((someone.entity, Call::of(someone, &key, failures, task)));
            }
            let mut left = Vec::new();
            for (stream, Change::Moved { from, to }) in moved {
                if from != to {
                    // It followed the talk until it left it (the arena, or the stream closed):
                    // its conversation is over. Losing interest while still there is not.
                    if to == ChatState::Absent
                        && !streams
                            .get(&stream)
                            .is_some_and(|s| s.reaches(someone.entity))
                    {
                        left.push(stream.clone());
                    }
                    changes.push(GroupAttentionChanged {
                        persona: someone.entity,
                        name: someone.name.clone(),
                        stream,
                        from,
                        to,
                    });
                }
            }
            // A conversation the persona followed and left: its next thought stores what the
            // talk means for its plans and what it found memorable (SPEC §16). Its mind is home
            // at the step in Lockstep; one out (a thought under way at full speed) lets it go.
            if !left.is_empty()
                && let Some(mut mind) = world.get_mut::<Mind>(someone.entity)
                && let Some(state) = mind.get_mut()
            {
                for key in &left {
                    if let Some(talk) = group_after_chat(state, &group, key) {
                        let waiting = &mut state.scratch.group_after_chats;
                        waiting.push(talk);
                        let over = waiting.len().saturating_sub(Scratch::MAX_GROUP_AFTER_CHATS);
                        waiting.drain(..over);
                    }
                }
            }
            if let Some(mut slot) = world.get_mut::<GroupAttention>(someone.entity) {
                *slot = group;
            }
        }
        let scene_of = |world: &World, stream: &super::stream::GroupStream, someone: &Someone| {
            let group = world.get::<GroupAttention>(someone.entity);
            let recalled = recall(
                world.get::<Mind>(someone.entity).and_then(Mind::get),
                group,
                &stream.key,
                now,
                settings.recall_memories,
                &agent,
            );
            let details = with_recall(details(world, someone), recalled);
            scene_in(stream, someone, details, &names_by_entity, &settings, step)
        };
        // A join question sits at its stream's round as a newcomer; with no round this step it
        // waits for the next one when the stream had one within `JOIN_WAIT_BEATS`, else it is
        // asked on its own.
        for (index, key) in joiners {
            let (Some(someone), Some(stream)) = (people.get(index), streams.get(&key)) else {
                continue;
            };
            let round = rounds.get_mut(&key);
            if round.is_none()
                && world
                    .get_resource::<LastRounds>()
                    .and_then(|last| last.0.get(&key))
                    .is_some_and(|&at| step <= at + JOIN_WAIT_BEATS * every)
            {
                continue;
            }
            let scene = scene_of(world, stream, someone);
            let (task, failures) = if let Some(round) = round {
                let seat = Seat {
                    persona: someone.entity,
                    scene,
                    looked: stream.last_seq(),
                    until: step,
                    role: SeatRole::Newcomer,
                };
                // The round's failures are heard by its first seat's log.
                (round.seat(seat), FailureLog::default())
            } else {
                let Some((ctx, failures)) = context_for(someone) else {
                    continue;
                };
                let task = spawn_call(CallKind::Join, ctx, scene, Vec::new(), Vec::new());
                (task, failures)
            };
            seated.insert(someone.entity);
            starts.push((someone.entity, Call::of(someone, &key, failures, task)));
        }
        // Every round seats its stream's listeners too: quiet now, most likely, but planning
        // their answer to what the round's speakers say, which they then say without a call.
        for (key, round) in &mut rounds {
            let Some(stream) = streams.get(key) else {
                continue;
            };
            for &(index, looked) in listeners.get(key).into_iter().flatten() {
                let Some(someone) = people.get(index) else {
                    continue;
                };
                if seated.contains(&someone.entity) || !stream.members.contains(&someone.entity) {
                    continue;
                }
                seated.insert(someone.entity);
                let scene = scene_of(world, stream, someone);
                // The round's failures are heard by its first seat's log.
                let failures = FailureLog::default();
                let seat = Seat {
                    persona: someone.entity,
                    scene,
                    looked,
                    until: plan_until,
                    role: SeatRole::Listening,
                };
                let task = round.seat(seat);
                if let Some(mut group) = world.get_mut::<GroupAttention>(someone.entity) {
                    group
                        .cycles
                        .insert(key.clone(), (stream.last_seq(), next_cycle(true)));
                }
                starts.push((someone.entity, Call::of(someone, key, failures, task)));
            }
        }
        hearings.clear();
        if let Some(mut scratch) = world.get_resource_mut::<HearingScratch>() {
            scratch.hearings = hearings;
        }
        let mut last = world.get_resource_mut::<LastRounds>();
        if let Some(last) = last.as_mut() {
            last.0.retain(|key, _| streams.get(key).is_some());
        }
        for (key, round) in std::mem::take(&mut rounds) {
            if let Some(stream) = streams.get(&key) {
                spawn_round(round, stream, &names_by_entity, settings.recent_lines);
                if let Some(last) = last.as_mut() {
                    last.0.insert(key, step);
                }
            }
        }
    });
    if lent.is_none() {
        return;
    }
    for (entity, call) in starts {
        world
            .entity_mut(entity)
            .insert(AwaitingCognition::new(step));
        world.resource_mut::<GroupCalls>().0.push(call);
    }
    for stream in opened {
        world.write_message(GroupStreamOpened { stream });
    }
    for stream in closed {
        world.write_message(GroupStreamClosed { stream });
    }
    for change in changes {
        world.trigger(change.clone());
        world.write_message(change);
    }
}

/// Which call a free persona makes this step, if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CallKind {
    Focus,
    Reply,
    Join,
}

fn choose_call(
    group: &GroupAttention,
    focus_due: Option<&StreamKey>,
    reply_wins: &BTreeSet<StreamKey>,
) -> Option<(CallKind, StreamKey)> {
    let state = |key: &StreamKey| group.attention.flows.get(key).map(|f| f.state);
    if let Some(key) = focus_due {
        return Some((CallKind::Focus, key.clone()));
    }
    if let Some(key) = reply_wins
        .iter()
        .find(|k| state(k) == Some(ChatState::Chat))
    {
        return Some((CallKind::Reply, key.clone()));
    }
    group
        .attention
        .join_candidate()
        .map(|key| (CallKind::Join, key))
}

/// The read-only tools `persona` may use (its allow-list, or the built-ins), for a focused
/// cycle's think: at most eight, by name.
fn offered_tools(world: &World, persona: Entity) -> Vec<OfferedTool> {
    let Some(registry) = world.get_resource::<ToolRegistry>() else {
        return Vec::new();
    };
    let allowed = world.get::<ToolAllowList>(persona);
    registry
        .iter()
        .filter(|t| t.spec.read_only && ToolAllowList::allows(allowed, &t.spec.name))
        .take(8)
        .map(|t| OfferedTool {
            name: t.spec.name.clone(),
            description: t.spec.description.clone(),
            example: t.spec.example.clone(),
        })
        .collect()
}

/// A line of the persona's, with the description its memory will have.
fn said(name: &str, place: &str, text: String, emoji: bool) -> Said {
    Said {
        description: memory_description(name, place, &text),
        text,
        emoji,
        embedding: None,
    }
}

/// Sets the embeddings of `lines`' memory descriptions, in one request (none when it fails).
async fn embed_all(ctx: &PromptContext, mut lines: Vec<&mut Said>) {
    if lines.is_empty() {
        return;
    }
    let texts = lines.iter().map(|l| l.description.clone()).collect();
    match ctx.embed_many(texts).await {
        Ok(vectors) if vectors.len() == lines.len() => {
            for (line, vector) in lines.iter_mut().zip(vectors) {
                line.embedding = Some(vector);
            }
        }
        _ => embedding_failed(ctx),
    }
}

/// Tells `ctx`'s failure log that a line's embedding could not be made.
fn embedding_failed(ctx: &PromptContext) {
    ctx.record_failure(ModelFailure {
        kind: EMBED_KIND,
        reason: FailureReason::Unusable,
        attempts: 1,
        speaker: None,
    });
}

/// `said` with the embedding of its memory description (none when the embedding fails).
async fn embedded(ctx: &PromptContext, mut said: Said) -> Said {
    match ctx.embed_one(said.description.clone()).await {
        Ok(vector) => said.embedding = Some(vector),
        Err(_) => embedding_failed(ctx),
    }
    said
}

/// A focused cycle's call: a line, an emoji, quiet — or a look-up first.
async fn focus_cycle(ctx: PromptContext, focus: GroupFocus) -> Landed {
    let (name, place) = (focus.scene.name.clone(), focus.scene.place.clone());
    let decision = run_prompt(&ctx, &focus).await.value;
    match decision.plan {
        FocusPlan::TextReply(text) => {
            Landed::Focused(Some(embedded(&ctx, said(&name, &place, text, false)).await))
        }
        FocusPlan::EmojiReply(emoji) => {
            Landed::Focused(Some(embedded(&ctx, said(&name, &place, emoji, true)).await))
        }
        FocusPlan::NoReply => Landed::Focused(None),
        FocusPlan::UseTool { tool, args } => Landed::LookUp(Box::new(LookUp {
            tool,
            args,
            focus,
            ctx,
        })),
    }
}

/// Runs one call on the task pool.
fn spawn_call(
    kind: CallKind,
    ctx: PromptContext,
    scene: GroupScene,
    new_lines: Vec<String>,
    tools: Vec<OfferedTool>,
) -> Task<Landed> {
    spawn_landing(async move {
        let (name, place) = (scene.name.clone(), scene.place.clone());
        match kind {
            CallKind::Join => {
                let yes = run_prompt(&ctx, &GroupJoin(scene.clone())).await.value;
                let mut opening = None;
                if yes && let Some(text) = run_prompt(&ctx, &GroupReply(scene)).await.value {
                    opening = Some(embedded(&ctx, said(&name, &place, text, false)).await);
                }
                Landed::Joined { yes, said: opening }
            }
            CallKind::Reply => match run_prompt(&ctx, &GroupReply(scene)).await.value {
                Some(text) => {
                    Landed::Replied(Some(embedded(&ctx, said(&name, &place, text, false)).await))
                }
                None => Landed::Replied(None),
            },
            CallKind::Focus => {
                let focus = GroupFocus {
                    scene,
                    new_lines,
                    tools,
                    looked_up: None,
                };
                focus_cycle(ctx, focus).await
            }
        }
    })
}

/// A line as a prompt shows it: "Speaker: text".
fn shown(line: &GroupLine) -> String {
    format!("{}: {}", line.speaker, line.text)
}

/// The stream's last `n` lines as a prompt shows them, oldest first.
fn recent_lines(stream: &super::stream::GroupStream, n: usize) -> Vec<String> {
    let skip = stream.lines.len().saturating_sub(n);
    stream.lines.iter().skip(skip).map(shown).collect()
}

/// What a prompt shows of `someone` in `stream`: who, doing what, where, with whom, the
/// recent lines.
fn scene_in(
    stream: &super::stream::GroupStream,
    someone: &Someone,
    Details { identity, memories }: Details,
    names_by_entity: &BTreeMap<Entity, &str>,
    settings: &GroupSettings,
    step: u64,
) -> GroupScene {
    let present: Vec<String> = stream
        .members
        .iter()
        .filter(|e| **e != someone.entity)
        .filter_map(|e| names_by_entity.get(e).map(|name| (*name).to_owned()))
        .collect();
    GroupScene {
        name: someone.name.clone(),
        first_name: someone.first_name.clone(),
        identity,
        activity: someone.activity.clone(),
        place: place_of(&stream.key),
        recent: recent_lines(stream, settings.recent_lines),
        present,
        memories,
        // By name, not entity: a load into a running world hands out new entities, and the
        // same scene must ask the model the same question (and hit the cache) as before.
        seed: step ^ name_hash(&someone.name).rotate_left(23) ^ stream.said,
    }
}

/// Lean mode: the focused cycles of one stream gathered during a step, asked together once
/// the step's personas have all been seen.
struct PendingRound {
    /// The first seat's context (its failure log hears of the round's failed calls).
    ctx: PromptContext,
    /// Each seat's scene, where its answer goes, and why it sits there.
    seats: Vec<(GroupScene, async_channel::Sender<Landed>, SeatRole)>,
    /// The seats' personas.
    personas: Vec<Entity>,
    /// The earliest line any seat looked at last.
    looked: u64,
    /// The last step at which the lines the round plans may be said.
    until: u64,
    /// Seed of the request.
    seed: u64,
}

/// A persona's focused cycle, to sit in its stream's round.
struct Seat {
    persona: Entity,
    scene: GroupScene,
    /// The last line its previous cycle observed.
    looked: u64,
    /// The last step at which a line planned for it may be said.
    until: u64,
    role: SeatRole,
}

/// Why a persona sits at a round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SeatRole {
    /// Its focused cycle is due.
    Focused,
    /// Focused with nothing new to answer: seated to plan its next line.
    Listening,
    /// Not in the talk yet, asked whether to join: saying something joins.
    Newcomer,
}

/// Seats a persona at its stream's round of this step; its call's task waits for its part
/// of the round's answer (quiet if the round is dropped).
fn seat_in_round(
    rounds: &mut BTreeMap<StreamKey, PendingRound>,
    key: &StreamKey,
    ctx: PromptContext,
    seat: Seat,
    step: u64,
) -> Task<Landed> {
    rounds
        .entry(key.clone())
        .or_insert_with(|| PendingRound {
            ctx,
            seats: Vec::new(),
            personas: Vec::new(),
            looked: seat.looked,
            until: seat.until,
            seed: step ^ seat.scene.seed.rotate_left(7),
        })
        .seat(seat)
}

impl PendingRound {
    /// Seats `seat`; its call's task waits for its part of the answer.
    fn seat(&mut self, seat: Seat) -> Task<Landed> {
        let (answer, heard) = async_channel::bounded(1);
        self.looked = self.looked.min(seat.looked);
        self.personas.push(seat.persona);
        self.seats.push((seat.scene, answer, seat.role));
        spawn_landing(async move { heard.recv().await.unwrap_or(Landed::Focused(None)) })
    }
}

/// Says the line a round planned for this cycle: no model call (its memory's embedding came
/// with the round's).
fn say_planned(line: Said) -> Task<Landed> {
    spawn_landing(async move { Landed::Focused(Some(line)) })
}

/// Asks a round on the task pool and hands each seat its part: a line, an emoji or quiet.
fn spawn_round(
    round: PendingRound,
    stream: &super::stream::GroupStream,
    names_by_entity: &BTreeMap<Entity, &str>,
    recent: usize,
) {
    let PendingRound {
        ctx,
        seats,
        personas,
        looked,
        until,
        seed,
    } = round;
    // What the round sees: lines from its seats after this are the exchange it plans.
    let after = stream.last_seq();
    let present: Vec<String> = stream
        .members
        .iter()
        .filter_map(|e| names_by_entity.get(e).map(|name| (*name).to_owned()))
        .collect();
    let recent = recent_lines(stream, recent);
    let new_lines: Vec<String> = stream.lines_after(looked).map(shown).collect();
    let place = seats
        .first()
        .map(|(s, ..)| s.place.clone())
        .unwrap_or_default();
    let prompt = GroupRound {
        place: place.clone(),
        present,
        recent,
        new_lines,
        seats: seats
            .iter()
            .map(|(scene, _, role)| RoundSeat {
                newcomer: *role == SeatRole::Newcomer,
                name: scene.name.clone(),
                first_name: scene.first_name.clone(),
                identity: scene.identity.clone(),
                activity: scene.activity.clone(),
                memories: scene.memories.clone(),
            })
            .collect(),
        seed,
    };
    spawn_landing(async move {
        let plans = run_prompt(&ctx, &prompt).await.value;
        let table_quiet = plans
            .iter()
            .all(|p| p.now == FocusPlan::NoReply && p.then.is_none());
        type Planned = (Option<Said>, Option<Said>, Vec<Said>);
        // Every line of the round, said now or planned, with its memory's embedding — all
        // of them in one request.
        let mut lines: Vec<Planned> = seats
            .iter()
            .zip(plans)
            .map(|((scene, ..), RoundPlan { now, then, later })| {
                let now = match now {
                    FocusPlan::TextReply(text) => Some(said(&scene.name, &place, text, false)),
                    FocusPlan::EmojiReply(emoji) => Some(said(&scene.name, &place, emoji, true)),
                    FocusPlan::NoReply | FocusPlan::UseTool { .. } => None,
                };
                let line = |text| said(&scene.name, &place, text, false);
                (now, then.map(line), later.into_iter().map(line).collect())
            })
            .collect();
        let mut all: Vec<&mut Said> = Vec::new();
        for (now, then, later) in &mut lines {
            all.extend(now.as_mut());
            all.extend(then.as_mut());
            all.extend(later.iter_mut());
        }
        embed_all(&ctx, all).await;
        for ((_, answer, role), (said, then, later)) in seats.into_iter().zip(lines) {
            let landed = if role == SeatRole::Newcomer {
                // Its answer is the join question's: a line joins (and is its opening).
                Landed::Joined {
                    yes: said.is_some(),
                    said,
                }
            } else {
                let then = then.map(|said| {
                    Box::new(PlannedLine {
                        said,
                        later,
                        after,
                        seats: personas.clone(),
                        until,
                    })
                });
                Landed::Round {
                    said,
                    then,
                    quiet_counts: table_quiet && role == SeatRole::Focused,
                }
            };
            // A seat whose call was dropped (the app is closing) hears nothing.
            let _ = answer.send(landed).await;
        }
    })
    .detach();
}

/// Runs a focused cycle's look-up in the world (the dialogue's checks and outcome events) and
/// asks the cycle again with what it found; the follow-up call keeps the persona busy.
fn look_up(world: &mut World, call: &Call, look: LookUp) {
    let Some(persona) = call.persona else {
        return;
    };
    let LookUp {
        tool,
        args,
        mut focus,
        ctx,
    } = look;
    let speaker = group_in(&call.place);
    let found = match run_read_only_tool(world, persona, &speaker, &tool, args.into()) {
        Ok(Ok(result)) => format!("{tool} → {}", truncate_chars(&result.to_string(), 600)),
        Ok(Err(error)) => format!("{tool} failed: {}", truncate_chars(&error, 200)),
        Err(reason) => format!("{tool} could not be used: {}", refusal_text(&reason)),
    };
    focus.tools.clear();
    focus.looked_up = Some(found);
    let task = spawn_landing(focus_cycle(ctx, focus));
    world.resource_mut::<GroupCalls>().0.push(Call {
        persona: call.persona,
        name: call.name.clone(),
        stream: call.stream.clone(),
        place: call.place.clone(),
        failures: call.failures.clone(),
        task,
        done: None,
        waiter: None,
    });
}

/// Why a look-up did not run, for the prompt.
fn refusal_text(reason: &RefusalReason) -> String {
    match reason {
        RefusalReason::Unknown => "no such tool".to_string(),
        RefusalReason::NotAllowed => "not allowed".to_string(),
        RefusalReason::BadArguments(why) => why.clone(),
        RefusalReason::StepLimit => "too many tool steps".to_string(),
    }
}

/// Everyone the step looks at, in entity order.
fn gather(world: &mut World) -> Vec<Someone> {
    let mut missing = Vec::new();
    let mut query = world.query_filtered::<(
        Entity,
        &Mind,
        &crate::persona::Percepts,
        Has<ChattingWith>,
        Has<AwaitingCognition>,
        Has<GroupAttention>,
        Has<Held>,
    ), With<Persona>>();
    let mut people = Vec::new();
    for (entity, mind, percepts, chatting, awaiting, has_group, held) in query.iter(world) {
        if !has_group {
            missing.push(entity);
        }
        let Some(state) = mind.get() else {
            // A mind out thinking: the persona is busy; it is seen again when home.
            continue;
        };
        let scratch = &state.scratch;
        let activity = scratch
            .act_description
            .clone()
            .unwrap_or_else(|| "idle".to_string());
        people.push(Someone {
            entity,
            name: scratch.name.clone(),
            first_name: scratch.first_name.clone(),
            arena: percepts.arena.clone(),
            home: sector_of(&scratch.living_area)
                .unwrap_or_default()
                .to_owned(),
            asleep: scratch.is_sleeping(),
            activity,
            chatting: chatting || scratch.chatting_with.is_some(),
            // A held persona (on a stage) hears the talk but starts no call.
            free: !awaiting && !held,
        });
    }
    for entity in missing {
        world.entity_mut(entity).insert(GroupAttention::default());
    }
    people.sort_by_key(|p| p.entity);
    people
}

/// What a persona heard and chose this step (steps 1 and 3–6 of the heart flow, up to the
/// call it makes): each persona reads only its own attention, its own mind and the streams,
/// so everyone's is worked out at once, in parallel, before the calls start in entity order.
struct Hearing {
    group: GroupAttention,
    moved: Vec<(StreamKey, Change)>,
    details_now: Option<Details>,
    /// The lines a focused call answers: what other speakers said since its last cycle.
    observed: Vec<String>,
    call: Option<(CallKind, StreamKey)>,
    looked_before: u64,
    /// Lean rounds: the focused streams the persona listens at, with the last line it saw.
    listening: Vec<(StreamKey, u64)>,
}

/// What a step's hearing reads besides the persona (see [`Hearing`]).
struct HearingContext<'a> {
    streams: &'a GroupStreams,
    /// Which streams reach each persona (see [`Reach`]).
    reach: &'a Reach<'a>,
    opened: &'a [StreamKey],
    settings: &'a GroupSettings,
    step: u64,
    secs: f32,
    rounds_on: bool,
    every: u64,
    /// The beat of a PEEKING persona's focused cycles, in steps.
    peek_every: u64,
    /// The arena streams whose every member lives there (see
    /// [`GroupSettings::quiet_household_meals`]).
    households: &'a BTreeSet<StreamKey>,
}

/// The open streams by the personas they reach, made once a step: a persona hears the two or
/// three streams around it without a look at every stream of the town.
struct Reach<'a> {
    /// Every stream, in key order.
    streams: Vec<&'a super::stream::GroupStream>,
    /// Per member, the positions of its streams in `streams`, ascending.
    members: HashMap<Entity, Vec<usize>>,
    /// The positions of the channels everyone hears (no subscribers), ascending.
    everyone: Vec<usize>,
}

impl<'a> Reach<'a> {
    fn of(streams: &'a GroupStreams) -> Self {
        let mut reach = Self {
            streams: streams.iter().collect(),
            members: HashMap::new(),
            everyone: Vec::new(),
        };
        for (at, stream) in reach.streams.iter().enumerate() {
            match stream.key {
                StreamKey::Channel(_) if stream.members.is_empty() => reach.everyone.push(at),
                _ => {
                    for &member in &stream.members {
                        reach.members.entry(member).or_default().push(at);
                    }
                }
            }
        }
        reach
    }

    /// The streams that reach `persona` ([`GroupStream::reaches`](super::stream::GroupStream::reaches)),
    /// in key order.
    fn streams_reaching(
        &self,
        persona: Entity,
    ) -> impl Iterator<Item = &'a super::stream::GroupStream> + '_ {
        let mine = self.members.get(&persona).map_or(&[][..], Vec::as_slice);
        let (mut a, mut b) = (mine.iter().peekable(), self.everyone.iter().peekable());
        std::iter::from_fn(move || {
            let next = match (a.peek(), b.peek()) {
                (Some(&&x), Some(&&y)) if y < x => b.next(),
                (Some(_), _) => a.next(),
                (None, _) => b.next(),
            };
            next.and_then(|&at| self.streams.get(at).copied())
        })
    }
}

/// Works out a persona's [`Hearing`] (see there).
fn hear(
    someone: &Someone,
    mut group: GroupAttention,
    state: Option<&MindState>,
    mut details_now: Option<Details>,
    cx: &HearingContext,
) -> Hearing {
    let HearingContext {
        streams,
        reach,
        opened,
        settings,
        step,
        secs,
        rounds_on,
        every,
        peek_every,
        households,
    } = *cx;
    let mut moved: Vec<(StreamKey, Change)> = Vec::new();
    // A stream the persona is no longer in is left.
    for (key, flow) in &mut group.attention.flows {
        let inside = streams.get(key).is_some_and(|s| s.reaches(someone.entity));
        if !inside && flow.state != ChatState::Absent {
            moved.push((key.clone(), flow.go(ChatState::Absent)));
        }
    }
    group.seen.retain(|key, _| streams.get(key).is_some());
    // (3. below) The social state, and whether the action lets the persona focus unaddressed:
    // read first, as what it is doing decides which cycles it keeps.
    let (social, meal) = if someone.asleep {
        (SocialState::Offline, false)
    } else {
        group.social_for(&someone.activity)
    };
    let home = at_home(someone);
    let household = meal
        && home
        && !households.is_empty()
        && households.contains(&StreamKey::Arena(someone.arena.clone()));
    let engagement = match Engagement::of(social, meal, home, household) {
        // Without the social rule only the household's table is kept quiet.
        Engagement::Listening if !settings.focus_needs_social => Engagement::Social,
        engagement => engagement,
    };
    // A listening persona (its action not social) keeps the beat and the last look of its
    // focused cycles while it listens: an address is answered a beat after the last answer,
    // with what is new since. (For any other, only a focused stream's cycle is kept.)
    let listening = engagement != Engagement::Social;
    group.cycles.retain(|key, _| {
        group.attention.flows.get(key).is_some_and(|f| {
            f.state == ChatState::Focused || (listening && f.state == ChatState::Chat)
        })
    });
    let focused = |flows: &BTreeMap<StreamKey, SubFlow>, key: &StreamKey| {
        flows
            .get(key)
            .is_some_and(|f| f.state == ChatState::Focused)
    };
    group
        .planned
        .retain(|key, _| focused(&group.attention.flows, key));
    group
        .attention
        .flows
        .retain(|key, flow| streams.get(key).is_some() || flow.state == ChatState::Absent);
    // 2. Memories: stored before (see `flush_all_memories`).
    // 3. Social state, and whether the action lets the persona focus unaddressed.
    moved.extend(group.attention.set_social(social));
    moved.extend(group.attention.set_engagement(engagement));
    // A busy persona glances at the talk, and one not out to talk answers who addresses it:
    // their cycles keep a longer beat.
    let every = if social == SocialState::Peeking || engagement != Engagement::Social {
        peek_every
    } else {
        every
    };
    let next_cycle = |on_the_beat: bool| next_cycle(step, every, on_the_beat);
    // 4. Hearing.
    let mut rng = heart_rng(&someone.name, step);
    let mut reply_wins: BTreeSet<StreamKey> = BTreeSet::new();
    // The persona's words are read (or found unchanged) when the first line reaches it, and
    // its latest memories' vectors when the first line with an embedding does.
    let mut words_read = false;
    let mut memory_vectors: Option<Vec<&[f32]>> = None;
    let mut lowered: Option<LoweredName> = None;
    for stream in reach.streams_reaching(someone.entity) {
        let seen = group.seen.get(&stream.key).copied().unwrap_or(0);
        let opened_now = opened.contains(&stream.key);
        let flow = group.attention.flow(&stream.key);
        if opened_now {
            // Noticing the gathering is the first thing heard.
            flow.hear(0.5, false, &settings.attention);
        }
        let mut heard_to = stream.last_seq();
        for line in stream.lines_after(seen) {
            // A game's post is heard once its embedding landed (the next step): interest
            // weighs it against the listener's memories.
            if stream.embedding_awaited(line.seq) {
                heard_to = line.seq - 1;
                break;
            }
            if line.persona == Some(someone.entity) {
                continue;
            }
            let lowered =
                lowered.get_or_insert_with(|| LoweredName::of(&someone.name, &someone.first_name));
            let named = lowered.named_in(&line.text.to_lowercase());
            if !words_read {
                let details = details_now.get_or_insert_with(|| details_of(state));
                refresh_words(&mut group.words_of, &details.identity, &someone.activity);
                words_read = true;
            }
            // Relevance to its memories by embedding similarity; the words when the line has
            // no embedding yet (or the persona no memory to compare with).
            let by_memory = stream.embedding(line.seq).and_then(|embedding| {
                let vectors = memory_vectors.get_or_insert_with(|| {
                    state
                        .map(|s| latest_memory_vectors(&s.associative))
                        .unwrap_or_default()
                });
                memory_relevance(embedding, vectors.iter().copied())
            });
            let relevance =
                by_memory.unwrap_or_else(|| relevance(&line.text, &group.words_of.words));
            flow.hear(relevance, named, &settings.attention);
            // Named, or game code (the player, a director) spoke into the stream: the persona
            // may focus here for a while whatever it is doing.
            if named || line.persona.is_none() {
                flow.addressed(&settings.attention);
            }
            // Each message may be answered, by a draw.
            let draw: f32 = rng.random();
            if flow.wants_to_reply(draw, &settings.attention) {
                reply_wins.insert(stream.key.clone());
            }
        }
        group.seen.insert(stream.key.clone(), heard_to);
    }
    // 5. Time.
    moved.extend(group.attention.tick(secs, &settings.attention, &mut rng));
    // 6. At most one call.
    // A focused stream's cycle is due once `focus_cycle_every` seconds have passed since
    // the last, if another speaker said something since that cycle observed. Only a persona
    // that may call looks, and only the stream it answers has its new lines copied out (a
    // busy persona's due cycle waits, unread, until it is free).
    let may_call = someone.free && !someone.asleep && !someone.chatting;
    let me = Some(someone.entity);
    // In rounds, a listening persona answers its addresses on its beat, so those who address
    // each other sit at one round instead of a round each.
    let on_the_beat = !(rounds_on && listening) || step.is_multiple_of(every);
    let focus_due = may_call
        .then(|| {
            group.attention.flows.iter().find_map(|(key, flow)| {
                let (looked, due) = group.cycles.get(key).copied().unwrap_or((0, 0));
                let stream = streams.get(key)?;
                let heard_new = flow.state == ChatState::Focused
                    && step >= due
                    && on_the_beat
                    && stream.lines_after(looked).any(|l| l.persona != me);
                heard_new.then_some((key, stream, looked))
            })
        })
        .flatten();
    let call = if may_call {
        choose_call(&group, focus_due.map(|(key, ..)| key), &reply_wins)
    } else {
        None
    };
    let observed: Vec<String> = match focus_due {
        Some((_, stream, looked)) if matches!(call, Some((CallKind::Focus, _))) => stream
            .lines_after(looked)
            .filter(|l| l.persona != me)
            .map(shown)
            .collect(),
        _ => Vec::new(),
    };
    // The last line this cycle's previous one observed (the round shows what is new).
    let mut looked_before = 0;
    if let Some((CallKind::Focus, key)) = &call
        && let Some(stream) = streams.get(key)
    {
        looked_before = group.cycles.get(key).map_or(0, |(looked, _)| *looked);
        group
            .cycles
            .insert(key.clone(), (stream.last_seq(), next_cycle(rounds_on)));
        // The cycle observes every line so far: an address is answered by it, and a persona
        // whose action is not social listens again while it answers.
        if let Some(flow) = group.attention.flows.get_mut(key) {
            flow.answered();
        }
        moved.extend(group.attention.enforce_limits());
    }
    let mut listening = Vec::new();
    if rounds_on && call.is_none() && may_call {
        // Focused but with nothing new to answer: a listener at its streams' rounds.
        for (key, flow) in &group.attention.flows {
            if flow.state == ChatState::Focused {
                let looked = group.cycles.get(key).map_or(0, |(looked, _)| *looked);
                listening.push((key.clone(), looked));
            }
        }
    }
    Hearing {
        group,
        moved,
        details_now,
        observed,
        call,
        looked_before,
        listening,
    }
}

/// A persona's attention taken out of the world for its [`Hearing`], with its identity and
/// chats if already read.
struct HearingJob {
    entity: Entity,
    group: GroupAttention,
    details_now: Option<Details>,
}

/// Every listed persona's [`Hearing`], by its index in `people` (`None` for one without
/// group attention), worked out in parallel; their attention is taken out of the world, to be
/// put back when the persona's call is settled.
fn hear_everyone(
    world: &mut World,
    people: &[Someone],
    details_before: &mut HashMap<Entity, Details>,
    cx: &HearingContext,
) -> Vec<Option<Hearing>> {
    let mut scratch = world
        .remove_resource::<HearingScratch>()
        .unwrap_or_default();
    let mut jobs = std::mem::take(&mut scratch.jobs);
    jobs.clear();
    jobs.resize_with(people.len(), || None);
    let mut query = world.query::<(Entity, &mut GroupAttention)>();
    for (entity, mut group) in query.iter_mut(world) {
        if let Some(i) = position_of(people, entity)
            && let Some(job) = jobs.get_mut(i)
        {
            *job = Some(HearingJob {
                entity,
                group: std::mem::take(&mut *group),
                details_now: details_before.remove(&entity),
            });
        }
    }
    let mut hearings = std::mem::take(&mut scratch.hearings);
    hearings.clear();
    hearings.resize_with(people.len(), || None);
    let hearings = hear_all(world, people, &mut jobs, hearings, cx);
    jobs.clear();
    scratch.jobs = jobs;
    world.insert_resource(scratch);
    hearings
}

/// The parallel part of [`hear_everyone`]: each job heard into its slot of `hearings`.
fn hear_all(
    world: &World,
    people: &[Someone],
    jobs: &mut [Option<HearingJob>],
    mut hearings: Vec<Option<Hearing>>,
    cx: &HearingContext,
) -> Vec<Option<Hearing>> {
    let hear_piece = |people: &[Someone], jobs: &mut [Option<HearingJob>], out: &mut [_]| {
        for ((someone, job), slot) in people.iter().zip(jobs).zip(out) {
            let Some(HearingJob {
                entity,
                group,
                details_now,
            }) = job.take()
            else {
                continue;
            };
            let state = world.get::<Mind>(entity).and_then(Mind::get);
            *slot = Some(hear(someone, group, state, details_now, cx));
        }
    };
    // A small town hears faster on one thread than it takes to hand out the pieces.
    if people.len() < PARALLEL_HEARING_MIN {
        hear_piece(people, jobs, &mut hearings);
        return hearings;
    }
    let pool = bevy::tasks::ComputeTaskPool::get_or_init(bevy::tasks::TaskPool::default);
    // The pool's threads and this one (a scope's caller works too), eight pieces each: a
    // piece with a busy stream in it costs many times one without, and with few pieces the
    // thread that drew it heard on alone while the others waited.
    let pieces = 8 * (pool.thread_num() + 1);
    let per_piece = people.len().div_ceil(pieces).max(1);
    pool.scope(|scope| {
        let work = people.chunks(per_piece).zip(jobs.chunks_mut(per_piece));
        for ((people, jobs), out) in work.zip(hearings.chunks_mut(per_piece)) {
            let hear_piece = &hear_piece;
            scope.spawn(async move { hear_piece(people, jobs, out) });
        }
    });
    hearings
}

/// The buffers a step's hearing fills, kept between steps: a thousand personas' hearings are
/// most of a megabyte, and allocating them afresh each step had the kernel clear new pages.
/// Empty between steps (never saved).
#[derive(Resource, Default)]
struct HearingScratch {
    jobs: Vec<Option<HearingJob>>,
    hearings: Vec<Option<Hearing>>,
}

/// Personas from which a step's hearing is split over threads (see [`hear_everyone`]).
const PARALLEL_HEARING_MIN: usize = 64;

/// Where `entity` is in `people` ([`gather`] lists them in entity order).
fn position_of(people: &[Someone], entity: Entity) -> Option<usize> {
    people.binary_search_by_key(&entity, |p| p.entity).ok()
}

/// Stores every listed persona's due passages as chat memories (see [`due_passages`]), each
/// whose mind is home, in parallel (a persona's lines go to its own memory only, in the order
/// heard). Returns the [`Details`] of each listed persona that had a passage to store, read
/// just before storing it: a prompt this step sees the chats from before.
fn flush_all_memories(
    world: &mut World,
    people: &[Someone],
    settings: &GroupSettings,
    now: NaiveDateTime,
) -> HashMap<Entity, Details> {
    let mut before: Parallel<Vec<(Entity, Details)>> = Parallel::default();
    let shared = SharedPassages::default();
    let mut query = world.query::<(Entity, &mut Mind, &mut GroupAttention)>();
    query
        .par_iter_mut(world)
        .batching_strategy(PERSONA_BATCHES)
        .for_each(|(entity, mut mind, mut group)| {
            if group.pending.is_empty() || mind.get().is_none() {
                return;
            }
            let Some(someone) = position_of(people, entity).and_then(|i| people.get(i)) else {
                return;
            };
            let passages = due_passages(&mut group.pending, settings, now);
            if passages.is_empty() {
                return;
            }
            before.scope(|before| before.push((entity, details_of(mind.get()))));
            if let Some(state) = mind.get_mut() {
                for passage in &passages {
                    store_passage(state, someone, passage, settings, &shared);
                }
            }
        });
    before.drain().collect()
}

/// Takes out of `pending` the passages due to be remembered at `now`, oldest first. A
/// passage is what a listener heard of one conversation (its memory's object, `the group in
/// <place>`) in one window of [`GroupSettings::passage_seconds`] of the clock (09:00–09:05,
/// 09:05–09:10, …), in the order heard, cut every [`GroupSettings::passage_lines`] lines. A
/// full passage is due, and so is every passage of a window that has ended. The windows are
/// the clock's, not the listener's, so everyone who heard the same lines remembers the same
/// passage (one description and vector for all). The lines of passages still open stay in
/// `pending`, in order.
fn due_passages(
    pending: &mut Vec<PendingMemory>,
    settings: &GroupSettings,
    now: NaiveDateTime,
) -> Vec<Vec<PendingMemory>> {
    let most = settings.passage_lines.max(1);
    let window = (settings.passage_seconds as i64).max(1);
    let window_of = |time: NaiveDateTime| time.and_utc().timestamp().div_euclid(window);
    let current = window_of(now);
    // Most steps nothing is due: fewer lines than a passage holds, the oldest heard in the
    // window still open (lines are heard in time order).
    if pending.len() < most
        && pending
            .first()
            .is_none_or(|oldest| window_of(oldest.heard.time) >= current)
    {
        return Vec::new();
    }
    // Each conversation's lines of each window (with their place in `pending`), in the order
    // its first line was heard.
    let mut conversations: Vec<(i64, Vec<(usize, PendingMemory)>)> = Vec::new();
    for (at, line) in pending.drain(..).enumerate() {
        let of = window_of(line.heard.time);
        match conversations.iter_mut().find(|(w, c)| {
            *w == of
                && c.first()
                    .is_some_and(|(_, f)| f.heard.object == line.heard.object)
        }) {
            Some((_, conversation)) => conversation.push((at, line)),
            None => conversations.push((of, vec![(at, line)])),
        }
    }
    let mut due = Vec::new();
    let mut open = Vec::new();
    for (of, mut lines) in conversations {
        while lines.len() >= most {
            let rest = lines.split_off(most);
            due.push(std::mem::replace(&mut lines, rest));
        }
        if of < current && !lines.is_empty() {
            due.push(lines);
        } else {
            open.extend(lines);
        }
    }
    open.sort_unstable_by_key(|(at, _)| *at);
    pending.extend(open.into_iter().map(|(_, line)| line));
    // Oldest first: in the order their first lines were heard.
    due.sort_unstable_by_key(|lines| lines.first().map(|(at, _)| *at));
    due.into_iter()
        .map(|lines| lines.into_iter().map(|(_, line)| line).collect())
        .collect()
}

/// Most characters of the description of a passage's event node (its chat node's is longer).
const PASSAGE_EVENT_CHARS: usize = 160;

/// Most characters of one line in a passage's description (the memory keeps every line whole).
const PASSAGE_LINE_CHARS: usize = 80;

/// Stores a passage the persona heard as one chat memory: its lines, their speakers as
/// keywords, the time of its first line, the poignancy of a named line if one named the
/// persona. A passage of one line is remembered as that line (its description and vector); a
/// longer one has a description quoting each line (cut to [`PASSAGE_LINE_CHARS`]) and the
/// mean of the lines' vectors — no model call, and the same vector for everyone who heard the
/// same lines.
fn store_passage(
    state: &mut MindState,
    someone: &Someone,
    passage: &[PendingMemory],
    settings: &GroupSettings,
    shared: &SharedPassages,
) {
    let Some(first) = passage.first() else {
        return;
    };
    let dim = first.heard.embedding.len();
    if passage.len() > 1 && passage.iter().any(|line| line.heard.embedding.len() != dim) {
        // Lines embedded by different models: each is remembered apart.
        for line in passage {
            store_passage(state, someone, std::slice::from_ref(line), settings, shared);
        }
        return;
    }
    let poignancy = if passage.iter().any(|line| line.named) {
        settings.named_poignancy
    } else {
        settings.line_poignancy
    };
    let mut keywords = vec![someone.name.to_lowercase()];
    for line in passage {
        if !keywords.contains(&line.heard.speaker_keyword) {
            keywords.push(line.heard.speaker_keyword.clone());
        }
    }
    let made;
    let (description, vector) = match passage {
        [only] => (
            only.heard.description.clone(),
            only.heard.embedding.as_slice(),
        ),
        lines => {
            made = shared.of(lines, dim);
            (made.description.clone(), made.vector.as_slice())
        }
    };
    let triple = (
        someone.name.clone(),
        "chat with".to_string(),
        first.heard.object.clone(),
    );
    let node = NewMemory::new(first.heard.time, triple.clone(), description.clone())
        .keywords(keywords.clone())
        .poignancy(poignancy);
    // The chat node keeps the lines for the chat history; an event node over it, with the same
    // vector and the start of its description, is what retrieval finds (chat nodes are no
    // candidates), so what was said at a table can reach a plan (SPEC §16). Its description is
    // cut: prompts that list many memories (relationships, reflections) read it.
    let short = truncate_chars(&description, PASSAGE_EVENT_CHARS);
    let short = if short.len() < description.len() {
        format!("{short}…")
    } else {
        description.clone()
    };
    let event = NewMemory::new(first.heard.time, triple, short)
        .embedding_key(description.clone(), None)
        .keywords(keywords)
        .poignancy(poignancy);
    let lines = passage
        .iter()
        .map(|line| ChatLine::new(line.heard.speaker.clone(), line.heard.line.clone()))
        .collect();
    // The vector is copied into memory's own rows only when memory does not hold it yet.
    let stored = state
        .associative
        .add_chat_with_vector(node, vector, lines)
        .and_then(|chat| state.associative.add_event(event, vec![chat]));
    match stored {
        Ok(_) => {
            state.scratch.importance_trigger_curr -= i32::from(poignancy);
            state.scratch.importance_ele_n += 1;
        }
        Err(error) => debug!(%error, "a group passage was not stored"),
    }
}

/// The description and vector of each passage of several lines one flush stores, made once for
/// everyone who heard the same lines (the same [`HeardLine`]s, in order), not once a listener.
#[derive(Default)]
struct SharedPassages(std::sync::Mutex<HashMap<Vec<usize>, Arc<SharedPassage>>>);

/// A passage's description and vector (see [`SharedPassages`]).
struct SharedPassage {
    /// The lines, held so that no address in the key is freed and reused while the map lives.
    _lines: Vec<Arc<HeardLine>>,
    description: String,
    vector: Vec<f32>,
}

impl SharedPassages {
    /// The description and vector of `lines`: made now, or by an earlier listener.
    fn of(&self, lines: &[PendingMemory], dim: usize) -> Arc<SharedPassage> {
        let key: Vec<usize> = lines
            .iter()
            .map(|line| Arc::as_ptr(&line.heard).addr())
            .collect();
        let lock = || {
            self.0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        };
        if let Some(made) = lock().get(&key) {
            return made.clone();
        }
        // Made outside the lock: another thread may make the same one meanwhile (the first
        // kept wins; both are equal).
        let made = Arc::new(SharedPassage {
            _lines: lines.iter().map(|line| line.heard.clone()).collect(),
            description: passage_description(lines),
            vector: mean_vector(lines, dim),
        });
        lock().entry(key).or_insert(made).clone()
    }
}

/// The description of a passage of several lines: where, and who said what.
fn passage_description(lines: &[PendingMemory]) -> String {
    let mut text = match lines.first() {
        Some(first) => format!("Talk in {}:", first.heard.object),
        None => return String::new(),
    };
    for (i, line) in lines.iter().enumerate() {
        let said = line.heard.line.trim();
        let cut = truncate_chars(said, PASSAGE_LINE_CHARS);
        let more = if cut.len() < said.len() { "…" } else { "" };
        let sep = if i == 0 { " " } else { "; " };
        let _ = write!(text, "{sep}{} said \"{cut}{more}\"", line.heard.speaker);
    }
    text
}

/// The sum of the lines' vectors (memory stores it normalised: their mean direction).
fn mean_vector(lines: &[PendingMemory], dim: usize) -> Vec<f32> {
    let mut sum = vec![0.0f32; dim];
    for line in lines {
        for (total, x) in sum.iter_mut().zip(&line.heard.embedding) {
            *total += x;
        }
    }
    sum
}

/// Lands finished calls (see the module docs).
pub(super) fn land_group_calls(world: &mut World) {
    let Some(mut calls) = world.remove_resource::<GroupCalls>() else {
        return;
    };
    // Calls land in the order they started, whatever order they finish in: a line's place in
    // its stream must not depend on how long the model took (Lockstep runs are deterministic).
    let mut finished = Vec::new();
    let mut running = Vec::new();
    let mut blocked = false;
    for mut call in calls.0.drain(..) {
        if call.done.is_none() {
            call.done = poll_landing(&mut call.task);
        }
        match call.done.take() {
            Some(landed) if !blocked => finished.push((call, landed)),
            done => {
                call.done = done;
                blocked = true;
                running.push(call);
            }
        }
    }
    calls.0 = running;
    world.insert_resource(calls);
    let settings = world
        .get_resource::<GroupSettings>()
        .cloned()
        .unwrap_or_default();
    let now = world
        .get_resource::<SimClock>()
        .map(SimClock::now)
        .unwrap_or_default();
    // Who follows which stream, found once for all the lines landing this step (not by a scan
    // of every persona per line); kept true as each landing moves its persona's attention.
    let mut hearers = None;
    for (call, landed) in finished {
        let goes_on = land(world, &call, landed, &settings, now, &mut hearers);
        if let Some(waiter) = call.waiter
            && let Ok(entity) = world.get_entity_mut(waiter)
        {
            entity.despawn();
        }
        if let (Some(hearers), Some(persona)) = (hearers.as_mut(), call.persona) {
            Hearers::refresh(hearers, world, persona);
        }
        if let Some(persona) = call.persona {
            let (failures, _) = call.failures.take();
            for failure in failures {
                world.write_message(ModelCallFailed {
                    persona,
                    name: call.name.clone(),
                    time: now,
                    prompt_kind: failure.kind,
                    reason: failure.reason,
                    attempts: failure.attempts,
                });
            }
            if !goes_on && let Ok(mut entity) = world.get_entity_mut(persona) {
                entity.remove::<AwaitingCognition>();
            }
        }
    }
}

/// Lands one call; `true` when the persona's call goes on (a look-up asks again).
fn land(
    world: &mut World,
    call: &Call,
    landed: Landed,
    settings: &GroupSettings,
    now: NaiveDateTime,
    hearers: &mut Option<Hearers>,
) -> bool {
    let mut change = None;
    let mut said = None;
    match landed {
        Landed::Posted { seq, embedding } => {
            let mut streams = world.resource_mut::<GroupStreams>();
            streams.landed_embedding(&call.stream, seq);
            if let Some(embedding) = embedding {
                streams.set_embedding(&call.stream, seq, &embedding);
                remember(world, call, None, seq, embedding, now, hearers);
            }
            return false;
        }
        Landed::LookUp(look) => {
            look_up(world, call, *look);
            return call.persona.is_some();
        }
        Landed::Joined { yes, said: opening } => {
            if let Some(persona) = call.persona
                && let Some(mut group) = world.get_mut::<GroupAttention>(persona)
            {
                change = group
                    .attention
                    .answer_join(&call.stream, yes, &settings.attention);
            }
            if matches!(
                change,
                Some(Change::Moved {
                    to: ChatState::Chat,
                    ..
                })
            ) {
                said = opening;
            }
        }
        Landed::Replied(line) => said = line,
        Landed::Focused(None) => {
            if let Some(persona) = call.persona
                && let Some(mut group) = world.get_mut::<GroupAttention>(persona)
            {
                change = group
                    .attention
                    .planned_no_reply(&call.stream, &settings.attention);
            }
        }
        Landed::Focused(line) => said = line,
        Landed::Round {
            said: line,
            then,
            quiet_counts,
        } => {
            if let Some(persona) = call.persona
                && let Some(mut group) = world.get_mut::<GroupAttention>(persona)
            {
                if quiet_counts {
                    change = group
                        .attention
                        .planned_no_reply(&call.stream, &settings.attention);
                }
                if let Some(then) = then {
                    group.planned.insert(call.stream.clone(), *then);
                }
            }
            said = line;
        }
    }
    if let (Some(persona), Some(Change::Moved { from, to })) = (call.persona, change)
        && from != to
    {
        let change = GroupAttentionChanged {
            persona,
            name: call.name.clone(),
            stream: call.stream.clone(),
            from,
            to,
        };
        world.trigger(change.clone());
        world.write_message(change);
    }
    let (Some(persona), Some(said)) = (call.persona, said) else {
        return false;
    };
    // The persona may have left while it thought: then the line goes unsaid.
    let following = world
        .get::<GroupAttention>(persona)
        .and_then(|g| g.attention.flows.get(&call.stream))
        .is_some_and(|f| f.state != ChatState::Absent);
    if !following {
        return false;
    }
    let Some(seq) = world.resource_mut::<GroupStreams>().say(
        &call.stream,
        &call.name,
        Some(persona),
        &said.text,
        said.emoji,
        now,
    ) else {
        return false;
    };
    if let Some(mut group) = world.get_mut::<GroupAttention>(persona) {
        group
            .attention
            .flow(&call.stream)
            .spoke(&settings.attention);
        group.seen.insert(call.stream.clone(), seq);
    }
    let line = GroupLineSpoken {
        stream: call.stream.clone(),
        seq,
        speaker: call.name.clone(),
        persona: Some(persona),
        text: said.text.clone(),
        emoji: said.emoji,
        time: now,
    };
    world.write_message(line.clone());
    world.trigger(line);
    if let Some(embedding) = said.embedding {
        world
            .resource_mut::<GroupStreams>()
            .set_embedding(&call.stream, seq, &embedding);
        remember(world, call, Some(persona), seq, embedding, now, hearers);
    }
    false
}

/// The members of an arena's stream among those `present`: the members still there first,
/// then newcomers in entity order, at most `cap` (at least 2).
fn circle(members: &BTreeSet<Entity>, present: &[Entity], cap: usize) -> BTreeSet<Entity> {
    let (mut staying, mut newcomers): (Vec<Entity>, Vec<Entity>) =
        present.iter().partition(|e| members.contains(e));
    staying.sort();
    newcomers.sort();
    staying
        .into_iter()
        .chain(newcomers)
        .take(cap.max(2))
        .collect()
}

/// Queues line `seq` of the call's stream as a memory of everyone who heard it: the speaker,
/// whoever follows the stream, and in an arena everyone present.
fn remember(
    world: &mut World,
    call: &Call,
    speaker: Option<Entity>,
    seq: u64,
    embedding: Vec<f32>,
    now: NaiveDateTime,
    hearers: &mut Option<Hearers>,
) {
    let Some(line) = world
        .resource::<GroupStreams>()
        .get(&call.stream)
        .and_then(|s| s.lines.iter().find(|l| l.seq == seq).cloned())
    else {
        return;
    };
    // In an arena everyone present hears what is said; a channel is heard by its followers.
    let mut heard_by: BTreeSet<Entity> = match &call.stream {
        StreamKey::Arena(_) => world
            .resource::<GroupStreams>()
            .get(&call.stream)
            .map(|s| s.members.clone())
            .unwrap_or_default(),
        StreamKey::Channel(_) => BTreeSet::new(),
    };
    let hearers = hearers.get_or_insert_with(|| Hearers::of(world));
    if let Some(followers) = hearers.followers.get(&call.stream) {
        heard_by.extend(followers.iter().copied());
    }
    heard_by.extend(speaker);
    let lower = line.text.to_lowercase();
    let heard = Arc::new(HeardLine {
        time: now,
        description: memory_description(&line.speaker, &call.place, &line.text),
        speaker_keyword: line.speaker.to_lowercase(),
        speaker: line.speaker,
        line: line.text,
        object: group_in(&call.place),
        embedding,
    });
    for entity in heard_by {
        let Ok(mut persona) = world.get_entity_mut(entity) else {
            continue;
        };
        let Some(named) = persona.get::<Name>().map(|name| {
            let first = name.as_str().split_whitespace().next().unwrap_or_default();
            speaker != Some(entity) && names_lowercased(&lower, name.as_str(), first)
        }) else {
            continue;
        };
        let Some(mut group) = persona.get_mut::<GroupAttention>() else {
            continue;
        };
        group.pending.push(PendingMemory {
            heard: Arc::clone(&heard),
            named,
        });
    }
}

/// Who follows each stream (its sub-flow is not `Absent`): the personas a line said in it
/// reaches besides those present and the speaker (see [`remember`]).
#[derive(Default)]
struct Hearers {
    followers: HashMap<StreamKey, BTreeSet<Entity>>,
}

impl Hearers {
    /// Every persona with group attention, by the streams it follows.
    fn of(world: &mut World) -> Self {
        let mut hearers = Self::default();
        let mut query = world.query::<(Entity, &GroupAttention)>();
        for (entity, group) in query.iter(world) {
            hearers.add(entity, group);
        }
        hearers
    }

    fn add(&mut self, entity: Entity, group: &GroupAttention) {
        for (key, flow) in &group.attention.flows {
            if flow.state != ChatState::Absent {
                self.followers
                    .entry(key.clone())
                    .or_default()
                    .insert(entity);
            }
        }
    }

    /// Reads `persona`'s streams again (a landing may have moved its attention).
    fn refresh(&mut self, world: &World, persona: Entity) {
        for followers in self.followers.values_mut() {
            followers.remove(&persona);
        }
        if let Some(group) = world.get::<GroupAttention>(persona) {
            self.add(persona, group);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Who follows each stream, by a scan of every persona (what [`Hearers`] must equal).
    fn followers_by_scan(world: &mut World) -> HashMap<StreamKey, BTreeSet<Entity>> {
        let mut out: HashMap<StreamKey, BTreeSet<Entity>> = HashMap::new();
        let mut query = world.query::<(Entity, &GroupAttention)>();
        for (entity, group) in query.iter(world) {
            for (key, flow) in &group.attention.flows {
                if flow.state != ChatState::Absent {
                    out.entry(key.clone()).or_default().insert(entity);
                }
            }
        }
        out
    }

    /// The index without the streams nobody follows any more (emptied sets).
    fn followed(hearers: &Hearers) -> HashMap<StreamKey, BTreeSet<Entity>> {
        hearers
            .followers
            .iter()
            .filter(|(_, who)| !who.is_empty())
            .map(|(key, who)| (key.clone(), who.clone()))
            .collect()
    }

    /// A line `speaker` said in `place` at minute `minute` past 09:00, with vector `vector`.
    fn heard(
        place: &str,
        speaker: &str,
        text: &str,
        minute: i64,
        vector: Vec<f32>,
    ) -> PendingMemory {
        let nine = chrono::NaiveDate::from_ymd_opt(2023, 2, 13)
            .and_then(|d| d.and_hms_opt(9, 0, 0))
            .expect("a time");
        PendingMemory {
            heard: Arc::new(HeardLine {
                time: nine + chrono::Duration::minutes(minute),
                speaker: speaker.into(),
                speaker_keyword: speaker.to_lowercase(),
                line: text.into(),
                object: group_in(place),
                description: memory_description(speaker, place, text),
                embedding: vector,
            }),
            named: false,
        }
    }

    fn lines_of(passage: &[PendingMemory]) -> Vec<&str> {
        passage.iter().map(|p| p.heard.line.as_str()).collect()
    }

    #[test]
    fn a_passage_is_due_when_full_or_old_and_the_rest_waits_in_order() {
        let settings = GroupSettings {
            passage_lines: 3,
            passage_seconds: 300.0,
            ..GroupSettings::default()
        };
        let v = || vec![1.0, 0.0];
        // Four lines at the cafe, two at the bar between them, one new at the park.
        let mut pending = vec![
            heard("cafe", "Ann", "c1", 0, v()),
            heard("bar", "Bo", "b1", 1, v()),
            heard("cafe", "Cy", "c2", 2, v()),
            heard("cafe", "Ann", "c3", 3, v()),
            heard("bar", "Bo", "b2", 4, v()),
            heard("cafe", "Cy", "c4", 5, v()),
            heard("park", "Di", "p1", 9, v()),
        ];
        let at = |minute| pending_time(minute);
        // At 09:04: the cafe's first three lines make a full passage; nothing else is due.
        let due = due_passages(&mut pending, &settings, at(4));
        assert_eq!(
            due.iter().map(|p| lines_of(p)).collect::<Vec<_>>(),
            [["c1", "c2", "c3"]]
        );
        assert_eq!(lines_of(&pending), ["b1", "b2", "c4", "p1"]);
        // At 09:05 the window 09:00–09:05 has ended: the bar's passage is due; the cafe's line
        // of 09:05 is in the next window.
        let due = due_passages(&mut pending, &settings, at(5));
        assert_eq!(
            due.iter().map(|p| lines_of(p)).collect::<Vec<_>>(),
            [["b1", "b2"]]
        );
        assert_eq!(lines_of(&pending), ["c4", "p1"]);
        assert!(due_passages(&mut pending, &settings, at(9)).is_empty());
        // At 09:10 both are due, the older first.
        let due = due_passages(&mut pending, &settings, at(10));
        assert_eq!(
            due.iter().map(|p| lines_of(p)).collect::<Vec<_>>(),
            [["c4"], ["p1"]]
        );
        assert!(pending.is_empty());
        // One line a passage: every line is due at once, as heard.
        let single = GroupSettings {
            passage_lines: 1,
            ..settings
        };
        let mut pending = vec![
            heard("cafe", "Ann", "x", 0, v()),
            heard("cafe", "Bo", "y", 0, v()),
        ];
        let due = due_passages(&mut pending, &single, at(0));
        assert_eq!(
            due.iter().map(|p| lines_of(p)).collect::<Vec<_>>(),
            [["x"], ["y"]]
        );
    }

    #[test]
    fn a_group_prompt_recalls_what_bears_on_the_latest_lines_but_not_the_talk_itself() {
        let mut state = MindState {
            associative: crate::memory::AssociativeMemory::new("test", 2),
            ..Default::default()
        };
        let at = pending_time(0);
        let told = "conversation with Player at 08:50: Player said \"the fair moved\"";
        let add = |state: &mut MindState, text: &str, vector: Vec<f32>| {
            let memory = NewMemory::new(at, ("Eva Moss", "saw", "x"), text)
                .poignancy(3)
                .embedding(vector);
            state
                .associative
                .add_event(memory, Vec::new())
                .expect("stored");
        };
        add(&mut state, told, vec![1.0, 0.05]);
        for i in 0..6 {
            add(&mut state, &format!("something else {i}"), vec![0.0, 1.0]);
        }
        // A passage of this very conversation, closest of all to its lines: left out.
        let settings = GroupSettings::default();
        let passage = vec![heard(
            "the cafe",
            "Ann Lee",
            "Is the fair on?",
            0,
            vec![1.0, 0.0],
        )];
        store_passage(
            &mut state,
            &listener("Eva Moss"),
            &passage,
            &settings,
            &SharedPassages::default(),
        );
        let mut group = GroupAttention::default();
        group.pending.push(heard(
            "the cafe",
            "Bo Tan",
            "When is the fair?",
            1,
            vec![1.0, 0.0],
        ));
        let key = StreamKey::Arena("w:Hobbs Cafe:cafe".into());
        let agent = AgentSettings::default();
        let recalled = recall(Some(&state), Some(&group), &key, at, 2, &agent);
        assert_eq!(
            recalled.first().map(String::as_str),
            Some(told),
            "{recalled:?}"
        );
        assert!(
            recalled.iter().all(|m| !m.contains("Is the fair on?")),
            "{recalled:?}"
        );
        assert_eq!(recalled.len(), 2);
        // With nothing heard of the talk yet, and with recall off, nothing is recalled.
        let other = StreamKey::Arena("w:Hobbs Cafe:kitchen".into());
        assert!(recall(Some(&state), Some(&group), &other, at, 2, &agent).is_empty());
        assert!(recall(Some(&state), Some(&group), &key, at, 0, &agent).is_empty());
        // The recalled come first, then the latest said that are not among them.
        let details = with_recall(
            Details {
                identity: String::new(),
                memories: vec!["said".into(), told.into()],
            },
            recalled,
        );
        assert_eq!(details.memories.len(), 3);
        assert_eq!(details.memories[0], told);
        assert_eq!(details.memories[2], "said");
    }

    #[test]
    fn leaving_a_talk_takes_its_last_lines_and_who_spoke() {
        let mut state = MindState::default();
        state.scratch.name = "Eva Moss".into();
        let key = StreamKey::Arena("w:Hobbs Cafe:cafe".into());
        let mut group = GroupAttention::default();
        assert_eq!(
            group_after_chat(&state, &group, &key),
            None,
            "heard nothing"
        );
        // Two passages remembered, then two lines not remembered yet.
        let settings = GroupSettings::default();
        let shared = SharedPassages::default();
        for (i, who) in [
            "Ann Lee", "Bo Tan", "Eva Moss", "Ann Lee", "Bo Tan", "Ann Lee",
        ]
        .iter()
        .enumerate()
        {
            let line = heard(
                "the cafe",
                who,
                &format!("line {i}"),
                i as i64,
                vec![1.0, 0.0],
            );
            store_passage(
                &mut state,
                &listener("Eva Moss"),
                &[line],
                &settings,
                &shared,
            );
        }
        group
            .pending
            .push(heard("the cafe", "Cy Dunn", "line 6", 6, vec![1.0, 0.0]));
        group.pending.push(heard(
            "the kitchen",
            "Di Roe",
            "elsewhere",
            6,
            vec![1.0, 0.0],
        ));
        let talk = group_after_chat(&state, &group, &key).expect("due");
        assert_eq!(talk.object, "the group in the cafe");
        let said: Vec<&str> = talk.lines.iter().map(|(_, l)| l.as_str()).collect();
        assert_eq!(
            said,
            [
                "line 0", "line 1", "line 2", "line 3", "line 4", "line 5", "line 6"
            ]
        );
        assert_eq!(
            talk.partner, "Ann Lee, Bo Tan and Cy Dunn",
            "everyone but Eva"
        );
    }

    fn pending_time(minute: i64) -> NaiveDateTime {
        chrono::NaiveDate::from_ymd_opt(2023, 2, 13)
            .and_then(|d| d.and_hms_opt(9, 0, 0))
            .expect("a time")
            + chrono::Duration::minutes(minute)
    }

    fn listener(name: &str) -> Someone {
        Someone {
            entity: Entity::PLACEHOLDER,
            name: name.into(),
            first_name: name.split_whitespace().next().unwrap_or_default().into(),
            arena: String::new(),
            home: String::new(),
            asleep: false,
            activity: String::new(),
            chatting: false,
            free: true,
        }
    }

    #[test]
    fn a_passage_is_one_chat_memory_of_its_lines() {
        let settings = GroupSettings::default();
        let mut state = MindState::default();
        let trigger = state.scratch.importance_trigger_curr;
        let long = "word ".repeat(40);
        let mut passage = vec![
            heard("Hobbs Cafe", "Ann Lee", "Hello there", 0, vec![1.0, 0.0]),
            heard("Hobbs Cafe", "Bo Tan", long.trim(), 1, vec![0.0, 1.0]),
            heard("Hobbs Cafe", "Ann Lee", "Eva, coffee?", 2, vec![1.0, 0.0]),
        ];
        passage[2].named = true;
        let shared = SharedPassages::default();
        store_passage(
            &mut state,
            &listener("Eva Moss"),
            &passage,
            &settings,
            &shared,
        );
        let chats: Vec<_> = state.associative.chats().collect();
        assert_eq!(chats.len(), 1, "one memory for the passage");
        let node = chats[0];
        assert_eq!(node.created, pending_time(0), "the time of its first line");
        assert_eq!(node.object, "the group in Hobbs Cafe");
        assert_eq!(
            node.filling
                .chat_lines()
                .iter()
                .map(|l| l.line.as_str())
                .collect::<Vec<_>>(),
            ["Hello there", long.trim(), "Eva, coffee?"],
            "every line whole"
        );
        assert!(node.description.starts_with(
            "Talk in the group in Hobbs Cafe: Ann Lee said \"Hello there\"; Bo Tan said \"word"
        ));
        assert!(
            node.description
                .contains("…\"; Ann Lee said \"Eva, coffee?\""),
            "{}",
            node.description
        );
        assert!(
            node.description.chars().count() < 200,
            "long lines are cut in the description"
        );
        let mut keywords: Vec<&str> = node.keywords.iter().map(String::as_str).collect();
        keywords.sort_unstable();
        assert_eq!(keywords, ["ann lee", "bo tan", "eva moss"]);
        assert_eq!(
            node.poignancy, settings.named_poignancy,
            "a line named the listener"
        );
        assert_eq!(
            state.scratch.importance_trigger_curr,
            trigger - i32::from(settings.named_poignancy),
            "the reflection trigger is drained once for the passage"
        );
        // Its vector is the lines' mean direction: (2, 1) normalised.
        let vector = state
            .associative
            .embedding(&node.embedding_key)
            .expect("a vector");
        let norm = 5.0f32.sqrt();
        assert!((vector[0] - 2.0 / norm).abs() < 1e-5 && (vector[1] - 1.0 / norm).abs() < 1e-5);
        // Another listener of the same lines remembers the same description and vector,
        // made once for both.
        let mut other = MindState::default();
        store_passage(
            &mut other,
            &listener("Bo Tan"),
            &passage,
            &settings,
            &shared,
        );
        let theirs = other.associative.chats().next().expect("a memory");
        assert_eq!(theirs.description, node.description);
        assert_eq!(
            other.associative.embedding(&theirs.embedding_key),
            Some(vector)
        );
        assert_eq!(shared.0.lock().map(|made| made.len()).ok(), Some(1));
        // A prompt shows the latest lines, not the passage.
        assert_eq!(
            latest_said(&state.associative, 2),
            [
                memory_description("Ann Lee", "Hobbs Cafe", "Eva, coffee?"),
                memory_description("Bo Tan", "Hobbs Cafe", long.trim()),
            ]
        );
        // The last chat with either speaker is this one.
        assert!(
            state
                .associative
                .last_chat_with("Bo Tan")
                .is_some_and(|n| n.id == node.id)
        );

        // A passage of one line is that line's memory, as before passages.
        let mut state = MindState::default();
        let one = [heard("Hobbs Cafe", "Ann Lee", "Hi", 0, vec![0.0, 1.0])];
        store_passage(&mut state, &listener("Eva Moss"), &one, &settings, &shared);
        let node = state.associative.chats().next().expect("a memory");
        assert_eq!(
            node.description,
            memory_description("Ann Lee", "Hobbs Cafe", "Hi")
        );
        assert_eq!(node.poignancy, settings.line_poignancy);
    }

    #[test]
    fn a_scene_is_seeded_by_the_persona_not_its_entity() {
        // A load into a running world gives the same persona a new entity: its question to
        // the model (seed included) must stay the same, or the answer and the cache change.
        let stream = super::super::stream::GroupStream::new(
            StreamKey::Arena("town:cafe:counter".into()),
            pending_time(0),
        );
        let settings = GroupSettings::default();
        let seed_of = |entity: u32, name: &str| {
            let mut someone = listener(name);
            someone.entity = Entity::from_raw_u32(entity).expect("an entity");
            let names = BTreeMap::new();
            scene_in(&stream, &someone, Details::default(), &names, &settings, 40).seed
        };
        assert_eq!(seed_of(3, "Eva Moss"), seed_of(907, "Eva Moss"));
        assert_ne!(seed_of(3, "Eva Moss"), seed_of(3, "Bo Tan"));
    }

    #[test]
    fn the_reach_index_lists_the_streams_that_reach_each_persona_in_key_order() {
        let people: Vec<Entity> = (0..6)
            .map(Entity::from_raw_u32)
            .map(Option::unwrap)
            .collect();
        let stream = |key: StreamKey, members: &[usize]| {
            let mut s = super::super::stream::GroupStream::new(key, pending_time(0));
            s.members = members.iter().map(|&i| people[i]).collect();
            s
        };
        let arena = |name: &str| StreamKey::Arena(name.into());
        let channel = |name: &str| StreamKey::Channel(name.into());
        let streams = GroupStreams::from_streams([
            stream(arena("w:s:a"), &[0, 1, 2]),
            stream(arena("w:s:b"), &[2, 3]),
            stream(arena("w:s:empty"), &[]),
            stream(channel("board"), &[]),
            stream(channel("club"), &[1, 4]),
            stream(channel("news"), &[]),
        ]);
        let reach = Reach::of(&streams);
        for &persona in &people {
            let indexed: Vec<&StreamKey> =
                reach.streams_reaching(persona).map(|s| &s.key).collect();
            let scanned: Vec<&StreamKey> = streams
                .iter()
                .filter(|s| s.reaches(persona))
                .map(|s| &s.key)
                .collect();
            assert_eq!(indexed, scanned, "{persona:?}");
        }
        // Everyone hears the open channels; persona 5 is in no stream but hears them.
        assert_eq!(reach.streams_reaching(people[5]).count(), 2);
    }

    #[test]
    fn the_hearers_index_follows_every_move_of_attention() {
        let cafe = StreamKey::Arena("the Ville:Hobbs Cafe:cafe".to_string());
        let park = StreamKey::Arena("the Ville:Park:lawn".to_string());
        let news = StreamKey::Channel("news".to_string());
        let mut world = World::new();
        let with = |flows: &[(&StreamKey, ChatState)]| {
            let mut group = GroupAttention::default();
            for (key, state) in flows {
                group.attention.flow(key).state = *state;
            }
            group
        };
        let a = world
            .spawn(with(&[
                (&cafe, ChatState::Chat),
                (&news, ChatState::Focused),
            ]))
            .id();
        let b = world.spawn(with(&[(&cafe, ChatState::Absent)])).id();
        let c = world
            .spawn(with(&[
                (&park, ChatState::Focused),
                (&cafe, ChatState::Chat),
            ]))
            .id();
        let _nobody = world.spawn(GroupAttention::default()).id();
        let mut hearers = Hearers::of(&mut world);
        let expected = followers_by_scan(&mut world);
        assert_eq!(followed(&hearers), expected);
        assert_eq!(expected[&cafe], BTreeSet::from([a, c]));
        assert!(
            !expected[&cafe].contains(&b),
            "an absent flow hears nothing"
        );

        // A joins nothing new but leaves the cafe; B starts following it and the news.
        world
            .get_mut::<GroupAttention>(a)
            .unwrap()
            .attention
            .flow(&cafe)
            .state = ChatState::Absent;
        {
            let mut group = world.get_mut::<GroupAttention>(b).unwrap();
            group.attention.flow(&cafe).state = ChatState::Focused;
            group.attention.flow(&news).state = ChatState::Chat;
        }
        hearers.refresh(&world, a);
        hearers.refresh(&world, b);
        let expected = followers_by_scan(&mut world);
        assert_eq!(followed(&hearers), expected);
        assert_eq!(expected[&cafe], BTreeSet::from([b, c]));
        assert_eq!(expected[&news], BTreeSet::from([a, b]));

        // A persona that lost its attention altogether follows nothing.
        world.entity_mut(c).remove::<GroupAttention>();
        hearers.refresh(&world, c);
        assert_eq!(followed(&hearers), followers_by_scan(&mut world));
        assert!(!followed(&hearers).contains_key(&park));
    }

    #[test]
    fn a_planned_line_outlives_a_little_crosstalk_but_not_being_named_or_the_beat() {
        let e = |i: u32| Entity::from_raw_u32(i).unwrap_or(Entity::PLACEHOLDER);
        let (ana, bo, cy) = (e(1), e(2), e(3));
        let key = StreamKey::Arena("w:s:cafe".into());
        let now = chrono::NaiveDate::from_ymd_opt(2023, 2, 13)
            .and_then(|d| d.and_hms_opt(9, 0, 0))
            .unwrap_or_default();
        let mut streams = GroupStreams::default();
        assert!(streams.open(key.clone(), now));
        let say = |streams: &mut GroupStreams, who: &str, persona: Option<Entity>, text: &str| {
            streams.say(&key, who, persona, text, false, now);
        };
        say(&mut streams, "Ana Ruiz", Some(ana), "Morning, all!");
        let planned = PlannedLine {
            said: said("Bo Chen", "cafe", "Morning, Ana!".into(), false),
            later: Vec::new(),
            after: streams.get(&key).map_or(0, |s| s.last_seq()),
            seats: vec![ana, bo],
            until: 10,
        };
        let fits = |streams: &GroupStreams, step: u64| {
            streams
                .get(&key)
                .is_some_and(|s| planned.still_fits(s, step, "Bo Chen", "Bo"))
        };
        assert!(fits(&streams, 4));
        // Past its last beat it is stale.
        assert!(!fits(&streams, 11));
        // The round's own seats talking is the exchange it planned, naming Bo or not.
        say(&mut streams, "Ana Ruiz", Some(ana), "Bo, tea?");
        assert!(fits(&streams, 4));
        // Someone else chiming in passes.
        say(&mut streams, "Cy Young", Some(cy), "Lovely weather today.");
        assert!(fits(&streams, 4));
        // Someone else naming Bo deserves a real answer.
        let mut named = streams.clone();
        say(
            &mut named,
            "Cy Young",
            Some(cy),
            "Bo, did you see the match?",
        );
        assert!(!fits(&named, 4));
        // A third line from outside the round (game code's post too): the talk moved on.
        say(
            &mut streams,
            "the notice board",
            None,
            "The cafe closes at six.",
        );
        assert!(fits(&streams, 4), "two lines from outside");
        say(&mut streams, "Cy Young", Some(cy), "Anyone for cards?");
        assert!(!fits(&streams, 4));
    }

    #[test]
    fn only_a_whole_arena_holds_a_group_conversation() {
        assert!(is_arena("Willowbrook:Riverside Cafe:cafe"));
        assert!(is_arena("w:s:a:object"));
        assert!(!is_arena("Willowbrook"));
        assert!(!is_arena("Willowbrook:Main Street"));
        assert!(!is_arena("w::a"));
        assert!(!is_arena(""));
    }

    #[test]
    fn a_crowded_arena_keeps_its_circle() {
        let e = |i: u32| Entity::from_raw_u32(i).unwrap_or(Entity::PLACEHOLDER);
        let present: Vec<Entity> = (1..=20).map(e).collect();
        let mut in_order = present.clone();
        in_order.sort();
        // A new stream takes the first newcomers (in entity order).
        let first = circle(&BTreeSet::new(), &present, 5);
        assert_eq!(first, in_order[..5].iter().copied().collect());
        // Members who stay keep their place ahead of newcomers; one who left makes room.
        let members: BTreeSet<Entity> = [e(7), e(9), e(30)].into_iter().collect();
        let next = circle(&members, &present, 4);
        let newcomers: Vec<Entity> = in_order
            .iter()
            .copied()
            .filter(|x| *x != e(7) && *x != e(9))
            .take(2)
            .collect();
        assert_eq!(
            next,
            [e(7), e(9), newcomers[0], newcomers[1]]
                .into_iter()
                .collect()
        );
        // Never fewer than two seats, never more than are present.
        assert_eq!(circle(&BTreeSet::new(), &present, 0).len(), 2);
        assert_eq!(circle(&BTreeSet::new(), &present[..3], 12).len(), 3);
    }

    #[test]
    fn naming_is_a_whole_word_match() {
        assert!(names("Morning, Ada!", "Ada Lovelace", "Ada"));
        assert!(names("ask ada lovelace", "Ada Lovelace", "Ada"));
        assert!(!names("Canada is cold", "Ada Lovelace", "Ada"));
    }

    #[test]
    fn relevance_to_memories_is_the_closest_memorys_cosine_mapped_to_a_quarter_to_one() {
        let unit = |i: usize| {
            let mut v = vec![0.0_f32; 4];
            v[i] = 1.0;
            v
        };
        let line = unit(0);
        // Nothing to compare with: the caller weighs the words.
        assert_eq!(memory_relevance(&line, std::iter::empty()), None);
        assert_eq!(memory_relevance(&[0.0; 4], [unit(0).as_slice()]), None);
        assert_eq!(memory_relevance(&line, [[1.0_f32, 0.0].as_slice()]), None);
        // Unrelated memories: the base; the same thing remembered: fully relevant.
        assert_eq!(memory_relevance(&line, [unit(1).as_slice()]), Some(0.25));
        let same = [unit(1), unit(0)];
        assert_eq!(
            memory_relevance(&line, same.iter().map(Vec::as_slice)),
            Some(1.0)
        );
        // Halfway between RELEVANT_FROM and RELEVANT_AT: halfway up.
        let cos = (RELEVANT_FROM + RELEVANT_AT) / 2.0;
        let between = [cos, (1.0 - cos * cos).sqrt(), 0.0, 0.0];
        let r = memory_relevance(&line, [between.as_slice()]).expect("comparable");
        assert!((r - (0.25 + 0.75 * 0.5)).abs() < 1e-4, "{r}");
        // Non-finite vectors weigh nothing.
        assert_eq!(memory_relevance(&[f32::NAN; 4], [unit(0).as_slice()]), None);
    }

    #[test]
    fn relevance_grows_with_shared_words() {
        let words = content_words("Ada bakes bread at the bakery every morning");
        let base = relevance("hello there", &words);
        let some = relevance("the bread smells great", &words);
        let most = relevance("bread from the bakery every morning", &words);
        assert!((base - 0.25).abs() < 1e-6);
        assert!(base < some && some < most && most <= 1.0);
    }

    #[test]
    fn shared_words_count_the_line_set_met_by_the_persona_set() {
        let persona = content_words(
            "Ada Lovelace bakes BREAD at the bakery; ΟΔΥΣΣΕΥΣ reads Straße maps in İstanbul",
        );
        let lines = [
            "",
            "hello there",
            "Bread, bread and BREAD from the Bakery!",
            "the bakery's bread: baked by Ada Lovelace",
            "ΟΔΥΣΣΕΥΣ οδυσσευσ straße STRASSE İSTANBUL İstanbul istanbul",
            "lovelace-lovelace_lovelace 1234 12345 über ÜBER",
        ];
        for line in lines {
            let by_sets = content_words(line).intersection(&persona).count();
            assert_eq!(shared_words(line, &persona), by_sets, "{line:?}");
        }
        assert_eq!(
            shared_words("Bread, bread and BREAD from the Bakery!", &persona),
            2
        );
    }

    #[test]
    fn a_personas_words_are_read_again_only_when_who_or_what_changed() {
        let mut cache = PersonaWords::default();
        assert_eq!(cache.words, persona_words("", ""));
        refresh_words(&mut cache, "Ada bakes bread", "kneading dough");
        let first = cache.words.clone();
        assert_eq!(first, persona_words("Ada bakes bread", "kneading dough"));
        refresh_words(&mut cache, "Ada bakes bread", "kneading dough");
        assert_eq!(cache.words, first);
        refresh_words(&mut cache, "Ada bakes bread", "reading poetry");
        assert_eq!(
            cache.words,
            persona_words("Ada bakes bread", "reading poetry")
        );
    }

    #[test]
    fn a_lowered_name_matches_as_names_did() {
        let cases = [
            ("Morning, Ada!", "Ada Lovelace", "Ada", true),
            ("ask ADA LOVELACE", "Ada Lovelace", "Ada", true),
            ("Canada is cold", "Ada Lovelace", "Ada", false),
            ("Canada is cold", "", "", false),
            ("hi Ömer", "Ömer Şahin", "Ömer", true),
        ];
        for (text, name, first, named) in cases {
            assert_eq!(names(text, name, first), named, "{text:?}");
            let lowered = LoweredName::of(name, first);
            assert_eq!(lowered.named_in(&text.to_lowercase()), named, "{text:?}");
        }
    }

    #[test]
    fn the_heart_stream_is_fixed_by_name_and_step() {
        let a: f32 = heart_rng("Ada", 7).random();
        let b: f32 = heart_rng("Ada", 7).random();
        let c: f32 = heart_rng("Ada", 8).random();
        assert_eq!(a, b);
        assert_ne!(a, c);
    }
}
