//! Group conversations with attention (SPEC §8, seed 003's heart flow).
//!
//! Smallville's personas talk two at a time (§3.7, unchanged). When three or more gather, or a
//! game opens a channel, the talk is a **chat stream**, and each persona decides how closely to
//! follow it — the attention model here, which also bounds what the town spends on models:
//! only focused sub-flows run the expensive observe → think → plan → execute cycle.
//!
//! This module is the model itself, pure and seeded: [`attention`] holds one persona's
//! sub-flow for one stream (state, interest, willingness, the chance to focus, SPEC §8's
//! formulas) and [`social`] the persona's global social state, its limits, and the
//! [`Attention`] that keeps every sub-flow within them.

pub mod attention;
pub mod social;

pub use attention::{AttentionSettings, Change, ChatState, SubFlow, reply_probability};
pub use social::{Attention, Limits, SocialState};
