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
//! The scan reads the memory's flat per-node columns and the embedding store's contiguous rows;
//! the top `n` are found with a partial selection, not a full sort.

use std::collections::BTreeMap;

use bevy::prelude::Reflect;
use chrono::NaiveDateTime;
use serde::{Deserialize, Serialize};

use super::associative::epoch_seconds;
use super::embedding::RelevancePrecision;
use super::{AssociativeMemory, MemoryError, NodeId};

/// A min–max range narrower than this counts as flat (every value normalises to 0.5).
pub const FLAT_RANGE_EPSILON: f32 = 1e-6;

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
    let top = top_n(raw.scores(&params.effective_weights()), n);
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

/// The `n` best of `scored`, best first, via a partial selection.
fn top_n(mut scored: Vec<(f32, u32)>, n: usize) -> Vec<NodeId> {
    if n == 0 {
        return Vec::new();
    }
    if scored.len() > n {
        scored.select_nth_unstable_by(n - 1, by_rank);
        scored.truncate(n);
    }
    scored.sort_unstable_by(by_rank);
    scored.into_iter().map(|(_, id)| NodeId(id)).collect()
}

/// Min–max normalisation of one component.
#[derive(Debug, Clone, Copy)]
struct Range {
    min: f32,
    /// `1 / (max - min)`, or `None` for a flat range.
    inv_span: Option<f32>,
}

impl Range {
    fn of(values: &[f32]) -> Self {
        let (min, max) = values
            .iter()
            .fold((f32::INFINITY, f32::NEG_INFINITY), |(lo, hi), &v| {
                (lo.min(v), hi.max(v))
            });
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

/// Raw components of every candidate, in node order.
struct Raw {
    ids: Vec<u32>,
    recency: Vec<f32>,
    relevance: Vec<f32>,
    importance: Vec<f32>,
}

impl Raw {
    fn recency_range(&self) -> Range {
        Range::of(&self.recency)
    }
    fn relevance_range(&self) -> Range {
        Range::of(&self.relevance)
    }
    fn importance_range(&self) -> Range {
        Range::of(&self.importance)
    }

    fn scores(&self, w: &RetrievalWeights) -> Vec<(f32, u32)> {
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
            .map(|(((&id, &r), &l), &i)| {
                (
                    w.recency * rec.apply(r)
                        + w.relevance * rel.apply(l)
                        + w.importance * imp.apply(i),
                    id,
                )
            })
            .collect()
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
    let capacity = cols.candidate.iter().filter(|&&c| c).count();
    let mut raw = Raw {
        ids: Vec::with_capacity(capacity),
        recency: Vec::with_capacity(capacity),
        relevance: Vec::with_capacity(capacity),
        importance: Vec::with_capacity(capacity),
    };
    // Many nodes share a last_accessed (formed or retrieved in the same step): reuse the power.
    let mut last = (i64::MIN, 0f32);
    for (i, ((&candidate, &expiration), (&accessed, (&row, &poignancy)))) in cols
        .candidate
        .iter()
        .zip(&cols.expiration)
        .zip(
            cols.last_accessed
                .iter()
                .zip(cols.row.iter().zip(&cols.poignancy)),
        )
        .enumerate()
    {
        if !candidate || expiration <= now_s {
            continue;
        }
        if accessed != last.0 {
            // A last_accessed in the future (an edited save) counts as "just now".
            let hours = (now_s - accessed).max(0) as f32 / 3600.0;
            last = (accessed, (hours * ln_decay).exp());
        }
        raw.ids.push(i as u32);
        raw.recency.push(last.1);
        raw.relevance
            .push(rows.get(row as usize).copied().unwrap_or(0.0));
        raw.importance.push(f32::from(poignancy));
    }
    Ok(raw)
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
    fn range_normalises_and_flat_gives_half() {
        let r = Range::of(&[2.0, 4.0, 3.0]);
        assert_eq!((r.apply(2.0), r.apply(3.0), r.apply(4.0)), (0.0, 0.5, 1.0));
        let flat = Range::of(&[0.7, 0.7 + 1e-8]);
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
