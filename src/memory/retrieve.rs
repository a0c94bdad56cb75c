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
//! With [`RelevancePrecision::Auto`] (the default) a large store is scanned on its int8 copy
//! and still ranked exactly as the `f32` scan ranks it: every cosine comes with a proven
//! interval, and only the memories whose interval could change the range or the top `n` are
//! rescored exactly (about a hundred of 100,000 in the bench; see `bounded_top_n`).
//!
//! The scan reads the memory's flat per-node columns and the embedding store's chunked rows
//! (split over threads when the store is large, see [`EmbeddingStore`](super::EmbeddingStore));
//! the recency powers are computed in one vectorised pass, and the top `n` are kept in a heap
//! of `n` while the scores stream by, with no list of every score and no sort.

use std::collections::BTreeMap;

use bevy::prelude::Reflect;
use chrono::NaiveDateTime;
use serde::{Deserialize, Serialize};

use super::associative::epoch_seconds;
use super::embedding::RelevancePrecision;
use super::{AssociativeMemory, MemoryError, NodeId};

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
    let weights = params.effective_weights();
    let bounded = memory.embeddings().scans_quantized(params.precision)
        && params.precision == RelevancePrecision::Auto
        && [weights.recency, weights.relevance, weights.importance]
            .iter()
            .all(|w| w.is_finite());
    let top = if bounded {
        bounded_top_n(memory, focal, now, n, params)?
    } else {
        let raw = raw_components(memory, focal, now, params)?;
        top_n(raw.scores(weights), n)
    };
    memory.set_last_accessed(&top, now);
    Ok(top)
}

/// The exact top `n` at the cost of the int8 scan: bound, prune, rescore.
///
/// The int8 scan gives every row an interval proven to hold its exact cosine
/// ([`RelevanceBounds`]). The relevance range's ends are found exactly by rescoring only the
/// rows whose interval reaches past the best lower (worst upper) end; with the exact range,
/// every candidate's score has a lower and an upper bound (the score rises with relevance for a
/// non-negative weight; both ends are taken either way). The `n`-th best lower bound `L` is a
/// score at least `n` candidates reach, so a candidate whose upper bound is below `L` cannot be
/// among the top `n`; the rest are rescored exactly and ranked as the exact scan ranks them.
/// Same numbers, same formula, same tie-break: the result is the exact scan's, bit for bit
/// (`tests` compare them on random stores).
fn bounded_top_n(
    memory: &AssociativeMemory,
    focal: &[f32],
    now: NaiveDateTime,
    n: usize,
    params: &RetrievalParams,
) -> Result<Vec<NodeId>, MemoryError> {
    let store = memory.embeddings();
    let Some(bounds) = store.relevance_bounds(focal)? else {
        let raw = raw_components_from(memory, now, params, &[]);
        return Ok(top_n(raw.scores(params.effective_weights()), n));
    };
    let raw = raw_components_from(memory, now, params, &bounds.estimates);
    if raw.ids.is_empty() || n == 0 {
        return Ok(Vec::new());
    }
    let cols = &memory.columns;
    // The row each candidate reads, as the exact scan picks it (a missing row reads 0).
    let rows: Vec<Option<usize>> = raw
        .ids
        .iter()
        .map(|&i| {
            let row = cols.row.get(i as usize).copied().unwrap_or_default() as usize;
            (row < store.len()).then_some(row)
        })
        .collect();
    let interval = |k: usize| -> (f32, f32) {
        match rows[k] {
            Some(row) => {
                let (estimate, bound) = (
                    bounds.estimates.get(row).copied().unwrap_or(0.0),
                    bounds.bounds.get(row).copied().unwrap_or(f32::INFINITY),
                );
                (estimate - bound, estimate + bound)
            }
            None => (0.0, 0.0),
        }
    };
    let mut exact_rows: std::collections::HashMap<usize, f32> = std::collections::HashMap::new();
    let mut exact = |k: usize| -> f32 {
        rows[k].map_or(0.0, |row| {
            *exact_rows
                .entry(row)
                .or_insert_with(|| store.exact_relevance(&bounds.query, row))
        })
    };
    let intervals: Vec<(f32, f32)> = (0..raw.ids.len()).map(interval).collect();
    // The exact ends of the relevance range.
    let best_low = intervals
        .iter()
        .fold(f32::NEG_INFINITY, |m, &(lo, _)| m.max(lo));
    let worst_high = intervals
        .iter()
        .fold(f32::INFINITY, |m, &(_, hi)| m.min(hi));
    let (mut relevance_lo, mut relevance_hi) = (f32::INFINITY, f32::NEG_INFINITY);
    for (k, &(lo, hi)) in intervals.iter().enumerate() {
        if hi >= best_low || lo <= worst_high {
            let relevance = exact(k);
            if relevance < relevance_lo {
                relevance_lo = relevance;
            }
            if relevance > relevance_hi {
                relevance_hi = relevance;
            }
        }
    }
    let w = params.effective_weights();
    let (rec, rel, imp) = (
        raw.recency_range(),
        Range::new(relevance_lo, relevance_hi),
        raw.importance_range(),
    );
    let score = |k: usize, relevance: f32| {
        w.recency * rec.apply(raw.recency[k])
            + w.relevance * rel.apply(relevance)
            + w.importance * imp.apply(raw.importance[k])
    };
    // The score rises with relevance for a non-negative weight and falls for a negative one.
    let rising = w.relevance >= 0.0;
    let low_score = |k: usize| {
        let (lo, hi) = intervals[k];
        score(k, if rising { lo } else { hi })
    };
    let high_score = |k: usize| {
        let (lo, hi) = intervals[k];
        score(k, if rising { hi } else { lo })
    };
    // `L`: the n-th best lower bound (every candidate counts when there are at most n).
    let threshold = if raw.ids.len() <= n {
        f32::NEG_INFINITY
    } else {
        let mut best: std::collections::BinaryHeap<Ranked> =
            std::collections::BinaryHeap::with_capacity(n + 1);
        for (k, &id) in raw.ids.iter().enumerate() {
            let candidate = Ranked(low_score(k), id);
            if best.len() < n {
                best.push(candidate);
            } else if let Some(mut worst) = best.peek_mut()
                && candidate < *worst
            {
                *worst = candidate;
            }
        }
        best.peek().map_or(f32::NEG_INFINITY, |worst| worst.0)
    };
    let survivors: Vec<(f32, u32)> = (0..raw.ids.len())
        .filter(|&k| high_score(k) >= threshold)
        .map(|k| (score(k, exact(k)), raw.ids[k]))
        .collect();
    Ok(top_n(survivors, n))
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
    let mut best: std::collections::BinaryHeap<Ranked> = std::collections::BinaryHeap::new();
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
    let rows = memory.embeddings().relevance(focal, params.precision)?;
    Ok(raw_components_from(memory, now, params, &rows))
}

/// [`raw_components`] with each row's relevance given (`rows[r]`; a missing row reads 0).
fn raw_components_from(
    memory: &AssociativeMemory,
    now: NaiveDateTime,
    params: &RetrievalParams,
    rows: &[f32],
) -> Raw {
    let now_s = epoch_seconds(now);
    let ln_decay = params.ln_decay();
    let cols = &memory.columns;
    let mut raw = Raw {
        ids: Vec::with_capacity(cols.candidate.len()),
        recency: Vec::new(),
        relevance: Vec::new(),
        importance: Vec::new(),
        // No candidates: never applied.
        ranges: [Range::new(0.0, 0.0); 3],
    };
    // The candidates first, with cheap integer extents; then each component in a pass of its
    // own over them (simple gathers, and a recency pass the compiler vectorises).
    let hours_since = |accessed: i64| (now_s - accessed).max(0) as f32 / 3600.0;
    let (mut accessed_lo, mut accessed_hi) = (i64::MAX, i64::MIN);
    let (mut poignancy_lo, mut poignancy_hi) = (u8::MAX, u8::MIN);
    for (i, ((&candidate, &expiration), (&accessed, &poignancy))) in cols
        .candidate
        .iter()
        .zip(&cols.expiration)
        .zip(cols.last_accessed.iter().zip(&cols.poignancy))
        .enumerate()
    {
        if candidate && expiration > now_s {
            accessed_lo = accessed_lo.min(accessed);
            accessed_hi = accessed_hi.max(accessed);
            poignancy_lo = poignancy_lo.min(poignancy);
            poignancy_hi = poignancy_hi.max(poignancy);
            raw.ids.push(i as u32);
        }
    }
    let column = |values: &[i64], i: u32| values.get(i as usize).copied().unwrap_or_default();
    // A last_accessed in the future (an edited save) counts as "just now".
    raw.recency = raw
        .ids
        .iter()
        .map(|&i| hours_since(column(&cols.last_accessed, i)) * ln_decay)
        .collect();
    raw.importance = raw
        .ids
        .iter()
        .map(|&i| f32::from(cols.poignancy.get(i as usize).copied().unwrap_or_default()))
        .collect();
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
            Range::new(relevance_lo, relevance_hi),
            Range::new(f32::from(poignancy_lo), f32::from(poignancy_hi)),
        ];
    }
    raw
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
    let n = (x * LOG2_E + ROUND) - ROUND;
    let y = (x - n * LN_2_HI) - n * LN_2_LO;
    let p = 1.0
        + y * (1.0
            + y * (1.0 / 2.0
                + y * (1.0 / 6.0
                    + y * (1.0 / 24.0
                        + y * (1.0 / 120.0 + y * (1.0 / 720.0 + y * (1.0 / 5040.0)))))));
    // n ∈ [−126, 0]: 2ⁿ is a normal float with biased exponent n + 127.
    let two_n = f32::from_bits((((n as i32) + 127) as u32) << 23);
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
        let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5
        };
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

    #[test]
    fn the_bounds_hold_the_exact_cosines() {
        let dim = 384;
        let (memory, _) = random_memory(5, 3_000, dim, 2, false);
        let store = memory.embeddings();
        let focal: Vec<f32> = store.vector(17).map(<[f32]>::to_vec).expect("a row");
        let bounds = store
            .relevance_bounds(&focal)
            .expect("valid")
            .expect("not empty");
        let exact = store
            .relevance(&focal, RelevancePrecision::Exact)
            .expect("valid");
        let mut widest = 0f32;
        for (row, &cosine) in exact.iter().enumerate() {
            let (estimate, bound) = (bounds.estimates[row], bounds.bounds[row]);
            assert!(
                (cosine - estimate).abs() <= bound,
                "row {row}: {cosine} vs {estimate} ± {bound}"
            );
            assert_eq!(
                store.exact_relevance(&bounds.query, row).to_bits(),
                cosine.to_bits()
            );
            widest = widest.max(bound);
        }
        // Tight enough to prune: a few hundredths of a cosine at most.
        assert!(widest < 0.05, "bound {widest}");
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
