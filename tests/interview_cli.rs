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
    FakeOpenAi, FakeOpenAiConfig, hostile_messages, scripted_answers,
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

/// Issue 48: `smallville interview` against a hostile server (the loopback server's hostile
/// mode, which knows the key it is sent) with more than 100 hostile questions: no byte run of
/// the key reaches stdout or stderr, no answer carries a `<think>`/`<prestart>` tag, and no
/// tool but the read-only ones runs.
#[test]
fn an_interview_with_a_hostile_server_and_hostile_questions_leaks_nothing() {
    const KEY: &str = "sk-hostile-interview-4f1e9a2c77";
    // A save to interview, made with an honest server.
    let honest = FakeOpenAi::start(FakeOpenAiConfig::new(scripted_answers(
        town_script_backend(3),
        &PromptLibrary::default(),
    )))
    .expect("server");
    let config = HttpConfig {
        embed_model: "embedder".into(),
        max_retries: 1,
        timeout: Duration::from_secs(10),
        worker_threads: 1,
        ..HttpConfig::new(honest.base_url(), "test-model")
    };
    let client = LlmClient::new(Arc::new(HttpBackend::new(config).expect("backend")));
    let mut app = create_test_app(client);
    let personas = spawn_default_town(&mut app, Some(1), 3).expect("town");
    let name = app
        .world()
        .get::<Name>(personas[0])
        .expect("name")
        .as_str()
        .to_owned();
    let dir = std::env::temp_dir().join(format!("ga-interview-hostile-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    save_world(app.world_mut(), &dir).expect("saved");

    let questions: Vec<String> = hostile_messages()
        .iter()
        .map(|m| {
            m.replace(['\n', '\r'], " ")
                .chars()
                .take(3_000)
                .collect::<String>()
        })
        .map(|m| m.trim().to_owned())
        .filter(|m| !m.is_empty())
        .collect();
    assert!(questions.len() >= 100, "{}", questions.len());
    let file = dir.with_extension("questions.txt");
    std::fs::write(&file, questions.join("\n")).expect("questions");

    let hostile = FakeOpenAi::start(
        FakeOpenAiConfig::new(scripted_answers(
            town_script_backend(3),
            &PromptLibrary::default(),
        ))
        .hostile(KEY),
    )
    .expect("hostile server");
    let output = Command::new(env!("CARGO_BIN_EXE_smallville"))
        .arg("interview")
        .arg(&dir)
        .args(["--persona", &name])
        .arg("--questions")
        .arg(&file)
        .args([
            "--llm-backend",
            "http",
            "--llm-base-url",
            &hostile.base_url(),
        ])
        .args(["--llm-model", "test-model", "--llm-embed-model", "embedder"])
        .env("GA_LLM_API_KEY", KEY)
        .env_remove("OPENAI_API_KEY")
        .env_remove("GA_PROMPTS")
        .output()
        .expect("smallville runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    for (what, text) in [("stdout", &stdout), ("stderr", &stderr)] {
        let piece = KEY
            .as_bytes()
            .windows(8)
            .find(|p| text.as_bytes().windows(8).any(|w| w == *p));
        assert_eq!(piece, None, "a piece of the key in {what}");
    }
    let lines: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect();
    assert_eq!(lines.len(), questions.len());
    let read_only = [
        "recall_memories",
        "where_is",
        "what_do_you_see",
        "what_time_is_it",
    ];
    let mut tool_calls = 0;
    for line in &lines {
        let answer = line["answer"].as_str().expect("an answer").to_lowercase();
        assert!(
            !answer.contains("<think") && !answer.contains("<prestart"),
            "{answer}"
        );
        for tool in line["tools"].as_array().expect("tools") {
            tool_calls += 1;
            let shown = tool.to_string().to_lowercase();
            assert!(
                !shown.contains("<think") && !shown.contains("<prestart"),
                "{shown}"
            );
            if tool["ok"] == serde_json::json!(true) {
                let name = tool["tool"].as_str().unwrap_or_default();
                assert!(read_only.contains(&name), "{name} ran in an interview");
            }
        }
    }
    assert!(tool_calls >= 100, "{tool_calls} hostile tool calls");
    // The hostile server was sent the key only in the Authorization header.
    for request in hostile.requests() {
        assert!(!request.body.contains(KEY));
    }
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(&file);
}
