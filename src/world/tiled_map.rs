//! Loading a [`TownMap`] from a Tiled `.tmx` file (the authoring convention is in
//! `docs/maps.md`).
//!
//! - map property `world` (string): the world's name;
//! - tile layer `collision`: any non-empty tile blocks movement; every other tile layer is
//!   drawn (bottom to top) and kept as a [`VisualLayer`];
//! - object layers `sectors`, `arenas`, `objects`, `spawns`: rectangles named after the
//!   address part they cover (spawns may also be points). A tile belongs to a rectangle when the
//!   tile's centre is inside it. Arenas lie inside one sector and game objects inside one
//!   arena; their containers are found by position, and an optional `sector` / `arena` string
//!   property is checked against it.
//!
//! Anything wrong is a [`MapError`] naming the file, never a panic or an unbounded allocation.
//! Every file is first streamed through the size checks of [`tmx_scan`](super::tmx_scan)
//! (declared tile counts, layer sizes and data lengths, compressed data, element counts) before
//! the `tiled` crate parses it, since `tiled` allocates from what a file declares and indexes
//! tile data without checking its length.

use std::cell::RefCell;
use std::collections::HashMap;
use std::io::{Cursor, Read};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;

use tiled::{LayerType, ObjectShape, PropertyValue, TileLayer};

use super::TileCoord;
use super::address::{ADDRESS_SEPARATOR, Address};
use super::error::{MapError, MapProblem};
use super::map::{MapParts, Tile, TilesetInfo, TownMap, VisualLayer, VisualTile};
use super::tmx_scan::{MAX_MAP_FILE_BYTES, MAX_NAME_BYTES, Prescan, clip};
use crate::files::{ReadError, read_at_most};

/// The most memory the names copied onto a map's tiles may take (see
/// [`MapProblem::NamesTooLarge`]).
const MAX_NAME_MEMORY: u64 = 64 << 20;

/// Name of the map property holding the world name.
pub const WORLD_PROPERTY: &str = "world";
/// Name of the collision tile layer.
pub const COLLISION_LAYER: &str = "collision";
/// Name of the sectors object layer.
pub const SECTORS_LAYER: &str = "sectors";
/// Name of the arenas object layer.
pub const ARENAS_LAYER: &str = "arenas";
/// Name of the game-objects object layer.
pub const OBJECTS_LAYER: &str = "objects";
/// Name of the spawning-locations object layer.
pub const SPAWNS_LAYER: &str = "spawns";

/// Serves the already-read map bytes to the `tiled` loader, and every other file it asks for
/// (tilesets, templates) after reading it with a size limit and running the same size checks
/// over it; a problem found there is kept in `problem` for the loader to report.
struct PreloadedReader {
    path: PathBuf,
    bytes: Arc<[u8]>,
    scan: Rc<RefCell<Prescan>>,
    problem: Rc<RefCell<Option<MapProblem>>>,
}

impl tiled::ResourceReader for PreloadedReader {
    type Resource = Box<dyn Read>;
    type Error = std::io::Error;

    fn read_from(&mut self, path: &Path) -> Result<Self::Resource, Self::Error> {
        if path == self.path {
            return Ok(Box::new(Cursor::new(Arc::clone(&self.bytes))));
        }
        let checked = read_limited(path).and_then(|bytes| {
            self.scan.borrow_mut().scan(&bytes)?;
            Ok(bytes)
        });
        match checked {
            Ok(bytes) => Ok(Box::new(Cursor::new(bytes))),
            // The Tiled parser names the file it could not read.
            Err(MapProblem::Io(err)) => Err(err),
            Err(problem) => {
                let message = format!("{}: {problem}", path.display());
                self.problem.borrow_mut().get_or_insert(problem);
                Err(std::io::Error::other(message))
            }
        }
    }
}

/// Reads a whole file of at most [`MAX_MAP_FILE_BYTES`] (also for files whose size the file
/// system does not report, like devices).
fn read_limited(path: &Path) -> Result<Vec<u8>, MapProblem> {
    read_at_most(path, MAX_MAP_FILE_BYTES).map_err(|err| match err {
        ReadError::Io(err) => MapProblem::Io(err),
        ReadError::TooLarge { bytes, limit } => MapProblem::FileTooLarge {
            file: clip(&path.display().to_string(), 200),
            bytes,
            limit,
        },
    })
}

/// An area rectangle from an object layer.
struct Area {
    layer: &'static str,
    id: u32,
    name: String,
    tiles: Vec<TileCoord>,
    properties: HashMap<String, String>,
}

impl TownMap {
    /// The default town shipped with the crate: the map of
    /// [`ShippedTown::default_town`](super::ShippedTown::default_town),
    /// `assets/maps/willowbrook.tmx`. Games ship their own maps and pass their own path to
    /// [`load_tmx`](Self::load_tmx).
    pub fn default_town_path() -> PathBuf {
        super::ShippedTown::default_town().map_path()
    }

    /// Loads a town from a Tiled map (see the module docs and `docs/maps.md`).
    pub fn load_tmx(path: impl AsRef<Path>) -> Result<TownMap, MapError> {
        let path = path.as_ref();
        let err = |problem| MapError::new(path, problem);
        let bytes: Arc<[u8]> = read_limited(path).map_err(err)?.into();
        // Sizes first: nothing below allocates more than the checked file declares.
        let scan = Rc::new(RefCell::new(Prescan::default()));
        scan.borrow_mut().scan(&bytes).map_err(err)?;
        let problem = Rc::new(RefCell::new(None));
        let reader = PreloadedReader {
            path: path.to_path_buf(),
            bytes: Arc::clone(&bytes),
            scan,
            problem: Rc::clone(&problem),
        };
        let map = tiled::Loader::with_reader(reader)
            .load_tmx_map(path)
            .map_err(|e| match problem.borrow_mut().take() {
                Some(found) => err(found),
                None => err(MapProblem::Tiled(e)),
            })?;
        let mut town = convert(&map).map_err(err)?;
        town.set_source(path.to_path_buf());
        Ok(town)
    }
}

/// Converts a parsed Tiled map into a [`TownMap`], validating the convention.
/// Turns a parsed Tiled map into a [`TownMap`], in four steps: the map's frame and world name
/// ([`map_frame`]), its layers sorted into collision, visuals and the four area layers
/// ([`read_layers`]), the areas painted onto tiles sector → arena → object → spawn, each inside
/// its container ([`paint_areas`]), and the tilesets the renderer needs.
fn convert(map: &tiled::Map) -> Result<TownMap, MapProblem> {
    let frame = map_frame(map)?;
    let layers = read_layers(map, &frame)?;
    check_name_memory(
        u64::from(frame.width) * u64::from(frame.height),
        &frame.world,
        [
            &layers.sectors,
            &layers.arenas,
            &layers.objects,
            &layers.spawns,
        ],
    )?;
    let tiles = paint_areas(&frame, &layers)?;
    Ok(TownMap::from_parts(MapParts {
        world: frame.world,
        width: frame.width,
        height: frame.height,
        tile_width: frame.tile_width,
        tile_height: frame.tile_height,
        tiles,
        visual_layers: layers.visual_layers,
        tilesets: tileset_infos(map),
        source: None,
    }))
}

/// A map's size and world name.
struct MapFrame {
    world: String,
    width: u32,
    height: u32,
    tile_width: u32,
    tile_height: u32,
}

/// The layers a town is made of.
struct TownLayers {
    collision: Vec<bool>,
    visual_layers: Vec<VisualLayer>,
    sectors: Vec<Area>,
    arenas: Vec<Area>,
    objects: Vec<Area>,
    spawns: Vec<Area>,
}

/// Checks the map is a finite orthogonal grid of tiles and reads its world name.
fn map_frame(map: &tiled::Map) -> Result<MapFrame, MapProblem> {
    if map.orientation != tiled::Orientation::Orthogonal {
        return Err(MapProblem::NotOrthogonal(format!("{:?}", map.orientation)));
    }
    if map.infinite() {
        return Err(MapProblem::Infinite);
    }
    let (width, height) = (map.width, map.height);
    let (tw, th) = (map.tile_width, map.tile_height);
    if width == 0 || height == 0 || tw == 0 || th == 0 {
        return Err(MapProblem::EmptyMap {
            width,
            height,
            tile_width: tw,
            tile_height: th,
        });
    }
    let world = match map.properties.get(WORLD_PROPERTY) {
        Some(PropertyValue::StringValue(s)) if !s.trim().is_empty() => s.trim().to_owned(),
        _ => return Err(MapProblem::MissingWorldName),
    };
    if world.len() > MAX_NAME_BYTES {
        return Err(MapProblem::InvalidName {
            layer: "map property".to_owned(),
            id: 0,
            name: clip(&world, 80),
            reason: format!("the world name is longer than {MAX_NAME_BYTES} bytes"),
        });
    }
    Address::world(&world).map_err(MapProblem::Address)?;
    Ok(MapFrame {
        world,
        width,
        height,
        tile_width: tw,
        tile_height: th,
    })
}

/// Sorts the layers: the collision tile layer, the visual tile layers, and the four reserved
/// object layers read as areas; a reserved name on the wrong kind of layer, a duplicate or a
/// missing one is an error.
fn read_layers(map: &tiled::Map, frame: &MapFrame) -> Result<TownLayers, MapProblem> {
    let (width, height) = (frame.width, frame.height);
    let (tw, th) = (frame.tile_width, frame.tile_height);
    let mut layers = Vec::new();
    flatten_layers(map.layers(), &mut layers);

    let mut collision: Option<Vec<bool>> = None;
    let mut visual_layers = Vec::new();
    let mut object_layers: HashMap<&'static str, Vec<Area>> = HashMap::new();
    for layer in &layers {
        let reserved = [SECTORS_LAYER, ARENAS_LAYER, OBJECTS_LAYER, SPAWNS_LAYER]
            .into_iter()
            .find(|n| *n == layer.name);
        match layer.layer_type() {
            LayerType::Tiles(tiles) => {
                if let Some(name) = reserved {
                    return Err(MapProblem::WrongLayerKind {
                        name: name.to_owned(),
                        expected: "object",
                    });
                }
                let grid = read_tile_layer(map, &layer.name, &tiles)?;
                if layer.name == COLLISION_LAYER {
                    if collision.is_some() {
                        return Err(MapProblem::DuplicateLayer(COLLISION_LAYER.to_owned()));
                    }
                    collision = Some(grid.iter().map(Option::is_some).collect());
                } else {
                    visual_layers.push(VisualLayer {
                        name: layer.name.clone(),
                        visible: layer.visible,
                        tiles: grid,
                    });
                }
            }
            LayerType::Objects(objects) => {
                if layer.name == COLLISION_LAYER {
                    return Err(MapProblem::WrongLayerKind {
                        name: COLLISION_LAYER.to_owned(),
                        expected: "tile",
                    });
                }
                // Other object layers (lights, notes…) are the author's business.
                let Some(name) = reserved else { continue };
                if object_layers.contains_key(name) {
                    return Err(MapProblem::DuplicateLayer(name.to_owned()));
                }
                let mut covered = 0;
                let areas = objects
                    .objects()
                    .map(|o| read_area(name, &o, width, height, tw, th, &mut covered))
                    .collect::<Result<Vec<_>, _>>()?;
                object_layers.insert(name, areas);
            }
            LayerType::Image(_) | LayerType::Group(_) => {
                if reserved.is_some() || layer.name == COLLISION_LAYER {
                    let expected = if reserved.is_some() { "object" } else { "tile" };
                    return Err(MapProblem::WrongLayerKind {
                        name: clip(&layer.name, 80),
                        expected,
                    });
                }
            }
        }
    }
    let collision = collision.ok_or(MapProblem::MissingLayer {
        name: COLLISION_LAYER.to_owned(),
        kind: "tile",
    })?;
    let mut take = |name: &'static str| {
        object_layers.remove(name).ok_or(MapProblem::MissingLayer {
            name: name.to_owned(),
            kind: "object",
        })
    };
    Ok(TownLayers {
        sectors: take(SECTORS_LAYER)?,
        arenas: take(ARENAS_LAYER)?,
        objects: take(OBJECTS_LAYER)?,
        spawns: take(SPAWNS_LAYER)?,
        collision,
        visual_layers,
    })
}

/// Paints the areas onto the tiles: sectors, then arenas (each inside one sector), objects
/// (inside one arena), spawn points (on walkable tiles); two areas of a level may not overlap.
fn paint_areas(frame: &MapFrame, layers: &TownLayers) -> Result<Vec<Tile>, MapProblem> {
    let world = &frame.world;
    let width = frame.width;
    let TownLayers {
        collision,
        sectors,
        arenas,
        objects,
        spawns,
        ..
    } = layers;
    let w = width as usize;
    let mut tiles: Vec<Tile> = collision
        .iter()
        .map(|&blocked| Tile {
            collision: blocked,
            world: world.clone(),
            ..Tile::default()
        })
        .collect();
    let at = |c: TileCoord| c.y as usize * w + c.x as usize;

    for area in sectors {
        for &c in &area.tiles {
            let Some(tile) = tiles.get_mut(at(c)) else {
                continue;
            };
            match &tile.sector {
                Some(other) if *other != area.name => {
                    return Err(overlap(area, other, c));
                }
                _ => tile.sector = Some(area.name.clone()),
            }
        }
    }
    for area in arenas {
        let sector = container(area, &tiles, w, "sector", |t| t.sector.as_ref())?;
        check_claim(area, "sector", &sector)?;
        for &c in &area.tiles {
            let Some(tile) = tiles.get_mut(at(c)) else {
                continue;
            };
            match &tile.arena {
                Some(other) if *other != area.name => return Err(overlap(area, other, c)),
                _ => tile.arena = Some(area.name.clone()),
            }
        }
    }
    for area in objects {
        let arena = container(area, &tiles, w, "arena", |t| t.arena.as_ref())?;
        check_claim(area, "arena", &arena)?;
        let sector = container(area, &tiles, w, "sector", |t| t.sector.as_ref())?;
        check_claim(area, "sector", &sector)?;
        for &c in &area.tiles {
            let Some(tile) = tiles.get_mut(at(c)) else {
                continue;
            };
            match &tile.game_object {
                Some(other) if *other != area.name => return Err(overlap(area, other, c)),
                _ => tile.game_object = Some(area.name.clone()),
            }
        }
    }
    for area in spawns {
        for &c in &area.tiles {
            let Some(tile) = tiles.get_mut(at(c)) else {
                continue;
            };
            if tile.collision {
                return Err(MapProblem::SpawnBlocked {
                    name: area.name.clone(),
                    tile: c,
                });
            }
            match &tile.spawning_location {
                Some(other) if *other != area.name => return Err(overlap(area, other, c)),
                _ => tile.spawning_location = Some(area.name.clone()),
            }
        }
    }
    Ok(tiles)
}

/// What the renderer needs to know of each tileset.
fn tileset_infos(map: &tiled::Map) -> Vec<TilesetInfo> {
    map.tilesets()
        .iter()
        .map(|ts| TilesetInfo {
            name: ts.name.clone(),
            image: ts.image.as_ref().map(|i| i.source.clone()),
            tile_width: ts.tile_width,
            tile_height: ts.tile_height,
            columns: ts.columns,
            tile_count: ts.tilecount,
            margin: ts.margin,
            spacing: ts.spacing,
        })
        .collect()
}

/// Refuses maps whose names, copied onto every tile they cover (and the idle event of every
/// object tile), would take more than [`MAX_NAME_MEMORY`].
fn check_name_memory(
    map_tiles: u64,
    world: &str,
    [sectors, arenas, objects, spawns]: [&[Area]; 4],
) -> Result<(), MapProblem> {
    // A string's heap block plus the allocator's bookkeeping.
    let string = |len: usize| len as u64 + 24;
    let longest = |areas: &[Area]| areas.iter().map(|a| a.name.len()).max().unwrap_or(0);
    // One B-tree leaf of idle events per object tile.
    let event_node = 11 * std::mem::size_of::<super::TileEvent>() as u64 + 64;
    let object_key = world.len() + longest(sectors) + longest(arenas) + 3;
    let mut total = map_tiles.saturating_mul(string(world.len()));
    for area in sectors.iter().chain(arenas).chain(spawns) {
        let per_tile = string(area.name.len());
        total = total.saturating_add(per_tile.saturating_mul(area.tiles.len() as u64));
    }
    for area in objects {
        let per_tile = string(area.name.len()) + event_node + string(object_key + area.name.len());
        total = total.saturating_add(per_tile.saturating_mul(area.tiles.len() as u64));
    }
    if total > MAX_NAME_MEMORY {
        return Err(MapProblem::NamesTooLarge {
            mib: total >> 20,
            limit_mib: MAX_NAME_MEMORY >> 20,
        });
    }
    Ok(())
}

fn overlap(area: &Area, other: &str, tile: TileCoord) -> MapProblem {
    MapProblem::Overlap {
        layer: area.layer.to_owned(),
        first: other.to_owned(),
        second: area.name.clone(),
        tile,
    }
}

/// The single container (sector or arena) under every tile of `area`.
fn container(
    area: &Area,
    tiles: &[Tile],
    width: usize,
    kind: &'static str,
    get: impl Fn(&Tile) -> Option<&String>,
) -> Result<String, MapProblem> {
    let mut found: Option<&String> = None;
    for &c in &area.tiles {
        let inside = tiles
            .get(c.y as usize * width + c.x as usize)
            .and_then(&get);
        let Some(name) = inside else {
            return Err(MapProblem::NotContained {
                layer: area.layer.to_owned(),
                id: area.id,
                name: area.name.clone(),
                container: kind,
                tile: c,
            });
        };
        match found {
            Some(first) if first != name => {
                return Err(MapProblem::SpansContainers {
                    layer: area.layer.to_owned(),
                    id: area.id,
                    name: area.name.clone(),
                    container: kind,
                    first: first.clone(),
                    second: name.clone(),
                });
            }
            _ => found = Some(name),
        }
    }
    // `read_area` guarantees at least one tile, so `found` is set.
    found.cloned().ok_or_else(|| MapProblem::CoversNoTile {
        layer: area.layer.to_owned(),
        id: area.id,
        name: area.name.clone(),
    })
}

/// Checks an optional `sector`/`arena` property against where the area really lies.
fn check_claim(area: &Area, property: &'static str, actual: &str) -> Result<(), MapProblem> {
    match area.properties.get(property) {
        Some(claimed) if claimed.trim() != actual => Err(MapProblem::ContainerMismatch {
            layer: area.layer.to_owned(),
            id: area.id,
            name: area.name.clone(),
            property,
            claimed: claimed.clone(),
            actual: actual.to_owned(),
        }),
        _ => Ok(()),
    }
}

/// Layers in drawing order, group layers expanded.
fn flatten_layers<'m>(
    layers: impl Iterator<Item = tiled::Layer<'m>>,
    out: &mut Vec<tiled::Layer<'m>>,
) {
    for layer in layers {
        if let LayerType::Group(group) = layer.layer_type() {
            flatten_layers(group.layers(), out);
        } else {
            out.push(layer);
        }
    }
}

/// Reads a finite tile layer into a row-major grid, checking its size and tile ids.
fn read_tile_layer(
    map: &tiled::Map,
    name: &str,
    layer: &TileLayer<'_>,
) -> Result<Vec<Option<VisualTile>>, MapProblem> {
    let TileLayer::Finite(finite) = layer else {
        return Err(MapProblem::Infinite);
    };
    if finite.width() != map.width || finite.height() != map.height {
        return Err(MapProblem::LayerSize {
            layer: clip(name, 80),
            width: finite.width(),
            height: finite.height(),
            map_width: map.width,
            map_height: map.height,
        });
    }
    let mut grid = Vec::with_capacity(map.width as usize * map.height as usize);
    for y in 0..map.height as i32 {
        for x in 0..map.width as i32 {
            let Some(t) = finite.get_tile(x, y) else {
                grid.push(None);
                continue;
            };
            let tileset = t.get_tileset();
            let index = t.tileset_index();
            if t.id() >= tileset.tilecount || index > usize::from(u16::MAX) {
                return Err(MapProblem::UnknownTile {
                    layer: clip(name, 80),
                    tile: TileCoord::new(x, y),
                    id: t.id(),
                    tileset: clip(&tileset.name, 80),
                });
            }
            grid.push(Some(VisualTile {
                tileset: index as u16,
                id: t.id(),
                flip_h: t.flip_h,
                flip_v: t.flip_v,
                flip_d: t.flip_d,
            }));
        }
    }
    Ok(grid)
}

/// Reads an area object: validated name, rectangle (or point, for spawns) inside the map, and
/// the tiles whose centres it contains.
fn read_area(
    layer: &'static str,
    object: &tiled::Object<'_>,
    width: u32,
    height: u32,
    tw: u32,
    th: u32,
    covered: &mut u64,
) -> Result<Area, MapProblem> {
    let id = object.id();
    let raw_name = &object.name;
    let name = raw_name.trim().to_owned();
    let invalid = |reason: &str| MapProblem::InvalidName {
        layer: layer.to_owned(),
        id,
        name: clip(raw_name, 80),
        reason: reason.to_owned(),
    };
    if name.len() > MAX_NAME_BYTES {
        return Err(invalid(&format!(
            "names are at most {MAX_NAME_BYTES} bytes"
        )));
    }
    if name.is_empty() {
        return Err(invalid("the name is empty; it is the address part"));
    }
    if name.contains(ADDRESS_SEPARATOR) {
        return Err(invalid("names cannot contain ':'"));
    }
    if name.starts_with('<') {
        return Err(invalid(
            "names cannot start with '<' (reserved for markers)",
        ));
    }
    let shape_err = |expected| MapProblem::BadShape {
        layer: layer.to_owned(),
        id,
        name: name.clone(),
        expected,
    };
    let is_spawn = layer == SPAWNS_LAYER;
    let expected = if is_spawn {
        "rectangle or point"
    } else {
        "rectangle"
    };
    if object.tile_data().is_some() {
        return Err(shape_err(expected));
    }
    let (w, h) = match &object.shape {
        ObjectShape::Rect { width, height } => (*width, *height),
        ObjectShape::Point(..) if is_spawn => (0.0, 0.0),
        _ => return Err(shape_err(expected)),
    };
    if object.rotation != 0.0 {
        return Err(MapProblem::Rotated {
            layer: layer.to_owned(),
            id,
            name,
        });
    }
    let (x, y) = (object.x, object.y);
    let (map_w, map_h) = (width as f32 * tw as f32, height as f32 * th as f32);
    let finite = [x, y, w, h].iter().all(|v| v.is_finite());
    // Half a pixel of slack: editors snap to the grid but may write 0.0001-style values.
    let eps = 0.5;
    if !finite
        || x < -eps
        || y < -eps
        || w < 0.0
        || h < 0.0
        || x + w > map_w + eps
        || y + h > map_h + eps
    {
        return Err(MapProblem::OutsideMap {
            layer: layer.to_owned(),
            id,
            name,
        });
    }
    let (tw, th) = (tw as f32, th as f32);
    let tiles: Vec<TileCoord> = if w == 0.0 && h == 0.0 {
        // A point (or zero-size rectangle) spawn is the tile under it.
        let tx = ((x / tw).floor() as i32).clamp(0, width as i32 - 1);
        let ty = ((y / th).floor() as i32).clamp(0, height as i32 - 1);
        vec![TileCoord::new(tx, ty)]
    } else {
        // Tile t is covered when x <= (t + 0.5)·tw < x + w.
        let first = |start: f32, size: f32| (start / size - 0.5).ceil().max(0.0) as i32;
        let end = |stop: f32, size: f32, max: u32| {
            ((stop / size - 0.5).ceil().max(0.0) as i32).min(max as i32)
        };
        let (x0, x1) = (first(x, tw), end(x + w, tw, width));
        let (y0, y1) = (first(y, th), end(y + h, th, height));
        // Counted before the tiles are listed: many overlapping copies of a map-sized area
        // would otherwise list the map again and again.
        let count = (x1 - x0).max(0) as u64 * (y1 - y0).max(0) as u64;
        let limit = 4 * u64::from(width) * u64::from(height);
        *covered = covered.saturating_add(count);
        if *covered > limit {
            return Err(MapProblem::AreasTooLarge {
                layer: layer.to_owned(),
                limit,
            });
        }
        (y0..y1)
            .flat_map(|ty| (x0..x1).map(move |tx| TileCoord::new(tx, ty)))
            .collect()
    };
    if tiles.is_empty() {
        return Err(MapProblem::CoversNoTile {
            layer: layer.to_owned(),
            id,
            name,
        });
    }
    let properties = object
        .properties
        .iter()
        .filter_map(|(k, v)| match v {
            PropertyValue::StringValue(s) => Some((k.clone(), s.clone())),
            _ => None,
        })
        .collect();
    Ok(Area {
        layer,
        id,
        name,
        tiles,
        properties,
    })
}
