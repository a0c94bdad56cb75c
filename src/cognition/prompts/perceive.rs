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
