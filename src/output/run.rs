//! `smallville run`: simulate N game hours headless and write the run's files.
//!
//! [`run`] builds the same app as the headless demo (`build_headless_app`: the town, its
//! personas, the agent plugins, the chosen LLM backend), puts the clock in the requested
//! [`TimeMode`] at maximum speed, records the [`MovementLog`] at the end of every step and
//! updates the app until `hours × 360` steps have run. In Lockstep a step waits for every
//! persona's thought, so the run goes exactly as fast as cognition lands; in Realtime it never
//! waits. Then it lets thoughts still in flight land (so each mind is home to be summarised)
//! and writes `summary.json` and `usage.json` atomically into the output folder. The movement
//! log is written as the run goes and synced, with `usage.json`, before every save and every
//! few seconds, so a crash leaves both readable; `--from` continues the folder's log and adds
//! to its usage. A save that fails stops the run but never costs its other files. A
//! [`RunProgress`] watcher, when given, hears of every step (the `smallville` binary draws a
//! progress bar with it).
//!
//! While every persona waits on the model the loop **parks** on the client's answer bell
//! (`LlmClient::wait_for_answer`) instead of updating the app in a tight loop: it wakes when
//! a call ends, or after a short, growing timeout, so a run waiting on a slow model costs
//! almost no CPU.
//!
//! The prompt overrides of `options.llm.prompts` are loaded and checked first, before the
//! backend starts or the output folder is created; `usage.json` records the prompts asked
//! ([`UsageFile`]).
//!
//! The backend is `options.llm.backend` — one source of truth, which the CLI's `--backend`
//! and `--llm-backend` both set.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bevy::prelude::*;

use super::movement::{MovementLog, MovementLogError, PersonaFrame, record_movement};
use super::record::RunRecord;
use super::replay::RUN_SAVE_DIR;
use super::report::{REPORT_HTML, write_report};
use super::summary::{RunMetadata, RunSummary, summarise_personas};
use super::write_atomic;
use crate::clock::{AgentSystems, AwaitingCognition, SimClock, SimSpeed, SimStep, TimeMode};
use crate::headless::{DemoOptions, HeadlessError, build_headless_app};
use crate::llm::{BackendChoice, LlmClient, LlmConfig, UsageReport};
use crate::persist::{
    CacheMode, PersistError, SaveIntegrity, SimSeed, build_app_from_save_with,
    client_with_cache_mode, save_world,
};
use crate::persona::{ActionView, Body, Persona};
use crate::prompt::{PromptLibrary, PromptProvenance};
use crate::world::TownMap;
use chrono::NaiveDateTime;

/// The movement log's file name in the output folder.
pub(crate) const MOVEMENT_FILE: &str = "movement.jsonl";
/// The summary's file name in the output folder.
pub(crate) const SUMMARY_FILE: &str = "summary.json";
/// The LLM accounting's file name in the output folder.
pub(crate) const USAGE_FILE: &str = "usage.json";

/// `usage.json`: the LLM accounting ([`UsageReport`]'s fields at the top level) and the
/// prompts that were asked.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct UsageFile {
    /// The accounting.
    #[serde(flatten)]
    pub usage: UsageReport,
    /// The prompt library's version and override files (absent in older run folders).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompts: Option<PromptProvenance>,
}

/// The longest run accepted, in game hours (a year).
pub const MAX_HOURS: f64 = 24.0 * 365.0;

/// A run that takes no step for this long (real time) has stalled — longer than any model call
/// with its retries should take — and is stopped with [`RunError::Stalled`].
const MIN_STALL_TIMEOUT: Duration = Duration::from_secs(600);

/// The pause between frames at a fixed speed (about 60 frames a second).
const FIXED_SPEED_FRAME: Duration = Duration::from_millis(16);

/// The longest a waiting run sleeps before looking at the app again (the first sleep is
/// [`PARK_MIN`], doubling while nothing happens): a call that ends wakes it sooner.
const PARK_MAX: Duration = Duration::from_millis(250);
/// The first sleep of a waiting run.
const PARK_MIN: Duration = Duration::from_micros(200);

/// Watches a run as it goes. Every method has an empty default; the `smallville` binary draws
/// a progress bar with it.
pub trait RunProgress: Send + Sync {
    /// The run is about to take `total` steps.
    fn started(&self, _total: u64) {}
    /// `done` steps are taken and the game time is `now`; `client` has the model accounting.
    /// Called every frame: keep it cheap (read the accounting only now and then).
    fn stepped(&self, _done: u64, _now: NaiveDateTime, _client: &LlmClient) {}
    /// What the run is doing now, when it is not stepping (e.g. waiting for the last thoughts).
    fn note(&self, _text: &str) {}
    /// The run stopped stepping (finished or failed).
    fn finished(&self) {}
}

/// A shared [`RunProgress`] in [`RunOptions`].
#[derive(Clone)]
pub struct ProgressWatcher(pub Arc<dyn RunProgress>);

impl std::fmt::Debug for ProgressWatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ProgressWatcher")
    }
}

/// How often (real time) the movement log is synced and `usage.json` rewritten, besides at
/// every save.
const CHECKPOINT_EVERY: Duration = Duration::from_secs(5);

/// What to run.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Game hours to simulate (360 steps each).
    pub hours: f64,
    /// Spawn only the first N personas (all by default).
    pub personas: Option<usize>,
    /// Seed of every random choice.
    pub seed: u64,
    /// Tiled map (the default town when `None`).
    pub map: Option<PathBuf>,
    /// Persona folder (the default personas when `None`).
    pub personas_dir: Option<PathBuf>,
    /// Lockstep (wait for every thought; deterministic) or realtime (never wait).
    pub time_mode: TimeMode,
    /// How fast game time runs; `None`: as fast as possible in Lockstep, 1× in Realtime.
    pub speed: Option<SimSpeed>,
    /// The output folder (created when missing).
    pub out: PathBuf,
    /// The model configuration; `llm.backend` chooses the backend.
    pub llm: LlmConfig,
    /// Told of every step (`None`: nobody watches).
    pub progress: Option<ProgressWatcher>,
    /// Install Bevy's log subscriber (the CLI does; tests don't).
    pub log: bool,
    /// Resume from this save instead of spawning a fresh town (its map, personas, clock and
    /// seed are used; `personas`, `personas_dir` and `seed` are ignored).
    pub from: Option<PathBuf>,
    /// Also save into `out/save` every this many steps (at the first frame boundary after).
    pub save_every: Option<u64>,
    /// Record every model answer to a file, or answer only from a recording.
    pub cache: CacheMode,
    /// Write `report.html`, `report.json` and the charts at the end.
    pub report: bool,
    /// Check the `--from` save against its manifest, or load it even if edited by hand.
    pub integrity: SaveIntegrity,
    /// When a fresh town's clock starts (`None`: [`SimClock::default_start`], as in
    /// Smallville). A resumed run keeps its save's clock.
    pub start: Option<NaiveDateTime>,
    /// Called on the built app before anything is written (a scenario adds its systems here);
    /// an error stops the run with nothing on disk.
    pub setup: Option<RunSetup>,
    /// Lean mode (see [`make_lean`](crate::headless::make_lean)): fewer model calls per
    /// agent-day; `summary.json` says `"lean": true`. Off: faithful.
    pub lean: bool,
}

/// What a [`RunSetup`] calls: adds to the app, or says why the run cannot start.
pub(crate) type RunSetupFn = dyn Fn(&mut App) -> Result<(), String> + Send + Sync;

/// A hook that adds to a run's app before it starts: see [`RunOptions::setup`].
#[derive(Clone)]
pub struct RunSetup(pub Arc<RunSetupFn>);

impl std::fmt::Debug for RunSetup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RunSetup")
    }
}

impl RunOptions {
    /// `hours` of the default town into `out`: all personas, seed 1, Lockstep, the default LLM
    /// configuration, no progress bar, no log subscriber.
    pub fn new(hours: f64, out: impl Into<PathBuf>) -> Self {
        Self {
            hours,
            personas: None,
            seed: 1,
            map: None,
            personas_dir: None,
            time_mode: TimeMode::Lockstep,
            speed: None,
            out: out.into(),
            llm: LlmConfig::default(),
            progress: None,
            log: false,
            from: None,
            save_every: None,
            cache: CacheMode::Off,
            report: true,
            integrity: SaveIntegrity::Verify,
            start: None,
            setup: None,
            lean: false,
        }
    }

    /// Resumes from the save in `dir` (builder style).
    pub fn resuming(mut self, dir: impl Into<PathBuf>) -> Self {
        self.from = Some(dir.into());
        self
    }

    /// Records or replays model answers (builder style).
    pub fn with_cache(mut self, cache: CacheMode) -> Self {
        self.cache = cache;
        self
    }

    /// Chooses the backend (builder style).
    pub fn with_backend(mut self, backend: BackendChoice) -> Self {
        self.llm.backend = backend;
        self
    }

    /// Spawns only the first `n` personas (builder style).
    pub fn with_personas(mut self, n: usize) -> Self {
        self.personas = Some(n);
        self
    }

    /// Sets the seed (builder style).
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// The number of steps `hours` makes at `sec_per_step`, or why it is out of range.
    pub fn total_steps(&self, sec_per_step: u32) -> Result<u64, RunError> {
        if !(self.hours.is_finite() && self.hours > 0.0 && self.hours <= MAX_HOURS) {
            return Err(RunError::Invalid(format!(
                "--hours must be in (0, {MAX_HOURS}], got {}",
                self.hours
            )));
        }
        let per_hour = 3600.0 / f64::from(sec_per_step.max(1));
        let steps = (self.hours * per_hour).round();
        if steps < 1.0 {
            return Err(RunError::Invalid(format!(
                "--hours {} is less than one step",
                self.hours
            )));
        }
        Ok(steps as u64)
    }
}

/// Parses `--backend`: `scripted`, `http` or `local` (`auto` is the default when the flag is
/// left out, so it is not offered).
pub fn parse_run_backend(text: &str) -> Result<BackendChoice, String> {
    match text.parse::<BackendChoice>()? {
        BackendChoice::Auto => Err("expected scripted, http or local".into()),
        choice => Ok(choice),
    }
}

/// Parses `--speed`: `1`–`32` (with or without an `x`) or `max`. Paused is refused: the run
/// would never end.
pub fn parse_run_speed(text: &str) -> Result<SimSpeed, String> {
    let text = text.trim().to_ascii_lowercase();
    if text == "max" {
        return Ok(SimSpeed::Max);
    }
    match text.strip_suffix('x').unwrap_or(&text) {
        "1" => Ok(SimSpeed::X1),
        "2" => Ok(SimSpeed::X2),
        "4" => Ok(SimSpeed::X4),
        "8" => Ok(SimSpeed::X8),
        "16" => Ok(SimSpeed::X16),
        "32" => Ok(SimSpeed::X32),
        _ => Err(format!(
            "unknown speed {text:?}: expected 1, 2, 4, 8, 16, 32 or max"
        )),
    }
}

impl RunOptions {
    /// The speed the run uses: the chosen one, else max in Lockstep (a step waits for its
    /// thoughts anyway) and 1× in Realtime (where "max" would outrun every thought).
    pub fn effective_speed(&self) -> SimSpeed {
        match (self.speed, self.time_mode) {
            (Some(speed), _) => speed,
            (None, TimeMode::Lockstep) => SimSpeed::Max,
            (None, TimeMode::Realtime) => SimSpeed::X1,
        }
    }
}

/// Parses `--time-mode`: `lockstep` or `realtime`.
pub fn parse_time_mode(text: &str) -> Result<TimeMode, String> {
    match text.trim().to_ascii_lowercase().as_str() {
        "lockstep" => Ok(TimeMode::Lockstep),
        "realtime" => Ok(TimeMode::Realtime),
        other => Err(format!(
            "unknown time mode {other:?}: expected lockstep or realtime"
        )),
    }
}

/// Why a run could not start or finish. IO errors name the file.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// A parameter is out of range.
    #[error("{0}")]
    Invalid(String),
    /// `--backend local` was asked for in a build without the `local-llm` feature.
    #[error(
        "the local backend needs the `local-llm` feature (issue 5): rebuild with \
         `--features local-llm`, or use --backend scripted or --backend http"
    )]
    LocalBackendUnavailable,
    /// The town, the personas or the LLM configuration could not be set up.
    #[error(transparent)]
    Setup(#[from] HeadlessError),
    /// A file or folder could not be created or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// What went wrong.
        #[source]
        source: std::io::Error,
    },
    /// The movement log could not be written.
    #[error(transparent)]
    Movement(#[from] MovementLogError),
    /// A save could not be loaded or written.
    #[error(transparent)]
    Persist(#[from] PersistError),
    /// A report could not be serialised.
    #[error("{}: {source}", path.display())]
    Json {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        #[source]
        source: serde_json::Error,
    },
    /// No step was taken for too long: a model call never came back.
    #[error(
        "the run stalled at step {step}: no step for {} s while waiting for model answers",
        waited.as_secs()
    )]
    Stalled {
        /// The step the clock was at.
        step: u64,
        /// How long it waited.
        waited: Duration,
    },
}

/// What a finished run produced.
#[derive(Debug, Clone)]
pub struct RunReport {
    /// The movement log.
    pub movement_path: PathBuf,
    /// The summary.
    pub summary_path: PathBuf,
    /// The LLM accounting.
    pub usage_path: PathBuf,
    /// Steps taken.
    pub steps: u64,
    /// Real time the simulation took (without writing the reports).
    pub wall: Duration,
    /// Every persona's frame as the ECS held it at the end, after the last thoughts landed
    /// (what a replay of the movement log ends on).
    pub final_frames: BTreeMap<String, PersonaFrame>,
    /// Personas whose thought was still in flight when the run ended (their memory counts are
    /// missing from the summary).
    pub minds_out: usize,
    /// The LLM accounting, as written to `usage.json`.
    pub usage: UsageReport,
    /// The prompts asked, as written to `usage.json`.
    pub prompts: PromptProvenance,
    /// The save written at the end (`out/save`); `None` when minds were still out.
    pub save_path: Option<PathBuf>,
    /// `report.html`, when written.
    pub report_path: Option<PathBuf>,
}

/// `path` as a shareable output records it: relative to the working directory, or to the
/// crate for its bundled assets, or only its file name — never this machine's absolute path.
fn shareable_path(path: &Path) -> PathBuf {
    if path.is_relative() {
        return path.to_path_buf();
    }
    let bases = [
        std::env::current_dir().ok(),
        Some(PathBuf::from(env!("CARGO_MANIFEST_DIR"))),
    ];
    bases
        .iter()
        .flatten()
        .find_map(|base| path.strip_prefix(base).ok().map(Path::to_path_buf))
        .or_else(|| path.file_name().map(PathBuf::from))
        .unwrap_or_default()
}

/// Runs the simulation described by `options` and writes its files. See the [module
/// docs](self).
///
/// The run is told in five steps: `open_run` checks everything and builds the app,
/// `drive_steps` runs the clock to its end (checkpointing and saving on the way),
/// `drain_thoughts` lets the last thoughts land, `final_save` writes the save, and
/// `write_outputs` the summary, `usage.json` and the report.
///
/// Whatever the outcome, the backend is shut down before `run` returns
/// ([`LlmClient::shut_down`]): a thought still out cannot keep the embedded model decoding
/// while the process exits.
pub fn run(options: &RunOptions) -> Result<RunReport, RunError> {
    let mut opened = open_run(options)?;
    let client = opened.app.world().resource::<LlmClient>().clone();
    let result = match drive_steps(&mut opened, options) {
        Ok(driven) => {
            let minds_out = drain_thoughts(&mut opened.app, options, &driven.progress);
            let (save_path, save_error) = final_save(&mut opened, minds_out, driven.save_error);
            write_outputs(
                opened,
                options,
                driven.result,
                minds_out,
                save_path,
                save_error,
            )
        }
        Err(err) => Err(err),
    };
    client.shut_down();
    result
}

/// The files of a run folder.
struct RunFiles {
    movement: PathBuf,
    record: PathBuf,
    summary: PathBuf,
    usage: PathBuf,
    save: PathBuf,
}

/// A run ready to drive: its app, where its files go and what earlier runs left.
struct OpenRun {
    app: App,
    files: RunFiles,
    seed: u64,
    map_path: PathBuf,
    provenance: PromptProvenance,
    /// Spend recorded by earlier runs into this folder (a resumed run adds to it).
    earlier_usage: Option<UsageReport>,
    /// The step of the last save (the start, for a fresh run).
    last_save_step: u64,
}

/// What driving the clock produced.
struct Driven<'a> {
    result: DrivenSteps,
    progress: Watch<'a>,
    /// A save that failed stops the run; its outputs are still written.
    save_error: Option<PersistError>,
}

/// The clock's part of the summary.
struct DrivenSteps {
    first_step: u64,
    start: NaiveDateTime,
    wall: Duration,
}

/// Checks the options, builds the app (fresh or from a save) and creates the run folder with
/// its movement log. Nothing is written before the town, personas, prompts and backend are
/// known to work.
fn open_run(options: &RunOptions) -> Result<OpenRun, RunError> {
    if !cfg!(feature = "local-llm") && options.llm.resolved_backend() == BackendChoice::Local {
        return Err(RunError::LocalBackendUnavailable);
    }
    // Validate the hours before touching the disk (the clock's default step is 10 s).
    options.total_steps(SimClock::default().sec_per_step())?;
    if options.effective_speed() == SimSpeed::Paused {
        return Err(RunError::Invalid("a paused run would never end".into()));
    }
    // Edited prompts are checked before the backend starts or anything is written.
    let prompts =
        PromptLibrary::load(options.llm.prompts.as_deref()).map_err(HeadlessError::from)?;
    let (mut app, seed, map_path) = build_run_app(options)?;
    if options.lean {
        crate::headless::make_lean(&mut app);
    }
    if let Some(setup) = &options.setup {
        (setup.0)(&mut app).map_err(RunError::Invalid)?;
    }
    let provenance = prompts.provenance();
    app.insert_resource(prompts);
    let last_save_step = app.world().resource::<SimClock>().step();
    // The folder is created only once the town, personas and backend are known to work.
    std::fs::create_dir_all(&options.out).map_err(|source| RunError::Io {
        path: options.out.clone(),
        source,
    })?;
    let files = RunFiles {
        movement: options.out.join(MOVEMENT_FILE),
        record: options.out.join(super::record::RECORD_FILE),
        summary: options.out.join(SUMMARY_FILE),
        usage: options.out.join(USAGE_FILE),
        save: options.out.join(RUN_SAVE_DIR),
    };
    // Plugins cannot be added to a finished app; the system is what `MovementLogPlugin` adds.
    app.add_systems(SimStep, record_movement.after(AgentSystems::Last));
    // A resumed run continues the folder's log (cut back to the save's step).
    let log = match &options.from {
        Some(_) => MovementLog::continue_at(&files.movement, last_save_step)?,
        None => MovementLog::create(&files.movement)?,
    };
    app.insert_resource(log);
    // What the seed systems did, beside it (also continued from the save's step).
    app.add_systems(
        Last,
        super::record::record_run.in_set(super::record::RecordSystems),
    );
    let record = match &options.from {
        Some(_) => RunRecord::continue_at(&files.record, last_save_step),
        None => RunRecord::create(&files.record),
    }
    .map_err(|source| RunError::Io {
        path: files.record.clone(),
        source,
    })?;
    app.insert_resource(record);
    let earlier_usage = match &options.from {
        Some(_) => read_usage(&files.usage),
        None => None,
    };
    Ok(OpenRun {
        app,
        files,
        seed,
        map_path,
        provenance,
        earlier_usage,
        last_save_step,
    })
}

/// The app of a run, its seed and its map: a fresh town, or the one a save holds.
fn build_run_app(options: &RunOptions) -> Result<(App, u64, PathBuf), RunError> {
    let client_seed = match &options.from {
        Some(dir) => {
            crate::persist::recover_interrupted_save(dir)?;
            crate::persist::format::read_meta(dir)?.seed
        }
        None => options.seed,
    };
    let client = client_with_cache_mode(&options.llm, &options.cache, client_seed)?;
    if let Some(dir) = &options.from {
        let (app, meta) = build_app_from_save_with(
            dir,
            &options.llm,
            client,
            options.map.as_deref(),
            options.log,
            options.integrity,
        )?;
        let map = options.map.clone().unwrap_or_else(|| meta.map_path());
        return Ok((app, meta.seed, map));
    }
    let demo = DemoOptions {
        hours: options.hours,
        personas: options.personas,
        seed: options.seed,
        map: options.map.clone(),
        personas_dir: options.personas_dir.clone(),
        llm: options.llm.clone(),
        start: options.start,
    };
    let mut app = build_headless_app(&demo, options.log)?;
    if let Some(client) = client {
        app.insert_resource(client);
    }
    app.insert_resource(SimSeed(options.seed));
    let map = options
        .map
        .clone()
        .unwrap_or_else(TownMap::default_town_path);
    Ok((app, options.seed, map))
}

/// Runs the clock until it reaches the last step: checkpoints the log and spend every
/// [`CHECKPOINT_EVERY`], saves every `save_every` steps, and parks while every step waits on
/// the model. A run with no step for the stall timeout ends with [`RunError::Stalled`].
fn drive_steps<'a>(opened: &mut OpenRun, options: &'a RunOptions) -> Result<Driven<'a>, RunError> {
    let app = &mut opened.app;
    let (first_step, start, total) = {
        let mut clock = app.world_mut().resource_mut::<SimClock>();
        clock.mode = options.time_mode;
        clock.speed = options.effective_speed();
        let total = options.total_steps(clock.sec_per_step())?;
        let first = clock.step();
        clock.stop_at_step = Some(first + total);
        (first, clock.now(), total)
    };
    let usage_path = opened.files.usage.clone();
    let speed = options.effective_speed();
    let progress = Watch(options.progress.as_ref());
    progress.started(total);
    let stall_timeout = stall_timeout(&options.llm);
    let began = Instant::now();
    let mut last_step = first_step;
    let mut last_progress = Instant::now();
    let mut park = Park::default();
    let mut last_checkpoint = Instant::now();
    let mut save_error: Option<PersistError> = None;
    loop {
        let (step, now, finished) = {
            let clock = app.world().resource::<SimClock>();
            (clock.step(), clock.now(), clock.finished())
        };
        if step != last_step {
            last_step = step;
            last_progress = Instant::now();
            park.reset();
        } else if last_progress.elapsed() >= stall_timeout {
            progress.finished();
            checkpoint(app, &usage_path, opened.earlier_usage.as_ref())?;
            return Err(RunError::Stalled {
                step,
                waited: last_progress.elapsed(),
            });
        }
        let client = app.world().resource::<LlmClient>().clone();
        progress.stepped(step - first_step, now, &client);
        if finished {
            break;
        }
        app.update();
        if let Some(every) = options.save_every {
            let step = app.world().resource::<SimClock>().step();
            if step >= opened.last_save_step.saturating_add(every) {
                // The log first: a save of step N always has the log's lines before N on disk.
                checkpoint(app, &usage_path, opened.earlier_usage.as_ref())?;
                last_checkpoint = Instant::now();
                match save_world(app.world_mut(), &opened.files.save) {
                    Ok(_) => opened.last_save_step = step,
                    // Thoughts in flight (Realtime): try again at the next frame.
                    Err(PersistError::Busy(_)) => {}
                    Err(err) => {
                        warn!("the save failed, stopping the run (its files are kept): {err}");
                        save_error = Some(err);
                        break;
                    }
                }
            }
        }
        if last_checkpoint.elapsed() >= CHECKPOINT_EVERY {
            checkpoint(app, &usage_path, opened.earlier_usage.as_ref())?;
            last_checkpoint = Instant::now();
        }
        if speed != SimSpeed::Max {
            // A fixed speed owes steps by real time: don't spin between them.
            std::thread::sleep(FIXED_SPEED_FRAME);
        } else if app.world().resource::<SimClock>().step() == step
            && minds_out(app.world_mut()) > 0
        {
            // Every step waits on the model: sleep until a call ends (or a little while).
            park.wait(&client);
        }
    }
    let wall = began.elapsed();
    Ok(Driven {
        result: DrivenSteps {
            first_step,
            start,
            wall,
        },
        progress,
        save_error,
    })
}

/// Lets thoughts still in flight land so every mind is home to be summarised and saved; no
/// step runs, the clock paused itself at `stop_at_step`. A thought may still have several calls
/// to make, so the run waits as long as answers keep coming: it gives up once no call has
/// ended for one call's worth of attempts (`timeout × (retries + 2)`), or after the stall
/// timeout in all. Returns how many minds are still out.
fn drain_thoughts(app: &mut App, options: &RunOptions, progress: &Watch<'_>) -> usize {
    progress.note("waiting for the last thoughts to land");
    let drain_start = Instant::now();
    let client = app.world().resource::<LlmClient>().clone();
    let quiet_limit = options
        .llm
        .timeout
        .saturating_mul(options.llm.max_retries.saturating_add(2));
    let overall_limit = stall_timeout(&options.llm);
    let mut answers = client.answers_so_far();
    let mut quiet_since = Instant::now();
    let mut park = Park::default();
    while minds_out(app.world_mut()) > 0
        && quiet_since.elapsed() < quiet_limit
        && drain_start.elapsed() < overall_limit
    {
        app.update();
        park.wait(&client);
        let now = client.answers_so_far();
        if now != answers {
            answers = now;
            quiet_since = Instant::now();
        }
    }
    progress.finished();
    let out = minds_out(app.world_mut());
    if out > 0 {
        warn!("{out} persona(s) still thinking at the end: their memory counts are omitted");
    }
    out
}

/// Writes the run's final save, unless a save already failed or minds are still out. Returns
/// where it went and the save error to report once the other files are written.
fn final_save(
    opened: &mut OpenRun,
    minds_out: usize,
    save_error: Option<PersistError>,
) -> (Option<PathBuf>, Option<PersistError>) {
    if save_error.is_some() {
        return (None, save_error);
    }
    if minds_out > 0 {
        warn!("no final save: {minds_out} persona(s) still thinking");
        return (None, None);
    }
    // A failed final save must not lose the run's other files: they are written after it.
    match save_world(opened.app.world_mut(), &opened.files.save) {
        Ok(_) => (Some(opened.files.save.clone()), None),
        Err(err) => (None, Some(err)),
    }
}

/// Finishes the movement log and writes `summary.json`, `usage.json` and (if asked) the
/// report; a save error is returned only after those are on disk.
fn write_outputs(
    mut opened: OpenRun,
    options: &RunOptions,
    driven: DrivenSteps,
    minds_out: usize,
    save_path: Option<PathBuf>,
    save_error: Option<PersistError>,
) -> Result<RunReport, RunError> {
    let app = &mut opened.app;
    let final_frames = persona_frames(app.world_mut());
    let (step, now) = {
        let clock = app.world().resource::<SimClock>();
        (clock.step(), clock.now())
    };
    let mut log = app
        .world_mut()
        .remove_resource::<MovementLog>()
        .ok_or_else(|| RunError::Invalid("the movement log went missing".into()))?;
    // Thoughts that landed after the last step (Realtime) changed what personas do: the log's
    // last line, at the save's step, says so.
    log.record_if_changed(step, now, final_frames.clone());
    log.finish()?;
    // What landed after the last frame's record (the last thoughts, a reply) is recorded too.
    super::record::record_run(app.world_mut());
    if let Some(record) = app.world_mut().remove_resource::<RunRecord>() {
        let path = record.path().to_path_buf();
        record
            .finish()
            .map_err(|source| RunError::Io { path, source })?;
    }

    let (usage, backend, model) = {
        let client = app.world().resource::<LlmClient>();
        (
            with_earlier_usage(client.usage(), opened.earlier_usage.as_ref()),
            client.backend_name().to_owned(),
            client.model().to_owned(),
        )
    };
    let personas = summarise_personas(app.world_mut());
    let clock = app.world().resource::<SimClock>();
    let summary = RunSummary {
        run: RunMetadata {
            version: env!("CARGO_PKG_VERSION").to_owned(),
            seed: opened.seed,
            hours: options.hours,
            steps: clock.step() - driven.first_step,
            start: driven.start,
            end: clock.now(),
            personas: personas.keys().cloned().collect(),
            backend,
            model,
            map: shareable_path(&opened.map_path),
            time_mode: options.time_mode,
            lean: app
                .world()
                .get_resource::<crate::settings::AgentSettings>()
                .is_some_and(crate::settings::AgentSettings::is_lean),
            wall_seconds: driven.wall.as_secs_f64(),
        },
        personas,
    };
    write_json(&opened.files.summary, &summary)?;
    let usage_file = UsageFile {
        usage,
        prompts: Some(opened.provenance.clone()),
    };
    write_json(&opened.files.usage, &usage_file)?;
    if let Some(err) = save_error {
        return Err(err.into());
    }
    let report_path = if options.report {
        match write_report(&options.out) {
            Ok(_) => Some(options.out.join(REPORT_HTML)),
            Err(err) => {
                warn!("the report could not be written: {err}");
                None
            }
        }
    } else {
        None
    };

    Ok(RunReport {
        movement_path: opened.files.movement,
        summary_path: opened.files.summary,
        usage_path: opened.files.usage,
        steps: summary.run.steps,
        wall: driven.wall,
        final_frames,
        minds_out,
        usage: usage_file.usage,
        prompts: opened.provenance,
        save_path,
        report_path,
    })
}

/// Writes the movement log's recorded lines to disk (synced) and `usage.json` as of now, so a
/// crash loses neither the record nor the spend.
fn checkpoint(
    app: &mut App,
    usage_path: &Path,
    earlier: Option<&UsageReport>,
) -> Result<(), RunError> {
    if let Some(mut log) = app.world_mut().get_resource_mut::<MovementLog>() {
        log.flush()?;
    }
    if let Some(mut record) = app.world_mut().get_resource_mut::<RunRecord>() {
        let path = record.path().to_path_buf();
        record
            .flush()
            .map_err(|source| RunError::Io { path, source })?;
    }
    let usage = with_earlier_usage(app.world().resource::<LlmClient>().usage(), earlier);
    write_json(usage_path, &usage)
}

/// `usage.json` of an earlier run into the same folder, if it is readable.
fn read_usage(path: &Path) -> Option<UsageReport> {
    // Far more than any run's usage (a line per prompt kind and backend).
    let text = crate::files::read_at_most(path, 64 << 20).ok()?;
    serde_json::from_slice(&text).ok()
}

/// `now` plus the counts of `earlier` (a resumed run's folder keeps the whole spend).
fn with_earlier_usage(mut now: UsageReport, earlier: Option<&UsageReport>) -> UsageReport {
    if let Some(earlier) = earlier {
        for (kind, counts) in &earlier.kinds {
            now.kinds
                .entry(kind.clone())
                .or_default()
                .accumulate(counts);
        }
        now.totals.accumulate(&earlier.totals);
    }
    now
}

/// How long the run may go without a step before it counts as stalled: at least
/// [`MIN_STALL_TIMEOUT`], and more than one model call with all its retries.
fn stall_timeout(llm: &LlmConfig) -> Duration {
    llm.timeout
        .saturating_mul(llm.max_retries.saturating_add(2))
        .max(MIN_STALL_TIMEOUT)
}

fn write_json(path: &Path, value: &impl serde::Serialize) -> Result<(), RunError> {
    let mut bytes = serde_json::to_vec_pretty(value).map_err(|source| RunError::Json {
        path: path.to_owned(),
        source,
    })?;
    bytes.push(b'\n');
    write_atomic(path, &bytes).map_err(|source| RunError::Io {
        path: path.to_owned(),
        source,
    })
}

/// Every persona's frame, straight from the ECS.
fn persona_frames(world: &mut World) -> BTreeMap<String, PersonaFrame> {
    let mut query = world.query_filtered::<(&Name, &Body, &ActionView), With<Persona>>();
    query
        .iter(world)
        .map(|(name, body, view)| {
            (
                name.as_str().to_owned(),
                PersonaFrame::from_components(body, view),
            )
        })
        .collect()
}

fn minds_out(world: &mut World) -> usize {
    let mut query = world.query_filtered::<(), With<AwaitingCognition>>();
    query.iter(world).count()
}

/// The optional watcher, called through without checking for `None` each time.
struct Watch<'a>(Option<&'a ProgressWatcher>);

impl Watch<'_> {
    fn started(&self, total: u64) {
        if let Some(w) = self.0 {
            w.0.started(total);
        }
    }

    fn stepped(&self, done: u64, now: NaiveDateTime, client: &LlmClient) {
        if let Some(w) = self.0 {
            w.0.stepped(done, now, client);
        }
    }

    fn note(&self, text: &str) {
        if let Some(w) = self.0 {
            w.0.note(text);
        }
    }

    fn finished(&self) {
        if let Some(w) = self.0 {
            w.0.finished();
        }
    }
}

/// How long a waiting run sleeps: from [`PARK_MIN`], doubling up to [`PARK_MAX`] while
/// nothing happens, back to the minimum when a step is taken or a call ends (which also wakes
/// it at once).
#[derive(Debug)]
struct Park {
    next: Duration,
    seen: Option<u64>,
}

impl Default for Park {
    fn default() -> Self {
        Self {
            next: PARK_MIN,
            seen: None,
        }
    }
}

impl Park {
    fn reset(&mut self) {
        self.next = PARK_MIN;
    }

    fn wait(&mut self, client: &LlmClient) {
        let seen = *self.seen.get_or_insert_with(|| client.answers_so_far());
        let now = client.wait_for_answer(seen, self.next);
        // A call ended: its thought may land any moment, so look again soon. Nothing: sleep
        // longer next time.
        self.next = if now == seen {
            (self.next * 2).min(PARK_MAX)
        } else {
            PARK_MIN
        };
        self.seen = Some(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hours_become_steps() {
        let options = RunOptions::new(2.0, "/tmp/x");
        assert_eq!(options.total_steps(10).ok(), Some(720));
        assert_eq!(RunOptions::new(0.5, "x").total_steps(10).ok(), Some(180));
        assert_eq!(RunOptions::new(1.0, "x").total_steps(60).ok(), Some(60));
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, MAX_HOURS + 1.0, 0.001] {
            assert!(
                matches!(
                    RunOptions::new(bad, "x").total_steps(10),
                    Err(RunError::Invalid(_))
                ),
                "{bad}"
            );
        }
    }

    #[cfg(not(feature = "local-llm"))]
    #[test]
    fn local_backend_is_a_clear_error_before_anything_is_written() {
        let out = std::env::temp_dir().join(format!("bga-run-local-{}", std::process::id()));
        let options = RunOptions::new(1.0, &out).with_backend(BackendChoice::Local);
        let err = run(&options).expect_err("no local model yet");
        assert!(matches!(err, RunError::LocalBackendUnavailable));
        assert!(
            err.to_string()
                .contains("the local backend needs the `local-llm` feature (issue 5)")
        );
        assert!(!out.exists(), "nothing created");
    }

    #[test]
    fn stall_timeout_outlasts_a_call_with_retries() {
        let llm = LlmConfig {
            timeout: Duration::from_secs(300),
            max_retries: 4,
            ..LlmConfig::default()
        };
        assert_eq!(stall_timeout(&llm), Duration::from_secs(1800));
        // Defaults: 120 s × (4 retries + 2) = 720 s.
        assert_eq!(
            stall_timeout(&LlmConfig::default()),
            Duration::from_secs(720)
        );
        let quick = LlmConfig {
            timeout: Duration::from_secs(1),
            ..LlmConfig::default()
        };
        assert_eq!(stall_timeout(&quick), MIN_STALL_TIMEOUT);
    }
}
