//! The content-addressed response cache (SPEC §5 "Cache").
//!
//! A [`CacheKey`] is the SHA-256 of everything that determines an answer: the model, the
//! prompt kind, the messages and every sampling parameter (including the JSON schema). JSON
//! schemas are hashed in a canonical form (object keys sorted), so two equal schemas built in
//! a different key order share a key.
//!
//! The cache lives in memory and can persist to a JSON-lines file: [`ResponseCache::open`]
//! loads every entry (skipping, counting and warning about lines that do not parse or are not
//! UTF-8 — a crash can leave a torn last line; a corrupt line is never fatal) and appends each
//! new entry as one line. That file is what `--record-cache`/`--replay-cache` read and write,
//! and what [`ReplayBackend`](super::ReplayBackend) answers from.
//!
//! Both are bounded ([`CacheLimits`]): memory holds at most [`CacheLimits::memory_bytes`] of
//! answers, the least recently used leaving first, and when the file would grow past
//! [`CacheLimits::file_bytes`] it is rewritten with the most recently used entries that fit in
//! half of it (written to a temporary file, then renamed over the old one, so a crash leaves
//! one whole file or the other).
//!
//! Only answers worth reusing belong here: the [`LlmClient`](super::LlmClient) stores a chat
//! answer only after the prompt that asked for it accepted it (see
//! [`LlmClient::keep`](super::LlmClient::keep)), and embeddings or choice scores only when they
//! are finite and of the right size.

use std::collections::HashMap;

use bevy::platform::hash::PassHash;
use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::{Mutex, MutexGuard, PoisonError};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::backend::{ChatMessage, ChatRequest, ChatResponse, ChoiceRequest};

/// Version tag mixed into every key; bump it when the key derivation changes.
const KEY_VERSION: &[u8] = b"bga-cache-v1";

/// A SHA-256 content address, shown and stored as 64 lowercase hex digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct CacheKey([u8; 32]);

/// A digest's bits are already uniform: a key hashes as its first eight bytes (equal keys
/// still compare all 32), so the cache's map needs no hashing of its own (see [`PassHash`]).
impl std::hash::Hash for CacheKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        let mut head = [0u8; 8];
        head.copy_from_slice(&self.0[..8]);
        state.write_u64(u64::from_le_bytes(head));
    }
}

impl CacheKey {
    /// The raw digest.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }
}

impl fmt::Display for CacheKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for byte in self.0 {
            write!(f, "{byte:02x}")?;
        }
        Ok(())
    }
}

/// A string that is not 64 hex digits.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a cache key is 64 hex digits")]
pub struct ParseCacheKeyError;

impl FromStr for CacheKey {
    type Err = ParseCacheKeyError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bytes = s.as_bytes();
        if bytes.len() != 64 {
            return Err(ParseCacheKeyError);
        }
        let mut out = [0u8; 32];
        for (slot, pair) in out.iter_mut().zip(bytes.chunks_exact(2)) {
            let [hi, lo] = pair else {
                return Err(ParseCacheKeyError);
            };
            let hi = hex_value(*hi).ok_or(ParseCacheKeyError)?;
            let lo = hex_value(*lo).ok_or(ParseCacheKeyError)?;
            *slot = (hi << 4) | lo;
        }
        Ok(Self(out))
    }
}

fn hex_value(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

impl Serialize for CacheKey {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for CacheKey {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// Feeds length-prefixed fields into SHA-256 so field boundaries cannot be confused
/// (`"ab" + "c"` ≠ `"a" + "bc"`).
struct KeyHasher(Sha256);

impl KeyHasher {
    fn new(domain: &str) -> Self {
        let mut hasher = Self(Sha256::new());
        hasher.bytes(KEY_VERSION);
        hasher.str(domain);
        hasher
    }

    fn bytes(&mut self, bytes: &[u8]) {
        self.0.update((bytes.len() as u64).to_le_bytes());
        self.0.update(bytes);
    }

    fn str(&mut self, s: &str) {
        self.bytes(s.as_bytes());
    }

    fn u64(&mut self, v: u64) {
        self.0.update(v.to_le_bytes());
    }

    fn messages(&mut self, messages: &[ChatMessage]) {
        self.u64(messages.len() as u64);
        for message in messages {
            let role: &str = match message.role {
                super::backend::Role::System => "system",
                super::backend::Role::User => "user",
                super::backend::Role::Assistant => "assistant",
            };
            self.str(role);
            self.str(&message.content);
        }
    }

    /// Hashes a JSON value canonically: object keys in sorted order, whatever the map type.
    fn json(&mut self, value: &serde_json::Value) {
        use serde_json::Value;
        match value {
            Value::Null => self.str("null"),
            Value::Bool(b) => {
                self.str("bool");
                self.u64(u64::from(*b));
            }
            Value::Number(n) => {
                self.str("num");
                self.str(&n.to_string());
            }
            Value::String(s) => {
                self.str("str");
                self.str(s);
            }
            Value::Array(items) => {
                self.str("arr");
                self.u64(items.len() as u64);
                for item in items {
                    self.json(item);
                }
            }
            Value::Object(map) => {
                self.str("obj");
                self.u64(map.len() as u64);
                // A map whose keys already come in order (every map, unless serde_json keeps
                // insertion order) is hashed as it is, without a sorted copy.
                if map.keys().is_sorted() {
                    map.iter().for_each(|(key, item)| self.entry(key, item));
                } else {
                    let mut entries: Vec<_> = map.iter().collect();
                    entries.sort_by(|a, b| a.0.cmp(b.0));
                    entries
                        .into_iter()
                        .for_each(|(key, item)| self.entry(key, item));
                }
            }
        }
    }

    /// One key and value of a JSON object.
    fn entry(&mut self, key: &str, item: &serde_json::Value) {
        self.str(key);
        self.json(item);
    }

    fn finish(self) -> CacheKey {
        CacheKey(self.0.finalize().into())
    }
}

/// The cache key of a chat request answered by `model`.
pub(crate) fn chat_cache_key(model: &str, request: &ChatRequest) -> CacheKey {
    let mut h = KeyHasher::new("chat");
    h.str(model);
    h.str(&request.kind);
    h.messages(&request.messages);
    h.u64(u64::from(request.max_tokens));
    h.u64(u64::from(request.temperature.to_bits()));
    h.u64(u64::from(request.top_p.to_bits()));
    h.u64(request.stop.len() as u64);
    for stop in &request.stop {
        h.str(stop);
    }
    match &request.json_schema {
        Some(schema) => {
            h.u64(1);
            h.json(schema);
        }
        None => h.u64(0),
    }
    match request.seed {
        Some(seed) => {
            h.u64(1);
            h.u64(seed);
        }
        None => h.u64(0),
    }
    h.finish()
}

/// The cache key of a choice-scoring request answered by `model`.
pub(crate) fn choice_cache_key(model: &str, request: &ChoiceRequest) -> CacheKey {
    let mut h = KeyHasher::new("choice");
    h.str(model);
    h.str(&request.kind);
    h.messages(&request.messages);
    h.u64(request.options.len() as u64);
    for option in &request.options {
        h.str(option);
    }
    h.finish()
}

/// The cache key of one text's embedding by `embedding_model`.
pub(crate) fn embedding_cache_key(embedding_model: &str, text: &str) -> CacheKey {
    let mut h = KeyHasher::new("embed");
    h.str(embedding_model);
    h.str(text);
    h.finish()
}

/// Reads JSON lines in file order, skipping (counting, and warning about) the ones that are not
/// UTF-8 or do not parse. Only failing to read the file at all is an error.
fn read_entries(file: File, path: &Path) -> Result<(Vec<CacheEntry>, CacheLoadReport), CacheError> {
    let mut entries = Vec::new();
    let mut report = CacheLoadReport::default();
    for line in BufReader::new(file).split(b'\n') {
        let line = line.map_err(|source| CacheError::Io {
            path: path.to_owned(),
            source,
        })?;
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<CacheEntry>(&line) {
            Ok(entry) => {
                entries.push(entry);
                report.loaded += 1;
            }
            Err(_) => report.skipped += 1,
        }
    }
    if report.skipped > 0 {
        bevy::log::warn!(
            "response cache {}: skipped {} unreadable line(s)",
            path.display(),
            report.skipped
        );
    }
    Ok((entries, report))
}

/// Whether `file` is empty or its last byte is a newline.
fn ends_with_newline(file: &mut File) -> io::Result<bool> {
    use std::io::{Read, Seek, SeekFrom};
    let len = file.metadata()?.len();
    if len == 0 {
        return Ok(true);
    }
    file.seek(SeekFrom::Start(len - 1))?;
    let mut last = [0u8; 1];
    file.read_exact(&mut last)?;
    Ok(last == *b"\n")
}

/// A cached answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CachedAnswer {
    /// A chat completion.
    Chat(ChatResponse),
    /// Choice scores, one per option.
    Scores(Vec<f32>),
    /// One embedding vector.
    Embedding(Vec<f32>),
}

/// One line of the cache file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CacheEntry {
    /// The content address.
    pub key: CacheKey,
    /// The model (or embedding model) that produced the answer.
    pub model: String,
    /// The prompt kind (`"embed"` for embeddings).
    pub kind: String,
    /// The answer.
    pub answer: CachedAnswer,
    /// A chat answer the prompt rejected. Only a recording
    /// ([`CachePolicy::Always`](super::CachePolicy::Always)) keeps these, so that its replay
    /// retries exactly as the recorded run did; no other policy ever answers from one.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub rejected: bool,
}

impl CacheEntry {
    /// Roughly the bytes the entry holds in memory (what [`CacheLimits::memory_bytes`] counts).
    pub(crate) fn approx_bytes(&self) -> usize {
        let answer = match &self.answer {
            CachedAnswer::Chat(response) => response.text.len() + 16,
            CachedAnswer::Scores(v) | CachedAnswer::Embedding(v) => v.len() * 4,
        };
        // Key, strings' headers, the map slot and the recency index.
        128 + self.model.len() + self.kind.len() + answer
    }
}

/// How large the cache may grow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheLimits {
    /// Answers kept in memory, in bytes (`CacheEntry::approx_bytes`); the least recently
    /// used entries are dropped past it. Default 256 MiB.
    pub memory_bytes: usize,
    /// The cache file's size in bytes; past it the file is compacted to the most recently used
    /// entries filling half of it. Default 256 MiB.
    pub file_bytes: u64,
}

impl Default for CacheLimits {
    fn default() -> Self {
        Self {
            memory_bytes: 256 << 20,
            file_bytes: 256 << 20,
        }
    }
}

/// Failures opening or writing the cache file.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    /// The file could not be read, created or appended to.
    #[error("response cache file {path}: {source}")]
    Io {
        /// The cache file.
        path: PathBuf,
        /// What went wrong.
        #[source]
        source: io::Error,
    },
}

/// What [`ResponseCache::open`] found in an existing file.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheLoadReport {
    /// Entries loaded.
    pub loaded: usize,
    /// Lines skipped because they did not parse.
    pub skipped: usize,
}

/// No slot: either end of the use list.
const NIL: usize = usize::MAX;

/// One cached answer, linked into the use list between the entries used just before and just
/// after it.
struct Slot {
    entry: CacheEntry,
    bytes: usize,
    /// The slot used just before this one ([`NIL`] for the least recently used).
    older: usize,
    /// The slot used just after this one ([`NIL`] for the most recently used).
    newer: usize,
}

/// The entries in a slab, indexed by key and linked in order of use: a hit moves its slot to
/// the newest end and an eviction takes the oldest, each a few link updates. Nothing is ever
/// left to clean up later — an earlier design appended a record per hit and compacted the
/// records now and then, which held the lock for tens of milliseconds in a large cache.
struct CacheInner {
    index: HashMap<CacheKey, usize, PassHash>,
    /// `None` for a slot whose entry left, until [`Self::free`] hands it out again.
    slots: Vec<Option<Slot>>,
    free: Vec<usize>,
    oldest: usize,
    newest: usize,
    memory_bytes: usize,
    limits: CacheLimits,
    file: Option<File>,
    file_bytes: u64,
    path: Option<PathBuf>,
    evicted: u64,
    compactions: u64,
}

impl CacheInner {
    fn new(limits: CacheLimits) -> Self {
        Self {
            index: HashMap::default(),
            slots: Vec::new(),
            free: Vec::new(),
            oldest: NIL,
            newest: NIL,
            memory_bytes: 0,
            limits,
            file: None,
            file_bytes: 0,
            path: None,
            evicted: 0,
            compactions: 0,
        }
    }

    fn len(&self) -> usize {
        self.index.len()
    }

    fn slot(&self, at: usize) -> Option<&Slot> {
        self.slots.get(at).and_then(Option::as_ref)
    }

    fn slot_mut(&mut self, at: usize) -> Option<&mut Slot> {
        self.slots.get_mut(at).and_then(Option::as_mut)
    }

    /// Takes the slot at `at` out of the use list (its links are left as they were).
    fn unlink(&mut self, at: usize) {
        let Some((older, newer)) = self.slot(at).map(|slot| (slot.older, slot.newer)) else {
            return;
        };
        match self.slot_mut(older) {
            Some(slot) => slot.newer = newer,
            None => self.oldest = newer,
        }
        match self.slot_mut(newer) {
            Some(slot) => slot.older = older,
            None => self.newest = older,
        }
    }

    /// Links the (unlinked) slot at `at` in as the most recently used.
    fn link_newest(&mut self, at: usize) {
        let previous = self.newest;
        if let Some(slot) = self.slot_mut(at) {
            slot.older = previous;
            slot.newer = NIL;
        }
        match self.slot_mut(previous) {
            Some(slot) => slot.newer = at,
            None => self.oldest = at,
        }
        self.newest = at;
    }

    /// Marks the entry under `key` as just used.
    fn touch(&mut self, key: &CacheKey) -> Option<&CacheEntry> {
        let at = *self.index.get(key)?;
        if at != self.newest {
            self.unlink(at);
            self.link_newest(at);
        }
        self.slot(at).map(|slot| &slot.entry)
    }

    /// The entries in memory, least recently used first.
    fn by_recency(&self) -> UseOrder<'_> {
        UseOrder {
            inner: self,
            front: self.oldest,
            back: self.newest,
            left: self.len(),
        }
    }

    /// Stores `entry` as the most recently used, then drops the least recently used entries
    /// while memory is over its limit (never the one just stored).
    fn put(&mut self, entry: CacheEntry) {
        let bytes = entry.approx_bytes();
        let key = entry.key;
        let at = match self.index.get(&key).copied() {
            Some(at) => {
                self.unlink(at);
                if let Some(slot) = self.slot_mut(at) {
                    let old = std::mem::replace(&mut slot.bytes, bytes);
                    slot.entry = entry;
                    self.memory_bytes -= old;
                }
                at
            }
            None => {
                let slot = Slot {
                    entry,
                    bytes,
                    older: NIL,
                    newer: NIL,
                };
                let at = match self.free.pop() {
                    Some(at) => {
                        if let Some(free) = self.slots.get_mut(at) {
                            *free = Some(slot);
                        }
                        at
                    }
                    None => {
                        self.slots.push(Some(slot));
                        self.slots.len() - 1
                    }
                };
                self.index.insert(key, at);
                at
            }
        };
        self.link_newest(at);
        self.memory_bytes += bytes;
        while self.memory_bytes > self.limits.memory_bytes && self.len() > 1 {
            let oldest = self.oldest;
            self.unlink(oldest);
            let Some(slot) = self.slots.get_mut(oldest).and_then(Option::take) else {
                break;
            };
            self.index.remove(&slot.entry.key);
            self.free.push(oldest);
            self.memory_bytes -= slot.bytes;
            self.evicted += 1;
        }
    }

    /// Appends one line, compacting the file first when it would pass its limit.
    fn append(&mut self, line: &str) -> io::Result<()> {
        let Some(file) = self.file.as_mut() else {
            return Ok(());
        };
        let len = line.len() as u64;
        if self.file_bytes + len <= self.limits.file_bytes {
            // One write per entry keeps lines whole even if another process appends too.
            file.write_all(line.as_bytes())?;
            self.file_bytes += len;
            return Ok(());
        }
        // The entry is already in memory, so the compacted file holds it (when it fits).
        self.compact()
    }

    /// Rewrites the file with the most recently used entries filling at most half its limit.
    fn compact(&mut self) -> io::Result<()> {
        let Some(path) = self.path.clone() else {
            return Ok(());
        };
        let budget = self.limits.file_bytes / 2;
        let mut lines = Vec::new();
        let mut total = 0u64;
        for entry in self.by_recency().rev() {
            let mut line = serde_json::to_string(entry)?;
            line.push('\n');
            if total + line.len() as u64 > budget {
                break;
            }
            total += line.len() as u64;
            lines.push(line);
        }
        let temp = path.with_extension("jsonl.compacting");
        {
            let mut out = io::BufWriter::new(File::create(&temp)?);
            // Oldest first: a reload replays the file in order, so recency survives it.
            for line in lines.iter().rev() {
                out.write_all(line.as_bytes())?;
            }
            out.into_inner()
                .map_err(io::IntoInnerError::into_error)?
                .sync_all()?;
        }
        std::fs::rename(&temp, &path)?;
        self.file = Some(OpenOptions::new().append(true).read(true).open(&path)?);
        self.file_bytes = total;
        self.compactions += 1;
        bevy::log::info!(
            "response cache {}: compacted to {} entries ({} KiB)",
            path.display(),
            lines.len(),
            total / 1024
        );
        Ok(())
    }
}

/// The entries of a [`CacheInner`] in order of use, least recently used first (or last, from
/// the back).
struct UseOrder<'a> {
    inner: &'a CacheInner,
    front: usize,
    back: usize,
    /// Entries not yet yielded from either end.
    left: usize,
}

impl<'a> UseOrder<'a> {
    /// The next entry from the oldest end (`from_oldest`) or the newest, moving that end in.
    fn take(&mut self, from_oldest: bool) -> Option<&'a CacheEntry> {
        if self.left == 0 {
            return None;
        }
        let end = if from_oldest {
            &mut self.front
        } else {
            &mut self.back
        };
        let slot = self.inner.slot(*end)?;
        *end = if from_oldest { slot.newer } else { slot.older };
        self.left -= 1;
        Some(&slot.entry)
    }
}

impl<'a> Iterator for UseOrder<'a> {
    type Item = &'a CacheEntry;

    fn next(&mut self) -> Option<Self::Item> {
        self.take(true)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.left))
    }
}

impl DoubleEndedIterator for UseOrder<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.take(false)
    }
}

/// What a [`ResponseCache`] holds and has dropped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Entries in memory.
    pub entries: usize,
    /// Their approximate size (`CacheEntry::approx_bytes`).
    pub memory_bytes: usize,
    /// The file's size (0 without a file).
    pub file_bytes: u64,
    /// Entries dropped from memory to stay within [`CacheLimits::memory_bytes`].
    pub evicted: u64,
    /// Times the file was compacted to stay within [`CacheLimits::file_bytes`].
    pub compactions: u64,
}

/// An in-memory map from [`CacheKey`] to answer, optionally persisted as JSON lines, both
/// bounded by [`CacheLimits`] (see the module docs).
pub struct ResponseCache {
    inner: Mutex<CacheInner>,
}

impl fmt::Debug for ResponseCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inner = self.lock();
        f.debug_struct("ResponseCache")
            .field("entries", &inner.len())
            .field("path", &inner.path)
            .finish()
    }
}

impl Default for ResponseCache {
    fn default() -> Self {
        Self::in_memory()
    }
}

impl ResponseCache {
    /// An empty cache that is never written to disk, with the default limits.
    pub fn in_memory() -> Self {
        Self::in_memory_with_limits(CacheLimits::default())
    }

    /// An empty cache that is never written to disk.
    pub(crate) fn in_memory_with_limits(limits: CacheLimits) -> Self {
        Self {
            inner: Mutex::new(CacheInner::new(limits)),
        }
    }

    /// Loads the cache file at `path` into a memory-only cache (the file must exist and is
    /// never written).
    pub fn load(path: impl AsRef<Path>) -> Result<(Self, CacheLoadReport), CacheError> {
        let path = path.as_ref();
        let file = File::open(path).map_err(|source| CacheError::Io {
            path: path.to_owned(),
            source,
        })?;
        let (entries, report) = read_entries(file, path)?;
        // A recording is replayed whole: memory is not limited.
        let mut inner = CacheInner::new(CacheLimits {
            memory_bytes: usize::MAX,
            file_bytes: u64::MAX,
        });
        for entry in entries {
            inner.put(entry);
        }
        let cache = Self {
            inner: Mutex::new(inner),
        };
        Ok((cache, report))
    }

    /// Loads the cache file at `path` (creating it if absent) and appends new entries to it,
    /// with the default limits.
    pub fn open(path: impl AsRef<Path>) -> Result<(Self, CacheLoadReport), CacheError> {
        Self::open_with_limits(path, CacheLimits::default())
    }

    /// Loads the cache file at `path` (creating it if absent) and appends new entries to it.
    /// A file already past `limits.file_bytes` is compacted at once.
    pub(crate) fn open_with_limits(
        path: impl AsRef<Path>,
        limits: CacheLimits,
    ) -> Result<(Self, CacheLoadReport), CacheError> {
        let path = path.as_ref().to_path_buf();
        let io_err = |source| CacheError::Io {
            path: path.clone(),
            source,
        };
        let (entries, report) = match File::open(&path) {
            Ok(file) => read_entries(file, &path)?,
            Err(err) if err.kind() == io::ErrorKind::NotFound => Default::default(),
            Err(err) => return Err(io_err(err)),
        };
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(io_err)?;
        }
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .read(true)
            .open(&path)
            .map_err(io_err)?;
        if !ends_with_newline(&mut file).map_err(io_err)? {
            // A torn last line would glue itself to the next entry; start on a fresh line.
            file.write_all(b"\n").map_err(io_err)?;
        }
        let file_bytes = file.metadata().map_err(io_err)?.len();
        let mut inner = CacheInner::new(limits);
        for entry in entries {
            inner.put(entry);
        }
        inner.file = Some(file);
        inner.file_bytes = file_bytes;
        inner.path = Some(path.clone());
        if file_bytes > limits.file_bytes {
            inner.compact().map_err(io_err)?;
        }
        let cache = Self {
            inner: Mutex::new(inner),
        };
        Ok((cache, report))
    }

    fn lock(&self) -> MutexGuard<'_, CacheInner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The answer stored under `key` (a rejected one too: see [`ResponseCache::entry`]).
    pub fn get(&self, key: &CacheKey) -> Option<CachedAnswer> {
        self.lock().touch(key).map(|entry| entry.answer.clone())
    }

    /// The whole entry stored under `key`, marking it as just used.
    pub fn entry(&self, key: &CacheKey) -> Option<CacheEntry> {
        self.lock().touch(key).cloned()
    }

    /// The chat answer stored under `key`, marking it as just used: only what a hit hands
    /// back (not the entry's model and kind). A rejected answer only when `rejected_too`.
    pub(crate) fn chat_answer(&self, key: &CacheKey, rejected_too: bool) -> Option<ChatResponse> {
        let mut inner = self.lock();
        let entry = inner.touch(key)?;
        match &entry.answer {
            CachedAnswer::Chat(response) if !entry.rejected || rejected_too => {
                Some(response.clone())
            }
            _ => None,
        }
    }

    /// Stores an entry (replacing any previous one) and appends it to the file, if any.
    ///
    /// The entry stays in memory even when the write fails.
    pub fn insert(&self, entry: CacheEntry) -> Result<(), CacheError> {
        let mut inner = self.lock();
        // Only a cache with a file needs the entry as a line: a memory-only cache (tests,
        // benches, a config without a cache path) skips the serialisation: an embedding is
        // hundreds of numbers.
        let line = inner.file.is_some().then(|| serde_json::to_string(&entry));
        inner.put(entry);
        let Some(line) = line else {
            return Ok(());
        };
        let path = inner.path.clone().unwrap_or_default();
        let io_err = |source| CacheError::Io {
            path: path.clone(),
            source,
        };
        let mut line = line.map_err(|e| io_err(e.into()))?;
        line.push('\n');
        inner.append(&line).map_err(io_err)
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether the cache is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The backing file, if any.
    pub fn path(&self) -> Option<PathBuf> {
        self.lock().path.clone()
    }

    /// Every entry, least recently used first.
    pub fn entries(&self) -> Vec<CacheEntry> {
        let inner = self.lock();
        inner.by_recency().cloned().collect()
    }

    /// The limits.
    pub fn limits(&self) -> CacheLimits {
        self.lock().limits
    }

    /// Sizes and what was dropped so far.
    pub fn stats(&self) -> CacheStats {
        let inner = self.lock();
        CacheStats {
            entries: inner.len(),
            memory_bytes: inner.memory_bytes,
            file_bytes: inner.file_bytes,
            evicted: inner.evicted,
            compactions: inner.compactions,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::TokenUsage;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn key_depends_on_every_parameter() {
        let base = ChatRequest::new("k", "hello");
        let key = chat_cache_key("m", &base);
        assert_eq!(key, chat_cache_key("m", &base.clone()));
        let variants = [
            chat_cache_key("other", &base),
            chat_cache_key("m", &ChatRequest::new("k2", "hello")),
            chat_cache_key("m", &ChatRequest::new("k", "hello!")),
            chat_cache_key("m", &base.clone().with_max_tokens(7)),
            chat_cache_key("m", &base.clone().with_temperature(0.0)),
            chat_cache_key("m", &base.clone().with_stop(["\n"])),
            chat_cache_key(
                "m",
                &base
                    .clone()
                    .with_json_schema(serde_json::json!({"type": "object"})),
            ),
            chat_cache_key(
                "m",
                &ChatRequest {
                    seed: Some(1),
                    ..base.clone()
                },
            ),
            chat_cache_key(
                "m",
                &ChatRequest {
                    top_p: 0.9,
                    ..base.clone()
                },
            ),
        ];
        for (i, variant) in variants.iter().enumerate() {
            assert_ne!(*variant, key, "variant {i} must change the key");
        }
    }

    #[test]
    fn field_boundaries_matter() {
        let a = ChatRequest {
            messages: vec![ChatMessage::user("ab"), ChatMessage::user("c")],
            ..ChatRequest::new("k", "")
        };
        let b = ChatRequest {
            messages: vec![ChatMessage::user("a"), ChatMessage::user("bc")],
            ..ChatRequest::new("k", "")
        };
        assert_ne!(chat_cache_key("m", &a), chat_cache_key("m", &b));
    }

    #[test]
    fn schema_key_order_does_not_matter() {
        let mut one = serde_json::Map::new();
        one.insert("a".into(), 1.into());
        one.insert("b".into(), 2.into());
        let mut two = serde_json::Map::new();
        two.insert("b".into(), 2.into());
        two.insert("a".into(), 1.into());
        let r1 = ChatRequest::new("k", "p").with_json_schema(one.into());
        let r2 = ChatRequest::new("k", "p").with_json_schema(two.into());
        assert_eq!(chat_cache_key("m", &r1), chat_cache_key("m", &r2));
    }

    /// The schema hashed as before maps in order were hashed as they are: always a sorted copy.
    fn json_by_sorted_copy(h: &mut KeyHasher, value: &serde_json::Value) {
        use serde_json::Value;
        match value {
            Value::Array(items) => {
                h.str("arr");
                h.u64(items.len() as u64);
                for item in items {
                    json_by_sorted_copy(h, item);
                }
            }
            Value::Object(map) => {
                h.str("obj");
                let mut entries: Vec<_> = map.iter().collect();
                entries.sort_by(|a, b| a.0.cmp(b.0));
                h.u64(entries.len() as u64);
                for (key, item) in entries {
                    h.str(key);
                    json_by_sorted_copy(h, item);
                }
            }
            other => h.json(other),
        }
    }

    #[test]
    fn schemas_hash_as_their_sorted_copies_did() {
        let schemas = [
            serde_json::json!({}),
            serde_json::json!({"type": "object", "properties": {"z": {"type": "integer",
                "minimum": 1, "maximum": 10}, "a": {"type": "array", "items": {"type": "string"}}},
                "required": ["z", "a"], "additionalProperties": false}),
            serde_json::json!([{"b": 1, "a": [null, true, 2.5, "x"]}, {"": {"": {}}}]),
        ];
        for schema in schemas {
            let mut new = KeyHasher::new("t");
            new.json(&schema);
            let mut old = KeyHasher::new("t");
            json_by_sorted_copy(&mut old, &schema);
            assert_eq!(new.finish(), old.finish(), "{schema}");
        }
    }

    #[test]
    fn key_hex_round_trip() {
        let key = embedding_cache_key("e", "text");
        let hex = key.to_string();
        assert_eq!(hex.len(), 64);
        assert_eq!(hex.parse::<CacheKey>(), Ok(key));
        assert!("zz".parse::<CacheKey>().is_err());
        assert!("g".repeat(64).parse::<CacheKey>().is_err());
    }

    #[test]
    fn persists_and_reloads_skipping_torn_lines() {
        let dir = std::env::temp_dir().join(format!("bga-cache-test-{}", std::process::id()));
        let path = dir.join("cache.jsonl");
        let _ = std::fs::remove_file(&path);
        let key = chat_cache_key("m", &ChatRequest::new("k", "p"));
        let response = ChatResponse {
            text: "answer".into(),
            usage: TokenUsage {
                prompt_tokens: 1,
                completion_tokens: 2,
                reused_prompt_tokens: 0,
            },
        };
        {
            let (cache, report) = ResponseCache::open(&path).expect("open");
            assert_eq!(report, CacheLoadReport::default());
            cache
                .insert(CacheEntry {
                    key,
                    model: "m".into(),
                    kind: "k".into(),
                    answer: CachedAnswer::Chat(response.clone()),
                    rejected: false,
                })
                .expect("insert");
        }
        // Simulate a crash mid-write.
        let mut file = OpenOptions::new().append(true).open(&path).expect("append");
        file.write_all(b"{\"key\": \"ab").expect("write");
        drop(file);

        let (cache, report) = ResponseCache::open(&path).expect("reopen");
        assert_eq!(
            report,
            CacheLoadReport {
                loaded: 1,
                skipped: 1
            }
        );
        assert_eq!(cache.get(&key), Some(CachedAnswer::Chat(response)));
        let key2 = embedding_cache_key("e", "x");
        cache
            .insert(CacheEntry {
                key: key2,
                model: "e".into(),
                kind: "embed".into(),
                answer: CachedAnswer::Embedding(vec![1.0]),
                rejected: false,
            })
            .expect("insert");
        drop(cache);
        let (cache, report) = ResponseCache::open(&path).expect("reopen again");
        assert_eq!(
            report,
            CacheLoadReport {
                loaded: 2,
                skipped: 1
            }
        );
        assert_eq!(cache.get(&key2), Some(CachedAnswer::Embedding(vec![1.0])));
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn chat_entry(i: usize, text: &str) -> CacheEntry {
        CacheEntry {
            key: chat_cache_key("m", &ChatRequest::new("k", format!("prompt {i}"))),
            model: "m".into(),
            kind: "k".into(),
            answer: CachedAnswer::Chat(ChatResponse {
                text: text.into(),
                usage: TokenUsage::default(),
            }),
            rejected: false,
        }
    }

    fn temp_path(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("bga-cache-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir.join("cache.jsonl")
    }

    #[test]
    fn memory_keeps_the_most_recently_used_entries_within_its_limit() {
        let entry_bytes = chat_entry(0, &"x".repeat(1000)).approx_bytes();
        let limits = CacheLimits {
            memory_bytes: entry_bytes * 10,
            file_bytes: u64::MAX,
        };
        let cache = ResponseCache::in_memory_with_limits(limits);
        for i in 0..10 {
            cache
                .insert(chat_entry(i, &"x".repeat(1000)))
                .expect("insert");
        }
        assert_eq!(cache.len(), 10);
        // Reading entry 0 makes it the most recently used: entry 1 leaves first.
        assert!(cache.get(&chat_entry(0, "").key).is_some());
        for i in 10..15 {
            cache
                .insert(chat_entry(i, &"x".repeat(1000)))
                .expect("insert");
        }
        let stats = cache.stats();
        assert_eq!((stats.entries, stats.evicted), (10, 5));
        assert!(stats.memory_bytes <= limits.memory_bytes, "{stats:?}");
        assert!(
            cache.get(&chat_entry(0, "").key).is_some(),
            "the read entry stayed"
        );
        for gone in 1..6 {
            assert!(
                cache.get(&chat_entry(gone, "").key).is_none(),
                "{gone} stayed"
            );
        }
        for kept in 6..15 {
            assert!(
                cache.get(&chat_entry(kept, "").key).is_some(),
                "{kept} left"
            );
        }
        // One entry bigger than the whole limit still replaces the rest (the newest is kept).
        cache
            .insert(chat_entry(99, &"y".repeat(20_000)))
            .expect("insert");
        assert_eq!(cache.len(), 1);
    }

    /// The cache against the plainest LRU there is (a list in order of use) over a long run of
    /// random stores, replacements and lookups, some of them misses, with entries of uneven
    /// sizes: the same entries, in the same order, after every step, and the same evictions.
    #[test]
    fn the_use_list_is_a_least_recently_used_order_through_any_mix_of_uses() {
        let unit = chat_entry(0, "").approx_bytes();
        let limits = CacheLimits {
            memory_bytes: unit * 12,
            file_bytes: u64::MAX,
        };
        let cache = ResponseCache::in_memory_with_limits(limits);
        // (key number, bytes), least recently used first.
        let mut model: Vec<(usize, usize)> = Vec::new();
        let mut evicted = 0u64;
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        for step in 0..6_000 {
            let i = rng.random_range(0..40);
            if rng.random_bool(0.4) {
                let entry = chat_entry(i, &"x".repeat(rng.random_range(0..unit * 2)));
                let bytes = entry.approx_bytes();
                cache.insert(entry).expect("insert");
                model.retain(|&(k, _)| k != i);
                model.push((i, bytes));
                while model.iter().map(|&(_, b)| b).sum::<usize>() > limits.memory_bytes
                    && model.len() > 1
                {
                    model.remove(0);
                    evicted += 1;
                }
            } else {
                let hit = cache.get(&chat_entry(i, "").key).is_some();
                let at = model.iter().position(|&(k, _)| k == i);
                assert_eq!(hit, at.is_some(), "step {step}: lookup of {i}");
                if let Some(at) = at {
                    let used = model.remove(at);
                    model.push(used);
                }
            }
            let keys: Vec<CacheKey> = cache.entries().iter().map(|entry| entry.key).collect();
            let expected: Vec<CacheKey> =
                model.iter().map(|&(k, _)| chat_entry(k, "").key).collect();
            assert_eq!(keys, expected, "step {step}");
            let stats = cache.stats();
            assert_eq!(stats.evicted, evicted, "step {step}");
            assert_eq!(
                stats.memory_bytes,
                model.iter().map(|&(_, b)| b).sum::<usize>(),
                "step {step}"
            );
        }
        let inner = cache.lock();
        let newest_first: Vec<CacheKey> = inner.by_recency().rev().map(|e| e.key).collect();
        let mut oldest_first = newest_first.clone();
        oldest_first.reverse();
        assert_eq!(
            oldest_first,
            inner.by_recency().map(|e| e.key).collect::<Vec<_>>()
        );
        assert!(inner.slots.len() <= 40, "{} slots", inner.slots.len());
    }

    #[test]
    fn many_hits_keep_the_use_list_bounded_and_the_order_of_use() {
        let entry_bytes = chat_entry(0, "x").approx_bytes();
        let limits = CacheLimits {
            memory_bytes: entry_bytes * 3,
            file_bytes: u64::MAX,
        };
        let cache = ResponseCache::in_memory_with_limits(limits);
        for i in 0..3 {
            cache.insert(chat_entry(i, "x")).expect("insert");
        }
        for _ in 0..10_000 {
            assert!(cache.get(&chat_entry(1, "").key).is_some());
            assert!(cache.get(&chat_entry(0, "").key).is_some());
        }
        {
            // Nothing piles up per hit: the slab holds one slot per entry ever live at once.
            let inner = cache.lock();
            assert_eq!(inner.slots.len(), 3, "slots");
            assert_eq!(inner.by_recency().count(), 3);
            assert_eq!(inner.by_recency().rev().count(), 3);
        }
        let order = |cache: &ResponseCache| -> Vec<CacheKey> {
            cache.entries().iter().map(|entry| entry.key).collect()
        };
        let key = |i| chat_entry(i, "").key;
        assert_eq!(order(&cache), vec![key(2), key(1), key(0)]);
        // Entry 2 was used least recently: a new entry evicts it, and only it.
        cache.insert(chat_entry(3, "x")).expect("insert");
        assert_eq!(order(&cache), vec![key(1), key(0), key(3)]);
        assert_eq!(cache.stats().evicted, 1);
    }

    #[test]
    fn the_file_is_compacted_to_its_limit_keeping_recent_entries() {
        let path = temp_path("compact");
        let line_bytes = serde_json::to_string(&chat_entry(0, &"x".repeat(500)))
            .expect("json")
            .len() as u64
            + 1;
        let limits = CacheLimits {
            memory_bytes: usize::MAX,
            file_bytes: line_bytes * 20,
        };
        {
            let (cache, _) = ResponseCache::open_with_limits(&path, limits).expect("open");
            for i in 0..200 {
                cache
                    .insert(chat_entry(i, &"x".repeat(500)))
                    .expect("insert");
                let on_disk = std::fs::metadata(&path).expect("metadata").len();
                assert!(on_disk <= limits.file_bytes, "{on_disk} bytes after {i}");
            }
            assert!(cache.stats().compactions >= 10, "{:?}", cache.stats());
            assert_eq!(cache.len(), 200, "memory is limited separately");
        }
        let (cache, report) = ResponseCache::open_with_limits(&path, limits).expect("reopen");
        assert_eq!(report.skipped, 0);
        assert!(report.loaded >= 10, "{report:?}");
        // The newest entries survived; the oldest did not.
        assert!(cache.get(&chat_entry(199, "").key).is_some());
        assert!(cache.get(&chat_entry(0, "").key).is_none());
        // A file already past the limit (say, written with a larger one) is compacted on open.
        let small = CacheLimits {
            memory_bytes: usize::MAX,
            file_bytes: line_bytes * 4,
        };
        drop(cache);
        let (cache, _) = ResponseCache::open_with_limits(&path, small).expect("open small");
        assert!(std::fs::metadata(&path).expect("metadata").len() <= small.file_bytes);
        assert!(cache.get(&chat_entry(199, "").key).is_some());
        let _ = std::fs::remove_dir_all(path.parent().expect("dir"));
    }

    #[test]
    fn corrupt_lines_are_skipped_never_fatal() {
        let path = temp_path("corrupt");
        std::fs::create_dir_all(path.parent().expect("dir")).expect("dir");
        let good = serde_json::to_string(&chat_entry(1, "good")).expect("json");
        let mut bytes = Vec::new();
        for line in [
            &b"not json at all"[..],
            b"\xff\xfe\x00 invalid utf-8 \xc3\x28",
            b"{\"key\": \"zz\", \"model\": \"m\", \"kind\": \"k\", \"answer\": {\"chat\": {}}}",
            b"[1, 2, 3]",
            b"\x00\x00\x00",
            good.as_bytes(),
            b"{\"key\": ",
        ] {
            bytes.extend_from_slice(line);
            bytes.push(b'\n');
        }
        bytes.extend_from_slice(b"{\"torn\": ");
        std::fs::write(&path, &bytes).expect("write");

        let (cache, report) = ResponseCache::open(&path).expect("a corrupt file still opens");
        assert_eq!(
            report,
            CacheLoadReport {
                loaded: 1,
                skipped: 7
            }
        );
        assert_eq!(
            cache.get(&chat_entry(1, "").key),
            Some(CachedAnswer::Chat(ChatResponse {
                text: "good".into(),
                usage: TokenUsage::default(),
            }))
        );
        // New entries start on a fresh line and load back.
        cache.insert(chat_entry(2, "next")).expect("insert");
        drop(cache);
        let (cache, report) = ResponseCache::load(&path).expect("load");
        assert_eq!(
            report,
            CacheLoadReport {
                loaded: 2,
                skipped: 7
            }
        );
        assert!(cache.get(&chat_entry(2, "").key).is_some());
        let _ = std::fs::remove_dir_all(path.parent().expect("dir"));
    }

    #[test]
    fn a_rejected_flag_round_trips_and_is_omitted_when_false() {
        let mut entry = chat_entry(3, "garbage");
        let line = serde_json::to_string(&entry).expect("json");
        assert!(!line.contains("rejected"), "{line}");
        entry.rejected = true;
        let line = serde_json::to_string(&entry).expect("json");
        assert_eq!(
            serde_json::from_str::<CacheEntry>(&line).expect("parse"),
            entry
        );
    }
}
