//! Grounding the next action (SPEC §3.4): where it happens (sector → arena → object), how it
//! looks (emoji), and what it means as events — the persona's `(name, verb, object)` and the
//! used object's own state.

use super::text::{
    clean_item, emoji_run, parse_triple, parsed_field, strip_prefix_ci, triple_field,
    truncate_chars,
};
use crate::llm::ChatRequest;
use crate::persona::EventTriple;
use crate::prompt::{
    Garble, ParseError, Prompt, PromptLibrary, TemplateError, garbled, parse_choice,
};

/// The emoji shown when the model gives no usable one (SPEC §3.4).
pub(crate) const FALLBACK_EMOJI: &str = "🙂";

/// The object "name" meaning "a random tile of the arena" (SPEC §1, §3.4).
pub(crate) const RANDOM_OBJECT: &str = crate::world::RANDOM_MARKER;

/// Options as "- name" lines, or "(none)".
fn option_lines(options: &[String]) -> String {
    if options.is_empty() {
        return "(none)".to_string();
    }
    options
        .iter()
        .map(|o| format!("- {o}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The option named by the answer.
fn choose(cleaned: &str, options: &[String]) -> Result<String, ParseError> {
    if options.is_empty() {
        return Err(ParseError::new("there are no options to choose from"));
    }
    let answer = strip_prefix_ci(cleaned.trim_start(), "answer:").unwrap_or(cleaned);
    let answer = answer.trim_start().trim_start_matches("- ");
    let index = parse_choice(truncate_chars(answer, 2_000), options)?;
    options
        .get(index)
        .cloned()
        .ok_or_else(|| ParseError::new("choice out of range"))
}

/// Which sector (area) an action happens in, among the sectors the persona knows.
///
/// Fail-safe: the living area's sector (SPEC §3.4), whether or not it is among the options.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ActionSector {
    /// The persona's full name.
    pub name: String,
    /// The action to place (for a decomposed step, "task (step)").
    pub action: String,
    /// The living area's sector ("Okafor house").
    pub living_sector: String,
    /// The workplace's sector, if any.
    pub workplace_sector: Option<String>,
    /// The sector the persona is in now.
    pub current_sector: String,
    /// The known sectors to choose from.
    pub options: Vec<String>,
    /// The known arenas of each option, in the options' order (empty: not given). A backend
    /// that decides by meaning reads an option as the persona sees it: "at home: kitchen,
    /// bedroom", "at work: classroom, office", "at Maple Park: park, garden".
    pub option_arenas: Vec<Vec<String>>,
}

impl ActionSector {
    /// How each option reads in plain words ([`ChatRequest::option_phrases`]); empty when
    /// the arenas are not given.
    pub fn option_phrases(&self) -> Vec<String> {
        if self.option_arenas.len() != self.options.len() {
            return Vec::new();
        }
        self.options
            .iter()
            .zip(&self.option_arenas)
            .map(|(sector, arenas)| {
                let whose = if *sector == self.living_sector {
                    "home".to_string()
                } else if self.workplace_sector.as_ref() == Some(sector) {
                    "work".to_string()
                } else {
                    sector.clone()
                };
                if arenas.is_empty() {
                    format!("at {whose}")
                } else {
                    format!("at {whose}: {}", arenas.join(", "))
                }
            })
            .collect()
    }
}

impl Prompt for ActionSector {
    type Output = String;

    fn kind(&self) -> &'static str {
        "action_sector"
    }

    fn request(&self, library: &PromptLibrary) -> Result<ChatRequest, TemplateError> {
        let inputs = [
            self.name.clone(),
            self.living_sector.clone(),
            self.workplace_sector
                .clone()
                .unwrap_or_else(|| "none".to_string()),
            self.current_sector.clone(),
            self.action.clone(),
            option_lines(&self.options),
        ];
        let prompt = library.fill(self.kind(), &inputs)?;
        Ok(ChatRequest::new(self.kind(), prompt)
            .with_max_tokens(32)
            .with_temperature(0.0)
            .with_about(&self.action)
            .with_option_phrases(self.option_phrases()))
    }

    fn parse(&self, cleaned: &str) -> Result<String, ParseError> {
        choose(cleaned, &self.options)
    }

    fn fail_safe(&self) -> String {
        self.living_sector.clone()
    }

    fn options(&self) -> Option<Vec<String>> {
        Some(self.options.clone())
    }

    fn output_for_option(&self, index: usize) -> Option<String> {
        self.options.get(index).cloned()
    }
}

/// Which arena (room) of the chosen sector an action happens in.
///
/// Fail-safe: the persona's living arena when it is among the options (case-insensitively),
/// else the first option, else the living arena.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ActionArena {
    /// The persona's full name.
    pub name: String,
    /// The action to place.
    pub action: String,
    /// The chosen sector.
    pub sector: String,
    /// The living area's arena ("bedroom"), preferred by the fail-safe.
    pub living_arena: String,
    /// The sector's known arenas.
    pub options: Vec<String>,
}

impl Prompt for ActionArena {
    type Output = String;

    fn kind(&self) -> &'static str {
        "action_arena"
    }

    fn request(&self, library: &PromptLibrary) -> Result<ChatRequest, TemplateError> {
        let inputs = [
            self.name.clone(),
            self.sector.clone(),
            self.action.clone(),
            option_lines(&self.options),
        ];
        let prompt = library.fill(self.kind(), &inputs)?;
        Ok(ChatRequest::new(self.kind(), prompt)
            .with_max_tokens(32)
            .with_temperature(0.0)
            .with_about(&self.action))
    }

    fn parse(&self, cleaned: &str) -> Result<String, ParseError> {
        choose(cleaned, &self.options)
    }

    fn fail_safe(&self) -> String {
        self.options
            .iter()
            .find(|o| o.trim().eq_ignore_ascii_case(self.living_arena.trim()))
            .or_else(|| self.options.first())
            .cloned()
            .unwrap_or_else(|| self.living_arena.clone())
    }

    fn options(&self) -> Option<Vec<String>> {
        Some(self.options.clone())
    }

    fn output_for_option(&self, index: usize) -> Option<String> {
        self.options.get(index).cloned()
    }
}

/// Which object of the chosen arena an action uses.
///
/// Fail-safe: a known object chosen by [`ActionObject::seed`] (so the same persona and step
/// pick the same one), or `RANDOM_OBJECT` when no object is known (SPEC §3.4).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ActionObject {
    /// The persona's full name.
    pub name: String,
    /// The action to place.
    pub action: String,
    /// The place as text ("Riverside Cafe, cafe").
    pub place: String,
    /// The arena's known objects.
    pub options: Vec<String>,
    /// Picks the fail-safe object deterministically (e.g. from the persona's random stream).
    pub seed: u64,
}

impl Prompt for ActionObject {
    type Output = String;

    fn kind(&self) -> &'static str {
        "action_object"
    }

    fn request(&self, library: &PromptLibrary) -> Result<ChatRequest, TemplateError> {
        let inputs = [
            self.name.clone(),
            self.place.clone(),
            self.action.clone(),
            option_lines(&self.options),
        ];
        let prompt = library.fill(self.kind(), &inputs)?;
        Ok(ChatRequest::new(self.kind(), prompt)
            .with_max_tokens(32)
            .with_temperature(0.0)
            .with_about(&self.action))
    }

    fn parse(&self, cleaned: &str) -> Result<String, ParseError> {
        choose(cleaned, &self.options)
    }

    fn fail_safe(&self) -> String {
        if self.options.is_empty() {
            return RANDOM_OBJECT.to_string();
        }
        let index = usize::try_from(self.seed % self.options.len() as u64).unwrap_or(0);
        self.options
            .get(index)
            .cloned()
            .unwrap_or_else(|| RANDOM_OBJECT.to_string())
    }

    fn options(&self) -> Option<Vec<String>> {
        Some(self.options.clone())
    }

    fn output_for_option(&self, index: usize) -> Option<String> {
        self.options.get(index).cloned()
    }
}

/// The room and the object [`ActionPlace`] chose.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlaceChoice {
    /// The arena.
    pub arena: String,
    /// The object, `None` for a room without known objects (any of its tiles).
    pub object: Option<String>,
}

/// Lean mode's one choice of room and object (`LeanSettings::place_at_once`): what
/// [`ActionArena`] and [`ActionObject`] ask one after the other, as one list of
/// "room: object" places of the chosen sector ("room" alone for a room without known
/// objects). The answer must be one of them.
///
/// Fail-safe: the living arena when it is a listed room (case-insensitively), else the first
/// room, with one of its objects chosen by [`ActionPlace::seed`] as [`ActionObject`] does.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ActionPlace {
    /// The persona's full name.
    pub name: String,
    /// The action to place.
    pub action: String,
    /// The chosen sector.
    pub sector: String,
    /// The living area's arena ("bedroom"), preferred by the fail-safe.
    pub living_arena: String,
    /// The sector's known arenas, each with its known objects (in the order shown).
    pub places: Vec<(String, Vec<String>)>,
    /// Picks the fail-safe object deterministically.
    pub seed: u64,
}

impl ActionPlace {
    /// Every place as `(arena, object)`, in the order of the options.
    fn choices(&self) -> Vec<PlaceChoice> {
        let mut out = Vec::new();
        for (arena, objects) in &self.places {
            if objects.is_empty() {
                out.push(PlaceChoice {
                    arena: arena.clone(),
                    object: None,
                });
            }
            for object in objects {
                out.push(PlaceChoice {
                    arena: arena.clone(),
                    object: Some(object.clone()),
                });
            }
        }
        out
    }

    /// How each option reads in plain words ("use the stove in the kitchen", "go to the
    /// garden"), for backends that judge a choice by meaning (`ChatRequest::option_phrases`).
    pub fn option_phrases(&self) -> Vec<String> {
        self.choices()
            .into_iter()
            .map(|c| match c.object {
                Some(object) => format!("use the {object} in the {}", c.arena),
                None => format!("go to the {}", c.arena),
            })
            .collect()
    }

    /// The options as the prompt lists them.
    fn option_texts(&self) -> Vec<String> {
        self.choices()
            .iter()
            .map(PlaceChoice::option_text)
            .collect()
    }
}

impl PlaceChoice {
    /// The place as [`ActionPlace`] lists it: "room: object", or "room".
    fn option_text(&self) -> String {
        match &self.object {
            Some(object) => format!("{}: {object}", self.arena),
            None => self.arena.clone(),
        }
    }
}

impl Prompt for ActionPlace {
    type Output = PlaceChoice;

    fn kind(&self) -> &'static str {
        "action_place"
    }

    fn request(&self, library: &PromptLibrary) -> Result<ChatRequest, TemplateError> {
        let inputs = [
            self.name.clone(),
            self.sector.clone(),
            self.action.clone(),
            option_lines(&self.option_texts()),
        ];
        let prompt = library.fill(self.kind(), &inputs)?;
        Ok(ChatRequest::new(self.kind(), prompt)
            .with_max_tokens(40)
            .with_temperature(0.0)
            .with_about(&self.action)
            .with_option_phrases(self.option_phrases()))
    }

    fn parse(&self, cleaned: &str) -> Result<PlaceChoice, ParseError> {
        let choices = self.choices();
        let options: Vec<String> = choices.iter().map(PlaceChoice::option_text).collect();
        let chosen = choose(cleaned, &options)?;
        options
            .iter()
            .position(|o| *o == chosen)
            .and_then(|index| choices.into_iter().nth(index))
            .ok_or_else(|| ParseError::new("choice out of range"))
    }

    fn fail_safe(&self) -> PlaceChoice {
        let (arena, objects) = self
            .places
            .iter()
            .find(|(a, _)| a.trim().eq_ignore_ascii_case(self.living_arena.trim()))
            .or_else(|| self.places.first())
            .cloned()
            .unwrap_or_else(|| (self.living_arena.clone(), Vec::new()));
        let object = usize::try_from(self.seed % objects.len().max(1) as u64)
            .ok()
            .and_then(|index| objects.get(index).cloned());
        PlaceChoice { arena, object }
    }

    fn options(&self) -> Option<Vec<String>> {
        Some(self.option_texts())
    }

    fn output_for_option(&self, index: usize) -> Option<PlaceChoice> {
        self.choices().into_iter().nth(index)
    }
}

/// 1–3 emoji from an answer, words dropped.
fn parse_emoji(cleaned: &str) -> Result<String, ParseError> {
    emoji_run(truncate_chars(cleaned, 2_000), 3)
        .ok_or_else(|| ParseError::new("no emoji in the answer"))
}

/// The action as 1–3 emoji (`act_pronunciatio`). Text around the emoji is dropped.
/// Fail-safe: `FALLBACK_EMOJI`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ActionEmoji {
    /// The action.
    pub action: String,
}

impl Prompt for ActionEmoji {
    type Output = String;

    fn kind(&self) -> &'static str {
        "action_emoji"
    }

    fn request(&self, library: &PromptLibrary) -> Result<ChatRequest, TemplateError> {
        let prompt = library.fill(self.kind(), &[self.action.as_str()])?;
        Ok(ChatRequest::new(self.kind(), prompt)
            .with_max_tokens(16)
            .with_temperature(0.3))
    }

    fn parse(&self, cleaned: &str) -> Result<String, ParseError> {
        parse_emoji(cleaned)
    }

    fn fail_safe(&self) -> String {
        FALLBACK_EMOJI.to_string()
    }
}

/// The used object's state as 1–3 emoji (`act_obj_pronunciatio`). Fail-safe: `FALLBACK_EMOJI`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ObjectEmoji {
    /// The object's state ("coffee machine is brewing coffee").
    pub object_state: String,
}

impl Prompt for ObjectEmoji {
    type Output = String;

    fn kind(&self) -> &'static str {
        "object_emoji"
    }

    fn request(&self, library: &PromptLibrary) -> Result<ChatRequest, TemplateError> {
        let prompt = library.fill(self.kind(), &[self.object_state.as_str()])?;
        Ok(ChatRequest::new(self.kind(), prompt)
            .with_max_tokens(16)
            .with_temperature(0.3))
    }

    fn parse(&self, cleaned: &str) -> Result<String, ParseError> {
        parse_emoji(cleaned)
    }

    fn fail_safe(&self) -> String {
        FALLBACK_EMOJI.to_string()
    }
}

/// The action as `(name, predicate, object)` (`act_event`). Whatever subject the model writes,
/// the subject is the persona. Fail-safe: `(name, "is", "idle")`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ActionEventTriple {
    /// The persona's full name.
    pub name: String,
    /// The action.
    pub action: String,
}

impl Prompt for ActionEventTriple {
    type Output = EventTriple;

    fn kind(&self) -> &'static str {
        "action_event_triple"
    }

    fn request(&self, library: &PromptLibrary) -> Result<ChatRequest, TemplateError> {
        let prompt = library.fill(self.kind(), &[self.name.as_str(), self.action.as_str()])?;
        Ok(ChatRequest::new(self.kind(), prompt)
            .with_max_tokens(40)
            .with_temperature(0.0))
    }

    fn parse(&self, cleaned: &str) -> Result<EventTriple, ParseError> {
        let (_, predicate, object) = parse_triple(cleaned)?;
        Ok(EventTriple::new(self.name.clone(), predicate, object))
    }

    fn fail_safe(&self) -> EventTriple {
        EventTriple::idle(self.name.clone())
    }
}

/// What the used object is doing while the persona uses it (`act_obj_description`), always
/// `"<object> is <state>"` — a bare state is prefixed, a restated subject normalised.
/// Fail-safe: `"<object> is idle"`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ObjectDescription {
    /// The persona's full name.
    pub name: String,
    /// The object's name ("coffee machine").
    pub object: String,
    /// The persona's action.
    pub action: String,
}

impl Prompt for ObjectDescription {
    type Output = String;

    fn kind(&self) -> &'static str {
        "object_description"
    }

    fn request(&self, library: &PromptLibrary) -> Result<ChatRequest, TemplateError> {
        let prompt = library.fill(
            self.kind(),
            &[
                self.name.as_str(),
                self.object.as_str(),
                self.action.as_str(),
            ],
        )?;
        Ok(ChatRequest::new(self.kind(), prompt)
            .with_max_tokens(40)
            .with_temperature(0.3))
    }

    fn parse(&self, cleaned: &str) -> Result<String, ParseError> {
        let line = truncate_chars(cleaned, 2_000)
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .unwrap_or("");
        let line = strip_prefix_ci(line, "answer:")
            .unwrap_or(line)
            .trim_start();
        let line = strip_prefix_ci(line, "the ").unwrap_or(line);
        let object = self.object.trim();
        let state = match strip_prefix_ci(line, object).filter(|_| !object.is_empty()) {
            Some(rest) => rest.trim_start(),
            None => line,
        };
        let state = ["is ", "are ", "it is ", "it's "]
            .iter()
            .find_map(|p| strip_prefix_ci(state, p))
            .unwrap_or(state);
        let state = clean_item(state);
        if state.is_empty() {
            return Err(ParseError::new("no state in the answer"));
        }
        if state.chars().count() > 80 {
            return Err(ParseError::new("the state is not a short phrase"));
        }
        Ok(format!("{object} is {state}"))
    }

    fn fail_safe(&self) -> String {
        format!("{} is idle", self.object.trim())
    }

    fn garbled(&self, output: &String) -> Option<Garble> {
        garbled(output)
    }
}

/// The used object's state as a triple (`act_obj_event`); the subject is always the object's
/// address. Fail-safe: `(object address, "is", "idle")`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ObjectEventTriple {
    /// The object's full address (`w:s:a:o`): the triple's subject.
    pub object_address: String,
    /// The object's name as shown in the prompt.
    pub object_name: String,
    /// The object's state ("coffee machine is brewing coffee").
    pub object_state: String,
}

impl Prompt for ObjectEventTriple {
    type Output = EventTriple;

    fn kind(&self) -> &'static str {
        "object_event_triple"
    }

    fn request(&self, library: &PromptLibrary) -> Result<ChatRequest, TemplateError> {
        let prompt = library.fill(
            self.kind(),
            &[self.object_name.as_str(), self.object_state.as_str()],
        )?;
        Ok(ChatRequest::new(self.kind(), prompt)
            .with_max_tokens(40)
            .with_temperature(0.0))
    }

    fn parse(&self, cleaned: &str) -> Result<EventTriple, ParseError> {
        let (_, predicate, object) = parse_triple(cleaned)?;
        Ok(EventTriple::new(
            self.object_address.clone(),
            predicate,
            object,
        ))
    }

    fn fail_safe(&self) -> EventTriple {
        EventTriple::idle(self.object_address.clone())
    }
}

/// The object an action uses, as [`ActionDetails`] asks about it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UsedObject {
    /// The object's name as the prompt shows it ("coffee machine").
    pub name: String,
    /// The object's full address (`w:s:a:o`): the subject of its triple.
    pub address: String,
}

/// What [`ActionDetails`] answers: how the action looks and reads, how much it matters to the
/// persona, and the same for the used object's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActionDetailsAnswer {
    /// The action as 1–3 emoji (`act_pronunciatio`).
    pub emoji: String,
    /// The action as `(name, predicate, object)` (`act_event`).
    pub event: EventTriple,
    /// How much the action matters to the persona (1..=10): the poignancy of its own event
    /// when it perceives it.
    pub poignancy: u8,
    /// The used object's state, when the action uses one.
    pub object: Option<ObjectDetails>,
}

/// The used object's side of [`ActionDetailsAnswer`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectDetails {
    /// `"<object> is <state>"` (`act_obj_description`).
    pub state: String,
    /// The state as 1–3 emoji (`act_obj_pronunciatio`).
    pub emoji: String,
    /// The state as `(object address, predicate, object)` (`act_obj_event`).
    pub event: EventTriple,
    /// How much the object's state matters to the persona (1..=10).
    pub poignancy: u8,
}

/// Lean mode's one call for an action's details (`LeanSettings::action_details`): what
/// [`ActionEmoji`], [`ActionEventTriple`], [`ObjectDescription`], [`ObjectEmoji`] and
/// [`ObjectEventTriple`] ask one by one, plus the event poignancy of the action and of the
/// object's state, which the persona would otherwise be asked when it perceives its own action
/// a step later. The answer is one JSON object; every field is checked by the same rules as
/// the single prompts (an emoji run, a short triple whose subject is the persona or the
/// object's address, a state that starts with the object, ratings in 1..=10), and a missing or
/// unusable field fails the answer. Fail-safe: each part's own fail-safe.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ActionDetails {
    /// The identity summary (the rating's point of view, as in the poignancy prompts).
    pub identity: String,
    /// The persona's full name.
    pub name: String,
    /// The persona's first name.
    pub first_name: String,
    /// The action.
    pub action: String,
    /// The object the action uses, if any.
    pub object: Option<UsedObject>,
}

impl ActionDetails {
    /// The JSON schema of the answer (the object fields only when there is an object).
    pub fn schema(with_object: bool) -> serde_json::Value {
        let triple = serde_json::json!({
            "type": "array", "items": {"type": "string", "minLength": 1},
            "minItems": 3, "maxItems": 3
        });
        let rating = serde_json::json!({"type": "integer", "minimum": 1, "maximum": 10});
        let text = serde_json::json!({"type": "string", "minLength": 1});
        let mut properties = serde_json::json!({
            "emoji": text, "event": triple, "importance": rating
        });
        let mut required = vec!["emoji", "event", "importance"];
        if with_object && let Some(map) = properties.as_object_mut() {
            map.insert("object_state".into(), text.clone());
            map.insert("object_emoji".into(), text);
            map.insert("object_event".into(), triple);
            map.insert("object_importance".into(), rating);
            required.extend([
                "object_state",
                "object_emoji",
                "object_event",
                "object_importance",
            ]);
        }
        serde_json::json!({
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": false
        })
    }

    fn fail_safe_object(&self) -> Option<ObjectDetails> {
        self.object.as_ref().map(|object| ObjectDetails {
            state: format!("{} is idle", object.name.trim()),
            emoji: FALLBACK_EMOJI.to_string(),
            event: EventTriple::idle(object.address.clone()),
            poignancy: super::perceive::EVENT_POIGNANCY_FAIL_SAFE,
        })
    }
}

impl Prompt for ActionDetails {
    type Output = ActionDetailsAnswer;

    fn kind(&self) -> &'static str {
        "action_details"
    }

    fn request(&self, library: &PromptLibrary) -> Result<ChatRequest, TemplateError> {
        let object = self.object.as_ref().map_or("(none)", |o| o.name.as_str());
        let prompt = library.fill(
            self.kind(),
            &[
                self.identity.as_str(),
                self.name.as_str(),
                self.first_name.as_str(),
                self.action.as_str(),
                object,
            ],
        )?;
        Ok(ChatRequest::new(self.kind(), prompt)
            .with_max_tokens(160)
            .with_temperature(0.0)
            .with_json_schema(Self::schema(self.object.is_some())))
    }

    fn parse(&self, cleaned: &str) -> Result<ActionDetailsAnswer, ParseError> {
        let Some(serde_json::Value::Object(answer)) =
            crate::prompt::extract_json(truncate_chars(cleaned, 4_000))
        else {
            return Err(ParseError::new("no JSON object in the answer"));
        };
        let emoji = parsed_field(&answer, "emoji", parse_emoji)?;
        let (_, predicate, what) = triple_field(&answer, "event")?;
        let poignancy = parsed_field(&answer, "importance", super::text::rating)?;
        let object = match &self.object {
            None => None,
            Some(used) => {
                let describe = ObjectDescription {
                    name: self.name.clone(),
                    object: used.name.clone(),
                    action: self.action.clone(),
                };
                let state = parsed_field(&answer, "object_state", |t| describe.parse(t))?;
                let emoji = parsed_field(&answer, "object_emoji", parse_emoji)?;
                let (_, state_predicate, state_object) = triple_field(&answer, "object_event")?;
                let poignancy = parsed_field(&answer, "object_importance", super::text::rating)?;
                Some(ObjectDetails {
                    state,
                    emoji,
                    event: EventTriple::new(used.address.clone(), state_predicate, state_object),
                    poignancy,
                })
            }
        };
        Ok(ActionDetailsAnswer {
            emoji,
            event: EventTriple::new(self.name.clone(), predicate, what),
            poignancy,
            object,
        })
    }

    fn fail_safe(&self) -> ActionDetailsAnswer {
        ActionDetailsAnswer {
            emoji: FALLBACK_EMOJI.to_string(),
            event: EventTriple::idle(self.name.clone()),
            poignancy: super::perceive::EVENT_POIGNANCY_FAIL_SAFE,
            object: self.fail_safe_object(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sector() -> ActionSector {
        ActionSector {
            name: "Mira Okafor".into(),
            action: "working at Riverside Cafe".into(),
            living_sector: "Okafor house".into(),
            workplace_sector: Some("Riverside Cafe".into()),
            current_sector: "Okafor house".into(),
            options: vec![
                "Okafor house".into(),
                "Riverside Cafe".into(),
                "Maple Park".into(),
            ],
            option_arenas: Vec::new(),
        }
    }

    #[test]
    fn closed_set_choices() {
        let p = sector();
        assert_eq!(p.parse("Riverside Cafe"), Ok("Riverside Cafe".into()));
        assert_eq!(p.parse("Answer: - maple park."), Ok("Maple Park".into()));
        assert!(p.parse("the moon").is_err());
        assert_eq!(p.fail_safe(), "Okafor house");
        assert_eq!(p.output_for_option(1).as_deref(), Some("Riverside Cafe"));
        assert_eq!(p.output_for_option(3), None);
        let empty = ActionSector {
            options: vec![],
            ..p
        };
        assert!(empty.parse("Okafor house").is_err());
    }

    #[test]
    fn arena_and_object_fail_safes() {
        let arena = ActionArena {
            living_arena: "bedroom".into(),
            options: vec!["kitchen".into(), "Bedroom".into()],
            ..Default::default()
        };
        assert_eq!(arena.fail_safe(), "Bedroom");
        assert_eq!(
            ActionArena {
                options: vec!["cafe".into()],
                ..arena.clone()
            }
            .fail_safe(),
            "cafe"
        );
        assert_eq!(
            ActionArena {
                options: vec![],
                ..arena
            }
            .fail_safe(),
            "bedroom"
        );
        let object = ActionObject {
            options: vec!["bed".into(), "desk".into(), "closet".into()],
            seed: 7,
            ..Default::default()
        };
        assert_eq!(object.fail_safe(), "desk");
        assert_eq!(
            ActionObject {
                options: vec![],
                ..object
            }
            .fail_safe(),
            RANDOM_OBJECT
        );
    }

    #[test]
    fn emoji_and_triples() {
        let e = ActionEmoji::default();
        assert_eq!(e.parse("Sure! ☕🥐 breakfast").as_deref(), Ok("☕🥐"));
        assert!(e.parse("coffee").is_err());
        assert_eq!(e.fail_safe(), "🙂");
        let t = ActionEventTriple {
            name: "Mira Okafor".into(),
            action: "making coffee".into(),
        };
        assert_eq!(
            t.parse("(Someone Else, make, coffee)"),
            Ok(EventTriple::new("Mira Okafor", "make", "coffee"))
        );
        assert_eq!(
            t.parse("make, coffee)"),
            Ok(EventTriple::new("Mira Okafor", "make", "coffee"))
        );
        assert_eq!(t.fail_safe(), EventTriple::new("Mira Okafor", "is", "idle"));
        let o = ObjectEventTriple {
            object_address: "W:C:c:coffee machine".into(),
            ..Default::default()
        };
        assert_eq!(
            o.parse("(coffee machine, brew, coffee)"),
            Ok(EventTriple::new("W:C:c:coffee machine", "brew", "coffee"))
        );
        assert_eq!(
            o.fail_safe(),
            EventTriple::new("W:C:c:coffee machine", "is", "idle")
        );
    }

    #[test]
    fn object_description_is_normalised() {
        let p = ObjectDescription {
            object: "coffee machine".into(),
            ..Default::default()
        };
        assert_eq!(
            p.parse("The coffee machine is brewing coffee."),
            Ok("coffee machine is brewing coffee".into())
        );
        assert_eq!(
            p.parse("brewing coffee"),
            Ok("coffee machine is brewing coffee".into())
        );
        assert_eq!(
            p.parse("It is warming up\nmore text"),
            Ok("coffee machine is warming up".into())
        );
        assert!(p.parse("   ").is_err());
        assert_eq!(p.fail_safe(), "coffee machine is idle");
    }

    fn details(object: bool) -> ActionDetails {
        ActionDetails {
            name: "Mira Okafor".into(),
            first_name: "Mira".into(),
            action: "making coffee".into(),
            object: object.then(|| UsedObject {
                name: "coffee machine".into(),
                address: "W:C:c:coffee machine".into(),
            }),
            ..Default::default()
        }
    }

    #[test]
    fn action_details_are_read_by_the_single_prompts_rules() {
        let answer = r#"Sure! {"emoji": "☕ coffee", "event": ["Someone", "make", "coffee"],
            "importance": "2", "object_state": "The coffee machine is brewing coffee.",
            "object_emoji": "☕", "object_event": "(coffee machine, brew, coffee)",
            "object_importance": 1}"#;
        let got = details(true).parse(answer).expect("a full answer parses");
        assert_eq!(got.emoji, "☕");
        // The subjects are the persona and the object's address, whatever the model wrote.
        assert_eq!(got.event, EventTriple::new("Mira Okafor", "make", "coffee"));
        assert_eq!(got.poignancy, 2);
        let object = got.object.expect("the object's details");
        assert_eq!(object.state, "coffee machine is brewing coffee");
        assert_eq!(
            object.event,
            EventTriple::new("W:C:c:coffee machine", "brew", "coffee")
        );
        assert_eq!(object.poignancy, 1);
        // Without an object, the object fields are neither needed nor read.
        let bare =
            r#"{"emoji": "☕", "event": ["Mira Okafor", "make", "coffee"], "importance": 3}"#;
        let got = details(false)
            .parse(bare)
            .expect("an answer without an object");
        assert_eq!(got.object, None);
        assert!(
            details(true).parse(bare).is_err(),
            "the object's fields are required"
        );
        assert_eq!(
            ActionDetails::schema(true)["required"]
                .as_array()
                .map(Vec::len),
            Some(7)
        );
    }

    #[test]
    fn hostile_action_details_fail_to_their_fail_safes() {
        let p = details(true);
        for hostile in [
            "",
            "no json here",
            "[1, 2, 3]",
            r#"{"emoji": "no emoji", "event": ["a", "b", "c"], "importance": 2}"#,
            r#"{"emoji": "☕", "event": ["Mira"], "importance": 2}"#,
            r#"{"emoji": "☕", "event": ["Mira", "make", "coffee"], "importance": 11}"#,
            r#"{"emoji": "☕", "event": ["Mira", "make", "coffee"], "importance": -4}"#,
            r#"{"emoji": "☕", "event": {"s": 1}, "importance": 2}"#,
            r#"{"emoji": "☕", "event": ["Mira", "a verb that is far too long to be a verb", "x"], "importance": 2}"#,
            r#"{"emoji": "☕", "event": ["Mira", "make", "coffee"], "importance": 2, "object_state": "", "object_emoji": "☕", "object_event": ["m", "brew", "coffee"], "object_importance": 1}"#,
            r#"{"emoji": "☕", "event": ["Mira", "make", "coffee"], "importance": 2, "object_state": "brewing", "object_emoji": "☕", "object_event": ["m", "brew", "coffee"], "object_importance": null}"#,
            "{\"emoji\": \"☕\", \"event\": [\"Mira\", \"make\", \"coffee\"], \"importance\": 2, \"object_state\": \"",
        ] {
            assert!(p.parse(hostile).is_err(), "accepted {hostile:?}");
        }
        let long = format!("{{\"emoji\": \"{}\"}}", "☕".repeat(100_000));
        assert!(p.parse(&long).is_err());
        let safe = p.fail_safe();
        assert_eq!(safe.emoji, FALLBACK_EMOJI);
        assert_eq!(safe.event, EventTriple::idle("Mira Okafor"));
        assert_eq!(
            safe.poignancy,
            crate::cognition::prompts::EVENT_POIGNANCY_FAIL_SAFE
        );
        let object = safe.object.expect("an object's fail-safe");
        assert_eq!(object.state, "coffee machine is idle");
        assert_eq!(object.event, EventTriple::idle("W:C:c:coffee machine"));
        assert_eq!(details(false).fail_safe().object, None);
    }

    #[test]
    fn a_place_is_a_room_and_one_of_its_objects() {
        let p = ActionPlace {
            name: "Mira Okafor".into(),
            action: "having breakfast".into(),
            sector: "Okafor house".into(),
            living_arena: "Bedroom".into(),
            places: vec![
                (
                    "kitchen".into(),
                    vec!["stove".into(), "dining table".into()],
                ),
                ("garden".into(), Vec::new()),
                ("bedroom".into(), vec!["bed".into()]),
            ],
            seed: 7,
        };
        let kitchen_table = PlaceChoice {
            arena: "kitchen".into(),
            object: Some("dining table".into()),
        };
        assert_eq!(
            p.parse("Answer: kitchen: dining table"),
            Ok(kitchen_table.clone())
        );
        assert_eq!(
            p.parse("- garden"),
            Ok(PlaceChoice {
                arena: "garden".into(),
                object: None
            })
        );
        assert_eq!(p.output_for_option(1), Some(kitchen_table));
        assert_eq!(p.options().map(|o| o.len()), Some(4));
        assert_eq!(
            p.option_phrases(),
            vec![
                "use the stove in the kitchen",
                "use the dining table in the kitchen",
                "go to the garden",
                "use the bed in the bedroom",
            ]
        );
        // A room that is not listed, or nothing: refused; a mixed-up answer still lands on a
        // listed place (the choice reader takes the option it names best), never elsewhere.
        for hostile in ["attic", "", "   "] {
            assert!(p.parse(hostile).is_err(), "accepted {hostile:?}");
        }
        for mixed in ["garden: stove", "kitchen: bed"] {
            if let Ok(place) = p.parse(mixed) {
                assert!(p.choices().contains(&place), "{mixed:?} gave {place:?}");
            }
        }
        // The fail-safe is the persona's own room, with one of its objects.
        assert_eq!(
            p.fail_safe(),
            PlaceChoice {
                arena: "bedroom".into(),
                object: Some("bed".into())
            }
        );
    }
}
