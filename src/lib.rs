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
//! 7. **Outcomes** ([`cognition::outcome`]): what landed is told to the game, each as an
//!    entity event on the persona (observers) and a message — [`ActionStarted`](cognition::ActionStarted),
//!    [`PlanUpdated`](cognition::PlanUpdated), [`NewDay`](cognition::NewDay),
//!    [`ConversationStarted`](cognition::ConversationStarted) / [`ConversationEnded`](cognition::ConversationEnded),
//!    [`ReflectionCompleted`](cognition::ReflectionCompleted), [`ModelCallFailed`](cognition::ModelCallFailed).
//!
//! Steps 3–5 run inside each persona's *thought*, one `async` task per persona per step, so
//! they have no system set of their own. The sets, and where a game hooks in:
//!
//! | schedule | set | what runs there |
//! | --- | --- | --- |
//! | the game's (`Update` by default) | [`GenerativeAgentsSystems::Drive`](clock::GenerativeAgentsSystems) | the step driver: polls, then runs the due [`SimStep`](clock::SimStep)s |
//! | [`SimStep`](clock::SimStep) | [`AgentSystems::First`](clock::AgentSystems) | nothing: a hook before the personas think |
//! | | [`AgentSystems::Perceive`](clock::AgentSystems) | percepts gathered, places learnt |
//! | | [`AgentSystems::Think`](clock::AgentSystems) | conversations and thoughts started (or bookkeeping in place) |
//! | | [`AgentSystems::Execute`](clock::AgentSystems) | paths planned, bodies moved, events placed |
//! | | [`AgentSystems::Last`](clock::AgentSystems) | arenas visited recorded; a hook to read the step |
//! | [`SimPoll`](clock::SimPoll) (between steps) | [`PollSystems::LandThoughts`](clock::PollSystems) | finished thoughts and conversations checked in |
//! | | [`PollSystems::SendOutcomes`](clock::PollSystems) | outcome events and messages sent |
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
//! | agents | [`persona`] → [`cognition`] → [`dialogue`] (talking to a persona, tools, the control API) → [`group`] (group conversations with attention, SPEC §8) |
//! | apps | [`headless`], [`eval`] → [`output`] (the run folder), [`persist`] (saves) → [`director`] (steering the town, SPEC §10) → `render` |
//! | test support | [`testing`] |
//!
//! ## Plugins
//!
//! | plugin | what it adds |
//! | --- | --- |
//! | [`ClockPlugin`](clock::ClockPlugin) | [`SimClock`](clock::SimClock), the step driver, the sets above, [`AgentSettings`](settings::AgentSettings) |
//! | [`WorldPlugin`](world::WorldPlugin) | the town's types (insert a [`TownMap`](world::TownMap) loaded from a Tiled file) |
//! | [`PersonaPlugin`](persona::PersonaPlugin) | persona components |
//! | [`LlmPlugin`](llm::LlmPlugin) | the [`LlmClient`](llm::LlmClient) (from config/env unless the game inserts one) |
//! | [`PromptPlugin`](prompt::PromptPlugin) | the prompt templates |
//! | [`CognitionPlugin`](cognition::CognitionPlugin) | the loop: percepts, thoughts (perceive → retrieve → plan → reflect), conversations, execution, outcome events |
//! | [`DialoguePlugin`](dialogue::DialoguePlugin) | talking to a persona (SPEC §7): messages, whispers, interviews, tools, appointments |
//! | [`DirectorPlugin`](director::DirectorPlugin) | the director (SPEC §10): directives → plans of skills → execution, validation, replanning, review; cancel rolls back |
//! | [`GroupPlugin`](group::GroupPlugin) | group conversations with attention (SPEC §8): streams where three or more gather, channels, the heart flow |
//! | [`StagePlugin`](stage::StagePlugin) | stage scenes with actors (SPEC §9): turns played by every actor at once, resolved by a stage agent |
//!
//! [`GenerativeAgentsPlugins::new`] puts the driver in another schedule (`PostUpdate`, or the
//! game's own).
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
pub mod dialogue;
pub mod director;
pub mod eval;
pub mod files;
pub mod group;
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
pub mod stage;
pub mod testing;
pub mod world;

use bevy::app::{PluginGroup, PluginGroupBuilder};
use bevy::ecs::schedule::{InternedScheduleLabel, ScheduleLabel};

/// The README's code samples compile and run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

/// Everything a headless simulation needs. Rendering is added separately.
///
/// `GenerativeAgentsPlugins` (the constant of the same name) drives the simulation from
/// [`Update`](bevy::app::Update); [`GenerativeAgentsPlugins::new`] picks another schedule for
/// the step driver. Either way `.build()` gives a builder to swap or disable plugins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GenerativeAgentsPlugins {
    /// Where the driver runs; `None` for [`Update`](bevy::app::Update).
    schedule: Option<InternedScheduleLabel>,
}

/// The plugin group driven from [`Update`](bevy::app::Update): `app.add_plugins(GenerativeAgentsPlugins)`.
#[expect(
    non_upper_case_globals,
    reason = "used like a unit struct, as plugin groups usually are"
)]
pub const GenerativeAgentsPlugins: GenerativeAgentsPlugins =
    GenerativeAgentsPlugins { schedule: None };

impl Default for GenerativeAgentsPlugins {
    fn default() -> Self {
        GenerativeAgentsPlugins
    }
}

impl GenerativeAgentsPlugins {
    /// The plugins, with the step driver ([`GenerativeAgentsSystems::Drive`](clock::GenerativeAgentsSystems))
    /// in `schedule` instead of [`Update`](bevy::app::Update) — e.g. `PostUpdate` so the steps
    /// see this frame's game input, or a schedule of the game's own.
    pub fn new(schedule: impl ScheduleLabel) -> Self {
        Self {
            schedule: Some(schedule.intern()),
        }
    }
}

impl PluginGroup for GenerativeAgentsPlugins {
    fn build(self) -> PluginGroupBuilder {
        let clock = match self.schedule {
            Some(schedule) => clock::ClockPlugin::in_schedule(schedule),
            None => clock::ClockPlugin::default(),
        };
        PluginGroupBuilder::start::<Self>()
            .add(clock)
            .add(world::WorldPlugin)
            .add(persona::PersonaPlugin)
            .add(llm::LlmPlugin::default())
            .add(prompt::PromptPlugin)
            .add(cognition::CognitionPlugin)
            .add(dialogue::DialoguePlugin)
            .add(director::DirectorPlugin)
            .add(group::GroupPlugin)
            .add(stage::StagePlugin)
    }
}

/// The common imports.
pub mod prelude {
    pub use crate::GenerativeAgentsPlugins;
    pub use crate::clock::{
        AgentSystems, ClockPlugin, GenerativeAgentsSystems, PollSystems, SimClock, SimSpeed,
        StepCompleted, TimeMode,
    };
    pub use crate::cognition::{
        ActionStarted, ConversationEnded, ConversationStarted, ModelCallFailed, NewDay,
        PlanUpdated, ReflectionCompleted,
    };
    pub use crate::dialogue::{
        DialoguePlugin, DialogueRemembered, DialogueReplied, DialogueRequest, DialogueSettings,
        DialogueStream, ToolCalled, ToolRefused,
    };
    pub use crate::director::{
        ConfirmationPolicy, Director, DirectorCommand, DirectorPlugin, DirectorReviewed,
        DirectorStateChanged, ExecutorState,
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
