//! `smallville run --scenario`: a whispered party on the offline town script — injections at
//! their game time, who-knows read from memories, attendance measured, `scenario.json` and the
//! report's section written, the same results on a rerun, and a scenario that names what the
//! town does not have refused before anything is written.

mod common;

use std::path::{Path, PathBuf};

use bevy_generative_agents::director::scenario::{
    SCENARIO_FILE, SCENARIO_LOG, Scenario, run_scenario,
};
use bevy_generative_agents::output::RunError;
use serde_json::Value;

const PARTY: &str = r#"{
  "name": "open-mic party",
  "description": "Mira decides to throw a Valentine's party at the cafe this evening.",
  "hours": 20,
  "injections": [
    {"kind": "whisper", "at": "2023-02-13 07:30", "persona": "Mira",
     "text": "I am throwing a Valentine's Day party at Riverside Cafe today from 5 pm to 7 pm, and I want to invite everyone I meet."},
    {"kind": "tile_event", "at": "2023-02-13 08:00", "place": "Riverside Cafe",
     "description": "a poster for the Valentine's party", "subject": "poster"}
  ],
  "probes": [
    {"kind": "who_knows", "topic": "Valentine party", "every_hours": 4},
    {"kind": "interview", "at": "2023-02-13 12:00", "question": "Do you know of any party soon?", "personas": ["Tomas Reyes"]}
  ],
  "checks": [
    {"name": "party", "place": "Riverside Cafe", "from": "2023-02-13 17:00", "to": "2023-02-13 19:00"}
  ]
}"#;

fn scenario_file(dir: &Path, text: &str) -> PathBuf {
    std::fs::create_dir_all(dir).expect("mkdir");
    let path = dir.join("scenario.json.in");
    std::fs::write(&path, text).expect("write scenario");
    path
}

fn out_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ga-scenario-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn results(out: &Path) -> Value {
    let text = std::fs::read_to_string(out.join(SCENARIO_FILE)).expect("scenario.json");
    serde_json::from_str(&text).expect("scenario.json is JSON")
}

#[test]
fn a_whispered_party_is_injected_probed_and_measured_the_same_way_twice() {
    let dir = out_dir("party");
    let path = scenario_file(&dir, PARTY);
    let mut runs = Vec::new();
    for n in 0..2 {
        let out = dir.join(format!("run{n}"));
        let mut options = common::scripted_run_options(20.0, 5, 3, &out);
        options.report = n == 0;
        let scenario = Scenario::load(&path).expect("the scenario loads");
        let (report, measured) = run_scenario(options, scenario).expect("the scenario runs");
        assert_eq!(report.steps, 20 * 360);
        assert_eq!(measured.unreadable_lines, 0);
        runs.push((out, measured));
    }
    let (out, measured) = &runs[0];

    // Both injections ran at their time; the persona name was resolved to its full form.
    assert_eq!(measured.injections.len(), 2, "{:?}", measured.injections);
    assert!(measured.injections.iter().all(|i| i["what"] == "injected"));
    assert_eq!(
        measured.scenario.injections[0]
            .at
            .format("%H:%M")
            .to_string(),
        "07:30"
    );
    let json = results(out);
    assert_eq!(json["scenario"]["injections"][0]["persona"], "Mira Okafor");

    // Who knows, from memories: nobody before the whisper, Mira from the first sample after.
    let (topic, series) = &measured.diffusion[0];
    assert_eq!(topic, "Valentine party");
    assert_eq!(series[0].count, 0, "nobody knows at midnight");
    let after: Vec<_> = series
        .iter()
        .filter(|p| p.at.format("%H:%M").to_string().as_str() >= "08:00")
        .collect();
    assert!(!after.is_empty());
    assert!(
        after
            .iter()
            .all(|p| p.knows.contains(&"Mira Okafor".to_string())),
        "{series:?}"
    );
    assert!(series.iter().all(|p| p.of == 5));
    // Samples every 4 hours from 00:00 to 16:00, then the end of the run.
    assert_eq!(series.len(), 6, "{series:?}");

    // The interview asked only Tomas, and his answer was logged.
    assert_eq!(measured.answers.len(), 1, "{:?}", measured.answers);
    assert_eq!(measured.answers[0]["persona"], "Tomas Reyes");
    assert!(
        !measured.answers[0]["answer"]
            .as_str()
            .unwrap_or("")
            .is_empty()
    );

    // The check saw the window through, at the café's arena.
    assert_eq!(measured.checks.len(), 1);
    let check = &measured.checks[0];
    assert_eq!(check["complete"], true);
    assert!(
        check["arena"]
            .as_str()
            .unwrap_or("")
            .contains("Riverside Cafe")
    );
    assert_eq!(
        check["count"].as_u64().unwrap_or(99) as usize,
        check["present"].as_array().map_or(0, Vec::len)
    );

    // The report carries the chart and the attendance.
    let html = std::fs::read_to_string(out.join("report.html")).expect("report.html");
    assert!(html.contains("Scenario: open-mic party"));
    assert!(html.contains("<svg") && html.contains("Attendance"));
    assert!(html.trim_end().ends_with("</html>"));

    // Lockstep on the offline script: the second run measured exactly the same.
    assert_eq!(runs[0].1.diffusion, runs[1].1.diffusion);
    assert_eq!(runs[0].1.checks, runs[1].1.checks);
    assert_eq!(runs[0].1.answers, runs[1].1.answers);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_scenario_naming_what_the_town_lacks_is_refused_before_anything_is_written() {
    let dir = out_dir("unfit");
    let text = PARTY
        .replace("\"persona\": \"Mira\"", "\"persona\": \"Nobody Atall\"")
        .replace(
            "\"place\": \"Riverside Cafe\", \"from\"",
            "\"place\": \"The Moon\", \"from\"",
        );
    let path = scenario_file(&dir, &text);
    let out = dir.join("run");
    let options = common::scripted_run_options(20.0, 5, 3, &out);
    let scenario = Scenario::load(&path).expect("the file itself is well formed");
    let err = run_scenario(options, scenario).expect_err("unfit for this town");
    let RunError::Invalid(reason) = &err else {
        panic!("wrong error: {err}");
    };
    assert!(reason.contains("Nobody Atall"), "{reason}");
    assert!(reason.contains("The Moon"), "{reason}");
    assert!(
        !out.exists(),
        "nothing is written for a scenario that cannot run"
    );
    assert!(!out.join(SCENARIO_LOG).exists());

    // A file that is not a scenario names the file.
    let bad = scenario_file(&dir.join("bad"), "{\"name\": 3}");
    let err = Scenario::load(&bad).expect_err("not a scenario");
    assert!(err.to_string().contains("scenario.json.in"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A scenario injects a stage scene (issue 17): the standoff opens at its time, plays its turns
/// and closes; its personas keep it. One naming a persona or an arena the town lacks is refused
/// before the run starts.
#[test]
fn a_scenario_injects_a_stage_scene() {
    let dir = out_dir("stage");
    let scene = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/assets/stages/standoff.json"
    ))
    .expect("the shipped scene");
    let text = format!(
        r#"{{"name": "standoff", "description": "a stranger at the cafe", "hours": 1,
            "injections": [{{"kind": "stage", "at": "2023-02-13 00:20", "turns": 2, "scene": {scene}}}]}}"#
    );
    let path = scenario_file(&dir, &text);
    let out = dir.join("run");
    let options = common::scripted_run_options(1.0, 5, 3, &out);
    let scenario = Scenario::load(&path).expect("the scenario loads");
    let (_, measured) = run_scenario(options, scenario).expect("the scenario runs");
    assert_eq!(measured.injections.len(), 1, "{:?}", measured.injections);
    assert_eq!(
        measured.injections[0]["what"], "injected",
        "{:?}",
        measured.injections
    );
    let json = results(&out);
    assert_eq!(
        json["scenario"]["injections"][0]["scene"]["name"],
        "Standoff at Riverside Cafe"
    );
    // The run's record (SPEC §16) holds the scene's two turns, in time order.
    let record = bevy_generative_agents::output::record::read_record(out.join("record.jsonl"))
        .expect("the run's record");
    let turns: Vec<u32> = record
        .iter()
        .filter_map(|line| match &line.what {
            bevy_generative_agents::output::record::Happened::StageTurn {
                turn,
                stage,
                actors,
                ..
            } => {
                assert_eq!(stage, "Standoff at Riverside Cafe");
                // Its persona actors are named (a replay shows the narration over the first).
                assert_eq!(actors, &["Mira Okafor", "Tomas Reyes"], "{line:?}");
                Some(*turn)
            }
            _ => None,
        })
        .collect();
    assert_eq!(turns, [1, 2], "{record:?}");
    assert!(record.windows(2).all(|w| w[0].time <= w[1].time));

    let unfit = text
        .replace(
            "\"persona\": \"Mira Okafor\"",
            "\"persona\": \"Nobody Atall\"",
        )
        .replace(
            "Willowbrook:Riverside Cafe:cafe",
            "Willowbrook:The Moon:crater",
        );
    let path = scenario_file(&dir.join("unfit"), &unfit);
    let scenario = Scenario::load(&path).expect("well formed");
    let err = run_scenario(
        common::scripted_run_options(1.0, 5, 3, &dir.join("unfit-run")),
        scenario,
    )
    .expect_err("unfit for this town");
    let text = err.to_string();
    assert!(
        text.contains("Nobody Atall") && text.contains("The Moon"),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
