//! A scene written as a file (`assets/stages/*.json`): the stage, its environment and its
//! actors, persona actors named by the persona who plays them. Loaded as untrusted input:
//! bounded size, no unknown fields, every actor checked ([`Scene::new`]), every named persona
//! present in the town.
//!
//! ```json
//! {
//!   "name": "Standoff at the cafe",
//!   "arena": "Willowbrook:Riverside Cafe:cafe",
//!   "environment": "Rain on the windows; the last customers have gone.",
//!   "actors": [
//!     {"persona": "Sam Lindqvist", "appearance": "…", "position": "behind the counter"},
//!     {"name": "Stranger", "appearance": "…", "attributes": {"health": 80, "max_health": 80, "attack": 12}},
//!     {"name": "Shade", "appearance": "…", "hidden": true}
//!   ]
//! }
//! ```

use std::collections::BTreeMap;
use std::path::Path;

use bevy::prelude::*;
use serde::{Deserialize, Serialize};

use super::actor::{ATTACK, Actor, HEALTH, MAX_HEALTH};
use super::scene::Scene;
use crate::files::{ReadError, read_text_at_most};

/// The largest scene file read.
pub const MAX_SCENE_FILE_BYTES: u64 = 256 * 1024;

/// A scene file.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SceneFile {
    /// The stage's name.
    pub name: String,
    /// The town arena it plays in (`world:sector:arena`), if any.
    #[serde(default)]
    pub arena: Option<String>,
    /// The place now.
    pub environment: String,
    /// The actors, in order.
    pub actors: Vec<ActorFile>,
}

/// One actor of a scene file.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ActorFile {
    /// Its name (a persona actor's defaults to the persona's).
    #[serde(default)]
    pub name: Option<String>,
    /// The persona playing it (its full name), if any.
    #[serde(default)]
    pub persona: Option<String>,
    /// How it looks.
    pub appearance: String,
    /// Attributes; `health`, `max_health` and `attack` default to 100, 100 and 10.
    #[serde(default)]
    pub attributes: BTreeMap<String, i64>,
    /// Effects.
    #[serde(default)]
    pub effects: Vec<String>,
    /// Where it stands.
    #[serde(default)]
    pub position: Option<String>,
    /// How it stands.
    #[serde(default)]
    pub posture: Option<String>,
    /// Anything else one notices.
    #[serde(default)]
    pub special: Option<String>,
    /// Hidden from the other actors.
    #[serde(default)]
    pub hidden: bool,
}

/// Reads and checks a scene file; `personas` are the town's, by full name.
pub fn load_scene(path: &Path, personas: &[(String, Entity)]) -> Result<Scene, String> {
    let shown = path.display();
    let text = read_text_at_most(path, MAX_SCENE_FILE_BYTES).map_err(|e| match e {
        ReadError::TooLarge { bytes, .. } => format!(
            "scene {shown}: {bytes} bytes, more than the {MAX_SCENE_FILE_BYTES} a scene may have"
        ),
        ReadError::Io(e) => format!("scene {shown}: cannot read the file: {e}"),
    })?;
    let file: SceneFile = serde_json::from_str(&text).map_err(|e| format!("scene {shown}: {e}"))?;
    scene_from_file(file, personas).map_err(|e| format!("scene {shown}: {e}"))
}

/// A [`SceneFile`] made a checked [`Scene`].
pub fn scene_from_file(file: SceneFile, personas: &[(String, Entity)]) -> Result<Scene, String> {
    let mut actors = Vec::with_capacity(file.actors.len().min(64));
    for (i, a) in file.actors.into_iter().enumerate().take(64) {
        let persona = match &a.persona {
            Some(name) => Some(
                personas
                    .iter()
                    .find(|(n, _)| n.eq_ignore_ascii_case(name))
                    .map(|(_, e)| *e)
                    .ok_or_else(|| {
                        format!(
                            "actor {}: no persona of this town is called {:?}",
                            i + 1,
                            super::actor::clean_field(name, 60)
                        )
                    })?,
            ),
            None => None,
        };
        let name = a
            .name
            .clone()
            .or(a.persona.clone())
            .ok_or_else(|| format!("actor {}: give a name or a persona", i + 1))?;
        let mut actor = Actor::new(name, a.appearance);
        for (key, default) in [(HEALTH, 100), (MAX_HEALTH, 100), (ATTACK, 10)] {
            actor.attributes.insert(
                key.to_string(),
                a.attributes.get(key).copied().unwrap_or(default),
            );
        }
        for (key, value) in a.attributes {
            actor.attributes.insert(key, value);
        }
        actor.effects = a.effects;
        if let Some(position) = a.position {
            actor.position = position;
        }
        if let Some(posture) = a.posture {
            actor.posture = posture;
        }
        actor.special = a.special.unwrap_or_default();
        actor.hidden = a.hidden;
        actor.persona = persona;
        actors.push(actor);
    }
    let mut scene = Scene::new(file.name, file.environment, actors)?;
    if let Some(arena) = &file.arena {
        super::actor::check_name(arena.split(':').next_back().unwrap_or(""))
            .map_err(|e| format!("arena: {e}"))?;
        scene.arena = Some(super::actor::clean_field(arena, 200));
    }
    Ok(scene)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_scene_loads_and_bad_files_are_refused() {
        let ada = Entity::from_raw_u32(1).expect("an index");
        let town = vec![
            ("Mira Okafor".to_string(), ada),
            ("Tomas Reyes".to_string(), ada),
        ];
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/stages/standoff.json");
        let scene = load_scene(&path, &town).expect("the shipped scene loads");
        assert_eq!(scene.actors.len(), 4);
        assert_eq!(scene.actors.iter().filter(|a| a.hidden).count(), 1);
        assert_eq!(
            scene.actors.iter().filter(|a| a.persona.is_some()).count(),
            2
        );

        let dir = std::env::temp_dir().join(format!("bga-stage-file-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a scratch dir");
        let bad = |name: &str, text: &str| {
            let file = dir.join(name);
            std::fs::write(&file, text).expect("written");
            load_scene(&file, &town).expect_err(name)
        };
        let unknown = bad(
            "unknown.json",
            r#"{"name":"Pub","environment":"x","actors":[{"persona":"Nobody Here","appearance":"x"}]}"#,
        );
        assert!(unknown.contains("no persona of this town"), "{unknown}");
        bad(
            "field.json",
            r#"{"name":"Pub","environment":"x","actors":[],"script":"rm -rf"}"#,
        );
        bad(
            "empty.json",
            r#"{"name":"Pub","environment":"x","actors":[]}"#,
        );
        bad(
            "nameless.json",
            r#"{"name":"Pub","environment":"x","actors":[{"appearance":"x"}]}"#,
        );
        bad(
            "health.json",
            r#"{"name":"Pub","environment":"x","actors":[{"name":"A","appearance":"x","attributes":{"health":500}}]}"#,
        );
        bad("prose.json", "a standoff in the pub");
        let big = format!(
            r#"{{"name":"Pub","environment":"{}","actors":[]}}"#,
            "x".repeat(300 * 1024)
        );
        let error = bad("big.json", &big);
        assert!(error.contains("more than"), "{error}");
        assert!(load_scene(&dir.join("missing.json"), &town).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
