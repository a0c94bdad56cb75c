//! Prompt templates: text files with `!<INPUT n>!` placeholders.
//!
//! A template may start with a header documenting its inputs, ended by the line
//! `<commentblockmarker>###</commentblockmarker>`; only what follows the marker is sent.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use bevy::prelude::*;

use super::overrides::{OverrideProblem, PromptOverride};

/// The marker that ends a template's documentation header.
pub const HEADER_MARKER: &str = "<commentblockmarker>###</commentblockmarker>";

/// Problems with templates. They are programming or configuration errors, reported clearly.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    /// No template has this name.
    #[error("no prompt template named `{0}`")]
    Unknown(String),
    /// The template uses `!<INPUT n>!` but only `given` inputs were supplied.
    #[error("template `{template}` uses !<INPUT {index}>! but only {given} inputs were given")]
    MissingInput {
        /// The template's name.
        template: String,
        /// The placeholder index.
        index: usize,
        /// How many inputs were given.
        given: usize,
    },
    /// A folder of template overrides could not be read.
    #[error("cannot read prompt overrides {path}: {reason}")]
    Io {
        /// The folder.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// An override file was refused (see [`PromptLibrary::with_overrides_from_dir`]).
    #[error("prompt override {path}: {problem}")]
    Override {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        problem: OverrideProblem,
    },
}

/// One prompt template: read-only once parsed, so its placeholders are found once, not on
/// every fill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptTemplate {
    name: String,
    header: Option<String>,
    body: String,
    /// The body's `!<INPUT n>!` placeholders, in order: `(start, end, n)` byte ranges.
    spans: Vec<(usize, usize, usize)>,
}

impl PromptTemplate {
    /// Parses a template's text, splitting off the documentation header.
    pub fn parse(name: impl Into<String>, text: &str) -> Self {
        let (header, body) = match text.split_once(HEADER_MARKER) {
            Some((header, body)) => (Some(header.trim().to_string()), body),
            None => (None, text),
        };
        let body = body.trim_start_matches(['\n', '\r']).to_string();
        let spans = placeholders(&body).collect();
        Self {
            name: name.into(),
            header,
            body,
            spans,
        }
    }

    /// The template's name (its file stem, e.g. `wake_up_hour`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The documentation header, if any.
    pub fn header(&self) -> Option<&str> {
        self.header.as_deref()
    }

    /// The text sent to the model, with placeholders.
    pub fn body(&self) -> &str {
        &self.body
    }

    /// The highest placeholder index used, if any.
    pub fn max_input(&self) -> Option<usize> {
        self.spans.iter().map(|&(_, _, n)| n).max()
    }

    /// Replaces every `!<INPUT n>!` with `inputs[n]`. Inputs are inserted verbatim (an input that
    /// itself contains a placeholder is not expanded again).
    pub fn fill<S: AsRef<str>>(&self, inputs: &[S]) -> Result<String, TemplateError> {
        // Every input is checked, and the text measured, before anything is written: the
        // filled prompt is allocated once, at its final size.
        let mut len = self.body.len();
        for &(start, end, index) in &self.spans {
            let input = inputs
                .get(index)
                .ok_or_else(|| TemplateError::MissingInput {
                    template: self.name.clone(),
                    index,
                    given: inputs.len(),
                })?;
            len = len - (end - start) + input.as_ref().len();
        }
        let mut out = String::with_capacity(len);
        let mut last = 0;
        for &(start, end, index) in &self.spans {
            out.push_str(&self.body[last..start]);
            out.push_str(inputs.get(index).map_or("", AsRef::as_ref));
            last = end;
        }
        out.push_str(&self.body[last..]);
        Ok(out)
    }
}

/// Finds `!<INPUT n>!` placeholders: `(start, end, n)` byte ranges.
pub(super) fn placeholders(body: &str) -> impl Iterator<Item = (usize, usize, usize)> + '_ {
    const OPEN: &str = "!<INPUT ";
    const CLOSE: &str = ">!";
    let mut from = 0;
    std::iter::from_fn(move || {
        loop {
            let start = from + body.get(from..)?.find(OPEN)?;
            let digits_start = start + OPEN.len();
            let rest = body.get(digits_start..)?;
            let close = rest.find(CLOSE)?;
            let digits = rest.get(..close)?.trim();
            from = digits_start;
            if let Ok(n) = digits.parse::<usize>() {
                let end = digits_start + close + CLOSE.len();
                from = end;
                return Some((start, end, n));
            }
        }
    })
}

macro_rules! embedded_templates {
    ($($name:literal),* $(,)?) => {
        /// The templates shipped with the crate (`prompts/v1/`), compiled in so a binary run
        /// outside the source tree still has them.
        pub const EMBEDDED_V1: &[(&str, &str)] = &[
            $(($name, include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/prompts/v1/", $name, ".txt")))),*
        ];
    };
}

embedded_templates![
    "generic_json",
    "wake_up_hour",
    "daily_plan",
    "hourly_schedule",
    "task_decomposition",
    "new_decomposition_schedule",
    "action_sector",
    "action_arena",
    "action_object",
    "action_place",
    "action_emoji",
    "object_emoji",
    "action_event_triple",
    "object_description",
    "object_event_triple",
    "action_details",
    "event_poignancy",
    "event_poignancies",
    "chat_poignancy",
    "thought_poignancy",
    "decide_to_talk",
    "decide_to_react",
    "relationship_summary",
    "next_utterance",
    "conversation_summary",
    "planning_thought_after_chat",
    "memo_after_chat",
    "after_chat",
    "focal_points",
    "insights_with_evidence",
    "insights_rated",
    "revise_identity_plan_note",
    "revise_identity_feelings",
    "revise_identity_currently",
    "revise_identity_daily_req",
    "whisper_thought",
    "dialogue_planner",
    "dialogue_final",
    "dialogue_speaker_profile",
    "director_intent",
    "director_plan",
    "director_validate",
    "director_replan",
    "director_review",
    "group_join",
    "group_reply",
    "group_focus",
    "group_round",
    "stage_actor",
    "stage_resolve",
];

/// All prompt templates by name. Cheap to clone.
///
/// Starts from the templates compiled into the crate; a game overrides any of them from a
/// folder of edited files with [`PromptLibrary::with_overrides_from_dir`] (checked, and
/// recorded in `PromptLibrary::provenance`), or adds and replaces templates in code with
/// [`PromptLibrary::insert`].
#[derive(Resource, Debug, Clone)]
pub struct PromptLibrary {
    templates: Arc<BTreeMap<String, PromptTemplate>>,
    version: String,
    pub(super) overrides: Arc<Vec<PromptOverride>>,
}

impl Default for PromptLibrary {
    fn default() -> Self {
        Self::embedded()
    }
}

impl PromptLibrary {
    /// The templates compiled into the crate (`prompts/v1`).
    pub fn embedded() -> Self {
        let templates = EMBEDDED_V1
            .iter()
            .map(|(name, text)| (name.to_string(), PromptTemplate::parse(*name, text)))
            .collect();
        Self {
            templates: Arc::new(templates),
            version: "v1".into(),
            overrides: Arc::default(),
        }
    }

    /// The template version (`"v1"`), recorded in reports.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// Looks up a template.
    pub fn get(&self, name: &str) -> Result<&PromptTemplate, TemplateError> {
        self.templates
            .get(name)
            .ok_or_else(|| TemplateError::Unknown(name.to_string()))
    }

    /// Fills the template `name` with `inputs`.
    pub fn fill<S: AsRef<str>>(&self, name: &str, inputs: &[S]) -> Result<String, TemplateError> {
        self.get(name)?.fill(inputs)
    }

    /// Adds or replaces one template.
    pub fn insert(&mut self, template: PromptTemplate) {
        Arc::make_mut(&mut self.templates).insert(template.name().to_owned(), template);
    }

    /// Template names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.templates.keys().map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_is_split_off_and_inputs_filled() {
        let t = PromptTemplate::parse(
            "t",
            "Variables:\n!<INPUT 0>! -- name\n<commentblockmarker>###</commentblockmarker>\nHello !<INPUT 0>!, it is !<INPUT 1>!. Bye !<INPUT 0>!.",
        );
        assert_eq!(t.header.as_deref(), Some("Variables:\n!<INPUT 0>! -- name"));
        assert_eq!(t.max_input(), Some(1));
        assert_eq!(
            t.fill(&["Mira", "noon"]).unwrap(),
            "Hello Mira, it is noon. Bye Mira."
        );
    }

    #[test]
    fn missing_input_is_an_error_not_a_panic() {
        let t = PromptTemplate::parse("t", "a !<INPUT 2>! b");
        assert_eq!(
            t.fill(&["x"]),
            Err(TemplateError::MissingInput {
                template: "t".into(),
                index: 2,
                given: 1
            })
        );
    }

    #[test]
    fn inputs_are_not_re_expanded_and_junk_markers_stay() {
        let t = PromptTemplate::parse("t", "!<INPUT 0>! and !<INPUT x>! and !<INPUT 1>!");
        assert_eq!(
            t.fill(&["!<INPUT 1>!", "B"]).unwrap(),
            "!<INPUT 1>! and !<INPUT x>! and B"
        );
    }

    #[test]
    fn embedded_library_has_templates_and_overrides_work() {
        let mut lib = PromptLibrary::embedded();
        assert!(lib.names().count() >= 1);
        assert!(matches!(lib.get("nope"), Err(TemplateError::Unknown(_))));
        lib.insert(PromptTemplate::parse("generic_json", "custom !<INPUT 0>!"));
        assert_eq!(lib.fill("generic_json", &["x"]).unwrap(), "custom x");
    }
}
