//! `LlmClient` behaviour over deterministic backends: caching, embedding batching,
//! concurrency limits, usage accounting, scripted determinism, fault injection and replay.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bevy::tasks::block_on;
use bevy_generative_agents::llm::{
    BoxFuture, CachePolicy, ChatRequest, ChatResponse, ChoiceRequest, Fault, FaultyBackend,
    KindUsage, LlmBackend, LlmClient, LlmError, ReplayBackend, RetryHook, ScriptedBackend,
    ThoughtCalls, TokenUsage, hashed_bow_embedding,
};
use rand::Rng;

fn scripted(seed: u64) -> Arc<ScriptedBackend> {
    Arc::new(ScriptedBackend::new(seed).with_answer("fixed", "abcdefgh"))
}

fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("bga-llm-client-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

#[test]
fn deterministic_requests_are_cached_and_sampled_ones_are_not() {
    let backend = scripted(1);
    let client = LlmClient::new(backend.clone());
    assert_eq!(client.cache_policy(), CachePolicy::Deterministic);

    let greedy = ChatRequest::new("fixed", "hello").with_temperature(0.0);
    let first = block_on(client.chat(greedy.clone())).expect("answer");
    let second = block_on(client.chat(greedy)).expect("answer");
    assert_eq!(first, second);
    assert_eq!(
        backend.chat_calls(),
        1,
        "the second identical call must not reach the backend"
    );

    let seeded = ChatRequest {
        seed: Some(9),
        ..ChatRequest::new("fixed", "seeded")
    };
    block_on(client.chat(seeded.clone())).expect("answer");
    block_on(client.chat(seeded)).expect("answer");
    assert_eq!(
        backend.chat_calls(),
        2,
        "an explicit seed makes a request cacheable"
    );

    let sampled = ChatRequest::new("fixed", "hello"); // temperature 0.5, no seed
    block_on(client.chat(sampled.clone())).expect("answer");
    block_on(client.chat(sampled)).expect("answer");
    assert_eq!(
        backend.chat_calls(),
        4,
        "sampled requests always reach the backend"
    );

    let usage = client.usage().kind("fixed");
    assert_eq!((usage.calls, usage.cache_hits), (4, 2));
}

#[test]
fn cache_policies_always_and_off() {
    let backend = scripted(1);
    let always = LlmClient::builder(backend.clone())
        .cache_policy(CachePolicy::Always)
        .build()
        .expect("client");
    let sampled = ChatRequest::new("fixed", "hello");
    block_on(always.chat(sampled.clone())).expect("answer");
    block_on(always.chat(sampled.clone())).expect("answer");
    assert_eq!(backend.chat_calls(), 1);

    let off_backend = scripted(1);
    let off = LlmClient::builder(off_backend.clone())
        .cache_policy(CachePolicy::Off)
        .build()
        .expect("client");
    let greedy = sampled.with_temperature(0.0);
    block_on(off.chat(greedy.clone())).expect("answer");
    block_on(off.chat(greedy)).expect("answer");
    block_on(off.embed(vec!["x".into()])).expect("embed");
    block_on(off.embed(vec!["x".into()])).expect("embed");
    assert_eq!(off_backend.chat_calls(), 2);
    assert_eq!(off_backend.embed_calls(), 2);
    assert_eq!(off.usage().totals.cache_hits, 0);
}

#[test]
fn embeddings_only_send_uncached_texts_in_batches_and_keep_order() {
    let backend = Arc::new(ScriptedBackend::new(0).with_embedding_dim(32));
    let client = LlmClient::builder(backend.clone())
        .embed_batch_size(2)
        .build()
        .expect("client");

    let texts: Vec<String> = ["the park", "a cafe", "the park"]
        .map(String::from)
        .to_vec();
    let vectors = block_on(client.embed(texts.clone())).expect("embed");
    assert_eq!(vectors.len(), 3);
    for (text, vector) in texts.iter().zip(&vectors) {
        assert_eq!(
            *vector,
            hashed_bow_embedding(text, 32),
            "vector for {text:?} in order"
        );
    }
    assert_eq!(
        backend.embedded_texts(),
        2,
        "a repeated text is embedded once"
    );
    assert_eq!(backend.embed_calls(), 1);

    let more: Vec<String> = ["a cafe", "b", "c", "d", "the park"]
        .map(String::from)
        .to_vec();
    let vectors = block_on(client.embed(more.clone())).expect("embed");
    for (text, vector) in more.iter().zip(&vectors) {
        assert_eq!(*vector, hashed_bow_embedding(text, 32));
    }
    assert_eq!(backend.embedded_texts(), 5, "only b, c, d are new");
    assert_eq!(
        backend.embed_calls(),
        3,
        "three new texts in batches of two"
    );

    let one = block_on(client.embed_one("b")).expect("embed");
    assert_eq!(one, hashed_bow_embedding("b", 32));
    assert_eq!(backend.embed_calls(), 3);
    assert!(
        block_on(client.embed(Vec::new()))
            .expect("empty")
            .is_empty()
    );

    let usage = client.usage().kind("embed");
    assert_eq!(usage.calls, 3);
    assert_eq!(usage.cache_hits, 3, "a cafe, the park, then b");
    assert_eq!(client.embedding_dim(), 32);
}

#[test]
fn concurrency_limit_is_respected() {
    let backend = Arc::new(ScriptedBackend::new(0).with_latency(Duration::from_millis(100)));
    let client = LlmClient::builder(backend.clone())
        .concurrency(3)
        .build()
        .expect("client");
    std::thread::scope(|scope| {
        for i in 0..12 {
            let client = client.clone();
            scope.spawn(move || {
                block_on(client.chat(ChatRequest::new("k", format!("prompt {i}")))).expect("answer")
            });
        }
    });
    assert_eq!(backend.chat_calls(), 12);
    assert_eq!(
        backend.max_concurrent(),
        3,
        "never more than the limit, and the limit is used"
    );
    assert_eq!(client.in_flight(), 0);
    assert_eq!(client.concurrency(), 3);
}

#[test]
fn each_thought_shows_what_it_asks_and_how_many_answers_it_had() {
    let backend = Arc::new(ScriptedBackend::new(0).with_latency(Duration::from_millis(300)));
    let client = LlmClient::builder(backend).build().expect("client");
    assert_eq!(client.thought_calls("Ada"), ThoughtCalls::default());
    block_on(client.chat(ChatRequest::new("wake_up_hour", "a").with_affinity("Ada")))
        .expect("answer");
    std::thread::scope(|scope| {
        let asking = client.clone();
        let call = scope.spawn(move || {
            block_on(asking.chat(ChatRequest::new("daily_plan", "b").with_affinity("Ada")))
        });
        // While the second call is out, the thought is asking for its day plan.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while client.thought_calls("Ada").asking.is_none() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        let during = client.thought_calls("Ada");
        assert_eq!(during.asking.as_deref(), Some("daily_plan"));
        assert_eq!((during.in_flight, during.ended), (1, 1));
        call.join().expect("thread").expect("answer");
    });
    let after = client.thought_calls("Ada");
    assert_eq!((after.asking, after.in_flight, after.ended), (None, 0, 2));
    assert_eq!(
        client.thought_calls("Bo"),
        ThoughtCalls::default(),
        "per thought"
    );
}

#[test]
fn usage_is_counted_per_kind() {
    let backend = scripted(3);
    let client = LlmClient::new(backend);
    // prompt_text is "hello world\n" (12 bytes → 3 tokens); "abcdefgh" is 2 tokens.
    for _ in 0..2 {
        block_on(client.chat(ChatRequest::new("fixed", "hello world"))).expect("answer");
    }
    block_on(client.chat(ChatRequest::new("other", "x"))).expect("answer");
    client.record_retry("fixed");
    client.record_fail_safe("fixed");
    client.record_fail_safe("other");

    let report = client.usage();
    assert_eq!(report.backend, "scripted");
    assert_eq!(report.model, "scripted");
    let fixed = report.kind("fixed");
    assert_eq!(
        KindUsage {
            total_latency_ms: 0,
            max_latency_ms: 0,
            ..fixed
        },
        KindUsage {
            calls: 2,
            prompt_tokens: 6,
            completion_tokens: 4,
            retries: 1,
            fail_safes: 1,
            ..KindUsage::default()
        }
    );
    let other = report.kind("other");
    assert_eq!(
        (other.calls, other.prompt_tokens, other.fail_safes),
        (1, 1, 1)
    );
    assert_eq!(report.totals.calls, 3);
    assert_eq!(report.totals.fail_safes, 2);
    let json = report.to_json_pretty();
    assert!(json.contains("\"fixed\"") && json.contains("\"totals\""));
}

/// A backend that fails every call, or reports a transport retry through its hook first.
#[derive(Default)]
struct FlakyBackend {
    hook: Mutex<Option<RetryHook>>,
    calls: AtomicU64,
}

impl LlmBackend for FlakyBackend {
    fn name(&self) -> &str {
        "flaky"
    }
    fn model(&self) -> &str {
        "flaky"
    }
    fn chat(&self, request: ChatRequest) -> BoxFuture<'_, Result<ChatResponse, LlmError>> {
        Box::pin(async move {
            let call = self.calls.fetch_add(1, Ordering::SeqCst);
            if call.is_multiple_of(2) {
                return Err(LlmError::Status {
                    status: 503,
                    message: "busy".into(),
                });
            }
            if let Some(hook) = self.hook.lock().expect("lock").clone() {
                hook(&request.kind);
                hook(&request.kind);
            }
            Ok(ChatResponse {
                text: "ok".into(),
                usage: TokenUsage {
                    prompt_tokens: 5,
                    completion_tokens: 1,
                    ..TokenUsage::default()
                },
            })
        })
    }
    fn embed(&self, texts: Vec<String>) -> BoxFuture<'_, Result<Vec<Vec<f32>>, LlmError>> {
        // Deliberately returns one vector too few.
        Box::pin(async move { Ok(vec![vec![1.0]; texts.len().saturating_sub(1)]) })
    }
    fn embedding_model(&self) -> &str {
        "flaky"
    }
    fn embedding_dim(&self) -> usize {
        1
    }
    fn set_retry_hook(&self, hook: RetryHook) {
        *self.hook.lock().expect("lock") = Some(hook);
    }
}

#[test]
fn errors_and_transport_retries_are_counted_and_errors_not_cached() {
    let backend = Arc::new(FlakyBackend::default());
    let client = LlmClient::new(backend.clone());
    let request = ChatRequest::new("k", "p").with_temperature(0.0);
    let err = block_on(client.chat(request.clone())).expect_err("first call fails");
    assert_eq!(
        err,
        LlmError::Status {
            status: 503,
            message: "busy".into()
        }
    );
    let ok = block_on(client.chat(request.clone())).expect("second call succeeds");
    assert_eq!(ok.text, "ok");
    block_on(client.chat(request)).expect("cached");
    assert_eq!(
        backend.calls.load(Ordering::SeqCst),
        2,
        "the error was not cached; the answer was"
    );
    let usage = client.usage().kind("k");
    assert_eq!(
        (
            usage.calls,
            usage.errors,
            usage.transport_retries,
            usage.cache_hits
        ),
        (2, 1, 2, 1)
    );
    assert_eq!(usage.prompt_tokens, 5);

    let err = block_on(client.embed(vec!["a".into(), "b".into()])).expect_err("short answer");
    assert!(matches!(err, LlmError::Malformed(_)), "{err:?}");
    assert_eq!(client.usage().kind("embed").errors, 1);

    let unsupported = block_on(client.score_choices(ChoiceRequest {
        kind: "pick".into(),
        messages: Vec::new(),
        options: vec!["a".into()],
        affinity: None,
        about: None,
        option_phrases: Vec::new(),
    }));
    assert_eq!(unsupported, Err(LlmError::Unsupported("choice scoring")));
    assert!(!client.supports_choice_scoring());
}

#[test]
fn choice_scores_come_from_the_backend_and_are_cached() {
    let backend = Arc::new(ScriptedBackend::new(0).with_chooser("yes_no", |_, _| vec![0.25, -1.0]));
    let client = LlmClient::new(backend.clone());
    assert!(client.supports_choice_scoring());
    let request = ChoiceRequest {
        kind: "yes_no".into(),
        messages: vec![bevy_generative_agents::llm::ChatMessage::user(
            "Should Klaus talk to Maria?",
        )],
        options: vec!["yes".into(), "no".into()],
        affinity: None,
        about: None,
        option_phrases: Vec::new(),
    };
    assert_eq!(
        block_on(client.score_choices(request.clone())),
        Ok(vec![0.25, -1.0])
    );
    assert_eq!(
        block_on(client.score_choices(request)),
        Ok(vec![0.25, -1.0])
    );
    assert_eq!(backend.score_calls(), 1);
    assert_eq!(client.usage().kind("yes_no").cache_hits, 1);

    let overlap = ChoiceRequest {
        kind: "where".into(),
        messages: vec![bevy_generative_agents::llm::ChatMessage::user(
            "Klaus reads in the library",
        )],
        options: vec!["the park".into(), "the library".into()],
        affinity: None,
        about: None,
        option_phrases: Vec::new(),
    };
    let scores = block_on(client.score_choices(overlap)).expect("scores");
    assert!(scores[1] > scores[0], "{scores:?}");
}

#[test]
fn streaming_through_the_client() {
    let backend = Arc::new(ScriptedBackend::new(0).with_answer("talk", "Hi there, Maria!"));
    let client = LlmClient::new(backend.clone());
    let request = ChatRequest::new("talk", "greet").with_temperature(0.0);
    let (tx, rx) = async_channel::bounded(64);
    let response = block_on(client.chat_stream(request.clone(), tx)).expect("stream");
    let deltas: Vec<String> = std::iter::from_fn(|| rx.try_recv().ok()).collect();
    assert_eq!(deltas, vec!["Hi ", "there, ", "Maria!"]);
    assert_eq!(response.text, "Hi there, Maria!");

    let (tx, rx) = async_channel::bounded(64);
    block_on(client.chat_stream(request, tx)).expect("cached stream");
    let deltas: Vec<String> = std::iter::from_fn(|| rx.try_recv().ok()).collect();
    assert_eq!(
        deltas,
        vec!["Hi there, Maria!"],
        "a cached answer arrives as one delta"
    );
    assert_eq!(backend.chat_calls(), 1);
}

fn answers_in_order(backend: Arc<ScriptedBackend>, prompts: &[String]) -> HashMap<String, String> {
    let client = LlmClient::builder(backend)
        .cache_policy(CachePolicy::Off)
        .concurrency(4)
        .build()
        .expect("client");
    let results = Mutex::new(HashMap::new());
    std::thread::scope(|scope| {
        for prompt in prompts {
            let client = client.clone();
            let results = &results;
            scope.spawn(move || {
                let answer = block_on(client.chat(ChatRequest::new("roll", prompt.clone())))
                    .expect("answer");
                results
                    .lock()
                    .expect("lock")
                    .insert(prompt.clone(), answer.text);
            });
        }
    });
    results.into_inner().expect("lock")
}

#[test]
fn scripted_answers_do_not_depend_on_call_order() {
    let roll = |_: &ChatRequest, rng: &mut bevy_generative_agents::llm::ScriptRng| {
        rng.random_range(0..1_000_000u32).to_string()
    };
    let prompts: Vec<String> = (0..24).map(|i| format!("persona {i} wonders")).collect();
    let mut reversed = prompts.clone();
    reversed.reverse();
    let a = answers_in_order(
        Arc::new(ScriptedBackend::new(5).with_responder("roll", roll)),
        &prompts,
    );
    let b = answers_in_order(
        Arc::new(ScriptedBackend::new(5).with_responder("roll", roll)),
        &reversed,
    );
    assert_eq!(a.len(), 24);
    assert_eq!(a, b);
    let distinct: std::collections::HashSet<_> = a.values().collect();
    assert!(distinct.len() > 20, "answers depend on the prompt");
    let c = answers_in_order(
        Arc::new(ScriptedBackend::new(6).with_responder("roll", roll)),
        &prompts,
    );
    assert_ne!(a, c, "and on the seed");
}

#[test]
fn faulty_backend_corrupts_roughly_the_configured_fraction_deterministically() {
    let good = r#"{"hour": 7}"#;
    let prompts: Vec<String> = (0..1000).map(|i| format!("prompt {i}")).collect();
    let run = |order: &[String]| {
        let inner = Arc::new(ScriptedBackend::new(0).with_answer("k", good));
        let faulty = Arc::new(FaultyBackend::new(inner, 0.3, 42));
        let mut out = HashMap::new();
        for prompt in order {
            let response = block_on(faulty.chat(ChatRequest::new("k", prompt.clone())))
                .expect("garbage faults only");
            out.insert(prompt.clone(), response.text);
        }
        (out, faulty.injected_total(), faulty.injected())
    };
    let (answers, injected, by_kind) = run(&prompts);
    assert!(
        (250..=350).contains(&injected),
        "injected {injected} of 1000 at fraction 0.3"
    );
    let corrupted = answers.values().filter(|text| *text != good).count() as u64;
    assert_eq!(
        corrupted, injected,
        "every injected fault changes the answer"
    );
    for fault in Fault::GARBAGE {
        assert!(
            by_kind.get(&fault).copied().unwrap_or(0) > 10,
            "{fault:?} is drawn: {by_kind:?}"
        );
    }
    assert!(!by_kind.contains_key(&Fault::Error));

    let mut reversed = prompts.clone();
    reversed.reverse();
    let (answers_reversed, injected_reversed, _) = run(&reversed);
    assert_eq!(injected_reversed, injected);
    assert_eq!(
        answers_reversed, answers,
        "same seed, same corrupted calls, whatever the order"
    );
}

#[test]
fn faulty_backend_redraws_on_retry_and_can_inject_errors() {
    let inner = Arc::new(ScriptedBackend::new(0).with_answer("k", "fine"));
    let faulty = FaultyBackend::new(inner.clone(), 0.5, 1);
    let texts: Vec<String> = (0..40)
        .map(|_| {
            block_on(faulty.chat(ChatRequest::new("k", "same prompt")))
                .expect("text")
                .text
        })
        .collect();
    assert!(texts.iter().any(|t| t == "fine") && texts.iter().any(|t| t != "fine"));

    let errors = FaultyBackend::new(inner, 1.0, 1).with_faults([Fault::Error]);
    let err = block_on(errors.chat(ChatRequest::new("k", "p"))).expect_err("always fails");
    assert!(err.is_transient());
    let none = FaultyBackend::new(
        Arc::new(ScriptedBackend::new(0).with_answer("k", "fine")),
        0.0,
        1,
    );
    for i in 0..50 {
        assert_eq!(
            block_on(none.chat(ChatRequest::new("k", format!("{i}"))))
                .expect("text")
                .text,
            "fine"
        );
    }
    assert_eq!(none.injected_total(), 0);
}

#[test]
fn cache_file_persists_across_clients_and_feeds_replay() {
    let dir = temp_dir("persist");
    let path = dir.join("responses.jsonl");
    let request = ChatRequest::new("fixed", "remember me");
    {
        let backend = scripted(0);
        let client = LlmClient::builder(backend.clone())
            .cache_policy(CachePolicy::Always)
            .cache_file(&path)
            .build()
            .expect("client");
        block_on(client.chat(request.clone())).expect("answer");
        block_on(client.embed(vec!["a memory".into()])).expect("embed");
        assert_eq!(client.cache().len(), 2);
    }
    let lines = std::fs::read_to_string(&path).expect("file");
    assert_eq!(lines.lines().count(), 2);

    let backend = scripted(0);
    let client = LlmClient::builder(backend.clone())
        .cache_policy(CachePolicy::Always)
        .cache_file(&path)
        .build()
        .expect("client");
    assert_eq!(
        block_on(client.chat(request.clone())).expect("cached").text,
        "abcdefgh"
    );
    block_on(client.embed(vec!["a memory".into()])).expect("cached");
    assert_eq!(backend.total_calls(), 0, "a rerun costs nothing");

    let replay = Arc::new(ReplayBackend::open(&path).expect("replay"));
    assert_eq!(replay.model(), "scripted");
    assert_eq!(replay.embedding_dim(), 384);
    let client = LlmClient::new(replay);
    assert_eq!(
        block_on(client.chat(request)).expect("replayed").text,
        "abcdefgh"
    );
    assert_eq!(
        block_on(client.embed_one("a memory")).expect("replayed"),
        hashed_bow_embedding("a memory", 384)
    );
    let missing = block_on(client.chat(ChatRequest::new("fixed", "never asked")));
    assert!(
        matches!(missing, Err(LlmError::Unsupported(_))),
        "{missing:?}"
    );
    assert!(ReplayBackend::open(dir.join("absent.jsonl")).is_err());
    let _ = std::fs::remove_dir_all(&dir);
}

/// A backend whose chat calls each wait for the test to hand them their outcome.
struct GatedBackend {
    calls: AtomicU64,
    gate: async_channel::Receiver<Result<ChatResponse, LlmError>>,
}

impl LlmBackend for GatedBackend {
    fn name(&self) -> &str {
        "gated"
    }
    fn model(&self) -> &str {
        "gated"
    }
    fn chat(&self, _request: ChatRequest) -> BoxFuture<'_, Result<ChatResponse, LlmError>> {
        Box::pin(async move {
            self.calls.fetch_add(1, Ordering::SeqCst);
            self.gate
                .recv()
                .await
                .unwrap_or_else(|_| Err(LlmError::Connection("gate closed".into())))
        })
    }
    fn embed(&self, texts: Vec<String>) -> BoxFuture<'_, Result<Vec<Vec<f32>>, LlmError>> {
        Box::pin(async move { Ok(vec![vec![1.0]; texts.len()]) })
    }
    fn embedding_model(&self) -> &str {
        "gated"
    }
    fn embedding_dim(&self) -> usize {
        1
    }
}

#[test]
fn an_identical_deterministic_request_in_flight_is_asked_once() {
    use bevy::tasks::futures_lite::future::poll_once;
    let (open, gate) = async_channel::unbounded();
    let backend = Arc::new(GatedBackend {
        calls: AtomicU64::new(0),
        gate,
    });
    let client = LlmClient::new(backend.clone());
    let answer = |text: &str| ChatResponse {
        text: text.into(),
        usage: TokenUsage::default(),
    };
    let same = ChatRequest::new("k", "where is the cafe?").with_temperature(0.0);
    let sampled = ChatRequest::new("k", "where is the cafe?").with_temperature(0.9);

    let mut first = Box::pin(client.ask(same.clone()));
    let mut second = Box::pin(client.ask(same.clone()));
    let mut free = Box::pin(client.ask(sampled));
    for pending in [first.as_mut(), second.as_mut(), free.as_mut()] {
        assert!(block_on(poll_once(pending)).is_none());
    }
    assert_eq!(
        backend.calls.load(Ordering::SeqCst),
        2,
        "the second copy waits; a sampled request always asks"
    );
    open.try_send(Ok(answer("by the park"))).expect("gate");
    open.try_send(Ok(answer("sampled"))).expect("gate");
    let first = block_on(first).expect("answer");
    let second = block_on(second).expect("answer");
    assert_eq!(first.response.text, "by the park");
    assert_eq!(second.response, first.response);
    assert!(!first.from_cache() && second.from_cache());
    assert_eq!(block_on(free).expect("answer").response.text, "sampled");
    let usage = client.usage().kind("k");
    assert_eq!((usage.calls, usage.cache_hits), (2, 1));

    // The leader fails: its follower asks the backend itself (and gets its own answer).
    let other = ChatRequest::new("k", "who runs the cafe?").with_temperature(0.0);
    let mut leader = Box::pin(client.ask(other.clone()));
    let mut follower = Box::pin(client.ask(other));
    assert!(block_on(poll_once(leader.as_mut())).is_none());
    assert!(block_on(poll_once(follower.as_mut())).is_none());
    assert_eq!(backend.calls.load(Ordering::SeqCst), 3);
    open.try_send(Err(LlmError::Status {
        status: 500,
        message: "oops".into(),
    }))
    .expect("gate");
    open.try_send(Ok(answer("Isabella"))).expect("gate");
    assert!(block_on(leader).is_err());
    assert_eq!(
        block_on(follower).expect("asked again").response.text,
        "Isabella"
    );
    assert_eq!(backend.calls.load(Ordering::SeqCst), 4);

    // A cancelled leader does not strand its follower either.
    let third = ChatRequest::new("k", "when does it open?").with_temperature(0.0);
    let mut leader = Box::pin(client.ask(third.clone()));
    let mut follower = Box::pin(client.ask(third));
    assert!(block_on(poll_once(leader.as_mut())).is_none());
    assert!(block_on(poll_once(follower.as_mut())).is_none());
    drop(leader);
    open.try_send(Ok(answer("at eight"))).expect("gate");
    assert_eq!(
        block_on(follower).expect("answer").response.text,
        "at eight"
    );
    assert_eq!(client.in_flight(), 0);
}
