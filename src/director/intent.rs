//! The intent parser's answer (SPEC §10): what kind of thing the user asked for, who and what
//! it names, its constraints and how complex it is. It shapes the plan prompt and is shown to
//! the user; it never runs anything itself.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::dialogue::prompts::neutralise;

/// Most items kept in each entity list.
const MAX_ITEMS: usize = 25;

/// How much work a directive is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Complexity {
    /// One or two steps.
    #[default]
    Simple,
    /// A few steps.
    Moderate,
    /// Many steps, conditions, waiting.
    Complex,
}

/// What a directive names.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IntentEntities {
    /// Personas.
    pub characters: Vec<String>,
    /// Places.
    pub places: Vec<String>,
    /// Times.
    pub times: Vec<String>,
    /// Things that happen (a party, a rumour, a storm).
    pub plot_elements: Vec<String>,
}

/// The parsed intent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Intent {
    /// The kind of directive (`event`, `relationship`, `information`, `movement`, `query`, …).
    #[serde(rename = "type")]
    pub kind: String,
    /// What it names.
    pub entities: IntentEntities,
    /// Its constraints (`scope`, …).
    pub constraints: BTreeMap<String, String>,
    /// How complex it is.
    pub complexity: Complexity,
}

fn string_list(value: Option<&Value>) -> Vec<String> {
    value
        .and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .filter_map(Value::as_str)
                .map(|s| neutralise(s, 200))
                .filter(|s| !s.trim().is_empty())
                .take(MAX_ITEMS)
                .collect()
        })
        .unwrap_or_default()
}

impl Intent {
    /// Reads an intent from model JSON, bounded; `None` when it is not one.
    pub fn from_json(value: &Value) -> Option<Self> {
        let object = value.as_object()?;
        let kind = object.get("type").and_then(Value::as_str)?;
        let entities = object.get("entities").and_then(Value::as_object);
        let get = |key: &str| entities.and_then(|e| e.get(key));
        let constraints = object
            .get("constraints")
            .and_then(Value::as_object)
            .map(|map| {
                map.iter()
                    .take(MAX_ITEMS)
                    .map(|(k, v)| {
                        let text = match v {
                            Value::String(s) => s.clone(),
                            other => other.to_string(),
                        };
                        (neutralise(k, 64), neutralise(&text, 200))
                    })
                    .collect()
            })
            .unwrap_or_default();
        let complexity = match object.get("complexity").and_then(Value::as_str) {
            Some("complex") => Complexity::Complex,
            Some("moderate") => Complexity::Moderate,
            _ => Complexity::Simple,
        };
        Some(Self {
            kind: neutralise(kind, 40),
            entities: IntentEntities {
                characters: string_list(get("characters")),
                places: string_list(get("places")),
                times: string_list(get("times")),
                plot_elements: string_list(get("plot_elements")),
            },
            constraints,
            complexity,
        })
    }

    /// The intent read without a model: the personas and places of the town the directive
    /// names (by full name, first name or place name, ignoring case), times written as `HH:MM`,
    /// complexity by length. The fail-safe of the intent prompt.
    pub(crate) fn from_text(directive: &str, personas: &[String], places: &[String]) -> Self {
        let lower = directive.to_lowercase();
        let characters: Vec<String> = personas
            .iter()
            .filter(|p| {
                lower.contains(&p.to_lowercase())
                    || p.split_whitespace().next().is_some_and(|first| {
                        lower
                            .split(|c: char| !c.is_alphanumeric())
                            .any(|w| w == first.to_lowercase())
                    })
            })
            .take(MAX_ITEMS)
            .cloned()
            .collect();
        let places: Vec<String> = places
            .iter()
            .filter(|p| p.len() > 2 && lower.contains(&p.to_lowercase()))
            .take(MAX_ITEMS)
            .cloned()
            .collect();
        let times: Vec<String> = directive
            .split_whitespace()
            .map(|w| w.trim_matches(|c: char| !c.is_ascii_digit() && c != ':'))
            .filter(|w| {
                w.split_once(':').is_some_and(|(h, m)| {
                    h.len() <= 2
                        && m.len() == 2
                        && h.parse::<u32>().is_ok_and(|h| h < 24)
                        && m.parse::<u32>().is_ok_and(|m| m < 60)
                })
            })
            .map(str::to_string)
            .take(MAX_ITEMS)
            .collect();
        let words = directive.split_whitespace().count();
        Self {
            kind: "other".into(),
            entities: IntentEntities {
                characters,
                places,
                times,
                plot_elements: Vec::new(),
            },
            constraints: BTreeMap::new(),
            complexity: match words {
                0..=12 => Complexity::Simple,
                13..=40 => Complexity::Moderate,
                _ => Complexity::Complex,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn intent_json_is_read_and_bounded() {
        let value = json!({
            "type": "event",
            "entities": {"characters": ["Ada Moss", 3, ""], "places": ["the bakery"],
                         "times": ["17:00"], "plot_elements": vec!["x"; 100]},
            "constraints": {"scope": "town", "budget": 5},
            "complexity": "moderate"
        });
        let intent = Intent::from_json(&value).expect("an intent");
        assert_eq!(intent.kind, "event");
        assert_eq!(intent.entities.characters, vec!["Ada Moss"]);
        assert_eq!(intent.entities.plot_elements.len(), MAX_ITEMS);
        assert_eq!(intent.constraints["budget"], "5");
        assert_eq!(intent.complexity, Complexity::Moderate);
        assert!(Intent::from_json(&json!({"entities": {}})).is_none());
        assert!(Intent::from_json(&json!("event")).is_none());
    }

    #[test]
    fn the_fail_safe_finds_the_towns_names_in_the_text() {
        let people = ["Ada Moss".to_string(), "Ben Ode".into()];
        let places = ["bakery".to_string(), "town hall".into(), "x".into()];
        let intent = Intent::from_text(
            "Have ada throw a party at the Town Hall at 17:30, then 25:00",
            &people,
            &places,
        );
        assert_eq!(intent.entities.characters, vec!["Ada Moss"]);
        assert_eq!(intent.entities.places, vec!["town hall"]);
        assert_eq!(intent.entities.times, vec!["17:30"]);
        assert_eq!(intent.complexity, Complexity::Moderate, "13 words");
        let short = Intent::from_text("Ben, go home", &people, &places);
        assert_eq!(short.entities.characters, vec!["Ben Ode"]);
        assert_eq!(short.complexity, Complexity::Simple);
    }
}
