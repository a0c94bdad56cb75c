//! Choosing and configuring the backend.
//!
//! [`LlmConfig`] is resolved from layers, highest precedence first: **CLI flags** (a [`LlmConfigLayer`] the binary fills from its flags)
//! \> **environment** (`GA_LLM_BACKEND`, `GA_LLM_BASE_URL`, `GA_LLM_MODEL`,
//! `GA_LLM_EMBED_MODEL`, `GA_LLM_API_KEY`, then `OPENAI_API_KEY`) > **config file** (JSON, see
//! [`LlmConfigLayer`]) > **defaults**. Empty environment variables count as unset. An API key
//! can come from the environment or the config file, never from a flag (flags end up in shell
//! history and process lists).
//!
//! The same layers choose a folder of edited prompt templates ([`LlmConfig::prompts`]):
//! `--prompts DIR` > `GA_PROMPTS` > the file's `"prompts"` key > none (the compiled-in
//! templates). This module only carries the path; the prompt layer loads and checks it
//! (`PromptLibrary::load`).
//!
//! [`build_backend`] turns a config into a backend: an explicit choice wins (`--llm-backend`,
//! `GA_LLM_BACKEND`, or a model file given with `--model PATH` / `GA_LOCAL_MODEL`); `auto` picks
//! the HTTP backend when a base URL or an API key is configured, else the **embedded local
//! model** (feature `local-llm`) when its file is in the model cache
//! (`${XDG_CACHE_HOME:-~/.cache}/bevy_generative_agents/models/`, filled by
//! `scripts/fetch-model.sh`), and otherwise the **scripted** backend running the offline town
//! script ([`town_script_backend`]), with a loud warning that it is an offline stand-in, not a
//! model.
//!
//! [`ApiKey`] keeps the key out of every `Debug`/`Display` output and cannot be serialised.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use super::backend::LlmBackend;
use super::client::{DEFAULT_CONCURRENCY, LlmClient};
pub use super::endpoint::{
    ApiKey, DEFAULT_BASE_URL, DEFAULT_CONNECT_TIMEOUT, DEFAULT_EMBED_MODEL, DEFAULT_MAX_RETRIES,
    DEFAULT_MODEL, DEFAULT_TIMEOUT, EndpointEntry, MAX_CONNECT_TIMEOUT, MAX_RETRIES, MAX_TIMEOUT,
    MAX_WEIGHT, MIN_TIMEOUT,
};
use super::offline::town_script_backend;

/// The default number of local inference threads: on a small machine shared with the game,
/// one well-fed thread beats two starved ones.
pub const DEFAULT_LOCAL_THREADS: u32 = 1;

/// The most a model config file may hold (1 MiB; a config is a few hundred bytes).
pub const MAX_CONFIG_FILE_BYTES: u64 = 1 << 20;

/// Model files the local backend looks for in the model cache, best first: a 1.5B instruct
/// model when `scripts/fetch-model.sh` could get one, else the small pip-packaged SmolLM2.
pub const DEFAULT_MODEL_FILES: &[&str] = &[
    "qwen2.5-1.5b-instruct-q4_k_m.gguf",
    "SmolLM2-135M-Instruct.Q4_1.gguf",
];

/// Which backend to use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendChoice {
    /// HTTP when a base URL or key is configured, else the best offline backend.
    #[default]
    Auto,
    /// The deterministic scripted backend (not a model).
    Scripted,
    /// An OpenAI-compatible server (feature `http`).
    Http,
    /// The embedded local model (feature `local-llm`).
    Local,
}

impl BackendChoice {
    /// The lowercase name used in flags, env and files.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Scripted => "scripted",
            Self::Http => "http",
            Self::Local => "local",
        }
    }
}

impl fmt::Display for BackendChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for BackendChoice {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(Self::Auto),
            "scripted" => Ok(Self::Scripted),
            "http" | "openai" => Ok(Self::Http),
            "local" => Ok(Self::Local),
            other => Err(format!(
                "unknown backend `{other}` (expected auto, scripted, http or local)"
            )),
        }
    }
}

/// Configuration problems. Messages never contain the API key.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// An environment variable has an unusable value.
    #[error("environment variable {var}: {reason}")]
    Env {
        /// The variable.
        var: &'static str,
        /// Why the value was rejected.
        reason: String,
    },
    /// The config file could not be read.
    #[error("config file {path}: {source}")]
    File {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        #[source]
        source: std::io::Error,
    },
    /// The config file is not valid.
    #[error("config file {path}: {message}")]
    Parse {
        /// The file (empty for in-memory text).
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// A setting has an unusable value.
    #[error("setting {field}: {reason}")]
    Invalid {
        /// The setting.
        field: &'static str,
        /// Why the value was rejected.
        reason: String,
    },
    /// An entry of a pool of model servers is unusable (or the pool as a whole is).
    #[error("{pool} entry {index} ({url}): {reason}")]
    Endpoint {
        /// The list: `endpoints`, `embed_endpoints`, `GA_LLM_BASE_URLS` or
        /// `GA_LLM_EMBED_BASE_URLS`.
        pool: &'static str,
        /// The entry's position, from 1 (0: the list as a whole).
        index: usize,
        /// The entry's URL without credentials (empty for the list as a whole).
        url: String,
        /// Why it was rejected (secret-free).
        reason: String,
    },
    /// The chosen backend was compiled out.
    #[error("the {backend} backend needs the `{feature}` cargo feature")]
    FeatureDisabled {
        /// The backend.
        backend: &'static str,
        /// The feature that provides it.
        feature: &'static str,
    },
    /// The chosen backend does not exist yet.
    #[error("the {0} backend is not available yet")]
    Unavailable(&'static str),
    /// The backend could not be started.
    #[error("could not start the {backend} backend: {reason}")]
    Startup {
        /// The backend.
        backend: &'static str,
        /// Why (secret-free).
        reason: String,
    },
    /// The response cache file could not be opened.
    #[error(transparent)]
    Cache(#[from] super::cache::CacheError),
}

/// The resolved LLM configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct LlmConfig {
    /// Which backend to use.
    pub backend: BackendChoice,
    /// The OpenAI-compatible base URL, e.g. `http://127.0.0.1:8080/v1`.
    pub base_url: Option<String>,
    /// The chat model.
    pub model: String,
    /// The embedding model.
    pub embed_model: String,
    /// The API key, if any.
    pub api_key: Option<ApiKey>,
    /// Total timeout of one HTTP attempt.
    pub timeout: Duration,
    /// Connect timeout.
    pub connect_timeout: Duration,
    /// Transport retries after the first attempt.
    pub max_retries: u32,
    /// Backend calls in flight at once.
    pub concurrency: usize,
    /// Where the response cache persists (none: memory only).
    pub cache_path: Option<PathBuf>,
    /// The embedding dimension, when known in advance (else learned from the first answer).
    pub embedding_dim: Option<usize>,
    /// A GGUF file given explicitly (`--model`, `GA_LOCAL_MODEL`, `local_model`): selects the
    /// local backend under `auto`.
    pub local_model: Option<PathBuf>,
    /// The model cache folder found from the environment (see [`model_cache_dir`]); `auto`
    /// uses the local backend when a model file is there.
    pub model_cache: Option<PathBuf>,
    /// Inference threads of the local backend (default 1).
    pub local_threads: u32,
    /// A folder of prompt template overrides (`--prompts`, `GA_PROMPTS`, `prompts`); `None`
    /// uses the compiled-in templates.
    pub prompts: Option<PathBuf>,
    /// A pool of chat servers (`endpoints`, `GA_LLM_BASE_URLS`); empty: the single server of
    /// `base_url`. See the README's "Several model servers".
    pub endpoints: Vec<EndpointEntry>,
    /// Which list `endpoints` came from, for error messages.
    pub endpoints_source: &'static str,
    /// A separate pool for embeddings (`embed_endpoints`, `GA_LLM_EMBED_BASE_URLS`); empty:
    /// embeddings go to the chat servers.
    pub embed_endpoints: Vec<EndpointEntry>,
    /// Which list `embed_endpoints` came from, for error messages.
    pub embed_endpoints_source: &'static str,
    /// Prefix affinity in a pool: each persona's calls go to the same healthy server, so its
    /// prefix cache hits (`affinity`, `GA_LLM_AFFINITY`; default on). Off: plain weighted
    /// least-outstanding-requests.
    pub affinity: bool,
    /// How a pool ejects, probes and backs off (config file `"pool"`).
    pub pool: PoolTimings,
}

impl Default for LlmConfig {
    fn default() -> Self {
        Self {
            backend: BackendChoice::Auto,
            base_url: None,
            model: DEFAULT_MODEL.to_owned(),
            embed_model: DEFAULT_EMBED_MODEL.to_owned(),
            api_key: None,
            timeout: DEFAULT_TIMEOUT,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            max_retries: DEFAULT_MAX_RETRIES,
            concurrency: DEFAULT_CONCURRENCY,
            cache_path: None,
            embedding_dim: None,
            local_model: None,
            model_cache: None,
            local_threads: DEFAULT_LOCAL_THREADS,
            prompts: None,
            endpoints: Vec::new(),
            endpoints_source: "endpoints",
            embed_endpoints: Vec::new(),
            embed_endpoints_source: "embed_endpoints",
            affinity: true,
            pool: PoolTimings::default(),
        }
    }
}

/// The longest accepted pool back-off or pause (an hour).
pub const MAX_POOL_BACKOFF: Duration = Duration::from_secs(3600);

/// How a pool of servers takes a failing server out of the rotation and backs off: the config
/// file's `"pool"` object (README "Several model servers"). A server is probed again when its
/// ejection runs out, so the ejection back-off is also the probe interval: `eject_base` after
/// the first failure, doubling with each failed probe up to `eject_max`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PoolTimings {
    /// First ejection (`eject_base_secs`, default 1 s).
    pub eject_base: Duration,
    /// Longest ejection (`eject_max_secs`, default 30 s).
    pub eject_max: Duration,
    /// First back-off ceiling of a retry when no other server can take it
    /// (`backoff_base_secs`, default 0.5 s); doubles per retry.
    pub backoff_base: Duration,
    /// Largest back-off ceiling (`backoff_max_secs`, default 30 s).
    pub backoff_max: Duration,
    /// Largest `Retry-After` honoured (`retry_after_cap_secs`, default 60 s).
    pub retry_after_cap: Duration,
}

impl Default for PoolTimings {
    fn default() -> Self {
        Self {
            eject_base: Duration::from_secs(1),
            eject_max: Duration::from_secs(30),
            backoff_base: Duration::from_millis(500),
            backoff_max: Duration::from_secs(30),
            retry_after_cap: Duration::from_secs(60),
        }
    }
}

/// The config file's `"pool"` object: each key in seconds (between 0.1 and 3,600), unset keys
/// leave lower layers alone, e.g. `{"eject_base_secs": 2, "eject_max_secs": 120}`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PoolTimingsLayer {
    /// First ejection.
    pub eject_base_secs: Option<f64>,
    /// Longest ejection.
    pub eject_max_secs: Option<f64>,
    /// First retry back-off ceiling.
    pub backoff_base_secs: Option<f64>,
    /// Largest retry back-off ceiling.
    pub backoff_max_secs: Option<f64>,
    /// Largest `Retry-After` honoured.
    pub retry_after_cap_secs: Option<f64>,
}

impl PoolTimings {
    /// These timings with `layer`'s keys applied, each checked, and every base no longer than
    /// its maximum.
    fn apply(mut self, layer: &PoolTimingsLayer) -> Result<Self, ConfigError> {
        let fields = [
            (
                "pool.eject_base_secs",
                layer.eject_base_secs,
                &mut self.eject_base,
            ),
            (
                "pool.eject_max_secs",
                layer.eject_max_secs,
                &mut self.eject_max,
            ),
            (
                "pool.backoff_base_secs",
                layer.backoff_base_secs,
                &mut self.backoff_base,
            ),
            (
                "pool.backoff_max_secs",
                layer.backoff_max_secs,
                &mut self.backoff_max,
            ),
            (
                "pool.retry_after_cap_secs",
                layer.retry_after_cap_secs,
                &mut self.retry_after_cap,
            ),
        ];
        for (field, secs, slot) in fields {
            if let Some(secs) = secs {
                *slot = seconds(field, secs, MAX_POOL_BACKOFF)?;
            }
        }
        for (base, max, base_value, max_value) in [
            (
                "pool.eject_base_secs",
                "pool.eject_max_secs",
                self.eject_base,
                self.eject_max,
            ),
            (
                "pool.backoff_base_secs",
                "pool.backoff_max_secs",
                self.backoff_base,
                self.backoff_max,
            ),
        ] {
            if base_value > max_value {
                return Err(ConfigError::Invalid {
                    field: base,
                    reason: format!(
                        "{} s is longer than {max} ({} s)",
                        base_value.as_secs_f64(),
                        max_value.as_secs_f64()
                    ),
                });
            }
        }
        Ok(self)
    }
}

/// One server of a pool, resolved: URL checked, model and key filled in.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedEndpoint {
    /// The base URL to call.
    pub url: String,
    /// The URL without credentials, for logs and reports.
    pub display_url: String,
    /// The model asked for there.
    pub model: String,
    /// The key sent there, if any.
    pub api_key: Option<ApiKey>,
    /// The routing weight (≥ 0; not all 0).
    pub weight: f64,
    /// Calls in flight there at most at once (≥ 1).
    pub concurrency: usize,
}

/// Checks every entry of a pool list, and the list as a whole. `lookup` reads the variables
/// named by `api_key_env`; `default_key` is the key of entries that name none.
fn resolve_pool(
    pool: &'static str,
    entries: &[EndpointEntry],
    default_model: &str,
    default_key: Option<&ApiKey>,
    default_concurrency: usize,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<ResolvedEndpoint>, ConfigError> {
    let whole = |reason: &str| ConfigError::Endpoint {
        pool,
        index: 0,
        url: String::new(),
        reason: reason.to_owned(),
    };
    if entries.is_empty() {
        return Err(whole("the list is empty: name at least one server"));
    }
    if entries.len() > 256 {
        return Err(whole("more than 256 servers"));
    }
    let mut seen: Vec<(String, String)> = Vec::new();
    let mut resolved = Vec::with_capacity(entries.len());
    for (i, entry) in entries.iter().enumerate() {
        let bad = |reason: String| ConfigError::Endpoint {
            pool,
            index: i + 1,
            url: super::endpoint::display_url(&entry.url),
            reason,
        };
        let url = super::endpoint::check_url(&entry.url).map_err(&bad)?;
        let model = entry
            .model
            .as_deref()
            .map(str::trim)
            .unwrap_or(default_model)
            .to_owned();
        if model.is_empty() {
            return Err(bad("the model name is empty".into()));
        }
        let identity = (url.identity.clone(), model.clone());
        if let Some(first) = seen.iter().position(|s| *s == identity) {
            return Err(bad(format!(
                "duplicate of entry {} (same URL and model)",
                first + 1
            )));
        }
        seen.push(identity);
        let weight = entry.weight.unwrap_or(1.0);
        if !(weight.is_finite() && (0.0..=MAX_WEIGHT).contains(&weight)) {
            return Err(bad(format!(
                "the weight must be between 0 and {MAX_WEIGHT}, got {weight}"
            )));
        }
        let concurrency = entry.concurrency.unwrap_or(default_concurrency);
        if concurrency == 0 {
            return Err(bad("the concurrency must be at least 1".into()));
        }
        let api_key = match entry.api_key_env.as_deref().map(str::trim) {
            None => default_key.cloned(),
            Some(var) if !super::endpoint::is_env_name(var) => {
                return Err(bad("api_key_env is not an environment variable name".into()));
            }
            Some(_) if entry.api_key.is_some() => entry.api_key.clone(),
            Some(var) => match lookup(var).filter(|v| !v.trim().is_empty()) {
                Some(key) => Some(ApiKey::new(key.trim())),
                None => return Err(bad(format!("api_key_env names {var}, which is not set"))),
            },
        };
        resolved.push(ResolvedEndpoint {
            url: url.url,
            display_url: url.display,
            model,
            api_key,
            weight,
            concurrency,
        });
    }
    if resolved.iter().all(|e| e.weight == 0.0) {
        return Err(whole(
            "every weight is 0: give at least one server a weight",
        ));
    }
    Ok(resolved)
}

/// The URLs of a `GA_LLM_BASE_URLS`-style variable as entries (an empty list when the value
/// holds only commas and spaces, which the pool check then rejects).
fn url_list(value: &str) -> Vec<EndpointEntry> {
    value
        .split(',')
        .map(str::trim)
        .filter(|u| !u.is_empty())
        .map(EndpointEntry::new)
        .collect()
}

/// `on`/`off`, `true`/`false`, `1`/`0`, `yes`/`no`.
fn parse_switch(var: &'static str, value: &str) -> Result<bool, ConfigError> {
    match value.trim().to_ascii_lowercase().as_str() {
        "1" | "on" | "true" | "yes" => Ok(true),
        "0" | "off" | "false" | "no" => Ok(false),
        other => Err(ConfigError::Env {
            var,
            reason: format!("`{other}` is not on or off"),
        }),
    }
}

/// One layer of settings; unset fields leave lower layers alone.
///
/// This is also the format of the JSON config file, e.g.
/// `{"backend": "http", "base_url": "http://127.0.0.1:8080/v1", "model": "qwen2.5-3b",
/// "timeout_secs": 60}`. Unknown fields are rejected so typos do not go unnoticed.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LlmConfigLayer {
    /// Which backend to use.
    pub backend: Option<BackendChoice>,
    /// The base URL.
    pub base_url: Option<String>,
    /// The chat model.
    pub model: Option<String>,
    /// The embedding model.
    pub embed_model: Option<String>,
    /// The API key.
    pub api_key: Option<ApiKey>,
    /// Total timeout of one attempt, in seconds.
    pub timeout_secs: Option<f64>,
    /// Connect timeout, in seconds.
    pub connect_timeout_secs: Option<f64>,
    /// Transport retries after the first attempt.
    pub max_retries: Option<u32>,
    /// Backend calls in flight at once.
    pub concurrency: Option<usize>,
    /// The response cache file.
    pub cache_path: Option<PathBuf>,
    /// The embedding dimension.
    pub embedding_dim: Option<usize>,
    /// A GGUF model file for the local backend.
    pub local_model: Option<PathBuf>,
    /// Inference threads of the local backend.
    pub local_threads: Option<u32>,
    /// The model cache folder (normally found from the environment).
    pub model_cache: Option<PathBuf>,
    /// A folder of prompt template overrides.
    pub prompts: Option<PathBuf>,
    /// A pool of chat servers (see [`EndpointEntry`]).
    pub endpoints: Option<Vec<EndpointEntry>>,
    /// A pool of embedding servers (default: the chat servers).
    pub embed_endpoints: Option<Vec<EndpointEntry>>,
    /// Prefix affinity in a pool (default on).
    pub affinity: Option<bool>,
    /// How a pool ejects, probes and backs off (see [`PoolTimingsLayer`]).
    pub pool: Option<PoolTimingsLayer>,
    /// Which lists the pools came from (the environment's names, else the file's).
    #[serde(skip)]
    pub pool_sources: Option<(&'static str, &'static str)>,
}

impl LlmConfigLayer {
    /// Reads the environment through `lookup` (so tests need not touch the process env).
    pub fn from_env_with(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let get = |var: &str| lookup(var).filter(|v| !v.trim().is_empty());
        let backend = match get("GA_LLM_BACKEND") {
            Some(value) => Some(value.parse().map_err(|reason| ConfigError::Env {
                var: "GA_LLM_BACKEND",
                reason,
            })?),
            None => None,
        };
        let local_threads = match get("GA_LOCAL_THREADS") {
            Some(value) => Some(value.trim().parse().map_err(|_| ConfigError::Env {
                var: "GA_LOCAL_THREADS",
                reason: format!("`{}` is not a thread count", value.trim()),
            })?),
            None => None,
        };
        let affinity = match get("GA_LLM_AFFINITY") {
            Some(value) => Some(parse_switch("GA_LLM_AFFINITY", &value)?),
            None => None,
        };
        Ok(Self {
            backend,
            endpoints: get("GA_LLM_BASE_URLS").map(|v| url_list(&v)),
            embed_endpoints: get("GA_LLM_EMBED_BASE_URLS").map(|v| url_list(&v)),
            affinity,
            pool_sources: Some(("GA_LLM_BASE_URLS", "GA_LLM_EMBED_BASE_URLS")),
            local_model: get("GA_LOCAL_MODEL").map(|v| PathBuf::from(v.trim())),
            prompts: get("GA_PROMPTS").map(|v| PathBuf::from(v.trim())),
            local_threads,
            model_cache: model_cache_dir(get),
            base_url: get("GA_LLM_BASE_URL").map(|v| v.trim().to_owned()),
            model: get("GA_LLM_MODEL").map(|v| v.trim().to_owned()),
            embed_model: get("GA_LLM_EMBED_MODEL").map(|v| v.trim().to_owned()),
            api_key: get("GA_LLM_API_KEY")
                .or_else(|| get("OPENAI_API_KEY"))
                .map(|v| ApiKey::new(v.trim())),
            ..Self::default()
        })
    }

    /// Reads the process environment.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_env_with(|var| std::env::var(var).ok())
    }

    /// This layer with the chat pool given as comma-separated URLs, by the same rules as
    /// `GA_LLM_BASE_URLS` (an empty list is an error when applied); `source` names the list in
    /// error messages (a flag, e.g. `--llm-base-urls`).
    pub fn with_base_urls(mut self, source: &'static str, list: &str) -> Self {
        self.endpoints = Some(url_list(list));
        let embed = self
            .pool_sources
            .map_or("embed_endpoints", |(_, embed)| embed);
        self.pool_sources = Some((source, embed));
        self
    }

    /// Parses JSON config text.
    pub fn from_json_str(text: &str) -> Result<Self, ConfigError> {
        serde_json::from_str(text).map_err(|err| ConfigError::Parse {
            path: PathBuf::new(),
            // serde_json messages quote unknown field names and types, never values.
            message: err.to_string(),
        })
    }

    /// Reads a JSON config file.
    pub(crate) fn from_json_file(path: &Path) -> Result<Self, ConfigError> {
        let text = crate::files::read_text_at_most(path, MAX_CONFIG_FILE_BYTES).map_err(|err| {
            ConfigError::File {
                path: path.to_owned(),
                source: err.into(),
            }
        })?;
        Self::from_json_str(&text).map_err(|err| match err {
            ConfigError::Parse { message, .. } => ConfigError::Parse {
                path: path.to_owned(),
                message,
            },
            other => other,
        })
    }
}

/// Seconds within `[MIN_TIMEOUT, max]`.
fn seconds(field: &'static str, secs: f64, max: Duration) -> Result<Duration, ConfigError> {
    super::endpoint::check_seconds(field, secs, max)
        .map_err(|(field, reason)| ConfigError::Invalid { field, reason })
}

/// Checks the timeouts and retries of a configuration built in code (the layers check them as
/// they are applied): see [`MIN_TIMEOUT`], [`MAX_TIMEOUT`], [`MAX_CONNECT_TIMEOUT`] and
/// [`MAX_RETRIES`].
pub fn check_call_limits(
    timeout: Duration,
    connect_timeout: Duration,
    max_retries: u32,
) -> Result<(), ConfigError> {
    super::endpoint::check_call_limits(timeout, connect_timeout, max_retries)
        .map_err(|(field, reason)| ConfigError::Invalid { field, reason })
}

impl LlmConfig {
    /// Overlays the fields `layer` sets.
    pub fn apply(&mut self, layer: LlmConfigLayer) -> Result<(), ConfigError> {
        if let Some(backend) = layer.backend {
            self.backend = backend;
        }
        if let Some(base_url) = layer.base_url {
            self.base_url = Some(base_url);
        }
        if let Some(model) = layer.model {
            self.model = model;
        }
        if let Some(embed_model) = layer.embed_model {
            self.embed_model = embed_model;
        }
        if let Some(api_key) = layer.api_key {
            self.api_key = Some(api_key);
        }
        if let Some(secs) = layer.timeout_secs {
            self.timeout = seconds("timeout_secs", secs, MAX_TIMEOUT)?;
        }
        if let Some(secs) = layer.connect_timeout_secs {
            self.connect_timeout = seconds("connect_timeout_secs", secs, MAX_CONNECT_TIMEOUT)?;
        }
        if let Some(max_retries) = layer.max_retries {
            super::endpoint::check_retries(max_retries)
                .map_err(|(field, reason)| ConfigError::Invalid { field, reason })?;
            self.max_retries = max_retries;
        }
        if let Some(concurrency) = layer.concurrency {
            if concurrency == 0 {
                return Err(ConfigError::Invalid {
                    field: "concurrency",
                    reason: "must be at least 1".into(),
                });
            }
            self.concurrency = concurrency;
        }
        if let Some(cache_path) = layer.cache_path {
            self.cache_path = Some(cache_path);
        }
        if let Some(dim) = layer.embedding_dim {
            if dim == 0 {
                return Err(ConfigError::Invalid {
                    field: "embedding_dim",
                    reason: "must be at least 1".into(),
                });
            }
            self.embedding_dim = Some(dim);
        }
        if let Some(path) = layer.local_model {
            self.local_model = Some(path);
        }
        if let Some(dir) = layer.model_cache {
            self.model_cache = Some(dir);
        }
        if let Some(dir) = layer.prompts {
            self.prompts = Some(dir);
        }
        let (source, embed_source) = layer
            .pool_sources
            .unwrap_or(("endpoints", "embed_endpoints"));
        if let Some(endpoints) = layer.endpoints {
            if endpoints.is_empty() {
                return Err(ConfigError::Endpoint {
                    pool: source,
                    index: 0,
                    url: String::new(),
                    reason: "the list is empty: name at least one server".into(),
                });
            }
            self.endpoints = endpoints;
            self.endpoints_source = source;
        }
        if let Some(endpoints) = layer.embed_endpoints {
            if endpoints.is_empty() {
                return Err(ConfigError::Endpoint {
                    pool: embed_source,
                    index: 0,
                    url: String::new(),
                    reason: "the list is empty: name at least one server".into(),
                });
            }
            self.embed_endpoints = endpoints;
            self.embed_endpoints_source = embed_source;
        }
        if let Some(affinity) = layer.affinity {
            self.affinity = affinity;
        }
        if let Some(pool) = &layer.pool {
            self.pool = self.pool.apply(pool)?;
        }
        if let Some(threads) = layer.local_threads {
            if threads == 0 {
                return Err(ConfigError::Invalid {
                    field: "local_threads",
                    reason: "must be at least 1".into(),
                });
            }
            self.local_threads = threads;
        }
        Ok(())
    }

    /// The GGUF file the local backend loads: the explicit one, else the first of
    /// [`DEFAULT_MODEL_FILES`] present in the model cache, else `None`.
    pub fn local_model_path(&self) -> Option<PathBuf> {
        if let Some(path) = &self.local_model {
            return Some(path.clone());
        }
        let dir = self.model_cache.as_ref()?;
        DEFAULT_MODEL_FILES
            .iter()
            .map(|name| dir.join(name))
            .find(|path| path.is_file())
    }

    /// Defaults, then the optional config `file`, then the environment read through
    /// `lookup`, then `cli`.
    pub fn resolve(
        file: Option<&Path>,
        lookup: impl Fn(&str) -> Option<String>,
        cli: LlmConfigLayer,
    ) -> Result<Self, ConfigError> {
        let mut config = Self::default();
        if let Some(path) = file {
            config.apply(LlmConfigLayer::from_json_file(path)?)?;
        }
        config.apply(LlmConfigLayer::from_env_with(&lookup)?)?;
        config.apply(cli)?;
        // A broken pool is an error now, naming its entry, not when the backend starts; the
        // keys the entries name are read now, like the global one.
        if config.has_pool() {
            config.pools_with(&lookup)?;
            for entry in config
                .endpoints
                .iter_mut()
                .chain(config.embed_endpoints.iter_mut())
            {
                if let Some(var) = entry.api_key_env.as_deref() {
                    entry.api_key = lookup(var.trim())
                        .filter(|v| !v.trim().is_empty())
                        .map(|v| ApiKey::new(v.trim()));
                }
            }
        }
        Ok(config)
    }

    /// Whether a pool of servers is configured (`endpoints` or `embed_endpoints`).
    pub fn has_pool(&self) -> bool {
        !self.endpoints.is_empty() || !self.embed_endpoints.is_empty()
    }

    /// The chat pool and, when configured separately, the embedding pool, checked and
    /// resolved: keys read through `lookup` from the variables the entries name. Without
    /// `endpoints`, the chat pool is the single server of `base_url`.
    pub fn pools_with(
        &self,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<(Vec<ResolvedEndpoint>, Option<Vec<ResolvedEndpoint>>), ConfigError> {
        let single = [EndpointEntry::new(self.effective_base_url())];
        let (chat_entries, chat_source) = if self.endpoints.is_empty() {
            (&single[..], "base_url")
        } else {
            (&self.endpoints[..], self.endpoints_source)
        };
        let chat = resolve_pool(
            chat_source,
            chat_entries,
            &self.model,
            self.api_key.as_ref(),
            self.concurrency,
            &lookup,
        )?;
        let embed = if self.embed_endpoints.is_empty() {
            None
        } else {
            Some(resolve_pool(
                self.embed_endpoints_source,
                &self.embed_endpoints,
                &self.embed_model,
                self.api_key.as_ref(),
                self.concurrency,
                &lookup,
            )?)
        };
        Ok((chat, embed))
    }

    /// Defaults overlaid with the environment read through `lookup`.
    pub fn from_env_with(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        Self::resolve(None, lookup, LlmConfigLayer::default())
    }

    /// Defaults overlaid with the process environment.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_env_with(|var| std::env::var(var).ok())
    }

    /// Whether an HTTP server is configured (a base URL or an API key).
    pub(crate) fn has_http_config(&self) -> bool {
        self.base_url.is_some() || self.api_key.is_some() || self.has_pool()
    }

    /// The base URL the HTTP backend uses: the configured one, or [`DEFAULT_BASE_URL`].
    pub(crate) fn effective_base_url(&self) -> &str {
        self.base_url.as_deref().unwrap_or(DEFAULT_BASE_URL)
    }

    /// The loud notice for a run that falls back to the offline scripted stand-in because no
    /// model is configured (`auto` with no server and no model file); `None` otherwise. The
    /// binary prints it on stderr before anything else (the log is not set up yet).
    pub fn fallback_warning(&self) -> Option<String> {
        (self.backend == BackendChoice::Auto && self.resolved_backend() == BackendChoice::Scripted)
            .then(|| {
                "no LLM configured and no local model found (run scripts/fetch-model.sh, pass \
                 --model PATH, or set GA_LLM_BASE_URL): using the offline SCRIPTED backend — \
                 canned, deterministic answers, NOT a language model"
                    .to_owned()
            })
    }

    /// The backend `build_backend` will pick (Auto resolved): an explicit model file, else a
    /// configured HTTP server, else a cached model file (feature `local-llm`), else scripted.
    pub fn resolved_backend(&self) -> BackendChoice {
        match self.backend {
            BackendChoice::Auto if self.local_model.is_some() => BackendChoice::Local,
            BackendChoice::Auto if self.has_http_config() => BackendChoice::Http,
            BackendChoice::Auto
                if cfg!(feature = "local-llm") && self.local_model_path().is_some() =>
            {
                BackendChoice::Local
            }
            BackendChoice::Auto => BackendChoice::Scripted,
            explicit => explicit,
        }
    }
}

/// Builds the backend `config` asks for, in the order of [`LlmConfig::resolved_backend`]: an
/// explicit choice or model file wins; `auto` picks HTTP when a base URL or an API key is
/// configured, else the local model found in the model cache, and otherwise the offline town
/// script (a scripted backend, not a model). Under `auto`, a cached model that fails to load
/// falls back to the scripted backend with an error in the log.
pub(crate) fn build_backend(config: &LlmConfig) -> Result<Arc<dyn LlmBackend>, ConfigError> {
    build_backend_picked(config).map(|(backend, _)| backend)
}

/// [`build_backend`], with how the local model was picked among the cached ones when it was
/// (see [`model_pick`](super::model_pick)).
fn build_backend_picked(config: &LlmConfig) -> Result<Built, ConfigError> {
    let auto = config.backend == BackendChoice::Auto;
    let unpicked = |backend: Arc<dyn LlmBackend>| (backend, None);
    match config.resolved_backend() {
        BackendChoice::Http => build_http(config).map(unpicked),
        BackendChoice::Local if auto && config.local_model.is_none() => build_local(config)
            .or_else(|err| {
                bevy::log::error!("{err}; falling back to the offline SCRIPTED backend");
                Ok(unpicked(Arc::new(town_script_backend(0))))
            }),
        BackendChoice::Local => build_local(config),
        BackendChoice::Scripted if auto => {
            if let Some(warning) = config.fallback_warning() {
                bevy::log::warn!("{warning}");
            }
            Ok(unpicked(Arc::new(town_script_backend(0))))
        }
        BackendChoice::Scripted | BackendChoice::Auto => {
            Ok(unpicked(Arc::new(town_script_backend(0))))
        }
    }
}

/// A backend and how its model was picked, if it was.
type Built = (Arc<dyn LlmBackend>, Option<super::model_pick::ModelPick>);

#[cfg(feature = "local-llm")]
fn build_local(config: &LlmConfig) -> Result<Built, ConfigError> {
    let startup = |reason: String| ConfigError::Startup {
        backend: "local",
        reason,
    };
    // Several cached models and none given: a short warm-up picks the one this machine runs
    // best (`model_pick`).
    let cached = match (&config.local_model, &config.model_cache) {
        (None, Some(dir)) => super::model_pick::cached_models(dir),
        _ => Vec::new(),
    };
    let picked = if cached.len() > 1 {
        let picked = super::model_pick::pick_and_load(&cached, config.local_threads);
        if picked.is_none() {
            bevy::log::warn!(
                "model warm-up: no cached model could be measured; loading the default one"
            );
        }
        picked
    } else {
        None
    };
    let (path, backend, pick) = match picked {
        Some((path, backend, pick)) => {
            bevy::log::info!("model pick: {} — {}", pick.file, pick.reason);
            (path, backend as Arc<dyn LlmBackend>, Some(pick))
        }
        None => {
            let path = config.local_model_path().ok_or_else(|| {
                startup(format!(
                    "no model file: run scripts/fetch-model.sh (it fills {}), or pass --model PATH",
                    config
                        .model_cache
                        .as_deref()
                        .map_or_else(|| "the model cache".to_owned(), |d| d.display().to_string())
                ))
            })?;
            let mut local = super::local::LocalConfig::new(&path);
            local.threads = config.local_threads;
            let backend =
                super::local::LocalBackend::new(local).map_err(|err| startup(err.to_string()))?;
            (path, Arc::new(backend) as Arc<dyn LlmBackend>, None)
        }
    };
    let backend = sentence_embedder(config, backend, true);
    bevy::log::info!(
        "LLM backend: local model {} ({} thread{}, embeddings {}, {}-d)",
        path.display(),
        config.local_threads,
        if config.local_threads == 1 { "" } else { "s" },
        backend.embedding_model(),
        backend.embedding_dim()
    );
    Ok((backend, pick))
}

/// `backend` with its embeddings from the in-process sentence embedder (all-MiniLM-L6-v2) when
/// its files are in the model cache; otherwise `backend` as it is, with a warning that says
/// what retrieval loses and how to get the files.
pub fn with_sentence_embedder(
    config: &LlmConfig,
    backend: Arc<dyn LlmBackend>,
) -> Arc<dyn LlmBackend> {
    sentence_embedder(config, backend, false)
}

/// [`with_sentence_embedder`], the embedder also deciding what it decides better than a tiny
/// chat model when `deciding` ([`SentenceEmbeddings::deciding`](super::SentenceEmbeddings::deciding)).
fn sentence_embedder(
    config: &LlmConfig,
    backend: Arc<dyn LlmBackend>,
    deciding: bool,
) -> Arc<dyn LlmBackend> {
    let fallback = |why: String| {
        bevy::log::warn!(
            "{why}; memories are embedded by {} instead, which ranks relevant memories poorly \
             (run scripts/fetch-model.sh to fetch {})",
            backend.embedding_model(),
            super::minilm::MINILM_NAME
        );
    };
    let Some(dir) = config
        .model_cache
        .as_deref()
        .and_then(super::minilm::minilm_dir)
    else {
        fallback(format!(
            "no sentence-embedding model in {}",
            config.model_cache.as_deref().map_or_else(
                || "the model cache".to_owned(),
                |d| d.join(super::minilm::MINILM_DIR).display().to_string()
            )
        ));
        return backend;
    };
    match super::minilm::MiniLmEmbedder::load(&dir) {
        Ok(embedder) => {
            let embeddings = super::minilm::SentenceEmbeddings::new(backend, embedder);
            Arc::new(if deciding {
                embeddings.deciding()
            } else {
                embeddings
            })
        }
        Err(err) => {
            fallback(format!(
                "the sentence-embedding model could not be loaded: {err}"
            ));
            backend
        }
    }
}

#[cfg(not(feature = "local-llm"))]
fn build_local(_config: &LlmConfig) -> Result<Built, ConfigError> {
    Err(ConfigError::FeatureDisabled {
        backend: "local",
        feature: "local-llm",
    })
}

/// For the game binary's first run: when `auto` would fall back to the scripted backend only
/// because no model file is cached yet, or the local model has no sentence embedder
/// (all-MiniLM-L6-v2) beside it, runs this source tree's `scripts/fetch-model.sh` (it prints
/// its progress) so a newcomer's `cargo run` thinks with a real model. Does nothing without
/// the `local-llm` feature, when anything else is configured, when the script is not there (an
/// installed binary), or when `GA_NO_MODEL_FETCH` is set. Returns whether a model file is
/// available afterwards.
pub fn fetch_default_model_if_missing(config: &LlmConfig) -> bool {
    let has_embedder = config
        .model_cache
        .as_deref()
        .and_then(super::minilm::minilm_dir)
        .is_some();
    if config.local_model_path().is_some() && (has_embedder || config.local_model.is_some()) {
        return true;
    }
    let wanted = cfg!(feature = "local-llm")
        && config.backend == BackendChoice::Auto
        && !config.has_http_config()
        && std::env::var_os("GA_NO_MODEL_FETCH").is_none_or(|v| v.is_empty());
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/fetch-model.sh");
    let Some(dir) = config
        .model_cache
        .as_ref()
        .filter(|_| wanted && script.is_file())
    else {
        return config.local_model_path().is_some();
    };
    eprintln!(
        "no local {} yet: running {} (set GA_NO_MODEL_FETCH=1 to skip)",
        if config.local_model_path().is_some() {
            "sentence-embedding model"
        } else {
            "model"
        },
        script.display()
    );
    let status = std::process::Command::new("bash")
        .arg(&script)
        .env("GA_MODEL_DIR", dir)
        .stdout(std::process::Stdio::null())
        .status();
    if !matches!(status, Ok(s) if s.success()) {
        bevy::log::warn!("scripts/fetch-model.sh could not fetch a model");
    }
    config.local_model_path().is_some()
}

/// The model cache folder: `$XDG_CACHE_HOME/bevy_generative_agents/models`, or
/// `$HOME/.cache/bevy_generative_agents/models`; `None` when neither variable is set.
/// `scripts/fetch-model.sh` writes to the same place.
pub fn model_cache_dir(lookup: impl Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let base = lookup("XDG_CACHE_HOME")
        .filter(|v| !v.trim().is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            lookup("HOME")
                .filter(|v| !v.trim().is_empty())
                .map(|home| PathBuf::from(home).join(".cache"))
        })?;
    Some(base.join("bevy_generative_agents").join("models"))
}

/// Builds the backend and a client with the configured concurrency and cache file.
pub fn build_client(config: &LlmConfig) -> Result<LlmClient, ConfigError> {
    let (backend, pick) = build_backend_picked(config)?;
    let mut builder = LlmClient::builder(backend)
        .concurrency(config.concurrency)
        .model_pick(pick);
    if let Some(path) = &config.cache_path {
        builder = builder.cache_file(path);
    }
    Ok(builder.build()?)
}

#[cfg(feature = "http")]
fn build_http(config: &LlmConfig) -> Result<Arc<dyn LlmBackend>, ConfigError> {
    if config.has_pool() {
        return build_pool(config);
    }
    let http = http_config(config);
    let backend = super::http::HttpBackend::new(http).map_err(|err| ConfigError::Startup {
        backend: "http",
        reason: err.to_string(),
    })?;
    bevy::log::info!(
        "LLM backend: http at {} (model {}, embeddings {}, key {})",
        backend.base_url(),
        config.model,
        config.embed_model,
        if config.api_key.is_some() {
            "set"
        } else {
            "none"
        }
    );
    Ok(Arc::new(backend))
}

/// The HTTP settings of a resolved [`LlmConfig`].
#[cfg(feature = "http")]
fn http_config(config: &LlmConfig) -> super::http::HttpConfig {
    super::http::HttpConfig {
        embed_model: config.embed_model.clone(),
        api_key: config.api_key.clone(),
        timeout: config.timeout,
        connect_timeout: config.connect_timeout,
        max_retries: config.max_retries,
        embedding_dim: config.embedding_dim,
        ..super::http::HttpConfig::new(config.effective_base_url(), config.model.clone())
    }
}

/// The pool of servers `config` names: one single-attempt HTTP backend per server, routed by a
/// [`PoolBackend`](super::PoolBackend).
#[cfg(feature = "http")]
fn build_pool(config: &LlmConfig) -> Result<Arc<dyn LlmBackend>, ConfigError> {
    let (chat, embed) = config.pools_with(|var| std::env::var(var).ok())?;
    let startup = |reason: String| ConfigError::Startup {
        backend: "http",
        reason,
    };
    let member = |endpoint: &ResolvedEndpoint, chat_model: &str, embed_model: &str| {
        let http = super::http::HttpConfig {
            embed_model: embed_model.to_owned(),
            api_key: endpoint.api_key.clone(),
            timeout: config.timeout,
            connect_timeout: config.connect_timeout,
            // The pool retries, on another server when it can.
            max_retries: 0,
            embedding_dim: config.embedding_dim,
            worker_threads: 1,
            ..super::http::HttpConfig::new(endpoint.url.clone(), chat_model.to_owned())
        };
        let backend = super::http::HttpBackend::new(http)
            .map_err(|err| startup(format!("{}: {err}", endpoint.display_url)))?;
        Ok::<_, ConfigError>(super::pool::PoolMember {
            backend: Arc::new(backend),
            url: endpoint.display_url.clone(),
            weight: endpoint.weight,
            concurrency: endpoint.concurrency,
        })
    };
    let chat_members = chat
        .iter()
        .map(|e| member(e, &e.model, &config.embed_model))
        .collect::<Result<Vec<_>, _>>()?;
    let embed_members = embed
        .as_ref()
        .map(|list| {
            list.iter()
                .map(|e| member(e, &config.model, &e.model))
                .collect::<Result<Vec<_>, _>>()
        })
        .transpose()?;
    let settings = super::pool::PoolSettings {
        max_retries: config.max_retries,
        affinity: config.affinity,
        ..super::pool::PoolSettings::from(config.pool)
    };
    let describe = |list: &[ResolvedEndpoint]| {
        list.iter()
            .map(|e| {
                format!(
                    "{} ({}, weight {}, limit {})",
                    e.display_url, e.model, e.weight, e.concurrency
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    bevy::log::info!(
        "LLM backend: a pool of {} chat server(s): {}; embeddings on {}; affinity {}",
        chat.len(),
        describe(&chat),
        embed
            .as_deref()
            .map_or_else(|| "the chat servers".to_owned(), describe),
        if config.affinity { "on" } else { "off" }
    );
    let pool = super::pool::PoolBackend::new(chat_members, embed_members, settings)
        .map_err(|err| startup(err.to_string()))?;
    Ok(Arc::new(pool))
}

#[cfg(not(feature = "http"))]
fn build_http(_config: &LlmConfig) -> Result<Arc<dyn LlmBackend>, ConfigError> {
    Err(ConfigError::FeatureDisabled {
        backend: "http",
        feature: "http",
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |var| map.get(var).cloned()
    }

    #[test]
    fn api_key_is_redacted() {
        let key = ApiKey::new("sk-very-secret");
        assert_eq!(format!("{key:?}"), "ApiKey(***)");
        assert_eq!(key.to_string(), "ApiKey(***)");
        let config = LlmConfig {
            api_key: Some(key),
            ..LlmConfig::default()
        };
        assert!(!format!("{config:?}").contains("very-secret"));
    }

    #[test]
    fn defaults_without_anything() {
        let config = LlmConfig::from_env_with(env(&[])).expect("config");
        assert_eq!(config, LlmConfig::default());
        assert_eq!(config.resolved_backend(), BackendChoice::Scripted);
        assert_eq!(config.max_retries, 4);
        assert_eq!(config.concurrency, DEFAULT_CONCURRENCY);
    }

    #[test]
    fn env_reads_every_variable_and_prefers_ga_key() {
        let config = LlmConfig::from_env_with(env(&[
            ("GA_LLM_BACKEND", "HTTP"),
            ("GA_LLM_BASE_URL", " http://127.0.0.1:8080/v1 "),
            ("GA_LLM_MODEL", "qwen"),
            ("GA_LLM_EMBED_MODEL", "nomic"),
            ("GA_LLM_API_KEY", "ga-key"),
            ("OPENAI_API_KEY", "openai-key"),
        ]))
        .expect("config");
        assert_eq!(config.backend, BackendChoice::Http);
        assert_eq!(config.base_url.as_deref(), Some("http://127.0.0.1:8080/v1"));
        assert_eq!(config.model, "qwen");
        assert_eq!(config.embed_model, "nomic");
        assert_eq!(
            config.api_key.as_ref().map(ApiKey::expose_secret),
            Some("ga-key")
        );

        let fallback = LlmConfig::from_env_with(env(&[
            ("GA_LLM_API_KEY", ""),
            ("OPENAI_API_KEY", "openai-key"),
        ]))
        .expect("config");
        assert_eq!(
            fallback.api_key.as_ref().map(ApiKey::expose_secret),
            Some("openai-key")
        );
        assert_eq!(fallback.resolved_backend(), BackendChoice::Http);
        assert_eq!(fallback.effective_base_url(), DEFAULT_BASE_URL);
    }

    #[test]
    fn bad_backend_names_the_variable() {
        let err = LlmConfig::from_env_with(env(&[("GA_LLM_BACKEND", "gpt")])).expect_err("invalid");
        let text = err.to_string();
        assert!(
            text.contains("GA_LLM_BACKEND") && text.contains("gpt"),
            "{text}"
        );
    }

    #[test]
    fn precedence_cli_over_env_over_file() {
        let dir = std::env::temp_dir().join(format!("bga-config-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("llm.json");
        std::fs::write(
            &path,
            r#"{"backend": "scripted", "model": "file-model", "embed_model": "file-embed",
                "api_key": "file-key", "timeout_secs": 2.5, "max_retries": 1, "concurrency": 3}"#,
        )
        .expect("write");
        let cli = LlmConfigLayer {
            model: Some("cli-model".into()),
            ..LlmConfigLayer::default()
        };
        let config = LlmConfig::resolve(
            Some(&path),
            env(&[("GA_LLM_MODEL", "env-model"), ("GA_LLM_BACKEND", "http")]),
            cli,
        )
        .expect("config");
        assert_eq!(config.model, "cli-model");
        assert_eq!(config.backend, BackendChoice::Http, "env beats file");
        assert_eq!(config.embed_model, "file-embed", "file beats default");
        assert_eq!(
            config.api_key.as_ref().map(ApiKey::expose_secret),
            Some("file-key")
        );
        assert_eq!(config.timeout, Duration::from_millis(2500));
        assert_eq!(config.max_retries, 1);
        assert_eq!(config.concurrency, 3);
        assert_eq!(config.connect_timeout, DEFAULT_CONNECT_TIMEOUT);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn prompts_folder_precedence_flag_over_env_over_file() {
        let dir = std::env::temp_dir().join(format!("bga-prompts-cfg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("llm.json");
        std::fs::write(&path, r#"{"prompts": "from-file"}"#).expect("write");
        let resolve = |vars: &[(&str, &str)], flag: Option<&str>| {
            let flags = LlmConfigLayer {
                prompts: flag.map(PathBuf::from),
                ..LlmConfigLayer::default()
            };
            LlmConfig::resolve(Some(&path), env(vars), flags)
                .expect("config")
                .prompts
        };
        let from = |s: &str| Some(PathBuf::from(s));
        assert_eq!(resolve(&[], None), from("from-file"));
        assert_eq!(resolve(&[("GA_PROMPTS", "  ")], None), from("from-file"));
        assert_eq!(
            resolve(&[("GA_PROMPTS", "from-env")], None),
            from("from-env")
        );
        assert_eq!(
            resolve(&[("GA_PROMPTS", "from-env")], Some("from-flag")),
            from("from-flag")
        );
        assert_eq!(LlmConfig::from_env_with(env(&[])).unwrap().prompts, None);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn file_errors_are_clear() {
        let err = LlmConfigLayer::from_json_str(r#"{"modle": "x"}"#).expect_err("typo");
        assert!(err.to_string().contains("modle"));
        let err = LlmConfigLayer::from_json_file(Path::new("/nonexistent/llm.json"))
            .expect_err("missing");
        assert!(matches!(err, ConfigError::File { .. }));
        // A config file far larger than a config is refused by its size, unread.
        let huge = std::env::temp_dir().join(format!("bga-huge-llm-{}.json", std::process::id()));
        std::fs::File::create(&huge)
            .and_then(|f| f.set_len(MAX_CONFIG_FILE_BYTES + 1))
            .expect("sparse file");
        let err = LlmConfigLayer::from_json_file(&huge).expect_err("too large");
        let _ = std::fs::remove_file(&huge);
        assert!(err.to_string().contains("more than the 1048576"), "{err}");
        let mut config = LlmConfig::default();
        let bad = LlmConfigLayer {
            timeout_secs: Some(-1.0),
            ..LlmConfigLayer::default()
        };
        assert!(matches!(
            config.apply(bad),
            Err(ConfigError::Invalid {
                field: "timeout_secs",
                ..
            })
        ));
        // Out of the documented ranges: a microsecond timeout, four billion retries.
        for (bad, field) in [
            (
                LlmConfigLayer {
                    timeout_secs: Some(1e-6),
                    ..LlmConfigLayer::default()
                },
                "timeout_secs",
            ),
            (
                LlmConfigLayer {
                    timeout_secs: Some(1e9),
                    ..LlmConfigLayer::default()
                },
                "timeout_secs",
            ),
            (
                LlmConfigLayer {
                    connect_timeout_secs: Some(f64::NAN),
                    ..LlmConfigLayer::default()
                },
                "connect_timeout_secs",
            ),
            (
                LlmConfigLayer {
                    max_retries: Some(u32::MAX),
                    ..LlmConfigLayer::default()
                },
                "max_retries",
            ),
        ] {
            let err = config.apply(bad).expect_err(field);
            assert!(
                matches!(err, ConfigError::Invalid { field: f, .. } if f == field),
                "{err}"
            );
        }
        let err = LlmConfigLayer::from_json_str(r#"{"max_retries": 4294967295}"#)
            .and_then(|layer| LlmConfig::default().apply(layer))
            .expect_err("refused");
        assert!(err.to_string().contains("at most 10"), "{err}");
        assert_eq!(config.timeout, DEFAULT_TIMEOUT, "nothing applied");
        assert!(check_call_limits(DEFAULT_TIMEOUT, DEFAULT_CONNECT_TIMEOUT, 4).is_ok());
        assert!(check_call_limits(Duration::from_micros(1), DEFAULT_CONNECT_TIMEOUT, 4).is_err());
        let bad = LlmConfigLayer {
            concurrency: Some(0),
            ..LlmConfigLayer::default()
        };
        assert!(matches!(
            config.apply(bad),
            Err(ConfigError::Invalid {
                field: "concurrency",
                ..
            })
        ));
    }

    #[test]
    fn auto_without_http_config_is_scripted() {
        let backend = build_backend(&LlmConfig::default()).expect("backend");
        assert_eq!(backend.name(), "scripted");
        let local = LlmConfig {
            backend: BackendChoice::Local,
            ..LlmConfig::default()
        };
        assert!(matches!(
            build_backend(&local),
            Err(ConfigError::Startup { .. } | ConfigError::FeatureDisabled { .. })
        ));
    }

    #[test]
    fn selection_order_explicit_then_http_then_cached_model_then_scripted() {
        let dir = std::env::temp_dir().join(format!("bga-model-cache-{}", std::process::id()));
        let cache = dir.join("bevy_generative_agents").join("models");
        std::fs::create_dir_all(&cache).expect("dir");
        let xdg = dir.to_string_lossy().into_owned();

        // Nothing cached, nothing configured: scripted.
        let config = LlmConfig::from_env_with(env(&[("XDG_CACHE_HOME", &xdg)])).expect("config");
        assert_eq!(config.model_cache.as_deref(), Some(cache.as_path()));
        assert_eq!(config.local_model_path(), None);
        assert_eq!(config.resolved_backend(), BackendChoice::Scripted);

        // A cached model: local (when compiled in), but an HTTP endpoint beats it.
        std::fs::write(cache.join(DEFAULT_MODEL_FILES[1]), b"not really a model").expect("write");
        let config = LlmConfig::from_env_with(env(&[("XDG_CACHE_HOME", &xdg)])).expect("config");
        assert_eq!(
            config.local_model_path(),
            Some(cache.join(DEFAULT_MODEL_FILES[1]))
        );
        let expected = if cfg!(feature = "local-llm") {
            BackendChoice::Local
        } else {
            BackendChoice::Scripted
        };
        assert_eq!(config.resolved_backend(), expected);
        let config = LlmConfig::from_env_with(env(&[
            ("XDG_CACHE_HOME", &xdg),
            ("GA_LLM_BASE_URL", "http://127.0.0.1:9/v1"),
        ]))
        .expect("config");
        assert_eq!(config.resolved_backend(), BackendChoice::Http);

        // An explicit model file beats the endpoint; an explicit backend beats everything.
        let config = LlmConfig::from_env_with(env(&[
            ("GA_LLM_BASE_URL", "http://127.0.0.1:9/v1"),
            ("GA_LOCAL_MODEL", "/models/big.gguf"),
            ("GA_LOCAL_THREADS", "2"),
        ]))
        .expect("config");
        assert_eq!(config.resolved_backend(), BackendChoice::Local);
        assert_eq!(
            config.local_model_path().as_deref(),
            Some(Path::new("/models/big.gguf"))
        );
        assert_eq!(config.local_threads, 2);
        let config = LlmConfig::from_env_with(env(&[
            ("GA_LLM_BACKEND", "scripted"),
            ("GA_LOCAL_MODEL", "/models/big.gguf"),
        ]))
        .expect("config");
        assert_eq!(config.resolved_backend(), BackendChoice::Scripted);

        // Auto with a cached file that is not a model still starts (scripted, logged).
        let config = LlmConfig::from_env_with(env(&[("XDG_CACHE_HOME", &xdg)])).expect("config");
        let backend = build_backend(&config).expect("auto never fails on a bad cache");
        assert_eq!(backend.name(), "scripted");
        // The same file named explicitly is an error that names the file.
        let explicit = LlmConfig {
            local_model: Some(cache.join(DEFAULT_MODEL_FILES[1])),
            ..config
        };
        let err = build_backend(&explicit)
            .map(|_| ())
            .expect_err("not a model");
        assert!(
            matches!(
                err,
                ConfigError::Startup { .. } | ConfigError::FeatureDisabled { .. }
            ),
            "{err}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn thread_count_must_be_a_positive_number() {
        let err = LlmConfig::from_env_with(env(&[("GA_LOCAL_THREADS", "many")]))
            .expect_err("not a number");
        assert!(err.to_string().contains("GA_LOCAL_THREADS"), "{err}");
        let err = LlmConfig::from_env_with(env(&[("GA_LOCAL_THREADS", "0")])).expect_err("zero");
        assert!(matches!(
            err,
            ConfigError::Invalid {
                field: "local_threads",
                ..
            }
        ));
        assert_eq!(model_cache_dir(env(&[])), None);
        assert_eq!(
            model_cache_dir(env(&[("HOME", "/home/ada")])),
            Some(PathBuf::from(
                "/home/ada/.cache/bevy_generative_agents/models"
            ))
        );
    }

    #[test]
    fn pool_timings_come_from_the_file_and_bad_ones_name_their_key() {
        let mut config = LlmConfig::default();
        assert_eq!(config.pool, PoolTimings::default());
        config
            .apply(
                LlmConfigLayer::from_json_str(
                    r#"{"pool": {"eject_base_secs": 2, "eject_max_secs": 120,
                       "backoff_base_secs": 0.25, "retry_after_cap_secs": 10}}"#,
                )
                .expect("parses"),
            )
            .expect("valid");
        assert_eq!(
            config.pool,
            PoolTimings {
                eject_base: Duration::from_secs(2),
                eject_max: Duration::from_secs(120),
                backoff_base: Duration::from_millis(250),
                backoff_max: Duration::from_secs(30),
                retry_after_cap: Duration::from_secs(10),
            }
        );
        // A later layer changes only the keys it sets; a base above its maximum is refused.
        let err = config
            .apply(
                LlmConfigLayer::from_json_str(r#"{"pool": {"eject_max_secs": 1}}"#)
                    .expect("parses"),
            )
            .expect_err("base above max");
        assert!(
            matches!(
                err,
                ConfigError::Invalid {
                    field: "pool.eject_base_secs",
                    ..
                }
            ),
            "{err}"
        );
        for (text, field) in [
            (
                r#"{"pool": {"eject_base_secs": 0}}"#,
                "pool.eject_base_secs",
            ),
            (r#"{"pool": {"eject_max_secs": -3}}"#, "pool.eject_max_secs"),
            (
                r#"{"pool": {"backoff_max_secs": 1e9}}"#,
                "pool.backoff_max_secs",
            ),
            (
                r#"{"pool": {"retry_after_cap_secs": 0.01}}"#,
                "pool.retry_after_cap_secs",
            ),
        ] {
            let err = LlmConfig::default()
                .apply(LlmConfigLayer::from_json_str(text).expect("parses"))
                .expect_err(text);
            assert!(err.to_string().contains(field), "{text}: {err}");
        }
        let err = LlmConfigLayer::from_json_str(r#"{"pool": {"probe_secs": 1}}"#)
            .expect_err("unknown key");
        assert!(err.to_string().contains("probe_secs"), "{err}");
    }
}
