//! The director headless (SPEC §10): game code gives an instruction, the director plans it as
//! checked steps, waits for the player's confirmation, runs the skills in the town — an
//! appointment in the host's day, an announcement on a town news channel everyone hears — and
//! reviews who turned up and what was said — every stage heard through its outcome events.
//!
//! ```sh
//! cargo run --no-default-features --example director
//! ```
//!
//! The "model" is the offline town script (not a model): its director answers read the town's
//! own personas and places. With a server, insert an HTTP client instead.

use std::time::Duration;

use bevy::prelude::*;
use bevy::time::TimeUpdateStrategy;
use bevy_generative_agents::director::{
    ConfirmationPolicy, DirectivePlanned, DirectiveRejected, Director, DirectorCommand,
    DirectorFailed, DirectorReviewed, DirectorStateChanged, DirectorStepFinished, ExecutorState,
};
use bevy_generative_agents::headless::{simulation_task_pools, spawn_default_town};
use bevy_generative_agents::llm::town_script_backend;
use bevy_generative_agents::prelude::*;

/// The game's log of what the director did.
#[derive(Resource, Default)]
struct Heard(Vec<String>);

fn main() {
    let morning = SimClock::default_start()
        .date()
        .and_hms_opt(8, 0, 0)
        .expect("a time");
    let mut app = App::new();
    app.add_plugins(MinimalPlugins.set(simulation_task_pools()))
        .insert_resource(TimeUpdateStrategy::ManualDuration(Duration::from_millis(
            16,
        )))
        .insert_resource(LlmClient::new(std::sync::Arc::new(town_script_backend(1))))
        .insert_resource(
            SimClock::new(morning, 10)
                .with_mode(TimeMode::Lockstep)
                .with_speed(SimSpeed::Max),
        )
        .add_plugins(GenerativeAgentsPlugins)
        .init_resource::<Heard>()
        .add_observer(|e: On<DirectiveRejected>, mut h: ResMut<Heard>| {
            h.0.push(format!("rejected: {}", e.reason));
        })
        .add_observer(|e: On<DirectorStateChanged>, mut h: ResMut<Heard>| {
            h.0.push(format!("state: {:?} -> {:?}", e.from, e.to));
        })
        .add_observer(|e: On<DirectivePlanned>, mut h: ResMut<Heard>| {
            h.0.push(format!("planned {} step(s):", e.steps.len()));
            for step in &e.steps {
                h.0.push(format!("  [ ] {} {} {}", step.id, step.skill, step.args));
            }
        })
        .add_observer(|e: On<DirectorStepFinished>, mut h: ResMut<Heard>| {
            h.0.push(format!(
                "  [x] {} {}: {:?} — {}",
                e.step, e.skill, e.status, e.result
            ));
        })
        .add_observer(|e: On<DirectorFailed>, mut h: ResMut<Heard>| {
            h.0.push(format!("failed: {}", e.reason));
        })
        .add_observer(|e: On<DirectorReviewed>, mut h: ResMut<Heard>| {
            h.0.push(format!("review: {}", e.review.summary));
            for check in &e.review.checks {
                h.0.push(format!("  check {}", check.line()));
            }
        });
    spawn_default_town(&mut app, None, 1).expect("the default town loads");

    let directive = "Have Mira Okafor host an open-mic evening at Riverside Cafe today from 10:00 to 11:00, and announce it on the town news";
    println!("> {directive}");
    app.world_mut().write_message(DirectorCommand::directive(
        directive,
        ConfirmationPolicy::BeforeExecute,
    ));
    let over = |app: &App| {
        app.world()
            .resource::<Director>()
            .latest()
            .is_some_and(|job| job.state.is_terminal())
    };
    let mut confirmed = false;
    // At most two game days of steps: the check's window closes at 11:00.
    for _ in 0..2_000_000 {
        if over(&app) || app.world().resource::<SimClock>().step() > 2 * 8640 {
            break;
        }
        let waiting = app
            .world()
            .resource::<Director>()
            .latest()
            .is_some_and(|job| job.state == ExecutorState::AwaitingConfirmation);
        if waiting && !confirmed {
            // The player reads the checklist and says yes.
            println!("> confirm");
            app.world_mut().write_message(DirectorCommand::Confirm);
            confirmed = true;
        }
        app.world_mut().resource_mut::<SimClock>().request_step();
        app.update();
        for line in app.world_mut().resource_mut::<Heard>().0.drain(..) {
            println!("{line}");
        }
    }
    let now = app.world().resource::<SimClock>().now();
    let state = app
        .world()
        .resource::<Director>()
        .latest()
        .map(|job| job.state);
    println!("at {now}: director {state:?}");
}
