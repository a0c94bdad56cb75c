//! A backend wrapper that corrupts a seeded fraction of chat answers (SPEC §12).
//!
//! [`FaultyBackend`] answers through the backend it wraps, then, for a fraction of calls,
//! replaces or mangles the text with the kinds of garbage real models produce: nothing,
//! chatty prose, truncated JSON, JSON of the wrong types, enormous text, `<think>` blocks and
//! code fences — and optionally transport errors. Prompt parsers and the cognitive loop are
//! tested against it: whatever it returns, the sim must stay valid.
//!
//! Which calls fail is decided from `(seed, kind, prompt, attempt)`, where `attempt` counts
//! earlier calls with the same prompt: the same seed corrupts the same calls whatever order
//! concurrent calls run in, and a retried prompt gets a fresh draw.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use rand::Rng;
use sha2::{Digest, Sha256};

use super::backend::{
    BoxFuture, ChatRequest, ChatResponse, ChoiceRequest, LlmBackend, LlmError, RetryHook,
};
use super::scripted::ScriptRng;

/// One kind of corruption.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Fault {
    /// An empty answer.
    Empty,
    /// Chatty prose instead of the requested format.
    Prose,
    /// The answer cut off part-way (truncated JSON when it was JSON).
    Truncated,
    /// JSON with the wrong types (strings ↔ numbers, objects ↔ arrays).
    WrongTypes,
    /// The answer repeated to over 100 000 characters.
    Huge,
    /// The answer wrapped in a long `<think>…</think>` block.
    Think,
    /// The answer wrapped in a Markdown code fence with a preamble.
    CodeFence,
    /// A transport error (HTTP 500) instead of an answer.
    Error,
}

impl Fault {
    /// Every kind of garbage text (everything but [`Fault::Error`]).
    pub const GARBAGE: [Fault; 7] = [
        Fault::Empty,
        Fault::Prose,
        Fault::Truncated,
        Fault::WrongTypes,
        Fault::Huge,
        Fault::Think,
        Fault::CodeFence,
    ];

    /// Applies this fault to a good answer.
    pub fn corrupt(self, good: &str, rng: &mut ScriptRng) -> Result<String, LlmError> {
        Ok(match self {
            Fault::Empty => String::new(),
            Fault::Prose => {
                let lines = [
                    "Sure! Here's what I think about that.",
                    "As an AI language model, I cannot answer that.",
                    "Let me think step by step. First, the persona wakes up.",
                    "I'm not sure, but probably something like the usual.",
                ];
                rng.pick(&lines).copied().unwrap_or_default().to_owned()
            }
            Fault::Truncated => {
                let chars: Vec<char> = good.chars().collect();
                if chars.len() < 2 {
                    "{\"".to_owned()
                } else {
                    let cut = rng.random_range(1..chars.len());
                    chars.into_iter().take(cut).collect()
                }
            }
            Fault::WrongTypes => match serde_json::from_str::<serde_json::Value>(good) {
                Ok(value) => swap_types(value).to_string(),
                Err(_) => "{\"answer\": [true, null, 3.5]}".to_owned(),
            },
            Fault::Huge => {
                let unit = if good.is_empty() {
                    "lorem ipsum "
                } else {
                    good
                };
                let mut text = String::with_capacity(100_001 + unit.len());
                while text.len() <= 100_000 {
                    text.push_str(unit);
                }
                text
            }
            Fault::Think => {
                format!(
                    "<think>\n{}\n</think>\n{good}",
                    "Hmm, let me reason about this. ".repeat(40)
                )
            }
            Fault::CodeFence => {
                format!("Here is the answer:\n```json\n{good}\n```\nHope this helps!")
            }
            Fault::Error => {
                return Err(LlmError::Status {
                    status: 500,
                    message: "injected fault".into(),
                });
            }
        })
    }
}

/// Swaps JSON types: strings → numbers, numbers → strings, booleans → strings,
/// objects keep their keys with swapped values, arrays become objects.
fn swap_types(value: serde_json::Value) -> serde_json::Value {
    use serde_json::{Map, Value};
    match value {
        Value::String(_) => Value::from(42),
        Value::Number(n) => Value::String(format!("{n} (approximately)")),
        Value::Bool(b) => Value::String(b.to_string()),
        Value::Null => Value::from("null"),
        Value::Array(items) => {
            let mut map = Map::new();
            for (i, item) in items.into_iter().enumerate() {
                map.insert(i.to_string(), swap_types(item));
            }
            Value::Object(map)
        }
        Value::Object(map) => {
            Value::Object(map.into_iter().map(|(k, v)| (k, swap_types(v))).collect())
        }
    }
}

/// Wraps a backend and corrupts a seeded fraction of its chat answers. See the
/// [`llm`](crate::llm) module docs.
pub struct FaultyBackend {
    inner: Arc<dyn LlmBackend>,
    fraction: f64,
    seed: u64,
    faults: Vec<Fault>,
    attempts: Mutex<HashMap<[u8; 32], u64>>,
    injected: Mutex<HashMap<Fault, u64>>,
    calls: AtomicU64,
}

impl fmt::Debug for FaultyBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FaultyBackend")
            .field("inner", &self.inner.name())
            .field("fraction", &self.fraction)
            .field("seed", &self.seed)
            .field("faults", &self.faults)
            .finish()
    }
}

impl FaultyBackend {
    /// Corrupts `fraction` (clamped to 0..=1) of the chat answers of `inner` with the garbage
    /// faults ([`Fault::GARBAGE`]), seeded with `seed`.
    pub fn new(inner: Arc<dyn LlmBackend>, fraction: f64, seed: u64) -> Self {
        Self {
            inner,
            fraction: if fraction.is_nan() {
                0.0
            } else {
                fraction.clamp(0.0, 1.0)
            },
            seed,
            faults: Fault::GARBAGE.to_vec(),
            attempts: Mutex::new(HashMap::new()),
            injected: Mutex::new(HashMap::new()),
            calls: AtomicU64::new(0),
        }
    }

    /// Draws faults from `faults` instead (an empty list disables corruption).
    pub fn with_faults(mut self, faults: impl IntoIterator<Item = Fault>) -> Self {
        self.faults = faults.into_iter().collect();
        self
    }

    /// How many faults of each kind were injected so far.
    pub fn injected(&self) -> HashMap<Fault, u64> {
        self.injected
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// How many faults were injected in total.
    pub fn injected_total(&self) -> u64 {
        self.injected
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .sum()
    }

    /// Chat calls seen.
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::SeqCst)
    }

    /// The fault for this call, if any (advances the per-prompt attempt counter).
    fn draw(&self, request: &ChatRequest) -> Option<(Fault, ScriptRng)> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let prompt = request.prompt_text();
        let attempt = {
            let mut attempts = self.attempts.lock().unwrap_or_else(PoisonError::into_inner);
            // Keyed by a digest so long runs do not keep every prompt in memory.
            let mut hasher = Sha256::new();
            hasher.update((request.kind.len() as u64).to_le_bytes());
            hasher.update(request.kind.as_bytes());
            hasher.update(prompt.as_bytes());
            let counter = attempts.entry(hasher.finalize().into()).or_insert(0);
            let attempt = *counter;
            *counter += 1;
            attempt
        };
        let mut rng =
            ScriptRng::for_call(self.seed, &request.kind, &format!("{attempt}\u{0}{prompt}"));
        if self.faults.is_empty() || !rng.random_bool(self.fraction) {
            return None;
        }
        let fault = *rng.pick(&self.faults)?;
        *self
            .injected
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(fault)
            .or_insert(0) += 1;
        Some((fault, rng))
    }
}

impl LlmBackend for FaultyBackend {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn model(&self) -> &str {
        self.inner.model()
    }

    fn device(&self) -> Option<&str> {
        self.inner.device()
    }

    fn chat(&self, request: ChatRequest) -> BoxFuture<'_, Result<ChatResponse, LlmError>> {
        Box::pin(async move {
            let fault = self.draw(&request);
            let mut response = self.inner.chat(request).await?;
            if let Some((fault, mut rng)) = fault {
                response.text = fault.corrupt(&response.text, &mut rng)?;
            }
            Ok(response)
        })
    }

    fn chat_stream(
        &self,
        request: ChatRequest,
        deltas: async_channel::Sender<String>,
    ) -> BoxFuture<'_, Result<ChatResponse, LlmError>> {
        Box::pin(async move {
            match self.draw(&request) {
                // Corrupting mid-stream is not meaningful: answer whole, then send once.
                Some((fault, mut rng)) => {
                    let mut response = self.inner.chat(request).await?;
                    response.text = fault.corrupt(&response.text, &mut rng)?;
                    let _ = deltas.send(response.text.clone()).await;
                    Ok(response)
                }
                None => self.inner.chat_stream(request, deltas).await,
            }
        })
    }

    fn embed(&self, texts: Vec<String>) -> BoxFuture<'_, Result<Vec<Vec<f32>>, LlmError>> {
        self.inner.embed(texts)
    }

    fn embedding_model(&self) -> &str {
        self.inner.embedding_model()
    }

    fn embedding_dim(&self) -> usize {
        self.inner.embedding_dim()
    }

    fn score_choices(&self, request: ChoiceRequest) -> BoxFuture<'_, Result<Vec<f32>, LlmError>> {
        self.inner.score_choices(request)
    }

    fn supports_choice_scoring(&self) -> bool {
        self.inner.supports_choice_scoring()
    }

    fn set_retry_hook(&self, hook: RetryHook) {
        self.inner.set_retry_hook(hook);
    }

    fn set_guess_hook(&self, hook: RetryHook) {
        self.inner.set_guess_hook(hook);
    }

    fn shut_down(&self) {
        self.inner.shut_down();
    }

    fn probe(&self) -> BoxFuture<'_, Result<(), LlmError>> {
        self.inner.probe()
    }

    fn endpoint_usage(&self) -> Vec<super::usage::EndpointUsage> {
        self.inner.endpoint_usage()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn corruptions_look_like_their_names() {
        let mut rng = ScriptRng::for_call(0, "k", "p");
        let good = r#"{"hour": 7, "name": "Klaus"}"#;
        assert_eq!(Fault::Empty.corrupt(good, &mut rng), Ok(String::new()));
        let truncated = Fault::Truncated.corrupt(good, &mut rng).expect("text");
        assert!(good.starts_with(&truncated) && truncated.len() < good.len());
        assert!(serde_json::from_str::<serde_json::Value>(&truncated).is_err());
        let wrong: serde_json::Value =
            serde_json::from_str(&Fault::WrongTypes.corrupt(good, &mut rng).expect("text"))
                .expect("json");
        assert_eq!(
            wrong,
            serde_json::json!({"hour": "7 (approximately)", "name": 42})
        );
        assert!(Fault::Huge.corrupt(good, &mut rng).expect("text").len() > 100_000);
        let think = Fault::Think.corrupt(good, &mut rng).expect("text");
        assert!(think.starts_with("<think>") && think.ends_with(good));
        assert!(
            Fault::CodeFence
                .corrupt(good, &mut rng)
                .expect("text")
                .contains("```json\n")
        );
        assert!(matches!(
            Fault::Error.corrupt(good, &mut rng),
            Err(LlmError::Status { status: 500, .. })
        ));
        assert!(Fault::Truncated.corrupt("", &mut rng).is_ok());
    }
}
