//! The examples in `examples/` run, as a newcomer would run them, and do what they say.
//!
//! `cargo test` builds every example before running the tests; each test here starts the
//! built example (from `target/<profile>/examples/`) and checks its output. The window example
//! (`own_town`, feature `render`) renders a few frames under Xvfb and writes a screenshot.

use std::path::PathBuf;
use std::process::{Command, Output};

/// The built example `name`, next to this test's own folder (`…/deps/..`).
fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target/<profile>/deps");
    let path = profile_dir
        .join("examples")
        .join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    assert!(
        path.is_file(),
        "{} is missing: run the examples through `cargo test`, which builds them",
        path.display()
    );
    path
}

fn run(mut command: Command) -> (String, String) {
    let Output {
        status,
        stdout,
        stderr,
    } = command.output().expect("the example starts");
    let stdout = String::from_utf8_lossy(&stdout).into_owned();
    let stderr = String::from_utf8_lossy(&stderr).into_owned();
    assert!(
        status.success(),
        "exit {status}\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    (stdout, stderr)
}

#[test]
fn talk_to_persona_adds_to_the_day_whispers_and_interviews() {
    let (stdout, _) = run(Command::new(example("talk_to_persona")));
    let lines: Vec<&str> = stdout.lines().collect();
    // The message: one tool line a player reads, then the reply; the whisper's thought; the
    // interview's answer; the bubble shows the last reply.
    assert!(
        lines.contains(&"  tool: 📅 added: meet the player at Riverside Cafe:cafe, 15:00"),
        "{stdout}"
    );
    let reply = lines
        .iter()
        .position(|l| l.ends_with(": See you at the cafe at three!"))
        .unwrap_or_else(|| panic!("no reply: {stdout}"));
    // The background stage reports after the reply: an appointment is worth remembering.
    assert!(
        lines[reply + 1].starts_with("  memory: remembered (importance "),
        "{stdout}"
    );
    assert!(lines.iter().any(|l| l.contains("fresh bread")), "{stdout}");
    assert!(
        lines
            .iter()
            .any(|l| l.ends_with(": At three I'm meeting someone at the cafe.")),
        "{stdout}"
    );
    assert_eq!(
        lines.iter().filter(|l| l.starts_with("> ")).count(),
        3,
        "{stdout}"
    );
    assert!(
        lines.last().is_some_and(|l| l.starts_with("bubble: ")),
        "{stdout}"
    );
}

#[test]
fn director_plans_waits_for_confirmation_runs_and_reviews() {
    let (stdout, _) = run(Command::new(example("director")));
    let lines: Vec<&str> = stdout.lines().collect();
    let at = |prefix: &str| {
        lines
            .iter()
            .position(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no line starting `{prefix}`:\n{stdout}"))
    };
    // In this order: planned (a checklist), asked, confirmed, every step done, reviewed.
    let planned = at("planned 5 step(s):");
    let asked = at("state: Planning -> AwaitingConfirmation");
    let confirmed = at("> confirm");
    let reviewed = at("review: 5 step(s) done, 0 failed.");
    assert!(
        planned < asked && asked < confirmed && confirmed < reviewed,
        "{stdout}"
    );
    assert!(
        lines.contains(&"  [ ] 2 add_schedule_item {\"minutes\":60,\"persona\":\"Mira Okafor\",\"place\":\"Riverside Cafe\",\"task\":\"host an open-mic evening\",\"time\":\"2023-02-13 10:00\"}"),
        "{stdout}"
    );
    assert_eq!(
        lines.iter().filter(|l| l.starts_with("  [x] ")).count(),
        5,
        "{stdout}"
    );
    assert!(lines.iter().all(|l| !l.contains("Failed")), "{stdout}");
    // The announcement went out on the town's news channel, and the review heard it.
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("  [ ] 4 post_to_channel")
                && l.contains("Mira Okafor will host an open-mic evening at Riverside Cafe")),
        "{stdout}"
    );
    assert!(
        lines[reviewed].contains("line(s) were said in group talk"),
        "{stdout}"
    );
    // The host kept the appointment the director put in her day.
    assert!(
        lines.iter().any(|l| l.starts_with(
            "  check at Willowbrook:Riverside Cafe:cafe from 2023-02-13 10:00 to 2023-02-13 11:00:"
        ) && l.contains("Mira Okafor")),
        "{stdout}"
    );
    assert!(
        stdout.trim_end().ends_with("director Some(Completed)"),
        "{stdout}"
    );
}

#[test]
fn headless_town_prints_what_everyone_does_each_hour() {
    let mut command = Command::new(example("headless_town"));
    command.arg("2");
    let (stdout, _) = run(command);
    assert!(
        stdout.starts_with("5 personas in the default town"),
        "{stdout}"
    );
    // A report at 00:00, 01:00 and 02:00, each with one line per persona: "emoji name: act @ place".
    let hours: Vec<&str> = stdout.lines().filter(|l| l.starts_with("— ")).collect();
    assert!(hours.len() >= 3, "{stdout}");
    assert!(hours.iter().any(|h| h.ends_with("02:00")), "{hours:?}");
    let persona_lines: Vec<&str> = stdout.lines().filter(|l| l.starts_with("  ")).collect();
    assert!(persona_lines.len() >= 15, "{stdout}");
    assert!(
        persona_lines
            .iter()
            .all(|l| l.contains(": ") && l.contains(" @ ")),
        "{persona_lines:?}"
    );
    // In the night hours everyone is asleep somewhere of their own.
    let last_hour: Vec<&str> = stdout.lines().rev().take(5).collect();
    assert!(
        last_hour.iter().all(|l| l.contains("sleep")),
        "at 02:00 everyone sleeps: {last_hour:?}"
    );

    // A bad argument is a clear error, not a default.
    let mut bad = Command::new(example("headless_town"));
    bad.arg("two");
    let output = bad.output().expect("starts");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("whole number of game hours"), "{stderr}");
}

#[test]
fn custom_backend_spends_its_budget_and_the_town_lives_on_fail_safes() {
    let mut command = Command::new(example("custom_backend"));
    command.arg("20");
    let (stdout, _) = run(command);
    let first = stdout.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("budget 20: 20 calls reached the town script,"),
        "{stdout}"
    );
    let refused: u64 = first
        .split(", ")
        .nth(1)
        .and_then(|part| part.split(' ').next())
        .and_then(|n| n.parse().ok())
        .expect("the refused count");
    assert!(
        refused > 0,
        "a budget of 20 runs out in the first day's planning (about 36 calls): {first}"
    );
    assert!(
        !first.contains(" 0 answers came from fail-safes"),
        "{first}"
    );
    assert_eq!(
        stdout.lines().filter(|l| l.contains(" @ ")).count(),
        3,
        "{stdout}"
    );
}

#[cfg(feature = "render")]
#[test]
fn own_town_draws_a_map_built_in_code() {
    if std::env::var_os("SMALLVILLE_SKIP_WINDOW_TEST").is_some_and(|v| v == "1") {
        eprintln!("skipped: SMALLVILLE_SKIP_WINDOW_TEST=1");
        return;
    }
    let out = std::env::temp_dir().join(format!("own-town-{}.png", std::process::id()));
    let _ = std::fs::remove_file(&out);
    let bin = example("own_town");
    let on_path = |program: &str| {
        std::env::var_os("PATH").is_some_and(|paths| {
            std::env::split_paths(&paths).any(|dir| dir.join(program).is_file())
        })
    };
    let mut command = if on_path("xvfb-run") {
        let mut c = Command::new("xvfb-run");
        c.args(["-a", "-s", "-screen 0 1600x1000x24"]).arg(&bin);
        c
    } else {
        Command::new(&bin)
    };
    command
        .args(["--frames", "90", "--screenshot"])
        .arg(&out)
        .env("WGPU_BACKEND", "vulkan");
    run(command);
    let bytes = std::fs::read(&out).expect("the screenshot was written");
    // A PNG with the window's pixels: the plain tiles give many pixels of several colours.
    assert!(bytes.starts_with(b"\x89PNG"), "not a PNG");
    assert!(
        bytes.len() > 10_000,
        "a nearly empty picture: {} bytes",
        bytes.len()
    );
    let _ = std::fs::remove_file(&out);
}

#[test]
fn group_channel_opens_a_board_that_residents_join_and_talk_on() {
    let (stdout, _) = run(Command::new(example("group_channel")));
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("[#notice board] Town Hall: ") && l.contains("summer fair")),
        "{stdout}"
    );
    assert!(lines.iter().any(|l| l.starts_with("refused: ")), "{stdout}");
    let summary = lines
        .iter()
        .find(|l| l.starts_with("the board: "))
        .expect("the summary line");
    let speakers: usize = summary
        .split(" lines by ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .expect("a speaker count");
    assert!(speakers >= 3, "{summary}");
}

#[test]
fn stage_scene_plays_the_standoff_and_the_personas_keep_it() {
    let (stdout, _) = run(Command::new(example("stage_scene")));
    let lines: Vec<&str> = stdout.lines().collect();
    let turns = lines.iter().filter(|l| l.starts_with("turn ")).count();
    assert!(turns >= 1, "{stdout}");
    assert!(
        lines.iter().any(|l| l.starts_with("closed after ")),
        "{stdout}"
    );
    // The hidden actor plans, but no other actor's plan names it.
    assert!(lines.iter().any(|l| l.starts_with("  Shade: ")), "{stdout}");
    assert!(
        lines
            .iter()
            .filter(|l| l.starts_with("  ") && !l.starts_with("  Shade: "))
            .all(|l| !l.contains("Shade")),
        "{stdout}"
    );
    for persona in ["Mira Okafor", "Tomas Reyes"] {
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with(&format!("{persona} remembers: "))
                    && l.contains("Standoff at Riverside Cafe")),
            "{stdout}"
        );
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with(&format!("{persona}'s day: "))
                    && l.ends_with("(the day sums to 1440 min)")),
            "{stdout}"
        );
    }
}

#[cfg(feature = "http")]
#[test]
fn lean_loopback_sets_lean_beside_faithful_over_http() {
    let out = std::env::temp_dir().join(format!("lean-loopback-{}", std::process::id()));
    let mut command = Command::new(example("lean_loopback"));
    command.args(["2", "1"]).arg(&out);
    let (stdout, _) = run(command);
    let _ = std::fs::remove_dir_all(&out);
    // Both sides were served by the loopback server, and the table sets them side by side.
    assert!(
        stdout.contains("faithful seed 1:") && stdout.contains("lean seed 1:"),
        "{stdout}"
    );
    assert!(stdout.contains("http://127.0.0.1:"), "{stdout}");
    let total = stdout
        .lines()
        .find(|l| l.starts_with("| **all** |"))
        .unwrap_or_else(|| panic!("no total row:\n{stdout}"));
    let calls: Vec<f64> = total
        .split('|')
        .filter_map(|cell| {
            cell.split_whitespace()
                .next()?
                .trim_matches('*')
                .parse()
                .ok()
        })
        .collect();
    assert!(
        calls.len() >= 2 && calls[1] < calls[0],
        "lean asks less: {total}"
    );
    // A bad argument is said, not guessed.
    let mut bad = Command::new(example("lean_loopback"));
    bad.arg("two");
    let output = bad.output().expect("the example starts");
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("expected game hours"));
}
