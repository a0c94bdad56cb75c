//! Rows shared between small stores: one copy of a vector however many personas remember it.
//!
//! In a crowd one event is seen by hundreds of personas and one line said in a group is heard
//! by everyone following it; each of them stores the same text with the same vector. A
//! thousand personas in one town held 241,405 rows of 17,816 distinct vectors after 150 steps
//! from 09:00 — fourteen copies of each, each copy 1.9 KB of `f32` and int8 numbers that were
//! normalised, quantised and written anew (and the pages under them first touched) when stored.
//!
//! A small store (see `EmbeddingStore::small`) instead holds its rows as [`SharedRow`]s from
//! [`shared_row`], which hands out the one row already made for a bit-for-bit equal vector, or
//! makes it. A row is what a store would have computed itself — the normalised vector, its int8
//! copy, scale and error — so sharing changes no number anyone reads. The interner keeps only
//! weak references: a row lives as long as some store holds it.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::{Arc, Mutex, PoisonError, Weak};

use bevy::platform::hash::FixedHasher;

use super::{quantization_error, quantize_row};

/// One stored vector with what the scans read of it.
#[derive(Debug)]
pub(super) struct SharedRow {
    /// L2-normalised.
    pub vector: Box<[f32]>,
    /// The int8 copy (`vector ≈ quantized · scale`).
    pub quantized: Box<[i8]>,
    pub scale: f32,
    /// An upper bound of `‖vector − quantized · scale‖₂`.
    pub error: f32,
}

impl SharedRow {
    /// The row of an already normalised vector, quantised as a chunk quantises its rows.
    fn new(vector: Vec<f32>) -> Self {
        let mut quantized = Vec::with_capacity(vector.len());
        let scale = quantize_row(&vector, &mut quantized);
        let error = quantization_error(&vector, quantized.iter().copied(), scale);
        Self {
            vector: vector.into_boxed_slice(),
            quantized: quantized.into_boxed_slice(),
            scale,
            error,
        }
    }
}

/// Shards of the interner (threads storing memories at once rarely wait on each other).
const SHARDS: usize = 16;

/// Rows made so far, by the hash of their vector's bits; dead ones are swept out whenever the
/// shard has grown to twice what was alive at the last sweep.
#[derive(Default)]
struct Shard {
    rows: HashMap<u64, Vec<Weak<SharedRow>>, FixedHasher>,
    entries: usize,
    sweep_at: usize,
}

impl Shard {
    /// Drops the rows no store holds any more.
    fn sweep(&mut self) {
        self.rows.retain(|_, rows| {
            rows.retain(|row| row.strong_count() > 0);
            !rows.is_empty()
        });
        self.entries = self.rows.values().map(Vec::len).sum();
        self.sweep_at = (2 * self.entries).max(MIN_SWEEP_ENTRIES);
    }
}

/// A shard is not swept before it holds this many rows.
const MIN_SWEEP_ENTRIES: usize = 1024;

fn shards() -> &'static [Mutex<Shard>; SHARDS] {
    static SHARED: std::sync::OnceLock<[Mutex<Shard>; SHARDS]> = std::sync::OnceLock::new();
    SHARED.get_or_init(|| std::array::from_fn(|_| Mutex::new(Shard::default())))
}

/// Whether two vectors are equal bit for bit (so `0.0` and `-0.0` are different rows, as they
/// would be different numbers in a chunk).
fn same_bits(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

/// The shared row of `normalised` (an L2-normalised vector): the one made before for the same
/// bits while any store still holds it, else a new one.
pub(super) fn shared_row(normalised: Vec<f32>) -> Arc<SharedRow> {
    let mut hasher = FixedHasher.build_hasher();
    hasher.write_usize(normalised.len());
    for v in &normalised {
        hasher.write_u32(v.to_bits());
    }
    let hash = hasher.finish();
    let shard = &shards()[(hash % SHARDS as u64) as usize];
    let mut shard = shard.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(found) = shard.rows.get(&hash).and_then(|rows| {
        rows.iter()
            .filter_map(Weak::upgrade)
            .find(|row| same_bits(&row.vector, &normalised))
    }) {
        return found;
    }
    let row = Arc::new(SharedRow::new(normalised));
    shard
        .rows
        .entry(hash)
        .or_default()
        .push(Arc::downgrade(&row));
    shard.entries += 1;
    if shard.entries >= shard.sweep_at.max(MIN_SWEEP_ENTRIES) {
        shard.sweep();
    }
    row
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_vectors_share_one_row_and_different_ones_do_not() {
        let a = shared_row(vec![0.6, 0.8, 0.0]);
        let b = shared_row(vec![0.6, 0.8, 0.0]);
        assert!(Arc::ptr_eq(&a, &b));
        let c = shared_row(vec![0.6, 0.8, -0.0]);
        assert!(!Arc::ptr_eq(&a, &c), "-0.0 is another number than 0.0");
        let d = shared_row(vec![0.8, 0.6, 0.0]);
        assert!(!Arc::ptr_eq(&a, &d));
        // The int8 copy is what a chunk computes for the same row.
        let mut quantized = Vec::new();
        let scale = quantize_row(&a.vector, &mut quantized);
        assert_eq!(&*a.quantized, quantized.as_slice());
        assert_eq!(a.scale.to_bits(), scale.to_bits());
        assert_eq!(
            a.error.to_bits(),
            quantization_error(&a.vector, quantized.iter().copied(), scale).to_bits()
        );
    }

    #[test]
    fn a_row_no_store_holds_is_made_again() {
        let vector = vec![0.28, 0.96, 0.0, 0.0];
        let first = shared_row(vector.clone());
        let weak = Arc::downgrade(&first);
        drop(first);
        assert!(weak.upgrade().is_none());
        let again = shared_row(vector);
        assert_eq!(&*again.vector, &[0.28, 0.96, 0.0, 0.0]);
    }
}
