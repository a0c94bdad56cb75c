//! `--record-cache` / `--replay-cache`: record every model answer of a run, and re-run the same
//! simulation from that recording with no model at all (SPEC §5, the replay backend).
//!
//! **Recording** wraps the configured backend in a client whose cache policy is
//! [`CachePolicy::Always`] and whose cache persists to the file: every chat answer (sampled ones
//! too), choice score and embedding is appended as one JSON line the moment it arrives, so even
//! a run killed halfway leaves a usable recording of what it got.
//!
//! **Replaying** builds a client over a [`ReplayBackend`] (which impersonates the recorded chat
//! and embedding models, so the prompts hash to the recorded keys) and preloads every recorded
//! answer into the client's cache. Each request is then a cache hit: the usage report shows zero
//! backend calls. A prompt that was never recorded — the simulation diverged, or the recording
//! is from another run — reaches the replay backend, which refuses it
//! ([`LlmError::Unsupported`](crate::llm::LlmError)); the prompt's fail-safe takes over and the
//! usage report counts it under `errors`, so a diverged replay is visible, never silent.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::llm::{
    CachePolicy, LlmBackend, LlmClient, LlmConfig, ReplayBackend, ResponseCache, build_backend,
};

use super::PersistError;

/// Where model answers come from and go to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum CacheMode {
    /// The configured backend and cache (`--llm-cache`), as usual.
    #[default]
    Off,
    /// The configured backend; every answer is appended to this file.
    Record(PathBuf),
    /// No backend: every answer comes from this recording.
    Replay(PathBuf),
}

/// The client for `mode`: `None` for [`CacheMode::Off`] (use the usual client). `seed` seeds
/// the offline town script when that is the backend, as a headless run does.
pub fn client_with_cache_mode(
    config: &LlmConfig,
    mode: &CacheMode,
    seed: u64,
) -> Result<Option<LlmClient>, PersistError> {
    match mode {
        CacheMode::Off => Ok(None),
        CacheMode::Record(path) => {
            let backend: Arc<dyn LlmBackend> =
                if config.resolved_backend() == crate::llm::BackendChoice::Scripted {
                    Arc::new(crate::llm::town_script_backend(seed))
                } else {
                    build_backend(config)?
                };
            Ok(Some(recording_client(backend, path, config.concurrency)?))
        }
        CacheMode::Replay(path) => Ok(Some(replay_client(path, None)?)),
    }
}

/// A client over `backend` that appends every answer to `path` (created when missing; entries
/// already there are reused).
pub(crate) fn recording_client(
    backend: Arc<dyn LlmBackend>,
    path: &Path,
    concurrency: usize,
) -> Result<LlmClient, PersistError> {
    Ok(LlmClient::builder(backend)
        .concurrency(concurrency)
        .cache_policy(CachePolicy::Always)
        .cache_file(path)
        .build()?)
}

/// A client that answers only from the recording at `path` (read, never written). Prompts that
/// were not recorded go to `fallback` if given (tests pass a counting backend to prove it is
/// never called), else fail.
pub(crate) fn replay_client(
    path: &Path,
    fallback: Option<Arc<dyn LlmBackend>>,
) -> Result<LlmClient, PersistError> {
    let mut backend = ReplayBackend::open(path)?;
    if let Some(fallback) = fallback {
        backend = backend.with_fallback(fallback);
    }
    let client = LlmClient::builder(Arc::new(backend))
        .cache_policy(CachePolicy::Always)
        .build()?;
    let (recording, report) = ResponseCache::load(path)?;
    if report.skipped > 0 {
        bevy::log::warn!(
            "replay cache {}: skipped {} unreadable line(s)",
            path.display(),
            report.skipped
        );
    }
    for entry in recording.entries() {
        // The client's cache is in memory: inserting cannot fail on I/O.
        client.cache().insert(entry)?;
    }
    Ok(client)
}
