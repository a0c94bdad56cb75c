//! A Lockstep clock at max speed that waits for the model **sleeps** until something lands:
//! it neither spins through `SimPoll` while a slow model thinks nor oversleeps an answer that
//! came back. Counted in polls and steps, not timed.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bevy::prelude::*;
use bevy_generative_agents::clock::{AwaitingCognition, SimClock, SimPoll};
use bevy_generative_agents::llm::LlmClient;
use bevy_generative_agents::settings::AgentSettings;
use bevy_generative_agents::testing::{create_test_app, spawn_default_town, town_script};

/// The landing bell is one per process: these tests take turns, so one's landings do not
/// wake the other's clock.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// How many times `SimPoll` ran.
#[derive(Resource, Default)]
struct Polls(u32);

fn count_poll(mut polls: ResMut<Polls>) {
    polls.0 += 1;
}

/// Two personas of the default town on the offline town script answering after `latency`,
/// updated until a thought is out; from then on each frame may spend `budget_ms` on steps
/// at max speed.
fn waiting_town(latency: Duration, budget_ms: u64) -> App {
    let slow = town_script::town_script_backend(5).with_latency(latency);
    let mut app = create_test_app(LlmClient::new(Arc::new(slow)));
    spawn_default_town(&mut app, Some(2), 5).expect("default town loads");
    app.init_resource::<Polls>()
        .add_systems(SimPoll, count_poll);
    app.finish();
    app.cleanup();
    for _ in 0..50 {
        if pending(&mut app) > 0 {
            app.world_mut()
                .resource_mut::<AgentSettings>()
                .max_speed_frame_budget_ms = budget_ms;
            return app;
        }
        app.update();
    }
    panic!("no thought went out to the model");
}

fn pending(app: &mut App) -> usize {
    app.world_mut()
        .query_filtered::<(), With<AwaitingCognition>>()
        .iter(app.world())
        .count()
}

/// One frame: the steps it took and the polls it ran.
fn one_frame(app: &mut App) -> (u64, u32) {
    let step = |app: &App| app.world().resource::<SimClock>().step();
    let before = step(app);
    app.world_mut().resource_mut::<Polls>().0 = 0;
    app.update();
    (step(app) - before, app.world().resource::<Polls>().0)
}

#[test]
fn a_clock_waiting_on_a_slow_model_does_not_spin() {
    // Answers take 3 s; the frame may wait 60 ms of them. Spinning polled hundreds of times
    // in that; sleeping on the landing bell polls once, and again only if something rang it.
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let mut app = waiting_town(Duration::from_secs(3), 60);
    let (steps, polls) = one_frame(&mut app);
    assert_eq!(steps, 0, "no answer came back, so no step was taken");
    assert!(pending(&mut app) > 0, "still waiting");
    assert!(
        (1..=8).contains(&polls),
        "one poll and a sleep, not a spin: {polls} polls in one frame"
    );
}

#[test]
fn an_answer_wakes_the_waiting_clock() {
    // Answers take 40 ms; the frame may wait 4 s. Each landing must wake the driver, which
    // then steps on to the next thought: an oversleeping driver would wake only when the
    // frame's time is up, too late to take any step in this frame.
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let mut app = waiting_town(Duration::from_millis(40), 4_000);
    let (steps, polls) = one_frame(&mut app);
    assert!(steps >= 3, "steps went on as the answers came: {steps}");
    assert!(
        u64::from(polls) < 40 * (steps + 1),
        "the driver slept between landings: {polls} polls for {steps} steps"
    );
}
