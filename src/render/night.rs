//! Nights pass quickly: while the whole town sleeps and no one is thinking, the window runs the
//! clock at 32× and the HUD says so; the speed the player chose comes back the moment someone
//! wakes (or at once, if the player picks a speed meanwhile — that choice wins until the next
//! night). Headless runs never do this: their clock is theirs to set.

use bevy::prelude::*;

use crate::clock::{AwaitingCognition, SimClock, SimSpeed};
use crate::persona::{ActionView, Persona, is_sleep_text};

/// The speed nights are fast-forwarded at.
pub const NIGHT_SPEED: SimSpeed = SimSpeed::X32;

/// Where the night fast-forward stands.
#[derive(Resource, Debug, Clone, PartialEq, Eq)]
pub struct NightFastForward {
    /// Whether nights are fast-forwarded at all (`--no-fast-forward` turns it off).
    pub enabled: bool,
    /// While fast-forwarding: the speed to restore.
    pub restore: Option<SimSpeed>,
    /// The player picked a speed during this night: leave the clock alone until someone wakes.
    pub declined: bool,
}

impl Default for NightFastForward {
    fn default() -> Self {
        Self {
            enabled: true,
            restore: None,
            declined: false,
        }
    }
}

impl NightFastForward {
    /// Whether the clock is being fast-forwarded now.
    pub(crate) fn active(&self) -> bool {
        self.restore.is_some()
    }

    /// The next state and the speed to set (if any), given whether the town sleeps and the
    /// clock's current speed. Pure: the system below applies it.
    pub fn step(&mut self, town_asleep: bool, speed: SimSpeed) -> Option<SimSpeed> {
        if !self.enabled {
            return self.restore.take();
        }
        match self.restore {
            Some(restore) if !town_asleep => {
                self.restore = None;
                (speed == NIGHT_SPEED).then_some(restore)
            }
            Some(_) if speed != NIGHT_SPEED => {
                // The player chose a speed: theirs wins for the rest of the night.
                self.restore = None;
                self.declined = true;
                None
            }
            Some(_) => None,
            None if !town_asleep => {
                self.declined = false;
                None
            }
            None if self.declined || speed == SimSpeed::Paused || speed == NIGHT_SPEED => None,
            None if matches!(speed, SimSpeed::Max) => None,
            None => {
                self.restore = Some(speed);
                Some(NIGHT_SPEED)
            }
        }
    }
}

/// Adds the night fast-forward to the window.
#[derive(Debug, Default, Clone, Copy)]
pub struct NightFastForwardPlugin;

impl Plugin for NightFastForwardPlugin {
    fn build(&self, app: &mut App) {
        app.init_resource::<NightFastForward>()
            .add_systems(PreUpdate, fast_forward_nights);
    }
}

/// Whether every persona sleeps and no mind is out thinking.
fn fast_forward_nights(
    mut night: ResMut<NightFastForward>,
    mut clock: ResMut<SimClock>,
    personas: Query<(&ActionView, Has<AwaitingCognition>), With<Persona>>,
) {
    let mut any = false;
    let asleep = personas.iter().all(|(view, thinking)| {
        any = true;
        !thinking && is_sleep_text(&view.description)
    }) && any;
    if let Some(speed) = night.step(asleep, clock.speed) {
        clock.speed = speed;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sleeping_town_runs_fast_until_someone_wakes() {
        let mut night = NightFastForward::default();
        assert_eq!(night.step(true, SimSpeed::X1), Some(NIGHT_SPEED));
        assert!(night.active());
        assert_eq!(night.step(true, NIGHT_SPEED), None);
        assert_eq!(night.step(false, NIGHT_SPEED), Some(SimSpeed::X1));
        assert!(!night.active());
        assert_eq!(night.step(false, SimSpeed::X1), None);
    }

    #[test]
    fn the_players_choice_wins_for_the_night() {
        let mut night = NightFastForward::default();
        assert_eq!(night.step(true, SimSpeed::X2), Some(NIGHT_SPEED));
        // The player picks 4× while fast-forwarding: kept, and not overridden again tonight.
        assert_eq!(night.step(true, SimSpeed::X4), None);
        assert!(!night.active());
        assert_eq!(night.step(true, SimSpeed::X4), None);
        // Morning: the next night fast-forwards again.
        assert_eq!(night.step(false, SimSpeed::X4), None);
        assert_eq!(night.step(true, SimSpeed::X4), Some(NIGHT_SPEED));
    }

    #[test]
    fn paused_max_and_disabled_are_left_alone() {
        let mut night = NightFastForward::default();
        assert_eq!(night.step(true, SimSpeed::Paused), None);
        assert_eq!(night.step(true, SimSpeed::Max), None);
        let mut off = NightFastForward {
            enabled: false,
            ..NightFastForward::default()
        };
        assert_eq!(off.step(true, SimSpeed::X1), None);
        // Turned off mid-night: the speed comes back.
        let mut night = NightFastForward::default();
        night.step(true, SimSpeed::X1);
        night.enabled = false;
        assert_eq!(night.step(true, NIGHT_SPEED), Some(SimSpeed::X1));
    }
}
