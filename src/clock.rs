//! Simulation time: the clock, the speed controls and the driver that runs sim steps.
//!
//! A **sim step** advances game time by `sec_per_step` (10 s by default, so a game day is 8,640
//! steps). Steps are decoupled from frames: every frame the driver (`drive_sim_steps`, an
//! exclusive system in [`GenerativeAgentsSystems::Drive`] in the schedule the game picks,
//! [`Update`] by default) decides how many steps are due and runs the [`SimStep`] schedule that
//! many times. Inside a step the [`AgentSystems`] sets run chained.
//!
//! Work that finishes *between* steps — polling model calls — lives in the [`SimPoll`] schedule,
//! which the driver runs before every step and once per frame, so results land as soon as they
//! are ready and a frame never waits for a model. Inside it the [`PollSystems`] sets run
//! chained: thoughts land, then the game hears about them.
//!
//! Two [`TimeMode`]s decide what a pending thought does to the clock:
//! - [`TimeMode::Lockstep`]: a step is taken only when no persona is [`AwaitingCognition`].
//!   Deterministic for a deterministic backend; used by tests, benchmarks and faithful runs.
//! - [`TimeMode::Realtime`]: the clock keeps running; a persona whose cognition is pending keeps
//!   doing its current action and catches up.
//!
//! While a Lockstep clock at [`SimSpeed::Max`] waits for a thought, the driver spins a moment,
//! then **sleeps** on the landing bell until something may have landed or the frame's budget
//! is spent: the work a step waits for is spawned so that its end rings the bell
//! (`spawn_landing`) and polled so that its waker rings it (`poll_landing`). A town waiting on
//! a slow model costs next to no CPU, and an answer wakes the driver at once.
//!
//! **Layer** (see `tests/layers.rs`): the ground: imports only [`settings`](crate::settings).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, LazyLock, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use bevy::ecs::schedule::{InternedScheduleLabel, ScheduleLabel, SingleThreadedExecutor};
use bevy::prelude::*;
use bevy::tasks::{AsyncComputeTaskPool, Task};
use chrono::{NaiveDate, NaiveDateTime, Timelike};
use serde::{Deserialize, Serialize};

use crate::settings::AgentSettings;

/// The schedule holding one simulation step. Run by the clock driver, never by Bevy's main loop.
#[derive(ScheduleLabel, Debug, Clone, PartialEq, Eq, Hash)]
pub struct SimStep;

/// The schedule that collects finished background work (model calls) between steps. The driver
/// runs it once per frame and before each step.
#[derive(ScheduleLabel, Debug, Clone, PartialEq, Eq, Hash)]
pub struct SimPoll;

/// The stages of one sim step, run in this order inside [`SimStep`].
///
/// Retrieval, planning, reactions and reflection (SPEC §3.2–§3.8) have no set of their own:
/// they run in that order inside each persona's thought, which [`AgentSystems::Think`] starts
/// and [`PollSystems::LandThoughts`] checks back in (see `docs/architecture.md`).
#[derive(SystemSet, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AgentSystems {
    /// Empty hook for game code that must run before the personas think this step.
    First,
    /// Personas look around: the map around them becomes their `Percepts`, and the places in
    /// view join their spatial memory (SPEC §3.1, `gather_percepts`).
    Perceive,
    /// Conversations intended last step start (both minds out, one task), then each persona
    /// either does its bookkeeping in place or checks its mind out into a thought: perceive →
    /// retrieve → plan → react → reflect (`start_conversations`, `start_thoughts`).
    Think,
    /// Actions become tiles and paths; bodies move one tile and place their events on the map
    /// (SPEC §3.9, `execute_actions`).
    Execute,
    /// Game code that reads the step's outcome; the crate records the arenas visited here
    /// (`record_visits`). The clock advances right after.
    Last,
}

/// What runs in [`SimPoll`], between steps, in this order.
#[derive(SystemSet, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PollSystems {
    /// Finished thoughts and conversations are checked back in: minds home, `ActionView` and
    /// `Diary` updated, chat intents queued (`collect_thoughts`). Systems that read what landed
    /// order themselves after it.
    LandThoughts,
    /// The game hears what landed: the outcome events (`ActionStarted`, `NewDay`, …, see
    /// `cognition::outcome`) are triggered on the personas and written as messages.
    SendOutcomes,
}

/// The sets the crate adds to the schedule the game picked ([`Update`] by default, see
/// `ClockPlugin::in_schedule` and `GenerativeAgentsPlugins::new`).
#[derive(SystemSet, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GenerativeAgentsSystems {
    /// The step driver (`drive_sim_steps`): polls, then runs the steps that are due. Order
    /// game systems before it to act on this frame's steps, after it to read them.
    Drive,
}

/// How a pending model call affects the clock.
#[derive(Reflect, Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TimeMode {
    /// A step waits until every persona's cognition for the previous step has finished.
    #[default]
    Lockstep,
    /// The clock keeps running; pending personas keep doing their current action.
    Realtime,
}

/// How fast game time runs relative to real time.
///
/// At 1× the driver runs [`AgentSettings::steps_per_second_at_1x`] steps per real second.
#[derive(Reflect, Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum SimSpeed {
    /// No steps (single steps may still be requested).
    Paused,
    /// 1×.
    #[default]
    X1,
    /// 2×.
    X2,
    /// 4×.
    X4,
    /// 8×.
    X8,
    /// 16×.
    X16,
    /// 32×.
    X32,
    /// As fast as the models allow, within a per-frame time budget.
    Max,
}

impl SimSpeed {
    /// All speeds, slowest first.
    pub const ALL: [SimSpeed; 8] = [
        SimSpeed::Paused,
        SimSpeed::X1,
        SimSpeed::X2,
        SimSpeed::X4,
        SimSpeed::X8,
        SimSpeed::X16,
        SimSpeed::X32,
        SimSpeed::Max,
    ];

    /// The multiplier of a fixed speed; `None` for paused and max.
    pub fn multiplier(self) -> Option<f64> {
        match self {
            SimSpeed::Paused | SimSpeed::Max => None,
            SimSpeed::X1 => Some(1.0),
            SimSpeed::X2 => Some(2.0),
            SimSpeed::X4 => Some(4.0),
            SimSpeed::X8 => Some(8.0),
            SimSpeed::X16 => Some(16.0),
            SimSpeed::X32 => Some(32.0),
        }
    }

    /// The next faster speed (max stays max).
    pub fn faster(self) -> Self {
        let i = Self::ALL.iter().position(|s| *s == self).unwrap_or(1);
        Self::ALL[(i + 1).min(Self::ALL.len() - 1)]
    }

    /// The next slower speed (paused stays paused).
    pub fn slower(self) -> Self {
        let i = Self::ALL.iter().position(|s| *s == self).unwrap_or(1);
        Self::ALL[i.saturating_sub(1)]
    }

    /// A short label for the HUD ("⏸", "1×", …, "max").
    pub fn label(self) -> &'static str {
        match self {
            SimSpeed::Paused => "paused",
            SimSpeed::X1 => "1x",
            SimSpeed::X2 => "2x",
            SimSpeed::X4 => "4x",
            SimSpeed::X8 => "8x",
            SimSpeed::X16 => "16x",
            SimSpeed::X32 => "32x",
            SimSpeed::Max => "max",
        }
    }
}

/// The simulation clock.
#[derive(Resource, Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SimClock {
    start: NaiveDateTime,
    now: NaiveDateTime,
    step: u64,
    sec_per_step: u32,
    /// Current speed.
    pub speed: SimSpeed,
    /// Current time mode.
    pub mode: TimeMode,
    /// When set, stop (pause) once this step count is reached. Headless runs use it.
    pub stop_at_step: Option<u64>,
    #[serde(skip)]
    accumulator: f64,
    #[serde(skip)]
    single_steps: u32,
}

impl Default for SimClock {
    fn default() -> Self {
        Self::new(Self::default_start(), 10)
    }
}

impl SimClock {
    /// The default start: February 13, 2023, 00:00:00 (as in Smallville).
    pub fn default_start() -> NaiveDateTime {
        NaiveDate::from_ymd_opt(2023, 2, 13)
            .and_then(|d| d.and_hms_opt(0, 0, 0))
            .unwrap_or_default()
    }

    /// A clock at `start` advancing `sec_per_step` seconds per step (at least 1).
    pub fn new(start: NaiveDateTime, sec_per_step: u32) -> Self {
        Self {
            start,
            now: start,
            step: 0,
            sec_per_step: sec_per_step.max(1),
            speed: SimSpeed::default(),
            mode: TimeMode::default(),
            stop_at_step: None,
            accumulator: 0.0,
            single_steps: 0,
        }
    }

    /// A clock resumed at `step` steps after `start`.
    pub fn resumed(start: NaiveDateTime, sec_per_step: u32, step: u64) -> Self {
        let mut clock = Self::new(start, sec_per_step);
        clock.step = step;
        clock.now = start + chrono::Duration::seconds(step as i64 * clock.sec_per_step as i64);
        clock
    }

    /// Sets the mode (builder style).
    pub fn with_mode(mut self, mode: TimeMode) -> Self {
        self.mode = mode;
        self
    }

    /// Sets the speed (builder style).
    pub fn with_speed(mut self, speed: SimSpeed) -> Self {
        self.speed = speed;
        self
    }

    /// When the simulation started.
    pub fn start(&self) -> NaiveDateTime {
        self.start
    }

    /// The current game time: the time of the step about to run or running.
    pub fn now(&self) -> NaiveDateTime {
        self.now
    }

    /// Steps taken so far.
    pub fn step(&self) -> u64 {
        self.step
    }

    /// Game seconds per step.
    pub fn sec_per_step(&self) -> u32 {
        self.sec_per_step
    }

    /// Steps in one game day (8,640 at 10 s per step).
    pub fn steps_per_day(&self) -> u64 {
        86_400 / self.sec_per_step as u64
    }

    /// Minutes since midnight of the current game time.
    pub fn minute_of_day(&self) -> u32 {
        self.now.hour() * 60 + self.now.minute()
    }

    /// Asks for exactly one more step, even while paused.
    pub fn request_step(&mut self) {
        self.single_steps = self.single_steps.saturating_add(1);
    }

    /// Advances the clock by one step. The driver calls this after each [`SimStep`].
    pub(crate) fn advance(&mut self) {
        self.step += 1;
        self.now += chrono::Duration::seconds(self.sec_per_step as i64);
    }

    /// Whether `stop_at_step` has been reached.
    pub fn finished(&self) -> bool {
        self.stop_at_step.is_some_and(|stop| self.step >= stop)
    }
}

/// Marks a persona whose cognition has work in flight (a model call). In [`TimeMode::Lockstep`]
/// no step is taken while any entity carries it.
#[derive(Component, Debug, Clone, Copy)]
pub struct AwaitingCognition {
    /// The step at which the work started.
    pub since_step: u64,
    /// When (real time) the work started, for the "thinking" marker.
    pub since: Instant,
}

impl AwaitingCognition {
    /// Work starting now, at `step`.
    pub fn new(step: u64) -> Self {
        Self {
            since_step: step,
            since: Instant::now(),
        }
    }
}

/// Holds a persona out of its routine — it perceives nothing new, starts no thought and takes
/// no step along its path — while the game keeps it somewhere (a stage scene holds its
/// persona actors until the scene closes). Unlike [`AwaitingCognition`], a Lockstep clock does
/// not wait for a held persona: the town goes on around it.
#[derive(Component, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Held;

/// Written after every completed step.
#[derive(Message, Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepCompleted {
    /// The number of the step that just ran (0 for the first).
    pub step: u64,
    /// The game time that step ran at.
    pub time: NaiveDateTime,
}

/// Adds the clock, the [`SimStep`]/[`SimPoll`] schedules and the driver.
pub struct ClockPlugin {
    schedule: InternedScheduleLabel,
}

impl Default for ClockPlugin {
    fn default() -> Self {
        Self {
            schedule: Update.intern(),
        }
    }
}

impl ClockPlugin {
    /// Drives the simulation from `schedule` instead of [`Update`]: the driver's
    /// [`GenerativeAgentsSystems::Drive`] set goes there.
    pub(crate) fn in_schedule(schedule: impl ScheduleLabel) -> Self {
        Self {
            schedule: schedule.intern(),
        }
    }
}

impl Plugin for ClockPlugin {
    fn build(&self, app: &mut App) {
        app.init_resource::<SimClock>()
            .init_resource::<AgentSettings>()
            .register_type::<AgentSettings>()
            .add_message::<StepCompleted>()
            .init_schedule(SimStep)
            .init_schedule(SimPoll)
            // Both schedules run on the driving thread, one system after another. SimPoll runs
            // between every two steps and, in Lockstep at max speed, again each time the driver
            // looks whether thoughts have landed: a handful of small checks, for which the
            // multi-threaded executor's hand-offs to other threads cost more than the checks
            // and delayed the step loop. SimStep's stages follow each other anyway, and each
            // spreads its per-persona work over the task pools itself (parallel queries,
            // thought tasks). Measured with `cargo bench --bench agent_steps`.
            .edit_schedule(SimPoll, |schedule| {
                schedule.set_executor(SingleThreadedExecutor::new());
            })
            .edit_schedule(SimStep, |schedule| {
                schedule.set_executor(SingleThreadedExecutor::new());
            })
            .configure_sets(
                SimStep,
                (
                    AgentSystems::First,
                    AgentSystems::Perceive,
                    AgentSystems::Think,
                    AgentSystems::Execute,
                    AgentSystems::Last,
                )
                    .chain(),
            )
            .configure_sets(
                SimPoll,
                (PollSystems::LandThoughts, PollSystems::SendOutcomes).chain(),
            )
            .add_systems(
                self.schedule,
                drive_sim_steps.in_set(GenerativeAgentsSystems::Drive),
            );
    }
}

/// How many steps a frame of `dt` seconds owes at a fixed speed, given the carried fraction.
/// Returns `(steps, new_accumulator)`; never more than `max_steps`, and the remainder beyond the
/// cap is dropped so a long hitch cannot cause a catch-up spiral.
pub(crate) fn steps_due(
    accumulator: f64,
    dt_secs: f64,
    steps_per_sec: f64,
    max_steps: u32,
) -> (u32, f64) {
    let total = accumulator + dt_secs.max(0.0) * steps_per_sec.max(0.0);
    let whole = total.floor();
    if whole >= max_steps as f64 {
        return (max_steps, 0.0);
    }
    (whole as u32, total - whole)
}

fn cognition_pending(world: &mut World) -> bool {
    let mut query = world.query_filtered::<(), With<AwaitingCognition>>();
    query.iter(world).next().is_some()
}

fn run_one_step(world: &mut World) {
    let (step, time) = {
        let clock = world.resource::<SimClock>();
        (clock.step, clock.now)
    };
    world.run_schedule(SimStep);
    world.resource_mut::<SimClock>().advance();
    world.write_message(StepCompleted { step, time });
}

/// The driver: runs [`SimPoll`], then as many [`SimStep`]s as the speed and mode allow.
pub(crate) fn drive_sim_steps(world: &mut World) {
    // The bell's count before each poll: a waker that rings after it wakes the wait below.
    let mut heard = LANDINGS.count();
    world.run_schedule(SimPoll);
    let settings = world
        .get_resource::<AgentSettings>()
        .cloned()
        .unwrap_or_default();
    let dt = world.resource::<Time>().delta_secs_f64();

    let (mode, speed, owed) = {
        let mut clock = world.resource_mut::<SimClock>();
        let owed = match clock.speed.multiplier() {
            Some(mult) => {
                let (steps, acc) = steps_due(
                    clock.accumulator,
                    dt,
                    settings.steps_per_second_at_1x * mult,
                    settings.max_steps_per_frame,
                );
                clock.accumulator = acc;
                steps
            }
            None => 0,
        };
        (clock.mode, clock.speed, owed)
    };

    let budget = Duration::from_millis(settings.max_speed_frame_budget_ms);
    let frame_start = Instant::now();
    let mut taken = 0u32;
    loop {
        if world.resource::<SimClock>().finished() {
            world.resource_mut::<SimClock>().speed = SimSpeed::Paused;
            break;
        }
        let single = world.resource::<SimClock>().single_steps > 0;
        let wanted = single || taken < owed || speed == SimSpeed::Max;
        if !wanted || (speed == SimSpeed::Max && frame_start.elapsed() >= budget) {
            break;
        }
        if mode == TimeMode::Lockstep && cognition_pending(world) {
            let elapsed = frame_start.elapsed();
            if speed == SimSpeed::Max && elapsed < budget {
                // Model answers arrive on other threads: wait until the work polled last may
                // have gone on (its waker rang the bell since `heard`), then collect.
                LANDINGS.wait_past_after_spin(heard, budget - elapsed);
                heard = LANDINGS.count();
                world.run_schedule(SimPoll);
                continue;
            }
            // Blocked: do not bank steps while waiting, or the clock would race afterwards.
            let mut clock = world.resource_mut::<SimClock>();
            clock.accumulator = clock.accumulator.min(1.0);
            break;
        }
        run_one_step(world);
        taken += 1;
        if single {
            let mut clock = world.resource_mut::<SimClock>();
            clock.single_steps = clock.single_steps.saturating_sub(1);
        }
        heard = LANDINGS.count();
        world.run_schedule(SimPoll);
    }
}

/// A counter rung each time something a waiting thread may be waiting for happens, and a
/// condition variable to sleep on until it is rung again (or a timeout passes). Ringing is an
/// atomic add while nobody sleeps on it (a landing rings once per task).
#[derive(Debug, Default)]
pub(crate) struct Bell {
    rung: AtomicU64,
    sleepers: AtomicUsize,
    lock: Mutex<()>,
    ring: Condvar,
}

impl Bell {
    pub(crate) const fn new() -> Self {
        Self {
            rung: AtomicU64::new(0),
            sleepers: AtomicUsize::new(0),
            lock: Mutex::new(()),
            ring: Condvar::new(),
        }
    }

    pub(crate) fn ring(&self) {
        self.rung.fetch_add(1, Ordering::SeqCst);
        // A sleeper counts itself before it reads the count (both sequentially consistent),
        // so either it sees this ring or this sees it; the lock orders the notice after its
        // check.
        if self.sleepers.load(Ordering::SeqCst) > 0 {
            drop(self.lock.lock().unwrap_or_else(|p| p.into_inner()));
            self.ring.notify_all();
        }
    }

    /// How often it has rung so far.
    pub(crate) fn count(&self) -> u64 {
        self.rung.load(Ordering::SeqCst)
    }

    /// [`Self::wait_past`], after a short spin: work that lands within [`LANDING_SPIN`] is
    /// collected without the cost of waking a sleeping thread.
    pub(crate) fn wait_past_after_spin(&self, seen: u64, timeout: Duration) -> u64 {
        let spin_until = Instant::now() + LANDING_SPIN.min(timeout);
        while self.count() == seen && Instant::now() < spin_until {
            std::thread::yield_now();
        }
        match self.count() {
            rung if rung != seen => rung,
            _ => self.wait_past(seen, timeout.saturating_sub(LANDING_SPIN)),
        }
    }

    /// Sleeps until the count is no longer `seen` (at once if it already is) or `timeout`
    /// passes; returns the count.
    pub(crate) fn wait_past(&self, seen: u64, timeout: Duration) -> u64 {
        self.sleepers.fetch_add(1, Ordering::SeqCst);
        let guard = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        let waited = self
            .ring
            .wait_timeout_while(guard, timeout, |()| self.count() == seen);
        drop(waited);
        self.sleepers.fetch_sub(1, Ordering::SeqCst);
        self.count()
    }
}

/// How long a driver waiting for a landing spins before it sleeps: the crowd's thoughts often
/// land within it, while a slow model's wait costs at most this much CPU per look.
const LANDING_SPIN: Duration = Duration::from_micros(200);

/// The landing bell: rung by the waker [`poll_landing`] registers, when the work it polled
/// may go on or is done. One per process, as Bevy's task pools are: a ring meant for another
/// app in the process only makes a driver look once more.
static LANDINGS: Bell = Bell::new();

/// The waker that rings [`LANDINGS`].
struct RingLandings;

impl Wake for RingLandings {
    fn wake(self: Arc<Self>) {
        LANDINGS.ring();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        LANDINGS.ring();
    }
}

/// Spawns work a Lockstep step may wait for (a thought, a conversation, a group call…) on the
/// async compute pool. Its end rings the landing bell even if nothing polled it yet; a poll
/// through [`poll_landing`] then collects it or, if the output is not stored yet, leaves the
/// waker that rings again once it is. So a waiting driver never sleeps past a landing.
pub(crate) fn spawn_landing<T: Send + 'static>(
    future: impl Future<Output = T> + Send + 'static,
) -> Task<T> {
    AsyncComputeTaskPool::get().spawn(async move {
        let output = future.await;
        LANDINGS.ring();
        output
    })
}

/// Polls a thought, a conversation or any other work a Lockstep step may wait for, once:
/// its output if it is done. Unlike `block_on(poll_once(..))` it leaves a waker that rings the
/// landing bell, so a driver waiting for the work sleeps instead of spinning and wakes as soon
/// as the work is done (a task's waker is called after its output is stored).
pub(crate) fn poll_landing<F: Future + Unpin + ?Sized>(future: &mut F) -> Option<F::Output> {
    static WAKER: LazyLock<Waker> = LazyLock::new(|| Waker::from(Arc::new(RingLandings)));
    match Pin::new(future).poll(&mut Context::from_waker(&WAKER)) {
        Poll::Ready(output) => Some(output),
        Poll::Pending => None,
    }
}

/// Minutes in a day.
pub const MINUTES_PER_DAY: u32 = 1440;

/// A time of day as prompts show it: `0 → "12:00 am"`, `390 → "6:30 am"`, `780 → "1:00 pm"`.
/// Minutes past the end of the day wrap around.
pub(crate) fn clock_text(minute_of_day: u32) -> String {
    let minute_of_day = minute_of_day % MINUTES_PER_DAY;
    let (hour, minute) = (minute_of_day / 60, minute_of_day % 60);
    let meridiem = if hour < 12 { "am" } else { "pm" };
    let hour12 = match hour % 12 {
        0 => 12,
        h => h,
    };
    format!("{hour12}:{minute:02} {meridiem}")
}

/// A whole hour as prompts show it (`7 → "7:00 am"`).
pub fn hour_text(hour: u32) -> String {
    clock_text(hour.saturating_mul(60))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_day_is_8640_steps() {
        let mut clock = SimClock::default();
        assert_eq!(clock.steps_per_day(), 8_640);
        for _ in 0..8_640 {
            clock.advance();
        }
        assert_eq!(clock.now().to_string(), "2023-02-14 00:00:00");
        assert_eq!(clock.step(), 8_640);
    }

    #[test]
    fn resumed_clock_matches_advanced_clock() {
        let mut a = SimClock::default();
        for _ in 0..1234 {
            a.advance();
        }
        let b = SimClock::resumed(SimClock::default_start(), 10, 1234);
        assert_eq!(a.now(), b.now());
        assert_eq!(b.minute_of_day(), (1234 * 10 / 60) as u32);
    }

    #[test]
    fn steps_due_carries_fractions_and_caps() {
        assert_eq!(steps_due(0.0, 0.5, 1.0, 64), (0, 0.5));
        let (n, acc) = steps_due(0.5, 0.75, 2.0, 64);
        assert_eq!(n, 2);
        assert!((acc - 0.0).abs() < 1e-9);
        assert_eq!(steps_due(0.0, 10.0, 32.0, 64), (64, 0.0));
        assert_eq!(steps_due(0.2, -1.0, 1.0, 64), (0, 0.2));
    }

    #[test]
    fn speed_steps_up_and_down() {
        assert_eq!(SimSpeed::Paused.slower(), SimSpeed::Paused);
        assert_eq!(SimSpeed::X1.faster(), SimSpeed::X2);
        assert_eq!(SimSpeed::X32.faster(), SimSpeed::Max);
        assert_eq!(SimSpeed::Max.faster(), SimSpeed::Max);
        assert_eq!(SimSpeed::X1.slower(), SimSpeed::Paused);
    }
}
