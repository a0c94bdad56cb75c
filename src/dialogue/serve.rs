//! The ECS side of dialogue turns: requests queued, turns started when the persona's mind is
//! home, their world requests served (retrieval, tools, storage), streams drained, outcomes
//! sent. Everything runs in [`SimPoll`](crate::clock::SimPoll), between steps.

use std::collections::{HashMap, VecDeque};
use std::pin::Pin;
use std::sync::Arc;

use bevy::platform::cell::SyncCell;
use bevy::prelude::*;
use bevy::tasks::Task;
use chrono::Duration;
use serde_json::{Value, json};

use crate::clock::{AwaitingCognition, Held, SimClock, poll_landing, spawn_landing};
use crate::cognition::ChatStream;
use crate::cognition::ModelCallFailed;
use crate::cognition::reflect::keep_thought;
use crate::cognition::vocabulary::retrieval_params;
use crate::llm::LlmClient;
use crate::memory::{ChatLine, NewMemory, new_retrieve, score_breakdown};
use crate::persona::{ActionView, Mind, Percepts, Persona};
use crate::prompt::{PromptContext, PromptLibrary};
use crate::settings::AgentSettings;

use super::control::book_appointment;
use super::prompts::{MAX_PROFILE_CHARS, truncate_chars};
use super::tools::{ADD_TO_SCHEDULE, ToolAllowList, ToolCall, ToolHandler, ToolRegistry};
use super::turn::{
    Keep, Prepared, ScheduleFit, StreamUpdate, ToolAnswer, TurnInput, TurnOutcome, WorldLink,
    WorldReply, WorldRequest, minute_of, run_turn,
};
use super::{
    DialogueMode, DialogueRemembered, DialogueReplied, DialogueRequest, DialogueSettings,
    GroupTalkRouted, RefusalReason, Sleepers, SpeakerProfiles, ToolCalled, ToolRefused,
};

/// One finished turn of a session.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionTurn {
    /// The message (neutralised).
    pub message: String,
    /// The reply.
    pub reply: String,
    /// Pre-start results kept in history (`<prestart keep="true">` blocks).
    pub kept_prestart: String,
}

/// Every (persona, speaker) conversation's turns, oldest first. Interviews and whispers are no
/// session turns.
#[derive(Resource, Debug, Default)]
pub struct DialogueSessions(pub HashMap<(Entity, String), Vec<SessionTurn>>);

impl DialogueSessions {
    /// The turns of `persona` with each speaker, by speaker (a save's `dialogue.json`).
    pub fn of(&self, persona: Entity) -> std::collections::BTreeMap<String, Vec<SessionTurn>> {
        self.0
            .iter()
            .filter(|((p, _), _)| *p == persona)
            .map(|((_, speaker), turns)| (speaker.clone(), turns.clone()))
            .collect()
    }

    /// The turns of `persona` with `speaker`.
    pub fn turns(&self, persona: Entity, speaker: &str) -> &[SessionTurn] {
        self.0
            .get(&(persona, speaker.to_string()))
            .map_or(&[], Vec::as_slice)
    }
}

/// The dialogue a persona is having, for display: who, the exchange so far, the reply as it is
/// written, and the tool lines of the current turn.
#[derive(Component, Reflect, Debug, Clone, Default, PartialEq, Eq)]
#[reflect(Component)]
pub struct DialogueStream {
    /// Who speaks to the persona.
    pub speaker: String,
    /// The message being answered.
    pub message: String,
    /// The reply so far (the whole reply once the turn is over).
    pub partial: String,
    /// One line per tool call of this turn ("📅 added: …").
    pub tool_lines: Vec<String>,
    /// Whether the turn is still running.
    pub running: bool,
}

/// Requests not yet started, in arrival order.
#[derive(Resource, Debug, Default)]
pub(super) struct DialogueQueue(VecDeque<DialogueRequest>);

type BoxedTurn = Pin<Box<dyn std::future::Future<Output = TurnOutcome> + Send>>;

/// A turn's future: polled in place while it only waits on the world, a task once it waits on
/// a model.
enum Running {
    Here(SyncCell<BoxedTurn>),
    Task(Task<TurnOutcome>),
}

/// A request of a turn's task to the world, with where the answer goes.
type Asked = (WorldRequest, async_channel::Sender<WorldReply>);

struct ActiveTurn {
    request: DialogueRequest,
    running: Running,
    requests: async_channel::Receiver<Asked>,
    stream: async_channel::Receiver<StreamUpdate>,
    name: String,
    /// Once the reply landed: the entity that holds `AwaitingCognition` for the background
    /// stage in the persona's stead.
    holder: Option<Entity>,
    /// A storage request waiting for the persona's mind to come home.
    deferred: Option<Asked>,
    /// What the background stage weighed and kept, told the game when the turn is over.
    weighed: Option<(u8, bool)>,
}

/// Turns in flight: those still answering, by persona (the persona is busy), and those whose
/// reply landed and whose background stage runs on (the persona is free).
#[derive(Resource, Default)]
pub(super) struct ActiveTurns {
    answering: HashMap<Entity, ActiveTurn>,
    background: Vec<(Entity, ActiveTurn)>,
}

/// Moves new requests into the queue.
pub(super) fn queue_requests(
    mut requests: MessageReader<DialogueRequest>,
    mut queue: ResMut<DialogueQueue>,
    routed: Option<Res<GroupTalkRouted>>,
) {
    for request in requests.read() {
        // Who speaks keys the persona's profiles and is written into its memories: a name, not
        // bidi overrides or zero-width characters that pass for another speaker.
        let (speaker, changed) = crate::persona::clean_label(&request.speaker);
        if let Some(why) = changed {
            warn!(speaker = %speaker, "a dialogue speaker's name was cleaned: {why}");
        }
        let request = &DialogueRequest {
            speaker,
            ..request.clone()
        };
        match &request.mode {
            // The group conversations take it (and send back a `Say` if there is no group).
            DialogueMode::ToGroup(_) if routed.is_some() => {}
            DialogueMode::ToGroup(text) => queue.0.push_back(DialogueRequest::say(
                request.persona,
                request.speaker.clone(),
                text.clone(),
            )),
            _ => queue.0.push_back(request.clone()),
        }
    }
}

/// How often a turn is polled and served per frame at most (a scripted backend finishes a whole
/// turn in one frame; a real one waits on the network anyway).
const MAX_ROUNDS: usize = 256;

/// Starts, serves and lands dialogue turns (see the module docs).
pub(super) fn drive_dialogues(world: &mut World) {
    start_turns(world);
    let Some(mut active) = world.remove_resource::<ActiveTurns>() else {
        return;
    };
    let mut entities: Vec<Entity> = active.answering.keys().copied().collect();
    entities.sort();
    for entity in entities {
        let Some(mut turn) = active.answering.remove(&entity) else {
            continue;
        };
        if world.get_entity(entity).is_err() {
            // The persona is gone: dropping the turn cancels it.
            continue;
        }
        match advance(world, entity, &mut turn) {
            Some(outcome) => finish(world, entity, turn, outcome),
            // The reply landed: the persona is free, the background goes on.
            None if turn.holder.is_some() => active.background.push((entity, turn)),
            None => {
                active.answering.insert(entity, turn);
            }
        }
    }
    for (entity, mut turn) in std::mem::take(&mut active.background) {
        if world.get_entity(entity).is_err() {
            release(world, &turn);
            continue;
        }
        match advance(world, entity, &mut turn) {
            Some(outcome) => finish(world, entity, turn, outcome),
            None => active.background.push((entity, turn)),
        }
    }
    world.insert_resource(active);
}

/// Polls a turn and serves its world requests until it waits on a model (then it goes on as
/// a task) or is over (its outcome).
fn advance(world: &mut World, entity: Entity, turn: &mut ActiveTurn) -> Option<TurnOutcome> {
    let mut done = None;
    for _ in 0..MAX_ROUNDS {
        let outcome = match &mut turn.running {
            Running::Here(future) => poll_landing(future.get()),
            Running::Task(task) => poll_landing(task),
        };
        if let Some(outcome) = outcome {
            done = Some(outcome);
            break;
        }
        if !serve_requests(world, entity, turn) {
            break;
        }
    }
    drain_stream(world, entity, turn);
    if done.is_none()
        && let Running::Here(_) = turn.running
    {
        // Waiting on a model: continue on the task pool.
        let placeholder: BoxedTurn = Box::pin(async { TurnOutcome::default() });
        if let Running::Here(future) =
            std::mem::replace(&mut turn.running, Running::Here(SyncCell::new(placeholder)))
        {
            turn.running = Running::Task(spawn_landing(SyncCell::to_inner(future)));
        }
    }
    done
}

/// Answers the turn's waiting world requests; whether any was answered. A storage request
/// waits (deferred) while the persona's mind is away: after the reply the persona is free and
/// its cognition may have taken the mind.
fn serve_requests(world: &mut World, entity: Entity, turn: &mut ActiveTurn) -> bool {
    let mut served = false;
    loop {
        let Some((request, reply)) = turn
            .deferred
            .take()
            .or_else(|| turn.requests.try_recv().ok())
        else {
            break;
        };
        match request {
            WorldRequest::Replied(outcome) => {
                land_reply(world, entity, turn, *outcome);
                // The background stage holds the clock in the persona's stead.
                let step = world.get_resource::<SimClock>().map_or(0, SimClock::step);
                let holder = world
                    .spawn((
                        Name::new("dialogue background"),
                        AwaitingCognition::new(step),
                    ))
                    .id();
                turn.holder = Some(holder);
                let _ = reply.try_send(WorldReply::Done);
            }
            WorldRequest::Store(keep)
                if turn.holder.is_some()
                    && !world.get::<Mind>(entity).is_some_and(Mind::is_home) =>
            {
                turn.deferred = Some((WorldRequest::Store(keep), reply));
                break;
            }
            request => {
                if let WorldRequest::Store(keep) = &request
                    && let Some(importance) = keep.importance
                {
                    turn.weighed = Some((importance, keep.chat.is_some()));
                }
                let answer = serve(world, entity, &turn.request, request);
                let _ = reply.try_send(answer);
            }
        }
        served = true;
    }
    served
}

/// A turn is over: a turn whose reply landed earlier reports its background's failures and
/// lets its holder go; any other lands now.
fn finish(world: &mut World, entity: Entity, turn: ActiveTurn, outcome: TurnOutcome) {
    if outcome.replied {
        report_failures(world, entity, &turn.name, &outcome);
        release(world, &turn);
    } else {
        land_reply(world, entity, &turn, outcome);
    }
    // The background stage is over (and its holder gone): the game hears what was kept.
    if let Some((importance, remembered)) = turn.weighed {
        let event = DialogueRemembered {
            persona: entity,
            speaker: turn.request.speaker.clone(),
            importance,
            remembered,
        };
        world.trigger(event.clone());
        world.write_message(event);
    }
}

/// Despawns the entity holding a background stage's `AwaitingCognition`.
fn release(world: &mut World, turn: &ActiveTurn) {
    if let Some(holder) = turn.holder
        && let Ok(e) = world.get_entity_mut(holder)
    {
        e.despawn();
    }
}

/// Starts queued requests whose persona is free: mind home, no thought or turn running.
fn start_turns(world: &mut World) {
    let queue = std::mem::take(&mut world.resource_mut::<DialogueQueue>().0);
    if queue.is_empty() {
        return;
    }
    let (Some(client), Some(library)) = (
        world.get_resource::<LlmClient>().cloned(),
        world.get_resource::<PromptLibrary>().cloned(),
    ) else {
        warn!("no model client or prompt library: dialogue requests dropped");
        return;
    };
    let agent = Arc::new(
        world
            .get_resource::<AgentSettings>()
            .cloned()
            .unwrap_or_default(),
    );
    let retries = agent.prompt_retries;
    let ctx = PromptContext::new(client, library).with_retries(retries);
    let settings = Arc::new(
        world
            .get_resource::<DialogueSettings>()
            .cloned()
            .unwrap_or_default(),
    );
    let (step, time) = world
        .get_resource::<SimClock>()
        .map(|c| (c.step(), c.now()))
        .unwrap_or_default();
    let mut waiting = VecDeque::new();
    let mut started: Vec<Entity> = Vec::new();
    for request in queue {
        let persona = request.persona;
        let Ok(entity) = world.get_entity(persona) else {
            warn!("dialogue request for an entity that does not exist");
            continue;
        };
        if !entity.contains::<Persona>() {
            warn!("dialogue request for an entity that is no persona");
            continue;
        }
        let busy = entity.contains::<AwaitingCognition>()
            || !entity.get::<Mind>().is_some_and(Mind::is_home)
            || started.contains(&persona)
            || world
                .resource::<ActiveTurns>()
                .answering
                .contains_key(&persona);
        let heard_in_world = !matches!(request.mode, DialogueMode::Interview(_));
        // Busy means busy (SPEC §16): an actor held by a stage scene hears nobody until the
        // scene lets it go (its aftermath run), so no tool of a turn is overwritten by it.
        if busy || (heard_in_world && entity.contains::<Held>()) {
            waiting.push_back(request);
            continue;
        }
        let name = entity
            .get::<Name>()
            .map(|n| n.as_str().to_string())
            .unwrap_or_default();
        // A sleeper left asleep (`Sleepers::StayAsleep`) answers at once that it is asleep —
        // no model call, no memory, no tool. A whisper (an inner voice, a dream) and an
        // interview (outside the world) are served as usual.
        let spoken = settings.sleepers == Sleepers::StayAsleep
            && matches!(
                request.mode,
                DialogueMode::Say(_) | DialogueMode::ToGroup(_)
            );
        let asleep = entity
            .get::<Mind>()
            .and_then(Mind::get)
            .filter(|_| spoken)
            .and_then(|state| {
                state
                    .scratch
                    .is_sleeping()
                    .then(|| state.scratch.first_name.clone())
            });
        if let Some(first_name) = asleep {
            answer_asleep(world, persona, &name, &first_name, request, time);
            continue;
        }
        let recent: Vec<(String, String, String)> = world
            .resource::<DialogueSessions>()
            .turns(persona, &request.speaker)
            .iter()
            .rev()
            .take(settings.history_turns)
            .rev()
            .map(|t| (t.message.clone(), t.reply.clone(), t.kept_prestart.clone()))
            .collect();
        let profile = entity
            .get::<SpeakerProfiles>()
            .and_then(|p| p.0.get(&request.speaker).cloned())
            .unwrap_or_default();
        let (req_tx, req_rx) = async_channel::bounded(4);
        let (stream_tx, stream_rx) = async_channel::bounded(32);
        let input = TurnInput {
            ctx: ctx.clone(),
            settings: settings.clone(),
            speaker: request.speaker.clone(),
            mode: request.mode.clone(),
            recent,
            profile,
            // By name, not entity (see `persona::name_hash`).
            seed: step ^ crate::persona::name_hash(&name).rotate_left(17),
            agent: agent.clone(),
        };
        let link = WorldLink {
            requests: req_tx,
            stream: stream_tx,
        };
        let span = debug_span!("dialogue", persona = name.as_str(), step);
        let future: BoxedTurn = Box::pin(bevy::log::tracing::Instrument::instrument(
            run_turn(input, link),
            span,
        ));
        let message = match &request.mode {
            DialogueMode::Say(t)
            | DialogueMode::Whisper(t)
            | DialogueMode::Interview(t)
            | DialogueMode::ToGroup(t) => truncate_chars(t, 2_000).to_string(),
        };
        world.entity_mut(persona).insert((
            AwaitingCognition::new(step),
            DialogueStream {
                speaker: request.speaker.clone(),
                message,
                partial: String::new(),
                tool_lines: Vec::new(),
                running: true,
            },
        ));
        started.push(persona);
        let _ = time;
        world.resource_mut::<ActiveTurns>().answering.insert(
            persona,
            ActiveTurn {
                request,
                running: Running::Here(SyncCell::new(future)),
                requests: req_rx,
                stream: stream_rx,
                name,
                holder: None,
                deferred: None,
                weighed: None,
            },
        );
    }
    world.resource_mut::<DialogueQueue>().0.extend(waiting);
}

/// Moves the turn's streamed reply into its [`DialogueStream`] and the bubble.
fn drain_stream(world: &mut World, entity: Entity, turn: &ActiveTurn) {
    let mut latest = None;
    for _ in 0..1024 {
        match turn.stream.try_recv() {
            Ok(StreamUpdate::Partial(text)) => latest = Some(text),
            Err(_) => break,
        }
    }
    let Some(text) = latest else { return };
    show(world, entity, &turn.name, text, false);
}

/// Sets the partial reply and mirrors it into the persona's bubble ([`ChatStream`] with the
/// persona as both speaker and listener: no conversation of the town owns it). While the turn
/// runs the reply is the stream's partial line; once `finished` it is its one finished line, so
/// the bubble types it out, holds it and closes. A conversation of the town the persona is in
/// keeps its own stream.
fn show(world: &mut World, entity: Entity, name: &str, text: String, finished: bool) {
    let Ok(mut e) = world.get_entity_mut(entity) else {
        return;
    };
    match e.get_mut::<DialogueStream>() {
        Some(mut stream) => stream.partial.clone_from(&text),
        None => return,
    }
    let in_conversation = e
        .get::<ChatStream>()
        .is_some_and(|c| c.speaker != c.listener);
    if !in_conversation {
        let (lines, partial) = if finished {
            (vec![(name.to_string(), text)], String::new())
        } else {
            (Vec::new(), text)
        };
        e.insert(ChatStream {
            speaker: entity,
            listener: entity,
            lines,
            partial,
        });
    }
}

/// What a sleeping persona "answers" when spoken to ([`start_turns`]).
pub(crate) fn asleep_reply(first_name: &str) -> String {
    format!("{first_name} is asleep.")
}

/// Answers a request to a sleeping persona at once: the reply says it is asleep; nothing is
/// asked of the model, remembered or run.
fn answer_asleep(
    world: &mut World,
    persona: Entity,
    name: &str,
    first_name: &str,
    request: DialogueRequest,
    time: chrono::NaiveDateTime,
) {
    let reply = asleep_reply(first_name);
    show(world, persona, name, reply.clone(), true);
    let event = DialogueReplied {
        persona,
        name: name.to_string(),
        speaker: request.speaker,
        time,
        mode: request.mode,
        reply,
        tool_calls: Vec::new(),
        planner_calls: 0,
        final_output: false,
    };
    world.trigger(event.clone());
    world.write_message(event);
}

/// Serves one world request of `persona`'s turn.
fn serve(
    world: &mut World,
    persona: Entity,
    request: &DialogueRequest,
    asked: WorldRequest,
) -> WorldReply {
    match asked {
        WorldRequest::Prepare { focal, stateless } => {
            WorldReply::Prepared(Box::new(prepare(world, persona, focal, stateless)))
        }
        WorldRequest::Tool {
            tool,
            args,
            prestart,
        } => WorldReply::Tool(run_tool(world, persona, request, &tool, args, prestart)),
        WorldRequest::StepLimit { tool } => {
            refuse(world, persona, request, &tool, RefusalReason::StepLimit);
            WorldReply::Done
        }
        WorldRequest::ApplySchedule {
            before,
            after,
            fit,
            args,
        } => WorldReply::Tool(ToolAnswer::Ran(apply_schedule(
            world, persona, request, before, after, fit, args,
        ))),
        WorldRequest::Store(keep) => {
            store(world, persona, &request.speaker, keep);
            WorldReply::Done
        }
        // Landed by `serve_requests`, which holds the turn.
        WorldRequest::Replied(_) => WorldReply::Done,
    }
}

/// Identity, memories (retrieved now; an interview only reads), place and the allowed tools.
fn prepare(
    world: &mut World,
    persona: Entity,
    focal: Option<Vec<f32>>,
    stateless: bool,
) -> Prepared {
    let now = world
        .get_resource::<SimClock>()
        .map(SimClock::now)
        .unwrap_or_default();
    let agent = world
        .get_resource::<AgentSettings>()
        .cloned()
        .unwrap_or_default();
    let n = world
        .get_resource::<DialogueSettings>()
        .map_or(8, |s| s.memories);
    let allow = world.get::<ToolAllowList>(persona).cloned();
    let tools = world
        .get_resource::<ToolRegistry>()
        .map(|registry| {
            registry
                .iter()
                .filter(|t| ToolAllowList::allows(allow.as_ref(), &t.spec.name))
                .filter(|t| !stateless || t.spec.read_only)
                .map(|t| t.spec.clone())
                .collect()
        })
        .unwrap_or_default();
    let here = world
        .get::<Percepts>(persona)
        .map(|p| p.arena.clone())
        .unwrap_or_default();
    let doing = world
        .get::<ActionView>(persona)
        .map(|v| v.description.clone())
        .unwrap_or_default();
    let Some(mut mind) = world.get_mut::<Mind>(persona) else {
        return Prepared::default();
    };
    let Some(state) = mind.get_mut() else {
        return Prepared::default();
    };
    let mut memories = Vec::new();
    if let Some(focal) = focal {
        let params = retrieval_params(state, &agent);
        let ids = if stateless {
            score_breakdown(&state.associative, &focal, now, &params)
                .map(|scored| scored.into_iter().take(n).map(|s| s.id).collect())
        } else {
            new_retrieve(&mut state.associative, &focal, now, n, &params)
        };
        match ids {
            Ok(ids) => {
                memories = ids
                    .iter()
                    .filter_map(|id| state.associative.node(*id))
                    .map(|node| node.description.clone())
                    .collect();
            }
            Err(error) => warn!(%error, "dialogue retrieval failed"),
        }
    }
    Prepared {
        name: state.scratch.name.clone(),
        first_name: state.scratch.first_name.clone(),
        identity: state.scratch.identity_summary(),
        memories,
        here,
        doing,
        tools,
        now,
    }
}

fn refuse(
    world: &mut World,
    persona: Entity,
    request: &DialogueRequest,
    tool: &str,
    reason: RefusalReason,
) {
    let event = ToolRefused {
        persona,
        speaker: request.speaker.clone(),
        tool: truncate_chars(tool, 64).to_string(),
        reason,
    };
    world.trigger(event.clone());
    world.write_message(event);
}

/// Checks a call (known, allowed, arguments valid) and runs its handler.
fn run_tool(
    world: &mut World,
    persona: Entity,
    request: &DialogueRequest,
    name: &str,
    args: Value,
    prestart: bool,
) -> ToolAnswer {
    let Some(tool) = world
        .get_resource::<ToolRegistry>()
        .and_then(|r| r.get(name).cloned())
    else {
        refuse(world, persona, request, name, RefusalReason::Unknown);
        return ToolAnswer::Refused(RefusalReason::Unknown);
    };
    let interview = matches!(request.mode, DialogueMode::Interview(_));
    let allowed = prestart
        || ToolAllowList::allows(world.get::<ToolAllowList>(persona), name)
            && (!interview || tool.spec.read_only);
    if !allowed {
        refuse(world, persona, request, name, RefusalReason::NotAllowed);
        return ToolAnswer::Refused(RefusalReason::NotAllowed);
    }
    if let Err(why) = tool.check_args(&args) {
        let reason = RefusalReason::BadArguments(why);
        refuse(world, persona, request, name, reason.clone());
        return ToolAnswer::Refused(reason);
    }
    let result = match tool.handler {
        ToolHandler::System(id) => {
            let call = ToolCall {
                persona,
                speaker: request.speaker.clone(),
                args: args.clone(),
            };
            match world.run_system_with(id, call) {
                Ok(result) => result,
                Err(error) => Err(truncate_chars(&error.to_string(), 200).to_string()),
            }
        }
        ToolHandler::AddToSchedule => match schedule_fit(world, persona, &args) {
            Ok(fit) => return ToolAnswer::Fit(fit),
            Err(error) => Err(error),
        },
    };
    called(world, persona, request, name, args, result.clone());
    ToolAnswer::Ran(result)
}

/// Runs a read-only tool for `persona` outside a dialogue turn — the think step of a group
/// conversation's focused cycle — with a turn's checks (registered, on the persona's
/// allow-list, read-only, arguments matching the schema) and its outcome events
/// ([`ToolCalled`], [`ToolRefused`]); `speaker` says where the persona thinks. Returns what
/// the handler returned, or why the call did not run.
pub(crate) fn run_read_only_tool(
    world: &mut World,
    persona: Entity,
    speaker: &str,
    name: &str,
    args: Value,
) -> Result<Result<Value, String>, RefusalReason> {
    let checked = match world
        .get_resource::<ToolRegistry>()
        .and_then(|r| r.get(name).cloned())
    {
        None => Err(RefusalReason::Unknown),
        Some(tool)
            if !tool.spec.read_only
                || !ToolAllowList::allows(world.get::<ToolAllowList>(persona), name) =>
        {
            Err(RefusalReason::NotAllowed)
        }
        Some(tool) => match (tool.check_args(&args), tool.handler) {
            (Err(why), _) => Err(RefusalReason::BadArguments(why)),
            (Ok(()), ToolHandler::System(id)) => Ok(id),
            (Ok(()), ToolHandler::AddToSchedule) => Err(RefusalReason::NotAllowed),
        },
    };
    let id = match checked {
        Ok(id) => id,
        Err(reason) => {
            let event = ToolRefused {
                persona,
                speaker: speaker.to_string(),
                tool: truncate_chars(name, 64).to_string(),
                reason: reason.clone(),
            };
            world.trigger(event.clone());
            world.write_message(event);
            return Err(reason);
        }
    };
    let call = ToolCall {
        persona,
        speaker: speaker.to_string(),
        args: args.clone(),
    };
    let result = world
        .run_system_with(id, call)
        .unwrap_or_else(|error| Err(truncate_chars(&error.to_string(), 200).to_string()));
    let event = ToolCalled {
        persona,
        speaker: speaker.to_string(),
        tool: name.to_string(),
        line: tool_line(name, &args, &result),
        args,
        result: result.clone(),
    };
    world.trigger(event.clone());
    world.write_message(event);
    Ok(result)
}

fn called(
    world: &mut World,
    persona: Entity,
    request: &DialogueRequest,
    tool: &str,
    args: Value,
    result: Result<Value, String>,
) {
    let line = tool_line(tool, &args, &result);
    if let Some(mut stream) = world.get_mut::<DialogueStream>(persona) {
        stream.tool_lines.push(line.clone());
    }
    let event = ToolCalled {
        persona,
        speaker: request.speaker.clone(),
        tool: tool.to_string(),
        args,
        result,
        line,
    };
    world.trigger(event.clone());
    world.write_message(event);
}

/// A tool call as a player reads it.
pub(crate) fn tool_line(tool: &str, args: &Value, result: &Result<Value, String>) -> String {
    let s = |key: &str| {
        truncate_chars(args.get(key).and_then(Value::as_str).unwrap_or(""), 80).to_string()
    };
    if let Err(error) = result {
        return format!("⚠️ {tool} failed: {}", truncate_chars(error, 120));
    }
    match tool {
        super::tools::ADD_TO_SCHEDULE => {
            // The arena without the world's name: "Riverside Cafe:cafe".
            let place = result
                .as_ref()
                .ok()
                .and_then(|r| r.get("place"))
                .and_then(Value::as_str)
                .map(|p| p.split_once(':').map_or(p, |(_, rest)| rest).to_string())
                .unwrap_or_else(|| s("place"));
            format!("📅 added: {} at {place}, {}", s("task"), s("time"))
        }
        super::tools::WALK_TO => format!("🚶 walking to {}", s("place")),
        super::tools::WHERE_IS => format!("🗺️ looked up where {} is", s("place")),
        super::tools::RECALL => format!("💭 remembered: {}", s("about")),
        super::tools::WHAT_DO_YOU_SEE => "👀 looked around".to_string(),
        super::tools::WHAT_TIME => "🕒 checked the time".to_string(),
        other => format!("🔧 {other}"),
    }
}

/// The checks of `add_to_schedule` in the world: a known place, a time later today.
fn schedule_fit(world: &mut World, persona: Entity, args: &Value) -> Result<ScheduleFit, String> {
    let text = |k: &str| {
        args.get(k)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let minutes = args
        .get("minutes")
        .and_then(Value::as_u64)
        .and_then(|m| u32::try_from(m).ok())
        .unwrap_or(30);
    let minute = minute_of(&text("time")).ok_or("the time must be HH:MM")?;
    let now = world
        .get_resource::<SimClock>()
        .map(SimClock::now)
        .unwrap_or_default();
    let now_minute = crate::cognition::vocabulary::minute_of_day(now);
    if minute <= now_minute {
        return Err("that time has already passed today".into());
    }
    let map = world
        .get_resource::<crate::world::TownMap>()
        .ok_or("there is no town")?;
    let place = text("place");
    let address = super::tools::resolve_place(map, world.get::<Mind>(persona), &place)
        .ok_or_else(|| format!("no place called `{}` in town", truncate_chars(&place, 60)))?;
    let mind = world
        .get::<Mind>(persona)
        .and_then(Mind::get)
        .ok_or("the persona is busy")?;
    let task = super::prompts::neutralise(&text("task"), 80);
    Ok(ScheduleFit {
        schedule: mind.scratch.f_daily_schedule.clone(),
        hourly: mind.scratch.f_daily_schedule_hourly_org.clone(),
        first_name: mind.scratch.first_name.clone(),
        now,
        task: format!("{task} at {}", address.last_name()),
        arena: super::tools::arena_string(&address),
        minute,
        minutes,
    })
}

/// Applies a fitted schedule when today's schedule has not changed meanwhile, and books the
/// appointment so the persona is there when it starts.
fn apply_schedule(
    world: &mut World,
    persona: Entity,
    request: &DialogueRequest,
    before: Vec<crate::persona::ScheduleItem>,
    after: Vec<crate::persona::ScheduleItem>,
    fit: ScheduleFit,
    args: Value,
) -> Result<Value, String> {
    let result = (|| {
        let mut mind = world.get_mut::<Mind>(persona).ok_or("not a persona")?;
        let state = mind.get_mut().ok_or("the persona is busy")?;
        if state.scratch.f_daily_schedule != before {
            return Err("the schedule changed meanwhile; try again".to_string());
        }
        if crate::cognition::schedule::total_minutes(&after) != crate::clock::MINUTES_PER_DAY {
            return Err("the schedule would not fit the day".to_string());
        }
        state.scratch.f_daily_schedule = after;
        let start = fit.now.date().and_time(chrono::NaiveTime::MIN)
            + Duration::minutes(i64::from(fit.minute));
        book_appointment(world, persona, &fit.task, &fit.arena, start, fit.minutes)
            .map_err(|e| e.to_string())?;
        Ok(json!({
            "added": fit.task,
            "place": fit.arena,
            "time": start.format("%H:%M").to_string(),
            "minutes": fit.minutes
        }))
    })();
    called(
        world,
        persona,
        request,
        ADD_TO_SCHEDULE,
        args,
        result.clone(),
    );
    result
}

/// Stores a turn's memories and the speaker's profile.
fn store(world: &mut World, persona: Entity, speaker: &str, keep: Keep) {
    let now = world
        .get_resource::<SimClock>()
        .map(SimClock::now)
        .unwrap_or_default();
    if let Some(profile) = keep.profile {
        let profile = truncate_chars(&profile, MAX_PROFILE_CHARS).to_string();
        if let Ok(mut entity) = world.get_entity_mut(persona) {
            let mut profiles = entity.entry::<SpeakerProfiles>().or_default().into_mut();
            if !profile.is_empty() {
                profiles.0.insert(speaker.to_string(), profile);
            }
        }
    }
    let Some(mut mind) = world.get_mut::<Mind>(persona) else {
        return;
    };
    let Some(state) = mind.get_mut() else { return };
    let name = state.scratch.name.clone();
    let mut stored = Vec::new();
    if let Some(chat) = keep.chat {
        let lines = chat
            .lines
            .into_iter()
            .map(|(speaker, line)| ChatLine { speaker, line })
            .collect();
        let memory = NewMemory::new(now, (name.clone(), "chat with", speaker), chat.description)
            .keywords([name.to_lowercase(), speaker.to_lowercase()])
            .poignancy(chat.poignancy)
            .embedding(chat.embedding);
        // The chat node keeps the exchange for the chat history; an event node over it is
        // what retrieval finds (chat nodes are no candidates), as a pair chat leaves (SPEC §16).
        let triple = (name.clone(), "chat with".to_string(), speaker.to_string());
        let event = NewMemory::new(now, triple, memory.description.clone())
            .keywords(memory.keywords.clone())
            .poignancy(chat.poignancy);
        match state.associative.add_chat(memory, lines) {
            Ok(chat_id) => {
                // The event reuses the chat's vector (memory holds it by its description) and
                // counts towards reflection once, as a perceived chat does.
                match state.associative.add_event(event, vec![chat_id]) {
                    Ok(_) => stored.push(chat.poignancy),
                    Err(error) => warn!(%error, "could not store the dialogue's event"),
                }
                for thought in keep.after_chat {
                    keep_thought(state, now, thought, vec![chat_id]);
                }
            }
            Err(error) => warn!(%error, "could not store the dialogue"),
        }
    }
    if let Some(thought) = keep.thought {
        let mut memory = NewMemory::new(
            now,
            (name.clone(), "thinks", "whisper"),
            thought.description,
        )
        .keywords([name.to_lowercase()])
        .poignancy(thought.poignancy)
        .embedding(thought.embedding);
        if let Some(days) = thought.days {
            memory = memory.expires(now + Duration::days(days));
        }
        match state.associative.add_thought(memory, Vec::new()) {
            Ok(_) => stored.push(thought.poignancy),
            Err(error) => warn!(%error, "could not store the whisper"),
        }
    }
    // Reflection through the normal trigger (SPEC §3.8).
    for poignancy in stored {
        state.scratch.importance_trigger_curr -= i32::from(poignancy);
        state.scratch.importance_ele_n += 1;
    }
}

/// A turn's reply: the session grows, the stream shows the reply, the game hears it, and the
/// persona is free.
fn land_reply(world: &mut World, persona: Entity, turn: &ActiveTurn, outcome: TurnOutcome) {
    let now = world
        .get_resource::<SimClock>()
        .map(SimClock::now)
        .unwrap_or_default();
    if let Ok(mut entity) = world.get_entity_mut(persona) {
        entity.remove::<AwaitingCognition>();
    }
    if matches!(turn.request.mode, DialogueMode::Say(_)) {
        world
            .resource_mut::<DialogueSessions>()
            .0
            .entry((persona, turn.request.speaker.clone()))
            .or_default()
            .push(SessionTurn {
                message: outcome.message.clone(),
                reply: outcome.reply.clone(),
                kept_prestart: outcome.kept_prestart.clone(),
            });
    }
    show(world, persona, &turn.name, outcome.reply.clone(), true);
    if let Some(mut stream) = world.get_mut::<DialogueStream>(persona) {
        stream.running = false;
    }
    report_failures(world, persona, &turn.name, &outcome);
    let event = DialogueReplied {
        persona,
        name: if turn.name.is_empty() {
            outcome.name
        } else {
            turn.name.clone()
        },
        speaker: turn.request.speaker.clone(),
        time: now,
        mode: turn.request.mode.clone(),
        reply: outcome.reply,
        tool_calls: outcome.tool_calls,
        planner_calls: outcome.planner_calls,
        final_output: outcome.final_output,
    };
    world.trigger(event.clone());
    world.write_message(event);
}

/// The turn's prompts that fell back to their fail-safes, as [`ModelCallFailed`].
fn report_failures(world: &mut World, persona: Entity, name: &str, outcome: &TurnOutcome) {
    let now = world
        .get_resource::<SimClock>()
        .map(SimClock::now)
        .unwrap_or_default();
    for failure in &outcome.failures {
        let event = ModelCallFailed {
            persona,
            name: name.to_string(),
            time: now,
            prompt_kind: failure.kind,
            reason: failure.reason,
            attempts: failure.attempts,
        };
        world.trigger(event.clone());
        world.write_message(event);
    }
}
