//! `smallville bench-local`: the embedded backend's speed beside llama.cpp's own, for the same
//! model file and thread count.
//!
//! Three figures for the backend — prompt tokens/s (a fresh prompt each time, so only the chat
//! template's first tokens come from the prefix cache), generated tokens/s, and the latency of
//! scoring 8 options of a ~110-token question (cold: a new question; warm: the same question
//! again, its prompt cached) — and two for llama.cpp driven directly ([`raw_llama_bench`]:
//! one batch of prompt tokens, then one token at a time, like `llama-bench`'s pp/tg). Each
//! figure is the best of `--reps` runs, so a busy machine disturbs it less.
//!
//! `smallville bench-town` ([`crate::output::bench_town`]) measures the backend where it
//! matters: the default town's first game hours on the embedded model.

use std::path::PathBuf;
use std::time::Instant;

use bevy::tasks::block_on;
use serde::Serialize;

use crate::llm::{
    ChatMessage, ChatRequest, ChoiceRequest, LlmBackend, LlmConfig, LocalBackend, LocalConfig,
    model_cache_dir, raw_llama_bench,
};

/// What `smallville bench-local` measures.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// The GGUF file (default: the model cache's, as the game finds it).
    pub model: Option<PathBuf>,
    /// Inference threads.
    pub threads: u32,
    /// Prompt tokens for the prompt-processing figure.
    pub prompt_tokens: usize,
    /// Tokens for the generation figure.
    pub gen_tokens: usize,
    /// Repetitions (the best is kept).
    pub reps: usize,
}

/// The figures.
#[derive(Debug, Clone, Serialize)]
pub struct BenchReport {
    /// The model file.
    pub model: String,
    /// Threads used by both.
    pub threads: u32,
    /// Our backend: prompt tokens per second.
    pub backend_prompt_tps: f64,
    /// Our backend: generated tokens per second.
    pub backend_gen_tps: f64,
    /// Our backend: seconds to score 8 options of a new ~110-token question.
    pub choice_cold_secs: f64,
    /// Our backend: seconds to score the same 8 options again (prompt cached).
    pub choice_warm_secs: f64,
    /// llama.cpp directly: prompt tokens per second.
    pub raw_prompt_tps: f64,
    /// llama.cpp directly: generated tokens per second.
    pub raw_gen_tps: f64,
}

const CHOICE_CONTEXT: &str = "Mira Okafor is a nurse at the county hospital. She lives in the \
Okafor house with her brother. It is 7:40 am on Monday and her shift starts at 8:30 am. She has \
had breakfast already and wants to buy a coffee and a newspaper on her way to work, and she \
would like to say hello to Tomas, who usually sits at the cafe in the morning.";

const OPTIONS: [&str; 8] = [
    "Okafor house",
    "Reyes house",
    "Lindqvist house",
    "Riverside Cafe",
    "Copper Kettle Pub",
    "Maple Park",
    "Elm Street Grocery",
    "Northgate College",
];

fn choice_request(nonce: usize) -> ChoiceRequest {
    ChoiceRequest {
        kind: "bench_choice".into(),
        messages: vec![ChatMessage::user(format!(
            "[{nonce}] {CHOICE_CONTEXT}\nWhich area should Mira go to now?\nOptions:\n- {}\n\
             Answer with one option from the list, exactly as written, and nothing else.",
            OPTIONS.join("\n- ")
        ))],
        options: OPTIONS.iter().map(|s| (*s).to_owned()).collect(),
        affinity: None,
        about: None,
        option_phrases: Vec::new(),
    }
}

/// The model file: the one given, else the model cache's, as the game finds it.
pub(crate) fn model_file(given: Option<&PathBuf>) -> Result<PathBuf, String> {
    match given {
        Some(path) => Ok(path.clone()),
        None => LlmConfig {
            model_cache: model_cache_dir(|v| std::env::var(v).ok()),
            ..LlmConfig::default()
        }
        .local_model_path()
        .ok_or_else(|| {
            "no model in the model cache: run scripts/fetch-model.sh or pass --model".to_owned()
        }),
    }
}

/// Runs the bench.
pub fn bench_local(args: &BenchOptions) -> Result<BenchReport, String> {
    let path = model_file(args.model.as_ref())?;
    let mut config = LocalConfig::new(&path);
    config.threads = args.threads.max(1);
    let backend = LocalBackend::new(config).map_err(|e| e.to_string())?;
    let reps = args.reps.max(1);

    // Prompt processing: a fresh prompt of about `prompt_tokens` tokens, one answer token.
    let filler = "The town wakes slowly and everyone goes about their morning. ";
    let words = args.prompt_tokens.max(16) / 12 + 1;
    let mut backend_pp = 0.0f64;
    for rep in 0..reps {
        let before = block_on(backend.stats()).map_err(|e| e.to_string())?;
        let prompt = format!("[{rep}] {}", filler.repeat(words));
        block_on(
            backend.chat(
                ChatRequest::new("bench_prompt", prompt)
                    .with_temperature(0.0)
                    .with_max_tokens(1),
            ),
        )
        .map_err(|e| e.to_string())?;
        let after = block_on(backend.stats()).map_err(|e| e.to_string())?;
        let tokens = after.prompt_tokens_decoded - before.prompt_tokens_decoded;
        let secs = after.prompt_seconds - before.prompt_seconds;
        if secs > 0.0 {
            backend_pp = backend_pp.max(tokens as f64 / secs);
        }
    }

    // Generation: a long greedy answer (it may end early at the end of turn; the rate counts
    // what was generated).
    let mut backend_tg = 0.0f64;
    for rep in 0..reps {
        let before = block_on(backend.stats()).map_err(|e| e.to_string())?;
        block_on(
            backend.chat(
                ChatRequest::new(
                    "bench_generate",
                    format!("[{rep}] Count from 1 to 200, separated by commas."),
                )
                .with_temperature(0.0)
                .with_max_tokens(u32::try_from(args.gen_tokens).unwrap_or(64)),
            ),
        )
        .map_err(|e| e.to_string())?;
        let after = block_on(backend.stats()).map_err(|e| e.to_string())?;
        let tokens = after.generated_tokens - before.generated_tokens;
        let secs = after.generation_seconds - before.generation_seconds;
        if secs > 0.0 {
            backend_tg = backend_tg.max(tokens as f64 / secs);
        }
    }

    // Choice scoring: cold (new question) and warm (same question again).
    let mut cold = f64::INFINITY;
    let mut warm = f64::INFINITY;
    for rep in 0..reps {
        let started = Instant::now();
        block_on(backend.score_choices(choice_request(1000 + rep))).map_err(|e| e.to_string())?;
        cold = cold.min(started.elapsed().as_secs_f64());
        let started = Instant::now();
        block_on(backend.score_choices(choice_request(1000 + rep))).map_err(|e| e.to_string())?;
        warm = warm.min(started.elapsed().as_secs_f64());
    }
    drop(backend);

    let raw = raw_llama_bench(
        &path,
        args.threads,
        args.prompt_tokens,
        args.gen_tokens,
        reps,
    )
    .map_err(|e| e.to_string())?;
    Ok(BenchReport {
        model: path.display().to_string(),
        threads: args.threads.max(1),
        backend_prompt_tps: backend_pp,
        backend_gen_tps: backend_tg,
        choice_cold_secs: cold,
        choice_warm_secs: warm,
        raw_prompt_tps: raw.prompt_tokens_per_sec,
        raw_gen_tps: raw.generated_tokens_per_sec,
    })
}
