//! `smallville stage FILE [--turns N] [--from SAVE]`: a stage scene played headless — the
//! default town (or a save's) at the scene's evening, the scene opened from its file, `N` turns
//! played in Lockstep, then closed so each persona keeps it. One JSON line per turn and one for
//! the close on stdout; the save, if any, is only read.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use bevy::prelude::*;
use bevy::time::TimeUpdateStrategy;
use bevy_generative_agents::clock::{AwaitingCognition, SimClock, SimSpeed, TimeMode};
use bevy_generative_agents::headless::{simulation_task_pools, spawn_default_town};
use bevy_generative_agents::llm::build_client;
use bevy_generative_agents::persist::build_app_from_save_with;
use bevy_generative_agents::persona::{Mind, Persona};
use bevy_generative_agents::stage::{
    ActorPlanned, StageClosed, StageCommand, StageRefused, StageTurnResolved, load_scene,
};
use serde_json::json;

use super::args::LlmArgs;

/// `smallville stage` flags.
#[derive(clap::Args, Debug, Clone)]
pub struct StageArgs {
    /// The scene file (e.g. assets/stages/standoff.json).
    pub scene: PathBuf,
    /// Turns to play (1–50).
    #[arg(long, default_value_t = 6, value_parser = clap::value_parser!(u32).range(1..=50))]
    pub turns: u32,
    /// Play it in this save's town instead of the default town (the save is left untouched).
    #[arg(long, value_name = "SAVE_DIR")]
    pub from: Option<PathBuf>,
    /// Game minutes the town lives before the scene opens (so everyone has a plan to interrupt).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(0..=1440))]
    pub warm_up: u32,
    /// Load the save even if its files differ from its manifest.json (edited by hand, or
    /// saved before checksums existed).
    #[arg(long = "trust-edited-save", requires = "from")]
    pub trust_edited_save: bool,
    #[command(flatten)]
    pub llm: LlmArgs,
}

/// Runs the command: exit 0 when the scene played and closed, 1 when the town or the model
/// could not be set up, 2 on bad flags or a bad scene file.
pub fn stage_command(args: &StageArgs) -> ExitCode {
    let llm = match args.llm.resolve() {
        Ok(llm) => llm,
        Err(err) => {
            eprintln!("error: {err}");
            return ExitCode::from(2);
        }
    };
    let mut app = match &args.from {
        Some(save) => match build_app_from_save_with(
            save,
            &llm,
            None,
            None,
            false,
            super::args::integrity(args.trust_edited_save),
        ) {
            Ok((app, _)) => app,
            Err(err) => {
                eprintln!("error: {err}");
                return ExitCode::FAILURE;
            }
        },
        None => {
            let client = match build_client(&llm) {
                Ok(client) => client,
                Err(err) => {
                    eprintln!("error: {err}");
                    return ExitCode::FAILURE;
                }
            };
            let evening = SimClock::default_start()
                .date()
                .and_hms_opt(18, 0, 0)
                .unwrap_or_default();
            let mut app = App::new();
            app.add_plugins(MinimalPlugins.set(simulation_task_pools()))
                .insert_resource(client)
                .insert_resource(SimClock::new(evening, SimClock::default().sec_per_step()))
                .add_plugins(bevy_generative_agents::GenerativeAgentsPlugins);
            if let Err(err) = spawn_default_town(&mut app, None, 1) {
                eprintln!("error: {err}");
                return ExitCode::FAILURE;
            }
            app
        }
    };
    app.insert_resource(TimeUpdateStrategy::ManualDuration(
        std::time::Duration::from_millis(16),
    ));
    {
        let mut clock = app.world_mut().resource_mut::<SimClock>();
        clock.mode = TimeMode::Lockstep;
        clock.speed = SimSpeed::Max;
    }
    let warm_until = app.world().resource::<SimClock>().step() + u64::from(args.warm_up) * 6;
    while app.world().resource::<SimClock>().step() < warm_until {
        app.update();
    }
    let mut query = app
        .world_mut()
        .query_filtered::<(Entity, &Name), With<Persona>>();
    let town: Vec<(String, Entity)> = query
        .iter(app.world())
        .map(|(e, n)| (n.as_str().to_owned(), e))
        .collect();
    let scene = match load_scene(&args.scene, &town) {
        Ok(scene) => scene,
        Err(err) => {
            eprintln!("error: {err}");
            return ExitCode::from(2);
        }
    };
    let stage = scene.name.clone();
    let players: Vec<Entity> = scene.actors.iter().filter_map(|a| a.persona).collect();
    let world = app.world_mut();
    world.write_message(StageCommand::Open { scene });
    world.write_message(StageCommand::Play {
        stage: stage.clone(),
        turns: args.turns,
    });
    world.write_message(StageCommand::Finish { stage });

    let mut out = std::io::stdout().lock();
    let mut plans = bevy::ecs::message::MessageCursor::<ActorPlanned>::default();
    let mut turns = bevy::ecs::message::MessageCursor::<StageTurnResolved>::default();
    let mut closed = bevy::ecs::message::MessageCursor::<StageClosed>::default();
    let mut refused = bevy::ecs::message::MessageCursor::<StageRefused>::default();
    let mut pending_plans: Vec<ActorPlanned> = Vec::new();
    let mut ended = false;
    for _ in 0..10_000_000u64 {
        app.update();
        let world = app.world();
        pending_plans.extend(
            plans
                .read(world.resource::<Messages<ActorPlanned>>())
                .cloned(),
        );
        for turn in turns.read(world.resource::<Messages<StageTurnResolved>>()) {
            let planned: Vec<_> = pending_plans
                .iter()
                .filter(|p| p.turn == turn.turn)
                .map(|p| json!({"actor": p.actor, "observation": p.plan.observation, "plan": p.plan.plan, "fail_safe": p.fail_safe}))
                .collect();
            let changes: Vec<_> = turn
                .applied
                .changes
                .iter()
                .map(|(actor, attribute, old, new)| json!({"actor": actor, "attribute": attribute, "from": old, "to": new}))
                .collect();
            let _ = writeln!(
                out,
                "{}",
                json!({"turn": turn.turn, "plans": planned, "summary": turn.summary,
                       "changes": changes, "left": turn.applied.left, "fail_safe": turn.fail_safe})
            );
        }
        if let Some(refusal) = refused
            .read(world.resource::<Messages<StageRefused>>())
            .next()
        {
            eprintln!("error: {}", refusal.why);
            return ExitCode::from(2);
        }
        if let Some(end) = closed
            .read(world.resource::<Messages<StageClosed>>())
            .last()
        {
            let _ = writeln!(
                out,
                "{}",
                json!({"closed": end.stage, "turns": end.turns,
                       "standing": end.scene.actors.iter().map(|a| &a.name).collect::<Vec<_>>(),
                       "fallen": end.scene.fallen.iter().map(|(a, _)| &a.name).collect::<Vec<_>>()})
            );
            ended = true;
        }
        let settled = players.iter().all(|p| {
            world.get::<Mind>(*p).is_some_and(Mind::is_home)
                && world.get::<AwaitingCognition>(*p).is_none()
        });
        if ended && settled {
            return ExitCode::SUCCESS;
        }
    }
    eprintln!("error: the scene did not finish");
    ExitCode::FAILURE
}
