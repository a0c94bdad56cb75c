//! Cleaning raw model output before parsing: reasoning blocks and code fences go, and the
//! first JSON value is found inside surrounding prose.

/// Removes `<think>…</think>` blocks (an unclosed `<think>` swallows the rest; a lone
/// `</think>` drops what precedes it), unwraps Markdown code fences, and trims.
pub fn clean_response(raw: &str) -> String {
    let without_think = strip_think(raw);
    strip_fences(&without_think).trim().to_string()
}

fn find_ci(haystack: &str, needle: &str) -> Option<usize> {
    haystack.to_ascii_lowercase().find(needle)
}

fn strip_think(raw: &str) -> String {
    let mut text = raw.to_string();
    // A reply that starts mid-thought: everything before the first closing tag is reasoning.
    if let (Some(close), open) = (find_ci(&text, "</think>"), find_ci(&text, "<think>"))
        && open.is_none_or(|o| o > close)
    {
        text = text[close + "</think>".len()..].to_string();
    }
    while let Some(open) = find_ci(&text, "<think>") {
        match find_ci(&text[open..], "</think>") {
            Some(rel_close) => {
                let end = open + rel_close + "</think>".len();
                text.replace_range(open..end, "");
            }
            None => {
                text.truncate(open);
                break;
            }
        }
    }
    text
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

/// Finds the first complete JSON object or array in `text` and parses it. Prose before and after
/// is ignored; strings with braces inside are handled.
pub fn extract_json(text: &str) -> Option<serde_json::Value> {
    let bytes = text.as_bytes();
    let mut search_from = 0;
    while let Some(rel) = text.get(search_from..)?.find(['{', '[']) {
        let start = search_from + rel;
        if let Some(end) = matching_close(bytes, start)
            && let Ok(value) = serde_json::from_str(&text[start..=end])
        {
            return Some(value);
        }
        search_from = start + 1;
    }
    None
}

/// Index of the bracket closing the one at `start`, honouring JSON strings and escapes.
fn matching_close(bytes: &[u8], start: usize) -> Option<usize> {
    let mut stack: Vec<u8> = Vec::new();
    let mut in_string = false;
    let mut escaped = false;
    for (i, &b) in bytes.iter().enumerate().skip(start) {
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
            b'{' => stack.push(b'}'),
            b'[' => stack.push(b']'),
            b'}' | b']' => {
                if stack.pop() != Some(b) {
                    return None;
                }
                if stack.is_empty() {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn think_blocks_are_removed() {
        assert_eq!(clean_response("<think>hmm\nyes</think>\n7"), "7");
        assert_eq!(clean_response("a<THINK>x</Think>b<think>y</think>c"), "abc");
        assert_eq!(clean_response("answer <think>never closed"), "answer");
        assert_eq!(clean_response("reasoning...</think> 42"), "42");
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
}
