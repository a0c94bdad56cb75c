//! The nodes of the memory stream: events, chats and thoughts (SPEC §2).

use std::collections::BTreeSet;
use std::fmt;

use bevy::prelude::Reflect;
use chrono::NaiveDateTime;
use serde::{Deserialize, Serialize};

/// The lowest poignancy a memory can have.
pub const MIN_POIGNANCY: u8 = 1;
/// The highest poignancy a memory can have.
pub const MAX_POIGNANCY: u8 = 10;

/// The id of a [`ConceptNode`]: its position in the memory stream, counted from 0 in the order
/// the nodes were added. Serialised as a plain number.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Default,
    Reflect,
    Serialize,
    Deserialize,
)]
#[serde(transparent)]
pub struct NodeId(pub u32);

impl NodeId {
    /// The id as an index into [`AssociativeMemory::nodes`](super::AssociativeMemory::nodes).
    pub const fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "node_{}", self.0)
    }
}

/// What kind of memory a node is.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Reflect, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum NodeKind {
    /// Something the persona perceived (or did).
    Event,
    /// A conversation the persona took part in.
    Chat,
    /// Something the persona concluded: a plan, a reflection, a memo about a chat.
    Thought,
}

impl NodeKind {
    /// The lowercase name used in saves (`event`, `chat`, `thought`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Event => "event",
            Self::Chat => "chat",
            Self::Thought => "thought",
        }
    }
}

impl fmt::Display for NodeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One line of a conversation. Serialised as `[speaker, line]`, as Smallville stores it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(from = "(String, String)", into = "(String, String)")]
pub struct ChatLine {
    /// Who said it.
    pub speaker: String,
    /// What was said.
    pub line: String,
}

impl ChatLine {
    /// A line said by `speaker`.
    pub fn new(speaker: impl Into<String>, line: impl Into<String>) -> Self {
        Self {
            speaker: speaker.into(),
            line: line.into(),
        }
    }
}

impl From<(String, String)> for ChatLine {
    fn from((speaker, line): (String, String)) -> Self {
        Self { speaker, line }
    }
}

impl From<ChatLine> for (String, String) {
    fn from(c: ChatLine) -> Self {
        (c.speaker, c.line)
    }
}

/// What a node is built from.
///
/// Saved externally tagged: `{"evidence": [3, 7]}` or `{"chat": [["Ana", "Hi!"]]}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Filling {
    /// Older nodes this one rests on: a thought's evidence, or the chat node recorded together
    /// with a "chat with" event. Every id is older than the node itself.
    Evidence(Vec<NodeId>),
    /// The lines of a chat node's conversation.
    Chat(Vec<ChatLine>),
}

impl Default for Filling {
    fn default() -> Self {
        Self::Evidence(Vec::new())
    }
}

impl Filling {
    /// The evidence ids (empty for a chat).
    pub fn evidence(&self) -> &[NodeId] {
        match self {
            Self::Evidence(ids) => ids,
            Self::Chat(_) => &[],
        }
    }

    /// The chat lines (empty for evidence).
    pub fn chat_lines(&self) -> &[ChatLine] {
        match self {
            Self::Chat(lines) => lines,
            Self::Evidence(_) => &[],
        }
    }
}

/// One memory of the memory stream (SPEC §2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConceptNode {
    /// Position in the stream (0-based).
    pub id: NodeId,
    /// How many nodes the stream held once this one was added (1-based; derived, recomputed
    /// on load).
    pub node_count: u32,
    /// How many nodes of this kind the stream held once this one was added (1-based; derived,
    /// recomputed on load).
    pub type_count: u32,
    /// Event, chat or thought.
    pub kind: NodeKind,
    /// 0 for events and chats; for a thought 1 + the deepest of its evidence (derived,
    /// recomputed on load).
    pub depth: u32,
    /// When it was formed.
    pub created: NaiveDateTime,
    /// When it stops being retrievable (thoughts last 30 days); `None` = never.
    pub expiration: Option<NaiveDateTime>,
    /// When retrieval last returned it. Drives recency; saved (SPEC §4).
    pub last_accessed: NaiveDateTime,
    /// Who or what (a persona name or an object address).
    pub subject: String,
    /// The verb.
    pub predicate: String,
    /// What is acted on.
    pub object: String,
    /// The sentence the persona remembers.
    pub description: String,
    /// The text whose embedding this node uses (usually the description).
    pub embedding_key: String,
    /// How poignant it is, 1 (mundane) to 10 (life-changing).
    pub poignancy: u8,
    /// Lowercase keywords for the keyword indexes.
    pub keywords: BTreeSet<String>,
    /// Evidence ids or chat lines.
    pub filling: Filling,
}

impl ConceptNode {
    /// What the persona recalls of this memory when a prompt lists a few of them: the whole
    /// text of an event whose description was cut from its embedded text (an event over a
    /// group passage: "Talk in the group in the cafe: Ada said …"), else the description. A
    /// prompt that lists many memories reads the short description.
    pub fn recalled(&self) -> &str {
        match self.description.strip_suffix('…') {
            Some(start)
                if self.kind == NodeKind::Event
                    && self.embedding_key.len() > start.len()
                    && self.embedding_key.starts_with(start) =>
            {
                &self.embedding_key
            }
            _ => &self.description,
        }
    }

    /// The `(subject, predicate, object)` triple.
    pub fn spo(&self) -> (&str, &str, &str) {
        (&self.subject, &self.predicate, &self.object)
    }

    /// Whether this is an idle event: predicate `is` and object `idle` (what perception makes of
    /// an event without a predicate, SPEC §3.1). Idle nodes are never retrieved and do not
    /// strengthen keywords.
    pub fn is_idle(&self) -> bool {
        is_idle_triple(&self.predicate, &self.object)
    }

    /// Whether the node has expired at `now` (its expiration is at or before `now`).
    pub fn is_expired(&self, now: NaiveDateTime) -> bool {
        self.expiration.is_some_and(|e| e <= now)
    }
}

/// `predicate object == "is idle"`, ignoring case and surrounding blanks.
pub(crate) fn is_idle_triple(predicate: &str, object: &str) -> bool {
    predicate.trim().eq_ignore_ascii_case("is") && object.trim().eq_ignore_ascii_case("idle")
}

/// Keywords as the indexes store them: trimmed, lowercased, empty ones dropped. A keyword
/// already trimmed and lowercase ASCII (most are: a memory's keywords are names and objects
/// made lowercase by whoever gathered them) is kept rather than copied.
pub(crate) fn normalise_owned_keywords(
    keywords: impl IntoIterator<Item = String>,
) -> BTreeSet<String> {
    keywords
        .into_iter()
        .map(|k| {
            let normal = k.is_ascii()
                && !k.bytes().any(|b| b.is_ascii_uppercase())
                && k.trim().len() == k.len();
            if normal { k } else { k.trim().to_lowercase() }
        })
        .filter(|k| !k.is_empty())
        .collect()
}

/// What a caller supplies to add a memory: Smallville's `add_event` / `add_chat` /
/// `add_thought` parameters apart from the filling, which depends on the kind.
///
/// ```
/// # use bevy_generative_agents::memory::NewMemory;
/// # let now = chrono::NaiveDate::from_ymd_opt(2023, 2, 13).unwrap().and_hms_opt(7, 0, 0).unwrap();
/// let memory = NewMemory::new(now, ("Ana Reyes", "is", "brewing coffee"), "Ana Reyes is brewing coffee")
///     .keywords(["Ana Reyes", "coffee"])
///     .poignancy(3)
///     .embedding(vec![0.1, 0.7, 0.2]);
/// assert_eq!(memory.embedding_key, "Ana Reyes is brewing coffee");
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct NewMemory {
    /// When it was formed; also its first `last_accessed`.
    pub created: NaiveDateTime,
    /// When it stops being retrievable.
    pub expiration: Option<NaiveDateTime>,
    /// Subject.
    pub subject: String,
    /// Predicate.
    pub predicate: String,
    /// Object.
    pub object: String,
    /// The remembered sentence.
    pub description: String,
    /// Keywords (lowercased when stored).
    pub keywords: Vec<String>,
    /// Poignancy; clamped to 1–10 when stored.
    pub poignancy: u8,
    /// The text the embedding belongs to. Defaults to the description.
    pub embedding_key: String,
    /// The embedding of `embedding_key`. `None` reuses the vector already stored for that text
    /// (adding fails when there is none); when the text already has a vector, that one is kept
    /// and this one is ignored (SPEC §2: the same text reuses its vector).
    pub embedding: Option<Vec<f32>>,
}

impl NewMemory {
    /// A memory of `(s, p, o)` described by `description`, poignancy 1, no keywords, no
    /// expiration, embedding key = description and no vector yet.
    pub fn new(
        created: NaiveDateTime,
        (subject, predicate, object): (impl Into<String>, impl Into<String>, impl Into<String>),
        description: impl Into<String>,
    ) -> Self {
        let description = description.into();
        Self {
            created,
            expiration: None,
            subject: subject.into(),
            predicate: predicate.into(),
            object: object.into(),
            embedding_key: description.clone(),
            description,
            keywords: Vec::new(),
            poignancy: MIN_POIGNANCY,
            embedding: None,
        }
    }

    /// Sets the expiration.
    pub fn expires(mut self, at: NaiveDateTime) -> Self {
        self.expiration = Some(at);
        self
    }

    /// Sets the keywords.
    pub fn keywords<I, S>(mut self, keywords: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.keywords = keywords.into_iter().map(Into::into).collect();
        self
    }

    /// Sets the poignancy (clamped to 1–10 when stored).
    pub fn poignancy(mut self, poignancy: u8) -> Self {
        self.poignancy = poignancy;
        self
    }

    /// Sets the embedding vector of the embedding key.
    pub fn embedding(mut self, vector: Vec<f32>) -> Self {
        self.embedding = Some(vector);
        self
    }

    /// Sets a different embedding key (and optionally its vector).
    pub fn embedding_key(mut self, key: impl Into<String>, vector: Option<Vec<f32>>) -> Self {
        self.embedding_key = key.into();
        self.embedding = vector;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rule itself, copying every keyword: trimmed, lowercased, empty ones dropped.
    fn normalise_keywords<'a>(keywords: impl IntoIterator<Item = &'a str>) -> BTreeSet<String> {
        keywords
            .into_iter()
            .map(|k| k.trim().to_lowercase())
            .filter(|k| !k.is_empty())
            .collect()
    }

    #[test]
    fn owned_keywords_normalise_as_borrowed_ones_do() {
        let keywords = [
            "ada",
            " Ada ",
            "ADA",
            "",
            "  ",
            "bakery",
            "the bakery",
            "Straße",
            "İstanbul",
            "\u{b}tab",
            "café",
            "x\t",
        ];
        let owned: Vec<String> = keywords.iter().map(|k| (*k).to_string()).collect();
        assert_eq!(
            normalise_owned_keywords(owned),
            normalise_keywords(keywords)
        );
    }

    #[test]
    fn a_cut_passage_is_recalled_whole_and_other_memories_as_described() {
        let whole =
            "Talk in the group in the cafe: Ada said \"Hi\"; Bo said \"The fair is on Tuesday\"";
        let mut node = ConceptNode {
            kind: NodeKind::Event,
            description: "Talk in the group in the cafe: Ada said \"Hi\"; Bo…".to_string(),
            embedding_key: whole.to_string(),
            id: NodeId(0),
            node_count: 1,
            type_count: 1,
            depth: 0,
            created: chrono::NaiveDateTime::default(),
            expiration: None,
            last_accessed: chrono::NaiveDateTime::default(),
            subject: "Cy".to_string(),
            predicate: "chat with".to_string(),
            object: "the group in the cafe".to_string(),
            poignancy: 2,
            keywords: BTreeSet::new(),
            filling: Filling::default(),
        };
        assert_eq!(node.recalled(), whole);
        // A thought, an uncut event, or one whose text is not its description's continuation
        // is recalled as described.
        node.kind = NodeKind::Thought;
        assert_eq!(node.recalled(), node.description);
        node.kind = NodeKind::Event;
        node.embedding_key = "something else entirely…".to_string();
        assert_eq!(node.recalled(), node.description);
        node.description = "Ada is baking".to_string();
        node.embedding_key = "Ada is baking bread".to_string();
        assert_eq!(node.recalled(), "Ada is baking");
    }
}
