//! A persona's memory: the associative memory (memory stream), spatial memory, the embedding
//! store and retrieval scoring (SPEC §2, §3.1, §3.2, §3.8, §4, §11).
//!
//! # The story
//!
//! Everything a persona perceives, says and concludes becomes a [`ConceptNode`] in its
//! [`AssociativeMemory`]: an **event** (something seen or done), a **chat** (a conversation,
//! filled with its lines) or a **thought** (a plan, a reflection — filled with the ids of the
//! older nodes it rests on, one level deeper than the deepest of them). Each node carries a
//! `(subject, predicate, object)` triple, a description, lowercase keywords, a poignancy from 1 to
//! 10, an optional expiration, and the key of its embedding.
//!
//! The memory keeps newest-first sequences per kind (perception dedupes against the latest
//! `retention` events with [`AssociativeMemory::latest_event_triples`]), keyword indexes per kind
//! (reactions look memories up by keyword with
//! [`AssociativeMemory::retrieve_relevant_events`] and
//! [`AssociativeMemory::retrieve_relevant_thoughts`]), and keyword strengths, which idle events
//! do not raise.
//!
//! Embeddings live in an [`EmbeddingStore`]: one normalised vector per distinct text, rows
//! stored back to back in fixed chunks that never move, with an int8 copy for fast scans (see
//! its docs for the layout and the measurements).
//!
//! [`new_retrieve`] scores every live event and thought by recency (0.995 per game hour since it
//! was last accessed), relevance (cosine to a focal point) and importance (poignancy), each
//! min–max normalised, and returns the best `n`, marking them accessed. [`score_breakdown`]
//! shows the same scores component by component.
//!
//! [`SpatialMemory`] is the tree `world → sector → arena → objects` of places the persona has
//! seen; planning grounds actions in it.
//!
//! Both memories save to the JSON documents of SPEC §11 ([`AssociativeMemory::to_json`],
//! [`SpatialMemory::to_json`]) and load back with validation and clear errors.
//!
//! ```
//! use bevy_generative_agents::memory::*;
//! # let t = |h| chrono::NaiveDate::from_ymd_opt(2023, 2, 13).unwrap().and_hms_opt(h, 0, 0).unwrap();
//! let mut memory = AssociativeMemory::new("test-embedder", 2);
//! let coffee = memory.add_event(
//!     NewMemory::new(t(7), ("Ana Reyes", "is", "brewing coffee"), "Ana Reyes is brewing coffee")
//!         .keywords(["Ana Reyes", "coffee"])
//!         .poignancy(2)
//!         .embedding(vec![1.0, 0.0]),
//!     vec![],
//! )?;
//! let exam = memory.add_event(
//!     NewMemory::new(t(8), ("Ana Reyes", "is", "worried about the exam"), "Ana is worried about the exam")
//!         .poignancy(7)
//!         .embedding(vec![0.0, 1.0]),
//!     vec![],
//! )?;
//! let best = new_retrieve(&mut memory, &[0.1, 1.0], t(9), 1, &RetrievalParams::default())?;
//! assert_eq!(best, vec![exam]);
//! assert_eq!(memory.node(exam).unwrap().last_accessed, t(9));
//! # let _ = coffee;
//! # Ok::<(), MemoryError>(())
//! ```
//!
//! **Layer** (see `tests/layers.rs`): the ground: imports no other module of the crate.

mod associative;
mod embedding;
mod node;
mod retrieve;
mod save;
mod spatial;

pub use associative::AssociativeMemory;
pub use embedding::{EmbeddingStore, RelevancePrecision};
pub use node::{
    ChatLine, ConceptNode, Filling, MAX_POIGNANCY, MIN_POIGNANCY, NewMemory, NodeId, NodeKind,
};
pub use retrieve::{
    DEFAULT_RECENCY_DECAY, RetrievalParams, RetrievalWeights, ScoredNode, new_retrieve,
    new_retrieve_many, retrieve_unmarked, score_breakdown,
};
pub(crate) use save::KW_STRENGTH_FILE;
pub use save::{AssociativeMemoryJson, EMBEDDINGS_FILE, NODES_FILE};
pub use spatial::SpatialMemory;

/// Shortens text quoted in an error message.
fn short(text: &str) -> String {
    const MAX: usize = 80;
    match text.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{:?}…", &text[..cut]),
        None => format!("{text:?}"),
    }
}

/// What can go wrong adding to, retrieving from, saving or loading a memory.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MemoryError {
    /// A vector's length differs from the store's dimension.
    #[error(
        "the embedding of {} has {found} dimensions, but this store holds {expected}",
        short(key)
    )]
    DimensionMismatch {
        /// The text (or `<focal point>`).
        key: String,
        /// The store's dimension.
        expected: usize,
        /// The vector's length.
        found: usize,
    },
    /// An empty vector.
    #[error("the embedding of {} is empty", short(key))]
    EmptyEmbedding {
        /// The text (or `<focal point>`).
        key: String,
    },
    /// A vector with NaN or infinite components.
    #[error("the embedding of {} contains NaN or infinite values", short(key))]
    NonFiniteEmbedding {
        /// The text (or `<focal point>`).
        key: String,
    },
    /// No vector stored for a text and none supplied.
    #[error("no embedding is stored for {} and none was given", short(key))]
    MissingEmbedding {
        /// The text.
        key: String,
    },
    /// Evidence that is not an older node.
    #[error("{node} cites {evidence} as evidence, which is not an older node")]
    DanglingEvidence {
        /// The citing node.
        node: NodeId,
        /// The missing or newer id.
        evidence: NodeId,
    },
    /// A chat without chat lines, or an event/thought with chat lines.
    #[error("{node} is a {kind} but its filling is for another kind")]
    FillingMismatch {
        /// The node.
        node: NodeId,
        /// Its kind.
        kind: NodeKind,
    },
    /// Poignancy outside 1–10 in a save.
    #[error("{node} has poignancy {value}, outside 1–10")]
    PoignancyOutOfRange {
        /// The node.
        node: NodeId,
        /// The value found.
        value: u8,
    },
    /// Node ids in a save are not 0, 1, 2, … in order.
    #[error("node ids must run 0, 1, 2, … in order; found {found} where {expected} was due")]
    NodeIdSequence {
        /// The id due at that position.
        expected: u32,
        /// The id found.
        found: u32,
    },
    /// More nodes or vectors than ids can number.
    #[error("the memory is full ({0} entries)")]
    Full(usize),
    /// A document is not valid JSON of the expected shape (includes unknown node kinds).
    #[error("{file}: {source}")]
    Json {
        /// The document.
        file: &'static str,
        /// The parser's error.
        #[source]
        source: serde_json::Error,
    },
    /// A document parsed but its content is invalid.
    #[error("{file}: {reason}")]
    Invalid {
        /// The document.
        file: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// A check failed while loading a document.
    #[error("{file}: {source}")]
    InFile {
        /// The document.
        file: &'static str,
        /// The failed check.
        #[source]
        source: Box<MemoryError>,
    },
}
