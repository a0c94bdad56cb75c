//! The contract every language-model backend fulfils.
//!
//! A backend answers three kinds of question: *complete this chat* (optionally streamed and
//! optionally constrained to a JSON schema), *embed these texts*, and — where it can — *score
//! these closed-set options* by likelihood. Everything is `async` and `Send`, because calls run
//! on task pools or a backend's own thread, never on the frame.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// A boxed, sendable future: the return type of every backend call.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Observes the transport-level retries a backend makes on its own (HTTP 429, 5xx, timeouts):
/// called with the prompt kind before each retry. See [`LlmBackend::set_retry_hook`].
pub type RetryHook = std::sync::Arc<dyn Fn(&str) + Send + Sync>;

/// A rough token count for backends that do not report one: about four bytes of text per
/// token, at least one token for non-empty text.
pub(crate) fn estimate_tokens(text: &str) -> u64 {
    estimate_tokens_of_len(text.len())
}

/// [`estimate_tokens`] of a text `len` bytes long.
pub(crate) fn estimate_tokens_of_len(len: usize) -> u64 {
    (len as u64).div_ceil(4)
}

/// Who said a chat message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Instructions framing the conversation.
    System,
    /// The prompt.
    User,
    /// The model's answer (also used to prefill an answer).
    Assistant,
}

/// One chat message.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ChatMessage {
    /// Who speaks.
    pub role: Role,
    /// What is said.
    pub content: String,
}

impl ChatMessage {
    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        Self {
            role: Role::System,
            content: content.into(),
        }
    }
    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Self {
            role: Role::User,
            content: content.into(),
        }
    }
    /// An assistant message.
    pub fn assistant(content: impl Into<String>) -> Self {
        Self {
            role: Role::Assistant,
            content: content.into(),
        }
    }
}

/// A chat-completion request.
///
/// `kind` names the prompt (e.g. `"wake_up_hour"`): it keys usage accounting and lets the
/// scripted backend answer by prompt kind. It is not sent to a server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    /// The prompt kind, for accounting and scripted answers.
    pub kind: String,
    /// The conversation so far.
    pub messages: Vec<ChatMessage>,
    /// Upper bound on generated tokens.
    pub max_tokens: u32,
    /// Sampling temperature (0 = greedy).
    pub temperature: f32,
    /// Nucleus sampling.
    pub top_p: f32,
    /// Stop sequences.
    pub stop: Vec<String>,
    /// When set, the answer must be JSON matching this schema (structured output / grammar).
    pub json_schema: Option<serde_json::Value>,
    /// Seed for backends that sample.
    pub seed: Option<u64>,
    /// The routing key for prefix affinity (the persona whose thought asks): a pool of servers
    /// sends the same key to the same healthy server, so its prefix cache hits. Not sent to a
    /// server and not part of the cache key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<String>,
    /// The thought's allowance for failed attempts and back-off, shared by all its calls
    /// ([`RetryBudget`]); a backend that retries stops retrying once it is spent. Never sent,
    /// never cached.
    #[serde(skip)]
    pub retry_budget: Option<RetryBudget>,
    /// What the request is about in plain words — the event to rate, the errand to place —
    /// for backends that answer some kinds by other means than the chat model (the local
    /// default rates poignancy and picks places with its sentence embedder). Not sent to a
    /// server and not part of the cache key (the messages say the same).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub about: Option<String>,
    /// How each option of a choice reads in plain words, in the options' order ("at home:
    /// kitchen, bedroom" for the persona's own house), for the same backends as `about`;
    /// empty when the option names say enough. Not sent, not part of the cache key.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub option_phrases: Vec<String>,
}

impl ChatRequest {
    /// A request of `kind` with one user message and conservative defaults
    /// (`max_tokens = 500`, `temperature = 0.5`, `top_p = 1`).
    pub fn new(kind: impl Into<String>, prompt: impl Into<String>) -> Self {
        Self {
            kind: kind.into(),
            messages: vec![ChatMessage::user(prompt)],
            max_tokens: 500,
            temperature: 0.5,
            top_p: 1.0,
            stop: Vec::new(),
            json_schema: None,
            seed: None,
            affinity: None,
            retry_budget: None,
            about: None,
            option_phrases: Vec::new(),
        }
    }

    /// Sets the routing key for prefix affinity (see [`ChatRequest::affinity`]).
    pub fn with_affinity(mut self, key: impl Into<String>) -> Self {
        self.affinity = Some(key.into());
        self
    }

    /// Says what the request is about (see [`ChatRequest::about`]).
    pub fn with_about(mut self, about: impl Into<String>) -> Self {
        self.about = Some(about.into());
        self
    }

    /// Says how each option reads in plain words (see [`ChatRequest::option_phrases`]).
    pub fn with_option_phrases(mut self, phrases: Vec<String>) -> Self {
        self.option_phrases = phrases;
        self
    }

    /// Sets `max_tokens`.
    pub fn with_max_tokens(mut self, max_tokens: u32) -> Self {
        self.max_tokens = max_tokens;
        self
    }

    /// Sets the temperature.
    pub fn with_temperature(mut self, temperature: f32) -> Self {
        self.temperature = temperature;
        self
    }

    /// Constrains the answer to JSON matching `schema`.
    pub fn with_json_schema(mut self, schema: serde_json::Value) -> Self {
        self.json_schema = Some(schema);
        self
    }

    /// Adds stop sequences.
    pub fn with_stop(mut self, stop: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.stop.extend(stop.into_iter().map(Into::into));
        self
    }

    /// The length in bytes of [`Self::prompt_text`], without making it.
    pub fn prompt_len(&self) -> usize {
        self.messages.iter().map(|m| m.content.len() + 1).sum()
    }

    /// The concatenated text of every message: the basis of cache keys and scripted answers.
    pub fn prompt_text(&self) -> String {
        let mut text = String::new();
        for message in &self.messages {
            text.push_str(&message.content);
            text.push('\n');
        }
        text
    }
}

/// Token counts reported by a backend for one call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenUsage {
    /// Tokens read.
    pub prompt_tokens: u64,
    /// Tokens written.
    pub completion_tokens: u64,
    /// Of the prompt tokens, those the backend found in its prefix cache and did not decode
    /// again (the embedded model's KV slots; 0 when a backend does not say).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reused_prompt_tokens: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A finished chat completion.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatResponse {
    /// The generated text.
    pub text: String,
    /// Token counts (estimated when the backend does not report them).
    pub usage: TokenUsage,
}

/// How much time one thought may lose to failed model calls: failed attempts and the back-off
/// before retrying them, summed over all the thought's calls (SPEC §12 R2). A backend that
/// retries on its own sets the allowance on the first failure — for the HTTP backend its
/// `timeout × max_retries`, so that with the last attempt the thought waits on failures at
/// most `timeout × (max_retries + 1)`, what one call may take — and retries only while the
/// failures fit. Without it a chain of calls, each failing a little, could hold a Lockstep
/// step for many times that. Cheap to clone: clones share the allowance.
#[derive(Debug, Clone, Default)]
pub struct RetryBudget(Arc<Mutex<Option<Duration>>>);

impl RetryBudget {
    /// A fresh budget (its allowance is set by the first backend that spends from it).
    pub fn new() -> Self {
        Self::default()
    }

    /// Spends `cost` (a failed attempt and the back-off before the next), setting the
    /// allowance to `allowance` if nothing was spent yet. Whether it fit: `false` means
    /// do not retry.
    pub fn spend(&self, allowance: Duration, cost: Duration) -> bool {
        let mut remaining = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let left = remaining.get_or_insert(allowance);
        match left.checked_sub(cost) {
            Some(rest) => {
                *left = rest;
                true
            }
            None => {
                *left = Duration::ZERO;
                false
            }
        }
    }

    /// What is left (`None`: nothing spent yet).
    pub fn remaining(&self) -> Option<Duration> {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl PartialEq for RetryBudget {
    /// The same budget (clones of one), not equal amounts.
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// A closed-set question: which of `options` best continues `messages`?
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChoiceRequest {
    /// The prompt kind, for accounting.
    pub kind: String,
    /// The question.
    pub messages: Vec<ChatMessage>,
    /// The candidate answers, scored as continuations of the assistant turn.
    pub options: Vec<String>,
    /// The routing key of the thought that asks (as [`ChatRequest::affinity`]): the embedded
    /// model serves one thought's calls back to back. Not part of the cache key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<String>,
    /// What the choice is about in plain words (as [`ChatRequest::about`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub about: Option<String>,
    /// How each option reads in plain words (as [`ChatRequest::option_phrases`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub option_phrases: Vec<String>,
}

/// Failures of a backend call. Messages never contain secrets.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LlmError {
    /// The server could not be reached or the connection dropped.
    #[error("connection failed: {0}")]
    Connection(String),
    /// The call did not finish in time.
    #[error("timed out after {0:?}")]
    Timeout(std::time::Duration),
    /// The server asked us to slow down.
    #[error("rate limited (HTTP 429)")]
    RateLimited {
        /// What `Retry-After` asked for, if anything.
        retry_after: Option<std::time::Duration>,
    },
    /// The server answered with an error status.
    #[error("server error: HTTP {status}: {message}")]
    Status {
        /// The HTTP status code.
        status: u16,
        /// A short, secret-free description.
        message: String,
    },
    /// The answer could not be understood.
    #[error("malformed response: {0}")]
    Malformed(String),
    /// The backend does not offer this capability (e.g. choice scoring).
    #[error("not supported by this backend: {0}")]
    Unsupported(&'static str),
    /// The backend has shut down.
    #[error("backend closed")]
    Closed,
}

/// What kind of [`LlmError`] happened, without its message: safe to hand to game code and to
/// compare (see [`LlmError::kind`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LlmErrorKind {
    /// [`LlmError::Connection`].
    Connection,
    /// [`LlmError::Timeout`].
    Timeout,
    /// [`LlmError::RateLimited`].
    RateLimited,
    /// [`LlmError::Status`], with the HTTP status code.
    Status(u16),
    /// [`LlmError::Malformed`].
    Malformed,
    /// [`LlmError::Unsupported`].
    Unsupported,
    /// [`LlmError::Closed`].
    Closed,
}

impl LlmErrorKind {
    /// Whether a call that ended in this error (after the retries it was allowed) says the
    /// backend is not answering now — unreachable, overloaded, timing out or shut down — rather
    /// than that one answer was bad: the rest of the thought does not wait on it.
    pub fn gives_out(self) -> bool {
        match self {
            Self::Connection | Self::Timeout | Self::RateLimited | Self::Closed => true,
            Self::Status(status) => status >= 500,
            Self::Malformed | Self::Unsupported => false,
        }
    }
}

impl LlmError {
    /// The kind of this error, without its message.
    pub fn kind(&self) -> LlmErrorKind {
        match self {
            Self::Connection(_) => LlmErrorKind::Connection,
            Self::Timeout(_) => LlmErrorKind::Timeout,
            Self::RateLimited { .. } => LlmErrorKind::RateLimited,
            Self::Status { status, .. } => LlmErrorKind::Status(*status),
            Self::Malformed(_) => LlmErrorKind::Malformed,
            Self::Unsupported(_) => LlmErrorKind::Unsupported,
            Self::Closed => LlmErrorKind::Closed,
        }
    }

    /// Whether a retry may help (429, 5xx, connection failures, timeouts).
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Connection(_) | Self::Timeout(_) | Self::RateLimited { .. } => true,
            Self::Status { status, .. } => *status >= 500,
            Self::Malformed(_) | Self::Unsupported(_) | Self::Closed => false,
        }
    }
}

/// A language-model backend.
///
/// Implementations must be cheap to share (`Arc<dyn LlmBackend>`) and must never block the
/// caller's thread for long: network and inference work happens on the backend's own threads.
pub trait LlmBackend: Send + Sync + 'static {
    /// A short name for the HUD and reports (`"http"`, `"local"`, `"scripted"`, …).
    fn name(&self) -> &str;

    /// The model identifier used for cache keys and saves.
    fn model(&self) -> &str;

    /// Completes a chat.
    fn chat(&self, request: ChatRequest) -> BoxFuture<'_, Result<ChatResponse, LlmError>>;

    /// Completes a chat, sending text deltas to `deltas` as they are produced; returns the
    /// whole answer. Backends without streaming send the full text once.
    fn chat_stream(
        &self,
        request: ChatRequest,
        deltas: async_channel::Sender<String>,
    ) -> BoxFuture<'_, Result<ChatResponse, LlmError>> {
        Box::pin(async move {
            let response = self.chat(request).await?;
            // A closed receiver only means nobody is watching the stream.
            let _ = deltas.send(response.text.clone()).await;
            Ok(response)
        })
    }

    /// Embeds each text; every vector has [`LlmBackend::embedding_dim`] entries.
    fn embed(&self, texts: Vec<String>) -> BoxFuture<'_, Result<Vec<Vec<f32>>, LlmError>>;

    /// [`LlmBackend::embed`] for a thought with a [`RetryBudget`]: a backend that retries
    /// stops once the budget is spent. The default ignores the budget.
    fn embed_within(
        &self,
        texts: Vec<String>,
        budget: Option<RetryBudget>,
    ) -> BoxFuture<'_, Result<Vec<Vec<f32>>, LlmError>> {
        let _ = budget;
        self.embed(texts)
    }

    /// The embedding model's name, recorded in saves.
    fn embedding_model(&self) -> &str;

    /// Where the model runs, when the backend knows (the embedded model: the GPU it offloads
    /// to and how many layers, or the CPU); shown in the HUD and `usage.json`.
    fn device(&self) -> Option<&str> {
        None
    }

    /// The length of every embedding vector.
    fn embedding_dim(&self) -> usize;

    /// Scores each option's log-likelihood as the answer (higher is likelier). Backends that
    /// cannot return [`LlmError::Unsupported`], and callers fall back to generation.
    fn score_choices(&self, request: ChoiceRequest) -> BoxFuture<'_, Result<Vec<f32>, LlmError>> {
        let _ = request;
        Box::pin(async { Err(LlmError::Unsupported("choice scoring")) })
    }

    /// Whether [`LlmBackend::score_choices`] is implemented.
    fn supports_choice_scoring(&self) -> bool {
        false
    }

    /// Stops the backend's own threads and waits for them, so nothing runs in native code
    /// while the process exits; calls in flight and later calls fail with
    /// [`LlmError::Closed`]. The embedded model needs it (see `LocalBackend`); backends without
    /// threads of their own ignore it (the default); wrappers forward it. `LlmPlugin` calls it
    /// on `AppExit`.
    fn shut_down(&self) {}

    /// Installs the hook through which the backend reports retries it makes on its own, so
    /// they show up in usage accounting (an `LlmClient` installs one when it is built). A
    /// backend keeps one hook: the latest installed wins. Backends that never retry ignore
    /// it (the default); wrappers forward it to the backend they wrap.
    fn set_retry_hook(&self, hook: RetryHook) {
        let _ = hook;
    }

    /// Installs the hook through which a scripted backend reports answers it had to guess
    /// (called with the prompt kind), so `usage.json` can say how often the offline stand-in
    /// guessed. Real models never guess in this sense and ignore it (the default); wrappers
    /// forward it to the backend they wrap.
    fn set_guess_hook(&self, hook: RetryHook) {
        let _ = hook;
    }

    /// Whether the backend already retries transient failures itself (the HTTP backend's
    /// `max_retries` with back-off; a pool's failover), so a transient error it returns has
    /// used up what the configuration allows: the prompt layer then takes the fail-safe instead
    /// of asking again, which would multiply the configured wait (SPEC §12 R2). The default
    /// says no: a transient error is asked again at the prompt level.
    fn retries_transient_errors(&self) -> bool {
        false
    }

    /// A cheap check that the backend answers at all (a pool probes an ejected server with it
    /// before putting it back). The default says yes.
    fn probe(&self) -> BoxFuture<'_, Result<(), LlmError>> {
        Box::pin(async { Ok(()) })
    }

    /// Per-endpoint counters, for a backend that routes over several servers (empty by
    /// default). [`LlmClient::usage`](super::LlmClient::usage) puts them in the report.
    fn endpoint_usage(&self) -> Vec<super::usage::EndpointUsage> {
        Vec::new()
    }
}
