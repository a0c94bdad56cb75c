//! The camera: pan by dragging or with WASD/arrow keys, zoom with the wheel (or Q/E), click a
//! persona to select it, follow the selected persona (F). Input that egui wants (the pointer
//! over a panel, typing in a text box) is left to egui.

use bevy::input::mouse::{AccumulatedMouseScroll, MouseScrollUnit};
use bevy::prelude::*;
use bevy::window::PrimaryWindow;
use bevy_egui::input::EguiWantsInput;

use super::sprites::{PersonaSpritesSystems, Selected, WalkState, pick_persona};
use super::{TILE_PX, tile_to_world};
use crate::persona::Persona;
use crate::world::{TileCoord, TownMap};

/// Marks the game's camera.
#[derive(Component, Debug, Clone, Copy, Default)]
pub struct GameCamera;

/// Zoom limits (orthographic scale: world units per screen pixel).
pub(crate) const MIN_SCALE: f32 = 0.25;
/// Zoom limits (orthographic scale: world units per screen pixel).
pub(crate) const MAX_SCALE: f32 = 4.0;
/// Width the inspector panel takes on the right of the window (logical pixels).
pub(crate) const INSPECTOR_WIDTH: f32 = 330.0;
/// Pixels the pointer may move between press and release and still count as a click.
const CLICK_SLOP: f32 = 4.0;

/// Pointer and framing state of the camera.
#[derive(Resource, Debug, Clone, Default, PartialEq)]
pub struct CameraState {
    /// Where a left-button drag started (screen pixels), if one is under way.
    pub drag_from: Option<Vec2>,
    /// Whether the current press has moved far enough to be a drag, not a click.
    pub dragged: bool,
    /// Whether the view has been framed on the personas yet.
    pub framed: bool,
}

/// Camera controls.
#[derive(Debug, Default, Clone, Copy)]
pub struct GameCameraPlugin;

impl Plugin for GameCameraPlugin {
    fn build(&self, app: &mut App) {
        app.init_resource::<CameraState>()
            .add_systems(Startup, spawn_camera)
            .add_systems(
                Update,
                (
                    frame_personas_once,
                    pan_with_keys,
                    drag_zoom_and_click,
                    follow_selected,
                    keep_camera_on_map,
                )
                    .chain()
                    .after(PersonaSpritesSystems),
            );
    }
}

fn spawn_camera(mut commands: Commands, map: Option<Res<TownMap>>) {
    let centre = map
        .map(|m| tile_to_world(TileCoord::new(m.width() as i32 / 2, m.height() as i32 / 2)))
        .unwrap_or_default();
    commands.spawn((
        Camera2d,
        GameCamera,
        Transform::from_translation(centre.extend(100.0)),
        Name::new("game camera"),
    ));
}

/// The centre of a set of points (`None` when empty).
pub(crate) fn centroid(points: impl IntoIterator<Item = Vec2>) -> Option<Vec2> {
    let (sum, n) = points
        .into_iter()
        .fold((Vec2::ZERO, 0u32), |(s, n), p| (s + p, n + 1));
    (n > 0).then(|| sum / n as f32)
}

/// A centre for the first view: the centroid of the largest group of `points` that fits in a
/// view of `half_extents` (half width, half height) around it. `None` when there are no points.
pub(crate) fn best_frame(points: &[Vec2], half_extents: Vec2) -> Option<Vec2> {
    let inside = |c: Vec2, p: Vec2| {
        (p.x - c.x).abs() <= half_extents.x && (p.y - c.y).abs() <= half_extents.y
    };
    points
        .iter()
        .filter_map(|&p| centroid(points.iter().copied().filter(|&q| inside(p, q))))
        .map(|c| (c, points.iter().filter(|&&q| inside(c, q)).count()))
        // Most points seen; on a tie the first candidate (stable across runs).
        .fold(None, |best: Option<(Vec2, usize)>, (c, n)| match best {
            Some((_, m)) if m >= n => best,
            _ => Some((c, n)),
        })
        .map(|(c, _)| c)
}

fn frame_personas_once(
    mut state: ResMut<CameraState>,
    personas: Query<&WalkState, With<Persona>>,
    window: Query<&Window, With<PrimaryWindow>>,
    mut camera: Query<(&mut Transform, &Projection), With<GameCamera>>,
) {
    if state.framed {
        return;
    }
    let points: Vec<Vec2> = personas.iter().map(|w| w.position).collect();
    let Ok(window) = window.single() else {
        return;
    };
    for (mut transform, projection) in &mut camera {
        let scale = ortho_scale(projection);
        // The inspector covers the right of the window: frame in what is left, a little inset.
        let visible = Vec2::new(
            (window.width() - INSPECTOR_WIDTH).max(200.0),
            window.height() - 40.0,
        ) * scale;
        let Some(centre) = best_frame(&points, visible / 2.0 - Vec2::splat(2.0 * TILE_PX)) else {
            return;
        };
        transform.translation.x = centre.x + INSPECTOR_WIDTH / 2.0 * scale;
        transform.translation.y = centre.y;
        state.framed = true;
    }
}

fn ortho_scale(projection: &Projection) -> f32 {
    match projection {
        Projection::Orthographic(o) => o.scale,
        _ => 1.0,
    }
}

fn pan_with_keys(
    time: Res<Time>,
    keys: Res<ButtonInput<KeyCode>>,
    wants: Option<Res<EguiWantsInput>>,
    mut selected: ResMut<Selected>,
    mut camera: Query<(&mut Transform, &mut Projection), With<GameCamera>>,
) {
    if wants.is_some_and(|w| w.wants_keyboard_input()) {
        return;
    }
    let mut dir = Vec2::ZERO;
    if keys.any_pressed([KeyCode::KeyW, KeyCode::ArrowUp]) {
        dir.y += 1.0;
    }
    if keys.any_pressed([KeyCode::KeyS, KeyCode::ArrowDown]) {
        dir.y -= 1.0;
    }
    if keys.any_pressed([KeyCode::KeyA, KeyCode::ArrowLeft]) {
        dir.x -= 1.0;
    }
    if keys.any_pressed([KeyCode::KeyD, KeyCode::ArrowRight]) {
        dir.x += 1.0;
    }
    let zoom = if keys.pressed(KeyCode::KeyQ) {
        -1.0
    } else if keys.pressed(KeyCode::KeyE) {
        1.0
    } else {
        0.0
    };
    for (mut transform, mut projection) in &mut camera {
        let scale = ortho_scale(&projection);
        if dir != Vec2::ZERO {
            let delta = dir.normalize() * 20.0 * TILE_PX * scale * time.delta_secs();
            transform.translation += delta.extend(0.0);
            selected.follow = false;
        }
        if zoom != 0.0
            && let Projection::Orthographic(o) = projection.as_mut()
        {
            o.scale =
                (o.scale * (1.0 + zoom * 1.5 * time.delta_secs())).clamp(MIN_SCALE, MAX_SCALE);
        }
    }
}

/// The new orthographic scale after `lines` wheel notches (positive zooms in).
pub(crate) fn zoomed_scale(scale: f32, lines: f32) -> f32 {
    (scale * 0.85f32.powf(lines)).clamp(MIN_SCALE, MAX_SCALE)
}

#[expect(
    clippy::too_many_arguments,
    reason = "a Bevy system reading the inputs it combines"
)]
fn drag_zoom_and_click(
    buttons: Res<ButtonInput<MouseButton>>,
    scroll: Res<AccumulatedMouseScroll>,
    wants: Option<Res<EguiWantsInput>>,
    window: Query<&Window, With<PrimaryWindow>>,
    mut state: ResMut<CameraState>,
    mut selected: ResMut<Selected>,
    personas: Query<(Entity, &WalkState), With<Persona>>,
    mut camera: Query<
        (&Camera, &GlobalTransform, &mut Transform, &mut Projection),
        With<GameCamera>,
    >,
) {
    let Ok(window) = window.single() else {
        return;
    };
    let Ok((camera, global, mut transform, mut projection)) = camera.single_mut() else {
        return;
    };
    let cursor = window.cursor_position();
    let over_ui = wants.is_some_and(|w| w.wants_pointer_input() || w.is_pointer_over_area());

    // Wheel zoom, keeping the world point under the cursor in place.
    if !over_ui && scroll.delta.y != 0.0 {
        let lines = match scroll.unit {
            MouseScrollUnit::Line => scroll.delta.y,
            MouseScrollUnit::Pixel => scroll.delta.y / 40.0,
        };
        if let Projection::Orthographic(o) = projection.as_mut() {
            let before = cursor.and_then(|c| camera.viewport_to_world_2d(global, c).ok());
            let old = o.scale;
            o.scale = zoomed_scale(old, lines);
            if let (Some(world), Some(_)) = (before, cursor) {
                // p' = cam + (p − cam) · new/old keeps p under the cursor.
                let cam = transform.translation.truncate();
                let new_cam = world + (cam - world) * (o.scale / old);
                transform.translation.x = new_cam.x;
                transform.translation.y = new_cam.y;
            }
        }
    }

    let scale = ortho_scale(&projection);
    if buttons.just_pressed(MouseButton::Left) && !over_ui {
        state.drag_from = cursor;
        state.dragged = false;
    }
    if let (Some(from), Some(now)) = (state.drag_from, cursor)
        && buttons.pressed(MouseButton::Left)
    {
        let delta = now - from;
        if state.dragged || delta.length() > CLICK_SLOP {
            state.dragged = true;
            selected.follow = false;
            // Screen y grows down, world y grows up.
            transform.translation.x -= delta.x * scale;
            transform.translation.y += delta.y * scale;
            state.drag_from = Some(now);
        }
    }
    if buttons.just_released(MouseButton::Left) {
        let was_click = state.drag_from.is_some() && !state.dragged;
        state.drag_from = None;
        state.dragged = false;
        if was_click
            && let Some(world) = cursor.and_then(|c| camera.viewport_to_world_2d(global, c).ok())
        {
            let hit = pick_persona(
                world,
                TILE_PX * 0.75,
                personas.iter().map(|(e, w)| (e, w.position)),
            );
            if hit.is_some() || selected.entity.is_some() {
                selected.entity = hit;
                selected.follow = hit.is_some();
            }
        }
    }
}

fn follow_selected(
    time: Res<Time>,
    selected: Res<Selected>,
    personas: Query<&WalkState>,
    mut camera: Query<&mut Transform, With<GameCamera>>,
) {
    if !selected.follow {
        return;
    }
    let Some(target) = selected
        .entity
        .and_then(|e| personas.get(e).ok())
        .map(|w| w.position)
    else {
        return;
    };
    for mut transform in &mut camera {
        let cam = transform.translation.truncate();
        // Ease towards the persona; fast enough to keep up at 32x.
        let t = (time.delta_secs() * 6.0).min(1.0);
        let next = cam.lerp(target, t);
        transform.translation.x = next.x;
        transform.translation.y = next.y;
    }
}

/// The camera centre nearest to `centre` that keeps a view of `half_view` (half width, half
/// height) inside the box `min..max`; along an axis where the box is smaller than the view, the
/// box's middle.
pub(crate) fn clamp_to_bounds(centre: Vec2, half_view: Vec2, min: Vec2, max: Vec2) -> Vec2 {
    let axis = |c: f32, h: f32, lo: f32, hi: f32| {
        if hi - lo <= 2.0 * h {
            (lo + hi) / 2.0
        } else {
            c.clamp(lo + h, hi - h)
        }
    };
    Vec2::new(
        axis(centre.x, half_view.x, min.x, max.x),
        axis(centre.y, half_view.y, min.y, max.y),
    )
}

fn keep_camera_on_map(
    map: Option<Res<TownMap>>,
    hud: Option<Res<super::hud::HudState>>,
    window: Query<&Window, With<PrimaryWindow>>,
    mut camera: Query<(&mut Transform, &Projection), With<GameCamera>>,
) {
    let (Some(map), Ok(window)) = (map, window.single()) else {
        return;
    };
    // The map's outer edges: tile centres are half a tile inside.
    let half_tile = Vec2::splat(TILE_PX / 2.0);
    let top_left = tile_to_world(TileCoord::new(0, 0)) + Vec2::new(-half_tile.x, half_tile.y);
    let bottom_right = tile_to_world(TileCoord::new(
        map.width() as i32 - 1,
        map.height() as i32 - 1,
    )) + Vec2::new(half_tile.x, -half_tile.y);
    let min = Vec2::new(top_left.x, bottom_right.y);
    let max = Vec2::new(bottom_right.x, top_left.y);
    for (mut transform, projection) in &mut camera {
        let scale = ortho_scale(projection);
        // Let the map's edges reach the inspector's and the HUD's, not hide under them.
        let bar = hud.as_ref().map_or(0.0, |h| h.bar_height);
        let half_view =
            Vec2::new(window.width() - INSPECTOR_WIDTH, window.height() - bar) * scale / 2.0;
        let shift = Vec2::new(INSPECTOR_WIDTH / 2.0, bar / 2.0) * scale;
        let centre = transform.translation.truncate() - shift;
        let clamped = clamp_to_bounds(centre, half_view, min, max) + shift;
        if clamped != transform.translation.truncate() {
            transform.translation.x = clamped.x;
            transform.translation.y = clamped.y;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wheel_zoom_is_geometric_and_clamped() {
        assert!((zoomed_scale(1.0, 1.0) - 0.85).abs() < 1e-6);
        assert!((zoomed_scale(1.0, -1.0) - 1.0 / 0.85).abs() < 1e-5);
        assert_eq!(zoomed_scale(0.3, 5.0), MIN_SCALE);
        assert_eq!(zoomed_scale(3.9, -5.0), MAX_SCALE);
    }

    #[test]
    fn first_view_frames_the_biggest_group() {
        assert_eq!(best_frame(&[], Vec2::splat(10.0)), None);
        let points = [
            Vec2::new(0.0, 0.0),
            Vec2::new(100.0, 0.0),
            Vec2::new(104.0, 2.0),
            Vec2::new(96.0, -2.0),
        ];
        // The three near x = 100 fit in a 20-wide view; the one at 0 does not.
        assert_eq!(
            best_frame(&points, Vec2::splat(10.0)),
            Some(Vec2::new(100.0, 0.0))
        );
        // A view wide enough for all frames all of them.
        assert_eq!(
            best_frame(&points, Vec2::new(200.0, 10.0)),
            Some(Vec2::new(75.0, 0.0))
        );
    }

    #[test]
    fn camera_stays_over_the_map() {
        let (min, max) = (Vec2::new(0.0, -100.0), Vec2::new(200.0, 0.0));
        let half = Vec2::new(50.0, 20.0);
        // Inside: unchanged.
        assert_eq!(
            clamp_to_bounds(Vec2::new(100.0, -50.0), half, min, max),
            Vec2::new(100.0, -50.0)
        );
        // Past the top-left: pulled back so the view's edge meets the map's.
        assert_eq!(
            clamp_to_bounds(Vec2::new(-30.0, 40.0), half, min, max),
            Vec2::new(50.0, -20.0)
        );
        // A map narrower than the view is centred.
        assert_eq!(
            clamp_to_bounds(Vec2::new(7.0, -50.0), Vec2::new(150.0, 20.0), min, max),
            Vec2::new(100.0, -50.0)
        );
    }

    #[test]
    fn centroid_of_points() {
        assert_eq!(centroid([]), None);
        assert_eq!(
            centroid([Vec2::new(0.0, 0.0), Vec2::new(4.0, 2.0)]),
            Some(Vec2::new(2.0, 1.0))
        );
    }
}
