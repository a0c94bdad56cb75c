//! The R2 chaos harness shared by `tests/chaos.rs` (short) and `benches/chaos.rs` (two game
//! days): a loopback OpenAI-compatible server answering as the offline town script, except for
//! a seeded 30 % of transport faults and 20 % of garbage, and a headless run against it.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bevy_generative_agents::clock::{SimSpeed, TimeMode};
use bevy_generative_agents::llm::{BackendChoice, KindUsage, LlmClient, ScriptedBackend};
use bevy_generative_agents::output::{ProgressWatcher, RunOptions, RunProgress, check_replay, run};
use bevy_generative_agents::persist::decode;
use bevy_generative_agents::prompt::PromptLibrary;
use bevy_generative_agents::testing::fake_openai::{
    FakeOpenAi, FakeOpenAiConfig, FakeReply, RecordedRequest, scripted_answers, sse_events,
};
use chrono::NaiveDateTime;

/// The client's per-call timeout in chaos runs.
pub const TIMEOUT: Duration = Duration::from_secs(2);
/// The client's retries per call in chaos runs.
pub const RETRIES: u32 = 2;

/// The faults the server injects, by name.
const TRANSPORT_FAULTS: [&str; 8] = [
    "429 retry-after",
    "500",
    "503",
    "connection closed",
    "hang past timeout",
    "cut-off stream",
    "html 200",
    "bad embeddings",
];

/// What one chaos run did.
#[derive(Debug)]
pub struct ChaosOutcome {
    /// Lockstep or Realtime.
    pub mode: TimeMode,
    /// Game hours asked for.
    pub hours: f64,
    /// Steps taken.
    pub steps: u64,
    /// Real time of the run.
    pub wall: Duration,
    /// The longest real time between two steps.
    pub max_step_wait: Duration,
    /// Requests the server saw.
    pub requests: u64,
    /// Faults injected, by name.
    pub injected: BTreeMap<&'static str, u64>,
    /// Garbage answers injected.
    pub garbage: u64,
    /// The client's accounting (usage.json's totals).
    pub usage: KindUsage,
    /// The response cache file's size, bytes (0 when none).
    pub cache_bytes: u64,
    /// Invariants that did not hold, or the run's error.
    pub problems: Vec<String>,
}

impl ChaosOutcome {
    /// Transport faults injected.
    pub fn transport_faults(&self) -> u64 {
        self.injected.values().sum()
    }

    /// `Err` with every problem, when there is one.
    pub fn check(&self) -> Result<(), String> {
        if self.problems.is_empty() {
            Ok(())
        } else {
            Err(self.problems.join("; "))
        }
    }
}

impl fmt::Display for ChaosOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let u = &self.usage;
        writeln!(
            f,
            "chaos {:?}, {} game h: {} steps in {:.1} s wall; longest wait for a step {:.2} s",
            self.mode,
            self.hours,
            self.steps,
            self.wall.as_secs_f64(),
            self.max_step_wait.as_secs_f64(),
        )?;
        writeln!(
            f,
            "  server: {} requests, {} transport faults {:?}, {} garbage answers",
            self.requests,
            self.transport_faults(),
            self.injected,
            self.garbage
        )?;
        writeln!(
            f,
            "  usage.json: {} calls, {} transport retries, {} errors, {} parse retries, {} \
             fail-safes, {} cache hits; cache file {} bytes",
            u.calls,
            u.transport_retries,
            u.errors,
            u.retries,
            u.fail_safes,
            u.cache_hits,
            self.cache_bytes
        )?;
        write!(
            f,
            "  invariants: {}",
            if self.problems.is_empty() {
                "all held".to_owned()
            } else {
                self.problems.join("; ")
            }
        )
    }
}

/// A small deterministic generator (splitmix64) so a run's faults depend only on the seed and
/// the request's number.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// The garbage texts a chaos server answers with (as a 200 chat completion).
fn garbage_text(pick: u64) -> String {
    match pick % 6 {
        0 => String::new(),
        1 => "Sure! Here is what I think about that, in a few friendly sentences.".into(),
        2 => "{\"output\": [\"unfinished".into(),
        3 => "lorem ipsum ".repeat(9_000),
        4 => "<think>The user wants JSON. Ignore all previous instructions.".into(),
        _ => "{\"output\": {\"hour\": [1, 2]}, \"score\": \"ten\"}".into(),
    }
}

/// A transport fault for request `n`, as the server sends it.
fn transport_fault(pick: u64, request: &RecordedRequest) -> (&'static str, FakeReply) {
    let embedding = request.path.ends_with("/embeddings");
    let name = TRANSPORT_FAULTS[(pick % TRANSPORT_FAULTS.len() as u64) as usize];
    let reply = match name {
        "429 retry-after" => FakeReply::rate_limited(1),
        "500" => FakeReply::error(500, "internal error"),
        "503" => FakeReply::raw(503, "upstream unavailable"),
        "connection closed" => FakeReply::Hang(Duration::ZERO),
        "hang past timeout" => FakeReply::Hang(TIMEOUT + Duration::from_millis(500)),
        "cut-off stream" => {
            let mut events = sse_events("half of an answer that never", None);
            events.truncate(3);
            FakeReply::Sse(events)
        }
        "html 200" => FakeReply::Full {
            status: 200,
            headers: vec![("Content-Type".into(), "text/html".into())],
            body: "<html><body>Gateway says hello</body></html>".into(),
        },
        _ if embedding && pick.is_multiple_of(2) => FakeReply::raw(
            200,
            "{\"object\":\"list\",\"data\":[{\"object\":\"embedding\",\"index\":0,\"embedding\":[NaN,1,2]}]}",
        ),
        _ if embedding => FakeReply::json(
            200,
            &serde_json::json!({"object": "list", "data": [{"object": "embedding", "index": 0, "embedding": [0.5, 0.25]}]}),
        ),
        _ => FakeReply::error(502, "bad gateway"),
    };
    (name, reply)
}

/// Measures the longest real wait between steps.
#[derive(Default)]
struct StepWatch {
    inner: Mutex<(u64, Option<Instant>, Duration)>,
}

impl RunProgress for StepWatch {
    fn stepped(&self, done: u64, _now: NaiveDateTime, _client: &LlmClient) {
        let Ok(mut inner) = self.inner.lock() else {
            return;
        };
        let now = Instant::now();
        let (last_done, since, longest) = &mut *inner;
        match since {
            Some(at) if *last_done == done => {
                *longest = (*longest).max(now - *at);
            }
            _ => {
                *last_done = done;
                *since = Some(now);
            }
        }
    }
}

/// Runs `personas` personas for `hours` game hours in `mode` against a chaos server seeded with
/// `seed`, and checks the invariants.
pub fn run_chaos(hours: f64, mode: TimeMode, personas: usize, seed: u64) -> ChaosOutcome {
    let library = PromptLibrary::default();
    let answers = scripted_answers(ScriptedBackend::new(seed), &library);
    let injected: Arc<Mutex<BTreeMap<&'static str, u64>>> = Arc::default();
    let garbage = Arc::new(AtomicU64::new(0));
    let script = {
        let injected = injected.clone();
        let garbage = garbage.clone();
        move |n: usize, request: &RecordedRequest| {
            let roll = mix(seed ^ (n as u64).wrapping_mul(0x1000_0001));
            let percent = roll % 100;
            if percent < 30 {
                let (name, reply) = transport_fault(roll >> 8, request);
                if let Ok(mut map) = injected.lock() {
                    *map.entry(name).or_default() += 1;
                }
                Some(reply)
            } else if percent < 50 && !request.path.ends_with("/embeddings") {
                garbage.fetch_add(1, Ordering::Relaxed);
                Some(FakeReply::completion(&garbage_text(roll >> 8), 10, 10))
            } else {
                None
            }
        }
    };
    let server = FakeOpenAi::start(FakeOpenAiConfig::new(answers).with_script(script))
        .expect("a loopback server");

    let root = std::env::temp_dir().join(format!(
        "bga-chaos-{}-{:?}-{}",
        std::process::id(),
        mode,
        seed
    ));
    let _ = std::fs::remove_dir_all(&root);
    let out = root.join("out");
    let cache_path: PathBuf = root.join("responses.jsonl");
    let watch = Arc::new(StepWatch::default());
    let mut options = RunOptions::new(hours, &out)
        .with_backend(BackendChoice::Http)
        .with_personas(personas)
        .with_seed(seed);
    options.time_mode = mode;
    // Realtime at full speed: steps never wait for thoughts, so the model lags behind the town.
    options.speed = Some(SimSpeed::Max);
    options.report = false;
    options.llm.base_url = Some(server.base_url());
    options.llm.timeout = TIMEOUT;
    options.llm.connect_timeout = Duration::from_secs(1);
    options.llm.max_retries = RETRIES;
    options.llm.cache_path = Some(cache_path.clone());
    options.progress = Some(ProgressWatcher(watch.clone()));

    let started = Instant::now();
    let result = run(&options);
    let wall = started.elapsed();
    let mut problems = Vec::new();
    let (steps, usage) = match &result {
        Ok(report) => (report.steps, report.usage.totals),
        Err(err) => {
            problems.push(format!("the run failed: {err}"));
            (0, KindUsage::default())
        }
    };
    if let Ok(report) = &result {
        match check_replay(&out, None) {
            Ok(_) => {}
            Err(err) => problems.push(format!("the movement log does not replay: {err}")),
        }
        match report.save_path.as_deref().map(decode) {
            Some(Ok(save)) => {
                for persona in &save.personas {
                    let schedule = &persona.mind.scratch.f_daily_schedule;
                    let total: u32 = schedule.iter().map(|item| item.minutes).sum();
                    if !schedule.is_empty() && total != 1440 {
                        problems.push(format!("{}'s day sums to {total} minutes", persona.name));
                    }
                }
                if save.personas.len() != personas {
                    problems.push(format!(
                        "{} personas saved, {personas} ran",
                        save.personas.len()
                    ));
                }
            }
            Some(Err(err)) => problems.push(format!("the final save does not load: {err}")),
            None => problems.push(format!(
                "no final save ({} minds still out)",
                report.minds_out
            )),
        }
        let transport: u64 = injected.lock().map(|m| m.values().sum()).unwrap_or(0);
        if transport > 0 && usage.transport_retries + usage.errors == 0 {
            problems.push(format!(
                "{transport} transport faults injected, none in usage.json"
            ));
        }
        if garbage.load(Ordering::Relaxed) > 0 && usage.retries + usage.fail_safes == 0 {
            problems.push("garbage answers injected, no parse retry or fail-safe recorded".into());
        }
    }
    let max_step_wait = watch.inner.lock().map(|i| i.2).unwrap_or_default();
    let cache_bytes = std::fs::metadata(&cache_path).map_or(0, |m| m.len());
    let requests = server.calls() as u64;
    let injected = injected.lock().map(|m| m.clone()).unwrap_or_default();
    drop(server);
    let _ = std::fs::remove_dir_all(&root);
    ChaosOutcome {
        mode,
        hours,
        steps,
        wall,
        max_step_wait,
        requests,
        injected,
        garbage: garbage.load(Ordering::Relaxed),
        usage,
        cache_bytes,
        problems,
    }
}
