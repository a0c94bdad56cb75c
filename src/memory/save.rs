//! The save format of a memory stream (SPEC §11): `nodes.json`, `embeddings.json` and
//! `kw_strength.json`.
//!
//! * `nodes.json` — the nodes in id order, each a [`ConceptNode`] object (times as ISO 8601,
//!   `kind` as `"event"`/`"chat"`/`"thought"`, `filling` as `{"evidence": [ids]}` or
//!   `{"chat": [[speaker, line], …]}`), including `last_accessed` (SPEC §4).
//! * `embeddings.json` — `{"model": …, "dim": …, "vectors": {text: [f32, …]}}`, sorted by text;
//!   vectors are stored normalised.
//! * `kw_strength.json` — `{"kw_strength_event": {kw: n}, "kw_strength_thought": {kw: n}}`.
//!
//! Loading checks everything — ids run 0, 1, 2, …; evidence points at older nodes; poignancy is
//! 1–10; fillings fit their kind; every embedding key has a vector of the declared dimension —
//! and fails with an error naming the file rather than loading part of it. Indexes, columns and
//! derived fields (`node_count`, `type_count`, `depth`) are rebuilt, not trusted.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::embedding::{EmbeddingStore, EmbeddingsFile};
use super::{AssociativeMemory, ConceptNode, MemoryError};

/// File name of the nodes document.
pub const NODES_FILE: &str = "nodes.json";
/// File name of the embeddings document.
pub const EMBEDDINGS_FILE: &str = "embeddings.json";
/// File name of the keyword-strength document.
pub(crate) const KW_STRENGTH_FILE: &str = "kw_strength.json";

/// The three documents of a saved associative memory, as JSON values (`T = Value`) or text
/// (`T = String`).
#[derive(Debug, Clone, PartialEq)]
pub struct AssociativeMemoryJson<T = Value> {
    /// `nodes.json`.
    pub nodes: T,
    /// `embeddings.json`.
    pub embeddings: T,
    /// `kw_strength.json`.
    pub kw_strength: T,
}

#[derive(Serialize)]
struct KwStrengthRef<'a> {
    kw_strength_event: BTreeMap<&'a str, u32>,
    kw_strength_thought: BTreeMap<&'a str, u32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KwStrengthFile {
    #[serde(default)]
    kw_strength_event: BTreeMap<String, u32>,
    #[serde(default)]
    kw_strength_thought: BTreeMap<String, u32>,
}

fn json_err(file: &'static str) -> impl FnOnce(serde_json::Error) -> MemoryError {
    move |source| MemoryError::Json { file, source }
}

fn in_file(file: &'static str) -> impl FnOnce(MemoryError) -> MemoryError {
    move |source| MemoryError::InFile {
        file,
        source: Box::new(source),
    }
}

impl AssociativeMemory {
    /// The three save documents as JSON values.
    pub fn to_json(&self) -> Result<AssociativeMemoryJson, MemoryError> {
        let (event, thought) = self.strengths();
        Ok(AssociativeMemoryJson {
            nodes: serde_json::to_value(self.nodes()).map_err(json_err(NODES_FILE))?,
            embeddings: serde_json::to_value(self.embeddings().to_file())
                .map_err(json_err(EMBEDDINGS_FILE))?,
            kw_strength: serde_json::to_value(KwStrengthRef {
                kw_strength_event: event,
                kw_strength_thought: thought,
            })
            .map_err(json_err(KW_STRENGTH_FILE))?,
        })
    }

    /// The three save documents as pretty-printed JSON text (no intermediate `Value`, which
    /// matters for large memories).
    pub fn to_json_strings(&self) -> Result<AssociativeMemoryJson<String>, MemoryError> {
        let (event, thought) = self.strengths();
        Ok(AssociativeMemoryJson {
            nodes: serde_json::to_string_pretty(self.nodes()).map_err(json_err(NODES_FILE))?,
            embeddings: serde_json::to_string(&self.embeddings().to_file())
                .map_err(json_err(EMBEDDINGS_FILE))?,
            kw_strength: serde_json::to_string_pretty(&KwStrengthRef {
                kw_strength_event: event,
                kw_strength_thought: thought,
            })
            .map_err(json_err(KW_STRENGTH_FILE))?,
        })
    }

    /// Loads a memory from its three save documents, checking them (see the module docs).
    pub fn from_json(json: AssociativeMemoryJson) -> Result<Self, MemoryError> {
        let embeddings: EmbeddingsFile =
            serde_json::from_value(json.embeddings).map_err(json_err(EMBEDDINGS_FILE))?;
        let nodes: Vec<ConceptNode> =
            serde_json::from_value(json.nodes).map_err(json_err(NODES_FILE))?;
        let strengths: KwStrengthFile =
            serde_json::from_value(json.kw_strength).map_err(json_err(KW_STRENGTH_FILE))?;
        Self::assemble(embeddings, nodes, strengths)
    }

    /// [`from_json`](Self::from_json) from the documents' text.
    pub fn from_json_strs(
        nodes: &str,
        embeddings: &str,
        kw_strength: &str,
    ) -> Result<Self, MemoryError> {
        let embeddings: EmbeddingsFile =
            serde_json::from_str(embeddings).map_err(json_err(EMBEDDINGS_FILE))?;
        let nodes: Vec<ConceptNode> = serde_json::from_str(nodes).map_err(json_err(NODES_FILE))?;
        let strengths: KwStrengthFile =
            serde_json::from_str(kw_strength).map_err(json_err(KW_STRENGTH_FILE))?;
        Self::assemble(embeddings, nodes, strengths)
    }

    fn assemble(
        embeddings: EmbeddingsFile,
        nodes: Vec<ConceptNode>,
        strengths: KwStrengthFile,
    ) -> Result<Self, MemoryError> {
        let store = EmbeddingStore::from_file(embeddings).map_err(in_file(EMBEDDINGS_FILE))?;
        Self::from_parts(
            nodes,
            store,
            strengths.kw_strength_event,
            strengths.kw_strength_thought,
        )
        .map_err(in_file(NODES_FILE))
    }
}
