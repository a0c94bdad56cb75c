//! Decision evals: how well a backend and decoding strategy answer the closed questions the
//! simulation asks (where to go, yes/no, how poignant, when to wake up).
//!
//! An eval file is JSON lines, one item each:
//! `{"kind": "place", "context": "…", "question": "…", "options": ["…", …], "answer": "…",
//! "tolerance": 1}` — `tolerance` (optional) accepts numeric answers within that distance.
//! Every item is asked with the same wording (`item_messages`) and answered by a
//! [`Strategy`]: **score** the options by likelihood (the backend's choice scoring), or
//! **generate** a free answer and match it to an option (`match_option`). [`evaluate`]
//! returns per-kind accuracy beside the chance level, so a small model's numbers can be read
//! honestly: at chance means it is guessing.
//!
//! `smallville eval-decisions FILE [--backend …] [--strategy …]` runs it from the command line
//! (the binary prints the report); the project's own set is `assets/evals/decisions.jsonl`.
//! `smallville bench-local` (feature `local-llm`, module `eval::bench`) measures the embedded
//! backend's speed beside llama.cpp's own.
//!
//! **Layer** (see `tests/layers.rs`): imports [`llm`](crate::llm) only; prints nothing (the
//! binary prints its reports).

#[cfg(feature = "local-llm")]
pub mod bench;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::llm::{
    ChatMessage, ChatRequest, ChoiceRequest, ConfigError, LlmBackend, LlmConfig, build_backend,
};

/// One question of a decision eval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvalItem {
    /// The decision kind (`place`, `yes_no`, `poignancy`, `wake_up_hour`, …): accuracy is
    /// reported per kind.
    pub kind: String,
    /// Background for the question (may be empty).
    #[serde(default)]
    pub context: String,
    /// The question.
    pub question: String,
    /// The closed set of answers.
    pub options: Vec<String>,
    /// The right option.
    pub answer: String,
    /// For numeric answers: options within this distance of the answer also count.
    #[serde(default)]
    pub tolerance: Option<f64>,
}

impl EvalItem {
    /// Whether `choice` counts as right.
    pub(crate) fn is_correct(&self, choice: &str) -> bool {
        if choice.trim().eq_ignore_ascii_case(self.answer.trim()) {
            return true;
        }
        match (
            self.tolerance,
            choice.trim().parse::<f64>(),
            self.answer.trim().parse::<f64>(),
        ) {
            (Some(tolerance), Ok(got), Ok(want)) => (got - want).abs() <= tolerance + 1e-9,
            _ => false,
        }
    }

    /// The accuracy of a uniformly random pick among the options.
    pub fn chance(&self) -> f64 {
        if self.options.is_empty() {
            return 0.0;
        }
        let right = self.options.iter().filter(|o| self.is_correct(o)).count();
        right as f64 / self.options.len() as f64
    }
}

/// Why an eval file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    /// The file could not be read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        #[source]
        source: std::io::Error,
    },
    /// A line is not a valid item.
    #[error("{}:{line}: {message}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// The 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// The backend could not be built.
    #[error(transparent)]
    Config(#[from] ConfigError),
}

/// Parses JSON-lines eval text (blank lines are skipped). `path` only names errors.
pub(crate) fn parse_items(text: &str, path: &Path) -> Result<Vec<EvalItem>, EvalError> {
    let mut items = Vec::new();
    for (index, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let parse_error = |message: String| EvalError::Parse {
            path: path.to_owned(),
            line: index + 1,
            message,
        };
        let item: EvalItem = serde_json::from_str(line).map_err(|e| parse_error(e.to_string()))?;
        if item.options.is_empty() {
            return Err(parse_error("no options".into()));
        }
        if !item.options.iter().any(|o| item.is_correct(o)) {
            return Err(parse_error(format!(
                "the answer `{}` is not among the options",
                item.answer
            )));
        }
        items.push(item);
    }
    Ok(items)
}

/// The most an eval file may hold: 64 MiB (a thousand items are about 1 MB).
pub const MAX_EVAL_FILE_BYTES: u64 = 64 << 20;

/// Reads an eval file (at most [`MAX_EVAL_FILE_BYTES`]).
pub fn load_items(path: &Path) -> Result<Vec<EvalItem>, EvalError> {
    let text = crate::files::read_text_at_most(path, MAX_EVAL_FILE_BYTES).map_err(|err| {
        EvalError::Io {
            path: path.to_owned(),
            source: err.into(),
        }
    })?;
    parse_items(&text, path)
}

/// How a backend answers an item.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Strategy {
    /// Score each option's likelihood (falls back to `generate` when unsupported), as the
    /// simulation asks closed questions; a wake-up hour is generated under its own prompt
    /// kind (`wake_up_hour`, whose grammar the local backend applies), as the simulation asks it.
    #[default]
    Score,
    /// Generate a short answer (greedy) and match it to an option.
    Generate,
}

/// The one wording every item is asked with (the v1 templates' closing style).
pub(crate) fn item_messages(item: &EvalItem) -> Vec<ChatMessage> {
    let mut prompt = String::new();
    if !item.context.trim().is_empty() {
        prompt.push_str(item.context.trim());
        prompt.push_str("\n\n");
    }
    prompt.push_str(item.question.trim());
    prompt.push_str("\nOptions:\n");
    for option in &item.options {
        prompt.push_str("- ");
        prompt.push_str(option);
        prompt.push('\n');
    }
    prompt
        .push_str("\nAnswer with one option from the list, exactly as written, and nothing else.");
    vec![ChatMessage::user(prompt)]
}

/// What an item is about in plain words, as the simulation's prompts say it
/// ([`ChatRequest::about`]): for a poignancy item the event (the context, else the question's
/// text after its last colon); for a place, arena or object item the errand — the context
/// without the subject's name it opens with and without sentences that list the options
/// (an intent, not a map) — for an arena or an object, also without where they are ("is at
/// the bakery and …", "is in the kitchen and …": the place is already chosen, and the
/// simulation asks with the action alone); for a yes/no item the situation and the question;
/// for a wake-up hour the context (the lifestyle line, as the simulation sends it). Other
/// kinds: none.
pub(crate) fn item_about(item: &EvalItem) -> Option<String> {
    let about = match item.kind.as_str() {
        "poignancy" => {
            if item.context.trim().is_empty() {
                item.question.rsplit(':').next().unwrap_or("").to_owned()
            } else {
                item.context.clone()
            }
        }
        "place" => errand(&item.context, &item.options),
        "arena" | "object" => without_whereabouts(&errand(&item.context, &item.options)).to_owned(),
        "wake_up_hour" => item.context.clone(),
        "yes_no" => format!("{} {}", item.context.trim(), item.question.trim()),
        _ => return None,
    };
    let about = about.trim().to_owned();
    (!about.is_empty()).then_some(about)
}

/// `context` without the name it opens with (its leading capitalised words, at most three) and
/// without the sentences that name two or more of `options`.
fn errand(context: &str, options: &[String]) -> String {
    let mut words = context.split_whitespace().peekable();
    let mut skipped = 0;
    while skipped < 3
        && words
            .peek()
            .is_some_and(|w| w.chars().next().is_some_and(char::is_uppercase))
    {
        words.next();
        skipped += 1;
    }
    let rest: Vec<&str> = words.collect();
    let rest = rest.join(" ");
    rest.split_inclusive(['.', '!', '?'])
        .filter(|sentence| {
            let lower = sentence.to_lowercase();
            options
                .iter()
                .filter(|o| lower.contains(&o.to_lowercase()))
                .count()
                < 2
        })
        .collect::<String>()
}

/// `errand` without an opening "is in …, and" / "is at … and" clause: what the persona wants
/// to do, not where it is.
fn without_whereabouts(errand: &str) -> &str {
    let trimmed = errand.trim_start();
    if (trimmed.starts_with("is in ") || trimmed.starts_with("is at "))
        && let Some(at) = trimmed.find(" and ")
    {
        return &trimmed[at + " and ".len()..];
    }
    errand
}

/// The option a generated answer names: an exact match, else the longest option the answer
/// contains, else the first number in the answer when the options are numbers.
pub(crate) fn match_option<'a>(answer: &str, options: &'a [String]) -> Option<&'a str> {
    let clean = answer
        .trim()
        .trim_matches(|c: char| c == '"' || c == '\'' || c == '.' || c == '-' || c == '*')
        .trim();
    let lower = clean.to_lowercase();
    if let Some(exact) = options.iter().find(|o| o.to_lowercase() == lower) {
        return Some(exact);
    }
    let numeric = options.iter().all(|o| o.trim().parse::<i64>().is_ok());
    if numeric {
        let digits: String = clean
            .chars()
            .skip_while(|c| !c.is_ascii_digit())
            .take_while(char::is_ascii_digit)
            .collect();
        return options
            .iter()
            .find(|o| o.trim() == digits)
            .map(String::as_str);
    }
    options
        .iter()
        .filter(|o| !o.is_empty() && lower.contains(&o.to_lowercase()))
        .max_by_key(|o| o.len())
        .map(String::as_str)
}

/// The outcome of one item.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ItemResult {
    /// The item's kind.
    pub kind: String,
    /// The option chosen (`None`: the answer named no option).
    pub choice: Option<String>,
    /// Whether it counts as right.
    pub correct: bool,
}

/// Accuracy of one kind.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct KindScore {
    /// Items asked.
    pub items: usize,
    /// Items answered right.
    pub correct: usize,
    /// Items whose answer named no option.
    pub unmatched: usize,
    /// The expected accuracy of random picks.
    pub chance: f64,
}

impl KindScore {
    /// Correct / items (0 for no items).
    pub fn accuracy(&self) -> f64 {
        if self.items == 0 {
            0.0
        } else {
            self.correct as f64 / self.items as f64
        }
    }
}

/// A finished eval.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EvalReport {
    /// The backend's name.
    pub backend: String,
    /// The model.
    pub model: String,
    /// The strategy actually used.
    pub strategy: String,
    /// Scores per kind.
    pub kinds: BTreeMap<String, KindScore>,
    /// Scores over all items.
    pub overall: KindScore,
    /// Every item's outcome, in file order.
    pub results: Vec<ItemResult>,
}

impl EvalReport {
    /// A plain-text table: kind, items, accuracy, chance.
    pub fn table(&self) -> String {
        let mut out = format!(
            "backend {} · model {} · strategy {}\n{:<16} {:>5} {:>9} {:>8} {:>9}\n",
            self.backend,
            self.model,
            self.strategy,
            "kind",
            "items",
            "accuracy",
            "chance",
            "unmatched"
        );
        let rows = self
            .kinds
            .iter()
            .map(|(k, s)| (k.as_str(), s))
            .chain(std::iter::once(("overall", &self.overall)));
        for (kind, score) in rows {
            out.push_str(&format!(
                "{:<16} {:>5} {:>8.1}% {:>7.1}% {:>9}\n",
                kind,
                score.items,
                100.0 * score.accuracy(),
                100.0 * score.chance,
                score.unmatched
            ));
        }
        out
    }
}

/// Asks every item and scores the answers. Backend failures count as unmatched answers.
pub async fn evaluate(
    backend: &dyn LlmBackend,
    items: &[EvalItem],
    strategy: Strategy,
) -> EvalReport {
    let strategy = if strategy == Strategy::Score && !backend.supports_choice_scoring() {
        Strategy::Generate
    } else {
        strategy
    };
    let mut results = Vec::with_capacity(items.len());
    for item in items {
        let messages = item_messages(item);
        let generated_kind = match strategy {
            Strategy::Generate => Some(format!("eval_{}", item.kind)),
            // The simulation never scores an hour as a choice: it generates it under the
            // `wake_up_hour` kind (the local backend's grammar), and so does the eval.
            Strategy::Score if item.kind == "wake_up_hour" => Some(item.kind.clone()),
            Strategy::Score => None,
        };
        let choice = match generated_kind {
            None => backend
                .score_choices(ChoiceRequest {
                    kind: item.kind.clone(),
                    messages,
                    options: item.options.clone(),
                    affinity: None,
                    about: item_about(item),
                    option_phrases: Vec::new(),
                })
                .await
                .ok()
                .and_then(|scores| {
                    scores
                        .iter()
                        .enumerate()
                        .filter(|(_, s)| s.is_finite())
                        .max_by(|a, b| a.1.total_cmp(b.1))
                        .and_then(|(i, _)| item.options.get(i).cloned())
                }),
            Some(kind) => {
                let mut request = ChatRequest {
                    messages,
                    ..ChatRequest::new(kind, "")
                }
                .with_temperature(0.0)
                .with_max_tokens(24);
                // A wake-up hour says what it is about, as the simulation's prompt does.
                if strategy == Strategy::Score
                    && let Some(about) = item_about(item)
                {
                    request = request.with_about(about);
                }
                backend
                    .chat(request)
                    .await
                    .ok()
                    .and_then(|r| match_option(&r.text, &item.options).map(str::to_owned))
            }
        };
        let correct = choice.as_deref().is_some_and(|c| item.is_correct(c));
        results.push(ItemResult {
            kind: item.kind.clone(),
            choice,
            correct,
        });
    }
    let mut kinds: BTreeMap<String, KindScore> = BTreeMap::new();
    let mut overall = KindScore::default();
    for (item, result) in items.iter().zip(&results) {
        for score in [kinds.entry(item.kind.clone()).or_default(), &mut overall] {
            score.items += 1;
            score.correct += usize::from(result.correct);
            score.unmatched += usize::from(result.choice.is_none());
            score.chance += item.chance();
        }
    }
    for score in kinds.values_mut().chain(std::iter::once(&mut overall)) {
        score.chance /= score.items.max(1) as f64;
    }
    EvalReport {
        backend: backend.name().to_owned(),
        model: backend.model().to_owned(),
        strategy: match strategy {
            Strategy::Score => "score".into(),
            Strategy::Generate => "generate".into(),
        },
        kinds,
        overall,
        results,
    }
}

/// Option scores combined per option (local backend only).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Norm {
    /// Total log-likelihood.
    #[default]
    Sum,
    /// Mean log-likelihood per token.
    Mean,
}

/// The backend an eval runs against: the configured one, except that the local backend scores
/// with `norm`.
pub fn eval_backend(config: &LlmConfig, norm: Norm) -> Result<Arc<dyn LlmBackend>, EvalError> {
    #[cfg(feature = "local-llm")]
    if config.resolved_backend() == crate::llm::BackendChoice::Local && norm == Norm::Mean {
        use crate::llm::{ChoiceNorm, LocalBackend, LocalConfig};
        let path = config.local_model_path().ok_or(ConfigError::Unavailable(
            "local model file (run scripts/fetch-model.sh or pass --model PATH)",
        ))?;
        let mut local = LocalConfig::new(path);
        local.threads = config.local_threads;
        local.choice_norm = ChoiceNorm::Mean;
        let backend = LocalBackend::new(local).map_err(|err| ConfigError::Startup {
            backend: "local",
            reason: err.to_string(),
        })?;
        return Ok(Arc::new(backend));
    }
    let _ = norm;
    Ok(build_backend(config)?)
}

impl std::str::FromStr for Strategy {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.trim().to_ascii_lowercase().as_str() {
            "score" => Ok(Self::Score),
            "generate" => Ok(Self::Generate),
            other => Err(format!(
                "unknown strategy {other:?}: expected score or generate"
            )),
        }
    }
}

impl std::str::FromStr for Norm {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.trim().to_ascii_lowercase().as_str() {
            "sum" => Ok(Self::Sum),
            "mean" => Ok(Self::Mean),
            other => Err(format!("unknown norm {other:?}: expected sum or mean")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::ScriptedBackend;

    fn item(kind: &str, options: &[&str], answer: &str, tolerance: Option<f64>) -> EvalItem {
        EvalItem {
            kind: kind.into(),
            context: String::new(),
            question: "q?".into(),
            options: options.iter().map(|s| (*s).to_owned()).collect(),
            answer: answer.into(),
            tolerance,
        }
    }

    #[test]
    fn an_errand_drops_the_subjects_name_and_the_list_of_places() {
        let mut place = item(
            "place",
            &["Okafor house", "Maple Park", "Riverside Cafe"],
            "x",
            None,
        );
        place.context = "Mira Okafor lives in the Okafor house. She wants a walk under the trees. \
                         The areas are: Okafor house, Maple Park, Riverside Cafe."
            .into();
        assert_eq!(
            item_about(&place).as_deref(),
            Some("lives in the Okafor house. She wants a walk under the trees.")
        );
        let mut rating = item("poignancy", &["1", "2"], "1", Some(2.0));
        rating.question = "On a scale of 1 to 10, rate: Tomas is making coffee".into();
        assert_eq!(
            item_about(&rating).as_deref(),
            Some("Tomas is making coffee")
        );
        rating.context = "Tomas Reyes got engaged.".into();
        assert_eq!(
            item_about(&rating).as_deref(),
            Some("Tomas Reyes got engaged.")
        );
        let mut object = item("object", &["stove", "sink"], "stove", None);
        object.context = "Mira Okafor is in her kitchen and wants to fry eggs.".into();
        assert_eq!(item_about(&object).as_deref(), Some("wants to fry eggs."));
        object.context = "Mira Okafor wants to fry eggs in the kitchen.".into();
        assert_eq!(
            item_about(&object).as_deref(),
            Some("wants to fry eggs in the kitchen.")
        );
        let mut arena = item("arena", &["kitchen", "bedroom"], "kitchen", None);
        arena.context = "Mira Okafor is at Okafor house and wants to fry eggs.".into();
        assert_eq!(item_about(&arena).as_deref(), Some("wants to fry eggs."));
        let mut yes = item("yes_no", &["yes", "no"], "yes", None);
        yes.context = "Mira is hungry.".into();
        yes.question = "Should she eat?".into();
        assert_eq!(
            item_about(&yes).as_deref(),
            Some("Mira is hungry. Should she eat?")
        );
        // A wake-up hour is about its lifestyle line; without one, about nothing.
        let mut wake = item("wake_up_hour", &["6", "7"], "7", Some(1.0));
        assert_eq!(item_about(&wake), None);
        wake.context = "Mira wakes up around 7 am.".into();
        assert_eq!(
            item_about(&wake).as_deref(),
            Some("Mira wakes up around 7 am.")
        );
    }

    #[test]
    fn correctness_and_chance_with_tolerance() {
        let wake = item("wake_up_hour", &["5", "6", "7", "8"], "6", Some(1.0));
        assert!(wake.is_correct("7") && wake.is_correct("5") && !wake.is_correct("8"));
        // 5, 6 and 7 are within 1 of 6: chance is 3/4.
        assert!((wake.chance() - 0.75).abs() < 1e-12);
        let yes = item("yes_no", &["yes", "no"], "yes", None);
        assert!(yes.is_correct(" YES ") && !yes.is_correct("no"));
        assert!((yes.chance() - 0.5).abs() < 1e-12);
    }

    #[test]
    fn generated_answers_match_options() {
        let places: Vec<String> = ["Maple Park", "Maple", "Elm Street Grocery"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        assert_eq!(match_option("maple park.", &places), Some("Maple Park"));
        assert_eq!(
            match_option("She should go to Maple Park today", &places),
            Some("Maple Park"),
            "the longest contained option wins"
        );
        assert_eq!(match_option("the library", &places), None);
        let hours: Vec<String> = (4..=12).map(|h| h.to_string()).collect();
        assert_eq!(match_option("At 7 am", &hours), Some("7"));
        assert_eq!(match_option("10:30", &hours), Some("10"));
        assert_eq!(match_option("3", &hours), None);
    }

    #[test]
    fn parsing_checks_every_line() {
        let path = Path::new("evals.jsonl");
        let text = "{\"kind\":\"yes_no\",\"question\":\"q\",\"options\":[\"yes\",\"no\"],\"answer\":\"yes\"}\n\n";
        assert_eq!(parse_items(text, path).expect("valid").len(), 1);
        let bad = "{\"kind\":\"yes_no\",\"question\":\"q\",\"options\":[\"yes\",\"no\"],\"answer\":\"maybe\"}";
        let err = parse_items(bad, path).expect_err("answer not an option");
        assert!(err.to_string().starts_with("evals.jsonl:1:"), "{err}");
        let err = parse_items("{", path).expect_err("not json");
        assert!(matches!(err, EvalError::Parse { line: 1, .. }));
    }

    #[test]
    fn an_eval_file_larger_than_the_limit_is_refused_unread() {
        let huge =
            std::env::temp_dir().join(format!("bga-huge-evals-{}.jsonl", std::process::id()));
        std::fs::File::create(&huge)
            .and_then(|f| f.set_len(MAX_EVAL_FILE_BYTES + 1))
            .expect("sparse file");
        let err = load_items(&huge).expect_err("too large");
        let _ = std::fs::remove_file(&huge);
        assert!(matches!(err, EvalError::Io { .. }), "{err:?}");
        assert!(err.to_string().contains("more than the 67108864"), "{err}");
    }

    #[test]
    fn project_eval_set_is_valid_and_covers_the_kinds() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/evals/decisions.jsonl");
        let items = load_items(&path).expect("the project's eval set parses");
        assert!(items.len() >= 40, "{}", items.len());
        let kinds: std::collections::BTreeSet<&str> =
            items.iter().map(|i| i.kind.as_str()).collect();
        for kind in [
            "place",
            "arena",
            "object",
            "yes_no",
            "poignancy",
            "wake_up_hour",
        ] {
            assert!(kinds.contains(kind), "{kind} missing: {kinds:?}");
        }
    }

    #[test]
    fn development_sets_are_large_balanced_and_split_by_town() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/evals/dev");
        let tuning = load_items(&dir.join("tuning.jsonl")).expect("the tuning part parses");
        let held_out = load_items(&dir.join("held_out.jsonl")).expect("the held-out part parses");
        let count =
            |items: &[EvalItem], kind: &str| items.iter().filter(|i| i.kind == kind).count();
        let text = |i: &EvalItem| format!("{} {} {}", i.context, i.question, i.options.join(" "));
        for kind in [
            "place",
            "arena",
            "object",
            "poignancy",
            "wake_up_hour",
            "yes_no",
        ] {
            let (tuned, held) = (count(&tuning, kind), count(&held_out, kind));
            assert!(tuned + held >= 150, "{kind}: {tuned} + {held}");
            assert!(held >= 50, "{kind}: {held} held out");
        }
        // The held-out part is another town: nothing of Saltmere or Fernside, and back.
        for item in &held_out {
            let text = text(item);
            for town in ["Saltmere", "Fernside", "Lantern", "Harbour Bakery"] {
                assert!(!text.contains(town), "held out but in {town}: {text}");
            }
        }
        assert!(tuning.iter().all(|i| !text(i).contains("Brackenford")));
        // Answers spread: yes/no about even, hours and ratings over their range.
        for part in [&tuning, &held_out] {
            let yes_no: Vec<_> = part.iter().filter(|i| i.kind == "yes_no").collect();
            let yes = yes_no.iter().filter(|i| i.answer == "yes").count();
            let share = yes as f64 / yes_no.len() as f64;
            assert!((0.4..=0.6).contains(&share), "yes share {share}");
            for (kind, spread) in [("wake_up_hour", 9), ("poignancy", 10)] {
                let answers: std::collections::BTreeSet<&str> = part
                    .iter()
                    .filter(|i| i.kind == kind)
                    .map(|i| i.answer.as_str())
                    .collect();
                assert_eq!(answers.len(), spread, "{kind}: {answers:?}");
            }
        }
    }

    #[test]
    fn evaluate_counts_per_kind_for_both_strategies() {
        // Scoring: the chooser prefers the last option; generation: the answer is "no".
        let backend = ScriptedBackend::new(0)
            .with_chooser("place", |request, _| {
                (0..request.options.len())
                    .map(|i| i as f32 - 10.0)
                    .collect()
            })
            .with_chooser("yes_no", |_, _| vec![0.0, -1.0])
            .with_answer("eval_place", "I think Elm Street Grocery.")
            .with_answer("eval_yes_no", "No.");
        let park = item(
            "place",
            &["Elm Street Grocery", "Maple Park"],
            "Maple Park",
            None,
        );
        let no = item("yes_no", &["yes", "no"], "no", None);
        let items = [park, no];
        let scored = bevy::tasks::block_on(evaluate(&backend, &items, Strategy::Score));
        assert_eq!(scored.strategy, "score");
        assert_eq!(scored.kinds["place"].correct, 1);
        assert_eq!(scored.kinds["yes_no"].correct, 0);
        assert_eq!(scored.overall.items, 2);
        assert!((scored.overall.accuracy() - 0.5).abs() < 1e-12);
        assert!((scored.kinds["yes_no"].chance - 0.5).abs() < 1e-12);
        assert!(scored.table().contains("overall"));

        let generated = bevy::tasks::block_on(evaluate(&backend, &items, Strategy::Generate));
        assert_eq!(generated.strategy, "generate");
        assert_eq!(generated.kinds["place"].correct, 0);
        assert_eq!(
            generated.results[0].choice.as_deref(),
            Some("Elm Street Grocery")
        );
        assert_eq!(generated.kinds["yes_no"].correct, 1);
    }
}
