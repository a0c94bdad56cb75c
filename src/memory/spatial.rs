//! Spatial memory: the places a persona knows (SPEC §2, §3.1).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::MemoryError;

type Arenas = BTreeMap<String, BTreeSet<String>>;
type Sectors = BTreeMap<String, Arenas>;

/// The tree `world → sector → arena → {objects}` of what a persona has seen.
///
/// Ordered maps keep every listing (and the saved `spatial_memory.json`, which is this nested
/// object) deterministic. Lookups try the exact name first and then ignore case, because
/// models often capitalise names differently from the map.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SpatialMemory {
    tree: BTreeMap<String, Sectors>,
}

/// `Some(trimmed)` for a non-blank name.
fn present(name: Option<&str>) -> Option<&str> {
    name.map(str::trim).filter(|n| !n.is_empty())
}

/// The entry named `name`: exact match first, then case-insensitive (first in name order).
fn lookup<'a, V>(map: &'a BTreeMap<String, V>, name: &str) -> Option<&'a V> {
    let name = name.trim();
    map.get(name).or_else(|| {
        let lower = name.to_lowercase();
        map.iter()
            .find(|(k, _)| k.to_lowercase() == lower)
            .map(|(_, v)| v)
    })
}

impl SpatialMemory {
    /// Records a place. Parts are nested: an arena is only recorded under a sector, an object
    /// only under an arena; a missing or blank part ends the path there.
    pub fn add(
        &mut self,
        world: &str,
        sector: Option<&str>,
        arena: Option<&str>,
        object: Option<&str>,
    ) {
        let Some(world) = present(Some(world)) else {
            return;
        };
        let sectors = self.tree.entry(world.to_owned()).or_default();
        let Some(sector) = present(sector) else {
            return;
        };
        let arenas = sectors.entry(sector.to_owned()).or_default();
        let Some(arena) = present(arena) else { return };
        let objects = arenas.entry(arena.to_owned()).or_default();
        if let Some(object) = present(object) {
            objects.insert(object.to_owned());
        }
    }

    /// Records the place at a `world:sector:arena:object` address (any suffix may be missing).
    pub fn add_address(&mut self, address: &str) {
        let mut parts = address.split(':');
        let world = parts.next().unwrap_or_default();
        self.add(world, parts.next(), parts.next(), parts.next());
    }

    /// The worlds known.
    pub fn worlds(&self) -> Vec<String> {
        self.tree.keys().cloned().collect()
    }

    /// The sectors known in `world`, in name order (empty when the world is unknown).
    pub fn accessible_sectors(&self, world: &str) -> Vec<String> {
        lookup(&self.tree, world)
            .map(|s| s.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// The arenas known in `world:sector`, in name order.
    pub fn accessible_arenas(&self, world: &str, sector: &str) -> Vec<String> {
        self.arenas(world, sector)
            .map(|a| a.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// The objects known in `world:sector:arena`, in name order.
    pub fn accessible_objects(&self, world: &str, sector: &str, arena: &str) -> Vec<String> {
        self.arenas(world, sector)
            .and_then(|a| lookup(a, arena))
            .map(|o| o.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Whether the place is known. `None` parts are not checked, so
    /// `knows("w", Some("s"), None, None)` asks about the sector only.
    pub fn knows(
        &self,
        world: &str,
        sector: Option<&str>,
        arena: Option<&str>,
        object: Option<&str>,
    ) -> bool {
        let Some(sectors) = lookup(&self.tree, world) else {
            return false;
        };
        let Some(sector) = present(sector) else {
            return true;
        };
        let Some(arenas) = lookup(sectors, sector) else {
            return false;
        };
        let Some(arena) = present(arena) else {
            return true;
        };
        let Some(objects) = lookup(arenas, arena) else {
            return false;
        };
        let Some(object) = present(object) else {
            return true;
        };
        objects.contains(object) || {
            let lower = object.to_lowercase();
            objects.iter().any(|o| o.to_lowercase() == lower)
        }
    }

    /// Whether the place at a `world:sector:arena:object` address is known.
    pub fn knows_address(&self, address: &str) -> bool {
        let mut parts = address.split(':');
        let world = parts.next().unwrap_or_default();
        self.knows(world, parts.next(), parts.next(), parts.next())
    }

    /// Whether nothing is known.
    pub fn is_empty(&self) -> bool {
        self.tree.is_empty()
    }

    fn arenas(&self, world: &str, sector: &str) -> Option<&Arenas> {
        lookup(&self.tree, world).and_then(|s| lookup(s, sector))
    }

    /// `spatial_memory.json` (SPEC §11): `{world: {sector: {arena: [objects]}}}`.
    pub fn to_json(&self) -> Result<serde_json::Value, MemoryError> {
        serde_json::to_value(self).map_err(|source| MemoryError::Json {
            file: SPATIAL_FILE,
            source,
        })
    }

    /// Reads `spatial_memory.json`. Blank names are rejected.
    pub fn from_json(value: serde_json::Value) -> Result<Self, MemoryError> {
        let memory: Self = serde_json::from_value(value).map_err(|source| MemoryError::Json {
            file: SPATIAL_FILE,
            source,
        })?;
        memory.check()?;
        Ok(memory)
    }

    /// Reads `spatial_memory.json` from text.
    pub fn from_json_str(text: &str) -> Result<Self, MemoryError> {
        let memory: Self = serde_json::from_str(text).map_err(|source| MemoryError::Json {
            file: SPATIAL_FILE,
            source,
        })?;
        memory.check()?;
        Ok(memory)
    }

    fn check(&self) -> Result<(), MemoryError> {
        let blank = |name: &String| name.trim().is_empty();
        for (world, sectors) in &self.tree {
            let bad = blank(world)
                || sectors.iter().any(|(sector, arenas)| {
                    blank(sector)
                        || arenas
                            .iter()
                            .any(|(arena, objects)| blank(arena) || objects.iter().any(blank))
                });
            if bad {
                return Err(MemoryError::Invalid {
                    file: SPATIAL_FILE,
                    reason: format!("a place in world {world:?} has a blank name"),
                });
            }
        }
        Ok(())
    }
}

/// The file name used in error messages.
const SPATIAL_FILE: &str = "spatial_memory.json";

#[cfg(test)]
mod tests {
    use super::*;

    fn town() -> SpatialMemory {
        let mut mem = SpatialMemory::default();
        mem.add(
            "Willowbrook",
            Some("Reyes house"),
            Some("kitchen"),
            Some("stove"),
        );
        mem.add(
            "Willowbrook",
            Some("Reyes house"),
            Some("kitchen"),
            Some("refrigerator"),
        );
        mem.add(
            "Willowbrook",
            Some("Reyes house"),
            Some("bedroom"),
            Some("bed"),
        );
        mem.add_address("Willowbrook:Maple Park:park:bench");
        mem.add_address("Willowbrook:Riverside Cafe");
        mem
    }

    #[test]
    fn listings_are_sorted_and_nested() {
        let mem = town();
        assert_eq!(
            mem.accessible_sectors("Willowbrook"),
            vec!["Maple Park", "Reyes house", "Riverside Cafe"]
        );
        assert_eq!(
            mem.accessible_arenas("Willowbrook", "Reyes house"),
            vec!["bedroom", "kitchen"]
        );
        assert_eq!(
            mem.accessible_objects("Willowbrook", "Reyes house", "kitchen"),
            vec!["refrigerator", "stove"]
        );
        assert!(
            mem.accessible_arenas("Willowbrook", "Riverside Cafe")
                .is_empty()
        );
        assert!(mem.accessible_sectors("Elsewhere").is_empty());
    }

    #[test]
    fn lookups_fall_back_to_case_insensitive() {
        let mem = town();
        assert_eq!(
            mem.accessible_objects("willowbrook", "REYES HOUSE", "Kitchen"),
            vec!["refrigerator", "stove"]
        );
        assert!(mem.knows(
            "Willowbrook",
            Some("Maple Park"),
            Some("park"),
            Some("Bench")
        ));
        assert!(mem.knows("Willowbrook", Some("Maple Park"), None, None));
        assert!(!mem.knows(
            "Willowbrook",
            Some("Maple Park"),
            Some("park"),
            Some("swing")
        ));
        assert!(mem.knows_address("Willowbrook:Reyes house:bedroom"));
        assert!(!mem.knows_address("Willowbrook:Okafor house"));
    }

    #[test]
    fn blank_parts_end_the_path() {
        let mut mem = SpatialMemory::default();
        mem.add("Willowbrook", Some(" "), Some("kitchen"), Some("stove"));
        mem.add("", Some("x"), None, None);
        assert_eq!(mem.worlds(), vec!["Willowbrook"]);
        assert!(mem.accessible_sectors("Willowbrook").is_empty());
    }

    #[test]
    fn json_round_trip_and_errors() {
        let mem = town();
        let json = mem.to_json().unwrap();
        assert_eq!(
            json["Willowbrook"]["Reyes house"]["kitchen"],
            serde_json::json!(["refrigerator", "stove"])
        );
        assert_eq!(SpatialMemory::from_json(json).unwrap(), mem);
        let err = SpatialMemory::from_json(serde_json::json!({"w": {"s": ["not", "a", "map"]}}))
            .unwrap_err();
        assert!(
            err.to_string().starts_with("spatial_memory.json: "),
            "{err}"
        );
        let err = SpatialMemory::from_json(serde_json::json!({"w": {"": {}}})).unwrap_err();
        assert!(matches!(err, MemoryError::Invalid { .. }), "{err}");
        assert!(SpatialMemory::from_json_str("{\"w\": {").is_err());
    }
}
