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
//! Closed-set prompts (pick a sector, yes/no, option 1 or 2) also list their options: when the
//! backend can score options by likelihood, that is used instead of free generation.

mod clean;
mod parse;
mod template;

pub use clean::{clean_response, extract_json};
pub use parse::{ParseError, bounded_text, parse_choice, parse_int_in_range, parse_yes_no};
pub use template::{EMBEDDED_V1, HEADER_MARKER, PromptLibrary, PromptTemplate, TemplateError};

use bevy::prelude::*;

use crate::llm::{ChatRequest, ChoiceRequest, LlmClient};

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
}

impl PromptContext {
    /// A context with the default 3 retries.
    pub fn new(client: LlmClient, library: PromptLibrary) -> Self {
        Self {
            client,
            library,
            retries: 3,
        }
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

/// Runs `prompt` to completion. Never panics and always returns a value.
pub async fn run_prompt<P: Prompt>(ctx: &PromptContext, prompt: &P) -> PromptOutcome<P::Output> {
    let kind = prompt.kind();
    let request = match prompt.request(&ctx.library) {
        Ok(request) => request,
        Err(error) => {
            error!(kind, %error, "prompt template unusable; using the fail-safe");
            ctx.client.record_fail_safe(kind);
            return PromptOutcome {
                value: prompt.fail_safe(),
                attempts: 0,
                fail_safe: true,
            };
        }
    };

    if let Some(options) = prompt.options().filter(|o| !o.is_empty())
        && ctx.client.supports_choice_scoring()
    {
        let choice = ChoiceRequest {
            kind: kind.to_string(),
            messages: request.messages.clone(),
            options: options.clone(),
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
            Err(error) => warn!(kind, %error, "choice scoring failed; generating instead"),
        }
    }

    let base_seed = request.seed.unwrap_or(0);
    let mut attempts = 0;
    for attempt in 0..=ctx.retries {
        let mut request = request.clone();
        // A new seed per attempt: a different sample, and a different cache key.
        request.seed = Some(base_seed.wrapping_add(attempt as u64));
        attempts += 1;
        if attempt > 0 {
            ctx.client.record_retry(kind);
        }
        match ctx.client.chat(request).await {
            Ok(response) => {
                let cleaned = clean_response(&response.text);
                match prompt.parse(&cleaned) {
                    Ok(value) => {
                        return PromptOutcome {
                            value,
                            attempts,
                            fail_safe: false,
                        };
                    }
                    Err(reason) => debug!(kind, attempt, %reason, "rejected model answer"),
                }
            }
            Err(error) => {
                debug!(kind, attempt, %error, "model call failed");
                if !error.is_transient() {
                    break;
                }
            }
        }
    }
    ctx.client.record_fail_safe(kind);
    PromptOutcome {
        value: prompt.fail_safe(),
        attempts,
        fail_safe: true,
    }
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

/// Inserts the default [`PromptLibrary`] (unless the game inserted its own).
#[derive(Default)]
pub struct PromptPlugin;

impl Plugin for PromptPlugin {
    fn build(&self, app: &mut App) {
        app.init_resource::<PromptLibrary>();
    }
}
