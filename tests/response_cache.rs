//! The response cache holds only answers worth reusing: an answer a prompt rejected, a failed
//! call and a fail-safe are never served from it again (a recording keeps rejected answers,
//! marked, so its replay retries the same way), and embeddings that are NaN or of the wrong
//! dimension are neither used nor cached.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bevy::tasks::block_on;
use bevy_generative_agents::cognition::prompts::{EVENT_POIGNANCY_FAIL_SAFE, EventPoignancy};
use bevy_generative_agents::llm::{
    BoxFuture, CachePolicy, ChatRequest, ChatResponse, LlmBackend, LlmClient, LlmError,
    ResponseCache, ScriptedBackend,
};
use bevy_generative_agents::prompt::{PromptContext, PromptLibrary, run_prompt};

fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir =
        std::env::temp_dir().join(format!("bga-response-cache-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// Answers every poignancy question with `answer`.
fn answering(answer: &'static str) -> Arc<ScriptedBackend> {
    Arc::new(ScriptedBackend::new(1).with_responder("event_poignancy", move |_, _| answer.into()))
}

fn poignancy() -> EventPoignancy {
    EventPoignancy {
        identity: "Name: Mira".into(),
        first_name: "Mira".into(),
        event: "the kettle is boiling".into(),
    }
}

fn context(client: LlmClient) -> PromptContext {
    PromptContext::new(client, PromptLibrary::default())
}

#[test]
fn a_fail_safe_leaves_nothing_in_the_cache() {
    let backend = answering("I cannot rate that.");
    let ctx = context(LlmClient::new(backend.clone()));
    let outcome = block_on(run_prompt(&ctx, &poignancy()));
    assert!(outcome.fail_safe);
    assert_eq!(outcome.value, EVENT_POIGNANCY_FAIL_SAFE);
    assert_eq!(outcome.attempts, 4);
    assert!(
        ctx.client.cache().is_empty(),
        "{:?}",
        ctx.client.cache().entries()
    );
    // Asked again, every attempt reaches the model again: nothing bad was remembered.
    let again = block_on(run_prompt(&ctx, &poignancy()));
    assert_eq!(again, outcome);
    assert_eq!(backend.chat_calls(), 8);
    assert_eq!(ctx.client.usage().totals.cache_hits, 0);
}

#[test]
fn only_the_accepted_attempt_is_cached() {
    // Seeds 0 and 1 get garbage, seed 2 a rating.
    let backend = Arc::new(
        ScriptedBackend::new(1).with_responder("event_poignancy", |r, _| match r.seed {
            Some(0) => String::new(),
            Some(1) => "Rating: 11 out of 10".into(),
            _ => "Rating: 6".into(),
        }),
    );
    let ctx = context(LlmClient::new(backend.clone()));
    let outcome = block_on(run_prompt(&ctx, &poignancy()));
    assert_eq!(
        (outcome.value, outcome.attempts, outcome.fail_safe),
        (6, 3, false)
    );
    let entries = ctx.client.cache().entries();
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert!(!entries[0].rejected);
    // The second time, the two rejected attempts are asked again and the third is a hit.
    let again = block_on(run_prompt(&ctx, &poignancy()));
    assert_eq!(again, outcome);
    assert_eq!(backend.chat_calls(), 5);
    assert_eq!(ctx.client.usage().totals.cache_hits, 1);
}

#[test]
fn a_recording_marks_rejected_answers_and_only_a_replay_serves_them() {
    let dir = temp_dir("recording");
    let path = dir.join("recording.jsonl");
    let backend = Arc::new(
        ScriptedBackend::new(1).with_responder("event_poignancy", |r, _| {
            if r.seed == Some(0) {
                "no idea".into()
            } else {
                "4".into()
            }
        }),
    );
    let recorder = LlmClient::builder(backend.clone())
        .cache_policy(CachePolicy::Always)
        .cache_file(&path)
        .build()
        .expect("recording client");
    let recorded = block_on(run_prompt(&context(recorder), &poignancy()));
    assert_eq!((recorded.value, recorded.attempts), (4, 2));

    let (file, _) = ResponseCache::load(&path).expect("load");
    let mut flags: Vec<bool> = file.entries().iter().map(|e| e.rejected).collect();
    flags.sort();
    assert_eq!(flags, [false, true]);

    // A replay (policy Always) answers both attempts from the file, as recorded.
    let replayer = LlmClient::builder(backend.clone())
        .cache_policy(CachePolicy::Always)
        .cache_file(&path)
        .build()
        .expect("replay client");
    let replayed = block_on(run_prompt(&context(replayer.clone()), &poignancy()));
    assert_eq!(replayed, recorded);
    assert_eq!(replayer.usage().totals.cache_hits, 2);
    assert_eq!(backend.chat_calls(), 2, "the replay made no call");

    // The same file as an ordinary cache serves the accepted answer, never the rejected one.
    let ordinary = LlmClient::builder(backend.clone())
        .cache_file(&path)
        .build()
        .expect("ordinary client");
    let reused = block_on(run_prompt(&context(ordinary.clone()), &poignancy()));
    assert_eq!(reused, recorded);
    assert_eq!(ordinary.usage().totals.cache_hits, 1);
    assert_eq!(
        backend.chat_calls(),
        3,
        "the rejected attempt was asked again"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Embeds with a vector chosen by the call number: good, NaN, or of the wrong dimension.
struct OddEmbedder {
    calls: AtomicU64,
}

impl LlmBackend for OddEmbedder {
    fn name(&self) -> &str {
        "odd"
    }
    fn model(&self) -> &str {
        "odd"
    }
    fn chat(&self, _: ChatRequest) -> BoxFuture<'_, Result<ChatResponse, LlmError>> {
        Box::pin(async { Err(LlmError::Unsupported("chat")) })
    }
    fn embed(&self, texts: Vec<String>) -> BoxFuture<'_, Result<Vec<Vec<f32>>, LlmError>> {
        let call = self.calls.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move {
            Ok(texts
                .iter()
                .map(|_| match call {
                    0 => vec![f32::NAN, 1.0, 0.0],
                    1 => vec![1.0, 0.0],
                    2 => vec![f32::INFINITY, 0.0, 0.0],
                    _ => vec![0.0, 1.0, 0.0],
                })
                .collect())
        })
    }
    fn embedding_model(&self) -> &str {
        "odd-embed"
    }
    fn embedding_dim(&self) -> usize {
        3
    }
}

#[test]
fn unusable_embeddings_are_errors_and_never_cached() {
    let backend = Arc::new(OddEmbedder {
        calls: AtomicU64::new(0),
    });
    let client = LlmClient::new(backend.clone());
    for _ in 0..3 {
        let result = block_on(client.embed_one("the kettle"));
        assert!(matches!(result, Err(LlmError::Malformed(_))), "{result:?}");
        assert!(client.cache().is_empty());
    }
    assert_eq!(
        block_on(client.embed_one("the kettle")),
        Ok(vec![0.0, 1.0, 0.0])
    );
    assert_eq!(client.cache().len(), 1);
    assert_eq!(client.usage().kind("embed").errors, 3);
}
