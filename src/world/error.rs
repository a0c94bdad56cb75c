//! Errors of map loading and map building.
//!
//! Every error names the file (or `<in-memory map>` for maps built in code) and says what is
//! wrong precisely enough to fix it in Tiled: which layer, which object id, which tile.

use std::path::{Path, PathBuf};

use super::TileCoord;

/// The path shown for maps built in code ([`TownMap::builder`](super::TownMap::builder),
/// [`TownMap::from_ascii`](super::TownMap::from_ascii)).
pub const IN_MEMORY_MAP: &str = "<in-memory map>";

/// A map could not be loaded or built.
#[derive(Debug, thiserror::Error)]
#[error("map {}: {problem}", path.display())]
pub struct MapError {
    /// The file (or [`IN_MEMORY_MAP`]).
    pub path: PathBuf,
    /// What is wrong (boxed: errors stay small on the happy path's `Result`).
    pub problem: Box<MapProblem>,
}

impl MapError {
    /// An error about `path`.
    pub fn new(path: impl AsRef<Path>, problem: MapProblem) -> Self {
        Self {
            path: path.as_ref().to_path_buf(),
            problem: Box::new(problem),
        }
    }

    /// An error about a map built in code.
    pub fn in_memory(problem: MapProblem) -> Self {
        Self::new(IN_MEMORY_MAP, problem)
    }
}

/// What is wrong with a map.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MapProblem {
    /// The file could not be read.
    #[error("cannot read the file: {0}")]
    Io(#[source] std::io::Error),
    /// The Tiled parser rejected the file (bad XML, bad attributes, missing tileset…).
    #[error("not a valid Tiled map: {0}")]
    Tiled(#[source] tiled::Error),
    /// Only orthogonal maps are supported.
    #[error("the map orientation is {0}; only orthogonal maps are supported")]
    NotOrthogonal(String),
    /// Infinite maps are not supported.
    #[error("infinite maps are not supported; uncheck \"Infinite\" in the map properties")]
    Infinite,
    /// Width, height or tile size is zero.
    #[error("the map is {width}×{height} tiles of {tile_width}×{tile_height} px; all must be > 0")]
    EmptyMap {
        /// Width in tiles.
        width: u32,
        /// Height in tiles.
        height: u32,
        /// Tile width in pixels.
        tile_width: u32,
        /// Tile height in pixels.
        tile_height: u32,
    },
    /// The map would be wider or taller than tile coordinates (`i32`) reach.
    #[error("the map would be {width}×{height} tiles, more than tile coordinates reach")]
    TooLarge {
        /// Width in tiles.
        width: u64,
        /// Height in tiles.
        height: u64,
    },
    /// The map property `world` is missing, not a string, or empty.
    #[error("the map property `world` (the world's name, a string) is missing or empty")]
    MissingWorldName,
    /// A required layer is missing.
    #[error("the {kind} layer `{name}` is missing")]
    MissingLayer {
        /// Its name.
        name: String,
        /// `tile` or `object`.
        kind: &'static str,
    },
    /// A reserved layer name is used by the wrong kind of layer.
    #[error("layer `{name}` must be a {expected} layer")]
    WrongLayerKind {
        /// Its name.
        name: String,
        /// `tile` or `object`.
        expected: &'static str,
    },
    /// Two layers have the same reserved name.
    #[error("there are two layers named `{0}`")]
    DuplicateLayer(String),
    /// A tile layer's size differs from the map's.
    #[error(
        "tile layer `{layer}` is {width}×{height} tiles but the map is {map_width}×{map_height}"
    )]
    LayerSize {
        /// Layer name.
        layer: String,
        /// Layer width.
        width: u32,
        /// Layer height.
        height: u32,
        /// Map width.
        map_width: u32,
        /// Map height.
        map_height: u32,
    },
    /// A tile layer's data is shorter than its size.
    #[error("tile layer `{layer}` declares {expected} tiles but its data holds {found}")]
    LayerDataTooShort {
        /// Layer name.
        layer: String,
        /// Width × height.
        expected: usize,
        /// Tiles in the data.
        found: usize,
    },
    /// A tile layer's data holds more tiles than its size.
    #[error("tile layer `{layer}` declares {expected} tiles but its data holds {found}")]
    LayerDataTooLong {
        /// Layer name.
        layer: String,
        /// Width × height.
        expected: usize,
        /// Tiles in the data.
        found: usize,
    },
    /// The file is not well-formed XML.
    #[error("not a valid Tiled map: XML error {0}")]
    Xml(String),
    /// A file the map needs is larger than the loader reads.
    #[error("{file} is {bytes} bytes; the loader reads files of at most {limit} bytes")]
    FileTooLarge {
        /// The file (the map or a tileset/template it names).
        file: String,
        /// Its size.
        bytes: u64,
        /// [`MAX_MAP_FILE_BYTES`](super::MAX_MAP_FILE_BYTES).
        limit: u64,
    },
    /// The map has more tiles than the loader accepts.
    #[error("the map is {width}×{height} tiles; at most {limit} tiles (e.g. 512×512) are accepted")]
    TooManyTiles {
        /// Width in tiles.
        width: u64,
        /// Height in tiles.
        height: u64,
        /// [`MAX_MAP_TILES`](super::MAX_MAP_TILES).
        limit: u64,
    },
    /// The tilesets together declare too many tiles.
    #[error(
        "tileset `{tileset}` declares {tilecount} tiles; all tilesets together may declare at \
         most {limit}"
    )]
    TooManyTilesetTiles {
        /// The tileset that went over the limit.
        tileset: String,
        /// Its `tilecount`.
        tilecount: u64,
        /// [`MAX_TILESET_TILES`](super::MAX_TILESET_TILES).
        limit: u64,
    },
    /// The tile layers together hold too many tiles.
    #[error(
        "tile layer `{layer}` takes the tile layers over {limit} tiles in all (width × height \
         summed over layers)"
    )]
    TooManyLayerTiles {
        /// The layer that went over the limit.
        layer: String,
        /// [`MAX_LAYER_TILES`](super::MAX_LAYER_TILES).
        limit: u64,
    },
    /// The files have too many XML elements.
    #[error("the map has more than {limit} XML elements (objects, properties, tiles…)")]
    TooManyElements {
        /// [`MAX_ELEMENTS`](super::MAX_ELEMENTS).
        limit: u64,
    },
    /// The areas of an object layer cover too many tiles in all (they overlap many times).
    #[error(
        "the {layer} objects cover more than {limit} tiles in all; areas of one layer must not \
         overlap"
    )]
    AreasTooLarge {
        /// Object layer.
        layer: String,
        /// The limit (four times the map's tiles).
        limit: u64,
    },
    /// The names copied onto the map's tiles would take too much memory.
    #[error(
        "the world, area and object names copied onto every tile would take about {mib} MiB \
         (at most {limit_mib} MiB): shorten the names or make the map smaller"
    )]
    NamesTooLarge {
        /// The estimate in MiB.
        mib: u64,
        /// The limit in MiB.
        limit_mib: u64,
    },
    /// A tile layer uses a format this loader does not read.
    #[error(
        "tile layer `{layer}` uses {format}; save tile layers as CSV or uncompressed Base64 \
         (Map → Map Properties → Tile Layer Format)"
    )]
    UnsupportedLayerFormat {
        /// Layer name.
        layer: String,
        /// The encoding/compression found.
        format: String,
    },
    /// A tile refers to an id its tileset does not have.
    #[error(
        "tile layer `{layer}` at {tile} uses tile {id} which tileset `{tileset}` does not have"
    )]
    UnknownTile {
        /// Layer name.
        layer: String,
        /// Where.
        tile: TileCoord,
        /// The tileset-local id.
        id: u32,
        /// Tileset name.
        tileset: String,
    },
    /// An area object has a shape other than a rectangle (or a point, for spawns).
    #[error("{layer} object {id} `{name}` must be a {expected}")]
    BadShape {
        /// Object layer.
        layer: String,
        /// Object id.
        id: u32,
        /// Object name.
        name: String,
        /// What shape was expected.
        expected: &'static str,
    },
    /// An object is rotated.
    #[error("{layer} object {id} `{name}` is rotated; rotation must be 0")]
    Rotated {
        /// Object layer.
        layer: String,
        /// Object id.
        id: u32,
        /// Object name.
        name: String,
    },
    /// An object's name is empty or not a valid address part.
    #[error("{layer} object {id} has an invalid name {name:?}: {reason}")]
    InvalidName {
        /// Object layer.
        layer: String,
        /// Object id.
        id: u32,
        /// The name as written.
        name: String,
        /// Why it is invalid.
        reason: String,
    },
    /// An object reaches outside the map.
    #[error("{layer} object {id} `{name}` lies (partly) outside the map")]
    OutsideMap {
        /// Object layer.
        layer: String,
        /// Object id.
        id: u32,
        /// Object name.
        name: String,
    },
    /// An object's rectangle contains no tile centre.
    #[error(
        "{layer} object {id} `{name}` covers no tile (a tile belongs to it when the tile's centre is inside)"
    )]
    CoversNoTile {
        /// Object layer.
        layer: String,
        /// Object id.
        id: u32,
        /// Object name.
        name: String,
    },
    /// Two different areas of the same layer overlap on a tile.
    #[error("{layer} `{first}` and `{second}` overlap at tile {tile}")]
    Overlap {
        /// Object layer.
        layer: String,
        /// The area already on the tile.
        first: String,
        /// The area being added.
        second: String,
        /// The first shared tile.
        tile: TileCoord,
    },
    /// An arena or game object is not inside the area that must contain it.
    #[error("{layer} object {id} `{name}` is not inside any {container} (tile {tile})")]
    NotContained {
        /// Object layer.
        layer: String,
        /// Object id.
        id: u32,
        /// Object name.
        name: String,
        /// `sector` or `arena`.
        container: &'static str,
        /// The first tile outside.
        tile: TileCoord,
    },
    /// An arena or game object lies across two containers.
    #[error("{layer} object {id} `{name}` spans two {container}s: `{first}` and `{second}`")]
    SpansContainers {
        /// Object layer.
        layer: String,
        /// Object id.
        id: u32,
        /// Object name.
        name: String,
        /// `sector` or `arena`.
        container: &'static str,
        /// One container.
        first: String,
        /// The other.
        second: String,
    },
    /// An object's explicit `sector`/`arena` property disagrees with where it lies.
    #[error(
        "{layer} object {id} `{name}` has property {property}={claimed:?} but lies in `{actual}`"
    )]
    ContainerMismatch {
        /// Object layer.
        layer: String,
        /// Object id.
        id: u32,
        /// Object name.
        name: String,
        /// `sector` or `arena`.
        property: &'static str,
        /// What the property says.
        claimed: String,
        /// Where it lies.
        actual: String,
    },
    /// A spawning location is on a blocked tile.
    #[error("spawn `{name}` is on blocked tile {tile}")]
    SpawnBlocked {
        /// Spawn name.
        name: String,
        /// The tile.
        tile: TileCoord,
    },
    /// A coordinate given to a builder is outside the map.
    #[error("tile {0} is outside the map")]
    TileOutOfBounds(TileCoord),
    /// An address given to a builder belongs to another world.
    #[error("address `{address}` is not in world `{world}`")]
    WrongWorld {
        /// The address.
        address: String,
        /// The map's world.
        world: String,
    },
    /// An address given to a builder is malformed.
    #[error("invalid address: {0}")]
    Address(#[from] super::AddressError),
    /// An ASCII map row has the wrong length.
    #[error("ASCII row {row} has {found} columns, expected {expected}")]
    RaggedRow {
        /// Row index.
        row: usize,
        /// Its length.
        found: usize,
        /// The first row's length.
        expected: usize,
    },
    /// An ASCII map uses a symbol missing from the legend.
    #[error("ASCII symbol {symbol:?} at {tile} is not in the legend")]
    UnknownSymbol {
        /// The symbol.
        symbol: char,
        /// Where.
        tile: TileCoord,
    },
}
