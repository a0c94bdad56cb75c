//! Deterministic tools for tests, benchmarks and offline demos.
//!
//! Nothing here is a language model. [`ScriptedBackend`] answers each prompt kind with
//! deterministic, seeded text so that the whole loop can be exercised without a model, and it
//! says so everywhere it is shown (its name is `"scripted"`); [`town_script`] is the script it
//! runs by default, which makes a believable day for any persona. [`FaultyBackend`] wraps another
//! backend and returns garbage for a seeded fraction of calls, to prove the fail-safes.

mod crowd;
#[cfg(feature = "http")]
pub mod fake_openai;
pub mod town_script;

use std::sync::Arc;
use std::time::Duration;

use bevy::prelude::*;
use bevy::time::TimeUpdateStrategy;

pub use crate::llm::{FaultyBackend, ScriptedBackend};
pub use crowd::{district_crowd, district_town, spawn_crowd, synthetic_sheets};

use crate::clock::{SimClock, SimSpeed, TimeMode};
use crate::llm::LlmClient;
use crate::persona::{PersonaError, default_personas_dir, load_persona_sheets, spawn_persona};
use crate::settings::AgentSettings;
use crate::world::{MapError, TownMap};

/// A headless app: [`MinimalPlugins`] (with [`crate::headless::simulation_task_pools`]), the
/// agent plugins, the given client, a Lockstep clock at
/// max speed, and virtual time advancing a fixed 16 ms per update.
pub fn create_test_app(client: LlmClient) -> App {
    let mut app = App::new();
    app.add_plugins(MinimalPlugins.set(crate::headless::simulation_task_pools()))
        .insert_resource(TimeUpdateStrategy::ManualDuration(Duration::from_millis(
            16,
        )))
        .insert_resource(client)
        .insert_resource(
            SimClock::default()
                .with_mode(TimeMode::Lockstep)
                .with_speed(SimSpeed::Max),
        )
        .add_plugins(crate::GenerativeAgentsPlugins);
    app
}

/// A client over the offline town script ([`town_script::town_script_backend`]) seeded with
/// `seed`: a deterministic [`ScriptedBackend`], not a model.
pub fn scripted_client(seed: u64) -> LlmClient {
    LlmClient::new(Arc::new(town_script::town_script_backend(seed)))
}

/// Why the default town could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TownSetupError {
    /// The map failed to load.
    #[error(transparent)]
    Map(#[from] MapError),
    /// A persona sheet failed to load or fit.
    #[error(transparent)]
    Persona(#[from] PersonaError),
}

/// Loads the default town and spawns its first `max_personas` personas (all when `None`).
/// Returns the persona entities in sheet order.
pub fn spawn_default_town(
    app: &mut App,
    max_personas: Option<usize>,
    seed: u64,
) -> Result<Vec<Entity>, TownSetupError> {
    let map = TownMap::load_tmx(TownMap::default_town_path())?;
    let mut sheets = load_persona_sheets(default_personas_dir())?;
    if let Some(n) = max_personas {
        sheets.truncate(n);
    }
    let settings = app
        .world()
        .get_resource::<AgentSettings>()
        .cloned()
        .unwrap_or_default();
    let clock = app
        .world()
        .get_resource::<SimClock>()
        .cloned()
        .unwrap_or_default();
    let mut entities = Vec::new();
    {
        let world = app.world_mut();
        let mut queue = bevy::ecs::world::CommandQueue::default();
        let mut commands = Commands::new(&mut queue, world);
        for sheet in &sheets {
            entities.push(spawn_persona(
                &mut commands,
                sheet,
                &map,
                &settings,
                &clock,
                seed,
            )?);
        }
        queue.apply(world);
    }
    app.insert_resource(map);
    Ok(entities)
}
