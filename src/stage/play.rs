//! Playing scenes between steps (see the module docs): commands, then each stage's turn as a
//! small state machine — idle, actors planning (one task per actor, all at once), the stage
//! agent resolving — advanced in [`SimPoll`](crate::clock::SimPoll).

use std::collections::BTreeMap;

use bevy::prelude::*;
use bevy::tasks::Task;

use chrono::NaiveDateTime;

use crate::clock::{AwaitingCognition, Held, SimClock, poll_landing, spawn_landing};
use crate::cognition::converse::insert_into_schedule;
use crate::cognition::reflect::think_after_chat;
use crate::dialogue::prompts::truncate_chars;
use crate::llm::{LlmClient, fnv1a_parts};
use crate::memory::NewMemory;
use crate::persona::{ActionView, Body, Mind, MindState};
use crate::prompt::{PromptContext, PromptLibrary, run_prompt};
use crate::settings::AgentSettings;
use crate::world::{TileCoord, TileEvent, TownMap};

use super::prompts::{ActorPlan, ActorTurn, StageResolve};
use super::scene::{Resolution, Scene};
use super::{
    ActorPlanned, StageClosed, StageCommand, StageOpened, StageRefused, StageSettings,
    StageTurnResolved, Stages, hold, release,
};

/// Most scenes playing at once.
pub const MAX_STAGES: usize = 8;

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
    /// When the scene opened (game time): the persona actors' schedules make room for it.
    pub opened: NaiveDateTime,
    /// Close the scene once the queued turns are played.
    pub close_after: bool,
    /// The first step at which the next turn may start (a turn takes
    /// [`StageSettings::turn_seconds`] of game time).
    pub next_step: u64,
    /// An entity that is `AwaitingCognition` while a turn's calls are out, so a Lockstep clock
    /// waits for every turn (also a scene of characters only).
    pub waiter: Entity,
    /// Where the scene shows as a tile event bystanders perceive (SPEC §16), and the event.
    pub shown: Option<(TileCoord, TileEvent)>,
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
            if let Some(actor) = checked
                .actors
                .iter()
                .find(|a| a.persona.is_some_and(|p| world.get::<Held>(p).is_some()))
            {
                return Err(format!("{} is already held by another scene", actor.name));
            }
            let places = arena_places(world, &checked)?;
            let opened = StageOpened {
                stage: checked.name.clone(),
                actors: checked.actors.iter().map(|a| a.name.clone()).collect(),
            };
            // The persona actors take their places and stay on the stage until it closes.
            let stage_name = checked.name.clone();
            for (i, persona) in checked.actors.iter().filter_map(|a| a.persona).enumerate() {
                if let Some(tile) = places.get(i).copied() {
                    take_place(world, persona, tile);
                }
                if let Some(mut view) = world.get_mut::<ActionView>(persona) {
                    view.description = format!("taking part in a scene at {stage_name}");
                    view.emoji = "🎭".to_string();
                }
                world.entity_mut(persona).insert(Held);
            }
            let (now, step) = world
                .get_resource::<SimClock>()
                .map(|c| (c.now(), c.step()))
                .unwrap_or_default();
            let waiter = world
                .spawn(Name::new(format!("stage {}", checked.name)))
                .id();
            stages.runs.insert(
                checked.name.clone(),
                StageRun {
                    scene: checked,
                    phase: Phase::Idle,
                    queued: 0,
                    opened: now,
                    close_after: false,
                    next_step: step,
                    waiter,
                    shown: None,
                },
            );
            if let Some(run) = stages.runs.get_mut(&stage_name) {
                let tile = places.first().copied().or_else(|| {
                    let persona = run.scene.actors.iter().find_map(|a| a.persona)?;
                    world.get::<Body>(persona).map(|body| body.tile)
                });
                run.shown = tile.map(|tile| (tile, scene_event(&run.scene)));
                show_scene(world, None, run.shown.as_ref());
            }
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
            close(world, run);
            Ok(None)
        }
        StageCommand::Finish { stage } => {
            let run = stages
                .runs
                .get_mut(&stage)
                .ok_or_else(|| "no scene is playing on that stage".to_string())?;
            run.close_after = true;
            Ok(None)
        }
    }
}

/// Where the persona actors stand: walkable tiles of the scene's arena, spread over it (none
/// without an arena or a map). An arena the town does not have is refused.
fn arena_places(world: &World, scene: &Scene) -> Result<Vec<TileCoord>, String> {
    let (Some(arena), Some(map)) = (&scene.arena, world.get_resource::<TownMap>()) else {
        return Ok(Vec::new());
    };
    let tiles: Vec<TileCoord> = map
        .address_tiles(arena)
        .map(|t| t.iter().copied().filter(|c| map.is_walkable(*c)).collect())
        .unwrap_or_default();
    if tiles.is_empty() {
        return Err(format!(
            "the town has no arena {:?} to play on",
            truncate_chars(arena, 120)
        ));
    }
    let players = scene.actors.iter().filter(|a| a.persona.is_some()).count();
    Ok((0..players)
        .map(|i| tiles[(i + 1) * tiles.len() / (players + 1)])
        .collect())
}

/// Moves a persona actor onto its place on the stage (its walk there is not shown: a scene
/// starts with everyone in place).
fn take_place(world: &mut World, persona: Entity, tile: TileCoord) {
    let Some(name) = world.get::<Name>(persona).map(|n| n.as_str().to_owned()) else {
        return;
    };
    let Some(mut body) = world.get_mut::<Body>(persona) else {
        return;
    };
    let from = body.tile;
    body.tile = tile;
    body.previous_tile = tile;
    body.planned_path.clear();
    body.path_set = true;
    if let Some(mut map) = world.get_resource_mut::<TownMap>() {
        map.remove_subject_events(from, &name);
    }
}

/// What a stage's model calls are made with.
struct Prompting {
    client: LlmClient,
    library: PromptLibrary,
    retries: u32,
}

impl Prompting {
    /// The world's client, templates and retries; `None` without a client or templates.
    fn of(world: &World) -> Option<Self> {
        Some(Self {
            client: world.get_resource::<LlmClient>()?.clone(),
            library: world.get_resource::<PromptLibrary>()?.clone(),
            retries: world
                .get_resource::<AgentSettings>()
                .map_or(3, |s| s.prompt_retries),
        })
    }

    /// A context for `name`'s calls (routed by name in a pool of servers).
    fn ctx(&self, name: &str) -> PromptContext {
        PromptContext::new(self.client.clone(), self.library.clone())
            .with_retries(self.retries)
            .with_affinity(name)
    }
}

/// Starts the due turns, in the step (so a Lockstep run starts each turn at the same step).
pub(super) fn start_turns(world: &mut World) {
    // Every step: nothing to do (and nothing to clone) while no scene plays.
    if world
        .get_resource::<Stages>()
        .is_none_or(|s| s.runs.is_empty())
    {
        return;
    }
    let Some(prompting) = Prompting::of(world) else {
        return;
    };
    let Some((step, secs)) = world
        .get_resource::<SimClock>()
        .map(|c| (c.step(), c.sec_per_step()))
    else {
        return;
    };
    let turn_seconds = world
        .get_resource::<StageSettings>()
        .map_or(60.0, |s| s.turn_seconds);
    let steps_per_turn = (f64::from(turn_seconds) / f64::from(secs.max(1)))
        .ceil()
        .max(1.0) as u64;
    world.resource_scope(|world, mut stages: Mut<Stages>| {
        for run in stages.runs.values_mut() {
            if step >= run.next_step && start_turn(world, run, &prompting, step) {
                run.next_step = step + steps_per_turn;
            }
        }
    });
}

/// Lands the turns' calls, closes finished scenes and runs their aftermaths (see the module
/// docs).
pub(super) fn drive_stages(world: &mut World) {
    // Every poll (Lockstep polls many times a frame): nothing to do while no scene plays and
    // no aftermath waits.
    let idle = world
        .get_resource::<Stages>()
        .is_none_or(|s| s.runs.is_empty())
        && world
            .get_resource::<Aftermaths>()
            .is_none_or(|a| a.0.is_empty());
    if idle {
        return;
    }
    let Some(prompting) = Prompting::of(world) else {
        return;
    };
    let step = world.get_resource::<SimClock>().map_or(0, SimClock::step);
    world.resource_scope(|world, mut stages: Mut<Stages>| {
        for run in stages.runs.values_mut() {
            advance(world, run, &prompting);
        }
        let done: Vec<String> = stages
            .runs
            .iter()
            .filter(|(_, r)| {
                r.close_after && !r.busy() && (r.queued == 0 || r.scene.actors.is_empty())
            })
            .map(|(name, _)| name.clone())
            .collect();
        for name in done {
            if let Some(run) = stages.runs.remove(&name) {
                close(world, run);
            }
        }
    });
    after_scenes(world, &prompting, step);
}

/// Closes a scene: a turn in flight is dropped (its calls cancelled), the persona actors are
/// let go, and each is queued for its aftermath (a memory of the scene, its schedule making
/// room for the time the scene took, its routine resumed).
fn close(world: &mut World, run: StageRun) {
    release(world, run.held());
    show_scene(world, run.shown.as_ref(), None);
    if let Ok(waiter) = world.get_entity_mut(run.waiter) {
        waiter.despawn();
    }
    let now = world
        .get_resource::<SimClock>()
        .map(SimClock::now)
        .unwrap_or_default();
    let minutes = u32::try_from((now - run.opened).num_minutes().max(1)).unwrap_or(1);
    let scene = &run.scene;
    let told = scene
        .narration
        .iter()
        .rev()
        .take(3)
        .rev()
        .cloned()
        .collect::<Vec<_>>()
        .join(" ");
    let mut aftermaths = Vec::new();
    let everyone = scene
        .actors
        .iter()
        .map(|a| (a, None))
        .chain(scene.fallen.iter().map(|(a, turn)| (a, Some(*turn))));
    for (actor, fell) in everyone {
        let Some(persona) = actor.persona else {
            continue;
        };
        // Still `Held` until its aftermath has run, so nothing else (a talk turn's `walk_to`)
        // moves it first and is then overwritten by the aftermath's resumed routine.
        let fell = fell.map_or(String::new(), |turn| {
            format!(" {} fell in turn {turn}.", actor.name)
        });
        let others: Vec<&str> = scene
            .actors
            .iter()
            .chain(scene.fallen.iter().map(|(a, _)| a))
            .filter(|a| a.name != actor.name)
            .map(|a| a.name.as_str())
            .collect();
        aftermaths.push(Aftermath {
            persona,
            memory: SceneMemory {
                stage: scene.name.clone(),
                description: truncate_chars(
                    &format!(
                        "{} was in a scene at {} ({} turns): {told}{fell}",
                        actor.name, scene.name, scene.turn
                    ),
                    800,
                )
                .to_string(),
                opened: run.opened,
                minutes,
                partner: match others.as_slice() {
                    [] => format!("the scene at {}", scene.name),
                    names => crate::cognition::vocabulary::names_list(names),
                },
                conversation: scene_lines(scene),
            },
            task: None,
        });
    }
    world.write_message(StageClosed {
        stage: scene.name.clone(),
        turns: scene.turn,
        scene: scene.clone(),
    });
    world
        .get_resource_or_init::<Aftermaths>()
        .0
        .extend(aftermaths);
}

/// Ends every scene because a save is being loaded into the world: a save does not keep
/// scenes, and their persona actors are the personas the load replaces. Each scene is told
/// closed ([`StageClosed`], as it stood), its turn in flight is dropped (its calls cancelled)
/// and its waiter despawned; no aftermath is queued, and those not yet run are dropped (the
/// minds they were for are gone).
pub(crate) fn end_scenes_for_load(world: &mut World) {
    let runs = world
        .get_resource_mut::<Stages>()
        .map(|mut stages| std::mem::take(&mut stages.runs))
        .unwrap_or_default();
    for run in runs.into_values() {
        show_scene(world, run.shown.as_ref(), None);
        if let Ok(waiter) = world.get_entity_mut(run.waiter) {
            waiter.despawn();
        }
        world.write_message(StageClosed {
            stage: run.scene.name.clone(),
            turns: run.scene.turn,
            scene: run.scene,
        });
    }
    let dropped = world
        .get_resource_mut::<Aftermaths>()
        .map(|mut aftermaths| std::mem::take(&mut aftermaths.0))
        .unwrap_or_default();
    for after in dropped {
        if let Ok(mut entity) = world.get_entity_mut(after.persona) {
            entity.remove::<Held>();
        }
    }
}

/// Most characters of the latest narration a scene's tile event carries.
const SHOWN_NARRATION_CHARS: usize = 200;

/// The tile event a playing scene shows to bystanders (SPEC §16): who is in it and what the
/// latest turn told (the environment before the first), perceived within the vision radius
/// like any other event ("the scene at the Crooked Anchor is playing: Bram and Otto — Bram
/// draws his sword").
fn scene_event(scene: &Scene) -> TileEvent {
    let actors: Vec<&str> = scene.actors.iter().map(|a| a.name.as_str()).collect();
    let actors = crate::cognition::vocabulary::names_list(&actors);
    let told = scene.narration.last().unwrap_or(&scene.environment);
    let subject = format!("the scene at {}", scene.name);
    TileEvent {
        description: Some(format!(
            "{subject} is playing: {actors} — {}",
            truncate_chars(told.trim(), SHOWN_NARRATION_CHARS)
        )),
        subject,
        predicate: Some("is playing".to_string()),
        object: Some(actors),
    }
}

/// Replaces a scene's tile event `before` (if shown) with `after` (if any).
fn show_scene(
    world: &mut World,
    before: Option<&(TileCoord, TileEvent)>,
    after: Option<&(TileCoord, TileEvent)>,
) {
    let Some(mut map) = world.get_resource_mut::<TownMap>() else {
        return;
    };
    if let Some((tile, event)) = before {
        map.remove_event(*tile, event);
    }
    if let Some((tile, event)) = after {
        map.add_event(*tile, event.clone());
    }
}

/// Poignancy of a scene's memory: a dramatic moment.
const SCENE_POIGNANCY: u8 = 6;

/// Most turns of a scene its actors think over afterwards (the latest ones).
const AFTERMATH_TURNS: usize = 8;

/// The scene as the after-chat prompts read a conversation: its latest turns' narration, each
/// a line of the stage's.
fn scene_lines(scene: &Scene) -> Vec<(String, String)> {
    let first = scene.narration.len().saturating_sub(AFTERMATH_TURNS);
    scene.narration[first..]
        .iter()
        .map(|told| (scene.name.clone(), truncate_chars(told, 400).to_string()))
        .collect()
}

/// A persona's aftermath of a scene, waiting for its mind or running.
pub(super) struct Aftermath {
    pub persona: Entity,
    pub memory: SceneMemory,
    pub task: Option<Task<Box<MindState>>>,
}

/// What one persona actor keeps of a closed scene (see [`aftermath`]); saved while it waits
/// for the persona's mind.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(super) struct SceneMemory {
    /// The stage's name.
    pub stage: String,
    /// The event memory's description.
    pub description: String,
    /// When the scene opened, and how many minutes it took (the schedule makes room).
    pub opened: NaiveDateTime,
    pub minutes: u32,
    /// Who else was in the scene ("Bram and Otto"), or the scene itself when nobody was.
    pub partner: String,
    /// The scene's latest turns, as a conversation (see [`scene_lines`]).
    pub conversation: Vec<(String, String)>,
}

/// Aftermaths of closed scenes.
#[derive(Resource, Default)]
pub(super) struct Aftermaths(pub Vec<Aftermath>);

/// Runs each aftermath once its persona's mind is home (checked out into a task, like a
/// thought: the persona is `AwaitingCognition` meanwhile) and checks the mind back in.
fn after_scenes(world: &mut World, prompting: &Prompting, step: u64) {
    let Some(mut pending) = world
        .get_resource_mut::<Aftermaths>()
        .map(|mut a| std::mem::take(&mut a.0))
        .filter(|pending| !pending.is_empty())
    else {
        return;
    };
    let now = world
        .get_resource::<SimClock>()
        .map(SimClock::now)
        .unwrap_or_default();
    // The after-chat's settings, read only while an aftermath waits or runs.
    let settings = world
        .get_resource::<AgentSettings>()
        .cloned()
        .unwrap_or_default();
    pending.retain_mut(|after| {
        let Ok(mut entity) = world.get_entity_mut(after.persona) else {
            return false;
        };
        match &mut after.task {
            None => {
                if entity.contains::<AwaitingCognition>() {
                    return true;
                }
                let Some(mind) = entity.get_mut::<Mind>().and_then(|mut m| m.check_out()) else {
                    return true;
                };
                entity.insert(AwaitingCognition::new(step));
                let ctx = prompting.ctx(&mind.scratch.name);
                after.task = Some(spawn_landing(aftermath(
                    mind,
                    ctx,
                    settings.clone(),
                    after.memory.clone(),
                    now,
                )));
                true
            }
            Some(task) => {
                let Some(mind) = poll_landing(task) else {
                    return true;
                };
                if let Some(mut holder) = entity.get_mut::<Mind>() {
                    holder.check_in(mind);
                }
                // The scene lets go of the persona only now (see `close`).
                entity.remove::<(AwaitingCognition, Held)>();
                false
            }
        }
    });
    if let Some(mut aftermaths) = world.get_resource_mut::<Aftermaths>() {
        // Scenes closed while these ran queue theirs behind.
        pending.append(&mut aftermaths.0);
        aftermaths.0 = pending;
    }
}

/// What a persona keeps of a scene: the memory, room in its schedule, its routine resumed.
async fn aftermath(
    mut mind: Box<MindState>,
    ctx: PromptContext,
    settings: AgentSettings,
    scene: SceneMemory,
    now: NaiveDateTime,
) -> Box<MindState> {
    let SceneMemory {
        stage,
        description,
        opened,
        minutes,
        partner,
        conversation,
    } = scene;
    let name = mind.scratch.name.clone();
    let mut evidence = Vec::new();
    if let Ok(vector) = ctx.embed_one(description.clone()).await {
        let memory = NewMemory::new(
            now,
            (name.clone(), "was in", format!("a scene at {stage}")),
            description,
        )
        .keywords([name.to_lowercase(), stage.to_lowercase()])
        .poignancy(SCENE_POIGNANCY)
        .embedding(vector);
        if let Ok(id) = mind.associative.add_event(memory, Vec::new()) {
            evidence.push(id);
            mind.scratch.importance_trigger_curr -= i32::from(SCENE_POIGNANCY);
            mind.scratch.importance_ele_n += 1;
        }
    }
    // What the scene means for the persona's plans, and what it found memorable, as after a
    // chat (SPEC §16): a scene with no turn played leaves nothing to think over.
    if !conversation.is_empty() {
        think_after_chat(
            &mut mind,
            &ctx,
            &settings,
            now,
            &partner,
            conversation,
            &evidence,
        )
        .await;
    }
    insert_into_schedule(
        &mut mind,
        &ctx,
        opened,
        &format!("taking part in a scene at {stage}"),
        minutes,
    )
    .await;
    // The current action is over: the next step picks up the schedule where the day is now.
    mind.scratch.act_start_time = Some(now);
    mind.scratch.act_duration = Some(0);
    mind
}

/// Starts `run`'s next turn if one is queued and every persona actor is free: every actor's
/// call at once. Returns whether it started.
fn start_turn(world: &mut World, run: &mut StageRun, prompting: &Prompting, step: u64) -> bool {
    if run.busy() || run.queued == 0 || run.scene.actors.is_empty() {
        return false;
    }
    let personas: Vec<Entity> = run.scene.actors.iter().filter_map(|a| a.persona).collect();
    // Every persona actor must be free: its mind home, no other work running.
    let free = personas.iter().all(|p| {
        world.get::<Mind>(*p).is_some_and(Mind::is_home)
            && world.get::<AwaitingCognition>(*p).is_none()
    });
    if !free {
        return false;
    }
    let turn = run.scene.turn + 1;
    let mut tasks = Vec::new();
    for actor in &run.scene.actors {
        let identity = actor
            .persona
            .and_then(|p| world.get::<Mind>(p))
            .and_then(Mind::get)
            .map(|m| {
                let mut identity = m.scratch.identity_summary();
                identity.push_str(&remembered_lately(m, &actor.name));
                identity
            })
            .unwrap_or_default();
        let prompt = ActorTurn {
            name: actor.name.clone(),
            actor_block: actor.private_block(),
            stage_block: run.scene.stage_block(Some(&actor.name)),
            identity,
            seed: fnv1a_parts(&[&run.scene.name, &turn.to_string(), &actor.name]),
        };
        let ctx = prompting.ctx(&actor.name);
        tasks.push(Some(spawn_landing(async move {
            let outcome = run_prompt(&ctx, &prompt).await;
            (outcome.value, outcome.fail_safe)
        })));
    }
    let mut held = personas;
    held.push(run.waiter);
    hold(world, &held, step);
    run.queued -= 1;
    run.phase = Phase::Planning {
        turn,
        plans: vec![None; tasks.len()],
        tasks,
        personas: held,
    };
    true
}

/// Latest memories an actor's prompt weighs (events and thoughts; chats have their events).
const LATELY_MEMORIES: usize = 20;
/// Of those, how many the prompt shows: the most poignant, newest first on a tie.
const LATELY_SHOWN: usize = 3;

/// What a persona actor brings on stage from its day (SPEC §16): the most poignant of its
/// latest memories, so a fact it was told can come out in the scene. Empty without any.
fn remembered_lately(mind: &MindState, name: &str) -> String {
    let memory = &mind.associative;
    let mut latest: Vec<(u8, usize, &str)> = memory
        .nodes()
        .iter()
        .rev()
        .filter(|n| {
            n.kind != crate::memory::NodeKind::Chat && !(n.predicate == "is" && n.object == "idle")
        })
        .take(LATELY_MEMORIES)
        .enumerate()
        .map(|(age, n)| (n.poignancy, age, n.description.as_str()))
        .collect();
    latest.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    if latest.is_empty() {
        return String::new();
    }
    let mut out = format!("\nWhat {name} remembers lately:");
    for (_, _, description) in latest.into_iter().take(LATELY_SHOWN) {
        out.push_str("\n- ");
        out.push_str(truncate_chars(description, 300));
    }
    out
}

fn advance(world: &mut World, run: &mut StageRun, prompting: &Prompting) {
    match std::mem::take(&mut run.phase) {
        Phase::Idle => {}
        Phase::Planning {
            turn,
            mut tasks,
            mut plans,
            personas,
        } => {
            for (slot, task) in plans.iter_mut().zip(tasks.iter_mut()) {
                if let Some(running) = task
                    && let Some(done) = poll_landing(running)
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
                let planned = ActorPlanned {
                    stage: run.scene.name.clone(),
                    turn,
                    actor: actor.name.clone(),
                    persona: actor.persona,
                    plan,
                    fail_safe,
                };
                if planned.persona.is_some() {
                    world.trigger(planned.clone());
                }
                world.write_message(planned);
            }
            let prompt = StageResolve {
                stage: run.scene.name.clone(),
                environment: run.scene.environment.clone(),
                plans: run.scene.plans_markdown(&by_name),
                turn,
                seed: fnv1a_parts(&[&run.scene.name, &turn.to_string(), "stage agent"]),
            };
            let ctx = prompting.ctx(&run.scene.name);
            let task = spawn_landing(async move {
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
            let Some((resolution, fail_safe)) = poll_landing(&mut task) else {
                run.phase = Phase::Resolving {
                    turn,
                    task,
                    personas,
                };
                return;
            };
            // Who played the turn, before it takes the fallen off the stage.
            let cast: Vec<Entity> = run.scene.actors.iter().filter_map(|a| a.persona).collect();
            let applied = run.scene.apply(&resolution);
            release(world, &personas);
            // Bystanders see what the scene is now.
            let before = run.shown.take();
            run.shown = before
                .as_ref()
                .map(|(tile, _)| (*tile, scene_event(&run.scene)));
            show_scene(world, before.as_ref(), run.shown.as_ref());
            if run.scene.actors.is_empty() {
                run.queued = 0;
            }
            let time = world
                .get_resource::<SimClock>()
                .map(SimClock::now)
                .unwrap_or_default();
            world.write_message(StageTurnResolved {
                stage: run.scene.name.clone(),
                time,
                turn,
                summary: resolution.summary,
                applied,
                fail_safe,
                personas: cast,
            });
        }
    }
}
