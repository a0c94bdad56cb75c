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
//! Anything wrong is a [`MapError`] naming the file, never a panic. The `tiled` crate indexes
//! tile data without checking its length, so the raw XML is scanned first for tile layers whose
//! data is shorter than their size.

use std::collections::HashMap;
use std::io::{Cursor, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tiled::{LayerType, ObjectShape, PropertyValue, TileLayer};

use super::TileCoord;
use super::address::{ADDRESS_SEPARATOR, Address};
use super::error::{MapError, MapProblem};
use super::map::{MapParts, Tile, TilesetInfo, TownMap, VisualLayer, VisualTile};

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

/// Serves the already-read map bytes to the `tiled` loader and files (tilesets) from disk.
struct PreloadedReader {
    path: PathBuf,
    bytes: Arc<[u8]>,
}

impl tiled::ResourceReader for PreloadedReader {
    type Resource = Box<dyn Read>;
    type Error = std::io::Error;

    fn read_from(&mut self, path: &Path) -> Result<Self::Resource, Self::Error> {
        if path == self.path {
            return Ok(Box::new(Cursor::new(Arc::clone(&self.bytes))));
        }
        Ok(Box::new(std::io::BufReader::new(std::fs::File::open(
            path,
        )?)))
    }
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
    /// The default town shipped with the crate, `assets/maps/willowbrook.tmx` under this crate's
    /// directory at build time. Games ship their own maps and pass their own path to
    /// [`load_tmx`](Self::load_tmx).
    pub fn default_town_path() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/maps/willowbrook.tmx")
    }

    /// Loads a town from a Tiled map (see the module docs and `docs/maps.md`).
    pub fn load_tmx(path: impl AsRef<Path>) -> Result<TownMap, MapError> {
        let path = path.as_ref();
        let err = |problem| MapError::new(path, problem);
        let bytes: Arc<[u8]> = std::fs::read(path)
            .map_err(|e| err(MapProblem::Io(e)))?
            .into();
        let reader = PreloadedReader {
            path: path.to_path_buf(),
            bytes: Arc::clone(&bytes),
        };
        let map = tiled::Loader::with_reader(reader)
            .load_tmx_map(path)
            .map_err(|e| err(MapProblem::Tiled(e)))?;
        check_layer_data(&String::from_utf8_lossy(&bytes)).map_err(err)?;
        let mut town = convert(&map).map_err(err)?;
        town.set_source(path.to_path_buf());
        Ok(town)
    }
}

/// Scans the raw XML for `<layer>` elements whose `<data>` holds fewer tiles than
/// `width × height` (the `tiled` crate would index past its vector) or uses a format we cannot
/// count.
fn check_layer_data(text: &str) -> Result<(), MapProblem> {
    let mut rest = text;
    while let Some(start) = find_tag(rest, "layer") {
        let (attrs, after, self_closing) = read_tag(&rest[start..]);
        rest = &rest[start..][after..];
        if self_closing {
            continue;
        }
        let name = attr(attrs, "name").unwrap_or_default();
        let dim = |key| {
            attr(attrs, key)
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0)
        };
        let expected = dim("width") * dim("height");
        let layer_end = rest.find("</layer>").unwrap_or(rest.len());
        let Some(data_start) = find_tag(&rest[..layer_end], "data") else {
            continue;
        };
        let (data_attrs, data_after, data_closed) = read_tag(&rest[data_start..]);
        let body_start = data_start + data_after;
        let body = if data_closed {
            ""
        } else {
            let body = rest.get(body_start..layer_end).unwrap_or_default();
            &body[..body.find("</data>").unwrap_or(body.len())]
        };
        let body = body.trim();
        let body = body
            .strip_prefix("<![CDATA[")
            .and_then(|b| b.strip_suffix("]]>"))
            .unwrap_or(body)
            .trim();
        let encoding = attr(data_attrs, "encoding");
        let compression = attr(data_attrs, "compression");
        let found = match (encoding.as_deref(), compression.as_deref()) {
            (Some("csv"), None) => {
                if body.is_empty() {
                    0
                } else {
                    body.split(',').count()
                }
            }
            (Some("base64"), None) => {
                let clean: Vec<u8> = body.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
                let padding = clean.iter().rev().take_while(|&&b| b == b'=').count();
                (clean.len() / 4 * 3).saturating_sub(padding) / 4
            }
            (encoding, compression) => {
                // Infinite maps store chunks; they are rejected with a clearer error later.
                if body.starts_with("<chunk") {
                    continue;
                }
                return Err(MapProblem::UnsupportedLayerFormat {
                    layer: name,
                    format: format!(
                        "encoding {:?} with compression {:?}",
                        encoding.unwrap_or("xml"),
                        compression.unwrap_or("none")
                    ),
                });
            }
        };
        if found < expected {
            return Err(MapProblem::LayerDataTooShort {
                layer: name,
                expected,
                found,
            });
        }
    }
    Ok(())
}

/// Byte offset of the next `<tag` element start (not `<tagother`).
fn find_tag(text: &str, tag: &str) -> Option<usize> {
    let needle = format!("<{tag}");
    let mut from = 0;
    while let Some(pos) = text[from..].find(&needle) {
        let at = from + pos;
        let next = text[at + needle.len()..].chars().next();
        if matches!(next, Some(c) if c.is_whitespace() || c == '>' || c == '/') {
            return Some(at);
        }
        from = at + needle.len();
    }
    None
}

/// Splits `<tag attrs...>` at the start of `text`: (attribute text, bytes consumed,
/// self-closing).
fn read_tag(text: &str) -> (&str, usize, bool) {
    let end = text.find('>').unwrap_or(text.len());
    let inner = &text[..end];
    let self_closing = inner.ends_with('/');
    (inner, (end + 1).min(text.len()), self_closing)
}

/// The value of `key="…"` (or `'…'`) in a tag's attribute text.
fn attr(tag: &str, key: &str) -> Option<String> {
    let mut from = 0;
    while let Some(pos) = tag[from..].find(key) {
        let at = from + pos;
        from = at + key.len();
        let before_ok = tag[..at]
            .chars()
            .next_back()
            .is_some_and(char::is_whitespace);
        let after = tag[from..].trim_start();
        let Some(after) = after.strip_prefix('=') else {
            continue;
        };
        let after = after.trim_start();
        let Some(quote) = after.chars().next().filter(|c| *c == '"' || *c == '\'') else {
            continue;
        };
        if !before_ok {
            continue;
        }
        let value = &after[1..];
        return value.find(quote).map(|end| value[..end].to_owned());
    }
    None
}

/// Converts a parsed Tiled map into a [`TownMap`], validating the convention.
fn convert(map: &tiled::Map) -> Result<TownMap, MapProblem> {
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
    Address::world(&world).map_err(MapProblem::Address)?;

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
                let areas = objects
                    .objects()
                    .map(|o| read_area(name, &o, width, height, tw, th))
                    .collect::<Result<Vec<_>, _>>()?;
                object_layers.insert(name, areas);
            }
            LayerType::Image(_) | LayerType::Group(_) => {
                if reserved.is_some() || layer.name == COLLISION_LAYER {
                    let expected = if reserved.is_some() { "object" } else { "tile" };
                    return Err(MapProblem::WrongLayerKind {
                        name: layer.name.clone(),
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
    let sectors = take(SECTORS_LAYER)?;
    let arenas = take(ARENAS_LAYER)?;
    let objects = take(OBJECTS_LAYER)?;
    let spawns = take(SPAWNS_LAYER)?;

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

    for area in &sectors {
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
    for area in &arenas {
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
    for area in &objects {
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
    for area in &spawns {
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

    let tilesets = map
        .tilesets()
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
        .collect();

    Ok(TownMap::from_parts(MapParts {
        world,
        width,
        height,
        tile_width: tw,
        tile_height: th,
        tiles,
        visual_layers,
        tilesets,
        source: None,
    }))
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
            layer: name.to_owned(),
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
                    layer: name.to_owned(),
                    tile: TileCoord::new(x, y),
                    id: t.id(),
                    tileset: tileset.name.clone(),
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
) -> Result<Area, MapProblem> {
    let id = object.id();
    let raw_name = object.name.clone();
    let name = raw_name.trim().to_owned();
    let invalid = |reason: &str| MapProblem::InvalidName {
        layer: layer.to_owned(),
        id,
        name: raw_name.clone(),
        reason: reason.to_owned(),
    };
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
    let (map_w, map_h) = ((width * tw) as f32, (height * th) as f32);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attribute_scanner() {
        let tag = r#"<layer id="1" name="ground" width="4" height='3'"#;
        assert_eq!(attr(tag, "name").as_deref(), Some("ground"));
        assert_eq!(attr(tag, "height").as_deref(), Some("3"));
        assert_eq!(attr(tag, "id").as_deref(), Some("1"));
        assert_eq!(attr(tag, "missing"), None);
        assert_eq!(
            attr(r#"<x myname="a" name="b""#, "name").as_deref(),
            Some("b")
        );
    }

    #[test]
    fn short_csv_data_is_caught() {
        let xml = r#"<map><layer id="1" name="g" width="2" height="2"><data encoding="csv">1,2,3</data></layer></map>"#;
        assert!(matches!(
            check_layer_data(xml),
            Err(MapProblem::LayerDataTooShort {
                expected: 4,
                found: 3,
                ..
            })
        ));
        let ok = r#"<map><layers/><layer name="g" width="2" height="1"><data encoding="csv">
1,0
</data></layer></map>"#;
        assert!(check_layer_data(ok).is_ok());
    }

    #[test]
    fn base64_lengths_and_compression() {
        // 8 bytes = 2 tiles; the layer needs 2.
        let xml = r#"<layer name="g" width="2" height="1"><data encoding="base64">AQAAAAIAAAA=</data></layer>"#;
        assert!(check_layer_data(xml).is_ok());
        let short = r#"<layer name="g" width="3" height="1"><data encoding="base64">AQAAAAIAAAA=</data></layer>"#;
        assert!(matches!(
            check_layer_data(short),
            Err(MapProblem::LayerDataTooShort { found: 2, .. })
        ));
        let zlib = r#"<layer name="g" width="1" height="1"><data encoding="base64" compression="zlib">eJw=</data></layer>"#;
        assert!(matches!(
            check_layer_data(zlib),
            Err(MapProblem::UnsupportedLayerFormat { .. })
        ));
    }
}
