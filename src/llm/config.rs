//! Choosing and configuring the backend.
//!
//! [`LlmConfig`] is resolved from layers, highest precedence first: **CLI flags** ([`LlmArgs`])
//! \> **environment** (`GA_LLM_BACKEND`, `GA_LLM_BASE_URL`, `GA_LLM_MODEL`,
//! `GA_LLM_EMBED_MODEL`, `GA_LLM_API_KEY`, then `OPENAI_API_KEY`) > **config file** (JSON, see
//! [`LlmConfigLayer`]) > **defaults**. Empty environment variables count as unset. An API key
//! can come from the environment or the config file, never from a flag (flags end up in shell
//! history and process lists).
//!
//! [`build_backend`] turns a config into a backend: an explicit choice wins; `auto` picks the
//! HTTP backend when a base URL or an API key is configured, and otherwise — until the
//! embedded local model lands (issue 5 makes it the default) — the **scripted** backend running
//! the offline town script ([`town_script_backend`]), with a warning that it is an offline
//! stand-in, not a model.
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
use crate::testing::town_script::town_script_backend;

/// The base URL used when only an API key is configured.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
/// The default chat model (any OpenAI-compatible server; local servers often ignore it).
pub const DEFAULT_MODEL: &str = "gpt-4o-mini";
/// The default embedding model.
pub const DEFAULT_EMBED_MODEL: &str = "text-embedding-3-small";
/// The default total timeout of one HTTP attempt.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
/// The default connect timeout.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The default number of transport retries after the first attempt.
pub const DEFAULT_MAX_RETRIES: u32 = 4;

/// An API key. `Debug` and `Display` print `ApiKey(***)`; there is no `Serialize`.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wraps a key.
    pub fn new(key: impl Into<String>) -> Self {
        Self(key.into())
    }

    /// The key itself — for the `Authorization` header and for scrubbing it out of error
    /// text, nothing else.
    pub fn expose_secret(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(***)")
    }
}

impl fmt::Display for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(***)")
    }
}

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
    /// The embedded local model (feature `local-llm`; not available yet).
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
        }
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
        Ok(Self {
            backend,
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

    /// Parses JSON config text.
    pub fn from_json_str(text: &str) -> Result<Self, ConfigError> {
        serde_json::from_str(text).map_err(|err| ConfigError::Parse {
            path: PathBuf::new(),
            // serde_json messages quote unknown field names and types, never values.
            message: err.to_string(),
        })
    }

    /// Reads a JSON config file.
    pub fn from_json_file(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::File {
            path: path.to_owned(),
            source,
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

fn seconds(field: &'static str, secs: f64) -> Result<Duration, ConfigError> {
    if secs <= 0.0 {
        return Err(ConfigError::Invalid {
            field,
            reason: "must be positive".into(),
        });
    }
    Duration::try_from_secs_f64(secs).map_err(|err| ConfigError::Invalid {
        field,
        reason: err.to_string(),
    })
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
            self.timeout = seconds("timeout_secs", secs)?;
        }
        if let Some(secs) = layer.connect_timeout_secs {
            self.connect_timeout = seconds("connect_timeout_secs", secs)?;
        }
        if let Some(max_retries) = layer.max_retries {
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
        Ok(())
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
        config.apply(LlmConfigLayer::from_env_with(lookup)?)?;
        config.apply(cli)?;
        Ok(config)
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
    pub fn has_http_config(&self) -> bool {
        self.base_url.is_some() || self.api_key.is_some()
    }

    /// The base URL the HTTP backend uses: the configured one, or [`DEFAULT_BASE_URL`].
    pub fn effective_base_url(&self) -> &str {
        self.base_url.as_deref().unwrap_or(DEFAULT_BASE_URL)
    }

    /// The backend [`build_backend`] will pick (Auto resolved).
    pub fn resolved_backend(&self) -> BackendChoice {
        match self.backend {
            BackendChoice::Auto if self.has_http_config() => BackendChoice::Http,
            BackendChoice::Auto => BackendChoice::Scripted,
            explicit => explicit,
        }
    }
}

/// LLM command-line flags, to flatten into a binary's `clap` parser. There is deliberately no
/// flag for the API key.
#[derive(Debug, Clone, Default, PartialEq, clap::Args)]
pub struct LlmArgs {
    /// JSON file with LLM settings (lowest precedence after defaults).
    #[arg(long = "llm-config", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Backend: auto, scripted, http or local.
    #[arg(long = "llm-backend", value_name = "BACKEND")]
    pub backend: Option<BackendChoice>,
    /// OpenAI-compatible base URL, e.g. http://127.0.0.1:8080/v1.
    #[arg(long = "llm-base-url", value_name = "URL")]
    pub base_url: Option<String>,
    /// Chat model name.
    #[arg(long = "llm-model", value_name = "MODEL")]
    pub model: Option<String>,
    /// Embedding model name.
    #[arg(long = "llm-embed-model", value_name = "MODEL")]
    pub embed_model: Option<String>,
    /// Timeout of one HTTP attempt, in seconds.
    #[arg(long = "llm-timeout", value_name = "SECS")]
    pub timeout_secs: Option<f64>,
    /// Transport retries after the first attempt.
    #[arg(long = "llm-max-retries", value_name = "N")]
    pub max_retries: Option<u32>,
    /// Backend calls in flight at once.
    #[arg(long = "llm-concurrency", value_name = "N")]
    pub concurrency: Option<usize>,
    /// Persist the response cache to this JSON-lines file.
    #[arg(long = "llm-cache", value_name = "FILE")]
    pub cache_path: Option<PathBuf>,
}

impl LlmArgs {
    /// The flags as a config layer.
    pub fn layer(&self) -> LlmConfigLayer {
        LlmConfigLayer {
            backend: self.backend,
            base_url: self.base_url.clone(),
            model: self.model.clone(),
            embed_model: self.embed_model.clone(),
            timeout_secs: self.timeout_secs,
            max_retries: self.max_retries,
            concurrency: self.concurrency,
            cache_path: self.cache_path.clone(),
            ..LlmConfigLayer::default()
        }
    }

    /// Resolves the full config: these flags > environment (through `lookup`) > `--llm-config`
    /// file > defaults.
    pub fn resolve_with(
        &self,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<LlmConfig, ConfigError> {
        LlmConfig::resolve(self.config.as_deref(), lookup, self.layer())
    }

    /// Resolves the full config against the process environment.
    pub fn resolve(&self) -> Result<LlmConfig, ConfigError> {
        self.resolve_with(|var| std::env::var(var).ok())
    }
}

/// Builds the backend `config` asks for: an explicit choice wins; `auto` picks HTTP when a base
/// URL or an API key is configured, and otherwise the offline town script (a scripted backend,
/// not a model).
pub fn build_backend(config: &LlmConfig) -> Result<Arc<dyn LlmBackend>, ConfigError> {
    match config.backend {
        BackendChoice::Scripted => Ok(Arc::new(town_script_backend(0))),
        BackendChoice::Http => build_http(config),
        BackendChoice::Local => Err(ConfigError::Unavailable(
            "embedded local-model (it arrives with the `local-llm` backend, issue 5)",
        )),
        BackendChoice::Auto if config.has_http_config() => build_http(config),
        BackendChoice::Auto => {
            bevy::log::warn!(
                "no LLM configured (set GA_LLM_BASE_URL or an API key): using the offline \
                 SCRIPTED backend — canned, deterministic answers, not a language model"
            );
            Ok(Arc::new(town_script_backend(0)))
        }
    }
}

/// Builds the backend and a client with the configured concurrency and cache file.
pub fn build_client(config: &LlmConfig) -> Result<LlmClient, ConfigError> {
    let backend = build_backend(config)?;
    let mut builder = LlmClient::builder(backend).concurrency(config.concurrency);
    if let Some(path) = &config.cache_path {
        builder = builder.cache_file(path);
    }
    Ok(builder.build()?)
}

#[cfg(feature = "http")]
fn build_http(config: &LlmConfig) -> Result<Arc<dyn LlmBackend>, ConfigError> {
    let http = super::http::HttpConfig::from_llm_config(config);
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
        assert_eq!(config.concurrency, 8);
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
    fn file_errors_are_clear() {
        let err = LlmConfigLayer::from_json_str(r#"{"modle": "x"}"#).expect_err("typo");
        assert!(err.to_string().contains("modle"));
        let err = LlmConfigLayer::from_json_file(Path::new("/nonexistent/llm.json"))
            .expect_err("missing");
        assert!(matches!(err, ConfigError::File { .. }));
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
            Err(ConfigError::Unavailable(_))
        ));
    }

    #[test]
    fn cli_flags_parse() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            llm: LlmArgs,
        }
        let cli = Cli::try_parse_from(["x", "--llm-backend", "scripted", "--llm-concurrency", "2"])
            .expect("parse");
        let config = cli
            .llm
            .resolve_with(env(&[("GA_LLM_BACKEND", "http")]))
            .expect("config");
        assert_eq!(config.backend, BackendChoice::Scripted);
        assert_eq!(config.concurrency, 2);
    }
}
