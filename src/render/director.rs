//! The director's panel (SPEC §10 in the game): a box for an instruction, the plan as a
//! checklist with each step's state, the buttons the executor's state allows (confirm, pause,
//! resume, cancel), the validator's question with an answer field, and the review at the end.
//!
//! The panel only writes [`DirectorCommand`]s and reads the [`Director`] resource; the
//! director itself runs in the simulation's schedule like headless. `F2` shows and hides it
//! (the game's `--directive` opens it with an instruction already sent). What it shows is built by pure functions ([`checklist`],
//! [`panel_actions`]) tested without a window.

use bevy::prelude::*;
use bevy_egui::{EguiContexts, EguiPrimaryContextPass, egui};

use super::hud::{GameUiSystems, HudState};
use crate::director::{
    ConfirmationPolicy, Director, DirectorCommand, DirectorJob, ExecutorState, StepStatus, Wait,
};

/// The panel's own state: open or not, the drafts.
#[derive(Resource, Debug, Clone, PartialEq)]
pub struct DirectorPanel {
    /// Shown.
    pub open: bool,
    /// The instruction being written.
    pub draft: String,
    /// When the director should ask before running.
    pub policy: ConfirmationPolicy,
    /// The answer being written to the director's question.
    pub answer: String,
}

impl Default for DirectorPanel {
    fn default() -> Self {
        Self {
            open: false,
            draft: String::new(),
            policy: ConfirmationPolicy::BeforeExecute,
            answer: String::new(),
        }
    }
}

/// The longest instruction the box takes (the director refuses longer ones anyway).
pub const MAX_DIRECTIVE_CHARS: usize = 1_000;

/// One line of the checklist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChecklistLine {
    /// ⬜ pending, ⏳ running or waiting, ✅ done, ❌ failed, ⏭ skipped.
    pub mark: &'static str,
    /// `3. add_schedule_item — persona: Ada, time: 17:00`, and what it is waiting for.
    pub text: String,
    /// Its result or error, shortened (empty while pending).
    pub result: String,
}

/// The plan of `job` as checklist lines.
pub fn checklist(job: &DirectorJob) -> Vec<ChecklistLine> {
    job.steps
        .iter()
        .enumerate()
        .map(|(i, run)| {
            let mark = match &run.status {
                StepStatus::Pending if job.current == Some(i) => "⏳",
                StepStatus::Pending => "⬜",
                StepStatus::Waiting(_) => "⏳",
                StepStatus::Done => "✅",
                StepStatus::Failed => "❌",
                StepStatus::Skipped => "⏭",
            };
            let args = match &run.step.args {
                serde_json::Value::Object(map) => map
                    .iter()
                    .map(|(k, v)| match v {
                        serde_json::Value::String(s) => format!("{k}: {}", shorten(s, 40)),
                        other => format!("{k}: {}", shorten(&other.to_string(), 40)),
                    })
                    .collect::<Vec<_>>()
                    .join(", "),
                _ => String::new(),
            };
            let waiting = match &run.status {
                StepStatus::Waiting(Wait::Reply(who)) => format!(" (waiting for {who})"),
                StepStatus::Waiting(Wait::Until(at)) => {
                    format!(" (waiting until {})", at.format("%b %d %H:%M"))
                }
                StepStatus::Waiting(Wait::Scene(stage)) => {
                    format!(" (waiting for the scene on {stage} to end)")
                }
                _ => String::new(),
            };
            ChecklistLine {
                mark,
                text: format!("{}. {} — {args}{waiting}", run.step.id, run.step.skill),
                result: shorten(&run.result_text(), 120),
            }
        })
        .collect()
}

fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_string()
    } else {
        let cut: String = text.chars().take(max.saturating_sub(1)).collect();
        format!("{cut}…")
    }
}

/// A button of the panel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PanelAction {
    /// Send the draft as a new directive.
    Send,
    /// Run the plan (or the next step).
    Confirm,
    /// Hold the executor.
    Pause,
    /// Go on.
    Resume,
    /// Stop and roll the town back.
    Cancel,
    /// Answer the question.
    Answer,
}

impl PanelAction {
    /// The button's label.
    pub fn label(self) -> &'static str {
        match self {
            Self::Send => "Plan it",
            Self::Confirm => "✔ Confirm",
            Self::Pause => "⏸ Pause",
            Self::Resume => "▶ Resume",
            Self::Cancel => "✖ Cancel (roll back)",
            Self::Answer => "Answer",
        }
    }
}

/// The buttons a job in `state` allows (`None`: no job, or it is over — a new one can start).
pub fn panel_actions(state: Option<ExecutorState>) -> Vec<PanelAction> {
    use ExecutorState as S;
    match state {
        None | Some(S::Idle | S::Completed | S::Failed | S::Cancelled) => vec![PanelAction::Send],
        Some(S::AwaitingConfirmation) => vec![PanelAction::Confirm, PanelAction::Cancel],
        Some(S::AwaitingUserInput) => vec![PanelAction::Answer, PanelAction::Cancel],
        Some(S::Paused(_)) => vec![PanelAction::Resume, PanelAction::Cancel],
        Some(S::Executing | S::StepComplete) => vec![PanelAction::Pause, PanelAction::Cancel],
        Some(S::Planning | S::Reviewing) => vec![PanelAction::Cancel],
    }
}

/// The command a button sends, given the drafts; `None` when there is nothing to send.
pub fn command_for(action: PanelAction, panel: &DirectorPanel) -> Option<DirectorCommand> {
    match action {
        PanelAction::Send => {
            let text = panel.draft.trim();
            (!text.is_empty()).then(|| DirectorCommand::directive(text, panel.policy))
        }
        PanelAction::Confirm => Some(DirectorCommand::Confirm),
        PanelAction::Pause => Some(DirectorCommand::Pause),
        PanelAction::Resume => Some(DirectorCommand::Resume),
        PanelAction::Cancel => Some(DirectorCommand::Cancel),
        PanelAction::Answer => {
            let text = panel.answer.trim();
            (!text.is_empty()).then(|| DirectorCommand::Answer(text.to_string()))
        }
    }
}

/// The director's panel and its `F2` shortcut.
#[derive(Debug, Default, Clone, Copy)]
pub struct DirectorPanelPlugin;

impl Plugin for DirectorPanelPlugin {
    fn build(&self, app: &mut App) {
        app.init_resource::<DirectorPanel>()
            .add_systems(Update, toggle_panel)
            .add_systems(
                EguiPrimaryContextPass,
                draw_director_panel.in_set(GameUiSystems::Panels),
            );
    }
}

fn toggle_panel(
    keys: Option<Res<ButtonInput<KeyCode>>>,
    mut panel: ResMut<DirectorPanel>,
    mut contexts: EguiContexts,
) {
    let typing = contexts
        .ctx_mut()
        .is_ok_and(|ctx| ctx.egui_wants_keyboard_input());
    if !typing && keys.is_some_and(|k| k.just_pressed(KeyCode::F2)) {
        panel.open = !panel.open;
    }
}

fn draw_director_panel(
    mut contexts: EguiContexts,
    hud: Res<HudState>,
    mut panel: ResMut<DirectorPanel>,
    director: Option<Res<Director>>,
    mut commands: Option<MessageWriter<DirectorCommand>>,
) -> Result {
    // A replay has no director: no panel.
    let (Some(director), Some(commands)) = (director, commands.as_mut()) else {
        return Ok(());
    };
    if !panel.open {
        return Ok(());
    }
    let ctx = contexts.ctx_mut()?.clone();
    let job = director.latest().cloned();
    let mut open = true;
    let mut pressed: Option<PanelAction> = None;
    egui::Window::new("🎬 Director")
        .open(&mut open)
        .default_pos([12.0, hud.bar_height + 12.0])
        .default_width(420.0)
        .resizable(true)
        .show(&ctx, |ui| {
            let state = job.as_ref().map(|j| j.state);
            let actions = panel_actions(state);
            if actions.contains(&PanelAction::Send) {
                ui.label("Tell the town what should happen:");
                ui.add(
                    egui::TextEdit::multiline(&mut panel.draft)
                        .hint_text("e.g. Have Ada throw a party at the cafe tomorrow at 5 pm")
                        .char_limit(MAX_DIRECTIVE_CHARS)
                        .desired_rows(2)
                        .desired_width(f32::INFINITY),
                );
                ui.horizontal(|ui| {
                    ui.label("Ask me:");
                    ui.radio_value(&mut panel.policy, ConfirmationPolicy::None, "never");
                    ui.radio_value(
                        &mut panel.policy,
                        ConfirmationPolicy::BeforeExecute,
                        "before it runs",
                    );
                    ui.radio_value(
                        &mut panel.policy,
                        ConfirmationPolicy::PerStep,
                        "before every step",
                    );
                });
            }
            if let Some(job) = &job {
                ui.separator();
                ui.label(egui::RichText::new(shorten(&job.directive, 200)).italics());
                ui.label(format!(
                    "{:?} · {} model call(s) · {} replan(s)",
                    job.state, job.model_calls, job.replans
                ));
                for line in checklist(job) {
                    ui.label(format!("{} {}", line.mark, line.text));
                    if !line.result.is_empty() {
                        ui.label(
                            egui::RichText::new(format!("     {}", line.result))
                                .small()
                                .color(egui::Color32::LIGHT_GRAY),
                        );
                    }
                }
                if let Some(question) = &job.question
                    && job.state == ExecutorState::AwaitingUserInput
                {
                    ui.label(
                        egui::RichText::new(format!("❓ {question}"))
                            .color(egui::Color32::from_rgb(235, 190, 110)),
                    );
                    ui.add(
                        egui::TextEdit::singleline(&mut panel.answer)
                            .char_limit(MAX_DIRECTIVE_CHARS)
                            .desired_width(f32::INFINITY),
                    );
                }
                if let Some(review) = &job.review {
                    ui.separator();
                    ui.label(egui::RichText::new("Review").strong());
                    ui.label(&review.summary);
                    for check in &review.checks {
                        ui.label(egui::RichText::new(check.line()).small());
                    }
                }
                if let Some(error) = &job.error {
                    ui.label(
                        egui::RichText::new(format!("failed: {error}"))
                            .color(egui::Color32::LIGHT_RED),
                    );
                }
            }
            ui.horizontal(|ui| {
                for action in actions {
                    if ui.button(action.label()).clicked() {
                        pressed = Some(action);
                    }
                }
            });
        });
    panel.open = open;
    if let Some(action) = pressed
        && let Some(command) = command_for(action, &panel)
    {
        commands.write(command);
        match action {
            PanelAction::Send => panel.draft.clear(),
            PanelAction::Answer => panel.answer.clear(),
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::SimClock;
    use crate::director::{PlanStep, StepRun};
    use serde_json::json;

    fn job(statuses: Vec<StepStatus>) -> DirectorJob {
        DirectorJob {
            id: 1,
            directive: "d".into(),
            policy: ConfirmationPolicy::BeforeExecute,
            state: ExecutorState::Executing,
            intent: None,
            steps: statuses
                .into_iter()
                .enumerate()
                .map(|(i, status)| StepRun {
                    status,
                    ..StepRun::new(PlanStep {
                        id: i as u32 + 1,
                        skill: "whisper".into(),
                        args: json!({"persona": "Ada", "text": "x".repeat(100)}),
                        depends_on: vec![],
                        condition: None,
                        estimated_tokens: 10,
                    })
                })
                .collect(),
            checks: vec![],
            replans: 0,
            question: None,
            answers: vec![],
            review: None,
            error: None,
            asked: SimClock::default_start(),
            model_calls: 2,
            current: None,
            replan_reason: None,
            evidence: Default::default(),
        }
    }

    #[test]
    fn each_step_shows_its_state_and_short_arguments() {
        let lines = checklist(&job(vec![
            StepStatus::Done,
            StepStatus::Waiting(Wait::Reply("Ada Moss".into())),
            StepStatus::Failed,
            StepStatus::Skipped,
            StepStatus::Pending,
        ]));
        let marks: Vec<&str> = lines.iter().map(|l| l.mark).collect();
        assert_eq!(marks, vec!["✅", "⏳", "❌", "⏭", "⬜"]);
        assert!(
            lines[1]
                .text
                .starts_with("2. whisper — persona: Ada, text: xxx")
        );
        assert!(lines[1].text.ends_with("… (waiting for Ada Moss)"));
        assert!(lines[0].text.chars().count() < 100, "arguments are cut");
    }

    #[test]
    fn the_buttons_follow_the_executor_state() {
        use ExecutorState as S;
        assert_eq!(panel_actions(None), vec![PanelAction::Send]);
        assert_eq!(panel_actions(Some(S::Completed)), vec![PanelAction::Send]);
        assert_eq!(
            panel_actions(Some(S::AwaitingConfirmation)),
            vec![PanelAction::Confirm, PanelAction::Cancel]
        );
        assert_eq!(
            panel_actions(Some(S::Executing)),
            vec![PanelAction::Pause, PanelAction::Cancel]
        );
        assert!(panel_actions(Some(S::AwaitingUserInput)).contains(&PanelAction::Answer));
        // Blank drafts send nothing; a draft goes with the chosen policy.
        let mut panel = DirectorPanel::default();
        assert_eq!(command_for(PanelAction::Send, &panel), None);
        assert_eq!(command_for(PanelAction::Answer, &panel), None);
        panel.draft = "  have Ada sing  ".into();
        panel.policy = ConfirmationPolicy::PerStep;
        assert_eq!(
            command_for(PanelAction::Send, &panel),
            Some(DirectorCommand::directive(
                "have Ada sing",
                ConfirmationPolicy::PerStep
            ))
        );
        assert_eq!(
            command_for(PanelAction::Cancel, &panel),
            Some(DirectorCommand::Cancel)
        );
    }
}
