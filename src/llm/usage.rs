//! Usage accounting: what every prompt kind cost (SPEC §5 "Accounting").
//!
//! An [`LlmClient`](super::LlmClient) feeds a shared [`UsageCounters`] on every call: backend
//! calls, tokens, latency, retries (prompt-level and transport-level), fail-safes, cache hits
//! and errors, keyed by prompt kind. [`UsageCounters::report`] takes a [`UsageReport`]
//! snapshot that the HUD shows and the headless run writes as `usage.json`. The report names
//! the backend and model; it never carries a key or a prompt.

use std::collections::BTreeMap;
use std::io;
use std::path::Path;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::backend::TokenUsage;

/// The prompt kind under which embedding batches are counted.
pub const EMBED_KIND: &str = "embed";

/// The counters of one prompt kind (or the totals).
///
/// `calls` counts requests that reached the backend (successful or not); answers served from
/// the cache count only in `cache_hits`. `errors` ⊆ `calls`. Latency is measured around the
/// backend call itself, excluding time spent waiting for a concurrency permit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KindUsage {
    /// Requests that reached the backend.
    pub calls: u64,
    /// Tokens read by the model.
    pub prompt_tokens: u64,
    /// Tokens written by the model.
    pub completion_tokens: u64,
    /// Sum of backend latencies, in milliseconds.
    pub total_latency_ms: u64,
    /// The slowest backend call, in milliseconds.
    pub max_latency_ms: u64,
    /// Prompt-level retries: the answer was unusable and the prompt function asked again.
    pub retries: u64,
    /// Transport-level retries the backend made on its own (HTTP 429, 5xx, timeouts…).
    pub transport_retries: u64,
    /// Times a prompt function gave up and used its typed fail-safe.
    pub fail_safes: u64,
    /// Answers served from the response or embedding cache without a backend call.
    pub cache_hits: u64,
    /// Backend calls that ended in an error.
    pub errors: u64,
    /// Answers the offline town script had to guess (no word of the prompt decided them; a
    /// documented tie-break picked one). Always 0 for real models.
    #[serde(default)]
    pub guesses: u64,
}

impl KindUsage {
    /// Mean backend latency in milliseconds (0 when there were no calls).
    pub fn mean_latency_ms(&self) -> f64 {
        if self.calls == 0 {
            0.0
        } else {
            self.total_latency_ms as f64 / self.calls as f64
        }
    }

    /// Adds `other` into `self` (sums, except `max_latency_ms` which takes the maximum).
    pub(crate) fn accumulate(&mut self, other: &KindUsage) {
        self.calls += other.calls;
        self.prompt_tokens += other.prompt_tokens;
        self.completion_tokens += other.completion_tokens;
        self.total_latency_ms += other.total_latency_ms;
        self.max_latency_ms = self.max_latency_ms.max(other.max_latency_ms);
        self.retries += other.retries;
        self.transport_retries += other.transport_retries;
        self.fail_safes += other.fail_safes;
        self.cache_hits += other.cache_hits;
        self.errors += other.errors;
        self.guesses += other.guesses;
    }

    fn record_latency(&mut self, latency: Duration) {
        let ms = u64::try_from(latency.as_millis()).unwrap_or(u64::MAX);
        self.total_latency_ms = self.total_latency_ms.saturating_add(ms);
        self.max_latency_ms = self.max_latency_ms.max(ms);
    }
}

/// Thread-safe usage counters keyed by prompt kind. One mutex, held for a map update only.
#[derive(Debug, Default)]
pub(crate) struct UsageCounters {
    kinds: Mutex<BTreeMap<String, KindUsage>>,
}

impl UsageCounters {
    /// Empty counters.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, KindUsage>> {
        // A panic elsewhere while holding the lock cannot leave a counter half-written in a way
        // that matters, so a poisoned lock is still usable.
        self.kinds.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn update(&self, kind: &str, f: impl FnOnce(&mut KindUsage)) {
        let mut kinds = self.lock();
        if let Some(entry) = kinds.get_mut(kind) {
            f(entry);
        } else {
            let mut entry = KindUsage::default();
            f(&mut entry);
            kinds.insert(kind.to_owned(), entry);
        }
    }

    /// Records a successful backend call.
    pub(crate) fn record_success(&self, kind: &str, tokens: TokenUsage, latency: Duration) {
        self.update(kind, |u| {
            u.calls += 1;
            u.prompt_tokens = u.prompt_tokens.saturating_add(tokens.prompt_tokens);
            u.completion_tokens = u.completion_tokens.saturating_add(tokens.completion_tokens);
            u.record_latency(latency);
        });
    }

    /// Records a backend call that failed.
    pub(crate) fn record_error(&self, kind: &str, latency: Duration) {
        self.update(kind, |u| {
            u.calls += 1;
            u.errors += 1;
            u.record_latency(latency);
        });
    }

    /// Records `hits` answers served from a cache.
    pub(crate) fn record_cache_hits(&self, kind: &str, hits: u64) {
        if hits > 0 {
            self.update(kind, |u| u.cache_hits += hits);
        }
    }

    /// Records a prompt-level retry.
    pub fn record_retry(&self, kind: &str) {
        self.update(kind, |u| u.retries += 1);
    }

    /// Records a transport-level retry made by the backend.
    pub(crate) fn record_transport_retry(&self, kind: &str) {
        self.update(kind, |u| u.transport_retries += 1);
    }

    /// Records a fail-safe being used.
    pub fn record_fail_safe(&self, kind: &str) {
        self.update(kind, |u| u.fail_safes += 1);
    }

    /// Records an answer the scripted backend had to guess.
    pub fn record_guess(&self, kind: &str) {
        self.update(kind, |u| u.guesses += 1);
    }

    /// A snapshot of every counter, labelled with the backend it measured.
    pub fn report(
        &self,
        backend: impl Into<String>,
        model: impl Into<String>,
        embedding_model: impl Into<String>,
    ) -> UsageReport {
        let kinds = self.lock().clone();
        let mut totals = KindUsage::default();
        for usage in kinds.values() {
            totals.accumulate(usage);
        }
        UsageReport {
            backend: backend.into(),
            model: model.into(),
            embedding_model: embedding_model.into(),
            kinds,
            totals,
            endpoints: Vec::new(),
        }
    }
}

/// A snapshot of the usage counters: the content of `usage.json`.
///
/// Carries names only — never a key, a URL with credentials or a prompt.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UsageReport {
    /// The backend's short name (`"http"`, `"scripted"`, …).
    pub backend: String,
    /// The chat model.
    pub model: String,
    /// The embedding model.
    pub embedding_model: String,
    /// Counters per prompt kind, sorted by kind.
    pub kinds: BTreeMap<String, KindUsage>,
    /// The sum over all kinds.
    pub totals: KindUsage,
    /// Per endpoint of a pool of model servers (empty for a single endpoint and for offline
    /// backends): calls, errors, latency, ejections and re-admissions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub endpoints: Vec<EndpointUsage>,
}

/// The counters of one endpoint of a pool of OpenAI-compatible servers (see the README's
/// "Several model servers"): what the routing sent there and how the endpoint's health went.
///
/// Every attempt counts, so a call retried on another endpoint counts once on each. The URL is
/// shown without credentials; the key is never part of it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EndpointUsage {
    /// The pool: `"chat"` or `"embed"`.
    pub pool: String,
    /// The base URL, without credentials.
    pub url: String,
    /// The model asked for there.
    pub model: String,
    /// The routing weight.
    pub weight: f64,
    /// Calls in flight there at most at once.
    pub concurrency: usize,
    /// Attempts sent there (answered or failed).
    pub calls: u64,
    /// Attempts that failed.
    pub errors: u64,
    /// Of the errors, answers 429 (the endpoint was slowed down, not ejected).
    pub rate_limited: u64,
    /// Sum of attempt latencies, in milliseconds.
    pub total_latency_ms: u64,
    /// The slowest attempt, in milliseconds.
    pub max_latency_ms: u64,
    /// Times the endpoint was taken out of the rotation (connect error, 5xx, timeout, failed
    /// probe).
    pub ejections: u64,
    /// Times a probe found it answering again and it was put back.
    pub readmissions: u64,
    /// Calls with an affinity key (a persona) routed here.
    pub affinity_calls: u64,
    /// Of those, calls that went to the key's home endpoint (this one).
    pub affinity_hits: u64,
    /// Whether it was in the rotation when the snapshot was taken.
    pub healthy: bool,
    /// Calls in flight there when the snapshot was taken.
    pub in_flight: usize,
}

impl EndpointUsage {
    /// Mean attempt latency in milliseconds (0 without calls).
    pub fn mean_latency_ms(&self) -> f64 {
        if self.calls == 0 {
            0.0
        } else {
            self.total_latency_ms as f64 / self.calls as f64
        }
    }
}

impl UsageReport {
    /// The counters of `kind` (zero when the kind never ran).
    pub fn kind(&self, kind: &str) -> KindUsage {
        self.kinds.get(kind).copied().unwrap_or_default()
    }

    /// Pretty-printed JSON.
    pub fn to_json_pretty(&self) -> String {
        // Serialising plain structs, strings and integers into a String cannot fail.
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// Writes the report as pretty JSON to `path`, atomically (temp file + rename).
    pub fn write_json(&self, path: &Path) -> io::Result<()> {
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = std::path::PathBuf::from(tmp);
        std::fs::write(&tmp, self.to_json_pretty())?;
        std::fs::rename(&tmp, path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_per_kind_and_totals() {
        let usage = UsageCounters::new();
        let tokens = TokenUsage {
            prompt_tokens: 10,
            completion_tokens: 3,
        };
        usage.record_success("a", tokens, Duration::from_millis(40));
        usage.record_success("a", tokens, Duration::from_millis(100));
        usage.record_error("b", Duration::from_millis(7));
        usage.record_cache_hits("a", 2);
        usage.record_cache_hits("c", 0);
        usage.record_retry("b");
        usage.record_transport_retry("b");
        usage.record_fail_safe("b");

        let report = usage.report("scripted", "m", "e");
        assert_eq!(
            report.kinds.len(),
            2,
            "a zero cache-hit count creates no entry"
        );
        let a = report.kind("a");
        assert_eq!(
            a,
            KindUsage {
                calls: 2,
                prompt_tokens: 20,
                completion_tokens: 6,
                total_latency_ms: 140,
                max_latency_ms: 100,
                cache_hits: 2,
                ..KindUsage::default()
            }
        );
        assert_eq!(a.mean_latency_ms(), 70.0);
        let b = report.kind("b");
        assert_eq!(
            (
                b.calls,
                b.errors,
                b.retries,
                b.transport_retries,
                b.fail_safes
            ),
            (1, 1, 1, 1, 1)
        );
        assert_eq!(report.totals.calls, 3);
        assert_eq!(report.totals.max_latency_ms, 100);
        assert_eq!(report.totals.total_latency_ms, 147);
        assert_eq!(report.kind("missing"), KindUsage::default());
    }

    #[test]
    fn report_round_trips_through_json() {
        let usage = UsageCounters::new();
        usage.record_success("x", TokenUsage::default(), Duration::from_millis(1));
        let report = usage.report("http", "gpt", "emb");
        let json = report.to_json_pretty();
        let back: UsageReport = serde_json::from_str(&json).expect("valid json");
        assert_eq!(back, report);
        assert!(json.contains("\"backend\": \"http\""));
    }
}
