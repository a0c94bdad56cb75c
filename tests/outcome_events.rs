//! Outcome events as a game embedding the crate sees them: two personas in a town of the
//! test's own (built with the public map builder; persona sheets the test writes), on the
//! offline town script (a deterministic scripted backend, not a model), 24 Lockstep game hours.
//!
//! Every outcome is received twice — by an observer (`On<E>`) and by a `MessageReader<E>` —
//! and the two streams must agree entry for entry; a rerun must give the identical sequence.
//! The two share a house and a café, so they meet and talk; what the events say is checked
//! against each persona's `Diary`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use bevy::prelude::*;
use bevy_generative_agents::clock::{GenerativeAgentsSystems, SimClock};
use bevy_generative_agents::cognition::{
    ActionStarted, ConversationEnded, ConversationStarted, ModelCallFailed, NewDay, PlanUpdated,
    ReflectionCompleted,
};
use bevy_generative_agents::llm::{
    BoxFuture, ChatRequest, ChatResponse, FaultyBackend, LlmBackend, LlmClient, LlmError,
    ScriptedBackend, TokenUsage, town_script_backend, town_script_client,
};
use bevy_generative_agents::persona::{Diary, Persona, load_persona_sheets, spawn_persona};
use bevy_generative_agents::settings::AgentSettings;
use bevy_generative_agents::testing::create_test_app;
use bevy_generative_agents::world::{TileCoord, TownMap};

const WORLD: &str = "Brookside";
const STEPS_PER_DAY: u64 = 8_640;

/// A two-room house and a café on one street:
///
/// ```text
/// ##########################
/// #bbbbbb#kkkkkk#cccccccccc#   b: Lee house:bedroom (beds at the left, spawns on them)
/// #Bbbbbb#ksktkk#cCcccTcccc#   k: Lee house:kitchen (stove s, table t)
/// #bbbbbb#kkkkkk#cccccccccc#   c: Riverside Cafe:cafe (counter C, table T)
/// #Bbbbbb#kkkkkk#cccccccccc#   h: Lee house:bathroom (shower w)
/// #hhwhhh#kkkkkk#cccccccccc#
/// ###.######.########.######   doors onto the street
/// #........................#
/// ##########################
/// ```
fn town() -> TownMap {
    let (width, height) = (26, 9);
    let mut map = TownMap::builder(WORLD, width, height).blocked_rect(
        TileCoord::new(0, 0),
        TileCoord::new(width as i32 - 1, height as i32 - 1),
        true,
    );
    let area = |map: bevy_generative_agents::world::TownMapBuilder,
                (x0, y0): (i32, i32),
                (x1, y1): (i32, i32),
                address: &str| {
        let mut map = map.blocked_rect(TileCoord::new(x0, y0), TileCoord::new(x1, y1), false);
        for x in x0..=x1 {
            for y in y0..=y1 {
                map = map.address_str(TileCoord::new(x, y), address);
            }
        }
        map
    };
    let house = format!("{WORLD}:Lee house");
    let cafe = format!("{WORLD}:Riverside Cafe");
    map = area(map, (1, 1), (6, 4), &format!("{house}:bedroom"));
    map = area(map, (1, 5), (6, 5), &format!("{house}:bathroom"));
    map = area(map, (8, 1), (13, 5), &format!("{house}:kitchen"));
    map = area(map, (15, 1), (24, 5), &format!("{cafe}:cafe"));
    map = map.blocked_rect(TileCoord::new(1, 7), TileCoord::new(24, 7), false);
    for door in [3, 10, 19] {
        map = map.blocked(TileCoord::new(door, 6), false);
    }
    let objects = [
        ((1, 2), format!("{house}:bedroom:bed")),
        ((1, 4), format!("{house}:bedroom:bed")),
        ((3, 5), format!("{house}:bathroom:shower")),
        ((9, 2), format!("{house}:kitchen:stove")),
        ((11, 2), format!("{house}:kitchen:dining table")),
        ((16, 2), format!("{cafe}:cafe:counter")),
        ((20, 2), format!("{cafe}:cafe:customer table")),
    ];
    for ((x, y), address) in objects {
        map = map.address_str(TileCoord::new(x, y), &address);
    }
    map.spawn(TileCoord::new(1, 2), "lee-bed-a")
        .spawn(TileCoord::new(1, 4), "lee-bed-b")
        .build()
        .expect("the test town builds")
}

/// Two siblings sharing the house, both working at the café: they meet at breakfast and at work.
fn write_sheets(dir: &std::path::Path) {
    let sheet = |first: &str, age: u32, innate: &str, spawn: &str, currently: &str| {
        serde_json::json!({
            "name": format!("{first} Lee"),
            "first_name": first,
            "last_name": "Lee",
            "age": age,
            "innate": innate,
            "learned": format!("{first} Lee runs Riverside Cafe with their sibling and lives in the Lee house next door."),
            "currently": format!("{first} Lee {currently}"),
            "lifestyle": format!("{first} Lee goes to bed around 10 pm, wakes up around 6 am, and opens the cafe at 7 am."),
            "living_area": format!("{WORLD}:Lee house:bedroom"),
            "workplace": format!("{WORLD}:Riverside Cafe:cafe"),
            "daily_plan_req": format!("{first} Lee opens the cafe at 7 am and serves customers until 3 pm."),
            "spawn": spawn,
        })
    };
    let sheets = [
        (
            "ada_lee.json",
            sheet(
                "Ada",
                31,
                "cheerful, talkative",
                "lee-bed-a",
                "is planning a tasting evening at the cafe.",
            ),
        ),
        (
            "ben_lee.json",
            sheet(
                "Ben",
                28,
                "calm, curious",
                "lee-bed-b",
                "is learning to roast coffee beans.",
            ),
        ),
    ];
    std::fs::create_dir_all(dir).expect("sheet folder");
    for (file, json) in sheets {
        let text = serde_json::to_string_pretty(&json).expect("json");
        std::fs::write(dir.join(file), text).expect("sheet written");
    }
}

/// One outcome as text, the same whichever way it arrived.
#[derive(Resource, Default)]
struct Stream(Vec<String>);

/// What the observers saw.
#[derive(Resource, Default)]
struct Observed(Vec<String>);

/// Outcomes an observer on Ada's entity alone saw.
#[derive(Resource, Default)]
struct AdaOnly(Vec<String>);

fn action(e: &ActionStarted) -> String {
    format!(
        "{} action {} {} [{}] {:?} until {:?} ({:?})",
        e.time, e.name, e.emoji, e.description, e.address, e.end_time, e.persona
    )
}
fn plan(e: &PlanUpdated) -> String {
    format!(
        "{} plan {} {:?} ({:?})",
        e.time, e.name, e.schedule, e.persona
    )
}
fn new_day(e: &NewDay) -> String {
    format!(
        "{} new-day {} {} wakes {} plan {:?} hourly {:?} revised {} ({:?})",
        e.time,
        e.name,
        e.date,
        e.wake_up_hour,
        e.daily_plan,
        e.hourly_schedule,
        e.identity_revised,
        e.persona
    )
}
fn talk_started(e: &ConversationStarted) -> String {
    format!(
        "{} talk-start {} with {} ({:?}) initiated {} [{}] until {} lines {:?} ({:?})",
        e.time,
        e.name,
        e.partner_name,
        e.partner,
        e.initiated,
        e.summary,
        e.end_time,
        e.transcript,
        e.persona
    )
}
fn talk_ended(e: &ConversationEnded) -> String {
    format!(
        "{} talk-end {} with {} ({:?}) lines {:?} ({:?})",
        e.time, e.name, e.partner_name, e.partner, e.transcript, e.persona
    )
}
fn reflection(e: &ReflectionCompleted) -> String {
    format!(
        "{} reflect {} {:?} ({:?})",
        e.time, e.name, e.insights, e.persona
    )
}
fn failure(e: &ModelCallFailed) -> String {
    format!(
        "{} failed {} {} {:?} after {} ({:?})",
        e.time, e.name, e.prompt_kind, e.reason, e.attempts, e.persona
    )
}

fn observe_all(app: &mut App) {
    app.add_observer(|e: On<ActionStarted>, mut seen: ResMut<Observed>| {
        assert_eq!(e.event_target(), e.persona);
        seen.0.push(action(&e));
    })
    .add_observer(|e: On<PlanUpdated>, mut seen: ResMut<Observed>| seen.0.push(plan(&e)))
    .add_observer(|e: On<NewDay>, mut seen: ResMut<Observed>| seen.0.push(new_day(&e)))
    .add_observer(|e: On<ConversationStarted>, mut seen: ResMut<Observed>| {
        seen.0.push(talk_started(&e))
    })
    .add_observer(|e: On<ConversationEnded>, mut seen: ResMut<Observed>| {
        seen.0.push(talk_ended(&e))
    })
    .add_observer(|e: On<ReflectionCompleted>, mut seen: ResMut<Observed>| {
        seen.0.push(reflection(&e))
    })
    .add_observer(|e: On<ModelCallFailed>, mut seen: ResMut<Observed>| seen.0.push(failure(&e)));
}

/// Reads every outcome message; each type in the order it was written.
#[expect(clippy::too_many_arguments, reason = "one reader per outcome type")]
fn read_all(
    mut actions: MessageReader<ActionStarted>,
    mut plans: MessageReader<PlanUpdated>,
    mut days: MessageReader<NewDay>,
    mut starts: MessageReader<ConversationStarted>,
    mut ends: MessageReader<ConversationEnded>,
    mut reflections: MessageReader<ReflectionCompleted>,
    mut failures: MessageReader<ModelCallFailed>,
    mut stream: ResMut<Stream>,
) {
    // Message ids count per type, so the order across types is not in them: each line is
    // tagged with its type and id, and the test compares the streams type by type.
    let mut all: Vec<(usize, u8, String)> = Vec::new();
    all.extend(actions.read_with_id().map(|(e, id)| (id.id, 0, action(e))));
    all.extend(plans.read_with_id().map(|(e, id)| (id.id, 1, plan(e))));
    all.extend(days.read_with_id().map(|(e, id)| (id.id, 2, new_day(e))));
    all.extend(
        starts
            .read_with_id()
            .map(|(e, id)| (id.id, 3, talk_started(e))),
    );
    all.extend(ends.read_with_id().map(|(e, id)| (id.id, 4, talk_ended(e))));
    all.extend(
        reflections
            .read_with_id()
            .map(|(e, id)| (id.id, 5, reflection(e))),
    );
    all.extend(
        failures
            .read_with_id()
            .map(|(e, id)| (id.id, 6, failure(e))),
    );
    stream.0.extend(
        all.into_iter()
            .map(|(id, kind, text)| format!("{kind}#{id} {text}")),
    );
}

/// What one 24-hour run produced.
struct Run {
    observed: Vec<String>,
    read: Vec<String>,
    ada_only: Vec<String>,
    diaries: BTreeMap<String, Diary>,
    entities: BTreeMap<String, Entity>,
}

fn run(client: LlmClient, seed: u64, sheets_dir: &std::path::Path, steps: u64) -> Run {
    let mut app = create_test_app(client);
    app.init_resource::<Observed>()
        .init_resource::<Stream>()
        .init_resource::<AdaOnly>()
        .add_systems(Update, read_all.after(GenerativeAgentsSystems::Drive));
    observe_all(&mut app);

    let map = town();
    let sheets = load_persona_sheets(sheets_dir).expect("the written sheets load");
    assert_eq!(sheets.len(), 2);
    let settings = app.world().resource::<AgentSettings>().clone();
    let clock = app.world().resource::<SimClock>().clone();
    let mut entities = BTreeMap::new();
    for sheet in &sheets {
        let mut commands = app.world_mut().commands();
        let entity = spawn_persona(&mut commands, sheet, &map, &settings, &clock, seed)
            .expect("the sheet fits the town");
        entities.insert(sheet.name.clone(), entity);
    }
    app.world_mut().flush();
    app.insert_resource(map);
    // An observer watching one persona only.
    let ada = entities["Ada Lee"];
    app.world_mut()
        .entity_mut(ada)
        .observe(|e: On<ActionStarted>, mut seen: ResMut<AdaOnly>| seen.0.push(action(&e)));

    app.world_mut().resource_mut::<SimClock>().stop_at_step = Some(steps);
    let mut frames = 0;
    while app.world().resource::<SimClock>().step() < steps {
        app.update();
        frames += 1;
        assert!(frames < 2_000_000, "the run stalled");
    }
    // One more frame so the last step's messages are read.
    app.update();

    let world = app.world_mut();
    let mut diaries = BTreeMap::new();
    let mut query = world.query_filtered::<(&Name, &Diary), With<Persona>>();
    for (name, diary) in query.iter(world) {
        diaries.insert(name.as_str().to_string(), diary.clone());
    }
    Run {
        observed: std::mem::take(&mut world.resource_mut::<Observed>().0),
        read: std::mem::take(&mut world.resource_mut::<Stream>().0),
        ada_only: std::mem::take(&mut world.resource_mut::<AdaOnly>().0),
        diaries,
        entities,
    }
}

/// The kind tag [`read_all`] gives each outcome, from the text.
fn kind_of(line: &str) -> u8 {
    let word = line.split_whitespace().nth(2).unwrap_or_default();
    match word {
        "action" => 0,
        "plan" => 1,
        "new-day" => 2,
        "talk-start" => 3,
        "talk-end" => 4,
        "reflect" => 5,
        _ => 6,
    }
}

/// The read messages, kind by kind (each kind in the order it was written).
fn by_kind(read: &[String]) -> Vec<&str> {
    let mut lines: Vec<&str> = read.iter().map(String::as_str).collect();
    lines.sort_by_key(|line| line.split_once('#').map(|(kind, _)| kind.to_string()));
    lines
}

fn sheets_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ga-outcome-events-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    write_sheets(&dir);
    dir
}

#[test]
fn a_game_hears_the_same_outcomes_through_observers_and_messages_in_the_same_order_every_run() {
    let dir = sheets_dir("main");
    let first = run(town_script_client(5), 5, &dir, STEPS_PER_DAY);
    let second = run(town_script_client(5), 5, &dir, STEPS_PER_DAY);
    let _ = std::fs::remove_dir_all(&dir);

    // Observers and messages carry the same outcomes: per kind, the same values in the same
    // order (the messages of one kind come in write order; the observers saw them all
    // interleaved in the order they were sent).
    assert!(!first.observed.is_empty());
    for kind in 0..=6u8 {
        let observed: Vec<&str> = first
            .observed
            .iter()
            .filter(|l| kind_of(l) == kind)
            .map(String::as_str)
            .collect();
        let read: Vec<&str> = first
            .read
            .iter()
            .filter(|l| l.starts_with(&format!("{kind}#")))
            .map(|l| l.split_once(' ').map_or("", |(_, text)| text))
            .collect();
        assert_eq!(
            observed, read,
            "outcomes of kind {kind} differ between the streams"
        );
    }

    // A rerun hears exactly the same sequence, both ways.
    assert_eq!(
        first.observed, second.observed,
        "the rerun's outcomes differ"
    );
    // Messages are read frame by frame and a frame holds as many steps as its time budget
    // allows, so how the kinds interleave depends on timing; each kind's sequence must not.
    assert_eq!(by_kind(&first.read), by_kind(&second.read));

    // What was heard: both personas planned their day, started actions, talked.
    let names = ["Ada Lee", "Ben Lee"];
    let count = |prefix: &str, name: &str| {
        first
            .observed
            .iter()
            .filter(|l| kind_of(l) == kind_of(&format!("date time {prefix}")))
            .filter(|l| l.contains(&format!(" {prefix} {name} ")))
            .count()
    };
    for name in names {
        let diary = &first.diaries[name];
        assert_eq!(count("new-day", name), 1, "{name}: one day, planned once");
        assert!(
            first
                .observed
                .iter()
                .any(|l| l.starts_with(&format!("2023-02-13 00:00:00 new-day {name} 2023-02-13 "))),
            "{name} plans the first day at its first step"
        );
        assert!(count("action", name) > 20, "{name} started few actions");
        assert_eq!(
            count("talk-start", name),
            diary.conversations.len(),
            "{name}: one ConversationStarted per conversation in the diary"
        );
        assert!(count("talk-start", name) > 0, "{name} never talked");
        assert!(
            count("talk-end", name) > 0,
            "{name}'s conversations never ended"
        );
        assert_eq!(count("reflect", name) as u32, diary.reflections);
    }

    // Conversations: each start is one side of a pair — the initiator first, then the partner —
    // naming the other's entity; the transcript at the end is the one at the start.
    let starts: Vec<&String> = first
        .observed
        .iter()
        .filter(|l| l.contains(" talk-start "))
        .collect();
    assert_eq!(starts.len() % 2, 0);
    for pair in starts.chunks(2) {
        assert!(pair[0].contains("initiated true"), "{}", pair[0]);
        assert!(pair[1].contains("initiated false"), "{}", pair[1]);
    }
    let ada = first.entities["Ada Lee"];
    let ben = first.entities["Ben Lee"];
    assert!(
        starts
            .iter()
            .any(|l| l.contains(&format!("with Ben Lee ({ben:?})"))
                && l.ends_with(&format!("({ada:?})")))
    );
    let transcript = |line: &str| {
        line.split(" lines ")
            .nth(1)
            .map(|rest| rest.rsplit_once(" (").map_or(rest, |(t, _)| t).to_string())
    };
    let ends: Vec<&String> = first
        .observed
        .iter()
        .filter(|l| l.contains(" talk-end "))
        .collect();
    for end in &ends {
        assert!(
            starts.iter().any(|s| transcript(s) == transcript(end)),
            "an ended chat that never started: {end}"
        );
        assert!(
            end.contains("(Some("),
            "the partner's entity is resolved: {end}"
        );
    }

    // An observer on one entity sees exactly that persona's outcomes.
    let ada_actions: Vec<&String> = first
        .observed
        .iter()
        .filter(|l| l.contains(" action Ada Lee "))
        .collect();
    assert_eq!(first.ada_only.iter().collect::<Vec<_>>(), ada_actions);

    // Times never go back.
    let times: Vec<&str> = first
        .observed
        .iter()
        .map(|l| l.get(..19).unwrap_or_default())
        .collect();
    assert!(
        times.windows(2).all(|w| w[0] <= w[1]),
        "outcomes out of time order"
    );
}

#[test]
fn outcomes_come_in_the_same_order_whatever_the_backend_latency() {
    // Answers that take real time land over several frames, from tasks on the thread pool, in
    // whatever order they finish; in Lockstep the game must still hear the same sequence.
    let dir = sheets_dir("latency");
    let slow = town_script_backend(8).with_latency(std::time::Duration::from_millis(1));
    let slow_client = LlmClient::new(std::sync::Arc::new(slow));
    let half_day = STEPS_PER_DAY / 2;
    let slow_run = run(slow_client.clone(), 8, &dir, half_day);
    let instant = run(town_script_client(8), 8, &dir, half_day);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        slow_client.usage().totals.calls > 50,
        "the slow backend was used"
    );
    assert!(
        instant.observed.iter().any(|l| l.contains(" talk-start ")),
        "a conversation happened in the compared hours"
    );
    let first_difference = slow_run
        .observed
        .iter()
        .zip(&instant.observed)
        .position(|(a, b)| a != b);
    if let Some(i) = first_difference {
        panic!(
            "outcomes differ at {i}: {} vs {}",
            slow_run.observed[i], instant.observed[i]
        );
    }
    assert_eq!(slow_run.observed.len(), instant.observed.len());
    // The readers run once a frame and answers that take time spread over more frames, so
    // the messages of different kinds interleave differently; each kind's sequence is the same.
    assert_eq!(by_kind(&slow_run.read), by_kind(&instant.read));
}

#[test]
fn every_fail_safe_of_a_thought_is_heard_as_a_model_call_failed() {
    // Every generated answer is garbage: free-text prompts run out of retries and use their
    // fail-safe. Each of those is one ModelCallFailed, on the persona whose thought (or
    // conversation) made the call, with the prompt kind, the reason and the attempts.
    let dir = sheets_dir("faults");
    let faulty = FaultyBackend::new(std::sync::Arc::new(town_script_backend(6)), 1.0, 3);
    let client = LlmClient::new(std::sync::Arc::new(faulty));
    let outcome = run(client.clone(), 6, &dir, 360);
    let _ = std::fs::remove_dir_all(&dir);

    let usage = client.usage();
    assert!(
        usage.totals.fail_safes > 0,
        "no fail-safe in an hour of garbage"
    );
    let mut heard: BTreeMap<String, u64> = BTreeMap::new();
    for line in outcome.observed.iter().filter(|l| kind_of(l) == 6) {
        // "<date> <time> failed <first> <last> <kind> <reason> after <attempts> (<entity>)"
        let words: Vec<&str> = line.split_whitespace().collect();
        let kind = words[5];
        assert_eq!(words[6], "Unusable", "garbage answers are unusable: {line}");
        assert_eq!(words[8], "4", "the first attempt and three retries: {line}");
        *heard.entry(kind.to_string()).or_default() += 1;
    }
    let counted: BTreeMap<String, u64> = usage
        .kinds
        .iter()
        .filter(|(_, k)| k.fail_safes > 0)
        .map(|(kind, k)| (kind.clone(), k.fail_safes))
        .collect();
    assert_eq!(
        heard, counted,
        "ModelCallFailed per kind against the usage counters"
    );
}

/// The town script, except that every line Ben Lee is asked to say comes back as garbage (so
/// each of his utterances falls back to its fail-safe).
struct BenMumbles(ScriptedBackend);

impl LlmBackend for BenMumbles {
    fn name(&self) -> &str {
        self.0.name()
    }

    fn model(&self) -> &str {
        self.0.model()
    }

    fn chat(&self, request: ChatRequest) -> BoxFuture<'_, Result<ChatResponse, LlmError>> {
        if request.kind == "next_utterance" && request.prompt_text().contains("How Ben Lee sees") {
            return Box::pin(async {
                Ok(ChatResponse {
                    text: "mmhm".into(),
                    usage: TokenUsage::default(),
                })
            });
        }
        self.0.chat(request)
    }

    fn embed(&self, texts: Vec<String>) -> BoxFuture<'_, Result<Vec<Vec<f32>>, LlmError>> {
        self.0.embed(texts)
    }

    fn embedding_model(&self) -> &str {
        self.0.embedding_model()
    }

    fn embedding_dim(&self) -> usize {
        self.0.embedding_dim()
    }
}

/// Issue 48: in a conversation, the partner's failed call is reported as the partner's —
/// `ModelCallFailed` names the persona whose call failed, not the one who started the talk.
#[test]
fn a_conversation_partners_failed_call_names_the_partner() {
    let dir = sheets_dir("partner");
    let client = LlmClient::new(std::sync::Arc::new(BenMumbles(town_script_backend(5))));
    let outcome = run(client, 5, &dir, STEPS_PER_DAY);
    let _ = std::fs::remove_dir_all(&dir);
    let ben = outcome.entities["Ben Lee"];
    let utterances: Vec<&String> = outcome
        .observed
        .iter()
        .filter(|l| kind_of(l) == 6 && l.contains(" next_utterance "))
        .collect();
    assert!(
        !utterances.is_empty(),
        "Ben spoke in a day of the shared house and cafe"
    );
    for line in utterances {
        assert!(line.contains("failed Ben Lee "), "{line}");
        assert!(line.ends_with(&format!("({ben:?})")), "{line}");
    }
    assert!(
        outcome.observed.iter().filter(|l| kind_of(l) == 4).count() > 0,
        "they talked"
    );
}
