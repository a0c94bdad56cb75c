//! Reacting to another persona and talking with them (SPEC §3.5, §3.7): whether to start a
//! conversation or wait, how the persona sees the other, each utterance, the one-line summary
//! of a finished chat, and the two thoughts stored after it.

use serde_json::{Value, json};

use super::text::{
    MAX_SCAN_CHARS, clean_item, free_text, parsed_field, strip_prefix_ci, truncate_chars,
};
use super::{numbered_list, transcript};
use crate::llm::ChatRequest;
use crate::prompt::{
    Garble, ParseError, Prompt, PromptLibrary, TemplateError, extract_json, garbled, parse_yes_no,
};

/// The first word of a name ("Mira Okafor" → "Mira").
fn first_name(name: &str) -> &str {
    name.split_whitespace().next().unwrap_or(name)
}

/// Whether the persona should start a conversation with another it perceives (SPEC §3.5). The
/// caller checks the hard guards (asleep, 11 pm, already chatting, cool-down) first.
/// Output: yes → `true`. Options: `["yes", "no"]`. Fail-safe: `false`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DecideToTalk {
    /// The persona deciding.
    pub name: String,
    /// The other persona.
    pub partner: String,
    /// The current time ("10:30 am").
    pub time_text: String,
    /// Where they are ("Riverside Cafe, cafe").
    pub place: String,
    /// The persona's current action.
    pub activity: String,
    /// The other persona's current action.
    pub partner_activity: String,
    /// What the persona remembers about the other (retrieved memory descriptions).
    pub memories: Vec<String>,
    /// When and about what they last talked, if they did.
    pub last_chat: Option<String>,
}

impl DecideToTalk {
    /// The situation and the question in plain words, for a backend that decides by meaning
    /// ([`ChatRequest::about`]): who is doing what, where and when.
    pub fn situation(&self) -> String {
        format!(
            "It is {}. {} is {} at {}. {} is {}. Should {} start a conversation with {} now?",
            self.time_text,
            self.name,
            self.activity,
            self.place,
            self.partner,
            self.partner_activity,
            first_name(&self.name),
            first_name(&self.partner),
        )
    }
}

impl Prompt for DecideToTalk {
    type Output = bool;

    fn kind(&self) -> &'static str {
        "decide_to_talk"
    }

    fn request(&self, library: &PromptLibrary) -> Result<ChatRequest, TemplateError> {
        let inputs = [
            numbered_list(&self.memories),
            self.time_text.clone(),
            self.place.clone(),
            self.name.clone(),
            self.partner.clone(),
            self.activity.clone(),
            self.partner_activity.clone(),
            self.last_chat
                .clone()
                .unwrap_or_else(|| "never".to_string()),
        ];
        let prompt = library.fill(self.kind(), &inputs)?;
        Ok(ChatRequest::new(self.kind(), prompt)
            .with_max_tokens(8)
            .with_temperature(0.0)
            .with_about(self.situation()))
    }

    fn parse(&self, cleaned: &str) -> Result<bool, ParseError> {
        parse_yes_no(truncate_chars(cleaned, 2_000))
    }

    fn fail_safe(&self) -> bool {
        false
    }

    fn options(&self) -> Option<Vec<String>> {
        Some(vec!["yes".to_string(), "no".to_string()])
    }

    fn output_for_option(&self, index: usize) -> Option<bool> {
        match index {
            0 => Some(true),
            1 => Some(false),
            _ => None,
        }
    }
}

/// What a persona does when another is in its way (SPEC §3.5, option 1 / option 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReactChoice {
    /// Option 1: wait until the other has finished.
    Wait,
    /// Option 2: keep going with the current action.
    KeepGoing,
}

/// Whether to wait for another persona using the same spot (SPEC §3.5). Output: a
/// [`ReactChoice`]; options `["Option 1", "Option 2"]`. Fail-safe: [`ReactChoice::KeepGoing`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DecideToReact {
    /// The persona deciding.
    pub name: String,
    /// The other persona.
    pub partner: String,
    /// The current time.
    pub time_text: String,
    /// Where they are.
    pub place: String,
    /// The persona's current action.
    pub activity: String,
    /// The other persona's current action.
    pub partner_activity: String,
    /// What the persona remembers about the other.
    pub memories: Vec<String>,
}

impl Prompt for DecideToReact {
    type Output = ReactChoice;

    fn kind(&self) -> &'static str {
        "decide_to_react"
    }

    fn request(&self, library: &PromptLibrary) -> Result<ChatRequest, TemplateError> {
        let inputs = [
            numbered_list(&self.memories),
            self.time_text.clone(),
            self.place.clone(),
            self.name.clone(),
            self.partner.clone(),
            self.activity.clone(),
            self.partner_activity.clone(),
        ];
        let prompt = library.fill(self.kind(), &inputs)?;
        Ok(ChatRequest::new(self.kind(), prompt)
            .with_max_tokens(8)
            .with_temperature(0.0))
    }

    /// "Option 1"/"Option 2" anywhere (the earliest wins), else a bare leading "1"/"2", else
    /// the words "wait" / "keep going" / "continue".
    fn parse(&self, cleaned: &str) -> Result<ReactChoice, ParseError> {
        let lower = truncate_chars(cleaned, 2_000).to_ascii_lowercase();
        let earliest = |pairs: &[(&str, ReactChoice)]| {
            pairs
                .iter()
                .filter_map(|(needle, choice)| lower.find(needle).map(|p| (p, *choice)))
                .min_by_key(|(p, _)| *p)
                .map(|(_, c)| c)
        };
        if let Some(choice) = earliest(&[
            ("option 1", ReactChoice::Wait),
            ("option 2", ReactChoice::KeepGoing),
            ("option1", ReactChoice::Wait),
            ("option2", ReactChoice::KeepGoing),
        ]) {
            return Ok(choice);
        }
        let trimmed = lower.trim_start();
        let bytes = trimmed.as_bytes();
        if !bytes.get(1).is_some_and(u8::is_ascii_digit) {
            match bytes.first() {
                Some(b'1') => return Ok(ReactChoice::Wait),
                Some(b'2') => return Ok(ReactChoice::KeepGoing),
                _ => {}
            }
        }
        earliest(&[
            ("wait", ReactChoice::Wait),
            ("keep going", ReactChoice::KeepGoing),
            ("continue", ReactChoice::KeepGoing),
        ])
        .ok_or_else(|| ParseError::new("the answer names neither option"))
    }

    fn fail_safe(&self) -> ReactChoice {
        ReactChoice::KeepGoing
    }

    fn options(&self) -> Option<Vec<String>> {
        Some(vec!["Option 1".to_string(), "Option 2".to_string()])
    }

    fn output_for_option(&self, index: usize) -> Option<ReactChoice> {
        match index {
            0 => Some(ReactChoice::Wait),
            1 => Some(ReactChoice::KeepGoing),
            _ => None,
        }
    }
}

/// How the persona sees another, from what it remembers about them (SPEC §3.7). Output: at most
/// 400 characters. Fail-safe: `"<name> and <partner> know each other a little."`
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RelationshipSummary {
    /// The persona.
    pub name: String,
    /// The other persona.
    pub partner: String,
    /// What the persona remembers about the other (retrieved, n = 50).
    pub memories: Vec<String>,
}

impl Prompt for RelationshipSummary {
    type Output = String;

    fn kind(&self) -> &'static str {
        "relationship_summary"
    }

    fn request(&self, library: &PromptLibrary) -> Result<ChatRequest, TemplateError> {
        let inputs = [
            self.name.clone(),
            self.partner.clone(),
            numbered_list(&self.memories),
        ];
        let prompt = library.fill(self.kind(), &inputs)?;
        Ok(ChatRequest::new(self.kind(), prompt)
            .with_max_tokens(120)
            .with_temperature(0.3))
    }

    fn parse(&self, cleaned: &str) -> Result<String, ParseError> {
        free_text(cleaned, 400, false)
    }

    fn fail_safe(&self) -> String {
        format!(
            "{} and {} know each other a little.",
            self.name, self.partner
        )
    }

    fn garbled(&self, output: &String) -> Option<Garble> {
        garbled(output)
    }
}

/// One line of a conversation and whether it ends the conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Utterance {
    /// What the speaker says (at most 300 characters).
    pub text: String,
    /// Whether this line ends the conversation.
    pub end: bool,
}

/// The next line of a persona-to-persona conversation (SPEC §3.7). The answer is JSON
/// `{"utterance": "...", "end": true|false}` (found inside prose if need be; `end` may also be
/// `"true"`/`"yes"`/`"false"`/`"no"` or 1/0); a leading `"<speaker>:"` is removed from the line.
///
/// Fail-safe: a polite closing line with `end = true`, so a conversation always terminates.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NextUtterance {
    /// The speaker's identity summary.
    pub identity: String,
    /// The speaker.
    pub name: String,
    /// The listener.
    pub partner: String,
    /// The current time.
    pub time_text: String,
    /// Where they are.
    pub place: String,
    /// The speaker's current action.
    pub activity: String,
    /// The listener's current action.
    pub partner_activity: String,
    /// How the speaker sees the listener ([`RelationshipSummary`]).
    pub relationship: String,
    /// What the speaker remembers that is relevant (retrieved, n = 15).
    pub memories: Vec<String>,
    /// Their previous conversation, when it was less than 8 hours ago.
    pub previous_chat: Option<String>,
    /// The conversation so far, `(speaker, line)`.
    pub conversation: Vec<(String, String)>,
}

impl NextUtterance {
    /// The most characters kept of an utterance.
    pub const MAX_CHARS: usize = 300;

    /// The JSON schema of the answer.
    pub fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "utterance": {"type": "string", "minLength": 1, "maxLength": 400},
                "end": {"type": "boolean"}
            },
            "required": ["utterance", "end"],
            "additionalProperties": false
        })
    }

    fn strip_speaker<'a>(&self, line: &'a str) -> &'a str {
        let line = line.trim_start();
        for name in [self.name.as_str(), first_name(&self.name)] {
            if name.is_empty() {
                continue;
            }
            if let Some(rest) =
                strip_prefix_ci(line, name).and_then(|r| r.trim_start().strip_prefix(':'))
            {
                return rest;
            }
        }
        line
    }
}

fn parse_end(value: Option<&Value>) -> Result<bool, ParseError> {
    match value {
        Some(Value::Bool(b)) => Ok(*b),
        Some(Value::String(s)) => match s.trim().to_ascii_lowercase().as_str() {
            "true" | "yes" | "1" => Ok(true),
            "false" | "no" | "0" => Ok(false),
            _ => Err(ParseError::new("`end` is not a boolean")),
        },
        Some(Value::Number(n)) => match n.as_u64() {
            Some(1) => Ok(true),
            Some(0) => Ok(false),
            _ => Err(ParseError::new("`end` is not a boolean")),
        },
        Some(_) => Err(ParseError::new("`end` is not a boolean")),
        None => Err(ParseError::new("missing `end`")),
    }
}

impl Prompt for NextUtterance {
    type Output = Utterance;

    fn kind(&self) -> &'static str {
        "next_utterance"
    }

    fn request(&self, library: &PromptLibrary) -> Result<ChatRequest, TemplateError> {
        let inputs = [
            self.identity.clone(),
            self.name.clone(),
            self.partner.clone(),
            self.time_text.clone(),
            self.place.clone(),
            self.activity.clone(),
            self.partner_activity.clone(),
            self.relationship.clone(),
            numbered_list(&self.memories),
            self.previous_chat
                .clone()
                .unwrap_or_else(|| "none".to_string()),
            transcript(&self.conversation),
        ];
        let prompt = library.fill(self.kind(), &inputs)?;
        Ok(ChatRequest::new(self.kind(), prompt)
            .with_max_tokens(200)
            .with_temperature(0.7)
            .with_json_schema(Self::schema()))
    }

    fn parse(&self, cleaned: &str) -> Result<Utterance, ParseError> {
        let value = extract_json(truncate_chars(cleaned, 8_000))
            .ok_or_else(|| ParseError::new("no JSON object in the answer"))?;
        let object = match &value {
            Value::Object(object) => object,
            Value::Array(items) => items
                .iter()
                .find_map(Value::as_object)
                .ok_or_else(|| ParseError::new("not a JSON object"))?,
            _ => return Err(ParseError::new("not a JSON object")),
        };
        let line = object
            .get("utterance")
            .and_then(Value::as_str)
            .ok_or_else(|| ParseError::new("missing `utterance` string"))?;
        let text = free_text(self.strip_speaker(line), Self::MAX_CHARS, false)?;
        let end = parse_end(object.get("end"))?;
        Ok(Utterance { text, end })
    }

    fn fail_safe(&self) -> Utterance {
        Utterance {
            text: format!(
                "It was nice talking with you, {}. I should get going.",
                first_name(&self.partner)
            ),
            end: true,
        }
    }

    fn garbled(&self, output: &Utterance) -> Option<Garble> {
        garbled(&output.text)
    }
}

/// A finished conversation in a few words, always starting "conversing about" — it becomes
/// the chat action's description (SPEC §3.5). Answers that start "talking about",
/// "discussing", … are normalised. Fail-safe: "conversing about the day".
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConversationSummary {
    /// The first speaker.
    pub name: String,
    /// The second speaker.
    pub partner: String,
    /// The conversation, `(speaker, line)`.
    pub conversation: Vec<(String, String)>,
}

impl ConversationSummary {
    /// The most characters of the summary's topic.
    pub const MAX_TOPIC_CHARS: usize = 150;
}

impl Prompt for ConversationSummary {
    type Output = String;

    fn kind(&self) -> &'static str {
        "conversation_summary"
    }

    fn request(&self, library: &PromptLibrary) -> Result<ChatRequest, TemplateError> {
        let inputs = [
            self.name.clone(),
            self.partner.clone(),
            transcript(&self.conversation),
        ];
        let prompt = library.fill(self.kind(), &inputs)?;
        Ok(ChatRequest::new(self.kind(), prompt)
            .with_max_tokens(40)
            .with_temperature(0.3))
    }

    fn parse(&self, cleaned: &str) -> Result<String, ParseError> {
        let line = free_text(cleaned, MAX_SCAN_CHARS, true)?;
        let lower = line.to_ascii_lowercase();
        let leads = [
            "conversing about",
            "talking about",
            "chatting about",
            "talked about",
            "chatted about",
            "conversation about",
            "conversation is about",
            "discussing",
            "discussed",
        ];
        let topic = leads
            .iter()
            .filter_map(|lead| lower.find(lead).map(|p| (p, p + lead.len())))
            .min_by_key(|(p, _)| *p)
            .map(|(_, end)| &line[end..])
            .ok_or_else(|| ParseError::new("the answer does not say what they talked about"))?;
        let topic = clean_item(topic);
        if topic.is_empty() {
            return Err(ParseError::new("empty topic"));
        }
        Ok(format!(
            "conversing about {}",
            truncate_chars(&topic, Self::MAX_TOPIC_CHARS).trim_end()
        ))
    }

    fn fail_safe(&self) -> String {
        "conversing about the day".to_string()
    }

    fn garbled(&self, output: &String) -> Option<Garble> {
        garbled(output)
    }
}

/// After a chat: what the persona should remember for planning (SPEC §3.7). The caller stores
/// it as `"For <name>'s planning: …"`. Output: at most 300 characters.
/// Fail-safe: `"<name> has nothing new to plan after talking with <partner>."`
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PlanningThoughtAfterChat {
    /// The persona.
    pub name: String,
    /// The partner.
    pub partner: String,
    /// The conversation, `(speaker, line)`.
    pub conversation: Vec<(String, String)>,
}

impl Prompt for PlanningThoughtAfterChat {
    type Output = String;

    fn kind(&self) -> &'static str {
        "planning_thought_after_chat"
    }

    fn request(&self, library: &PromptLibrary) -> Result<ChatRequest, TemplateError> {
        let inputs = [
            self.name.clone(),
            self.partner.clone(),
            transcript(&self.conversation),
        ];
        let prompt = library.fill(self.kind(), &inputs)?;
        Ok(ChatRequest::new(self.kind(), prompt)
            .with_max_tokens(100)
            .with_temperature(0.5))
    }

    fn parse(&self, cleaned: &str) -> Result<String, ParseError> {
        free_text(cleaned, 300, false)
    }

    fn fail_safe(&self) -> String {
        format!(
            "{} has nothing new to plan after talking with {}.",
            self.name, self.partner
        )
    }

    fn garbled(&self, output: &String) -> Option<Garble> {
        garbled(output)
    }
}

/// After a chat: what the persona found memorable (SPEC §3.7). Output: at most 300
/// characters. Fail-safe: `"<name> had a conversation with <partner>."`
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemoAfterChat {
    /// The persona.
    pub name: String,
    /// The partner.
    pub partner: String,
    /// The conversation, `(speaker, line)`.
    pub conversation: Vec<(String, String)>,
}

impl Prompt for MemoAfterChat {
    type Output = String;

    fn kind(&self) -> &'static str {
        "memo_after_chat"
    }

    fn request(&self, library: &PromptLibrary) -> Result<ChatRequest, TemplateError> {
        let inputs = [
            self.name.clone(),
            self.partner.clone(),
            transcript(&self.conversation),
        ];
        let prompt = library.fill(self.kind(), &inputs)?;
        Ok(ChatRequest::new(self.kind(), prompt)
            .with_max_tokens(100)
            .with_temperature(0.5))
    }

    fn parse(&self, cleaned: &str) -> Result<String, ParseError> {
        free_text(cleaned, 300, false)
    }

    fn fail_safe(&self) -> String {
        format!("{} had a conversation with {}.", self.name, self.partner)
    }

    fn garbled(&self, output: &String) -> Option<Garble> {
        garbled(output)
    }
}

/// What [`AfterChat`] answers: the planning thought and the memo, each with how much it
/// matters to the persona (its poignancy as a thought).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AfterChatThoughts {
    /// As [`PlanningThoughtAfterChat`] answers (the caller adds `"For <name>'s planning: "`).
    pub planning: String,
    /// The planning thought's poignancy (1..=10).
    pub planning_poignancy: u8,
    /// As [`MemoAfterChat`] answers.
    pub memo: String,
    /// The memo's poignancy (1..=10).
    pub memo_poignancy: u8,
}

/// Lean mode's one call after a chat (`LeanSettings::after_chat_at_once`): what
/// [`PlanningThoughtAfterChat`] and [`MemoAfterChat`] ask, and the two thoughts' poignancy
/// (otherwise a `thought_poignancy` call each). JSON `{"planning", "planning_importance",
/// "memo", "memo_importance"}`, each sentence read as the single prompts read theirs (at most
/// 300 characters), each rating in 1..=10; a missing or unusable field fails the answer.
/// Fail-safe: the single prompts' sentences, each rated 3 (as a thought that could not be
/// rated).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AfterChat {
    /// The identity summary (the ratings' point of view).
    pub identity: String,
    /// The persona.
    pub name: String,
    /// The persona's first name.
    pub first_name: String,
    /// The partner.
    pub partner: String,
    /// The conversation, `(speaker, line)`.
    pub conversation: Vec<(String, String)>,
}

impl AfterChat {
    /// The JSON schema of the answer.
    pub fn schema() -> Value {
        let sentence = json!({"type": "string", "minLength": 1, "maxLength": 300});
        let rating = json!({"type": "integer", "minimum": 1, "maximum": 10});
        json!({
            "type": "object",
            "properties": {
                "planning": sentence, "planning_importance": rating,
                "memo": sentence, "memo_importance": rating
            },
            "required": ["planning", "planning_importance", "memo", "memo_importance"],
            "additionalProperties": false
        })
    }
}

impl Prompt for AfterChat {
    type Output = AfterChatThoughts;

    fn kind(&self) -> &'static str {
        "after_chat"
    }

    fn request(&self, library: &PromptLibrary) -> Result<ChatRequest, TemplateError> {
        let inputs = [
            self.identity.clone(),
            self.name.clone(),
            self.partner.clone(),
            transcript(&self.conversation),
            self.first_name.clone(),
        ];
        let prompt = library.fill(self.kind(), &inputs)?;
        Ok(ChatRequest::new(self.kind(), prompt)
            .with_max_tokens(200)
            .with_temperature(0.5)
            .with_json_schema(Self::schema()))
    }

    fn parse(&self, cleaned: &str) -> Result<AfterChatThoughts, ParseError> {
        let Some(Value::Object(answer)) = extract_json(truncate_chars(cleaned, 4_000)) else {
            return Err(ParseError::new("no JSON object in the answer"));
        };
        let sentence = |text: &str| free_text(text, 300, false);
        Ok(AfterChatThoughts {
            planning: parsed_field(&answer, "planning", sentence)?,
            planning_poignancy: parsed_field(&answer, "planning_importance", super::text::rating)?,
            memo: parsed_field(&answer, "memo", sentence)?,
            memo_poignancy: parsed_field(&answer, "memo_importance", super::text::rating)?,
        })
    }

    fn fail_safe(&self) -> AfterChatThoughts {
        let planning = PlanningThoughtAfterChat {
            name: self.name.clone(),
            partner: self.partner.clone(),
            conversation: Vec::new(),
        };
        let memo = MemoAfterChat {
            name: self.name.clone(),
            partner: self.partner.clone(),
            conversation: Vec::new(),
        };
        AfterChatThoughts {
            planning: planning.fail_safe(),
            planning_poignancy: super::perceive::THOUGHT_POIGNANCY_FAIL_SAFE,
            memo: memo.fail_safe(),
            memo_poignancy: super::perceive::THOUGHT_POIGNANCY_FAIL_SAFE,
        }
    }

    fn garbled(&self, output: &AfterChatThoughts) -> Option<Garble> {
        garbled(&output.planning).or_else(|| garbled(&output.memo))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn after_chat_reads_both_thoughts_and_their_ratings() {
        let p = AfterChat {
            name: "Ana Silva".into(),
            partner: "Ben Ode".into(),
            ..Default::default()
        };
        let got = p
            .parse(r#"Here: {"planning": "Ana should call Ben.", "planning_importance": 5, "memo": "Ana learned Ben paints.", "memo_importance": "3"}"#)
            .expect("a full answer");
        assert_eq!(got.planning, "Ana should call Ben.");
        assert_eq!(got.planning_poignancy, 5);
        assert_eq!(got.memo, "Ana learned Ben paints.");
        assert_eq!(got.memo_poignancy, 3);
        for hostile in [
            "",
            "Ana should call Ben.",
            r#"{"planning": "x", "planning_importance": 5, "memo": "y"}"#,
            r#"{"planning": "", "planning_importance": 5, "memo": "y", "memo_importance": 2}"#,
            r#"{"planning": "x", "planning_importance": 0, "memo": "y", "memo_importance": 2}"#,
            r#"{"planning": ["x"], "planning_importance": 5, "memo": "y", "memo_importance": 2}"#,
            r#"{"planning": "x", "planning_importance": 5, "memo": "y", "memo_importance": 99}"#,
            r#"{"planning": "x", "planning_importance": 5, "memo": "y", "memo_importance": true}"#,
        ] {
            assert!(p.parse(hostile).is_err(), "accepted {hostile:?}");
        }
        let safe = p.fail_safe();
        assert!(safe.planning.contains("Ben Ode") && safe.memo.contains("Ben Ode"));
        assert_eq!(
            safe.memo_poignancy,
            super::super::perceive::THOUGHT_POIGNANCY_FAIL_SAFE
        );
    }

    #[test]
    fn talk_and_react() {
        let talk = DecideToTalk::default();
        assert_eq!(talk.parse("Yes."), Ok(true));
        assert_eq!(talk.parse("no"), Ok(false));
        assert!(talk.parse("perhaps").is_err());
        assert!(!talk.fail_safe());
        assert_eq!(talk.output_for_option(0), Some(true));
        let react = DecideToReact::default();
        assert_eq!(react.parse("Option 1"), Ok(ReactChoice::Wait));
        assert_eq!(
            react.parse("I pick option 2, not option 1"),
            Ok(ReactChoice::KeepGoing)
        );
        assert_eq!(react.parse("2"), Ok(ReactChoice::KeepGoing));
        assert!(react.parse("12").is_err());
        assert_eq!(react.parse("She should wait."), Ok(ReactChoice::Wait));
        assert_eq!(react.fail_safe(), ReactChoice::KeepGoing);
    }

    #[test]
    fn utterances() {
        let p = NextUtterance {
            name: "Mira Okafor".into(),
            partner: "Sam Lindqvist".into(),
            ..Default::default()
        };
        assert_eq!(
            p.parse("Sure: {\"utterance\": \"Mira: Hi Sam!\", \"end\": false}"),
            Ok(Utterance {
                text: "Hi Sam!".into(),
                end: false
            })
        );
        assert_eq!(
            p.parse("{\"utterance\": \"Bye\", \"end\": \"yes\"}")
                .map(|u| u.end),
            Ok(true)
        );
        assert_eq!(
            p.parse("{\"utterance\": \"Bye\", \"end\": 0}")
                .map(|u| u.end),
            Ok(false)
        );
        assert!(p.parse("{\"utterance\": \"Bye\"}").is_err());
        assert!(p.parse("{\"utterance\": \"  \", \"end\": true}").is_err());
        assert!(p.parse("{\"utterance\": 3, \"end\": true}").is_err());
        assert!(p.parse("Hi Sam!").is_err());
        let long = format!(
            "{{\"utterance\": \"{}\", \"end\": false}}",
            "a".repeat(1000)
        );
        assert_eq!(p.parse(&long).map(|u| u.text.chars().count()), Ok(300));
        let fs = p.fail_safe();
        assert!(fs.end);
        assert_eq!(
            fs.text,
            "It was nice talking with you, Sam. I should get going."
        );
    }

    #[test]
    fn summaries() {
        let p = ConversationSummary::default();
        assert_eq!(
            p.parse("conversing about the open mic."),
            Ok("conversing about the open mic".into())
        );
        assert_eq!(
            p.parse("They were discussing Sam's new song"),
            Ok("conversing about Sam's new song".into())
        );
        assert!(p.parse("Nice weather").is_err());
        assert!(p.parse("conversing about").is_err());
        assert_eq!(p.fail_safe(), "conversing about the day");
        let r = RelationshipSummary {
            name: "A".into(),
            partner: "B".into(),
            ..Default::default()
        };
        assert_eq!(r.fail_safe(), "A and B know each other a little.");
        assert_eq!(
            r.parse("Answer: \"They are friends.\""),
            Ok("They are friends.".into())
        );
    }
}
