//! The day's schedule as arithmetic: pure functions over `(task, minutes)` lists.
//!
//! A persona's `f_daily_schedule` is a list of `(task, minutes)` covering the day from midnight.
//! It starts as the hourly schedule (consecutive duplicate hours merged), is decomposed block by
//! block into 5-minute tasks as the day goes (SPEC §3.4), gets reactions inserted into windows
//! (SPEC §3.5), and is padded with sleep so that it always sums to exactly 1440 minutes.
//! Everything here is deterministic and total: no index can go out of range, whatever the lists.

use crate::persona::{ScheduleItem, is_sleep_text};

use super::prompts::MINUTES_PER_DAY;

/// Total minutes of a schedule (saturating).
pub(crate) fn total_minutes(items: &[ScheduleItem]) -> u32 {
    items
        .iter()
        .fold(0u32, |acc, item| acc.saturating_add(item.minutes))
}

/// A schedule as the `(task, minutes)` pairs prompts show the model.
pub(crate) fn schedule_pairs(items: &[ScheduleItem]) -> Vec<(String, u32)> {
    items
        .iter()
        .map(|item| (item.task.clone(), item.minutes))
        .collect()
}

/// Merges consecutive identical hourly activities into `(task, minutes)` blocks (SPEC §3.3).
pub(crate) fn merge_hourly(hours: &[String]) -> Vec<ScheduleItem> {
    let mut out: Vec<ScheduleItem> = Vec::new();
    for task in hours {
        match out.last_mut() {
            Some(last) if last.task == *task => last.minutes += 60,
            _ => out.push(ScheduleItem::new(task.clone(), 60)),
        }
    }
    out
}

/// The full day's hourly activities: `"sleeping"` before the wake-up hour, then the model's
/// activities for each hour from waking (missing hours are sleep, extra ones are dropped).
pub(crate) fn day_hours(wake_up_hour: u32, waking: &[String]) -> Vec<String> {
    let wake = wake_up_hour.min(23) as usize;
    let mut hours: Vec<String> = (0..wake).map(|_| "sleeping".to_string()).collect();
    hours.extend(waking.iter().take(24 - wake).cloned());
    while hours.len() < 24 {
        hours.push("sleeping".to_string());
    }
    hours
}

/// How many distinct activities a list of hours has.
pub(crate) fn distinct_activities(hours: &[String]) -> usize {
    let mut seen: Vec<&str> = hours.iter().map(String::as_str).collect();
    seen.sort_unstable();
    seen.dedup();
    seen.len()
}

/// The index of the item running at `minute` of the day (Smallville's
/// `get_f_daily_schedule_index`): the first item whose end is after `minute`. `None` when the
/// schedule ends before `minute`.
pub(crate) fn schedule_index(items: &[ScheduleItem], minute: u32) -> Option<usize> {
    let mut end = 0u32;
    for (i, item) in items.iter().enumerate() {
        end = end.saturating_add(item.minutes);
        if end > minute {
            return Some(i);
        }
    }
    None
}

/// The minute of the day at which item `index` starts.
pub(crate) fn item_start(items: &[ScheduleItem], index: usize) -> u32 {
    total_minutes(&items[..index.min(items.len())])
}

/// Whether a decomposed sub-task (see [`subtask_description`](super::prompts::subtask_description)):
/// those are never decomposed again.
pub(crate) fn is_subtask(task: &str) -> bool {
    task.trim_end().ends_with(')') && task.contains(" (")
}

/// Whether a block is decomposed into 5-minute tasks (SPEC §3.4): at least `min_minutes` long,
/// not sleep ("sleeping", "asleep", "in bed" never; "sleep" or "bed" only when ≤ 60 minutes),
/// and not already a sub-task.
pub(crate) fn should_decompose(task: &str, minutes: u32, min_minutes: u32) -> bool {
    if minutes < min_minutes || is_subtask(task) || is_sleep_text(task) {
        return false;
    }
    let lower = task.to_lowercase();
    !((lower.contains("sleep") || lower.contains("bed")) && minutes > 60)
}

/// Which blocks to decompose now, as item indices, given the minute of the day and the hour
/// (SPEC §3.4): at the first item of the day the current block and the one after the next
/// hour's; otherwise the block one hour ahead while the hour is before `quiet_hour` (23).
pub(crate) fn blocks_to_decompose(
    items: &[ScheduleItem],
    minute: u32,
    hour: u32,
    min_minutes: u32,
    quiet_hour: u32,
) -> Vec<usize> {
    let mut out = Vec::new();
    let curr = schedule_index(items, minute);
    let ahead = schedule_index(items, minute.saturating_add(60));
    let wants = |i: usize| {
        items
            .get(i)
            .is_some_and(|item| should_decompose(&item.task, item.minutes, min_minutes))
    };
    if curr == Some(0) {
        if wants(0) {
            out.push(0);
        }
        if let Some(next) = ahead.map(|a| a + 1)
            && wants(next)
        {
            out.push(next);
        }
    }
    if let Some(a) = ahead
        && hour < quiet_hour
        && wants(a)
    {
        out.push(a);
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// Replaces item `index` with `parts` when they sum to the item's minutes (otherwise nothing
/// changes, so the day's total is preserved either way). Returns whether it replaced.
pub(crate) fn replace_item(
    items: &mut Vec<ScheduleItem>,
    index: usize,
    parts: Vec<ScheduleItem>,
) -> bool {
    let Some(item) = items.get(index) else {
        return false;
    };
    if parts.is_empty() || total_minutes(&parts) != item.minutes {
        return false;
    }
    items.splice(index..=index, parts);
    true
}

/// Makes the schedule sum to exactly one day: appends sleep when short (SPEC §3.4), and trims
/// the tail when long (a fail-safe for bad input; a well-formed schedule is never long).
pub(crate) fn pad_day(items: &mut Vec<ScheduleItem>) {
    items.retain(|item| item.minutes > 0);
    let total = total_minutes(items);
    if total < MINUTES_PER_DAY {
        items.push(ScheduleItem::new("sleeping", MINUTES_PER_DAY - total));
        return;
    }
    let mut excess = total - MINUTES_PER_DAY;
    while excess > 0 {
        let Some(last) = items.last_mut() else {
            break;
        };
        if last.minutes > excess {
            last.minutes -= excess;
            excess = 0;
        } else {
            excess -= last.minutes;
            items.pop();
        }
    }
}

/// The window of the schedule a reaction is inserted into (SPEC §3.5): from the start of the
/// item running at `minute` (or of the hourly block containing it, whichever is earlier) to the
/// end of the item running when the inserted action ends (or the hourly block's end, whichever
/// is later), snapped to item boundaries so the rest of the day is untouched.
///
/// Returns `(first, last_exclusive, window_start_minute)`; `None` when `minute` is past the end.
pub(crate) fn reaction_window(
    items: &[ScheduleItem],
    hourly: &[ScheduleItem],
    minute: u32,
    duration: u32,
) -> Option<(usize, usize, u32)> {
    let first = schedule_index(items, minute)?;
    let (block_start, block_end) = match schedule_index(hourly, minute) {
        Some(h) => {
            let start = item_start(hourly, h);
            (start, start.saturating_add(hourly[h].minutes))
        }
        None => (minute, minute),
    };
    let first = schedule_index(items, block_start)
        .unwrap_or(first)
        .min(first);
    let end_minute = block_end
        .max(minute.saturating_add(duration))
        .max(minute + 1);
    let last = schedule_index(items, end_minute.saturating_sub(1))
        .unwrap_or(items.len().saturating_sub(1));
    Some((first, last + 1, item_start(items, first)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(items: &[(&str, u32)]) -> Vec<ScheduleItem> {
        items
            .iter()
            .map(|(t, m)| ScheduleItem::new(*t, *m))
            .collect()
    }

    #[test]
    fn merging_and_day_hours() {
        let waking: Vec<String> = ["routine", "work", "work", "lunch"]
            .iter()
            .map(|x| x.to_string())
            .collect();
        let hours = day_hours(6, &waking);
        assert_eq!(hours.len(), 24);
        let merged = merge_hourly(&hours);
        assert_eq!(merged[0], ScheduleItem::new("sleeping", 360));
        assert_eq!(merged[1], ScheduleItem::new("routine", 60));
        assert_eq!(merged[2], ScheduleItem::new("work", 120));
        assert_eq!(total_minutes(&merged), 1440);
        assert_eq!(distinct_activities(&hours), 4);
    }

    #[test]
    fn index_uses_strict_end() {
        let items = s(&[("a", 60), ("b", 30), ("c", 30)]);
        assert_eq!(schedule_index(&items, 0), Some(0));
        assert_eq!(schedule_index(&items, 59), Some(0));
        assert_eq!(schedule_index(&items, 60), Some(1));
        assert_eq!(schedule_index(&items, 119), Some(2));
        assert_eq!(schedule_index(&items, 120), None);
        assert_eq!(item_start(&items, 2), 90);
    }

    #[test]
    fn decomposition_rules() {
        assert!(should_decompose("work at the cafe", 120, 60));
        assert!(!should_decompose("work at the cafe", 55, 60));
        assert!(!should_decompose("sleeping", 480, 60));
        assert!(!should_decompose("go to bed", 120, 60));
        assert!(should_decompose("go to bed", 60, 60));
        assert!(!should_decompose("work (answer emails)", 60, 60));
    }

    #[test]
    fn blocks_at_start_and_ahead() {
        let items = s(&[("sleeping", 360), ("morning routine", 60), ("work", 180)]);
        // First item of the day is sleep: only the block after the next hour's is considered.
        assert_eq!(blocks_to_decompose(&items, 0, 0, 60, 23), vec![1]);
        // At 5:30, still in the first item: the block after the next hour's (work) and, as
        // always before 23:00, the next hour's block itself (the routine).
        assert_eq!(blocks_to_decompose(&items, 330, 5, 60, 23), vec![1, 2]);
        assert_eq!(blocks_to_decompose(&items, 420, 7, 60, 23), vec![2]);
        assert!(blocks_to_decompose(&items, 420, 23, 60, 23).is_empty());
    }

    #[test]
    fn replace_keeps_the_total() {
        let mut items = s(&[("a", 60), ("b", 60)]);
        assert!(!replace_item(&mut items, 0, s(&[("x", 30)])));
        assert!(replace_item(&mut items, 0, s(&[("x", 30), ("y", 30)])));
        assert_eq!(total_minutes(&items), 120);
        assert_eq!(items.len(), 3);
        assert!(!replace_item(&mut items, 9, s(&[("x", 60)])));
    }

    #[test]
    fn padding() {
        let mut items = s(&[("a", 600)]);
        pad_day(&mut items);
        assert_eq!(items.last(), Some(&ScheduleItem::new("sleeping", 840)));
        let mut long = s(&[("a", 1000), ("b", 500)]);
        pad_day(&mut long);
        assert_eq!(total_minutes(&long), 1440);
        assert_eq!(long[1].minutes, 440);
    }

    #[test]
    fn window_covers_block_and_action() {
        let hourly = s(&[("sleeping", 420), ("work", 120), ("lunch", 900)]);
        let items = s(&[
            ("sleeping", 420),
            ("work (a)", 30),
            ("work (b)", 90),
            ("lunch", 900),
        ]);
        // At 7:40 inside "work (a)", a 10-minute chat: window = the 7–9 block.
        assert_eq!(reaction_window(&items, &hourly, 440, 10), Some((1, 3, 420)));
        // A long chat reaching into lunch extends the window.
        assert_eq!(reaction_window(&items, &hourly, 530, 30), Some((1, 4, 420)));
        assert_eq!(reaction_window(&items, &hourly, 1440, 10), None);
    }
}
