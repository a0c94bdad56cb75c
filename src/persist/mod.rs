//! Persistence (SPEC §11): save, load and fork a simulation; record and replay every model
//! answer. What a run leaves beside its save — the movement log, its replay and playback, the
//! summary and the report — is [`crate::output`]'s.
//!
//! ## The save folder
//!
//! ```text
//! SAVE/
//!   manifest.json        SHA-256 of every other file, written last (see [`manifest`])
//!   meta.json            format + version, seed, step, start, current_time, sec_per_step,
//!                        time_mode, map, world, persona names (entity order), embedding
//!                        model + dim, forked_from, saved_at_unix (wall clock),
//!                        prompts (template version + override files and their
//!                        sha256; absent in older saves)
//!   settings.json        the AgentSettings the simulation runs with
//!   pending.json         conversation intents decided but not started, by name
//!   groups.json          the open group conversations: streams, members and speakers by
//!                        name, their latest lines; the lean rounds' beats
//!   world/events.json    every tile event on the map
//!   personas/<Name>/
//!     scratch.json       identity, plan, current action, chat state (SPEC §2)
//!     spatial_memory.json
//!     associative_memory/{nodes.json, embeddings.json, kw_strength.json}
//!     body.json          tile, planned path, path flag, previous tile, object event,
//!                        the tile last perceived from
//!     action.json        the visible action (what others, the log and the HUD see)
//!     diary.json         days, conversations, reflections (for reports)
//!     rng.json           the exact position of the persona's random stream
//!     dialogue.json      speaker profiles, appointments and talk sessions (SPEC §7, §16)
//!     group.json         its attention to the group conversations: sub-flows, lines seen,
//!                        heard and not yet remembered, planned (see [`crate::group::save`])
//! ```
//!
//! Loading that folder into a fresh app resumes the exact state: a deterministic backend in
//! Lockstep continues as if the run had never stopped (a test checks 2 h + 1 h = 3 h
//! byte for byte; `tests/group_resume.rs` does it mid group conversation, into a fresh app
//! and back into the world that moved on). The full format is described in `docs/saves.md`.
//!
//! ## When a save is taken
//!
//! A save is taken **between steps when no mind is out**: no persona is
//! [`AwaitingCognition`](crate::clock::AwaitingCognition), no finished thought waits in
//! `LandedThoughts` and no group call is in flight. In Lockstep that holds at every
//! step boundary after [`SimPoll`](crate::clock::SimPoll). In Realtime a [`SaveRequest`] waits:
//! the [`PersistPlugin`] pauses the clock, lets the pending thoughts land, saves, and restores
//! the speed. [`save_world`] itself refuses with [`PersistError::Busy`] instead of waiting.
//!
//! ## Crash safety
//!
//! Saves are written into a hidden sibling folder, every file synced, then swapped in with two
//! renames; a crash at any point leaves the previous save loadable ([`files`]). Loading first
//! decodes and validates every file ([`format::decode`]) — a missing, truncated or corrupt file
//! fails with its path and the field — then checks every file against `manifest.json` (an
//! edited file fails naming it, unless [`SaveIntegrity::TrustEdited`]), and only then touches
//! the world, so a failed load loads nothing.
//!
//! **Layer** (see `tests/layers.rs`): imports everything up to [`cognition`](crate::cognition);
//! never [`output`](crate::output).

pub mod cache;
pub mod files;
pub mod format;
pub mod manifest;
pub mod sections;
mod world;

pub use cache::{CacheMode, client_with_cache_mode};
pub use files::{MAX_SAVE_FILE_BYTES, recover_interrupted_save};
pub use format::{
    EmbeddingInfo, EventsFile, MAX_SAVED_TEXT_CHARS, PendingFile, PersonaSave, SaveData, SaveMeta,
    decode, decode_with,
};
pub use manifest::{MANIFEST_FILE, SaveIntegrity};
pub use sections::{SaveSection, SaveSections};
pub use world::{
    LoadRequest, PersistOutcome, PersistPlugin, SaveRequest, SimSeed, TownSnapshot, apply_save,
    build_app_from_save, build_app_from_save_with, capture_save, check_save, fork_save,
    fork_save_with, load_into_world, load_into_world_with, note_prompt_change, save_world,
};

use std::path::PathBuf;

/// The `format` field of every `meta.json`.
pub const FORMAT_NAME: &str = "bevy_generative_agents/save";
/// The save format version this build writes. Version 2 added each persona's `dialogue.json`
/// (speaker profiles and appointments, SPEC §7.4); version 3 the group conversations
/// (`groups.json` and each persona's `group.json`, SPEC §8); version 4 the stage scenes playing
/// (`stages.json`, SPEC §9, §16). Older saves still load (as having none of what came later),
/// and are written back as version 4.
pub const FORMAT_VERSION: u32 = 4;

/// The oldest save format version this build reads.
pub const OLDEST_FORMAT_VERSION: u32 = 1;

/// Why a save, load, fork or report failed. Every variant about a file names it.
#[derive(Debug, thiserror::Error)]
pub enum PersistError {
    /// A file or folder could not be read, written or renamed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// What went wrong.
        #[source]
        source: std::io::Error,
    },
    /// A file the save must have is missing.
    #[error("{}: missing (not a complete save)", path.display())]
    Missing {
        /// The file.
        path: PathBuf,
    },
    /// A file does not parse or a field is invalid.
    #[error("{}: {}{message}", file.display(), if field.is_empty() { String::new() } else { format!("field `{field}`: ") })]
    Invalid {
        /// The file.
        file: PathBuf,
        /// The field path (empty: the whole document).
        field: String,
        /// What is wrong.
        message: String,
    },
    /// A file differs from the save's `manifest.json` (or the manifest is missing): the save
    /// was edited or damaged. [`SaveIntegrity::TrustEdited`] loads it anyway.
    #[error(
        "{}: {why}; if the save was edited by hand on purpose, load it with \
         --trust-edited-save (SaveIntegrity::TrustEdited)",
        file.display()
    )]
    Edited {
        /// The file.
        file: PathBuf,
        /// What differs.
        why: String,
    },
    /// A memory document is inconsistent.
    #[error("{}: {source}", path.display())]
    Memory {
        /// The file or folder.
        path: PathBuf,
        /// What is wrong.
        #[source]
        source: crate::memory::MemoryError,
    },
    /// The save's memories were embedded with another model than the current backend's.
    #[error(
        "the save was embedded with {saved_model} ({saved_dim} dimensions) but the current \
         backend embeds with {current_model} ({current_dim} dimensions); load it with the same \
         embedding model (memories cannot be compared across models)"
    )]
    EmbeddingMismatch {
        /// The save's model.
        saved_model: String,
        /// The save's dimension.
        saved_dim: usize,
        /// The backend's model.
        current_model: String,
        /// The backend's dimension.
        current_dim: usize,
    },
    /// The save does not fit the map.
    #[error("{0}")]
    MapMismatch(String),
    /// The map could not be loaded.
    #[error(transparent)]
    Map(#[from] crate::world::MapError),
    /// The model configuration is unusable.
    #[error(transparent)]
    Llm(#[from] crate::llm::ConfigError),
    /// A prompt template override is unusable.
    #[error(transparent)]
    Prompts(#[from] crate::prompt::TemplateError),
    /// The response cache could not be opened.
    #[error(transparent)]
    Cache(#[from] crate::llm::CacheError),
    /// A save was asked for while minds are out thinking (see the module docs).
    #[error("cannot save now: {0} (save between steps once thoughts have landed)")]
    Busy(String),
    /// The destination of a fork exists.
    #[error("{}: already exists (a fork never overwrites)", path.display())]
    Exists {
        /// The destination.
        path: PathBuf,
    },
    /// A chart could not be drawn.
    #[error("chart {}: {message}", path.display())]
    Chart {
        /// The image.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
}
