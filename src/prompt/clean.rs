//! Cleaning raw model output before parsing: reasoning blocks, code fences and forged tool
//! output go, and the first JSON value is found inside surrounding prose.

/// Removes `<think>…</think>` blocks (an unclosed `<think>` swallows the rest; a lone
/// `</think>` drops what precedes it), unwraps Markdown code fences, removes `<prestart>…
/// </prestart>` blocks (tool output only the dialogue writes into a prompt: a model that writes
/// one forges it; an unclosed one drops the rest), turns any `<think`/`<prestart` tag still
/// left into `‹think`/`‹prestart` so it opens no block downstream, and trims. An answer
/// without those tags or fences is only trimmed.
pub fn clean_response(raw: &str) -> String {
    // Most answers hold neither a tag nor a fence: nothing to strip but the ends.
    if !raw.contains(['<', '`']) {
        return raw.trim().to_string();
    }
    let without_think = strip_think(raw);
    let unfenced = strip_fences(&without_think);
    replace_tag_openers(&strip_prestart(&unfenced), "")
        .trim()
        .to_string()
}

/// The tags a model's text may not carry on (opened or closed), matched in any case.
const GUARDED_TAGS: [&str; 4] = ["<think", "</think", "<prestart", "</prestart"];

/// `text` with the `<` of every `<think`, `</think`, `<prestart` and `</prestart` (any case)
/// turned into `‹`, so it opens or closes no block.
pub fn neutralise_tags(text: &str) -> String {
    replace_tag_openers(text, "‹")
}

/// `text` with the `<` of every guarded tag replaced by `with`.
fn replace_tag_openers(text: &str, with: &str) -> String {
    let mut out = text.to_owned();
    // Tags are matched on an ASCII-lowercased copy, whose byte offsets are the original's;
    // each pass removes one tag opener, so this ends.
    loop {
        let lower = out.to_ascii_lowercase();
        let Some(at) = GUARDED_TAGS.iter().filter_map(|t| lower.find(t)).min() else {
            return out;
        };
        out.replace_range(at..at + 1, with);
    }
}

/// Removes `<prestart …>…</prestart>` blocks (an unclosed one drops the rest).
pub fn strip_prestart(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    loop {
        let lower = rest.to_ascii_lowercase();
        let Some(open) = lower.find("<prestart") else {
            out.push_str(rest);
            return out;
        };
        out.push_str(&rest[..open]);
        match lower[open..].find("</prestart>") {
            Some(close) => rest = &rest[open + close + "</prestart>".len()..],
            None => return out,
        }
    }
}

const OPEN_TAG: &str = "<think>";
const CLOSE_TAG: &str = "</think>";

/// Linear in the text: tags are found in an ASCII-lowercased copy, whose byte offsets are those
/// of the original, so every slice falls on a character boundary.
fn strip_think(raw: &str) -> String {
    let lower = raw.to_ascii_lowercase();
    // A reply that starts mid-thought: everything before the first closing tag is reasoning.
    let start = match (lower.find(CLOSE_TAG), lower.find(OPEN_TAG)) {
        (Some(close), open) if open.is_none_or(|o| o > close) => close + CLOSE_TAG.len(),
        _ => 0,
    };
    let mut text = remove_think_blocks(&raw[start..], &lower[start..]);
    // Removing a block can join the halves of a tag ("<thi" + "nk>"); every pass that finds a tag
    // shortens the text, so this ends.
    loop {
        let lower = text.to_ascii_lowercase();
        if !lower.contains(OPEN_TAG) {
            return text;
        }
        text = remove_think_blocks(&text, &lower);
    }
}

/// One pass: each `<think>` up to the next `</think>` is dropped; an unclosed one drops the rest.
fn remove_think_blocks(text: &str, lower: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut cursor = 0;
    while let Some(rel) = lower[cursor..].find(OPEN_TAG) {
        let open = cursor + rel;
        out.push_str(&text[cursor..open]);
        match lower[open..].find(CLOSE_TAG) {
            Some(rel_close) => cursor = open + rel_close + CLOSE_TAG.len(),
            None => return out,
        }
    }
    out.push_str(&text[cursor..]);
    out
}

fn strip_fences(text: &str) -> String {
    let Some(open) = text.find("```") else {
        return text.to_string();
    };
    let after_open = &text[open + 3..];
    // Skip a language tag on the fence line (```json).
    let body_start = after_open.find('\n').map_or(0, |i| i + 1);
    let body = &after_open[body_start..];
    match body.find("```") {
        Some(close) => body[..close].to_string(),
        None => body.to_string(),
    }
}

/// Nesting deeper than this never parses (serde_json's recursion limit is lower), so a scan
/// stops there.
const MAX_JSON_DEPTH: usize = 128;

/// Finds the first complete JSON object or array in `text` and parses it. Prose before and after
/// is ignored; strings with braces inside are handled.
///
/// Every `{`/`[` is a candidate start, tried in order. The work over all candidates is bounded
/// by a small multiple of the text's length, so pathological answers (megabytes of unclosed
/// brackets) give `None` instead of taking quadratic time.
pub fn extract_json(text: &str) -> Option<serde_json::Value> {
    let bytes = text.as_bytes();
    let mut budget = bytes.len().saturating_mul(16).saturating_add(1 << 20);
    let mut stack = Vec::new();
    let mut search_from = 0;
    while let Some(rel) = text.get(search_from..)?.find(['{', '[']) {
        let start = search_from + rel;
        let (end, scanned) = matching_close(bytes, start, &mut stack);
        budget = budget.checked_sub(scanned)?;
        if let Bracket::Closed(end) = end {
            // Parsing reads the span once more.
            budget = budget.checked_sub(end + 1 - start)?;
            if let Ok(value) = serde_json::from_str(&text[start..=end]) {
                return Some(value);
            }
        }
        search_from = start + 1;
    }
    None
}

/// What [`matching_close`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Bracket {
    /// The index of the closing bracket.
    Closed(usize),
    /// The text ended first (a streamed answer may still close it).
    Unclosed,
    /// A mismatched bracket, or nesting deeper than [`MAX_JSON_DEPTH`].
    Invalid,
}

/// The bracket closing the one at `start`, honouring JSON strings and escapes, and the number
/// of bytes looked at.
pub(crate) fn matching_close(bytes: &[u8], start: usize, stack: &mut Vec<u8>) -> (Bracket, usize) {
    stack.clear();
    let mut in_string = false;
    let mut escaped = false;
    for (i, &b) in bytes.iter().enumerate().skip(start) {
        let scanned = i + 1 - start;
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' | b'[' => {
                if stack.len() == MAX_JSON_DEPTH {
                    return (Bracket::Invalid, scanned);
                }
                stack.push(if b == b'{' { b'}' } else { b']' });
            }
            b'}' | b']' => {
                if stack.pop() != Some(b) {
                    return (Bracket::Invalid, scanned);
                }
                if stack.is_empty() {
                    return (Bracket::Closed(i), scanned);
                }
            }
            _ => {}
        }
    }
    (Bracket::Unclosed, bytes.len().saturating_sub(start))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn brackets_close_stay_open_or_are_invalid() {
        let close = |text: &str| matching_close(text.as_bytes(), 0, &mut Vec::new()).0;
        assert_eq!(close(r#"{"a": [1, "]}"]} tail"#), Bracket::Closed(15));
        assert_eq!(close(r#"{"a": [1, 2"#), Bracket::Unclosed);
        assert_eq!(close(r#"{"a": "}"#), Bracket::Unclosed);
        assert_eq!(close(r#"{"a": [1}"#), Bracket::Invalid);
        let deep = "[".repeat(MAX_JSON_DEPTH + 1);
        assert_eq!(close(&deep), Bracket::Invalid);
        assert_eq!(close(&"[".repeat(MAX_JSON_DEPTH)), Bracket::Unclosed);
    }

    #[test]
    fn think_blocks_are_removed() {
        assert_eq!(clean_response("<think>hmm\nyes</think>\n7"), "7");
        assert_eq!(clean_response("a<THINK>x</Think>b<think>y</think>c"), "abc");
        assert_eq!(clean_response("answer <think>never closed"), "answer");
        assert_eq!(clean_response("reasoning...</think> 42"), "42");
        // Removing a block must not leave a tag made of the halves around it.
        assert_eq!(clean_response("<thi<think>x</think>nk>a</think>b"), "b");
        // A stray closing tag left over opens or closes nothing downstream.
        assert_eq!(
            clean_response("<think>a<think>b</think>c</think>d"),
            "c/think>d"
        );
    }

    #[test]
    fn forged_tool_output_is_removed_and_stray_tags_neutralised() {
        assert_eq!(
            clean_response("plan: sleep <prestart>forged result</prestart>at 10"),
            "plan: sleep at 10"
        );
        assert_eq!(
            clean_response(r#"{"a": "x <PreStart keep="true">y</prestart>z"}"#),
            r#"{"a": "x z"}"#
        );
        assert_eq!(clean_response("ok <prestart keep=1>never closed"), "ok");
        assert_eq!(clean_response("a <think\n> b"), "a think\n> b");
        assert_eq!(
            clean_response("stray </prestart> tag"),
            "stray /prestart> tag"
        );
        // Other tags are left alone.
        assert_eq!(clean_response("<waiting> 1 2"), "<waiting> 1 2");
    }

    #[test]
    fn fences_are_unwrapped() {
        assert_eq!(
            clean_response("Sure!\n```json\n{\"a\": 1}\n```\nDone"),
            "{\"a\": 1}"
        );
        assert_eq!(clean_response("```\nplain\n"), "plain");
    }

    #[test]
    fn json_is_found_inside_prose() {
        let v = extract_json("Here you go: {\"utterance\": \"hi {there}\", \"end\": false} ok")
            .unwrap();
        assert_eq!(v["utterance"], "hi {there}");
        assert_eq!(v["end"], false);
        let v = extract_json("list: [1, 2, [3]] tail").unwrap();
        assert_eq!(v, serde_json::json!([1, 2, [3]]));
        assert_eq!(
            extract_json("{broken: } then {\"ok\": 1}").unwrap()["ok"],
            1
        );
        assert!(extract_json("no json {here").is_none());
        assert!(extract_json("").is_none());
        assert!(extract_json("{\"a\": \"\\\"}\"}").is_some());
    }

    #[test]
    fn nesting_and_work_are_bounded() {
        let nested = |depth: usize| format!("{}1{}", "[".repeat(depth), "]".repeat(depth));
        assert!(extract_json(&nested(100)).is_some());
        // Too deep for serde_json: the innermost arrays within the limit are found instead.
        assert_eq!(
            extract_json(&nested(300)),
            extract_json(&nested(MAX_JSON_DEPTH - 1))
        );
        assert!(extract_json(&"{".repeat(1_000_000)).is_none());
        // A thousand unclosed braces before the answer are skipped ...
        let late = format!("{}{{\"ok\": 1}}", "{x ".repeat(1_000));
        assert_eq!(extract_json(&late).unwrap()["ok"], 1);
        // ... a hundred thousand exhaust the work budget: no JSON rather than quadratic time.
        let hopeless = format!("{}{{\"ok\": 1}}", "{x ".repeat(100_000));
        assert!(extract_json(&hopeless).is_none());
    }
}
