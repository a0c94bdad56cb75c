//! Reflection (SPEC §3.8): the questions to reflect on, and insights with the statements they
//! rest on.

use serde_json::{Value, json};

use super::numbered_list;
use super::text::{MAX_SCAN_CHARS, clean_item, list_items, truncate_chars};
use crate::llm::ChatRequest;
use crate::prompt::{
    Garble, ItemRules, ParseError, Prompt, PromptLibrary, TemplateError, extract_json,
    garbled_items,
};

/// The most characters kept of a focal point or an insight.
const MAX_ITEM_CHARS: usize = 300;

/// The questions to reflect on, from the latest events and thoughts. Output: exactly
/// [`FocalPoints::count`] questions (extra ones dropped; fewer is an error). Accepts a numbered
/// list or a JSON array of strings. Fail-safe: "Who am I" × count (SPEC §3.8).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FocalPoints {
    /// The persona's full name.
    pub name: String,
    /// The latest event and thought descriptions.
    pub statements: Vec<String>,
    /// How many questions (SPEC: 3).
    pub count: usize,
}

impl Prompt for FocalPoints {
    type Output = Vec<String>;

    fn kind(&self) -> &'static str {
        "focal_points"
    }

    fn request(&self, library: &PromptLibrary) -> Result<ChatRequest, TemplateError> {
        let inputs = [
            self.name.clone(),
            numbered_list(&self.statements),
            self.count.to_string(),
        ];
        let prompt = library.fill(self.kind(), &inputs)?;
        Ok(ChatRequest::new(self.kind(), prompt)
            .with_max_tokens(200)
            .with_temperature(0.5))
    }

    fn parse(&self, cleaned: &str) -> Result<Vec<String>, ParseError> {
        if self.count == 0 {
            return Ok(Vec::new());
        }
        let text = truncate_chars(cleaned, MAX_SCAN_CHARS);
        let items: Vec<String> = match extract_json(truncate_chars(text, 4_000)) {
            Some(Value::Array(values)) if values.iter().any(Value::is_string) => values
                .iter()
                .filter_map(Value::as_str)
                .map(clean_item)
                .filter(|s| !s.is_empty())
                .collect(),
            _ => list_items(text),
        };
        if items.len() < self.count {
            return Err(ParseError::new(format!(
                "expected {} questions, got {}",
                self.count,
                items.len()
            )));
        }
        Ok(items
            .into_iter()
            .take(self.count)
            .map(|q| truncate_chars(&q, MAX_ITEM_CHARS).to_string())
            .collect())
    }

    fn fail_safe(&self) -> Vec<String> {
        vec!["Who am I".to_string(); self.count]
    }

    fn garbled(&self, output: &Vec<String>) -> Option<Garble> {
        garbled_items(output, ItemRules::default())
    }
}

/// One reflection insight and the statements it rests on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Insight {
    /// The insight (a thought about the persona).
    pub text: String,
    /// Indices (0-based) into the prompt's statements; each valid, none repeated.
    pub evidence: Vec<usize>,
    /// How much it matters to the persona (1..=10), when the prompt asked
    /// ([`InsightsWithEvidence::rated`]) and the answer gave a usable rating.
    pub poignancy: Option<u8>,
}

/// Insights about the persona from retrieved statements (SPEC §3.8). The answer is JSON
/// `{"insights": [{"insight": …, "evidence": [1, 3]}]}` (or a bare array of such objects), or
/// numbered lines "insight (because of 1, 3)". Statement numbers in the answer are 1-based;
/// numbers that name no statement are dropped, so the output's indices are always valid.
/// At most [`InsightsWithEvidence::count`] insights are kept; none is an error.
///
/// Fail-safe: **no insights**. A made-up insight would become a thought with a poignancy and an
/// embedding and be retrieved later as if the persona had concluded it; reflecting on nothing
/// is the honest result of a failed reflection (the trigger still resets).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InsightsWithEvidence {
    /// The persona's full name.
    pub name: String,
    /// The statements (memory descriptions), shown numbered from 1.
    pub statements: Vec<String>,
    /// How many insights at most (SPEC: 5).
    pub count: usize,
    /// Lean mode's one-pass reflection: each insight is rated too (template `insights_rated`,
    /// an `"importance"` per insight), saving a `thought_poignancy` call per insight.
    pub rated: bool,
}

impl InsightsWithEvidence {
    /// The JSON schema of the answer (with an `"importance"` per insight when `rated`).
    pub fn schema(rated: bool) -> Value {
        let mut properties = json!({
            "insight": {"type": "string", "minLength": 1},
            "evidence": {"type": "array", "items": {"type": "integer", "minimum": 1}}
        });
        let mut required = vec!["insight", "evidence"];
        if rated && let Some(map) = properties.as_object_mut() {
            map.insert(
                "importance".into(),
                json!({"type": "integer", "minimum": 1, "maximum": 10}),
            );
            required.push("importance");
        }
        json!({
            "type": "object",
            "properties": {
                "insights": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": properties,
                        "required": required,
                        "additionalProperties": false
                    }
                }
            },
            "required": ["insights"],
            "additionalProperties": false
        })
    }

    /// Valid 0-based indices from 1-based statement numbers, in order, without repeats.
    fn evidence(&self, numbers: impl IntoIterator<Item = u64>) -> Vec<usize> {
        let mut out = Vec::new();
        for n in numbers {
            let Some(index) = usize::try_from(n).ok().and_then(|n| n.checked_sub(1)) else {
                continue;
            };
            if index < self.statements.len() && !out.contains(&index) {
                out.push(index);
            }
        }
        out
    }

    fn insight(&self, text: &str, numbers: impl IntoIterator<Item = u64>) -> Option<Insight> {
        let text = clean_item(text);
        if text.is_empty() {
            return None;
        }
        Some(Insight {
            text: truncate_chars(&text, MAX_ITEM_CHARS).to_string(),
            evidence: self.evidence(numbers),
            poignancy: None,
        })
    }

    fn insights_from_json(&self, value: &Value) -> Vec<Insight> {
        let items = match value {
            Value::Object(object) => object.get("insights").and_then(Value::as_array),
            Value::Array(items) => Some(items),
            _ => None,
        };
        let Some(items) = items else {
            return Vec::new();
        };
        items
            .iter()
            .take(self.count)
            .filter_map(|item| {
                let object = item.as_object()?;
                let text = object
                    .get("insight")
                    .or_else(|| object.get("text"))
                    .and_then(Value::as_str)?;
                let numbers = object
                    .get("evidence")
                    .and_then(Value::as_array)
                    .map(|values| {
                        values
                            .iter()
                            .filter_map(|v| {
                                v.as_u64()
                                    .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
                            })
                            .collect::<Vec<u64>>()
                    })
                    .unwrap_or_default();
                let mut insight = self.insight(text, numbers)?;
                if self.rated {
                    insight.poignancy = match object.get("importance") {
                        Some(Value::Number(n)) => super::text::rating(&n.to_string()).ok(),
                        Some(Value::String(text)) => super::text::rating(text).ok(),
                        _ => None,
                    };
                }
                Some(insight)
            })
            .collect()
    }

    fn insights_from_lines(&self, text: &str) -> Vec<Insight> {
        list_items(text)
            .iter()
            .take(self.count)
            .filter_map(|item| {
                let lower = item.to_ascii_lowercase();
                match lower.find("(because of") {
                    Some(at) => {
                        let numbers = item[at..]
                            .split(|c: char| !c.is_ascii_digit())
                            .filter_map(|d| d.parse::<u64>().ok())
                            .take(64);
                        self.insight(&item[..at], numbers.collect::<Vec<_>>())
                    }
                    None => self.insight(item, Vec::new()),
                }
            })
            .collect()
    }
}

impl Prompt for InsightsWithEvidence {
    type Output = Vec<Insight>;

    fn kind(&self) -> &'static str {
        if self.rated {
            "insights_rated"
        } else {
            "insights_with_evidence"
        }
    }

    fn request(&self, library: &PromptLibrary) -> Result<ChatRequest, TemplateError> {
        let first_name = self.name.split_whitespace().next().unwrap_or(&self.name);
        let inputs = [
            self.name.clone(),
            numbered_list(&self.statements),
            self.count.to_string(),
            first_name.to_string(),
        ];
        let inputs = if self.rated {
            &inputs[..]
        } else {
            &inputs[..3]
        };
        let prompt = library.fill(self.kind(), inputs)?;
        Ok(ChatRequest::new(self.kind(), prompt)
            .with_max_tokens(600)
            .with_temperature(0.5)
            .with_json_schema(Self::schema(self.rated)))
    }

    fn parse(&self, cleaned: &str) -> Result<Vec<Insight>, ParseError> {
        if self.count == 0 {
            return Ok(Vec::new());
        }
        let text = truncate_chars(cleaned, MAX_SCAN_CHARS);
        let insights = match extract_json(truncate_chars(text, 8_000)) {
            Some(value) => self.insights_from_json(&value),
            None => self.insights_from_lines(text),
        };
        if insights.is_empty() {
            return Err(ParseError::new("no insights in the answer"));
        }
        Ok(insights)
    }

    fn fail_safe(&self) -> Vec<Insight> {
        Vec::new()
    }

    fn garbled(&self, output: &Vec<Insight>) -> Option<Garble> {
        let texts: Vec<&str> = output.iter().map(|i| i.text.as_str()).collect();
        garbled_items(&texts, ItemRules::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn focal_points() {
        let p = FocalPoints {
            count: 2,
            ..Default::default()
        };
        assert_eq!(
            p.parse("1) Why?\n2) How?\n3) When?").unwrap(),
            vec!["Why?", "How?"]
        );
        assert_eq!(
            p.parse("[\"Why?\", \"How?\"]").unwrap(),
            vec!["Why?", "How?"]
        );
        assert!(p.parse("1) Why?").is_err());
        assert_eq!(p.fail_safe(), vec!["Who am I", "Who am I"]);
        assert_eq!(
            FocalPoints {
                count: 3,
                ..Default::default()
            }
            .fail_safe()
            .len(),
            3
        );
    }

    #[test]
    fn insights_validate_evidence() {
        let p = InsightsWithEvidence {
            statements: vec!["a".into(), "b".into(), "c".into()],
            count: 2,
            ..Default::default()
        };
        let json = r#"{"insights": [{"insight": "X likes b", "evidence": [2, 2, 9, 0, "3"]},
                       {"insight": "Y", "evidence": []}, {"insight": "Z", "evidence": [1]}]}"#;
        assert_eq!(
            p.parse(json).unwrap(),
            vec![
                Insight {
                    text: "X likes b".into(),
                    evidence: vec![1, 2],
                    poignancy: None,
                },
                Insight {
                    text: "Y".into(),
                    evidence: vec![],
                    poignancy: None,
                }
            ]
        );
        assert_eq!(
            p.parse("1. X is busy (because of 1, 3)\n2. Y rests")
                .unwrap(),
            vec![
                Insight {
                    text: "X is busy".into(),
                    evidence: vec![0, 2],
                    poignancy: None,
                },
                Insight {
                    text: "Y rests".into(),
                    evidence: vec![],
                    poignancy: None,
                }
            ]
        );
        assert!(p.parse("{\"insights\": []}").is_err());
        assert!(p.fail_safe().is_empty());
    }

    #[test]
    fn rated_insights_carry_their_importance_when_usable() {
        let p = InsightsWithEvidence {
            name: "Ana Silva".into(),
            statements: vec!["a".into(), "b".into()],
            count: 3,
            rated: true,
        };
        assert_eq!(p.kind(), "insights_rated");
        let json = r#"{"insights": [{"insight": "A", "evidence": [1], "importance": 6},
            {"insight": "B", "evidence": [2], "importance": "7"},
            {"insight": "C", "evidence": [], "importance": 42}]}"#;
        let got = p.parse(json).expect("parses");
        let ratings: Vec<Option<u8>> = got.iter().map(|i| i.poignancy).collect();
        // An unusable rating is left to the thought's own rating call.
        assert_eq!(ratings, vec![Some(6), Some(7), None]);
        let schema = InsightsWithEvidence::schema(true);
        assert_eq!(
            schema.pointer("/properties/insights/items/required"),
            Some(&json!(["insight", "evidence", "importance"]))
        );
        // Unrated, the importance is not read.
        let unrated = InsightsWithEvidence { rated: false, ..p };
        assert!(
            unrated
                .parse(json)
                .expect("parses")
                .iter()
                .all(|i| i.poignancy.is_none())
        );
        assert_eq!(unrated.kind(), "insights_with_evidence");
    }
}
