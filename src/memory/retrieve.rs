//! `new_retrieve`: scoring memories by recency, relevance and importance (SPEC §3.2, §4).
//!
//! For every candidate — an event or thought that is not idle and has not expired at `now` —
//! three raw components are computed:
//!
//! * **recency** = `recency_decay ^ (game hours since last_accessed)` (0.995 per hour; the
//!   original's rank-based recency is a known defect, SPEC §4),
//! * **relevance** = cosine(node embedding, focal embedding),
//! * **importance** = poignancy (1–10).
//!
//! Each is min–max normalised to [0, 1] over the candidates (a flat range gives 0.5 for all),
//! and `score = wᵣ·recency + wₗ·relevance + wᵢ·importance`, where each weight is the global
//! [`RetrievalWeights`] value times the persona's multiplier. The top `n` are returned (score
//! descending, ties broken newer node first) and their `last_accessed` is set to `now`.
//!
//! With [`RelevancePrecision::Auto`] (the default) a large store is scanned on its int4 copy
//! and still ranked exactly as the `f32` scan ranks it: every cosine comes with a proven
//! interval, and only the memories whose interval could change the range or the top `n` are
//! narrowed — to their int8 interval, then to the exact cosine — the most promising first, a
//! batch at a time (about 1,700 of 100,000 in the bench, a few dozen of them exactly; see
//! `bounded_top_n`).
//!
//! The scan reads the memory's flat per-node columns and the embedding store's chunked rows
//! (split over threads when the store is large, see [`EmbeddingStore`], with the candidates'
//! recency and importance found on this thread meanwhile); the recency powers are computed in
//! one vectorised pass, and the exact scan keeps the top `n` in a heap of `n` while the scores
//! stream by, with no list of every score and no sort.

use std::collections::{BTreeMap, BinaryHeap};

use bevy::prelude::Reflect;
use chrono::NaiveDateTime;
use serde::{Deserialize, Serialize};

use super::associative::epoch_seconds;
use super::embedding::{RelevancePrecision, RelevanceProbe};
use super::{AssociativeMemory, EmbeddingStore, MemoryError, NodeId};

/// A min–max range narrower than this counts as flat (every value normalises to 0.5).
pub(crate) const FLAT_RANGE_EPSILON: f32 = 1e-6;

/// The default recency decay per game hour (SPEC §2).
pub const DEFAULT_RECENCY_DECAY: f32 = 0.995;

/// Global weights of the three components (SPEC §3.2: 0.5, 3, 2).
#[derive(Debug, Clone, Copy, PartialEq, Reflect, Serialize, Deserialize)]
#[serde(default)]
pub struct RetrievalWeights {
    /// Weight of normalised recency.
    pub recency: f32,
    /// Weight of normalised relevance.
    pub relevance: f32,
    /// Weight of normalised importance.
    pub importance: f32,
}

impl Default for RetrievalWeights {
    fn default() -> Self {
        Self {
            recency: 0.5,
            relevance: 3.0,
            importance: 2.0,
        }
    }
}

impl From<[f32; 3]> for RetrievalWeights {
    /// `[recency, relevance, importance]`.
    fn from([recency, relevance, importance]: [f32; 3]) -> Self {
        Self {
            recency,
            relevance,
            importance,
        }
    }
}

/// Everything `new_retrieve` needs besides the memory: global weights, the persona's
/// multipliers and decay (SPEC §2), and how relevance is computed.
#[derive(Debug, Clone, Copy, PartialEq, Reflect, Serialize, Deserialize)]
#[serde(default)]
pub struct RetrievalParams {
    /// Global weights.
    pub weights: RetrievalWeights,
    /// The persona's recency multiplier (default 1).
    pub recency_w: f32,
    /// The persona's relevance multiplier (default 1).
    pub relevance_w: f32,
    /// The persona's importance multiplier (default 1).
    pub importance_w: f32,
    /// Recency factor per game hour since last access (default 0.995). Values outside (0, 1]
    /// are clamped into it; NaN means the default.
    pub recency_decay: f32,
    /// Exact or int8 relevance (see [`RelevancePrecision`]).
    pub precision: RelevancePrecision,
}

impl Default for RetrievalParams {
    fn default() -> Self {
        Self {
            weights: RetrievalWeights::default(),
            recency_w: 1.0,
            relevance_w: 1.0,
            importance_w: 1.0,
            recency_decay: DEFAULT_RECENCY_DECAY,
            precision: RelevancePrecision::Auto,
        }
    }
}

impl RetrievalParams {
    /// The effective weights: global weight × persona multiplier.
    pub(crate) fn effective_weights(&self) -> RetrievalWeights {
        RetrievalWeights {
            recency: self.weights.recency * self.recency_w,
            relevance: self.weights.relevance * self.relevance_w,
            importance: self.weights.importance * self.importance_w,
        }
    }

    fn ln_decay(&self) -> f32 {
        let decay = if self.recency_decay.is_nan() {
            DEFAULT_RECENCY_DECAY
        } else {
            self.recency_decay
        };
        decay.clamp(f32::MIN_POSITIVE, 1.0).ln()
    }
}

/// One candidate's score, component by component (for the inspector and tests).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScoredNode {
    /// The node.
    pub id: NodeId,
    /// Raw recency, `decay ^ hours`.
    pub recency: f32,
    /// Raw relevance, the cosine.
    pub relevance: f32,
    /// Raw importance, the poignancy.
    pub importance: f32,
    /// Recency after min–max normalisation.
    pub recency_norm: f32,
    /// Relevance after min–max normalisation.
    pub relevance_norm: f32,
    /// Importance after min–max normalisation.
    pub importance_norm: f32,
    /// The weighted sum.
    pub score: f32,
}

/// Returns the `n` memories that best match `focal` at `now` and marks them accessed.
///
/// `focal` is the focal point's embedding (any length-scale; it is normalised). Errors when it
/// has the wrong dimension or non-finite values — then nothing changes. An empty memory, or one
/// with no candidates, gives an empty list.
pub fn new_retrieve(
    memory: &mut AssociativeMemory,
    focal: &[f32],
    now: NaiveDateTime,
    n: usize,
    params: &RetrievalParams,
) -> Result<Vec<NodeId>, MemoryError> {
    let top = retrieve_unmarked(memory, focal, now, n, params)?;
    memory.set_last_accessed(&top, now);
    Ok(top)
}

/// The memories [`new_retrieve`] would return, without marking them accessed: a glance at what
/// bears on `focal` that leaves the memory as it was (a group prompt's recall, made while the
/// step reads many minds at once).
pub fn retrieve_unmarked(
    memory: &AssociativeMemory,
    focal: &[f32],
    now: NaiveDateTime,
    n: usize,
    params: &RetrievalParams,
) -> Result<Vec<NodeId>, MemoryError> {
    let weights = params.effective_weights();
    let bounded = memory.embeddings().scans_quantized(params.precision)
        && params.precision == RelevancePrecision::Auto
        && [weights.recency, weights.relevance, weights.importance]
            .iter()
            .all(|w| w.is_finite());
    if bounded {
        bounded_top_n(memory, focal, now, n, params)
    } else {
        let raw = raw_components(memory, focal, now, params)?;
        Ok(top_n(raw.scores(weights), n))
    }
}

/// The exact top `n` at the cost of the int4 scan: bound, prune, refine in batches.
///
/// The int4 scan gives every row an interval proven to hold its exact cosine
/// ([`RelevanceProbe`]); one row's interval narrows on demand to its int8 interval and then to
/// its exact cosine. Three searches ([`settle`]) keep every candidate that could still be among
/// their best and narrow the most promising of them, a batch at a time, until what they keep
/// is exact:
///
/// 1. the largest and 2. the smallest exact relevance — the ends of the min–max range — among
///    the candidates whose interval reaches past the best lower (worst upper) end;
/// 3. with the exact range, every candidate's score has an upper and a lower bound (the score
///    rises with relevance for a non-negative weight, falls for a negative one, and rounding
///    keeps that order). The `n`-th best lower bound `L` is a score at least `n` candidates
///    reach, so a candidate whose upper bound is below `L` cannot be among the top `n`; the
///    rest are narrowed until exact and ranked by score, then the newer node.
///
/// A candidate narrowed by one search stays narrowed for the next (the memories most relevant
/// are often among the best scores). Same numbers, same formula, same tie-break: the result is
/// the exact scan's, bit for bit (`tests` compare them on random stores). At 100,000 memories
/// of 384 dimensions about 1,700 rows are read past the int4 scan, in node order within each
/// batch (the rows' memory is read faster so).
fn bounded_top_n(
    memory: &AssociativeMemory,
    focal: &[f32],
    now: NaiveDateTime,
    n: usize,
    params: &RetrievalParams,
) -> Result<Vec<NodeId>, MemoryError> {
    let run = |scratch: &mut Scratch| bounded_top_n_in(scratch, memory, focal, now, n, params);
    SCRATCH
        .try_with(|cell| match cell.try_borrow_mut() {
            Ok(mut scratch) => run(&mut scratch),
            Err(_) => run(&mut Scratch::default()),
        })
        .unwrap_or_else(|_| run(&mut Scratch::default()))
}

thread_local! {
    /// Each thread's buffers for [`bounded_top_n`], kept between retrievals: at 100,000
    /// memories they are a few megabytes, and allocating them afresh each time (large blocks
    /// come straight from the kernel as untouched pages) cost more than all the arithmetic on
    /// them. They hold what the largest retrieval on this thread needed.
    static SCRATCH: std::cell::RefCell<Scratch> = std::cell::RefCell::default();
}

/// The buffers of one bounded retrieval (see [`SCRATCH`]).
#[derive(Default)]
struct Scratch {
    /// Every row's int4 interval.
    coarse: Vec<[f32; 2]>,
    /// The candidates' ids, in node order.
    ids: Vec<u32>,
    /// Per candidate, `w.recency × normalised recency` (first the raw recency).
    recency: Vec<f32>,
    /// Per candidate, `w.importance × normalised importance` (first the raw importance).
    importance: Vec<f32>,
    /// Per candidate, its embedding row.
    rows: Vec<u32>,
    /// Per candidate, its relevance interval: the int4 one, narrowed as it is refined.
    intervals: Vec<[f32; 2]>,
    /// Per candidate, how far its interval has been narrowed.
    levels: Vec<Level>,
    /// The worst upper and best lower end of the candidates' int4 intervals.
    ends: [f32; 2],
    /// Candidates that may hold the largest (smallest) relevance.
    may_be_largest: Vec<u32>,
    may_be_smallest: Vec<u32>,
    /// Candidates that may be among the top `n`.
    kept: Vec<u32>,
    /// The searches' working lists.
    settle: SettleBuffers,
    /// The search for the smallest relevance, on a thread of its own (see [`range_ends`]).
    smallest: SideSearch,
}

/// The candidates that may hold the smallest relevance, copied out of [`Scratch`] so that
/// another thread can narrow them while this one searches for the largest (see
/// [`range_ends`]): `rows`, `intervals` and `levels` as [`Narrowing`] reads them, indexed by
/// place in the list.
#[derive(Default)]
struct SideSearch {
    rows: Vec<u32>,
    intervals: Vec<[f32; 2]>,
    levels: Vec<Level>,
    kept: Vec<u32>,
    settle: SettleBuffers,
}

/// The working lists of [`settle`] (and of the pass over every candidate before it).
#[derive(Default)]
struct SettleBuffers {
    /// Lower and upper bounds, one per candidate kept.
    lows: Vec<f32>,
    highs: Vec<f32>,
    /// The inexact candidates kept, with their upper bounds: the next to be narrowed.
    batch: Vec<(f32, u32)>,
    /// A second such list.
    others: Vec<(f32, u32)>,
    /// [`nth_largest`]'s.
    nth: Vec<f32>,
}

fn bounded_top_n_in(
    scratch: &mut Scratch,
    memory: &AssociativeMemory,
    focal: &[f32],
    now: NaiveDateTime,
    n: usize,
    params: &RetrievalParams,
) -> Result<Vec<NodeId>, MemoryError> {
    let store = memory.embeddings();
    // The candidates' recency and importance are found while other cores scan.
    let mut raw = Raw {
        ids: std::mem::take(&mut scratch.ids),
        recency: std::mem::take(&mut scratch.recency),
        relevance: Vec::new(),
        importance: std::mem::take(&mut scratch.importance),
        ranges: [Range::new(0.0, 0.0); 3],
    };
    let w = params.effective_weights();
    let (rows, levels) = (&mut scratch.rows, &mut scratch.levels);
    let side = || {
        fill_candidate_parts(&mut raw, memory, now, params);
        candidate_columns(&mut raw, rows, levels, memory, w);
    };
    let probe = store.probe(focal, std::mem::take(&mut scratch.coarse), side)?;
    let Some(probe) = probe else {
        let raw = raw_components_from(memory, now, params, &[]);
        return Ok(top_n(raw.scores(w), n));
    };
    scratch.ids = raw.ids;
    scratch.recency = raw.recency;
    scratch.importance = raw.importance;
    gather_intervals(scratch, &probe.coarse);
    let top = if scratch.ids.is_empty() || n == 0 {
        Vec::new()
    } else {
        ranked(scratch, store, &probe, n, w)
    };
    scratch.coarse = probe.coarse;
    Ok(top)
}

/// Steps 1–3 of [`bounded_top_n`] over the candidates in `scratch`.
fn ranked(
    scratch: &mut Scratch,
    store: &EmbeddingStore,
    probe: &RelevanceProbe,
    n: usize,
    w: RetrievalWeights,
) -> Vec<NodeId> {
    let Scratch {
        ids,
        recency,
        importance,
        rows,
        intervals,
        levels,
        may_be_largest,
        may_be_smallest,
        ends,
        kept,
        settle: buffers,
        smallest: side_search,
        ..
    } = scratch;
    let (ids, recency, importance) = (&*ids, &*recency, &*importance);
    let mut relevance = Narrowing {
        store,
        probe,
        rows,
        intervals,
        levels,
    };

    // 1–2: the exact ends of the relevance range.
    let [smallest, largest] = range_ends(
        &mut relevance,
        [may_be_smallest, may_be_largest],
        *ends,
        buffers,
        side_search,
    );
    let range = Range::new(smallest, largest);

    // 3: the top n.
    // The score as the exact scan computes it, term by term in the same order (so the same
    // bits): `(recency term + relevance term) + importance term`.
    let term = |relevance_value: f32| w.relevance * range.apply(relevance_value);
    // The score rises with relevance for a non-negative weight and falls for a negative one.
    let rising = w.relevance >= 0.0;
    let span = |r: f32, i: f32, [lo, hi]: [f32; 2]| -> [f32; 2] {
        let (a, b) = ((r + term(lo)) + i, (r + term(hi)) + i);
        if rising { [a, b] } else { [b, a] }
    };
    let terms_of = |k: u32| {
        let k = k as usize;
        (
            recency.get(k).copied().unwrap_or_default(),
            importance.get(k).copied().unwrap_or_default(),
        )
    };
    // Every candidate's bounds, in passes the compiler vectorises; `L`, the n-th best lower
    // bound (every candidate counts when there are at most n); then the candidates whose upper
    // bound reaches `L` (a few in a hundred: a branch that is rarely taken).
    let SettleBuffers {
        lows, highs, nth, ..
    } = buffers;
    // The lower bound takes the lower end of the relevance interval when the score rises with
    // relevance, the upper end when it falls; the upper bound the other.
    let intervals = &*relevance.intervals;
    let parts = (recency.as_slice(), importance.as_slice(), intervals);
    if rising {
        score_bounds::<0>(lows, parts, w.relevance, range);
        score_bounds::<1>(highs, parts, w.relevance, range);
    } else {
        score_bounds::<1>(lows, parts, w.relevance, range);
        score_bounds::<0>(highs, parts, w.relevance, range);
    }
    let threshold = if ids.len() <= n {
        f32::NEG_INFINITY
    } else {
        nth_largest(lows, n, |low| low, nth)
    };
    kept.clear();
    for (k, &high) in highs.iter().enumerate() {
        if high >= threshold {
            kept.push(k as u32);
        }
    }
    settle(kept, n, &mut relevance, buffers, |k, interval| {
        let (r, i) = terms_of(k);
        span(r, i, interval)
    });
    // Every candidate kept is exact now, and every one that can be in the top n is kept.
    let mut scored: Vec<(f32, u32)> = kept
        .iter()
        .map(|&k| {
            let (r, i) = terms_of(k);
            let id = ids.get(k as usize).copied().unwrap_or_default();
            ((r + term(relevance.interval(k)[0])) + i, id)
        })
        .collect();
    scored.sort_unstable_by(by_rank);
    scored
        .into_iter()
        .take(n)
        .map(|(_, id)| NodeId(id))
        .collect()
}

/// Sets `out` to every candidate's score with relevance at end `END` (0: lower, 1: upper) of
/// its interval — `(recency + w · range.apply(relevance)) + importance`, the exact scan's
/// formula term by term — from `(recency, importance, intervals)`, in a loop the compiler
/// vectorises (the flat range taken out of it).
fn score_bounds<const END: usize>(
    out: &mut Vec<f32>,
    (recency, importance, intervals): (&[f32], &[f32], &[[f32; 2]]),
    w: f32,
    range: Range,
) {
    let ends = intervals.iter().map(|interval| interval[END & 1]);
    let parts = recency.iter().zip(importance).zip(ends);
    out.clear();
    let min = range.min;
    match range.inv_span {
        Some(inv) => out.extend(parts.map(|((&r, &i), v)| (r + w * ((v - min) * inv)) + i)),
        None => out.extend(parts.map(|((&r, &i), _)| (r + w * 0.5) + i)),
    }
}

/// The candidates' relevance as far as it is known, and what narrows it.
struct Narrowing<'a> {
    store: &'a EmbeddingStore,
    probe: &'a RelevanceProbe,
    /// Per candidate, its embedding row.
    rows: &'a [u32],
    /// Per candidate, an interval that holds its exact relevance.
    intervals: &'a mut [[f32; 2]],
    /// Per candidate, how far its interval has been narrowed.
    levels: &'a mut [Level],
}

impl Narrowing<'_> {
    fn interval(&self, k: u32) -> [f32; 2] {
        self.intervals.get(k as usize).copied().unwrap_or([0.0; 2])
    }

    fn is_exact(&self, k: u32) -> bool {
        self.levels
            .get(k as usize)
            .is_none_or(|&level| level == Level::Exact)
    }

    fn row(&self, k: u32) -> usize {
        self.rows.get(k as usize).copied().unwrap_or_default() as usize
    }

    /// Narrows every candidate of `batch` a level: int4 to int8 (the two intervals' overlap:
    /// both hold the exact cosine), int8 to exact. The memory of the candidate
    /// [`PREFETCH_AHEAD`] places on is asked for while one is narrowed, so the batch's cache
    /// misses overlap instead of coming one after another.
    fn narrow(&mut self, batch: &[(f32, u32)]) {
        let prefetch = |narrowing: &Self, k: u32| {
            let exact = narrowing.levels.get(k as usize) == Some(&Level::Fine);
            narrowing.store.prefetch(narrowing.row(k), exact);
        };
        for &(_, k) in batch.iter().take(PREFETCH_AHEAD) {
            prefetch(self, k);
        }
        for (i, &(_, k)) in batch.iter().enumerate() {
            if let Some(&(_, ahead)) = batch.get(i + PREFETCH_AHEAD) {
                prefetch(self, ahead);
            }
            let row = self.row(k);
            let (Some(interval), Some(level)) = (
                self.intervals.get_mut(k as usize),
                self.levels.get_mut(k as usize),
            ) else {
                continue;
            };
            match *level {
                Level::Coarse => {
                    let [lo, hi] = *interval;
                    let [fine_lo, fine_hi] = self.store.fine_interval(self.probe, row);
                    *interval = [fine_lo.max(lo), fine_hi.min(hi)];
                    *level = Level::Fine;
                }
                Level::Fine => {
                    let exact = self.store.exact_relevance(&self.probe.query, row);
                    *interval = [exact, exact];
                    *level = Level::Exact;
                }
                Level::Exact => {}
            }
        }
    }
}

/// How many candidates ahead of the one [`Narrowing::narrow`] narrows it asks for the memory
/// of: enough misses in flight to hide most of the wait, few enough that what arrives is still
/// in the cache when it is read.
const PREFETCH_AHEAD: usize = 8;

/// The inexact candidates the first round of [`settle`] narrows (at least `n`); each round
/// after narrows twice as many as the one before.
const FIRST_BATCH: usize = 16;

/// Narrows the candidates in `kept` (in node order) until every one left is exact, dropping
/// those that cannot be among the `n` best by `bounds`; every candidate of `kept` that can be
/// among them stays, ties included, in node order.
///
/// `bounds(k, interval)` is candidate `k`'s key as `[low, high]` from its relevance interval,
/// one value (up to the sign of a zero) when the interval is. Each round `L`, the `n`-th
/// largest lower bound, is a key at least `n` candidates reach, so a candidate whose upper
/// bound is below `L` cannot be among the best and is dropped; then of the inexact candidates
/// left, those with the largest upper bounds are narrowed a level — best first, as a heap
/// would give them, but a batch at a time. The batch doubles each round: the first rounds
/// raise `L` with few refinements, and the few left after are done in a few rounds.
/// Comparisons are numeric (−0 = +0), so a candidate dropped is below `n` others however the
/// final ranking orders equal keys.
fn settle(
    kept: &mut Vec<u32>,
    n: usize,
    relevance: &mut Narrowing<'_>,
    buffers: &mut SettleBuffers,
    bounds: impl Fn(u32, [f32; 2]) -> [f32; 2],
) {
    let SettleBuffers {
        lows,
        highs,
        batch,
        nth,
        ..
    } = buffers;
    let mut batch_size = FIRST_BATCH.max(n);
    loop {
        lows.clear();
        highs.clear();
        for &k in kept.iter() {
            let [low, high] = bounds(k, relevance.interval(k));
            lows.push(low);
            highs.push(high);
        }
        let threshold = if kept.len() <= n {
            f32::NEG_INFINITY
        } else {
            nth_largest(lows, n, |low| low, nth)
        };
        batch.clear();
        let mut len = 0;
        for (i, &high) in highs.iter().enumerate() {
            let Some(&k) = kept.get(i) else { break };
            if high >= threshold {
                if let Some(slot) = kept.get_mut(len) {
                    *slot = k;
                }
                len += 1;
                if !relevance.is_exact(k) {
                    batch.push((high, k));
                }
            }
        }
        kept.truncate(len);
        if batch.is_empty() {
            return;
        }
        if batch.len() > batch_size {
            batch.select_nth_unstable_by(batch_size - 1, |a, b| b.0.total_cmp(&a.0));
            batch.truncate(batch_size);
            // In node order (see `range_ends`).
            batch.sort_unstable_by_key(|&(_, k)| k);
        }
        relevance.narrow(batch);
        batch_size = batch_size.saturating_mul(2);
    }
}

/// Values per block in [`nth_largest`]'s first pass.
const NTH_BLOCK: usize = 64;

/// The `n`-th largest `key` of `values` (`n ≥ 1`, at most `values.len()`; by value, so −0 and
/// +0 count as equal), with `scratch` to work in.
///
/// The `n`-th largest of the blocks' maxima is reached by `n` values (one a block), so it is
/// no larger than the answer: only the values that reach it — a few more than `n`, unless many
/// are equal — are kept and the answer is picked among them. The maxima are taken in eight
/// lanes, a loop the compiler vectorises.
fn nth_largest<T: Copy>(
    values: &[T],
    n: usize,
    key: impl Fn(T) -> f32,
    scratch: &mut Vec<f32>,
) -> f32 {
    let descending = |a: &f32, b: &f32| b.total_cmp(a);
    scratch.clear();
    if values.len() / NTH_BLOCK >= n {
        scratch.extend(values.chunks(NTH_BLOCK).map(|block| {
            let (lanes, tail) = block.as_chunks::<8>();
            let mut max = [f32::NEG_INFINITY; 8];
            for lane in lanes {
                for (m, &v) in max.iter_mut().zip(lane) {
                    *m = m.max(key(v));
                }
            }
            tail.iter()
                .map(|&v| key(v))
                .chain(max)
                .fold(f32::NEG_INFINITY, f32::max)
        }));
        scratch.select_nth_unstable_by(n - 1, descending);
        let floor = scratch.get(n - 1).copied().unwrap_or(f32::NEG_INFINITY);
        scratch.clear();
        scratch.extend(values.iter().map(|&v| key(v)).filter(|&v| v >= floor));
    } else {
        scratch.extend(values.iter().map(|&v| key(v)));
    }
    if scratch.len() < n {
        return f32::NEG_INFINITY;
    }
    scratch.select_nth_unstable_by(n - 1, descending);
    scratch.get(n - 1).copied().unwrap_or(f32::NEG_INFINITY)
}

/// Steps 1–2 of [`bounded_top_n`]: the smallest and the largest exact relevance of the
/// candidates, `[smallest, largest]`, given the worst upper and best lower end of their
/// intervals (`ends`) and each block's extents in `buffers` (as [`gather_intervals`] leaves
/// them). `lists` are buffers for the candidates that may hold each end.
///
/// First the [`FIRST_BATCH`] candidates whose intervals reach lowest and the as many reaching
/// highest are narrowed, which brings the worst upper (best lower) end close to the answer;
/// then only the candidates whose intervals reach past it can hold it — a few hundred of
/// 100,000 in the bench, where the int4 intervals alone leave some ten thousand — and
/// [`settle`] narrows those. Every candidate that holds the smallest (largest) value is among
/// them, so the first of them in node order is the one the exact scan's running minimum
/// (maximum) settles on.
///
/// The candidates are read in blocks of [`NTH_BLOCK`], with each block's lowest lower and
/// highest upper end: the `FIRST_BATCH`-th lowest of those minima
/// (highest of the maxima) is reached by as many candidates, one a block, so the candidates
/// to narrow first are among the few that reach it; and a block whose ends reach neither
/// bound is skipped when the candidates that may hold the range's ends are listed (narrowing
/// only shrinks intervals). With a second core and at least [`PARALLEL_RANGE_MIN`] candidates
/// that may hold the smallest value, the two searches run at once ([`smallest_aside`]).
fn range_ends(
    relevance: &mut Narrowing<'_>,
    [may_be_smallest, may_be_largest]: [&mut Vec<u32>; 2],
    [mut worst_high, mut best_low]: [f32; 2],
    buffers: &mut SettleBuffers,
    side: &mut SideSearch,
) -> [f32; 2] {
    let first = FIRST_BATCH.min(relevance.intervals.len());
    let SettleBuffers {
        lows,
        highs,
        batch,
        others,
        nth,
    } = &mut *buffers;
    // What the `first` lowest lower and highest upper ends reach at least.
    let (floor_low, floor_high) = if lows.len() >= first {
        (
            -nth_largest(lows, first, |low| -low, nth),
            nth_largest(highs, first, |high| high, nth),
        )
    } else {
        (f32::INFINITY, f32::NEG_INFINITY)
    };
    batch.clear();
    others.clear();
    for (k, &[lo, hi]) in relevance.intervals.iter().enumerate() {
        if lo <= floor_low {
            others.push((-lo, k as u32));
        }
        if hi >= floor_high {
            batch.push((hi, k as u32));
        }
    }
    for list in [&mut *batch, &mut *others] {
        if list.len() > first {
            list.select_nth_unstable_by(first - 1, |a, b| b.0.total_cmp(&a.0));
            list.truncate(first);
        }
    }
    batch.append(others);
    // In node order (rows are mostly in node order, and memory read in order is read faster),
    // each candidate once.
    batch.sort_unstable_by_key(|&(_, k)| k);
    batch.dedup_by_key(|&mut (_, k)| k);
    relevance.narrow(batch);
    // Narrowing only raised lower ends and lowered upper ones.
    for &(_, k) in batch.iter() {
        let [lo, hi] = relevance.interval(k);
        best_low = best_low.max(lo);
        worst_high = worst_high.min(hi);
    }
    may_be_smallest.clear();
    may_be_largest.clear();
    let blocks = relevance
        .intervals
        .chunks(NTH_BLOCK)
        .zip(lows.iter().zip(highs.iter()));
    for (b, (block, (&block_lo, &block_hi))) in blocks.enumerate() {
        if block_lo > worst_high && block_hi < best_low {
            continue;
        }
        for (j, &[lo, hi]) in block.iter().enumerate() {
            let k = (b * NTH_BLOCK + j) as u32;
            if lo <= worst_high {
                may_be_smallest.push(k);
            }
            if hi >= best_low {
                may_be_largest.push(k);
            }
        }
    }
    let lowest_first = |_: u32, [lo, hi]: [f32; 2]| [-hi, -lo];
    let smallest = if may_be_smallest.len() >= PARALLEL_RANGE_MIN && parallel_range() {
        smallest_aside(relevance, may_be_smallest, may_be_largest, buffers, side)
    } else {
        settle(may_be_smallest, 1, relevance, buffers, lowest_first);
        settle(may_be_largest, 1, relevance, buffers, |_, interval| {
            interval
        });
        may_be_smallest
            .iter()
            .map(|&k| relevance.interval(k)[0])
            .fold(f32::INFINITY, |lo, v| if v < lo { v } else { lo })
    };
    let largest = may_be_largest
        .iter()
        .map(|&k| relevance.interval(k)[0])
        .fold(f32::NEG_INFINITY, |hi, v| if v > hi { v } else { hi });
    [smallest, largest]
}

/// From this many candidates that may hold the smallest relevance on, [`range_ends`] narrows
/// them on a thread of its own while it narrows those that may hold the largest: starting and
/// joining a thread (some tens of microseconds) is then worth it. At 100,000 memories of 384
/// dimensions there are some 300 to 400; at 10,000 about a hundred, fewer than it takes.
const PARALLEL_RANGE_MIN: usize = 200;

/// Whether a second core may search for the smallest relevance (more than one core).
fn parallel_range() -> bool {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get())) > 1
}

/// The two searches of [`range_ends`] at once: the candidates of `may_be_smallest` are copied
/// into `side` and settled there on another thread, while this one settles `may_be_largest`
/// in place; then whatever the other thread narrowed is written back (a candidate in both lists
/// is narrowed to the same interval at each level either way, so the further narrowed one is
/// kept). Returns the smallest relevance: the first smallest exact value in node order, as the
/// sequential search gives. If the thread cannot be started (or fails), this one does its work.
fn smallest_aside(
    relevance: &mut Narrowing<'_>,
    may_be_smallest: &[u32],
    may_be_largest: &mut Vec<u32>,
    buffers: &mut SettleBuffers,
    side: &mut SideSearch,
) -> f32 {
    let lowest_first = |_: u32, [lo, hi]: [f32; 2]| [-hi, -lo];
    let SideSearch {
        rows,
        intervals,
        levels,
        kept,
        settle: side_buffers,
    } = side;
    rows.clear();
    intervals.clear();
    levels.clear();
    for &k in may_be_smallest.iter() {
        rows.push(relevance.rows.get(k as usize).copied().unwrap_or_default());
        intervals.push(relevance.interval(k));
        levels.push(
            relevance
                .levels
                .get(k as usize)
                .copied()
                .unwrap_or(Level::Exact),
        );
    }
    kept.clear();
    kept.extend(0..may_be_smallest.len() as u32);
    let (store, probe, rows) = (relevance.store, relevance.probe, rows.as_slice());
    let mut search = |kept: &mut Vec<u32>, intervals: &mut [[f32; 2]], levels: &mut [Level]| {
        let mut local = Narrowing {
            store,
            probe,
            rows,
            intervals,
            levels,
        };
        settle(kept, 1, &mut local, side_buffers, lowest_first);
    };
    let done = std::thread::scope(|scope| {
        let helper = std::thread::Builder::new()
            .name("relevance-range".into())
            .spawn_scoped(scope, || search(kept, intervals, levels));
        settle(may_be_largest, 1, relevance, buffers, |_, interval| {
            interval
        });
        helper.is_ok_and(|helper| helper.join().is_ok())
    });
    if !done {
        // Start over from what is narrowed (narrowing only ever makes an interval tighter).
        kept.clear();
        kept.extend(0..may_be_smallest.len() as u32);
        search(kept, intervals, levels);
    }
    for ((&k, &interval), &level) in may_be_smallest.iter().zip(&*intervals).zip(&*levels) {
        let k = k as usize;
        if let (Some(slot), Some(known)) =
            (relevance.intervals.get_mut(k), relevance.levels.get_mut(k))
            && level > *known
        {
            *slot = interval;
            *known = level;
        }
    }
    // `kept` holds places in `may_be_smallest`, in node order.
    kept.iter()
        .map(|&j| {
            intervals
                .get(j as usize)
                .map_or(0.0, |interval| interval[0])
        })
        .fold(f32::INFINITY, |lo, v| if v < lo { v } else { lo })
}

/// What a bounded retrieval needs of the candidates besides their relevance, found while the
/// int4 scan runs (see [`EmbeddingStore::probe`]): in `raw` (the candidates as
/// [`fill_candidate_parts`] leaves them) the recency and importance terms,
/// `w.recency × normalised recency` and `w.importance × normalised importance`; and each
/// candidate's row, and its level — int4 for now, exact for a row past the store's end (whose
/// relevance reads 0, exactly).
fn candidate_columns(
    raw: &mut Raw,
    rows: &mut Vec<u32>,
    levels: &mut Vec<Level>,
    memory: &AssociativeMemory,
    w: RetrievalWeights,
) {
    let (rec, imp) = (raw.recency_range(), raw.importance_range());
    scale_normalised(&mut raw.recency, w.recency, rec);
    scale_normalised(&mut raw.importance, w.importance, imp);
    let cols = &memory.columns;
    rows.clear();
    rows.extend(
        raw.ids
            .iter()
            .map(|&id| cols.row.get(id as usize).copied().unwrap_or_default()),
    );
    let stored = memory.embeddings().len();
    levels.clear();
    levels.resize(rows.len(), Level::Coarse);
    for (level, &row) in levels.iter_mut().zip(rows.iter()) {
        if row as usize >= stored {
            *level = Level::Exact;
        }
    }
}

/// Each candidate's int4 interval (`coarse[row]`; `[0, 0]` for a row past the store's end),
/// into `scratch.intervals`, with the worst upper and the best lower end of them all
/// (`scratch.ends`) and, per block of [`NTH_BLOCK`] candidates, the lowest lower and highest
/// upper end (`scratch.settle.lows` and `highs`, for [`range_ends`]) — one pass, the extents
/// in eight lanes the compiler vectorises.
fn gather_intervals(scratch: &mut Scratch, coarse: &[[f32; 2]]) {
    let Scratch {
        rows,
        intervals,
        ends,
        settle,
        ..
    } = scratch;
    intervals.clear();
    intervals.extend(
        rows.iter()
            .map(|&row| coarse.get(row as usize).copied().unwrap_or([0.0; 2])),
    );
    settle.lows.clear();
    settle.highs.clear();
    // Per lane, over every block: the lowest upper end and the highest lower end.
    let (mut worst, mut best) = ([f32::INFINITY; 8], [f32::NEG_INFINITY; 8]);
    for block in intervals.chunks(NTH_BLOCK) {
        let (lanes, tail) = block.as_chunks::<8>();
        let mut lo8 = [f32::INFINITY; 8];
        let mut hi8 = [f32::NEG_INFINITY; 8];
        let mut worst8 = [f32::INFINITY; 8];
        let mut best8 = [f32::NEG_INFINITY; 8];
        for lane in lanes {
            for (j, &[lo, hi]) in lane.iter().enumerate() {
                lo8[j] = lo8[j].min(lo);
                hi8[j] = hi8[j].max(hi);
                worst8[j] = worst8[j].min(hi);
                best8[j] = best8[j].max(lo);
            }
        }
        for &[lo, hi] in tail {
            lo8[0] = lo8[0].min(lo);
            hi8[0] = hi8[0].max(hi);
            worst8[0] = worst8[0].min(hi);
            best8[0] = best8[0].max(lo);
        }
        settle
            .lows
            .push(lo8.iter().fold(f32::INFINITY, |m, &v| m.min(v)));
        settle
            .highs
            .push(hi8.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v)));
        for j in 0..8 {
            worst[j] = worst[j].min(worst8[j]);
            best[j] = best[j].max(best8[j]);
        }
    }
    *ends = [
        worst.iter().fold(f32::INFINITY, |m, &v| m.min(v)),
        best.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v)),
    ];
}

/// `values[i] = weight × range.apply(values[i])` for every value, the flat case taken out of
/// the loop so the compiler vectorises it (the same numbers as `apply`).
fn scale_normalised(values: &mut [f32], weight: f32, range: Range) {
    match range.inv_span {
        Some(inv) => {
            for v in values {
                *v = weight * ((*v - range.min) * inv);
            }
        }
        None => values.fill(weight * 0.5),
    }
}

/// How far a candidate's relevance has been narrowed (in that order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Level {
    /// The int4 interval.
    Coarse,
    /// The int8 interval.
    Fine,
    /// The exact cosine.
    Exact,
}

/// [`new_retrieve`] for several focal points, in order, as Smallville does it: each retrieval
/// sees the `last_accessed` updates of the ones before. Keyed by focal-point text (a repeated
/// text keeps its last result). Every embedding is checked before anything changes.
pub fn new_retrieve_many(
    memory: &mut AssociativeMemory,
    focal_points: &[(String, Vec<f32>)],
    now: NaiveDateTime,
    n: usize,
    params: &RetrievalParams,
) -> Result<BTreeMap<String, Vec<NodeId>>, MemoryError> {
    if !memory.embeddings().is_empty() {
        for (_, embedding) in focal_points {
            memory.embeddings().validate("<focal point>", embedding)?;
        }
    }
    let mut out = BTreeMap::new();
    for (text, embedding) in focal_points {
        out.insert(
            text.clone(),
            new_retrieve(memory, embedding, now, n, params)?,
        );
    }
    Ok(out)
}

/// Every candidate's score breakdown, best first (ties newer node first). Changes nothing.
pub fn score_breakdown(
    memory: &AssociativeMemory,
    focal: &[f32],
    now: NaiveDateTime,
    params: &RetrievalParams,
) -> Result<Vec<ScoredNode>, MemoryError> {
    // Auto ranks exactly (see `bounded_top_n`), so the breakdown shows exact cosines too.
    let params = &RetrievalParams {
        precision: match params.precision {
            RelevancePrecision::Auto => RelevancePrecision::Exact,
            other => other,
        },
        ..*params
    };
    let raw = raw_components(memory, focal, now, params)?;
    let weights = params.effective_weights();
    let (rec, rel, imp) = (
        raw.recency_range(),
        raw.relevance_range(),
        raw.importance_range(),
    );
    let mut nodes: Vec<ScoredNode> = (0..raw.ids.len())
        .map(|i| {
            let (recency_norm, relevance_norm, importance_norm) = (
                rec.apply(raw.recency[i]),
                rel.apply(raw.relevance[i]),
                imp.apply(raw.importance[i]),
            );
            ScoredNode {
                id: NodeId(raw.ids[i]),
                recency: raw.recency[i],
                relevance: raw.relevance[i],
                importance: raw.importance[i],
                recency_norm,
                relevance_norm,
                importance_norm,
                score: weights.recency * recency_norm
                    + weights.relevance * relevance_norm
                    + weights.importance * importance_norm,
            }
        })
        .collect();
    nodes.sort_unstable_by(|a, b| by_rank(&(a.score, a.id.0), &(b.score, b.id.0)));
    Ok(nodes)
}

/// Best first: higher score, then the newer (higher) id.
fn by_rank(a: &(f32, u32), b: &(f32, u32)) -> std::cmp::Ordering {
    b.0.total_cmp(&a.0).then(b.1.cmp(&a.1))
}

/// A scored node ordered by rank *backwards* (`Greater` = worse), so a max-heap of them keeps
/// its worst member on top.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Ranked(f32, u32);

impl Eq for Ranked {}

impl PartialOrd for Ranked {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Ranked {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        by_rank(&(self.0, self.1), &(other.0, other.1))
    }
}

/// The `n` best of `scored`, best first, kept in a heap of `n` as they stream by (most nodes
/// cost one comparison with the worst kept so far; no list of every score is built).
fn top_n(scored: impl IntoIterator<Item = (f32, u32)>, n: usize) -> Vec<NodeId> {
    if n == 0 {
        return Vec::new();
    }
    let mut best: BinaryHeap<Ranked> = BinaryHeap::new();
    for (score, id) in scored {
        let candidate = Ranked(score, id);
        if best.len() < n {
            best.push(candidate);
        } else if let Some(mut worst) = best.peek_mut()
            && candidate < *worst
        {
            *worst = candidate;
        }
    }
    let mut best = best.into_vec();
    best.sort_unstable();
    best.into_iter().map(|Ranked(_, id)| NodeId(id)).collect()
}

/// Min–max normalisation of one component.
#[derive(Debug, Clone, Copy)]
struct Range {
    min: f32,
    /// `1 / (max - min)`, or `None` for a flat range.
    inv_span: Option<f32>,
}

impl Range {
    fn new(min: f32, max: f32) -> Self {
        let span = max - min;
        Self {
            min,
            inv_span: (span >= FLAT_RANGE_EPSILON).then(|| 1.0 / span),
        }
    }

    fn apply(self, v: f32) -> f32 {
        self.inv_span.map_or(0.5, |inv| (v - self.min) * inv)
    }
}

/// Raw components of every candidate, in node order, with their normalisations.
struct Raw {
    ids: Vec<u32>,
    recency: Vec<f32>,
    relevance: Vec<f32>,
    importance: Vec<f32>,
    /// Recency, relevance and importance ranges.
    ranges: [Range; 3],
}

impl Raw {
    fn recency_range(&self) -> Range {
        self.ranges[0]
    }
    fn relevance_range(&self) -> Range {
        self.ranges[1]
    }
    fn importance_range(&self) -> Range {
        self.ranges[2]
    }

    fn scores(&self, w: RetrievalWeights) -> impl Iterator<Item = (f32, u32)> + '_ {
        let (rec, rel, imp) = (
            self.recency_range(),
            self.relevance_range(),
            self.importance_range(),
        );
        self.ids
            .iter()
            .zip(&self.recency)
            .zip(&self.relevance)
            .zip(&self.importance)
            .map(move |(((&id, &r), &l), &i)| {
                (
                    w.recency * rec.apply(r)
                        + w.relevance * rel.apply(l)
                        + w.importance * imp.apply(i),
                    id,
                )
            })
    }
}

fn raw_components(
    memory: &AssociativeMemory,
    focal: &[f32],
    now: NaiveDateTime,
    params: &RetrievalParams,
) -> Result<Raw, MemoryError> {
    let mut raw = candidate_parts(memory, now, params);
    // Only the candidates' rows are scored: chats and idle events are never candidates, and
    // many nodes share a row (one event seen again and again).
    let mut wanted = vec![false; memory.embeddings().len()];
    for &i in &raw.ids {
        if let Some(slot) = memory
            .columns
            .row
            .get(i as usize)
            .and_then(|&row| wanted.get_mut(row as usize))
        {
            *slot = true;
        }
    }
    let rows = memory
        .embeddings()
        .relevance_where(focal, params.precision, Some(&wanted))?;
    fill_relevance(&mut raw, memory, &rows);
    Ok(raw)
}

/// The candidates of a retrieval — events and thoughts that are not idle and have not expired
/// at `now` — in node order, with raw recency and importance and those two ranges (the
/// relevance range is left flat for the caller).
fn candidate_parts(
    memory: &AssociativeMemory,
    now: NaiveDateTime,
    params: &RetrievalParams,
) -> Raw {
    let mut raw = Raw {
        ids: Vec::new(),
        recency: Vec::new(),
        relevance: Vec::new(),
        importance: Vec::new(),
        ranges: [Range::new(0.0, 0.0); 3],
    };
    fill_candidate_parts(&mut raw, memory, now, params);
    raw
}

/// [`candidate_parts`] into `raw`'s buffers (cleared first).
fn fill_candidate_parts(
    raw: &mut Raw,
    memory: &AssociativeMemory,
    now: NaiveDateTime,
    params: &RetrievalParams,
) {
    let now_s = epoch_seconds(now);
    let ln_decay = params.ln_decay();
    let cols = &memory.columns;
    // `ids` is sized below, every slot kept written first.
    raw.recency.clear();
    raw.relevance.clear();
    raw.importance.clear();
    // No candidates: never applied.
    raw.ranges = [Range::new(0.0, 0.0); 3];
    // The candidates first, in a branch-free pass (a memory is left out at random, idle or
    // expired, so a branch would be mispredicted often); then each component in a pass of its
    // own over them: simple gathers with the extents, and a recency pass the compiler
    // vectorises.
    let now_ok = |expiration: i64| expiration > now_s;
    let len = cols.candidate.len().min(cols.expiration.len());
    raw.ids.resize(len, 0);
    let slots = raw.ids.as_mut_slice();
    let mut kept = 0;
    for (i, (&candidate, &expiration)) in cols.candidate.iter().zip(&cols.expiration).enumerate() {
        if let Some(slot) = slots.get_mut(kept) {
            *slot = i as u32;
        }
        kept += usize::from(candidate & now_ok(expiration));
    }
    raw.ids.truncate(kept);
    let hours_since = |accessed: i64| (now_s - accessed).max(0) as f32 / 3600.0;
    let (mut accessed_lo, mut accessed_hi) = (i64::MAX, i64::MIN);
    // A last_accessed in the future (an edited save) counts as "just now".
    raw.recency.extend(raw.ids.iter().map(|&i| {
        let accessed = cols
            .last_accessed
            .get(i as usize)
            .copied()
            .unwrap_or_default();
        accessed_lo = accessed_lo.min(accessed);
        accessed_hi = accessed_hi.max(accessed);
        hours_since(accessed) * ln_decay
    }));
    let (mut poignancy_lo, mut poignancy_hi) = (u8::MAX, u8::MIN);
    raw.importance.extend(raw.ids.iter().map(|&i| {
        let poignancy = cols.poignancy.get(i as usize).copied().unwrap_or_default();
        poignancy_lo = poignancy_lo.min(poignancy);
        poignancy_hi = poignancy_hi.max(poignancy);
        f32::from(poignancy)
    }));
    for r in &mut raw.recency {
        *r = exp_non_positive(*r);
    }
    if !raw.ids.is_empty() {
        // Recency falls with the hours since access: the oldest access is the least recent.
        raw.ranges = [
            Range::new(
                exp_non_positive(hours_since(accessed_lo) * ln_decay),
                exp_non_positive(hours_since(accessed_hi) * ln_decay),
            ),
            Range::new(0.0, 0.0),
            Range::new(f32::from(poignancy_lo), f32::from(poignancy_hi)),
        ];
    }
}

/// [`raw_components`] with each row's relevance given (`rows[r]`; a missing row reads 0).
fn raw_components_from(
    memory: &AssociativeMemory,
    now: NaiveDateTime,
    params: &RetrievalParams,
    rows: &[f32],
) -> Raw {
    let mut raw = candidate_parts(memory, now, params);
    fill_relevance(&mut raw, memory, rows);
    raw
}

/// The candidates' relevance and its range, from each row's (`rows[r]`; a missing row reads 0).
fn fill_relevance(raw: &mut Raw, memory: &AssociativeMemory, rows: &[f32]) {
    let cols = &memory.columns;
    let (mut relevance_lo, mut relevance_hi) = (f32::INFINITY, f32::NEG_INFINITY);
    raw.relevance = raw
        .ids
        .iter()
        .map(|&i| {
            let row = cols.row.get(i as usize).copied().unwrap_or_default();
            let relevance = rows.get(row as usize).copied().unwrap_or(0.0);
            if relevance < relevance_lo {
                relevance_lo = relevance;
            }
            if relevance > relevance_hi {
                relevance_hi = relevance;
            }
            relevance
        })
        .collect();
    if !raw.ids.is_empty() {
        raw.ranges[1] = Range::new(relevance_lo, relevance_hi);
    }
}

/// `e^x` for `x ≤ 0` (larger `x` counts as 0), within 2 ulp of the exact value, in straight-line
/// arithmetic the compiler vectorises (a library `exp` is a call per memory, the largest cost of
/// scoring 100,000 memories after the relevance scan). Below −87 the result is 0, as `f32`
/// underflows there anyway.
///
/// `e^x = 2^n · e^y` with `n` the integer nearest `x · log₂e` and `y = x − n·ln 2`, `|y| ≤ 0.35`;
/// `e^y` by its Taylor series to the 7th power (error below 1e-8 there); `2^n` is put straight
/// into the exponent bits.
fn exp_non_positive(x: f32) -> f32 {
    const LOG2_E: f32 = std::f32::consts::LOG2_E;
    // ln 2 split in two (Cody–Waite): `n · LN_2_HI` is exact for |n| < 2⁹, so `x − n·ln 2`
    // keeps its low bits even where x is large.
    const LN_2_HI: f32 = 0.693_359_4;
    const LN_2_LO: f32 = -2.121_944_4e-4;
    // Adding and subtracting 1.5 · 2²³ rounds to the nearest integer in plain f32 arithmetic.
    const ROUND: f32 = 12_582_912.0;
    let x = x.clamp(-87.0, 0.0);
    let shifted = x * LOG2_E + ROUND;
    let n = shifted - ROUND;
    let y = (x - n * LN_2_HI) - n * LN_2_LO;
    let p = 1.0
        + y * (1.0
            + y * (1.0 / 2.0
                + y * (1.0 / 6.0
                    + y * (1.0 / 24.0
                        + y * (1.0 / 120.0 + y * (1.0 / 720.0 + y * (1.0 / 5040.0)))))));
    // n ∈ [−126, 0]: 2ⁿ is a normal float with biased exponent n + 127. `shifted` holds n in
    // its low bits (1.5 · 2²³ has an ulp of 1), so n + 127 is integer arithmetic on its bits: a
    // float-to-integer conversion (`as i32`, which saturates) kept the loop from vectorising.
    let biased = shifted
        .to_bits()
        .wrapping_sub(ROUND.to_bits())
        .wrapping_add(127);
    let two_n = f32::from_bits(biased << 23);
    // x = −87 rounds to n = −126 with p < 1, still a normal float (e^−87 ≈ 1.6e−38).
    if x <= -87.0 { 0.0 } else { two_n * p }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::NewMemory;
    use chrono::NaiveDate;

    fn at(hour: u32) -> NaiveDateTime {
        NaiveDate::from_ymd_opt(2023, 2, 13)
            .and_then(|d| d.and_hms_opt(hour, 0, 0))
            .expect("valid time")
    }

    #[test]
    fn fast_exp_matches_the_library_within_two_ulp() {
        let mut worst = 0f64;
        let mut x = 0f32;
        while x > -87.0 {
            let exact = f64::from(x).exp();
            let got = f64::from(exp_non_positive(x));
            worst = worst.max(((got - exact) / exact).abs());
            x -= 0.0137;
        }
        assert!(worst < 2.5e-7, "worst relative error {worst}");
        assert_eq!(exp_non_positive(0.0), 1.0);
        assert_eq!(exp_non_positive(-0.0), 1.0);
        assert_eq!(exp_non_positive(-1000.0), 0.0);
        assert_eq!(exp_non_positive(f32::NEG_INFINITY), 0.0);
        // The recency of SPEC §2: 0.995 per hour, 24 hours.
        let day = exp_non_positive(24.0 * 0.995f32.ln());
        assert!((day - 0.995f32.powi(24)).abs() < 1e-6, "{day}");
    }

    #[test]
    fn fast_exp_takes_two_to_the_n_from_bits_as_a_conversion_would() {
        // The same function with `2ⁿ` from `n as i32`, as it was written first: every result
        // is the same, bit for bit (recency scores, and so rankings, stay as they were).
        fn by_conversion(x: f32) -> f32 {
            let x = x.clamp(-87.0, 0.0);
            let n = (x * std::f32::consts::LOG2_E + 12_582_912.0) - 12_582_912.0;
            let y = (x - n * 0.693_359_4) - n * -2.121_944_4e-4;
            let p = 1.0
                + y * (1.0
                    + y * (1.0 / 2.0
                        + y * (1.0 / 6.0
                            + y * (1.0 / 24.0
                                + y * (1.0 / 120.0 + y * (1.0 / 720.0 + y * (1.0 / 5040.0)))))));
            let two_n = f32::from_bits((((n as i32) + 127) as u32) << 23);
            if x <= -87.0 { 0.0 } else { two_n * p }
        }
        let mut x = 0.5f32;
        while x > -100.0 {
            assert_eq!(
                exp_non_positive(x).to_bits(),
                by_conversion(x).to_bits(),
                "{x}"
            );
            x -= 0.000_731;
        }
        for x in [0.0, -0.0, -87.0, -86.999, f32::NEG_INFINITY, -1e30] {
            assert_eq!(
                exp_non_positive(x).to_bits(),
                by_conversion(x).to_bits(),
                "{x}"
            );
        }
    }

    #[test]
    fn range_normalises_and_flat_gives_half() {
        let r = Range::new(2.0, 4.0);
        assert_eq!((r.apply(2.0), r.apply(3.0), r.apply(4.0)), (0.0, 0.5, 1.0));
        let flat = Range::new(0.7, 0.7 + 1e-8);
        assert_eq!(flat.apply(0.7), 0.5);
    }

    #[test]
    fn top_n_breaks_ties_newest_first() {
        let scored = vec![(1.0, 0), (2.0, 1), (2.0, 2), (0.5, 3), (2.0, 4)];
        assert_eq!(
            top_n(scored.clone(), 3),
            vec![NodeId(4), NodeId(2), NodeId(1)]
        );
        assert_eq!(top_n(scored.clone(), 10).len(), 5);
        assert!(top_n(scored, 0).is_empty());
    }

    #[test]
    fn streaming_top_n_equals_a_full_sort() {
        // Few distinct scores, so ties (broken by id) are everywhere.
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let scored: Vec<(f32, u32)> = (0..2_000u32)
            .map(|id| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                ((state % 50) as f32 / 7.0, id)
            })
            .collect();
        let mut sorted = scored.clone();
        sorted.sort_by(by_rank);
        for n in [1, 2, 30, 1_999, 2_000, 5_000] {
            let expected: Vec<NodeId> = sorted.iter().take(n).map(|&(_, id)| NodeId(id)).collect();
            assert_eq!(top_n(scored.iter().copied(), n), expected, "n = {n}");
        }
    }

    /// A seeded xorshift stream of 64-bit numbers, for the random stores below.
    fn xorshift(seed: u64) -> impl FnMut() -> u64 {
        let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        }
    }

    /// A store of `rows` distinct vectors of `dim` numbers: `cluster` > 0 draws them near a few
    /// centres (many cosines almost equal, wide overlapping intervals), and `dupes` repeats
    /// texts (one row shared by several nodes: ties everywhere).
    fn random_memory(
        seed: u64,
        rows: usize,
        dim: usize,
        cluster: usize,
        dupes: bool,
    ) -> (AssociativeMemory, NaiveDateTime) {
        let mut bits = xorshift(seed);
        let mut next = move || (bits() >> 40) as f32 / (1u64 << 24) as f32 - 0.5;
        let centres: Vec<Vec<f32>> = (0..cluster.max(1))
            .map(|_| (0..dim).map(|_| next()).collect())
            .collect();
        let mut memory = AssociativeMemory::new("test", dim);
        let mut now = at(0);
        for i in 0..rows {
            now += chrono::TimeDelta::seconds(30);
            let centre = &centres[i % centres.len()];
            let vector: Vec<f32> = centre
                .iter()
                .map(|&c| {
                    if cluster > 0 {
                        c + 0.01 * next()
                    } else {
                        next()
                    }
                })
                .collect();
            let text = if dupes && i % 3 == 0 {
                format!("shared {}", i % 11)
            } else {
                format!("event {i}")
            };
            let poignancy = 1 + (next().abs() * 18.0) as u8 % 10;
            let result = memory.add_event(
                NewMemory::new(now, ("Ana", "is", text.clone()), text)
                    .poignancy(poignancy)
                    .embedding(vector),
                vec![],
            );
            assert!(result.is_ok(), "{result:?}");
            if i % 7 == 0 {
                memory.set_last_accessed(&[NodeId(i as u32 / 2)], now);
            }
        }
        (memory, now + chrono::TimeDelta::hours(1))
    }

    #[test]
    fn auto_ranks_large_stores_exactly_as_the_exact_scan() {
        // 2²⁰ numbers and more: Auto reads the int8 copy and must still rank exactly.
        let dim = 64;
        let rows = super::super::embedding::AUTO_QUANTIZE_MIN_ELEMENTS / dim * 3 / 2;
        let weight_sets = [
            RetrievalWeights::default(),
            RetrievalWeights {
                recency: 0.0,
                relevance: 1.0,
                importance: 0.0,
            },
            RetrievalWeights {
                recency: 1.0,
                relevance: 0.05,
                importance: 1.0,
            },
            RetrievalWeights {
                recency: 0.5,
                relevance: -2.0,
                importance: 1.0,
            },
        ];
        for (seed, cluster, dupes) in [(1, 0, false), (2, 3, true), (3, 1, false)] {
            let (memory, now) = random_memory(seed, rows, dim, cluster, dupes);
            assert!(
                memory
                    .embeddings()
                    .scans_quantized(RelevancePrecision::Auto)
            );
            let mut focal_state = seed + 99;
            for (q, weights) in weight_sets.iter().enumerate() {
                let focal: Vec<f32> = (0..dim)
                    .map(|d| {
                        focal_state = focal_state
                            .wrapping_mul(6364136223846793005)
                            .wrapping_add(1442695040888963407);
                        let noise = (focal_state >> 40) as f32 / (1u64 << 24) as f32 - 0.5;
                        if q == 1 {
                            memory.embeddings().vector(5).map_or(0.0, |v| v[d]) + 0.001 * noise
                        } else {
                            noise
                        }
                    })
                    .collect();
                for n in [1, 30, 200] {
                    let exact_params = RetrievalParams {
                        weights: *weights,
                        precision: RelevancePrecision::Exact,
                        ..RetrievalParams::default()
                    };
                    let auto_params = RetrievalParams {
                        precision: RelevancePrecision::Auto,
                        ..exact_params
                    };
                    let (mut a, mut b) = (memory.clone(), memory.clone());
                    let exact = new_retrieve(&mut a, &focal, now, n, &exact_params).expect("exact");
                    let auto = new_retrieve(&mut b, &focal, now, n, &auto_params).expect("auto");
                    assert_eq!(auto, exact, "seed {seed}, weights {weights:?}, n {n}");
                }
            }
        }
    }

    /// A memory for [`auto_ranks_exactly_on_random_stores`] whose store holds at least `rows`
    /// vectors of `dim` numbers, shaped by `shape` — 0: independent random vectors; 1: near a
    /// few centres (cosines almost equal, wide overlapping intervals); 2: half the memories
    /// one of a few dozen vectors (one of them zero), each under a few texts, so many memories
    /// share a row; 3: half the memories one of four vectors (two of them zero), with
    /// poignancy and access times from a handful, so exactly equal scores are everywhere (the
    /// first memories are of these; row 3 is one of the four). Thoughts (some expired by
    /// `now`), idle events and chats (never candidates) are mixed in.
    fn varied_memory(
        seed: u64,
        rows: usize,
        dim: usize,
        shape: u8,
    ) -> (AssociativeMemory, NaiveDateTime) {
        let mut next = xorshift(seed);
        let unit =
            |next: &mut dyn FnMut() -> u64| (next() >> 40) as f32 / (1u64 << 24) as f32 - 0.5;
        let distinct = match shape {
            2 => 40,
            3 => 4,
            _ => 5,
        };
        let palette: Vec<Vec<f32>> = (0..distinct)
            .map(|v| {
                let zero = (shape == 2 && v == 0) || (shape == 3 && v < 2);
                (0..dim)
                    .map(|_| if zero { 0.0 } else { unit(&mut next) })
                    .collect()
            })
            .collect();
        let mut memory = AssociativeMemory::new("test", dim);
        let start = at(0);
        let mut now = start;
        let mut i = 0usize;
        while memory.embeddings().len() < rows {
            i += 1;
            if shape != 3 {
                now += chrono::TimeDelta::seconds(30);
            }
            let pick = (next() % distinct as u64) as usize;
            let shared = shape >= 2 && (i <= 8 || next().is_multiple_of(2));
            let (text, vector): (String, Vec<f32>) = if shared {
                (format!("shared {pick} {}", i % 3), palette[pick].clone())
            } else if shape == 1 {
                let vector = palette[pick]
                    .iter()
                    .map(|&c| c + 0.01 * unit(&mut next))
                    .collect();
                (format!("event {i}"), vector)
            } else {
                let vector = (0..dim).map(|_| unit(&mut next)).collect();
                (format!("event {i}"), vector)
            };
            let poignancy = if shape == 3 {
                1 + (next() % 3) as u8 * 4
            } else {
                1 + (next() % 10) as u8
            };
            let kind = if i <= 8 { 10 } else { next() % 20 };
            let result = match kind {
                0 => memory.add_event(
                    NewMemory::new(
                        now,
                        ("lamp", "is", "idle"),
                        format!("lamp {} is idle", i % 5),
                    )
                    .embedding(vector),
                    vec![],
                ),
                1 => memory.add_chat(
                    NewMemory::new(now, ("Ana", "chat with", "Ben"), format!("chat {i}"))
                        .poignancy(poignancy)
                        .embedding(vector),
                    vec![],
                ),
                2..=5 => {
                    let lifetime = if kind == 2 {
                        chrono::TimeDelta::minutes(1)
                    } else {
                        chrono::TimeDelta::days(30)
                    };
                    memory.add_thought(
                        NewMemory::new(now, ("Ana", "thinks", text.clone()), text)
                            .poignancy(poignancy)
                            .expires(now + lifetime)
                            .embedding(vector),
                        vec![],
                    )
                }
                _ => memory.add_event(
                    NewMemory::new(now, ("Ana", "is", text.clone()), text)
                        .poignancy(poignancy)
                        .embedding(vector),
                    vec![],
                ),
            };
            assert!(result.is_ok(), "{result:?}");
            if next().is_multiple_of(9) {
                let accessed = NodeId((next() % i as u64) as u32);
                let when = if shape == 3 {
                    start + chrono::TimeDelta::hours((next() % 3) as i64)
                } else {
                    now
                };
                memory.set_last_accessed(&[accessed], when);
            }
        }
        (memory, now + chrono::TimeDelta::hours(2))
    }

    proptest::proptest! {
        // Each case builds a store large enough for the int4 copy (2²⁰ numbers and more),
        // which takes a while in a debug build: few cases, each checking several n.
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(10))]

        /// Auto returns the exact scan's top n — the same ids in the same order — whatever the
        /// store holds (random, clustered, shared rows, zero vectors, exact ties), the focal
        /// point (random, on a stored row, near one, zero), the weights (one negative, one
        /// zero) and n.
        #[test]
        fn auto_ranks_exactly_on_random_stores(
            seed in proptest::prelude::any::<u64>(),
            dim in proptest::prop_oneof![
                proptest::strategy::Just(64usize),
                proptest::strategy::Just(128),
                proptest::strategy::Just(384),
            ],
            extra_rows in 0usize..2_000,
            shape in 0u8..4,
            focal_kind in 0u8..4,
            weights in 0usize..5,
            n in 0usize..400,
        ) {
            let rows = super::super::embedding::AUTO_QUANTIZE_MIN_ELEMENTS.div_ceil(dim) + extra_rows;
            let (memory, now) = varied_memory(seed, rows, dim, shape);
            proptest::prop_assert!(memory.embeddings().scans_quantized(RelevancePrecision::Auto));
            let mut state = seed ^ 0xF0CA1;
            let mut noise = move || {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5
            };
            let on = if shape >= 2 { 3 } else { rows / 3 };
            let stored = memory.embeddings().vector(on).map(<[f32]>::to_vec);
            let focal: Vec<f32> = match (focal_kind, stored) {
                (0, Some(row)) => row,
                (1, Some(row)) => row.iter().map(|&v| v + 0.001 * noise()).collect(),
                (2, _) => vec![0.0; dim],
                _ => (0..dim).map(|_| noise()).collect(),
            };
            let weights = [
                RetrievalWeights::default(),
                [0.0, 1.0, 0.0].into(),
                [1.0, 0.05, 1.0].into(),
                [0.5, -2.0, 1.0].into(),
                [1.0, 0.0, 2.0].into(),
            ][weights];
            for n in [1, 30, n] {
                let exact_params = RetrievalParams {
                    weights,
                    precision: RelevancePrecision::Exact,
                    ..RetrievalParams::default()
                };
                let auto_params = RetrievalParams {
                    precision: RelevancePrecision::Auto,
                    ..exact_params
                };
                let exact = retrieve_unmarked(&memory, &focal, now, n, &exact_params)
                    .map_err(|err| err.to_string());
                let auto = retrieve_unmarked(&memory, &focal, now, n, &auto_params)
                    .map_err(|err| err.to_string());
                proptest::prop_assert_eq!(auto, exact, "n = {}", n);
            }
        }
    }

    #[test]
    fn nth_largest_is_the_nth_of_a_full_sort() {
        // Few distinct values (ties everywhere, both zeros among them) and many.
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        let mut scratch = Vec::new();
        for (len, distinct) in [(10, 3), (1_000, 5), (5_000, 1_000_000), (70_000, 40)] {
            let values: Vec<f32> = (0..len)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    let v = (state % distinct) as f32 - (distinct / 2) as f32;
                    if v == 0.0 && state.is_multiple_of(2) {
                        -0.0
                    } else {
                        v / 7.0
                    }
                })
                .collect();
            let mut sorted = values.clone();
            sorted.sort_by(|a, b| b.total_cmp(a));
            for n in [1, 2, 30, len / 2, len].into_iter().filter(|&n| n <= len) {
                let nth = nth_largest(&values, n, |v| v, &mut scratch);
                assert_eq!(nth, sorted[n - 1], "len {len}, n {n}");
            }
        }
    }

    #[test]
    fn the_bounds_hold_the_exact_cosines() {
        // 384 dims (whole int4 blocks) and 50 (a padded last block), both large enough to have
        // the int4 copy; and a store too small for it, whose probe gives the widest intervals.
        // A focal point on a stored row (cosines near 1) and a random one.
        for (dim, rows, cluster, has_int4) in [
            (384, 3_000, 2, true),
            (50, 21_000, 0, true),
            (50, 3_000, 0, false),
        ] {
            let (memory, _) = random_memory(5, rows, dim, cluster, false);
            let store = memory.embeddings();
            let on_row: Vec<f32> = store.vector(17).map(<[f32]>::to_vec).expect("a row");
            let random: Vec<f32> = (0..dim).map(|d| ((d * 37 % 11) as f32) - 5.0).collect();
            for focal in [on_row, random] {
                let probe = store
                    .probe(&focal, Vec::new(), || {})
                    .expect("valid")
                    .expect("not empty");
                let exact = store
                    .relevance(&focal, RelevancePrecision::Exact)
                    .expect("valid");
                let (mut widest_coarse, mut widest_fine) = (0f32, 0f32);
                for (row, &cosine) in exact.iter().enumerate() {
                    let [lo, hi] = probe.coarse[row];
                    assert!(
                        lo <= cosine && cosine <= hi,
                        "row {row}: {cosine} vs int4 [{lo}, {hi}]"
                    );
                    let [flo, fhi] = store.fine_interval(&probe, row);
                    assert!(
                        flo <= cosine && cosine <= fhi,
                        "row {row}: {cosine} vs int8 [{flo}, {fhi}]"
                    );
                    assert_eq!(
                        store.exact_relevance(&probe.query, row).to_bits(),
                        cosine.to_bits()
                    );
                    widest_coarse = widest_coarse.max(hi - lo);
                    widest_fine = widest_fine.max(fhi - flo);
                }
                // Tight enough to prune: int8 a few hundredths of a cosine at most, int4 a few
                // tenths, and int4 wider than int8.
                assert!(widest_fine < 0.05, "int8 width {widest_fine}");
                if has_int4 {
                    assert!(widest_coarse < 0.4, "int4 width {widest_coarse}");
                } else {
                    assert_eq!(widest_coarse, 4.0);
                }
                assert!(widest_coarse > widest_fine);
            }
        }
    }

    #[test]
    fn decay_is_sanitised() {
        let params = RetrievalParams {
            recency_decay: 2.0,
            ..RetrievalParams::default()
        };
        assert_eq!(params.ln_decay(), 0.0);
        let params = RetrievalParams {
            recency_decay: f32::NAN,
            ..RetrievalParams::default()
        };
        assert_eq!(params.ln_decay(), DEFAULT_RECENCY_DECAY.ln());
    }

    #[test]
    fn mismatched_focal_is_an_error_and_changes_nothing() {
        let mut mem = AssociativeMemory::new("test", 2);
        mem.add_event(
            NewMemory::new(at(1), ("a", "b", "c"), "a b c").embedding(vec![1.0, 0.0]),
            vec![],
        )
        .unwrap();
        let before = mem.clone();
        let focal = vec![
            ("ok".to_owned(), vec![1.0, 0.0]),
            ("bad".to_owned(), vec![1.0]),
        ];
        let err = new_retrieve_many(&mut mem, &focal, at(5), 3, &RetrievalParams::default());
        assert!(matches!(
            err,
            Err(MemoryError::DimensionMismatch {
                expected: 2,
                found: 1,
                ..
            })
        ));
        assert_eq!(mem, before);
    }
}
