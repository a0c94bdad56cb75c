//! Perceive (SPEC §3.1): a persona looks `vision_r` tiles around it, learns the places it sees,
//! and turns the closest new events of its own arena into memories.
//!
//! The looking is synchronous and reads only the map (`perceive_surroundings`, run for every
//! persona each step by `gather_percepts` into its [`Percepts`]). Forming memories needs the
//! model (poignancy, embeddings), so it runs inside the persona's thought
//! (`form_memories`) on the checked-out mind.

use std::collections::HashMap;

use bevy::prelude::*;
use chrono::NaiveDateTime;

use crate::clock::{AwaitingCognition, Held};
use crate::llm::EMBED_KIND;
use crate::memory::{ChatLine, NewMemory, NodeId};
use crate::persona::{
    Body, CHAT_PREDICATE, Mind, MindState, PERSONA_BATCHES, Percepts, Persona, TakingPart,
};
use crate::prompt::{FailureReason, ModelFailure, PromptContext, run_prompt};
use crate::settings::{AgentSettings, LeanSettings};
use crate::world::{AddressLevel, TileCoord, TileEvent, TownMap};

use super::prompts::{ChatPoignancy, EventPoignancies, EventPoignancy, transcript};

/// Adds the places within `vision_r` of `tile` to `spatial` (SPEC §3.1 step 1), allocating
/// only for places it did not know yet.
pub(crate) fn learn_places(
    spatial: &mut crate::memory::SpatialMemory,
    map: &TownMap,
    tile: TileCoord,
    vision_r: u32,
) {
    let world = map.world_name();
    // Places are told apart by their numbers: comparing names was most of the work here.
    let mut seen: Vec<u32> = Vec::new();
    for c in map.nearby_tiles(tile, vision_r) {
        let Some(place) = map.place_number(c) else {
            continue;
        };
        if seen.contains(&place) {
            continue;
        }
        seen.push(place);
        let Some(t) = map.tile(c) else { continue };
        let Some(sector) = t.sector.as_deref() else {
            continue;
        };
        let (arena, object) = (t.arena.as_deref(), t.game_object.as_deref());
        if !spatial.knows(world, Some(sector), arena, object) {
            spatial.add(world, Some(sector), arena, object);
        }
    }
}

/// The (s, p, o) an event is remembered as: an idle event's missing parts read as
/// `("is", "idle")`, a missing object as `"idle"`.
pub(crate) fn memory_triple(event: &TileEvent) -> (&str, &str, &str) {
    match event.predicate.as_deref() {
        None => (&event.subject, "is", "idle"),
        Some(p) => (&event.subject, p, event.object.as_deref().unwrap_or("idle")),
    }
}

/// Whether `event` is already among the persona's latest `retention` events (SPEC §3.1 step 3:
/// such an event is not stored again), by its [`memory_triple`].
pub(crate) fn recently_perceived(mind: &MindState, event: &TileEvent) -> bool {
    mind.associative
        .recent_event_is(mind.scratch.params.retention, memory_triple(event))
}

/// The offsets of the square of radius `r`, nearest first: by squared distance, then by tile
/// order (x, then y) — the order perception ranks tiles in.
fn offsets_nearest_first(r: u32) -> Offsets {
    let r = i32::try_from(r.min(MAX_VISION_R)).unwrap_or(0);
    let mut offsets: Offsets = (-r..=r)
        .flat_map(|dx| (-r..=r).map(move |dy| (dx, dy)))
        .collect();
    offsets.sort_unstable_by_key(|&(dx, dy)| (dx * dx + dy * dy, dx, dy));
    offsets
}

/// Vision radii beyond this are treated as this (a 1,025-tile-wide square is the whole of any
/// sensible town).
const MAX_VISION_R: u32 = 512;

/// Tile offsets of one vision radius, nearest first.
type Offsets = Vec<(i32, i32)>;

/// Runs `f` with [`offsets_nearest_first`]`(r)`, computed once per thread and radius.
fn with_offsets<T>(r: u32, f: impl FnOnce(&[(i32, i32)]) -> T) -> T {
    thread_local! {
        static CACHE: std::cell::RefCell<Vec<(u32, Offsets)>> =
            const { std::cell::RefCell::new(Vec::new()) };
    }
    CACHE.with(|cache| {
        if let Ok(cache) = cache.try_borrow()
            && let Some((_, offsets)) = cache.iter().find(|(radius, _)| *radius == r)
        {
            return f(offsets);
        }
        let offsets = offsets_nearest_first(r);
        let out = f(&offsets);
        if let Ok(mut cache) = cache.try_borrow_mut() {
            cache.push((r, offsets));
        }
        out
    })
}

/// The `att_bandwidth` nearest events in `tile`'s arena within `vision_r` (SPEC §3.1 step 2):
/// deduplicated, nearest first (Euclidean; ties by tile, then the tile's own event order).
///
/// Walks the square outwards in that order and stops at `att_bandwidth` distinct events, so a
/// crowded place costs a few tiles, not a sort of everything in view.
pub(crate) fn nearest_events(
    map: &TownMap,
    tile: TileCoord,
    vision_r: u32,
    att_bandwidth: usize,
) -> Vec<&TileEvent> {
    let mut events: Vec<&TileEvent> = Vec::with_capacity(att_bandwidth);
    if att_bandwidth == 0 {
        return events;
    }
    let here = map.tile(tile);
    let sector = here.and_then(|t| t.sector.as_deref());
    let arena = here.and_then(|t| t.arena.as_deref());
    with_offsets(vision_r, |offsets| {
        for &(dx, dy) in offsets {
            let c = TileCoord::new(tile.x.saturating_add(dx), tile.y.saturating_add(dy));
            let Some(t) = map.tile(c) else { continue };
            if t.events.is_empty() || t.sector.as_deref() != sector || t.arena.as_deref() != arena {
                continue;
            }
            for event in &t.events {
                if !events.contains(&event) {
                    events.push(event);
                    if events.len() >= att_bandwidth {
                        return;
                    }
                }
            }
        }
    });
    events
}

/// Looks around `tile` (SPEC §3.1 step 2): the events on tiles within `vision_r` **in the same
/// arena**, deduplicated, nearest first, at most `att_bandwidth`.
pub(crate) fn perceive_surroundings(
    map: &TownMap,
    tile: TileCoord,
    vision_r: u32,
    att_bandwidth: usize,
) -> Percepts {
    Percepts {
        events: nearest_events(map, tile, vision_r, att_bandwidth)
            .into_iter()
            .cloned()
            .collect(),
        ..standing_on(map, tile)
    }
}

/// The percepts of a persona on `tile` before it looks at any event: the tile, its arena and
/// its sector (what a loaded persona had perceived from the tile it was saved on; its events
/// are read at its next step, as every step reads them).
pub(crate) fn standing_on(map: &TownMap, tile: TileCoord) -> Percepts {
    Percepts {
        tile: Some(tile),
        events: Vec::new(),
        arena: map
            .tile_path_string(tile, AddressLevel::Arena)
            .unwrap_or_default(),
        sector: map.tile(tile).and_then(|t| t.sector.clone()),
    }
}

/// A persona whose mind is not out thinking (and who is not held).
type IdlePersona = (With<Persona>, Without<AwaitingCognition>, Without<Held>);

/// Refreshes every idle persona's [`Percepts`] from the map, and when it stands on a new tile
/// adds the places in view to its spatial memory (runs in
/// [`AgentSystems::Perceive`](crate::clock::AgentSystems)).
pub(crate) fn gather_percepts(
    map: Option<Res<TownMap>>,
    settings: Res<AgentSettings>,
    mut personas: Query<(&Body, &mut Mind, &mut Percepts, Option<&TakingPart>), IdlePersona>,
) {
    let Some(map) = map else { return };
    personas
        .par_iter_mut()
        .batching_strategy(PERSONA_BATCHES)
        .for_each(|(body, mut mind, mut percepts, taking_part)| {
            // The talk a persona is part of is not news to it (SPEC §16).
            let news = |e: &TileEvent| !taking_part.is_some_and(|t| t.includes(e));
            let Some(state) = mind.get_mut() else { return };
            let params = &state.scratch.params;
            let vision = u32::try_from(params.vision_r).unwrap_or(0);
            let bandwidth = if params.att_bandwidth == 0 {
                settings.persona.att_bandwidth
            } else {
                params.att_bandwidth
            };
            if percepts.tile != Some(body.tile) {
                learn_places(&mut state.spatial, &map, body.tile, vision);
                *percepts = perceive_surroundings(&map, body.tile, vision, bandwidth);
                percepts.events.retain(|e| news(e));
                return;
            }
            // Same tile: only the events may have changed; compare before cloning anything.
            let mut events = nearest_events(&map, body.tile, vision, bandwidth);
            events.retain(|e| news(e));
            let same = events.len() == percepts.events.len()
                && events.iter().zip(&percepts.events).all(|(a, b)| *a == b);
            if !same {
                percepts.events = events.into_iter().cloned().collect();
            }
        });
}

/// An event as stored in memory: `(s, p, o)` with an idle event's missing parts filled in and
/// its description `"<last part of subject> is <description>"` (SPEC §3.1 step 3).
pub(crate) fn event_memory_parts(event: &TileEvent) -> (String, String, String, String) {
    let (subject, predicate, object) = memory_triple(event);
    let description = match &event.predicate {
        None => "idle".to_string(),
        Some(p) => event
            .description
            .clone()
            .unwrap_or_else(|| format!("{p} {}", event.object.as_deref().unwrap_or_default())),
    };
    let short = subject.rsplit(':').next().unwrap_or(subject).trim();
    let description = if description.starts_with(short) {
        description
    } else {
        // Made at its final size (`format!` grows it as it writes).
        let mut full = String::with_capacity(short.len() + 4 + description.len());
        full.push_str(short);
        full.push_str(" is ");
        full.push_str(&description);
        full
    };
    (
        subject.to_string(),
        predicate.to_string(),
        object.to_string(),
        description,
    )
}

/// The keywords of a perceived event: the last segment of its subject and of its object.
pub(crate) fn event_keywords(subject: &str, object: &str) -> Vec<String> {
    let mut out = Vec::new();
    for part in [subject, object] {
        if let Some(last) = part
            .rsplit(':')
            .next()
            .map(str::trim)
            .filter(|s| !s.is_empty())
        {
            let last = last.to_string();
            if !out.contains(&last) {
                out.push(last);
            }
        }
    }
    out
}

/// Turns the new perceived events into memories (SPEC §3.1 steps 3–4) and returns the new
/// event nodes. Events already among the latest `retention` are skipped; "is idle" events get
/// poignancy 1 without a model call, and so do the persona's own action and object events
/// that lean mode rated with the action (`Scratch::own_ratings`); the persona's own "chat
/// with" event also stores a chat.
/// In lean mode the new events' descriptions are embedded in one request first
/// (`batch_percepts`), and an event the persona remembers already keeps the poignancy it was
/// given then (`rate_events_once`).
pub(crate) async fn form_memories(
    mind: &mut MindState,
    percepts: &Percepts,
    ctx: &PromptContext,
    now: NaiveDateTime,
    lean: &LeanSettings,
) -> Vec<NodeId> {
    let (batch, rate_once) = (lean.batch_percepts, lean.rate_events_once);
    let name = mind.scratch.name.clone();
    let first_name = mind.scratch.first_name.clone();
    // Written when the first prompt needs it: most steps perceive nothing new.
    let mut identity: Option<String> = None;
    let mut prefetched = if batch {
        prefetch_embeddings(mind, percepts, ctx).await
    } else {
        HashMap::new()
    };
    let rated_before = if lean.rate_together {
        rate_together(mind, percepts, ctx, rate_once).await
    } else {
        HashMap::new()
    };
    let mut added = Vec::new();
    for event in &percepts.events {
        if recently_perceived(mind, event) {
            continue;
        }
        let (s, p, o, description) = event_memory_parts(event);
        let embedding = match prefetched.remove(&description) {
            Some(vector) => Some(Some(vector)),
            None => embedding_to_store(mind, ctx, &description).await,
        };
        // `None` inside: memory holds the description's vector, which the memory reuses.
        let Some(embedding) = embedding else { continue };
        let idle = p == "is" && o == "idle";
        let keywords = event_keywords(&s, &o);
        let rated = match rated_before.get(&description) {
            Some(poignancy) => Some(*poignancy),
            None => known_rating(mind, &description, &keywords, rate_once),
        };
        let poignancy = if idle {
            1
        } else if let Some(poignancy) = rated {
            poignancy
        } else {
            run_prompt(
                ctx,
                &EventPoignancy {
                    identity: identity
                        .get_or_insert_with(|| mind.scratch.identity_summary())
                        .clone(),
                    first_name: first_name.clone(),
                    event: description.clone(),
                },
            )
            .await
            .value
        };
        let mut filling = Vec::new();
        if s == name && p == CHAT_PREDICATE && !mind.scratch.chat.is_empty() {
            let conversation = transcript(&mind.scratch.chat);
            let chat_poignancy = run_prompt(
                ctx,
                &ChatPoignancy {
                    identity: identity
                        .get_or_insert_with(|| mind.scratch.identity_summary())
                        .clone(),
                    first_name: first_name.clone(),
                    conversation: conversation.clone(),
                },
            )
            .await
            .value;
            let lines = mind
                .scratch
                .chat
                .iter()
                .map(|(who, line)| ChatLine::new(who.clone(), line.clone()))
                .collect();
            let mut chat =
                NewMemory::new(now, (s.clone(), p.clone(), o.clone()), description.clone())
                    .keywords(event_keywords(&s, &o))
                    .poignancy(chat_poignancy);
            chat.embedding.clone_from(&embedding);
            if let Ok(id) = mind.associative.add_chat(chat, lines) {
                filling.push(id);
            }
        }
        let mut memory = NewMemory::new(now, (s.clone(), p.clone(), o.clone()), description)
            .keywords(keywords)
            .poignancy(poignancy);
        memory.embedding = embedding;
        match mind.associative.add_event(memory, filling) {
            Ok(id) => {
                added.push(id);
                mind.scratch.importance_trigger_curr -= i32::from(poignancy);
                mind.scratch.importance_ele_n += 1;
            }
            Err(error) => warn!(persona = %name, %error, "could not store a perceived event"),
        }
    }
    added
}

/// The poignancy a new event already has without asking: the persona's own action or object
/// event as lean mode rated it with the action (`Scratch::own_ratings`), or — with
/// `rate_once` — the rating of the same event when the persona perceived it before.
fn known_rating(
    mind: &MindState,
    description: &str,
    keywords: &[String],
    rate_once: bool,
) -> Option<u8> {
    mind.scratch
        .own_ratings
        .iter()
        .find(|(rated, _)| *rated == description)
        .map(|(_, poignancy)| *poignancy)
        .or_else(|| {
            rate_once
                .then(|| keywords.first())
                .flatten()
                .and_then(|keyword| mind.associative.rated_event(keyword, description))
        })
}

/// Lean mode's `rate_together`: the ratings of the step's new, non-idle events — the ones
/// they have without asking ([`known_rating`]), and the others' in one `event_poignancies`
/// call when there are two or more. An event the answer leaves unrated is missing from the
/// map and is asked on its own, as faithful mode asks every event.
async fn rate_together(
    mind: &MindState,
    percepts: &Percepts,
    ctx: &PromptContext,
    rate_once: bool,
) -> HashMap<String, u8> {
    let mut rated = HashMap::new();
    let mut unrated: Vec<String> = Vec::new();
    for event in &percepts.events {
        if recently_perceived(mind, event) {
            continue;
        }
        let (s, p, o, description) = event_memory_parts(event);
        let idle = p == "is" && o == "idle";
        if idle || rated.contains_key(&description) || unrated.contains(&description) {
            continue;
        }
        match known_rating(mind, &description, &event_keywords(&s, &o), rate_once) {
            Some(poignancy) => {
                rated.insert(description, poignancy);
            }
            None => unrated.push(description),
        }
    }
    if unrated.len() < 2 {
        return rated;
    }
    let prompt = EventPoignancies {
        identity: mind.scratch.identity_summary(),
        first_name: mind.scratch.first_name.clone(),
        events: unrated,
    };
    let ratings = run_prompt(ctx, &prompt).await.value;
    rated.extend(
        prompt
            .events
            .into_iter()
            .zip(ratings)
            .filter_map(|(event, rating)| Some((event, rating?))),
    );
    rated
}

/// Lean mode's batch: the embeddings of the step's new percepts that memory does not hold
/// yet (see [`embed_together`]).
async fn prefetch_embeddings(
    mind: &MindState,
    percepts: &Percepts,
    ctx: &PromptContext,
) -> HashMap<String, Vec<f32>> {
    let texts: Vec<String> = percepts
        .events
        .iter()
        .filter(|event| !recently_perceived(mind, event))
        .map(|event| event_memory_parts(event).3)
        .collect();
    embed_together(mind, ctx, &texts).await
}

/// The embeddings of `texts` that memory does not hold yet, in one request when there are two
/// or more (lean mode). Whatever is missing from the answer (a failed request, an unusable
/// vector) is asked again one by one where it is needed, with the usual fail-safe.
pub(crate) async fn embed_together(
    mind: &MindState,
    ctx: &PromptContext,
    texts: &[String],
) -> HashMap<String, Vec<f32>> {
    let mut missing: Vec<String> = Vec::new();
    for text in texts {
        if mind.associative.embedding(text).is_none() && !missing.contains(text) {
            missing.push(text.clone());
        }
    }
    if missing.len() < 2 {
        return HashMap::new();
    }
    match ctx.embed_many(missing.clone()).await {
        Ok(vectors) if vectors.len() == missing.len() => missing
            .into_iter()
            .zip(vectors)
            .filter(|(_, v)| usable(v))
            .collect(),
        Ok(_) | Err(_) => HashMap::new(),
    }
}

/// Whether an embedding the model returned can be stored: not empty, every entry finite.
fn usable(vector: &[f32]) -> bool {
    !vector.is_empty() && vector.iter().all(|v| v.is_finite())
}

/// The embedding to store with a new memory of `text`: `Some(None)` when memory holds the
/// text's vector already (the memory reuses it: no copy is made), `Some(Some(vector))` when
/// it was fetched, `None` when it could not be (see [`embedding_for`]).
pub(crate) async fn embedding_to_store(
    mind: &MindState,
    ctx: &PromptContext,
    text: &str,
) -> Option<Option<Vec<f32>>> {
    if mind.associative.embeddings().contains(text) {
        return Some(None);
    }
    fetch_embedding(ctx, text).await.map(Some)
}

/// The embedding of `text`: the one already in memory, else the model's. `None` (with a
/// warning) when the model fails — the memory is then simply not formed this step.
pub(crate) async fn embedding_for(
    mind: &MindState,
    ctx: &PromptContext,
    text: &str,
) -> Option<Vec<f32>> {
    if let Some(vector) = mind.associative.embedding(text) {
        return Some(vector.to_vec());
    }
    fetch_embedding(ctx, text).await
}

/// The embedding of `text` from the model (see [`embedding_for`]).
async fn fetch_embedding(ctx: &PromptContext, text: &str) -> Option<Vec<f32>> {
    match ctx.embed_one(text).await {
        Ok(vector) if usable(&vector) => Some(vector),
        Ok(_) => {
            warn!("the embedding backend returned an unusable vector");
            ctx.record_failure(ModelFailure {
                kind: EMBED_KIND,
                reason: FailureReason::Unusable,
                attempts: 1,
                speaker: None,
            });
            None
        }
        Err(error) => {
            if matches!(error, crate::llm::LlmError::Closed) {
                // The backend was shut down: the app is exiting.
                debug!(%error, "embedding abandoned");
            } else {
                warn!(%error, "embedding failed");
            }
            ctx.record_failure(ModelFailure {
                kind: EMBED_KIND,
                reason: FailureReason::Backend(error.kind()),
                attempts: 1,
                speaker: None,
            });
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crowded_views_rank_like_a_full_sort() {
        let Ok(mut map) = TownMap::from_ascii("w", &["aaaaaaa"; 7], &[('a', "w:s:room")]) else {
            panic!("test map must build");
        };
        // Many events, many duplicates: the same few subjects on every tile.
        for x in 0..7 {
            for y in 0..7 {
                for k in 0..6 {
                    let subject = format!("p{}", (x * 7 + y + k) % 9);
                    map.add_event(TileCoord::new(x, y), TileEvent::idle(subject));
                }
            }
        }
        let views = [(3, 3), (0, 0), (6, 1)]
            .into_iter()
            .flat_map(|(x, y)| [0u32, 2, 3, 5].map(move |r| (TileCoord::new(x, y), r)));
        for ((at, radius), bandwidth) in views.flat_map(|v| [1, 3, 5, 9, 12].map(move |b| (v, b))) {
            let fast: Vec<String> = nearest_events(&map, at, radius, bandwidth)
                .iter()
                .map(|e| e.subject.clone())
                .collect();
            // Reference: every candidate, fully sorted by (distance², tile, order in tile).
            let mut all = Vec::new();
            for c in map.nearby_tiles(at, radius) {
                let d2 = i64::from(c.x - at.x).pow(2) + i64::from(c.y - at.y).pow(2);
                for (i, e) in map
                    .tile(c)
                    .map(|t| t.events.iter().collect::<Vec<_>>())
                    .unwrap_or_default()
                    .into_iter()
                    .enumerate()
                {
                    all.push((d2, c, i, e.subject.clone()));
                }
            }
            all.sort();
            let mut reference: Vec<String> = Vec::new();
            for (_, _, _, s) in all {
                if reference.len() < bandwidth && !reference.contains(&s) {
                    reference.push(s);
                }
            }
            assert_eq!(
                fast, reference,
                "at {at:?}, radius {radius}, bandwidth {bandwidth}"
            );
        }
    }

    #[test]
    fn idle_event_parts() {
        let e = TileEvent::idle("Willowbrook:Okafor house:kitchen:stove");
        let (s, p, o, d) = event_memory_parts(&e);
        assert_eq!(s, "Willowbrook:Okafor house:kitchen:stove");
        assert_eq!((p.as_str(), o.as_str()), ("is", "idle"));
        assert_eq!(d, "stove is idle");
        assert_eq!(event_keywords(&s, &o), vec!["stove", "idle"]);
    }

    #[test]
    fn persona_event_parts() {
        let e = TileEvent {
            subject: "Sam Lindqvist".into(),
            predicate: Some(CHAT_PREDICATE.into()),
            object: Some("Mira Okafor".into()),
            description: Some("conversing about the open mic".into()),
        };
        let (_, p, _, d) = event_memory_parts(&e);
        assert_eq!(p, CHAT_PREDICATE);
        assert_eq!(d, "Sam Lindqvist is conversing about the open mic");
    }

    #[test]
    fn sees_only_its_arena_nearest_first() {
        let map = TownMap::from_ascii(
            "w",
            &["aab", "aab", "aab"],
            &[('a', "w:s:room:desk"), ('b', "w:s:hall")],
        );
        let Ok(mut map) = map else {
            panic!("test map must build");
        };
        map.add_event(TileCoord::new(2, 0), TileEvent::idle("far"));
        map.add_event(TileCoord::new(1, 1), TileEvent::idle("near"));
        map.add_event(TileCoord::new(0, 2), TileEvent::idle("diag"));
        let p = perceive_surroundings(&map, TileCoord::new(0, 1), 4, 2);
        let subjects: Vec<&str> = p.events.iter().map(|e| e.subject.as_str()).collect();
        // "far" is in another arena; "near" (distance 1) before "diag" (distance 1, later tile)
        // or the desk idle events on the persona's own tile (distance 0) come first.
        assert!(!subjects.contains(&"far"));
        assert_eq!(p.events.len(), 2);
        assert_eq!(p.arena, "w:s:room");
        let mut spatial = crate::memory::SpatialMemory::default();
        learn_places(&mut spatial, &map, TileCoord::new(0, 1), 4);
        assert!(spatial.knows_address("w:s:room:desk"));
        assert!(spatial.knows_address("w:s:hall"));
    }
}
