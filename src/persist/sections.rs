//! Save sections: state of systems that sit *above* the save format (the director) in saves,
//! without the format knowing them. A plugin registers a [`SaveSection`] — a name and three
//! functions: capture the state between steps, check a saved copy as untrusted input, restore
//! it — and every save of a world that has something to keep holds `sections/<name>.json`,
//! listed in `meta.json`'s `sections` (so the manifest covers it and a removed file is missed).
//!
//! A load checks every section the app knows before it touches the world (an error names the
//! file and the field), then restores each known section — with `None` when the save has none
//! of it, so a system drops what belonged to the town the load replaced. A section the app does
//! not know (a save from a game with more plugins) is skipped with a warning. The director's
//! in-memory snapshot ([`TownSnapshot`](super::TownSnapshot)) is the *town* only: it captures
//! and restores no section.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;

use bevy::prelude::*;

use super::PersistError;

/// The folder of the sections in a save.
pub(crate) const SECTIONS_DIR: &str = "sections";
/// Most sections one save may hold.
pub const MAX_SECTIONS: usize = 16;

/// Captures a section between steps (personas named by the map): `None` when there is nothing
/// to keep. Fails like a save does ([`PersistError::Busy`] while something is out).
pub type CaptureSection =
    fn(&mut World, &HashMap<Entity, String>) -> Result<Option<Vec<u8>>, PersistError>;
/// Checks a saved section as untrusted input against the save's persona names: `Err((field,
/// why))`.
pub type CheckSection = fn(&[u8], &BTreeSet<&str>) -> Result<(), (String, String)>;
/// Restores a section (checked) after the save's personas are spawned, or clears the system's
/// state when the save has none (`None`).
pub type RestoreSection = fn(&mut World, Option<&[u8]>, &BTreeMap<String, Entity>);

/// One system's part of a save.
#[derive(Debug, Clone, Copy)]
pub struct SaveSection {
    /// The file's name under `sections/` (without `.json`): 1–32 of `a-z`, `0-9`, `_`.
    pub name: &'static str,
    /// See [`CaptureSection`].
    pub capture: CaptureSection,
    /// See [`CheckSection`].
    pub check: CheckSection,
    /// See [`RestoreSection`].
    pub restore: RestoreSection,
}

/// The sections this app keeps in its saves, in registration order.
#[derive(Resource, Debug, Clone, Default)]
pub struct SaveSections(Vec<SaveSection>);

impl SaveSections {
    /// Adds `section` (a second one of the same name replaces the first). Panics on a name
    /// that is not 1–32 of `a-z`, `0-9`, `_` — a programming error, not input.
    pub fn add(&mut self, section: SaveSection) {
        assert!(
            valid_name(section.name),
            "a save section's name is 1–32 of a-z, 0-9, _: {:?}",
            section.name
        );
        self.0.retain(|s| s.name != section.name);
        self.0.push(section);
    }

    /// The section called `name`.
    pub fn get(&self, name: &str) -> Option<&SaveSection> {
        self.0.iter().find(|s| s.name == name)
    }

    /// Every section, in registration order.
    pub fn iter(&self) -> impl Iterator<Item = &SaveSection> {
        self.0.iter()
    }
}

/// Whether `name` may name a section.
pub(crate) fn valid_name(name: &str) -> bool {
    (1..=32).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// The file of section `name`, relative to the save.
pub(crate) fn section_file(name: &str) -> PathBuf {
    PathBuf::from(SECTIONS_DIR).join(format!("{name}.json"))
}

/// Every section of `world` with something to keep.
pub(crate) fn capture_sections(
    world: &mut World,
    names: &HashMap<Entity, String>,
) -> Result<BTreeMap<String, Vec<u8>>, PersistError> {
    let sections = world
        .get_resource::<SaveSections>()
        .cloned()
        .unwrap_or_default();
    let mut out = BTreeMap::new();
    for section in sections.iter() {
        if let Some(bytes) = (section.capture)(world, names)? {
            out.insert(section.name.to_string(), bytes);
        }
    }
    Ok(out)
}

/// Checks the saved sections the app knows (before the world is touched).
pub(crate) fn check_sections(
    world: &World,
    saved: &BTreeMap<String, Vec<u8>>,
    personas: &[String],
) -> Result<(), PersistError> {
    let Some(sections) = world.get_resource::<SaveSections>() else {
        return Ok(());
    };
    let names: BTreeSet<&str> = personas.iter().map(String::as_str).collect();
    for (name, bytes) in saved {
        match sections.get(name) {
            Some(section) => {
                (section.check)(bytes, &names).map_err(|(field, message)| {
                    PersistError::Invalid {
                        file: section_file(name),
                        field,
                        message,
                    }
                })?;
            }
            None => warn!(
                section = %name,
                "the save keeps a section this game does not know; it is skipped"
            ),
        }
    }
    Ok(())
}

/// Restores every section the app knows (`None` for those the save lacks).
pub(crate) fn restore_sections(
    world: &mut World,
    saved: &BTreeMap<String, Vec<u8>>,
    by_name: &BTreeMap<String, Entity>,
) {
    let sections = world
        .get_resource::<SaveSections>()
        .cloned()
        .unwrap_or_default();
    for section in sections.iter() {
        (section.restore)(world, saved.get(section.name).map(Vec::as_slice), by_name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_plain_lowercase_words() {
        for ok in ["director", "a", "quest_log_2"] {
            assert!(valid_name(ok), "{ok}");
        }
        for bad in ["", "Director", "../meta", "a.json", "a b", &"x".repeat(33)] {
            assert!(!valid_name(bad), "{bad:?}");
        }
        assert_eq!(
            section_file("director"),
            PathBuf::from("sections/director.json")
        );
    }
}
