//! SPEC §12 R4: an API key never leaves the `Authorization` header. A real headless run
//! (`smallville run`, the HTTP backend) against the loopback OpenAI server, with a canary key,
//! trace-level logs, a response cache file, the report and the final save — and a server that
//! sometimes answers with errors quoting the key back (as some proxies do): no byte of the key
//! may appear in any file the run writes, in its stdout or stderr, or in any request body.
//! The summary also names the map by a relative path, not this machine's.
#![cfg(all(feature = "http", feature = "cli"))]

use std::path::{Path, PathBuf};
use std::process::Command;

use bevy_generative_agents::prompt::PromptLibrary;
use bevy_generative_agents::testing::ScriptedBackend;
use bevy_generative_agents::testing::fake_openai::{
    FakeOpenAi, FakeOpenAiConfig, FakeReply, scripted_answers,
};

const BIN: &str = env!("CARGO_BIN_EXE_smallville");

/// Unlikely to occur by chance, in whole or in any 8-byte piece.
const CANARY: &str = "sk-canary-7f3a9c1e5b2d4680-QZXWVUTS";

/// Every file under `dir`, recursively.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(files(&path));
        } else {
            out.push(path);
        }
    }
    out
}

/// The first 8-byte piece of the canary found in `bytes`.
fn canary_piece(bytes: &[u8]) -> Option<String> {
    CANARY
        .as_bytes()
        .windows(8)
        .find(|piece| bytes.windows(piece.len()).any(|w| w == *piece))
        .map(|piece| String::from_utf8_lossy(piece).into_owned())
}

#[test]
fn no_byte_of_the_api_key_reaches_outputs_logs_or_request_bodies() {
    let root = std::env::temp_dir().join(format!("bga-secrets-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let out = root.join("out");
    let cache = root.join("cache").join("responses.jsonl");

    let library = PromptLibrary::default();
    let answers = scripted_answers(ScriptedBackend::new(7), &library);
    // Some calls fail with an error quoting the request's Authorization header back.
    let server = FakeOpenAi::start(FakeOpenAiConfig::new(answers).with_script(|n, request| {
        let auth = request
            .header("authorization")
            .unwrap_or_default()
            .to_owned();
        match n % 9 {
            4 => Some(FakeReply::error(401, &format!("invalid key: {auth}"))),
            7 => Some(FakeReply::raw(503, format!("upstream busy for {auth}"))),
            _ => None,
        }
    }))
    .expect("server");

    let output = Command::new(BIN)
        .args(["run", "--hours", "0.5", "--personas", "2", "--no-progress"])
        .args(["--save-every", "60"])
        .args([
            "--llm-backend",
            "http",
            "--llm-base-url",
            &server.base_url(),
        ])
        .args(["--llm-max-retries", "1", "--llm-timeout", "10"])
        .arg("--llm-cache")
        .arg(&cache)
        .arg("--out")
        .arg(&out)
        .env("GA_LLM_API_KEY", CANARY)
        .env("RUST_LOG", "trace")
        .env("RUST_BACKTRACE", "1")
        .output()
        .expect("spawn smallville");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "run failed: {}",
        &stderr[stderr.len().saturating_sub(4000)..]
    );

    // The test means something: the key was sent, the logs are at trace level, the server's
    // errors happened, and every output exists.
    let requests = server.requests();
    assert!(requests.len() > 20, "{} requests", requests.len());
    assert!(
        requests
            .iter()
            .all(|r| r.header("authorization") == Some(&format!("Bearer {CANARY}"))),
        "the key was not sent on every request"
    );
    assert!(stderr.contains("TRACE"), "no trace-level logs");
    let written = files(&out);
    for name in [
        "movement.jsonl",
        "summary.json",
        "usage.json",
        "report.html",
    ] {
        assert!(
            written
                .iter()
                .any(|p| p.file_name().is_some_and(|n| n == name)),
            "{name} missing from {written:?}"
        );
    }
    assert!(
        written
            .iter()
            .any(|p| p.components().any(|c| c.as_os_str() == "save"))
    );
    assert!(cache.exists());

    let mut leaks = Vec::new();
    for path in written.iter().chain([&cache]) {
        let bytes = std::fs::read(path).expect("read output");
        if let Some(piece) = canary_piece(&bytes) {
            leaks.push(format!("{}: {piece:?}", path.display()));
        }
    }
    for (stream, bytes) in [("stdout", &output.stdout), ("stderr", &output.stderr)] {
        if let Some(piece) = canary_piece(bytes) {
            leaks.push(format!("{stream}: {piece:?}"));
        }
    }
    for request in &requests {
        if let Some(piece) = canary_piece(request.body.as_bytes()) {
            leaks.push(format!(
                "body of {} {}: {piece:?}",
                request.method, request.path
            ));
        }
    }
    assert!(leaks.is_empty(), "the key leaked: {leaks:#?}");

    // Shareable outputs name the map relatively.
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("summary.json")).expect("summary"))
            .expect("summary json");
    let map = summary["run"]["map"].as_str().unwrap_or_default();
    assert!(
        !map.is_empty() && !Path::new(map).is_absolute(),
        "summary map {map:?}"
    );
    let _ = std::fs::remove_dir_all(&root);
}
