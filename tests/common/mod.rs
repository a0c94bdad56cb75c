//! What several integration tests start from: a short run on the offline town script (movement
//! log and save), and a copy of a folder to corrupt without touching the original.
#![allow(dead_code, reason = "each test file uses a part of these helpers")]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use bevy_generative_agents::llm::BackendChoice;
use bevy_generative_agents::output::{RunOptions, RunReport, run};

/// `smallville run` on the scripted backend: `hours` game hours, the first `personas`, `seed`,
/// into `out`, without the report files.
pub fn scripted_run_options(hours: f64, personas: usize, seed: u64, out: &Path) -> RunOptions {
    let mut options = RunOptions::new(hours, out)
        .with_backend(BackendChoice::Scripted)
        .with_personas(personas)
        .with_seed(seed);
    options.report = false;
    options
}

/// Runs `options`; a failure fails the test with the run's error.
pub fn run_ok(options: &RunOptions) -> RunReport {
    match run(options) {
        Ok(report) => report,
        Err(err) => panic!("run failed: {err}"),
    }
}

/// A scripted run (see [`scripted_run_options`]).
pub fn scripted_run(hours: f64, personas: usize, seed: u64, out: &Path) -> RunReport {
    run_ok(&scripted_run_options(hours, personas, seed, out))
}

/// Every file under `dir`, relative path → bytes, with `meta.json`'s wall-clock field zeroed
/// (and its checksum in `manifest.json`, which covers that field).
pub fn normalised_tree(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .expect("read dir")
            .map(|e| e.expect("entry").path())
            .collect();
        entries.sort();
        for path in entries {
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                let relative = path.strip_prefix(root).expect("inside").to_path_buf();
                let mut bytes = std::fs::read(&path).expect("read");
                if relative == Path::new("meta.json") {
                    let mut meta: serde_json::Value =
                        serde_json::from_slice(&bytes).expect("meta json");
                    meta["saved_at_unix"] = serde_json::json!(0);
                    bytes = serde_json::to_vec_pretty(&meta).expect("meta bytes");
                }
                if relative == Path::new("manifest.json") {
                    // The checksum of meta.json covers its wall-clock field.
                    let mut manifest: serde_json::Value =
                        serde_json::from_slice(&bytes).expect("manifest json");
                    manifest["files"]["meta.json"] = serde_json::json!("");
                    bytes = serde_json::to_vec_pretty(&manifest).expect("manifest bytes");
                }
                out.insert(relative, bytes);
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

/// Asserts that the saves `expected` (of a run that never stopped) and `got` hold the same
/// files, byte for byte but for the wall-clock time of the save; returns `expected`'s files.
/// `what` names `got` in a failure.
pub fn assert_same_save(expected: &Path, got: &Path, what: &str) -> BTreeMap<PathBuf, Vec<u8>> {
    let a = normalised_tree(expected);
    let b = normalised_tree(got);
    assert_eq!(
        a.keys().collect::<Vec<_>>(),
        b.keys().collect::<Vec<_>>(),
        "{what}: same files"
    );
    for (file, bytes) in &a {
        assert!(
            b.get(file) == Some(bytes),
            "{what}: {} differs from the run that never stopped",
            file.display()
        );
    }
    a
}

/// Copies the folder `from` to `to`, recursively.
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read dir") {
        let path = entry.expect("entry").path();
        let target = to.join(path.file_name().expect("name"));
        if path.is_dir() {
            copy_tree(&path, &target);
        } else {
            std::fs::copy(&path, &target).expect("copy");
        }
    }
}

/// A fresh folder under the system temp dir (`bga-<tag>-<pid>`), removed on drop.
pub struct TempDir(std::path::PathBuf);

impl TempDir {
    /// Creates it, empty.
    pub fn new(tag: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("bga-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        Self(dir)
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `app` until the clock has taken `step` (exactly: the clock stops there).
pub fn run_to_step(app: &mut bevy::prelude::App, step: u64) {
    use bevy_generative_agents::clock::{SimClock, SimSpeed};
    app.world_mut().resource_mut::<SimClock>().stop_at_step = Some(step);
    app.world_mut().resource_mut::<SimClock>().speed = SimSpeed::Max;
    for _ in 0..2_000_000 {
        if app.world().resource::<SimClock>().step() >= step {
            return;
        }
        app.update();
    }
    panic!("the clock stalled before step {step}");
}

/// Saves `app`'s world into `dir`, updating while a save must wait (calls in flight).
pub fn save_when_saveable(
    app: &mut bevy::prelude::App,
    dir: &Path,
) -> bevy_generative_agents::persist::SaveMeta {
    use bevy_generative_agents::persist::{PersistError, save_world};
    let _ = std::fs::remove_dir_all(dir);
    for _ in 0..100_000 {
        match save_world(app.world_mut(), dir) {
            Ok(meta) => return meta,
            Err(PersistError::Busy(_)) => app.update(),
            Err(err) => panic!("save failed: {err}"),
        }
    }
    panic!("the town never became saveable");
}
