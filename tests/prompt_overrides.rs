//! Edited prompts without a rebuild: a folder of template overrides (`--prompts DIR`,
//! `GA_PROMPTS`, the LLM config file's `"prompts"` key) changes what reaches the model, is
//! recorded in `usage.json`, the report and the save, and a broken file is refused — naming the
//! file and the placeholder — before anything is written, through the library and the real
//! `smallville` binary.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use bevy_generative_agents::output::{RunError, RunOptions, run};
use bevy_generative_agents::prompt::{EMBEDDED_V1, HEADER_MARKER, PromptLibrary, TemplateError};

const BIN: &str = env!("CARGO_BIN_EXE_smallville");

/// A line only the edited wake-up prompt has.
const MARKER: &str = "EDITED-WAKE-PROMPT-7d1f: think about the morning light.";

/// A fresh folder under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("bga-prompt-overrides-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        Self(dir)
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The compiled-in text of `name`.
fn compiled(name: &str) -> &'static str {
    EMBEDDED_V1
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, text)| *text)
        .expect("a shipped template")
}

/// The wake-up template with [`MARKER`] as the first line of its prompt text.
fn edited_wake_up() -> String {
    compiled("wake_up_hour").replacen(HEADER_MARKER, &format!("{HEADER_MARKER}\n{MARKER}"), 1)
}

/// A folder `prompts` under `root` holding `wake_up_hour.txt` with `text`.
fn prompts_dir(root: &Path, text: &str) -> PathBuf {
    let dir = root.join("prompts");
    std::fs::create_dir_all(&dir).expect("prompts dir");
    std::fs::write(dir.join("wake_up_hour.txt"), text).expect("write override");
    dir
}

/// The wake-up template asking for an input the prompt never fills.
fn broken_wake_up() -> String {
    format!("{}\nAlso consider !<INPUT 7>!.", compiled("wake_up_hour"))
}

fn smallville(args: &[impl AsRef<std::ffi::OsStr>], env: &[(&str, &Path)]) -> Output {
    let mut command = Command::new(BIN);
    command
        .args(args)
        .env_remove("GA_PROMPTS")
        .env_remove("GA_LLM_BASE_URL")
        .env_remove("GA_LLM_API_KEY")
        .env_remove("OPENAI_API_KEY")
        .env_remove("GA_LLM_BACKEND")
        .env("GA_NO_MODEL_FETCH", "1");
    for (name, value) in env {
        command.env(name, value);
    }
    command.output().expect("run smallville")
}

/// A broken override is refused — naming the file and the placeholder — before the run
/// creates its output folder, through the library.
#[test]
fn a_broken_override_is_refused_by_the_library_before_anything_is_written() {
    let root = TempDir::new("lib-broken");
    let prompts = prompts_dir(root.path(), &broken_wake_up());
    let out = root.path().join("out");
    let mut options = RunOptions::new(0.05, &out).with_personas(1);
    options.report = false;
    options.llm.backend = bevy_generative_agents::llm::BackendChoice::Scripted;
    options.llm.prompts = Some(prompts.clone());
    let err = run(&options).expect_err("a broken override");
    let message = err.to_string();
    assert!(
        message.contains(&prompts.join("wake_up_hour.txt").display().to_string())
            && message.contains("!<INPUT 7>!"),
        "{message}"
    );
    assert!(matches!(err, RunError::Setup(_)), "{err:?}");
    assert!(!out.exists(), "nothing may be written for a refused run");

    // The same through the library type itself.
    let refused = PromptLibrary::load(Some(&prompts));
    assert!(
        matches!(&refused, Err(TemplateError::Override { path, .. })
            if path.ends_with("wake_up_hour.txt")),
        "{refused:?}"
    );
}

/// The binary refuses a broken override from the flag, the environment and the config file
/// alike, with the file and placeholder named, and writes nothing.
#[test]
fn the_binary_refuses_a_broken_override_from_flag_env_and_config_file() {
    let root = TempDir::new("bin-broken");
    let prompts = prompts_dir(root.path(), &broken_wake_up());
    let config = root.path().join("llm.json");
    std::fs::write(
        &config,
        serde_json::json!({ "prompts": prompts }).to_string(),
    )
    .expect("config");
    let out = root.path().join("out");
    let out_s = out.to_str().expect("utf-8 path");
    let prompts_s = prompts.to_str().expect("utf-8 path");
    let config_s = config.to_str().expect("utf-8 path");
    let base = [
        "run",
        "--hours",
        "0.05",
        "--personas",
        "1",
        "--backend",
        "scripted",
        "--no-progress",
        "--no-report",
        "--out",
        out_s,
    ];
    let with = |extra: &[&str]| -> Vec<String> {
        base.iter().chain(extra).map(|s| (*s).to_owned()).collect()
    };
    let cases: Vec<(&str, Output)> = vec![
        ("flag", smallville(&with(&["--prompts", prompts_s]), &[])),
        ("env", smallville(&with(&[]), &[("GA_PROMPTS", &prompts)])),
        (
            "config file",
            smallville(&with(&["--llm-config", config_s]), &[]),
        ),
        (
            "demo",
            smallville(
                &[
                    "demo",
                    "--hours",
                    "0.05",
                    "--personas",
                    "1",
                    "--prompts",
                    prompts_s,
                ],
                &[],
            ),
        ),
    ];
    for (how, output) in cases {
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{how}: {stderr}");
        assert!(
            stderr.contains("wake_up_hour.txt") && stderr.contains("!<INPUT 7>!"),
            "{how}: {stderr}"
        );
        assert!(!out.exists(), "{how}: nothing may be written");
    }

    // The flag beats the environment: a good folder on the flag runs despite a broken one in
    // GA_PROMPTS.
    let good_root = TempDir::new("bin-good");
    let good = prompts_dir(good_root.path(), &edited_wake_up());
    let output = smallville(
        &with(&["--prompts", good.to_str().expect("utf-8 path")]),
        &[("GA_PROMPTS", &prompts)],
    );
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let usage: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("usage.json")).expect("usage.json"))
            .expect("usage json");
    assert_eq!(usage["prompts"]["version"], "v1");
    assert_eq!(
        usage["prompts"]["overrides"][0]["file"], "wake_up_hour.txt",
        "{usage}"
    );
}

/// The prompt texts of every chat completion the server received.
#[cfg(feature = "http")]
fn chat_prompts(server: &bevy_generative_agents::testing::fake_openai::FakeOpenAi) -> Vec<String> {
    server
        .requests()
        .iter()
        .filter(|r| r.path.ends_with("/chat/completions"))
        .map(|r| {
            let body = r.json().expect("json body");
            body["messages"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|m| m["content"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .collect()
}

/// A prompt override changes the request that reaches the OpenAI-compatible server (and only
/// the template it overrides), and the run records it in `usage.json`, the report and the save.
#[cfg(feature = "http")]
#[test]
fn an_override_changes_the_request_that_reaches_the_server_and_is_recorded() {
    use bevy_generative_agents::llm::{BackendChoice, town_script_backend};
    use bevy_generative_agents::output::UsageFile;
    use bevy_generative_agents::testing::fake_openai::{
        FakeOpenAi, FakeOpenAiConfig, scripted_answers,
    };
    use sha2::{Digest, Sha256};

    let root = TempDir::new("http");
    let text = edited_wake_up();
    let prompts = prompts_dir(root.path(), &text);
    let library = PromptLibrary::load(Some(&prompts)).expect("a valid override");
    let sha256: String = Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();

    let start = |library: &PromptLibrary| {
        FakeOpenAi::start(FakeOpenAiConfig::new(scripted_answers(
            town_script_backend(1),
            library,
        )))
        .expect("server")
    };
    let options = |server: &FakeOpenAi, out: &Path, prompts: Option<&Path>| {
        let mut options = RunOptions::new(0.05, out).with_personas(1).with_seed(1);
        options.llm.backend = BackendChoice::Http;
        options.llm.base_url = Some(server.base_url());
        options.llm.prompts = prompts.map(Path::to_path_buf);
        options
    };

    // Compiled-in prompts: the wake-up question is asked in its shipped words.
    let plain_server = start(&PromptLibrary::default());
    let plain = run(&options(&plain_server, &root.path().join("plain"), None)).expect("plain run");
    let asked = chat_prompts(&plain_server);
    assert!(
        asked
            .iter()
            .any(|p| p.contains("usually wake up in the morning")),
        "{asked:#?}"
    );
    assert!(!asked.iter().any(|p| p.contains(MARKER)));
    assert!(plain.prompts.overrides.is_empty());

    // With the override: the same question, edited, filled with the persona's inputs.
    let server = start(&library);
    let out = root.path().join("edited");
    let report = run(&options(&server, &out, Some(&prompts))).expect("edited run");
    let asked = chat_prompts(&server);
    let wake: Vec<&String> = asked.iter().filter(|p| p.contains(MARKER)).collect();
    assert!(!wake.is_empty(), "{asked:#?}");
    assert!(
        wake.iter()
            .all(|p| p.contains("usually wake up in the morning") && !p.contains("!<INPUT")),
        "{wake:#?}"
    );
    // Other templates are untouched: the daily plan is asked in the same words in both runs.
    assert_eq!(
        asked.len(),
        chat_prompts(&plain_server).len(),
        "same questions, one of them edited"
    );

    // Recorded: usage.json, report.json and the save's meta.json.
    let expected = serde_json::json!({
        "version": "v1",
        "overrides": [{"file": "wake_up_hour.txt", "sha256": sha256}],
    });
    let usage: UsageFile =
        serde_json::from_slice(&std::fs::read(out.join("usage.json")).expect("usage.json"))
            .expect("usage.json parses");
    assert_eq!(usage.prompts, Some(report.prompts.clone()));
    assert_eq!(serde_json::to_value(&report.prompts).unwrap(), expected);
    assert_eq!(usage.usage, report.usage);
    let report_json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("report.json")).expect("report.json"))
            .expect("report json");
    assert_eq!(report_json["prompts"], expected);
    let html = std::fs::read_to_string(out.join("report.html")).expect("report.html");
    assert!(
        html.contains("v1 with 1 override: wake_up_hour.txt"),
        "the report names the override"
    );
    let meta: serde_json::Value = serde_json::from_slice(
        &std::fs::read(out.join("save").join("meta.json")).expect("meta.json"),
    )
    .expect("meta json");
    assert_eq!(meta["prompts"], expected);

    // The binary, pointed at the same server with --prompts, sends the edited prompt too.
    let bin_server = start(&library);
    let bin_out = root.path().join("bin");
    let output = smallville(
        &[
            "run",
            "--hours",
            "0.05",
            "--personas",
            "1",
            "--no-progress",
            "--no-report",
            "--llm-backend",
            "http",
            "--llm-base-url",
            &bin_server.base_url(),
            "--prompts",
            prompts.to_str().expect("utf-8 path"),
            "--out",
            bin_out.to_str().expect("utf-8 path"),
        ],
        &[],
    );
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(chat_prompts(&bin_server).iter().any(|p| p.contains(MARKER)));
}
