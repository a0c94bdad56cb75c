//! Conversations streamed into the ECS as they are spoken (SPEC §3.7, §6), headless.
//!
//! Two personas of the default town are told to talk at the first step; the tests watch the
//! [`ChatStream`] components frame by frame until the chat lands in their `ActionView`:
//! - with the real HTTP backend against the loopback fake server, which streams each answer as
//!   server-sent events a word at a time with pauses, in Realtime mode: a partial line that is
//!   a strict prefix of the line finally said shows up before the chat lands, and nothing
//!   partial is left once it has;
//! - with the offline town script: a watched conversation says exactly what an unwatched one
//!   says, nothing is streamed unless watched, and dropping the conversation task clears its
//!   stream.

use std::sync::Arc;
use std::time::Duration;

use bevy::prelude::*;
use bevy_generative_agents::clock::{SimClock, SimSpeed, TimeMode};
use bevy_generative_agents::cognition::chat_stream::ChatStreamFeed;
use bevy_generative_agents::cognition::vocabulary::Conversing;
use bevy_generative_agents::cognition::{ChatIntents, ChatStream, ChatStreamSettings};
use bevy_generative_agents::llm::LlmClient;
use bevy_generative_agents::persona::ActionView;
use bevy_generative_agents::testing::{create_test_app, spawn_default_town, town_script};

const SEED: u64 = 5;
/// Updates before a test gives up on the chat landing.
const MAX_FRAMES: usize = 20_000;

type Lines = Vec<(String, String)>;

/// The default town's first two personas, the first told to talk to the second at step 0.
fn two_personas(client: LlmClient, watching: bool, clock: SimClock) -> (App, Entity, Entity) {
    let mut app = create_test_app(client);
    *app.world_mut().resource_mut::<SimClock>() = clock;
    if watching {
        app.insert_resource(ChatStreamSettings::watching());
    }
    let people = spawn_default_town(&mut app, Some(2), SEED).expect("default town loads");
    app.finish();
    app.cleanup();
    let (a, b) = (people[0], people[1]);
    let b_name = app
        .world()
        .get::<Name>(b)
        .expect("personas have names")
        .to_string();
    app.world_mut()
        .resource_mut::<ChatIntents>()
        .0
        .push((a, b_name));
    (app, a, b)
}

/// The chat in `entity`'s visible action, once it has landed.
fn landed_chat(app: &App, entity: Entity) -> Option<Lines> {
    let view = app.world().get::<ActionView>(entity)?;
    (view.chatting_with.is_some() && !view.chat.is_empty()).then(|| view.chat.clone())
}

/// Every `ChatStream` now, with the entity it is on.
fn streams(app: &mut App) -> Vec<(Entity, ChatStream)> {
    app.world_mut()
        .query::<(Entity, &ChatStream)>()
        .iter(app.world())
        .map(|(e, s)| (e, s.clone()))
        .collect()
}

fn feeds(app: &mut App) -> usize {
    app.world_mut()
        .query::<&ChatStreamFeed>()
        .iter(app.world())
        .count()
}

/// Updates until the chat lands on `a`, handing every frame's streams to `seen` (the chat has
/// not landed in those frames). Returns the landed chat.
fn run_until_landed(
    app: &mut App,
    a: Entity,
    pause: Duration,
    mut seen: impl FnMut(Vec<(Entity, ChatStream)>),
) -> Lines {
    for _ in 0..MAX_FRAMES {
        app.update();
        if let Some(chat) = landed_chat(app, a) {
            return chat;
        }
        seen(streams(app));
        std::thread::sleep(pause);
    }
    panic!("the conversation never landed");
}

/// Checks what a frame's streams say about a conversation between `a` and `b`; returns the
/// partial lines seen, `(line number, text)`.
fn check_frame(frame: &[(Entity, ChatStream)], a: Entity, b: Entity) -> Vec<(usize, String)> {
    assert!(frame.len() <= 1, "one stream per conversation: {frame:?}");
    let mut partials = Vec::new();
    for (entity, stream) in frame {
        assert_eq!(*entity, stream.speaker, "the stream is on the speaker");
        assert!(
            (stream.speaker, stream.listener) == (a, b)
                || (stream.speaker, stream.listener) == (b, a)
        );
        if !stream.partial.is_empty() {
            partials.push((stream.lines.len(), stream.partial.clone()));
        }
    }
    partials
}

#[test]
fn a_watched_conversation_says_what_an_unwatched_one_says() {
    let slow = || {
        let backend = town_script::town_script_backend(SEED).with_latency(Duration::from_millis(1));
        LlmClient::new(Arc::new(backend))
    };
    let lockstep = SimClock::default()
        .with_mode(TimeMode::Lockstep)
        .with_speed(SimSpeed::Max);

    let (mut plain, a, b) = two_personas(slow(), false, lockstep.clone());
    let mut streamed_while_unwatched = 0;
    let unwatched = run_until_landed(&mut plain, a, Duration::ZERO, |frame| {
        streamed_while_unwatched += frame.len();
    });
    assert_eq!(
        streamed_while_unwatched, 0,
        "nothing is streamed unless watched"
    );

    let (mut watched_app, a2, b2) = two_personas(slow(), true, lockstep);
    let mut finished_seen: Lines = Vec::new();
    let watched = run_until_landed(&mut watched_app, a2, Duration::ZERO, |frame| {
        check_frame(&frame, a2, b2);
        if let Some((_, stream)) = frame.first()
            && stream.lines.len() > finished_seen.len()
        {
            finished_seen = stream.lines.clone();
        }
    });
    assert_eq!(watched, unwatched, "streaming is display only");
    assert!(watched.len() >= 2, "a real conversation: {watched:?}");
    // The stream's finished lines are the validated lines of the chat, in order.
    assert!(!finished_seen.is_empty(), "the stream was seen");
    assert_eq!(finished_seen[..], watched[..finished_seen.len()]);
    assert!(streams(&mut watched_app).is_empty());
    assert_eq!(feeds(&mut watched_app), 0);
    let view = |app: &App, e| app.world().get::<ActionView>(e).cloned();
    assert_eq!(view(&plain, b), view(&watched_app, b2));
}

#[test]
fn dropping_the_conversation_task_clears_its_stream() {
    let backend = town_script::town_script_backend(SEED).with_latency(Duration::from_millis(40));
    let client = LlmClient::new(Arc::new(backend));
    let clock = SimClock::default()
        .with_mode(TimeMode::Realtime)
        .with_speed(SimSpeed::X1);
    let (mut app, a, b) = two_personas(client, true, clock);
    let mut started = false;
    for _ in 0..MAX_FRAMES {
        app.update();
        let frame = streams(&mut app);
        check_frame(&frame, a, b);
        if frame.first().is_some_and(|(_, s)| !s.lines.is_empty()) {
            started = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    assert!(started, "a line was finished while the conversation ran");
    assert_eq!(feeds(&mut app), 1);
    // Cancelling = dropping the task.
    app.world_mut().entity_mut(a).remove::<Conversing>();
    app.update();
    assert!(streams(&mut app).is_empty(), "no stale line is left behind");
    assert_eq!(feeds(&mut app), 0);
    assert_eq!(landed_chat(&app, a), None);
}

#[cfg(feature = "http")]
mod http {
    use super::*;
    use bevy_generative_agents::llm::{HttpBackend, HttpConfig};
    use bevy_generative_agents::prompt::PromptLibrary;
    use bevy_generative_agents::testing::fake_openai::{
        FakeOpenAi, FakeOpenAiConfig, PromptKindMatcher, chat_request_from_body, scripted_answers,
    };

    fn server() -> FakeOpenAi {
        let answers = scripted_answers(
            town_script::town_script_backend(SEED),
            &PromptLibrary::default(),
        );
        FakeOpenAi::start(
            FakeOpenAiConfig::new(answers)
                .with_latency(Duration::from_millis(2))
                // Streamed answers arrive a word at a time, well apart.
                .with_sse_pause(Duration::from_millis(25)),
        )
        .expect("fake server starts")
    }

    fn client(server: &FakeOpenAi) -> LlmClient {
        let backend = HttpBackend::new(HttpConfig {
            max_retries: 0,
            worker_threads: 1,
            timeout: Duration::from_secs(20),
            ..HttpConfig::new(server.base_url(), "fake-model")
        })
        .expect("backend");
        LlmClient::new(Arc::new(backend))
    }

    fn realtime() -> SimClock {
        SimClock::default()
            .with_mode(TimeMode::Realtime)
            .with_speed(SimSpeed::X1)
    }

    /// `(kind, streamed)` of every chat request the server saw.
    fn chat_requests(server: &FakeOpenAi) -> Vec<(String, bool)> {
        let kinds = PromptKindMatcher::new(&PromptLibrary::default());
        server
            .requests()
            .into_iter()
            .filter(|r| r.path.ends_with("/chat/completions"))
            .map(|r| {
                let body = r.json().expect("JSON body");
                let streamed = body.get("stream").and_then(|s| s.as_bool()) == Some(true);
                (chat_request_from_body(&body, &kinds).kind, streamed)
            })
            .collect()
    }

    #[test]
    fn partial_lines_reach_the_ecs_before_the_chat_lands() {
        let server = server();
        let (mut app, a, b) = two_personas(client(&server), true, realtime());
        let mut partials: Vec<(usize, String)> = Vec::new();
        let chat = run_until_landed(&mut app, a, Duration::from_millis(3), |frame| {
            partials.extend(check_frame(&frame, a, b));
        });
        // Nothing partial is left once the chat has landed, then or later.
        assert!(streams(&mut app).is_empty(), "stale stream after landing");
        assert_eq!(feeds(&mut app), 0);
        for _ in 0..5 {
            app.update();
        }
        assert!(streams(&mut app).is_empty());

        assert!(chat.len() >= 2, "{chat:?}");
        // Every partial line was the start of the line finally said…
        for (line, partial) in &partials {
            let said = &chat[*line].1;
            assert!(
                said.starts_with(partial.as_str()),
                "line {line}: {partial:?} is not the start of {said:?}"
            );
        }
        // …and some were seen strictly before the whole line was there.
        let strict = partials
            .iter()
            .filter(|(line, partial)| partial.len() < chat[*line].1.len())
            .count();
        assert!(strict > 0, "no strict prefix seen: {partials:?}");
        let lines_seen: std::collections::BTreeSet<usize> =
            partials.iter().map(|(line, _)| *line).collect();
        assert!(
            lines_seen.len() >= 2,
            "partials of several lines: {partials:?}"
        );

        // Only the utterances were streamed.
        let requests = chat_requests(&server);
        let utterances = requests
            .iter()
            .filter(|(kind, _)| kind == "next_utterance")
            .count();
        assert_eq!(utterances, chat.len());
        for (kind, streamed) in &requests {
            assert_eq!(*streamed, kind == "next_utterance", "{kind}");
        }
    }

    #[test]
    fn unwatched_http_conversations_stream_nothing() {
        let server = server();
        let (mut app, a, _) = two_personas(client(&server), false, realtime());
        let mut seen = 0;
        let chat = run_until_landed(&mut app, a, Duration::from_millis(3), |frame| {
            seen += frame.len();
        });
        assert!(chat.len() >= 2);
        assert_eq!(seen, 0);
        assert!(chat_requests(&server).iter().all(|(_, streamed)| !streamed));
    }
}
