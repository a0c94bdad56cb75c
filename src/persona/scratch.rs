//! A persona's short-term state ("scratch" in Smallville): identity, hyper-parameters,
//! the day's plan, the current action and the current chat (SPEC §2).

use std::collections::BTreeMap;

use chrono::NaiveDateTime;
use serde::{Deserialize, Serialize};

use crate::settings::PersonaDefaults;
use crate::world::{ActionAddress, TileCoord, TileEvent};

/// The predicate of a persona's chat event, `(name, "chat with", partner)` (SPEC §3.5).
pub(crate) const CHAT_PREDICATE: &str = "chat with";

/// An `(subject, predicate, object)` triple; `None` parts are unknown or idle.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct EventTriple {
    /// Who acts.
    pub subject: Option<String>,
    /// The verb.
    pub predicate: Option<String>,
    /// What is acted on.
    pub object: Option<String>,
}

impl EventTriple {
    /// A complete triple.
    pub fn new(s: impl Into<String>, p: impl Into<String>, o: impl Into<String>) -> Self {
        Self {
            subject: Some(s.into()),
            predicate: Some(p.into()),
            object: Some(o.into()),
        }
    }

    /// `(subject, "chat with", partner)`, the event of a chat action (SPEC §3.5).
    pub fn chat(subject: impl Into<String>, partner: impl Into<String>) -> Self {
        Self::new(subject, CHAT_PREDICATE, partner)
    }

    /// Whether this is a chat event.
    pub fn is_chat(&self) -> bool {
        self.predicate.as_deref() == Some(CHAT_PREDICATE)
    }

    /// `(subject, "is", "idle")`, the fail-safe event of SPEC §3.4.
    pub fn idle(subject: impl Into<String>) -> Self {
        Self::new(subject, "is", "idle")
    }

    /// The event this triple puts on the map with `description` (what others — and the
    /// persona itself — perceive); `None` without a subject.
    pub(crate) fn tile_event(&self, description: Option<String>) -> Option<TileEvent> {
        self.subject.as_ref().map(|subject| TileEvent {
            subject: subject.clone(),
            predicate: self.predicate.clone(),
            object: self.object.clone(),
            description,
        })
    }

    /// Whether `event` is what [`Self::tile_event`] makes of this triple with `description`
    /// (compared in place, nothing cloned).
    pub(crate) fn shows_as(&self, description: &Option<String>, event: &Option<TileEvent>) -> bool {
        match (&self.subject, event) {
            (None, None) => true,
            (Some(subject), Some(event)) => {
                *subject == event.subject
                    && self.predicate == event.predicate
                    && self.object == event.object
                    && *description == event.description
            }
            _ => false,
        }
    }
}

/// One item of a day's schedule: a task and how long it lasts. Saved as the pair
/// `["task", minutes]`, the form saves and run summaries have always used.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct ScheduleItem {
    /// What the persona does.
    pub task: String,
    /// For how many minutes.
    pub minutes: u32,
}

impl ScheduleItem {
    /// `task` for `minutes`.
    pub fn new(task: impl Into<String>, minutes: u32) -> Self {
        Self {
            task: task.into(),
            minutes,
        }
    }
}

impl From<(String, u32)> for ScheduleItem {
    fn from((task, minutes): (String, u32)) -> Self {
        Self { task, minutes }
    }
}

impl Serialize for ScheduleItem {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        (&self.task, self.minutes).serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for ScheduleItem {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        <(String, u32)>::deserialize(deserializer).map(Self::from)
    }
}

/// A group conversation a persona left, waiting for its after-chat thoughts (SPEC §16).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct GroupAfterChat {
    /// Who else spoke in it ("Ana and Bram"), or where it was when nobody else did.
    pub partner: String,
    /// The conversation's memory object (`the group in <place>`): the thoughts rest on its
    /// latest passage.
    pub object: String,
    /// The last lines the persona heard or said in it, `(speaker, line)`, oldest first.
    pub lines: Vec<(String, String)>,
}

/// The identity stable set, hyper-parameters, plan, action and chat state of one persona.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Scratch {
    // --- identity stable set ---
    /// Full name; unique in a simulation.
    pub name: String,
    /// First name.
    pub first_name: String,
    /// Last name.
    pub last_name: String,
    /// Age in years.
    pub age: u32,
    /// Innate traits.
    pub innate: String,
    /// Learned traits and background.
    pub learned: String,
    /// What the persona is up to these days (revised each new day, SPEC §3.6).
    pub currently: String,
    /// Habits: sleep, work hours.
    pub lifestyle: String,
    /// Home address, `world:sector:arena`.
    pub living_area: String,
    /// Where the persona works (optional; used by the offline scripted backend and prompts).
    pub workplace: Option<String>,
    /// Requirements for the daily plan (revised each new day).
    pub daily_plan_req: String,

    // --- perception and memory hyper-parameters ---
    /// The persona's hyper-parameters.
    pub params: PersonaDefaults,
    /// Poignancy budget left before the next reflection.
    pub importance_trigger_curr: i32,
    /// Events and thoughts perceived since the last reflection.
    pub importance_ele_n: u32,

    // --- time and place ---
    /// The game time of the persona's last step (`None` before its first).
    pub curr_time: Option<NaiveDateTime>,
    /// The tile the persona stood on at its last step.
    pub curr_tile: TileCoord,

    // --- planning ---
    /// Today's broad goals (5–8 items on the first day).
    pub daily_req: Vec<String>,
    /// Today's schedule as `(task, minutes)`, decomposed progressively; sums to 1440.
    pub f_daily_schedule: Vec<ScheduleItem>,
    /// The undecomposed hourly schedule.
    pub f_daily_schedule_hourly_org: Vec<ScheduleItem>,

    // --- current action ---
    /// Where the action happens (`w:s:a:o` or a special address); saved as its text form.
    pub act_address: Option<ActionAddress>,
    /// When the action started.
    pub act_start_time: Option<NaiveDateTime>,
    /// Planned length in minutes.
    pub act_duration: Option<u32>,
    /// What the persona is doing.
    pub act_description: Option<String>,
    /// The action as an emoji.
    pub act_pronunciatio: Option<String>,
    /// The action as a triple.
    pub act_event: EventTriple,
    /// What the object used is doing.
    pub act_obj_description: Option<String>,
    /// The object's state as an emoji.
    pub act_obj_pronunciatio: Option<String>,
    /// The object's state as a triple.
    pub act_obj_event: EventTriple,

    // --- chat ---
    /// The partner of the current chat.
    pub chatting_with: Option<String>,
    /// The current chat's lines, `(speaker, line)`.
    pub chat: Vec<(String, String)>,
    /// Cool-down per partner, in steps, before chatting again (SPEC §3.5: 800).
    pub chatting_with_buffer: BTreeMap<String, u32>,
    /// When the current chat ends.
    pub chatting_end_time: Option<NaiveDateTime>,
    /// Whether the planning thought and memo of the current chat are stored (SPEC §3.7).
    pub chat_thoughts_done: bool,
    /// Group conversations the persona took part in and left, whose planning thought and memo
    /// its next thought stores (SPEC §16), oldest first; at most
    /// [`Scratch::MAX_GROUP_AFTER_CHATS`]. Absent from saves when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub group_after_chats: Vec<GroupAfterChat>,

    // --- lean mode ---
    /// How the persona grounded its recent actions, by the action's words (lean mode reuses
    /// them; see `LeanSettings::reuse_grounding`). Empty — and absent from saves — in faithful
    /// mode; at most [`Scratch::KNOWN_GROUNDINGS`] entries.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub known_groundings: BTreeMap<String, KnownGrounding>,
    /// The poignancy of the persona's own action event and of its object's state event, by
    /// their memory descriptions, as lean mode's `action_details` rated them with the action
    /// (see `LeanSettings::action_details`): perceiving them does not ask again. Replaced with
    /// each new grounded action; empty — and absent from saves — in faithful mode.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub own_ratings: Vec<(String, u8)>,
}

/// How a persona grounded one action: where it went, what it used, and how the action and
/// the object's state read (the four answers lean mode does not ask for again).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KnownGrounding {
    /// Where the action took the persona (an object's tile or any tile of an arena).
    pub address: ActionAddress,
    /// The action as an emoji.
    pub emoji: String,
    /// The action as a triple.
    pub event: EventTriple,
    /// The object used: its state, the state as an emoji and as a triple.
    pub object: Option<(String, String, EventTriple)>,
    /// How much the action's and its object's events matter to the persona, when lean mode's
    /// `action_details` rated them (see [`Scratch::own_ratings`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ratings: Vec<(String, u8)>,
    /// When it was last used (the oldest is forgotten first).
    pub used: NaiveDateTime,
}

impl Scratch {
    /// Most group conversations waiting for their after-chat thoughts: the oldest is let go.
    pub const MAX_GROUP_AFTER_CHATS: usize = 4;

    /// Most lines of one group conversation its after-chat thinks over (the last ones).
    pub const MAX_GROUP_AFTER_CHAT_LINES: usize = 8;

    /// Most actions whose grounding a persona keeps in lean mode (a day holds about fifty).
    pub const KNOWN_GROUNDINGS: usize = 256;

    /// Keeps how `action` was grounded, forgetting the least recently used grounding when
    /// [`Scratch::KNOWN_GROUNDINGS`] are kept already.
    pub fn remember_grounding(&mut self, action: &str, grounding: KnownGrounding) {
        if !self.known_groundings.contains_key(action)
            && self.known_groundings.len() >= Self::KNOWN_GROUNDINGS
            && let Some(oldest) = self
                .known_groundings
                .iter()
                .min_by_key(|(_, g)| g.used)
                .map(|(k, _)| k.clone())
        {
            self.known_groundings.remove(&oldest);
        }
        self.known_groundings.insert(action.to_string(), grounding);
    }

    /// The identity stable set as prompt text (Smallville's `get_str_iss`).
    pub fn identity_summary(&self) -> String {
        use std::fmt::Write as _;
        // Asked for by nearly every prompt: one buffer, written once, by pieces (the
        // formatting machinery was most of its cost).
        let fields: [(&str, &str); 5] = [
            ("\nInnate traits: ", &self.innate),
            ("\nLearned traits: ", &self.learned),
            ("\nCurrently: ", &self.currently),
            ("\nLifestyle: ", &self.lifestyle),
            ("\nDaily plan requirement: ", &self.daily_plan_req),
        ];
        let mut s = String::with_capacity(
            160 + self.name.len() + fields.iter().map(|(_, v)| v.len()).sum::<usize>(),
        );
        s.push_str("Name: ");
        s.push_str(&self.name);
        s.push_str("\nAge: ");
        // Writing into a `String` cannot fail.
        let _ = write!(s, "{}", self.age);
        for (label, value) in fields {
            s.push_str(label);
            s.push_str(value);
        }
        s.push('\n');
        if let Some(time) = self.curr_time {
            s.push_str("Current Date: ");
            push_date(&mut s, time.date());
            s.push('\n');
        }
        s
    }

    /// Total minutes of today's schedule.
    pub fn schedule_minutes(&self) -> u32 {
        self.f_daily_schedule.iter().map(|i| i.minutes).sum()
    }

    /// When the current action ends: the chat's end while chatting, else the start rounded up to
    /// the minute plus the duration (SPEC §3.4). `None` when there is no action.
    pub fn act_end_time(&self) -> Option<NaiveDateTime> {
        if self.chatting_with.is_some()
            && let Some(end) = self.chatting_end_time
        {
            return Some(end);
        }
        let start = self.act_start_time?;
        let rounded = round_up_to_minute(start);
        Some(rounded + chrono::Duration::minutes(self.act_duration.unwrap_or(0) as i64))
    }

    /// Whether the current action is over at `now` (`now ≥ end`, never exact equality; no
    /// action counts as finished).
    pub fn act_finished(&self, now: NaiveDateTime) -> bool {
        if self.act_address.is_none() {
            return true;
        }
        self.act_end_time().is_none_or(|end| now >= end)
    }

    /// Whether the persona's current action is sleep.
    pub fn is_sleeping(&self) -> bool {
        self.act_description.as_deref().is_some_and(is_sleep_text)
    }
}

/// Writes `date` as `"%A %B %d"` does (`Monday February 13`), without parsing a format.
fn push_date(s: &mut String, date: chrono::NaiveDate) {
    use chrono::Datelike as _;
    const WEEKDAYS: [&str; 7] = [
        "Monday",
        "Tuesday",
        "Wednesday",
        "Thursday",
        "Friday",
        "Saturday",
        "Sunday",
    ];
    const MONTHS: [&str; 12] = [
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ];
    let weekday = date.weekday().num_days_from_monday() as usize;
    s.push_str(WEEKDAYS.get(weekday).copied().unwrap_or_default());
    s.push(' ');
    s.push_str(
        MONTHS
            .get(date.month0() as usize)
            .copied()
            .unwrap_or_default(),
    );
    s.push(' ');
    let day = date.day();
    s.push(char::from(b'0' + (day / 10 % 10) as u8));
    s.push(char::from(b'0' + (day % 10) as u8));
}

/// Whether an activity text means sleeping.
pub fn is_sleep_text(text: &str) -> bool {
    // Asked for every persona every step: one pass over the text, no lowercased copy (the
    // words are ASCII, and no other character lowercases into an ASCII letter they use), a
    // word compared only where its first letter is (`| 0x20` lowercases an ASCII letter; the
    // only other bytes it maps onto `s`, `a` or `i` are their capitals).
    let text = text.as_bytes();
    let at = |i: usize, word: &[u8]| {
        text.get(i..i + word.len())
            .is_some_and(|w| w.eq_ignore_ascii_case(word))
    };
    text.iter().enumerate().any(|(i, &b)| match b | 0x20 {
        b's' => at(i, b"sleeping"),
        b'a' => at(i, b"asleep"),
        b'i' => at(i, b"in bed"),
        _ => false,
    })
}

/// Rounds up to the next whole minute (an exact minute stays).
pub(crate) fn round_up_to_minute(time: NaiveDateTime) -> NaiveDateTime {
    use chrono::Timelike;
    if time.second() == 0 && time.nanosecond() == 0 {
        return time;
    }
    let floored = time
        .with_second(0)
        .and_then(|t| t.with_nanosecond(0))
        .unwrap_or(time);
    floored + chrono::Duration::minutes(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::NaiveDate;

    fn at(h: u32, m: u32, s: u32) -> NaiveDateTime {
        NaiveDate::from_ymd_opt(2023, 2, 13)
            .unwrap()
            .and_hms_opt(h, m, s)
            .unwrap()
    }

    #[test]
    fn identity_summary_is_smallvilles_iss() {
        let mut s = Scratch {
            name: "Mira Okafor".into(),
            age: 34,
            innate: "curious, warm".into(),
            learned: "Mira is a baker.".into(),
            currently: "planning a market stall".into(),
            lifestyle: "early riser".into(),
            daily_plan_req: "bake bread every morning".into(),
            ..Default::default()
        };
        let without_date = "Name: Mira Okafor\nAge: 34\nInnate traits: curious, warm\n\
            Learned traits: Mira is a baker.\nCurrently: planning a market stall\n\
            Lifestyle: early riser\nDaily plan requirement: bake bread every morning\n";
        assert_eq!(s.identity_summary(), without_date);
        s.curr_time = Some(at(9, 0, 0));
        assert_eq!(
            s.identity_summary(),
            format!("{without_date}Current Date: Monday February 13\n")
        );
    }

    #[test]
    fn the_summary_date_reads_as_chrono_writes_it() {
        let mut date = chrono::NaiveDate::from_ymd_opt(2023, 1, 1).expect("a date");
        for _ in 0..800 {
            let mut s = String::new();
            push_date(&mut s, date);
            assert_eq!(s, date.format("%A %B %d").to_string());
            date = date.succ_opt().expect("a next day");
        }
    }

    #[test]
    fn action_end_rounds_start_up_and_uses_ge() {
        let mut s = Scratch {
            act_address: Some(ActionAddress::parse("w:s:a:o").unwrap()),
            act_start_time: Some(at(8, 0, 10)),
            act_duration: Some(15),
            ..Default::default()
        };
        assert_eq!(s.act_end_time(), Some(at(8, 16, 0)));
        assert!(!s.act_finished(at(8, 15, 50)));
        assert!(s.act_finished(at(8, 16, 0)));
        // A step that jumps past the end still finishes the action (the original needed equality).
        assert!(s.act_finished(at(8, 16, 10)));
        s.chatting_with = Some("Sam".into());
        s.chatting_end_time = Some(at(9, 0, 0));
        assert!(!s.act_finished(at(8, 30, 0)));
        assert!(s.act_finished(at(9, 0, 0)));
    }

    #[test]
    fn schedule_items_are_saved_as_pairs() {
        let items = vec![
            ScheduleItem::new("sleeping", 420),
            ScheduleItem::new("work (emails)", 15),
        ];
        let text = serde_json::to_string(&items).unwrap();
        assert_eq!(text, r#"[["sleeping",420],["work (emails)",15]]"#);
        let back: Vec<ScheduleItem> = serde_json::from_str(&text).unwrap();
        assert_eq!(back, items);
        for bad in [
            r#"[["sleeping"]]"#,
            r#"[["sleeping",-5]]"#,
            r#"[{"task":"x"}]"#,
        ] {
            assert!(
                serde_json::from_str::<Vec<ScheduleItem>>(bad).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn no_action_is_finished() {
        assert!(Scratch::default().act_finished(at(0, 0, 0)));
    }

    #[test]
    fn sleep_text() {
        assert!(is_sleep_text("Sleeping"));
        assert!(is_sleep_text("IN BED with a book"));
        assert!(!is_sleep_text("in the bedroom, reading"));
        assert!(!is_sleep_text("sleepwalking to the café"));
        assert!(is_sleep_text("lying in bed, asleep"));
        assert!(!is_sleep_text("making the bed"));
        // Case, place in the text, punctuation around, and first letters alone.
        assert!(is_sleep_text("ASLEEP"));
        assert!(is_sleep_text("fast asleep"));
        assert!(is_sleep_text("café, then sleeping"));
        assert!(is_sleep_text("(in bed)"));
        assert!(!is_sleep_text("sleepin"));
        assert!(!is_sleep_text("in be"));
        assert!(!is_sleep_text("SAI s a i"));
        assert!(!is_sleep_text(""));
    }

    #[test]
    fn known_groundings_keep_the_most_recently_used() {
        let at = |minute: u32| {
            chrono::NaiveDate::from_ymd_opt(2023, 2, 13)
                .and_then(|d| d.and_hms_opt(0, 0, 0))
                .map(|t| t + chrono::Duration::minutes(i64::from(minute)))
                .expect("a time")
        };
        let grounding = |minute: u32| KnownGrounding {
            address: ActionAddress::parse("w:s:a:o").expect("an address"),
            emoji: "🍳".into(),
            event: EventTriple::default(),
            object: None,
            ratings: Vec::new(),
            used: at(minute),
        };
        let mut s = Scratch::default();
        for i in 0..Scratch::KNOWN_GROUNDINGS as u32 {
            s.remember_grounding(&format!("task {i}"), grounding(i + 10));
        }
        assert_eq!(s.known_groundings.len(), Scratch::KNOWN_GROUNDINGS);
        // Task 0 was used again lately: task 1 is now the oldest, and goes first.
        s.remember_grounding("task 0", grounding(100_000));
        s.remember_grounding("one more", grounding(100_001));
        assert_eq!(s.known_groundings.len(), Scratch::KNOWN_GROUNDINGS);
        assert!(s.known_groundings.contains_key("task 0"));
        assert!(!s.known_groundings.contains_key("task 1"));
        assert!(s.known_groundings.contains_key("one more"));
        // Faithful scratch pads save without the field.
        let faithful = serde_json::to_string(&Scratch::default()).expect("serialises");
        assert!(!faithful.contains("known_groundings"));
    }
}
