//! Addresses: where things are in the town.
//!
//! A place is named by the path `world:sector:arena:game_object`, e.g.
//! `Willowbrook:Reyes house:kitchen:stove`. Any suffix may be missing (`Willowbrook:Reyes house`
//! names the whole house), but there are no holes (`w::a` is malformed). [`Address`] is that
//! path, always well-formed once constructed.
//!
//! An action's destination ([`ActionAddress`]) is either a place or one of three special forms
//! the execute stage understands (SPEC §1): `<persona> Name` (go to another persona),
//! `<waiting> x y` (wait on a tile) and `w:s:a:<random>` (any tile of an arena).
//!
//! Parsing never panics: addresses come from model output, files and users, so every malformed
//! string is an [`AddressError`] that says what is wrong.

use std::fmt;
use std::str::FromStr;

use bevy::prelude::*;
use serde::{Deserialize, Serialize};

use super::TileCoord;

/// The separator between the parts of an address.
pub const ADDRESS_SEPARATOR: char = ':';

/// The marker of a persona destination: `<persona> Name`.
pub const PERSONA_MARKER: &str = "<persona>";
/// The marker of a waiting destination: `<waiting> x y`.
pub const WAITING_MARKER: &str = "<waiting>";
/// The marker of a random tile of an arena: `w:s:a:<random>`.
pub const RANDOM_MARKER: &str = "<random>";
/// The prefix of spawning-location keys in the address index: `<spawn_loc>name`.
pub const SPAWN_LOC_MARKER: &str = "<spawn_loc>";

/// How deep an address goes.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Reflect, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum AddressLevel {
    /// `world`
    World,
    /// `world:sector`
    Sector,
    /// `world:sector:arena`
    Arena,
    /// `world:sector:arena:game_object`
    GameObject,
}

/// The level's name as the address format spells it (`world`, `sector`, `arena`,
/// `game_object`).
impl fmt::Display for AddressLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::World => "world",
            Self::Sector => "sector",
            Self::Arena => "arena",
            Self::GameObject => "game_object",
        })
    }
}

impl AddressLevel {
    /// Number of parts an address of this level has (1–4).
    pub const fn depth(self) -> usize {
        match self {
            Self::World => 1,
            Self::Sector => 2,
            Self::Arena => 3,
            Self::GameObject => 4,
        }
    }
}

/// Why a string is not a valid address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AddressError {
    /// The string is empty or only whitespace (or only separators).
    #[error("the address is empty")]
    Empty,
    /// More than four `:`-separated parts.
    #[error("address {input:?} has {parts} parts; at most 4 (world:sector:arena:game_object)")]
    TooManyParts {
        /// The offending input.
        input: String,
        /// How many parts it has.
        parts: usize,
    },
    /// A part is empty but a later one is not (`w::a`).
    #[error("address {input:?} has an empty {level} part before a non-empty one")]
    Hole {
        /// The offending input.
        input: String,
        /// The level of the empty part.
        level: AddressLevel,
    },
    /// A part is a special marker (`<random>`, `<persona>`…) where a name is expected.
    #[error("address {input:?} uses the marker {part:?} where a name is expected")]
    MarkerInName {
        /// The offending input.
        input: String,
        /// The marker-like part.
        part: String,
    },
    /// A name contains `:` (only possible through the constructors, not parsing).
    #[error("address part {part:?} contains ':'")]
    SeparatorInName {
        /// The offending part.
        part: String,
    },
    /// `<persona>` with no name after it.
    #[error("`<persona>` address {input:?} has no persona name")]
    MissingPersonaName {
        /// The offending input.
        input: String,
    },
    /// `<waiting>` not followed by exactly two integers.
    #[error("`<waiting>` address {input:?} must be `<waiting> x y` with two integers")]
    BadWaiting {
        /// The offending input.
        input: String,
    },
    /// `<random>` after something other than a `world:sector:arena` path.
    #[error("`<random>` address {input:?} must be `world:sector:arena:<random>`")]
    BadRandom {
        /// The offending input.
        input: String,
    },
    /// A `<…>` marker this crate does not know.
    #[error("address {input:?} starts with an unknown marker")]
    UnknownMarker {
        /// The offending input.
        input: String,
    },
}

/// A place: `world[:sector[:arena[:game_object]]]`.
///
/// Always well-formed: a non-empty world, no holes, no `:` inside a name, names trimmed.
/// Formats as the canonical string (`Display`) and parses back (`FromStr`); serialised as that
/// string.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Reflect)]
pub struct Address {
    world: String,
    sector: Option<String>,
    arena: Option<String>,
    game_object: Option<String>,
}

fn check_name(part: &str) -> Result<String, AddressError> {
    let trimmed = part.trim();
    if trimmed.is_empty() {
        return Err(AddressError::Empty);
    }
    if trimmed.contains(ADDRESS_SEPARATOR) {
        return Err(AddressError::SeparatorInName {
            part: trimmed.to_owned(),
        });
    }
    if trimmed.starts_with('<') {
        return Err(AddressError::MarkerInName {
            input: trimmed.to_owned(),
            part: trimmed.to_owned(),
        });
    }
    Ok(trimmed.to_owned())
}

impl Address {
    /// The address of a whole world.
    pub fn world(world: &str) -> Result<Self, AddressError> {
        Ok(Self {
            world: check_name(world)?,
            sector: None,
            arena: None,
            game_object: None,
        })
    }

    /// `world:sector`.
    pub fn sector(world: &str, sector: &str) -> Result<Self, AddressError> {
        Self::world(world)?.child(sector)
    }

    /// `world:sector:arena`.
    pub fn arena(world: &str, sector: &str, arena: &str) -> Result<Self, AddressError> {
        Self::sector(world, sector)?.child(arena)
    }

    /// `world:sector:arena:game_object`.
    pub fn game_object(
        world: &str,
        sector: &str,
        arena: &str,
        game_object: &str,
    ) -> Result<Self, AddressError> {
        Self::arena(world, sector, arena)?.child(game_object)
    }

    /// This address extended by one level (`w:s` + `a` → `w:s:a`).
    ///
    /// Fails on an invalid name or when the address is already a game object.
    pub fn child(&self, name: &str) -> Result<Self, AddressError> {
        let name = check_name(name)?;
        let mut out = self.clone();
        match self.level() {
            AddressLevel::World => out.sector = Some(name),
            AddressLevel::Sector => out.arena = Some(name),
            AddressLevel::Arena => out.game_object = Some(name),
            AddressLevel::GameObject => {
                return Err(AddressError::TooManyParts {
                    input: format!("{self}:{name}"),
                    parts: 5,
                });
            }
        }
        Ok(out)
    }

    /// Parses `world:sector:arena:game_object` (any suffix may be missing or empty, so
    /// `"w:s:a:"` is `w:s:a`). Each part is trimmed.
    pub fn parse(input: &str) -> Result<Self, AddressError> {
        let parts: Vec<&str> = input.split(ADDRESS_SEPARATOR).map(str::trim).collect();
        // Trailing empty parts are a missing suffix, which is allowed.
        let len = parts
            .iter()
            .rposition(|p| !p.is_empty())
            .map_or(0, |i| i + 1);
        if len == 0 {
            return Err(AddressError::Empty);
        }
        if len > 4 {
            return Err(AddressError::TooManyParts {
                input: input.to_owned(),
                parts: len,
            });
        }
        let levels = [
            AddressLevel::World,
            AddressLevel::Sector,
            AddressLevel::Arena,
            AddressLevel::GameObject,
        ];
        let mut names = Vec::with_capacity(len);
        for (part, level) in parts.iter().take(len).zip(levels) {
            if part.is_empty() {
                return Err(AddressError::Hole {
                    input: input.to_owned(),
                    level,
                });
            }
            if part.starts_with('<') {
                return Err(AddressError::MarkerInName {
                    input: input.to_owned(),
                    part: (*part).to_owned(),
                });
            }
            names.push((*part).to_owned());
        }
        let mut names = names.into_iter();
        Ok(Self {
            world: names.next().unwrap_or_default(),
            sector: names.next(),
            arena: names.next(),
            game_object: names.next(),
        })
    }

    /// The world name.
    pub fn world_name(&self) -> &str {
        &self.world
    }

    /// The sector name, if the address goes that deep.
    pub fn sector_name(&self) -> Option<&str> {
        self.sector.as_deref()
    }

    /// The arena name, if the address goes that deep.
    pub fn arena_name(&self) -> Option<&str> {
        self.arena.as_deref()
    }

    /// The game-object name, if the address goes that deep.
    pub fn game_object_name(&self) -> Option<&str> {
        self.game_object.as_deref()
    }

    /// The deepest level present.
    pub fn level(&self) -> AddressLevel {
        match (&self.sector, &self.arena, &self.game_object) {
            (None, _, _) => AddressLevel::World,
            (Some(_), None, _) => AddressLevel::Sector,
            (Some(_), Some(_), None) => AddressLevel::Arena,
            (Some(_), Some(_), Some(_)) => AddressLevel::GameObject,
        }
    }

    /// The address cut to at most `level` (`w:s:a:o` cut to `Sector` is `w:s`). An address that
    /// is already shallower is returned unchanged.
    pub fn truncated(&self, level: AddressLevel) -> Self {
        let mut out = self.clone();
        if level < AddressLevel::GameObject {
            out.game_object = None;
        }
        if level < AddressLevel::Arena {
            out.arena = None;
        }
        if level < AddressLevel::Sector {
            out.sector = None;
        }
        out
    }

    /// The enclosing address (`w:s:a` for `w:s:a:o`); `None` for a world.
    pub fn parent(&self) -> Option<Self> {
        match self.level() {
            AddressLevel::World => None,
            AddressLevel::Sector => Some(self.truncated(AddressLevel::World)),
            AddressLevel::Arena => Some(self.truncated(AddressLevel::Sector)),
            AddressLevel::GameObject => Some(self.truncated(AddressLevel::Arena)),
        }
    }

    /// The last name of the path (`stove` for `w:s:a:stove`).
    pub fn last_name(&self) -> &str {
        self.game_object
            .as_deref()
            .or(self.arena.as_deref())
            .or(self.sector.as_deref())
            .unwrap_or(&self.world)
    }

    /// Whether `self` is `other` or lies inside it (`w:s:a:o` is within `w:s`).
    pub fn is_within(&self, other: &Self) -> bool {
        self.level() >= other.level() && self.truncated(other.level()) == *other
    }
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.world)?;
        for part in [&self.sector, &self.arena, &self.game_object]
            .into_iter()
            .flatten()
        {
            write!(f, "{ADDRESS_SEPARATOR}{part}")?;
        }
        Ok(())
    }
}

impl FromStr for Address {
    type Err = AddressError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl Serialize for Address {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Address {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        Self::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// Where an action takes a persona (SPEC §1).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Reflect)]
pub enum ActionAddress {
    /// A place: walk to one of its tiles.
    Place(Address),
    /// `<persona> Name`: walk towards another persona.
    Persona(String),
    /// `<waiting> x y`: wait on that tile.
    Waiting(TileCoord),
    /// `w:s:a:<random>`: any tile of this arena.
    RandomInArena(Address),
}

impl ActionAddress {
    /// Parses a place or one of the special forms.
    pub fn parse(input: &str) -> Result<Self, AddressError> {
        let trimmed = input.trim();
        if trimmed.is_empty() {
            return Err(AddressError::Empty);
        }
        if let Some(rest) = trimmed.strip_prefix(PERSONA_MARKER) {
            let name = rest.trim();
            if name.is_empty() {
                return Err(AddressError::MissingPersonaName {
                    input: input.to_owned(),
                });
            }
            return Ok(Self::Persona(name.to_owned()));
        }
        if let Some(rest) = trimmed.strip_prefix(WAITING_MARKER) {
            let bad = || AddressError::BadWaiting {
                input: input.to_owned(),
            };
            let mut nums = rest.split_whitespace().map(str::parse::<i32>);
            return match (nums.next(), nums.next(), nums.next()) {
                (Some(Ok(x)), Some(Ok(y)), None) => Ok(Self::Waiting(TileCoord::new(x, y))),
                _ => Err(bad()),
            };
        }
        if let Some(prefix) = trimmed.strip_suffix(RANDOM_MARKER) {
            let bad = || AddressError::BadRandom {
                input: input.to_owned(),
            };
            let prefix = prefix
                .trim_end()
                .strip_suffix(ADDRESS_SEPARATOR)
                .ok_or_else(bad)?;
            let arena = Address::parse(prefix).map_err(|_| bad())?;
            // `w:s:a:` would parse as an arena too; the part before `<random>` must be exact.
            if arena.level() != AddressLevel::Arena
                || prefix.split(ADDRESS_SEPARATOR).count() != AddressLevel::Arena.depth()
            {
                return Err(bad());
            }
            return Ok(Self::RandomInArena(arena));
        }
        if trimmed.starts_with('<') {
            return Err(AddressError::UnknownMarker {
                input: input.to_owned(),
            });
        }
        Address::parse(trimmed).map(Self::Place)
    }

    /// The place this action targets, if it is one (the arena for `<random>`).
    pub fn place(&self) -> Option<&Address> {
        match self {
            Self::Place(a) | Self::RandomInArena(a) => Some(a),
            Self::Persona(_) | Self::Waiting(_) => None,
        }
    }

    /// Whether this is `<waiting> x y`.
    pub fn is_waiting(&self) -> bool {
        matches!(self, Self::Waiting(_))
    }

    /// The persona walked towards, for `<persona> Name`.
    pub fn persona(&self) -> Option<&str> {
        match self {
            Self::Persona(name) => Some(name),
            Self::Place(_) | Self::Waiting(_) | Self::RandomInArena(_) => None,
        }
    }
}

impl fmt::Display for ActionAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Place(a) => a.fmt(f),
            Self::Persona(name) => write!(f, "{PERSONA_MARKER} {name}"),
            Self::Waiting(c) => write!(f, "{WAITING_MARKER} {} {}", c.x, c.y),
            Self::RandomInArena(a) => write!(f, "{a}{ADDRESS_SEPARATOR}{RANDOM_MARKER}"),
        }
    }
}

impl FromStr for ActionAddress {
    type Err = AddressError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl From<Address> for ActionAddress {
    fn from(a: Address) -> Self {
        Self::Place(a)
    }
}

impl Serialize for ActionAddress {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ActionAddress {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        Self::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// The index key of a spawning location: `<spawn_loc>name`.
pub fn spawn_key(name: &str) -> String {
    format!("{SPAWN_LOC_MARKER}{}", name.trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_format_every_level() {
        for (s, level) in [
            ("W", AddressLevel::World),
            ("W:Reyes house", AddressLevel::Sector),
            ("W:Reyes house:kitchen", AddressLevel::Arena),
            ("W:Reyes house:kitchen:stove", AddressLevel::GameObject),
        ] {
            let a = Address::parse(s).unwrap();
            assert_eq!(a.level(), level);
            assert_eq!(a.to_string(), s);
        }
    }

    #[test]
    fn trailing_empty_parts_and_spaces_are_canonicalised() {
        let a = Address::parse(" W : Reyes house :kitchen: ").unwrap();
        assert_eq!(a.to_string(), "W:Reyes house:kitchen");
        assert_eq!(Address::parse("W:::").unwrap().to_string(), "W");
    }

    #[test]
    fn holes_and_garbage_are_errors() {
        assert_eq!(Address::parse(""), Err(AddressError::Empty));
        assert_eq!(Address::parse(" : : "), Err(AddressError::Empty));
        assert!(matches!(
            Address::parse("W::kitchen"),
            Err(AddressError::Hole {
                level: AddressLevel::Sector,
                ..
            })
        ));
        assert!(matches!(
            Address::parse(":s"),
            Err(AddressError::Hole {
                level: AddressLevel::World,
                ..
            })
        ));
        assert!(matches!(
            Address::parse("a:b:c:d:e"),
            Err(AddressError::TooManyParts { parts: 5, .. })
        ));
        assert!(matches!(
            Address::parse("W:s:a:<random>"),
            Err(AddressError::MarkerInName { .. })
        ));
    }

    #[test]
    fn builders_validate_names() {
        assert!(Address::arena("W", "s", "a").is_ok());
        assert!(matches!(
            Address::sector("W", "x:y"),
            Err(AddressError::SeparatorInName { .. })
        ));
        assert_eq!(Address::world("  "), Err(AddressError::Empty));
        let o = Address::game_object("W", "s", "a", "o").unwrap();
        assert!(o.child("more").is_err());
    }

    #[test]
    fn truncation_parent_and_containment() {
        let o = Address::parse("W:s:a:o").unwrap();
        assert_eq!(o.truncated(AddressLevel::Sector).to_string(), "W:s");
        assert_eq!(o.parent().unwrap().to_string(), "W:s:a");
        assert_eq!(Address::parse("W").unwrap().parent(), None);
        assert!(o.is_within(&Address::parse("W:s").unwrap()));
        assert!(!o.is_within(&Address::parse("W:t").unwrap()));
        assert!(!Address::parse("W:s").unwrap().is_within(&o));
        assert_eq!(o.last_name(), "o");
    }

    #[test]
    fn special_action_addresses_round_trip() {
        for s in [
            "<persona> Maria Lopez",
            "<waiting> 12 -3",
            "W:s:a:<random>",
            "W:s:a:o",
        ] {
            let a = ActionAddress::parse(s).unwrap();
            assert_eq!(a.to_string(), s);
        }
        assert_eq!(
            ActionAddress::parse("<waiting>  4   5 ").unwrap(),
            ActionAddress::Waiting(TileCoord::new(4, 5))
        );
        assert_eq!(
            ActionAddress::parse("W:s:a : <random>").unwrap(),
            ActionAddress::RandomInArena(Address::parse("W:s:a").unwrap())
        );
    }

    #[test]
    fn malformed_special_addresses_are_errors() {
        assert!(matches!(
            ActionAddress::parse("<persona>   "),
            Err(AddressError::MissingPersonaName { .. })
        ));
        for bad in [
            "<waiting>",
            "<waiting> 1",
            "<waiting> 1 2 3",
            "<waiting> a b",
            "<waiting> 1.5 2",
        ] {
            assert!(
                matches!(
                    ActionAddress::parse(bad),
                    Err(AddressError::BadWaiting { .. })
                ),
                "{bad}"
            );
        }
        for bad in [
            "<random>",
            "W:s:<random>",
            "W:s:a:o:<random>",
            "W::a:<random>",
            "W:s:a:x<random>",
        ] {
            assert!(
                matches!(
                    ActionAddress::parse(bad),
                    Err(AddressError::BadRandom { .. })
                ),
                "{bad}"
            );
        }
        assert!(matches!(
            ActionAddress::parse("<teleport> x"),
            Err(AddressError::UnknownMarker { .. })
        ));
    }

    #[test]
    fn serde_uses_the_string_form() {
        let a = Address::parse("W:s:a").unwrap();
        assert_eq!(serde_json::to_string(&a).unwrap(), "\"W:s:a\"");
        let back: Address = serde_json::from_str("\"W:s:a\"").unwrap();
        assert_eq!(back, a);
        assert!(serde_json::from_str::<Address>("\"W::a\"").is_err());
        let w: ActionAddress = serde_json::from_str("\"<waiting> 1 2\"").unwrap();
        assert_eq!(w, ActionAddress::Waiting(TileCoord::new(1, 2)));
    }
}
