//! The OpenAI-compatible HTTP backend against a real HTTP server on loopback.
//!
//! The server is the crate's loopback fake ([`FakeOpenAi`]): each test scripts its replies —
//! JSON, errors with `Retry-After`, SSE streams, bodies that are not JSON, or a hang — and
//! inspects the requests it recorded. The last tests use the fake's own routes (answer closure,
//! embeddings, latency, counters) the way the concurrency benchmark does.
#![cfg(feature = "http")]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bevy::tasks::block_on;
use bevy_generative_agents::llm::{
    ApiKey, ChatMessage, ChatRequest, HttpBackend, HttpConfig, LlmBackend, LlmClient, LlmError,
};
use bevy_generative_agents::testing::fake_openai::{
    FakeOpenAi, FakeOpenAiConfig, FakeReply, RecordedRequest, base64_of, completion_json,
    mixed_case_escapes,
};
use serde_json::{Value, json};

const SECRET: &str = "sk-test-SECRET-0123456789";

fn ok_json(body: Value) -> FakeReply {
    FakeReply::json(200, &body)
}

fn status(status: u16, body: Value) -> FakeReply {
    FakeReply::json(status, &body)
}

fn completion(text: &str, prompt_tokens: u64, completion_tokens: u64) -> Value {
    completion_json(text, prompt_tokens, completion_tokens)
}

/// Starts a fake whose `handler(n, request)` answers the n-th request (0-based); SSE pieces
/// arrive 20 ms apart so the client sees them split.
fn start(
    handler: impl Fn(usize, &RecordedRequest) -> FakeReply + Send + Sync + 'static,
) -> FakeOpenAi {
    FakeOpenAi::start(
        FakeOpenAiConfig::new(|_| String::new())
            .with_sse_pause(Duration::from_millis(20))
            .with_script(move |n, request| Some(handler(n, request))),
    )
    .expect("fake server starts")
}

fn config(server: &FakeOpenAi) -> HttpConfig {
    HttpConfig {
        api_key: Some(ApiKey::new(SECRET)),
        embed_model: "embedder".into(),
        max_retries: 2,
        backoff_base: Duration::from_millis(10),
        backoff_max: Duration::from_millis(50),
        timeout: Duration::from_secs(10),
        connect_timeout: Duration::from_secs(2),
        worker_threads: 1,
        ..HttpConfig::new(server.base_url(), "test-model")
    }
}

fn backend(server: &FakeOpenAi) -> HttpBackend {
    HttpBackend::new(config(server)).expect("backend")
}

#[test]
fn success_parses_content_and_usage_and_sends_the_request() {
    let server = start(|_, _| ok_json(completion("Wake up at 7am.", 42, 6)));
    let backend = backend(&server);
    let request = ChatRequest {
        messages: vec![
            ChatMessage::system("You are Klaus."),
            ChatMessage::user("When do you wake up?"),
        ],
        seed: Some(11),
        ..ChatRequest::new("wake_up_hour", "")
    }
    .with_max_tokens(20)
    .with_temperature(0.0)
    .with_stop(["\n"]);
    let response = block_on(backend.chat(request)).expect("answer");
    assert_eq!(response.text, "Wake up at 7am.");
    assert_eq!(
        (
            response.usage.prompt_tokens,
            response.usage.completion_tokens
        ),
        (42, 6)
    );

    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let seen = &requests[0];
    assert_eq!(
        (seen.method.as_str(), seen.path.as_str()),
        ("POST", "/v1/chat/completions")
    );
    assert_eq!(
        seen.header("authorization"),
        Some(format!("Bearer {SECRET}").as_str())
    );
    let body = seen.json().expect("JSON body");
    assert_eq!(body["model"], "test-model");
    assert_eq!(
        body["messages"],
        json!([{"role": "system", "content": "You are Klaus."}, {"role": "user", "content": "When do you wake up?"}])
    );
    assert_eq!(body["max_tokens"], 20);
    assert_eq!(body["temperature"], 0.0);
    assert_eq!(body["top_p"], 1.0);
    assert_eq!(body["stop"], json!(["\n"]));
    assert_eq!(body["seed"], 11);
    assert_eq!(body["stream"], false);
    assert!(body.get("response_format").is_none());
    assert_eq!(backend.name(), "http");
    assert_eq!(backend.model(), "test-model");
}

#[test]
fn json_schema_is_sent_as_response_format() {
    let server = start(|_, _| ok_json(completion("{\"hour\": 7}", 1, 1)));
    let backend = backend(&server);
    let schema = json!({"type": "object", "properties": {"hour": {"type": "integer"}}, "required": ["hour"]});
    let request = ChatRequest::new("wake up hour", "When?").with_json_schema(schema.clone());
    block_on(backend.chat(request)).expect("answer");
    let body = server.requests()[0].json().expect("JSON body");
    assert_eq!(
        body["response_format"],
        json!({"type": "json_schema", "json_schema": {"name": "wake_up_hour", "schema": schema, "strict": true}})
    );
}

#[test]
fn response_format_rejections_step_down_and_are_remembered() {
    // Accepts only `json_object`; rejects any schema format like an older server would.
    let server = start(|_, request| {
        let body = request.json().expect("JSON body");
        match body["response_format"]["type"].as_str() {
            Some("json_schema") => status(
                400,
                json!({"error": {"message": "response_format json_schema is not supported"}}),
            ),
            _ => ok_json(completion("{}", 1, 1)),
        }
    });
    let backend = backend(&server);
    let request = ChatRequest::new("k", "p").with_json_schema(json!({"type": "object"}));
    block_on(backend.chat(request.clone())).expect("answer after stepping down");
    let formats: Vec<Value> = server
        .requests()
        .iter()
        .map(|r| r.json().expect("JSON body")["response_format"].clone())
        .collect();
    assert_eq!(formats.len(), 3);
    assert_eq!(formats[0]["json_schema"]["strict"], true);
    assert_eq!(formats[1]["type"], "json_schema");
    assert!(formats[1]["json_schema"].get("strict").is_none());
    assert_eq!(formats[2], json!({"type": "json_object"}));

    block_on(backend.chat(request)).expect("answer");
    let requests = server.requests();
    assert_eq!(requests.len(), 4, "the working format is remembered");
    assert_eq!(
        requests[3].json().expect("JSON body")["response_format"],
        json!({"type": "json_object"})
    );
}

#[test]
fn rate_limit_honours_retry_after_and_counts_the_retry() {
    let server = start(|n, _| {
        if n == 0 {
            FakeReply::rate_limited(1)
        } else {
            ok_json(completion("fine", 3, 1))
        }
    });
    let client = LlmClient::new(Arc::new(backend(&server)));
    let start = Instant::now();
    let response =
        block_on(client.chat(ChatRequest::new("plan", "p"))).expect("answer after one retry");
    assert_eq!(response.text, "fine");
    assert!(
        start.elapsed() >= Duration::from_millis(950),
        "waited for Retry-After: {:?}",
        start.elapsed()
    );
    assert_eq!(server.calls(), 2);
    let usage = client.usage().kind("plan");
    assert_eq!(
        (usage.calls, usage.transport_retries, usage.errors),
        (1, 1, 0)
    );
}

#[test]
fn server_error_then_success() {
    let server = start(|n, _| {
        if n == 0 {
            status(500, json!({"error": "boom"}))
        } else {
            ok_json(completion("recovered", 1, 1))
        }
    });
    let retries = Arc::new(Mutex::new(Vec::<String>::new()));
    let backend = backend(&server);
    let seen = Arc::clone(&retries);
    backend.set_retry_hook(Arc::new(move |kind: &str| {
        seen.lock().expect("lock").push(kind.to_owned())
    }));
    let response = block_on(backend.chat(ChatRequest::new("react", "p"))).expect("answer");
    assert_eq!(response.text, "recovered");
    assert_eq!(server.calls(), 2);
    assert_eq!(*retries.lock().expect("lock"), vec!["react".to_owned()]);
}

#[test]
fn persistent_server_errors_fail_after_max_retries() {
    let server = start(|_, _| status(503, json!({"error": {"message": "overloaded"}})));
    let client = LlmClient::new(Arc::new(backend(&server)));
    let err = block_on(client.chat(ChatRequest::new("k", "p"))).expect_err("gives up");
    assert_eq!(
        err,
        LlmError::Status {
            status: 503,
            message: "overloaded".into()
        }
    );
    assert_eq!(server.calls(), 3, "max_retries = 2 → three attempts");
    let usage = client.usage().kind("k");
    assert_eq!(
        (usage.calls, usage.errors, usage.transport_retries),
        (1, 1, 2)
    );
}

#[test]
fn client_errors_fail_immediately() {
    let server = start(|_, _| {
        status(
            404,
            json!({"error": {"message": "model `test-model` not found"}}),
        )
    });
    let backend = backend(&server);
    let err = block_on(backend.chat(ChatRequest::new("k", "p"))).expect_err("404");
    assert_eq!(
        err,
        LlmError::Status {
            status: 404,
            message: "model `test-model` not found".into()
        }
    );
    assert!(!err.is_transient());
    assert_eq!(server.calls(), 1);
}

#[test]
fn hanging_server_times_out() {
    let server = start(|_, _| FakeReply::Hang(Duration::from_secs(3)));
    let backend = HttpBackend::new(HttpConfig {
        timeout: Duration::from_millis(300),
        max_retries: 1,
        ..config(&server)
    })
    .expect("backend");
    let err = block_on(backend.chat(ChatRequest::new("k", "p"))).expect_err("times out");
    assert_eq!(err, LlmError::Timeout(Duration::from_millis(300)));
    assert_eq!(server.calls(), 2, "a timeout is transient: retried once");
}

#[test]
fn connection_refused_is_a_connection_error() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port();
    // The listener is dropped: nothing listens on `port` any more.
    let backend = HttpBackend::new(HttpConfig {
        api_key: Some(ApiKey::new(SECRET)),
        max_retries: 1,
        backoff_base: Duration::from_millis(5),
        ..HttpConfig::new(format!("http://127.0.0.1:{port}/v1"), "m")
    })
    .expect("backend");
    let err = block_on(backend.chat(ChatRequest::new("k", "p"))).expect_err("refused");
    assert!(matches!(err, LlmError::Connection(_)), "{err:?}");
    assert!(!err.to_string().contains(SECRET));
    assert!(
        !err.to_string().contains("127.0.0.1"),
        "no URLs in errors: {err}"
    );
}

#[test]
fn streaming_delivers_deltas_in_order() {
    let event = |content: &str| {
        format!(
            "data: {}\n\n",
            json!({"choices": [{"index": 0, "delta": {"content": content}}]})
        )
    };
    let server = start(move |_, _| {
        let first = event("Good ");
        let (head, tail) = first.split_at(9); // split inside the JSON
        FakeReply::Sse(vec![
            format!(
                "data: {}\n\n",
                json!({"choices": [{"index": 0, "delta": {"role": "assistant"}}]})
            ),
            head.to_owned(),
            tail.to_owned(),
            ": a comment\r\n\r\n".to_owned(),
            event("morning, "),
            event("Isabella!"),
            format!(
                "data: {}\n\n",
                json!({"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 4}})
            ),
            "data: [DONE]\n\n".to_owned(),
        ])
    });
    let backend = backend(&server);
    let (tx, rx) = async_channel::bounded(16);
    let response =
        block_on(backend.chat_stream(ChatRequest::new("chat", "greet"), tx)).expect("stream");
    let deltas: Vec<String> = std::iter::from_fn(|| rx.try_recv().ok()).collect();
    assert_eq!(deltas, vec!["Good ", "morning, ", "Isabella!"]);
    assert_eq!(response.text, "Good morning, Isabella!");
    assert_eq!(
        (
            response.usage.prompt_tokens,
            response.usage.completion_tokens
        ),
        (9, 4)
    );
    let body = server.requests()[0].json().expect("JSON body");
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
}

#[test]
fn streaming_request_answered_without_sse_arrives_whole() {
    let server = start(|_, _| ok_json(completion("all at once", 2, 3)));
    let backend = backend(&server);
    let (tx, rx) = async_channel::bounded(16);
    let response =
        block_on(backend.chat_stream(ChatRequest::new("chat", "x"), tx)).expect("answer");
    assert_eq!(response.text, "all at once");
    assert_eq!(rx.try_recv().ok().as_deref(), Some("all at once"));
    assert!(rx.try_recv().is_err());
}

#[test]
fn bad_json_is_malformed_and_not_retried() {
    let server = start(|_, _| FakeReply::Full {
        status: 200,
        headers: Vec::new(),
        body: "this is not json {".into(),
    });
    let backend = backend(&server);
    let err = block_on(backend.chat(ChatRequest::new("k", "p"))).expect_err("malformed");
    assert!(matches!(err, LlmError::Malformed(_)), "{err:?}");
    assert_eq!(server.calls(), 1);

    let server = start(|_, _| ok_json(json!({"choices": []})));
    let err =
        block_on(super_backend(&server).chat(ChatRequest::new("k", "p"))).expect_err("no choices");
    assert!(matches!(err, LlmError::Malformed(_)), "{err:?}");
}

fn super_backend(server: &FakeOpenAi) -> HttpBackend {
    backend(server)
}

#[test]
fn embeddings_are_ordered_by_index_and_dimension_is_learned() {
    let server = start(|_, request| {
        let body = request.json().expect("JSON body");
        let inputs = body["input"].as_array().cloned().unwrap_or_default();
        // Answer in reverse order, each vector encoding its input's position.
        let data: Vec<Value> = (0..inputs.len())
            .rev()
            .map(|i| json!({"object": "embedding", "index": i, "embedding": [i as f32, 1.0, 0.5]}))
            .collect();
        ok_json(json!({"object": "list", "data": data, "model": "embedder"}))
    });
    let backend = backend(&server);
    assert_eq!(
        backend.embedding_dim(),
        0,
        "unknown before the first answer"
    );
    let vectors = block_on(backend.embed(vec!["a".into(), "b".into(), "c".into()])).expect("embed");
    assert_eq!(
        vectors,
        vec![
            vec![0.0, 1.0, 0.5],
            vec![1.0, 1.0, 0.5],
            vec![2.0, 1.0, 0.5]
        ]
    );
    assert_eq!(backend.embedding_dim(), 3);
    assert_eq!(backend.embedding_model(), "embedder");
    let seen = &server.requests()[0];
    assert_eq!(seen.path, "/v1/embeddings");
    assert_eq!(
        seen.json().expect("JSON body"),
        json!({"model": "embedder", "input": ["a", "b", "c"]})
    );
    assert!(
        block_on(backend.embed(Vec::new()))
            .expect("empty")
            .is_empty()
    );
    assert_eq!(server.calls(), 1, "an empty batch sends nothing");
}

#[test]
fn configured_embedding_dimension_is_enforced() {
    let server = start(|_, _| ok_json(json!({"data": [{"index": 0, "embedding": [1.0, 2.0]}]})));
    let backend = HttpBackend::new(HttpConfig {
        embedding_dim: Some(4),
        ..config(&server)
    })
    .expect("backend");
    assert_eq!(backend.embedding_dim(), 4);
    let err = block_on(backend.embed(vec!["a".into()])).expect_err("wrong dimension");
    assert!(
        err.to_string().contains('2') && err.to_string().contains('4'),
        "{err}"
    );
}

#[test]
fn the_key_never_appears_in_errors_or_debug_output() {
    let server = start(|n, _| match n {
        0 => status(
            401,
            json!({"error": {"message": format!("Incorrect API key provided: {SECRET}")}}),
        ),
        1 => ok_json(json!({"error": {"message": format!("key {SECRET} is out of credit")}})),
        _ => FakeReply::Sse(vec![format!(
            "data: {}\n\n",
            json!({"error": {"message": SECRET}})
        )]),
    });
    let backend = backend(&server);
    let unauthorized = block_on(backend.chat(ChatRequest::new("k", "p"))).expect_err("401");
    assert!(matches!(unauthorized, LlmError::Status { status: 401, .. }));
    let in_body = block_on(backend.chat(ChatRequest::new("k", "p"))).expect_err("error body");
    let (tx, _rx) = async_channel::bounded(4);
    let in_stream =
        block_on(backend.chat_stream(ChatRequest::new("k", "p"), tx)).expect_err("error event");
    for err in [&unauthorized, &in_body, &in_stream] {
        assert!(!err.to_string().contains(SECRET), "{err}");
        assert!(!format!("{err:?}").contains(SECRET), "{err:?}");
    }
    assert!(
        unauthorized
            .to_string()
            .contains("Incorrect API key provided: ***"),
        "{unauthorized}"
    );
    let debug = format!("{backend:?} {:?}", config(&server));
    assert!(!debug.contains(SECRET), "{debug}");
    assert!(debug.contains("ApiKey(***)"));
}

#[test]
fn credentials_in_the_base_url_are_not_displayed() {
    let backend = HttpBackend::new(HttpConfig::new("http://user:pass@127.0.0.1:9/v1/", "m"))
        .expect("backend");
    assert_eq!(backend.base_url(), "http://127.0.0.1:9/v1");
    assert!(HttpBackend::new(HttpConfig::new("ftp://example/v1", "m")).is_err());
    assert!(HttpBackend::new(HttpConfig::new("not a url", "m")).is_err());
}

// --- The fake's own routes, as the concurrency benchmark uses them. ---------------------------

fn plain_backend(server: &FakeOpenAi) -> HttpBackend {
    HttpBackend::new(HttpConfig {
        max_retries: 0,
        worker_threads: 1,
        ..HttpConfig::new(server.base_url(), "fake-model")
    })
    .expect("backend")
}

#[test]
fn default_routes_answer_plain_streamed_and_embedded() {
    // Echoes the last message in capitals, so the answer proves the closure saw the body.
    let server = FakeOpenAi::start(FakeOpenAiConfig::new(|body: &Value| {
        body["messages"]
            .as_array()
            .and_then(|m| m.last())
            .and_then(|m| m["content"].as_str())
            .unwrap_or_default()
            .to_uppercase()
    }))
    .expect("server");
    let backend = plain_backend(&server);

    let plain = block_on(backend.chat(ChatRequest::new("k", "good morning"))).expect("plain");
    assert_eq!(plain.text, "GOOD MORNING");
    // "good morning" is 12 bytes → 3 estimated tokens; the answer likewise.
    assert_eq!(
        (plain.usage.prompt_tokens, plain.usage.completion_tokens),
        (3, 3)
    );

    let (tx, rx) = async_channel::bounded(16);
    let streamed =
        block_on(backend.chat_stream(ChatRequest::new("k", "see you soon"), tx)).expect("stream");
    let deltas: Vec<String> = std::iter::from_fn(|| rx.try_recv().ok()).collect();
    assert_eq!(deltas, vec!["SEE ", "YOU ", "SOON"]);
    assert_eq!(streamed.text, "SEE YOU SOON");

    let vectors = block_on(backend.embed(vec!["a cat".into(), "a dog".into()])).expect("embed");
    assert_eq!(
        vectors,
        vec![
            bevy_generative_agents::llm::hashed_bow_embedding("a cat", 384),
            bevy_generative_agents::llm::hashed_bow_embedding("a dog", 384),
        ]
    );

    assert_eq!(
        (
            server.calls(),
            server.chat_calls(),
            server.embedding_calls()
        ),
        (3, 2, 1)
    );
    let paths: Vec<String> = server.requests().into_iter().map(|r| r.path).collect();
    assert_eq!(
        paths,
        [
            "/v1/chat/completions",
            "/v1/chat/completions",
            "/v1/embeddings"
        ]
    );
}

#[test]
fn one_connection_serves_several_requests_and_unknown_routes_are_404() {
    use std::io::{Read, Write};

    let server = FakeOpenAi::start(FakeOpenAiConfig::new(|_: &Value| "hi".into())).expect("server");
    let mut stream = std::net::TcpStream::connect(server.addr()).expect("connect");
    let body = r#"{"messages": [{"role": "user", "content": "hello"}]}"#;
    // Two requests written back to back on one kept-alive connection, then a closing one.
    let requests = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{body}\
         GET /v1/nothing HTTP/1.1\r\nHost: x\r\n\r\n\
         POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 9\r\n\r\n{{\"in\": 1}}",
        body.len()
    );
    stream.write_all(requests.as_bytes()).expect("write");
    let mut answer = String::new();
    stream
        .read_to_string(&mut answer)
        .expect("read until the server closes");
    // Bodies have no trailing newline, so a status line may follow a body on the same line.
    let statuses: Vec<&str> = answer
        .match_indices("HTTP/1.1 ")
        .filter_map(|(at, _)| answer[at..].split("\r\n").next())
        .collect();
    assert_eq!(
        statuses,
        [
            "HTTP/1.1 200 OK",
            "HTTP/1.1 404 Not Found",
            "HTTP/1.1 400 Bad Request"
        ]
    );
    assert!(answer.contains(r#""content":"hi""#), "{answer}");
    assert!(answer.contains("`input` is missing"), "{answer}");
    assert_eq!(
        (
            server.calls(),
            server.chat_calls(),
            server.embedding_calls()
        ),
        (3, 1, 0)
    );
}

#[test]
fn latency_and_peak_concurrency_are_counted() {
    let latency = Duration::from_millis(300);
    let server =
        FakeOpenAi::start(FakeOpenAiConfig::new(|_: &Value| "ok".into()).with_latency(latency))
            .expect("server");
    assert_eq!(server.latency(), latency);
    let client = LlmClient::builder(Arc::new(plain_backend(&server)))
        .concurrency(4)
        .build()
        .expect("client");
    // Eight callers at once through a client that lets four through at a time.
    let threads: Vec<_> = (0..8)
        .map(|i| {
            let client = client.clone();
            std::thread::spawn(move || {
                block_on(client.chat(ChatRequest::new("k", format!("call {i}"))))
            })
        })
        .collect();
    for thread in threads {
        assert_eq!(thread.join().expect("thread").expect("answer").text, "ok");
    }
    assert_eq!(server.calls(), 8);
    assert_eq!(server.in_flight(), 0);
    assert_eq!(server.max_concurrent(), 4, "the client's limit, reached");
    assert!(
        server.busy_time() >= latency * 8,
        "{:?}",
        server.busy_time()
    );
}

#[test]
fn scripted_answers_reach_typed_prompts_over_http() {
    use bevy_generative_agents::cognition::prompts::WakeUpHour;
    use bevy_generative_agents::prompt::{PromptContext, PromptLibrary, run_prompt};
    use bevy_generative_agents::testing::ScriptedBackend;
    use bevy_generative_agents::testing::fake_openai::scripted_answers;

    let library = PromptLibrary::default();
    let script = ScriptedBackend::new(1).with_responder("wake_up_hour", |_, _| "6".into());
    let server = FakeOpenAi::start(FakeOpenAiConfig::new(scripted_answers(script, &library)))
        .expect("server");
    let ctx = PromptContext::new(LlmClient::new(Arc::new(plain_backend(&server))), library);
    let prompt = WakeUpHour {
        identity: "Name: Ada Okafor".into(),
        lifestyle: "Ada is an early riser.".into(),
        first_name: "Ada".into(),
        fail_safe_hour: 9,
    };
    let outcome = block_on(run_prompt(&ctx, &prompt));
    assert_eq!(
        (outcome.value, outcome.fail_safe, outcome.attempts),
        (6, false, 1)
    );
    assert_eq!(server.chat_calls(), 1);
}

#[test]
fn answers_quoting_the_api_key_are_redacted_before_anyone_sees_them() {
    let event = |content: &str| {
        format!(
            "data: {}\n\n",
            json!({"choices": [{"index": 0, "delta": {"content": content}}]})
        )
    };
    let (head, tail) = SECRET.split_at(5);
    let (head, tail) = (head.to_owned(), tail.to_owned());
    let server = start(move |n, _| {
        if n == 0 {
            return ok_json(completion(
                &format!("My key is {SECRET}, and again {SECRET}."),
                3,
                3,
            ));
        }
        // The key split across deltas, and a prefix of it that turns out not to be the key.
        FakeReply::Sse(vec![
            event(&format!("Use {head}")),
            event(&format!("{tail} now; sk-")),
            event("ok"),
            "data: [DONE]\n\n".to_owned(),
        ])
    });
    let backend = backend(&server);
    let answer = block_on(backend.chat(ChatRequest::new("chat", "x"))).expect("chat");
    assert_eq!(answer.text, "My key is ***, and again ***.");

    let (tx, rx) = async_channel::bounded(16);
    let response =
        block_on(backend.chat_stream(ChatRequest::new("chat", "x"), tx)).expect("stream");
    let deltas: Vec<String> = std::iter::from_fn(|| rx.try_recv().ok()).collect();
    assert_eq!(response.text, "Use *** now; sk-ok");
    assert_eq!(deltas.concat(), "Use *** now; sk-ok");
    assert!(
        deltas.iter().all(|d| !d.contains(&SECRET[1..5])),
        "{deltas:?}"
    );
}

/// Issue 48: the key written as JSON `\u` escapes (mixed case, split between deltas), as
/// percent-encoding in a URL or as base64 is redacted from the answer and from every delta:
/// no decoder downstream can put it back together.
#[test]
fn answers_spelling_the_key_in_any_encoding_are_redacted_whole_and_streamed() {
    let escaped = mixed_case_escapes(SECRET);
    let percent: String = SECRET.bytes().map(|b| format!("%{b:02X}")).collect();
    let base64 = base64_of(format!("key={SECRET}").as_bytes());
    let whole = format!(
        r#"{{"action":"finish","message":"Key: {escaped} url https://x.test/?k={percent} b64 {base64}"}}"#
    );
    let event = |content: &str| {
        format!(
            "data: {}\n\n",
            json!({"choices": [{"index": 0, "delta": {"content": content}}]})
        )
    };
    // Cut into seven-byte pieces, so escapes and the key split anywhere.
    let pieces: Vec<String> = whole
        .as_bytes()
        .chunks(7)
        .map(|c| String::from_utf8_lossy(c).into_owned())
        .collect();
    let plain = whole.clone();
    let server = start(move |n, _| {
        if n == 0 {
            return ok_json(completion(&plain, 3, 3));
        }
        let mut events: Vec<String> = pieces.iter().map(|p| event(p)).collect();
        events.push("data: [DONE]\n\n".to_owned());
        FakeReply::Sse(events)
    });
    let backend = backend(&server);
    let decoded = |text: &str| -> String {
        serde_json::from_str::<Value>(text)
            .ok()
            .and_then(|v| v["message"].as_str().map(str::to_owned))
            .unwrap_or_else(|| text.to_owned())
    };
    let answer = block_on(backend.chat(ChatRequest::new("chat", "x"))).expect("chat");
    assert!(!decoded(&answer.text).contains(SECRET), "{}", answer.text);
    assert!(!answer.text.contains(&percent) && !answer.text.contains(&base64[8..20]));
    assert_eq!(answer.text.matches("***").count(), 3, "{}", answer.text);

    let (tx, rx) = async_channel::bounded(64);
    let response =
        block_on(backend.chat_stream(ChatRequest::new("chat", "x"), tx)).expect("stream");
    let deltas: Vec<String> = std::iter::from_fn(|| rx.try_recv().ok()).collect();
    assert_eq!(response.text, answer.text);
    assert_eq!(deltas.concat(), answer.text);
    assert!(!decoded(&deltas.concat()).contains(SECRET));
}

#[test]
fn a_server_echoing_the_key_leaves_it_in_no_file_of_the_run() {
    use bevy_generative_agents::llm::{BackendChoice, LlmConfig};
    use bevy_generative_agents::output::{RunOptions, run};
    use bevy_generative_agents::prompt::PromptLibrary;
    use bevy_generative_agents::testing::fake_openai::scripted_answers;
    use bevy_generative_agents::testing::town_script::town_script_backend;

    let answers = scripted_answers(town_script_backend(3), &PromptLibrary::default());
    // Every answer quotes the key inside its words (JSON answers stay JSON).
    let server = FakeOpenAi::start(FakeOpenAiConfig::new(move |body| {
        answers(body)
            .replace(" the ", &format!(" the {SECRET} "))
            .replace(" a ", &format!(" a {SECRET} "))
    }))
    .expect("server");
    let out = std::env::temp_dir().join(format!("bga-echoed-key-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let mut options = RunOptions::new(2.0, &out)
        .with_backend(BackendChoice::Http)
        .with_personas(2);
    options.report = false;
    options.llm = LlmConfig {
        backend: BackendChoice::Http,
        base_url: Some(server.base_url()),
        api_key: Some(ApiKey::new(SECRET)),
        ..LlmConfig::default()
    };
    let report = run(&options).expect("run");
    assert!(report.save_path.is_some());

    let mut files = vec![out.clone()];
    let (mut checked, mut redactions) = (0, 0);
    while let Some(path) = files.pop() {
        if path.is_dir() {
            files.extend(
                std::fs::read_dir(&path)
                    .expect("dir")
                    .map(|e| e.expect("entry").path()),
            );
            continue;
        }
        let text = String::from_utf8_lossy(&std::fs::read(&path).expect("read")).into_owned();
        assert!(!text.contains(SECRET), "{} holds the key", path.display());
        redactions += text.matches("***").count();
        checked += 1;
    }
    assert!(checked > 10, "{checked} files");
    assert!(redactions > 0, "the answers did quote the key");
    let _ = std::fs::remove_dir_all(&out);
}
