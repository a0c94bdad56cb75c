//! Persona sprites: each persona gets its own generated character sheet, a name label, a ring
//! when selected, and walks smoothly from [`Body::previous_tile`] to [`Body::tile`] at the speed
//! the clock is running, facing where it goes.
//!
//! The simulation moves a body one tile per step; the sprite chases the body's tile at "one tile
//! per step" in real time (the configured steps per second times the speed multiplier, or the
//! measured step rate at max speed), so walking looks continuous at every speed. A sprite that
//! falls far behind — a teleport, a long hitch — snaps to its tile.
//!
//! Sprites attach to any [`Persona`] without one, so personas spawned later (a loaded save
//! replaces them all) get theirs the next frame, and a despawned persona takes its sprite, label
//! and bubbles with it (they are its children). The [`Selected`] persona is remembered by name:
//! when its entity goes away, the selection moves to the persona of the same name, if any
//! ([`reselect`]).

use bevy::asset::RenderAssetUsages;
use bevy::image::ImageSampler;
use bevy::prelude::*;
use bevy::render::render_resource::{Extent3d, TextureDimension, TextureFormat};
use bevy::sprite::{Anchor, Text2dShadow};

use super::art::{self, Canvas, FRAME, FRAMES_PER_FACING, Facing, Look};
use super::{TILE_PX, tile_to_world, z};
use crate::clock::{SimClock, SimSpeed, StepCompleted};
use crate::persona::{Body, Persona};
use crate::settings::AgentSettings;

/// The drawn persona: its look and sprite sheet. Added to every [`Persona`] by the plugin.
#[derive(Component, Debug, Clone)]
pub struct PersonaSprite {
    /// Colours and hair style.
    pub look: Look,
}

/// Where a persona's sprite is drawn and how it walks.
#[derive(Component, Debug, Clone, Copy, PartialEq)]
pub struct WalkState {
    /// Drawn position (world units).
    pub position: Vec2,
    /// The tile centre it is walking to.
    pub target: Vec2,
    /// Which way it looks.
    pub facing: Facing,
    /// Distance walked so far, for the walk-cycle frame.
    pub walked: f32,
    /// Whether it moved this frame.
    pub moving: bool,
}

/// The selected persona (inspector, camera follow). `follow` makes the camera track it.
#[derive(Resource, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Selected {
    /// The selected persona, if any.
    pub entity: Option<Entity>,
    /// Whether the camera follows it.
    pub follow: bool,
}

/// Steps per real second, measured over recent frames (used at max speed).
#[derive(Resource, Debug, Clone, Copy, Default, PartialEq)]
pub struct MeasuredStepRate(pub f32);

/// The systems that place persona sprites each frame; bubbles and the camera run after them.
#[derive(SystemSet, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PersonaSpritesSystems;

/// Marks the name label child of a persona.
#[derive(Component, Debug, Clone, Copy)]
pub struct NameLabel;

/// Marks the selection ring child of a persona.
#[derive(Component, Debug, Clone, Copy)]
pub struct SelectionRing;

#[derive(Resource, Debug, Clone)]
struct SpriteAssets {
    layout: Handle<TextureAtlasLayout>,
    ring: Handle<Image>,
}

/// Sprites, labels, walking and selection of personas.
#[derive(Debug, Default, Clone, Copy)]
pub struct PersonaSpritesPlugin;

impl Plugin for PersonaSpritesPlugin {
    fn build(&self, app: &mut App) {
        app.init_resource::<Selected>()
            .init_resource::<MeasuredStepRate>()
            .add_systems(Startup, setup_sprite_assets)
            .add_systems(
                Update,
                (
                    keep_selection,
                    attach_persona_sprites,
                    measure_step_rate,
                    walk_personas,
                    show_selection,
                )
                    .chain()
                    .in_set(PersonaSpritesSystems),
            );
    }
}

/// Turns a canvas into a nearest-sampled sRGB image.
pub(super) fn canvas_image(canvas: &Canvas) -> Image {
    let mut image = Image::new(
        Extent3d {
            width: canvas.width,
            height: canvas.height,
            depth_or_array_layers: 1,
        },
        TextureDimension::D2,
        canvas.pixels.clone(),
        TextureFormat::Rgba8UnormSrgb,
        RenderAssetUsages::default(),
    );
    image.sampler = ImageSampler::nearest();
    image
}

fn setup_sprite_assets(
    mut commands: Commands,
    mut layouts: ResMut<Assets<TextureAtlasLayout>>,
    mut images: ResMut<Assets<Image>>,
) {
    let layout = layouts.add(TextureAtlasLayout::from_grid(
        UVec2::splat(FRAME),
        FRAMES_PER_FACING,
        4,
        None,
        None,
    ));
    let ring = images.add(canvas_image(&art::selection_ring(
        30,
        12,
        [255, 214, 10, 255],
    )));
    commands.insert_resource(SpriteAssets { layout, ring });
}

#[expect(clippy::type_complexity, reason = "a query with its filters")]
fn attach_persona_sprites(
    mut commands: Commands,
    assets: Option<Res<SpriteAssets>>,
    mut images: ResMut<Assets<Image>>,
    new: Query<(Entity, &Name, &Body), (With<Persona>, Without<PersonaSprite>)>,
) {
    let Some(assets) = assets else {
        return;
    };
    for (entity, name, body) in &new {
        let look = Look::from_name(name.as_str());
        let sheet = images.add(canvas_image(&art::character_sheet(&look)));
        let position = tile_to_world(body.tile);
        let [r, g, b] = look.shirt_srgb();
        commands
            .entity(entity)
            .insert((
                PersonaSprite { look },
                WalkState {
                    position,
                    target: position,
                    facing: Facing::Down,
                    walked: 0.0,
                    moving: false,
                },
                Sprite::from_atlas_image(
                    sheet,
                    TextureAtlas {
                        layout: assets.layout.clone(),
                        index: Facing::Down.atlas_index(0),
                    },
                ),
                Transform::from_translation(position.extend(z::PERSONAS)),
                Visibility::default(),
            ))
            .with_children(|parent| {
                parent.spawn((
                    NameLabel,
                    Text2d::new(short_name(name.as_str())),
                    TextFont::from_font_size(10.0),
                    TextColor(Color::WHITE),
                    Text2dShadow {
                        offset: Vec2::new(1.0, -1.0),
                        color: Color::srgb(r * 0.3, g * 0.3, b * 0.3),
                    },
                    Anchor::TOP_CENTER,
                    Transform::from_xyz(0.0, -15.0, z::LABELS - z::PERSONAS),
                ));
                parent.spawn((
                    SelectionRing,
                    Sprite::from_image(assets.ring.clone()),
                    Transform::from_xyz(0.0, -13.0, -0.5),
                    Visibility::Hidden,
                ));
            });
    }
}

/// Where the selection goes when personas change: the selected entity while it is a persona;
/// otherwise the persona named `remembered` (the selected one's name when last seen); otherwise
/// nothing. Returns the selection and the name to remember.
pub fn reselect<'a>(
    selected: Option<Entity>,
    remembered: Option<&str>,
    personas: impl IntoIterator<Item = (Entity, &'a str)>,
) -> (Option<Entity>, Option<String>) {
    let personas: Vec<(Entity, &str)> = personas.into_iter().collect();
    let Some(entity) = selected else {
        return (None, None);
    };
    if let Some((_, name)) = personas.iter().find(|(e, _)| *e == entity) {
        return (Some(entity), Some((*name).to_owned()));
    }
    match remembered.and_then(|wanted| personas.iter().find(|(_, n)| *n == wanted)) {
        Some((e, name)) => (Some(*e), Some((*name).to_owned())),
        None => (None, None),
    }
}

fn keep_selection(
    mut selected: ResMut<Selected>,
    mut remembered: Local<Option<String>>,
    personas: Query<(Entity, &Name), With<Persona>>,
) {
    let (entity, name) = reselect(
        selected.entity,
        remembered.as_deref(),
        personas.iter().map(|(e, n)| (e, n.as_str())),
    );
    if entity != selected.entity {
        selected.entity = entity;
        if entity.is_none() {
            selected.follow = false;
        }
    }
    *remembered = name;
}

fn measure_step_rate(
    time: Res<Time>,
    mut steps: MessageReader<StepCompleted>,
    mut rate: ResMut<MeasuredStepRate>,
) {
    let n = steps.read().count() as f32;
    let dt = time.delta_secs();
    if dt > 0.0 {
        // An exponential moving average over about half a second of frames.
        let alpha = (dt / 0.5).min(1.0);
        rate.0 += (n / dt - rate.0) * alpha;
    }
}

/// How many steps per real second the clock is running at.
pub(super) fn steps_per_second(clock: &SimClock, settings: &AgentSettings, measured: f32) -> f32 {
    match clock.speed {
        SimSpeed::Paused => 0.0,
        SimSpeed::Max => measured,
        speed => (speed.multiplier().unwrap_or(1.0) * settings.steps_per_second_at_1x) as f32,
    }
}

/// Moves `from` towards `to` by at most `max_step`; returns the new position.
pub fn approach(from: Vec2, to: Vec2, max_step: f32) -> Vec2 {
    let delta = to - from;
    let dist = delta.length();
    if dist <= max_step || dist <= f32::EPSILON {
        to
    } else {
        from + delta / dist * max_step.max(0.0)
    }
}

fn walk_personas(
    time: Res<Time>,
    clock: Res<SimClock>,
    settings: Option<Res<AgentSettings>>,
    rate: Res<MeasuredStepRate>,
    mut personas: Query<(&Body, &mut WalkState, &mut Sprite, &mut Transform), With<Persona>>,
) {
    let settings = settings.map(|s| s.clone()).unwrap_or_default();
    let sps = steps_per_second(&clock, &settings, rate.0);
    // A single step while paused still walks, at the 1x pace.
    let tiles_per_sec = if sps > 0.0 {
        sps
    } else {
        settings.steps_per_second_at_1x as f32
    };
    let max_step = tiles_per_sec * TILE_PX * time.delta_secs() * 1.05;
    let snap_beyond = (4.0 * TILE_PX).max(3.0 * max_step);
    for (body, mut walk, mut sprite, mut transform) in &mut personas {
        walk.target = tile_to_world(body.tile);
        let before = walk.position;
        walk.position = if walk.position.distance(walk.target) > snap_beyond {
            walk.target
        } else {
            approach(walk.position, walk.target, max_step)
        };
        let moved = walk.position - before;
        walk.moving = moved.length() > 0.01 && moved.length() < snap_beyond;
        if walk.moving {
            walk.walked += moved.length();
            // World y is up, map y is down.
            if let Some(facing) = Facing::of_step(moved.x, -moved.y) {
                walk.facing = facing;
            }
        } else if walk.position == walk.target
            && let Some(facing) = Facing::of_step(
                (body.tile.x - body.previous_tile.x) as f32,
                (body.tile.y - body.previous_tile.y) as f32,
            )
        {
            walk.facing = facing;
        }
        let frame = if walk.moving {
            1 + ((walk.walked / 10.0) as u32 % 2)
        } else {
            0
        };
        if let Some(atlas) = sprite.texture_atlas.as_mut() {
            let index = walk.facing.atlas_index(frame);
            if atlas.index != index {
                atlas.index = index;
            }
        }
        // Lower on the screen draws in front; the offset stays far below the label layer.
        let depth = (-walk.position.y / 100_000.0).clamp(0.0, 0.9);
        let translation = walk.position.extend(z::PERSONAS + depth);
        if transform.translation != translation {
            transform.translation = translation;
        }
    }
}

fn show_selection(
    selected: Res<Selected>,
    mut rings: Query<(&ChildOf, &mut Visibility), With<SelectionRing>>,
) {
    if !selected.is_changed() {
        return;
    }
    for (child_of, mut visibility) in &mut rings {
        let on = selected.entity == Some(child_of.parent());
        visibility.set_if_neq(if on {
            Visibility::Inherited
        } else {
            Visibility::Hidden
        });
    }
}

/// The name shown under a sprite: the first name, plus a trailing number if the full name has
/// one (so the copies in a generated crowd stay apart).
pub(crate) fn short_name(full: &str) -> String {
    let mut words = full.split_whitespace();
    let first = words.next().unwrap_or_default();
    match words.last() {
        Some(last) if last.chars().all(|c| c.is_ascii_digit()) => format!("{first} {last}"),
        _ => first.to_owned(),
    }
}

/// The persona whose sprite is nearest to `point` (world units), within `radius`.
pub(crate) fn pick_persona(
    point: Vec2,
    radius: f32,
    personas: impl IntoIterator<Item = (Entity, Vec2)>,
) -> Option<Entity> {
    personas
        .into_iter()
        .map(|(e, p)| (e, p.distance(point)))
        .filter(|(_, d)| *d <= radius)
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(e, _)| e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn approach_moves_at_most_the_step_and_lands_exactly() {
        let from = Vec2::new(0.0, 0.0);
        let to = Vec2::new(32.0, 0.0);
        assert_eq!(approach(from, to, 8.0), Vec2::new(8.0, 0.0));
        assert_eq!(approach(from, to, 40.0), to);
        assert_eq!(approach(to, to, 1.0), to);
        let diag = approach(from, Vec2::new(30.0, 40.0), 5.0);
        assert!((diag - Vec2::new(3.0, 4.0)).length() < 1e-5);
    }

    #[test]
    fn walking_pace_follows_the_speed() {
        let settings = AgentSettings::default();
        let mut clock = SimClock::default().with_speed(SimSpeed::X8);
        let per_1x = settings.steps_per_second_at_1x as f32;
        assert_eq!(steps_per_second(&clock, &settings, 99.0), 8.0 * per_1x);
        clock.speed = SimSpeed::Max;
        assert_eq!(steps_per_second(&clock, &settings, 99.0), 99.0);
        clock.speed = SimSpeed::Paused;
        assert_eq!(steps_per_second(&clock, &settings, 99.0), 0.0);
    }

    #[test]
    fn labels_use_first_names() {
        assert_eq!(short_name("Elena Reyes"), "Elena");
        assert_eq!(short_name("Elena Reyes 3"), "Elena 3");
        assert_eq!(short_name("Cher"), "Cher");
        assert_eq!(short_name(""), "");
    }

    #[test]
    fn selection_follows_a_name_to_its_new_entity() {
        let [old_ada, old_sam, ada, sam] =
            [1, 2, 3, 4].map(|i| Entity::from_raw_u32(i).expect("entity"));
        let before = [(old_ada, "Ada"), (old_sam, "Sam")];
        let after = [(ada, "Ada"), (sam, "Sam")];
        // While the entity lives, it stays selected and its name is remembered.
        assert_eq!(
            reselect(Some(old_sam), None, before),
            (Some(old_sam), Some("Sam".into()))
        );
        // A load replaced every persona: the same name is selected again.
        assert_eq!(
            reselect(Some(old_sam), Some("Sam"), after),
            (Some(sam), Some("Sam".into()))
        );
        // Gone for good: nothing stays selected (no stale entity lingers).
        assert_eq!(
            reselect(Some(old_sam), Some("Sam"), [(ada, "Ada")]),
            (None, None)
        );
        assert_eq!(reselect(None, Some("Sam"), after), (None, None));
    }

    #[test]
    fn picking_takes_the_nearest_within_reach() {
        let a = Entity::from_raw_u32(1).unwrap();
        let b = Entity::from_raw_u32(2).unwrap();
        let personas = [(a, Vec2::new(0.0, 0.0)), (b, Vec2::new(20.0, 0.0))];
        assert_eq!(pick_persona(Vec2::new(12.0, 0.0), 16.0, personas), Some(b));
        assert_eq!(pick_persona(Vec2::new(2.0, 1.0), 16.0, personas), Some(a));
        assert_eq!(pick_persona(Vec2::new(100.0, 0.0), 16.0, personas), None);
    }
}
