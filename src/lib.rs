#![doc = "bevy_generative_agents (being built)"]
pub mod clock;
pub mod cognition;
pub mod llm;
pub mod memory;
pub mod persona;
pub mod settings;
pub mod world;
