//! The LLM layer (SPEC §5).

mod backend;
pub use backend::*;
