//! Scenarios: a scripted experiment on a town, run headless (`smallville run --scenario FILE`).
//!
//! A scenario file says what to do to the town and when — whisper to a persona, give the
//! director an instruction, place an event on a tile, set what someone is doing — what to ask
//! (interview questions, who-knows queries) and what to measure (who stood at a place in a time
//! window). The Valentine's party of the paper is `assets/scenarios/valentines.json`.
//!
//! ## The story of a scenario run
//!
//! 1. **Loaded and checked** ([`Scenario::load`]): the file is bounded (1 MB, 500 items, 4,000
//!    characters a text), every time parses and every field is known. Then, once the town is
//!    built and before anything is written, every persona and place it names is checked
//!    against the town ([`Scenario::check_town`]): a typo fails the run at once, not at hour 40.
//! 2. **Driven** ([`ScenarioPlugin`]): at the start of each step (before `AgentSystems::First`, where
//!    a Lockstep clock has every mind at home) the injections and probes that are due run, and
//!    every check notes who stands in its arena. Each thing done is a line of
//!    `scenario_log.jsonl` in the run folder, written as it happens, so a run that stops early
//!    keeps what it measured. Interview answers, directive reviews and failures are logged as
//!    they land.
//! 3. **Reported** (`write_scenario_outputs`): `scenario.json` (the scenario, every probe's
//!    answers, the knowledge series and the checks) and a section in `report.html` with the
//!    diffusion chart — how many know of the topic over time — and the attendance.
//!
//! Who knows is read from memories ([`who_knows`]): a persona knows a topic when one of its
//! memories mentions every term of it, so a whisper reaches others only through conversations.
//! Interview answers are kept verbatim beside it; no model is asked to judge them.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};

use bevy::prelude::*;
use chrono::NaiveDateTime;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::knows::{Knower, topic_terms, who_knows};
use super::plan::{OutcomeCheck, parse_game_time, resolve_persona};
use super::review::CheckResult;
use super::skills::{self, BUSY, persona_names};
use super::{ConfirmationPolicy, DirectorCommand, DirectorFailed, DirectorReviewed};
use crate::clock::{AgentSystems, PollSystems, SimClock, SimPoll, SimStep};
use crate::dialogue::tools::{ToolCall, resolve_place};
use crate::dialogue::{DialogueMode, DialogueReplied, DialogueRequest, DialogueSystems};
use crate::files::{ReadError, read_text_at_most};
use crate::output::run::{RunError, RunOptions, RunReport, RunSetup, run};
use crate::persona::Mind;
use crate::world::{AddressLevel, TownMap};

/// The run folder's scenario results.
pub const SCENARIO_FILE: &str = "scenario.json";
/// The run folder's log of what the scenario did and measured, one JSON object a line.
pub const SCENARIO_LOG: &str = "scenario_log.jsonl";

const MAX_FILE_BYTES: u64 = 1 << 20;
const MAX_ITEMS: usize = 500;
const MAX_TEXT: usize = 4000;
/// Who-knows probes sample at most this often (game hours), so a long run stays cheap.
const MIN_EVERY_HOURS: f64 = 0.25;

/// Why a scenario cannot run.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// The file cannot be read.
    #[error("cannot read the scenario {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not a scenario.
    #[error("the scenario {path} is not valid: {reason}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong, naming the field.
        reason: String,
    },
}

/// A scenario as written in its file (times as text).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScenarioFile {
    name: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    town: Option<String>,
    #[serde(default)]
    start: Option<String>,
    #[serde(default)]
    hours: Option<f64>,
    #[serde(default)]
    injections: Vec<InjectionFile>,
    #[serde(default)]
    probes: Vec<ProbeFile>,
    #[serde(default)]
    checks: Vec<CheckFile>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
enum InjectionFile {
    Whisper {
        at: String,
        persona: String,
        text: String,
    },
    Directive {
        at: String,
        text: String,
    },
    TileEvent {
        at: String,
        place: String,
        description: String,
        #[serde(default)]
        subject: Option<String>,
    },
    SetCurrently {
        at: String,
        persona: String,
        text: String,
    },
    Stage {
        at: String,
        scene: crate::stage::SceneFile,
        turns: u32,
    },
}

#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
enum ProbeFile {
    Interview {
        at: String,
        question: String,
        /// Names, or none for everyone.
        #[serde(default)]
        personas: Vec<String>,
    },
    WhoKnows {
        topic: String,
        /// Sample every this many game hours (and at the end).
        #[serde(default)]
        every_hours: Option<f64>,
        /// Or at these times.
        #[serde(default)]
        at: Vec<String>,
    },
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct CheckFile {
    name: String,
    place: String,
    from: String,
    to: String,
    /// Only these personas count (e.g. who was invited); everyone when empty.
    #[serde(default)]
    among: Vec<String>,
}

/// Something done to the town at a game time.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Injection {
    /// The persona's inner voice (a whisper, as in the paper).
    Whisper {
        /// The persona.
        persona: String,
        /// What it hears.
        text: String,
    },
    /// An instruction for the director, run without confirmation.
    Directive {
        /// The instruction.
        text: String,
    },
    /// An event on a tile of a place.
    TileEvent {
        /// The place.
        place: String,
        /// What happens.
        description: String,
        /// Its subject (`something` when empty).
        subject: String,
    },
    /// What the persona is doing now.
    SetCurrently {
        /// The persona.
        persona: String,
        /// Its `currently` text.
        text: String,
    },
    /// A stage scene (SPEC §9) opened, played for `turns` turns and closed.
    Stage {
        /// The scene, as in a scene file (persona actors by name).
        scene: Box<crate::stage::SceneFile>,
        /// Turns to play (1–20).
        turns: u32,
    },
}

/// A question asked of the town.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Probe {
    /// Ask personas a question (an interview: nothing is remembered).
    Interview {
        /// The question.
        question: String,
        /// Who (full names); everyone when empty.
        personas: Vec<String>,
    },
    /// Who knows a topic, read from memories.
    WhoKnows {
        /// The topic.
        topic: String,
    },
}

/// One timed item.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Timed<T> {
    /// When (game time).
    pub at: NaiveDateTime,
    /// What.
    #[serde(flatten)]
    pub what: T,
}

/// A named who-was-where check.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScenarioCheck {
    /// Its name in the report.
    pub name: String,
    /// The place and window.
    pub check: OutcomeCheck,
    /// Only these personas count (everyone when empty).
    pub among: Vec<String>,
}

/// A checked scenario: times resolved, items sorted by time.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Scenario {
    /// Its name.
    pub name: String,
    /// What it is about.
    pub description: String,
    /// The shipped town it is written for (`None`: any).
    pub town: Option<String>,
    /// When the clock starts.
    pub start: NaiveDateTime,
    /// How long it runs by default (game hours).
    pub hours: Option<f64>,
    /// What is done, in time order.
    pub injections: Vec<Timed<Injection>>,
    /// What is asked, in time order (who-knows series expanded to one probe a sample).
    pub probes: Vec<Timed<Probe>>,
    /// What is measured.
    pub checks: Vec<ScenarioCheck>,
}

impl Scenario {
    /// Reads and checks the scenario at `path` (see the module docs for the bounds).
    pub fn load(path: &Path) -> Result<Self, ScenarioError> {
        let invalid = |reason: String| ScenarioError::Invalid {
            path: path.to_owned(),
            reason,
        };
        let io = |source| ScenarioError::Io {
            path: path.to_owned(),
            source,
        };
        let text = read_text_at_most(path, MAX_FILE_BYTES).map_err(|err| match err {
            ReadError::TooLarge { bytes, .. } => invalid(format!(
                "{bytes} bytes; a scenario is at most {MAX_FILE_BYTES}"
            )),
            ReadError::Io(err) => io(err),
        })?;
        Self::parse(&text, SimClock::default_start()).map_err(invalid)
    }

    /// Parses a scenario; times without a date are on `default_start`'s day.
    pub fn parse(text: &str, default_start: NaiveDateTime) -> Result<Self, String> {
        let file: ScenarioFile = serde_json::from_str(text).map_err(|e| e.to_string())?;
        let items = file.injections.len() + file.probes.len() + file.checks.len();
        if items > MAX_ITEMS {
            return Err(format!("{items} items; a scenario has at most {MAX_ITEMS}"));
        }
        let long = |field: &str, s: &str| -> Result<(), String> {
            if s.chars().count() > MAX_TEXT {
                Err(format!("`{field}` is over {MAX_TEXT} characters"))
            } else if s.trim().is_empty() {
                Err(format!("`{field}` is empty"))
            } else {
                Ok(())
            }
        };
        long("name", &file.name)?;
        let start = match &file.start {
            Some(text) => {
                parse_game_time(text, default_start).map_err(|e| format!("start: {e}"))?
            }
            None => default_start,
        };
        let hours = match file.hours {
            Some(h) if !(h > 0.0 && h <= 24.0 * 365.0) => {
                return Err(format!("hours must be in (0, 8760], got {h}"));
            }
            other => other,
        };
        let time = |field: &str, text: &str| -> Result<NaiveDateTime, String> {
            let at = parse_game_time(text, start).map_err(|e| format!("{field}: {e}"))?;
            if at < start {
                return Err(format!(
                    "{field}: {} is before the start ({})",
                    at.format("%Y-%m-%d %H:%M"),
                    start.format("%Y-%m-%d %H:%M")
                ));
            }
            Ok(at)
        };
        let mut injections = Vec::new();
        for (i, injection) in file.injections.into_iter().enumerate() {
            let field = format!("injections[{i}]");
            let (at, what) = match injection {
                InjectionFile::Whisper { at, persona, text } => {
                    long(&format!("{field}.persona"), &persona)?;
                    long(&format!("{field}.text"), &text)?;
                    (at, Injection::Whisper { persona, text })
                }
                InjectionFile::Directive { at, text } => {
                    long(&format!("{field}.text"), &text)?;
                    (at, Injection::Directive { text })
                }
                InjectionFile::TileEvent {
                    at,
                    place,
                    description,
                    subject,
                } => {
                    long(&format!("{field}.place"), &place)?;
                    long(&format!("{field}.description"), &description)?;
                    let subject = subject.unwrap_or_default();
                    if subject.chars().count() > MAX_TEXT {
                        return Err(format!("`{field}.subject` is over {MAX_TEXT} characters"));
                    }
                    (
                        at,
                        Injection::TileEvent {
                            place,
                            description,
                            subject,
                        },
                    )
                }
                InjectionFile::SetCurrently { at, persona, text } => {
                    long(&format!("{field}.persona"), &persona)?;
                    long(&format!("{field}.text"), &text)?;
                    (at, Injection::SetCurrently { persona, text })
                }
                InjectionFile::Stage { at, scene, turns } => {
                    if !(1..=20).contains(&turns) {
                        return Err(format!("`{field}.turns` must be 1–20, got {turns}"));
                    }
                    // Everything but the personas is checked now (they are, against the town,
                    // in `check_town`).
                    let unnamed: Vec<(String, Entity)> = scene
                        .actors
                        .iter()
                        .filter_map(|a| a.persona.clone())
                        .map(|name| (name, Entity::PLACEHOLDER))
                        .collect();
                    crate::stage::file::scene_from_file(scene.clone(), &unnamed)
                        .map_err(|e| format!("`{field}.scene`: {e}"))?;
                    (
                        at,
                        Injection::Stage {
                            scene: Box::new(scene),
                            turns,
                        },
                    )
                }
            };
            let at = time(&format!("{field}.at"), &at)?;
            injections.push(Timed { at, what });
        }
        injections.sort_by_key(|t| t.at);
        let mut probes = Vec::new();
        for (i, probe) in file.probes.into_iter().enumerate() {
            let field = format!("probes[{i}]");
            match probe {
                ProbeFile::Interview {
                    at,
                    question,
                    personas,
                } => {
                    long(&format!("{field}.question"), &question)?;
                    for (j, p) in personas.iter().enumerate() {
                        long(&format!("{field}.personas[{j}]"), p)?;
                    }
                    let at = time(&format!("{field}.at"), &at)?;
                    probes.push(Timed {
                        at,
                        what: Probe::Interview { question, personas },
                    });
                }
                ProbeFile::WhoKnows {
                    topic,
                    every_hours,
                    at,
                } => {
                    long(&format!("{field}.topic"), &topic)?;
                    if topic_terms(&topic).is_empty() {
                        return Err(format!(
                            "{field}.topic: `{topic}` has no word to look for in memories"
                        ));
                    }
                    if at.len() > MAX_ITEMS {
                        return Err(format!("{field}.at: at most {MAX_ITEMS} times"));
                    }
                    for (j, text) in at.iter().enumerate() {
                        let at = time(&format!("{field}.at[{j}]"), text)?;
                        probes.push(Timed {
                            at,
                            what: Probe::WhoKnows {
                                topic: topic.clone(),
                            },
                        });
                    }
                    if let Some(every) = every_hours {
                        if !(MIN_EVERY_HOURS..=24.0 * 365.0).contains(&every) {
                            return Err(format!(
                                "{field}.every_hours must be at least {MIN_EVERY_HOURS}, got {every}"
                            ));
                        }
                        // The series runs to the scenario's hours, or a year at most; a run
                        // that ends sooner simply stops sampling.
                        let span = hours.unwrap_or(24.0 * 365.0);
                        let n = (span / every).floor() as usize;
                        if n > 24 * 365 * 4 {
                            return Err(format!("{field}.every_hours: too many samples"));
                        }
                        for k in 0..=n {
                            let at = start
                                + chrono::Duration::seconds((k as f64 * every * 3600.0) as i64);
                            probes.push(Timed {
                                at,
                                what: Probe::WhoKnows {
                                    topic: topic.clone(),
                                },
                            });
                        }
                    }
                    if at.is_empty() && every_hours.is_none() {
                        return Err(format!(
                            "{field}: a who_knows probe needs `at` times or `every_hours`"
                        ));
                    }
                }
            }
        }
        probes.sort_by_key(|t| t.at);
        let mut checks = Vec::new();
        for (i, check) in file.checks.into_iter().enumerate() {
            let field = format!("checks[{i}]");
            long(&format!("{field}.name"), &check.name)?;
            long(&format!("{field}.place"), &check.place)?;
            let from = time(&format!("{field}.from"), &check.from)?;
            let to = time(&format!("{field}.to"), &check.to)?;
            if to <= from {
                return Err(format!("{field}: `to` must be after `from`"));
            }
            checks.push(ScenarioCheck {
                name: check.name,
                check: OutcomeCheck {
                    place: check.place,
                    from,
                    to,
                },
                among: check.among,
            });
        }
        Ok(Self {
            name: file.name,
            description: file.description,
            town: file.town,
            start,
            hours,
            injections,
            probes,
            checks,
        })
    }

    /// Checks every persona and place the scenario names against the town, resolving names
    /// to their full form. All problems are listed at once.
    pub fn check_town(&mut self, map: &TownMap, personas: &[String]) -> Result<(), String> {
        let mut problems = Vec::new();
        let mut person = |name: &mut String, field: String| match resolve_persona(personas, name) {
            Some(full) => *name = full.to_string(),
            None => problems.push(format!("{field}: nobody called `{name}` lives in town")),
        };
        for (i, t) in self.injections.iter_mut().enumerate() {
            match &mut t.what {
                Injection::Whisper { persona, .. } | Injection::SetCurrently { persona, .. } => {
                    person(persona, format!("injections[{i}].persona"))
                }
                Injection::Stage { scene, .. } => {
                    for (a, actor) in scene.actors.iter_mut().enumerate() {
                        if let Some(name) = actor.persona.as_mut() {
                            person(name, format!("injections[{i}].scene.actors[{a}].persona"));
                        }
                    }
                }
                Injection::Directive { .. } | Injection::TileEvent { .. } => {}
            }
        }
        for t in self.probes.iter_mut() {
            if let Probe::Interview { personas: who, .. } = &mut t.what {
                for p in who.iter_mut() {
                    person(p, "probes.personas".into());
                }
            }
        }
        for (i, c) in self.checks.iter_mut().enumerate() {
            for p in c.among.iter_mut() {
                person(p, format!("checks[{i}].among"));
            }
        }
        for (i, t) in self.injections.iter().enumerate() {
            if let Injection::TileEvent { place, .. } = &t.what
                && resolve_place(map, None, place).is_none()
            {
                problems.push(format!(
                    "injections[{i}].place: no place called `{place}` in town"
                ));
            }
            if let Injection::Stage { scene, .. } = &t.what
                && let Some(arena) = &scene.arena
                && map.address_tiles(arena).is_none()
            {
                problems.push(format!(
                    "injections[{i}].scene.arena: no arena called `{arena}` in town"
                ));
            }
        }
        for (i, c) in self.checks.iter().enumerate() {
            if resolve_place(map, None, &c.check.place).is_none() {
                problems.push(format!(
                    "checks[{i}].place: no place called `{}` in town",
                    c.check.place
                ));
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("; "))
        }
    }
}

/// A line of the scenario log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct LogLine {
    /// Game time.
    pub at: NaiveDateTime,
    /// What happened: `injected`, `injection_failed`, `who_knows`, `interview_asked`,
    /// `answer`, `check`, `directive_reviewed`, `directive_failed`.
    pub what: String,
    /// The details.
    pub data: Value,
}

/// A scenario in progress: what is left to do, what the checks saw.
#[derive(Resource, Debug)]
pub struct ScenarioRun {
    /// The scenario (checked against the town).
    pub scenario: Scenario,
    next_injection: usize,
    next_probe: usize,
    checks: Vec<(String, Vec<String>, CheckResult)>,
    checks_written: Vec<bool>,
    /// Interviews asked, by persona, waiting for their answers.
    asked: Vec<(String, String)>,
    log: Option<std::io::BufWriter<std::fs::File>>,
    log_path: PathBuf,
    /// The last step this ran at (once a step).
    last_step: Option<u64>,
}

impl ScenarioRun {
    /// A run of `scenario` writing its log into the run folder `out` (opened on the first step,
    /// so a run that fails to start leaves nothing).
    pub fn new(scenario: Scenario, map: &TownMap, out: &Path) -> Self {
        let checks = scenario
            .checks
            .iter()
            .map(|c| {
                let arena = resolve_place(map, None, &c.check.place)
                    .map(|a| a.truncated(AddressLevel::Arena).to_string());
                (
                    c.name.clone(),
                    c.among.clone(),
                    CheckResult::new(c.check.clone(), arena),
                )
            })
            .collect::<Vec<_>>();
        Self {
            checks_written: vec![false; checks.len()],
            checks,
            scenario,
            next_injection: 0,
            next_probe: 0,
            asked: Vec::new(),
            log: None,
            log_path: out.join(SCENARIO_LOG),
            last_step: None,
        }
    }

    fn write(&mut self, line: LogLine) {
        if self.log.is_none() {
            match std::fs::File::create(&self.log_path) {
                Ok(file) => self.log = Some(std::io::BufWriter::new(file)),
                Err(err) => {
                    warn!("cannot write {}: {err}", self.log_path.display());
                    return;
                }
            }
        }
        if let (Some(log), Ok(text)) = (self.log.as_mut(), serde_json::to_string(&line)) {
            // Flushed at once: the log is the run's evidence even if the process dies.
            if writeln!(log, "{text}").and_then(|()| log.flush()).is_err() {
                warn!("cannot write {}", self.log_path.display());
            }
        }
    }
}

/// Drives a [`ScenarioRun`] inserted as a resource: injections, probes, checks, the log.
#[derive(Default)]
pub struct ScenarioPlugin;

impl Plugin for ScenarioPlugin {
    fn build(&self, app: &mut App) {
        app.add_systems(
            SimStep,
            // Before the step's own sets (not inside `First`, which is the embedder's hook:
            // an exclusive system there would be ambiguous with every hook system).
            drive_scenario
                .before(AgentSystems::First)
                .run_if(resource_exists::<ScenarioRun>),
        )
        .add_systems(
            SimPoll,
            log_landed
                .after(PollSystems::LandThoughts)
                .after(DialogueSystems::Drive)
                .after(super::run::drive_director)
                .run_if(resource_exists::<ScenarioRun>),
        );
    }
}

/// Once a step: due injections, due probes, who stands where.
fn drive_scenario(world: &mut World) {
    let (step, now, last) = {
        let clock = world.resource::<SimClock>();
        let last = clock
            .stop_at_step
            .is_some_and(|stop| clock.step() + 1 >= stop);
        (clock.step(), clock.now(), last)
    };
    let Some(mut run) = world.remove_resource::<ScenarioRun>() else {
        return;
    };
    if run.last_step != Some(step) {
        run.last_step = Some(step);
        inject(world, &mut run, now);
        probe(world, &mut run, now, last);
        observe(world, &mut run, now, last);
    }
    world.insert_resource(run);
}

fn inject(world: &mut World, run: &mut ScenarioRun, now: NaiveDateTime) {
    while let Some(t) = run.scenario.injections.get(run.next_injection) {
        if t.at > now {
            break;
        }
        let t = t.clone();
        let result = apply(world, &t.what);
        if matches!(&result, Err(e) if e == BUSY) {
            // A mind out thinking: try again next step.
            return;
        }
        run.next_injection += 1;
        let data = serde_json::to_value(&t.what).unwrap_or(Value::Null);
        match result {
            Ok(detail) => run.write(LogLine {
                at: now,
                what: "injected".into(),
                data: json!({"injection": data, "result": detail}),
            }),
            Err(reason) => {
                warn!("scenario injection at {} failed: {reason}", t.at);
                run.write(LogLine {
                    at: now,
                    what: "injection_failed".into(),
                    data: json!({"injection": data, "reason": reason}),
                })
            }
        }
    }
}

fn apply(world: &mut World, injection: &Injection) -> Result<Value, String> {
    let call = |args: Value| ToolCall {
        persona: Entity::PLACEHOLDER,
        speaker: "Scenario".into(),
        args,
    };
    match injection {
        Injection::Whisper { persona, text } => {
            skills::whisper(In(call(json!({"persona": persona, "text": text}))), world)
        }
        Injection::Directive { text } => {
            world.write_message(DirectorCommand::directive(
                text.clone(),
                ConfirmationPolicy::None,
            ));
            Ok(json!({"sent": true}))
        }
        Injection::TileEvent {
            place,
            description,
            subject,
        } => skills::place_tile_event(
            In(call(
                json!({"place": place, "description": description, "subject": subject}),
            )),
            world,
        ),
        Injection::SetCurrently { persona, text } => {
            skills::set_currently(In(call(json!({"persona": persona, "text": text}))), world)
        }
        Injection::Stage { scene, turns } => {
            let actors: Vec<Value> = scene
                .actors
                .iter()
                .map(|a| {
                    let mut actor = json!({"appearance": a.appearance, "hidden": a.hidden,
                                           "attributes": a.attributes});
                    for (key, value) in [
                        ("name", &a.name),
                        ("persona", &a.persona),
                        ("position", &a.position),
                        ("posture", &a.posture),
                        ("special", &a.special),
                    ] {
                        if let Some(value) = value {
                            actor[key] = json!(value);
                        }
                    }
                    actor
                })
                .collect();
            let mut args = json!({"stage": scene.name, "environment": scene.environment,
                                  "actors": actors, "turns": turns});
            if let Some(arena) = &scene.arena {
                args["arena"] = json!(arena);
            }
            crate::stage::tools::open_stage(In(call(args)), world)
        }
    }
}

fn probe(world: &mut World, run: &mut ScenarioRun, now: NaiveDateTime, last: bool) {
    while let Some(t) = run.scenario.probes.get(run.next_probe) {
        if t.at > now {
            break;
        }
        let t = t.clone();
        match &t.what {
            Probe::WhoKnows { topic } => match knowers(world, topic, now) {
                Some((knowers, of)) => run.write(who_knows_line(now, topic, &knowers, of)),
                None => return, // a mind is out: next step
            },
            Probe::Interview { question, personas } => {
                for (entity, name) in persona_names(world) {
                    if personas.is_empty() || personas.contains(&name) {
                        world.write_message(DialogueRequest::interview(entity, question.clone()));
                        run.asked.push((name.clone(), question.clone()));
                        run.write(LogLine {
                            at: now,
                            what: "interview_asked".into(),
                            data: json!({"persona": name, "question": question}),
                        });
                    }
                }
            }
        }
        run.next_probe += 1;
    }
    if last {
        // The end of the run: one more sample of every topic, whatever the series said.
        let topics: BTreeSet<String> = run
            .scenario
            .probes
            .iter()
            .filter_map(|t| match &t.what {
                Probe::WhoKnows { topic } => Some(topic.clone()),
                Probe::Interview { .. } => None,
            })
            .collect();
        for topic in topics {
            if let Some((knowers, of)) = knowers(world, &topic, now) {
                run.write(who_knows_line(now, &topic, &knowers, of));
            }
        }
    }
}

fn who_knows_line(now: NaiveDateTime, topic: &str, knowers: &[Knower], of: usize) -> LogLine {
    LogLine {
        at: now,
        what: "who_knows".into(),
        data: json!({
            "topic": topic,
            "count": knowers.len(),
            "of": of,
            "knows": knowers.iter().map(|k| k.name.clone()).collect::<Vec<_>>(),
            "recall": knowers
                .iter()
                .filter(|k| k.recallable)
                .map(|k| k.name.clone())
                .collect::<Vec<_>>(),
            "evidence": knowers,
        }),
    }
}

/// Who knows `topic` now, of how many; `None` while a mind is out thinking.
fn knowers(world: &mut World, topic: &str, now: NaiveDateTime) -> Option<(Vec<Knower>, usize)> {
    let rows = persona_names(world);
    let mut minds = Vec::with_capacity(rows.len());
    for (entity, name) in &rows {
        let mind = world.get::<Mind>(*entity).and_then(Mind::get)?;
        minds.push((name.as_str(), &mind.associative));
    }
    Some((who_knows(minds, topic, now), rows.len()))
}

fn observe(world: &mut World, run: &mut ScenarioRun, now: NaiveDateTime, last: bool) {
    let Some(positions) = super::run::persona_arenas(world) else {
        return;
    };
    let mut closed = Vec::new();
    for (i, (_, among, check)) in run.checks.iter_mut().enumerate() {
        check.observe(
            now,
            positions
                .iter()
                .filter(|(n, _)| among.is_empty() || among.contains(n))
                .map(|(n, a)| (n.as_str(), a.as_str())),
        );
        if !run.checks_written[i] && (now > check.check.to || last) {
            closed.push(i);
        }
    }
    for i in closed {
        run.checks_written[i] = true;
        let (name, among, check) = &run.checks[i];
        let line = LogLine {
            at: now,
            what: "check".into(),
            data: json!({
                "name": name,
                "place": check.check.place,
                "arena": check.arena,
                "from": check.check.from,
                "to": check.check.to,
                "among": among,
                "present": check.present,
                "count": check.present.len(),
                "complete": now > check.check.to,
            }),
        };
        run.write(line);
    }
}

/// Interview answers and the director's verdicts, logged as they land.
fn log_landed(
    mut replies: MessageReader<DialogueReplied>,
    mut reviewed: MessageReader<DirectorReviewed>,
    mut failed: MessageReader<DirectorFailed>,
    clock: Res<SimClock>,
    mut run: ResMut<ScenarioRun>,
) {
    let now = clock.now();
    for reply in replies.read() {
        if !matches!(reply.mode, DialogueMode::Interview(_)) {
            continue;
        }
        let Some(i) = run.asked.iter().position(|(n, _)| *n == reply.name) else {
            continue;
        };
        let (name, question) = run.asked.remove(i);
        run.write(LogLine {
            at: now,
            what: "answer".into(),
            data: json!({"persona": name, "question": question, "answer": reply.reply}),
        });
    }
    for r in reviewed.read() {
        let data = serde_json::to_value(&r.review).unwrap_or(Value::Null);
        run.write(LogLine {
            at: now,
            what: "directive_reviewed".into(),
            data,
        });
    }
    for f in failed.read() {
        run.write(LogLine {
            at: now,
            what: "directive_failed".into(),
            data: json!({"reason": f.reason}),
        });
    }
}

/// Runs `scenario` headless with `options` (a fresh town: `--from` is refused), then writes
/// `scenario.json` and the report's scenario section — also when the run stopped early, so
/// what it measured is never lost.
pub fn run_scenario(
    mut options: RunOptions,
    scenario: Scenario,
) -> Result<(RunReport, ScenarioResults), RunError> {
    if options.from.is_some() {
        return Err(RunError::Invalid(
            "a scenario starts a fresh town: --from cannot be used with --scenario".into(),
        ));
    }
    options.start = Some(scenario.start);
    let for_setup = scenario.clone();
    let out = options.out.clone();
    // The scenario with its names resolved against the town, for the results.
    let resolved = std::sync::Arc::new(std::sync::Mutex::new(None::<Scenario>));
    let resolved_in_setup = resolved.clone();
    options.setup = Some(RunSetup(std::sync::Arc::new(move |app: &mut App| {
        let mut scenario = for_setup.clone();
        let world = app.world_mut();
        let names: Vec<String> = persona_names(world).into_iter().map(|(_, n)| n).collect();
        let map = world
            .get_resource::<TownMap>()
            .ok_or("the run has no town")?;
        scenario
            .check_town(map, &names)
            .map_err(|e| format!("the scenario does not fit this town: {e}"))?;
        if let Ok(mut slot) = resolved_in_setup.lock() {
            *slot = Some(scenario.clone());
        }
        let run = ScenarioRun::new(scenario, map, &out);
        world.insert_resource(run);
        Ok(())
    })));
    let result = run(&options);
    let scenario = resolved
        .lock()
        .ok()
        .and_then(|mut slot| slot.take())
        .unwrap_or(scenario);
    // Whatever happened, the log on disk becomes the results (nothing when the run never
    // started: then there is no folder to write into).
    let results = if options.out.join(SCENARIO_LOG).exists() || result.is_ok() {
        Some(
            write_scenario_outputs(&scenario, &options.out).map_err(|source| RunError::Io {
                path: options.out.join(SCENARIO_FILE),
                source,
            }),
        )
    } else {
        None
    };
    let report = result?;
    let results =
        results.ok_or_else(|| RunError::Invalid("the scenario wrote nothing".into()))??;
    Ok((report, results))
}

/// One point of a diffusion series.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DiffusionPoint {
    /// When.
    pub at: NaiveDateTime,
    /// How many knew.
    pub count: usize,
    /// Of how many.
    pub of: usize,
    /// Who.
    pub knows: Vec<String>,
    /// Who of them can recall it: a memory retrieval returns mentions it (absent from older
    /// logs: 0).
    pub recall: usize,
}

/// What a scenario run measured, read back from its log: `scenario.json`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScenarioResults {
    /// The scenario as run.
    pub scenario: Scenario,
    /// Per topic, the who-knows series in time order.
    pub diffusion: Vec<(String, Vec<DiffusionPoint>)>,
    /// The final who-knows answer per topic, with each knower's evidence.
    pub final_knowers: Vec<(String, Value)>,
    /// Every interview answer.
    pub answers: Vec<Value>,
    /// Every check, measured.
    pub checks: Vec<Value>,
    /// Injections done and failed.
    pub injections: Vec<Value>,
    /// What the director's reviews and failures said.
    pub director: Vec<Value>,
    /// Log lines that could not be read (a torn last line after a crash).
    pub unreadable_lines: usize,
}

/// The most a scenario log read back may hold (256 MiB).
const MAX_LOG_BYTES: u64 = 256 << 20;

/// Reads the run folder's log back into results (bounded: a line over 1 MB is unreadable).
pub(crate) fn read_results(scenario: &Scenario, out: &Path) -> std::io::Result<ScenarioResults> {
    // The log of the longest scenario is a few megabytes; a damaged one is refused.
    let text = match read_text_at_most(&out.join(SCENARIO_LOG), MAX_LOG_BYTES) {
        Ok(text) => text,
        Err(e) if e.io_kind() == Some(std::io::ErrorKind::NotFound) => String::new(),
        Err(e) => return Err(e.into()),
    };
    let mut results = ScenarioResults {
        scenario: scenario.clone(),
        diffusion: Vec::new(),
        final_knowers: Vec::new(),
        answers: Vec::new(),
        checks: Vec::new(),
        injections: Vec::new(),
        director: Vec::new(),
        unreadable_lines: 0,
    };
    for raw in text.lines().filter(|l| !l.trim().is_empty()) {
        let line: LogLine = match (raw.len() <= 1 << 20)
            .then(|| serde_json::from_str(raw).ok())
            .flatten()
        {
            Some(line) => line,
            None => {
                results.unreadable_lines += 1;
                continue;
            }
        };
        match line.what.as_str() {
            "who_knows" => {
                let topic = line.data["topic"].as_str().unwrap_or_default().to_string();
                let point = DiffusionPoint {
                    at: line.at,
                    count: line.data["count"].as_u64().unwrap_or(0) as usize,
                    of: line.data["of"].as_u64().unwrap_or(0) as usize,
                    knows: line.data["knows"]
                        .as_array()
                        .map(|a| {
                            a.iter()
                                .filter_map(|v| v.as_str().map(str::to_string))
                                .collect()
                        })
                        .unwrap_or_default(),
                    recall: line.data["recall"].as_array().map_or(0, Vec::len),
                };
                match results.diffusion.iter_mut().find(|(t, _)| *t == topic) {
                    Some((_, series)) => series.push(point),
                    None => results.diffusion.push((topic.clone(), vec![point])),
                }
                match results.final_knowers.iter_mut().find(|(t, _)| *t == topic) {
                    Some((_, last)) => *last = line.data,
                    None => results.final_knowers.push((topic, line.data)),
                }
            }
            "answer" => results.answers.push(with_time(line)),
            "check" => results.checks.push(with_time(line)),
            "injected" | "injection_failed" => results.injections.push(with_time(line)),
            "directive_reviewed" | "directive_failed" => results.director.push(with_time(line)),
            _ => {}
        }
    }
    Ok(results)
}

fn with_time(line: LogLine) -> Value {
    let mut data = line.data;
    if let Value::Object(map) = &mut data {
        map.insert(
            "logged_at".into(),
            json!(line.at.format("%Y-%m-%d %H:%M:%S").to_string()),
        );
        map.insert("what".into(), json!(line.what));
    }
    data
}

/// Writes `scenario.json` and adds the scenario's section (diffusion chart, attendance,
/// answers) to the run's `report.html` when there is one. Returns the results.
pub(crate) fn write_scenario_outputs(
    scenario: &Scenario,
    out: &Path,
) -> std::io::Result<ScenarioResults> {
    let results = read_results(scenario, out)?;
    let json = serde_json::to_vec_pretty(&results).map_err(std::io::Error::other)?;
    crate::output::write_atomic(&out.join(SCENARIO_FILE), &json)?;
    let report = out.join(crate::output::report::REPORT_HTML);
    if let Ok(html) = std::fs::read_to_string(&report) {
        let section = report_section(&results);
        let html = match html.rfind("</body>") {
            Some(i) => format!("{}{section}{}", &html[..i], &html[i..]),
            None => format!("{html}{section}"),
        };
        crate::output::write_atomic(&report, html.as_bytes())?;
    }
    Ok(results)
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The report's scenario section: an SVG step chart per topic, the checks, the answers.
fn report_section(results: &ScenarioResults) -> String {
    let mut h = String::new();
    h.push_str(&format!(
        "<h2>Scenario: {}</h2>\n<p>{}</p>\n",
        escape(&results.scenario.name),
        escape(&results.scenario.description)
    ));
    for (topic, series) in &results.diffusion {
        h.push_str(&format!(
            "<h3>Who knows of “{}”</h3>\n{}\n",
            escape(topic),
            diffusion_svg(series)
        ));
        if let Some(last) = series.last() {
            h.push_str(&format!(
                "<p>At the end: {} of {} ({:.0} %): {}</p>\n",
                last.count,
                last.of,
                100.0 * last.count as f64 / last.of.max(1) as f64,
                escape(&last.knows.join(", "))
            ));
        }
    }
    if !results.checks.is_empty() {
        h.push_str("<h3>Attendance</h3>\n<table><tr><th>check</th><th>place</th><th>window</th><th>present</th><th>who</th></tr>\n");
        for c in &results.checks {
            let who: Vec<&str> = c["present"]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            h.push_str(&format!(
                "<tr><td>{}</td><td>{}</td><td>{} – {}</td><td>{}</td><td>{}</td></tr>\n",
                escape(c["name"].as_str().unwrap_or_default()),
                escape(c["place"].as_str().unwrap_or_default()),
                escape(c["from"].as_str().unwrap_or_default()),
                escape(c["to"].as_str().unwrap_or_default()),
                who.len(),
                escape(&who.join(", "))
            ));
        }
        h.push_str("</table>\n");
    }
    if !results.answers.is_empty() {
        h.push_str("<h3>Interview answers</h3>\n<table><tr><th>time</th><th>persona</th><th>question</th><th>answer</th></tr>\n");
        for a in &results.answers {
            h.push_str(&format!(
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
                escape(a["logged_at"].as_str().unwrap_or_default()),
                escape(a["persona"].as_str().unwrap_or_default()),
                escape(a["question"].as_str().unwrap_or_default()),
                escape(a["answer"].as_str().unwrap_or_default())
            ));
        }
        h.push_str("</table>\n");
    }
    h
}

/// A step chart of `count` over time, as inline SVG (no chart library needed).
fn diffusion_svg(series: &[DiffusionPoint]) -> String {
    let (w, hgt, pad) = (640.0, 240.0, 40.0);
    let (Some(first), Some(last)) = (series.first(), series.last()) else {
        return String::new();
    };
    let span = (last.at - first.at).num_seconds().max(1) as f64;
    let top = series.iter().map(|p| p.of).max().unwrap_or(1).max(1) as f64;
    let x = |at: NaiveDateTime| pad + (at - first.at).num_seconds() as f64 / span * (w - 2.0 * pad);
    let y = |n: usize| hgt - pad - n as f64 / top * (hgt - 2.0 * pad);
    let mut points = String::new();
    let mut previous: Option<usize> = None;
    for p in series {
        if let Some(prev) = previous {
            points.push_str(&format!("{:.1},{:.1} ", x(p.at), y(prev)));
        }
        points.push_str(&format!("{:.1},{:.1} ", x(p.at), y(p.count)));
        previous = Some(p.count);
    }
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{hgt}\" role=\"img\">\
<rect width=\"{w}\" height=\"{hgt}\" fill=\"white\"/>\
<line x1=\"{pad}\" y1=\"{b}\" x2=\"{r}\" y2=\"{b}\" stroke=\"black\"/>\
<line x1=\"{pad}\" y1=\"{pad}\" x2=\"{pad}\" y2=\"{b}\" stroke=\"black\"/>\
<text x=\"4\" y=\"{t}\" font-size=\"12\">{top}</text><text x=\"4\" y=\"{b}\" font-size=\"12\">0</text>\
<text x=\"{pad}\" y=\"{lb}\" font-size=\"12\">{from}</text>\
<text x=\"{r}\" y=\"{lb}\" font-size=\"12\" text-anchor=\"end\">{to}</text>\
<polyline fill=\"none\" stroke=\"#c0392b\" stroke-width=\"2\" points=\"{points}\"/></svg>",
        b = hgt - pad,
        r = w - pad,
        t = pad + 4.0,
        lb = hgt - pad + 16.0,
        top = top as usize,
        from = first.at.format("%b %d %H:%M"),
        to = last.at.format("%b %d %H:%M"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start() -> NaiveDateTime {
        SimClock::default_start()
    }

    #[test]
    fn a_scenario_parses_with_its_times_sorted_and_series_expanded() {
        let s = Scenario::parse(
            r#"{"name": "v", "hours": 6,
                "injections": [
                  {"kind": "directive", "at": "2023-02-13 03:00", "text": "go"},
                  {"kind": "whisper", "at": "2023-02-13 01:00", "persona": "Ada", "text": "party"}],
                "probes": [{"kind": "who_knows", "topic": "party", "every_hours": 2}],
                "checks": [{"name": "c", "place": "cafe", "from": "2023-02-13 02:00", "to": "2023-02-13 04:00"}]}"#,
            start(),
        )
        .expect("valid");
        assert_eq!(s.injections.len(), 2);
        assert!(matches!(s.injections[0].what, Injection::Whisper { .. }));
        // 0, 2, 4, 6 hours.
        assert_eq!(s.probes.len(), 4);
        assert_eq!(s.probes[3].at, start() + chrono::Duration::hours(6));
    }

    #[test]
    fn bad_scenarios_name_the_field_at_fault() {
        for (text, wanted) in [
            (r#"{"name": ""}"#, "`name` is empty"),
            (r#"{"name": "x", "bogus": 1}"#, "unknown field"),
            (
                r#"{"name": "x", "injections": [{"kind": "whisper", "at": "yesterday-ish", "persona": "A", "text": "t"}]}"#,
                "injections[0].at",
            ),
            (
                r#"{"name": "x", "injections": [{"kind": "whisper", "at": "2020-01-01 10:00", "persona": "A", "text": "t"}]}"#,
                "before the start",
            ),
            (
                r#"{"name": "x", "probes": [{"kind": "who_knows", "topic": "the"}]}"#,
                "no word",
            ),
            (
                r#"{"name": "x", "probes": [{"kind": "who_knows", "topic": "party", "every_hours": 0.001}]}"#,
                "every_hours",
            ),
            (
                r#"{"name": "x", "checks": [{"name": "c", "place": "p", "from": "2023-02-13 05:00", "to": "2023-02-13 04:00"}]}"#,
                "after `from`",
            ),
            (r#"{"name": "x", "hours": -1}"#, "hours must be"),
            (r#"[1, 2]"#, "invalid type"),
        ] {
            let err = Scenario::parse(text, start()).expect_err(text);
            assert!(err.contains(wanted), "{text}: {err}");
        }
        let huge = format!(
            r#"{{"name": "x", "injections": [{}]}}"#,
            vec![r#"{"kind": "directive", "at": "2023-02-13 05:00", "text": "t"}"#; 501].join(",")
        );
        assert!(
            Scenario::parse(&huge, start())
                .unwrap_err()
                .contains("at most")
        );
    }

    #[test]
    fn the_chart_steps_through_every_sample() {
        let p = |h: i64, count| DiffusionPoint {
            at: start() + chrono::Duration::hours(h),
            count,
            of: 4,
            knows: vec![],
            recall: 0,
        };
        let svg = diffusion_svg(&[p(0, 1), p(1, 1), p(2, 3)]);
        assert!(svg.starts_with("<svg"));
        // Five vertices: each sample and a step before each change after the first.
        let points = svg
            .split("points=\"")
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap();
        assert_eq!(points.split_whitespace().count(), 5);
        assert_eq!(diffusion_svg(&[]), "");
    }
}
