//! Total parsing helpers shared by the prompt types: lists, clock times, emoji, triples,
//! ratings and `(task, minutes)` steps.
//!
//! Everything here takes arbitrary model text. Positions used for slicing are always those of
//! ASCII bytes found in the same string (or in its ASCII-lowercased copy, which keeps every
//! byte offset), so no slice can split a character.

use crate::prompt::{ParseError, bounded_text, extract_json};

/// Longest answer any parser looks at, in characters. A model that writes more than this is
/// rambling; bounding the scan keeps every parser linear and cheap on megabytes of output.
pub(crate) const MAX_SCAN_CHARS: usize = 20_000;

/// The first `max_chars` characters of `text`.
pub(crate) fn truncate_chars(text: &str, max_chars: usize) -> &str {
    match text.char_indices().nth(max_chars) {
        Some((i, _)) => &text[..i],
        None => text,
    }
}

/// Collapses whitespace, strips wrapping quotes and trailing `,;.` — the tidy form of a list
/// item or a one-line answer.
pub(crate) fn clean_item(text: &str) -> String {
    let collapsed = text.split_whitespace().collect::<Vec<_>>().join(" ");
    collapsed
        .trim_matches(|c: char| {
            matches!(c, '"' | '\'' | '`' | '“' | '”' | '*') || c.is_whitespace()
        })
        .trim_end_matches([',', ';', '.', ':'])
        .trim()
        .to_string()
}

/// A free-text answer: a leading "Answer:"-style label dropped, whitespace collapsed, wrapping
/// quotes removed, bounded to `max_chars`; with `single_line`, only the first non-empty line.
pub(crate) fn free_text(
    cleaned: &str,
    max_chars: usize,
    single_line: bool,
) -> Result<String, ParseError> {
    let mut text = truncate_chars(cleaned, MAX_SCAN_CHARS).trim_start();
    for label in ["answer:", "output:", "summary:", "response:"] {
        if let Some(rest) = strip_prefix_ci(text, label) {
            text = rest.trim_start();
        }
    }
    if single_line {
        text = text
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .unwrap_or("");
    }
    let collapsed = bounded_text(text, MAX_SCAN_CHARS)?;
    let unquoted = collapsed
        .trim_matches(|c: char| matches!(c, '"' | '\'' | '`' | '“' | '”') || c.is_whitespace())
        .to_string();
    if unquoted.is_empty() {
        return Err(ParseError::new("empty answer"));
    }
    Ok(truncate_chars(&unquoted, max_chars).trim_end().to_string())
}

/// `text` without a leading `prefix`, compared ignoring ASCII case.
pub(crate) fn strip_prefix_ci<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let head = text.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &text[prefix.len()..])
}

/// Drops a leading "<name> is " or "<name>: " for any of `names` (models often restate the
/// subject the prompt already gave).
pub(crate) fn strip_name_prefix<'a>(text: &'a str, names: &[&str]) -> &'a str {
    let text = text.trim_start();
    for name in names.iter().filter(|n| !n.trim().is_empty()) {
        if let Some(rest) = strip_prefix_ci(text, name) {
            for joiner in [" is ", ": ", " - "] {
                if let Some(rest) = strip_prefix_ci(rest, joiner) {
                    return rest.trim_start();
                }
            }
        }
    }
    text
}

/// The line without a list marker (`-`, `*`, `•`, `1)`, `1.`, `(1)`), if it had one.
pub(crate) fn strip_list_marker(line: &str) -> Option<&str> {
    let line = line.trim_start();
    for bullet in ['-', '*', '•', '–', '—'] {
        if let Some(rest) = line.strip_prefix(bullet)
            && rest.starts_with(char::is_whitespace)
        {
            return Some(rest.trim_start());
        }
    }
    let (inner, parenthesised) = match line.strip_prefix('(') {
        Some(rest) => (rest, true),
        None => (line, false),
    };
    let digits = inner.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 || digits > 3 {
        return None;
    }
    let after = &inner[digits..];
    let rest = if parenthesised {
        after.strip_prefix(')')?
    } else {
        after
            .strip_prefix(')')
            .or_else(|| after.strip_prefix('.'))?
    };
    (rest.is_empty() || rest.starts_with(char::is_whitespace)).then(|| rest.trim_start())
}

/// Splits a one-line list "1) a, 2) b, 3) c" at its sequential `N)` markers. `None` unless at
/// least two markers numbered in sequence are found.
fn split_inline_numbered(line: &str) -> Option<Vec<&str>> {
    let bytes = line.as_bytes();
    let mut markers: Vec<(usize, usize)> = Vec::new(); // (marker start, text start)
    let mut expected: Option<u32> = None;
    let mut i = 0;
    while i < bytes.len() {
        let starts_number = bytes[i].is_ascii_digit() && (i == 0 || !bytes[i - 1].is_ascii_digit());
        if !starts_number {
            i += 1;
            continue;
        }
        let mut j = i;
        while j < bytes.len() && bytes[j].is_ascii_digit() {
            j += 1;
        }
        let before_ok = line[..i]
            .trim_end()
            .chars()
            .last()
            .is_none_or(|c| matches!(c, ',' | ';' | '.'));
        let closes =
            bytes.get(j) == Some(&b')') && bytes.get(j + 1).is_none_or(|b| b.is_ascii_whitespace());
        if before_ok && closes && j - i <= 3 {
            let number: u32 = line[i..j].parse().unwrap_or(0);
            if expected.is_none_or(|e| e == number) {
                markers.push((i, j + 1));
                expected = Some(number + 1);
            }
        }
        i = j;
    }
    if markers.len() < 2 {
        return None;
    }
    let mut parts = Vec::with_capacity(markers.len());
    for (k, &(_, text_start)) in markers.iter().enumerate() {
        let end = markers
            .get(k + 1)
            .map_or(line.len(), |&(next_start, _)| next_start);
        parts.push(
            line[text_start..end]
                .trim()
                .trim_end_matches([',', ';'])
                .trim(),
        );
    }
    Some(parts)
}

/// The items of a list answer. Numbered or bulleted lines (or a one-line "1) a, 2) b" list) are
/// the items when there are any — prose around them is dropped; otherwise every non-empty line
/// is an item. Items are tidied with [`clean_item`]; empty ones are dropped.
pub(crate) fn list_items(text: &str) -> Vec<String> {
    let text = truncate_chars(text, MAX_SCAN_CHARS);
    let mut marked = Vec::new();
    let mut unmarked = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if let Some(parts) = split_inline_numbered(line) {
            marked.extend(parts);
        } else if let Some(rest) = strip_list_marker(line) {
            marked.push(rest);
        } else {
            unmarked.push(line);
        }
    }
    let items = if marked.is_empty() { unmarked } else { marked };
    items
        .into_iter()
        .map(clean_item)
        .filter(|s| !s.is_empty())
        .collect()
}

/// A time of day at the start of some text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Clock {
    /// Hour on the 24-hour clock (after applying am/pm).
    pub hour: u32,
    /// Minute.
    pub minute: u32,
    /// Whether "am"/"pm" was given.
    pub meridiem: bool,
    /// Bytes consumed.
    pub len: usize,
}

/// Parses "7", "07:30", "7.30", "0730", "7 am", "7:30 p.m." at the very start of `text`.
pub(crate) fn parse_clock(text: &str) -> Option<Clock> {
    let b = text.as_bytes();
    let digits = b.iter().take_while(|c| c.is_ascii_digit()).count();
    if digits == 0 || digits > 4 {
        return None;
    }
    let number: u32 = text[..digits].parse().ok()?;
    let (mut hour, mut minute) = if digits <= 2 {
        (number, 0)
    } else {
        (number / 100, number % 100)
    };
    let mut i = digits;
    let is_digit = |k: usize| b.get(k).is_some_and(u8::is_ascii_digit);
    if digits <= 2
        && matches!(b.get(i), Some(b':' | b'.'))
        && is_digit(i + 1)
        && is_digit(i + 2)
        && !is_digit(i + 3)
    {
        minute = text[i + 1..i + 3].parse().ok()?;
        i += 3;
    }
    let mut j = i;
    while b.get(j) == Some(&b' ') {
        j += 1;
    }
    let mut meridiem = None;
    if let Some(&first) = b.get(j) {
        let first = first.to_ascii_lowercase();
        if first == b'a' || first == b'p' {
            let mut k = j + 1;
            if b.get(k) == Some(&b'.') {
                k += 1;
            }
            if b.get(k).is_some_and(|c| c.eq_ignore_ascii_case(&b'm')) {
                k += 1;
                if b.get(k) == Some(&b'.') {
                    k += 1;
                }
                if !b.get(k).is_some_and(u8::is_ascii_alphabetic) {
                    meridiem = Some(first == b'p');
                    i = k;
                }
            }
        }
    }
    if minute > 59 {
        return None;
    }
    match meridiem {
        Some(pm) => {
            if hour == 0 || hour > 12 {
                return None;
            }
            hour = match (pm, hour) {
                (false, 12) => 0,
                (true, 12) => 12,
                (true, h) => h + 12,
                (false, h) => h,
            };
        }
        None if hour > 23 => return None,
        None => {}
    }
    Some(Clock {
        hour,
        minute,
        meridiem: meridiem.is_some(),
        len: i,
    })
}

/// The first clock time in `text` (not preceded by a minus sign), as an hour 0..=23.
pub(crate) fn first_hour(text: &str) -> Result<u32, ParseError> {
    let text = truncate_chars(text, MAX_SCAN_CHARS);
    let bytes = text.as_bytes();
    let start = bytes
        .iter()
        .position(u8::is_ascii_digit)
        .ok_or_else(|| ParseError::new("no hour in the answer"))?;
    if start > 0 && bytes[start - 1] == b'-' {
        return Err(ParseError::new("negative hour"));
    }
    parse_clock(&text[start..])
        .map(|c| c.hour)
        .ok_or_else(|| ParseError::new("the answer's number is not an hour of the day"))
}

/// The field `key` of a JSON answer read by one of the single prompts' parsers — a string as
/// it is, a number as its digits (anything else is refused) — the error naming the field (the
/// merged answers of lean mode check each field by the rules of the prompt it replaces).
pub(crate) fn parsed_field<T>(
    answer: &serde_json::Map<String, serde_json::Value>,
    key: &str,
    parse: impl FnOnce(&str) -> Result<T, ParseError>,
) -> Result<T, ParseError> {
    let text = match answer.get(key) {
        Some(serde_json::Value::String(text)) => std::borrow::Cow::Borrowed(text.as_str()),
        Some(serde_json::Value::Number(number)) => std::borrow::Cow::Owned(number.to_string()),
        _ => {
            return Err(ParseError::new(format!(
                "no usable \"{key}\" in the answer"
            )));
        }
    };
    parse(&text).map_err(|error| ParseError::new(format!("\"{key}\": {error}")))
}

/// The triple field `key` of a JSON answer — an array `[s, p, o]` or a string "(s, p, o)" —
/// read as [`parse_triple`] reads a triple answer.
pub(crate) fn triple_field(
    answer: &serde_json::Map<String, serde_json::Value>,
    key: &str,
) -> Result<(Option<String>, String, String), ParseError> {
    let text = match answer.get(key) {
        Some(serde_json::Value::String(text)) => text.clone(),
        Some(value @ serde_json::Value::Array(_)) => value.to_string(),
        _ => {
            return Err(ParseError::new(format!(
                "no usable \"{key}\" in the answer"
            )));
        }
    };
    parse_triple(&text).map_err(|error| ParseError::new(format!("\"{key}\": {error}")))
}

/// A 1..=10 rating: the number after "rating" when the answer has that word, else the first
/// number. The whole number is read, exponent included, and its whole part must lie in 1..=10:
/// `1e309` (infinite), `2e5` or `NaN` is no rating (the prompt's fail-safe), not the `1` or
/// `2` it starts with.
pub(crate) fn rating(text: &str) -> Result<u8, ParseError> {
    let text = truncate_chars(text, MAX_SCAN_CHARS);
    let lower = text.to_ascii_lowercase();
    let after_label = lower.find("rating").map(|p| &text[p + "rating".len()..]);
    let value = match after_label.map(first_rating) {
        Some(Ok(v)) => v,
        _ => first_rating(text)?,
    };
    u8::try_from(value).map_err(|_| ParseError::new("rating out of range"))
}

/// The first number of `text` (sign, digits, fraction, exponent) as a whole number in 1..=10.
fn first_rating(text: &str) -> Result<i64, ParseError> {
    let bytes = text.as_bytes();
    let Some(start) = bytes.iter().position(u8::is_ascii_digit) else {
        return Err(ParseError::new("no number in the answer"));
    };
    let digits_from = |mut i: usize| {
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            i += 1;
        }
        i
    };
    let mut end = digits_from(start);
    if bytes.get(end) == Some(&b'.') && bytes.get(end + 1).is_some_and(u8::is_ascii_digit) {
        end = digits_from(end + 1);
    }
    if matches!(bytes.get(end), Some(b'e' | b'E')) {
        let sign = usize::from(matches!(bytes.get(end + 1), Some(b'+' | b'-')));
        if bytes.get(end + 1 + sign).is_some_and(u8::is_ascii_digit) {
            end = digits_from(end + 1 + sign);
        }
    }
    let negative = start > 0 && bytes[start - 1] == b'-';
    let token = &text[start..end];
    let value: f64 = token
        .parse()
        .map_err(|_| ParseError::new(format!("not a number: {token}")))?;
    let value = if negative { -value } else { value };
    if !value.is_finite() {
        return Err(ParseError::new(format!("{token} is not a finite rating")));
    }
    let whole = value.trunc();
    if (1.0..=10.0).contains(&whole) {
        // In 1..=10, so exact.
        Ok(whole as i64)
    } else {
        Err(ParseError::new(format!("{token} is not within 1..=10")))
    }
}

fn is_emoji_modifier(c: char) -> bool {
    matches!(c as u32, 0x200D | 0xFE0E | 0xFE0F | 0x20E3 | 0x1F3FB..=0x1F3FF | 0xE0020..=0xE007F)
}

fn is_pictographic(c: char) -> bool {
    matches!(
        c as u32,
        0x1F000..=0x1FAFF
            | 0x2600..=0x27BF
            | 0x2300..=0x23FF
            | 0x2B00..=0x2BFF
            | 0x2190..=0x21FF
            | 0x25AA..=0x25FE
            | 0x2934..=0x2935
            | 0x3030
            | 0x303D
            | 0x3297
            | 0x3299
    )
}

/// The first `max` emoji of `text` (with their skin-tone, variation and zero-width-joiner
/// sequences), all other text dropped. `None` when there is no pictographic character.
pub(crate) fn emoji_run(text: &str, max: usize) -> Option<String> {
    let mut out = String::new();
    let mut count = 0;
    let mut in_cluster = false;
    let mut joining = false;
    for c in text.chars() {
        if is_emoji_modifier(c) {
            if in_cluster {
                out.push(c);
                joining = c == '\u{200D}';
            }
            continue;
        }
        if is_pictographic(c) {
            if in_cluster && joining {
                out.push(c);
                joining = false;
                continue;
            }
            if count == max {
                break;
            }
            out.push(c);
            count += 1;
            in_cluster = true;
            joining = false;
            continue;
        }
        in_cluster = false;
        joining = false;
    }
    let out = out.trim_end_matches('\u{200D}').to_string();
    (count > 0).then_some(out)
}

/// A `(subject, predicate, object)` answer: "(a, b, c)", "a, b, c", a JSON array, or — when the
/// prompt prefilled the subject — just "b, c)". Returns `(subject if given, predicate, object)`.
pub(crate) fn parse_triple(text: &str) -> Result<(Option<String>, String, String), ParseError> {
    let text = truncate_chars(text, 2_000);
    let parts: Vec<String> = match extract_json(text) {
        Some(serde_json::Value::Array(values))
            if (2..=3).contains(&values.len()) && values.iter().all(|v| v.is_string()) =>
        {
            values
                .iter()
                .filter_map(|v| v.as_str())
                .map(clean_item)
                .collect()
        }
        _ => {
            let line = text
                .lines()
                .map(str::trim)
                .find(|l| l.contains(','))
                .ok_or_else(|| ParseError::new("no comma-separated triple in the answer"))?;
            let inner = match (line.find('('), line.rfind(')')) {
                (Some(open), Some(close)) if close > open => &line[open + 1..close],
                (Some(open), _) => &line[open + 1..],
                (None, Some(close)) => &line[..close],
                (None, None) => line,
            };
            inner.split(',').map(clean_item).collect()
        }
    };
    let (subject, predicate, object) = match parts.as_slice() {
        [p, o] => (None, p.clone(), o.clone()),
        [s, p, rest @ ..] if !rest.is_empty() => (Some(s.clone()), p.clone(), rest.join(", ")),
        _ => return Err(ParseError::new("a triple needs a predicate and an object")),
    };
    if predicate.is_empty() || object.is_empty() {
        return Err(ParseError::new("empty predicate or object"));
    }
    if predicate.chars().count() > 40 || predicate.split_whitespace().count() > 5 {
        return Err(ParseError::new("the predicate is not a short verb"));
    }
    let object = truncate_chars(object.trim_end_matches(')').trim(), 80).to_string();
    if object.is_empty() {
        return Err(ParseError::new("empty object"));
    }
    Ok((subject.filter(|s| !s.is_empty()), predicate, object))
}

/// The first run of 1..=6 ASCII digits starting within `window` bytes after `from`, skipping
/// only spaces, colons and `=`. Returns the number and the byte after it.
fn number_after(text: &str, from: usize, window: usize) -> Option<(u32, usize)> {
    let bytes = text.as_bytes();
    let mut i = from;
    while i < bytes.len() && i < from + window && matches!(bytes[i], b' ' | b':' | b'=' | b'\t') {
        i += 1;
    }
    let digits = bytes
        .get(i..)?
        .iter()
        .take_while(|b| b.is_ascii_digit())
        .count();
    if digits == 0 || digits > 6 {
        return None;
    }
    let value = text.get(i..i + digits)?.parse().ok()?;
    Some((value, i + digits))
}

/// Tidies the text of one step: the last line of the fragment, without list markers, leading
/// separators or the persona's name.
fn step_text(fragment: &str, names: &[&str]) -> String {
    let line = fragment
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .unwrap_or("");
    let line =
        line.trim_start_matches(|c: char| matches!(c, ',' | ';' | '.' | ')') || c.is_whitespace());
    let line = strip_list_marker(line).unwrap_or(line);
    let line = strip_name_prefix(line, names);
    let cleaned = clean_item(
        line.trim_end_matches(|c: char| matches!(c, '(' | '-' | '–' | ':') || c.is_whitespace()),
    );
    truncate_chars(&cleaned, 120).to_string()
}

/// The `(step, minutes)` items of an answer written as "step (duration in minutes: X, …)"
/// (one per line or all on one line), or failing that as "step (X min)" lines. Steps without a
/// readable duration are skipped; at most 300 steps are read.
pub(crate) fn duration_items(text: &str, names: &[&str]) -> Vec<(String, u32)> {
    const KEY: &str = "duration in minutes";
    const MAX_STEPS: usize = 300;
    let text = truncate_chars(text, MAX_SCAN_CHARS);
    let lower = text.to_ascii_lowercase();
    let mut items = Vec::new();
    let mut cursor = 0;
    let mut search = 0;
    while items.len() < MAX_STEPS {
        let Some(rel) = lower.get(search..).and_then(|rest| rest.find(KEY)) else {
            break;
        };
        let at = search + rel;
        let after = at + KEY.len();
        let Some((minutes, number_end)) = number_after(text, after, 8) else {
            search = after;
            continue;
        };
        let fragment_end = lower[cursor..at].rfind('(').map_or(at, |p| cursor + p);
        let step = step_text(&text[cursor..fragment_end], names);
        let close = lower[number_end..]
            .find([')', '\n'])
            .map_or(text.len(), |p| number_end + p + 1);
        cursor = close;
        search = close;
        if !step.is_empty() {
            items.push((step, minutes));
        }
    }
    if !items.is_empty() {
        return items;
    }
    // Fallback: "step (20 min)" / "step - 20 minutes" lines.
    for line in text.lines().take(MAX_STEPS) {
        let lower_line = line.to_ascii_lowercase();
        let Some(min_at) = lower_line.rfind("min") else {
            continue;
        };
        let head = lower_line[..min_at].trim_end();
        let digits = head.bytes().rev().take_while(u8::is_ascii_digit).count();
        if digits == 0 || digits > 6 {
            continue;
        }
        let number_start = head.len() - digits;
        let Ok(minutes) = line[number_start..head.len()].parse::<u32>() else {
            continue;
        };
        let step = step_text(&line[..number_start], names);
        if !step.is_empty() {
            items.push((step, minutes));
        }
    }
    items
}

/// Rounds to the nearest multiple of `step` (at least `step`).
fn round_to_step(minutes: u64, step: u64) -> u64 {
    (((minutes + step / 2) / step) * step).max(step)
}

/// Repairs step durations so they sum to exactly `total`, deterministically: durations are
/// rounded to 5-minute multiples (at least 5); if they are off by more than a quarter they are
/// scaled to the total first; then steps past the end are dropped and the last step shortened,
/// or the last step lengthened. Every step but the last stays a multiple of 5 (the last too
/// when `total` is). `None` when there are no steps with time or `total` is 0.
pub(crate) fn fit_durations(items: Vec<(String, u32)>, total: u32) -> Option<Vec<(String, u32)>> {
    const STEP: u64 = 5;
    if total == 0 {
        return None;
    }
    let mut steps: Vec<(String, u64)> = items
        .into_iter()
        .filter(|(text, minutes)| *minutes > 0 && !text.is_empty())
        .map(|(text, minutes)| (text, round_to_step(u64::from(minutes), STEP)))
        .collect();
    if steps.is_empty() {
        return None;
    }
    let total = u64::from(total);
    let sum: u64 = steps.iter().map(|(_, m)| m).sum();
    if sum.abs_diff(total) * 4 > total {
        for (_, minutes) in &mut steps {
            *minutes = round_to_step(*minutes * total / sum, STEP);
        }
    }
    let sum: u64 = steps.iter().map(|(_, m)| m).sum();
    if sum > total {
        let mut excess = sum - total;
        while excess > 0 {
            let (_, last) = steps.last_mut()?;
            if *last > excess {
                *last -= excess;
                excess = 0;
            } else {
                excess -= *last;
                steps.pop();
            }
        }
    } else if sum < total {
        let (_, last) = steps.last_mut()?;
        *last += total - sum;
    }
    steps
        .into_iter()
        .map(|(text, minutes)| u32::try_from(minutes).ok().map(|m| (text, m)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_items_prefer_marked_lines() {
        let text = "Here is the plan:\n1) eat breakfast at 7:00 am\n2. work at the cafe\n- go home.\nHope this helps!";
        assert_eq!(
            list_items(text),
            vec!["eat breakfast at 7:00 am", "work at the cafe", "go home"]
        );
        assert_eq!(list_items("a\n\n b \n"), vec!["a", "b"]);
        assert_eq!(
            list_items("1) wake up at 6:00 am, 2) eat breakfast at 7:00 am, 3) work"),
            vec!["wake up at 6:00 am", "eat breakfast at 7:00 am", "work"]
        );
        // "left: 50)" is not a list marker.
        assert_eq!(
            list_items("1) x (minutes left: 50)"),
            vec!["x (minutes left: 50)"]
        );
        assert_eq!(strip_list_marker("12) x"), Some("x"));
        assert_eq!(strip_list_marker("(3) x"), Some("x"));
        assert_eq!(strip_list_marker("6:00 am: x"), None);
        assert_eq!(strip_list_marker("10.30 am"), None);
    }

    #[test]
    fn clocks() {
        let c = parse_clock("7:30 pm: dinner").unwrap();
        assert_eq!((c.hour, c.minute, c.meridiem, c.len), (19, 30, true, 7));
        assert_eq!(parse_clock("12 am").map(|c| c.hour), Some(0));
        assert_eq!(parse_clock("12:00 p.m.").map(|c| c.hour), Some(12));
        assert_eq!(
            parse_clock("0630").map(|c| (c.hour, c.minute)),
            Some((6, 30))
        );
        assert_eq!(
            parse_clock("6amazing").map(|c| (c.hour, c.meridiem)),
            Some((6, false))
        );
        assert_eq!(parse_clock("13 pm"), None);
        assert_eq!(parse_clock("24"), None);
        assert_eq!(parse_clock("7:75"), None);
        assert_eq!(first_hour("I think 6am."), Ok(6));
        assert_eq!(first_hour("6:00"), Ok(6));
        assert_eq!(first_hour("around 7 pm"), Ok(19));
        assert!(first_hour("-3").is_err());
        assert!(first_hour("never").is_err());
    }

    #[test]
    fn ratings() {
        assert_eq!(rating("7"), Ok(7));
        assert_eq!(rating("On a scale of 1 to 10... Rating: 8/10"), Ok(8));
        assert_eq!(rating("rating: none, but 3"), Ok(3));
        assert!(rating("11").is_err());
        assert!(rating("0").is_err());
        assert!(rating("-3").is_err());
        assert_eq!(rating("7.5"), Ok(7), "a fraction reads as before");
        // Issue 48: the whole number counts, exponent included.
        assert!(rating(r#"{"rating": 1e309}"#).is_err(), "infinite");
        assert!(rating("1e309").is_err());
        assert!(rating("2E5").is_err());
        assert!(rating("1.5e-400").is_err(), "rounds to 0");
        assert!(rating(&"9".repeat(400)).is_err());
        assert!(rating("NaN").is_err());
        assert!(rating("inf").is_err());
        assert_eq!(rating("1e1"), Ok(10));
    }

    #[test]
    fn emoji() {
        assert_eq!(emoji_run("☕ coffee 🍩", 3).as_deref(), Some("☕🍩"));
        assert_eq!(emoji_run("👩‍🍳🍳🥚🥓", 3).as_deref(), Some("👩‍🍳🍳🥚"));
        assert_eq!(emoji_run("👍🏽!", 3).as_deref(), Some("👍🏽"));
        assert_eq!(emoji_run("no emoji here é", 3), None);
        assert_eq!(emoji_run("\u{FE0F}\u{200D}", 3), None);
    }

    #[test]
    fn triples() {
        assert_eq!(
            parse_triple("(Mira Okafor, brew, coffee)").unwrap(),
            (Some("Mira Okafor".into()), "brew".into(), "coffee".into())
        );
        assert_eq!(
            parse_triple("brew, coffee)").unwrap(),
            (None, "brew".into(), "coffee".into())
        );
        assert_eq!(
            parse_triple("[\"a\", \"serve\", \"tea\"]").unwrap(),
            (Some("a".into()), "serve".into(), "tea".into())
        );
        assert_eq!(
            parse_triple("(a, pour, milk, sugar)").unwrap().2,
            "milk, sugar"
        );
        assert!(parse_triple("(a, , b)").is_err());
        assert!(parse_triple("just words").is_err());
    }

    #[test]
    fn steps_are_read_in_both_layouts() {
        let text = "1) Mira is greeting customers (duration in minutes: 10, minutes left: 50)\n\
                    2) making coffee at the coffee machine (duration in minutes: 50, minutes left: 0)";
        assert_eq!(
            duration_items(text, &["Mira"]),
            vec![
                ("greeting customers".into(), 10),
                ("making coffee at the coffee machine".into(), 50)
            ]
        );
        let inline = "1) a (duration in minutes: 5, minutes left: 10), 2) b (duration in minutes: 10, minutes left: 0)";
        assert_eq!(
            duration_items(inline, &[]),
            vec![("a".into(), 5), ("b".into(), 10)]
        );
        assert_eq!(
            duration_items("- stretching (15 min)\n- yoga - 45 minutes", &[]),
            vec![("stretching".into(), 15), ("yoga".into(), 45)]
        );
        assert!(duration_items("nothing useful", &[]).is_empty());
    }

    #[test]
    fn durations_are_fitted_exactly() {
        let s = |v: &[(&str, u32)]| {
            v.iter()
                .map(|(t, m)| (t.to_string(), *m))
                .collect::<Vec<_>>()
        };
        // Small overshoot: the last step is shortened.
        assert_eq!(
            fit_durations(s(&[("a", 30), ("b", 35)]), 60),
            Some(s(&[("a", 30), ("b", 30)]))
        );
        // Small shortfall: the last step is lengthened; 12 rounds to 10.
        assert_eq!(
            fit_durations(s(&[("a", 12), ("b", 40)]), 60),
            Some(s(&[("a", 10), ("b", 50)]))
        );
        // Far off: scaled (10,20,30 of 60 → ×2 for 120).
        assert_eq!(
            fit_durations(s(&[("a", 10), ("b", 20), ("c", 30)]), 120),
            Some(s(&[("a", 20), ("b", 40), ("c", 60)]))
        );
        // Steps past the end are dropped.
        assert_eq!(
            fit_durations(s(&[("a", 50), ("b", 10), ("c", 5)]), 60),
            Some(s(&[("a", 50), ("b", 10)]))
        );
        // A total that is not a multiple of 5: the last step absorbs it.
        assert_eq!(
            fit_durations(s(&[("a", 5), ("b", 5)]), 12),
            Some(s(&[("a", 5), ("b", 7)]))
        );
        assert_eq!(fit_durations(s(&[("a", 0)]), 60), None);
        assert_eq!(fit_durations(s(&[("a", 5)]), 0), None);
    }
}
