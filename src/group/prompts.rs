//! The model calls of a group conversation (SPEC §8), each with its parser and its
//! fail-safe:
//!
//! | prompt | asked when | answer | fail-safe |
//! | --- | --- | --- | --- |
//! | `GroupJoin` (`group_join`) | an absent persona's join question is due (one stream per 60 s) | yes / no (a closed set: scored when the backend can) | no |
//! | `GroupReply` (`group_reply`) | a chatting persona's reply draw wins, or a persona has just joined | one spoken line | silence |
//! | `GroupFocus` (`group_focus`) | a focused persona observes new lines | JSON: thought, plan (`text_reply` / `emoji_reply` / `no_reply`, or `use_tool` with a tool and its arguments), reply, reason | `no_reply` |
//! | `GroupRound` (`group_round`, lean mode) | the focused personas of one stream whose cycles are due, together | JSON: a plan and a reply per persona, and the line each says next | everyone `no_reply`, nothing next |
//!
//! The focused cycle may think with the persona's tools (SPEC §8 "think may use the persona's
//! tools"): the prompt lists the read-only tools the persona is allowed; a `use_tool` plan
//! names one, the tool runs in the world between steps, and the cycle is asked again with what
//! it looked up — then it must reply, react or stay quiet (one look-up per cycle).
//!
//! Everything the model writes is cleaned like a dialogue reply (no `<think>` block, no
//! fence, bounded) before it is said or stored.

use serde_json::{Map, Value, json};

use crate::dialogue::prompts::{spoken_text, truncate_chars};
use crate::llm::ChatRequest;
use crate::prompt::{ParseError, Prompt, PromptLibrary, TemplateError, parse_yes_no};

use super::stream::MAX_LINE_CHARS;

/// What every group prompt shows about the persona and the stream.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct GroupScene {
    /// The persona's full name.
    pub name: String,
    /// The persona's first name.
    pub first_name: String,
    /// Identity summary.
    pub identity: String,
    /// What the persona is doing ("having coffee").
    pub activity: String,
    /// Where the talk is ("the main room", "the #notice board channel").
    pub place: String,
    /// Recent lines, "Speaker: text".
    pub recent: Vec<String>,
    /// Who is there, by name.
    pub present: Vec<String>,
    /// Related memories (descriptions).
    pub memories: Vec<String>,
    /// Seed of the request (step, persona, stream), so a rerun asks the same.
    pub seed: u64,
}

impl GroupScene {
    fn recent_text(&self) -> String {
        if self.recent.is_empty() {
            "(nobody has spoken yet)".to_string()
        } else {
            self.recent.join("\n")
        }
    }

    fn memories_text(&self) -> String {
        if self.memories.is_empty() {
            "(none)".to_string()
        } else {
            self.memories
                .iter()
                .map(|m| format!("- {m}"))
                .collect::<Vec<_>>()
                .join("\n")
        }
    }

    fn present_text(&self) -> String {
        if self.present.is_empty() {
            "nobody else".to_string()
        } else {
            self.present.join(", ")
        }
    }
}

/// ABSENT → CHAT: does the persona join the stream? (template `group_join`).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct GroupJoin(pub GroupScene);

impl Prompt for GroupJoin {
    type Output = bool;

    fn kind(&self) -> &'static str {
        "group_join"
    }

    fn request(&self, library: &PromptLibrary) -> Result<ChatRequest, TemplateError> {
        let s = &self.0;
        let prompt = library.fill(
            self.kind(),
            &[
                s.name.clone(),
                s.identity.clone(),
                s.activity.clone(),
                s.place.clone(),
                s.recent_text(),
                s.present_text(),
            ],
        )?;
        let mut request = ChatRequest::new(self.kind(), prompt)
            .with_max_tokens(8)
            .with_temperature(0.0);
        request.seed = Some(s.seed);
        Ok(request)
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

/// A casual line in a stream (template `group_reply`). Fail-safe: silence (`None`).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct GroupReply(pub GroupScene);

impl Prompt for GroupReply {
    type Output = Option<String>;

    fn kind(&self) -> &'static str {
        "group_reply"
    }

    fn request(&self, library: &PromptLibrary) -> Result<ChatRequest, TemplateError> {
        let s = &self.0;
        let prompt = library.fill(
            self.kind(),
            &[
                s.name.clone(),
                s.identity.clone(),
                s.activity.clone(),
                s.place.clone(),
                s.recent_text(),
                s.present_text(),
                s.memories_text(),
                s.first_name.clone(),
            ],
        )?;
        let mut request = ChatRequest::new(self.kind(), prompt)
            .with_max_tokens(80)
            .with_temperature(0.7);
        request.seed = Some(s.seed);
        Ok(request)
    }

    fn parse(&self, cleaned: &str) -> Result<Option<String>, ParseError> {
        spoken_line(cleaned, &self.0.first_name).map(Some)
    }

    fn fail_safe(&self) -> Option<String> {
        None
    }
}

/// What a focused cycle decided to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FocusPlan {
    /// Say this line.
    TextReply(String),
    /// React with this emoji.
    EmojiReply(String),
    /// Stay quiet.
    NoReply,
    /// Look something up first with one of the offered tools (arguments not yet validated).
    UseTool {
        /// The tool's name (one the prompt offered).
        tool: String,
        /// Its arguments, a JSON object.
        args: Map<String, Value>,
    },
}

/// A focused cycle's answer: the inner monologue, the plan and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FocusDecision {
    /// The persona's thought (not said; never stored as a line).
    pub thought: String,
    /// What it does.
    pub plan: FocusPlan,
    /// Why.
    pub reason: String,
}

/// A tool a focused cycle may use, as its prompt lists it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct OfferedTool {
    /// The name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// Example arguments.
    pub example: Value,
}

/// The FOCUSED cycle: observe → think → plan, in one structured call (template
/// `group_focus`). Fail-safe: `no_reply`.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct GroupFocus {
    /// The persona and the stream.
    pub scene: GroupScene,
    /// Lines new since the persona last looked, "Speaker: text".
    pub new_lines: Vec<String>,
    /// Tools the persona may think with (read-only, allowed); empty once it has looked up.
    pub tools: Vec<OfferedTool>,
    /// What its look-up of this cycle found ("what_time_is_it → {…}"), on the second ask.
    pub looked_up: Option<String>,
}

impl GroupFocus {
    /// The tools section of the prompt (empty when none are offered).
    fn tools_text(&self) -> String {
        if self.tools.is_empty() {
            return String::new();
        }
        let first = &self.scene.first_name;
        let mut text = format!(
            "Before deciding, {first} may look one thing up with a tool (plan \"use_tool\", the tool's name in \"tool\", its arguments in \"args\"):\n"
        );
        for tool in &self.tools {
            text.push_str(&format!(
                "- {} {}: {}\n",
                tool.name,
                tool.example,
                truncate_chars(&tool.description, 160)
            ));
        }
        text.push('\n');
        text
    }

    /// The look-up section of the prompt (empty before a look-up).
    fn looked_up_text(&self) -> String {
        match &self.looked_up {
            Some(found) => format!(
                "{} looked it up: {found}\nNow reply, react or stay quiet.\n\n",
                self.scene.first_name
            ),
            None => String::new(),
        }
    }
}

/// The JSON schema of a focused cycle's answer (backends with structured output decode under
/// it); `use_tool` and its fields only when tools are offered.
pub(crate) fn focus_schema(tools: &[OfferedTool]) -> Value {
    let mut plans = vec!["text_reply", "emoji_reply", "no_reply"];
    let mut properties = json!({
        "thought": {"type": "string"},
        "reply": {"type": "string"},
        "reason": {"type": "string"}
    });
    if !tools.is_empty() {
        plans.push("use_tool");
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
        properties["tool"] = json!({"type": "string", "enum": names});
        properties["args"] = json!({"type": "object"});
    }
    properties["plan"] = json!({"type": "string", "enum": plans});
    json!({
        "type": "object",
        "properties": properties,
        "required": ["thought", "plan", "reply", "reason"]
    })
}

impl Prompt for GroupFocus {
    type Output = FocusDecision;

    fn kind(&self) -> &'static str {
        "group_focus"
    }

    fn request(&self, library: &PromptLibrary) -> Result<ChatRequest, TemplateError> {
        let s = &self.scene;
        let new_lines = if self.new_lines.is_empty() {
            "(nothing new)".to_string()
        } else {
            self.new_lines.join("\n")
        };
        let prompt = library.fill(
            self.kind(),
            &[
                s.name.clone(),
                s.identity.clone(),
                s.activity.clone(),
                s.place.clone(),
                s.recent_text(),
                s.present_text(),
                s.memories_text(),
                s.first_name.clone(),
                new_lines,
                self.tools_text(),
                self.looked_up_text(),
            ],
        )?;
        let mut request = ChatRequest::new(self.kind(), prompt)
            .with_max_tokens(200)
            .with_temperature(0.5);
        request.json_schema = Some(focus_schema(&self.tools));
        request.seed = Some(s.seed);
        Ok(request)
    }

    fn parse(&self, cleaned: &str) -> Result<FocusDecision, ParseError> {
        parse_focus(cleaned, &self.scene.first_name, &self.tools)
    }

    fn fail_safe(&self) -> FocusDecision {
        FocusDecision {
            thought: String::new(),
            plan: FocusPlan::NoReply,
            reason: "fail-safe: no usable answer".to_string(),
        }
    }
}

/// One persona of a lean round: who, doing what, and what it remembers of recent chats.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct RoundSeat {
    /// The persona's full name.
    pub name: String,
    /// The persona's first name.
    pub first_name: String,
    /// Identity summary (the round shows its traits and `Currently` lines).
    pub identity: String,
    /// What the persona is doing.
    pub activity: String,
    /// Related memories (descriptions); the round shows the latest two.
    pub memories: Vec<String>,
    /// Not in the talk yet: saying something joins it (the join question, asked in the round).
    pub newcomer: bool,
}

impl RoundSeat {
    /// "- Ana Ruiz is having coffee; friendly, curious; currently …; remembers: …; …".
    fn line(&self) -> String {
        let field = |label: &str| {
            self.identity
                .lines()
                .find_map(|l| l.strip_prefix(label))
                .map(str::trim)
                .filter(|v| !v.is_empty())
        };
        let mut line = format!("- {} is {}", self.name, self.activity);
        if let Some(innate) = field("Innate traits:") {
            line.push_str(&format!("; {innate}"));
        }
        if let Some(currently) = field("Currently:") {
            line.push_str(&format!("; currently: {}", truncate_chars(currently, 200)));
        }
        let memories: Vec<&str> = self.memories.iter().take(2).map(String::as_str).collect();
        if !memories.is_empty() {
            line.push_str(&format!("; remembers: {}", memories.join("; ")));
        }
        line
    }
}

/// Lean mode's round (template `group_round`): the FOCUSED cycles of every persona of one
/// stream whose cycle is due, in one call instead of one each. No tools (a look-up would
/// need a second call per persona). The round plans the exchange ahead: besides what each
/// seat does now, the line it says next once the others have answered (`then`) and up to two
/// after that (`later`, `afterwards`), which the persona says at its next cycles without
/// asking again — unless someone outside the
/// round spoke meanwhile (see `heart`). Output: one [`RoundPlan`] per seat, in the seats'
/// order — an entry that names nobody at the table is ignored, a seat without a usable entry
/// stays quiet (an empty list: everyone quiet).
/// Fail-safe: everyone `no_reply`, nothing next.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct GroupRound {
    /// Where the talk is.
    pub place: String,
    /// Everyone in the stream, by name.
    pub present: Vec<String>,
    /// Recent lines, "Speaker: text".
    pub recent: Vec<String>,
    /// Lines new since the seats last looked, "Speaker: text".
    pub new_lines: Vec<String>,
    /// The personas whose cycle is due.
    pub seats: Vec<RoundSeat>,
    /// Seed of the request (step, stream).
    pub seed: u64,
}

/// What one seat of a round does now, and says next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RoundPlan {
    /// What the seat does at this cycle (never a tool: a round offers none).
    pub now: FocusPlan,
    /// The line it says at its next cycle if the talk goes as the round expects (a spoken
    /// line, cleaned and bounded like `now`'s).
    pub then: Option<String>,
    /// The lines after that, at the cycles after, in order (only with a `then`; at most
    /// [`LINES_AFTER_THEN`]).
    pub later: Vec<String>,
}

/// Most lines a round plans for a seat after its `then` (`later`, then `afterwards`).
pub(crate) const LINES_AFTER_THEN: usize = 2;

impl RoundPlan {
    /// Quiet now, nothing planned.
    pub const QUIET: Self = Self {
        now: FocusPlan::NoReply,
        then: None,
        later: Vec::new(),
    };
}

/// Most characters of a round's reply a schema-decoding backend writes (a small model keeps
/// talking inside the string until its tokens run out, and the JSON is cut).
const ROUND_REPLY_CHARS: usize = 160;

/// Most entries of a round's answer that are read (a round seats at most a stream's members).
const MAX_ROUND_ENTRIES: usize = 64;

impl Prompt for GroupRound {
    type Output = Vec<RoundPlan>;

    fn kind(&self) -> &'static str {
        "group_round"
    }

    fn request(&self, library: &PromptLibrary) -> Result<ChatRequest, TemplateError> {
        let or = |lines: &[String], none: &str| {
            if lines.is_empty() {
                none.to_string()
            } else {
                lines.join("\n")
            }
        };
        let firsts: Vec<&str> = self.seats.iter().map(|s| s.first_name.as_str()).collect();
        let names = match firsts.as_slice() {
            [] => String::new(),
            [one] => (*one).to_string(),
            [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
        };
        let listed = |newcomers: bool, none: &str| {
            let lines: Vec<String> = self
                .seats
                .iter()
                .filter(|s| s.newcomer == newcomers)
                .map(RoundSeat::line)
                .collect();
            or(&lines, none)
        };
        let prompt = library.fill(
            self.kind(),
            &[
                self.place.clone(),
                if self.present.is_empty() {
                    "nobody else".to_string()
                } else {
                    self.present.join(", ")
                },
                or(&self.recent, "(nobody has spoken yet)"),
                or(&self.new_lines, "(nothing new)"),
                listed(false, "(nobody)"),
                names,
                listed(true, "(nobody)"),
            ],
        )?;
        let mut request = ChatRequest::new(self.kind(), prompt)
            .with_max_tokens(60 + 160 * self.seats.len().min(MAX_ROUND_ENTRIES) as u32)
            .with_temperature(0.5);
        request.json_schema = Some(round_schema(&self.seats));
        request.seed = Some(self.seed);
        Ok(request)
    }

    fn parse(&self, cleaned: &str) -> Result<Vec<RoundPlan>, ParseError> {
        parse_round(cleaned, &self.seats)
    }

    fn fail_safe(&self) -> Vec<RoundPlan> {
        vec![RoundPlan::QUIET; self.seats.len()]
    }
}

/// The JSON schema of a round's answer: the names are the seats' (a backend decoding under
/// the schema cannot name anyone else).
fn round_schema(seats: &[RoundSeat]) -> Value {
    let names: Vec<&str> = seats.iter().map(|s| s.name.as_str()).collect();
    json!({
        "type": "object",
        "properties": {
            "replies": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string", "enum": names},
                        "plan": {"type": "string", "enum": ["text_reply", "emoji_reply", "no_reply"]},
                        "reply": {"type": "string", "maxLength": ROUND_REPLY_CHARS},
                        "then": {"type": "string", "maxLength": ROUND_REPLY_CHARS},
                        "later": {"type": "string", "maxLength": ROUND_REPLY_CHARS},
                        "afterwards": {"type": "string", "maxLength": ROUND_REPLY_CHARS}
                    },
                    "required": ["name", "plan", "reply", "then", "later", "afterwards"]
                },
                "maxItems": names.len()
            }
        },
        "required": ["replies"]
    })
}

/// Parses a round's JSON into one plan per seat. Entries are matched to seats by full or
/// first name (ignoring case); the first usable entry of a seat counts. An entry with a bad
/// plan, an empty line or a non-emoji reaction leaves its seat quiet now; a missing, empty
/// or unusable `then` plans nothing next, and the lines after it (`later`, `afterwards`) end
/// at the first such one. An answer that names no seat at all is refused (so
/// the retry or the fail-safe decides).
pub(crate) fn parse_round(
    cleaned: &str,
    seats: &[RoundSeat],
) -> Result<Vec<RoundPlan>, ParseError> {
    let value = crate::prompt::extract_json(cleaned)
        .ok_or_else(|| ParseError::new("no JSON object in the answer"))?;
    let entries = value
        .get("replies")
        .and_then(Value::as_array)
        .ok_or_else(|| ParseError::new("no \"replies\" list in the answer"))?;
    let mut plans: Vec<Option<RoundPlan>> = vec![None; seats.len()];
    let mut named_any = false;
    for entry in entries.iter().take(MAX_ROUND_ENTRIES) {
        let Some(name) = entry.get("name").and_then(Value::as_str).map(str::trim) else {
            continue;
        };
        let Some(seat) = seats.iter().position(|s| {
            s.name.eq_ignore_ascii_case(name) || s.first_name.eq_ignore_ascii_case(name)
        }) else {
            continue;
        };
        named_any = true;
        if plans[seat].is_some() {
            continue;
        }
        let text = |field: &str| line_field(entry, field);
        let first_name = &seats[seat].first_name;
        let reply = text("reply");
        let now = match entry.get("plan").and_then(Value::as_str).map(str::trim) {
            Some("text_reply") => spoken_line(&reply, first_name)
                .map(FocusPlan::TextReply)
                .unwrap_or(FocusPlan::NoReply),
            Some("emoji_reply") if is_emoji(reply.trim()) => {
                FocusPlan::EmojiReply(reply.trim().to_string())
            }
            _ => FocusPlan::NoReply,
        };
        let then = spoken_line(&text("then"), first_name).ok();
        // The lines after `then`, in order, up to the first that is missing or unusable.
        let later = if then.is_some() {
            ["later", "afterwards"]
                .iter()
                .take(LINES_AFTER_THEN)
                .map_while(|field| spoken_line(&text(field), first_name).ok())
                .collect()
        } else {
            Vec::new()
        };
        plans[seat] = Some(RoundPlan { now, then, later });
    }
    // An empty list is everyone staying quiet; entries for nobody at the table are no answer.
    if !named_any && !entries.is_empty() {
        return Err(ParseError::new("the answer names nobody at the table"));
    }
    Ok(plans
        .into_iter()
        .map(|p| p.unwrap_or(RoundPlan::QUIET))
        .collect())
}

/// The string field `name` of an answer's JSON object, trimmed and bounded like a line (empty
/// when missing or not a string).
fn line_field(object: &Value, name: &str) -> String {
    object
        .get(name)
        .and_then(Value::as_str)
        .map(|s| truncate_chars(s.trim(), MAX_LINE_CHARS).to_string())
        .unwrap_or_default()
}

/// A spoken line from a model's answer: cleaned like a dialogue reply, a leading `Name:` the
/// model wrote dropped, surrounding quotes removed, the first line kept, bounded.
pub(crate) fn spoken_line(raw: &str, first_name: &str) -> Result<String, ParseError> {
    let text = spoken_text(raw);
    let mut line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    for prefix in [first_name, "Me", "Reply"] {
        if !prefix.is_empty()
            && let Some(rest) = line.strip_prefix(prefix)
            && let Some(rest) = rest.trim_start().strip_prefix(':')
        {
            line = rest.trim();
        }
    }
    let line = line
        .trim_matches(|c| c == '"' || c == '“' || c == '”')
        .trim();
    if line.is_empty() {
        return Err(ParseError::new("an empty line"));
    }
    Ok(truncate_chars(line, MAX_LINE_CHARS).to_string())
}

/// Whether `text` is one emoji (possibly with modifiers and joiners): 1–8 characters, none of
/// them an ASCII letter, digit or punctuation or a space.
pub(crate) fn is_emoji(text: &str) -> bool {
    let n = text.chars().count();
    (1..=8).contains(&n) && text.chars().all(|c| !c.is_ascii() && !c.is_whitespace())
}

/// Most bytes of a tool call's arguments a focused cycle may write.
const MAX_TOOL_ARGS_BYTES: usize = 2_000;

/// Parses a focused cycle's JSON. A `text_reply` without a usable line, an `emoji_reply`
/// whose reply is no emoji, or a `use_tool` naming a tool not offered (or with arguments that
/// are no small JSON object) is refused, so the retry or the fail-safe decides. The arguments
/// of a `use_tool` are checked against the tool's schema later, before it runs.
pub(crate) fn parse_focus(
    cleaned: &str,
    first_name: &str,
    tools: &[OfferedTool],
) -> Result<FocusDecision, ParseError> {
    let value = crate::prompt::extract_json(cleaned)
        .ok_or_else(|| ParseError::new("no JSON object in the answer"))?;
    let object = value
        .as_object()
        .ok_or_else(|| ParseError::new("the answer is not a JSON object"))?;
    let field = |name: &str| line_field(&value, name);
    let reply = field("reply");
    let plan = match object.get("plan").and_then(Value::as_str).map(str::trim) {
        Some("text_reply") => FocusPlan::TextReply(spoken_line(&reply, first_name)?),
        Some("emoji_reply") => {
            let emoji = reply.trim();
            if !is_emoji(emoji) {
                return Err(ParseError::new("an emoji_reply without an emoji"));
            }
            FocusPlan::EmojiReply(emoji.to_string())
        }
        Some("no_reply") => FocusPlan::NoReply,
        Some("use_tool") => {
            let tool = object
                .get("tool")
                .and_then(Value::as_str)
                .unwrap_or("")
                .trim();
            if !tools.iter().any(|t| t.name == tool) {
                return Err(ParseError::new("use_tool names no offered tool"));
            }
            let args = match object.get("args") {
                None | Some(Value::Null) => Map::new(),
                Some(Value::Object(args)) => args.clone(),
                Some(_) => return Err(ParseError::new("use_tool args is not a JSON object")),
            };
            if serde_json::to_string(&args).map_or(true, |a| a.len() > MAX_TOOL_ARGS_BYTES) {
                return Err(ParseError::new("use_tool args are too long"));
            }
            FocusPlan::UseTool {
                tool: tool.to_string(),
                args,
            }
        }
        _ => {
            return Err(ParseError::new(
                "plan is not text_reply, emoji_reply or no_reply",
            ));
        }
    };
    Ok(FocusDecision {
        thought: spoken_text(&field("thought")),
        plan,
        reason: spoken_text(&field("reason")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn focus_answers_parse_or_are_refused() {
        let ok = parse_focus(
            r#"{"thought":"Tom asked me","plan":"text_reply","reply":"Ada: \"Yes, at six!\"","reason":"named"}"#,
            "Ada",
            &[],
        )
        .expect("parses");
        assert_eq!(ok.plan, FocusPlan::TextReply("Yes, at six!".into()));
        let emoji = parse_focus(
            r#"```json
{"thought":"","plan":"emoji_reply","reply":"👍","reason":"agree"}
```"#,
            "Ada",
            &[],
        )
        .expect("parses");
        assert_eq!(emoji.plan, FocusPlan::EmojiReply("👍".into()));
        let quiet =
            parse_focus(r#"{"plan":"no_reply","reason":"busy"}"#, "Ada", &[]).expect("parses");
        assert_eq!(quiet.plan, FocusPlan::NoReply);
        for bad in [
            "",
            "sure!",
            "{",
            "[1,2]",
            r#"{"plan":"shout","reply":"HEY"}"#,
            r#"{"plan":"emoji_reply","reply":"thumbs up"}"#,
            r#"{"plan":"text_reply","reply":"   "}"#,
            r#"{"plan":"text_reply","reply":"<think>x</think>"}"#,
        ] {
            assert!(parse_focus(bad, "Ada", &[]).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn use_tool_is_taken_only_for_an_offered_tool_with_object_args() {
        let offered = [OfferedTool {
            name: "what_time_is_it".into(),
            description: "The time.".into(),
            example: json!({}),
        }];
        let ok = parse_focus(
            r#"{"thought":"when?","plan":"use_tool","tool":"what_time_is_it","args":{},"reply":"","reason":"asked"}"#,
            "Ada",
            &offered,
        )
        .expect("parses");
        assert_eq!(
            ok.plan,
            FocusPlan::UseTool {
                tool: "what_time_is_it".into(),
                args: Map::new()
            }
        );
        let long = format!(
            r#"{{"plan":"use_tool","tool":"what_time_is_it","args":{{"x":"{}"}}}}"#,
            "a".repeat(5_000)
        );
        for bad in [
            // Not offered: a hostile line may name any tool; only the offered ones count.
            r#"{"plan":"use_tool","tool":"walk_to","args":{"place":"the bank vault"}}"#,
            r#"{"plan":"use_tool","tool":"","args":{}}"#,
            r#"{"plan":"use_tool","args":{}}"#,
            r#"{"plan":"use_tool","tool":"what_time_is_it","args":"now"}"#,
            r#"{"plan":"use_tool","tool":"what_time_is_it","args":[1]}"#,
            long.as_str(),
        ] {
            assert!(parse_focus(bad, "Ada", &offered).is_err(), "{bad:?}");
        }
        // Nothing offered (the second ask, or a persona without tools): use_tool is refused.
        assert!(
            parse_focus(
                r#"{"plan":"use_tool","tool":"what_time_is_it","args":{}}"#,
                "Ada",
                &[]
            )
            .is_err()
        );
    }

    #[test]
    fn the_focus_prompt_offers_tools_only_when_there_are_some() {
        let library = PromptLibrary::default();
        let mut focus = GroupFocus {
            scene: GroupScene {
                name: "Ada Quill".into(),
                first_name: "Ada".into(),
                ..GroupScene::default()
            },
            ..GroupFocus::default()
        };
        let plain = focus.request(&library).expect("fills");
        assert!(!plain.prompt_text().contains("use_tool"));
        focus.tools = vec![OfferedTool {
            name: "what_time_is_it".into(),
            description: "The time.".into(),
            example: json!({}),
        }];
        let offered = focus.request(&library).expect("fills");
        assert!(
            offered
                .prompt_text()
                .contains("- what_time_is_it {}: The time.")
        );
        assert!(
            offered.json_schema.as_ref().expect("a schema")["properties"]["plan"]["enum"]
                .as_array()
                .is_some_and(|e| e.contains(&json!("use_tool")))
        );
        focus.tools.clear();
        focus.looked_up = Some("what_time_is_it → \"09:05\"".into());
        let second = focus.request(&library).expect("fills");
        assert!(
            second
                .prompt_text()
                .contains("Ada looked it up: what_time_is_it")
        );
    }

    #[test]
    fn spoken_lines_are_one_clean_bounded_line() {
        assert_eq!(
            spoken_line("<think>hmm</think>Ada: \"Morning all!\"\nMore.", "Ada").as_deref(),
            Ok("Morning all!")
        );
        let long = "a".repeat(MAX_LINE_CHARS * 2);
        assert_eq!(
            spoken_line(&long, "Ada").map(|l| l.chars().count()),
            Ok(MAX_LINE_CHARS)
        );
        assert!(spoken_line("  \n ", "Ada").is_err());
        assert!(is_emoji("👍") && is_emoji("👩‍🍳") && !is_emoji("ok") && !is_emoji(""));
    }

    fn seats() -> Vec<RoundSeat> {
        ["Ada Lovelace", "Bo Chen", "Cy Young"]
            .iter()
            .map(|name| RoundSeat {
                name: (*name).to_string(),
                first_name: name.split(' ').next().unwrap_or(name).to_string(),
                identity: format!(
                    "Name: {name}\nInnate traits: curious\nCurrently: {name} is baking.\n"
                ),
                activity: "having coffee".into(),
                memories: vec!["a".into(), "b".into(), "c".into()],
                newcomer: false,
            })
            .collect()
    }

    #[test]
    fn a_round_answer_gives_each_seat_its_own_plan() {
        let seats = seats();
        let plans = parse_round(
            r#"{"replies":[
                {"name":"Ada","plan":"text_reply","reply":"Ada: Morning, Bo!","then":"Ada: \"Bread or cake?\"","later":"Cake, then.","afterwards":"Ada: See you!"},
                {"name":"bo chen","plan":"emoji_reply","reply":"👍","then":""},
                {"name":"Ada Lovelace","plan":"text_reply","reply":"a second line is ignored"}
            ]}"#,
            &seats,
        )
        .expect("parses");
        assert_eq!(
            plans,
            vec![
                // The next line is cleaned like the first (no name, no quotes).
                RoundPlan {
                    now: FocusPlan::TextReply("Morning, Bo!".into()),
                    then: Some("Bread or cake?".into()),
                    later: vec!["Cake, then.".into(), "See you!".into()],
                },
                // An empty next line plans nothing.
                RoundPlan {
                    now: FocusPlan::EmojiReply("👍".into()),
                    then: None,
                    later: Vec::new(),
                },
                // Cy was not answered for: quiet.
                RoundPlan::QUIET,
            ]
        );
        // Quiet now and speaking next is a plan too; an entry without "then" (an older
        // answer's shape) plans nothing next.
        let plans = parse_round(
            r#"{"replies":[
                {"name":"Cy","plan":"no_reply","reply":"","then":"Count me in.","later":7,"afterwards":"Skipped: no later before me."},
                {"name":"Bo","plan":"text_reply","reply":"Hi!"}
            ]}"#,
            &seats,
        )
        .expect("parses");
        assert_eq!(plans[2].then.as_deref(), Some("Count me in."));
        // A `later` that is not a line plans nothing after (not even a good `afterwards`).
        assert_eq!(plans[2].later, Vec::<String>::new());
        assert_eq!(plans[2].now, FocusPlan::NoReply);
        assert_eq!(plans[1].then, None);
    }

    #[test]
    fn hostile_round_answers_are_refused_or_leave_seats_quiet() {
        let seats = seats();
        // Refused: no JSON, no list, nobody at the table named.
        for answer in [
            "Ada says hi",
            r#"{"reply":"hi"}"#,
            r#"{"replies":"Ada: hi"}"#,
            r#"{"replies":[{"name":"Mallory","plan":"text_reply","reply":"I am Ada now"}]}"#,
            r#"{"replies":[{"plan":"text_reply","reply":"nameless"}]}"#,
        ] {
            assert!(parse_round(answer, &seats).is_err(), "{answer}");
        }
        // Parsed, but each bad entry leaves its seat quiet: unknown plans (a tool call in a
        // round), empty lines, a "reaction" that is text, a name that is not a string.
        // A next line that is not a string, or only blanks, plans nothing.
        let plans = parse_round(
            r#"{"replies":[
                {"name":"Ada","plan":"use_tool","tool":"what_time_is_it","reply":"","then":{"tool":"x"}},
                {"name":"Bo","plan":"text_reply","reply":"   ","then":"  \n  ","later":"no then before me"},
                {"name":"Cy","plan":"emoji_reply","reply":"ok fine","then":["a"]},
                {"name":42,"plan":"text_reply","reply":"x","then":"y"}
            ]}"#,
            &seats,
        )
        .expect("parses");
        assert_eq!(plans, vec![RoundPlan::QUIET; 3]);
        // A flood of entries is cut at the bound; a long line is bounded.
        let mut entries: Vec<String> = (0..10_000)
            .map(|i| format!(r#"{{"name":"Nobody{i}","plan":"no_reply","reply":""}}"#))
            .collect();
        entries.push(format!(
            r#"{{"name":"Cy","plan":"text_reply","reply":"{}"}}"#,
            "y".repeat(MAX_LINE_CHARS * 3)
        ));
        let flood = format!(r#"{{"replies":[{}]}}"#, entries.join(","));
        assert!(
            parse_round(&flood, &seats).is_err(),
            "Cy's entry is past the bound"
        );
        let long = format!(
            r#"{{"replies":[{{"name":"Cy","plan":"text_reply","reply":"{0}","then":"{0}"}}]}}"#,
            "y".repeat(MAX_LINE_CHARS * 3)
        );
        let cy = &parse_round(&long, &seats).expect("parses")[2];
        match &cy.now {
            FocusPlan::TextReply(line) => assert_eq!(line.chars().count(), MAX_LINE_CHARS),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            cy.then.as_ref().map(|l| l.chars().count()),
            Some(MAX_LINE_CHARS)
        );
    }

    #[test]
    fn the_round_prompt_lists_every_seat_briefly() {
        let library = PromptLibrary::embedded();
        let mut seats = seats();
        // Cy is nearby, not in the talk yet: the round asks the join question too.
        seats[2].newcomer = true;
        let round = GroupRound {
            place: "the cafe".into(),
            present: vec!["Ada Lovelace".into(), "Bo Chen".into(), "Cy Young".into()],
            recent: vec!["Ada Lovelace: Morning!".into()],
            new_lines: vec!["Ada Lovelace: Morning!".into()],
            seats,
            seed: 7,
        };
        let request = round.request(&library).expect("fills");
        let text = request.prompt_text();
        assert!(
            text.contains(
                "A group conversation in the cafe. Present: Ada Lovelace, Bo Chen, Cy Young."
            ),
            "{text}"
        );
        assert!(text.contains("- Bo Chen is having coffee; curious; currently: Bo Chen is baking.; remembers: a; b\n"), "{text}");
        assert!(
            !text.contains("remembers: a; b; c"),
            "two memories a seat: {text}"
        );
        assert!(text.contains("For each of Ada, Bo and Cy,"), "{text}");
        let (following, nearby) = text
            .split_once("Nearby, not in the talk yet:\n")
            .expect("a block of those nearby");
        assert!(!following.contains("- Cy Young"), "{text}");
        assert!(nearby.starts_with("- Cy Young is having coffee"), "{text}");
        assert!(
            following.contains("- Ada Lovelace is having coffee"),
            "{text}"
        );
        assert_eq!(request.seed, Some(7));
        assert_eq!(round.fail_safe(), vec![RoundPlan::QUIET; 3]);
        assert!(
            text.contains("in \"then\", write what they would say next")
                && text.contains("in \"later\"")
                && text.contains("in \"afterwards\""),
            "{text}"
        );
        // A backend decoding under the schema names only the seats and keeps replies short.
        let schema = request.json_schema.expect("a schema");
        let entry = &schema["properties"]["replies"]["items"]["properties"];
        assert_eq!(
            entry["name"]["enum"],
            json!(["Ada Lovelace", "Bo Chen", "Cy Young"])
        );
        assert_eq!(entry["reply"]["maxLength"], json!(ROUND_REPLY_CHARS));
        assert_eq!(entry["then"]["maxLength"], json!(ROUND_REPLY_CHARS));
        assert_eq!(entry["later"]["maxLength"], json!(ROUND_REPLY_CHARS));
        assert_eq!(entry["afterwards"]["maxLength"], json!(ROUND_REPLY_CHARS));
        assert_eq!(schema["properties"]["replies"]["maxItems"], json!(3));
        // An empty list is everyone staying quiet.
        assert_eq!(
            parse_round(r#"{"replies":[]}"#, &round.seats),
            Ok(vec![RoundPlan::QUIET; 3])
        );
    }
}
