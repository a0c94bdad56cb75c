//! The towns shipped with the crate, by name: a map and the folder of persona sheets that live
//! in it. `smallville run --town NAME`, the game's `--town NAME` and a scenario's `town` field
//! pick one; a game with its own town passes its own map and sheets instead.

use std::fmt;
use std::path::PathBuf;

/// A town shipped in `assets/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShippedTown {
    /// The name to ask for it by (lower case).
    pub name: &'static str,
    /// Its Tiled map, relative to the crate's directory.
    pub map: &'static str,
    /// Its persona sheets, relative to the crate's directory.
    pub personas: &'static str,
    /// One line about it.
    pub about: &'static str,
}

/// Every shipped town; the first is the default.
pub const SHIPPED_TOWNS: &[ShippedTown] = &[
    ShippedTown {
        name: "willowbrook",
        map: "assets/maps/willowbrook.tmx",
        personas: "assets/personas",
        about: "the default town: five neighbours, a cafe, a park, a pub, a college",
    },
    ShippedTown {
        name: "saltmere",
        map: "assets/maps/saltmere.tmx",
        personas: "assets/personas/saltmere",
        about: "a harbour village of four: a bakery, a fish market, a tavern, a boatyard",
    },
    ShippedTown {
        name: "fernside",
        map: "assets/maps/fernside.tmx",
        personas: "assets/personas/fernside",
        about: "a market town of 25 in fourteen homes, with families, jobs, friends and rivals",
    },
];

impl ShippedTown {
    /// The default town (Willowbrook).
    pub fn default_town() -> &'static ShippedTown {
        &SHIPPED_TOWNS[0]
    }

    /// The town called `name` (case ignored), or an error naming the choices.
    pub fn named(name: &str) -> Result<&'static ShippedTown, UnknownTown> {
        let wanted = name.trim();
        SHIPPED_TOWNS
            .iter()
            .find(|town| town.name.eq_ignore_ascii_case(wanted))
            .ok_or_else(|| UnknownTown {
                // Echo at most a short prefix of what was asked for.
                asked: wanted.chars().take(40).collect(),
            })
    }

    /// The map's path.
    pub fn map_path(&self) -> PathBuf {
        crate::files::crate_file(self.map)
    }

    /// The persona folder's path.
    pub fn personas_dir(&self) -> PathBuf {
        crate::files::crate_file(self.personas)
    }
}

/// No shipped town has that name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownTown {
    /// What was asked for (at most 40 characters of it).
    pub asked: String,
}

impl fmt::Display for UnknownTown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = SHIPPED_TOWNS.iter().map(|t| t.name).collect();
        write!(
            f,
            "no shipped town is called {:?}; the towns are: {}",
            self.asked,
            names.join(", ")
        )
    }
}

impl std::error::Error for UnknownTown {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn towns_are_found_by_name_and_exist() {
        assert_eq!(ShippedTown::default_town().name, "willowbrook");
        assert_eq!(
            ShippedTown::named(" Fernside ").map(|t| t.name),
            Ok("fernside")
        );
        for town in SHIPPED_TOWNS {
            assert!(town.map_path().is_file(), "{}", town.map);
            assert!(town.personas_dir().is_dir(), "{}", town.personas);
        }
        let err = ShippedTown::named(&"x".repeat(10_000)).expect_err("unknown");
        let text = err.to_string();
        assert!(text.contains("willowbrook, saltmere, fernside"), "{text}");
        assert!(text.len() < 200, "{text}");
    }
}
