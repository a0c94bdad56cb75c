//! Every tunable number of the simulation, with the defaults SPEC.md gives them.
//!
//! [`AgentSettings`] is a [`Resource`] initialised with `init_resource`, so a game that inserts
//! its own value before adding the plugins wins. Structural choices (which schedule drives the
//! clock, which backend answers) live on the plugins instead.
//!
//! **Layer** (see `tests/layers.rs`): the ground floor: imports no other module of the crate.

use bevy::prelude::*;
use serde::{Deserialize, Serialize};

/// Tunables of the cognitive loop, the clock driver and the prompt layer.
#[derive(Resource, Reflect, Debug, Clone, PartialEq, Serialize, Deserialize)]
#[reflect(Resource, Default)]
#[serde(default)]
pub struct AgentSettings {
    /// Default persona hyper-parameters (a persona file may override them).
    pub persona: PersonaDefaults,
    /// Global retrieval weights `[recency, relevance, importance]` (SPEC §3.2: 0.5, 3, 2).
    pub retrieval_weights: [f32; 3],
    /// How many memories `new_retrieve` returns by default (SPEC §3.2: 30).
    pub retrieve_n: usize,
    /// Memories retrieved on a new day for a third focal point, today's date ("Tuesday
    /// February 14"), beside Smallville's two, so the planning note sees events announced for
    /// today (SPEC §16). 0 keeps to Smallville's two points.
    pub today_focal_n: usize,
    /// Steps after a chat before the same pair may chat again (SPEC §3.5: 800).
    pub chat_cooldown_steps: u32,
    /// Rounds of a persona ↔ persona conversation, two utterances each (SPEC §3.7: 8).
    pub max_chat_rounds: u32,
    /// A previous chat with the same partner is context when it ended less than this many
    /// minutes ago (SPEC §3.7: 480).
    pub chat_context_minutes: i64,
    /// Lifetime of thoughts (plans, reflections, chat memos) in days (SPEC §3.3: 30).
    pub thought_expiration_days: i64,
    /// Poignancy of the daily-plan thought (SPEC §3.3: 5).
    pub plan_thought_poignancy: u8,
    /// Blocks at least this long are decomposed into sub-tasks (SPEC §3.4: 60 min).
    pub decompose_min_minutes: u32,
    /// No decomposition and no chats from this hour on (SPEC §3.4, §3.5: 23).
    pub quiet_hour: u32,
    /// Times the hourly schedule is regenerated while it is too monotonous (SPEC §3.3: 3).
    pub schedule_regen_max: u32,
    /// Fewer distinct activities than this triggers a regeneration (SPEC §3.3: 5).
    pub schedule_min_distinct: usize,
    /// Wake-up hour when the model gives no usable answer (SPEC §3.3: 8).
    pub wake_up_fail_safe: u32,
    /// Focal points per reflection (SPEC §3.8: 3).
    pub reflection_focal_points: usize,
    /// Insights per focal point (SPEC §3.8: 5).
    pub reflection_insights: usize,
    /// Attempts after the first before a prompt falls back to its fail-safe (SPEC §5: 3).
    pub prompt_retries: u32,
    /// Clock driver: how many sim steps one real second holds at 1× speed.
    pub steps_per_second_at_1x: f64,
    /// Clock driver: at most this many steps run in one frame at a fixed speed, so a slow frame
    /// cannot trigger a catch-up spiral.
    pub max_steps_per_frame: u32,
    /// Clock driver: at "max" speed, stop starting new steps in a frame after this many
    /// milliseconds, so the window stays responsive.
    pub max_speed_frame_budget_ms: u64,
    /// Realtime mode: show the pending-thought marker after cognition has been pending this many
    /// real seconds.
    pub thinking_marker_after_secs: f32,
    /// The savings of lean mode (all off: faithful, the default, and then absent from saves).
    /// See [`AgentSettings::lean`].
    #[serde(skip_serializing_if = "LeanSettings::is_faithful")]
    pub lean: LeanSettings,
}

impl Default for AgentSettings {
    fn default() -> Self {
        Self {
            persona: PersonaDefaults::default(),
            retrieval_weights: [0.5, 3.0, 2.0],
            retrieve_n: 30,
            today_focal_n: 5,
            chat_cooldown_steps: 800,
            max_chat_rounds: 8,
            chat_context_minutes: 480,
            thought_expiration_days: 30,
            plan_thought_poignancy: 5,
            decompose_min_minutes: 60,
            quiet_hour: 23,
            schedule_regen_max: 3,
            schedule_min_distinct: 5,
            wake_up_fail_safe: 8,
            reflection_focal_points: 3,
            reflection_insights: 5,
            prompt_retries: 3,
            steps_per_second_at_1x: 1.0,
            max_steps_per_frame: 64,
            max_speed_frame_budget_ms: 12,
            thinking_marker_after_secs: 1.5,
            lean: LeanSettings::default(),
        }
    }
}

impl AgentSettings {
    /// The lean profile: every saving of [`LeanSettings`] on, and reflections that give two
    /// focal points' worth of three insights each (SPEC §3.8 asks for 3 × 5). Everything else
    /// is as faithful. What goes is repetition and splitting — the same action grounded
    /// again, the room and the object asked one after the other, six calls for an action's
    /// details, an event rated again, a step's percepts rated and embedded one by one, a
    /// reflection's questions and its recall per question, a call per thought after a chat,
    /// one call per focused persona of a group conversation. 48 game hours of five personas
    /// cost about 38 % of faithful's calls and tokens (README, "Lean mode").
    /// `headless::make_lean` switches a built app to it.
    pub fn lean() -> Self {
        let mut settings = Self::default();
        settings.make_lean();
        settings
    }

    /// Switches these settings to the lean profile of [`AgentSettings::lean`], keeping every
    /// setting lean mode does not touch.
    pub fn make_lean(&mut self) {
        self.reflection_focal_points = 2;
        self.reflection_insights = 3;
        self.lean = LeanSettings::all();
    }

    /// Whether any saving of lean mode is on.
    pub fn is_lean(&self) -> bool {
        !self.lean.is_faithful()
    }
}

/// The savings lean mode makes, each on its own switch (all off by default: faithful).
#[derive(Reflect, Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct LeanSettings {
    /// A persona grounds an action it has grounded before (the same words) where it did then: the place, the object, the emoji and the event triples are
    /// reused instead of asked again (about six calls per action).
    pub reuse_grounding: bool,
    /// A step's new percepts are embedded in one request instead of one request each (the
    /// vectors are the same).
    pub batch_percepts: bool,
    /// Group conversations in rounds: the focused personas of one stream decide together in
    /// one call (`group_round`) instead of one call each, and their cycles keep one beat
    /// (every `GroupSettings::focus_cycle_every` seconds of the clock) so they fall due
    /// together. A round also plans each seat's next two lines, said at its next cycles without
    /// a call if the talk went about as planned; focused personas with nothing new to answer
    /// sit at it to plan theirs, and the join question of someone walking into the talk is
    /// asked in it. No tools in a round.
    pub group_rounds: bool,
    /// An action's details in one call (`action_details`): its emoji and triple, the used
    /// object's state, emoji and triple, and how much the action and the object's state
    /// matter to the persona — kept as the poignancy of those two events when the persona
    /// perceives them a step later, so it is not asked for them again.
    pub action_details: bool,
    /// A reflection in one call: insights straight from the latest memories (at most
    /// `retrieve_n`), as many as the focal points would have given together, instead of the
    /// focal-point questions and one insight call per question; the insights are embedded
    /// in one request.
    pub one_pass_reflection: bool,
    /// The thoughts after a chat in one call (`after_chat`): the planning thought, the memo
    /// and how much each matters to the persona, instead of a call for each thought and one
    /// for each rating; the two are embedded in one request.
    pub after_chat_at_once: bool,
    /// A step of a task goes to the sector (area) where the persona went for another step
    /// of the same task (the latest), without asking for it again; the arena and the object
    /// are still chosen (a morning routine spans the bedroom and the bathroom). Needs
    /// `reuse_grounding`, which keeps where steps went.
    pub reuse_sector: bool,
    /// A perceived event the persona remembers already (the same words, among its latest
    /// events about the same subject) keeps the poignancy it was given then instead of being
    /// rated again (a new day's identity would otherwise miss the response cache).
    pub rate_events_once: bool,
    /// In a conversation, each side sums up its relationship with the other once, at its
    /// first line, instead of before every line (the memories it is drawn from barely move
    /// within one conversation).
    pub relationship_once: bool,
    /// The room and the object of an action in one choice among the sector's "room: object"
    /// places (`action_place`) instead of the room first and then one of its objects.
    pub place_at_once: bool,
    /// A step's new events that need a rating are rated in one call (`event_poignancies`)
    /// when there are two or more, instead of one `event_poignancy` call each.
    pub rate_together: bool,
}

impl LeanSettings {
    /// Whether every saving is off.
    pub fn is_faithful(&self) -> bool {
        *self == Self::default()
    }

    /// Every saving on.
    pub fn all() -> Self {
        Self {
            reuse_grounding: true,
            batch_percepts: true,
            group_rounds: true,
            action_details: true,
            one_pass_reflection: true,
            after_chat_at_once: true,
            reuse_sector: true,
            rate_events_once: true,
            relationship_once: true,
            place_at_once: true,
            rate_together: true,
        }
    }
}

/// A persona's cognitive hyper-parameters (SPEC §2).
#[derive(Reflect, Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PersonaDefaults {
    /// Vision radius in tiles (4).
    pub vision_r: i32,
    /// How many perceived events get attention per step (3).
    pub att_bandwidth: usize,
    /// How many latest events count as "already known" when perceiving (5).
    pub retention: usize,
    /// Persona multiplier on the recency weight (1).
    pub recency_w: f32,
    /// Persona multiplier on the relevance weight (1).
    pub relevance_w: f32,
    /// Persona multiplier on the importance weight (1).
    pub importance_w: f32,
    /// Recency decay per game hour since last access (0.995).
    pub recency_decay: f32,
    /// Accumulated poignancy that triggers a reflection (150).
    pub importance_trigger_max: i32,
}

impl Default for PersonaDefaults {
    fn default() -> Self {
        Self {
            vision_r: 4,
            att_bandwidth: 3,
            retention: 5,
            recency_w: 1.0,
            relevance_w: 1.0,
            importance_w: 1.0,
            recency_decay: 0.995,
            importance_trigger_max: 150,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_the_spec() {
        let s = AgentSettings::default();
        assert_eq!(s.retrieval_weights, [0.5, 3.0, 2.0]);
        assert_eq!(s.chat_cooldown_steps, 800);
        assert_eq!(s.persona.vision_r, 4);
        assert_eq!(s.persona.importance_trigger_max, 150);
        assert!((s.persona.recency_decay - 0.995).abs() < 1e-6);
    }

    #[test]
    fn partial_config_keeps_other_defaults() {
        let s: AgentSettings =
            serde_json::from_str(r#"{"retrieve_n": 12, "persona": {"vision_r": 6}}"#).unwrap();
        assert_eq!(s.retrieve_n, 12);
        assert_eq!(s.persona.vision_r, 6);
        assert_eq!(s.persona.att_bandwidth, 3);
        assert_eq!(s.chat_cooldown_steps, 800);
    }
}
