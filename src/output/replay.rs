//! Headless validation of a run's movement log: `smallville replay DIR --check`.
//!
//! [`check_replay`] reads `DIR/movement.jsonl` with the log's own validator (JSON shape,
//! consecutive steps, increasing times, complete first entries), then replays it and checks
//! what a window replay relies on: every tile is on the map, nobody moves more than one tile
//! per step, every tile is walkable on the map (a log made on another map fails here, or
//! earlier when the run's save names another world than the map given with `--map`), and — when the run left a save in `DIR/save` at the log's end — the replay ends
//! exactly where the simulation did (tile, emoji, action and chat of every persona).
//!
//! [`load_replay`] does the same checks and also hands back what it read — the log, the map and
//! the save's step length — so the window's replay ([`playback`](super::playback)) plays
//! exactly what was validated.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::output::run::MOVEMENT_FILE;
use crate::output::{MovementLogData, MovementReplay, PersonaFrame, read_movement_log};
use crate::persist::{PersistError, SaveIntegrity, decode_with};
use crate::world::TownMap;

/// The save folder a run leaves next to its log.
pub const RUN_SAVE_DIR: &str = "save";

/// What [`check_replay`] found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReplayCheck {
    /// Lines (steps) in the log.
    pub lines: usize,
    /// First and last step.
    pub steps: (u64, u64),
    /// The personas, by name.
    pub personas: Vec<String>,
    /// Tile changes, summed over personas.
    pub moves: u64,
    /// Chat lines shown, summed over chat changes.
    pub chat_updates: u64,
    /// Whether the log's end was compared with a save at the same step (and matched).
    pub matches_save: Option<bool>,
}

/// A name in quotes for a message, clipped.
fn quote(name: &str) -> String {
    crate::persona::quote_clipped(name, 60)
}

fn invalid(file: &Path, message: String) -> PersistError {
    PersistError::Invalid {
        file: file.to_owned(),
        field: String::new(),
        message,
    }
}

/// A run folder's movement log, validated by [`load_replay`].
#[derive(Debug, Clone)]
pub struct CheckedReplay {
    /// What the check found.
    pub check: ReplayCheck,
    /// The log's lines.
    pub log: MovementLogData,
    /// The map its tiles were checked against.
    pub map: TownMap,
    /// Game seconds per step of the run's save, when the folder holds one.
    pub sec_per_step: Option<u32>,
}

/// Validates the movement log of the run folder `dir` (see the [module docs](self)). `map`
/// overrides the map to check tiles against (default: the save's, else the default town).
pub fn check_replay(dir: &Path, map: Option<&Path>) -> Result<ReplayCheck, PersistError> {
    check_replay_with(dir, map, SaveIntegrity::Verify)
}

/// [`check_replay`], checking the run's save against its manifest or not
/// (`--trust-edited-save`).
pub fn check_replay_with(
    dir: &Path,
    map: Option<&Path>,
    integrity: SaveIntegrity,
) -> Result<ReplayCheck, PersistError> {
    load_replay_with(dir, map, integrity).map(|checked| checked.check)
}

/// Validates like [`check_replay`] and returns the log with the map it was checked against.
pub fn load_replay(dir: &Path, map: Option<&Path>) -> Result<CheckedReplay, PersistError> {
    load_replay_with(dir, map, SaveIntegrity::Verify)
}

/// [`load_replay`], checking the run's save against its manifest or not.
pub fn load_replay_with(
    dir: &Path,
    map: Option<&Path>,
    integrity: SaveIntegrity,
) -> Result<CheckedReplay, PersistError> {
    let path = dir.join(MOVEMENT_FILE);
    let log = read_movement_log(&path).map_err(|err| invalid(&path, err.to_string()))?;
    let (Some(first), Some(last)) = (log.first_step(), log.last_step()) else {
        return Err(invalid(&path, "the log is empty".into()));
    };
    let save_dir = dir.join(RUN_SAVE_DIR);
    let save = if save_dir.join(crate::persist::format::META_FILE).is_file() {
        Some(decode_with(&save_dir, integrity)?)
    } else {
        None
    };
    let map_path: PathBuf = match (map, &save) {
        (Some(p), _) => p.to_owned(),
        (None, Some(save)) => save.meta.map_path(),
        (None, None) => TownMap::default_town_path(),
    };
    let town = TownMap::load_tmx(&map_path)?;
    if let Some(save) = &save
        && save.meta.world != town.world_name()
    {
        return Err(invalid(
            &path,
            format!(
                "this log was made in {} (map {}, as {} records), not in {} ({}); check it \
                 against its own map: leave out --map or pass that file",
                quote(&save.meta.world),
                save.meta.map.display(),
                save_dir.join(crate::persist::format::META_FILE).display(),
                quote(town.world_name()),
                map_path.display()
            ),
        ));
    }

    let mut replay = MovementReplay::new();
    let mut moves = 0u64;
    let mut chat_updates = 0u64;
    for (index, line) in log.lines.iter().enumerate() {
        let number = index + 1;
        let before: BTreeMap<String, PersonaFrame> = replay.frames().clone();
        replay.apply(line).map_err(|(who, field)| {
            invalid(&path, format!("line {number}: {who} lacks {field}"))
        })?;
        for (name, delta) in &line.personas {
            if let Some(tile) = delta.tile {
                if !town.in_bounds(tile) {
                    return Err(invalid(
                        &path,
                        format!(
                            "line {number}: {name} at [{}, {}] is off the {}×{} map",
                            tile.x,
                            tile.y,
                            town.width(),
                            town.height()
                        ),
                    ));
                }
                if !town.is_walkable(tile) {
                    return Err(invalid(
                        &path,
                        format!(
                            "line {number}: {name} stands at [{}, {}], which is {} in {} ({}): \
                             the log was made on another map",
                            tile.x,
                            tile.y,
                            town.tile_path_string(tile, crate::world::AddressLevel::GameObject)
                                .map_or_else(
                                    || "blocked".to_owned(),
                                    |place| format!("blocked ({place})")
                                ),
                            quote(town.world_name()),
                            map_path.display()
                        ),
                    ));
                }
                if let Some(previous) = before.get(name) {
                    let (dx, dy) = (
                        (tile.x - previous.tile.x).abs(),
                        (tile.y - previous.tile.y).abs(),
                    );
                    if dx + dy > 1 {
                        return Err(invalid(
                            &path,
                            format!(
                                "line {number}: {name} jumps from [{}, {}] to [{}, {}]",
                                previous.tile.x, previous.tile.y, tile.x, tile.y
                            ),
                        ));
                    }
                    moves += 1;
                }
            }
            if let Some(Some(chat)) = &delta.chat {
                chat_updates += chat.len() as u64;
            }
        }
    }

    // A run's final save is taken after the last step: its clock is one step past the log's
    // steps, or at the log's last line when thoughts landed after the last step (that line
    // records them).
    let matches_save = match &save {
        Some(save) if save.meta.step == last + 1 || save.meta.step == last => {
            let saved: BTreeMap<String, PersonaFrame> = save
                .personas
                .iter()
                .map(|p| {
                    (
                        p.name.clone(),
                        PersonaFrame::from_components(&p.body, &p.view),
                    )
                })
                .collect();
            if &saved != replay.frames() {
                let who = saved
                    .iter()
                    .find(|(name, frame)| replay.frame(name) != Some(*frame))
                    .map_or_else(
                        || "the persona list".to_owned(),
                        |(name, frame)| {
                            let logged = replay.frame(name);
                            format!(
                                "{name} (log: {}; save: {})",
                                logged.map_or_else(|| "absent".to_owned(), frame_text),
                                frame_text(frame)
                            )
                        },
                    );
                return Err(invalid(
                    &path,
                    format!(
                        "the replay ends differently from the save in {}: {who}",
                        save_dir.display()
                    ),
                ));
            }
            Some(true)
        }
        _ => None,
    };
    let check = ReplayCheck {
        lines: log.lines.len(),
        steps: (first, last),
        personas: replay.frames().keys().cloned().collect(),
        moves,
        chat_updates,
        matches_save,
    };
    Ok(CheckedReplay {
        check,
        log,
        map: town,
        sec_per_step: save.as_ref().map(|s| s.meta.sec_per_step),
    })
}

/// A frame as an error message shows it: tile, emoji and action.
fn frame_text(frame: &PersonaFrame) -> String {
    format!(
        "({}, {}) {} {:?}",
        frame.tile.x, frame.tile.y, frame.emoji, frame.description
    )
}
