//! The town script's **outings**: a dated event a persona heard of becomes a plan item on its
//! day.
//!
//! The chain is the one a model walks on a new day (SPEC §3.6, §16): the planning note reads
//! the memories retrieval listed and picks out an event announced for today ("the harvest fair
//! moved to Tuesday at the Common, at 3 pm"); the new `currently` carries it ("Today, Cy wants
//! to go to the harvest fair at the Common at 3:00 pm."); the day's requirements and hourly
//! schedule read `currently` and give the event its hours. Nothing here knows a town or a
//! fact: an announcement is any sentence of a memory that names today (its weekday, or its
//! month and day) together with an event word, and the place is whatever capitalised name
//! follows "at".

use super::offline::{hour_label, time_mentions};

/// The words that make a dated sentence an event a person could go to.
const EVENT_WORDS: &[&str] = &[
    "fair",
    "festival",
    "party",
    "market",
    "concert",
    "meeting",
    "show",
    "match",
    "game",
    "picnic",
    "wedding",
    "reading",
    "lecture",
    "sale",
    "celebration",
    "gathering",
    "ceremony",
    "exhibition",
    "play",
    "tournament",
    "race",
    "parade",
    "dance",
    "mic",
    "fete",
    "bazaar",
    "recital",
    "screening",
];

/// Words that begin the phrase naming an event ("the harvest fair", "a Valentine's Day party").
const DETERMINERS: &[&str] = &["the", "a", "an", "our", "their", "this", "his", "her"];

/// Month names, for telling a date's day from a time.
const MONTHS: &[&str] = &[
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
];

/// The hour an announced event starts when the sentence names no time: the afternoon.
const DEFAULT_HOUR: u32 = 15;

/// How many hours an outing takes in the schedule.
pub(super) const OUTING_HOURS: u32 = 2;

/// An event announced for today: what and where ("the harvest fair at the Common"), and when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Outing {
    /// The event and its place, as a plan item's object.
    pub what: String,
    /// The hour it starts (0..=23).
    pub hour: u32,
}

impl Outing {
    /// The planning note's sentence ([`Outing::from_note`] reads it back).
    pub fn note(&self) -> String {
        format!(
            "I want to go to {} at {} today.",
            self.what,
            hour_label(self.hour)
        )
    }

    /// The outing a planning note (or a status) states with [`Outing::note`]'s words.
    pub fn from_note(text: &str) -> Option<Self> {
        Self::after(text, "want to go to ", " today")
    }

    /// The outing `currently` states ("… wants to go to the fair at the Common at 3:00 pm.").
    pub fn from_status(currently: &str) -> Option<Self> {
        Self::after(currently, "wants to go to ", ".")
    }

    /// The outing the clause after `marker`, up to `end` (and a full stop), states: "the fair at
    /// the Common at 3:00 pm" → the fair at the Common, 15.
    fn after(text: &str, marker: &str, end: &str) -> Option<Self> {
        let at = text.find(marker)? + marker.len();
        let phrase = text.get(at..)?.split(end).next()?.split('.').next()?;
        let cut = phrase.rfind(" at ")?;
        let hour = time_mentions(phrase.get(cut..)?).first()?.hour;
        let what = phrase.get(..cut)?.trim();
        (!what.is_empty() && what.len() <= 120 && hour < 24).then(|| Self {
            what: what.to_string(),
            hour,
        })
    }

    /// The status sentence for today.
    pub fn status(&self, first_name: &str) -> String {
        format!(
            "Today, {first_name} wants to go to {} at {}.",
            self.what,
            hour_label(self.hour)
        )
    }

    /// Whether the outing fills the hour starting at `hour`.
    pub fn covers(&self, hour: u32) -> bool {
        (self.hour..self.hour + OUTING_HOURS).contains(&hour)
    }
}

/// The first event the memories announce for `today` ("Tuesday February 14", as the prompts
/// print a date). Plan thoughts ("This is X's plan for …") are not announcements.
pub(super) fn announced_today(memories: &[String], today: &str) -> Option<Outing> {
    let day = Today::read(today)?;
    memories
        .iter()
        .filter(|m| !m.contains("'s plan for "))
        .flat_map(|m| m.split(SENTENCE_ENDS))
        .find_map(|sentence| announcement(sentence, &day))
}

/// Whether `text` announces an event for a named day (a weekday, or a month and a day) — news
/// a person rates above routine.
pub(super) fn announces_an_event(text: &str) -> bool {
    text.split(SENTENCE_ENDS).any(|sentence| {
        let words = lower_words(sentence);
        days_named(&words).next().is_some()
            && words.iter().any(|w| EVENT_WORDS.contains(&w.as_str()))
    })
}

/// Where a memory's sentences end.
const SENTENCE_ENDS: [char; 5] = ['.', ';', '!', '?', '\n'];

/// A day as a sentence names it: a weekday ("tuesday"), or a month and a day ("february",
/// 14).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DayName<'a> {
    Weekday(&'a str),
    Date(&'a str, u32),
}

/// The days `words` (lowercase, punctuation trimmed) name, in order.
fn days_named(words: &[String]) -> impl Iterator<Item = DayName<'_>> {
    words.iter().enumerate().filter_map(|(i, w)| {
        if WEEKDAYS.contains(&w.as_str()) {
            Some(DayName::Weekday(w))
        } else if MONTHS.contains(&w.as_str()) {
            let day = words.get(i + 1).and_then(|d| day_number(d))?;
            Some(DayName::Date(w, day))
        } else {
            None
        }
    })
}

/// The weekdays' names.
const WEEKDAYS: &[&str] = &[
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
];

/// A sentence's words in lowercase, outer punctuation trimmed (an apostrophe stays).
fn lower_words(sentence: &str) -> Vec<String> {
    sentence
        .split_whitespace()
        .map(|w| {
            w.trim_matches(|c: char| !c.is_alphanumeric() && c != '\'')
                .to_ascii_lowercase()
        })
        .collect()
}

/// Today's weekday, month and day of the month, in lowercase.
struct Today {
    weekday: String,
    month: String,
    day: u32,
}

impl Today {
    fn read(today: &str) -> Option<Self> {
        let mut words = today.split_whitespace();
        let weekday = words.next()?.to_ascii_lowercase();
        let month = words.next()?.to_ascii_lowercase();
        let day = words.next()?.trim_end_matches(',').parse().ok()?;
        Some(Self {
            weekday,
            month,
            day,
        })
    }

    /// Whether `words` (lowercase, punctuation trimmed) name this day.
    fn named_in(&self, words: &[String]) -> bool {
        days_named(words).any(|named| match named {
            DayName::Weekday(weekday) => weekday == self.weekday,
            DayName::Date(month, day) => month == self.month && day == self.day,
        })
    }
}

/// "14", "14th", "1st" → the number.
fn day_number(word: &str) -> Option<u32> {
    let digits = word.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    digits.parse().ok().filter(|d| (1..=31).contains(d))
}

/// The outing one sentence announces for `day`, if it does.
fn announcement(sentence: &str, day: &Today) -> Option<Outing> {
    if sentence.len() > 600 {
        return None;
    }
    let raw: Vec<&str> = sentence.split_whitespace().collect();
    let words = lower_words(sentence);
    if !day.named_in(&words) {
        return None;
    }
    let noun = words
        .iter()
        .position(|w| EVENT_WORDS.contains(&w.as_str()))?;
    // The event's phrase: back from its noun to a determiner, at most four words.
    let start = (noun.saturating_sub(4)..noun)
        .rev()
        .find(|&i| DETERMINERS.contains(&words[i].as_str()));
    let mut what = match start {
        Some(s) => phrase(&raw[s..=noun]),
        None => format!("the {}", phrase(&raw[noun.saturating_sub(1)..=noun])),
    };
    if let Some(place) = place_after_at(&raw, &words) {
        what = format!("{what} at {place}");
    }
    Some(Outing {
        what,
        hour: start_hour(sentence),
    })
}

/// Words joined with their inner punctuation kept and the outer trimmed ("Valentine's").
fn phrase(words: &[&str]) -> String {
    words
        .iter()
        .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric() && c != '\''))
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The capitalised name after an "at" ("at the Common", "at Hobbs Cafe"), not a time.
fn place_after_at(raw: &[&str], words: &[String]) -> Option<String> {
    words.iter().enumerate().find_map(|(i, w)| {
        if w != "at" {
            return None;
        }
        let mut j = i + 1;
        let article = words.get(j).is_some_and(|w| w == "the");
        if article {
            j += 1;
        }
        let name: Vec<&str> = raw
            .get(j..)?
            .iter()
            .take_while(|w| w.chars().next().is_some_and(char::is_uppercase))
            .take(4)
            .copied()
            .collect();
        // A name ends at the first word that closes a clause ("the Common, at 3 pm").
        let ends = name
            .iter()
            .position(|w| w.ends_with([',', ';', ':']))
            .map_or(name.len(), |p| p + 1);
        let name = phrase(&name[..ends]);
        (!name.is_empty()).then(|| if article { format!("the {name}") } else { name })
    })
}

/// The hour the sentence says the event starts: its first time ("from 5 to 7 pm" is 5 pm; a
/// bare 1 to 7 is in the afternoon), else a time of day, else [`DEFAULT_HOUR`].
fn start_hour(sentence: &str) -> u32 {
    let lower = sentence.to_ascii_lowercase();
    // Numbers that are dates are no times: "14th", "February 14".
    let times: Vec<_> = time_mentions(&lower)
        .into_iter()
        .filter(|m| {
            let ordinal = lower
                .get(m.end..)
                .and_then(|rest| rest.chars().next())
                .is_some_and(|c| c.is_ascii_alphabetic());
            let after_month = lower
                .get(..m.start)
                .and_then(|before| before.split_whitespace().last())
                .is_some_and(|w| MONTHS.contains(&w.trim_matches(|c: char| !c.is_alphabetic())));
            !ordinal && !after_month
        })
        .collect();
    if let Some(first) = times.first() {
        let later_pm = times
            .iter()
            .any(|m| m.meridiem && (12..24).contains(&m.hour));
        let hour = first.hour.min(23);
        return if !first.meridiem && hour < 12 && (later_pm || (1..=7).contains(&hour)) {
            hour + 12
        } else {
            hour
        };
    }
    [
        ("morning", 10),
        ("noon", 12),
        ("afternoon", 15),
        ("evening", 18),
        ("tonight", 19),
    ]
    .iter()
    .find(|(word, _)| lower.contains(word))
    .map_or(DEFAULT_HOUR, |(_, hour)| *hour)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn find(memory: &str, today: &str) -> Option<Outing> {
        announced_today(&[memory.to_string()], today)
    }

    #[test]
    fn an_event_named_for_today_is_an_outing_with_its_place_and_hour() {
        let outing = find(
            "Ada Quill said: The harvest fair moved to Tuesday at the Common, at 3 pm.",
            "Tuesday February 14",
        )
        .expect("announced");
        assert_eq!(outing.what, "The harvest fair at the Common");
        assert_eq!(outing.hour, 15);
        let party = find(
            "Isabella Rodriguez is planning a Valentine's Day party at Hobbs Cafe on February 14th from 5 to 7 pm",
            "Tuesday February 14",
        )
        .expect("announced");
        assert_eq!(party.what, "a Valentine's Day party at Hobbs Cafe");
        assert_eq!(party.hour, 17);
    }

    #[test]
    fn other_days_plan_thoughts_and_undated_events_are_not_outings() {
        let fair = "The harvest fair moved to Saturday at the Common.";
        assert_eq!(find(fair, "Tuesday February 14"), None);
        assert!(find(fair, "Saturday February 18").is_some());
        assert_eq!(
            find(
                "This is Cy's plan for Tuesday February 14: go to the party",
                "Tuesday February 14"
            ),
            None
        );
        assert_eq!(
            find("There is a party at the pub", "Tuesday February 14"),
            None
        );
        assert_eq!(
            find("Cy is eating lunch on Tuesday", "Tuesday February 14"),
            None
        );
        assert_eq!(find("a party on February 15", "Tuesday February 14"), None);
        assert_eq!(find("anything", "not a date"), None);
    }

    #[test]
    fn the_note_and_the_status_carry_the_outing_through() {
        let outing = Outing {
            what: "the harvest fair at the Common".into(),
            hour: 15,
        };
        assert_eq!(Outing::from_note(&outing.note()), Some(outing.clone()));
        assert_eq!(
            Outing::from_status(&outing.status("Cy")),
            Some(outing.clone())
        );
        assert!(outing.covers(15) && outing.covers(16) && !outing.covers(17));
        assert_eq!(Outing::from_status("Cy wants to go to bed."), None);
    }

    #[test]
    fn dated_events_are_news() {
        assert!(announces_an_event(
            "The harvest fair moved to Tuesday at the Common."
        ));
        assert!(announces_an_event("a party at Hobbs Cafe on February 14th"));
        assert!(!announces_an_event("Cy is eating lunch on Tuesday"));
        assert!(!announces_an_event("There is a party at the pub"));
    }

    #[test]
    fn times_of_day_and_bare_hours_give_the_hour() {
        assert_eq!(start_hour("the fair on Tuesday"), DEFAULT_HOUR);
        assert_eq!(start_hour("the fair on Tuesday evening"), 18);
        assert_eq!(start_hour("the fair on Tuesday at 10 am"), 10);
        assert_eq!(start_hour("the party on Tuesday at 6"), 18);
        assert_eq!(start_hour("the market on Tuesday at 9"), 9);
    }
}
