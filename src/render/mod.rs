//! The desktop game (feature `render`): the town drawn as a tile map, personas walking it with
//! emoji and dialogue bubbles, a HUD with the clock and model status, an inspector, and a camera.
//!
//! Rendering only *reads* the simulation: [`Body`](crate::persona::Body) (tile, previous tile),
//! [`ActionView`](crate::persona::ActionView) (emoji, chat), [`Mind`](crate::persona::Mind)
//! (through a snapshot taken while it is home), [`Diary`](crate::persona::Diary), the
//! [`SimClock`](crate::clock::SimClock) and the [`LlmClient`](crate::llm::LlmClient)'s usage. The
//! only things it writes are the clock's speed and step requests, from the HUD. So the same
//! plugins drive a headless run and the window, and nothing here is needed to simulate.
//!
//! | plugin | what it draws or does |
//! | --- | --- |
//! | [`TownMapRenderPlugin`] | the map's tile layers with `bevy_ecs_tilemap` (adds its `TilemapPlugin`) |
//! | [`PersonaSpritesPlugin`] | a generated sprite per persona, name label, walking between tiles, facing |
//! | [`BubblesPlugin`] | colour emoji of the current action, typewriter dialogue bubbles, 💭 while thinking |
//! | [`GameCameraPlugin`] | pan (drag, WASD/arrows), zoom (wheel, +/-), follow the selected persona |
//! | [`HudPlugin`] | date and time, speed controls and their shortcuts, LLM status or replay progress, messages |
//! | [`InspectorPlugin`] | the selected persona: plan, action, memories, chat, relationships; the talk box ([`TalkBox`]) |
//! | [`DirectorPanelPlugin`] | `F2`: the director's instruction box, the plan as a checklist, confirm / pause / cancel / answer, the review |
//! | [`StagePanelPlugin`] | `F3`: the scene playing — narration, actor cards with health bars and effects, next turn / auto-play / close; plans in bubbles |
//!
//! [`GameRenderPlugins`] holds them all; [`run_game`] builds the whole windowed app (also in
//! screenshot mode, see [`GameOptions::screenshot`]), from a fresh town or a save
//! ([`GameOptions::load`]), with [`QuickSavePlugin`] for `F5` / `F9`. [`run_replay`] opens the
//! same window on a run's movement log, played by the
//! [`ReplayPlugin`](crate::output::ReplayPlugin) with no model: its display-only personas are
//! drawn by the same plugins. Every frame's simulation and frame time go to a
//! [`FrameReport`]; a screenshot run writes its spread (p50 / p99 / max) beside the picture.
//!
//! Coordinates: tile `(x, y)` (y down, as in Tiled) has its centre at world
//! `(x · 32, −y · 32)` (`tile_to_world`); the tile map is placed to match.
//!
//! **Layer** (see `tests/layers.rs`): the top of the library: may import every other module but
//! [`testing`](crate::testing).

mod art;
mod bubbles;
mod camera;
mod director;
mod frame_report;
mod game;
mod hud;
mod inspector;
mod map;
mod night;
mod saves;
mod sprites;
mod stage;
mod talk;

pub use art::{Canvas, Facing, HairStyle, Look, bubble_frame, character_sheet, draw_character};
pub use bubbles::{
    BubblesPlugin, ChatBubble, ChatLine, ChatPlayback, ChatText, EmojiFont, chat_playback,
};
pub use camera::{CameraState, GameCamera, GameCameraPlugin};
pub use director::{
    ChecklistLine, DirectorPanel, DirectorPanelPlugin, MAX_DIRECTIVE_CHARS, PanelAction, checklist,
    command_for, panel_actions,
};
pub use frame_report::{FrameReport, FrameSummary, Spread};
pub use game::{
    DEFAULT_GAME_START, DirectorShot, GameError, GameOptions, GameSim, PersonaShot, ReplayOptions,
    ScreenshotRequest, ScreenshotState, SimFrameTime, StageShot, WINDOW_SIZE, build_game_app,
    build_replay_app, parse_speed, run_game, run_replay,
};
pub use hud::{CONTROLS_HINT, HudPlugin, HudToast, SpeedShortcut, replay_status, speed_for_key};
pub use inspector::{InspectorPlugin, MindSnapshot, current_schedule_index};
pub use map::{PlainTile, TownMapRenderPlugin, TownTilemap};
pub use night::{NIGHT_SPEED, NightFastForward, NightFastForwardPlugin};
pub use saves::{
    PersistMessage, QuickSave, QuickSavePlugin, SaveShortcut, default_save_dir, outcome_message,
    save_shortcut_for_key,
};
pub use sprites::{PersonaSprite, PersonaSpritesPlugin, Selected, WalkState, approach, reselect};
pub use stage::{ActorCard, StagePanel, StagePanelPlugin, actor_card, auto_turn, plan_bubble};
pub use talk::{MAX_MESSAGE_CHARS, PLAYER, TalkBox, TalkLine, TalkView, talk_lines, talk_request};

use bevy::app::plugin_group;
use bevy::prelude::*;

use crate::world::TileCoord;

/// Pixel size of a map tile in world units. Tile maps with another tile size are scaled to it.
pub(crate) const TILE_PX: f32 = 32.0;

/// Drawing order (z) of the game's layers.
pub mod z {
    /// The first tile layer; each further layer is one higher.
    pub(crate) const MAP: f32 = 0.0;
    /// Personas (a little is added by row, so lower personas draw in front).
    pub(crate) const PERSONAS: f32 = 10.0;
    /// Name labels.
    pub(crate) const LABELS: f32 = 20.0;
    /// Emoji, thinking and dialogue bubbles.
    pub(crate) const BUBBLES: f32 = 30.0;
}

/// The world position of the centre of tile `c`.
pub(crate) fn tile_to_world(c: TileCoord) -> Vec2 {
    Vec2::new(c.x as f32 * TILE_PX, -(c.y as f32) * TILE_PX)
}

/// The tile under world position `p` (may be outside the map).
pub fn world_to_tile(p: Vec2) -> TileCoord {
    TileCoord::new(
        (p.x / TILE_PX).round() as i32,
        (-p.y / TILE_PX).round() as i32,
    )
}

plugin_group! {
    /// Everything the windowed game draws, on top of the simulation plugins and Bevy's
    /// `DefaultPlugins` (plus bevy_egui's `EguiPlugin`, which [`run_game`] adds).
    pub struct GameRenderPlugins {
        map:::TownMapRenderPlugin,
        sprites:::PersonaSpritesPlugin,
        bubbles:::BubblesPlugin,
        camera:::GameCameraPlugin,
        hud:::HudPlugin,
        inspector:::InspectorPlugin,
        director:::DirectorPanelPlugin,
        stage:::StagePanelPlugin,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiles_and_world_round_trip() {
        assert_eq!(tile_to_world(TileCoord::new(0, 0)), Vec2::ZERO);
        assert_eq!(tile_to_world(TileCoord::new(2, 3)), Vec2::new(64.0, -96.0));
        for c in [
            TileCoord::new(0, 0),
            TileCoord::new(63, 47),
            TileCoord::new(-1, 5),
        ] {
            assert_eq!(world_to_tile(tile_to_world(c)), c);
        }
        // Anywhere inside a tile maps to it.
        assert_eq!(
            world_to_tile(Vec2::new(64.0 + 15.0, -96.0 - 15.0)),
            TileCoord::new(2, 3)
        );
        assert_eq!(
            world_to_tile(Vec2::new(64.0 + 17.0, -96.0)),
            TileCoord::new(3, 3)
        );
    }
}
