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
/// An API key. `Debug` and `Display` print `ApiKey(***)`; there is no `Serialize`. Every key
/// built is registered with [`register_secret`](super::register_secret), so no model answer
/// carries it on in any encoding.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(from = "String")]
pub struct ApiKey(String);

impl ApiKey {
    /// Wraps a key (and registers it as a secret to redact).
    pub fn new(key: impl Into<String>) -> Self {
        let key = key.into();
        super::register_secret(&key);
        Self(key)
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

impl From<String> for ApiKey {
    fn from(key: String) -> Self {
        Self::new(key)
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

/// One server of a pool as the configuration names it (a config-file `endpoints` or
/// `embed_endpoints` entry, or one URL of `GA_LLM_BASE_URLS`).
///
/// `{"url": "http://10.0.0.2:8000/v1", "model": "qwen2.5-7b", "api_key_env": "GPU2_KEY",
/// "weight": 2, "concurrency": 16}`; only `url` is required. The key is named by the
/// environment variable that holds it, so it never sits in the file.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EndpointEntry {
    /// The OpenAI-compatible base URL, e.g. `http://127.0.0.1:8080/v1`.
    pub url: String,
    /// The model asked for there (default: the configured chat or embedding model).
    #[serde(default)]
    pub model: Option<String>,
    /// The environment variable holding this server's API key (default: the configured key).
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// The routing weight (default 1): a server of weight 2 gets about twice the calls. A
    /// weight of 0 makes a standby used only when no weighted server can take the call.
    #[serde(default)]
    pub weight: Option<f64>,
    /// Calls in flight there at most at once (default: the global concurrency).
    #[serde(default)]
    pub concurrency: Option<usize>,
    /// The key read from `api_key_env` when the configuration was resolved
    /// ([`LlmConfig::resolve`](super::LlmConfig::resolve)); never read from or written to a
    /// file.
    #[serde(skip)]
    pub api_key: Option<ApiKey>,
}

impl EndpointEntry {
    /// An entry with only a URL.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            model: None,
            api_key_env: None,
            weight: None,
            concurrency: None,
            api_key: None,
        }
    }
}

/// The largest routing weight accepted.
pub const MAX_WEIGHT: f64 = 1e6;

/// A checked base URL: what is sent to, what may be shown, and what makes two entries the same.
pub(crate) struct CheckedUrl {
    /// The URL to use (trimmed, no trailing slash).
    pub(crate) url: String,
    /// The URL without credentials, for logs, errors and reports.
    pub(crate) display: String,
    /// Lowercase scheme and host, path without trailing slash, no credentials.
    pub(crate) identity: String,
}

/// `url` without any `user:password@`, for error messages about an entry that may not even
/// parse.
pub(crate) fn display_url(url: &str) -> String {
    // A query string may carry a key (`?api-key=…`): never shown.
    let url = url.trim().split(['?', '#']).next().unwrap_or_default();
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    let host = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    let mut shown = if scheme.is_empty() {
        format!("{host}{path}")
    } else {
        format!("{scheme}://{host}{path}")
    };
    if shown.chars().count() > 200 {
        shown = shown.chars().take(200).collect::<String>() + "…";
    }
    shown
}

/// Checks that `url` is an `http(s)://host[:port][/path]` URL.
pub(crate) fn check_url(url: &str) -> Result<CheckedUrl, String> {
    let trimmed = url.trim().trim_end_matches('/');
    if trimmed.is_empty() {
        return Err("the URL is empty".into());
    }
    if trimmed.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("the URL contains spaces or control characters".into());
    }
    let Some((scheme, rest)) = trimmed.split_once("://") else {
        return Err("the URL must start with http:// or https://".into());
    };
    let scheme = scheme.to_ascii_lowercase();
    if scheme != "http" && scheme != "https" {
        return Err("the URL must start with http:// or https://".into());
    }
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let (host, port) = match host_port.strip_prefix('[') {
        Some(v6) => match v6.split_once(']') {
            Some((host, after)) => (host, after.strip_prefix(':')),
            None => return Err("the URL has an unclosed IPv6 address".into()),
        },
        None => match host_port.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (host_port, None),
        },
    };
    if host.is_empty() {
        return Err("the URL has no host".into());
    }
    if let Some(port) = port
        && port.parse::<u16>().is_err()
    {
        return Err("the URL's port is not a number from 0 to 65535".into());
    }
    let display = display_url(trimmed);
    let identity = format!(
        "{scheme}://{}{}",
        host_port.to_ascii_lowercase(),
        path.trim_end_matches('/')
    );
    Ok(CheckedUrl {
        url: trimmed.to_owned(),
        display,
        identity,
    })
}

/// Whether `name` can be an environment variable name (`[A-Za-z_][A-Za-z0-9_]*`).
pub(crate) fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && name.len() <= 256
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_checked_and_shown_without_credentials() {
        let ok = check_url(" http://User:Secret@Host.Example:8080/v1/ ").expect("valid");
        assert_eq!(ok.url, "http://User:Secret@Host.Example:8080/v1");
        assert_eq!(ok.display, "http://Host.Example:8080/v1");
        assert_eq!(ok.identity, "http://host.example:8080/v1");
        assert!(!ok.display.contains("Secret"));
        assert!(check_url("http://[::1]:8000/v1").is_ok());
        for bad in [
            "",
            "localhost:8080",
            "ftp://host/v1",
            "http:///v1",
            "http://host:99999/v1",
            "http://ho st/v1",
            "http://[::1/v1",
        ] {
            assert!(check_url(bad).is_err(), "{bad}");
        }
        assert_eq!(display_url("http://a:b@h/x"), "http://h/x");
        assert_eq!(display_url("http://h/v1?api-key=SECRET"), "http://h/v1");
        assert!(
            !check_url("http://h/v1?key=SECRET")
                .expect("valid")
                .display
                .contains("SECRET")
        );
        assert!(is_env_name("GPU_2_KEY") && !is_env_name("2KEY") && !is_env_name("A-B"));
    }
}
