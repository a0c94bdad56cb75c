//! The embedding store: one vector per distinct text, kept in large fixed chunks of rows for
//! fast relevance scans and cheap growth.
//!
//! # Layout and why
//!
//! Every vector is L2-normalised on insertion, so cosine similarity is a plain dot product (a
//! zero vector stays zero, so its cosine with anything is 0). Vectors live row after row in
//! **chunks** of [`CHUNK_ROWS`] rows: row `r` is row `r % CHUNK_ROWS` of chunk `r / CHUNK_ROWS`,
//! and a row never straddles two chunks, so it is always one contiguous slice. A chunk is
//! allocated once, at its full size, when the row before it fills the previous one, and is never
//! moved or copied afterwards. One growing `Vec` for the whole store would, at every doubling,
//! reallocate a multi-megabyte block (fresh pages faulted in plus a copy of every row so far);
//! with a thousand personas each adding memories that growth was most of the cost of storing
//! an embedding. Only the first chunk grows like a `Vec` (from a few rows up to [`CHUNK_ROWS`]),
//! so a persona with ten memories does not reserve hundreds of rows; its copies are bounded by
//! one chunk.
//!
//! A **small** store (below [`AUTO_QUANTIZE_MIN_ELEMENTS`] numbers, as every persona's is in a
//! town of days, not months) keeps no chunks: its rows are **shared** with every other store
//! holding the same vector (`shared`), one copy for the hundreds of personas who saw the same
//! event or heard the same line, and its scans read them row by row (a small store is
//! cache-sized anyway). The numbers are the ones a chunk holds; when the store grows large
//! enough for the quantised scans below it moves its rows into chunks of its own.
//!
//! Next to the exact rows each chunk keeps an **int8 copy** (each row scaled so its largest
//! component is ±127, with the scale kept per row). Scoring relevance for every memory is a
//! memory-bandwidth problem: 100,000 rows × 384 dims is 150 MB of `f32` per query, which
//! measured about 19 ms on the 2-core x86-64 development machine (SSE2 baseline), while the int8
//! copy (38 MB) scans in about 3 ms. The int8 pass is written so the compiler emits `pmulhw`
//! (the query is quantised to ±64 and pre-shifted; four products per 16-bit lane cannot
//! overflow) and it reads a row some 48 KiB ahead of the one it is scoring, which lets the DRAM
//! fetch overlap the arithmetic (without it the same kernel took about 6 ms). Its error is about
//! 0.002 in cosine, harmless once relevance is min–max normalised. Chunks are far larger than
//! that look-ahead (and than a page), so a scan still streams; the look-ahead follows row
//! numbers, reaching into the next chunk near the end of one.
//!
//! From [`PARALLEL_SCAN_MIN_ELEMENTS`] numbers on, the int8 scan is split into runs of rows
//! scored on up to [`MAX_SCAN_THREADS`] threads at once (the same numbers, bit for bit; a run
//! may cover several chunks): one core cannot pull memory as fast as two can, and a store that
//! large is a long-lived town's.
//!
//! [`RelevancePrecision::Auto`] uses the exact `f32` rows while the store is small (below
//! [`AUTO_QUANTIZE_MIN_ELEMENTS`] numbers, where the scan is cache-friendly anyway) and the
//! quantised copies above that. From that size on the store also keeps an **int4 copy** (two
//! numbers a byte, half the int8 copy's bytes), made for every row at once when the store
//! reaches it and row by row after: retrieval scans it for intervals proven to hold each exact
//! cosine and narrows the few that matter from the int8 copy and then the exact rows
//! ([`RelevanceProbe`]), ranking exactly as the `f32` scan does at half the int8 scan's reads.
//! It is kept apart from the chunks, in blocks of a scan thread's piece of rows, each read as
//! one contiguous stream (`CoarseBlock`). Its scan touches nothing ahead (see
//! `scan_coarse_rows`). Unpacking nibbles made the portable
//! int4 kernel bound by arithmetic rather than memory (two threads ran it twice as fast as one,
//! with the rows in the CPU's cache), so on x86-64 CPUs with AVX2 — found at run time — a kernel
//! built on `vpmaddubsw` sums the same integers about 3.5 times as fast (`avx2`).

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::hash::BuildHasher;
use std::sync::Arc;

use bevy::platform::collections::HashTable;
use bevy::platform::hash::FixedHasher;
use bevy::prelude::Reflect;

/// A map keyed by text with bevy's fixed (fast, deterministic) hasher.
/// Text → row, holding only the rows: the texts themselves live once, in the store's `keys`
/// (a map keyed by `String` kept every text twice, and a crowd forms hundreds of memories a
/// step). Each row's hash is kept, so growing the table never hashes a text again.
#[derive(Clone, Default)]
struct RowIndex {
    table: HashTable<u32>,
    hashes: Vec<u64>,
}

impl RowIndex {
    fn hash(text: &str) -> u64 {
        FixedHasher.hash_one(text)
    }

    /// The row of `text`, given every row's text.
    fn get(&self, text: &str, keys: &[String]) -> Option<u32> {
        self.table
            .find(Self::hash(text), |&row| {
                keys.get(row as usize).is_some_and(|key| key == text)
            })
            .copied()
    }

    /// Records `row` (the next one: `self.hashes.len()`) for `text`, which has no row yet.
    fn push(&mut self, text: &str, row: u32) {
        let hash = Self::hash(text);
        let hashes = &self.hashes;
        self.table.insert_unique(hash, row, |&r| {
            hashes.get(r as usize).copied().unwrap_or_default()
        });
        self.hashes.push(hash);
    }
}
use serde::{Deserialize, Serialize};

use super::MemoryError;

#[cfg(target_arch = "x86_64")]
mod avx2;
mod shared;

use shared::shared_row;

/// From this many stored numbers (rows × dim) on, [`RelevancePrecision::Auto`] scans the int8
/// copy: 2²⁰ (4 MiB of `f32`, about 2,700 rows of 384 dims).
pub(crate) const AUTO_QUANTIZE_MIN_ELEMENTS: usize = 1 << 20;

/// What the `f32` dot products and the estimate's scaling may lose to rounding, in cosine (the
/// exact scan sums 384 products in 16 lanes: about 40 roundings of 2⁻²⁴ each, 3·10⁻⁶ at most).
const BOUND_SLACK: f32 = 2e-5;

/// A focal point prepared for bounded retrieval: every row's cosine as an interval proven to
/// hold the exact value (bit for bit what [`RelevancePrecision::Exact`] gives), from the int4
/// copy, plus what narrows one row's interval on demand — its int8 interval
/// ([`EmbeddingStore::fine_interval`]), then its exact cosine
/// ([`EmbeddingStore::exact_relevance`]).
///
/// The int4 copy is half the int8 copy's bytes and has the fastest kernel, and its intervals
/// (about ±0.07 in cosine for 384 dimensions, against ±0.004 for int8) are narrow enough that
/// retrieval refines only a thousand or so rows of 100,000 further.
///
/// The bounds are Cauchy–Schwarz on the two quantisations: with `q̂` and `r̂` the query and row
/// a kernel multiplies, `|q·r − q̂·r̂| ≤ ‖q − q̂‖‖r‖ + ‖q̂‖‖r − r̂‖`; `‖r − r̂‖` is measured once
/// per row when it is stored, `‖q − q̂‖` once per query.
#[derive(Debug, Clone)]
pub(crate) struct RelevanceProbe {
    /// The focal point, normalised: what exact cosines are taken with.
    pub query: Vec<f32>,
    /// Per row, `[low, high]` from the int4 scan.
    pub coarse: Vec<[f32; 2]>,
    /// The query as the int8 kernel reads it; `None` for a zero query.
    fine: Option<QuantizedQuery>,
}

/// A query quantised for one of the integer kernels, with what its quantisation may lose.
#[derive(Debug, Clone)]
struct QuantizedQuery {
    /// What the kernel multiplies by.
    q: Vec<i16>,
    /// `query ≈ q · scale` (after the kernel's own shift).
    scale: f32,
    /// `‖q − q̂‖`, rounded up.
    term: f32,
    /// `‖q̂‖`, rounded up.
    norm: f32,
    /// What the kernel's raw sum is off by, taken off before scaling (see [`dot_coarse`]).
    offset: i32,
}

impl QuantizedQuery {
    /// `q` (with `scale`) as a kernel reads `query`, `unshift` undoing the kernel's own shift
    /// of its numbers, with the quantisation's error terms measured: `‖q − q̂‖` and `‖q̂‖`,
    /// rounded up, with `q̂ = unshift(q) · scale` the query the kernel multiplies.
    fn new(
        query: &[f32],
        q: Vec<i16>,
        scale: f32,
        unshift: impl Fn(i16) -> i16,
        offset: i32,
    ) -> Self {
        let (mut err2, mut norm2) = (0f64, 0f64);
        for (&v, &qi) in query.iter().zip(&q) {
            let approx = f64::from(unshift(qi)) * f64::from(scale);
            err2 += (f64::from(v) - approx).powi(2);
            norm2 += approx * approx;
        }
        let (term, norm) = (round_up(err2.sqrt() * (1.0 + 1e-5)), round_up(norm2.sqrt()));
        Self {
            q,
            scale,
            term,
            norm,
            offset,
        }
    }

    /// The most a row's exact cosine can differ from its estimate, given the row's
    /// quantisation error (plus the `f32` rounding of the exact dot product and the estimate).
    fn bound(&self, row_error: f32) -> f32 {
        (self.term + self.norm * row_error) * (1.0 + 1e-5) + BOUND_SLACK
    }
}

/// The int4 scan's query: as the portable kernel ([`dot_coarse`]) reads it and, on x86-64, as
/// the AVX2 kernel does (`avx2`; used when the CPU has it — the same sums either way).
#[derive(Debug, Clone)]
struct CoarseQuery {
    query: QuantizedQuery,
    #[cfg(target_arch = "x86_64")]
    blocks: Vec<avx2::QueryBlock>,
}

impl CoarseQuery {
    fn new(query: QuantizedQuery) -> Self {
        Self {
            #[cfg(target_arch = "x86_64")]
            blocks: avx2::query_blocks(&query.q),
            query,
        }
    }

    /// Each int4 row's integer dot product with the query (nibbles still biased; see
    /// [`dot_coarse`]), for `rows` of `row_bytes` bytes each, into `out`.
    fn dots(&self, rows: &[u8], row_bytes: usize, out: &mut [i32]) {
        #[cfg(target_arch = "x86_64")]
        if avx2::dots(rows, &self.blocks, out) {
            return;
        }
        for (packed, slot) in rows.chunks_exact(row_bytes).zip(out) {
            *slot = dot_coarse(packed, &self.query.q);
        }
    }
}

/// How [`EmbeddingStore::relevance`] computes cosines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Reflect, Serialize, Deserialize)]
pub enum RelevancePrecision {
    /// Exact below `AUTO_QUANTIZE_MIN_ELEMENTS`; above, the int8 scan with proven bounds, and
    /// retrieval rescores exactly the rows that could matter, so it ranks as `Exact` does.
    #[default]
    Auto,
    /// Always the exact `f32` rows.
    Exact,
    /// Always the int8 rows (cosine error about 0.002).
    Quantized,
}

/// From this many int8 numbers on (2²³, about 21,800 rows of 384 dims) the quantised scan is
/// split over up to [`MAX_SCAN_THREADS`] threads: one core cannot pull memory as fast as two
/// can, and below this size starting a thread (tens of microseconds) is not worth it.
pub(crate) const PARALLEL_SCAN_MIN_ELEMENTS: usize = 1 << 23;
/// Most threads one relevance scan uses (memory bandwidth stops growing after a few cores).
pub(crate) const MAX_SCAN_THREADS: usize = 4;
/// Rows a scan thread takes at a time (see `EmbeddingStore::split_scan`): 768 KiB of the int4
/// copy, 1.5 MiB of int8 — a few dozen pieces for a store large enough to be split at all.
const SCAN_PIECE_ROWS: usize = 4096;

/// Threads a quantised scan over `elements` numbers uses (see [`PARALLEL_SCAN_MIN_ELEMENTS`]).
fn scan_threads(elements: usize) -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    if elements < PARALLEL_SCAN_MIN_ELEMENTS {
        return 1;
    }
    let cores = *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    cores.clamp(1, MAX_SCAN_THREADS)
}

/// Rows per chunk of an [`EmbeddingStore`] (see the module docs).
///
/// 256 rows of 384 dimensions are 384 KiB of `f32` and 96 KiB of int8: a hundred pages and
/// several times the scans' look-ahead, so crossing into the next chunk (one lookup every 256
/// rows) costs nothing measurable and the scans keep streaming. Small enough that the unused
/// tail of a persona's last chunk is at most 255 rows, and those are only address space until a
/// row is written into them (the allocator hands out blocks this large as untouched pages).
/// A power of two, so finding a row's chunk is a shift.
pub(crate) const CHUNK_ROWS: usize = 256;
/// Rows the first chunk starts with; it doubles from there up to [`CHUNK_ROWS`].
const FIRST_CHUNK_ROWS: usize = 8;

/// How many shared rows ahead of the current one a small store's scan touches.
const SHARED_TOUCH_AHEAD_ROWS: usize = 4;
/// How far ahead of the current row the int8 scan touches memory, in bytes.
const TOUCH_AHEAD_BYTES: usize = 48 * 1024;
/// How many rows ahead of the current one the exact scan asks for.
const EXACT_AHEAD_ROWS: usize = 8;
/// One byte per cache line is enough to pull the line in.
const CACHE_LINE: usize = 64;
/// Largest magnitude of a stored int8 component.
const ROW_Q_MAX: f32 = 127.0;
/// Largest magnitude of a quantised query component: 4 × 127 × 64 fits an `i16` lane.
const QUERY_Q_MAX: f32 = 64.0;
/// Largest magnitude of a stored int4 component.
const COARSE_Q_MAX: f32 = 7.0;
/// Largest magnitude of a query component for the int4 kernel.
const COARSE_QUERY_Q_MAX: f32 = 127.0;
/// Numbers per block of the int4 copy (32 bytes; a row is padded to whole blocks).
const COARSE_BLOCK: usize = 64;
/// Blocks the int4 kernel sums in 16-bit lanes before widening (see [`dot_coarse`]).
const COARSE_GROUP: usize = 4;
/// What a stored int4 value is offset by, so the kernel reads unsigned nibbles.
const COARSE_BIAS: i8 = 8;
/// 16-bit lanes of the int8 kernel.
const LANES: usize = 16;
/// Elements accumulated in 16-bit lanes before widening: 4 products per lane.
const BLOCK: usize = 64;

/// Text → embedding vector, one row per distinct text (SPEC §2: the same text reuses its
/// vector). The dimension is fixed per store; the model name is recorded with it.
///
/// Two stores are equal when they hold the same model, dimension and text → vector map; the
/// internal row order is not compared (loading a save orders rows by text).
#[derive(Clone, Default)]
pub struct EmbeddingStore {
    model: String,
    /// 0 until the first vector fixes it (for stores made with `Default`).
    dim: usize,
    /// Text → row (foldhash: texts are looked up for every memory a persona forms).
    index: RowIndex,
    keys: Vec<String>,
    /// Row `r` is row `r % CHUNK_ROWS` of chunk `r / CHUNK_ROWS`; every chunk but the last holds
    /// exactly [`CHUNK_ROWS`] rows.
    chunks: Vec<Chunk>,
    /// A small store's rows (while `chunks` is empty): shared with every other store holding
    /// the same vector (see `shared`). The store moves them into chunks when it grows large
    /// enough for the int8 and int4 scans, whose speed comes from rows laid out one after
    /// another.
    small: Vec<Arc<[f32]>>,
    /// Never share rows: every row goes into chunks from the first (tests of the chunks).
    chunked_only: bool,
    /// Whether every row has its int4 copy: from the row that makes the store large enough
    /// for [`RelevancePrecision::Auto`] to bound retrieval with it on (small stores, such as a
    /// crowd's thousand personas each have, never pay for it).
    coarse_ready: bool,
    /// The int4 copy: row `r` is row `r % COARSE_BLOCK_ROWS` of block `r / COARSE_BLOCK_ROWS`
    /// (see [`CoarseBlock`]).
    coarse: Vec<CoarseBlock>,
}

/// Rows per block of the int4 copy: a scan thread's piece, so each piece reads one block.
const COARSE_BLOCK_ROWS: usize = SCAN_PIECE_ROWS;

/// The int4 copy of up to [`COARSE_BLOCK_ROWS`] consecutive rows, each column one allocation
/// made at its full size when the block is started.
///
/// The int4 scan is bound by memory, and it streams only where the memory it reads is
/// contiguous: kept with each chunk's other copies (a 48 KiB run of rows, then a kilobyte of
/// scales and one of errors, each somewhere else) the hardware prefetcher started over every
/// run and the scales' and errors' loads waited on memory, and the scan took half as long again
/// as over blocks of [`COARSE_BLOCK_ROWS`] rows (768 KiB at 384 dimensions).
#[derive(Clone, Default)]
struct CoarseBlock {
    /// Row-major, [`coarse_row_bytes`] bytes per row (see [`quantize_coarse_row`]).
    packed: Vec<u8>,
    /// Per row: `vector ≈ packed row · scale`.
    scales: Vec<f32>,
    /// Per row: an upper bound of `‖vector − packed row · scale‖₂`, what
    /// [`EmbeddingStore::probe`] proves its intervals with.
    errors: Vec<f32>,
}

impl CoarseBlock {
    /// An empty block with room for [`COARSE_BLOCK_ROWS`] rows of `dim` numbers.
    fn new(dim: usize) -> Self {
        Self {
            packed: Vec::with_capacity(COARSE_BLOCK_ROWS * coarse_row_bytes(dim)),
            scales: Vec::with_capacity(COARSE_BLOCK_ROWS),
            errors: Vec::with_capacity(COARSE_BLOCK_ROWS),
        }
    }

    fn rows(&self) -> usize {
        self.scales.len()
    }

    /// Appends the int4 copy of `vector` (normalised).
    fn push(&mut self, vector: &[f32]) {
        let bytes = coarse_row_bytes(vector.len());
        // Only a clone's last block (its columns cut to their length) grows: to its full size,
        // once.
        if self.packed.capacity() - self.packed.len() < bytes {
            let rows = COARSE_BLOCK_ROWS.max(self.rows() + 1);
            self.packed.reserve_exact(rows * bytes - self.packed.len());
            self.scales.reserve_exact(rows - self.scales.len());
            self.errors.reserve_exact(rows - self.errors.len());
        }
        let start = self.packed.len();
        let scale = quantize_coarse_row(vector, &mut self.packed);
        let error = self.packed.get(start..).map_or(f32::INFINITY, |packed| {
            let values = (0..vector.len()).map(|i| coarse_value(packed, i));
            quantization_error(vector, values, scale)
        });
        self.scales.push(scale);
        self.errors.push(error);
    }
}

/// Up to [`CHUNK_ROWS`] consecutive rows of a store.
#[derive(Clone, Default)]
struct Chunk {
    /// Row-major, L2-normalised.
    vectors: Vec<f32>,
    /// Row-major int8 copy of `vectors`.
    quantized: Vec<i8>,
    /// Per row `[scale, error]`: `vectors[r] ≈ quantized[r] · scale`, and an upper bound of
    /// `‖vectors[r] − quantized[r] · scale‖₂`, what [`EmbeddingStore::fine_interval`] proves its
    /// intervals with. One array, so a row refined on its own reads one line for both.
    parts: Vec<[f32; 2]>,
}

impl Chunk {
    /// An empty chunk with room for `rows` rows of `dim` numbers.
    fn with_rows(rows: usize, dim: usize) -> Self {
        Self {
            vectors: Vec::with_capacity(rows * dim),
            quantized: Vec::with_capacity(rows * dim),
            parts: Vec::with_capacity(rows),
        }
    }

    fn rows(&self) -> usize {
        self.parts.len()
    }

    /// Makes room for one more row. Only a chunk made smaller than [`CHUNK_ROWS`] (the first
    /// one, or a clone's, whose `Vec`s are cut to their length) ever grows here: it doubles, up
    /// to [`CHUNK_ROWS`] rows, like a `Vec` would.
    fn reserve_row(&mut self, dim: usize) {
        let fits = self.vectors.capacity() - self.vectors.len() >= dim
            && self.quantized.capacity() - self.quantized.len() >= dim
            && self.parts.capacity() > self.parts.len();
        if fits {
            return;
        }
        let rows = self.rows();
        let extra = (rows * 2).clamp(FIRST_CHUNK_ROWS, CHUNK_ROWS).max(rows + 1) - rows;
        self.vectors.reserve_exact(extra * dim);
        self.quantized.reserve_exact(extra * dim);
        self.parts.reserve_exact(extra);
    }
}

impl PartialEq for EmbeddingStore {
    fn eq(&self, other: &Self) -> bool {
        self.model == other.model
            && self.dim == other.dim
            && self.len() == other.len()
            && self
                .iter()
                .all(|(key, vector)| other.get(key) == Some(vector))
    }
}

impl fmt::Debug for EmbeddingStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EmbeddingStore")
            .field("model", &self.model)
            .field("dim", &self.dim)
            .field("rows", &self.keys.len())
            .field("shared_rows", &self.small.len())
            .finish_non_exhaustive()
    }
}

impl EmbeddingStore {
    /// An empty store for `model`'s `dim`-dimensional vectors. `dim = 0` lets the first vector
    /// fix the dimension.
    pub fn new(model: impl Into<String>, dim: usize) -> Self {
        Self {
            model: model.into(),
            dim,
            ..Self::default()
        }
    }

    /// [`Self::new`], but keeping every row in chunks of its own from the first (no shared
    /// rows; for the tests of the chunks).
    #[cfg(test)]
    fn chunked(model: impl Into<String>, dim: usize) -> Self {
        Self {
            chunked_only: true,
            ..Self::new(model, dim)
        }
    }

    /// The embedding model's name ("" when unknown).
    pub fn model(&self) -> &str {
        &self.model
    }

    /// The dimension (0 while not yet fixed).
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Number of stored vectors.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether no vector is stored.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Whether `text` has a vector.
    pub fn contains(&self, text: &str) -> bool {
        self.index.get(text, &self.keys).is_some()
    }

    /// The row of `text`.
    pub fn row(&self, text: &str) -> Option<usize> {
        self.index.get(text, &self.keys).map(|r| r as usize)
    }

    /// The (normalised) vector of `text`.
    pub fn get(&self, text: &str) -> Option<&[f32]> {
        self.row(text).and_then(|r| self.vector(r))
    }

    /// The (normalised) vector of a row.
    pub fn vector(&self, row: usize) -> Option<&[f32]> {
        if let Some(shared) = self.small.get(row) {
            return Some(shared);
        }
        let start = (row % CHUNK_ROWS) * self.dim;
        self.chunks
            .get(row / CHUNK_ROWS)?
            .vectors
            .get(start..start + self.dim)
    }

    /// The int8 copy of a row.
    fn quantized_row(&self, row: usize) -> Option<&[i8]> {
        let start = (row % CHUNK_ROWS) * self.dim;
        self.chunks
            .get(row / CHUNK_ROWS)?
            .quantized
            .get(start..start + self.dim)
    }

    /// A row's int8 copy with its scale and error bound: a chunk's, or for a shared row made
    /// now, as a chunk would have made it (a small store's scans read the `f32` rows; only an
    /// explicit [`RelevancePrecision::Quantized`] asks it for int8 numbers).
    fn quantized_parts(&self, row: usize) -> Option<(Cow<'_, [i8]>, f32, f32)> {
        if let Some(shared) = self.small.get(row) {
            let mut quantized = Vec::with_capacity(shared.len());
            let (scale, error) = quantize_row_bounded(shared, &mut quantized);
            return Some((Cow::Owned(quantized), scale, error));
        }
        let chunk = self.chunks.get(row / CHUNK_ROWS)?;
        let offset = row % CHUNK_ROWS;
        Some((
            Cow::Borrowed(self.quantized_row(row)?),
            chunk.parts.get(offset).map_or(0.0, |&[scale, _]| scale),
            chunk
                .parts
                .get(offset)
                .map_or(f32::INFINITY, |&[_, error]| error),
        ))
    }

    /// Moves a small store's shared rows into chunks of its own (it has grown large enough for
    /// the quantised scans; see `small`). The numbers are the ones it would have computed.
    fn unshare(&mut self) {
        let dim = self.dim;
        for row in std::mem::take(&mut self.small) {
            let chunk = match self.chunks.last_mut() {
                Some(last) if last.rows() < CHUNK_ROWS => last,
                _ => self.chunks.push_mut(Chunk::with_rows(CHUNK_ROWS, dim)),
            };
            chunk.vectors.extend_from_slice(&row);
            let (scale, error) = quantize_row_bounded(&row, &mut chunk.quantized);
            chunk.parts.push([scale, error]);
        }
    }

    /// Numbers stored (rows × dim), the size [`AUTO_QUANTIZE_MIN_ELEMENTS`] and
    /// [`PARALLEL_SCAN_MIN_ELEMENTS`] are measured in.
    /// Gives every row its int4 copy (once, when the store grows large enough; see
    /// `coarse_ready`).
    fn build_coarse(&mut self) {
        while self.coarse_rows() < self.len() {
            if !self.push_coarse() {
                break;
            }
        }
        self.coarse_ready = true;
    }

    /// Rows with their int4 copy.
    fn coarse_rows(&self) -> usize {
        self.coarse.last().map_or(0, |last| {
            (self.coarse.len() - 1) * COARSE_BLOCK_ROWS + last.rows()
        })
    }

    /// Adds the int4 copy of the first row that has none yet; `false` when there is none (or
    /// the row is not in the chunks).
    fn push_coarse(&mut self) -> bool {
        let row = self.coarse_rows();
        let start = (row % CHUNK_ROWS) * self.dim;
        let Some(vector) = self
            .chunks
            .get(row / CHUNK_ROWS)
            .and_then(|chunk| chunk.vectors.get(start..start + self.dim))
        else {
            return false;
        };
        let block = match self.coarse.last_mut() {
            Some(last) if last.rows() < COARSE_BLOCK_ROWS => last,
            _ => self.coarse.push_mut(CoarseBlock::new(self.dim)),
        };
        block.push(vector);
        true
    }

    fn elements(&self) -> usize {
        self.len() * self.dim
    }

    /// The text of a row.
    pub fn key(&self, row: usize) -> Option<&str> {
        self.keys.get(row).map(String::as_str)
    }

    /// `(text, normalised vector)` in row order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &[f32])> {
        // Every key has its row (the store is built that way); the empty slice is a fail-safe.
        self.keys
            .iter()
            .enumerate()
            .map(|(row, key)| (key.as_str(), self.vector(row).unwrap_or_default()))
    }

    /// Checks that `vector` could be stored for `key`: the right dimension, not empty, finite.
    pub fn validate(&self, key: &str, vector: &[f32]) -> Result<(), MemoryError> {
        if vector.is_empty() {
            return Err(MemoryError::EmptyEmbedding {
                key: key.to_owned(),
            });
        }
        if self.dim != 0 && vector.len() != self.dim {
            return Err(MemoryError::DimensionMismatch {
                key: key.to_owned(),
                expected: self.dim,
                found: vector.len(),
            });
        }
        if !vector.iter().all(|v| v.is_finite()) {
            return Err(MemoryError::NonFiniteEmbedding {
                key: key.to_owned(),
            });
        }
        Ok(())
    }

    /// Stores `vector` (normalised) for `text` and returns its row. When `text` already has a
    /// vector, that row is returned and `vector` is ignored.
    pub fn insert(&mut self, text: &str, vector: &[f32]) -> Result<usize, MemoryError> {
        if let Some(row) = self.row(text) {
            return Ok(row);
        }
        self.validate(text, vector)?;
        let row = u32::try_from(self.keys.len()).map_err(|_| MemoryError::Full(self.keys.len()))?;
        if self.dim == 0 {
            self.dim = vector.len();
        }
        let dim = self.dim;
        if self.chunks.is_empty()
            && !self.chunked_only
            && (self.len() + 1).saturating_mul(dim) < AUTO_QUANTIZE_MIN_ELEMENTS
        {
            self.small.push(shared_row(&normalised(vector)));
            self.index.push(text, row);
            self.keys.push(text.to_owned());
            return Ok(row as usize);
        }
        if !self.small.is_empty() {
            self.unshare();
        }
        let chunk = match self.chunks.last_mut() {
            Some(last) if last.rows() < CHUNK_ROWS => last,
            // A full chunk is followed by one allocated at its final size, never to move.
            Some(_) => self.chunks.push_mut(Chunk::with_rows(CHUNK_ROWS, dim)),
            None => self
                .chunks
                .push_mut(Chunk::with_rows(FIRST_CHUNK_ROWS, dim)),
        };
        chunk.reserve_row(dim);
        let start = chunk.vectors.len();
        chunk.vectors.extend_from_slice(vector);
        let normalised = &mut chunk.vectors[start..];
        normalise(normalised);
        let (scale, error) = quantize_row_bounded(normalised, &mut chunk.quantized);
        chunk.parts.push([scale, error]);
        if self.coarse_ready {
            self.push_coarse();
        }
        self.index.push(text, row);
        self.keys.push(text.to_owned());
        if !self.coarse_ready && self.elements() >= AUTO_QUANTIZE_MIN_ELEMENTS {
            self.build_coarse();
        }
        Ok(row as usize)
    }

    /// Cosine similarity between `focal` and every row, in row order. An empty store gives an
    /// empty list whatever `focal` is; otherwise `focal` must have the store's dimension and be
    /// finite. A zero focal vector gives 0 everywhere.
    pub fn relevance(
        &self,
        focal: &[f32],
        precision: RelevancePrecision,
    ) -> Result<Vec<f32>, MemoryError> {
        self.relevance_where(focal, precision, None)
    }

    /// [`Self::relevance`] of the rows `wanted` marks (`wanted[r]`; every row when `None`),
    /// the others reading 0 — for a retrieval, whose candidates (events and thoughts not idle)
    /// read only some of the rows. The exact scan scores just those, each as
    /// [`Self::relevance`] scores it, so a wanted row's value is the same bit for bit; the int8
    /// scan streams every row anyway and is [`Self::relevance`]'s. Errors as
    /// [`Self::relevance`], whatever `wanted` marks.
    pub(crate) fn relevance_where(
        &self,
        focal: &[f32],
        precision: RelevancePrecision,
        wanted: Option<&[bool]>,
    ) -> Result<Vec<f32>, MemoryError> {
        if self.is_empty() {
            return Ok(Vec::new());
        }
        self.validate("<focal point>", focal)?;
        let mut query = focal.to_vec();
        normalise(&mut query);
        let quantize = self.scans_quantized(precision);
        let mut out = Vec::with_capacity(self.len());
        match wanted {
            _ if quantize => {
                self.scan_quantized(&query, &mut out, scan_threads(self.elements()));
            }
            Some(wanted) => self.scan_exact_where(&query, wanted, &mut out),
            None => self.scan_exact(&query, &mut out),
        }
        Ok(out)
    }

    /// Whether `precision` reads the int8 copy for a store of this size.
    pub(crate) fn scans_quantized(&self, precision: RelevancePrecision) -> bool {
        match precision {
            RelevancePrecision::Exact => false,
            RelevancePrecision::Quantized => true,
            RelevancePrecision::Auto => self.elements() >= AUTO_QUANTIZE_MIN_ELEMENTS,
        }
    }

    /// Relevance as proven intervals, for retrieval that must rank exactly as
    /// [`RelevancePrecision::Exact`] does while reading as little as it can (see
    /// [`RelevanceProbe`]): the int4 scan over every row, done here. `None` when the store is
    /// empty; errors as [`Self::relevance`]. The intervals are written into `coarse` (cleared
    /// first; a caller that keeps the buffer between probes saves allocating and faulting in
    /// a fresh one each time). `side` runs on this thread while other cores scan (see
    /// `split_scan`); it is not run when the store is empty or `focal` is an error.
    pub(crate) fn probe(
        &self,
        focal: &[f32],
        mut coarse: Vec<[f32; 2]>,
        side: impl FnOnce(),
    ) -> Result<Option<RelevanceProbe>, MemoryError> {
        if self.is_empty() {
            return Ok(None);
        }
        self.validate("<focal point>", focal)?;
        let mut query = focal.to_vec();
        normalise(&mut query);
        let (Some(fine), Some(coarse_query)) = (
            // The int8 kernel reads its query shifted up by 8 bits; the int4 kernel's raw sum
            // carries the nibbles' bias.
            quantize_query(&query)
                .map(|(q, scale)| QuantizedQuery::new(&query, q, scale, |v| v >> 8, 0)),
            quantize_coarse_query(&query).map(|(q, scale)| {
                let offset = coarse_query_offset(&q);
                CoarseQuery::new(QuantizedQuery::new(&query, q, scale, |v| v, offset))
            }),
        ) else {
            // A zero query: every cosine is exactly 0.
            coarse.clear();
            coarse.resize(self.len(), [0.0; 2]);
            side();
            return Ok(Some(RelevanceProbe {
                query,
                coarse,
                fine: None,
            }));
        };
        if !self.coarse_ready {
            // No int4 copy (a store too small for it): intervals every cosine lies in, so
            // retrieval refines what it must from the int8 copy. Correct, only slower.
            coarse.clear();
            coarse.resize(self.len(), [-2.0, 2.0]);
            side();
            return Ok(Some(RelevanceProbe {
                query,
                coarse,
                fine: Some(fine),
            }));
        }
        // The scan writes every slot (the buffer is reused as it is, with no pass to clear it).
        coarse.resize(self.len(), [-2.0, 2.0]);
        self.split_scan(
            &mut coarse,
            scan_threads(self.elements() / 2),
            side,
            |first, out| self.scan_coarse_rows(first, &coarse_query, out),
        );
        Ok(Some(RelevanceProbe {
            query,
            coarse,
            fine: Some(fine),
        }))
    }

    /// Asks for the memory [`Self::fine_interval`] (or, with `exact`, [`Self::exact_relevance`])
    /// reads for `row`, so that a batch of refinements has its cache misses in flight together.
    /// A hint only: it changes no result.
    pub(crate) fn prefetch(&self, row: usize, exact: bool) {
        if exact || !self.small.is_empty() {
            if let Some(vector) = self.vector(row) {
                prefetch_lines(vector);
            }
            return;
        }
        let chunk = self.chunks.get(row / CHUNK_ROWS);
        if let Some(values) = self.quantized_row(row) {
            prefetch_lines(values);
        }
        let offset = row % CHUNK_ROWS;
        if let Some(chunk) = chunk {
            prefetch_lines(chunk.parts.get(offset..=offset).unwrap_or_default());
        }
    }

    /// The int8 interval of `row`'s cosine with the probe's query (narrower than its int4
    /// interval; `[0, 0]` for a zero query or a row that does not exist).
    pub(crate) fn fine_interval(&self, probe: &RelevanceProbe, row: usize) -> [f32; 2] {
        let (Some(fine), Some((values, scale, error))) =
            (probe.fine.as_ref(), self.quantized_parts(row))
        else {
            return [0.0; 2];
        };
        let estimate = dot_quantized(&values, &fine.q) as f32 * (scale * fine.scale);
        let bound = fine.bound(error);
        [estimate - bound, estimate + bound]
    }

    /// The exact cosine of `row` with `query` (normalised), the very number
    /// [`RelevancePrecision::Exact`] gives; 0 for a row that does not exist.
    pub(crate) fn exact_relevance(&self, query: &[f32], row: usize) -> f32 {
        self.vector(row).map_or(0.0, |v| dot_f32(v, query))
    }

    fn scan_exact(&self, query: &[f32], out: &mut Vec<f32>) {
        if !self.small.is_empty() {
            // Shared rows lie wherever they were made: touching the lines of a row a few ahead
            // has its fetch under way while this one is scored (as the chunks' scan does).
            let step = CACHE_LINE / size_of::<f32>();
            let mut touched = 0u32;
            for (i, row) in self.small.iter().enumerate() {
                if let Some(far) = self.small.get(i + SHARED_TOUCH_AHEAD_ROWS) {
                    touched ^= far.iter().step_by(step).fold(0, |t, v| t ^ v.to_bits());
                }
                out.push(dot_f32(row, query));
            }
            std::hint::black_box(touched);
            return;
        }
        self.scan_exact_chunked(query, None, out);
    }

    /// A chunked store's exact scan of every row (`wanted` `None`) or the rows `wanted` marks
    /// (the others 0): [`Self::exact_rows`] over up to [`MAX_SCAN_THREADS`] threads.
    fn scan_exact_chunked(&self, query: &[f32], wanted: Option<&[bool]>, out: &mut Vec<f32>) {
        out.clear();
        out.resize(self.len(), 0.0);
        let threads = scan_threads(self.elements());
        self.split_scan(
            out,
            threads,
            || {},
            |first, slots| {
                self.exact_rows(first, query, wanted, slots);
            },
        );
    }

    /// [`Self::scan_exact`] of the rows `wanted` marks; the others are 0. A small store's scan
    /// touches the lines of the wanted row a look-ahead further on while it scores one, as its
    /// full scan does; a chunked store's is [`Self::exact_rows`] over up to
    /// [`MAX_SCAN_THREADS`] threads.
    fn scan_exact_where(&self, query: &[f32], wanted: &[bool], out: &mut Vec<f32>) {
        if self.small.is_empty() {
            self.scan_exact_chunked(query, Some(wanted), out);
            return;
        }
        out.clear();
        out.resize(self.len(), 0.0);
        let rows: Vec<usize> = wanted
            .iter()
            .take(self.len())
            .enumerate()
            .filter_map(|(row, &wanted)| wanted.then_some(row))
            .collect();
        let step = CACHE_LINE / size_of::<f32>();
        let mut touched = 0u32;
        for (i, &row) in rows.iter().enumerate() {
            let far = rows.get(i + SHARED_TOUCH_AHEAD_ROWS);
            if let Some(far) = far.and_then(|&far| self.vector(far)) {
                touched ^= far.iter().step_by(step).fold(0, |t, v| t ^ v.to_bits());
            }
            if let (Some(vector), Some(slot)) = (self.vector(row), out.get_mut(row)) {
                *slot = dot_f32(vector, query);
            }
        }
        std::hint::black_box(touched);
    }

    /// Scores rows `first..first + out.len()` of the chunks exactly into `out`: the rows
    /// `wanted` marks, or every row (the others, and rows past the store's end, keep their
    /// slots). While it scores a row it asks for the one [`EXACT_AHEAD_ROWS`] further on (if
    /// wanted), with a prefetch that, unlike a touch, leaves the core nothing to wait for.
    ///
    /// On x86-64 CPUs with AVX2 (found at run time) the loop is compiled for them: the same
    /// products and sums in the same order ([`dot_f32`]'s sixteen lanes, two vectors of
    /// eight), so the same numbers bit for bit, with half the instructions.
    fn exact_rows(&self, first: usize, query: &[f32], wanted: Option<&[bool]>, out: &mut [f32]) {
        let is_wanted = |row: usize| wanted.is_none_or(|w| w.get(row).copied().unwrap_or(false));
        let mut run = || {
            for (i, slot) in out.iter_mut().enumerate() {
                let row = first + i;
                let ahead = row + EXACT_AHEAD_ROWS;
                if is_wanted(ahead)
                    && let Some(far) = self.vector(ahead)
                {
                    prefetch_lines(far);
                }
                if is_wanted(row)
                    && let Some(vector) = self.vector(row)
                {
                    *slot = dot_f32(vector, query);
                }
            }
        };
        #[cfg(target_arch = "x86_64")]
        if let Some(simd) = pulp::x86::V3::try_new() {
            simd.vectorize(run);
            return;
        }
        run();
    }

    /// The int8 scan over `threads` threads (1: this one only).
    fn scan_quantized(&self, query: &[f32], out: &mut Vec<f32>, threads: usize) {
        out.resize(self.len(), 0.0);
        let Some((q, query_scale)) = quantize_query(query) else {
            return;
        };
        self.split_scan(
            out,
            threads,
            || {},
            |first, slot| {
                self.scan_quantized_rows(first, &q, query_scale, slot);
            },
        );
    }

    /// Runs `score(first, slots)` over `out` (one slot per row) on up to `threads` threads
    /// (1: this one only), and `side` on this thread meanwhile.
    ///
    /// The rows are cut into pieces of [`SCAN_PIECE_ROWS`]; each thread takes the next piece
    /// left until none is, scoring straight into its part of `out`, and this thread joins in
    /// once `side` is done — so the side job costs the scan nothing while another core is free,
    /// and a thread slowed by a busy machine simply takes fewer pieces. The result is the same
    /// as one thread's, bit for bit. A piece whose thread could not start or failed is scored
    /// here afterwards.
    fn split_scan<T, F>(&self, out: &mut [T], threads: usize, side: impl FnOnce(), score: F)
    where
        T: Send,
        F: Fn(usize, &mut [T]) + Sync,
    {
        let rows = out.len();
        if threads <= 1 || rows <= SCAN_PIECE_ROWS {
            side();
            score(0, out);
            return;
        }
        let pieces = std::sync::Mutex::new(out.chunks_mut(SCAN_PIECE_ROWS).enumerate());
        let work = || {
            let mut done = Vec::new();
            loop {
                let next = pieces
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .next();
                let Some((index, slots)) = next else {
                    return done;
                };
                score(index * SCAN_PIECE_ROWS, slots);
                done.push(index);
            }
        };
        let work = &work;
        let done: Vec<usize> = std::thread::scope(|scope| {
            let helpers: Vec<_> = (1..threads)
                .map(|_| {
                    std::thread::Builder::new()
                        .name("relevance-scan".into())
                        .spawn_scoped(scope, work)
                })
                .collect();
            side();
            let mut done = work();
            for helper in helpers {
                if let Ok(Ok(theirs)) = helper.map(|h| h.join()) {
                    done.extend(theirs);
                }
            }
            done
        });
        let mut finished = vec![false; rows.div_ceil(SCAN_PIECE_ROWS)];
        for index in done {
            if let Some(flag) = finished.get_mut(index) {
                *flag = true;
            }
        }
        for ((index, slots), finished) in out.chunks_mut(SCAN_PIECE_ROWS).enumerate().zip(finished)
        {
            if !finished {
                score(index * SCAN_PIECE_ROWS, slots);
            }
        }
    }

    /// Walks rows `first..first + out.len()` a chunk at a time: `run(chunk, row, offset, slots)`
    /// for each run of rows within one chunk — `row` its first row, `offset` that row's place
    /// in the chunk, `slots` one per row. Stops at the store's end or when `run` says `false`
    /// (the chunk lacks data it needs); the slots left keep what they hold.
    fn chunk_runs<T>(
        &self,
        first: usize,
        out: &mut [T],
        mut run: impl FnMut(&Chunk, usize, usize, &mut [T]) -> bool,
    ) {
        let mut row = first;
        let mut slots = out;
        while !slots.is_empty() {
            let offset = row % CHUNK_ROWS;
            let Some(chunk) = self.chunks.get(row / CHUNK_ROWS) else {
                return;
            };
            let n = slots.len().min(chunk.rows().saturating_sub(offset));
            if n == 0 {
                return;
            }
            let (here, rest) = slots.split_at_mut(n);
            if !run(chunk, row, offset, here) {
                return;
            }
            row += n;
            slots = rest;
        }
    }

    /// Scores rows `first..first + out.len()` of the int4 copy into `out` as proven intervals
    /// (rows without an int4 copy get `[-2, 2]`, which holds every cosine).
    ///
    /// Unlike the int8 scan it touches no row ahead: its rows are short and its arithmetic
    /// light, so the hardware prefetcher keeps up within a block, and a touch (a real load whose
    /// value the loop carries) made every row wait out a DRAM miss — three times slower.
    fn scan_coarse_rows(&self, first: usize, query: &CoarseQuery, out: &mut [[f32; 2]]) {
        let bytes = coarse_row_bytes(self.dim);
        // The integer sums of a run of rows at a time, then their intervals.
        let mut dots = [0i32; CHUNK_ROWS];
        let fine = &query.query;
        let mut row = first;
        let mut slots = out;
        while !slots.is_empty() {
            let offset = row % COARSE_BLOCK_ROWS;
            let block = self.coarse.get(row / COARSE_BLOCK_ROWS);
            let n = slots
                .len()
                .min(block.map_or(0, |b| b.rows().saturating_sub(offset)))
                .min(dots.len());
            let (Some(block), Some(dots)) = (block, dots.get_mut(..n)) else {
                slots.fill([-2.0, 2.0]);
                return;
            };
            let (Some(rows), Some(scales), Some(errors)) = (
                block.packed.get(offset * bytes..(offset + n) * bytes),
                block.scales.get(offset..offset + n),
                block.errors.get(offset..offset + n),
            ) else {
                slots.fill([-2.0, 2.0]);
                return;
            };
            if n == 0 {
                slots.fill([-2.0, 2.0]);
                return;
            }
            let (here, rest) = slots.split_at_mut(n);
            query.dots(rows, bytes, dots);
            for (((&dot, &scale), &error), slot) in
                dots.iter().zip(scales).zip(errors).zip(here.iter_mut())
            {
                let estimate = dot.wrapping_sub(fine.offset) as f32 * (scale * fine.scale);
                let bound = fine.bound(error);
                *slot = [estimate - bound, estimate + bound];
            }
            row += n;
            slots = rest;
        }
    }

    /// Scores rows `first..first + out.len()` of the int8 copy into `out` (rows past the end of
    /// the store leave their slots as they are).
    fn scan_quantized_rows(&self, first: usize, q: &[i16], query_scale: f32, out: &mut [f32]) {
        if !self.small.is_empty() {
            let mut values = Vec::with_capacity(self.dim);
            for (slot, row) in out.iter_mut().zip(self.small.iter().skip(first)) {
                values.clear();
                let scale = quantize_row(row, &mut values);
                *slot = dot_quantized(&values, q) as f32 * (scale * query_scale);
            }
            return;
        }
        let dim = self.dim;
        let ahead = (TOUCH_AHEAD_BYTES / dim).max(1);
        let end = first + out.len();
        let mut touched = 0i8;
        self.chunk_runs(first, out, |chunk, row, offset, here| {
            let n = here.len();
            let (Some(rows), Some(parts)) = (
                chunk.quantized.get(offset * dim..(offset + n) * dim),
                chunk.parts.get(offset..offset + n),
            ) else {
                return false;
            };
            for (i, ((values, &[scale, _]), slot)) in rows
                .chunks_exact(dim)
                .zip(parts)
                .zip(here.iter_mut())
                .enumerate()
            {
                // Touching one byte per cache line of a row far ahead (in this run, perhaps in
                // the next chunk) starts its DRAM fetch now, so it overlaps this row's
                // arithmetic (a safe stand-in for a prefetch instruction).
                let far_row = row + i + ahead;
                if far_row < end
                    && let Some(far) = self.quantized_row(far_row)
                {
                    touched ^= far.iter().step_by(CACHE_LINE).fold(0, |t, &v| t ^ v);
                }
                *slot = dot_quantized(values, q) as f32 * (scale * query_scale);
            }
            true
        });
        std::hint::black_box(touched);
    }
}

/// The factor that scales `v` to unit length, or `None` when it is to stay as it is: a zero
/// vector, or one already of unit length (within 1e-6), left bit-for-bit as it is so a
/// save/load round trip is exact.
fn unit_scale(v: &[f32]) -> Option<f32> {
    let norm2: f64 = v.iter().map(|&x| f64::from(x) * f64::from(x)).sum();
    if norm2 == 0.0 || (norm2 - 1.0).abs() < 1e-6 {
        return None;
    }
    Some((1.0 / norm2.sqrt()) as f32)
}

/// Scales `v` to unit length in place (see [`unit_scale`]).
fn normalise(v: &mut [f32]) {
    if let Some(inv) = unit_scale(v) {
        for x in v {
            *x *= inv;
        }
    }
}

/// `v` as [`normalise`] leaves it: itself when it stays as it is, else a scaled copy — so
/// storing a vector that came normalised copies it only into its row.
fn normalised(v: &[f32]) -> std::borrow::Cow<'_, [f32]> {
    match unit_scale(v) {
        None => std::borrow::Cow::Borrowed(v),
        Some(inv) => std::borrow::Cow::Owned(v.iter().map(|&x| x * inv).collect()),
    }
}

/// Appends the int8 version of `row` to `out` and returns its scale.
fn quantize_row(row: &[f32], out: &mut Vec<i8>) -> f32 {
    let max = max_abs(row);
    if max == 0.0 {
        out.extend(std::iter::repeat_n(0, row.len()));
        return 0.0;
    }
    let scale = max / ROW_Q_MAX;
    out.extend(
        row.iter()
            .map(|v| (v / scale).round().clamp(-ROW_Q_MAX, ROW_Q_MAX) as i8),
    );
    scale
}

/// [`quantize_row`], returning the scale and the bound of the row's error
/// ([`quantization_error`]): what a store keeps of every row.
fn quantize_row_bounded(row: &[f32], out: &mut Vec<i8>) -> (f32, f32) {
    let start = out.len();
    let scale = quantize_row(row, out);
    let error = out.get(start..).map_or(f32::INFINITY, |q| {
        quantization_error(row, q.iter().copied(), scale)
    });
    (scale, error)
}

/// An upper bound of `‖row − quantized · scale‖₂` (computed in `f64`, rounded up).
fn quantization_error(row: &[f32], quantized: impl IntoIterator<Item = i8>, scale: f32) -> f32 {
    let sum: f64 = row
        .iter()
        .zip(quantized)
        .map(|(&v, q)| {
            let d = f64::from(v) - f64::from(q) * f64::from(scale);
            d * d
        })
        .sum();
    round_up(sum.sqrt())
}

/// The largest magnitude in `v` (0 for an empty or zero vector).
fn max_abs(v: &[f32]) -> f32 {
    v.iter().fold(0f32, |m, x| m.max(x.abs()))
}

/// `x` as an `f32` no smaller than `x`.
fn round_up(x: f64) -> f32 {
    let y = x as f32;
    if f64::from(y) < x { y.next_up() } else { y }
}

/// Starts fetching every cache line of `values` into the cache: a prefetch instruction on x86-64
/// (through `pulp`'s safe token for SSE, which every x86-64 CPU has), elsewhere a read of one
/// number a line (kept from being optimised away).
fn prefetch_lines<T: Copy + Default>(values: &[T]) {
    let step = (CACHE_LINE / size_of::<T>().max(1)).max(1);
    #[cfg(target_arch = "x86_64")]
    if let Some(sse) = pulp::core_arch::x86::Sse::try_new() {
        for value in values.iter().step_by(step) {
            sse._mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                std::ptr::from_ref(value).cast(),
            );
        }
        return;
    }
    for value in values.iter().step_by(step) {
        std::hint::black_box(*value);
    }
}

/// The query as the int8 kernel reads it, and its scale; `None` for a zero query (every score
/// is then 0).
fn quantize_query(query: &[f32]) -> Option<(Vec<i16>, f32)> {
    let max = max_abs(query);
    if max == 0.0 {
        return None;
    }
    let query_scale = max / QUERY_Q_MAX;
    // Pre-shifted so the kernel's `(a << 8) * q >> 16` is exactly `a * q7` (see module docs).
    let q = query
        .iter()
        .map(|v| ((v / query_scale).round().clamp(-QUERY_Q_MAX, QUERY_Q_MAX) as i16) << 8)
        .collect();
    Some((q, query_scale))
}

/// Bytes of one row of the int4 copy: whole blocks of [`COARSE_BLOCK`] numbers, two per byte.
fn coarse_row_bytes(dim: usize) -> usize {
    dim.div_ceil(COARSE_BLOCK) * COARSE_BLOCK / 2
}

/// Appends the int4 version of `row` to `out` and returns its scale.
///
/// Every 32 numbers are 16 bytes: byte `j` holds number `j` of the 32 in its low nibble and
/// number `j + 16` in its high nibble, each a value in −7..=7 stored plus
/// [`COARSE_BIAS`] (so 1..=15; a block past the end of the row is padded with zeros, stored as
/// the bias; a row is padded to whole [`COARSE_BLOCK`]s). The kernel then unpacks a byte vector
/// into two vectors of consecutive numbers with a mask and a shift.
fn quantize_coarse_row(row: &[f32], out: &mut Vec<u8>) -> f32 {
    let max = max_abs(row);
    let bytes = coarse_row_bytes(row.len());
    if max == 0.0 {
        out.extend(std::iter::repeat_n(
            COARSE_BIAS as u8 | ((COARSE_BIAS as u8) << 4),
            bytes,
        ));
        return 0.0;
    }
    let scale = max / COARSE_Q_MAX;
    // `v / scale` is within ±7; shifted by the bias and a half it is positive, where `as`
    // (truncation) rounds down: round-half-up in two instructions, with no call to `round`
    // (every row stored pays this). The error bound is measured on the result, whatever it is.
    let biased = f32::from(COARSE_BIAS) + 0.5;
    let nibble = |i: usize| {
        row.get(i).map_or(COARSE_BIAS as u8, |v| {
            ((v / scale + biased) as u8).clamp(1, 2 * COARSE_BIAS as u8 - 1)
        })
    };
    for byte in 0..bytes {
        let first = byte / 16 * 32 + byte % 16;
        out.push(nibble(first) | (nibble(first + 16) << 4));
    }
    scale
}

/// The number at `index` of a row packed by [`quantize_coarse_row`] (0 past its end).
fn coarse_value(packed: &[u8], index: usize) -> i8 {
    let (half, j) = (index / 32, index % 32);
    let Some(&byte) = packed.get(half * 16 + j % 16) else {
        return 0;
    };
    let nibble = if j < 16 { byte & 0x0F } else { byte >> 4 };
    nibble as i8 - COARSE_BIAS
}

/// The query as the int4 kernel reads it (±127, padded with zeros to whole blocks), and its
/// scale; `None` for a zero query.
fn quantize_coarse_query(query: &[f32]) -> Option<(Vec<i16>, f32)> {
    let max = max_abs(query);
    if max == 0.0 {
        return None;
    }
    let scale = max / COARSE_QUERY_Q_MAX;
    let mut q: Vec<i16> = query
        .iter()
        .map(|v| {
            (v / scale)
                .round()
                .clamp(-COARSE_QUERY_Q_MAX, COARSE_QUERY_Q_MAX) as i16
        })
        .collect();
    q.resize(coarse_row_bytes(query.len()) * 2, 0);
    Some((q, scale))
}

/// Integer dot product of an int4 row (packed by [`quantize_coarse_row`]) with a query from
/// [`quantize_coarse_query`], *before* the nibbles' bias is taken off: the caller subtracts
/// `COARSE_BIAS × Σ query` ([`coarse_query_offset`]).
///
/// A block's 32 bytes become four vectors of 16 consecutive numbers (`byte & 15` and
/// `byte >> 4`, zero-extended to 16 bits — the shape SSE2 runs fast: `pand`, `psrlw`,
/// `punpcklbw`), each multiplied by its 16 query numbers in 16-bit lanes (`pmullw`). A lane
/// gains at most 4 × 15 × 127 = 7,620 per block, so [`COARSE_GROUP`] blocks (30,480) are summed
/// before the lanes are widened. (Written as one block per step with fixed-size arrays: with
/// the row's length unknown at compile time, other shapes of this loop came out several times
/// slower.)
fn dot_coarse(row: &[u8], query: &[i16]) -> i32 {
    let (row_blocks, _) = row.as_chunks::<{ COARSE_BLOCK / 2 }>();
    let (q_blocks, _) = query.as_chunks::<COARSE_BLOCK>();
    let (row_groups, row_rest) = row_blocks.as_chunks::<COARSE_GROUP>();
    let (q_groups, q_rest) = q_blocks.as_chunks::<COARSE_GROUP>();
    let mut acc32 = [0i32; 16];
    let mut widen = |lanes: &[i16; 16]| {
        for (wide, &narrow) in acc32.iter_mut().zip(lanes) {
            *wide = wide.wrapping_add(i32::from(narrow));
        }
    };
    for (bytes, q) in row_groups.iter().zip(q_groups) {
        let mut lanes = [0i16; 16];
        for (bytes, q) in bytes.iter().zip(q) {
            coarse_block(bytes, q, &mut lanes);
        }
        widen(&lanes);
    }
    let mut lanes = [0i16; 16];
    for (bytes, q) in row_rest.iter().zip(q_rest) {
        coarse_block(bytes, q, &mut lanes);
    }
    widen(&lanes);
    acc32.iter().fold(0i32, |s, &v| s.wrapping_add(v))
}

/// One block of [`dot_coarse`]: adds its 64 products into 16 lanes.
#[inline(always)]
fn coarse_block(bytes: &[u8; COARSE_BLOCK / 2], q: &[i16; COARSE_BLOCK], lanes: &mut [i16; 16]) {
    for j in 0..16 {
        let (a, b) = (bytes[j], bytes[j + 16]);
        let sum = i16::from(a & 0x0F)
            .wrapping_mul(q[j])
            .wrapping_add(i16::from(a >> 4).wrapping_mul(q[j + 16]))
            .wrapping_add(i16::from(b & 0x0F).wrapping_mul(q[j + 32]))
            .wrapping_add(i16::from(b >> 4).wrapping_mul(q[j + 48]));
        lanes[j] = lanes[j].wrapping_add(sum);
    }
}

/// What [`dot_coarse`] adds for the nibbles' bias: `COARSE_BIAS × Σ query`.
fn coarse_query_offset(query: &[i16]) -> i32 {
    query.iter().map(|&q| i32::from(q)).sum::<i32>() * i32::from(COARSE_BIAS)
}

/// Dot product with 16 independent accumulators so the compiler vectorises it. Always inlined,
/// so a loop compiled for AVX2 ([`EmbeddingStore::exact_rows`]) runs it eight lanes an
/// instruction (separate multiplies and adds either way: Rust never fuses them, so every
/// caller gets the same bits).
#[inline(always)]
pub(crate) fn dot_f32(a: &[f32], b: &[f32]) -> f32 {
    let (a_blocks, a_tail) = a.as_chunks::<16>();
    let (b_blocks, b_tail) = b.as_chunks::<16>();
    let mut acc = [0f32; 16];
    for (x, y) in a_blocks.iter().zip(b_blocks) {
        for ((s, &xv), &yv) in acc.iter_mut().zip(x).zip(y) {
            *s += xv * yv;
        }
    }
    let mut sum: f32 = acc.iter().sum();
    for (x, y) in a_tail.iter().zip(b_tail) {
        sum += x * y;
    }
    sum
}

/// Integer dot product of an int8 row with a query quantised to ±64 and shifted left by 8.
///
/// Products are summed in 16-bit lanes for a block of 64 elements (4 per lane, at most
/// 4 × 127 × 64 = 32,512, so no overflow) and then widened — the shape SSE2 runs fast
/// (`punpcklbw` + `pmulhw` + `paddw`).
fn dot_quantized(row: &[i8], query: &[i16]) -> i32 {
    let (row_blocks, row_tail) = row.as_chunks::<BLOCK>();
    let (q_blocks, q_tail) = query.as_chunks::<BLOCK>();
    let mut acc32 = [0i32; LANES];
    for (x, y) in row_blocks.iter().zip(q_blocks) {
        let mut acc16 = [0i16; LANES];
        for (xs, ys) in x
            .as_chunks::<LANES>()
            .0
            .iter()
            .zip(y.as_chunks::<LANES>().0)
        {
            for ((acc, &xv), &yv) in acc16.iter_mut().zip(xs).zip(ys) {
                let a = i16::from(xv) << 8;
                // (x·2⁸)(q·2⁸) >> 16 = x·q exactly: the high half of a 16×16 multiply.
                let product = ((i32::from(a) * i32::from(yv)) >> 16) as i16;
                *acc = acc.wrapping_add(product);
            }
        }
        for (wide, &narrow) in acc32.iter_mut().zip(&acc16) {
            *wide = wide.wrapping_add(i32::from(narrow));
        }
    }
    let mut sum = acc32.iter().fold(0i32, |s, &v| s.wrapping_add(v));
    for (&x, &y) in row_tail.iter().zip(q_tail) {
        sum = sum.wrapping_add(i32::from(x) * i32::from(y >> 8));
    }
    sum
}

/// `embeddings.json`: the model, the dimension and `text → vector` (normalised), sorted by text.
#[derive(Serialize)]
pub(crate) struct EmbeddingsFileRef<'a> {
    pub model: &'a str,
    pub dim: usize,
    pub vectors: BTreeMap<&'a str, &'a [f32]>,
}

/// The owned form of [`EmbeddingsFileRef`], for loading.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct EmbeddingsFile {
    pub model: String,
    pub dim: usize,
    pub vectors: BTreeMap<String, Vec<f32>>,
}

impl EmbeddingStore {
    pub(crate) fn to_file(&self) -> EmbeddingsFileRef<'_> {
        EmbeddingsFileRef {
            model: &self.model,
            dim: self.dim,
            vectors: self.iter().collect(),
        }
    }

    pub(crate) fn from_file(file: EmbeddingsFile) -> Result<Self, MemoryError> {
        let mut store = Self::new(file.model, file.dim);
        for (key, vector) in &file.vectors {
            store.insert(key, vector)?;
        }
        Ok(store)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pseudo_random(seed: u64, n: usize) -> Vec<f32> {
        let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                ((s >> 40) as f32 / (1u64 << 24) as f32) - 0.5
            })
            .collect()
    }

    #[test]
    fn a_normalised_view_is_what_normalising_in_place_makes() {
        let cases: [Vec<f32>; 5] = [
            vec![0.6, 0.8, 0.0],
            vec![3.0, 4.0, -12.0],
            vec![0.0; 4],
            vec![1e-3, -2e-3, 5e-4],
            pseudo_random(7, 48),
        ];
        for v in cases {
            let mut in_place = v.clone();
            normalise(&mut in_place);
            let view = normalised(&v);
            let bits = |x: &[f32]| x.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&view), bits(&in_place), "{v:?}");
            // A vector normalising leaves alone is not copied.
            assert_eq!(matches!(view, std::borrow::Cow::Borrowed(_)), in_place == v);
        }
    }

    #[test]
    fn vectors_are_normalised_and_reused() {
        let mut store = EmbeddingStore::new("test", 2);
        assert_eq!(store.insert("a", &[3.0, 4.0]).unwrap(), 0);
        assert_eq!(store.get("a").unwrap(), &[0.6, 0.8]);
        // Same text: same row, the new vector is ignored.
        assert_eq!(store.insert("a", &[1.0, 0.0]).unwrap(), 0);
        assert_eq!(store.get("a").unwrap(), &[0.6, 0.8]);
        assert_eq!(store.len(), 1);
        assert_eq!(store.insert("zero", &[0.0, 0.0]).unwrap(), 1);
        assert_eq!(store.get("zero").unwrap(), &[0.0, 0.0]);
    }

    #[test]
    fn bad_vectors_are_errors() {
        let mut store = EmbeddingStore::new("test", 3);
        assert!(matches!(
            store.insert("a", &[1.0, 2.0]),
            Err(MemoryError::DimensionMismatch {
                expected: 3,
                found: 2,
                ..
            })
        ));
        assert!(matches!(
            store.insert("a", &[]),
            Err(MemoryError::EmptyEmbedding { .. })
        ));
        assert!(matches!(
            store.insert("a", &[1.0, f32::NAN, 0.0]),
            Err(MemoryError::NonFiniteEmbedding { .. })
        ));
        assert!(store.is_empty());
        // A default store takes its dimension from the first vector.
        let mut free = EmbeddingStore::default();
        free.insert("x", &[1.0, 0.0, 0.0, 0.0]).unwrap();
        assert_eq!(free.dim(), 4);
        assert!(free.insert("y", &[1.0]).is_err());
        assert!(matches!(
            free.relevance(&[1.0, 0.0], RelevancePrecision::Exact),
            Err(MemoryError::DimensionMismatch {
                expected: 4,
                found: 2,
                ..
            })
        ));
    }

    #[test]
    fn exact_relevance_is_cosine() {
        let mut store = EmbeddingStore::new("test", 2);
        store.insert("a", &[3.0, 4.0]).unwrap();
        store.insert("b", &[0.0, -2.0]).unwrap();
        store.insert("z", &[0.0, 0.0]).unwrap();
        let rel = store
            .relevance(&[1.0, 0.0], RelevancePrecision::Exact)
            .unwrap();
        assert_eq!(rel.len(), 3);
        assert!((rel[0] - 0.6).abs() < 1e-6);
        assert!(rel[1].abs() < 1e-6);
        assert_eq!(rel[2], 0.0);
        let zero = store
            .relevance(&[0.0, 0.0], RelevancePrecision::Quantized)
            .unwrap();
        assert_eq!(zero, vec![0.0; 3]);
    }

    #[test]
    fn quantized_relevance_tracks_exact() {
        for dim in [3usize, 64, 100, 384] {
            let mut store = EmbeddingStore::new("test", dim);
            for i in 0..200u64 {
                store
                    .insert(&format!("row {i}"), &pseudo_random(i + 1, dim))
                    .unwrap();
            }
            let focal = pseudo_random(999, dim);
            let exact = store.relevance(&focal, RelevancePrecision::Exact).unwrap();
            let quant = store
                .relevance(&focal, RelevancePrecision::Quantized)
                .unwrap();
            let worst = exact
                .iter()
                .zip(&quant)
                .map(|(e, q)| (e - q).abs())
                .fold(0f32, f32::max);
            assert!(worst < 0.01, "dim {dim}: worst cosine error {worst}");
        }
    }

    #[test]
    fn parallel_scan_equals_one_thread_bit_for_bit() {
        // Two and a half pieces of rows: threads take whole pieces, the last one short.
        let dim = 20;
        let rows = SCAN_PIECE_ROWS * 2 + 1_003;
        let mut store = EmbeddingStore::new("test", dim);
        for i in 0..rows as u64 {
            store
                .insert(&format!("row {i}"), &pseudo_random(i + 7, dim))
                .unwrap();
        }
        // Too small to get its int4 copy by itself.
        assert!(!store.coarse_ready);
        store.build_coarse();
        let mut query = pseudo_random(4242, dim);
        normalise(&mut query);
        let mut one = Vec::new();
        store.scan_quantized(&query, &mut one, 1);
        assert_eq!(one.len(), rows);
        let (q, scale) = quantize_coarse_query(&query).expect("non-zero");
        let coarse_query = CoarseQuery::new(QuantizedQuery {
            offset: coarse_query_offset(&q),
            q,
            scale,
            term: 0.0,
            norm: 0.0,
        });
        let coarse = |threads: usize| {
            let mut out = vec![[0f32; 2]; rows];
            let mut side_ran = false;
            store.split_scan(
                &mut out,
                threads,
                || side_ran = true,
                |first, slots| {
                    store.scan_coarse_rows(first, &coarse_query, slots);
                },
            );
            assert!(side_ran, "{threads} threads: the side job did not run");
            out
        };
        let coarse_one = coarse(1);
        // The exact scan, every row and every third, against one dot product a row (the
        // kernel refinements use), bit for bit.
        let wanted: Vec<bool> = (0..rows).map(|row| row % 3 == 1).collect();
        let exact = |threads: usize, wanted: Option<&[bool]>| {
            let mut out = vec![-9f32; rows];
            store.split_scan(
                &mut out,
                threads,
                || {},
                |first, slots| {
                    store.exact_rows(first, &query, wanted, slots);
                },
            );
            out.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        };
        let by_row: Vec<u32> = (0..rows)
            .map(|row| store.exact_relevance(&query, row).to_bits())
            .collect();
        let by_wanted_row: Vec<u32> = (0..rows)
            .map(|row| {
                if wanted[row] {
                    by_row[row]
                } else {
                    (-9f32).to_bits()
                }
            })
            .collect();
        for threads in [1, 2, 3, 4, 200] {
            assert_eq!(exact(threads, None), by_row, "exact: {threads} threads");
            assert_eq!(
                exact(threads, Some(&wanted)),
                by_wanted_row,
                "exact, every third row: {threads} threads"
            );
        }
        for threads in [2, 3, 4, 200] {
            let mut many = Vec::new();
            store.scan_quantized(&query, &mut many, threads);
            let same = one
                .iter()
                .zip(&many)
                .all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(same && many.len() == one.len(), "{threads} threads differ");
            let coarse_many = coarse(threads);
            let same = coarse_one
                .iter()
                .zip(&coarse_many)
                .all(|(a, b)| a[0].to_bits() == b[0].to_bits() && a[1].to_bits() == b[1].to_bits());
            assert!(same, "int4: {threads} threads differ");
        }
        assert_eq!(scan_threads(PARALLEL_SCAN_MIN_ELEMENTS - 1), 1);
        assert!((1..=MAX_SCAN_THREADS).contains(&scan_threads(PARALLEL_SCAN_MIN_ELEMENTS)));
    }

    /// `CHUNK_ROWS * 2 + 7` rows of `dim` numbers, so the last of three chunks is partly full.
    fn multi_chunk_store(dim: usize) -> (EmbeddingStore, Vec<Vec<f32>>) {
        let mut store = EmbeddingStore::chunked("test", dim);
        let mut raw = Vec::new();
        for i in 0..(CHUNK_ROWS * 2 + 7) as u64 {
            let mut vector = pseudo_random(i + 11, dim);
            if i % 97 == 5 {
                vector.fill(0.0);
            }
            assert_eq!(
                store.insert(&format!("row {i}"), &vector).unwrap(),
                i as usize
            );
            raw.push(vector);
        }
        (store, raw)
    }

    /// Every number a store gives for `focal`: exact and int8 relevance, and per row the
    /// probe's intervals, the int8 interval, the int8 copy it is made from and the exact cosine
    /// (as bits).
    fn readings(store: &EmbeddingStore, focal: &[f32]) -> Vec<u32> {
        let mut out = Vec::new();
        for precision in [RelevancePrecision::Exact, RelevancePrecision::Quantized] {
            let scores = store.relevance(focal, precision).unwrap();
            out.extend(scores.iter().map(|v| v.to_bits()));
        }
        if let Some(probe) = store.probe(focal, Vec::new(), || {}).unwrap() {
            out.extend(probe.coarse.iter().flatten().map(|v| v.to_bits()));
            for row in 0..store.len() {
                out.extend(store.fine_interval(&probe, row).map(f32::to_bits));
                out.push(store.exact_relevance(&probe.query, row).to_bits());
                // The int8 copy a refinement reads (a shared row's is made on the fly).
                if let Some((values, scale, error)) = store.quantized_parts(row) {
                    out.extend(values.iter().map(|&v| u32::from(v as u8)));
                    out.extend([scale.to_bits(), error.to_bits()]);
                }
                store.prefetch(row, false);
                store.prefetch(row, true);
            }
        }
        out
    }

    #[test]
    fn shared_rows_read_as_chunked_rows_bit_for_bit() {
        // 384 numbers a row, as the town's embeddings: the store outgrows sharing at the row
        // that makes it large enough for the int4 copy.
        let dim = 384;
        let limit = AUTO_QUANTIZE_MIN_ELEMENTS.div_ceil(dim);
        let (mut shared, mut chunked) = (
            EmbeddingStore::new("test", dim),
            EmbeddingStore::chunked("test", dim),
        );
        let mut other = EmbeddingStore::new("test", dim);
        let focal = pseudo_random(999, dim);
        for i in 0..(limit + 40) as u64 {
            // Repeated vectors under other texts, zero vectors, and a vector another store
            // holds too.
            let mut vector = pseudo_random(i % 300, dim);
            if i % 97 == 5 {
                vector.fill(0.0);
            }
            let text = format!("row {i}");
            assert_eq!(shared.insert(&text, &vector).unwrap(), i as usize);
            assert_eq!(chunked.insert(&text, &vector).unwrap(), i as usize);
            if i < 50 {
                other.insert(&text, &vector).unwrap();
            }
            let at = i as usize + 1;
            if at == 1 || at == 300 || at == limit - 1 || at == limit || at == limit + 40 {
                assert_eq!(shared.small.is_empty(), at >= limit, "{at} rows");
                assert!(shared == chunked);
                assert_eq!(
                    readings(&shared, &focal),
                    readings(&chunked, &focal),
                    "{at} rows"
                );
            }
        }
        // The other store reads its shared rows as its own.
        assert_eq!(other.small.len(), 50);
        for row in 0..other.len() {
            assert_eq!(other.vector(row), chunked.vector(row));
        }
        assert_eq!(
            other.relevance(&focal, RelevancePrecision::Exact).unwrap(),
            chunked
                .relevance(&focal, RelevancePrecision::Exact)
                .unwrap()[..50]
        );
    }

    #[test]
    fn relevance_where_scores_the_wanted_rows_as_relevance_does() {
        let dim = 48;
        for mut store in [
            EmbeddingStore::new("test", dim),
            EmbeddingStore::chunked("test", dim),
        ] {
            for i in 0..700u64 {
                store
                    .insert(&format!("row {i}"), &pseudo_random(i % 333, dim))
                    .unwrap();
            }
            let focal = pseudo_random(4242, dim);
            let all = store.relevance(&focal, RelevancePrecision::Exact).unwrap();
            // A sparse mask, a mask shorter than the store, all and none.
            let sparse: Vec<bool> = (0..700).map(|r| r % 7 == 3 || r > 690).collect();
            let short = [true; 100];
            for wanted in [&sparse[..], &short[..], &[true; 700][..], &[false; 700][..]] {
                let some = store
                    .relevance_where(&focal, RelevancePrecision::Exact, Some(wanted))
                    .unwrap();
                assert_eq!(some.len(), all.len());
                for (row, (&got, &exact)) in some.iter().zip(&all).enumerate() {
                    let expected = if wanted.get(row) == Some(&true) {
                        exact
                    } else {
                        0.0
                    };
                    assert_eq!(got.to_bits(), expected.to_bits(), "row {row}");
                }
            }
            // Errors as `relevance` does, whatever the mask.
            assert!(
                store
                    .relevance_where(&[1.0; 3], RelevancePrecision::Exact, Some(&[false; 700]))
                    .is_err()
            );
            // The int8 scan reads every row.
            assert_eq!(
                store
                    .relevance_where(&focal, RelevancePrecision::Quantized, Some(&sparse))
                    .unwrap(),
                store
                    .relevance(&focal, RelevancePrecision::Quantized)
                    .unwrap()
            );
        }
    }

    #[test]
    fn rows_round_trip_across_chunks() {
        let dim = 37;
        let (store, raw) = multi_chunk_store(dim);
        assert_eq!(store.len(), CHUNK_ROWS * 2 + 7);
        assert_eq!(store.chunks.len(), 3);
        assert_eq!(store.chunks[0].rows(), CHUNK_ROWS);
        assert_eq!(store.chunks[1].rows(), CHUNK_ROWS);
        assert_eq!(store.chunks[2].rows(), 7);
        for (row, vector) in raw.iter().enumerate() {
            let key = format!("row {row}");
            let mut expected = vector.clone();
            normalise(&mut expected);
            assert_eq!(store.key(row), Some(key.as_str()));
            assert_eq!(store.row(&key), Some(row));
            assert_eq!(store.vector(row), Some(expected.as_slice()), "row {row}");
            assert_eq!(store.get(&key), Some(expected.as_slice()), "row {row}");
        }
        assert_eq!(store.vector(store.len()), None);
        assert_eq!(store.key(store.len()), None);
        assert_eq!(store.vector(usize::MAX), None);
        let iterated: Vec<_> = store.iter().collect();
        assert_eq!(iterated.len(), store.len());
        for (row, (key, vector)) in iterated.into_iter().enumerate() {
            assert_eq!(Some(key), store.key(row));
            assert_eq!(Some(vector), store.vector(row));
        }
        // A save/load round trip orders rows by text but keeps every vector.
        let loaded = EmbeddingStore::from_file(EmbeddingsFile {
            model: "test".into(),
            dim,
            vectors: store
                .iter()
                .map(|(k, v)| (k.to_owned(), v.to_vec()))
                .collect(),
        })
        .unwrap();
        assert_eq!(loaded, store);
        assert_ne!(loaded.row("row 2"), store.row("row 2"));
    }

    #[test]
    fn stored_rows_never_move() {
        let dim = 16;
        let mut store = EmbeddingStore::chunked("test", dim);
        for i in 0..10u64 {
            store
                .insert(&format!("row {i}"), &pseudo_random(i + 1, dim))
                .unwrap();
        }
        // A small store reserves a small first chunk, not a whole one.
        assert_eq!(store.chunks.len(), 1);
        assert!(store.chunks[0].vectors.capacity() < CHUNK_ROWS * dim);
        for i in 10..CHUNK_ROWS as u64 + 1 {
            store
                .insert(&format!("row {i}"), &pseudo_random(i + 1, dim))
                .unwrap();
        }
        assert_eq!(store.chunks.len(), 2);
        assert!(store.chunks[0].vectors.capacity() <= CHUNK_ROWS * dim);
        let pinned: Vec<*const f32> = (0..store.len())
            .map(|r| store.vector(r).unwrap().as_ptr())
            .collect();
        for i in CHUNK_ROWS as u64 + 1..CHUNK_ROWS as u64 * 3 {
            store
                .insert(&format!("row {i}"), &pseudo_random(i + 1, dim))
                .unwrap();
        }
        for (row, &before) in pinned.iter().enumerate() {
            assert_eq!(
                store.vector(row).unwrap().as_ptr(),
                before,
                "row {row} moved"
            );
        }
        // A clone's chunks are cut to their length; it still grows correctly.
        let mut clone = store.clone();
        clone.insert("one more", &pseudo_random(5, dim)).unwrap();
        let mut expected = pseudo_random(5, dim);
        normalise(&mut expected);
        assert_eq!(clone.get("one more"), Some(expected.as_slice()));
        assert_eq!(clone.len(), store.len() + 1);
        assert!(clone.iter().take(store.len()).eq(store.iter()));
    }

    #[test]
    fn relevance_across_chunks_equals_per_row_computation() {
        let dim = 100;
        let (store, _) = multi_chunk_store(dim);
        let focal = pseudo_random(31337, dim);
        let mut query = focal.clone();
        normalise(&mut query);

        let exact = store.relevance(&focal, RelevancePrecision::Exact).unwrap();
        assert_eq!(exact.len(), store.len());
        for (row, &score) in exact.iter().enumerate() {
            let expected = dot_f32(store.vector(row).unwrap(), &query);
            assert_eq!(score.to_bits(), expected.to_bits(), "exact row {row}");
        }

        // The contiguous layout's scan, rebuilt here: every row quantised after the other into
        // one buffer, scored against the query quantised as the store does it.
        let mut contiguous = Vec::new();
        let scales: Vec<f32> = (0..store.len())
            .map(|row| quantize_row(store.vector(row).unwrap(), &mut contiguous))
            .collect();
        let (q, query_scale) = quantize_query(&query).unwrap();
        let quantized = store
            .relevance(&focal, RelevancePrecision::Quantized)
            .unwrap();
        assert_eq!(quantized.len(), store.len());
        for (row, (&score, &scale)) in quantized.iter().zip(&scales).enumerate() {
            let values = &contiguous[row * dim..(row + 1) * dim];
            let expected = dot_quantized(values, &q) as f32 * (scale * query_scale);
            assert_eq!(score.to_bits(), expected.to_bits(), "quantized row {row}");
        }
        // The zero rows score 0 both ways.
        assert_eq!(exact[5], 0.0);
        assert_eq!(quantized[5], 0.0);
    }

    #[test]
    fn threaded_scan_across_chunks_equals_one_thread_bit_for_bit() {
        let dim = 64;
        let (store, _) = multi_chunk_store(dim);
        let mut query = pseudo_random(77, dim);
        normalise(&mut query);
        let mut one = Vec::new();
        store.scan_quantized(&query, &mut one, 1);
        assert_eq!(one.len(), store.len());
        // 519 rows over 3 threads: runs of 173 rows, two of them crossing a chunk boundary.
        for threads in [3, 2, 4] {
            let mut many = Vec::new();
            store.scan_quantized(&query, &mut many, threads);
            assert_eq!(many.len(), one.len());
            let same = one
                .iter()
                .zip(&many)
                .all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(same, "{threads} threads differ");
        }
        // A run's rows scored on their own equal the same rows of the whole scan.
        let mut part = vec![0f32; 173];
        let (q, query_scale) = quantize_query(&query).unwrap();
        store.scan_quantized_rows(CHUNK_ROWS - 50, &q, query_scale, &mut part);
        assert!(
            part.iter()
                .zip(&one[CHUNK_ROWS - 50..])
                .all(|(a, b)| a.to_bits() == b.to_bits())
        );
        // Rows past the end are left alone.
        let mut tail = vec![9f32; 10];
        store.scan_quantized_rows(store.len() - 3, &q, query_scale, &mut tail);
        assert_eq!(&tail[3..], &[9.0; 7]);
        assert_eq!(tail[..3], one[store.len() - 3..]);
    }

    #[test]
    fn the_int4_copy_is_made_when_the_store_grows_large_and_kept_after() {
        let dim = 256;
        let threshold_rows = AUTO_QUANTIZE_MIN_ELEMENTS / dim;
        let mut store = EmbeddingStore::new("test", dim);
        for i in 0..threshold_rows as u64 - 1 {
            store
                .insert(&format!("row {i}"), &pseudo_random(i, dim))
                .unwrap();
        }
        assert!(!store.coarse_ready);
        assert!(store.coarse.is_empty());
        for i in threshold_rows as u64 - 1..threshold_rows as u64 + 300 {
            store
                .insert(&format!("row {i}"), &pseudo_random(i, dim))
                .unwrap();
        }
        assert!(store.coarse_ready);
        assert_eq!(store.coarse_rows(), store.len());
        // Past the first block: every block but the last is full.
        assert!(store.coarse.len() >= 2);
        let bytes = coarse_row_bytes(dim);
        for (b, block) in store.coarse.iter().enumerate() {
            let rows = block.rows();
            assert!(rows == COARSE_BLOCK_ROWS || b == store.coarse.len() - 1);
            assert_eq!(block.errors.len(), rows);
            assert_eq!(block.packed.len(), rows * bytes);
        }
        // A clone (its last block cut to its length) grows too.
        let mut clone = store.clone();
        for i in 0..50u64 {
            clone
                .insert(&format!("more {i}"), &pseudo_random(i + 7_000, dim))
                .unwrap();
        }
        assert_eq!(clone.coarse_rows(), clone.len());
        // The copy made all at once, the one made row by row and a clone's are each the copy
        // of the row alone.
        for store in [&store, &clone] {
            for row in [0, threshold_rows - 1, COARSE_BLOCK_ROWS, store.len() - 1] {
                let mut fresh = Vec::new();
                let scale = quantize_coarse_row(store.vector(row).unwrap(), &mut fresh);
                let block = &store.coarse[row / COARSE_BLOCK_ROWS];
                let offset = row % COARSE_BLOCK_ROWS;
                assert_eq!(
                    block.packed[offset * bytes..(offset + 1) * bytes],
                    fresh[..],
                    "row {row}"
                );
                assert_eq!(block.scales[offset], scale, "row {row}");
            }
        }
    }

    #[test]
    fn coarse_kernel_matches_scalar_integer_dot() {
        // Whole blocks, a padded last block, more blocks than one 16-bit group holds, and the
        // largest values both ways (the lanes must not overflow).
        for dim in [1, 31, 32, 50, 384, 700] {
            for seed in 0..4u64 {
                let mut row = pseudo_random(seed, dim);
                let mut query = pseudo_random(seed + 100, dim);
                if seed == 3 {
                    row.iter_mut()
                        .for_each(|v| *v = if v.is_sign_positive() { 1.0 } else { -1.0 });
                    query = row.clone();
                }
                let mut packed = Vec::new();
                let scale = quantize_coarse_row(&row, &mut packed);
                assert_eq!(packed.len(), coarse_row_bytes(dim));
                let (q, _) = quantize_coarse_query(&query).expect("non-zero");
                let expected: i32 = (0..dim)
                    .map(|i| i32::from(coarse_value(&packed, i)) * i32::from(q[i]))
                    .sum();
                assert_eq!(
                    dot_coarse(&packed, &q) - coarse_query_offset(&q),
                    expected,
                    "dim {dim} seed {seed}"
                );
                // The kernel the scan runs (AVX2 where the CPU has it) sums the same integers,
                // for a run of rows: this row, its negation and its extremes.
                let negated: Vec<f32> = row.iter().map(|v| -v).collect();
                let mut rows = packed.clone();
                quantize_coarse_row(&negated, &mut rows);
                let coarse_query = CoarseQuery::new(QuantizedQuery {
                    offset: coarse_query_offset(&q),
                    q: q.clone(),
                    scale: 1.0,
                    term: 0.0,
                    norm: 0.0,
                });
                let mut dots = [0i32; 2];
                coarse_query.dots(&rows, packed.len(), &mut dots);
                let scalar = [
                    dot_coarse(&packed, &q),
                    dot_coarse(&rows[packed.len()..], &q),
                ];
                assert_eq!(dots, scalar, "dim {dim} seed {seed}");
                #[cfg(target_arch = "x86_64")]
                if pulp::x86::V3::is_available() {
                    let mut direct = [0i32; 2];
                    assert!(avx2::dots(&rows, &coarse_query.blocks, &mut direct));
                    assert_eq!(direct, scalar, "AVX2, dim {dim} seed {seed}");
                }
                // The packed values are the row's, rounded: within half a step.
                for (i, &v) in row.iter().enumerate() {
                    let back = f32::from(coarse_value(&packed, i)) * scale;
                    assert!((back - v).abs() <= scale * 0.5 + 1e-6, "dim {dim} i {i}");
                }
            }
        }
    }

    #[test]
    fn quantized_kernel_matches_scalar_integer_dot() {
        // Extreme values: every product at the lane limit must not overflow.
        let dim = 130;
        let row: Vec<i8> = (0..dim)
            .map(|i| if i % 2 == 0 { 127 } else { -127 })
            .collect();
        let query: Vec<i16> = (0..dim)
            .map(|i| (if i % 2 == 0 { 64i16 } else { -64 }) << 8)
            .collect();
        let expected: i32 = row
            .iter()
            .zip(&query)
            .map(|(&a, &b)| i32::from(a) * i32::from(b >> 8))
            .sum();
        assert_eq!(dot_quantized(&row, &query), expected);
        assert_eq!(expected, 130 * 127 * 64);
    }
}
