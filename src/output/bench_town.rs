//! `smallville bench-town`: the embedded model where it matters — the default town's first
//! game hours, in Lockstep as fast as the model answers — calls, prompt tokens decoded and
//! reused, tokens per second, wall time, and how long the first persona took to get out of bed.
//! A run like `smallville run`'s (its folder keeps the movement log and `usage.json`), watched
//! by one extra system.

use std::path::PathBuf;
use std::time::Instant;

use serde::Serialize;

use crate::eval::bench::model_file;

/// What `smallville bench-town` runs.
#[derive(Debug, Clone)]
pub struct TownBenchOptions {
    /// The GGUF file (default: the model cache's, as the game finds it).
    pub model: Option<PathBuf>,
    /// Inference threads.
    pub threads: u32,
    /// Game hours to run.
    pub hours: f64,
    /// When the town's clock starts (time of day).
    pub start: chrono::NaiveTime,
    /// Spawn only the first N personas (all by default).
    pub personas: Option<usize>,
    /// The run's seed.
    pub seed: u64,
    /// Lean mode.
    pub lean: bool,
    /// The run folder (its movement log, summary and `usage.json` stay there).
    pub out: PathBuf,
}

/// The figures of one town bench.
#[derive(Debug, Clone, Serialize)]
pub struct TownBenchReport {
    /// The model file.
    pub model: String,
    /// What embedded the memories (and took the decisions it takes): the sentence embedder
    /// when the model cache holds it, else the chat model's mean-pooled states.
    pub embedding_model: String,
    /// Inference threads.
    pub threads: u32,
    /// Game hours run, from `start`.
    pub hours: f64,
    /// The clock's start (HH:MM).
    pub start: String,
    /// Chat and choice calls that reached the model (embedding batches not counted).
    pub calls: u64,
    /// Prompt tokens of those calls.
    pub prompt_tokens: u64,
    /// Of them, found in the model's KV cache.
    pub prompt_tokens_reused: u64,
    /// Of them, decoded.
    pub prompt_tokens_decoded: u64,
    /// Prompt tokens decoded per call.
    pub decoded_per_call: f64,
    /// Tokens generated.
    pub completion_tokens: u64,
    /// Tokens decoded or generated per second of wall time.
    pub tokens_per_second: f64,
    /// Real seconds the game hours took.
    pub wall_seconds: f64,
    /// Real seconds from the first step until the first persona was out of bed (`None`: nobody
    /// got up in the hours run).
    pub first_up_seconds: Option<f64>,
    /// Who got up first, and at what game time.
    pub first_up: Option<String>,
}

/// Who got up first: real time since the first step, and the persona at its game time.
#[derive(Debug, Default)]
struct FirstUp {
    began: Option<Instant>,
    up: Option<(f64, String)>,
}

/// Runs the default town for `options.hours` on the embedded model and measures it.
pub fn bench_town(options: &TownBenchOptions) -> Result<TownBenchReport, String> {
    use bevy::prelude::*;
    use std::sync::{Arc, Mutex};

    let path = model_file(options.model.as_ref())?;
    let mut run = super::RunOptions::new(options.hours, &options.out);
    run.personas = options.personas;
    run.seed = options.seed;
    run.lean = options.lean;
    run.report = false;
    run.start = Some(
        crate::clock::SimClock::default_start()
            .date()
            .and_time(options.start),
    );
    run.llm.backend = crate::llm::BackendChoice::Local;
    run.llm.local_model = Some(path.clone());
    run.llm.local_threads = options.threads.max(1);
    // The set-up a newcomer gets: the model cache also holds the sentence embedder, which
    // embeds memories and takes the decisions it takes better than a tiny chat model.
    run.llm.model_cache = crate::llm::model_cache_dir(|var| std::env::var(var).ok());
    let first_up = Arc::new(Mutex::new(FirstUp::default()));
    let watch = Arc::clone(&first_up);
    run.setup = Some(super::RunSetup(Arc::new(move |app: &mut App| {
        let watch = Arc::clone(&watch);
        app.add_systems(
            crate::clock::SimStep,
            (move |clock: Res<crate::clock::SimClock>,
                   personas: Query<(&Name, &crate::persona::ActionView)>| {
                let mut first = watch
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                let began = *first.began.get_or_insert_with(Instant::now);
                if first.up.is_some() {
                    return;
                }
                let up = personas.iter().find(|(_, view)| {
                    let action = view.description.trim();
                    !action.is_empty() && !crate::persona::is_sleep_text(action)
                });
                if let Some((name, _)) = up {
                    first.up = Some((
                        began.elapsed().as_secs_f64(),
                        format!("{name} at {}", clock.now().format("%H:%M")),
                    ));
                }
            })
            .after(crate::clock::AgentSystems::Last),
        );
        Ok(())
    })));
    let report = super::run(&run).map_err(|e| e.to_string())?;
    let embed = report.usage.kind(crate::llm::EMBED_KIND);
    let totals = report.usage.totals;
    let calls = totals.calls.saturating_sub(embed.calls);
    let prompt_tokens = totals.prompt_tokens.saturating_sub(embed.prompt_tokens);
    let reused = totals
        .reused_prompt_tokens
        .saturating_sub(embed.reused_prompt_tokens);
    let decoded = prompt_tokens.saturating_sub(reused);
    let completion = totals
        .completion_tokens
        .saturating_sub(embed.completion_tokens);
    let wall = report.wall.as_secs_f64();
    let first = first_up
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .up
        .clone();
    Ok(TownBenchReport {
        model: path.display().to_string(),
        embedding_model: report.usage.embedding_model.clone(),
        threads: options.threads.max(1),
        hours: options.hours,
        start: options.start.format("%H:%M").to_string(),
        calls,
        prompt_tokens,
        prompt_tokens_reused: reused,
        prompt_tokens_decoded: decoded,
        decoded_per_call: if calls > 0 {
            decoded as f64 / calls as f64
        } else {
            0.0
        },
        completion_tokens: completion,
        tokens_per_second: if wall > 0.0 {
            (decoded + completion) as f64 / wall
        } else {
            0.0
        },
        wall_seconds: wall,
        first_up_seconds: first.as_ref().map(|(secs, _)| *secs),
        first_up: first.map(|(_, who)| who),
    })
}
