//! A custom [`LlmBackend`]: a budget guard that forwards calls to another backend until its
//! budget is spent, then refuses — and the town keeps living on each prompt's fail-safe.
//!
//! ```sh
//! cargo run --example custom_backend -- 40    # a budget of 40 model calls (default 20)
//! ```
//!
//! Wrapping a backend is how a game adds its own policy (cost caps, logging, routing) without
//! touching the simulation: implement the trait, wrap it in an [`LlmClient`], insert it before
//! the plugins. Here the wrapped backend is the offline town script (not a model); with a
//! server, wrap `HttpBackend` the same way.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bevy::prelude::*;
use bevy_generative_agents::headless::{simulation_task_pools, spawn_default_town};
use bevy_generative_agents::llm::{
    BoxFuture, ChatRequest, ChatResponse, ChoiceRequest, LlmError, RetryHook, town_script_backend,
};
use bevy_generative_agents::prelude::*;

/// Forwards to `inner` while calls are left in the budget; refuses afterwards.
struct BudgetGuard {
    inner: Arc<dyn LlmBackend>,
    left: AtomicU64,
    refused: AtomicU64,
}

impl BudgetGuard {
    fn new(inner: Arc<dyn LlmBackend>, budget: u64) -> Self {
        Self {
            inner,
            left: AtomicU64::new(budget),
            refused: AtomicU64::new(0),
        }
    }

    /// Takes one call from the budget, or says it is spent.
    fn spend(&self) -> Result<(), LlmError> {
        self.left
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .map(|_| ())
            .map_err(|_| {
                self.refused.fetch_add(1, Ordering::SeqCst);
                LlmError::Unsupported("the call budget is spent")
            })
    }
}

impl LlmBackend for BudgetGuard {
    fn name(&self) -> &str {
        "budget-guard"
    }

    fn model(&self) -> &str {
        self.inner.model()
    }

    fn chat(&self, request: ChatRequest) -> BoxFuture<'_, Result<ChatResponse, LlmError>> {
        Box::pin(async move {
            self.spend()?;
            self.inner.chat(request).await
        })
    }

    fn embed(&self, texts: Vec<String>) -> BoxFuture<'_, Result<Vec<Vec<f32>>, LlmError>> {
        // Embeddings are cheap; they are not counted against the budget.
        self.inner.embed(texts)
    }

    fn embedding_model(&self) -> &str {
        self.inner.embedding_model()
    }

    fn embedding_dim(&self) -> usize {
        self.inner.embedding_dim()
    }

    fn score_choices(&self, request: ChoiceRequest) -> BoxFuture<'_, Result<Vec<f32>, LlmError>> {
        Box::pin(async move {
            self.spend()?;
            self.inner.score_choices(request).await
        })
    }

    fn supports_choice_scoring(&self) -> bool {
        self.inner.supports_choice_scoring()
    }

    fn set_retry_hook(&self, hook: RetryHook) {
        self.inner.set_retry_hook(hook);
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let budget: u64 = match std::env::args().nth(1) {
        Some(arg) => arg
            .parse()
            .map_err(|err| format!("expected a whole number of calls, got {arg:?}: {err}"))?,
        None => 20,
    };
    let guard = Arc::new(BudgetGuard::new(Arc::new(town_script_backend(7)), budget));

    let mut app = App::new();
    app.add_plugins(MinimalPlugins.set(simulation_task_pools()))
        .insert_resource(LlmClient::new(guard.clone()))
        .insert_resource(
            SimClock::default()
                .with_mode(TimeMode::Lockstep)
                .with_speed(SimSpeed::Max),
        )
        .add_plugins(GenerativeAgentsPlugins);
    spawn_default_town(&mut app, Some(3), 7)?;

    // Three game hours from midnight: the first day's planning (about 36 calls for three
    // personas) spends the budget.
    let steps = 3 * 360;
    while app.world().resource::<SimClock>().step() < steps {
        app.update();
    }

    let usage = app.world().resource::<LlmClient>().usage();
    let refused = guard.refused.load(Ordering::SeqCst);
    println!(
        "budget {budget}: {} calls reached the town script, {refused} were refused, {} \
         answers came from fail-safes",
        budget - guard.left.load(Ordering::SeqCst),
        usage.totals.fail_safes
    );
    let mut personas = app
        .world_mut()
        .query_filtered::<(&Name, &ActionView), With<Persona>>();
    for (name, view) in personas.iter(app.world()) {
        let address = view.address.as_ref().map(ToString::to_string);
        println!(
            "  {name}: {} @ {}",
            view.description,
            address.unwrap_or_default()
        );
    }
    // Every persona still has a place to be, budget or not.
    let world = app.world_mut();
    let mut views = world.query_filtered::<&ActionView, With<Persona>>();
    if views.iter(world).any(|v| v.address.is_none()) {
        return Err("a persona was left without an action".into());
    }
    Ok(())
}
