//! The response cache under a long run's load: a hit in a cache of 320,000 answers (what the
//! 1,000-persona crowd holds after ten game minutes), timed by criterion, and the slowest single
//! hit over enough hits to cycle every entry's place in the use order twice — what one thought
//! can be kept waiting on the cache's lock.
//!
//! ```text
//! cargo bench --no-default-features --bench response_cache
//! ```

use std::hint::black_box;
use std::time::{Duration, Instant};

use bevy_generative_agents::llm::{
    CacheEntry, CacheKey, CachedAnswer, ChatResponse, ResponseCache, TokenUsage,
};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

/// Entries in the cache.
const ENTRIES: usize = 320_000;

/// A key made from `i` (any 32 bytes do: the cache never looks inside one).
fn key(i: usize) -> CacheKey {
    let mut hex = format!("{:016x}", (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    hex.push_str(&format!("{i:048x}"));
    hex.parse().expect("64 hex digits")
}

fn entry(i: usize) -> CacheEntry {
    CacheEntry {
        key: key(i),
        model: "scripted".into(),
        kind: "event_poignancy".into(),
        answer: CachedAnswer::Chat(ChatResponse {
            text: format!("{}", i % 10),
            usage: TokenUsage::default(),
        }),
        rejected: false,
    }
}

/// A full cache and the order its keys are asked in (a fixed shuffle).
fn full_cache() -> (ResponseCache, Vec<CacheKey>) {
    let cache = ResponseCache::in_memory();
    for i in 0..ENTRIES {
        cache.insert(entry(i)).expect("in memory");
    }
    let mut order: Vec<usize> = (0..ENTRIES).collect();
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    for i in (1..order.len()).rev() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        order.swap(i, (state % (i as u64 + 1)) as usize);
    }
    let keys = order.into_iter().map(key).collect();
    (cache, keys)
}

fn response_cache(c: &mut Criterion) {
    let (cache, keys) = full_cache();
    assert_eq!(cache.len(), ENTRIES, "every entry fits the default limit");

    // The slowest hit: every key asked three times over, each hit timed on its own.
    let mut times: Vec<Duration> = Vec::with_capacity(3 * ENTRIES);
    for key in keys.iter().cycle().take(3 * ENTRIES) {
        let start = Instant::now();
        black_box(cache.get(key));
        times.push(start.elapsed());
    }
    times.sort_unstable();
    let at = |q: f64| times[((times.len() - 1) as f64 * q) as usize];
    eprintln!(
        "{} hits in a cache of {ENTRIES}: p50 {:?}, p99 {:?}, p99.99 {:?}, slowest {:?}",
        times.len(),
        at(0.5),
        at(0.99),
        at(0.9999),
        times.last().copied().unwrap_or_default()
    );

    let mut group = c.benchmark_group("response_cache");
    group.throughput(Throughput::Elements(1));
    let mut next = keys.iter().cycle();
    group.bench_function(format!("hit/{ENTRIES}"), |b| {
        b.iter(|| black_box(cache.get(next.next().expect("cycles"))))
    });
    group.finish();
}

criterion_group!(benches, response_cache);
criterion_main!(benches);
