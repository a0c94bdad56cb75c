//! The town grid: tiles, their addresses and events, the address index and its fall-backs.
//!
//! A [`TownMap`] is built once (from a Tiled file by [`TownMap::load_tmx`], or in code by
//! [`TownMapBuilder`] / [`TownMap::from_ascii`]) and then only its tile events change. On
//! construction it derives everything the simulation looks up often:
//! - the **address index** `address → tiles` for `w:s`, `w:s:a`, `w:s:a:o` and
//!   `<spawn_loc>name` (SPEC §1), plus a case-insensitive alias table;
//! - the **place tree** `sector → arena → objects`, to give a persona full spatial memory;
//! - a flat collision grid for path finding;
//! - the idle event `("w:s:a:o", None, None, None)` on every tile that holds a game object.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::path::PathBuf;

use bevy::prelude::*;

use super::address::{Address, AddressLevel, spawn_key};
use super::error::{MapError, MapProblem};
use super::{ActionAddress, TileCoord, TileEvent};

/// One tile of the town.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tile {
    /// Whether the tile blocks movement.
    pub collision: bool,
    /// The world name (every tile has one).
    pub world: String,
    /// The sector the tile belongs to.
    pub sector: Option<String>,
    /// The arena (only set when `sector` is).
    pub arena: Option<String>,
    /// The game object on the tile (only set when `arena` is).
    pub game_object: Option<String>,
    /// The spawning-location name, if personas can start here.
    pub spawning_location: Option<String>,
    /// What is happening on the tile, ordered so iteration is deterministic.
    pub events: BTreeSet<TileEvent>,
}

impl Tile {
    /// The tile's address cut at `level` (shallower if the tile has no deeper parts).
    ///
    /// `None` only if the tile has no valid world name.
    pub fn address(&self, level: AddressLevel) -> Option<Address> {
        let mut addr = Address::world(&self.world).ok()?;
        let parts = [&self.sector, &self.arena, &self.game_object];
        for part in parts.into_iter().take(level.depth() - 1) {
            let Some(name) = part else { break };
            match addr.child(name) {
                Ok(deeper) => addr = deeper,
                Err(_) => break,
            }
        }
        Some(addr)
    }
}

/// A tile of a visual layer: which tileset and which tile in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Reflect)]
pub struct VisualTile {
    /// Index into [`TownMap::tilesets`].
    pub tileset: u16,
    /// The tileset-local tile id (row-major in the tileset image).
    pub id: u32,
    /// Flipped horizontally.
    pub flip_h: bool,
    /// Flipped vertically.
    pub flip_v: bool,
    /// Flipped diagonally (with the two flips, expresses 90° rotations).
    pub flip_d: bool,
}

/// A drawable tile layer of the map, for renderers (the simulation never reads it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VisualLayer {
    /// The layer name as in Tiled (`ground`, `walls`, `furniture`, …).
    pub name: String,
    /// Whether the layer is visible in Tiled.
    pub visible: bool,
    /// `width × height` tiles, row-major (`y * width + x`); `None` = empty.
    pub tiles: Vec<Option<VisualTile>>,
}

impl VisualLayer {
    /// The tile at `(x, y)` given the map width.
    pub fn get(&self, width: u32, c: TileCoord) -> Option<VisualTile> {
        if c.x < 0 || c.y < 0 || c.x as u32 >= width {
            return None;
        }
        let i = c.y as usize * width as usize + c.x as usize;
        self.tiles.get(i).copied().flatten()
    }
}

/// A tileset image as referenced by the map, for renderers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TilesetInfo {
    /// The tileset's name.
    pub name: String,
    /// The image path as resolved by the loader (relative paths are joined to the directory of
    /// the file that names them). `None` for image-collection tilesets.
    pub image: Option<PathBuf>,
    /// Tile width in pixels.
    pub tile_width: u32,
    /// Tile height in pixels.
    pub tile_height: u32,
    /// Tiles per row in the image.
    pub columns: u32,
    /// Number of tiles.
    pub tile_count: u32,
    /// Pixels around the tiles.
    pub margin: u32,
    /// Pixels between tiles.
    pub spacing: u32,
}

/// Which step of the fall-back chain resolved an address (SPEC §1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Reflect)]
pub enum ResolveLevel {
    /// The address itself is in the index (possibly after canonicalising spaces/case).
    Exact,
    /// Unknown object: its arena.
    Arena,
    /// Unknown arena: its sector.
    Sector,
    /// Unknown sector: the persona's living area.
    LivingArea,
    /// Unknown living area: the living area's sector.
    LivingSector,
    /// Nothing known: every walkable tile of the map.
    AnyWalkable,
}

impl ResolveLevel {
    /// Whether resolution had to fall back.
    pub(crate) fn is_fallback(self) -> bool {
        self != Self::Exact
    }
}

/// The outcome of [`TownMap::resolve_address`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResolvedAddress<'m> {
    /// The index key that matched (`w:s:a`, `<spawn_loc>x`, or the world name for
    /// [`ResolveLevel::AnyWalkable`]).
    pub key: &'m str,
    /// Which fall-back produced it.
    pub level: ResolveLevel,
    /// The tiles of that key (never empty).
    pub tiles: &'m BTreeSet<TileCoord>,
}

/// Nothing at all could be resolved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    /// The address, its parents and the living area are unknown and the map has no walkable tile.
    #[error("address {address:?} is unknown and the map has no walkable tile to fall back to")]
    NoWalkableTile {
        /// The requested address.
        address: String,
    },
}

/// The town: a grid of [`Tile`]s and the indexes derived from it (SPEC §1).
///
/// Insert it as a resource after loading it (`TownMap::load_tmx`). Only tile events change after
/// construction, so the indexes never go stale.
#[derive(Resource, Clone)]
pub struct TownMap {
    world: String,
    width: u32,
    height: u32,
    tile_width: u32,
    tile_height: u32,
    tiles: Vec<Tile>,
    blocked: Vec<bool>,
    /// Per tile, the number of its place — its `(sector, arena, game object)` — among the
    /// map's distinct places, or [`NO_PLACE`] for a tile outside every sector (see
    /// [`Self::place_number`]).
    place_numbers: Vec<u32>,
    index: HashMap<String, BTreeSet<TileCoord>>,
    /// Lower-cased key → canonical key, for lenient lookups of model output.
    folded: HashMap<String, String>,
    places: BTreeMap<String, BTreeMap<String, BTreeSet<String>>>,
    spawns: BTreeMap<String, TileCoord>,
    walkable: BTreeSet<TileCoord>,
    visual_layers: Vec<VisualLayer>,
    tilesets: Vec<TilesetInfo>,
    source: Option<PathBuf>,
}

impl fmt::Debug for TownMap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Thousands of tiles are noise in logs; summarise instead.
        f.debug_struct("TownMap")
            .field("world", &self.world)
            .field("size", &(self.width, self.height))
            .field("sectors", &self.places.len())
            .field("addresses", &self.index.len())
            .field("spawns", &self.spawns)
            .field("walkable_tiles", &self.walkable.len())
            .field("visual_layers", &self.visual_layers.len())
            .field("source", &self.source)
            .finish()
    }
}

/// [`TownMap::place_number`] of a tile outside every sector.
const NO_PLACE: u32 = u32::MAX;

/// The parts of a map that the loader and the builders produce.
pub(crate) struct MapParts {
    pub world: String,
    pub width: u32,
    pub height: u32,
    pub tile_width: u32,
    pub tile_height: u32,
    pub tiles: Vec<Tile>,
    pub visual_layers: Vec<VisualLayer>,
    pub tilesets: Vec<TilesetInfo>,
    pub source: Option<PathBuf>,
}

impl TownMap {
    /// Builds the indexes over finished tiles. `tiles.len()` must be `width * height`.
    pub(crate) fn from_parts(parts: MapParts) -> Self {
        let MapParts {
            world,
            width,
            height,
            tile_width,
            tile_height,
            mut tiles,
            visual_layers,
            tilesets,
            source,
        } = parts;
        let mut index: HashMap<String, BTreeSet<TileCoord>> = HashMap::new();
        let mut places: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
        let mut spawns = BTreeMap::new();
        let mut walkable = BTreeSet::new();
        let mut blocked = Vec::with_capacity(tiles.len());
        let mut numbered: HashMap<(String, Option<String>, Option<String>), u32> = HashMap::new();
        let mut place_numbers = Vec::with_capacity(tiles.len());
        for (i, tile) in tiles.iter_mut().enumerate() {
            let c = coord_of(width, i);
            blocked.push(tile.collision);
            place_numbers.push(match &tile.sector {
                Some(sector) => {
                    let next = u32::try_from(numbered.len()).unwrap_or(NO_PLACE - 1);
                    *numbered
                        .entry((sector.clone(), tile.arena.clone(), tile.game_object.clone()))
                        .or_insert(next)
                }
                None => NO_PLACE,
            });
            if !tile.collision {
                walkable.insert(c);
            }
            if let Some(sector) = &tile.sector {
                let arenas = places.entry(sector.clone()).or_default();
                if let Some(arena) = &tile.arena {
                    let objects = arenas.entry(arena.clone()).or_default();
                    if let Some(object) = &tile.game_object {
                        objects.insert(object.clone());
                    }
                }
            }
            for level in [
                AddressLevel::Sector,
                AddressLevel::Arena,
                AddressLevel::GameObject,
            ] {
                if let Some(addr) = tile.address(level).filter(|a| a.level() == level) {
                    let key = addr.to_string();
                    if level == AddressLevel::GameObject {
                        tile.events.insert(TileEvent::idle(key.clone()));
                    }
                    index.entry(key).or_default().insert(c);
                }
            }
            if let Some(name) = &tile.spawning_location {
                index.entry(spawn_key(name)).or_default().insert(c);
                // The first tile in row-major order is the spawn point of a multi-tile spawn.
                spawns.entry(name.trim().to_owned()).or_insert(c);
            }
        }
        let folded = index
            .keys()
            .map(|k| (k.to_lowercase(), k.clone()))
            .collect();
        Self {
            world,
            width,
            height,
            tile_width,
            tile_height,
            tiles,
            blocked,
            place_numbers,
            index,
            folded,
            places,
            spawns,
            walkable,
            visual_layers,
            tilesets,
            source,
        }
    }

    /// A builder for maps made in code (tests, procedural towns).
    pub fn builder(world: &str, width: u32, height: u32) -> TownMapBuilder {
        TownMapBuilder::new(world, width, height)
    }

    /// Builds a map from ASCII art, one string per row.
    ///
    /// - `#` is a blocked tile, `.` and space are walkable tiles with no address;
    /// - any other symbol must be in `legend`, mapped to an address of any depth
    ///   (`W:house`, `W:house:kitchen`, `W:house:kitchen:stove`) or a spawn (`<spawn_loc>bed`);
    ///   prefix the entry with `#` to make those tiles blocked too (`#W:house:kitchen:stove`).
    ///
    /// All rows must have the same length. Addresses must be in `world`.
    ///
    /// ```
    /// use bevy_generative_agents::world::{TownMap, TileCoord};
    /// let map = TownMap::from_ascii(
    ///     "W",
    ///     &["#####", "#kks#", "#.b.#", "#####"],
    ///     &[('k', "W:home:kitchen"), ('s', "#W:home:kitchen:stove"), ('b', "<spawn_loc>bed")],
    /// )
    /// .unwrap();
    /// assert_eq!(map.address_tiles("W:home:kitchen").map(|t| t.len()), Some(3));
    /// assert_eq!(map.spawn_location("bed"), Some(TileCoord::new(2, 2)));
    /// ```
    pub fn from_ascii(
        world: &str,
        rows: &[&str],
        legend: &[(char, &str)],
    ) -> Result<Self, MapError> {
        let err = MapError::in_memory;
        let width = rows.first().map_or(0, |r| r.chars().count());
        let mut builder = TownMapBuilder::new(world, width as u32, rows.len() as u32);
        for (y, row) in rows.iter().enumerate() {
            let found = row.chars().count();
            if found != width {
                return Err(err(MapProblem::RaggedRow {
                    row: y,
                    found,
                    expected: width,
                }));
            }
            for (x, symbol) in row.chars().enumerate() {
                let c = TileCoord::new(x as i32, y as i32);
                match symbol {
                    '#' => builder = builder.blocked(c, true),
                    '.' | ' ' => {}
                    _ => {
                        let Some((_, entry)) = legend.iter().find(|(s, _)| *s == symbol) else {
                            return Err(err(MapProblem::UnknownSymbol { symbol, tile: c }));
                        };
                        let (blocked, entry) = match entry.strip_prefix('#') {
                            Some(rest) => (true, rest),
                            None => (false, *entry),
                        };
                        builder = builder.blocked(c, blocked);
                        builder = match entry.strip_prefix(super::address::SPAWN_LOC_MARKER) {
                            Some(name) => builder.spawn(c, name),
                            None => builder.address_str(c, entry),
                        };
                    }
                }
            }
        }
        builder.build()
    }

    /// The world's name (the `world` part of every address).
    pub fn world_name(&self) -> &str {
        &self.world
    }

    /// Width in tiles.
    pub fn width(&self) -> u32 {
        self.width
    }

    /// Height in tiles.
    pub fn height(&self) -> u32 {
        self.height
    }

    /// Tile size in pixels `(width, height)` (from the Tiled file; 32×32 for maps built in code).
    pub fn tile_size(&self) -> (u32, u32) {
        (self.tile_width, self.tile_height)
    }

    /// The file the map was loaded from, if any.
    pub fn source(&self) -> Option<&std::path::Path> {
        self.source.as_deref()
    }

    pub(crate) fn set_source(&mut self, path: PathBuf) {
        self.source = Some(path);
    }

    /// Whether `c` is on the map.
    pub fn in_bounds(&self, c: TileCoord) -> bool {
        c.x >= 0 && c.y >= 0 && (c.x as u32) < self.width && (c.y as u32) < self.height
    }

    /// Row-major index of `c`, if on the map.
    pub(crate) fn index_of(&self, c: TileCoord) -> Option<usize> {
        self.in_bounds(c)
            .then(|| c.y as usize * self.width as usize + c.x as usize)
    }

    /// The flat collision grid (row-major), for path finding.
    pub(crate) fn blocked_grid(&self) -> &[bool] {
        &self.blocked
    }

    /// The number of the place of the tile at `c` — two tiles have the same number exactly
    /// when their sector, arena and game object are the same — or `None` for a tile outside
    /// every sector or out of bounds. Perception compares places by it instead of by their
    /// names.
    pub(crate) fn place_number(&self, c: TileCoord) -> Option<u32> {
        self.index_of(c)
            .and_then(|i| self.place_numbers.get(i).copied())
            .filter(|&n| n != NO_PLACE)
    }

    /// The tile at `c`.
    pub fn tile(&self, c: TileCoord) -> Option<&Tile> {
        self.index_of(c).and_then(|i| self.tiles.get(i))
    }

    fn tile_mut(&mut self, c: TileCoord) -> Option<&mut Tile> {
        self.index_of(c).and_then(|i| self.tiles.get_mut(i))
    }

    /// Every tile with its coordinate, row by row.
    pub fn tiles(&self) -> impl Iterator<Item = (TileCoord, &Tile)> + '_ {
        let width = self.width;
        self.tiles
            .iter()
            .enumerate()
            .map(move |(i, t)| (coord_of(width, i), t))
    }

    /// Whether `c` is on the map and not blocked.
    pub fn is_walkable(&self, c: TileCoord) -> bool {
        self.index_of(c)
            .and_then(|i| self.blocked.get(i))
            .is_some_and(|b| !b)
    }

    /// Every walkable tile.
    pub fn walkable_tiles(&self) -> &BTreeSet<TileCoord> {
        &self.walkable
    }

    /// The tiles within `radius` of `c`: the square of side `2·radius + 1` centred on `c`,
    /// clipped to the map, row by row (SPEC §1 vision).
    pub fn nearby_tiles(&self, c: TileCoord, radius: u32) -> Vec<TileCoord> {
        let r = i64::from(radius);
        let clamp = |v: i64, max: u32| v.clamp(0, i64::from(max) - 1);
        if self.width == 0 || self.height == 0 {
            return Vec::new();
        }
        let (cx, cy) = (i64::from(c.x), i64::from(c.y));
        // A centre off the map still sees the part of its square that overlaps the map.
        if cx + r < 0
            || cy + r < 0
            || cx - r >= i64::from(self.width)
            || cy - r >= i64::from(self.height)
        {
            return Vec::new();
        }
        let (x0, x1) = (clamp(cx - r, self.width), clamp(cx + r, self.width));
        let (y0, y1) = (clamp(cy - r, self.height), clamp(cy + r, self.height));
        let mut out = Vec::with_capacity(((x1 - x0 + 1) * (y1 - y0 + 1)) as usize);
        for y in y0..=y1 {
            for x in x0..=x1 {
                out.push(TileCoord::new(x as i32, y as i32));
            }
        }
        out
    }

    /// The address of the tile at `c` cut at `level` (`None` off the map).
    pub fn tile_address(&self, c: TileCoord, level: AddressLevel) -> Option<Address> {
        self.tile(c).and_then(|t| t.address(level))
    }

    /// The address string of the tile at `c` cut at `level`, e.g. `"w:s:a:o"` (Smallville's
    /// `get_tile_path`). Parts the tile does not have are left out rather than left empty.
    pub fn tile_path_string(&self, c: TileCoord, level: AddressLevel) -> Option<String> {
        self.tile_address(c, level).map(|a| a.to_string())
    }

    /// The tiles of an index key (`w:s`, `w:s:a`, `w:s:a:o`, `<spawn_loc>name`), exactly or
    /// after canonicalising spaces and trailing separators. No fall-back; see
    /// [`resolve_address`](Self::resolve_address).
    pub fn address_tiles(&self, address: &str) -> Option<&BTreeSet<TileCoord>> {
        if let Some(tiles) = self.index.get(address) {
            return Some(tiles);
        }
        let canonical = canonical_key(address)?;
        self.index.get(&canonical)
    }

    /// [`address_tiles`](Self::address_tiles) for an [`Address`].
    pub fn place_tiles(&self, address: &Address) -> Option<&BTreeSet<TileCoord>> {
        self.index.get(&address.to_string())
    }

    /// Every key of the address index, sorted.
    pub fn address_keys(&self) -> Vec<&str> {
        let mut keys: Vec<&str> = self.index.keys().map(String::as_str).collect();
        keys.sort_unstable();
        keys
    }

    /// Exact, canonical, then case-insensitive lookup of an index key.
    fn lookup(&self, address: &str) -> Option<(&str, &BTreeSet<TileCoord>)> {
        if let Some((k, v)) = self.index.get_key_value(address) {
            return Some((k.as_str(), v));
        }
        let canonical = canonical_key(address)?;
        if let Some((k, v)) = self.index.get_key_value(&canonical) {
            return Some((k.as_str(), v));
        }
        let key = self.folded.get(&canonical.to_lowercase())?;
        self.index.get_key_value(key).map(|(k, v)| (k.as_str(), v))
    }

    /// Resolves a place address to tiles with the fall-back chain of SPEC §1: the address
    /// itself → its arena → its sector → `living_area` → the living area's sector → any
    /// walkable tile. Lookups tolerate extra spaces and different letter case. `w:s:a:<random>`
    /// resolves to its arena. Logs a warning whenever it falls back. Never panics; fails only
    /// when the map has no walkable tile at all.
    pub fn resolve_address(
        &self,
        address: &str,
        living_area: Option<&str>,
    ) -> Result<ResolvedAddress<'_>, ResolveError> {
        let found = |key: &str, level| {
            self.lookup(key)
                .map(|(key, tiles)| ResolvedAddress { key, level, tiles })
        };
        if let Some(hit) = found(address, ResolveLevel::Exact) {
            return Ok(hit);
        }
        let place = ActionAddress::parse(address)
            .ok()
            .and_then(|a| a.place().cloned());
        let mut result = None;
        if let Some(place) = &place {
            // The exact lookup above already tried the canonical form (and the arena of
            // `w:s:a:<random>`), so only the parents are left.
            if place.level() > AddressLevel::Arena {
                result = found(
                    &place.truncated(AddressLevel::Arena).to_string(),
                    ResolveLevel::Arena,
                );
            }
            if result.is_none() && place.level() > AddressLevel::Sector {
                result = found(
                    &place.truncated(AddressLevel::Sector).to_string(),
                    ResolveLevel::Sector,
                );
            }
        }
        if result.is_none()
            && let Some(living) = living_area
        {
            result = found(living, ResolveLevel::LivingArea);
            if result.is_none()
                && let Some(sector) = Address::parse(living)
                    .ok()
                    .filter(|a| a.level() > AddressLevel::Sector)
                    .map(|a| a.truncated(AddressLevel::Sector))
            {
                result = found(&sector.to_string(), ResolveLevel::LivingSector);
            }
        }
        if result.is_none() && !self.walkable.is_empty() {
            result = Some(ResolvedAddress {
                key: &self.world,
                level: ResolveLevel::AnyWalkable,
                tiles: &self.walkable,
            });
        }
        match result {
            Some(hit) => {
                if hit.level.is_fallback() {
                    warn!(
                        address,
                        living_area = living_area.unwrap_or(""),
                        resolved = hit.key,
                        level = ?hit.level,
                        "address not in the town map; falling back"
                    );
                }
                Ok(hit)
            }
            None => Err(ResolveError::NoWalkableTile {
                address: address.to_owned(),
            }),
        }
    }

    /// Adds `event` to the tile at `c`. Returns `false` when `c` is off the map.
    pub fn add_event(&mut self, c: TileCoord, event: TileEvent) -> bool {
        self.tile_mut(c).map(|t| t.events.insert(event)).is_some()
    }

    /// Removes `event` from the tile at `c`. Returns whether it was there.
    pub fn remove_event(&mut self, c: TileCoord, event: &TileEvent) -> bool {
        self.tile_mut(c).is_some_and(|t| t.events.remove(event))
    }

    /// Removes every event whose subject is `subject` from the tile at `c`; returns how many.
    pub fn remove_subject_events(&mut self, c: TileCoord, subject: &str) -> usize {
        let Some(tile) = self.tile_mut(c) else {
            return 0;
        };
        let before = tile.events.len();
        tile.events.retain(|e| e.subject != subject);
        before - tile.events.len()
    }

    /// Replaces every event of `subject` on the tile at `c` by `subject`'s idle event
    /// (Smallville's `turn_event_from_tile_idle`). Returns whether any event was replaced.
    pub fn turn_event_idle(&mut self, c: TileCoord, subject: &str) -> bool {
        let Some(tile) = self.tile_mut(c) else {
            return false;
        };
        let before = tile.events.len();
        tile.events.retain(|e| e.subject != subject);
        if tile.events.len() == before {
            return false;
        }
        tile.events.insert(TileEvent::idle(subject));
        true
    }

    /// The tile of spawning location `name` (the first, row-major, of a multi-tile spawn).
    pub fn spawn_location(&self, name: &str) -> Option<TileCoord> {
        self.spawns.get(name.trim()).copied()
    }

    /// Every spawning location, sorted by name.
    pub fn spawn_locations(&self) -> impl Iterator<Item = (&str, TileCoord)> + '_ {
        self.spawns.iter().map(|(n, c)| (n.as_str(), *c))
    }

    /// The sector names, sorted.
    pub fn sectors(&self) -> impl Iterator<Item = &str> + '_ {
        self.places.keys().map(String::as_str)
    }

    /// The arena names of `sector`, sorted (empty if the sector is unknown).
    pub fn arenas<'a>(&'a self, sector: &str) -> impl Iterator<Item = &'a str> + 'a {
        self.places
            .get(sector)
            .into_iter()
            .flat_map(|a| a.keys().map(String::as_str))
    }

    /// The game-object names of `sector:arena`, sorted (empty if unknown).
    pub fn game_objects<'a>(
        &'a self,
        sector: &str,
        arena: &str,
    ) -> impl Iterator<Item = &'a str> + 'a {
        self.places
            .get(sector)
            .and_then(|a| a.get(arena))
            .into_iter()
            .flat_map(|o| o.iter().map(String::as_str))
    }

    /// The whole place tree `sector → arena → objects` (to fill a persona's spatial memory).
    pub fn places(&self) -> &BTreeMap<String, BTreeMap<String, BTreeSet<String>>> {
        &self.places
    }

    /// Every arena address, sorted.
    pub fn arena_addresses(&self) -> Vec<Address> {
        self.places
            .iter()
            .flat_map(|(s, arenas)| arenas.keys().map(move |a| (s, a)))
            .filter_map(|(s, a)| Address::arena(&self.world, s, a).ok())
            .collect()
    }

    /// Every game-object address, sorted.
    pub fn game_object_addresses(&self) -> Vec<Address> {
        self.places
            .iter()
            .flat_map(|(s, arenas)| arenas.iter().map(move |(a, objs)| (s, a, objs)))
            .flat_map(|(s, a, objs)| objs.iter().map(move |o| (s, a, o)))
            .filter_map(|(s, a, o)| Address::game_object(&self.world, s, a, o).ok())
            .collect()
    }

    /// The drawable tile layers, bottom to top (everything but `collision`).
    pub fn visual_layers(&self) -> &[VisualLayer] {
        &self.visual_layers
    }

    /// The tilesets the visual layers refer to.
    pub fn tilesets(&self) -> &[TilesetInfo] {
        &self.tilesets
    }
}

fn coord_of(width: u32, i: usize) -> TileCoord {
    let w = width.max(1) as usize;
    TileCoord::new((i % w) as i32, (i / w) as i32)
}

/// The canonical form of an index key: a parsed address or a trimmed spawn key.
fn canonical_key(key: &str) -> Option<String> {
    let trimmed = key.trim();
    if let Some(name) = trimmed.strip_prefix(super::address::SPAWN_LOC_MARKER) {
        return Some(spawn_key(name));
    }
    match ActionAddress::parse(trimmed).ok()? {
        ActionAddress::Place(a) | ActionAddress::RandomInArena(a) => Some(a.to_string()),
        ActionAddress::Persona(_) | ActionAddress::Waiting(_) => None,
    }
}

/// Builds a [`TownMap`] tile by tile (for tests and procedural maps).
///
/// Every tile starts walkable, with the world name and no address. Errors (coordinates off the
/// map, malformed addresses) are remembered and reported by [`build`](Self::build).
#[derive(Debug)]
pub struct TownMapBuilder {
    world: String,
    width: u32,
    height: u32,
    tiles: Vec<Tile>,
    error: Option<MapProblem>,
}

impl TownMapBuilder {
    /// A `width × height` map of walkable, unaddressed tiles.
    pub fn new(world: &str, width: u32, height: u32) -> Self {
        let tile = Tile {
            world: world.trim().to_owned(),
            ..Tile::default()
        };
        let len = width as usize * height as usize;
        Self {
            world: world.trim().to_owned(),
            width,
            height,
            tiles: vec![tile; len],
            error: None,
        }
    }

    fn fail(mut self, problem: MapProblem) -> Self {
        self.error.get_or_insert(problem);
        self
    }

    fn with_tile(mut self, c: TileCoord, f: impl FnOnce(&mut Tile)) -> Self {
        let in_bounds =
            c.x >= 0 && c.y >= 0 && (c.x as u32) < self.width && (c.y as u32) < self.height;
        let index = c.y as usize * self.width as usize + c.x as usize;
        match self.tiles.get_mut(index).filter(|_| in_bounds) {
            Some(tile) => {
                f(tile);
                self
            }
            None => self.fail(MapProblem::TileOutOfBounds(c)),
        }
    }

    /// Sets whether the tile at `c` blocks movement.
    pub fn blocked(self, c: TileCoord, blocked: bool) -> Self {
        self.with_tile(c, |t| t.collision = blocked)
    }

    /// Blocks (or clears) every tile of the inclusive rectangle `from..=to`.
    pub fn blocked_rect(mut self, from: TileCoord, to: TileCoord, blocked: bool) -> Self {
        for y in from.y.min(to.y)..=from.y.max(to.y) {
            for x in from.x.min(to.x)..=from.x.max(to.x) {
                self = self.blocked(TileCoord::new(x, y), blocked);
            }
        }
        self
    }

    /// Gives the tile at `c` the sector/arena/object parts of `address` (deeper parts the
    /// address lacks are cleared).
    pub fn address(self, c: TileCoord, address: &Address) -> Self {
        if address.world_name() != self.world {
            let problem = MapProblem::WrongWorld {
                address: address.to_string(),
                world: self.world.clone(),
            };
            return self.fail(problem);
        }
        self.with_tile(c, |t| {
            t.sector = address.sector_name().map(str::to_owned);
            t.arena = address.arena_name().map(str::to_owned);
            t.game_object = address.game_object_name().map(str::to_owned);
        })
    }

    /// [`address`](Self::address) from a string.
    pub fn address_str(self, c: TileCoord, address: &str) -> Self {
        match Address::parse(address) {
            Ok(a) => self.address(c, &a),
            Err(e) => self.fail(MapProblem::Address(e)),
        }
    }

    /// Makes the tile at `c` the spawning location `name`.
    pub fn spawn(self, c: TileCoord, name: &str) -> Self {
        let name = name.trim().to_owned();
        self.with_tile(c, |t| t.spawning_location = Some(name))
    }

    /// Finishes the map: checks the recorded errors and that spawns are walkable, then builds
    /// the indexes and idle events.
    pub fn build(self) -> Result<TownMap, MapError> {
        if let Some(problem) = self.error {
            return Err(MapError::in_memory(problem));
        }
        if let Err(e) = Address::world(&self.world) {
            return Err(MapError::in_memory(MapProblem::Address(e)));
        }
        for (i, tile) in self.tiles.iter().enumerate() {
            if let (Some(name), true) = (&tile.spawning_location, tile.collision) {
                let tile = coord_of(self.width, i);
                return Err(MapError::in_memory(MapProblem::SpawnBlocked {
                    name: name.clone(),
                    tile,
                }));
            }
        }
        Ok(TownMap::from_parts(MapParts {
            world: self.world,
            width: self.width,
            height: self.height,
            tile_width: 32,
            tile_height: 32,
            tiles: self.tiles,
            visual_layers: Vec::new(),
            tilesets: Vec::new(),
            source: None,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn house() -> TownMap {
        TownMap::from_ascii(
            "W",
            &[
                "#########",
                "#bbb#kks#",
                "#bBb.kkk#",
                "####.####",
                "...p.....",
            ],
            &[
                ('b', "W:house:bedroom"),
                ('B', "W:house:bedroom:bed"),
                ('k', "W:house:kitchen"),
                ('s', "#W:house:kitchen:stove"),
                ('p', "<spawn_loc>porch"),
            ],
        )
        .unwrap()
    }

    #[test]
    fn index_covers_every_level_and_spawns() {
        let map = house();
        assert_eq!(map.address_tiles("W:house").unwrap().len(), 12);
        assert_eq!(map.address_tiles("W:house:bedroom").unwrap().len(), 6);
        assert_eq!(
            map.address_tiles("W:house:bedroom:bed")
                .unwrap()
                .iter()
                .copied()
                .collect::<Vec<_>>(),
            vec![TileCoord::new(2, 2)]
        );
        assert_eq!(map.address_tiles("<spawn_loc>porch").unwrap().len(), 1);
        assert_eq!(map.spawn_location("porch"), Some(TileCoord::new(3, 4)));
        assert!(
            map.address_tiles("W").is_none(),
            "the bare world is not an index key"
        );
        assert_eq!(
            map.address_tiles(" W : house : bedroom : ").unwrap().len(),
            6
        );
    }

    #[test]
    fn object_tiles_start_idle_and_collision_is_kept() {
        let map = house();
        let stove = TileCoord::new(7, 1);
        assert!(!map.is_walkable(stove));
        let events: Vec<_> = map.tile(stove).unwrap().events.iter().cloned().collect();
        assert_eq!(events, vec![TileEvent::idle("W:house:kitchen:stove")]);
        assert!(map.tile(TileCoord::new(5, 1)).unwrap().events.is_empty());
    }

    #[test]
    fn place_tree_lists_everything() {
        let map = house();
        assert_eq!(map.sectors().collect::<Vec<_>>(), vec!["house"]);
        assert_eq!(
            map.arenas("house").collect::<Vec<_>>(),
            vec!["bedroom", "kitchen"]
        );
        assert_eq!(
            map.game_objects("house", "kitchen").collect::<Vec<_>>(),
            vec!["stove"]
        );
        assert_eq!(map.arenas("nowhere").count(), 0);
        assert_eq!(
            map.game_object_addresses()
                .iter()
                .map(|a| a.to_string())
                .collect::<Vec<_>>(),
            vec!["W:house:bedroom:bed", "W:house:kitchen:stove"]
        );
    }

    #[test]
    fn tile_paths_stop_at_missing_parts() {
        let map = house();
        let bed = TileCoord::new(2, 2);
        assert_eq!(
            map.tile_path_string(bed, AddressLevel::GameObject).unwrap(),
            "W:house:bedroom:bed"
        );
        assert_eq!(
            map.tile_path_string(bed, AddressLevel::Arena).unwrap(),
            "W:house:bedroom"
        );
        assert_eq!(map.tile_path_string(bed, AddressLevel::World).unwrap(), "W");
        let floor = TileCoord::new(1, 1);
        assert_eq!(
            map.tile_path_string(floor, AddressLevel::GameObject)
                .unwrap(),
            "W:house:bedroom"
        );
        assert_eq!(
            map.tile_path_string(TileCoord::new(0, 4), AddressLevel::GameObject)
                .unwrap(),
            "W"
        );
        assert_eq!(
            map.tile_path_string(TileCoord::new(-1, 0), AddressLevel::World),
            None
        );
    }

    #[test]
    fn event_editing() {
        let mut map = house();
        let bed = TileCoord::new(2, 2);
        let sleep = TileEvent {
            subject: "Ana".into(),
            predicate: Some("is".into()),
            object: Some("sleeping".into()),
            description: Some("sleeping".into()),
        };
        assert!(map.add_event(bed, sleep.clone()));
        assert!(!map.add_event(TileCoord::new(99, 0), sleep.clone()));
        assert_eq!(map.tile(bed).unwrap().events.len(), 2);
        assert!(map.turn_event_idle(bed, "Ana"));
        assert!(
            map.tile(bed)
                .unwrap()
                .events
                .contains(&TileEvent::idle("Ana"))
        );
        assert!(!map.tile(bed).unwrap().events.contains(&sleep));
        assert!(!map.turn_event_idle(bed, "Nobody"));
        assert_eq!(map.remove_subject_events(bed, "Ana"), 1);
        assert!(!map.remove_event(bed, &sleep));
        assert!(map.remove_event(bed, &TileEvent::idle("W:house:bedroom:bed")));
        assert!(map.tile(bed).unwrap().events.is_empty());
    }

    #[test]
    fn tiles_share_a_place_number_exactly_when_they_share_a_place() {
        let t = TileCoord::new;
        let map = TownMap::builder("W", 4, 2)
            .address_str(t(0, 0), "W:house:kitchen:stove")
            .address_str(t(1, 0), "W:house:kitchen:stove")
            .address_str(t(2, 0), "W:house:kitchen")
            .address_str(t(3, 0), "W:house:bedroom:stove")
            .address_str(t(0, 1), "W:house")
            .address_str(t(1, 1), "W:cafe:kitchen:stove")
            .build()
            .unwrap();
        let tiles = [
            t(0, 0),
            t(1, 0),
            t(2, 0),
            t(3, 0),
            t(0, 1),
            t(1, 1),
            t(2, 1),
        ];
        for a in tiles {
            for b in tiles {
                let place = |c| {
                    map.tile(c)
                        .filter(|tile| tile.sector.is_some())
                        .map(|tile| (&tile.sector, &tile.arena, &tile.game_object))
                };
                let same = place(a).is_some() && place(a) == place(b);
                let numbers = (map.place_number(a), map.place_number(b));
                assert_eq!(
                    numbers.0.is_some() && numbers.0 == numbers.1,
                    same,
                    "{a:?} {b:?}"
                );
            }
        }
        // Outside every sector, and out of bounds: no place.
        assert_eq!(map.place_number(t(2, 1)), None);
        assert_eq!(map.place_number(t(9, 9)), None);
    }

    #[test]
    fn builder_reports_errors() {
        let e = TownMap::builder("W", 2, 2)
            .blocked(TileCoord::new(2, 0), true)
            .build()
            .unwrap_err();
        assert!(matches!(*e.problem, MapProblem::TileOutOfBounds(c) if c == TileCoord::new(2, 0)));
        let e = TownMap::builder("W", 2, 2)
            .address_str(TileCoord::new(0, 0), "X:s")
            .build()
            .unwrap_err();
        assert!(matches!(*e.problem, MapProblem::WrongWorld { .. }));
        let e = TownMap::builder("W", 2, 2)
            .spawn(TileCoord::new(0, 0), "a")
            .blocked(TileCoord::new(0, 0), true)
            .build()
            .unwrap_err();
        assert!(matches!(*e.problem, MapProblem::SpawnBlocked { .. }));
        let e = TownMap::from_ascii("W", &["..", "..."], &[]).unwrap_err();
        assert!(matches!(
            *e.problem,
            MapProblem::RaggedRow {
                row: 1,
                found: 3,
                expected: 2
            }
        ));
        let e = TownMap::from_ascii("W", &[".x"], &[]).unwrap_err();
        assert!(matches!(
            *e.problem,
            MapProblem::UnknownSymbol { symbol: 'x', .. }
        ));
        assert!(e.to_string().contains(crate::world::error::IN_MEMORY_MAP));
    }
}
