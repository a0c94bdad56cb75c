//! What a headless run leaves behind, and the run itself (SPEC §11).
//!
//! `smallville run` ([`run::run`]) builds the same headless app as the demo, steps it for the
//! requested game hours and writes three files into the output folder:
//!
//! - **`movement.jsonl`** ([`movement`]): one JSON line per sim step with, per persona, only
//!   what changed since that persona's previous entry — tile, emoji, `"act @ address"` and the
//!   current chat. A [`MovementLogPlugin`] records it from the ECS at the end of every step; the
//!   replay reads it back with [`read_movement_log`], which validates every line. The same seed
//!   and backend give a byte-identical file.
//! - **`summary.json`** ([`summary`]): per persona, each day's schedule, memory counts,
//!   reflections, conversations, identity revisions and final `currently`, plus the run's
//!   metadata.
//! - **`usage.json`**: the LLM accounting per prompt kind ([`crate::llm::UsageReport`]).
//! - **`record.jsonl`** ([`record`]): what the seed systems did, in time order — group lines,
//!   talk turns, stage turns and the director's state changes (SPEC §16), one JSON line each;
//!   the report counts and charts them per day, and a replay shows them in the personas'
//!   bubbles ([`replay_bubbles`]).
//!
//! `smallville compare` ([`cost`]) sets runs side by side — calls, tokens and behaviour per
//! agent-day — as lean mode's report does against faithful runs.
//!
//! `summary.json` and `usage.json` are written atomically: to a temporary file in the same
//! folder, synced, then renamed over the final name, so a crash never leaves a half-written
//! file under the real name. `movement.jsonl` grows as the run goes, whole lines at a time, and
//! is synced (with a fresh `usage.json`) before every save and every few seconds, so after a
//! crash it is a valid log at least up to the last save.
//!
//! **Layer** (see `tests/layers.rs`): imports everything up to [`headless`](crate::headless), and
//! [`persist`](crate::persist) (a run folder holds a save); `persist` never imports `output`.

#[cfg(feature = "local-llm")]
pub mod bench_town;
mod charts;
pub mod cost;
pub mod movement;
pub mod playback;
pub mod record;
pub mod replay;
pub mod replay_bubbles;
pub mod report;
pub mod run;
pub mod summary;

pub use movement::{
    MovementLine, MovementLog, MovementLogData, MovementLogError, MovementLogPlugin,
    MovementReplay, PersonaDelta, PersonaFrame, parse_movement_log, read_movement_log,
};
pub use playback::{ReplayActor, ReplayPlayback, ReplayPlugin, replay_speed};
pub use replay::{
    CheckedReplay, RUN_SAVE_DIR, ReplayCheck, check_replay, check_replay_with, load_replay,
    load_replay_with,
};
pub use replay_bubbles::{BubbleKind, RecordedBubble, ReplayBubbles, ScheduledBubble};
pub use report::{RunReportData, write_report};
pub use run::{
    MAX_HOURS, ProgressWatcher, RunError, RunOptions, RunProgress, RunReport, RunSetup, UsageFile,
    parse_run_backend, parse_run_speed, parse_time_mode, run,
};
pub use summary::{PersonaSummary, RunMetadata, RunSummary};

use std::io::Write;
use std::path::{Path, PathBuf};

/// The temporary name a file is written under before it is renamed to `path`: a hidden
/// sibling, so the rename stays on one file system.
pub(crate) fn temp_path_for(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.tmp"))
}

/// A log file written a whole line at a time (the movement log, the run record): lines wait
/// in `pending` and reach the file only whole, so a crash leaves every line up to the last
/// write complete (a reader can use the file after a `kill -9`). Dropping it writes what is
/// pending; nothing is ever deleted.
#[derive(Debug)]
pub(crate) struct LineFile {
    file: std::fs::File,
    path: PathBuf,
    pending: Vec<u8>,
}

/// Pending bytes written to the file at once.
const FILE_CHUNK: usize = 1 << 16;

impl LineFile {
    /// Appends to `file` (already at its end), which is `path`.
    pub(crate) fn new(file: std::fs::File, path: PathBuf) -> Self {
        Self {
            file,
            path,
            pending: Vec::with_capacity(FILE_CHUNK),
        }
    }

    /// The file's path.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    fn write_pending(&mut self) -> std::io::Result<()> {
        if !self.pending.is_empty() {
            self.file.write_all(&self.pending)?;
            self.pending.clear();
        }
        Ok(())
    }

    /// Appends whole lines (`line` ends with a newline).
    pub(crate) fn push(&mut self, line: &[u8]) -> std::io::Result<()> {
        self.pending.extend_from_slice(line);
        if self.pending.len() >= FILE_CHUNK {
            self.write_pending()?;
        }
        Ok(())
    }

    /// Writes what is pending and syncs the file.
    pub(crate) fn flush(&mut self) -> std::io::Result<()> {
        self.write_pending()?;
        self.file.sync_data()
    }
}

impl Drop for LineFile {
    fn drop(&mut self) {
        let _ = self.write_pending();
    }
}

/// Opens the log at `path` to continue it (reading and writing); `None` when there is none yet.
pub(crate) fn open_to_continue(path: &Path) -> std::io::Result<Option<std::fs::File>> {
    match std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
    {
        Ok(file) => Ok(Some(file)),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(err) => Err(err),
    }
}

/// Writes `bytes` to `path` atomically (temp file, sync, rename). On failure the temp file is
/// removed and `path` is untouched.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = temp_path_for(path);
    let result = (|| {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temp_path_is_a_hidden_sibling() {
        assert_eq!(
            temp_path_for(Path::new("/a/b/movement.jsonl")),
            PathBuf::from("/a/b/.movement.jsonl.tmp")
        );
    }

    #[test]
    fn atomic_write_replaces_and_leaves_no_temp() {
        let dir = std::env::temp_dir().join(format!("bga-output-atomic-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("x.json");
        write_atomic(&path, b"one").expect("write");
        write_atomic(&path, b"two").expect("rewrite");
        assert_eq!(std::fs::read(&path).expect("read"), b"two");
        assert!(!temp_path_for(&path).exists());
        let missing = dir.join("no-such-dir").join("y.json");
        assert!(write_atomic(&missing, b"z").is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
