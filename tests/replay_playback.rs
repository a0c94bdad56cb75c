//! Playing a real run's movement log back in an app with no model: `smallville run` (scripted
//! backend) writes the log, then `MinimalPlugins` + the clock + the `ReplayPlugin` play it, and
//! every step the actors' `Body` and `ActionView` are compared with the log replayed on its own,
//! and their `RecordedBubble`s with the run record's group lines of that step and the few before.

use std::collections::BTreeMap;
use std::sync::OnceLock;
use std::time::Duration;

mod common;

use bevy::prelude::*;
use bevy::time::TimeUpdateStrategy;
use bevy_generative_agents::clock::{ClockPlugin, SimClock, SimSpeed, TimeMode};
use bevy_generative_agents::output::record::{Happened, RecordLine, read_record};
use bevy_generative_agents::output::replay_bubbles::bubble_hold_steps;
use bevy_generative_agents::output::{
    BubbleKind, CheckedReplay, MovementReplay, PersonaFrame, RecordedBubble, ReplayActor,
    ReplayBubbles, ReplayPlayback, ReplayPlugin, load_replay,
};
use bevy_generative_agents::persona::{ActionView, Body, Mind, Persona};
use bevy_generative_agents::settings::AgentSettings;
use common::scripted_run;

/// One run shared by the tests: 3 personas from midnight to 12:30, so the log holds the
/// night's stillness, the morning's walks, the first conversation (at 12:02 with seed 1) and
/// the three at lunch in the café talking as a group (from 12:14). It is validated and read
/// into memory with its record, and its folder removed.
fn run() -> &'static (CheckedReplay, Vec<RecordLine>) {
    static RUN: OnceLock<(CheckedReplay, Vec<RecordLine>)> = OnceLock::new();
    RUN.get_or_init(|| {
        let root = std::env::temp_dir().join(format!("bga-replay-playback-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let out = root.join("run");
        scripted_run(12.5, 3, 1, &out);
        let checked = load_replay(&out, None);
        let record = read_record(out.join("record.jsonl"));
        let _ = std::fs::remove_dir_all(&root);
        match (checked, record) {
            (Ok(checked), Ok(record)) => (checked, record),
            (Err(err), _) => panic!("the run's log is valid: {err}"),
            (_, Err(err)) => panic!("the run's record is valid: {err}"),
        }
    })
}

fn checked() -> &'static CheckedReplay {
    &run().0
}

/// The run record's bubbles, as the replay schedules them.
fn bubbles() -> ReplayBubbles {
    ReplayBubbles::from_record(&run().1)
}

fn replay_app(checked: &CheckedReplay, speed: SimSpeed) -> App {
    let playback = ReplayPlayback::new("run", checked.log.clone(), checked.sec_per_step)
        .expect("a playable log");
    let mut app = App::new();
    app.add_plugins(MinimalPlugins)
        .insert_resource(TimeUpdateStrategy::ManualDuration(Duration::from_secs(1)))
        .insert_resource(
            SimClock::default()
                .with_mode(TimeMode::Realtime)
                .with_speed(speed),
        )
        .add_plugins((ClockPlugin::default(), ReplayPlugin))
        .insert_resource(playback)
        // The run folder is gone: the record read before is handed over.
        .insert_resource(bubbles());
    // Whole real seconds per update (virtual time caps a frame at 250 ms by default).
    app.world_mut()
        .resource_mut::<Time<Virtual>>()
        .set_max_delta(Duration::from_secs(2));
    app
}

/// Every actor's frame, by name, read back from the components the renderer draws.
fn shown(app: &mut App) -> BTreeMap<String, PersonaFrame> {
    let mut query = app
        .world_mut()
        .query_filtered::<(&Name, &Body, &ActionView), (With<Persona>, With<ReplayActor>)>();
    query
        .iter(app.world())
        .map(|(name, body, view)| {
            (
                name.as_str().to_owned(),
                PersonaFrame::from_components(body, view),
            )
        })
        .collect()
}

/// Every actor's recorded bubble, by name: kind, text and step.
fn recorded(app: &mut App) -> BTreeMap<String, (BubbleKind, String, u64)> {
    let mut query = app
        .world_mut()
        .query_filtered::<(&Name, &RecordedBubble), With<ReplayActor>>();
    query
        .iter(app.world())
        .map(|(name, b)| (name.as_str().to_owned(), (b.kind, b.text.clone(), b.step)))
        .collect()
}

#[test]
fn every_step_shows_exactly_the_logs_frame_and_the_end_holds() {
    let checked = checked();
    let lines = &checked.log.lines;
    assert_eq!(lines.len(), 4500, "12.5 h of 10 s steps");
    assert!(checked.check.moves > 20, "the morning has walks");
    let sps = i64::from(checked.sec_per_step.expect("the run left a save"));
    assert_eq!(sps, 10);

    let mut app = replay_app(checked, SimSpeed::Paused);
    // Startup shows the first line; the paused clock takes no step.
    app.update();
    let mut expected = MovementReplay::new();
    let mut tiles_changed = 0;
    let mut chat_frames = 0;
    // Paused from the start: bubbles are held as long as at 1×.
    let hold = bubble_hold_steps(
        SimSpeed::X1,
        AgentSettings::default().steps_per_second_at_1x,
    )
    .expect("a hold at 1x");
    let schedule = bubbles();
    let mut bubble_frames = 0;
    // The first group line said by a persona, as the record has it.
    let (first_step, first_speaker, first_text) = run()
        .1
        .iter()
        .find_map(|line| match &line.what {
            Happened::GroupLine {
                persona: Some(p),
                text,
                ..
            } => Some((line.step, p.clone(), text.clone())),
            _ => None,
        })
        .expect("the café talks as a group at lunch");
    for (k, line) in lines.iter().enumerate() {
        if k > 0 {
            app.world_mut().resource_mut::<SimClock>().request_step();
            app.update();
        }
        let before = expected.frames().clone();
        expected.apply(line).expect("valid line");
        assert_eq!(
            &shown(&mut app),
            expected.frames(),
            "line {} (step {})",
            k + 1,
            line.step
        );
        let clock = app.world().resource::<SimClock>();
        assert_eq!(
            clock.step(),
            line.step + 1,
            "the clock is one step past the line"
        );
        assert_eq!(clock.now(), line.time + chrono::Duration::seconds(sps));
        let playback = app.world().resource::<ReplayPlayback>();
        assert_eq!(playback.lines_applied(), k + 1);
        assert_eq!(playback.finished(), k + 1 == lines.len());
        // Walking animates from the previous tile: it is the tile before this step.
        let mut query = app
            .world_mut()
            .query_filtered::<(&Name, &Body), With<ReplayActor>>();
        for (name, body) in query.iter(app.world()) {
            let was = before.get(name.as_str()).map_or(body.tile, |f| f.tile);
            assert_eq!(body.previous_tile, was, "{name} at line {}", k + 1);
            if was != body.tile {
                tiles_changed += 1;
            }
        }
        // A chat in the log is a chat the bubbles play: lines and a partner.
        let mut views = app
            .world_mut()
            .query_filtered::<(&Name, &ActionView), With<ReplayActor>>();
        for (name, view) in views.iter(app.world()) {
            if !view.chat.is_empty() {
                chat_frames += 1;
                let partner = view.chatting_with.as_deref().expect("a partner");
                assert!(
                    view.chat.iter().any(|(speaker, _)| speaker == partner),
                    "{name} chats with {partner}, who speaks"
                );
            }
        }
        // The record's bubbles of this step and the few before, over their speakers.
        let bubbles = recorded(&mut app);
        let scheduled: BTreeMap<String, (BubbleKind, String, u64)> = schedule
            .visible_at(line.step, hold)
            .into_iter()
            .map(|(who, b)| (who.to_owned(), (b.kind, b.text.clone(), b.step)))
            .collect();
        assert_eq!(bubbles, scheduled, "line {} (step {})", k + 1, line.step);
        if !bubbles.is_empty() {
            bubble_frames += 1;
        }
        if line.step + 1 == first_step {
            assert!(bubbles.is_empty(), "no bubble before the first group line");
        }
        if line.step == first_step {
            // At its step, the first line is in its speaker's bubble, word for word.
            let (kind, text, step) = bubbles.get(&first_speaker).unwrap_or_else(|| {
                panic!("{first_speaker}'s bubble at step {first_step}: {bubbles:?}")
            });
            assert_eq!(
                (*kind, *step),
                (BubbleKind::Group, first_step),
                "{bubbles:?}"
            );
            // Unless a later line of the same step replaced it (the three greet at once).
            let said_then: Vec<&str> = run()
                .1
                .iter()
                .filter(|l| l.step == first_step)
                .filter_map(|l| match &l.what {
                    Happened::GroupLine {
                        persona: Some(p),
                        text,
                        ..
                    } if *p == first_speaker => Some(text.as_str()),
                    _ => None,
                })
                .collect();
            assert_eq!(said_then.last(), Some(&text.as_str()), "{said_then:?}");
            assert!(said_then.contains(&first_text.as_str()));
        }
    }
    assert_eq!(tiles_changed, checked.check.moves, "every move was shown");
    assert!(chat_frames > 0, "the noon conversation was shown");
    assert!(
        bubble_frames > 10,
        "the lunch talk was shown in bubbles: {bubble_frames} frames"
    );
    assert_eq!(&shown(&mut app), &checked.log.final_frames);

    // Past the end: steps asked for are not taken and the last frame holds.
    for speed in [SimSpeed::Paused, SimSpeed::X32] {
        app.world_mut().resource_mut::<SimClock>().speed = speed;
        app.world_mut().resource_mut::<SimClock>().request_step();
        app.update();
        let clock = app.world().resource::<SimClock>();
        assert_eq!(clock.step(), lines[lines.len() - 1].step + 1);
        assert_eq!(clock.speed, SimSpeed::Paused, "the clock stops at the end");
        assert_eq!(&shown(&mut app), &checked.log.final_frames);
    }

    // Display-only personas: no mind, and nothing but the replay moved them.
    let mut minds = app.world_mut().query_filtered::<&Mind, With<ReplayActor>>();
    let minds: Vec<bool> = minds.iter(app.world()).map(Mind::is_home).collect();
    assert_eq!(minds, vec![false; 3]);
}

#[test]
fn speeds_take_as_many_log_lines_per_second_as_the_game_takes_steps() {
    let checked = checked();
    for (speed, per_second) in [(SimSpeed::X1, 1), (SimSpeed::X4, 4), (SimSpeed::X32, 32)] {
        let mut app = replay_app(checked, speed);
        app.update();
        let mut applied = app.world().resource::<ReplayPlayback>().lines_applied();
        for _ in 0..5 {
            app.update();
            let now = app.world().resource::<ReplayPlayback>().lines_applied();
            assert_eq!(now - applied, per_second, "{speed:?}: one real second");
            applied = now;
            let frames = shown(&mut app);
            let playback = app.world().resource::<ReplayPlayback>();
            assert_eq!(&frames, playback.frames());
        }
    }
}
