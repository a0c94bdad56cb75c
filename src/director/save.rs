//! The director in saves (SPEC §10, §11, §16): a save taken while a directive runs keeps it —
//! its state, intent, plan and steps with their results, the checks measured so far, the
//! evidence, an answer held while paused, the replies its steps wait for, and the town's
//! snapshot a cancel rolls back to — as the save section `sections/director.json`. Loaded, the
//! directive goes on where it was (in Lockstep, byte for byte as if never stopped), and a cancel
//! after the load still rolls the town back to before the directive.
//!
//! A save is taken between steps with no director call out (its entity is
//! `AwaitingCognition` meanwhile), so no answer is lost. A save of a town whose director never
//! ran keeps no section. Loading a save with no director section into a town where a directive
//! runs ends that directive ([`DirectorFailed`](super::DirectorFailed) with
//! [`LOADED_MID_DIRECTIVE`](super::LOADED_MID_DIRECTIVE)), rolling nothing back: its snapshot
//! belongs to the town the load replaced.
//!
//! The section is untrusted input: bounded in every count and text, the step being run inside
//! the plan, and the snapshot decoded and checked like a save before anything changes. What a
//! saved step will do is checked again when it runs (allow-list and schema, as always).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;

use bevy::prelude::*;
use serde::{Deserialize, Serialize};

use crate::persist::{PersistError, SaveSection, TownSnapshot};

use super::Director;
use super::run::{DirectorRuntime, SavedRuntime};

/// The section's name (`sections/director.json`).
pub const DIRECTOR_SECTION: &str = "director";

/// Most characters of any one text a saved job holds (directive, answers, results).
const MAX_TEXT: usize = 20_000;
/// Most files of a saved snapshot.
const MAX_SNAPSHOT_FILES: usize = 100_000;

/// `sections/director.json`.
#[derive(Serialize, Deserialize)]
struct DirectorFile {
    director: Director,
    runtime: SavedRuntime,
    /// The town before the directive ran: each file of a save of it, as text.
    snapshot: Option<BTreeMap<PathBuf, String>>,
}

/// The section, for [`SaveSections`](crate::persist::SaveSections).
pub(super) fn section() -> SaveSection {
    SaveSection {
        name: DIRECTOR_SECTION,
        capture,
        check,
        restore,
    }
}

fn capture(
    world: &mut World,
    _names: &HashMap<Entity, String>,
) -> Result<Option<Vec<u8>>, PersistError> {
    let Some(director) = world.get_resource::<Director>() else {
        return Ok(None);
    };
    if director.job.is_none() && director.history.is_empty() {
        return Ok(None);
    }
    let director = director.clone();
    let Some(runtime) = world.get_resource::<DirectorRuntime>() else {
        return Ok(None);
    };
    let (runtime, snapshot) = runtime.to_save().map_err(PersistError::Busy)?;
    let snapshot = match snapshot.cloned() {
        Some(snapshot) => {
            let mut files = BTreeMap::new();
            for (path, bytes) in snapshot.files() {
                let text = String::from_utf8(bytes.clone()).map_err(|_| PersistError::Invalid {
                    file: path.clone(),
                    field: String::new(),
                    message: "a snapshot file is not text".into(),
                })?;
                files.insert(path.clone(), text);
            }
            Some(files)
        }
        None => None,
    };
    let file = DirectorFile {
        director,
        runtime,
        snapshot,
    };
    let mut bytes = serde_json::to_vec(&file).map_err(|err| PersistError::Invalid {
        file: crate::persist::sections::section_file(DIRECTOR_SECTION),
        field: String::new(),
        message: format!("cannot serialise: {err}"),
    })?;
    bytes.push(b'\n');
    Ok(Some(bytes))
}

fn bounded(field: &str, text: &str) -> Result<(), (String, String)> {
    if text.chars().count() > MAX_TEXT {
        return Err((
            field.to_string(),
            format!("longer than {MAX_TEXT} characters"),
        ));
    }
    Ok(())
}

fn check_job(at: &str, job: &super::DirectorJob) -> Result<(), (String, String)> {
    let field = |f: &str| format!("{at}.{f}");
    bounded(&field("directive"), &job.directive)?;
    if job.steps.len() > super::plan::MAX_STEPS {
        return Err((
            field("steps"),
            format!("at most {} steps", super::plan::MAX_STEPS),
        ));
    }
    for (i, run) in job.steps.iter().enumerate() {
        bounded(&field(&format!("steps[{i}].skill")), &run.step.skill)?;
        bounded(
            &field(&format!("steps[{i}].args")),
            &run.step.args.to_string(),
        )?;
        bounded(&field(&format!("steps[{i}].result")), &run.result_text())?;
    }
    if job.current.is_some_and(|i| i >= job.steps.len()) {
        return Err((field("current"), "names no step of the plan".into()));
    }
    if job.checks.len() > 64 {
        return Err((field("checks"), "at most 64 checks".into()));
    }
    for (i, check) in job.checks.iter().enumerate() {
        bounded(&field(&format!("checks[{i}].place")), &check.check.place)?;
        if check.present.len() > 10_000 {
            return Err((field(&format!("checks[{i}].present")), "too many".into()));
        }
    }
    if job.answers.len() > 64 {
        return Err((field("answers"), "at most 64 answers".into()));
    }
    for (i, answer) in job.answers.iter().enumerate() {
        bounded(&field(&format!("answers[{i}]")), answer)?;
    }
    for (name, text) in [
        ("question", job.question.as_deref()),
        ("error", job.error.as_deref()),
        ("replan_reason", job.replan_reason.as_deref()),
        (
            "review.summary",
            job.review.as_ref().map(|r| r.summary.as_str()),
        ),
    ] {
        if let Some(text) = text {
            bounded(&field(name), text)?;
        }
    }
    let evidence = &job.evidence;
    if evidence.lines.len() > super::witness::MAX_LINES
        || evidence.scenes.len() > super::witness::MAX_SCENES
    {
        return Err((field("evidence"), "more than the director keeps".into()));
    }
    let evidence_text = serde_json::to_string(evidence).unwrap_or_default();
    if evidence_text.len() > 4 * MAX_TEXT * super::witness::MAX_SCENES {
        return Err((field("evidence"), "longer than the director keeps".into()));
    }
    Ok(())
}

fn check(bytes: &[u8], _names: &BTreeSet<&str>) -> Result<(), (String, String)> {
    let file: DirectorFile = serde_json::from_slice(bytes)
        .map_err(|err| (String::new(), format!("not a director section: {err}")))?;
    if let Some(job) = &file.director.job {
        check_job("director.job", job)?;
        if job.state.is_terminal() {
            return Err((
                "director.job.state".into(),
                "a finished job is in the history".into(),
            ));
        }
    }
    if file.director.history.len() > Director::HISTORY {
        return Err((
            "director.history".into(),
            format!("at most {} jobs", Director::HISTORY),
        ));
    }
    for (i, job) in file.director.history.iter().enumerate() {
        check_job(&format!("director.history[{i}]"), job)?;
    }
    file.runtime.check()?;
    if let Some(files) = file.snapshot {
        if files.len() > MAX_SNAPSHOT_FILES {
            return Err(("snapshot".into(), "too many files".into()));
        }
        let files = files
            .into_iter()
            .map(|(path, text)| (path, text.into_bytes()))
            .collect();
        TownSnapshot::from_files(files)
            .map_err(|err| ("snapshot".into(), format!("not a save of the town: {err}")))?;
    }
    Ok(())
}

fn restore(world: &mut World, bytes: Option<&[u8]>, _by_name: &BTreeMap<String, Entity>) {
    let saved = bytes.and_then(|b| serde_json::from_slice::<DirectorFile>(b).ok());
    // The world's directive belongs to the town the load replaced: it ends, rolling nothing
    // back (unless the save goes on with that very job).
    super::run::end_for_load(world, saved.as_ref().and_then(|s| s.director.job.as_ref()));
    let Some(saved) = saved else {
        return;
    };
    let snapshot = saved.snapshot.and_then(|files| {
        TownSnapshot::from_files(
            files
                .into_iter()
                .map(|(path, text)| (path, text.into_bytes()))
                .collect(),
        )
        .ok()
    });
    world.insert_resource(saved.director);
    super::run::restore_runtime(world, saved.runtime, snapshot);
}
