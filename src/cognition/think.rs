//! The thought: one persona's perceive → retrieve → plan → reflect for one step, run on its
//! checked-out mind, concurrently with every other persona's.
//!
//! Each step, `start_thoughts` (in [`AgentSystems::Think`]) takes a snapshot of everyone's
//! visible action, then for each persona whose mind is home either
//! - does the step's bookkeeping in place when nothing needs a model (`needs_model` is false:
//!   nothing new perceived, the action goes on, no new day, nothing to reflect on) — most steps;
//! - or checks the mind out and builds the `think` future. The future is polled once as a task
//!   on the compute pool, heaviest thoughts first, while the main thread goes on with the step
//!   (the walking): a backend that answers synchronously (the scripted one) finishes there.
//!   `collect_thoughts` (in [`SimPoll`], between steps) waits for those first polls, helping
//!   with them; a thought still waiting on its backend becomes a task on the async compute
//!   pool and the persona is marked [`AwaitingCognition`]. Either way `collect_thoughts` checks
//!   the mind back in, in the order the thoughts started, so the new action is walked from the
//!   next step on, whatever the backend's latency or the threads' timing, and queues what the
//!   game hears of it ([`outcome`](super::outcome)).
//!
//! Each thought runs in a `thought` span (persona, step) and each conversation in a
//! `conversation` span, so the `model_call` spans inside say whose call it was.
//!
//! Meanwhile the persona's [`Body`] and [`ActionView`] stay in the ECS, so it keeps walking and
//! stays visible. A thought that decides to talk returns an intent; `start_conversations`
//! checks both minds out at the start of the next step and runs the conversation as one task.
//! Everything a thought reads from the world is a snapshot taken before any thought of the step
//! ran, so results do not depend on the order personas are processed in.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};

use bevy::ecs::change_detection::Tick;
use bevy::ecs::system::{SystemChangeTick, SystemParam};
use bevy::log::tracing::Instrument;
use bevy::platform::cell::SyncCell;
use bevy::platform::collections::HashMap;
use bevy::prelude::*;
use bevy::tasks::futures_lite::future::poll_once;
use bevy::tasks::{ComputeTaskPool, Task};
use bevy::utils::Parallel;
use chrono::NaiveDateTime;

use crate::clock::{
    AgentSystems, AwaitingCognition, Held, PollSystems, SimClock, SimPoll, SimStep, poll_landing,
    spawn_landing,
};
use crate::llm::LlmClient;
use crate::memory::NodeKind;
use crate::persona::{
    ActionView, Body, Diary, Mind, MindState, NoveltyMemo, PERSONA_BATCHES, Percepts, Persona,
};
use crate::prompt::{FailureLog, ModelFailure, PromptContext, PromptLibrary};
use crate::settings::AgentSettings;
use crate::world::{AddressLevel, TileCoord, TownMap};

use super::chat_stream::{ChatStreamFeed, ChatStreamSettings, ChatStreamSink, open_chat_stream};
use super::converse::{
    Reaction, SpeakerView, choose_focus, conversation_record, decide_reaction, hold_conversation,
    related_memories, start_wait,
};
use super::outcome::{
    ActionStarted, ConversationEnded, ConversationStarted, ModelCallFailed, NewDay, Outcome,
    OutcomeQueue, OutcomeSource, PlanUpdated, ReflectionCompleted,
};
use super::perceive::{form_memories, gather_percepts, recently_perceived};
use super::plan::{day_change, determine_action, plan_new_day};
use super::reflect::{
    chat_thoughts, chat_thoughts_due, group_chat_thoughts, reflect, reflection_due,
};
use super::vocabulary::{AddressBook, ConversationDone, Conversing, OtherPersona, PlanEvent};

/// What a thought needs besides the mind: owned or shared, so it moves into a task.
#[derive(Debug, Clone)]
pub(crate) struct ThoughtInput {
    /// Model client and templates.
    pub ctx: PromptContext,
    /// The simulation's settings.
    pub settings: Arc<AgentSettings>,
    /// The map's addresses.
    pub book: Arc<AddressBook>,
    /// Everyone's visible action at the start of the step.
    pub others: Arc<BTreeMap<String, OtherPersona>>,
    /// The game time of the step.
    pub now: NaiveDateTime,
    /// The step number.
    pub step: u64,
    /// Seconds per step.
    pub sec_per_step: u32,
    /// What the persona perceives.
    pub percepts: Percepts,
    /// Where it stands.
    pub tile: TileCoord,
    /// Whether it is still walking to its action's place.
    pub walking: bool,
}

/// What a thought hands back.
#[derive(Debug)]
pub(crate) struct ThoughtOutcome {
    /// The mind, to check in.
    pub mind: Box<MindState>,
    /// Diary entries.
    pub events: Vec<PlanEvent>,
    /// Whether a new action started (the body must plan a new path).
    pub new_action: bool,
    /// A conversation the persona wants to start.
    pub talk_to: Option<String>,
    /// Model calls that fell back to their fail-safe, in call order.
    pub failures: Vec<ModelFailure>,
}

/// Whether this step's thought needs the model — a reflection due, a new day, a finished action,
/// chat thoughts due, or something new in view — and if so how much work it is likely to be
/// ([`thought_effort`], 0 for something new in view alone). `None`: [`bookkeeping`] is the
/// whole thought.
///
/// `memo` remembers when everything in view was already perceived: while the percepts stay as
/// they were (`percepts_changed`, their change tick) and memory holds the same events, that
/// stays so, and the check is not made again.
fn needs_model(
    mind: &MindState,
    percepts: &Percepts,
    (percepts_changed, memo): (Tick, Option<&mut NoveltyMemo>),
    now: NaiveDateTime,
    sec_per_step: u32,
) -> Option<u8> {
    if let Some(effort) = thought_effort(mind, now, sec_per_step) {
        return Some(effort);
    }
    let Some(memo) = memo else {
        return sees_something_new(mind, percepts).then_some(0);
    };
    let key = (
        percepts_changed,
        mind.associative.count(NodeKind::Event),
        mind.scratch.params.retention,
    );
    if memo.0 == Some(key) {
        return None;
    }
    let new = sees_something_new(mind, percepts);
    memo.0 = (!new).then_some(key);
    new.then_some(0)
}

/// The reasons to ask the model that do not depend on what is in view, ranked by how much work
/// the thought is likely to be, so the heaviest start first (see [`start_first_polls`]): a
/// reflection (focal points, three retrievals, insights, each stored with a rating and an
/// embedding), then a new day's plan, then a new action or chat thoughts. `None` when none is
/// due.
fn thought_effort(mind: &MindState, now: NaiveDateTime, sec_per_step: u32) -> Option<u8> {
    if reflection_due(mind) {
        Some(3)
    } else if day_change(mind.scratch.curr_time, now).is_some() {
        Some(2)
    } else if mind.scratch.act_finished(now)
        || chat_thoughts_due(mind, now, sec_per_step)
        || !mind.scratch.group_after_chats.is_empty()
    {
        Some(1)
    } else {
        None
    }
}

/// Whether an event in view is not among the latest the persona perceived (SPEC §3.1 step 3).
fn sees_something_new(mind: &MindState, percepts: &Percepts) -> bool {
    percepts
        .events
        .iter()
        .any(|event| !recently_perceived(mind, event))
}

/// The part of every step that needs no model (SPEC §3.5, end of plan): time and tile, the
/// chat cool-downs counted down (all but the current partner's, one per elapsed step), and
/// chat state cleared when the action is not a chat.
pub(crate) fn bookkeeping(
    mind: &mut MindState,
    now: NaiveDateTime,
    tile: TileCoord,
    sec_per_step: u32,
) {
    let s = &mut mind.scratch;
    let elapsed = match s.curr_time {
        Some(last) if now > last => {
            let secs = (now - last).num_seconds();
            u32::try_from(secs / i64::from(sec_per_step.max(1))).unwrap_or(u32::MAX)
        }
        _ => 0,
    };
    if elapsed > 0 {
        // One pass: every cool-down but the current partner's runs down, and the spent ones go.
        let partner = s.chatting_with.as_deref();
        s.chatting_with_buffer.retain(|name, steps| {
            if partner != Some(name.as_str()) {
                *steps = steps.saturating_sub(elapsed);
            }
            *steps > 0
        });
    }
    s.curr_time = Some(now);
    s.curr_tile = tile;
    let chatting = s.act_event.is_chat();
    if !chatting {
        s.chatting_with = None;
        s.chat.clear();
        s.chatting_end_time = None;
    }
}

/// One persona's thought for one step (SPEC §3.1–§3.8). Never fails: every model answer has a
/// fail-safe.
pub(crate) async fn think(mut mind: Box<MindState>, input: ThoughtInput) -> ThoughtOutcome {
    let ThoughtInput {
        ctx,
        settings,
        book,
        others,
        now,
        step,
        sec_per_step,
        percepts,
        tile,
        walking,
    } = input;
    let log = FailureLog::default();
    let ctx = ctx
        .with_failure_log(log.clone())
        .with_affinity(&mind.scratch.name);
    let mut events = Vec::new();
    let day = day_change(mind.scratch.curr_time, now);

    // Perceive (the places were learnt when the percepts were gathered).
    let perceived = form_memories(&mut mind, &percepts, &ctx, now, &settings.lean).await;

    // Plan: the day, then the action.
    if let Some(first_day) = day {
        plan_new_day(&mut mind, &ctx, &settings, now, first_day, &mut events).await;
    }
    bookkeeping(&mut mind, now, tile, sec_per_step);
    let mut new_action = false;
    if mind.scratch.act_finished(now) {
        let seed = step ^ u64::from(tile.x as u32) << 32 ^ u64::from(tile.y as u32);
        determine_action(
            &mut mind,
            &ctx,
            &settings,
            &book,
            percepts.sector.as_deref(),
            now,
            seed,
        )
        .await;
        bookkeeping(&mut mind, now, tile, sec_per_step);
        new_action = true;
    }

    // React to what was perceived (retrieval for reactions is by keyword, SPEC §3.2).
    let mut talk_to = None;
    let mut rng = mind.rng.clone();
    let focus = choose_focus(&mind, &perceived, &mut rng);
    mind.rng = rng;
    if let Some(focus) = focus
        && let Some(subject) = mind.associative.node(focus).map(|n| n.subject.clone())
        && let Some(target) = others.get(&subject)
        && subject != mind.scratch.name
    {
        let memories = related_memories(&mind, focus, 10);
        let reaction = decide_reaction(
            &mind,
            &ctx,
            &settings,
            target,
            memories,
            &percepts.arena,
            now,
            walking && !new_action,
        )
        .await;
        match reaction {
            Some(Reaction::Talk(name)) => talk_to = Some(name),
            Some(Reaction::Wait { until, .. }) => {
                start_wait(&mut mind, &ctx, now, tile, target, until).await;
                events.push(PlanEvent::Reaction("wait"));
                new_action = true;
            }
            None => {}
        }
    }

    // Reflect.
    if chat_thoughts_due(&mind, now, sec_per_step) {
        chat_thoughts(&mut mind, &ctx, &settings, now).await;
    }
    group_chat_thoughts(&mut mind, &ctx, &settings, now).await;
    if reflection_due(&mind) {
        reflect(&mut mind, &ctx, &settings, now, &mut events).await;
    }
    let (failures, dropped) = log.take();
    if dropped > 0 {
        warn!(dropped, "more failed model calls than a thought reports");
    }
    debug!(new_action, failures = failures.len(), "thought done");
    ThoughtOutcome {
        mind,
        events,
        new_action,
        talk_to,
        failures,
    }
}

/// A persona's thought in flight.
#[derive(Component)]
pub(crate) struct Thinking(Task<ThoughtOutcome>);

/// Thoughts and conversations that finished while they were started (a backend that answers
/// at once). They are checked in with the others in [`SimPoll`], so a result always lands
/// between steps whatever the backend's latency — Lockstep runs are the same with a slow
/// backend as with an instant one.
#[derive(Resource, Default)]
pub(crate) struct LandedThoughts {
    thoughts: Vec<(Entity, ThoughtOutcome)>,
    conversations: Vec<ConversationDone>,
    /// Conversations started this step and not yet polled: [`start_thoughts`] polls them with
    /// the thoughts, so a long conversation shares the cores with them instead of running
    /// alone before them.
    started: Vec<StartedConversation>,
    /// This step's first polls, running on the compute pool while the rest of the step runs
    /// on the main thread; [`collect_thoughts`] waits for them, in start order.
    first_polls: Vec<FirstPoll>,
}

/// A conversation started and not yet polled: its two sides, its chat feed (when watched),
/// and its future (in a [`SyncCell`]: a resource must be `Sync`, and the future is only ever
/// reached through `&mut`).
type StartedConversation = (
    (Entity, Entity, Option<ChatStreamFeed>),
    SyncCell<BoxedFuture<ConversationDone>>,
);

impl LandedThoughts {
    /// Whether no finished thought or conversation is waiting to be checked in (a save needs
    /// this: a landed result holds a mind outside its persona).
    pub fn is_empty(&self) -> bool {
        self.thoughts.is_empty()
            && self.conversations.is_empty()
            && self.started.is_empty()
            && self.first_polls.is_empty()
    }
}

/// Conversations personas want to start, resolved at the start of the next step.
#[derive(Resource, Debug, Default)]
pub struct ChatIntents(pub Vec<(Entity, String)>);

/// Brings a landed thought back: the mind, the visible action, the diary. Returns whom the
/// persona means to talk to, and its outcomes when someone listens (`listening`).
#[expect(clippy::too_many_arguments, reason = "one persona's landing")]
fn check_in(
    outcome: ThoughtOutcome,
    entity: Entity,
    name: &Name,
    mind: &mut Mind,
    body: &mut Body,
    view: &mut ActionView,
    diary: &mut Diary,
    listening: bool,
) -> CheckedIn {
    let ThoughtOutcome {
        mind: state,
        events,
        new_action,
        talk_to,
        failures,
    } = outcome;
    let time = state.scratch.curr_time.unwrap_or_default();
    let mut outcomes = Vec::new();
    let note = listening.then(|| Landing {
        persona: entity,
        name: name.as_str(),
        time,
        partner: None,
        failures,
        outcomes: &mut outcomes,
    });
    land(state, events, new_action, mind, body, view, diary, note);
    (talk_to.map(|target| (entity, target)), outcomes)
}

/// What the game is told of one persona's landing, when someone listens: who, when, and where
/// the outcomes go.
struct Landing<'a> {
    persona: Entity,
    name: &'a str,
    time: NaiveDateTime,
    /// For a conversation: the other side, and whether this side started it.
    partner: Option<(Entity, bool)>,
    failures: Vec<ModelFailure>,
    outcomes: &'a mut Vec<Outcome>,
}

/// Puts a mind back with its results: a new action re-plans the path, the visible action
/// follows the scratch, the diary records what happened; with a [`Landing`], the outcomes are
/// written in the order the [`outcome`](super::outcome) docs give.
#[expect(clippy::too_many_arguments, reason = "one persona's landing")]
fn land(
    state: Box<MindState>,
    events: Vec<PlanEvent>,
    new_action: bool,
    mind: &mut Mind,
    body: &mut Body,
    view: &mut ActionView,
    diary: &mut Diary,
    mut note: Option<Landing<'_>>,
) {
    if new_action {
        body.path_set = false;
        body.planned_path.clear();
    }
    if !view.mirrors(&state.scratch) {
        let next = ActionView::from_scratch(&state.scratch);
        if let Some(note) = note.as_mut() {
            chat_ended(
                note.persona,
                note.name,
                note.time,
                view,
                &next,
                note.outcomes,
            );
        }
        *view = next;
    }
    let heard = record(diary, &state, events, note.is_some());
    mind.check_in(state);
    let Some(note) = note else { return };
    let persona = note.persona;
    let name = || note.name.to_string();
    let time = note.time;
    if let Some((day, identity_revised)) = heard.new_day {
        note.outcomes.push(Outcome::NewDay(NewDay {
            persona,
            name: name(),
            time,
            date: day.date.unwrap_or_default(),
            wake_up_hour: day.wake_up_hour,
            daily_plan: day.daily_req,
            hourly_schedule: day.hourly_schedule,
            identity_revised,
        }));
    }
    if let Some(schedule) = heard.schedule {
        note.outcomes.push(Outcome::PlanUpdated(PlanUpdated {
            persona,
            name: name(),
            time,
            schedule,
        }));
    }
    if new_action {
        note.outcomes.push(Outcome::ActionStarted(ActionStarted {
            persona,
            name: name(),
            time,
            description: view.description.clone(),
            address: view.address.clone(),
            emoji: view.emoji.clone(),
            end_time: view.end_time,
        }));
    }
    if let (Some(record), Some((partner, initiated))) = (heard.conversation, note.partner) {
        note.outcomes
            .push(Outcome::ConversationStarted(ConversationStarted {
                persona,
                name: name(),
                time,
                partner,
                partner_name: record.with,
                initiated,
                summary: record.summary,
                transcript: view.chat.clone(),
                end_time: record.end,
            }));
    }
    if let Some(insights) = heard.insights {
        note.outcomes
            .push(Outcome::ReflectionCompleted(ReflectionCompleted {
                persona,
                name: name(),
                time,
                insights,
            }));
    }
    for failure in note.failures {
        note.outcomes
            .push(Outcome::ModelCallFailed(ModelCallFailed {
                persona,
                name: name(),
                time,
                prompt_kind: failure.kind,
                reason: failure.reason,
                attempts: failure.attempts,
            }));
    }
}

/// A [`ConversationEnded`] when `view` was a chat and `next` is not that chat any more (the
/// transcript moves out of `view`, which is about to be replaced).
fn chat_ended(
    persona: Entity,
    name: &str,
    time: NaiveDateTime,
    view: &mut ActionView,
    next: &ActionView,
    outcomes: &mut Vec<Outcome>,
) {
    if view.chatting_with.is_none() || view.chatting_with == next.chatting_with {
        return;
    }
    outcomes.push(Outcome::ConversationEnded(ConversationEnded {
        persona,
        name: name.to_string(),
        time,
        partner: None,
        partner_name: view.chatting_with.take().unwrap_or_default(),
        transcript: std::mem::take(&mut view.chat),
    }));
}

/// What [`record`] found worth telling the game (filled only when asked).
#[derive(Default)]
struct Heard {
    /// The new day, and whether the identity was revised for it.
    new_day: Option<(crate::persona::DayRecord, bool)>,
    /// Today's schedule, when it changed.
    schedule: Option<Vec<crate::persona::ScheduleItem>>,
    /// The conversation that started.
    conversation: Option<crate::persona::ConversationRecord>,
    /// The insights of a reflection.
    insights: Option<Vec<String>>,
}

/// Writes plan events and the current schedule into the diary; with `tell`, also returns what
/// the game hears of them.
fn record(diary: &mut Diary, state: &MindState, events: Vec<PlanEvent>, tell: bool) -> Heard {
    let mut heard = Heard::default();
    let changed = !events.is_empty();
    let mut new_day = false;
    let mut identity_revised = false;
    for event in events {
        match event {
            PlanEvent::NewDay(day) => {
                new_day = true;
                if tell {
                    heard.new_day = Some((day.clone(), false));
                }
                let date = day.date.unwrap_or_default();
                let visited = diary.day(date).map(|d| d.arenas_visited.clone());
                let slot = diary.day_mut(date);
                *slot = day;
                if let Some(visited) = visited {
                    slot.arenas_visited.extend(visited);
                }
            }
            PlanEvent::IdentityRevised(date) => {
                identity_revised = true;
                diary.identity_revisions.push(date);
            }
            PlanEvent::Reflected(insights) => {
                diary.reflections += 1;
                if tell {
                    heard.insights.get_or_insert_with(Vec::new).extend(insights);
                }
            }
            PlanEvent::Conversation(record) => {
                *diary.reactions.entry("chat".into()).or_default() += 1;
                if tell {
                    heard.conversation = Some(record.clone());
                }
                diary.conversations.push(record);
            }
            PlanEvent::Reaction(kind) => *diary.reactions.entry(kind.into()).or_default() += 1,
        }
    }
    if let Some((_, revised)) = heard.new_day.as_mut() {
        *revised = identity_revised;
    }
    if let Some(now) = state.scratch.curr_time {
        let date = now.date();
        let schedule = &state.scratch.f_daily_schedule;
        let day = diary.day_mut(date);
        let differs = day.schedule != *schedule;
        if changed || differs {
            day.schedule.clone_from(schedule);
        }
        if tell && (differs || new_day) {
            heard.schedule = Some(schedule.clone());
        }
    }
    heard
}

/// The shared inputs of this step's thoughts.
#[derive(SystemParam)]
pub(crate) struct ThoughtContext<'w> {
    clock: Res<'w, SimClock>,
    settings: Res<'w, AgentSettings>,
    client: Option<Res<'w, LlmClient>>,
    library: Option<Res<'w, PromptLibrary>>,
    map: Option<Res<'w, TownMap>>,
    /// This run's change ticks (what the view of everyone is refreshed against).
    ticks: SystemChangeTick,
}

impl ThoughtContext<'_> {
    fn prompt_context(&self) -> Option<PromptContext> {
        let client = self.client.as_ref()?;
        let library = self.library.as_ref()?;
        Some(
            PromptContext::new((*client).clone(), (*library).clone())
                .with_retries(self.settings.prompt_retries),
        )
    }
}

/// Personas' components a thought reads and writes.
type PersonaItem<'a> = (
    Entity,
    &'a Name,
    &'a mut Mind,
    &'a mut Body,
    &'a mut ActionView,
    &'a mut Diary,
    &'a Percepts,
);

/// Starts the conversations intended last step (both minds checked out together); they are
/// first polled with the thoughts, in [`start_thoughts`].
pub(crate) fn start_conversations(
    cx: ThoughtContext,
    mut intents: ResMut<ChatIntents>,
    mut landed: ResMut<LandedThoughts>,
    mut personas: IdlePersonas<'_, '_>,
    watch: Option<Res<ChatStreamSettings>>,
) {
    if intents.0.is_empty() {
        return;
    }
    let Some(ctx) = cx.prompt_context() else {
        intents.0.clear();
        return;
    };
    let settings = Arc::new(cx.settings.clone());
    let now = cx.clock.now();
    let step = cx.clock.step();
    let by_name: BTreeMap<String, Entity> = personas
        .iter()
        .map(|(e, n, ..)| (n.as_str().to_string(), e))
        .collect();
    let mut wanted = std::mem::take(&mut intents.0);
    wanted.sort_by_key(|(e, _)| {
        personas
            .get(*e)
            .map(|(_, n, ..)| n.as_str().to_string())
            .unwrap_or_default()
    });
    let mut busy: HashSet<Entity> = HashSet::new();
    for (initiator, target_name) in wanted {
        let Some(&target) = by_name.get(&target_name) else {
            continue;
        };
        if initiator == target || busy.contains(&initiator) || busy.contains(&target) {
            continue;
        }
        let Ok([mut a, mut b]) = personas.get_many_mut([initiator, target]) else {
            continue;
        };
        // Re-check what may have changed since the intent: nobody chatting now.
        if a.4.chatting_with.is_some() || b.4.chatting_with.is_some() {
            continue;
        }
        let (Some(mind_a), Some(mind_b)) = (a.2.check_out(), b.2.check_out()) else {
            continue;
        };
        busy.insert(initiator);
        busy.insert(target);
        let views = (
            SpeakerView {
                activity: a.4.description.clone(),
                place: a.6.arena.clone(),
            },
            SpeakerView {
                activity: b.4.description.clone(),
                place: b.6.arena.clone(),
            },
        );
        let (sink, feed) = open_chat_stream(watch.as_deref(), initiator, target).unzip();
        let span = debug_span!(
            "conversation",
            persona = a.1.as_str(),
            partner = b.1.as_str(),
            step
        );
        let future: BoxedFuture<ConversationDone> = Box::pin(
            converse_task(
                initiator,
                mind_a,
                target,
                mind_b,
                views,
                ctx.clone(),
                settings.clone(),
                now,
                step,
                sink,
            )
            .instrument(span),
        );
        landed
            .started
            .push(((initiator, target, feed), SyncCell::new(future)));
    }
}

/// A future boxed so it can be polled in place and then moved into a task.
type BoxedFuture<T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send>>;

/// A future's first poll, run as a task on the compute pool: the future comes back with its
/// result if it finished (a backend that answers at once finishes it there).
type FirstPollTask<T> = Task<(BoxedFuture<T>, Option<T>)>;

/// One first poll of a step: a conversation's (both sides and its chat feed) or a thought's,
/// with the step it started in.
enum FirstPoll {
    Talk(
        (Entity, Entity, Option<ChatStreamFeed>),
        u64,
        FirstPollTask<ConversationDone>,
    ),
    Thought(Entity, u64, FirstPollTask<ThoughtOutcome>),
}

/// A conversation's [`FirstPoll`] done: both sides and the feed, the step, the future and its
/// result if it finished.
type TalkPolled = (
    (Entity, Entity, Option<ChatStreamFeed>),
    u64,
    BoxedFuture<ConversationDone>,
    Option<ConversationDone>,
);

/// A [`FirstPoll`] done (a conversation's boxed: there are few, and they are large).
enum FirstPolled {
    Talk(Box<TalkPolled>),
    Thought(
        Entity,
        u64,
        BoxedFuture<ThoughtOutcome>,
        Option<ThoughtOutcome>,
    ),
}

/// Polls `future` once in a task on the compute pool.
fn first_poll<T: Send + 'static>(mut future: BoxedFuture<T>) -> FirstPollTask<T> {
    ComputeTaskPool::get().spawn(async move {
        let done = poll_once(&mut future).await;
        (future, done)
    })
}

/// Starts the first polls of this step's conversations and thoughts on the compute pool, and
/// returns them in the order the futures were started.
///
/// The conversations start first (each is many model calls), then the thoughts in falling
/// order of `efforts` (one per thought, missing ones count as 0; ties keep their order), so
/// the long ones do not start last and leave one core working alone at the end while the
/// other waits. They run while the main thread goes on with the step (the walking in
/// [`AgentSystems::Execute`] and what follows), and [`collect_thoughts`] helps with what is
/// left: what a thought reads of the world is a snapshot it owns, and its result lands in
/// [`SimPoll`] either way, so where and when it runs changes nothing it does.
fn start_first_polls(
    talks: Vec<StartedConversation>,
    thoughts: Vec<(Entity, BoxedFuture<ThoughtOutcome>)>,
    efforts: &[u8],
    step: u64,
) -> Vec<FirstPoll> {
    let mut polls: Vec<FirstPoll> = talks
        .into_iter()
        .map(|(sides, future)| FirstPoll::Talk(sides, step, first_poll(SyncCell::to_inner(future))))
        .collect();
    let mut order: Vec<usize> = (0..thoughts.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(efforts.get(i).copied().unwrap_or(0)));
    let mut futures: Vec<Option<(Entity, BoxedFuture<ThoughtOutcome>)>> =
        thoughts.into_iter().map(Some).collect();
    let mut started: Vec<Option<FirstPoll>> = (0..futures.len()).map(|_| None).collect();
    for i in order {
        if let (Some((entity, future)), Some(slot)) = (
            futures.get_mut(i).and_then(Option::take),
            started.get_mut(i),
        ) {
            *slot = Some(FirstPoll::Thought(entity, step, first_poll(future)));
        }
    }
    polls.extend(started.into_iter().flatten());
    polls
}

/// Waits for a step's first polls — this thread runs the pool's tasks meanwhile, the polls'
/// among them — and settles them in start order: a finished conversation or thought is queued
/// to land; the others become tasks on the async pool (a conversation with its chat feed, both
/// sides and a thinking persona awaiting cognition).
fn settle_first_polls(commands: &mut Commands, landed: &mut LandedThoughts, polls: Vec<FirstPoll>) {
    // One waiting task, reading the polls in order; the scope runs the pool's tasks on this
    // thread until it is done.
    let done = ComputeTaskPool::get().scope(|scope| {
        scope.spawn(async move {
            let mut done = Vec::with_capacity(polls.len());
            for poll in polls {
                done.push(match poll {
                    FirstPoll::Talk(sides, step, task) => {
                        let (future, result) = task.await;
                        FirstPolled::Talk(Box::new((sides, step, future, result)))
                    }
                    FirstPoll::Thought(entity, step, task) => {
                        let (future, result) = task.await;
                        FirstPolled::Thought(entity, step, future, result)
                    }
                });
            }
            done
        });
    });
    for polled in done.into_iter().flatten() {
        match polled {
            FirstPolled::Talk(talk) => {
                let ((initiator, target, feed), step, future, done) = *talk;
                if let Some(done) = done {
                    landed.conversations.push(done);
                    continue;
                }
                let task = spawn_landing(future);
                commands
                    .entity(initiator)
                    .insert((Conversing(task), AwaitingCognition::new(step)));
                if let Some(feed) = feed {
                    commands.entity(initiator).insert(feed);
                }
                commands.entity(target).insert(AwaitingCognition::new(step));
            }
            FirstPolled::Thought(entity, _, _, Some(outcome)) => {
                landed.thoughts.push((entity, outcome));
            }
            FirstPolled::Thought(entity, step, future, None) => {
                let task = spawn_landing(future);
                commands
                    .entity(entity)
                    .insert((Thinking(task), AwaitingCognition::new(step)));
            }
        }
    }
}

#[expect(clippy::too_many_arguments, reason = "both sides of a conversation")]
async fn converse_task(
    initiator: Entity,
    mut a: Box<MindState>,
    partner: Entity,
    mut b: Box<MindState>,
    views: (SpeakerView, SpeakerView),
    ctx: PromptContext,
    settings: Arc<AgentSettings>,
    now: NaiveDateTime,
    step: u64,
    stream: Option<ChatStreamSink>,
) -> ConversationDone {
    let log = FailureLog::default();
    // Both sides' lines go to the initiator's server: one conversation, one prefix cache.
    let ctx = ctx
        .with_failure_log(log.clone())
        .with_affinity(&a.scratch.name);
    let outcome =
        hold_conversation(&mut a, &mut b, views, &ctx, &settings, now, stream.as_ref()).await;
    let a_event = conversation_record(&b.scratch.name, &outcome, now, step);
    let b_event = conversation_record(&a.scratch.name, &outcome, now, step);
    let (failures, _) = log.take();
    debug!(lines = outcome.lines.len(), "conversation done");
    ConversationDone {
        initiator: (initiator, a, a_event),
        partner: (partner, b, b_event),
        failures,
    }
}

type PersonaRef<'a> = (
    Entity,
    &'a Name,
    Mut<'a, Mind>,
    Mut<'a, Body>,
    Mut<'a, ActionView>,
    Mut<'a, Diary>,
    &'a Percepts,
);

/// Lands both sides of a conversation, the initiator first; each side's outcomes carry the
/// conversation's failed calls made for it (`ModelCallFailed` names the persona whose call
/// failed).
fn finish_conversation<'a>(
    done: ConversationDone,
    a: &mut PersonaRef<'a>,
    b: &mut PersonaRef<'a>,
    mut queue: Option<&mut OutcomeQueue>,
) {
    let ConversationDone {
        initiator,
        partner,
        failures,
    } = done;
    let (a_entity, b_entity) = (a.0, b.0);
    // Each side is told of its own failed calls: the partner's lines and chat are its calls.
    let b_name = b.1.as_str().to_owned();
    let (b_failures, a_failures): (Vec<ModelFailure>, Vec<ModelFailure>) = failures
        .into_iter()
        .partition(|f| f.speaker.as_deref() == Some(b_name.as_str()));
    let mut failures = [Some(a_failures), Some(b_failures)];
    for (index, ((_, state, event), side, other, initiated)) in [
        (initiator, &mut *a, b_entity, true),
        (partner, &mut *b, a_entity, false),
    ]
    .into_iter()
    .enumerate()
    {
        let time = match &event {
            PlanEvent::Conversation(record) => record.start,
            _ => state.scratch.curr_time.unwrap_or_default(),
        };
        let mut outcomes = Vec::new();
        let note = queue.is_some().then(|| Landing {
            persona: side.0,
            name: side.1.as_str(),
            time,
            partner: Some((other, initiated)),
            failures: failures[index].take().unwrap_or_default(),
            outcomes: &mut outcomes,
        });
        land(
            state,
            vec![event],
            true,
            &mut side.2,
            &mut side.3,
            &mut side.4,
            &mut side.5,
            note,
        );
        if let Some(queue) = queue.as_deref_mut() {
            queue.extend(OutcomeSource::Conversation, outcomes);
        }
    }
}

/// Personas whose mind is home (and who are not held).
type IdlePersonas<'w, 's> =
    Query<'w, 's, PersonaItem<'static>, (With<Persona>, Without<AwaitingCognition>, Without<Held>)>;
/// [`IdlePersonas`] with when their percepts changed and their [`NoveltyMemo`].
type ThinkingPersonas<'w, 's> = Query<
    'w,
    's,
    (
        PersonaItem<'static>,
        Ref<'static, Percepts>,
        Option<&'static mut NoveltyMemo>,
    ),
    (With<Persona>, Without<AwaitingCognition>, Without<Held>),
>;
/// Every persona's name and visible action, with their change ticks.
type Everyone<'w, 's> =
    Query<'w, 's, (Ref<'static, Name>, Ref<'static, ActionView>), With<Persona>>;

/// The thoughts' view of everyone, and the system tick it was last brought up to date at.
#[derive(Default)]
pub(crate) struct OthersView {
    map: Arc<BTreeMap<String, OtherPersona>>,
    since: Option<Tick>,
}

/// Brings the thoughts' view of everyone up to date: the entries whose action changed since
/// `since` are replaced and the rest kept (most personas keep their action from one step to the
/// next, and theirs are not even compared); when the names differ from the map's (a persona
/// came, went, was renamed or shares a name) it is built anew — either way it equals a map
/// built from scratch. `since = None` compares every entry.
fn refresh_others(
    others: &mut BTreeMap<String, OtherPersona>,
    everyone: &Everyone,
    since: Option<Tick>,
    this_run: Tick,
) {
    let changed = |tick: Tick| since.is_none_or(|since| tick.is_newer_than(since, this_run));
    let mut rebuild = others.len() != everyone.iter().len();
    if !rebuild {
        for (name, view) in everyone {
            if changed(name.last_changed()) {
                rebuild = true;
                break;
            }
            if !changed(view.last_changed()) {
                continue;
            }
            match others.get_mut(name.as_str()) {
                Some(other) if other.shows(&view) => {}
                Some(other) => *other = OtherPersona::of(name.as_str(), &view),
                None => {
                    rebuild = true;
                    break;
                }
            }
        }
    }
    if rebuild {
        others.clear();
        for (name, view) in everyone {
            others.insert(
                name.as_str().to_string(),
                OtherPersona::of(name.as_str(), &view),
            );
        }
    }
}

/// Starts this step's thoughts (see the module docs).
pub(crate) fn start_thoughts(
    cx: ThoughtContext,
    mut landed: ResMut<LandedThoughts>,
    queue: Option<ResMut<OutcomeQueue>>,
    mut book: Local<Option<Arc<AddressBook>>>,
    mut others: Local<OthersView>,
    mut queries: ParamSet<(ThinkingPersonas, Everyone)>,
) {
    let step = cx.clock.step();
    let talks = std::mem::take(&mut landed.started);
    let (started, efforts) = 'think: {
        let Some(map) = cx.map.as_ref() else {
            break 'think Default::default();
        };
        let Some(ctx) = cx.prompt_context() else {
            break 'think Default::default();
        };
        let book = book
            .get_or_insert_with(|| Arc::new(AddressBook::of(map)))
            .clone();
        let now = cx.clock.now();
        let sec_per_step = cx.clock.sec_per_step();
        let settings = Arc::new(cx.settings.clone());
        // Most personas most steps need no model: their bookkeeping is done here, in parallel and
        // in any order (it touches only their own mind), and only the others go on to think — in
        // name order, whichever thread found them.
        let mut found: Parallel<Vec<(String, Entity, u8)>> = Parallel::default();
        let mut ended: Parallel<Vec<Outcome>> = Parallel::default();
        let listening = queue.is_some();
        queries
            .p0()
            .par_iter_mut()
            .batching_strategy(PERSONA_BATCHES)
            .for_each(
                |((entity, name, mut mind, body, mut view, _, percepts), changed, mut memo)| {
                    let Some(state) = mind.get_mut() else {
                        return;
                    };
                    let memo = (changed.last_changed(), memo.as_deref_mut());
                    if let Some(effort) = needs_model(state, percepts, memo, now, sec_per_step) {
                        found
                            .scope(|needy| needy.push((name.as_str().to_string(), entity, effort)));
                        return;
                    }
                    bookkeeping(state, now, body.tile, sec_per_step);
                    if view.chatting_with.is_some() && state.scratch.chatting_with.is_none() {
                        let next = ActionView::from_scratch(&state.scratch);
                        if listening {
                            ended.scope(|ended| {
                                chat_ended(entity, name.as_str(), now, &mut view, &next, ended)
                            });
                        }
                        *view = next;
                    }
                },
            );
        if let Some(mut queue) = queue {
            let mut outcomes = Vec::new();
            ended.drain_into(&mut outcomes);
            queue.extend(OutcomeSource::Bookkeeping, outcomes);
        }
        let mut needy: Vec<(String, Entity, u8)> = Vec::new();
        found.drain_into(&mut needy);
        if needy.is_empty() {
            break 'think Default::default();
        }
        needy.sort();

        let this_run = cx.ticks.this_run();
        let since = others.since.replace(this_run);
        refresh_others(
            Arc::make_mut(&mut others.map),
            &queries.p1(),
            since,
            this_run,
        );
        let others = Arc::clone(&others.map);

        let mut personas = queries.p0();
        let mut started: Vec<(Entity, BoxedFuture<ThoughtOutcome>)> = Vec::new();
        let mut efforts = Vec::new();
        for (name, entity, effort) in needy {
            let Ok(((entity, _, mut mind, body, _, _, percepts), _, _)) = personas.get_mut(entity)
            else {
                continue;
            };
            let Some(state) = mind.check_out() else {
                continue;
            };
            let input = ThoughtInput {
                ctx: ctx.clone(),
                settings: settings.clone(),
                book: book.clone(),
                others: others.clone(),
                now,
                step,
                sec_per_step,
                percepts: percepts.clone(),
                tile: body.tile,
                walking: !body.planned_path.is_empty(),
            };
            let span = debug_span!("thought", persona = name.as_str(), step);
            efforts.push(effort);
            started.push((entity, Box::pin(think(state, input).instrument(span))));
        }
        (started, efforts)
    };
    // This step's conversations and thoughts are polled once on the compute pool, the longest
    // first, while this thread goes on with the step; they land in `SimPoll` either way, in
    // the order they were started.
    let polls = start_first_polls(talks, started, &efforts, step);
    landed.first_polls.extend(polls);
}

/// What checking in one thought gives back: whom the persona means to talk to, and its
/// outcomes (when someone listens).
type CheckedIn = (Option<(Entity, String)>, Vec<Outcome>);

/// From this many landed thoughts on, [`collect_thoughts`] lands them in parallel.
const PARALLEL_LANDING_MIN: usize = 64;

/// Checks in every landed thought, returning each one's chat intent and outcomes in the
/// thoughts' order. Many land in parallel, each on its own persona; a list that names a
/// persona twice (never made by the thought loop) lands one by one.
fn land_all(
    thoughts: Vec<(Entity, ThoughtOutcome)>,
    personas: &mut Query<PersonaItem, With<Persona>>,
    listening: bool,
) -> Vec<CheckedIn> {
    let one_by_one = |thoughts: Vec<(Entity, ThoughtOutcome)>,
                      personas: &mut Query<PersonaItem, With<Persona>>| {
        thoughts
            .into_iter()
            .filter_map(|(entity, outcome)| {
                let (entity, name, mut mind, mut body, mut view, mut diary, _) =
                    personas.get_mut(entity).ok()?;
                Some(check_in(
                    outcome, entity, name, &mut mind, &mut body, &mut view, &mut diary, listening,
                ))
            })
            .collect()
    };
    if thoughts.len() < PARALLEL_LANDING_MIN {
        return one_by_one(thoughts, personas);
    }
    let slots: HashMap<Entity, usize> = thoughts
        .iter()
        .enumerate()
        .map(|(i, (entity, _))| (*entity, i))
        .collect();
    if slots.len() != thoughts.len() {
        return one_by_one(thoughts, personas);
    }
    let outcomes: Vec<Mutex<Option<ThoughtOutcome>>> = thoughts
        .into_iter()
        .map(|(_, outcome)| Mutex::new(Some(outcome)))
        .collect();
    let mut checked_in: Parallel<Vec<(usize, CheckedIn)>> = Parallel::default();
    personas
        .par_iter_mut()
        .batching_strategy(PERSONA_BATCHES)
        .for_each(
            |(entity, name, mut mind, mut body, mut view, mut diary, _)| {
                let Some(&i) = slots.get(&entity) else {
                    return;
                };
                let outcome = outcomes
                    .get(i)
                    .and_then(|cell| cell.lock().ok().and_then(|mut cell| cell.take()));
                let Some(outcome) = outcome else {
                    return;
                };
                let landed = check_in(
                    outcome, entity, name, &mut mind, &mut body, &mut view, &mut diary, listening,
                );
                checked_in.scope(|all| all.push((i, landed)));
            },
        );
    let mut all = Vec::new();
    checked_in.drain_into(&mut all);
    all.sort_by_key(|(i, _)| *i);
    all.into_iter().map(|(_, landed)| landed).collect()
}

/// Checks in the thoughts and conversations that landed (runs in [`SimPoll`]).
///
/// From [`PARALLEL_LANDING_MIN`] thoughts on they land in parallel (each touches only its own
/// persona); either way the chat intents and outcomes are kept in the order the thoughts
/// landed in.
pub(crate) fn collect_thoughts(
    mut commands: Commands,
    mut intents: ResMut<ChatIntents>,
    mut landed: ResMut<LandedThoughts>,
    mut thinking: Query<(Entity, &mut Thinking)>,
    mut conversing: Query<(Entity, &mut Conversing)>,
    mut personas: Query<PersonaItem, With<Persona>>,
    mut queue: Option<ResMut<OutcomeQueue>>,
) {
    let polls = std::mem::take(&mut landed.first_polls);
    if !polls.is_empty() {
        settle_first_polls(&mut commands, &mut landed, polls);
    }
    let mut thoughts = std::mem::take(&mut landed.thoughts);
    for (entity, mut task) in &mut thinking {
        if let Some(outcome) = poll_landing(&mut task.0) {
            thoughts.push((entity, outcome));
            commands
                .entity(entity)
                .remove::<(Thinking, AwaitingCognition)>();
        }
    }
    let listening = queue.is_some();
    for (intent, outcomes) in land_all(thoughts, &mut personas, listening) {
        intents.0.extend(intent);
        if let Some(queue) = queue.as_deref_mut() {
            queue.extend(OutcomeSource::Thought, outcomes);
        }
    }
    let mut conversations = std::mem::take(&mut landed.conversations);
    for (entity, mut task) in &mut conversing {
        let Some(done) = poll_landing(&mut task.0) else {
            continue;
        };
        commands.entity(entity).remove::<Conversing>();
        commands
            .entity(done.initiator.0)
            .remove::<AwaitingCognition>();
        commands
            .entity(done.partner.0)
            .remove::<AwaitingCognition>();
        conversations.push(done);
    }
    for done in conversations {
        let (a, b) = (done.initiator.0, done.partner.0);
        if let Ok([mut pa, mut pb]) = personas.get_many_mut([a, b]) {
            finish_conversation(done, &mut pa, &mut pb, queue.as_deref_mut());
        }
    }
}

/// Records the arena each persona stands in, per day (runs in [`AgentSystems::Last`]).
pub(crate) fn record_visits(
    clock: Res<SimClock>,
    map: Option<Res<TownMap>>,
    mut personas: Query<(&Body, &mut Diary), With<Persona>>,
) {
    let Some(map) = map else { return };
    let date = clock.now().date();
    for (body, mut diary) in &mut personas {
        if body.tile == body.previous_tile && !diary.days.is_empty() {
            continue;
        }
        if let Some(arena) = map.tile_path_string(body.tile, AddressLevel::Arena)
            && arena.split(':').count() == 3
        {
            let day = diary.day_mut(date);
            if !day.arenas_visited.contains(&arena) {
                day.arenas_visited.insert(arena);
            }
        }
    }
}

/// The thinking stages: percepts gathered in [`AgentSystems::Perceive`]; conversations and
/// thoughts started in [`AgentSystems::Think`] (a thought runs retrieve, plan, react and
/// reflect in order on the mind); results checked in in [`PollSystems::LandThoughts`]; visits
/// recorded in [`AgentSystems::Last`].
#[derive(Default)]
pub struct ThinkPlugin;

impl Plugin for ThinkPlugin {
    fn build(&self, app: &mut App) {
        app.init_resource::<ChatIntents>()
            .init_resource::<LandedThoughts>()
            .add_systems(SimStep, gather_percepts.in_set(AgentSystems::Perceive))
            .add_systems(
                SimStep,
                (start_conversations, start_thoughts)
                    .chain()
                    .in_set(AgentSystems::Think),
            )
            .add_systems(SimStep, record_visits.in_set(AgentSystems::Last))
            .add_systems(SimPoll, collect_thoughts.in_set(PollSystems::LandThoughts));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::persona::Scratch;
    use chrono::NaiveDate;

    fn at(h: u32, m: u32, s: u32) -> NaiveDateTime {
        NaiveDate::from_ymd_opt(2023, 2, 13)
            .and_then(|d| d.and_hms_opt(h, m, s))
            .unwrap_or_default()
    }

    /// `n` personas and one landed thought each, listed in reverse spawn order: persona `i`
    /// now does "task i", starts a new action when `i` is even and means to talk to P0 when
    /// `i` is a multiple of three.
    fn landing(n: usize) -> (World, Vec<(Entity, ThoughtOutcome)>) {
        let mut world = World::new();
        let mut thoughts = Vec::new();
        for i in 0..n {
            // The mind is out, in its thought.
            let mut mind = Mind::new(MindState::default());
            let _ = mind.check_out();
            let entity = world
                .spawn((
                    Persona,
                    Name::new(format!("P{i}")),
                    mind,
                    Body::default(),
                    ActionView::default(),
                    Diary::default(),
                    Percepts::default(),
                ))
                .id();
            let mut state = MindState::default();
            state.scratch.act_description = Some(format!("task {i}"));
            let outcome = ThoughtOutcome {
                mind: Box::new(state),
                events: Vec::new(),
                new_action: i % 2 == 0,
                talk_to: (i % 3 == 0).then(|| "P0".to_string()),
                failures: Vec::new(),
            };
            thoughts.push((entity, outcome));
        }
        thoughts.reverse();
        (world, thoughts)
    }

    #[test]
    fn first_polls_settle_in_start_order_and_the_unfinished_become_tasks() {
        use bevy::ecs::world::CommandQueue;
        use bevy::tasks::{AsyncComputeTaskPool, TaskPool};
        ComputeTaskPool::get_or_init(TaskPool::default);
        AsyncComputeTaskPool::get_or_init(TaskPool::default);
        let (mut world, outcomes) = landing(6);
        // Thought 2 is the heaviest (started first on the pool); 1 and 4 wait on a backend
        // that never answers; the others finish at once, whatever order they run in.
        let efforts = [0, 1, 3, 0, 0, 1];
        let entities: Vec<Entity> = outcomes.iter().map(|(entity, _)| *entity).collect();
        let futures: Vec<(Entity, BoxedFuture<ThoughtOutcome>)> = outcomes
            .into_iter()
            .enumerate()
            .map(|(i, (entity, outcome))| {
                let future: BoxedFuture<ThoughtOutcome> = if i == 1 || i == 4 {
                    Box::pin(async move {
                        std::future::pending::<()>().await;
                        outcome
                    })
                } else {
                    Box::pin(async move { outcome })
                };
                (entity, future)
            })
            .collect();
        let polls = start_first_polls(Vec::new(), futures, &efforts, 7);
        assert_eq!(polls.len(), 6);
        let mut landed = LandedThoughts {
            first_polls: polls,
            ..Default::default()
        };
        assert!(!landed.is_empty(), "a save waits for first polls too");
        let mut queue = CommandQueue::default();
        let mut commands = Commands::new(&mut queue, &world);
        let polls = std::mem::take(&mut landed.first_polls);
        settle_first_polls(&mut commands, &mut landed, polls);
        queue.apply(&mut world);
        let finished: Vec<Entity> = landed.thoughts.iter().map(|(entity, _)| *entity).collect();
        let expected: Vec<Entity> = [0, 2, 3, 5].iter().map(|&i| entities[i]).collect();
        assert_eq!(finished, expected);
        for (i, entity) in entities.iter().enumerate() {
            let waiting = i == 1 || i == 4;
            assert_eq!(
                world.get::<Thinking>(*entity).is_some(),
                waiting,
                "thought {i}"
            );
            assert_eq!(
                world
                    .get::<AwaitingCognition>(*entity)
                    .map(|a| a.since_step),
                waiting.then_some(7),
                "thought {i}"
            );
        }
    }

    #[test]
    fn thoughts_land_in_their_order_one_by_one_and_in_parallel() {
        use bevy::ecs::system::SystemState;
        use bevy::tasks::TaskPool;
        ComputeTaskPool::get_or_init(TaskPool::default);
        for n in [PARALLEL_LANDING_MIN / 2, PARALLEL_LANDING_MIN * 2] {
            let (mut world, thoughts) = landing(n);
            let order: Vec<Entity> = thoughts.iter().map(|(entity, _)| *entity).collect();
            let mut state: SystemState<Query<PersonaItem, With<Persona>>> =
                SystemState::new(&mut world);
            let Ok(mut personas) = state.get_mut(&mut world) else {
                panic!("the query is valid");
            };
            let landed = land_all(thoughts, &mut personas, true);
            assert_eq!(landed.len(), n);
            for ((intent, outcomes), entity) in landed.iter().zip(&order) {
                let Some(name) = world.get::<Name>(*entity).map(Name::as_str) else {
                    panic!("every persona is still there");
                };
                let Some(i) = name.strip_prefix('P').and_then(|i| i.parse::<usize>().ok()) else {
                    panic!("names are P and a number");
                };
                assert_eq!(
                    *intent,
                    (i % 3 == 0).then(|| (*entity, "P0".to_string())),
                    "{name}"
                );
                let started: Vec<&str> = outcomes
                    .iter()
                    .filter_map(|outcome| match outcome {
                        Outcome::ActionStarted(started) => Some(started.name.as_str()),
                        _ => None,
                    })
                    .collect();
                assert_eq!(started, if i % 2 == 0 { vec![name] } else { vec![] });
                let view = world
                    .get::<ActionView>(*entity)
                    .map(|v| v.description.clone());
                assert_eq!(view, Some(format!("task {i}")));
                assert!(world.get::<Mind>(*entity).is_some_and(Mind::is_home));
            }
        }
    }

    #[test]
    fn the_view_of_everyone_is_kept_equal_to_one_built_from_scratch() {
        use bevy::ecs::system::SystemState;
        let mut world = World::new();
        let view = |description: &str, end: Option<NaiveDateTime>| ActionView {
            description: description.into(),
            end_time: end,
            ..Default::default()
        };
        let ana = world
            .spawn((
                Persona,
                Name::new("Ana"),
                view("reading", Some(at(9, 0, 0))),
            ))
            .id();
        world.spawn((Persona, Name::new("Bo"), view("sleeping", None)));
        let mut state: SystemState<Everyone> = SystemState::new(&mut world);
        let fresh = |world: &mut World, state: &mut SystemState<Everyone>| {
            let Ok(everyone) = state.get(world) else {
                panic!("the query is valid");
            };
            let mut map = BTreeMap::new();
            for (name, view) in &everyone {
                map.insert(name.to_string(), OtherPersona::of(name.as_str(), &view));
            }
            map
        };
        let mut others = BTreeMap::new();
        // As the system keeps it: the tick of the last refresh; changes after it get newer ones.
        let mut since = None;
        let mut check = |world: &mut World, others: &mut BTreeMap<String, OtherPersona>| {
            let this_run = world.change_tick();
            let Ok(everyone) = state.get(world) else {
                panic!("the query is valid");
            };
            refresh_others(others, &everyone, since.replace(this_run), this_run);
            world.increment_change_tick();
            assert_eq!(*others, fresh(world, &mut state));
        };
        check(&mut world, &mut others);
        assert!(others["Bo"].sleeping && !others["Ana"].sleeping);
        // One action changes, then its end alone.
        world
            .entity_mut(ana)
            .insert(view("asleep in bed", Some(at(9, 0, 0))));
        check(&mut world, &mut others);
        assert!(others["Ana"].sleeping);
        world
            .entity_mut(ana)
            .insert(view("asleep in bed", Some(at(9, 30, 0))));
        check(&mut world, &mut others);
        assert_eq!(others["Ana"].end_time, Some(at(9, 30, 0)));
        // Someone comes; someone is renamed (same count, a name the map lacks); one leaves.
        let cy = world
            .spawn((Persona, Name::new("Cy"), view("cooking", None)))
            .id();
        check(&mut world, &mut others);
        world.entity_mut(cy).insert(Name::new("Cyd"));
        check(&mut world, &mut others);
        assert!(others.contains_key("Cyd") && !others.contains_key("Cy"));
        world.entity_mut(ana).despawn();
        check(&mut world, &mut others);
        assert_eq!(others.len(), 2);
    }

    #[test]
    fn the_novelty_memo_answers_as_the_check_while_percepts_and_memory_stay() {
        use crate::memory::NewMemory;
        use crate::world::TileEvent;
        let mut mind = MindState {
            scratch: Scratch {
                curr_time: Some(at(8, 0, 0)),
                act_address: crate::world::ActionAddress::parse("w:s:a:o").ok(),
                act_start_time: Some(at(8, 0, 0)),
                act_duration: Some(60),
                ..Default::default()
            },
            ..Default::default()
        };
        let seen = |mind: &mut MindState, s: &str, o: &str| {
            let memory = NewMemory::new(at(8, 0, 0), (s, "reads", o), format!("{s} reads {o}"))
                .embedding(vec![1.0, 0.0]);
            let Ok(_) = mind.associative.add_event(memory, Vec::new()) else {
                panic!("adding must work");
            };
        };
        let event = |s: &str, o: &str| TileEvent {
            subject: s.into(),
            predicate: Some("reads".into()),
            object: Some(o.into()),
            description: None,
        };
        seen(&mut mind, "Bo", "book");
        let percepts = Percepts {
            events: vec![event("Bo", "book")],
            ..Default::default()
        };
        let (tick, now) = (Tick::new(7), at(8, 0, 10));
        let mut memo = NoveltyMemo::default();
        // Nothing new: the answer is remembered for these percepts and this memory.
        assert!(needs_model(&mind, &percepts, (tick, Some(&mut memo)), now, 10).is_none());
        assert!(memo.0.is_some());
        assert!(needs_model(&mind, &percepts, (tick, Some(&mut memo)), now, 10).is_none());
        // New percepts (a new change tick) are checked again, and something new is new.
        let mut changed = percepts.clone();
        changed.events.push(event("Cy", "map"));
        let tick = Tick::new(8);
        assert_eq!(
            needs_model(&mind, &changed, (tick, Some(&mut memo)), now, 10),
            Some(0)
        );
        assert_eq!(memo.0, None);
        // Memory moving on is a new answer too: once seen, the map is no news…
        seen(&mut mind, "Cy", "map");
        assert!(needs_model(&mind, &changed, (tick, Some(&mut memo)), now, 10).is_none());
        // …and after five more events the book has left the window, whatever the memo held.
        for k in 0..5 {
            seen(&mut mind, "Di", &format!("page {k}"));
        }
        assert_eq!(
            needs_model(&mind, &changed, (tick, Some(&mut memo)), now, 10),
            Some(0)
        );
        assert_eq!(
            needs_model(&mind, &changed, (tick, None), now, 10),
            needs_model(&mind, &changed, (tick, Some(&mut memo)), now, 10)
        );
    }

    #[test]
    fn bookkeeping_counts_down_cooldowns_but_not_the_partner() {
        let mut mind = MindState {
            scratch: Scratch {
                curr_time: Some(at(8, 0, 0)),
                chatting_with: Some("B".into()),
                act_event: crate::persona::EventTriple::chat("A", "B"),
                ..Default::default()
            },
            ..Default::default()
        };
        mind.scratch.chatting_with_buffer.insert("B".into(), 800);
        mind.scratch.chatting_with_buffer.insert("C".into(), 3);
        bookkeeping(&mut mind, at(8, 0, 20), TileCoord::new(1, 1), 10);
        assert_eq!(mind.scratch.chatting_with_buffer.get("B"), Some(&800));
        assert_eq!(mind.scratch.chatting_with_buffer.get("C"), Some(&1));
        assert_eq!(mind.scratch.chatting_with.as_deref(), Some("B"));
        // Once the action is no chat, the chat state is cleared.
        mind.scratch.act_event = crate::persona::EventTriple::new("A", "is", "reading");
        bookkeeping(&mut mind, at(8, 0, 30), TileCoord::new(1, 1), 10);
        assert_eq!(mind.scratch.chatting_with, None);
        assert_eq!(mind.scratch.chatting_with_buffer.get("C"), None);
    }
}
