//! Quick save and quick load in the window: `F5` saves the running town into the save folder,
//! `F9` replaces it by what that folder holds. Both go through the [`PersistPlugin`]'s
//! [`SaveRequest`] / [`LoadRequest`] (so a save waits for thoughts in flight, and a load that
//! fails changes nothing), and each [`PersistOutcome`] shows in the HUD as a short message.
//!
//! After a load the window follows the new personas: sprites, labels, bubbles and inspector
//! snapshots attach to the new entities the way they attach to any new persona, the selection
//! moves to the persona of the same name ([`super::sprites`]), the camera frames the town again,
//! and the clock is put back in [`TimeMode::Realtime`] (a save taken headless records Lockstep,
//! and the window never waits for a model).
//!
//! The folder is `--save-dir DIR`, by default [`default_save_dir`]:
//! `$XDG_DATA_HOME/bevy_generative_agents/saves/quick` (or under `~/.local/share`).

use std::path::{Path, PathBuf};

use bevy::prelude::*;
use bevy_egui::input::EguiWantsInput;

use super::camera::CameraState;
use super::hud::HudToast;
use crate::clock::{SimClock, TimeMode};
use crate::persist::{LoadRequest, PersistOutcome, PersistPlugin, SaveRequest};

/// What a save key does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SaveShortcut {
    /// Save into the quick-save folder (`F5`).
    QuickSave,
    /// Load the quick-save folder (`F9`).
    QuickLoad,
}

/// The save shortcut bound to `key`, if any.
pub fn save_shortcut_for_key(key: KeyCode) -> Option<SaveShortcut> {
    match key {
        KeyCode::F5 => Some(SaveShortcut::QuickSave),
        KeyCode::F9 => Some(SaveShortcut::QuickLoad),
        _ => None,
    }
}

/// The request a shortcut sends for the save folder `dir`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PersistMessage {
    /// Save into `dir`.
    Save(SaveRequest),
    /// Load from `dir`.
    Load(LoadRequest),
}

impl SaveShortcut {
    /// The request for the save folder `dir`.
    pub fn request(self, dir: &Path) -> PersistMessage {
        let dir = dir.to_owned();
        match self {
            SaveShortcut::QuickSave => PersistMessage::Save(SaveRequest { dir }),
            SaveShortcut::QuickLoad => PersistMessage::Load(LoadRequest { dir }),
        }
    }
}

/// The default quick-save folder: `$XDG_DATA_HOME/bevy_generative_agents/saves/quick`, else
/// `$HOME/.local/share/bevy_generative_agents/saves/quick`, else `saves/quick` in the current
/// folder. `lookup` reads an environment variable.
pub fn default_save_dir(lookup: impl Fn(&str) -> Option<String>) -> PathBuf {
    let base = lookup("XDG_DATA_HOME")
        .filter(|v| !v.trim().is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            lookup("HOME")
                .filter(|v| !v.trim().is_empty())
                .map(|home| PathBuf::from(home).join(".local").join("share"))
        });
    match base {
        Some(base) => base
            .join("bevy_generative_agents")
            .join("saves")
            .join("quick"),
        None => PathBuf::from("saves").join("quick"),
    }
}

/// The HUD message for an outcome: the text, and whether it is an error. `asked` is the last
/// shortcut used, to say whether a failure was a save's or a load's.
pub fn outcome_message(outcome: &PersistOutcome, asked: Option<SaveShortcut>) -> (String, bool) {
    match outcome {
        PersistOutcome::Saved { dir, step } => {
            (format!("saved to {} at step {step}", dir.display()), false)
        }
        PersistOutcome::Loaded { dir, step } => {
            (format!("loaded {} at step {step}", dir.display()), false)
        }
        PersistOutcome::Failed { error, .. } => {
            let what = match asked {
                Some(SaveShortcut::QuickSave) => "save failed",
                Some(SaveShortcut::QuickLoad) => "load failed",
                None => "save/load failed",
            };
            (format!("{what}: {error}"), true)
        }
    }
}

/// The quick-save folder and the last shortcut used.
#[derive(Resource, Debug, Clone, PartialEq, Eq)]
pub struct QuickSave {
    /// Where `F5` saves and `F9` loads.
    pub dir: PathBuf,
    /// The last shortcut pressed (names a failure in the HUD).
    pub last: Option<SaveShortcut>,
}

/// `F5` / `F9` quick save and load, with their outcomes in the HUD. Adds the
/// [`PersistPlugin`] when it is missing. The windowed game adds it; a replay does not (there
/// are no minds to save).
#[derive(Debug, Clone)]
pub struct QuickSavePlugin {
    dir: PathBuf,
}

impl QuickSavePlugin {
    /// Quick saves go to `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }
}

impl Plugin for QuickSavePlugin {
    fn build(&self, app: &mut App) {
        if !app.is_plugin_added::<PersistPlugin>() {
            app.add_plugins(PersistPlugin);
        }
        app.insert_resource(QuickSave {
            dir: self.dir.clone(),
            last: None,
        })
        .init_resource::<HudToast>()
        // Outcomes are written in `Last`; reading them before `Update` puts the clock back in
        // Realtime before the next sim step.
        .add_systems(PreUpdate, after_persist_outcomes)
        .add_systems(Update, quick_save_keys);
    }
}

fn quick_save_keys(
    keys: Res<ButtonInput<KeyCode>>,
    wants: Option<Res<EguiWantsInput>>,
    mut quick: ResMut<QuickSave>,
    mut toast: ResMut<HudToast>,
    mut saves: MessageWriter<SaveRequest>,
    mut loads: MessageWriter<LoadRequest>,
) {
    if wants.is_some_and(|w| w.wants_keyboard_input()) {
        return;
    }
    for key in keys.get_just_pressed() {
        let Some(shortcut) = save_shortcut_for_key(*key) else {
            continue;
        };
        quick.last = Some(shortcut);
        match shortcut.request(&quick.dir) {
            PersistMessage::Save(request) => {
                toast.show(format!("saving to {}…", request.dir.display()), false);
                saves.write(request);
            }
            PersistMessage::Load(request) => {
                toast.show(format!("loading {}…", request.dir.display()), false);
                loads.write(request);
            }
        }
    }
}

fn after_persist_outcomes(
    mut outcomes: MessageReader<PersistOutcome>,
    quick: Option<Res<QuickSave>>,
    mut toast: ResMut<HudToast>,
    mut clock: ResMut<SimClock>,
    camera: Option<ResMut<CameraState>>,
) {
    let mut loaded = false;
    for outcome in outcomes.read() {
        let (text, error) = outcome_message(outcome, quick.as_ref().and_then(|q| q.last));
        toast.show(text, error);
        loaded |= matches!(outcome, PersistOutcome::Loaded { .. });
    }
    if loaded {
        if clock.mode != TimeMode::Realtime {
            clock.mode = TimeMode::Realtime;
        }
        if let Some(mut camera) = camera {
            camera.framed = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    #[test]
    fn f5_saves_and_f9_loads_the_quick_save_folder() {
        let dir = Path::new("/saves/quick");
        assert_eq!(
            save_shortcut_for_key(KeyCode::F5).map(|s| s.request(dir)),
            Some(PersistMessage::Save(SaveRequest { dir: dir.into() }))
        );
        assert_eq!(
            save_shortcut_for_key(KeyCode::F9).map(|s| s.request(dir)),
            Some(PersistMessage::Load(LoadRequest { dir: dir.into() }))
        );
        assert_eq!(save_shortcut_for_key(KeyCode::F6), None);
        assert_eq!(
            save_shortcut_for_key(KeyCode::KeyS),
            None,
            "S pans the camera"
        );
        // No save key is also a speed key.
        for key in [KeyCode::F5, KeyCode::F9] {
            assert_eq!(super::super::hud::speed_for_key(key), None);
        }
    }

    #[test]
    fn the_save_folder_follows_xdg() {
        assert_eq!(
            default_save_dir(env(&[("XDG_DATA_HOME", "/x/data"), ("HOME", "/home/a")])),
            PathBuf::from("/x/data/bevy_generative_agents/saves/quick")
        );
        assert_eq!(
            default_save_dir(env(&[("XDG_DATA_HOME", " "), ("HOME", "/home/a")])),
            PathBuf::from("/home/a/.local/share/bevy_generative_agents/saves/quick")
        );
        assert_eq!(default_save_dir(env(&[])), PathBuf::from("saves/quick"));
    }

    #[test]
    fn outcomes_read_as_messages() {
        let dir = PathBuf::from("/s/q");
        assert_eq!(
            outcome_message(
                &PersistOutcome::Saved {
                    dir: dir.clone(),
                    step: 42
                },
                Some(SaveShortcut::QuickSave)
            ),
            ("saved to /s/q at step 42".to_owned(), false)
        );
        assert_eq!(
            outcome_message(
                &PersistOutcome::Loaded {
                    dir: dir.clone(),
                    step: 7
                },
                None
            ),
            ("loaded /s/q at step 7".to_owned(), false)
        );
        let failed = PersistOutcome::Failed {
            dir,
            error: "/s/q/meta.json: missing (not a complete save)".into(),
        };
        assert_eq!(
            outcome_message(&failed, Some(SaveShortcut::QuickLoad)),
            (
                "load failed: /s/q/meta.json: missing (not a complete save)".to_owned(),
                true
            )
        );
        assert!(
            outcome_message(&failed, Some(SaveShortcut::QuickSave))
                .0
                .starts_with("save failed: ")
        );
    }
}
