//! Path finding over the collision grid (SPEC §1 movement).
//!
//! A* with 4-neighbour moves of cost 1 and no length cap. The heuristic is the Manhattan
//! distance to the bounding box of the goal set, which is admissible and consistent for one
//! goal or many, so the first goal popped is at the shortest distance. Ties are broken by
//! (smaller heuristic, smaller row-major index) and neighbours are expanded in a fixed order
//! (up, left, right, down), so the same query always returns the same path.
//!
//! When no goal is reachable, [`path_toward`] walks to the reachable tile of a fall-back area
//! (usually the target's arena) that is closest to the goals. [`choose_target_tile`] applies
//! Smallville's choice among an address's tiles: sample up to 4, prefer tiles without another
//! persona's event, take the shortest path.
//!
//! The search keeps its buffers (costs as flat `Vec<u32>` indexed by `y * width + x`,
//! generation stamps instead of clearing) in a [`PathFinder`]; the free functions use one per
//! thread.

use std::cell::RefCell;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use rand::Rng;

use super::address::AddressLevel;
use super::map::TownMap;
use super::{ActionAddress, TileCoord};

/// How many of a target's tiles [`choose_target_tile`] samples (Smallville's 4).
pub const TARGET_SAMPLE: usize = 4;

const NO_PARENT: u32 = u32::MAX;

/// Reusable search buffers. One per thread is plenty; the free functions keep one in a
/// thread-local.
#[derive(Debug, Default, Clone)]
pub struct PathFinder {
    /// Cost from the start, valid where `seen[i] == generation`.
    g: Vec<u32>,
    parent: Vec<u32>,
    seen: Vec<u32>,
    /// `goal[i] == generation` marks a goal tile of the current search.
    goal: Vec<u32>,
    generation: u32,
    heap: BinaryHeap<Reverse<(u32, u32, u32)>>,
    queue: VecDeque<u32>,
}

/// Axis-aligned bounds of the goal set, for the heuristic.
#[derive(Clone, Copy)]
struct Bounds {
    x0: i32,
    y0: i32,
    x1: i32,
    y1: i32,
}

impl Bounds {
    fn distance(self, x: i32, y: i32) -> u32 {
        let dx = (self.x0 - x).max(0).max(x - self.x1);
        let dy = (self.y0 - y).max(0).max(y - self.y1);
        (dx + dy) as u32
    }
}

impl PathFinder {
    /// Empty buffers; they grow to the map's size on first use.
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts a new search over a grid of `len` tiles.
    fn begin(&mut self, len: usize) {
        if self.g.len() != len {
            self.g = vec![0; len];
            self.parent = vec![NO_PARENT; len];
            self.seen = vec![0; len];
            self.goal = vec![0; len];
            self.generation = 0;
        }
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            // Stamps wrapped: old marks could alias the new generation.
            self.seen.fill(0);
            self.goal.fill(0);
            self.generation = 1;
        }
        self.heap.clear();
        self.queue.clear();
    }

    /// The shortest path from `from` to `to`, both included; `None` when `to` is blocked,
    /// either end is off the map, or no path exists. `from` itself may be blocked (a persona
    /// can leave the object it stands on).
    pub fn find_path(
        &mut self,
        map: &TownMap,
        from: TileCoord,
        to: TileCoord,
    ) -> Option<Vec<TileCoord>> {
        self.path_to_any(map, from, &[to])
    }

    /// The shortest path from `from` to whichever of `targets` is closest by path (blocked and
    /// off-map targets are ignored). `None` when none is reachable.
    pub fn path_to_any(
        &mut self,
        map: &TownMap,
        from: TileCoord,
        targets: &[TileCoord],
    ) -> Option<Vec<TileCoord>> {
        let width = map.width() as usize;
        let blocked = map.blocked_grid();
        let start = map.index_of(from)?;
        self.begin(blocked.len());
        let generation = self.generation;
        let mut bounds: Option<Bounds> = None;
        for &t in targets {
            let Some(i) = map
                .index_of(t)
                .filter(|&i| !blocked.get(i).copied().unwrap_or(true))
            else {
                continue;
            };
            self.goal[i] = generation;
            bounds = Some(match bounds {
                None => Bounds {
                    x0: t.x,
                    y0: t.y,
                    x1: t.x,
                    y1: t.y,
                },
                Some(b) => Bounds {
                    x0: b.x0.min(t.x),
                    y0: b.y0.min(t.y),
                    x1: b.x1.max(t.x),
                    y1: b.y1.max(t.y),
                },
            });
        }
        let bounds = bounds?;
        let start = start as u32;
        self.g[start as usize] = 0;
        self.parent[start as usize] = NO_PARENT;
        self.seen[start as usize] = generation;
        let h0 = bounds.distance(from.x, from.y);
        self.heap.push(Reverse((h0, h0, start)));
        while let Some(Reverse((f, h, node))) = self.heap.pop() {
            let i = node as usize;
            let g = self.g[i];
            if f - h > g {
                continue; // a stale entry: the node was reached more cheaply since
            }
            if self.goal[i] == generation {
                return Some(self.reconstruct(width, node));
            }
            let (x, y) = ((i % width) as i32, (i / width) as i32);
            for (nx, ny) in [(x, y - 1), (x - 1, y), (x + 1, y), (x, y + 1)] {
                let Some(n) = map.index_of(TileCoord::new(nx, ny)) else {
                    continue;
                };
                if blocked[n] {
                    continue;
                }
                let ng = g + 1;
                if self.seen[n] == generation && self.g[n] <= ng {
                    continue;
                }
                self.seen[n] = generation;
                self.g[n] = ng;
                self.parent[n] = node;
                let nh = bounds.distance(nx, ny);
                self.heap.push(Reverse((ng + nh, nh, n as u32)));
            }
        }
        None
    }

    fn reconstruct(&self, width: usize, mut node: u32) -> Vec<TileCoord> {
        let mut path = Vec::with_capacity(self.g[node as usize] as usize + 1);
        loop {
            let i = node as usize;
            path.push(TileCoord::new((i % width) as i32, (i / width) as i32));
            node = self.parent[i];
            if node == NO_PARENT {
                break;
            }
        }
        path.reverse();
        path
    }

    /// Breadth-first flood from `from`; afterwards `seen[i] == generation` marks reachable
    /// tiles, `g` their distance and `parent` a shortest-path tree.
    fn flood(&mut self, map: &TownMap, from: TileCoord) -> bool {
        let width = map.width() as usize;
        let blocked = map.blocked_grid();
        let Some(start) = map.index_of(from) else {
            return false;
        };
        self.begin(blocked.len());
        let generation = self.generation;
        self.seen[start] = generation;
        self.g[start] = 0;
        self.parent[start] = NO_PARENT;
        self.queue.push_back(start as u32);
        while let Some(node) = self.queue.pop_front() {
            let i = node as usize;
            let (x, y) = ((i % width) as i32, (i / width) as i32);
            for (nx, ny) in [(x, y - 1), (x - 1, y), (x + 1, y), (x, y + 1)] {
                let Some(n) = map.index_of(TileCoord::new(nx, ny)) else {
                    continue;
                };
                if blocked[n] || self.seen[n] == generation {
                    continue;
                }
                self.seen[n] = generation;
                self.g[n] = self.g[i] + 1;
                self.parent[n] = node;
                self.queue.push_back(n as u32);
            }
        }
        true
    }

    /// Every tile reachable from `from` (including `from`), row-major.
    pub fn reachable(&mut self, map: &TownMap, from: TileCoord) -> Vec<TileCoord> {
        if !self.flood(map, from) {
            return Vec::new();
        }
        let width = map.width() as usize;
        let generation = self.generation;
        (0..self.seen.len())
            .filter(|&i| self.seen[i] == generation)
            .map(|i| TileCoord::new((i % width) as i32, (i / width) as i32))
            .collect()
    }

    /// The shortest path to one of `goals`; if none is reachable, the shortest path to the
    /// reachable walkable tile of `area` nearest (Euclidean) to the goals, ties broken by path
    /// length then row-major order. `None` when neither exists.
    pub fn path_toward(
        &mut self,
        map: &TownMap,
        from: TileCoord,
        goals: &[TileCoord],
        area: impl IntoIterator<Item = TileCoord>,
    ) -> Option<Vec<TileCoord>> {
        if let Some(path) = self.path_to_any(map, from, goals) {
            return Some(path);
        }
        if goals.is_empty() {
            return None;
        }
        let d2 = |t: TileCoord| {
            goals
                .iter()
                .map(|g| {
                    let (dx, dy) = (i64::from(g.x - t.x), i64::from(g.y - t.y));
                    dx * dx + dy * dy
                })
                .min()
                .unwrap_or(i64::MAX)
        };
        // Usually the area's tiles nearest the goals can be reached: a search aimed at them
        // finds the same tile as the flood below (the nearest, then the shortest path, then
        // row-major) without visiting the whole map, which on a large map is most of the cost.
        // Only when none of them can be reached does the flood run.
        let area: Vec<TileCoord> = area
            .into_iter()
            .filter(|&t| t == from || map.is_walkable(t))
            .collect();
        let nearest = area.iter().map(|&t| d2(t)).min()?;
        let closest: Vec<TileCoord> = area.iter().copied().filter(|&t| d2(t) == nearest).collect();
        if closest.contains(&from) {
            return Some(vec![from]);
        }
        if let Some(path) = self.path_to_any(map, from, &closest) {
            // The search settles ties between equally near tiles its own way; the rule is
            // row-major, so the (few) tiles before the one found are tried one by one.
            let found = path.last().and_then(|&t| map.index_of(t));
            let mut earlier: Vec<(usize, TileCoord)> = closest
                .iter()
                .filter_map(|&t| Some((map.index_of(t)?, t)))
                .filter(|&(i, _)| Some(i) < found)
                .collect();
            earlier.sort_unstable();
            for (_, t) in earlier {
                if let Some(other) = self.path_to_any(map, from, &[t])
                    && other.len() == path.len()
                {
                    return Some(other);
                }
            }
            return Some(path);
        }
        if !self.flood(map, from) {
            return None;
        }
        let generation = self.generation;
        let mut best: Option<((i64, u32, usize), usize)> = None;
        for t in area {
            let Some(i) = map.index_of(t) else { continue };
            if self.seen[i] != generation {
                continue;
            }
            let key = (d2(t), self.g[i], i);
            if best.is_none_or(|(b, _)| key < b) {
                best = Some((key, i));
            }
        }
        let (_, i) = best?;
        Some(self.reconstruct(map.width() as usize, i as u32))
    }
}

thread_local! {
    static FINDER: RefCell<PathFinder> = RefCell::new(PathFinder::new());
}

fn with_finder<T>(f: impl FnOnce(&mut PathFinder) -> T) -> T {
    FINDER.with(|cell| match cell.try_borrow_mut() {
        Ok(mut finder) => f(&mut finder),
        // Only reachable through re-entrancy; a fresh finder is correct, just slower.
        Err(_) => f(&mut PathFinder::new()),
    })
}

/// The shortest 4-neighbour path from `from` to `to`, both included (see
/// [`PathFinder::find_path`]).
pub fn find_path(map: &TownMap, from: TileCoord, to: TileCoord) -> Option<Vec<TileCoord>> {
    with_finder(|f| f.find_path(map, from, to))
}

/// The shortest path to the nearest (by path) reachable tile of `targets`.
pub fn path_to_any(
    map: &TownMap,
    from: TileCoord,
    targets: &[TileCoord],
) -> Option<Vec<TileCoord>> {
    with_finder(|f| f.path_to_any(map, from, targets))
}

/// The shortest path to one of `goals`, or else to the reachable tile of `area` nearest to
/// them (see [`PathFinder::path_toward`]).
pub fn path_toward(
    map: &TownMap,
    from: TileCoord,
    goals: &[TileCoord],
    area: impl IntoIterator<Item = TileCoord>,
) -> Option<Vec<TileCoord>> {
    with_finder(|f| f.path_toward(map, from, goals, area))
}

/// The arena (or, for sector addresses, the sector) a fall-back may use for `goals`: the area of
/// the first goal tile that has one.
fn fallback_area(map: &TownMap, goals: &[TileCoord]) -> Vec<TileCoord> {
    goals
        .iter()
        .find_map(|&g| map.tile_path_string(g, AddressLevel::Arena))
        .and_then(|key| map.address_tiles(&key))
        .map(|tiles| tiles.iter().copied().collect())
        .unwrap_or_default()
}

/// A path to the tiles of an index key (`w:s:a:o`, `w:s:a`, `w:s`, `<spawn_loc>x`,
/// `w:s:a:<random>`), falling back to the nearest reachable tile of the target's arena (or of
/// the sector itself for a sector address) when no tile of the key is reachable. `None` when the
/// key is unknown (resolve it first with [`TownMap::resolve_address`]) or nothing is reachable.
pub fn path_to_address(map: &TownMap, from: TileCoord, address: &str) -> Option<Vec<TileCoord>> {
    let goals: Vec<TileCoord> = map.address_tiles(address)?.iter().copied().collect();
    let area: Vec<TileCoord> = match ActionAddress::parse(address)
        .ok()
        .and_then(|a| a.place().cloned())
    {
        Some(place) if place.level() > AddressLevel::Arena => map
            .place_tiles(&place.truncated(AddressLevel::Arena))
            .map(|t| t.iter().copied().collect())
            .unwrap_or_default(),
        Some(_) => goals.clone(),
        None => fallback_area(map, &goals),
    };
    path_toward(map, from, &goals, area)
}

/// Chooses where to go among `candidates` (the tiles of a target address) as Smallville does:
/// sample up to [`TARGET_SAMPLE`] of them with `rng`, prefer those where `occupied` is false
/// (no other persona's event), and take the one with the shortest path. If none of the
/// sampled tiles is reachable, walk to the nearest reachable tile of their arena.
///
/// Returns the tile reached and the path to it (start and end included). Deterministic for a
/// given RNG state: candidates are sorted before sampling.
pub fn choose_target_tile<R: Rng + ?Sized>(
    map: &TownMap,
    from: TileCoord,
    candidates: impl IntoIterator<Item = TileCoord>,
    occupied: impl Fn(TileCoord) -> bool,
    rng: &mut R,
) -> Option<(TileCoord, Vec<TileCoord>)> {
    let mut all: Vec<TileCoord> = candidates.into_iter().collect();
    all.sort_unstable();
    all.dedup();
    if all.is_empty() {
        return None;
    }
    let mut sampled: Vec<TileCoord> = if all.len() > TARGET_SAMPLE {
        let mut picks = rand::seq::index::sample(rng, all.len(), TARGET_SAMPLE).into_vec();
        picks.sort_unstable();
        picks
            .into_iter()
            .filter_map(|i| all.get(i).copied())
            .collect()
    } else {
        all
    };
    let free: Vec<TileCoord> = sampled.iter().copied().filter(|&c| !occupied(c)).collect();
    if !free.is_empty() {
        sampled = free;
    }
    let area = fallback_area(map, &sampled);
    let path = path_toward(map, from, &sampled, area)?;
    let end = *path.last()?;
    Some((end, path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn straight_line() {
        let map = TownMap::builder("W", 5, 1).build().unwrap();
        let p = find_path(&map, TileCoord::new(0, 0), TileCoord::new(4, 0)).unwrap();
        assert_eq!(p.len(), 5);
        assert_eq!(p.first(), Some(&TileCoord::new(0, 0)));
        assert_eq!(p.last(), Some(&TileCoord::new(4, 0)));
    }

    #[test]
    fn same_tile_and_off_map() {
        let map = TownMap::builder("W", 3, 3).build().unwrap();
        let c = TileCoord::new(1, 1);
        assert_eq!(find_path(&map, c, c), Some(vec![c]));
        assert_eq!(find_path(&map, c, TileCoord::new(3, 0)), None);
        assert_eq!(find_path(&map, TileCoord::new(-1, 0), c), None);
    }

    #[test]
    fn blocked_start_can_leave_but_blocked_goal_is_unreachable() {
        let map = TownMap::from_ascii("W", &["#..", "..#"], &[]).unwrap();
        let p = find_path(&map, TileCoord::new(0, 0), TileCoord::new(2, 0)).unwrap();
        assert_eq!(
            p,
            vec![
                TileCoord::new(0, 0),
                TileCoord::new(1, 0),
                TileCoord::new(2, 0)
            ]
        );
        assert_eq!(
            find_path(&map, TileCoord::new(0, 1), TileCoord::new(2, 1)),
            None
        );
    }

    #[test]
    fn deterministic_paths() {
        let map = TownMap::builder("W", 20, 20).build().unwrap();
        let a = find_path(&map, TileCoord::new(0, 0), TileCoord::new(19, 19)).unwrap();
        let b = PathFinder::new()
            .find_path(&map, TileCoord::new(0, 0), TileCoord::new(19, 19))
            .unwrap();
        assert_eq!(a, b);
        assert_eq!(a.len(), 39);
        for w in a.windows(2) {
            let d = (w[0].x - w[1].x).abs() + (w[0].y - w[1].y).abs();
            assert_eq!(d, 1);
        }
    }

    #[test]
    fn generation_wrap_resets_marks() {
        let map = TownMap::from_ascii("W", &["..#.."], &[]).unwrap();
        let mut finder = PathFinder::new();
        finder.begin(5);
        finder.generation = u32::MAX;
        // The next search wraps to generation 1; stale marks must not leak in.
        finder.seen.fill(1);
        finder.goal.fill(1);
        assert_eq!(
            finder.find_path(&map, TileCoord::new(0, 0), TileCoord::new(4, 0)),
            None
        );
        assert_eq!(
            finder
                .find_path(&map, TileCoord::new(0, 0), TileCoord::new(1, 0))
                .map(|p| p.len()),
            Some(2)
        );
    }

    #[test]
    fn fallback_ties_go_row_major() {
        // The goal (a blocked object) has two equally near free tiles in its area, left and
        // right; from anywhere equally far from both, the left one (first in row-major order)
        // is chosen, whichever the search happens to reach first.
        let map = TownMap::from_ascii("W", &["......", "..#...", "......", "......"], &[]).unwrap();
        let goal = TileCoord::new(2, 1);
        let pairs = [
            (TileCoord::new(1, 1), TileCoord::new(3, 1)),
            (TileCoord::new(2, 0), TileCoord::new(2, 2)),
        ];
        for (first, second) in pairs {
            for from in map.walkable_tiles().iter().copied() {
                if from == first || from == second {
                    continue;
                }
                let to_first = find_path(&map, from, first).unwrap().len();
                let to_second = find_path(&map, from, second).unwrap().len();
                let path = path_toward(&map, from, &[goal], [second, first]).unwrap();
                let expected = if to_first <= to_second { first } else { second };
                assert_eq!(path.last(), Some(&expected), "from {from:?}");
                assert_eq!(path.len(), to_first.min(to_second));
            }
        }
    }

    /// `path_toward`'s fall-back by brute force: every reachable tile's distance (breadth
    /// first), then the area tile nearest the goals, ties by distance, then row-major.
    fn fallback_by_flood(
        map: &TownMap,
        from: TileCoord,
        goals: &[TileCoord],
        area: &[TileCoord],
    ) -> Option<(TileCoord, usize)> {
        let mut dist = std::collections::HashMap::from([(from, 0usize)]);
        let mut queue = std::collections::VecDeque::from([from]);
        while let Some(c) = queue.pop_front() {
            let d = dist[&c];
            for n in [(0, -1), (-1, 0), (1, 0), (0, 1)]
                .map(|(dx, dy)| TileCoord::new(c.x + dx, c.y + dy))
            {
                if map.is_walkable(n) && !dist.contains_key(&n) {
                    dist.insert(n, d + 1);
                    queue.push_back(n);
                }
            }
        }
        area.iter()
            .filter_map(|&t| {
                let d = *dist.get(&t)?;
                let d2 = goals
                    .iter()
                    .map(|g| i64::from(g.x - t.x).pow(2) + i64::from(g.y - t.y).pow(2))
                    .min()?;
                Some(((d2, d, t.y, t.x), t))
            })
            .min()
            .map(|((_, d, _, _), t)| (t, d))
    }

    proptest::proptest! {
        // Ties between equally near, equally far area tiles are rare in random maps; enough
        // cases (a few seconds in a debug build) to meet them.
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(20_000))]

        /// The aimed search and the flood agree: when no goal is reachable, `path_toward` ends
        /// on the area tile nearest the goals (then nearest by path, then row-major), by a
        /// shortest path; when one is, it ends on a goal.
        #[test]
        fn path_toward_matches_the_flood(
            blocked in proptest::collection::vec(proptest::bool::weighted(0.35), 80),
            from in (0i32..10, 0i32..8),
            goals in proptest::collection::vec((0i32..10, 0i32..8), 1..4),
            area in proptest::collection::vec((0i32..10, 0i32..8), 0..20),
        ) {
            let rows: Vec<String> = blocked
                .chunks(10)
                .map(|row| row.iter().map(|&b| if b { '#' } else { '.' }).collect())
                .collect();
            let rows: Vec<&str> = rows.iter().map(String::as_str).collect();
            let map = TownMap::from_ascii("W", &rows, &[]).unwrap();
            let tile = |(x, y): (i32, i32)| TileCoord::new(x, y);
            let (from, goals) = (tile(from), goals.into_iter().map(tile).collect::<Vec<_>>());
            let area: Vec<TileCoord> = area.into_iter().map(tile).collect();
            let path = path_toward(&map, from, &goals, area.iter().copied());
            if let Some(to_goal) = path_to_any(&map, from, &goals) {
                proptest::prop_assert_eq!(path, Some(to_goal));
                return Ok(());
            }
            let candidates: Vec<TileCoord> = area
                .iter()
                .copied()
                .filter(|&t| t == from || map.is_walkable(t))
                .collect();
            let expected = fallback_by_flood(&map, from, &goals, &candidates);
            let found = path.as_ref().and_then(|p| Some((*p.last()?, p.len() - 1)));
            proptest::prop_assert_eq!(found, expected);
            if let Some(path) = path {
                proptest::prop_assert_eq!(path.first(), Some(&from));
                for step in path.windows(2) {
                    let (a, b) = (step[0], step[1]);
                    proptest::prop_assert_eq!((a.x - b.x).abs() + (a.y - b.y).abs(), 1);
                    proptest::prop_assert!(map.is_walkable(b));
                }
            }
        }
    }
}
