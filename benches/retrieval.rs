//! Retrieval over large memory streams: top-30 `new_retrieve` over 10,000 and 100,000 memories
//! with 384-dimensional embeddings (the size of a MiniLM sentence embedding).
//!
//! Run with `cargo bench --no-default-features --bench retrieval`. `auto` ranks exactly as
//! `exact` does (the same top 30, bit for bit: `memory::retrieve`'s bound-and-refine over the
//! int4 copy, then the int8 copy and the exact rows of about a thousand memories, checked by
//! its tests on random stores); `exact` scans the `f32` rows. The `relevance_scan` group shows
//! the int8 scan alone (38 MB per query at 100,000 memories; `auto`'s int4 scan reads half
//! that). On x86-64 CPUs with AVX2 (found at run time) the int4 scan runs its `vpmaddubsw`
//! kernel, about 3.5 times the portable one's speed; without AVX2 `auto` takes about 2.7 ms at
//! 100,000 on the development machine instead of 1.5.
//!
//! The `bandwidth_floor` group reads as many bytes as each scan does (the int4, int8 and `f32`
//! copies of 100,000 rows), one plain sequential pass, and prints each copy's size, the best
//! bandwidth measured and the floor that sets: no scan of that copy can be faster on this
//! machine.

use std::hint::black_box;
use std::time::{Duration, Instant};

use bevy_generative_agents::memory::{
    AssociativeMemory, NewMemory, NodeId, RelevancePrecision, RetrievalParams, new_retrieve,
};
use chrono::{NaiveDate, NaiveDateTime, TimeDelta};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const DIM: usize = 384;

fn start() -> NaiveDateTime {
    NaiveDate::from_ymd_opt(2023, 2, 13)
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .unwrap_or_default()
}

fn vector(rng: &mut ChaCha8Rng) -> Vec<f32> {
    (0..DIM).map(|_| rng.random_range(-1.0f32..1.0)).collect()
}

/// `n` memories over ~35 game days: 75 % events (1 in 20 of them idle, sharing a few idle
/// descriptions), 25 % thoughts with evidence, a third of those already expired at the end.
fn build(n: usize) -> (AssociativeMemory, NaiveDateTime) {
    let mut rng = ChaCha8Rng::seed_from_u64(0x5EED);
    let mut memory = AssociativeMemory::new("bench-minilm", DIM);
    let step = TimeDelta::seconds(30);
    let mut now = start();
    for i in 0..n {
        now += step;
        let poignancy = rng.random_range(1..=10u8);
        let result = if i % 4 == 3 {
            let evidence: Vec<NodeId> = (0..3)
                .map(|_| NodeId(rng.random_range(0..i as u32)))
                .collect();
            let lifetime = if i % 3 == 0 {
                TimeDelta::hours(6)
            } else {
                TimeDelta::days(30)
            };
            memory.add_thought(
                NewMemory::new(
                    now,
                    ("Ana Reyes", "thinks", format!("idea {i}")),
                    format!("Ana Reyes thinks about idea {i}"),
                )
                .keywords(["Ana Reyes".to_owned(), format!("idea {i}")])
                .poignancy(poignancy)
                .expires(now + lifetime)
                .embedding(vector(&mut rng)),
                evidence,
            )
        } else if i % 20 == 0 {
            let object = format!("Willowbrook:Reyes house:kitchen:object {}", i % 7);
            memory.add_event(
                NewMemory::new(
                    now,
                    (object.clone(), "is", "idle"),
                    format!("object {} is idle", i % 7),
                )
                .keywords([format!("object {}", i % 7)])
                .embedding(vector(&mut rng)),
                vec![],
            )
        } else {
            memory.add_event(
                NewMemory::new(
                    now,
                    ("Ben Okafor", "is", format!("doing task {i}")),
                    format!("Ben Okafor is doing task {i}"),
                )
                .keywords(["Ben Okafor".to_owned(), format!("task {i}")])
                .poignancy(poignancy)
                .embedding(vector(&mut rng)),
                vec![],
            )
        };
        if let Err(err) = result {
            panic!("building the bench memory failed: {err}");
        }
    }
    // Some memories were retrieved since they were formed.
    let accessed: Vec<NodeId> = (0..n / 10)
        .map(|_| NodeId(rng.random_range(0..n as u32)))
        .collect();
    memory.set_last_accessed(&accessed, now);
    (memory, now + TimeDelta::hours(1))
}

fn retrieval(c: &mut Criterion) {
    let mut group = c.benchmark_group("new_retrieve_top30");
    group
        .sample_size(40)
        .measurement_time(Duration::from_secs(8));
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    for n in [10_000usize, 100_000] {
        let (mut memory, now) = build(n);
        let focal = vector(&mut rng);
        for (name, precision) in [
            ("auto", RelevancePrecision::Auto),
            ("exact", RelevancePrecision::Exact),
        ] {
            let params = RetrievalParams {
                precision,
                ..RetrievalParams::default()
            };
            group.bench_with_input(BenchmarkId::new(name, n), &n, |b, _| {
                b.iter(|| new_retrieve(&mut memory, black_box(&focal), now, 30, &params));
            });
        }
    }
    group.finish();

    let mut group = c.benchmark_group("relevance_scan");
    group
        .sample_size(40)
        .measurement_time(Duration::from_secs(8));
    let (memory, _) = build(100_000);
    let focal = vector(&mut rng);
    for (name, precision) in [
        ("quantized", RelevancePrecision::Quantized),
        ("exact", RelevancePrecision::Exact),
    ] {
        group.bench_function(BenchmarkId::new(name, 100_000), |b| {
            b.iter(|| memory.embeddings().relevance(black_box(&focal), precision));
        });
    }
    group.finish();

    bandwidth_floor(c, 100_000);
}

/// How the scans' rows are laid out, in bytes per row of `DIM` numbers: the int4 copy holds two
/// numbers a byte in whole blocks of 64 numbers (`auto`'s scan), the int8 copy one a byte
/// (`relevance_scan/quantized`), the exact rows four (`exact`).
const SCANS: [(&str, usize); 3] = [
    ("int4", DIM.div_ceil(64) * 32),
    ("int8", DIM),
    ("f32", DIM * 4),
];

/// A plain sequential read of `words`: eight independent sums, which the compiler vectorises.
fn read_all(words: &[u64]) -> u64 {
    let (blocks, tail) = words.as_chunks::<8>();
    let mut sums = [0u64; 8];
    for block in blocks {
        for (sum, &word) in sums.iter_mut().zip(block) {
            *sum = sum.wrapping_add(word);
        }
    }
    tail.iter()
        .chain(&sums)
        .fold(0u64, |total, &word| total.wrapping_add(word))
}

/// The memory-bandwidth floor of each scan at `rows` memories: a plain sequential read of as
/// many bytes as the scan reads (`bandwidth_floor/read_<copy>`, timed by criterion), and a
/// line per copy with its bytes, the best bandwidth of a few dozen such reads and the floor it
/// sets (bytes over that bandwidth). A scan cannot beat its floor on this machine; how far
/// `auto`, `exact` and `relevance_scan/quantized` are above theirs is what is left to gain.
fn bandwidth_floor(c: &mut Criterion, rows: usize) {
    let mut group = c.benchmark_group("bandwidth_floor");
    group
        .sample_size(40)
        .measurement_time(Duration::from_secs(4));
    let mut floors = Vec::new();
    for (copy, row_bytes) in SCANS {
        let bytes = rows * row_bytes;
        // Written through once, so every page is there before the first timed read.
        let words: Vec<u64> = (0..bytes as u64 / 8).collect();
        let best = (0..40)
            .map(|_| {
                let start = Instant::now();
                black_box(read_all(black_box(&words)));
                start.elapsed()
            })
            .min()
            .unwrap_or_default();
        floors.push((copy, bytes, best));
        group.bench_function(BenchmarkId::new(format!("read_{copy}"), rows), |b| {
            b.iter(|| read_all(black_box(&words)));
        });
    }
    group.finish();
    for (copy, bytes, best) in floors {
        let gb_per_s = bytes as f64 / best.as_secs_f64().max(1e-9) / 1e9;
        println!(
            "bandwidth floor, {copy} copy of {rows} rows: {:.1} MB at {gb_per_s:.1} GB/s \
             (best of 40 sequential reads) = {:.3} ms",
            bytes as f64 / 1e6,
            best.as_secs_f64() * 1e3,
        );
    }
}

criterion_group! {
    name = benches;
    // Numbers only: criterion's charts need system fonts a fresh machine may not have.
    config = Criterion::default().without_plots();
    targets = retrieval
}
criterion_main!(benches);
