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
/// The shortest accepted timeout (total or connect): shorter ones fail every real call.
pub const MIN_TIMEOUT: Duration = Duration::from_millis(100);
/// The longest accepted total timeout of one attempt (an hour).
pub const MAX_TIMEOUT: Duration = Duration::from_secs(3600);
/// The longest accepted connect timeout.
pub const MAX_CONNECT_TIMEOUT: Duration = Duration::from_secs(600);
/// The most transport retries accepted: more only delays the fail-safe behind a dead server.
pub const MAX_RETRIES: u32 = 10;

/// A setting that is out of range: its config-file name and why.
pub(crate) type OutOfRange = (&'static str, String);

/// `secs` as a duration within `[MIN_TIMEOUT, max]`.
pub(crate) fn check_seconds(
    field: &'static str,
    secs: f64,
    max: Duration,
) -> Result<Duration, OutOfRange> {
    let (lo, hi) = (MIN_TIMEOUT.as_secs_f64(), max.as_secs_f64());
    if !(secs.is_finite() && secs >= lo && secs <= hi) {
        return Err((
            field,
            format!("must be between {lo} and {hi} seconds, got {secs}"),
        ));
    }
    Duration::try_from_secs_f64(secs).map_err(|err| (field, err.to_string()))
}

/// At most [`MAX_RETRIES`].
pub(crate) fn check_retries(max_retries: u32) -> Result<(), OutOfRange> {
    if max_retries > MAX_RETRIES {
        return Err((
            "max_retries",
            format!("must be at most {MAX_RETRIES}, got {max_retries}"),
        ));
    }
    Ok(())
}

/// The timeouts and retries of one endpoint within their ranges.
pub(crate) fn check_call_limits(
    timeout: Duration,
    connect_timeout: Duration,
    max_retries: u32,
) -> Result<(), OutOfRange> {
    check_seconds("timeout_secs", timeout.as_secs_f64(), MAX_TIMEOUT)?;
    check_seconds(
        "connect_timeout_secs",
        connect_timeout.as_secs_f64(),
        MAX_CONNECT_TIMEOUT,
    )?;
    check_retries(max_retries)
}
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
    #[cfg_attr(
        not(feature = "http"),
        allow(dead_code, reason = "only the HTTP backend calls it outside tests")
    )]
    pub(crate) fn expose_secret(&self) -> &str {
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
