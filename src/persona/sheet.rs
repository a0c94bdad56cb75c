//! Persona sheets: the JSON files a game writes to describe its characters.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::Scratch;
use crate::settings::{AgentSettings, PersonaDefaults};
use crate::world::{TileCoord, TownMap};

/// Problems with persona sheets. Each names the file or persona concerned.
#[derive(Debug, thiserror::Error)]
pub enum PersonaError {
    /// The folder or a file could not be read.
    #[error("cannot read {path}: {reason}")]
    Io {
        /// The path.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// A file is not a valid sheet.
    #[error("{path} is not a valid persona sheet: {reason}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong (from the JSON parser, with line and column).
        reason: String,
    },
    /// A sheet does not fit the map.
    #[error("persona `{name}`: {reason}")]
    DoesNotFitMap {
        /// The persona.
        name: String,
        /// What is missing from the map.
        reason: String,
    },
    /// Two sheets share a name.
    #[error("two personas are named `{0}`; names must be unique")]
    DuplicateName(String),
    /// The folder holds no sheets.
    #[error("no persona sheets (*.json) in {0}")]
    Empty(PathBuf),
}

/// One character, as authored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PersonaSheet {
    /// Full name, unique in the simulation.
    pub name: String,
    /// First name.
    pub first_name: String,
    /// Last name.
    pub last_name: String,
    /// Age in years.
    pub age: u32,
    /// Innate traits ("warm, organised").
    pub innate: String,
    /// Background and skills.
    pub learned: String,
    /// What the persona is up to these days.
    pub currently: String,
    /// Habits: sleep and work hours.
    pub lifestyle: String,
    /// Home, `world:sector:arena`.
    pub living_area: String,
    /// Workplace address, optional.
    #[serde(default)]
    pub workplace: Option<String>,
    /// What the daily plan must include.
    pub daily_plan_req: String,
    /// The spawning location's name in the map.
    pub spawn: String,
    /// Sectors the persona knows at the start; all of the town when absent.
    #[serde(default)]
    pub known_sectors: Option<Vec<String>>,
    /// Overrides of the default hyper-parameters.
    #[serde(default)]
    pub params: Option<PersonaDefaults>,
}

impl PersonaSheet {
    /// Parses a sheet from JSON text; `path` is only used in the error.
    pub fn from_json(path: &Path, text: &str) -> Result<Self, PersonaError> {
        let sheet: Self = serde_json::from_str(text).map_err(|e| PersonaError::Invalid {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        if sheet.name.trim().is_empty() {
            return Err(PersonaError::Invalid {
                path: path.to_path_buf(),
                reason: "empty `name`".into(),
            });
        }
        Ok(sheet)
    }

    /// Checks the sheet against the map and returns its spawn tile.
    pub fn validate(&self, map: &TownMap) -> Result<TileCoord, PersonaError> {
        let unfit = |reason: String| PersonaError::DoesNotFitMap {
            name: self.name.clone(),
            reason,
        };
        let tile = map
            .spawn_location(&self.spawn)
            .ok_or_else(|| unfit(format!("spawn location `{}` is not in the map", self.spawn)))?;
        if map.address_tiles(&self.living_area).is_none() {
            return Err(unfit(format!(
                "living area `{}` is not in the map",
                self.living_area
            )));
        }
        if let Some(work) = &self.workplace
            && map.address_tiles(work).is_none()
        {
            return Err(unfit(format!("workplace `{work}` is not in the map")));
        }
        Ok(tile)
    }

    /// The persona's initial scratch.
    pub fn to_scratch(&self, settings: &AgentSettings) -> Scratch {
        let params = self.params.unwrap_or(settings.persona);
        Scratch {
            name: self.name.clone(),
            first_name: self.first_name.clone(),
            last_name: self.last_name.clone(),
            age: self.age,
            innate: self.innate.clone(),
            learned: self.learned.clone(),
            currently: self.currently.clone(),
            lifestyle: self.lifestyle.clone(),
            living_area: self.living_area.clone(),
            workplace: self.workplace.clone(),
            daily_plan_req: self.daily_plan_req.clone(),
            params,
            importance_trigger_curr: params.importance_trigger_max,
            ..Default::default()
        }
    }
}

/// The default town's persona folder (`assets/personas` in this crate).
pub fn default_personas_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("assets")
        .join("personas")
}

/// Loads every `*.json` sheet of `dir`, sorted by file name. Names must be unique.
pub fn load_persona_sheets(dir: impl AsRef<Path>) -> Result<Vec<PersonaSheet>, PersonaError> {
    let dir = dir.as_ref();
    let io = |path: &Path, e: std::io::Error| PersonaError::Io {
        path: path.to_path_buf(),
        reason: e.to_string(),
    };
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| io(dir, e))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(PersonaError::Empty(dir.to_path_buf()));
    }
    let mut sheets: Vec<PersonaSheet> = Vec::with_capacity(files.len());
    for path in files {
        let text = std::fs::read_to_string(&path).map_err(|e| io(&path, e))?;
        let sheet = PersonaSheet::from_json(&path, &text)?;
        if sheets.iter().any(|s| s.name == sheet.name) {
            return Err(PersonaError::DuplicateName(sheet.name));
        }
        sheets.push(sheet);
    }
    Ok(sheets)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_sheets_load_with_unique_names() {
        let sheets = load_persona_sheets(default_personas_dir()).unwrap();
        assert_eq!(sheets.len(), 5);
        assert_eq!(sheets[0].name, "Elena Reyes");
        let scratch = sheets[0].to_scratch(&AgentSettings::default());
        assert_eq!(scratch.importance_trigger_curr, 150);
        assert_eq!(scratch.params.vision_r, 4);
    }

    #[test]
    fn bad_sheets_are_clear_errors() {
        let p = Path::new("x.json");
        let err = PersonaSheet::from_json(p, "{\"name\": 3}")
            .unwrap_err()
            .to_string();
        assert!(err.contains("x.json"), "{err}");
        let err = PersonaSheet::from_json(p, "not json")
            .unwrap_err()
            .to_string();
        assert!(err.contains("x.json"), "{err}");
        let mut good: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(default_personas_dir().join("mira_okafor.json")).unwrap(),
        )
        .unwrap();
        good["unexpected"] = serde_json::json!(1);
        let err = PersonaSheet::from_json(p, &good.to_string())
            .unwrap_err()
            .to_string();
        assert!(err.contains("unexpected"), "{err}");
        assert!(matches!(
            load_persona_sheets("/definitely/not/here"),
            Err(PersonaError::Io { .. })
        ));
    }
}
