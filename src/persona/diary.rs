//! What a persona did, for reports: the day's schedules, conversations held, reflections run,
//! identity revisions and arenas visited. The cognitive loop writes it; the run command's
//! `summary.json`, the inspector and tests read it. It lives in the ECS (not in the mind), so it
//! can be read while the persona is thinking.

use std::collections::{BTreeMap, BTreeSet};

use super::scratch::ScheduleItem;
use bevy::prelude::*;
use chrono::{NaiveDate, NaiveDateTime};
use serde::{Deserialize, Serialize};

/// One game day of a persona.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DayRecord {
    /// The date.
    pub date: Option<NaiveDate>,
    /// The hour the persona woke up.
    pub wake_up_hour: u32,
    /// The broad goals of the day (`daily_req`).
    pub daily_req: Vec<String>,
    /// The undecomposed hourly schedule.
    pub hourly_schedule: Vec<ScheduleItem>,
    /// The (progressively decomposed) schedule as it stood at the end of the day.
    pub schedule: Vec<ScheduleItem>,
    /// Arenas (`world:sector:arena`) the persona stood in that day.
    pub arenas_visited: BTreeSet<String>,
}

/// One conversation between two personas.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConversationRecord {
    /// The other persona.
    pub with: String,
    /// When it started.
    pub start: NaiveDateTime,
    /// When it ends (as planned when it began).
    pub end: NaiveDateTime,
    /// The sim step at which it started.
    pub start_step: u64,
    /// How many lines were spoken.
    pub lines: usize,
    /// One line summing it up.
    pub summary: String,
}

/// A persona's record of its simulation.
#[derive(Component, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Diary {
    /// Each game day, oldest first.
    pub days: Vec<DayRecord>,
    /// Conversations held, oldest first.
    pub conversations: Vec<ConversationRecord>,
    /// Reflections run (each: focal points → insights).
    pub reflections: u32,
    /// Dates at which the identity was revised (each new day after the first).
    pub identity_revisions: Vec<NaiveDate>,
    /// Reactions by kind (`"chat"`, `"wait"`).
    pub reactions: BTreeMap<String, u32>,
}

impl Diary {
    /// The record of `date`, created when missing.
    pub(crate) fn day_mut(&mut self, date: NaiveDate) -> &mut DayRecord {
        if let Some(i) = self.days.iter().position(|d| d.date == Some(date)) {
            return &mut self.days[i];
        }
        self.days.push(DayRecord {
            date: Some(date),
            ..Default::default()
        });
        let last = self.days.len() - 1;
        &mut self.days[last]
    }

    /// The record of `date`, if any.
    pub fn day(&self, date: NaiveDate) -> Option<&DayRecord> {
        self.days.iter().find(|d| d.date == Some(date))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn day_mut_creates_once() {
        let mut diary = Diary::default();
        let d = NaiveDate::from_ymd_opt(2023, 2, 13).unwrap_or_default();
        diary.day_mut(d).wake_up_hour = 7;
        diary.day_mut(d).arenas_visited.insert("w:s:a".into());
        assert_eq!(diary.days.len(), 1);
        assert_eq!(diary.day(d).map(|r| r.wake_up_hour), Some(7));
    }
}
