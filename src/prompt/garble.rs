//! Garbled answers: text a model wrote that parses but means nothing — a run of one repeated
//! word, letters that are no language's words, plan times that run backwards, one item said
//! five times. A tiny model under a loose grammar writes such things ("ulcis, iaceo, iaceo,
//! iaceo… at 6:00 pm"); a parser that only checks the shape would turn them into plan items,
//! statuses and memories.
//!
//! [`garbled`] judges one free text, [`garbled_items`] a list (a plan, a schedule, steps).
//! Both are pure and total, and only ever look at the shape of words — never at a word list
//! of one language — so ordinary words and names of any language pass: "Klaus Mueller",
//! "Latoya Williams", "tomar café con María", "Ärger über die Miete". A prompt applies them
//! through [`Prompt::garbled`](super::Prompt::garbled); `run_prompt` then treats the answer as
//! a parse failure (retry, then the fail-safe) and counts it as `garbled` in `usage.json`.
//!
//! The rules, each tuned to leave real answers alone:
//! - **Repeated word**: one word (3+ letters) three times in a row, any word five times in a
//!   row, a phrase of 2–8 words three times in a row, or one word (4+ letters) making up at
//!   least 40% of an answer of 6+ words (3+ times).
//! - **Non-words**: at least two words, and at least a third of the words, are implausible —
//!   letters and digits interleaved (`a3b`; `6am`, `2nd` and `mp3` are fine), 4+ letters with
//!   no vowel (acronyms in capitals are fine), 6+ consonants in a row, one letter 4+ times in
//!   a row, letters of two alphabets in one word, or the filler words of *lorem ipsum*; or an
//!   answer with no word at all.
//! - **Times out of order** (lists that are a day in order): an item's time earlier than the
//!   one before (past midnight once is fine: 11 pm, then 1 am), or three or more items and at
//!   least half of the timed ones at the very same time.
//! - **Repeated items**: in a list of distinct items, one item three times, or a third of the
//!   items repeats; in a lenient list, one item three times that makes up half the list.

use std::collections::BTreeMap;
use std::fmt;

/// Why an answer is garbled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Garble {
    /// A run of one repeated word or phrase, or one word filling the answer.
    RepeatedWord,
    /// Too many tokens that are no plausible word of any language.
    NonWords,
    /// A list's times go backwards, or most items happen at one time.
    TimesOutOfOrder,
    /// The same item over and over.
    RepeatedItems,
}

impl Garble {
    /// A short name, for logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::RepeatedWord => "repeated word",
            Self::NonWords => "non-words",
            Self::TimesOutOfOrder => "times out of order",
            Self::RepeatedItems => "repeated items",
        }
    }
}

impl fmt::Display for Garble {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How repeated items of a list are judged by [`garbled_items`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Repeats {
    /// Items repeat by nature (an hourly schedule works for hours on end).
    #[default]
    Allowed,
    /// Steps that may repeat now and then: garbled when one item comes three times and makes
    /// up at least half of the list.
    Lenient,
    /// Distinct items (a day's plan): garbled when one item comes three times or a third of
    /// the items are repeats.
    Distinct,
}

/// What [`garbled_items`] checks beyond each item's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ItemRules {
    /// How repeated items are judged.
    pub repeats: Repeats,
    /// The items are a day in order: their times (`7:00 am`, `13:30`) must not go backwards.
    pub in_time_order: bool,
}

/// Whether a free-text answer is garbled, and why (`None`: it reads like words).
///
/// ```
/// use bevy_generative_agents::prompt::{Garble, garbled};
///
/// assert_eq!(garbled("wake up and complete the morning routine at 6:00 am"), None);
/// assert_eq!(garbled("ulcis, iaceo, iaceo, iaceo at 6:00 pm"), Some(Garble::RepeatedWord));
/// assert_eq!(garbled("xkcdq vbnmz qwrtp at 5"), Some(Garble::NonWords));
/// ```
pub fn garbled(text: &str) -> Option<Garble> {
    let text = bounded(text);
    if repeated_word(&tokens(text)) {
        return Some(Garble::RepeatedWord);
    }
    let raw: Vec<&str> = raw_tokens(text).collect();
    non_words(&raw, !text.trim().is_empty()).then_some(Garble::NonWords)
}

/// Whether a list answer is garbled: any item by [`garbled`], the words of all items together
/// (non-words spread thinly over short items), then the list `rules`.
pub fn garbled_items<S: AsRef<str>>(items: &[S], rules: ItemRules) -> Option<Garble> {
    let items: Vec<&str> = items.iter().map(|i| bounded(i.as_ref())).collect();
    if let Some(garble) = items.iter().find_map(|item| garbled(item)) {
        return Some(garble);
    }
    let all: Vec<&str> = items.iter().flat_map(|i| raw_tokens(i)).collect();
    if non_words(&all, false) {
        return Some(Garble::NonWords);
    }
    if rules.in_time_order && times_out_of_order(&items) {
        return Some(Garble::TimesOutOfOrder);
    }
    repeated_items(&items, rules.repeats).then_some(Garble::RepeatedItems)
}

/// The longest text looked at, in bytes (cut on a character boundary): a judgement of the
/// first few thousand characters is as good as one of all, and stays cheap on megabytes.
const MAX_JUDGED_BYTES: usize = 8_000;

fn bounded(text: &str) -> &str {
    if text.len() <= MAX_JUDGED_BYTES {
        return text;
    }
    let mut end = MAX_JUDGED_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// The words and numbers of `text`: runs of letters, digits and inner apostrophes.
fn raw_tokens(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_alphanumeric() || c == '\'' || c == '’'))
        .map(|t| t.trim_matches(['\'', '’']))
        .filter(|t| !t.is_empty())
}

/// [`raw_tokens`], lowercased: for comparing words.
fn tokens(text: &str) -> Vec<String> {
    raw_tokens(text).map(str::to_lowercase).collect()
}

fn has_letter(token: &str) -> bool {
    token.chars().any(char::is_alphabetic)
}

fn letter_count(token: &str) -> usize {
    token.chars().filter(|c| c.is_alphabetic()).count()
}

fn repeated_word(tokens: &[String]) -> bool {
    // A word (or phrase) over and over in a row.
    for n in 1..=8 {
        if tokens.len() < n * 3 {
            break;
        }
        let mut i = 0;
        while i + n <= tokens.len() {
            let phrase = &tokens[i..i + n];
            let mut times = 1;
            while i + (times + 1) * n <= tokens.len()
                && tokens[i + times * n..i + (times + 1) * n] == *phrase
            {
                times += 1;
            }
            let garbled = if n == 1 {
                let letters = letter_count(&phrase[0]);
                (times >= 3 && letters >= 3) || (times >= 5 && letters >= 1)
            } else {
                times >= 3 && phrase.iter().any(|t| has_letter(t))
            };
            if garbled {
                return true;
            }
            i += 1;
        }
    }
    // One word filling the answer.
    let words: Vec<&String> = tokens.iter().filter(|t| has_letter(t)).collect();
    if words.len() >= 6 {
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for word in words.iter().filter(|w| letter_count(w) >= 4) {
            *counts.entry(word.as_str()).or_default() += 1;
        }
        if counts.values().any(|&c| c >= 3 && c * 5 >= words.len() * 2) {
            return true;
        }
    }
    false
}

/// Whether too many of `tokens` are no plausible word; `said_something` makes an answer
/// without a single word (only digits and signs) count as non-words too.
fn non_words(tokens: &[&str], said_something: bool) -> bool {
    let words: Vec<&str> = tokens.iter().copied().filter(|t| has_letter(t)).collect();
    if words.is_empty() {
        return said_something;
    }
    let odd = words.iter().filter(|w| implausible(w)).count();
    (odd >= 2 && odd * 3 >= words.len()) || (odd == words.len() && words.len() <= 2)
}

/// Latin-script vowels (with their accented forms) and `y`, which is a vowel in many words.
fn is_vowel(c: char) -> bool {
    matches!(
        c,
        'a' | 'e' | 'i' | 'o' | 'u' | 'y'
            | 'à'..='æ'
            | 'è'..='ï'
            | 'ò'..='ö'
            | 'ø'..='ü'
            | 'ý'
            | 'ÿ'
            | 'ā'..='ą'
            | 'ē'..='ě'
            | 'ĩ'..='ı'
            | 'ō'..='œ'
            | 'ũ'..='ų'
            | 'ơ'
            | 'ư'
    ) || ('\u{1EA0}'..='\u{1EF9}').contains(&c)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Script {
    Latin,
    Greek,
    Cyrillic,
    Other,
}

fn script(c: char) -> Script {
    match c {
        c if c.is_ascii_alphabetic() => Script::Latin,
        '\u{00C0}'..='\u{024F}' | '\u{1E00}'..='\u{1EFF}' => Script::Latin,
        '\u{0370}'..='\u{03FF}' => Script::Greek,
        '\u{0400}'..='\u{04FF}' => Script::Cyrillic,
        _ => Script::Other,
    }
}

/// The filler of *lorem ipsum*, which a small model reaches for when it has nothing to say
/// (only its words that are no living language's: "dolor" is Spanish for pain).
const LOREM: &[&str] = &[
    "lorem",
    "ipsum",
    "amet",
    "consectetur",
    "adipiscing",
    "eiusmod",
    "incididunt",
];

/// Whether `word` (as written, with at least one letter) is no plausible word of any language.
fn implausible(word: &str) -> bool {
    let lower = word.to_lowercase();
    if LOREM.contains(&lower.as_str()) {
        return true;
    }
    // Letters and digits interleaved: "a3b", "l33t" (one switch is fine: "6am", "2nd", "mp3").
    let switches = word
        .chars()
        .filter(|c| c.is_alphanumeric())
        .map(char::is_alphabetic)
        .collect::<Vec<_>>()
        .windows(2)
        .filter(|w| w[0] != w[1])
        .count();
    if switches >= 2 {
        return true;
    }
    // An acronym in capitals ("TV", "HTML", "NPC") has no vowels to judge.
    if word
        .chars()
        .filter(|c| c.is_alphabetic())
        .all(char::is_uppercase)
        && word.chars().count() > 1
    {
        return false;
    }
    let letters: Vec<char> = lower.chars().filter(|c| c.is_alphabetic()).collect();
    // Two alphabets in one word.
    let mut scripts = letters
        .iter()
        .map(|&c| script(c))
        .filter(|s| *s != Script::Other);
    if let Some(first) = scripts.next()
        && scripts.any(|s| s != first)
    {
        return true;
    }
    if !letters.iter().all(|&c| script(c) == Script::Latin) {
        // Other alphabets have other rules of vowels and runs: their words are not judged.
        return false;
    }
    // One letter four times in a row.
    if letters.windows(4).any(|w| w.iter().all(|&c| c == w[0])) {
        return true;
    }
    let consonant_run = letters
        .split(|&c| is_vowel(c))
        .map(<[char]>::len)
        .max()
        .unwrap_or(0);
    let has_vowel = letters.iter().any(|&c| is_vowel(c));
    (!has_vowel && letters.len() >= 4) || consonant_run >= 6
}

/// A time of day in an item: `7:00 am`, `7 pm`, `7.30 p.m.`, or a 24-hour `13:30` / `07:30`.
/// Minutes since midnight.
fn first_time(item: &str) -> Option<u32> {
    let lower = item.to_ascii_lowercase();
    let b = lower.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let starts = b[i].is_ascii_digit() && (i == 0 || !b[i - 1].is_ascii_alphanumeric());
        if !starts {
            i += 1;
            continue;
        }
        let mut j = i;
        while j < b.len() && b[j].is_ascii_digit() {
            j += 1;
        }
        let digits = &lower[i..j];
        let (hour, minute, has_minutes, padded) = if j - i <= 2 {
            let hour: u32 = digits.parse().ok()?;
            let minute = match (b.get(j), b.get(j + 1), b.get(j + 2), b.get(j + 3)) {
                (Some(b':' | b'.'), Some(a), Some(c), next)
                    if a.is_ascii_digit()
                        && c.is_ascii_digit()
                        && !next.is_some_and(u8::is_ascii_digit) =>
                {
                    j += 3;
                    Some(u32::from(a - b'0') * 10 + u32::from(c - b'0'))
                }
                _ => None,
            };
            (
                hour,
                minute.unwrap_or(0),
                minute.is_some(),
                digits.len() == 2,
            )
        } else {
            i = j;
            continue;
        };
        let mut k = j;
        while b.get(k) == Some(&b' ') {
            k += 1;
        }
        let meridiem = match (b.get(k), b.get(k + 1), b.get(k + 2), b.get(k + 3)) {
            (Some(m @ (b'a' | b'p')), Some(b'm'), next, _)
                if !next.is_some_and(u8::is_ascii_alphabetic) =>
            {
                Some(*m == b'p')
            }
            (Some(m @ (b'a' | b'p')), Some(b'.'), Some(b'm'), _) => Some(*m == b'p'),
            _ => None,
        };
        let time = match meridiem {
            Some(pm) if (1..=12).contains(&hour) && minute < 60 => {
                Some((hour % 12 + if pm { 12 } else { 0 }) * 60 + minute)
            }
            // Without am/pm only a clearly 24-hour time counts ("13:30", "07:30").
            None if has_minutes && minute < 60 && hour < 24 && (hour >= 13 || padded) => {
                Some(hour * 60 + minute)
            }
            _ => None,
        };
        if time.is_some() {
            return time;
        }
        i = j.max(i + 1);
    }
    None
}

fn times_out_of_order(items: &[&str]) -> bool {
    let times: Vec<u32> = items.iter().filter_map(|i| first_time(i)).collect();
    let mut wrapped = false;
    for pair in times.windows(2) {
        let (before, after) = (pair[0], pair[1]);
        if after < before {
            // Past midnight, once: 11 pm, then 1 am.
            if !wrapped && before >= 18 * 60 && after < 6 * 60 {
                wrapped = true;
                continue;
            }
            return true;
        }
    }
    let mut counts: BTreeMap<u32, usize> = BTreeMap::new();
    for time in &times {
        *counts.entry(*time).or_default() += 1;
    }
    counts.values().any(|&c| c >= 3 && c * 2 >= times.len())
}

fn repeated_items(items: &[&str], repeats: Repeats) -> bool {
    if repeats == Repeats::Allowed {
        return false;
    }
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for item in items {
        let key = tokens(item).join(" ");
        if !key.is_empty() {
            *counts.entry(key).or_default() += 1;
        }
    }
    let total: usize = counts.values().sum();
    let most = counts.values().copied().max().unwrap_or(0);
    match repeats {
        Repeats::Allowed => false,
        Repeats::Lenient => most >= 3 && most * 2 >= total,
        Repeats::Distinct => {
            let repeated = total - counts.len();
            most >= 3 || (repeated > 0 && repeated * 3 >= total)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Answers real models give and the offline town script writes: none is garbled.
    const GOOD: &[&str] = &[
        "wake up and complete the morning routine at 6:00 am",
        "eat breakfast at 7:00 am",
        "open Hobbs Cafe at 8:00 am",
        "have lunch with Klaus Mueller at 12:00 pm",
        "work on the research paper from 1:00 pm to 5:00 pm",
        "Isabella Rodriguez is planning a Valentine's Day party at Hobbs Cafe",
        "Latoya Williams is taking photos in the park",
        "conversing about the Valentine's Day party on February 14th",
        "Maria thinks Klaus is a kind and thoughtful friend who loves music.",
        "Hi Sam! Did you hear about the open mic night? It's at 7 pm.",
        "Sure, see you there. Bye!",
        "Oh no, no, no. That can't be right.",
        "Ha ha, that's funny!",
        "tomar café con María y José en la plaza",
        "tomar algo para el dolor de cabeza antes de la clase",
        "Ärger über die Miete mit Frau Schröder besprechen",
        "aller au marché acheter du pain et des œufs",
        "čtvrtek: nákup v obchodě s Jiřím",
        "Встреча с Анной в кафе в 15:00",
        "与李明一起在咖啡馆吃午饭",
        "cooking eggs",
        "washing up",
        "sleeping",
        "reading a book at home",
        "watching TV and checking HTML emails on the PC",
        "buy groceries at the store on 2nd street",
        "the strengths of the new design",
        "Mei Lin and Eddy Lin talked about Eddy's music composition for the class",
        "Abigail Chen should show Francisco Lopez her animation project tomorrow",
        "feeling excited about the upcoming mayoral election",
        "go to bed at 11:00 pm",
        "Carmen Ortiz is reviewing the supply order for Harvey Oak Supply Store",
        "Yuriko Yamamoto wants to ask Tom Moreno about the tax forms",
        "being used for cooking",
        "idle",
        "Nguyễn Thị Hoa hẹn gặp bạn ở quán cà phê",
        "Wolfgang Schulz trains for the 10k race at 6am",
        "Arthur Burton serves drinks at The Rose and Crown Pub",
    ];

    /// Answers seen from a 135M model and garbled on purpose: every one is caught.
    const BAD: &[&str] = &[
        "ulcis, iaceo, iaceo, iaceo at 6:00 pm",
        "ulcis, iaceo, iaceo, iaceo… at 6:00 pm",
        "iaceo iaceo iaceo",
        "the the the the the the",
        "dinner at 2:30 pm, dinner at 2:30 pm, dinner at 2:30 pm",
        "I think I think I think so",
        "go go go go go",
        "xkcdq vbnmz qwrtp at 5",
        "brrrrt zzzzz kkkkk",
        "sdfghj klmnbv",
        "a3b4 c5d6 e7f8",
        "l33t h4x0r w0rds",
        "Lorem ipsum dolor sit amet",
        "lorem ipsum",
        "wqxz ptkl",
        "hnnngh grrrr mmmmm",
        "ррaбota kaфe",
        "...",
        "12 34 56 :: 78",
        "tsktsk bcdfgh xyzzy plmkn",
        "Klaus Klaus Klaus",
        "working working working on the paper",
        "sleep sleep eat sleep sleep eat sleep sleep",
        "at the cafe at the cafe at the cafe",
        "ok ok ok ok ok",
        "qqqq wwww",
        "ulcis iaceo ulcis iaceo ulcis iaceo",
        "bcd fgh jkl mnp qrst vwxz",
        "Maria is at 9x9x9 with 3a3a3",
        "nrmlz thr wrds",
        "iaceo, ulcis, iaceo, dolor, iaceo, amet, iaceo",
    ];

    #[test]
    fn good_answers_are_never_garbled() {
        assert!(GOOD.len() >= 30);
        for answer in GOOD {
            assert_eq!(garbled(answer), None, "{answer:?} was judged garbled");
        }
    }

    #[test]
    fn garbled_answers_are_caught() {
        assert!(BAD.len() >= 30);
        for answer in BAD {
            assert!(garbled(answer).is_some(), "{answer:?} passed as words");
        }
        assert_eq!(garbled("iaceo iaceo iaceo"), Some(Garble::RepeatedWord));
        assert_eq!(garbled("xkcdq vbnmz qwrtp at 5"), Some(Garble::NonWords));
        assert_eq!(
            garbled(""),
            None,
            "an empty answer is the parser's to refuse"
        );
    }

    const PLAN: &[&str] = &[
        "eat breakfast at 7:00 am",
        "open the cafe at 8:00 am",
        "have lunch at 12:00 pm",
        "work at the cafe from 1:00 pm to 5:00 pm",
        "have dinner at 6:00 pm",
        "relax and read from 7:00 pm to 9:00 pm",
        "go to bed at 11:00 pm",
    ];

    fn plan_rules() -> ItemRules {
        ItemRules {
            repeats: Repeats::Distinct,
            in_time_order: true,
        }
    }

    #[test]
    fn a_plan_in_order_passes() {
        assert_eq!(garbled_items(PLAN, plan_rules()), None);
        // Past midnight once is fine, and so are items without times.
        let late = [
            "work on the paper at 10:00 pm",
            "go to bed at 1:00 am",
            "dream",
        ];
        assert_eq!(garbled_items(&late, plan_rules()), None);
        // 24-hour times.
        let day = ["breakfast at 07:30", "lunch at 13:00", "dinner at 19:00"];
        assert_eq!(garbled_items(&day, plan_rules()), None);
        // One item twice (morning and afternoon work) is fine.
        let twice = [
            "work at the cafe",
            "have lunch at 12:00 pm",
            "work at the cafe",
            "have dinner at 6:00 pm",
            "go to bed at 11:00 pm",
        ];
        assert_eq!(garbled_items(&twice, plan_rules()), None);
    }

    #[test]
    fn a_garbled_plan_is_caught() {
        let backwards = [
            "eat breakfast at 7:00 am",
            "have dinner at 6:00 pm",
            "have lunch at 12:00 pm",
            "go to bed at 11:00 pm",
        ];
        assert_eq!(
            garbled_items(&backwards, plan_rules()),
            Some(Garble::TimesOutOfOrder)
        );
        let same_time = [
            "eat breakfast at 2:30 pm",
            "work at 2:30 pm",
            "have dinner at 2:30 pm",
            "read at 2:30 pm",
            "go to bed at 11:00 pm",
        ];
        assert_eq!(
            garbled_items(&same_time, plan_rules()),
            Some(Garble::TimesOutOfOrder)
        );
        let five = ["dinner at 2:30 pm"; 5];
        assert!(garbled_items(&five, plan_rules()).is_some());
        let untimed = ["iaceo", "iaceo", "iaceo", "ulcis", "iaceo"];
        assert_eq!(
            garbled_items(&untimed, plan_rules()),
            Some(Garble::RepeatedItems)
        );
        let observed = ["ulcis, iaceo, iaceo, iaceo… at 6:00 pm", "eat at 7:00 pm"];
        assert_eq!(
            garbled_items(&observed, plan_rules()),
            Some(Garble::RepeatedWord)
        );
        // Non-words spread thinly over short items.
        let thin = ["eat xkcdq", "read vbnmz", "go to qwrtp", "sleep"];
        assert_eq!(
            garbled_items(&thin, ItemRules::default()),
            Some(Garble::NonWords)
        );
    }

    #[test]
    fn a_schedule_may_repeat_and_steps_a_little() {
        let hours = [
            "sleeping",
            "working at the cafe",
            "working at the cafe",
            "working at the cafe",
            "sleeping",
        ];
        assert_eq!(garbled_items(&hours, ItemRules::default()), None);
        let lenient = ItemRules {
            repeats: Repeats::Lenient,
            in_time_order: false,
        };
        let steps = [
            "checking the oven",
            "kneading dough",
            "checking the oven",
            "serving",
        ];
        assert_eq!(garbled_items(&steps, lenient), None);
        let stuck = [
            "checking the oven",
            "checking the oven",
            "checking the oven",
            "serving",
        ];
        assert_eq!(garbled_items(&stuck, lenient), Some(Garble::RepeatedItems));
    }

    #[test]
    fn times_are_read_in_their_usual_forms() {
        assert_eq!(first_time("dinner at 6:00 pm"), Some(18 * 60));
        assert_eq!(first_time("dinner at 6 p.m."), Some(18 * 60));
        assert_eq!(first_time("lunch at 12:30 PM"), Some(12 * 60 + 30));
        assert_eq!(first_time("up at 12 am"), Some(0));
        assert_eq!(first_time("meet at 13:15"), Some(13 * 60 + 15));
        assert_eq!(first_time("meet at 07:15"), Some(7 * 60 + 15));
        assert_eq!(first_time("buy 2 apples at 5pm"), Some(17 * 60));
        // Ambiguous or not a time at all.
        assert_eq!(first_time("meet at 7:15"), None);
        assert_eq!(first_time("buy 2 apples"), None);
        assert_eq!(first_time("room 101"), None);
        assert_eq!(first_time("at 25:00"), None);
    }

    #[test]
    fn huge_answers_are_judged_quickly_and_safely() {
        let huge = "é".repeat(100_000);
        let _ = garbled(&huge);
        let words = "the cat sat on a mat and ".repeat(10_000);
        assert_eq!(garbled(&words), Some(Garble::RepeatedWord));
    }
}
