//! Personas: ECS entities with a mind.
//!
//! A [`Persona`] entity requires a [`Mind`] (scratch, associative memory, spatial memory and its
//! own random stream), a [`Body`] (tile and path) and an [`ActionView`] (the current action, for
//! everyone else to see). The mind is *checked out* into a background task while the persona
//! thinks and checked back in with the result, so no lock is held across a model call and no
//! large memory is cloned; the body and action view stay in the ECS so the persona keeps walking
//! and stays visible meanwhile.
//!
//! Personas come from [`PersonaSheet`] files (`assets/personas/*.json`) and are spawned with
//! [`spawn_persona`].
//!
//! **Layer** (see `tests/layers.rs`): imports the ground ([`settings`](crate::settings),
//! [`clock`](crate::clock), [`world`](crate::world), [`memory`](crate::memory)); never the loop
//! that moves personas.

mod diary;
mod partners;
mod scratch;
mod sheet;

pub use diary::{ConversationRecord, DayRecord, Diary};
pub(crate) use partners::link_chat_partners;
pub use partners::{ChatPartners, ChattingWith};

pub(crate) use scratch::CHAT_PREDICATE;
pub use scratch::{
    EventTriple, GroupAfterChat, KnownGrounding, ScheduleItem, Scratch, is_sleep_text,
};
pub(crate) use sheet::quote_clipped;
pub use sheet::{
    MAX_PERSONA_NAME_BYTES, MAX_SHEET_BYTES, MAX_SHEET_LABEL_CHARS, MAX_SHEET_TEXT_CHARS,
    PersonaError, PersonaSheet, check_label, check_persona_name, clean_label, default_personas_dir,
    load_persona_sheets,
};

use std::collections::VecDeque;

use bevy::prelude::*;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::clock::SimClock;
use crate::memory::{AssociativeMemory, SpatialMemory};
use crate::settings::AgentSettings;
use crate::world::{ActionAddress, TileCoord, TileEvent, TownMap};

/// What a persona sees this step, filled by the perceive stage of the cognitive loop.
/// Refreshed every step for personas whose mind is home.
#[derive(Component, Debug, Clone, Default, PartialEq)]
pub struct Percepts {
    /// The tile the persona looked from.
    pub tile: Option<TileCoord>,
    /// The closest `att_bandwidth` events in the persona's arena, nearest first, deduplicated.
    pub events: Vec<TileEvent>,
    /// The arena the persona stands in (`w:s:a`), or a shorter address outdoors.
    pub arena: String,
    /// The sector the persona stands in, if any.
    pub sector: Option<String>,
}

/// The tile events a persona takes part in and so does not perceive as news: the talk of a
/// group it is a member of (SPEC §16) — its lines reach it as a listener, not as a bystander.
/// Kept by the group flow; empty for most personas.
#[derive(Component, Debug, Clone, Default, PartialEq, Eq)]
pub struct TakingPart(pub Vec<String>);

impl TakingPart {
    /// Whether `event` is one the persona takes part in.
    pub fn includes(&self, event: &TileEvent) -> bool {
        self.0.contains(&event.subject)
    }
}

/// When a persona last found everything in view already perceived: its [`Percepts`]' change
/// tick, how many events its memory held, and the retention it was checked with. While all
/// three stay, so does the answer, and the thought loop does not check again. Not saved: a
/// loaded persona checks again.
#[derive(Component, Debug, Clone, Copy, Default)]
pub(crate) struct NoveltyMemo(pub(crate) Option<(bevy::ecs::change_detection::Tick, usize, usize)>);

/// A generative agent. Spawning it brings its required components.
#[derive(Component, Reflect, Debug, Clone, Copy, Default)]
#[reflect(Component)]
#[require(Mind, Body, ActionView, Diary, Percepts, Name, NoveltyMemo)]
pub struct Persona;

/// Everything a persona knows and intends. Moves into background tasks while the persona thinks.
#[derive(Debug, Clone)]
pub struct MindState {
    /// Short-term state (SPEC §2).
    pub scratch: Scratch,
    /// The memory stream.
    pub associative: AssociativeMemory,
    /// Places the persona has seen.
    pub spatial: SpatialMemory,
    /// The persona's own random stream: decisions don't depend on other personas' timing.
    pub rng: ChaCha8Rng,
}

impl Default for MindState {
    fn default() -> Self {
        Self {
            scratch: Scratch::default(),
            associative: AssociativeMemory::default(),
            spatial: SpatialMemory::default(),
            rng: ChaCha8Rng::seed_from_u64(0),
        }
    }
}

/// The holder of a persona's [`MindState`]: empty while the mind is checked out into a task.
#[derive(Component, Debug, Default)]
pub struct Mind(Option<Box<MindState>>);

impl Mind {
    /// A mind holding `state`.
    pub fn new(state: MindState) -> Self {
        Self(Some(Box::new(state)))
    }

    /// Takes the state out (to move it into a task). `None` if it is already out.
    pub(crate) fn check_out(&mut self) -> Option<Box<MindState>> {
        self.0.take()
    }

    /// Puts the state back after a task.
    pub(crate) fn check_in(&mut self, state: Box<MindState>) {
        self.0 = Some(state);
    }

    /// Whether the state is here (not in a task).
    pub fn is_home(&self) -> bool {
        self.0.is_some()
    }

    /// The state, if it is here.
    pub fn get(&self) -> Option<&MindState> {
        self.0.as_deref()
    }

    /// The state, mutably, if it is here.
    pub fn get_mut(&mut self) -> Option<&mut MindState> {
        self.0.as_deref_mut()
    }
}

/// Where a persona is and where it is going. Always in the ECS, even while the mind is out.
#[derive(Component, Reflect, Debug, Clone, Default, PartialEq)]
#[reflect(Component)]
pub struct Body {
    /// The current tile.
    pub tile: TileCoord,
    /// Tiles still to walk, next first (SPEC §2 `planned_path`).
    pub planned_path: VecDeque<TileCoord>,
    /// Whether the path for the current action has been planned (SPEC §2 `act_path_set`).
    pub path_set: bool,
    /// The tile the persona came from at the last step (for animation and facing).
    pub previous_tile: TileCoord,
    /// Where this persona last placed its object's event (tile, object subject), to turn it
    /// idle next step.
    pub object_event_at: Option<(TileCoord, String)>,
}

/// The persona's current action as others see it: the HUD, the renderer, the movement log and
/// other personas' perception read this, never the mind.
#[derive(Component, Reflect, Debug, Clone, Default, PartialEq)]
#[reflect(Component)]
pub struct ActionView {
    /// Where the action happens; `None` before the first action.
    pub address: Option<ActionAddress>,
    /// What the persona is doing.
    pub description: String,
    /// The action as an emoji.
    pub emoji: String,
    /// The event the persona shows on its tile.
    pub event: Option<TileEvent>,
    /// The event of the object in use, placed on arrival.
    pub object_event: Option<TileEvent>,
    /// The persona's home (`w:s:a`), the last fall-back for unknown addresses.
    pub living_area: String,
    /// The chat partner, if chatting.
    pub chatting_with: Option<String>,
    /// The current chat's lines.
    pub chat: Vec<(String, String)>,
    /// When the current action ends (the chat's end while chatting).
    #[reflect(ignore)]
    pub end_time: Option<chrono::NaiveDateTime>,
}

impl ActionView {
    /// Mirrors the action fields of `scratch`.
    pub(crate) fn from_scratch(scratch: &Scratch) -> Self {
        let event = scratch
            .act_event
            .tile_event(scratch.act_description.clone());
        let object_event = scratch
            .act_obj_event
            .tile_event(scratch.act_obj_description.clone());
        Self {
            object_event,
            living_area: scratch.living_area.clone(),
            address: scratch.act_address.clone(),
            description: scratch.act_description.clone().unwrap_or_default(),
            emoji: scratch.act_pronunciatio.clone().unwrap_or_default(),
            event,
            chatting_with: scratch.chatting_with.clone(),
            chat: scratch.chat.clone(),
            end_time: scratch.act_end_time(),
        }
    }

    /// Whether this view already mirrors `scratch`: the same as
    /// `*self == ActionView::from_scratch(scratch)`, compared in place without building
    /// (cloning) the new view — most landed thoughts leave a persona's action as it was.
    pub(crate) fn mirrors(&self, scratch: &Scratch) -> bool {
        self.end_time == scratch.act_end_time()
            && self.address == scratch.act_address
            && self.description == scratch.act_description.as_deref().unwrap_or_default()
            && self.emoji == scratch.act_pronunciatio.as_deref().unwrap_or_default()
            && self.chatting_with == scratch.chatting_with
            && self.living_area == scratch.living_area
            && self.chat == scratch.chat
            && scratch
                .act_event
                .shows_as(&scratch.act_description, &self.event)
            && scratch
                .act_obj_event
                .shows_as(&scratch.act_obj_description, &self.object_event)
    }
}

/// Builds a persona's initial mind from its sheet: identity, hyper-parameters, and a spatial
/// memory of every place in the sectors it knows (all of them unless the sheet lists some).
pub(crate) fn initial_mind(
    sheet: &PersonaSheet,
    map: &TownMap,
    settings: &AgentSettings,
    seed: u64,
) -> MindState {
    let scratch = sheet.to_scratch(settings);
    let mut spatial = SpatialMemory::default();
    let world = map.world_name();
    let home_sector = sheet.living_area.split(':').nth(1);
    for (sector, arenas) in map.places() {
        let known = sheet
            .known_sectors
            .as_ref()
            .is_none_or(|list| list.iter().any(|s| s == sector))
            || home_sector == Some(sector.as_str());
        if !known {
            continue;
        }
        for (arena, objects) in arenas {
            for object in objects {
                spatial.add(world, Some(sector), Some(arena), Some(object));
            }
            if objects.is_empty() {
                spatial.add(world, Some(sector), Some(arena), None);
            }
        }
    }
    MindState {
        scratch,
        associative: AssociativeMemory::default(),
        spatial,
        rng: ChaCha8Rng::seed_from_u64(seed ^ name_hash(&sheet.name)),
    }
}

/// A persona's name as a number (64-bit FNV-1a), for seeds that must stay the same for the
/// same persona across runs, saves and loads — unlike its `Entity`, which a load into a
/// running world hands out afresh.
pub(crate) fn name_hash(name: &str) -> u64 {
    crate::llm::fnv1a(name.as_bytes())
}

/// Spawns a persona from a validated sheet at its spawn location. Fails (spawning nothing) when
/// the sheet does not fit the map.
pub fn spawn_persona(
    commands: &mut Commands,
    sheet: &PersonaSheet,
    map: &TownMap,
    settings: &AgentSettings,
    clock: &SimClock,
    seed: u64,
) -> Result<Entity, PersonaError> {
    let tile = sheet.validate(map)?;
    let mut mind = initial_mind(sheet, map, settings, seed);
    mind.scratch.curr_tile = tile;
    let _ = clock;
    let body = Body {
        tile,
        previous_tile: tile,
        ..Default::default()
    };
    let view = ActionView::from_scratch(&mind.scratch);
    Ok(commands
        .spawn((
            Persona,
            Name::new(sheet.name.clone()),
            Mind::new(mind),
            body,
            view,
        ))
        .id())
}

/// Registers persona types.
#[derive(Default)]
pub struct PersonaPlugin;

impl Plugin for PersonaPlugin {
    fn build(&self, app: &mut App) {
        app.register_type::<Persona>()
            .register_type::<Body>()
            .register_type::<ActionView>()
            .register_type::<ChattingWith>()
            .register_type::<ChatPartners>();
    }
}

/// How a step's parallel passes over every persona split the town between threads: in
/// several small batches per thread rather than one big one (Bevy's default). Most personas
/// cost nothing in a given pass and a few cost much (a thought landing, a heard line stored,
/// a new tile looked around), so with one batch per thread the thread that drew the busy
/// half ran on alone while the others waited; small batches even the halves out.
pub(crate) const PERSONA_BATCHES: bevy::ecs::batching::BatchingStrategy =
    bevy::ecs::batching::BatchingStrategy {
        batch_size_limits: 16..usize::MAX,
        batches_per_thread: 8,
    };

#[cfg(test)]
mod tests {
    use super::*;
    use crate::persona::scratch::EventTriple;
    use chrono::NaiveDate;

    /// Scratches that differ from a base in one action field each (and in the ways
    /// `from_scratch` folds together: no description and an empty one).
    fn scratches() -> Vec<Scratch> {
        let at = |m| NaiveDate::from_ymd_opt(2023, 2, 13).and_then(|d| d.and_hms_opt(9, m, 0));
        let base = Scratch {
            name: "Ana".into(),
            living_area: "w:home:room".into(),
            act_address: ActionAddress::parse("w:s:a:desk").ok(),
            act_start_time: at(0),
            act_duration: Some(30),
            act_description: Some("writing".into()),
            act_pronunciatio: Some("✍".into()),
            act_event: EventTriple::new("Ana", "write", "essay"),
            act_obj_event: EventTriple::new("w:s:a:desk", "is", "used"),
            act_obj_description: Some("desk in use".into()),
            ..Default::default()
        };
        let vary: Vec<fn(&mut Scratch)> = vec![
            |_| {},
            |s| s.act_description = None,
            |s| s.act_description = Some(String::new()),
            |s| s.act_description = Some("reading".into()),
            |s| s.act_pronunciatio = None,
            |s| s.act_pronunciatio = Some(String::new()),
            |s| s.act_address = ActionAddress::parse("w:s:a:bed").ok(),
            |s| s.act_address = None,
            |s| s.act_duration = Some(45),
            |s| s.act_start_time = None,
            |s| s.living_area = "w:elsewhere:room".into(),
            |s| s.act_event = EventTriple::default(),
            |s| s.act_event.predicate = None,
            |s| s.act_event.object = Some("letter".into()),
            |s| s.act_obj_event = EventTriple::default(),
            |s| s.act_obj_description = None,
            |s| {
                s.chatting_with = Some("Bo".into());
                s.chatting_end_time =
                    NaiveDate::from_ymd_opt(2023, 2, 13).and_then(|d| d.and_hms_opt(9, 10, 0));
            },
            |s| s.chatting_with = Some("Bo".into()),
            |s| s.chat = vec![("Ana".into(), "Hi".into())],
            |s| s.chat = vec![("Ana".into(), "Hello".into())],
        ];
        vary.into_iter()
            .map(|change| {
                let mut scratch = base.clone();
                change(&mut scratch);
                scratch
            })
            .collect()
    }

    #[test]
    fn a_view_mirrors_a_scratch_exactly_when_it_equals_the_view_built_from_it() {
        let scratches = scratches();
        let mut differing = 0;
        for a in &scratches {
            let view = ActionView::from_scratch(a);
            for b in &scratches {
                let equal = view == ActionView::from_scratch(b);
                assert_eq!(view.mirrors(b), equal, "{a:?}\nagainst\n{b:?}");
                differing += usize::from(!equal);
            }
        }
        // Every variation but the folded ones (no description and an empty one) shows.
        assert!(differing > scratches.len() * (scratches.len() - 4));
    }
}
