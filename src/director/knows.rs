//! Who knows X (SPEC §10's information diffusion): read from each persona's own memory stream,
//! never from a script. A persona knows a topic when one of its memories — something it saw, a
//! conversation it had, a thought (a whisper, a reflection, a plan) — mentions every key word of
//! the topic. The answer names the memory that shows it, so a researcher can check how the
//! news arrived: by an inner voice, or through a conversation with whom — and says whether
//! the persona can recall it: whether a memory retrieval returns (an event or a thought; a
//! chat memory is no retrieval candidate) mentions it too (SPEC §16).

use chrono::NaiveDateTime;
use serde::{Deserialize, Serialize};

use crate::memory::{AssociativeMemory, ConceptNode, Filling, NodeKind};

/// Words too common to tell a topic apart.
const STOP_WORDS: &[&str] = &[
    "a", "an", "the", "of", "at", "in", "on", "to", "for", "and", "or", "is", "are", "was", "be",
    "by", "with", "about", "there", "that", "this", "it", "its", "from", "will", "has", "have",
    "any", "some", "who", "what", "when", "where", "knows", "know",
];

/// How one memory showed that a persona knows the topic.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum KnowledgeSource {
    /// A thought (a whisper, a plan, a reflection).
    Thought,
    /// A conversation; the other speakers.
    Conversation(Vec<String>),
    /// Something seen.
    Event,
}

/// A persona who knows the topic, and the first memory that shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Knower {
    /// The persona.
    pub name: String,
    /// When the first such memory was made.
    pub since: NaiveDateTime,
    /// What kind of memory it is.
    pub source: KnowledgeSource,
    /// The memory's description (at most 200 characters).
    pub evidence: String,
    /// Whether a memory retrieval can return (an event or a thought, not a chat) mentions it:
    /// whether the persona can recall it when planning, reflecting or talking (SPEC §16). A
    /// chat memory alone is known, not recalled.
    #[serde(default)]
    pub recallable: bool,
}

/// The key words of a topic: lowercase words of two or more letters that are not stop words,
/// each cut to its first six letters (so "party" finds "parties"), at most eight.
pub(crate) fn topic_terms(topic: &str) -> Vec<String> {
    let mut terms: Vec<String> = Vec::new();
    for word in topic
        .split(|c: char| !c.is_alphanumeric())
        .map(str::to_lowercase)
        .filter(|w| w.chars().count() >= 2 && !STOP_WORDS.contains(&w.as_str()))
    {
        let stem = stem(&word);
        if !terms.contains(&stem) {
            terms.push(stem);
        }
        if terms.len() == 8 {
            break;
        }
    }
    terms
}

/// A word's stem: its first six characters, a trailing plural or possessive "s" dropped first.
fn stem(word: &str) -> String {
    let word = word.strip_suffix("'s").unwrap_or(word);
    let word = if word.chars().count() > 4 {
        word.strip_suffix("ies")
            .map(|w| format!("{w}y"))
            .or_else(|| word.strip_suffix('s').map(str::to_string))
            .unwrap_or_else(|| word.to_string())
    } else {
        word.to_string()
    };
    word.chars().take(6).collect()
}

/// Whether `text` mentions every term.
fn mentions(text: &str, terms: &[String]) -> bool {
    let words: Vec<String> = text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(|w| stem(&w.to_lowercase()))
        .collect();
    terms.iter().all(|t| words.iter().any(|w| w == t))
}

/// The text of a memory that can carry news: its description, and a chat's lines.
fn node_text(node: &ConceptNode) -> String {
    match &node.filling {
        Filling::Chat(lines) => {
            let mut text = node.description.clone();
            for line in lines {
                text.push('\n');
                text.push_str(&line.line);
            }
            text
        }
        Filling::Evidence(_) => node.description.clone(),
    }
}

/// The first memory of `memory` (oldest first) that mentions every term of `terms`, as of
/// `now` (memories made later, or expired, do not count).
pub(crate) fn first_knowledge(
    name: &str,
    memory: &AssociativeMemory,
    terms: &[String],
    now: NaiveDateTime,
) -> Option<Knower> {
    if terms.is_empty() {
        return None;
    }
    // One pass: the memories that mention it (an event's or thought's text is its description).
    let knowing: Vec<&ConceptNode> = memory
        .nodes()
        .iter()
        .filter(|n| n.created <= now && n.expiration.is_none_or(|e| e > now))
        .filter(|n| mentions(&node_text(n), terms))
        .collect();
    let recallable = knowing.iter().any(|n| n.kind != NodeKind::Chat);
    knowing
        .into_iter()
        .min_by_key(|n| (n.created, n.id))
        .map(|node| {
            let source = match node.kind {
                NodeKind::Thought => KnowledgeSource::Thought,
                NodeKind::Event => KnowledgeSource::Event,
                NodeKind::Chat => {
                    let mut others: Vec<String> = match &node.filling {
                        Filling::Chat(lines) => lines
                            .iter()
                            .map(|l| l.speaker.clone())
                            .filter(|s| s != name)
                            .collect(),
                        Filling::Evidence(_) => Vec::new(),
                    };
                    others.sort();
                    others.dedup();
                    KnowledgeSource::Conversation(others)
                }
            };
            Knower {
                name: name.to_string(),
                since: node.created,
                source,
                evidence: node.description.chars().take(200).collect(),
                recallable,
            }
        })
}

/// Every persona of `minds` (name, memory) that knows `topic` at `now`, in the given order.
pub fn who_knows<'a>(
    minds: impl IntoIterator<Item = (&'a str, &'a AssociativeMemory)>,
    topic: &str,
    now: NaiveDateTime,
) -> Vec<Knower> {
    let terms = topic_terms(topic);
    minds
        .into_iter()
        .filter_map(|(name, memory)| first_knowledge(name, memory, &terms, now))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_terms_drop_stop_words_and_stem() {
        assert_eq!(
            topic_terms("a Valentine's party at the café"),
            vec!["valent", "party", "café"]
        );
        assert_eq!(topic_terms("the parties"), vec!["party"]);
        assert!(topic_terms("who knows about it").is_empty());
        assert_eq!(topic_terms(&"word ".repeat(1000)), vec!["word"]);
    }

    /// A fact heard only in a chat is known but not recallable (chat memories are no retrieval
    /// candidates); an event or a thought mentioning it makes it recallable (SPEC §16).
    #[test]
    fn a_chat_alone_is_known_but_not_recalled() {
        use crate::memory::{ChatLine, NewMemory};
        let now = chrono::NaiveDate::from_ymd_opt(2023, 2, 13)
            .and_then(|d| d.and_hms_opt(9, 0, 0))
            .expect("a time");
        let mut memory = AssociativeMemory::new("test", 2);
        let chat = NewMemory::new(now, ("Ada", "chat with", "Ben"), "conversation with Ben")
            .embedding(vec![1.0, 0.0]);
        let lines = vec![ChatLine::new("Ben", "The Valentine party is at five")];
        memory.add_chat(chat, lines).expect("chat");
        let knower = who_knows([("Ada", &memory)], "Valentine party", now);
        assert_eq!(knower.len(), 1);
        assert!(!knower[0].recallable, "only a chat holds it");
        let thought = NewMemory::new(
            now,
            ("Ada", "plans", "party"),
            "For Ada's planning: go to the Valentine party at five",
        )
        .embedding(vec![0.0, 1.0]);
        memory.add_thought(thought, Vec::new()).expect("thought");
        let knower = who_knows([("Ada", &memory)], "Valentine party", now);
        assert!(knower[0].recallable, "a thought holds it");
        assert_eq!(
            knower[0].source,
            KnowledgeSource::Conversation(vec!["Ben".into()])
        );
    }

    #[test]
    fn a_memory_must_mention_every_term() {
        let terms = topic_terms("Valentine party");
        assert!(mentions("Ada is throwing a Valentine's Day party!", &terms));
        assert!(mentions("parties for valentines", &terms));
        assert!(!mentions("Ada is throwing a party", &terms));
        assert!(!mentions("", &terms));
    }
}
