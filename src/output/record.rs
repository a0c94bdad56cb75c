//! `record.jsonl`: what the seed systems did in a run (SPEC §16 "Recorded"), one JSON line per
//! happening, in the order it happened, beside `movement.jsonl` in the run folder: the lines
//! said in group conversations, the turns of talks with personas, the turns of stage scenes and
//! the director's state changes.
//!
//! Every line is a JSON object with `step` (the sim step its game time falls in), `time` (the
//! game time it happened) and `kind`, and the kind's fields:
//!
//! | `kind` | fields |
//! | --- | --- |
//! | `group_line` | `stream` (`arena …` or `channel …`), `speaker`, `persona` (a persona's name, or absent for a post of game code), `text`, `emoji` |
//! | `talk_turn` | `persona`, `speaker`, `mode` (`say`, `to_group`, `whisper` or `interview`), `message`, `reply`, `tools` (the tool calls' names, in order) |
//! | `stage_turn` | `stage`, `turn`, `narration`, `fail_safe`, `actors` (the persona actors who played the turn, by name, in the scene's order; absent when none did) |
//! | `director_state` | `job`, `from`, `to` (the executor's states; noted by the director through [`RunRecord::note`]) |
//!
//! Lines of one frame are written sorted by game time (stably: a frame's lines of the same time
//! keep the order above, then the order they were sent in). A run resumed from a save of its
//! folder (`smallville run --from`) keeps the lines recorded before the save's step and cuts
//! the rest, as the movement log does. A write error does not stop the run: the first is kept
//! and reported when the record is finished.

use std::fs::File;
use std::io::{BufRead, BufReader, Seek};
use std::path::{Path, PathBuf};

use bevy::ecs::message::{MessageCursor, Messages};
use bevy::prelude::*;
use chrono::NaiveDateTime;
use serde::{Deserialize, Serialize};

use crate::clock::SimClock;
use crate::dialogue::{DialogueMode, DialogueReplied};
use crate::group::{GroupLineSpoken, StreamKey};
use crate::stage::StageTurnResolved;

use super::LineFile;

/// The record's file name in the output folder.
pub const RECORD_FILE: &str = "record.jsonl";

/// Most bytes of one line read back when a resumed run continues the record.
const MAX_LINE_BYTES: usize = 1 << 20;

/// One line of `record.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordLine {
    /// The sim step its game time falls in.
    pub step: u64,
    /// Game time.
    pub time: NaiveDateTime,
    /// What happened.
    #[serde(flatten)]
    pub what: Happened,
}

/// What a [`RecordLine`] records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Happened {
    /// A line said in a group conversation.
    GroupLine {
        /// Which stream (`arena <address>` or `channel <name>`).
        stream: String,
        /// Who said it.
        speaker: String,
        /// The persona who said it (absent for a post of game code).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        persona: Option<String>,
        /// What was said.
        text: String,
        /// Whether it is an emoji reply.
        emoji: bool,
    },
    /// A persona answered a talk turn.
    TalkTurn {
        /// The persona.
        persona: String,
        /// Who spoke to it.
        speaker: String,
        /// `say`, `to_group`, `whisper` or `interview`.
        mode: String,
        /// What was said or asked.
        message: String,
        /// The reply (for a whisper, the stored thought).
        reply: String,
        /// The names of the tools called, in order.
        tools: Vec<String>,
    },
    /// A stage scene's turn was resolved.
    StageTurn {
        /// The stage.
        stage: String,
        /// The turn, from 1.
        turn: u32,
        /// The narration.
        narration: String,
        /// Whether the resolution is the fail-safe.
        fail_safe: bool,
        /// The persona actors who played the turn, by name, in the scene's order (empty when
        /// no persona did; absent from the line then, and from records written before it).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        actors: Vec<String>,
    },
    /// The director's executor moved (noted by the director, which sits above this module).
    DirectorState {
        /// The directive's job.
        job: u64,
        /// From (an executor state's name: `Planning`, `Executing`, …).
        from: String,
        /// To.
        to: String,
    },
}

impl Happened {
    /// The order of kinds among lines of the same time in one frame.
    fn rank(&self) -> u8 {
        match self {
            Self::GroupLine { .. } => 0,
            Self::TalkTurn { .. } => 1,
            Self::StageTurn { .. } => 2,
            Self::DirectorState { .. } => 3,
        }
    }
}

/// How a stream is named in the record.
fn stream_name(key: &StreamKey) -> String {
    match key {
        StreamKey::Arena(address) => format!("arena {address}"),
        StreamKey::Channel(name) => format!("channel {name}"),
    }
}

/// The record of a run, written to its file as the run goes (insert it as a resource; a
/// system records every frame; take it out and [`finish`](Self::finish) it at the end).
#[derive(Resource)]
pub struct RunRecord {
    file: LineFile,
    /// A line waiting to be written (reused).
    line_buf: Vec<u8>,
    lines: u64,
    error: Option<std::io::Error>,
    cursors: RecordCursors,
    /// Happenings noted by systems above this module (the director), written with the frame's.
    noted: Vec<(NaiveDateTime, Happened)>,
}

impl std::fmt::Debug for RunRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunRecord")
            .field("path", &self.file.path())
            .field("lines", &self.lines)
            .finish_non_exhaustive()
    }
}

impl RunRecord {
    fn of(file: LineFile, lines: u64) -> Self {
        Self {
            file,
            line_buf: Vec::new(),
            lines,
            error: None,
            cursors: RecordCursors::default(),
            noted: Vec::new(),
        }
    }

    /// A record written to `path` (created or emptied).
    pub fn create(path: impl Into<PathBuf>) -> std::io::Result<Self> {
        let path = path.into();
        let file = File::create(&path)?;
        Ok(Self::of(LineFile::new(file, path), 0))
    }

    /// Continues the record at `path` for a run resumed at `next_step`: the lines recorded
    /// before that step are kept, later ones (written after the save, before a crash or by an
    /// earlier run from the same save), a torn or unreadable line and everything after it are
    /// cut off. A missing file starts a new record.
    pub fn continue_at(path: impl Into<PathBuf>, next_step: u64) -> std::io::Result<Self> {
        let path = path.into();
        let Some(file) = super::open_to_continue(&path)? else {
            return Self::create(path);
        };
        let mut kept_bytes = 0u64;
        let mut lines = 0u64;
        let mut reader = BufReader::new(&file);
        let mut text = Vec::new();
        loop {
            text.clear();
            let read = std::io::Read::take(&mut reader, MAX_LINE_BYTES as u64 + 1)
                .read_until(b'\n', &mut text)?;
            if read == 0 || text.last() != Some(&b'\n') {
                break;
            }
            match serde_json::from_slice::<RecordLine>(&text) {
                Ok(line) if line.step < next_step => {
                    kept_bytes += read as u64;
                    lines += 1;
                }
                _ => break,
            }
        }
        drop(reader);
        let mut file = file;
        file.set_len(kept_bytes)?;
        file.seek(std::io::SeekFrom::End(0))?;
        Ok(Self::of(LineFile::new(file, path), lines))
    }

    /// Notes a happening of game time `time` (a system of a module above `output` — the
    /// director — that this module cannot read the messages of): written with the frame's
    /// other lines, in time order.
    pub fn note(&mut self, time: NaiveDateTime, what: Happened) {
        self.noted.push((time, what));
    }

    /// The record's file.
    pub fn path(&self) -> &Path {
        self.file.path()
    }

    /// Lines recorded (kept from an earlier run included).
    pub fn lines(&self) -> u64 {
        self.lines
    }

    /// Appends `line` (to the file at the next [`flush`](Self::flush), when enough is pending,
    /// or when the record is dropped).
    pub fn push(&mut self, line: &RecordLine) {
        if self.error.is_some() {
            return;
        }
        self.line_buf.clear();
        let written = serde_json::to_writer(&mut self.line_buf, line)
            .map_err(std::io::Error::other)
            .and_then(|()| {
                self.line_buf.push(b'\n');
                self.file.push(&self.line_buf)
            });
        match written {
            Ok(()) => self.lines += 1,
            Err(error) => self.error = Some(error),
        }
    }

    /// Writes what is pending and syncs the file; the first write error so far, if any.
    pub fn flush(&mut self) -> std::io::Result<()> {
        if self.error.is_none()
            && let Err(error) = self.file.flush()
        {
            self.error = Some(error);
        }
        match &self.error {
            Some(error) => Err(std::io::Error::new(error.kind(), error.to_string())),
            None => Ok(()),
        }
    }

    /// [`flush`](Self::flush), at the end of the run.
    pub fn finish(mut self) -> std::io::Result<()> {
        self.flush()
    }
}

/// Where the record has read each kind of message up to.
#[derive(Default)]
struct RecordCursors {
    group: MessageCursor<GroupLineSpoken>,
    talk: MessageCursor<DialogueReplied>,
    stage: MessageCursor<StageTurnResolved>,
}

/// Where `smallville run` keeps its [`RunRecord`] (in `Last`); a system that notes
/// happenings into the record runs before it.
#[derive(SystemSet, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RecordSystems;

/// Records the frame's group lines, talk turns, stage turns and director state changes into
/// the [`RunRecord`] (when there is one; a kind whose plugin is not in the app records
/// nothing). The system of `smallville run` (in `Last`, every frame), and called once more
/// at the end of the run for what landed after the last frame.
pub(crate) fn record_run(world: &mut World) {
    let Some(mut record) = world.remove_resource::<RunRecord>() else {
        return;
    };
    let cursors = &mut record.cursors;
    // The step is the one the happening's game time falls in (a frame may run several steps:
    // the clock's step when the record reads the messages is not the step they came from).
    let (start, sec_per_step) = world
        .get_resource::<SimClock>()
        .map(|c| (c.start(), i64::from(c.sec_per_step().max(1))))
        .unwrap_or((NaiveDateTime::default(), 10));
    let mut lines: Vec<RecordLine> = Vec::new();
    let at = |time: NaiveDateTime, what: Happened| RecordLine {
        step: u64::try_from((time - start).num_seconds() / sec_per_step).unwrap_or(0),
        time,
        what,
    };
    if let Some(messages) = world.get_resource::<Messages<GroupLineSpoken>>() {
        for line in cursors.group.read(messages) {
            let persona = line
                .persona
                .and_then(|p| world.get::<Name>(p))
                .map(|n| n.as_str().to_owned());
            lines.push(at(
                line.time,
                Happened::GroupLine {
                    stream: stream_name(&line.stream),
                    speaker: line.speaker.clone(),
                    persona,
                    text: line.text.clone(),
                    emoji: line.emoji,
                },
            ));
        }
    }
    if let Some(messages) = world.get_resource::<Messages<DialogueReplied>>() {
        for turn in cursors.talk.read(messages) {
            let (mode, message) = match &turn.mode {
                DialogueMode::Say(text) => ("say", text),
                DialogueMode::ToGroup(text) => ("to_group", text),
                DialogueMode::Whisper(text) => ("whisper", text),
                DialogueMode::Interview(text) => ("interview", text),
            };
            lines.push(at(
                turn.time,
                Happened::TalkTurn {
                    persona: turn.name.clone(),
                    speaker: turn.speaker.clone(),
                    mode: mode.to_owned(),
                    message: message.clone(),
                    reply: turn.reply.clone(),
                    tools: turn.tool_calls.iter().map(|c| c.tool.clone()).collect(),
                },
            ));
        }
    }
    if let Some(messages) = world.get_resource::<Messages<StageTurnResolved>>() {
        for turn in cursors.stage.read(messages) {
            let actors = turn
                .personas
                .iter()
                .filter_map(|p| world.get::<Name>(*p))
                .map(|n| n.as_str().to_owned())
                .collect();
            lines.push(at(
                turn.time,
                Happened::StageTurn {
                    stage: turn.stage.clone(),
                    turn: turn.turn,
                    narration: turn.summary.clone(),
                    fail_safe: turn.fail_safe,
                    actors,
                },
            ));
        }
    }
    for (time, what) in std::mem::take(&mut record.noted) {
        lines.push(at(time, what));
    }
    lines.sort_by_key(|line| (line.time, line.what.rank()));
    for line in &lines {
        record.push(line);
    }
    world.insert_resource(record);
}

/// The largest record [`read_record`] reads.
pub const MAX_RECORD_BYTES: u64 = 1 << 30;

/// Reads a record back (a report, a replay, a test): every line, in order. A line that does
/// not parse is an error naming its number; a file over [`MAX_RECORD_BYTES`] is refused.
pub fn read_record(path: impl AsRef<Path>) -> Result<Vec<RecordLine>, String> {
    read_record_at_most(path, MAX_RECORD_BYTES)
}

/// [`read_record`] of a file of at most `limit` bytes (a larger one is refused before it is
/// read).
pub fn read_record_at_most(path: impl AsRef<Path>, limit: u64) -> Result<Vec<RecordLine>, String> {
    let path = path.as_ref();
    let text =
        crate::files::read_at_most(path, limit).map_err(|e| format!("{}: {e}", path.display()))?;
    text.split(|b| *b == b'\n')
        .enumerate()
        .filter(|(_, line)| !line.is_empty())
        .map(|(i, line)| {
            serde_json::from_slice(line)
                .map_err(|e| format!("{}: line {}: {e}", path.display(), i + 1))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn time(minute: i64) -> NaiveDateTime {
        SimClock::default_start() + chrono::Duration::minutes(minute)
    }

    #[test]
    fn the_record_is_written_in_time_order_and_read_back() {
        let dir = std::env::temp_dir().join(format!("ga-record-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join(RECORD_FILE);
        let mut world = World::new();
        world.init_resource::<Messages<GroupLineSpoken>>();
        world.init_resource::<Messages<DialogueReplied>>();
        world.init_resource::<Messages<StageTurnResolved>>();
        world.insert_resource(SimClock::default());
        world.insert_resource(RunRecord::create(&path).expect("created"));
        let ada = world.spawn(Name::new("Ada Quill")).id();
        world.write_message(DialogueReplied {
            persona: ada,
            name: "Ada Quill".into(),
            speaker: "Player".into(),
            time: time(5),
            mode: DialogueMode::Say("The fair moved.".into()),
            reply: "Oh, thanks!".into(),
            tool_calls: Vec::new(),
            planner_calls: 1,
            final_output: false,
        });
        world.write_message(GroupLineSpoken {
            stream: StreamKey::Arena("w:Hobbs Cafe:cafe".into()),
            seq: 1,
            speaker: "Ada Quill".into(),
            persona: Some(ada),
            text: "Did you hear?".into(),
            emoji: false,
            time: time(3),
        });
        let shade = world.spawn_empty().id();
        world.write_message(StageTurnResolved {
            stage: "Standoff".into(),
            time: time(6),
            turn: 1,
            summary: "Ada stares the shade down.".into(),
            applied: crate::stage::Applied::default(),
            fail_safe: false,
            // A persona without a name (gone) is left out of the actors.
            personas: vec![ada, shade],
        });
        world.resource_mut::<RunRecord>().note(
            time(0),
            Happened::DirectorState {
                job: 1,
                from: "Idle".into(),
                to: "Planning".into(),
            },
        );
        record_run(&mut world);
        // Read once: a second pass over the same messages records nothing more.
        record_run(&mut world);
        let record = world.remove_resource::<RunRecord>().expect("record");
        assert_eq!(record.lines(), 4);
        record.finish().expect("written");
        let lines = read_record(&path).expect("reads");
        let kinds: Vec<u8> = lines.iter().map(|l| l.what.rank()).collect();
        assert_eq!(
            kinds,
            [3, 0, 1, 2],
            "by game time: the director (now, 00:00), 00:03, 00:05, 00:06"
        );
        assert_eq!(
            lines[3].what,
            Happened::StageTurn {
                stage: "Standoff".into(),
                turn: 1,
                narration: "Ada stares the shade down.".into(),
                fail_safe: false,
                actors: vec!["Ada Quill".into()],
            }
        );
        // A stage turn without persona actors (or from an older record) has no `actors`.
        let bare: RecordLine = serde_json::from_str(
            r#"{"step":1,"time":"2023-02-13T00:00:10","kind":"stage_turn","stage":"S","turn":2,"narration":"n","fail_safe":true}"#,
        )
        .expect("parses");
        assert!(matches!(&bare.what, Happened::StageTurn { actors, .. } if actors.is_empty()));
        assert!(
            !serde_json::to_string(&bare)
                .expect("json")
                .contains("actors")
        );
        assert!(
            read_record_at_most(&path, 10)
                .expect_err("over the limit")
                .contains(RECORD_FILE)
        );
        assert_eq!(
            lines[1].what,
            Happened::GroupLine {
                stream: "arena w:Hobbs Cafe:cafe".into(),
                speaker: "Ada Quill".into(),
                persona: Some("Ada Quill".into()),
                text: "Did you hear?".into(),
                emoji: false,
            }
        );
        let text = std::fs::read_to_string(&path).expect("text");
        assert!(
            text.lines().nth(2).is_some_and(
                |l| l.contains(r#""kind":"talk_turn""#) && l.contains(r#""mode":"say""#)
            ),
            "{text}"
        );

        // A run resumed at step 37 keeps what was recorded before it and cuts the rest.
        let mut later = lines[2].clone();
        later.step = 40;
        let mut record = RunRecord::continue_at(&path, 37).expect("continues");
        assert_eq!(record.lines(), 4);
        record.push(&later);
        record.finish().expect("written");
        assert_eq!(read_record(&path).expect("reads").len(), 5);
        let record = RunRecord::continue_at(&path, 37).expect("continues");
        assert_eq!(record.lines(), 4, "the line of step 40 is cut");
        record.finish().expect("written");
        assert_eq!(read_record(&path).expect("reads"), lines);
        std::fs::write(&path, b"{\"step\":0,\"time\":\"torn").expect("torn");
        assert_eq!(
            RunRecord::continue_at(&path, 1).expect("continues").lines(),
            0
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
