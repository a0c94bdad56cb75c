//! Crowds for benchmarks: many personas from the few default sheets.
//!
//! The default town ships five persona sheets and five spawn points. Throughput and
//! concurrency benchmarks need 25 to 1,000 personas, so [`synthetic_sheets`] clones the sheets
//! round-robin under distinct names (each copy keeps its original's home, workplace and
//! habits), and [`spawn_crowd`] spreads them over the walkable tiles of their homes so they do
//! not all stand on five tiles.

use bevy::prelude::*;

use super::TownSetupError;
use crate::clock::SimClock;
use crate::persona::{
    Body, Mind, PersonaError, PersonaSheet, default_personas_dir, load_persona_sheets,
    spawn_persona,
};
use crate::settings::AgentSettings;
use crate::world::{TileCoord, TownMap};

/// `n` persona sheets: the default sheets in file order, then copies of them round-robin. The
/// k-th copy of "Elena Reyes" (k ≥ 1) is "Elena Reyes k+1" with last name "Reyes k+1", so names
/// stay unique and the first name reads naturally in prompts.
pub fn synthetic_sheets(n: usize) -> Result<Vec<PersonaSheet>, PersonaError> {
    let originals = load_persona_sheets(default_personas_dir())?;
    Ok((0..n)
        .filter_map(|i| {
            let original = originals.get(i % originals.len())?;
            let copy = i / originals.len();
            if copy == 0 {
                return Some(original.clone());
            }
            let mut sheet = original.clone();
            let suffix = copy + 1;
            sheet.name = format!("{} {suffix}", original.name);
            sheet.last_name = format!("{} {suffix}", original.last_name);
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
        .collect())
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
    {
        let world = app.world_mut();
        let mut queue = bevy::ecs::world::CommandQueue::default();
        let mut commands = Commands::new(&mut queue, world);
        for sheet in sheets {
            entities.push(spawn_persona(
                &mut commands,
                sheet,
                &map,
                &settings,
                &clock,
                seed,
            )?);
        }
        queue.apply(world);
    }
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
}
