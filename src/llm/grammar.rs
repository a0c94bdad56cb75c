//! A GBNF grammar for a dialogue planner's answer, made from the tools' JSON schemas (SPEC
//! §7.2: with the embedded model the planner decodes under it, so a tiny model still produces a
//! valid call). Pure; the local backend uses [`planner_grammar`] for `dialogue_planner`
//! requests, whose JSON schema lists the tool calls
//! ([`planner_answer_schema`](crate::dialogue::grammar::planner_answer_schema)).
//!
//! The grammar allows exactly `{"action": "finish", "message": "…"}` or, per tool,
//! `{"action": "tool", "tool": "<name>", "args": {…}}` with the tool's required arguments in
//! the order of its `required` list. Supported argument schemas: `string` (with `enum`, `const`, or the `HH:MM`
//! pattern the built-ins use), `integer` (digits), `number`, `boolean`, and nested `object`s of
//! those; anything else falls back to any JSON value. The arguments are still validated against
//! the schema before a tool runs.

use serde_json::Value;

/// The shared rules: strings, numbers, whitespace, any JSON value.
const COMMON: &str = r#"ws ::= [ \t\n]{0,4}
str ::= "\"" ( [^"\\\x00-\x1f] | "\\" ["\\/bfnrt] ){0,300} "\""
int ::= "-"? [0-9]{1,9}
num ::= "-"? [0-9]{1,9} ("." [0-9]{1,6})?
bool ::= "true" | "false"
hhmm ::= "\"" [01] [0-9] ":" [0-5] [0-9] "\"" | "\"" "2" [0-3] ":" [0-5] [0-9] "\""
value ::= str | num | bool | "null" | "{" ws ( str ws ":" ws value ( ws "," ws str ws ":" ws value ){0,16} )? ws "}" | "[" ws ( value ( ws "," ws value ){0,16} )? ws "]"
"#;

/// A GBNF literal for `text` (a JSON string literal of it, quoted again for GBNF).
pub(crate) fn literal(text: &str) -> String {
    let json = Value::String(text.to_string()).to_string();
    let mut out = String::from("\"");
    for c in json.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The rule body for a value matching `schema`, at nesting `depth`.
pub fn value_rule(schema: &Value, depth: usize) -> String {
    if depth > 4 {
        return "value".into();
    }
    if let Some(c) = schema.get("const") {
        return literal_value(c);
    }
    if let Some(options) = schema.get("enum").and_then(Value::as_array) {
        let alts: Vec<String> = options.iter().map(literal_value).collect();
        if !alts.is_empty() {
            return format!("( {} )", alts.join(" | "));
        }
    }
    match schema.get("type").and_then(Value::as_str) {
        Some("string") => {
            let pattern = schema.get("pattern").and_then(Value::as_str).unwrap_or("");
            if pattern.contains("[0-5][0-9]$") && pattern.contains(':') {
                "hhmm".into()
            } else {
                "str".into()
            }
        }
        Some("integer") => integer_rule(schema),
        Some("number") => "num".into(),
        Some("boolean") => "bool".into(),
        Some("object") => object_rule(schema, depth),
        _ => "value".into(),
    }
}

/// The most values a bounded integer is spelled out as alternatives for.
const MAX_SPELLED_INTEGERS: i64 = 256;

/// An integer within its schema's bounds where a grammar can say so: a small
/// `minimum`…`maximum` range as its values, a non-negative one as digits only, else `int`.
fn integer_rule(schema: &Value) -> String {
    let min = schema.get("minimum").and_then(Value::as_i64);
    let max = schema.get("maximum").and_then(Value::as_i64);
    match (min, max) {
        (Some(lo), Some(hi)) if lo <= hi && hi - lo < MAX_SPELLED_INTEGERS => {
            let alts: Vec<String> = (lo..=hi).map(|n| format!("\"{n}\"")).collect();
            format!("( {} )", alts.join(" | "))
        }
        // No value fits: the schema check refuses whatever comes.
        (Some(lo), Some(hi)) if lo > hi => "int".into(),
        (Some(lo), _) if lo >= 0 => "[0-9]{1,9}".into(),
        _ => "int".into(),
    }
}

/// A literal JSON value as GBNF.
fn literal_value(value: &Value) -> String {
    // The JSON text of the value, as one GBNF string literal.
    let json = value.to_string();
    let mut out = String::from("\"");
    for c in json.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// An object with the schema's required properties, in the order `required` lists them.
fn object_rule(schema: &Value, depth: usize) -> String {
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let properties = schema.get("properties").and_then(Value::as_object);
    // The order of `required` (an array keeps its order; an object's keys may not).
    let mut keys: Vec<&str> = Vec::new();
    for key in required {
        if !keys.contains(&key) {
            keys.push(key);
        }
    }
    if keys.is_empty() {
        return "\"{\" ws \"}\"".into();
    }
    let members: Vec<String> = keys
        .iter()
        .map(|key| {
            let sub = properties
                .and_then(|p| p.get(*key))
                .map_or_else(|| "value".to_string(), |s| value_rule(s, depth + 1));
            format!("{} ws \":\" ws {sub}", literal(key))
        })
        .collect();
    format!("\"{{\" ws {} ws \"}}\"", members.join(" ws \",\" ws "))
}

/// The grammar of a planner answer for `tools`, `(name, argument schema)` pairs (root rule
/// `root`).
pub fn tool_call_grammar<'a>(tools: impl IntoIterator<Item = (&'a str, &'a Value)>) -> String {
    let mut rules = Vec::new();
    let mut alternatives = vec!["finish".to_string()];
    rules.push(format!(
        "finish ::= \"{{\" ws {} ws \":\" ws {} ws \",\" ws {} ws \":\" ws str ws \"}}\"",
        literal("action"),
        literal("finish"),
        literal("message")
    ));
    for (i, (tool_name, schema)) in tools.into_iter().enumerate() {
        let name = format!("tool{i}");
        rules.push(format!(
            "{name} ::= \"{{\" ws {} ws \":\" ws {} ws \",\" ws {} ws \":\" ws {} ws \",\" ws {} ws \":\" ws {} ws \"}}\"",
            literal("action"),
            literal("tool"),
            literal("tool"),
            literal(tool_name),
            literal("args"),
            value_rule(schema, 0)
        ));
        alternatives.push(name);
    }
    format!(
        "root ::= ws ( {} ) ws\n{}\n{COMMON}",
        alternatives.join(" | "),
        rules.join("\n")
    )
}

/// The grammar for a planner answer schema (`oneOf` the tool calls, each with
/// `tool: {"const": name}` and its `args` schema, and finish), or `None` when the schema is not
/// of that shape.
pub fn planner_grammar(answer_schema: &Value) -> Option<String> {
    let options = answer_schema.get("oneOf")?.as_array()?;
    let mut tools = Vec::new();
    let mut finish = false;
    for option in options {
        let properties = option.get("properties")?;
        match properties
            .pointer("/action/const")
            .and_then(Value::as_str)?
        {
            "tool" => {
                let name = properties.pointer("/tool/const").and_then(Value::as_str)?;
                tools.push((name, properties.get("args")?));
            }
            "finish" => finish = true,
            _ => return None,
        }
    }
    finish.then(|| tool_call_grammar(tools))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn integers_keep_to_their_bounds_where_a_grammar_can_say_so() {
        let rule = |s: Value| integer_rule(&s);
        assert_eq!(
            rule(json!({"type": "integer", "minimum": 1, "maximum": 3})),
            r#"( "1" | "2" | "3" )"#
        );
        assert_eq!(
            rule(json!({"type": "integer", "minimum": -1, "maximum": 0})),
            r#"( "-1" | "0" )"#
        );
        // Too wide to spell out: digits only when it cannot be negative, else any int.
        assert_eq!(
            rule(json!({"type": "integer", "minimum": 0, "maximum": 100000})),
            "[0-9]{1,9}"
        );
        assert_eq!(rule(json!({"type": "integer", "minimum": 0})), "[0-9]{1,9}");
        assert_eq!(rule(json!({"type": "integer", "maximum": 3})), "int");
        assert_eq!(
            rule(json!({"type": "integer", "minimum": 5, "maximum": 1})),
            "int"
        );
    }
}
