//! The planner's answer schema and grammar (SPEC §7.2): the JSON schema a planner answer must
//! match — one of the persona's tool calls, or finish — and the GBNF grammar the embedded
//! model decodes it under ([`crate::llm::grammar`], where the local backend can reach it).

use serde_json::{Value, json};

pub use crate::llm::grammar::{planner_grammar, value_rule};

use super::tools::ToolSpec;

/// The grammar of a planner answer for these tools (root rule `root`).
pub fn tool_call_grammar(tools: &[ToolSpec]) -> String {
    crate::llm::grammar::tool_call_grammar(tools.iter().map(|t| (t.name.as_str(), &t.schema)))
}

/// The JSON schema of a planner answer for these tools: one of the tool calls (each with its
/// argument schema) or finish with a message. Backends with structured output or grammars
/// decode under it (the local backend turns it into [`tool_call_grammar`]'s grammar).
pub fn planner_answer_schema(tools: &[ToolSpec]) -> Value {
    let mut options: Vec<Value> = tools
        .iter()
        .map(|tool| {
            json!({
                "type": "object",
                "properties": {
                    "action": {"const": "tool"},
                    "tool": {"const": tool.name},
                    "args": tool.schema,
                },
                "required": ["action", "tool", "args"],
                "additionalProperties": false
            })
        })
        .collect();
    options.push(json!({
        "type": "object",
        "properties": {
            "action": {"const": "finish"},
            "message": {"type": "string", "minLength": 1, "maxLength": 600}
        },
        "required": ["action", "message"],
        "additionalProperties": false
    }));
    json!({ "oneOf": options })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dialogue::tools::built_in_specs;
    use crate::llm::grammar::literal;

    #[test]
    fn the_grammar_names_every_tool_and_its_arguments() {
        let grammar = tool_call_grammar(&built_in_specs());
        assert!(grammar.starts_with("root ::= ws ( finish | tool0 |"));
        for tool in built_in_specs() {
            assert!(grammar.contains(&literal(&tool.name)), "{}", tool.name);
        }
        // add_to_schedule: its four required keys in order, the time as HH:MM, minutes digits.
        let line = grammar
            .lines()
            .find(|l| l.contains("add_to_schedule"))
            .unwrap_or_default();
        let at = |k: &str| line.find(&literal(k)).unwrap_or(usize::MAX);
        assert!(at("task") < at("place") && at("place") < at("time") && at("time") < at("minutes"));
        // Minutes 5–240 are spelled out, so a call can only name minutes the schema allows.
        assert!(
            line.contains("hhmm") && line.contains(r#""5" | "6""#) && line.contains(r#""240" )"#)
        );
        assert!(!line.contains(r#""241""#) && !line.contains(r#""4" "#));
        // No-argument tools take exactly {}.
        assert!(grammar.contains(r#""{" ws "}""#));
        // Every rule referenced is defined.
        let defined: Vec<&str> = grammar
            .lines()
            .filter_map(|l| l.split_once(" ::= ").map(|(n, _)| n))
            .collect();
        for rule in ["ws", "str", "int", "num", "bool", "hhmm", "value", "finish"] {
            assert!(defined.contains(&rule), "{rule}");
        }
    }

    #[test]
    fn the_planner_schema_gives_the_same_grammar() {
        let tools = built_in_specs();
        assert_eq!(
            planner_grammar(&planner_answer_schema(&tools)),
            Some(tool_call_grammar(&tools))
        );
        assert_eq!(planner_grammar(&json!({"type": "object"})), None);
    }

    #[test]
    fn schemas_map_to_rules() {
        assert_eq!(
            value_rule(&serde_json::json!({"type": "integer"}), 0),
            "int"
        );
        assert_eq!(
            value_rule(&serde_json::json!({"enum": ["a", "b"]}), 0),
            r#"( "\"a\"" | "\"b\"" )"#
        );
        assert_eq!(value_rule(&serde_json::json!({"anyOf": []}), 0), "value");
        // Deep nesting stops at any value.
        let mut schema = serde_json::json!({"type": "integer"});
        for _ in 0..10 {
            schema = serde_json::json!({"type": "object", "properties": {"a": schema}, "required": ["a"]});
        }
        assert!(value_rule(&schema, 0).contains("value"));
    }
}
