//! A minimal headless town: the default map and personas under `MinimalPlugins`, stepped in
//! Lockstep as fast as thoughts land, printing what everyone is doing every game hour.
//!
//! ```sh
//! cargo run --example headless_town -- 6      # six game hours (default 2)
//! ```
//!
//! It thinks with the offline town script — deterministic canned answers, not a language
//! model — so it runs anywhere; insert another [`LlmClient`] (see `custom_backend.rs`) for a
//! real model.

use bevy::prelude::*;
use bevy_generative_agents::headless::{simulation_task_pools, spawn_default_town};
use bevy_generative_agents::llm::town_script_client;
use bevy_generative_agents::prelude::*;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let hours: u64 = match std::env::args().nth(1) {
        Some(arg) => arg
            .parse()
            .map_err(|err| format!("expected a whole number of game hours, got {arg:?}: {err}"))?,
        None => 2,
    };

    let mut app = App::new();
    app.add_plugins(MinimalPlugins.set(simulation_task_pools()))
        .insert_resource(town_script_client(7))
        .insert_resource(
            SimClock::default()
                .with_mode(TimeMode::Lockstep)
                .with_speed(SimSpeed::Max),
        )
        .add_plugins(GenerativeAgentsPlugins);
    let personas = spawn_default_town(&mut app, None, 7)?;
    println!("{} personas in the default town", personas.len());

    // The clock stops itself at `stop_at_step` (at max speed a frame may hold many steps), so
    // each report comes exactly on the hour.
    let steps_per_hour = 3600 / u64::from(app.world().resource::<SimClock>().sec_per_step());
    let stops = std::iter::once(1).chain((1..=hours).map(|h| h * steps_per_hour));
    for stop in stops {
        // Reaching a stop pauses the clock; each hour sets the next stop and the speed again.
        let mut clock = app.world_mut().resource_mut::<SimClock>();
        clock.stop_at_step = Some(stop);
        clock.speed = SimSpeed::Max;
        while app.world().resource::<SimClock>().step() < stop {
            app.update();
        }
        print_town(app.world_mut());
    }
    Ok(())
}

/// One line per persona: the time, its emoji, what it does and where.
fn print_town(world: &mut World) {
    let now = world.resource::<SimClock>().now();
    println!("— {}", now.format("%A %B %-d, %H:%M"));
    let mut personas = world.query_filtered::<(&Name, &ActionView), With<Persona>>();
    let mut lines: Vec<String> = personas
        .iter(world)
        .map(|(name, view)| {
            let address = view.address.as_ref().map(ToString::to_string);
            format!(
                "  {} {name}: {} @ {}",
                view.emoji,
                view.description,
                address.unwrap_or_default()
            )
        })
        .collect();
    lines.sort();
    for line in lines {
        println!("{line}");
    }
}
