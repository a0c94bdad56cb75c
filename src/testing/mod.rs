//! Deterministic tools for tests, benchmarks and offline demos.
//!
//! Nothing here is a language model. [`ScriptedBackend`] answers each prompt kind with
//! deterministic, seeded text so that the whole loop can be exercised without a model, and it
//! says so everywhere it is shown (its name is `"scripted"`); [`town_script`] is the script it
//! runs by default, which makes a believable day for any persona. [`FaultyBackend`] wraps another
//! backend and returns garbage for a seeded fraction of calls, to prove the fail-safes.
//!
//! **Layer** (see `tests/layers.rs`): test support on top of everything; nothing in the library
//! imports it.

#[cfg(feature = "http")]
pub mod fake_openai;

use std::time::Duration;

use bevy::app::PluginGroupBuilder;
use bevy::prelude::*;
use bevy::time::TimeUpdateStrategy;

pub use crate::headless::{
    TownSetupError, district_crowd, district_town, spawn_crowd, spawn_default_town,
    synthetic_sheets,
};
pub use crate::llm::offline as town_script;
pub use crate::llm::{FaultyBackend, ScriptedBackend};

use crate::clock::{SimClock, SimSpeed, TimeMode};
use crate::llm::LlmClient;

/// A headless app: [`MinimalPlugins`] (with [`crate::headless::simulation_task_pools`]), the
/// agent plugins, the given client, a Lockstep clock at
/// max speed, and virtual time advancing a fixed 16 ms per update.
pub fn create_test_app(client: LlmClient) -> App {
    create_test_app_with(client, crate::GenerativeAgentsPlugins.build())
}

/// [`create_test_app`] with a chosen set of the agent plugins (some disabled, say: a test of
/// one system without the cognition loop).
pub fn create_test_app_with(client: LlmClient, plugins: PluginGroupBuilder) -> App {
    let mut app = App::new();
    app.add_plugins(MinimalPlugins.set(crate::headless::simulation_task_pools()))
        .insert_resource(TimeUpdateStrategy::ManualDuration(Duration::from_millis(
            16,
        )))
        .insert_resource(client)
        .insert_resource(
            SimClock::default()
                .with_mode(TimeMode::Lockstep)
                .with_speed(SimSpeed::Max),
        )
        .add_plugins(plugins);
    app
}

/// A client over the offline town script ([`town_script::town_script_backend`]) seeded with
/// `seed`: a deterministic [`ScriptedBackend`], not a model.
pub fn scripted_client(seed: u64) -> LlmClient {
    crate::llm::town_script_client(seed)
}

/// Plans `mind`'s day starting at `now` as the cognition loop plans a day after the first:
/// the identity revision from the memories retrieval lists (SPEC §3.6), then the hourly
/// schedule — for a test that follows what a persona knows into its plans without running a
/// whole town (a café of personas with no daily routine, say). Default [`AgentSettings`]; the
/// prompts are the shipped templates.
///
/// [`AgentSettings`]: crate::settings::AgentSettings
pub fn plan_next_day(
    mind: &mut crate::persona::MindState,
    client: &LlmClient,
    now: chrono::NaiveDateTime,
) {
    let ctx = crate::prompt::PromptContext::new(client.clone(), Default::default());
    let settings = crate::settings::AgentSettings::default();
    let mut events = Vec::new();
    bevy::tasks::block_on(crate::cognition::plan::plan_new_day(
        mind,
        &ctx,
        &settings,
        now,
        false,
        &mut events,
    ));
}
