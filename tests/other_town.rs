//! The offline town script in towns it was not written for: Saltmere (the project's second town,
//! `assets/maps/saltmere.tmx` with its four sheets in `assets/personas/saltmere/`) and a tiny town
//! generated here from a seed (random names), each run for 24 scripted Lockstep hours headless.
//!
//! Checked for every persona: only the town's own place names in every description and action
//! address (never a name of another town), asleep in its living area at 03:00, at least 30
//! minutes at its workplace, at least 3 sectors visited; and at every step the invariants of
//! the cognition tests (the day's schedule sums to 1440 minutes, every action address
//! resolves on the map). The run needs no fail-safe, and `usage` says how often the script had
//! to guess.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use bevy::prelude::*;
use bevy_generative_agents::clock::{AgentSystems, SimClock, SimStep};
use bevy_generative_agents::cognition::prompts::MINUTES_PER_DAY;
use bevy_generative_agents::headless::spawn_sheets;
use bevy_generative_agents::llm::{LlmClient, UsageReport};
use bevy_generative_agents::persona::{
    ActionView, Body, Mind, Persona, PersonaSheet, is_sleep_text, load_persona_sheets,
};
use bevy_generative_agents::testing::{create_test_app, scripted_client};
use bevy_generative_agents::world::{AddressLevel, ShippedTown, TileCoord, TownMap};
use chrono::Timelike;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Steps per game hour (10 s steps).
const STEPS_PER_HOUR: u64 = 360;

/// One persona at one step.
#[derive(Debug, Clone)]
struct Sample {
    hour: u32,
    minute: u32,
    second: u32,
    tile: TileCoord,
    description: String,
    address: Option<String>,
}

#[derive(Resource, Default, Clone)]
struct Watch {
    samples: Arc<Mutex<BTreeMap<String, Vec<Sample>>>>,
    violations: Arc<Mutex<Vec<String>>>,
}

fn watch_step(
    clock: Res<SimClock>,
    map: Res<TownMap>,
    watch: Res<Watch>,
    personas: Query<(&Name, &Mind, &Body, &ActionView), With<Persona>>,
) {
    let now = clock.now();
    let step = clock.step();
    let mut samples = watch.samples.lock().unwrap_or_else(|e| e.into_inner());
    let mut violations = watch.violations.lock().unwrap_or_else(|e| e.into_inner());
    for (name, mind, body, view) in &personas {
        samples
            .entry(name.as_str().to_string())
            .or_default()
            .push(Sample {
                hour: now.hour(),
                minute: now.minute(),
                second: now.second(),
                tile: body.tile,
                description: view.description.clone(),
                address: view.address.as_ref().map(ToString::to_string),
            });
        let Some(state) = mind.get() else { continue };
        let s = &state.scratch;
        if !s.f_daily_schedule.is_empty() {
            let total: u32 = s.f_daily_schedule.iter().map(|i| i.minutes).sum();
            if total != MINUTES_PER_DAY {
                violations.push(format!("step {step}: {name}'s schedule sums to {total}"));
            }
        }
        if let Some(place) = s.act_address.as_ref().and_then(|a| a.place())
            && map
                .address_tiles(&place.to_string())
                .is_none_or(BTreeSet::is_empty)
        {
            violations.push(format!(
                "step {step}: {name}'s address {place} has no tiles"
            ));
        }
    }
}

/// Runs `sheets` in `map` for 24 scripted Lockstep hours; returns what the watcher saw and the
/// usage report.
fn live_a_day(map: TownMap, sheets: &[PersonaSheet], seed: u64) -> (Watch, UsageReport) {
    let mut app = create_test_app(scripted_client(seed));
    let watch = Watch::default();
    app.insert_resource(watch.clone());
    app.add_systems(SimStep, watch_step.in_set(AgentSystems::First));
    spawn_sheets(&mut app, &map, sheets, seed).expect("the sheets fit the map");
    app.insert_resource(map);
    app.finish();
    app.cleanup();
    let steps = 24 * STEPS_PER_HOUR;
    app.world_mut().resource_mut::<SimClock>().stop_at_step = Some(steps);
    let mut frames = 0u64;
    while !app.world().resource::<SimClock>().finished() {
        app.update();
        frames += 1;
        assert!(frames < steps * 50, "the run stalled");
    }
    let usage = app.world().resource::<LlmClient>().usage();
    (watch, usage)
}

/// The sector and world names of a map.
fn place_names(map: &TownMap) -> BTreeSet<String> {
    let mut names: BTreeSet<String> = map.sectors().map(str::to_string).collect();
    names.insert(map.world_name().to_string());
    names
}

/// Checks one town's day; `foreign` are other towns' place names that must never appear.
fn check_town(label: &str, map: &TownMap, sheets: &[PersonaSheet], seed: u64, foreign: &[String]) {
    let own = place_names(map);
    let foreign: Vec<String> = foreign
        .iter()
        .filter(|f| !own.iter().any(|o| o.eq_ignore_ascii_case(f)))
        .map(|f| f.to_lowercase())
        .collect();
    let (watch, usage) = live_a_day(map.clone(), sheets, seed);

    let violations = watch.violations.lock().unwrap().clone();
    assert!(
        violations.is_empty(),
        "{label}: {} violations, first: {:?}",
        violations.len(),
        &violations[..violations.len().min(5)]
    );
    let troubled: Vec<(&String, u64, u64)> = usage
        .kinds
        .iter()
        .filter(|(_, k)| k.fail_safes > 0 || k.retries > 0)
        .map(|(kind, k)| (kind, k.retries, k.fail_safes))
        .collect();
    assert!(
        troubled.is_empty(),
        "{label}: (kind, retries, fail-safes) {troubled:?}"
    );
    let guesses: BTreeMap<&String, u64> = usage
        .kinds
        .iter()
        .filter(|(_, k)| k.guesses > 0)
        .map(|(kind, k)| (kind, k.guesses))
        .collect();
    eprintln!(
        "{label}: guesses by kind {guesses:?} of {} grounding calls",
        ["action_sector", "action_arena", "action_object"]
            .iter()
            .map(|k| usage.kind(k).calls)
            .sum::<u64>()
    );
    assert!(
        guesses.keys().all(|k| k.starts_with("action_sector")
            || k.starts_with("action_arena")
            || k.starts_with("action_object")),
        "{label}: only grounding guesses: {guesses:?}"
    );

    let samples = watch.samples.lock().unwrap().clone();
    assert_eq!(
        samples.len(),
        sheets.len(),
        "{label}: every persona was watched"
    );
    for sheet in sheets {
        let name = &sheet.name;
        let days = &samples[name];
        // Only this town's names.
        for sample in days {
            let texts = [
                sample.description.to_lowercase(),
                sample.address.clone().unwrap_or_default().to_lowercase(),
            ];
            for text in &texts {
                if let Some(bad) = foreign.iter().find(|f| text.contains(f.as_str())) {
                    panic!(
                        "{label}: {name} at {:02}:{:02}: {bad:?} in {text:?}",
                        sample.hour, sample.minute
                    );
                }
            }
            if let Some(address) = &sample.address
                && !address.starts_with('<')
            {
                assert!(
                    address.starts_with(&format!("{}:", map.world_name())),
                    "{label}: {name}: {address} is not in {}",
                    map.world_name()
                );
            }
        }
        // Asleep in the living area at 03:00.
        let living = map
            .address_tiles(&sheet.living_area)
            .expect("the living area is on the map");
        let night = days
            .iter()
            .find(|s| s.hour == 3 && s.minute == 0 && s.second == 0)
            .expect("a sample at 03:00");
        assert!(
            living.contains(&night.tile) && is_sleep_text(&night.description),
            "{label}: {name} at 03:00 is at {:?} doing {:?}, not asleep in {}",
            night.tile,
            night.description,
            sheet.living_area
        );
        // At least 30 minutes at the workplace (every step is 10 s).
        let work = sheet
            .workplace
            .as_deref()
            .expect("every sample persona works");
        let work_sector: String = work.split(':').take(2).collect::<Vec<_>>().join(":");
        let work_tiles = map
            .address_tiles(&work_sector)
            .expect("the workplace is on the map");
        let at_work = days.iter().filter(|s| work_tiles.contains(&s.tile)).count();
        assert!(
            at_work >= 180,
            "{label}: {name} spent {} minutes at {work_sector}",
            at_work / 6
        );
        // At least 3 sectors visited.
        let sectors: BTreeSet<String> = days
            .iter()
            .filter_map(|s| map.tile_address(s.tile, AddressLevel::Sector))
            .filter_map(|a| a.sector_name().map(str::to_string))
            .collect();
        assert!(
            sectors.len() >= 3,
            "{label}: {name} visited only {sectors:?}"
        );
        eprintln!(
            "{label}: {name}: {} min at work, sectors {sectors:?}",
            at_work / 6
        );
    }
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn willowbrook() -> TownMap {
    TownMap::load_tmx(TownMap::default_town_path()).expect("the default town loads")
}

fn saltmere() -> (TownMap, Vec<PersonaSheet>) {
    let map = TownMap::load_tmx(root().join("assets/maps/saltmere.tmx")).expect("Saltmere loads");
    let sheets =
        load_persona_sheets(root().join("assets/personas/saltmere")).expect("Saltmere's sheets");
    (map, sheets)
}

#[test]
fn saltmere_lives_a_day_in_its_own_places() {
    let (map, sheets) = saltmere();
    assert_eq!(sheets.len(), 4);
    let foreign: Vec<String> = place_names(&willowbrook()).into_iter().collect();
    check_town("Saltmere", &map, &sheets, 7, &foreign);
}

/// Fernside, the 25-resident town (`--town fernside`): the same day's checks for everyone.
#[test]
fn fernside_lives_a_day_in_its_own_places() {
    let town = ShippedTown::named("fernside").expect("Fernside is shipped");
    let map = TownMap::load_tmx(town.map_path()).expect("Fernside loads");
    let sheets = load_persona_sheets(town.personas_dir()).expect("Fernside's sheets");
    assert_eq!(sheets.len(), 25);
    let mut foreign: Vec<String> = place_names(&willowbrook()).into_iter().collect();
    foreign.extend(place_names(&saltmere().0));
    check_town("Fernside", &map, &sheets, 11, &foreign);
}

// =============================================================================================
// A tiny town made up from a seed.

/// A made-up word of `syllables` syllables, capitalised.
fn word(rng: &mut StdRng, syllables: usize) -> String {
    const ONSETS: &[&str] = &[
        "b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "tr", "sk",
        "gl",
    ];
    const VOWELS: &[&str] = &["a", "e", "i", "o", "u", "ei", "ou"];
    const CODAS: &[&str] = &["", "n", "r", "l", "k", "sk", "th", "m"];
    let mut w = String::new();
    for _ in 0..syllables {
        w.push_str(ONSETS[rng.random_range(0..ONSETS.len())]);
        w.push_str(VOWELS[rng.random_range(0..VOWELS.len())]);
    }
    w.push_str(CODAS[rng.random_range(0..CODAS.len())]);
    let mut chars = w.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().collect::<String>() + chars.as_str())
        .unwrap_or_default()
}

fn pick<'a>(rng: &mut StdRng, items: &[&'a str]) -> &'a str {
    items[rng.random_range(0..items.len())]
}

/// A 40×24 open town from `seed`: three dwellings, three workplaces, an eatery and an
/// outdoor place, all with made-up names; four personas with made-up names and trades.
fn generated_town(seed: u64) -> (TownMap, Vec<PersonaSheet>) {
    let mut rng = StdRng::seed_from_u64(seed);
    let world = word(&mut rng, 2);
    let mut builder = TownMap::builder(&world, 40, 24);
    // Fence the border so the town is an island of its own.
    builder = builder
        .blocked_rect(TileCoord::new(0, 0), TileCoord::new(39, 0), true)
        .blocked_rect(TileCoord::new(0, 23), TileCoord::new(39, 23), true)
        .blocked_rect(TileCoord::new(0, 0), TileCoord::new(0, 23), true)
        .blocked_rect(TileCoord::new(39, 0), TileCoord::new(39, 23), true);
    let mut used = BTreeSet::new();
    let mut unique = |rng: &mut StdRng, suffix: &str| loop {
        let name = format!("{} {suffix}", word(rng, 2));
        if used.insert(name.clone()) {
            break name;
        }
    };
    // A 6×4 block at (x, y) holding up to three arenas (2 columns each) with their objects.
    let fill = |builder: bevy_generative_agents::world::TownMapBuilder,
                x: i32,
                y: i32,
                sector: &str,
                arenas: &[(&str, &[&str])]| {
        let mut b = builder;
        for (i, (arena, objects)) in arenas.iter().enumerate() {
            for dx in 0..2 {
                for dy in 0..4 {
                    let c = TileCoord::new(x + 2 * i as i32 + dx, y + dy);
                    let object = objects.get((dy * 2 + dx) as usize);
                    let address = match object {
                        Some(o) => format!("{world}:{sector}:{arena}:{o}"),
                        None => format!("{world}:{sector}:{arena}"),
                    };
                    b = b.address_str(c, &address);
                }
            }
        }
        b
    };
    let sleep_rooms = ["bedroom", "loft", "bunkroom", "sleeping quarters"];
    let beds = ["bed", "bunk", "cot", "hammock"];
    let kitchens = ["kitchen", "galley", "scullery"];
    let washrooms = ["washroom", "bathroom"];
    let mut homes = Vec::new();
    for (i, kind) in ["house", "cottage", "cabin"].iter().enumerate() {
        let sector = unique(&mut rng, kind);
        let sleep = pick(&mut rng, &sleep_rooms);
        let bed = pick(&mut rng, &beds);
        let odd = word(&mut rng, 1).to_lowercase();
        let kitchen = pick(&mut rng, &kitchens);
        let wash = pick(&mut rng, &washrooms);
        builder = fill(
            builder,
            2 + 8 * i as i32,
            2,
            &sector,
            &[
                (sleep, &[bed, bed, odd.as_str(), "wardrobe"]),
                (kitchen, &["stove", "table", "larder"]),
                (wash, &["basin", "tub"]),
            ],
        );
        // Spawns on the two beds.
        builder = builder
            .spawn(TileCoord::new(2 + 8 * i as i32, 2), &format!("home-{i}-a"))
            .spawn(TileCoord::new(3 + 8 * i as i32, 2), &format!("home-{i}-b"));
        homes.push((sector, sleep.to_string()));
    }
    let trades = [
        ("smith", "Forge", "smithy", "anvil"),
        ("miller", "Mill", "millroom", "millstone"),
        ("potter", "Pottery", "workshop", "wheel"),
        ("ropemaker", "Ropewalk", "rope shed", "workbench"),
        ("weaver", "Weavery", "loom room", "loom"),
    ];
    let mut works = Vec::new();
    for i in 0..3 {
        let (trade, kind, room, tool) = trades[rng.random_range(0..trades.len())];
        let sector = unique(&mut rng, kind);
        let odd = word(&mut rng, 1).to_lowercase();
        builder = fill(
            builder,
            2 + 8 * i,
            9,
            &sector,
            &[
                (room, &[tool, odd.as_str(), "counter"]),
                ("store room", &["shelf", "crate"]),
            ],
        );
        works.push((trade, sector, room));
    }
    let kind = pick(&mut rng, &["Cafe", "Diner", "Tearoom", "Bakery", "Canteen"]);
    let eatery = unique(&mut rng, kind);
    builder = fill(
        builder,
        26,
        2,
        &eatery,
        &[("dining room", &["table", "counter", "bench"])],
    );
    let kind = pick(&mut rng, &["Green", "Square", "Gardens", "Park", "Common"]);
    let outdoors = unique(&mut rng, kind);
    builder = fill(
        builder,
        26,
        9,
        &outdoors,
        &[("lawn", &["bench", "fountain"]), ("path", &[])],
    );
    let map = builder.build().expect("the generated town builds");

    let mut sheets = Vec::new();
    for p in 0..4usize {
        let first = word(&mut rng, 2);
        let last = word(&mut rng, 2);
        let name = format!("{first} {last}");
        let (home, sleep) = &homes[p % 3];
        let (trade, work, room) = &works[p % 3];
        let wake = rng.random_range(5..=8u32);
        let start = wake + 2;
        let end = start + 7;
        let bed_hour = wake + 15 - 12;
        let spawn = format!("home-{}-{}", p % 3, if p < 3 { "a" } else { "b" });
        let json = serde_json::json!({
            "name": name,
            "first_name": first,
            "last_name": last,
            "age": 20 + p * 9,
            "innate": "steady, kind",
            "learned": format!("{name} is a {trade} at {work}. Their neighbour is a teacher."),
            "currently": format!("{name} is busy with a large order."),
            "lifestyle": format!("{name} goes to bed around {bed_hour} pm, wakes up around {wake} am, and starts work at {start} am."),
            "living_area": format!("{world}:{home}:{sleep}"),
            "workplace": format!("{world}:{work}:{room}"),
            "daily_plan_req": format!("{name} works from {start} am to {} pm.", end - 12),
            "spawn": spawn,
        });
        let sheet =
            PersonaSheet::from_json(std::path::Path::new("generated.json"), &json.to_string())
                .expect("a valid generated sheet");
        sheets.push(sheet);
    }
    (map, sheets)
}

#[test]
fn a_generated_town_lives_a_day_in_its_own_places() {
    let mut foreign: Vec<String> = place_names(&willowbrook()).into_iter().collect();
    foreign.extend(place_names(&saltmere().0));
    for seed in [3, 41] {
        let (map, sheets) = generated_town(seed);
        check_town(
            &format!("generated town {seed} ({})", map.world_name()),
            &map,
            &sheets,
            seed,
            &foreign,
        );
    }
}
