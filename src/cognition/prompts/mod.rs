//! Every question the Smallville cognitive loop asks a model, as a typed [`Prompt`].
//!
//! Each type here holds the plain, owned inputs of one prompt (strings, numbers, lists — never
//! ECS types, so a prompt moves into an async task as it is), names its template in
//! `prompts/v1/<kind>.txt`, fills it, parses and validates the cleaned answer, and knows its
//! fail-safe (SPEC §3, §4, §5). [`run_prompt`](crate::prompt::run_prompt) drives them.
//!
//! The prompts follow the loop:
//! - [`plan`]: the day — [`WakeUpHour`], [`DailyPlan`], [`HourlySchedule`],
//!   [`TaskDecomposition`], and [`NewDecompositionSchedule`] after a chat or a wait is inserted.
//! - [`action`]: grounding the next action — [`ActionSector`], [`ActionArena`],
//!   [`ActionObject`], [`ActionEmoji`], [`ActionEventTriple`], [`ObjectDescription`],
//!   [`ObjectEmoji`], [`ObjectEventTriple`] — or, in lean mode, [`ActionDetails`] for all the
//!   details at once.
//! - [`perceive`]: how much a memory matters — [`EventPoignancy`], [`ChatPoignancy`],
//!   [`ThoughtPoignancy`].
//! - [`converse`]: reacting and talking — [`DecideToTalk`], [`DecideToReact`],
//!   [`RelationshipSummary`], [`NextUtterance`], [`ConversationSummary`],
//!   [`PlanningThoughtAfterChat`], [`MemoAfterChat`] (or both at once in lean mode,
//!   [`AfterChat`]).
//! - [`reflect`]: [`FocalPoints`] and [`InsightsWithEvidence`].
//! - [`identity`]: the new-day revision — [`ReviseIdentityPlanNote`],
//!   [`ReviseIdentityFeelings`], [`ReviseIdentityCurrently`], [`ReviseIdentityDailyReq`] — and
//!   [`WhisperThought`].
//!
//! Parsers are total: any string gives `Ok` or `Err`, never a panic, and an `Ok` value always
//! satisfies the prompt's invariants (a decomposition sums to its block, a poignancy is in
//! 1..=10, a choice is one of the options). Where a small, deterministic repair makes a nearly
//! right answer usable (durations off by a few minutes), the parser repairs instead of
//! rejecting, so small models cost fewer retries.
//!
//! The helpers below (`clock_text`, `readable_place`, …) render inputs the same way in
//! every template; the offline town script (`llm::offline`) relies on those lines.
//!
//! [`Prompt`]: crate::prompt::Prompt

use std::fmt::Write as _;

pub mod action;
pub mod converse;
pub mod identity;
pub mod perceive;
pub mod plan;
pub mod reflect;
mod text;

pub use action::{
    ActionArena, ActionDetails, ActionDetailsAnswer, ActionEmoji, ActionEventTriple, ActionObject,
    ActionPlace, ActionSector, ObjectDescription, ObjectDetails, ObjectEmoji, ObjectEventTriple,
    PlaceChoice, UsedObject,
};
pub use converse::{
    AfterChat, AfterChatThoughts, ConversationSummary, DecideToReact, DecideToTalk, MemoAfterChat,
    NextUtterance, PlanningThoughtAfterChat, ReactChoice, RelationshipSummary, Utterance,
};
pub use identity::{
    ReviseIdentityCurrently, ReviseIdentityDailyReq, ReviseIdentityFeelings,
    ReviseIdentityPlanNote, WhisperThought,
};
pub use perceive::{
    ChatPoignancy, EVENT_POIGNANCY_FAIL_SAFE, EventPoignancies, EventPoignancy, ThoughtPoignancy,
};
pub use plan::{
    DailyPlan, HourlySchedule, NewDecompositionSchedule, TaskDecomposition, WakeUpHour,
    insert_into_window,
};
pub use reflect::{FocalPoints, Insight, InsightsWithEvidence};

pub(crate) use crate::clock::clock_text;
pub use crate::clock::{MINUTES_PER_DAY, hour_text};

/// The first item of every daily plan (SPEC §3.3): "wake up and complete the morning routine
/// at 6:00 am".
pub(crate) fn wake_up_item(hour: u32) -> String {
    format!(
        "wake up and complete the morning routine at {}",
        hour_text(hour)
    )
}

/// How a decomposed step is stored in the schedule: `"{task} ({subtask})"`, so that grounding
/// prompts see both the hourly activity and the step.
pub(crate) fn subtask_description(task: &str, subtask: &str) -> String {
    format!("{task} ({subtask})")
}

/// An address as prompts show a place: the world is dropped and the rest joined, so
/// `"Willowbrook:Riverside Cafe:cafe"` becomes `"Riverside Cafe, cafe"`. Text without `:` is
/// returned trimmed.
pub(crate) fn readable_place(address: &str) -> String {
    let parts: Vec<&str> = address
        .split(':')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect();
    match parts.as_slice() {
        [] => String::new(),
        [only] => (*only).to_string(),
        [_world, rest @ ..] => rest.join(", "),
    }
}

/// Items as numbered lines (`"1. a\n2. b"`), or `"(none)"` for an empty list.
pub(crate) fn numbered_list<S: AsRef<str>>(items: &[S]) -> String {
    if items.is_empty() {
        return "(none)".to_string();
    }
    // One buffer at its final size (the numbers' digits counted generously).
    let len: usize = items.iter().map(|item| item.as_ref().len() + 8).sum();
    let mut out = String::with_capacity(len);
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        // Writing to a `String` cannot fail.
        let _ = write!(out, "{}. {}", i + 1, item.as_ref());
    }
    out
}

/// A conversation as `"Name: line"` lines, or `"(nothing said yet)"` when empty.
pub fn transcript(lines: &[(String, String)]) -> String {
    if lines.is_empty() {
        return "(nothing said yet)".to_string();
    }
    let len: usize = lines
        .iter()
        .map(|(who, line)| who.len() + line.len() + 3)
        .sum();
    let mut out = String::with_capacity(len);
    for (i, (who, line)) in lines.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(who);
        out.push_str(": ");
        out.push_str(line);
    }
    out
}

/// A `(task, minutes)` schedule as `"<start> ~ <end>: task"` lines, starting at
/// `start_minute`. Only items overlapping `[from, to)` are shown; `"(none)"` when none do.
pub(crate) fn schedule_lines(
    items: &[(String, u32)],
    start_minute: u32,
    from: u32,
    to: u32,
) -> String {
    let mut lines = Vec::new();
    let mut t = start_minute;
    for (task, minutes) in items {
        let end = t.saturating_add(*minutes);
        if *minutes > 0 && end > from && t < to {
            lines.push(format!("{} ~ {}: {}", clock_text(t), clock_text(end), task));
        }
        t = end;
    }
    if lines.is_empty() {
        "(none)".to_string()
    } else {
        lines.join("\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_texts() {
        assert_eq!(clock_text(0), "12:00 am");
        assert_eq!(clock_text(390), "6:30 am");
        assert_eq!(clock_text(720), "12:00 pm");
        assert_eq!(clock_text(780), "1:00 pm");
        assert_eq!(clock_text(1439), "11:59 pm");
        assert_eq!(clock_text(1440), "12:00 am");
        assert_eq!(hour_text(23), "11:00 pm");
        assert_eq!(
            wake_up_item(6),
            "wake up and complete the morning routine at 6:00 am"
        );
    }

    #[test]
    fn places_and_lists() {
        assert_eq!(
            readable_place("Willowbrook:Riverside Cafe:cafe"),
            "Riverside Cafe, cafe"
        );
        assert_eq!(readable_place("Willowbrook:Okafor house"), "Okafor house");
        assert_eq!(readable_place("Maple Park"), "Maple Park");
        assert_eq!(readable_place("w::a:"), "a");
        assert_eq!(numbered_list(&["a", "b"]), "1. a\n2. b");
        assert_eq!(numbered_list::<&str>(&[]), "(none)");
        assert_eq!(
            transcript(&[("A".into(), "hi".into()), ("B".into(), "hey".into())]),
            "A: hi\nB: hey"
        );
    }

    #[test]
    fn schedule_lines_show_the_overlapping_items() {
        let items = vec![
            ("sleeping".to_string(), 360),
            ("breakfast".to_string(), 60),
            ("work".to_string(), 120),
        ];
        assert_eq!(
            schedule_lines(&items, 0, 400, 480),
            "6:00 am ~ 7:00 am: breakfast\n7:00 am ~ 9:00 am: work"
        );
        assert_eq!(schedule_lines(&items, 0, 1000, 1100), "(none)");
    }
}
