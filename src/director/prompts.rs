//! The director's questions to a model, each a typed [`Prompt`] with a parser and a fail-safe:
//!
//! | kind | asks | fail-safe |
//! | --- | --- | --- |
//! | `director_intent` | the intent JSON | `Intent::from_text` (names found in the text) |
//! | `director_plan` | steps and checks | no plan (the directive fails with the reason) |
//! | `director_validate` | continue / replan / ask_user after a step | the rule: a failed step replans, a done one continues |
//! | `director_replan` | the remaining steps | no plan (fails with the reason) |
//! | `director_review` | the review's prose | the checks and step results listed |
//!
//! Every user text in a prompt is neutralised (`neutralise`); answers are JSON read through
//! [`extract_json`] and bounded before anything looks at them.

use serde_json::{Value, json};

use crate::dialogue::prompts::neutralise;
use crate::llm::ChatRequest;
use crate::prompt::{ParseError, Prompt, PromptLibrary, TemplateError, extract_json};

use super::intent::Intent;

/// The town as the director's prompts show it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct TownBrief {
    /// The game time now (`2023-02-13 09:30`).
    pub now: String,
    /// The personas' full names.
    pub personas: Vec<String>,
    /// The arenas' names.
    pub places: Vec<String>,
    /// The director's skills as the planner lists them.
    pub skills: String,
    /// The allowed skill names (the plan's JSON schema enumerates them).
    pub skill_names: Vec<String>,
}

impl TownBrief {
    fn personas_line(&self) -> String {
        self.personas.join(", ")
    }

    fn places_line(&self) -> String {
        self.places.join(", ")
    }
}

/// The JSON schema of a plan answer (for constrained decoding).
fn plan_schema(skills: &[String]) -> Value {
    json!({
        "type": "object",
        "properties": {
            "steps": {"type": "array", "minItems": 1, "maxItems": super::plan::MAX_STEPS, "items": {
                "type": "object",
                "properties": {
                    "id": {"type": "integer", "minimum": 1, "maximum": 99},
                    "skill": {"type": "string", "enum": skills},
                    "args": {"type": "object"},
                    "depends_on": {"type": "array", "items": {"type": "integer", "minimum": 1, "maximum": 99}},
                    "estimated_tokens": {"type": "integer", "minimum": 0, "maximum": 9999}
                },
                "required": ["id", "skill", "args"]
            }},
            "checks": {"type": "array", "maxItems": super::plan::MAX_CHECKS, "items": {
                "type": "object",
                "properties": {
                    "place": {"type": "string"},
                    "from": {"type": "string"},
                    "to": {"type": "string"}
                },
                "required": ["place", "from", "to"]
            }}
        },
        "required": ["steps"]
    })
}

fn json_object(cleaned: &str) -> Result<Value, ParseError> {
    let value = extract_json(cleaned).ok_or_else(|| ParseError::new("no JSON in the answer"))?;
    if value.is_object() {
        Ok(value)
    } else {
        Err(ParseError::new("not a JSON object"))
    }
}

/// The intent parser.
#[derive(Debug, Clone, Default)]
pub(crate) struct DirectorIntent {
    /// The directive (neutralised).
    pub directive: String,
    /// The town.
    pub town: TownBrief,
}

impl Prompt for DirectorIntent {
    type Output = Intent;

    fn kind(&self) -> &'static str {
        "director_intent"
    }

    fn request(&self, library: &PromptLibrary) -> Result<ChatRequest, TemplateError> {
        let prompt = library.fill(
            self.kind(),
            &[
                self.directive.as_str(),
                &self.town.now,
                &self.town.personas_line(),
                &self.town.places_line(),
            ],
        )?;
        Ok(ChatRequest::new(self.kind(), prompt)
            .with_max_tokens(300)
            .with_temperature(0.0)
            .with_json_schema(json!({
                "type": "object",
                "properties": {
                    "type": {"type": "string"},
                    "entities": {"type": "object", "properties": {
                        "characters": {"type": "array", "items": {"type": "string"}, "maxItems": 25},
                        "places": {"type": "array", "items": {"type": "string"}, "maxItems": 25},
                        "times": {"type": "array", "items": {"type": "string"}, "maxItems": 25},
                        "plot_elements": {"type": "array", "items": {"type": "string"}, "maxItems": 25}
                    }},
                    "constraints": {"type": "object"},
                    "complexity": {"type": "string", "enum": ["simple", "moderate", "complex"]}
                },
                "required": ["type", "entities", "complexity"]
            })))
    }

    fn parse(&self, cleaned: &str) -> Result<Intent, ParseError> {
        Intent::from_json(&json_object(cleaned)?)
            .ok_or_else(|| ParseError::new("not an intent (no `type`)"))
    }

    fn fail_safe(&self) -> Intent {
        Intent::from_text(&self.directive, &self.town.personas, &self.town.places)
    }
}

/// The task planner: the directive and its intent → steps and checks (raw JSON; the plan is
/// read and checked by the caller, which knows the town).
#[derive(Debug, Clone, Default)]
pub(crate) struct DirectorPlan {
    /// The directive (neutralised).
    pub directive: String,
    /// The intent, as JSON.
    pub intent: String,
    /// The town.
    pub town: TownBrief,
}

impl Prompt for DirectorPlan {
    type Output = Option<Value>;

    fn kind(&self) -> &'static str {
        "director_plan"
    }

    fn request(&self, library: &PromptLibrary) -> Result<ChatRequest, TemplateError> {
        let prompt = library.fill(
            self.kind(),
            &[
                self.directive.as_str(),
                &self.intent,
                &self.town.now,
                &self.town.personas_line(),
                &self.town.places_line(),
                &self.town.skills,
            ],
        )?;
        Ok(plan_request(self.kind(), prompt, &self.town.skill_names))
    }

    fn parse(&self, cleaned: &str) -> Result<Option<Value>, ParseError> {
        parse_plan(cleaned)
    }

    fn fail_safe(&self) -> Option<Value> {
        None
    }
}

/// What validation decided after a step.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) enum Decision {
    /// Go on with the next step.
    Continue,
    /// Rewrite the remaining steps, for this reason.
    Replan(String),
    /// Ask the user this.
    AskUser(String),
}

/// The validator after each step.
#[derive(Debug, Clone, Default)]
pub(crate) struct DirectorValidate {
    /// The directive (neutralised).
    pub directive: String,
    /// The step that ran, as the planner wrote it.
    pub step: String,
    /// Its result (or error).
    pub result: String,
    /// Whether it failed.
    pub failed: bool,
    /// The steps still to come, one per line.
    pub remaining: String,
    /// The user's answers so far, if any.
    pub answers: String,
}

impl Prompt for DirectorValidate {
    type Output = Decision;

    fn kind(&self) -> &'static str {
        "director_validate"
    }

    fn request(&self, library: &PromptLibrary) -> Result<ChatRequest, TemplateError> {
        let status = if self.failed { "FAILED" } else { "done" };
        let prompt = library.fill(
            self.kind(),
            &[
                self.directive.as_str(),
                &self.step,
                status,
                &self.result,
                &self.remaining,
                &self.answers,
            ],
        )?;
        Ok(ChatRequest::new(self.kind(), prompt)
            .with_max_tokens(150)
            .with_temperature(0.0)
            .with_json_schema(json!({
                "type": "object",
                "properties": {
                    "decision": {"type": "string", "enum": ["continue", "replan", "ask_user"]},
                    "reason": {"type": "string", "maxLength": 300},
                    "question": {"type": "string", "maxLength": 300}
                },
                "required": ["decision", "reason"]
            })))
    }

    fn parse(&self, cleaned: &str) -> Result<Decision, ParseError> {
        let value = json_object(cleaned)?;
        let text = |key: &str| {
            value
                .get(key)
                .and_then(Value::as_str)
                .map(|s| neutralise(s.trim(), 300))
                .filter(|s| !s.is_empty())
        };
        match value.get("decision").and_then(Value::as_str) {
            Some("continue") => Ok(Decision::Continue),
            Some("replan") => {
                Ok(Decision::Replan(text("reason").unwrap_or_else(|| {
                    "the step did not do what was meant".into()
                })))
            }
            Some("ask_user") => text("question")
                .or_else(|| text("reason"))
                .map(Decision::AskUser)
                .ok_or_else(|| ParseError::new("ask_user without a question")),
            _ => Err(ParseError::new(
                "`decision` is not continue, replan or ask_user",
            )),
        }
    }

    fn fail_safe(&self) -> Decision {
        if self.failed {
            Decision::Replan(format!(
                "the step failed: {}",
                neutralise(&self.result, 300)
            ))
        } else {
            Decision::Continue
        }
    }
}

/// The replanner: the remaining steps, given what was done and why the plan changes.
#[derive(Debug, Clone, Default)]
pub(crate) struct DirectorReplan {
    /// The directive (neutralised).
    pub directive: String,
    /// The steps done, with their results, one per line.
    pub done: String,
    /// The steps that were still to come, one per line.
    pub remaining: String,
    /// Why the plan changes.
    pub reason: String,
    /// The lowest number a new step may have.
    pub next_id: u32,
    /// The town.
    pub town: TownBrief,
}

impl Prompt for DirectorReplan {
    type Output = Option<Value>;

    fn kind(&self) -> &'static str {
        "director_replan"
    }

    fn request(&self, library: &PromptLibrary) -> Result<ChatRequest, TemplateError> {
        let prompt = library.fill(
            self.kind(),
            &[
                self.directive.as_str(),
                &self.done,
                &self.remaining,
                &self.reason,
                &self.next_id.to_string(),
                &self.town.now,
                &self.town.personas_line(),
                &self.town.places_line(),
                &self.town.skills,
            ],
        )?;
        Ok(plan_request(self.kind(), prompt, &self.town.skill_names))
    }

    fn parse(&self, cleaned: &str) -> Result<Option<Value>, ParseError> {
        parse_plan(cleaned)
    }

    fn fail_safe(&self) -> Option<Value> {
        None
    }
}

/// The reviewer's prose, from the checks measured in the town and the step results.
#[derive(Debug, Clone, Default)]
pub(crate) struct DirectorReview {
    /// The directive (neutralised).
    pub directive: String,
    /// The steps and their results, one per line.
    pub steps: String,
    /// The checks and what the town showed, one per line.
    pub checks: String,
    /// What was said in group talk and played on stages while it ran
    /// ([`Evidence::text`](super::witness::Evidence::text)), or empty.
    pub evidence: String,
}

impl Prompt for DirectorReview {
    type Output = String;

    fn kind(&self) -> &'static str {
        "director_review"
    }

    fn request(&self, library: &PromptLibrary) -> Result<ChatRequest, TemplateError> {
        let prompt = library.fill(
            self.kind(),
            &[
                self.directive.as_str(),
                &self.steps,
                &self.checks,
                &self.evidence,
            ],
        )?;
        Ok(ChatRequest::new(self.kind(), prompt)
            .with_max_tokens(300)
            .with_temperature(0.2))
    }

    fn parse(&self, cleaned: &str) -> Result<String, ParseError> {
        let text = neutralise(cleaned.trim(), 1_500);
        if text.trim().is_empty() {
            Err(ParseError::new("an empty review"))
        } else {
            Ok(text)
        }
    }

    fn fail_safe(&self) -> String {
        let mut text = format!("Directive: {}\nSteps:\n{}", self.directive, self.steps);
        if !self.checks.is_empty() {
            text.push_str("\nChecks:\n");
            text.push_str(&self.checks);
        }
        if !self.evidence.is_empty() {
            text.push_str("\nWhat the town said and played:\n");
            text.push_str(&self.evidence);
        }
        neutralise(&text, 1_500)
    }
}

/// A plan's request (the planner's and the replanner's): up to 900 tokens, deterministic,
/// constrained to the plan schema over `skills`.
fn plan_request(kind: &'static str, prompt: String, skills: &[String]) -> ChatRequest {
    ChatRequest::new(kind, prompt)
        .with_max_tokens(900)
        .with_temperature(0.0)
        .with_json_schema(plan_schema(skills))
}

/// A plan answer: a JSON object with a `steps` list (checked step by step later).
fn parse_plan(cleaned: &str) -> Result<Option<Value>, ParseError> {
    let value = json_object(cleaned)?;
    if value.get("steps").and_then(Value::as_array).is_none() {
        return Err(ParseError::new("no `steps` list"));
    }
    Ok(Some(value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_answers_and_their_fail_safe() {
        let p = DirectorValidate::default();
        assert_eq!(
            p.parse(r#"{"decision":"continue","reason":"ok"}"#),
            Ok(Decision::Continue)
        );
        assert_eq!(
            p.parse(r#"{"decision":"ask_user","reason":"r","question":"Which café?"}"#),
            Ok(Decision::AskUser("Which café?".into()))
        );
        assert_eq!(
            p.parse(r#"{"decision":"replan","reason":""}"#),
            Ok(Decision::Replan(
                "the step did not do what was meant".into()
            ))
        );
        for bad in [
            "",
            "continue",
            r#"{"decision":"delete"}"#,
            r#"{"decision":"ask_user"}"#,
            "[1]",
        ] {
            assert!(p.parse(bad).is_err(), "{bad:?}");
        }
        assert_eq!(p.fail_safe(), Decision::Continue);
        let failed = DirectorValidate {
            failed: true,
            result: "no place called `moon`".into(),
            ..Default::default()
        };
        assert!(matches!(failed.fail_safe(), Decision::Replan(r) if r.contains("moon")));
    }

    #[test]
    fn plan_answers_need_a_step_list() {
        let p = DirectorPlan::default();
        assert!(p.parse(r#"{"steps": []}"#).is_ok());
        assert!(p.parse(r#"{"plan": []}"#).is_err());
        assert!(p.parse("I would whisper to Ada.").is_err());
        assert_eq!(p.fail_safe(), None);
    }
}
