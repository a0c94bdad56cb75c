//! Plan (SPEC §3.3–§3.4): the day in broad strokes on a new day, and the next action whenever
//! the current one has finished.
//!
//! - `plan_new_day`: wake-up hour → (first day) a daily plan, (later days) the identity
//!   revision of SPEC §3.6 → the hourly schedule, regenerated while it is too monotonous →
//!   `f_daily_schedule` → a plan thought in memory.
//! - `determine_action`: decompose the blocks due (pure rules in [`schedule`](super::schedule)),
//!   pad the day to 1440 minutes, ground the current task in a sector, arena and object the
//!   persona knows, describe it (emoji, event triple, the object's state) and start it.
//!
//! Both run inside a persona's thought on its checked-out mind; every model answer goes through
//! a typed prompt with a fail-safe, and every address the persona ends up with exists on the map.

use chrono::{Duration, NaiveDateTime, Timelike};

use crate::llm::ChatRequest;
use crate::memory::NewMemory;
use crate::persona::{DayRecord, EventTriple, KnownGrounding, MindState, ScheduleItem, Scratch};
use crate::prompt::{
    Garble, ParseError, Prompt, PromptContext, PromptLibrary, TemplateError, run_prompt,
};
use crate::settings::AgentSettings;
use crate::world::{ActionAddress, Address, AddressLevel};

use super::perceive::{embedding_for, event_memory_parts};
use super::prompts::{
    ActionArena, ActionDetails, ActionEmoji, ActionEventTriple, ActionObject, ActionPlace,
    ActionSector, DailyPlan, HourlySchedule, ObjectDescription, ObjectEmoji, ObjectEventTriple,
    TaskDecomposition, UsedObject, WakeUpHour, subtask_description, wake_up_item,
};
use super::schedule::{
    blocks_to_decompose, day_hours, distinct_activities, item_start, merge_hourly, pad_day,
    replace_item, schedule_index, schedule_pairs,
};
use super::vocabulary::{AddressBook, PlanEvent, add_new_action, date_text, minute_of_day};

/// A prompt asked again for a fresh sample: same template, a different seed (so a different
/// cache entry). Used to regenerate a too-monotonous hourly schedule.
#[derive(Debug, Clone)]
pub(crate) struct Resampled<P> {
    /// The prompt.
    pub inner: P,
    /// Which resample this is (0 = the original).
    pub variant: u64,
}

impl<P: Prompt> Prompt for Resampled<P> {
    type Output = P::Output;

    fn kind(&self) -> &'static str {
        self.inner.kind()
    }

    fn request(&self, library: &PromptLibrary) -> Result<ChatRequest, TemplateError> {
        let mut request = self.inner.request(library)?;
        if self.variant > 0 {
            let base = request.seed.unwrap_or(0);
            request.seed = Some(base.wrapping_add(self.variant.wrapping_mul(1_000_003)));
        }
        Ok(request)
    }

    fn parse(&self, cleaned: &str) -> Result<Self::Output, ParseError> {
        self.inner.parse(cleaned)
    }

    fn fail_safe(&self) -> Self::Output {
        self.inner.fail_safe()
    }

    fn garbled(&self, output: &Self::Output) -> Option<Garble> {
        self.inner.garbled(output)
    }

    fn options(&self) -> Option<Vec<String>> {
        self.inner.options()
    }

    fn output_for_option(&self, index: usize) -> Option<Self::Output> {
        self.inner.output_for_option(index)
    }
}

/// Long-term planning on a new day (SPEC §3.3). `first_day` when the persona had no time yet.
pub(crate) async fn plan_new_day(
    mind: &mut MindState,
    ctx: &PromptContext,
    settings: &AgentSettings,
    now: NaiveDateTime,
    first_day: bool,
    events: &mut Vec<PlanEvent>,
) {
    let date = now.date();
    let wake_up_hour = run_prompt(
        ctx,
        &WakeUpHour {
            identity: mind.scratch.identity_summary(),
            lifestyle: mind.scratch.lifestyle.clone(),
            first_name: mind.scratch.first_name.clone(),
            fail_safe_hour: settings.wake_up_fail_safe,
        },
    )
    .await
    .value
    .min(23);

    if first_day {
        let plan = run_prompt(
            ctx,
            &DailyPlan {
                identity: mind.scratch.identity_summary(),
                first_name: mind.scratch.first_name.clone(),
                date_text: date_text(now),
                wake_up_hour,
                home: mind.scratch.living_area.clone(),
                workplace: mind.scratch.workplace.clone(),
            },
        )
        .await
        .value;
        let mut daily_req = vec![wake_up_item(wake_up_hour)];
        daily_req.extend(plan);
        mind.scratch.daily_req = daily_req;
    } else {
        super::identity::revise_identity(mind, ctx, settings, now, wake_up_hour, events).await;
    }

    // The hourly schedule, asked again while it is too monotonous.
    let base = HourlySchedule {
        identity: mind.scratch.identity_summary(),
        first_name: mind.scratch.first_name.clone(),
        date_text: date_text(now),
        home: mind.scratch.living_area.clone(),
        workplace: mind.scratch.workplace.clone(),
        daily_plan: mind.scratch.daily_req.clone(),
        wake_up_hour,
    };
    let mut hours = day_hours(wake_up_hour, &run_prompt(ctx, &base).await.value);
    let mut variant = 0;
    while distinct_activities(&hours) < settings.schedule_min_distinct
        && variant < u64::from(settings.schedule_regen_max)
    {
        variant += 1;
        let again = Resampled {
            inner: base.clone(),
            variant,
        };
        hours = day_hours(wake_up_hour, &run_prompt(ctx, &again).await.value);
    }
    let schedule = merge_hourly(&hours);
    mind.scratch.f_daily_schedule = schedule.clone();
    mind.scratch.f_daily_schedule_hourly_org = schedule.clone();

    // The plan thought (SPEC §3.3).
    let name = mind.scratch.name.clone();
    let thought = format!(
        "This is {name}'s plan for {}: {}",
        date_text(now),
        mind.scratch.daily_req.join(", ")
    );
    if let Some(embedding) = embedding_for(mind, ctx, &thought).await {
        let memory = NewMemory::new(
            now,
            (name.clone(), "plan".to_string(), date_text(now)),
            thought,
        )
        .keywords(["plan"])
        .poignancy(settings.plan_thought_poignancy)
        .expires(now + Duration::days(settings.thought_expiration_days))
        .embedding(embedding);
        if let Err(error) = mind.associative.add_thought(memory, Vec::new()) {
            bevy::log::warn!(persona = %name, %error, "could not store the plan thought");
        }
    }

    events.push(PlanEvent::NewDay(DayRecord {
        date: Some(date),
        wake_up_hour,
        daily_req: mind.scratch.daily_req.clone(),
        hourly_schedule: schedule.clone(),
        schedule,
        arenas_visited: Default::default(),
    }));
}

/// Decomposes the blocks due now (SPEC §3.4) and pads the day. Blocks are decomposed from the
/// last to the first so earlier indices stay valid.
pub(crate) async fn decompose_due_blocks(
    mind: &mut MindState,
    ctx: &PromptContext,
    settings: &AgentSettings,
    now: NaiveDateTime,
) {
    let minute = minute_of_day(now);
    let due = blocks_to_decompose(
        &mind.scratch.f_daily_schedule,
        minute,
        now.hour(),
        settings.decompose_min_minutes,
        settings.quiet_hour,
    );
    for index in due.into_iter().rev() {
        let Some(ScheduleItem {
            task,
            minutes: duration,
        }) = mind.scratch.f_daily_schedule.get(index).cloned()
        else {
            continue;
        };
        let prompt = TaskDecomposition {
            identity: mind.scratch.identity_summary(),
            first_name: mind.scratch.first_name.clone(),
            date_text: date_text(now),
            schedule: schedule_pairs(&mind.scratch.f_daily_schedule_hourly_org),
            task: task.clone(),
            start_minute: item_start(&mind.scratch.f_daily_schedule, index),
            duration,
        };
        let steps = run_prompt(ctx, &prompt).await.value;
        let parts: Vec<ScheduleItem> = steps
            .into_iter()
            .map(|(step, minutes)| ScheduleItem::new(subtask_description(&task, &step), minutes))
            .collect();
        replace_item(&mut mind.scratch.f_daily_schedule, index, parts);
    }
    pad_day(&mut mind.scratch.f_daily_schedule);
}

/// The grounded place of an action: `(sector, arena, object)` and the address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grounding {
    /// `world:sector:arena:object` (or `world:sector:arena:<random>`).
    pub address: ActionAddress,
    /// The object's name, when one was chosen.
    pub object: Option<String>,
}

/// Grounds `task` in a place the persona knows (SPEC §3.4): sector → arena → object, each a
/// choice among the known options with the SPEC's fall-backs; the result always exists on the
/// map (checked against `book`; an unknown choice falls back to the living area).
/// Lean mode may know the sector already, and may choose the room and the object at once
/// (see [`LeanGrounding`]).
pub(crate) async fn ground_action(
    mind: &mut MindState,
    ctx: &PromptContext,
    book: &AddressBook,
    current_sector: Option<&str>,
    task: &str,
    seed: u64,
    lean: LeanGrounding,
) -> Grounding {
    let world = book.world.clone();
    let home = HomePlaces::of(&mind.scratch);
    let sector = match lean.known_sector {
        Some(sector) => sector,
        None => choose_sector(mind, ctx, &world, &home, current_sector, task).await,
    };
    if lean.place_at_once {
        let arenas = mind.spatial.accessible_arenas(&world, &sector);
        if !arenas.is_empty() {
            let places = arenas
                .into_iter()
                .map(|arena| {
                    let objects = mind.spatial.accessible_objects(&world, &sector, &arena);
                    (arena, objects)
                })
                .collect();
            let place = run_prompt(
                ctx,
                &ActionPlace {
                    name: mind.scratch.name.clone(),
                    action: task.to_string(),
                    sector: sector.clone(),
                    living_arena: home.living_arena.clone(),
                    places,
                    seed,
                },
            )
            .await
            .value;
            let arena_address = format!("{world}:{sector}:{}", place.arena);
            return settle_address(mind, book, &arena_address, place.object);
        }
    }
    let (sector, arena) = choose_arena(mind, ctx, &world, &home, sector, task).await;
    let objects = mind.spatial.accessible_objects(&world, &sector, &arena);
    // An arena without objects (a lawn, a corridor) leaves nothing to ask: any of its tiles.
    let object = if objects.is_empty() {
        String::new()
    } else {
        run_prompt(
            ctx,
            &ActionObject {
                name: mind.scratch.name.clone(),
                action: task.to_string(),
                place: format!("{sector}, {arena}"),
                options: objects.clone(),
                seed,
            },
        )
        .await
        .value
    };
    let object = objects.contains(&object).then_some(object);
    settle_address(mind, book, &format!("{world}:{sector}:{arena}"), object)
}

/// What lean mode changes in grounding: a sector known from another step of the same task
/// (`reuse_sector`), and one choice of room and object (`place_at_once`).
#[derive(Debug, Default)]
pub(crate) struct LeanGrounding {
    pub(crate) known_sector: Option<String>,
    pub(crate) place_at_once: bool,
}

/// The persona's own places, as grounding falls back to them.
struct HomePlaces {
    living_sector: String,
    living_arena: String,
    workplace_sector: Option<String>,
}

impl HomePlaces {
    fn of(scratch: &Scratch) -> Self {
        let mut living = scratch.living_area.split(':').skip(1).map(str::to_string);
        Self {
            living_sector: living.next().unwrap_or_default(),
            living_arena: living.next().unwrap_or_default(),
            workplace_sector: scratch
                .workplace
                .as_deref()
                .and_then(|w| w.split(':').nth(1))
                .map(str::to_string),
        }
    }
}

/// The sector of `task`, among those the persona knows; an unknown answer (or knowing none)
/// falls back to the living area's sector.
async fn choose_sector(
    mind: &MindState,
    ctx: &PromptContext,
    world: &str,
    home: &HomePlaces,
    current_sector: Option<&str>,
    task: &str,
) -> String {
    let sectors = mind.spatial.accessible_sectors(world);
    if sectors.is_empty() {
        return home.living_sector.clone();
    }
    let sector = run_prompt(
        ctx,
        &ActionSector {
            name: mind.scratch.name.clone(),
            action: task.to_string(),
            living_sector: home.living_sector.clone(),
            workplace_sector: home.workplace_sector.clone(),
            current_sector: current_sector.unwrap_or(&home.living_sector).to_string(),
            option_arenas: sectors
                .iter()
                .map(|sector| mind.spatial.accessible_arenas(world, sector))
                .collect(),
            options: sectors.clone(),
        },
    )
    .await
    .value;
    if sectors.contains(&sector) {
        sector
    } else {
        home.living_sector.clone()
    }
}

/// The arena of `task` in `sector`, with the SPEC's fall-backs: an unknown answer goes to the
/// living arena when in the living sector (or when the sector has no known arena), else to the
/// sector's first arena. Falling back to the living arena also moves the sector home.
async fn choose_arena(
    mind: &MindState,
    ctx: &PromptContext,
    world: &str,
    home: &HomePlaces,
    sector: String,
    task: &str,
) -> (String, String) {
    let arenas = mind.spatial.accessible_arenas(world, &sector);
    let arena = if arenas.is_empty() {
        String::new()
    } else {
        run_prompt(
            ctx,
            &ActionArena {
                name: mind.scratch.name.clone(),
                action: task.to_string(),
                sector: sector.clone(),
                living_arena: home.living_arena.clone(),
                options: arenas.clone(),
            },
        )
        .await
        .value
    };
    let arena = if arenas.contains(&arena) {
        arena
    } else if sector == home.living_sector || arenas.is_empty() {
        home.living_arena.clone()
    } else {
        arenas.first().cloned().unwrap_or_default()
    };
    let sector = if arena == home.living_arena && !arenas.contains(&arena) {
        home.living_sector.clone()
    } else {
        sector
    };
    (sector, arena)
}

/// The grounded address: the object in the arena if the map has it, else a random tile of the
/// arena, else the living area.
fn settle_address(
    mind: &MindState,
    book: &AddressBook,
    arena_address: &str,
    object: Option<String>,
) -> Grounding {
    if let Some(object) = object {
        let address = format!("{arena_address}:{object}");
        // The book holds the map's canonical keys, so a key it contains parses back to itself.
        if book.contains(&address)
            && let Ok(place) = Address::parse(&address)
        {
            return Grounding {
                address: ActionAddress::Place(place),
                object: Some(object),
            };
        }
    }
    if book.contains(arena_address)
        && let Ok(arena) = Address::parse(arena_address)
    {
        return Grounding {
            address: ActionAddress::RandomInArena(arena),
            object: None,
        };
    }
    Grounding {
        address: living_area_action(
            &mind.scratch.living_area,
            &book.world,
            mind.scratch.curr_tile,
        ),
        object: None,
    }
}

/// The last fall-back of grounding: any tile of the living area (`w:s:a:<random>`). A living
/// area that is not an arena is walked to as a place (the execute stage resolves it the same
/// way); one that is no address at all (a hand-edited save) sends the persona into its world,
/// or lets it wait where it stands.
fn living_area_action(
    living_area: &str,
    world: &str,
    tile: crate::world::TileCoord,
) -> ActionAddress {
    match Address::parse(living_area) {
        Ok(arena) if arena.level() == AddressLevel::Arena => ActionAddress::RandomInArena(arena),
        Ok(place) => ActionAddress::Place(place),
        Err(_) => Address::world(world).map_or(ActionAddress::Waiting(tile), ActionAddress::Place),
    }
}

/// Short-term planning (SPEC §3.4): decompose, pad, ground and start the action of `now`.
pub(crate) async fn determine_action(
    mind: &mut MindState,
    ctx: &PromptContext,
    settings: &AgentSettings,
    book: &AddressBook,
    current_sector: Option<&str>,
    now: NaiveDateTime,
    seed: u64,
) {
    decompose_due_blocks(mind, ctx, settings, now).await;
    let minute = minute_of_day(now);
    let schedule = &mind.scratch.f_daily_schedule;
    let index = schedule_index(schedule, minute).unwrap_or(schedule.len().saturating_sub(1));
    let task = schedule
        .get(index)
        .map_or_else(|| "sleeping".to_string(), |item| item.task.clone());
    // The action lasts until its schedule item ends (at least one minute).
    let end =
        item_start(schedule, index).saturating_add(schedule.get(index).map_or(1, |i| i.minutes));
    let duration = end.saturating_sub(minute).max(1);

    if settings.lean.reuse_grounding
        && let Some(known) = mind.scratch.known_groundings.get_mut(&task)
        && still_on_map(book, &known.address)
    {
        known.used = now;
        let known = known.clone();
        add_new_action(
            mind,
            now,
            known.address,
            duration,
            task,
            known.emoji,
            known.event,
            known.object,
        );
        mind.scratch.own_ratings = known.ratings;
        return;
    }
    let sibling_sector = if settings.lean.reuse_sector {
        sibling_sector(mind, &book.world, &task)
    } else {
        None
    };
    let lean = LeanGrounding {
        known_sector: sibling_sector,
        place_at_once: settings.lean.place_at_once,
    };
    let grounding = ground_action(mind, ctx, book, current_sector, &task, seed, lean).await;
    let described = if settings.lean.action_details {
        describe_at_once(mind, ctx, &grounding, &task).await
    } else {
        describe_one_by_one(mind, ctx, &grounding, &task).await
    };
    if settings.lean.reuse_grounding
        && matches!(
            grounding.address,
            ActionAddress::Place(_) | ActionAddress::RandomInArena(_)
        )
    {
        mind.scratch.remember_grounding(
            &task,
            KnownGrounding {
                address: grounding.address.clone(),
                emoji: described.emoji.clone(),
                event: described.event.clone(),
                object: described.object.clone(),
                ratings: described.ratings.clone(),
                used: now,
            },
        );
    }
    add_new_action(
        mind,
        now,
        grounding.address,
        duration,
        task,
        described.emoji,
        described.event,
        described.object,
    );
    mind.scratch.own_ratings = described.ratings;
}

/// How a grounded action looks and reads: its emoji and triple, the used object's state with
/// its emoji and triple, and (lean mode's `action_details`) the poignancy of the two events by
/// their memory descriptions.
struct Described {
    emoji: String,
    event: EventTriple,
    object: Option<(String, String, EventTriple)>,
    ratings: Vec<(String, u8)>,
}

/// Faithful description (SPEC §3.4): the emoji and the triple together, then the object's
/// state, then its emoji and triple together.
async fn describe_one_by_one(
    mind: &MindState,
    ctx: &PromptContext,
    grounding: &Grounding,
    task: &str,
) -> Described {
    let name = mind.scratch.name.clone();
    let emoji = ActionEmoji {
        action: task.to_string(),
    };
    let triple = ActionEventTriple {
        name: name.clone(),
        action: task.to_string(),
    };
    let (emoji, triple) =
        bevy::tasks::futures_lite::future::zip(run_prompt(ctx, &emoji), run_prompt(ctx, &triple))
            .await;
    let object = match &grounding.object {
        Some(object) => {
            let description = run_prompt(
                ctx,
                &ObjectDescription {
                    name: name.clone(),
                    object: object.clone(),
                    action: task.to_string(),
                },
            )
            .await
            .value;
            let object_emoji = ObjectEmoji {
                object_state: description.clone(),
            };
            let object_triple = ObjectEventTriple {
                object_address: grounding.address.to_string(),
                object_name: object.clone(),
                object_state: description.clone(),
            };
            let (object_emoji, object_triple) = bevy::tasks::futures_lite::future::zip(
                run_prompt(ctx, &object_emoji),
                run_prompt(ctx, &object_triple),
            )
            .await;
            Some((description, object_emoji.value, object_triple.value))
        }
        None => None,
    };
    Described {
        emoji: emoji.value,
        event: triple.value,
        object,
        ratings: Vec::new(),
    }
}

/// Lean description: everything in one `action_details` call, the two ratings kept by the
/// descriptions the persona's memory will give the events when it perceives them.
async fn describe_at_once(
    mind: &MindState,
    ctx: &PromptContext,
    grounding: &Grounding,
    task: &str,
) -> Described {
    let s = &mind.scratch;
    let prompt = ActionDetails {
        identity: s.identity_summary(),
        name: s.name.clone(),
        first_name: s.first_name.clone(),
        action: task.to_string(),
        object: grounding.object.as_ref().map(|name| UsedObject {
            name: name.clone(),
            address: grounding.address.to_string(),
        }),
    };
    let answer = run_prompt(ctx, &prompt).await.value;
    let mut ratings: Vec<(String, u8)> = own_memory_description(&answer.event, task)
        .map(|description| (description, answer.poignancy))
        .into_iter()
        .collect();
    let object = answer.object.map(|object| {
        ratings.extend(
            own_memory_description(&object.event, &object.state)
                .map(|description| (description, object.poignancy)),
        );
        (object.state, object.emoji, object.event)
    });
    Described {
        emoji: answer.emoji,
        event: answer.event,
        object,
        ratings,
    }
}

/// The description a memory of the persona's own event will have: the tile event its action
/// puts on the map (`EventTriple::tile_event`, as `ActionView` puts it there) read the way
/// perceiving reads it. `None` for a triple without a subject (nothing goes on the map).
fn own_memory_description(event: &EventTriple, description: &str) -> Option<String> {
    let tile_event = event.tile_event(Some(description.to_string()))?;
    Some(event_memory_parts(&tile_event).3)
}

/// Lean mode's `reuse_sector`: the sector where the persona last went for another step of the
/// same task ("having breakfast (cooking at the stove)" and "having breakfast (eating at
/// the table)"), if it still knows that sector. `None` for a task without steps.
fn sibling_sector(mind: &MindState, world: &str, task: &str) -> Option<String> {
    let parent = parent_task(task)?;
    let prefix = format!("{parent} (");
    mind.scratch
        .known_groundings
        .range(prefix.clone()..)
        .take_while(|(known, _)| known.starts_with(&prefix))
        .filter(|(known, _)| known.as_str() != task)
        .max_by_key(|(_, grounding)| grounding.used)
        .and_then(|(_, grounding)| match &grounding.address {
            ActionAddress::Place(place) | ActionAddress::RandomInArena(place) => {
                place.sector_name().map(str::to_string)
            }
            _ => None,
        })
        .filter(|sector| mind.spatial.accessible_sectors(world).contains(sector))
}

/// The task a step belongs to: "having breakfast" of "having breakfast (cooking at the
/// stove)" (as `subtask_description` writes it); `None` for a task without a step.
fn parent_task(task: &str) -> Option<&str> {
    let inner = task.strip_suffix(')')?;
    let open = inner.rfind(" (")?;
    let parent = inner[..open].trim();
    (!parent.is_empty() && !inner[open + 2..].trim().is_empty()).then_some(parent)
}

/// Whether a remembered grounding's place is still on the map (a save moved to an edited
/// map may have lost it).
fn still_on_map(book: &AddressBook, address: &ActionAddress) -> bool {
    match address {
        ActionAddress::Place(place) | ActionAddress::RandomInArena(place) => {
            book.contains(&place.to_string())
        }
        _ => false,
    }
}

/// Whether `now` starts a new day for a persona whose last step was at `last` (SPEC §3:
/// `None` is the first day).
pub(crate) fn day_change(last: Option<NaiveDateTime>, now: NaiveDateTime) -> Option<bool> {
    match last {
        None => Some(true),
        Some(last) if last.date() != now.date() => Some(false),
        Some(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::NaiveDate;

    #[test]
    fn a_step_belongs_to_the_task_it_was_written_from() {
        let step = subtask_description("having breakfast (at home)", "cooking at the stove");
        assert_eq!(parent_task(&step), Some("having breakfast (at home)"));
        assert_eq!(parent_task("sleeping"), None);
        assert_eq!(parent_task("reading (a novel"), None);
        assert_eq!(parent_task(" (x)"), None);
        assert_eq!(parent_task("napping ()"), None);
    }

    fn at(d: u32, h: u32, m: u32) -> NaiveDateTime {
        NaiveDate::from_ymd_opt(2023, 2, d)
            .and_then(|d| d.and_hms_opt(h, m, 0))
            .unwrap_or_default()
    }

    #[test]
    fn day_changes() {
        assert_eq!(day_change(None, at(13, 0, 0)), Some(true));
        assert_eq!(day_change(Some(at(13, 23, 59)), at(14, 0, 0)), Some(false));
        assert_eq!(day_change(Some(at(13, 8, 0)), at(13, 8, 1)), None);
        assert_eq!(minute_of_day(at(13, 7, 30)), 450);
        assert_eq!(date_text(at(13, 0, 0)), "Monday February 13");
    }
}
