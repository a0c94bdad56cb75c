//! The content-addressed response cache (SPEC §5 "Cache").
//!
//! A [`CacheKey`] is the SHA-256 of everything that determines an answer: the model, the
//! prompt kind, the messages and every sampling parameter (including the JSON schema). JSON
//! schemas are hashed in a canonical form (object keys sorted), so two equal schemas built in
//! a different key order share a key.
//!
//! The cache lives in memory and can persist to a JSON-lines file: [`ResponseCache::open`]
//! loads every entry (skipping, and counting, lines that do not parse — a crash can leave a
//! torn last line) and appends each new entry as one line. That file is what
//! `--record-cache`/`--replay-cache` read and write, and what [`ReplayBackend`](super::ReplayBackend)
//! answers from.

use std::collections::HashMap;
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CacheKey([u8; 32]);

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
                let mut entries: Vec<_> = map.iter().collect();
                entries.sort_by(|a, b| a.0.cmp(b.0));
                self.u64(entries.len() as u64);
                for (key, item) in entries {
                    self.str(key);
                    self.json(item);
                }
            }
        }
    }

    fn finish(self) -> CacheKey {
        CacheKey(self.0.finalize().into())
    }
}

/// The cache key of a chat request answered by `model`.
pub fn chat_cache_key(model: &str, request: &ChatRequest) -> CacheKey {
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
pub fn choice_cache_key(model: &str, request: &ChoiceRequest) -> CacheKey {
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
pub fn embedding_cache_key(embedding_model: &str, text: &str) -> CacheKey {
    let mut h = KeyHasher::new("embed");
    h.str(embedding_model);
    h.str(text);
    h.finish()
}

/// Reads JSON lines, skipping (and counting) the ones that do not parse.
fn read_entries(
    file: File,
    path: &Path,
) -> Result<(HashMap<CacheKey, CacheEntry>, CacheLoadReport), CacheError> {
    let mut entries = HashMap::new();
    let mut report = CacheLoadReport::default();
    for line in BufReader::new(file).lines() {
        let line = line.map_err(|source| CacheError::Io {
            path: path.to_owned(),
            source,
        })?;
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<CacheEntry>(&line) {
            Ok(entry) => {
                entries.insert(entry.key, entry);
                report.loaded += 1;
            }
            Err(_) => report.skipped += 1,
        }
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

struct CacheInner {
    entries: HashMap<CacheKey, CacheEntry>,
    file: Option<File>,
    path: Option<PathBuf>,
}

/// An in-memory map from [`CacheKey`] to answer, optionally persisted as JSON lines.
///
/// Memory grows with the number of distinct prompts (a few KB each); a run of many game days
/// with a real model stays in the tens of megabytes.
pub struct ResponseCache {
    inner: Mutex<CacheInner>,
}

impl fmt::Debug for ResponseCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inner = self.lock();
        f.debug_struct("ResponseCache")
            .field("entries", &inner.entries.len())
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
    /// An empty cache that is never written to disk.
    pub fn in_memory() -> Self {
        Self {
            inner: Mutex::new(CacheInner {
                entries: HashMap::new(),
                file: None,
                path: None,
            }),
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
        let cache = Self {
            inner: Mutex::new(CacheInner {
                entries,
                file: None,
                path: None,
            }),
        };
        Ok((cache, report))
    }

    /// Loads the cache file at `path` (creating it if absent) and appends new entries to it.
    pub fn open(path: impl AsRef<Path>) -> Result<(Self, CacheLoadReport), CacheError> {
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
        if report.skipped > 0 {
            bevy::log::warn!(
                "response cache {}: skipped {} unreadable line(s)",
                path.display(),
                report.skipped
            );
        }
        let cache = Self {
            inner: Mutex::new(CacheInner {
                entries,
                file: Some(file),
                path: Some(path),
            }),
        };
        Ok((cache, report))
    }

    fn lock(&self) -> MutexGuard<'_, CacheInner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The answer stored under `key`.
    pub fn get(&self, key: &CacheKey) -> Option<CachedAnswer> {
        self.lock()
            .entries
            .get(key)
            .map(|entry| entry.answer.clone())
    }

    /// The whole entry stored under `key`.
    pub fn entry(&self, key: &CacheKey) -> Option<CacheEntry> {
        self.lock().entries.get(key).cloned()
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
        inner.entries.insert(entry.key, entry);
        let CacheInner { file, path, .. } = &mut *inner;
        if let (Some(file), Some(path), Some(line)) = (file.as_mut(), path.as_ref(), line) {
            let mut line = line.map_err(|e| CacheError::Io {
                path: path.clone(),
                source: e.into(),
            })?;
            line.push('\n');
            // One write per entry keeps lines whole even if another process appends too.
            file.write_all(line.as_bytes())
                .map_err(|source| CacheError::Io {
                    path: path.clone(),
                    source,
                })?;
        }
        Ok(())
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        self.lock().entries.len()
    }

    /// Whether the cache is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The backing file, if any.
    pub fn path(&self) -> Option<PathBuf> {
        self.lock().path.clone()
    }

    /// Every entry, in no particular order.
    pub fn entries(&self) -> Vec<CacheEntry> {
        self.lock().entries.values().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::TokenUsage;

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
}
