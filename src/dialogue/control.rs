//! The control API (SPEC §13): what the player, game code, the dialogue's tools and later the
//! director (§10) do to a persona directly — add a schedule item, set `currently`, send it
//! walking to a place. (Whispers and interviews go through the dialogue:
//! [`DialogueRequest::whisper`](super::DialogueRequest::whisper) and
//! [`DialogueRequest::interview`](super::DialogueRequest::interview).)
//!
//! Each works on the world with the persona's mind at home (a mind checked out into a thought
//! gives [`ControlError::Busy`]; try again next frame). Schedule arithmetic is a pure function
//! (`insert_item`) so the day always sums to 1,440 minutes.

use bevy::prelude::*;
use chrono::{NaiveDateTime, Timelike};
use serde::{Deserialize, Serialize};

use crate::clock::SimClock;
use crate::cognition::schedule::{item_start, pad_day, schedule_index, total_minutes};
use crate::cognition::vocabulary::add_new_action;
use crate::persona::{ActionView, Body, EventTriple, Mind, ScheduleItem};
use crate::world::{ActionAddress, Address, TownMap, find_path};

use super::tools::{arena_string, resolve_place};

/// Why a control action did nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ControlError {
    /// The entity is not a persona.
    #[error("not a persona")]
    NotAPersona,
    /// The persona's mind is out in a thought; try again.
    #[error("the persona is busy thinking")]
    Busy,
    /// No town map is loaded.
    #[error("there is no town map")]
    NoMap,
    /// No place on the map goes by that name.
    #[error("no place called `{0}` in town")]
    UnknownPlace(String),
    /// The time is not today or already past.
    #[error("that time has passed or is not today")]
    BadTime,
}

/// An item a persona agreed to, with its place: when it is time to leave, the persona goes
/// there (`keep_appointments`), so it stands in that arena when the item starts. Kept in
/// saves with the speaker profiles.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Appointment {
    /// What (the schedule item's task).
    pub task: String,
    /// The arena (`world:sector:arena`).
    pub arena: String,
    /// When it starts.
    pub start: NaiveDateTime,
    /// How long it lasts, in minutes.
    pub minutes: u32,
    /// When to leave to be there on time.
    pub depart: NaiveDateTime,
}

/// A persona's appointments, soonest first.
#[derive(Component, Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Appointments(pub Vec<Appointment>);

/// Today's schedule with `task` inserted at `minute` for `minutes`: items overlapping the new
/// one are cut (an item cut in two keeps both ends). The result sums to a whole day whatever
/// the input (a schedule that does not is padded or trimmed first).
pub(crate) fn insert_item(
    items: &[ScheduleItem],
    minute: u32,
    task: &str,
    minutes: u32,
) -> Vec<ScheduleItem> {
    let mut day: Vec<ScheduleItem> = items.to_vec();
    pad_day(&mut day);
    let start = minute.min(crate::clock::MINUTES_PER_DAY - 1);
    let end = start
        .saturating_add(minutes.max(1))
        .min(crate::clock::MINUTES_PER_DAY);
    let mut out = Vec::with_capacity(day.len() + 2);
    let mut at = 0u32;
    let mut placed = false;
    for item in day {
        let (from, to) = (at, at + item.minutes);
        at = to;
        if to <= start || from >= end {
            if from >= end && !placed {
                out.push(ScheduleItem::new(task, end - start));
                placed = true;
            }
            out.push(item);
            continue;
        }
        if from < start {
            out.push(ScheduleItem::new(item.task.clone(), start - from));
        }
        if !placed {
            out.push(ScheduleItem::new(task, end - start));
            placed = true;
        }
        if to > end {
            out.push(ScheduleItem::new(item.task.clone(), to - end));
        }
    }
    if !placed {
        out.push(ScheduleItem::new(task, end - start));
    }
    debug_assert_eq!(total_minutes(&out), crate::clock::MINUTES_PER_DAY);
    out
}

/// Whether `schedule` has an item `task` starting at `minute`.
pub(crate) fn has_item_at(schedule: &[ScheduleItem], task: &str, minute: u32) -> bool {
    schedule_index(schedule, minute).is_some_and(|i| {
        schedule[i].task == task && item_start(schedule, i) == minute
            || schedule[i].task.contains(task)
    })
}

/// Minutes of walking from `from` to the arena (one tile per step), rounded up, or `None`
/// when unreachable.
pub(crate) fn travel_minutes(
    map: &TownMap,
    from: crate::world::TileCoord,
    arena: &str,
    sec_per_step: u32,
) -> Option<u32> {
    let tiles = map.address_tiles(arena)?;
    if tiles.contains(&from) {
        return Some(0);
    }
    // The nearest tile as the crow flies, then the real path to it.
    let target = tiles
        .iter()
        .min_by_key(|t| (t.x - from.x).abs() + (t.y - from.y).abs())?;
    let steps = find_path(map, from, *target)?.len() as u64;
    Some(u32::try_from((steps * u64::from(sec_per_step)).div_ceil(60)).unwrap_or(u32::MAX))
}

/// Sets the persona's `currently` (who it is at the moment, SPEC §2), bounded to 500 characters.
pub fn set_currently(world: &mut World, persona: Entity, text: &str) -> Result<(), ControlError> {
    let mut mind = world
        .get_mut::<Mind>(persona)
        .ok_or(ControlError::NotAPersona)?;
    let state = mind.get_mut().ok_or(ControlError::Busy)?;
    state.scratch.currently = super::prompts::neutralise(text, 500);
    Ok(())
}

/// Starts walking to `place` now: the action becomes "going to …" (or `description`) at that
/// arena for 30 minutes, and the path is planned at the next step. Returns the arena.
pub fn walk_to(
    world: &mut World,
    persona: Entity,
    place: &str,
    description: Option<&str>,
) -> Result<String, ControlError> {
    let (address, now) = place_and_now(world, persona, place)?;
    let description = description
        .map(str::to_string)
        .unwrap_or_else(|| format!("going to {}", address.last_name()));
    start_going(world, persona, &address, now, 30, &description)?;
    Ok(arena_string(&address))
}

/// The arena `place` names for `persona` (see [`resolve_place`]) and the sim time now.
fn place_and_now(
    world: &World,
    persona: Entity,
    place: &str,
) -> Result<(Address, NaiveDateTime), ControlError> {
    let map = world.get_resource::<TownMap>().ok_or(ControlError::NoMap)?;
    let address = resolve_place(map, world.get::<Mind>(persona), place)
        .ok_or_else(|| ControlError::UnknownPlace(place.to_string()))?;
    let now = world
        .get_resource::<SimClock>()
        .map(SimClock::now)
        .unwrap_or_default();
    Ok((address, now))
}

/// Sets the action "description at arena" from `now` for `minutes` and resets the path.
fn start_going(
    world: &mut World,
    persona: Entity,
    arena: &Address,
    now: NaiveDateTime,
    minutes: u32,
    description: &str,
) -> Result<(), ControlError> {
    let mut entity = world
        .get_entity_mut(persona)
        .map_err(|_| ControlError::NotAPersona)?;
    let mut mind = entity.get_mut::<Mind>().ok_or(ControlError::NotAPersona)?;
    let state = mind.get_mut().ok_or(ControlError::Busy)?;
    let name = state.scratch.name.clone();
    add_new_action(
        state,
        now,
        ActionAddress::RandomInArena(arena.clone()),
        minutes.max(1),
        description.to_string(),
        "🚶".to_string(),
        EventTriple::new(name, "is", description),
        None,
    );
    let view = ActionView::from_scratch(&state.scratch);
    if let Some(mut body) = entity.get_mut::<Body>() {
        body.path_set = false;
        body.planned_path.clear();
    }
    if let Some(mut current) = entity.get_mut::<ActionView>() {
        *current = view;
    }
    Ok(())
}

/// Adds `task` at `place` to today's schedule at `hour:minute` for `minutes` with the plain
/// insertion (`insert_item`) and books the appointment. The dialogue's `add_to_schedule` tool
/// fits the item in with the model first (SPEC §3.5) and books it through
/// `book_appointment`. Returns the arena.
pub fn add_schedule_item(
    world: &mut World,
    persona: Entity,
    task: &str,
    place: &str,
    at: NaiveDateTime,
    minutes: u32,
) -> Result<String, ControlError> {
    let (address, now) = place_and_now(world, persona, place)?;
    if at.date() != now.date() || at < now {
        return Err(ControlError::BadTime);
    }
    let minute = at.hour() * 60 + at.minute();
    {
        let mut mind = world
            .get_mut::<Mind>(persona)
            .ok_or(ControlError::NotAPersona)?;
        let state = mind.get_mut().ok_or(ControlError::Busy)?;
        let task = super::prompts::neutralise(task, 80);
        state.scratch.f_daily_schedule =
            insert_item(&state.scratch.f_daily_schedule, minute, &task, minutes);
    }
    let arena = arena_string(&address);
    book_appointment(world, persona, task, &arena, at, minutes)?;
    Ok(arena)
}

/// Books an appointment: the persona leaves in time to stand in `arena` at `start`.
pub(crate) fn book_appointment(
    world: &mut World,
    persona: Entity,
    task: &str,
    arena: &str,
    start: NaiveDateTime,
    minutes: u32,
) -> Result<(), ControlError> {
    let (tile, sec_per_step) = {
        let body = world
            .get::<Body>(persona)
            .ok_or(ControlError::NotAPersona)?;
        let sec = world
            .get_resource::<SimClock>()
            .map_or(10, SimClock::sec_per_step);
        (body.tile, sec)
    };
    let map = world.get_resource::<TownMap>().ok_or(ControlError::NoMap)?;
    // Unknown distance: leave half an hour early. A little slack for the first step.
    let lead = travel_minutes(map, tile, arena, sec_per_step).unwrap_or(30) + 2;
    let appointment = Appointment {
        task: super::prompts::neutralise(task, 80),
        arena: arena.to_string(),
        start,
        minutes,
        depart: start - chrono::Duration::minutes(i64::from(lead)),
    };
    let mut entity = world
        .get_entity_mut(persona)
        .map_err(|_| ControlError::NotAPersona)?;
    let mut list = entity
        .entry::<Appointments>()
        .or_default()
        .into_mut()
        .0
        .clone();
    list.push(appointment);
    list.sort_by_key(|a| a.start);
    entity.insert(Appointments(list));
    Ok(())
}

/// Sends personas to their appointments when it is time to leave: the action becomes the
/// appointment's task at its arena until it ends. Runs at the start of a step's thinking, so
/// minds are home (a busy mind is tried again next step). Past appointments are dropped.
pub(crate) fn keep_appointments(world: &mut World) {
    let Some(now) = world.get_resource::<SimClock>().map(SimClock::now) else {
        return;
    };
    let mut due = Vec::new();
    let mut query = world.query::<(Entity, &mut Appointments)>();
    for (entity, mut appointments) in query.iter_mut(world) {
        let end = |a: &Appointment| a.start + chrono::Duration::minutes(i64::from(a.minutes));
        if appointments.0.iter().any(|a| end(a) <= now) {
            appointments.0.retain(|a| end(a) > now);
        }
        if let Some(first) = appointments.0.first()
            && first.depart <= now
        {
            due.push((entity, first.clone()));
        }
    }
    for (entity, appointment) in due {
        let Ok(address) = Address::parse(&appointment.arena) else {
            if let Some(mut list) = world.get_mut::<Appointments>(entity) {
                list.0.remove(0);
            }
            continue;
        };
        let end = appointment.start + chrono::Duration::minutes(i64::from(appointment.minutes));
        let minutes = u32::try_from((end - now).num_minutes().max(1)).unwrap_or(1);
        match start_going(world, entity, &address, now, minutes, &appointment.task) {
            Ok(()) => {
                if let Some(mut list) = world.get_mut::<Appointments>(entity) {
                    list.0.remove(0);
                }
            }
            Err(ControlError::Busy) => {}
            Err(error) => {
                warn!(%error, "appointment dropped");
                if let Some(mut list) = world.get_mut::<Appointments>(entity) {
                    list.0.remove(0);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn day() -> Vec<ScheduleItem> {
        vec![
            ScheduleItem::new("sleeping", 420),
            ScheduleItem::new("work", 540),
            ScheduleItem::new("evening", 480),
        ]
    }

    #[test]
    fn insertion_keeps_a_whole_day() {
        let out = insert_item(&day(), 16 * 60, "buy flowers", 30);
        assert_eq!(total_minutes(&out), 1440);
        assert!(has_item_at(&out, "buy flowers", 960));
        assert_eq!(
            out.iter().map(|i| i.minutes).collect::<Vec<_>>(),
            [420, 540, 30, 450]
        );
        // Inside an item: it is cut in two.
        let out = insert_item(&day(), 600, "x", 60);
        assert_eq!(
            out.iter().map(|i| i.minutes).collect::<Vec<_>>(),
            [420, 180, 60, 300, 480]
        );
        // Broken input and the day's end.
        let out = insert_item(&[ScheduleItem::new("a", 10)], 1430, "late", 60);
        assert_eq!(total_minutes(&out), 1440);
        assert_eq!(out.last().map(|i| i.task.as_str()), Some("late"));
        assert_eq!(total_minutes(&insert_item(&[], 0, "a", 5000)), 1440);
    }
}
