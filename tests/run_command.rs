//! The headless run command end to end: the files `smallville run` writes, checked line by line
//! against the ECS, and the movement log recorded from a live app whose personas are moved by a
//! test system.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use std::time::Duration;

use bevy::prelude::*;
use bevy::time::TimeUpdateStrategy;
use bevy_generative_agents::clock::{
    AgentSystems, ClockPlugin, SimClock, SimSpeed, SimStep, TimeMode,
};
use bevy_generative_agents::llm::{BackendChoice, UsageReport};
use bevy_generative_agents::output::{
    MovementLine, MovementLog, MovementLogPlugin, MovementReplay, PersonaFrame, RunError,
    RunOptions, RunSummary, parse_movement_log, read_movement_log, run,
};
use bevy_generative_agents::persona::{ActionView, Body, Persona, PersonaPlugin};
use bevy_generative_agents::testing::spawn_default_town;
use bevy_generative_agents::world::{ActionAddress, TileCoord};

/// A fresh folder under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("bga-run-command-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        Self(dir)
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const HOURS: f64 = 16.0;
const STEPS: u64 = 16 * 360;

/// How many times `name`'s chat goes from none to some lines in `lines`.
fn chat_starts(lines: &[MovementLine], name: &str) -> usize {
    let mut chatting = false;
    let mut starts = 0;
    for line in lines {
        if let Some(chat) = line.personas.get(name).and_then(|d| d.chat.as_ref()) {
            if chat.is_some() && !chatting {
                starts += 1;
            }
            chatting = chat.is_some();
        }
    }
    starts
}

fn scripted_run(hours: f64, seed: u64, out: &Path) -> RunOptions {
    RunOptions::new(hours, out)
        .with_backend(BackendChoice::Scripted)
        .with_personas(3)
        .with_seed(seed)
}

/// Replays `lines`, checking that every entry after a persona's first holds only fields that
/// differ from that persona's state so far, and that no entry is empty.
fn replay_checking_minimal_diffs(lines: &[MovementLine]) -> MovementReplay {
    let mut replay = MovementReplay::new();
    for line in lines {
        for (name, delta) in &line.personas {
            assert!(
                !delta.is_empty(),
                "step {}: empty entry for {name}",
                line.step
            );
            let Some(before) = replay.frame(name) else {
                assert_eq!(
                    delta.missing_field(),
                    None,
                    "first entry of {name} is complete"
                );
                continue;
            };
            if let Some(tile) = delta.tile {
                assert_ne!(
                    tile, before.tile,
                    "step {}: {name} tile unchanged",
                    line.step
                );
            }
            if let Some(emoji) = &delta.emoji {
                assert_ne!(*emoji, before.emoji, "step {}: {name} emoji", line.step);
            }
            if let Some(description) = &delta.description {
                assert_ne!(
                    *description, before.description,
                    "step {}: {name}",
                    line.step
                );
            }
            if let Some(chat) = &delta.chat {
                assert_ne!(
                    *chat, before.chat,
                    "step {}: {name} chat unchanged",
                    line.step
                );
            }
        }
        replay.apply(line).expect("valid line");
    }
    replay
}

#[test]
fn a_day_run_writes_a_complete_minimal_reproducible_movement_log() {
    let first = TempDir::new("seed7-a");
    // 16 game hours: the personas sleep, wake, walk to work and talk over lunch.
    let report = run(&scripted_run(HOURS, 7, first.path())).expect("run succeeds");
    assert_eq!(report.steps, STEPS);
    assert_eq!(report.movement_path, first.path().join("movement.jsonl"));

    let log = read_movement_log(&report.movement_path).expect("the log validates");
    assert_eq!(log.lines.len() as u64, STEPS, "one line per step");
    let start = SimClock::default_start();
    for (i, line) in log.lines.iter().enumerate() {
        assert_eq!(line.step, i as u64);
        assert_eq!(line.time, start + chrono::Duration::seconds(10 * i as i64));
    }

    // The first line introduces every persona with every field.
    let names: Vec<&str> = log.lines[0].personas.keys().map(String::as_str).collect();
    assert_eq!(names.len(), 3, "{names:?}");
    assert!(
        log.lines[0]
            .personas
            .values()
            .all(|d| d.missing_field().is_none())
    );
    // Later lines hold only changes, and replaying them ends where the ECS ended.
    let replay = replay_checking_minimal_diffs(&log.lines);
    assert_eq!(replay.frames(), &report.final_frames);
    assert_eq!(log.final_frames, report.final_frames);

    // summary.json names the same personas and the run's facts.
    let summary: RunSummary =
        serde_json::from_str(&std::fs::read_to_string(&report.summary_path).expect("summary.json"))
            .expect("summary parses");
    assert_eq!(
        summary
            .personas
            .keys()
            .map(String::as_str)
            .collect::<Vec<_>>(),
        names
    );
    assert_eq!(summary.run.personas.len(), 3);
    assert_eq!(summary.run.steps, STEPS);
    assert_eq!(summary.run.seed, 7);
    assert_eq!(summary.run.backend, "scripted");
    assert_eq!(summary.run.start, start);
    assert_eq!(summary.run.end, start + chrono::Duration::hours(16));
    assert_eq!(
        report.minds_out, 0,
        "every thought landed before summarising"
    );
    for (name, persona) in &summary.personas {
        assert!(
            persona.memory.is_some_and(|m| m.events > 0),
            "{name}: mind was home and remembers"
        );
        assert!(!persona.days.is_empty(), "{name} planned a day");
        // The log shows a chat for exactly the personas that held conversations, and never
        // more chat starts than conversations.
        let starts = chat_starts(&log.lines, name);
        assert_eq!(
            starts > 0,
            !persona.conversations.is_empty(),
            "{name}: {starts} chats in the log, {} conversations",
            persona.conversations.len()
        );
        assert!(starts <= persona.conversations.len(), "{name}");
        assert!(persona.currently.is_some(), "{name}");
        assert_eq!(persona.final_tile, report.final_frames[name].tile, "{name}");
        for day in &persona.days {
            let minutes: u32 = day.f_daily_schedule.iter().map(|i| i.minutes).sum();
            assert_eq!(minutes, day.schedule_minutes, "{name}");
        }
    }

    assert!(
        summary
            .personas
            .values()
            .any(|p| !p.conversations.is_empty()),
        "a conversation happened by 16:00, so the log shows a chat"
    );
    for name in &names {
        let moves = log.lines[1..]
            .iter()
            .filter(|l| l.personas.get(*name).is_some_and(|d| d.tile.is_some()))
            .count();
        assert!(moves > 10, "{name} walked ({moves} tile changes)");
    }

    // usage.json is the client's accounting, totals consistent with the kinds.
    let usage: UsageReport =
        serde_json::from_str(&std::fs::read_to_string(&report.usage_path).expect("usage.json"))
            .expect("usage parses");
    assert_eq!(usage, report.usage);
    assert_eq!(usage.backend, "scripted");
    assert!(usage.totals.calls > 0 && !usage.kinds.is_empty());
    assert_eq!(
        usage.totals.calls,
        usage.kinds.values().map(|k| k.calls).sum::<u64>()
    );

    // No temporary files are left next to the outputs.
    let mut files: Vec<String> = std::fs::read_dir(first.path())
        .expect("out dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    // (The final save and the report are written too: issue 6; the report's images folder
    // only with the `charts` feature.)
    let mut expected = vec![
        "movement.jsonl",
        "record.jsonl",
        "report.html",
        "report.json",
        "save",
        "summary.json",
        "usage.json",
    ];
    if cfg!(feature = "charts") {
        expected.insert(2, "report");
    }
    assert_eq!(files, expected);

    // The same seed gives the same bytes.
    let second = TempDir::new("seed7-b");
    let again = run(&scripted_run(HOURS, 7, second.path())).expect("second run");
    let a = std::fs::read(&report.movement_path).expect("first log");
    let b = std::fs::read(&again.movement_path).expect("second log");
    assert!(a == b, "same seed, different movement.jsonl");
    let record = |dir: &std::path::Path| std::fs::read(dir.join("record.jsonl")).expect("record");
    assert!(
        record(first.path()) == record(second.path()),
        "same seed, different record.jsonl"
    );
}

#[test]
fn another_seed_and_a_half_hour_still_give_a_valid_log() {
    let dir = TempDir::new("seed8");
    let report = run(&scripted_run(0.5, 8, dir.path())).expect("run succeeds");
    let log = read_movement_log(&report.movement_path).expect("valid");
    assert_eq!(log.lines.len(), 180);
    assert_eq!(log.final_frames, report.final_frames);
}

#[test]
fn output_errors_name_the_file() {
    let dir = TempDir::new("errors");
    let blocker = dir.path().join("not-a-dir");
    std::fs::write(&blocker, "x").expect("file");
    let err = run(&scripted_run(1.0, 1, &blocker.join("out"))).expect_err("parent is a file");
    assert!(matches!(err, RunError::Io { .. }), "{err:?}");
    assert!(err.to_string().contains("not-a-dir"), "{err}");

    let mut bad_map = scripted_run(1.0, 1, &dir.path().join("out"));
    bad_map.map = Some(dir.path().join("missing.tmx"));
    let err = run(&bad_map).expect_err("no map");
    assert!(matches!(err, RunError::Setup(_)), "{err:?}");
    assert!(err.to_string().contains("missing.tmx"), "{err}");
    assert!(
        !dir.path().join("out").exists(),
        "a run that cannot start creates nothing"
    );

    let err = run(&scripted_run(0.0, 1, &dir.path().join("zero"))).expect_err("zero hours");
    assert!(matches!(err, RunError::Invalid(_)));
}

/// Moves persona `i` one tile right every `i + 2` steps, flips its emoji every 30 steps, and
/// gives persona 0 a chat from step 40 to step 60 that grows by a line every 5 steps.
fn puppeteer(clock: Res<SimClock>, mut personas: Query<(&Name, &mut Body, &mut ActionView)>) {
    let step = clock.step();
    let mut sorted: Vec<_> = personas.iter_mut().collect();
    sorted.sort_by(|a, b| a.0.as_str().cmp(b.0.as_str()));
    for (i, (_, body, view)) in sorted.into_iter().enumerate() {
        let (mut body, mut view) = (body, view);
        let period = i as u64 + 2;
        if step > 0 && step.is_multiple_of(period) {
            let tile = body.tile;
            body.tile = TileCoord::new(tile.x + 1, tile.y);
        }
        let emoji = if (step / 30).is_multiple_of(2) {
            "🙂"
        } else {
            "🚶"
        };
        if view.emoji != emoji {
            view.emoji = emoji.to_owned();
            view.description = format!("phase {}", step / 30);
            view.address = ActionAddress::parse("Willowbrook:Maple Park:park").ok();
        }
        if i == 0 {
            let lines = if (40..60).contains(&step) {
                (step - 40) / 5 + 1
            } else {
                0
            };
            if view.chat.len() != lines as usize {
                view.chat = (0..lines)
                    .map(|n| ("speaker".to_owned(), format!("line {n}")))
                    .collect();
            }
        }
    }
}

#[test]
fn the_plugin_records_each_step_after_the_stages_ran() {
    // Only the clock, the persona types and the log: no cognition moves anyone but the test.
    let mut app = App::new();
    app.add_plugins((MinimalPlugins, ClockPlugin::default(), PersonaPlugin))
        .insert_resource(TimeUpdateStrategy::ManualDuration(Duration::from_millis(
            16,
        )))
        .insert_resource(
            SimClock::default()
                .with_mode(TimeMode::Lockstep)
                .with_speed(SimSpeed::Max),
        )
        .add_plugins(MovementLogPlugin)
        .add_systems(SimStep, puppeteer.in_set(AgentSystems::First))
        .insert_resource(MovementLog::in_memory());
    spawn_default_town(&mut app, Some(3), 1).expect("town");
    app.finish();
    app.cleanup();
    app.world_mut().resource_mut::<SimClock>().stop_at_step = Some(100);
    for _ in 0..10_000 {
        if app.world().resource::<SimClock>().finished() {
            break;
        }
        app.update();
    }
    assert_eq!(app.world().resource::<SimClock>().step(), 100);

    let mut query = app
        .world_mut()
        .query_filtered::<(&Name, &Body, &ActionView), With<Persona>>();
    let ecs: BTreeMap<String, PersonaFrame> = query
        .iter(app.world())
        .map(|(n, b, v)| (n.as_str().to_owned(), PersonaFrame::from_components(b, v)))
        .collect();
    let log = app
        .world_mut()
        .remove_resource::<MovementLog>()
        .expect("log");
    let bytes = log.into_bytes().expect("in memory");
    let data = parse_movement_log(bytes.as_slice()).expect("valid log");
    assert_eq!(data.lines.len(), 100);
    let replay = replay_checking_minimal_diffs(&data.lines);
    assert_eq!(replay.frames(), &ecs, "the replay ends on the ECS state");

    // Hand-computed entries. The first persona (by name) moves every 2 steps, the second every
    // 3, the third every 4: step 6 changes the first two only.
    let names: Vec<String> = ecs.keys().cloned().collect();
    let at = |step: usize| &data.lines[step].personas;
    assert_eq!(at(6).len(), 2);
    assert!(at(6).contains_key(&names[0]) && at(6).contains_key(&names[1]));
    assert_eq!(
        at(6)[&names[0]].tile.map(|t| t.x - ecs[&names[0]].tile.x),
        Some(3 - 49)
    );
    // Step 1 changes nobody.
    assert!(at(1).is_empty());
    // Step 30: everyone's emoji and description change, and nothing else for the third.
    assert_eq!(at(30).len(), 3);
    let third = &at(30)[&names[2]];
    assert_eq!(third.emoji.as_deref(), Some("🚶"));
    assert_eq!(
        third.description.as_deref(),
        Some("phase 1 @ Willowbrook:Maple Park:park")
    );
    assert_eq!((third.tile, third.chat.as_ref()), (None, None));
    // The chat starts at 40, grows at 45, and ends (null) at 60.
    assert_eq!(
        at(40)[&names[0]].chat,
        Some(Some(vec![("speaker".to_owned(), "line 0".to_owned())]))
    );
    assert_eq!(
        at(45)[&names[0]]
            .chat
            .as_ref()
            .and_then(|c| c.as_ref())
            .map(Vec::len),
        Some(2)
    );
    assert_eq!(at(60)[&names[0]].chat, Some(None));
    let text = String::from_utf8(bytes).expect("utf8");
    let line_60 = text.lines().nth(60).expect("line 60");
    assert!(line_60.contains(r#""chat":null"#), "{line_60}");
}
