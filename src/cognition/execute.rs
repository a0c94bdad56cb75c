//! Execute (SPEC §3.9): the current action's address becomes a target tile and a path, planned
//! once per action; bodies move one tile per step; each persona's event is placed on its tile
//! and, on arrival, its object's event on the object's tile.
//!
//! Execute is synchronous and runs for every persona every step — also for those whose mind is
//! out thinking, which is what lets a persona keep doing its current action in Realtime mode.
//! It reads only [`Body`] and [`ActionView`], never the mind.

use std::collections::HashMap;

use bevy::prelude::*;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::clock::{AgentSystems, Held, SimClock, SimStep};
use crate::persona::{ActionView, Body, Persona};
use crate::world::{
    ActionAddress, AddressLevel, TileCoord, TileEvent, TownMap, choose_target_tile, find_path,
    path_toward,
};

/// Moves personas along their paths and keeps the tile events up to date.
#[derive(Default)]
pub struct ExecutePlugin;

impl Plugin for ExecutePlugin {
    fn build(&self, app: &mut App) {
        app.add_systems(SimStep, execute_actions.in_set(AgentSystems::Execute));
    }
}

/// A stable per-persona, per-step random stream: execution needs a little randomness (which of
/// an arena's tiles), and it must not depend on iteration order or on the mind being home.
pub(crate) fn step_rng(name: &str, step: u64) -> ChaCha8Rng {
    let hash = crate::persona::name_hash(name);
    ChaCha8Rng::seed_from_u64(hash ^ step.wrapping_mul(0x9e37_79b9_7f4a_7c15))
}

/// Whether a tile event's subject is a persona (persona names have no `:`; object addresses do).
pub(crate) fn is_persona_subject(subject: &str) -> bool {
    !subject.contains(':')
}

/// The path for an action (start tile included), following SPEC §1's special addresses.
/// `others` maps persona names to their tiles. `None` when nothing reachable fits.
pub(crate) fn plan_path(
    map: &TownMap,
    from: TileCoord,
    address: &ActionAddress,
    living_area: &str,
    others: &HashMap<String, TileCoord>,
    rng: &mut ChaCha8Rng,
) -> Option<Vec<TileCoord>> {
    let occupied = |c: TileCoord| {
        map.tile(c)
            .is_some_and(|t| t.events.iter().any(|e| is_persona_subject(&e.subject)))
    };
    let living = (!living_area.is_empty()).then_some(living_area);
    match address {
        ActionAddress::Persona(name) => {
            let target = *others.get(name)?;
            let full = find_path(map, from, target)?;
            if full.len() <= 2 {
                // Already next to each other: stay.
                return Some(vec![from]);
            }
            // Both walk to the midpoint of the path between them.
            let mid = full.get(full.len() / 2).copied()?;
            find_path(map, from, mid)
        }
        ActionAddress::Waiting(tile) => {
            path_toward(map, from, &[*tile], map.nearby_tiles(*tile, 2))
                .or_else(|| Some(vec![from]))
        }
        ActionAddress::RandomInArena(place) | ActionAddress::Place(place) => {
            let resolved = map.resolve_address(&place.to_string(), living).ok()?;
            choose_target_tile(map, from, resolved.tiles.iter().copied(), occupied, rng)
                .map(|(_, p)| p)
        }
    }
}

/// Where an arriving persona's object event goes: the object's tile nearest to the persona when
/// the address names a known object exactly, else the persona's own tile.
fn object_event_tile(map: &TownMap, address: &ActionAddress, at: TileCoord) -> TileCoord {
    // Only a game object (or, never in practice, an arena's `<random>`) has a tile of its own.
    let place = match address {
        ActionAddress::Place(place) if place.level() == AddressLevel::GameObject => place,
        ActionAddress::RandomInArena(place) => place,
        _ => return at,
    };
    let Some(tiles) = map.address_tiles(&place.to_string()) else {
        return at;
    };
    tiles
        .iter()
        .copied()
        .min_by_key(|t| ((t.x - at.x).abs() + (t.y - at.y).abs(), *t))
        .unwrap_or(at)
}

/// Every persona as the Execute stage moves it (a held one keeps its tile).
type Walkers<'w, 's> = Query<
    'w,
    's,
    (
        Entity,
        &'static Name,
        &'static mut Body,
        Ref<'static, ActionView>,
        Has<Held>,
    ),
    With<Persona>,
>;

/// The Execute stage for every persona, in name order (deterministic).
///
/// Events are only rewritten when something changed: a persona that stands still doing the
/// same thing keeps its event and its object's event as they are (most personas, most steps).
pub(crate) fn execute_actions(
    clock: Res<SimClock>,
    map: Option<ResMut<TownMap>>,
    mut order: Local<Vec<Entity>>,
    mut tiles_kept: Local<HashMap<String, TileCoord>>,
    added: Query<(), Added<Persona>>,
    renamed: Query<(), (Changed<Name>, With<Persona>)>,
    mut personas: Walkers<'_, '_>,
) {
    let Some(mut map) = map else {
        return;
    };
    if order.len() != personas.iter().len() || !added.is_empty() || !renamed.is_empty() {
        let mut named: Vec<(&str, Entity)> =
            personas.iter().map(|(e, n, ..)| (n.as_str(), e)).collect();
        named.sort();
        *order = named.into_iter().map(|(_, e)| e).collect();
        // Someone came, went or was renamed: the names the tiles are kept under are redone.
        tiles_kept.clear();
    }

    // Object events that stop this step go idle first (they are placed again below while in
    // use), so one persona's new object event is never idled by another's old one.
    for entity in order.iter() {
        if let Ok((_, _, mut body, view, _)) = personas.get_mut(*entity) {
            let keeps = !view.is_changed() && body.planned_path.is_empty() && body.path_set;
            if !keeps && let Some((tile, subject)) = body.object_event_at.take() {
                map.turn_event_idle(tile, &subject);
            }
        }
    }

    // Where everyone stands, by name, for the walks towards someone: read when the first
    // such walk is planned and kept up to date as personas step. The map itself is kept
    // between steps (only its tiles are rewritten), sparing a string per persona per step.
    let mut tiles: Option<&mut HashMap<String, TileCoord>> = None;
    for entity in order.iter() {
        let needs_others = personas.get(*entity).is_ok_and(|(_, _, body, view, _)| {
            !body.path_set && view.address.as_ref().is_some_and(|a| a.persona().is_some())
        });
        if needs_others && tiles.is_none() {
            for (_, name, body, ..) in personas.iter() {
                match tiles_kept.get_mut(name.as_str()) {
                    Some(tile) => *tile = body.tile,
                    None => {
                        tiles_kept.insert(name.as_str().to_owned(), body.tile);
                    }
                }
            }
            tiles = Some(&mut *tiles_kept);
        }
        let Ok((_, name, mut body, view, held)) = personas.get_mut(*entity) else {
            continue;
        };
        let name = name.as_str();
        if !body.path_set
            && let Some(address) = &view.address
        {
            let mut rng = step_rng(name, clock.step());
            let empty = HashMap::new();
            let path = plan_path(
                &map,
                body.tile,
                address,
                &view.living_area,
                tiles.as_deref().unwrap_or(&empty),
                &mut rng,
            )
            .unwrap_or_default();
            body.planned_path = path.into_iter().skip(1).collect();
            body.path_set = true;
        }
        let previous = body.tile;
        if body.previous_tile != previous {
            body.previous_tile = previous;
        }
        // A held persona (on a stage) keeps its tile.
        if !held && let Some(next) = body.planned_path.pop_front() {
            body.tile = next;
            if let Some(tiles) = tiles.as_mut()
                && let Some(t) = tiles.get_mut(name)
            {
                *t = next;
            }
        }
        let moved = body.tile != previous;
        let shown = map
            .tile(body.tile)
            .is_some_and(|t| t.events.iter().any(|e| e.subject == name));
        if moved || view.is_changed() || !shown {
            map.remove_subject_events(previous, name);
            if moved {
                map.remove_subject_events(body.tile, name);
            }
            let event = view
                .event
                .clone()
                .unwrap_or_else(|| TileEvent::idle(name.to_owned()));
            map.add_event(body.tile, event);
        }

        if body.planned_path.is_empty()
            && body.object_event_at.is_none()
            && let Some(object_event) = &view.object_event
        {
            let tile = match &view.address {
                Some(address) => object_event_tile(&map, address, body.tile),
                None => body.tile,
            };
            map.remove_event(tile, &TileEvent::idle(object_event.subject.clone()));
            map.add_event(tile, object_event.clone());
            body.object_event_at = Some((tile, object_event.subject.clone()));
        }
    }
}
