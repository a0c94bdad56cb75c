//! The words every stage of the loop shares: what a thought knows of the map and of the
//! others, what it tells the diary, and the small pure helpers each stage uses.
//!
//! Stages (`perceive`, `plan`, `identity`, `converse`, `reflect`) import from here and never
//! from [`think`](super::think), which drives them; so the drive runs one way.

use std::collections::HashSet;

use bevy::prelude::*;
use bevy::tasks::Task;
use chrono::{NaiveDate, NaiveDateTime, Timelike};

use crate::memory::RetrievalParams;
use crate::persona::{ActionView, ConversationRecord, DayRecord, EventTriple, MindState};
use crate::settings::AgentSettings;
use crate::world::{ActionAddress, TownMap};

/// Every address on the map, to check that a grounded action exists. Built once per map.
#[derive(Debug, Clone, Default)]
pub(crate) struct AddressBook {
    /// The world's name.
    pub world: String,
    addresses: HashSet<String>,
}

impl AddressBook {
    /// The addresses of `map`.
    pub fn of(map: &TownMap) -> Self {
        Self {
            world: map.world_name().to_string(),
            addresses: map.address_keys().into_iter().map(str::to_string).collect(),
        }
    }

    /// Whether `address` is on the map.
    pub fn contains(&self, address: &str) -> bool {
        self.addresses.contains(address)
    }
}

/// Another persona as a thought sees it (from the step's snapshot).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct OtherPersona {
    /// Name.
    pub name: String,
    /// Action address (`None` before the first action).
    pub address: Option<ActionAddress>,
    /// Action description.
    pub description: String,
    /// When the action ends.
    pub end_time: Option<NaiveDateTime>,
    /// Whether chatting.
    pub chatting: bool,
    /// Whether asleep.
    pub sleeping: bool,
    /// Whether waiting.
    pub waiting: bool,
}

impl OtherPersona {
    /// The snapshot of `view`.
    pub fn of(name: &str, view: &ActionView) -> Self {
        Self {
            name: name.to_string(),
            address: view.address.clone(),
            description: view.description.clone(),
            end_time: view.end_time,
            chatting: view.chatting_with.is_some(),
            sleeping: crate::persona::is_sleep_text(&view.description),
            waiting: view.address.as_ref().is_some_and(ActionAddress::is_waiting),
        }
    }

    /// Whether this is already the snapshot of `view` (the name aside): what
    /// [`Self::of`] reads is unchanged.
    pub fn shows(&self, view: &ActionView) -> bool {
        self.end_time == view.end_time
            && self.chatting == view.chatting_with.is_some()
            && self.address == view.address
            && self.description == view.description
    }
}

/// Something a thought did that the persona's [`Diary`](crate::persona::Diary) records.
#[derive(Debug, Clone, PartialEq)]
pub enum PlanEvent {
    /// A new day was planned.
    NewDay(DayRecord),
    /// The identity was revised for this date.
    IdentityRevised(NaiveDate),
    /// A reflection ran and stored these insights.
    Reflected(Vec<String>),
    /// A conversation started.
    Conversation(ConversationRecord),
    /// A reaction of this kind (`"chat"`, `"wait"`) started.
    Reaction(&'static str),
}

/// The retrieval parameters of a persona: global weights × its own multipliers and decay.
pub(crate) fn retrieval_params(mind: &MindState, settings: &AgentSettings) -> RetrievalParams {
    let p = &mind.scratch.params;
    let [recency, relevance, importance] = settings.retrieval_weights;
    RetrievalParams {
        weights: crate::memory::RetrievalWeights {
            recency,
            relevance,
            importance,
        },
        recency_w: p.recency_w,
        relevance_w: p.relevance_w,
        importance_w: p.importance_w,
        recency_decay: p.recency_decay,
        ..Default::default()
    }
}

/// Names as a sentence lists them: "Ana", "Ana and Bram", "Ana, Bram and Otto".
pub(crate) fn names_list(names: &[&str]) -> String {
    match names {
        [] => String::new(),
        [only] => (*only).to_string(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// Today's date as prompts show it ("Monday February 13").
pub fn date_text(now: NaiveDateTime) -> String {
    now.format("%A %B %d").to_string()
}

/// Minutes elapsed today at `now`.
pub fn minute_of_day(now: NaiveDateTime) -> u32 {
    now.hour() * 60 + now.minute()
}

/// Starts a new action: every action field, `act_start_time = now` (SPEC §3.4 `add_new_action`).
#[expect(
    clippy::too_many_arguments,
    reason = "mirrors the action fields of SPEC §2"
)]
pub(crate) fn add_new_action(
    mind: &mut MindState,
    now: NaiveDateTime,
    address: ActionAddress,
    duration: u32,
    description: String,
    emoji: String,
    event: EventTriple,
    object: Option<(String, String, EventTriple)>,
) {
    let s = &mut mind.scratch;
    s.act_address = Some(address);
    s.act_start_time = Some(now);
    s.act_duration = Some(duration);
    s.act_description = Some(description);
    s.act_pronunciatio = Some(emoji);
    s.act_event = event;
    match object {
        Some((description, emoji, event)) => {
            s.act_obj_description = Some(description);
            s.act_obj_pronunciatio = Some(emoji);
            s.act_obj_event = event;
        }
        None => {
            s.act_obj_description = None;
            s.act_obj_pronunciatio = None;
            s.act_obj_event = EventTriple::default();
        }
    }
}

/// A conversation in flight, on the initiator's entity.
#[derive(Component)]
pub struct Conversing(pub(super) Task<ConversationDone>);

/// What a conversation task hands back.
#[derive(Debug)]
pub(crate) struct ConversationDone {
    pub(super) initiator: (Entity, Box<MindState>, PlanEvent),
    pub(super) partner: (Entity, Box<MindState>, PlanEvent),
    /// Model calls of the conversation that fell back to their fail-safe.
    pub(super) failures: Vec<crate::prompt::ModelFailure>,
}

#[cfg(test)]
mod names_list_tests {
    use super::names_list;

    #[test]
    fn names_read_as_a_sentence() {
        assert_eq!(names_list(&[]), "");
        assert_eq!(names_list(&["Ana"]), "Ana");
        assert_eq!(names_list(&["Ana", "Bram"]), "Ana and Bram");
        assert_eq!(names_list(&["Ana", "Bram", "Otto"]), "Ana, Bram and Otto");
    }
}
