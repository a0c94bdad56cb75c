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
//!   "taking a walk" to the library: the plain similarity is kept. Places offered by bare name,
//!   with no words from the town, are the exception: their pull on two dozen everyday errands
//!   ([`PLACE_BACKGROUND`]) is subtracted, which sends "sleeping" home, not to the pub.)
//! * **Yes or no** (any choice between exactly "yes" and "no", such as whether to start a
//!   conversation): the situation and question are compared with [`YES_NO_ANCHORS`], everyday
//!   rules of thumb (helping someone who needs it: yes; interrupting someone who is busy: no);
//!   the answer is the side that carries more weight under the same sharp softmax
//!   ([`yes_from_similarities`]). SmolLM2 answered "No" to nearly everything.
//!
//! * **The wake-up hour** (`wake_up_hour`): read off the lifestyle line by [`wake_up_hour`], a
//!   plain reader of times and the words before them, not a model (SmolLM2 answered 12 to most
//!   lines that say "wakes up around 7 am"); a line with no times goes to the chat model.
//!
//! Everything else (free text, option 1 / option 2) stays with the chat model.

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
/// for (`true`: yes), 26 each way. Written from the situations of the development set's tuning
/// part (`assets/evals/dev/tuning.jsonl`: Saltmere and Fernside), generalised to everyday rules,
/// and never from an eval item. Most topics come in pairs, one for each answer (serving a
/// customer / serving a drunk one more drink; going to work / going to work with a fever), so
/// the topic a situation shares with a rule does not decide alone: the detail does.
pub const YES_NO_ANCHORS: &[(&str, bool)] = &[
    ("helping someone who is struggling, hurt or in danger", true),
    ("comforting a friend or relative who is upset", true),
    ("warning someone about a danger they do not see", true),
    (
        "calling for help when there is a fire or an emergency",
        true,
    ),
    ("stepping in to stop bullying or cruelty", true),
    ("eating or drinking when you are hungry or thirsty", true),
    ("resting and accepting care when you are ill", true),
    ("doing your job for a customer who asks", true),
    ("keeping a promise you made", true),
    ("paying back money you owe", true),
    ("returning something lost to its owner", true),
    ("pointing out a costly mistake honestly", true),
    ("accepting an apology and making up after a quarrel", true),
    ("accepting a kind offer of help", true),
    ("chatting with a friend when you both have free time", true),
    ("going to a fun event in your free time", true),
    ("spending free time with your family", true),
    ("sharing food you have spare with neighbours", true),
    ("helping a family member or friend who asks", true),
    ("saying your view when it is your turn to speak", true),
    ("going to bed or home to sleep when you are tired", true),
    ("setting off for work or an appointment in good time", true),
    ("doing a small favour a neighbour asks", true),
    ("starting a chat with a friend who is relaxing nearby", true),
    (
        "talking with someone who shares your table at a meal or a drink",
        true,
    ),
    (
        "greeting someone you know when you both have free time",
        true,
    ),
    ("serving more drink to someone who is already drunk", false),
    (
        "going to work or out among people with a fever or flu",
        false,
    ),
    ("doing what the doctor told you not to do", false),
    ("staying up very late before an early start", false),
    ("starting a long job just before you must leave", false),
    (
        "leaving your customers or your work to chat or have fun",
        false,
    ),
    ("leaving children or people in your care alone", false),
    (
        "interrupting someone who is busy with something important",
        false,
    ),
    ("making loud noise at night while others sleep", false),
    ("waking someone at night for no good reason", false),
    ("keeping money or things that are not yours", false),
    ("stealing or cheating", false),
    ("hiding wrongdoing or destroying evidence", false),
    ("taking revenge or breaking things in anger", false),
    ("spreading gossip or someone's secret", false),
    (
        "using a phone while driving or during a speech or service",
        false,
    ),
    (
        "doing something dangerous, like crossing in traffic or using a machine you were never taught",
        false,
    ),
    ("spending money you need for rent or bills", false),
    ("repeating a conversation you just had", false),
    ("ignoring cheating or rule breaking you see", false),
    ("breaking a rule for your own convenience", false),
    ("selling or eating food that has gone bad", false),
    ("driving after drinking alcohol", false),
    (
        "interrupting someone who is teaching, treating a patient, speaking or performing",
        false,
    ),
    ("disturbing someone who is asleep", false),
    (
        "starting a conversation while you or they are working, teaching or in an exam",
        false,
    ),
];

/// The softmax temperature over the poignancy anchors' similarities: sharp enough that the
/// nearest anchors decide, soft enough that two near ones average (on the development set's
/// tuning part 0.05 rated 91 % within 2; 0.02: 87 %, 0.1: 76 %).
const ANCHOR_TEMPERATURE: f32 = 0.05;

/// The softmax temperature over the rules of thumb (tuning part: 0.05 and 0.1 both answered
/// 80.8 %, 0.2 fewer; 0.05 is the sharper of the two, and the ratings' own).
const YES_NO_TEMPERATURE: f32 = 0.05;

fn kind_uses_objects(kind: &str) -> bool {
    matches!(kind, "object" | "action_object")
}

/// Whether `kind` asks for the hour someone wakes up.
pub fn is_wake_up_kind(kind: &str) -> bool {
    kind == "wake_up_hour"
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
/// `similarities`: `exp((s - max) / temperature)`, summing to 1. `None` when the lengths differ or a
/// similarity is not a number.
fn anchor_weights(similarities: &[f32], count: usize, temperature: f32) -> Option<Vec<f32>> {
    if similarities.len() != count || similarities.iter().any(|s| !s.is_finite()) {
        return None;
    }
    let max = similarities.iter().copied().fold(f32::MIN, f32::max);
    let weights: Vec<f32> = similarities
        .iter()
        .map(|s| ((s - max) / temperature).exp())
        .collect();
    let total: f32 = weights.iter().sum();
    Some(weights.into_iter().map(|w| w / total).collect())
}

/// The rating (1..=10) for a text whose similarity to each of [`ANCHORS`] is `similarities`:
/// the anchors' ratings weighted by their softmax weights. `None` when the lengths differ or a
/// similarity is not a number.
pub fn rating_from_similarities(similarities: &[f32]) -> Option<u8> {
    let weights = anchor_weights(similarities, ANCHORS.len(), ANCHOR_TEMPERATURE)?;
    let rating: f32 = weights.iter().zip(ANCHORS).map(|(w, (_, r))| w * r).sum();
    Some(rating.round().clamp(1.0, 10.0) as u8)
}

/// The weight of "yes" (0..=1) for a situation whose similarity to each of [`YES_NO_ANCHORS`]
/// is `similarities`: the summed softmax weights of the yes-anchors. `None` when the lengths
/// differ or a similarity is not a number.
pub fn yes_from_similarities(similarities: &[f32]) -> Option<f32> {
    let weights = anchor_weights(similarities, YES_NO_ANCHORS.len(), YES_NO_TEMPERATURE)?;
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

/// Everyday errands of every kind, the background a place's pull is measured against: a
/// place named so that it sounds like anything ("Fernside Common", "Brenner cabin") is near
/// every errand, and only what it draws beyond that says it suits this one. Written as
/// general errands, not from any eval or development item.
pub const PLACE_BACKGROUND: &[&str] = &[
    "sleeping",
    "eating breakfast",
    "buying groceries",
    "having a drink with friends",
    "going for a walk",
    "working",
    "reading a book",
    "taking a shower",
    "cooking dinner",
    "seeing a doctor",
    "posting a letter",
    "meeting a friend",
    "studying",
    "shopping",
    "relaxing",
    "playing a game",
    "cleaning",
    "repairing something",
    "attending a meeting",
    "watching a show",
    "taking a bath",
    "getting dressed",
    "writing a letter",
    "resting",
];

/// Whether `kind` chooses among whole places (sectors) by name, not rooms or objects.
fn kind_chooses_sectors(kind: &str) -> bool {
    matches!(kind, "place" | "sector" | "action_sector")
}

/// Each option's score for an errand: its similarity to the errand less its mean similarity to
/// the [`PLACE_BACKGROUND`] errands (`to_background[option][errand]`).
pub fn background_corrected(to_errand: &[f32], to_background: &[Vec<f32>]) -> Vec<f32> {
    to_errand
        .iter()
        .zip(to_background)
        .map(|(s, background)| {
            let mean = background.iter().sum::<f32>() / background.len().max(1) as f32;
            s - mean
        })
        .collect()
}

/// One score per option for the intent `about` (higher is better): the cosine similarity to
/// the intent of each option as `phrases` word it (when there is one per option), else of
/// "use the {option}" for objects, "go to {option}" for rooms, and for places by name "the
/// {option}" less its pull on every errand ([`background_corrected`]; on the development set's
/// tuning part 70.5 % against 63.8 % for the plain "go to {option}", better in both towns).
pub async fn place_scores(
    embedder: &MiniLmEmbedder,
    kind: &str,
    about: &str,
    options: &[String],
    phrases: &[String],
) -> Result<Vec<f32>, LlmError> {
    let by_name = phrases.len() != options.len();
    let worded: Vec<String> = if !by_name {
        phrases.to_vec()
    } else if kind_uses_objects(kind) {
        options.iter().map(|o| format!("use the {o}")).collect()
    } else if kind_chooses_sectors(kind) {
        options.iter().map(|o| format!("the {o}")).collect()
    } else {
        options.iter().map(|o| format!("go to {o}")).collect()
    };
    let scores = similarities_to(embedder, about, worded.iter().map(String::as_str)).await?;
    if scores.len() != options.len() {
        return Err(LlmError::Malformed("embeddings missing".into()));
    }
    if !(by_name && kind_chooses_sectors(kind)) {
        return Ok(scores);
    }
    let mut to_background = Vec::with_capacity(worded.len());
    for option in &worded {
        to_background
            .push(similarities_to(embedder, option, PLACE_BACKGROUND.iter().copied()).await?);
    }
    Ok(background_corrected(&scores, &to_background))
}

/// Words that say the time after them is when someone wakes ("wakes up around 6 am", "gets
/// up at 5", "rises at 7", "is up by 9", "never out of bed before 11", "her alarm goes off at
/// 6"). Of the waking, bed and start words before a time, the nearest says what it is.
const WAKE_WORDS: &[&str] = &[
    "wake",
    "woke",
    "get up",
    "gets up",
    "getting up",
    "got up",
    "rise",
    "rising",
    "is up",
    "be up",
    "out of bed",
    "alarm",
];

/// Words that say the time after them is when someone goes to sleep.
const BED_WORDS: &[&str] = &["bed", "sleep", "asleep"];

/// Words that say the time after them is when something starts (a shift, the shop, work).
const START_WORDS: &[&str] = &["start", "open", "begin", "shift", "work", "be at"];

/// Hour counts as people write them ("eight hours", "an hour", "2 hours").
fn hours_before(text: &str, word_end: usize) -> Option<u32> {
    let words: Vec<&str> = text.get(..word_end)?.split_whitespace().collect();
    let count = words.iter().rev().nth(1)?;
    let numbers = [
        "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
        "twelve",
    ];
    if matches!(*count, "an" | "a") {
        return Some(1);
    }
    count.parse::<u32>().ok().or_else(|| {
        numbers
            .iter()
            .position(|n| n == count)
            .and_then(|i| u32::try_from(i + 1).ok())
    })
}

/// The hour count `text` gives ("eight hours", "an hour", "seven hours later"), and whether it
/// runs back from a start ("… hours before", "… earlier").
fn hours_in(text: &str) -> Option<(u32, bool)> {
    let at = text.find(" hour")?;
    let count = hours_before(text, at + " hour".len())?;
    let rest = &text[at..];
    let back = rest.contains("before") || rest.contains("earlier");
    Some((count, back))
}

/// The hour (0..=23) someone wakes, read off a lifestyle line the way a reader would: a time
/// after a waking word ("wakes up around 6 am", "is up by noon", "sleeps until 10 am"); else
/// worked out from a bedtime and the hours slept ("goes to bed at 9 pm and sleeps eight
/// hours"), a start and the hours before it ("gets up two hours before her 8 am shift"), or a
/// bedtime alone (eight hours later). `None` when the line gives no times to read.
///
/// SmolLM2-135M, asked the hour under a grammar, answered 12 to most lines that state it
/// plainly (24 % on the development set's tuning part); a reader cannot misread "6 am".
pub fn wake_up_hour(lifestyle: &str) -> Option<u32> {
    let lower = lifestyle.to_ascii_lowercase();
    let mentions = crate::llm::offline::time_mentions(&lower);
    let mut bed = None;
    let mut start = None;
    let mut previous_end = 0;
    for mention in &mentions {
        // The words since the last time or clause break decide what this time is.
        let before = lower.get(previous_end..mention.start).unwrap_or("");
        let clause = before
            .rfind([',', ';', '.', ':'])
            .map_or(before, |at| &before[at + 1..]);
        previous_end = mention.end;
        let last = |words: &[&str]| words.iter().filter_map(|w| clause.rfind(w)).max();
        let asleep_until = (clause.trim_end().ends_with("until")
            || clause.trim_end().ends_with("till"))
            && lower.get(..mention.start).is_some_and(|b| {
                let sentence = b.rfind('.').map_or(b, |at| &b[at..]);
                sentence.contains("sleep") || sentence.contains("bed")
            });
        // "out of bed" names waking, not bed: it is matched as a waking word first.
        let wake_at = last(WAKE_WORDS);
        let bed_at = last(BED_WORDS).filter(|&at| {
            clause
                .get(..at + "bed".len())
                .is_none_or(|c| !c.ends_with("out of bed"))
        });
        let start_at = last(START_WORDS);
        let hour = mention.hour % 24;
        let nearest = [wake_at, bed_at, start_at].into_iter().flatten().max();
        if asleep_until || (wake_at.is_some() && wake_at == nearest) {
            return Some(hour);
        } else if bed_at.is_some() && bed_at == nearest {
            bed = bed.or(Some(hour));
        } else if start_at.is_some() && start_at == nearest {
            start = start.or(Some(hour));
        }
    }
    let counted = hours_in(&lower);
    match (counted, start, bed) {
        (Some((hours, true)), Some(start), _) => Some((start + 24 - hours % 24) % 24),
        (Some((hours, false)), _, Some(bed)) => Some((bed + hours) % 24),
        (_, _, Some(bed)) => Some((bed + 8) % 24),
        _ => None,
    }
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
    fn a_place_that_draws_every_errand_loses_its_edge() {
        // The pub is nearest this errand, but it is as near every errand; the park is not.
        let scores = background_corrected(&[0.5, 0.4], &[vec![0.5, 0.4, 0.6], vec![0.1, 0.2]]);
        assert!(scores[1] > scores[0], "{scores:?}");
        assert!((scores[0] - 0.0).abs() < 1e-6 && (scores[1] - 0.25).abs() < 1e-6);
        assert!(kind_chooses_sectors("action_sector") && !kind_chooses_sectors("arena"));
    }

    #[test]
    fn wake_up_hours_are_read_off_the_line() {
        for (line, hour) in [
            // Said plainly, in several ways, among other times.
            (
                "Ana goes to bed around 10 pm, wakes up around 6 am, and eats at 6 pm.",
                6,
            ),
            (
                "Bo is an early riser: he is up at 4 am and opens his stall at 5 am.",
                4,
            ),
            (
                "Cy closes the pub at 1 am and is never out of bed before 11 am.",
                11,
            ),
            (
                "Di works late, gets home at 3 am and sleeps until noon.",
                12,
            ),
            (
                "Ed's alarm goes off at 9 am every day; he goes to bed around 1 am.",
                9,
            ),
            (
                "Fay usually wakes at 5 o'clock and goes to sleep around 9 pm.",
                5,
            ),
            ("Gus sleeps from about 2 am until 10 am.", 10),
            (
                "Hal is up by 6 am most days and never stays up past 10 pm.",
                6,
            ),
            // Worked out from a bedtime or a start.
            (
                "Ida goes to bed at 9 pm and always sleeps exactly eight hours.",
                5,
            ),
            (
                "Jo goes to sleep at 4 am and wakes up seven hours later.",
                11,
            ),
            (
                "Kit starts work at 5 am and gets up one hour before to get ready.",
                4,
            ),
            (
                "Lu gets up two hours before her shift, which starts at 2 pm.",
                12,
            ),
            ("Mo goes to bed around midnight.", 8),
        ] {
            assert_eq!(wake_up_hour(line), Some(hour), "{line}");
        }
        // A night owl's "until 2 am" is not a waking time.
        assert_eq!(
            wake_up_hour("Pat paints until 2 am and wakes up around 10 am."),
            Some(10)
        );
        assert_eq!(wake_up_hour("Quin is a cheerful baker."), None);
        assert_eq!(wake_up_hour(""), None);
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
        assert!(is_wake_up_kind("wake_up_hour") && !is_wake_up_kind("eval_wake_up_hour"));
        assert!(is_place_kind("action_arena") && is_place_kind("place"));
        assert!(is_place_kind("action_place"), "lean mode's room and object");
        assert!(!is_place_kind("decide_to_talk"));
    }
}
