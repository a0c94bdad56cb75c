//! What the director means to do: the parsed intent, the plan's steps and the outcome checks,
//! read from model JSON and checked against the town before anything runs.
//!
//! A plan is untrusted: it comes from a model that read a player's text. [`Plan::from_json`]
//! bounds it (steps, text, nesting), and [`PlanChecker::check`] refuses a plan whose step uses
//! a skill that is unknown or off the director's allow-list, whose arguments break the skill's
//! JSON schema, names a persona or place the town does not have, gives a time that is no time,
//! or depends on a step that does not come before it. Only a plan that passes runs; one that
//! does not is sent back to the model with the reason (a replan) or fails with it.

use std::collections::BTreeSet;

use chrono::{NaiveDate, NaiveDateTime, NaiveTime};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::dialogue::prompts::neutralise;
use crate::dialogue::{ToolAllowList, ToolHandler, ToolRegistry};

/// Most steps in a plan.
pub(crate) const MAX_STEPS: usize = 20;
/// Most outcome checks in a plan.
pub(crate) const MAX_CHECKS: usize = 8;
/// Longest text argument kept (characters).
pub(crate) const MAX_ARG_CHARS: usize = 1_000;

/// A step's precondition: run it only when an earlier step's result does (or does not) contain
/// a text (ignoring case). Otherwise the step is skipped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Condition {
    /// The earlier step.
    pub step: u32,
    /// The text to look for in its result.
    pub contains: String,
    /// Run when the text is *not* there.
    #[serde(default)]
    pub negate: bool,
}

impl Condition {
    /// Whether the step runs, given the earlier step's result text.
    pub fn holds(&self, result: &str) -> bool {
        let found = result
            .to_lowercase()
            .contains(&self.contains.to_lowercase());
        found != self.negate
    }
}

/// One step: a skill with its arguments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanStep {
    /// The step's number (unique in the plan).
    pub id: u32,
    /// The skill (a director tool's name).
    pub skill: String,
    /// Its arguments (a JSON object).
    pub args: Value,
    /// Steps that must be done first.
    #[serde(default)]
    pub depends_on: Vec<u32>,
    /// Run only if this holds.
    #[serde(default)]
    pub condition: Option<Condition>,
    /// The model's estimate of the tokens the step costs.
    #[serde(default)]
    pub estimated_tokens: u32,
}

/// An outcome the reviewer checks in the town.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutcomeCheck {
    /// The arena (any name the town resolves).
    pub place: String,
    /// From (game time).
    pub from: NaiveDateTime,
    /// To (game time).
    pub to: NaiveDateTime,
}

/// A plan: ordered steps and the checks of its outcome.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// The steps, in order.
    pub steps: Vec<PlanStep>,
    /// Who-was-where checks for the review.
    pub checks: Vec<OutcomeCheck>,
}

/// Why a plan was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// The answer is not a plan at all.
    #[error("not a plan: {0}")]
    Shape(String),
    /// The plan has no step.
    #[error("the plan has no step")]
    Empty,
    /// Too many steps.
    #[error("the plan has {0} steps; at most {MAX_STEPS}")]
    TooLong(usize),
    /// Two steps share a number.
    #[error("step {0} appears twice")]
    DuplicateId(u32),
    /// No such skill.
    #[error("step {step}: no skill called `{skill}`")]
    UnknownSkill {
        /// The step.
        step: u32,
        /// The skill.
        skill: String,
    },
    /// The skill is not on the director's allow-list.
    #[error("step {step}: the director may not use `{skill}`")]
    NotAllowed {
        /// The step.
        step: u32,
        /// The skill.
        skill: String,
    },
    /// The arguments break the skill's schema.
    #[error("step {step} ({skill}): {reason}")]
    BadArguments {
        /// The step.
        step: u32,
        /// The skill.
        skill: String,
        /// The first problem.
        reason: String,
    },
    /// An argument names a persona the town does not have.
    #[error("step {step}: nobody called `{name}` lives in town")]
    UnknownPersona {
        /// The step.
        step: u32,
        /// The name.
        name: String,
    },
    /// An argument names a place the town does not have.
    #[error("step {step}: no place called `{place}` in town")]
    UnknownPlace {
        /// The step.
        step: u32,
        /// The place.
        place: String,
    },
    /// A time that is no time.
    #[error("step {step}: {reason}")]
    BadTime {
        /// The step (0 for a check).
        step: u32,
        /// Why.
        reason: String,
    },
    /// A dependency or condition on a step that does not come before.
    #[error("step {step} depends on step {on}, which does not come before it")]
    BadDependency {
        /// The step.
        step: u32,
        /// The step it names.
        on: u32,
    },
}

/// Reads a time a plan gives: `2023-02-14 17:00`, `2023-02-14T17:00[:00]`, `Feb 14 17:00`
/// (this year) or `17:00` (the next 17:00 from `now`, today if not yet past).
pub(crate) fn parse_game_time(text: &str, now: NaiveDateTime) -> Result<NaiveDateTime, String> {
    let text = text.trim();
    if text.is_empty() || text.len() > 40 {
        return Err(format!("`{}` is not a game time", neutralise(text, 40)));
    }
    for format in [
        "%Y-%m-%d %H:%M",
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%d %H:%M:%S",
        "%Y-%m-%dT%H:%M:%S",
    ] {
        if let Ok(t) = NaiveDateTime::parse_from_str(text, format) {
            return Ok(t);
        }
    }
    for format in ["%b %d %H:%M", "%B %d %H:%M"] {
        let with_year = format!("{} {text}", now.format("%Y"));
        if let Ok(t) = NaiveDateTime::parse_from_str(&with_year, &format!("%Y {format}")) {
            return Ok(t);
        }
    }
    if let Ok(time) = NaiveTime::parse_from_str(text, "%H:%M") {
        let today = now.date().and_time(time);
        return Ok(if today >= now {
            today
        } else {
            today + chrono::Duration::days(1)
        });
    }
    if let Ok(date) = NaiveDate::parse_from_str(text, "%Y-%m-%d") {
        return date
            .and_hms_opt(0, 0, 0)
            .ok_or_else(|| "not a time".to_string());
    }
    Err(format!(
        "`{}` is not a game time (use YYYY-MM-DD HH:MM or HH:MM)",
        neutralise(text, 40)
    ))
}

/// The value of `key` in a JSON object as a bounded, neutralised string.
pub(crate) fn text_arg(args: &Value, key: &str) -> String {
    args.get(key)
        .and_then(Value::as_str)
        .map(|s| neutralise(s, MAX_ARG_CHARS))
        .unwrap_or_default()
}

impl Plan {
    /// Reads a plan from model JSON (`{"steps": [...], "checks": [...]}`), bounding it. Step
    /// numbers missing from the answer are given in order; `now` reads check times.
    pub fn from_json(value: &Value, now: NaiveDateTime) -> Result<Self, PlanError> {
        let object = value
            .as_object()
            .ok_or_else(|| PlanError::Shape("expected a JSON object".into()))?;
        let steps = object
            .get("steps")
            .and_then(Value::as_array)
            .ok_or_else(|| PlanError::Shape("no `steps` list".into()))?;
        if steps.len() > MAX_STEPS {
            return Err(PlanError::TooLong(steps.len()));
        }
        let mut out = Vec::with_capacity(steps.len());
        for (i, step) in steps.iter().enumerate() {
            out.push(step_from_json(step, i as u32 + 1)?);
        }
        let mut checks = Vec::new();
        if let Some(list) = object.get("checks").and_then(Value::as_array) {
            for check in list.iter().take(MAX_CHECKS) {
                checks.push(check_from_json(check, now)?);
            }
        }
        Ok(Self { steps: out, checks })
    }

    /// The tokens the plan's steps estimate.
    pub fn estimated_tokens(&self) -> u64 {
        self.steps
            .iter()
            .map(|s| u64::from(s.estimated_tokens))
            .sum()
    }
}

fn step_from_json(step: &Value, default_id: u32) -> Result<PlanStep, PlanError> {
    let object = step
        .as_object()
        .ok_or_else(|| PlanError::Shape(format!("step {default_id} is not an object")))?;
    let id = object
        .get("id")
        .and_then(Value::as_u64)
        .and_then(|n| u32::try_from(n).ok())
        .unwrap_or(default_id);
    let skill = object
        .get("skill")
        .and_then(Value::as_str)
        .ok_or_else(|| PlanError::Shape(format!("step {id} names no skill")))?;
    let args = match object.get("args") {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(Value::Object(map)) => Value::Object(bounded_args(map)),
        Some(_) => {
            return Err(PlanError::Shape(format!(
                "step {id}: `args` is not an object"
            )));
        }
    };
    let depends_on = object
        .get("depends_on")
        .and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .filter_map(Value::as_u64)
                .filter_map(|n| u32::try_from(n).ok())
                .take(MAX_STEPS)
                .collect()
        })
        .unwrap_or_default();
    let condition = match object.get("condition") {
        None | Some(Value::Null) => None,
        Some(c) => Some(Condition {
            step: c
                .get("step")
                .and_then(Value::as_u64)
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| PlanError::Shape(format!("step {id}: a condition names no step")))?,
            contains: text_arg(c, "contains"),
            negate: c.get("negate").and_then(Value::as_bool).unwrap_or(false),
        }),
    };
    let estimated_tokens = object
        .get("estimated_tokens")
        .and_then(Value::as_u64)
        .map_or(0, |n| u32::try_from(n.min(1_000_000)).unwrap_or(0));
    Ok(PlanStep {
        id,
        skill: neutralise(skill, 64),
        args,
        depends_on,
        condition,
        estimated_tokens,
    })
}

/// The deepest nesting of a skill's arguments: a scene's actors and their attributes
/// (`actors[i].attributes.health`, three containers deep).
const MAX_ARG_DEPTH: u32 = 3;

/// Arguments with every string neutralised and bounded, and nothing nested deeper than
/// [`MAX_ARG_DEPTH`] levels (deeper values become `null`, which the skill's schema refuses).
fn bounded_args(map: &Map<String, Value>) -> Map<String, Value> {
    fn bound(value: &Value, depth: u32) -> Value {
        match value {
            Value::String(s) => Value::String(neutralise(s, MAX_ARG_CHARS)),
            Value::Array(list) if depth <= MAX_ARG_DEPTH => {
                Value::Array(list.iter().take(32).map(|v| bound(v, depth + 1)).collect())
            }
            Value::Object(map) if depth <= MAX_ARG_DEPTH => Value::Object(
                map.iter()
                    .take(32)
                    .map(|(k, v)| (neutralise(k, 64), bound(v, depth + 1)))
                    .collect(),
            ),
            Value::Array(_) | Value::Object(_) => Value::Null,
            other => other.clone(),
        }
    }
    map.iter()
        .take(32)
        .map(|(k, v)| (neutralise(k, 64), bound(v, 1)))
        .collect()
}

fn check_from_json(check: &Value, now: NaiveDateTime) -> Result<OutcomeCheck, PlanError> {
    let place = text_arg(check, "place");
    if place.is_empty() {
        return Err(PlanError::Shape("a check names no place".into()));
    }
    let time = |key: &str| {
        parse_game_time(&text_arg(check, key), now).map_err(|reason| PlanError::BadTime {
            step: 0,
            reason: format!("check `{key}`: {reason}"),
        })
    };
    let (from, to) = (time("from")?, time("to")?);
    if to <= from {
        return Err(PlanError::BadTime {
            step: 0,
            reason: "a check ends before it starts".into(),
        });
    }
    Ok(OutcomeCheck { place, from, to })
}

/// What a plan is checked against: the skills, the allow-list and the town.
pub struct PlanChecker<'a> {
    /// Every registered tool.
    pub registry: &'a ToolRegistry,
    /// The director's allow-list.
    pub allow: &'a ToolAllowList,
    /// The personas' full names.
    pub personas: &'a [String],
    /// Whether a place name resolves on the map.
    pub place_exists: &'a dyn Fn(&str) -> bool,
    /// The game time now.
    pub now: NaiveDateTime,
}

impl PlanChecker<'_> {
    /// The persona `name` means: a full name, or a first name only one persona has (ignoring
    /// case).
    pub fn persona(&self, name: &str) -> Option<&str> {
        resolve_persona(self.personas, name)
    }

    /// Checks `plan`; `done` are the numbers of steps already run (a replan may depend on them).
    pub fn check(&self, plan: &Plan, done: &[u32]) -> Result<(), PlanError> {
        if plan.steps.is_empty() {
            return Err(PlanError::Empty);
        }
        if plan.steps.len() > MAX_STEPS {
            return Err(PlanError::TooLong(plan.steps.len()));
        }
        let mut seen: BTreeSet<u32> = done.iter().copied().collect();
        for step in &plan.steps {
            if !seen.insert(step.id) {
                return Err(PlanError::DuplicateId(step.id));
            }
        }
        let mut before: BTreeSet<u32> = done.iter().copied().collect();
        for step in &plan.steps {
            for &on in step
                .depends_on
                .iter()
                .chain(step.condition.as_ref().map(|c| &c.step))
            {
                if !before.contains(&on) {
                    return Err(PlanError::BadDependency { step: step.id, on });
                }
            }
            self.check_step(step)?;
            before.insert(step.id);
        }
        for check in &plan.checks {
            if !(self.place_exists)(&check.place) {
                return Err(PlanError::UnknownPlace {
                    step: 0,
                    place: check.place.clone(),
                });
            }
        }
        Ok(())
    }

    fn check_step(&self, step: &PlanStep) -> Result<(), PlanError> {
        let tool = self
            .registry
            .get(&step.skill)
            .ok_or_else(|| PlanError::UnknownSkill {
                step: step.id,
                skill: step.skill.clone(),
            })?;
        // The allow-list first; a persona's own tool (one that needs a persona's turn) never
        // runs for the director whatever the list says.
        if !self.allow.0.contains(&step.skill) || matches!(tool.handler, ToolHandler::AddToSchedule)
        {
            return Err(PlanError::NotAllowed {
                step: step.id,
                skill: step.skill.clone(),
            });
        }
        tool.check_args(&step.args)
            .map_err(|reason| PlanError::BadArguments {
                step: step.id,
                skill: step.skill.clone(),
                reason,
            })?;
        // The conventions every director skill follows: `persona` names a persona, `place` a
        // place, `time` a game time.
        if let Some(name) = step.args.get("persona").and_then(Value::as_str)
            && self.persona(name).is_none()
        {
            return Err(PlanError::UnknownPersona {
                step: step.id,
                name: name.to_string(),
            });
        }
        if let Some(place) = step.args.get("place").and_then(Value::as_str)
            && !(self.place_exists)(place)
        {
            return Err(PlanError::UnknownPlace {
                step: step.id,
                place: place.to_string(),
            });
        }
        if let Some(time) = step.args.get("time").and_then(Value::as_str) {
            parse_game_time(time, self.now).map_err(|reason| PlanError::BadTime {
                step: step.id,
                reason,
            })?;
        }
        Ok(())
    }
}

/// The persona `name` means among `personas`: a full name, or a first name only one persona
/// has (ignoring case and surrounding space).
pub(crate) fn resolve_persona<'a>(personas: &'a [String], name: &str) -> Option<&'a str> {
    let wanted = name.trim().to_lowercase();
    if wanted.is_empty() {
        return None;
    }
    if let Some(full) = personas.iter().find(|p| p.to_lowercase() == wanted) {
        return Some(full);
    }
    let mut firsts = personas.iter().filter(|p| {
        p.split_whitespace()
            .next()
            .is_some_and(|f| f.to_lowercase() == wanted)
    });
    match (firsts.next(), firsts.next()) {
        (Some(only), None) => Some(only),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn now() -> NaiveDateTime {
        NaiveDateTime::parse_from_str("2023-02-13 09:30", "%Y-%m-%d %H:%M").expect("time")
    }

    #[test]
    fn game_times_in_every_accepted_form() {
        let t = |s: &str| parse_game_time(s, now()).map(|t| t.to_string());
        assert_eq!(t("2023-02-14 17:00").as_deref(), Ok("2023-02-14 17:00:00"));
        assert_eq!(
            t("2023-02-14T17:00:30").as_deref(),
            Ok("2023-02-14 17:00:30")
        );
        assert_eq!(t("Feb 14 17:00").as_deref(), Ok("2023-02-14 17:00:00"));
        assert_eq!(t("17:00").as_deref(), Ok("2023-02-13 17:00:00"));
        assert_eq!(
            t("08:00").as_deref(),
            Ok("2023-02-14 08:00:00"),
            "past: tomorrow"
        );
        for bad in ["", "soon", "25:00", "2023-13-01 10:00", &"9".repeat(100)] {
            assert!(t(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn plans_are_read_with_bounds() {
        let plan = Plan::from_json(
            &json!({"steps": [
                {"skill": "whisper", "args": {"persona": "Ada", "text": "x".repeat(5000)}},
                {"id": 7, "skill": "who_knows", "args": {"topic": "party"}, "depends_on": [1],
                 "condition": {"step": 1, "contains": "OK"}, "estimated_tokens": 120}
            ], "checks": [{"place": "cafe", "from": "Feb 14 17:00", "to": "Feb 14 19:00"}]}),
            now(),
        )
        .expect("a plan");
        assert_eq!(plan.steps[0].id, 1);
        assert_eq!(plan.steps[1].id, 7);
        assert_eq!(
            text_arg(&plan.steps[0].args, "text").chars().count(),
            MAX_ARG_CHARS
        );
        assert_eq!(plan.steps[1].depends_on, vec![1]);
        assert!(
            plan.steps[1]
                .condition
                .as_ref()
                .expect("c")
                .holds("ok, done")
        );
        assert_eq!(plan.estimated_tokens(), 120);
        assert_eq!(plan.checks.len(), 1);

        // A scene's actors and their attributes come through; anything deeper is cut.
        let scene = Plan::from_json(
            &json!({"steps": [{"skill": "open_stage", "args": {
                "actors": [{"name": "A", "attributes": {"health": 3}}],
                "deep": [[[["too deep"]]]]}}]}),
            now(),
        )
        .expect("a plan");
        let args = &scene.steps[0].args;
        assert_eq!(args["actors"][0]["attributes"]["health"], 3);
        assert_eq!(args["deep"], json!([[[null]]]));

        let many = json!({"steps": vec![json!({"skill": "x"}); 21]});
        assert_eq!(Plan::from_json(&many, now()), Err(PlanError::TooLong(21)));
        for bad in [
            json!([]),
            json!({"steps": 3}),
            json!({"steps": [{"args": {}}]}),
            json!({"steps": [{"skill": "x", "args": "rm -rf"}]}),
        ] {
            assert!(
                matches!(Plan::from_json(&bad, now()), Err(PlanError::Shape(_))),
                "{bad}"
            );
        }
        let backwards = json!({"steps": [{"skill": "x"}], "checks": [
            {"place": "cafe", "from": "19:00", "to": "17:00"}]});
        assert!(matches!(
            Plan::from_json(&backwards, now()),
            Err(PlanError::BadTime { .. })
        ));
    }

    #[test]
    fn personas_by_full_or_unique_first_name() {
        let people = ["Ada Moss".to_string(), "Ben Moss".into(), "Ben Ode".into()];
        assert_eq!(resolve_persona(&people, " ada moss "), Some("Ada Moss"));
        assert_eq!(resolve_persona(&people, "Ada"), Some("Ada Moss"));
        assert_eq!(resolve_persona(&people, "Ben"), None, "two Bens");
        assert_eq!(resolve_persona(&people, ""), None);
        assert_eq!(resolve_persona(&people, "Moss"), None);
    }
}
