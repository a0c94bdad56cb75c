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
    pub fn effective_weights(&self) -> RetrievalWeights {
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
    let raw = raw_components(memory, focal, now, params)?;
    let top = top_n(raw.scores(params.effective_weights()), n);
    memory.set_last_accessed(&top, now);
    Ok(top)
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
    Ok(raw)
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
