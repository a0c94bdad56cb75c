//! The systems that move a directive along (see the [module docs](super)): commands in, model
//! answers landed, steps run, checks measured — one exclusive system in [`SimPoll`], between
//! steps, after thoughts and dialogue turns landed.
//!
//! [`SimPoll`]: crate::clock::SimPoll

use bevy::prelude::*;
use bevy::tasks::Task;
use chrono::NaiveDateTime;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::clock::{AwaitingCognition, SimClock, poll_landing, spawn_landing};
use crate::dialogue::prompts::neutralise;
use crate::dialogue::tools::resolve_place;
use crate::dialogue::{DialogueReplied, ToolCall, ToolHandler, ToolRegistry};
use crate::llm::LlmClient;
use crate::persist::{PersistError, TownSnapshot};
use crate::persona::{Body, Persona};
use crate::prompt::{PromptContext, PromptLibrary, run_prompt};
use crate::settings::AgentSettings;
use crate::world::{AddressLevel, TownMap};

use super::executor::{ExecutorInput, ExecutorState, transition};
use super::intent::Intent;
use super::plan::{Plan, PlanChecker, PlanError};
use super::prompts::{
    Decision, DirectorIntent, DirectorPlan, DirectorReplan, DirectorReview, DirectorValidate,
    TownBrief,
};
use super::review::{CheckResult, Review};
use super::skills::{BUSY, DIRECTOR, persona_names};
use super::{
    ConfirmationPolicy, DirectivePlanned, DirectiveRejected, Director, DirectorAsks,
    DirectorCommand, DirectorFailed, DirectorJob, DirectorReplanned, DirectorReviewed,
    DirectorSettings, DirectorStateChanged, DirectorStepFinished, StepRun, StepStatus, Wait,
};

/// A model answer for the job (saved while held: see [`SavedRuntime`]).
#[derive(Clone, Serialize, Deserialize)]
pub(super) enum TaskAnswer {
    Planned {
        intent: Intent,
        plan: Option<Value>,
        calls: u32,
    },
    Validated {
        decision: Decision,
        calls: u32,
    },
    Replanned {
        plan: Option<Value>,
        calls: u32,
    },
    Reviewed {
        summary: String,
        calls: u32,
    },
}

/// What the director keeps besides the job: the model call in flight, an answer held while
/// paused, the snapshot, its entity (which awaits cognition while a call is out), and the
/// dialogue replies its steps wait for.
#[derive(Resource, Default)]
pub(super) struct DirectorRuntime {
    task: Option<Task<TaskAnswer>>,
    landed: Option<TaskAnswer>,
    snapshot: Option<TownSnapshot>,
    entity: Option<Entity>,
    replies: Vec<(String, String)>,
    /// Polls since an `open_stage` step started waiting with its scene not seen open yet.
    unseen_scene_polls: u32,
}

/// Polls an `open_stage` step waits to see its scene open before it fails: the scene opens
/// in the stage's poll of this frame or the next and is witnessed at the end of that frame.
const SCENE_OPEN_POLLS: u32 = 3;

/// What a save keeps of [`DirectorRuntime`] (see [`save`](super::save)): the answer held
/// while paused, the replies steps wait for, and the scene polls counted.
#[derive(Serialize, Deserialize)]
pub(super) struct SavedRuntime {
    landed: Option<TaskAnswer>,
    replies: Vec<(String, String)>,
    unseen_scene_polls: u32,
}

/// Most replies kept waiting, and characters of a saved answer's text.
const MAX_SAVED_REPLIES: usize = 64;
const MAX_SAVED_ANSWER: usize = 200_000;

impl SavedRuntime {
    /// Checks a saved runtime as untrusted input: `Err((field, why))`.
    pub(super) fn check(&self) -> Result<(), (String, String)> {
        if self.replies.len() > MAX_SAVED_REPLIES {
            return Err((
                "runtime.replies".into(),
                format!("at most {MAX_SAVED_REPLIES}"),
            ));
        }
        let long = |text: &str| text.chars().count() > MAX_SAVED_ANSWER;
        if self.replies.iter().any(|(n, r)| long(n) || long(r)) {
            return Err(("runtime.replies".into(), "a reply is too long".into()));
        }
        let answer = self
            .landed
            .as_ref()
            .map(|a| serde_json::to_string(a).unwrap_or_default())
            .unwrap_or_default();
        if answer.len() > MAX_SAVED_ANSWER {
            return Err((
                "runtime.landed".into(),
                "the held answer is too long".into(),
            ));
        }
        Ok(())
    }
}

impl DirectorRuntime {
    /// What a save keeps, and the snapshot; `Err` while a call is out (a save waits for it).
    pub(super) fn to_save(&self) -> Result<(SavedRuntime, Option<&TownSnapshot>), String> {
        if self.task.is_some() {
            return Err("the director's call is out".into());
        }
        Ok((
            SavedRuntime {
                landed: self.landed.clone(),
                replies: self.replies.clone(),
                unseen_scene_polls: self.unseen_scene_polls,
            },
            self.snapshot.as_ref(),
        ))
    }
}

/// A save is being loaded: the director's call, held answer, snapshot and replies belong to
/// the town it replaces. The running job ends ([`LOADED_MID_DIRECTIVE`]) unless the save goes
/// on with that very job (`same` says which: its id, when it was asked, its directive).
pub(super) fn end_for_load(world: &mut World, same: Option<&DirectorJob>) {
    if !world.contains_resource::<DirectorRuntime>() {
        return;
    }
    {
        let mut runtime = world.resource_mut::<DirectorRuntime>();
        runtime.task = None;
        runtime.landed = None;
        runtime.snapshot = None;
        runtime.replies.clear();
        runtime.unseen_scene_polls = 0;
    }
    set_awaiting(world, false);
    let goes_on = |job: &DirectorJob| {
        same.is_some_and(|s| s.id == job.id && s.asked == job.asked && s.directive == job.directive)
    };
    let running = world
        .get_resource::<Director>()
        .and_then(|d| d.job.as_ref())
        .is_some_and(|job| !goes_on(job));
    if running {
        with_job(world, |world, job| {
            fail(world, job, LOADED_MID_DIRECTIVE.to_string());
        });
    }
}

/// Puts a saved runtime back (after [`end_for_load`]).
pub(super) fn restore_runtime(
    world: &mut World,
    saved: SavedRuntime,
    snapshot: Option<TownSnapshot>,
) {
    let mut runtime = world.get_resource_or_init::<DirectorRuntime>();
    runtime.landed = saved.landed;
    runtime.replies = saved.replies;
    runtime.unseen_scene_polls = saved.unseen_scene_polls;
    runtime.snapshot = snapshot;
}

/// Keeps the dialogue replies a waiting step needs.
pub(super) fn hear_reply(
    event: On<DialogueReplied>,
    director: Res<Director>,
    mut runtime: ResMut<DirectorRuntime>,
) {
    let waiting = director.job.as_ref().is_some_and(|job| {
        job.steps.iter().any(
            |s| matches!(&s.status, StepStatus::Waiting(Wait::Reply(name)) if *name == event.name),
        )
    });
    if waiting {
        runtime
            .replies
            .push((event.name.clone(), neutralise(&event.reply, 2_000)));
    }
}

/// The director's one system.
pub(super) fn drive_director(world: &mut World) {
    let commands: Vec<DirectorCommand> = world
        .get_resource_mut::<Messages<DirectorCommand>>()
        .map(|mut m| m.drain().collect())
        .unwrap_or_default();
    for command in commands {
        handle(world, command);
    }
    land(world);
    advance(world);
    observe_checks(world);
}

/// Why a directive ended when a save was loaded under it.
pub const LOADED_MID_DIRECTIVE: &str =
    "a save was loaded into the town: the directive's town is gone (nothing was rolled back)";

fn emit<E: Event + Message + Clone>(world: &mut World, event: E)
where
    for<'a> E::Trigger<'a>: Default,
{
    world.trigger(event.clone());
    world.write_message(event);
}

fn now(world: &World) -> NaiveDateTime {
    world
        .get_resource::<SimClock>()
        .map(SimClock::now)
        .unwrap_or_default()
}

fn settings(world: &World) -> DirectorSettings {
    world
        .get_resource::<DirectorSettings>()
        .cloned()
        .unwrap_or_default()
}

/// Runs `f` on the job (taken out of [`Director`] meanwhile); a job that ended goes to the
/// history.
fn with_job(world: &mut World, f: impl FnOnce(&mut World, &mut DirectorJob)) {
    let Some(mut job) = world.resource_mut::<Director>().job.take() else {
        return;
    };
    f(world, &mut job);
    if job.state.is_terminal() {
        finish(world, job);
    } else {
        world.resource_mut::<Director>().job = Some(job);
    }
}

fn finish(world: &mut World, job: DirectorJob) {
    let mut runtime = world.resource_mut::<DirectorRuntime>();
    runtime.task = None;
    runtime.landed = None;
    runtime.snapshot = None;
    runtime.replies.clear();
    let entity = runtime.entity;
    if let Some(entity) = entity
        && let Ok(mut e) = world.get_entity_mut(entity)
    {
        e.remove::<AwaitingCognition>();
    }
    let mut director = world.resource_mut::<Director>();
    director.history.push(job);
    let excess = director.history.len().saturating_sub(Director::HISTORY);
    director.history.drain(..excess);
}

/// Moves the executor; an input the state does not take is ignored (and logged).
fn go(world: &mut World, job: &mut DirectorJob, input: ExecutorInput) -> bool {
    match transition(job.state, input) {
        Ok(to) => {
            let from = job.state;
            job.state = to;
            let time = now(world);
            emit(
                world,
                DirectorStateChanged {
                    job: job.id,
                    time,
                    from,
                    to,
                },
            );
            true
        }
        Err(error) => {
            debug!(%error, "director: input ignored");
            false
        }
    }
}

fn fail(world: &mut World, job: &mut DirectorJob, reason: String) {
    job.error = Some(reason.clone());
    emit(
        world,
        DirectorFailed {
            job: job.id,
            reason,
        },
    );
    go(world, job, ExecutorInput::Fail);
}

// ---------------------------------------------------------------------------------------------
// Commands.

fn handle(world: &mut World, command: DirectorCommand) {
    match command {
        DirectorCommand::Directive { text, policy } => start(world, &text, policy),
        DirectorCommand::Confirm => with_job(world, |world, job| {
            if job.state == ExecutorState::AwaitingConfirmation {
                go(world, job, ExecutorInput::Confirm);
            }
        }),
        DirectorCommand::Pause => with_job(world, |world, job| {
            go(world, job, ExecutorInput::Pause);
        }),
        DirectorCommand::Resume => with_job(world, |world, job| {
            go(world, job, ExecutorInput::Resume);
        }),
        DirectorCommand::Answer(text) => with_job(world, |world, job| {
            if job.state != ExecutorState::AwaitingUserInput {
                return;
            }
            job.answers.push(neutralise(text.trim(), 1_000));
            job.question = None;
            go(world, job, ExecutorInput::Answer);
            validate(world, job);
        }),
        DirectorCommand::Cancel => with_job(world, |world, job| {
            if !go(world, job, ExecutorInput::Cancel) {
                return;
            }
            let mut runtime = world.resource_mut::<DirectorRuntime>();
            runtime.task = None;
            runtime.landed = None;
            if let Some(snapshot) = runtime.snapshot.take()
                && let Err(error) = snapshot.restore(world)
            {
                error!(%error, "director: the town could not be rolled back");
                job.error = Some(format!("the town could not be rolled back: {error}"));
            }
        }),
    }
}

fn start(world: &mut World, text: &str, policy: ConfirmationPolicy) {
    let settings = settings(world);
    let chars = text.chars().count();
    let refusal = if world.resource::<Director>().job.is_some() {
        Some("a directive is already running: cancel it or wait for it to finish".to_string())
    } else if text.trim().is_empty() {
        Some("the directive is empty".to_string())
    } else if chars > settings.max_directive_chars {
        Some(format!(
            "the directive is {chars} characters long; at most {} are accepted",
            settings.max_directive_chars
        ))
    } else {
        None
    };
    if let Some(reason) = refusal {
        emit(world, DirectiveRejected { reason });
        return;
    }
    let id = {
        let mut director = world.resource_mut::<Director>();
        director.next_id += 1;
        director.next_id
    };
    let mut job = DirectorJob {
        id,
        directive: neutralise(text.trim(), settings.max_directive_chars),
        policy,
        state: ExecutorState::Idle,
        intent: None,
        steps: Vec::new(),
        checks: Vec::new(),
        replans: 0,
        question: None,
        answers: Vec::new(),
        review: None,
        error: None,
        asked: now(world),
        model_calls: 0,
        current: None,
        replan_reason: None,
        evidence: Default::default(),
    };
    go(world, &mut job, ExecutorInput::Directive);
    let brief = town_brief(world);
    let directive = job.directive.clone();
    let spawned = spawn(world, move |ctx| async move {
        let intent = run_prompt(
            &ctx,
            &DirectorIntent {
                directive: directive.clone(),
                town: brief.clone(),
            },
        )
        .await;
        let intent_json = serde_json::to_string(&intent.value).unwrap_or_default();
        let plan = run_prompt(
            &ctx,
            &DirectorPlan {
                directive,
                intent: intent_json,
                town: brief,
            },
        )
        .await;
        TaskAnswer::Planned {
            intent: intent.value,
            plan: plan.value,
            calls: intent.attempts + plan.attempts,
        }
    });
    if !spawned {
        fail(
            world,
            &mut job,
            "there is no model client to plan with".into(),
        );
    }
    if job.state.is_terminal() {
        finish(world, job);
    } else {
        world.resource_mut::<Director>().job = Some(job);
    }
}

// ---------------------------------------------------------------------------------------------
// Model calls.

/// Starts a model call for the job; `false` when the world has no client or templates.
fn spawn<F, Fut>(world: &mut World, make: F) -> bool
where
    F: FnOnce(PromptContext) -> Fut,
    Fut: std::future::Future<Output = TaskAnswer> + Send + 'static,
{
    let (Some(client), Some(library)) = (
        world.get_resource::<LlmClient>().cloned(),
        world.get_resource::<PromptLibrary>().cloned(),
    ) else {
        return false;
    };
    let retries = world
        .get_resource::<AgentSettings>()
        .map_or(3, |s| s.prompt_retries);
    let ctx = PromptContext::new(client, library)
        .with_retries(retries)
        .with_affinity(DIRECTOR);
    let task = spawn_landing(make(ctx));
    let step = world.get_resource::<SimClock>().map_or(0, SimClock::step);
    let entity = director_entity(world);
    world
        .entity_mut(entity)
        .insert(AwaitingCognition::new(step));
    world.resource_mut::<DirectorRuntime>().task = Some(task);
    true
}

fn director_entity(world: &mut World) -> Entity {
    if let Some(entity) = world.resource::<DirectorRuntime>().entity
        && world.get_entity(entity).is_ok()
    {
        return entity;
    }
    let entity = world.spawn(Name::new("Director")).id();
    world.resource_mut::<DirectorRuntime>().entity = Some(entity);
    entity
}

fn set_awaiting(world: &mut World, on: bool) {
    let Some(entity) = world.resource::<DirectorRuntime>().entity else {
        return;
    };
    let step = world.get_resource::<SimClock>().map_or(0, SimClock::step);
    if let Ok(mut e) = world.get_entity_mut(entity) {
        if on {
            e.insert(AwaitingCognition::new(step));
        } else {
            e.remove::<AwaitingCognition>();
        }
    }
}

/// Collects a finished model call and applies it (held while paused).
fn land(world: &mut World) {
    let finished = {
        let mut runtime = world.resource_mut::<DirectorRuntime>();
        match runtime.task.as_mut().map(poll_landing) {
            Some(Some(answer)) => {
                runtime.task = None;
                runtime.landed = Some(answer);
                true
            }
            _ => false,
        }
    };
    if finished {
        set_awaiting(world, false);
    }
    let paused = world
        .resource::<Director>()
        .job
        .as_ref()
        .is_none_or(|job| matches!(job.state, ExecutorState::Paused(_)));
    if paused {
        return;
    }
    let Some(answer) = world.resource_mut::<DirectorRuntime>().landed.take() else {
        return;
    };
    with_job(world, |world, job| apply(world, job, answer));
}

fn apply(world: &mut World, job: &mut DirectorJob, answer: TaskAnswer) {
    match answer {
        TaskAnswer::Planned {
            intent,
            plan,
            calls,
        } => {
            job.model_calls += calls;
            job.intent = Some(intent);
            accept_plan(world, job, plan);
        }
        TaskAnswer::Replanned { plan, calls } => {
            job.model_calls += calls;
            match job.state {
                ExecutorState::Planning => accept_plan(world, job, plan),
                ExecutorState::StepComplete => accept_replan(world, job, plan),
                _ => {}
            }
        }
        TaskAnswer::Validated { decision, calls } => {
            job.model_calls += calls;
            if job.state == ExecutorState::StepComplete {
                decide(world, job, decision);
            }
        }
        TaskAnswer::Reviewed { summary, calls } => {
            job.model_calls += calls;
            if job.state == ExecutorState::Reviewing {
                let count = |s: &StepStatus| job.steps.iter().filter(|r| r.status == *s).count();
                let review = Review {
                    steps_done: count(&StepStatus::Done),
                    steps_failed: count(&StepStatus::Failed),
                    steps_skipped: count(&StepStatus::Skipped),
                    checks: job.checks.clone(),
                    summary,
                };
                job.review = Some(review.clone());
                emit(
                    world,
                    DirectorReviewed {
                        job: job.id,
                        review,
                    },
                );
                go(world, job, ExecutorInput::Reviewed);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Plans.

/// The town as the prompts show it.
fn town_brief(world: &mut World) -> TownBrief {
    let personas: Vec<String> = persona_names(world).into_iter().map(|(_, n)| n).collect();
    let places = world
        .get_resource::<TownMap>()
        .map(|map| {
            map.sectors()
                .map(|sector| {
                    let arenas: Vec<&str> = map.arenas(sector).collect();
                    format!("{sector} ({})", arenas.join(", "))
                })
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    let settings = settings(world);
    let (skills, skill_names) = world
        .get_resource::<ToolRegistry>()
        .map(|registry| {
            let tools: Vec<_> = registry
                .iter()
                .filter(|t| {
                    settings.allow.0.contains(&t.spec.name)
                        && !matches!(t.handler, ToolHandler::AddToSchedule)
                })
                .collect();
            (
                tools
                    .iter()
                    .map(|t| t.spec.listing())
                    .collect::<Vec<_>>()
                    .join("\n"),
                tools.iter().map(|t| t.spec.name.clone()).collect(),
            )
        })
        .unwrap_or_default();
    TownBrief {
        now: now(world).format("%Y-%m-%d %H:%M (%A)").to_string(),
        personas,
        places,
        skills,
        skill_names,
    }
}

/// Reads and checks a plan against the town; `done` are the step numbers already over.
fn check_plan(world: &mut World, value: Option<&Value>, done: &[u32]) -> Result<Plan, PlanError> {
    let now = now(world);
    let value = value.ok_or_else(|| PlanError::Shape("the planner gave no usable plan".into()))?;
    let plan = Plan::from_json(value, now)?;
    let personas: Vec<String> = persona_names(world).into_iter().map(|(_, n)| n).collect();
    let settings = settings(world);
    let empty = ToolRegistry::default();
    let registry = world.get_resource::<ToolRegistry>().unwrap_or(&empty);
    let map = world.get_resource::<TownMap>();
    let place_exists = |place: &str| map.is_some_and(|m| resolve_place(m, None, place).is_some());
    PlanChecker {
        registry,
        allow: &settings.allow,
        personas: &personas,
        place_exists: &place_exists,
        now,
    }
    .check(&plan, done)?;
    Ok(plan)
}

fn steps_text(steps: &[StepRun], over: bool) -> String {
    let lines: Vec<String> = steps
        .iter()
        .filter(|s| s.status.is_over() == over)
        .map(|s| {
            let step = serde_json::to_string(&s.step).unwrap_or_default();
            if over {
                format!(
                    "{step} → {:?}: {}",
                    s.status,
                    neutralise(&s.result_text(), 400)
                )
            } else {
                step
            }
        })
        .collect();
    if lines.is_empty() {
        "(none)".into()
    } else {
        lines.join("\n")
    }
}

/// A plan from the planner: run it (after confirmation) or send it back with the reason.
fn accept_plan(world: &mut World, job: &mut DirectorJob, value: Option<Value>) {
    match check_plan(world, value.as_ref(), &[]) {
        Ok(plan) => {
            let arenas: Vec<Option<String>> = plan
                .checks
                .iter()
                .map(|c| arena_of(world, &c.place))
                .collect();
            job.checks = plan
                .checks
                .iter()
                .cloned()
                .zip(arenas)
                .map(|(c, a)| CheckResult::new(c, a))
                .collect();
            job.steps = plan.steps.iter().cloned().map(StepRun::new).collect();
            emit(
                world,
                DirectivePlanned {
                    job: job.id,
                    intent: job.intent.clone().unwrap_or_default(),
                    steps: plan.steps.clone(),
                    checks: plan.checks.clone(),
                    estimated_tokens: plan.estimated_tokens(),
                },
            );
            let confirm = job.policy != ConfirmationPolicy::None;
            go(world, job, ExecutorInput::Planned { confirm });
        }
        Err(error) => {
            let refused = value
                .map(|v| neutralise(&v.to_string(), 2_000))
                .unwrap_or_else(|| "(none)".into());
            replan(world, job, error.to_string(), refused, "(none)".into(), 1);
        }
    }
}

/// New remaining steps after a step: replace the pending ones, or try again / fail.
fn accept_replan(world: &mut World, job: &mut DirectorJob, value: Option<Value>) {
    let done: Vec<u32> = job
        .steps
        .iter()
        .filter(|s| s.status.is_over())
        .map(|s| s.step.id)
        .collect();
    // An empty list is a fine answer to a replan: nothing more to do.
    let nothing_more = value
        .as_ref()
        .and_then(|v| v.get("steps"))
        .and_then(Value::as_array)
        .is_some_and(Vec::is_empty);
    let checked = if nothing_more {
        Ok(Plan::default())
    } else {
        check_plan(world, value.as_ref(), &done)
    };
    match checked {
        Ok(plan) => {
            job.steps.retain(|s| s.status.is_over());
            job.steps
                .extend(plan.steps.iter().cloned().map(StepRun::new));
            let reason = job.replan_reason.clone().unwrap_or_default();
            emit(
                world,
                DirectorReplanned {
                    job: job.id,
                    reason,
                    steps: plan.steps,
                },
            );
            next_step(world, job);
        }
        Err(error) => {
            let refused = value
                .map(|v| neutralise(&v.to_string(), 2_000))
                .unwrap_or_else(|| "(none)".into());
            let done_text = steps_text(&job.steps, true);
            let next_id = job.steps.iter().map(|s| s.step.id).max().unwrap_or(0) + 1;
            replan(world, job, error.to_string(), refused, done_text, next_id);
        }
    }
}

/// Asks the planner for the remaining steps, unless the replans are used up (then fails).
fn replan(
    world: &mut World,
    job: &mut DirectorJob,
    reason: String,
    remaining: String,
    done: String,
    next_id: u32,
) {
    let max = settings(world).max_replans;
    if job.replans >= max {
        fail(
            world,
            job,
            format!("gave up after {} replans: {reason}", job.replans),
        );
        return;
    }
    job.replans += 1;
    job.replan_reason = Some(reason.clone());
    let prompt = DirectorReplan {
        directive: job.directive.clone(),
        done,
        remaining,
        reason: neutralise(&reason, 500),
        next_id,
        town: town_brief(world),
    };
    if !spawn(world, move |ctx| async move {
        let outcome = run_prompt(&ctx, &prompt).await;
        TaskAnswer::Replanned {
            plan: outcome.value,
            calls: outcome.attempts,
        }
    }) {
        fail(world, job, "there is no model client to plan with".into());
    }
}

fn arena_of(world: &World, place: &str) -> Option<String> {
    let map = world.get_resource::<TownMap>()?;
    resolve_place(map, None, place).map(|a| a.truncated(AddressLevel::Arena).to_string())
}

// ---------------------------------------------------------------------------------------------
// Steps.

fn advance(world: &mut World) {
    with_job(world, |world, job| match job.state {
        ExecutorState::Executing => execute(world, job),
        ExecutorState::Reviewing => review(world, job),
        _ => {}
    });
}

/// Captures the town before the first step; `false` while that is not possible yet (a mind
/// out thinking: the director's entity holds a Lockstep clock meanwhile, so the moment comes
/// between steps).
fn ensure_snapshot(world: &mut World) -> bool {
    if world.resource::<DirectorRuntime>().snapshot.is_some() {
        return true;
    }
    director_entity(world);
    set_awaiting(world, false);
    match TownSnapshot::capture(world) {
        Ok(snapshot) => {
            world.resource_mut::<DirectorRuntime>().snapshot = Some(snapshot);
            true
        }
        Err(PersistError::Busy(_)) => {
            set_awaiting(world, true);
            false
        }
        Err(error) => {
            // No town to roll back to (e.g. no map): run without, and say so.
            warn!(%error, "director: no snapshot; a cancel will not roll the town back");
            world.resource_mut::<DirectorRuntime>().snapshot = None;
            true
        }
    }
}

fn execute(world: &mut World, job: &mut DirectorJob) {
    if world.resource::<DirectorRuntime>().snapshot.is_none()
        && job.steps.iter().all(|s| s.status == StepStatus::Pending)
        && !ensure_snapshot(world)
    {
        return;
    }
    // A step waiting for something.
    if let Some(i) = job.current {
        let Some(StepStatus::Waiting(wait)) = job.steps.get(i).map(|s| s.status.clone()) else {
            job.current = None;
            return execute(world, job);
        };
        match wait {
            Wait::Reply(name) => {
                let mut runtime = world.resource_mut::<DirectorRuntime>();
                if let Some(at) = runtime.replies.iter().position(|(n, _)| *n == name) {
                    let (_, reply) = runtime.replies.remove(at);
                    let mut result = job.steps[i]
                        .result
                        .clone()
                        .and_then(Result::ok)
                        .unwrap_or(json!({}));
                    if let Some(object) = result.as_object_mut() {
                        object.remove("await");
                        object.insert("reply".into(), Value::String(reply));
                    }
                    step_over(world, job, i, StepStatus::Done, Ok(result));
                }
            }
            Wait::Until(at) => {
                if now(world) >= at {
                    let result = json!({"waited_until": at.format("%Y-%m-%d %H:%M").to_string()});
                    step_over(world, job, i, StepStatus::Done, Ok(result));
                }
            }
            Wait::Scene(stage) => {
                if let Some(outcome) = job.evidence.outcome(&stage) {
                    world.resource_mut::<DirectorRuntime>().unseen_scene_polls = 0;
                    step_over(world, job, i, StepStatus::Done, Ok(outcome));
                    return;
                }
                let seen = job
                    .evidence
                    .scenes
                    .iter()
                    .any(|s| s.stage == stage && s.opened)
                    || world
                        .get_resource::<crate::stage::Stages>()
                        .is_some_and(|s| s.get(&stage).is_some());
                let mut runtime = world.resource_mut::<DirectorRuntime>();
                if seen {
                    runtime.unseen_scene_polls = 0;
                } else {
                    runtime.unseen_scene_polls += 1;
                    if runtime.unseen_scene_polls > SCENE_OPEN_POLLS {
                        runtime.unseen_scene_polls = 0;
                        let why =
                            format!("the scene on {stage} never opened (refused by the stage)");
                        step_over(world, job, i, StepStatus::Failed, Err(why));
                    }
                }
            }
        }
        return;
    }
    // The next step that can run.
    let mut i = 0;
    while i < job.steps.len() {
        if job.steps[i].status != StepStatus::Pending {
            i += 1;
            continue;
        }
        let step = job.steps[i].step.clone();
        let status_of = |id: u32| {
            job.steps
                .iter()
                .find(|s| s.step.id == id)
                .map(|s| s.status.clone())
        };
        let blocked = step
            .depends_on
            .iter()
            .any(|&d| matches!(status_of(d), Some(StepStatus::Failed | StepStatus::Skipped)));
        let condition_fails = step.condition.as_ref().is_some_and(|c| {
            let result = job
                .steps
                .iter()
                .find(|s| s.step.id == c.step)
                .map(StepRun::result_text)
                .unwrap_or_default();
            !c.holds(&result)
        });
        if blocked || condition_fails {
            let why = if blocked {
                "skipped: a step it depends on did not run"
            } else {
                "skipped: its condition did not hold"
            };
            job.steps[i].status = StepStatus::Skipped;
            job.steps[i].result = Some(Err(why.into()));
            emit(
                world,
                DirectorStepFinished {
                    job: job.id,
                    step: step.id,
                    skill: step.skill.clone(),
                    status: StepStatus::Skipped,
                    result: why.into(),
                },
            );
            i += 1;
            continue;
        }
        match run_skill(world, &step.skill, &step.args) {
            Err(error) if error == BUSY => return,
            Err(error) => step_over(world, job, i, StepStatus::Failed, Err(error)),
            Ok(value) => match awaited(&value) {
                Some(wait) => {
                    job.steps[i].status = StepStatus::Waiting(wait);
                    job.steps[i].result = Some(Ok(value));
                    job.current = Some(i);
                }
                None => step_over(world, job, i, StepStatus::Done, Ok(value)),
            },
        }
        return;
    }
    go(world, job, ExecutorInput::AllStepsDone);
}

/// Runs a skill through the registry: the allow-list and the schema are checked again here,
/// whatever the plan checker said.
fn run_skill(world: &mut World, skill: &str, args: &Value) -> Result<Value, String> {
    let settings = settings(world);
    let tool = world
        .get_resource::<ToolRegistry>()
        .and_then(|r| r.get(skill))
        .cloned()
        .ok_or_else(|| format!("no skill called `{skill}`"))?;
    if !settings.allow.0.contains(skill) {
        return Err(format!("the director may not use `{skill}`"));
    }
    tool.check_args(args)?;
    let ToolHandler::System(id) = tool.handler else {
        return Err(format!("`{skill}` is a persona's own tool"));
    };
    let call = ToolCall {
        persona: Entity::PLACEHOLDER,
        speaker: DIRECTOR.into(),
        args: args.clone(),
    };
    world
        .run_system_with(id, call)
        .map_err(|e| format!("`{skill}` could not run: {e}"))?
}

/// What a skill's result says to wait for.
fn awaited(value: &Value) -> Option<Wait> {
    let wait = value.get("await")?;
    if let Some(name) = wait.get("reply_from").and_then(Value::as_str) {
        return Some(Wait::Reply(name.to_string()));
    }
    if let Some(stage) = wait.get("scene_closed").and_then(Value::as_str) {
        return Some(Wait::Scene(stage.to_string()));
    }
    let until = wait.get("until").and_then(Value::as_str)?;
    NaiveDateTime::parse_from_str(until, "%Y-%m-%d %H:%M:%S")
        .ok()
        .map(Wait::Until)
}

/// A step is over: the game hears it, the executor moves to STEP_COMPLETE and validates.
fn step_over(
    world: &mut World,
    job: &mut DirectorJob,
    i: usize,
    status: StepStatus,
    result: Result<Value, String>,
) {
    let Some(run) = job.steps.get_mut(i) else {
        return;
    };
    run.status = status.clone();
    run.result = Some(result);
    let event = DirectorStepFinished {
        job: job.id,
        step: run.step.id,
        skill: run.step.skill.clone(),
        status,
        result: run.result_text(),
    };
    job.current = Some(i);
    emit(world, event);
    go(world, job, ExecutorInput::StepFinished);
    validate(world, job);
}

/// Validates the current step: with the model, or by the rule.
fn validate(world: &mut World, job: &mut DirectorJob) {
    let Some(run) = job.current.and_then(|i| job.steps.get(i)) else {
        return next_step(world, job);
    };
    let prompt = DirectorValidate {
        directive: job.directive.clone(),
        step: serde_json::to_string(&run.step).unwrap_or_default(),
        result: neutralise(&run.result_text(), 1_000),
        failed: run.status == StepStatus::Failed,
        remaining: steps_text(&job.steps, false),
        answers: job.answers.join(" | "),
    };
    if !settings(world).validate_with_model {
        use crate::prompt::Prompt;
        let decision = prompt.fail_safe();
        return decide(world, job, decision);
    }
    if !spawn(world, move |ctx| async move {
        let outcome = run_prompt(&ctx, &prompt).await;
        TaskAnswer::Validated {
            decision: outcome.value,
            calls: outcome.attempts,
        }
    }) {
        fail(world, job, "there is no model client".into());
    }
}

fn decide(world: &mut World, job: &mut DirectorJob, decision: Decision) {
    match decision {
        Decision::Continue => next_step(world, job),
        Decision::AskUser(question) => {
            job.question = Some(question.clone());
            emit(
                world,
                DirectorAsks {
                    job: job.id,
                    question,
                },
            );
            go(world, job, ExecutorInput::AskUser);
        }
        Decision::Replan(reason) => {
            let remaining = steps_text(&job.steps, false);
            let done = steps_text(&job.steps, true);
            let next_id = job.steps.iter().map(|s| s.step.id).max().unwrap_or(0) + 1;
            replan(world, job, reason, remaining, done, next_id);
        }
    }
}

/// On to the next step (after confirmation under `per_step`), or to the review.
fn next_step(world: &mut World, job: &mut DirectorJob) {
    job.current = None;
    if job.steps.iter().all(|s| s.status.is_over()) {
        go(world, job, ExecutorInput::AllStepsDone);
    } else {
        let confirm = job.policy == ConfirmationPolicy::PerStep;
        go(world, job, ExecutorInput::Continue { confirm });
    }
}

// ---------------------------------------------------------------------------------------------
// Review.

fn review(world: &mut World, job: &mut DirectorJob) {
    let runtime = world.resource::<DirectorRuntime>();
    if runtime.task.is_some() || runtime.landed.is_some() {
        return;
    }
    let now = now(world);
    if job.checks.iter().any(|c| now <= c.check.to) {
        return;
    }
    let checks: Vec<String> = job.checks.iter().map(CheckResult::line).collect();
    let prompt = DirectorReview {
        directive: job.directive.clone(),
        steps: steps_text(&job.steps, true),
        checks: checks.join("\n"),
        evidence: job.evidence.text(),
    };
    if !spawn(world, move |ctx| async move {
        let outcome = run_prompt(&ctx, &prompt).await;
        TaskAnswer::Reviewed {
            summary: outcome.value,
            calls: outcome.attempts,
        }
    }) {
        fail(world, job, "there is no model client".into());
    }
}

/// The arena each persona stands in (`world:sector:arena`), by name; `None` without a map.
pub(crate) fn persona_arenas(world: &mut World) -> Option<Vec<(String, String)>> {
    let tiles: Vec<(String, crate::world::TileCoord)> = world
        .query_filtered::<(&Name, &Body), With<Persona>>()
        .iter(world)
        .map(|(name, body)| (name.as_str().to_string(), body.tile))
        .collect();
    let map = world.get_resource::<TownMap>()?;
    Some(
        tiles
            .into_iter()
            .filter_map(|(name, tile)| {
                map.tile_address(tile, AddressLevel::Arena)
                    .map(|a| (name, a.to_string()))
            })
            .collect(),
    )
}

/// Notes who stands in each check's arena while its window is open.
fn observe_checks(world: &mut World) {
    let live = world
        .resource::<Director>()
        .job
        .as_ref()
        .is_some_and(|job| !job.checks.is_empty() && !job.state.is_terminal());
    if !live {
        return;
    }
    let now = now(world);
    let Some(positions) = persona_arenas(world) else {
        return;
    };
    if let Some(job) = world.resource_mut::<Director>().job.as_mut() {
        for check in &mut job.checks {
            check.observe(now, positions.iter().map(|(n, a)| (n.as_str(), a.as_str())));
        }
    }
}
