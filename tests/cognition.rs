//! The whole cognitive loop, headless, over game days: three personas of the default town on
//! the offline town script (a deterministic scripted backend, not a model) in Lockstep.
//!
//! Invariants are checked at **every** step by a system in `AgentSystems::First`; the
//! outcomes of the days (sleep, schedules, places, conversations, reflections, identity
//! revision) are checked at the end from each persona's `Diary` and mind.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use bevy::prelude::*;
use bevy_generative_agents::clock::{AgentSystems, SimClock, SimStep};
use bevy_generative_agents::cognition::prompts::MINUTES_PER_DAY;
use bevy_generative_agents::llm::{FaultyBackend, LlmClient};
use bevy_generative_agents::memory::NodeKind;
use bevy_generative_agents::persona::{
    ActionView, Body, ChatPartners, ChattingWith, Diary, Mind, Persona, is_sleep_text,
};
use bevy_generative_agents::testing::{
    create_test_app, scripted_client, spawn_default_town, town_script,
};
use bevy_generative_agents::world::{ActionAddress, TownMap};
use chrono::{Datelike, Timelike};

/// Steps at which each pair (sorted names) started a chat.
type ChatStarts = BTreeMap<(String, String), Vec<u64>>;

/// What the per-step checker saw.
#[derive(Resource, Default, Clone)]
struct Watch {
    violations: Arc<Mutex<Vec<String>>>,
    /// A digest of every step: (step, name, tile, description) lines.
    trace: Arc<Mutex<Vec<String>>>,
    /// Per persona: steps seen asleep and awake.
    sleep: Arc<Mutex<BTreeMap<String, (u64, u64)>>>,
    /// Step at which each pair's chat started (pair sorted), to check the cool-down.
    chat_starts: Arc<Mutex<ChatStarts>>,
    /// Steps at which some persona was linked to a chat partner entity.
    linked_steps: Arc<Mutex<u64>>,
}

fn resolves(map: &TownMap, address: &ActionAddress) -> bool {
    let Some(place) = address.place() else {
        return true; // `<persona>` and `<waiting>` need no place
    };
    map.address_tiles(&place.to_string())
        .is_some_and(|t| !t.is_empty())
}

/// A persona's chat links, as game code would query them.
type Links<'a> = (
    Entity,
    &'a Name,
    Option<&'a ChattingWith>,
    Option<&'a ChatPartners>,
);

fn check_invariants(
    clock: Res<SimClock>,
    map: Res<TownMap>,
    watch: Res<Watch>,
    personas: Query<(&Name, &Mind, &Body, &ActionView), With<Persona>>,
    links: Query<Links, With<Persona>>,
) {
    let step = clock.step();
    let now = clock.now();
    let mut violations = Vec::new();
    let mut trace = Vec::new();
    let mut by_name: BTreeMap<String, (&Mind, &ActionView)> = BTreeMap::new();
    for (name, mind, body, view) in &personas {
        by_name.insert(name.as_str().to_string(), (mind, view));
        trace.push(format!(
            "{step} {name} {:?} {} {}",
            body.tile,
            view.description,
            view.chat.len()
        ));
        let Some(state) = mind.get() else { continue };
        let s = &state.scratch;
        if !s.f_daily_schedule.is_empty() {
            let total: u32 = s.f_daily_schedule.iter().map(|i| i.minutes).sum();
            if total != MINUTES_PER_DAY {
                violations.push(format!("step {step}: {name}'s schedule sums to {total}"));
            }
        }
        if let Some(address) = &s.act_address
            && !resolves(&map, address)
        {
            violations.push(format!(
                "step {step}: {name}'s address {address} has no tiles"
            ));
        }
        if let Some(partner) = &s.chatting_with
            && s.act_start_time == Some(now)
        {
            if now.hour() == 23 {
                violations.push(format!("step {step}: {name} started a chat at 23:00"));
            }
            let mut pair = [name.as_str().to_string(), partner.clone()];
            pair.sort();
            let mut starts = watch.chat_starts.lock().unwrap_or_else(|e| e.into_inner());
            let list = starts
                .entry((pair[0].clone(), pair[1].clone()))
                .or_default();
            if list.last() != Some(&step) {
                list.push(step);
            }
        }
        let mut sleep = watch.sleep.lock().unwrap_or_else(|e| e.into_inner());
        let entry = sleep.entry(name.as_str().to_string()).or_default();
        if is_sleep_text(&view.description) {
            entry.0 += 1;
        } else if !view.description.is_empty() {
            entry.1 += 1;
        }
    }
    // The entity links follow the names: a chatting persona points at its partner, who lists it.
    let mut linked = false;
    for (entity, name, link, partners) in &links {
        let Some((_, view)) = by_name.get(name.as_str()) else {
            continue;
        };
        let partner_name = link
            .and_then(|l| links.get(l.partner()).ok())
            .map(|p| p.1.as_str());
        if partner_name != view.chatting_with.as_deref() {
            violations.push(format!(
                "step {step}: {name} chats with {:?} but is linked to {partner_name:?}",
                view.chatting_with
            ));
        }
        if let Some(link) = link {
            linked = true;
            let listed = links
                .get(link.partner())
                .ok()
                .and_then(|p| p.3)
                .is_some_and(|p| p.entities().contains(&entity));
            if !listed {
                violations.push(format!("step {step}: {name}'s partner does not list it"));
            }
        }
        for partner in partners.map(ChatPartners::entities).unwrap_or_default() {
            if links
                .get(*partner)
                .ok()
                .and_then(|p| p.2)
                .map(ChattingWith::partner)
                != Some(entity)
            {
                violations.push(format!(
                    "step {step}: {name} lists a partner not linked to it"
                ));
            }
        }
    }
    if linked {
        *watch.linked_steps.lock().unwrap_or_else(|e| e.into_inner()) += 1;
    }
    // Nobody chats with a sleeping persona.
    for (name, (_, view)) in &by_name {
        if let Some(partner) = &view.chatting_with
            && let Some((_, other)) = by_name.get(partner)
            && is_sleep_text(&other.description)
        {
            violations.push(format!("step {step}: {name} chats with sleeping {partner}"));
        }
    }
    watch
        .violations
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .extend(violations);
    // Query order depends on archetypes (a persona thinking carries extra components).
    trace.sort();
    watch
        .trace
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .extend(trace);
}

fn run_town(client: LlmClient, personas: usize, seed: u64, hours: u64) -> (App, Watch) {
    let mut app = create_test_app(client);
    let watch = Watch::default();
    app.insert_resource(watch.clone());
    // At the start of a step every thought of the previous one has landed (Lockstep).
    app.add_systems(SimStep, check_invariants.in_set(AgentSystems::First));
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
    assert_eq!(app.world().resource::<SimClock>().step(), steps);
    (app, watch)
}

fn diaries(
    app: &mut App,
) -> BTreeMap<String, (Diary, Box<bevy_generative_agents::persona::MindState>)> {
    let mut out = BTreeMap::new();
    let mut query = app
        .world_mut()
        .query_filtered::<(&Name, &Diary, &Mind), With<Persona>>();
    for (name, diary, mind) in query.iter(app.world()) {
        let state = mind
            .get()
            .cloned()
            .expect("every mind is home at the end of a Lockstep run");
        out.insert(name.as_str().to_string(), (diary.clone(), Box::new(state)));
    }
    out
}

#[test]
fn three_personas_live_two_days() {
    let (mut app, watch) = run_town(scripted_client(7), 3, 7, 48);
    let violations = watch.violations.lock().unwrap().clone();
    assert!(
        violations.is_empty(),
        "{} violations, first: {:?}",
        violations.len(),
        &violations[..violations.len().min(5)]
    );

    let linked_steps = *watch.linked_steps.lock().unwrap();
    assert!(linked_steps > 0, "no chat ever linked two persona entities");

    let people = diaries(&mut app);
    assert_eq!(people.len(), 3);
    let sleep = watch.sleep.lock().unwrap().clone();
    for (name, (diary, mind)) in &people {
        eprintln!(
            "{name}: days {:?}, conversations {}, reflections {}, revisions {:?}, thoughts {}, events {}, chats {}, currently {:?}",
            diary
                .days
                .iter()
                .map(|d| (
                    d.date,
                    d.wake_up_hour,
                    d.arenas_visited.len(),
                    d.schedule.len()
                ))
                .collect::<Vec<_>>(),
            diary.conversations.len(),
            diary.reflections,
            diary.identity_revisions,
            mind.associative.count(NodeKind::Thought),
            mind.associative.count(NodeKind::Event),
            mind.associative.count(NodeKind::Chat),
            mind.scratch.currently,
        );
        let (asleep, awake) = sleep.get(name).copied().unwrap_or_default();
        assert!(
            asleep > 1000 && awake > 1000,
            "{name} slept {asleep} and was awake {awake} steps"
        );
        assert_eq!(
            diary.days.len(),
            2,
            "{name}: {:?}",
            diary.days.iter().map(|d| d.date).collect::<Vec<_>>()
        );
        for day in &diary.days {
            let total: u32 = day.schedule.iter().map(|i| i.minutes).sum();
            assert_eq!(total, MINUTES_PER_DAY, "{name} {:?}", day.date);
            assert!(
                day.schedule
                    .iter()
                    .filter(|i| i.task.ends_with(')'))
                    .count()
                    >= 5,
                "{name} followed a decomposed schedule on {:?}: {:?}",
                day.date,
                day.schedule
            );
            assert!(
                (4..=11).contains(&day.wake_up_hour),
                "{name} woke at {}",
                day.wake_up_hour
            );
            assert!(
                day.arenas_visited.len() >= 4,
                "{name} visited {:?} on {:?}",
                day.arenas_visited,
                day.date
            );
        }
        assert!(diary.reflections >= 1, "{name} never reflected");
        assert_eq!(
            diary.identity_revisions.len(),
            1,
            "{name} revises its identity on the second day"
        );
        assert!(mind.associative.count(NodeKind::Thought) > 2);
        assert!(mind.associative.count(NodeKind::Event) > 10);
    }

    // At least one conversation each day, between two personas, both sides recorded.
    for day in 13..=14 {
        let held: Vec<_> = people
            .values()
            .flat_map(|(d, _)| d.conversations.iter())
            .filter(|c| c.start.date().day() == day)
            .collect();
        assert!(held.len() >= 2, "conversations on Feb {day}: {held:?}");
    }
    let total_chats: usize = people
        .values()
        .map(|(_, m)| m.associative.count(NodeKind::Chat))
        .sum();
    assert!(total_chats >= 2, "chats are remembered");

    // The cool-down of 800 steps held for every pair.
    for (pair, starts) in watch.chat_starts.lock().unwrap().iter() {
        for w in starts.windows(2) {
            assert!(
                w[1] - w[0] >= 800,
                "{pair:?} chatted at steps {} and {}",
                w[0],
                w[1]
            );
        }
    }
}

#[test]
fn the_same_seed_gives_the_same_town() {
    let (_, a) = run_town(scripted_client(3), 3, 3, 8);
    let (_, b) = run_town(scripted_client(3), 3, 3, 8);
    let a = a.trace.lock().unwrap().clone();
    let b = b.trace.lock().unwrap().clone();
    assert_eq!(a.len(), 8 * 360 * 3);
    assert!(a == b, "same seed, different runs");
}

#[test]
fn garbage_answers_for_half_the_calls_break_nothing() {
    let backend = FaultyBackend::new(Arc::new(town_script::town_script_backend(5)), 0.5, 11);
    let client = LlmClient::new(Arc::new(backend));
    let (mut app, watch) = run_town(client.clone(), 3, 5, 24);
    let violations = watch.violations.lock().unwrap().clone();
    assert!(
        violations.is_empty(),
        "{} violations, first: {:?}",
        violations.len(),
        &violations[..violations.len().min(5)]
    );
    let usage = client.usage();
    assert!(
        usage.totals.fail_safes > 0,
        "fail-safes are counted: {usage:?}"
    );
    assert!(usage.totals.retries > 0, "retries are counted");
    let people = diaries(&mut app);
    for (name, (diary, _)) in &people {
        let day = diary.days.first().expect("a day was planned");
        let total: u32 = day.schedule.iter().map(|i| i.minutes).sum();
        assert_eq!(total, MINUTES_PER_DAY, "{name}");
    }
}

#[test]
fn lockstep_with_slow_concurrent_answers_gives_the_same_town() {
    // Answers that take real time run as tasks on the thread pool, concurrently; in Lockstep
    // the result must not depend on it.
    let slow =
        town_script::town_script_backend(9).with_latency(std::time::Duration::from_millis(1));
    let slow_client = LlmClient::new(Arc::new(slow));
    let (_, a) = run_town(slow_client.clone(), 3, 9, 16);
    let (_, b) = run_town(scripted_client(9), 3, 9, 16);
    let a = a.trace.lock().unwrap().clone();
    let b = b.trace.lock().unwrap().clone();
    assert_eq!(a.len(), b.len());
    let first_difference = a.iter().zip(&b).position(|(x, y)| x != y);
    if let Some(i) = first_difference {
        panic!("traces differ at {i}: {} vs {}", a[i], b[i]);
    }
    assert!(slow_client.usage().totals.calls > 50);
    assert!(
        b.iter().any(|line| !line.ends_with(" 0")),
        "a conversation happened in the compared hours"
    );
}

#[test]
fn realtime_keeps_the_clock_running_while_personas_think() {
    use bevy_generative_agents::clock::{AwaitingCognition, SimSpeed, TimeMode};
    let slow =
        town_script::town_script_backend(4).with_latency(std::time::Duration::from_millis(30));
    let mut app = create_test_app(LlmClient::new(Arc::new(slow)));
    *app.world_mut().resource_mut::<SimClock>() = SimClock::default()
        .with_mode(TimeMode::Realtime)
        .with_speed(SimSpeed::X32);
    spawn_default_town(&mut app, Some(3), 4).expect("default town loads");
    app.finish();
    app.cleanup();
    let mut saw_pending_while_stepping = false;
    for _ in 0..400 {
        let before = app.world().resource::<SimClock>().step();
        let pending = app
            .world_mut()
            .query_filtered::<(), With<AwaitingCognition>>()
            .iter(app.world())
            .count();
        app.update();
        let after = app.world().resource::<SimClock>().step();
        if pending > 0 && after > before {
            saw_pending_while_stepping = true;
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    assert!(
        saw_pending_while_stepping,
        "the clock ran on while a persona was thinking"
    );
    // Everyone got a day planned and an action eventually.
    for _ in 0..2000 {
        app.update();
        std::thread::sleep(std::time::Duration::from_millis(1));
        let ready = app
            .world_mut()
            .query_filtered::<&ActionView, With<Persona>>()
            .iter(app.world())
            .all(|v| v.address.is_some());
        if ready {
            return;
        }
    }
    panic!("personas never got an action in Realtime mode");
}
