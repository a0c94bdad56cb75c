//! The attention of one persona to one chat stream (SPEC §8, seed 003's sub-heart-flow): its
//! state, interest, willingness and chance to focus, and the numbers that move them — pure
//! functions of elapsed game time, what was heard and seeded draws, so a Lockstep run makes
//! the same choices every time.
//!
//! A sub-flow is `Absent` (not following), `Chat` (replies now and then, by a probability) or
//! `Focused` (deliberate observe → think → plan → execute cycles). Per game second, interest
//! decays ×0.98 and willingness ×0.9; a message raises interest by its relevance to the
//! persona (and more when the persona is named), capped at 15; being named adds 1 to
//! willingness (cap 3) and replying takes 1.8 away. In `Chat` the reply probability is
//! `p = min(max(w − 0.5, 0.01) · amp · 2, 1)`. While interest stays at 3 or more, the chance
//! to focus rises 0.1 per second and is drawn every 5 s; a win moves `Chat` to `Focused`
//! (never `Absent` to `Focused`: a stream is joined first). Three `no_reply` plans in a row
//! drop a focused sub-flow to `Absent`, thirty silent minutes drop a chatting one, and an
//! absent sub-flow is forgotten after an hour.
//!
//! A line that names the persona, or one game code or the player says into the stream (no
//! persona said it), **addresses** it: until a focused cycle answers it (at most
//! [`AttentionSettings::addressed_focus`] seconds) the sub-flow may focus even when the
//! persona's action is not social (see [`Engagement`](super::social::Engagement)) — being
//! spoken to deserves a real answer.

use bevy::prelude::{Reflect, ReflectDefault};
use serde::{Deserialize, Serialize};

/// How a persona follows one stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ChatState {
    /// Not following: messages raise interest, nothing else.
    Absent,
    /// Following casually: each message may be answered, by a draw.
    Chat,
    /// Following closely: observe → think → plan → execute cycles (the model calls).
    Focused,
}

/// Every constant of SPEC §8, with its default.
#[derive(Debug, Clone, Copy, PartialEq, Reflect, Serialize, Deserialize)]
#[reflect(Default)]
#[serde(default)]
pub struct AttentionSettings {
    /// Most interest one stream can hold (15).
    pub interest_cap: f32,
    /// Interest kept per game second (0.98).
    pub interest_decay: f32,
    /// Interest a message adds per unit of relevance (relevance is 0–1; default 3).
    pub interest_per_relevance: f32,
    /// Interest added when the persona is named (default 5).
    pub named_interest: f32,
    /// Willingness kept per game second (0.9).
    pub willingness_decay: f32,
    /// Most willingness (3.0).
    pub willingness_cap: f32,
    /// Willingness added when named (1).
    pub named_willingness: f32,
    /// Willingness taken away after replying (1.8).
    pub reply_cost: f32,
    /// The reply probability's amplifier `amp` (a persona's talkativeness; default 1).
    pub reply_amplifier: f32,
    /// Interest from which the chance to focus rises (3.0).
    pub focus_interest: f32,
    /// Rise of the chance to focus per game second (0.1).
    pub focus_rise: f32,
    /// Game seconds between focus draws (5).
    pub focus_draw_every: f32,
    /// `no_reply` plans in a row that drop a focused sub-flow to `Absent` (3).
    pub max_no_replies: u32,
    /// Game seconds between two join questions (one stream per 60 s).
    pub join_every: f32,
    /// Game seconds of silence after which a chatting sub-flow goes `Absent` (1,800).
    pub chat_idle: f32,
    /// Game seconds after which an absent sub-flow is forgotten (3,600).
    pub forget_absent: f32,
    /// Game seconds a line addressing the persona (naming it, or said into the stream by game
    /// code or the player) lets a sub-flow focus when the persona's action is not social, at
    /// most (180): until one focused cycle has answered it — then the persona listens again
    /// unless addressed anew. Longer than the 120 s beat of a busy persona's cycles, so every
    /// address gets its answer. A social action needs no address (see
    /// [`Engagement`](super::social::Engagement)).
    pub addressed_focus: f32,
}

impl Default for AttentionSettings {
    fn default() -> Self {
        Self {
            interest_cap: 15.0,
            interest_decay: 0.98,
            interest_per_relevance: 3.0,
            named_interest: 5.0,
            willingness_decay: 0.9,
            willingness_cap: 3.0,
            named_willingness: 1.0,
            reply_cost: 1.8,
            reply_amplifier: 1.0,
            focus_interest: 3.0,
            focus_rise: 0.1,
            focus_draw_every: 5.0,
            max_no_replies: 3,
            join_every: 60.0,
            chat_idle: 1_800.0,
            forget_absent: 3_600.0,
            addressed_focus: 180.0,
        }
    }
}

/// The reply probability of SPEC §8: `min(max(w − 0.5, 0.01) · amp · 2, 1)` (a NaN
/// willingness counts as the least willing, a NaN amplifier as never replying).
pub fn reply_probability(willingness: f32, amplifier: f32) -> f32 {
    let p = (willingness - 0.5).max(0.01) * amplifier.max(0.0) * 2.0;
    if p.is_nan() { 0.0 } else { p.clamp(0.0, 1.0) }
}

/// One persona's attention to one stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SubFlow {
    /// Absent, chatting or focused.
    pub state: ChatState,
    /// 0 ..= `interest_cap`.
    pub interest: f32,
    /// 0 ..= `willingness_cap`.
    pub willingness: f32,
    /// The chance the next focus draw wins, 0 ..= 1.
    pub focus_chance: f32,
    /// Game seconds until the next focus draw.
    pub focus_draw_in: f32,
    /// `no_reply` plans in a row while focused.
    pub no_replies: u32,
    /// Game seconds since the persona last spoke here (or joined).
    pub silent_for: f32,
    /// Game seconds spent absent.
    pub absent_for: f32,
    /// Game seconds left of the last address (a line naming the persona, or game code's), 0
    /// once a focused cycle answered it: while above 0 the sub-flow may focus though the
    /// persona's action is not social.
    #[serde(default)]
    pub addressed_for: f32,
}

impl Default for SubFlow {
    fn default() -> Self {
        Self {
            state: ChatState::Absent,
            interest: 0.0,
            willingness: 0.0,
            focus_chance: 0.0,
            focus_draw_in: 0.0,
            no_replies: 0,
            silent_for: 0.0,
            absent_for: 0.0,
            addressed_for: 0.0,
        }
    }
}

/// What happened to a sub-flow's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// It moved from one state to another.
    Moved {
        /// Before.
        from: ChatState,
        /// After.
        to: ChatState,
    },
}

impl SubFlow {
    /// Lets `secs` game seconds pass: interest and willingness decay, timers run, the chance to
    /// focus rises while interest is high. Negative or non-finite `secs` count as 0.
    pub fn pass(&mut self, secs: f32, settings: &AttentionSettings) {
        let secs = if secs.is_finite() { secs.max(0.0) } else { 0.0 };
        self.interest = clamp_finite(
            self.interest * settings.interest_decay.clamp(0.0, 1.0).powf(secs),
            settings.interest_cap,
        );
        self.willingness = clamp_finite(
            self.willingness * settings.willingness_decay.clamp(0.0, 1.0).powf(secs),
            settings.willingness_cap,
        );
        if self.state == ChatState::Chat && self.interest >= settings.focus_interest {
            self.focus_chance = (self.focus_chance + settings.focus_rise * secs).clamp(0.0, 1.0);
        }
        self.focus_draw_in = (self.focus_draw_in - secs).max(0.0);
        self.silent_for += secs;
        if self.state == ChatState::Absent {
            self.absent_for += secs;
        }
        self.addressed_for = (self.addressed_for - secs).max(0.0);
    }

    /// A line addressed the persona (named it, or game code said it into the stream): the
    /// sub-flow may focus until a focused cycle answers it, at most
    /// [`AttentionSettings::addressed_focus`] seconds from now.
    pub fn addressed(&mut self, settings: &AttentionSettings) {
        let window = settings.addressed_focus;
        let window = if window.is_finite() {
            window.max(0.0)
        } else {
            0.0
        };
        self.addressed_for = self.addressed_for.max(window);
    }

    /// A focused cycle observed the lines that addressed the persona: the address is spent
    /// (the next one is needed to focus again while the persona's action is not social).
    pub fn answered(&mut self) {
        self.addressed_for = 0.0;
    }

    /// Whether a line addressed the persona that no focused cycle has answered yet (within
    /// [`AttentionSettings::addressed_focus`] seconds).
    pub fn is_addressed(&self) -> bool {
        self.addressed_for > 0.0
    }

    /// A message arrived: interest by its `relevance` (0–1) to the persona, more and some
    /// willingness when the persona is `named`.
    pub fn hear(&mut self, relevance: f32, named: bool, settings: &AttentionSettings) {
        let relevance = if relevance.is_finite() {
            relevance.clamp(0.0, 1.0)
        } else {
            0.0
        };
        let mut gain = relevance * settings.interest_per_relevance;
        if named {
            gain += settings.named_interest;
            self.willingness = clamp_finite(
                self.willingness + settings.named_willingness,
                settings.willingness_cap,
            );
        }
        self.interest = clamp_finite(self.interest + gain, settings.interest_cap);
    }

    /// The persona said something here.
    pub fn spoke(&mut self, settings: &AttentionSettings) {
        self.willingness = clamp_finite(
            self.willingness - settings.reply_cost,
            settings.willingness_cap,
        );
        self.silent_for = 0.0;
        self.no_replies = 0;
    }

    /// The reply probability now (meaningful in `Chat`).
    pub fn reply_probability(&self, settings: &AttentionSettings) -> f32 {
        reply_probability(self.willingness, settings.reply_amplifier)
    }

    /// Whether a chatting persona answers this message, by `draw` (uniform in 0..1).
    pub fn wants_to_reply(&self, draw: f32, settings: &AttentionSettings) -> bool {
        self.state == ChatState::Chat && draw < self.reply_probability(settings)
    }

    /// A focused cycle planned `no_reply`: three in a row (by default) leave the stream.
    pub fn planned_no_reply(&mut self, settings: &AttentionSettings) -> Option<Change> {
        if self.state != ChatState::Focused {
            return None;
        }
        self.no_replies += 1;
        (self.no_replies >= settings.max_no_replies.max(1)).then(|| self.go(ChatState::Absent))
    }

    /// Moves to `to`, resetting what the new state starts afresh. `Absent` → `Focused` is not
    /// a move a sub-flow makes: it joins (`Chat`) instead.
    pub(crate) fn go(&mut self, to: ChatState) -> Change {
        let to = if self.state == ChatState::Absent && to == ChatState::Focused {
            ChatState::Chat
        } else {
            to
        };
        let from = self.state;
        self.state = to;
        match to {
            ChatState::Absent => {
                self.absent_for = 0.0;
                self.focus_chance = 0.0;
                self.no_replies = 0;
            }
            ChatState::Chat => {
                self.silent_for = 0.0;
                self.focus_chance = 0.0;
                self.no_replies = 0;
            }
            ChatState::Focused => self.no_replies = 0,
        }
        Change::Moved { from, to }
    }

    /// Whether a focus draw is due (chatting, interest high, the 5 s timer run out).
    pub(crate) fn focus_draw_due(&self, settings: &AttentionSettings) -> bool {
        self.state == ChatState::Chat
            && self.interest >= settings.focus_interest
            && self.focus_draw_in <= 0.0
    }

    /// Draws for focus (`draw` uniform in 0..1): whether it won. Restarts the timer.
    pub(crate) fn draw_focus(&mut self, draw: f32, settings: &AttentionSettings) -> bool {
        self.focus_draw_in = settings.focus_draw_every.max(0.0);
        draw < self.focus_chance
    }

    /// A chatting sub-flow silent for `chat_idle` seconds leaves.
    pub(crate) fn idle_out(&self, settings: &AttentionSettings) -> bool {
        self.state == ChatState::Chat && self.silent_for >= settings.chat_idle
    }

    /// An absent sub-flow past `forget_absent` is removed.
    pub(crate) fn forgotten(&self, settings: &AttentionSettings) -> bool {
        self.state == ChatState::Absent && self.absent_for >= settings.forget_absent
    }
}

/// `v` within `0 ..= cap` (NaN counts as 0).
fn clamp_finite(v: f32, cap: f32) -> f32 {
    if v.is_nan() {
        0.0
    } else {
        v.clamp(0.0, cap.max(0.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_formulas_of_spec_8() {
        let s = AttentionSettings::default();
        assert_eq!(reply_probability(3.0, 1.0), 1.0);
        assert!((reply_probability(0.9, 1.0) - 0.8).abs() < 1e-6);
        assert!((reply_probability(0.0, 1.0) - 0.02).abs() < 1e-6);
        assert!((reply_probability(0.5, 1.0) - 0.02).abs() < 1e-6);
        assert!((reply_probability(f32::NAN, 1.0) - 0.02).abs() < 1e-6);
        assert_eq!(reply_probability(1.0, f32::NAN), 0.0);

        let mut flow = SubFlow {
            interest: 10.0,
            willingness: 2.0,
            ..SubFlow::default()
        };
        flow.pass(10.0, &s);
        assert!(
            (flow.interest - 10.0 * 0.98f32.powi(10)).abs() < 1e-4,
            "{}",
            flow.interest
        );
        assert!((flow.willingness - 2.0 * 0.9f32.powi(10)).abs() < 1e-4);
        flow.hear(1.0, true, &s);
        flow.hear(1.0, true, &s);
        assert_eq!(flow.interest, 15.0, "capped");
        assert!(flow.willingness <= 3.0);
        flow.spoke(&s);
        assert!(flow.willingness >= 0.0);
    }

    #[test]
    fn absent_joins_before_it_focuses_and_three_no_replies_leave() {
        let s = AttentionSettings::default();
        let mut flow = SubFlow::default();
        assert_eq!(
            flow.go(ChatState::Focused),
            Change::Moved {
                from: ChatState::Absent,
                to: ChatState::Chat
            }
        );
        flow.go(ChatState::Focused);
        assert_eq!(flow.planned_no_reply(&s), None);
        assert_eq!(flow.planned_no_reply(&s), None);
        assert_eq!(
            flow.planned_no_reply(&s),
            Some(Change::Moved {
                from: ChatState::Focused,
                to: ChatState::Absent
            })
        );
    }
}
