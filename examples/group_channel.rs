//! Group conversations from game code (SPEC §8): the game opens a town notice board channel
//! and posts into it; the personas hear it, decide whether to join, and talk — each line an
//! outcome message the game prints.
//!
//! ```sh
//! cargo run --no-default-features --example group_channel
//! ```
//!
//! The "model" is the offline town script (not a model); with a server, insert an HTTP client.

use std::time::Duration;

use bevy::prelude::*;
use bevy::time::TimeUpdateStrategy;
use bevy_generative_agents::group::{
    GroupAttentionChanged, GroupCommand, GroupLineSpoken, GroupRefused, GroupStreams, StreamKey,
};
use bevy_generative_agents::headless::{simulation_task_pools, spawn_default_town};
use bevy_generative_agents::prelude::*;

const BOARD: &str = "notice board";

fn main() {
    let morning = SimClock::default_start()
        .date()
        .and_hms_opt(9, 0, 0)
        .expect("a valid time");
    let mut app = App::new();
    app.add_plugins(MinimalPlugins.set(simulation_task_pools()))
        .insert_resource(TimeUpdateStrategy::ManualDuration(Duration::from_millis(
            16,
        )))
        .insert_resource(town_script_client(5))
        .insert_resource(
            SimClock::new(morning, SimClock::default().sec_per_step())
                .with_mode(TimeMode::Lockstep)
                .with_speed(SimSpeed::Max),
        )
        .add_plugins(GenerativeAgentsPlugins)
        .add_systems(Update, (print_lines, print_moves, print_refusals));
    let personas = spawn_default_town(&mut app, None, 5).expect("the default town loads");
    let first = app
        .world()
        .get::<Name>(personas[0])
        .map(|n| n.as_str().split(' ').next().unwrap_or_default().to_string())
        .unwrap_or_default();

    // The game opens a channel everyone hears, and posts into it naming one resident.
    app.world_mut()
        .write_message(GroupCommand::open_channel(BOARD));
    app.world_mut().write_message(GroupCommand::post_to_channel(
        BOARD,
        "Town Hall",
        format!("{first}, the summer fair is on Saturday at noon in the square. Who can help?"),
    ));
    // A post that is refused (untrusted text is validated): empty.
    app.world_mut()
        .write_message(GroupCommand::post_to_channel(BOARD, "Town Hall", "   "));

    // Twenty game minutes.
    let until = app.world().resource::<SimClock>().step() + 120;
    while app.world().resource::<SimClock>().step() < until {
        app.update();
    }
    let streams = app.world().resource::<GroupStreams>();
    let board = streams
        .get(&StreamKey::Channel(BOARD.into()))
        .expect("the board is open");
    let speakers: std::collections::BTreeSet<&str> =
        board.lines.iter().map(|l| l.speaker.as_str()).collect();
    println!(
        "the board: {} lines by {} speakers ({})",
        board.lines.len(),
        speakers.len(),
        speakers.into_iter().collect::<Vec<_>>().join(", ")
    );
}

fn print_lines(mut lines: MessageReader<GroupLineSpoken>) {
    for line in lines.read() {
        println!("[{}] {}: {}", line.stream.label(), line.speaker, line.text);
    }
}

fn print_moves(mut moves: MessageReader<GroupAttentionChanged>) {
    for change in moves.read() {
        println!(
            "  ({} {:?} → {:?} in {})",
            change.name,
            change.from,
            change.to,
            change.stream.label()
        );
    }
}

fn print_refusals(mut refused: MessageReader<GroupRefused>) {
    for refusal in refused.read() {
        println!("refused: {}", refusal.why);
    }
}
