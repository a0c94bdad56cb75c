//! The LLM layer (SPEC §5): every model call the simulation makes goes through here.
//!
//! The story, from the bottom up:
//!
//! 1. **The contract** — [`LlmBackend`] (in `backend.rs`): chat completion (optionally
//!    streamed, optionally constrained to a JSON schema), embeddings, and optional
//!    log-likelihood scoring of closed-set options. Errors are [`LlmError`]s that say whether a
//!    retry may help and never carry a secret.
//! 2. **Backends** —
//!    * `HttpBackend` (feature `http`): any OpenAI-compatible server (OpenAI, Ollama,
//!      llama.cpp, vLLM, LM Studio, OpenRouter). It owns a small tokio runtime on its own
//!      threads, so callers on Bevy's task pools just await a runtime-agnostic channel. It sends
//!      JSON schemas as structured output, streams with SSE, times out, and retries transient
//!      failures with exponential backoff, full jitter and `Retry-After`.
//!    * [`ScriptedBackend`]: deterministic answers per prompt kind for tests and offline demos —
//!      named "scripted", never presented as a model. Hashed bag-of-words embeddings.
//!    * [`offline`]: the offline town script the scripted backend runs by default — the
//!      stand-in used when no model can be had, and the script of tests and demos.
//!    * [`ReplayBackend`]: answers from a recorded response cache.
//!    * [`FaultyBackend`]: wraps another backend and corrupts a seeded fraction of answers,
//!      so parsers and the sim are tested against garbage (SPEC §12).
//!    * `LocalBackend` (feature `local-llm`): a GGUF model run in-process by llama.cpp on a
//!      dedicated inference thread — the default when nothing else is configured and the model
//!      file is in the cache. Closed sets by batched log-likelihood scoring, JSON and shaped
//!      answers by grammars, embeddings mean-pooled from the model.
//!    * [`SentenceEmbeddings`]: puts the in-process sentence embedder [`MiniLm`]
//!      (all-MiniLM-L6-v2, pure Rust) in front of any backend for its embeddings; the local
//!      default gets it whenever `scripts/fetch-model.sh` has put the model in the cache.
//!    * `PoolBackend` (feature `http`): routes each call over a pool of OpenAI-compatible
//!      servers — weighted least outstanding requests, per-server limits, prefix affinity per
//!      persona, ejection with back-off and probes, retries on another server.
//! 3. **The client** — [`LlmClient`], the cheap-to-clone `Resource` that prompt functions call:
//!    a global concurrency limit, the content-addressed response cache and embedding cache
//!    ([`ResponseCache`], optionally persisted as JSON lines), and usage accounting per prompt
//!    kind ([`UsageReport`], written as `usage.json`).
//! 4. **Configuration** — [`LlmConfig`] resolved from CLI > env > config file > defaults, and
//!    `build_backend`/[`build_client`] to turn it into a running client. API keys live in
//!    [`ApiKey`], which never prints. [`LlmPlugin`] inserts a client built that way unless the
//!    game inserted its own.
//!
//! Everything is `async` and executor-agnostic: drive it from Bevy tasks, or from a test with
//! `bevy::tasks::block_on`.
//!
//! **Layer** (see `tests/layers.rs`): above the ground: imports [`clock`](crate::clock) (hour
//! texts for the offline script) and nothing above `llm`.

mod backend;
mod cache;
mod client;
mod config;
mod endpoint;
mod faulty;
pub mod grammar;
#[cfg(feature = "http")]
mod http;
#[cfg(feature = "local-llm")]
mod kv_slots;
#[cfg(feature = "local-llm")]
mod local;
mod minilm;
pub mod model_pick;
pub mod offline;
mod offline_director;
mod offline_group;
mod offline_outing;
mod offline_stage;
mod permits;
mod plugin;
#[cfg(feature = "http")]
mod pool;
mod prefix_share;
mod replay;
mod scripted;
mod secrets;
#[cfg(feature = "local-llm")]
mod serve_order;
mod usage;

pub use backend::*;
pub use cache::{
    CacheEntry, CacheError, CacheKey, CacheLimits, CacheLoadReport, CacheStats, CachedAnswer,
    ParseCacheKeyError, ResponseCache,
};
pub use client::{
    CachePolicy, ChatAnswer, DEFAULT_CONCURRENCY, DEFAULT_EMBED_BATCH, GARBLING_MIN_ANSWERS,
    LlmClient, LlmClientBuilder, ThoughtCalls,
};
pub(crate) use config::build_backend;
pub use config::{
    ApiKey, BackendChoice, ConfigError, DEFAULT_BASE_URL, DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_EMBED_MODEL, DEFAULT_LOCAL_THREADS, DEFAULT_MAX_RETRIES, DEFAULT_MODEL,
    DEFAULT_MODEL_FILES, DEFAULT_TIMEOUT, EndpointEntry, LlmConfig, LlmConfigLayer,
    MAX_CONNECT_TIMEOUT, MAX_POOL_BACKOFF, MAX_RETRIES, MAX_TIMEOUT, MAX_WEIGHT, MIN_TIMEOUT,
    PoolTimings, PoolTimingsLayer, ResolvedEndpoint, build_client, check_call_limits,
    fetch_default_model_if_missing, model_cache_dir, with_sentence_embedder,
};
pub use faulty::{Fault, FaultyBackend};
#[cfg(feature = "http")]
pub use http::{HttpBackend, HttpConfig};
#[cfg(feature = "local-llm")]
pub use local::{
    CPU_BATCH_WIDTH, ChoiceNorm, DEFAULT_CONTEXT_SIZE, DEFAULT_THREADS, JSON_GRAMMAR, LocalBackend,
    LocalConfig, LocalError, LocalStats, RawBench, SLOTS, batch_width, kind_grammar,
    raw_llama_bench,
};
pub use minilm::{
    MINILM_DIR, MINILM_FILES, MINILM_MAX_TOKENS, MINILM_NAME, MiniLm, MiniLmEmbedder, MiniLmError,
    SentenceEmbeddings, judge, minilm_dir,
};
pub use model_pick::{MIN_TOKENS_PER_SECOND, MeasuredModel, ModelPick, pick_model};
pub use offline::{town_script_backend, town_script_client};
pub use plugin::{LlmPlugin, LlmShutDown};
#[cfg(feature = "http")]
pub use pool::{PoolBackend, PoolMember, PoolSettings};
pub use prefix_share::{PrefixShare, common_prefix_len};
pub use replay::ReplayBackend;
pub(crate) use scripted::word_overlap_scores;
pub(crate) use scripted::word_pieces;
pub(crate) use scripted::word_tokens;
pub use scripted::{
    Chooser, Responder, SCRIPTED_EMBEDDING_DIM, ScriptGuesses, ScriptRng, ScriptedBackend,
    hashed_bow_embedding,
};
pub(crate) use scripted::{fnv1a, fnv1a_parts};
pub use secrets::{
    MIN_SECRET_BYTES, REDACTED, Secrets, redact_secrets, register_secret, secret_prefix_at_end,
};
pub use usage::{EMBED_KIND, EndpointUsage, KindUsage, UsageReport, endpoint_lines};
