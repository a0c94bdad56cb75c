//! The windowed game: Bevy's default plugins, the simulation plugins (the same ones headless
//! runs use), egui, and [`GameRenderPlugins`]; the town and its personas; the clock in
//! [`TimeMode::Realtime`] so the window never waits for a model; conversations streamed as they
//! are spoken ([`ChatStreamSettings`]) so the dialogue bubbles type each line as the model
//! speaks it.
//!
//! Three ways in, one window:
//! - **a fresh town** ([`build_game_app`]): the map and persona sheets;
//! - **a save** ([`GameOptions::load`], `smallville --load DIR`): the save is decoded and checked
//!   against its map and the model's embeddings *before* any window opens, then applied with
//!   [`apply_save`] — its personas, clock, settings and seed; `F5`/`F9` quick save and load
//!   ([`QuickSavePlugin`]) in both cases;
//! - **a replay** ([`build_replay_app`], `smallville replay DIR`): a run's movement log played
//!   by the [`ReplayPlugin`] with no model and no cognition at all — only the clock, the map and
//!   display-only personas under the same render plugins.
//!
//! **Screenshot mode** ([`GameOptions::screenshot`], [`ReplayOptions::screenshot`]) renders a
//! number of frames with the simulation (or the replay) running, captures the window to a PNG
//! and exits — with an error when the capture fails, so tests can trust the exit status and
//! still check the image itself.

use std::path::PathBuf;
use std::time::Instant;

use bevy::app::AppExit;
use bevy::ecs::schedule::ScheduleLabel;
use bevy::prelude::*;
use bevy::render::view::screenshot::{Screenshot, ScreenshotCaptured, save_to_disk};
use bevy::window::{PresentMode, WindowResolution};
use bevy_egui::EguiPlugin;

use super::GameRenderPlugins;
use super::frame_report::{FrameReport, FrameSummary};
use super::saves::QuickSavePlugin;
use crate::clock::{ClockPlugin, SimClock, SimSpeed, TimeMode};
use crate::cognition::ChatStreamSettings;
use crate::headless::HeadlessError;
use crate::headless::{TownSetupError, spawn_crowd, synthetic_sheets};
use crate::llm::{BackendChoice, LlmConfig, LlmPlugin, build_client};
use crate::output::{ReplayPlayback, ReplayPlugin, load_replay_with};
use crate::persist::{
    PersistError, SaveData, SaveIntegrity, SimSeed, apply_save, check_save, decode_with,
    recover_interrupted_save,
};
use crate::persona::{ActionView, default_personas_dir, load_persona_sheets, spawn_persona};
use crate::prompt::PromptLibrary;
use crate::settings::AgentSettings;
use crate::world::TownMap;

/// The window's size in logical pixels.
pub const WINDOW_SIZE: (u32, u32) = (1280, 720);

/// Render `frames` frames (and run for `after`, if set), then save the window to `path` (PNG)
/// with the town's state beside it ([`ScreenshotState`], `path` with `.json`) and exit.
#[derive(Resource, Debug, Clone, PartialEq, Eq)]
pub struct ScreenshotRequest {
    /// Where the PNG goes.
    pub path: PathBuf,
    /// Frames to render before the capture (at least 1).
    pub frames: u32,
    /// Real time to run before the capture, on top of `frames` (`--screenshot-after`): what a
    /// player sees after that long at the chosen settings. With [`once_up`](Self::once_up),
    /// the longest wait.
    pub after: Option<std::time::Duration>,
    /// Capture as soon as a persona is out of bed ([`PersonaShot::out_of_bed`]), once `frames`
    /// have been drawn, without waiting out `after` (`--screenshot-once-up`): how soon the
    /// town comes alive depends on the machine (the embedded model's calls share its cores
    /// with a software renderer), so a check of it waits for the event, not for a fixed time.
    pub once_up: bool,
}

impl ScreenshotRequest {
    /// Whether the picture is due after `frames` drawn in `elapsed` real time; `someone_up`
    /// is asked only when [`once_up`](Self::once_up) could make it due early.
    fn capture_due(
        &self,
        frames: u32,
        elapsed: std::time::Duration,
        someone_up: impl FnOnce() -> bool,
    ) -> bool {
        let waited = self.after.is_none_or(|after| elapsed >= after);
        frames >= self.frames && (waited || (self.once_up && someone_up()))
    }
}

/// What the game runs.
#[derive(Debug, Clone)]
pub struct GameOptions {
    /// Spawn only the first N personas (ignored with [`load`](Self::load)).
    pub personas: Option<usize>,
    /// Seed of every random choice (a loaded save brings its own).
    pub seed: u64,
    /// Map file (default town when `None`; with [`load`](Self::load), the save's map).
    pub map: Option<PathBuf>,
    /// Persona folder (default personas when `None`; ignored with [`load`](Self::load)).
    pub personas_dir: Option<PathBuf>,
    /// The model configuration.
    pub llm: LlmConfig,
    /// The speed the clock starts at.
    pub speed: SimSpeed,
    /// Select and follow the persona whose name starts with this (case-insensitive) at start.
    pub follow: Option<String>,
    /// Screenshot mode.
    pub screenshot: Option<ScreenshotRequest>,
    /// Open this save instead of a fresh town.
    pub load: Option<PathBuf>,
    /// Whether [`load`](Self::load) is checked against its manifest (`--trust-edited-save`
    /// loads a save edited by hand on purpose).
    pub integrity: SaveIntegrity,
    /// Where `F5` saves and `F9` loads (see [`default_save_dir`](super::default_save_dir)).
    pub save_dir: PathBuf,
    /// The time of day a fresh town starts at on its first day ([`DEFAULT_GAME_START`] in the
    /// game; a loaded save keeps its own time).
    pub start: chrono::NaiveTime,
    /// Fast-forward nights while the whole town sleeps ([`NightFastForward`](super::NightFastForward)).
    pub fast_forward_nights: bool,
    /// An instruction for the director, sent as the game starts (the director's panel opens
    /// on it, asking before it runs).
    pub directive: Option<String>,
    /// A stage scene file opened as the game starts (its panel open, auto-play on); checked
    /// before the window opens.
    pub stage: Option<std::path::PathBuf>,
    /// Lean mode ([`make_lean`](crate::headless::make_lean)): fewer model calls per
    /// agent-day.
    pub lean: bool,
}

/// The game's first day starts in the morning, so the first minute shows the town living
/// rather than five people asleep (headless runs start at midnight, as Smallville does).
pub const DEFAULT_GAME_START: chrono::NaiveTime = match chrono::NaiveTime::from_hms_opt(7, 0, 0) {
    Some(t) => t,
    None => chrono::NaiveTime::MIN,
};

/// What a replay plays.
#[derive(Debug, Clone)]
pub struct ReplayOptions {
    /// The run folder holding `movement.jsonl` (and maybe the run's `save/`).
    pub dir: PathBuf,
    /// The map (default: the run's save's map, else the default town).
    pub map: Option<PathBuf>,
    /// The speed the replay starts at (the game's speeds: 1× is one step per real second).
    pub speed: SimSpeed,
    /// Select and follow the persona whose name starts with this (case-insensitive) at start.
    pub follow: Option<String>,
    /// Screenshot mode.
    pub screenshot: Option<ScreenshotRequest>,
    /// Whether the run's save (read for its map) is checked against its manifest
    /// (`--trust-edited-save` reads one edited by hand on purpose).
    pub integrity: SaveIntegrity,
}

/// Why the game could not start or ended badly.
#[derive(Debug, thiserror::Error)]
pub enum GameError {
    /// Setting up the town, the personas or the model failed.
    #[error(transparent)]
    Setup(#[from] HeadlessError),
    /// The save or the movement log is unusable (the error names the file).
    #[error(transparent)]
    Persist(#[from] PersistError),
    /// The app exited with an error (e.g. the screenshot could not be taken).
    #[error("the game exited with an error (code {0})")]
    Exit(u8),
    /// The stage scene file is unusable (the error names the file and the problem).
    #[error("{0}")]
    Stage(String),
}

/// Parses a speed given on the command line: `paused`, `1`, `2`, `4`, `8`, `16`, `32` (an
/// optional `x` suffix is fine) or `max`.
pub fn parse_speed(text: &str) -> Result<SimSpeed, String> {
    let t = text.trim().to_ascii_lowercase();
    // "32x" means 32; "max" keeps its x.
    let t = match t.strip_suffix('x') {
        Some(n) if !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()) => n,
        _ => t.as_str(),
    };
    Ok(match t {
        "paused" | "pause" => SimSpeed::Paused,
        "1" => SimSpeed::X1,
        "2" => SimSpeed::X2,
        "4" => SimSpeed::X4,
        "8" => SimSpeed::X8,
        "16" => SimSpeed::X16,
        "32" => SimSpeed::X32,
        "max" => SimSpeed::Max,
        _ => {
            return Err(format!(
                "unknown speed {text:?}: use paused, 1, 2, 4, 8, 16, 32 or max"
            ));
        }
    })
}

/// The window, Bevy's default plugins and the timed sim driver: what the game and the replay
/// share before their own plugins.
fn window_app(title: String, screenshot: bool) -> App {
    let mut app = App::new();
    app.add_plugins(
        DefaultPlugins
            .set(WindowPlugin {
                primary_window: Some(Window {
                    title,
                    resolution: WindowResolution::new(WINDOW_SIZE.0, WINDOW_SIZE.1),
                    // Screenshots must not depend on the display's refresh rate.
                    present_mode: if screenshot {
                        PresentMode::AutoNoVsync
                    } else {
                        PresentMode::AutoVsync
                    },
                    ..Default::default()
                }),
                ..Default::default()
            })
            .set(ImagePlugin::default_nearest())
            // Thoughts are polled on the compute pool; Bevy's default gives it one thread on a
            // 2-core machine.
            .set(crate::headless::simulation_task_pools()),
    )
    .insert_resource(ClearColor(Color::srgb(0.12, 0.16, 0.12)))
    .init_resource::<SimFrameTime>()
    .init_resource::<FrameReport>()
    .add_systems(Update, run_timed_sim)
    .add_systems(Last, super::frame_report::end_frame);
    app
}

/// egui, the render plugins, and the start-up options every window has.
fn add_game_ui(app: &mut App, follow: Option<&str>, screenshot: Option<&ScreenshotRequest>) {
    app.add_plugins(EguiPlugin::default())
        .add_plugins(GameRenderPlugins);
    if let Some(name) = follow {
        app.insert_resource(FollowAtStart(name.to_lowercase()))
            .add_systems(Update, follow_at_start);
    }
    if let Some(request) = screenshot {
        app.insert_resource(ScreenshotRequest {
            frames: request.frames.max(1),
            ..request.clone()
        })
        .init_resource::<ScreenshotProgress>()
        .add_systems(Last, drive_screenshot);
    }
}

/// The town the game starts with.
enum Town {
    /// Fresh personas from their sheets (`crowd`: renamed copies spread over their homes).
    Fresh {
        sheets: Vec<crate::persona::PersonaSheet>,
        crowd: bool,
    },
    /// A decoded and checked save.
    Saved(Box<SaveData>),
}

/// Builds the windowed app. Does not run it. With [`GameOptions::load`], a save that cannot
/// be read or does not fit its map or the model fails here, before any window exists.
pub fn build_game_app(options: &GameOptions) -> Result<App, GameError> {
    // Edited prompts (`options.llm.prompts`) are checked before anything else is done.
    let prompts =
        PromptLibrary::load(options.llm.prompts.as_deref()).map_err(HeadlessError::from)?;
    let (town, map, client, seed) = match &options.load {
        Some(dir) => {
            recover_interrupted_save(dir)?;
            let data = decode_with(dir, options.integrity)?;
            crate::persist::note_prompt_change(data.meta.prompts.as_ref(), &prompts);
            let map_path = options.map.clone().unwrap_or_else(|| data.meta.map_path());
            let map = TownMap::load_tmx(&map_path).map_err(PersistError::from)?;
            // The offline town script follows the save's seed, as a headless resume does.
            let client = if options.llm.resolved_backend() == BackendChoice::Scripted {
                crate::llm::town_script_client(data.meta.seed)
            } else {
                build_client(&options.llm).map_err(HeadlessError::from)?
            };
            check_save(&data, &map, Some(&client))?;
            let seed = data.meta.seed;
            (Town::Saved(Box::new(data)), map, client, seed)
        }
        None => {
            let map_path = options
                .map
                .clone()
                .unwrap_or_else(TownMap::default_town_path);
            let map = TownMap::load_tmx(&map_path).map_err(HeadlessError::from)?;
            let mut sheets = load_persona_sheets(
                options
                    .personas_dir
                    .clone()
                    .unwrap_or_else(default_personas_dir),
            )
            .map_err(HeadlessError::from)?;
            // More personas than the default sheets: a crowd of renamed copies, spread over
            // their homes.
            let mut crowd = false;
            if let Some(n) = options.personas {
                if n == 0 {
                    return Err(
                        HeadlessError::Invalid("--personas must be at least 1".into()).into(),
                    );
                }
                if n > sheets.len() && options.personas_dir.is_none() {
                    sheets = synthetic_sheets(n).map_err(HeadlessError::from)?;
                    crowd = true;
                }
                sheets.truncate(n);
            }
            let client = build_client(&options.llm).map_err(HeadlessError::from)?;
            (Town::Fresh { sheets, crowd }, map, client, options.seed)
        }
    };

    let mut app = window_app(
        format!("Smallville — {}", map.world_name()),
        options.screenshot.is_some(),
    );
    let start = SimClock::default_start().date().and_time(options.start);
    app.insert_resource(client)
        .insert_resource(prompts)
        .insert_resource(
            SimClock::new(start, SimClock::default().sec_per_step())
                .with_mode(TimeMode::Realtime)
                .with_speed(options.speed),
        )
        .insert_resource(SimSeed(seed))
        .add_plugins(super::NightFastForwardPlugin)
        .insert_resource(super::NightFastForward {
            enabled: options.fast_forward_nights,
            ..Default::default()
        })
        .add_plugins(
            crate::GenerativeAgentsPlugins
                .set(LlmPlugin::with_config(options.llm.clone()))
                // The clock drives the sim from a schedule of our own, so its CPU time can be
                // measured per frame (shown in the HUD, logged in screenshot mode).
                .set(ClockPlugin::in_schedule(GameSim)),
        )
        .add_plugins(QuickSavePlugin::new(options.save_dir.clone()))
        // Someone is watching: dialogue bubbles type each line as the model speaks it.
        .insert_resource(ChatStreamSettings::watching());
    add_game_ui(
        &mut app,
        options.follow.as_deref(),
        options.screenshot.as_ref(),
    );

    match town {
        Town::Saved(data) => {
            app.insert_resource(map);
            apply_save(app.world_mut(), *data)?;
            // The save keeps the speed asked for; the window always runs in real time.
            app.world_mut().resource_mut::<SimClock>().mode = TimeMode::Realtime;
        }
        Town::Fresh { sheets, crowd } => {
            let settings = app
                .world()
                .get_resource::<AgentSettings>()
                .cloned()
                .unwrap_or_default();
            let clock = app.world().resource::<SimClock>().clone();
            if crowd {
                spawn_crowd(&mut app, map, &sheets, options.seed).map_err(|err| match err {
                    TownSetupError::Map(e) => HeadlessError::from(e),
                    TownSetupError::Persona(e) => HeadlessError::from(e),
                })?;
            } else {
                let world = app.world_mut();
                let mut queue = bevy::ecs::world::CommandQueue::default();
                let mut commands = Commands::new(&mut queue, world);
                for sheet in &sheets {
                    spawn_persona(&mut commands, sheet, &map, &settings, &clock, options.seed)
                        .map_err(HeadlessError::from)?;
                }
                queue.apply(world);
                app.insert_resource(map);
            }
        }
    }
    if options.lean {
        crate::headless::make_lean(&mut app);
    }
    if let Some(path) = &options.stage {
        let world = app.world_mut();
        let mut query = world.query_filtered::<(Entity, &Name), With<crate::persona::Persona>>();
        let town: Vec<(String, Entity)> = query
            .iter(world)
            .map(|(e, n)| (n.as_str().to_owned(), e))
            .collect();
        let scene = crate::stage::load_scene(path, &town).map_err(GameError::Stage)?;
        app.insert_resource(super::StagePanel {
            open: true,
            auto: true,
        });
        app.world_mut()
            .write_message(crate::stage::StageCommand::Open { scene });
    }
    if let Some(text) = &options.directive {
        app.insert_resource(super::DirectorPanel {
            open: true,
            ..Default::default()
        });
        app.world_mut()
            .write_message(crate::director::DirectorCommand::directive(
                text.clone(),
                crate::director::ConfirmationPolicy::BeforeExecute,
            ));
    }
    Ok(app)
}

/// Builds the window that plays the run folder's movement log (see [`crate::render`]):
/// the log is validated first (as `smallville replay --check` does), so a bad log fails here,
/// naming the file and the line, before any window exists.
pub fn build_replay_app(options: &ReplayOptions) -> Result<App, GameError> {
    let checked = load_replay_with(&options.dir, options.map.as_deref(), options.integrity)?;
    let playback = ReplayPlayback::new(&options.dir, checked.log, checked.sec_per_step)?;
    let mut app = window_app(
        format!(
            "Smallville replay — {} ({})",
            checked.map.world_name(),
            options.dir.display()
        ),
        options.screenshot.is_some(),
    );
    app.insert_resource(
        SimClock::default()
            .with_mode(TimeMode::Realtime)
            .with_speed(options.speed),
    )
    .add_plugins((ClockPlugin::in_schedule(GameSim), ReplayPlugin))
    .insert_resource(playback)
    .insert_resource(checked.map);
    add_game_ui(
        &mut app,
        options.follow.as_deref(),
        options.screenshot.as_ref(),
    );
    Ok(app)
}

/// Runs an app built here until its window closes (or the screenshot is written).
///
/// The LLM backend is shut down again once the runner returns (idempotent; `LlmPlugin` has
/// normally done it in the exit frame): nothing may still decode on the embedded model's
/// thread when `main` returns, or llama.cpp's static destructors crash the process.
fn run_app(mut app: App) -> Result<(), GameError> {
    let client = app.world().get_resource::<crate::llm::LlmClient>().cloned();
    let exit = app.run();
    if let Some(client) = client {
        client.shut_down();
    }
    match exit {
        AppExit::Success => Ok(()),
        AppExit::Error(code) => Err(GameError::Exit(code.get())),
    }
}

/// Opens the window and runs the game until it is closed (or the screenshot is written).
pub fn run_game(options: &GameOptions) -> Result<(), GameError> {
    run_app(build_game_app(options)?)
}

/// Opens the window and plays the replay until it is closed (or the screenshot is written).
pub fn run_replay(options: &ReplayOptions) -> Result<(), GameError> {
    run_app(build_replay_app(options)?)
}

/// The schedule the game's clock driver runs in, from [`Update`], timed by [`SimFrameTime`].
#[derive(ScheduleLabel, Debug, Clone, PartialEq, Eq, Hash)]
pub struct GameSim;

/// CPU time the simulation (clock driver, polls and every sim step) took per frame.
#[derive(Resource, Debug, Clone, Copy, Default, PartialEq)]
pub struct SimFrameTime {
    /// The last frame's, in milliseconds.
    pub last_ms: f64,
    /// Smoothed over about a second of frames.
    pub mean_ms: f64,
    /// The most any frame took.
    pub max_ms: f64,
    /// Sum over all frames, in milliseconds.
    pub total_ms: f64,
    /// Frames measured.
    pub frames: u64,
}

impl SimFrameTime {
    /// Records one frame's sim time.
    pub fn record(&mut self, ms: f64) {
        self.last_ms = ms;
        self.mean_ms = if self.frames == 0 {
            ms
        } else {
            self.mean_ms + (ms - self.mean_ms) * 0.1
        };
        self.max_ms = self.max_ms.max(ms);
        self.total_ms += ms;
        self.frames += 1;
    }

    /// The mean over every frame measured.
    pub(crate) fn overall_mean_ms(&self) -> f64 {
        if self.frames == 0 {
            0.0
        } else {
            self.total_ms / self.frames as f64
        }
    }
}

fn run_timed_sim(world: &mut World) {
    let start = Instant::now();
    world.run_schedule(GameSim);
    let ms = start.elapsed().as_secs_f64() * 1e3;
    world.resource_mut::<SimFrameTime>().record(ms);
    if let Some(mut report) = world.get_resource_mut::<FrameReport>() {
        report.record_sim(ms);
    }
}

/// The persona to select once the personas exist (lower-case name prefix).
#[derive(Resource, Debug, Clone)]
struct FollowAtStart(String);

fn follow_at_start(
    mut commands: Commands,
    wanted: Option<Res<FollowAtStart>>,
    personas: Query<(Entity, &Name), With<crate::persona::Persona>>,
    mut selected: ResMut<super::sprites::Selected>,
) {
    let Some(wanted) = wanted else {
        return;
    };
    let mut matches: Vec<(&str, Entity)> = personas
        .iter()
        .filter(|(_, n)| n.as_str().to_lowercase().starts_with(&wanted.0))
        .map(|(e, n)| (n.as_str(), e))
        .collect();
    if personas.is_empty() {
        return;
    }
    matches.sort();
    match matches.first() {
        Some((_, entity)) => {
            selected.entity = Some(*entity);
            selected.follow = true;
        }
        None => warn!("--follow {:?}: no persona has that name", wanted.0),
    }
    commands.remove_resource::<FollowAtStart>();
}

/// Where screenshot mode stands.
#[derive(Resource, Debug, Default)]
struct ScreenshotProgress {
    frames: u32,
    started: Option<Instant>,
    requested_at: Option<u32>,
    captured: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

/// Frames to wait for the capture before giving up.
const CAPTURE_TIMEOUT_FRAMES: u32 = 600;

/// What a screenshot's state reads beside the clock and the personas.
#[derive(bevy::ecs::system::SystemParam)]
struct ShotExtras<'w> {
    director: Option<Res<'w, crate::director::Director>>,
    panel: Option<Res<'w, super::DirectorPanel>>,
    streams: Option<Res<'w, crate::group::GroupStreams>>,
    speech: Option<Res<'w, super::bubbles::GroupSpeech>>,
    stages: Option<Res<'w, crate::stage::Stages>>,
    stage_panel: Option<Res<'w, super::StagePanel>>,
    frames: Option<Res<'w, FrameReport>>,
}

/// The dialogue bubbles on screen, for a screenshot's state.
#[derive(bevy::ecs::system::SystemParam)]
struct ShownBubbles<'w, 's> {
    bubbles: Query<
        'w,
        's,
        (&'static ChildOf, &'static Visibility, &'static Children),
        With<super::bubbles::ChatBubble>,
    >,
    lines: Query<'w, 's, &'static super::bubbles::ChatLine>,
    names: Query<'w, 's, &'static Name>,
}

impl ShownBubbles<'_, '_> {
    /// "Name: text" of every dialogue bubble shown, sorted.
    fn shown(&self) -> Vec<String> {
        let mut shown: Vec<String> = self
            .bubbles
            .iter()
            .filter(|(_, visibility, _)| **visibility != Visibility::Hidden)
            .filter_map(|(parent, _, children)| {
                let name = self.names.get(parent.parent()).ok()?;
                let line = children.iter().find_map(|c| self.lines.get(c).ok())?;
                (!line.0.is_empty()).then(|| format!("{name}: {}", line.0))
            })
            .collect();
        shown.sort();
        shown
    }
}

#[expect(clippy::too_many_arguments, reason = "a system's parameters")]
fn drive_screenshot(
    mut commands: Commands,
    request: Res<ScreenshotRequest>,
    mut progress: ResMut<ScreenshotProgress>,
    (clock, sim_time): (Res<SimClock>, Res<SimFrameTime>),
    personas: Query<(&Name, &ActionView, &crate::persona::Body), With<crate::persona::Persona>>,
    mut exit: MessageWriter<AppExit>,
    extras: ShotExtras,
    bubbles: ShownBubbles,
) {
    let ShotExtras {
        director,
        panel,
        streams,
        speech,
        stages,
        stage_panel,
        frames: frame_report,
    } = extras;
    progress.frames += 1;
    let started = *progress.started.get_or_insert_with(Instant::now);
    let frames = progress.frames;
    let due = request.capture_due(frames, started.elapsed(), || {
        personas
            .iter()
            .any(|(_, view, _)| out_of_bed(&view.description))
    });
    if due && progress.requested_at.is_none() {
        if let Some(dir) = request.path.parent()
            && !dir.as_os_str().is_empty()
            && let Err(err) = std::fs::create_dir_all(dir)
        {
            error!("cannot create {}: {err}", dir.display());
            exit.write(AppExit::error());
            return;
        }
        let flag = progress.captured.clone();
        commands
            .spawn(Screenshot::primary_window())
            .observe(save_to_disk(request.path.clone()))
            .observe(move |_: On<ScreenshotCaptured>| {
                flag.store(true, std::sync::atomic::Ordering::SeqCst);
            });
        progress.requested_at = Some(frames);
        let mut state = screenshot_state(&clock, &personas);
        state.director = director
            .as_deref()
            .and_then(crate::director::Director::latest)
            .map(|job| DirectorShot {
                panel_open: panel.as_deref().is_some_and(|p| p.open),
                state: format!("{:?}", job.state),
                checklist: super::checklist(job)
                    .into_iter()
                    .map(|l| format!("{} {}", l.mark, l.text))
                    .collect(),
            });
        if let Some(streams) = streams.as_deref() {
            state.groups = group_shots(streams, &personas);
        }
        if let Some(stages) = stages.as_deref() {
            state.stages = stages
                .iter()
                .map(|scene| StageShot {
                    name: scene.name.clone(),
                    turn: scene.turn,
                    panel_open: stage_panel.as_deref().is_some_and(|p| p.open),
                    actors: scene
                        .actors
                        .iter()
                        .map(|a| super::actor_card(a).title)
                        .collect(),
                    fallen: scene.fallen.iter().map(|(a, _)| a.name.clone()).collect(),
                    narration: scene.narration.last().cloned().unwrap_or_default(),
                })
                .collect();
        }
        if let Some(speech) = speech.as_deref() {
            state.group_bubbles = speech.shown(|e| personas.get(e).ok().map(|(n, ..)| n.as_str()));
        }
        state.chat_bubbles = bubbles.shown();
        state.frame_report = frame_report.as_deref().map(FrameReport::summary);
        let state_path = request.path.with_extension("json");
        if let Err(err) = write_screenshot_state(&state_path, &state) {
            error!("cannot write {}: {err}", state_path.display());
            exit.write(AppExit::error());
            return;
        }
        let secs = started.elapsed().as_secs_f64();
        info!(
            "screenshot mode: {frames} frames in {secs:.1} s ({:.1} fps); {} personas, sim CPU \
             {:.2} ms/frame on average (max {:.1} ms); sim at step {} ({})",
            frames as f64 / secs.max(1e-9),
            personas.iter().count(),
            sim_time.overall_mean_ms(),
            sim_time.max_ms,
            clock.step(),
            clock.now().format("%H:%M")
        );
        if let Some(summary) = state.frame_report {
            info!(
                "frame report: {} frames after {} of warm-up; sim CPU p50 {:.2} / p99 {:.2} / max \
                 {:.2} ms; frame p50 {:.1} / p99 {:.1} / max {:.1} ms; {} frames over {} ms",
                summary.frames,
                summary.warm_up_frames,
                summary.sim_ms.p50,
                summary.sim_ms.p99,
                summary.sim_ms.max,
                summary.frame_ms.p50,
                summary.frame_ms.p99,
                summary.frame_ms.max,
                summary.long_frames,
                FrameReport::LONG_FRAME_MS,
            );
        }
        return;
    }
    let Some(at) = progress.requested_at else {
        return;
    };
    if progress.captured.load(std::sync::atomic::Ordering::SeqCst) {
        // `save_to_disk` runs before our observer and logs (not returns) its errors: check the
        // file it should have written.
        match std::fs::metadata(&request.path) {
            Ok(meta) if meta.len() > 0 => {
                info!("screenshot written to {}", request.path.display());
                exit.write(AppExit::Success);
            }
            _ => {
                error!(
                    "screenshot was captured but {} was not written",
                    request.path.display()
                );
                exit.write(AppExit::error());
            }
        }
    } else if frames > at + CAPTURE_TIMEOUT_FRAMES {
        error!("screenshot not captured after {CAPTURE_TIMEOUT_FRAMES} frames");
        exit.write(AppExit::error());
    }
}

/// What the town was doing when a screenshot was taken, written beside the PNG (same name,
/// `.json`) so a test can check what the picture shows.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ScreenshotState {
    /// The sim clock, `YYYY-MM-DD HH:MM`.
    pub time: String,
    /// The sim step.
    pub step: u64,
    /// Every persona, by name.
    pub personas: Vec<PersonaShot>,
    /// The director's latest job, if any.
    #[serde(default)]
    pub director: Option<DirectorShot>,
    /// The open group conversations.
    #[serde(default)]
    pub groups: Vec<GroupShot>,
    /// Group lines in speakers' bubbles at the capture, "Name: text as typed so far".
    #[serde(default)]
    pub group_bubbles: Vec<String>,
    /// Every dialogue bubble shown at the capture, "Name: text as shown" (pair chats, group
    /// lines, a replay's recorded lines), sorted.
    #[serde(default)]
    pub chat_bubbles: Vec<String>,
    /// The stage scenes playing.
    #[serde(default)]
    pub stages: Vec<StageShot>,
    /// What the frames cost up to the capture ([`FrameReport`]).
    #[serde(default)]
    pub frame_report: Option<FrameSummary>,
}

/// A stage scene in a [`ScreenshotState`]: what its panel shows.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct StageShot {
    /// The stage.
    pub name: String,
    /// Turns played.
    pub turn: u32,
    /// Whether the panel is open.
    pub panel_open: bool,
    /// The actors still standing, as their cards title them (🙈 before a hidden one).
    pub actors: Vec<String>,
    /// Those who fell.
    pub fallen: Vec<String>,
    /// The last turn's narration.
    pub narration: String,
}

/// One group conversation in a [`ScreenshotState`].
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct GroupShot {
    /// The stream (an arena's address, or `#channel`).
    pub stream: String,
    /// Its members, by name.
    pub members: Vec<String>,
    /// Lines said in it so far.
    pub said: u64,
    /// Its latest lines (at most five), "Speaker: text".
    pub latest: Vec<String>,
}

fn group_shots(
    streams: &crate::group::GroupStreams,
    personas: &Query<(&Name, &ActionView, &crate::persona::Body), With<crate::persona::Persona>>,
) -> Vec<GroupShot> {
    streams
        .iter()
        .map(|stream| {
            let mut members: Vec<String> = stream
                .members
                .iter()
                .filter_map(|e| personas.get(*e).ok())
                .map(|(name, ..)| name.as_str().to_owned())
                .collect();
            members.sort();
            let skip = stream.lines.len().saturating_sub(5);
            GroupShot {
                stream: stream.key.to_string(),
                members,
                said: stream.said,
                latest: stream
                    .lines
                    .iter()
                    .skip(skip)
                    .map(|l| format!("{}: {}", l.speaker, l.text))
                    .collect(),
            }
        })
        .collect()
}

/// The director in a [`ScreenshotState`]: what its panel shows.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct DirectorShot {
    /// Whether the panel is open.
    pub panel_open: bool,
    /// The executor's state.
    pub state: String,
    /// The checklist's lines (mark and text).
    pub checklist: Vec<String>,
}

/// One persona in a [`ScreenshotState`].
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct PersonaShot {
    /// The persona's name.
    pub name: String,
    /// What it is doing.
    pub action: String,
    /// Whether that is sleeping.
    pub sleeping: bool,
    /// Whether the persona is up: it has an action (its first plan has landed) and the action
    /// is not sleeping.
    pub out_of_bed: bool,
    /// Its tile.
    pub tile: (i32, i32),
}

/// Whether a persona doing `action` is up: it has an action (its first plan has landed) and
/// the action is not sleeping.
fn out_of_bed(action: &str) -> bool {
    !action.trim().is_empty() && !crate::persona::is_sleep_text(action)
}

fn screenshot_state(
    clock: &SimClock,
    personas: &Query<(&Name, &ActionView, &crate::persona::Body), With<crate::persona::Persona>>,
) -> ScreenshotState {
    let mut list: Vec<PersonaShot> = personas
        .iter()
        .map(|(name, view, body)| PersonaShot {
            name: name.as_str().to_owned(),
            action: view.description.clone(),
            sleeping: crate::persona::is_sleep_text(&view.description),
            out_of_bed: out_of_bed(&view.description),
            tile: (body.tile.x, body.tile.y),
        })
        .collect();
    list.sort_by(|a, b| a.name.cmp(&b.name));
    ScreenshotState {
        time: clock.now().format("%Y-%m-%d %H:%M").to_string(),
        step: clock.step(),
        personas: list,
        director: None,
        groups: Vec::new(),
        group_bubbles: Vec::new(),
        chat_bubbles: Vec::new(),
        stages: Vec::new(),
        frame_report: None,
    }
}

fn write_screenshot_state(path: &std::path::Path, state: &ScreenshotState) -> std::io::Result<()> {
    let text = serde_json::to_string_pretty(state).map_err(std::io::Error::other)?;
    std::fs::write(path, text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sim_frame_time_statistics() {
        let mut t = SimFrameTime::default();
        assert_eq!(t.overall_mean_ms(), 0.0);
        t.record(2.0);
        assert_eq!(t.mean_ms, 2.0);
        t.record(12.0);
        assert_eq!(t.last_ms, 12.0);
        assert!(
            (t.mean_ms - 3.0).abs() < 1e-9,
            "smoothed: 2 + (12 - 2) * 0.1"
        );
        assert_eq!(t.max_ms, 12.0);
        assert_eq!(t.overall_mean_ms(), 7.0);
    }

    #[test]
    fn a_screenshot_once_up_is_due_when_someone_is_up_or_the_wait_runs_out() {
        use std::time::Duration;
        let request = |after: Option<u64>, once_up| ScreenshotRequest {
            path: PathBuf::from("shot.png"),
            frames: 10,
            after: after.map(Duration::from_secs),
            once_up,
        };
        let at = Duration::from_secs;
        let up = || true;
        let asleep = || false;
        // Never before the frames are drawn, up or not.
        assert!(!request(Some(900), true).capture_due(9, at(1000), up));
        // Up early: due at once; nobody up: due only when the wait runs out.
        assert!(request(Some(900), true).capture_due(10, at(60), up));
        assert!(!request(Some(900), true).capture_due(10, at(899), asleep));
        assert!(request(Some(900), true).capture_due(10, at(900), asleep));
        // Without `once_up` the wait is waited out whoever is up.
        assert!(!request(Some(900), false).capture_due(10, at(60), up));
        assert!(request(Some(900), false).capture_due(10, at(900), asleep));
        // No wait: due when the frames are drawn.
        assert!(request(None, false).capture_due(10, at(0), asleep));
        assert!(request(None, true).capture_due(10, at(0), asleep));
    }

    #[test]
    fn the_out_of_bed_rule() {
        assert!(out_of_bed("making breakfast"));
        assert!(!out_of_bed("sleeping"));
        assert!(!out_of_bed("   "));
        assert!(!out_of_bed(""));
    }

    #[test]
    fn speeds_parse() {
        assert_eq!(parse_speed("1"), Ok(SimSpeed::X1));
        assert_eq!(parse_speed("32x"), Ok(SimSpeed::X32));
        assert_eq!(parse_speed("MAX"), Ok(SimSpeed::Max));
        assert_eq!(parse_speed("paused"), Ok(SimSpeed::Paused));
        assert!(parse_speed("3").is_err());
        assert!(parse_speed("").is_err());
    }
}
