//! Group talk seen by bystanders (SPEC §16): while an arena's group talks (two members or
//! more, and something said), the talk is a tile event where its first member stands — "the
//! talk at cafe is going on: Ada, Ben and Cy — “`<the latest line>`”" — perceived within the
//! vision radius like any other event by whoever is not part of it (a newcomer the circle has
//! no room for, someone who walks in). Its members
//! hear the lines themselves, so they do not perceive it ([`TakingPart`]).
//!
//! The event is rewritten when the circle changes or moves, and otherwise at most every
//! [`TALK_EVENT_MINUTES`] with the latest line, so a bystander's memory (and its poignancy
//! call) follows the talk without paying for every line. It goes when the talk ends. Saves keep
//! it with its stream (`groups.json`) and in `world/events.json`.

use std::collections::{BTreeMap, BTreeSet};

use bevy::prelude::*;
use chrono::NaiveDateTime;

use crate::clock::SimClock;
use crate::dialogue::prompts::truncate_chars;
use crate::persona::{Body, TakingPart};
use crate::world::{TileCoord, TileEvent, TownMap};

use super::stream::{GroupStreams, StreamKey};

/// A tile event to remove (before) and one to add (after).
type Edit = (
    Option<(TileCoord, TileEvent)>,
    Option<(TileCoord, TileEvent)>,
);

/// Game minutes between two rewrites of a talk's event while its circle stays the same.
pub const TALK_EVENT_MINUTES: i64 = 10;
/// Most characters of the latest line a talk's event carries.
const SHOWN_LINE_CHARS: usize = 160;

/// The event of the talk at `label` among `names` whose latest line is `latest`.
pub(crate) fn talk_event(label: &str, names: &[&str], latest: &str) -> TileEvent {
    let people = crate::cognition::vocabulary::names_list(names);
    let subject = format!("the talk at {label}");
    TileEvent {
        description: Some(format!(
            "{subject} is going on: {people} — \u{201c}{}\u{201d}",
            truncate_chars(latest.trim(), SHOWN_LINE_CHARS)
        )),
        subject,
        predicate: Some("is going on among".to_string()),
        object: Some(people),
    }
}

/// What a talk's shown event becomes: `None` to keep it as it is.
pub(crate) fn rewrite(
    shown: Option<&(TileCoord, TileEvent, NaiveDateTime)>,
    tile: TileCoord,
    event: &TileEvent,
    now: NaiveDateTime,
) -> Option<(TileCoord, TileEvent, NaiveDateTime)> {
    let fresh = Some((tile, event.clone(), now));
    let Some((at, was, since)) = shown else {
        return fresh;
    };
    let moved = *at != tile || was.object != event.object;
    let due = now - *since >= chrono::Duration::minutes(TALK_EVENT_MINUTES) && was != event;
    (moved || due).then_some((tile, event.clone(), now))
}

/// Shows, updates and removes the arena talks' tile events, and keeps each persona's
/// [`TakingPart`] to the talks it is a member of (after the heart flow's step).
pub(super) fn show_talks(world: &mut World) {
    let Some(now) = world.get_resource::<SimClock>().map(SimClock::now) else {
        return;
    };
    if !world.contains_resource::<TownMap>() || !world.contains_resource::<GroupStreams>() {
        return;
    }
    // Only the members of arena streams are looked up (a crowded town has many personas and
    // few talks).
    let members: BTreeSet<Entity> = world
        .resource::<GroupStreams>()
        .iter()
        .filter(|s| matches!(s.key, StreamKey::Arena(_)))
        .flat_map(|s| s.members.iter().copied())
        .collect();
    let names: BTreeMap<Entity, (String, TileCoord)> = members
        .into_iter()
        .filter_map(|e| {
            let name = world.get::<Name>(e)?.as_str().to_owned();
            Some((e, (name, world.get::<Body>(e)?.tile)))
        })
        .collect();
    let mut edits: Vec<Edit> = Vec::new();
    let mut taking_part: BTreeMap<Entity, Vec<String>> = BTreeMap::new();
    {
        let mut streams = world.resource_mut::<GroupStreams>();
        for stream in streams.iter_mut() {
            let StreamKey::Arena(_) = &stream.key else {
                continue;
            };
            let members: Vec<(&str, TileCoord)> = stream
                .members
                .iter()
                .filter_map(|e| names.get(e).map(|(n, t)| (n.as_str(), *t)))
                .collect();
            let latest = stream.lines.back().map(|l| l.text.clone());
            let wanted = match (members.first(), latest) {
                (Some((_, tile)), Some(latest)) if members.len() >= 2 => {
                    let who: Vec<&str> = members.iter().map(|(n, _)| *n).collect();
                    Some((*tile, talk_event(&stream.key.label(), &who, &latest)))
                }
                _ => None,
            };
            match wanted {
                Some((tile, event)) => {
                    if let Some(next) = rewrite(stream.shown.as_ref(), tile, &event, now) {
                        let before = stream.shown.take().map(|(t, e, _)| (t, e));
                        edits.push((before, Some((next.0, next.1.clone()))));
                        stream.shown = Some(next);
                    }
                    if let Some((_, shown, _)) = &stream.shown {
                        for member in &stream.members {
                            taking_part
                                .entry(*member)
                                .or_default()
                                .push(shown.subject.clone());
                        }
                    }
                }
                None => {
                    if let Some((t, e, _)) = stream.shown.take() {
                        edits.push((Some((t, e)), None));
                    }
                }
            }
        }
        // Events of talks whose stream closed.
        for (tile, event) in streams.take_closed_shown() {
            edits.push((Some((tile, event)), None));
        }
    }
    if !edits.is_empty()
        && let Some(mut map) = world.get_resource_mut::<TownMap>()
    {
        for (before, after) in edits {
            if let Some((tile, event)) = before {
                map.remove_event(tile, &event);
            }
            if let Some((tile, event)) = after {
                map.add_event(tile, event);
            }
        }
    }
    set_taking_part(world, taking_part);
}

/// Gives each persona the talks it is part of (removing what no longer holds).
pub(super) fn set_taking_part(world: &mut World, mut taking_part: BTreeMap<Entity, Vec<String>>) {
    let had: BTreeSet<Entity> = world
        .query_filtered::<Entity, With<TakingPart>>()
        .iter(world)
        .collect();
    for entity in had {
        let wanted = taking_part.remove(&entity).unwrap_or_default();
        if let Ok(mut e) = world.get_entity_mut(entity) {
            if wanted.is_empty() {
                e.remove::<TakingPart>();
            } else if e.get::<TakingPart>().is_none_or(|t| t.0 != wanted) {
                e.insert(TakingPart(wanted));
            }
        }
    }
    for (entity, wanted) in taking_part {
        if let Ok(mut e) = world.get_entity_mut(entity) {
            e.insert(TakingPart(wanted));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(minute: u32) -> NaiveDateTime {
        chrono::NaiveDate::from_ymd_opt(2023, 2, 13)
            .and_then(|d| d.and_hms_opt(9, minute, 0))
            .expect("time")
    }

    #[test]
    fn the_event_names_the_circle_and_the_latest_line() {
        let e = talk_event(
            "cafe",
            &["Ada", "Ben", "Cy"],
            &format!("  {}", "x".repeat(500)),
        );
        assert_eq!(e.subject, "the talk at cafe");
        assert_eq!(e.object.as_deref(), Some("Ada, Ben and Cy"));
        let d = e.description.expect("described");
        assert!(d.starts_with("the talk at cafe is going on: Ada, Ben and Cy — \u{201c}xxx"));
        assert!(d.chars().count() < 260, "{d}");
    }

    #[test]
    fn rewritten_when_the_circle_moves_or_changes_else_every_ten_minutes() {
        let tile = TileCoord::new(1, 1);
        let three = talk_event("cafe", &["Ada", "Ben", "Cy"], "hello");
        let later = talk_event("cafe", &["Ada", "Ben", "Cy"], "bye");
        let four = talk_event("cafe", &["Ada", "Ben", "Cy", "Dee"], "hello");
        let shown = (tile, three.clone(), t(0));
        assert!(rewrite(None, tile, &three, t(0)).is_some(), "first shown");
        assert_eq!(rewrite(Some(&shown), tile, &later, t(5)), None, "too soon");
        assert!(rewrite(Some(&shown), tile, &later, t(10)).is_some(), "due");
        assert_eq!(
            rewrite(Some(&shown), tile, &three, t(30)),
            None,
            "unchanged"
        );
        assert!(
            rewrite(Some(&shown), tile, &four, t(1)).is_some(),
            "the circle grew"
        );
        assert!(
            rewrite(Some(&shown), TileCoord::new(2, 1), &three, t(1)).is_some(),
            "its first member moved"
        );
    }
}
