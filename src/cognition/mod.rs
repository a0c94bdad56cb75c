//! (being built)

pub mod execute;
pub mod prompts;
