//! The movement log: `movement.jsonl`, one line per sim step, only what changed (SPEC §11).
//!
//! Each line is
//! `{"step": n, "time": "2023-02-13T07:00:10", "personas": {"Name": {…}}}` where a persona's
//! entry holds only the fields that differ from its previous entry: `tile` (`[x, y]`),
//! `emoji`, `description` (`"act @ address"`) and `chat` (`[[speaker, line], …]`, or `null`
//! when not chatting). A persona's first entry has all four fields; a persona that did not
//! change is left out, so `personas` may be empty.
//!
//! Recording ([`MovementLog`], [`MovementLogPlugin`]) reads only ECS components that stay put
//! while a persona thinks — [`Name`], [`Body`] and [`ActionView`] — at the end of each step,
//! after [`AgentSystems::Last`]. Personas are keyed by name in a `BTreeMap` and nothing is a
//! float, so a deterministic run gives a byte-identical file. Lines are written whole, in
//! chunks, straight into the file, and [`MovementLog::flush`] writes and syncs everything
//! recorded (the run flushes at every save and every few seconds), so after a crash the file
//! is a valid log up to the last flush or later. `MovementLog::continue_at` continues it
//! when the run is resumed from a save.
//!
//! Reading ([`read_movement_log`]) validates as it goes — JSON shape, consecutive steps,
//! increasing times, complete first entries — and names the line of the first problem.
//! [`MovementReplay`] rebuilds every persona's full state from the diffs.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Seek};
use std::path::{Path, PathBuf};

use bevy::prelude::*;
use chrono::NaiveDateTime;
use serde::{Deserialize, Deserializer, Serialize};

use crate::clock::{AgentSystems, SimClock, SimStep};
use crate::persona::{ActionView, Body, Persona};
use crate::world::{ActionAddress, TileCoord};

use super::LineFile;

/// A chat as the log stores it: `(speaker, line)` pairs.
pub(crate) type ChatLines = Vec<(String, String)>;

/// Everything the log shows of one persona at one step.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct PersonaFrame {
    /// The tile the persona stands on.
    pub tile: TileCoord,
    /// The current action as an emoji.
    pub emoji: String,
    /// `"act @ address"`, or empty before the first action.
    pub description: String,
    /// The current chat's lines; `None` when there is no chat.
    pub chat: Option<ChatLines>,
}

impl PersonaFrame {
    /// The frame of a persona with this body and action.
    pub fn from_components(body: &Body, view: &ActionView) -> Self {
        Self {
            tile: body.tile,
            emoji: view.emoji.clone(),
            description: describe(&view.description, view.address.as_ref()),
            chat: (!view.chat.is_empty()).then(|| view.chat.clone()),
        }
    }

    /// What changed from `previous` to `self`; everything when there is no previous frame.
    /// `None` when nothing changed.
    pub(crate) fn delta_from(&self, previous: Option<&PersonaFrame>) -> Option<PersonaDelta> {
        let Some(previous) = previous else {
            return Some(PersonaDelta {
                tile: Some(self.tile),
                emoji: Some(self.emoji.clone()),
                description: Some(self.description.clone()),
                chat: Some(self.chat.clone()),
            });
        };
        let delta = PersonaDelta {
            tile: (self.tile != previous.tile).then_some(self.tile),
            emoji: (self.emoji != previous.emoji).then(|| self.emoji.clone()),
            description: (self.description != previous.description)
                .then(|| self.description.clone()),
            chat: (self.chat != previous.chat).then(|| self.chat.clone()),
        };
        (!delta.is_empty()).then_some(delta)
    }
}

/// `"act @ address"` as Smallville's movement file writes it; empty when the persona has no
/// action yet (rather than a lone `" @ "`).
pub(crate) fn describe(description: &str, address: Option<&ActionAddress>) -> String {
    match address {
        None if description.is_empty() => String::new(),
        None => format!("{description} @ "),
        Some(address) => format!("{description} @ {address}"),
    }
}

/// The changed fields of one persona at one step. Absent fields did not change; `chat` is
/// `Some(None)` when a chat ended (written as `"chat": null`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PersonaDelta {
    /// The new tile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tile: Option<TileCoord>,
    /// The new emoji.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub emoji: Option<String>,
    /// The new `"act @ address"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The new chat (`Some(None)`: the chat ended).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present_value"
    )]
    pub chat: Option<Option<ChatLines>>,
}

/// Maps a present JSON value (including `null`) to `Some(..)`; an absent key stays `None`
/// through `#[serde(default)]`. Without it serde would read `"chat": null` as "no change".
fn present_value<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Option<ChatLines>>, D::Error> {
    Option::<ChatLines>::deserialize(deserializer).map(Some)
}

impl PersonaDelta {
    /// Whether no field changed.
    pub fn is_empty(&self) -> bool {
        self.tile.is_none()
            && self.emoji.is_none()
            && self.description.is_none()
            && self.chat.is_none()
    }

    /// The first field missing for a complete entry, if any.
    pub fn missing_field(&self) -> Option<&'static str> {
        if self.tile.is_none() {
            Some("tile")
        } else if self.emoji.is_none() {
            Some("emoji")
        } else if self.description.is_none() {
            Some("description")
        } else if self.chat.is_none() {
            Some("chat")
        } else {
            None
        }
    }

    /// Applies the changed fields to `frame`.
    pub(crate) fn apply_to(&self, frame: &mut PersonaFrame) {
        if let Some(tile) = self.tile {
            frame.tile = tile;
        }
        if let Some(emoji) = &self.emoji {
            frame.emoji.clone_from(emoji);
        }
        if let Some(description) = &self.description {
            frame.description.clone_from(description);
        }
        if let Some(chat) = &self.chat {
            frame.chat.clone_from(chat);
        }
    }
}

/// The per-persona changes from `previous` to `current`. Personas without changes are left
/// out; personas new in `current` get complete entries; personas gone from `current` are
/// simply not mentioned.
pub(crate) fn diff_frames(
    previous: &BTreeMap<String, PersonaFrame>,
    current: &BTreeMap<String, PersonaFrame>,
) -> BTreeMap<String, PersonaDelta> {
    current
        .iter()
        .filter_map(|(name, frame)| {
            frame
                .delta_from(previous.get(name))
                .map(|delta| (name.clone(), delta))
        })
        .collect()
}

/// One line of the log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MovementLine {
    /// The step number (the clock's step count when it ran; 0 for the first step).
    pub step: u64,
    /// The game time the step ran at.
    pub time: NaiveDateTime,
    /// What changed, per persona name.
    pub personas: BTreeMap<String, PersonaDelta>,
}

/// Why a movement log could not be written or read. Read errors name the 1-based line.
#[derive(Debug, thiserror::Error)]
pub enum MovementLogError {
    /// The file could not be created, written, renamed or read.
    #[error("movement log {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        #[source]
        source: std::io::Error,
    },
    /// A line is not a valid movement entry.
    #[error("movement log line {line}: {message}")]
    Parse {
        /// The 1-based line number.
        line: usize,
        /// What is wrong with it.
        message: String,
    },
    /// Steps are not consecutive.
    #[error("movement log line {line}: expected step {expected}, found step {found}")]
    StepGap {
        /// The 1-based line number.
        line: usize,
        /// The step that should have come next.
        expected: u64,
        /// The step found.
        found: u64,
    },
    /// A line's time is not after the previous line's.
    #[error("movement log line {line}: time {time} is not after the previous line's {previous}")]
    TimeNotIncreasing {
        /// The 1-based line number.
        line: usize,
        /// The line's time.
        time: NaiveDateTime,
        /// The previous line's time.
        previous: NaiveDateTime,
    },
    /// An existing log cannot be continued at a resumed run's first step.
    #[error(
        "movement log {}: it ends at {} but the resumed run starts at step {next_step}; \
         write into another --out folder or move the file away",
        path.display(),
        last_step.map_or_else(|| "no valid line".to_owned(), |s| format!("step {s}"))
    )]
    CannotContinue {
        /// The file.
        path: PathBuf,
        /// The last step that could be kept.
        last_step: Option<u64>,
        /// The resumed run's first step.
        next_step: u64,
    },
    /// A persona's first entry lacks a field.
    #[error("movement log line {line}: first entry of {persona} lacks \"{field}\"")]
    Incomplete {
        /// The 1-based line number.
        line: usize,
        /// The persona.
        persona: String,
        /// The missing field.
        field: &'static str,
    },
}

/// Rebuilds every persona's full frame by applying the log's lines in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MovementReplay {
    frames: BTreeMap<String, PersonaFrame>,
}

impl MovementReplay {
    /// An empty replay (no persona seen yet).
    pub fn new() -> Self {
        Self::default()
    }

    /// Applies one line. A persona seen for the first time must have a complete entry;
    /// otherwise returns `(persona, missing field)` and changes nothing.
    pub fn apply(&mut self, line: &MovementLine) -> Result<(), (String, &'static str)> {
        for (name, delta) in &line.personas {
            if !self.frames.contains_key(name)
                && let Some(field) = delta.missing_field()
            {
                return Err((name.clone(), field));
            }
        }
        for (name, delta) in &line.personas {
            delta.apply_to(self.frames.entry(name.clone()).or_default());
        }
        Ok(())
    }

    /// Every persona's frame as of the last applied line.
    pub fn frames(&self) -> &BTreeMap<String, PersonaFrame> {
        &self.frames
    }

    /// One persona's frame as of the last applied line.
    pub fn frame(&self, name: &str) -> Option<&PersonaFrame> {
        self.frames.get(name)
    }
}

/// A validated movement log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MovementLogData {
    /// The lines, in order.
    pub lines: Vec<MovementLine>,
    /// Every persona's frame after the last line.
    pub final_frames: BTreeMap<String, PersonaFrame>,
}

impl MovementLogData {
    /// The step of the first line.
    pub fn first_step(&self) -> Option<u64> {
        self.lines.first().map(|l| l.step)
    }

    /// The step of the last line.
    pub fn last_step(&self) -> Option<u64> {
        self.lines.last().map(|l| l.step)
    }

    /// The personas that appear in the log, by name.
    pub fn persona_names(&self) -> impl Iterator<Item = &str> {
        self.final_frames.keys().map(String::as_str)
    }
}

/// Reads and validates a movement log from `reader`. Blank lines are not allowed (every line is
/// a step), except that the file may end with a newline.
pub fn parse_movement_log(reader: impl BufRead) -> Result<MovementLogData, MovementLogError> {
    let mut replay = MovementReplay::new();
    let mut lines: Vec<MovementLine> = Vec::new();
    for (index, text) in reader.lines().enumerate() {
        let number = index + 1;
        let text = text.map_err(|err| MovementLogError::Parse {
            line: number,
            message: err.to_string(),
        })?;
        let line: MovementLine =
            serde_json::from_str(&text).map_err(|err| MovementLogError::Parse {
                line: number,
                message: err.to_string(),
            })?;
        if let Some(previous) = lines.last() {
            let expected = previous.step.saturating_add(1);
            if line.step != expected {
                return Err(MovementLogError::StepGap {
                    line: number,
                    expected,
                    found: line.step,
                });
            }
            if line.time <= previous.time {
                return Err(MovementLogError::TimeNotIncreasing {
                    line: number,
                    time: line.time,
                    previous: previous.time,
                });
            }
        }
        replay
            .apply(&line)
            .map_err(|(persona, field)| MovementLogError::Incomplete {
                line: number,
                persona,
                field,
            })?;
        lines.push(line);
    }
    Ok(MovementLogData {
        lines,
        final_frames: replay.frames,
    })
}

/// Reads and validates the movement log at `path` (see [`parse_movement_log`]).
pub fn read_movement_log(path: impl AsRef<Path>) -> Result<MovementLogData, MovementLogError> {
    let path = path.as_ref();
    let file = File::open(path).map_err(|source| MovementLogError::Io {
        path: path.to_owned(),
        source,
    })?;
    parse_movement_log(BufReader::new(file))
}

/// Where the lines go.
#[derive(Debug)]
enum Sink {
    Memory(Vec<u8>),
    File(LineFile),
}

/// Records the movement log. Insert it as a resource (with [`MovementLogPlugin`] added) and
/// every sim step appends a line; take it out and call [`finish`](Self::finish) at the end.
///
/// A write error does not stop the simulation: the first one is kept, later lines are dropped,
/// and [`finish`](Self::finish) reports it.
#[derive(Resource, Debug)]
pub struct MovementLog {
    last: BTreeMap<String, PersonaFrame>,
    sink: Sink,
    lines: u64,
    error: Option<std::io::Error>,
    line_buf: Vec<u8>,
}

impl MovementLog {
    fn with_sink(sink: Sink) -> Self {
        Self {
            last: BTreeMap::new(),
            sink,
            lines: 0,
            error: None,
            line_buf: Vec::new(),
        }
    }

    /// A log kept in memory (tests; [`into_bytes`](Self::into_bytes) reads it).
    pub fn in_memory() -> Self {
        Self::with_sink(Sink::Memory(Vec::new()))
    }

    /// A log written to `path` (created or emptied), a line at a time: complete lines reach the
    /// file in chunks, and all of them on [`flush`](Self::flush), [`finish`](Self::finish) or
    /// drop.
    pub fn create(path: impl Into<PathBuf>) -> Result<Self, MovementLogError> {
        let path = path.into();
        let file = File::create(&path).map_err(|source| MovementLogError::Io {
            path: path.clone(),
            source,
        })?;
        Ok(Self::with_sink(Sink::File(LineFile::new(file, path))))
    }

    /// Continues the log at `path` so that its next line is step `next_step` (a run resumed
    /// from a save of that step): the lines before `next_step` are kept, later ones (written
    /// after the save, before a crash or by an earlier run from the same save) and a torn last
    /// line are cut off, and each persona's next entry holds only what changed. A missing or
    /// empty file starts a new log. Fails, touching nothing, when the kept lines do not end
    /// right before `next_step`.
    pub fn continue_at(path: impl Into<PathBuf>, next_step: u64) -> Result<Self, MovementLogError> {
        let path = path.into();
        let io = |source| MovementLogError::Io {
            path: path.clone(),
            source,
        };
        let Some(file) = super::open_to_continue(&path).map_err(io)? else {
            return Self::create(path);
        };
        let mut replay = MovementReplay::new();
        let mut kept_bytes = 0u64;
        let mut last: Option<(u64, NaiveDateTime)> = None;
        let mut kept_lines = 0u64;
        // Whether the first line already is at or after `next_step` (nothing to keep).
        let mut starts_later = false;
        let mut reader = BufReader::new(&file);
        let mut text = Vec::new();
        loop {
            text.clear();
            let read = reader.read_until(b'\n', &mut text).map_err(io)?;
            if read == 0 || text.last() != Some(&b'\n') {
                break; // the end, or a line torn by a crash
            }
            let Ok(line) = serde_json::from_slice::<MovementLine>(&text) else {
                break;
            };
            let follows = last
                .is_none_or(|(step, time)| line.step == step.saturating_add(1) && line.time > time);
            if line.step >= next_step || !follows || replay.apply(&line).is_err() {
                starts_later = last.is_none() && line.step >= next_step;
                break;
            }
            last = Some((line.step, line.time));
            kept_bytes += read as u64;
            kept_lines += 1;
        }
        drop(reader);
        match last {
            Some((step, _)) if step.saturating_add(1) == next_step => {}
            None if starts_later || file.metadata().map_err(io)?.len() == 0 => {}
            _ => {
                return Err(MovementLogError::CannotContinue {
                    path,
                    last_step: last.map(|(step, _)| step),
                    next_step,
                });
            }
        }
        let mut file = file;
        file.set_len(kept_bytes).map_err(io)?;
        file.seek(std::io::SeekFrom::End(0)).map_err(io)?;
        let mut log = Self::with_sink(Sink::File(LineFile::new(file, path)));
        log.last = replay.frames;
        log.lines = kept_lines;
        Ok(log)
    }

    /// Records the frames at `step` only when something changed since the last line: the
    /// state a run ends on when thoughts landed after its last step (Realtime), so the log
    /// ends where the final save (taken at `step`) begins. Returns whether a line was written.
    pub(crate) fn record_if_changed(
        &mut self,
        step: u64,
        time: NaiveDateTime,
        current: BTreeMap<String, PersonaFrame>,
    ) -> bool {
        if diff_frames(&self.last, &current).is_empty() {
            return false;
        }
        self.record(step, time, current);
        true
    }

    /// Appends the line of `step` at `time` for the personas' `current` frames.
    pub fn record(
        &mut self,
        step: u64,
        time: NaiveDateTime,
        current: BTreeMap<String, PersonaFrame>,
    ) {
        let personas = diff_frames(&self.last, &current);
        self.last = current;
        self.lines += 1;
        if self.error.is_some() {
            return;
        }
        let line = MovementLine {
            step,
            time,
            personas,
        };
        self.line_buf.clear();
        // Strings, integers and a date: serialising into a Vec cannot fail.
        if let Err(err) = serde_json::to_writer(&mut self.line_buf, &line) {
            self.error = Some(std::io::Error::other(err));
            return;
        }
        self.line_buf.push(b'\n');
        let result = match &mut self.sink {
            Sink::Memory(bytes) => {
                bytes.extend_from_slice(&self.line_buf);
                Ok(())
            }
            Sink::File(file) => file.push(&self.line_buf),
        };
        if let Err(err) = result {
            self.error = Some(err);
        }
    }

    /// Lines recorded so far (including any dropped after a write error).
    pub fn lines_recorded(&self) -> u64 {
        self.lines
    }

    /// Every persona's frame as of the last recorded line.
    pub fn last_frames(&self) -> &BTreeMap<String, PersonaFrame> {
        &self.last
    }

    /// The bytes of an in-memory log (`None` for a file log).
    pub fn into_bytes(self) -> Option<Vec<u8>> {
        match self.sink {
            Sink::Memory(bytes) => Some(bytes),
            Sink::File(_) => None,
        }
    }

    /// Writes every recorded line to the file and syncs it, so the log on disk is complete up
    /// to now (the run does this at every save). Reports the first write error, if any.
    pub fn flush(&mut self) -> Result<(), MovementLogError> {
        let Sink::File(file) = &mut self.sink else {
            return Ok(());
        };
        let path = file.path().to_path_buf();
        if self.error.is_none()
            && let Err(err) = file.flush()
        {
            self.error = Some(err);
        }
        match &self.error {
            Some(err) => Err(MovementLogError::Io {
                path,
                source: std::io::Error::new(err.kind(), err.to_string()),
            }),
            None => Ok(()),
        }
    }

    /// Writes and syncs a file log, or reports the first write error (the lines written until
    /// then stay in the file). Nothing to do for an in-memory log.
    pub fn finish(mut self) -> Result<(), MovementLogError> {
        self.flush()
    }
}

/// Records the [`MovementLog`] (when one is inserted) at the end of every [`SimStep`], after
/// [`AgentSystems::Last`].
#[derive(Debug, Default)]
pub struct MovementLogPlugin;

impl Plugin for MovementLogPlugin {
    fn build(&self, app: &mut App) {
        app.add_systems(SimStep, record_movement.after(AgentSystems::Last));
    }
}

/// Appends this step's line to the [`MovementLog`], if there is one.
pub(crate) fn record_movement(
    clock: Res<SimClock>,
    log: Option<ResMut<MovementLog>>,
    personas: Query<(&Name, &Body, &ActionView), With<Persona>>,
) {
    let Some(mut log) = log else {
        return;
    };
    let current = personas
        .iter()
        .map(|(name, body, view)| {
            (
                name.as_str().to_owned(),
                PersonaFrame::from_components(body, view),
            )
        })
        .collect();
    // The clock advances after the step, so it still holds this step's number and time.
    log.record(clock.step(), clock.now(), current);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn time(secs: i64) -> NaiveDateTime {
        SimClock::default_start() + chrono::Duration::seconds(secs)
    }

    fn frame(
        x: i32,
        emoji: &str,
        description: &str,
        chat: Option<&[(&str, &str)]>,
    ) -> PersonaFrame {
        PersonaFrame {
            tile: TileCoord::new(x, 1),
            emoji: emoji.into(),
            description: description.into(),
            chat: chat.map(|c| {
                c.iter()
                    .map(|(s, l)| ((*s).to_owned(), (*l).to_owned()))
                    .collect()
            }),
        }
    }

    fn frames(list: &[(&str, PersonaFrame)]) -> BTreeMap<String, PersonaFrame> {
        list.iter()
            .map(|(n, f)| ((*n).to_owned(), f.clone()))
            .collect()
    }

    #[test]
    fn describe_joins_act_and_address() {
        let place = |s: &str| ActionAddress::parse(s).ok();
        assert_eq!(
            describe("sleeping", place("w:s:a:bed").as_ref()),
            "sleeping @ w:s:a:bed"
        );
        assert_eq!(describe("", None), "");
        assert_eq!(describe("", place("w:s").as_ref()), " @ w:s");
        assert_eq!(describe("reading", None), "reading @ ");
        assert_eq!(
            describe("waiting", place("<waiting> 3 -4").as_ref()),
            "waiting @ <waiting> 3 -4"
        );
    }

    #[test]
    fn first_entry_is_complete_and_later_ones_hold_changes_only() {
        let a0 = frame(1, "😴", "sleeping @ h:b", None);
        let b0 = frame(5, "☕", "coffee @ c:c", None);
        let first = diff_frames(
            &BTreeMap::new(),
            &frames(&[("A", a0.clone()), ("B", b0.clone())]),
        );
        assert_eq!(first.len(), 2);
        assert!(first.values().all(|d| d.missing_field().is_none()));
        assert_eq!(first["A"].chat, Some(None));

        // A moves, B is unchanged: B is left out, A has only the tile.
        let a1 = frame(2, "😴", "sleeping @ h:b", None);
        let second = diff_frames(
            &frames(&[("A", a0.clone()), ("B", b0.clone())]),
            &frames(&[("A", a1.clone()), ("B", b0.clone())]),
        );
        assert_eq!(
            second,
            BTreeMap::from([(
                "A".to_owned(),
                PersonaDelta {
                    tile: Some(TileCoord::new(2, 1)),
                    ..Default::default()
                }
            )])
        );

        // B starts chatting, then the chat ends: `Some(Some(lines))`, then `Some(None)`.
        let b1 = frame(5, "💬", "chat @ c:c", Some(&[("B", "hi")]));
        let third = diff_frames(&frames(&[("B", b0.clone())]), &frames(&[("B", b1.clone())]));
        assert_eq!(third["B"].tile, None);
        assert_eq!(third["B"].emoji.as_deref(), Some("💬"));
        assert_eq!(
            third["B"].chat,
            Some(Some(vec![("B".to_owned(), "hi".to_owned())]))
        );
        let fourth = diff_frames(&frames(&[("B", b1)]), &frames(&[("B", b0)]));
        assert_eq!(fourth["B"].chat, Some(None));

        // Nothing changed at all: an empty map.
        assert!(diff_frames(&frames(&[("A", a1.clone())]), &frames(&[("A", a1)])).is_empty());
    }

    #[test]
    fn lines_serialise_exactly_and_chat_null_survives_a_round_trip() {
        let line = MovementLine {
            step: 3,
            time: time(30),
            personas: BTreeMap::from([
                (
                    "B".to_owned(),
                    PersonaDelta {
                        chat: Some(None),
                        ..Default::default()
                    },
                ),
                (
                    "A".to_owned(),
                    PersonaDelta {
                        tile: Some(TileCoord::new(4, 7)),
                        description: Some("x @ y".into()),
                        ..Default::default()
                    },
                ),
            ]),
        };
        let text = serde_json::to_string(&line).expect("json");
        assert_eq!(
            text,
            r#"{"step":3,"time":"2023-02-13T00:00:30","personas":{"A":{"tile":[4,7],"description":"x @ y"},"B":{"chat":null}}}"#
        );
        let back: MovementLine = serde_json::from_str(&text).expect("parse");
        assert_eq!(back, line);
        let empty: MovementLine =
            serde_json::from_str(r#"{"step":0,"time":"2023-02-13T00:00:00","personas":{}}"#)
                .expect("parse");
        assert!(empty.personas.is_empty());
    }

    #[test]
    fn recording_then_reading_replays_the_final_state() {
        let mut log = MovementLog::in_memory();
        let states = [
            frames(&[
                ("A", frame(1, "😴", "", None)),
                ("B", frame(9, "", "", None)),
            ]),
            frames(&[
                ("A", frame(2, "🚶", "walk @ p", None)),
                ("B", frame(9, "", "", None)),
            ]),
            frames(&[
                ("A", frame(2, "💬", "chat @ p", Some(&[("A", "hey")]))),
                ("B", frame(8, "", "", None)),
            ]),
            frames(&[
                ("A", frame(2, "💬", "chat @ p", None)),
                ("B", frame(8, "", "", None)),
            ]),
        ];
        for (i, state) in states.iter().enumerate() {
            log.record(i as u64, time(10 * i as i64), state.clone());
        }
        assert_eq!(log.lines_recorded(), 4);
        let bytes = log.into_bytes().expect("memory log");
        let text = String::from_utf8(bytes.clone()).expect("utf8");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4);
        assert_eq!(
            lines[3],
            r#"{"step":3,"time":"2023-02-13T00:00:30","personas":{"A":{"chat":null}}}"#
        );
        let data = parse_movement_log(bytes.as_slice()).expect("valid");
        assert_eq!(data.first_step(), Some(0));
        assert_eq!(data.last_step(), Some(3));
        assert_eq!(data.final_frames, states[3]);
        assert!(data.lines[2].personas.contains_key("B"));
        assert_eq!(data.persona_names().collect::<Vec<_>>(), ["A", "B"]);
    }

    fn parse(text: &str) -> Result<MovementLogData, MovementLogError> {
        parse_movement_log(text.as_bytes())
    }

    const FULL_A: &str = r#""A":{"tile":[1,1],"emoji":"","description":"","chat":null}"#;

    #[test]
    fn reading_rejects_bad_logs_naming_the_line() {
        let ok0 = format!(r#"{{"step":5,"time":"2023-02-13T00:00:50","personas":{{{FULL_A}}}}}"#);
        assert!(parse(&ok0).is_ok());
        assert!(parse("").expect("empty log").lines.is_empty());

        let gap = format!(
            "{ok0}\n{}",
            r#"{"step":7,"time":"2023-02-13T00:01:10","personas":{}}"#
        );
        let err = parse(&gap).expect_err("gap");
        assert!(
            matches!(
                err,
                MovementLogError::StepGap {
                    line: 2,
                    expected: 6,
                    found: 7
                }
            ),
            "{err}"
        );

        let back_in_time = format!(
            "{ok0}\n{}",
            r#"{"step":6,"time":"2023-02-13T00:00:50","personas":{}}"#
        );
        assert!(matches!(
            parse(&back_in_time),
            Err(MovementLogError::TimeNotIncreasing { line: 2, .. })
        ));

        let incomplete = r#"{"step":0,"time":"2023-02-13T00:00:00","personas":{"A":{"tile":[1,1],"emoji":"","description":""}}}"#;
        let err = parse(incomplete).expect_err("no chat");
        assert!(matches!(
            &err,
            MovementLogError::Incomplete { line: 1, persona, field: "chat" } if persona == "A"
        ));
        assert_eq!(
            err.to_string(),
            "movement log line 1: first entry of A lacks \"chat\""
        );

        let broken = format!("{ok0}\n{{\"step\":6,");
        let err = parse(&broken).expect_err("truncated");
        assert!(matches!(err, MovementLogError::Parse { line: 2, .. }));
        assert!(err.to_string().starts_with("movement log line 2:"), "{err}");

        let typo = r#"{"step":0,"time":"2023-02-13T00:00:00","personas":{"A":{"tiles":[1,1]}}}"#;
        assert!(matches!(
            parse(typo),
            Err(MovementLogError::Parse { line: 1, .. })
        ));
        let wrong_type =
            r#"{"step":0,"time":"2023-02-13T00:00:00","personas":{"A":{"tile":"1,1"}}}"#;
        assert!(matches!(
            parse(wrong_type),
            Err(MovementLogError::Parse { line: 1, .. })
        ));
        let blank = format!("{ok0}\n\n");
        assert!(matches!(
            parse(&blank),
            Err(MovementLogError::Parse { line: 2, .. })
        ));
    }

    #[test]
    fn file_log_is_readable_after_each_flush_and_continues_after_a_resume() {
        let dir = std::env::temp_dir().join(format!("bga-movement-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("movement.jsonl");
        let mut log = MovementLog::create(&path).expect("create");
        for step in 0..4 {
            log.record(
                step,
                time(10 * step as i64),
                frames(&[("A", frame(step as i32, "", "", None))]),
            );
        }
        log.flush().expect("flush");
        // What a crash right now would leave: four valid lines.
        assert_eq!(read_movement_log(&path).expect("read").lines.len(), 4);
        log.record(4, time(40), frames(&[("A", frame(9, "", "", None))]));
        drop(log);
        assert_eq!(
            read_movement_log(&path)
                .expect("dropped logs are kept")
                .lines
                .len(),
            5
        );
        // A torn last line, as a crash in the middle of a write would leave.
        let mut bytes = std::fs::read(&path).expect("read");
        bytes.extend_from_slice(b"{\"step\": 5, \"ti");
        std::fs::write(&path, &bytes).expect("tear");

        // Resume from a save of step 3: steps 3.. and the torn line go, and step 3's entry
        // holds only what changed since step 2.
        let mut log = MovementLog::continue_at(&path, 3).expect("continue");
        assert_eq!(log.lines_recorded(), 3);
        log.record(3, time(30), frames(&[("A", frame(2, "", "", None))]));
        log.record(4, time(40), frames(&[("A", frame(5, "z", "", None))]));
        log.finish().expect("finish");
        let data = read_movement_log(&path).expect("continued log is valid");
        assert_eq!(data.lines.len(), 5);
        assert!(data.lines[3].personas.is_empty(), "no change at step 3");
        assert_eq!(data.final_frames["A"].tile, TileCoord::new(5, 1));

        // A log that stops short of the save cannot be continued; the file is untouched.
        let before = std::fs::read(&path).expect("read");
        let err = MovementLog::continue_at(&path, 9).expect_err("gap");
        assert!(err.to_string().contains("ends at step 4"), "{err}");
        assert_eq!(std::fs::read(&path).expect("read"), before);
        // No file: a new log.
        let fresh = dir.join("fresh.jsonl");
        MovementLog::continue_at(&fresh, 7)
            .expect("new")
            .finish()
            .expect("finish");
        assert!(fresh.exists());

        let err = MovementLog::create(dir.join("missing").join("m.jsonl")).expect_err("no dir");
        assert!(err.to_string().contains("missing"), "{err}");
        let err = read_movement_log(dir.join("absent.jsonl")).expect_err("no file");
        assert!(err.to_string().contains("absent.jsonl"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
