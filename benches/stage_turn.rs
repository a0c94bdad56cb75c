//! A stage turn's calls run at once (issue 17, SPEC §9): against a loopback OpenAI-compatible
//! server that takes 200 ms per call (8 slots), a 4-actor turn — four actor calls, then the
//! stage agent's — against one call alone. Sequential actors would take five calls' time; the
//! target is ≤ 2.2× one call (the four actor calls overlap, then one resolution).
//!
//! ```text
//! cargo bench --no-default-features --features http --bench stage_turn
//! ```
//!
//! `BGA_LATENCY_MS` (200), `BGA_ACTORS` (4) and `BGA_SAMPLES` (10) override the set-up.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bevy::prelude::*;
use bevy::tasks::block_on;
use bevy_generative_agents::cognition::CognitionPlugin;
use bevy_generative_agents::director::DirectorPlugin;
use bevy_generative_agents::group::GroupPlugin;
use bevy_generative_agents::llm::{BackendChoice, ChatRequest, LlmClient, LlmConfig, build_client};
use bevy_generative_agents::prompt::PromptLibrary;
use bevy_generative_agents::stage::{Actor, Scene, StageCommand, StageTurnResolved};
use bevy_generative_agents::testing::fake_openai::{
    FakeOpenAi, FakeOpenAiConfig, scripted_answers,
};
use bevy_generative_agents::testing::town_script::town_script_backend;
use criterion::{Criterion, SamplingMode, criterion_group, criterion_main};

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn app(client: LlmClient) -> App {
    let mut app = bevy_generative_agents::testing::create_test_app_with(
        client,
        bevy_generative_agents::GenerativeAgentsPlugins
            .build()
            .disable::<CognitionPlugin>()
            .disable::<DirectorPlugin>()
            .disable::<GroupPlugin>(),
    );
    app.update();
    app
}

/// Opens a fresh scene of `actors` characters (a new name each time: nothing is cached) and
/// plays one turn; returns the wall time from the command to the resolution.
fn one_turn(app: &mut App, n: u64, actors: usize) -> Duration {
    let stage = format!("Stage {n}");
    let cast = (0..actors)
        .map(|i| {
            Actor::new(
                format!("Actor {i}"),
                format!("a figure in coat number {n}-{i}"),
            )
        })
        .collect();
    let scene =
        Scene::new(stage.clone(), format!("a bare stage, take {n}"), cast).expect("a scene");
    let mut resolved = bevy::ecs::message::MessageCursor::<StageTurnResolved>::default();
    // Skip what earlier turns left.
    resolved
        .read(app.world().resource::<Messages<StageTurnResolved>>())
        .count();
    app.world_mut().write_message(StageCommand::Open { scene });
    app.world_mut()
        .write_message(StageCommand::next_turn(stage.clone()));
    let start = Instant::now();
    loop {
        app.update();
        let done = resolved
            .read(app.world().resource::<Messages<StageTurnResolved>>())
            .any(|t| t.stage == stage);
        if done {
            let took = start.elapsed();
            app.world_mut().write_message(StageCommand::Close { stage });
            app.update();
            return took;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn bench(c: &mut Criterion) {
    let latency = Duration::from_millis(env_or("BGA_LATENCY_MS", 200));
    let actors: usize = env_or("BGA_ACTORS", 4);
    let samples: usize = env_or("BGA_SAMPLES", 10);
    let answers = scripted_answers(town_script_backend(4), &PromptLibrary::default());
    let server = FakeOpenAi::start(
        FakeOpenAiConfig::new(answers)
            .with_slots(8)
            .with_latency(latency),
    )
    .expect("a loopback server");
    let client = build_client(&LlmConfig {
        backend: BackendChoice::Http,
        base_url: Some(server.base_url()),
        concurrency: 8,
        ..LlmConfig::default()
    })
    .expect("a client");
    let mut app = app(client.clone());
    let counter = AtomicU64::new(0);
    let single = Mutex::new(Vec::new());
    let turns = Mutex::new(Vec::new());

    let mut group = c.benchmark_group("stage_turn");
    group
        .sampling_mode(SamplingMode::Flat)
        .sample_size(samples.max(10));
    group.bench_function("one call", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let n = counter.fetch_add(1, Ordering::SeqCst);
                let request = ChatRequest::new(
                    "stage_actor",
                    format!("You are Actor {n}, an actor in a scene."),
                );
                let start = Instant::now();
                let _ = block_on(client.chat(request));
                let took = start.elapsed();
                single.lock().expect("samples").push(took);
                total += took;
            }
            total
        });
    });
    group.bench_function(format!("{actors}-actor turn"), |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let n = counter.fetch_add(1, Ordering::SeqCst);
                let took = one_turn(&mut app, n, actors);
                turns.lock().expect("samples").push(took);
                total += took;
            }
            total
        });
    });
    group.finish();

    let mean = |v: &[Duration]| v.iter().sum::<Duration>().as_secs_f64() / v.len().max(1) as f64;
    let one = mean(&single.lock().expect("samples"));
    let turn = mean(&turns.lock().expect("samples"));
    println!(
        "stage_turn: one call {:.0} ms; {actors}-actor turn (actors at once, then the stage agent) {:.0} ms = {:.2}x one call (target <= 2.2x; sequential would be {}x); server max concurrent {}",
        one * 1e3,
        turn * 1e3,
        turn / one.max(1e-9),
        actors + 1,
        server.max_concurrent()
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);
