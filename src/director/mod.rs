//! The director (SPEC §10, seed 001): a player or a researcher steers the town with an
//! instruction — "have Ada throw a party at the bakery tomorrow at five and invite the people
//! she meets" — and the director turns it into a plan of skills, runs it, checks each step,
//! and reviews what the town did.
//!
//! ## The story of a directive
//!
//! 1. **Asked.** Game code (or the game's directive box) writes
//!    [`DirectorCommand::directive`]. An empty directive, one over
//!    [`DirectorSettings::max_directive_chars`] or one sent while another runs is refused at
//!    once with [`DirectiveRejected`]; nothing reaches a model.
//! 2. **Planning.** The intent parser reads it (`director_intent`: type, characters, places,
//!    times, plot elements, constraints, complexity — [`Intent`]); the task planner writes the
//!    steps (`director_plan`: skill, args, `depends_on`, an optional condition, estimated
//!    tokens) and the outcome checks. The plan is untrusted: [`PlanChecker`] refuses unknown or
//!    disallowed skills, arguments against the skill's schema, personas and places the town
//!    does not have and bad times; a refused plan goes back to the planner once per allowed
//!    replan with the reason, then fails with it ([`DirectorFailed`]).
//! 3. **Confirmation** by [`ConfirmationPolicy`]: `none` runs at once, `before_execute` waits
//!    for [`DirectorCommand::Confirm`] once, `per_step` before every step.
//! 4. **Executing.** Before the first step the town is captured ([`TownSnapshot`]). Each step
//!    runs its skill ([`skills`]) through the tool registry — allow-list and schema checked
//!    again at the moment it runs — and finishes at once or when what it started is over (a
//!    whisper stored, an interview answered, a game time reached). A step whose condition does
//!    not hold, or whose dependency failed, is skipped.
//! 5. **Step complete.** The validator (`director_validate`) decides: continue, replan the
//!    remaining steps given the results and the reason (`director_replan`), or ask the user
//!    ([`DirectorAsks`], answered with [`DirectorCommand::Answer`]).
//! 6. **Reviewing.** When no step is left, the reviewer waits for the checks' windows to close
//!    (who stood in an arena in a window is measured every step, [`review`]) and writes the
//!    [`Review`] (`director_review` writes the prose around the measured facts).
//!
//! Pause and resume hold the executor where it is (the town goes on). **Cancel rolls the town
//! back** to the snapshot: personas, memories, schedules, map events, the clock. **Saves keep a
//! directive in progress** ([`save`]: state, plan, steps, evidence, the snapshot), so a town
//! loaded from one goes on with it — and a cancel after the load still rolls back. A save
//! without one, loaded into the town while a directive is under way (the game's quick load, a
//! [`LoadRequest`](crate::persist::LoadRequest)), ends it — [`DirectorFailed`] with
//! [`LOADED_MID_DIRECTIVE`] — with nothing rolled back: its snapshot and calls belong to the
//! town the load replaced.
//!
//! States are an enum ([`ExecutorState`]) and transitions a pure function
//! ([`executor::transition`]); every change is a [`DirectorStateChanged`] event. Model calls
//! run off the main thread; while one is in flight the director's entity is
//! [`AwaitingCognition`](crate::clock::AwaitingCognition), so a Lockstep clock waits for it and
//! a run stays deterministic.
//!
//! ## Outcome events
//!
//! Each is an [`Event`] (observers) and a [`Message`]:
//!
//! | event | fires when |
//! | --- | --- |
//! | [`DirectiveRejected`] | a directive was refused before planning |
//! | [`DirectorStateChanged`] | the executor moved (from, to) |
//! | [`DirectivePlanned`] | a plan passed its checks (intent, steps, checks, estimated tokens) |
//! | [`DirectorStepFinished`] | a step was done, failed or skipped (with its result) |
//! | [`DirectorReplanned`] | the remaining steps were rewritten (reason, new steps) |
//! | [`DirectorAsks`] | the validator asks the user a question |
//! | [`DirectorReviewed`] | the review is written |
//! | [`DirectorFailed`] | the directive failed (why) |
//!
//! [`Director`] holds the running job and the last finished ones for a UI to show: the plan as
//! a checklist ([`StepRun::status`]), the question, the review.
//!
//! **Layer** (see `tests/layers.rs`): above [`persist`](crate::persist) (the snapshot) and
//! [`dialogue`](crate::dialogue) (the tool registry, whispers, interviews, the control API).

pub mod executor;
pub mod intent;
pub mod knows;
pub mod plan;
pub mod prompts;
pub mod review;
mod run;
pub mod save;
pub mod scenario;
pub mod skills;
pub mod witness;

pub use executor::{ExecutorInput, ExecutorState, Resume, TransitionError, transition};
pub use intent::{Complexity, Intent, IntentEntities};
pub use knows::{Knower, KnowledgeSource, who_knows};
pub use plan::{Condition, OutcomeCheck, Plan, PlanChecker, PlanError, PlanStep};
pub use review::{CheckResult, Review};
pub use run::LOADED_MID_DIRECTIVE;
pub use skills::{DIRECTOR, DIRECTOR_SKILLS};
pub use witness::{Evidence, SceneEnd, SceneSeen};

pub use crate::persist::TownSnapshot;

use bevy::prelude::*;
use chrono::NaiveDateTime;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::clock::{PollSystems, SimPoll};
use crate::dialogue::{DialogueSystems, ToolAllowList};

/// When the director waits for the user's yes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Reflect, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConfirmationPolicy {
    /// Never: the plan runs at once.
    None,
    /// Once, before the first step.
    #[default]
    BeforeExecute,
    /// Before every step.
    PerStep,
}

impl ConfirmationPolicy {
    /// Reads `none`, `before_execute` or `per_step`.
    pub fn parse(text: &str) -> Option<Self> {
        match text.trim() {
            "none" => Some(Self::None),
            "before_execute" => Some(Self::BeforeExecute),
            "per_step" => Some(Self::PerStep),
            _ => None,
        }
    }
}

/// What the user (or game code) tells the director. Write it with a
/// `MessageWriter<DirectorCommand>`.
#[derive(Message, Debug, Clone, PartialEq, Eq)]
pub enum DirectorCommand {
    /// A new directive.
    Directive {
        /// The instruction, in plain words.
        text: String,
        /// When to ask for confirmation.
        policy: ConfirmationPolicy,
    },
    /// Yes: run the plan (or the next step, under `per_step`).
    Confirm,
    /// Stop and roll the town back to before execution.
    Cancel,
    /// Hold where it is.
    Pause,
    /// Go on.
    Resume,
    /// The answer to [`DirectorAsks`].
    Answer(String),
}

impl DirectorCommand {
    /// A directive.
    pub fn directive(text: impl Into<String>, policy: ConfirmationPolicy) -> Self {
        Self::Directive {
            text: text.into(),
            policy,
        }
    }
}

/// What a step is waiting for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Wait {
    /// A dialogue reply of this persona (a whisper stored, an interview answered).
    Reply(String),
    /// This game time.
    Until(NaiveDateTime),
    /// The scene on this stage closing (an `open_stage` step); its outcome is the result.
    Scene(String),
}

/// Where a step is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum StepStatus {
    /// Not run yet.
    Pending,
    /// Started; waiting for something.
    Waiting(Wait),
    /// Done.
    Done,
    /// Failed (the result says why).
    Failed,
    /// Not run: its condition did not hold or a step it depends on did not run.
    Skipped,
}

impl StepStatus {
    /// Whether the step is over.
    pub(crate) fn is_over(&self) -> bool {
        matches!(self, Self::Done | Self::Failed | Self::Skipped)
    }
}

/// A step of the plan and how it went.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepRun {
    /// The step.
    pub step: PlanStep,
    /// Where it is.
    pub status: StepStatus,
    /// Its result (JSON), or why it failed.
    pub result: Option<Result<Value, String>>,
}

impl StepRun {
    /// A step not run yet.
    pub fn new(step: PlanStep) -> Self {
        Self {
            step,
            status: StepStatus::Pending,
            result: None,
        }
    }

    /// The result as one line of text (for prompts and UIs).
    pub(crate) fn result_text(&self) -> String {
        match &self.result {
            None => String::new(),
            Some(Ok(Value::String(s))) => s.clone(),
            Some(Ok(value)) => value.to_string(),
            Some(Err(error)) => format!("error: {error}"),
        }
    }
}

/// One directive and everything that happened to it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DirectorJob {
    /// The job's number (from 1).
    pub id: u64,
    /// The directive, neutralised.
    pub directive: String,
    /// When to ask for confirmation.
    pub policy: ConfirmationPolicy,
    /// Where the executor is.
    pub state: ExecutorState,
    /// The parsed intent.
    pub intent: Option<Intent>,
    /// The plan's steps and how they went.
    pub steps: Vec<StepRun>,
    /// The outcome checks, measured while the job runs.
    pub checks: Vec<CheckResult>,
    /// Replans so far (including plans the checker refused).
    pub replans: u32,
    /// The validator's open question.
    pub question: Option<String>,
    /// The user's answers.
    pub answers: Vec<String>,
    /// The review, once written.
    pub review: Option<Review>,
    /// Why it failed.
    pub error: Option<String>,
    /// When it was asked (game time).
    pub asked: NaiveDateTime,
    /// Model calls made for it.
    pub model_calls: u32,
    /// The step being run or validated (index into `steps`).
    pub current: Option<usize>,
    /// Why the plan was last sent back to the planner.
    pub replan_reason: Option<String>,
    /// What the town said and played while it ran: the reviewer's evidence, and where an
    /// `open_stage` step finds its scene's outcome.
    #[serde(default)]
    pub evidence: Evidence,
}

impl DirectorJob {
    /// The steps' estimated tokens.
    pub fn estimated_tokens(&self) -> u64 {
        self.steps
            .iter()
            .map(|s| u64::from(s.step.estimated_tokens))
            .sum()
    }
}

/// The director's jobs: the one running, and the last finished ones (kept in saves, see
/// [`save`]).
#[derive(Resource, Debug, Clone, Default, Serialize, Deserialize)]
pub struct Director {
    /// The job not yet finished, if any.
    pub job: Option<DirectorJob>,
    /// Finished jobs, oldest first (at most `Director::HISTORY`).
    pub history: Vec<DirectorJob>,
    next_id: u64,
}

impl Director {
    /// Finished jobs kept.
    pub(crate) const HISTORY: usize = 8;

    /// The running job, else the last finished one.
    pub fn latest(&self) -> Option<&DirectorJob> {
        self.job.as_ref().or_else(|| self.history.last())
    }
}

/// The director's tunables.
#[derive(Resource, Reflect, Debug, Clone, PartialEq)]
#[reflect(Resource, Debug, Default)]
pub struct DirectorSettings {
    /// The skills the director may use ([`DIRECTOR_SKILLS`] and the stage's
    /// [`STAGE_DIRECTOR_SKILLS`](crate::stage::tools::STAGE_DIRECTOR_SKILLS) and the group's
    /// [`GROUP_DIRECTOR_SKILLS`](crate::group::tools::GROUP_DIRECTOR_SKILLS) by default).
    pub allow: ToolAllowList,
    /// Longest directive accepted (characters).
    pub max_directive_chars: usize,
    /// Most replans per directive (refused plans count).
    pub max_replans: u32,
    /// Ask the model after each step (continue / replan / ask the user); off: a failed step
    /// replans and a done one continues, without a call.
    pub validate_with_model: bool,
}

impl Default for DirectorSettings {
    fn default() -> Self {
        Self {
            allow: ToolAllowList::of(
                DIRECTOR_SKILLS
                    .into_iter()
                    .chain(crate::stage::tools::STAGE_DIRECTOR_SKILLS)
                    .chain(crate::group::tools::GROUP_DIRECTOR_SKILLS),
            ),
            max_directive_chars: 4_000,
            max_replans: 3,
            validate_with_model: true,
        }
    }
}

/// A directive was refused before planning.
#[derive(Event, Message, Debug, Clone, PartialEq, Eq)]
pub struct DirectiveRejected {
    /// Why (names the limit, never echoes the text).
    pub reason: String,
}

/// The executor moved.
#[derive(Event, Message, Debug, Clone, Copy, PartialEq, Eq)]
pub struct DirectorStateChanged {
    /// The job.
    pub job: u64,
    /// The game time it moved.
    pub time: chrono::NaiveDateTime,
    /// From.
    pub from: ExecutorState,
    /// To.
    pub to: ExecutorState,
}

/// A plan passed its checks.
#[derive(Event, Message, Debug, Clone, PartialEq)]
pub struct DirectivePlanned {
    /// The job.
    pub job: u64,
    /// The intent.
    pub intent: Intent,
    /// The steps.
    pub steps: Vec<PlanStep>,
    /// The outcome checks.
    pub checks: Vec<OutcomeCheck>,
    /// The steps' estimated tokens.
    pub estimated_tokens: u64,
}

/// A step was done, failed or skipped.
#[derive(Event, Message, Debug, Clone, PartialEq)]
pub struct DirectorStepFinished {
    /// The job.
    pub job: u64,
    /// The step's number.
    pub step: u32,
    /// Its skill.
    pub skill: String,
    /// How it ended.
    pub status: StepStatus,
    /// Its result as text.
    pub result: String,
}

/// The remaining steps were rewritten.
#[derive(Event, Message, Debug, Clone, PartialEq)]
pub struct DirectorReplanned {
    /// The job.
    pub job: u64,
    /// Why.
    pub reason: String,
    /// The new remaining steps.
    pub steps: Vec<PlanStep>,
}

/// The validator asks the user something.
#[derive(Event, Message, Debug, Clone, PartialEq, Eq)]
pub struct DirectorAsks {
    /// The job.
    pub job: u64,
    /// The question.
    pub question: String,
}

/// The review is written.
#[derive(Event, Message, Debug, Clone, PartialEq, Eq)]
pub struct DirectorReviewed {
    /// The job.
    pub job: u64,
    /// The review.
    pub review: Review,
}

/// The directive failed.
#[derive(Event, Message, Debug, Clone, PartialEq, Eq)]
pub struct DirectorFailed {
    /// The job.
    pub job: u64,
    /// Why.
    pub reason: String,
}

/// Whether the director has anything to do this frame: a job under way or a command sent.
fn director_has_work(director: Res<Director>, commands: Res<Messages<DirectorCommand>>) -> bool {
    director.job.is_some() || !commands.is_empty()
}

/// The director: commands, the executor, the skills. Needs the
/// [`DialoguePlugin`](crate::dialogue::DialoguePlugin) (whispers, interviews, the registry).
#[derive(Default)]
pub struct DirectorPlugin;

impl Plugin for DirectorPlugin {
    fn build(&self, app: &mut App) {
        app.init_resource::<Director>()
            .init_resource::<DirectorSettings>()
            .init_resource::<run::DirectorRuntime>()
            .register_type::<DirectorSettings>()
            .add_message::<DirectorCommand>()
            .add_message::<DirectiveRejected>()
            .add_message::<DirectorStateChanged>()
            .add_message::<DirectivePlanned>()
            .add_message::<DirectorStepFinished>()
            .add_message::<DirectorReplanned>()
            .add_message::<DirectorAsks>()
            .add_message::<DirectorReviewed>()
            .add_message::<DirectorFailed>()
            .add_observer(run::hear_reply)
            .add_systems(
                SimPoll,
                run::drive_director
                    // An exclusive system: skipped (no sync point) while nothing is asked or runs.
                    .run_if(director_has_work)
                    .after(PollSystems::LandThoughts)
                    .after(DialogueSystems::Drive)
                    .before(PollSystems::SendOutcomes),
            )
            // A run's record (`smallville run`) holds the executor's moves (SPEC §16).
            .add_systems(
                Last,
                note_state_changes.before(crate::output::record::RecordSystems),
            )
            // What the town said and played this frame, for the job's evidence; read by the
            // director in the next frame's poll, whatever order this frame's systems ran in.
            .add_systems(Last, witness::witness_town)
            .add_plugins(scenario::ScenarioPlugin);
        skills::register_skills(app);
        // A directive in progress is kept in saves (`sections/director.json`).
        app.world_mut()
            .get_resource_or_init::<crate::persist::SaveSections>()
            .add(save::section());
    }
}

/// Notes the executor's moves in the run's record, when there is one (`smallville run`).
fn note_state_changes(
    mut changes: MessageReader<DirectorStateChanged>,
    record: Option<ResMut<crate::output::record::RunRecord>>,
) {
    let Some(mut record) = record else {
        changes.clear();
        return;
    };
    for change in changes.read() {
        record.note(
            change.time,
            crate::output::record::Happened::DirectorState {
                job: change.job,
                from: format!("{:?}", change.from),
                to: format!("{:?}", change.to),
            },
        );
    }
}
