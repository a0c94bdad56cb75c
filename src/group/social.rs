//! A persona's global social state (SPEC §8), from what it is doing, and the attention it can
//! spread over chat streams: how many streams it may follow (`Chat` or `Focused`) and how many
//! of those closely (`Focused`).
//!
//! Its [`Engagement`] says whether it may follow closely at all (issue 49): focused cycles are
//! the expensive calls, so they run where talk is what the persona is there for — a social
//! action (a meeting, drinks with friends, a meal out) — or where someone spoke to it. A
//! walk in the park or a shift at the counter listens; a household's breakfast at home is not
//! even a conversation to join until someone speaks to the table.

use std::collections::BTreeMap;

use bevy::prelude::Reflect;
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

/// Words of an action that is a meal or a drink (whole words, or their start where the word
/// ends `*`): a meal out is social, a meal at home with the household is not (see
/// [`Engagement::of`]).
pub const MEAL_WORDS: &[&str] = &[
    "breakfast*",
    "brunch*",
    "lunch*",
    "dinner*",
    "supper*",
    "meal*",
    "eat*",
    "snack*",
    "picnic*",
    "feast*",
    "dine",
    "dines",
    "dining",
    "coffee*",
    "tea",
    "teas",
    "drink*",
    "pint*",
    "beer*",
    "wine*",
    "cocktail*",
    "latte*",
    "pastry",
    "pastries",
    "cake*",
];

/// Whether `activity` (an action's description) is a meal or a drink: one of [`MEAL_WORDS`]
/// among its words.
pub fn is_meal(activity: &str) -> bool {
    activity
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .any(|word| {
            let word = word.to_lowercase();
            MEAL_WORDS.iter().any(|m| match m.strip_suffix('*') {
                Some(stem) => word.starts_with(stem),
                None => word == *m,
            })
        })
}

/// Whether a persona's action lets it follow a stream closely (FOCUSED cycles, the expensive
/// calls), read from its action and where it is every step — left as soon as either changes.
/// A line that addresses the persona (names it, or game code or the player said it into the
/// stream) lets it focus there whatever its engagement, until a focused cycle answers it (at
/// most [`AttentionSettings::addressed_focus`] seconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Reflect, Serialize, Deserialize)]
pub enum Engagement {
    /// Out to talk (a party, a meeting, drinks with friends, a meal out): focuses by SPEC §8's
    /// draws. The default, and every persona's when
    /// [`GroupSettings::focus_needs_social`](super::GroupSettings::focus_needs_social) is off.
    #[default]
    Social,
    /// Doing something else where others talk (a walk, work, reading, a meal at home with a
    /// guest): follows streams casually (`Chat`, its replies by draw) and focuses only on a
    /// stream that addressed it; a focused sub-flow drops to `Chat` when the address runs out.
    Listening,
    /// At a meal at home with only its household in the conversation: as `Listening`, and
    /// not asked to join a stream that did not address it — a family's breakfast is no
    /// conversation to join until someone speaks to the table.
    AtTable,
}

impl Engagement {
    /// The engagement of a persona in the social state `social` (read from its action's words:
    /// a party, a meeting, drinks is `Focused`), whose action is a `meal` (or a drink,
    /// [`is_meal`]),
    /// standing `at_home` (in its home's sector), in a conversation whose every member lives
    /// there (`household`): a meal at home among the household is `AtTable`; a social action,
    /// or a meal or drink away from home (with others: a stream needs company), is `Social`;
    /// anything else `Listening`.
    pub fn of(social: SocialState, meal: bool, at_home: bool, household: bool) -> Self {
        if meal && at_home && household {
            Engagement::AtTable
        } else if social == SocialState::Focused
            || (meal && !at_home && social == SocialState::Normal)
        {
            Engagement::Social
        } else {
            Engagement::Listening
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
    /// Whether its action lets it focus without being addressed (read every step, not saved).
    pub engagement: Engagement,
}

impl<K: Ord + Clone> Default for Attention<K> {
    fn default() -> Self {
        Self {
            social: SocialState::Normal,
            flows: BTreeMap::new(),
            join_in: 0.0,
            engagement: Engagement::Social,
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

    /// Whether `flow` may be focused: the engagement is social, or a line addressed it.
    pub fn may_focus(&self, flow: &SubFlow) -> bool {
        self.engagement == Engagement::Social || flow.is_addressed()
    }

    /// Lets `secs` game seconds pass: decay, idle chats leave, focus draws (one uniform draw
    /// from `rng` per due draw, in stream order; a win focuses only a sub-flow that
    /// [may focus](Self::may_focus)), the limits of the social state, and absent sub-flows
    /// past an hour forgotten. Returns every state change, in order.
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
        let social = self.engagement == Engagement::Social;
        for key in keys {
            let focused = self.count(ChatState::Focused);
            let Some(flow) = self.flows.get_mut(&key) else {
                continue;
            };
            if flow.focus_draw_due(settings) {
                // Drawn even when it may not focus: the persona's stream of draws stays the
                // same whatever it is doing.
                let draw: f32 = rng.random();
                let may_focus = social || flow.is_addressed();
                if flow.draw_focus(draw, settings) && focused < limits.focused && may_focus {
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

    /// Sets the engagement and applies it at once: a focused sub-flow that may no longer
    /// focus drops to `Chat` (it listens).
    pub fn set_engagement(&mut self, engagement: Engagement) -> Vec<(K, Change)> {
        self.engagement = engagement;
        self.enforce_limits()
    }

    /// Demotes the least interested sub-flows until the limits hold: focused ones that may not
    /// focus (see [`Self::may_focus`]) to `Chat`, focused ones to `Chat` beyond the focused
    /// limit, then followed ones to `Absent` beyond the following limit.
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
        if self.engagement != Engagement::Social {
            for (key, flow) in &mut self.flows {
                if flow.state == ChatState::Focused && !flow.is_addressed() {
                    changes.push((key.clone(), flow.go(ChatState::Chat)));
                }
            }
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
    /// question is due (one per `join_every` seconds) and the limits leave room. At a
    /// household's table ([`Engagement::AtTable`]) only a stream that addressed the persona.
    pub fn join_candidate(&self) -> Option<K> {
        if self.join_in > 0.0 || self.following() >= self.social.limits().following {
            return None;
        }
        let at_table = self.engagement == Engagement::AtTable;
        self.flows
            .iter()
            .filter(|(_, f)| f.state == ChatState::Absent && f.interest > 0.0)
            .filter(|(_, f)| !at_table || f.is_addressed())
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

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn a_meal_or_a_drink_is_read_from_whole_words() {
        for meal in [
            "having breakfast",
            "eating lunch at the cafe",
            "having a pint at the pub",
            "drinking tea",
            "Dinner with the family",
            "having a pastry",
        ] {
            assert!(is_meal(meal), "{meal}");
        }
        for other in [
            "teaching a class",
            "taking a walk in the park",
            "repeating the steps",
            "",
        ] {
            assert!(!is_meal(other), "{other}");
        }
    }

    #[test]
    fn social_actions_and_meals_out_focus_a_household_breakfast_does_not() {
        let of = |activity: &str, at_home: bool, household: bool| {
            Engagement::of(
                SocialState::from_activity(false, activity),
                is_meal(activity),
                at_home,
                household,
            )
        };
        assert_eq!(
            of("meeting friends for a drink", false, false),
            Engagement::Social
        );
        assert_eq!(
            of("having lunch at the cafe", false, false),
            Engagement::Social
        );
        assert_eq!(
            of("taking a walk in the park", false, false),
            Engagement::Listening
        );
        assert_eq!(
            of("serving customers at the counter", false, false),
            Engagement::Listening
        );
        // At home: a meal with a guest listens, a household's meal keeps quiet — even one
        // whose words are social.
        assert_eq!(of("having breakfast", true, false), Engagement::Listening);
        assert_eq!(of("having breakfast", true, true), Engagement::AtTable);
        assert_eq!(
            of("having dinner with the family", true, true),
            Engagement::AtTable
        );
        assert_eq!(
            of("having dinner with the family", true, false),
            Engagement::Social
        );
        assert_eq!(of("reading a book", true, true), Engagement::Listening);
    }

    #[test]
    fn listening_focuses_only_while_addressed_and_a_table_joins_only_when_spoken_to() {
        let settings = AttentionSettings::default();
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let mut attention: Attention<u8> = Attention::default();
        attention.set_engagement(Engagement::Listening);
        let flow = attention.flow(&0);
        flow.go(ChatState::Chat);
        flow.hear(1.0, false, &settings);
        flow.hear(1.0, false, &settings);
        // Interest high for a minute: a social persona would have focused.
        for _ in 0..6 {
            attention.tick(10.0, &settings, &mut rng);
        }
        assert_eq!(attention.flows[&0].state, ChatState::Chat);
        // Named: it focuses until a cycle answers, or `addressed_focus` seconds.
        attention.flow(&0).hear(1.0, true, &settings);
        attention.flow(&0).addressed(&settings);
        attention.tick(10.0, &settings, &mut rng);
        assert_eq!(attention.flows[&0].state, ChatState::Focused);
        attention.flow(&0).answered();
        attention.tick(10.0, &settings, &mut rng);
        assert_eq!(attention.flows[&0].state, ChatState::Chat, "answered");
        attention.flow(&0).addressed(&settings);
        for _ in 0..18 {
            attention.flow(&0).hear(1.0, false, &settings);
            attention.tick(10.0, &settings, &mut rng);
        }
        assert_eq!(
            attention.flows[&0].state,
            ChatState::Chat,
            "the address ran out"
        );
        // A social action needs no address; a change of action is applied at once.
        attention.set_engagement(Engagement::Social);
        attention.tick(10.0, &settings, &mut rng);
        assert_eq!(attention.flows[&0].state, ChatState::Focused);
        let moved = attention.set_engagement(Engagement::Listening);
        assert_eq!(
            moved,
            vec![(
                0,
                Change::Moved {
                    from: ChatState::Focused,
                    to: ChatState::Chat
                }
            )]
        );

        // At the table, nobody is asked to join until someone speaks to it.
        let mut table: Attention<u8> = Attention::default();
        table.set_engagement(Engagement::AtTable);
        table.flow(&1).hear(0.5, false, &settings);
        assert_eq!(table.join_candidate(), None);
        table.flow(&1).addressed(&settings);
        assert_eq!(table.join_candidate(), Some(1));
    }
}
