//! Playing scenes between steps (see the module docs): commands, then each stage's turn as a
//! small state machine — idle, actors planning (one task per actor, all at once), the stage
//! agent resolving — advanced in [`SimPoll`](crate::clock::SimPoll).

use std::collections::BTreeMap;

use bevy::prelude::*;
use bevy::tasks::futures_lite::future::{block_on, poll_once};
use bevy::tasks::{AsyncComputeTaskPool, Task};

use crate::clock::{AwaitingCognition, SimClock};
use crate::llm::LlmClient;
use crate::persona::Mind;
use crate::prompt::{PromptContext, PromptLibrary, run_prompt};
use crate::settings::AgentSettings;

use super::prompts::{ActorPlan, ActorTurn, StageResolve};
use super::scene::{Resolution, Scene};
use super::{
    ActorPlanned, StageClosed, StageCommand, StageOpened, StageRefused, StageSettings,
    StageTurnResolved, Stages, hold, release,
};

/// Most scenes playing at once.
pub(crate) const MAX_STAGES: usize = 8;

/// Where a stage's current turn stands.
#[derive(Default)]
pub(super) enum Phase {
    /// No turn running.
    #[default]
    Idle,
    /// Every actor's call is out; a slot per actor, filled as they land.
    Planning {
        turn: u32,
        tasks: Vec<Option<Task<(ActorPlan, bool)>>>,
        plans: Vec<Option<(ActorPlan, bool)>>,
        personas: Vec<Entity>,
    },
    /// The stage agent is resolving the plans.
    Resolving {
        turn: u32,
        task: Task<(Resolution, bool)>,
        personas: Vec<Entity>,
    },
}

/// A scene and its turn in progress.
pub(super) struct StageRun {
    pub scene: Scene,
    pub phase: Phase,
    /// Turns still to play, one after another.
    pub queued: u32,
}

impl StageRun {
    pub fn busy(&self) -> bool {
        !matches!(self.phase, Phase::Idle)
    }

    /// The persona actors holding `AwaitingCognition` for the running turn.
    fn held(&self) -> &[Entity] {
        match &self.phase {
            Phase::Idle => &[],
            Phase::Planning { personas, .. } | Phase::Resolving { personas, .. } => personas,
        }
    }
}

/// FNV-1a of the parts: a request's seed, so a rerun asks the same.
fn seed(parts: &[&str]) -> u64 {
    parts.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, part| {
        part.bytes()
            .chain(std::iter::once(0xff))
            .fold(h, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
    })
}

/// Game code's stage commands (validated; a refusal is a [`StageRefused`]).
pub(super) fn apply_commands(
    world: &mut World,
    mut cursor: Local<bevy::ecs::message::MessageCursor<StageCommand>>,
) {
    let commands: Vec<StageCommand> = world
        .get_resource::<Messages<StageCommand>>()
        .map(|m| cursor.read(m).cloned().collect())
        .unwrap_or_default();
    if commands.is_empty() {
        return;
    }
    let max_turns = world
        .get_resource::<StageSettings>()
        .map_or(50, |s| s.max_turns);
    for command in commands {
        let outcome = world.resource_scope(|world, mut stages: Mut<Stages>| {
            apply_command(world, &mut stages, command, max_turns)
        });
        match outcome {
            Ok(Some(opened)) => {
                world.write_message(opened);
            }
            Ok(None) => {}
            Err(why) => {
                world.write_message(StageRefused { why });
            }
        }
    }
}

fn apply_command(
    world: &mut World,
    stages: &mut Stages,
    command: StageCommand,
    max_turns: u32,
) -> Result<Option<StageOpened>, String> {
    match command {
        StageCommand::Open { scene } => {
            let mut checked = Scene::new(
                scene.name.clone(),
                scene.environment.clone(),
                scene.actors.clone(),
            )?;
            checked.arena = scene.arena.clone();
            if stages.runs.contains_key(&checked.name) {
                return Err(format!("a scene is already playing on {}", checked.name));
            }
            if stages.runs.len() >= MAX_STAGES {
                return Err(format!("at most {MAX_STAGES} scenes play at once"));
            }
            for actor in &checked.actors {
                if let Some(persona) = actor.persona
                    && world.get::<Mind>(persona).is_none()
                {
                    return Err(format!("{} is played by no persona", actor.name));
                }
            }
            let opened = StageOpened {
                stage: checked.name.clone(),
                actors: checked.actors.iter().map(|a| a.name.clone()).collect(),
            };
            stages.runs.insert(
                checked.name.clone(),
                StageRun {
                    scene: checked,
                    phase: Phase::Idle,
                    queued: 0,
                },
            );
            Ok(Some(opened))
        }
        StageCommand::Play { stage, turns } => {
            let run = stages
                .runs
                .get_mut(&stage)
                .ok_or_else(|| "no scene is playing on that stage".to_string())?;
            let room =
                max_turns.saturating_sub(run.scene.turn + run.queued + u32::from(run.busy()));
            if turns == 0 || room == 0 {
                return Err(format!("a scene plays 1–{max_turns} turns"));
            }
            run.queued += turns.min(room);
            Ok(None)
        }
        StageCommand::Close { stage } => {
            let run = stages
                .runs
                .remove(&stage)
                .ok_or_else(|| "no scene is playing on that stage".to_string())?;
            // A turn in flight is dropped (its tasks cancelled); its personas are free.
            release(world, run.held());
            world.write_message(StageClosed {
                stage,
                turns: run.scene.turn,
            });
            Ok(None)
        }
    }
}

/// Advances every stage's turn (see the module docs).
pub(super) fn drive_stages(world: &mut World) {
    let (Some(client), Some(library)) = (
        world.get_resource::<LlmClient>().cloned(),
        world.get_resource::<PromptLibrary>().cloned(),
    ) else {
        return;
    };
    let retries = world
        .get_resource::<AgentSettings>()
        .map_or(3, |s| s.prompt_retries);
    let step = world.get_resource::<SimClock>().map_or(0, SimClock::step);
    let ctx = |name: &str| {
        PromptContext::new(client.clone(), library.clone())
            .with_retries(retries)
            .with_affinity(name)
    };
    world.resource_scope(|world, mut stages: Mut<Stages>| {
        for run in stages.runs.values_mut() {
            advance(world, run, &ctx, step);
        }
    });
}

fn advance(world: &mut World, run: &mut StageRun, ctx: &impl Fn(&str) -> PromptContext, step: u64) {
    match std::mem::take(&mut run.phase) {
        Phase::Idle => {
            if run.queued == 0 || run.scene.actors.is_empty() {
                return;
            }
            let personas: Vec<Entity> = run.scene.actors.iter().filter_map(|a| a.persona).collect();
            // Every persona actor must be free: its mind home, no other work running.
            let free = personas.iter().all(|p| {
                world.get::<Mind>(*p).is_some_and(Mind::is_home)
                    && world.get::<AwaitingCognition>(*p).is_none()
            });
            if !free {
                return;
            }
            let turn = run.scene.turn + 1;
            let pool = AsyncComputeTaskPool::get();
            let mut tasks = Vec::new();
            for actor in &run.scene.actors {
                let identity = actor
                    .persona
                    .and_then(|p| world.get::<Mind>(p))
                    .and_then(Mind::get)
                    .map(|m| m.scratch.identity_summary())
                    .unwrap_or_default();
                let prompt = ActorTurn {
                    name: actor.name.clone(),
                    actor_block: actor.private_block(),
                    stage_block: run.scene.stage_block(Some(&actor.name)),
                    identity,
                    seed: seed(&[&run.scene.name, &turn.to_string(), &actor.name]),
                };
                let ctx = ctx(&actor.name);
                tasks.push(Some(pool.spawn(async move {
                    let outcome = run_prompt(&ctx, &prompt).await;
                    (outcome.value, outcome.fail_safe)
                })));
            }
            hold(world, &personas, step);
            run.queued -= 1;
            run.phase = Phase::Planning {
                turn,
                plans: vec![None; tasks.len()],
                tasks,
                personas,
            };
        }
        Phase::Planning {
            turn,
            mut tasks,
            mut plans,
            personas,
        } => {
            for (slot, task) in plans.iter_mut().zip(tasks.iter_mut()) {
                if let Some(running) = task
                    && let Some(done) = block_on(poll_once(running))
                {
                    *slot = Some(done);
                    *task = None;
                }
            }
            if plans.iter().any(Option::is_none) {
                run.phase = Phase::Planning {
                    turn,
                    tasks,
                    plans,
                    personas,
                };
                return;
            }
            let mut by_name = BTreeMap::new();
            for (actor, (plan, fail_safe)) in
                run.scene.actors.iter().zip(plans.into_iter().flatten())
            {
                by_name.insert(actor.name.clone(), plan.plan.clone());
                world.write_message(ActorPlanned {
                    stage: run.scene.name.clone(),
                    turn,
                    actor: actor.name.clone(),
                    persona: actor.persona,
                    plan,
                    fail_safe,
                });
            }
            let prompt = StageResolve {
                stage: run.scene.name.clone(),
                environment: run.scene.environment.clone(),
                plans: run.scene.plans_markdown(&by_name),
                turn,
                seed: seed(&[&run.scene.name, &turn.to_string(), "stage agent"]),
            };
            let ctx = ctx(&run.scene.name);
            let task = AsyncComputeTaskPool::get().spawn(async move {
                let outcome = run_prompt(&ctx, &prompt).await;
                (outcome.value, outcome.fail_safe)
            });
            run.phase = Phase::Resolving {
                turn,
                task,
                personas,
            };
        }
        Phase::Resolving {
            turn,
            mut task,
            personas,
        } => {
            let Some((resolution, fail_safe)) = block_on(poll_once(&mut task)) else {
                run.phase = Phase::Resolving {
                    turn,
                    task,
                    personas,
                };
                return;
            };
            let applied = run.scene.apply(&resolution);
            release(world, &personas);
            if run.scene.actors.is_empty() {
                run.queued = 0;
            }
            world.write_message(StageTurnResolved {
                stage: run.scene.name.clone(),
                turn,
                summary: resolution.summary,
                applied,
                fail_safe,
            });
        }
    }
}
