//! # bevy_generative_agents
//!
//! LLM-driven *generative agents* — the Smallville design of Park et al. (2023) — as Bevy
//! plugins. Personas are ECS entities with memory; they perceive, remember, plan their day,
//! react, talk, reflect and walk a tile-map town, and every model call runs off the main thread.
//!
//! ## The pipeline, in the order a step runs it
//!
//! 1. **The clock** ([`clock`]) decides that a sim step is due — at the chosen speed, and in
//!    [`TimeMode::Lockstep`](clock::TimeMode) only once every persona's previous thought has
//!    landed — and runs the [`SimStep`](clock::SimStep) schedule. Each step is 10 game seconds.
//! 2. **Perceive**: a persona looks `vision_r` tiles around it ([`world::TownMap::nearby_tiles`]),
//!    adds what it sees to its [`SpatialMemory`](memory::SpatialMemory), and stores the
//!    closest new events of its arena in its [`AssociativeMemory`](memory::AssociativeMemory),
//!    each with an embedding and a poignancy.
//! 3. **Retrieve**: memories are scored by recency (0.995 per game hour), relevance (cosine of
//!    embeddings) and importance (poignancy), each min–max normalised
//!    ([`memory::new_retrieve`]).
//! 4. **Plan**: on a new day the persona wakes, writes a daily plan and an hourly schedule;
//!    when an action ends it decomposes the hour into 5-minute tasks and grounds the next one in
//!    a sector, arena and object it knows; it may react to what it saw by talking or waiting.
//! 5. **Reflect**: when enough poignant things have happened, it asks itself questions and
//!    stores insights.
//! 6. **Execute**: the action's address becomes a tile and a path; the body moves one tile per
//!    step, and its event is placed on the map for others to perceive.
//!
//! Model calls go through [`prompt::run_prompt`]: build inputs → call → clean → parse →
//! validate → retry → typed fail-safe. Backends ([`llm`]) are an OpenAI-compatible HTTP
//! client (feature `http`), the embedded local model (feature `local-llm`), and for tests and
//! offline demos a deterministic, clearly named scripted backend running the offline town
//! script ([`llm::offline`]).
//!
//! ## Layers
//!
//! The modules are one-way layers: each imports only those below it (`tests/layers.rs` checks
//! every `crate::` path).
//!
//! | layer | modules |
//! | --- | --- |
//! | ground | [`settings`], [`clock`], [`world`], [`memory`] |
//! | models | [`llm`] (backends, the offline town script, the client) → [`prompt`] |
//! | agents | [`persona`] → [`cognition`] |
//! | apps | [`headless`], [`eval`] → [`output`] (the run folder), [`persist`] (saves) → `render` |
//! | test support | [`testing`] |
//!
//! ## Plugins
//!
//! | plugin | what it adds |
//! | --- | --- |
//! | [`ClockPlugin`](clock::ClockPlugin) | [`SimClock`](clock::SimClock), the step driver, [`AgentSystems`](clock::AgentSystems), [`AgentSettings`](settings::AgentSettings) |
//! | [`WorldPlugin`](world::WorldPlugin) | the town's types (insert a [`TownMap`](world::TownMap) loaded from a Tiled file) |
//! | [`PersonaPlugin`](persona::PersonaPlugin) | persona components |
//! | [`LlmPlugin`](llm::LlmPlugin) | the [`LlmClient`](llm::LlmClient) (from config/env unless the game inserts one) |
//! | [`PromptPlugin`](prompt::PromptPlugin) | the prompt templates |
//! | [`CognitionPlugin`](cognition::CognitionPlugin) | the loop: percepts, thoughts (perceive → retrieve → plan → reflect), conversations, execution |
//!
//! ```
//! use bevy::prelude::*;
//! use bevy_generative_agents::prelude::*;
//!
//! let mut app = App::new();
//! app.add_plugins(MinimalPlugins)
//!     .insert_resource(LlmClient::new(std::sync::Arc::new(ScriptedBackend::new(7))))
//!     .add_plugins(GenerativeAgentsPlugins.build().disable::<PromptPlugin>());
//! app.update();
//! assert_eq!(app.world().resource::<SimClock>().step(), 0);
//! ```

#![warn(missing_docs)]

pub mod clock;
pub mod cognition;
pub mod eval;
pub mod headless;
pub mod llm;
pub mod memory;
pub mod output;
pub mod persist;
pub mod persona;
pub mod prompt;
#[cfg(feature = "render")]
pub mod render;
pub mod settings;
pub mod testing;
pub mod world;

use bevy::app::plugin_group;

/// The README's code samples compile and run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

plugin_group! {
    /// Everything a headless simulation needs. Rendering is added separately.
    pub struct GenerativeAgentsPlugins {
        clock:::ClockPlugin,
        world:::WorldPlugin,
        persona:::PersonaPlugin,
        llm:::LlmPlugin,
        prompt:::PromptPlugin,
        cognition:::CognitionPlugin,
    }
}

/// The common imports.
pub mod prelude {
    pub use crate::GenerativeAgentsPlugins;
    pub use crate::clock::{
        AgentSystems, ClockPlugin, SimClock, SimSpeed, StepCompleted, TimeMode,
    };
    pub use crate::llm::{LlmBackend, LlmClient, LlmPlugin};
    pub use crate::llm::{ScriptedBackend, town_script_client};
    pub use crate::persona::{
        ActionView, Body, Mind, Percepts, Persona, PersonaPlugin, PersonaSheet,
    };
    pub use crate::prompt::{PromptLibrary, PromptPlugin};
    pub use crate::settings::AgentSettings;
    pub use crate::world::{TileCoord, TownMap, WorldPlugin};
}
