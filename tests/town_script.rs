//! The offline town script (a deterministic scripted backend, not a model) drives the whole
//! cognitive loop without a single retry or fail-safe, and it is what the configuration's
//! `scripted`/`auto` backends run.

use std::collections::BTreeMap;

use bevy::prelude::*;
use bevy::tasks::block_on;
use bevy_generative_agents::clock::SimClock;
use bevy_generative_agents::cognition::prompts::WakeUpHour;
use bevy_generative_agents::llm::{LlmClient, LlmConfig, build_client};
use bevy_generative_agents::persona::{Diary, Persona, default_personas_dir, load_persona_sheets};
use bevy_generative_agents::prompt::{PromptContext, PromptLibrary, run_prompt};
use bevy_generative_agents::settings::AgentSettings;
use bevy_generative_agents::testing::{create_test_app, scripted_client, spawn_default_town};

/// Runs the first `personas` of the default town for `hours` game hours.
fn run_town(personas: usize, seed: u64, hours: u64) -> App {
    let mut app = create_test_app(scripted_client(seed));
    spawn_default_town(&mut app, Some(personas), seed).expect("default town loads");
    app.finish();
    app.cleanup();
    let steps = hours * 360;
    app.world_mut().resource_mut::<SimClock>().stop_at_step = Some(steps);
    let mut frames = 0u64;
    while !app.world().resource::<SimClock>().finished() {
        app.update();
        frames += 1;
        assert!(
            frames < steps * 50,
            "the run stalled at step {}",
            app.world().resource::<SimClock>().step()
        );
    }
    app
}

#[test]
fn a_day_and_a_morning_on_the_script_needs_no_fail_safe() {
    // 30 hours: the first day, then the second morning's identity revision and planning.
    let mut app = run_town(3, 11, 30);
    let usage = app.world().resource::<LlmClient>().usage();
    let troubled: BTreeMap<&String, (u64, u64)> = usage
        .kinds
        .iter()
        .filter(|(_, k)| k.fail_safes > 0 || k.retries > 0)
        .map(|(kind, k)| (kind, (k.retries, k.fail_safes)))
        .collect();
    assert!(
        troubled.is_empty(),
        "(retries, fail-safes) by kind: {troubled:?}"
    );
    // The script's answers read like words: none is ever judged garbled.
    assert_eq!(usage.totals.garbled, 0, "{usage:?}");
    for kind in [
        "wake_up_hour",
        "daily_plan",
        "hourly_schedule",
        "task_decomposition",
        "action_sector",
        "action_arena",
        "action_object",
        "event_poignancy",
        "decide_to_talk",
        "next_utterance",
        "conversation_summary",
        "focal_points",
        "insights_with_evidence",
        "revise_identity_currently",
        "revise_identity_daily_req",
    ] {
        assert!(usage.kind(kind).calls > 0, "{kind} never ran: {usage:?}");
    }

    let mut diaries = app
        .world_mut()
        .query_filtered::<(&Name, &Diary), With<Persona>>();
    let mut conversations = 0;
    for (name, diary) in diaries.iter(app.world()) {
        conversations += diary.conversations.len();
        assert!(diary.reflections >= 1, "{name} never reflected");
        let first = diary.days.first().expect("a planned day");
        let distinct: std::collections::BTreeSet<&String> = first
            .hourly_schedule
            .iter()
            .map(|item| &item.task)
            .collect();
        assert!(distinct.len() >= 5, "{name}: {:?}", first.hourly_schedule);
        for conversation in &diary.conversations {
            assert!(
                (3..=6).contains(&conversation.lines),
                "{name}: {conversation:?}"
            );
        }
    }
    assert!(conversations >= 2, "nobody talked");
}

#[test]
fn the_configured_scripted_backend_is_the_town_script() {
    let client = build_client(&LlmConfig::default()).expect("offline client");
    assert_eq!(client.backend_name(), "scripted");
    let ctx = PromptContext::new(client, PromptLibrary::default());
    let sheet = load_persona_sheets(default_personas_dir())
        .expect("sheets")
        .into_iter()
        .find(|s| s.first_name == "Sam")
        .expect("Sam");
    let outcome = block_on(run_prompt(
        &ctx,
        &WakeUpHour {
            identity: sheet
                .to_scratch(&AgentSettings::default())
                .identity_summary(),
            lifestyle: sheet.lifestyle.clone(),
            first_name: sheet.first_name.clone(),
            fail_safe_hour: 8,
        },
    ));
    assert_eq!((outcome.value, outcome.fail_safe), (9, false));
}
