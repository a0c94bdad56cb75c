//! The plugins in a headless app: the default town, its personas, the clock and the Execute
//! stage, driven exactly as a game or batch run drives them.

use bevy::ecs::schedule::{LogLevel, ScheduleBuildSettings};
use bevy::prelude::*;
use bevy_generative_agents::clock::{
    AgentSystems, SimClock, SimSpeed, SimStep, StepCompleted, TimeMode,
};
use bevy_generative_agents::persona::{ActionView, Body, Mind, Persona};
use bevy_generative_agents::testing::{create_test_app, scripted_client, spawn_default_town};
use bevy_generative_agents::world::{ActionAddress, TileCoord, TileEvent, TownMap};

/// A town whose personas only execute (no thinking), so a test can set actions by hand.
fn execute_only_town(personas: Option<usize>) -> (App, Vec<Entity>) {
    use bevy::time::TimeUpdateStrategy;
    use bevy_generative_agents::GenerativeAgentsPlugins;
    use bevy_generative_agents::cognition::{CognitionPlugin, ExecutePlugin};
    let mut app = App::new();
    app.add_plugins(MinimalPlugins)
        .insert_resource(TimeUpdateStrategy::ManualDuration(
            std::time::Duration::from_millis(16),
        ))
        .insert_resource(scripted_client(1))
        .insert_resource(
            SimClock::default()
                .with_mode(TimeMode::Lockstep)
                .with_speed(SimSpeed::Max),
        )
        .add_plugins(GenerativeAgentsPlugins.build().disable::<CognitionPlugin>())
        .add_plugins(ExecutePlugin);
    let entities = spawn_default_town(&mut app, personas, 1).expect("default town loads");
    app.finish();
    app.cleanup();
    (app, entities)
}

fn town_app(personas: Option<usize>) -> (App, Vec<Entity>) {
    let mut app = create_test_app(scripted_client(1));
    let entities = spawn_default_town(&mut app, personas, 1).expect("default town loads");
    app.finish();
    app.cleanup();
    (app, entities)
}

#[test]
fn default_personas_spawn_at_their_spawn_points_with_minds() {
    let (mut app, entities) = town_app(None);
    assert_eq!(entities.len(), 5);
    let map = app.world().resource::<TownMap>().clone();
    let mut query = app
        .world_mut()
        .query_filtered::<(&Name, &Body, &Mind, &ActionView), With<Persona>>();
    let mut seen = 0;
    for (name, body, mind, view) in query.iter(app.world()) {
        let state = mind.get().expect("mind is home before any thinking");
        assert_eq!(state.scratch.name, name.as_str());
        assert_eq!(state.scratch.importance_trigger_curr, 150);
        // Every persona knows the whole town, including its own home.
        let sectors = state.spatial.accessible_sectors(map.world_name());
        assert!(sectors.len() >= 8, "{name}: {sectors:?}");
        assert!(map.tile(body.tile).is_some());
        assert_eq!(view.living_area, state.scratch.living_area);
        seen += 1;
    }
    assert_eq!(seen, 5);
    let mira = app
        .world_mut()
        .query::<(&Name, &Body)>()
        .iter(app.world())
        .find(|(n, _)| n.as_str() == "Mira Okafor")
        .map(|(_, b)| b.tile);
    assert_eq!(mira, map.spawn_location("okafor-bed"));
}

#[test]
fn the_clock_runs_steps_in_lockstep_at_max_speed() {
    let (mut app, _) = town_app(Some(2));
    app.world_mut().resource_mut::<SimClock>().stop_at_step = Some(360);
    for _ in 0..10_000 {
        if app.world().resource::<SimClock>().finished() {
            break;
        }
        app.update();
    }
    let clock = app.world().resource::<SimClock>();
    assert_eq!(clock.step(), 360);
    assert_eq!(clock.now().to_string(), "2023-02-13 01:00:00");
    assert_eq!(
        clock.speed,
        SimSpeed::Paused,
        "the clock pauses at stop_at_step"
    );
    let completed = app.world().resource::<Messages<StepCompleted>>();
    assert!(!completed.is_empty());
}

#[test]
fn a_realtime_clock_at_1x_takes_one_step_per_second() {
    let (mut app, _) = town_app(Some(1));
    *app.world_mut().resource_mut::<SimClock>() = SimClock::default()
        .with_mode(TimeMode::Realtime)
        .with_speed(SimSpeed::X1);
    // 16 ms per update: 250 updates are 4 s of virtual time.
    for _ in 0..250 {
        app.update();
    }
    let step = app.world().resource::<SimClock>().step();
    assert!((3..=4).contains(&step), "step {step}");
    app.world_mut().resource_mut::<SimClock>().speed = SimSpeed::Paused;
    app.world_mut().resource_mut::<SimClock>().request_step();
    app.update();
    app.update();
    assert_eq!(
        app.world().resource::<SimClock>().step(),
        step + 1,
        "one requested step while paused"
    );
}

#[test]
fn a_persona_walks_to_its_action_address_and_shows_its_events() {
    let (mut app, entities) = execute_only_town(Some(3));
    let map = app.world().resource::<TownMap>().clone();
    let target = "Willowbrook:Riverside Cafe:cafe:cafe counter";
    let counter_tiles = map
        .address_tiles(target)
        .expect("the cafe counter exists")
        .clone();
    let persona = entities[1];
    let name = app
        .world()
        .get::<Name>(persona)
        .unwrap()
        .as_str()
        .to_string();
    {
        let mut view = app.world_mut().get_mut::<ActionView>(persona).unwrap();
        view.address = Some(ActionAddress::parse(target).unwrap());
        view.description = "making coffee".into();
        view.event = Some(TileEvent {
            subject: name.clone(),
            predicate: Some("is".into()),
            object: Some("making coffee".into()),
            description: Some("making coffee".into()),
        });
        view.object_event = Some(TileEvent {
            subject: target.into(),
            predicate: Some("is".into()),
            object: Some("used".into()),
            description: Some("cafe counter is being used".into()),
        });
    }
    app.world_mut().resource_mut::<SimClock>().stop_at_step = Some(400);
    // One requested step per update, so the tile is observed after every single step (at max
    // speed one update may run several steps, depending on the machine's speed).
    app.world_mut().resource_mut::<SimClock>().speed = SimSpeed::Paused;
    let mut previous: Option<TileCoord> = None;
    for _ in 0..10_000 {
        if app.world().resource::<SimClock>().finished() {
            break;
        }
        let before = app.world().resource::<SimClock>().step();
        app.world_mut().resource_mut::<SimClock>().request_step();
        app.update();
        assert!(app.world().resource::<SimClock>().step() <= before + 1);
        let tile = app.world().get::<Body>(persona).unwrap().tile;
        if let Some(prev) = previous {
            let moved = (tile.x - prev.x).abs() + (tile.y - prev.y).abs();
            assert!(moved <= 1, "one tile per step at most");
        }
        previous = Some(tile);
    }
    let body = app.world().get::<Body>(persona).unwrap().clone();
    assert!(body.path_set);
    assert!(body.planned_path.is_empty(), "arrived");
    let near_counter = counter_tiles
        .iter()
        .any(|t| (t.x - body.tile.x).abs() + (t.y - body.tile.y).abs() <= 1);
    assert!(
        near_counter,
        "{name} ended at {:?}, counter at {counter_tiles:?}",
        body.tile
    );
    let map = app.world().resource::<TownMap>();
    let here = map.tile(body.tile).unwrap();
    assert!(
        here.events
            .iter()
            .any(|e| e.subject == name && e.description.as_deref() == Some("making coffee"))
    );
    let object_shown = counter_tiles
        .iter()
        .filter_map(|t| map.tile(*t))
        .any(|tile| {
            tile.events
                .iter()
                .any(|e| e.subject == target && e.predicate.as_deref() == Some("is"))
        });
    assert!(object_shown, "the counter shows it is in use");
}

#[test]
fn the_step_schedule_has_no_ambiguities() {
    let (mut app, _) = town_app(Some(1));
    app.edit_schedule(SimStep, |schedule| {
        schedule.set_build_settings(ScheduleBuildSettings {
            ambiguity_detection: LogLevel::Error,
            ..default()
        });
    });
    app.add_systems(SimStep, (|| {}).in_set(AgentSystems::First));
    app.world_mut().resource_mut::<SimClock>().stop_at_step = Some(3);
    for _ in 0..100 {
        app.update();
    }
    assert_eq!(app.world().resource::<SimClock>().step(), 3);
}
