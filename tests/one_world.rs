//! One world (SPEC §16): what a persona is told in a talk turn, hears at a table or lives in a
//! stage scene reaches the memories retrieval looks at, and a persona busy elsewhere is not
//! talked over.
//!
//! On the offline town script (a scripted stand-in, not a model), Lockstep:
//! - a talk turn leaves an event node (a retrieval candidate, unlike its chat node) holding what
//!   the speaker said, and the planning thought and memo of an after-chat resting on the chat;
//!   `new_retrieve` with the fact as focal point finds the event among unrelated memories;
//! - the diffusion chain: a fact the player tells Ada reaches Cy through the café table (Ada's
//!   group prompts recall it, the town script passes it on), and Cy's retrieval finds it;
//! - a talk session saved between two turns goes on after a load as if never stopped;
//! - a sleeping persona left asleep (`Sleepers::StayAsleep`) answers "… is asleep." at once,
//!   with no model call and no memory, and one woken (the default) answers as if up; a persona
//!   held by a stage scene hears nobody until it is let go, and then answers.

use std::time::Duration;

use bevy::prelude::*;
use bevy::time::TimeUpdateStrategy;
use bevy_generative_agents::clock::{Held, SimClock, SimSpeed, TimeMode};
use bevy_generative_agents::cognition::CognitionPlugin;
use bevy_generative_agents::dialogue::{
    DialogueReplied, DialogueRequest, DialogueSessions, DialogueSettings, SessionTurn, Sleepers,
};
use bevy_generative_agents::director::DirectorPlugin;
use bevy_generative_agents::group::{GroupAttentionChanged, GroupLineSpoken};
use bevy_generative_agents::llm::LlmClient;
use bevy_generative_agents::memory::{NewMemory, NodeKind, RetrievalParams, new_retrieve};
use bevy_generative_agents::persona::{Mind, MindState, Percepts, Persona, Scratch};
use bevy_generative_agents::testing::town_script;

const CAFE: &str = "the ville:Hobbs Cafe:cafe";
/// The fact the player tells; the runs start on Monday February 13, so the fair is the next day.
const FACT: &str = "The harvest fair moved to Tuesday at the Common, at 3 pm.";

#[derive(Resource, Default)]
struct Replies(Vec<DialogueReplied>);

fn collect_replies(mut replies: MessageReader<DialogueReplied>, mut seen: ResMut<Replies>) {
    seen.0.extend(replies.read().cloned());
}

/// Every line said in a group stream, from the first frame on.
#[derive(Resource, Default)]
struct Said(Vec<GroupLineSpoken>);

fn collect_lines(mut lines: MessageReader<GroupLineSpoken>, mut said: ResMut<Said>) {
    said.0.extend(lines.read().cloned());
}

/// Every attention move, as messages and as entity events seen by an observer.
#[derive(Resource, Default)]
struct Moves {
    messages: Vec<GroupAttentionChanged>,
    observed: Vec<(Entity, GroupAttentionChanged)>,
}

fn collect_moves(mut moves: MessageReader<GroupAttentionChanged>, mut seen: ResMut<Moves>) {
    seen.messages.extend(moves.read().cloned());
}

/// An app with the dialogue (no daily routine, so the persona stays as the test set it), on the
/// town script seeded with 7, and one persona doing `activity`.
fn town(activity: &str) -> (App, Entity, LlmClient) {
    let (app, people, client) = cafe(&[("Ada Quill", activity)]);
    (app, people[0], client)
}

/// [`town`] with `people` (name, activity) at the café.
fn cafe(people: &[(&str, &str)]) -> (App, Vec<Entity>, LlmClient) {
    cafe_on(town_script::town_script_client(7), people)
}

/// [`cafe`] talking to the model through `client`.
fn cafe_on(client: LlmClient, people: &[(&str, &str)]) -> (App, Vec<Entity>, LlmClient) {
    let plugins = bevy_generative_agents::GenerativeAgentsPlugins
        .build()
        .disable::<CognitionPlugin>()
        .disable::<DirectorPlugin>();
    let mut app = App::new();
    app.add_plugins(MinimalPlugins.set(bevy_generative_agents::headless::simulation_task_pools()))
        .insert_resource(TimeUpdateStrategy::ManualDuration(Duration::from_millis(
            16,
        )))
        .insert_resource(client.clone())
        .insert_resource(
            SimClock::default()
                .with_mode(TimeMode::Lockstep)
                .with_speed(SimSpeed::Max),
        )
        .add_plugins(plugins)
        .init_resource::<Replies>()
        .init_resource::<Remembered>()
        .add_observer(
            |_: On<bevy_generative_agents::dialogue::DialogueRemembered>,
             mut n: ResMut<Remembered>| n.0 += 1,
        )
        .init_resource::<Said>()
        .init_resource::<Moves>()
        .add_observer(|e: On<GroupAttentionChanged>, mut seen: ResMut<Moves>| {
            seen.observed.push((e.event_target(), e.event().clone()));
        })
        .add_systems(Update, (collect_replies, collect_lines, collect_moves));
    let mut entities = Vec::new();
    for (name, activity) in people {
        let first_name = name.split(' ').next().unwrap_or(name);
        let scratch = Scratch {
            name: name.to_string(),
            first_name: first_name.to_string(),
            innate: "friendly, curious".to_string(),
            learned: format!("{name} lives in the ville and loves the river."),
            currently: format!("{name} is enjoying a morning at the cafe."),
            act_description: Some(activity.to_string()),
            ..Default::default()
        };
        let entity = app
            .world_mut()
            .spawn((
                Persona,
                Name::new(name.to_string()),
                Mind::new(MindState {
                    scratch,
                    ..Default::default()
                }),
                Percepts {
                    arena: CAFE.to_string(),
                    ..Default::default()
                },
            ))
            .id();
        entities.push(entity);
    }
    app.update();
    (app, entities, client)
}

/// Runs the app until a reply has arrived (bounded); returns it.
fn reply(app: &mut App) -> DialogueReplied {
    for _ in 0..5_000 {
        app.update();
        if let Some(reply) = app.world_mut().resource_mut::<Replies>().0.pop() {
            return reply;
        }
    }
    panic!("no reply within 5,000 updates");
}

/// Runs the app until the background stage of a talk turn is over (bounded): its memories are
/// stored after the reply.
/// `before` is how many had ended before the turn was asked.
fn background_done(app: &mut App, before: usize) {
    for _ in 0..10_000 {
        if app.world().resource::<Remembered>().0 > before {
            return;
        }
        app.update();
        std::thread::sleep(Duration::from_millis(1));
    }
    panic!("the talk's background stage never ended");
}

/// How many talk turns' background stages ended (observed).
#[derive(Resource, Default)]
struct Remembered(usize);

fn mind(app: &App, ada: Entity) -> &MindState {
    app.world()
        .get::<Mind>(ada)
        .and_then(Mind::get)
        .expect("the mind is home")
}

#[test]
fn a_talk_turn_leaves_an_event_and_after_chat_thoughts_that_retrieval_finds() {
    let (mut app, ada, client) = town("having coffee");
    // Unrelated memories the fact has to stand out from.
    let now = app.world().resource::<SimClock>().now();
    let others = [
        "Ada Quill is throwing a bowl on the wheel",
        "the river is high after the rain",
        "Ben Ode is building a boat in his shed",
        "the bakery sells rye bread on Mondays",
        "Cy Marsh is pruning the roses",
        "the library closes early on Sundays",
        "Ada Quill is glazing three cups",
        "the bridge was painted green",
    ];
    let vectors =
        bevy::tasks::block_on(client.embed(others.iter().map(|s| s.to_string()).collect()))
            .expect("the town script embeds");
    {
        let mut holder = app.world_mut().get_mut::<Mind>(ada).expect("mind");
        let state = holder.get_mut().expect("home");
        for (text, vector) in others.iter().zip(vectors) {
            let memory = NewMemory::new(now, ("Ada Quill", "saw", "something"), *text)
                .poignancy(4)
                .embedding(vector);
            state
                .associative
                .add_event(memory, Vec::new())
                .expect("stored");
        }
    }
    let before = mind(&app, ada).associative.len();

    app.world_mut()
        .write_message(DialogueRequest::say(ada, "Player", FACT));
    let replied = reply(&mut app);
    assert!(replied.planner_calls >= 1, "{replied:?}");

    let memory = &mind(&app, ada).associative;
    assert!(memory.len() > before);
    // The chat node stays for the chat history; the event over it holds what was said.
    let event = memory
        .events()
        .find(|e| e.predicate == "chat with" && e.object == "Player")
        .expect("the talk turn left an event node");
    assert!(
        event.description.contains("harvest fair"),
        "{}",
        event.description
    );
    let chat_id = *event
        .filling
        .evidence()
        .first()
        .expect("the event rests on the chat");
    let chat = memory.node(chat_id).expect("the chat node");
    assert_eq!(chat.kind, NodeKind::Chat);
    assert!(chat.description.contains("harvest fair"));
    // The after-chat planning thought and memo, resting on the chat.
    let thoughts: Vec<_> = memory
        .thoughts()
        .filter(|t| t.filling.evidence().contains(&chat_id))
        .collect();
    assert_eq!(thoughts.len(), 2, "{thoughts:?}");
    assert!(
        thoughts
            .iter()
            .any(|t| t.description.starts_with("For Ada Quill's planning: ")),
        "{thoughts:?}"
    );
    assert!(thoughts.iter().all(|t| (1..=10).contains(&t.poignancy)));

    // Retrieval with the fact as focal point finds the event among the unrelated memories.
    let focal =
        bevy::tasks::block_on(client.embed_one("harvest fair Tuesday Common")).expect("embeds");
    let event_id = event.id;
    let mut holder = app.world_mut().get_mut::<Mind>(ada).expect("mind");
    let state = holder.get_mut().expect("home");
    let top = new_retrieve(
        &mut state.associative,
        &focal,
        now,
        3,
        &RetrievalParams::default(),
    )
    .expect("retrieves");
    assert!(
        top.contains(&event_id),
        "top 3 {top:?} lacks the talk's event {event_id:?}"
    );
}

#[test]
fn a_sleeper_left_asleep_says_so_and_remembers_nothing() {
    let (mut app, ada, _) = town("sleeping");
    app.world_mut().resource_mut::<DialogueSettings>().sleepers = Sleepers::StayAsleep;
    app.world_mut()
        .write_message(DialogueRequest::say(ada, "Player", FACT));
    let replied = reply(&mut app);
    assert_eq!(replied.reply, "Ada is asleep.");
    assert_eq!(replied.planner_calls, 0);
    assert!(replied.tool_calls.is_empty());
    assert_eq!(
        mind(&app, ada).associative.len(),
        0,
        "nothing is remembered"
    );
}

#[test]
fn a_persona_held_by_a_scene_answers_once_let_go() {
    let (mut app, ada, _) = town("having coffee");
    app.world_mut().entity_mut(ada).insert(Held);
    app.world_mut()
        .write_message(DialogueRequest::say(ada, "Player", "Hello there, Ada!"));
    for _ in 0..300 {
        app.update();
    }
    assert!(
        app.world().resource::<Replies>().0.is_empty(),
        "a held persona answered"
    );
    assert_eq!(mind(&app, ada).associative.len(), 0);
    app.world_mut().entity_mut(ada).remove::<Held>();
    let replied = reply(&mut app);
    assert_eq!(replied.speaker, "Player");
    assert!(replied.planner_calls >= 1);
    assert!(!mind(&app, ada).associative.is_empty());
}

#[test]
fn a_sleeper_wakes_to_answer_by_default() {
    let (mut app, ada, _) = town("sleeping");
    app.world_mut()
        .write_message(DialogueRequest::say(ada, "Player", FACT));
    let replied = reply(&mut app);
    assert_ne!(replied.reply, "Ada is asleep.");
    assert!(replied.planner_calls >= 1);
    assert!(!mind(&app, ada).associative.is_empty());
}

/// Ada, Ben and Cy at a café table.
fn table() -> (App, Vec<Entity>, LlmClient) {
    table_on(town_script::town_script_client(7))
}

/// [`table`] talking to the model through `client`.
fn table_on(client: LlmClient) -> (App, Vec<Entity>, LlmClient) {
    cafe_on(
        client,
        &[
            ("Ada Quill", "having coffee with friends"),
            ("Ben Ode", "chatting over coffee"),
            ("Cy Marsh", "having coffee and a chat"),
        ],
    )
}

/// `new_retrieve` with the fair as focal point lists `memory` among `who`'s top 5 a day later.
fn assert_retrieved_a_day_later(
    app: &mut App,
    client: &LlmClient,
    who: Entity,
    memory: bevy_generative_agents::memory::NodeId,
) {
    let focal =
        bevy::tasks::block_on(client.embed_one("the harvest fair on Tuesday")).expect("embeds");
    let later = app.world().resource::<SimClock>().now() + chrono::Duration::days(1);
    let mut holder = app.world_mut().get_mut::<Mind>(who).expect("mind");
    let state = holder.get_mut().expect("home");
    let top = new_retrieve(
        &mut state.associative,
        &focal,
        later,
        5,
        &RetrievalParams::default(),
    )
    .expect("retrieves");
    assert!(top.contains(&memory), "top 5 {top:?} lacks {memory:?}");
}

/// Runs `app` for an hour of game time.
fn an_hour(app: &mut App) {
    let start = app.world().resource::<SimClock>().now();
    for _ in 0..200_000 {
        app.update();
        if app.world().resource::<SimClock>().now() > start + chrono::Duration::hours(1) {
            return;
        }
    }
    panic!("the clock stalled");
}

/// The diffusion chain, talk → table → recall (SPEC §16): the player tells Ada a fact in a talk
/// turn; at the café table with Ben and Cy, Ada's group prompts recall it (the town script
/// answers from what a prompt shows the persona remembering, so it can pass a fact on — the
/// fact is planted nowhere but the talk turn); Cy, who never spoke with the player, remembers
/// Ada's line as an event that `new_retrieve` finds a day later. Each link is read from the
/// memory streams.
#[test]
fn a_fact_told_in_a_talk_reaches_a_listener_at_the_table_and_its_retrieval() {
    diffusion_chain(table());
}

/// The diffusion chain over the loopback OpenAI-compatible server (the real HTTP path), the
/// server answering as the town script does.
#[cfg(feature = "http")]
#[test]
fn the_diffusion_chain_holds_over_the_loopback_http_server() {
    use bevy_generative_agents::llm::{HttpBackend, HttpConfig, town_script_backend};
    use bevy_generative_agents::prompt::PromptLibrary;
    use bevy_generative_agents::testing::fake_openai::{
        FakeOpenAi, FakeOpenAiConfig, PromptKindMatcher, chat_request_from_body,
    };
    let kinds = PromptKindMatcher::new(&PromptLibrary::default());
    let backend = town_script_backend(7);
    let server = FakeOpenAi::start(FakeOpenAiConfig::new(move |body| {
        backend.answer(&chat_request_from_body(body, &kinds))
    }))
    .expect("the loopback server starts");
    let config = HttpConfig {
        embed_model: "embedder".into(),
        max_retries: 1,
        timeout: Duration::from_secs(20),
        ..HttpConfig::new(server.base_url(), "test-model")
    };
    let client = LlmClient::new(std::sync::Arc::new(
        HttpBackend::new(config).expect("an HTTP backend"),
    ));
    diffusion_chain(table_on(client));
}

/// Player → Ada (talk) → the table (group stream) → Cy: Cy retrieves it a day later and plans
/// the fair into that day.
fn diffusion_chain((mut app, people, client): (App, Vec<Entity>, LlmClient)) {
    let [ada, _ben, cy] = [people[0], people[1], people[2]];
    // The talk happens at step 0 (the clock held there), so the run is the same every time.
    app.world_mut().resource_mut::<SimClock>().stop_at_step = Some(0);
    app.world_mut()
        .write_message(DialogueRequest::say(ada, "Player", FACT));
    reply(&mut app);
    background_done(&mut app, 0);
    {
        let mut clock = app.world_mut().resource_mut::<SimClock>();
        clock.stop_at_step = None;
        clock.speed = SimSpeed::Max;
    }
    // Link 1: Ada remembers it where retrieval looks (an event, not only a chat).
    assert!(
        mind(&app, ada)
            .associative
            .events()
            .any(|e| e.object == "Player" && e.description.contains("harvest fair")),
        "Ada's talk left no event"
    );

    // Link 2: an hour at the table (the talk began while Ada was being told); Ada passes it
    // on in the group stream.
    an_hour(&mut app);
    let said = &app.world().resource::<Said>().0;
    let passed_on = said
        .iter()
        .find(|line| line.persona == Some(ada) && line.text.contains("harvest fair"))
        .map(|line| line.text.clone())
        .expect("Ada never passed the fact on at the table");
    // Nobody else knew it before Ada said it.
    let first = said
        .iter()
        .position(|line| line.text.contains("harvest fair"))
        .expect("said");
    assert_eq!(said[first].persona, Some(ada), "{:?}", said[first]);
    assert!(passed_on.contains("Tuesday at the Common"), "{passed_on}");

    // Link 3: Cy heard it: a passage of Cy's holds Ada's line, with an event node over it (a
    // retrieval candidate; its description is the passage's first 160 characters, its vector
    // the passage's, Ada's line included) …
    let event_id = {
        let memory = &mind(&app, cy).associative;
        let passage = memory
            .chats()
            .find(|c| {
                c.filling
                    .chat_lines()
                    .iter()
                    .any(|l| l.speaker == "Ada Quill" && l.line.contains("harvest fair"))
            })
            .expect("Cy remembers Ada's line");
        assert!(
            passage.object.starts_with("the group in "),
            "{}",
            passage.object
        );
        memory
            .events()
            .find(|e| e.filling.evidence() == [passage.id])
            .expect("an event over the passage")
            .id
    };
    // … which retrieval with the fair as focal point lists a day later.
    assert_retrieved_a_day_later(&mut app, &client, cy, event_id);
    // Link 4: planning the next day from what retrieval lists, Cy puts the fair on the
    // schedule (a copy of Cy's mind: this café has no daily routine).
    let mut planned = mind(&app, cy).clone();
    let tuesday = app
        .world()
        .resource::<SimClock>()
        .now()
        .date()
        .succ_opt()
        .expect("a day");
    bevy_generative_agents::testing::plan_next_day(
        &mut planned,
        &client,
        tuesday.and_hms_opt(6, 0, 0).expect("6 am"),
    );
    assert!(
        planned
            .scratch
            .f_daily_schedule_hourly_org
            .iter()
            .any(|item| item.task.contains("harvest fair at the Common")),
        "Cy's Tuesday lacks the fair: {:#?}\nstatus: {}",
        planned.scratch.f_daily_schedule_hourly_org,
        planned.scratch.currently
    );

    // One event convention (SPEC §16): every attention move is a message and an entity event
    // on its persona.
    let moves = app.world().resource::<Moves>();
    assert!(!moves.messages.is_empty());
    assert_eq!(moves.observed.len(), moves.messages.len());
    for ((target, observed), message) in moves.observed.iter().zip(&moves.messages) {
        assert_eq!(observed, message);
        assert_eq!(*target, message.persona);
    }
}

/// Two personas of the default town on the town script, their day running.
fn living_town() -> App {
    use bevy_generative_agents::testing::{
        create_test_app, scripted_client, spawn_crowd, synthetic_sheets,
    };
    use bevy_generative_agents::world::TownMap;
    let map = TownMap::load_tmx(TownMap::default_town_path()).expect("default town");
    let mut app = create_test_app(scripted_client(7));
    let sheets = synthetic_sheets(2).expect("sheets");
    spawn_crowd(&mut app, map, &sheets, 7).expect("crowd");
    app.finish();
    app.cleanup();
    app.init_resource::<Replies>()
        .add_systems(Update, collect_replies);
    app
}

/// Runs until the clock reached `step`, and stops it there.
fn step_to(app: &mut App, step: u64) {
    {
        let mut clock = app.world_mut().resource_mut::<SimClock>();
        clock.stop_at_step = Some(step);
        clock.speed = SimSpeed::Max;
    }
    for _ in 0..100_000 {
        if app.world().resource::<SimClock>().step() >= step {
            assert_eq!(app.world().resource::<SimClock>().step(), step);
            return;
        }
        app.update();
    }
    panic!("the clock stalled before step {step}");
}

/// The first persona of the town, by entity.
fn first_persona(app: &mut App) -> Entity {
    let mut query = app.world_mut().query_filtered::<Entity, With<Persona>>();
    let mut people: Vec<Entity> = query.iter(app.world()).collect();
    people.sort();
    people[0]
}

/// Saves into `dir`, updating until the town is saveable (no call in flight).
fn save_when_still(app: &mut App, dir: &std::path::Path) {
    use bevy_generative_agents::persist::{PersistError, save_world};
    for _ in 0..10_000 {
        match save_world(app.world_mut(), dir) {
            Ok(_) => return,
            Err(PersistError::Busy(_)) => app.update(),
            Err(error) => panic!("save failed: {error}"),
        }
    }
    panic!("the town never became saveable");
}

/// What a run leaves to compare: the clock, and the first persona's session with the player and
/// its memory.
fn talk_state(app: &mut App) -> (u64, Vec<SessionTurn>, Vec<String>) {
    let persona = first_persona(app);
    let world = app.world();
    let turns = world
        .resource::<DialogueSessions>()
        .turns(persona, "Player")
        .to_vec();
    let memory = mind(app, persona)
        .associative
        .nodes()
        .iter()
        .map(|n| format!("{:?} {} {}", n.kind, n.created, n.description))
        .collect();
    (world.resource::<SimClock>().step(), turns, memory)
}

/// A talk session saved between two turns goes on after a load into a fresh app exactly as in
/// the run that never stopped (SPEC §16): the session's turns come back with the save (the
/// second turn's planner sees the first), and the clock and the persona's memory end the same.
#[test]
fn a_talk_session_saved_between_turns_goes_on_after_a_load() {
    let dir = std::env::temp_dir().join(format!("ga-one-world-talk-{}", std::process::id()));
    let run = |load: bool| {
        let mut app = living_town();
        // The clock stops at step 6: the talk and the save happen there, whatever a frame's
        // step budget.
        step_to(&mut app, 6);
        let persona = first_persona(&mut app);
        app.world_mut().write_message(DialogueRequest::say(
            persona,
            "Player",
            "Could we meet at the cafe at 3 pm today?",
        ));
        reply(&mut app);
        let _ = std::fs::remove_dir_all(&dir);
        save_when_still(&mut app, &dir);
        if load {
            app = living_town();
            bevy_generative_agents::persist::load_into_world(app.world_mut(), &dir).expect("loads");
            app.world_mut().resource_mut::<SimClock>().stop_at_step = Some(6);
            let persona = first_persona(&mut app);
            assert_eq!(
                app.world()
                    .resource::<DialogueSessions>()
                    .turns(persona, "Player")
                    .len(),
                1,
                "the session came back with the save"
            );
        }
        let persona = first_persona(&mut app);
        app.world_mut()
            .write_message(DialogueRequest::say(persona, "Player", FACT));
        reply(&mut app);
        talk_state(&mut app)
    };
    let (never_stopped, resumed) = (run(false), run(true));
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(never_stopped.1.len(), 2);
    assert_eq!(resumed.0, never_stopped.0, "the clocks differ");
    assert_eq!(resumed.1, never_stopped.1, "the sessions differ");
    assert_eq!(resumed.2, never_stopped.2, "the memories differ");
}

/// The diffusion chain through a stage scene seen by a bystander (SPEC §16): the player tells
/// Ada a fact; Ada and Ben act in a scene in the room where Cy is; Ada's turn carries what she
/// was told (the stand-in actor passes on what its prompt shows it remembering, so the fact
/// reaches the scene only through Ada's memory); the scene's tile event shows the narration,
/// Cy — not in the scene, standing where it shows — perceives it, and a day later `new_retrieve` lists that memory.
#[test]
fn a_fact_told_in_a_talk_reaches_a_bystander_through_a_stage_scene() {
    use bevy_generative_agents::stage::{Actor, Scene, StageCommand, Stages};
    use bevy_generative_agents::testing::{
        create_test_app, scripted_client, spawn_crowd, synthetic_sheets,
    };
    use bevy_generative_agents::world::{AddressLevel, TownMap};
    const STAGE: &str = "Morning at the counter";
    let map = TownMap::load_tmx(TownMap::default_town_path()).expect("default town");
    let client = scripted_client(7);
    let mut app = create_test_app(client.clone());
    let sheets = synthetic_sheets(3).expect("sheets");
    spawn_crowd(&mut app, map, &sheets, 7).expect("crowd");
    app.finish();
    app.cleanup();
    app.init_resource::<Replies>()
        .add_systems(Update, collect_replies);
    // 08:00 on the first day: everyone is up.
    step_to(&mut app, 8 * 360);
    let mut query = app.world_mut().query_filtered::<Entity, With<Persona>>();
    let mut people: Vec<Entity> = query.iter(app.world()).collect();
    people.sort();
    let [ada, ben, cy] = [people[0], people[1], people[2]];
    let name = |app: &App, e: Entity| {
        app.world()
            .get::<Name>(e)
            .map(|n| n.as_str().to_string())
            .expect("named")
    };
    // The clock holds at 08:00 while Ada answers, so the run does not depend on how many steps
    // a frame at Max speed happens to take on this machine.
    app.world_mut()
        .write_message(DialogueRequest::say(ada, "Player", FACT));
    reply(&mut app);
    // Ada and Ben act where Cy stands.
    let arena = {
        let tile = app
            .world()
            .get::<bevy_generative_agents::persona::Body>(cy)
            .expect("body")
            .tile;
        app.world()
            .resource::<TownMap>()
            .tile_address(tile, AddressLevel::Arena)
            .map(|a| a.to_string())
            .expect("Cy stands in an arena")
    };
    let mut scene = Scene::new(
        STAGE,
        "a busy morning",
        vec![
            Actor::new(name(&app, ada), "a baker with flour on her hands").played_by(ada),
            Actor::new(name(&app, ben), "a neighbour with a basket").played_by(ben),
        ],
    )
    .expect("a scene");
    scene.arena = Some(arena);
    for command in [
        StageCommand::Open { scene },
        StageCommand::Play {
            stage: STAGE.into(),
            turns: 2,
        },
        StageCommand::Finish {
            stage: STAGE.into(),
        },
    ] {
        app.world_mut().write_message(command);
    }
    // Step by step (never frame by frame: a frame at Max speed takes as many steps as fit in
    // its budget), at most a game day.
    let mut opened = false;
    let mut step = 8 * 360;
    for _ in 0..8_640 {
        step += 1;
        step_to(&mut app, step);
        // Cy stands where the scene shows (within a few tiles, nearer than the room's things).
        let shown = app
            .world()
            .resource::<TownMap>()
            .tiles()
            .find(|(_, t)| {
                t.events
                    .iter()
                    .any(|e| e.subject == format!("the scene at {STAGE}"))
            })
            .map(|(c, _)| c);
        if let Some(tile) = shown
            && let Some(mut body) = app
                .world_mut()
                .get_mut::<bevy_generative_agents::persona::Body>(cy)
        {
            body.tile = tile;
            body.planned_path.clear();
        }
        let playing = app.world().resource::<Stages>().get(STAGE).is_some();
        opened |= playing;
        if opened && !playing {
            break;
        }
    }
    assert!(opened, "the scene opened");
    // Cy was no actor and remembers the scene as a bystander, the fact in it.
    let event_id = mind(&app, cy)
        .associative
        .events()
        .find(|e| {
            e.subject == format!("the scene at {STAGE}") && e.description.contains("harvest fair")
        })
        .map(|e| e.id)
        .unwrap_or_else(|| {
            let seen: Vec<&str> = mind(&app, cy)
                .associative
                .events()
                .map(|e| e.description.as_str())
                .collect();
            panic!("Cy saw no scene telling the fact: {seen:#?}")
        });
    assert_retrieved_a_day_later(&mut app, &client, cy, event_id);
    // The next day Cy plans from memories retrieval lists: the fair is on Cy's schedule.
    step_to(&mut app, (24 + 16) * 360);
    let schedule: Vec<String> = mind(&app, cy)
        .scratch
        .f_daily_schedule_hourly_org
        .iter()
        .map(|item| item.task.clone())
        .collect();
    assert!(
        schedule
            .iter()
            .any(|task| task.contains("harvest fair at the Common")),
        "Cy's schedule lacks the fair: {schedule:#?}\nstatus: {}",
        mind(&app, cy).scratch.currently
    );
}
