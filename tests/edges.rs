//! The edges of a run (issue 21): persona names a save would refuse, a save that fails at the
//! end, a run killed with SIGKILL, silent fallbacks and clamps, and edited saves — through the
//! library and the real `smallville` binary, on files these tests generate.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

mod common;

use bevy_generative_agents::llm::LlmConfig;
use bevy_generative_agents::output::{RunError, read_movement_log, run};
use bevy_generative_agents::persist::{
    PersistError, SaveIntegrity, build_app_from_save, build_app_from_save_with, decode,
    recover_interrupted_save,
};
use bevy_generative_agents::persona::default_personas_dir;
use common::{copy_tree, run_ok, scripted_run_options};

const BIN: &str = env!("CARGO_BIN_EXE_smallville");

fn temp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("bga-edges-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// The binary with no model configured anywhere (no env, an empty model cache, no fetch).
fn bin(home: &Path) -> Command {
    let mut command = Command::new(BIN);
    for (var, _) in std::env::vars() {
        if var.starts_with("GA_") || var == "OPENAI_API_KEY" || var == "XDG_CACHE_HOME" {
            command.env_remove(var);
        }
    }
    command
        .env("HOME", home)
        .env("GA_NO_MODEL_FETCH", "1")
        .stdin(Stdio::null());
    command
}

fn text(output: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// A copy of the default persona folder with the first sheet renamed to `name`.
fn personas_named(dir: &Path, name: &str) -> PathBuf {
    let personas = dir.join("personas");
    copy_tree(&default_personas_dir(), &personas);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&personas)
        .expect("dir")
        .map(|e| e.expect("entry").path())
        .collect();
    files.sort();
    let mut sheet: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&files[0]).expect("read")).expect("json");
    sheet["name"] = serde_json::json!(name);
    std::fs::write(&files[0], sheet.to_string()).expect("write");
    personas
}

#[test]
fn names_a_save_would_refuse_stop_the_run_before_it_starts() {
    let root = temp("names");
    let huge = "N".repeat(300_000);
    for (i, name) in ["Ada/Okafor", ".Ada", huge.as_str()]
        .into_iter()
        .enumerate()
    {
        let dir = root.join(i.to_string());
        let mut options = scripted_run_options(1.0, 2, 1, &dir.join("out"));
        options.personas_dir = Some(personas_named(&dir, name));
        let err = run(&options).expect_err("refused").to_string();
        assert!(err.contains("name"), "{err}");
        assert!(err.len() < 500, "a short error: {} bytes", err.len());
        assert!(
            !dir.join("out").exists(),
            "nothing simulated, nothing written"
        );
    }
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn a_failed_final_save_keeps_the_runs_files() {
    let root = temp("failed-save");
    let out = root.join("out");
    std::fs::create_dir_all(&out).expect("out");
    // A file where the save stages its folder: the save cannot be written.
    std::fs::write(out.join(".save.saving"), b"in the way").expect("block");
    let options = scripted_run_options(0.5, 2, 3, &out);
    let err = run(&options).expect_err("the save fails");
    assert!(matches!(err, RunError::Persist(_)), "{err}");
    let log = read_movement_log(out.join("movement.jsonl")).expect("the log is kept");
    assert_eq!(log.lines.len(), 180);
    for file in ["summary.json", "usage.json"] {
        let text = std::fs::read_to_string(out.join(file)).expect(file);
        serde_json::from_str::<serde_json::Value>(&text).expect("valid JSON");
    }
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn a_killed_run_leaves_a_readable_log_and_usage_and_resumes_its_log() {
    let root = temp("kill");
    let out = root.join("out");
    let mut child = bin(&root)
        .args([
            "run",
            "--hours",
            "48",
            "--personas",
            "2",
            "--backend",
            "scripted",
            "--no-progress",
            "--no-report",
            "--save-every",
            "100",
        ])
        .arg("--out")
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    // Kill it once it has saved twice (a few hundred steps in).
    let save = out.join("save");
    let started = Instant::now();
    loop {
        let step = decode(&save).map(|d| d.meta.step).unwrap_or(0);
        if step >= 200 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(600),
            "no second save in time"
        );
        assert!(child.try_wait().expect("wait").is_none(), "ended early");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(700));
    child.kill().expect("SIGKILL");
    child.wait().expect("reaped");

    recover_interrupted_save(&save).expect("recover");
    let saved_step = decode(&save).expect("the last save loads").meta.step;
    let log = read_movement_log(out.join("movement.jsonl")).expect("a readable log after kill -9");
    assert_eq!(log.first_step(), Some(0));
    let last = log.last_step().expect("lines");
    assert!(
        last + 1 >= saved_step,
        "log ends at {last}, save at {saved_step}"
    );
    let usage: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("usage.json")).expect("usage.json"))
            .expect("usage JSON");
    let calls_before = usage["totals"]["calls"].as_u64().expect("calls");
    assert!(calls_before > 0, "{usage}");
    assert!(
        !out.join("summary.json").exists(),
        "a summary needs the end of the run"
    );

    // Resume from the save: the log continues (cut back to the save) and the usage adds up.
    let output = bin(&root)
        .args([
            "run",
            "--hours",
            "0.5",
            "--backend",
            "scripted",
            "--no-progress",
            "--no-report",
        ])
        .arg("--from")
        .arg(&save)
        .arg("--out")
        .arg(&out)
        .output()
        .expect("resume");
    let (_, stderr) = text(&output);
    assert!(output.status.success(), "{stderr}");
    let log = read_movement_log(out.join("movement.jsonl")).expect("continued log");
    assert_eq!(log.first_step(), Some(0));
    assert_eq!(log.last_step(), Some(saved_step + 179));
    let usage: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("usage.json")).expect("usage.json"))
            .expect("usage JSON");
    assert!(usage["totals"]["calls"].as_u64().expect("calls") >= calls_before);
    assert!(out.join("summary.json").exists());
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn fallbacks_and_out_of_range_settings_are_loud() {
    let root = temp("loud");
    // No model configured: the stand-in says so on stderr.
    let output = bin(&root)
        .args(["run", "--hours", "0.05", "--no-progress", "--no-report"])
        .arg("--out")
        .arg(root.join("out"))
        .output()
        .expect("run");
    let (_, stderr) = text(&output);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains("warning:") && stderr.contains("SCRIPTED") && stderr.contains("NOT a"),
        "{stderr}"
    );
    // An explicit choice is not a fallback.
    let output = bin(&root)
        .args(["run", "--hours", "0.05", "--backend", "scripted"])
        .args(["--no-progress", "--no-report", "--out"])
        .arg(root.join("out2"))
        .output()
        .expect("run");
    assert!(!text(&output).1.contains("NOT a language model"));

    for (args, needle) in [
        (&["--personas", "100000"][..], "only 5"),
        (&["--llm-timeout", "0.000001"][..], "timeout_secs"),
        (&["--llm-max-retries", "4294967295"][..], "at most 10"),
        (&["--llm-timeout", "1e12"][..], "timeout_secs"),
    ] {
        let output = bin(&root)
            .args(["run", "--hours", "0.05", "--no-progress", "--out"])
            .arg(root.join("refused"))
            .args(args)
            .output()
            .expect("run");
        let (_, stderr) = text(&output);
        assert!(!output.status.success(), "{args:?} accepted");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
    assert!(!root.join("refused").exists());
    let _ = std::fs::remove_dir_all(&root);
}

/// Every file of `dir` (recursively), relative to it.
fn files_of(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(path) = todo.pop() {
        if path.is_dir() {
            todo.extend(
                std::fs::read_dir(&path)
                    .expect("dir")
                    .map(|e| e.expect("entry").path()),
            );
        } else {
            out.push(path.strip_prefix(dir).expect("inside").to_path_buf());
        }
    }
    out.sort();
    out
}

#[test]
fn a_one_digit_edit_in_any_file_of_a_save_is_refused_naming_the_file() {
    let root = temp("manifest");
    let out = root.join("out");
    run_ok(&scripted_run_options(1.0, 3, 7, &out));
    let save = out.join("save");
    decode(&save).expect("a fresh save verifies");
    let files = files_of(&save);
    assert!(files.len() > 20, "{files:?}");
    let mut refused = 0;
    for relative in &files {
        if relative == Path::new("manifest.json") {
            continue;
        }
        let path = save.join(relative);
        let original = std::fs::read(&path).expect("read");
        let Some(at) = original.iter().position(u8::is_ascii_digit) else {
            continue;
        };
        let mut edited = original.clone();
        edited[at] = if edited[at] == b'1' { b'2' } else { b'1' };
        std::fs::write(&path, &edited).expect("edit");
        let err = decode(&save).expect_err("an edited save").to_string();
        let name = relative.file_name().expect("name").to_string_lossy();
        assert!(err.contains(&*name), "{}: {err}", relative.display());
        refused += 1;
        std::fs::write(&path, &original).expect("restore");
    }
    assert!(refused > 20, "{refused} files edited");

    // A hand edit loads with the documented option and flag; without them it is refused.
    let meta = save.join("meta.json");
    let meta_text = std::fs::read_to_string(&meta).expect("meta");
    std::fs::write(
        &meta,
        meta_text.replacen("\"saved_at_unix\": ", "\"saved_at_unix\": 1", 1),
    )
    .expect("edit");
    let err = build_app_from_save(&save, &LlmConfig::default(), None, None, false)
        .map(|_| ())
        .expect_err("refused");
    assert!(matches!(err, PersistError::Edited { .. }), "{err}");
    assert!(err.to_string().contains("--trust-edited-save"), "{err}");
    let (_app, meta) = build_app_from_save_with(
        &save,
        &LlmConfig::default(),
        None,
        None,
        false,
        SaveIntegrity::TrustEdited,
    )
    .expect("trusted");
    assert!(meta.saved_at_unix > 0);
    // No manifest at all (an older save): refused, and loads when trusted.
    std::fs::remove_file(save.join("manifest.json")).expect("rm");
    let resume = |trust: bool| {
        let mut command = bin(&root);
        command
            .args(["run", "--hours", "0.05", "--backend", "scripted"])
            .args(["--no-progress", "--no-report", "--from"])
            .arg(&save)
            .arg("--out")
            .arg(root.join("resumed"));
        if trust {
            command.arg("--trust-edited-save");
        }
        command.output().expect("run")
    };
    let output = resume(false);
    let (_, stderr) = text(&output);
    assert!(!output.status.success());
    assert!(
        stderr.contains("manifest.json") && stderr.contains("missing"),
        "{stderr}"
    );
    let output = resume(true);
    assert!(output.status.success(), "{}", text(&output).1);
    // The resumed run's save has a manifest again.
    decode(&root.join("resumed").join("save")).expect("verifies");
    let _ = std::fs::remove_dir_all(&root);
}
