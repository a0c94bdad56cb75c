//! The HUD: a bar across the top with the game date and time, the speed controls (with keyboard
//! shortcuts), the frame rate, and the model's status — backend, calls in flight, calls done and
//! failed, tokens and cache hits from the [`LlmClient`]'s usage counters. In a replay
//! ([`ReplayPlayback`]) the model's status gives way to the log's progress and, at its end,
//! "replay finished". A [`HudToast`] (a save's or load's outcome) shows at the bar's end for a
//! few seconds.
//!
//! Keyboard: `Space` pause/resume · `N` or `.` one step · `1`–`6` 1×–32× · `0` max ·
//! `]`/`[` faster/slower · `F5` quick save · `F9` quick load ([`super::saves`]).

use bevy::prelude::*;
use bevy_egui::input::EguiWantsInput;
use bevy_egui::{EguiContexts, EguiPrimaryContextPass, egui};

use crate::clock::{AwaitingCognition, SimClock, SimSpeed, TimeMode};
use crate::llm::{LlmClient, UsageReport};
use crate::output::ReplayPlayback;

/// Seconds a [`HudToast`] stays up (errors twice as long).
pub(crate) const TOAST_SECS: f32 = 6.0;

/// A short message at the end of the HUD bar, e.g. "saved to … at step N".
#[derive(Resource, Debug, Clone, Default, PartialEq)]
pub struct HudToast {
    /// The message.
    pub text: String,
    /// Whether it reports a failure (drawn in red, kept longer).
    pub error: bool,
    /// Real seconds since it was shown.
    pub age: f32,
}

impl HudToast {
    /// Shows `text` from now on.
    pub fn show(&mut self, text: impl Into<String>, error: bool) {
        self.text = text.into();
        self.error = error;
        self.age = 0.0;
    }

    /// Whether it is still up.
    pub fn visible(&self) -> bool {
        let secs = if self.error {
            2.0 * TOAST_SECS
        } else {
            TOAST_SECS
        };
        !self.text.is_empty() && self.age < secs
    }
}

/// The replay's progress as the HUD shows it: `"replay: line k of n"`, or `"replay finished"`
/// once the last line is shown.
pub fn replay_status(applied: usize, total: usize, finished: bool) -> String {
    if finished {
        "replay finished".to_owned()
    } else {
        format!("replay: line {applied} of {total}")
    }
}

/// What a speed key does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpeedShortcut {
    /// Run at this speed.
    Set(SimSpeed),
    /// Pause, or resume the speed paused from.
    TogglePause,
    /// Take one step (while paused or not).
    Step,
    /// One speed faster.
    Faster,
    /// One speed slower.
    Slower,
}

/// The speed shortcut bound to `key`, if any.
pub fn speed_for_key(key: KeyCode) -> Option<SpeedShortcut> {
    Some(match key {
        KeyCode::Space => SpeedShortcut::TogglePause,
        KeyCode::KeyN | KeyCode::Period => SpeedShortcut::Step,
        KeyCode::Digit1 => SpeedShortcut::Set(SimSpeed::X1),
        KeyCode::Digit2 => SpeedShortcut::Set(SimSpeed::X2),
        KeyCode::Digit3 => SpeedShortcut::Set(SimSpeed::X4),
        KeyCode::Digit4 => SpeedShortcut::Set(SimSpeed::X8),
        KeyCode::Digit5 => SpeedShortcut::Set(SimSpeed::X16),
        KeyCode::Digit6 => SpeedShortcut::Set(SimSpeed::X32),
        KeyCode::Digit0 => SpeedShortcut::Set(SimSpeed::Max),
        KeyCode::BracketRight => SpeedShortcut::Faster,
        KeyCode::BracketLeft => SpeedShortcut::Slower,
        _ => return None,
    })
}

/// Applies a shortcut to the clock; `resume_to` remembers the speed to return to after a pause.
pub(crate) fn apply_speed_shortcut(
    clock: &mut SimClock,
    resume_to: &mut SimSpeed,
    shortcut: SpeedShortcut,
) {
    let before = clock.speed;
    match shortcut {
        SpeedShortcut::Set(speed) => clock.speed = speed,
        SpeedShortcut::TogglePause => {
            clock.speed = if before == SimSpeed::Paused {
                *resume_to
            } else {
                SimSpeed::Paused
            };
        }
        SpeedShortcut::Step => clock.request_step(),
        SpeedShortcut::Faster => clock.speed = before.faster(),
        SpeedShortcut::Slower => clock.speed = before.slower(),
    }
    if before != SimSpeed::Paused && clock.speed == SimSpeed::Paused {
        *resume_to = before;
    }
}

/// HUD state: the speed to resume to, the usage snapshot (refreshed a few times a second) and
/// the measured frame rate.
#[derive(Resource, Debug, Clone)]
pub struct HudState {
    /// Speed restored by un-pausing.
    pub resume_to: SimSpeed,
    /// The latest usage snapshot.
    pub usage: UsageReport,
    /// Seconds since the snapshot was taken.
    pub usage_age: f32,
    /// Frames per second (smoothed).
    pub fps: f32,
    /// Height of the HUD bar in logical pixels (panels below it start there).
    pub bar_height: f32,
    /// Seconds the one-line controls hint stays up (from the first frame).
    pub hint_left: f32,
    /// What the personas whose minds are out wait for ("planning the day: Ada 7 of ~18
    /// answers"), empty while nobody has waited long.
    pub waiting: String,
    /// Per persona whose mind is out: when its thought began, the thought's calls ended by
    /// then, and what it was last seen asking.
    thoughts: std::collections::HashMap<Entity, ThoughtWatch>,
    /// Answers the last finished thought of each kind of work took: the "of ~18" estimate.
    answers_per_thought: std::collections::HashMap<&'static str, u64>,
}

/// One persona's thought as the HUD follows it.
#[derive(Debug, Clone, Copy)]
struct ThoughtWatch {
    since: std::time::Instant,
    ended_at_start: u64,
    doing: Option<&'static str>,
}

/// Real seconds a mind is out before the HUD says what it waits for.
const WAITING_AFTER_SECS: f32 = 2.0;

/// What a persona is doing while it waits on a call of this prompt kind, in a player's words.
pub fn doing_for_kind(kind: &str) -> &'static str {
    const PLANNING: [&str; 6] = [
        "wake_up_hour",
        "daily_plan",
        "hourly_schedule",
        "task_decomposition",
        "new_decomposition_schedule",
        "revise_identity",
    ];
    if PLANNING.iter().any(|k| kind.starts_with(k)) {
        "planning the day"
    } else if kind.starts_with("action_sector")
        || kind.starts_with("action_arena")
        || kind.starts_with("action_object")
        || kind.starts_with("action_place")
    {
        "choosing where to go"
    } else if kind.ends_with("poignancy") || kind.ends_with("poignancies") {
        "taking in what happened"
    } else if kind.starts_with("insights") || kind == "focal_points" {
        "reflecting"
    } else if kind.starts_with("group_") {
        "in a group conversation"
    } else if kind.starts_with("decide_to")
        || kind.contains("utterance")
        || kind.contains("chat")
        || kind.starts_with("conversation")
        || kind.starts_with("dialogue")
    {
        "talking"
    } else {
        "thinking"
    }
}

/// The HUD's waiting line: per kind of work, who waits and how many answers their thought has
/// had (out of about as many as the last such thought took, once one finished).
pub fn waiting_line(
    waiting: &[(String, &'static str, u64)],
    estimates: &std::collections::HashMap<&'static str, u64>,
) -> String {
    let mut by_doing: Vec<(&'static str, Vec<String>)> = Vec::new();
    for (name, doing, answers) in waiting {
        let first = name.split_whitespace().next().unwrap_or(name);
        let count = match estimates.get(doing) {
            Some(of) if *of > *answers => format!("{first} {answers} of ~{of}"),
            _ => format!("{first} {answers}"),
        };
        match by_doing.iter_mut().find(|(d, _)| d == doing) {
            Some((_, who)) => who.push(count),
            None => by_doing.push((doing, vec![count])),
        }
    }
    by_doing
        .iter()
        .map(|(doing, who)| format!("{doing} — answers: {}", who.join(" · ")))
        .collect::<Vec<_>>()
        .join("   ")
}

/// The controls, in one line, shown for the first seconds of a game.
pub const CONTROLS_HINT: &str = "Space pause · 1–6 speed, 0 max · drag or WASD to pan · wheel to \
                                 zoom · click a persona to follow it · Enter to talk to it · F2 director · F5 save, F9 load";

impl Default for HudState {
    fn default() -> Self {
        Self {
            resume_to: SimSpeed::X1,
            usage: UsageReport::default(),
            usage_age: f32::INFINITY,
            fps: 0.0,
            bar_height: 0.0,
            hint_left: 30.0,
            waiting: String::new(),
            thoughts: std::collections::HashMap::new(),
            answers_per_thought: std::collections::HashMap::new(),
        }
    }
}

/// Orders the game's egui panels: the HUD bar first, then the panels laid out below it.
#[derive(SystemSet, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GameUiSystems {
    /// The top bar.
    Hud,
    /// Side panels.
    Panels,
}

/// The HUD bar and speed shortcuts.
#[derive(Debug, Default, Clone, Copy)]
pub struct HudPlugin;

impl Plugin for HudPlugin {
    fn build(&self, app: &mut App) {
        app.init_resource::<HudState>()
            .init_resource::<HudToast>()
            .configure_sets(
                EguiPrimaryContextPass,
                (GameUiSystems::Hud, GameUiSystems::Panels).chain(),
            )
            .add_systems(Update, (speed_shortcuts, refresh_status))
            .add_systems(EguiPrimaryContextPass, draw_hud.in_set(GameUiSystems::Hud));
    }
}

fn speed_shortcuts(
    keys: Res<ButtonInput<KeyCode>>,
    wants: Option<Res<EguiWantsInput>>,
    mut clock: ResMut<SimClock>,
    mut hud: ResMut<HudState>,
) {
    if wants.is_some_and(|w| w.wants_keyboard_input()) {
        return;
    }
    for key in keys.get_just_pressed() {
        if let Some(shortcut) = speed_for_key(*key) {
            let hud = hud.as_mut();
            apply_speed_shortcut(&mut clock, &mut hud.resume_to, shortcut);
        }
    }
}

fn refresh_status(
    time: Res<Time>,
    client: Option<Res<LlmClient>>,
    mut hud: ResMut<HudState>,
    mut toast: ResMut<HudToast>,
    minds: Query<(Entity, &Name, Option<&AwaitingCognition>), With<crate::persona::Persona>>,
) {
    let dt = time.delta_secs();
    if toast.visible() {
        toast.age += dt;
    }
    if dt > 0.0 {
        let fps = 1.0 / dt;
        hud.fps = if hud.fps == 0.0 {
            fps
        } else {
            hud.fps + (fps - hud.fps) * (dt / 0.5).min(1.0)
        };
    }
    hud.usage_age += dt;
    hud.hint_left = (hud.hint_left - dt).max(0.0);
    // The snapshot clones every counter: four times a second is plenty for a display.
    if hud.usage_age >= 0.25
        && let Some(client) = client
    {
        hud.usage = client.usage();
        hud.usage_age = 0.0;
        watch_thoughts(&mut hud, &client, &minds);
    }
}

/// Follows every persona's thought through the client's per-thought counters: what it asks
/// now, how many answers it has had; a finished thought's count becomes the estimate for the
/// next of its kind.
fn watch_thoughts(
    hud: &mut HudState,
    client: &LlmClient,
    minds: &Query<(Entity, &Name, Option<&AwaitingCognition>), With<crate::persona::Persona>>,
) {
    let mut waiting = Vec::new();
    let mut out = std::collections::HashSet::new();
    for (entity, name, away) in minds {
        let Some(away) = away else { continue };
        out.insert(entity);
        let calls = client.thought_calls(name.as_str());
        let watch = match hud.thoughts.get_mut(&entity) {
            Some(watch) if watch.since == away.since => watch,
            _ => {
                // A new thought: its answers count from here.
                if let Some(done) = hud.thoughts.remove(&entity) {
                    finish_thought(hud, done, calls.ended);
                }
                hud.thoughts.entry(entity).or_insert(ThoughtWatch {
                    since: away.since,
                    ended_at_start: calls.ended,
                    doing: None,
                })
            }
        };
        if let Some(kind) = &calls.asking {
            watch.doing = Some(doing_for_kind(kind));
        }
        let answers = calls.ended.saturating_sub(watch.ended_at_start);
        if let Some(doing) = watch.doing
            && away.since.elapsed().as_secs_f32() >= WAITING_AFTER_SECS
        {
            waiting.push((name.as_str().to_owned(), doing, answers));
        }
    }
    let done: Vec<Entity> = hud
        .thoughts
        .keys()
        .filter(|e| !out.contains(e))
        .copied()
        .collect();
    for entity in done {
        if let Some(watch) = hud.thoughts.remove(&entity)
            && let Ok((_, name, _)) = minds.get(entity)
        {
            let ended = client.thought_calls(name.as_str()).ended;
            finish_thought(hud, watch, ended);
        }
    }
    waiting.sort();
    hud.waiting = waiting_line(&waiting, &hud.answers_per_thought);
}

/// A thought ended with `ended` calls of its persona done: the estimate for its kind of work.
fn finish_thought(hud: &mut HudState, watch: ThoughtWatch, ended: u64) {
    let answers = ended.saturating_sub(watch.ended_at_start);
    if let Some(doing) = watch.doing
        && answers > 0
    {
        hud.answers_per_thought.insert(doing, answers);
    }
}

/// A compact token count: 950, 12.3k, 4.5M.
pub(crate) fn compact_count(n: u64) -> String {
    match n {
        0..1_000 => n.to_string(),
        1_000..1_000_000 => format!("{:.1}k", n as f64 / 1e3),
        _ => format!("{:.1}M", n as f64 / 1e6),
    }
}

fn draw_hud(
    mut contexts: EguiContexts,
    mut clock: ResMut<SimClock>,
    mut hud: ResMut<HudState>,
    client: Option<Res<LlmClient>>,
    sim_time: Option<Res<super::game::SimFrameTime>>,
    replay: Option<Res<ReplayPlayback>>,
    (toast, night): (Res<HudToast>, Option<Res<super::NightFastForward>>),
) -> Result {
    let ctx = contexts.ctx_mut()?.clone();
    let mut root = egui::Ui::new(
        ctx.clone(),
        "hud root".into(),
        egui::UiBuilder::new()
            .layer_id(egui::LayerId::background())
            .max_rect(ctx.viewport_rect()),
    );
    let mut clicked: Option<SpeedShortcut> = None;
    let response = egui::Panel::top("hud").show(&mut root, |ui| {
        ui.horizontal_wrapped(|ui| {
            let now = clock.now();
            ui.label(egui::RichText::new(now.format("%a %b %-d %Y").to_string()).strong());
            ui.label(
                egui::RichText::new(now.format("%H:%M").to_string())
                    .strong()
                    .monospace()
                    .size(16.0),
            );
            ui.label(format!("step {}", clock.step()));
            if clock.mode == TimeMode::Lockstep {
                ui.label("lockstep")
                    .on_hover_text("each step waits for every persona's thoughts");
            }
            ui.separator();
            let pause_label = if clock.speed == SimSpeed::Paused {
                "▶"
            } else {
                "⏸"
            };
            if ui
                .button(pause_label)
                .on_hover_text("pause / resume (Space)")
                .clicked()
            {
                clicked = Some(SpeedShortcut::TogglePause);
            }
            if ui.button("⏭").on_hover_text("one step (N)").clicked() {
                clicked = Some(SpeedShortcut::Step);
            }
            for (i, speed) in SimSpeed::ALL.iter().skip(1).enumerate() {
                let key = if *speed == SimSpeed::Max {
                    "0".to_string()
                } else {
                    (i + 1).to_string()
                };
                if ui
                    .selectable_label(clock.speed == *speed, speed.label())
                    .on_hover_text(format!("key {key}"))
                    .clicked()
                {
                    clicked = Some(SpeedShortcut::Set(*speed));
                }
            }
            ui.separator();
            if let Some(replay) = replay.as_deref() {
                let status = replay_status(
                    replay.lines_applied(),
                    replay.total_lines(),
                    replay.finished(),
                );
                let status = egui::RichText::new(status).strong();
                ui.label(if replay.finished() {
                    status.color(egui::Color32::LIGHT_YELLOW)
                } else {
                    status
                })
                .on_hover_text(format!(
                    "{} played back without a model",
                    replay
                        .dir()
                        .join(crate::output::run::MOVEMENT_FILE)
                        .display()
                ));
            } else {
                usage_labels(ui, &hud, client.as_deref());
            }
            ui.separator();
            ui.label(format!("{:.0} fps", hud.fps));
            if let Some(sim) = sim_time.as_deref() {
                ui.label(format!("sim {:.1} ms", sim.mean_ms))
                    .on_hover_text("CPU time of the simulation per frame (smoothed)");
            }
            if night
                .as_deref()
                .is_some_and(super::NightFastForward::active)
            {
                ui.separator();
                ui.label(
                    egui::RichText::new("⏩ everyone is asleep: fast-forwarding")
                        .strong()
                        .color(egui::Color32::LIGHT_BLUE),
                )
                .on_hover_text("the chosen speed comes back when someone wakes (or pick one)");
            }
            if toast.visible() {
                ui.separator();
                let text = egui::RichText::new(&toast.text).strong();
                ui.label(if toast.error {
                    text.color(egui::Color32::LIGHT_RED)
                } else {
                    text.color(egui::Color32::LIGHT_GREEN)
                });
            }
        });
        // A pool of model servers: one line per server (calls, errors, latency, state).
        let servers = client
            .as_deref()
            .map(|c| crate::llm::endpoint_lines(&c.endpoint_usage()))
            .unwrap_or_default();
        if !servers.is_empty() {
            egui::CollapsingHeader::new(format!("model servers ({})", servers.len()))
                .id_salt("model servers")
                .show(ui, |ui| {
                    for line in &servers {
                        ui.label(egui::RichText::new(line).small().monospace());
                    }
                });
        }
        if !hud.waiting.is_empty() {
            ui.label(egui::RichText::new(format!("💭 {}", hud.waiting)).small())
                .on_hover_text(
                    "what the personas thinking now wait for: answers of the model so far",
                );
        }
        if hud.hint_left > 0.0 {
            ui.label(
                egui::RichText::new(CONTROLS_HINT)
                    .small()
                    .color(egui::Color32::LIGHT_GRAY),
            );
        }
    });
    hud.bar_height = response.response.rect.height();
    if let Some(shortcut) = clicked {
        let hud = hud.as_mut();
        apply_speed_shortcut(&mut clock, &mut hud.resume_to, shortcut);
    }
    Ok(())
}

/// The model's status: backend, calls in flight, calls, failures, tokens and cache hits.
fn usage_labels(ui: &mut egui::Ui, hud: &HudState, client: Option<&LlmClient>) {
    let usage = &hud.usage.totals;
    if let Some(client) = client {
        let backend = client.backend_name();
        let name = if backend == "scripted" {
            egui::RichText::new("scripted (no model)").color(egui::Color32::LIGHT_YELLOW)
        } else {
            match client.device() {
                Some(device) => {
                    egui::RichText::new(format!("{backend} · {} · {device}", client.model()))
                }
                None => egui::RichText::new(format!("{backend} · {}", client.model())),
            }
        };
        // The warm-up's pick, when it made one: which cached model, and why.
        let about = match client.model_pick() {
            Some(pick) => format!(
                "LLM backend, model and where it runs (picked: {})",
                pick.reason
            ),
            None => "LLM backend, model and where it runs".to_owned(),
        };
        ui.label(name).on_hover_text(about);
        ui.label(format!(
            "in flight {}/{}",
            client.in_flight(),
            client.concurrency()
        ));
    }
    ui.label(format!("calls {}", usage.calls));
    let failed = egui::RichText::new(format!("failed {}", usage.errors));
    ui.label(if usage.errors > 0 {
        failed.color(egui::Color32::LIGHT_RED)
    } else {
        failed
    })
    .on_hover_text(format!(
        "errors {}, retries {}, fail-safes {}",
        usage.errors, usage.retries, usage.fail_safes
    ));
    ui.label(format!(
        "tokens {}",
        compact_count(usage.prompt_tokens + usage.completion_tokens)
    ))
    .on_hover_text(format!(
        "prompt {} · completion {}",
        usage.prompt_tokens, usage.completion_tokens
    ));
    ui.label(format!("cache hits {}", usage.cache_hits));
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_waiting_line_says_what_each_persona_waits_for_and_how_far_it_is() {
        use super::{doing_for_kind, waiting_line};
        assert_eq!(doing_for_kind("daily_plan"), "planning the day");
        assert_eq!(
            doing_for_kind("revise_identity_currently"),
            "planning the day"
        );
        assert_eq!(doing_for_kind("action_arena"), "choosing where to go");
        assert_eq!(doing_for_kind("event_poignancy"), "taking in what happened");
        assert_eq!(doing_for_kind("group_focus"), "in a group conversation");
        assert_eq!(doing_for_kind("something_new"), "thinking");
        let mut estimates = std::collections::HashMap::new();
        let waiting = vec![
            ("Ada Lin".to_owned(), "planning the day", 7),
            ("Bo Reyes".to_owned(), "planning the day", 3),
            ("Cy Moss".to_owned(), "choosing where to go", 1),
        ];
        assert_eq!(
            waiting_line(&waiting, &estimates),
            "planning the day — answers: Ada 7 · Bo 3   choosing where to go — answers: Cy 1"
        );
        // Once someone's plan took 18 answers, the others' count against it.
        estimates.insert("planning the day", 18);
        assert_eq!(
            waiting_line(&waiting[..2], &estimates),
            "planning the day — answers: Ada 7 of ~18 · Bo 3 of ~18"
        );
        assert_eq!(waiting_line(&[], &estimates), "");
    }

    use super::*;

    #[test]
    fn keys_map_to_speeds() {
        assert_eq!(
            speed_for_key(KeyCode::Digit1),
            Some(SpeedShortcut::Set(SimSpeed::X1))
        );
        assert_eq!(
            speed_for_key(KeyCode::Digit6),
            Some(SpeedShortcut::Set(SimSpeed::X32))
        );
        assert_eq!(
            speed_for_key(KeyCode::Digit0),
            Some(SpeedShortcut::Set(SimSpeed::Max))
        );
        assert_eq!(
            speed_for_key(KeyCode::Space),
            Some(SpeedShortcut::TogglePause)
        );
        assert_eq!(speed_for_key(KeyCode::KeyN), Some(SpeedShortcut::Step));
        assert_eq!(speed_for_key(KeyCode::KeyW), None, "W pans the camera");
    }

    #[test]
    fn pause_resumes_the_previous_speed() {
        let mut clock = SimClock::default().with_speed(SimSpeed::X8);
        let mut resume = SimSpeed::X1;
        apply_speed_shortcut(&mut clock, &mut resume, SpeedShortcut::TogglePause);
        assert_eq!(clock.speed, SimSpeed::Paused);
        assert_eq!(resume, SimSpeed::X8);
        apply_speed_shortcut(&mut clock, &mut resume, SpeedShortcut::TogglePause);
        assert_eq!(clock.speed, SimSpeed::X8);
        // Slowing down into pause also remembers where it came from.
        clock.speed = SimSpeed::X1;
        apply_speed_shortcut(&mut clock, &mut resume, SpeedShortcut::Slower);
        assert_eq!(clock.speed, SimSpeed::Paused);
        assert_eq!(resume, SimSpeed::X1);
        apply_speed_shortcut(&mut clock, &mut resume, SpeedShortcut::Faster);
        assert_eq!(clock.speed, SimSpeed::X1);
    }

    #[test]
    fn toasts_fade_and_errors_stay_longer() {
        let mut toast = HudToast::default();
        assert!(!toast.visible(), "nothing to show yet");
        toast.show("saved to /s at step 3", false);
        assert!(toast.visible());
        toast.age = TOAST_SECS;
        assert!(!toast.visible());
        toast.show("load failed: /s/meta.json: missing", true);
        toast.age = TOAST_SECS + 1.0;
        assert!(toast.visible(), "errors stay up longer");
        toast.age = 2.0 * TOAST_SECS;
        assert!(!toast.visible());
    }

    #[test]
    fn replay_progress_and_its_end() {
        assert_eq!(replay_status(1, 4500, false), "replay: line 1 of 4500");
        assert_eq!(replay_status(4500, 4500, true), "replay finished");
    }

    #[test]
    fn compact_counts() {
        assert_eq!(compact_count(950), "950");
        assert_eq!(compact_count(12_345), "12.3k");
        assert_eq!(compact_count(4_500_000), "4.5M");
    }
}
