//! The OpenAI-compatible HTTP backend (feature `http`).
//!
//! Works with any server speaking the OpenAI chat-completions and embeddings API: OpenAI,
//! Ollama, llama.cpp's server, vLLM, LM Studio, OpenRouter.
//!
//! **Threads.** The backend owns a small tokio runtime (its own worker threads), created when
//! the backend is built; it does not need, or touch, any runtime of the caller. Each call is
//! spawned onto that runtime and its result comes back through a bounded `async-channel`, so
//! Bevy's task pools (or any executor) can await it. Dropping the caller's future aborts the
//! request.
//!
//! **Requests.** `POST {base}/chat/completions` with `model`, `messages`, `max_tokens`,
//! `temperature`, `top_p`, `stop`, `seed` and — when the request has a JSON schema —
//! `response_format: {type: "json_schema", json_schema: {name, schema, strict: true}}`. Servers
//! that answer 400 about `response_format` get, in turn, a non-strict schema, then
//! `{type: "json_object"}`, then no `response_format`; the backend remembers the level that
//! works. Streaming uses server-sent events (`stream: true`, `data:` lines, `[DONE]`).
//! Embeddings are `POST {base}/embeddings` with an `input` array, answers sorted by `index`.
//!
//! **Failures.** Each attempt has a total and a connect timeout. Transient failures (429, 5xx,
//! connection errors, timeouts) are retried up to `max_retries` times with exponential backoff
//! and full jitter, or after exactly the `Retry-After` the server asked for (capped); a stream
//! that already delivered text is not retried (the text would repeat). Other errors fail at
//! once. Retries are reported through the [`RetryHook`] an `LlmClient` installs.
//!
//! **Secrets.** The key is sent only as a bearer token (a header marked sensitive). Error
//! messages never include URLs, and any text coming back from the server is scrubbed of the
//! key before it lands in an [`LlmError`].

use std::borrow::Cow;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rand::Rng;
use serde_json::{Value, json};

use super::backend::{
    BoxFuture, ChatRequest, ChatResponse, LlmBackend, LlmError, RetryBudget, RetryHook, Role,
    TokenUsage, estimate_tokens, estimate_tokens_of_len,
};
use super::endpoint::{
    ApiKey, DEFAULT_BASE_URL, DEFAULT_CONNECT_TIMEOUT, DEFAULT_EMBED_MODEL, DEFAULT_MAX_RETRIES,
    DEFAULT_MODEL, DEFAULT_TIMEOUT,
};
use super::secrets::{REDACTED, Secrets, redact_secrets};
use super::usage::EMBED_KIND;

/// Settings of an [`HttpBackend`].
#[derive(Debug, Clone, PartialEq)]
pub struct HttpConfig {
    /// Base URL up to and including the API version, e.g. `http://127.0.0.1:8080/v1`.
    pub base_url: String,
    /// Chat model name.
    pub model: String,
    /// Embedding model name.
    pub embed_model: String,
    /// Bearer token, if the server needs one.
    pub api_key: Option<ApiKey>,
    /// Total time allowed for one attempt (connect, send, and read the whole answer).
    pub timeout: Duration,
    /// Time allowed to connect.
    pub connect_timeout: Duration,
    /// Retries after the first attempt for transient failures.
    pub max_retries: u32,
    /// First backoff ceiling; doubles with each retry.
    pub backoff_base: Duration,
    /// Largest backoff ceiling.
    pub backoff_max: Duration,
    /// Largest `Retry-After` honoured.
    pub retry_after_cap: Duration,
    /// The embedding dimension, if known; otherwise learned from the first answer.
    pub embedding_dim: Option<usize>,
    /// Worker threads of the backend's runtime (1 or 2 is plenty: the work is waiting).
    pub worker_threads: usize,
    /// Largest response body accepted, in bytes.
    pub max_response_bytes: usize,
}

impl HttpConfig {
    /// Defaults for a server at `base_url` serving `model`.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            model: model.into(),
            embed_model: DEFAULT_EMBED_MODEL.to_owned(),
            api_key: None,
            timeout: DEFAULT_TIMEOUT,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            max_retries: DEFAULT_MAX_RETRIES,
            backoff_base: Duration::from_millis(500),
            backoff_max: Duration::from_secs(30),
            retry_after_cap: Duration::from_secs(60),
            embedding_dim: None,
            worker_threads: 2,
            max_response_bytes: 16 * 1024 * 1024,
        }
    }
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self::new(DEFAULT_BASE_URL, DEFAULT_MODEL)
    }
}

/// The backend could not be started.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct HttpStartError(String);

/// How much structure the server accepts in `response_format`; only ever steps down.
const FORMAT_STRICT_SCHEMA: u8 = 0;
const FORMAT_SCHEMA: u8 = 1;
const FORMAT_JSON_OBJECT: u8 = 2;
const FORMAT_NONE: u8 = 3;

/// The OpenAI-compatible backend. See the module docs of `llm::http`.
pub struct HttpBackend {
    shared: Arc<Shared>,
    runtime: Option<tokio::runtime::Runtime>,
}

struct Shared {
    client: reqwest::Client,
    config: HttpConfig,
    display_base: String,
    chat_url: String,
    embed_url: String,
    models_url: String,
    format_level: AtomicU8,
    stream_usage: AtomicBool,
    embedding_dim: AtomicUsize,
    retry_hook: Mutex<Option<RetryHook>>,
    /// This server's key, the one secret it can quote: the end of a stream is held back only
    /// while it could be the start of this key (every configured secret is still redacted from
    /// what is passed on, [`redact_secrets`]).
    own_key: Secrets,
}

impl fmt::Debug for HttpBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpBackend")
            .field("base_url", &self.shared.display_base)
            .field("model", &self.shared.config.model)
            .field("embed_model", &self.shared.config.embed_model)
            .field("api_key", &self.shared.config.api_key)
            .field("max_retries", &self.shared.config.max_retries)
            .finish()
    }
}

impl Drop for HttpBackend {
    fn drop(&mut self) {
        // Never block (or panic) in drop, even when dropped inside another async runtime.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl HttpBackend {
    /// Starts the backend's runtime and HTTP client.
    pub fn new(config: HttpConfig) -> Result<Self, HttpStartError> {
        super::endpoint::check_call_limits(
            config.timeout,
            config.connect_timeout,
            config.max_retries,
        )
        .map_err(|(field, reason)| HttpStartError(format!("setting {field}: {reason}")))?;
        let base = config.base_url.trim().trim_end_matches('/').to_owned();
        let url = reqwest::Url::parse(&base)
            .map_err(|err| HttpStartError(format!("invalid base URL: {err}")))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(HttpStartError(
                "the base URL must start with http:// or https://".into(),
            ));
        }
        let mut display = url.clone();
        // Credentials in the URL must not reach logs through `base_url()`.
        let _ = display.set_password(None);
        let _ = display.set_username("");
        let display_base = display.as_str().trim_end_matches('/').to_owned();
        let loopback = url.host_str().is_some_and(|host| {
            let host = host.trim_start_matches('[').trim_end_matches(']');
            host.eq_ignore_ascii_case("localhost")
                || host
                    .parse::<std::net::IpAddr>()
                    .is_ok_and(|ip| ip.is_loopback())
        });

        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(config.worker_threads.clamp(1, 4))
            .thread_name("ga-llm-http")
            .enable_all()
            .build()
            .map_err(|err| HttpStartError(format!("could not start the HTTP runtime: {err}")))?;
        let mut builder = reqwest::Client::builder()
            .timeout(config.timeout)
            .connect_timeout(config.connect_timeout)
            .user_agent(concat!(
                "bevy_generative_agents/",
                env!("CARGO_PKG_VERSION")
            ));
        if loopback {
            // A local model server is never meant to be reached through a proxy.
            builder = builder.no_proxy();
        }
        let client = {
            let _guard = runtime.enter();
            builder.build().map_err(|err| {
                HttpStartError(format!(
                    "could not build the HTTP client: {}",
                    err.without_url()
                ))
            })?
        };
        let shared = Shared {
            client,
            chat_url: format!("{base}/chat/completions"),
            embed_url: format!("{base}/embeddings"),
            models_url: format!("{base}/models"),
            display_base,
            format_level: AtomicU8::new(FORMAT_STRICT_SCHEMA),
            stream_usage: AtomicBool::new(true),
            embedding_dim: AtomicUsize::new(config.embedding_dim.unwrap_or(0)),
            retry_hook: Mutex::new(None),
            own_key: {
                let mut own = Secrets::default();
                if let Some(key) = &config.api_key {
                    own.add(key.expose_secret());
                }
                own
            },
            config,
        };
        Ok(Self {
            shared: Arc::new(shared),
            runtime: Some(runtime),
        })
    }

    /// The base URL (without any credentials).
    pub fn base_url(&self) -> &str {
        &self.shared.display_base
    }

    /// The settings.
    pub fn config(&self) -> &HttpConfig {
        &self.shared.config
    }

    /// Runs `job` on the backend's runtime (see [`spawn_on`]).
    fn spawn<T, F>(&self, job: F) -> BoxFuture<'_, Result<T, LlmError>>
    where
        T: Send + 'static,
        F: Future<Output = Result<T, LlmError>> + Send + 'static,
    {
        spawn_on(self.runtime.as_ref(), job)
    }
}

/// Runs `job` on `runtime`; the result comes back over a channel, so the caller's executor
/// (Bevy's task pools) need not be a tokio runtime. Dropping the returned future aborts the
/// job; no runtime (shut down) is [`LlmError::Closed`].
pub(super) fn spawn_on<'a, T, F>(
    runtime: Option<&tokio::runtime::Runtime>,
    job: F,
) -> BoxFuture<'a, Result<T, LlmError>>
where
    T: Send + 'static,
    F: Future<Output = Result<T, LlmError>> + Send + 'static,
{
    let (tx, rx) = async_channel::bounded(1);
    let handle = runtime.map(|runtime| {
        runtime.spawn(async move {
            // The receiver is gone only if the caller stopped waiting.
            let _ = tx.send(job.await).await;
        })
    });
    Box::pin(async move {
        let Some(handle) = handle else {
            return Err(LlmError::Closed);
        };
        let _abort = AbortOnDrop(handle);
        rx.recv().await.unwrap_or(Err(LlmError::Closed))
    })
}

/// Aborts a spawned request when the caller's future is dropped (or finishes).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Why one attempt did not produce an answer.
enum AttemptError {
    /// The server rejected part of the request format; try again with less (not a retry).
    Downgrade,
    /// A real failure.
    Failed(LlmError),
}

impl From<LlmError> for AttemptError {
    fn from(err: LlmError) -> Self {
        Self::Failed(err)
    }
}

impl Shared {
    /// A model answer without any configured secret in any encoding (a server that echoes
    /// one must not get it into memories, diaries or saves): [`redact_secrets`].
    fn redact_answer(&self, text: String) -> String {
        match redact_secrets(&text) {
            Cow::Borrowed(_) => text,
            Cow::Owned(redacted) => redacted,
        }
    }

    fn redact(&self, text: &str) -> String {
        let mut text = match &self.config.api_key {
            Some(key) if !key.expose_secret().is_empty() => {
                text.replace(key.expose_secret(), REDACTED)
            }
            _ => text.to_owned(),
        };
        text = self.redact_answer(text);
        if text.len() > 300 {
            let mut cut = 300;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            text.truncate(cut);
            text.push('…');
        }
        text
    }

    fn transport_error(&self, err: reqwest::Error, connect_only: bool) -> LlmError {
        if err.is_timeout() {
            return LlmError::Timeout(if connect_only && err.is_connect() {
                self.config.connect_timeout
            } else {
                self.config.timeout
            });
        }
        let what = if err.is_connect() {
            "could not connect to the server"
        } else if err.is_body() || err.is_decode() {
            "the connection dropped while reading the answer"
        } else {
            "the request failed"
        };
        // The source chain says why (refused, reset, DNS…) without the URL.
        let mut detail = String::new();
        let err = err.without_url();
        let mut source = std::error::Error::source(&err);
        while let Some(cause) = source {
            detail.push_str(": ");
            detail.push_str(&cause.to_string());
            source = cause.source();
        }
        LlmError::Connection(self.redact(&format!("{what}{detail}")))
    }

    fn report_retry(&self, kind: &str) {
        let hook = self
            .retry_hook
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if let Some(hook) = hook {
            hook(kind);
        }
    }

    /// Full-jitter exponential backoff, or the server's `Retry-After` (capped).
    fn backoff(&self, retry: u32, err: &LlmError) -> Duration {
        if let LlmError::RateLimited {
            retry_after: Some(after),
        } = err
        {
            return (*after).min(self.config.retry_after_cap);
        }
        let ceiling = self
            .config
            .backoff_base
            .saturating_mul(2u32.saturating_pow(retry.min(20)))
            .min(self.config.backoff_max);
        let ms = u64::try_from(ceiling.as_millis()).unwrap_or(u64::MAX);
        Duration::from_millis(rand::rng().random_range(0..=ms))
    }

    /// Runs `attempt` until it succeeds, fails for good, or retries run out.
    async fn with_retries<T, Fut>(
        &self,
        kind: &str,
        no_retry_after_output: &AtomicBool,
        budget: Option<&RetryBudget>,
        mut attempt: impl FnMut() -> Fut,
    ) -> Result<T, LlmError>
    where
        Fut: Future<Output = Result<T, AttemptError>>,
    {
        let mut retries = 0u32;
        // Each downgrade lowers a level that only has a few steps, so this loop ends.
        let mut downgrades = 0u32;
        loop {
            let started = std::time::Instant::now();
            match attempt().await {
                Ok(value) => return Ok(value),
                Err(AttemptError::Downgrade) if downgrades < 8 => downgrades += 1,
                Err(AttemptError::Downgrade) => {
                    return Err(LlmError::Malformed(
                        "the server rejected every request format".into(),
                    ));
                }
                Err(AttemptError::Failed(err)) => {
                    if !err.is_transient()
                        || retries >= self.config.max_retries
                        || no_retry_after_output.load(Ordering::SeqCst)
                    {
                        return Err(err);
                    }
                    let delay = self.backoff(retries, &err);
                    // The thought's allowance for failures: spent, no more retries.
                    let allowance = self.config.timeout.saturating_mul(self.config.max_retries);
                    if let Some(budget) = budget
                        && !budget.spend(allowance, started.elapsed() + delay)
                    {
                        bevy::log::debug!(kind, "the thought's retry budget is spent ({err})");
                        return Err(err);
                    }
                    retries += 1;
                    bevy::log::debug!(
                        kind,
                        retry = retries,
                        ?delay,
                        "LLM request failed ({err}); retrying"
                    );
                    self.report_retry(kind);
                    tokio::time::sleep(delay).await;
                }
            }
        }
    }

    fn chat_body(&self, request: &ChatRequest, stream: bool) -> Value {
        let messages: Vec<Value> = request
            .messages
            .iter()
            .map(|m| {
                let role = match m.role {
                    Role::System => "system",
                    Role::User => "user",
                    Role::Assistant => "assistant",
                };
                json!({"role": role, "content": m.content})
            })
            .collect();
        let mut body = json!({
            "model": self.config.model,
            "messages": messages,
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
            "top_p": request.top_p,
            "stream": stream,
        });
        if let Some(obj) = body.as_object_mut() {
            if !request.stop.is_empty() {
                obj.insert("stop".into(), json!(request.stop));
            }
            if let Some(seed) = request.seed {
                obj.insert("seed".into(), json!(seed));
            }
            if stream && self.stream_usage.load(Ordering::SeqCst) {
                obj.insert("stream_options".into(), json!({"include_usage": true}));
            }
            if let Some(schema) = &request.json_schema {
                let name = schema_name(&request.kind);
                let format = match self.format_level.load(Ordering::SeqCst) {
                    FORMAT_STRICT_SCHEMA => Some(json!({
                        "type": "json_schema",
                        "json_schema": {"name": name, "schema": schema, "strict": true},
                    })),
                    FORMAT_SCHEMA => Some(json!({
                        "type": "json_schema",
                        "json_schema": {"name": name, "schema": schema},
                    })),
                    FORMAT_JSON_OBJECT => Some(json!({"type": "json_object"})),
                    _ => None,
                };
                if let Some(format) = format {
                    obj.insert("response_format".into(), format);
                }
            }
        }
        body
    }

    fn post(&self, url: &str, body: &Value) -> reqwest::RequestBuilder {
        let request = self.client.post(url).json(body);
        match &self.config.api_key {
            Some(key) => request.bearer_auth(key.expose_secret()),
            None => request,
        }
    }

    /// Reads the whole body, refusing more than `limit` bytes.
    async fn read_body(
        &self,
        response: &mut reqwest::Response,
        limit: usize,
    ) -> Result<Vec<u8>, LlmError> {
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| self.transport_error(e, false))?
        {
            if body.len() + chunk.len() > limit {
                return Err(LlmError::Malformed(format!(
                    "the answer is larger than {limit} bytes"
                )));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }

    /// Turns a non-success status into an error (or a downgrade of the request format).
    async fn status_error(
        &self,
        mut response: reqwest::Response,
        sent_schema: bool,
        stream: bool,
    ) -> AttemptError {
        let status = response.status().as_u16();
        let retry_after = parse_retry_after(response.headers());
        let body = self
            .read_body(&mut response, 64 * 1024)
            .await
            .unwrap_or_default();
        let message = error_message(&body);
        if matches!(status, 400 | 422) {
            let lower = message.to_ascii_lowercase();
            if sent_schema
                && (lower.contains("response_format")
                    || lower.contains("json_schema")
                    || lower.contains("schema"))
            {
                let level = self.format_level.load(Ordering::SeqCst);
                if level < FORMAT_NONE {
                    self.format_level.store(level + 1, Ordering::SeqCst);
                    bevy::log::info!(
                        "the LLM server rejected this structured-output format; using a simpler one from now on"
                    );
                    return AttemptError::Downgrade;
                }
            }
            if stream
                && lower.contains("stream_options")
                && self.stream_usage.swap(false, Ordering::SeqCst)
            {
                return AttemptError::Downgrade;
            }
        }
        if status == 429 {
            return AttemptError::Failed(LlmError::RateLimited { retry_after });
        }
        AttemptError::Failed(LlmError::Status {
            status,
            message: self.redact(&message),
        })
    }

    async fn chat_once(&self, request: &ChatRequest) -> Result<ChatResponse, AttemptError> {
        let body = self.chat_body(request, false);
        let sent_schema = body.get("response_format").is_some();
        let mut response = self
            .post(&self.chat_url, &body)
            .send()
            .await
            .map_err(|e| self.transport_error(e, true))?;
        if !response.status().is_success() {
            return Err(self.status_error(response, sent_schema, false).await);
        }
        let bytes = self
            .read_body(&mut response, self.config.max_response_bytes)
            .await?;
        Ok(self.parse_completion(&bytes, request)?)
    }

    fn parse_completion(
        &self,
        bytes: &[u8],
        request: &ChatRequest,
    ) -> Result<ChatResponse, LlmError> {
        let value: Value = serde_json::from_slice(bytes)
            .map_err(|e| LlmError::Malformed(format!("the answer is not JSON: {e}")))?;
        if let Some(error) = value.get("error") {
            return Err(LlmError::Malformed(self.redact(&format!(
                "the server returned an error: {}",
                error_text(error)
            ))));
        }
        let choice = value
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|c| c.first())
            .ok_or_else(|| LlmError::Malformed("the answer has no choices".into()))?;
        let text = match choice.get("message").and_then(|m| m.get("content")) {
            Some(content) => content_text(content),
            // Legacy completions-style servers.
            None => choice
                .get("text")
                .and_then(Value::as_str)
                .map(str::to_owned),
        }
        .ok_or_else(|| LlmError::Malformed("the answer has no message content".into()))?;
        let usage =
            parse_usage(value.get("usage")).unwrap_or_else(|| estimated_usage(request, &text));
        let text = self.redact_answer(text);
        Ok(ChatResponse { text, usage })
    }

    async fn stream_once(
        &self,
        request: &ChatRequest,
        deltas: &async_channel::Sender<String>,
        sent_output: &AtomicBool,
    ) -> Result<ChatResponse, AttemptError> {
        let body = self.chat_body(request, true);
        let sent_schema = body.get("response_format").is_some();
        let mut response = self
            .post(&self.chat_url, &body)
            .send()
            .await
            .map_err(|e| self.transport_error(e, true))?;
        if !response.status().is_success() {
            return Err(self.status_error(response, sent_schema, true).await);
        }
        let is_sse = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.contains("text/event-stream"));
        if !is_sse {
            // Some servers ignore `stream: true`; take the whole answer as one delta.
            let bytes = self
                .read_body(&mut response, self.config.max_response_bytes)
                .await?;
            let answer = self.parse_completion(&bytes, request)?;
            sent_output.store(true, Ordering::SeqCst);
            let _ = deltas.send(answer.text.clone()).await;
            return Ok(answer);
        }

        let mut parser = SseParser::new(self.config.max_response_bytes);
        let mut text = String::new();
        let mut usage = None;
        let mut watching = true;
        let mut done = false;
        // Bytes of `text` already passed on as (redacted) deltas.
        let mut passed = 0;
        while !done {
            let chunk = response
                .chunk()
                .await
                .map_err(|e| self.transport_error(e, false))?;
            let events = match &chunk {
                Some(bytes) => parser.push(bytes)?,
                None => parser.finish(),
            };
            for data in events {
                if data.trim() == "[DONE]" {
                    done = true;
                    break;
                }
                let event: Value = serde_json::from_str(&data)
                    .map_err(|e| LlmError::Malformed(format!("a stream event is not JSON: {e}")))?;
                if let Some(error) = event.get("error") {
                    return Err(AttemptError::Failed(LlmError::Malformed(self.redact(
                        &format!(
                            "the server reported an error mid-stream: {}",
                            error_text(error)
                        ),
                    ))));
                }
                if let Some(u) = parse_usage(event.get("usage")) {
                    usage = Some(u);
                }
                let delta = event
                    .get("choices")
                    .and_then(Value::as_array)
                    .and_then(|c| c.first())
                    .and_then(|c| c.get("delta"))
                    .and_then(|d| d.get("content"))
                    .and_then(content_text);
                if let Some(delta) = delta.filter(|d| !d.is_empty()) {
                    if text.len() + delta.len() > self.config.max_response_bytes {
                        return Err(AttemptError::Failed(LlmError::Malformed(
                            "the streamed answer is too large".into(),
                        )));
                    }
                    text.push_str(&delta);
                    sent_output.store(true, Ordering::SeqCst);
                    // Pass on what cannot be the start of a key the next delta completes.
                    let ready = text.len() - self.own_key.prefix_at_end(&text);
                    if watching && ready > passed {
                        let out = self.redact_answer(text[passed..ready].to_owned());
                        passed = ready;
                        if deltas.send(out).await.is_err() {
                            watching = false; // Nobody reads the deltas any more; keep the text.
                        }
                    }
                }
            }
            if chunk.is_none() {
                break;
            }
        }
        if watching && text.len() > passed {
            let _ = deltas
                .send(self.redact_answer(text[passed..].to_owned()))
                .await;
        }
        let usage = usage.unwrap_or_else(|| estimated_usage(request, &text));
        let text = self.redact_answer(text);
        Ok(ChatResponse { text, usage })
    }

    /// `GET {base}/models` within the connect timeout: any answer but a 5xx or a 429 means the
    /// server is up (a server without that route answers 404, which is fine).
    async fn probe_once(&self) -> Result<(), LlmError> {
        let limit = self.config.connect_timeout.min(self.config.timeout);
        let mut request = self.client.get(&self.models_url).timeout(limit);
        if let Some(key) = &self.config.api_key {
            request = request.bearer_auth(key.expose_secret());
        }
        let response = request
            .send()
            .await
            .map_err(|e| self.transport_error(e, true))?;
        let status = response.status().as_u16();
        if status >= 500 || status == 429 {
            return Err(LlmError::Status {
                status,
                message: "the health probe failed".into(),
            });
        }
        Ok(())
    }

    async fn embed_once(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, AttemptError> {
        // Some servers reject empty inputs; a space embeds as "nothing" everywhere.
        let input: Vec<&str> = texts
            .iter()
            .map(|t| if t.trim().is_empty() { " " } else { t.as_str() })
            .collect();
        let body = json!({"model": self.config.embed_model, "input": input});
        let mut response = self
            .post(&self.embed_url, &body)
            .send()
            .await
            .map_err(|e| self.transport_error(e, true))?;
        if !response.status().is_success() {
            return Err(self.status_error(response, false, false).await);
        }
        let bytes = self
            .read_body(&mut response, self.config.max_response_bytes)
            .await?;
        let vectors = parse_embeddings(&bytes, texts.len())?;
        if let Some(dim) = vectors.first().map(Vec::len) {
            match self
                .embedding_dim
                .compare_exchange(0, dim, Ordering::SeqCst, Ordering::SeqCst)
            {
                Ok(_) => {}
                Err(known) if known == dim => {}
                Err(known) => {
                    return Err(AttemptError::Failed(LlmError::Malformed(format!(
                        "embedding dimension {dim} differs from the expected {known}"
                    ))));
                }
            }
        }
        Ok(vectors)
    }
}

/// A `json_schema.name`: `[a-zA-Z0-9_-]{1,64}`, from the prompt kind.
fn schema_name(kind: &str) -> String {
    let name: String = kind
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    if name.is_empty() {
        "response".into()
    } else {
        name
    }
}

/// `Retry-After` in seconds (integer or decimal); HTTP dates are ignored.
fn parse_retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let value = headers
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim();
    let secs: f64 = value.parse().ok()?;
    if secs.is_finite() && secs >= 0.0 {
        Duration::try_from_secs_f64(secs).ok()
    } else {
        None
    }
}

/// The message of an error body: `{"error": {"message": …}}`, `{"error": "…"}`, or the text.
fn error_message(body: &[u8]) -> String {
    match serde_json::from_slice::<Value>(body) {
        Ok(value) => match value.get("error") {
            Some(error) => error_text(error),
            None => value
                .get("message")
                .and_then(Value::as_str)
                .map_or_else(|| value.to_string(), str::to_owned),
        },
        Err(_) => String::from_utf8_lossy(body).trim().to_owned(),
    }
}

fn error_text(error: &Value) -> String {
    match error {
        Value::String(s) => s.clone(),
        other => other
            .get("message")
            .and_then(Value::as_str)
            .map_or_else(|| other.to_string(), str::to_owned),
    }
}

/// Message content as text: a string, or an array of `{type: "text", text}` parts. `null`
/// (e.g. a refusal) reads as empty text.
fn content_text(content: &Value) -> Option<String> {
    match content {
        Value::String(s) => Some(s.clone()),
        Value::Null => Some(String::new()),
        Value::Array(parts) => Some(
            parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str).or_else(|| p.as_str()))
                .collect(),
        ),
        _ => None,
    }
}

fn parse_usage(usage: Option<&Value>) -> Option<TokenUsage> {
    let usage = usage?;
    let prompt = usage.get("prompt_tokens")?.as_u64()?;
    let completion = usage
        .get("completion_tokens")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    // OpenAI-style servers (llama.cpp's among them) say how much of the prompt their prefix
    // cache held.
    let cached = usage
        .get("prompt_tokens_details")
        .and_then(|d| d.get("cached_tokens"))
        .and_then(Value::as_u64)
        .unwrap_or(0)
        .min(prompt);
    Some(TokenUsage {
        prompt_tokens: prompt,
        completion_tokens: completion,
        reused_prompt_tokens: cached,
    })
}

fn estimated_usage(request: &ChatRequest, text: &str) -> TokenUsage {
    TokenUsage {
        prompt_tokens: estimate_tokens_of_len(request.prompt_len()),
        completion_tokens: estimate_tokens(text),
        reused_prompt_tokens: 0,
    }
}

/// `data[i].embedding`, ordered by `data[i].index` (position when absent); exactly `expected`.
fn parse_embeddings(bytes: &[u8], expected: usize) -> Result<Vec<Vec<f32>>, LlmError> {
    let value: Value = serde_json::from_slice(bytes)
        .map_err(|e| LlmError::Malformed(format!("the embeddings answer is not JSON: {e}")))?;
    let data = value
        .get("data")
        .and_then(Value::as_array)
        .ok_or_else(|| LlmError::Malformed("the embeddings answer has no data".into()))?;
    if data.len() != expected {
        return Err(LlmError::Malformed(format!(
            "asked for {expected} embeddings, got {}",
            data.len()
        )));
    }
    let mut slots: Vec<Option<Vec<f32>>> = vec![None; expected];
    for (position, item) in data.iter().enumerate() {
        let index = match item.get("index") {
            Some(index) => index
                .as_u64()
                .and_then(|i| usize::try_from(i).ok())
                .ok_or_else(|| LlmError::Malformed("an embedding index is not a number".into()))?,
            None => position,
        };
        let vector: Vec<f32> = item
            .get("embedding")
            .and_then(Value::as_array)
            .ok_or_else(|| LlmError::Malformed(format!("embedding {index} is missing")))?
            .iter()
            .map(|x| x.as_f64().map(|x| x as f32))
            .collect::<Option<_>>()
            .ok_or_else(|| LlmError::Malformed(format!("embedding {index} has a non-number")))?;
        let slot = slots.get_mut(index).ok_or_else(|| {
            LlmError::Malformed(format!("embedding index {index} is out of range"))
        })?;
        if slot.replace(vector).is_some() {
            return Err(LlmError::Malformed(format!(
                "embedding index {index} appears twice"
            )));
        }
    }
    let vectors: Vec<Vec<f32>> = slots
        .into_iter()
        .collect::<Option<_>>()
        .ok_or_else(|| LlmError::Malformed("an embedding is missing".into()))?;
    let dim = vectors.first().map_or(0, Vec::len);
    if dim == 0 || vectors.iter().any(|v| v.len() != dim) {
        return Err(LlmError::Malformed(
            "embeddings are empty or of different lengths".into(),
        ));
    }
    Ok(vectors)
}

/// Splits a server-sent-event byte stream into the `data` of each event.
///
/// Lines end with `\n` or `\r\n`; an event ends at a blank line; several `data:` lines join
/// with `\n`; comments (`:`) and other fields are ignored. Bytes are buffered until a line is
/// complete, so UTF-8 split across network chunks survives.
#[derive(Debug)]
pub(crate) struct SseParser {
    line: Vec<u8>,
    data: Option<String>,
    limit: usize,
}

impl SseParser {
    pub(crate) fn new(limit: usize) -> Self {
        Self {
            line: Vec::new(),
            data: None,
            limit,
        }
    }

    pub(crate) fn push(&mut self, bytes: &[u8]) -> Result<Vec<String>, LlmError> {
        let mut events = Vec::new();
        for &byte in bytes {
            if byte == b'\n' {
                let mut line = std::mem::take(&mut self.line);
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                self.line_done(&line, &mut events);
            } else {
                self.line.push(byte);
                if self.line.len() > self.limit {
                    return Err(LlmError::Malformed("a stream line is too long".into()));
                }
            }
        }
        Ok(events)
    }

    /// The event still pending when the stream ends without a final blank line.
    pub(crate) fn finish(&mut self) -> Vec<String> {
        let mut events = Vec::new();
        let line = std::mem::take(&mut self.line);
        if !line.is_empty() {
            self.line_done(&line, &mut events);
        }
        events.extend(self.data.take());
        events
    }

    fn line_done(&mut self, line: &[u8], events: &mut Vec<String>) {
        if line.is_empty() {
            events.extend(self.data.take());
            return;
        }
        let line = String::from_utf8_lossy(line);
        let Some(value) = line.strip_prefix("data:") else {
            return; // A comment, or a field we do not use.
        };
        let value = value.strip_prefix(' ').unwrap_or(value);
        match &mut self.data {
            Some(data) => {
                data.push('\n');
                data.push_str(value);
            }
            None => self.data = Some(value.to_owned()),
        }
    }
}

impl LlmBackend for HttpBackend {
    fn name(&self) -> &str {
        "http"
    }

    fn model(&self) -> &str {
        &self.shared.config.model
    }

    fn chat(&self, request: ChatRequest) -> BoxFuture<'_, Result<ChatResponse, LlmError>> {
        let shared = Arc::clone(&self.shared);
        self.spawn(async move {
            let never = AtomicBool::new(false);
            let kind = request.kind.clone();
            shared
                .with_retries(&kind, &never, request.retry_budget.as_ref(), || {
                    shared.chat_once(&request)
                })
                .await
        })
    }

    fn chat_stream(
        &self,
        request: ChatRequest,
        deltas: async_channel::Sender<String>,
    ) -> BoxFuture<'_, Result<ChatResponse, LlmError>> {
        let shared = Arc::clone(&self.shared);
        self.spawn(async move {
            let sent_output = AtomicBool::new(false);
            let kind = request.kind.clone();
            shared
                .with_retries(&kind, &sent_output, request.retry_budget.as_ref(), || {
                    shared.stream_once(&request, &deltas, &sent_output)
                })
                .await
        })
    }

    fn embed(&self, texts: Vec<String>) -> BoxFuture<'_, Result<Vec<Vec<f32>>, LlmError>> {
        self.embed_within(texts, None)
    }

    fn embed_within(
        &self,
        texts: Vec<String>,
        budget: Option<RetryBudget>,
    ) -> BoxFuture<'_, Result<Vec<Vec<f32>>, LlmError>> {
        if texts.is_empty() {
            return Box::pin(async { Ok(Vec::new()) });
        }
        let shared = Arc::clone(&self.shared);
        self.spawn(async move {
            let never = AtomicBool::new(false);
            shared
                .with_retries(EMBED_KIND, &never, budget.as_ref(), || {
                    shared.embed_once(&texts)
                })
                .await
        })
    }

    fn embedding_model(&self) -> &str {
        &self.shared.config.embed_model
    }

    fn embedding_dim(&self) -> usize {
        self.shared.embedding_dim.load(Ordering::SeqCst)
    }

    fn retries_transient_errors(&self) -> bool {
        self.shared.config.max_retries > 0
    }

    fn probe(&self) -> BoxFuture<'_, Result<(), LlmError>> {
        let shared = Arc::clone(&self.shared);
        self.spawn(async move { shared.probe_once().await })
    }

    fn set_retry_hook(&self, hook: RetryHook) {
        *self
            .shared
            .retry_hook
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(hook);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sse_parser_handles_split_lines_crlf_and_multiline_data() {
        let mut parser = SseParser::new(1024);
        let mut events = parser.push(b": keep-alive\r\ndata: {\"a\"").expect("ok");
        assert!(events.is_empty());
        events.extend(
            parser
                .push(b":1}\r\n\r\ndata: x\ndata: y\n\nevent: ping\ndata:[DONE]")
                .expect("ok"),
        );
        assert_eq!(events, vec!["{\"a\":1}".to_owned(), "x\ny".to_owned()]);
        assert_eq!(parser.finish(), vec!["[DONE]".to_owned()]);
    }

    #[test]
    fn sse_parser_keeps_utf8_split_across_chunks() {
        let text = "data: héllo\n\n".as_bytes();
        let split = text.iter().position(|&b| b >= 0x80).expect("non-ascii") + 1;
        let mut parser = SseParser::new(1024);
        let mut events = parser.push(&text[..split]).expect("ok");
        events.extend(parser.push(&text[split..]).expect("ok"));
        assert_eq!(events, vec!["héllo".to_owned()]);
    }

    #[test]
    fn sse_parser_refuses_endless_lines() {
        let mut parser = SseParser::new(8);
        assert!(parser.push(b"data: 0123456789").is_err());
    }

    #[test]
    fn embeddings_sorted_by_index_and_validated() {
        let body = br#"{"data": [{"index": 1, "embedding": [0.0, 1.0]}, {"index": 0, "embedding": [1.0, 0.0]}]}"#;
        assert_eq!(
            parse_embeddings(body, 2),
            Ok(vec![vec![1.0, 0.0], vec![0.0, 1.0]])
        );
        assert!(parse_embeddings(body, 3).is_err());
        let dup =
            br#"{"data": [{"index": 0, "embedding": [1.0]}, {"index": 0, "embedding": [2.0]}]}"#;
        assert!(parse_embeddings(dup, 2).is_err());
        let ragged = br#"{"data": [{"embedding": [1.0]}, {"embedding": [2.0, 3.0]}]}"#;
        assert!(parse_embeddings(ragged, 2).is_err());
        let out_of_range = br#"{"data": [{"index": 5, "embedding": [1.0]}]}"#;
        assert!(parse_embeddings(out_of_range, 1).is_err());
    }

    #[test]
    fn content_forms() {
        assert_eq!(content_text(&json!("hi")), Some("hi".into()));
        assert_eq!(content_text(&json!(null)), Some(String::new()));
        assert_eq!(
            content_text(&json!([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}])),
            Some("ab".into())
        );
        assert_eq!(content_text(&json!(5)), None);
    }

    #[test]
    fn error_messages_and_names() {
        assert_eq!(
            error_message(br#"{"error": {"message": "bad model"}}"#),
            "bad model"
        );
        assert_eq!(error_message(br#"{"error": "nope"}"#), "nope");
        assert_eq!(error_message(b"  plain text "), "plain text");
        assert_eq!(schema_name("wake up/hour"), "wake_up_hour");
        assert_eq!(schema_name(""), "response");
    }

    #[test]
    fn retry_after_seconds() {
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert(reqwest::header::RETRY_AFTER, "2".parse().expect("header"));
        assert_eq!(parse_retry_after(&headers), Some(Duration::from_secs(2)));
        headers.insert(
            reqwest::header::RETRY_AFTER,
            "Wed, 21 Oct 2015 07:28:00 GMT".parse().expect("header"),
        );
        assert_eq!(parse_retry_after(&headers), None);
    }
}
