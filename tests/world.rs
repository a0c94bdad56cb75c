//! The world module end to end: addresses, fall-backs, vision, path finding, the Tiled loader
//! on hand-written broken maps, and the default town.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use bevy_generative_agents::world::{
    ActionAddress, Address, AddressError, AddressLevel, MapProblem, PathFinder, ResolveError,
    ResolveLevel, TileCoord, TileEvent, TownMap, choose_target_tile, find_path, path_to_address,
    path_to_any,
};
use proptest::prelude::*;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

fn c(x: i32, y: i32) -> TileCoord {
    TileCoord::new(x, y)
}

fn assert_valid_path(map: &TownMap, path: &[TileCoord], from: TileCoord, to: TileCoord) {
    assert_eq!(path.first(), Some(&from));
    assert_eq!(path.last(), Some(&to));
    for step in path.windows(2) {
        let d = (step[0].x - step[1].x).abs() + (step[0].y - step[1].y).abs();
        assert_eq!(d, 1, "non-adjacent step {step:?}");
    }
    for t in &path[1..] {
        assert!(map.is_walkable(*t), "path crosses blocked tile {t:?}");
    }
}

// ------------------------------------------------------------------------------------------
// Addresses
// ------------------------------------------------------------------------------------------

#[test]
fn address_round_trips_and_levels() {
    let a: Address = "Willowbrook:Reyes house:kitchen:stove".parse().unwrap();
    assert_eq!(a.world_name(), "Willowbrook");
    assert_eq!(a.sector_name(), Some("Reyes house"));
    assert_eq!(a.arena_name(), Some("kitchen"));
    assert_eq!(a.game_object_name(), Some("stove"));
    assert_eq!(a.level(), AddressLevel::GameObject);
    assert_eq!(a.to_string(), "Willowbrook:Reyes house:kitchen:stove");
    let s: Address = "Willowbrook:Reyes house:".parse().unwrap();
    assert_eq!(s.level(), AddressLevel::Sector);
    assert_eq!(s.to_string(), "Willowbrook:Reyes house");
}

#[test]
fn special_addresses() {
    assert_eq!(
        ActionAddress::parse("<persona> Sam Lindqvist").unwrap(),
        ActionAddress::Persona("Sam Lindqvist".into())
    );
    assert_eq!(
        ActionAddress::parse("<waiting> 10 7").unwrap(),
        ActionAddress::Waiting(c(10, 7))
    );
    let r = ActionAddress::parse("Willowbrook:Maple Park:park:<random>").unwrap();
    assert_eq!(r.to_string(), "Willowbrook:Maple Park:park:<random>");
    assert_eq!(
        r.place().map(Address::to_string).as_deref(),
        Some("Willowbrook:Maple Park:park")
    );
}

#[test]
fn garbage_addresses_are_errors() {
    assert_eq!(Address::parse("   "), Err(AddressError::Empty));
    assert!(matches!(
        Address::parse("w::a:o"),
        Err(AddressError::Hole { .. })
    ));
    assert!(matches!(
        Address::parse("1:2:3:4:5"),
        Err(AddressError::TooManyParts { .. })
    ));
    assert!(matches!(
        ActionAddress::parse("<waiting> here"),
        Err(AddressError::BadWaiting { .. })
    ));
    assert!(matches!(
        ActionAddress::parse("<persona>"),
        Err(AddressError::MissingPersonaName { .. })
    ));
    assert!(matches!(
        ActionAddress::parse("w:s:<random>"),
        Err(AddressError::BadRandom { .. })
    ));
    assert!(matches!(
        ActionAddress::parse("<x> y"),
        Err(AddressError::UnknownMarker { .. })
    ));
    // Errors quote the input so a log line is enough to see what the model produced.
    let msg = Address::parse("a::b").unwrap_err().to_string();
    assert!(msg.contains("a::b"), "{msg}");
}

proptest! {
    #[test]
    fn parsing_never_panics_and_round_trips(s in "\\PC{0,40}") {
        if let Ok(a) = Address::parse(&s) {
            prop_assert_eq!(Address::parse(&a.to_string()), Ok(a.clone()));
        }
        if let Ok(a) = ActionAddress::parse(&s) {
            prop_assert_eq!(ActionAddress::parse(&a.to_string()), Ok(a.clone()));
        }
    }

    #[test]
    fn address_like_strings_round_trip(parts in proptest::collection::vec("[a-zA-Z][a-zA-Z ]{0,8}[a-z]", 1..=4)) {
        let s = parts.join(":");
        let a = Address::parse(&s).unwrap();
        prop_assert_eq!(a.to_string(), s);
        prop_assert_eq!(a.level().depth(), parts.len());
    }

    #[test]
    fn resolve_never_fails_on_a_walkable_map(s in "\\PC{0,30}", living in "\\PC{0,30}") {
        let map = house();
        let hit = map.resolve_address(&s, Some(&living)).unwrap();
        prop_assert!(!hit.tiles.is_empty());
    }
}

// ------------------------------------------------------------------------------------------
// Maps built in code: index, fall-backs, vision
// ------------------------------------------------------------------------------------------

/// A house with a bedroom (bed) and a kitchen (stove, blocked), a yard outside any sector.
fn house() -> TownMap {
    TownMap::from_ascii(
        "W",
        &[
            "##########",
            "#bbbb#kkk#",
            "#bBbb#kSk#",
            "#bbbb.kkk#",
            "####.#####",
            "....y.....",
        ],
        &[
            ('b', "W:house:bedroom"),
            ('B', "W:house:bedroom:bed"),
            ('k', "W:house:kitchen"),
            ('S', "#W:house:kitchen:stove"),
            ('y', "<spawn_loc>yard"),
        ],
    )
    .unwrap()
}

#[test]
fn fallback_chain() {
    let map = house();
    let living = Some("W:house:bedroom");

    let hit = map
        .resolve_address("W:house:kitchen:stove", living)
        .unwrap();
    assert_eq!(
        (hit.level, hit.key),
        (ResolveLevel::Exact, "W:house:kitchen:stove")
    );
    assert_eq!(hit.tiles.iter().copied().collect::<Vec<_>>(), vec![c(7, 2)]);

    // Case and spacing do not matter.
    let hit = map.resolve_address(" w:HOUSE : Kitchen ", living).unwrap();
    assert_eq!(
        (hit.level, hit.key),
        (ResolveLevel::Exact, "W:house:kitchen")
    );

    let hit = map
        .resolve_address("W:house:kitchen:toaster", living)
        .unwrap();
    assert_eq!(
        (hit.level, hit.key),
        (ResolveLevel::Arena, "W:house:kitchen")
    );
    assert_eq!(hit.tiles.len(), 9);

    let hit = map.resolve_address("W:house:attic:box", living).unwrap();
    assert_eq!((hit.level, hit.key), (ResolveLevel::Sector, "W:house"));

    let hit = map.resolve_address("W:castle:hall:throne", living).unwrap();
    assert_eq!(
        (hit.level, hit.key),
        (ResolveLevel::LivingArea, "W:house:bedroom")
    );
    assert_eq!(hit.tiles.len(), 12);

    let hit = map
        .resolve_address("W:castle", Some("W:house:cellar"))
        .unwrap();
    assert_eq!(
        (hit.level, hit.key),
        (ResolveLevel::LivingSector, "W:house")
    );

    let hit = map
        .resolve_address("W:castle", Some("Elsewhere:x:y"))
        .unwrap();
    assert_eq!(hit.level, ResolveLevel::AnyWalkable);
    assert_eq!(hit.tiles, map.walkable_tiles());

    let hit = map.resolve_address("", None).unwrap();
    assert_eq!(hit.level, ResolveLevel::AnyWalkable);

    // <random> resolves to its arena; a spawn key resolves exactly.
    let hit = map
        .resolve_address("W:house:kitchen:<random>", None)
        .unwrap();
    assert_eq!(
        (hit.level, hit.key),
        (ResolveLevel::Exact, "W:house:kitchen")
    );
    let hit = map.resolve_address("<spawn_loc>yard", None).unwrap();
    assert_eq!(hit.tiles.iter().copied().collect::<Vec<_>>(), vec![c(4, 5)]);
}

#[test]
fn resolve_on_a_map_without_walkable_tiles_is_an_error() {
    let map = TownMap::from_ascii("W", &["##", "##"], &[]).unwrap();
    assert_eq!(
        map.resolve_address("W:x", Some("W:y")),
        Err(ResolveError::NoWalkableTile {
            address: "W:x".into()
        })
    );
    let empty = TownMap::builder("W", 0, 0).build().unwrap();
    assert!(empty.resolve_address("W:x", None).is_err());
    assert!(empty.nearby_tiles(c(0, 0), 3).is_empty());
}

#[test]
fn nearby_tiles_are_clipped() {
    let map = TownMap::builder("W", 10, 8).build().unwrap();
    assert_eq!(map.nearby_tiles(c(5, 4), 2).len(), 25);
    assert_eq!(map.nearby_tiles(c(5, 4), 0), vec![c(5, 4)]);
    assert_eq!(map.nearby_tiles(c(0, 0), 2).len(), 9);
    assert_eq!(
        map.nearby_tiles(c(9, 7), 1),
        vec![c(8, 6), c(9, 6), c(8, 7), c(9, 7)]
    );
    assert_eq!(
        map.nearby_tiles(c(0, 4), 4).len(),
        5 * 8,
        "x clipped to 0..=4, y to 0..=7"
    );
    assert_eq!(map.nearby_tiles(c(-1, -1), 2).len(), 4);
    assert!(map.nearby_tiles(c(-3, -3), 2).is_empty());
    assert!(map.nearby_tiles(c(20, 0), 4).is_empty());
}

#[test]
fn tile_events_and_paths() {
    let mut map = house();
    let bed = c(2, 2);
    assert!(
        map.tile(bed)
            .unwrap()
            .events
            .contains(&TileEvent::idle("W:house:bedroom:bed"))
    );
    assert_eq!(
        map.tile_path_string(bed, AddressLevel::GameObject)
            .as_deref(),
        Some("W:house:bedroom:bed")
    );
    assert_eq!(
        map.tile_path_string(c(0, 5), AddressLevel::Arena)
            .as_deref(),
        Some("W")
    );
    let ev = TileEvent {
        subject: "Ana".into(),
        predicate: Some("is".into()),
        object: Some("napping".into()),
        description: Some("napping".into()),
    };
    map.add_event(bed, ev.clone());
    assert!(map.turn_event_idle(bed, "Ana"));
    assert_eq!(map.tile(bed).unwrap().events.len(), 2);
    assert_eq!(map.remove_subject_events(bed, "Ana"), 1);
    assert!(!map.remove_event(bed, &ev));
}

#[test]
fn spatial_iteration() {
    let map = house();
    assert_eq!(map.world_name(), "W");
    let tree: BTreeMap<_, _> = map
        .sectors()
        .map(|s| {
            (
                s.to_owned(),
                map.arenas(s).map(str::to_owned).collect::<Vec<_>>(),
            )
        })
        .collect();
    assert_eq!(
        tree,
        BTreeMap::from([(
            "house".to_owned(),
            vec!["bedroom".to_owned(), "kitchen".to_owned()]
        )])
    );
    assert_eq!(
        map.game_objects("house", "bedroom").collect::<Vec<_>>(),
        vec!["bed"]
    );
    assert_eq!(
        map.spawn_locations().collect::<Vec<_>>(),
        vec![("yard", c(4, 5))]
    );
}

// ------------------------------------------------------------------------------------------
// Path finding
// ------------------------------------------------------------------------------------------

#[test]
fn astar_follows_the_only_route_through_a_maze() {
    let map = TownMap::from_ascii(
        "W",
        &["...#...", "##.#.#.", "...#.#.", ".###.#.", ".....#."],
        &[],
    )
    .unwrap();
    let path = find_path(&map, c(0, 0), c(6, 4)).unwrap();
    // Counted by hand: the maze forces a 22-step detour for a Manhattan distance of 10.
    let expected = vec![
        c(0, 0),
        c(1, 0),
        c(2, 0),
        c(2, 1),
        c(2, 2),
        c(1, 2),
        c(0, 2),
        c(0, 3),
        c(0, 4),
        c(1, 4),
        c(2, 4),
        c(3, 4),
        c(4, 4),
        c(4, 3),
        c(4, 2),
        c(4, 1),
        c(4, 0),
        c(5, 0),
        c(6, 0),
        c(6, 1),
        c(6, 2),
        c(6, 3),
        c(6, 4),
    ];
    assert_eq!(path, expected);
}

#[test]
fn astar_takes_the_shorter_of_two_routes() {
    let map = TownMap::from_ascii("W", &["......", ".####.", ".#..#.", "......"], &[]).unwrap();
    // Around the top: 9 steps; along the bottom: 7 steps.
    let path = find_path(&map, c(0, 2), c(5, 2)).unwrap();
    assert_eq!(path.len(), 8);
    assert!(path.contains(&c(3, 3)));
    assert_valid_path(&map, &path, c(0, 2), c(5, 2));
}

#[test]
fn no_length_cap() {
    // A serpentine corridor far longer than Smallville's 150-tile cap.
    let mut rows = Vec::new();
    for i in 0..21 {
        rows.push(if i % 2 == 0 {
            ".".repeat(40)
        } else if i % 4 == 1 {
            format!("{}.", "#".repeat(39))
        } else {
            format!(".{}", "#".repeat(39))
        });
    }
    let refs: Vec<&str> = rows.iter().map(String::as_str).collect();
    let map = TownMap::from_ascii("W", &refs, &[]).unwrap();
    let path = find_path(&map, c(0, 0), c(0, 20)).unwrap();
    // Rows 0, 2, …, 18 walked end to end (10 × 40 tiles), the 10 connecting tiles, and the goal,
    // which is the first tile of row 20.
    assert_eq!(path.len(), 10 * 40 + 10 + 1);
    assert_valid_path(&map, &path, c(0, 0), c(0, 20));
}

#[test]
fn enclosed_start_has_no_path() {
    let map = TownMap::from_ascii("W", &["#####", "#.#.#", "#####"], &[]).unwrap();
    assert_eq!(find_path(&map, c(1, 1), c(3, 1)), None);
    assert_eq!(path_to_any(&map, c(1, 1), &[c(3, 1), c(0, 0)]), None);
    assert_eq!(PathFinder::new().reachable(&map, c(1, 1)), vec![c(1, 1)]);
}

/// A room split by a wall: the safe is in the part that cannot be entered.
fn split_room() -> TownMap {
    TownMap::from_ascii(
        "W",
        &[
            "#########",
            "#rrr#rrr#",
            "#rrr#rsr#",
            "#rrr#rrr#",
            "##.######",
            "#.......#",
            "#########",
        ],
        &[('r', "W:h:room"), ('s', "W:h:room:safe")],
    )
    .unwrap()
}

#[test]
fn unreachable_target_falls_back_to_nearest_reachable_arena_tile() {
    let map = split_room();
    let from = c(7, 5);
    assert_eq!(find_path(&map, from, c(6, 2)), None);
    let path = path_to_address(&map, from, "W:h:room:safe").unwrap();
    // (3,2) is the reachable room tile closest to the safe at (6,2).
    assert_eq!(path.last(), Some(&c(3, 2)));
    assert_eq!(path.len(), 10);
    assert_valid_path(&map, &path, from, c(3, 2));
    assert_eq!(path_to_address(&map, from, "W:h:nowhere"), None);
}

#[test]
fn choosing_a_target_tile() {
    let map = TownMap::from_ascii("W", &["......"], &[]).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let from = c(0, 0);
    let near_far = [c(2, 0), c(5, 0)];
    let (t, path) = choose_target_tile(&map, from, near_far, |_| false, &mut rng).unwrap();
    assert_eq!((t, path.len()), (c(2, 0), 3));
    // Another persona stands on the near tile: go to the free one even though it is farther.
    let (t, _) = choose_target_tile(&map, from, near_far, |t| t == c(2, 0), &mut rng).unwrap();
    assert_eq!(t, c(5, 0));
    // Everything occupied: fall back to all sampled tiles.
    let (t, _) = choose_target_tile(&map, from, near_far, |_| true, &mut rng).unwrap();
    assert_eq!(t, c(2, 0));
    assert!(choose_target_tile(&map, from, [], |_| false, &mut rng).is_none());

    // Blocked or unreachable candidates: nearest reachable tile of their arena.
    let room = split_room();
    let (t, _) = choose_target_tile(&room, c(7, 5), [c(6, 2)], |_| false, &mut rng).unwrap();
    assert_eq!(t, c(3, 2));
}

#[test]
fn choosing_among_many_candidates_is_deterministic() {
    let map = TownMap::builder("W", 30, 30).build().unwrap();
    let candidates: Vec<_> = (0..30).map(|i| c(i, 29 - i)).collect();
    let pick = |seed| {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        choose_target_tile(
            &map,
            c(0, 0),
            candidates.iter().copied(),
            |_| false,
            &mut rng,
        )
        .unwrap()
    };
    let (a, pa) = pick(1);
    assert_eq!(pick(1), (a, pa.clone()));
    assert!(candidates.contains(&a));
    assert_valid_path(&map, &pa, c(0, 0), a);
}

// ------------------------------------------------------------------------------------------
// The default town
// ------------------------------------------------------------------------------------------

fn default_town() -> TownMap {
    TownMap::load_tmx(TownMap::default_town_path()).unwrap()
}

const HOUSE: &[(&str, &[&str])] = &[
    ("bathroom", &["shower", "sink", "toilet"]),
    ("bedroom", &["bed", "closet", "desk"]),
    (
        "kitchen",
        &["dining table", "kitchen counter", "refrigerator", "stove"],
    ),
];

fn brief_places() -> BTreeMap<String, BTreeMap<String, BTreeSet<String>>> {
    let mut out = BTreeMap::new();
    let mut add = |sector: &str, arenas: &[(&str, &[&str])]| {
        let arenas = arenas
            .iter()
            .map(|(a, objs)| (a.to_string(), objs.iter().map(|o| o.to_string()).collect()))
            .collect();
        out.insert(sector.to_string(), arenas);
    };
    add("Okafor house", HOUSE);
    add("Reyes house", HOUSE);
    add("Lindqvist house", HOUSE);
    add(
        "Riverside Cafe",
        &[
            (
                "cafe",
                &[
                    "cafe counter",
                    "coffee machine",
                    "customer table",
                    "bookshelf",
                ],
            ),
            ("cafe kitchen", &["stove", "kitchen sink"]),
        ],
    );
    add(
        "Copper Kettle Pub",
        &[("bar", &["bar counter", "pub table", "dartboard", "piano"])],
    );
    add(
        "Maple Park",
        &[("park", &["bench", "fountain", "garden", "pond"])],
    );
    add(
        "Elm Street Grocery",
        &[("store", &["shelf", "cash register", "produce stand"])],
    );
    add(
        "Northgate College",
        &[
            ("classroom", &["lectern", "student desk", "blackboard"]),
            ("library", &["bookshelf", "reading table"]),
            ("dorm room", &["bed", "desk"]),
            ("office", &["desk", "computer"]),
        ],
    );
    out
}

#[test]
fn default_town_has_every_place_of_the_brief() {
    let map = default_town();
    assert_eq!(map.world_name(), "Willowbrook");
    assert_eq!((map.width(), map.height()), (64, 48));
    assert_eq!(map.tile_size(), (32, 32));
    assert_eq!(map.places(), &brief_places());
    for addr in map.game_object_addresses() {
        let tiles = map.place_tiles(&addr).unwrap();
        for t in tiles {
            let tile = map.tile(*t).unwrap();
            assert!(
                tile.events.contains(&TileEvent::idle(addr.to_string())),
                "{addr} at {t:?}"
            );
        }
    }
    for living in [
        "Willowbrook:Reyes house:bedroom",
        "Willowbrook:Northgate College:dorm room",
    ] {
        let hit = map.resolve_address(living, None).unwrap();
        assert_eq!(hit.level, ResolveLevel::Exact);
    }
}

#[test]
fn default_town_spawns_sit_on_their_beds() {
    let map = default_town();
    let names: Vec<_> = map.spawn_locations().map(|(n, _)| n.to_owned()).collect();
    assert_eq!(
        names,
        [
            "dorm-bed",
            "lindqvist-bed",
            "okafor-bed",
            "reyes-bed-a",
            "reyes-bed-b"
        ]
    );
    for (name, sector) in [
        ("okafor-bed", "Okafor house"),
        ("reyes-bed-a", "Reyes house"),
        ("reyes-bed-b", "Reyes house"),
        ("lindqvist-bed", "Lindqvist house"),
        ("dorm-bed", "Northgate College"),
    ] {
        let at = map.spawn_location(name).unwrap();
        assert!(map.is_walkable(at));
        let tile = map.tile(at).unwrap();
        assert_eq!(tile.sector.as_deref(), Some(sector), "{name}");
        assert_eq!(tile.game_object.as_deref(), Some("bed"), "{name}");
    }
}

#[test]
fn every_object_is_reachable_from_every_spawn() {
    let map = default_town();
    let mut finder = PathFinder::new();
    let spawns: Vec<_> = map.spawn_locations().collect();
    for (name, at) in &spawns {
        let reachable: BTreeSet<TileCoord> = finder.reachable(&map, *at).into_iter().collect();
        for addr in map.game_object_addresses() {
            let usable = map.place_tiles(&addr).unwrap().iter().any(|t| {
                [
                    *t,
                    c(t.x, t.y - 1),
                    c(t.x - 1, t.y),
                    c(t.x + 1, t.y),
                    c(t.x, t.y + 1),
                ]
                .iter()
                .any(|n| reachable.contains(n))
            });
            assert!(usable, "{addr} cannot be reached from spawn {name}");
            let path = path_to_address(&map, *at, &addr.to_string())
                .unwrap_or_else(|| panic!("no path from {name} to {addr}"));
            assert_eq!(path.first(), Some(at));
        }
        for (other, to) in &spawns {
            assert!(find_path(&map, *at, *to).is_some(), "{name} -> {other}");
        }
    }
}

#[test]
fn default_town_exposes_drawable_layers() {
    let map = default_town();
    let names: Vec<_> = map
        .visual_layers()
        .iter()
        .map(|l| l.name.as_str())
        .collect();
    assert_eq!(names, ["ground", "walls", "furniture"]);
    for layer in map.visual_layers() {
        assert_eq!(layer.tiles.len(), 64 * 48);
    }
    // Every ground tile is drawn; the ground tileset ids are within the tileset.
    let ts = &map.tilesets()[0];
    assert_eq!((ts.tile_width, ts.tile_height, ts.columns), (32, 32, 8));
    let ground = &map.visual_layers()[0];
    assert!(
        ground
            .tiles
            .iter()
            .all(|t| t.is_some_and(|t| t.id < ts.tile_count))
    );
    let image = ts.image.as_ref().unwrap();
    assert!(image.exists(), "{}", image.display());
    // Wall tiles block, except the 25 doors: 4 per house, 3 in the cafe, 2 in the pub, 2 in the
    // grocery, 6 in the college. Door tiles are ids 14 (in horizontal walls) and 15 (vertical).
    let walls = &map.visual_layers()[1];
    let doors: Vec<u32> = walls
        .tiles
        .iter()
        .enumerate()
        .filter_map(|(i, t)| t.map(|t| (c((i % 64) as i32, (i / 64) as i32), t)))
        .filter(|(at, _)| map.is_walkable(*at))
        .map(|(_, t)| t.id)
        .collect();
    assert_eq!(doors.len(), 25);
    assert!(doors.iter().all(|id| *id == 14 || *id == 15), "{doors:?}");
    let river_row: Vec<bool> = (0..64).map(|x| map.is_walkable(c(x, 29))).collect();
    assert_eq!(
        river_row.iter().filter(|w| **w).count(),
        4,
        "two bridges, two tiles wide"
    );
}

// ------------------------------------------------------------------------------------------
// The Tiled loader on hand-written maps
// ------------------------------------------------------------------------------------------

struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("bga-world-{}-{tag}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const TILESET: &str = r#"<tileset firstgid="1" name="t" tilewidth="32" tileheight="32" tilecount="4" columns="2"><image source="t.png" width="64" height="64"/></tileset>"#;

/// A 4×3 map of 32 px tiles. `collision` is 12 CSV values.
fn tmx(properties: &str, collision: &str, extra_layers: &str, objects: &str) -> String {
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<map version="1.10" orientation="orthogonal" renderorder="right-down" width="4" height="3" tilewidth="32" tileheight="32" infinite="0" nextlayerid="9" nextobjectid="20">
 {properties}
 {TILESET}
 <layer id="1" name="ground" width="4" height="3"><data encoding="csv">1,1,1,1,1,1,1,1,1,1,1,2</data></layer>
 <layer id="2" name="collision" width="4" height="3"><data encoding="csv">{collision}</data></layer>
 {extra_layers}
 {objects}
</map>"#
    )
}

const WORLD: &str = r#"<properties><property name="world" value="T"/></properties>"#;
const OPEN: &str = "0,0,0,0,0,0,0,0,0,0,0,0";

/// Sector `home` over columns 0–2, arena `room` over columns 0–1, object `bed` at (0,0),
/// spawn point at (1,1), plus `extra` objects appended to the named layer.
fn objects(sectors: &str, arenas: &str, objs: &str, spawns: &str) -> String {
    format!(
        r#"<objectgroup id="3" name="sectors"><object id="1" name="home" x="0" y="0" width="96" height="96"/>{sectors}</objectgroup>
 <objectgroup id="4" name="arenas"><object id="2" name="room" x="0" y="0" width="64" height="96"/>{arenas}</objectgroup>
 <objectgroup id="5" name="objects"><object id="3" name="bed" x="0" y="0" width="32" height="32"/>{objs}</objectgroup>
 <objectgroup id="6" name="spawns"><object id="4" name="start" x="48" y="48"><point/></object>{spawns}</objectgroup>"#
    )
}

fn good_objects() -> String {
    objects("", "", "", "")
}

#[test]
fn a_small_valid_map_loads() {
    let dir = TempDir::new("valid");
    let notes = r#"<objectgroup id="7" name="notes"><object id="9" name="anything" x="1" y="1"><ellipse/></object></objectgroup>"#;
    let grouped = r#"<group id="8" name="decor"><layer id="9" name="flowers" width="4" height="3"><data encoding="csv">0,0,0,0,0,3,0,0,0,0,0,0</data></layer></group>"#;
    let collision = "0,0,0,4,0,0,0,4,0,0,0,4";
    let path = dir.write(
        "ok.tmx",
        &tmx(
            WORLD,
            collision,
            grouped,
            &format!("{}{notes}", good_objects()),
        ),
    );
    let map = TownMap::load_tmx(&path).unwrap();
    assert_eq!(map.source(), Some(path.as_path()));
    assert_eq!(map.world_name(), "T");
    assert_eq!(map.address_tiles("T:home").unwrap().len(), 9);
    assert_eq!(map.address_tiles("T:home:room").unwrap().len(), 6);
    assert_eq!(
        map.address_tiles("T:home:room:bed")
            .unwrap()
            .iter()
            .copied()
            .collect::<Vec<_>>(),
        vec![c(0, 0)]
    );
    assert_eq!(map.spawn_location("start"), Some(c(1, 1)));
    assert!(!map.is_walkable(c(3, 0)) && map.is_walkable(c(2, 0)));
    let layers: Vec<_> = map
        .visual_layers()
        .iter()
        .map(|l| l.name.as_str())
        .collect();
    assert_eq!(layers, ["ground", "flowers"]);
    let ground = &map.visual_layers()[0];
    assert_eq!(ground.get(4, c(3, 2)).map(|t| t.id), Some(1));
    assert_eq!(ground.get(4, c(0, 0)).map(|t| t.id), Some(0));
    assert_eq!(
        map.visual_layers()[1].get(4, c(1, 1)).map(|t| t.id),
        Some(2)
    );
    assert_eq!(map.visual_layers()[1].get(4, c(0, 0)), None);
    assert_eq!(
        map.tilesets()[0].image.as_deref(),
        Some(dir.0.join("t.png").as_path())
    );
}

#[test]
fn explicit_container_properties_are_checked() {
    let dir = TempDir::new("claims");
    let ok = r#"<object id="10" name="lamp" x="32" y="64" width="32" height="32"><properties><property name="arena" value="room"/><property name="sector" value="home"/></properties></object>"#;
    let path = dir.write("ok.tmx", &tmx(WORLD, OPEN, "", &objects("", "", ok, "")));
    assert!(TownMap::load_tmx(&path).is_ok());
    let bad = r#"<object id="10" name="lamp" x="32" y="64" width="32" height="32"><properties><property name="arena" value="hall"/></properties></object>"#;
    let path = dir.write("bad.tmx", &tmx(WORLD, OPEN, "", &objects("", "", bad, "")));
    let err = TownMap::load_tmx(&path).unwrap_err();
    assert!(
        matches!(*err.problem, MapProblem::ContainerMismatch { ref claimed, .. } if claimed == "hall"),
        "{err}"
    );
}

/// Loads `text` as `name` and checks the error names the file; returns the problem.
fn broken(dir: &TempDir, name: &str, text: &str) -> MapProblem {
    let path = dir.write(name, text);
    let err = TownMap::load_tmx(&path).expect_err(name);
    assert_eq!(err.path, path);
    let msg = err.to_string();
    assert!(msg.contains(name), "error does not name the file: {msg}");
    *err.problem
}

#[test]
fn broken_maps_are_errors_naming_the_file() {
    let dir = TempDir::new("broken");

    let missing = dir.0.join("nope.tmx");
    let err = TownMap::load_tmx(&missing).unwrap_err();
    assert!(matches!(*err.problem, MapProblem::Io(_)));
    assert!(err.to_string().contains("nope.tmx"));

    // Malformed XML is caught by the size checks' XML reader, before the Tiled parser.
    let p = broken(&dir, "xml.tmx", "<map><layer></map");
    assert!(matches!(p, MapProblem::Xml(_)), "{p}");

    let p = broken(&dir, "noworld.tmx", &tmx("", OPEN, "", &good_objects()));
    assert!(matches!(p, MapProblem::MissingWorldName), "{p}");

    let no_collision =
        tmx(WORLD, OPEN, "", &good_objects()).replace("name=\"collision\"", "name=\"blocked\"");
    let p = broken(&dir, "nocollision.tmx", &no_collision);
    assert!(
        matches!(p, MapProblem::MissingLayer { ref name, kind: "tile" } if name == "collision"),
        "{p}"
    );

    let no_spawns =
        tmx(WORLD, OPEN, "", &good_objects()).replace("name=\"spawns\"", "name=\"starts\"");
    let p = broken(&dir, "nospawns.tmx", &no_spawns);
    assert!(
        matches!(p, MapProblem::MissingLayer { ref name, kind: "object" } if name == "spawns"),
        "{p}"
    );

    let outside = r#"<object id="11" name="shed" x="64" y="0" width="96" height="32"/>"#;
    let p = broken(
        &dir,
        "outside.tmx",
        &tmx(WORLD, OPEN, "", &objects(outside, "", "", "")),
    );
    assert!(matches!(p, MapProblem::OutsideMap { id: 11, .. }), "{p}");

    let stray_arena = r#"<object id="12" name="porch" x="96" y="0" width="32" height="32"/>"#;
    let p = broken(
        &dir,
        "stray.tmx",
        &tmx(WORLD, OPEN, "", &objects("", stray_arena, "", "")),
    );
    assert!(
        matches!(p, MapProblem::NotContained { id: 12, container: "sector", tile, .. } if tile == c(3, 0)),
        "{p}"
    );

    let wide = r#"<object id="13" name="hall" x="64" y="0" width="32" height="96"/>"#;
    let spanning = r#"<object id="14" name="rug" x="32" y="32" width="64" height="32"/>"#;
    let p = broken(
        &dir,
        "span.tmx",
        &tmx(WORLD, OPEN, "", &objects("", wide, spanning, "")),
    );
    assert!(
        matches!(
            p,
            MapProblem::SpansContainers {
                id: 14,
                container: "arena",
                ..
            }
        ),
        "{p}"
    );

    let overlapping = r#"<object id="15" name="garage" x="64" y="0" width="64" height="32"/>"#;
    let p = broken(
        &dir,
        "overlap.tmx",
        &tmx(WORLD, OPEN, "", &objects(overlapping, "", "", "")),
    );
    assert!(
        matches!(p, MapProblem::Overlap { tile, .. } if tile == c(2, 0)),
        "{p}"
    );

    let unnamed = r#"<object id="16" x="32" y="32" width="32" height="32"/>"#;
    let p = broken(
        &dir,
        "unnamed.tmx",
        &tmx(WORLD, OPEN, "", &objects("", "", unnamed, "")),
    );
    assert!(matches!(p, MapProblem::InvalidName { id: 16, .. }), "{p}");

    let colon = r#"<object id="16" name="a:b" x="32" y="32" width="32" height="32"/>"#;
    let p = broken(
        &dir,
        "colon.tmx",
        &tmx(WORLD, OPEN, "", &objects("", "", colon, "")),
    );
    assert!(matches!(p, MapProblem::InvalidName { .. }), "{p}");

    let ellipse =
        r#"<object id="17" name="pond" x="0" y="32" width="32" height="32"><ellipse/></object>"#;
    let p = broken(
        &dir,
        "ellipse.tmx",
        &tmx(WORLD, OPEN, "", &objects("", "", ellipse, "")),
    );
    assert!(matches!(p, MapProblem::BadShape { id: 17, .. }), "{p}");

    let rotated =
        r#"<object id="18" name="desk" x="0" y="32" width="32" height="32" rotation="45"/>"#;
    let p = broken(
        &dir,
        "rotated.tmx",
        &tmx(WORLD, OPEN, "", &objects("", "", rotated, "")),
    );
    assert!(matches!(p, MapProblem::Rotated { id: 18, .. }), "{p}");

    let tiny = r#"<object id="19" name="speck" x="0" y="40" width="8" height="8"/>"#;
    let p = broken(
        &dir,
        "tiny.tmx",
        &tmx(WORLD, OPEN, "", &objects("", "", tiny, "")),
    );
    assert!(matches!(p, MapProblem::CoversNoTile { id: 19, .. }), "{p}");

    let blocked_spawn = "0,0,0,0,0,1,0,0,0,0,0,0";
    let p = broken(
        &dir,
        "spawn.tmx",
        &tmx(WORLD, blocked_spawn, "", &good_objects()),
    );
    assert!(
        matches!(p, MapProblem::SpawnBlocked { tile, .. } if tile == c(1, 1)),
        "{p}"
    );

    let p = broken(&dir, "short.tmx", &tmx(WORLD, "0,0,0", "", &good_objects()));
    assert!(
        matches!(
            p,
            MapProblem::LayerDataTooShort {
                expected: 12,
                found: 3,
                ..
            }
        ),
        "{p}"
    );

    let zlib = tmx(WORLD, OPEN, "", &good_objects()).replace(
        &format!(r#"<data encoding="csv">{OPEN}</data>"#),
        r#"<data encoding="base64" compression="zlib">eJxjYCANAAAAMAAB</data>"#,
    );
    let p = broken(&dir, "zlib.tmx", &zlib);
    assert!(
        matches!(p, MapProblem::UnsupportedLayerFormat { ref layer, .. } if layer == "collision"),
        "{p}"
    );

    let p = broken(
        &dir,
        "badtile.tmx",
        &tmx(WORLD, "0,0,0,0,0,0,0,0,0,0,0,9", "", &good_objects()),
    );
    assert!(matches!(p, MapProblem::UnknownTile { id: 8, .. }), "{p}");

    let small_layer = r#"<layer id="9" name="roof" width="2" height="2"><data encoding="csv">1,1,1,1</data></layer>"#;
    let p = broken(
        &dir,
        "layersize.tmx",
        &tmx(WORLD, OPEN, small_layer, &good_objects()),
    );
    assert!(
        matches!(
            p,
            MapProblem::LayerSize {
                width: 2,
                height: 2,
                ..
            }
        ),
        "{p}"
    );

    let wrong_kind = r#"<layer id="9" name="arenas" width="4" height="3"><data encoding="csv">0,0,0,0,0,0,0,0,0,0,0,0</data></layer>"#;
    let p = broken(
        &dir,
        "kind.tmx",
        &tmx(WORLD, OPEN, wrong_kind, &good_objects()),
    );
    assert!(
        matches!(
            p,
            MapProblem::WrongLayerKind {
                expected: "object",
                ..
            }
        ),
        "{p}"
    );

    let external = tmx(WORLD, OPEN, "", &good_objects())
        .replace(TILESET, r#"<tileset firstgid="1" source="missing.tsx"/>"#);
    let p = broken(&dir, "external.tmx", &external);
    assert!(matches!(p, MapProblem::Tiled(_)), "{p}");
    assert!(p.to_string().contains("missing.tsx"), "{p}");

    let iso = tmx(WORLD, OPEN, "", &good_objects()).replace("orthogonal", "isometric");
    let p = broken(&dir, "iso.tmx", &iso);
    assert!(matches!(p, MapProblem::NotOrthogonal(_)), "{p}");
}

#[test]
fn default_town_path_points_into_the_crate() {
    let path = TownMap::default_town_path();
    assert!(path.ends_with(Path::new("assets/maps/willowbrook.tmx")));
    assert!(path.is_file());
}
