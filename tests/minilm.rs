//! The in-process sentence embedder (all-MiniLM-L6-v2, `llm::MiniLm`) against the **real**
//! model files: token ids and vectors equal the reference computed once in Python
//! (`scripts/minilm_reference.py`: the `tokenizers` library and a numpy BERT, which agreed with
//! sentence-transformers to cosine 1.000000), retrieval on hand-written town memories, and the
//! backend wrapper that records the embedding model in saves.
//!
//! The files are the ones `scripts/fetch-model.sh` puts in the model cache
//! (`all-MiniLM-L6-v2/`). Without them these tests print why and pass — unless
//! `GA_REQUIRE_LOCAL_MODEL` is set (as `scripts/test.sh` and CI do), then they fail.

mod common;

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use bevy::tasks::block_on;
use bevy_generative_agents::llm::{
    ChatRequest, ChoiceRequest, LlmBackend, LlmClient, LlmConfig, MINILM_MAX_TOKENS, MINILM_NAME,
    MiniLm, MiniLmEmbedder, ScriptedBackend, SentenceEmbeddings, minilm_dir,
};
use bevy_generative_agents::persist::{PersistError, check_save, decode};
use bevy_generative_agents::world::TownMap;
use serde::Deserialize;

fn model_dir() -> Option<PathBuf> {
    let dir = LlmConfig::from_env()
        .ok()
        .and_then(|c| c.model_cache)
        .and_then(|cache| minilm_dir(&cache));
    if dir.is_none() {
        let required = std::env::var("GA_REQUIRE_LOCAL_MODEL").is_ok_and(|v| !v.is_empty());
        assert!(
            !required,
            "GA_REQUIRE_LOCAL_MODEL is set but all-MiniLM-L6-v2 is not in the model cache: run \
             scripts/fetch-model.sh"
        );
        eprintln!(
            "SKIPPED: no all-MiniLM-L6-v2 in the model cache (run scripts/fetch-model.sh; set \
             GA_REQUIRE_LOCAL_MODEL=1 to make this a failure)"
        );
    }
    dir
}

/// One model for the whole file.
fn model() -> Option<&'static MiniLm> {
    static MODEL: OnceLock<Option<MiniLm>> = OnceLock::new();
    MODEL
        .get_or_init(|| Some(MiniLm::load(&model_dir()?).expect("the model files load")))
        .as_ref()
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let na: f32 = a.iter().map(|x| x * x).sum::<f32>().sqrt();
    let nb: f32 = b.iter().map(|x| x * x).sum::<f32>().sqrt();
    dot / (na * nb)
}

#[derive(Deserialize)]
struct Reference {
    max_tokens: usize,
    tokens: Vec<TokenCase>,
    sentences: Vec<SentenceCase>,
}

#[derive(Deserialize)]
struct TokenCase {
    text: String,
    ids: Vec<u32>,
}

#[derive(Deserialize)]
struct SentenceCase {
    text: String,
    vector: Vec<f32>,
}

fn reference() -> Reference {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/minilm_reference.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).expect("the fixture")).expect("fixture")
}

#[test]
fn tokens_equal_the_reference_tokenizer() {
    let Some(model) = model() else { return };
    let reference = reference();
    assert_eq!(reference.max_tokens, MINILM_MAX_TOKENS);
    for case in &reference.tokens {
        assert_eq!(model.tokenize(&case.text), case.ids, "{:?}", case.text);
    }
}

#[test]
fn vectors_equal_the_reference_one_by_one_and_batched() {
    let Some(model) = model() else { return };
    let reference = reference();
    let texts: Vec<&str> = reference
        .sentences
        .iter()
        .map(|s| s.text.as_str())
        .collect();
    let batched = model.embed(&texts);
    assert_eq!(batched.len(), texts.len());
    for (case, vector) in reference.sentences.iter().zip(&batched) {
        assert_eq!(vector.len(), 384);
        let norm: f32 = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "not normalised: {norm}");
        let cos = cosine(vector, &case.vector);
        eprintln!("cosine to the reference {cos:.6}  {:?}", case.text);
        assert!(cos >= 0.999, "cosine {cos} for {:?}", case.text);
        // Alone, the same text gets the same vector as in a batch (packing changes nothing).
        let alone = model.embed(&[case.text.as_str()]);
        assert!(cosine(&alone[0], vector) > 0.99999);
    }
    // Different sentences are different vectors (the comparison above can fail).
    assert!(cosine(&batched[0], &batched[2]) < 0.9);
}

#[test]
fn any_number_of_texts_of_any_length_embed_in_order() {
    let Some(model) = model() else { return };
    let long = "the baker opened the shop early ".repeat(200);
    let mut texts: Vec<String> = (0..70).map(|i| format!("memory number {i}")).collect();
    texts.insert(10, long.clone());
    texts.insert(40, String::new());
    let all = model.embed(&texts);
    assert_eq!(all.len(), texts.len());
    for (i, text) in texts.iter().enumerate().step_by(9) {
        let alone = &model.embed(&[text])[0];
        assert!(cosine(alone, &all[i]) > 0.99999, "text {i} out of order");
    }
    assert_eq!(model.tokenize(&long).len(), MINILM_MAX_TOKENS);
}

/// A focal point, the memory a reader would pick for it, and memories beside it.
struct Case {
    focal: &'static str,
    pick: &'static str,
    others: &'static [&'static str],
}

/// Twenty everyday-town cases, written before any model ranked them. Distractors often share
/// words or people with the focal point, as real memories do.
const CASES: &[Case] = &[
    Case {
        focal: "What do I know about Klaus's research?",
        pick: "Klaus Mueller is writing a research paper on the effects of gentrification in \
               low-income communities",
        others: &[
            "Klaus ate a sandwich at Hobbs Cafe at noon",
            "The library closes at 8 pm on weekdays",
            "Maria Lopez is studying physics for her exam",
            "Isabella is planning a Valentine's Day party",
            "The park bench near the pond is wet from the rain",
            "Klaus said hello to Ayesha in the hallway",
        ],
    },
    Case {
        focal: "Is anyone planning a party soon?",
        pick: "Isabella Rodriguez is inviting everyone to a Valentine's Day celebration at Hobbs \
               Cafe on February 14th from 5 to 7 pm",
        others: &[
            "Isabella is wiping down the counter at the cafe",
            "Tom bought a new bicycle",
            "The pharmacy is out of cough syrup",
            "Sam Moore is running for mayor of the town",
            "Eddy is practicing the piano in his room",
            "Jennifer painted a landscape of the river",
        ],
    },
    Case {
        focal: "the kitchen stove",
        pick: "The stove in the Lin family kitchen was left on and the pot is burning",
        others: &[
            "John Lin is reading the newspaper on the couch",
            "Mei Lin is grading essays in the study",
            "The refrigerator hums quietly",
            "Eddy Lin is composing a piece of music",
            "The garden hose is coiled by the back door",
            "It is raining lightly outside",
        ],
    },
    Case {
        focal: "Where can I buy medicine?",
        pick: "The pharmacy on Main Street sells cold remedies and fills prescriptions until 6 pm",
        others: &[
            "The bakery sells fresh bread every morning",
            "Carmen is feeling tired after her shift",
            "The school bus arrives at 7:30",
            "Tom is fixing the roof of his house",
            "The bookstore has a sale on novels",
            "John Lin stocks the shelves at the grocery store",
        ],
    },
    Case {
        focal: "Maria's feelings toward Klaus",
        pick: "Maria Lopez thinks Klaus is kind and smart and finds herself blushing when he \
               talks to her",
        others: &[
            "Maria is streaming a video game on Twitch",
            "Klaus is reading in the library",
            "Maria takes the bus to the college every morning",
            "Klaus drinks black coffee",
            "Wolfgang and Klaus share a dorm room",
            "Maria's physics exam is on Friday",
        ],
    },
    Case {
        focal: "Who needs help moving furniture this weekend?",
        pick: "Carlos asked if anyone could help him carry his new sofa up the stairs on Saturday",
        others: &[
            "The furniture store on Oak Street is closing down",
            "Carlos works at the hardware store",
            "Saturday's farmers market starts at 8 am",
            "Abigail is learning to code",
            "The town hall meeting is on Monday",
            "Yuriko waters her tomato plants",
        ],
    },
    Case {
        focal: "the broken streetlight on Elm Road",
        pick: "The lamp at the corner of Elm Road has been flickering and went dark last night",
        others: &[
            "Elm Road has many old oak trees",
            "Adam Smith reads philosophy in the evening",
            "Jane walks her dog along the river at dusk",
            "The grocery store restocked its shelves",
            "A new mural was painted on the post office wall",
            "The electrician's van is parked outside the cafe",
        ],
    },
    Case {
        focal: "What does Tom like to eat for breakfast?",
        pick: "Tom usually has scrambled eggs and toast with strawberry jam before work",
        others: &[
            "Tom is late for work again",
            "The cafe serves lunch specials from noon",
            "Tom's sister lives in the next town",
            "Breakfast at the diner is served until 11",
            "Latoya buys oat milk at the market",
            "Tom repaired the fence",
        ],
    },
    Case {
        focal: "Ayesha's upcoming exam",
        pick: "Ayesha Khan is worried about her literature final next Tuesday and studies every \
               night",
        others: &[
            "Ayesha loves Shakespeare's sonnets",
            "The college library is crowded",
            "Rajiv is painting in his studio",
            "Next Tuesday is trash collection day",
            "Francisco is working on a comedy routine",
            "Hailey writes in her journal",
        ],
    },
    Case {
        focal: "Is it going to rain today?",
        pick: "The morning radio said heavy showers are expected in the afternoon",
        others: &[
            "Giorgio forgot his umbrella at the cafe yesterday",
            "The flowers in the park are blooming",
            "Today is Arthur's birthday",
            "The pub has trivia night",
            "Jennifer is at the supply store buying paint",
            "The river is calm",
        ],
    },
    Case {
        focal: "Sam Moore's election campaign",
        pick: "Sam Moore is running for mayor in the local election and has been putting up \
               posters",
        others: &[
            "Sam is a retired navy officer",
            "Jennifer Moore is an artist who paints watercolors",
            "The town hall will host a debate next week",
            "Tamara writes children's books",
            "The pub sells local beer",
            "Ryan is fixing a leaky faucet",
        ],
    },
    Case {
        focal: "a fight between neighbors",
        pick: "Mr. Lee and Mrs. Patel shouted at each other over the fence about the loud music",
        others: &[
            "Mrs. Patel grows roses in her front yard",
            "The neighborhood association meets on Thursdays",
            "Mr. Lee listens to jazz records",
            "Children played tag in the street",
            "The fence was painted white last spring",
            "A cat slept on the porch",
        ],
    },
    Case {
        focal: "Who is lonely and might want company?",
        pick: "Old Mr. Harris has lived alone since his wife died and rarely gets visitors",
        others: &[
            "Mr. Harris collects stamps",
            "The community center offers yoga classes",
            "Wolfgang is on the phone with his friends",
            "Abigail ate lunch by herself in the cafe",
            "The mail carrier delivers at noon",
            "Isabella greeted customers at the door",
        ],
    },
    Case {
        focal: "lost dog",
        pick: "Jane's beagle ran off during the walk this morning and she is searching the park \
               for him",
        others: &[
            "The veterinary clinic opens at 9",
            "Jane works at the bakery",
            "A poster about a missing cat is on the cafe window",
            "Dog food is on sale at the market",
            "Carlos jogs in the park every morning",
            "The kids fed the ducks at the pond",
        ],
    },
    Case {
        focal: "Eddy's birthday present",
        pick: "Mei Lin ordered a metronome for Eddy's birthday and hid it in the closet",
        others: &[
            "Eddy practices piano after dinner",
            "The toy store has wrapped boxes in the window",
            "Mei Lin teaches at the college",
            "On Saturday there will be a street fair",
            "John Lin mows the lawn",
            "A birthday cake is in the bakery window",
        ],
    },
    Case {
        focal: "the cafe's opening hours",
        pick: "Hobbs Cafe opens at 8 am and closes at 8 pm every day",
        others: &[
            "Isabella owns Hobbs Cafe",
            "The cafe's coffee machine broke on Monday",
            "The library opens at 9 am",
            "Klaus prefers working late at night",
            "Yuriko is baking muffins",
            "The bus schedule changed in June",
        ],
    },
    Case {
        focal: "Adam's opinion on the new park",
        pick: "Adam Smith thinks the new park is a waste of money and would rather have a \
               bigger library",
        others: &[
            "The new park has a fountain and a playground",
            "Adam Smith is writing a book on philosophy",
            "Children play soccer in the park on weekends",
            "Money is tight for the Moreno family this month",
            "Latoya takes photographs of birds",
            "A bakery opened on the corner",
        ],
    },
    Case {
        focal: "Yuriko's garden",
        pick: "Yuriko grows tomatoes, basil and peppers in raised beds behind her house",
        others: &[
            "Yuriko is a tax lawyer",
            "The garden center sells compost",
            "Her neighbor Tom complained about the fence",
            "The community garden needs volunteers",
            "Yuriko's husband Adam is a philosopher",
            "A hawk circled the field",
        ],
    },
    Case {
        focal: "Did anyone mention the power outage?",
        pick: "Arthur said the whole east side of town lost electricity for two hours last night",
        others: &[
            "Arthur runs the pub",
            "The power company sent a bill",
            "The candles at the shop sold out",
            "Last night the pub was crowded",
            "Giorgio studies math",
            "The sunset was beautiful",
        ],
    },
    Case {
        focal: "plans for Sunday",
        pick: "On Sunday, Wolfgang and Klaus are going hiking up the hill behind the college",
        others: &[
            "Wolfgang is a student at Oak Hill College",
            "The church bells ring on Sunday mornings",
            "Klaus bought new hiking boots",
            "Planning the garden layout took all afternoon",
            "The grocery store is closed on holidays",
            "Maria is watching a movie",
        ],
    },
];

/// How many cases have the reader's pick among the 3 memories most similar to the focal point,
/// with `embed` giving the vectors. The pick sits at a different place in each case's list.
fn top3_hits(embed: impl Fn(Vec<String>) -> Vec<Vec<f32>>) -> usize {
    let mut hits = 0;
    for (i, case) in CASES.iter().enumerate() {
        let mut memories: Vec<&str> = case.others.to_vec();
        let at = i % (memories.len() + 1);
        memories.insert(at, case.pick);
        let mut texts = vec![case.focal.to_owned()];
        texts.extend(memories.iter().map(|m| (*m).to_owned()));
        let vectors = embed(texts);
        let mut ranked: Vec<(usize, f32)> = vectors[1..]
            .iter()
            .map(|v| cosine(&vectors[0], v))
            .enumerate()
            .collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1));
        let rank = ranked.iter().position(|&(m, _)| m == at).expect("ranked");
        if rank < 3 {
            hits += 1;
        } else {
            eprintln!(
                "miss (rank {}): {:?} -> top {:?}",
                rank + 1,
                case.focal,
                memories[ranked[0].0]
            );
        }
    }
    hits
}

#[test]
fn retrieval_finds_the_memory_a_reader_would_pick() {
    assert_eq!(CASES.len(), 20);
    assert!(
        CASES
            .iter()
            .all(|c| (6..=10).contains(&(c.others.len() + 1)))
    );
    let Some(model) = model() else { return };
    let hits = top3_hits(|texts| model.embed(&texts));
    eprintln!("{MINILM_NAME}: the reader's pick in the top 3 for {hits} of 20 cases");
    assert!(hits >= 17, "only {hits} of 20");
    // The scripted backend's hashed bag of words on the same cases, for comparison.
    let scripted = ScriptedBackend::new(0);
    let bow = top3_hits(|texts| block_on(scripted.embed(texts)).expect("scripted embeds"));
    eprintln!("scripted hashed bag of words: {bow} of 20");
}

/// SmolLM2's mean-pooled hidden states (the local backend's own embeddings) on the same cases:
/// a measurement for comparison, printed, not a target.
#[cfg(feature = "local-llm")]
#[test]
fn retrieval_with_the_chat_models_pooled_states_for_comparison() {
    use bevy_generative_agents::llm::{LocalBackend, LocalConfig};
    let Some(path) = LlmConfig::from_env()
        .ok()
        .and_then(|c| c.local_model_path())
        .filter(|p| p.is_file())
    else {
        eprintln!("SKIPPED: no GGUF chat model in the model cache");
        return;
    };
    let local = LocalBackend::new(LocalConfig::new(&path)).expect("the model loads");
    let hits = top3_hits(|texts| {
        let vectors = block_on(local.embed(texts)).expect("local embeds");
        assert!(vectors.iter().all(|v| v.len() == local.embedding_dim()));
        vectors
    });
    eprintln!(
        "{}: the reader's pick in the top 3 for {hits} of 20 cases",
        local.embedding_model()
    );
}

#[test]
fn the_wrapper_embeds_with_minilm_and_saves_refuse_other_embeddings() {
    let Some(dir) = model_dir() else { return };
    let embedder = MiniLmEmbedder::load(&dir).expect("loads");
    let backend = SentenceEmbeddings::new(Arc::new(ScriptedBackend::new(3)), embedder);
    assert_eq!(backend.embedding_model(), MINILM_NAME);
    assert_eq!(backend.embedding_dim(), 384);
    assert_eq!(backend.name(), "scripted");
    let texts = vec!["the pot is boiling over".to_owned(), String::new()];
    let vectors = block_on(backend.embed(texts.clone())).expect("embeds");
    let direct = model().expect("model").embed(&texts);
    assert!(cosine(&vectors[0], &direct[0]) > 0.99999);
    assert_eq!(vectors[1].len(), 384);

    // A save whose memories were embedded by the chat model's pooled states is refused by a
    // client that embeds with MiniLM, naming both models.
    let root = std::env::temp_dir().join(format!("ga-minilm-save-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    common::scripted_run(0.25, 1, 5, &root);
    let mut save = decode(&root.join("save")).expect("the scripted save decodes");
    save.meta.embedding.model = "SmolLM2-135M-Instruct.Q4_1:mean-pool".into();
    save.meta.embedding.dim = 576;
    let client = LlmClient::new(Arc::new(backend));
    let map = TownMap::builder("elsewhere", 4, 4)
        .build()
        .expect("a tiny map");
    let err = check_save(&save, &map, Some(&client)).expect_err("another embedding model");
    assert!(
        matches!(err, PersistError::EmbeddingMismatch { .. }),
        "{err}"
    );
    let message = err.to_string();
    assert!(
        message.contains("mean-pool") && message.contains(MINILM_NAME),
        "{message}"
    );
    let _ = std::fs::remove_dir_all(&root);
}

/// The option a backend scores best for `request`, asked as a choice among `options`.
fn best_choice(backend: &dyn LlmBackend, request: &ChatRequest, options: &[String]) -> String {
    let scores = block_on(backend.score_choices(ChoiceRequest {
        kind: request.kind.clone(),
        messages: request.messages.clone(),
        options: options.to_vec(),
        affinity: None,
        about: request.about.clone(),
        option_phrases: request.option_phrases.clone(),
    }))
    .expect("scores");
    assert_eq!(scores.len(), options.len());
    let best = (0..options.len())
        .max_by(|&a, &b| scores[a].total_cmp(&scores[b]))
        .expect("options");
    options[best].clone()
}

/// The local default's judge (issue 18): a deciding wrapper rates poignancy by the anchors and
/// places errands by meaning, for requests that say what they are about; a request that does
/// not, and a wrapper that does not decide, leave the question to the chat model.
#[test]
fn the_deciding_wrapper_rates_and_places_by_meaning() {
    let Some(dir) = model_dir() else { return };
    let embedder = MiniLmEmbedder::load(&dir).expect("loads");
    let scripted: Arc<dyn LlmBackend> = Arc::new(ScriptedBackend::new(3));
    let deciding = SentenceEmbeddings::new(Arc::clone(&scripted), embedder.clone()).deciding();
    let rate = |text: &str| -> u8 {
        let request = ChatRequest::new("event_poignancy", format!("Rate: {text}")).with_about(text);
        let answer = block_on(deciding.chat(request)).expect("answers");
        answer.text.parse().expect("a number")
    };
    let mundane = [
        "Sam Lindqvist is brushing his teeth",
        "Elena is sweeping the kitchen floor",
        "Tomas is tying his shoelaces",
    ];
    let poignant = [
        "Priya's father died in the night",
        "Mira got engaged to her partner",
        "Sam's house burned to the ground",
    ];
    for text in mundane {
        assert!(rate(text) <= 3, "{text}: {}", rate(text));
    }
    for text in poignant {
        assert!(rate(text) >= 7, "{text}: {}", rate(text));
    }

    let places: Vec<String> = [
        "Okafor house",
        "Harbor Bakery",
        "Town Library",
        "Maple Park",
    ]
    .map(String::from)
    .to_vec();
    let pick = |about: &str, kind: &str, options: &[String]| -> String {
        best_choice(
            &deciding,
            &ChatRequest::new(kind, "").with_about(about),
            options,
        )
    };
    // Errands worded as the town's plans word them: most go where a reader would send them.
    let errands = [
        ("buying a loaf of bread", "Harbor Bakery"),
        ("borrowing a novel", "Town Library"),
        ("going for a walk", "Maple Park"),
        ("taking a walk", "Maple Park"),
        ("jogging in the morning", "Maple Park"),
        ("having a picnic", "Maple Park"),
        ("sleeping", "Okafor house"),
        ("cooking dinner at home", "Okafor house"),
        ("studying for an exam", "Town Library"),
        ("picking up pastries for breakfast", "Harbor Bakery"),
    ];
    let mut misses = Vec::new();
    for (errand, want) in errands {
        let got = pick(errand, "action_sector", &places);
        if got != want {
            misses.push(format!("{errand} -> {got} (want {want})"));
        }
    }
    println!(
        "places: {} of {} right; misses: {misses:?}",
        errands.len() - misses.len(),
        errands.len()
    );
    assert!(misses.len() <= 2, "{misses:?}");
    let objects: Vec<String> = ["bed", "stove", "bookshelf"].map(String::from).to_vec();
    assert_eq!(
        pick("frying eggs for breakfast", "action_object", &objects),
        "stove"
    );
    assert_eq!(pick("going to sleep", "action_object", &objects), "bed");

    // No plain-words subject, or a wrapper that does not decide: the chat model answers
    // (the scripted town's own answer, not a bare number from the anchors).
    let plain = ChatRequest::new("event_poignancy", "Rate: Sam's father died");
    let by_chat = block_on(deciding.chat(plain.clone())).expect("answers");
    let not_deciding = SentenceEmbeddings::new(scripted, embedder);
    let about = plain.with_about("Sam's father died");
    assert_eq!(
        block_on(not_deciding.chat(about)).expect("answers").text,
        by_chat.text
    );
}

/// Yes/no calls by the rules of thumb (issue 18), as the town asks them: whether to start a
/// conversation (`DecideToTalk`, options yes/no) — friends with free time talk, a persona does
/// not interrupt someone teaching or working through a deadline — and a choice whose options are
/// not yes and no stays with the chat model.
#[test]
fn the_deciding_wrapper_answers_yes_or_no_by_rules_of_thumb() {
    use bevy_generative_agents::cognition::prompts::DecideToTalk;
    use bevy_generative_agents::prompt::{Prompt, PromptLibrary};
    let Some(dir) = model_dir() else { return };
    let embedder = MiniLmEmbedder::load(&dir).expect("loads");
    let scripted: Arc<dyn LlmBackend> = Arc::new(ScriptedBackend::new(3));
    let deciding = SentenceEmbeddings::new(scripted, embedder).deciding();
    let library = PromptLibrary::default();
    let talk = |activity: &str, partner_activity: &str, place: &str| -> bool {
        let prompt = DecideToTalk {
            name: "Mira Okafor".into(),
            partner: "Tomas Reyes".into(),
            time_text: "12:30 pm".into(),
            place: place.into(),
            activity: activity.into(),
            partner_activity: partner_activity.into(),
            memories: vec!["Tomas is a friend from the choir".into()],
            last_chat: None,
        };
        let request = prompt.request(&library).expect("fills");
        assert!(request.about.is_some(), "the town says what it asks");
        best_choice(&deciding, &request, &prompt.options().expect("yes/no")) == "yes"
    };
    let (cafe, park) = ("Riverside Cafe, cafe", "Maple Park, park");
    let (college, home) = ("Northgate College, classroom", "Okafor house, study");
    for (activity, partner, place) in [
        (
            "having lunch with free time",
            "relaxing with a coffee",
            cafe,
        ),
        ("sitting alone looking sad", "walking past", park),
        ("eating lunch", "eating lunch", cafe),
    ] {
        assert!(talk(activity, partner, place), "{activity} / {partner}: no");
    }
    for (activity, partner, place) in [
        (
            "teaching a chemistry lecture to her class",
            "sitting in the lecture",
            college,
        ),
        ("in the middle of an exam", "walking past", college),
        (
            "writing a report against a deadline",
            "reading a book",
            home,
        ),
    ] {
        assert!(
            !talk(activity, partner, place),
            "{activity} / {partner}: yes"
        );
    }

    // Options other than yes and no: the chat model's scores (the scripted backend's own).
    let options: Vec<String> = ["Option 1", "Option 2"].map(String::from).to_vec();
    let request = ChoiceRequest {
        kind: "decide_to_react".into(),
        messages: Vec::new(),
        options,
        affinity: None,
        about: Some("Mira is waiting for the bathroom".into()),
        option_phrases: Vec::new(),
    };
    let judged = block_on(deciding.score_choices(request.clone())).expect("scores");
    let plain = block_on(deciding.inner().score_choices(request)).expect("scores");
    assert_eq!(judged, plain);
}

/// The sector judge knows home and work (issue 18): the town words each sector as the persona
/// sees it, with its rooms ("at home: kitchen, bedroom, bathroom"), so morning routines stay
/// home and work goes to work — with names that say nothing of what a place is for.
#[test]
fn the_sector_judge_knows_home_and_work() {
    use bevy_generative_agents::cognition::prompts::ActionSector;
    use bevy_generative_agents::prompt::{Prompt, PromptLibrary};
    let Some(dir) = model_dir() else { return };
    let embedder = MiniLmEmbedder::load(&dir).expect("loads");
    let scripted: Arc<dyn LlmBackend> = Arc::new(ScriptedBackend::new(3));
    let deciding = SentenceEmbeddings::new(scripted, embedder).deciding();
    let library = PromptLibrary::default();
    let rooms = |list: &[&str]| list.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    let sectors = [
        ("Brandt house", rooms(&["kitchen", "bedroom", "bathroom"])),
        ("Holm house", rooms(&["kitchen", "bedroom", "bathroom"])),
        ("Gull Quay", rooms(&["fish market", "harbour office"])),
        ("The Anchor", rooms(&["bar", "back room"])),
        ("Hillcrest", rooms(&["park", "garden"])),
        ("Corner Shop", rooms(&["store"])),
    ];
    let pick = |action: &str| -> String {
        let prompt = ActionSector {
            name: "Ayla Brandt".into(),
            action: action.into(),
            living_sector: "Brandt house".into(),
            workplace_sector: Some("Gull Quay".into()),
            current_sector: "Brandt house".into(),
            options: sectors.iter().map(|s| s.0.to_owned()).collect(),
            option_arenas: sectors.iter().map(|s| s.1.clone()).collect(),
        };
        let phrases = prompt.option_phrases();
        assert!(phrases[0].starts_with("at home") && phrases[2].starts_with("at work"));
        let request = prompt.request(&library).expect("fills");
        best_choice(&deciding, &request, &prompt.options().expect("options"))
    };
    let cases = [
        ("having breakfast in the kitchen at home", "Brandt house"),
        ("waking up and getting out of bed", "Brandt house"),
        ("brushing her teeth", "Brandt house"),
        ("cooking dinner", "Brandt house"),
        ("selling fish to customers", "Gull Quay"),
        ("going to work", "Gull Quay"),
        ("having a beer with friends", "The Anchor"),
        ("buying milk and bread", "Corner Shop"),
        ("taking a walk among the trees", "Hillcrest"),
    ];
    let misses: Vec<String> = cases
        .iter()
        .filter_map(|(action, want)| {
            let got = pick(action);
            (got != *want).then(|| format!("{action} -> {got} (want {want})"))
        })
        .collect();
    println!(
        "sectors: {} of {} right; misses: {misses:?}",
        cases.len() - misses.len(),
        cases.len()
    );
    // Home and work are never missed; of the errands elsewhere (opaque names such as
    // "The Anchor"), most land where they are done (today 1 of 3: a beer and the shopping
    // stay home — recorded in the closing note).
    assert!(
        misses
            .iter()
            .all(|m| !m.contains("want Brandt house") && !m.contains("want Gull Quay")),
        "{misses:?}"
    );
    assert!(misses.len() <= 2, "{misses:?}");
}
