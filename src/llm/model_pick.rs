//! Which cached model the game thinks with: the best one this machine runs fast enough.
//!
//! `scripts/fetch-model.sh` may leave several chat GGUFs in the model cache (Qwen2.5-1.5B when
//! the hub answered, SmolLM2-135M always). A bigger model plans better but a slow one keeps the
//! whole town waiting on every thought. So, when no `--model` is given and more than one is
//! cached, the game loads each, lets it write a few tokens (a short warm-up, feature
//! `local-llm`, through the backend the game then uses — on the GPU when the backend uses
//! one) and [`pick_model`] takes the **largest model that reaches
//! [`MIN_TOKENS_PER_SECOND`]**; when none does, the fastest. The choice and its reason are
//! logged and shown in `usage.json` ([`ModelPick`], `"model_pick"`). `--model PATH` (or
//! `GA_LOCAL_MODEL`) skips all this: the given file is the model.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The speed floor, in generated tokens per second of wall time (prompt included).
///
/// A plan item or a line of talk is 30–60 tokens: at 5 tokens/s a persona waits 6–12 s for
/// it, which a town of a few personas sharing one model thread still lives with; slower, and
/// every thought queues behind the last (a 1.5B model on one starved core writes 2–3 tokens/s).
/// A model under the floor is only taken when no model reaches it.
pub const MIN_TOKENS_PER_SECOND: f64 = 5.0;

/// Tokens each warm-up writes: enough for a steady rate, few enough that measuring a
/// 1.5B model on a slow CPU stays within a few seconds.
pub const WARM_UP_TOKENS: u32 = 16;

/// One cached model and what its warm-up measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MeasuredModel {
    /// The file name.
    pub file: String,
    /// The file's size in bytes (the measure of "larger").
    pub size_bytes: u64,
    /// Generated tokens per second of wall time; `None` when it could not be measured (it
    /// failed to load, or the warm-up time ran out before it).
    pub tokens_per_second: Option<f64>,
}

/// The outcome of the pick: what `usage.json` shows under `"model_pick"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelPick {
    /// The file picked.
    pub file: String,
    /// Why, in a sentence (also logged at `info`).
    pub reason: String,
    /// Every candidate, as measured.
    pub candidates: Vec<MeasuredModel>,
}

/// Picks among `candidates` by the rule of the module docs: the largest that reached `floor`
/// tokens/s, else the fastest measured one. `None` when none could be measured. Returns the
/// index into `candidates` and the reason.
pub fn pick_model(candidates: &[MeasuredModel], floor: f64) -> Option<(usize, String)> {
    let measured = || {
        candidates
            .iter()
            .enumerate()
            .filter_map(|(i, c)| c.tokens_per_second.map(|s| (i, c, s)))
            .filter(|(_, _, s)| s.is_finite())
    };
    let fast_enough = measured().filter(|(_, _, s)| *s >= floor).max_by(|a, b| {
        a.1.size_bytes
            .cmp(&b.1.size_bytes)
            .then(a.2.total_cmp(&b.2))
    });
    if let Some((i, chosen, speed)) = fast_enough {
        let larger_but_slow: Vec<String> = measured()
            .filter(|(_, c, s)| c.size_bytes > chosen.size_bytes && *s < floor)
            .map(|(_, c, s)| format!("{} ({s:.1} tokens/s)", c.file))
            .collect();
        let mut reason =
            format!("the largest cached model reaching {floor} tokens/s: {speed:.1} tokens/s");
        if !larger_but_slow.is_empty() {
            reason.push_str(&format!("; too slow here: {}", larger_but_slow.join(", ")));
        }
        return Some((i, reason));
    }
    let (i, _, speed) = measured().max_by(|a, b| a.2.total_cmp(&b.2))?;
    Some((
        i,
        format!("no cached model reaches {floor} tokens/s here; the fastest: {speed:.1} tokens/s"),
    ))
}

/// The chat GGUFs in the model cache `dir`, by name: every `*.gguf` file directly inside it
/// (half-downloaded `.part` files and the sentence embedder's folder are not). Empty when the
/// folder cannot be read.
pub fn cached_models(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut models: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.is_file()
                && p.extension()
                    .is_some_and(|e| e.eq_ignore_ascii_case("gguf"))
                && !p
                    .file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with('.'))
        })
        .collect();
    models.sort();
    models
}

#[cfg(feature = "local-llm")]
pub(crate) use measure::pick_and_load;

#[cfg(feature = "local-llm")]
mod measure {
    use std::path::{Path, PathBuf};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use bevy::tasks::futures_lite::future::block_on;

    use super::{MIN_TOKENS_PER_SECOND, MeasuredModel, ModelPick, WARM_UP_TOKENS, pick_model};
    use crate::llm::{ChatRequest, LlmBackend, LocalBackend, LocalConfig};

    /// The whole warm-up's time: a model not yet measured when it has run out is not
    /// measured (and not picked), so a cache full of big files cannot hold the start.
    const WARM_UP_BUDGET: Duration = Duration::from_secs(30);

    /// What the warm-up asks: a short instruction that any chat model answers at length.
    const WARM_UP_PROMPT: &str = "Describe a quiet morning in a small town in three sentences.";

    /// Generated tokens per second of one short answer on `backend`, after one token to warm
    /// its caches.
    fn tokens_per_second(backend: &LocalBackend) -> Option<f64> {
        let ask = |tokens: u32| {
            ChatRequest::new("model_warm_up", WARM_UP_PROMPT)
                .with_max_tokens(tokens)
                .with_temperature(0.0)
        };
        block_on(backend.chat(ask(1))).ok()?;
        let start = Instant::now();
        let answer = block_on(backend.chat(ask(WARM_UP_TOKENS))).ok()?;
        let seconds = start.elapsed().as_secs_f64();
        let tokens = answer.usage.completion_tokens;
        (tokens > 0 && seconds > 0.0).then(|| tokens as f64 / seconds)
    }

    /// Loads every model of `paths` (smallest first) with `threads` threads, measures it, and
    /// keeps the one [`pick_model`] takes, loaded. `None` when none loaded.
    pub(crate) fn pick_and_load(
        paths: &[PathBuf],
        threads: u32,
    ) -> Option<(PathBuf, Arc<LocalBackend>, ModelPick)> {
        let size = |p: &Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
        let mut order: Vec<&PathBuf> = paths.iter().collect();
        order.sort_by_key(|p| size(p));
        let started = Instant::now();
        let mut candidates = Vec::new();
        let mut loaded: Vec<Option<Arc<LocalBackend>>> = Vec::new();
        for path in &order {
            let mut measured = MeasuredModel {
                file: path.file_name().map_or_else(
                    || path.display().to_string(),
                    |n| n.to_string_lossy().into(),
                ),
                size_bytes: size(path),
                tokens_per_second: None,
            };
            let mut backend = None;
            if started.elapsed() < WARM_UP_BUDGET {
                let mut config = LocalConfig::new(path.as_path());
                config.threads = threads;
                match LocalBackend::new(config) {
                    Ok(local) => {
                        measured.tokens_per_second = tokens_per_second(&local);
                        backend = Some(Arc::new(local));
                    }
                    Err(err) => bevy::log::warn!("model warm-up: {err}"),
                }
            }
            bevy::log::debug!(
                "model warm-up: {} ({} bytes): {:?} tokens/s",
                measured.file,
                measured.size_bytes,
                measured.tokens_per_second
            );
            candidates.push(measured);
            // Only the fastest-so-far and the largest-fast-enough could still win; keeping all
            // loaded is simpler and the cache holds two or three models.
            loaded.push(backend);
        }
        let (index, reason) = pick_model(&candidates, MIN_TOKENS_PER_SECOND)?;
        let backend = loaded.get_mut(index)?.take()?;
        // The others are dropped here: their inference threads stop and free their memory.
        drop(loaded);
        let pick = ModelPick {
            file: candidates[index].file.clone(),
            reason,
            candidates,
        };
        Some((order[index].clone(), backend, pick))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(file: &str, size_bytes: u64, speed: Option<f64>) -> MeasuredModel {
        MeasuredModel {
            file: file.into(),
            size_bytes,
            tokens_per_second: speed,
        }
    }

    #[test]
    fn the_largest_fast_enough_model_wins() {
        let small = model("small.gguf", 100, Some(60.0));
        let big = model("big.gguf", 1_000, Some(7.5));
        let (i, reason) = pick_model(&[small.clone(), big.clone()], 5.0).expect("a pick");
        assert_eq!(i, 1);
        assert!(
            reason.contains("largest") && reason.contains("7.5"),
            "{reason}"
        );
        // Too slow here: the small one, and the reason names the big one's speed.
        let slow_big = model("big.gguf", 1_000, Some(2.0));
        let (i, reason) = pick_model(&[small.clone(), slow_big], 5.0).expect("a pick");
        assert_eq!(i, 0);
        assert!(
            reason.contains("too slow here: big.gguf (2.0 tokens/s)"),
            "{reason}"
        );
        // Exactly at the floor is fast enough.
        let (i, _) = pick_model(&[small, model("big.gguf", 1_000, Some(5.0))], 5.0).expect("pick");
        assert_eq!(i, 1);
    }

    #[test]
    fn under_the_floor_the_fastest_and_unmeasured_never() {
        let a = model("a.gguf", 100, Some(3.0));
        let b = model("b.gguf", 1_000, Some(1.0));
        let c = model("c.gguf", 5_000, None);
        let (i, reason) = pick_model(&[a, b, c.clone()], 5.0).expect("a pick");
        assert_eq!(i, 0);
        assert!(reason.contains("no cached model reaches"), "{reason}");
        assert_eq!(pick_model(&[c], 5.0), None);
        assert_eq!(pick_model(&[], 5.0), None);
        assert_eq!(
            pick_model(&[model("nan.gguf", 1, Some(f64::NAN))], 5.0),
            None
        );
    }

    #[test]
    fn the_cache_lists_chat_models_only() {
        let dir = std::env::temp_dir().join(format!("ga-model-pick-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("all-MiniLM-L6-v2")).expect("temp dir");
        for name in [
            "b.gguf",
            "a.GGUF",
            "c.gguf.part",
            ".hidden.gguf",
            "notes.txt",
        ] {
            std::fs::write(dir.join(name), b"GGUF").expect("a file");
        }
        let names: Vec<String> = cached_models(&dir)
            .iter()
            .filter_map(|p| p.file_name()?.to_str().map(str::to_owned))
            .collect();
        assert_eq!(names, ["a.GGUF", "b.gguf"]);
        assert!(cached_models(&dir.join("missing")).is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_pick_round_trips_through_json() {
        let pick = ModelPick {
            file: "big.gguf".into(),
            reason: "because".into(),
            candidates: vec![model("big.gguf", 1, Some(6.0)), model("x.gguf", 2, None)],
        };
        let json = serde_json::to_string(&pick).expect("json");
        assert_eq!(serde_json::from_str::<ModelPick>(&json).ok(), Some(pick));
    }
}
