//! The real game in a real (virtual) window: `smallville --screenshot PATH --frames N` runs the
//! town with the sim going, writes a PNG of the window and exits 0; the PNG must be the window's
//! size and show a drawn town, not a blank or single-colour frame. The same for a save opened
//! with `--load DIR` and for `smallville replay DIR` playing a run's movement log with no model
//! (and its record's group lines in the speakers' dialogue bubbles).
//!
//! Runs under `xvfb-run` with Mesa's software Vulkan (`scripts/install-deps.sh` installs both).
//! On a machine with a display and no Xvfb it uses the display. Set
//! `SMALLVILLE_SKIP_WINDOW_TEST=1` to skip it where no window can be opened at all.
#![cfg(feature = "render")]

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bevy::asset::RenderAssetUsages;
use bevy::image::{CompressedImageFormats, Image, ImageSampler, ImageType};
mod common;
use bevy_generative_agents::render::WINDOW_SIZE;
use common::scripted_run;

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}

fn scratch_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "smallville-screenshot-{name}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// One window at a time: `xvfb-run -a` can hand two parallel callers the same display, and
/// software rendering on a small machine is slow enough without company.
static ONE_WINDOW: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn skip_window_tests() -> bool {
    let skip = std::env::var_os("SMALLVILLE_SKIP_WINDOW_TEST").is_some_and(|v| v == "1");
    if skip {
        eprintln!("skipped: SMALLVILLE_SKIP_WINDOW_TEST=1");
    }
    skip
}

/// Runs the game binary in screenshot mode: the game with `--screenshot out --frames N`,
/// `--speed 32` and the scripted backend. Returns its log, or the log as the error on failure.
fn take_screenshot(out: &Path, frames: u32) -> Result<String, String> {
    run_window(
        out,
        &[
            "--frames",
            &frames.to_string(),
            "--speed",
            "32",
            "--llm-backend",
            "scripted",
        ],
    )
}

/// Runs the binary with `args` plus `--screenshot out` in a window; returns its combined log,
/// or the log as the error when it does not exit 0.
fn run_window(out: &Path, args: &[&str]) -> Result<String, String> {
    // A test that failed while holding the lock poisons it; the next window is still fine.
    let _one = ONE_WINDOW
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let bin = env!("CARGO_BIN_EXE_smallville");
    let mut game_args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    game_args.extend(["--screenshot".to_owned(), out.display().to_string()]);
    let mut cmd = if on_path("xvfb-run") {
        let mut c = Command::new("xvfb-run");
        c.args(["-a", "-s", "-screen 0 1600x1000x24", bin]);
        c
    } else if std::env::var_os("DISPLAY").is_some() {
        Command::new(bin)
    } else {
        panic!(
            "no X display and no xvfb-run: run scripts/install-deps.sh, or set \
             SMALLVILLE_SKIP_WINDOW_TEST=1 on a machine that cannot open windows"
        );
    };
    let log_path = out.with_extension("log");
    let log = std::fs::File::create(&log_path).map_err(|e| e.to_string())?;
    let log_err = log.try_clone().map_err(|e| e.to_string())?;
    let mut child = cmd
        .args(&game_args)
        // Software Vulkan (lavapipe) works under Xvfb; OpenGL there does not.
        .env("WGPU_BACKEND", "vulkan")
        .env("RUST_LOG", "info,wgpu=error,naga=warn")
        .stdout(Stdio::from(log))
        .stderr(Stdio::from(log_err))
        .spawn()
        .map_err(|e| format!("cannot start the game: {e}"))?;
    // A guard against a hung window, not a speed assertion.
    let deadline = Instant::now() + Duration::from_secs(600);
    let status = loop {
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!(
                "game did not exit within 10 minutes; log:\n{}",
                std::fs::read_to_string(&log_path).unwrap_or_default()
            ));
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let log = std::fs::read_to_string(&log_path).unwrap_or_default();
    if !status.success() {
        return Err(format!("game exited with {status}; log:\n{log}"));
    }
    Ok(log)
}

/// The step the sim was at when screenshot mode took its picture, from the game's log line
/// "screenshot mode: … sim at step N (HH:MM)".
fn screenshot_step(log: &str) -> Option<u64> {
    let rest = log.split("sim at step ").nth(1)?;
    rest.split_whitespace().next()?.parse().ok()
}

/// Checks that the PNG at `path` has the window's size and shows a drawn town.
fn assert_drawn_town(path: &Path) {
    let bytes = std::fs::read(path).expect("the screenshot file exists");
    let image = Image::from_buffer(
        &bytes,
        ImageType::Extension("png"),
        CompressedImageFormats::NONE,
        true,
        ImageSampler::Default,
        RenderAssetUsages::default(),
    )
    .expect("the screenshot is a PNG");
    assert_eq!(
        (image.width(), image.height()),
        WINDOW_SIZE,
        "the PNG has the window's size"
    );
    let data = image.data.as_ref().expect("pixels");
    let pixels = (image.width() * image.height()) as usize;
    assert_eq!(data.len(), pixels * 4, "RGBA8 pixels");

    let mut colours = HashSet::new();
    let mut counts = std::collections::HashMap::<[u8; 3], usize>::new();
    for px in data.chunks_exact(4) {
        let rgb = [px[0], px[1], px[2]];
        colours.insert(rgb);
        *counts.entry(rgb).or_default() += 1;
    }
    let most_common = counts.values().copied().max().unwrap_or(0);
    assert!(
        colours.len() > 500,
        "a drawn town has many colours, got {}",
        colours.len()
    );
    assert!(
        most_common * 2 < pixels,
        "not a blank frame: the most common colour covers {most_common} of {pixels} pixels"
    );
}

#[test]
fn screenshot_mode_writes_a_png_of_the_drawn_town() {
    if skip_window_tests() {
        return;
    }
    let dir = scratch_dir("town");
    let out = dir.join("town.png");
    if let Err(log) = take_screenshot(&out, 60) {
        panic!("{log}");
    }
    assert_drawn_town(&out);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The first moments of a fresh game at the default speed (1×) and start (07:00) show the town
/// living: after 20 real seconds with the offline stand-in, someone is up — the state written
/// beside the picture says who does what.
#[test]
fn the_first_seconds_of_a_game_show_someone_up() {
    if skip_window_tests() {
        return;
    }
    let dir = scratch_dir("first-seconds");
    let out = dir.join("first.png");
    if let Err(log) = run_window(
        &out,
        &["--screenshot-after", "20", "--llm-backend", "scripted"],
    ) {
        panic!("{log}");
    }
    assert_drawn_town(&out);
    let state: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out.with_extension("json")).expect("the state beside the PNG"),
    )
    .expect("the state is JSON");
    let personas = state["personas"].as_array().expect("a persona list");
    assert!(!personas.is_empty(), "{state}");
    let up: Vec<&str> = personas
        .iter()
        .filter(|p| p["out_of_bed"] == true)
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert!(!up.is_empty(), "nobody is up after 20 s: {state}");
    let time = state["time"].as_str().unwrap_or_default();
    assert!(
        time.ends_with("07:0") || time.contains(" 07:"),
        "the game starts at 07:00: {time}"
    );
    // The frame report (issue 19): 20 s of frames after the warm-up, with spreads that are
    // consistent (p50 ≤ p99 ≤ max; the sim's share within the frame's).
    let report = &state["frame_report"];
    let number = |path: &[&str]| -> f64 {
        let mut v = report;
        for key in path {
            v = &v[*key];
        }
        v.as_f64()
            .unwrap_or_else(|| panic!("{path:?} missing: {report}"))
    };
    assert!(number(&["frames"]) >= 20.0, "{report}");
    for kind in ["sim_ms", "frame_ms"] {
        let (p50, p99, max) = (
            number(&[kind, "p50"]),
            number(&[kind, "p99"]),
            number(&[kind, "max"]),
        );
        assert!(0.0 <= p50 && p50 <= p99 && p99 <= max, "{kind}: {report}");
    }
    assert!(
        number(&["sim_ms", "mean"]) <= number(&["frame_ms", "mean"]),
        "{report}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--directive` sends an instruction as the game starts: the director's panel is open on the
/// plan, each step unticked, waiting for the player to confirm (`docs/director.png` is this
/// picture, taken with `DIRECTOR_SCREENSHOT=docs/director.png`).
#[test]
fn the_director_panel_shows_the_plan_waiting_for_confirmation() {
    if skip_window_tests() {
        return;
    }
    let dir = scratch_dir("director");
    let out = std::env::var_os("DIRECTOR_SCREENSHOT")
        .map_or_else(|| dir.join("director.png"), PathBuf::from);
    if let Err(log) = run_window(
        &out,
        &[
            "--screenshot-after",
            "6",
            "--llm-backend",
            "scripted",
            "--follow",
            "Mira",
            "--directive",
            "Have Mira Okafor host an open-mic evening at Riverside Cafe today from 10:00 to 11:00",
        ],
    ) {
        panic!("{log}");
    }
    assert_drawn_town(&out);
    let state: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out.with_extension("json")).expect("the state beside the PNG"),
    )
    .expect("the state is JSON");
    let director = &state["director"];
    assert_eq!(director["panel_open"], true, "{state}");
    assert_eq!(director["state"], "AwaitingConfirmation", "{state}");
    let lines: Vec<&str> = director["checklist"]
        .as_array()
        .expect("a checklist")
        .iter()
        .filter_map(|l| l.as_str())
        .collect();
    assert_eq!(lines.len(), 3, "{state}");
    assert!(lines.iter().all(|l| l.starts_with("⬜ ")), "{lines:?}");
    assert!(lines[1].contains("add_schedule_item"), "{lines:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A group conversation in the window (issue 16): the default town at lunch, everyone at the
/// café — a stream of five, lines typed in the speakers' bubbles (an emoji reply as a bubble
/// of the emoji), and the followed persona's sub-flows in the inspector's *Group conversations*
/// (`docs/group.png` is this picture, taken with `GROUP_SCREENSHOT=docs/group.png`).
#[test]
fn a_group_conversation_shows_at_lunch_in_the_cafe() {
    if skip_window_tests() {
        return;
    }
    let dir = scratch_dir("group");
    let out =
        std::env::var_os("GROUP_SCREENSHOT").map_or_else(|| dir.join("group.png"), PathBuf::from);
    if let Err(log) = run_window(
        &out,
        &[
            "--screenshot-after",
            "30",
            "--llm-backend",
            "scripted",
            "--start",
            "12:10",
            "--speed",
            "8",
            "--follow",
            "Elena",
        ],
    ) {
        panic!("{log}");
    }
    assert_drawn_town(&out);
    let state: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out.with_extension("json")).expect("the state beside the PNG"),
    )
    .expect("the state is JSON");
    let groups = state["groups"]
        .as_array()
        .expect("a list of group conversations");
    let cafe = groups
        .iter()
        .find(|g| {
            // Opened by three; two of them may have stepped aside for a one-to-one chat.
            g["members"].as_array().is_some_and(|m| m.len() >= 2)
                && g["said"].as_u64().is_some_and(|n| n >= 3)
        })
        .unwrap_or_else(|| panic!("the café talks together at lunch: {state}"));
    let speakers: std::collections::BTreeSet<&str> = cafe["latest"]
        .as_array()
        .expect("latest lines")
        .iter()
        .filter_map(|l| l.as_str()?.split_once(": ").map(|(who, _)| who))
        .collect();
    assert!(speakers.len() >= 2, "a conversation, not a speech: {cafe}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A stage scene in the window (issue 17): `--stage assets/stages/standoff.json` opens the
/// standoff at Riverside Cafe with the stage panel open and auto-play on — the narration, a
/// card per actor with its health bar (the hidden one marked), the persona actors' plans in
/// their bubbles (`docs/stage.png` is this picture, taken with `STAGE_SCREENSHOT=docs/stage.png`).
#[test]
fn a_stage_scene_plays_turn_by_turn_in_its_panel() {
    if skip_window_tests() {
        return;
    }
    let dir = scratch_dir("stage");
    let out =
        std::env::var_os("STAGE_SCREENSHOT").map_or_else(|| dir.join("stage.png"), PathBuf::from);
    let scene = concat!(env!("CARGO_MANIFEST_DIR"), "/assets/stages/standoff.json");
    if let Err(log) = run_window(
        &out,
        &[
            "--screenshot-after",
            "25",
            "--llm-backend",
            "scripted",
            "--start",
            "18:00",
            "--follow",
            "Mira",
            "--stage",
            scene,
        ],
    ) {
        panic!("{log}");
    }
    assert_drawn_town(&out);
    let state: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out.with_extension("json")).expect("the state beside the PNG"),
    )
    .expect("the state is JSON");
    let stage = &state["stages"][0];
    assert_eq!(stage["name"], "Standoff at Riverside Cafe", "{state}");
    assert_eq!(stage["panel_open"], true, "{state}");
    assert!(
        stage["turn"].as_u64().is_some_and(|t| t >= 1),
        "a turn was played: {state}"
    );
    assert!(
        stage["narration"].as_str().is_some_and(|n| !n.is_empty()),
        "{state}"
    );
    let cast: Vec<&str> = stage["actors"]
        .as_array()
        .expect("actors")
        .iter()
        .chain(stage["fallen"].as_array().expect("fallen"))
        .filter_map(|a| a.as_str())
        .collect();
    assert!(
        cast.contains(&"Mira Okafor") && cast.iter().any(|a| a.ends_with("Shade")),
        "{cast:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_replay_plays_the_movement_log_in_the_window_without_a_model() {
    if skip_window_tests() {
        return;
    }
    let dir = scratch_dir("replay");
    let run_dir = dir.join("run");
    // Into the morning: the personas are up and about.
    scripted_run(8.5, 3, 1, &run_dir);
    let out = dir.join("replay.png");
    let log = match run_window(
        &out,
        &[
            "replay",
            &run_dir.display().to_string(),
            "--speed",
            "32",
            "--frames",
            "60",
        ],
    ) {
        Ok(log) => log,
        Err(log) => panic!("{log}"),
    };
    assert_drawn_town(&out);
    // The replay ran: the clock left the log's first step (0) and stayed within the log
    // (3,060 lines: it stops one step past the last).
    let step = screenshot_step(&log).unwrap_or_else(|| panic!("no step in the log:\n{log}"));
    assert!((2..=3060).contains(&step), "step {step}");
    assert!(
        !log.contains("LLM backend"),
        "a replay builds no model backend:\n{log}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A replay of a run's lunch in the café (issue 47, SPEC §16 "Recorded"): the run record's group
/// lines are in their speakers' dialogue bubbles. The run goes to noon, then goes on from its
/// save into a second folder for half an hour, so the replay starts at noon and the talk comes
/// within seconds at 8×. `docs/replay-bubbles.png` is such a picture (five personas, 1×).
#[test]
fn a_replay_shows_the_recorded_group_lines_in_bubbles() {
    if skip_window_tests() {
        return;
    }
    let dir = scratch_dir("replay-bubbles");
    let noon = dir.join("noon");
    scripted_run(12.0, 3, 1, &noon);
    let lunch = dir.join("lunch");
    let mut options = common::scripted_run_options(0.5, 3, 1, &lunch);
    options.from = Some(noon.join(bevy_generative_agents::output::RUN_SAVE_DIR));
    common::run_ok(&options);
    let record = bevy_generative_agents::output::record::read_record(lunch.join("record.jsonl"))
        .expect("the run's record");
    // What a group line's bubble says: "Speaker: line".
    let said: std::collections::BTreeSet<String> = record
        .iter()
        .filter_map(|line| match &line.what {
            bevy_generative_agents::output::record::Happened::GroupLine {
                persona: Some(persona),
                text,
                ..
            } => Some(format!("{persona}: {text}")),
            _ => None,
        })
        .collect();
    assert!(said.len() >= 3, "the three talk at lunch: {record:?}");
    let out = dir.join("replay-bubbles.png");
    let log = match run_window(
        &out,
        &[
            "replay",
            &lunch.display().to_string(),
            "--speed",
            "8",
            "--frames",
            "30",
            "--screenshot-after",
            "16",
            // The camera on the café.
            "--follow",
            "Mira",
        ],
    ) {
        Ok(log) => log,
        Err(log) => panic!("{log}"),
    };
    assert_drawn_town(&out);
    assert!(
        log.contains("recorded bubbles"),
        "the record was read:\n{log}"
    );
    let state: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out.with_extension("json")).expect("the state beside the PNG"),
    )
    .expect("the state is JSON");
    let bubbles: Vec<&str> = state["chat_bubbles"]
        .as_array()
        .expect("a list of bubbles")
        .iter()
        .filter_map(|b| b.as_str())
        .collect();
    assert!(
        bubbles.iter().any(|b| said.contains(*b)),
        "a recorded group line is in its speaker's bubble: {bubbles:?} (step {})",
        state["step"]
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_save_opens_in_the_window_with_load() {
    if skip_window_tests() {
        return;
    }
    let dir = scratch_dir("load");
    let run_dir = dir.join("run");
    scripted_run(1.0, 3, 1, &run_dir);
    let out = dir.join("loaded.png");
    let log = match run_window(
        &out,
        &[
            "--load",
            &run_dir.join("save").display().to_string(),
            "--frames",
            "40",
            "--llm-backend",
            "scripted",
        ],
    ) {
        Ok(log) => log,
        Err(log) => panic!("{log}"),
    };
    assert_drawn_town(&out);
    // The run saved after 360 steps; the window went on from there.
    let step = screenshot_step(&log).unwrap_or_else(|| panic!("no step in the log:\n{log}"));
    assert!(
        step >= 360,
        "the clock resumed at the save's step, got {step}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
