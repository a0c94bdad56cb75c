//! The run record's happenings in a replay's bubbles (SPEC §16 "Recorded"): `smallville
//! replay DIR` shows the group lines, talk turns and stage turns of `DIR/record.jsonl`
//! ([`record`](super::record)) over the personas who said or played them, at their step.
//!
//! [`ReplayBubbles::from_record`] turns the record into a schedule — one [`ScheduledBubble`]
//! per line that has a persona to stand over, in the record's order:
//!
//! | line | bubble over | text |
//! | --- | --- | --- |
//! | `group_line` said by a persona | the speaker | the line (an emoji reply: the emoji) |
//! | `talk_turn` | the persona spoken to | `Speaker: message -> reply`, both shortened |
//! | `stage_turn` | its first persona actor | `🎭 narration` |
//!
//! A post of game code into a channel (no persona) and a stage turn no persona played have no
//! bubble, as in the game; director state changes have none either. Texts are put on one line
//! and cut at [`MAX_BUBBLE_CHARS`] (the message and reply of a talk turn at
//! [`MAX_TALK_MESSAGE_CHARS`] and [`MAX_TALK_REPLY_CHARS`]), and at most
//! [`MAX_REPLAY_BUBBLES`] are kept, so a hostile record costs no more than a long run.
//!
//! [`ReplayBubbles::visible_at`] says which are up at a step: per persona, its latest bubble of
//! that step or the `hold_steps` before it. The hold is a few seconds of replay time
//! ([`REPLAY_BUBBLE_SECS`]) at the speed played ([`bubble_hold_steps`]): at 1× three steps, at
//! 32× the 96 steps those seconds show. The [`ReplayPlugin`](super::ReplayPlugin) reads the
//! record once when the replay starts (a missing or unreadable record is a warning and a
//! replay without these bubbles) and keeps a [`RecordedBubble`] on every
//! [`ReplayActor`](super::ReplayActor) whose bubble is up; the window draws it in the
//! persona's dialogue bubble, whole (a replay at 32× moves too fast for the game's typewriter).

use std::collections::BTreeMap;
use std::path::Path;

use bevy::prelude::*;

use super::record::{Happened, RECORD_FILE, RecordLine, read_record_at_most};
use crate::clock::SimSpeed;

/// Real seconds a recorded bubble stays up in a replay (at any speed): about as long as the
/// game types and holds a group line of fifty characters.
pub const REPLAY_BUBBLE_SECS: f64 = 3.0;
/// Most characters of a bubble's text.
pub const MAX_BUBBLE_CHARS: usize = 160;
/// Most characters of a talk turn's message in its bubble.
pub const MAX_TALK_MESSAGE_CHARS: usize = 60;
/// Most characters of a talk turn's reply in its bubble.
pub const MAX_TALK_REPLY_CHARS: usize = 80;
/// Most characters of a talk turn's speaker in its bubble.
const MAX_SPEAKER_CHARS: usize = 40;
/// Most bubbles a replay schedules (the first ones of the record).
pub const MAX_REPLAY_BUBBLES: usize = 200_000;
/// The largest record a replay reads.
pub const MAX_REPLAY_RECORD_BYTES: u64 = 256 << 20;

/// What a recorded bubble shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Reflect)]
pub enum BubbleKind {
    /// A line said in a group conversation.
    Group,
    /// A talk turn: what was said to the persona and its reply.
    Talk,
    /// A stage turn's narration.
    Stage,
}

/// One bubble of the schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduledBubble {
    /// The step it was recorded at.
    pub step: u64,
    /// The persona it stands over, by name.
    pub persona: String,
    /// What it shows.
    pub kind: BubbleKind,
    /// Its text (on one line, shortened).
    pub text: String,
}

/// The record's bubbles in step order (see the [module docs](self)).
#[derive(Resource, Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplayBubbles {
    bubbles: Vec<ScheduledBubble>,
    /// Bubbles left out over [`MAX_REPLAY_BUBBLES`].
    dropped: usize,
}

impl ReplayBubbles {
    /// The schedule of `lines` (a record's lines, in its order).
    pub fn from_record(lines: &[RecordLine]) -> Self {
        let mut bubbles: Vec<ScheduledBubble> = Vec::new();
        let mut dropped = 0;
        for line in lines {
            let Some((persona, kind, text)) = bubble_of(&line.what) else {
                continue;
            };
            if bubbles.len() >= MAX_REPLAY_BUBBLES {
                dropped += 1;
                continue;
            }
            bubbles.push(ScheduledBubble {
                step: line.step,
                persona,
                kind,
                text,
            });
        }
        // A record is in time order, so this only guards a file put together by hand; stable,
        // so a persona's lines of one step keep their order (the last one is shown).
        bubbles.sort_by_key(|b| b.step);
        Self { bubbles, dropped }
    }

    /// Reads `dir`'s `record.jsonl` and schedules its bubbles. The error says why there are
    /// none: no record (a run folder from before records, or not a run folder), a record
    /// over [`MAX_REPLAY_RECORD_BYTES`], or a line that does not parse (named by number).
    pub fn load(dir: &Path) -> Result<Self, String> {
        let path = dir.join(RECORD_FILE);
        if !path.is_file() {
            return Err(format!(
                "{} does not exist (a run folder written before runs recorded their group \
                 talk, talks and scenes?)",
                path.display()
            ));
        }
        let lines = read_record_at_most(&path, MAX_REPLAY_RECORD_BYTES)?;
        Ok(Self::from_record(&lines))
    }

    /// Every bubble, in step order.
    pub fn bubbles(&self) -> &[ScheduledBubble] {
        &self.bubbles
    }

    /// Bubbles left out because the record held more than [`MAX_REPLAY_BUBBLES`].
    pub fn dropped(&self) -> usize {
        self.dropped
    }

    /// The bubbles up at `step`, by persona: each persona's latest bubble recorded at `step`
    /// or in the `hold_steps − 1` steps before it (`hold_steps` 0 counts as 1).
    pub fn visible_at(&self, step: u64, hold_steps: u64) -> BTreeMap<&str, &ScheduledBubble> {
        let since = step.saturating_sub(hold_steps.max(1) - 1);
        let end = self.bubbles.partition_point(|b| b.step <= step);
        let start = self.bubbles[..end].partition_point(|b| b.step < since);
        let mut shown = BTreeMap::new();
        // Later bubbles of a persona replace its earlier ones.
        for bubble in &self.bubbles[start..end] {
            shown.insert(bubble.persona.as_str(), bubble);
        }
        shown
    }
}

/// The persona, kind and text of a record line's bubble, if it has one.
fn bubble_of(what: &Happened) -> Option<(String, BubbleKind, String)> {
    match what {
        Happened::GroupLine {
            persona: Some(persona),
            text,
            ..
        } => Some((
            persona.clone(),
            BubbleKind::Group,
            one_line(text, MAX_BUBBLE_CHARS),
        )),
        Happened::TalkTurn {
            persona,
            speaker,
            message,
            reply,
            ..
        } => {
            let text = format!(
                "{}: {} -> {}",
                one_line(speaker, MAX_SPEAKER_CHARS),
                one_line(message, MAX_TALK_MESSAGE_CHARS),
                one_line(reply, MAX_TALK_REPLY_CHARS)
            );
            Some((
                persona.clone(),
                BubbleKind::Talk,
                one_line(&text, MAX_BUBBLE_CHARS),
            ))
        }
        Happened::StageTurn {
            narration, actors, ..
        } => actors.first().map(|actor| {
            (
                actor.clone(),
                BubbleKind::Stage,
                one_line(&format!("🎭 {narration}"), MAX_BUBBLE_CHARS),
            )
        }),
        Happened::GroupLine { persona: None, .. } | Happened::DirectorState { .. } => None,
    }
}

/// `text` on one line (runs of white space, line breaks included, become one space) and at
/// most `max` characters: a longer one is cut and ends in `...` (the bubbles' font has no `…`).
pub(crate) fn one_line(text: &str, max: usize) -> String {
    let joined = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if joined.chars().count() <= max {
        return joined;
    }
    let mut kept: String = joined.chars().take(max.saturating_sub(3)).collect();
    kept.truncate(kept.trim_end().len());
    kept.push_str("...");
    kept
}

/// Steps a recorded bubble stays up at `speed` ([`REPLAY_BUBBLE_SECS`] of replay time at the
/// game's `steps_per_second_at_1x`, at least 1); `None` while paused (the steps shown do not
/// move: keep the hold of the speed before). Max speed counts as 32×.
pub fn bubble_hold_steps(speed: SimSpeed, steps_per_second_at_1x: f64) -> Option<u64> {
    let multiplier = match speed {
        SimSpeed::Paused => return None,
        SimSpeed::Max => 32.0,
        speed => speed.multiplier().unwrap_or(1.0),
    };
    let steps = (multiplier * steps_per_second_at_1x.max(0.0) * REPLAY_BUBBLE_SECS).ceil();
    // A float to integer cast saturates (and is 0 for NaN).
    Some((steps as u64).max(1))
}

/// The recorded bubble a [`ReplayActor`](super::ReplayActor) shows now (see the
/// [module docs](self)); absent when it shows none.
#[derive(Component, Debug, Clone, PartialEq, Eq, Reflect)]
pub struct RecordedBubble {
    /// What it shows.
    pub kind: BubbleKind,
    /// Its text.
    pub text: String,
    /// The step it was recorded at.
    pub step: u64,
}

impl From<&ScheduledBubble> for RecordedBubble {
    fn from(bubble: &ScheduledBubble) -> Self {
        Self {
            kind: bubble.kind,
            text: bubble.text.clone(),
            step: bubble.step,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::NaiveDateTime;

    fn at(step: u64, what: Happened) -> RecordLine {
        RecordLine {
            step,
            time: NaiveDateTime::default() + chrono::Duration::seconds(10 * step as i64),
            what,
        }
    }

    fn group(step: u64, persona: Option<&str>, text: &str) -> RecordLine {
        at(
            step,
            Happened::GroupLine {
                stream: "arena w:Cafe:cafe".into(),
                speaker: persona.unwrap_or("the mayor").into(),
                persona: persona.map(str::to_owned),
                text: text.into(),
                emoji: false,
            },
        )
    }

    fn shown(bubbles: &ReplayBubbles, step: u64, hold: u64) -> Vec<(String, String)> {
        bubbles
            .visible_at(step, hold)
            .into_iter()
            .map(|(who, b)| (who.to_owned(), b.text.clone()))
            .collect()
    }

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
            .collect()
    }

    #[test]
    fn each_kind_becomes_its_bubble_over_its_persona() {
        let lines = vec![
            group(10, Some("Ada"), "Morning,\n  everyone!"),
            group(10, None, "Market on Sunday"),
            at(
                11,
                Happened::TalkTurn {
                    persona: "Bo".into(),
                    speaker: "Player".into(),
                    mode: "say".into(),
                    message: "The fair moved to Friday.".into(),
                    reply: "Oh, thanks for telling me!".into(),
                    tools: Vec::new(),
                },
            ),
            at(
                12,
                Happened::StageTurn {
                    stage: "Standoff".into(),
                    turn: 1,
                    narration: "Ada stares the shade down.".into(),
                    fail_safe: false,
                    actors: vec!["Ada".into(), "Bo".into()],
                },
            ),
            at(
                12,
                Happened::StageTurn {
                    stage: "Alone".into(),
                    turn: 1,
                    narration: "Nobody is here.".into(),
                    fail_safe: true,
                    actors: Vec::new(),
                },
            ),
            at(
                13,
                Happened::DirectorState {
                    job: 1,
                    from: "Idle".into(),
                    to: "Planning".into(),
                },
            ),
        ];
        let bubbles = ReplayBubbles::from_record(&lines);
        let list: Vec<(u64, &str, BubbleKind, &str)> = bubbles
            .bubbles()
            .iter()
            .map(|b| (b.step, b.persona.as_str(), b.kind, b.text.as_str()))
            .collect();
        assert_eq!(
            list,
            vec![
                (10, "Ada", BubbleKind::Group, "Morning, everyone!"),
                (
                    11,
                    "Bo",
                    BubbleKind::Talk,
                    "Player: The fair moved to Friday. -> Oh, thanks for telling me!"
                ),
                (
                    12,
                    "Ada",
                    BubbleKind::Stage,
                    "🎭 Ada stares the shade down."
                ),
            ],
            "a game post, a stage turn without personas and the director have no bubble"
        );
        assert_eq!(bubbles.dropped(), 0);
    }

    #[test]
    fn a_bubble_is_up_from_its_step_for_the_hold_and_a_later_one_replaces_it() {
        let bubbles = ReplayBubbles::from_record(&[
            group(10, Some("Ada"), "one"),
            group(10, Some("Bo"), "hi"),
            group(12, Some("Ada"), "two"),
            group(12, Some("Ada"), "three"),
            group(30, Some("Bo"), "late"),
        ]);
        assert!(bubbles.visible_at(9, 4).is_empty(), "not before its step");
        assert_eq!(
            shown(&bubbles, 10, 4),
            pairs(&[("Ada", "one"), ("Bo", "hi")])
        );
        assert_eq!(
            shown(&bubbles, 11, 4),
            pairs(&[("Ada", "one"), ("Bo", "hi")])
        );
        // Ada's later lines replace her first; of one step's, the last is shown.
        assert_eq!(
            shown(&bubbles, 12, 4),
            pairs(&[("Ada", "three"), ("Bo", "hi")])
        );
        // Bo's line is up for steps 10..=13, Ada's last for 12..=15.
        assert_eq!(shown(&bubbles, 14, 4), pairs(&[("Ada", "three")]));
        assert!(bubbles.visible_at(16, 4).is_empty());
        // A longer hold (a faster replay) keeps them longer; a hold of 0 or 1 is the step.
        assert_eq!(
            shown(&bubbles, 40, 32),
            pairs(&[("Ada", "three"), ("Bo", "late")])
        );
        assert_eq!(shown(&bubbles, 12, 0), pairs(&[("Ada", "three")]));
        assert_eq!(shown(&bubbles, 30, 1), pairs(&[("Bo", "late")]));
        assert!(bubbles.visible_at(31, 1).is_empty());
        assert_eq!(bubbles.visible_at(u64::MAX, u64::MAX).len(), 2);
        assert!(ReplayBubbles::default().visible_at(5, 4).is_empty());
    }

    #[test]
    fn a_record_out_of_order_is_scheduled_by_step() {
        let bubbles = ReplayBubbles::from_record(&[
            group(20, Some("Ada"), "later"),
            group(5, Some("Ada"), "sooner"),
        ]);
        let steps: Vec<u64> = bubbles.bubbles().iter().map(|b| b.step).collect();
        assert_eq!(steps, [5, 20]);
        assert_eq!(shown(&bubbles, 6, 4), pairs(&[("Ada", "sooner")]));
    }

    #[test]
    fn texts_are_one_line_and_bounded() {
        assert_eq!(one_line("  a\n\tb  c ", 20), "a b c");
        assert_eq!(one_line("", 20), "");
        assert_eq!(one_line("Hello there friend", 14), "Hello there...");
        assert_eq!(one_line("Supercalifragilistic", 10), "Superca...");
        assert_eq!(one_line("☕ ☕ ☕", 5), "☕ ☕ ☕");
        assert_eq!(one_line("☕ ☕ ☕ ☕", 5), "☕...");
        assert_eq!(one_line("ééééééé", 6), "ééé...");
        let long = "word ".repeat(10_000);
        let talk = at(
            1,
            Happened::TalkTurn {
                persona: "Bo".into(),
                speaker: "x".repeat(500),
                mode: "say".into(),
                message: long.clone(),
                reply: long.clone(),
                tools: Vec::new(),
            },
        );
        let bubbles = ReplayBubbles::from_record(&[group(1, Some("Ada"), &long), talk]);
        for bubble in bubbles.bubbles() {
            assert!(
                bubble.text.chars().count() <= MAX_BUBBLE_CHARS,
                "{}",
                bubble.text
            );
            assert!(bubble.text.ends_with("..."), "{}", bubble.text);
        }
        // Both parts of a talk turn survive the cut.
        let talk = &bubbles.bubbles()[1].text;
        assert!(talk.contains(" -> word"), "{talk}");
    }

    #[test]
    fn at_most_so_many_bubbles_are_kept() {
        let lines: Vec<RecordLine> = (0..MAX_REPLAY_BUBBLES as u64 + 3)
            .map(|step| group(step, Some("Ada"), "x"))
            .collect();
        let bubbles = ReplayBubbles::from_record(&lines);
        assert_eq!(bubbles.bubbles().len(), MAX_REPLAY_BUBBLES);
        assert_eq!(bubbles.dropped(), 3);
    }

    #[test]
    fn the_hold_is_a_few_seconds_at_the_speed_played() {
        assert_eq!(bubble_hold_steps(SimSpeed::X1, 1.0), Some(3));
        assert_eq!(bubble_hold_steps(SimSpeed::X8, 1.0), Some(24));
        assert_eq!(bubble_hold_steps(SimSpeed::X32, 1.0), Some(96));
        assert_eq!(bubble_hold_steps(SimSpeed::Max, 1.0), Some(96));
        assert_eq!(bubble_hold_steps(SimSpeed::X2, 0.5), Some(3));
        assert_eq!(bubble_hold_steps(SimSpeed::X1, 0.1), Some(1));
        assert_eq!(bubble_hold_steps(SimSpeed::X1, 0.0), Some(1));
        assert_eq!(bubble_hold_steps(SimSpeed::X1, f64::NAN), Some(1));
        assert_eq!(bubble_hold_steps(SimSpeed::Paused, 1.0), None);
    }

    #[test]
    fn a_missing_or_bad_record_is_an_error_naming_the_file() {
        let dir = std::env::temp_dir().join(format!("ga-replay-bubbles-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        let missing = ReplayBubbles::load(&dir).expect_err("no record");
        assert!(missing.contains("record.jsonl"), "{missing}");
        let line = serde_json::to_string(&group(3, Some("Ada"), "Hi")).expect("json");
        std::fs::write(dir.join(RECORD_FILE), format!("{line}\n{{\"step\":")).expect("write");
        let bad = ReplayBubbles::load(&dir).expect_err("a torn line");
        assert!(
            bad.contains("record.jsonl") && bad.contains("line 2"),
            "{bad}"
        );
        std::fs::write(dir.join(RECORD_FILE), format!("{line}\n")).expect("write");
        let good = ReplayBubbles::load(&dir).expect("reads");
        assert_eq!(shown(&good, 3, 4), pairs(&[("Ada", "Hi")]));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
