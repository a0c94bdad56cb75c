//! Playing a movement log back with no model at all: `smallville replay DIR` (SPEC §11).
//!
//! The log holds, per step, only what changed of each persona — tile, emoji, `"act @ address"`
//! and chat ([`crate::output::movement`]). A [`ReplayPlayback`] holds the validated lines (see
//! [`load_replay`](super::replay::load_replay)) and the [`ReplayPlugin`] plays them on the
//! [`SimClock`]:
//!
//! - **at startup** the first line is applied: one display-only persona is spawned per name — a
//!   [`Persona`] marked [`ReplayActor`], with the [`Body`] and [`ActionView`] the renderer reads
//!   and an empty [`Mind`](crate::persona::Mind) (the log records no minds, and no cognition
//!   plugin runs) — and the clock is set just after that line's step;
//! - **every sim step** the clock's driver runs applies the next line: each actor's
//!   `previous_tile` becomes its tile, then the line's changes are written (`actor_view`);
//!   a persona first seen in that line is spawned;
//! - **at the end** the clock's `stop_at_step` (the step after the last line) makes the driver
//!   pause, so the last frame holds and [`ReplayPlayback::finished`] says so;
//! - **the record's bubbles**: at startup the run folder's `record.jsonl` is read once into
//!   [`ReplayBubbles`] (unless one was inserted; a missing or bad record is a warning and no
//!   bubbles), and every frame each actor carries the [`RecordedBubble`] up at the line shown —
//!   its group line, talk turn or stage narration, for a few seconds of replay time (see
//!   [`replay_bubbles`](super::replay_bubbles)).
//!
//! The clock keeps the game's convention: at clock step `s` the town shows what step `s − 1`
//! left behind — the log's line for step `s − 1` — and the speeds mean what they mean in the
//! game (1× runs [`AgentSettings::steps_per_second_at_1x`](crate::settings::AgentSettings)
//! steps per real second; see [`replay_speed`]).
//!
//! Add [`ClockPlugin`](crate::clock::ClockPlugin) and this plugin and insert a
//! [`ReplayPlayback`]; nothing else of the simulation is needed, and the window adds its
//! render plugins on top (the tests run it under `MinimalPlugins`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use bevy::prelude::*;
use chrono::{NaiveDateTime, TimeDelta};

use super::replay_bubbles::{RecordedBubble, ReplayBubbles, bubble_hold_steps};
use crate::clock::{AgentSystems, SimClock, SimSpeed, SimStep};
use crate::output::run::MOVEMENT_FILE;
use crate::output::{MovementLine, MovementLogData, MovementReplay, PersonaFrame};
use crate::persist::PersistError;
use crate::persona::{ActionView, Body, Persona};
use crate::settings::AgentSettings;
use crate::world::ActionAddress;

/// The step length assumed when neither the log (one line) nor a save says otherwise.
pub(crate) const DEFAULT_SEC_PER_STEP: u32 = 10;

/// Marks a persona spawned by the [`ReplayPlugin`]: it only shows what the log recorded and
/// has no mind (the inspector says so instead of showing an empty one).
#[derive(Component, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReplayActor;

/// The speed of a `--speed N` replay: `N` × the game's 1× (1, 2, 4, 8, 16 or 32).
pub fn replay_speed(multiplier: u32) -> Result<SimSpeed, String> {
    SimSpeed::ALL
        .into_iter()
        .find(|speed| speed.multiplier() == Some(f64::from(multiplier)))
        .ok_or_else(|| format!("replay speed must be 1, 2, 4, 8, 16 or 32, got {multiplier}"))
}

/// Splits a log's `"act @ address"` into the action and its address (the inverse of
/// [`describe`](crate::output::movement::describe)); text without `" @ "` is all action.
pub(crate) fn split_description(text: &str) -> (String, String) {
    match text.rsplit_once(" @ ") {
        Some((act, address)) => (act.to_owned(), address.to_owned()),
        None => (text.to_owned(), String::new()),
    }
}

/// What the renderer should show of `name` in `frame`. The log does not record the chat
/// partner; it is the first other speaker of the chat (or the first speaker, for a chat of one).
pub(crate) fn actor_view(name: &str, frame: &PersonaFrame) -> ActionView {
    let (description, address) = split_description(&frame.description);
    // A log written elsewhere may hold an address this crate cannot read: keep it in view.
    let (description, address) = match ActionAddress::parse(&address) {
        Ok(address) => (description, Some(address)),
        Err(_) if address.is_empty() => (description, None),
        Err(_) => (frame.description.clone(), None),
    };
    let chat = frame.chat.clone().unwrap_or_default();
    let chatting_with = frame.chat.as_ref().and_then(|lines| {
        lines
            .iter()
            .find(|(speaker, _)| speaker != name)
            .or_else(|| lines.first())
            .map(|(speaker, _)| speaker.clone())
    });
    ActionView {
        address,
        description,
        emoji: frame.emoji.clone(),
        chatting_with,
        chat,
        ..Default::default()
    }
}

/// The game seconds between two lines of the log, when it has two and they are a whole
/// positive number of seconds apart that fits a step length.
fn step_length_of(lines: &[MovementLine]) -> Option<u32> {
    let [a, b, ..] = lines else {
        return None;
    };
    let secs = (b.time - a.time).num_seconds();
    let steps = b.step.checked_sub(a.step).filter(|n| *n > 0)?;
    u32::try_from(secs / i64::try_from(steps).ok()?)
        .ok()
        .filter(|s| *s > 0)
}

/// A movement log being played: the lines, the frames they have built so far and the actor of
/// each persona.
#[derive(Resource, Debug, Clone)]
pub struct ReplayPlayback {
    dir: PathBuf,
    lines: Vec<MovementLine>,
    replay: MovementReplay,
    applied: usize,
    sec_per_step: u32,
    start: NaiveDateTime,
    actors: BTreeMap<String, Entity>,
}

impl ReplayPlayback {
    /// Prepares `log` (read from the run folder `dir`) for playing. The step length is the
    /// log's own (the time between its first two lines), else `sec_per_step` (the run's save),
    /// else `DEFAULT_SEC_PER_STEP`. Fails, naming `dir/movement.jsonl`, on an empty log or one
    /// whose lines do not replay.
    pub fn new(
        dir: impl Into<PathBuf>,
        log: MovementLogData,
        sec_per_step: Option<u32>,
    ) -> Result<Self, PersistError> {
        let dir = dir.into();
        let invalid = |message: String| PersistError::Invalid {
            file: dir.join(MOVEMENT_FILE),
            field: String::new(),
            message,
        };
        let Some(first) = log.lines.first() else {
            return Err(invalid("the log is empty: nothing to replay".into()));
        };
        // The lines were validated when read; replaying them once here makes sure of it for
        // logs built by hand, so playing can never meet a bad line.
        let mut check = MovementReplay::new();
        for (index, line) in log.lines.iter().enumerate() {
            check.apply(line).map_err(|(who, field)| {
                invalid(format!("line {}: {who} lacks {field}", index + 1))
            })?;
        }
        let sec_per_step = step_length_of(&log.lines)
            .or(sec_per_step.filter(|s| *s > 0))
            .unwrap_or(DEFAULT_SEC_PER_STEP);
        let start = i64::try_from(first.step)
            .ok()
            .and_then(|step| step.checked_mul(i64::from(sec_per_step)))
            .and_then(TimeDelta::try_seconds)
            .and_then(|before| first.time.checked_sub_signed(before))
            .ok_or_else(|| {
                invalid(format!(
                    "step {} at {} does not fit a clock of {sec_per_step} s steps",
                    first.step, first.time
                ))
            })?;
        Ok(Self {
            dir,
            lines: log.lines,
            replay: MovementReplay::new(),
            applied: 0,
            sec_per_step,
            start,
            actors: BTreeMap::new(),
        })
    }

    /// The run folder the log came from.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Lines in the log.
    pub fn total_lines(&self) -> usize {
        self.lines.len()
    }

    /// Lines shown so far (the first one is shown at startup).
    pub fn lines_applied(&self) -> usize {
        self.applied
    }

    /// Whether the last line is shown: the replay holds its last frame.
    pub fn finished(&self) -> bool {
        self.applied >= self.lines.len()
    }

    /// The last line shown, if any.
    pub fn current_line(&self) -> Option<&MovementLine> {
        self.applied
            .checked_sub(1)
            .and_then(|index| self.lines.get(index))
    }

    /// Every persona's frame as of the last line shown.
    pub fn frames(&self) -> &BTreeMap<String, PersonaFrame> {
        self.replay.frames()
    }

    /// The actor entity playing `name`, once spawned.
    pub fn actor(&self, name: &str) -> Option<Entity> {
        self.actors.get(name).copied()
    }

    /// Game seconds per step of the replay's clock.
    pub fn sec_per_step(&self) -> u32 {
        self.sec_per_step
    }

    /// The clock just after the first line's step, stopping after the last line's, with the
    /// speed and mode of `current`.
    pub(crate) fn start_clock(&self, current: &SimClock) -> SimClock {
        let first = self.lines.first().map_or(0, |l| l.step);
        let last = self.lines.last().map_or(first, |l| l.step);
        let mut clock = SimClock::resumed(self.start, self.sec_per_step, first.saturating_add(1))
            .with_mode(current.mode)
            .with_speed(current.speed);
        clock.stop_at_step = Some(last.saturating_add(1));
        clock
    }

    /// Applies the next line to the frames; returns its index (`None` at the end).
    fn apply_next(&mut self) -> Option<usize> {
        let index = self.applied;
        let line = self.lines.get(index)?;
        if let Err((who, field)) = self.replay.apply(line) {
            // `new` replayed every line, so this cannot happen; stop rather than show nonsense.
            error!("replay line {}: {who} lacks {field}; stopping", index + 1);
            self.applied = self.lines.len();
            return None;
        }
        self.applied += 1;
        Some(index)
    }
}

/// Plays a [`ReplayPlayback`] on the clock (see the [module docs](self)).
#[derive(Debug, Default, Clone, Copy)]
pub struct ReplayPlugin;

impl Plugin for ReplayPlugin {
    fn build(&self, app: &mut App) {
        // The clock normally comes with `ClockPlugin`; without it the replay still starts.
        app.init_resource::<SimClock>()
            .add_systems(Startup, (start_replay, load_record_bubbles))
            .add_systems(SimStep, play_replay_step.in_set(AgentSystems::Execute))
            // After the frame's steps (which run in `Update` or a schedule it runs).
            .add_systems(PostUpdate, show_recorded_bubbles);
    }
}

/// Reads the run folder's record into [`ReplayBubbles`], once, unless some were inserted.
fn load_record_bubbles(
    mut commands: Commands,
    playback: Option<Res<ReplayPlayback>>,
    inserted: Option<Res<ReplayBubbles>>,
) {
    let Some(playback) = playback else {
        return;
    };
    if inserted.is_some() {
        return;
    }
    let bubbles = match ReplayBubbles::load(playback.dir()) {
        Ok(bubbles) => {
            info!(
                "replay: {} recorded bubbles (group lines, talk turns, stage turns)",
                bubbles.bubbles().len()
            );
            if bubbles.dropped() > 0 {
                warn!(
                    "replay: the record holds {} more bubbles than the {} shown; the latest \
                     ones are left out",
                    bubbles.dropped(),
                    super::replay_bubbles::MAX_REPLAY_BUBBLES
                );
            }
            bubbles
        }
        Err(why) => {
            warn!("replay: no group talk, talk or stage bubbles: {why}");
            ReplayBubbles::default()
        }
    };
    commands.insert_resource(bubbles);
}

/// Keeps every actor's [`RecordedBubble`] to the record's bubbles up at the line shown, held
/// for the steps a few seconds of replay time show at the clock's speed (while paused, those
/// of the speed before).
fn show_recorded_bubbles(
    mut commands: Commands,
    (bubbles, playback): (Option<Res<ReplayBubbles>>, Option<Res<ReplayPlayback>>),
    clock: Res<SimClock>,
    settings: Option<Res<AgentSettings>>,
    mut hold: Local<Option<u64>>,
    actors: Query<(Entity, &Name, Option<&RecordedBubble>), With<ReplayActor>>,
) {
    let (Some(bubbles), Some(playback)) = (bubbles, playback) else {
        return;
    };
    let per_1x = settings.map_or(1.0, |s| s.steps_per_second_at_1x);
    let hold_steps = match bubble_hold_steps(clock.speed, per_1x) {
        Some(steps) => *hold.insert(steps),
        None => hold.unwrap_or_else(|| bubble_hold_steps(SimSpeed::X1, per_1x).unwrap_or(1)),
    };
    let visible = playback
        .current_line()
        .map(|line| bubbles.visible_at(line.step, hold_steps))
        .unwrap_or_default();
    for (entity, name, shown) in &actors {
        let wanted = visible.get(name.as_str()).map(|b| RecordedBubble::from(*b));
        match (wanted, shown) {
            (Some(wanted), Some(shown)) if wanted == *shown => {}
            (Some(wanted), _) => {
                commands.entity(entity).insert(wanted);
            }
            (None, Some(_)) => {
                commands.entity(entity).remove::<RecordedBubble>();
            }
            (None, None) => {}
        }
    }
}

type Actors<'w, 's> =
    Query<'w, 's, (&'static mut Body, &'static mut ActionView), With<ReplayActor>>;

/// Sets the clock to the log's start and shows the first line.
fn start_replay(
    mut commands: Commands,
    playback: Option<ResMut<ReplayPlayback>>,
    mut clock: ResMut<SimClock>,
    mut actors: Actors,
) {
    let Some(mut playback) = playback else {
        return;
    };
    if playback.applied > 0 {
        return;
    }
    *clock = playback.start_clock(&clock);
    if let Some(index) = playback.apply_next() {
        show_line(&mut commands, &mut playback, index, &mut actors);
    }
}

/// One sim step of the replay: the next line.
fn play_replay_step(
    mut commands: Commands,
    playback: Option<ResMut<ReplayPlayback>>,
    mut actors: Actors,
) {
    let Some(mut playback) = playback else {
        return;
    };
    if let Some(index) = playback.apply_next() {
        show_line(&mut commands, &mut playback, index, &mut actors);
    }
}

/// Writes line `index`'s changes into the actors, spawning the ones it introduces.
fn show_line(
    commands: &mut Commands,
    playback: &mut ReplayPlayback,
    index: usize,
    actors: &mut Actors,
) {
    for (mut body, _) in actors.iter_mut() {
        if body.previous_tile != body.tile {
            body.previous_tile = body.tile;
        }
    }
    let Some(line) = playback.lines.get(index) else {
        return;
    };
    let names: Vec<String> = line.personas.keys().cloned().collect();
    for name in names {
        let Some(frame) = playback.replay.frame(&name) else {
            continue;
        };
        let view = actor_view(&name, frame);
        let tile = frame.tile;
        match playback.actors.get(&name).copied() {
            Some(entity) => {
                let Ok((mut body, mut shown)) = actors.get_mut(entity) else {
                    continue;
                };
                if body.tile != tile {
                    body.tile = tile;
                }
                shown.set_if_neq(view);
            }
            None => {
                let entity = commands
                    .spawn((
                        Persona,
                        ReplayActor,
                        Name::new(name.clone()),
                        Body {
                            tile,
                            previous_tile: tile,
                            ..Default::default()
                        },
                        view,
                    ))
                    .id();
                playback.actors.insert(name, entity);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::PersonaDelta;
    use crate::world::TileCoord;

    fn at(h: u32, m: u32, s: u32) -> NaiveDateTime {
        chrono::NaiveDate::from_ymd_opt(2023, 2, 13)
            .and_then(|d| d.and_hms_opt(h, m, s))
            .expect("valid time")
    }

    fn line(step: u64, time: NaiveDateTime, personas: &[(&str, PersonaDelta)]) -> MovementLine {
        MovementLine {
            step,
            time,
            personas: personas
                .iter()
                .map(|(n, d)| ((*n).to_owned(), d.clone()))
                .collect(),
        }
    }

    fn full(x: i32, emoji: &str, description: &str) -> PersonaDelta {
        PersonaDelta {
            tile: Some(TileCoord::new(x, 4)),
            emoji: Some(emoji.into()),
            description: Some(description.into()),
            chat: Some(None),
        }
    }

    fn log(lines: Vec<MovementLine>) -> MovementLogData {
        MovementLogData {
            lines,
            final_frames: BTreeMap::new(),
        }
    }

    #[test]
    fn speeds_are_the_games() {
        assert_eq!(replay_speed(1), Ok(SimSpeed::X1));
        assert_eq!(replay_speed(8), Ok(SimSpeed::X8));
        assert_eq!(replay_speed(32), Ok(SimSpeed::X32));
        assert!(replay_speed(3).is_err());
        assert!(replay_speed(0).is_err());
        assert!(replay_speed(64).is_err());
    }

    #[test]
    fn descriptions_split_back_into_action_and_address() {
        let (act, address) = split_description("sleeping @ Willowbrook:Reyes house:bedroom:bed");
        assert_eq!(act, "sleeping");
        assert_eq!(address, "Willowbrook:Reyes house:bedroom:bed");
        assert_eq!(split_description(""), (String::new(), String::new()));
        assert_eq!(split_description("idle @ "), ("idle".into(), String::new()));
        assert_eq!(
            split_description("no address"),
            ("no address".into(), String::new())
        );
        // Whatever the split, describing it again gives the log's text back.
        for text in [
            "a @ b @ c",
            " @ w:s",
            "x @ y",
            "idle @ ",
            "w @ <waiting> 1 2",
        ] {
            let (act, address) = split_description(text);
            let address = ActionAddress::parse(&address).ok();
            assert_eq!(
                crate::output::movement::describe(&act, address.as_ref()),
                text
            );
        }
    }

    #[test]
    fn an_actor_shows_its_frame_and_chats_with_the_other_speaker() {
        let frame = PersonaFrame {
            tile: TileCoord::new(3, 4),
            emoji: "☕".into(),
            description: "chatting with Sam @ Willowbrook:Riverside Cafe:cafe".into(),
            chat: Some(vec![
                ("Ada".into(), "Morning!".into()),
                ("Sam".into(), "Hi Ada.".into()),
            ]),
        };
        let view = actor_view("Ada", &frame);
        assert_eq!(view.emoji, "☕");
        assert_eq!(view.description, "chatting with Sam");
        assert_eq!(
            view.address.as_ref().map(|a| a.to_string()).as_deref(),
            Some("Willowbrook:Riverside Cafe:cafe")
        );
        // An address this crate cannot read stays visible in the description.
        let odd = PersonaFrame {
            description: "dancing @ <moon> 3".into(),
            ..frame.clone()
        };
        let odd_view = actor_view("Ada", &odd);
        assert_eq!(odd_view.address, None);
        assert_eq!(odd_view.description, "dancing @ <moon> 3");
        assert_eq!(view.chatting_with.as_deref(), Some("Sam"));
        assert_eq!(view.chat.len(), 2);
        let body = Body {
            tile: frame.tile,
            ..Default::default()
        };
        assert_eq!(PersonaFrame::from_components(&body, &view), frame);
        // Sam's partner is Ada; a chat of one speaker is with that speaker.
        assert_eq!(
            actor_view("Sam", &frame).chatting_with.as_deref(),
            Some("Ada")
        );
        let solo = PersonaFrame {
            chat: Some(vec![("Ada".into(), "Hm.".into())]),
            ..frame.clone()
        };
        assert_eq!(
            actor_view("Ada", &solo).chatting_with.as_deref(),
            Some("Ada")
        );
        let quiet = PersonaFrame {
            chat: None,
            ..frame
        };
        let view = actor_view("Ada", &quiet);
        assert_eq!(view.chatting_with, None);
        assert!(view.chat.is_empty());
    }

    #[test]
    fn the_clock_starts_after_the_first_line_and_stops_after_the_last() {
        // A resumed run: steps 360.. at 10 s, so the clock started at midnight.
        let lines = vec![
            line(
                360,
                at(1, 0, 0),
                &[("Ada", full(1, "😴", "sleeping @ bed"))],
            ),
            line(361, at(1, 0, 10), &[]),
            line(362, at(1, 0, 20), &[]),
        ];
        let playback = ReplayPlayback::new("run", log(lines), Some(60)).expect("valid");
        assert_eq!(playback.sec_per_step(), 10, "the log's own spacing wins");
        let clock = playback.start_clock(&SimClock::default().with_speed(SimSpeed::X4));
        assert_eq!(clock.start(), at(0, 0, 0));
        assert_eq!(clock.step(), 361);
        assert_eq!(clock.now(), at(1, 0, 10));
        assert_eq!(clock.stop_at_step, Some(363));
        assert_eq!(clock.speed, SimSpeed::X4);
        assert!(!clock.finished());
    }

    #[test]
    fn a_one_line_log_takes_the_saves_step_length_or_the_default() {
        let one = || vec![line(2, at(7, 0, 0), &[("Ada", full(1, "🙂", "x @ y"))])];
        let with_save = ReplayPlayback::new("run", log(one()), Some(30)).expect("valid");
        assert_eq!(with_save.sec_per_step(), 30);
        assert_eq!(
            with_save.start_clock(&SimClock::default()).start(),
            at(6, 59, 0)
        );
        let bare = ReplayPlayback::new("run", log(one()), None).expect("valid");
        assert_eq!(bare.sec_per_step(), DEFAULT_SEC_PER_STEP);
        let clock = bare.start_clock(&SimClock::default());
        assert_eq!((clock.step(), clock.stop_at_step), (3, Some(3)));
        assert!(
            clock.finished(),
            "one line: finished as soon as it is shown"
        );
    }

    #[test]
    fn empty_and_incomplete_logs_are_refused_naming_the_file() {
        let err = ReplayPlayback::new("runs/a", log(Vec::new()), None).expect_err("empty");
        let text = err.to_string();
        assert!(text.contains("movement.jsonl"), "{text}");
        assert!(text.contains("empty"), "{text}");
        let partial = PersonaDelta {
            tile: Some(TileCoord::new(0, 0)),
            ..Default::default()
        };
        let lines = vec![
            line(0, at(0, 0, 0), &[("Ada", full(1, "🙂", "x @ y"))]),
            line(1, at(0, 0, 10), &[("Bo", partial)]),
        ];
        let text = ReplayPlayback::new("runs/a", log(lines), None)
            .expect_err("Bo's first entry is partial")
            .to_string();
        assert!(text.contains("line 2: Bo lacks emoji"), "{text}");
    }

    #[test]
    fn lines_apply_in_order_and_the_end_holds() {
        let moved = PersonaDelta {
            tile: Some(TileCoord::new(2, 4)),
            ..Default::default()
        };
        let lines = vec![
            line(0, at(0, 0, 0), &[("Ada", full(1, "😴", "sleeping @ bed"))]),
            line(1, at(0, 0, 10), &[("Ada", moved)]),
        ];
        let mut playback = ReplayPlayback::new("run", log(lines), None).expect("valid");
        assert!(!playback.finished());
        assert_eq!(playback.apply_next(), Some(0));
        assert_eq!(playback.current_line().map(|l| l.step), Some(0));
        assert_eq!(playback.apply_next(), Some(1));
        assert!(playback.finished());
        assert_eq!(playback.apply_next(), None, "the end holds");
        assert_eq!(playback.lines_applied(), 2);
        assert_eq!(
            playback.frames().get("Ada").map(|f| f.tile),
            Some(TileCoord::new(2, 4))
        );
    }
}
