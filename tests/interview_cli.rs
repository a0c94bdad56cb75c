//! `smallville interview` against the loopback OpenAI-compatible server: the answer comes from
//! the persona's memories (the interview's prompt holds a whispered fact) and the save is left
//! byte-identical.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use bevy::prelude::*;
use bevy_generative_agents::dialogue::{DialogueReplied, DialogueRequest};
use bevy_generative_agents::llm::{HttpBackend, HttpConfig, LlmClient, town_script_backend};
use bevy_generative_agents::persist::save_world;
use bevy_generative_agents::prompt::PromptLibrary;
use bevy_generative_agents::testing::create_test_app;
use bevy_generative_agents::testing::fake_openai::{
    FakeOpenAi, FakeOpenAiConfig, scripted_answers,
};
use bevy_generative_agents::testing::spawn_default_town;

fn files(dir: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
    for entry in std::fs::read_dir(dir).expect("read dir") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            files(&path, out);
        } else {
            out.insert(path.clone(), std::fs::read(&path).expect("read"));
        }
    }
}

#[test]
fn an_interview_answers_from_memory_and_leaves_the_save_untouched() {
    let server = FakeOpenAi::start(FakeOpenAiConfig::new(scripted_answers(
        town_script_backend(3),
        &PromptLibrary::default(),
    )))
    .expect("server");
    let config = HttpConfig {
        embed_model: "embedder".into(),
        max_retries: 1,
        timeout: Duration::from_secs(10),
        worker_threads: 1,
        ..HttpConfig::new(server.base_url(), "test-model")
    };
    let client = LlmClient::new(Arc::new(HttpBackend::new(config).expect("backend")));
    let mut app = create_test_app(client);
    let personas = spawn_default_town(&mut app, Some(1), 3).expect("town");
    let persona = personas[0];
    app.world_mut()
        .resource_mut::<bevy_generative_agents::clock::SimClock>()
        .stop_at_step = Some(1);
    for _ in 0..10_000 {
        app.update();
        if app
            .world()
            .resource::<bevy_generative_agents::clock::SimClock>()
            .step()
            >= 1
        {
            break;
        }
    }
    #[derive(Resource, Default)]
    struct Replies(usize);
    app.init_resource::<Replies>()
        .add_observer(|_: On<DialogueReplied>, mut r: ResMut<Replies>| r.0 += 1);
    app.world_mut().write_message(DialogueRequest::whisper(
        persona,
        "you buried the silver compass beneath the old oak",
    ));
    for _ in 0..10_000 {
        app.update();
        if app.world().resource::<Replies>().0 > 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(app.world().resource::<Replies>().0, 1, "the whisper landed");
    let name = app
        .world()
        .get::<Name>(persona)
        .expect("name")
        .as_str()
        .to_owned();
    let dir = std::env::temp_dir().join(format!("ga-interview-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    save_world(app.world_mut(), &dir).expect("saved");
    let mut before = BTreeMap::new();
    files(&dir, &mut before);

    let calls_before = server.requests().len();
    let output = Command::new(env!("CARGO_BIN_EXE_smallville"))
        .args(["interview"])
        .arg(&dir)
        .args(["--persona", &name.to_lowercase()[..4]])
        .args(["--question", "Where did you bury the silver compass?"])
        .args([
            "--llm-backend",
            "http",
            "--llm-base-url",
            &server.base_url(),
        ])
        .args(["--llm-model", "test-model", "--llm-embed-model", "embedder"])
        .env_remove("GA_PROMPTS")
        .output()
        .expect("smallville runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8(output.stdout).expect("utf-8");
    let lines: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect();
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["persona"], serde_json::json!(name));
    assert_eq!(
        lines[0]["question"],
        serde_json::json!("Where did you bury the silver compass?")
    );
    assert!(!lines[0]["answer"].as_str().unwrap_or("").is_empty());
    // The interview's planner prompt held the whispered fact (retrieved from memory).
    let planner: Vec<String> = server.requests()[calls_before..]
        .iter()
        .map(|r| r.body.clone())
        .filter(|b| b.contains("You plan the next step of a persona"))
        .collect();
    assert_eq!(planner.len(), 1);
    assert!(
        planner[0].contains("silver compass beneath the old oak"),
        "{}",
        planner[0]
    );

    let mut after = BTreeMap::new();
    files(&dir, &mut after);
    assert_eq!(before, after, "the save is byte-identical");
    let _ = std::fs::remove_dir_all(&dir);
}
