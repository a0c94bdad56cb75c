//! Typed prompts: every question the simulation asks a model goes through one pipeline —
//! **build inputs → call → clean → parse → validate → retry → typed fail-safe**.
//!
//! A prompt is a type implementing [`Prompt`]: it knows its template, how to fill it, how to
//! parse and validate the answer, and what to use when the model never gives a usable one.
//! [`run_prompt`] drives it: up to [`PromptContext::retries`] more attempts after the first
//! (each with a different seed, so a cached bad answer is not simply repeated), then the
//! fail-safe. Whatever the model returns — empty text, prose, broken JSON, `<think>` blocks,
//! megabytes — the caller gets a valid value and the accounting records what happened.
//!
//! An answer that parses but is garbled — a run of one repeated word, non-words, times out
//! of order ([`garbled`], asked of each prompt by [`Prompt::garbled`]) — is rejected the same
//! way and counted as `garbled` in the usage: it never becomes a plan item, a status or a
//! memory. Once the model has garbled most answers of a kind ([`LlmClient::garbles_most`]: 3 in
//! 4, after 4 answers), a garbled answer of that kind takes the fail-safe at once: a model
//! that small is not asked three more times for what it cannot write, and its time goes to
//! the other personas' calls.
//!
//! The response cache only ever holds answers a prompt accepted: an attempt's answer is cached
//! ([`LlmClient::keep`]) after it parsed and validated, never before, so a rejected, failed or
//! fail-safe answer is never served again from the cache.
//!
//! Closed-set prompts (pick a sector, yes/no, option 1 or 2) also list their options: when the
//! backend can score options by likelihood, that is used instead of free generation.
//!
//! Someone may want to *see* an answer while it is generated (the game types a persona's line
//! as the model speaks it). `run_prompt_watched` runs the same pipeline through
//! [`LlmClient::chat_stream`] and hands every text delta to an `AnswerWatcher`. Watching is
//! display only: the watcher sees raw attempts (including ones that are then rejected), and the
//! parsed, validated value is still the only truth.
//!
//! ## Editing prompts without a rebuild
//!
//! The templates (`prompts/v1/*.txt`, one per prompt kind, e.g. `wake_up_hour.txt`) are
//! compiled in. [`PromptLibrary::with_overrides_from_dir`] replaces any of them with a file of
//! the same name from a folder, checked when it is loaded — before any simulation work — so an
//! unknown file name, a broken header marker, a malformed placeholder, a placeholder the
//! prompt never fills or a missing one, a non-UTF-8 or oversized file is an error naming the
//! file (and the placeholder). The `smallville` binary loads that folder from `--prompts DIR`,
//! else the `GA_PROMPTS` environment variable, else the `"prompts"` key of the `--llm-config`
//! file, else uses only the compiled-in templates ([`PromptLibrary::load`]). A game inserts
//! the loaded library as a resource before adding the plugins ([`PromptPlugin`] keeps it).
//! The library's version and the files that replaced templates ([`PromptProvenance`]) are
//! recorded in saves, `usage.json` and the run report.
//!
//! **Layer** (see `tests/layers.rs`): imports [`llm`](crate::llm) only.

pub(crate) mod clean;
mod garble;
mod overrides;
mod parse;
mod template;

pub use clean::{clean_response, extract_json, neutralise_tags, strip_prestart};
pub use garble::{Garble, ItemRules, Repeats, garbled, garbled_items};
pub use overrides::{MAX_TEMPLATE_BYTES, OverrideProblem, PromptOverride, PromptProvenance};
pub use parse::{ParseError, bounded_text, parse_choice, parse_int_in_range, parse_yes_no};
pub use template::{EMBEDDED_V1, HEADER_MARKER, PromptLibrary, PromptTemplate, TemplateError};

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use bevy::log::tracing::{Instrument, field};
use bevy::prelude::*;

use bevy::tasks::futures_lite::future;

use crate::llm::{
    ChatAnswer, ChatRequest, ChoiceRequest, LlmClient, LlmError, LlmErrorKind, RetryBudget,
};

/// One typed question to a model.
pub trait Prompt {
    /// What the caller gets back.
    type Output;

    /// The prompt kind: names the template and keys the accounting.
    fn kind(&self) -> &'static str;

    /// Builds the request from the library's template and this prompt's inputs.
    fn request(&self, library: &PromptLibrary) -> Result<ChatRequest, TemplateError>;

    /// Parses and validates a cleaned answer.
    fn parse(&self, cleaned: &str) -> Result<Self::Output, ParseError>;

    /// The value used when no attempt produced a valid answer.
    fn fail_safe(&self) -> Self::Output;

    /// Whether a parsed answer is garbled (see [`garbled`]): words that parse but mean
    /// nothing. A garbled answer is rejected like one that did not parse — asked again, then
    /// the fail-safe — and counted as `garbled` in the usage. `None` (the default): prompts
    /// whose answers are numbers, choices or emoji have no words to judge.
    fn garbled(&self, output: &Self::Output) -> Option<Garble> {
        let _ = output;
        None
    }

    /// For closed-set prompts: the options to score, and [`Prompt::output_for_option`] maps the
    /// winner back. `None` (the default) means free generation.
    fn options(&self) -> Option<Vec<String>> {
        None
    }

    /// The output for option `index` of [`Prompt::options`].
    fn output_for_option(&self, index: usize) -> Option<Self::Output> {
        let _ = index;
        None
    }
}

/// Everything a prompt needs to run: the client and the templates. Cheap to clone into tasks.
#[derive(Resource, Debug, Clone)]
pub struct PromptContext {
    /// The model client.
    pub client: LlmClient,
    /// The templates.
    pub library: PromptLibrary,
    /// Extra attempts after the first before the fail-safe (SPEC §5: 3).
    pub retries: u32,
    /// Where prompts that fell back to their fail-safe are written down, if anywhere.
    failures: Option<FailureLog>,
    /// The routing key every request made through this context carries (the persona whose
    /// thought it is): a pool of servers keeps it on one server ([`ChatRequest::affinity`]).
    affinity: Option<Arc<str>>,
}

impl PromptContext {
    /// A context with the default 3 retries.
    pub fn new(client: LlmClient, library: PromptLibrary) -> Self {
        Self {
            client,
            library,
            retries: 3,
            failures: None,
            affinity: None,
        }
    }

    /// This context, tagging each request with `key` for prefix affinity (a thought tags its
    /// persona's name).
    pub fn with_affinity(mut self, key: &str) -> Self {
        self.affinity = Some(Arc::from(key));
        self
    }

    /// Sets the retries (builder style).
    pub(crate) fn with_retries(mut self, retries: u32) -> Self {
        self.retries = retries;
        self
    }

    /// This context, writing every failed model call down in `log` (a thought's own log: the
    /// loop reports them to the game as `ModelCallFailed`).
    pub(crate) fn with_failure_log(mut self, log: FailureLog) -> Self {
        self.failures = Some(log);
        self
    }

    /// Embeds one text for this context's thought: with the thought's [`RetryBudget`], and
    /// not at all once the backend has given out on the thought (its failures are already
    /// written down; the caller takes its own fail-safe).
    pub async fn embed_one(&self, text: impl Into<String>) -> Result<Vec<f32>, LlmError> {
        let budget = self.embedding_budget()?;
        self.client.embed_one_within(text, budget).await
    }

    /// Embeds several texts in one request, as [`PromptContext::embed_one`] embeds one (lean
    /// mode's batched percepts). One vector per text, in order.
    pub async fn embed_many(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>, LlmError> {
        let budget = self.embedding_budget()?;
        self.client.embed_within(texts, budget).await
    }

    /// The thought's retry budget for an embedding — or the error to answer with at once when
    /// the backend has given out on the thought.
    fn embedding_budget(&self) -> Result<Option<RetryBudget>, LlmError> {
        if let Some(kind) = self.failures.as_ref().and_then(FailureLog::gave_out) {
            return Err(match kind {
                LlmErrorKind::Closed => LlmError::Closed,
                _ => LlmError::Connection("the backend gave out earlier in this thought".into()),
            });
        }
        Ok(self.failures.as_ref().map(|log| log.budget.clone()))
    }

    /// From now on, the calls made through this context are made for the persona `name` (a
    /// conversation's lines alternate between its two sides): a failed call is written down
    /// as that persona's, so `ModelCallFailed` names the persona whose call failed. `None`:
    /// the thought's own persona.
    pub(crate) fn speaking_for(&self, name: Option<&str>) {
        if let Some(log) = &self.failures {
            log.entries
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .speaker = name.map(Arc::from);
        }
    }

    /// Writes `failure` down in the failure log, if the context has one.
    pub(crate) fn record_failure(&self, failure: ModelFailure) {
        if let Some(log) = &self.failures {
            log.push(failure);
        }
    }
}

/// Why a prompt (or an embedding) gave no usable model answer. Names a kind, never a message,
/// so it carries nothing secret.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FailureReason {
    /// The prompt's template could not be filled (a broken template file).
    Template,
    /// The model answered, but no answer could be parsed and validated.
    Unusable,
    /// The last backend call failed with an error of this kind.
    Backend(LlmErrorKind),
}

/// A model call that ended in a fail-safe (or an embedding that failed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ModelFailure {
    /// The prompt kind ([`Prompt::kind`], or [`EMBED_KIND`](crate::llm::EMBED_KIND)).
    pub kind: &'static str,
    /// What went wrong last.
    pub reason: FailureReason,
    /// Model calls made before giving up.
    pub attempts: u32,
    /// The persona the call was made for, when a thought speaks for more than one (a
    /// conversation's partner): filled in from [`PromptContext::speaking_for`].
    pub speaker: Option<Arc<str>>,
}

/// A shared, append-only list of [`ModelFailure`]s: one per thought, filled by
/// [`run_prompt`] through a [`PromptContext::with_failure_log`] and read when the thought
/// lands. Bounded: past [`FailureLog::CAPACITY`] entries further failures are counted only.
#[derive(Debug, Clone, Default)]
pub(crate) struct FailureLog {
    entries: Arc<Mutex<FailureEntries>>,
    /// The thought's allowance for failed attempts, handed to every request it makes.
    budget: RetryBudget,
}

#[derive(Debug, Default)]
struct FailureEntries {
    failures: Vec<ModelFailure>,
    dropped: u64,
    /// Whom the thought's calls are made for now (see [`PromptContext::speaking_for`]).
    speaker: Option<Arc<str>>,
    /// The backend failed this thought after all its retries (a transient error, or closed):
    /// the thought's later prompts take their fail-safes without calling it.
    gave_out: Option<LlmErrorKind>,
}

impl FailureLog {
    /// Entries kept; a thought makes a few dozen calls, so this is only hit by a runaway loop.
    pub(crate) const CAPACITY: usize = 256;

    /// Writes `failure` down (or counts it, when full).
    pub fn push(&self, mut failure: ModelFailure) {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        if failure.speaker.is_none() {
            failure.speaker.clone_from(&entries.speaker);
        }
        if let FailureReason::Backend(kind) = failure.reason
            && kind.gives_out()
        {
            entries.gave_out.get_or_insert(kind);
        }
        if entries.failures.len() < Self::CAPACITY {
            entries.failures.push(failure);
        } else {
            entries.dropped = entries.dropped.saturating_add(1);
        }
    }

    /// The error that made the backend give out on this thought, if it did.
    fn gave_out(&self) -> Option<LlmErrorKind> {
        self.entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .gave_out
    }

    /// Takes the failures written so far, oldest first, and how many did not fit.
    pub fn take(&self) -> (Vec<ModelFailure>, u64) {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        let dropped = std::mem::take(&mut entries.dropped);
        (std::mem::take(&mut entries.failures), dropped)
    }
}

/// What running a prompt produced.
#[derive(Debug, Clone, PartialEq)]
pub struct PromptOutcome<T> {
    /// The value: parsed from the model, or the fail-safe.
    pub value: T,
    /// Model calls made (0 when the template itself was unusable).
    pub attempts: u32,
    /// Whether `value` is the fail-safe.
    pub fail_safe: bool,
}

/// Sees the text of a prompt's answer while the model generates it (see the module docs).
///
/// Display only: what it is shown may be rejected by the parser, and the value
/// [`run_prompt_watched`] returns is what counts.
pub(crate) trait AnswerWatcher: Send {
    /// Attempt number `attempt` (0 for the first) starts: the text of earlier attempts is void.
    fn attempt_started(&mut self, attempt: u32);
    /// More text of the current attempt arrived.
    fn delta(&mut self, text: &str);
}

/// Deltas buffered between the backend and an [`AnswerWatcher`]. The watcher is polled with
/// the call, so a small buffer only smooths bursts; a full one makes the backend wait.
const WATCHED_DELTAS: usize = 32;

/// Runs `prompt` to completion. Never panics and always returns a value.
pub async fn run_prompt<P: Prompt>(ctx: &PromptContext, prompt: &P) -> PromptOutcome<P::Output> {
    run_prompt_watched(ctx, prompt, None).await
}

/// [`run_prompt`], streaming each generated answer to `watcher` when one is given. Without a
/// watcher it is exactly [`run_prompt`]; with one, generation goes through
/// [`LlmClient::chat_stream`] (same cache, same accounting; a cached answer arrives as one
/// delta). Choice scoring, when a prompt uses it, has no text to watch.
///
/// Every call runs in a `model_call` span (kind; latency, attempts and fail-safe recorded when
/// it ends; the persona is the enclosing `thought` or `conversation` span's), closed by a
/// `debug!` line: `RUST_LOG=bevy_generative_agents=debug` shows them. When that level is off the
/// clock is not even read.
pub(crate) async fn run_prompt_watched<P: Prompt>(
    ctx: &PromptContext,
    prompt: &P,
    watcher: Option<&mut dyn AnswerWatcher>,
) -> PromptOutcome<P::Output> {
    let span = debug_span!(
        "model_call",
        kind = prompt.kind(),
        latency_ms = field::Empty,
        attempts = field::Empty,
        fail_safe = field::Empty
    );
    if span.is_disabled() {
        return run_prompt_inner(ctx, prompt, watcher).await;
    }
    let start = Instant::now();
    let outcome = run_prompt_inner(ctx, prompt, watcher)
        .instrument(span.clone())
        .await;
    let latency_ms = u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX);
    span.record("latency_ms", latency_ms);
    span.record("attempts", outcome.attempts);
    span.record("fail_safe", outcome.fail_safe);
    span.in_scope(|| debug!(latency_ms, "model call done"));
    outcome
}

/// The pipeline of [`run_prompt_watched`], outside any span.
async fn run_prompt_inner<P: Prompt>(
    ctx: &PromptContext,
    prompt: &P,
    mut watcher: Option<&mut dyn AnswerWatcher>,
) -> PromptOutcome<P::Output> {
    let kind = prompt.kind();
    // The backend already failed this thought after every retry it is allowed: the rest of
    // the thought does not keep the town waiting on it (SPEC §12 R2).
    if let Some(error) = ctx.failures.as_ref().and_then(FailureLog::gave_out) {
        debug!(
            kind,
            "the backend gave out earlier in this thought; using the fail-safe"
        );
        return fail_safe(ctx, prompt, FailureReason::Backend(error), 0);
    }
    let mut request = match prompt.request(&ctx.library) {
        Ok(mut request) => {
            if request.affinity.is_none() {
                request.affinity = ctx.affinity.as_deref().map(str::to_owned);
            }
            if request.retry_budget.is_none() {
                request.retry_budget = ctx.failures.as_ref().map(|log| log.budget.clone());
            }
            request
        }
        Err(error) => {
            error!(kind, %error, "prompt template unusable; using the fail-safe");
            return fail_safe(ctx, prompt, FailureReason::Template, 0);
        }
    };

    if let Some(options) = prompt.options().filter(|o| !o.is_empty())
        && ctx.client.supports_choice_scoring()
    {
        let choice = ChoiceRequest {
            kind: kind.to_string(),
            messages: request.messages.clone(),
            options: options.clone(),
            affinity: request.affinity.clone(),
            about: request.about.clone(),
            option_phrases: request.option_phrases.clone(),
        };
        match ctx.client.score_choices(choice).await {
            Ok(scores) => {
                if let Some(value) = best_option(&scores).and_then(|i| prompt.output_for_option(i))
                {
                    return PromptOutcome {
                        value,
                        attempts: 1,
                        fail_safe: false,
                    };
                }
                warn!(
                    kind,
                    "choice scoring gave no usable option; generating instead"
                );
            }
            // A backend shutting down (the app is exiting) is no surprise worth a warning.
            Err(LlmError::Closed) => debug!(kind, "choice scoring: the backend is closed"),
            Err(error) => warn!(kind, %error, "choice scoring failed; generating instead"),
        }
    }

    let base_seed = request.seed.unwrap_or(0);
    let mut attempts = 0;
    let mut reason = FailureReason::Unusable;
    for attempt in 0..=ctx.retries {
        // A new seed per attempt: a different sample, and a different cache key.
        request.seed = Some(base_seed.wrapping_add(attempt as u64));
        attempts += 1;
        if attempt > 0 {
            ctx.client.record_retry(kind);
        }
        let answer = match watcher.as_deref_mut() {
            Some(watcher) => {
                watcher.attempt_started(attempt);
                watched_chat(&ctx.client, request.clone(), watcher).await
            }
            None => ctx.client.ask_borrowed(&request).await,
        };
        match answer {
            Ok(answer) => {
                // Whatever backend or cache answered, no secret reaches a parser in any
                // encoding (the text is borrowed as it is when it holds none).
                let cleaned = clean_response(&answer.response.text);
                let cleaned = crate::llm::redact_secrets(&cleaned);
                let mut garbled = false;
                let parsed =
                    prompt
                        .parse(&cleaned)
                        .and_then(|value| match prompt.garbled(&value) {
                            Some(garble) => {
                                garbled = true;
                                ctx.client.record_garbled(kind);
                                Err(ParseError::new(format!("garbled answer ({garble})")))
                            }
                            None => Ok(value),
                        });
                match parsed {
                    Ok(value) => {
                        // Only an accepted answer is worth answering from the cache again.
                        ctx.client.keep(&answer);
                        return PromptOutcome {
                            value,
                            attempts,
                            fail_safe: false,
                        };
                    }
                    Err(rejected) => {
                        ctx.client.reject(&answer);
                        reason = FailureReason::Unusable;
                        debug!(kind, attempt, reason = %rejected, "rejected model answer");
                        if garbled && ctx.client.garbles_most(kind) {
                            debug!(
                                kind,
                                "the model garbles most answers of this kind; fail-safe"
                            );
                            break;
                        }
                    }
                }
            }
            Err(error) => {
                debug!(kind, attempt, %error, "model call failed");
                reason = FailureReason::Backend(error.kind());
                // A backend that retries by itself has used up its retries (asking again would
                // multiply the configured wait); other transient errors are asked again.
                if !error.is_transient() || ctx.client.retries_transient_errors() {
                    break;
                }
            }
        }
    }
    fail_safe(ctx, prompt, reason, attempts)
}

/// The prompt's fail-safe, counted in the usage and written down in the thought's failure log.
fn fail_safe<P: Prompt>(
    ctx: &PromptContext,
    prompt: &P,
    reason: FailureReason,
    attempts: u32,
) -> PromptOutcome<P::Output> {
    let kind = prompt.kind();
    ctx.client.record_fail_safe(kind);
    ctx.record_failure(ModelFailure {
        kind,
        reason,
        attempts,
        speaker: None,
    });
    PromptOutcome {
        value: prompt.fail_safe(),
        attempts,
        fail_safe: true,
    }
}

/// One streamed chat whose deltas go to `watcher` as they arrive. The call's result decides
/// when it is over (not the delta channel closing, which a backend may delay), and deltas still
/// buffered then are handed over before returning.
async fn watched_chat(
    client: &LlmClient,
    request: ChatRequest,
    watcher: &mut dyn AnswerWatcher,
) -> Result<ChatAnswer, LlmError> {
    let (sender, receiver) = async_channel::bounded::<String>(WATCHED_DELTAS);
    let result = {
        let forward = async {
            while let Ok(delta) = receiver.recv().await {
                watcher.delta(&delta);
            }
            // Every sender is gone: only the call's own end is left to wait for.
            future::pending::<Result<ChatAnswer, LlmError>>().await
        };
        future::or(client.ask_stream(request, sender), forward).await
    };
    while let Ok(delta) = receiver.try_recv() {
        watcher.delta(&delta);
    }
    result
}

/// Index of the highest finite score.
fn best_option(scores: &[f32]) -> Option<usize> {
    scores
        .iter()
        .enumerate()
        .filter(|(_, s)| s.is_finite())
        .max_by(|a, b| a.1.total_cmp(b.1))
        .map(|(i, _)| i)
}

/// A prompt asking for a JSON object, for game code's one-off questions
/// (template `generic_json`). Parses the first JSON object in the answer.
#[derive(Debug, Clone)]
pub struct JsonQuestion {
    /// The task in plain words.
    pub task: String,
    /// An example of the expected answer.
    pub example: serde_json::Value,
    /// Keys the answer must have.
    pub required_keys: Vec<String>,
}

impl Prompt for JsonQuestion {
    type Output = Option<serde_json::Value>;

    fn kind(&self) -> &'static str {
        "generic_json"
    }

    fn request(&self, library: &PromptLibrary) -> Result<ChatRequest, TemplateError> {
        let prompt = library.fill(
            "generic_json",
            &[self.task.clone(), self.example.to_string()],
        )?;
        Ok(ChatRequest::new(self.kind(), prompt).with_temperature(0.0))
    }

    fn parse(&self, cleaned: &str) -> Result<Self::Output, ParseError> {
        let value =
            extract_json(cleaned).ok_or_else(|| ParseError::new("no JSON in the answer"))?;
        let object = value
            .as_object()
            .ok_or_else(|| ParseError::new("not a JSON object"))?;
        if let Some(missing) = self.required_keys.iter().find(|k| !object.contains_key(*k)) {
            return Err(ParseError::new(format!("missing key `{missing}`")));
        }
        Ok(Some(value))
    }

    fn fail_safe(&self) -> Self::Output {
        None
    }
}

/// Inserts the default [`PromptLibrary`] (unless the game inserted its own, e.g.
/// `PromptLibrary::load(Some(dir))?` for a folder of edited templates).
#[derive(Default)]
pub struct PromptPlugin;

impl Plugin for PromptPlugin {
    fn build(&self, app: &mut App) {
        app.init_resource::<PromptLibrary>();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use bevy::tasks::futures_lite::future::block_on;

    use super::*;
    use crate::llm::ScriptedBackend;

    /// Writes down what it was shown.
    #[derive(Default)]
    struct Recorder(Vec<String>);

    impl AnswerWatcher for Recorder {
        fn attempt_started(&mut self, attempt: u32) {
            self.0.push(format!("<attempt {attempt}>"));
        }

        fn delta(&mut self, text: &str) {
            self.0.push(text.to_string());
        }
    }

    fn question() -> JsonQuestion {
        JsonQuestion {
            task: "count".into(),
            example: serde_json::json!({"a": 1}),
            required_keys: vec!["a".into()],
        }
    }

    /// Prose on the first attempt (seed 0), JSON after.
    fn context() -> PromptContext {
        let backend = ScriptedBackend::new(1).with_responder("generic_json", |request, _| {
            if request.seed == Some(0) {
                "no json here".into()
            } else {
                "{\"a\": 1} done".into()
            }
        });
        PromptContext::new(LlmClient::new(Arc::new(backend)), PromptLibrary::default())
    }

    #[test]
    fn a_watched_prompt_streams_every_attempt_and_returns_the_same_value() {
        let ctx = context();
        let mut seen = Recorder::default();
        let watched = block_on(run_prompt_watched(&ctx, &question(), Some(&mut seen)));
        // The scripted backend streams word by word; the rejected attempt is shown too.
        assert_eq!(
            seen.0,
            [
                "<attempt 0>",
                "no ",
                "json ",
                "here",
                "<attempt 1>",
                "{\"a\": ",
                "1} ",
                "done"
            ]
        );
        assert_eq!(watched.value, Some(serde_json::json!({"a": 1})));
        assert_eq!((watched.attempts, watched.fail_safe), (2, false));

        // Temperature 0: the accepted answer is cached and arrives as one delta; the rejected
        // one never was, so it is asked (and streamed) again.
        let mut again = Recorder::default();
        let cached = block_on(run_prompt_watched(&ctx, &question(), Some(&mut again)));
        assert_eq!(
            again.0,
            [
                "<attempt 0>",
                "no ",
                "json ",
                "here",
                "<attempt 1>",
                "{\"a\": 1} done"
            ]
        );
        assert_eq!(cached, watched);
        assert_eq!(ctx.client.usage().totals.cache_hits, 1);
        assert_eq!(ctx.client.cache().len(), 1);

        // Unwatched, the same outcome.
        assert_eq!(block_on(run_prompt(&ctx, &question())), watched);
    }

    /// A one-line answer that must not be garbled.
    struct Line;

    impl Prompt for Line {
        type Output = String;
        fn kind(&self) -> &'static str {
            "line"
        }
        fn request(&self, _: &PromptLibrary) -> Result<ChatRequest, TemplateError> {
            Ok(ChatRequest::new("line", "say something"))
        }
        fn parse(&self, cleaned: &str) -> Result<String, ParseError> {
            bounded_text(cleaned, 200)
        }
        fn fail_safe(&self) -> String {
            "the fail-safe".into()
        }
        fn garbled(&self, output: &String) -> Option<Garble> {
            garbled(output)
        }
    }

    #[test]
    fn a_garbled_answer_is_retried_counted_and_never_kept() {
        // Garbled on the first two attempts (seeds 0 and 1), words after.
        let backend =
            ScriptedBackend::new(1).with_responder("line", |request, _| match request.seed {
                Some(0) => "ulcis, iaceo, iaceo, iaceo at 6:00 pm".into(),
                Some(1) => "xkcdq vbnmz qwrtp".into(),
                _ => "dinner with Klaus Mueller at 6:00 pm".into(),
            });
        let ctx = PromptContext::new(LlmClient::new(Arc::new(backend)), PromptLibrary::default());
        let outcome = block_on(run_prompt(&ctx, &Line));
        assert_eq!(outcome.value, "dinner with Klaus Mueller at 6:00 pm");
        assert_eq!((outcome.attempts, outcome.fail_safe), (3, false));
        let usage = ctx.client.usage().kind("line");
        assert_eq!((usage.garbled, usage.retries, usage.fail_safes), (2, 2, 0));

        // Always garbled: the fail-safe, every attempt counted.
        let backend =
            ScriptedBackend::new(1).with_responder("line", |_, _| "iaceo iaceo iaceo iaceo".into());
        let ctx = PromptContext::new(LlmClient::new(Arc::new(backend)), PromptLibrary::default());
        let outcome = block_on(run_prompt(&ctx, &Line));
        assert_eq!(outcome.value, "the fail-safe");
        assert!(outcome.fail_safe);
        let usage = ctx.client.usage();
        assert_eq!(usage.kind("line").garbled, 4);
        assert_eq!(usage.kind("line").fail_safes, 1);
        assert_eq!(usage.totals.garbled, 4);

        // Now the model has garbled every answer of the kind: the next garbled answer takes
        // the fail-safe at once, while an answer that is fine is still kept.
        assert!(ctx.client.garbles_most("line"));
        let outcome = block_on(run_prompt(&ctx, &Line));
        assert_eq!((outcome.attempts, outcome.fail_safe), (1, true));
        assert_eq!(ctx.client.usage().kind("line").garbled, 5);
        assert!(!ctx.client.garbles_most("other"), "judged per kind");
    }

    #[test]
    fn a_kind_is_judged_garbling_after_four_answers_three_in_four_garbled() {
        // Seeds 0 to 2 garbled, later ones fine.
        let backend =
            ScriptedBackend::new(1).with_responder("line", |request, _| match request.seed {
                Some(0..=2) => "iaceo iaceo iaceo iaceo".into(),
                _ => "dinner with Klaus Mueller at 6:00 pm".into(),
            });
        let ctx = PromptContext::new(LlmClient::new(Arc::new(backend)), PromptLibrary::default());
        assert!(!ctx.client.garbles_most("line"), "nothing asked yet");
        // Three garbled answers and a good one: 3 of 4 garbled — retried all the same, because
        // the fourth answer only came after the third was judged.
        let outcome = block_on(run_prompt(&ctx, &Line));
        assert_eq!((outcome.attempts, outcome.fail_safe), (4, false));
        assert!(ctx.client.garbles_most("line"), "3 of 4 garbled");
        // The same again: its first answer is garbled and that is the end of it.
        let outcome = block_on(run_prompt(&ctx, &Line));
        assert_eq!((outcome.attempts, outcome.fail_safe), (1, true));
    }

    /// A server that is down, behind a backend that retries by itself (`retries`), counting
    /// the calls that reach it.
    struct Down {
        calls: std::sync::atomic::AtomicU32,
        retries: bool,
    }

    impl crate::llm::LlmBackend for Down {
        fn name(&self) -> &str {
            "down"
        }
        fn model(&self) -> &str {
            "down"
        }
        fn chat(
            &self,
            _: ChatRequest,
        ) -> crate::llm::BoxFuture<'_, Result<crate::llm::ChatResponse, LlmError>> {
            self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Box::pin(async { Err(LlmError::Connection("refused".into())) })
        }
        fn embed(
            &self,
            _: Vec<String>,
        ) -> crate::llm::BoxFuture<'_, Result<Vec<Vec<f32>>, LlmError>> {
            self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Box::pin(async { Err(LlmError::Connection("refused".into())) })
        }
        fn embedding_model(&self) -> &str {
            "down"
        }
        fn embedding_dim(&self) -> usize {
            4
        }
        fn retries_transient_errors(&self) -> bool {
            self.retries
        }
    }

    #[test]
    fn a_thought_stops_asking_a_backend_that_gave_out() {
        let thought = |retries: bool| {
            let down = Arc::new(Down {
                calls: Default::default(),
                retries,
            });
            let client = LlmClient::new(Arc::clone(&down) as Arc<dyn crate::llm::LlmBackend>);
            let log = FailureLog::default();
            let ctx =
                PromptContext::new(client, PromptLibrary::default()).with_failure_log(log.clone());
            let first = block_on(run_prompt(&ctx, &question()));
            let second = block_on(run_prompt(&ctx, &question()));
            let embedded = block_on(ctx.embed_one("a memory"));
            let calls = down.calls.load(std::sync::atomic::Ordering::SeqCst);
            (first, second, embedded.is_err(), calls, log.take().0.len())
        };
        // The backend retried on its own: one call, then the thought asks nothing more.
        let (first, second, embed_failed, calls, failures) = thought(true);
        assert!(first.fail_safe && second.fail_safe && embed_failed);
        assert_eq!((first.attempts, second.attempts), (1, 0));
        assert_eq!(calls, 1);
        assert_eq!(failures, 2);
        // A backend that does not retry: the prompt asks again (1 + 3 retries), then gives out.
        let (first, second, _, calls, _) = thought(false);
        assert_eq!((first.attempts, second.attempts), (4, 0));
        assert_eq!(calls, 4);
    }

    #[test]
    fn a_budget_is_shared_and_runs_out() {
        let budget = RetryBudget::new();
        let clone = budget.clone();
        assert_eq!(budget.remaining(), None);
        let allowance = std::time::Duration::from_secs(4);
        assert!(budget.spend(allowance, std::time::Duration::from_millis(2_500)));
        assert_eq!(
            clone.remaining(),
            Some(std::time::Duration::from_millis(1_500))
        );
        assert!(!clone.spend(allowance, std::time::Duration::from_secs(2)));
        assert_eq!(budget.remaining(), Some(std::time::Duration::ZERO));
        assert_eq!(budget, clone);
        assert_ne!(budget, RetryBudget::new());
    }
}
