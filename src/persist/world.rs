//! Between the ECS and the save format: capturing a world into files, applying a decoded save
//! to a world, the Bevy-side requests, and building a headless app from a save.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use bevy::log::LogPlugin;
use bevy::prelude::*;

use super::files::{SaveFiles, recover_interrupted_save, write_folder_atomic};
use super::format::{
    DialogueFile, EmbeddingInfo, EventsFile, PendingFile, PersonaRef, SaveData, SaveMeta,
    TileEvents, TownFiles, decode_with, encode,
};
use super::{FORMAT_NAME, FORMAT_VERSION, PersistError, SaveIntegrity};
use crate::clock::{AwaitingCognition, SimClock, SimSpeed, TimeMode};
use crate::cognition::perceive::standing_on;
use crate::cognition::think::LandedThoughts;
use crate::cognition::{ChatIntents, Percepts};
use crate::group::GroupAttention;
use crate::group::save::{GroupFile, GroupsFile};
use crate::llm::{LlmClient, LlmConfig, LlmPlugin, build_client};
use crate::persona::{ActionView, Body, Diary, Mind, Persona};
use crate::prompt::{PromptLibrary, PromptProvenance};
use crate::settings::AgentSettings;
use crate::stage::save::StagesFile;
use crate::world::{TileCoord, TileEvent, TownMap};

/// The seed the simulation was started with, recorded in saves. Headless runs insert it; a
/// world without it saves seed 0.
#[derive(Resource, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SimSeed(pub u64);

/// Asks the [`PersistPlugin`] to save the simulation into `dir` (see the [module
/// docs](super) for when it happens).
#[derive(Message, Debug, Clone, PartialEq, Eq)]
pub struct SaveRequest {
    /// The save folder (replaced as a whole).
    pub dir: PathBuf,
}

/// Asks the [`PersistPlugin`] to replace the simulation by the save in `dir`. Thoughts in
/// flight are cancelled. A save that fails to load changes nothing.
#[derive(Message, Debug, Clone, PartialEq, Eq)]
pub struct LoadRequest {
    /// The save folder.
    pub dir: PathBuf,
}

/// What became of a [`SaveRequest`] or [`LoadRequest`].
#[derive(Message, Debug, Clone, PartialEq, Eq)]
pub enum PersistOutcome {
    /// The simulation was saved at `step`.
    Saved {
        /// The folder.
        dir: PathBuf,
        /// The clock's step.
        step: u64,
    },
    /// The save was loaded; the clock is at `step`.
    Loaded {
        /// The folder.
        dir: PathBuf,
        /// The clock's step.
        step: u64,
    },
    /// The request failed; nothing changed.
    Failed {
        /// The folder.
        dir: PathBuf,
        /// Why.
        error: String,
    },
}

/// A save waiting for minds to come home, and the speed to restore afterwards.
#[derive(Resource, Debug, Default)]
struct PendingSave {
    dir: Option<PathBuf>,
    resume_speed: Option<SimSpeed>,
}

/// Adds [`SaveRequest`], [`LoadRequest`] and [`PersistOutcome`] and the system that serves
/// them at the end of each frame (in [`Last`]), after the clock's driver.
#[derive(Debug, Default)]
pub struct PersistPlugin;

impl Plugin for PersistPlugin {
    fn build(&self, app: &mut App) {
        app.add_message::<SaveRequest>()
            .add_message::<LoadRequest>()
            .add_message::<PersistOutcome>()
            .init_resource::<PendingSave>()
            .add_systems(Last, serve_persist_requests);
    }
}

/// Serves the frame's requests: a load at once; a save at once when no mind is out, otherwise
/// the clock is paused until the thoughts have landed (the driver keeps collecting them).
fn serve_persist_requests(world: &mut World) {
    let loads: Vec<LoadRequest> = world
        .get_resource_mut::<Messages<LoadRequest>>()
        .map(|mut m| m.drain().collect())
        .unwrap_or_default();
    let saves: Vec<SaveRequest> = world
        .get_resource_mut::<Messages<SaveRequest>>()
        .map(|mut m| m.drain().collect())
        .unwrap_or_default();
    let mut outcomes = Vec::new();
    if let Some(request) = loads.into_iter().last() {
        let outcome = match load_into_world(world, &request.dir) {
            Ok(meta) => {
                info!("loaded {} at step {}", request.dir.display(), meta.step);
                PersistOutcome::Loaded {
                    dir: request.dir,
                    step: meta.step,
                }
            }
            Err(err) => {
                error!("load failed: {err}");
                PersistOutcome::Failed {
                    dir: request.dir,
                    error: err.to_string(),
                }
            }
        };
        outcomes.push(outcome);
    }
    let mut pending = world.remove_resource::<PendingSave>().unwrap_or_default();
    if let Some(request) = saves.into_iter().last() {
        pending.dir = Some(request.dir);
    }
    if let Some(dir) = pending.dir.clone() {
        match saveable(world) {
            Ok(()) => {
                pending.dir = None;
                let outcome = match save_world(world, &dir) {
                    Ok(meta) => PersistOutcome::Saved {
                        dir,
                        step: meta.step,
                    },
                    Err(err) => {
                        error!("save failed: {err}");
                        PersistOutcome::Failed {
                            dir,
                            error: err.to_string(),
                        }
                    }
                };
                outcomes.push(outcome);
                if let Some(speed) = pending.resume_speed.take()
                    && let Some(mut clock) = world.get_resource_mut::<SimClock>()
                {
                    clock.speed = speed;
                }
            }
            Err(_) => {
                // Realtime with thoughts in flight: hold the clock until they land.
                if let Some(mut clock) = world.get_resource_mut::<SimClock>()
                    && pending.resume_speed.is_none()
                {
                    pending.resume_speed = Some(clock.speed);
                    clock.speed = SimSpeed::Paused;
                }
            }
        }
    }
    world.insert_resource(pending);
    if let Some(mut messages) = world.get_resource_mut::<Messages<PersistOutcome>>() {
        for outcome in outcomes {
            messages.write(outcome);
        }
    }
}

/// `Ok` when the world can be saved now: no persona awaiting cognition, no landed thought
/// waiting to be checked in, every mind home.
fn saveable(world: &mut World) -> Result<(), PersistError> {
    let awaiting = world
        .query_filtered::<(), With<AwaitingCognition>>()
        .iter(world)
        .count();
    if awaiting > 0 {
        return Err(PersistError::Busy(format!(
            "{awaiting} persona(s) are thinking"
        )));
    }
    if world
        .get_resource::<LandedThoughts>()
        .is_some_and(|landed| !landed.is_empty())
    {
        return Err(PersistError::Busy(
            "finished thoughts are waiting to be checked in".into(),
        ));
    }
    let calls = crate::group::save::calls_in_flight(world);
    if calls > 0 {
        return Err(PersistError::Busy(format!(
            "{calls} group call(s) are in flight"
        )));
    }
    let out: Vec<String> = world
        .query_filtered::<(&Name, &Mind), With<Persona>>()
        .iter(world)
        .filter(|(_, mind)| !mind.is_home())
        .map(|(name, _)| name.as_str().to_owned())
        .collect();
    if !out.is_empty() {
        return Err(PersistError::Busy(format!(
            "the minds of {} are out",
            out.join(", ")
        )));
    }
    Ok(())
}

/// The save's files for the world's current state (see [`save_world`]), and its meta: the
/// town and every [`SaveSection`](super::SaveSection) with something to keep.
pub fn capture_save(world: &mut World) -> Result<(SaveMeta, SaveFiles), PersistError> {
    capture(world, true)
}

fn capture(world: &mut World, with_sections: bool) -> Result<(SaveMeta, SaveFiles), PersistError> {
    saveable(world)?;
    let sections = if with_sections {
        let names: HashMap<Entity, String> = world
            .query_filtered::<(Entity, &Name), With<Persona>>()
            .iter(world)
            .map(|(e, n)| (e, n.as_str().to_owned()))
            .collect();
        super::sections::capture_sections(world, &names)?
    } else {
        BTreeMap::new()
    };
    let clock = world
        .get_resource::<SimClock>()
        .cloned()
        .unwrap_or_default();
    let settings = world
        .get_resource::<AgentSettings>()
        .cloned()
        .unwrap_or_default();
    let seed = world
        .get_resource::<SimSeed>()
        .copied()
        .unwrap_or_default()
        .0;
    let Some(map) = world.get_resource::<TownMap>() else {
        return Err(PersistError::MapMismatch(
            "cannot save: the world has no TownMap".into(),
        ));
    };
    // Relative to the asset root when it is a shipped town, so the save moves between machines.
    let map_path = map
        .source()
        .map(crate::files::portable_crate_path)
        .unwrap_or_default();
    let world_name = map.world_name().to_owned();
    // The scenes playing are saved (`stages.json`), and their tile events with the others.
    let events = EventsFile {
        tiles: map
            .tiles()
            .map(|(c, tile)| TileEvents {
                tile: c,
                events: tile.events.iter().cloned().collect(),
            })
            .filter(|tile| !tile.events.is_empty())
            .collect(),
    };
    let prompts = world
        .get_resource::<PromptLibrary>()
        .map(PromptLibrary::provenance);
    let client_embedding = world
        .get_resource::<LlmClient>()
        .map(|c| (c.embedding_model().to_owned(), c.embedding_dim()));

    let mut query = world.query_filtered::<(
        Entity,
        &Name,
        &Mind,
        &Body,
        &ActionView,
        &Diary,
        Option<&Percepts>,
        (
            Option<&crate::dialogue::SpeakerProfiles>,
            Option<&crate::dialogue::Appointments>,
            Option<&GroupAttention>,
        ),
    ), With<Persona>>();
    let mut rows: Vec<_> = query.iter(world).collect();
    // In entity order, the order the simulation takes its personas in wherever the order
    // matters (see `apply_save`).
    rows.sort_by_key(|row| row.0);
    // Streams and rounds name personas: every persona is named first.
    let names_by_entity: HashMap<Entity, String> = rows
        .iter()
        .map(|row| (row.0, row.1.as_str().to_owned()))
        .collect();
    let groups: Vec<GroupFile> = rows
        .iter()
        .map(|row| {
            row.7
                .2
                .map(|group| GroupFile::of(group, &names_by_entity))
                .unwrap_or_default()
        })
        .collect();
    let sessions = world.get_resource::<crate::dialogue::DialogueSessions>();
    let dialogues: Vec<DialogueFile> = rows
        .iter()
        .map(|row| DialogueFile {
            profiles: row.7.0.cloned().unwrap_or_default(),
            appointments: row.7.1.cloned().unwrap_or_default(),
            sessions: sessions.map(|s| s.of(row.0)).unwrap_or_default(),
        })
        .collect();
    let mut personas = Vec::with_capacity(rows.len());
    for ((_, name, mind, body, view, diary, percepts, _), (dialogue, group)) in
        rows.iter().zip(dialogues.iter().zip(&groups))
    {
        let Some(state) = mind.get() else {
            return Err(PersistError::Busy(format!("the mind of {name} is out")));
        };
        personas.push(PersonaRef {
            name: name.as_str(),
            mind: state,
            body,
            view,
            diary,
            perceived_from: percepts.and_then(|p| p.tile),
            dialogue,
            group,
        });
    }
    let embedding = embedding_info(client_embedding, &personas);
    let intents = world
        .get_resource::<ChatIntents>()
        .map(|i| i.0.clone())
        .unwrap_or_default();
    let pending = PendingFile {
        chat_intents: intents
            .iter()
            .filter_map(|(entity, target)| {
                names_by_entity
                    .get(entity)
                    .map(|name| (name.clone(), target.clone()))
            })
            .collect(),
    };
    let meta = SaveMeta {
        format: FORMAT_NAME.to_owned(),
        format_version: FORMAT_VERSION,
        crate_version: env!("CARGO_PKG_VERSION").to_owned(),
        saved_at_unix: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        seed,
        step: clock.step(),
        start: clock.start(),
        current_time: clock.now(),
        sec_per_step: clock.sec_per_step(),
        time_mode: clock.mode,
        map: map_path,
        world: world_name,
        personas: personas.iter().map(|p| p.name.to_owned()).collect(),
        embedding,
        forked_from: None,
        prompts,
        sections: sections.keys().cloned().collect(),
    };
    let groups_file = GroupsFile::of(world, &names_by_entity);
    let stages_file = StagesFile::of(world, &names_by_entity).map_err(PersistError::Busy)?;
    let town = TownFiles {
        settings: &settings,
        events: &events,
        pending: &pending,
        groups: &groups_file,
        stages: &stages_file,
        sections: &sections,
    };
    let files = encode(&meta, &town, &personas)?;
    Ok((meta, files))
}

/// The embedding model of the save: the memories' dimension and model when they record them
/// (the cognitive loop may leave the store's model name empty), else the client's.
fn embedding_info(client: Option<(String, usize)>, personas: &[PersonaRef<'_>]) -> EmbeddingInfo {
    let from_memory = personas.iter().find_map(|p| {
        let store = p.mind.associative.embeddings();
        (!store.is_empty()).then(|| (store.model().to_owned(), store.dim()))
    });
    let (client_model, client_dim) = client.unwrap_or_default();
    match from_memory {
        Some((model, dim)) => EmbeddingInfo {
            model: if model.is_empty() {
                client_model
            } else {
                model
            },
            dim,
        },
        None => EmbeddingInfo {
            model: client_model,
            dim: client_dim,
        },
    }
}

/// Saves the world into `dir`, atomically replacing what is there (see the [module
/// docs](super)). Fails with [`PersistError::Busy`] while a mind is out.
pub fn save_world(world: &mut World, dir: &Path) -> Result<SaveMeta, PersistError> {
    let (meta, files) = capture_save(world)?;
    write_folder_atomic(dir, &files)?;
    Ok(meta)
}

/// Loads the save in `dir` into `world`, replacing its personas, map events, pending intents,
/// clock and settings. The save is decoded and checked against the world's map and model
/// first; on any error the world is untouched.
pub fn load_into_world(world: &mut World, dir: &Path) -> Result<SaveMeta, PersistError> {
    load_into_world_with(world, dir, SaveIntegrity::Verify)
}

/// [`load_into_world`], checking the save against its manifest or not.
pub fn load_into_world_with(
    world: &mut World,
    dir: &Path,
    integrity: SaveIntegrity,
) -> Result<SaveMeta, PersistError> {
    recover_interrupted_save(dir)?;
    let data = decode_with(dir, integrity)?;
    let meta = data.meta.clone();
    apply_save(world, data)?;
    Ok(meta)
}

/// Checks that a decoded save fits `map` and the embedding model of `client` — what
/// [`apply_save`] checks before it touches a world — so a caller can refuse a save before it
/// builds anything (the game does, before it opens its window).
pub fn check_save(
    data: &SaveData,
    map: &TownMap,
    client: Option<&LlmClient>,
) -> Result<(), PersistError> {
    check_embedding(client, &data.meta.embedding)?;
    check_tiles(map, data)
}

/// Checks the embedding model of the save against the world's client (SPEC §5: never a silent
/// mismatch). A dimension of 0 means "not known yet" and is not compared.
fn check_embedding(client: Option<&LlmClient>, info: &EmbeddingInfo) -> Result<(), PersistError> {
    let Some(client) = client else {
        return Ok(());
    };
    if info.model.is_empty() {
        return Ok(());
    }
    let (model, dim) = (client.embedding_model(), client.embedding_dim());
    let dims_differ = info.dim != 0 && dim != 0 && info.dim != dim;
    if model != info.model || dims_differ {
        return Err(PersistError::EmbeddingMismatch {
            saved_model: info.model.clone(),
            saved_dim: info.dim,
            current_model: model.to_owned(),
            current_dim: dim,
        });
    }
    Ok(())
}

/// Every tile the save mentions must be on the map.
fn check_tiles(map: &TownMap, data: &SaveData) -> Result<(), PersistError> {
    let off = |what: String, c: TileCoord| {
        PersistError::MapMismatch(format!(
            "{what} is at [{}, {}], outside the {}×{} map {:?}",
            c.x,
            c.y,
            map.width(),
            map.height(),
            map.world_name()
        ))
    };
    if map.world_name() != data.meta.world {
        return Err(PersistError::MapMismatch(format!(
            "the save is of world {:?} but the map is {:?}",
            data.meta.world,
            map.world_name()
        )));
    }
    for tile in data.stages.tiles() {
        if !map.in_bounds(tile) {
            return Err(off("a scene in stages.json".into(), tile));
        }
    }
    for tile in data.groups.tiles() {
        if !map.in_bounds(tile) {
            return Err(off("a talk in groups.json".into(), tile));
        }
    }
    for tile in &data.events.tiles {
        if !map.in_bounds(tile.tile) {
            return Err(off("an event in world/events.json".into(), tile.tile));
        }
    }
    for p in &data.personas {
        let body = &p.body;
        let mut tiles = vec![body.tile, body.previous_tile];
        tiles.extend(body.planned_path.iter().copied());
        tiles.extend(body.object_event_at.as_ref().map(|(c, _)| *c));
        tiles.extend(p.perceived_from);
        for c in tiles {
            if !map.in_bounds(c) {
                return Err(off(format!("{}'s body", p.name), c));
            }
        }
    }
    Ok(())
}

/// Applies a decoded save to `world` (see [`load_into_world`]): the town, then every
/// [`SaveSection`](super::SaveSection) the world knows (checked with the rest before anything
/// changes). When the world has no [`TownMap`], the save's map file is loaded.
pub fn apply_save(world: &mut World, data: SaveData) -> Result<(), PersistError> {
    apply(world, data, true)
}

fn apply(world: &mut World, data: SaveData, with_sections: bool) -> Result<(), PersistError> {
    check_embedding(world.get_resource::<LlmClient>(), &data.meta.embedding)?;
    if with_sections {
        super::sections::check_sections(world, &data.sections, &data.meta.personas)?;
    }
    if !world.contains_resource::<TownMap>() {
        let map = TownMap::load_tmx(data.meta.map_path())?;
        check_tiles(&map, &data)?;
        world.insert_resource(map);
    } else if let Some(map) = world.get_resource::<TownMap>() {
        check_tiles(map, &data)?;
    }
    // Everything checked: from here on nothing fails.
    let SaveData {
        meta,
        settings,
        events,
        pending,
        groups,
        stages,
        sections,
        personas,
    } = data;

    let old: Vec<Entity> = world
        .query_filtered::<Entity, With<Persona>>()
        .iter(world)
        .collect();
    for entity in old {
        // Despawning drops any task in flight on the entity, which cancels it.
        world.despawn(entity);
    }
    // The world's scenes end (their actors were the personas just despawned); the save's
    // come back once its personas are spawned.
    crate::stage::end_scenes_for_load(world);
    if let Some(mut map) = world.get_resource_mut::<TownMap>() {
        let existing: Vec<(TileCoord, Vec<TileEvent>)> = map
            .tiles()
            .filter(|(_, t)| !t.events.is_empty())
            .map(|(c, t)| (c, t.events.iter().cloned().collect()))
            .collect();
        for (c, list) in existing {
            for event in &list {
                map.remove_event(c, event);
            }
        }
        for tile in events.tiles {
            for event in tile.events {
                map.add_event(tile.tile, event);
            }
        }
    }
    // The personas get entities in the saved order: the simulation takes them in entity order
    // wherever the order matters (who speaks first, whose call lands first), and a world need
    // not hand entities out in increasing order (one that had personas hands their freed
    // entities out again, a generation up) — so the entities are made first, sorted, then
    // filled in the saved order.
    let mut entities: Vec<Entity> = (0..personas.len())
        .map(|_| world.spawn_empty().id())
        .collect();
    entities.sort();
    let mut by_name: BTreeMap<String, Entity> = BTreeMap::new();
    let mut attention = Vec::with_capacity(personas.len());
    // The sessions of the save replace the world's (whose personas were just despawned).
    let mut sessions = crate::dialogue::DialogueSessions::default();
    for (mut p, entity) in personas.into_iter().zip(entities) {
        for (speaker, turns) in std::mem::take(&mut p.dialogue.sessions) {
            sessions.0.insert((entity, speaker), turns);
        }
        // Where it stood when it last looked (the group flow reads its arena at once; a
        // persona who has not moved since does not look at the place again).
        let percepts = match (p.perceived_from, world.get_resource::<TownMap>()) {
            (Some(tile), Some(map)) => standing_on(map, tile),
            (tile, _) => Percepts {
                tile,
                ..Default::default()
            },
        };
        world.entity_mut(entity).insert((
            Persona,
            Name::new(p.name.clone()),
            Mind::new(p.mind),
            p.body,
            p.view,
            p.diary,
            percepts,
            p.dialogue.profiles,
            p.dialogue.appointments,
        ));
        by_name.insert(p.name, entity);
        attention.push((entity, p.group));
    }
    world.insert_resource(sessions);
    // The group conversations of the save replace the world's (their members are named).
    crate::group::save::restore(world, groups, attention, &by_name);
    crate::stage::save::restore(world, stages, &by_name);
    let restore_sections = with_sections.then_some((sections, by_name.clone()));
    let intents: Vec<(Entity, String)> = pending
        .chat_intents
        .into_iter()
        .filter_map(|(from, to)| by_name.get(&from).map(|e| (*e, to)))
        .collect();
    world.insert_resource(ChatIntents(intents));
    world.insert_resource(LandedThoughts::default());
    let speed = world
        .get_resource::<SimClock>()
        .map(|c| c.speed)
        .unwrap_or_default();
    world.insert_resource(
        SimClock::resumed(meta.start, meta.sec_per_step, meta.step)
            .with_mode(meta.time_mode)
            .with_speed(speed),
    );
    world.insert_resource(settings);
    world.insert_resource(SimSeed(meta.seed));
    // Last: a section reads the town it belongs to (the clock, the personas).
    if let Some((sections, by_name)) = restore_sections {
        super::sections::restore_sections(world, &sections, &by_name);
    }
    Ok(())
}

/// Builds a headless app (as `build_headless_app` does)
/// from the save in `dir`: its map (or `map_override`), its personas and clock, the LLM from
/// `llm` (or `client` when given), in Lockstep at maximum speed.
pub fn build_app_from_save(
    dir: &Path,
    llm: &LlmConfig,
    client: Option<LlmClient>,
    map_override: Option<&Path>,
    with_log: bool,
) -> Result<(App, SaveMeta), PersistError> {
    build_app_from_save_with(
        dir,
        llm,
        client,
        map_override,
        with_log,
        SaveIntegrity::Verify,
    )
}

/// [`build_app_from_save`], checking the save against its manifest or not.
pub fn build_app_from_save_with(
    dir: &Path,
    llm: &LlmConfig,
    client: Option<LlmClient>,
    map_override: Option<&Path>,
    with_log: bool,
    integrity: SaveIntegrity,
) -> Result<(App, SaveMeta), PersistError> {
    // Edited prompts are checked before anything else is done.
    let prompts = PromptLibrary::load(llm.prompts.as_deref())?;
    recover_interrupted_save(dir)?;
    let data = decode_with(dir, integrity)?;
    let meta = data.meta.clone();
    note_prompt_change(meta.prompts.as_ref(), &prompts);
    let map = match map_override {
        Some(path) => TownMap::load_tmx(path)?,
        None => TownMap::load_tmx(meta.map_path())?,
    };
    let client = match client {
        Some(client) => client,
        // The offline town script follows the simulation's seed, as in a fresh headless run.
        None if llm.resolved_backend() == crate::llm::BackendChoice::Scripted => {
            crate::llm::town_script_client(meta.seed)
        }
        None => build_client(llm)?,
    };
    let mut app = App::new();
    app.add_plugins(MinimalPlugins);
    if with_log {
        app.add_plugins(LogPlugin::default());
    }
    app.insert_resource(client)
        .insert_resource(prompts)
        .insert_resource(
            SimClock::default()
                .with_mode(TimeMode::Lockstep)
                .with_speed(SimSpeed::Max),
        )
        .add_plugins(crate::GenerativeAgentsPlugins.set(LlmPlugin::with_config(llm.clone())))
        .add_plugins(PersistPlugin);
    app.insert_resource(map);
    apply_save(app.world_mut(), data)?;
    app.finish();
    app.cleanup();
    Ok((app, meta))
}

/// Logs when a save continues with other prompts than it was made with (allowed: editing
/// prompts between sessions is what overrides are for, but the run should say so).
pub fn note_prompt_change(saved: Option<&PromptProvenance>, now: &PromptLibrary) {
    let now = now.provenance();
    if let Some(saved) = saved
        && *saved != now
    {
        warn!(
            "the save was made with prompts {}; continuing with {}",
            saved.describe(),
            now.describe()
        );
    }
}

/// Copies the save `src` to the new folder `dst` after validating it completely, recording
/// where it came from (`forked_from`). `dst` must not exist.
pub fn fork_save(src: &Path, dst: &Path) -> Result<SaveMeta, PersistError> {
    fork_save_with(src, dst, SaveIntegrity::Verify)
}

/// [`fork_save`], checking the source against its manifest or not (the copy always gets a
/// fresh manifest).
pub fn fork_save_with(
    src: &Path,
    dst: &Path,
    integrity: SaveIntegrity,
) -> Result<SaveMeta, PersistError> {
    if dst.exists() {
        return Err(PersistError::Exists {
            path: dst.to_owned(),
        });
    }
    recover_interrupted_save(src)?;
    let mut data = decode_with(src, integrity)?;
    data.meta.forked_from = Some(src.to_owned());
    let files = data.encode()?;
    write_folder_atomic(dst, &files)?;
    Ok(data.meta)
}

/// The town held in memory: the files a save of this moment would write (see
/// [`capture_save`]), to roll back to later without touching the disk. The director takes one
/// before it executes a plan and restores it when the plan is cancelled.
#[derive(Debug, Clone, PartialEq)]
pub struct TownSnapshot {
    meta: SaveMeta,
    files: SaveFiles,
}

impl TownSnapshot {
    /// Captures the world now. Fails like a save does (a mind out thinking:
    /// [`PersistError::Busy`], try again next frame).
    pub fn capture(world: &mut World) -> Result<Self, PersistError> {
        let (meta, files) = capture(world, false)?;
        Ok(Self { meta, files })
    }

    /// A snapshot from files a save of it holds (a save taken mid-directive keeps the
    /// director's): decoded and checked like a save.
    pub fn from_files(files: SaveFiles) -> Result<Self, PersistError> {
        let data = super::format::decode_in_memory(&files)?;
        if !data.meta.sections.is_empty() {
            return Err(PersistError::Invalid {
                file: "meta.json".into(),
                field: "sections".into(),
                message: "a snapshot of the town holds no section".into(),
            });
        }
        Ok(Self {
            meta: data.meta,
            files,
        })
    }

    /// The snapshot's meta (step, time, personas).
    pub fn meta(&self) -> &SaveMeta {
        &self.meta
    }

    /// The files, as a save folder would hold them (paths relative to the folder).
    pub fn files(&self) -> &[(std::path::PathBuf, Vec<u8>)] {
        &self.files
    }

    /// Puts the world back as it was (personas, map events, pending intents, clock, settings):
    /// decoded and checked first, so on error the world is untouched.
    pub fn restore(&self, world: &mut World) -> Result<(), PersistError> {
        let data = super::format::decode_in_memory(&self.files)?;
        apply(world, data, false)
    }
}
