//! The OpenAI-compatible HTTP backend against a real HTTP server on loopback.
//!
//! The server is a small OpenAI-compatible fake written here on tokio's `TcpListener`: it
//! parses each request (line, headers, body), records it, and answers as the test's scenario
//! says — JSON, errors with `Retry-After`, SSE streams, or a hang. One request per connection
//! (`Connection: close`); every accept loop stops by itself after a few idle seconds.
#![cfg(feature = "http")]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bevy::tasks::block_on;
use bevy_generative_agents::llm::{
    ApiKey, ChatMessage, ChatRequest, HttpBackend, HttpConfig, LlmBackend, LlmClient, LlmError,
};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const SECRET: &str = "sk-test-SECRET-0123456789";

/// One request as the server saw it.
#[derive(Debug, Clone)]
struct Recorded {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: String,
}

impl Recorded {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.body).expect("request body is JSON")
    }
}

/// How the fake server answers one request.
enum Reply {
    /// A complete response.
    Full {
        status: u16,
        headers: Vec<(&'static str, String)>,
        body: String,
    },
    /// A `text/event-stream` body written in these raw pieces, with a pause between them.
    Sse(Vec<String>),
    /// Read the request, then say nothing for this long and close.
    Hang(Duration),
}

fn ok_json(body: Value) -> Reply {
    Reply::Full {
        status: 200,
        headers: Vec::new(),
        body: body.to_string(),
    }
}

fn status(status: u16, body: Value) -> Reply {
    Reply::Full {
        status,
        headers: Vec::new(),
        body: body.to_string(),
    }
}

fn completion(text: &str, prompt_tokens: u64, completion_tokens: u64) -> Value {
    json!({
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens, "total_tokens": prompt_tokens + completion_tokens}
    })
}

type Handler = dyn Fn(usize, &Recorded) -> Reply + Send + Sync;

struct FakeServer {
    addr: std::net::SocketAddr,
    requests: Arc<Mutex<Vec<Recorded>>>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl FakeServer {
    /// Starts the server; `handler(n, request)` answers the n-th request (0-based).
    fn start(handler: impl Fn(usize, &Recorded) -> Reply + Send + Sync + 'static) -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("server runtime");
        let listener = runtime
            .block_on(TcpListener::bind("127.0.0.1:0"))
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let requests = Arc::new(Mutex::new(Vec::new()));
        let handler: Arc<Handler> = Arc::new(handler);
        let recorded = Arc::clone(&requests);
        runtime.spawn(async move {
            // Stops by itself once no client has connected for a while.
            while let Ok(Ok((stream, _))) =
                tokio::time::timeout(Duration::from_secs(10), listener.accept()).await
            {
                let handler = Arc::clone(&handler);
                let recorded = Arc::clone(&recorded);
                tokio::spawn(async move {
                    let _ = serve(stream, handler, recorded).await;
                });
            }
        });
        Self {
            addr,
            requests,
            runtime: Some(runtime),
        }
    }

    fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().expect("lock").clone()
    }

    fn count(&self) -> usize {
        self.requests.lock().expect("lock").len()
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

async fn serve(
    mut stream: TcpStream,
    handler: Arc<Handler>,
    recorded: Arc<Mutex<Vec<Recorded>>>,
) -> std::io::Result<()> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let header_end = loop {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(pos) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break pos + 4;
        }
        if buf.len() > 1 << 20 {
            return Ok(());
        }
    };
    let head = String::from_utf8_lossy(&buf[..header_end]).to_string();
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or_default();
    let mut parts = request_line.split(' ');
    let method = parts.next().unwrap_or_default().to_owned();
    let path = parts.next().unwrap_or_default().to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[header_end..].to_vec();
    while body.len() < length {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    let request = Recorded {
        method,
        path,
        headers,
        body: String::from_utf8_lossy(&body).to_string(),
    };
    let index = {
        let mut all = recorded.lock().expect("lock");
        all.push(request.clone());
        all.len() - 1
    };
    match handler(index, &request) {
        Reply::Full {
            status,
            headers,
            body,
        } => {
            let mut response = format!(
                "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
                body.len()
            );
            for (name, value) in headers {
                response.push_str(&format!("{name}: {value}\r\n"));
            }
            response.push_str("\r\n");
            response.push_str(&body);
            stream.write_all(response.as_bytes()).await?;
        }
        Reply::Sse(pieces) => {
            stream
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n")
                .await?;
            for piece in pieces {
                stream.write_all(piece.as_bytes()).await?;
                stream.flush().await?;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        Reply::Hang(duration) => tokio::time::sleep(duration).await,
    }
    stream.shutdown().await
}

fn config(server: &FakeServer) -> HttpConfig {
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

fn backend(server: &FakeServer) -> HttpBackend {
    HttpBackend::new(config(server)).expect("backend")
}

#[test]
fn success_parses_content_and_usage_and_sends_the_request() {
    let server = FakeServer::start(|_, _| ok_json(completion("Wake up at 7am.", 42, 6)));
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
    let body = seen.json();
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
    let server = FakeServer::start(|_, _| ok_json(completion("{\"hour\": 7}", 1, 1)));
    let backend = backend(&server);
    let schema = json!({"type": "object", "properties": {"hour": {"type": "integer"}}, "required": ["hour"]});
    let request = ChatRequest::new("wake up hour", "When?").with_json_schema(schema.clone());
    block_on(backend.chat(request)).expect("answer");
    let body = server.requests()[0].json();
    assert_eq!(
        body["response_format"],
        json!({"type": "json_schema", "json_schema": {"name": "wake_up_hour", "schema": schema, "strict": true}})
    );
}

#[test]
fn response_format_rejections_step_down_and_are_remembered() {
    // Accepts only `json_object`; rejects any schema format like an older server would.
    let server = FakeServer::start(|_, request| {
        let body = request.json();
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
        .map(|r| r.json()["response_format"].clone())
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
        requests[3].json()["response_format"],
        json!({"type": "json_object"})
    );
}

#[test]
fn rate_limit_honours_retry_after_and_counts_the_retry() {
    let server = FakeServer::start(|n, _| {
        if n == 0 {
            Reply::Full {
                status: 429,
                headers: vec![("Retry-After", "1".into())],
                body: json!({"error": {"message": "slow down"}}).to_string(),
            }
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
    assert_eq!(server.count(), 2);
    let usage = client.usage().kind("plan");
    assert_eq!(
        (usage.calls, usage.transport_retries, usage.errors),
        (1, 1, 0)
    );
}

#[test]
fn server_error_then_success() {
    let server = FakeServer::start(|n, _| {
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
    assert_eq!(server.count(), 2);
    assert_eq!(*retries.lock().expect("lock"), vec!["react".to_owned()]);
}

#[test]
fn persistent_server_errors_fail_after_max_retries() {
    let server = FakeServer::start(|_, _| status(503, json!({"error": {"message": "overloaded"}})));
    let client = LlmClient::new(Arc::new(backend(&server)));
    let err = block_on(client.chat(ChatRequest::new("k", "p"))).expect_err("gives up");
    assert_eq!(
        err,
        LlmError::Status {
            status: 503,
            message: "overloaded".into()
        }
    );
    assert_eq!(server.count(), 3, "max_retries = 2 → three attempts");
    let usage = client.usage().kind("k");
    assert_eq!(
        (usage.calls, usage.errors, usage.transport_retries),
        (1, 1, 2)
    );
}

#[test]
fn client_errors_fail_immediately() {
    let server = FakeServer::start(|_, _| {
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
    assert_eq!(server.count(), 1);
}

#[test]
fn hanging_server_times_out() {
    let server = FakeServer::start(|_, _| Reply::Hang(Duration::from_secs(3)));
    let backend = HttpBackend::new(HttpConfig {
        timeout: Duration::from_millis(300),
        max_retries: 1,
        ..config(&server)
    })
    .expect("backend");
    let err = block_on(backend.chat(ChatRequest::new("k", "p"))).expect_err("times out");
    assert_eq!(err, LlmError::Timeout(Duration::from_millis(300)));
    assert_eq!(server.count(), 2, "a timeout is transient: retried once");
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
    let server = FakeServer::start(move |_, _| {
        let first = event("Good ");
        let (head, tail) = first.split_at(9); // split inside the JSON
        Reply::Sse(vec![
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
    let body = server.requests()[0].json();
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
}

#[test]
fn streaming_request_answered_without_sse_arrives_whole() {
    let server = FakeServer::start(|_, _| ok_json(completion("all at once", 2, 3)));
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
    let server = FakeServer::start(|_, _| Reply::Full {
        status: 200,
        headers: Vec::new(),
        body: "this is not json {".into(),
    });
    let backend = backend(&server);
    let err = block_on(backend.chat(ChatRequest::new("k", "p"))).expect_err("malformed");
    assert!(matches!(err, LlmError::Malformed(_)), "{err:?}");
    assert_eq!(server.count(), 1);

    let server = FakeServer::start(|_, _| ok_json(json!({"choices": []})));
    let err =
        block_on(super_backend(&server).chat(ChatRequest::new("k", "p"))).expect_err("no choices");
    assert!(matches!(err, LlmError::Malformed(_)), "{err:?}");
}

fn super_backend(server: &FakeServer) -> HttpBackend {
    backend(server)
}

#[test]
fn embeddings_are_ordered_by_index_and_dimension_is_learned() {
    let server = FakeServer::start(|_, request| {
        let body = request.json();
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
        seen.json(),
        json!({"model": "embedder", "input": ["a", "b", "c"]})
    );
    assert!(
        block_on(backend.embed(Vec::new()))
            .expect("empty")
            .is_empty()
    );
    assert_eq!(server.count(), 1, "an empty batch sends nothing");
}

#[test]
fn configured_embedding_dimension_is_enforced() {
    let server =
        FakeServer::start(|_, _| ok_json(json!({"data": [{"index": 0, "embedding": [1.0, 2.0]}]})));
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
    let server = FakeServer::start(|n, _| match n {
        0 => status(
            401,
            json!({"error": {"message": format!("Incorrect API key provided: {SECRET}")}}),
        ),
        1 => ok_json(json!({"error": {"message": format!("key {SECRET} is out of credit")}})),
        _ => Reply::Sse(vec![format!(
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
