//! Simulation throughput: agent-steps per second (personas × sim steps) for 25, 100 and 1,000
//! personas on the default town with the offline town script, in Lockstep at max speed.
//!
//! Each size is warmed up first — run until every persona has planned its day (a day in its
//! `Diary`) and grounded its first action — and only then measured: one iteration is one sim
//! step, reported by criterion as a throughput of `personas` elements, i.e. agent-steps/s.
//! Thoughts that fall due while measuring (decompositions, reactions, reflections) are part of
//! the cost, as in a real run. Target: ≥ 100,000 agent-steps/s at 1,000 personas.
//!
//! ```text
//! cargo bench --no-default-features --bench agent_steps
//! ```

use std::time::{Duration, Instant};

use bevy::prelude::*;
use bevy_generative_agents::clock::{SimClock, SimSpeed};
use bevy_generative_agents::persona::{ActionView, Diary, Persona};
use bevy_generative_agents::testing::{
    create_test_app, scripted_client, spawn_crowd, synthetic_sheets,
};
use bevy_generative_agents::world::TownMap;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

const SEED: u64 = 11;
/// Give up warming up after this long (the loop may not plan yet).
const WARM_UP_LIMIT: Duration = Duration::from_secs(600);

/// A town of `n` personas whose days are planned, or `None` (with a message) when it cannot be
/// built or does not get there in time.
fn warmed_app(n: usize) -> Option<App> {
    let mut app = create_test_app(scripted_client(SEED));
    let sheets = synthetic_sheets(n).map_err(|e| eprintln!("{e}")).ok()?;
    let map = TownMap::load_tmx(TownMap::default_town_path())
        .map_err(|e| eprintln!("{e}"))
        .ok()?;
    spawn_crowd(&mut app, map, &sheets, SEED)
        .map_err(|e| eprintln!("{e}"))
        .ok()?;
    app.finish();
    app.cleanup();
    let start = Instant::now();
    loop {
        app.update();
        let mut query = app
            .world_mut()
            .query_filtered::<(&Diary, &ActionView), With<Persona>>();
        let waiting = query
            .iter(app.world())
            .filter(|(diary, view)| diary.days.is_empty() || view.address.is_empty())
            .count();
        if waiting == 0 {
            let step = app.world().resource::<SimClock>().step();
            eprintln!(
                "{n} personas planned at step {step} after {:.1} s",
                start.elapsed().as_secs_f64()
            );
            return Some(app);
        }
        if start.elapsed() > WARM_UP_LIMIT {
            eprintln!("{n} personas: {waiting} still unplanned after {WARM_UP_LIMIT:?}; skipped");
            return None;
        }
    }
}

/// Runs exactly `steps` sim steps and returns how long they took.
fn run_steps(app: &mut App, steps: u64) -> Duration {
    let target = app.world().resource::<SimClock>().step() + steps;
    {
        // `stop_at_step` pauses the clock at the target, so a max-speed frame cannot overshoot.
        let mut clock = app.world_mut().resource_mut::<SimClock>();
        clock.stop_at_step = Some(target);
        clock.speed = SimSpeed::Max;
    }
    let start = Instant::now();
    while app.world().resource::<SimClock>().step() < target {
        app.update();
    }
    start.elapsed()
}

fn agent_steps(c: &mut Criterion) {
    let mut group = c.benchmark_group("agent_steps");
    for n in [25usize, 100, 1_000] {
        let Some(mut app) = warmed_app(n) else {
            continue;
        };
        group.throughput(Throughput::Elements(n as u64));
        if n >= 1_000 {
            group
                .sample_size(10)
                .measurement_time(Duration::from_secs(20));
        } else {
            group
                .sample_size(20)
                .measurement_time(Duration::from_secs(10));
        }
        group.bench_function(BenchmarkId::from_parameter(n), |b| {
            b.iter_custom(|iters| run_steps(&mut app, iters));
        });
        // Which part of the day was measured matters: night steps are cheaper than the morning.
        let clock = app.world().resource::<SimClock>();
        eprintln!(
            "{n} personas: measured (with criterion's warm-up) up to step {}, {}",
            clock.step(),
            clock.now()
        );
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
