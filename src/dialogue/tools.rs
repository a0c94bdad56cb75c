//! Tools a persona may use while it answers (SPEC §7): a registry the game fills, the
//! per-persona allow-list, argument validation against each tool's JSON schema, and the
//! built-in tools.
//!
//! A tool is a name, a description, the JSON schema of its arguments, an example, and a
//! handler — a one-shot system taking `In<ToolCall>` and returning a [`ToolResult`] — that runs
//! in the ECS world between steps, with the persona's mind at home. Before a handler runs, the
//! call is checked: the tool must be on the persona's [`ToolAllowList`] (or the default list)
//! and its arguments must match the schema (validated with the `jsonschema` crate). A refused
//! call never reaches its handler; the planner is told why and may try something else.
//!
//! ```
//! use bevy::prelude::*;
//! use bevy_generative_agents::dialogue::{AppDialogueExt, ToolCall, ToolResult, ToolSpec};
//! use serde_json::json;
//!
//! fn ring_bell(call: In<ToolCall>) -> ToolResult {
//!     Ok(json!({"rang": call.args["times"]}))
//! }
//!
//! let mut app = App::new();
//! app.add_dialogue_tool(
//!     ToolSpec::new(
//!         "ring_bell",
//!         "Ring the town bell.",
//!         json!({"type": "object", "properties": {"times": {"type": "integer", "minimum": 1, "maximum": 3}},
//!                "required": ["times"], "additionalProperties": false}),
//!         json!({"times": 2}),
//!     ),
//!     ring_bell,
//! )
//! .unwrap();
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use bevy::ecs::system::SystemId;
use bevy::prelude::*;
use serde_json::{Value, json};

use crate::clock::SimClock;
use crate::persona::{Mind, Percepts};
use crate::world::{Address, AddressLevel, TownMap};

use super::prompts::truncate_chars;

/// What a tool handler returns: a JSON result for the planner, or an error message (also shown
/// to the planner).
pub type ToolResult = Result<Value, String>;

/// The input of a tool handler.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// The persona using the tool.
    pub persona: Entity,
    /// Who the persona is talking to.
    pub speaker: String,
    /// The arguments, already validated against the tool's schema.
    pub args: Value,
}

/// A tool's description, without its handler.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    /// The name the planner calls it by.
    pub name: String,
    /// What it does, for the planner.
    pub description: String,
    /// The JSON schema of its arguments.
    pub schema: Value,
    /// Example arguments, shown to the planner.
    pub example: Value,
    /// Whether it changes nothing (only such tools answer an interview).
    pub read_only: bool,
}

impl ToolSpec {
    /// A tool that may change the world.
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        schema: Value,
        example: Value,
    ) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            schema,
            example,
            read_only: false,
        }
    }

    /// Marks the tool as changing nothing (builder style).
    pub(crate) fn read_only(mut self) -> Self {
        self.read_only = true;
        self
    }

    /// The tool as the planner prompt lists it.
    pub fn listing(&self) -> String {
        format!(
            "- {}: {}\n  args (JSON schema): {}\n  example: {}",
            self.name,
            self.description,
            self.schema,
            json!({"action": "tool", "tool": self.name, "args": self.example})
        )
    }
}

/// How a tool runs.
#[derive(Debug, Clone, Copy)]
pub enum ToolHandler {
    /// A one-shot system run in the world.
    System(SystemId<In<ToolCall>, ToolResult>),
    /// The built-in `add_to_schedule`: the turn fits the item into the day with the model
    /// (SPEC §3.5 re-decomposition), then the world applies it.
    AddToSchedule,
}

/// A registered tool.
#[derive(Clone)]
pub struct Tool {
    /// Its description.
    pub spec: ToolSpec,
    /// Its handler.
    pub handler: ToolHandler,
    validator: Arc<jsonschema::Validator>,
}

impl std::fmt::Debug for Tool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tool")
            .field("spec", &self.spec)
            .field("handler", &self.handler)
            .finish_non_exhaustive()
    }
}

impl Tool {
    /// Whether `args` match the schema; the first problem otherwise (bounded, no values).
    pub(crate) fn check_args(&self, args: &Value) -> Result<(), String> {
        match self.validator.iter_errors(args).next() {
            None => Ok(()),
            Some(error) => Err(truncate_chars(
                &format!(
                    "arguments do not match the schema at `{}`",
                    error.instance_path()
                ),
                200,
            )
            .to_string()),
        }
    }
}

/// Why a tool could not be registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolError {
    /// The schema itself is not a valid JSON schema.
    #[error("tool `{tool}`: invalid JSON schema: {reason}")]
    Schema {
        /// The tool.
        tool: String,
        /// Why.
        reason: String,
    },
    /// The name is empty or not `[a-z0-9_]` (the planner and the grammar name tools so).
    #[error("tool name `{0}` must be 1–64 characters of a-z, 0-9 and _")]
    Name(String),
}

/// Every tool the game offers its personas (SPEC §7 "registered by the game").
#[derive(Resource, Debug, Clone, Default)]
pub struct ToolRegistry {
    tools: BTreeMap<String, Tool>,
}

impl ToolRegistry {
    /// Registers (or replaces) a tool.
    pub fn register(&mut self, spec: ToolSpec, handler: ToolHandler) -> Result<(), ToolError> {
        let valid_name = !spec.name.is_empty()
            && spec.name.len() <= 64
            && spec
                .name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
        if !valid_name {
            return Err(ToolError::Name(spec.name));
        }
        let validator = jsonschema::validator_for(&spec.schema).map_err(|e| ToolError::Schema {
            tool: spec.name.clone(),
            reason: e.to_string(),
        })?;
        self.tools.insert(
            spec.name.clone(),
            Tool {
                spec,
                handler,
                validator: Arc::new(validator),
            },
        );
        Ok(())
    }

    /// The tool named `name`.
    pub fn get(&self, name: &str) -> Option<&Tool> {
        self.tools.get(name)
    }

    /// Every tool, by name.
    pub fn iter(&self) -> impl Iterator<Item = &Tool> {
        self.tools.values()
    }
}

/// The tools a persona may use, by name. A persona without one may use the built-in tools
/// ([`BUILT_IN_TOOLS`]).
#[derive(Component, Reflect, Debug, Clone, Default, PartialEq, Eq)]
#[reflect(Component)]
pub struct ToolAllowList(pub BTreeSet<String>);

impl ToolAllowList {
    /// An allow-list of these names.
    pub fn of<S: Into<String>>(names: impl IntoIterator<Item = S>) -> Self {
        Self(names.into_iter().map(Into::into).collect())
    }

    /// Whether `tool` is allowed; `list` is the persona's, if it has one.
    pub fn allows(list: Option<&Self>, tool: &str) -> bool {
        match list {
            Some(list) => list.0.contains(tool),
            None => BUILT_IN_TOOLS.contains(&tool),
        }
    }
}

/// Registering tools on an [`App`].
pub trait AppDialogueExt {
    /// Registers a tool whose handler is `system` (a one-shot system taking `In<ToolCall>`).
    fn add_dialogue_tool<M>(
        &mut self,
        spec: ToolSpec,
        system: impl IntoSystem<In<ToolCall>, ToolResult, M> + 'static,
    ) -> Result<&mut Self, ToolError>;
}

impl AppDialogueExt for App {
    fn add_dialogue_tool<M>(
        &mut self,
        spec: ToolSpec,
        system: impl IntoSystem<In<ToolCall>, ToolResult, M> + 'static,
    ) -> Result<&mut Self, ToolError> {
        let id = self.world_mut().register_system(system);
        self.world_mut()
            .get_resource_or_init::<ToolRegistry>()
            .register(spec, ToolHandler::System(id))?;
        Ok(self)
    }
}

/// The tools the crate ships (SPEC §7).
pub const BUILT_IN_TOOLS: [&str; 6] = [
    RECALL,
    WHERE_IS,
    WHAT_DO_YOU_SEE,
    WHAT_TIME,
    ADD_TO_SCHEDULE,
    WALK_TO,
];

/// Built-in: recall memories about something.
pub(crate) const RECALL: &str = "recall_memories";
/// Built-in: where a place is.
pub(crate) const WHERE_IS: &str = "where_is";
/// Built-in: what the persona sees.
pub(crate) const WHAT_DO_YOU_SEE: &str = "what_do_you_see";
/// Built-in: the time.
pub(crate) const WHAT_TIME: &str = "what_time_is_it";
/// Built-in: add an item to today's schedule (and go there when it starts).
pub(crate) const ADD_TO_SCHEDULE: &str = "add_to_schedule";
/// Built-in: walk to a place now.
pub(crate) const WALK_TO: &str = "walk_to";

/// The schema of a tool that takes no arguments.
fn no_args() -> Value {
    json!({"type": "object", "properties": {}, "additionalProperties": false})
}

/// The schema of a single bounded string argument.
fn one_string(key: &str, description: &str) -> Value {
    json!({
        "type": "object",
        "properties": {key: {"type": "string", "minLength": 1, "maxLength": 120, "description": description}},
        "required": [key],
        "additionalProperties": false
    })
}

/// The built-in tools' specs.
pub fn built_in_specs() -> Vec<ToolSpec> {
    vec![
        ToolSpec::new(
            RECALL,
            "Recall your memories about something.",
            one_string("about", "what to remember"),
            json!({"about": "the party"}),
        )
        .read_only(),
        ToolSpec::new(
            WHERE_IS,
            "Find out where a place in town is.",
            one_string("place", "a place name"),
            json!({"place": "cafe"}),
        )
        .read_only(),
        ToolSpec::new(
            WHAT_DO_YOU_SEE,
            "Look around: where you are and what happens near you.",
            no_args(),
            json!({}),
        )
        .read_only(),
        ToolSpec::new(
            WHAT_TIME,
            "The current date and time.",
            no_args(),
            json!({}),
        )
        .read_only(),
        ToolSpec::new(
            ADD_TO_SCHEDULE,
            "Add something to do today to your schedule, at a place and a time; you go there when it starts.",
            json!({
                "type": "object",
                "properties": {
                    "task": {"type": "string", "minLength": 1, "maxLength": 80},
                    "place": {"type": "string", "minLength": 1, "maxLength": 120},
                    "time": {"type": "string", "pattern": "^([01][0-9]|2[0-3]):[0-5][0-9]$"},
                    "minutes": {"type": "integer", "minimum": 5, "maximum": 240}
                },
                "required": ["task", "place", "time", "minutes"],
                "additionalProperties": false
            }),
            json!({"task": "buy flowers", "place": "market", "time": "16:00", "minutes": 30}),
        ),
        ToolSpec::new(
            WALK_TO,
            "Walk to a place now.",
            one_string("place", "a place name"),
            json!({"place": "park"}),
        ),
    ]
}

/// Registers the built-in tools (part of [`DialoguePlugin`](super::DialoguePlugin)).
pub(super) fn register_built_ins(app: &mut App) {
    let mut registry = app
        .world_mut()
        .remove_resource::<ToolRegistry>()
        .unwrap_or_default();
    for spec in built_in_specs() {
        let handler = match spec.name.as_str() {
            RECALL => ToolHandler::System(app.world_mut().register_system(recall_memories)),
            WHERE_IS => ToolHandler::System(app.world_mut().register_system(where_is)),
            WHAT_DO_YOU_SEE => {
                ToolHandler::System(app.world_mut().register_system(what_do_you_see))
            }
            WHAT_TIME => ToolHandler::System(app.world_mut().register_system(what_time_is_it)),
            WALK_TO => ToolHandler::System(app.world_mut().register_system(walk_to)),
            _ => ToolHandler::AddToSchedule,
        };
        // A game's tool of the same name, registered earlier, wins.
        if registry.get(&spec.name).is_none()
            && let Err(error) = registry.register(spec, handler)
        {
            error!(%error, "built-in tool refused");
        }
    }
    app.insert_resource(registry);
}

/// The string argument `key`.
fn arg<'a>(call: &'a ToolCall, key: &str) -> &'a str {
    call.args.get(key).and_then(Value::as_str).unwrap_or("")
}

/// Memories whose description mentions the words of `about`, most recent first (at most 8).
pub fn recall_memories(call: In<ToolCall>, minds: Query<&Mind>) -> ToolResult {
    let mind = minds
        .get(call.persona)
        .ok()
        .and_then(Mind::get)
        .ok_or("the persona is busy")?;
    let words: Vec<String> = arg(&call, "about")
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().count() > 2)
        .map(str::to_lowercase)
        .collect();
    let found: Vec<&str> = mind
        .associative
        .nodes()
        .iter()
        .rev()
        .filter(|node| {
            let text = node.description.to_lowercase();
            words.iter().any(|w| text.contains(w.as_str()))
        })
        .take(8)
        .map(|node| node.description.as_str())
        .collect();
    Ok(json!({ "memories": found }))
}

/// Finds the place a name means on `map`: an arena whose name matches (equal, ignoring case,
/// before containing), else a sector (its first arena). The persona's known places first.
pub(crate) fn resolve_place(map: &TownMap, known: Option<&Mind>, text: &str) -> Option<Address> {
    let wanted = text.trim().to_lowercase();
    if wanted.is_empty() {
        return None;
    }
    let known_arena = |address: &Address| {
        known.and_then(Mind::get).is_some_and(|mind| {
            let (Some(sector), Some(arena)) = (address.sector_name(), address.arena_name()) else {
                return false;
            };
            mind.spatial.knows_address(&arena_string(address))
                || mind
                    .spatial
                    .accessible_arenas(address.world_name(), sector)
                    .iter()
                    .any(|a| a == arena)
        })
    };
    let arenas = map.arena_addresses();
    let score = |address: &Address| -> Option<(u8, bool)> {
        let arena = address.arena_name()?.to_lowercase();
        let sector = address.sector_name()?.to_lowercase();
        let rank = if arena == wanted {
            0
        } else if arena.contains(&wanted) || (wanted.contains(&arena) && arena.len() > 2) {
            1
        } else if sector == wanted {
            2
        } else if sector.contains(&wanted) || (wanted.contains(&sector) && sector.len() > 2) {
            3
        } else {
            return None;
        };
        Some((rank, !known_arena(address)))
    };
    arenas
        .iter()
        .filter_map(|address| score(address).map(|s| (s, address)))
        .min_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.cmp(b.1)))
        .map(|(_, address)| address.clone())
}

/// Where a place is: its address, or that the persona does not know it.
pub fn where_is(call: In<ToolCall>, map: Option<Res<TownMap>>, minds: Query<&Mind>) -> ToolResult {
    let map = map.ok_or("there is no town")?;
    let place = arg(&call, "place");
    match resolve_place(&map, minds.get(call.persona).ok(), place) {
        Some(address) => Ok(json!({"place": place, "address": address.to_string()})),
        None => Ok(json!({"place": place, "address": null, "note": "no such place in town"})),
    }
}

/// Where the persona is and the events it sees.
pub fn what_do_you_see(call: In<ToolCall>, percepts: Query<&Percepts>) -> ToolResult {
    let percepts = percepts.get(call.persona).map_err(|_| "not a persona")?;
    let events: Vec<String> = percepts
        .events
        .iter()
        .take(8)
        .filter_map(|e| e.description.clone())
        .collect();
    Ok(json!({"here": percepts.arena, "events": events}))
}

/// The game's date and time.
pub fn what_time_is_it(_call: In<ToolCall>, clock: Res<SimClock>) -> ToolResult {
    Ok(json!({"now": clock.now().format("%A %B %d %Y, %H:%M").to_string()}))
}

/// Walks to a place now (the control API's [`walk_to`](super::control::walk_to)).
pub fn walk_to(call: In<ToolCall>, world: &mut World) -> ToolResult {
    let place = arg(&call, "place").to_string();
    super::control::walk_to(world, call.persona, &place, None)
        .map(|address| json!({"walking_to": address}))
        .map_err(|e| e.to_string())
}

/// The arena (`w:s:a`) at `level` for an address.
pub(super) fn arena_string(address: &Address) -> String {
    address.truncated(AddressLevel::Arena).to_string()
}
