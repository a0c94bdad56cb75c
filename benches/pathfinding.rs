//! Path finding across the default town: corner to corner, and 1,000 random pairs of walkable
//! tiles (one criterion iteration runs all 1,000 searches).

use std::hint::black_box;

use bevy_generative_agents::world::{PathFinder, TileCoord, TownMap, find_path};
use criterion::{Criterion, criterion_group, criterion_main};
use rand::SeedableRng;
use rand::seq::IndexedRandom;
use rand_chacha::ChaCha8Rng;

/// The walkable tile nearest (Manhattan) to `target`, first in row-major order on ties.
fn walkable_near(map: &TownMap, target: TileCoord) -> Option<TileCoord> {
    map.walkable_tiles()
        .iter()
        .copied()
        .min_by_key(|t| (t.x - target.x).abs() + (t.y - target.y).abs())
}

fn bench(c: &mut Criterion) {
    let map = match TownMap::load_tmx(TownMap::default_town_path()) {
        Ok(map) => map,
        Err(e) => {
            eprintln!("cannot load the default town: {e}");
            return;
        }
    };
    let (Some(nw), Some(se)) = (
        walkable_near(&map, TileCoord::new(0, 0)),
        walkable_near(
            &map,
            TileCoord::new(map.width() as i32 - 1, map.height() as i32 - 1),
        ),
    ) else {
        eprintln!("the default town has no walkable tiles");
        return;
    };

    c.bench_function("astar_default_town_corner_to_corner", |b| {
        let mut finder = PathFinder::new();
        b.iter(|| finder.find_path(&map, black_box(nw), black_box(se)));
    });

    let walkable: Vec<TileCoord> = map.walkable_tiles().iter().copied().collect();
    let mut rng = ChaCha8Rng::seed_from_u64(2023);
    let pairs: Vec<(TileCoord, TileCoord)> = (0..1000)
        .filter_map(|_| Some((*walkable.choose(&mut rng)?, *walkable.choose(&mut rng)?)))
        .collect();
    c.bench_function("astar_default_town_1000_random_pairs", |b| {
        let mut finder = PathFinder::new();
        b.iter(|| {
            pairs
                .iter()
                .filter_map(|&(from, to)| finder.find_path(&map, from, to))
                .map(|p| p.len())
                .sum::<usize>()
        });
    });
    c.bench_function("astar_default_town_1000_random_pairs_thread_local", |b| {
        b.iter(|| {
            pairs
                .iter()
                .filter_map(|&(from, to)| find_path(&map, from, to))
                .count()
        });
    });

    c.bench_function("flood_fill_default_town", |b| {
        let mut finder = PathFinder::new();
        b.iter(|| finder.reachable(&map, black_box(nw)).len());
    });
}

criterion_group! {
    name = benches;
    // Numbers only: criterion's charts need system fonts a fresh machine may not have.
    config = Criterion::default().without_plots();
    targets = bench
}
criterion_main!(benches);
