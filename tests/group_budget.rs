//! A budget for group talk (issue 49): FOCUSED cycles — the expensive calls — run only where
//! talk is what a persona is there for, or where someone spoke to it.
//!
//! On the offline town script, with the personas' own day left out (as in the café hour) so
//! that what runs is the group flow alone:
//! - a household at breakfast at home makes no group call at all, where the SPEC §8 draws
//!   alone ran focused cycles every half minute;
//! - a line to the table naming one of them still gets that one's focused answer;
//! - friends out for a drink still focus, and walkers in a park listen: none of them is ever
//!   focused but where a line addressed it;
//! - a busy (PEEKING) persona asked again and again answers at the longer beat.

use std::collections::BTreeMap;

use bevy::prelude::*;
use bevy::time::TimeUpdateStrategy;
use bevy_generative_agents::clock::{SimClock, SimSpeed, TimeMode};
use bevy_generative_agents::cognition::CognitionPlugin;
use bevy_generative_agents::dialogue::DialoguePlugin;
use bevy_generative_agents::director::DirectorPlugin;
use bevy_generative_agents::group::{
    ChatState, Engagement, GroupAttention, GroupCommand, GroupLineSpoken, GroupSettings,
    GroupStreams, StreamKey,
};
use bevy_generative_agents::llm::LlmClient;
use bevy_generative_agents::persona::{Mind, MindState, Percepts, Persona, Scratch};

const STEPS_PER_HOUR: u64 = 360;

/// Someone at `arena`, living in `home`, doing `activity`.
struct Person {
    name: &'static str,
    home: &'static str,
    arena: &'static str,
    activity: &'static str,
}

/// People of the Quill house out together in `arena`, doing `activity`.
fn visitors(names: &[&'static str], arena: &'static str, activity: &'static str) -> Vec<Person> {
    names
        .iter()
        .map(|&name| Person {
            name,
            home: "Town:Quill house:bedroom",
            arena,
            activity,
        })
        .collect()
}

struct Town {
    app: App,
    people: Vec<Entity>,
    client: LlmClient,
}

fn town(people: &[Person], settings: GroupSettings) -> Town {
    let client = bevy_generative_agents::testing::scripted_client(4);
    let plugins = bevy_generative_agents::GenerativeAgentsPlugins
        .build()
        .disable::<CognitionPlugin>()
        .disable::<DirectorPlugin>()
        .disable::<DialoguePlugin>();
    let mut app = App::new();
    app.add_plugins(MinimalPlugins.set(bevy_generative_agents::headless::simulation_task_pools()))
        .insert_resource(TimeUpdateStrategy::ManualDuration(
            std::time::Duration::from_millis(16),
        ))
        .insert_resource(client.clone())
        .insert_resource(
            SimClock::default()
                .with_mode(TimeMode::Lockstep)
                .with_speed(SimSpeed::Max),
        )
        .insert_resource(settings)
        .add_plugins(plugins);
    let mut entities = Vec::new();
    for person in people {
        let name = person.name;
        let scratch = Scratch {
            name: name.to_string(),
            first_name: name.split(' ').next().unwrap_or(name).to_string(),
            innate: "friendly, curious".to_string(),
            learned: format!("{name} likes a good talk."),
            currently: format!("{name} is having an ordinary day."),
            living_area: person.home.to_string(),
            act_description: Some(person.activity.to_string()),
            ..Default::default()
        };
        let entity = app
            .world_mut()
            .spawn((
                Persona,
                Name::new(name),
                Mind::new(MindState {
                    scratch,
                    ..Default::default()
                }),
                Percepts {
                    arena: person.arena.to_string(),
                    ..Default::default()
                },
            ))
            .id();
        entities.push(entity);
    }
    Town {
        app,
        people: entities,
        client,
    }
}

/// Runs the clock to step `until`, one step at a time, calling `each` after every step; checks
/// at each step that a persona whose action is not social is focused only where a line
/// addressed it.
fn run_to(town: &mut Town, until: u64, mut each: impl FnMut(&mut Town, u64)) {
    loop {
        let step = town.app.world().resource::<SimClock>().step();
        if step >= until {
            return;
        }
        {
            // Reaching a stop pauses the clock: one step at a time, at full speed.
            let mut clock = town.app.world_mut().resource_mut::<SimClock>();
            clock.stop_at_step = Some(step + 1);
            clock.speed = SimSpeed::Max;
        }
        for _ in 0..400 {
            town.app.update();
            if town.app.world().resource::<SimClock>().step() > step {
                break;
            }
        }
        let now = town.app.world().resource::<SimClock>().step();
        assert!(now > step, "the clock stalled at step {step}");
        for &person in &town.people {
            let group = town
                .app
                .world()
                .get::<GroupAttention>(person)
                .expect("attention");
            if group.attention.engagement != Engagement::Social {
                for flow in group.attention.flows.values() {
                    assert!(
                        flow.state != ChatState::Focused || flow.is_addressed(),
                        "step {now}: focused unaddressed while {:?}: {flow:?}",
                        group.attention.engagement
                    );
                }
            }
        }
        each(town, now);
    }
}

fn group_calls(client: &LlmClient) -> BTreeMap<String, u64> {
    client
        .usage()
        .kinds
        .iter()
        .filter(|(kind, usage)| kind.starts_with("group_") && usage.calls > 0)
        .map(|(kind, usage)| (kind.clone(), usage.calls))
        .collect()
}

fn calls_of(calls: &BTreeMap<String, u64>, kind: &str) -> u64 {
    calls.get(kind).copied().unwrap_or(0)
}

const KITCHEN: &str = "Town:Reyes house:kitchen";

/// The Reyes household at breakfast in their kitchen (one of them with social words).
fn breakfast() -> [Person; 3] {
    let home = "Town:Reyes house:bedroom";
    [
        Person {
            name: "Elena Reyes",
            home,
            arena: KITCHEN,
            activity: "having breakfast",
        },
        Person {
            name: "Tomas Reyes",
            home,
            arena: KITCHEN,
            activity: "eating breakfast at the kitchen table",
        },
        Person {
            name: "Lucia Reyes",
            home,
            arena: KITCHEN,
            activity: "having breakfast with her family",
        },
    ]
}

/// The SPEC §8 draws alone: the budget's rules off.
fn without_budget() -> GroupSettings {
    GroupSettings {
        focus_needs_social: false,
        quiet_household_meals: false,
        peeking_cycle_every: 30.0,
        ..GroupSettings::default()
    }
}

#[test]
fn a_household_breakfast_at_home_makes_no_group_calls() {
    let mut table = town(&breakfast(), GroupSettings::default());
    run_to(&mut table, STEPS_PER_HOUR, |_, _| {});
    let key = StreamKey::Arena(KITCHEN.into());
    assert!(
        table
            .app
            .world()
            .resource::<GroupStreams>()
            .get(&key)
            .is_some(),
        "the table's stream is open, for anyone who speaks to it"
    );
    let calls = group_calls(&table.client);
    assert!(calls.is_empty(), "a quiet breakfast called {calls:?}");

    // The same breakfast without the budget: focused cycles all along.
    let mut before = town(&breakfast(), without_budget());
    run_to(&mut before, STEPS_PER_HOUR, |_, _| {});
    let calls = group_calls(&before.client);
    eprintln!("the breakfast without the budget: {calls:?}");
    assert!(
        calls_of(&calls, "group_focus") >= 20,
        "without the budget the table focused: {calls:?}"
    );
}

#[test]
fn a_line_to_the_table_naming_one_gets_a_focused_answer() {
    let mut table = town(&breakfast(), GroupSettings::default());
    let key = StreamKey::Arena(KITCHEN.into());
    run_to(&mut table, 30, |_, _| {});
    assert!(group_calls(&table.client).is_empty());
    table.app.world_mut().write_message(GroupCommand::Post {
        stream: key.clone(),
        speaker: "Player".into(),
        text: "Tomas, how did the lecture go yesterday?".into(),
    });
    let mut lines: Vec<(String, String)> = Vec::new();
    let mut cursor = bevy::ecs::message::MessageCursor::<GroupLineSpoken>::default();
    run_to(&mut table, 60, |town, _| {
        let messages = town.app.world().resource::<Messages<GroupLineSpoken>>();
        for line in cursor.read(messages) {
            lines.push((line.speaker.clone(), line.text.clone()));
        }
    });
    let calls = group_calls(&table.client);
    assert!(
        calls_of(&calls, "group_focus") >= 1,
        "Tomas was named: {calls:?}, {lines:?}"
    );
    assert!(
        lines
            .iter()
            .any(|(speaker, text)| speaker == "Tomas Reyes" && text.contains("Player")),
        "Tomas answered the player: {lines:?}"
    );
    // Spoken to, the table talks a while, then keeps quiet again: the last ten minutes of the
    // hour cost nothing.
    run_to(&mut table, STEPS_PER_HOUR - 60, |_, _| {});
    let settled = group_calls(&table.client);
    run_to(&mut table, STEPS_PER_HOUR, |_, _| {});
    assert_eq!(group_calls(&table.client), settled, "the table went quiet");
}

#[test]
fn friends_out_for_a_drink_focus_and_walkers_in_the_park_listen() {
    let pub_night: Vec<Person> = visitors(
        &["Ada Quill", "Ben Ode", "Cy Marsh", "Dee Fox"],
        "Town:Copper Kettle Pub:bar",
        "meeting friends for a drink at the pub",
    );
    let mut out = town(&pub_night, GroupSettings::default());
    run_to(&mut out, STEPS_PER_HOUR, |_, _| {});
    let drinks = group_calls(&out.client);
    assert!(
        calls_of(&drinks, "group_focus") >= 20,
        "friends at the pub focus: {drinks:?}"
    );

    let walk: Vec<Person> = visitors(
        &["Ada Quill", "Ben Ode", "Cy Marsh", "Dee Fox"],
        "Town:Maple Park:park",
        "taking a walk in the park",
    );
    // `run_to` checks at every step that no walker is focused unaddressed.
    let mut park = town(&walk, GroupSettings::default());
    run_to(&mut park, STEPS_PER_HOUR, |_, _| {});
    let listening = group_calls(&park.client);
    let mut before = town(&walk, without_budget());
    run_to(&mut before, STEPS_PER_HOUR, |_, _| {});
    let focusing = group_calls(&before.client);
    let total = |calls: &BTreeMap<String, u64>| calls.values().sum::<u64>();
    eprintln!("pub {drinks:?}; park {listening:?}, without the budget {focusing:?}");
    assert!(
        3 * calls_of(&listening, "group_focus") <= calls_of(&focusing, "group_focus")
            && total(&listening) < total(&focusing),
        "walkers listen: {listening:?} against {focusing:?} without the budget"
    );
}

#[test]
fn a_busy_persona_asked_again_and_again_answers_at_the_longer_beat() {
    let answers = |settings: GroupSettings| {
        let shop: Vec<Person> = visitors(
            &["Ada Quill", "Ben Ode", "Cy Marsh"],
            "Town:Elm Street Grocery:store",
            "serving customers at the counter",
        );
        let mut shop = town(&shop, settings);
        let key = StreamKey::Arena("Town:Elm Street Grocery:store".into());
        run_to(&mut shop, 10, |_, _| {});
        let mut ada = 0;
        let mut cursor = bevy::ecs::message::MessageCursor::<GroupLineSpoken>::default();
        // A customer asks Ada something every minute for half an hour.
        run_to(&mut shop, 190, |town, step| {
            if step % 6 == 0 {
                town.app.world_mut().write_message(GroupCommand::Post {
                    stream: key.clone(),
                    speaker: "Customer".into(),
                    text: format!("Ada, one more question, number {step}?"),
                });
            }
            let messages = town.app.world().resource::<Messages<GroupLineSpoken>>();
            ada += cursor
                .read(messages)
                .filter(|line| line.speaker == "Ada Quill")
                .count();
        });
        ada
    };
    let peeking = answers(GroupSettings::default());
    let at_leisure = answers(GroupSettings {
        peeking_cycle_every: 30.0,
        ..GroupSettings::default()
    });
    eprintln!("Ada's answers: {peeking} at the 120 s beat, {at_leisure} at 30 s");
    // Thirty questions: one answer per two minutes (and the join's opening line) against one
    // per half minute.
    assert!(
        (10..=20).contains(&peeking),
        "at the 120 s beat Ada answered {peeking} times"
    );
    assert!(
        at_leisure >= 25,
        "at the 30 s beat Ada answered {at_leisure} times"
    );
}

/// Lean rounds (`--lean`): listening walkers who address each other answer on their beat, at
/// one round, and cost no more than the rounds of a focused walk did.
#[test]
fn in_lean_rounds_walkers_cost_no_more_than_a_focused_walk() {
    let walk: Vec<Person> = visitors(
        &["Ada Quill", "Ben Ode", "Cy Marsh"],
        "Town:Maple Park:park",
        "taking a walk in the park",
    );
    let lean_hour = |settings: GroupSettings| {
        let mut park = town(&walk, settings);
        park.app
            .world_mut()
            .resource_mut::<bevy_generative_agents::settings::AgentSettings>()
            .lean
            .group_rounds = true;
        run_to(&mut park, STEPS_PER_HOUR, |_, _| {});
        group_calls(&park.client)
    };
    let listening = lean_hour(GroupSettings::default());
    let focusing = lean_hour(without_budget());
    eprintln!("lean park {listening:?}, without the budget {focusing:?}");
    let total = |calls: &BTreeMap<String, u64>| calls.values().sum::<u64>();
    assert_eq!(calls_of(&listening, "group_focus"), 0, "{listening:?}");
    assert!(
        total(&listening) <= total(&focusing),
        "lean walkers: {listening:?} against {focusing:?} without the budget"
    );
}
