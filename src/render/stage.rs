//! The stage panel (SPEC §9 in the game): the scene playing — its narration log, a card per
//! actor with a health bar, attack, effects and state (hidden actors marked: the panel is the
//! game master's view) — with *Next turn*, *Auto-play* and *Close*. `F3` shows and hides it;
//! the game's `--stage FILE` opens a scene with the panel open and auto-play on. A persona
//! actor's observation and plan are typed in its bubble, like a line of talk.
//!
//! The panel only writes [`StageCommand`]s and reads [`Stages`]; the scene plays in the
//! simulation's schedule like headless. What it shows is built by pure functions
//! ([`actor_card`], [`auto_turn`]) tested without a window.

use bevy::prelude::*;
use bevy_egui::{EguiContexts, EguiPrimaryContextPass, egui};

use super::bubbles::GroupSpeech;
use super::hud::{GameUiSystems, HudState};
use crate::stage::actor::{ATTACK, MAX_HEALTH};
use crate::stage::{Actor, ActorPlanned, StageCommand, Stages};

/// The panel's state.
#[derive(Resource, Debug, Clone, Default, PartialEq, Eq)]
pub struct StagePanel {
    /// Shown.
    pub open: bool,
    /// Play the next turn as soon as one is over.
    pub auto: bool,
}

/// What an actor's card shows.
#[derive(Debug, Clone, PartialEq)]
pub struct ActorCard {
    /// The name, 🙈 before a hidden actor's.
    pub title: String,
    /// `health / max_health`, for the bar.
    pub fraction: f32,
    /// "64 / 100 ❤ · attack 10".
    pub numbers: String,
    /// "position | posture | special".
    pub state: String,
    /// The effects, comma-separated, or empty.
    pub effects: String,
}

/// An actor's card.
pub fn actor_card(actor: &Actor) -> ActorCard {
    let max = actor.attribute(MAX_HEALTH).max(1);
    let health = actor.health().clamp(0, max);
    let hidden = if actor.hidden { "🙈 " } else { "" };
    let special = if actor.special.is_empty() {
        String::new()
    } else {
        format!(" | {}", actor.special)
    };
    ActorCard {
        title: format!("{hidden}{}", actor.name),
        fraction: health as f32 / max as f32,
        numbers: format!(
            "{health} / {max} health · attack {}",
            actor.attribute(ATTACK)
        ),
        state: format!("{} | {}{special}", actor.position, actor.posture),
        effects: actor.effects.join(", "),
    }
}

/// What a persona actor's bubble says of its turn: what it noticed, then what it means to do.
pub fn plan_bubble(plan: &crate::stage::ActorPlan) -> String {
    if plan.observation.is_empty() {
        plan.plan.clone()
    } else {
        format!("👀 {} → {}", plan.observation, plan.plan)
    }
}

/// Whether auto-play should ask for the next turn now: on, the scene still has actors, no
/// turn running and none queued.
pub fn auto_turn(auto: bool, actors: usize, busy: bool) -> bool {
    auto && actors > 0 && !busy
}

/// The stage panel and its `F3` shortcut.
#[derive(Debug, Default, Clone, Copy)]
pub struct StagePanelPlugin;

impl Plugin for StagePanelPlugin {
    fn build(&self, app: &mut App) {
        // Registered here too, so a window without the stages (a replay) still runs.
        app.init_resource::<StagePanel>()
            .add_message::<ActorPlanned>()
            .add_message::<StageCommand>()
            .add_systems(Update, (toggle_panel, auto_play, plans_in_bubbles))
            .add_systems(
                EguiPrimaryContextPass,
                draw_stage_panel.in_set(GameUiSystems::Panels),
            );
    }
}

fn toggle_panel(
    keys: Option<Res<ButtonInput<KeyCode>>>,
    mut panel: ResMut<StagePanel>,
    mut contexts: EguiContexts,
) {
    let typing = contexts
        .ctx_mut()
        .is_ok_and(|ctx| ctx.egui_wants_keyboard_input());
    if !typing && keys.is_some_and(|k| k.just_pressed(KeyCode::F3)) {
        panel.open = !panel.open;
    }
}

/// Auto-play: the next turn of every scene as soon as its last is over.
fn auto_play(
    panel: Res<StagePanel>,
    stages: Option<Res<Stages>>,
    mut commands: Option<MessageWriter<StageCommand>>,
) {
    let (Some(stages), Some(commands)) = (stages, commands.as_mut()) else {
        return;
    };
    for scene in stages.iter() {
        let busy = stages.turn_running(&scene.name) || stages.queued(&scene.name) > 0;
        if auto_turn(panel.auto, scene.actors.len(), busy) {
            commands.write(StageCommand::next_turn(scene.name.clone()));
        }
    }
}

/// A persona actor's plan is typed in its bubble.
fn plans_in_bubbles(mut plans: MessageReader<ActorPlanned>, mut speech: ResMut<GroupSpeech>) {
    for plan in plans.read() {
        if let Some(persona) = plan.persona {
            speech.say(persona, &plan_bubble(&plan.plan));
        }
    }
}

fn draw_stage_panel(
    mut contexts: EguiContexts,
    hud: Res<HudState>,
    mut panel: ResMut<StagePanel>,
    stages: Option<Res<Stages>>,
    mut commands: Option<MessageWriter<StageCommand>>,
) -> Result {
    let (Some(stages), Some(commands)) = (stages, commands.as_mut()) else {
        return Ok(());
    };
    if !panel.open {
        return Ok(());
    }
    let ctx = contexts.ctx_mut()?.clone();
    let mut open = true;
    let mut written = Vec::new();
    egui::Window::new("🎭 Stage")
        .open(&mut open)
        .default_pos([8.0, hud.bar_height + 8.0])
        .default_width(300.0)
        .resizable(true)
        .show(&ctx, |ui| {
            let mut any = false;
            for scene in stages.iter() {
                any = true;
                ui.label(egui::RichText::new(&scene.name).strong());
                ui.label(egui::RichText::new(&scene.environment).small().italics());
                let running = stages.turn_running(&scene.name);
                ui.label(format!(
                    "turn {}{}",
                    scene.turn,
                    if running { " · playing…" } else { "" }
                ));
                for actor in &scene.actors {
                    let card = actor_card(actor);
                    ui.group(|ui| {
                        ui.label(egui::RichText::new(&card.title).strong());
                        ui.add(
                            egui::ProgressBar::new(card.fraction)
                                .text(card.numbers.clone())
                                .fill(health_colour(card.fraction)),
                        );
                        ui.label(egui::RichText::new(&card.state).small());
                        if !card.effects.is_empty() {
                            ui.label(
                                egui::RichText::new(format!("✨ {}", card.effects))
                                    .small()
                                    .color(egui::Color32::from_rgb(235, 190, 110)),
                            );
                        }
                    });
                }
                for (actor, turn) in &scene.fallen {
                    ui.label(
                        egui::RichText::new(format!("✝ {} (fell in turn {turn})", actor.name))
                            .small()
                            .color(egui::Color32::LIGHT_GRAY),
                    );
                }
                ui.separator();
                for line in scene.narration.iter().rev().take(3) {
                    ui.label(egui::RichText::new(line).small());
                }
                ui.horizontal(|ui| {
                    if ui
                        .add_enabled(
                            !running && !scene.actors.is_empty(),
                            egui::Button::new("Next turn"),
                        )
                        .clicked()
                    {
                        written.push(StageCommand::next_turn(scene.name.clone()));
                    }
                    ui.checkbox(&mut panel.auto, "Auto-play");
                    if ui.button("Close").clicked() {
                        written.push(StageCommand::Close {
                            stage: scene.name.clone(),
                        });
                    }
                });
                ui.separator();
            }
            if !any {
                ui.label("No scene is playing. Start one with `--stage FILE`.");
            }
        });
    panel.open = open;
    for command in written {
        commands.write(command);
    }
    Ok(())
}

fn health_colour(fraction: f32) -> egui::Color32 {
    if fraction > 0.6 {
        egui::Color32::from_rgb(90, 170, 90)
    } else if fraction > 0.3 {
        egui::Color32::from_rgb(210, 170, 60)
    } else {
        egui::Color32::from_rgb(200, 70, 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stage::actor::HEALTH;

    #[test]
    fn cards_show_health_state_effects_and_who_is_hidden() {
        let mut shade = Actor::new("Shade", "hooded")
            .at("the corridor")
            .with(HEALTH, 30)
            .with(MAX_HEALTH, 60)
            .hidden();
        shade.effects = vec!["bleeding".into()];
        shade.special = "watching".into();
        let card = actor_card(&shade);
        assert_eq!(card.title, "🙈 Shade");
        assert!((card.fraction - 0.5).abs() < 1e-6);
        assert_eq!(card.numbers, "30 / 60 health · attack 10");
        assert_eq!(card.state, "the corridor | standing | watching");
        assert_eq!(card.effects, "bleeding");
        assert_eq!(actor_card(&Actor::new("Ann", "x")).title, "Ann");
    }

    #[test]
    fn a_bubble_says_what_the_actor_noticed_and_means_to_do() {
        let plan = crate::stage::ActorPlan {
            observation: "A stranger is dripping on my floor.".into(),
            plan: "I ask him to leave.".into(),
        };
        assert_eq!(
            plan_bubble(&plan),
            "👀 A stranger is dripping on my floor. → I ask him to leave."
        );
        let quiet = crate::stage::ActorPlan {
            observation: String::new(),
            plan: "I wait and watch.".into(),
        };
        assert_eq!(plan_bubble(&quiet), "I wait and watch.");
    }

    #[test]
    fn auto_play_asks_only_when_a_turn_can_start() {
        assert!(auto_turn(true, 3, false));
        assert!(!auto_turn(false, 3, false));
        assert!(!auto_turn(true, 0, false), "nobody left standing");
        assert!(!auto_turn(true, 3, true), "a turn is running or queued");
    }
}
