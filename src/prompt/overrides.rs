//! Prompt overrides: edited templates loaded from a folder at start-up, checked before any
//! simulation work, and recorded so a run says which prompts it asked (see
//! [`PromptLibrary::with_overrides_from_dir`] for the rules).

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::template::{HEADER_MARKER, PromptLibrary, PromptTemplate, TemplateError, placeholders};
use crate::files::{ReadError, read_at_most};

/// The largest template file accepted, in bytes (the shipped ones are a few KB).
pub const MAX_TEMPLATE_BYTES: u64 = 256 * 1024;

/// The extension of template files.
const TEMPLATE_EXTENSION: &str = "txt";

/// One template file that replaced a compiled-in template.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromptOverride {
    /// The file name, e.g. `wake_up_hour.txt`.
    pub file: String,
    /// SHA-256 of the file's bytes, lowercase hex.
    pub sha256: String,
}

/// Which prompts a run asked: the library's version and the files that overrode its templates.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromptProvenance {
    /// The template version, e.g. `"v1"`.
    pub version: String,
    /// The override files, sorted by name (empty: the compiled-in templates only).
    #[serde(default)]
    pub overrides: Vec<PromptOverride>,
}

impl PromptProvenance {
    /// One line for people: `v1 (compiled-in)` or `v1 with 2 overrides: a.txt (sha256 1a2b3c4d…), …`.
    pub(crate) fn describe(&self) -> String {
        if self.overrides.is_empty() {
            return format!("{} (compiled-in)", self.version);
        }
        let mut text = format!(
            "{} with {} override{}: ",
            self.version,
            self.overrides.len(),
            if self.overrides.len() == 1 { "" } else { "s" }
        );
        for (i, o) in self.overrides.iter().enumerate() {
            let short = o.sha256.get(..12).unwrap_or(&o.sha256);
            let _ = write!(
                text,
                "{}{} (sha256 {short}…)",
                if i == 0 { "" } else { ", " },
                o.file
            );
        }
        text
    }
}

/// What is wrong with one override file (the file itself is named by
/// [`TemplateError::Override`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OverrideProblem {
    /// Not `<name>.txt`, or not a regular file.
    #[error("not a template file (an override is a file named `<template>.txt`)")]
    NotATemplateFile,
    /// The file name is not a template of the library.
    #[error("no prompt template is named `{name}` (the templates are: {known})")]
    UnknownTemplate {
        /// The file stem.
        name: String,
        /// The library's template names, comma-separated.
        known: String,
    },
    /// Larger than [`MAX_TEMPLATE_BYTES`].
    #[error("larger than {max} bytes")]
    TooLarge {
        /// The limit.
        max: u64,
    },
    /// Not UTF-8 text.
    #[error("not UTF-8 text")]
    NotUtf8,
    /// The file could not be read.
    #[error("cannot be read: {0}")]
    Unreadable(String),
    /// The header marker is misspelt or repeated.
    #[error(
        "broken header on line {line}: {reason} (a header ends with the line \
         `<commentblockmarker>###</commentblockmarker>`, once)"
    )]
    BrokenHeader {
        /// The line, from 1.
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// Something like a placeholder that is not `!<INPUT n>!`.
    #[error("malformed placeholder `{text}` on line {line} (a placeholder is `!<INPUT n>!`)")]
    MalformedPlaceholder {
        /// The text found.
        text: String,
        /// The line, from 1.
        line: usize,
    },
    /// A placeholder the prompt never fills.
    #[error(
        "uses !<INPUT {index}>!, which the `{template}` prompt never fills (it fills {filled})"
    )]
    UnfilledPlaceholder {
        /// The placeholder index.
        index: usize,
        /// The template.
        template: String,
        /// The placeholders the prompt fills.
        filled: String,
    },
    /// A placeholder of the replaced template is missing.
    #[error(
        "lacks !<INPUT {index}>!, which the `{template}` template uses (every input of the \
         prompt must appear in its text)"
    )]
    MissingPlaceholder {
        /// The placeholder index.
        index: usize,
        /// The template.
        template: String,
    },
}

impl PromptLibrary {
    /// The compiled-in templates with the overrides of `dir` when one is given (see
    /// [`PromptLibrary::with_overrides_from_dir`]): what the binary's `--prompts DIR` /
    /// `GA_PROMPTS` / `"prompts"` load.
    pub fn load(dir: Option<&Path>) -> Result<Self, TemplateError> {
        match dir {
            Some(dir) => Self::embedded().with_overrides_from_dir(dir),
            None => Ok(Self::embedded()),
        }
    }

    /// Replaces templates with the files of `dir`, each checked against the template it
    /// replaces. Either every file is accepted or the library is refused with the first bad
    /// file, in name order.
    ///
    /// A file named after a template (`wake_up_hour.txt` replaces `wake_up_hour`) replaces it;
    /// templates without a file keep their text. The folder is refused with
    /// [`TemplateError::Override`] — naming the file and what is wrong — when a file:
    ///
    /// - is not `<template name>.txt` for a template the library has (a typo such as
    ///   `wake_up_hours.txt` or `wake_up_hour.text` would otherwise be silently ignored), or is
    ///   not a regular file;
    /// - is larger than [`MAX_TEMPLATE_BYTES`] or not UTF-8 text;
    /// - has a broken documentation header: the header ends with the line
    ///   `<commentblockmarker>###</commentblockmarker>` ([`HEADER_MARKER`]), once — a
    ///   misspelt or repeated marker is an error;
    /// - has a malformed placeholder in its prompt text (anything like `<INPUT` that is not
    ///   `!<INPUT n>!`), uses a placeholder the prompt never fills, or lacks one the template
    ///   it replaces uses (every input of a prompt must reach the model: an option list or a
    ///   persona's name silently dropped would make its answers unparseable).
    ///
    /// Placeholders in the header are documentation and are not checked. Hidden files (a
    /// leading `.`, as editors leave) are skipped. The files that changed a template are
    /// recorded with their SHA-256 (`PromptLibrary::provenance`); a file whose text equals
    /// the template it would replace changes nothing and is not recorded.
    pub fn with_overrides_from_dir(mut self, dir: impl AsRef<Path>) -> Result<Self, TemplateError> {
        let dir = dir.as_ref();
        let io = |reason: std::io::Error| TemplateError::Io {
            path: dir.to_path_buf(),
            reason: reason.to_string(),
        };
        let mut entries: Vec<PathBuf> = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(io)? {
            let path = entry.map_err(io)?.path();
            let hidden = path
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with('.'));
            if !hidden {
                entries.push(path);
            }
        }
        entries.sort();
        let mut replaced = Vec::new();
        for path in entries {
            let refuse = |problem| TemplateError::Override {
                path: path.clone(),
                problem,
            };
            let name = template_name(&path).map_err(refuse)?;
            let base = self.get(&name).map_err(|_| {
                refuse(OverrideProblem::UnknownTemplate {
                    name: name.clone(),
                    known: self.names().collect::<Vec<_>>().join(", "),
                })
            })?;
            let (text, bytes) = read_text(&path).map_err(refuse)?;
            check_override(base, &text).map_err(refuse)?;
            let template = PromptTemplate::parse(name.clone(), &text);
            if template == *base {
                continue;
            }
            replaced.push((
                PromptOverride {
                    file: format!("{name}.{TEMPLATE_EXTENSION}"),
                    sha256: sha256_hex(&bytes),
                },
                template,
            ));
        }
        let mut overrides: Vec<PromptOverride> = self.overrides().to_vec();
        for (record, template) in replaced {
            overrides.retain(|o| o.file != record.file);
            overrides.push(record);
            self.insert(template);
        }
        overrides.sort_by(|a, b| a.file.cmp(&b.file));
        self.overrides = Arc::new(overrides);
        Ok(self)
    }

    /// The files that replaced compiled-in templates, sorted by name.
    pub fn overrides(&self) -> &[PromptOverride] {
        &self.overrides
    }

    /// The version and the override files, as saves, `usage.json` and reports record them.
    pub(crate) fn provenance(&self) -> PromptProvenance {
        PromptProvenance {
            version: self.version().to_owned(),
            overrides: self.overrides.to_vec(),
        }
    }
}

/// The template an override file replaces: its stem, when it is `<stem>.txt`.
fn template_name(path: &Path) -> Result<String, OverrideProblem> {
    match (
        path.file_stem().and_then(|s| s.to_str()),
        path.extension().and_then(|s| s.to_str()),
    ) {
        (Some(stem), Some(TEMPLATE_EXTENSION)) => Ok(stem.to_owned()),
        _ => Err(OverrideProblem::NotATemplateFile),
    }
}

/// Reads an override file's text and bytes. The size is checked before reading, and the read
/// is bounded too (the file may grow meanwhile).
fn read_text(path: &Path) -> Result<(String, Vec<u8>), OverrideProblem> {
    let unreadable = |e: std::io::Error| OverrideProblem::Unreadable(e.to_string());
    let meta = std::fs::metadata(path).map_err(unreadable)?;
    if !meta.is_file() {
        return Err(OverrideProblem::NotATemplateFile);
    }
    let bytes = read_at_most(path, MAX_TEMPLATE_BYTES).map_err(|err| match err {
        ReadError::Io(e) => unreadable(e),
        ReadError::TooLarge { .. } => OverrideProblem::TooLarge {
            max: MAX_TEMPLATE_BYTES,
        },
    })?;
    let text = std::str::from_utf8(&bytes)
        .map_err(|_| OverrideProblem::NotUtf8)?
        .to_owned();
    Ok((text, bytes))
}

/// Checks the text of an override of `base`: its header marker, its placeholders' form, and
/// that it uses exactly the placeholders `base` uses.
pub(super) fn check_override(base: &PromptTemplate, text: &str) -> Result<(), OverrideProblem> {
    let line_at = |offset: usize| {
        text.get(..offset)
            .map_or(1, |t| t.matches('\n').count() + 1)
    };

    // The header: at most one exact marker, and no other spelling of it anywhere.
    let marker_at = text.find(HEADER_MARKER);
    let body_start = marker_at.map_or(0, |at| at + HEADER_MARKER.len());
    if let Some(again) = text.get(body_start..).and_then(|t| t.find(HEADER_MARKER)) {
        return Err(OverrideProblem::BrokenHeader {
            line: line_at(body_start + again),
            reason: "the marker appears more than once".into(),
        });
    }
    let lower = text.to_ascii_lowercase();
    let mut from = 0;
    while let Some(found) = lower.get(from..).and_then(|t| t.find("commentblockmarker")) {
        let at = from + found;
        let exact = marker_at.is_some_and(|m| (m..body_start).contains(&at));
        if !exact {
            return Err(OverrideProblem::BrokenHeader {
                line: line_at(at),
                reason: format!("misspelt marker in `{}`", line_of(text, at)),
            });
        }
        from = at + 1;
    }

    // Placeholders in the prompt text (the header's are documentation).
    let body = text.get(body_start..).unwrap_or_default();
    let spans: Vec<(usize, usize, usize)> = placeholders(body).collect();
    let lower_body = lower.get(body_start..).unwrap_or_default();
    let mut from = 0;
    while let Some(found) = lower_body.get(from..).and_then(|t| t.find("<input")) {
        let at = from + found;
        if !spans.iter().any(|&(start, _, _)| start + 1 == at) {
            let start = if at > 0 && body.as_bytes()[at - 1] == b'!' {
                at - 1
            } else {
                at
            };
            return Err(OverrideProblem::MalformedPlaceholder {
                text: placeholder_at(body, start),
                line: line_at(body_start + at),
            });
        }
        from = at + 1;
    }
    let used: BTreeSet<usize> = spans.iter().map(|&(_, _, n)| n).collect();
    let wanted: BTreeSet<usize> = placeholders(base.body()).map(|(_, _, n)| n).collect();
    if let Some(&index) = used.difference(&wanted).next() {
        let filled = if wanted.is_empty() {
            "none".to_owned()
        } else {
            wanted
                .iter()
                .map(|n| format!("!<INPUT {n}>!"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        return Err(OverrideProblem::UnfilledPlaceholder {
            index,
            template: base.name().to_owned(),
            filled,
        });
    }
    if let Some(&index) = wanted.difference(&used).next() {
        return Err(OverrideProblem::MissingPlaceholder {
            index,
            template: base.name().to_owned(),
        });
    }
    Ok(())
}

/// The placeholder-like text at byte `at` of `text`: up to its `>` (and a `!` after it), never
/// past the line, at most 40 characters.
fn placeholder_at(text: &str, at: usize) -> String {
    let rest = text.get(at..).unwrap_or_default();
    let line = rest.split('\n').next().unwrap_or_default();
    let cut = line.find('>').map_or(line.len(), |i| i + 1);
    let cut = if line.get(cut..).is_some_and(|r| r.starts_with('!')) {
        cut + 1
    } else {
        cut
    };
    line.get(..cut)
        .unwrap_or(line)
        .chars()
        .take(40)
        .collect::<String>()
        .trim_end()
        .to_owned()
}

/// The line of `text` holding byte `at`, trimmed, at most 60 characters.
fn line_of(text: &str, at: usize) -> String {
    let start = text
        .get(..at)
        .and_then(|t| t.rfind('\n'))
        .map_or(0, |i| i + 1);
    let line = text.get(start..).unwrap_or_default();
    line.split('\n')
        .next()
        .unwrap_or_default()
        .trim()
        .chars()
        .take(60)
        .collect()
}

/// SHA-256 of `bytes` as lowercase hex.
fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut hex = String::with_capacity(64);
    for b in digest {
        let _ = write!(hex, "{b:02x}");
    }
    hex
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh, empty folder under the system temp dir, removed on drop.
    struct Folder(PathBuf);

    impl Folder {
        fn new(tag: &str) -> Self {
            let dir = std::env::temp_dir()
                .join(format!("ga-prompt-overrides-{tag}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).expect("mkdir");
            Self(dir)
        }

        fn write(&self, name: &str, text: impl AsRef<[u8]>) -> PathBuf {
            let path = self.0.join(name);
            std::fs::write(&path, text).expect("write");
            path
        }
    }

    impl Drop for Folder {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// The refusal of `dir`: its file and problem.
    fn refusal(dir: &Path) -> (PathBuf, OverrideProblem, String) {
        match PromptLibrary::embedded().with_overrides_from_dir(dir) {
            Err(err @ TemplateError::Override { .. }) => {
                let message = err.to_string();
                let TemplateError::Override { path, problem } = err else {
                    unreachable!()
                };
                (path, problem, message)
            }
            other => panic!("expected a refused override, got {other:?}"),
        }
    }

    const WAKE: &str = "Variables:\n!<INPUT 0>! -- identity\n\
                        <commentblockmarker>###</commentblockmarker>\n\
                        EDITED !<INPUT 0>! / !<INPUT 1>! / !<INPUT 2>! wakes at:";

    #[test]
    fn every_compiled_in_template_passes_its_own_check() {
        let library = PromptLibrary::embedded();
        for &(name, text) in crate::prompt::EMBEDDED_V1 {
            let base = library.get(name).expect("template");
            assert_eq!(check_override(base, text), Ok(()), "{name}");
        }
    }

    #[test]
    fn an_override_replaces_its_template_and_is_recorded() {
        let dir = Folder::new("ok");
        dir.write("wake_up_hour.txt", WAKE);
        // A copy of a compiled-in template changes nothing and is not recorded.
        let (_, daily) = crate::prompt::EMBEDDED_V1
            .iter()
            .copied()
            .find(|(n, _)| *n == "daily_plan")
            .expect("daily_plan");
        dir.write("daily_plan.txt", daily);
        dir.write(".wake_up_hour.txt.swp", b"\xff\xfe editor junk");
        let library = PromptLibrary::load(Some(&dir.0)).expect("valid overrides");
        assert_eq!(
            library.fill("wake_up_hour", &["A", "B", "C"]).unwrap(),
            "EDITED A / B / C wakes at:"
        );
        assert_eq!(
            library.get("daily_plan"),
            PromptLibrary::embedded().get("daily_plan")
        );
        let provenance = library.provenance();
        assert_eq!(provenance.version, "v1");
        assert_eq!(
            provenance.overrides,
            [PromptOverride {
                file: "wake_up_hour.txt".into(),
                sha256: sha256_hex(WAKE.as_bytes()),
            }]
        );
        // The well-known digest of "abc", so the hex is the standard one.
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert!(
            provenance
                .describe()
                .starts_with("v1 with 1 override: wake_up_hour.txt")
        );
        assert_eq!(
            PromptLibrary::load(None).unwrap().provenance().describe(),
            "v1 (compiled-in)"
        );
    }

    #[test]
    fn an_unknown_file_name_is_refused_naming_the_file() {
        for name in ["wake_up_hours.txt", "wake_up_hour.text", "README"] {
            let dir = Folder::new("unknown");
            dir.write("wake_up_hour.txt", WAKE);
            let bad = dir.write(name, "x");
            let (path, problem, message) = refusal(&dir.0);
            assert_eq!(path, bad, "{name}");
            assert!(message.contains(name), "{message}");
            if name == "wake_up_hours.txt" {
                assert!(
                    matches!(&problem, OverrideProblem::UnknownTemplate { name, known }
                        if name == "wake_up_hours" && known.contains("wake_up_hour,")),
                    "{problem:?}"
                );
            } else {
                assert_eq!(problem, OverrideProblem::NotATemplateFile);
            }
        }
        let dir = Folder::new("subdir");
        std::fs::create_dir_all(dir.0.join("v1")).expect("mkdir");
        assert_eq!(refusal(&dir.0).1, OverrideProblem::NotATemplateFile);
    }

    #[test]
    fn placeholders_must_be_the_ones_the_prompt_fills() {
        let cases = [
            // Index 3 is never filled by wake_up_hour (it fills 0, 1 and 2).
            (
                "x !<INPUT 0>! !<INPUT 1>! !<INPUT 2>! !<INPUT 3>!",
                OverrideProblem::UnfilledPlaceholder {
                    index: 3,
                    template: "wake_up_hour".into(),
                    filled: "!<INPUT 0>!, !<INPUT 1>!, !<INPUT 2>!".into(),
                },
                "!<INPUT 3>!",
            ),
            // Input 1 (the lifestyle) dropped.
            (
                "x !<INPUT 0>! !<INPUT 2>!",
                OverrideProblem::MissingPlaceholder {
                    index: 1,
                    template: "wake_up_hour".into(),
                },
                "!<INPUT 1>!",
            ),
            (
                "x !<INPUT 0>!\n!<INPUT 1>! !<INPUT x>! !<INPUT 2>!",
                OverrideProblem::MalformedPlaceholder {
                    text: "!<INPUT x>!".into(),
                    line: 2,
                },
                "!<INPUT x>!",
            ),
            (
                "x !<INPUT 0>! !<INPUT 1>! !<INPUT 2>",
                OverrideProblem::MalformedPlaceholder {
                    text: "!<INPUT 2>".into(),
                    line: 1,
                },
                "!<INPUT 2>",
            ),
            (
                "x !<INPUT 0>! <INPUT 1>! !<INPUT 2>!",
                OverrideProblem::MalformedPlaceholder {
                    text: "<INPUT 1>!".into(),
                    line: 1,
                },
                "<INPUT 1>!",
            ),
            (
                "x !<INPUT 0>! !<input 1>! !<INPUT 2>!",
                OverrideProblem::MalformedPlaceholder {
                    text: "!<input 1>!".into(),
                    line: 1,
                },
                "!<input 1>!",
            ),
        ];
        for (text, expected, placeholder) in cases {
            let dir = Folder::new("placeholder");
            let file = dir.write("wake_up_hour.txt", text);
            let (path, problem, message) = refusal(&dir.0);
            assert_eq!(path, file, "{text}");
            assert_eq!(problem, expected, "{text}");
            assert!(
                message.contains("wake_up_hour.txt") && message.contains(placeholder),
                "{message}"
            );
        }
    }

    #[test]
    fn the_header_marker_must_be_exact_and_single() {
        let cases = [
            (
                "doc\n<commentblockmarker>##</commentblockmarker>\nx !<INPUT 0>! !<INPUT 1>! !<INPUT 2>!",
                2,
            ),
            (
                "doc\n<CommentBlockMarker>###</CommentBlockMarker>\nx !<INPUT 0>! !<INPUT 1>! !<INPUT 2>!",
                2,
            ),
            (
                "doc\n<commentblockmarker>###</commentblockmarker>\nx !<INPUT 0>! !<INPUT 1>!\n<commentblockmarker>###</commentblockmarker>\n!<INPUT 2>!",
                4,
            ),
            (
                "doc\n<commentblockmarker>###</commentblockmarker>\nx !<INPUT 0>! !<INPUT 1>! !<INPUT 2>!\n</commentblockmarker>",
                4,
            ),
        ];
        for (text, line) in cases {
            let dir = Folder::new("header");
            let file = dir.write("wake_up_hour.txt", text);
            let (path, problem, message) = refusal(&dir.0);
            assert_eq!(path, file);
            assert!(
                matches!(problem, OverrideProblem::BrokenHeader { line: l, .. } if l == line),
                "{text}: {problem:?}"
            );
            assert!(message.contains("wake_up_hour.txt"), "{message}");
        }
        // Placeholders in the header are documentation: a stray one there is fine, and a
        // template without a header is fine.
        let dir = Folder::new("header-ok");
        dir.write(
            "wake_up_hour.txt",
            "!<INPUT 9>! !<INPUT x>!\n<commentblockmarker>###</commentblockmarker>\n!<INPUT 0>!!<INPUT 1>!!<INPUT 2>!",
        );
        dir.write("action_emoji.txt", "Emoji for !<INPUT 0>!:");
        let library = PromptLibrary::load(Some(&dir.0)).expect("valid");
        assert_eq!(
            library.fill("action_emoji", &["a nap"]).unwrap(),
            "Emoji for a nap:"
        );
        assert_eq!(library.overrides().len(), 2);
    }

    #[test]
    fn binary_huge_and_missing_inputs_are_errors_not_panics() {
        let dir = Folder::new("utf8");
        let file = dir.write(
            "wake_up_hour.txt",
            b"!<INPUT 0>! \xff\xfe !<INPUT 1>! !<INPUT 2>!",
        );
        assert_eq!(refusal(&dir.0).0, file);
        assert_eq!(refusal(&dir.0).1, OverrideProblem::NotUtf8);

        let dir = Folder::new("huge");
        let mut text = String::from("!<INPUT 0>! !<INPUT 1>! !<INPUT 2>!");
        text.push_str(&"a".repeat(MAX_TEMPLATE_BYTES as usize));
        dir.write("wake_up_hour.txt", text);
        let (_, problem, message) = refusal(&dir.0);
        assert_eq!(
            problem,
            OverrideProblem::TooLarge {
                max: MAX_TEMPLATE_BYTES
            }
        );
        assert!(message.contains("wake_up_hour.txt"), "{message}");

        let missing = PromptLibrary::load(Some(&dir.0.join("none")));
        assert!(
            matches!(&missing, Err(TemplateError::Io { path, .. }) if path.ends_with("none")),
            "{missing:?}"
        );
    }

    #[test]
    fn provenance_reads_back_and_defaults_its_overrides() {
        let p: PromptProvenance = serde_json::from_str(r#"{"version": "v1"}"#).unwrap();
        assert_eq!(
            p,
            PromptProvenance {
                version: "v1".into(),
                overrides: vec![]
            }
        );
        assert!(serde_json::from_str::<PromptProvenance>(r#"{"version": "v1", "x": 1}"#).is_err());
    }
}
