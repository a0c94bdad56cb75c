//! The town: a tile grid with collision, `world:sector:arena:game_object` addresses, tile
//! events, the address index with fall-backs, vision and path finding (SPEC §1).
//!
//! **Layer** (see `tests/layers.rs`): the ground: imports no other module of the crate.

use bevy::prelude::*;
use serde::{Deserialize, Serialize};

/// A tile's column and row on the map (x to the right, y down, as in Tiled).
///
/// Serialised as `[x, y]`.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Default,
    Reflect,
    Serialize,
    Deserialize,
)]
#[serde(from = "[i32; 2]", into = "[i32; 2]")]
pub struct TileCoord {
    /// Column.
    pub x: i32,
    /// Row.
    pub y: i32,
}

impl TileCoord {
    /// A coordinate.
    pub const fn new(x: i32, y: i32) -> Self {
        Self { x, y }
    }

    /// Euclidean distance to `other`, in tiles.
    pub fn distance(self, other: Self) -> f32 {
        let dx = (self.x - other.x) as f32;
        let dy = (self.y - other.y) as f32;
        (dx * dx + dy * dy).sqrt()
    }
}

/// `[x, y]`, as error messages and the movement log show tiles.
impl std::fmt::Display for TileCoord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "[{}, {}]", self.x, self.y)
    }
}

impl From<[i32; 2]> for TileCoord {
    fn from([x, y]: [i32; 2]) -> Self {
        Self { x, y }
    }
}

impl From<TileCoord> for [i32; 2] {
    fn from(c: TileCoord) -> Self {
        [c.x, c.y]
    }
}

/// Something happening on a tile: `(subject, predicate, object, description)`.
///
/// A tile that holds a game object starts with the idle event `("w:s:a:o", None, None, None)`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Reflect, Serialize, Deserialize)]
pub struct TileEvent {
    /// Who or what acts (a persona name or a full object address).
    pub subject: String,
    /// The verb (`None` = idle).
    pub predicate: Option<String>,
    /// What is acted on.
    pub object: Option<String>,
    /// A human-readable description.
    pub description: Option<String>,
}

impl TileEvent {
    /// The idle event of `subject`.
    pub fn idle(subject: impl Into<String>) -> Self {
        Self {
            subject: subject.into(),
            predicate: None,
            object: None,
            description: None,
        }
    }
}

mod address;
mod error;
pub(crate) mod map;
pub mod path;
mod tiled_map;
mod tmx_scan;
mod town;

pub use address::{
    ADDRESS_SEPARATOR, ActionAddress, Address, AddressError, AddressLevel, PERSONA_MARKER,
    RANDOM_MARKER, SPAWN_LOC_MARKER, WAITING_MARKER, spawn_key,
};
pub use error::{IN_MEMORY_MAP, MapError, MapProblem};
pub use map::{
    ResolveError, ResolveLevel, ResolvedAddress, Tile, TilesetInfo, TownMap, TownMapBuilder,
    VisualLayer, VisualTile,
};
pub use path::{
    PathFinder, TARGET_SAMPLE, choose_target_tile, find_path, path_to_address, path_to_any,
    path_toward,
};
pub use tiled_map::{
    ARENAS_LAYER, COLLISION_LAYER, OBJECTS_LAYER, SECTORS_LAYER, SPAWNS_LAYER, WORLD_PROPERTY,
};
pub use tmx_scan::{
    MAX_ELEMENTS, MAX_LAYER_TILES, MAX_MAP_FILE_BYTES, MAX_MAP_TILES, MAX_NAME_BYTES,
    MAX_TILESET_TILES,
};
pub use town::{SHIPPED_TOWNS, ShippedTown, UnknownTown};

/// Registers the world's reflectable types.
///
/// It does not load a map: load one with [`TownMap::load_tmx`] (handling the [`MapError`]) and
/// insert it with `app.insert_resource(map)`, so a bad file is the caller's error to report, not
/// a panic inside a plugin.
#[derive(Debug, Default, Clone, Copy)]
pub struct WorldPlugin;

impl Plugin for WorldPlugin {
    fn build(&self, app: &mut App) {
        app.register_type::<TileCoord>()
            .register_type::<TileEvent>()
            .register_type::<Address>()
            .register_type::<AddressLevel>()
            .register_type::<ActionAddress>()
            .register_type::<ResolveLevel>()
            .register_type::<VisualTile>();
    }
}
