//! Small, total parsers shared by prompt functions. Each takes arbitrary model text and returns
//! `Err(ParseError)` — never panics — so the caller can retry and then fall back.

use std::fmt;

/// Why a model answer was rejected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError(pub String);

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ParseError {}

impl ParseError {
    /// A rejection with a reason.
    pub fn new(reason: impl Into<String>) -> Self {
        Self(reason.into())
    }
}

/// The first integer in `text` (an optional minus sign and digits), if it lies in `min..=max`.
pub fn parse_int_in_range(text: &str, min: i64, max: i64) -> Result<i64, ParseError> {
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i].is_ascii_digit() {
            let negative = i > 0 && bytes[i - 1] == b'-';
            let start = i;
            while i < bytes.len() && bytes[i].is_ascii_digit() {
                i += 1;
            }
            let digits = &text[start..i];
            let value: i64 = digits
                .parse()
                .map_err(|_| ParseError::new(format!("number out of range: {digits}")))?;
            let value = if negative { -value } else { value };
            return if (min..=max).contains(&value) {
                Ok(value)
            } else {
                Err(ParseError::new(format!(
                    "{value} is not within {min}..={max}"
                )))
            };
        }
        i += 1;
    }
    Err(ParseError::new("no number in the answer"))
}

/// A yes/no answer: the first of "yes"/"no" (as whole words, any case) in `text`.
pub fn parse_yes_no(text: &str) -> Result<bool, ParseError> {
    for word in text.split(|c: char| !c.is_alphanumeric()) {
        match word.to_ascii_lowercase().as_str() {
            "yes" | "true" => return Ok(true),
            "no" | "false" => return Ok(false),
            _ => {}
        }
    }
    Err(ParseError::new("no yes/no in the answer"))
}

/// Picks one of `options` from the answer: an exact (case-insensitive, trimmed, quote-stripped)
/// match first, then the option named earliest in the text (longest wins on ties). Returns the
/// option's index.
pub fn parse_choice(text: &str, options: &[impl AsRef<str>]) -> Result<usize, ParseError> {
    let answer = text
        .trim()
        .trim_matches(|c: char| c == '"' || c == '\'' || c == '`' || c == '.' || c.is_whitespace())
        .to_lowercase();
    if answer.is_empty() {
        return Err(ParseError::new("empty answer"));
    }
    if let Some(i) = options
        .iter()
        .position(|o| o.as_ref().trim().to_lowercase() == answer)
    {
        return Ok(i);
    }
    let mut best: Option<(usize, usize, usize)> = None; // (position, -len, index)
    for (i, option) in options.iter().enumerate() {
        let needle = option.as_ref().trim().to_lowercase();
        if needle.is_empty() {
            continue;
        }
        if let Some(pos) = answer.find(&needle) {
            let candidate = (pos, usize::MAX - needle.len(), i);
            if best.is_none_or(|b| candidate < b) {
                best = Some(candidate);
            }
        }
    }
    best.map(|(_, _, i)| i)
        .ok_or_else(|| ParseError::new("the answer names none of the options"))
}

/// Collapses whitespace and bounds the length (on a char boundary), for free-text answers that
/// end up in memory or on screen.
pub fn bounded_text(text: &str, max_chars: usize) -> Result<String, ParseError> {
    let collapsed = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if collapsed.is_empty() {
        return Err(ParseError::new("empty answer"));
    }
    Ok(collapsed.chars().take(max_chars).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers() {
        assert_eq!(parse_int_in_range("I'd say 7 out of 10", 1, 10), Ok(7));
        assert_eq!(parse_int_in_range("6am", 0, 23), Ok(6));
        assert!(parse_int_in_range("11", 1, 10).is_err());
        assert!(parse_int_in_range("-3", 0, 10).is_err());
        assert_eq!(parse_int_in_range("-3", -5, 10), Ok(-3));
        assert!(parse_int_in_range("none", 1, 10).is_err());
        assert!(parse_int_in_range("99999999999999999999999", 0, 10).is_err());
    }

    #[test]
    fn yes_no() {
        assert_eq!(parse_yes_no("Yes, they should."), Ok(true));
        assert_eq!(parse_yes_no("Answer: no"), Ok(false));
        assert_eq!(parse_yes_no("nobody knows, yes"), Ok(true));
        assert!(parse_yes_no("maybe").is_err());
    }

    #[test]
    fn choices() {
        let options = ["cafe", "cafe kitchen", "bar"];
        assert_eq!(parse_choice("  \"Cafe Kitchen\". ", &options), Ok(1));
        assert_eq!(parse_choice("I think the bar is best", &options), Ok(2));
        assert_eq!(
            parse_choice("the cafe kitchen, then the bar", &options),
            Ok(1)
        );
        assert!(parse_choice("the park", &options).is_err());
        assert!(parse_choice("", &options).is_err());
    }

    #[test]
    fn text_is_bounded() {
        assert_eq!(bounded_text("  a \n b ", 10).unwrap(), "a b");
        assert_eq!(bounded_text("ééééé", 3).unwrap(), "ééé");
        assert!(bounded_text(" \n ", 3).is_err());
    }
}
