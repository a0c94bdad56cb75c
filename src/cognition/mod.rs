//! (being built)

pub mod prompts;
