//! The order the embedded model serves its queue in: **one thought's calls back to back**.
//!
//! A thought is a chain of calls, each asked when the one before has answered (a new day is a
//! wake-up hour, a day plan, an hourly schedule, a decomposition, then a sector, an arena and
//! an object to go to). Served strictly in arrival order, five personas planning at once
//! interleave call by call, and each of them is done only when all of them are: on a 2-core
//! machine nobody in the town had moved after 150 s of the game. Served thought by thought,
//! the first persona is up after a fifth of that, the town as a whole finishes no later, and
//! consecutive prompts share the thought's prefix in the model's KV cache.
//!
//! [`ServeOrder`] ranks the waiting calls by **when their thought started** (a thought is a
//! routing key, the persona, from [`ChatRequest::affinity`](super::ChatRequest::affinity), busy
//! with no pause longer than [`THOUGHT_GAP`]): the oldest thought's next call runs first, so
//! the persona that began planning first finishes first, while the others' calls fill the gaps
//! (when the oldest thought embeds a memory between two calls, the model serves someone else
//! meanwhile). Between two calls of a thought its next call is not yet asked:
//! [`ServeOrder::awaits_follow_up`] tells the inference thread to wait a moment
//! ([`FOLLOW_UP_WAIT`]) for it rather than start another thought's long answer. A thought that
//! has had [`MAX_STREAK`] calls goes behind everything waiting, so nobody starves. Jobs without
//! a key rank by their own arrival; urgent jobs (statistics) go first.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

/// The most calls of one thought served before it yields to the thoughts that waited longer
/// (a new day's plan is about a dozen calls).
pub(crate) const MAX_STREAK: u32 = 16;

/// How long the inference thread waits for the current thought's next call (the thought's
/// task parses the answer and asks again within a few milliseconds) before serving another.
pub(crate) const FOLLOW_UP_WAIT: Duration = Duration::from_millis(40);

/// A key quiet this long (no call waiting or running) starts a new thought when it asks again.
/// The gaps inside one thought (embeddings and place choices by the sentence embedder, a
/// memory search) are usually short, but the embedder has its own queue: on a busy 2-core
/// machine a debug build's gap reached several seconds, and with 2 s a planning persona lost
/// its turn halfway through its first plan.
pub(crate) const THOUGHT_GAP: Duration = Duration::from_secs(10);

/// A queue of jobs served thought by thought (see the module docs).
#[derive(Debug)]
pub(crate) struct ServeOrder<J> {
    /// Waiting jobs in arrival order: key, arrival number, whether urgent, the job.
    pending: VecDeque<(Option<String>, u64, bool, J)>,
    /// Every key seen lately: when its thought started (an arrival number), how many of its
    /// calls have run since, and when it was last active.
    thoughts: HashMap<String, Thought>,
    /// The key of the job run last.
    current: Option<String>,
    arrivals: u64,
}

#[derive(Debug, Clone, Copy)]
struct Thought {
    since: u64,
    served: u32,
    active: Instant,
}

impl<J> Default for ServeOrder<J> {
    fn default() -> Self {
        Self {
            pending: VecDeque::new(),
            thoughts: HashMap::new(),
            current: None,
            arrivals: 0,
        }
    }
}

impl<J> ServeOrder<J> {
    /// Queues `job` of the thought `key` (`None`: no thought) at `now`. Urgent jobs go first.
    /// Returns whether it continues the job run last (the follow-up the thread waits for).
    pub(crate) fn push(&mut self, key: Option<String>, job: J, urgent: bool, now: Instant) -> bool {
        let arrival = self.arrivals;
        self.arrivals += 1;
        if let Some(key) = &key {
            let thought = self.thoughts.entry(key.clone()).or_insert(Thought {
                since: arrival,
                served: 0,
                active: now,
            });
            if now.saturating_duration_since(thought.active) > THOUGHT_GAP {
                *thought = Thought {
                    since: arrival,
                    served: 0,
                    active: now,
                };
            }
            thought.active = now;
        }
        let continues = key.is_some() && key == self.current;
        self.pending.push_back((key, arrival, urgent, job));
        continues
    }

    /// Whether nothing waits.
    pub(crate) fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// How many jobs wait.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.pending.len()
    }

    /// The waiting jobs' keys and ranks, oldest thought first (for the trace log).
    pub(crate) fn waiting(&self) -> Vec<(Option<String>, u64)> {
        let mut list: Vec<(Option<String>, u64)> = self
            .pending
            .iter()
            .map(|(key, arrival, ..)| (key.clone(), self.rank(key.as_deref(), *arrival)))
            .collect();
        list.sort_by_key(|(_, rank)| *rank);
        list
    }

    /// A waiting job's rank (lower runs first): when its thought started, or for a job of no
    /// thought its own arrival.
    fn rank(&self, key: Option<&str>, arrival: u64) -> u64 {
        key.and_then(|k| self.thoughts.get(k))
            .map_or(arrival, |t| t.since)
    }

    /// Whether the thread should wait a moment for the next call of the thought it served
    /// last: that thought may go on, none of its calls waits, and another job does (with
    /// nothing waiting the thread simply blocks on the queue).
    pub(crate) fn awaits_follow_up(&self) -> bool {
        let Some(current) = &self.current else {
            return false;
        };
        let may_go_on = self
            .thoughts
            .get(current)
            .is_some_and(|t| t.served < MAX_STREAK);
        may_go_on
            && !self.pending.is_empty()
            && !self
                .pending
                .iter()
                .any(|(key, ..)| key.as_deref() == Some(current.as_str()))
    }

    /// The thought served last asked nothing more in time: serve by age.
    pub(crate) fn end_streak(&mut self) {
        self.current = None;
    }

    /// The next job to run at `now`: an urgent one, else the waiting job whose thought started
    /// first (a job of no thought ranks by its own arrival; ties in arrival order). A thought
    /// that has had [`MAX_STREAK`] calls goes behind everything waiting.
    pub(crate) fn pop(&mut self, now: Instant) -> Option<J> {
        self.thoughts.retain(|key, thought| {
            now.saturating_duration_since(thought.active) <= THOUGHT_GAP
                || self.pending.iter().any(|(k, ..)| k.as_ref() == Some(key))
        });
        let index = match self.pending.iter().position(|(.., urgent, _)| *urgent) {
            Some(index) => index,
            // The first of the lowest rank: ties keep arrival order.
            None => self
                .pending
                .iter()
                .enumerate()
                .min_by_key(|(index, (key, arrival, ..))| {
                    (self.rank(key.as_deref(), *arrival), *index)
                })
                .map_or(0, |(index, _)| index),
        };
        let (key, _, _, job) = self.pending.remove(index)?;
        // A job of no thought (an embedding, statistics) leaves the thought served last as it was.
        if let Some(key) = key {
            let arrivals = self.arrivals;
            let mut yielded = false;
            if let Some(thought) = self.thoughts.get_mut(&key) {
                thought.served += 1;
                thought.active = now;
                if thought.served >= MAX_STREAK {
                    // Its turn is over: behind everything that waits now.
                    thought.since = arrivals;
                    thought.served = 0;
                    self.arrivals += 1;
                    yielded = true;
                }
            }
            self.current = (!yielded).then_some(key);
        }
        Some(job)
    }

    /// A job of the thought `key` has finished at `now` (a thought's quiet gap counts from
    /// here).
    pub(crate) fn finished(&mut self, key: Option<&str>, now: Instant) {
        if let Some(thought) = key.and_then(|k| self.thoughts.get_mut(k)) {
            thought.active = now;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(k: &str) -> Option<String> {
        Some(k.to_owned())
    }

    fn ms(start: Instant, millis: u64) -> Instant {
        start + Duration::from_millis(millis)
    }

    #[test]
    fn the_thought_that_started_first_finishes_first() {
        let t0 = Instant::now();
        let mut order = ServeOrder::default();
        // Five personas ask their first call at once.
        for name in ["a", "b", "c", "d", "e"] {
            order.push(key(name), format!("{name}1"), false, t0);
        }
        assert_eq!(order.pop(t0).as_deref(), Some("a1"));
        // While a1 runs nothing of a's waits: the thread is told to wait for it.
        assert!(order.awaits_follow_up());
        order.finished(Some("a"), ms(t0, 1000));
        // a's next call arrives after the others' first: it still goes first.
        assert!(order.push(key("a"), "a2".to_owned(), false, ms(t0, 1002)));
        assert!(!order.awaits_follow_up());
        assert_eq!(order.pop(ms(t0, 1002)).as_deref(), Some("a2"));
        order.finished(Some("a"), ms(t0, 2000));
        // a embeds a memory before its third call: nothing of a's came in time, so b runs…
        assert!(order.awaits_follow_up());
        order.end_streak();
        assert_eq!(order.pop(ms(t0, 2040)).as_deref(), Some("b1"));
        // …and a's third call, asked while b1 runs, goes before b's own next call.
        assert!(!order.push(key("a"), "a3".to_owned(), false, ms(t0, 2300)));
        order.finished(Some("b"), ms(t0, 3000));
        assert!(order.push(key("b"), "b2".to_owned(), false, ms(t0, 3001)));
        assert_eq!(order.pop(ms(t0, 3001)).as_deref(), Some("a3"));
        order.finished(Some("a"), ms(t0, 4000));
        // a is done; b (started second) goes on before c, d and e start.
        order.end_streak();
        let rest: Vec<String> = std::iter::from_fn(|| order.pop(ms(t0, 4100))).collect();
        assert_eq!(rest, ["b2", "c1", "d1", "e1"]);
        assert!(order.is_empty());
    }

    #[test]
    fn a_thought_quiet_longer_than_the_gap_starts_over_at_the_back() {
        let t0 = Instant::now();
        let mut order = ServeOrder::default();
        order.push(key("a"), "a1", false, t0);
        assert_eq!(order.pop(t0), Some("a1"));
        order.finished(Some("a"), ms(t0, 500));
        order.end_streak();
        order.push(key("b"), "b1", false, ms(t0, 600));
        // a asks again long after its last call: a new thought, younger than b's.
        let late = ms(t0, 500) + THOUGHT_GAP + Duration::from_millis(1);
        order.push(key("a"), "a2", false, late);
        assert_eq!(order.pop(late), Some("b1"));
        assert_eq!(order.pop(late), Some("a2"));
    }

    #[test]
    fn a_long_chain_yields_after_its_streak() {
        let t0 = Instant::now();
        let mut order = ServeOrder::default();
        for n in 1..=(MAX_STREAK + 5) {
            order.push(key("a"), n, false, t0);
        }
        order.push(key("b"), 1000, false, t0);
        let mut served = Vec::new();
        for _ in 0..MAX_STREAK {
            served.push(order.pop(t0).unwrap_or_default());
        }
        assert_eq!(served, (1..=MAX_STREAK).collect::<Vec<_>>());
        // The streak is over: no waiting for a, and b (which waited all along) runs next.
        assert!(!order.awaits_follow_up());
        assert_eq!(order.pop(t0), Some(1000));
        // Then a's chain again, from its oldest call.
        assert_eq!(order.pop(t0), Some(MAX_STREAK + 1));
    }

    #[test]
    fn jobs_without_a_thought_rank_by_arrival_and_urgent_ones_go_first() {
        let t0 = Instant::now();
        let mut order = ServeOrder::default();
        order.push(None, "embed", false, t0);
        order.push(key("a"), "a1", false, t0);
        order.push(None, "stats", true, t0);
        assert_eq!(order.len(), 3);
        assert_eq!(order.pop(t0), Some("stats"));
        assert!(!order.awaits_follow_up());
        assert_eq!(order.pop(t0), Some("embed"));
        assert_eq!(order.pop(t0), Some("a1"));
        order.push(key("b"), "b1", false, t0);
        order.push(None, "embed2", false, t0);
        order.push(key("a"), "a2", false, t0);
        // a's thought is the oldest; the keyless job ranks by its own arrival, after b's.
        assert_eq!(order.pop(t0), Some("a2"));
        assert_eq!(order.pop(t0), Some("b1"));
        assert_eq!(order.pop(t0), Some("embed2"));
        assert_eq!(order.pop(t0), None);
    }
}
