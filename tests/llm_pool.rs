//! A pool of OpenAI-compatible servers (README "Several model servers"), against loopback fakes:
//! configuration errors name their entry, keys go only to their own server, calls spread by
//! weight, affinity keeps a persona on one server, a failing server is ejected and re-admitted
//! by a probe, a 429 slows only its server, and a server killed in the middle of a run (Lockstep
//! and Realtime) costs no stall, no lost call and shows up in `usage.json`.
#![cfg(feature = "http")]

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bevy::tasks::block_on;
use bevy_generative_agents::clock::{SimSpeed, TimeMode};
use bevy_generative_agents::llm::{
    BackendChoice, ChatRequest, ConfigError, EndpointEntry, EndpointUsage, LlmClient, LlmConfig,
    LlmConfigLayer, build_client,
};
use bevy_generative_agents::output::{ProgressWatcher, RunOptions, RunProgress, run};
use bevy_generative_agents::prompt::PromptLibrary;
use bevy_generative_agents::testing::fake_openai::{
    FakeOpenAi, FakeOpenAiConfig, RecordedRequest, scripted_answers,
};
use bevy_generative_agents::testing::town_script::town_script_backend;

const KEY_A: &str = "sk-pool-A-0123456789-SECRET";
const KEY_B: &str = "sk-pool-B-9876543210-SECRET";

fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    move |var| map.get(var).cloned()
}

/// A server answering "ok <prompt>" after `latency`, tagging each request by its prompt.
fn echo_server(latency: Duration) -> FakeOpenAi {
    FakeOpenAi::start(
        FakeOpenAiConfig::new(|body| {
            let prompt = body
                .pointer("/messages/0/content")
                .and_then(|v| v.as_str())
                .unwrap_or_default();
            format!("ok {prompt}")
        })
        .with_latency(latency)
        .with_tagger(|request: &RecordedRequest| {
            let body = request.json().ok()?;
            let prompt = body.pointer("/messages/0/content")?.as_str()?;
            Some(prompt.split(' ').next()?.to_owned())
        }),
    )
    .expect("server")
}

fn pool_config(servers: &[&FakeOpenAi]) -> LlmConfig {
    LlmConfig {
        backend: BackendChoice::Http,
        endpoints: servers
            .iter()
            .map(|s| EndpointEntry::new(s.base_url()))
            .collect(),
        timeout: Duration::from_secs(5),
        connect_timeout: Duration::from_secs(1),
        ..LlmConfig::default()
    }
}

fn endpoint<'a>(usage: &'a [EndpointUsage], server: &FakeOpenAi) -> &'a EndpointUsage {
    usage
        .iter()
        .find(|e| e.url == server.base_url())
        .expect("the server is in the usage")
}

/// Runs `n` calls at once (one thread each), call `i` asking `prompt(i)` keyed by `key(i)`.
fn burst(
    client: &LlmClient,
    n: usize,
    prompt: impl Fn(usize) -> String + Sync,
    key: impl Fn(usize) -> Option<String> + Sync,
) -> Vec<Result<String, String>> {
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..n)
            .map(|i| {
                let client = client.clone();
                let mut request = ChatRequest::new("k", prompt(i));
                request.affinity = key(i);
                scope.spawn(move || {
                    block_on(client.chat(request))
                        .map(|r| r.text)
                        .map_err(|e| e.to_string())
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("no panic"))
            .collect()
    })
}

#[test]
fn configuration_errors_name_the_entry_and_never_the_key() {
    let err = |json: &str, vars: &[(&str, &str)]| -> String {
        let dir = std::env::temp_dir().join(format!(
            "bga-pool-config-{}-{}",
            std::process::id(),
            json.len()
        ));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("llm.json");
        std::fs::write(&path, json).expect("write");
        let result = LlmConfig::resolve(Some(&path), env(vars), LlmConfigLayer::default());
        let _ = std::fs::remove_dir_all(&dir);
        result.expect_err(json).to_string()
    };
    let text = err(r#"{"endpoints": []}"#, &[]);
    assert!(
        text.contains("endpoints") && text.contains("empty"),
        "{text}"
    );
    let text = err(
        r#"{"endpoints": [{"url": "http://127.0.0.1:1/v1"}, {"url": "127.0.0.1:2/v1"}]}"#,
        &[],
    );
    assert!(
        text.contains("endpoints entry 2 (127.0.0.1:2/v1)") && text.contains("http://"),
        "{text}"
    );
    let text = err(
        r#"{"endpoints": [{"url": "http://h:1/v1"}, {"url": "http://H:1/v1/"}]}"#,
        &[],
    );
    assert!(
        text.contains("entry 2") && text.contains("duplicate of entry 1"),
        "{text}"
    );
    let text = err(
        r#"{"endpoints": [{"url": "http://a/v1", "weight": 0}, {"url": "http://b/v1", "weight": 0}]}"#,
        &[],
    );
    assert!(text.contains("every weight is 0"), "{text}");
    let text = err(
        r#"{"endpoints": [{"url": "http://a/v1", "weight": -1}]}"#,
        &[],
    );
    assert!(
        text.contains("entry 1 (http://a/v1)") && text.contains("weight"),
        "{text}"
    );
    // A key variable that is not set names the variable, a URL's credentials are not shown.
    let text = err(
        r#"{"endpoints": [{"url": "http://user:hunter2-pass@a/v1", "api_key_env": "NOPE_KEY"}]}"#,
        &[],
    );
    assert!(
        text.contains("NOPE_KEY") && !text.contains("hunter2"),
        "{text}"
    );
    // The environment's list names itself.
    let env_err = LlmConfig::from_env_with(env(&[("GA_LLM_BASE_URLS", "http://a/v1, ftp://b")]))
        .expect_err("bad url");
    assert!(
        matches!(
            &env_err,
            ConfigError::Endpoint {
                pool: "GA_LLM_BASE_URLS",
                index: 2,
                ..
            }
        ),
        "{env_err}"
    );
    let env_err = LlmConfig::from_env_with(env(&[("GA_LLM_BASE_URLS", " , ")])).expect_err("empty");
    assert!(env_err.to_string().contains("empty"), "{env_err}");
    let env_err =
        LlmConfig::from_env_with(env(&[("GA_LLM_AFFINITY", "sometimes")])).expect_err("switch");
    assert!(env_err.to_string().contains("GA_LLM_AFFINITY"), "{env_err}");

    // A good list from the environment: two servers, the global model, affinity off.
    let config = LlmConfig::from_env_with(env(&[
        (
            "GA_LLM_BASE_URLS",
            "http://127.0.0.1:1/v1,http://127.0.0.1:2/v1",
        ),
        ("GA_LLM_MODEL", "qwen"),
        ("GA_LLM_AFFINITY", "off"),
    ]))
    .expect("config");
    assert_eq!(config.resolved_backend(), BackendChoice::Http);
    assert!(!config.affinity);
    let (chat, embed) = config.pools_with(env(&[])).expect("pools");
    assert_eq!(chat.len(), 2);
    assert!(chat.iter().all(|e| e.model == "qwen" && e.weight == 1.0));
    assert!(embed.is_none());
    // The single-server configuration is a one-entry pool.
    let single = LlmConfig {
        base_url: Some("http://127.0.0.1:3/v1".into()),
        ..LlmConfig::default()
    };
    let (chat, _) = single.pools_with(env(&[])).expect("pool");
    assert_eq!(chat.len(), 1);
    assert!(!single.has_pool());
}

#[test]
fn each_server_gets_only_its_own_key_and_usage_holds_none() {
    let a = echo_server(Duration::ZERO);
    let b = echo_server(Duration::ZERO);
    let json = format!(
        r#"{{"backend": "http", "endpoints": [
            {{"url": "{}", "api_key_env": "POOL_KEY_A", "model": "m-a"}},
            {{"url": "{}", "api_key_env": "POOL_KEY_B", "model": "m-b", "weight": 1}}]}}"#,
        a.base_url(),
        b.base_url()
    );
    let dir = std::env::temp_dir().join(format!("bga-pool-keys-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join("llm.json");
    std::fs::write(&path, json).expect("write");
    // The keys are read when the configuration is resolved, from the variables named.
    let config = LlmConfig::resolve(
        Some(&path),
        env(&[("POOL_KEY_A", KEY_A), ("POOL_KEY_B", KEY_B)]),
        LlmConfigLayer::default(),
    )
    .expect("config");
    let _ = std::fs::remove_dir_all(&dir);
    assert!(!format!("{config:?}").contains("SECRET"));
    let client = build_client(&config).expect("client");
    let results = burst(&client, 20, |i| format!("p{i} hello"), |_| None);
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    for (server, key, model) in [(&a, KEY_A, "m-a"), (&b, KEY_B, "m-b")] {
        let requests = server.requests();
        assert!(!requests.is_empty(), "both servers got calls");
        for request in &requests {
            assert_eq!(
                request.header("authorization"),
                Some(format!("Bearer {key}").as_str())
            );
            assert!(request.body.contains(model));
        }
    }
    let usage = client.usage();
    assert_eq!(usage.endpoints.len(), 2);
    assert_eq!(usage.model, "m-a|m-b");
    let json = usage.to_json_pretty();
    assert!(!json.contains("SECRET"), "{json}");
    assert!(!format!("{client:?}").contains("SECRET"));
}

#[test]
fn calls_spread_by_weight_without_affinity() {
    let heavy = echo_server(Duration::from_millis(40));
    let light = echo_server(Duration::from_millis(40));
    let mut config = pool_config(&[&heavy, &light]);
    config.endpoints[0].weight = Some(3.0);
    config.affinity = false;
    let client = build_client(&config).expect("client");
    for _ in 0..4 {
        let results = burst(&client, 24, |i| format!("w{i} go"), |_| None);
        assert!(results.iter().all(Result::is_ok));
    }
    let (h, l) = (heavy.chat_calls(), light.chat_calls());
    assert_eq!(h + l, 96);
    assert!(h >= 2 * l && l >= 10, "weight 3:1 gave {h}:{l}");
    let usage = client.usage();
    assert_eq!(endpoint(&usage.endpoints, &heavy).calls as usize, h);
    assert_eq!(endpoint(&usage.endpoints, &heavy).affinity_calls, 0);
}

#[test]
fn affinity_keeps_each_key_on_one_server_and_spreads_the_keys() {
    let servers: Vec<FakeOpenAi> = (0..3)
        .map(|_| echo_server(Duration::from_millis(20)))
        .collect();
    let config = pool_config(&servers.iter().collect::<Vec<_>>());
    let client = build_client(&config).expect("client");
    // 12 personas, 8 rounds of one call each.
    for round in 0..8 {
        let results = burst(
            &client,
            12,
            |i| format!("persona{i} round {round}"),
            |i| Some(format!("persona{i}")),
        );
        assert!(results.iter().all(Result::is_ok));
    }
    let mut homes: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (s, server) in servers.iter().enumerate() {
        for (tag, count) in server.tag_counts() {
            homes.entry(tag).or_insert_with(|| vec![0; 3])[s] = count;
        }
    }
    assert_eq!(homes.len(), 12);
    let mut per_server = [0usize; 3];
    for (tag, counts) in &homes {
        let home = (0..3).max_by_key(|&s| counts[s]).expect("a server");
        assert_eq!(counts.iter().sum::<usize>(), 8);
        assert_eq!(counts[home], 8, "{tag} moved: {counts:?}");
        per_server[home] += 1;
    }
    assert_eq!(per_server, [4, 4, 4], "homes are spread evenly");
    let usage = client.usage();
    let (hits, calls) = usage.endpoints.iter().fold((0, 0), |(h, c), e| {
        (h + e.affinity_hits, c + e.affinity_calls)
    });
    assert_eq!((hits, calls), (96, 96));
}

#[test]
fn a_failing_server_is_ejected_retried_elsewhere_and_readmitted_by_a_probe() {
    let bad = echo_server(Duration::ZERO);
    let good = echo_server(Duration::ZERO);
    bad.fail_with(503);
    let config = pool_config(&[&bad, &good]);
    let client = build_client(&config).expect("client");
    let results = burst(&client, 10, |i| format!("f{i} x"), |_| None);
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    let usage = client.usage().endpoints;
    let b = endpoint(&usage, &bad);
    assert!(b.ejections >= 1 && !b.healthy, "{b:?}");
    assert!(b.errors >= 1 && b.errors == b.calls, "{b:?}");
    assert_eq!(endpoint(&usage, &good).calls, 10);
    // Transport retries count under the prompt kind.
    assert!(client.usage().kind("k").transport_retries >= 1);

    bad.heal();
    std::thread::sleep(Duration::from_millis(1100));
    let results = burst(&client, 10, |i| format!("g{i} x"), |_| None);
    assert!(results.iter().all(Result::is_ok));
    let usage = client.usage().endpoints;
    let b = endpoint(&usage, &bad);
    assert_eq!(b.readmissions, 1, "{b:?}");
    assert!(b.healthy);
    assert!(b.calls > b.errors, "it answers again: {b:?}");
    // The probe was a GET of the model list.
    assert!(
        bad.requests()
            .iter()
            .any(|r| r.method == "GET" && r.path.ends_with("/models"))
    );
}

#[test]
fn a_429_slows_only_that_server() {
    let limited = echo_server(Duration::ZERO);
    let other = echo_server(Duration::ZERO);
    limited.rate_limit(30);
    let config = pool_config(&[&limited, &other]);
    let client = build_client(&config).expect("client");
    let start = Instant::now();
    let results = burst(&client, 10, |i| format!("r{i} x"), |_| None);
    assert!(results.iter().all(Result::is_ok));
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "nobody waited out the Retry-After"
    );
    let usage = client.usage().endpoints;
    let l = endpoint(&usage, &limited);
    assert!(
        l.rate_limited >= 1 && l.ejections == 0 && l.healthy,
        "{l:?}"
    );
    assert!(endpoint(&usage, &other).calls >= 10);
    // Paused for its Retry-After: the next calls all go to the other server.
    let before = l.calls;
    let results = burst(&client, 10, |i| format!("s{i} x"), |_| None);
    assert!(results.iter().all(Result::is_ok));
    let usage = client.usage().endpoints;
    assert_eq!(
        endpoint(&usage, &limited).calls,
        before,
        "paused after its 429"
    );
    assert!(endpoint(&usage, &other).calls >= 20);
}

/// Watches a run: kills `victim` once it has answered some calls, restarts it `down` later,
/// and records the longest gap between two steps.
struct KillMidRun {
    victim: Arc<FakeOpenAi>,
    down: Duration,
    killed_at: Mutex<Option<Instant>>,
    restarted: Arc<AtomicBool>,
    last_step: Mutex<Option<Instant>>,
    longest_gap: Mutex<Duration>,
}

impl RunProgress for KillMidRun {
    fn stepped(&self, _done: u64, _now: chrono::NaiveDateTime, _client: &LlmClient) {
        let now = Instant::now();
        if let Some(last) = self.last_step.lock().expect("lock").replace(now) {
            let mut longest = self.longest_gap.lock().expect("lock");
            *longest = (*longest).max(now - last);
        }
        let mut killed = self.killed_at.lock().expect("lock");
        if killed.is_none() && self.victim.chat_calls() >= 8 {
            *killed = Some(now);
            let victim = Arc::clone(&self.victim);
            let restarted = Arc::clone(&self.restarted);
            let down = self.down;
            std::thread::spawn(move || {
                victim.kill();
                std::thread::sleep(down);
                victim.restart().expect("restart on the same port");
                restarted.store(true, Ordering::SeqCst);
            });
        }
    }
}

fn kill_one_of_three(mode: TimeMode, speed: Option<SimSpeed>, hours: f64) {
    let library = PromptLibrary::default();
    let servers: Vec<Arc<FakeOpenAi>> = (0..3)
        .map(|i| {
            Arc::new(
                FakeOpenAi::start(
                    FakeOpenAiConfig::new(scripted_answers(town_script_backend(i), &library))
                        .with_latency(Duration::from_millis(40)),
                )
                .expect("server"),
            )
        })
        .collect();
    let timeout = Duration::from_secs(3);
    let watcher = Arc::new(KillMidRun {
        victim: Arc::clone(&servers[1]),
        down: Duration::from_millis(800),
        killed_at: Mutex::new(None),
        restarted: Arc::new(AtomicBool::new(false)),
        last_step: Mutex::new(None),
        longest_gap: Mutex::new(Duration::ZERO),
    });
    let out = std::env::temp_dir().join(format!("bga-pool-kill-{mode:?}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let mut options = RunOptions::new(hours, &out).with_personas(5);
    options.time_mode = mode;
    options.speed = speed;
    options.report = true;
    options.llm = LlmConfig {
        max_retries: 4,
        ..pool_config(&servers.iter().map(Arc::as_ref).collect::<Vec<_>>())
    };
    options.llm.timeout = timeout;
    options.progress = Some(ProgressWatcher(watcher.clone()));
    let started = Instant::now();
    let report = run(&options).expect("the run finishes");
    eprintln!(
        "{mode:?}: {} steps in {:?}, {} calls, killed after {:?}",
        report.steps,
        report.wall,
        report.usage.totals.calls,
        watcher.killed_at.lock().expect("lock").map(|t| t - started)
    );

    assert!(
        watcher.killed_at.lock().expect("lock").is_some(),
        "the victim was killed mid-run"
    );
    assert!(watcher.restarted.load(Ordering::SeqCst), "and came back");
    let gap = *watcher.longest_gap.lock().expect("lock");
    assert!(
        gap <= timeout,
        "a step waited {gap:?}, longer than the timeout"
    );
    // Every call was answered or fell back to its fail-safe: nothing is left hanging.
    assert_eq!(report.minds_out, 0);
    let totals = report.usage.totals;
    assert!(totals.calls > 0);
    assert!(
        totals.fail_safes <= totals.errors,
        "fail-safes only where calls failed: {totals:?}"
    );
    // usage.json on disk shows the ejection and the re-admission.
    let text = std::fs::read_to_string(&report.usage_path).expect("usage.json");
    let file: serde_json::Value = serde_json::from_str(&text).expect("json");
    let endpoints: Vec<EndpointUsage> = serde_json::from_value(
        file.pointer("/usage/endpoints")
            .or_else(|| file.get("endpoints"))
            .cloned()
            .expect("endpoints in usage.json"),
    )
    .expect("endpoint usage");
    assert_eq!(endpoints.len(), 3);
    let victim = endpoint(&endpoints, &servers[1]);
    assert!(victim.ejections >= 1, "{victim:?}");
    assert!(victim.readmissions >= 1, "{victim:?}");
    assert!(victim.healthy, "{victim:?}");
    for server in [&servers[0], &servers[2]] {
        let e = endpoint(&endpoints, server);
        assert_eq!(e.ejections, 0, "{e:?}");
        assert!(e.calls > 0);
    }
    // The report shows the servers too.
    let html = std::fs::read_to_string(out.join("report.html")).expect("report");
    assert!(html.contains("Model servers") && html.contains(&servers[1].base_url()));
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn killing_one_of_three_servers_mid_run_in_lockstep() {
    kill_one_of_three(TimeMode::Lockstep, None, 10.0);
}

/// A whole day: at max speed a night of sleepers takes well under a second of wall time, and
/// the victim (down 800 ms) must come back while the run still makes calls.
#[test]
fn killing_one_of_three_servers_mid_run_in_realtime() {
    kill_one_of_three(TimeMode::Realtime, Some(SimSpeed::Max), 24.0);
}

/// `smallville run --llm-base-urls A,B`: both servers answer the run, `usage.json` lists them
/// (host and port, no key), the pool settings of `--llm-config` apply, and a bad list is a
/// clear error naming the flag and the entry.
#[cfg(feature = "cli")]
#[test]
fn the_run_command_takes_a_pool_from_its_flag() {
    use std::process::Command;
    const BIN: &str = env!("CARGO_BIN_EXE_smallville");
    let library = PromptLibrary::default();
    let servers: Vec<FakeOpenAi> = (0..2)
        .map(|i| {
            FakeOpenAi::start(FakeOpenAiConfig::new(scripted_answers(
                town_script_backend(i),
                &library,
            )))
            .expect("server")
        })
        .collect();
    let dir = std::env::temp_dir().join(format!("bga-pool-cli-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let config = dir.join("llm.json");
    std::fs::write(
        &config,
        r#"{"pool": {"eject_base_secs": 0.5, "eject_max_secs": 5}}"#,
    )
    .expect("config");
    let urls = format!("{},{}", servers[0].base_url(), servers[1].base_url());
    let out = dir.join("run");
    let output = Command::new(BIN)
        .args(["run", "--hours", "0.25", "--personas", "3", "--no-progress"])
        .args(["--llm-backend", "http", "--llm-base-urls", &urls])
        .arg("--llm-config")
        .arg(&config)
        .arg("--out")
        .arg(&out)
        .env("GA_LLM_API_KEY", KEY_A)
        .env_remove("GA_LLM_BASE_URLS")
        .env_remove("GA_LLM_BASE_URL")
        .output()
        .expect("spawn smallville");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "run failed: {}",
        &stderr[stderr.len().saturating_sub(3000)..]
    );
    assert!(
        servers.iter().all(|s| s.chat_calls() > 0),
        "both servers answered"
    );
    let usage = std::fs::read_to_string(out.join("usage.json")).expect("usage.json");
    let report: bevy_generative_agents::llm::UsageReport =
        serde_json::from_str(&usage).expect("usage parses");
    let chat: Vec<&EndpointUsage> = report
        .endpoints
        .iter()
        .filter(|e| e.pool == "chat")
        .collect();
    assert_eq!(chat.len(), 2, "{usage}");
    for server in &servers {
        let entry = endpoint(&report.endpoints, server);
        assert!(entry.calls > 0 && entry.healthy, "{entry:?}");
    }
    assert!(!usage.contains(KEY_A));
    let lines = bevy_generative_agents::llm::endpoint_lines(&report.endpoints);
    assert_eq!(lines.len(), 2);
    for (line, server) in lines.iter().zip(&servers) {
        assert!(
            line.starts_with(&format!("chat {} ", server.addr())) && line.ends_with("healthy"),
            "{line}"
        );
    }

    let bad = Command::new(BIN)
        .args(["run", "--hours", "0.1", "--personas", "1", "--no-progress"])
        .args([
            "--llm-base-urls",
            "http://127.0.0.1:9/v1,ftp://elsewhere/v1",
        ])
        .arg("--out")
        .arg(dir.join("bad"))
        .output()
        .expect("spawn smallville");
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(!bad.status.success());
    assert!(
        stderr.contains("--llm-base-urls entry 2 (ftp://elsewhere/v1)"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
