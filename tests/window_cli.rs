//! The window's command line where it must fail before any window opens: a corrupt save or one
//! embedded with another model given to `--load`, a bad movement log given to `replay`, a
//! replay speed the game does not have — and, in a build without the `render` feature, a clear
//! "needs the window" instead of a silent fallback. Each is a clear error naming the file and a
//! non-zero exit, never a panic. None of these needs a display; with none at all, the game and
//! the replay say what to do instead (exit code 2) and `--headless` runs the demo.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod common;
#[cfg(feature = "render")]
use common::copy_tree;
use common::scripted_run;

const BIN: &str = env!("CARGO_BIN_EXE_smallville");

fn temp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("bga-window-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// A short scripted run (movement log and save) into `root/run`: a fraction of a second, so
/// every test makes its own and removes it with its folder.
fn good_run(root: &Path) -> PathBuf {
    let out = root.join("run");
    scripted_run(0.5, 2, 2, &out);
    out
}

/// An X display no server listens on: the game's display check passes, and a window opened by
/// mistake fails to connect instead of appearing.
const NO_SUCH_DISPLAY: &str = ":2147483000";

/// Runs the binary with `args`, an X display that does not exist, and a screenshot request so
/// that even a window opened by mistake would exit after one frame. Never talks to a real
/// model.
fn smallville(args: &[&str], shot: &Path) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .env("DISPLAY", NO_SUCH_DISPLAY)
        .env_remove("WAYLAND_DISPLAY")
        .env_remove("WAYLAND_SOCKET")
        .env("GA_NO_MODEL_FETCH", "1");
    if cfg!(feature = "render") && !args.contains(&"--check") {
        cmd.args(["--screenshot", &shot.display().to_string(), "--frames", "1"]);
    }
    cmd.output().expect("the binary runs")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[cfg(feature = "render")]
#[test]
fn a_corrupt_save_is_refused_naming_the_file_before_any_window() {
    let root = temp("corrupt");
    let save = root.join("save");
    copy_tree(&good_run(&root).join("save"), &save);
    let persona = std::fs::read_dir(save.join("personas"))
        .expect("personas")
        .next()
        .expect("a persona")
        .expect("entry")
        .path();
    let scratch = persona.join("scratch.json");
    let text = std::fs::read_to_string(&scratch).expect("scratch");
    std::fs::write(&scratch, &text[..text.len() / 2]).expect("truncate");

    let out = smallville(
        &[
            "--load",
            &save.display().to_string(),
            "--llm-backend",
            "scripted",
        ],
        &root.join("x.png"),
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("scratch.json"), "names the file: {err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(!root.join("x.png").exists(), "no window was opened");

    // A folder that is no save at all.
    let out = smallville(
        &["--load", &root.join("nothing").display().to_string()],
        &root.join("x.png"),
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("meta.json"), "{err}");
    let _ = std::fs::remove_dir_all(&root);
}

#[cfg(feature = "render")]
#[test]
fn a_save_embedded_with_another_model_is_refused() {
    let root = temp("embedding");
    // An HTTP backend embeds with its own model; nothing is sent before the check refuses.
    let out = smallville(
        &[
            "--load",
            &good_run(&root).join("save").display().to_string(),
            "--llm-backend",
            "http",
            "--llm-base-url",
            "http://127.0.0.1:9/v1",
        ],
        &root.join("x.png"),
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("embedded with scripted-hashed-bow"),
        "says which model the save needs: {err}"
    );
    assert!(!root.join("x.png").exists());
    let _ = std::fs::remove_dir_all(&root);
}

#[cfg(feature = "render")]
#[test]
fn a_bad_movement_log_is_refused_naming_the_file_and_line() {
    let root = temp("bad-log");
    let dir = root.join("bad");
    std::fs::create_dir_all(&dir).expect("dir");
    let log = std::fs::read_to_string(good_run(&root).join("movement.jsonl")).expect("log");
    let mut lines: Vec<&str> = log.lines().collect();
    lines[2] = "{\"step\": 2, \"time\": \"not a time\", \"personas\": {}}";
    std::fs::write(dir.join("movement.jsonl"), lines.join("\n")).expect("write");
    let out = smallville(&["replay", &dir.display().to_string()], &root.join("x.png"));
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("movement.jsonl"), "{err}");
    assert!(err.contains("line 3"), "{err}");
    assert!(!root.join("x.png").exists());

    let out = smallville(
        &["replay", &root.join("missing").display().to_string()],
        &root.join("x.png"),
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("movement.jsonl"), "{err}");
    let _ = std::fs::remove_dir_all(&root);
}

/// Runs the binary with `args` and no display at all (nor Wayland), backtraces on.
#[cfg(feature = "render")]
fn smallville_without_display(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .env_remove("DISPLAY")
        .env_remove("WAYLAND_DISPLAY")
        .env_remove("WAYLAND_SOCKET")
        .env("RUST_BACKTRACE", "1")
        .env("GA_NO_MODEL_FETCH", "1")
        .output()
        .expect("the binary runs")
}

#[cfg(feature = "render")]
#[test]
fn without_a_display_the_game_says_what_to_do_and_exits_2() {
    let out = smallville_without_display(&[]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    for part in [
        "no display",
        "neither DISPLAY nor WAYLAND_DISPLAY nor WAYLAND_SOCKET is set",
        "xvfb-run -a bash scripts/play.sh",
        "--headless",
        "smallville run --hours",
    ] {
        assert!(err.contains(part), "{part:?} in: {err}");
    }
    assert!(!err.contains("panicked"), "{err}");
    assert!(!err.contains("backtrace"), "{err}");
    assert!(out.stdout.is_empty(), "nothing ran");

    // The replay's window too; it points at the headless check.
    let root = temp("no-display");
    let run = good_run(&root).display().to_string();
    let out = smallville_without_display(&["replay", &run]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("no display"), "{err}");
    assert!(err.contains("--check"), "{err}");
    let _ = std::fs::remove_dir_all(&root);
}

#[cfg(feature = "render")]
#[test]
fn headless_runs_the_demo_without_a_display() {
    let out =
        smallville_without_display(&["--headless", "--hours", "0.05", "--llm-backend", "scripted"]);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.starts_with("Town "), "{stdout}");
    assert!(stdout.contains("LLM backend: scripted"), "{stdout}");

    // It is the demo, not the window: the window's flags are refused beside it.
    let out = smallville_without_display(&["--headless", "--screenshot", "x.png"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

#[cfg(not(feature = "render"))]
#[test]
fn without_the_window_replay_and_load_say_what_is_missing() {
    let root = temp("headless");
    let run = good_run(&root).display().to_string();
    let out = smallville(&["replay", &run], &root.join("x.png"));
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("`render` feature"), "{err}");
    assert!(
        err.contains("--check"),
        "points at the headless check: {err}"
    );

    let out = smallville(
        &["--load", &root.join("run/save").display().to_string()],
        &root.join("x.png"),
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("`render` feature"), "{err}");
    assert!(err.contains("run --from"), "{err}");
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn replays_take_the_games_speeds_only() {
    let root = temp("speed");
    let run = good_run(&root).display().to_string();
    let out = smallville(
        &["replay", &run, "--check", "--speed", "3"],
        &root.join("x.png"),
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("1, 2, 4, 8, 16 or 32"), "{err}");
    let out = smallville(
        &["replay", &run, "--check", "--speed", "16x"],
        &root.join("x.png"),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("movement log OK: 180 steps"));
    let _ = std::fs::remove_dir_all(&root);
}
