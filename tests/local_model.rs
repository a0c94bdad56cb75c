//! The embedded local model (feature `local-llm`) against the **real** GGUF file: choice
//! scoring, grammar-constrained JSON and shaped answers, the dialogue planner's tool-call
//! grammar, streaming, prefix reuse, embeddings, and a headless run of the town on it.
//!
//! The model is `GA_LOCAL_MODEL` or the first default file in the model cache
//! (`scripts/fetch-model.sh` puts it there). Without it these tests print why and pass —
//! unless `GA_REQUIRE_LOCAL_MODEL` is set (as `scripts/test.sh` and CI do), then they fail.

use std::sync::OnceLock;

use bevy::tasks::block_on;
use bevy_generative_agents::llm::{
    BackendChoice, ChatMessage, ChatRequest, ChoiceRequest, LlmBackend, LocalBackend, LocalConfig,
};
use bevy_generative_agents::output::{RunOptions, run};

#[path = "support/local_model_file.rs"]
mod local_model_file;
use local_model_file::model_path;

/// One backend for the whole file: tests share its queue like personas do.
fn backend() -> Option<&'static LocalBackend> {
    static BACKEND: OnceLock<Option<LocalBackend>> = OnceLock::new();
    BACKEND
        .get_or_init(|| {
            let path = model_path()?;
            Some(LocalBackend::new(LocalConfig::new(path)).expect("the model file loads"))
        })
        .as_ref()
}

fn best(scores: &[f32]) -> usize {
    scores
        .iter()
        .enumerate()
        .max_by(|a, b| a.1.total_cmp(b.1))
        .map(|(i, _)| i)
        .expect("scores")
}

#[test]
fn choice_scoring_picks_the_obvious_answer() {
    let Some(llm) = backend() else { return };
    assert!(llm.supports_choice_scoring());
    // Questions SmolLM2-135M gets right when generating freely too (it says a cat barks, so
    // "easy" here means easy for the smallest model).
    let cases = [
        (
            "What is the capital of France? Answer with the city name only.",
            vec!["London", "Paris", "Tokyo", "Cairo"],
            "Paris",
        ),
        (
            "What colour is the sky on a clear sunny day? Answer with one word.",
            vec!["green", "blue", "purple"],
            "blue",
        ),
    ];
    for (question, options, answer) in cases {
        let request = ChoiceRequest {
            kind: "test_choice".into(),
            messages: vec![ChatMessage::user(question)],
            options: options.iter().map(|s| (*s).to_owned()).collect(),
            affinity: None,
            about: None,
            option_phrases: Vec::new(),
        };
        let scores = block_on(llm.score_choices(request.clone())).expect("scores");
        assert_eq!(scores.len(), options.len());
        assert!(
            scores.iter().all(|s| s.is_finite() && *s < 0.0),
            "{scores:?}"
        );
        assert_eq!(options[best(&scores)], answer, "{question}: {scores:?}");
        // Scoring is deterministic, whatever ran in between.
        let again = block_on(llm.score_choices(request)).expect("scores");
        for (a, b) in scores.iter().zip(&again) {
            assert!((a - b).abs() < 1e-2, "{scores:?} vs {again:?}");
        }
    }
    let none = ChoiceRequest {
        kind: "test_choice".into(),
        messages: vec![ChatMessage::user("Pick one.")],
        options: Vec::new(),
        affinity: None,
        about: None,
        option_phrases: Vec::new(),
    };
    assert_eq!(
        block_on(llm.score_choices(none)).expect("empty"),
        Vec::<f32>::new()
    );
}

#[test]
fn grammar_constrained_json_always_parses() {
    let Some(llm) = backend() else { return };
    let schema = serde_json::json!({
        "type": "object",
        "properties": {
            "utterance": {"type": "string"},
            "end": {"type": "boolean"}
        },
        "required": ["utterance", "end"],
        "additionalProperties": false
    });
    for seed in 0..4u64 {
        let mut request = ChatRequest::new(
            "next_utterance",
            "Mira meets Tomas at the cafe. Write what Mira says next, and whether the \
             conversation ends, as JSON with keys utterance and end.",
        )
        .with_json_schema(schema.clone())
        .with_max_tokens(120)
        .with_temperature(0.8);
        request.seed = Some(seed);
        let response = block_on(llm.chat(request)).expect("chat");
        let value: serde_json::Value = serde_json::from_str(response.text.trim())
            .unwrap_or_else(|e| panic!("seed {seed}: {e}: {:?}", response.text));
        assert!(value["utterance"].is_string(), "{value}");
        assert!(value["end"].is_boolean(), "{value}");
        assert_eq!(value.as_object().map(|o| o.len()), Some(2), "{value}");
        assert!(response.usage.completion_tokens > 0);
    }
}

/// The dialogue planner (SPEC §7.2) on the real model with two tools — the built-in
/// `add_to_schedule` and a game's own `ring_bell` — decodes under the tools' grammar: every
/// answer parses as a planner step, and every tool call names one of the two tools with
/// arguments that pass that tool's JSON schema. The same prompts with only the two tool calls
/// allowed (a step that must call a tool) check the calls themselves, whatever the model would
/// have preferred.
#[test]
fn the_dialogue_planner_calls_its_two_tools_with_schema_valid_arguments() {
    use bevy_generative_agents::dialogue::ToolSpec;
    use bevy_generative_agents::dialogue::grammar::planner_answer_schema;
    use bevy_generative_agents::dialogue::prompts::{DialoguePlanner, PlannerStep};
    use bevy_generative_agents::dialogue::tools::built_in_specs;
    use bevy_generative_agents::prompt::{Prompt, PromptLibrary, clean_response};

    let Some(llm) = backend() else { return };
    let add = built_in_specs()
        .into_iter()
        .find(|t| t.name == "add_to_schedule")
        .expect("the built-in add_to_schedule");
    let bell = ToolSpec::new(
        "ring_bell",
        "Ring the cafe bell a number of times.",
        serde_json::json!({"type": "object",
            "properties": {"times": {"type": "integer", "minimum": 1, "maximum": 3}},
            "required": ["times"], "additionalProperties": false}),
        serde_json::json!({"times": 2}),
    );
    let tools = [add, bell];
    let listing: String = tools.iter().map(|t| t.listing() + "\n").collect();
    let validators: Vec<(String, jsonschema::Validator)> = tools
        .iter()
        .map(|t| {
            let v = jsonschema::validator_for(&t.schema).expect("a tool schema compiles");
            (t.name.clone(), v)
        })
        .collect();
    let check_call = |tool: &str, args: &serde_json::Value, context: &str| {
        let Some((_, validator)) = validators.iter().find(|(name, _)| name == tool) else {
            panic!("{context}: a tool that is not one of the two: {tool:?}");
        };
        let errors: Vec<String> = validator.iter_errors(args).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{context}: {tool} {args}: {errors:?}");
    };
    let library = PromptLibrary::default();
    let full = planner_answer_schema(&tools);
    // Only the tool calls: the `oneOf` without its finish option.
    let mut calls_only = full.clone();
    if let Some(options) = calls_only["oneOf"].as_array_mut() {
        options.retain(|o| o.pointer("/properties/action/const") == Some(&"tool".into()));
    }
    assert_eq!(calls_only["oneOf"].as_array().map(Vec::len), Some(2));
    let messages = [
        "Could you put lunch with me at the cafe at 12:30 into your plans for today?",
        "Ring the bell twice so everyone knows the bread is ready!",
        "Please add a walk by the river at 17:00 for half an hour.",
        "Hello! How are you today?",
    ];
    let (mut calls, mut finishes) = (0, 0);
    for (i, message) in messages.iter().enumerate() {
        for (schema, must_call) in [(&full, false), (&calls_only, true)] {
            let planner = DialoguePlanner {
                speaker: "Player".into(),
                message: (*message).into(),
                persona: "You are Ada Brook, who runs the Riverside Cafe in Brookside. You are \
                          friendly and busy."
                    .into(),
                observations: "Ada is at the Riverside Cafe, serving coffee.".into(),
                tools: listing.clone(),
                answer_schema: Some(schema.clone()),
                seed: i as u64,
                ..DialoguePlanner::default()
            };
            let request = planner
                .request(&library)
                .expect("the planner template fills");
            let response = block_on(llm.chat(request)).expect("chat");
            let context = format!("{message:?} (calls only: {must_call}): {:?}", response.text);
            let step = planner
                .parse(&clean_response(&response.text))
                .unwrap_or_else(|e| panic!("{context}: {e}"));
            match step {
                PlannerStep::Tool { tool, args } => {
                    check_call(&tool, &args, &context);
                    calls += 1;
                }
                PlannerStep::Finish { message } => {
                    assert!(
                        !must_call,
                        "{context}: finished where only calls were allowed"
                    );
                    assert!(message.is_some_and(|m| !m.trim().is_empty()), "{context}");
                    finishes += 1;
                }
            }
        }
    }
    eprintln!("dialogue planner on the real model: {calls} tool calls, {finishes} finishes");
    assert!(calls >= messages.len(), "every calls-only step is a call");
}

#[test]
fn shaped_kinds_get_answers_that_parse() {
    let Some(llm) = backend() else { return };
    let rating = ChatRequest::new(
        "event_poignancy",
        "On a scale of 1 to 10, rate how poignant this is: Mira is brushing her teeth.\nRating:",
    )
    .with_temperature(0.0)
    .with_max_tokens(8);
    let text = block_on(llm.chat(rating)).expect("chat").text;
    let value: u32 = text.trim().parse().unwrap_or_else(|_| panic!("{text:?}"));
    assert!((1..=10).contains(&value), "{value}");

    let steps = ChatRequest::new(
        "task_decomposition",
        "Break \"cooking breakfast\" (30 minutes) into steps, like:\n\
         1) frying eggs (duration in minutes: 10, minutes left: 20)\n\nSteps:",
    )
    .with_temperature(0.0)
    .with_max_tokens(400);
    let text = block_on(llm.chat(steps)).expect("chat").text;
    // The grammar allows at most 8 steps, so 8 lines of about 25 tokens always fit; only a
    // line cut by the token budget could be incomplete, and there is none.
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!((1..=8).contains(&lines.len()), "{text:?}");
    for line in lines {
        let minutes = line
            .split("(duration in minutes: ")
            .nth(1)
            .and_then(|rest| rest.split(',').next())
            .and_then(|n| n.trim().parse::<u32>().ok());
        assert!(minutes.is_some_and(|m| m > 0), "{line:?} in {text:?}");
    }
}

#[test]
fn streaming_prefix_reuse_and_greedy_determinism() {
    let Some(llm) = backend() else { return };
    let ask = |question: &str| {
        ChatRequest::new("test_chat", question)
            .with_temperature(0.0)
            .with_max_tokens(24)
    };
    let first = block_on(llm.chat(ask("Name three fruits."))).expect("chat");
    let before = block_on(llm.stats()).expect("stats");
    let (tx, rx) = async_channel::unbounded();
    let streamed = block_on(llm.chat_stream(ask("Name three fruits."), tx)).expect("chat");
    let mut pieces = String::new();
    while let Ok(piece) = rx.try_recv() {
        pieces.push_str(&piece);
    }
    assert_eq!(pieces, streamed.text, "the deltas add up to the answer");
    assert_eq!(streamed.text, first.text, "greedy answers repeat");
    let after = block_on(llm.stats()).expect("stats");
    // Other tests share the backend, so only the lower bound is certain: the template's
    // preamble is always shared, and the same prompt at best costs one token.
    assert!(after.prompt_tokens_reused > before.prompt_tokens_reused);

    // Stop sequences cut the answer.
    let stopped =
        block_on(llm.chat(ask("Count from 1 to 10, separated by commas.").with_stop(["5"])))
            .expect("chat");
    assert!(!stopped.text.contains('5'), "{:?}", stopped.text);
}

#[test]
fn embeddings_are_the_models_own_and_normalised() {
    let Some(llm) = backend() else { return };
    let texts = vec![
        "cooking dinner in the kitchen".to_owned(),
        "cooking dinner in the kitchen".to_owned(),
        "the stock market fell sharply today".to_owned(),
        String::new(),
    ];
    let vectors = block_on(llm.embed(texts)).expect("embed");
    assert_eq!(vectors.len(), 4);
    for v in &vectors {
        assert_eq!(v.len(), llm.embedding_dim());
    }
    assert!(llm.embedding_dim() >= 64);
    let norm = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
    assert!((norm(&vectors[0]) - 1.0).abs() < 1e-3);
    assert_eq!(vectors[0], vectors[1], "same text, same vector");
    assert_ne!(vectors[0], vectors[2]);
    assert!(llm.embedding_model().ends_with(":mean-pool"));
}

#[test]
fn two_personas_live_two_game_hours_on_the_local_model() {
    let Some(path) = model_path() else { return };
    let out = std::env::temp_dir().join(format!("bga-local-run-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let mut options = RunOptions::new(2.0, &out)
        .with_backend(BackendChoice::Local)
        .with_personas(2);
    options.llm.local_model = Some(path);
    let report = run(&options).expect("the run finishes");
    assert_eq!(report.steps, 720);
    assert_eq!(report.usage.backend, "local");
    assert_eq!(report.final_frames.len(), 2);
    let usage: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report.usage_path).expect("usage.json"))
            .expect("usage.json parses");
    assert_eq!(usage["backend"], "local");
    // Both personas planned their day with the model.
    let wake = report.usage.kind("wake_up_hour");
    assert!(wake.calls >= 2, "{wake:?}");
    assert!(report.usage.totals.calls > 2);
    assert!(report.movement_path.is_file());
    let _ = std::fs::remove_dir_all(&out);
}

/// A backend of its own (shutting it down must not disturb the shared one), answering a
/// question that keeps it generating for about a minute.
fn counting_request() -> ChatRequest {
    ChatRequest {
        messages: vec![
            ChatMessage::user("Count from 1 to 2000, separated by commas."),
            ChatMessage::assistant("1, 2, 3, 4, 5, 6, 7, 8, 9, 10,"),
        ],
        ..ChatRequest::new("test_chat", "")
            .with_temperature(0.0)
            .with_max_tokens(3000)
    }
}

#[test]
fn shutting_down_cuts_the_answer_in_progress_and_refuses_later_calls() {
    let Some(path) = model_path() else { return };
    let llm = std::sync::Arc::new(LocalBackend::new(LocalConfig::new(path)).expect("loads"));
    let (tx, rx) = async_channel::unbounded();
    let asking = std::sync::Arc::clone(&llm);
    let answer = std::thread::spawn(move || block_on(asking.chat_stream(counting_request(), tx)));
    // The first delta means llama.cpp is generating on the inference thread right now.
    let first = block_on(rx.recv()).expect("a first piece of the answer");
    assert!(!first.is_empty());
    llm.shut_down();
    let cut = answer.join().expect("the asking thread");
    assert!(
        matches!(cut, Err(bevy_generative_agents::llm::LlmError::Closed)),
        "the answer in progress ends with Closed: {cut:?}"
    );
    let later = block_on(llm.chat(ChatRequest::new("test_chat", "Hello")));
    assert!(matches!(
        later,
        Err(bevy_generative_agents::llm::LlmError::Closed)
    ));
    assert!(block_on(llm.stats()).is_err(), "the thread is gone");
    // Idempotent: a second shut-down (and the drop) find nothing to stop.
    llm.shut_down();
}

#[test]
fn the_llm_plugin_shuts_the_embedded_model_down_on_app_exit() {
    use bevy::prelude::*;
    use bevy_generative_agents::llm::{LlmClient, LlmPlugin};
    let Some(path) = model_path() else { return };
    let backend = std::sync::Arc::new(LocalBackend::new(LocalConfig::new(path)).expect("loads"));
    let mut app = App::new();
    app.insert_resource(LlmClient::new(backend.clone()))
        .add_plugins(LlmPlugin::default());
    app.update();
    let before =
        block_on(backend.chat(ChatRequest::new("test_chat", "Say hi.").with_max_tokens(4)));
    assert!(before.is_ok(), "alive before the exit: {before:?}");
    app.world_mut().write_message(AppExit::Success);
    app.update();
    let after = block_on(backend.chat(ChatRequest::new("test_chat", "Say hi.").with_max_tokens(4)));
    assert!(
        matches!(after, Err(bevy_generative_agents::llm::LlmError::Closed)),
        "shut down in the exit frame: {after:?}"
    );
}

/// The requests of the batching test: two personas' greedy answers, a seeded sample, a
/// grammar-constrained JSON answer, and a closed choice.
fn mixed_requests() -> (Vec<ChatRequest>, ChoiceRequest) {
    let identity = |name: &str, job: &str| {
        format!(
            "Name: {name}\nAge: 34\nInnate traits: kind, curious, punctual\nCurrently: {name} \
             works as a {job} in the town and likes to start the day early.\nLifestyle: {name} \
             goes to bed around 10 pm and wakes up around 6 am.\n"
        )
    };
    let ada = identity("Ada Lin", "baker");
    let bo = identity("Bo Reyes", "pharmacist");
    let chats = vec![
        ChatRequest::new(
            "test_plan",
            format!("{ada}\nList Ada's first three tasks today."),
        )
        .with_temperature(0.0)
        .with_max_tokens(32)
        .with_affinity("Ada Lin"),
        ChatRequest::new(
            "test_plan",
            format!("{bo}\nList Bo's first three tasks today."),
        )
        .with_temperature(0.0)
        .with_max_tokens(32)
        .with_affinity("Bo Reyes"),
        ChatRequest {
            seed: Some(7),
            ..ChatRequest::new(
                "test_mood",
                format!("{ada}\nHow does Ada feel this morning?"),
            )
            .with_temperature(0.8)
            .with_max_tokens(24)
            .with_affinity("Ada Lin")
        },
        ChatRequest::new("test_json", format!("{bo}\nGive Bo's next action as JSON."))
            .with_temperature(0.0)
            .with_max_tokens(40)
            .with_json_schema(serde_json::json!({
                "type": "object",
                "properties": {"action": {"type": "string"}, "minutes": {"type": "integer"}},
                "required": ["action", "minutes"]
            }))
            .with_affinity("Bo Reyes"),
    ];
    let choice = ChoiceRequest {
        kind: "test_choice".into(),
        messages: vec![ChatMessage::user(format!(
            "{ada}\nWhere does Ada go to bake bread? Options: bakery, library, park."
        ))],
        options: vec!["bakery".into(), "library".into(), "park".into()],
        affinity: Some("Ada Lin".into()),
        about: None,
        option_phrases: Vec::new(),
    };
    (chats, choice)
}

#[test]
fn batched_decoding_computes_what_one_at_a_time_does_and_personas_keep_their_prefixes() {
    let Some(path) = model_path() else { return };
    // A backend of its own: its statistics count this test's requests only.
    let llm = LocalBackend::new(LocalConfig::new(path)).expect("the model file loads");
    let (chats, choice) = mixed_requests();

    // One at a time.
    let alone: Vec<String> = chats
        .iter()
        .map(|r| block_on(llm.chat(r.clone())).expect("chat").text)
        .collect();
    let alone_scores = block_on(llm.score_choices(choice.clone())).expect("score");
    let before = block_on(llm.stats()).expect("stats");

    // All at once, from five threads: decoded together, the choice's question beside the
    // chats' answers.
    let (together, together_scores) = std::thread::scope(|scope| {
        let handles: Vec<_> = chats
            .iter()
            .map(|r| scope.spawn(|| block_on(llm.chat(r.clone())).expect("chat")))
            .collect();
        let scores = scope.spawn(|| block_on(llm.score_choices(choice.clone())).expect("score"));
        let answers: Vec<_> = handles
            .into_iter()
            .map(|h| h.join().expect("thread"))
            .collect();
        (answers, scores.join().expect("thread"))
    });
    let after = block_on(llm.stats()).expect("stats");
    assert!(
        after.widest_batch >= 2,
        "the requests were decoded together: {after:?}"
    );
    // The same distribution: llama.cpp picks its attention kernel by the batch's shape and
    // where the cells lie, so a 4-bit 135M model's log-likelihoods move by a fraction of a
    // nat, never more (another sequence's cells or a wrong position move them by whole nats
    // and reorder them).
    assert_eq!(together_scores.len(), alone_scores.len());
    let order = |scores: &[f32]| {
        let mut index: Vec<usize> = (0..scores.len()).collect();
        index.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]));
        index
    };
    assert_eq!(order(&together_scores), order(&alone_scores));
    for (a, b) in together_scores.iter().zip(&alone_scores) {
        assert!(
            (a - b).abs() < 0.5,
            "{together_scores:?} vs {alone_scores:?}"
        );
    }
    // Each batched answer, scored alone as an answer to its own prompt, is as likely as the
    // answer decoded alone — and far likelier than another request's answer.
    let likelihood = |request: &ChatRequest, answer: &str| {
        let scored = ChoiceRequest {
            kind: "test_likelihood".into(),
            messages: request.messages.clone(),
            options: vec![answer.to_owned()],
            affinity: request.affinity.clone(),
            about: None,
            option_phrases: Vec::new(),
        };
        block_on(llm.score_choices(scored)).expect("score")[0] / answer.len().max(1) as f32
    };
    for (i, (request, answer)) in chats.iter().zip(&together).enumerate() {
        assert!(!answer.text.trim().is_empty(), "answer {i} is empty");
        // Sampled answers differ by design, and a grammar's answer is not what the free
        // model finds likeliest.
        if request.temperature > 0.0 || request.json_schema.is_some() {
            continue;
        }
        let batched = likelihood(request, &answer.text);
        let single = likelihood(request, &alone[i]);
        eprintln!("answer {i}: {batched:.3} per byte batched, {single:.3} alone");
        assert!(
            batched > single - 0.25,
            "answer {i}: {batched} per byte batched, {single} alone: {:?} vs {:?}",
            answer.text,
            alone[i]
        );
    }
    // The second round found each persona's identity in its slot.
    let decoded = after.prompt_tokens_decoded - before.prompt_tokens_decoded;
    let reused = after.prompt_tokens_reused - before.prompt_tokens_reused;
    assert!(
        reused > 3 * decoded,
        "{reused} prompt tokens reused, {decoded} decoded"
    );
    let reported: u64 = together.iter().map(|a| a.usage.reused_prompt_tokens).sum();
    assert!(reported > 0, "answers report their reuse");

    // Ada asks again right after Bo: her slot still holds her identity (one shared sequence
    // would hold Bo's prompt by now).
    let identity_of = |request: &ChatRequest| {
        let prompt = &request.messages[0].content;
        prompt[..prompt.find("\nList").unwrap_or(prompt.len())].to_owned()
    };
    block_on(llm.chat(chats[1].clone())).expect("chat");
    let again = ChatRequest::new(
        "test_plan",
        format!("{}\nWhat will Ada eat for lunch?", identity_of(&chats[0])),
    )
    .with_temperature(0.0)
    .with_max_tokens(4)
    .with_affinity("Ada Lin");
    let answer = block_on(llm.chat(again)).expect("chat");
    assert!(
        answer.usage.reused_prompt_tokens * 10 >= answer.usage.prompt_tokens * 7,
        "{:?}",
        answer.usage
    );
    llm.shut_down();
}
