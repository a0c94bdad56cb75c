//! Saves, loads, forks, movement-log checks, reports and record/replay of model answers
//! (SPEC §11), through the library and the real `smallville` binary.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

mod common;

use bevy::prelude::{Messages, With};
use bevy_generative_agents::clock::{AwaitingCognition, SimClock, SimSpeed};
use bevy_generative_agents::llm::{LlmClient, LlmConfig, ScriptedBackend};
use bevy_generative_agents::output::{RunOptions, check_replay, run, write_report};
use bevy_generative_agents::persist::{
    CacheMode, PersistError, PersistOutcome, SaveRequest, build_app_from_save, decode, fork_save,
    load_into_world, recover_interrupted_save,
};
use bevy_generative_agents::persona::Persona;
use common::{assert_same_save, copy_tree, normalised_tree, run_ok, scripted_run_options};

/// The `smallville` binary (this test file needs the `cli` feature, see Cargo.toml).
const BIN: &str = env!("CARGO_BIN_EXE_smallville");

fn temp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("bga-persist-it-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

fn options(hours: f64, out: &Path) -> RunOptions {
    scripted_run_options(hours, 3, 5, out)
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .expect("log")
        .lines()
        .map(str::to_owned)
        .collect()
}

/// `first` hours, then `--from` for `second` hours, equals one run of both, byte for byte.
fn assert_resume_is_exact(first: f64, second: f64, root: &Path) {
    let whole = root.join("whole");
    let part1 = root.join("part1");
    let part2 = root.join("part2");
    run_ok(&options(first + second, &whole));
    run_ok(&options(first, &part1));
    let resumed = run_ok(&options(second, &part2).resuming(part1.join("save")));
    let steps_first = (first * 360.0) as usize;
    let steps_second = (second * 360.0) as usize;
    assert_eq!(resumed.steps, steps_second as u64);

    let a = assert_same_save(&whole.join("save"), &part2.join("save"), "the resumed run");
    // Scratch, memories, rng, events, diary: nothing was missed.
    assert!(a.len() >= 4 + 3 * 9, "{} files", a.len());

    let whole_log = lines(&whole.join("movement.jsonl"));
    let log1 = lines(&part1.join("movement.jsonl"));
    let log2 = lines(&part2.join("movement.jsonl"));
    assert_eq!(whole_log.len(), steps_first + steps_second);
    assert_eq!(log1.len(), steps_first);
    assert_eq!(log2.len(), steps_second);
    assert_eq!(
        &whole_log[..steps_first],
        &log1[..],
        "the first part is the same"
    );
    // The resumed log starts with complete entries (it must replay on its own); every later
    // line is a diff against the same previous frames, so byte-identical.
    assert_eq!(&whole_log[steps_first + 1..], &log2[1..]);
    // The record of what the seed systems did (SPEC §16) goes on the same way: the whole run's
    // is the first part's and then the resumed part's, byte for byte.
    let record = |dir: &Path| lines(&dir.join("record.jsonl"));
    let (whole_record, record1, record2) = (record(&whole), record(&part1), record(&part2));
    assert_eq!(
        whole_record,
        [record1, record2].concat(),
        "the record of the resumed run"
    );
    let resumed_first: serde_json::Value = serde_json::from_str(&log2[0]).expect("json");
    assert_eq!(resumed_first["step"], serde_json::json!(steps_first));
    assert_eq!(
        resumed_first["personas"]
            .as_object()
            .map(|m| m.len())
            .unwrap_or(0),
        3,
        "complete first entries for all three personas"
    );
}

#[test]
fn resuming_two_hours_then_one_equals_three_hours() {
    let root = temp("resume-2-1");
    assert_resume_is_exact(2.0, 1.0, &root);
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn resuming_in_the_busy_morning_is_exact_too() {
    // 07:00–09:00: waking, walking, breakfast, work; paths and object events in flight.
    let root = temp("resume-7-2");
    assert_resume_is_exact(7.0, 2.0, &root);
    let summary: serde_json::Value = serde_json::from_slice(
        &std::fs::read(root.join("whole").join("summary.json")).expect("summary"),
    )
    .expect("json");
    let moved = summary["personas"]
        .as_object()
        .expect("personas")
        .values()
        .filter(|p| {
            p["days"][0]["arenas_visited"]
                .as_array()
                .map_or(0, Vec::len)
                > 1
        })
        .count();
    assert!(moved >= 2, "the window covers people moving between places");
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn a_recorded_run_replays_with_zero_backend_calls() {
    let root = temp("record");
    let cache = root.join("answers.jsonl");
    let recorded =
        run_ok(&options(8.0, &root.join("recorded")).with_cache(CacheMode::Record(cache.clone())));
    assert!(recorded.usage.totals.calls > 0);
    let entries = lines(&cache).len();
    assert!(
        entries as u64 >= recorded.usage.totals.calls / 2,
        "{entries} recorded"
    );

    let replayed =
        run_ok(&options(8.0, &root.join("replayed")).with_cache(CacheMode::Replay(cache.clone())));
    assert_eq!(
        replayed.usage.totals.calls, 0,
        "no request reached a backend"
    );
    assert_eq!(replayed.usage.totals.errors, 0, "nothing was missing");
    assert!(replayed.usage.totals.cache_hits > 0);
    assert_eq!(replayed.usage.backend, "replay");
    assert_eq!(
        std::fs::read(root.join("recorded").join("movement.jsonl")).expect("recorded log"),
        std::fs::read(root.join("replayed").join("movement.jsonl")).expect("replayed log"),
        "identical movement"
    );
    assert_eq!(
        lines(&cache).len(),
        entries,
        "a replay never writes the recording"
    );

    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn a_missing_replay_recording_is_a_clear_error() {
    let root = temp("replay-missing");
    let err = run(
        &options(1.0, &root.join("out")).with_cache(CacheMode::Replay(root.join("nope.jsonl")))
    )
    .expect_err("no recording");
    assert!(err.to_string().contains("nope.jsonl"), "{err}");
    let _ = std::fs::remove_dir_all(&root);
}

/// A save made by a short run, shared by the tests that corrupt copies of it.
fn good_save(root: &Path) -> PathBuf {
    let out = root.join("base");
    run_ok(&options(7.5, &out));
    out.join("save")
}

fn first_persona(save: &Path) -> PathBuf {
    let meta = decode(save).expect("good save");
    save.join("personas").join(&meta.meta.personas[0])
}

#[test]
fn corrupt_saves_fail_naming_the_file_and_field_and_load_nothing() {
    let root = temp("corrupt");
    let good = good_save(&root);
    let persona = first_persona(&good);
    let rel = |p: &Path| p.strip_prefix(&good).expect("inside").to_path_buf();

    type Damage = Box<dyn Fn(&Path)>;
    let truncate = |file: PathBuf| -> Damage {
        Box::new(move |save: &Path| {
            let path = save.join(&file);
            let bytes = std::fs::read(&path).expect("read");
            std::fs::write(&path, &bytes[..bytes.len() / 2]).expect("truncate");
        })
    };
    let nodes = rel(&persona.join("associative_memory").join("nodes.json"));
    let body = rel(&persona.join("body.json"));
    let rng = rel(&persona.join("rng.json"));
    let scratch = rel(&persona.join("scratch.json"));
    let cases: Vec<(&str, Damage, Vec<&str>)> = vec![
        (
            "truncated nodes",
            truncate(nodes.clone()),
            vec!["nodes.json", "truncated"],
        ),
        (
            "missing body",
            Box::new({
                let body = body.clone();
                move |save: &Path| std::fs::remove_file(save.join(&body)).expect("rm")
            }),
            vec!["body.json", "missing"],
        ),
        (
            "wrong type in body",
            Box::new({
                let body = body.clone();
                move |save: &Path| {
                    let path = save.join(&body);
                    let mut v: serde_json::Value =
                        serde_json::from_slice(&std::fs::read(&path).expect("read")).expect("json");
                    v["tile"] = serde_json::json!(["x", 1]);
                    std::fs::write(&path, serde_json::to_vec(&v).expect("bytes")).expect("write");
                }
            }),
            vec!["body.json", "tile"],
        ),
        (
            "future format",
            Box::new(|save: &Path| {
                let path = save.join("meta.json");
                let mut v: serde_json::Value =
                    serde_json::from_slice(&std::fs::read(&path).expect("read")).expect("json");
                v["format_version"] = serde_json::json!(99);
                std::fs::write(&path, serde_json::to_vec(&v).expect("bytes")).expect("write");
            }),
            vec!["meta.json", "format_version"],
        ),
        (
            "clock does not add up",
            Box::new(|save: &Path| {
                let path = save.join("meta.json");
                let mut v: serde_json::Value =
                    serde_json::from_slice(&std::fs::read(&path).expect("read")).expect("json");
                v["step"] = serde_json::json!(7);
                std::fs::write(&path, serde_json::to_vec(&v).expect("bytes")).expect("write");
            }),
            vec!["meta.json", "current_time"],
        ),
        (
            "bad rng",
            Box::new({
                let rng = rng.clone();
                move |save: &Path| {
                    let path = save.join(&rng);
                    let mut v: serde_json::Value =
                        serde_json::from_slice(&std::fs::read(&path).expect("read")).expect("json");
                    v["seed"] = serde_json::json!("12");
                    std::fs::write(&path, serde_json::to_vec(&v).expect("bytes")).expect("write");
                }
            }),
            vec!["rng.json", "seed"],
        ),
        (
            "scratch field removed",
            Box::new({
                let scratch = scratch.clone();
                move |save: &Path| {
                    let path = save.join(&scratch);
                    let mut v: serde_json::Value =
                        serde_json::from_slice(&std::fs::read(&path).expect("read")).expect("json");
                    if let Some(map) = v.as_object_mut() {
                        map.remove("f_daily_schedule");
                    }
                    std::fs::write(&path, serde_json::to_vec(&v).expect("bytes")).expect("write");
                }
            }),
            vec!["scratch.json", "f_daily_schedule"],
        ),
        (
            // Issue 48: free text is bounded when the save loads, not cut later.
            "a megabyte of learned",
            Box::new({
                let scratch = scratch.clone();
                move |save: &Path| {
                    let path = save.join(&scratch);
                    let mut v: serde_json::Value =
                        serde_json::from_slice(&std::fs::read(&path).expect("read")).expect("json");
                    v["learned"] = serde_json::json!("x".repeat(1 << 20));
                    std::fs::write(&path, serde_json::to_vec(&v).expect("bytes")).expect("write");
                }
            }),
            vec!["scratch.json", "learned", "at most 20000"],
        ),
        (
            // SPEC §16: the group conversations waiting for their after-chat are bounded too.
            "a thousand conversations left",
            Box::new({
                let scratch = scratch.clone();
                move |save: &Path| {
                    let path = save.join(&scratch);
                    let mut v: serde_json::Value =
                        serde_json::from_slice(&std::fs::read(&path).expect("read")).expect("json");
                    let talk = serde_json::json!({"partner": "Bo", "object": "the group in the cafe",
                        "lines": [["Bo", "hello"]]});
                    v["group_after_chats"] = serde_json::json!(vec![talk; 1000]);
                    std::fs::write(&path, serde_json::to_vec(&v).expect("bytes")).expect("write");
                }
            }),
            vec!["scratch.json", "group_after_chats", "at most 4"],
        ),
        (
            "garbage events",
            Box::new(|save: &Path| {
                std::fs::write(save.join("world").join("events.json"), b"\x00\x01 not json")
                    .expect("write")
            }),
            vec!["events.json"],
        ),
        (
            "a stranger in a group conversation",
            Box::new(|save: &Path| {
                let path = save.join("groups.json");
                let mut v: serde_json::Value =
                    serde_json::from_slice(&std::fs::read(&path).expect("read")).expect("json");
                v["streams"] = serde_json::json!([{
                    "key": {"Arena": "the town:cafe:counter"}, "members": ["Mallory"],
                    "opened": "2023-02-13T09:00:00", "said": 0, "lines": []
                }]);
                std::fs::write(&path, serde_json::to_vec(&v).expect("bytes")).expect("write");
            }),
            vec!["groups.json", "streams[0].members[0]", "Mallory"],
        ),
        (
            "truncated groups",
            truncate("groups.json".into()),
            vec!["groups.json", "truncated"],
        ),
        (
            // A sparse file: the size is refused before a byte of it is read.
            "memories larger than a save file may be",
            Box::new({
                let nodes = nodes.clone();
                move |save: &Path| {
                    let file = std::fs::OpenOptions::new()
                        .write(true)
                        .open(save.join(&nodes))
                        .expect("open");
                    file.set_len(bevy_generative_agents::persist::MAX_SAVE_FILE_BYTES + 1)
                        .expect("grow");
                }
            }),
            vec!["nodes.json", "1073741825 bytes, more than the 1073741824"],
        ),
        (
            "attention out of range",
            Box::new({
                let group = rel(&persona.join("group.json"));
                move |save: &Path| {
                    let path = save.join(&group);
                    let mut v: serde_json::Value =
                        serde_json::from_slice(&std::fs::read(&path).expect("read")).expect("json");
                    v["join_in"] = serde_json::json!(-3.0);
                    std::fs::write(&path, serde_json::to_vec(&v).expect("bytes")).expect("write");
                }
            }),
            vec!["group.json", "join_in"],
        ),
    ];

    // A world to load into: the good save, resumed. A failed load must leave it untouched.
    let (mut app, _) = build_app_from_save(&good, &LlmConfig::default(), None, None, false)
        .expect("good save loads");
    let step_before = app.world().resource::<SimClock>().step();
    for (i, (what, damage, needles)) in cases.iter().enumerate() {
        let bad = root.join(format!("bad-{i}"));
        copy_tree(&good, &bad);
        damage(&bad);
        let err = decode(&bad).expect_err(what);
        let message = err.to_string();
        for needle in needles {
            assert!(
                message.contains(needle),
                "{what}: {message:?} lacks {needle:?}"
            );
        }
        assert!(
            load_into_world(app.world_mut(), &bad).is_err(),
            "{what}: load refused"
        );
        assert_eq!(app.world().resource::<SimClock>().step(), step_before);
        let personas = app
            .world_mut()
            .query_filtered::<(), bevy::prelude::With<Persona>>()
            .iter(app.world())
            .count();
        assert_eq!(personas, 3, "{what}: the world keeps its personas");

        // The binary: a clear message, a non-zero exit, and no output folder.
        let out = root.join(format!("out-{i}"));
        let output = Command::new(BIN)
            .args([
                "run",
                "--hours",
                "0.1",
                "--backend",
                "scripted",
                "--no-progress",
            ])
            .arg("--from")
            .arg(&bad)
            .arg("--out")
            .arg(&out)
            .output()
            .expect("spawn");
        assert!(!output.status.success(), "{what}: non-zero exit");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(needles[0]), "{what}: stderr {stderr}");
        assert!(!out.exists(), "{what}: nothing written");
        let fork = Command::new(BIN)
            .arg("fork")
            .arg(&bad)
            .arg(root.join(format!("fork-{i}")))
            .output()
            .expect("spawn");
        assert!(
            !fork.status.success(),
            "{what}: a corrupt save is not forked"
        );
    }
    // After all that, the good world still runs.
    app.update();
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn a_different_embedding_model_is_refused() {
    let root = temp("embedding");
    let good = good_save(&root);
    let other = LlmClient::new(std::sync::Arc::new(
        ScriptedBackend::new(1).with_embedding_dim(17),
    ));
    let Err(err) = build_app_from_save(&good, &LlmConfig::default(), Some(other), None, false)
    else {
        panic!("a different embedding dimension must be refused");
    };
    assert!(
        matches!(err, PersistError::EmbeddingMismatch { saved_dim, current_dim: 17, .. } if saved_dim != 17),
        "{err}"
    );
    assert!(err.to_string().contains("scripted-hashed-bow"), "{err}");
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn fork_copies_a_validated_save_and_never_overwrites() {
    let root = temp("fork");
    let good = good_save(&root);
    let dst = root.join("forked");
    let output = Command::new(BIN)
        .arg("fork")
        .arg(&good)
        .arg(&dst)
        .output()
        .expect("spawn");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let original = normalised_tree(&good);
    let copy = normalised_tree(&dst);
    for (file, bytes) in &original {
        if file != Path::new("meta.json") {
            assert_eq!(copy.get(file), Some(bytes), "{}", file.display());
        }
    }
    let meta = decode(&dst).expect("fork loads").meta;
    assert_eq!(meta.forked_from.as_deref(), Some(good.as_path()));
    assert_eq!(meta.step, decode(&good).expect("good").meta.step);
    let again = fork_save(&good, &dst).expect_err("exists");
    assert!(matches!(again, PersistError::Exists { .. }));
    // A fork resumes like the original.
    let a = run_ok(&options(0.5, &root.join("from-original")).resuming(&good));
    let b = run_ok(&options(0.5, &root.join("from-fork")).resuming(&dst));
    assert_eq!(a.final_frames, b.final_frames);
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn killing_the_process_during_saves_always_leaves_a_loadable_save() {
    let root = temp("kill");
    let out = root.join("run");
    run_ok(&options(6.0, &out));
    let save = out.join("save");
    let mut last_step = decode(&save).expect("first save").meta.step;
    // A small deterministic generator for the kill delays.
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut killed_running = 0;
    for round in 0..10 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let delay = Duration::from_millis(150 + state % 900);
        // Resume from the save and save into it again every 3 steps: saves all the time.
        let mut child = Command::new(BIN)
            .args([
                "run",
                "--hours",
                "2",
                "--backend",
                "scripted",
                "--no-progress",
                "--no-report",
                "--save-every",
                "3",
            ])
            .arg("--from")
            .arg(&save)
            .arg("--out")
            .arg(&out)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn");
        std::thread::sleep(delay);
        if child.try_wait().expect("poll").is_none() {
            killed_running += 1;
        }
        let _ = child.kill();
        let _ = child.wait();
        recover_interrupted_save(&save).expect("recover");
        let data = match decode(&save) {
            Ok(data) => data,
            Err(err) => panic!("round {round} ({delay:?}): the save does not load: {err}"),
        };
        assert!(
            data.meta.step >= last_step,
            "round {round}: the save went back from {last_step} to {}",
            data.meta.step
        );
        last_step = data.meta.step;
    }
    assert!(killed_running >= 5, "most kills hit a running process");
    let first = decode(&out.join("save")).expect("final");
    assert!(
        first.meta.step > 6 * 360,
        "later saves landed: step {}",
        first.meta.step
    );
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn replay_check_and_report_describe_the_run() {
    let root = temp("report");
    let out = root.join("run");
    let mut opts = options(10.0, &out);
    opts.report = true;
    let report = run_ok(&opts);
    assert_eq!(
        report.report_path.as_deref(),
        Some(out.join("report.html").as_path())
    );

    let check = check_replay(&out, None).expect("valid log");
    assert_eq!(check.lines, 3600);
    assert_eq!(check.steps, (0, 3599));
    assert_eq!(check.personas.len(), 3);
    assert!(check.moves > 50, "{} moves", check.moves);
    assert_eq!(check.matches_save, Some(true));

    let data = write_report(&out).expect("report");
    assert_eq!(data.personas.len(), 3);
    assert_eq!(data.llm_totals.calls, report.usage.totals.calls);
    for (name, p) in &data.personas {
        let minutes: f64 = p.minutes_by_category.values().sum();
        assert!(
            (minutes - 600.0).abs() < 0.01,
            "{name}: {minutes} minutes in 10 hours"
        );
        assert!(p.actions >= 3, "{name}: {} actions", p.actions);
    }
    for image in &data.images {
        let bytes = std::fs::read(out.join(image)).expect("image");
        assert_eq!(
            &bytes[..8],
            b"\x89PNG\r\n\x1a\n",
            "{} is a PNG",
            image.display()
        );
    }
    let html = std::fs::read_to_string(out.join("report.html")).expect("html");
    assert!(html.contains("report/timeline-2023-02-13.png"));
    assert!(html.contains("report/llm-usage.png"));
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("report.json")).expect("json"))
            .expect("parse");
    assert_eq!(json["steps"], serde_json::json!([0, 3599]));

    // The binary: check passes; a damaged log fails with the line.
    let ok = Command::new(BIN)
        .args(["replay", "--check"])
        .arg(&out)
        .output()
        .expect("spawn");
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    assert!(String::from_utf8_lossy(&ok.stdout).contains("ends exactly where the save does"));
    // Checked against another town's map, the log is refused: its save names another world…
    let saltmere = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/maps/saltmere.tmx");
    let other = Command::new(BIN)
        .args(["replay", "--check"])
        .arg(&out)
        .arg("--map")
        .arg(&saltmere)
        .output()
        .expect("spawn");
    assert!(!other.status.success());
    let err = String::from_utf8_lossy(&other.stderr);
    assert!(
        err.contains("made in \"Willowbrook\"") && err.contains("not in \"Saltmere\""),
        "{err}"
    );
    // … and without the save, its first tile blocked on that map gives it away.
    let bare = root.join("bare");
    std::fs::create_dir_all(&bare).expect("mkdir");
    std::fs::copy(out.join("movement.jsonl"), bare.join("movement.jsonl")).expect("copy");
    let err = check_replay(&bare, Some(&saltmere))
        .expect_err("a Willowbrook log on the Saltmere map")
        .to_string();
    assert!(err.contains("the log was made on another map"), "{err}");
    assert!(!err.contains("TileCoord"), "{err}");
    let log = out.join("movement.jsonl");
    let mut text = std::fs::read_to_string(&log).expect("log");
    text = text.replacen("\"step\":5,", "\"step\":6,", 1);
    std::fs::write(&log, text).expect("write");
    let bad = Command::new(BIN)
        .args(["replay", "--check"])
        .arg(&out)
        .output()
        .expect("spawn");
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("line 6"));
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn a_save_request_waits_for_thoughts_in_flight_pausing_the_clock() {
    let root = temp("request");
    let good = good_save(&root);
    let (mut app, meta) =
        build_app_from_save(&good, &LlmConfig::default(), None, None, false).expect("loads");
    let persona = app
        .world_mut()
        .query_filtered::<bevy::prelude::Entity, With<Persona>>()
        .iter(app.world())
        .next()
        .expect("a persona");
    // A thought in flight (as in Realtime with a slow model).
    app.world_mut()
        .entity_mut(persona)
        .insert(AwaitingCognition::new(meta.step));
    app.world_mut().resource_mut::<SimClock>().speed = SimSpeed::X4;
    let target = root.join("requested");
    app.world_mut()
        .resource_mut::<Messages<SaveRequest>>()
        .write(SaveRequest {
            dir: target.clone(),
        });
    app.update();
    assert!(!target.exists(), "no save while a mind is out");
    assert_eq!(
        app.world().resource::<SimClock>().speed,
        SimSpeed::Paused,
        "the clock waits for the thought"
    );
    app.world_mut()
        .entity_mut(persona)
        .remove::<AwaitingCognition>();
    app.update();
    let saved = decode(&target).expect("saved once the thought landed");
    assert_eq!(saved.meta.step, meta.step, "paused: no step was taken");
    assert_eq!(app.world().resource::<SimClock>().speed, SimSpeed::X4);
    let outcomes: Vec<PersistOutcome> = app
        .world_mut()
        .resource_mut::<Messages<PersistOutcome>>()
        .drain()
        .collect();
    assert_eq!(
        outcomes,
        vec![PersistOutcome::Saved {
            dir: target.clone(),
            step: meta.step
        }]
    );
    let _ = std::fs::remove_dir_all(&root);
}

/// The run's `record.jsonl` (SPEC §16) holds the town's group talk — five personas of the
/// default town, lunch at the café from 12:10 — and a run resumed from a save taken in the
/// middle of that talk (12:30) goes on with the same lines: the whole run's record is the first
/// part's and then the resumed part's, byte for byte; the report counts the lines per day.
#[test]
fn the_record_holds_the_town_talk_and_a_resumed_run_continues_it() {
    let root = temp("record");
    let five = |hours: f64, out: &Path| scripted_run_options(hours, 5, 1, out);
    let (whole, part1, part2) = (root.join("whole"), root.join("part1"), root.join("part2"));
    run_ok(&five(14.0, &whole));
    run_ok(&five(12.5, &part1));
    run_ok(&five(1.5, &part2).resuming(part1.join("save")));
    let record = |dir: &Path| lines(&dir.join("record.jsonl"));
    let said = record(&whole)
        .iter()
        .filter(|l| l.contains(r#""kind":"group_line""#))
        .count() as u64;
    let before_the_save = record(&part1)
        .iter()
        .filter(|l| l.contains(r#""kind":"group_line""#))
        .count() as u64;
    assert!(
        0 < before_the_save && before_the_save < said,
        "the save is not in the middle of the talk: {before_the_save} of {said} lines before it"
    );
    assert_eq!(
        record(&whole),
        [record(&part1), record(&part2)].concat(),
        "the record of the resumed run"
    );
    let data = write_report(&whole).expect("report");
    let days: Vec<u64> = data
        .record_per_day
        .values()
        .map(|c| c.group_lines)
        .collect();
    assert_eq!(days, [said], "one day, every group line counted");
    let html = std::fs::read_to_string(whole.join("report.html")).expect("html");
    assert!(
        html.contains("<th>group lines</th>"),
        "the report shows the record"
    );
    assert!(
        html.contains(&format!("data-kind=\"group_lines\" data-count=\"{said}\"")),
        "the report charts the record"
    );
    let _ = std::fs::remove_dir_all(&root);
}

/// Every file under `dir`, relative to it, sorted.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(next) = stack.pop() {
        for entry in std::fs::read_dir(&next).expect("read dir").flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                out.push(path.strip_prefix(dir).expect("inside").to_path_buf());
            }
        }
    }
    out.sort();
    out
}

/// Issue 48: one digit changed in any file of a real save — every system's file, the group
/// conversations, pending work and each persona's dialogue, group and spatial memory
/// included — is refused naming that file; so is a file the loader reads that the manifest
/// does not list. Nothing is loaded.
#[test]
fn one_digit_edited_in_any_file_of_a_save_is_refused_naming_the_file() {
    let root = temp("digit");
    let good = good_save(&root);
    let meta = decode(&good).expect("good save").meta;
    let files: Vec<PathBuf> = files_under(&good)
        .into_iter()
        .filter(|f| f != Path::new("manifest.json"))
        .collect();
    for must in ["groups.json", "pending.json", "meta.json", "settings.json"] {
        assert!(files.contains(&PathBuf::from(must)), "{must} in {files:?}");
    }
    for name in &meta.personas {
        for file in [
            "dialogue.json",
            "group.json",
            "spatial_memory.json",
            "rng.json",
        ] {
            let path = Path::new("personas").join(name).join(file);
            assert!(files.contains(&path), "{} in the save", path.display());
        }
    }
    let (mut app, _) = build_app_from_save(&good, &LlmConfig::default(), None, None, false)
        .expect("good save loads");
    for (i, file) in files.iter().enumerate() {
        let bad = root.join(format!("digit-{i}"));
        copy_tree(&good, &bad);
        let path = bad.join(file);
        let mut bytes = std::fs::read(&path).expect("read");
        match bytes.iter().position(u8::is_ascii_digit) {
            Some(at) => {
                bytes[at] = if bytes[at] == b'9' {
                    b'0'
                } else {
                    bytes[at] + 1
                }
            }
            // A file without a digit (an empty list of intents) gets one more space.
            None => bytes.insert(1, b' '),
        }
        std::fs::write(&path, &bytes).expect("edit");
        let err = decode(&bad).expect_err("an edited file").to_string();
        let shown = file.display().to_string();
        // The path, or (for a memory document the memory store refuses) its folder and name.
        let folder = file.parent().map(|p| p.display().to_string());
        let name = file.file_name().map(|n| n.to_string_lossy().into_owned());
        let named = err.contains(&shown)
            || folder.is_some_and(|f| err.contains(&f))
                && name.is_some_and(|n| err.contains(&format!(": {n}")));
        assert!(named, "{shown}: {err}");
        assert!(
            load_into_world(app.world_mut(), &bad).is_err(),
            "{shown}: not loaded"
        );
        let _ = std::fs::remove_dir_all(&bad);
    }

    // A file the loader reads but the manifest does not list.
    let unlisted = root.join("unlisted");
    copy_tree(&good, &unlisted);
    let manifest_path = unlisted.join("manifest.json");
    let mut manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&manifest_path).expect("read")).expect("json");
    let dialogue = format!("personas/{}/dialogue.json", meta.personas[0]);
    manifest["files"]
        .as_object_mut()
        .expect("files")
        .remove(&dialogue)
        .expect("listed");
    std::fs::write(
        &manifest_path,
        serde_json::to_vec_pretty(&manifest).expect("bytes"),
    )
    .expect("write");
    let err = decode(&unlisted).expect_err("unlisted").to_string();
    assert!(
        err.contains("dialogue.json") && err.contains("not listed"),
        "{err}"
    );

    // The command line names it too, and --trust-edited-save loads it on purpose.
    let fork = Command::new(BIN)
        .arg("fork")
        .arg(&unlisted)
        .arg(root.join("fork"))
        .output()
        .expect("spawn");
    assert!(!fork.status.success());
    assert!(
        String::from_utf8_lossy(&fork.stderr).contains("dialogue.json"),
        "{}",
        String::from_utf8_lossy(&fork.stderr)
    );
    let trusted = Command::new(BIN)
        .arg("fork")
        .arg("--trust-edited-save")
        .arg(&unlisted)
        .arg(root.join("fork-trusted"))
        .output()
        .expect("spawn");
    assert!(
        trusted.status.success(),
        "{}",
        String::from_utf8_lossy(&trusted.stderr)
    );
    decode(&root.join("fork-trusted")).expect("the fork is sealed again");
    let _ = std::fs::remove_dir_all(&root);
}

/// Issue 48: every command that loads a save refuses one edited by hand, naming the file, and
/// loads it with `--trust-edited-save` (the game's `--load` too, which needs the window; its
/// flag is parsed by the same code).
#[test]
fn every_command_that_loads_a_save_takes_trust_edited_save() {
    let root = temp("trust");
    let good = good_save(&root);
    let persona = decode(&good).expect("good").meta.personas[0].clone();
    let edited = root.join("edited");
    copy_tree(&good, &edited);
    // One more newline: the save still decodes, but is not what was saved.
    let pending = edited.join("pending.json");
    let mut bytes = std::fs::read(&pending).expect("read");
    bytes.push(b'\n');
    std::fs::write(&pending, bytes).expect("edit");

    // The run folder too, for `replay --check`, which reads its save for the map.
    let run_dir = root.join("edited-run");
    copy_tree(good.parent().expect("the run folder"), &run_dir);
    std::fs::copy(&pending, run_dir.join("save").join("pending.json")).expect("edit");

    let stage = bevy_generative_agents::files::crate_file("assets/stages/standoff.json");
    let commands: Vec<(&str, Vec<std::ffi::OsString>)> = vec![
        (
            "replay --check",
            vec!["replay".into(), "--check".into(), run_dir.clone().into()],
        ),
        (
            "run --from",
            vec![
                "run".into(),
                "--hours".into(),
                "0.01".into(),
                "--backend".into(),
                "scripted".into(),
                "--no-progress".into(),
                "--no-report".into(),
                "--from".into(),
                edited.clone().into(),
                "--out".into(),
                root.join("run-out").into(),
            ],
        ),
        (
            "fork",
            vec![
                "fork".into(),
                edited.clone().into(),
                root.join("fork").into(),
            ],
        ),
        (
            "interview",
            vec![
                "interview".into(),
                edited.clone().into(),
                "--persona".into(),
                persona.clone().into(),
                "--question".into(),
                "How are you?".into(),
                "--llm-backend".into(),
                "scripted".into(),
            ],
        ),
        (
            "stage --from",
            vec![
                "stage".into(),
                stage.clone().into(),
                "--from".into(),
                edited.clone().into(),
                "--turns".into(),
                "1".into(),
                "--warm-up".into(),
                "0".into(),
                "--llm-backend".into(),
                "scripted".into(),
            ],
        ),
    ];
    for (what, args) in commands {
        let refused = Command::new(BIN).args(&args).output().expect("spawn");
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert!(
            !refused.status.success(),
            "{what}: an edited save is refused"
        );
        assert!(
            stderr.contains("pending.json") && stderr.contains("--trust-edited-save"),
            "{what}: {stderr}"
        );
        let _ = std::fs::remove_dir_all(root.join("run-out"));
        let _ = std::fs::remove_dir_all(root.join("fork"));
        let trusted = Command::new(BIN)
            .args(&args)
            .arg("--trust-edited-save")
            .output()
            .expect("spawn");
        let stderr = String::from_utf8_lossy(&trusted.stderr);
        // The stage may refuse its scene in this town; the save itself was loaded.
        assert!(
            !stderr.contains("pending.json") && !stderr.contains("manifest"),
            "{what} --trust-edited-save: {stderr}"
        );
        if what != "stage --from" {
            assert!(trusted.status.success(), "{what}: {stderr}");
        }
    }
    // The game's --load takes the flag (this build has no window, so it stops there).
    let game = Command::new(BIN)
        .arg("--load")
        .arg(&edited)
        .arg("--trust-edited-save")
        .output()
        .expect("spawn");
    let stderr = String::from_utf8_lossy(&game.stderr);
    assert!(!stderr.contains("unexpected argument"), "{stderr}");
    let _ = std::fs::remove_dir_all(&root);
}

/// Issue 48: a save names a shipped town's map relative to the asset root, so it opens on
/// another machine; a save written before, with this machine's absolute path or another
/// machine's, still loads.
#[test]
fn a_save_stores_its_map_relative_and_older_absolute_saves_still_load() {
    use bevy_generative_agents::persist::{
        SaveIntegrity, build_app_from_save_with, fork_save_with,
    };
    let root = temp("map");
    let good = good_save(&root);
    let meta = decode(&good).expect("good").meta;
    assert!(meta.map.is_relative(), "{}", meta.map.display());
    assert!(meta.map.starts_with("assets"), "{}", meta.map.display());
    let text = std::fs::read_to_string(good.join("meta.json")).expect("meta");
    assert!(
        !text.contains(env!("CARGO_MANIFEST_DIR")),
        "no path of this checkout in the save"
    );

    let here = bevy_generative_agents::files::crate_file(&meta.map);
    let elsewhere = Path::new("/home/someone-else/checkout").join(&meta.map);
    for (i, old) in [here, elsewhere].iter().enumerate() {
        let edited = root.join(format!("old-{i}"));
        copy_tree(&good, &edited);
        let path = edited.join("meta.json");
        let mut value: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).expect("read")).expect("json");
        value["map"] = serde_json::json!(old);
        std::fs::write(&path, serde_json::to_vec_pretty(&value).expect("bytes")).expect("write");
        // Sealed afresh, as a save of that time would be.
        let sealed = root.join(format!("sealed-{i}"));
        fork_save_with(&edited, &sealed, SaveIntegrity::TrustEdited).expect("fork");
        assert_eq!(decode(&sealed).expect("sealed").meta.map, *old);
        let (app, _) = build_app_from_save_with(
            &sealed,
            &LlmConfig::default(),
            None,
            None,
            false,
            SaveIntegrity::Verify,
        )
        .unwrap_or_else(|err| panic!("{}: {err}", old.display()));
        drop(app);
    }
    let _ = std::fs::remove_dir_all(&root);
}
