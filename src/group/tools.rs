//! Group talk as director skills (SPEC §8, §10): `open_channel` opens a channel (heard by the
//! residents it names, or by everyone) and `post_to_channel` says a line in an open one under a
//! speaker's name — a notice board, a town crier, a radio. Both go through the dialogue's
//! [`ToolRegistry`](crate::dialogue::ToolRegistry), so the schema check and the allow-list guard
//! them like any tool, and every argument is checked again here as a [`GroupCommand`] would be.
//! The director may use both by default ([`GROUP_DIRECTOR_SKILLS`]).

use bevy::prelude::*;
use serde_json::{Value, json};

use crate::clock::SimClock;
use crate::dialogue::{AppDialogueExt, ToolCall, ToolResult, ToolSpec};
use crate::persona::Persona;

use super::GroupStreamOpened;
use super::stream::{GroupCommand, GroupStreams, StreamKey, check_post, check_speaker};

/// `open_channel`.
pub const OPEN_CHANNEL: &str = "open_channel";
/// `post_to_channel`.
pub const POST_TO_CHANNEL: &str = "post_to_channel";
/// The group's director skills.
pub const GROUP_DIRECTOR_SKILLS: [&str; 2] = [OPEN_CHANNEL, POST_TO_CHANNEL];
/// The speaker of a post whose arguments name none.
pub const DEFAULT_POSTER: &str = "Notice board";

fn text(max: usize) -> Value {
    json!({"type": "string", "minLength": 1, "maxLength": max})
}

/// The two skills' descriptions.
pub fn group_tool_specs() -> Vec<ToolSpec> {
    vec![
        ToolSpec::new(
            OPEN_CHANNEL,
            "Open a channel (a notice board, a radio, a group chat) that the named residents hear, or everyone when none are named; residents follow it with their attention like any conversation.",
            json!({
                "type": "object",
                "properties": {
                    "channel": text(40),
                    "members": {"type": "array", "maxItems": 64, "items": text(80)}
                },
                "required": ["channel"],
                "additionalProperties": false
            }),
            json!({"channel": "town news", "members": ["Full Name", "Other Name"]}),
        ),
        ToolSpec::new(
            POST_TO_CHANNEL,
            "Say something in an open channel under a speaker's name; its listeners hear it and may answer.",
            json!({
                "type": "object",
                "properties": {
                    "channel": text(40),
                    "text": text(400),
                    "speaker": text(40)
                },
                "required": ["channel", "text"],
                "additionalProperties": false
            }),
            json!({"channel": "town news", "text": "The fair moved to Saturday.", "speaker": "Town crier"}),
        ),
    ]
}

/// Registers the group's skills (part of [`GroupPlugin`](super::GroupPlugin)); a game's tool of
/// the same name, registered earlier, wins.
pub(super) fn register_group_tools(app: &mut App) {
    for spec in group_tool_specs() {
        let taken = app
            .world()
            .get_resource::<crate::dialogue::ToolRegistry>()
            .is_some_and(|r| r.get(&spec.name).is_some());
        if taken {
            continue;
        }
        let result = if spec.name == OPEN_CHANNEL {
            app.add_dialogue_tool(spec, open_channel).map(|_| ())
        } else {
            app.add_dialogue_tool(spec, post_to_channel).map(|_| ())
        };
        if let Err(error) = result {
            error!(%error, "a group tool was refused");
        }
    }
}

/// The persona a name means: the full name, or a first name only one resident has
/// (case-insensitive).
fn resident(town: &[(String, Entity)], name: &str) -> Option<Entity> {
    let wanted = name.trim().to_lowercase();
    if let Some((_, e)) = town.iter().find(|(n, _)| n.to_lowercase() == wanted) {
        return Some(*e);
    }
    let mut firsts = town.iter().filter(|(n, _)| {
        n.split_whitespace()
            .next()
            .is_some_and(|f| f.to_lowercase() == wanted)
    });
    match (firsts.next(), firsts.next()) {
        (Some((_, e)), None) => Some(*e),
        _ => None,
    }
}

/// `open_channel`: opened at once (so a post in the next step finds it), heard by the named
/// residents or by everyone. Opening a channel that is open already changes nothing.
pub fn open_channel(call: In<ToolCall>, world: &mut World) -> ToolResult {
    let name = call
        .args
        .get("channel")
        .and_then(Value::as_str)
        .unwrap_or("");
    let names: Vec<&str> = call
        .args
        .get("members")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let town: Vec<(String, Entity)> = world
        .query_filtered::<(Entity, &Name), With<Persona>>()
        .iter(world)
        .map(|(e, n)| (n.as_str().to_owned(), e))
        .collect();
    let mut members = Vec::with_capacity(names.len());
    for name in names {
        let persona =
            resident(&town, name).ok_or_else(|| format!("no resident is called `{name}`"))?;
        members.push(persona);
    }
    let now = world
        .get_resource::<SimClock>()
        .map(SimClock::now)
        .unwrap_or_default();
    let mut streams = world
        .get_resource_mut::<GroupStreams>()
        .ok_or_else(|| "group talk is not set up in this game".to_string())?;
    let opened = streams.open_channel(name, &members, now)?;
    let channel = match &opened {
        Some(StreamKey::Channel(name)) => name.clone(),
        _ => name.trim().to_string(),
    };
    let fresh = opened.is_some();
    if let Some(stream) = opened {
        world.write_message(GroupStreamOpened { stream });
    }
    Ok(json!({
        "channel": channel,
        "opened": fresh,
        "heard_by": if members.is_empty() { json!("everyone") } else { json!(members.len()) },
    }))
}

/// `post_to_channel`: checked as a [`GroupCommand::Post`] is (speaker, text, an open
/// channel), then sent as one, so the line is said, heard and remembered like any post.
pub fn post_to_channel(call: In<ToolCall>, world: &mut World) -> ToolResult {
    let args = &call.args;
    let name = args.get("channel").and_then(Value::as_str).unwrap_or("");
    let speaker = check_speaker(
        args.get("speaker")
            .and_then(Value::as_str)
            .unwrap_or(DEFAULT_POSTER),
    )?;
    let text = check_post(args.get("text").and_then(Value::as_str).unwrap_or(""))?;
    let key = StreamKey::Channel(name.trim().to_string());
    let open = world
        .get_resource::<GroupStreams>()
        .is_some_and(|s| s.get(&key).is_some());
    if !open {
        return Err(format!("no channel `{}` is open", name.trim()));
    }
    world.write_message(GroupCommand::Post {
        stream: key,
        speaker: speaker.clone(),
        text: text.clone(),
    });
    Ok(json!({"channel": name.trim(), "speaker": speaker, "posted": text}))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dialogue::ToolRegistry;

    #[test]
    fn the_schemas_refuse_hostile_arguments() {
        let mut app = App::new();
        register_group_tools(&mut app);
        let registry = app.world().resource::<ToolRegistry>();
        let open = registry.get(OPEN_CHANNEL).expect("registered");
        let post = registry.get(POST_TO_CHANNEL).expect("registered");
        assert!(open.check_args(&json!({"channel": "news"})).is_ok());
        assert!(
            post.check_args(&json!({"channel": "news", "text": "hi"}))
                .is_ok()
        );
        let many: Vec<Value> = (0..65).map(|i| json!(format!("P{i}"))).collect();
        for bad in [
            json!({}),
            json!({"channel": ""}),
            json!({"channel": "x".repeat(41)}),
            json!({"channel": "news", "members": many}),
            json!({"channel": "news", "members": [7]}),
            json!({"channel": "news", "then": "rm -rf"}),
        ] {
            assert!(open.check_args(&bad).is_err(), "{bad}");
        }
        for bad in [
            json!({"channel": "news"}),
            json!({"channel": "news", "text": "x".repeat(401)}),
            json!({"channel": "news", "text": "hi", "speaker": "x".repeat(41)}),
            json!({"channel": "news", "text": "hi", "persona": "Ada"}),
        ] {
            assert!(post.check_args(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_resident_is_a_full_name_or_a_first_name_only_one_has() {
        let town = vec![
            (
                "Ada Lovelace".to_string(),
                Entity::from_raw_u32(1).expect("id"),
            ),
            (
                "Ada Byron".to_string(),
                Entity::from_raw_u32(2).expect("id"),
            ),
            (
                "Tom Moreno".to_string(),
                Entity::from_raw_u32(3).expect("id"),
            ),
        ];
        assert_eq!(resident(&town, "ada lovelace"), Some(town[0].1));
        assert_eq!(resident(&town, "Tom"), Some(town[2].1));
        assert_eq!(resident(&town, "Ada"), None, "two Adas");
        assert_eq!(resident(&town, "Mallory"), None);
    }
}
