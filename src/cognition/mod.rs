//! The Smallville cognitive loop (SPEC §3): perceive → retrieve → plan → reflect → execute.
//!
//! Every step each persona first **perceives** ([`perceive`]): the map around it is read into
//! its [`Percepts`], and places it sees join its spatial memory. Then, when something calls for
//! it, the persona **thinks** ([`think`]) on its checked-out mind, off the main thread and
//! concurrently with everyone else: new events become memories with a poignancy and an
//! embedding; on a new day it revises who it is ([`identity`]) and plans the day ([`plan`]);
//! when its action ends it decomposes the hour into 5-minute tasks ([`schedule`]) and grounds
//! the next one in a place; it may **react** to another persona by talking or waiting
//! ([`converse`]), and when enough has happened it **reflects** ([`reflect`]). Finally every
//! body **executes** ([`execute`]): one tile along its path, its event on the map.
//!
//! The model prompts themselves are typed values in [`prompts`]; every one has a fail-safe, so
//! a thought never fails. See [`think`] for how thoughts are checked out, run and checked in.
//!
//! **Layer** (see `tests/layers.rs`): imports everything below it (ground, [`llm`](crate::llm),
//! [`prompt`](crate::prompt), [`persona`](crate::persona)); nothing that builds apps, writes runs
//! or draws.

pub mod chat_stream;
pub mod converse;
pub mod execute;
pub mod identity;
pub mod outcome;
pub mod perceive;
pub mod plan;
pub mod prompts;
pub mod reflect;
pub mod schedule;
pub mod think;
pub mod vocabulary;

pub use crate::persona::Percepts;
pub use chat_stream::{ChatStream, ChatStreamPlugin, ChatStreamSettings};
pub use execute::ExecutePlugin;
pub use outcome::{
    ActionStarted, ConversationEnded, ConversationStarted, ModelCallFailed, NewDay, OutcomePlugin,
    PlanUpdated, ReflectionCompleted,
};
pub use think::{ChatIntents, ThinkPlugin};
pub use vocabulary::PlanEvent;

use bevy::prelude::*;

use crate::clock::{AgentSystems, PollSystems, SimPoll, SimStep};
use crate::persona::link_chat_partners;

/// The whole loop: thinking ([`ThinkPlugin`]), execution ([`ExecutePlugin`]), what the game
/// hears of it ([`OutcomePlugin`]) and, when watched, conversations streamed as they are spoken
/// ([`ChatStreamPlugin`]). Chat partners are linked as entities
/// ([`ChattingWith`](crate::persona::ChattingWith)) once thoughts land and at the end of each
/// step.
#[derive(Default)]
pub struct CognitionPlugin;

impl Plugin for CognitionPlugin {
    fn build(&self, app: &mut App) {
        app.add_plugins((ThinkPlugin, ExecutePlugin, OutcomePlugin, ChatStreamPlugin))
            .add_systems(SimPoll, link_chat_partners.after(PollSystems::LandThoughts))
            .add_systems(SimStep, link_chat_partners.in_set(AgentSystems::Last));
    }
}
