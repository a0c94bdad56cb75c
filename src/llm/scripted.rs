//! The scripted backend: deterministic answers for tests, benches and offline demos.
//!
//! It is **not a language model** and says so: its name and model are `"scripted"`. Answers
//! come from responders registered per prompt kind; each call gets a [`ScriptRng`] derived
//! from `(seed, kind, prompt text)`, so the same prompt gets the same answer whatever order
//! concurrent calls run in. Without a responder for a kind, the default answer is a minimal
//! JSON value satisfying the request's JSON schema (when it has one) or a short sentence that
//! says it is scripted.
//!
//! Embeddings are hashed bags of words (lowercased alphanumeric tokens, signed-hashed into
//! `dim` buckets, L2-normalised): texts sharing words have similar vectors, which is enough
//! for retrieval tests. Choice scoring is supported: a per-kind chooser, or by default the
//! word overlap between prompt and option.
//!
//! The backend counts its calls (for "zero backend calls" tests) and the maximum number of
//! calls in flight at once; optional artificial latency (a sleep on a helper thread, no async
//! runtime needed) makes concurrency observable. Responders that had to guess (no rule or word
//! of the prompt decided their answer) say so through the backend's [`ScriptGuesses`]; an
//! [`LlmClient`](super::LlmClient) counts them per prompt kind as `guesses` in `usage.json`.

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sha2::{Digest, Sha256};

use super::backend::{
    BoxFuture, ChatRequest, ChatResponse, ChoiceRequest, LlmBackend, LlmError, RetryHook,
    TokenUsage, estimate_tokens, estimate_tokens_of_len,
};

/// The default embedding dimension of the scripted backend.
pub const SCRIPTED_EMBEDDING_DIM: usize = 384;

/// The random source handed to responders: seeded per call from `(seed, kind, prompt)`.
#[derive(Debug, Clone)]
pub struct ScriptRng(ChaCha8Rng);

impl ScriptRng {
    /// The generator for one call.
    pub(crate) fn for_call(seed: u64, kind: &str, prompt: &str) -> Self {
        let mut hasher = Self::hasher(seed, kind);
        hasher.update(prompt.as_bytes());
        Self(ChaCha8Rng::from_seed(hasher.finalize().into()))
    }

    /// [`Self::for_call`] with the request's [`ChatRequest::prompt_text`], read from its
    /// messages where they lie instead of joined into a new string.
    pub(crate) fn for_request(seed: u64, request: &ChatRequest) -> Self {
        let mut hasher = Self::hasher(seed, &request.kind);
        for message in &request.messages {
            hasher.update(message.content.as_bytes());
            hasher.update(b"\n");
        }
        Self(ChaCha8Rng::from_seed(hasher.finalize().into()))
    }

    /// The seed's hash of `(seed, kind)`, to which the prompt is added.
    fn hasher(seed: u64, kind: &str) -> Sha256 {
        let mut hasher = Sha256::new();
        hasher.update(b"bga-scripted-v1");
        hasher.update(seed.to_le_bytes());
        hasher.update((kind.len() as u64).to_le_bytes());
        hasher.update(kind.as_bytes());
        hasher
    }

    /// A uniformly chosen element (`None` when `items` is empty).
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        if items.is_empty() {
            None
        } else {
            items.get(self.0.random_range(0..items.len()))
        }
    }
}

impl RngCore for ScriptRng {
    fn next_u32(&mut self) -> u32 {
        self.0.next_u32()
    }
    fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }
    fn fill_bytes(&mut self, dst: &mut [u8]) {
        self.0.fill_bytes(dst);
    }
}

/// Answers a chat request of one kind.
pub type Responder = Arc<dyn Fn(&ChatRequest, &mut ScriptRng) -> String + Send + Sync>;

/// Scores the options of a choice request of one kind (one score per option, higher wins).
pub type Chooser = Arc<dyn Fn(&ChoiceRequest, &mut ScriptRng) -> Vec<f32> + Send + Sync>;

/// Deterministic scripted backend. See the [`llm`](crate::llm) module docs.
pub struct ScriptedBackend {
    seed: u64,
    responders: HashMap<String, Responder>,
    default_responder: Option<Responder>,
    choosers: HashMap<String, Chooser>,
    embedding_dim: usize,
    latency: Option<Duration>,
    counters: Counters,
    guesses: Arc<ScriptGuesses>,
}

/// Where scripted responders record that they had to guess: no rule or word of the prompt
/// decided the answer, so a documented tie-break picked it. Shared between a
/// [`ScriptedBackend`] and the responders that capture it (`ScriptedBackend::guess_log`);
/// the client's hook (installed through [`LlmBackend::set_guess_hook`]) counts each guess
/// under its prompt kind.
#[derive(Default)]
pub struct ScriptGuesses {
    total: AtomicU64,
    hook: Mutex<Option<RetryHook>>,
}

impl fmt::Debug for ScriptGuesses {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScriptGuesses")
            .field("total", &self.total())
            .finish_non_exhaustive()
    }
}

impl ScriptGuesses {
    /// Records one guess made while answering a prompt of `kind`.
    pub fn record(&self, kind: &str) {
        self.total.fetch_add(1, Ordering::SeqCst);
        let hook = self
            .hook
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if let Some(hook) = hook {
            hook(kind);
        }
    }

    /// Guesses recorded so far, over all kinds.
    pub fn total(&self) -> u64 {
        self.total.load(Ordering::SeqCst)
    }

    fn set_hook(&self, hook: RetryHook) {
        *self.hook.lock().unwrap_or_else(PoisonError::into_inner) = Some(hook);
    }
}

#[derive(Default)]
struct Counters {
    chat: AtomicU64,
    embed: AtomicU64,
    embedded_texts: AtomicU64,
    score: AtomicU64,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
}

impl fmt::Debug for ScriptedBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut kinds: Vec<_> = self.responders.keys().collect();
        kinds.sort();
        f.debug_struct("ScriptedBackend")
            .field("seed", &self.seed)
            .field("responders", &kinds)
            .field("embedding_dim", &self.embedding_dim)
            .field("latency", &self.latency)
            .field("calls", &self.total_calls())
            .finish()
    }
}

impl Default for ScriptedBackend {
    fn default() -> Self {
        Self::new(0)
    }
}

/// Decrements the in-flight count when a call ends, however it ends.
struct InFlight<'a>(&'a Counters);

impl<'a> InFlight<'a> {
    fn enter(counters: &'a Counters) -> Self {
        let now = counters.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        counters.max_in_flight.fetch_max(now, Ordering::SeqCst);
        Self(counters)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

impl ScriptedBackend {
    /// A scripted backend with no responders, seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        Self {
            seed,
            responders: HashMap::new(),
            default_responder: None,
            choosers: HashMap::new(),
            embedding_dim: SCRIPTED_EMBEDDING_DIM,
            latency: None,
            counters: Counters::default(),
            guesses: Arc::default(),
        }
    }

    /// Answers requests of `kind` with `responder`.
    pub fn with_responder(
        mut self,
        kind: impl Into<String>,
        responder: impl Fn(&ChatRequest, &mut ScriptRng) -> String + Send + Sync + 'static,
    ) -> Self {
        self.responders.insert(kind.into(), Arc::new(responder));
        self
    }

    /// Answers requests of `kind` with the fixed text `answer`.
    pub fn with_answer(self, kind: impl Into<String>, answer: impl Into<String>) -> Self {
        let answer = answer.into();
        self.with_responder(kind, move |_, _| answer.clone())
    }

    /// Answers kinds without their own responder with `responder` (instead of the built-in
    /// schema-driven default).
    pub fn with_default_responder(
        mut self,
        responder: impl Fn(&ChatRequest, &mut ScriptRng) -> String + Send + Sync + 'static,
    ) -> Self {
        self.default_responder = Some(Arc::new(responder));
        self
    }

    /// Scores choice requests of `kind` with `chooser`.
    pub fn with_chooser(
        mut self,
        kind: impl Into<String>,
        chooser: impl Fn(&ChoiceRequest, &mut ScriptRng) -> Vec<f32> + Send + Sync + 'static,
    ) -> Self {
        self.choosers.insert(kind.into(), Arc::new(chooser));
        self
    }

    /// Sets the embedding dimension (at least 1).
    pub fn with_embedding_dim(mut self, dim: usize) -> Self {
        self.embedding_dim = dim.max(1);
        self
    }

    /// Makes every call take `latency` (slept on a helper thread; no async runtime needed).
    pub fn with_latency(mut self, latency: Duration) -> Self {
        self.latency = Some(latency);
        self
    }

    /// The seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Chat calls answered (streamed or not).
    pub fn chat_calls(&self) -> u64 {
        self.counters.chat.load(Ordering::SeqCst)
    }

    /// Embedding calls (batches) answered.
    pub fn embed_calls(&self) -> u64 {
        self.counters.embed.load(Ordering::SeqCst)
    }

    /// Texts embedded, over all batches.
    pub fn embedded_texts(&self) -> u64 {
        self.counters.embedded_texts.load(Ordering::SeqCst)
    }

    /// Choice-scoring calls answered.
    pub fn score_calls(&self) -> u64 {
        self.counters.score.load(Ordering::SeqCst)
    }

    /// Every call of any kind.
    pub fn total_calls(&self) -> u64 {
        self.chat_calls() + self.embed_calls() + self.score_calls()
    }

    /// The log that responders capture to record their guesses (see [`ScriptGuesses`]).
    pub(crate) fn guess_log(&self) -> Arc<ScriptGuesses> {
        Arc::clone(&self.guesses)
    }

    /// Guesses the responders recorded so far.
    pub fn guesses(&self) -> u64 {
        self.guesses.total()
    }

    /// The most calls that were ever in flight at once.
    pub fn max_concurrent(&self) -> usize {
        self.counters.max_in_flight.load(Ordering::SeqCst)
    }

    /// The answer this backend gives to `request` (no counting, no latency).
    pub fn answer(&self, request: &ChatRequest) -> String {
        let mut rng = ScriptRng::for_request(self.seed, request);
        match self
            .responders
            .get(&request.kind)
            .or(self.default_responder.as_ref())
        {
            Some(responder) => responder(request, &mut rng),
            None => default_answer(request, &mut rng),
        }
    }

    /// The scores this backend gives to `request` (no counting, no latency).
    pub fn scores(&self, request: &ChoiceRequest) -> Vec<f32> {
        let prompt: String = request
            .messages
            .iter()
            .map(|m| m.content.as_str())
            .collect::<Vec<_>>()
            .join("\n");
        match self.choosers.get(&request.kind) {
            Some(chooser) => {
                let mut rng = ScriptRng::for_call(self.seed, &request.kind, &prompt);
                chooser(request, &mut rng)
            }
            None => word_overlap_scores(&prompt, &request.options),
        }
    }

    async fn pause(&self) {
        if let Some(latency) = self.latency {
            sleep_on_helper_thread(latency).await;
        }
    }

    fn respond(&self, request: &ChatRequest) -> ChatResponse {
        let text = self.answer(request);
        let usage = TokenUsage {
            prompt_tokens: estimate_tokens_of_len(request.prompt_len()),
            completion_tokens: estimate_tokens(&text),
            reused_prompt_tokens: 0,
        };
        ChatResponse { text, usage }
    }
}

impl LlmBackend for ScriptedBackend {
    fn name(&self) -> &str {
        "scripted"
    }

    fn model(&self) -> &str {
        "scripted"
    }

    fn chat(&self, request: ChatRequest) -> BoxFuture<'_, Result<ChatResponse, LlmError>> {
        Box::pin(async move {
            self.counters.chat.fetch_add(1, Ordering::SeqCst);
            let _guard = InFlight::enter(&self.counters);
            self.pause().await;
            Ok(self.respond(&request))
        })
    }

    fn chat_stream(
        &self,
        request: ChatRequest,
        deltas: async_channel::Sender<String>,
    ) -> BoxFuture<'_, Result<ChatResponse, LlmError>> {
        Box::pin(async move {
            self.counters.chat.fetch_add(1, Ordering::SeqCst);
            let _guard = InFlight::enter(&self.counters);
            self.pause().await;
            let response = self.respond(&request);
            // Word by word, each piece keeping its trailing whitespace, so the pieces
            // concatenate to exactly the answer.
            for piece in response.text.split_inclusive(char::is_whitespace) {
                if deltas.send(piece.to_owned()).await.is_err() {
                    break; // Nobody is watching the stream any more.
                }
            }
            Ok(response)
        })
    }

    fn embed(&self, texts: Vec<String>) -> BoxFuture<'_, Result<Vec<Vec<f32>>, LlmError>> {
        Box::pin(async move {
            self.counters.embed.fetch_add(1, Ordering::SeqCst);
            self.counters
                .embedded_texts
                .fetch_add(texts.len() as u64, Ordering::SeqCst);
            let _guard = InFlight::enter(&self.counters);
            self.pause().await;
            Ok(texts
                .iter()
                .map(|t| hashed_bow_embedding(t, self.embedding_dim))
                .collect())
        })
    }

    fn embedding_model(&self) -> &str {
        "scripted-hashed-bow"
    }

    fn embedding_dim(&self) -> usize {
        self.embedding_dim
    }

    fn score_choices(&self, request: ChoiceRequest) -> BoxFuture<'_, Result<Vec<f32>, LlmError>> {
        Box::pin(async move {
            self.counters.score.fetch_add(1, Ordering::SeqCst);
            let _guard = InFlight::enter(&self.counters);
            self.pause().await;
            let mut scores = self.scores(&request);
            // A chooser returning the wrong count must not break callers that zip by index.
            scores.resize(request.options.len(), f32::NEG_INFINITY);
            Ok(scores)
        })
    }

    fn set_guess_hook(&self, hook: RetryHook) {
        self.guesses.set_hook(hook);
    }

    fn supports_choice_scoring(&self) -> bool {
        true
    }
}

/// Sleeps `duration` on a helper thread and wakes the awaiting task through a channel, so it
/// works under any executor. If no thread can be spawned the sleep is skipped.
async fn sleep_on_helper_thread(duration: Duration) {
    let (tx, rx) = async_channel::bounded::<()>(1);
    let spawned = std::thread::Builder::new()
        .name("scripted-latency".into())
        .spawn(move || {
            std::thread::sleep(duration);
            let _ = tx.try_send(());
        });
    if spawned.is_ok() {
        let _ = rx.recv().await;
    }
}

/// The alphanumeric words of `text`, as written.
pub(crate) fn word_pieces(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
}

/// Lowercased alphanumeric words of `text` ([`word_pieces`], lowercased).
pub(crate) fn word_tokens(text: &str) -> impl Iterator<Item = String> + '_ {
    word_pieces(text).map(str::to_lowercase)
}

/// FNV-1a's starting value (its 64-bit offset basis).
const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// One byte into an FNV-1a hash.
fn fnv_step(hash: u64, byte: u8) -> u64 {
    (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
}

/// 64-bit FNV-1a: stable across platforms and Rust versions (unlike `DefaultHasher`).
pub(crate) fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().copied().fold(FNV_OFFSET, fnv_step)
}

/// [`fnv1a`] of the parts, each followed by a `0xff` byte (never part of UTF-8 text, so the
/// boundaries count: `["ab", "c"]` and `["a", "bc"]` differ): stable per-request seeds and
/// choices.
pub(crate) fn fnv1a_parts(parts: &[&str]) -> u64 {
    parts.iter().fold(FNV_OFFSET, |hash, part| {
        part.bytes()
            .chain(std::iter::once(0xff))
            .fold(hash, fnv_step)
    })
}

/// The scripted embedding of `text`: signed hashed bag of words, L2-normalised, `dim` long.
///
/// Text without any word embeds as the (unit) vector of the token `"<empty>"`, so no vector
/// is ever zero and cosine similarity is always defined.
pub fn hashed_bow_embedding(text: &str, dim: usize) -> Vec<f32> {
    let dim = dim.max(1);
    let mut vector = vec![0.0f32; dim];
    let mut add = |token: &str| {
        let hash = fnv1a(token.as_bytes());
        let bucket = (hash % dim as u64) as usize;
        let sign = if hash >> 63 == 1 { -1.0 } else { 1.0 };
        if let Some(slot) = vector.get_mut(bucket) {
            *slot += sign;
        }
    };
    let mut any = false;
    for token in word_tokens(text) {
        add(&token);
        any = true;
    }
    if !any {
        add("<empty>");
    }
    let norm = vector.iter().map(|v| v * v).sum::<f32>().sqrt();
    if norm > 0.0 {
        for v in &mut vector {
            *v /= norm;
        }
    } else if let Some(first) = vector.first_mut() {
        // Tokens cancelled out exactly (e.g. two words with opposite signs in one bucket).
        *first = 1.0;
    }
    vector
}

/// The default choice score: `ln((overlap + 0.5) / (words + 1))`, where `words` is the number
/// of words in the option and `overlap` how many of them occur in the prompt. Higher is
/// better; an option whose words all appear in the prompt scores close to 0.
pub(crate) fn word_overlap_scores(prompt: &str, options: &[String]) -> Vec<f32> {
    // An ASCII prompt (nearly every one) is lowercased in one piece and its words looked up
    // where they lie, sorted: the same set of words as `word_tokens` gives, without a string
    // for each of a long prompt's hundreds of words.
    let lowered = prompt.is_ascii().then(|| prompt.to_ascii_lowercase());
    let prompt_words: PromptWords<'_> = match &lowered {
        Some(lower) => {
            let mut words: Vec<&str> = word_pieces(lower).collect();
            words.sort_unstable();
            words.dedup();
            PromptWords::Sorted(words)
        }
        None => PromptWords::Set(word_tokens(prompt).collect()),
    };
    options
        .iter()
        .map(|option| {
            let words: Vec<String> = word_tokens(option).collect();
            let overlap = words.iter().filter(|w| prompt_words.contains(w)).count();
            ((overlap as f32 + 0.5) / (words.len() as f32 + 1.0)).ln()
        })
        .collect()
}

/// A prompt's distinct words, as [`word_overlap_scores`] looks them up.
enum PromptWords<'a> {
    /// Sorted and deduplicated slices of the lowercased prompt.
    Sorted(Vec<&'a str>),
    /// [`word_tokens`] of a prompt that is not all ASCII.
    Set(BTreeSet<String>),
}

impl PromptWords<'_> {
    fn contains(&self, word: &str) -> bool {
        match self {
            Self::Sorted(words) => words.binary_search(&word).is_ok(),
            Self::Set(words) => words.contains(word),
        }
    }
}

/// The built-in answer: a minimal JSON value satisfying the schema, or an honest sentence.
fn default_answer(request: &ChatRequest, rng: &mut ScriptRng) -> String {
    match &request.json_schema {
        Some(schema) => value_for_schema(schema, rng, 0).to_string(),
        None => format!("(scripted answer for `{}`)", request.kind),
    }
}

/// A small JSON value that satisfies common JSON-schema shapes (`type`, `enum`, `const`,
/// `properties`/`required`, `items`/`minItems`, `minimum`/`maximum`, `anyOf`/`oneOf`).
pub(crate) fn value_for_schema(
    schema: &serde_json::Value,
    rng: &mut ScriptRng,
    depth: usize,
) -> serde_json::Value {
    use serde_json::{Map, Value, json};
    if depth > 8 {
        return Value::Null;
    }
    let Some(obj) = schema.as_object() else {
        return Value::Null;
    };
    if let Some(value) = obj.get("const") {
        return value.clone();
    }
    if let Some(choices) = obj.get("enum").and_then(Value::as_array)
        && let Some(choice) = rng.pick(choices)
    {
        return choice.clone();
    }
    for combinator in ["anyOf", "oneOf", "allOf"] {
        if let Some(first) = obj
            .get(combinator)
            .and_then(Value::as_array)
            .and_then(|a| a.first())
        {
            return value_for_schema(first, rng, depth + 1);
        }
    }
    let ty = match obj.get("type") {
        Some(Value::String(ty)) => ty.as_str(),
        Some(Value::Array(types)) => types
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null")
            .unwrap_or("null"),
        _ if obj.contains_key("properties") => "object",
        _ if obj.contains_key("items") => "array",
        _ => "string",
    };
    let bound = |key: &str| obj.get(key).and_then(Value::as_f64);
    match ty {
        "object" => {
            let mut out = Map::new();
            if let Some(props) = obj.get("properties").and_then(Value::as_object) {
                let required: Option<Vec<&str>> = obj
                    .get("required")
                    .and_then(Value::as_array)
                    .map(|r| r.iter().filter_map(Value::as_str).collect());
                for (name, prop) in props {
                    if required.as_ref().is_none_or(|r| r.contains(&name.as_str())) {
                        out.insert(name.clone(), value_for_schema(prop, rng, depth + 1));
                    }
                }
            }
            Value::Object(out)
        }
        "array" => {
            let min = obj.get("minItems").and_then(Value::as_u64).unwrap_or(1);
            let max = obj
                .get("maxItems")
                .and_then(Value::as_u64)
                .unwrap_or(u64::MAX);
            let count = min.max(1).min(max).min(16);
            let items = obj.get("items").cloned().unwrap_or(json!({}));
            Value::Array(
                (0..count)
                    .map(|_| value_for_schema(&items, rng, depth + 1))
                    .collect(),
            )
        }
        "integer" => {
            let lo = bound("minimum").map_or(0, |v| v.ceil() as i64);
            let hi = bound("maximum").map_or(lo.saturating_add(10), |v| v.floor() as i64);
            if hi < lo {
                json!(lo)
            } else {
                json!(rng.random_range(lo..=hi))
            }
        }
        "number" => {
            let lo = bound("minimum").unwrap_or(0.0);
            let hi = bound("maximum").unwrap_or(lo + 10.0);
            if hi.partial_cmp(&lo) == Some(std::cmp::Ordering::Greater) {
                json!(rng.random_range(lo..hi))
            } else {
                json!(lo)
            }
        }
        "boolean" => json!(rng.random_bool(0.5)),
        "null" => Value::Null,
        _ => {
            let min = obj.get("minLength").and_then(Value::as_u64).unwrap_or(0) as usize;
            let mut text = String::from("scripted");
            while text.len() < min {
                text.push_str(" scripted");
            }
            Value::String(text)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use serde_json::json;

    #[test]
    fn overlap_scores_are_those_of_the_word_sets() {
        let by_sets = |prompt: &str, options: &[String]| -> Vec<f32> {
            let prompt_words: BTreeSet<String> = word_tokens(prompt).collect();
            options
                .iter()
                .map(|option| {
                    let words: Vec<String> = word_tokens(option).collect();
                    let overlap = words.iter().filter(|w| prompt_words.contains(*w)).count();
                    ((overlap as f32 + 0.5) / (words.len() as f32 + 1.0)).ln()
                })
                .collect()
        };
        let options: Vec<String> = [
            "Hobbs Cafe",
            "the cafe counter",
            "Park",
            "",
            "Straße 9",
            "ΣΟΦΙΑ",
        ]
        .iter()
        .map(|o| (*o).to_string())
        .collect();
        for prompt in [
            "",
            "Ada is at Hobbs CAFE; she goes to the park. Park!",
            "Ada goes to the café on Straße 9 with ΣΟΦΙΑ",
            "counter-cafe the the THE",
        ] {
            assert_eq!(
                word_overlap_scores(prompt, &options),
                by_sets(prompt, &options),
                "{prompt:?}"
            );
        }
    }

    #[test]
    fn embedding_is_unit_length_and_similar_for_shared_words() {
        let a = hashed_bow_embedding("Isabella is planning a Valentine's Day party", 384);
        let b = hashed_bow_embedding("isabella planning a party", 384);
        let c = hashed_bow_embedding("the stove is broken in the kitchen", 384);
        let norm: f32 = a.iter().map(|v| v * v).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5);
        let dot = |x: &[f32], y: &[f32]| x.iter().zip(y).map(|(p, q)| p * q).sum::<f32>();
        assert!(dot(&a, &b) > 0.6, "shared words: {}", dot(&a, &b));
        assert!(dot(&a, &b) > dot(&a, &c) + 0.3);
        assert_eq!(
            hashed_bow_embedding("Party!", 16),
            hashed_bow_embedding("party", 16)
        );
    }

    #[test]
    fn empty_text_embeds_to_a_unit_vector() {
        let v = hashed_bow_embedding("  ... ", 8);
        assert_eq!(v.len(), 8);
        assert!((v.iter().map(|x| x * x).sum::<f32>() - 1.0).abs() < 1e-5);
        assert_eq!(hashed_bow_embedding("", 0).len(), 1);
    }

    #[test]
    fn one_word_embedding_is_a_signed_basis_vector() {
        let v = hashed_bow_embedding("hello", 8);
        let hash = fnv1a(b"hello");
        let bucket = (hash % 8) as usize;
        let sign = if hash >> 63 == 1 { -1.0 } else { 1.0 };
        for (i, x) in v.iter().enumerate() {
            assert_eq!(*x, if i == bucket { sign } else { 0.0 });
        }
    }

    #[test]
    fn fnv_matches_reference_values() {
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
    }

    #[test]
    fn fnv_of_parts_is_fnv_of_the_parts_each_ended_by_0xff() {
        assert_eq!(fnv1a_parts(&[]), fnv1a(b""));
        assert_eq!(fnv1a_parts(&["ab", "c"]), fnv1a(b"ab\xffc\xff"));
        assert_ne!(fnv1a_parts(&["ab", "c"]), fnv1a_parts(&["a", "bc"]));
        assert_ne!(fnv1a_parts(&["abc"]), fnv1a_parts(&["ab", "c"]));
    }

    #[test]
    fn word_overlap_prefers_matching_options() {
        let scores = word_overlap_scores(
            "Klaus is at the library. Where does he go?",
            &["the library".into(), "the park bench".into(), "".into()],
        );
        assert!((scores[0] - (2.5f32 / 3.0).ln()).abs() < 1e-6);
        assert!((scores[1] - (1.5f32 / 4.0).ln()).abs() < 1e-6);
        assert!((scores[2] - 0.5f32.ln()).abs() < 1e-6);
    }

    #[test]
    fn schema_default_satisfies_shapes() {
        let schema = json!({
            "type": "object",
            "properties": {
                "hour": {"type": "integer", "minimum": 4, "maximum": 11},
                "mood": {"enum": ["calm", "busy"]},
                "tasks": {"type": "array", "items": {"type": "string"}, "minItems": 2},
                "ok": {"type": "boolean"},
                "note": {"type": ["null", "string"]},
                "skipped": {"type": "number"}
            },
            "required": ["hour", "mood", "tasks", "ok", "note"]
        });
        let mut rng = ScriptRng::for_call(1, "k", "p");
        let value = value_for_schema(&schema, &mut rng, 0);
        let hour = value["hour"].as_i64().expect("integer");
        assert!((4..=11).contains(&hour));
        assert!(["calm", "busy"].contains(&value["mood"].as_str().expect("string")));
        assert_eq!(value["tasks"].as_array().map(Vec::len), Some(2));
        assert!(value["ok"].is_boolean());
        assert_eq!(value["note"], json!("scripted"));
        assert!(value.get("skipped").is_none(), "not required");
    }

    #[test]
    fn a_request_seeds_as_its_joined_prompt_did() {
        let mut two = ChatRequest::new("kind", "the question");
        two.messages
            .insert(0, crate::llm::ChatMessage::system("be brief"));
        let requests = [ChatRequest::new("kind", "p"), ChatRequest::new("", ""), two];
        for request in requests {
            for seed in [0, 7] {
                let mut joined = ScriptRng::for_call(seed, &request.kind, &request.prompt_text());
                let mut parts = ScriptRng::for_request(seed, &request);
                assert_eq!(joined.next_u64(), parts.next_u64(), "{request:?}");
            }
            assert_eq!(request.prompt_text().len(), request.prompt_len());
        }
    }

    #[test]
    fn answers_are_deterministic_per_prompt() {
        let backend = ScriptedBackend::new(7).with_responder("roll", |_, rng| {
            rng.random_range(0..1_000_000u32).to_string()
        });
        let a = backend.answer(&ChatRequest::new("roll", "one"));
        let b = backend.answer(&ChatRequest::new("roll", "two"));
        assert_eq!(a, backend.answer(&ChatRequest::new("roll", "one")));
        assert_ne!(a, b);
        let other_seed = ScriptedBackend::new(8).with_responder("roll", |_, rng| {
            rng.random_range(0..1_000_000u32).to_string()
        });
        assert_ne!(a, other_seed.answer(&ChatRequest::new("roll", "one")));
        assert_eq!(
            backend.answer(&ChatRequest::new("unknown", "x")),
            "(scripted answer for `unknown`)"
        );
    }
}
