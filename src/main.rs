//! `smallville`: the default town, from the command line.
//!
//! Without a subcommand it runs the game: with the `render` feature (on by default) a window
//! with the town and its personas (`--load DIR` opens a save instead; `--screenshot PATH
//! --frames N` renders N frames, saves a PNG and exits); with `--headless`, or without the
//! feature, the headless demo, which prints where everyone is. With no display to open the
//! window on, it says what to do instead and exits with code 2. `smallville replay DIR` plays a run's movement log in the window
//! with no model (`--check` validates it headless).

use std::path::PathBuf;
use std::process::ExitCode;

use bevy::prelude::*;
use clap::{Parser, Subcommand};

mod cli;

use bevy_generative_agents::headless::{DemoOptions, run_demo};
use bevy_generative_agents::output::{ProgressWatcher, RunOptions, run};
use bevy_generative_agents::persist::CacheMode;
use cli::args::{LlmArgs, RunArgs};

#[derive(Parser, Debug)]
#[command(
    name = "smallville",
    version,
    about = "Generative agents in a tile-map town"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    demo: DemoArgs,
    /// Open this save in the window instead of a fresh town (its map, personas, clock and
    /// settings; the model flags apply as for a fresh game). Needs the `render` feature.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["personas", "personas_dir", "seed", "town"])]
    load: Option<PathBuf>,
    /// Open the --load save even if its files differ from its manifest.json (edited by hand,
    /// or saved before checksums existed).
    #[arg(long = "trust-edited-save", requires = "load")]
    trust_edited_save: bool,
    /// Run the headless demo instead of opening the window (what `smallville demo` does; no
    /// display needed): simulate `--hours` game hours (1 by default) of the town with the
    /// model flags given and print where everyone is each game hour. The default in builds
    /// without the `render` feature.
    #[arg(long)]
    #[cfg_attr(feature = "render", arg(conflicts_with_all = ["load", "GameArgs"]))]
    #[cfg_attr(not(feature = "render"), arg(conflicts_with = "load"))]
    headless: bool,
    #[cfg(feature = "render")]
    #[command(flatten)]
    game: GameArgs,
}

/// Options of the window (feature `render`).
#[cfg(feature = "render")]
#[derive(clap::Args, Debug, Clone)]
struct GameArgs {
    /// Render `--frames` frames, save the window as a PNG at this path, and exit.
    #[arg(long, value_name = "PATH")]
    screenshot: Option<PathBuf>,
    /// Frames to render before the screenshot.
    #[arg(long, default_value_t = 120, requires = "screenshot")]
    frames: u32,
    /// Real seconds to run before the screenshot (on top of `--frames`): what a player sees
    /// after that long.
    #[arg(long, value_name = "SECONDS", requires = "screenshot", value_parser = parse_seconds)]
    screenshot_after: Option<std::time::Duration>,
    /// Take the screenshot as soon as a persona is out of bed (after `--frames`), with
    /// `--screenshot-after` as the longest wait: the first minutes' promise checked without
    /// timing the machine.
    #[arg(long, requires = "screenshot")]
    screenshot_once_up: bool,
    /// Select and follow the persona whose name starts with this.
    #[arg(long, value_name = "NAME")]
    follow: Option<String>,
    /// Starting speed: paused, 1, 2, 4, 8, 16, 32 or max.
    #[arg(long, default_value = "1", value_parser = bevy_generative_agents::render::parse_speed)]
    speed: bevy_generative_agents::clock::SimSpeed,
    /// The time of day a fresh town starts at (HH:MM; a loaded save keeps its own).
    #[arg(long, value_name = "HH:MM", default_value = "07:00", value_parser = parse_start)]
    start: chrono::NaiveTime,
    /// Do not fast-forward nights while the whole town sleeps.
    #[arg(long = "no-fast-forward")]
    no_fast_forward: bool,
    /// Give the director this instruction as the game starts (its panel, F2, shows the plan
    /// and asks before it runs).
    #[arg(long, value_name = "TEXT")]
    directive: Option<String>,
    /// Open this stage scene as the game starts (a JSON scene file such as
    /// assets/stages/standoff.json; its panel, F3, plays it turn by turn, auto-play on).
    #[arg(long, value_name = "FILE")]
    stage: Option<PathBuf>,
    /// Lean mode: fewer model calls per agent-day (an action grounded before is not asked
    /// about again, a step's percepts are embedded together, reflections look at two focal
    /// points, a group's focused personas decide in one call per round that also plans their
    /// next lines and asks newcomers to join).
    #[arg(long)]
    lean: bool,
    /// Where F5 quick-saves and F9 quick-loads [default:
    /// $XDG_DATA_HOME/bevy_generative_agents/saves/quick, or under ~/.local/share].
    #[arg(long = "save-dir", value_name = "DIR")]
    save_dir: Option<PathBuf>,
}

/// `--start`: a time of day, `HH:MM`.
#[cfg(feature = "render")]
fn parse_start(text: &str) -> Result<chrono::NaiveTime, String> {
    chrono::NaiveTime::parse_from_str(text.trim(), "%H:%M")
        .map_err(|_| format!("expected a time of day as HH:MM (e.g. 07:00), got {text:?}"))
}

/// `--screenshot-after`: real seconds, 0 to one hour.
fn parse_seconds(text: &str) -> Result<std::time::Duration, String> {
    match text.trim().parse::<f64>() {
        Ok(secs) if (0.0..=3600.0).contains(&secs) => Ok(std::time::Duration::from_secs_f64(secs)),
        _ => Err(format!("expected seconds between 0 and 3600, got {text:?}")),
    }
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the headless demo (as `smallville --headless`; the default without the `render`
    /// feature).
    Demo(DemoArgs),
    /// Simulate N game hours headless and write movement.jsonl, summary.json and usage.json.
    Run(RunArgs),
    /// Copy a save to a new folder after validating it (the copy records its origin).
    Fork {
        /// The save to copy.
        src: PathBuf,
        /// The new folder (must not exist).
        dst: PathBuf,
        /// Copy the save even if its files differ from its manifest.json (edited by hand, or
        /// saved before checksums existed); the copy is sealed afresh.
        #[arg(long = "trust-edited-save")]
        trust_edited_save: bool,
    },
    /// Set run folders side by side: calls, tokens and behaviour per agent-day, per prompt
    /// kind (lean mode's report: faithful runs as the base, lean runs as the other side).
    Compare {
        /// The base side's run folders (e.g. faithful runs of several seeds).
        #[arg(long, num_args = 1.., required = true, value_name = "RUN_DIR")]
        base: Vec<PathBuf>,
        /// The other side's run folders (e.g. `--lean` runs of the same seeds).
        #[arg(long, num_args = 1.., required = true, value_name = "RUN_DIR")]
        other: Vec<PathBuf>,
    },
    /// Play a run's movement.jsonl in the window without any model, or validate it with --check.
    Replay(ReplayArgs),
    /// Write report.html, report.json and the charts for a run folder.
    Report {
        /// The run folder (holding movement.jsonl, summary.json and usage.json).
        dir: PathBuf,
    },
    /// Run a JSON-lines decision eval and print accuracy per kind.
    EvalDecisions(cli::args::EvalArgs),
    /// Ask a persona of a save questions (one JSON line per answer); the save is left untouched.
    Interview(cli::interview::InterviewArgs),
    /// Play a stage scene file headless in the default town (or a save's): one JSON line per turn.
    Stage(cli::stage::StageArgs),
    /// Measure the embedded local model's speed beside llama.cpp's own.
    #[cfg(feature = "local-llm")]
    BenchLocal(cli::args::BenchArgs),
    /// Run the default town's first game hours on the embedded model and print calls, prompt
    /// tokens decoded and reused, tokens/s, wall time and when the first persona got up.
    #[cfg(feature = "local-llm")]
    BenchTown(cli::args::TownBenchArgs),
}

/// `smallville replay` flags.
#[derive(clap::Args, Debug, Clone)]
struct ReplayArgs {
    /// The run folder holding movement.jsonl.
    dir: PathBuf,
    /// Playback speed: 1, 2, 4, 8, 16 or 32, as in the game (1 = one 10 s step per second).
    #[arg(long, default_value = "1", value_parser = parse_replay_speed)]
    speed: bevy_generative_agents::clock::SimSpeed,
    /// Validate the log headless instead of playing it.
    #[arg(long)]
    check: bool,
    /// The map to check tiles against and draw (default: the run's save's map, else the
    /// default town).
    #[arg(long)]
    map: Option<PathBuf>,
    /// Render `--frames` frames of the replay, save the window as a PNG at this path, and exit.
    #[arg(long, value_name = "PATH", conflicts_with = "check")]
    screenshot: Option<PathBuf>,
    /// Frames to render before the screenshot.
    #[arg(long, default_value_t = 120, requires = "screenshot")]
    frames: u32,
    /// Real seconds to run before the screenshot (on top of `--frames`): what a player sees
    /// after that long.
    #[arg(long, value_name = "SECONDS", requires = "screenshot", value_parser = parse_seconds)]
    screenshot_after: Option<std::time::Duration>,
    /// Select and follow the persona whose name starts with this.
    #[arg(long, value_name = "NAME", conflicts_with = "check")]
    follow: Option<String>,
    /// Read the run's save (for its map and world) even if its files differ from its
    /// manifest.json (edited by hand, or saved before checksums existed).
    #[arg(long = "trust-edited-save")]
    trust_edited_save: bool,
}

/// `--speed` of a replay: 1, 2, 4, 8, 16 or 32 (an `x` suffix is fine).
fn parse_replay_speed(text: &str) -> Result<bevy_generative_agents::clock::SimSpeed, String> {
    let t = text.trim();
    let n: u32 = t
        .strip_suffix(['x', 'X'])
        .unwrap_or(t)
        .parse()
        .map_err(|_| format!("replay speed must be 1, 2, 4, 8, 16 or 32, got {text:?}"))?;
    bevy_generative_agents::output::replay_speed(n)
}

#[derive(clap::Args, Debug, Clone)]
struct DemoArgs {
    /// Game hours to simulate.
    #[arg(long, default_value_t = 1.0)]
    hours: f64,
    /// How many of the town's personas to spawn (all by default).
    #[arg(long)]
    personas: Option<usize>,
    /// Seed of every random choice.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// A shipped town by name — willowbrook (the default), saltmere or fernside (25
    /// residents) — with its map and its people.
    #[arg(long, value_name = "NAME", value_parser = cli::args::parse_town, conflicts_with_all = ["map", "personas_dir"])]
    town: Option<&'static bevy_generative_agents::world::ShippedTown>,
    /// A Tiled map to use instead of the default town.
    #[arg(long)]
    map: Option<PathBuf>,
    /// A folder of persona sheets to use instead of the default ones.
    #[arg(long = "personas-dir")]
    personas_dir: Option<PathBuf>,
    #[command(flatten)]
    llm: LlmArgs,
}

impl DemoArgs {
    /// The map: the town's, or `--map`.
    fn map(&self) -> Option<PathBuf> {
        self.town.map(|t| t.map_path()).or_else(|| self.map.clone())
    }

    /// The persona folder: the town's, or `--personas-dir`.
    fn personas_dir(&self) -> Option<PathBuf> {
        self.town
            .map(|t| t.personas_dir())
            .or_else(|| self.personas_dir.clone())
    }
}

/// The simulation allocates many small strings (prompts, answers, memories); mimalloc keeps
/// that cheap (about a quarter less time per step than glibc's allocator at 1,000 personas).
///
/// It is built without transparent huge pages (`no_thp`: the kernel would zero two megabytes
/// for each fresh region the allocator touches) and told to keep what a step frees for the
/// next ([`keep_freed_memory`]).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `purge_delay` option (`mi_option_purge_delay` in its `mimalloc.h`, version 3;
/// the Rust bindings name only version 2's options).
#[cfg(feature = "mimalloc")]
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Turns off mimalloc's purging: by default it hands freed pages back to the OS a second after
/// they empty, and a town that frees and allocates about as much every step then faults them
/// back in, zeroed by the kernel (at 1,000 personas the process spent a quarter of its time in
/// the kernel; without purging the whole run takes a fifth less time). The process keeps its
/// high-water mark instead, which a town's growing memory sets anyway.
#[cfg(feature = "mimalloc")]
fn keep_freed_memory() {
    #[expect(unsafe_code, reason = "mimalloc's options are set through its C API")]
    // SAFETY: `mi_option_set` takes an option's number and a value, both plain integers, and
    // may be called at any time from any thread; `MI_OPTION_PURGE_DELAY` is an option mimalloc
    // defines, and -1 is its documented "never purge".
    unsafe {
        libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, -1);
    }
}

fn main() -> ExitCode {
    #[cfg(feature = "mimalloc")]
    keep_freed_memory();
    let cli = Cli::parse();
    let args = match cli.command {
        Some(Command::Demo(args)) => args,
        Some(Command::Run(args)) => return run_command(&args),
        Some(Command::Fork {
            src,
            dst,
            trust_edited_save,
        }) => return fork_command(&src, &dst, cli::args::integrity(trust_edited_save)),
        Some(Command::Compare { base, other }) => return compare_command(&base, &other),
        Some(Command::Replay(args)) => return replay_command(&args),
        Some(Command::Report { dir }) => return report_command(&dir),
        Some(Command::EvalDecisions(args)) => {
            return cli::eval::eval_command(&args);
        }
        Some(Command::Interview(args)) => return cli::interview::interview_command(&args),
        Some(Command::Stage(args)) => return cli::stage::stage_command(&args),
        #[cfg(feature = "local-llm")]
        Some(Command::BenchLocal(args)) => {
            return cli::eval::bench_command(&args);
        }
        #[cfg(feature = "local-llm")]
        Some(Command::BenchTown(args)) => {
            return cli::eval::town_bench_command(&args);
        }
        #[cfg(feature = "render")]
        None if cli.headless => cli.demo,
        #[cfg(feature = "render")]
        None => {
            // Before the model is fetched or loaded and before the window: without a display,
            // winit's event loop would panic.
            if let Err(code) = cli::display::require_display(cli::display::Window::Game) {
                return code;
            }
            let integrity = cli::args::integrity(cli.trust_edited_save);
            return game_command(cli.demo, cli.load, integrity, &cli.game);
        }
        #[cfg(not(feature = "render"))]
        None if cli.load.is_some() => {
            eprintln!(
                "error: --load opens a save in the game window, and this build has no window \
                 (built without the `render` feature); to continue a save headless, use \
                 `smallville run --from DIR --hours H --out OUT`"
            );
            return ExitCode::from(2);
        }
        #[cfg(not(feature = "render"))]
        None => cli.demo,
    };
    let llm = match model_config(&args.llm) {
        Ok(config) => config,
        Err(code) => return code,
    };
    let options = DemoOptions {
        hours: args.hours,
        personas: args.personas,
        seed: args.seed,
        map: args.map(),
        personas_dir: args.personas_dir(),
        llm,
        start: None,
    };
    if let Some(warning) = options.llm.fallback_warning() {
        eprintln!("warning: {warning}");
    }
    match run_demo(&options, &mut std::io::stdout()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            error!("{err}");
            eprintln!("error: {err}");
            ExitCode::FAILURE
        }
    }
}

/// `smallville fork`: exit code 1 when the source is not a valid save or the copy fails.
fn fork_command(
    src: &std::path::Path,
    dst: &std::path::Path,
    integrity: bevy_generative_agents::persist::SaveIntegrity,
) -> ExitCode {
    match bevy_generative_agents::persist::fork_save_with(src, dst, integrity) {
        Ok(meta) => {
            println!(
                "forked {} (step {}, {} personas) into {}",
                src.display(),
                meta.step,
                meta.personas.len(),
                dst.display()
            );
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("error: {err}");
            ExitCode::FAILURE
        }
    }
}

/// `smallville replay`: `--check` validates headless; playing needs the window (exit code 2
/// without the `render` feature, 1 for a bad log or a failed window).
fn replay_command(args: &ReplayArgs) -> ExitCode {
    if !args.check {
        return play_replay(args);
    }
    match bevy_generative_agents::output::check_replay_with(
        &args.dir,
        args.map.as_deref(),
        cli::args::integrity(args.trust_edited_save),
    ) {
        Ok(check) => {
            println!(
                "movement log OK: {} steps ({}-{}), {} personas, {} moves, {} chat lines{}",
                check.lines,
                check.steps.0,
                check.steps.1,
                check.personas.len(),
                check.moves,
                check.chat_updates,
                if check.matches_save == Some(true) {
                    "; ends exactly where the save does"
                } else {
                    ""
                }
            );
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("error: {err}");
            ExitCode::FAILURE
        }
    }
}

/// Plays the replay in the window.
#[cfg(feature = "render")]
fn play_replay(args: &ReplayArgs) -> ExitCode {
    use bevy_generative_agents::render::{ReplayOptions, ScreenshotRequest, run_replay};
    if let Err(code) = cli::display::require_display(cli::display::Window::Replay) {
        return code;
    }
    let options = ReplayOptions {
        dir: args.dir.clone(),
        map: args.map.clone(),
        speed: args.speed,
        follow: args.follow.clone(),
        screenshot: args.screenshot.clone().map(|path| ScreenshotRequest {
            path,
            frames: args.frames,
            after: args.screenshot_after,
            once_up: false,
        }),
        integrity: cli::args::integrity(args.trust_edited_save),
    };
    match run_replay(&options) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            error!("{err}");
            eprintln!("error: {err}");
            ExitCode::FAILURE
        }
    }
}

/// Without the window: say so, and point at the headless check.
#[cfg(not(feature = "render"))]
fn play_replay(args: &ReplayArgs) -> ExitCode {
    eprintln!(
        "error: playing a replay needs the game window, and this build has none (built without \
         the `render` feature); validate the log headless with `smallville replay {} --check`",
        args.dir.display()
    );
    ExitCode::from(2)
}

/// `smallville report`: exit code 1 when the run folder is incomplete or unreadable.
fn report_command(dir: &std::path::Path) -> ExitCode {
    match bevy_generative_agents::output::write_report(dir) {
        Ok(report) => {
            println!(
                "wrote {} and {} ({} images)",
                dir.join("report.html").display(),
                dir.join("report.json").display(),
                report.images.len()
            );
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("error: {err}");
            ExitCode::FAILURE
        }
    }
}

/// `smallville compare`: the table of two sides' spend and behaviour per agent-day.
fn compare_command(base: &[PathBuf], other: &[PathBuf]) -> ExitCode {
    use bevy_generative_agents::output::cost::{RunCost, compare};
    let load = |dirs: &[PathBuf]| {
        dirs.iter()
            .map(RunCost::load)
            .collect::<Result<Vec<_>, _>>()
    };
    match load(base)
        .and_then(|base| Ok((base, load(other)?)))
        .and_then(|(base, other)| compare(&base, &other))
    {
        Ok(comparison) => {
            print!("{}", comparison.to_markdown());
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("error: {err}");
            ExitCode::FAILURE
        }
    }
}

/// `smallville run`: exit code 2 for unusable flags, 1 for a failed run.
fn run_command(args: &RunArgs) -> ExitCode {
    let mut options = match args.to_options() {
        Ok(options) => options,
        Err(err) => {
            eprintln!("error: {err}");
            return ExitCode::from(2);
        }
    };
    if !args.no_progress {
        options.progress = Some(ProgressWatcher(std::sync::Arc::new(
            cli::progress::ProgressBarWatcher::new(),
        )));
    }
    // The log is not set up yet: say it on stderr, where it cannot be missed.
    if let Some(warning) = options.llm.fallback_warning()
        && !matches!(options.cache, CacheMode::Replay(_))
    {
        eprintln!("warning: {warning}");
    }
    if let Some(path) = &args.scenario {
        return scenario_command(options, path);
    }
    match run(&options) {
        Ok(report) => {
            println!(
                "{} steps in {:.1} s, {} LLM calls; wrote {}, {} and {}",
                report.steps,
                report.wall.as_secs_f64(),
                report.usage.totals.calls,
                report.movement_path.display(),
                report.summary_path.display(),
                report.usage_path.display()
            );
            ExitCode::SUCCESS
        }
        Err(err) => {
            error!("{err}");
            eprintln!("error: {err}");
            ExitCode::FAILURE
        }
    }
}

/// `smallville run --scenario FILE`: the run, then what the scenario measured.
fn scenario_command(options: RunOptions, path: &std::path::Path) -> ExitCode {
    use bevy_generative_agents::director::scenario::{Scenario, run_scenario};
    let scenario = match Scenario::load(path) {
        Ok(scenario) => scenario,
        Err(err) => {
            eprintln!("error: {err}");
            return ExitCode::from(2);
        }
    };
    // The scenario's town, unless the command line chose the map or the people.
    let mut options = options;
    if let Some(name) = &scenario.town
        && options.map.is_none()
        && options.personas_dir.is_none()
    {
        match bevy_generative_agents::world::ShippedTown::named(name) {
            Ok(town) => {
                options.map = Some(town.map_path());
                options.personas_dir = Some(town.personas_dir());
            }
            Err(err) => {
                eprintln!("error: {}: town: {err}", path.display());
                return ExitCode::from(2);
            }
        }
    }
    match run_scenario(options, scenario) {
        Ok((report, results)) => {
            println!(
                "{} steps in {:.1} s, {} LLM calls; scenario `{}`",
                report.steps,
                report.wall.as_secs_f64(),
                report.usage.totals.calls,
                results.scenario.name
            );
            for (topic, series) in &results.diffusion {
                let first = series.first().map_or(0, |p| p.count);
                if let Some(last) = series.last() {
                    println!(
                        "who knows of \"{topic}\": {first} at the start, {} of {} at the end ({:.0} %); {} can recall it (a memory retrieval returns)",
                        last.count,
                        last.of,
                        100.0 * last.count as f64 / last.of.max(1) as f64,
                        last.recall
                    );
                }
            }
            for check in &results.checks {
                println!(
                    "{}: {} present at {} ({} – {})",
                    check["name"].as_str().unwrap_or_default(),
                    check["count"],
                    check["place"].as_str().unwrap_or_default(),
                    check["from"].as_str().unwrap_or_default(),
                    check["to"].as_str().unwrap_or_default()
                );
            }
            println!(
                "wrote {} and {}",
                options_out(&report).display(),
                report
                    .report_path
                    .as_deref()
                    .map_or_else(|| "no report".into(), |p| p.display().to_string())
            );
            ExitCode::SUCCESS
        }
        Err(err) => {
            error!("{err}");
            eprintln!("error: {err}");
            ExitCode::FAILURE
        }
    }
}

/// The run folder's `scenario.json`.
fn options_out(report: &bevy_generative_agents::output::run::RunReport) -> std::path::PathBuf {
    report
        .summary_path
        .parent()
        .unwrap_or(std::path::Path::new("."))
        .join(bevy_generative_agents::director::scenario::SCENARIO_FILE)
}

/// The window: exit code 2 for unusable flags, 1 when the game fails.
#[cfg(feature = "render")]
fn game_command(
    args: DemoArgs,
    load: Option<PathBuf>,
    integrity: bevy_generative_agents::persist::SaveIntegrity,
    game: &GameArgs,
) -> ExitCode {
    use bevy_generative_agents::render::{
        GameOptions, ScreenshotRequest, default_save_dir, run_game,
    };
    let llm = match model_config(&args.llm) {
        Ok(config) => config,
        Err(code) => return code,
    };
    let options = GameOptions {
        personas: args.personas,
        seed: args.seed,
        map: args.map(),
        personas_dir: args.personas_dir(),
        llm,
        speed: game.speed,
        follow: game.follow.clone(),
        screenshot: game.screenshot.clone().map(|path| ScreenshotRequest {
            path,
            frames: game.frames,
            after: game.screenshot_after,
            once_up: game.screenshot_once_up,
        }),
        load,
        integrity,
        save_dir: game
            .save_dir
            .clone()
            .unwrap_or_else(|| default_save_dir(|name| std::env::var(name).ok())),
        start: game.start,
        fast_forward_nights: !game.no_fast_forward,
        directive: game.directive.clone(),
        stage: game.stage.clone(),
        lean: game.lean,
    };
    match run_game(&options) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            error!("{err}");
            eprintln!("error: {err}");
            ExitCode::FAILURE
        }
    }
}

/// The model configuration of the game and the demo: flags resolved (exit code 2 when they are
/// unusable), and on a first run the embedded model fetched rather than falling back to the
/// scripted stand-in.
fn model_config(args: &LlmArgs) -> Result<bevy_generative_agents::llm::LlmConfig, ExitCode> {
    let llm = args.resolve().map_err(|err| {
        eprintln!("error: {err}");
        ExitCode::from(2)
    })?;
    bevy_generative_agents::llm::fetch_default_model_if_missing(&llm);
    Ok(llm)
}
