//! The director's skills (SPEC §10): tools in the same [`ToolRegistry`] as the personas' own,
//! so one schema check and one allow-list guard both. A persona's allow-list does not name
//! them (a persona without a list may use only the built-in tools), and the director's own
//! allow-list ([`DirectorSettings::allow`](super::DirectorSettings::allow)) names only them, so
//! neither side can use the other's tools unless a game says so.
//!
//! | skill | does | finishes |
//! | --- | --- | --- |
//! | `whisper` | an inner voice to a persona (stored as a thought) | when the thought is stored |
//! | `add_schedule_item` | a task at a place and time (today: into the schedule; later: an appointment) | at once |
//! | `set_currently` | the persona's `currently` | at once |
//! | `move_persona` | the persona walks to a place now | at once |
//! | `place_tile_event` | something happening at a place, for everyone there to perceive | at once |
//! | `interview` | a stateless question; the answer is the result | when answered |
//! | `who_knows` | who knows a topic, from the personas' own memories ([`knows`](super::knows)) | at once |
//! | `wait_until` | nothing until a game time | at that time |
//!
//! Group talk and the stage add theirs, on the allow-list by default: `open_channel` and
//! `post_to_channel` ([`group::tools`](crate::group::tools), at once), `read_game_resource`
//! (at once) and `open_stage` ([`stage::tools`](crate::stage::tools), when the scene closes:
//! the result is who did what, from the job's [`Evidence`](super::Evidence)).
//!
//! A game adds its own director skills with
//! [`AppDialogueExt::add_dialogue_tool`](crate::dialogue::AppDialogueExt::add_dialogue_tool)
//! and puts their names on the director's allow-list. Handlers get a [`ToolCall`] whose
//! `persona` is [`Entity::PLACEHOLDER`] and whose speaker is [`DIRECTOR`]; by convention an
//! argument `persona` names a persona, `place` a place and `time` a game time (the plan
//! checker resolves them before anything runs). A handler that starts something the director
//! must wait for returns `{"await": {"reply_from": NAME}}` (a dialogue reply of that persona),
//! `{"await": {"until": "YYYY-MM-DD HH:MM:SS"}}` or `{"await": {"scene_closed": STAGE}}` (a
//! stage scene's close); one that returns the error `BUSY` is tried
//! again on the next frame.

use bevy::prelude::*;
use chrono::NaiveDateTime;
use serde_json::{Value, json};

use crate::clock::SimClock;
use crate::dialogue::control::{self, ControlError};
use crate::dialogue::tools::resolve_place;
use crate::dialogue::{
    DialogueRequest, ToolCall, ToolError, ToolHandler, ToolRegistry, ToolResult, ToolSpec,
};
use crate::persona::{Mind, Persona};
use crate::world::{AddressLevel, TileEvent, TownMap};

use super::knows::who_knows;
use super::plan::{parse_game_time, resolve_persona, text_arg};

/// The speaker of the director's calls.
pub const DIRECTOR: &str = "director";
/// The error a handler returns when it must be tried again later (a mind is out thinking).
pub(crate) const BUSY: &str = "busy: try again";

/// `whisper`.
pub(crate) const WHISPER: &str = "whisper";
/// `add_schedule_item`.
pub(crate) const ADD_SCHEDULE_ITEM: &str = "add_schedule_item";
/// `set_currently`.
pub(crate) const SET_CURRENTLY: &str = "set_currently";
/// `move_persona`.
pub(crate) const MOVE_PERSONA: &str = "move_persona";
/// `place_tile_event`.
pub(crate) const PLACE_TILE_EVENT: &str = "place_tile_event";
/// `interview`.
pub(crate) const INTERVIEW: &str = "interview";
/// `who_knows`.
pub(crate) const WHO_KNOWS: &str = "who_knows";
/// `wait_until`.
pub(crate) const WAIT_UNTIL: &str = "wait_until";

/// Every built-in director skill.
pub const DIRECTOR_SKILLS: [&str; 8] = [
    WHISPER,
    ADD_SCHEDULE_ITEM,
    SET_CURRENTLY,
    MOVE_PERSONA,
    PLACE_TILE_EVENT,
    INTERVIEW,
    WHO_KNOWS,
    WAIT_UNTIL,
];

fn string(max: usize) -> Value {
    json!({"type": "string", "minLength": 1, "maxLength": max})
}

fn object(properties: Value, required: &[&str]) -> Value {
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false
    })
}

/// The built-in skills' specs.
pub(crate) fn skill_specs() -> Vec<ToolSpec> {
    vec![
        ToolSpec::new(
            WHISPER,
            "Whisper to a resident as their inner voice: they come to believe it (stored as a thought).",
            object(
                json!({"persona": string(80), "text": string(400)}),
                &["persona", "text"],
            ),
            json!({"persona": "Full Name", "text": "you want to host a dinner for your neighbours"}),
        ),
        ToolSpec::new(
            ADD_SCHEDULE_ITEM,
            "Add a task at a place and time to a resident's schedule; they go there when it starts.",
            object(
                json!({
                    "persona": string(80),
                    "task": string(80),
                    "place": string(120),
                    "time": string(40),
                    "minutes": {"type": "integer", "minimum": 5, "maximum": 600}
                }),
                &["persona", "task", "place", "time", "minutes"],
            ),
            json!({"persona": "Full Name", "task": "meet friends", "place": "park", "time": "2023-02-14 17:00", "minutes": 60}),
        ),
        ToolSpec::new(
            SET_CURRENTLY,
            "Set what a resident is currently about (their current situation, one or two sentences).",
            object(
                json!({"persona": string(80), "text": string(500)}),
                &["persona", "text"],
            ),
            json!({"persona": "Full Name", "text": "Full Name is preparing for the spring fair."}),
        ),
        ToolSpec::new(
            MOVE_PERSONA,
            "Send a resident walking to a place now.",
            object(
                json!({"persona": string(80), "place": string(120)}),
                &["persona", "place"],
            ),
            json!({"persona": "Full Name", "place": "park"}),
        ),
        ToolSpec::new(
            PLACE_TILE_EVENT,
            "Make something happen at a place, for everyone there to see (e.g. a street musician playing).",
            object(
                json!({"place": string(120), "subject": string(60), "description": string(200)}),
                &["place", "description"],
            ),
            json!({"place": "park", "subject": "street musician", "description": "a street musician is playing the violin"}),
        ),
        ToolSpec::new(
            INTERVIEW,
            "Ask a resident a question; they answer from memory and remember nothing of it.",
            object(
                json!({"persona": string(80), "question": string(400)}),
                &["persona", "question"],
            ),
            json!({"persona": "Full Name", "question": "What are you doing tomorrow evening?"}),
        )
        .read_only(),
        ToolSpec::new(
            WHO_KNOWS,
            "Find which residents know about something, from their own memories.",
            object(json!({"topic": string(120)}), &["topic"]),
            json!({"topic": "the dinner"}),
        )
        .read_only(),
        ToolSpec::new(
            WAIT_UNTIL,
            "Wait until a game time before the next step.",
            object(json!({"time": string(40)}), &["time"]),
            json!({"time": "2023-02-14 17:00"}),
        )
        .read_only(),
    ]
}

/// Registers the built-in skills (part of [`DirectorPlugin`](super::DirectorPlugin)); a game's
/// tool of the same name, registered earlier, wins.
pub(super) fn register_skills(app: &mut App) {
    let mut registry = app
        .world_mut()
        .remove_resource::<ToolRegistry>()
        .unwrap_or_default();
    for spec in skill_specs() {
        if registry.get(&spec.name).is_some() {
            continue;
        }
        let world = app.world_mut();
        let id = match spec.name.as_str() {
            WHISPER => world.register_system(whisper),
            ADD_SCHEDULE_ITEM => world.register_system(add_schedule_item),
            SET_CURRENTLY => world.register_system(set_currently),
            MOVE_PERSONA => world.register_system(move_persona),
            PLACE_TILE_EVENT => world.register_system(place_tile_event),
            INTERVIEW => world.register_system(interview),
            WHO_KNOWS => world.register_system(who_knows_skill),
            _ => world.register_system(wait_until),
        };
        if let Err(error) = registry.register(spec, ToolHandler::System(id)) {
            let error: ToolError = error;
            error!(%error, "director skill refused");
        }
    }
    app.insert_resource(registry);
}

/// The personas' full names, in spawn order.
pub(crate) fn persona_names(world: &mut World) -> Vec<(Entity, String)> {
    let mut rows: Vec<(Entity, String)> = world
        .query_filtered::<(Entity, &Name), With<Persona>>()
        .iter(world)
        .map(|(e, n)| (e, n.as_str().to_string()))
        .collect();
    rows.sort_by_key(|(e, _)| e.index_u32());
    rows
}

/// The persona the call's `persona` argument names.
fn persona_arg(world: &mut World, call: &ToolCall) -> Result<(Entity, String), String> {
    let name = text_arg(&call.args, "persona");
    let rows = persona_names(world);
    let names: Vec<String> = rows.iter().map(|(_, n)| n.clone()).collect();
    let full = resolve_persona(&names, &name)
        .ok_or_else(|| format!("nobody called `{name}` lives in town"))?
        .to_string();
    let entity = rows
        .iter()
        .find(|(_, n)| *n == full)
        .map(|(e, _)| *e)
        .ok_or_else(|| format!("nobody called `{name}` lives in town"))?;
    Ok((entity, full))
}

fn control_error(error: ControlError) -> String {
    match error {
        ControlError::Busy => BUSY.to_string(),
        other => other.to_string(),
    }
}

fn now(world: &World) -> NaiveDateTime {
    world
        .get_resource::<SimClock>()
        .map(SimClock::now)
        .unwrap_or_default()
}

/// `whisper`: sends the inner voice; finishes when the thought is stored.
pub fn whisper(call: In<ToolCall>, world: &mut World) -> ToolResult {
    let (entity, name) = persona_arg(world, &call)?;
    let text = text_arg(&call.args, "text");
    world.write_message(DialogueRequest::whisper(entity, text));
    Ok(json!({"persona": name, "await": {"reply_from": name}}))
}

/// `interview`: asks the question; the answer is the result.
pub fn interview(call: In<ToolCall>, world: &mut World) -> ToolResult {
    let (entity, name) = persona_arg(world, &call)?;
    let question = text_arg(&call.args, "question");
    world.write_message(DialogueRequest::interview(entity, question));
    Ok(json!({"persona": name, "await": {"reply_from": name}}))
}

/// `add_schedule_item`: today into the schedule (plain insertion, the day still sums to
/// 1,440 minutes) and an appointment; a later day as an appointment the persona keeps then.
pub fn add_schedule_item(call: In<ToolCall>, world: &mut World) -> ToolResult {
    let (entity, name) = persona_arg(world, &call)?;
    let now = now(world);
    let at = parse_game_time(&text_arg(&call.args, "time"), now)?;
    if at < now {
        return Err(format!(
            "{} has already passed",
            at.format("%Y-%m-%d %H:%M")
        ));
    }
    let task = text_arg(&call.args, "task");
    let place = text_arg(&call.args, "place");
    let minutes = call
        .args
        .get("minutes")
        .and_then(Value::as_u64)
        .map_or(60, |m| m.clamp(5, 600) as u32);
    let arena = if at.date() == now.date() {
        control::add_schedule_item(world, entity, &task, &place, at, minutes)
            .map_err(control_error)?
    } else {
        let arena = {
            let map = world.get_resource::<TownMap>().ok_or("there is no town")?;
            let address = resolve_place(map, world.get::<Mind>(entity), &place)
                .ok_or_else(|| format!("no place called `{place}` in town"))?;
            address.truncated(AddressLevel::Arena).to_string()
        };
        control::book_appointment(world, entity, &task, &arena, at, minutes)
            .map_err(control_error)?;
        arena
    };
    Ok(json!({
        "persona": name,
        "task": task,
        "arena": arena,
        "start": at.format("%Y-%m-%d %H:%M").to_string(),
        "minutes": minutes
    }))
}

/// `set_currently`.
pub fn set_currently(call: In<ToolCall>, world: &mut World) -> ToolResult {
    let (entity, name) = persona_arg(world, &call)?;
    let text = text_arg(&call.args, "text");
    control::set_currently(world, entity, &text).map_err(control_error)?;
    Ok(json!({"persona": name, "currently": text}))
}

/// `move_persona`.
pub fn move_persona(call: In<ToolCall>, world: &mut World) -> ToolResult {
    let (entity, name) = persona_arg(world, &call)?;
    let place = text_arg(&call.args, "place");
    let arena = control::walk_to(world, entity, &place, None).map_err(control_error)?;
    Ok(json!({"persona": name, "walking_to": arena}))
}

/// `place_tile_event`: the event on the walkable tile of the place nearest its middle.
pub fn place_tile_event(call: In<ToolCall>, world: &mut World) -> ToolResult {
    let place = text_arg(&call.args, "place");
    let description = text_arg(&call.args, "description");
    let subject = match text_arg(&call.args, "subject") {
        s if s.trim().is_empty() => "something".to_string(),
        s => s,
    };
    let mut map = world
        .get_resource_mut::<TownMap>()
        .ok_or("there is no town")?;
    let address = resolve_place(&map, None, &place)
        .ok_or_else(|| format!("no place called `{place}` in town"))?;
    let arena = address.truncated(AddressLevel::Arena);
    let tiles: Vec<_> = map
        .place_tiles(&arena)
        .map(|t| t.iter().copied().collect())
        .unwrap_or_default();
    let walkable: Vec<_> = tiles
        .iter()
        .copied()
        .filter(|&t| map.is_walkable(t))
        .collect();
    let pool = if walkable.is_empty() {
        &tiles
    } else {
        &walkable
    };
    let n = pool.len().max(1) as i64;
    let (sx, sy) = pool.iter().fold((0i64, 0i64), |(x, y), t| {
        (x + i64::from(t.x), y + i64::from(t.y))
    });
    let (cx, cy) = (sx / n, sy / n);
    let tile = pool
        .iter()
        .min_by_key(|t| (i64::from(t.x) - cx).abs() + (i64::from(t.y) - cy).abs())
        .copied()
        .ok_or_else(|| format!("`{place}` has no tile"))?;
    let event = TileEvent {
        subject: format!("{arena}:{subject}"),
        predicate: Some("is".into()),
        object: Some(description.clone()),
        description: Some(description.clone()),
    };
    map.add_event(tile, event);
    Ok(json!({"arena": arena.to_string(), "tile": [tile.x, tile.y], "event": description}))
}

/// `who_knows`: every persona whose memories mention the topic (see [`knows`](super::knows)).
/// A mind out thinking is waited for ([`BUSY`]), so the count never misses anyone.
pub(crate) fn who_knows_skill(call: In<ToolCall>, world: &mut World) -> ToolResult {
    let topic = text_arg(&call.args, "topic");
    let now = now(world);
    let rows = persona_names(world);
    let mut minds = Vec::with_capacity(rows.len());
    for (entity, name) in &rows {
        let mind = world.get::<Mind>(*entity).and_then(Mind::get).ok_or(BUSY)?;
        minds.push((name.as_str(), &mind.associative));
    }
    let knowers = who_knows(minds, &topic, now);
    Ok(json!({
        "topic": topic,
        "count": knowers.len(),
        "of": rows.len(),
        "knows": knowers.iter().map(|k| k.name.clone()).collect::<Vec<_>>(),
        "evidence": knowers,
    }))
}

/// `wait_until`.
pub fn wait_until(call: In<ToolCall>, world: &mut World) -> ToolResult {
    let at = parse_game_time(&text_arg(&call.args, "time"), now(world))?;
    Ok(json!({"await": {"until": at.format("%Y-%m-%d %H:%M:%S").to_string()}}))
}
