//! The town's tile layers (`ground`, `walls`, `furniture`, … — every tile layer of the Tiled map
//! but `collision`) drawn with `bevy_ecs_tilemap`, one tilemap per layer and tileset.
//!
//! Tileset images are read from the paths the map names (not through the asset server), so a map
//! given on the command line renders wherever it lives, and a missing image is reported as an
//! error in the log instead of a silent pink square.

use std::path::Path;

use bevy::asset::RenderAssetUsages;
use bevy::image::{CompressedImageFormats, ImageSampler, ImageType};
use bevy::prelude::*;
use bevy_ecs_tilemap::prelude::*;

use super::{TILE_PX, z};
use crate::world::{TilesetInfo, TownMap};

/// One drawn tilemap: a layer of the town with one tileset.
#[derive(Component, Debug, Clone, PartialEq, Eq)]
pub struct TownTilemap {
    /// The Tiled layer's name.
    pub layer: String,
    /// Index of the tileset in [`TownMap::tilesets`].
    pub tileset: u16,
}

/// A tile of a map that has no tile layers (one built in code), drawn as a plain square.
#[derive(Component, Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlainTile;

/// Draws the [`TownMap`] resource once it is inserted: its Tiled tile layers, or — for a map
/// built in code, which has none — one plain square per tile (walls dark, each sector in its
/// own colour, open ground green). Adds `bevy_ecs_tilemap`'s
/// `TilemapPlugin`, so add this plugin only to windowed apps (the tilemap plugin needs the
/// renderer).
#[derive(Debug, Default, Clone, Copy)]
pub struct TownMapRenderPlugin;

impl Plugin for TownMapRenderPlugin {
    fn build(&self, app: &mut App) {
        if !app.is_plugin_added::<TilemapPlugin>() {
            app.add_plugins(TilemapPlugin);
        }
        app.add_systems(
            PreUpdate,
            spawn_town_tilemaps.run_if(resource_added::<TownMap>),
        );
    }
}

/// Why a tileset could not be drawn.
#[derive(Debug, thiserror::Error)]
pub enum TilesetImageError {
    /// The tileset is an image collection (one image per tile), which is not supported.
    #[error("tileset {0:?} has no single image (image collections are not supported)")]
    NoImage(String),
    /// The image file could not be read.
    #[error("cannot read tileset image {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The image could not be decoded.
    #[error("cannot decode tileset image {path}: {message}")]
    Decode {
        /// The file.
        path: String,
        /// The decoder's message.
        message: String,
    },
}

/// One square sprite per tile of a map without tile layers.
fn spawn_plain_tiles(commands: &mut Commands, map: &TownMap) {
    let mut drawn = 0usize;
    for (coord, tile) in map.tiles() {
        let color = if tile.collision {
            Color::srgb(0.22, 0.2, 0.24)
        } else if let Some(sector) = &tile.sector {
            sector_colour(sector)
        } else {
            Color::srgb(0.42, 0.62, 0.36)
        };
        let at = super::tile_to_world(coord);
        commands.spawn((
            Sprite::from_color(color, Vec2::splat(TILE_PX)),
            Transform::from_xyz(at.x, at.y, z::MAP),
            PlainTile,
        ));
        drawn += 1;
    }
    info!(
        "drew {drawn} plain tiles for {} (a map without tile layers)",
        map.world_name()
    );
}

/// A light colour of its own for each sector name (the same name, the same colour).
fn sector_colour(sector: &str) -> Color {
    let hash = sector.bytes().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    let hue = (hash % 360) as f32;
    Color::hsl(hue, 0.35, 0.72)
}

/// Reads and decodes a tileset image, with nearest-neighbour sampling for crisp pixels.
pub(crate) fn load_tileset_image(tileset: &TilesetInfo) -> Result<Image, TilesetImageError> {
    let path = tileset
        .image
        .as_ref()
        .ok_or_else(|| TilesetImageError::NoImage(tileset.name.clone()))?;
    load_png(path)
}

/// Reads and decodes a PNG file into an sRGB image with nearest sampling.
pub(super) fn load_png(path: &Path) -> Result<Image, TilesetImageError> {
    let bytes = std::fs::read(path).map_err(|source| TilesetImageError::Read {
        path: path.display().to_string(),
        source,
    })?;
    Image::from_buffer(
        &bytes,
        ImageType::Extension("png"),
        CompressedImageFormats::NONE,
        true,
        ImageSampler::nearest(),
        RenderAssetUsages::default(),
    )
    .map_err(|err| TilesetImageError::Decode {
        path: path.display().to_string(),
        message: err.to_string(),
    })
}

/// Whatever [`spawn_town_tilemaps`] drew last time: tilemaps or plain tiles.
type DrawnTown = Or<(With<TownTilemap>, With<PlainTile>)>;

fn spawn_town_tilemaps(
    mut commands: Commands,
    map: Res<TownMap>,
    mut images: ResMut<Assets<Image>>,
    old: Query<Entity, DrawnTown>,
) {
    for entity in &old {
        commands.entity(entity).despawn();
    }
    if map.visual_layers().is_empty() {
        spawn_plain_tiles(&mut commands, &map);
        return;
    }
    let width = map.width();
    let height = map.height();
    let size = TilemapSize {
        x: width,
        y: height,
    };
    let mut textures = Vec::with_capacity(map.tilesets().len());
    for tileset in map.tilesets() {
        match load_tileset_image(tileset) {
            Ok(image) => textures.push(Some(images.add(image))),
            Err(err) => {
                error!("{err}; its tiles are not drawn");
                textures.push(None);
            }
        }
    }

    let mut drawn = 0usize;
    for (layer_index, layer) in map.visual_layers().iter().enumerate() {
        if !layer.visible {
            continue;
        }
        for (tileset_index, tileset) in map.tilesets().iter().enumerate() {
            let Some(Some(texture)) = textures.get(tileset_index) else {
                continue;
            };
            let tilemap = commands.spawn_empty().id();
            let mut storage = TileStorage::empty(size);
            let mut any = false;
            for y in 0..height {
                for x in 0..width {
                    let coord = crate::world::TileCoord::new(x as i32, y as i32);
                    let Some(tile) = layer.get(width, coord) else {
                        continue;
                    };
                    if tile.tileset as usize != tileset_index || tile.id >= tileset.tile_count {
                        continue;
                    }
                    // Tiled counts rows down, the tilemap counts them up.
                    let position = TilePos {
                        x,
                        y: height - 1 - y,
                    };
                    let entity = commands
                        .spawn(TileBundle {
                            position,
                            tilemap_id: TilemapId(tilemap),
                            texture_index: TileTextureIndex(tile.id),
                            flip: TileFlip {
                                x: tile.flip_h,
                                y: tile.flip_v,
                                d: tile.flip_d,
                            },
                            ..Default::default()
                        })
                        .id();
                    storage.set(&position, entity);
                    any = true;
                }
            }
            if !any {
                commands.entity(tilemap).despawn();
                continue;
            }
            let tile_size = TilemapTileSize {
                x: tileset.tile_width as f32,
                y: tileset.tile_height as f32,
            };
            let (map_tw, _) = map.tile_size();
            let scale = if map_tw == 0 {
                1.0
            } else {
                TILE_PX / map_tw as f32
            };
            // Place the centre of the bottom-left tile so that tile (x, y) lands on
            // `tile_to_world`: the bottom row (y = height − 1) sits at −(height − 1)·32.
            let bottom = -((height.saturating_sub(1)) as f32) * TILE_PX;
            commands.entity(tilemap).insert((
                TilemapBundle {
                    grid_size: TilemapGridSize {
                        x: map_tw.max(1) as f32,
                        y: map.tile_size().1.max(1) as f32,
                    },
                    map_type: TilemapType::Square,
                    size,
                    storage,
                    texture: TilemapTexture::Single(texture.clone()),
                    tile_size,
                    spacing: TilemapSpacing {
                        x: tileset.spacing as f32,
                        y: tileset.spacing as f32,
                    },
                    anchor: TilemapAnchor::None,
                    transform: Transform::from_xyz(0.0, bottom, z::MAP + layer_index as f32)
                        .with_scale(Vec3::new(scale, scale, 1.0)),
                    ..Default::default()
                },
                TownTilemap {
                    layer: layer.name.clone(),
                    tileset: tileset_index as u16,
                },
                Name::new(format!("tilemap {}", layer.name)),
            ));
            drawn += 1;
        }
    }
    info!(
        "drew {drawn} tilemap(s) for {} ({width}x{height})",
        map.world_name()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_tileset_image_is_an_error_not_a_panic() {
        let info = TilesetInfo {
            name: "ghost".into(),
            image: Some("/nonexistent/ghost.png".into()),
            tile_width: 32,
            tile_height: 32,
            columns: 1,
            tile_count: 1,
            margin: 0,
            spacing: 0,
        };
        let err = load_tileset_image(&info).map(|_| ()).unwrap_err();
        assert!(matches!(err, TilesetImageError::Read { .. }), "{err}");
        let collection = TilesetInfo {
            image: None,
            ..info
        };
        let err = load_tileset_image(&collection).map(|_| ()).unwrap_err();
        assert!(matches!(err, TilesetImageError::NoImage(_)), "{err}");
    }

    #[test]
    fn default_town_tileset_decodes() {
        let map = TownMap::load_tmx(TownMap::default_town_path()).unwrap();
        let image = load_tileset_image(&map.tilesets()[0]).unwrap();
        assert_eq!(image.width(), 256);
        assert_eq!(image.height(), 256);
    }
}
