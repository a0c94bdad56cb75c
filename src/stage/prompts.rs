//! The two model calls of a stage turn (SPEC §9), each with its parser and fail-safe:
//!
//! | prompt | asked | answer | fail-safe |
//! | --- | --- | --- | --- |
//! | `ActorTurn` (`stage_actor`) | by every actor at once | JSON `{"observation", "plan"}`, first person | "I wait and watch." |
//! | `StageResolve` (`stage_resolve`) | once, after every plan | JSON `{"summary", "updates": [...], "environment"?}` | a neutral narration, no updates |
//!
//! The stage agent's updates are parsed leniently — a wrongly typed field or update is skipped,
//! not fatal — and validated when applied ([`Scene::apply`](super::Scene::apply)): what the
//! model writes can never make an actor invalid.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::dialogue::prompts::{spoken_text, truncate_chars};
use crate::llm::ChatRequest;
use crate::prompt::{ParseError, Prompt, PromptLibrary, TemplateError};

use super::actor::{MAX_EFFECTS, MAX_FIELD_CHARS, MAX_TEXT_CHARS};
use super::scene::{ActorUpdate, Resolution};

/// Longest observation or plan kept, in characters.
pub const MAX_PLAN_CHARS: usize = 600;
/// Most updates of one resolution read.
const MAX_UPDATES: usize = 32;

/// An actor's observation and plan for the turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActorPlan {
    /// What it notices, first person.
    pub observation: String,
    /// What it means to do, first person.
    pub plan: String,
}

/// One actor observes and plans (template `stage_actor`).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ActorTurn {
    /// The actor.
    pub name: String,
    /// Its private block, JSON.
    pub actor_block: Value,
    /// The stage as it sees it, JSON.
    pub stage_block: Value,
    /// Who the actor is beyond the stage (a persona's identity), or empty.
    pub identity: String,
    /// Seed of the request.
    pub seed: u64,
}

impl Prompt for ActorTurn {
    type Output = ActorPlan;

    fn kind(&self) -> &'static str {
        "stage_actor"
    }

    fn request(&self, library: &PromptLibrary) -> Result<ChatRequest, TemplateError> {
        let identity = if self.identity.is_empty() {
            "(a character of the scene)".to_string()
        } else {
            self.identity.clone()
        };
        let prompt = library.fill(
            self.kind(),
            &[
                self.name.clone(),
                identity,
                pretty(&self.actor_block),
                pretty(&self.stage_block),
            ],
        )?;
        let mut request = ChatRequest::new(self.kind(), prompt)
            .with_max_tokens(220)
            .with_temperature(0.7);
        request.json_schema = Some(json!({
            "type": "object",
            "properties": {"observation": {"type": "string"}, "plan": {"type": "string"}},
            "required": ["observation", "plan"]
        }));
        request.seed = Some(self.seed);
        Ok(request)
    }

    fn parse(&self, cleaned: &str) -> Result<ActorPlan, ParseError> {
        let value = crate::prompt::extract_json(truncate_chars(cleaned, 20_000))
            .ok_or_else(|| ParseError::new("no JSON object in the answer"))?;
        let field = |name: &str| {
            value
                .get(name)
                .and_then(Value::as_str)
                .map(|s| spoken_text(truncate_chars(s.trim(), MAX_PLAN_CHARS)))
                .unwrap_or_default()
        };
        let plan = field("plan");
        if plan.is_empty() {
            return Err(ParseError::new("no plan"));
        }
        Ok(ActorPlan {
            observation: field("observation"),
            plan,
        })
    }

    fn fail_safe(&self) -> ActorPlan {
        ActorPlan {
            observation: String::new(),
            plan: "I wait and watch.".to_string(),
        }
    }
}

/// The stage agent resolves every plan at once (template `stage_resolve`).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct StageResolve {
    /// The stage's name.
    pub stage: String,
    /// Its environment.
    pub environment: String,
    /// Every actor's state and plan, Markdown.
    pub plans: String,
    /// The turn's number, from 1.
    pub turn: u32,
    /// Seed of the request.
    pub seed: u64,
}

impl Prompt for StageResolve {
    type Output = Resolution;

    fn kind(&self) -> &'static str {
        "stage_resolve"
    }

    fn request(&self, library: &PromptLibrary) -> Result<ChatRequest, TemplateError> {
        let prompt = library.fill(
            self.kind(),
            &[
                self.stage.clone(),
                self.environment.clone(),
                self.plans.clone(),
                self.turn.to_string(),
            ],
        )?;
        let mut request = ChatRequest::new(self.kind(), prompt)
            .with_max_tokens(400)
            .with_temperature(0.4);
        request.json_schema = Some(json!({
            "type": "object",
            "properties": {
                "summary": {"type": "string"},
                "environment": {"type": "string"},
                "updates": {"type": "array", "items": {"type": "object", "properties": {
                    "name": {"type": "string"},
                    "attributes": {"type": "object", "additionalProperties": {"type": "integer"}},
                    "effects_added": {"type": "array", "items": {"type": "string"}},
                    "effects_removed": {"type": "array", "items": {"type": "string"}},
                    "position": {"type": "string"},
                    "posture": {"type": "string"},
                    "special": {"type": "string"}
                }, "required": ["name"]}}
            },
            "required": ["summary", "updates"]
        }));
        request.seed = Some(self.seed);
        Ok(request)
    }

    fn parse(&self, cleaned: &str) -> Result<Resolution, ParseError> {
        parse_resolution(cleaned)
    }

    fn fail_safe(&self) -> Resolution {
        Resolution {
            summary: format!(
                "A tense moment passes in {}; nobody makes a decisive move.",
                self.stage
            ),
            updates: Vec::new(),
            environment: None,
        }
    }
}

fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_default()
}

/// Parses the stage agent's JSON: a non-empty `summary` is required; `updates` items are read
/// leniently (a non-object, a missing name, a non-integer delta, a non-string effect is
/// skipped); deltas are integers (a float is rounded; NaN and infinities are skipped).
pub(crate) fn parse_resolution(cleaned: &str) -> Result<Resolution, ParseError> {
    let value = crate::prompt::extract_json(truncate_chars(cleaned, 50_000))
        .ok_or_else(|| ParseError::new("no JSON object in the answer"))?;
    let object = value
        .as_object()
        .ok_or_else(|| ParseError::new("the answer is not a JSON object"))?;
    let summary = object
        .get("summary")
        .and_then(Value::as_str)
        .map(|s| spoken_text(truncate_chars(s.trim(), MAX_TEXT_CHARS)))
        .unwrap_or_default();
    if summary.is_empty() {
        return Err(ParseError::new("no summary"));
    }
    let strings = |v: Option<&Value>| -> Vec<String> {
        v.and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .take(MAX_EFFECTS)
                    .map(|s| truncate_chars(s, MAX_FIELD_CHARS).to_string())
                    .collect()
            })
            .unwrap_or_default()
    };
    let text = |v: Option<&Value>| {
        v.and_then(Value::as_str)
            .map(|s| truncate_chars(s, MAX_FIELD_CHARS * 2).to_string())
    };
    let updates = object
        .get("updates")
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .take(MAX_UPDATES)
                .filter_map(Value::as_object)
                .filter_map(|u| {
                    let name = u.get("name").and_then(Value::as_str)?.trim();
                    if name.is_empty() {
                        return None;
                    }
                    let deltas: BTreeMap<String, i64> = u
                        .get("attributes")
                        .and_then(Value::as_object)
                        .map(|a| {
                            a.iter()
                                .take(16)
                                .filter_map(|(k, v)| {
                                    let n = v.as_i64().or_else(|| {
                                        v.as_f64()
                                            .filter(|f| f.is_finite() && f.abs() < 1e12)
                                            .map(|f| f.round() as i64)
                                    })?;
                                    Some((truncate_chars(k, 60).to_string(), n))
                                })
                                .collect()
                        })
                        .unwrap_or_default();
                    Some(ActorUpdate {
                        name: truncate_chars(name, 60).to_string(),
                        deltas,
                        effects_added: strings(u.get("effects_added")),
                        effects_removed: strings(u.get("effects_removed")),
                        position: text(u.get("position")),
                        posture: text(u.get("posture")),
                        special: text(u.get("special")),
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    Ok(Resolution {
        summary,
        updates,
        environment: object
            .get("environment")
            .and_then(Value::as_str)
            .map(|s| truncate_chars(s, MAX_TEXT_CHARS).to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actor_plans_parse_or_fall_back() {
        let turn = ActorTurn {
            name: "Gascoigne".into(),
            ..ActorTurn::default()
        };
        let plan = turn
            .parse(r#"{"observation": "A stranger at the gate.", "plan": "<think>hm</think>I warn him off."}"#)
            .expect("parses");
        assert_eq!(plan.plan, "I warn him off.");
        for bad in [
            "",
            "I attack!",
            "{}",
            r#"{"plan": "  "}"#,
            r#"{"plan": 3}"#,
            "[1]",
        ] {
            assert!(turn.parse(bad).is_err(), "{bad:?}");
        }
        assert_eq!(turn.fail_safe().plan, "I wait and watch.");
    }

    #[test]
    fn resolutions_parse_leniently_and_garbage_is_refused() {
        let r = parse_resolution(
            r#"```json
{"summary": "The axe falls.", "environment": "Snow.",
 "updates": [
   {"name": "Stranger", "attributes": {"health": -12, "attack": 1.6, "luck": "lots"},
    "effects_added": ["bleeding", 3], "posture": "kneeling"},
   {"attributes": {"health": -5}},
   "not an update",
   {"name": "  "}
 ]}
```"#,
        )
        .expect("parses");
        assert_eq!(r.summary, "The axe falls.");
        assert_eq!(r.updates.len(), 1);
        let u = &r.updates[0];
        assert_eq!(
            u.deltas,
            BTreeMap::from([("attack".to_string(), 2), ("health".to_string(), -12)])
        );
        assert_eq!(u.effects_added, ["bleeding"]);
        assert_eq!(u.posture.as_deref(), Some("kneeling"));
        assert_eq!(r.environment.as_deref(), Some("Snow."));
        for bad in [
            "",
            "The axe falls and the stranger bleeds.",
            "{",
            r#"{"updates": []}"#,
            r#"{"summary": 5}"#,
            r#"{"summary": "   "}"#,
            r#"["summary"]"#,
            "null",
        ] {
            assert!(parse_resolution(bad).is_err(), "{bad:?}");
        }
        // Updates of the wrong type are no updates, not an error.
        let r =
            parse_resolution(r#"{"summary": "Quiet.", "updates": {"name": "x"}}"#).expect("parses");
        assert!(r.updates.is_empty());
        let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
        assert!(parse_resolution(&deep).is_err());
    }
}
