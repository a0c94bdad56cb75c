//! Outcome events: what the personas did, told to the game as it lands.
//!
//! Each outcome is both an [`EntityEvent`] targeting the persona (react with an observer,
//! `app.add_observer(|started: On<ActionStarted>| …)` or on one persona with
//! `commands.entity(persona).observe(…)`) and a [`Message`] (read in any system with a
//! `MessageReader<ActionStarted>`). The two carry the same values in the same order.
//!
//! | event | fires when | carries |
//! | --- | --- | --- |
//! | [`ActionStarted`] | a persona starts a new action (planned, a wait, or a chat) | description, address, emoji, end time |
//! | [`PlanUpdated`] | the day's schedule changed (planned, decomposed, re-planned around a reaction) | the schedule |
//! | [`NewDay`] | a persona woke into a new day and planned it | date, wake-up hour, daily plan, hourly schedule |
//! | [`ConversationStarted`] | a conversation was held and its chat begins (one event per side) | partner, summary, transcript, end |
//! | [`ConversationEnded`] | a persona's chat action is over | partner, transcript |
//! | [`ReflectionCompleted`] | a reflection stored its insights | the insights |
//! | [`ModelCallFailed`] | a prompt fell back to its fail-safe, or an embedding failed | prompt kind, reason, attempts |
//!
//! Every event carries the persona's entity and name and the game time of the step whose
//! thought produced it.
//!
//! ## When and in which order
//!
//! Outcomes are sent in [`PollSystems::SendOutcomes`](crate::clock::PollSystems), in
//! [`SimPoll`] right after thoughts land — so before the next step, and
//! never while a step runs. In [`TimeMode::Lockstep`](crate::clock::TimeMode) they are held
//! until every thought of the step has landed and then sent in one deterministic order,
//! whatever the backend's latency: first what the step's bookkeeping found (a chat that ended
//! without a thought), then what thoughts brought, then what conversations brought; within each,
//! by persona name (then entity); for one persona in this order: `ConversationEnded`, `NewDay`,
//! `PlanUpdated`, `ActionStarted`, `ConversationStarted`, `ReflectionCompleted`,
//! `ModelCallFailed` (in call order). So a rerun with the same seed sends the same sequence.
//! In [`TimeMode::Realtime`](crate::clock::TimeMode) each poll sends what landed, in that order.
//!
//! A game that listens to nothing pays for a few small values per landed thought, not per step:
//! most steps most personas land nothing.

use bevy::ecs::system::SystemParam;
use bevy::prelude::*;
use chrono::{NaiveDate, NaiveDateTime};

use crate::clock::{AwaitingCognition, PollSystems, SimClock, SimPoll, TimeMode};
use crate::persona::{Persona, ScheduleItem};
use crate::prompt::FailureReason;
use crate::world::ActionAddress;

/// A persona started a new action: the next step it walks there (or stays, if it is there).
/// Also fires for a wait and for the chat action of a conversation.
#[derive(EntityEvent, Message, Debug, Clone, PartialEq)]
pub struct ActionStarted {
    /// The persona.
    #[event_target]
    pub persona: Entity,
    /// Its name.
    pub name: String,
    /// The game time of the step the action started at.
    pub time: NaiveDateTime,
    /// What it is doing ("brushing her teeth").
    pub description: String,
    /// Where (`world:sector:arena:object`, `<persona> Name` for a chat, `<waiting> x y`).
    pub address: Option<ActionAddress>,
    /// The action as an emoji.
    pub emoji: String,
    /// When the action is planned to end.
    pub end_time: Option<NaiveDateTime>,
}

/// A persona's schedule for today changed: a new day was planned, an hour was decomposed into
/// 5-minute tasks, or a reaction was fitted in.
#[derive(EntityEvent, Message, Debug, Clone, PartialEq)]
pub struct PlanUpdated {
    /// The persona.
    #[event_target]
    pub persona: Entity,
    /// Its name.
    pub name: String,
    /// The game time of the step.
    pub time: NaiveDateTime,
    /// Today's schedule as it now stands: `(task, minutes)`, from midnight.
    pub schedule: Vec<ScheduleItem>,
}

/// A persona woke into a new day and planned it (SPEC §3.3). Fires once per persona and day.
#[derive(EntityEvent, Message, Debug, Clone, PartialEq)]
pub struct NewDay {
    /// The persona.
    #[event_target]
    pub persona: Entity,
    /// Its name.
    pub name: String,
    /// The game time of the step.
    pub time: NaiveDateTime,
    /// The new day.
    pub date: NaiveDate,
    /// The hour it wakes up.
    pub wake_up_hour: u32,
    /// The day's broad goals.
    pub daily_plan: Vec<String>,
    /// The hourly schedule before decomposition, `(task, minutes)`.
    pub hourly_schedule: Vec<ScheduleItem>,
    /// Whether the persona revised who it is for this day (every day but the first).
    pub identity_revised: bool,
}

/// A conversation was held and its chat begins. Sent once for each side, the initiator first.
#[derive(EntityEvent, Message, Debug, Clone, PartialEq)]
pub struct ConversationStarted {
    /// The persona this event is about.
    #[event_target]
    pub persona: Entity,
    /// Its name.
    pub name: String,
    /// The game time of the step the conversation started at.
    pub time: NaiveDateTime,
    /// The other persona.
    pub partner: Entity,
    /// The other persona's name.
    pub partner_name: String,
    /// Whether this persona started the conversation.
    pub initiated: bool,
    /// One line summing it up ("conversing about …").
    pub summary: String,
    /// The lines, `(speaker, line)`, in order.
    pub transcript: Vec<(String, String)>,
    /// When the chat ends.
    pub end_time: NaiveDateTime,
}

/// A persona's chat action is over (its next action started, or the chat was cleared).
#[derive(EntityEvent, Message, Debug, Clone, PartialEq)]
pub struct ConversationEnded {
    /// The persona.
    #[event_target]
    pub persona: Entity,
    /// Its name.
    pub name: String,
    /// The game time of the step the chat ended at.
    pub time: NaiveDateTime,
    /// The other persona, if it is still in the world.
    pub partner: Option<Entity>,
    /// The other persona's name.
    pub partner_name: String,
    /// The lines, `(speaker, line)`, in order.
    pub transcript: Vec<(String, String)>,
}

/// A persona reflected (SPEC §3.8): it asked itself questions and stored insights.
#[derive(EntityEvent, Message, Debug, Clone, PartialEq)]
pub struct ReflectionCompleted {
    /// The persona.
    #[event_target]
    pub persona: Entity,
    /// Its name.
    pub name: String,
    /// The game time of the step.
    pub time: NaiveDateTime,
    /// The insights it stored, in order.
    pub insights: Vec<String>,
}

/// A model call of a persona's thought gave no usable answer and the prompt used its typed
/// fail-safe (or an embedding failed and the memory was not formed). The simulation goes on;
/// this is for a game that wants to show or count it. A conversation's failures are the
/// initiator's. Carries the kind of error, never its message, so never a secret.
#[derive(EntityEvent, Message, Debug, Clone, PartialEq)]
pub struct ModelCallFailed {
    /// The persona.
    #[event_target]
    pub persona: Entity,
    /// Its name.
    pub name: String,
    /// The game time of the step.
    pub time: NaiveDateTime,
    /// The prompt kind (`"wake_up_hour"`, …, or `"embed"`).
    pub prompt_kind: &'static str,
    /// What went wrong last.
    pub reason: FailureReason,
    /// Model calls made before giving up.
    pub attempts: u32,
}

/// One outcome waiting to be sent.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Outcome {
    ConversationEnded(ConversationEnded),
    NewDay(NewDay),
    PlanUpdated(PlanUpdated),
    ActionStarted(ActionStarted),
    ConversationStarted(ConversationStarted),
    ReflectionCompleted(ReflectionCompleted),
    ModelCallFailed(ModelCallFailed),
}

impl Outcome {
    fn persona(&self) -> (&str, Entity) {
        let (name, entity) = match self {
            Outcome::ConversationEnded(e) => (&e.name, e.persona),
            Outcome::NewDay(e) => (&e.name, e.persona),
            Outcome::PlanUpdated(e) => (&e.name, e.persona),
            Outcome::ActionStarted(e) => (&e.name, e.persona),
            Outcome::ConversationStarted(e) => (&e.name, e.persona),
            Outcome::ReflectionCompleted(e) => (&e.name, e.persona),
            Outcome::ModelCallFailed(e) => (&e.name, e.persona),
        };
        (name.as_str(), entity)
    }
}

/// Where an outcome came from; the first key of the sending order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum OutcomeSource {
    /// A step's bookkeeping, without a thought.
    Bookkeeping,
    /// A persona's thought.
    Thought,
    /// A conversation.
    Conversation,
}

/// Outcomes that landed and are not sent yet (see the module docs for the order). Inserted by
/// [`OutcomePlugin`]; without it, nothing is queued.
#[derive(Resource, Debug, Default)]
pub(crate) struct OutcomeQueue {
    pending: Vec<(OutcomeSource, Outcome)>,
}

impl OutcomeQueue {
    /// Queues the outcomes of one persona's landing, in the order they are to be sent.
    pub(crate) fn extend(
        &mut self,
        source: OutcomeSource,
        outcomes: impl IntoIterator<Item = Outcome>,
    ) {
        self.pending
            .extend(outcomes.into_iter().map(|outcome| (source, outcome)));
    }

    /// Whether nothing waits.
    pub(crate) fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }
}

/// The writers of every outcome message.
#[derive(SystemParam)]
pub(crate) struct OutcomeWriters<'w> {
    action_started: MessageWriter<'w, ActionStarted>,
    plan_updated: MessageWriter<'w, PlanUpdated>,
    new_day: MessageWriter<'w, NewDay>,
    conversation_started: MessageWriter<'w, ConversationStarted>,
    conversation_ended: MessageWriter<'w, ConversationEnded>,
    reflection_completed: MessageWriter<'w, ReflectionCompleted>,
    model_call_failed: MessageWriter<'w, ModelCallFailed>,
}

/// Sends the queued outcomes as messages and entity events (runs in
/// [`PollSystems::SendOutcomes`]). In Lockstep, waits until no thought is in flight.
pub(crate) fn send_outcomes(
    mut commands: Commands,
    clock: Res<SimClock>,
    mut queue: ResMut<OutcomeQueue>,
    pending: Query<(), With<AwaitingCognition>>,
    personas: Query<(Entity, &Name), With<Persona>>,
    mut writers: OutcomeWriters,
) {
    if queue.is_empty() || (clock.mode == TimeMode::Lockstep && !pending.is_empty()) {
        return;
    }
    let mut outcomes = std::mem::take(&mut queue.pending);
    // Stable: one persona's outcomes keep the order they were queued in.
    outcomes.sort_by(|(sa, a), (sb, b)| sa.cmp(sb).then_with(|| a.persona().cmp(&b.persona())));
    for (_, outcome) in outcomes {
        match outcome {
            Outcome::ConversationEnded(mut event) => {
                event.partner = personas
                    .iter()
                    .find(|(_, name)| name.as_str() == event.partner_name)
                    .map(|(entity, _)| entity);
                writers.conversation_ended.write(event.clone());
                commands.trigger(event);
            }
            Outcome::NewDay(event) => {
                writers.new_day.write(event.clone());
                commands.trigger(event);
            }
            Outcome::PlanUpdated(event) => {
                writers.plan_updated.write(event.clone());
                commands.trigger(event);
            }
            Outcome::ActionStarted(event) => {
                writers.action_started.write(event.clone());
                commands.trigger(event);
            }
            Outcome::ConversationStarted(event) => {
                writers.conversation_started.write(event.clone());
                commands.trigger(event);
            }
            Outcome::ReflectionCompleted(event) => {
                writers.reflection_completed.write(event.clone());
                commands.trigger(event);
            }
            Outcome::ModelCallFailed(event) => {
                writers.model_call_failed.write(event.clone());
                commands.trigger(event);
            }
        }
    }
}

/// Registers the outcome messages and sends the outcomes in [`PollSystems::SendOutcomes`].
#[derive(Default)]
pub struct OutcomePlugin;

impl Plugin for OutcomePlugin {
    fn build(&self, app: &mut App) {
        app.init_resource::<OutcomeQueue>()
            .add_message::<ActionStarted>()
            .add_message::<PlanUpdated>()
            .add_message::<NewDay>()
            .add_message::<ConversationStarted>()
            .add_message::<ConversationEnded>()
            .add_message::<ReflectionCompleted>()
            .add_message::<ModelCallFailed>()
            .add_systems(SimPoll, send_outcomes.in_set(PollSystems::SendOutcomes));
    }
}
