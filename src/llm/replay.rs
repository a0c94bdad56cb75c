//! The replay backend: answers from a recorded response cache, with no model at all.
//!
//! A run with `CachePolicy::Always` and a cache file records every answer (chat, choice
//! scores, embeddings). [`ReplayBackend`] loads that file and impersonates the recorded model
//! (its name and embedding model), so the same prompts hash to the same keys and get the
//! recorded answers. A prompt that was never recorded goes to the optional fallback backend,
//! or fails with [`LlmError::Unsupported`] — a replay never invents an answer silently.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use super::backend::{
    BoxFuture, ChatRequest, ChatResponse, ChoiceRequest, LlmBackend, LlmError, RetryHook,
};
use super::cache::{
    CacheError, CachedAnswer, ResponseCache, chat_cache_key, choice_cache_key, embedding_cache_key,
};
use super::usage::EMBED_KIND;

/// Answers from a recorded cache file. See the [`llm`](crate::llm) module docs.
pub struct ReplayBackend {
    cache: ResponseCache,
    model: String,
    embedding_model: String,
    embedding_dim: usize,
    fallback: Option<Arc<dyn LlmBackend>>,
}

impl std::fmt::Debug for ReplayBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplayBackend")
            .field("model", &self.model)
            .field("embedding_model", &self.embedding_model)
            .field("entries", &self.cache.len())
            .field(
                "fallback",
                &self.fallback.as_ref().map(|b| b.name().to_owned()),
            )
            .finish()
    }
}

/// The most frequent value, ties broken by the smaller string (deterministic).
fn most_common<'a>(values: impl Iterator<Item = &'a str>) -> Option<String> {
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for value in values {
        *counts.entry(value).or_insert(0) += 1;
    }
    counts
        .into_iter()
        .max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(a.0)))
        .map(|(value, _)| value.to_owned())
}

impl ReplayBackend {
    /// Loads the recording at `path` (read-only: nothing is appended). The model and
    /// embedding model are the ones most entries were recorded with.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, CacheError> {
        let path = path.as_ref();
        let (cache, _) = ResponseCache::load(path)?;
        let entries = cache.entries();
        let model = most_common(
            entries
                .iter()
                .filter(|e| e.kind != EMBED_KIND)
                .map(|e| e.model.as_str()),
        )
        .unwrap_or_else(|| "replay".to_owned());
        let embedding_model = most_common(
            entries
                .iter()
                .filter(|e| e.kind == EMBED_KIND)
                .map(|e| e.model.as_str()),
        )
        .unwrap_or_else(|| "replay".to_owned());
        let embedding_dim = entries
            .iter()
            .find_map(|e| match &e.answer {
                CachedAnswer::Embedding(v) if e.model == embedding_model => Some(v.len()),
                _ => None,
            })
            .unwrap_or(0);
        Ok(Self {
            cache,
            model,
            embedding_model,
            embedding_dim,
            fallback: None,
        })
    }

    /// Sends prompts that were not recorded to `fallback` instead of failing.
    pub(crate) fn with_fallback(mut self, fallback: Arc<dyn LlmBackend>) -> Self {
        self.fallback = Some(fallback);
        self
    }

    /// Recorded entries.
    pub fn len(&self) -> usize {
        self.cache.len()
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.cache.is_empty()
    }
}

const NOT_RECORDED: &str = "replay: this prompt was not recorded";

impl LlmBackend for ReplayBackend {
    fn name(&self) -> &str {
        "replay"
    }

    fn model(&self) -> &str {
        &self.model
    }

    fn chat(&self, request: ChatRequest) -> BoxFuture<'_, Result<ChatResponse, LlmError>> {
        Box::pin(async move {
            let key = chat_cache_key(&self.model, &request);
            match (self.cache.get(&key), &self.fallback) {
                (Some(CachedAnswer::Chat(response)), _) => Ok(response),
                (_, Some(fallback)) => fallback.chat(request).await,
                _ => Err(LlmError::Unsupported(NOT_RECORDED)),
            }
        })
    }

    fn embed(&self, texts: Vec<String>) -> BoxFuture<'_, Result<Vec<Vec<f32>>, LlmError>> {
        Box::pin(async move {
            let mut out = Vec::with_capacity(texts.len());
            for text in &texts {
                match self
                    .cache
                    .get(&embedding_cache_key(&self.embedding_model, text))
                {
                    Some(CachedAnswer::Embedding(vector)) => out.push(vector),
                    _ => match &self.fallback {
                        // One miss sends the whole batch: vectors from one model only.
                        Some(fallback) => return fallback.embed(texts).await,
                        None => return Err(LlmError::Unsupported(NOT_RECORDED)),
                    },
                }
            }
            Ok(out)
        })
    }

    fn embedding_model(&self) -> &str {
        &self.embedding_model
    }

    fn embedding_dim(&self) -> usize {
        self.embedding_dim
    }

    fn score_choices(&self, request: ChoiceRequest) -> BoxFuture<'_, Result<Vec<f32>, LlmError>> {
        Box::pin(async move {
            let key = choice_cache_key(&self.model, &request);
            match (self.cache.get(&key), &self.fallback) {
                (Some(CachedAnswer::Scores(scores)), _) => Ok(scores),
                (_, Some(fallback)) => fallback.score_choices(request).await,
                _ => Err(LlmError::Unsupported(NOT_RECORDED)),
            }
        })
    }

    fn supports_choice_scoring(&self) -> bool {
        true
    }

    fn set_retry_hook(&self, hook: RetryHook) {
        if let Some(fallback) = &self.fallback {
            fallback.set_retry_hook(hook);
        }
    }

    fn set_guess_hook(&self, hook: RetryHook) {
        if let Some(fallback) = &self.fallback {
            fallback.set_guess_hook(hook);
        }
    }

    fn shut_down(&self) {
        if let Some(fallback) = &self.fallback {
            fallback.shut_down();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn most_common_breaks_ties_by_name() {
        assert_eq!(
            most_common(["b", "a", "b", "a"].into_iter()),
            Some("a".to_owned())
        );
        assert_eq!(
            most_common(["b", "a", "b"].into_iter()),
            Some("b".to_owned())
        );
        assert_eq!(most_common(std::iter::empty()), None);
    }
}
