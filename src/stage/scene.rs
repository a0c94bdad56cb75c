//! A stage scene (SPEC §9): the stage's name and environment, its actors, and what each actor is
//! shown — its own private block and the stage block *as it sees it* (hidden actors other than
//! itself are left out entirely, not merely flagged) — plus how the stage agent's resolution
//! changes the scene, validated field by field.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::actor::{
    ATTRIBUTE_LIMIT, Actor, HEALTH, MAX_EFFECTS, MAX_FIELD_CHARS, MAX_HEALTH, MAX_TEXT_CHARS,
    check_name, clean_field,
};
use crate::dialogue::prompts::truncate_chars;

/// Most actors on one stage.
pub const MAX_ACTORS: usize = 12;

/// A scene being played on a stage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Scene {
    /// The stage's name ("the Crooked Anchor").
    pub name: String,
    /// The arena it plays in (`world:sector:arena`), if it is one of the town's.
    pub arena: Option<String>,
    /// What the place is like now.
    pub environment: String,
    /// The actors still in the scene, in the order they came on.
    pub actors: Vec<Actor>,
    /// Actors who left it (health ≤ 0), with the turn they fell.
    pub fallen: Vec<(Actor, u32)>,
    /// Turns played.
    pub turn: u32,
    /// The narration of each turn played.
    pub narration: Vec<String>,
}

impl Scene {
    /// A scene on stage `name` in `environment` with `actors`, checked as untrusted input
    /// (names, texts, attributes; unique names ignoring case; 1–12 actors).
    pub fn new(
        name: impl Into<String>,
        environment: impl Into<String>,
        actors: Vec<Actor>,
    ) -> Result<Self, String> {
        let name = name.into();
        let environment = environment.into();
        check_name(&name)?;
        if environment.chars().count() > MAX_TEXT_CHARS
            || environment.chars().any(|c| matches!(c, '<' | '>'))
        {
            return Err(format!(
                "the environment has at most {MAX_TEXT_CHARS} characters and no '<' or '>'"
            ));
        }
        if actors.is_empty() || actors.len() > MAX_ACTORS {
            return Err(format!("a scene has 1–{MAX_ACTORS} actors"));
        }
        let mut seen = std::collections::BTreeSet::new();
        for actor in &actors {
            actor.check()?;
            if !seen.insert(actor.name.to_lowercase()) {
                return Err(format!("two actors are called {}", actor.name));
            }
        }
        Ok(Self {
            name,
            arena: None,
            environment,
            actors,
            fallen: Vec::new(),
            turn: 0,
            narration: Vec::new(),
        })
    }

    /// The actor called `name` (ignoring case), if it is still in the scene.
    pub fn actor(&self, name: &str) -> Option<&Actor> {
        self.actors
            .iter()
            .find(|a| a.name.eq_ignore_ascii_case(name))
    }

    /// The stage block `viewer` is shown (SPEC §9, the second JSON block of its turn): the
    /// stage's name and environment, the states of every actor it can see — itself included —
    /// and the appearances of the *others* it can see. A hidden actor is seen by nobody but
    /// itself: its name, state and appearance are not in anyone else's block. `None` as the
    /// viewer is the public view (hidden actors left out), as `game://stage/{name}` returns it.
    pub fn stage_block(&self, viewer: Option<&str>) -> Value {
        let is_viewer = |a: &Actor| viewer.is_some_and(|v| a.name.eq_ignore_ascii_case(v));
        let visible: Vec<&Actor> = self
            .actors
            .iter()
            .filter(|a| is_viewer(a) || !a.hidden)
            .collect();
        let states = visible
            .iter()
            .map(|a| a.state_line())
            .collect::<Vec<_>>()
            .join("\n");
        let appearances: Vec<Value> = visible
            .iter()
            .filter(|a| !is_viewer(a))
            .map(|a| json!({"name": a.name, "appearance": a.appearance}))
            .collect();
        json!({
            "name": self.name,
            "environment": self.environment,
            "actor_states": states,
            "actors_appearance": appearances,
        })
    }

    /// The stage agent's input: every actor's state and plan, in Markdown (the narrator sees
    /// hidden actors too — it resolves what they do).
    pub fn plans_markdown(&self, plans: &BTreeMap<String, String>) -> String {
        let mut out = String::new();
        for actor in &self.actors {
            let plan = plans.get(&actor.name).map_or("(no plan)", String::as_str);
            let hidden = if actor.hidden { " (hidden)" } else { "" };
            out.push_str(&format!(
                "### {}{hidden}\n- state: {} | {} | {}\n- health {}/{}, attack {}{}\n- plan: {}\n\n",
                actor.name,
                actor.position,
                actor.posture,
                if actor.special.is_empty() { "-" } else { &actor.special },
                actor.health(),
                actor.attribute(MAX_HEALTH),
                actor.attribute(super::actor::ATTACK),
                if actor.effects.is_empty() {
                    String::new()
                } else {
                    format!(", effects: {}", actor.effects.join(", "))
                },
                plan
            ));
        }
        out
    }

    /// Applies the stage agent's resolution (already parsed) and returns what happened to the
    /// actors. Every update is validated: an unknown actor is ignored; attribute changes are
    /// deltas, health clamped to `0..=max_health` and other attributes to ±1,000,000; effects
    /// and texts are cleaned and bounded; an actor at health ≤ 0 leaves the scene. The turn's
    /// narration is kept.
    pub fn apply(&mut self, resolution: &Resolution) -> Applied {
        let mut applied = Applied::default();
        for update in &resolution.updates {
            let Some(actor) = self
                .actors
                .iter_mut()
                .find(|a| a.name.eq_ignore_ascii_case(&update.name))
            else {
                applied
                    .ignored
                    .push(truncate_chars(&update.name, 60).to_string());
                continue;
            };
            for (attribute, delta) in &update.deltas {
                if attribute == MAX_HEALTH {
                    // Only the game sets the ceiling.
                    continue;
                }
                let old = actor.attribute(attribute);
                let new = if attribute == HEALTH {
                    old.saturating_add(*delta)
                        .clamp(0, actor.attribute(MAX_HEALTH).max(0))
                } else if actor.attributes.contains_key(attribute) {
                    old.saturating_add(*delta)
                        .clamp(-ATTRIBUTE_LIMIT, ATTRIBUTE_LIMIT)
                } else {
                    // The model may not invent attributes.
                    continue;
                };
                if new != old {
                    actor.attributes.insert(attribute.clone(), new);
                    applied
                        .changes
                        .push((actor.name.clone(), attribute.clone(), old, new));
                }
            }
            actor.effects.retain(|e| {
                !update
                    .effects_removed
                    .iter()
                    .any(|r| r.eq_ignore_ascii_case(e))
            });
            for effect in &update.effects_added {
                let effect = clean_field(effect, MAX_FIELD_CHARS);
                if !effect.is_empty()
                    && actor.effects.len() < MAX_EFFECTS
                    && !actor
                        .effects
                        .iter()
                        .any(|e| e.eq_ignore_ascii_case(&effect))
                {
                    actor.effects.push(effect);
                }
            }
            for (field, value) in [
                (&mut actor.position, &update.position),
                (&mut actor.posture, &update.posture),
                (&mut actor.special, &update.special),
            ] {
                if let Some(value) = value {
                    let value = clean_field(value, MAX_FIELD_CHARS);
                    if !value.is_empty() {
                        *field = value;
                    }
                }
            }
        }
        if let Some(environment) = &resolution.environment {
            let environment = clean_field(environment, MAX_TEXT_CHARS);
            if !environment.is_empty() {
                self.environment = environment;
            }
        }
        self.turn += 1;
        self.narration.push(resolution.summary.clone());
        let turn = self.turn;
        let (standing, fallen): (Vec<Actor>, Vec<Actor>) = std::mem::take(&mut self.actors)
            .into_iter()
            .partition(Actor::standing);
        self.actors = standing;
        for actor in fallen {
            applied.left.push(actor.name.clone());
            self.fallen.push((actor, turn));
        }
        applied
    }
}

/// The stage agent's answer: the narration and the updates (SPEC §9).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resolution {
    /// What happened this turn, for everyone.
    pub summary: String,
    /// Changes per actor.
    pub updates: Vec<ActorUpdate>,
    /// The stage's new environment text, if it changed.
    pub environment: Option<String>,
}

/// What the stage agent changes for one actor.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ActorUpdate {
    /// The actor (an unknown one is ignored).
    pub name: String,
    /// Attribute deltas (`health: -12`).
    pub deltas: BTreeMap<String, i64>,
    /// Effects it gains.
    pub effects_added: Vec<String>,
    /// Effects it loses.
    pub effects_removed: Vec<String>,
    /// Its new position, posture, special state.
    pub position: Option<String>,
    /// See `position`.
    pub posture: Option<String>,
    /// See `position`.
    pub special: Option<String>,
}

/// What a resolution did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Applied {
    /// (actor, attribute, old, new) for every attribute that changed.
    pub changes: Vec<(String, String, i64, i64)>,
    /// Actors who left the scene (health ≤ 0).
    pub left: Vec<String>,
    /// Names of updates that matched no actor.
    pub ignored: Vec<String>,
}

/// Why a `game://` resource could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResourceError {
    /// Not `game://actor/{name}` or `game://stage/{name}`.
    #[error("not a game resource (game://actor/NAME or game://stage/NAME)")]
    BadUri,
    /// No such actor or stage.
    #[error("no {0} is called that")]
    NotFound(&'static str),
}

/// Reads `game://actor/{name}` (an actor's private block; a hidden actor is found only by its
/// own name, as everyone's own block is) or `game://stage/{name}` (the stage's public block:
/// hidden actors left out) from the scenes playing.
pub fn read_resource<'a>(
    scenes: impl IntoIterator<Item = &'a Scene>,
    uri: &str,
) -> Result<Value, ResourceError> {
    let rest = uri.strip_prefix("game://").ok_or(ResourceError::BadUri)?;
    let (kind, name) = rest.split_once('/').ok_or(ResourceError::BadUri)?;
    if name.is_empty() || name.chars().count() > 120 {
        return Err(ResourceError::BadUri);
    }
    let name = name.replace("%20", " ");
    let mut scenes = scenes.into_iter();
    match kind {
        "actor" => scenes
            .find_map(|s| s.actor(&name).filter(|a| !a.hidden))
            .map(Actor::private_block)
            .ok_or(ResourceError::NotFound("actor")),
        "stage" => scenes
            .find(|s| s.name.eq_ignore_ascii_case(&name))
            .map(|s| s.stage_block(None))
            .ok_or(ResourceError::NotFound("stage")),
        _ => Err(ResourceError::BadUri),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stage::actor::ATTACK;

    fn graveyard() -> Scene {
        Scene::new(
            "Oedon Chapel graveyard",
            "A rusted iron gate hangs half open.",
            vec![
                Actor::new("Gascoigne", "tall, gaunt, a hunter's axe")
                    .at("the middle, by the angel statue")
                    .with(HEALTH, 1),
                Actor::new("Eileen", "a crow-feather cloak")
                    .at("the east side, in a dead tree's shadow")
                    .hidden(),
                Actor::new("Stranger", "a worn traveller's coat").at("the south gate"),
            ],
        )
        .expect("a valid scene")
    }

    #[test]
    fn a_hidden_actor_is_in_nobody_elses_stage_block() {
        let scene = graveyard();
        for viewer in ["Gascoigne", "Stranger"] {
            let block = scene.stage_block(Some(viewer)).to_string();
            assert!(!block.contains("Eileen"), "{viewer} sees Eileen: {block}");
            assert!(!block.contains("crow-feather"), "{block}");
            assert!(!block.contains("dead tree"), "{block}");
        }
        let hers = scene.stage_block(Some("Eileen"));
        assert!(
            hers["actor_states"]
                .as_str()
                .is_some_and(|s| s.contains("**Eileen**"))
        );
        // The others' appearances, never one's own.
        let theirs: Vec<&str> = hers["actors_appearance"]
            .as_array()
            .expect("a list")
            .iter()
            .filter_map(|a| a["name"].as_str())
            .collect();
        assert_eq!(theirs, ["Gascoigne", "Stranger"]);
        let public = scene.stage_block(None).to_string();
        assert!(!public.contains("Eileen"), "{public}");
        // The narrator sees everyone.
        assert!(
            scene
                .plans_markdown(&BTreeMap::new())
                .contains("### Eileen (hidden)")
        );
    }

    #[test]
    fn resolutions_are_validated_and_the_fallen_leave() {
        let mut scene = graveyard();
        let applied = scene.apply(&Resolution {
            summary: "The axe falls.".into(),
            updates: vec![
                ActorUpdate {
                    name: "stranger".into(),
                    deltas: BTreeMap::from([
                        (HEALTH.into(), 500),
                        (ATTACK.into(), 5),
                        (MAX_HEALTH.into(), 1_000),
                        ("mana".into(), 50),
                    ]),
                    effects_added: vec!["<b>bleeding</b>\n".into(), "".into()],
                    posture: Some("crouching **low**".into()),
                    ..ActorUpdate::default()
                },
                ActorUpdate {
                    name: "Gascoigne".into(),
                    deltas: BTreeMap::from([(HEALTH.into(), -9_999)]),
                    ..ActorUpdate::default()
                },
                ActorUpdate {
                    name: "Nobody".into(),
                    deltas: BTreeMap::from([(HEALTH.into(), -1)]),
                    ..ActorUpdate::default()
                },
            ],
            environment: Some("Blood on the snow.".into()),
        });
        let stranger = scene.actor("Stranger").expect("still there");
        assert_eq!(stranger.health(), 100, "clamped to max_health");
        assert_eq!(stranger.attribute(ATTACK), 15);
        assert_eq!(
            stranger.attribute(MAX_HEALTH),
            100,
            "the ceiling is the game's"
        );
        assert!(
            !stranger.attributes.contains_key("mana"),
            "no invented attributes"
        );
        assert_eq!(stranger.effects, ["b bleeding /b"], "tags neutralised");
        assert_eq!(stranger.posture, "crouching low");
        assert_eq!(applied.left, ["Gascoigne"]);
        assert!(scene.actor("Gascoigne").is_none());
        assert_eq!(scene.fallen[0].0.health(), 0, "health never below 0");
        assert_eq!(applied.ignored, ["Nobody"]);
        assert_eq!(scene.environment, "Blood on the snow.");
        assert_eq!((scene.turn, scene.narration.len()), (1, 1));
        for actor in &scene.actors {
            assert!(actor.check().is_ok(), "{actor:?}");
        }
    }

    #[test]
    fn resources_return_the_blocks_and_refuse_the_rest() {
        let scenes = [graveyard()];
        let actor = read_resource(&scenes, "game://actor/Gascoigne").expect("found");
        assert_eq!(actor["attributes"]["health"], 1);
        let stage =
            read_resource(&scenes, "game://stage/Oedon%20Chapel%20graveyard").expect("found");
        assert!(!stage.to_string().contains("Eileen"));
        for (uri, error) in [
            ("game://actor/Eileen", ResourceError::NotFound("actor")),
            ("game://actor/Nobody", ResourceError::NotFound("actor")),
            ("game://stage/Elsewhere", ResourceError::NotFound("stage")),
            ("file:///etc/passwd", ResourceError::BadUri),
            ("game://persona/Gascoigne", ResourceError::BadUri),
            ("game://actor/", ResourceError::BadUri),
            ("game://actor", ResourceError::BadUri),
        ] {
            assert_eq!(read_resource(&scenes, uri), Err(error), "{uri}");
        }
    }

    #[test]
    fn bad_scenes_are_refused() {
        let a = || Actor::new("Ann", "plain");
        assert!(Scene::new("Pub", "quiet", vec![]).is_err());
        assert!(
            Scene::new("Pub", "quiet", vec![a(); 2]).is_err(),
            "duplicate names"
        );
        assert!(Scene::new("Pub", "quiet", vec![a(); 13]).is_err());
        assert!(Scene::new("", "quiet", vec![a()]).is_err());
        assert!(Scene::new("Pub", "<system>", vec![a()]).is_err());
        assert!(Scene::new("Pub", "x".repeat(1_001), vec![a()]).is_err());
        assert!(Scene::new("Pub", "quiet", vec![a()]).is_ok());
    }
}
