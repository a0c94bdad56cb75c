//! What several integration tests start from: a short run on the offline town script (movement
//! log and save), and a copy of a folder to corrupt without touching the original.
#![allow(dead_code, reason = "each test file uses a part of these helpers")]

use std::path::Path;

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
