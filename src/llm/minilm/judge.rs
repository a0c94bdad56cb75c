//! Decisions by the right tool: the closed questions a sentence embedder answers better than a
//! tiny chat model (issue 18).
//!
//! SmolLM2-135M rates every event alike and picks places at chance. all-MiniLM-L6-v2 knows
//! what sentences mean, so for the local default it takes three kinds of question off the chat
//! model, whenever the request says in plain words what it is about
//! ([`ChatRequest::about`](crate::llm::ChatRequest::about)):
//!
//! * **Poignancy** (`*_poignancy`, 1..=10): the text is compared with [`ANCHORS`], everyday
//!   moments rated once on Smallville's scale (brushing teeth is 1, a death in the family 10);
//!   the rating is the anchors' ratings weighted by a sharp softmax of the similarities
//!   ([`rating_from_similarities`]).
//! * **Where to go** (places, sectors, arenas, objects): each option is embedded as
//!   "go to {option}" ("use the {option}" for objects) — or as the request words it: the town
//!   says which sector is home and which is work, with their rooms ("at home: kitchen,
//!   bedroom") — and scored by its cosine similarity to the errand ([`place_scores`]).
//!   (Subtracting each option's similarity to a question with no errand in it, which scored
//!   well on questions that carried the whole prompt, sent errands as plain as "sleeping" or
//!   "taking a walk" to the library: the plain similarity is kept.)
//! * **Yes or no** (any choice between exactly "yes" and "no", such as whether to start a
//!   conversation): the situation and question are compared with [`YES_NO_ANCHORS`], everyday
//!   rules of thumb (helping someone who needs it: yes; interrupting someone who is busy: no);
//!   the answer is the side that carries more weight under the same sharp softmax
//!   ([`yes_from_similarities`]). SmolLM2 answered "No" to nearly everything.
//!
//! Everything else (free text, hours, option 1 / option 2) stays with the chat model.

use super::MiniLmEmbedder;
use crate::llm::LlmError;

/// Everyday moments and life events, each rated once on Smallville's poignancy scale (1: purely
/// mundane, 10: extremely poignant). Written for the scale, not for any eval item.
pub const ANCHORS: &[(&str, f32)] = &[
    ("brushing teeth", 1.0),
    ("making the bed", 1.0),
    ("combing hair", 1.0),
    ("watering the plants", 1.0),
    ("ironing a shirt", 1.0),
    ("commuting on the bus", 1.0),
    ("eating breakfast", 2.0),
    ("reading the newspaper", 2.0),
    ("buying groceries", 2.0),
    ("chatting with a neighbour", 3.0),
    ("having lunch with a friend", 3.0),
    ("finishing a hard project at work", 4.0),
    ("an argument with a friend", 5.0),
    ("meeting someone new and interesting", 5.0),
    ("getting a promotion", 7.0),
    ("moving to a new city", 7.0),
    ("a close friend is seriously ill", 8.0),
    ("being accepted to college", 8.0),
    ("a break up with a partner", 8.0),
    ("getting married", 9.0),
    ("a baby is born in the family", 9.0),
    ("the house burned down", 9.0),
    ("a parent has died", 10.0),
];

/// Rules of thumb for a persona's everyday yes/no calls, each marked with the answer it stands
/// for (`true`: yes). Written once as general rules of everyday life, balanced between the two
/// answers; chosen on `assets/evals/dev/yes_no.jsonl`, not on any eval item.
pub const YES_NO_ANCHORS: &[(&str, bool)] = &[
    ("helping someone who needs help", true),
    ("comforting a friend or family member who is upset", true),
    ("eating when hungry at mealtime", true),
    ("drinking when thirsty", true),
    ("resting or sleeping when tired at night", true),
    ("checking on a possible danger such as fire or smoke", true),
    ("accepting a kind offer of help when you need it", true),
    ("greeting a friend you meet when you both have time", true),
    ("chatting with a friend or colleague during free time", true),
    ("leaving on time to keep an appointment or promise", true),
    ("going to work or class when it is time", true),
    ("returning something that belongs to someone else", true),
    ("going to a fun event in your free time", true),
    ("serving a customer who asks for something", true),
    ("making up with a family member after a quarrel", true),
    ("waking someone up at night for no good reason", false),
    (
        "interrupting your work or a class to chat about nothing",
        false,
    ),
    ("interrupting someone who is busy", false),
    ("doing something dangerous or illegal", false),
    ("using a phone while driving", false),
    ("partying late before an important day", false),
    ("eating something that will make you ill", false),
    ("starting a long activity just before you must leave", false),
    ("repeating a conversation you just had", false),
    (
        "doing chores in the middle of the night instead of sleeping",
        false,
    ),
    ("leaving people in your care alone", false),
    ("spending money you need for bills", false),
    ("being loud where people need quiet", false),
    ("taking something that is not yours", false),
    ("going out among people when you are sick", false),
];

/// The softmax temperature over anchor similarities: sharp enough that the nearest anchors
/// decide, soft enough that two near ones average.
const ANCHOR_TEMPERATURE: f32 = 0.05;

fn kind_uses_objects(kind: &str) -> bool {
    matches!(kind, "object" | "action_object")
}

/// Whether `kind` is a poignancy rating.
pub fn is_rating_kind(kind: &str) -> bool {
    kind == "poignancy" || kind.ends_with("_poignancy")
}

/// Whether a choice is between exactly "yes" and "no" (in either order, any case). Returns the
/// index of "yes".
pub fn yes_index(options: &[String]) -> Option<usize> {
    let [a, b] = options else { return None };
    let (a, b) = (a.trim().to_ascii_lowercase(), b.trim().to_ascii_lowercase());
    match (a.as_str(), b.as_str()) {
        ("yes", "no") => Some(0),
        ("no", "yes") => Some(1),
        _ => None,
    }
}

/// Whether `kind` asks where to go or what to use among named places.
pub fn is_place_kind(kind: &str) -> bool {
    matches!(
        kind,
        "place"
            | "sector"
            | "arena"
            | "object"
            | "action_sector"
            | "action_arena"
            | "action_object"
            | "action_place"
    )
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// The anchors' weights for a text whose similarity to each of `count` anchors is
/// `similarities`: `exp((s - max) / T)`, summing to 1. `None` when the lengths differ or a
/// similarity is not a number.
fn anchor_weights(similarities: &[f32], count: usize) -> Option<Vec<f32>> {
    if similarities.len() != count || similarities.iter().any(|s| !s.is_finite()) {
        return None;
    }
    let max = similarities.iter().copied().fold(f32::MIN, f32::max);
    let weights: Vec<f32> = similarities
        .iter()
        .map(|s| ((s - max) / ANCHOR_TEMPERATURE).exp())
        .collect();
    let total: f32 = weights.iter().sum();
    Some(weights.into_iter().map(|w| w / total).collect())
}

/// The rating (1..=10) for a text whose similarity to each of [`ANCHORS`] is `similarities`:
/// the anchors' ratings weighted by their softmax weights. `None` when the lengths differ or a
/// similarity is not a number.
pub fn rating_from_similarities(similarities: &[f32]) -> Option<u8> {
    let weights = anchor_weights(similarities, ANCHORS.len())?;
    let rating: f32 = weights.iter().zip(ANCHORS).map(|(w, (_, r))| w * r).sum();
    Some(rating.round().clamp(1.0, 10.0) as u8)
}

/// The weight of "yes" (0..=1) for a situation whose similarity to each of [`YES_NO_ANCHORS`]
/// is `similarities`: the summed softmax weights of the yes-anchors. `None` when the lengths
/// differ or a similarity is not a number.
pub fn yes_from_similarities(similarities: &[f32]) -> Option<f32> {
    let weights = anchor_weights(similarities, YES_NO_ANCHORS.len())?;
    Some(
        weights
            .iter()
            .zip(YES_NO_ANCHORS)
            .filter(|(_, (_, yes))| *yes)
            .map(|(w, _)| w)
            .sum(),
    )
}

/// Scores for a yes/no choice about the situation `about`, whose "yes" is option `yes_at` (0
/// or 1, as [`yes_index`] finds it): the weight of each answer among the rules of thumb.
pub async fn yes_no_scores(
    embedder: &MiniLmEmbedder,
    about: &str,
    yes_at: usize,
) -> Result<Vec<f32>, LlmError> {
    if yes_at > 1 {
        return Err(LlmError::Malformed(
            "a yes/no choice has two options".into(),
        ));
    }
    let similarities = similarities_to(embedder, about, YES_NO_ANCHORS.iter().map(|a| a.0)).await?;
    let yes = yes_from_similarities(&similarities)
        .ok_or_else(|| LlmError::Malformed("the anchor similarities are unusable".into()))?;
    let mut scores = vec![1.0 - yes; 2];
    scores[yes_at] = yes;
    Ok(scores)
}

/// The cosine similarity of `text` to each of `anchors` (the embedder's vectors are unit
/// length).
async fn similarities_to<'a>(
    embedder: &MiniLmEmbedder,
    text: &str,
    anchors: impl Iterator<Item = &'a str>,
) -> Result<Vec<f32>, LlmError> {
    let mut texts = vec![text.to_owned()];
    texts.extend(anchors.map(str::to_owned));
    let vectors = embedder.embed(texts).await?;
    let (first, rest) = vectors
        .split_first()
        .ok_or_else(|| LlmError::Malformed("no embedding came back".into()))?;
    Ok(rest.iter().map(|a| dot(first, a)).collect())
}

/// Rates `text` against the anchors.
pub async fn rate(embedder: &MiniLmEmbedder, text: &str) -> Result<u8, LlmError> {
    let similarities = similarities_to(embedder, text, ANCHORS.iter().map(|a| a.0)).await?;
    rating_from_similarities(&similarities)
        .ok_or_else(|| LlmError::Malformed("the anchor similarities are unusable".into()))
}

/// One score per option for the intent `about` (higher is better): the cosine similarity to
/// the intent of each option as `phrases` word it (when there is one per option), else of
/// "go to {option}" (for objects "use the {option}").
pub async fn place_scores(
    embedder: &MiniLmEmbedder,
    kind: &str,
    about: &str,
    options: &[String],
    phrases: &[String],
) -> Result<Vec<f32>, LlmError> {
    let verb = if kind_uses_objects(kind) {
        "use the"
    } else {
        "go to"
    };
    let worded: Vec<String> = if phrases.len() == options.len() {
        phrases.to_vec()
    } else {
        options.iter().map(|o| format!("{verb} {o}")).collect()
    };
    let scores = similarities_to(embedder, about, worded.iter().map(String::as_str)).await?;
    if scores.len() != options.len() {
        return Err(LlmError::Malformed("embeddings missing".into()));
    }
    Ok(scores)
}

/// Scores for a rating question asked as a choice among numbers: the closer an option is to
/// the rating, the higher (an option that is not a number scores lowest).
pub fn rating_option_scores(rating: u8, options: &[String]) -> Vec<f32> {
    options
        .iter()
        .map(|o| {
            o.trim()
                .parse::<f32>()
                .map_or(f32::MIN, |v| -(v - f32::from(rating)).abs())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nearest_anchor_decides_and_close_ones_average() {
        let mut s = vec![0.0; ANCHORS.len()];
        let death = ANCHORS.iter().position(|a| a.1 == 10.0).unwrap_or(0);
        s[death] = 0.9;
        assert_eq!(rating_from_similarities(&s), Some(10));
        let teeth = 0;
        let mut s = vec![0.0; ANCHORS.len()];
        s[teeth] = 0.8;
        assert_eq!(rating_from_similarities(&s), Some(1));
        // Two anchors equally near: about their mean (5.5; the far anchors weigh a little).
        s[death] = 0.8;
        assert!(matches!(rating_from_similarities(&s), Some(5 | 6)));
    }

    #[test]
    fn unusable_similarities_give_no_rating() {
        assert_eq!(rating_from_similarities(&[0.5]), None);
        let mut s = vec![0.1; ANCHORS.len()];
        s[3] = f32::NAN;
        assert_eq!(rating_from_similarities(&s), None);
    }

    #[test]
    fn rating_options_prefer_the_nearest_number() {
        let options: Vec<String> = ["1", "5", "9", "x"].map(String::from).to_vec();
        let scores = rating_option_scores(8, &options);
        let best = (0..4).max_by(|&a, &b| scores[a].total_cmp(&scores[b]));
        assert_eq!(best, Some(2));
        assert_eq!(scores[3], f32::MIN);
    }

    #[test]
    fn the_weightier_side_of_the_rules_answers() {
        let yes = YES_NO_ANCHORS.iter().position(|a| a.1).unwrap_or(0);
        let no = YES_NO_ANCHORS.iter().position(|a| !a.1).unwrap_or(0);
        let mut s = vec![0.1; YES_NO_ANCHORS.len()];
        s[yes] = 0.7;
        assert!(yes_from_similarities(&s).is_some_and(|p| p > 0.9));
        s[no] = 0.8;
        assert!(yes_from_similarities(&s).is_some_and(|p| p < 0.2));
        s[no] = f32::INFINITY;
        assert_eq!(yes_from_similarities(&s), None);
        assert_eq!(yes_from_similarities(&[0.3]), None);
        // The anchors speak for both answers about equally.
        let yeses = YES_NO_ANCHORS.iter().filter(|a| a.1).count();
        assert_eq!(yeses * 2, YES_NO_ANCHORS.len());
    }

    #[test]
    fn yes_and_no_are_found_in_either_order() {
        let options = |a: &str, b: &str| vec![a.to_owned(), b.to_owned()];
        assert_eq!(yes_index(&options("yes", "no")), Some(0));
        assert_eq!(yes_index(&options(" No", "YES ")), Some(1));
        assert_eq!(yes_index(&options("Option 1", "Option 2")), None);
        assert_eq!(yes_index(&["yes".to_owned()]), None);
    }

    #[test]
    fn kinds() {
        assert!(is_rating_kind("event_poignancy") && is_rating_kind("poignancy"));
        assert!(!is_rating_kind("wake_up_hour"));
        assert!(is_place_kind("action_arena") && is_place_kind("place"));
        assert!(is_place_kind("action_place"), "lean mode's room and object");
        assert!(!is_place_kind("decide_to_talk"));
    }
}
