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
use super::model_pick::ModelPick;

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
    /// Answers rejected as garbled (they parsed, but were a run of one repeated word,
    /// non-words, times out of order or one item over and over); each is also a retry or,
    /// on the last attempt, leads to a fail-safe.
    #[serde(default)]
    pub garbled: u64,
    /// Of `prompt_tokens`, those found in the backend's prefix cache and not decoded again
    /// (the embedded model's KV slots, a server's prompt cache); written only when not 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reused_prompt_tokens: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
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
        self.reused_prompt_tokens += other.reused_prompt_tokens;
        self.garbled += other.garbled;
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
            u.reused_prompt_tokens = u
                .reused_prompt_tokens
                .saturating_add(tokens.reused_prompt_tokens);
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

    /// Records an answer rejected as garbled.
    pub fn record_garbled(&self, kind: &str) {
        self.update(kind, |u| u.garbled += 1);
    }

    /// One kind's counters so far (zero when it was never asked).
    pub(crate) fn kind(&self, kind: &str) -> KindUsage {
        self.lock().get(kind).cloned().unwrap_or_default()
    }

    /// Records an answer the scripted backend had to guess.
    pub(crate) fn record_guess(&self, kind: &str) {
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
            device: None,
            model_pick: None,
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
    /// Where the model ran, when the backend said (the embedded model's GPU and offloaded
    /// layers, or the CPU).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// How the local model was picked among the cached ones (a short warm-up on this
    /// machine; see [`model_pick`](super::model_pick)): which file, why, and every candidate's
    /// measured speed. `None` when the model was given (`--model`), only one was cached, or
    /// the backend is not the local model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_pick: Option<ModelPick>,
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
    /// While it is out of the rotation: milliseconds until the next probe when the snapshot
    /// was taken (0: a probe is due or under way). `None` while it is in the rotation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_in_ms: Option<u64>,
    /// While a 429 pauses it: milliseconds left of the pause when the snapshot was taken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused_ms: Option<u64>,
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

/// The `host:port` of a base URL, for display: no scheme, credentials, path, query or
/// fragment, whatever the URL holds; the scheme's default port when none is written (80 for
/// `http`, 443 for `https`).
fn host_port(url: &str) -> String {
    let url = url.trim();
    let (scheme, rest) = match url.split_once("://") {
        Some((scheme, rest)) => (scheme.to_ascii_lowercase(), rest),
        None => (String::new(), url),
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    // Credentials end at the last `@` of the authority.
    let host = authority.rsplit('@').next().unwrap_or_default();
    let has_port = match host.rfind(']') {
        // `[v6]` or `[v6]:port`.
        Some(close) => host[close..].contains(':'),
        None => host.contains(':'),
    };
    if has_port || host.is_empty() {
        return host.to_owned();
    }
    match scheme.as_str() {
        "http" => format!("{host}:80"),
        "https" => format!("{host}:443"),
        _ => host.to_owned(),
    }
}

/// A duration in milliseconds as a short text: `850 ms`, `4.2 s`, `3 min`.
fn short_ms(ms: u64) -> String {
    match ms {
        0..1_000 => format!("{ms} ms"),
        1_000..60_000 => format!("{:.1} s", ms as f64 / 1000.0),
        _ => format!("{} min", ms.div_ceil(60_000)),
    }
}

/// One short display line per endpoint of a pool, for a HUD: the pool, the server's
/// `host:port` (never its path, credentials or key), attempts, errors, mean latency, calls in
/// flight, and its state — `healthy`, `paused <time>` (a 429), `ejected, probe in <time>`, or
/// `probing`. Feed it [`LlmClient::endpoint_usage`](super::LlmClient::endpoint_usage) (or
/// [`UsageReport::endpoints`]); a single server or an offline backend gives no lines.
///
/// ```
/// use bevy_generative_agents::llm::{EndpointUsage, endpoint_lines};
///
/// let up = EndpointUsage {
///     pool: "chat".into(),
///     url: "http://10.0.0.2:8000/v1".into(),
///     calls: 412,
///     errors: 3,
///     total_latency_ms: 412 * 210,
///     healthy: true,
///     in_flight: 5,
///     ..EndpointUsage::default()
/// };
/// let down = EndpointUsage {
///     pool: "chat".into(),
///     url: "https://gpu2.example/v1".into(),
///     calls: 40,
///     errors: 9,
///     total_latency_ms: 40 * 1500,
///     probe_in_ms: Some(4200),
///     ..EndpointUsage::default()
/// };
/// assert_eq!(
///     endpoint_lines(&[up, down]),
///     [
///         "chat 10.0.0.2:8000  412 calls  3 err  210 ms avg  5 busy  healthy",
///         "chat gpu2.example:443  40 calls  9 err  1.5 s avg  0 busy  ejected, probe in 4.2 s",
///     ]
/// );
/// ```
pub fn endpoint_lines(endpoints: &[EndpointUsage]) -> Vec<String> {
    endpoints
        .iter()
        .map(|e| {
            let state = match (e.probe_in_ms, e.paused_ms) {
                (Some(0), _) => "probing".to_owned(),
                (Some(ms), _) => format!("ejected, probe in {}", short_ms(ms)),
                (None, _) if !e.healthy => "ejected".to_owned(),
                (None, Some(ms)) => format!("paused {} (429)", short_ms(ms)),
                (None, None) => "healthy".to_owned(),
            };
            // The mean is a whole number of milliseconds: rounding keeps the line steady.
            let mean = e.mean_latency_ms().round() as u64;
            format!(
                "{} {}  {} calls  {} err  {} avg  {} busy  {state}",
                e.pool,
                host_port(&e.url),
                e.calls,
                e.errors,
                short_ms(mean),
                e.in_flight,
            )
        })
        .collect()
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
            reused_prompt_tokens: 4,
        };
        usage.record_success("a", tokens, Duration::from_millis(40));
        usage.record_success("a", tokens, Duration::from_millis(100));
        usage.record_error("b", Duration::from_millis(7));
        usage.record_cache_hits("a", 2);
        usage.record_cache_hits("c", 0);
        usage.record_retry("b");
        usage.record_transport_retry("b");
        usage.record_fail_safe("b");
        usage.record_garbled("b");

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
                reused_prompt_tokens: 8,
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
                b.fail_safes,
                b.garbled
            ),
            (1, 1, 1, 1, 1, 1)
        );
        assert_eq!(report.totals.garbled, 1);
        assert_eq!(report.totals.calls, 3);
        assert_eq!(report.totals.max_latency_ms, 100);
        assert_eq!(report.totals.total_latency_ms, 147);
        assert_eq!(report.kind("missing"), KindUsage::default());
        assert_eq!(report.totals.reused_prompt_tokens, 8);
        // A kind with nothing reused writes no such field: earlier files stay as they were.
        let json = serde_json::to_string(&b).unwrap_or_default();
        assert!(!json.contains("reused_prompt_tokens"), "{json}");
        assert!(
            serde_json::to_string(&a)
                .unwrap_or_default()
                .contains("\"reused_prompt_tokens\":8")
        );
    }

    #[test]
    fn endpoint_lines_show_host_port_and_state_only() {
        assert_eq!(
            host_port("http://user:secret@10.0.0.2:8000/v1?key=sk-1"),
            "10.0.0.2:8000"
        );
        assert_eq!(host_port("https://gpu.example/v1"), "gpu.example:443");
        assert_eq!(host_port("http://[::1]:8080/v1"), "[::1]:8080");
        assert_eq!(host_port("HTTP://[::1]/v1"), "[::1]:80");
        assert_eq!(host_port("http://a@b@host#frag"), "host:80");
        let base = EndpointUsage {
            pool: "embed".into(),
            url: "http://k:sk-secret@h:1/v1".into(),
            calls: 2,
            total_latency_ms: 2 * 61_000,
            ..EndpointUsage::default()
        };
        let line = |e: EndpointUsage| endpoint_lines(&[e]).remove(0);
        assert_eq!(
            line(EndpointUsage {
                probe_in_ms: Some(0),
                ..base.clone()
            }),
            "embed h:1  2 calls  0 err  2 min avg  0 busy  probing"
        );
        assert_eq!(
            line(EndpointUsage {
                healthy: true,
                paused_ms: Some(900),
                ..base.clone()
            }),
            "embed h:1  2 calls  0 err  2 min avg  0 busy  paused 900 ms (429)"
        );
        // An old snapshot without the timing fields still says the server is out.
        assert!(line(base.clone()).ends_with("  ejected"));
        assert!(!line(base).contains("secret"));
        assert!(endpoint_lines(&[]).is_empty());
        // A snapshot from an older usage.json (no timing fields) still reads.
        let old: EndpointUsage = serde_json::from_str(
            r#"{"pool":"chat","url":"http://h:1/v1","model":"m","weight":1.0,"concurrency":4,
            "calls":0,"errors":0,"rate_limited":0,"total_latency_ms":0,"max_latency_ms":0,
            "ejections":0,"readmissions":0,"affinity_calls":0,"affinity_hits":0,"healthy":true,
            "in_flight":0}"#,
        )
        .expect("an older snapshot");
        assert_eq!((old.probe_in_ms, old.paused_ms), (None, None));
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
        assert!(!json.contains("model_pick"), "no pick, no key");
        // A usage.json written before `garbled` and `model_pick` existed still loads.
        let mut old: serde_json::Value = serde_json::from_str(&json).expect("valid json");
        let strip = |counters: &mut serde_json::Value| {
            counters.as_object_mut().and_then(|c| c.remove("garbled"))
        };
        strip(&mut old["totals"]).expect("totals have a garbled count");
        strip(&mut old["kinds"]["x"]).expect("a kind has a garbled count");
        let back: UsageReport = serde_json::from_value(old).expect("an older usage.json");
        assert_eq!(back.totals.garbled, 0);
    }
}
