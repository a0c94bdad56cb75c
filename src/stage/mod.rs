//! Stage scenes with actors (SPEC §9, seed 004): an RPG moment — a standoff, a fight, a
//! performance — played turn by turn by personas and characters the game brings on.
//!
//! ## The pieces
//! - [`actor`]: an [`Actor`] — name, appearance, attributes (`health`, `max_health`,
//!   `attack`, extensible), effects, position, posture, special state, hidden or not — its
//!   private block and its state line, and the checks game-made actors pass;
//! - [`scene`]: a [`Scene`] — the stage's name and environment and its actors — the stage block
//!   each actor is shown (**hidden actors are left out of every other actor's block**, where the
//!   original only asked the model to ignore them), the stage agent's Markdown input, how a
//!   [`Resolution`] is applied (validated: unknown actors ignored, health clamped to
//!   `0..=max_health`, no invented attributes, the fallen leave), and the read-only resources
//!   `game://actor/{name}` and `game://stage/{name}` ([`read_resource`]);
//! - [`file`](mod@file): a scene written as a file (`assets/stages/standoff.json`), persona actors named
//!   by the persona who plays them;
//! - [`tools`]: `read_game_resource` (the resources as a read-only tool) and `open_stage` (a
//!   director skill: a scene written in its arguments, opened and played);
//! - [`prompts`]: the actor's turn (`stage_actor`: JSON observation and plan, first person) and
//!   the stage agent's resolution (`stage_resolve`: JSON summary and updates), each with its
//!   parser and fail-safe.
//!
//! ## A turn, in the ECS
//! Game code writes [`StageCommand`]s: open a scene ([`StageCommand::Open`]), play the next
//! turn, play several, close it. A turn runs off the main thread: **every actor's call starts at
//! once** (one task each, so a turn costs about one call's latency, not one per actor); when all
//! have planned, the stage agent resolves the plans in one call; the scene is updated between
//! steps, in [`SimPoll`]. A turn starts in a step ([`SimStep`]), at most one every
//! [`StageSettings::turn_seconds`] of game time, and a Lockstep clock waits for it to be
//! resolved, so a scene there is the same on every run. The persona actors are
//! [`Held`](crate::clock::Held) while the scene plays — they stay on the stage, starting no
//! thought and taking no step, and a talk request to one waits until it is let go — and when it
//! closes ([`StageCommand::Close`], or [`StageCommand::Finish`] after the queued turns) each
//! keeps a memory of it (an event bystanders' retrieval can find, and the planning thought and
//! memo of an after-chat over the scene's latest turns, SPEC §16), its day makes room for the
//! time it took (SPEC §3.5's re-decomposition) and its routine resumes; only then is it let go. A save
//! keeps the scenes playing between two turns and the aftermaths waiting ([`save`],
//! `stages.json`): loaded, a scene plays on exactly as it would have. Loading a save ends every
//! scene the world was playing first (told with [`StageClosed`]; no aftermath, the personas
//! who lived it are gone). Outcome messages:
//!
//! | message | when |
//! | --- | --- |
//! | [`StageOpened`] / [`StageClosed`] | a scene opens / closes |
//! | [`ActorPlanned`] | an actor observed and planned (its fail-safe counts: "I wait and watch."); also an [`EntityEvent`] on the persona it is |
//! | [`StageTurnResolved`] | the stage agent resolved a turn: the narration, what changed, who left, which personas played it |
//! | [`StageRefused`] | a command was refused, and why |
//!
//! **Layer** (see `tests/layers.rs`): beside [`group`](crate::group), above
//! [`dialogue`](crate::dialogue).

pub mod actor;
pub mod file;
mod play;
pub mod prompts;
pub mod save;
pub mod scene;
pub mod tools;

pub use actor::Actor;
pub use file::{SceneFile, load_scene};
pub use prompts::ActorPlan;
pub use scene::{ActorUpdate, Applied, Resolution, ResourceError, Scene, read_resource};

use std::collections::BTreeMap;

use bevy::prelude::*;

use crate::clock::{AgentSystems, AwaitingCognition, PollSystems, SimPoll, SimStep};

pub use play::MAX_STAGES;
pub(crate) use play::end_scenes_for_load;

/// The stages' tunables.
#[derive(Resource, Debug, Clone, PartialEq)]
pub struct StageSettings {
    /// Most turns one scene plays (50).
    pub max_turns: u32,
    /// Game seconds a turn takes (60): the next turn starts no sooner, so a scene's length in
    /// game time is its turns, whatever the model's speed.
    pub turn_seconds: f32,
}

impl Default for StageSettings {
    fn default() -> Self {
        Self {
            max_turns: 50,
            turn_seconds: 60.0,
        }
    }
}

/// What game code asks of the stages. Every field is untrusted and validated.
#[derive(Message, Debug, Clone, PartialEq)]
pub enum StageCommand {
    /// Opens a scene (its stage's name must not be playing already).
    Open {
        /// The scene, checked again here ([`Scene::new`] rules).
        scene: Scene,
    },
    /// Plays `turns` more turns, one after another (1 for "next turn").
    Play {
        /// The stage.
        stage: String,
        /// How many.
        turns: u32,
    },
    /// Closes a scene now (a turn in flight is dropped).
    Close {
        /// The stage.
        stage: String,
    },
    /// Closes a scene once its queued turns are played (or nobody is left standing).
    Finish {
        /// The stage.
        stage: String,
    },
}

impl StageCommand {
    /// Plays the next turn of `stage`.
    pub fn next_turn(stage: impl Into<String>) -> Self {
        Self::Play {
            stage: stage.into(),
            turns: 1,
        }
    }
}

/// A scene opened.
#[derive(Message, Debug, Clone, PartialEq, Eq)]
pub struct StageOpened {
    /// The stage.
    pub stage: String,
    /// Its actors, in order.
    pub actors: Vec<String>,
}

/// An actor observed and planned: a [`Message`] always, and an [`EntityEvent`] on the persona
/// it is when it is one (SPEC §16's one event convention).
#[derive(Message, Debug, Clone, PartialEq, Eq)]
pub struct ActorPlanned {
    /// The stage.
    pub stage: String,
    /// The turn being played, from 1.
    pub turn: u32,
    /// The actor.
    pub actor: String,
    /// The persona it is, if any.
    pub persona: Option<Entity>,
    /// What it noticed and what it plans.
    pub plan: ActorPlan,
    /// Whether the plan is the fail-safe.
    pub fail_safe: bool,
}

impl Event for ActorPlanned {
    type Trigger<'a> = bevy::ecs::event::EntityTrigger;
}

impl EntityEvent for ActorPlanned {
    /// The persona the actor is (triggered only when it is one).
    fn event_target(&self) -> Entity {
        self.persona.unwrap_or(Entity::PLACEHOLDER)
    }
}

/// The stage agent resolved a turn.
#[derive(Message, Debug, Clone, PartialEq, Eq)]
pub struct StageTurnResolved {
    /// The stage.
    pub stage: String,
    /// The game time it was resolved.
    pub time: chrono::NaiveDateTime,
    /// The turn, from 1.
    pub turn: u32,
    /// The narration.
    pub summary: String,
    /// What changed and who left.
    pub applied: Applied,
    /// Whether the resolution is the fail-safe (a neutral narration, nothing changed).
    pub fail_safe: bool,
    /// The persona actors who played the turn, in the scene's order (those who fell in it
    /// included).
    pub personas: Vec<Entity>,
}

/// A scene closed.
#[derive(Message, Debug, Clone, PartialEq, Eq)]
pub struct StageClosed {
    /// The stage.
    pub stage: String,
    /// Turns played.
    pub turns: u32,
    /// The scene as it ended: who is still standing, who fell, the narration.
    pub scene: Scene,
}

/// A [`StageCommand`] was refused.
#[derive(Message, Debug, Clone, PartialEq, Eq)]
pub struct StageRefused {
    /// Why.
    pub why: String,
}

/// The scenes playing, by stage name.
#[derive(Resource, Default)]
pub struct Stages {
    runs: BTreeMap<String, play::StageRun>,
}

impl Stages {
    /// The scene on stage `name`.
    pub fn get(&self, name: &str) -> Option<&Scene> {
        self.runs.get(name).map(|r| &r.scene)
    }

    /// Every scene playing, by stage name.
    pub fn iter(&self) -> impl Iterator<Item = &Scene> {
        self.runs.values().map(|r| &r.scene)
    }

    /// Turns of `name` queued and not yet started.
    pub fn queued(&self, name: &str) -> u32 {
        self.runs.get(name).map_or(0, |r| r.queued)
    }

    /// Whether a turn of `name` is being played (its calls are out).
    pub fn turn_running(&self, name: &str) -> bool {
        self.runs.get(name).is_some_and(|r| r.busy())
    }

    /// Reads `game://actor/{name}` or `game://stage/{name}` ([`read_resource`]).
    pub fn read_resource(&self, uri: &str) -> Result<serde_json::Value, ResourceError> {
        read_resource(self.iter(), uri)
    }
}

/// Stage scenes: commands applied and turns played between steps.
#[derive(Debug, Default)]
pub struct StagePlugin;

impl Plugin for StagePlugin {
    fn build(&self, app: &mut App) {
        tools::register_stage_tools(app);
        app.init_resource::<StageSettings>()
            .init_resource::<Stages>()
            .init_resource::<play::Aftermaths>()
            .add_message::<StageCommand>()
            .add_message::<StageOpened>()
            .add_message::<ActorPlanned>()
            .add_message::<StageTurnResolved>()
            .add_message::<StageClosed>()
            .add_message::<StageRefused>()
            .add_systems(
                SimPoll,
                (play::apply_commands, play::drive_stages)
                    .chain()
                    .after(PollSystems::LandThoughts)
                    .before(PollSystems::SendOutcomes),
            )
            .add_systems(
                SimStep,
                play::start_turns
                    .after(AgentSystems::Perceive)
                    .after(crate::group::GroupSystems::Step)
                    .before(AgentSystems::Think),
            );
    }
}

/// Marks the persona actors of a turn busy (they start no thought while it runs).
fn hold(world: &mut World, personas: &[Entity], step: u64) {
    for persona in personas {
        if let Ok(mut entity) = world.get_entity_mut(*persona) {
            entity.insert(AwaitingCognition::new(step));
        }
    }
}

/// Frees the persona actors after their turn.
fn release(world: &mut World, personas: &[Entity]) {
    for persona in personas {
        if let Ok(mut entity) = world.get_entity_mut(*persona) {
            entity.remove::<AwaitingCognition>();
        }
    }
}
