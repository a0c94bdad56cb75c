//! A stage scene from game code (SPEC §9): the default town's café becomes a stage at closing
//! time — Mira behind the counter, Tomas at his table, a stranger at the door and someone
//! hidden in the kitchen corridor (`assets/stages/standoff.json`). Six turns are played: every
//! actor observes and plans at once, the stage agent resolves the plans, and the game prints
//! each outcome message. Then the scene closes and each persona keeps it: a memory, and its day
//! re-planned around the time the scene took.
//!
//! ```sh
//! cargo run --no-default-features --example stage_scene
//! ```
//!
//! The "model" is the offline town script (not a model); with a server, insert an HTTP client.

use std::path::Path;
use std::time::Duration;

use bevy::prelude::*;
use bevy::time::TimeUpdateStrategy;
use bevy_generative_agents::headless::{simulation_task_pools, spawn_default_town};
use bevy_generative_agents::persona::Mind;
use bevy_generative_agents::prelude::*;
use bevy_generative_agents::stage::{
    ActorPlanned, StageClosed, StageCommand, StageRefused, StageTurnResolved, load_scene,
};

fn main() {
    let evening = SimClock::default_start()
        .date()
        .and_hms_opt(18, 0, 0)
        .expect("a valid time");
    let mut app = App::new();
    app.add_plugins(MinimalPlugins.set(simulation_task_pools()))
        .insert_resource(TimeUpdateStrategy::ManualDuration(Duration::from_millis(
            16,
        )))
        .insert_resource(town_script_client(5))
        .insert_resource(
            SimClock::new(evening, SimClock::default().sec_per_step())
                .with_mode(TimeMode::Lockstep)
                .with_speed(SimSpeed::Max),
        )
        .add_plugins(GenerativeAgentsPlugins)
        .add_systems(Update, (print_turns, print_refusals));
    let personas = spawn_default_town(&mut app, None, 5).expect("the default town loads");
    // Ten minutes of evening first: everyone has planned the day the scene will interrupt.
    while app.world().resource::<SimClock>().step() < 60 {
        app.update();
    }
    let town: Vec<(String, Entity)> = personas
        .iter()
        .filter_map(|&e| Some((app.world().get::<Name>(e)?.as_str().to_string(), e)))
        .collect();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/stages/standoff.json");
    let scene = match load_scene(&path, &town) {
        Ok(scene) => scene,
        Err(error) => {
            eprintln!("{error}");
            std::process::exit(1);
        }
    };
    let stage = scene.name.clone();
    let players: Vec<Entity> = scene.actors.iter().filter_map(|a| a.persona).collect();
    app.world_mut().write_message(StageCommand::Open { scene });
    app.world_mut().write_message(StageCommand::Play {
        stage: stage.clone(),
        turns: 6,
    });
    app.world_mut().write_message(StageCommand::Finish {
        stage: stage.clone(),
    });

    // Until the scene has closed and its personas have their minds back.
    let mut closed = bevy::ecs::message::MessageCursor::<StageClosed>::default();
    let mut ended = None;
    for _ in 0..100_000 {
        app.update();
        if let Some(end) = closed
            .read(app.world().resource::<Messages<StageClosed>>())
            .last()
        {
            ended = Some(end.clone());
        }
        let settled = players.iter().all(|p| {
            app.world().get::<Mind>(*p).is_some_and(Mind::is_home)
                && app
                    .world()
                    .get::<bevy_generative_agents::clock::AwaitingCognition>(*p)
                    .is_none()
        });
        if ended.is_some() && settled {
            break;
        }
    }
    let Some(end) = ended else {
        eprintln!("the scene did not close");
        std::process::exit(1);
    };
    let standing: Vec<&str> = end.scene.actors.iter().map(|a| a.name.as_str()).collect();
    let fallen: Vec<&str> = end
        .scene
        .fallen
        .iter()
        .map(|(a, _)| a.name.as_str())
        .collect();
    println!(
        "closed after {} turns; standing: {}; fallen: {}",
        end.turns,
        standing.join(", "),
        if fallen.is_empty() {
            "nobody".to_string()
        } else {
            fallen.join(", ")
        }
    );
    for persona in players {
        let Some(mind) = app.world().get::<Mind>(persona).and_then(Mind::get) else {
            continue;
        };
        if let Some(memory) = mind
            .associative
            .events()
            .rev()
            .find(|n| n.description.contains(&stage))
        {
            println!("{} remembers: {}", mind.scratch.name, memory.description);
        }
        let minutes: u32 = mind
            .scratch
            .f_daily_schedule
            .iter()
            .map(|i| i.minutes)
            .sum();
        if let Some(item) = mind
            .scratch
            .f_daily_schedule
            .iter()
            .find(|i| i.task.contains("scene at"))
        {
            println!(
                "{}'s day: \"{}\" for {} min (the day sums to {minutes} min)",
                mind.scratch.name, item.task, item.minutes
            );
        }
    }
}

/// The frame's plans and resolutions, turn by turn (a frame may play several turns).
fn print_turns(
    mut plans: MessageReader<ActorPlanned>,
    mut turns: MessageReader<StageTurnResolved>,
) {
    let plans: Vec<&ActorPlanned> = plans.read().collect();
    for t in turns.read() {
        for p in plans.iter().filter(|p| p.turn == t.turn) {
            println!("  {}: {}", p.actor, p.plan.plan);
        }
        println!("turn {}: {}", t.turn, t.summary);
        for (actor, attribute, old, new) in &t.applied.changes {
            println!("    {actor}: {attribute} {old} → {new}");
        }
        for actor in &t.applied.left {
            println!("    {actor} leaves the scene");
        }
    }
}

fn print_refusals(mut refused: MessageReader<StageRefused>) {
    for refusal in refused.read() {
        println!("refused: {}", refusal.why);
    }
}
