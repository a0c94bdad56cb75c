//! Simulation throughput: agent-steps per second (personas × sim steps) for 25, 100 and 1,000
//! personas with the offline town script, in Lockstep at max speed, in two towns, the crowd
//! with and without group conversations:
//!
//! - **`districts`** — the default town drawn for its five residents, copied side by side once
//!   per five personas (`testing::district_crowd`): each district's residents live, work and
//!   know their way around their own district, so 1,000 personas live at the density the town
//!   was drawn for (as Smallville's 25 live in theirs). Issue 19 asks that it be no slower.
//! - **`crowd`** — all of them in the one default town: a stress test no Smallville run has.
//!   Every persona sees new faces every step, so a step asks the model about once per persona
//!   (the poignancy of what it perceives, whether to talk…; at 1,000 personas about 1.1 model
//!   calls per agent-step from 09:00, against 0.07 in the districts), and everyone at a
//!   gathering talks in its group (SPEC §8).
//! - **`crowd-without-groups`** — the crowd with `GroupSettings::enabled` off: the loop issue
//!   19 measured. Its target, ≥ 100,000 agent-steps/s at 1,000 personas from 09:00 (from
//!   ~44,000), was set before group conversations were built. They make a crowded step about
//!   50 % dearer in CPU (24 against 16 ms a step over a census window): their own calls (about
//!   40 a step at 1,000), hearing, and the passages every listener remembers. (Before a
//!   listener remembered a conversation a passage at a time, every heard line was a memory of
//!   up to eleven listeners — 800 more memories a step — and reflections came twice as often:
//!   80 % dearer.) So the crowd with them is measured on its own.
//!
//! Each size is warmed up first — run until every persona has planned its day (a day in its
//! `Diary`) and grounded its first action, then on to 09:00 of the first day, when the town is
//! awake and about — and saved in memory. One iteration is a fixed **window** of sim steps
//! from that snapshot (60 steps = 10 game minutes, or `GA_BENCH_WINDOW=K`): the snapshot is
//! restored outside the timed part, then the window is timed. A restore brings back all a save
//! keeps — the group conversations under way included, and the personas in their order — so
//! every window is the one a run that never stopped would take (a census counts the same
//! prompts in a restored window as in the first). Criterion reports a throughput of
//! `personas × window` elements per iteration, i.e. agent-steps/s.
//!
//! The window is fixed because the cost of a step depends on the time of day: the steps on the
//! hour are several times dearer than the ones between (hourly blocks start and are
//! decomposed and grounded), so timing a varying number of steps per sample — as one step per
//! iteration did — weighted the burst differently from sample to sample and from build to
//! build. Thoughts that fall due in the window (decompositions, reactions, conversations) are
//! part of the cost, as in a real run.
//!
//! The bench uses mimalloc as its global allocator, tuned as the `smallville` binary tunes it
//! (no transparent huge pages, freed pages kept for the next step): the loop allocates many
//! small strings, and glibc's allocator cost a third more time per step here (fragmenting
//! further after a save is loaded).
//!
//! ```text
//! cargo bench --no-default-features --bench agent_steps
//! GA_BENCH_FROM=02:00 cargo bench --no-default-features --bench agent_steps   # the sleeping town
//! GA_BENCH_CENSUS=30 cargo bench --no-default-features --bench agent_steps     # what a step asks
//! GA_BENCH_CENSUS=30 GA_BENCH_CENSUS_WARM=on cargo bench ...                    # … as criterion times it
//! GA_BENCH_SIZES=1000 cargo bench --no-default-features --bench agent_steps    # one size only
//! GA_BENCH_WINDOW=360 cargo bench --no-default-features --bench agent_steps    # an hour a sample
//! GA_BENCH_TOWN=crowd cargo bench --no-default-features --bench agent_steps      # one town only
//! GA_BENCH_TOWN=crowd,crowd-without-groups cargo bench ...                       # the crowds
//! GA_BENCH_GROUPS=off cargo bench --no-default-features --bench agent_steps    # no group talk anywhere
//! GA_BENCH_LEAN=on cargo bench --no-default-features --bench agent_steps       # lean mode
//! GA_BENCH_PERF_CTL=ctl.fifo perf record --control=fifo:ctl.fifo -D -1 -g <bench binary> --bench
//!                                                          # profile the timed windows only
//! ```
//!
//! `GA_BENCH_CENSUS=K` skips criterion and, for each size, runs K steps from the snapshot once
//! and prints the model calls per step by prompt kind (calls and cache hits) with the time per
//! step: where the step's time goes when thoughts dominate it.

use std::time::{Duration, Instant};

use bevy::prelude::*;
use bevy_generative_agents::clock::{SimClock, SimSpeed};
use bevy_generative_agents::group::GroupSettings;
use bevy_generative_agents::llm::LlmClient;
use bevy_generative_agents::persist::{PersistError, SaveData, apply_save, decode, save_world};
use bevy_generative_agents::persona::{ActionView, Diary, Mind, Persona};
use bevy_generative_agents::testing::{
    create_test_app, district_crowd, scripted_client, spawn_crowd, synthetic_sheets,
};
use bevy_generative_agents::world::TownMap;
use chrono::NaiveTime;
use criterion::{
    BenchmarkId, Criterion, SamplingMode, Throughput, criterion_group, criterion_main,
};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `purge_delay` (number 15 in its version 3 `mimalloc.h`): set to -1, "never
/// purge", as `smallville`'s `keep_freed_memory` sets it (see there why).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

const SEED: u64 = 11;
/// Give up warming up after this long (the loop may not plan yet).
const WARM_UP_LIMIT: Duration = Duration::from_secs(900);
/// The time of day every measurement starts at: 09:00, or `GA_BENCH_FROM=HH:MM`.
fn measure_from() -> NaiveTime {
    env_setting("GA_BENCH_FROM", "a time HH:MM", |t| {
        NaiveTime::parse_from_str(t, "%H:%M").ok()
    })
    .or_else(|| NaiveTime::from_hms_opt(9, 0, 0))
    .unwrap_or(NaiveTime::MIN)
}

/// The environment variable `name` read with `parse`; a value that does not parse is said
/// (with what was expected) and the default used instead, never silently.
fn env_setting<T>(name: &str, expected: &str, parse: impl Fn(&str) -> Option<T>) -> Option<T> {
    let value = std::env::var(name).ok()?;
    let parsed = parse(value.trim());
    if parsed.is_none() {
        eprintln!("{name}={value:?} is not {expected}; using the default");
    }
    parsed
}

/// Where the personas live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Town {
    /// One copy of the default town per five personas.
    Districts,
    /// Everyone in the one default town.
    Crowd,
    /// The crowd without group conversations: the loop issue 19 measured (see the module docs).
    CrowdWithoutGroups,
}

impl Town {
    fn name(self) -> &'static str {
        match self {
            Town::Districts => "districts",
            Town::Crowd => "crowd",
            Town::CrowdWithoutGroups => "crowd-without-groups",
        }
    }

    /// Whether the town talks in groups (never with `GA_BENCH_GROUPS=off`).
    fn groups(self) -> bool {
        self != Town::CrowdWithoutGroups && groups_on()
    }
}

/// The towns to measure: all three, or the comma-separated `GA_BENCH_TOWN` (`districts`,
/// `crowd`, `crowd-without-groups`).
fn towns() -> Vec<Town> {
    env_setting(
        "GA_BENCH_TOWN",
        "a list of districts, crowd and crowd-without-groups",
        |list| {
            list.split(',')
                .map(|t| match t.trim() {
                    "districts" => Some(Town::Districts),
                    "crowd" => Some(Town::Crowd),
                    "crowd-without-groups" => Some(Town::CrowdWithoutGroups),
                    _ => None,
                })
                .collect()
        },
    )
    .unwrap_or_else(|| vec![Town::Districts, Town::Crowd, Town::CrowdWithoutGroups])
}

/// A town of `n` personas whose days are planned, or `None` (with a message) when it cannot be
/// built or does not get there in time.
fn warmed_app(n: usize, town: Town) -> Option<App> {
    let mut app = create_test_app(scripted_client(SEED));
    if !town.groups() {
        app.world_mut().resource_mut::<GroupSettings>().enabled = false;
    }
    if lean_on() {
        bevy_generative_agents::headless::make_lean(&mut app);
    }
    let map = TownMap::load_tmx(TownMap::default_town_path())
        .map_err(|e| eprintln!("{e}"))
        .ok()?;
    let (map, sheets) = match town {
        Town::Crowd | Town::CrowdWithoutGroups => {
            (map, synthetic_sheets(n).map_err(|e| eprintln!("{e}")).ok()?)
        }
        Town::Districts => district_crowd(n, &map).map_err(|e| eprintln!("{e}")).ok()?,
    };
    spawn_crowd(&mut app, map, &sheets, SEED)
        .map_err(|e| eprintln!("{e}"))
        .ok()?;
    app.finish();
    app.cleanup();
    let start = Instant::now();
    let from = measure_from();
    // The clock pauses at `from` exactly: a max-speed frame runs several steps, and stopping
    // after whichever frame passed it would start some measurements a step (the busy one on
    // the hour) later than others.
    let at_from = {
        let clock = app.world().resource::<SimClock>();
        let ahead = (from - clock.now().time())
            .num_seconds()
            .max(0)
            .unsigned_abs();
        clock.step() + ahead.div_ceil(u64::from(clock.sec_per_step().max(1)))
    };
    app.world_mut().resource_mut::<SimClock>().stop_at_step = Some(at_from);
    loop {
        app.update();
        let mut query = app
            .world_mut()
            .query_filtered::<(&Diary, &ActionView), With<Persona>>();
        let waiting = query
            .iter(app.world())
            .filter(|(diary, view)| diary.days.is_empty() || view.address.is_none())
            .count();
        let clock = app.world().resource::<SimClock>();
        if waiting == 0 && clock.now().time() >= from {
            eprintln!(
                "{n} personas ({}) planned, at {} (step {}) after {:.1} s",
                town.name(),
                clock.now(),
                clock.step(),
                start.elapsed().as_secs_f64()
            );
            return Some(app);
        }
        if waiting > 0 && clock.finished() {
            // Someone is still unplanned at `from`: go on until everyone is.
            let mut clock = app.world_mut().resource_mut::<SimClock>();
            clock.stop_at_step = None;
            clock.speed = SimSpeed::Max;
        }
        if start.elapsed() > WARM_UP_LIMIT {
            eprintln!("{n} personas: {waiting} still unplanned after {WARM_UP_LIMIT:?}; skipped");
            return None;
        }
    }
}

/// Frames the snapshot may wait, the clock held, for the last step's thoughts to land.
const SNAPSHOT_WAIT_FRAMES: u32 = 10_000;

/// The warmed town saved and decoded, to restore before every measurement.
///
/// The warm-up ends on a step whose thoughts may still be in flight, and a world with
/// thoughts out cannot be saved: the clock is held (paused) and the app updated until they
/// have landed, so the snapshot starts at the same step every time.
fn snapshot(app: &mut App, n: usize) -> Option<SaveData> {
    let dir = std::env::temp_dir().join(format!("ga-bench-agent-steps-{}-{n}", std::process::id()));
    let speed = app.world().resource::<SimClock>().speed;
    app.world_mut().resource_mut::<SimClock>().speed = SimSpeed::Paused;
    let mut saved = save_world(app.world_mut(), &dir);
    let mut waited = 0;
    while matches!(saved, Err(PersistError::Busy(_))) && waited < SNAPSHOT_WAIT_FRAMES {
        app.update();
        waited += 1;
        saved = save_world(app.world_mut(), &dir);
    }
    app.world_mut().resource_mut::<SimClock>().speed = speed;
    let data = saved.and_then(|_| decode(&dir));
    let _ = std::fs::remove_dir_all(&dir);
    data.map_err(|err| eprintln!("{n} personas: snapshot failed: {err}; skipped"))
        .ok()
}

/// Runs exactly `steps` sim steps and returns how long they took (told to the profiler, see
/// [`profiler_control`], when `profiled`).
fn run_steps(app: &mut App, steps: u64, profiled: bool) -> Duration {
    let target = app.world().resource::<SimClock>().step() + steps;
    {
        // `stop_at_step` pauses the clock at the target, so a max-speed frame cannot overshoot.
        let mut clock = app.world_mut().resource_mut::<SimClock>();
        clock.stop_at_step = Some(target);
        clock.speed = SimSpeed::Max;
    }
    if profiled {
        profiler_control("enable");
    }
    let start = Instant::now();
    while app.world().resource::<SimClock>().step() < target {
        app.update();
        FRAMES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    let elapsed = start.elapsed();
    if profiled {
        profiler_control("disable");
    }
    elapsed
}

/// `GA_BENCH_PERF_CTL=FIFO`: tells `perf record --control=fifo:FIFO -D -1` to sample only the
/// timed windows (not the warm-up, the snapshot or its restoring), by writing `enable` and
/// `disable` to its control fifo around each window.
fn profiler_control(command: &str) {
    use std::io::Write;
    static FIFO: std::sync::OnceLock<Option<std::sync::Mutex<std::fs::File>>> =
        std::sync::OnceLock::new();
    let fifo = FIFO.get_or_init(|| {
        let path = std::env::var_os("GA_BENCH_PERF_CTL")?;
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .map_err(|err| eprintln!("GA_BENCH_PERF_CTL: {err}"))
            .ok()
            .map(std::sync::Mutex::new)
    });
    if let Some(Ok(mut file)) = fifo.as_ref().map(|f| f.lock()) {
        let _ = writeln!(file, "{command}");
    }
}

/// Frames run by `run_steps` since the census started counting (it reports frames per step).
static FRAMES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Whether group conversations run (they do in the game): `GA_BENCH_GROUPS=off` turns them
/// off, to compare with builds from before they existed.
fn groups_on() -> bool {
    switch("GA_BENCH_GROUPS", true)
}

/// Whether the personas run lean mode (`AgentSettings::lean`: group talk in rounds, fewer
/// calls per action): `GA_BENCH_LEAN=on`. Off by default — the benchmark measures the
/// faithful loop.
fn lean_on() -> bool {
    switch("GA_BENCH_LEAN", false)
}

/// An `on`/`off` setting `name`, or `default`.
fn switch(name: &str, default: bool) -> bool {
    env_setting(name, "on or off", |v| match v {
        "on" => Some(true),
        "off" => Some(false),
        _ => None,
    })
    .unwrap_or(default)
}

/// Steps per measured window: 60 (10 game minutes), or `GA_BENCH_WINDOW`.
fn window_steps() -> u64 {
    env_setting("GA_BENCH_WINDOW", "a number of steps above 0", |k| {
        k.parse().ok().filter(|&k| k > 0)
    })
    .unwrap_or(60)
}

/// The sizes to measure: 25, 100 and 1,000, or the comma-separated `GA_BENCH_SIZES`.
fn sizes() -> Vec<usize> {
    env_setting(
        "GA_BENCH_SIZES",
        "a comma-separated list of sizes above 0",
        |list| {
            list.split(',')
                .map(|n| n.trim().parse().ok().filter(|&n: &usize| n > 0))
                .collect()
        },
    )
    .unwrap_or_else(|| vec![25, 100, 1_000])
}

/// `GA_BENCH_CENSUS=K`: K steps from the snapshot, then the model calls per step by kind.
fn census_steps() -> Option<u64> {
    env_setting("GA_BENCH_CENSUS", "a number of steps above 0", |k| {
        k.parse().ok().filter(|&k| k > 0)
    })
}

/// `GA_BENCH_CENSUS_WARM=on`: the census counts its steps a second time, after running them
/// once and restoring the snapshot — as criterion times every sample after its first, with
/// the response cache already holding the window's answers (so the model is seldom asked).
fn census_warm() -> bool {
    switch("GA_BENCH_CENSUS_WARM", false)
}

fn print_census(app: &mut App, n: usize, town: Town, steps: u64) {
    let from = app.world().resource::<SimClock>().now().time();
    let before = app.world().resource::<LlmClient>().usage();
    let town = town.name();
    eprintln!("{n} personas ({town}): census of {steps} steps");
    let (nodes_before, rows_before, _) = stored(app);
    let cpu_before = process_cpu_seconds();
    FRAMES.store(0, std::sync::atomic::Ordering::Relaxed);
    let elapsed = run_steps(app, steps, true);
    let cpu = process_cpu_seconds()
        .zip(cpu_before)
        .map(|(after, before)| after - before);
    let (nodes_after, rows_after, distinct) = stored(app);
    let after = app.world().resource::<LlmClient>().usage();
    let per_step = |x: u64, y: u64| x.saturating_sub(y) as f64 / steps as f64;
    eprintln!(
        "{n} personas ({town}), {steps} steps from {from}: {:.2} ms/step, {:.2} frames/step",
        elapsed.as_secs_f64() * 1e3 / steps as f64,
        FRAMES.load(std::sync::atomic::Ordering::Relaxed) as f64 / steps as f64
    );
    if let Some(cpu) = cpu {
        eprintln!(
            "  CPU time (all threads) {:.2} ms/step",
            cpu * 1e3 / steps as f64
        );
    }
    eprintln!(
        "  memories stored {:.1}/step, embedding rows {:.1}/step; {distinct} distinct texts in \
         {rows_after} rows at the end",
        per_step(nodes_after, nodes_before),
        per_step(rows_after, rows_before),
    );
    let cache = app.world().resource::<LlmClient>().cache().stats();
    eprintln!(
        "  response cache: {} entries, {:.1} MB, {} evicted",
        cache.entries,
        cache.memory_bytes as f64 / 1e6,
        cache.evicted
    );
    eprintln!(
        "  {:<34} {:>10} {:>12}",
        "kind", "calls/step", "cached/step"
    );
    for (kind, usage) in &after.kinds {
        let old = before.kind(kind);
        let calls = per_step(usage.calls, old.calls);
        let cached = per_step(usage.cache_hits, old.cache_hits);
        if calls > 0.0 || cached > 0.0 {
            eprintln!("  {kind:<34} {calls:>10.2} {cached:>12.2}");
        }
    }
}

/// The CPU time this process has used so far, all threads, user and system (from
/// `/proc/self/stat`, in Linux's fixed 100 ticks a second; `None` where there is no such
/// file). A census gives it beside the wall clock: a step's wall time also counts a thread
/// waiting for another (serial parts of a step), its CPU time only the work done.
fn process_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name, which is in parentheses and may hold spaces.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    // utime and stime are the stat file's fields 14 and 15 (the 12th and 13th after it).
    let ticks: f64 = fields
        .get(11..13)?
        .iter()
        .filter_map(|f| f.parse::<f64>().ok())
        .sum();
    Some(ticks / 100.0)
}

/// Memories and embedding rows held by every persona whose mind is home, and the distinct
/// texts among the rows (how many copies of one vector the town keeps).
fn stored(app: &mut App) -> (u64, u64, usize) {
    let mut texts = std::collections::HashSet::new();
    let (mut nodes, mut rows) = (0u64, 0u64);
    let world = app.world_mut();
    let mut minds = world.query::<&Mind>();
    for state in minds.iter(world).filter_map(Mind::get) {
        nodes += state.associative.len() as u64;
        let embeddings = state.associative.embeddings();
        rows += embeddings.len() as u64;
        texts.extend(embeddings.iter().map(|(text, _)| text));
    }
    (nodes, rows, texts.len())
}

fn agent_steps(c: &mut Criterion) {
    #[expect(unsafe_code, reason = "mimalloc's options are set through its C API")]
    // SAFETY: two plain integers, an option mimalloc defines and its "never purge"; callable
    // at any time from any thread.
    unsafe {
        libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, -1);
    }
    let census = census_steps();
    let mut group = c.benchmark_group("agent_steps");
    for (town, n) in towns()
        .into_iter()
        .flat_map(|town| sizes().into_iter().map(move |n| (town, n)))
    {
        let Some(mut app) = warmed_app(n, town) else {
            continue;
        };
        let Some(snapshot) = snapshot(&mut app, n) else {
            continue;
        };
        if let Some(steps) = census {
            if census_warm() {
                run_steps(&mut app, steps, false);
                if let Err(err) = apply_save(app.world_mut(), snapshot.clone()) {
                    eprintln!(
                        "{n} personas ({}): restoring the snapshot failed: {err}",
                        town.name()
                    );
                    continue;
                }
            }
            print_census(&mut app, n, town, steps);
            continue;
        }
        let window = window_steps();
        group.throughput(Throughput::Elements(n as u64 * window));
        // One window of 1,000 personas takes seconds: ten samples of one window each.
        group
            .sampling_mode(SamplingMode::Flat)
            .sample_size(10)
            .measurement_time(Duration::from_secs(if n >= 1_000 { 45 } else { 5 }));
        group.bench_function(BenchmarkId::new(town.name(), n), |b| {
            b.iter_custom(|iters| {
                let mut timed = Duration::ZERO;
                for _ in 0..iters {
                    if let Err(err) = apply_save(app.world_mut(), snapshot.clone()) {
                        panic!("restoring the snapshot failed: {err}");
                    }
                    timed += run_steps(&mut app, window, true);
                }
                timed
            });
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    // Numbers only: criterion's charts need system fonts a fresh machine may not have.
    config = Criterion::default().without_plots();
    targets = agent_steps
}
criterion_main!(benches);
