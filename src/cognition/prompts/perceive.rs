//! How much a new memory matters (SPEC §3.1, §3.7, §3.8): the poignancy of events, chats and
//! thoughts, each a whole number 1..=10.
//!
//! Idle events never reach a model — their poignancy is 1 and the caller sets it. The
//! fail-safes sit just below the middle of the scale: an event or thought we could not rate is
//! most likely ordinary (3), while a conversation, which the persona took part in, counts a
//! little more (4). Both keep reflection triggering at a sensible pace when a model is down.

use super::text::rating;
use crate::llm::ChatRequest;
use crate::prompt::{ParseError, Prompt, PromptLibrary, TemplateError};

/// Poignancy used when an event cannot be rated.
pub const EVENT_POIGNANCY_FAIL_SAFE: u8 = 3;
/// Poignancy used when a conversation cannot be rated.
pub(crate) const CHAT_POIGNANCY_FAIL_SAFE: u8 = 4;
/// Poignancy used when a thought cannot be rated.
pub(crate) const THOUGHT_POIGNANCY_FAIL_SAFE: u8 = 3;

/// A rating request; the rated text (the last input) is what it is about.
fn rating_request(
    kind: &'static str,
    library: &PromptLibrary,
    inputs: [&str; 3],
) -> Result<ChatRequest, TemplateError> {
    let prompt = library.fill(kind, &inputs)?;
    Ok(ChatRequest::new(kind, prompt)
        .with_max_tokens(8)
        .with_temperature(0.0)
        .with_about(inputs[2]))
}

/// The poignancy of a perceived event (SPEC §3.1). Output: 1..=10; fail-safe
/// [`EVENT_POIGNANCY_FAIL_SAFE`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventPoignancy {
    /// The identity summary.
    pub identity: String,
    /// The persona's first name.
    pub first_name: String,
    /// The event's description ("Sam Lindqvist is playing the piano").
    pub event: String,
}

impl Prompt for EventPoignancy {
    type Output = u8;

    fn kind(&self) -> &'static str {
        "event_poignancy"
    }

    fn request(&self, library: &PromptLibrary) -> Result<ChatRequest, TemplateError> {
        rating_request(
            self.kind(),
            library,
            [&self.identity, &self.first_name, &self.event],
        )
    }

    fn parse(&self, cleaned: &str) -> Result<u8, ParseError> {
        rating(cleaned)
    }

    fn fail_safe(&self) -> u8 {
        EVENT_POIGNANCY_FAIL_SAFE
    }
}

/// Lean mode's ratings of a step's new events in one call (`LeanSettings::rate_together`): the
/// [`EventPoignancy`] question for each of [`EventPoignancies::events`], answered as JSON
/// `{"ratings": [..]}` (or a bare array) in the events' order. Each rating is read as the
/// single prompt reads its answer (a whole number in 1..=10); an entry that is not one leaves
/// its event unrated (`None`: it is asked on its own), and an answer with more entries than
/// events is refused, as is one without a single usable rating.
///
/// Fail-safe: nothing rated — every event is then asked on its own.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventPoignancies {
    /// The identity summary.
    pub identity: String,
    /// The persona's first name.
    pub first_name: String,
    /// The events' descriptions.
    pub events: Vec<String>,
}

impl Prompt for EventPoignancies {
    type Output = Vec<Option<u8>>;

    fn kind(&self) -> &'static str {
        "event_poignancies"
    }

    fn request(&self, library: &PromptLibrary) -> Result<ChatRequest, TemplateError> {
        let events = self
            .events
            .iter()
            .enumerate()
            .map(|(i, e)| format!("{}. {e}", i + 1))
            .collect::<Vec<_>>()
            .join("\n");
        let prompt = library.fill(
            self.kind(),
            &[self.identity.as_str(), self.first_name.as_str(), &events],
        )?;
        let count = self.events.len();
        Ok(ChatRequest::new(self.kind(), prompt)
            .with_max_tokens(16 + 4 * count.min(1_000) as u32)
            .with_temperature(0.0)
            .with_json_schema(serde_json::json!({
                "type": "object",
                "properties": {"ratings": {
                    "type": "array",
                    "items": {"type": "integer", "minimum": 1, "maximum": 10},
                    "minItems": count, "maxItems": count
                }},
                "required": ["ratings"],
                "additionalProperties": false
            })))
    }

    fn parse(&self, cleaned: &str) -> Result<Vec<Option<u8>>, ParseError> {
        let value = crate::prompt::extract_json(super::text::truncate_chars(cleaned, 8_000))
            .ok_or_else(|| ParseError::new("no JSON in the answer"))?;
        let items = match &value {
            serde_json::Value::Object(map) => map.get("ratings").and_then(|v| v.as_array()),
            serde_json::Value::Array(items) => Some(items),
            _ => None,
        }
        .ok_or_else(|| ParseError::new("no \"ratings\" list in the answer"))?;
        if items.len() > self.events.len() {
            return Err(ParseError::new(format!(
                "{} ratings for {} events",
                items.len(),
                self.events.len()
            )));
        }
        let mut ratings: Vec<Option<u8>> = items
            .iter()
            .map(|item| match item {
                serde_json::Value::Number(n) => rating(&n.to_string()).ok(),
                serde_json::Value::String(text) => rating(text).ok(),
                _ => None,
            })
            .collect();
        if ratings.iter().all(Option::is_none) {
            return Err(ParseError::new("no usable rating in the answer"));
        }
        ratings.resize(self.events.len(), None);
        Ok(ratings)
    }

    fn fail_safe(&self) -> Vec<Option<u8>> {
        vec![None; self.events.len()]
    }
}

/// The poignancy of a conversation the persona had (SPEC §3.1). Output: 1..=10; fail-safe
/// `CHAT_POIGNANCY_FAIL_SAFE`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChatPoignancy {
    /// The identity summary.
    pub identity: String,
    /// The persona's first name.
    pub first_name: String,
    /// The conversation ([`transcript`](super::transcript)) or a one-line description of it.
    pub conversation: String,
}

impl Prompt for ChatPoignancy {
    type Output = u8;

    fn kind(&self) -> &'static str {
        "chat_poignancy"
    }

    fn request(&self, library: &PromptLibrary) -> Result<ChatRequest, TemplateError> {
        rating_request(
            self.kind(),
            library,
            [&self.identity, &self.first_name, &self.conversation],
        )
    }

    fn parse(&self, cleaned: &str) -> Result<u8, ParseError> {
        rating(cleaned)
    }

    fn fail_safe(&self) -> u8 {
        CHAT_POIGNANCY_FAIL_SAFE
    }
}

/// The poignancy of a thought (reflection insights, plans, chat memos; SPEC §3.7, §3.8).
/// Output: 1..=10; fail-safe `THOUGHT_POIGNANCY_FAIL_SAFE`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ThoughtPoignancy {
    /// The identity summary.
    pub identity: String,
    /// The persona's first name.
    pub first_name: String,
    /// The thought.
    pub thought: String,
}

impl Prompt for ThoughtPoignancy {
    type Output = u8;

    fn kind(&self) -> &'static str {
        "thought_poignancy"
    }

    fn request(&self, library: &PromptLibrary) -> Result<ChatRequest, TemplateError> {
        rating_request(
            self.kind(),
            library,
            [&self.identity, &self.first_name, &self.thought],
        )
    }

    fn parse(&self, cleaned: &str) -> Result<u8, ParseError> {
        rating(cleaned)
    }

    fn fail_safe(&self) -> u8 {
        THOUGHT_POIGNANCY_FAIL_SAFE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_of_events_is_rated_in_one_answer() {
        let p = EventPoignancies {
            events: vec!["a".into(), "b".into(), "c".into()],
            ..Default::default()
        };
        assert_eq!(
            p.parse(r#"{"ratings": [2, "7", 0]}"#),
            Ok(vec![Some(2), Some(7), None])
        );
        assert_eq!(p.parse("[4]"), Ok(vec![Some(4), None, None]));
        for hostile in [
            "",
            "3",
            r#"{"ratings": [1, 2, 3, 4]}"#,
            r#"{"ratings": ["x", null]}"#,
            r#"{"r": [1]}"#,
        ] {
            assert!(p.parse(hostile).is_err(), "accepted {hostile:?}");
        }
        assert_eq!(p.fail_safe(), vec![None; 3]);
    }

    #[test]
    fn ratings_and_fail_safes() {
        let e = EventPoignancy::default();
        assert_eq!(e.parse("Rating: 2"), Ok(2));
        assert_eq!(e.parse("10"), Ok(10));
        assert!(e.parse("0").is_err());
        assert!(e.parse("very").is_err());
        assert_eq!(e.fail_safe(), 3);
        assert_eq!(ChatPoignancy::default().fail_safe(), 4);
        assert_eq!(ThoughtPoignancy::default().fail_safe(), 3);
        assert_eq!(ThoughtPoignancy::default().parse("I'd say 6."), Ok(6));
    }
}
