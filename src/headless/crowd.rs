//! Crowds for benchmarks: many personas from the few default sheets.
//!
//! The default town ships five persona sheets and five spawn points. Throughput and
//! concurrency benchmarks need 25 to 1,000 personas, so [`synthetic_sheets`] clones the sheets
//! round-robin under distinct names (each copy keeps its original's home, workplace and
//! habits), and [`spawn_crowd`] spreads them over the walkable tiles of their homes so they do
//! not all stand on five tiles.
//!
//! A crowd of a thousand in a town built for five is a stress test no Smallville run has: every
//! persona sees new faces every step. [`district_town`] lays copies of a town side by side —
//! districts — and [`district_crowd`] gives each district its own five residents, who live,
//! work and know their way around their district only, so a thousand personas live at the
//! density the town was drawn for.

use bevy::prelude::*;

use super::TownSetupError;
use crate::clock::SimClock;
use crate::persona::{
    Body, Mind, PersonaError, PersonaSheet, default_personas_dir, load_persona_sheets,
    spawn_persona,
};
use crate::settings::AgentSettings;
use crate::world::map::MapParts;
use crate::world::{MapError, MapProblem, Tile, TileCoord, TownMap};

/// `n` persona sheets: the default sheets in file order, then copies of them round-robin. The
/// k-th copy of "Elena Reyes" (k ≥ 1) is "Elena Reyes k+1" with last name "Reyes k+1", so names
/// stay unique and the first name reads naturally in prompts.
pub fn synthetic_sheets(n: usize) -> Result<Vec<PersonaSheet>, PersonaError> {
    Ok(copies(&load_persona_sheets(default_personas_dir())?, n))
}

/// `n` sheets from `originals` as [`synthetic_sheets`] makes them.
fn copies(originals: &[PersonaSheet], n: usize) -> Vec<PersonaSheet> {
    (0..n)
        .filter_map(|i| {
            let original = originals.get(i % originals.len())?;
            let copy = i / originals.len();
            if copy == 0 {
                return Some(original.clone());
            }
            let mut sheet = original.clone();
            sheet.name = nth_copy(&original.name, copy);
            sheet.last_name = nth_copy(&original.last_name, copy);
            // Descriptions name the persona; keep them consistent with the new name.
            for text in [
                &mut sheet.learned,
                &mut sheet.currently,
                &mut sheet.lifestyle,
                &mut sheet.daily_plan_req,
            ] {
                *text = text.replace(&original.name, &sheet.name);
            }
            Some(sheet)
        })
        .collect()
}

/// The name of the `copy`-th copy (0-based) of something named `name` — a persona, or a
/// sector or spawn point in district `copy`: the first keeps the name, copy k ≥ 1 appends
/// ` k+1`.
fn nth_copy(name: &str, copy: usize) -> String {
    if copy == 0 {
        name.to_owned()
    } else {
        format!("{name} {}", copy + 1)
    }
}

/// `address` (`world:sector:…`) with its sector renamed for `district`.
fn address_in_district(address: &str, district: usize) -> String {
    let mut parts: Vec<String> = address.split(':').map(str::to_owned).collect();
    if let Some(sector) = parts.get_mut(1) {
        *sector = nth_copy(sector, district);
    }
    parts.join(":")
}

/// `districts` copies of `map` laid out row by row in a grid as near square as it gets (the
/// k-th copy's sectors and spawn points renamed as [`district_crowd`] expects: "Reyes house 2",
/// "reyes-bed-b 2"). Neighbouring districts touch, so whoever walks off one's edge walks into
/// the next. Visual layers are not copied (headless use). Fails for 0 districts or a grid of
/// more tiles than tile coordinates and path finding number.
pub fn district_town(map: &TownMap, districts: usize) -> Result<TownMap, MapError> {
    let (tile_width, tile_height) = map.tile_size();
    if districts == 0 {
        return Err(MapError::in_memory(MapProblem::EmptyMap {
            width: 0,
            height: 0,
            tile_width,
            tile_height,
        }));
    }
    let (w, h) = (u64::from(map.width()), u64::from(map.height()));
    let columns = (districts as f64).sqrt().ceil() as u64;
    let rows = (districts as u64).div_ceil(columns);
    let (width, height) = (w.saturating_mul(columns), h.saturating_mul(rows));
    // Tile coordinates are `i32`; path finding numbers tiles with `u32`.
    let fits = width.saturating_mul(height) <= u64::from(u32::MAX);
    let (Ok(width), Ok(height), true) = (i32::try_from(width), i32::try_from(height), fits) else {
        return Err(MapError::in_memory(MapProblem::TooLarge { width, height }));
    };
    let (width, height) = (width as u32, height as u32);
    let (columns, w, h) = (columns as usize, w as usize, h as usize);
    let empty = Tile {
        collision: true,
        world: map.world_name().to_owned(),
        ..Tile::default()
    };
    let mut tiles = vec![empty; width as usize * height as usize];
    for (c, tile) in map.tiles() {
        for district in 0..districts {
            let (ox, oy) = ((district % columns) * w, (district / columns) * h);
            let (x, y) = (ox + c.x as usize, oy + c.y as usize);
            let Some(copy) = tiles.get_mut(y * width as usize + x) else {
                continue;
            };
            *copy = Tile {
                collision: tile.collision,
                world: tile.world.clone(),
                sector: tile.sector.as_deref().map(|s| nth_copy(s, district)),
                arena: tile.arena.clone(),
                game_object: tile.game_object.clone(),
                spawning_location: tile
                    .spawning_location
                    .as_deref()
                    .map(|s| nth_copy(s, district)),
                // The map adds each object's idle event again.
                events: Default::default(),
            };
        }
    }
    Ok(TownMap::from_parts(MapParts {
        world: map.world_name().to_owned(),
        width,
        height,
        tile_width,
        tile_height,
        tiles,
        visual_layers: Vec::new(),
        tilesets: Vec::new(),
        source: None,
    }))
}

/// A [`district_town`] of `map` for `n` personas and their sheets: the town's own sheets (as
/// [`synthetic_sheets`] names them) in districts of as many residents as the town has sheets —
/// the k-th copy of each sheet lives, works and spawns in district k and knows that district's
/// sectors only. Spawn them with [`spawn_crowd`].
pub fn district_crowd(
    n: usize,
    map: &TownMap,
) -> Result<(TownMap, Vec<PersonaSheet>), TownSetupError> {
    let originals = load_persona_sheets(default_personas_dir())?;
    let residents = originals.len().max(1);
    let sectors: Vec<String> = map.sectors().map(str::to_owned).collect();
    let mut sheets = copies(&originals, n);
    for (i, sheet) in sheets.iter_mut().enumerate() {
        let district = i / residents;
        sheet.living_area = address_in_district(&sheet.living_area, district);
        sheet.workplace = sheet
            .workplace
            .as_deref()
            .map(|work| address_in_district(work, district));
        sheet.spawn = nth_copy(&sheet.spawn, district);
        let known = sheet
            .known_sectors
            .clone()
            .unwrap_or_else(|| sectors.clone());
        sheet.known_sectors = Some(known.iter().map(|s| nth_copy(s, district)).collect());
    }
    let town = district_town(map, n.div_ceil(residents).max(1))?;
    Ok((town, sheets))
}

/// The walkable tiles of the sector holding `living_area` (`world:sector:arena`), sorted.
fn home_tiles(map: &TownMap, living_area: &str) -> Vec<TileCoord> {
    let mut parts = living_area.split(':');
    let sector = match (parts.next(), parts.next()) {
        (Some(world), Some(sector)) => format!("{world}:{sector}"),
        _ => living_area.to_owned(),
    };
    map.address_tiles(&sector)
        .map(|tiles| {
            tiles
                .iter()
                .copied()
                .filter(|&t| map.is_walkable(t))
                .collect()
        })
        .unwrap_or_default()
}

/// Spawns `sheets` in the town `map` (each validated against it) with the app's settings and
/// clock (defaults when absent), and returns the entities in sheet order. Does not insert `map`.
pub fn spawn_sheets(
    app: &mut App,
    map: &TownMap,
    sheets: &[PersonaSheet],
    seed: u64,
) -> Result<Vec<Entity>, PersonaError> {
    let settings = app
        .world()
        .get_resource::<AgentSettings>()
        .cloned()
        .unwrap_or_default();
    let clock = app
        .world()
        .get_resource::<SimClock>()
        .cloned()
        .unwrap_or_default();
    let mut entities = Vec::with_capacity(sheets.len());
    let world = app.world_mut();
    let mut queue = bevy::ecs::world::CommandQueue::default();
    let mut commands = Commands::new(&mut queue, world);
    for sheet in sheets {
        entities.push(spawn_persona(
            &mut commands,
            sheet,
            map,
            &settings,
            &clock,
            seed,
        )?);
    }
    queue.apply(world);
    Ok(entities)
}

/// Spawns `sheets` in the town `map` (validated like any sheet), then moves each persona to a
/// walkable tile of its home's sector: the personas of one home take its tiles in turn, so a
/// crowd spreads out instead of piling onto the spawn points. A home without walkable tiles
/// keeps its spawn point. Inserts `map` as the app's [`TownMap`] and returns the entities in
/// sheet order.
pub fn spawn_crowd(
    app: &mut App,
    map: TownMap,
    sheets: &[PersonaSheet],
    seed: u64,
) -> Result<Vec<Entity>, TownSetupError> {
    let entities = spawn_sheets(app, &map, sheets, seed)?;
    let mut taken: std::collections::HashMap<String, usize> = Default::default();
    for (sheet, &entity) in sheets.iter().zip(&entities) {
        let tiles = home_tiles(&map, &sheet.living_area);
        let turn = taken.entry(sheet.living_area.clone()).or_default();
        let Some(&tile) = tiles.get(*turn % tiles.len().max(1)) else {
            continue;
        };
        *turn += 1;
        let world = app.world_mut();
        if let Some(mut body) = world.get_mut::<Body>(entity) {
            body.tile = tile;
            body.previous_tile = tile;
        }
        if let Some(mut mind) = world.get_mut::<Mind>(entity)
            && let Some(state) = mind.get_mut()
        {
            state.scratch.curr_tile = tile;
        }
    }
    app.insert_resource(map);
    Ok(entities)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::persona::Persona;

    #[test]
    fn synthetic_sheets_are_unique_copies() {
        let sheets = synthetic_sheets(12).unwrap();
        assert_eq!(sheets.len(), 12);
        let names: std::collections::BTreeSet<&str> =
            sheets.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names.len(), 12);
        // Sheet order: the five originals, then copy 2 of each, then copy 3.
        assert_eq!(sheets[0].name, "Elena Reyes");
        assert_eq!(sheets[5].name, "Elena Reyes 2");
        assert_eq!(sheets[5].first_name, "Elena");
        assert_eq!(sheets[5].last_name, "Reyes 2");
        assert_eq!(sheets[5].living_area, sheets[0].living_area);
        assert!(sheets[5].learned.starts_with("Elena Reyes 2 is"));
        assert_eq!(sheets[11].name, "Mira Okafor 3");
        assert!(synthetic_sheets(0).unwrap().is_empty());
    }

    #[test]
    fn a_crowd_spreads_over_walkable_home_tiles() {
        let map = TownMap::load_tmx(TownMap::default_town_path()).unwrap();
        let home = "Willowbrook:Reyes house:bedroom";
        let tiles = home_tiles(&map, home);
        assert!(tiles.len() > 2, "the Reyes house has room");
        let mut app = App::new();
        let sheets = synthetic_sheets(25).unwrap();
        let entities = spawn_crowd(&mut app, map, &sheets, 1).unwrap();
        assert_eq!(entities.len(), 25);
        let map = app.world().resource::<TownMap>().clone();
        let mut query = app.world_mut().query::<(&Name, &Body, &Mind, &Persona)>();
        let mut reyes_tiles = Vec::new();
        for (name, body, mind, _) in query.iter(app.world()) {
            assert!(map.is_walkable(body.tile), "{name} on a walkable tile");
            assert_eq!(mind.get().unwrap().scratch.curr_tile, body.tile);
            let sheet = sheets.iter().find(|s| s.name == name.as_str()).unwrap();
            if sheet.living_area == home {
                reyes_tiles.push(body.tile);
            }
        }
        // Elena and Tomas Reyes and their copies: ten personas on the first ten house tiles.
        reyes_tiles.sort();
        let expected: Vec<TileCoord> = tiles.iter().copied().take(10).collect();
        assert_eq!(reyes_tiles.len(), 10);
        assert_eq!(reyes_tiles, expected);
    }

    #[test]
    fn district_town_copies_the_town_with_renamed_sectors_and_spawns() {
        let map = TownMap::load_tmx(TownMap::default_town_path()).unwrap();
        let (w, h) = (map.width() as i32, map.height() as i32);
        // Three districts: a 2×2 grid with the bottom-right cell empty.
        let town = district_town(&map, 3).unwrap();
        assert_eq!(
            (town.width(), town.height()),
            (map.width() * 2, map.height() * 2)
        );
        assert_eq!(town.world_name(), map.world_name());
        let sectors: Vec<&str> = map.sectors().collect();
        assert_eq!(town.sectors().count(), sectors.len() * 3);
        for (c, tile) in map.tiles() {
            for (district, (ox, oy)) in [(0, 0), (w, 0), (0, h)].into_iter().enumerate() {
                let copy = town.tile(TileCoord::new(c.x + ox, c.y + oy)).unwrap();
                assert_eq!(
                    copy.collision, tile.collision,
                    "{c:?} in district {district}"
                );
                assert_eq!(copy.arena, tile.arena);
                assert_eq!(copy.game_object, tile.game_object);
                assert_eq!(
                    copy.sector,
                    tile.sector.as_deref().map(|s| nth_copy(s, district))
                );
            }
            // The cell no district fills is solid and unaddressed.
            let none = town.tile(TileCoord::new(c.x + w, c.y + h)).unwrap();
            assert!(none.collision && none.sector.is_none());
        }
        for (name, c) in map.spawn_locations() {
            assert_eq!(town.spawn_location(name), Some(c));
            let third = TileCoord::new(c.x, c.y + h);
            assert_eq!(town.spawn_location(&format!("{name} 3")), Some(third));
        }
        assert!(
            town.address_tiles("Willowbrook:Reyes house 2:bedroom")
                .is_some()
        );
        assert!(town.address_tiles("Willowbrook:Reyes house 4").is_none());
        assert!(district_town(&map, 0).is_err());
        assert!(matches!(
            district_town(&map, usize::MAX).map_err(|e| *e.problem),
            Err(MapProblem::TooLarge { .. })
        ));
    }

    #[test]
    fn district_residents_live_work_and_know_their_own_district() {
        let map = TownMap::load_tmx(TownMap::default_town_path()).unwrap();
        let (town, sheets) = district_crowd(12, &map).unwrap();
        assert_eq!(
            (town.width(), town.height()),
            (map.width() * 2, map.height() * 2)
        );
        assert!(town.address_tiles("Willowbrook:Reyes house 3").is_some());
        assert_eq!(sheets[5].name, "Elena Reyes 2");
        assert_eq!(sheets[5].living_area, "Willowbrook:Reyes house 2:bedroom");
        assert_eq!(
            sheets[5].workplace.as_deref(),
            Some("Willowbrook:Northgate College 2:library")
        );
        assert_eq!(sheets[5].spawn, "reyes-bed-b 2");
        assert_eq!(sheets[0].living_area, "Willowbrook:Reyes house:bedroom");
        let mut app = App::new();
        spawn_crowd(&mut app, town, &sheets, 1).unwrap();
        let town = app.world().resource::<TownMap>().clone();
        let mut query = app.world_mut().query::<(&Name, &Body, &Mind)>();
        for (name, body, mind) in query.iter(app.world()) {
            let i = sheets.iter().position(|s| s.name == name.as_str()).unwrap();
            let (sheet, district) = (&sheets[i], i / 5);
            let state = mind.get().unwrap();
            let known = state.spatial.accessible_sectors(town.world_name());
            assert_eq!(
                known.len(),
                map.sectors().count(),
                "{name} knows one district"
            );
            for sector in known {
                let home = town
                    .address_tiles(&format!("Willowbrook:{sector}"))
                    .unwrap();
                assert!(home.iter().all(|t| {
                    let (cx, cy) = ((t.x / map.width() as i32), (t.y / map.height() as i32));
                    (cy * 2 + cx) as usize == district
                }));
            }
            let home = home_tiles(&town, &sheet.living_area);
            assert!(home.contains(&body.tile), "{name} starts at home");
        }
    }
}
