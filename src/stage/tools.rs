//! The stage as tools (SPEC §9): `read_game_resource` reads `game://actor/{name}` or
//! `game://stage/{name}` (read-only; a hidden actor is found by nobody), and `open_stage`, a
//! director skill, opens a scene written in its arguments and plays it. Both go through the
//! dialogue's [`ToolRegistry`](crate::dialogue::ToolRegistry): the schema check and the
//! allow-list guard them like any tool. The director may use both by default
//! ([`STAGE_DIRECTOR_SKILLS`]); a persona may read resources once its
//! [`ToolAllowList`](crate::dialogue::ToolAllowList) names `read_game_resource`.

use bevy::prelude::*;
use serde_json::{Value, json};

use crate::dialogue::{AppDialogueExt, ToolCall, ToolResult, ToolSpec};
use crate::persona::Persona;

use super::file::{SceneFile, scene_from_file};
use super::{StageCommand, Stages};

/// `read_game_resource`.
pub const READ_GAME_RESOURCE: &str = "read_game_resource";
/// `open_stage`.
pub const OPEN_STAGE: &str = "open_stage";
/// The stage's director skills.
pub const STAGE_DIRECTOR_SKILLS: [&str; 2] = [READ_GAME_RESOURCE, OPEN_STAGE];

fn text(max: usize) -> Value {
    json!({"type": "string", "minLength": 1, "maxLength": max})
}

/// The two tools' descriptions.
pub fn stage_tool_specs() -> Vec<ToolSpec> {
    let actor = json!({
        "type": "object",
        "properties": {
            "name": text(60),
            "persona": text(80),
            "appearance": text(400),
            "position": text(120),
            "posture": text(120),
            "special": text(120),
            "hidden": {"type": "boolean"},
            "attributes": {"type": "object", "maxProperties": 16,
                           "additionalProperties": {"type": "integer", "minimum": -1_000_000, "maximum": 1_000_000}}
        },
        "required": ["appearance"],
        "additionalProperties": false
    });
    vec![
        ToolSpec::new(
            READ_GAME_RESOURCE,
            "Read an actor's or a stage's current state: game://actor/NAME or game://stage/NAME.",
            json!({
                "type": "object",
                "properties": {"uri": {"type": "string", "minLength": 1, "maxLength": 200, "pattern": "^game://(actor|stage)/"}},
                "required": ["uri"],
                "additionalProperties": false
            }),
            json!({"uri": "game://stage/Standoff at Riverside Cafe"}),
        )
        .read_only(),
        ToolSpec::new(
            OPEN_STAGE,
            "Turn an arena into a stage and play a scene there: residents (by 'persona') and other characters as actors, some possibly hidden; the scene plays its turns and closes.",
            json!({
                "type": "object",
                "properties": {
                    "stage": text(60),
                    "arena": text(200),
                    "environment": text(1000),
                    "actors": {"type": "array", "minItems": 1, "maxItems": 12, "items": actor},
                    "turns": {"type": "integer", "minimum": 1, "maximum": 20}
                },
                "required": ["stage", "environment", "actors", "turns"],
                "additionalProperties": false
            }),
            json!({"stage": "Standoff at the cafe", "environment": "closing time, rain on the windows",
                   "actors": [{"persona": "Full Name", "appearance": "a tall woman in an apron"},
                              {"name": "Stranger", "appearance": "a thin man in a wet coat"}],
                   "turns": 5}),
        ),
    ]
}

/// Registers the stage's tools (part of [`StagePlugin`](super::StagePlugin)); a game's tool of
/// the same name, registered earlier, wins.
pub(super) fn register_stage_tools(app: &mut App) {
    let registered = |app: &App, name: &str| {
        app.world()
            .get_resource::<crate::dialogue::ToolRegistry>()
            .is_some_and(|r| r.get(name).is_some())
    };
    for spec in stage_tool_specs() {
        if registered(app, &spec.name) {
            continue;
        }
        let result = if spec.name == READ_GAME_RESOURCE {
            app.add_dialogue_tool(spec, read_game_resource).map(|_| ())
        } else {
            app.add_dialogue_tool(spec, open_stage).map(|_| ())
        };
        if let Err(error) = result {
            error!(%error, "a stage tool was refused");
        }
    }
}

/// `read_game_resource`: the block behind the URI.
pub fn read_game_resource(call: In<ToolCall>, stages: Option<Res<Stages>>) -> ToolResult {
    let uri = call.args.get("uri").and_then(Value::as_str).unwrap_or("");
    let stages = stages.ok_or_else(|| "no stage is set up in this game".to_string())?;
    stages.read_resource(uri).map_err(|e| e.to_string())
}

/// `open_stage`: the scene of the arguments, checked like a scene file (personas by name),
/// opened, its turns queued and its close after them. The result asks to be awaited until the
/// scene closes (`{"await": {"scene_closed": STAGE}}`): the director's step ends then, with
/// who did what.
pub fn open_stage(call: In<ToolCall>, world: &mut World) -> ToolResult {
    let args = &call.args;
    let file = SceneFile {
        name: args
            .get("stage")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        arena: args.get("arena").and_then(Value::as_str).map(str::to_owned),
        environment: args
            .get("environment")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        actors: serde_json::from_value(args.get("actors").cloned().unwrap_or(Value::Null))
            .map_err(|e| format!("actors: {e}"))?,
    };
    let turns = args
        .get("turns")
        .and_then(Value::as_u64)
        .map_or(1, |t| t.clamp(1, 20) as u32);
    let town: Vec<(String, Entity)> = world
        .query_filtered::<(Entity, &Name), With<Persona>>()
        .iter(world)
        .map(|(e, n)| (n.as_str().to_owned(), e))
        .collect();
    let scene = scene_from_file(file, &town)?;
    let stage = scene.name.clone();
    if world
        .get_resource::<Stages>()
        .is_some_and(|s| s.get(&stage).is_some())
    {
        return Err(format!("a scene is already playing on {stage}"));
    }
    world.write_message(StageCommand::Open { scene });
    world.write_message(StageCommand::Play {
        stage: stage.clone(),
        turns,
    });
    world.write_message(StageCommand::Finish {
        stage: stage.clone(),
    });
    // The director waits for the close and takes who did what as the step's result.
    Ok(json!({"opened": stage, "turns": turns, "await": {"scene_closed": stage}}))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dialogue::ToolRegistry;

    #[test]
    fn the_schemas_refuse_hostile_arguments() {
        let mut app = App::new();
        register_stage_tools(&mut app);
        let registry = app.world().resource::<ToolRegistry>();
        let read = registry.get(READ_GAME_RESOURCE).expect("registered");
        assert!(read.spec.read_only);
        assert!(read.check_args(&json!({"uri": "game://stage/Pub"})).is_ok());
        for bad in [
            json!({}),
            json!({"uri": "file:///etc/passwd"}),
            json!({"uri": "game://persona/Ada"}),
            json!({"uri": "game://stage/Pub", "then": "rm"}),
            json!({"uri": "x".repeat(500)}),
        ] {
            assert!(read.check_args(&bad).is_err(), "{bad}");
        }
        let open = registry.get(OPEN_STAGE).expect("registered");
        assert!(!open.spec.read_only);
        let ok = json!({"stage": "Pub", "environment": "quiet", "turns": 3,
                        "actors": [{"name": "A", "appearance": "tall"}]});
        assert!(open.check_args(&ok).is_ok());
        let resident = json!({"stage": "Quarrel at the Lantern", "environment": "the lunch rush, a spilled tray", "turns": 2,
                              "actors": [{"persona": "Cy Park", "appearance": "a tired waiter"},
                                         {"name": "Stranger", "appearance": "a man in a wet coat"}]});
        assert_eq!(open.check_args(&resident), Ok(()));
        let many: Vec<Value> = (0..13)
            .map(|i| json!({"name": format!("A{i}"), "appearance": "x"}))
            .collect();
        for bad in [
            json!({"stage": "Pub", "environment": "quiet", "turns": 3, "actors": []}),
            json!({"stage": "Pub", "environment": "quiet", "turns": 300, "actors": [{"name": "A", "appearance": "x"}]}),
            json!({"stage": "Pub", "environment": "quiet", "turns": 3, "actors": many}),
            json!({"stage": "Pub", "environment": "quiet", "turns": 3, "actors": [{"name": "A", "appearance": "x", "attributes": {"health": 1e12}}]}),
            json!({"stage": "Pub", "environment": "quiet", "turns": 3, "actors": [{"name": "A", "appearance": "x", "script": "run"}]}),
        ] {
            assert!(open.check_args(&bad).is_err(), "{bad}");
        }
    }
}
