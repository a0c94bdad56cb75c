//! Planning prompts (SPEC §3.3–§3.5): when to wake up, the day in broad strokes, the hourly
//! schedule, breaking an hour into 5-minute steps, and re-planning a window after a chat or a
//! wait was inserted into it.

use std::ops::Range;

use super::text::{
    MAX_SCAN_CHARS, clean_item, duration_items, first_hour, fit_durations, list_items, parse_clock,
    strip_list_marker, strip_name_prefix, strip_prefix_ci, truncate_chars,
};
use super::{clock_text, hour_text, numbered_list, readable_place, schedule_lines};
use crate::llm::ChatRequest;
use crate::prompt::{
    Garble, ItemRules, ParseError, Prompt, PromptLibrary, Repeats, TemplateError, garbled_items,
};

/// How a day's plan is judged for garbling: distinct items, in time order.
pub(crate) const PLAN_RULES: ItemRules = ItemRules {
    repeats: Repeats::Distinct,
    in_time_order: true,
};

/// Whether a decomposition's steps are garbled: their words, and one step over and over.
fn garbled_steps(steps: &[(String, u32)]) -> Option<Garble> {
    let names: Vec<&str> = steps.iter().map(|(step, _)| step.as_str()).collect();
    garbled_items(
        &names,
        ItemRules {
            repeats: Repeats::Lenient,
            in_time_order: false,
        },
    )
}

/// The place shown for a missing workplace.
fn workplace_text(workplace: Option<&str>) -> String {
    workplace
        .map(readable_place)
        .filter(|w| !w.is_empty())
        .unwrap_or_else(|| "none".to_string())
}

/// Whether a plan item restates the wake-up item the caller prepends itself.
fn is_wake_up_item(item: &str) -> bool {
    let lower = item.to_ascii_lowercase();
    lower.starts_with("wake up")
        || lower.starts_with("wakes up")
        || lower.contains("morning routine")
}

// ---------------------------------------------------------------------------------------------

/// "At what hour does the persona wake up?" (SPEC §3.3). Output: an hour 0..=23.
///
/// Accepts "6", "6am", "6:00", "7 pm" (→ 19), "0630". Fail-safe: [`WakeUpHour::fail_safe_hour`]
/// (`AgentSettings::wake_up_fail_safe`, SPEC: 8).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WakeUpHour {
    /// The identity summary (`Scratch::identity_summary`).
    pub identity: String,
    /// The lifestyle line (sleep and work habits).
    pub lifestyle: String,
    /// The persona's first name.
    pub first_name: String,
    /// The hour used when the model gives no usable answer (clamped to 23).
    pub fail_safe_hour: u32,
}

impl Prompt for WakeUpHour {
    type Output = u32;

    fn kind(&self) -> &'static str {
        "wake_up_hour"
    }

    fn request(&self, library: &PromptLibrary) -> Result<ChatRequest, TemplateError> {
        let prompt = library.fill(
            self.kind(),
            &[
                self.identity.as_str(),
                self.lifestyle.as_str(),
                self.first_name.as_str(),
            ],
        )?;
        // Room for a short lead-in before the hour: a tiny model decoded under the local
        // backend's `wake_up_hour` grammar reads the hour off the lifestyle line better when
        // it may say a few words first (the grammar keeps digits out of them, so the first
        // number is the hour, and bounds the answer's length).
        // About the lifestyle line: the local default reads the hour off it (`llm::judge`).
        Ok(ChatRequest::new(self.kind(), prompt)
            .with_max_tokens(96)
            .with_temperature(0.0)
            .with_about(&self.lifestyle))
    }

    fn parse(&self, cleaned: &str) -> Result<u32, ParseError> {
        first_hour(cleaned)
    }

    fn fail_safe(&self) -> u32 {
        self.fail_safe_hour.min(23)
    }
}

// ---------------------------------------------------------------------------------------------

/// The day in broad strokes (SPEC §3.3, first day). Output: 5–8 items with times, **without** the
/// wake-up item — the caller prepends `wake_up_item`. An answer that
/// restates the wake-up item has it dropped before counting.
///
/// Fail-safe: a generic 7-item day around the workplace (when there is one).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DailyPlan {
    /// The identity summary.
    pub identity: String,
    /// The persona's first name.
    pub first_name: String,
    /// Today's date as text ("Monday February 13").
    pub date_text: String,
    /// The wake-up hour (0..=23).
    pub wake_up_hour: u32,
    /// Home address (`world:sector:arena`).
    pub home: String,
    /// Workplace address, if any.
    pub workplace: Option<String>,
}

impl DailyPlan {
    /// Fewest items accepted.
    pub const MIN_ITEMS: usize = 5;
    /// Most items accepted.
    pub const MAX_ITEMS: usize = 8;
}

impl Prompt for DailyPlan {
    type Output = Vec<String>;

    fn kind(&self) -> &'static str {
        "daily_plan"
    }

    fn request(&self, library: &PromptLibrary) -> Result<ChatRequest, TemplateError> {
        let inputs = [
            self.identity.clone(),
            self.first_name.clone(),
            self.date_text.clone(),
            hour_text(self.wake_up_hour.min(23)),
            readable_place(&self.home),
            workplace_text(self.workplace.as_deref()),
        ];
        let prompt = library.fill(self.kind(), &inputs)?;
        Ok(ChatRequest::new(self.kind(), prompt)
            .with_max_tokens(400)
            .with_temperature(0.7))
    }

    fn parse(&self, cleaned: &str) -> Result<Vec<String>, ParseError> {
        let items: Vec<String> = list_items(cleaned)
            .into_iter()
            .filter(|item| !is_wake_up_item(item))
            .map(|item| truncate_chars(&item, 150).to_string())
            .collect();
        if (Self::MIN_ITEMS..=Self::MAX_ITEMS).contains(&items.len()) {
            Ok(items)
        } else {
            Err(ParseError::new(format!(
                "expected {} to {} plan items, got {}",
                Self::MIN_ITEMS,
                Self::MAX_ITEMS,
                items.len()
            )))
        }
    }

    fn fail_safe(&self) -> Vec<String> {
        let wake = self.wake_up_hour.min(22);
        let work = match self
            .workplace
            .as_deref()
            .map(readable_place)
            .filter(|w| !w.is_empty())
        {
            Some(place) => format!("work at {place}"),
            None => "take care of the day's tasks".to_string(),
        };
        vec![
            format!("eat breakfast at {}", hour_text(wake + 1)),
            format!("{work} in the morning"),
            "have lunch at 12:00 pm".to_string(),
            format!("{work} in the afternoon"),
            "have dinner at 6:00 pm".to_string(),
            "relax and read from 7:00 pm to 9:00 pm".to_string(),
            "go to bed at 11:00 pm".to_string(),
        ]
    }

    fn garbled(&self, output: &Vec<String>) -> Option<Garble> {
        garbled_items(output, PLAN_RULES)
    }
}

// ---------------------------------------------------------------------------------------------

/// The hourly schedule (SPEC §3.3). Output: one activity for each hour from the wake-up hour to
/// 23 inclusive (`24 − wake_up_hour` items; hours before waking are "sleeping" and are the
/// caller's). The caller merges duplicates, converts to minutes, and regenerates while there
/// are fewer than 5 distinct activities.
///
/// The answer is read as `"<hour>: <activity>"` lines; hours without am/pm that are not in the
/// requested range but whose afternoon counterpart is are read as afternoon hours. When at
/// least half the hours are given, missing ones repeat the previous hour's activity. An answer
/// with no hour labels is accepted only when it has exactly one line per hour.
///
/// Fail-safe: a generic day — morning routine, breakfast, work at the workplace (when given),
/// lunch, errands, dinner, an evening at home, sleep.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HourlySchedule {
    /// The identity summary.
    pub identity: String,
    /// The persona's first name.
    pub first_name: String,
    /// Today's date as text.
    pub date_text: String,
    /// Home address (`world:sector:arena`).
    pub home: String,
    /// Workplace address, if any.
    pub workplace: Option<String>,
    /// Today's plan in broad strokes (`Scratch::daily_req`).
    pub daily_plan: Vec<String>,
    /// The wake-up hour: the first hour to fill.
    pub wake_up_hour: u32,
}

impl HourlySchedule {
    /// The hours to fill: the wake-up hour (at most 23) to 23.
    pub fn hours(&self) -> Range<u32> {
        self.wake_up_hour.min(23)..24
    }

    fn generic_activity(&self, hour: u32) -> String {
        let wake = self.wake_up_hour.min(23);
        let work = match self
            .workplace
            .as_deref()
            .map(readable_place)
            .filter(|w| !w.is_empty())
        {
            Some(place) => format!("working at {place}"),
            None => "working on the day's tasks".to_string(),
        };
        match hour {
            h if h < wake || h >= 23 => "sleeping".to_string(),
            h if h == wake => "waking up and completing the morning routine".to_string(),
            h if h == wake + 1 => "having breakfast at home".to_string(),
            12 => "having lunch".to_string(),
            17 => "running errands in town".to_string(),
            18 => "having dinner at home".to_string(),
            22 => "getting ready for bed".to_string(),
            h if h < 17 => work,
            _ => "relaxing at home".to_string(),
        }
    }
}

impl Prompt for HourlySchedule {
    type Output = Vec<String>;

    fn kind(&self) -> &'static str {
        "hourly_schedule"
    }

    fn request(&self, library: &PromptLibrary) -> Result<ChatRequest, TemplateError> {
        let labels: Vec<String> = self.hours().map(|h| format!("{}:", hour_text(h))).collect();
        let inputs = [
            self.identity.clone(),
            self.first_name.clone(),
            self.date_text.clone(),
            readable_place(&self.home),
            workplace_text(self.workplace.as_deref()),
            numbered_list(&self.daily_plan),
            labels.join("\n"),
            labels.len().to_string(),
        ];
        let prompt = library.fill(self.kind(), &inputs)?;
        Ok(ChatRequest::new(self.kind(), prompt)
            .with_max_tokens(800)
            .with_temperature(0.7))
    }

    fn parse(&self, cleaned: &str) -> Result<Vec<String>, ParseError> {
        let hours = self.hours();
        let wanted = hours.len();
        let mut by_hour: [Option<String>; 24] = Default::default();
        let mut unlabelled = Vec::new();
        let names = [self.first_name.as_str()];
        for line in truncate_chars(cleaned, MAX_SCAN_CHARS).lines() {
            let line = line.trim();
            let line = strip_list_marker(line)
                .unwrap_or(line)
                .trim_start_matches(['*', '#', ' ']);
            if line.is_empty() {
                continue;
            }
            let Some(clock) = parse_clock(line) else {
                unlabelled.push(clean_item(line));
                continue;
            };
            let mut rest = &line[clock.len..];
            // A range "7:00 am - 8:00 am: …" names its first hour.
            let trimmed = rest.trim_start();
            if let Some(after) = trimmed
                .strip_prefix(['-', '–', '~'])
                .or_else(|| strip_prefix_ci(trimmed, "to "))
                .map(str::trim_start)
                && let Some(end) = parse_clock(after)
            {
                rest = &after[end.len..];
            }
            let activity = rest.trim_start_matches(|c: char| {
                c.is_whitespace()
                    || matches!(c, ':' | '-' | '–' | '—' | '|' | ')' | '>' | '~' | '=' | '*')
            });
            let activity = clean_item(strip_name_prefix(activity, &names));
            let activity = truncate_chars(&activity, 120).to_string();
            if activity.is_empty() {
                continue;
            }
            let mut hour = clock.hour;
            if !clock.meridiem
                && hour < 12
                && !hours.contains(&hour)
                && hours.contains(&(hour + 12))
            {
                hour += 12;
            }
            if hours.contains(&hour)
                && let Some(slot) = by_hour.get_mut(hour as usize)
                && slot.is_none()
            {
                *slot = Some(activity);
            }
        }
        let labelled = hours
            .clone()
            .filter(|h| by_hour.get(*h as usize).is_some_and(Option::is_some))
            .count();
        if labelled == 0 {
            unlabelled.retain(|l| !l.is_empty());
            if unlabelled.len() == wanted {
                return Ok(unlabelled
                    .into_iter()
                    .map(|l| truncate_chars(&l, 120).to_string())
                    .collect());
            }
            return Err(ParseError::new(
                "no \"<hour>: <activity>\" lines in the answer",
            ));
        }
        if labelled * 2 < wanted {
            return Err(ParseError::new(format!(
                "only {labelled} of {wanted} hours were given"
            )));
        }
        // Leading gaps take the first given activity; later gaps repeat the previous one.
        let mut previous = hours
            .clone()
            .find_map(|h| by_hour.get(h as usize).cloned().flatten())
            .ok_or_else(|| ParseError::new("no hours given"))?;
        let mut schedule = Vec::with_capacity(wanted);
        for h in hours {
            if let Some(activity) = by_hour.get(h as usize).cloned().flatten() {
                previous = activity;
            }
            schedule.push(previous.clone());
        }
        Ok(schedule)
    }

    fn fail_safe(&self) -> Vec<String> {
        self.hours().map(|h| self.generic_activity(h)).collect()
    }

    fn garbled(&self, output: &Vec<String>) -> Option<Garble> {
        // An hour's activity repeats by nature (a morning of work); the hours are labelled,
        // so their order is the parser's.
        garbled_items(output, ItemRules::default())
    }
}

// ---------------------------------------------------------------------------------------------

/// Breaks one schedule block into steps (SPEC §3.4). Output: `(step, minutes)` items summing to
/// exactly [`TaskDecomposition::duration`], every step a multiple of 5 minutes (the last one
/// absorbs the remainder when the block itself is not a multiple of 5).
///
/// Answers whose durations are slightly off are repaired deterministically (see the module
/// docs of `text`): rounded to 5 minutes, scaled when far off, then the tail trimmed or the
/// last step lengthened. Callers store steps as
/// `subtask_description``(task, step)`.
///
/// Fail-safe: the block itself as a single step.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskDecomposition {
    /// The identity summary.
    pub identity: String,
    /// The persona's first name (stripped from the start of steps).
    pub first_name: String,
    /// Today's date as text.
    pub date_text: String,
    /// Today's schedule from midnight, for context (items within two hours are shown).
    pub schedule: Vec<(String, u32)>,
    /// The block to break down.
    pub task: String,
    /// When the block starts, in minutes since midnight.
    pub start_minute: u32,
    /// The block's length in minutes.
    pub duration: u32,
}

impl Prompt for TaskDecomposition {
    type Output = Vec<(String, u32)>;

    fn kind(&self) -> &'static str {
        "task_decomposition"
    }

    fn request(&self, library: &PromptLibrary) -> Result<ChatRequest, TemplateError> {
        let end = self.start_minute.saturating_add(self.duration);
        let context = schedule_lines(
            &self.schedule,
            0,
            self.start_minute.saturating_sub(120),
            end.saturating_add(120),
        );
        let inputs = [
            self.identity.clone(),
            self.first_name.clone(),
            self.date_text.clone(),
            context,
            self.task.clone(),
            clock_text(self.start_minute),
            clock_text(end),
            self.duration.to_string(),
        ];
        let prompt = library.fill(self.kind(), &inputs)?;
        Ok(ChatRequest::new(self.kind(), prompt)
            .with_max_tokens(700)
            .with_temperature(0.5))
    }

    fn parse(&self, cleaned: &str) -> Result<Vec<(String, u32)>, ParseError> {
        if self.duration == 0 {
            return Err(ParseError::new("a zero-minute block has no steps"));
        }
        let steps = duration_items(cleaned, &[self.first_name.as_str()]);
        if steps.is_empty() {
            return Err(ParseError::new(
                "no \"step (duration in minutes: X)\" lines in the answer",
            ));
        }
        fit_durations(steps, self.duration)
            .ok_or_else(|| ParseError::new("no step has any minutes"))
    }

    fn fail_safe(&self) -> Vec<(String, u32)> {
        vec![(self.task.clone(), self.duration)]
    }

    fn garbled(&self, output: &Vec<(String, u32)>) -> Option<Garble> {
        garbled_steps(output)
    }
}

// ---------------------------------------------------------------------------------------------

/// The part of a `(task, minutes)` timeline between minute `from` and `to` (relative to its
/// start), items cut at the edges, empty pieces dropped.
fn slice_timeline(items: &[(String, u32)], from: u32, to: u32) -> Vec<(String, u32)> {
    let mut out = Vec::new();
    let mut t: u32 = 0;
    for (task, minutes) in items {
        let end = t.saturating_add(*minutes);
        let (a, b) = (t.max(from), end.min(to));
        if b > a {
            out.push((task.clone(), b - a));
        }
        t = end;
    }
    out
}

/// Inserts an action into a window deterministically: the window's items up to `offset`
/// minutes, then `inserted` for `duration` minutes, then what remains of the original plan
/// after the inserted action ends (the overlapped time is cut). The result sums to the same
/// total as `items`; `offset` and `duration` are clamped to the window.
pub fn insert_into_window(
    items: &[(String, u32)],
    offset: u32,
    inserted: &str,
    duration: u32,
) -> Vec<(String, u32)> {
    let total: u32 = items
        .iter()
        .fold(0u32, |acc, (_, m)| acc.saturating_add(*m));
    let offset = offset.min(total);
    let duration = duration.min(total - offset);
    let mut out = slice_timeline(items, 0, offset);
    if duration > 0 {
        out.push((inserted.to_string(), duration));
    }
    out.extend(slice_timeline(items, offset + duration, total));
    out
}

/// Re-plans a window after an action (a chat, a wait) was inserted into it (SPEC §3.5).
///
/// The window is `items`, starting at [`NewDecompositionSchedule::window_start_minute`]. The
/// part before the insertion and the inserted action itself are fixed; the model plans only
/// the rest of the window, and its steps are fitted to exactly the minutes left. Output: the
/// whole new window, summing to the same total as `items`. When nothing is left after the
/// inserted action, any answer yields the fixed part.
///
/// Fail-safe: [`insert_into_window`] — the original plan with the overlapped time cut.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NewDecompositionSchedule {
    /// The persona's first name.
    pub first_name: String,
    /// Today's date as text.
    pub date_text: String,
    /// When the window starts, in minutes since midnight.
    pub window_start_minute: u32,
    /// The window's original `(task, minutes)` items.
    pub items: Vec<(String, u32)>,
    /// The inserted action ("chatting with Sam about the open mic").
    pub inserted: String,
    /// Where the inserted action starts, in minutes from the window's start.
    pub insert_offset: u32,
    /// The inserted action's length in minutes.
    pub inserted_duration: u32,
}

impl NewDecompositionSchedule {
    /// The window's total minutes.
    pub fn total(&self) -> u32 {
        self.items
            .iter()
            .fold(0u32, |acc, (_, m)| acc.saturating_add(*m))
    }

    /// `(offset, duration, minutes left after the inserted action)`, clamped to the window.
    fn layout(&self) -> (u32, u32, u32) {
        let total = self.total();
        let offset = self.insert_offset.min(total);
        let duration = self.inserted_duration.min(total - offset);
        (offset, duration, total - offset - duration)
    }

    /// The fixed part: what happened before the insertion, then the inserted action.
    fn fixed_part(&self) -> Vec<(String, u32)> {
        let (offset, duration, _) = self.layout();
        let mut fixed = slice_timeline(&self.items, 0, offset);
        if duration > 0 {
            fixed.push((self.inserted.clone(), duration));
        }
        fixed
    }
}

impl Prompt for NewDecompositionSchedule {
    type Output = Vec<(String, u32)>;

    fn kind(&self) -> &'static str {
        "new_decomposition_schedule"
    }

    fn request(&self, library: &PromptLibrary) -> Result<ChatRequest, TemplateError> {
        let (offset, duration, left) = self.layout();
        let start = self.window_start_minute;
        let rest_start = offset + duration;
        let next_planned = slice_timeline(&self.items, rest_start, self.total())
            .into_iter()
            .next()
            .map(|(task, _)| task)
            .unwrap_or_else(|| self.inserted.clone());
        let inputs = [
            self.first_name.clone(),
            self.date_text.clone(),
            schedule_lines(&self.items, start, 0, u32::MAX),
            schedule_lines(&self.fixed_part(), start, 0, u32::MAX),
            self.inserted.clone(),
            duration.to_string(),
            clock_text(start.saturating_add(rest_start)),
            clock_text(start.saturating_add(self.total())),
            left.to_string(),
            next_planned,
        ];
        let prompt = library.fill(self.kind(), &inputs)?;
        Ok(ChatRequest::new(self.kind(), prompt)
            .with_max_tokens(500)
            .with_temperature(0.5))
    }

    fn parse(&self, cleaned: &str) -> Result<Vec<(String, u32)>, ParseError> {
        let (_, _, left) = self.layout();
        let mut schedule = self.fixed_part();
        if left == 0 {
            return Ok(schedule);
        }
        let steps = duration_items(cleaned, &[self.first_name.as_str()]);
        if steps.is_empty() {
            return Err(ParseError::new(
                "no \"step (duration in minutes: X)\" lines in the answer",
            ));
        }
        let rest =
            fit_durations(steps, left).ok_or_else(|| ParseError::new("no step has any minutes"))?;
        schedule.extend(rest);
        Ok(schedule)
    }

    fn fail_safe(&self) -> Vec<(String, u32)> {
        insert_into_window(
            &self.items,
            self.insert_offset,
            &self.inserted,
            self.inserted_duration,
        )
    }

    fn garbled(&self, output: &Vec<(String, u32)>) -> Option<Garble> {
        // Only the model's steps: the fixed part was accepted before.
        garbled_steps(output.get(self.fixed_part().len()..).unwrap_or_default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn steps(v: &[(&str, u32)]) -> Vec<(String, u32)> {
        v.iter().map(|(t, m)| (t.to_string(), *m)).collect()
    }

    #[test]
    fn wake_up_hour_parses_and_falls_back() {
        let p = WakeUpHour {
            fail_safe_hour: 8,
            ..Default::default()
        };
        assert_eq!(p.parse("6"), Ok(6));
        assert_eq!(p.parse("6am"), Ok(6));
        assert_eq!(p.parse("Answer: 6:00"), Ok(6));
        assert_eq!(p.parse("7 pm"), Ok(19));
        assert!(p.parse("25").is_err());
        assert!(p.parse("early").is_err());
        assert_eq!(p.fail_safe(), 8);
        assert_eq!(
            WakeUpHour {
                fail_safe_hour: 99,
                ..Default::default()
            }
            .fail_safe(),
            23
        );
    }

    #[test]
    fn daily_plan_counts_items_without_the_wake_up() {
        let p = DailyPlan {
            wake_up_hour: 6,
            ..Default::default()
        };
        let answer = "1) wake up and complete the morning routine at 6:00 am\n2) eat breakfast at 7:00 am\n\
                      3) open the cafe at 8:00 am\n4) have lunch at 12:00 pm\n5) buy groceries at 4:00 pm\n\
                      6) cook dinner at 6:00 pm\n7) go to bed at 10:00 pm";
        let items = p.parse(answer).unwrap();
        assert_eq!(items.len(), 6);
        assert_eq!(items[0], "eat breakfast at 7:00 am");
        assert!(p.parse("1) eat\n2) sleep").is_err());
        assert!(
            p.parse(
                &(1..=9)
                    .map(|i| format!("{i}) item {i}"))
                    .collect::<Vec<_>>()
                    .join("\n")
            )
            .is_err()
        );
        let fs = p.fail_safe();
        assert_eq!(fs.len(), 7);
        assert_eq!(fs[0], "eat breakfast at 7:00 am");
    }

    #[test]
    fn a_garbled_plan_parses_but_is_garbled() {
        let p = DailyPlan {
            wake_up_hour: 6,
            ..Default::default()
        };
        // What SmolLM2-135M wrote: parses as five items, means nothing.
        let observed = "1) ulcis, iaceo, iaceo, iaceo at 6:00 pm\n2) dinner at 2:30 pm\n\
                        3) dinner at 2:30 pm\n4) dinner at 2:30 pm\n5) dinner at 2:30 pm";
        let items = p.parse(observed).expect("it has the shape of a plan");
        assert!(p.garbled(&items).is_some());
        let five_dinners = p
            .parse(&"1) dinner at 2:30 pm\n".repeat(5))
            .expect("five items");
        assert!(p.garbled(&five_dinners).is_some());
        // A real plan and the fail-safe pass.
        let answer = "1) eat breakfast at 7:00 am\n2) open the cafe at 8:00 am\n\
                      3) have lunch at 12:00 pm\n4) buy groceries at 4:00 pm\n\
                      5) cook dinner at 6:00 pm\n6) go to bed at 10:00 pm";
        assert_eq!(p.garbled(&p.parse(answer).expect("a plan")), None);
        assert_eq!(p.garbled(&p.fail_safe()), None);
        let schedule = HourlySchedule {
            wake_up_hour: 6,
            workplace: Some("W:Riverside Cafe:cafe".into()),
            ..Default::default()
        };
        assert_eq!(schedule.garbled(&schedule.fail_safe()), None);
    }

    #[test]
    fn hourly_schedule_reads_labels_and_fills_gaps() {
        let p = HourlySchedule {
            wake_up_hour: 20,
            first_name: "Mira".into(),
            ..Default::default()
        };
        let answer = "Here you go:\n8:00 pm: Mira is reading at home\n9:00 pm - 10:00 pm: watching TV\n11:00 pm: sleeping";
        assert_eq!(
            p.parse(answer).unwrap(),
            vec!["reading at home", "watching TV", "watching TV", "sleeping"]
        );
        // "9:00" without am/pm is read as 9 pm, because 9 am is not requested.
        assert_eq!(
            p.parse("20:00 reading\n9:00: tv\n22:00: bed\n23:00: sleeping")
                .unwrap()[1],
            "tv"
        );
        // Too few labelled hours.
        assert!(p.parse("8:00 pm: reading").is_err());
        // Unlabelled lines are accepted only when there is exactly one per hour.
        assert_eq!(p.parse("a\nb\nc\nd").unwrap(), vec!["a", "b", "c", "d"]);
        assert!(p.parse("a\nb\nc").is_err());
        let fs = HourlySchedule {
            wake_up_hour: 6,
            workplace: Some("W:Riverside Cafe:cafe".into()),
            ..Default::default()
        }
        .fail_safe();
        assert_eq!(fs.len(), 18);
        assert_eq!(fs[0], "waking up and completing the morning routine");
        assert_eq!(fs[3], "working at Riverside Cafe, cafe");
        assert_eq!(fs[17], "sleeping");
        let distinct: std::collections::BTreeSet<_> = fs.iter().collect();
        assert!(distinct.len() >= 5);
    }

    #[test]
    fn decomposition_sums_to_the_block() {
        let p = TaskDecomposition {
            task: "having breakfast".into(),
            duration: 60,
            first_name: "Mira".into(),
            ..Default::default()
        };
        let answer = "1) Mira is cooking eggs (duration in minutes: 15, minutes left: 45)\n\
                      2) eating (duration in minutes: 30, minutes left: 15)\n\
                      3) washing up (duration in minutes: 20, minutes left: 0)";
        assert_eq!(
            p.parse(answer).unwrap(),
            steps(&[("cooking eggs", 15), ("eating", 30), ("washing up", 15)])
        );
        assert!(p.parse("I am not sure").is_err());
        assert_eq!(p.fail_safe(), steps(&[("having breakfast", 60)]));
        let zero = TaskDecomposition { duration: 0, ..p };
        assert!(zero.parse(answer).is_err());
    }

    #[test]
    fn insertion_is_deterministic_and_sums() {
        let items = steps(&[("a", 30), ("b", 30), ("c", 60)]);
        assert_eq!(
            insert_into_window(&items, 20, "chat", 25),
            steps(&[("a", 20), ("chat", 25), ("b", 15), ("c", 60)])
        );
        assert_eq!(insert_into_window(&items, 200, "chat", 25), items);
        assert_eq!(
            insert_into_window(&items, 100, "chat", 60),
            steps(&[("a", 30), ("b", 30), ("c", 40), ("chat", 20)])
        );
    }

    #[test]
    fn new_decomposition_keeps_the_fixed_part() {
        let p = NewDecompositionSchedule {
            items: steps(&[("working", 60)]),
            inserted: "chatting with Sam".into(),
            insert_offset: 10,
            inserted_duration: 20,
            ..Default::default()
        };
        let answer = "1) getting back to work (duration in minutes: 10)\n2) working (duration in minutes: 25)";
        assert_eq!(
            p.parse(answer).unwrap(),
            steps(&[
                ("working", 10),
                ("chatting with Sam", 20),
                ("getting back to work", 10),
                ("working", 20)
            ])
        );
        assert_eq!(
            p.fail_safe(),
            steps(&[("working", 10), ("chatting with Sam", 20), ("working", 30)])
        );
        let full = NewDecompositionSchedule {
            inserted_duration: 500,
            ..p
        };
        assert_eq!(
            full.parse("junk").unwrap(),
            steps(&[("working", 10), ("chatting with Sam", 50)])
        );
    }
}
