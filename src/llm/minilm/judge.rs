//! Decisions by the right tool: the closed questions a sentence embedder answers better than a
//! tiny chat model (issue 18).
//!
//! SmolLM2-135M rates every event alike and picks places at chance. all-MiniLM-L6-v2 knows
//! what sentences mean, so for the local default it takes two kinds of question off the chat
//! model, whenever the request says in plain words what it is about
//! ([`ChatRequest::about`](crate::llm::ChatRequest::about)):
//!
//! * **Poignancy** (`*_poignancy`, 1..=10): the text is compared with [`ANCHORS`], everyday
//!   moments rated once on Smallville's scale (brushing teeth is 1, a death in the family 10);
//!   the rating is the anchors' ratings weighted by a sharp softmax of the similarities
//!   ([`rating_from_similarities`]).
//! * **Where to go** (places, sectors, arenas, objects): each option is embedded as
//!   "go to {option}" ("use the {option}" for objects) and scored by its cosine similarity to
//!   the errand ([`place_scores`]). (Subtracting each option's similarity to a question with no
//!   errand in it, which scored well on questions that carried the whole prompt, sent errands
//!   as plain as "sleeping" or "taking a walk" to the library: the plain similarity is kept.)
//!
//! Everything else (free text, yes/no, hours) stays with the chat model.

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
    )
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// The rating (1..=10) for a text whose similarity to each of [`ANCHORS`] is `similarities`:
/// the anchors' ratings weighted by `exp((s - max) / T)`. `None` when the lengths differ or a
/// similarity is not a number.
pub fn rating_from_similarities(similarities: &[f32]) -> Option<u8> {
    if similarities.len() != ANCHORS.len() || similarities.iter().any(|s| !s.is_finite()) {
        return None;
    }
    let max = similarities.iter().copied().fold(f32::MIN, f32::max);
    let (mut weighted, mut total) = (0.0f32, 0.0f32);
    for (s, (_, rating)) in similarities.iter().zip(ANCHORS) {
        let w = ((s - max) / ANCHOR_TEMPERATURE).exp();
        weighted += w * rating;
        total += w;
    }
    let rating = (weighted / total).round().clamp(1.0, 10.0);
    Some(rating as u8)
}

/// Rates `text` against the anchors.
pub async fn rate(embedder: &MiniLmEmbedder, text: &str) -> Result<u8, LlmError> {
    let mut texts = vec![text.to_owned()];
    texts.extend(ANCHORS.iter().map(|(a, _)| (*a).to_owned()));
    let vectors = embedder.embed(texts).await?;
    let (first, anchors) = vectors
        .split_first()
        .ok_or_else(|| LlmError::Malformed("no embedding came back".into()))?;
    let similarities: Vec<f32> = anchors.iter().map(|a| dot(first, a)).collect();
    rating_from_similarities(&similarities)
        .ok_or_else(|| LlmError::Malformed("the anchor similarities are unusable".into()))
}

/// One score per option for the intent `about` (higher is better): the cosine similarity of
/// "go to {option}" (for objects "use the {option}") to the intent.
pub async fn place_scores(
    embedder: &MiniLmEmbedder,
    kind: &str,
    about: &str,
    options: &[String],
) -> Result<Vec<f32>, LlmError> {
    let verb = if kind_uses_objects(kind) {
        "use the"
    } else {
        "go to"
    };
    let mut texts = vec![about.to_owned()];
    texts.extend(options.iter().map(|o| format!("{verb} {o}")));
    let vectors = embedder.embed(texts).await?;
    let Some((intent, options_vectors)) = vectors.split_first() else {
        return Err(LlmError::Malformed("no embedding came back".into()));
    };
    if options_vectors.len() != options.len() {
        return Err(LlmError::Malformed("embeddings missing".into()));
    }
    Ok(options_vectors.iter().map(|o| dot(intent, o)).collect())
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
    fn kinds() {
        assert!(is_rating_kind("event_poignancy") && is_rating_kind("poignancy"));
        assert!(!is_rating_kind("wake_up_hour"));
        assert!(is_place_kind("action_arena") && is_place_kind("place"));
        assert!(!is_place_kind("decide_to_talk"));
    }
}
