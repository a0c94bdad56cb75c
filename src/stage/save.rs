//! What a save keeps of the stage (SPEC §9, §11, §16): the scenes playing — each scene as it
//! stands between two turns, the turns still queued, whether it closes after them, the step
//! its next turn may start, where it shows as a tile event — and the aftermaths of closed
//! scenes still waiting for their persona's mind. A save is taken between steps with no
//! turn's calls out (a turn in flight keeps its waiter `AwaitingCognition`), so a loaded town
//! plays the scene on exactly as it would have.
//!
//! Personas are named (entities do not outlive a save). Everything is checked when the save
//! loads, before the world is touched: the scene by the rules a scene file meets, each name a
//! persona of the save, every count and text bounded.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use bevy::prelude::*;
use chrono::NaiveDateTime;
use serde::{Deserialize, Serialize};

use crate::clock::Held;
use crate::world::{TileCoord, TileEvent};

use super::Stages;
use super::play::{Aftermath, Aftermaths, MAX_STAGES, Phase, SceneMemory, StageRun};
use super::scene::Scene;

/// Most narrations a saved scene may hold.
const MAX_SAVED_TURNS: usize = 10_000;
/// Most characters of one saved text (a narration, a memory's description, a line).
const MAX_SAVED_TEXT: usize = 20_000;
/// Most turns a saved scene may have queued.
const MAX_QUEUED: u32 = 100_000;
/// Most aftermaths a save may hold waiting (every actor of every scene).
const MAX_AFTERMATHS: usize = MAX_STAGES * super::scene::MAX_ACTORS * 4;
/// Most lines of a waiting aftermath's conversation.
const MAX_AFTERMATH_LINES: usize = 8;

/// A scene playing, as saved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SavedScene {
    /// The scene (its actors' personas are in `personas`).
    pub scene: Scene,
    /// The persona each actor of `scene.actors` is, by name, in order.
    pub personas: Vec<Option<String>>,
    /// The persona each fallen actor was, by name, in order.
    pub fallen_personas: Vec<Option<String>>,
    /// Turns still to play.
    pub queued: u32,
    /// When it opened (game time).
    pub opened: NaiveDateTime,
    /// Whether it closes once the queued turns are played.
    pub close_after: bool,
    /// The first step its next turn may start.
    pub next_step: u64,
    /// Where it shows to bystanders, and the event (which `world/events.json` holds too).
    pub shown: Option<(TileCoord, TileEvent)>,
}

/// An aftermath waiting for its persona's mind, as saved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedAftermath {
    /// The persona, by name.
    pub persona: String,
    /// What it keeps of the scene.
    memory: SceneMemory,
}

/// `stages.json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StagesFile {
    /// The scenes playing, by stage name.
    #[serde(default)]
    pub scenes: Vec<SavedScene>,
    /// Aftermaths waiting, in the order they run.
    #[serde(default)]
    pub aftermaths: Vec<SavedAftermath>,
}

/// Why a `stages.json` was refused: the field and the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StagesFileError {
    /// The field (`scenes[0].queued`).
    pub field: String,
    /// Why.
    pub message: String,
}

fn refuse(field: String, message: impl Into<String>) -> StagesFileError {
    StagesFileError {
        field,
        message: message.into(),
    }
}

fn check_text(field: String, text: &str) -> Result<(), StagesFileError> {
    if text.chars().count() > MAX_SAVED_TEXT {
        return Err(refuse(
            field,
            format!("longer than {MAX_SAVED_TEXT} characters"),
        ));
    }
    Ok(())
}

fn check_persona(
    field: String,
    name: Option<&String>,
    names: &BTreeSet<&str>,
) -> Result<(), StagesFileError> {
    match name {
        Some(name) if !names.contains(name.as_str()) => Err(refuse(
            field,
            format!(
                "{} is not a persona of this save",
                crate::persona::quote_clipped(name, 60)
            ),
        )),
        _ => Ok(()),
    }
}

impl StagesFile {
    /// The stage of `world` between steps, personas named by `names`; `Err` names a turn whose
    /// calls are out (a save waits for it).
    pub(crate) fn of(world: &World, names: &HashMap<Entity, String>) -> Result<Self, String> {
        let name_of = |persona: Option<Entity>| persona.and_then(|e| names.get(&e).cloned());
        let mut file = Self::default();
        if let Some(stages) = world.get_resource::<Stages>() {
            for run in stages.runs.values() {
                if run.busy() {
                    return Err(format!("a turn of the scene on {} is out", run.scene.name));
                }
                file.scenes.push(SavedScene {
                    personas: run
                        .scene
                        .actors
                        .iter()
                        .map(|a| name_of(a.persona))
                        .collect(),
                    fallen_personas: run
                        .scene
                        .fallen
                        .iter()
                        .map(|(a, _)| name_of(a.persona))
                        .collect(),
                    scene: run.scene.clone(),
                    queued: run.queued,
                    opened: run.opened,
                    close_after: run.close_after,
                    next_step: run.next_step,
                    shown: run.shown.clone(),
                });
            }
        }
        if let Some(aftermaths) = world.get_resource::<Aftermaths>() {
            for after in &aftermaths.0 {
                if after.task.is_some() {
                    return Err("a scene's aftermath is out".into());
                }
                if let Some(persona) = names.get(&after.persona) {
                    file.aftermaths.push(SavedAftermath {
                        persona: persona.clone(),
                        memory: after.memory.clone(),
                    });
                }
            }
        }
        Ok(file)
    }

    /// Checks the file as untrusted input against the save's persona `names`.
    pub fn check(&self, names: &BTreeSet<&str>) -> Result<(), StagesFileError> {
        if self.scenes.len() > MAX_STAGES {
            return Err(refuse(
                "scenes".into(),
                format!("at most {MAX_STAGES} scenes play at once"),
            ));
        }
        let mut stages = BTreeSet::new();
        let mut held = BTreeSet::new();
        for (i, saved) in self.scenes.iter().enumerate() {
            let at = |field: &str| format!("scenes[{i}].{field}");
            let scene = &saved.scene;
            Scene::new(
                scene.name.clone(),
                scene.environment.clone(),
                scene.actors.clone(),
            )
            .map_err(|message| refuse(at("scene"), message))?;
            if !stages.insert(scene.name.clone()) {
                return Err(refuse(at("scene.name"), "two scenes on one stage"));
            }
            if let Some(arena) = &scene.arena {
                check_text(at("scene.arena"), arena)?;
            }
            if scene.fallen.len() > super::scene::MAX_ACTORS {
                return Err(refuse(
                    at("scene.fallen"),
                    "more fallen than a scene has actors",
                ));
            }
            for (j, (actor, _)) in scene.fallen.iter().enumerate() {
                actor
                    .check()
                    .map_err(|message| refuse(at(&format!("scene.fallen[{j}]")), message))?;
            }
            if scene.narration.len() > MAX_SAVED_TURNS {
                return Err(refuse(
                    at("scene.narration"),
                    format!("more than {MAX_SAVED_TURNS} turns"),
                ));
            }
            for (j, told) in scene.narration.iter().enumerate() {
                check_text(at(&format!("scene.narration[{j}]")), told)?;
            }
            if saved.personas.len() != scene.actors.len() {
                return Err(refuse(at("personas"), "one entry per actor"));
            }
            if saved.fallen_personas.len() != scene.fallen.len() {
                return Err(refuse(at("fallen_personas"), "one entry per fallen actor"));
            }
            for (j, name) in saved.personas.iter().enumerate() {
                check_persona(at(&format!("personas[{j}]")), name.as_ref(), names)?;
                if let Some(name) = name
                    && !held.insert(name.clone())
                {
                    return Err(refuse(
                        at(&format!("personas[{j}]")),
                        format!("{name} plays in two scenes"),
                    ));
                }
            }
            for (j, name) in saved.fallen_personas.iter().enumerate() {
                check_persona(at(&format!("fallen_personas[{j}]")), name.as_ref(), names)?;
            }
            if saved.queued > MAX_QUEUED {
                return Err(refuse(
                    at("queued"),
                    format!("more than {MAX_QUEUED} turns"),
                ));
            }
            if let Some((_, event)) = &saved.shown {
                check_text(at("shown"), event.description.as_deref().unwrap_or(""))?;
            }
        }
        if self.aftermaths.len() > MAX_AFTERMATHS {
            return Err(refuse(
                "aftermaths".into(),
                format!("at most {MAX_AFTERMATHS} aftermaths wait"),
            ));
        }
        for (i, after) in self.aftermaths.iter().enumerate() {
            let at = |field: &str| format!("aftermaths[{i}].{field}");
            check_persona(at("persona"), Some(&after.persona), names)?;
            let m = &after.memory;
            for (field, text) in [
                ("memory.stage", &m.stage),
                ("memory.description", &m.description),
                ("memory.partner", &m.partner),
            ] {
                check_text(at(field), text)?;
            }
            if m.conversation.len() > MAX_AFTERMATH_LINES {
                return Err(refuse(
                    at("memory.conversation"),
                    format!("at most {MAX_AFTERMATH_LINES} lines"),
                ));
            }
            for (j, (who, line)) in m.conversation.iter().enumerate() {
                check_text(at(&format!("memory.conversation[{j}]")), who)?;
                check_text(at(&format!("memory.conversation[{j}]")), line)?;
            }
        }
        Ok(())
    }

    /// The tiles the file names (checked against the map when a save loads).
    pub(crate) fn tiles(&self) -> impl Iterator<Item = TileCoord> + '_ {
        self.scenes
            .iter()
            .filter_map(|s| s.shown.as_ref().map(|(tile, _)| *tile))
    }
}

/// Puts the saved stage into `world` (after [`end_scenes_for_load`](super::end_scenes_for_load)
/// and the personas' respawn): each scene with a fresh waiter and its persona actors held,
/// each waiting aftermath's persona held until it runs. The scenes' tile events came back with
/// the map's events.
pub(crate) fn restore(world: &mut World, file: StagesFile, by_name: &BTreeMap<String, Entity>) {
    let entity_of = |name: &Option<String>| name.as_ref().and_then(|n| by_name.get(n).copied());
    let mut runs = BTreeMap::new();
    let mut held = Vec::new();
    for saved in file.scenes {
        let mut scene = saved.scene;
        for (actor, name) in scene.actors.iter_mut().zip(&saved.personas) {
            actor.persona = entity_of(name);
            held.extend(actor.persona);
        }
        for ((actor, _), name) in scene.fallen.iter_mut().zip(&saved.fallen_personas) {
            actor.persona = entity_of(name);
        }
        let waiter = world.spawn(Name::new(format!("stage {}", scene.name))).id();
        runs.insert(
            scene.name.clone(),
            StageRun {
                scene,
                phase: Phase::Idle,
                queued: saved.queued,
                opened: saved.opened,
                close_after: saved.close_after,
                next_step: saved.next_step,
                waiter,
                shown: saved.shown,
            },
        );
    }
    let mut aftermaths = Vec::new();
    for after in file.aftermaths {
        if let Some(persona) = by_name.get(&after.persona).copied() {
            held.push(persona);
            aftermaths.push(Aftermath {
                persona,
                memory: after.memory,
                task: None,
            });
        }
    }
    for persona in held {
        if let Ok(mut entity) = world.get_entity_mut(persona) {
            entity.insert(Held);
        }
    }
    world.get_resource_or_init::<Stages>().runs = runs;
    world.get_resource_or_init::<Aftermaths>().0 = aftermaths;
}
