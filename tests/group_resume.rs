//! A town saved while its people talk in groups resumes the talk (SPEC §8, §11): the open
//! streams, each persona's attention, the lines heard and not yet remembered all come back, so
//! a Lockstep run on the offline town script goes on exactly as if it had never stopped —
//! loaded into a fresh app, and loaded back into the very world that moved on (whose persona
//! entities, and streams of a later moment, the load replaces).
//!
//! The town is the bench's crowd at a small size: twenty-five personas in the default town,
//! where the breakfast places fill up and people gather in threes and more.

use std::path::Path;

mod common;

use bevy::prelude::*;
use bevy_generative_agents::clock::{SimClock, SimSpeed};
use bevy_generative_agents::group::{
    ChatState, GroupAttention, GroupCommand, GroupLineSpoken, GroupSettings, GroupStreams,
};
use bevy_generative_agents::llm::{
    BoxFuture, ChatRequest, ChatResponse, LlmBackend, LlmClient, LlmError,
};
use bevy_generative_agents::persist::{
    PersistError, SaveIntegrity, load_into_world, load_into_world_with, save_world,
};
use bevy_generative_agents::testing::{
    create_test_app, scripted_client, spawn_crowd, synthetic_sheets,
};
use bevy_generative_agents::world::TownMap;
use common::{TempDir, assert_same_save, normalised_tree};

const SEED: u64 = 3;
const PERSONAS: usize = 25;

fn map() -> TownMap {
    TownMap::load_tmx(TownMap::default_town_path()).expect("default town")
}

/// An app with the crowd's simulation plugins and no personas yet.
fn empty_app() -> App {
    let mut app = create_test_app(scripted_client(SEED));
    app.insert_resource(map());
    app.finish();
    app.cleanup();
    app
}

/// The town script, except that embedding the game's post takes a third of a second: a clock
/// that did not wait for it would have run on by then.
struct SlowPost(bevy_generative_agents::llm::ScriptedBackend);

impl LlmBackend for SlowPost {
    fn name(&self) -> &str {
        self.0.name()
    }
    fn model(&self) -> &str {
        self.0.model()
    }
    fn chat(&self, request: ChatRequest) -> BoxFuture<'_, Result<ChatResponse, LlmError>> {
        self.0.chat(request)
    }
    fn embed(&self, texts: Vec<String>) -> BoxFuture<'_, Result<Vec<Vec<f32>>, LlmError>> {
        if texts.iter().any(|t| t.contains(POST)) {
            std::thread::sleep(std::time::Duration::from_millis(300));
        }
        self.0.embed(texts)
    }
    fn embedding_model(&self) -> &str {
        self.0.embedding_model()
    }
    fn embedding_dim(&self) -> usize {
        self.0.embedding_dim()
    }
}

/// What the game posts (see [`a_post_is_remembered_when_it_was_said`]).
const POST: &str = "The summer fair is on Saturday at noon.";

/// [`empty_app`] whose model is [`SlowPost`], and whose listeners remember each line apart
/// (a passage of one line: the post's memory is the post's, at its time).
fn empty_app_slow_to_embed_the_post() -> App {
    let backend = bevy_generative_agents::llm::town_script_backend(SEED);
    let mut app = create_test_app(LlmClient::new(std::sync::Arc::new(SlowPost(backend))));
    app.insert_resource(map());
    app.insert_resource(GroupSettings {
        passage_lines: 1,
        ..GroupSettings::default()
    });
    app.finish();
    app.cleanup();
    app
}

fn crowd() -> App {
    let mut app = create_test_app(scripted_client(SEED));
    let sheets = synthetic_sheets(PERSONAS).expect("sheets");
    spawn_crowd(&mut app, map(), &sheets, SEED).expect("crowd");
    app.finish();
    app.cleanup();
    app
}

/// Runs until the clock has taken `step` (exactly: the clock stops there).
fn run_to(app: &mut App, step: u64) {
    app.world_mut().resource_mut::<SimClock>().stop_at_step = Some(step);
    app.world_mut().resource_mut::<SimClock>().speed = SimSpeed::Max;
    for _ in 0..2_000_000 {
        if app.world().resource::<SimClock>().step() >= step {
            return;
        }
        app.update();
    }
    panic!("the clock stalled before step {step}");
}

/// Saves the world into `dir`, letting the last step's calls land first (the clock is held).
fn save(app: &mut App, dir: &Path) {
    for _ in 0..10_000 {
        match save_world(app.world_mut(), dir) {
            Ok(_) => return,
            Err(PersistError::Busy(_)) => app.update(),
            Err(err) => panic!("save failed: {err}"),
        }
    }
    panic!("the town never became saveable");
}

/// Lines said in open streams, and personas following a stream (`Chat` or `Focused`).
fn talk(app: &mut App) -> (usize, usize) {
    let lines = app
        .world()
        .resource::<GroupStreams>()
        .iter()
        .map(|s| s.lines.len())
        .sum();
    let mut query = app.world_mut().query::<&GroupAttention>();
    let following = query
        .iter(app.world())
        .filter(|g| {
            g.attention
                .flows
                .values()
                .any(|f| f.state != ChatState::Absent)
        })
        .count();
    (lines, following)
}

/// A game's post into a stream is embedded by a call of no persona: a Lockstep clock waits for
/// it as for a persona's call, so the line becomes a memory of its listeners at the time it was
/// said — on every run, however long the embedding takes.
fn a_post_is_remembered_when_it_was_said(app: &mut App, dir: &Path) {
    let stream = app
        .world()
        .resource::<GroupStreams>()
        .iter()
        .find(|s| !s.members.is_empty())
        .map(|s| s.key.clone())
        .expect("an open stream");
    let text = POST;
    let mut spoken = bevy::ecs::message::MessageCursor::<GroupLineSpoken>::default();
    spoken
        .read(app.world().resource::<Messages<GroupLineSpoken>>())
        .for_each(drop);
    app.world_mut().write_message(GroupCommand::Post {
        stream,
        speaker: "Mayor".into(),
        text: text.into(),
    });
    // The clock runs on (`run_to` left it paused at its stop).
    app.world_mut().resource_mut::<SimClock>().stop_at_step = None;
    app.world_mut().resource_mut::<SimClock>().speed = SimSpeed::Max;
    let mut said_at = None;
    for _ in 0..10_000 {
        app.update();
        if said_at.is_none() {
            said_at = spoken
                .read(app.world().resource::<Messages<GroupLineSpoken>>())
                .find(|line| line.text == text)
                .map(|line| line.time);
        }
        // A game minute past the post, so its listeners have stored it.
        let now = app.world().resource::<SimClock>().now();
        if said_at.is_some_and(|at| now >= at + chrono::Duration::minutes(1)) {
            break;
        }
    }
    let said_at = said_at.expect("the post was said");
    let said_at = said_at.format("%Y-%m-%dT%H:%M:%S").to_string();
    save(app, dir);
    let mut heard = 0;
    for (file, bytes) in normalised_tree(dir) {
        if file.file_name().and_then(|n| n.to_str()) != Some("nodes.json") {
            continue;
        }
        let nodes: Vec<serde_json::Value> = serde_json::from_slice(&bytes).expect("nodes");
        for node in nodes {
            if node["description"]
                .as_str()
                .is_some_and(|d| d.contains(text))
            {
                heard += 1;
                assert_eq!(
                    node["created"], said_at,
                    "{file:?} remembers the post at another time"
                );
            }
        }
    }
    assert!(
        heard >= 2,
        "the post reached its listeners ({heard} heard it)"
    );
}

#[test]
fn a_town_saved_mid_conversation_resumes_it_exactly() {
    let temp = TempDir::new("group-resume");
    let root = temp.path();
    let mut town = crowd();
    // 09:00 on the first day (10 s a step), when the breakfast places are full.
    let at = 9 * 360;
    run_to(&mut town, at);
    save(&mut town, &root.join("at"));
    let (lines, following) = talk(&mut town);
    assert!(
        lines >= 3 && following >= 3,
        "the save is taken mid-conversation ({lines} lines open, {following} following)"
    );
    let saved: serde_json::Value = serde_json::from_slice(
        &std::fs::read(root.join("at").join("groups.json")).expect("groups.json"),
    )
    .expect("json");
    assert!(
        !saved["streams"].as_array().expect("streams").is_empty(),
        "groups.json holds the open streams"
    );

    // The run that never stops: 20 game minutes on.
    let later = at + 120;
    run_to(&mut town, later);
    save(&mut town, &root.join("never-stopped"));

    // Loaded into a fresh app.
    let mut fresh = empty_app();
    load_into_world(fresh.world_mut(), &root.join("at")).expect("load");
    assert_eq!(talk(&mut fresh), (lines, following), "the talk is back");
    run_to(&mut fresh, later);
    save(&mut fresh, &root.join("fresh"));
    assert_same_save(
        &root.join("never-stopped"),
        &root.join("fresh"),
        "fresh app",
    );
    let mut slow = empty_app_slow_to_embed_the_post();
    load_into_world(slow.world_mut(), &root.join("at")).expect("load");
    a_post_is_remembered_when_it_was_said(&mut slow, &root.join("posted"));

    // Loaded back into the world that moved on: its personas and streams are replaced, and
    // the personas' new entities (freed ones handed out again) keep the saved order.
    load_into_world(town.world_mut(), &root.join("at")).expect("load back");
    assert_eq!(
        talk(&mut town),
        (lines, following),
        "the later talk is gone"
    );
    run_to(&mut town, later);
    save(&mut town, &root.join("same-world"));
    assert_same_save(
        &root.join("never-stopped"),
        &root.join("same-world"),
        "same world",
    );
    an_older_save_loads_with_no_group_conversation(&root.join("at"));
}

/// A version 2 save (before group conversations were kept) loads as having none open.
fn an_older_save_loads_with_no_group_conversation(save: &Path) {
    std::fs::remove_file(save.join("groups.json")).expect("groups.json");
    for entry in std::fs::read_dir(save.join("personas")).expect("personas") {
        std::fs::remove_file(entry.expect("persona").path().join("group.json")).expect("group");
    }
    let meta = save.join("meta.json");
    let mut value: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&meta).expect("meta")).expect("json");
    value["format_version"] = serde_json::json!(2);
    std::fs::write(&meta, value.to_string()).expect("meta written");
    let mut app = empty_app();
    load_into_world_with(app.world_mut(), save, SaveIntegrity::TrustEdited)
        .expect("a version 2 save loads");
    assert_eq!(talk(&mut app), (0, 0), "no conversation is open");
    run_to(&mut app, 9 * 360 + 6);
}

/// Group talk is seen by bystanders (SPEC §16): while people talk at the breakfast places, the
/// talk is a tile event; its members take part in it (and so do not perceive it as news),
/// and someone the circle has no room for — circles of two here — remembers seeing it.
#[test]
fn a_talk_is_a_tile_event_bystanders_remember_and_members_do_not() {
    use bevy_generative_agents::persona::{Mind, Persona, TakingPart};
    let mut town = crowd();
    town.world_mut().resource_mut::<GroupSettings>().max_members = 2;
    run_to(&mut town, 9 * 360);
    let talks: Vec<(String, Vec<Entity>)> = {
        let streams = town.world().resource::<GroupStreams>();
        let map = town.world().resource::<TownMap>();
        streams
            .iter()
            .filter_map(|s| {
                let subject = format!("the talk at {}", s.key.label());
                map.tiles()
                    .any(|(_, t)| t.events.iter().any(|e| e.subject == subject))
                    .then(|| (subject, s.members.iter().copied().collect()))
            })
            .collect()
    };
    assert!(!talks.is_empty(), "no talk shows on the map at 09:00");
    for (subject, members) in &talks {
        for member in members {
            let part = town.world().get::<TakingPart>(*member);
            assert!(
                part.is_some_and(|p| p.0.contains(subject)),
                "a member of {subject} does not take part in it"
            );
        }
    }
    let mut q = town
        .world_mut()
        .query_filtered::<(Entity, &Mind), With<Persona>>();
    let saw: Vec<Entity> = q
        .iter(town.world())
        .filter(|(_, mind)| {
            mind.get().is_some_and(|m| {
                m.associative
                    .events()
                    .any(|n| n.subject.starts_with("the talk at "))
            })
        })
        .map(|(e, _)| e)
        .collect();
    assert!(!saw.is_empty(), "no bystander remembers a talk");
}
