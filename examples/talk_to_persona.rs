//! Talking to a persona headless (SPEC §7): a game tool is registered, the player asks a persona
//! to meet at the cafe later, the persona adds it to its day with a tool and answers; after the
//! reply its background stage weighs the exchange and remembers it (`DialogueRemembered`); then
//! a whisper and an interview.
//!
//! ```sh
//! cargo run --no-default-features --example talk_to_persona
//! ```
//!
//! The "model" here is the offline town script (not a model) with a scripted planner that uses
//! `add_to_schedule` once and then answers; with a server, insert an HTTP client instead.

use std::time::Duration;

use bevy::prelude::*;
use bevy::time::TimeUpdateStrategy;
use bevy_generative_agents::dialogue::{
    AppDialogueExt, DialogueMode, DialogueRemembered, DialogueReplied, DialogueRequest,
    DialogueStream, ToolCall, ToolCalled, ToolResult, ToolSpec,
};
use bevy_generative_agents::headless::{simulation_task_pools, spawn_default_town};
use bevy_generative_agents::llm::town_script_backend;
use bevy_generative_agents::prelude::*;
use serde_json::json;

/// A game's own tool: it only writes what it was asked.
fn wave(call: In<ToolCall>) -> ToolResult {
    Ok(json!({"waved_at": call.speaker}))
}

/// What the game heard, printed at the end of each turn.
#[derive(Resource, Default)]
struct Heard(Vec<String>);

fn main() {
    // The planner: first turn of a message asks for add_to_schedule, then finishes.
    let backend = town_script_backend(1).with_responder("dialogue_planner", |request, _| {
        let text = request.prompt_text();
        let asked_for_cafe = text.contains("cafe at 3 pm");
        let no_tool_yet = text.contains("**Tools run so far**\n(none)");
        if text.contains("What are you doing this afternoon?") {
            json!({"action": "finish", "message": "At three I'm meeting someone at the cafe."})
        } else if asked_for_cafe && no_tool_yet {
            json!({"action": "tool", "tool": "add_to_schedule",
                   "args": {"task": "meet the player", "place": "cafe", "time": "15:00", "minutes": 30}})
        } else {
            json!({"action": "finish", "message": "See you at the cafe at three!"})
        }
        .to_string()
    });
    let mut app = App::new();
    app.add_plugins(MinimalPlugins.set(simulation_task_pools()))
        .insert_resource(TimeUpdateStrategy::ManualDuration(Duration::from_millis(
            16,
        )))
        .insert_resource(LlmClient::new(std::sync::Arc::new(backend)))
        .insert_resource(SimClock::default().with_mode(TimeMode::Lockstep))
        .add_plugins(GenerativeAgentsPlugins)
        .init_resource::<Heard>()
        .add_observer(|e: On<ToolCalled>, mut heard: ResMut<Heard>| {
            heard.0.push(format!("  tool: {}", e.line));
        })
        .add_observer(|e: On<DialogueReplied>, mut heard: ResMut<Heard>| {
            heard.0.push(format!("  {}: {}", e.name, e.reply));
        })
        // After the reply, the background stage: importance, then memory if it matters enough.
        .add_observer(|e: On<DialogueRemembered>, mut heard: ResMut<Heard>| {
            let kept = if e.remembered {
                "remembered"
            } else {
                "not kept"
            };
            heard
                .0
                .push(format!("  memory: {kept} (importance {})", e.importance));
        });
    app.add_dialogue_tool(
        ToolSpec::new(
            "wave",
            "Wave at the person you talk to.",
            json!({"type": "object", "properties": {}, "additionalProperties": false}),
            json!({}),
        ),
        wave,
    )
    .expect("a valid tool");
    let personas = spawn_default_town(&mut app, Some(1), 1).expect("the default town loads");
    let persona = personas[0];
    // One step: the persona wakes into the day and plans it.
    app.world_mut().resource_mut::<SimClock>().request_step();
    app.update();

    let turns = [
        DialogueRequest::say(
            persona,
            "Player",
            "Could we meet at the cafe at 3 pm today?",
        ),
        DialogueRequest::whisper(persona, "you love the smell of fresh bread"),
        DialogueRequest::interview(persona, "What are you doing this afternoon?"),
    ];
    for request in turns {
        println!("> {:?} from {}", request.mode, request.speaker);
        // A `say` is over once its background stage has told what it kept.
        let last = if matches!(request.mode, DialogueMode::Say(_)) {
            "  memory:"
        } else {
            "  "
        };
        app.world_mut().write_message(request);
        for _ in 0..1_000 {
            app.update();
            let heard = &app.world().resource::<Heard>().0;
            if heard
                .last()
                .is_some_and(|l| l.starts_with(last) && !l.starts_with("  tool:"))
            {
                break;
            }
        }
        for line in app.world_mut().resource_mut::<Heard>().0.drain(..) {
            println!("{line}");
        }
    }
    let stream = app
        .world()
        .get::<DialogueStream>(persona)
        .expect("the persona was talked to");
    println!("bubble: {}", stream.partial);
}
