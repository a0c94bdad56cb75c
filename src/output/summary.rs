//! `summary.json`: what each persona did during a run, and how the run was made.
//!
//! Per persona: each game day's decomposed schedule (`f_daily_schedule` as
//! `[[task, minutes], …]`) with its wake-up hour and the arenas visited, the counts of events,
//! thoughts and chats in associative memory, reflections run, conversations held (with whom and
//! when), identity revisions, reactions and the final `currently`. Everything comes from the
//! persona's [`Diary`] (always in the ECS) and its [`MindState`] — which is only readable while
//! the mind is home, so the run waits for pending thoughts to land before summarising; a mind
//! still out is reported as `null` memory counts rather than guessed.

use std::collections::BTreeMap;
use std::path::PathBuf;

use bevy::prelude::*;
use chrono::{NaiveDate, NaiveDateTime};
use serde::{Deserialize, Serialize};

use crate::clock::TimeMode;
use crate::memory::NodeKind;
use crate::persona::{
    Body, ConversationRecord, DayRecord, Diary, Mind, MindState, Persona, ScheduleItem,
};
use crate::world::TileCoord;

/// The content of `summary.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    /// How the run was made.
    pub run: RunMetadata,
    /// Each persona's record, by name.
    pub personas: BTreeMap<String, PersonaSummary>,
}

/// How a run was made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunMetadata {
    /// The crate version that made the run.
    pub version: String,
    /// The seed of every random choice.
    pub seed: u64,
    /// Game hours requested.
    pub hours: f64,
    /// Sim steps taken.
    pub steps: u64,
    /// Game time of the first step.
    pub start: NaiveDateTime,
    /// Game time after the last step.
    pub end: NaiveDateTime,
    /// The personas, by name.
    pub personas: Vec<String>,
    /// The LLM backend's short name (`"scripted"` is not a language model).
    pub backend: String,
    /// The chat model.
    pub model: String,
    /// The Tiled map: relative to the working directory (or the crate, for the bundled town),
    /// else its file name, so the summary names no machine path.
    pub map: PathBuf,
    /// Lockstep or realtime.
    pub time_mode: TimeMode,
    /// Whether the run was lean (`smallville run --lean`, or a lean save resumed; absent when
    /// faithful).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub lean: bool,
    /// Real seconds the run took.
    pub wall_seconds: f64,
}

/// Counts of memory nodes by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryCounts {
    /// Events perceived or done.
    pub events: usize,
    /// Thoughts: plans, reflections, memos.
    pub thoughts: usize,
    /// Conversations remembered.
    pub chats: usize,
}

/// One game day of a persona.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DaySummary {
    /// The date.
    pub date: Option<NaiveDate>,
    /// The hour the persona woke up.
    pub wake_up_hour: u32,
    /// The day's broad goals.
    pub daily_req: Vec<String>,
    /// The schedule as it stood at the end of the day, `[[task, minutes], …]`.
    pub f_daily_schedule: Vec<ScheduleItem>,
    /// The schedule's total minutes (1440 for a complete day).
    pub schedule_minutes: u32,
    /// Arenas (`world:sector:arena`) the persona stood in, sorted.
    pub arenas_visited: Vec<String>,
}

impl From<&DayRecord> for DaySummary {
    fn from(day: &DayRecord) -> Self {
        Self {
            date: day.date,
            wake_up_hour: day.wake_up_hour,
            daily_req: day.daily_req.clone(),
            f_daily_schedule: day.schedule.clone(),
            schedule_minutes: day.schedule.iter().map(|item| item.minutes).sum(),
            arenas_visited: day.arenas_visited.iter().cloned().collect(),
        }
    }
}

/// One persona's run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PersonaSummary {
    /// Each game day, oldest first.
    pub days: Vec<DaySummary>,
    /// Memory node counts; `None` when the mind was still out in a task at the end.
    pub memory: Option<MemoryCounts>,
    /// Reflections run.
    pub reflections: u32,
    /// Conversations held, oldest first.
    pub conversations: Vec<ConversationRecord>,
    /// Dates at which the identity was revised.
    pub identity_revisions: Vec<NaiveDate>,
    /// Reactions by kind (`"chat"`, `"wait"`).
    pub reactions: BTreeMap<String, u32>,
    /// The final `currently`; `None` when the mind was still out.
    pub currently: Option<String>,
    /// The tile the persona ended on.
    pub final_tile: TileCoord,
}

impl PersonaSummary {
    /// Summarises one persona from its diary, its mind (when home) and its body.
    pub fn new(diary: &Diary, mind: Option<&MindState>, body: &Body) -> Self {
        Self {
            days: diary.days.iter().map(DaySummary::from).collect(),
            memory: mind.map(|m| MemoryCounts {
                events: m.associative.count(NodeKind::Event),
                thoughts: m.associative.count(NodeKind::Thought),
                chats: m.associative.count(NodeKind::Chat),
            }),
            reflections: diary.reflections,
            conversations: diary.conversations.clone(),
            identity_revisions: diary.identity_revisions.clone(),
            reactions: diary.reactions.clone(),
            currently: mind.map(|m| m.scratch.currently.clone()),
            final_tile: body.tile,
        }
    }
}

/// Summarises every persona in `world`, by name.
pub(crate) fn summarise_personas(world: &mut World) -> BTreeMap<String, PersonaSummary> {
    let mut query = world.query_filtered::<(&Name, &Diary, &Mind, &Body), With<Persona>>();
    query
        .iter(world)
        .map(|(name, diary, mind, body)| {
            (
                name.as_str().to_owned(),
                PersonaSummary::new(diary, mind.get(), body),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::NewMemory;

    #[test]
    fn summary_counts_memory_and_copies_the_diary() {
        let date = NaiveDate::from_ymd_opt(2023, 2, 13).unwrap_or_default();
        let mut diary = Diary::default();
        {
            let day = diary.day_mut(date);
            day.wake_up_hour = 7;
            day.schedule = vec![
                ScheduleItem::new("sleeping", 420),
                ScheduleItem::new("working", 1020),
            ];
            day.arenas_visited.insert("W:B:b".into());
            day.arenas_visited.insert("W:A:a".into());
        }
        diary.reflections = 2;
        diary.identity_revisions.push(date);

        let mut mind = MindState::default();
        mind.scratch.currently = "writing a novel".into();
        let now = date.and_hms_opt(8, 0, 0).unwrap_or_default();
        for (kind, text) in [
            (NodeKind::Event, "a"),
            (NodeKind::Event, "b"),
            (NodeKind::Thought, "c"),
        ] {
            let memory = NewMemory::new(now, ("x", "is", text), text).embedding(vec![1.0, 0.5]);
            let added = match kind {
                NodeKind::Event => mind.associative.add_event(memory, Vec::new()),
                _ => mind.associative.add_thought(memory, Vec::new()),
            };
            assert!(added.is_ok(), "{added:?}");
        }
        let body = Body {
            tile: TileCoord::new(3, 4),
            ..Default::default()
        };
        let summary = PersonaSummary::new(&diary, Some(&mind), &body);
        assert_eq!(
            summary.memory,
            Some(MemoryCounts {
                events: 2,
                thoughts: 1,
                chats: 0
            })
        );
        assert_eq!(summary.days.len(), 1);
        assert_eq!(summary.days[0].schedule_minutes, 1440);
        assert_eq!(summary.days[0].wake_up_hour, 7);
        assert_eq!(summary.days[0].arenas_visited, ["W:A:a", "W:B:b"]);
        assert_eq!(summary.reflections, 2);
        assert_eq!(summary.currently.as_deref(), Some("writing a novel"));
        assert_eq!(summary.final_tile, TileCoord::new(3, 4));

        let json = serde_json::to_value(&summary).expect("json");
        assert_eq!(
            json["days"][0]["f_daily_schedule"],
            serde_json::json!([["sleeping", 420], ["working", 1020]])
        );

        let away = PersonaSummary::new(&diary, None, &body);
        assert_eq!(away.memory, None);
        assert_eq!(away.currently, None);
    }
}
