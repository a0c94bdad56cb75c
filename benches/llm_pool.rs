//! A pool of model servers against one: the first-day planning of 25 personas (the real
//! cognition path: a headless app in Lockstep until every persona has its day planned and its
//! first action grounded) against loopback OpenAI-compatible servers that take 200 ms per call
//! and serve 4 calls at once each (like `llama-server -np 4`).
//!
//! * `one server`: one server, the client allowing 8 calls in flight — a third of the pool's
//!   concurrency — through the plain single-endpoint backend;
//! * `three servers, affinity`: three such servers, 8 calls in flight per server (24 in all),
//!   prefix affinity on;
//! * `three servers, least-loaded`: the same with affinity off (plain weighted
//!   least-outstanding-requests).
//!
//! Criterion times each planning burst; after the group the bench prints the mean wall times,
//! the pool's wall-time ratio to the single server (target ≤ 0.4), and the affinity hit rate —
//! the share of each persona's chat calls that landed on that persona's usual server, counted
//! by the servers themselves (target ≥ 90 % with affinity on) — next to the pool's own count.
//!
//! ```text
//! cargo bench --no-default-features --features http --bench llm_pool
//! ```
//!
//! `BGA_PERSONAS` (25), `BGA_LATENCY_MS` (200), `BGA_SLOTS` (4), `BGA_PER_SERVER` (8) and
//! `BGA_SAMPLES` (10) override the set-up. `BGA_TRACE=1` prints, on stderr, a line every
//! 100 ms of each burst (step, personas awaiting a thought, calls in flight in the client and
//! at each server, calls served) and, per burst, the chat calls per persona and the chat and
//! embedding calls per server: where the wall time goes.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bevy::prelude::*;
use bevy_generative_agents::llm::{
    HttpBackend, HttpConfig, LlmBackend, LlmClient, PoolBackend, PoolMember, PoolSettings,
};
use bevy_generative_agents::persona::{ActionView, Diary, Persona};
use bevy_generative_agents::prompt::PromptLibrary;
use bevy_generative_agents::testing::fake_openai::{
    FakeOpenAi, FakeOpenAiConfig, RecordedRequest, scripted_answers,
};
use bevy_generative_agents::testing::town_script::town_script_backend;
use bevy_generative_agents::testing::{create_test_app, spawn_crowd, synthetic_sheets};
use bevy_generative_agents::world::TownMap;
use criterion::{Criterion, SamplingMode, criterion_group, criterion_main};

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Setup {
    OneServer,
    Affinity,
    LeastLoaded,
}

impl Setup {
    fn label(self) -> &'static str {
        match self {
            Self::OneServer => "one server",
            Self::Affinity => "three servers, affinity",
            Self::LeastLoaded => "three servers, least-loaded",
        }
    }
}

/// What one planning burst measured.
#[derive(Debug, Default, Clone)]
struct Burst {
    wall: Duration,
    calls: usize,
    /// Chat calls per persona per server, as the servers counted them.
    per_persona: BTreeMap<String, Vec<usize>>,
    /// The pool's own affinity count: (hits, keyed calls).
    pool_affinity: (u64, u64),
    planned: (usize, usize),
}

struct Params {
    personas: usize,
    latency: Duration,
    slots: usize,
    per_server: usize,
}

/// The persona a chat request is about: the name found first in its prompt (the longest
/// name at that place, so "Elena Reyes 2" is not taken for "Elena Reyes").
fn persona_tagger(names: Arc<Vec<String>>) -> impl Fn(&RecordedRequest) -> Option<String> {
    move |request| {
        if !request.path.ends_with("/chat/completions") {
            return None;
        }
        let body = &request.body;
        names
            .iter()
            .filter_map(|name| body.find(name.as_str()).map(|at| (at, name)))
            .min_by(|a, b| a.0.cmp(&b.0).then(b.1.len().cmp(&a.1.len())))
            .map(|(_, name)| name.clone())
    }
}

fn planned(app: &mut App) -> (usize, usize) {
    let mut query = app
        .world_mut()
        .query_filtered::<(&Diary, &ActionView), With<Persona>>();
    let mut total = 0;
    let mut done = 0;
    for (diary, view) in query.iter(app.world()) {
        total += 1;
        if !diary.days.is_empty() && view.address.is_some() {
            done += 1;
        }
    }
    (done, total)
}

fn burst(setup: Setup, p: &Params, seed: u64) -> Result<Burst, Box<dyn std::error::Error>> {
    let library = PromptLibrary::default();
    let sheets = synthetic_sheets(p.personas)?;
    let names = Arc::new(sheets.iter().map(|s| s.name.clone()).collect::<Vec<_>>());
    let servers_n = if setup == Setup::OneServer { 1 } else { 3 };
    let servers = (0..servers_n)
        .map(|_| {
            FakeOpenAi::start(
                FakeOpenAiConfig::new(scripted_answers(town_script_backend(seed), &library))
                    .with_latency(p.latency)
                    .with_slots(p.slots)
                    .with_tagger(persona_tagger(Arc::clone(&names))),
            )
        })
        .collect::<Result<Vec<_>, _>>()?;
    let http = |server: &FakeOpenAi, retries: u32| {
        HttpBackend::new(HttpConfig {
            timeout: p.latency * 50 + Duration::from_secs(10),
            max_retries: retries,
            worker_threads: 1,
            ..HttpConfig::new(server.base_url(), "fake-model")
        })
    };
    let (backend, global): (Arc<dyn LlmBackend>, usize) = match setup {
        Setup::OneServer => (Arc::new(http(&servers[0], 4)?), p.per_server),
        Setup::Affinity | Setup::LeastLoaded => {
            let members = servers
                .iter()
                .map(|s| {
                    Ok::<_, Box<dyn std::error::Error>>(PoolMember {
                        backend: Arc::new(http(s, 0)?),
                        url: s.base_url(),
                        weight: 1.0,
                        concurrency: p.per_server,
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            let settings = PoolSettings {
                affinity: setup == Setup::Affinity,
                ..PoolSettings::default()
            };
            (
                Arc::new(PoolBackend::new(members, None, settings)?),
                p.per_server * 3,
            )
        }
    };
    let client = LlmClient::builder(backend).concurrency(global).build()?;
    let mut app = create_test_app(client.clone());
    let map = TownMap::load_tmx(TownMap::default_town_path())?;
    spawn_crowd(&mut app, map, &sheets, seed)?;
    app.finish();
    app.cleanup();

    let start = Instant::now();
    let timeout = Duration::from_secs(600);
    let trace = std::env::var_os("BGA_TRACE").is_some();
    let mut next_sample = Duration::ZERO;
    let planned = loop {
        app.update();
        let (done, total) = planned(&mut app);
        if trace && start.elapsed() >= next_sample {
            next_sample += Duration::from_millis(100);
            let awaiting = app
                .world_mut()
                .query_filtered::<(), With<bevy_generative_agents::clock::AwaitingCognition>>()
                .iter(app.world())
                .count();
            let step = app
                .world()
                .resource::<bevy_generative_agents::clock::SimClock>()
                .step();
            let per: Vec<usize> = servers.iter().map(FakeOpenAi::in_flight).collect();
            let calls: Vec<usize> = servers.iter().map(FakeOpenAi::calls).collect();
            eprintln!(
                "TRACE {:?} t={:.2} step={} awaiting={} planned={}/{} client_in_flight={} server_in_flight={:?} calls={:?}",
                setup,
                start.elapsed().as_secs_f64(),
                step,
                awaiting,
                done,
                total,
                client.in_flight(),
                per,
                calls
            );
        }
        if done == total || start.elapsed() > timeout {
            break (done, total);
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    let wall = start.elapsed();
    let mut per_persona: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (s, server) in servers.iter().enumerate() {
        for (name, count) in server.tag_counts() {
            per_persona
                .entry(name)
                .or_insert_with(|| vec![0; servers_n])[s] = count;
        }
    }
    if std::env::var_os("BGA_TRACE").is_some() {
        let mut chains: Vec<usize> = per_persona.values().map(|c| c.iter().sum()).collect();
        chains.sort_unstable();
        eprintln!(
            "TRACE {setup:?} wall={:.2} chat calls per persona {chains:?}; embedding calls {:?}; chat {:?}",
            wall.as_secs_f64(),
            servers
                .iter()
                .map(FakeOpenAi::embedding_calls)
                .collect::<Vec<_>>(),
            servers
                .iter()
                .map(FakeOpenAi::chat_calls)
                .collect::<Vec<_>>(),
        );
    }
    let usage = client.usage();
    let pool_affinity = usage.endpoints.iter().fold((0, 0), |(h, c), e| {
        (h + e.affinity_hits, c + e.affinity_calls)
    });
    Ok(Burst {
        wall,
        calls: servers.iter().map(FakeOpenAi::calls).sum(),
        per_persona,
        pool_affinity,
        planned,
    })
}

/// The share of chat calls that landed on their persona's most used server.
fn affinity_rate(per_persona: &BTreeMap<String, Vec<usize>>) -> (f64, f64) {
    let mut on_home = 0;
    let mut all = 0;
    let mut worst = 1.0f64;
    for counts in per_persona.values() {
        let total: usize = counts.iter().sum();
        let home = counts.iter().copied().max().unwrap_or(0);
        on_home += home;
        all += total;
        if total > 0 {
            worst = worst.min(home as f64 / total as f64);
        }
    }
    (on_home as f64 / all.max(1) as f64, worst)
}

fn pool_bench(c: &mut Criterion) {
    let params = Params {
        personas: env_or("BGA_PERSONAS", 25),
        latency: Duration::from_millis(env_or("BGA_LATENCY_MS", 200)),
        slots: env_or("BGA_SLOTS", 4),
        per_server: env_or("BGA_PER_SERVER", 8),
    };
    let samples: usize = env_or("BGA_SAMPLES", 10);
    let results: Arc<Mutex<BTreeMap<&'static str, Vec<Burst>>>> = Arc::default();
    let mut group = c.benchmark_group("llm_pool/first_day_planning");
    group
        .sample_size(samples.max(10))
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_millis(1))
        .measurement_time(Duration::from_secs(1));
    for setup in [Setup::OneServer, Setup::Affinity, Setup::LeastLoaded] {
        let results = Arc::clone(&results);
        let params = &params;
        group.bench_function(setup.label(), move |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for i in 0..iters {
                    match burst(setup, params, 7 + i) {
                        Ok(burst) => {
                            total += burst.wall;
                            results
                                .lock()
                                .unwrap_or_else(std::sync::PoisonError::into_inner)
                                .entry(setup.label())
                                .or_default()
                                .push(burst);
                        }
                        Err(error) => panic!("llm_pool bench: {error}"),
                    }
                }
                total
            });
        });
    }
    group.finish();

    let results = results
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let mean = |label: &str| {
        let runs = results.get(label).map(Vec::as_slice).unwrap_or_default();
        runs.iter().map(|b| b.wall.as_secs_f64()).sum::<f64>() / runs.len().max(1) as f64
    };
    println!(
        "\nllm_pool: {} personas, {} ms per call, {} slots per server, {} calls in flight per \
         server",
        params.personas,
        params.latency.as_millis(),
        params.slots,
        params.per_server
    );
    let one = mean(Setup::OneServer.label());
    for setup in [Setup::OneServer, Setup::Affinity, Setup::LeastLoaded] {
        let runs = results
            .get(setup.label())
            .map(Vec::as_slice)
            .unwrap_or_default();
        let Some(last) = runs.last() else { continue };
        let wall = mean(setup.label());
        let rates: Vec<(f64, f64)> = runs.iter().map(|b| affinity_rate(&b.per_persona)).collect();
        let rate = rates.iter().map(|r| r.0).sum::<f64>() / rates.len().max(1) as f64;
        let worst = rates.iter().map(|r| r.1).fold(1.0f64, f64::min);
        let (hits, keyed) = runs.iter().fold((0, 0), |(h, k), b| {
            (h + b.pool_affinity.0, k + b.pool_affinity.1)
        });
        println!(
            "  {:<28} mean wall {:>6.2} s over {} runs, ratio to one server {:.3}, {} calls per \
             run, planned {}/{}, same-server share {:.1} % (worst persona {:.1} %), pool \
             affinity hits {}",
            setup.label(),
            wall,
            runs.len(),
            wall / one.max(f64::EPSILON),
            last.calls,
            last.planned.0,
            last.planned.1,
            rate * 100.0,
            worst * 100.0,
            if keyed == 0 {
                "-".to_owned()
            } else {
                format!("{:.1} %", hits as f64 * 100.0 / keyed as f64)
            }
        );
    }
}

criterion_group!(benches, pool_bench);
criterion_main!(benches);
