//! BERT's uncased WordPiece tokenizer, as the model was trained with it (the `BertNormalizer`,
//! `BertPreTokenizer` and `WordPiece` of the model's `tokenizer.json`):
//!
//! 1. **clean**: NUL, U+FFFD and control/format/unassigned/private characters are dropped
//!    (tab, newline and carriage return are whitespace), every whitespace becomes a space;
//! 2. **CJK ideographs** get spaces around them, so each is a word of its own;
//! 3. **accents** are stripped (NFD, then non-spacing marks removed) and the text lowercased;
//! 4. **words**: split on whitespace, and every punctuation character is a word of its own;
//! 5. **word pieces**: greedy longest match from the left against the vocabulary, pieces after
//!    the first spelled `##piece`; a word with an unknown piece, or longer than 100 characters,
//!    is one `[UNK]`.
//!
//! The ids are framed by `[CLS]` … `[SEP]` and cut to the model's maximum length.

use std::collections::HashMap;

use unicode_general_category::{GeneralCategory, get_general_category};
use unicode_normalization::UnicodeNormalization;

/// Words longer than this (in characters) are `[UNK]` (the reference tokenizer's limit).
const MAX_WORD_CHARS: usize = 100;

/// The vocabulary and the special tokens' ids.
#[derive(Debug, Clone)]
pub(super) struct WordPiece {
    ids: HashMap<String, u32>,
    cls: u32,
    sep: u32,
    unk: u32,
}

impl WordPiece {
    /// The vocabulary of a `vocab.txt`: one token per line, its id the line number. Errors
    /// name what is missing or wrong.
    pub(super) fn from_vocab(text: &str) -> Result<Self, String> {
        let mut ids = HashMap::new();
        for (line, token) in text.lines().enumerate() {
            let id = u32::try_from(line).map_err(|_| "too many lines".to_owned())?;
            // A repeated token keeps its first id (the reference does the same).
            ids.entry(token.to_owned()).or_insert(id);
        }
        let special = |name: &str| {
            ids.get(name)
                .copied()
                .ok_or_else(|| format!("the vocabulary has no {name} token"))
        };
        Ok(Self {
            cls: special("[CLS]")?,
            sep: special("[SEP]")?,
            unk: special("[UNK]")?,
            ids,
        })
    }

    /// How many ids the vocabulary uses: one more than its largest id.
    pub(super) fn id_count(&self) -> usize {
        self.ids
            .values()
            .copied()
            .max()
            .map_or(0, |id| id as usize + 1)
    }

    /// The ids of `text`: `[CLS]`, at most `max_tokens - 2` word pieces, `[SEP]`.
    pub(super) fn encode(&self, text: &str, max_tokens: usize) -> Vec<u32> {
        let budget = max_tokens.saturating_sub(2);
        let mut out = vec![self.cls];
        let normalised = normalise(text);
        let mut piece = String::new();
        'words: for word in words(&normalised) {
            let before = out.len();
            let chars: Vec<(usize, char)> = word.char_indices().collect();
            if chars.len() > MAX_WORD_CHARS {
                out.push(self.unk);
            } else {
                let mut start = 0;
                while start < chars.len() {
                    let from = chars[start].0;
                    let mut found = None;
                    for end in (start + 1..=chars.len()).rev() {
                        let to = chars.get(end).map_or(word.len(), |&(at, _)| at);
                        piece.clear();
                        if start > 0 {
                            piece.push_str("##");
                        }
                        piece.push_str(&word[from..to]);
                        if let Some(&id) = self.ids.get(piece.as_str()) {
                            found = Some((id, end));
                            break;
                        }
                    }
                    let Some((id, end)) = found else {
                        out.truncate(before);
                        out.push(self.unk);
                        break;
                    };
                    out.push(id);
                    start = end;
                }
            }
            if out.len() > budget {
                out.truncate(budget + 1);
                break 'words;
            }
        }
        out.push(self.sep);
        out
    }
}

/// Cleaning, CJK spacing, accent stripping and lowercasing (steps 1–3 of the module docs).
fn normalise(text: &str) -> String {
    let mut spaced = String::with_capacity(text.len());
    for c in text.chars() {
        if c == '\0' || c == '\u{fffd}' || is_control(c) {
            continue;
        }
        if is_whitespace(c) {
            spaced.push(' ');
        } else if is_cjk(c) {
            spaced.push(' ');
            spaced.push(c);
            spaced.push(' ');
        } else {
            spaced.push(c);
        }
    }
    let mut out = String::with_capacity(spaced.len());
    for c in spaced
        .nfd()
        .filter(|&c| get_general_category(c) != GeneralCategory::NonspacingMark)
    {
        out.extend(c.to_lowercase());
    }
    out
}

/// Words and punctuation marks (step 4 of the module docs).
fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(char::is_whitespace).flat_map(|chunk| {
        let mut parts = Vec::new();
        let mut start = 0;
        for (at, c) in chunk.char_indices() {
            if is_punctuation(c) {
                if start < at {
                    parts.push(&chunk[start..at]);
                }
                parts.push(&chunk[at..at + c.len_utf8()]);
                start = at + c.len_utf8();
            }
        }
        if start < chunk.len() {
            parts.push(&chunk[start..]);
        }
        parts
    })
}

fn is_whitespace(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r') || c.is_whitespace()
}

fn is_control(c: char) -> bool {
    if matches!(c, '\t' | '\n' | '\r') {
        return false;
    }
    matches!(
        get_general_category(c),
        GeneralCategory::Control
            | GeneralCategory::Format
            | GeneralCategory::Unassigned
            | GeneralCategory::PrivateUse
            | GeneralCategory::Surrogate
    )
}

fn is_punctuation(c: char) -> bool {
    c.is_ascii_punctuation()
        || matches!(
            get_general_category(c),
            GeneralCategory::ConnectorPunctuation
                | GeneralCategory::DashPunctuation
                | GeneralCategory::OpenPunctuation
                | GeneralCategory::ClosePunctuation
                | GeneralCategory::InitialPunctuation
                | GeneralCategory::FinalPunctuation
                | GeneralCategory::OtherPunctuation
        )
}

/// The CJK Unified Ideographs blocks (not Hiragana, Katakana or Hangul, which are written with
/// spaces or split into pieces like any word).
fn is_cjk(c: char) -> bool {
    matches!(
        u32::from(c),
        0x4E00..=0x9FFF
            | 0x3400..=0x4DBF
            | 0x20000..=0x2A6DF
            | 0x2A700..=0x2B73F
            | 0x2B740..=0x2B81F
            | 0x2B820..=0x2CEAF
            | 0xF900..=0xFAFF
            | 0x2F800..=0x2FA1F
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vocab() -> WordPiece {
        let tokens = [
            "[PAD]", "[UNK]", "[CLS]", "[SEP]", "the", "cafe", "un", "##believ", "##able", ",",
            "!", "'", "t", "don", "東", "京", "a", "##a",
        ];
        WordPiece::from_vocab(&tokens.join("\n")).expect("vocab")
    }

    #[test]
    fn words_are_split_into_known_pieces() {
        let v = vocab();
        assert_eq!(v.encode("The CAFÉ!", 256), vec![2, 4, 5, 10, 3]);
        assert_eq!(
            v.encode("unbelievable, don't", 256),
            vec![2, 6, 7, 8, 9, 13, 11, 12, 3]
        );
        // An unknown piece makes the whole word one [UNK]; CJK ideographs are words.
        assert_eq!(v.encode("unbelievably 東京", 256), vec![2, 1, 14, 15, 3]);
        assert_eq!(v.encode("", 256), vec![2, 3]);
        assert_eq!(v.encode(" \t\u{0}\u{200b}\n", 256), vec![2, 3]);
    }

    #[test]
    fn long_input_is_cut_and_long_words_are_unknown() {
        let v = vocab();
        let ids = v.encode(&"the ".repeat(1000), 256);
        assert_eq!(ids.len(), 256);
        assert_eq!((ids[0], ids[255]), (2, 3));
        assert_eq!(v.encode(&"a".repeat(101), 256), vec![2, 1, 3]);
        assert_eq!(v.encode(&"a".repeat(100), 256).len(), 102);
        // A word cut in the middle by the limit keeps only the pieces that fit.
        assert_eq!(v.encode("the unbelievable", 4), vec![2, 4, 6, 3]);
        assert_eq!(v.encode("the", 0), vec![2, 3]);
    }

    #[test]
    fn a_vocabulary_without_special_tokens_is_refused() {
        let err = WordPiece::from_vocab("[CLS]\n[SEP]\nthe").unwrap_err();
        assert!(err.contains("[UNK]"), "{err}");
    }
}
