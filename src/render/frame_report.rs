//! The frame budget (issue 19): how long each frame took, and how much of it the simulation.
//!
//! A window frame runs the simulation (the clock driver, polls of landed thoughts, every sim
//! step due — [`GameSim`](super::GameSim), timed by [`run_timed_sim`](super::game)) and then
//! draws. [`FrameReport`] keeps both times for the most recent [`FrameReport::CAPACITY`]
//! frames after a short warm-up (the first frames compile shaders and load the map: they say
//! nothing about the town's running cost), and [`FrameReport::summary`] gives their spread —
//! median, 99th percentile, worst — as a `--screenshot` run writes it beside the picture and
//! logs it.

use std::collections::VecDeque;

use bevy::prelude::*;
use serde::{Deserialize, Serialize};

/// Median, 99th percentile, worst and mean of a set of frame times, in milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    /// The median.
    pub p50: f64,
    /// The 99th percentile (nearest rank).
    pub p99: f64,
    /// The worst.
    pub max: f64,
    /// The mean.
    pub mean: f64,
}

impl Spread {
    /// The spread of `values` (zeros when there are none; non-finite values are skipped).
    pub fn of(values: impl IntoIterator<Item = f64>) -> Self {
        let mut sorted: Vec<f64> = values.into_iter().filter(|v| v.is_finite()).collect();
        if sorted.is_empty() {
            return Self::default();
        }
        sorted.sort_by(f64::total_cmp);
        let rank = |p: f64| {
            // Nearest rank: the smallest value with at least p of the values at or below it.
            let k = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
            sorted[k - 1]
        };
        Self {
            p50: rank(0.50),
            p99: rank(0.99),
            max: sorted[sorted.len() - 1],
            mean: sorted.iter().sum::<f64>() / sorted.len() as f64,
        }
    }
}

/// What a run's frames cost, as written beside a screenshot.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct FrameSummary {
    /// Frames measured (after the warm-up, at most [`FrameReport::CAPACITY`]).
    pub frames: usize,
    /// Frames left out at the start.
    pub warm_up_frames: u32,
    /// Simulation CPU time per frame.
    pub sim_ms: Spread,
    /// Whole frames, start to start (simulation, drawing, and waiting for the display).
    pub frame_ms: Spread,
    /// Frames that took longer than [`FrameReport::LONG_FRAME_MS`].
    pub long_frames: usize,
}

/// The recent frames' simulation and frame times (a resource of the game app).
#[derive(Resource, Debug, Clone)]
pub struct FrameReport {
    warm_up_left: u32,
    warm_up: u32,
    /// The current frame's simulation time, until the frame time arrives.
    pending_sim_ms: Option<f64>,
    /// `(sim_ms, frame_ms)` of recent frames, oldest first.
    frames: VecDeque<(f32, f32)>,
}

impl Default for FrameReport {
    fn default() -> Self {
        Self::with_warm_up(Self::WARM_UP_FRAMES)
    }
}

impl FrameReport {
    /// Frames kept (a long session keeps the latest): about 18 minutes at 60 fps, 512 KiB.
    pub const CAPACITY: usize = 1 << 16;
    /// Frames left out at the start by default.
    pub const WARM_UP_FRAMES: u32 = 30;
    /// A frame longer than this is a visible hitch (issue 19's limit).
    pub const LONG_FRAME_MS: f64 = 50.0;

    /// A report that leaves out the first `warm_up` frames.
    pub fn with_warm_up(warm_up: u32) -> Self {
        Self {
            warm_up_left: warm_up,
            warm_up,
            pending_sim_ms: None,
            frames: VecDeque::new(),
        }
    }

    /// Records this frame's simulation time (before [`FrameReport::end_frame`]).
    pub fn record_sim(&mut self, ms: f64) {
        self.pending_sim_ms = Some(self.pending_sim_ms.unwrap_or(0.0) + ms);
    }

    /// Ends a frame that took `frame_ms` from the start of the last one.
    pub fn end_frame(&mut self, frame_ms: f64) {
        let sim = self.pending_sim_ms.take().unwrap_or(0.0);
        if self.warm_up_left > 0 {
            self.warm_up_left -= 1;
            return;
        }
        if self.frames.len() == Self::CAPACITY {
            self.frames.pop_front();
        }
        self.frames.push_back((sim as f32, frame_ms as f32));
    }

    /// The spread of the frames kept.
    pub fn summary(&self) -> FrameSummary {
        FrameSummary {
            frames: self.frames.len(),
            warm_up_frames: self.warm_up - self.warm_up_left,
            sim_ms: Spread::of(self.frames.iter().map(|f| f64::from(f.0))),
            frame_ms: Spread::of(self.frames.iter().map(|f| f64::from(f.1))),
            long_frames: self
                .frames
                .iter()
                .filter(|f| f64::from(f.1) > Self::LONG_FRAME_MS)
                .count(),
        }
    }
}

/// Ends each frame in the report with the real time since the last one.
pub(crate) fn end_frame(time: Res<Time<Real>>, mut report: ResMut<FrameReport>) {
    let ms = time.delta_secs_f64() * 1e3;
    // The very first frame has no predecessor: its delta is zero.
    if ms > 0.0 {
        report.end_frame(ms);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spreads_take_the_nearest_rank() {
        let s = Spread::of((1..=100).map(f64::from));
        assert_eq!((s.p50, s.p99, s.max), (50.0, 99.0, 100.0));
        assert!((s.mean - 50.5).abs() < 1e-9);
        let one = Spread::of([7.0]);
        assert_eq!((one.p50, one.p99, one.max), (7.0, 7.0, 7.0));
        assert_eq!(Spread::of([]), Spread::default());
        let odd = Spread::of([f64::NAN, 2.0, f64::INFINITY, 4.0]);
        assert_eq!((odd.p50, odd.max), (2.0, 4.0));
    }

    #[test]
    fn the_warm_up_is_left_out_and_sim_time_adds_up_per_frame() {
        let mut report = FrameReport::with_warm_up(2);
        for _ in 0..2 {
            report.record_sim(100.0);
            report.end_frame(900.0);
        }
        report.record_sim(1.0);
        report.record_sim(0.5);
        report.end_frame(16.0);
        report.end_frame(60.0);
        let summary = report.summary();
        assert_eq!(summary.frames, 2);
        assert_eq!(summary.warm_up_frames, 2);
        assert_eq!(summary.sim_ms.max, 1.5);
        assert_eq!(
            summary.sim_ms.p50, 0.0,
            "a frame without sim steps costs nothing"
        );
        assert_eq!(summary.frame_ms.max, 60.0);
        assert_eq!(summary.long_frames, 1);
    }

    #[test]
    fn a_long_session_keeps_the_latest_frames() {
        let mut report = FrameReport::with_warm_up(0);
        for i in 0..(FrameReport::CAPACITY + 10) {
            report.end_frame(i as f64);
        }
        let summary = report.summary();
        assert_eq!(summary.frames, FrameReport::CAPACITY);
        assert_eq!(summary.frame_ms.max, (FrameReport::CAPACITY + 9) as f64);
    }
}
