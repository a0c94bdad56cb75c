//! Concurrency of the cognitive loop: the first-day planning of 25 personas against a loopback
//! OpenAI-compatible server that takes a fixed 200 ms per call.
//!
//! Every persona plans concurrently (wake-up hour, daily plan, hourly schedule, the first
//! decomposition and the grounding of its first action), so the wall time should be a fraction
//! of the *sequential* time — the sum of all call latencies, which is what the original
//! Smallville schedule (one persona, one call at a time) would take. Prints both and their
//! ratio (target ≥ 10×), the number of calls, the client's concurrency limit and the peak
//! number of calls the server saw in flight — and how much of each prompt matches the same
//! persona's previous prompt (the share a server's prefix cache can reuse; target ≥ 70 %).
//!
//! ```text
//! cargo bench --no-default-features --features http --bench concurrency
//! ```
//!
//! Environment overrides: `BGA_PERSONAS` (25), `BGA_LATENCY_MS` (200), `BGA_CONCURRENCY` (32),
//! `BGA_SEED` (7), `BGA_TIMEOUT_S` (600).

use std::process::ExitCode;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use bevy::prelude::*;
use bevy_generative_agents::llm::{
    BoxFuture, ChatRequest, ChatResponse, ChoiceRequest, HttpBackend, HttpConfig, LlmBackend,
    LlmClient, LlmError, PrefixShare, RetryBudget, RetryHook,
};
use bevy_generative_agents::persona::{ActionView, Diary, Persona};
use bevy_generative_agents::prompt::PromptLibrary;
use bevy_generative_agents::testing::fake_openai::{
    FakeOpenAi, FakeOpenAiConfig, scripted_answers,
};
use bevy_generative_agents::testing::town_script::town_script_backend;
use bevy_generative_agents::testing::{create_test_app, spawn_crowd, synthetic_sheets};
use bevy_generative_agents::world::TownMap;

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The HTTP backend, with every chat prompt counted against the same persona's previous one.
struct SharingBackend {
    inner: HttpBackend,
    share: Mutex<PrefixShare>,
}

impl SharingBackend {
    fn count(&self, request: &ChatRequest) {
        let Some(persona) = request.affinity.as_deref() else {
            return;
        };
        let prompt: String = request
            .messages
            .iter()
            .map(|m| m.content.as_str())
            .collect();
        self.share
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .observe_kind(persona, &request.kind, &prompt);
    }
}

impl LlmBackend for SharingBackend {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn model(&self) -> &str {
        self.inner.model()
    }
    fn chat(&self, request: ChatRequest) -> BoxFuture<'_, Result<ChatResponse, LlmError>> {
        self.count(&request);
        self.inner.chat(request)
    }
    fn chat_stream(
        &self,
        request: ChatRequest,
        deltas: async_channel::Sender<String>,
    ) -> BoxFuture<'_, Result<ChatResponse, LlmError>> {
        self.count(&request);
        self.inner.chat_stream(request, deltas)
    }
    fn embed(&self, texts: Vec<String>) -> BoxFuture<'_, Result<Vec<Vec<f32>>, LlmError>> {
        self.inner.embed(texts)
    }
    fn embed_within(
        &self,
        texts: Vec<String>,
        budget: Option<RetryBudget>,
    ) -> BoxFuture<'_, Result<Vec<Vec<f32>>, LlmError>> {
        self.inner.embed_within(texts, budget)
    }
    fn embedding_model(&self) -> &str {
        self.inner.embedding_model()
    }
    fn embedding_dim(&self) -> usize {
        self.inner.embedding_dim()
    }
    fn score_choices(&self, request: ChoiceRequest) -> BoxFuture<'_, Result<Vec<f32>, LlmError>> {
        self.inner.score_choices(request)
    }
    fn supports_choice_scoring(&self) -> bool {
        self.inner.supports_choice_scoring()
    }
    fn shut_down(&self) {
        self.inner.shut_down();
    }
    fn set_retry_hook(&self, hook: RetryHook) {
        self.inner.set_retry_hook(hook);
    }
    fn retries_transient_errors(&self) -> bool {
        self.inner.retries_transient_errors()
    }
}

/// Personas whose first day is planned and whose first action is grounded.
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

fn main() -> ExitCode {
    // `cargo bench` passes `--bench`; this harness takes no arguments of its own.
    let personas: usize = env_or("BGA_PERSONAS", 25);
    let latency = Duration::from_millis(env_or("BGA_LATENCY_MS", 200));
    let concurrency: usize = env_or("BGA_CONCURRENCY", 32);
    let seed: u64 = env_or("BGA_SEED", 7);
    let timeout = Duration::from_secs(env_or("BGA_TIMEOUT_S", 600));
    match run(personas, latency, concurrency, seed, timeout) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(error) => {
            eprintln!("concurrency bench failed: {error}");
            ExitCode::FAILURE
        }
    }
}

fn run(
    personas: usize,
    latency: Duration,
    concurrency: usize,
    seed: u64,
    timeout: Duration,
) -> Result<bool, Box<dyn std::error::Error>> {
    let library = PromptLibrary::default();
    let server = FakeOpenAi::start(
        FakeOpenAiConfig::new(scripted_answers(town_script_backend(seed), &library))
            .with_latency(latency),
    )?;
    let backend = HttpBackend::new(HttpConfig {
        timeout: latency * 20 + Duration::from_secs(10),
        worker_threads: 2,
        ..HttpConfig::new(server.base_url(), "fake-model")
    })?;
    let backend = Arc::new(SharingBackend {
        inner: backend,
        share: Mutex::new(PrefixShare::new()),
    });
    let client = LlmClient::builder(backend.clone())
        .concurrency(concurrency)
        .build()?;
    let cache_policy = client.cache_policy();

    let mut app = create_test_app(client.clone());
    let map = TownMap::load_tmx(TownMap::default_town_path())?;
    spawn_crowd(&mut app, map, &synthetic_sheets(personas)?, seed)?;
    app.finish();
    app.cleanup();

    println!(
        "concurrency bench: {personas} personas, {} ms per call, \
         client concurrency limit {concurrency}, cache {cache_policy:?}",
        latency.as_millis()
    );
    let start = Instant::now();
    let mut last_report = start;
    let (done, total) = loop {
        app.update();
        let (done, total) = planned(&mut app);
        if done == total || start.elapsed() > timeout {
            break (done, total);
        }
        if last_report.elapsed() >= Duration::from_secs(5) {
            last_report = Instant::now();
            eprintln!(
                "  … {done}/{total} planned after {:.1} s, {} calls, {} in flight",
                start.elapsed().as_secs_f64(),
                server.calls(),
                server.in_flight()
            );
        }
        // The step driver already yields while thoughts are out; this keeps an idle frame
        // loop from starving the server and HTTP threads on a small machine.
        std::thread::sleep(Duration::from_millis(1));
    };
    let wall = start.elapsed();
    let sequential = server.busy_time();
    let calls = server.calls();
    let step = app
        .world()
        .resource::<bevy_generative_agents::clock::SimClock>()
        .step();

    println!("personas planned:        {done}/{total} (at sim step {step})");
    println!("wall time:               {:.2} s", wall.as_secs_f64());
    println!(
        "calls:                   {calls} ({} chat, {} embeddings)",
        server.chat_calls(),
        server.embedding_calls()
    );
    println!(
        "sum of call latencies:   {:.2} s  (the sequential, one-call-at-a-time schedule)",
        sequential.as_secs_f64()
    );
    println!(
        "ratio:                   {:.1}x faster than sequential (target >= 10x)",
        sequential.as_secs_f64() / wall.as_secs_f64().max(f64::EPSILON)
    );
    println!(
        "max concurrent calls:    {} (client limit {concurrency})",
        server.max_concurrent()
    );
    {
        let share = backend.share.lock().unwrap_or_else(PoisonError::into_inner);
        println!(
            "prefix share:            {:.1} % of prompt bytes match the same persona's previous \
             prompt ({} prompts; target >= 70 %)",
            share.share() * 100.0,
            share.prompts()
        );
        let mut kinds: Vec<_> = share.by_kind().iter().collect();
        kinds.sort_by_key(|(_, (_, total))| std::cmp::Reverse(*total));
        for (kind, (shared, total)) in kinds {
            println!(
                "  {kind:<30} {:>5.1} % of {total} bytes",
                *shared as f64 * 100.0 / (*total).max(1) as f64
            );
        }
    }
    let usage = client.usage();
    println!(
        "usage per prompt kind:   {}",
        serde_json::to_string(&usage)?
    );
    if done < total {
        eprintln!(
            "not every persona finished its first-day planning within {} s",
            timeout.as_secs()
        );
        return Ok(false);
    }
    Ok(true)
}
