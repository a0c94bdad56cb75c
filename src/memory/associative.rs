//! The associative memory: the memory stream with its indexes (SPEC §2).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::hash::BuildHasher;

use bevy::platform::hash::FixedHasher;
use chrono::NaiveDateTime;

use super::MemoryError;
use super::embedding::EmbeddingStore;
use super::node::{
    ChatLine, ConceptNode, Filling, MAX_POIGNANCY, MIN_POIGNANCY, NewMemory, NodeId, NodeKind,
    is_idle_triple, normalise_owned_keywords,
};

/// Seconds since the Unix epoch, the unit of the retrieval columns.
pub(crate) fn epoch_seconds(t: NaiveDateTime) -> i64 {
    t.and_utc().timestamp()
}

/// Per-node data retrieval reads, as parallel arrays indexed by node id: a scan over 100,000
/// nodes touches a few flat arrays instead of chasing every node's strings.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Columns {
    /// Embedding row of the node's `embedding_key`.
    pub row: Vec<u32>,
    pub poignancy: Vec<u8>,
    /// `last_accessed` in epoch seconds.
    pub last_accessed: Vec<i64>,
    /// `expiration` in epoch seconds, `i64::MAX` for none.
    pub expiration: Vec<i64>,
    /// Event or thought and not idle: what `new_retrieve` may return.
    pub candidate: Vec<bool>,
}

/// A 64-bit fingerprint of an (s, p, o) triple, the same in every run: the triple through the
/// crate's fixed-seed hasher (as the embedding rows are indexed), which reads each part several
/// bytes at a time and ends each with a byte UTF-8 never holds, so `("ab", "c")` and
/// `("a", "bc")` differ. Equal triples have equal fingerprints; a match is confirmed on the
/// strings.
pub(crate) fn triple_fingerprint(s: &str, p: &str, o: &str) -> u64 {
    FixedHasher.hash_one((s, p, o))
}

/// Nodes a loaded memory has room for beyond its quarter more (see
/// [`AssociativeMemory::from_parts`]).
const LOADED_ROOM: usize = 64;

/// Keyword → how often it appeared (foldhash: fast and the same in every run).
type Strengths = bevy::platform::collections::HashMap<String, u32>;

/// `map` sorted by keyword.
fn sorted_strengths(map: &Strengths) -> BTreeMap<&str, u32> {
    map.iter().map(|(k, &v)| (k.as_str(), v)).collect()
}

/// Per-kind indexes. Sequences and keyword lists are stored oldest first (append-only, so adding
/// is O(1)) and read newest first by iterating in reverse.
#[derive(Debug, Clone, PartialEq, Default)]
struct KindIndex {
    seq: Vec<NodeId>,
    /// The [`triple_fingerprint`] of each node of `seq`, in the same order: the novelty check
    /// reads the latest few side by side, and compares strings only where one matches.
    triples: Vec<u64>,
    /// Keyword → nodes (looked up, never walked in order: a hash map).
    by_keyword: bevy::platform::collections::HashMap<String, Vec<NodeId>>,
}

/// A persona's memory stream: events, chats and thoughts, their keyword indexes and keyword
/// strengths, the embeddings of their texts, and flat columns for fast retrieval (SPEC §2).
///
/// Nodes are never removed; a node's [`NodeId`] is its position in [`nodes`](Self::nodes).
/// "Newest first" means most recently added first.
///
/// Two memories are equal when they hold the same nodes, keyword strengths and embeddings; the
/// indexes and columns are derived from those and not compared.
#[derive(Clone, Default)]
pub struct AssociativeMemory {
    nodes: Vec<ConceptNode>,
    events: KindIndex,
    chats: KindIndex,
    thoughts: KindIndex,
    /// Keyword → strength (looked up for every keyword of every memory formed; sorted only
    /// when saved, by [`Self::strengths`]).
    kw_strength_event: Strengths,
    kw_strength_thought: Strengths,
    embeddings: EmbeddingStore,
    pub(crate) columns: Columns,
}

impl PartialEq for AssociativeMemory {
    fn eq(&self, other: &Self) -> bool {
        self.nodes == other.nodes
            && self.kw_strength_event == other.kw_strength_event
            && self.kw_strength_thought == other.kw_strength_thought
            && self.embeddings == other.embeddings
    }
}

impl fmt::Debug for AssociativeMemory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AssociativeMemory")
            .field("events", &self.events.seq.len())
            .field("chats", &self.chats.seq.len())
            .field("thoughts", &self.thoughts.seq.len())
            .field("embeddings", &self.embeddings)
            .finish_non_exhaustive()
    }
}

impl AssociativeMemory {
    /// An empty memory whose embeddings come from `model` with `dim` dimensions.
    /// ([`Default`] lets the first embedding fix the dimension.)
    pub fn new(model: impl Into<String>, dim: usize) -> Self {
        Self {
            embeddings: EmbeddingStore::new(model, dim),
            ..Self::default()
        }
    }

    /// All nodes, oldest first; `nodes()[id.index()]` is the node `id`.
    pub fn nodes(&self) -> &[ConceptNode] {
        &self.nodes
    }

    /// The node `id`.
    pub fn node(&self, id: NodeId) -> Option<&ConceptNode> {
        self.nodes.get(id.index())
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether the stream is empty.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Number of nodes of `kind`.
    pub fn count(&self, kind: NodeKind) -> usize {
        self.index(kind).seq.len()
    }

    /// Nodes of `kind`, newest first.
    pub fn of_kind(
        &self,
        kind: NodeKind,
    ) -> impl ExactSizeIterator<Item = &ConceptNode> + DoubleEndedIterator {
        self.index(kind)
            .seq
            .iter()
            .rev()
            .map(|id| &self.nodes[id.index()])
    }

    /// Whether an event with the triple (s, p, o) is among the latest `latest` events (SPEC §3.1
    /// step 3). Compares fingerprints first, so a miss costs no string comparison.
    pub(crate) fn recent_event_is(&self, latest: usize, (s, p, o): (&str, &str, &str)) -> bool {
        let fingerprint = triple_fingerprint(s, p, o);
        let events = &self.events;
        events
            .triples
            .iter()
            .zip(&events.seq)
            .rev()
            .take(latest)
            .any(|(&triple, id)| {
                triple == fingerprint
                    && self.nodes.get(id.index()).is_some_and(|node| {
                        node.subject == s && node.predicate == p && node.object == o
                    })
            })
    }

    /// Events, newest first.
    pub fn events(&self) -> impl ExactSizeIterator<Item = &ConceptNode> + DoubleEndedIterator {
        self.of_kind(NodeKind::Event)
    }

    /// Chats, newest first.
    pub fn chats(&self) -> impl ExactSizeIterator<Item = &ConceptNode> + DoubleEndedIterator {
        self.of_kind(NodeKind::Chat)
    }

    /// Thoughts, newest first.
    pub fn thoughts(&self) -> impl ExactSizeIterator<Item = &ConceptNode> + DoubleEndedIterator {
        self.of_kind(NodeKind::Thought)
    }

    /// Nodes of `kind` carrying `keyword` (matched lowercased), newest first.
    pub fn with_keyword(&self, kind: NodeKind, keyword: &str) -> impl Iterator<Item = NodeId> + '_ {
        self.index(kind)
            .by_keyword
            .get(&keyword.trim().to_lowercase())
            .into_iter()
            .flatten()
            .rev()
            .copied()
    }

    /// The poignancy of the newest event remembered as `description`, among the latest
    /// [`Self::RATED_LOOK_BACK`] events with `keyword` (lean mode rates an event once).
    pub(crate) fn rated_event(&self, keyword: &str, description: &str) -> Option<u8> {
        self.with_keyword(NodeKind::Event, keyword)
            .take(Self::RATED_LOOK_BACK)
            .filter_map(|id| self.node(id))
            .find(|node| node.description == description)
            .map(|node| node.poignancy)
    }

    /// How many events with a keyword [`Self::rated_event`] looks at, newest first.
    pub(crate) const RATED_LOOK_BACK: usize = 512;

    /// How often `keyword` has appeared in non-idle events (`kind = Event`) or thoughts
    /// (`kind = Thought`); chats keep no strengths.
    pub fn keyword_strength(&self, kind: NodeKind, keyword: &str) -> u32 {
        let map = match kind {
            NodeKind::Event => &self.kw_strength_event,
            NodeKind::Thought => &self.kw_strength_thought,
            NodeKind::Chat => return 0,
        };
        map.get(&keyword.trim().to_lowercase())
            .copied()
            .unwrap_or(0)
    }

    /// The embedding store.
    pub fn embeddings(&self) -> &EmbeddingStore {
        &self.embeddings
    }

    /// The stored (normalised) embedding of `text`, so a caller can skip the embedding model.
    pub fn embedding(&self, text: &str) -> Option<&[f32]> {
        self.embeddings.get(text)
    }

    /// Adds an event (SPEC §3.1). `filling` is usually empty; for the persona's own "chat with"
    /// event it holds the chat node stored with it. Returns the new id; on error nothing changes.
    pub fn add_event(
        &mut self,
        memory: NewMemory,
        filling: Vec<NodeId>,
    ) -> Result<NodeId, MemoryError> {
        self.add(NodeKind::Event, memory, Filling::Evidence(filling))
    }

    /// Adds a chat whose conversation is `lines`. Returns the new id; on error nothing changes.
    pub fn add_chat(
        &mut self,
        memory: NewMemory,
        lines: Vec<ChatLine>,
    ) -> Result<NodeId, MemoryError> {
        self.add(NodeKind::Chat, memory, Filling::Chat(lines))
    }

    /// Adds a thought resting on `evidence` (older nodes); its depth is 1 + the deepest
    /// evidence's. Returns the new id; on error (e.g. an unknown evidence id) nothing changes.
    pub fn add_thought(
        &mut self,
        memory: NewMemory,
        evidence: Vec<NodeId>,
    ) -> Result<NodeId, MemoryError> {
        self.add(NodeKind::Thought, memory, Filling::Evidence(evidence))
    }

    /// Adds a chat whose conversation is `lines`, with `vector` as the embedding of its
    /// embedding key unless memory holds one already (`memory.embedding` is not read): a line
    /// heard by many is stored by each from one vector, never copied for the asking.
    pub(crate) fn add_chat_with_vector(
        &mut self,
        memory: NewMemory,
        vector: &[f32],
        lines: Vec<ChatLine>,
    ) -> Result<NodeId, MemoryError> {
        self.add_with(NodeKind::Chat, memory, Some(vector), Filling::Chat(lines))
    }

    fn add(
        &mut self,
        kind: NodeKind,
        mut memory: NewMemory,
        filling: Filling,
    ) -> Result<NodeId, MemoryError> {
        let vector = memory.embedding.take();
        self.add_with(kind, memory, vector.as_deref(), filling)
    }

    /// [`Self::add`] with the vector apart from the memory.
    fn add_with(
        &mut self,
        kind: NodeKind,
        memory: NewMemory,
        vector: Option<&[f32]>,
        filling: Filling,
    ) -> Result<NodeId, MemoryError> {
        let raw_id =
            u32::try_from(self.nodes.len()).map_err(|_| MemoryError::Full(self.nodes.len()))?;
        let id = NodeId(raw_id);
        let depth = self.depth_of(id, kind, &filling)?;
        // The embedding is the last fallible step, so an error leaves the memory untouched.
        let row = match (vector, self.embeddings.row(&memory.embedding_key)) {
            (_, Some(row)) => row,
            (Some(vector), None) => self.embeddings.insert(&memory.embedding_key, vector)?,
            (None, None) => {
                return Err(MemoryError::MissingEmbedding {
                    key: memory.embedding_key,
                });
            }
        };
        let node = ConceptNode {
            id,
            node_count: raw_id + 1,
            type_count: 0,
            kind,
            depth,
            created: memory.created,
            expiration: memory.expiration,
            last_accessed: memory.created,
            subject: memory.subject,
            predicate: memory.predicate,
            object: memory.object,
            description: memory.description,
            embedding_key: memory.embedding_key,
            poignancy: memory.poignancy.clamp(MIN_POIGNANCY, MAX_POIGNANCY),
            keywords: normalise_owned_keywords(memory.keywords),
            filling,
        };
        self.push_indexed(node, row, true);
        Ok(id)
    }

    /// Depth of a node of `kind` with `filling` about to get `id`; checks the evidence exists.
    fn depth_of(&self, id: NodeId, kind: NodeKind, filling: &Filling) -> Result<u32, MemoryError> {
        let mut deepest = 0;
        for &evidence in filling.evidence() {
            let Some(node) = self.nodes.get(evidence.index()).filter(|_| evidence < id) else {
                return Err(MemoryError::DanglingEvidence { node: id, evidence });
            };
            deepest = deepest.max(node.depth);
        }
        Ok(match kind {
            NodeKind::Thought => deepest.saturating_add(1),
            NodeKind::Event | NodeKind::Chat => 0,
        })
    }

    /// Appends a validated node, updating every index and column. `count_strength` is false
    /// when loading, where strengths come from `kw_strength.json`.
    fn push_indexed(&mut self, mut node: ConceptNode, row: usize, count_strength: bool) {
        let id = node.id;
        let idle = is_idle_triple(&node.predicate, &node.object);
        let triple = triple_fingerprint(&node.subject, &node.predicate, &node.object);
        let index = self.index_mut(node.kind);
        index.seq.push(id);
        index.triples.push(triple);
        node.type_count = u32::try_from(index.seq.len()).unwrap_or(u32::MAX);
        // Look up before inserting: most keywords are already there, and `entry` would allocate
        // an owned key for every one.
        for kw in &node.keywords {
            match index.by_keyword.get_mut(kw) {
                Some(ids) => ids.push(id),
                None => {
                    index.by_keyword.insert(kw.clone(), vec![id]);
                }
            }
        }
        if count_strength && !idle {
            let strengths = match node.kind {
                NodeKind::Event => Some(&mut self.kw_strength_event),
                NodeKind::Thought => Some(&mut self.kw_strength_thought),
                NodeKind::Chat => None,
            };
            if let Some(strengths) = strengths {
                for kw in &node.keywords {
                    match strengths.get_mut(kw) {
                        Some(strength) => *strength = strength.saturating_add(1),
                        None => {
                            strengths.insert(kw.clone(), 1);
                        }
                    }
                }
            }
        }
        let columns = &mut self.columns;
        columns.row.push(row as u32);
        columns.poignancy.push(node.poignancy);
        columns
            .last_accessed
            .push(epoch_seconds(node.last_accessed));
        columns
            .expiration
            .push(node.expiration.map_or(i64::MAX, epoch_seconds));
        columns.candidate.push(node.kind != NodeKind::Chat && !idle);
        self.nodes.push(node);
    }

    fn index(&self, kind: NodeKind) -> &KindIndex {
        match kind {
            NodeKind::Event => &self.events,
            NodeKind::Chat => &self.chats,
            NodeKind::Thought => &self.thoughts,
        }
    }

    fn index_mut(&mut self, kind: NodeKind) -> &mut KindIndex {
        match kind {
            NodeKind::Event => &mut self.events,
            NodeKind::Chat => &mut self.chats,
            NodeKind::Thought => &mut self.thoughts,
        }
    }

    /// The `(subject, predicate, object)` of the latest `retention` events, newest first —
    /// perception skips an event it already holds among these (SPEC §3.1).
    pub fn latest_event_triples(&self, retention: usize) -> Vec<(&str, &str, &str)> {
        self.events()
            .take(retention)
            .map(ConceptNode::spo)
            .collect()
    }

    /// Events sharing a keyword with `subject`, `predicate` or `object`, newest first, each once
    /// (reactions, SPEC §3.2). Each part is matched lowercased, and an address such as
    /// `w:s:a:bed` also by its last segment (`bed`), the way perception forms keywords.
    pub fn retrieve_relevant_events(
        &self,
        subject: &str,
        predicate: &str,
        object: &str,
    ) -> Vec<NodeId> {
        self.relevant(NodeKind::Event, [subject, predicate, object])
    }

    /// Thoughts sharing a keyword with `subject`, `predicate` or `object`, newest first, each
    /// once. Matching as in [`retrieve_relevant_events`](Self::retrieve_relevant_events).
    pub fn retrieve_relevant_thoughts(
        &self,
        subject: &str,
        predicate: &str,
        object: &str,
    ) -> Vec<NodeId> {
        self.relevant(NodeKind::Thought, [subject, predicate, object])
    }

    /// Events and thoughts sharing a keyword with `parts` (matched as in
    /// [`retrieve_relevant_events`](Self::retrieve_relevant_events)), newest first, each once,
    /// that are not idle and for which `keep` holds: at most `limit` of them. The same as both
    /// lists merged, newest first, filtered and cut to `limit`, but read from the newest ends
    /// of the keyword lists (each ascending, as ids are given out), so it costs about `limit`
    /// ids, not every match; an idle node (a crowd's keyword lists hold many) is told apart by
    /// the candidate column and passed over unread.
    pub(crate) fn newest_relevant_not_idle(
        &self,
        parts: [&str; 3],
        limit: usize,
        mut keep: impl FnMut(&ConceptNode) -> bool,
    ) -> Vec<&ConceptNode> {
        let keys = relevant_keys(parts);
        let mut lists: Vec<&[NodeId]> = [NodeKind::Event, NodeKind::Thought]
            .into_iter()
            .flat_map(|kind| {
                let index = self.index(kind);
                keys.iter().filter_map(move |k| index.by_keyword.get(k))
            })
            .map(Vec::as_slice)
            .collect();
        // Events and thoughts only: for them a candidate is exactly a node that is not idle.
        let candidate = |id: NodeId| {
            self.columns
                .candidate
                .get(id.index())
                .copied()
                .unwrap_or(false)
        };
        let mut out = Vec::new();
        let mut last = None;
        while out.len() < limit {
            // The list whose newest remaining id is the newest of all.
            let Some(at) = (0..lists.len())
                .filter(|&i| !lists[i].is_empty())
                .max_by_key(|&i| lists[i].last())
            else {
                break;
            };
            let Some((&id, rest)) = lists[at].split_last() else {
                break;
            };
            lists[at] = rest;
            // A node under several keywords comes up once per list, one right after another.
            if last.replace(id) == Some(id) || !candidate(id) {
                continue;
            }
            if let Some(node) = self.node(id).filter(|node| keep(node)) {
                out.push(node);
            }
        }
        out
    }

    fn relevant(&self, kind: NodeKind, parts: [&str; 3]) -> Vec<NodeId> {
        let keys = relevant_keys(parts);
        let index = self.index(kind);
        let found: BTreeSet<NodeId> = keys
            .iter()
            .filter_map(|k| index.by_keyword.get(k))
            .flatten()
            .copied()
            .collect();
        found.into_iter().rev().collect()
    }

    /// The latest chat whose keywords include `name` (matched lowercased).
    pub fn last_chat_with(&self, name: &str) -> Option<&ConceptNode> {
        self.with_keyword(NodeKind::Chat, name)
            .next()
            .and_then(|id| self.node(id))
    }

    /// The latest `n` non-idle events and thoughts by `last_accessed` (ties: the newer node
    /// last), oldest first — the statements reflection asks its questions about (SPEC §3.8).
    pub(crate) fn latest_accessed_events_and_thoughts(&self, n: usize) -> Vec<&ConceptNode> {
        let mut nodes: Vec<&ConceptNode> = self
            .nodes
            .iter()
            .filter(|node| self.columns.candidate[node.id.index()])
            .collect();
        // Every key differs (the id), so the `n` latest partitioned off and then sorted are the
        // tail of the whole list sorted, without sorting the rest.
        let key = |node: &&ConceptNode| (node.last_accessed, node.id);
        let skip = nodes.len().saturating_sub(n);
        if skip > 0 && n > 0 {
            nodes.select_nth_unstable_by_key(skip, key);
        }
        let mut latest = nodes.split_off(skip);
        latest.sort_unstable_by_key(key);
        latest
    }

    /// Sets `last_accessed` of every node in `ids` to `now`. Unknown ids are ignored.
    pub fn set_last_accessed(&mut self, ids: &[NodeId], now: NaiveDateTime) {
        let seconds = epoch_seconds(now);
        for id in ids {
            if let Some(node) = self.nodes.get_mut(id.index()) {
                node.last_accessed = now;
                self.columns.last_accessed[id.index()] = seconds;
            }
        }
    }

    /// Rebuilds a memory from saved parts, checking every node (see the `save` module).
    /// The node list keeps room for a quarter more nodes, plus [`LOADED_ROOM`].
    pub(crate) fn from_parts(
        nodes: Vec<ConceptNode>,
        embeddings: EmbeddingStore,
        kw_strength_event: BTreeMap<String, u32>,
        kw_strength_thought: BTreeMap<String, u32>,
    ) -> Result<Self, MemoryError> {
        let mut memory = Self {
            embeddings,
            kw_strength_event: kw_strength_event
                .into_iter()
                .map(|(k, v)| (k.trim().to_lowercase(), v))
                .collect(),
            kw_strength_thought: kw_strength_thought
                .into_iter()
                .map(|(k, v)| (k.trim().to_lowercase(), v))
                .collect(),
            ..Self::default()
        };
        // Room to grow: at its exact size, the first memory formed after loading would copy
        // the whole stream to a block twice as large — for every persona, in the first
        // minutes of a loaded town. A quarter more (and a few for a short stream) is less
        // memory than that doubling, and lasts a while.
        memory
            .nodes
            .reserve_exact(nodes.len() + nodes.len() / 4 + LOADED_ROOM);
        for (position, mut node) in nodes.into_iter().enumerate() {
            let expected = u32::try_from(position).map_err(|_| MemoryError::Full(position))?;
            if node.id.0 != expected {
                return Err(MemoryError::NodeIdSequence {
                    expected,
                    found: node.id.0,
                });
            }
            if !(MIN_POIGNANCY..=MAX_POIGNANCY).contains(&node.poignancy) {
                return Err(MemoryError::PoignancyOutOfRange {
                    node: node.id,
                    value: node.poignancy,
                });
            }
            let filling_fits = matches!(
                (node.kind, &node.filling),
                (NodeKind::Chat, Filling::Chat(_))
                    | (NodeKind::Event | NodeKind::Thought, Filling::Evidence(_))
            );
            if !filling_fits {
                return Err(MemoryError::FillingMismatch {
                    node: node.id,
                    kind: node.kind,
                });
            }
            let Some(row) = memory.embeddings.row(&node.embedding_key) else {
                return Err(MemoryError::MissingEmbedding {
                    key: node.embedding_key,
                });
            };
            node.depth = memory.depth_of(node.id, node.kind, &node.filling)?;
            node.node_count = expected + 1;
            node.keywords = normalise_owned_keywords(std::mem::take(&mut node.keywords));
            memory.push_indexed(node, row, false);
        }
        Ok(memory)
    }

    /// Event and thought keyword strengths, for saving: sorted by keyword, so a save's
    /// `kw_strength.json` is the same text whatever order the keywords came in.
    pub(crate) fn strengths(&self) -> (BTreeMap<&str, u32>, BTreeMap<&str, u32>) {
        (
            sorted_strengths(&self.kw_strength_event),
            sorted_strengths(&self.kw_strength_thought),
        )
    }
}

/// The keys a triple is looked up under: each part lowercased and trimmed, and the last
/// `:`-separated segment of each (an address's object), as Smallville matches them.
fn relevant_keys(parts: [&str; 3]) -> BTreeSet<String> {
    let mut keys = BTreeSet::new();
    for part in parts {
        let lower = part.trim().to_lowercase();
        if let Some(last) = lower
            .rsplit(':')
            .next()
            .map(str::trim)
            .filter(|l| !l.is_empty())
        {
            keys.insert(last.to_owned());
        }
        keys.insert(lower);
    }
    keys
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::NaiveDate;

    fn at(hour: u32) -> NaiveDateTime {
        NaiveDate::from_ymd_opt(2023, 2, 13)
            .and_then(|d| d.and_hms_opt(hour, 0, 0))
            .expect("valid time")
    }

    fn event(s: &str, p: &str, o: &str, vector: Vec<f32>) -> NewMemory {
        let last = |x: &str| x.rsplit(':').next().unwrap_or(x).to_owned();
        NewMemory::new(at(8), (s, p, o), format!("{s} {p} {o}"))
            .keywords([last(s), last(o)])
            .embedding(vector)
    }

    #[test]
    fn a_loaded_memory_forms_new_memories_without_moving_its_nodes() {
        for size in [0_u32, 3, 200] {
            let mut mem = AssociativeMemory::default();
            for k in 0..size {
                mem.add_event(event("Ana", "uses", "cup", vec![1.0, k as f32]), Vec::new())
                    .unwrap();
            }
            let json = mem.to_json().unwrap();
            let mut loaded = AssociativeMemory::from_json(json).unwrap();
            assert_eq!(loaded, mem);
            let before = loaded.nodes().as_ptr();
            for k in 0..size / 4 + LOADED_ROOM as u32 {
                loaded
                    .add_event(
                        event("Ben", "reads", "book", vec![2.0, k as f32]),
                        Vec::new(),
                    )
                    .unwrap();
            }
            assert_eq!(loaded.nodes().as_ptr(), before, "{size} nodes loaded");
        }
    }

    #[test]
    fn newest_relevant_is_both_lists_merged_filtered_and_cut() {
        // A memory of events and thoughts under overlapping keywords (some idle, some under an
        // address), compared with the two full lists merged newest first, as before.
        let names = ["Ana", "Ben", "w:s:cafe:counter", "Cy"];
        let objects = ["idle", "coffee", "book", "w:s:cafe:counter"];
        let mut mem = AssociativeMemory::default();
        let mut x = 7_u32;
        for k in 0..300_u32 {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            let s = names[(x >> 8) as usize % names.len()];
            let o = objects[(x >> 16) as usize % objects.len()];
            let p = if o == "idle" { "is" } else { "uses" };
            let memory = event(s, p, o, vec![1.0, k as f32]);
            let added = if x.is_multiple_of(5) {
                mem.add_thought(memory, Vec::new())
            } else {
                mem.add_event(memory, Vec::new())
            };
            assert!(added.is_ok());
        }
        for (s, p, o) in [
            ("Ana", "uses", "coffee"),
            ("Cy", "is", "idle"),
            ("w:s:cafe:counter", "is", "idle"),
            ("Dee", "sees", "nothing"),
        ] {
            for limit in [0, 1, 5, 40, 1_000] {
                for focus in [NodeId(0), NodeId(299), NodeId(150)] {
                    let keep = |n: &ConceptNode| n.id != focus && !n.is_idle();
                    let mut ids = mem.retrieve_relevant_events(s, p, o);
                    ids.extend(mem.retrieve_relevant_thoughts(s, p, o));
                    ids.sort_by(|a, b| b.cmp(a));
                    ids.dedup();
                    let before: Vec<NodeId> = ids
                        .into_iter()
                        .filter_map(|id| mem.node(id))
                        .filter(|n| keep(n))
                        .take(limit)
                        .map(|n| n.id)
                        .collect();
                    let unread_idle: Vec<NodeId> = mem
                        .newest_relevant_not_idle([s, p, o], limit, |n| n.id != focus)
                        .into_iter()
                        .map(|n| n.id)
                        .collect();
                    assert_eq!(unread_idle, before, "{s} {p} {o}, limit {limit}");
                }
            }
        }
    }

    #[test]
    fn recent_events_are_found_by_triple_within_the_window() {
        let mut mem = AssociativeMemory::default();
        for (k, (s, p, o)) in [
            ("Ana", "is", "idle"),
            ("Ben", "drinks", "coffee"),
            ("Ana", "reads", "book"),
        ]
        .into_iter()
        .enumerate()
        {
            let Ok(_) = mem.add_event(event(s, p, o, vec![1.0, k as f32]), Vec::new()) else {
                panic!("adding must work");
            };
        }
        assert!(mem.recent_event_is(3, ("Ana", "is", "idle")));
        assert!(mem.recent_event_is(1, ("Ana", "reads", "book")));
        // Outside the window of the latest two.
        assert!(!mem.recent_event_is(2, ("Ana", "is", "idle")));
        // Parts that concatenate to the same text are different triples.
        assert!(!mem.recent_event_is(3, ("Ben", "drink", "scoffee")));
        assert!(!mem.recent_event_is(3, ("Ben", "drinks", "tea")));
        assert!(!mem.recent_event_is(0, ("Ana", "reads", "book")));
        assert_ne!(
            triple_fingerprint("ab", "c", "d"),
            triple_fingerprint("a", "bc", "d")
        );
        // A word's trailing zero bytes are not the end of a part.
        assert_ne!(
            triple_fingerprint("abcdefgh", "", "x"),
            triple_fingerprint("abcdefgh\0", "", "x")
        );
        assert_eq!(
            triple_fingerprint("Isabella Rodriguez", "is", "idle"),
            triple_fingerprint("Isabella Rodriguez", "is", "idle")
        );
    }

    #[test]
    fn adding_fills_sequences_keywords_and_columns() {
        let mut mem = AssociativeMemory::new("test", 2);
        let a = mem
            .add_event(event("Ana", "is", "brewing coffee", vec![1.0, 0.0]), vec![])
            .unwrap();
        let b = mem
            .add_event(event("w:s:a:bed", "is", "idle", vec![0.0, 1.0]), vec![])
            .unwrap();
        assert_eq!((a, b), (NodeId(0), NodeId(1)));
        assert_eq!(mem.events().map(|n| n.id).collect::<Vec<_>>(), vec![b, a]);
        assert_eq!(
            mem.with_keyword(NodeKind::Event, "ANA").collect::<Vec<_>>(),
            vec![a]
        );
        assert_eq!(
            mem.with_keyword(NodeKind::Event, "bed").collect::<Vec<_>>(),
            vec![b]
        );
        assert_eq!(mem.keyword_strength(NodeKind::Event, "ana"), 1);
        assert_eq!(
            mem.keyword_strength(NodeKind::Event, "bed"),
            0,
            "idle events do not count"
        );
        assert_eq!(mem.columns.candidate, vec![true, false]);
        assert_eq!(mem.columns.row, vec![0, 1]);
        assert_eq!(
            mem.node(b).map(|n| (n.node_count, n.type_count)),
            Some((2, 2))
        );
    }

    #[test]
    fn failed_add_changes_nothing() {
        let mut mem = AssociativeMemory::new("test", 2);
        mem.add_event(event("Ana", "is", "reading", vec![1.0, 0.0]), vec![])
            .unwrap();
        let before = mem.clone();
        let err = mem.add_thought(
            event("Ana", "likes", "books", vec![0.5, 0.5]),
            vec![NodeId(5)],
        );
        assert!(matches!(
            err,
            Err(MemoryError::DanglingEvidence {
                node: NodeId(1),
                evidence: NodeId(5)
            })
        ));
        let err = mem.add_event(event("Ana", "is", "writing", vec![1.0, 0.0, 0.0]), vec![]);
        assert!(matches!(
            err,
            Err(MemoryError::DimensionMismatch {
                expected: 2,
                found: 3,
                ..
            })
        ));
        let err = mem.add_event(
            NewMemory::new(at(9), ("a", "b", "c"), "never embedded"),
            vec![],
        );
        assert!(matches!(err, Err(MemoryError::MissingEmbedding { .. })));
        assert_eq!(mem, before);
        assert_eq!(mem.columns, before.columns);
        assert_eq!(
            (mem.events.clone(), mem.thoughts.clone()),
            (before.events.clone(), before.thoughts.clone())
        );
    }

    #[test]
    fn latest_accessed_orders_by_last_accessed() {
        let mut mem = AssociativeMemory::new("test", 2);
        let a = mem
            .add_event(event("Ana", "is", "reading", vec![1.0, 0.0]), vec![])
            .unwrap();
        let b = mem
            .add_event(event("Ana", "is", "writing", vec![0.0, 1.0]), vec![])
            .unwrap();
        mem.add_event(event("w:s:a:desk", "is", "idle", vec![1.0, 1.0]), vec![])
            .unwrap();
        let c = mem
            .add_thought(event("Ana", "likes", "words", vec![1.0, 1.0]), vec![a])
            .unwrap();
        mem.set_last_accessed(&[a], at(12));
        let ids: Vec<NodeId> = mem
            .latest_accessed_events_and_thoughts(10)
            .iter()
            .map(|n| n.id)
            .collect();
        assert_eq!(ids, vec![b, c, a]);
        let ids: Vec<NodeId> = mem
            .latest_accessed_events_and_thoughts(2)
            .iter()
            .map(|n| n.id)
            .collect();
        assert_eq!(ids, vec![c, a]);
    }

    #[test]
    fn latest_accessed_is_the_tail_of_a_full_sort() {
        let mut mem = AssociativeMemory::new("test", 2);
        let mut ids = Vec::new();
        for i in 0..200u16 {
            let what = format!("doing {i}");
            let vector = vec![1.0, f32::from(i)];
            ids.push(
                mem.add_event(event("Ana", "is", &what, vector), vec![])
                    .unwrap(),
            );
        }
        // Many ties: a third of the nodes accessed at one of five hours.
        for (k, id) in ids.iter().enumerate().filter(|(k, _)| k % 3 == 0) {
            mem.set_last_accessed(&[*id], at(9 + (k % 5) as u32));
        }
        let mut all: Vec<&ConceptNode> = mem.nodes.iter().collect();
        all.sort_by_key(|node| (node.last_accessed, node.id));
        for n in [0, 1, 7, 50, 199, 200, 500] {
            let got: Vec<NodeId> = mem
                .latest_accessed_events_and_thoughts(n)
                .iter()
                .map(|node| node.id)
                .collect();
            let want: Vec<NodeId> = all[all.len().saturating_sub(n)..]
                .iter()
                .map(|node| node.id)
                .collect();
            assert_eq!(got, want, "n = {n}");
        }
    }
}
