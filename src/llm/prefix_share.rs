//! How much of each prompt a server's prefix cache could reuse.
//!
//! A server with a prefix cache (llama.cpp's `llama-server`, vLLM, OpenAI) decodes only what
//! follows the longest prefix it still holds. Prompts laid out stable-first — the persona's
//! identity and long-lived context before the question of the moment — share most of their text
//! with the same persona's previous prompt, whatever the kind. [`PrefixShare`] measures that share
//! (the `concurrency` bench prints it); it counts bytes, cut at character boundaries, which
//! follow tokens closely enough for a ratio.

use std::collections::{BTreeMap, HashMap};

/// The share of prompt text that matches the same key's previous prompt.
#[derive(Debug, Default, Clone)]
pub struct PrefixShare {
    previous: HashMap<String, String>,
    shared: u64,
    total: u64,
    prompts: u64,
    /// Shared and total bytes per prompt kind.
    kinds: BTreeMap<String, (u64, u64)>,
}

impl PrefixShare {
    /// An empty tally.
    pub fn new() -> Self {
        Self::default()
    }

    /// [`PrefixShare::observe`], also tallied under the prompt's `kind`
    /// ([`PrefixShare::by_kind`]).
    pub fn observe_kind(&mut self, key: &str, kind: &str, prompt: &str) -> usize {
        let shared = self.observe(key, prompt);
        let entry = self.kinds.entry(kind.to_string()).or_default();
        entry.0 += shared as u64;
        entry.1 += prompt.len() as u64;
        shared
    }

    /// Per prompt kind counted with [`PrefixShare::observe_kind`]: bytes shared with the key's
    /// previous prompt, and all bytes.
    pub fn by_kind(&self) -> &BTreeMap<String, (u64, u64)> {
        &self.kinds
    }

    /// Counts `prompt`, asked for `key` (a persona), against that key's previous prompt, and
    /// returns the bytes they share from the start. A key's first prompt shares nothing.
    pub fn observe(&mut self, key: &str, prompt: &str) -> usize {
        let shared = self
            .previous
            .get(key)
            .map_or(0, |previous| common_prefix_len(previous, prompt));
        self.shared += shared as u64;
        self.total += prompt.len() as u64;
        self.prompts += 1;
        match self.previous.get_mut(key) {
            Some(previous) => {
                previous.clear();
                previous.push_str(prompt);
            }
            None => {
                self.previous.insert(key.to_string(), prompt.to_string());
            }
        }
        shared
    }

    /// Prompts counted.
    pub fn prompts(&self) -> u64 {
        self.prompts
    }

    /// Bytes shared with the key's previous prompt over all bytes, 0 when nothing was counted.
    pub fn share(&self) -> f64 {
        if self.total == 0 {
            0.0
        } else {
            self.shared as f64 / self.total as f64
        }
    }
}

/// The length in bytes of the longest common prefix of `a` and `b`, at a character boundary.
pub fn common_prefix_len(a: &str, b: &str) -> usize {
    let mut len = 0;
    for (x, y) in a.chars().zip(b.chars()) {
        if x != y {
            break;
        }
        len += x.len_utf8();
    }
    len
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prompt_shares_its_prefix_with_the_same_keys_previous_prompt_only() {
        let mut share = PrefixShare::new();
        assert_eq!(share.observe("Ana", "Name: Ana\nWake up?"), 0);
        assert_eq!(
            share.observe("Ben", "Name: Ana\nWake up?"),
            0,
            "another key's prompt"
        );
        assert_eq!(
            share.observe("Ana", "Name: Ana\nPlan the day"),
            "Name: Ana\n".len()
        );
        assert_eq!(share.prompts(), 3);
        let expected = "Name: Ana\n".len() as f64 / (18.0 + 18.0 + 22.0);
        assert!((share.share() - expected).abs() < 1e-12);
        // Compared with the latest prompt, not the first.
        assert_eq!(share.observe("Ana", "Name: Ana\nPlan the week"), 19);
        assert_eq!(
            share.observe_kind("Ana", "plan", "Name: Ana\nPlan the month"),
            19
        );
        assert_eq!(share.by_kind().get("plan"), Some(&(19, 24)));
    }

    #[test]
    fn the_common_prefix_stops_at_a_character_boundary() {
        assert_eq!(common_prefix_len("café au lait", "cafè"), 3);
        assert_eq!(common_prefix_len("é", "è"), 0);
        assert_eq!(common_prefix_len("abc", "abc"), 3);
        assert_eq!(PrefixShare::new().share(), 0.0);
    }
}
