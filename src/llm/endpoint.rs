//! What an OpenAI-compatible endpoint is made of: its defaults and its secret.
//!
//! Shared by the configuration ([`LlmConfig`](super::LlmConfig)) and the HTTP backend, which
//! both read it and neither of which the other needs to know about for it.

use std::fmt;
use std::time::Duration;

use serde::Deserialize;

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
