//! [`LlmClient`]: the handle every prompt function and stage task calls the model through.
//!
//! It wraps one backend with the three things every call needs: a global concurrency limit
//! (an async semaphore, so waiting never blocks a thread, handing permits out first come,
//! first served), the response and embedding cache (a cacheable chat request identical to one
//! in flight waits for that one's answer instead of asking again), and usage accounting per
//! prompt kind. Cloning it is cheap (one `Arc`), so each task gets
//! its own handle; it is a Bevy `Resource` so systems can hand it to the tasks they spawn.

use std::borrow::Cow;
use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bevy::prelude::Resource;

use crate::clock::Bell;

use super::backend::{ChatRequest, ChatResponse, ChoiceRequest, LlmBackend, LlmError, RetryBudget};
use super::cache::{
    CacheEntry, CacheError, CacheKey, CacheLimits, CachedAnswer, ResponseCache, chat_cache_key,
    choice_cache_key, embedding_cache_key,
};
use super::permits::{FairPermit, FairSemaphore};
use super::usage::{EMBED_KIND, UsageCounters, UsageReport};

/// The default number of backend calls in flight at once. High enough that a town's personas
/// think concurrently (25 personas planning their day keep ~32 calls in flight); a server that
/// serves fewer in parallel simply queues the rest. Lower it with `--llm-concurrency` for
/// rate-limited endpoints.
pub const DEFAULT_CONCURRENCY: usize = 32;

/// How many answers of a kind [`LlmClient::garbles_most`] waits for before it judges the
/// model on that kind.
pub const GARBLING_MIN_ANSWERS: u64 = 4;

/// The default number of texts per embedding request.
pub const DEFAULT_EMBED_BATCH: usize = 64;

/// Which chat answers the client caches.
///
/// Embeddings and choice scores are deterministic, so they are cached under every policy but
/// [`CachePolicy::Off`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CachePolicy {
    /// Nothing is cached.
    Off,
    /// Only chat requests whose answer is meant to be reproducible: temperature 0 or an
    /// explicit seed. Sampled answers (temperature > 0, no seed) always reach the backend, so
    /// a persona asking the same sampled question twice may get two different answers. The
    /// default.
    #[default]
    Deterministic,
    /// Every chat answer, sampled or not: what `--record-cache`/`--replay-cache` use so a
    /// rerun costs nothing.
    Always,
}

impl CachePolicy {
    fn caches_chat(self, request: &ChatRequest) -> bool {
        match self {
            Self::Off => false,
            Self::Deterministic => request.temperature == 0.0 || request.seed.is_some(),
            Self::Always => true,
        }
    }

    fn caches_deterministic(self) -> bool {
        self != Self::Off
    }
}

/// A chat answer from [`LlmClient::ask`], not cached yet: [`LlmClient::keep`] caches it once
/// the caller has validated it.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatAnswer {
    /// The answer.
    pub response: ChatResponse,
    kind: String,
    /// The cache key, when the policy caches this request.
    key: Option<CacheKey>,
    /// Whether it came from the cache (keeping it again changes nothing).
    cached: bool,
}

impl ChatAnswer {
    fn cached(response: ChatResponse, kind: &str) -> Self {
        Self {
            response,
            kind: kind.to_owned(),
            key: None,
            cached: true,
        }
    }

    /// Whether the answer came from the cache rather than the backend.
    pub fn from_cache(&self) -> bool {
        self.cached
    }
}

/// What one thought (a routing key: the persona) has asked the backend: the kind of the call
/// it waits on now, and how many of its calls have ended. A HUD shows what a persona waits for
/// ("planning the day: 7 answers") from it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ThoughtCalls {
    /// The prompt kind of the call in flight (the latest one when several are).
    pub asking: Option<String>,
    /// Calls in flight.
    pub in_flight: u32,
    /// Calls that have ended (answered, failed or cancelled) since the client started.
    pub ended: u64,
}

struct ClientInner {
    backend: Arc<dyn LlmBackend>,
    semaphore: FairSemaphore,
    concurrency: usize,
    in_flight: AtomicUsize,
    /// Per routing key: what each thought is asking (see [`ThoughtCalls`]).
    thoughts: Mutex<std::collections::HashMap<String, ThoughtCalls>>,
    /// Rung each time a backend call ends (answered, failed or cancelled), so a loop waiting
    /// for thoughts can sleep until something may have changed instead of spinning.
    bell: Bell,
    cache: ResponseCache,
    policy: CachePolicy,
    usage: Arc<UsageCounters>,
    embed_batch: usize,
    flights: Flights,
    /// How the local model was picked, for the usage report.
    model_pick: Option<super::model_pick::ModelPick>,
}

/// Cacheable chat requests in flight, by cache key, with the callers waiting for the same
/// answer. Several personas often ask the very same deterministic question at once (the same
/// place, the same event); the first asks the backend, the others wait for its answer instead
/// of each sending a copy — what the cache would have given them a moment later.
#[derive(Default)]
struct Flights(
    Mutex<std::collections::HashMap<CacheKey, Vec<async_channel::Sender<ChatResponse>>>>,
);

/// What a cacheable chat request does about an identical one in flight.
enum Flight<'a> {
    /// None is in flight: this one asks the backend and answers the followers.
    Lead(FlightLead<'a>),
    /// One is: wait for its answer (a closed channel: it failed or was dropped).
    Follow(async_channel::Receiver<ChatResponse>),
}

/// The leading request of a flight; dropping it ends the flight (followers whose leader
/// failed or was cancelled see a closed channel and ask themselves).
struct FlightLead<'a> {
    flights: &'a Flights,
    key: CacheKey,
}

impl Flights {
    fn lock(
        &self,
    ) -> std::sync::MutexGuard<
        '_,
        std::collections::HashMap<CacheKey, Vec<async_channel::Sender<ChatResponse>>>,
    > {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn join(&self, key: CacheKey) -> Flight<'_> {
        let mut flights = self.lock();
        match flights.get_mut(&key) {
            Some(followers) => {
                let (tx, rx) = async_channel::bounded(1);
                followers.push(tx);
                Flight::Follow(rx)
            }
            None => {
                flights.insert(key, Vec::new());
                Flight::Lead(FlightLead { flights: self, key })
            }
        }
    }
}

impl FlightLead<'_> {
    /// Hands `response` to every follower and ends the flight.
    fn answer(self, response: &ChatResponse) {
        let followers = self.flights.lock().remove(&self.key).unwrap_or_default();
        for follower in followers {
            // A follower that gave up (cancelled) simply is not listening.
            let _ = follower.try_send(response.clone());
        }
    }
}

impl Drop for FlightLead<'_> {
    fn drop(&mut self) {
        // Ends the flight if `answer` did not (a failure or a cancellation): the followers'
        // channels close.
        self.flights.lock().remove(&self.key);
    }
}

/// A cheap-to-clone handle on a backend with a concurrency limit, a cache and usage
/// accounting. See the [`llm`](crate::llm) module docs.
#[derive(Resource, Clone)]
pub struct LlmClient {
    inner: Arc<ClientInner>,
}

impl fmt::Debug for LlmClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LlmClient")
            .field("backend", &self.inner.backend.name())
            .field("model", &self.inner.backend.model())
            .field("concurrency", &self.inner.concurrency)
            .field("in_flight", &self.in_flight())
            .field("cache_policy", &self.inner.policy)
            .field("cached", &self.inner.cache.len())
            .finish()
    }
}

/// Configures an [`LlmClient`]; see [`LlmClient::builder`].
pub struct LlmClientBuilder {
    backend: Arc<dyn LlmBackend>,
    concurrency: usize,
    policy: CachePolicy,
    cache_path: Option<PathBuf>,
    cache_limits: CacheLimits,
    embed_batch: usize,
    model_pick: Option<super::model_pick::ModelPick>,
}

impl fmt::Debug for LlmClientBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LlmClientBuilder")
            .field("backend", &self.backend.name())
            .field("concurrency", &self.concurrency)
            .field("policy", &self.policy)
            .field("cache_path", &self.cache_path)
            .field("embed_batch", &self.embed_batch)
            .finish()
    }
}

impl LlmClientBuilder {
    /// At most `limit` backend calls in flight at once (at least 1; default
    /// [`DEFAULT_CONCURRENCY`]).
    pub fn concurrency(mut self, limit: usize) -> Self {
        self.concurrency = limit.max(1);
        self
    }

    /// Which chat answers to cache (default [`CachePolicy::Deterministic`]).
    pub fn cache_policy(mut self, policy: CachePolicy) -> Self {
        self.policy = policy;
        self
    }

    /// Persists the cache to this JSON-lines file: loaded when built, appended on new entries.
    pub fn cache_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.cache_path = Some(path.into());
        self
    }

    /// Bounds the cache in memory and on disk (default [`CacheLimits::default`]).
    pub fn cache_limits(mut self, limits: CacheLimits) -> Self {
        self.cache_limits = limits;
        self
    }

    /// Sends at most `size` texts per embedding request (at least 1; default
    /// [`DEFAULT_EMBED_BATCH`]).
    pub fn embed_batch_size(mut self, size: usize) -> Self {
        self.embed_batch = size.max(1);
        self
    }

    /// Records how the backend's model was picked (shown in the usage report).
    pub fn model_pick(mut self, pick: Option<super::model_pick::ModelPick>) -> Self {
        self.model_pick = pick;
        self
    }

    /// Builds the client (opening the cache file, if any) and installs a retry hook on the
    /// backend so its transport retries are counted.
    pub fn build(self) -> Result<LlmClient, CacheError> {
        let cache = match &self.cache_path {
            Some(path) => {
                let (cache, report) = ResponseCache::open_with_limits(path, self.cache_limits)?;
                bevy::log::info!(
                    "response cache {}: {} entries loaded",
                    path.display(),
                    report.loaded
                );
                cache
            }
            None => ResponseCache::in_memory_with_limits(self.cache_limits),
        };
        Ok(self.finish(cache))
    }

    fn finish(self, cache: ResponseCache) -> LlmClient {
        let usage = Arc::new(UsageCounters::new());
        let hook_usage = Arc::clone(&usage);
        self.backend.set_retry_hook(Arc::new(move |kind: &str| {
            hook_usage.record_transport_retry(kind)
        }));
        let guess_usage = Arc::clone(&usage);
        self.backend
            .set_guess_hook(Arc::new(move |kind: &str| guess_usage.record_guess(kind)));
        LlmClient {
            inner: Arc::new(ClientInner {
                backend: self.backend,
                semaphore: FairSemaphore::new(self.concurrency),
                concurrency: self.concurrency,
                in_flight: AtomicUsize::new(0),
                thoughts: Mutex::default(),
                bell: Bell::new(),
                cache,
                policy: self.policy,
                usage,
                embed_batch: self.embed_batch,
                flights: Flights::default(),
                model_pick: self.model_pick,
            }),
        }
    }
}

/// Checks a batch of embeddings before it is used or cached: every vector non-empty, finite,
/// and of one dimension (the backend's, once it knows it).
fn usable_embeddings(vectors: &[Vec<f32>], known_dim: usize) -> Result<(), LlmError> {
    let dim = if known_dim > 0 {
        known_dim
    } else {
        vectors.first().map_or(0, Vec::len)
    };
    for vector in vectors {
        if vector.is_empty() || vector.len() != dim {
            return Err(LlmError::Malformed(format!(
                "an embedding of dimension {} where {dim} was expected",
                vector.len()
            )));
        }
        if !vector.iter().all(|v| v.is_finite()) {
            return Err(LlmError::Malformed(
                "an embedding with NaN or infinity".into(),
            ));
        }
    }
    Ok(())
}

/// A concurrency permit plus the in-flight count, both released on drop (so a cancelled
/// task frees its slot); dropping it rings the client's answer bell. Permits are handed out
/// first come, first served ([`FairSemaphore`]), so no persona waits out a whole burst.
struct Permit<'a> {
    _guard: FairPermit<'a>,
    in_flight: &'a AtomicUsize,
    bell: &'a Bell,
    /// The thought that asks, counted in [`ClientInner::thoughts`] until the call ends.
    thought: Option<(
        &'a Mutex<std::collections::HashMap<String, ThoughtCalls>>,
        String,
    )>,
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        if let Some((thoughts, key)) = &self.thought {
            let mut thoughts = thoughts
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some(calls) = thoughts.get_mut(key) {
                calls.in_flight = calls.in_flight.saturating_sub(1);
                calls.ended += 1;
                if calls.in_flight == 0 {
                    calls.asking = None;
                }
            }
        }
        self.bell.ring();
    }
}

impl LlmClient {
    /// A client with the default settings and an in-memory cache.
    pub fn new(backend: Arc<dyn LlmBackend>) -> Self {
        Self::builder(backend).finish(ResponseCache::in_memory())
    }

    /// Starts configuring a client for `backend`.
    pub fn builder(backend: Arc<dyn LlmBackend>) -> LlmClientBuilder {
        LlmClientBuilder {
            backend,
            concurrency: DEFAULT_CONCURRENCY,
            policy: CachePolicy::default(),
            cache_path: None,
            cache_limits: CacheLimits::default(),
            embed_batch: DEFAULT_EMBED_BATCH,
            model_pick: None,
        }
    }

    /// A concurrency permit for a call of `kind` asked by the thought `affinity`.
    async fn permit(&self, kind: &str, affinity: Option<&str>) -> Permit<'_> {
        let guard = self.inner.semaphore.acquire().await;
        self.inner.in_flight.fetch_add(1, Ordering::SeqCst);
        let thought = affinity.map(|key| {
            let mut thoughts = self
                .inner
                .thoughts
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let calls = thoughts.entry(key.to_owned()).or_default();
            calls.asking = Some(kind.to_owned());
            calls.in_flight += 1;
            (&self.inner.thoughts, key.to_owned())
        });
        Permit {
            _guard: guard,
            in_flight: &self.inner.in_flight,
            bell: &self.inner.bell,
            thought,
        }
    }

    /// What the thought `key` (a persona's routing key) is asking the backend now and how
    /// many of its calls have ended (see [`ThoughtCalls`]).
    pub fn thought_calls(&self, key: &str) -> ThoughtCalls {
        self.inner
            .thoughts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(key)
            .cloned()
            .unwrap_or_default()
    }

    fn store(&self, key: CacheKey, model: &str, kind: &str, answer: CachedAnswer) {
        self.store_entry(key, model, kind, answer, false);
    }

    fn store_entry(
        &self,
        key: CacheKey,
        model: &str,
        kind: &str,
        answer: CachedAnswer,
        rejected: bool,
    ) {
        let entry = CacheEntry {
            key,
            model: model.to_owned(),
            kind: kind.to_owned(),
            answer,
            rejected,
        };
        if let Err(err) = self.inner.cache.insert(entry) {
            // The answer is still good and stays cached in memory; only persistence failed.
            bevy::log::warn!("{err}");
        }
    }

    /// A cached chat answer: a rejected one only under [`CachePolicy::Always`] (a recording's
    /// replay retries as the recorded run did).
    fn cached_chat(&self, key: Option<&CacheKey>) -> Option<ChatResponse> {
        self.inner
            .cache
            .chat_answer(key?, self.inner.policy == CachePolicy::Always)
    }

    /// Completes a chat and caches the answer as it is (when the [`CachePolicy`] allows): for
    /// callers with nothing to validate. Prompts use [`LlmClient::ask`] and cache only answers
    /// they accept.
    pub async fn chat(&self, request: ChatRequest) -> Result<ChatResponse, LlmError> {
        let answer = self.ask(request).await?;
        self.keep(&answer);
        Ok(answer.response)
    }

    /// Completes a chat without caching it: from the cache when the [`CachePolicy`] allows and
    /// the answer is there, otherwise through the backend (waiting for a concurrency permit
    /// first). Hand the answer to [`LlmClient::keep`] once it has been validated, or to
    /// `LlmClient::reject` if it was not usable.
    pub async fn ask(&self, request: ChatRequest) -> Result<ChatAnswer, LlmError> {
        self.ask_cow(Cow::Owned(request)).await
    }

    /// [`LlmClient::ask`] of a request the caller keeps (to ask again with another seed): it
    /// is copied only when the backend is asked, not for an answer from the cache.
    pub(crate) async fn ask_borrowed(&self, request: &ChatRequest) -> Result<ChatAnswer, LlmError> {
        self.ask_cow(Cow::Borrowed(request)).await
    }

    async fn ask_cow(&self, request: Cow<'_, ChatRequest>) -> Result<ChatAnswer, LlmError> {
        let backend = &self.inner.backend;
        let key = self
            .inner
            .policy
            .caches_chat(&request)
            .then(|| chat_cache_key(backend.model(), &request));
        if let Some(response) = self.cached_chat(key.as_ref()) {
            self.inner.usage.record_cache_hits(&request.kind, 1);
            return Ok(ChatAnswer::cached(response, &request.kind));
        }
        // The same cacheable question already on its way: wait for that answer (a cache hit a
        // moment early); if that call fails or is dropped, ask again here.
        let lead = loop {
            let Some(key) = key else { break None };
            match self.inner.flights.join(key) {
                Flight::Lead(lead) => {
                    // The previous flight may have been kept since the first look.
                    if let Some(response) = self.cached_chat(Some(&key)) {
                        self.inner.usage.record_cache_hits(&request.kind, 1);
                        return Ok(ChatAnswer::cached(response, &request.kind));
                    }
                    break Some(lead);
                }
                Flight::Follow(answer) => {
                    if let Ok(response) = answer.recv().await {
                        self.inner.usage.record_cache_hits(&request.kind, 1);
                        return Ok(ChatAnswer::cached(response, &request.kind));
                    }
                    if let Some(response) = self.cached_chat(Some(&key)) {
                        self.inner.usage.record_cache_hits(&request.kind, 1);
                        return Ok(ChatAnswer::cached(response, &request.kind));
                    }
                }
            }
        };
        let kind = request.kind.clone();
        let _permit = self.permit(&kind, request.affinity.as_deref()).await;
        bevy::log::trace!(kind = %kind, "llm chat request");
        let start = Instant::now();
        let result = backend.chat(request.into_owned()).await;
        if let (Some(lead), Ok(response)) = (lead, &result) {
            lead.answer(response);
        }
        self.finish_chat(&kind, key, start, result)
    }

    /// [`LlmClient::chat`] streamed: text deltas go to `deltas` as they arrive (a cached answer
    /// is sent as one delta). Returns the whole answer, cached as it is.
    pub async fn chat_stream(
        &self,
        request: ChatRequest,
        deltas: async_channel::Sender<String>,
    ) -> Result<ChatResponse, LlmError> {
        let answer = self.ask_stream(request, deltas).await?;
        self.keep(&answer);
        Ok(answer.response)
    }

    /// [`LlmClient::ask`] streamed: text deltas go to `deltas` as they arrive (a cached answer
    /// is sent as one delta). Nothing is cached until [`LlmClient::keep`].
    pub(crate) async fn ask_stream(
        &self,
        request: ChatRequest,
        deltas: async_channel::Sender<String>,
    ) -> Result<ChatAnswer, LlmError> {
        let backend = &self.inner.backend;
        let key = self
            .inner
            .policy
            .caches_chat(&request)
            .then(|| chat_cache_key(backend.model(), &request));
        if let Some(response) = self.cached_chat(key.as_ref()) {
            self.inner.usage.record_cache_hits(&request.kind, 1);
            // A closed receiver only means nobody is watching the stream.
            let _ = deltas.send(response.text.clone()).await;
            return Ok(ChatAnswer::cached(response, &request.kind));
        }
        let kind = request.kind.clone();
        let _permit = self.permit(&kind, request.affinity.as_deref()).await;
        let start = Instant::now();
        let result = backend.chat_stream(request, deltas).await;
        self.finish_chat(&kind, key, start, result)
    }

    fn finish_chat(
        &self,
        kind: &str,
        key: Option<CacheKey>,
        start: Instant,
        result: Result<ChatResponse, LlmError>,
    ) -> Result<ChatAnswer, LlmError> {
        let elapsed = start.elapsed();
        match result {
            Ok(response) => {
                self.inner
                    .usage
                    .record_success(kind, response.usage, elapsed);
                bevy::log::trace!(kind, ms = elapsed.as_millis() as u64, "llm chat answered");
                Ok(ChatAnswer {
                    response,
                    kind: kind.to_owned(),
                    key,
                    cached: false,
                })
            }
            Err(err) => {
                self.inner.usage.record_error(kind, elapsed);
                bevy::log::debug!(kind, "llm chat failed: {err}");
                Err(err)
            }
        }
    }

    /// Caches an answer from [`LlmClient::ask`] that its caller accepted (when the
    /// [`CachePolicy`] caches that request; an answer that came from the cache stays as it is).
    pub fn keep(&self, answer: &ChatAnswer) {
        self.store_answer(answer, false);
    }

    /// Notes that an answer from [`LlmClient::ask`] was unusable. It is never cached for
    /// reuse; only a recording ([`CachePolicy::Always`]) keeps it, marked rejected, so that
    /// its replay rejects and retries exactly as the recorded run did.
    pub(crate) fn reject(&self, answer: &ChatAnswer) {
        if self.inner.policy == CachePolicy::Always {
            self.store_answer(answer, true);
        }
    }

    fn store_answer(&self, answer: &ChatAnswer, rejected: bool) {
        if let (Some(key), false) = (answer.key, answer.cached) {
            let model = self.inner.backend.model().to_owned();
            let response = CachedAnswer::Chat(answer.response.clone());
            self.store_entry(key, &model, &answer.kind, response, rejected);
        }
    }

    /// Embeds `texts`, returning one vector per text in order. Cached texts (and repeats
    /// within `texts`) are not sent again; the rest go to the backend in batches.
    pub async fn embed(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>, LlmError> {
        self.embed_within(texts, None).await
    }

    /// [`LlmClient::embed`] for a thought with a [`RetryBudget`] (see
    /// [`LlmBackend::embed_within`]).
    pub async fn embed_within(
        &self,
        texts: Vec<String>,
        budget: Option<RetryBudget>,
    ) -> Result<Vec<Vec<f32>>, LlmError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let backend = &self.inner.backend;
        let embed_model = backend.embedding_model().to_owned();
        let use_cache = self.inner.policy.caches_deterministic();
        let mut out: Vec<Option<Vec<f32>>> = vec![None; texts.len()];
        // Distinct uncached texts and, for each, the positions it fills.
        let mut pending: Vec<(String, CacheKey, Vec<usize>)> = Vec::new();
        let mut pending_index: std::collections::HashMap<&str, usize> =
            std::collections::HashMap::new();
        let mut hits = 0u64;
        for (i, text) in texts.iter().enumerate() {
            let key = embedding_cache_key(&embed_model, text);
            if use_cache && let Some(CachedAnswer::Embedding(vector)) = self.inner.cache.get(&key) {
                if let Some(slot) = out.get_mut(i) {
                    *slot = Some(vector);
                }
                hits += 1;
                continue;
            }
            match pending_index.get(text.as_str()) {
                Some(&p) => {
                    if let Some(entry) = pending.get_mut(p) {
                        entry.2.push(i);
                    }
                }
                None => {
                    pending_index.insert(text, pending.len());
                    pending.push((text.clone(), key, vec![i]));
                }
            }
        }
        self.inner.usage.record_cache_hits(EMBED_KIND, hits);

        for chunk in pending.chunks(self.inner.embed_batch) {
            let batch: Vec<String> = chunk.iter().map(|(text, _, _)| text.clone()).collect();
            let vectors = {
                let _permit = self.permit(EMBED_KIND, None).await;
                let start = Instant::now();
                let result = backend.embed_within(batch, budget.clone()).await;
                let elapsed = start.elapsed();
                let result = result.and_then(|vectors| {
                    usable_embeddings(&vectors, backend.embedding_dim()).map(|()| vectors)
                });
                match result {
                    Ok(vectors) if vectors.len() == chunk.len() => {
                        self.inner
                            .usage
                            .record_success(EMBED_KIND, Default::default(), elapsed);
                        vectors
                    }
                    Ok(vectors) => {
                        self.inner.usage.record_error(EMBED_KIND, elapsed);
                        return Err(LlmError::Malformed(format!(
                            "asked for {} embeddings, got {}",
                            chunk.len(),
                            vectors.len()
                        )));
                    }
                    Err(err) => {
                        self.inner.usage.record_error(EMBED_KIND, elapsed);
                        return Err(err);
                    }
                }
            };
            for ((_, key, positions), vector) in chunk.iter().zip(vectors) {
                if use_cache {
                    self.store(
                        *key,
                        &embed_model,
                        EMBED_KIND,
                        CachedAnswer::Embedding(vector.clone()),
                    );
                }
                for &position in positions {
                    if let Some(slot) = out.get_mut(position) {
                        *slot = Some(vector.clone());
                    }
                }
            }
        }
        out.into_iter()
            .map(|v| v.ok_or_else(|| LlmError::Malformed("missing embedding".into())))
            .collect()
    }

    /// Embeds one text.
    pub async fn embed_one(&self, text: impl Into<String>) -> Result<Vec<f32>, LlmError> {
        self.embed_one_within(text, None).await
    }

    /// [`LlmClient::embed_one`] for a thought with a [`RetryBudget`].
    pub async fn embed_one_within(
        &self,
        text: impl Into<String>,
        budget: Option<RetryBudget>,
    ) -> Result<Vec<f32>, LlmError> {
        self.embed_within(vec![text.into()], budget)
            .await?
            .into_iter()
            .next()
            .ok_or_else(|| LlmError::Malformed("no embedding returned".into()))
    }

    /// Scores each option of a closed-set question (higher is likelier). Fails with
    /// [`LlmError::Unsupported`] when the backend cannot score; check
    /// [`LlmClient::supports_choice_scoring`] first and fall back to generation.
    pub async fn score_choices(&self, request: ChoiceRequest) -> Result<Vec<f32>, LlmError> {
        let backend = &self.inner.backend;
        if !backend.supports_choice_scoring() {
            return Err(LlmError::Unsupported("choice scoring"));
        }
        let key = self
            .inner
            .policy
            .caches_deterministic()
            .then(|| choice_cache_key(backend.model(), &request));
        if let Some(key) = &key
            && let Some(CachedAnswer::Scores(scores)) = self.inner.cache.get(key)
            && scores.len() == request.options.len()
        {
            self.inner.usage.record_cache_hits(&request.kind, 1);
            return Ok(scores);
        }
        let kind = request.kind.clone();
        let options = request.options.len();
        let _permit = self.permit(&kind, request.affinity.as_deref()).await;
        let start = Instant::now();
        let result = backend.score_choices(request).await;
        let elapsed = start.elapsed();
        match result {
            Ok(scores) if scores.len() == options => {
                self.inner
                    .usage
                    .record_success(&kind, Default::default(), elapsed);
                // A NaN score cannot be written as JSON, and is no answer to reuse.
                if let Some(key) = key.filter(|_| scores.iter().all(|s| s.is_finite())) {
                    let model = backend.model().to_owned();
                    self.store(key, &model, &kind, CachedAnswer::Scores(scores.clone()));
                }
                Ok(scores)
            }
            Ok(scores) => {
                self.inner.usage.record_error(&kind, elapsed);
                Err(LlmError::Malformed(format!(
                    "{options} options but {} scores",
                    scores.len()
                )))
            }
            Err(err) => {
                self.inner.usage.record_error(&kind, elapsed);
                Err(err)
            }
        }
    }

    /// Whether the backend can score choices.
    pub fn supports_choice_scoring(&self) -> bool {
        self.inner.backend.supports_choice_scoring()
    }

    /// Whether the backend retries transient failures itself
    /// ([`LlmBackend::retries_transient_errors`]).
    pub fn retries_transient_errors(&self) -> bool {
        self.inner.backend.retries_transient_errors()
    }

    /// Counts a prompt-level retry of `kind` (the answer was unusable; asking again).
    pub fn record_retry(&self, kind: &str) {
        self.inner.usage.record_retry(kind);
    }

    /// Counts a fail-safe of `kind` (the prompt function gave up and used its default).
    pub fn record_fail_safe(&self, kind: &str) {
        self.inner.usage.record_fail_safe(kind);
    }

    /// Counts an answer of `kind` rejected as garbled (it parsed, but meant nothing).
    pub fn record_garbled(&self, kind: &str) {
        self.inner.usage.record_garbled(kind);
    }

    /// Whether the model garbles most answers of `kind`: at least
    /// [`GARBLING_MIN_ANSWERS`] calls of it were answered (usable or not; failed calls do not
    /// count) and at least three in four of those answers were garbled. Asking such a model again rarely helps — SmolLM2-135M's
    /// day plans were garbled on 20 of 20 attempts — so a garbled answer then takes the
    /// fail-safe at once instead of spending three more generations on it.
    pub fn garbles_most(&self, kind: &str) -> bool {
        let usage = self.inner.usage.kind(kind);
        let answers = usage.calls.saturating_sub(usage.errors);
        answers >= GARBLING_MIN_ANSWERS && usage.garbled * 4 >= answers * 3
    }

    /// A snapshot of the usage counters.
    pub fn usage(&self) -> UsageReport {
        let backend = &self.inner.backend;
        let mut report =
            self.inner
                .usage
                .report(backend.name(), backend.model(), backend.embedding_model());
        report.endpoints = backend.endpoint_usage();
        report.device = backend.device().map(str::to_owned);
        report.model_pick.clone_from(&self.inner.model_pick);
        report
    }

    /// How the local model was picked among the cached ones, when it was (see
    /// [`model_pick`](super::model_pick)); also in [`usage`](Self::usage).
    pub fn model_pick(&self) -> Option<&super::model_pick::ModelPick> {
        self.inner.model_pick.as_ref()
    }

    /// Per-server counters when the backend routes over a pool of servers (empty otherwise):
    /// calls, errors, latency, ejections and re-admissions per endpoint — what a HUD shows,
    /// without the per-kind snapshot of [`usage`](Self::usage).
    pub fn endpoint_usage(&self) -> Vec<super::usage::EndpointUsage> {
        self.inner.backend.endpoint_usage()
    }

    /// How many backend calls have ended so far (answered, failed or cancelled); pair it with
    /// [`wait_for_answer`](Self::wait_for_answer).
    pub(crate) fn answers_so_far(&self) -> u64 {
        self.inner.bell.count()
    }

    /// Blocks the calling thread until a backend call ends after `seen` (a value of
    /// [`answers_so_far`](Self::answers_so_far)) or `timeout` passes, and returns the new count.
    /// A headless loop waiting for thoughts parks here instead of spinning; never call it from
    /// a task pool thread.
    pub(crate) fn wait_for_answer(&self, seen: u64, timeout: Duration) -> u64 {
        self.inner.bell.wait_past(seen, timeout)
    }

    /// Backend calls currently in flight (holding a concurrency permit).
    pub fn in_flight(&self) -> usize {
        self.inner.in_flight.load(Ordering::SeqCst)
    }

    /// The concurrency limit.
    pub fn concurrency(&self) -> usize {
        self.inner.concurrency
    }

    /// The backend's short name.
    pub fn backend_name(&self) -> &str {
        self.inner.backend.name()
    }

    /// The chat model.
    pub fn model(&self) -> &str {
        self.inner.backend.model()
    }

    /// Where the model runs, when the backend knows (see [`LlmBackend::device`]).
    pub fn device(&self) -> Option<&str> {
        self.inner.backend.device()
    }

    /// The embedding model (recorded in saves).
    pub fn embedding_model(&self) -> &str {
        self.inner.backend.embedding_model()
    }

    /// The embedding dimension (0 while an HTTP backend has not learned it yet).
    pub fn embedding_dim(&self) -> usize {
        self.inner.backend.embedding_dim()
    }

    /// The backend itself.
    pub fn backend(&self) -> &Arc<dyn LlmBackend> {
        &self.inner.backend
    }

    /// Stops the backend's own threads (see [`LlmBackend::shut_down`]): calls in flight and
    /// later calls fail with [`LlmError::Closed`] and take their fail-safes.
    pub fn shut_down(&self) {
        self.inner.backend.shut_down();
    }

    /// The response cache.
    pub fn cache(&self) -> &ResponseCache {
        &self.inner.cache
    }

    /// The cache policy.
    pub fn cache_policy(&self) -> CachePolicy {
        self.inner.policy
    }
}
