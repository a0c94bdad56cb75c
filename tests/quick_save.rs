//! The window's quick save and load without the window: the `QuickSavePlugin` in a headless app
//! with the real simulation plugins, driven by key presses. `F5` saves into the quick-save
//! folder and says so in the HUD's message; after the town moves on, `F9` brings back exactly
//! that state — new persona entities at the saved tiles, the clock at the saved step, back in
//! real time — and a load that fails changes nothing and says why.
#![cfg(feature = "render")]

use std::collections::BTreeMap;
use std::path::PathBuf;

use bevy::prelude::*;
use bevy_generative_agents::clock::{SimClock, SimSpeed, TimeMode};
use bevy_generative_agents::persona::{Body, Persona};
use bevy_generative_agents::render::{HudToast, QuickSavePlugin};
use bevy_generative_agents::testing::{create_test_app, scripted_client, spawn_default_town};
use bevy_generative_agents::world::TileCoord;

fn temp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("bga-quick-save-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

fn town(save_dir: &std::path::Path) -> App {
    let mut app = create_test_app(scripted_client(1));
    app.init_resource::<ButtonInput<KeyCode>>()
        .add_plugins(QuickSavePlugin::new(save_dir));
    spawn_default_town(&mut app, Some(3), 1).expect("default town");
    app.finish();
    app.cleanup();
    app
}

/// Presses `key` for one frame (no input plugin runs here to clear "just pressed").
fn tap(app: &mut App, key: KeyCode) {
    app.world_mut()
        .resource_mut::<ButtonInput<KeyCode>>()
        .press(key);
    app.update();
    let mut input = app.world_mut().resource_mut::<ButtonInput<KeyCode>>();
    input.release(key);
    input.clear();
}

/// Updates until the HUD's message is not `busy` any more (bounded); returns it.
fn wait_for_outcome(app: &mut App) -> HudToast {
    for _ in 0..2_000 {
        let toast = app.world().resource::<HudToast>().clone();
        if !toast.text.ends_with('…') {
            return toast;
        }
        app.update();
    }
    panic!("no outcome: {:?}", app.world().resource::<HudToast>().text);
}

fn tiles(app: &mut App) -> BTreeMap<String, (Entity, TileCoord)> {
    let mut query = app
        .world_mut()
        .query_filtered::<(Entity, &Name, &Body), With<Persona>>();
    query
        .iter(app.world())
        .map(|(e, n, b)| (n.as_str().to_owned(), (e, b.tile)))
        .collect()
}

#[test]
fn f5_saves_and_f9_brings_the_saved_town_back() {
    let root = temp("roundtrip");
    let save_dir = root.join("quick");
    let mut app = town(&save_dir);

    // Into the morning, so the personas have somewhere to walk afterwards.
    while app.world().resource::<SimClock>().step() < 7 * 360 {
        app.update();
    }
    // Saved between steps: no step runs while the save waits for thoughts.
    app.world_mut().resource_mut::<SimClock>().speed = SimSpeed::Paused;
    tap(&mut app, KeyCode::F5);
    let saved = wait_for_outcome(&mut app);
    let step = app.world().resource::<SimClock>().step();
    assert!(!saved.error, "{}", saved.text);
    assert_eq!(
        saved.text,
        format!("saved to {} at step {step}", save_dir.display())
    );
    assert!(save_dir.join("meta.json").is_file());
    let at_save = tiles(&mut app);

    // The town moves on.
    app.world_mut().resource_mut::<SimClock>().speed = SimSpeed::Max;
    while app.world().resource::<SimClock>().step() < step + 360 {
        app.update();
    }
    let later = tiles(&mut app);
    assert_ne!(
        later.values().map(|(_, t)| *t).collect::<Vec<_>>(),
        at_save.values().map(|(_, t)| *t).collect::<Vec<_>>(),
        "an hour of the morning moves someone"
    );

    // F9: the saved town, in new entities, with the clock at the save's step in real time.
    app.world_mut().resource_mut::<SimClock>().speed = SimSpeed::Paused;
    tap(&mut app, KeyCode::F9);
    let loaded = wait_for_outcome(&mut app);
    assert!(!loaded.error, "{}", loaded.text);
    assert_eq!(
        loaded.text,
        format!("loaded {} at step {step}", save_dir.display())
    );
    let clock = app.world().resource::<SimClock>();
    assert_eq!(clock.step(), step);
    assert_eq!(
        clock.mode,
        TimeMode::Realtime,
        "the window runs in real time"
    );
    assert_eq!(clock.speed, SimSpeed::Paused, "the player's speed is kept");
    let back = tiles(&mut app);
    assert_eq!(
        back.iter().map(|(n, (_, t))| (n, t)).collect::<Vec<_>>(),
        at_save.iter().map(|(n, (_, t))| (n, t)).collect::<Vec<_>>()
    );
    for (name, (entity, _)) in &back {
        assert_ne!(
            Some(entity),
            later.get(name).map(|(e, _)| e),
            "{name} respawned"
        );
        assert!(
            app.world().get_entity(later[name].0).is_err(),
            "old {name} gone"
        );
    }
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn a_failed_quick_load_changes_nothing_and_says_why() {
    let root = temp("failed");
    let save_dir = root.join("never-saved");
    let mut app = town(&save_dir);
    for _ in 0..20 {
        app.update();
    }
    app.world_mut().resource_mut::<SimClock>().speed = SimSpeed::Paused;
    let before = tiles(&mut app);
    let step = app.world().resource::<SimClock>().step();
    tap(&mut app, KeyCode::F9);
    let toast = wait_for_outcome(&mut app);
    assert!(toast.error);
    assert!(
        toast.text.starts_with("load failed: ") && toast.text.contains("meta.json"),
        "{}",
        toast.text
    );
    assert_eq!(tiles(&mut app), before, "same entities, same tiles");
    let clock = app.world().resource::<SimClock>();
    assert_eq!(clock.step(), step);
    assert_eq!(
        clock.mode,
        TimeMode::Lockstep,
        "a failed load leaves the clock alone"
    );
    let _ = std::fs::remove_dir_all(&root);
}
