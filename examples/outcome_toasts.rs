//! A game reacting to outcome events with observers: a "toast" line when two personas start
//! talking, when someone starts a new action, plans a new day or reflects. Headless
//! (`MinimalPlugins`), the default town on the offline town script (a deterministic scripted
//! backend, not a model), a few game hours from 7 am, then it exits.
//!
//! ```text
//! cargo run --no-default-features --example outcome_toasts        # 3 game hours
//! cargo run --no-default-features --example outcome_toasts -- 6   # 6 game hours
//! ```

use std::time::Duration;

use bevy::prelude::*;
use bevy::time::TimeUpdateStrategy;
use bevy_generative_agents::headless::simulation_task_pools;
use bevy_generative_agents::llm::town_script_client;
use bevy_generative_agents::persona::{default_personas_dir, load_persona_sheets, spawn_persona};
use bevy_generative_agents::prelude::*;

/// The toasts raised so far, oldest first. A game would draw them; `main` prints them.
#[derive(Resource, Default)]
pub struct Toasts(pub Vec<String>);

/// Two personas start talking: one toast per conversation (the initiator's side).
fn on_conversation_started(talk: On<ConversationStarted>, mut toasts: ResMut<Toasts>) {
    if talk.initiated {
        toasts.0.push(format!(
            "{} 💬 {} and {} start talking ({} lines): {}",
            talk.time.format("%H:%M"),
            talk.name,
            talk.partner_name,
            talk.transcript.len(),
            talk.summary
        ));
    }
}

/// Someone starts a new action.
fn on_action_started(action: On<ActionStarted>, mut toasts: ResMut<Toasts>) {
    toasts.0.push(format!(
        "{} {} {} is {}",
        action.time.format("%H:%M"),
        action.emoji,
        action.name,
        action.description
    ));
}

/// Someone wakes into a new day.
fn on_new_day(day: On<NewDay>, mut toasts: ResMut<Toasts>) {
    toasts.0.push(format!(
        "{} ☀ {} plans {}: up at {}",
        day.time.format("%H:%M"),
        day.name,
        day.date,
        day.wake_up_hour
    ));
}

/// Someone reflects.
fn on_reflection(reflection: On<ReflectionCompleted>, mut toasts: ResMut<Toasts>) {
    toasts.0.push(format!(
        "{} 💡 {} reflects: {}",
        reflection.time.format("%H:%M"),
        reflection.name,
        reflection.insights.first().map_or("", String::as_str)
    ));
}

/// A headless app of the default town starting at 7 am, every persona spawned, with the toast
/// observers. `seed` drives the town script and every random choice.
pub fn toast_app(seed: u64) -> Result<App, BevyError> {
    let map = TownMap::load_tmx(TownMap::default_town_path())?;
    let sheets = load_persona_sheets(default_personas_dir())?;
    let seven_am = SimClock::default_start() + chrono::Duration::hours(7);
    let clock = SimClock::new(seven_am, 10)
        .with_mode(TimeMode::Lockstep)
        .with_speed(SimSpeed::Max);

    let mut app = App::new();
    app.add_plugins(MinimalPlugins.set(simulation_task_pools()))
        .insert_resource(TimeUpdateStrategy::ManualDuration(Duration::from_millis(
            16,
        )))
        .insert_resource(town_script_client(seed))
        .insert_resource(clock.clone())
        .add_plugins(GenerativeAgentsPlugins::new(PostUpdate))
        .init_resource::<Toasts>()
        .add_observer(on_conversation_started)
        .add_observer(on_action_started)
        .add_observer(on_new_day)
        .add_observer(on_reflection);

    let settings = app.world().resource::<AgentSettings>().clone();
    let mut commands = app.world_mut().commands();
    for sheet in &sheets {
        spawn_persona(&mut commands, sheet, &map, &settings, &clock, seed)?;
    }
    app.world_mut().flush();
    app.insert_resource(map);
    Ok(app)
}

/// Runs `app` for `hours` game hours, handing each frame's new toasts to `show`.
pub fn run_hours(app: &mut App, hours: u32, mut show: impl FnMut(&str)) {
    let steps = u64::from(hours) * 360;
    let stop = app.world().resource::<SimClock>().step() + steps;
    app.world_mut().resource_mut::<SimClock>().stop_at_step = Some(stop);
    let mut shown = 0;
    while app.world().resource::<SimClock>().step() < stop {
        app.update();
        let toasts = &app.world().resource::<Toasts>().0;
        for toast in &toasts[shown..] {
            show(toast);
        }
        shown = toasts.len();
    }
}

fn main() -> Result<(), BevyError> {
    let hours = match std::env::args().nth(1) {
        Some(arg) => arg
            .parse::<u32>()
            .map_err(|_| format!("hours must be a whole number, not `{arg}`"))?,
        None => 3,
    };
    let mut app = toast_app(7)?;
    run_hours(&mut app, hours, |toast| println!("{toast}"));
    Ok(())
}
