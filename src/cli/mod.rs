//! The `smallville` binary's own modules: flags, the progress bar, the eval printouts. The
//! library knows none of them (it builds without `clap`, `indicatif` and `plotters`).

pub mod args;
#[cfg(feature = "render")]
pub mod display;
pub mod eval;
pub mod interview;
pub mod progress;
pub mod stage;
