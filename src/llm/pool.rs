//! Routing over a pool of OpenAI-compatible servers (feature `http`): [`PoolBackend`].
//!
//! A pool holds several backends (normally one [`HttpBackend`](super::HttpBackend) per server,
//! each making one attempt per call) and decides, call by call, which one answers:
//!
//! * **Weighted least outstanding requests.** The call goes to the server with the fewest
//!   calls in flight per unit of weight, among those under their own concurrency limit (the
//!   client's global limit still applies on top). Ties rotate. A weight of 0 makes a standby,
//!   used only when no weighted server can take the call.
//! * **Prefix affinity** (on by default). A call that carries an affinity key
//!   ([`ChatRequest::affinity`], the persona) goes to the key's *home* server, so a llama.cpp
//!   or vLLM prefix cache sees the same persona preamble again. Homes are handed out to the
//!   server with the fewest homes per unit of weight and move back one key at a time when the
//!   spread gets uneven (after a server comes back), so affinity never piles every persona on
//!   one server. When the home is at its limit, the call waits for a slot at home rather than
//!   spill to another server: a spill is a cold prefix cache there, and in a busy pool every
//!   spill pushes another persona off its own home in turn (an earlier rule that spilled to a
//!   server about to go idle left the unluckiest persona on its home for 6 calls of 9). The
//!   balance comes from the homes themselves. When the home is out of the rotation (ejected,
//!   probing or paused by a 429), the key gets a new home; a retry that must avoid the home goes
//!   to the least-loaded other server.
//! * **Health.** A connect error, a 5xx or a timeout ejects the server for a back-off that
//!   doubles with each ejection in a row (1 s up to 30 s by default). When it runs out, the
//!   next call first *probes* the server (`GET /models`, within the connect timeout); an answer
//!   puts it back in the rotation, a failure ejects it again. A 429 pauses that server only,
//!   for its `Retry-After` (capped). A failed attempt is retried on another server at once,
//!   within the retry budget (`max_retries`); only when no other server can take it does the
//!   call back off, exactly like a single server. When every server is out, the call probes
//!   the one due first rather than waiting out its back-off, so a dead pool fails safe as fast
//!   as a dead server. A stream that already delivered text is not retried.
//!
//! Each server's counters — attempts, errors, 429s, latency, ejections, re-admissions,
//! affinity hits — come back through [`LlmBackend::endpoint_usage`] into `usage.json`, the run
//! report and [`LlmClient::usage`](super::LlmClient::usage) (what a HUD reads).

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use bevy::tasks::futures_lite::future;
use rand::Rng;

use super::backend::{
    BoxFuture, ChatRequest, ChatResponse, LlmBackend, LlmError, RetryBudget, RetryHook,
};
use super::config::PoolTimings;
use super::usage::{EMBED_KIND, EndpointUsage};

/// The most affinity keys a pool remembers; past it, homes are handed out afresh.
const MAX_AFFINITY_KEYS: usize = 1 << 16;

/// How long a waiting call sleeps at most before it looks at the pool again (a missed wake-up
/// costs no more than this).
const MAX_WAIT: Duration = Duration::from_millis(250);

/// How a [`PoolBackend`] routes, retries and ejects.
#[derive(Debug, Clone, PartialEq)]
pub struct PoolSettings {
    /// Retries of a call after its first attempt, on any server.
    pub max_retries: u32,
    /// Prefix affinity on (see the module docs).
    pub affinity: bool,
    /// First back-off ceiling when no other server can take a retry; doubles per retry.
    pub backoff_base: Duration,
    /// Largest back-off ceiling.
    pub backoff_max: Duration,
    /// First ejection; doubles with each ejection in a row.
    pub eject_base: Duration,
    /// Longest ejection.
    pub eject_max: Duration,
    /// Largest `Retry-After` honoured (and the pause of a 429 without one is `eject_base`).
    pub retry_after_cap: Duration,
}

impl Default for PoolSettings {
    fn default() -> Self {
        Self::from(PoolTimings::default())
    }
}

impl From<PoolTimings> for PoolSettings {
    /// These timings, the default retries and affinity on.
    fn from(t: PoolTimings) -> Self {
        Self {
            max_retries: super::endpoint::DEFAULT_MAX_RETRIES,
            affinity: true,
            backoff_base: t.backoff_base,
            backoff_max: t.backoff_max,
            eject_base: t.eject_base,
            eject_max: t.eject_max,
            retry_after_cap: t.retry_after_cap,
        }
    }
}

/// One server of a pool: a backend and how much of the traffic it may take.
#[derive(Clone)]
pub struct PoolMember {
    /// The backend that talks to it (making one attempt per call: the pool retries).
    pub backend: Arc<dyn LlmBackend>,
    /// Its URL without credentials (shown in usage and logs).
    pub url: String,
    /// Routing weight (≥ 0).
    pub weight: f64,
    /// Calls in flight there at most at once (≥ 1).
    pub concurrency: usize,
}

impl fmt::Debug for PoolMember {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PoolMember")
            .field("url", &self.url)
            .field("model", &self.backend.model())
            .field("weight", &self.weight)
            .field("concurrency", &self.concurrency)
            .finish()
    }
}

/// Whether a server is in the rotation.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Health {
    /// Taking calls.
    Up,
    /// Out until `until`; then the next call probes it.
    Ejected { until: Instant },
    /// A probe is out; nothing else goes there until it answers.
    Probing,
}

#[derive(Debug)]
struct MemberState {
    health: Health,
    /// Ejections in a row (reset by a success): the back-off's exponent.
    strikes: u32,
    /// A 429 asked for a pause until then.
    paused_until: Option<Instant>,
    outstanding: usize,
    /// Affinity keys whose home this is.
    homes: usize,
    usage: EndpointUsage,
}

#[derive(Debug, Default)]
struct PoolState {
    members: Vec<MemberState>,
    homes: HashMap<String, usize>,
    rotation: usize,
}

/// One list of servers (the chat pool or the embedding pool) and its routing state.
struct Pool {
    members: Vec<PoolMember>,
    state: Mutex<PoolState>,
    /// Rung whenever a slot frees or a server comes back.
    bell: tokio::sync::Notify,
}

/// What the routing decided for one attempt.
enum Pick {
    /// Send it to member `index`; `probe` first when the member is being re-admitted.
    Go { index: usize, probe: bool },
    /// Nothing can take it now; look again when woken or at `until`.
    Wait { until: Option<Instant> },
    /// Every server is out: probe the one due first, after the call's back-off.
    AllDown { index: usize },
}

impl Pool {
    fn new(name: &str, members: Vec<PoolMember>) -> Self {
        let state = members
            .iter()
            .map(|m| MemberState {
                health: Health::Up,
                strikes: 0,
                paused_until: None,
                outstanding: 0,
                homes: 0,
                usage: EndpointUsage {
                    pool: name.to_owned(),
                    url: m.url.clone(),
                    model: match name {
                        "embed" => m.backend.embedding_model().to_owned(),
                        _ => m.backend.model().to_owned(),
                    },
                    weight: m.weight,
                    concurrency: m.concurrency,
                    healthy: true,
                    ..EndpointUsage::default()
                },
            })
            .collect();
        Self {
            members,
            state: Mutex::new(PoolState {
                members: state,
                ..PoolState::default()
            }),
            bell: tokio::sync::Notify::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, PoolState> {
        // Counters only; a panic elsewhere leaves nothing half-done that matters.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Chooses a member for one attempt and takes a slot there (see the module docs).
    fn pick(&self, key: Option<&str>, avoid: Option<usize>, now: Instant) -> Pick {
        let mut state = self.lock();
        let state = &mut *state;
        // Back-offs that ran out: the first call to see one probes it.
        if let Some(index) = state
            .members
            .iter()
            .position(|m| matches!(m.health, Health::Ejected { until } if until <= now))
        {
            state.members[index].health = Health::Probing;
            state.members[index].outstanding += 1;
            return Pick::Go { index, probe: true };
        }
        let usable = |m: &MemberState, i: usize, limit: usize| {
            m.health == Health::Up
                && m.paused_until.is_none_or(|t| t <= now)
                && m.outstanding < limit
                && Some(i) != avoid
        };
        let eligible: Vec<usize> = (0..self.members.len())
            .filter(|&i| usable(&state.members[i], i, self.members[i].concurrency))
            .collect();
        // A retry avoids the member that just failed, unless nothing else can take it.
        let eligible = if eligible.is_empty() && avoid.is_some() {
            (0..self.members.len())
                .filter(|&i| {
                    let m = &state.members[i];
                    m.health == Health::Up
                        && m.paused_until.is_none_or(|t| t <= now)
                        && m.outstanding < self.members[i].concurrency
                })
                .collect()
        } else {
            eligible
        };

        let mut chosen = None;
        if let Some(key) = key
            && let Some(home) = self.home_of(state, key, now)
        {
            if eligible.contains(&home) {
                chosen = Some((home, true));
            } else if Some(home) != avoid {
                // The home is healthy but at its limit: wait for a slot there (see the
                // module docs); a release wakes the waiters.
                return Pick::Wait { until: None };
            }
        }
        if chosen.is_none() && !eligible.is_empty() {
            chosen = self.least_loaded(state, &eligible).map(|i| (i, false));
        }
        if let Some((index, hit)) = chosen {
            let member = &mut state.members[index];
            member.outstanding += 1;
            if key.is_some() {
                member.usage.affinity_calls += 1;
                if hit {
                    member.usage.affinity_hits += 1;
                }
            }
            return Pick::Go {
                index,
                probe: false,
            };
        }
        let any_up = state.members.iter().any(|m| m.health == Health::Up);
        if any_up {
            // Up but full or paused: wait for a slot or the end of a pause.
            let until = state
                .members
                .iter()
                .filter(|m| m.health == Health::Up)
                .filter_map(|m| m.paused_until.filter(|t| *t > now))
                .min();
            return Pick::Wait { until };
        }
        // Every member is ejected or being probed.
        let due = state
            .members
            .iter()
            .enumerate()
            .filter_map(|(i, m)| match m.health {
                Health::Ejected { until } => Some((until, i)),
                _ => None,
            })
            .min();
        match due {
            Some((_, index)) => {
                state.members[index].health = Health::Probing;
                state.members[index].outstanding += 1;
                Pick::AllDown { index }
            }
            // Every member is being probed right now: wait for a verdict.
            None => Pick::Wait { until: None },
        }
    }

    /// The key's home: kept while its member is in the rotation and the spread of homes is
    /// even enough, otherwise moved to the member with the fewest homes per weight.
    fn home_of(&self, state: &mut PoolState, key: &str, now: Instant) -> Option<usize> {
        let in_rotation = |m: &MemberState| {
            matches!(m.health, Health::Up) && m.paused_until.is_none_or(|t| t <= now)
        };
        let weighted = (0..self.members.len())
            .filter(|&i| in_rotation(&state.members[i]) && self.members[i].weight > 0.0)
            .collect::<Vec<_>>();
        let candidates = if weighted.is_empty() {
            (0..self.members.len())
                .filter(|&i| in_rotation(&state.members[i]))
                .collect()
        } else {
            weighted
        };
        let weight = |i: usize| self.members[i].weight.max(f64::MIN_POSITIVE);
        let fewest = candidates.iter().copied().min_by(|&a, &b| {
            let ka = (state.members[a].homes as f64 + 1.0) / weight(a);
            let kb = (state.members[b].homes as f64 + 1.0) / weight(b);
            ka.total_cmp(&kb).then(
                state.members[a]
                    .outstanding
                    .cmp(&state.members[b].outstanding),
            )
        })?;
        let current = state.homes.get(key).copied();
        let keep = current.filter(|&home| {
            candidates.contains(&home)
                && (home == fewest || {
                    // Move one key only when it leaves its home no lighter than the new one.
                    let after_home = (state.members[home].homes as f64 - 1.0) / weight(home);
                    let after_new = (state.members[fewest].homes as f64 + 1.0) / weight(fewest);
                    after_home < after_new
                })
        });
        if let Some(home) = keep {
            return Some(home);
        }
        if let Some(old) = current
            && let Some(member) = state.members.get_mut(old)
        {
            member.homes = member.homes.saturating_sub(1);
        }
        if current.is_none() && state.homes.len() >= MAX_AFFINITY_KEYS {
            state.homes.clear();
            for member in &mut state.members {
                member.homes = 0;
            }
        }
        state.homes.insert(key.to_owned(), fewest);
        state.members[fewest].homes += 1;
        Some(fewest)
    }

    /// Among `eligible`, the member with the fewest calls in flight per weight (weight 0 only
    /// when nothing weighted is eligible); ties rotate.
    fn least_loaded(&self, state: &mut PoolState, eligible: &[usize]) -> Option<usize> {
        let n = self.members.len().max(1);
        let start = state.rotation % n;
        state.rotation = state.rotation.wrapping_add(1);
        let score = |i: usize| {
            let w = self.members[i].weight;
            let load = (state.members[i].outstanding + 1) as f64;
            if w > 0.0 { (0, load / w) } else { (1, load) }
        };
        eligible.iter().copied().min_by(|&a, &b| {
            let (ca, la) = score(a);
            let (cb, lb) = score(b);
            ca.cmp(&cb)
                .then(la.total_cmp(&lb))
                .then(((a + n - start) % n).cmp(&((b + n - start) % n)))
        })
    }

    /// Gives the slot of member `index` back (on every path, cancellation included).
    fn release(&self, index: usize) {
        {
            let mut state = self.lock();
            if let Some(member) = state.members.get_mut(index) {
                member.outstanding = member.outstanding.saturating_sub(1);
                if member.health == Health::Probing {
                    // A probe dropped half-way: look again at once.
                    member.health = Health::Ejected {
                        until: Instant::now(),
                    };
                }
            }
        }
        self.bell.notify_waiters();
    }

    /// Records a probe's verdict.
    fn probed(&self, index: usize, ok: bool, settings: &PoolSettings) {
        let mut state = self.lock();
        let Some(member) = state.members.get_mut(index) else {
            return;
        };
        if ok {
            member.health = Health::Up;
            member.usage.readmissions += 1;
            member.usage.healthy = true;
            bevy::log::info!(url = %member.usage.url, "model server answers again; back in the rotation");
        } else {
            Self::eject(member, settings);
        }
    }

    fn eject(member: &mut MemberState, settings: &PoolSettings) {
        let backoff = settings
            .eject_base
            .saturating_mul(2u32.saturating_pow(member.strikes.min(16)))
            .min(settings.eject_max);
        member.strikes = member.strikes.saturating_add(1);
        member.health = Health::Ejected {
            until: Instant::now() + backoff,
        };
        member.usage.ejections += 1;
        member.usage.healthy = false;
        bevy::log::warn!(
            url = %member.usage.url,
            ?backoff,
            "model server ejected from the pool"
        );
    }

    /// Records an attempt's outcome on member `index`, ejecting or pausing it as it deserves.
    fn record(
        &self,
        index: usize,
        outcome: Result<(), &LlmError>,
        latency: Duration,
        settings: &PoolSettings,
    ) {
        let mut state = self.lock();
        let Some(member) = state.members.get_mut(index) else {
            return;
        };
        let ms = u64::try_from(latency.as_millis()).unwrap_or(u64::MAX);
        member.usage.calls += 1;
        member.usage.total_latency_ms = member.usage.total_latency_ms.saturating_add(ms);
        member.usage.max_latency_ms = member.usage.max_latency_ms.max(ms);
        let Err(err) = outcome else {
            member.strikes = 0;
            return;
        };
        member.usage.errors += 1;
        match err {
            LlmError::RateLimited { retry_after } => {
                member.usage.rate_limited += 1;
                let pause = retry_after
                    .unwrap_or(settings.eject_base)
                    .min(settings.retry_after_cap);
                member.paused_until = Some(Instant::now() + pause);
            }
            LlmError::Connection(_) | LlmError::Timeout(_) if member.health == Health::Up => {
                Self::eject(member, settings);
            }
            LlmError::Status { status, .. } if *status >= 500 && member.health == Health::Up => {
                Self::eject(member, settings);
            }
            _ => {}
        }
    }

    fn usage(&self) -> Vec<EndpointUsage> {
        let state = self.lock();
        let now = Instant::now();
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        state
            .members
            .iter()
            .map(|m| EndpointUsage {
                in_flight: m.outstanding,
                healthy: m.health == Health::Up,
                probe_in_ms: match m.health {
                    Health::Up => None,
                    Health::Probing => Some(0),
                    Health::Ejected { until } => Some(ms(until.saturating_duration_since(now))),
                },
                paused_ms: m
                    .paused_until
                    .filter(|t| *t > now)
                    .map(|t| ms(t.saturating_duration_since(now))),
                ..m.usage.clone()
            })
            .collect()
    }
}

/// Gives a pool slot back when dropped.
struct Slot<'a> {
    pool: &'a Pool,
    index: usize,
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.pool.release(self.index);
    }
}

struct Shared {
    chat: Pool,
    /// A separate embedding pool, if configured; else embeddings use `chat`.
    embed: Option<Pool>,
    settings: PoolSettings,
    model: String,
    embed_model: String,
    retry_hook: Mutex<Option<RetryHook>>,
}

/// A backend that routes each call over a pool of servers: weighted least outstanding
/// requests under per-server limits, prefix affinity by [`ChatRequest::affinity`], ejection on
/// connect errors, 5xx and timeouts with a doubling back-off and re-admission by a probe, a
/// 429 pausing only its server, and failed attempts retried on another server within
/// [`PoolSettings::max_retries`] (README "Several model servers"). Per-server counters come
/// back through [`LlmBackend::endpoint_usage`].
pub struct PoolBackend {
    shared: Arc<Shared>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl fmt::Debug for PoolBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PoolBackend")
            .field("chat", &self.shared.chat.members)
            .field("embed", &self.shared.embed.as_ref().map(|p| &p.members))
            .field("settings", &self.shared.settings)
            .finish()
    }
}

impl Drop for PoolBackend {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// The distinct names of `names`, joined with `|` (one name when every server runs the same).
fn joined(names: impl Iterator<Item = String>) -> String {
    let mut distinct: Vec<String> = Vec::new();
    for name in names {
        if !distinct.contains(&name) {
            distinct.push(name);
        }
    }
    distinct.join("|")
}

impl PoolBackend {
    /// A pool over `chat` (which also embeds unless `embed` is given).
    pub fn new(
        chat: Vec<PoolMember>,
        embed: Option<Vec<PoolMember>>,
        settings: PoolSettings,
    ) -> Result<Self, LlmError> {
        let check = |members: &[PoolMember]| {
            if members.is_empty() {
                return Err(LlmError::Malformed(
                    "a pool needs at least one server".into(),
                ));
            }
            if members
                .iter()
                .any(|m| !(m.weight.is_finite() && m.weight >= 0.0) || m.concurrency == 0)
                || members.iter().all(|m| m.weight == 0.0)
            {
                return Err(LlmError::Malformed(
                    "pool weights must be finite, not all 0, and limits at least 1".into(),
                ));
            }
            Ok(())
        };
        check(&chat)?;
        if let Some(embed) = &embed {
            check(embed)?;
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("ga-llm-pool")
            .enable_all()
            .build()
            .map_err(|err| {
                LlmError::Connection(format!("could not start the pool runtime: {err}"))
            })?;
        let model = joined(chat.iter().map(|m| m.backend.model().to_owned()));
        let embed_model = joined(
            embed
                .as_ref()
                .unwrap_or(&chat)
                .iter()
                .map(|m| m.backend.embedding_model().to_owned()),
        );
        Ok(Self {
            shared: Arc::new(Shared {
                chat: Pool::new("chat", chat),
                embed: embed.map(|members| Pool::new("embed", members)),
                settings,
                model,
                embed_model,
                retry_hook: Mutex::new(None),
            }),
            runtime: Some(runtime),
        })
    }

    /// The routing settings.
    pub fn settings(&self) -> &PoolSettings {
        &self.shared.settings
    }

    fn spawn<T, F>(&self, job: F) -> BoxFuture<'_, Result<T, LlmError>>
    where
        T: Send + 'static,
        F: Future<Output = Result<T, LlmError>> + Send + 'static,
    {
        super::http::spawn_on(self.runtime.as_ref(), job)
    }
}

impl Shared {
    fn embed_pool(&self) -> &Pool {
        self.embed.as_ref().unwrap_or(&self.chat)
    }

    fn report_retry(&self, kind: &str) {
        let hook = self
            .retry_hook
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if let Some(hook) = hook {
            hook(kind);
        }
    }

    fn backoff(&self, retry: u32, err: Option<&LlmError>) -> Duration {
        if let Some(LlmError::RateLimited {
            retry_after: Some(after),
        }) = err
        {
            return (*after).min(self.settings.retry_after_cap);
        }
        let ceiling = self
            .settings
            .backoff_base
            .saturating_mul(2u32.saturating_pow(retry.min(20)))
            .min(self.settings.backoff_max);
        let ms = u64::try_from(ceiling.as_millis()).unwrap_or(u64::MAX);
        Duration::from_millis(rand::rng().random_range(0..=ms))
    }

    /// Runs one call over `pool`: picks a member, probes it if it is being re-admitted, makes
    /// the attempt, and retries elsewhere within the budget. `output_sent` tells whether a
    /// stream already delivered text (no retry then).
    async fn route<T>(
        &self,
        pool: &Pool,
        kind: &str,
        key: Option<&str>,
        output_sent: &AtomicBool,
        attempt: impl Fn(Arc<dyn LlmBackend>) -> BoxFuture<'static, Result<T, LlmError>>,
    ) -> Result<T, LlmError> {
        let key = key.filter(|_| self.settings.affinity);
        let mut retries = 0u32;
        let mut avoid = None;
        let mut last_error: Option<LlmError> = None;
        loop {
            let notified = pool.bell.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            let (index, probe) = match pool.pick(key, avoid, Instant::now()) {
                Pick::Go { index, probe } => (index, probe),
                Pick::Wait { until } => {
                    let wait = until
                        .map_or(MAX_WAIT, |t| t.saturating_duration_since(Instant::now()))
                        .min(MAX_WAIT);
                    let _ = tokio::time::timeout(wait, notified).await;
                    continue;
                }
                Pick::AllDown { index } => {
                    let slot = Slot { pool, index };
                    // Every server is out: this costs the call a retry, like a dead server.
                    if let Some(err) = &last_error {
                        if retries >= self.settings.max_retries
                            || output_sent.load(Ordering::SeqCst)
                        {
                            return Err(err.clone());
                        }
                        retries += 1;
                        self.report_retry(kind);
                        tokio::time::sleep(self.backoff(retries - 1, None)).await;
                    }
                    let member = &pool.members[index];
                    let ok = member.backend.probe().await;
                    pool.probed(index, ok.is_ok(), &self.settings);
                    drop(slot);
                    if let Err(err) = ok {
                        last_error = Some(err);
                    }
                    continue;
                }
            };
            let slot = Slot { pool, index };
            let member = &pool.members[index];
            if probe {
                let ok = member.backend.probe().await;
                pool.probed(index, ok.is_ok(), &self.settings);
                if ok.is_err() {
                    drop(slot);
                    continue;
                }
            }
            let start = Instant::now();
            let result = attempt(Arc::clone(&member.backend)).await;
            pool.record(
                index,
                result.as_ref().map(|_| ()),
                start.elapsed(),
                &self.settings,
            );
            drop(slot);
            match result {
                Ok(value) => return Ok(value),
                Err(err) => {
                    if !err.is_transient()
                        || retries >= self.settings.max_retries
                        || output_sent.load(Ordering::SeqCst)
                    {
                        return Err(err);
                    }
                    retries += 1;
                    bevy::log::debug!(
                        kind,
                        retry = retries,
                        url = %member.url,
                        "LLM request failed ({err}); retrying on the pool"
                    );
                    self.report_retry(kind);
                    // Another member can take it at once; otherwise back off as one server would.
                    let elsewhere = {
                        let state = pool.lock();
                        let now = Instant::now();
                        state.members.iter().enumerate().any(|(i, m)| {
                            i != index
                                && (m.health == Health::Up
                                    && m.paused_until.is_none_or(|t| t <= now)
                                    || matches!(m.health, Health::Ejected { until } if until <= now))
                        })
                    };
                    if !elsewhere {
                        tokio::time::sleep(self.backoff(retries - 1, Some(&err))).await;
                    }
                    avoid = Some(index);
                    last_error = Some(err);
                }
            }
        }
    }
}

impl LlmBackend for PoolBackend {
    fn name(&self) -> &str {
        "http"
    }

    /// A pool fails a call over to another server and each server retries on its own.
    fn retries_transient_errors(&self) -> bool {
        true
    }

    fn model(&self) -> &str {
        &self.shared.model
    }

    fn chat(&self, request: ChatRequest) -> BoxFuture<'_, Result<ChatResponse, LlmError>> {
        let shared = Arc::clone(&self.shared);
        self.spawn(async move {
            let never = AtomicBool::new(false);
            let key = request.affinity.clone();
            let kind = request.kind.clone();
            shared
                .route(&shared.chat, &kind, key.as_deref(), &never, |backend| {
                    let request = request.clone();
                    Box::pin(async move { backend.chat(request).await })
                })
                .await
        })
    }

    fn chat_stream(
        &self,
        request: ChatRequest,
        deltas: async_channel::Sender<String>,
    ) -> BoxFuture<'_, Result<ChatResponse, LlmError>> {
        let shared = Arc::clone(&self.shared);
        self.spawn(async move {
            let sent = Arc::new(AtomicBool::new(false));
            let sent_flag = Arc::clone(&sent);
            let key = request.affinity.clone();
            let kind = request.kind.clone();
            shared
                .route(&shared.chat, &kind, key.as_deref(), &sent_flag, |backend| {
                    let request = request.clone();
                    let deltas = deltas.clone();
                    let sent = Arc::clone(&sent);
                    Box::pin(async move {
                        // Deltas pass through here so the pool knows whether any text went out.
                        let (tx, rx) = async_channel::bounded::<String>(32);
                        let forward = async {
                            while let Ok(delta) = rx.recv().await {
                                sent.store(true, Ordering::SeqCst);
                                let _ = deltas.send(delta).await;
                            }
                            future::pending::<Result<ChatResponse, LlmError>>().await
                        };
                        let result = future::or(backend.chat_stream(request, tx), forward).await;
                        while let Ok(delta) = rx.try_recv() {
                            sent.store(true, Ordering::SeqCst);
                            let _ = deltas.send(delta).await;
                        }
                        result
                    })
                })
                .await
        })
    }

    fn embed(&self, texts: Vec<String>) -> BoxFuture<'_, Result<Vec<Vec<f32>>, LlmError>> {
        self.embed_within(texts, None)
    }

    fn embed_within(
        &self,
        texts: Vec<String>,
        budget: Option<RetryBudget>,
    ) -> BoxFuture<'_, Result<Vec<Vec<f32>>, LlmError>> {
        if texts.is_empty() {
            return Box::pin(async { Ok(Vec::new()) });
        }
        let shared = Arc::clone(&self.shared);
        self.spawn(async move {
            let never = AtomicBool::new(false);
            let texts = Arc::new(texts);
            shared
                .route(shared.embed_pool(), EMBED_KIND, None, &never, |backend| {
                    let texts = Arc::clone(&texts);
                    let budget = budget.clone();
                    Box::pin(async move { backend.embed_within((*texts).clone(), budget).await })
                })
                .await
        })
    }

    fn embedding_model(&self) -> &str {
        &self.shared.embed_model
    }

    fn embedding_dim(&self) -> usize {
        self.shared
            .embed_pool()
            .members
            .iter()
            .map(|m| m.backend.embedding_dim())
            .find(|&d| d > 0)
            .unwrap_or(0)
    }

    fn set_retry_hook(&self, hook: RetryHook) {
        *self
            .shared
            .retry_hook
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(hook);
    }

    fn endpoint_usage(&self) -> Vec<EndpointUsage> {
        let mut usage = self.shared.chat.usage();
        if let Some(embed) = &self.shared.embed {
            usage.extend(embed.usage());
        }
        usage
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::ScriptedBackend;

    fn pool(weights: &[f64], limit: usize) -> Pool {
        Pool::new(
            "chat",
            weights
                .iter()
                .enumerate()
                .map(|(i, &weight)| PoolMember {
                    backend: Arc::new(ScriptedBackend::new(i as u64)),
                    url: format!("http://s{i}/v1"),
                    weight,
                    concurrency: limit,
                })
                .collect(),
        )
    }

    fn go(pick: Pick) -> usize {
        match pick {
            Pick::Go {
                index,
                probe: false,
            } => index,
            Pick::Go { index, .. } => panic!("probe of {index}"),
            Pick::Wait { .. } => panic!("wait"),
            Pick::AllDown { index } => panic!("all down, {index}"),
        }
    }

    #[test]
    fn homes_spread_by_weight_and_come_back_after_an_ejection() {
        let pool = pool(&[1.0, 1.0, 2.0], 100);
        let now = Instant::now();
        let mut homes = [0usize; 3];
        for k in 0..8 {
            let i = go(pool.pick(Some(&format!("p{k}")), None, now));
            pool.release(i);
            homes[i] += 1;
        }
        assert_eq!(homes, [2, 2, 4], "homes follow the weights");
        // The same key keeps its home.
        let home = go(pool.pick(Some("p0"), None, now));
        pool.release(home);
        assert_eq!(go(pool.pick(Some("p0"), None, now)), home);
        pool.release(home);

        // Member 2 goes down: its keys move; when it is back, keys drift back one at a time.
        pool.record(
            2,
            Err(&LlmError::Connection("refused".into())),
            Duration::ZERO,
            &PoolSettings::default(),
        );
        for k in 0..8 {
            let i = go(pool.pick(Some(&format!("p{k}")), None, now));
            assert_ne!(i, 2);
            pool.release(i);
        }
        pool.probed(2, true, &PoolSettings::default());
        let later = Instant::now();
        let mut homes = [0usize; 3];
        for _ in 0..3 {
            homes = [0; 3];
            for k in 0..8 {
                let i = go(pool.pick(Some(&format!("p{k}")), None, later));
                pool.release(i);
                homes[i] += 1;
            }
        }
        assert_eq!(homes, [2, 2, 4], "rebalanced after the re-admission");
        let usage = pool.usage();
        assert_eq!((usage[2].ejections, usage[2].readmissions), (1, 1));
    }

    #[test]
    fn a_full_healthy_home_keeps_its_calls_waiting_even_beside_an_idle_server() {
        let pool = pool(&[1.0, 1.0], 4);
        let now = Instant::now();
        let home = go(pool.pick(Some("a"), None, now));
        for _ in 0..3 {
            assert_eq!(go(pool.pick(Some("a"), None, now)), home);
        }
        let other = 1 - home;
        // The home is full and the other server idle: the keyed call still waits for home.
        assert!(
            matches!(pool.pick(Some("a"), None, now), Pick::Wait { until: None }),
            "a healthy home keeps its persona"
        );
        // A call without a key takes the idle server.
        assert_eq!(go(pool.pick(None, None, now)), other);
        pool.release(home);
        assert_eq!(go(pool.pick(Some("a"), None, now)), home, "a slot at home");
        // Every keyed call so far was a hit.
        let usage = pool.lock().members[home].usage.clone();
        assert_eq!((usage.affinity_hits, usage.affinity_calls), (5, 5));
        // A 429 pause takes the home out of the rotation: the key moves to the other server.
        pool.lock().members[home].paused_until = Some(now + Duration::from_secs(5));
        assert_eq!(go(pool.pick(Some("a"), None, now)), other);
        // A retry that must avoid the home goes elsewhere even to a busy server.
        let busy = self::pool(&[1.0, 1.0], 4);
        let h = go(busy.pick(Some("b"), None, now));
        for _ in 0..3 {
            go(busy.pick(None, None, now));
        }
        assert_eq!(go(busy.pick(Some("b"), Some(h), now)), 1 - h);
    }

    #[test]
    fn least_loaded_respects_limits_weights_and_standbys() {
        let pool = pool(&[1.0, 0.0], 2);
        let now = Instant::now();
        // The standby (weight 0) takes calls only when the weighted member is full.
        let a = go(pool.pick(None, None, now));
        let b = go(pool.pick(None, None, now));
        assert_eq!((a, b), (0, 0));
        assert_eq!(go(pool.pick(None, None, now)), 1);
        assert_eq!(go(pool.pick(None, None, now)), 1);
        assert!(matches!(pool.pick(None, None, now), Pick::Wait { .. }));
        pool.release(0);
        assert_eq!(go(pool.pick(None, None, now)), 0);
        // A retry avoids the member that failed when another can take it.
        let pool = self::pool(&[1.0, 1.0], 4);
        assert_eq!(go(pool.pick(None, Some(0), now)), 1);
        assert_eq!(go(pool.pick(None, Some(0), now)), 1);
    }

    #[test]
    fn ejection_backs_off_and_a_429_only_pauses() {
        let settings = PoolSettings::default();
        let pool = pool(&[1.0, 1.0], 4);
        let err = LlmError::Status {
            status: 503,
            message: String::new(),
        };
        pool.record(0, Err(&err), Duration::ZERO, &settings);
        let now = Instant::now();
        let usage = pool.usage();
        assert!(
            matches!(usage[0].probe_in_ms, Some(ms) if ms > 0 && ms <= 1000),
            "{:?}",
            usage[0].probe_in_ms
        );
        assert_eq!((usage[1].probe_in_ms, usage[1].paused_ms), (None, None));
        assert_eq!(go(pool.pick(None, None, now)), 1);
        pool.release(1);
        // Due for a probe once the back-off ran out; a failed probe doubles it.
        let due = now + settings.eject_base + Duration::from_millis(10);
        assert!(matches!(
            pool.pick(None, None, due),
            Pick::Go {
                index: 0,
                probe: true
            }
        ));
        assert_eq!(pool.usage()[0].probe_in_ms, Some(0), "probing");
        pool.probed(0, false, &settings);
        pool.release(0);
        let state = pool.lock();
        let Health::Ejected { until } = state.members[0].health else {
            panic!("ejected again");
        };
        assert!(until >= Instant::now() + settings.eject_base * 2 - Duration::from_millis(50));
        drop(state);

        let limited = LlmError::RateLimited {
            retry_after: Some(Duration::from_secs(5)),
        };
        pool.record(1, Err(&limited), Duration::ZERO, &settings);
        let usage = pool.usage();
        assert!(usage[1].healthy && usage[1].ejections == 0 && usage[1].rate_limited == 1);
        assert!(
            matches!(usage[1].paused_ms, Some(ms) if ms > 4000 && ms <= 5000),
            "{:?}",
            usage[1].paused_ms
        );
        // Member 0 is ejected and member 1 paused: wait for the pause to end.
        assert!(matches!(
            pool.pick(None, None, Instant::now()),
            Pick::Wait { until: Some(_) }
        ));
    }
}
