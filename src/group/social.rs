//! A persona's global social state (SPEC §8), from what it is doing, and the attention it can
//! spread over chat streams: how many streams it may follow (`Chat` or `Focused`) and how many
//! of those closely (`Focused`).

use std::collections::BTreeMap;

use rand::Rng;
use serde::{Deserialize, Serialize};

use super::attention::{AttentionSettings, Change, ChatState, SubFlow};

/// How open a persona is to talk, from its plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SocialState {
    /// Asleep: follows nothing.
    Offline,
    /// Busy (working, studying): glances at one stream.
    Peeking,
    /// About the day: a few streams.
    Normal,
    /// Out to talk (a party, a meeting, a meal with friends): the most streams.
    Focused,
}

/// Stream limits: followed at all (`Chat` or `Focused`) / followed closely (`Focused`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Streams in `Chat` or `Focused`.
    pub following: usize,
    /// Streams in `Focused`.
    pub focused: usize,
}

impl SocialState {
    /// SPEC §8's limits: PEEKING 1/1, NORMAL 3/2, FOCUSED 4/4; OFFLINE none.
    pub fn limits(self) -> Limits {
        let (following, focused) = match self {
            SocialState::Offline => (0, 0),
            SocialState::Peeking => (1, 1),
            SocialState::Normal => (3, 2),
            SocialState::Focused => (4, 4),
        };
        Limits { following, focused }
    }

    /// The state for a persona doing `activity` (its current action's description): asleep is
    /// `Offline`; work and study `Peeking`; gatherings, parties, meetings and conversations
    /// `Focused`; anything else `Normal`.
    pub(crate) fn from_activity(asleep: bool, activity: &str) -> Self {
        if asleep {
            return SocialState::Offline;
        }
        let text = activity.to_lowercase();
        let has = |words: &[&str]| words.iter().any(|w| text.contains(w));
        if has(&[
            "party",
            "gathering",
            "meeting",
            "chat",
            "convers",
            "visit",
            "celebrat",
            "dinner with",
            "drinks",
            "socialis",
            "socializ",
            "open mic",
            "open-mic",
            "quiz",
        ]) {
            SocialState::Focused
        } else if has(&[
            "work", "teach", "bak", "cook", "serv", "shift", "study", "class", "lesson", "sort",
            "deliver", "examin", "patient", "build", "repair", "grading", "marking", "accounts",
        ]) {
            SocialState::Peeking
        } else {
            SocialState::Normal
        }
    }
}

/// One persona's sub-flows, by stream, under its social state.
#[derive(Debug, Clone, PartialEq)]
pub struct Attention<K: Ord + Clone> {
    /// The global social state.
    pub social: SocialState,
    /// One sub-flow per stream the persona has heard.
    pub flows: BTreeMap<K, SubFlow>,
    /// Game seconds until the persona may be asked to join a stream again.
    pub join_in: f32,
}

impl<K: Ord + Clone> Default for Attention<K> {
    fn default() -> Self {
        Self {
            social: SocialState::Normal,
            flows: BTreeMap::new(),
            join_in: 0.0,
        }
    }
}

impl<K: Ord + Clone> Attention<K> {
    /// Streams in `state`.
    pub fn count(&self, state: ChatState) -> usize {
        self.flows.values().filter(|f| f.state == state).count()
    }

    /// Streams followed (`Chat` or `Focused`).
    pub fn following(&self) -> usize {
        self.flows.len() - self.count(ChatState::Absent)
    }

    /// The sub-flow of `stream`, made (absent) on first contact.
    pub fn flow(&mut self, stream: &K) -> &mut SubFlow {
        self.flows.entry(stream.clone()).or_default()
    }

    /// Lets `secs` game seconds pass: decay, idle chats leave, focus draws (one uniform draw
    /// from `rng` per due draw, in stream order), the limits of the social state, and absent
    /// sub-flows past an hour forgotten. Returns every state change, in order.
    pub fn tick(
        &mut self,
        secs: f32,
        settings: &AttentionSettings,
        rng: &mut impl Rng,
    ) -> Vec<(K, Change)> {
        let mut changes = Vec::new();
        self.join_in = (self.join_in - secs.max(0.0)).max(0.0);
        for flow in self.flows.values_mut() {
            flow.pass(secs, settings);
        }
        for (key, flow) in &mut self.flows {
            if flow.idle_out(settings) {
                changes.push((key.clone(), flow.go(ChatState::Absent)));
            }
        }
        let limits = self.social.limits();
        let keys: Vec<K> = self.flows.keys().cloned().collect();
        for key in keys {
            let focused = self.count(ChatState::Focused);
            let Some(flow) = self.flows.get_mut(&key) else {
                continue;
            };
            if flow.focus_draw_due(settings) {
                let draw: f32 = rng.random();
                if flow.draw_focus(draw, settings) && focused < limits.focused {
                    changes.push((key.clone(), flow.go(ChatState::Focused)));
                }
            }
        }
        changes.extend(self.enforce_limits());
        self.flows.retain(|_, flow| !flow.forgotten(settings));
        changes
    }

    /// Sets the social state and applies its limits at once (`Offline` leaves every stream).
    pub fn set_social(&mut self, social: SocialState) -> Vec<(K, Change)> {
        self.social = social;
        self.enforce_limits()
    }

    /// Demotes the least interested sub-flows until the limits hold: focused ones to `Chat`
    /// beyond the focused limit, then followed ones to `Absent` beyond the following limit.
    pub(crate) fn enforce_limits(&mut self) -> Vec<(K, Change)> {
        let limits = self.social.limits();
        let mut changes = Vec::new();
        if limits.following == 0 {
            // Offline: every stream is left at once.
            for (key, flow) in &mut self.flows {
                if flow.state != ChatState::Absent {
                    changes.push((key.clone(), flow.go(ChatState::Absent)));
                }
            }
            return changes;
        }
        while self.count(ChatState::Focused) > limits.focused {
            let Some(key) = self.least_interested(|s| s == ChatState::Focused) else {
                break;
            };
            changes.push((key.clone(), self.flow(&key).go(ChatState::Chat)));
        }
        while self.following() > limits.following {
            // Casual followers go first; a focused one only when no casual one is left.
            let key = self
                .least_interested(|s| s == ChatState::Chat)
                .or_else(|| self.least_interested(|s| s == ChatState::Focused));
            let Some(key) = key else {
                break;
            };
            changes.push((key.clone(), self.flow(&key).go(ChatState::Absent)));
        }
        changes
    }

    fn least_interested(&self, state: impl Fn(ChatState) -> bool) -> Option<K> {
        self.flows
            .iter()
            .filter(|(_, f)| state(f.state))
            .min_by(|a, b| a.1.interest.total_cmp(&b.1.interest))
            .map(|(k, _)| k.clone())
    }

    /// The absent stream to ask about joining (the most interesting one heard), when a join
    /// question is due (one per `join_every` seconds) and the limits leave room.
    pub fn join_candidate(&self) -> Option<K> {
        if self.join_in > 0.0 || self.following() >= self.social.limits().following {
            return None;
        }
        self.flows
            .iter()
            .filter(|(_, f)| f.state == ChatState::Absent && f.interest > 0.0)
            .max_by(|a, b| a.1.interest.total_cmp(&b.1.interest))
            .map(|(k, _)| k.clone())
    }

    /// The model's answer to the join question about `stream`: `yes` joins it (`Chat`) if the
    /// limits still leave room. Either way the next question waits `join_every` seconds.
    pub fn answer_join(
        &mut self,
        stream: &K,
        yes: bool,
        settings: &AttentionSettings,
    ) -> Option<Change> {
        self.join_in = settings.join_every.max(0.0);
        let room = self.following() < self.social.limits().following;
        let flow = self.flows.get_mut(stream)?;
        (yes && room && flow.state == ChatState::Absent).then(|| flow.go(ChatState::Chat))
    }

    /// A focused cycle on `stream` planned `no_reply`.
    pub fn planned_no_reply(&mut self, stream: &K, settings: &AttentionSettings) -> Option<Change> {
        self.flows.get_mut(stream)?.planned_no_reply(settings)
    }
}
