//! Where in the embedded model's KV cache a prompt goes: **a slot per thought, prefixes
//! shared**.
//!
//! The generation context keeps several KV sequences alive between calls — the *slots*. A
//! persona's next prompt goes to the slot that holds its previous one (its routing key, the
//! persona, owns the slot), so what it shares with that prompt is not decoded again. When
//! another slot shares more of the new prompt — the same template asked of another persona a
//! moment ago — that prefix is *forked* from it (`copy_kv_cache_seq` on a unified cache only
//! marks the cells as shared: no keys or values are copied) and only the rest is decoded.
//!
//! The cache has room for a bounded number of tokens. A placement that would not fit evicts
//! the least recently used idle slots first; a slot in use (a request decoding in it) is never
//! touched, so with every slot busy or the room taken by them the request waits.
//!
//! [`SlotTable`] is the bookkeeping only — pure, tested without a model; the backend performs
//! the cache operations a [`Placement`] lists.

/// One KV sequence kept for reuse.
#[derive(Debug, Clone)]
struct Slot<T> {
    /// The tokens whose keys and values the sequence holds, from position 0.
    tokens: Vec<T>,
    /// The routing key (persona) that used it last.
    owner: Option<String>,
    /// When it was last placed into (a counter, higher is later).
    used: u64,
    /// Whether a request is decoding in it now.
    busy: bool,
}

/// What the backend does to start a prompt: which cache operations, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Placement {
    /// The slot the prompt is decoded into.
    pub slot: usize,
    /// Idle slots to clear first, to make room.
    pub evict: Vec<usize>,
    /// Another slot whose first [`Self::reuse`] tokens are forked into `slot` (after `slot` is
    /// cleared); `None` keeps `slot`'s own first `reuse` tokens and clears the rest.
    pub fork_from: Option<usize>,
    /// Prompt tokens already in the cache: decoding starts at this position.
    pub reuse: usize,
}

/// The slots of one generation context (see the module docs).
#[derive(Debug, Clone)]
pub(crate) struct SlotTable<T> {
    slots: Vec<Slot<T>>,
    /// Tokens the cache holds at most.
    capacity: usize,
    clock: u64,
}

/// Leading tokens a prompt must share with one being decoded before it waits for it (about a
/// paragraph: below that, decoding them twice costs less than the wait).
pub(crate) const MIN_SHARED_TO_WAIT: usize = 64;

/// Whether `prompt` should wait a moment before taking a slot: a request decoding now shares
/// at least [`MIN_SHARED_TO_WAIT`] of its leading tokens, more than any slot holds (`cached`),
/// and has not decoded them yet. Once it has, the prefix is forked instead of decoded twice —
/// two questions about one conversation asked at once share the conversation.
/// `decoding` lists each running request's prompt and how much of it is in the cache.
pub(crate) fn worth_waiting<'a, T: PartialEq + 'a>(
    prompt: &[T],
    cached: usize,
    decoding: impl IntoIterator<Item = (&'a [T], usize)>,
) -> bool {
    let cap = prompt.len().saturating_sub(1);
    decoding.into_iter().any(|(theirs, decoded)| {
        let shared = common_prefix(theirs, prompt).min(cap);
        shared >= MIN_SHARED_TO_WAIT && shared > cached && decoded < shared
    })
}

/// How many leading tokens `a` and `b` share.
fn common_prefix<T: PartialEq>(a: &[T], b: &[T]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

impl<T: PartialEq + Clone> SlotTable<T> {
    /// `slots` empty slots sharing room for `capacity` tokens.
    pub fn new(slots: usize, capacity: usize) -> Self {
        Self {
            slots: (0..slots.max(1))
                .map(|_| Slot {
                    tokens: Vec::new(),
                    owner: None,
                    used: 0,
                    busy: false,
                })
                .collect(),
            capacity,
            clock: 0,
        }
    }

    /// Slots a request is decoding in.
    #[cfg(test)]
    pub fn busy(&self) -> usize {
        self.slots.iter().filter(|s| s.busy).count()
    }

    /// The tokens slot `slot` holds.
    pub fn tokens(&self, slot: usize) -> &[T] {
        self.slots.get(slot).map_or(&[], |s| s.tokens.as_slice())
    }

    /// The longest prefix of `prompt` any slot holds.
    pub fn best_prefix(&self, prompt: &[T]) -> usize {
        self.slots
            .iter()
            .map(|s| common_prefix(&s.tokens, prompt))
            .max()
            .unwrap_or(0)
    }

    /// Tokens held by every slot (shared prefixes counted once per slot: an upper bound).
    fn held(&self) -> usize {
        self.slots.iter().map(|s| s.tokens.len()).sum()
    }

    /// Where `prompt` of the thought `owner` goes, when it will grow to `need` tokens (prompt
    /// plus answer); `None` while no idle slot or no room can be had (the request waits for a
    /// busy slot to finish). Marks the slot busy and updates the bookkeeping as if the
    /// placement's operations were done.
    pub fn place(&mut self, prompt: &[T], owner: Option<&str>, need: usize) -> Option<Placement> {
        if prompt.is_empty() {
            return None;
        }
        let idle = |s: &Slot<T>| !s.busy;
        // The thought's own slot, else an empty one, else the least recently used.
        let slot = self
            .slots
            .iter()
            .position(|s| idle(s) && owner.is_some() && s.owner.as_deref() == owner)
            .or_else(|| {
                self.slots
                    .iter()
                    .position(|s| idle(s) && s.tokens.is_empty())
            })
            .or_else(|| {
                self.slots
                    .iter()
                    .enumerate()
                    .filter(|(_, s)| idle(s))
                    .min_by_key(|(_, s)| s.used)
                    .map(|(i, _)| i)
            })?;
        // The last prompt token is always decoded again: its logits are needed.
        let cap = prompt.len() - 1;
        let own = common_prefix(&self.slots[slot].tokens, prompt).min(cap);
        let other = self
            .slots
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != slot)
            .map(|(i, s)| (i, common_prefix(&s.tokens, prompt).min(cap)))
            .max_by_key(|&(i, shared)| (shared, std::cmp::Reverse(i)));
        let (mut fork_from, mut reuse) = match other {
            Some((from, shared)) if shared > own => (Some(from), shared),
            _ => (None, own),
        };
        // Room: every other slot as it is, plus this one grown to `need`.
        let mut evict = Vec::new();
        let fits = |table: &Self, evicted: &[usize]| {
            let others: usize = table
                .slots
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != slot && !evicted.contains(i))
                .map(|(_, s)| s.tokens.len())
                .sum();
            others + need.max(prompt.len()) <= table.capacity
        };
        while !fits(self, &evict) {
            let victim = self
                .slots
                .iter()
                .enumerate()
                .filter(|(i, s)| {
                    idle(s)
                        && *i != slot
                        && Some(*i) != fork_from
                        && !s.tokens.is_empty()
                        && !evict.contains(i)
                })
                .min_by_key(|(_, s)| s.used)
                .map(|(i, _)| i);
            match victim {
                Some(victim) => evict.push(victim),
                // Only the fork's source is left to give up: decode from the slot's own prefix.
                None if fork_from.is_some_and(|f| !self.slots[f].busy) => {
                    evict.extend(fork_from.take());
                    reuse = own;
                }
                None => return None,
            }
        }
        self.clock += 1;
        for &victim in &evict {
            let gone = &mut self.slots[victim];
            gone.tokens.clear();
            gone.owner = None;
        }
        let tokens = match fork_from {
            Some(from) => self.slots[from].tokens[..reuse].to_vec(),
            None => {
                let mut kept = std::mem::take(&mut self.slots[slot].tokens);
                kept.truncate(reuse);
                kept
            }
        };
        let target = &mut self.slots[slot];
        target.tokens = tokens;
        target.owner = owner.map(str::to_owned);
        target.used = self.clock;
        target.busy = true;
        debug_assert!(self.held() <= self.capacity + need);
        Some(Placement {
            slot,
            evict,
            fork_from,
            reuse,
        })
    }

    /// Tokens decoded into `slot` (its KV sequence now holds them after what it held).
    pub fn extend(&mut self, slot: usize, tokens: &[T]) {
        if let Some(s) = self.slots.get_mut(slot) {
            s.tokens.extend_from_slice(tokens);
        }
    }

    /// The request in `slot` is done: the slot keeps its tokens for the next prompt.
    pub fn release(&mut self, slot: usize) {
        if let Some(s) = self.slots.get_mut(slot) {
            s.busy = false;
        }
    }

    /// Keeps only the first `len` tokens of `slot` (its sequence was cut there).
    pub fn truncate(&mut self, slot: usize, len: usize) {
        if let Some(s) = self.slots.get_mut(slot) {
            s.tokens.truncate(len);
        }
    }

    /// Empties every idle slot (the cache ran out of room); returns them, to be cleared.
    pub fn drop_idle(&mut self) -> Vec<usize> {
        let mut dropped = Vec::new();
        for (i, s) in self.slots.iter_mut().enumerate() {
            if !s.busy && !s.tokens.is_empty() {
                s.tokens.clear();
                s.owner = None;
                dropped.push(i);
            }
        }
        dropped
    }

    /// Forgets everything (after the cache was cleared); no slot is busy any more.
    pub fn clear(&mut self) {
        for s in &mut self.slots {
            s.tokens.clear();
            s.owner = None;
            s.busy = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(text: &str) -> Vec<char> {
        text.chars().collect()
    }

    #[test]
    fn a_persona_comes_back_to_its_own_slot_and_reuses_its_prefix() {
        let mut table = SlotTable::new(4, 1000);
        let ada = table.place(&toks("AAAA-wake"), Some("ada"), 20).unwrap();
        table.extend(ada.slot, &toks("AAAA-wake"));
        table.release(ada.slot);
        let bo = table.place(&toks("BBBB-wake"), Some("bo"), 20).unwrap();
        assert_ne!(bo.slot, ada.slot, "an empty slot before another's");
        table.extend(bo.slot, &toks("BBBB-wake"));
        table.release(bo.slot);
        let again = table.place(&toks("AAAA-plan"), Some("ada"), 20).unwrap();
        assert_eq!(again.slot, ada.slot);
        assert_eq!(again.fork_from, None);
        assert_eq!(again.reuse, 5, "AAAA- is kept");
        assert_eq!(table.tokens(ada.slot), toks("AAAA-").as_slice());
    }

    #[test]
    fn a_longer_prefix_elsewhere_is_forked_into_the_slot() {
        let mut table = SlotTable::new(4, 1000);
        let template = "<sys>You plan a day.</sys>";
        let ada = table
            .place(&toks(&format!("{template} Ada")), Some("ada"), 50)
            .unwrap();
        table.extend(ada.slot, &toks(&format!("{template} Ada")));
        table.release(ada.slot);
        let bo = table
            .place(&toks(&format!("{template} Bo")), Some("bo"), 50)
            .unwrap();
        assert_eq!(bo.fork_from, Some(ada.slot));
        assert_eq!(bo.reuse, template.chars().count() + 1);
        assert_ne!(bo.slot, ada.slot, "Ada keeps her slot");
        assert_eq!(table.tokens(ada.slot).len(), template.chars().count() + 4);
    }

    #[test]
    fn the_same_prompt_again_decodes_only_its_last_token() {
        let mut table = SlotTable::new(2, 100);
        let p = table.place(&toks("hello"), Some("a"), 10).unwrap();
        table.extend(p.slot, &toks("hello world"));
        table.release(p.slot);
        let again = table.place(&toks("hello"), Some("a"), 10).unwrap();
        assert_eq!(again.reuse, 4);
        assert_eq!(table.tokens(again.slot), toks("hell").as_slice());
    }

    #[test]
    fn busy_slots_are_never_taken_and_a_full_table_waits() {
        let mut table = SlotTable::new(2, 1000);
        let a = table.place(&toks("aaaa"), Some("a"), 10).unwrap();
        let b = table.place(&toks("aaab"), Some("b"), 10).unwrap();
        assert_ne!(a.slot, b.slot);
        assert_eq!(table.busy(), 2);
        assert_eq!(table.place(&toks("cccc"), Some("c"), 10), None);
        table.release(a.slot);
        let c = table.place(&toks("cccc"), Some("c"), 10).unwrap();
        assert_eq!(c.slot, a.slot);
    }

    #[test]
    fn room_is_made_by_evicting_the_least_recently_used_idle_slots() {
        let mut table = SlotTable::new(4, 30);
        for (i, owner) in ["a", "b", "c"].iter().enumerate() {
            let prompt = toks(&format!("{i}{}", owner.repeat(9)));
            let p = table.place(&prompt, Some(owner), 10).unwrap();
            table.extend(p.slot, &prompt);
            table.release(p.slot);
        }
        // 30 tokens held; 15 more need two of them gone, oldest first.
        let d = table.place(&toks("dddddddddd"), Some("d"), 15).unwrap();
        assert_eq!(d.slot, 3, "the empty slot");
        assert_eq!(d.evict, vec![0, 1], "a's slot first, then b's");
        assert_eq!(table.tokens(2).len(), 10, "c's is kept");
    }

    #[test]
    fn a_prompt_too_big_for_the_room_left_by_busy_slots_waits() {
        let mut table = SlotTable::new(3, 30);
        let a = table.place(&toks("aaaaaaaaaa"), Some("a"), 20).unwrap();
        table.extend(a.slot, &toks("aaaaaaaaaaaaaaaaaaaa"));
        assert_eq!(table.place(&toks("bbbbbbbbbbbbb"), Some("b"), 15), None);
        table.release(a.slot);
        let b = table.place(&toks("bbbbbbbbbbbbb"), Some("b"), 15).unwrap();
        assert_eq!(b.evict, vec![a.slot]);
    }

    #[test]
    fn a_prompt_waits_for_a_long_prefix_another_request_is_decoding() {
        let transcript: Vec<u32> = (0..200).collect();
        let ask = |question: u32| {
            let mut prompt = transcript.clone();
            prompt.extend([1000 + question, 7, 8]);
            prompt
        };
        let (first, second) = (ask(1), ask(2));
        // The first is still decoding the transcript: the second waits…
        assert!(worth_waiting(&second, 0, [(first.as_slice(), 50)]));
        // …until the transcript is in (then it forks it)…
        assert!(!worth_waiting(&second, 0, [(first.as_slice(), 200)]));
        // …and never when a slot already holds as much, or the share is short.
        assert!(!worth_waiting(&second, 200, [(first.as_slice(), 50)]));
        let short: Vec<u32> = transcript[..10].iter().copied().chain([5000]).collect();
        assert!(!worth_waiting(&short, 0, [(first.as_slice(), 0)]));
        assert!(!worth_waiting::<u32>(&second, 0, []));
    }

    #[test]
    fn the_fork_source_is_given_up_last() {
        let mut table = SlotTable::new(2, 20);
        let a = table.place(&toks("shared-aaaa"), Some("a"), 11).unwrap();
        table.extend(a.slot, &toks("shared-aaaa"));
        table.release(a.slot);
        // 11 held + 12 needed > 20: the only other slot is the fork's source.
        let b = table.place(&toks("shared-bbbbb"), Some("b"), 12).unwrap();
        assert_eq!(b.fork_from, None);
        assert_eq!(b.evict, vec![a.slot]);
        assert_eq!(b.reuse, 0);
    }
}
