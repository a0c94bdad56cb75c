//! The new-day identity revision (SPEC §3.6) — a planning note and a feelings note in the
//! first person, then the new `currently` and daily-plan requirement — and the whisper, an
//! inner voice turned into a thought (SPEC §7).

use super::text::{free_text, list_items, truncate_chars};
use super::{hour_text, numbered_list, readable_place};
use crate::llm::ChatRequest;
use crate::prompt::{
    Garble, ParseError, Prompt, PromptLibrary, TemplateError, garbled, garbled_items,
};

/// The most characters kept of a note or status.
const MAX_NOTE_CHARS: usize = 600;

/// What the persona should keep in mind while planning today, first person (SPEC §3.6).
/// Fail-safe: "I will keep to my usual routine today."
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReviseIdentityPlanNote {
    /// The persona's full name.
    pub name: String,
    /// Today's date as text.
    pub date_text: String,
    /// Retrieved statements about the plan and recent events.
    pub memories: Vec<String>,
}

impl Prompt for ReviseIdentityPlanNote {
    type Output = String;

    fn kind(&self) -> &'static str {
        "revise_identity_plan_note"
    }

    fn request(&self, library: &PromptLibrary) -> Result<ChatRequest, TemplateError> {
        let inputs = [
            self.name.clone(),
            self.date_text.clone(),
            numbered_list(&self.memories),
        ];
        let prompt = library.fill(self.kind(), &inputs)?;
        Ok(ChatRequest::new(self.kind(), prompt)
            .with_max_tokens(200)
            .with_temperature(0.5))
    }

    fn parse(&self, cleaned: &str) -> Result<String, ParseError> {
        free_text(cleaned, MAX_NOTE_CHARS, false)
    }

    fn fail_safe(&self) -> String {
        "I will keep to my usual routine today.".to_string()
    }

    fn garbled(&self, output: &String) -> Option<Garble> {
        garbled(output)
    }
}

/// How the persona feels about the days just past, first person (SPEC §3.6).
/// Fail-safe: "I feel settled and ready for the day."
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReviseIdentityFeelings {
    /// The persona's full name.
    pub name: String,
    /// Today's date as text.
    pub date_text: String,
    /// Retrieved statements about the plan and recent events.
    pub memories: Vec<String>,
}

impl Prompt for ReviseIdentityFeelings {
    type Output = String;

    fn kind(&self) -> &'static str {
        "revise_identity_feelings"
    }

    fn request(&self, library: &PromptLibrary) -> Result<ChatRequest, TemplateError> {
        let inputs = [
            self.name.clone(),
            self.date_text.clone(),
            numbered_list(&self.memories),
        ];
        let prompt = library.fill(self.kind(), &inputs)?;
        Ok(ChatRequest::new(self.kind(), prompt)
            .with_max_tokens(200)
            .with_temperature(0.5))
    }

    fn parse(&self, cleaned: &str) -> Result<String, ParseError> {
        free_text(cleaned, MAX_NOTE_CHARS, false)
    }

    fn fail_safe(&self) -> String {
        "I feel settled and ready for the day.".to_string()
    }

    fn garbled(&self, output: &String) -> Option<Garble> {
        garbled(output)
    }
}

/// The persona's new status (`currently`), third person, with concrete times and places
/// (SPEC §3.6). Fail-safe: the previous status, or `"<name> is going about the day."` when
/// there was none.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReviseIdentityCurrently {
    /// The persona's full name.
    pub name: String,
    /// Today's date as text.
    pub date_text: String,
    /// The previous `currently`.
    pub previous: String,
    /// This morning's [`ReviseIdentityPlanNote`].
    pub plan_note: String,
    /// This morning's [`ReviseIdentityFeelings`].
    pub feelings: String,
}

impl Prompt for ReviseIdentityCurrently {
    type Output = String;

    fn kind(&self) -> &'static str {
        "revise_identity_currently"
    }

    fn request(&self, library: &PromptLibrary) -> Result<ChatRequest, TemplateError> {
        let inputs = [
            self.name.clone(),
            self.date_text.clone(),
            self.previous.clone(),
            self.plan_note.clone(),
            self.feelings.clone(),
        ];
        let prompt = library.fill(self.kind(), &inputs)?;
        Ok(ChatRequest::new(self.kind(), prompt)
            .with_max_tokens(200)
            .with_temperature(0.5))
    }

    fn parse(&self, cleaned: &str) -> Result<String, ParseError> {
        free_text(cleaned, MAX_NOTE_CHARS, false)
    }

    fn fail_safe(&self) -> String {
        let previous = self.previous.trim();
        if previous.is_empty() {
            format!("{} is going about the day.", self.name)
        } else {
            previous.to_string()
        }
    }

    fn garbled(&self, output: &String) -> Option<Garble> {
        garbled(output)
    }
}

/// The new daily-plan requirement: 4–6 goals with times (SPEC §3.6). The caller joins them
/// into `Scratch::daily_plan_req`. Fail-safe: a generic 5-item day around the workplace.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReviseIdentityDailyReq {
    /// The identity summary, with the new `currently`.
    pub identity: String,
    /// The persona's first name.
    pub first_name: String,
    /// Today's date as text.
    pub date_text: String,
    /// The wake-up hour.
    pub wake_up_hour: u32,
    /// Home address.
    pub home: String,
    /// Workplace address, if any.
    pub workplace: Option<String>,
}

impl ReviseIdentityDailyReq {
    /// Fewest items accepted.
    pub const MIN_ITEMS: usize = 4;
    /// Most items accepted.
    pub const MAX_ITEMS: usize = 6;
}

impl Prompt for ReviseIdentityDailyReq {
    type Output = Vec<String>;

    fn kind(&self) -> &'static str {
        "revise_identity_daily_req"
    }

    fn request(&self, library: &PromptLibrary) -> Result<ChatRequest, TemplateError> {
        let workplace = self
            .workplace
            .as_deref()
            .map(readable_place)
            .filter(|w| !w.is_empty())
            .unwrap_or_else(|| "none".to_string());
        let inputs = [
            self.identity.clone(),
            self.first_name.clone(),
            self.date_text.clone(),
            hour_text(self.wake_up_hour.min(23)),
            readable_place(&self.home),
            workplace,
        ];
        let prompt = library.fill(self.kind(), &inputs)?;
        Ok(ChatRequest::new(self.kind(), prompt)
            .with_max_tokens(300)
            .with_temperature(0.5))
    }

    fn parse(&self, cleaned: &str) -> Result<Vec<String>, ParseError> {
        let items: Vec<String> = list_items(cleaned)
            .into_iter()
            .map(|item| truncate_chars(&item, 150).to_string())
            .collect();
        if (Self::MIN_ITEMS..=Self::MAX_ITEMS).contains(&items.len()) {
            Ok(items)
        } else {
            Err(ParseError::new(format!(
                "expected {} to {} goals, got {}",
                Self::MIN_ITEMS,
                Self::MAX_ITEMS,
                items.len()
            )))
        }
    }

    fn fail_safe(&self) -> Vec<String> {
        let wake = self.wake_up_hour.min(23);
        let work = match self
            .workplace
            .as_deref()
            .map(readable_place)
            .filter(|w| !w.is_empty())
        {
            Some(place) => format!("work at {place} during the day"),
            None => "take care of the day's tasks".to_string(),
        };
        vec![
            format!("wake up at {} and get ready", hour_text(wake)),
            work,
            "have lunch at 12:00 pm".to_string(),
            "have dinner at 6:00 pm".to_string(),
            "go to bed by 11:00 pm".to_string(),
        ]
    }

    fn garbled(&self, output: &Vec<String>) -> Option<Garble> {
        garbled_items(output, super::plan::PLAN_RULES)
    }
}

/// An inner voice ("you want to open a bakery") rewritten as a third-person thought about the
/// persona (SPEC §7, the original's whisper). Fail-safe: `"<name> thinks: <whisper>"`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WhisperThought {
    /// The persona's full name.
    pub name: String,
    /// The whisper.
    pub whisper: String,
}

impl Prompt for WhisperThought {
    type Output = String;

    fn kind(&self) -> &'static str {
        "whisper_thought"
    }

    fn request(&self, library: &PromptLibrary) -> Result<ChatRequest, TemplateError> {
        let prompt = library.fill(self.kind(), &[self.name.as_str(), self.whisper.as_str()])?;
        Ok(ChatRequest::new(self.kind(), prompt)
            .with_max_tokens(100)
            .with_temperature(0.3))
    }

    fn parse(&self, cleaned: &str) -> Result<String, ParseError> {
        free_text(cleaned, 300, true)
    }

    fn fail_safe(&self) -> String {
        let whisper = self
            .whisper
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        format!("{} thinks: {}", self.name, truncate_chars(&whisper, 300))
    }

    fn garbled(&self, output: &String) -> Option<Garble> {
        garbled(output)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_and_status() {
        let p = ReviseIdentityPlanNote::default();
        assert_eq!(
            p.parse("Answer: I will  meet Sam\nat 3 pm."),
            Ok("I will meet Sam at 3 pm.".into())
        );
        assert!(p.parse("  ").is_err());
        let c = ReviseIdentityCurrently {
            name: "Mira".into(),
            previous: " Mira runs the cafe. ".into(),
            ..Default::default()
        };
        assert_eq!(c.fail_safe(), "Mira runs the cafe.");
        assert_eq!(
            ReviseIdentityCurrently {
                previous: String::new(),
                ..c
            }
            .fail_safe(),
            "Mira is going about the day."
        );
    }

    #[test]
    fn daily_requirement() {
        let p = ReviseIdentityDailyReq {
            wake_up_hour: 7,
            workplace: Some("W:Elm Street Grocery:store".into()),
            ..Default::default()
        };
        assert_eq!(p.parse("1) a\n2) b\n3) c\n4) d").unwrap().len(), 4);
        assert!(p.parse("1) a\n2) b\n3) c").is_err());
        assert!(p.parse("1) a\n2) b\n3) c\n4) d\n5) e\n6) f\n7) g").is_err());
        let fs = p.fail_safe();
        assert_eq!(fs.len(), 5);
        assert_eq!(fs[0], "wake up at 7:00 am and get ready");
        assert_eq!(fs[1], "work at Elm Street Grocery, store during the day");
        let w = WhisperThought {
            name: "Sam".into(),
            whisper: "you  should play tonight".into(),
        };
        assert_eq!(w.fail_safe(), "Sam thinks: you should play tonight");
    }
}
