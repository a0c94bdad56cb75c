//! One dialogue turn as an `async` task (SPEC §7.1–§7.4). Model calls happen here, off the main
//! thread; whatever needs the world — retrieval on the persona's mind, tools, storing memories —
//! is asked of it through a [`WorldLink`] and served between steps by
//! [`drive_dialogues`](super::serve::drive_dialogues).

use std::sync::Arc;

use chrono::NaiveDateTime;
use serde_json::{Map, Value};

use crate::cognition::chat_stream::partial_string_field;
use crate::cognition::prompts::{
    ChatPoignancy, NewDecompositionSchedule, ThoughtPoignancy, WhisperThought,
};
use crate::cognition::reflect::{WrittenThought, write_after_chat};
use crate::cognition::schedule::{reaction_window, schedule_pairs, total_minutes};
use crate::cognition::vocabulary::date_text;
use crate::llm::redact_secrets;
use crate::persona::ScheduleItem;
use crate::prompt::{
    AnswerWatcher, FailureLog, ModelFailure, PromptContext, clean_response, run_prompt,
    run_prompt_watched,
};
use crate::settings::AgentSettings;

use super::control::{has_item_at, insert_item};
use super::grammar::planner_answer_schema;
use super::prompts::{
    DialogueFinal, DialoguePlanner, MAX_REPLY_CHARS, PlannerStep, SpeakerProfileUpdate, neutralise,
    quoted_data, spoken_text, truncate_chars,
};
use super::tools::ToolSpec;
use super::{DialogueMode, DialogueSettings, RefusalReason, ToolCallRecord};

/// What the world knows that a turn needs (answered to [`WorldRequest::Prepare`]).
#[derive(Debug, Clone, Default)]
pub(super) struct Prepared {
    pub name: String,
    pub first_name: String,
    pub identity: String,
    pub memories: Vec<String>,
    pub here: String,
    pub doing: String,
    pub tools: Vec<ToolSpec>,
    pub now: NaiveDateTime,
}

/// A tool's schedule fit (for `add_to_schedule`): today's schedule and the request.
#[derive(Debug, Clone)]
pub(super) struct ScheduleFit {
    pub schedule: Vec<ScheduleItem>,
    pub hourly: Vec<ScheduleItem>,
    pub first_name: String,
    pub now: NaiveDateTime,
    pub task: String,
    pub arena: String,
    pub minute: u32,
    pub minutes: u32,
}

/// What the world did with a tool call.
#[derive(Debug, Clone)]
pub(super) enum ToolAnswer {
    /// It ran (or failed in its handler).
    Ran(Result<Value, String>),
    /// It did not run.
    Refused(RefusalReason),
    /// `add_to_schedule` passed its checks: fit it into the day and apply.
    Fit(ScheduleFit),
}

/// Something only the world can do.
#[derive(Debug)]
pub(super) enum WorldRequest {
    /// Retrieve memories (with the focal point's embedding, if any) and describe the persona.
    Prepare {
        focal: Option<Vec<f32>>,
        stateless: bool,
    },
    /// Run a tool (checks first; a pre-start tool skips the allow-list: the game chose it).
    Tool {
        tool: String,
        args: Value,
        prestart: bool,
    },
    /// Tell the game a call was refused for the step limit.
    StepLimit { tool: String },
    /// Apply a fitted schedule (only if today's schedule is still `before`) and book the place.
    ApplySchedule {
        before: Vec<ScheduleItem>,
        after: Vec<ScheduleItem>,
        fit: ScheduleFit,
        args: Value,
    },
    /// The reply is ready: the world lands it (the session, the stream, [`DialogueReplied`])
    /// and lets the persona go while the background stage runs on (SPEC §7.4, seed 002: the
    /// user sees the reply, then the background runs).
    ///
    /// [`DialogueReplied`]: super::DialogueReplied
    Replied(Box<TurnOutcome>),
    /// Store what the turn leaves behind.
    Store(Keep),
}

/// What a turn leaves in the persona's memory.
#[derive(Debug, Clone, Default)]
pub(super) struct Keep {
    /// The exchange as a chat memory.
    pub chat: Option<KeptMemory>,
    /// A thought (a whisper).
    pub thought: Option<KeptMemory>,
    /// The speaker's new profile.
    pub profile: Option<String>,
    /// The thoughts after the exchange: the planning thought and the memo (SPEC §16).
    pub after_chat: Vec<WrittenThought>,
    /// The exchange's importance when it was weighed against the threshold (a `say`; it was
    /// kept if `chat` is there): the world tells the game ([`DialogueRemembered`]).
    ///
    /// [`DialogueRemembered`]: super::DialogueRemembered
    pub importance: Option<u8>,
}

/// One memory to store.
#[derive(Debug, Clone, Default)]
pub(super) struct KeptMemory {
    pub description: String,
    /// The lines of a chat (empty for a thought).
    pub lines: Vec<(String, String)>,
    pub poignancy: u8,
    pub embedding: Vec<f32>,
    /// Days until it expires (`None`: never).
    pub days: Option<i64>,
}

/// The world's answers.
#[derive(Debug)]
pub(super) enum WorldReply {
    Prepared(Box<Prepared>),
    Tool(ToolAnswer),
    Done,
}

/// What the turn streams to the ECS (display only).
#[derive(Debug, Clone, PartialEq)]
pub(super) enum StreamUpdate {
    /// The reply so far.
    Partial(String),
}

/// The task's end of the link to the world.
#[derive(Debug, Clone)]
pub(super) struct WorldLink {
    pub requests: async_channel::Sender<(WorldRequest, async_channel::Sender<WorldReply>)>,
    pub stream: async_channel::Sender<StreamUpdate>,
}

impl WorldLink {
    async fn ask(&self, request: WorldRequest) -> Option<WorldReply> {
        let (tx, rx) = async_channel::bounded(1);
        self.requests.send((request, tx)).await.ok()?;
        rx.recv().await.ok()
    }

    fn show(&self, text: &str) {
        // A full channel drops it: the next update carries the whole reply again.
        let _ = self
            .stream
            .try_send(StreamUpdate::Partial(text.to_string()));
    }
}

/// Everything a turn needs besides the world.
#[derive(Debug, Clone)]
pub(super) struct TurnInput {
    pub ctx: PromptContext,
    pub settings: Arc<DialogueSettings>,
    pub speaker: String,
    pub mode: DialogueMode,
    /// Earlier turns with this speaker, oldest first: (message, reply, kept pre-start).
    pub recent: Vec<(String, String, String)>,
    pub profile: String,
    pub seed: u64,
    /// The town's agent settings (the after-chat thoughts' mode and expiry).
    pub agent: Arc<AgentSettings>,
}

/// What a turn hands back.
#[derive(Debug, Default)]
pub(super) struct TurnOutcome {
    pub message: String,
    pub reply: String,
    pub tool_calls: Vec<ToolCallRecord>,
    pub planner_calls: u32,
    pub final_output: bool,
    pub kept_prestart: String,
    pub failures: Vec<ModelFailure>,
    pub name: String,
    /// The reply already landed through [`WorldRequest::Replied`]; this outcome only closes
    /// the background stage (its failures).
    pub replied: bool,
}

/// Streams the reply out of a planner answer (the `message` of a finish) or a final answer.
struct ReplyWatcher<'a> {
    link: &'a WorldLink,
    raw: String,
    json: bool,
    shown: String,
}

impl AnswerWatcher for ReplyWatcher<'_> {
    fn attempt_started(&mut self, _attempt: u32) {
        self.raw.clear();
    }

    fn delta(&mut self, text: &str) {
        if self.raw.len() >= 16 * 1024 {
            return;
        }
        self.raw.push_str(text);
        let partial = if self.json {
            let cleaned = clean_response(&self.raw);
            if cleaned.trim_start().starts_with('{') {
                // The partial message is decoded from JSON: redacted like any model string.
                let message = partial_string_field(&cleaned, "message").unwrap_or_default();
                redact_secrets(&message).into_owned()
            } else {
                spoken_text(&cleaned)
            }
        } else {
            spoken_text(&self.raw)
        };
        if partial != self.shown && !partial.is_empty() {
            self.link.show(&partial);
            self.shown = partial;
        }
    }
}

/// `k=v, …` of an argument object (values bounded).
fn args_text(args: &Value) -> String {
    match args.as_object() {
        Some(object) => object
            .iter()
            .map(|(k, v)| {
                let value = match v {
                    Value::String(s) => truncate_chars(s, 80).to_string(),
                    other => truncate_chars(&other.to_string(), 80).to_string(),
                };
                format!(
                    "{}={}",
                    quoted_data(truncate_chars(k, 40)),
                    quoted_data(&value)
                )
            })
            .collect::<Vec<_>>()
            .join(", "),
        None => quoted_data(truncate_chars(&args.to_string(), 120)),
    }
}

/// One entry of the planner's tool history: the tool and its arguments as quoted data, the
/// result fenced (SPEC §7.2). Nothing a model wrote into a call can start another entry.
pub(crate) fn history_entry(tool: &str, args: &Value, result: &Result<Value, String>) -> String {
    format!(
        "{}({}) →\n```\n{}\n```",
        quoted_data(&neutralise(tool, 64)),
        args_text(args),
        result_text(result)
    )
}

/// A tool result as the planner sees it: bounded, tags neutralised, fenced (it is data).
fn result_text(result: &Result<Value, String>) -> String {
    let text = match result {
        Ok(value) => value.to_string(),
        Err(error) => format!("error: {error}"),
    };
    let text = neutralise(&text, 1_500);
    // One line: a result that spans lines (an error echoing a tool name the model wrote with
    // a newline) is quoted, so it cannot add entries to the history it is shown in.
    if text.contains(['\n', '\r']) {
        quoted_data(&text)
    } else {
        text
    }
}

/// `{{question}}` replaced in every string of `args`.
fn substitute(args: &Value, question: &str) -> Value {
    match args {
        Value::String(s) => Value::String(s.replace("{{question}}", question)),
        Value::Array(items) => {
            Value::Array(items.iter().map(|v| substitute(v, question)).collect())
        }
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), substitute(v, question)))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn recent_text(recent: &[(String, String, String)], speaker: &str, name: &str) -> String {
    if recent.is_empty() {
        return "(none)".into();
    }
    let mut out = String::new();
    for (message, reply, kept) in recent {
        if !kept.is_empty() {
            out.push_str(kept);
            out.push('\n');
        }
        out.push_str(&format!(
            "{speaker}:\n```\n{message}\n```\n{name}:\n```\n{reply}\n```\n"
        ));
    }
    out
}

pub(super) fn minute_of(time: &str) -> Option<u32> {
    let (h, m) = time.split_once(':')?;
    let (h, m): (u32, u32) = (h.parse().ok()?, m.parse().ok()?);
    (h < 24 && m < 60).then_some(h * 60 + m)
}

/// Fits an item into the day with the model (SPEC §3.5): the affected window is re-decomposed
/// so the day still sums to 1,440 minutes; when the model's window does not hold the item or
/// the right total, the plain insertion is used.
async fn fit_schedule(ctx: &PromptContext, fit: &ScheduleFit) -> Vec<ScheduleItem> {
    let plain = insert_item(&fit.schedule, fit.minute, &fit.task, fit.minutes);
    let Some((first, last, start)) =
        reaction_window(&fit.schedule, &fit.hourly, fit.minute, fit.minutes)
    else {
        return plain;
    };
    let prompt = NewDecompositionSchedule {
        first_name: fit.first_name.clone(),
        date_text: date_text(fit.now),
        window_start_minute: start,
        items: schedule_pairs(&fit.schedule[first..last]),
        inserted: fit.task.clone(),
        insert_offset: fit.minute.saturating_sub(start),
        inserted_duration: fit.minutes,
    };
    let window: Vec<ScheduleItem> = run_prompt(ctx, &prompt)
        .await
        .value
        .into_iter()
        .map(ScheduleItem::from)
        .collect();
    if window.is_empty() || total_minutes(&window) != total_minutes(&fit.schedule[first..last]) {
        return plain;
    }
    let mut day = fit.schedule.clone();
    day.splice(first..last, window);
    if has_item_at(&day, &fit.task, fit.minute) {
        day
    } else {
        plain
    }
}

/// Runs one turn (see the module docs). Never fails: every prompt has a fail-safe, and a world
/// that went away ends the turn with what it has.
pub(super) async fn run_turn(input: TurnInput, link: WorldLink) -> TurnOutcome {
    let log = FailureLog::default();
    let ctx = input.ctx.clone().with_failure_log(log.clone());
    let mut outcome = match &input.mode {
        DialogueMode::Whisper(text) => whisper(&ctx, &input, &link, text).await,
        // A group line reaches a turn only as a `Say` (see `queue_requests`).
        DialogueMode::Say(text) | DialogueMode::ToGroup(text) => {
            converse(&ctx, &input, &link, text, false, &log).await
        }
        DialogueMode::Interview(text) => converse(&ctx, &input, &link, text, true, &log).await,
    };
    outcome.failures = log.take().0;
    outcome
}

async fn embed(ctx: &PromptContext, text: &str) -> Option<Vec<f32>> {
    match ctx.embed_one(text).await {
        Ok(v) if !v.is_empty() && v.iter().all(|x| x.is_finite()) => Some(v),
        _ => {
            ctx.record_failure(ModelFailure {
                kind: crate::llm::EMBED_KIND,
                reason: crate::prompt::FailureReason::Unusable,
                attempts: 1,
                speaker: None,
            });
            None
        }
    }
}

async fn prepare(link: &WorldLink, focal: Option<Vec<f32>>, stateless: bool) -> Option<Prepared> {
    match link.ask(WorldRequest::Prepare { focal, stateless }).await? {
        WorldReply::Prepared(prepared) => Some(*prepared),
        _ => None,
    }
}

async fn whisper(
    ctx: &PromptContext,
    input: &TurnInput,
    link: &WorldLink,
    text: &str,
) -> TurnOutcome {
    let whisper = neutralise(text, input.settings.max_message_chars.min(1_000));
    let Some(prepared) = prepare(link, None, true).await else {
        return TurnOutcome::default();
    };
    let thought = spoken_text(
        &run_prompt(
            ctx,
            &WhisperThought {
                name: prepared.name.clone(),
                whisper: whisper.clone(),
            },
        )
        .await
        .value,
    );
    let thought = if thought.is_empty() {
        format!(
            "{} thinks: {}",
            prepared.name,
            truncate_chars(&whisper, 300)
        )
    } else {
        thought
    };
    let poignancy = run_prompt(
        ctx,
        &ThoughtPoignancy {
            identity: prepared.identity.clone(),
            first_name: prepared.first_name.clone(),
            thought: thought.clone(),
        },
    )
    .await
    .value;
    if let Some(embedding) = embed(ctx, &thought).await {
        let keep = Keep {
            thought: Some(KeptMemory {
                description: thought.clone(),
                poignancy,
                embedding,
                days: Some(input.settings.whisper_days),
                ..Default::default()
            }),
            ..Default::default()
        };
        link.ask(WorldRequest::Store(keep)).await;
    }
    link.show(&thought);
    TurnOutcome {
        message: whisper,
        reply: thought,
        name: prepared.name,
        ..Default::default()
    }
}

/// A `say` or an interview: pre-processing, the planner loop, the final output, background.
async fn converse(
    ctx: &PromptContext,
    input: &TurnInput,
    link: &WorldLink,
    text: &str,
    stateless: bool,
    log: &FailureLog,
) -> TurnOutcome {
    let settings = &input.settings;
    let message = neutralise(text, settings.max_message_chars);
    let speaker = neutralise(&input.speaker, 60);
    // §7.1: memories with the message as focal point, unless it is a short greeting.
    let focal = if message.trim().chars().count() > settings.greeting_chars {
        embed(ctx, &message).await
    } else {
        None
    };
    let Some(prepared) = prepare(link, focal, stateless).await else {
        return TurnOutcome::default();
    };
    let persona_text = format!(
        "{}\nBehaviour: {}\nYou are {}, talking with {speaker}.",
        prepared.identity, settings.rules, prepared.name
    );
    let profile = if input.profile.is_empty() {
        format!("{} does not know {speaker} yet.", prepared.first_name)
    } else {
        format!(
            "What {} knows of {speaker}: {}",
            prepared.first_name, input.profile
        )
    };
    let observations = format!(
        "{profile}\n{} is at {} and is {}.\nNow: {}",
        prepared.first_name,
        prepared.here,
        prepared.doing,
        prepared.now.format("%A %B %d, %H:%M")
    );
    let memories = if prepared.memories.is_empty() {
        "(no related memories)".to_string()
    } else {
        prepared
            .memories
            .iter()
            // One line per memory: a memory of a reply that spans lines (a model's forged
            // heading or tool history among them) cannot add lines to the prompt.
            .map(|m| format!("- {}", m.replace(['\n', '\r'], " ")))
            .collect::<Vec<_>>()
            .join("\n")
    };

    // Pre-start tools (not for interviews: they may act).
    let mut prestart = String::new();
    let mut kept = String::new();
    if !stateless {
        for tool in &settings.prestart {
            let args = serde_json::from_str::<Value>(&tool.args)
                .map(|a| substitute(&a, &message))
                .unwrap_or_else(|_| Value::Object(Map::new()));
            let result = match link
                .ask(WorldRequest::Tool {
                    tool: tool.tool.clone(),
                    args: args.clone(),
                    prestart: true,
                })
                .await
            {
                Some(WorldReply::Tool(ToolAnswer::Ran(result))) => result,
                _ => Err("unavailable".into()),
            };
            let block = format!(
                "【{}】({})\n```\n{}\n```",
                tool.tool,
                args_text(&args),
                result_text(&result)
            );
            let wrapped = if tool.keep {
                format!("<prestart keep=\"true\">\n{block}\n</prestart>")
            } else {
                format!("<prestart>\n{block}\n</prestart>")
            };
            if tool.keep {
                kept.push_str(&wrapped);
                kept.push('\n');
            }
            prestart.push_str(&wrapped);
            prestart.push('\n');
        }
    }
    let prestart_text = if prestart.is_empty() {
        "(none)".to_string()
    } else {
        prestart.clone()
    };

    let tools: Vec<&ToolSpec> = prepared.tools.iter().collect();
    let tool_list = if tools.is_empty() {
        "(no tools)".to_string()
    } else {
        tools
            .iter()
            .map(|t| t.listing())
            .collect::<Vec<_>>()
            .join("\n")
    };
    let answer_schema = planner_answer_schema(&prepared.tools);
    let recent = recent_text(&input.recent, &speaker, &prepared.name);

    // §7.2: the planner loop.
    let mut calls: Vec<ToolCallRecord> = Vec::new();
    let mut history: Vec<String> = Vec::new();
    let mut last_success: Option<(String, Value)> = None;
    let mut planner_calls = 0u32;
    let mut steps = 0u32;
    let mut reply: Option<String> = None;
    loop {
        let planner = DialoguePlanner {
            speaker: speaker.clone(),
            message: message.clone(),
            persona: persona_text.clone(),
            observations: observations.clone(),
            memories: memories.clone(),
            prestart: prestart_text.clone(),
            tools: tool_list.clone(),
            history: if history.is_empty() {
                "(none)".into()
            } else {
                history.join("\n")
            },
            recent: recent.clone(),
            answer_schema: Some(answer_schema.clone()),
            seed: input.seed.wrapping_add(u64::from(planner_calls)),
        };
        let mut watcher = ReplyWatcher {
            link,
            raw: String::new(),
            json: true,
            shown: String::new(),
        };
        let step = run_prompt_watched(ctx, &planner, Some(&mut watcher))
            .await
            .value;
        planner_calls += 1;
        let (tool, args) = match step {
            PlannerStep::Finish { message } => {
                reply = message;
                break;
            }
            PlannerStep::Tool { tool, args } => (tool, args),
        };
        if last_success
            .as_ref()
            .is_some_and(|(t, a)| *t == tool && *a == args)
        {
            // The same call again after it succeeded: the planner has what it needs.
            break;
        }
        if steps >= settings.max_tool_steps {
            link.ask(WorldRequest::StepLimit { tool: tool.clone() })
                .await;
            calls.push(ToolCallRecord {
                tool,
                args,
                result: Err("tool step limit reached".into()),
            });
            break;
        }
        steps += 1;
        let answer = match link
            .ask(WorldRequest::Tool {
                tool: tool.clone(),
                args: args.clone(),
                prestart: false,
            })
            .await
        {
            Some(WorldReply::Tool(answer)) => answer,
            _ => ToolAnswer::Ran(Err("the world is gone".into())),
        };
        let result = match answer {
            ToolAnswer::Ran(result) => result,
            ToolAnswer::Refused(reason) => Err(match reason {
                RefusalReason::Unknown => format!(
                    "unknown tool `{}`; the tools are: {}",
                    neutralise(&tool, 64),
                    tools
                        .iter()
                        .map(|t| t.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                RefusalReason::NotAllowed => "you may not use this tool".to_string(),
                RefusalReason::BadArguments(why) => why,
                RefusalReason::StepLimit => "tool step limit reached".to_string(),
            }),
            ToolAnswer::Fit(fit) => {
                let after = fit_schedule(ctx, &fit).await;
                match link
                    .ask(WorldRequest::ApplySchedule {
                        before: fit.schedule.clone(),
                        after,
                        fit,
                        args: args.clone(),
                    })
                    .await
                {
                    Some(WorldReply::Tool(ToolAnswer::Ran(result))) => result,
                    _ => Err("the schedule could not be changed".into()),
                }
            }
        };
        if result.is_ok() {
            last_success = Some((tool.clone(), args.clone()));
        }
        history.push(history_entry(&tool, &args, &result));
        calls.push(ToolCallRecord { tool, args, result });
    }

    // §7.3: the final output when the planner gave no message.
    let final_output = reply.is_none();
    let reply = match reply {
        Some(reply) => {
            link.show(&reply);
            reply
        }
        None => {
            let summary = if calls.is_empty() {
                "(none)".to_string()
            } else {
                calls
                    .iter()
                    .map(|c| {
                        format!(
                            "{}({}) → {}",
                            quoted_data(&neutralise(&c.tool, 64)),
                            args_text(&c.args),
                            result_text(&c.result)
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("\n")
            };
            let final_prompt = DialogueFinal {
                speaker: speaker.clone(),
                message: message.clone(),
                persona: persona_text.clone(),
                memories: memories.clone(),
                observations: format!("{observations}\n{prestart}"),
                tools: summary,
                recent: recent.clone(),
                first_name: prepared.first_name.clone(),
                seed: input.seed.wrapping_add(1_000),
            };
            let mut watcher = ReplyWatcher {
                link,
                raw: String::new(),
                json: false,
                shown: String::new(),
            };
            let reply = run_prompt_watched(ctx, &final_prompt, Some(&mut watcher))
                .await
                .value;
            link.show(&reply);
            reply
        }
    };
    let reply = truncate_chars(&reply, MAX_REPLY_CHARS).to_string();

    let outcome = TurnOutcome {
        message,
        reply,
        tool_calls: calls,
        planner_calls,
        final_output,
        kept_prestart: kept,
        failures: Vec::new(),
        name: prepared.name.clone(),
        replied: false,
    };
    // An interview leaves nothing behind: its outcome is the reply.
    if stateless {
        return outcome;
    }
    // §7.4: the reply lands first and the persona is free again; the background stage runs
    // after it (seed 002), its memories stored when they are ready.
    let (message, reply) = (outcome.message.clone(), outcome.reply.clone());
    let failures = log.take().0;
    link.ask(WorldRequest::Replied(Box::new(TurnOutcome {
        failures,
        ..outcome
    })))
    .await;
    background(ctx, input, link, &prepared, &speaker, &message, &reply).await;
    TurnOutcome {
        replied: true,
        name: prepared.name,
        ..Default::default()
    }
}

/// The background stage of a `say` (SPEC §7.4): the exchange's importance and the speaker's
/// profile; when the importance reaches [`DialogueSettings::memory_threshold`], the exchange
/// — what was said and the reply — as a chat memory with an event over it that retrieval
/// finds, and the planning thought and memo of an after-chat.
async fn background(
    ctx: &PromptContext,
    input: &TurnInput,
    link: &WorldLink,
    prepared: &Prepared,
    speaker: &str,
    message: &str,
    reply: &str,
) {
    let lines = vec![
        (
            speaker.to_string(),
            truncate_chars(message, 1_000).to_string(),
        ),
        (prepared.name.clone(), reply.to_string()),
    ];
    let exchange = lines
        .iter()
        .map(|(who, line)| format!("{who}: {line}"))
        .collect::<Vec<_>>()
        .join("\n");
    let poignancy = run_prompt(
        ctx,
        &ChatPoignancy {
            identity: prepared.identity.clone(),
            first_name: prepared.first_name.clone(),
            conversation: exchange.clone(),
        },
    )
    .await
    .value;
    let profile = run_prompt(
        ctx,
        &SpeakerProfileUpdate {
            identity: prepared.identity.clone(),
            first_name: prepared.first_name.clone(),
            speaker: speaker.to_string(),
            old: input.profile.clone(),
            exchange,
        },
    )
    .await
    .value;
    let worth = poignancy >= input.settings.memory_threshold;
    let (chat, after_chat) = if worth {
        // What was said, both ways: the memory is what retrieval finds later (SPEC §16), so
        // it holds the speaker's words, not only the reply.
        let description = format!(
            "conversation with {speaker} at {}: {speaker} said \"{}\"; {} answered \"{}\"",
            prepared.now.format("%H:%M"),
            truncate_chars(message.trim(), 200),
            prepared.first_name,
            truncate_chars(reply, 160)
        );
        // The planning thought and the memo, as after a pair chat (SPEC §3.7, §16).
        let after_chat = write_after_chat(
            ctx,
            &input.agent,
            &prepared.identity,
            &prepared.name,
            &prepared.first_name,
            speaker,
            lines.clone(),
        )
        .await;
        let chat = embed(ctx, &description).await.map(|embedding| KeptMemory {
            description,
            lines,
            poignancy,
            embedding,
            days: None,
        });
        (chat, after_chat)
    } else {
        (None, Vec::new())
    };
    link.ask(WorldRequest::Store(Keep {
        chat,
        thought: None,
        profile: Some(profile),
        after_chat,
        importance: Some(poignancy),
    }))
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn helpers_format_and_substitute() {
        assert_eq!(minute_of("16:05"), Some(965));
        assert_eq!(minute_of("24:00"), None);
        assert_eq!(
            substitute(&json!({"q": "about {{question}}", "n": 2}), "cats"),
            json!({"q": "about cats", "n": 2})
        );
        assert_eq!(args_text(&json!({"a": 1, "b": "x"})), "a=1, b=x");
        assert!(!result_text(&Ok(json!("<think>x"))).contains("<think"));
        let schema = planner_answer_schema(&super::super::tools::built_in_specs());
        assert_eq!(schema["oneOf"].as_array().map(Vec::len), Some(7));
    }
}
