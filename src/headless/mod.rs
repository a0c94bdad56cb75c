//! Headless runs: the same plugins as the game, under [`MinimalPlugins`], driven from a loop.
//!
//! **Layer** (see `tests/layers.rs`): builds apps from the layers below (up to
//! [`cognition`](crate::cognition) through the plugin group); imported by
//! [`output`](crate::output) and `render`.

mod crowd;

pub use crowd::{district_crowd, district_town, spawn_crowd, spawn_sheets, synthetic_sheets};

use std::io::Write;
use std::path::PathBuf;

use bevy::log::LogPlugin;
use bevy::prelude::*;

use crate::clock::{SimClock, SimSpeed, TimeMode};
use crate::llm::{ConfigError, LlmConfig, LlmPlugin, build_client};
use crate::persona::{
    ActionView, Body, Persona, PersonaError, default_personas_dir, load_persona_sheets,
    spawn_persona,
};
use crate::prompt::{PromptLibrary, TemplateError};
use crate::settings::AgentSettings;
use crate::world::{MapError, TownMap};

/// Task pools for a simulation app: the compute pool gets every core.
///
/// Thoughts are CPU work on the compute pool (each step's thoughts are polled there in
/// parallel), while model calls wait on the async compute pool and files on the IO pool, both
/// mostly asleep. Bevy's defaults give the IO and async pools a quarter of the cores each and
/// the compute pool what is left — on a 2-core machine, one thread, so a busy step ran on one
/// core. Here the compute pool has one thread per core and the two others keep their defaults
/// (a few more threads than cores, of which only the compute ones are busy). The game's window
/// app uses the same pools.
///
/// ```
/// use bevy::prelude::*;
/// let mut app = App::new();
/// app.add_plugins(MinimalPlugins.set(bevy_generative_agents::headless::simulation_task_pools()));
/// ```
pub fn simulation_task_pools() -> TaskPoolPlugin {
    let cores = bevy::tasks::available_parallelism();
    let mut options = TaskPoolOptions::default();
    // The compute pool is sized last, from the cores the other pools left; `min_threads` at
    // the core count keeps it from getting fewer.
    options.compute.min_threads = cores;
    TaskPoolPlugin {
        task_pool_options: options,
    }
}

/// Switches a built app to lean mode (`smallville run --lean`, `smallville --lean`):
/// [`AgentSettings::make_lean`] on its settings, so every setting lean mode does not touch
/// stays as the app was given it. A game building its own app can instead insert `AgentSettings::lean()`
/// before adding the plugins. Saves keep the settings, so a lean town stays lean when loaded.
pub fn make_lean(app: &mut App) {
    if let Some(mut settings) = app.world_mut().get_resource_mut::<AgentSettings>() {
        settings.make_lean();
    }
}

/// What a headless demo runs.
#[derive(Debug, Clone)]
pub struct DemoOptions {
    /// Game hours to simulate.
    pub hours: f64,
    /// Spawn only the first N personas.
    pub personas: Option<usize>,
    /// Seed of every random choice.
    pub seed: u64,
    /// Map file (default town when `None`).
    pub map: Option<PathBuf>,
    /// Persona folder (default personas when `None`).
    pub personas_dir: Option<PathBuf>,
    /// The model configuration.
    pub llm: LlmConfig,
    /// When the clock starts (`None`: [`SimClock::default_start`]).
    pub start: Option<chrono::NaiveDateTime>,
}

/// Why a headless run could not start or finish.
#[derive(Debug, thiserror::Error)]
pub enum HeadlessError {
    /// The map is unusable.
    #[error(transparent)]
    Map(#[from] MapError),
    /// A persona sheet is unusable.
    #[error(transparent)]
    Persona(#[from] PersonaError),
    /// The model configuration is unusable.
    #[error(transparent)]
    Llm(#[from] ConfigError),
    /// A prompt template override is unusable.
    #[error(transparent)]
    Prompts(#[from] TemplateError),
    /// Writing output failed.
    #[error("cannot write output: {0}")]
    Io(#[from] std::io::Error),
    /// A parameter is out of range.
    #[error("{0}")]
    Invalid(String),
}

/// Builds a headless app with the town loaded and its personas spawned, in Lockstep at max speed.
///
/// The prompt overrides of `options.llm.prompts` are loaded and checked first, before the map,
/// the personas or the backend.
pub(crate) fn build_headless_app(
    options: &DemoOptions,
    with_log: bool,
) -> Result<App, HeadlessError> {
    let prompts = PromptLibrary::load(options.llm.prompts.as_deref())?;
    let map_path = options
        .map
        .clone()
        .unwrap_or_else(TownMap::default_town_path);
    let map = TownMap::load_tmx(&map_path)?;
    let mut sheets = load_persona_sheets(
        options
            .personas_dir
            .clone()
            .unwrap_or_else(default_personas_dir),
    )?;
    if let Some(n) = options.personas {
        if n == 0 {
            return Err(HeadlessError::Invalid(
                "--personas must be at least 1".into(),
            ));
        }
        if n > sheets.len() {
            return Err(HeadlessError::Invalid(format!(
                "--personas {n}: the persona folder has only {} sheet(s)",
                sheets.len()
            )));
        }
        sheets.truncate(n);
    }
    // The offline town script follows the run's seed, like every other random choice.
    let client = if options.llm.resolved_backend() == crate::llm::BackendChoice::Scripted {
        crate::llm::town_script_client(options.seed)
    } else {
        build_client(&options.llm)?
    };

    let mut app = App::new();
    app.add_plugins(MinimalPlugins.set(simulation_task_pools()));
    if with_log {
        app.add_plugins(LogPlugin::default());
    }
    app.insert_resource(client)
        .insert_resource(prompts)
        .insert_resource(
            SimClock::new(
                options.start.unwrap_or_else(SimClock::default_start),
                SimClock::default().sec_per_step(),
            )
            .with_mode(TimeMode::Lockstep)
            .with_speed(SimSpeed::Max),
        )
        .add_plugins(
            crate::GenerativeAgentsPlugins.set(LlmPlugin::with_config(options.llm.clone())),
        );
    let settings = app
        .world()
        .get_resource::<AgentSettings>()
        .cloned()
        .unwrap_or_default();
    let clock = app.world().resource::<SimClock>().clone();
    {
        let world = app.world_mut();
        let mut queue = bevy::ecs::world::CommandQueue::default();
        let mut commands = Commands::new(&mut queue, world);
        for sheet in &sheets {
            spawn_persona(&mut commands, sheet, &map, &settings, &clock, options.seed)?;
        }
        queue.apply(world);
    }
    app.insert_resource(map);
    app.finish();
    app.cleanup();
    Ok(app)
}

/// Runs the demo: prints the town, then one status line per persona every game hour.
pub fn run_demo(options: &DemoOptions, out: &mut impl Write) -> Result<(), HeadlessError> {
    if !(options.hours > 0.0 && options.hours <= 24.0 * 365.0) {
        return Err(HeadlessError::Invalid(format!(
            "--hours must be in (0, 8760], got {}",
            options.hours
        )));
    }
    let mut app = build_headless_app(options, true)?;
    let steps_per_hour = 3600 / app.world().resource::<SimClock>().sec_per_step() as u64;
    let total = (options.hours * steps_per_hour as f64).round() as u64;
    app.world_mut().resource_mut::<SimClock>().stop_at_step = Some(total);

    {
        let map = app.world().resource::<TownMap>();
        let client = app.world().resource::<crate::llm::LlmClient>();
        writeln!(
            out,
            "Town {} ({}x{} tiles), {} sectors",
            map.world_name(),
            map.width(),
            map.height(),
            map.places().len()
        )?;
        let backend = client.backend_name();
        let note = if backend == "scripted" {
            " — offline scripted answers, not a language model"
        } else {
            ""
        };
        writeln!(
            out,
            "LLM backend: {backend} (model {}){note}",
            client.model()
        )?;
        if let Some(prompts) = app.world().get_resource::<PromptLibrary>() {
            writeln!(out, "Prompts: {}", prompts.provenance().describe())?;
        }
    }
    let mut last_hour = u64::MAX;
    loop {
        let step = app.world().resource::<SimClock>().step();
        if step / steps_per_hour != last_hour {
            last_hour = step / steps_per_hour;
            print_status(&mut app, out)?;
        }
        if app.world().resource::<SimClock>().finished() {
            break;
        }
        app.update();
    }
    let usage = app.world().resource::<crate::llm::LlmClient>().usage();
    writeln!(
        out,
        "LLM usage: {}",
        serde_json::to_string(&usage).unwrap_or_default()
    )?;
    Ok(())
}

fn print_status(app: &mut App, out: &mut impl Write) -> std::io::Result<()> {
    let now = app.world().resource::<SimClock>().now();
    writeln!(out, "— {}", now.format("%A %B %-d, %H:%M"))?;
    let mut query = app
        .world_mut()
        .query_filtered::<(&Name, &Body, &ActionView), With<Persona>>();
    let mut rows: Vec<(String, String)> = query
        .iter(app.world())
        .map(|(name, body, view)| {
            let doing = if view.description.is_empty() {
                "(no action yet)".to_string()
            } else {
                let address = view.address.as_ref().map(ToString::to_string);
                format!(
                    "{} {} @ {}",
                    view.emoji,
                    view.description,
                    address.unwrap_or_default()
                )
            };
            (
                name.as_str().to_string(),
                format!("[{:>2},{:>2}] {doing}", body.tile.x, body.tile.y),
            )
        })
        .collect();
    rows.sort();
    for (name, line) in rows {
        writeln!(out, "  {name:<16} {line}")?;
    }
    Ok(())
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
    let entities = spawn_sheets(app, &map, &sheets, seed)?;
    app.insert_resource(map);
    Ok(entities)
}
