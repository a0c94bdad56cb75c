//! The command line's flags: parsed by `clap`, turned into the library's plain options.

use std::path::PathBuf;

use bevy_generative_agents::clock::{SimSpeed, TimeMode};
use bevy_generative_agents::eval::{Norm, Strategy};
use bevy_generative_agents::headless::HeadlessError;
use bevy_generative_agents::llm::{BackendChoice, ConfigError, LlmConfig, LlmConfigLayer};
use bevy_generative_agents::output::{
    RunError, RunOptions, parse_run_backend, parse_run_speed, parse_time_mode,
};
use bevy_generative_agents::persist::{CacheMode, SaveIntegrity};
use bevy_generative_agents::world::ShippedTown;

/// The LLM flags of every command that thinks. There is deliberately no
/// flag for the API key.
#[derive(Debug, Clone, Default, PartialEq, clap::Args)]
pub struct LlmArgs {
    /// JSON file with LLM settings (lowest precedence after defaults).
    #[arg(long = "llm-config", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Backend: auto, scripted, http or local.
    #[arg(long = "llm-backend", value_name = "BACKEND")]
    pub backend: Option<BackendChoice>,
    /// OpenAI-compatible base URL, e.g. http://127.0.0.1:8080/v1.
    #[arg(long = "llm-base-url", value_name = "URL")]
    pub base_url: Option<String>,
    /// A pool of OpenAI-compatible chat servers, comma-separated (same rules as
    /// `GA_LLM_BASE_URLS`; beats it and the config file's "endpoints").
    #[arg(long = "llm-base-urls", value_name = "URL,URL")]
    pub base_urls: Option<String>,
    /// Chat model name.
    #[arg(long = "llm-model", value_name = "MODEL")]
    pub model: Option<String>,
    /// Embedding model name.
    #[arg(long = "llm-embed-model", value_name = "MODEL")]
    pub embed_model: Option<String>,
    /// Timeout of one HTTP attempt, in seconds.
    #[arg(long = "llm-timeout", value_name = "SECS")]
    pub timeout_secs: Option<f64>,
    /// Transport retries after the first attempt.
    #[arg(long = "llm-max-retries", value_name = "N")]
    pub max_retries: Option<u32>,
    /// Backend calls in flight at once.
    #[arg(long = "llm-concurrency", value_name = "N")]
    pub concurrency: Option<usize>,
    /// Persist the response cache to this JSON-lines file.
    #[arg(long = "llm-cache", value_name = "FILE")]
    pub cache_path: Option<PathBuf>,
    /// A GGUF chat model for the embedded local backend (selects it unless --llm-backend says
    /// otherwise).
    #[arg(long = "model", value_name = "PATH")]
    pub local_model: Option<PathBuf>,
    /// Inference threads of the local backend (default 1).
    #[arg(long = "llm-threads", value_name = "N")]
    pub local_threads: Option<u32>,
    /// A folder of edited prompt templates (`wake_up_hour.txt`, …) replacing the compiled-in
    /// ones of the same name; checked before the run starts. Also `GA_PROMPTS`, or the config
    /// file's "prompts" key.
    #[arg(long = "prompts", value_name = "DIR")]
    pub prompts: Option<PathBuf>,
}

impl LlmArgs {
    /// The flags as a config layer.
    pub fn layer(&self) -> LlmConfigLayer {
        let layer = LlmConfigLayer {
            backend: self.backend,
            base_url: self.base_url.clone(),
            model: self.model.clone(),
            embed_model: self.embed_model.clone(),
            timeout_secs: self.timeout_secs,
            max_retries: self.max_retries,
            concurrency: self.concurrency,
            cache_path: self.cache_path.clone(),
            local_model: self.local_model.clone(),
            local_threads: self.local_threads,
            prompts: self.prompts.clone(),
            ..LlmConfigLayer::default()
        };
        match &self.base_urls {
            Some(list) => layer.with_base_urls("--llm-base-urls", list),
            None => layer,
        }
    }

    /// Resolves the full config: these flags > environment (through `lookup`) > `--llm-config`
    /// file > defaults.
    pub fn resolve_with(
        &self,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<LlmConfig, ConfigError> {
        LlmConfig::resolve(self.config.as_deref(), lookup, self.layer())
    }

    /// Resolves the full config against the process environment.
    pub fn resolve(&self) -> Result<LlmConfig, ConfigError> {
        self.resolve_with(|var| std::env::var(var).ok())
    }
}

/// The `smallville run` flags.
///
/// `--backend` is a shorthand for the LLM flags' `--llm-backend` (limited to the three real
/// choices); giving both is an error, so the configuration has one source of truth.
#[derive(Debug, Clone, PartialEq, clap::Args)]
pub struct RunArgs {
    /// Game hours to simulate (360 steps each).
    #[arg(long)]
    pub hours: f64,
    /// How many of the town's personas to spawn (all by default).
    #[arg(long)]
    pub personas: Option<usize>,
    /// Seed of every random choice.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Backend: scripted, http or local (or use --llm-backend; not both).
    #[arg(
        long = "backend",
        id = "run_backend",
        value_name = "BACKEND",
        value_parser = parse_run_backend,
        conflicts_with = "backend"
    )]
    pub backend: Option<BackendChoice>,
    /// A shipped town by name — willowbrook (the default), saltmere or fernside (25
    /// residents) — with its map and its people.
    #[arg(long, value_name = "NAME", value_parser = parse_town, conflicts_with_all = ["map", "personas_dir", "from"])]
    pub town: Option<&'static ShippedTown>,
    /// A Tiled map to use instead of the default town.
    #[arg(long)]
    pub map: Option<PathBuf>,
    /// A folder of persona sheets to use instead of the default ones.
    #[arg(long = "personas-dir")]
    pub personas_dir: Option<PathBuf>,
    /// lockstep (every step waits for every thought; reproducible) or realtime (never waits).
    #[arg(long = "time-mode", value_name = "MODE", value_parser = parse_time_mode, default_value = "lockstep")]
    pub time_mode: TimeMode,
    /// Speed: 1, 2, 4, 8, 16, 32 (× real time) or max. Default: max in lockstep, 1 in realtime.
    #[arg(long, value_name = "SPEED", value_parser = parse_run_speed)]
    pub speed: Option<SimSpeed>,
    /// Output folder for movement.jsonl, summary.json and usage.json (created when missing).
    #[arg(long)]
    pub out: PathBuf,
    /// Do not draw the progress bar.
    #[arg(long = "no-progress")]
    pub no_progress: bool,
    /// Resume from this save folder (e.g. a previous run's OUT/save) instead of a fresh town.
    #[arg(long, value_name = "SAVE_DIR", conflicts_with_all = ["personas", "personas_dir"])]
    pub from: Option<PathBuf>,
    /// Also save into OUT/save every N steps (the final save is always written).
    #[arg(long = "save-every", value_name = "STEPS", value_parser = clap::value_parser!(u64).range(1..))]
    pub save_every: Option<u64>,
    /// Record every model answer into this JSON-lines file.
    #[arg(
        long = "record-cache",
        value_name = "FILE",
        conflicts_with = "replay_cache"
    )]
    pub record_cache: Option<PathBuf>,
    /// Answer every prompt from this recording: no model is called.
    #[arg(long = "replay-cache", value_name = "FILE")]
    pub replay_cache: Option<PathBuf>,
    /// Do not write report.html / report.json.
    #[arg(long = "no-report")]
    pub no_report: bool,
    /// Load the --from save even if its files differ from its manifest.json (edited by hand,
    /// or saved before checksums existed).
    #[arg(long = "trust-edited-save", requires = "from")]
    pub trust_edited_save: bool,
    /// Run this scenario (JSON: timed injections, probes, checks; see `director::scenario`):
    /// the run folder gets `scenario.json` and the report a diffusion chart and the attendance.
    #[arg(long, value_name = "FILE", conflicts_with = "from")]
    pub scenario: Option<PathBuf>,
    /// Lean mode: fewer model calls per agent-day — an action grounded before is not asked
    /// about again, a step's percepts are embedded together, reflections look at two focal
    /// points, a group's focused personas decide in one call per round that also plans their
    /// next lines and asks newcomers to join (see `headless::make_lean`).
    #[arg(long)]
    pub lean: bool,
    /// The LLM flags.
    #[command(flatten)]
    pub llm: LlmArgs,
}

/// `--trust-edited-save` as the loader's [`SaveIntegrity`]: every command that loads a save
/// takes the flag and passes it on through here.
pub fn integrity(trust_edited_save: bool) -> SaveIntegrity {
    if trust_edited_save {
        SaveIntegrity::TrustEdited
    } else {
        SaveIntegrity::Verify
    }
}

impl RunArgs {
    /// The run these flags ask for, with the LLM configuration resolved against the
    /// environment read through `lookup`. The progress bar is left to the caller.
    pub fn to_options_with(
        &self,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<RunOptions, RunError> {
        let mut llm_args = self.llm.clone();
        if self.backend.is_some() {
            llm_args.backend = self.backend;
        }
        let llm = llm_args
            .resolve_with(lookup)
            .map_err(|err| RunError::Setup(HeadlessError::Llm(err)))?;
        Ok(RunOptions {
            hours: self.hours,
            personas: self.personas,
            seed: self.seed,
            map: self
                .town
                .map(ShippedTown::map_path)
                .or_else(|| self.map.clone()),
            personas_dir: self
                .town
                .map(ShippedTown::personas_dir)
                .or_else(|| self.personas_dir.clone()),
            time_mode: self.time_mode,
            speed: self.speed,
            out: self.out.clone(),
            llm,
            progress: None,
            log: true,
            from: self.from.clone(),
            save_every: self.save_every,
            cache: match (&self.record_cache, &self.replay_cache) {
                (Some(path), _) => CacheMode::Record(path.clone()),
                (None, Some(path)) => CacheMode::Replay(path.clone()),
                (None, None) => CacheMode::Off,
            },
            report: !self.no_report,
            integrity: integrity(self.trust_edited_save),
            start: None,
            setup: None,
            lean: self.lean,
        })
    }

    /// The run these flags ask for, resolved against the process environment.
    pub fn to_options(&self) -> Result<RunOptions, RunError> {
        self.to_options_with(|var| std::env::var(var).ok())
    }
}

/// The `smallville eval-decisions` flags.
#[derive(Debug, Clone, clap::Args)]
pub struct EvalArgs {
    /// The JSON-lines eval file.
    pub file: PathBuf,
    /// Backend: scripted, http or local (shorthand for --llm-backend; not both).
    #[arg(long = "backend", id = "eval_backend", conflicts_with = "backend")]
    pub backend: Option<BackendChoice>,
    /// How the backend answers: score (the options' likelihood) or generate (and match).
    #[arg(long, default_value = "score")]
    pub strategy: Strategy,
    /// How the local backend combines token log-likelihoods: sum or mean.
    #[arg(long, default_value = "sum")]
    pub norm: Norm,
    /// Also write the report (with every item's outcome) as JSON here.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// LLM settings.
    #[command(flatten)]
    pub llm: LlmArgs,
}

/// The `smallville bench-local` flags.
#[cfg(feature = "local-llm")]
#[derive(Debug, Clone, clap::Args)]
pub struct BenchArgs {
    /// The GGUF file (default: the model cache's, as the game finds it).
    #[arg(long, value_name = "PATH")]
    pub model: Option<PathBuf>,
    /// Inference threads.
    #[arg(long, default_value_t = 1)]
    pub threads: u32,
    /// Prompt tokens for the prompt-processing figure.
    #[arg(long, default_value_t = 256)]
    pub prompt_tokens: usize,
    /// Tokens for the generation figure.
    #[arg(long, default_value_t = 64)]
    pub gen_tokens: usize,
    /// Repetitions (the best is kept).
    #[arg(long, default_value_t = 3)]
    pub reps: usize,
    /// Also write the figures as JSON here.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

/// The `smallville bench-town` flags.
#[cfg(feature = "local-llm")]
#[derive(Debug, Clone, clap::Args)]
pub struct TownBenchArgs {
    /// The GGUF file (default: the model cache's, as the game finds it).
    #[arg(long, value_name = "PATH")]
    pub model: Option<PathBuf>,
    /// Inference threads.
    #[arg(long, default_value_t = 1)]
    pub threads: u32,
    /// Game hours to run.
    #[arg(long, default_value_t = 2.0)]
    pub hours: f64,
    /// The time of day the town starts at (HH:MM).
    #[arg(long, value_name = "HH:MM", default_value = "06:00", value_parser = parse_time_of_day)]
    pub start: chrono::NaiveTime,
    /// Spawn only the first N personas (all by default).
    #[arg(long)]
    pub personas: Option<usize>,
    /// The run's seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Lean mode.
    #[arg(long)]
    pub lean: bool,
    /// The run folder (movement log, summary, usage.json).
    #[arg(long, default_value = "bench-town")]
    pub out: PathBuf,
    /// Also write the figures as JSON here.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

/// `HH:MM`: a time of day.
#[cfg(feature = "local-llm")]
fn parse_time_of_day(text: &str) -> Result<chrono::NaiveTime, String> {
    chrono::NaiveTime::parse_from_str(text.trim(), "%H:%M")
        .map_err(|_| format!("expected a time of day as HH:MM (e.g. 06:00), got {text:?}"))
}

#[cfg(feature = "local-llm")]
impl TownBenchArgs {
    /// The library's options.
    pub fn options(&self) -> bevy_generative_agents::output::bench_town::TownBenchOptions {
        bevy_generative_agents::output::bench_town::TownBenchOptions {
            model: self.model.clone(),
            threads: self.threads,
            hours: self.hours,
            start: self.start,
            personas: self.personas,
            seed: self.seed,
            lean: self.lean,
            out: self.out.clone(),
        }
    }
}

#[cfg(feature = "local-llm")]
impl BenchArgs {
    /// The library's options.
    pub fn options(&self) -> bevy_generative_agents::eval::bench::BenchOptions {
        bevy_generative_agents::eval::bench::BenchOptions {
            model: self.model.clone(),
            threads: self.threads,
            prompt_tokens: self.prompt_tokens,
            gen_tokens: self.gen_tokens,
            reps: self.reps,
        }
    }
}

/// `--town NAME`: a shipped town, or an error naming the towns.
pub fn parse_town(text: &str) -> Result<&'static ShippedTown, String> {
    ShippedTown::named(text).map_err(|err| err.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bevy_generative_agents::output::run;

    #[derive(clap::Parser, Debug)]
    struct Cli {
        #[command(flatten)]
        run: RunArgs,
    }

    fn parse(args: &[&str]) -> Result<RunArgs, clap::Error> {
        use clap::Parser;
        Cli::try_parse_from(std::iter::once("run").chain(args.iter().copied())).map(|c| c.run)
    }

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn flags_parse_with_defaults() {
        let args = parse(&["--hours", "2", "--out", "o"]).expect("parse");
        assert_eq!(args.hours, 2.0);
        assert_eq!(args.seed, 1);
        assert_eq!(args.time_mode, TimeMode::Lockstep);
        assert_eq!(args.backend, None);
        let options = args.to_options_with(no_env).expect("options");
        assert_eq!(options.llm.resolved_backend(), BackendChoice::Scripted);
        assert!(!args.no_progress);
        assert_eq!(options.effective_speed(), SimSpeed::Max);
        let realtime = RunOptions {
            time_mode: TimeMode::Realtime,
            ..options.clone()
        };
        assert_eq!(realtime.effective_speed(), SimSpeed::X1);
        let paused = RunOptions {
            speed: Some(SimSpeed::Paused),
            out: std::env::temp_dir().join(format!("bga-run-paused-{}", std::process::id())),
            ..options
        };
        assert!(matches!(run(&paused), Err(RunError::Invalid(_))));
        assert!(!paused.out.exists());

        let args = parse(&[
            "--hours",
            "0.5",
            "--personas",
            "3",
            "--seed",
            "9",
            "--backend",
            "http",
            "--time-mode",
            "realtime",
            "--out",
            "o",
            "--no-progress",
            "--llm-model",
            "m",
        ])
        .expect("parse");
        let options = args.to_options_with(no_env).expect("options");
        assert_eq!(options.personas, Some(3));
        assert_eq!(options.seed, 9);
        assert_eq!(options.time_mode, TimeMode::Realtime);
        assert_eq!(options.llm.backend, BackendChoice::Http);
        assert_eq!(options.llm.model, "m");
        assert!(args.no_progress);
    }

    #[test]
    fn backend_has_one_source_of_truth() {
        // --llm-backend alone works and beats the environment.
        let args =
            parse(&["--hours", "1", "--out", "o", "--llm-backend", "scripted"]).expect("parse");
        let env = |var: &str| (var == "GA_LLM_BACKEND").then(|| "http".to_owned());
        let options = args.to_options_with(env).expect("options");
        assert_eq!(options.llm.backend, BackendChoice::Scripted);
        // --backend beats the environment too.
        let args = parse(&["--hours", "1", "--out", "o", "--backend", "scripted"]).expect("parse");
        assert_eq!(
            args.to_options_with(env).expect("options").llm.backend,
            BackendChoice::Scripted
        );
        // Both at once is refused, even when they agree.
        let err = parse(&[
            "--hours",
            "1",
            "--out",
            "o",
            "--backend",
            "http",
            "--llm-backend",
            "http",
        ])
        .expect_err("conflict");
        assert_eq!(err.kind(), clap::error::ErrorKind::ArgumentConflict);
    }

    #[test]
    fn bad_flags_are_refused() {
        assert!(parse(&["--out", "o"]).is_err(), "--hours is required");
        assert!(parse(&["--hours", "1"]).is_err(), "--out is required");
        assert!(parse(&["--hours", "1", "--out", "o", "--backend", "auto"]).is_err());
        assert!(parse(&["--hours", "1", "--out", "o", "--backend", "gpt"]).is_err());
        assert!(parse(&["--hours", "1", "--out", "o", "--time-mode", "fast"]).is_err());
        assert_eq!(parse_time_mode(" Realtime "), Ok(TimeMode::Realtime));
        assert!(parse_time_mode("").is_err());
        assert_eq!(parse_run_backend("LOCAL"), Ok(BackendChoice::Local));
        assert_eq!(parse_run_speed("32x"), Ok(SimSpeed::X32));
        assert_eq!(parse_run_speed(" MAX "), Ok(SimSpeed::Max));
        assert!(parse_run_speed("paused").is_err());
        assert!(parse_run_speed("3").is_err());
        assert!(parse(&["--hours", "1", "--out", "o", "--speed", "0"]).is_err());
    }

    #[test]
    fn llm_flags_parse() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            llm: LlmArgs,
        }
        let env = |var: &str| (var == "GA_LLM_BACKEND").then(|| "http".to_owned());
        let cli = Cli::try_parse_from(["x", "--llm-backend", "scripted", "--llm-concurrency", "2"])
            .expect("parse");
        let config = cli.llm.resolve_with(env).expect("config");
        assert_eq!(config.backend, BackendChoice::Scripted);
        assert_eq!(config.concurrency, 2);

        // --llm-base-urls beats GA_LLM_BASE_URLS, and its errors name the flag and the entry.
        let env = |var: &str| (var == "GA_LLM_BASE_URLS").then(|| "http://env:1/v1".to_owned());
        let cli =
            Cli::try_parse_from(["x", "--llm-base-urls", "http://a:8080/v1, http://b:8081/v1"])
                .expect("parse");
        let config = cli.llm.resolve_with(env).expect("config");
        let urls: Vec<&str> = config.endpoints.iter().map(|e| e.url.as_str()).collect();
        assert_eq!(urls, ["http://a:8080/v1", "http://b:8081/v1"]);
        assert_eq!(config.resolved_backend(), BackendChoice::Http);
        let cli =
            Cli::try_parse_from(["x", "--llm-base-urls", "http://a/v1,ftp://b"]).expect("parse");
        let err = cli.llm.resolve_with(env).expect_err("bad URL");
        assert!(
            err.to_string()
                .starts_with("--llm-base-urls entry 2 (ftp://b)"),
            "{err}"
        );
        let cli = Cli::try_parse_from(["x", "--llm-base-urls", " , "]).expect("parse");
        let err = cli.llm.resolve_with(env).expect_err("empty");
        assert!(err.to_string().contains("--llm-base-urls"), "{err}");
    }

    #[test]
    fn eval_flags_parse() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            eval: EvalArgs,
        }
        let cli = Cli::try_parse_from(["x", "f.jsonl", "--strategy", "generate", "--norm", "mean"])
            .expect("parse");
        assert_eq!(cli.eval.strategy, Strategy::Generate);
        assert_eq!(cli.eval.norm, Norm::Mean);
        assert!(Cli::try_parse_from(["x", "f.jsonl", "--strategy", "guess"]).is_err());
    }
}
