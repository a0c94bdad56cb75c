//! Persona sheets: the JSON files a game writes to describe its characters.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::Scratch;
use crate::files::{ReadError, read_at_most};
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
    #[error("persona {name}: {reason}")]
    DoesNotFitMap {
        /// The persona (quoted, clipped to 60 characters).
        name: String,
        /// What is missing from the map.
        reason: String,
    },
    /// Two sheets share a name (compared ignoring case: they would share a save folder on
    /// case-insensitive file systems).
    #[error("two personas are named {0} (ignoring case); names must be unique")]
    DuplicateName(String),
    /// The folder holds no sheets.
    #[error("no persona sheets (*.json) in {0}")]
    Empty(PathBuf),
}

/// The longest persona name in bytes (a folder name on common file systems).
pub const MAX_PERSONA_NAME_BYTES: usize = 255;

/// Whether `name` can be a folder name on every platform we write to and a label a player can
/// trust: not empty, at most [`MAX_PERSONA_NAME_BYTES`] bytes, no leading `.`, no `/`, `\`,
/// `:` or control characters, and — a name is a name — no leading or trailing space, no space
/// but the plain one and never two in a row, no invisible characters (Unicode format
/// characters such as bidi overrides and zero-width ones, separators, private-use or
/// unassigned code points), and at least one visible letter or digit (a name of marks, fillers
/// and punctuation only imitates another). The error quotes at most 60 characters of the name
/// and says which rule it breaks.
pub fn check_persona_name(name: &str) -> Result<(), String> {
    if name.trim().is_empty() {
        return Err("a persona name is empty".into());
    }
    if name.len() > MAX_PERSONA_NAME_BYTES {
        return Err(format!(
            "persona name {} is {} bytes; names are at most {MAX_PERSONA_NAME_BYTES} bytes \
             (they name the persona's folder in a save)",
            quote_clipped(name, 60),
            name.len()
        ));
    }
    if name.starts_with('.')
        || name
            .chars()
            .any(|c| matches!(c, '/' | '\\' | ':') || c.is_control())
    {
        return Err(format!(
            "persona name {} cannot be a folder name (no '/', '\\', ':', control characters or \
             leading '.')",
            quote_clipped(name, 60)
        ));
    }
    check_label(name).map_err(|why| format!("persona name {}: {why}", quote_clipped(name, 60)))
}

/// Characters that are letters to Unicode but show nothing (Hangul fillers, the blank Braille
/// pattern): a name of them looks empty or like another.
const INVISIBLE_LETTERS: [char; 5] = ['\u{115F}', '\u{1160}', '\u{3164}', '\u{FFA0}', '\u{2800}'];

/// Why `label` (a name shown to players and written into prompts) cannot be one: the reason,
/// or `Ok`. See [`check_persona_name`].
pub fn check_label(label: &str) -> Result<(), String> {
    use unicode_general_category::{GeneralCategory as G, get_general_category};
    if label.trim() != label {
        return Err("starts or ends with a space".into());
    }
    if label.contains("  ") {
        return Err("has two spaces in a row".into());
    }
    let mut visible = false;
    for c in label.chars() {
        let category = get_general_category(c);
        let why = match category {
            G::Format => Some("an invisible format character (bidi control, zero-width …)"),
            G::LineSeparator | G::ParagraphSeparator => Some("a line or paragraph separator"),
            G::SpaceSeparator if c != ' ' => Some("a space other than the plain one"),
            G::PrivateUse | G::Unassigned | G::Surrogate => {
                Some("a private-use or unassigned code point")
            }
            _ if INVISIBLE_LETTERS.contains(&c) => Some("an invisible filler character"),
            _ => None,
        };
        if let Some(why) = why {
            return Err(format!("holds {why}: U+{:04X}", u32::from(c)));
        }
        visible |= c.is_alphanumeric();
    }
    if !visible {
        return Err("has no visible letter or digit".into());
    }
    Ok(())
}

/// `label` made a name ([`check_label`]) where it must be taken as it comes (who speaks to a
/// persona: it keys the persona's profiles and is written into its memories): invisible
/// characters dropped, other spaces made plain ones, runs of spaces one, the ends trimmed, at
/// most 60 characters; `"Someone"` when nothing visible is left. With the reason the label was
/// changed, if it was.
pub fn clean_label(label: &str) -> (String, Option<String>) {
    use unicode_general_category::{GeneralCategory as G, get_general_category};
    let Err(why) = check_label(label) else {
        return (label.chars().take(60).collect(), None);
    };
    let mut out = String::new();
    for c in label.chars() {
        let keep = match get_general_category(c) {
            G::Format
            | G::LineSeparator
            | G::ParagraphSeparator
            | G::PrivateUse
            | G::Unassigned
            | G::Surrogate
            | G::Control => None,
            G::SpaceSeparator => Some(' '),
            _ if INVISIBLE_LETTERS.contains(&c) => None,
            _ => Some(c),
        };
        if let Some(c) = keep
            && !(c == ' ' && (out.is_empty() || out.ends_with(' ')))
        {
            out.push(c);
        }
    }
    let out: String = out.trim_end().chars().take(60).collect();
    let out = out.trim_end().to_owned();
    if out.chars().any(char::is_alphanumeric) {
        (out, Some(why))
    } else {
        ("Someone".to_owned(), Some(why))
    }
}

/// The most characters of a sheet's free-text fields (`innate`, `learned`, `currently`,
/// `lifestyle`, `daily_plan_req`): every prompt about the persona carries them, so a longer one
/// is refused when the sheet loads (the shipped towns' longest is under 300).
pub const MAX_SHEET_TEXT_CHARS: usize = 2_000;

/// The most characters of a sheet's short fields (first and last name, addresses, spawn).
pub const MAX_SHEET_LABEL_CHARS: usize = 120;

/// `text` quoted like `{:?}`, cut after `max` characters (with its length in bytes then), for
/// error messages that must stay short whatever a file holds.
pub(crate) fn quote_clipped(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{:?}… ({} bytes)", &text[..cut], text.len()),
        None => format!("{text:?}"),
    }
}

/// The map's addresses with as many parts as `wanted` (`w:s:a` → every arena).
fn addresses_like<'a>(map: &'a TownMap, wanted: &str) -> impl Iterator<Item = &'a str> + 'a {
    let depth = wanted.split(':').count();
    map.address_keys()
        .into_iter()
        .filter(move |key| !key.starts_with('<') && key.split(':').count() == depth)
}

/// Names compared by [`edit_distance`] are cut to this many characters (a hostile sheet's
/// megabyte-long name costs no more than a short one).
const MAX_COMPARED_CHARS: usize = 120;

/// Levenshtein distance between `a` and `b`, ignoring ASCII case, over their first
/// [`MAX_COMPARED_CHARS`] characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a
        .chars()
        .take(MAX_COMPARED_CHARS)
        .map(|c| c.to_ascii_lowercase())
        .collect();
    let b: Vec<char> = b
        .chars()
        .take(MAX_COMPARED_CHARS)
        .map(|c| c.to_ascii_lowercase())
        .collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (diagonal + usize::from(ca != cb))
                .min(above + 1)
                .min(row[j] + 1);
            diagonal = above;
        }
    }
    row[b.len()]
}

/// Up to three of `candidates` nearest to `wanted` by [`edit_distance`] (ties by name).
fn nearest_names<'a>(wanted: &str, candidates: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    let mut scored: Vec<(usize, &str)> = candidates
        .into_iter()
        .map(|c| (edit_distance(wanted, c), c))
        .collect();
    scored.sort();
    scored.dedup_by(|a, b| a.1 == b.1);
    scored.into_iter().take(3).map(|(_, c)| c).collect()
}

/// "; the nearest names in the map are "a", "b"" (empty when the map has none of that kind).
fn nearest_hint<'a>(wanted: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    let nearest = nearest_names(wanted, candidates);
    if nearest.is_empty() {
        return "; the map has none of that kind".to_string();
    }
    let listed: Vec<String> = nearest.iter().map(|n| quote_clipped(n, 60)).collect();
    format!("; the nearest names in the map are {}", listed.join(", "))
}

/// The largest persona sheet file read, in bytes.
pub const MAX_SHEET_BYTES: u64 = 1 << 20;

/// At most 300 characters of a parser's message (it may quote a value from the file).
fn clip_reason(reason: String) -> String {
    match reason.char_indices().nth(300) {
        Some((cut, _)) => format!("{}… ({} bytes)", &reason[..cut], reason.len()),
        None => reason,
    }
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
            reason: clip_reason(e.to_string()),
        })?;
        if sheet.name.trim().is_empty() {
            return Err(PersonaError::Invalid {
                path: path.to_path_buf(),
                reason: "empty `name`".into(),
            });
        }
        sheet
            .check_name()
            .and_then(|()| sheet.check_fields())
            .map_err(|reason| PersonaError::Invalid {
                path: path.to_path_buf(),
                reason,
            })?;
        Ok(sheet)
    }

    /// Checks the name the way a save will need it (see [`check_persona_name`]), so a run never
    /// simulates for hours to fail at its save.
    pub(crate) fn check_name(&self) -> Result<(), String> {
        check_persona_name(&self.name).map_err(|reason| format!("field `name`: {reason}"))
    }

    /// Checks the bounds of every text field ([`MAX_SHEET_TEXT_CHARS`],
    /// [`MAX_SHEET_LABEL_CHARS`]) and that the first and last names are names
    /// ([`check_label`]): a sheet is refused when it loads, naming the field, never cut later.
    pub(crate) fn check_fields(&self) -> Result<(), String> {
        let too_long = |field: &str, text: &str, max: usize| -> Result<(), String> {
            let chars = text.chars().count();
            if chars > max {
                Err(format!(
                    "field `{field}` is {chars} characters; at most {max} are allowed"
                ))
            } else {
                Ok(())
            }
        };
        for (field, text) in [
            ("innate", &self.innate),
            ("learned", &self.learned),
            ("currently", &self.currently),
            ("lifestyle", &self.lifestyle),
            ("daily_plan_req", &self.daily_plan_req),
        ] {
            too_long(field, text, MAX_SHEET_TEXT_CHARS)?;
        }
        for (field, text) in [
            ("first_name", &self.first_name),
            ("last_name", &self.last_name),
            ("living_area", &self.living_area),
            ("spawn", &self.spawn),
        ] {
            too_long(field, text, MAX_SHEET_LABEL_CHARS)?;
        }
        if let Some(work) = &self.workplace {
            too_long("workplace", work, MAX_SHEET_LABEL_CHARS)?;
        }
        for (field, text) in [
            ("first_name", &self.first_name),
            ("last_name", &self.last_name),
        ] {
            if !text.is_empty() {
                check_label(text).map_err(|why| format!("field `{field}`: {why}"))?;
            }
        }
        Ok(())
    }

    /// Checks the sheet against the map and returns its spawn tile.
    pub fn validate(&self, map: &TownMap) -> Result<TileCoord, PersonaError> {
        let unfit = |reason: String| PersonaError::DoesNotFitMap {
            name: quote_clipped(&self.name, 60),
            reason,
        };
        self.check_name().map_err(unfit)?;
        let tile = map.spawn_location(&self.spawn).ok_or_else(|| {
            unfit(format!(
                "spawn location {} is not in the map{}",
                quote_clipped(&self.spawn, 60),
                nearest_hint(&self.spawn, map.spawn_locations().map(|(name, _)| name))
            ))
        })?;
        if map.address_tiles(&self.living_area).is_none() {
            return Err(unfit(format!(
                "living area {} is not in the map{}",
                quote_clipped(&self.living_area, 60),
                nearest_hint(&self.living_area, addresses_like(map, &self.living_area))
            )));
        }
        if let Some(work) = &self.workplace
            && map.address_tiles(work).is_none()
        {
            return Err(unfit(format!(
                "workplace {} is not in the map{}",
                quote_clipped(work, 60),
                nearest_hint(work, addresses_like(map, work))
            )));
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

/// The default town's persona folder ([`ShippedTown::default_town`]'s, `assets/personas`).
///
/// [`ShippedTown::default_town`]: crate::world::ShippedTown::default_town
pub fn default_personas_dir() -> PathBuf {
    crate::world::ShippedTown::default_town().personas_dir()
}

/// Reads a sheet of at most [`MAX_SHEET_BYTES`].
fn read_sheet(path: &Path) -> Result<String, PersonaError> {
    let io = |reason: String| PersonaError::Io {
        path: path.to_path_buf(),
        reason,
    };
    let bytes = read_at_most(path, MAX_SHEET_BYTES).map_err(|err| match err {
        ReadError::Io(err) => io(err.to_string()),
        ReadError::TooLarge { .. } => io(format!(
            "larger than {MAX_SHEET_BYTES} bytes; a persona sheet is a few kilobytes"
        )),
    })?;
    String::from_utf8(bytes).map_err(|e| PersonaError::Invalid {
        path: path.to_path_buf(),
        reason: format!("not UTF-8: {e}"),
    })
}

/// Loads every `*.json` sheet of `dir`, sorted by file name. Names must be unique (ignoring
/// case) and valid save folder names ([`check_persona_name`]).
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
    let mut folded = std::collections::BTreeSet::new();
    for path in files {
        let text = read_sheet(&path)?;
        let sheet = PersonaSheet::from_json(&path, &text)?;
        if !folded.insert(sheet.name.to_lowercase()) {
            return Err(PersonaError::DuplicateName(quote_clipped(&sheet.name, 60)));
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

    #[test]
    fn names_a_save_would_refuse_are_refused_at_load() {
        let dir = std::env::temp_dir().join(format!("bga-sheet-names-{}", std::process::id()));
        let good: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(default_personas_dir().join("mira_okafor.json")).unwrap(),
        )
        .unwrap();
        let with_names = |names: &[&str]| -> Result<Vec<PersonaSheet>, PersonaError> {
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            for (i, name) in names.iter().enumerate() {
                let mut sheet = good.clone();
                sheet["name"] = serde_json::json!(name);
                std::fs::write(dir.join(format!("{i}.json")), sheet.to_string()).unwrap();
            }
            load_persona_sheets(&dir)
        };
        let huge = "n".repeat(1 << 20);
        for (names, needle) in [
            (vec!["Ada/Okafor"], "cannot be a folder name"),
            (vec![".Ada"], "cannot be a folder name"),
            (vec![huge.as_str()], "1048576 bytes"),
            (vec!["Ada Okafor", "ada okafor"], "two personas are named"),
        ] {
            let err = with_names(&names).expect_err(needle).to_string();
            assert!(err.contains(needle), "{err}");
            assert!(err.len() < 400, "a short error: {} bytes", err.len());
        }
        assert_eq!(with_names(&["Ada Okafor", "Bo"]).unwrap().len(), 2);
        // A value the parser quotes is clipped too.
        let mut bad = good.clone();
        bad["age"] = serde_json::json!(huge);
        let err = PersonaSheet::from_json(Path::new("x.json"), &bad.to_string())
            .unwrap_err()
            .to_string();
        assert!(err.len() < 500, "{} bytes", err.len());
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Issue 48: a name is a name, with the reason in the error; free text is bounded when the
    /// sheet loads.
    #[test]
    fn names_are_names_and_free_text_is_bounded_at_load() {
        let good: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(default_personas_dir().join("mira_okafor.json")).unwrap(),
        )
        .unwrap();
        let load = |field: &str, value: serde_json::Value| {
            let mut sheet = good.clone();
            sheet[field] = value;
            PersonaSheet::from_json(Path::new("sheet.json"), &sheet.to_string())
        };
        for (name, reason) in [
            ("\u{202E}\u{200B}\u{202E}", "format character"),
            ("Ada\u{202E}Lee", "format character"),
            ("Ada\u{200D}Lee", "format character"),
            ("\u{FEFF}Ada", "format character"),
            (" Ada Lee", "starts or ends with a space"),
            ("Ada Lee ", "starts or ends with a space"),
            ("Ada  Lee", "two spaces in a row"),
            ("Ada\u{00A0}Lee", "a space other than the plain one"),
            ("Ada\u{2028}Lee", "line or paragraph separator"),
            ("Ada\u{E000}", "private-use"),
            ("\u{3164}", "invisible filler"),
            ("\u{3164}\u{3164}", "invisible filler"),
            ("---", "no visible letter or digit"),
            ("\u{0301}\u{0301}", "no visible letter or digit"),
        ] {
            let err = load("name", serde_json::json!(name))
                .expect_err(name)
                .to_string();
            assert!(err.contains(reason), "{name:?}: {err}");
            assert!(
                err.contains("sheet.json") && err.contains("`name`"),
                "{err}"
            );
            assert!(check_persona_name(name).is_err(), "{name:?}");
        }
        for name in ["Zoë Ündset", "李雷", "O'Brien-Smith", "Ada Lee"] {
            assert!(check_persona_name(name).is_ok(), "{name:?}");
            assert_eq!(clean_label(name), (name.to_owned(), None));
        }
        // A label taken as it comes is cleaned, saying why.
        let (label, why) = clean_label(" Pla\u{202E}yer\u{00A0}\u{00A0}One\u{200B} ");
        assert_eq!(label, "Player One");
        assert!(why.is_some_and(|w| w.contains("space")));
        assert_eq!(clean_label("\u{202E}\u{200B}").0, "Someone");
        assert_eq!(clean_label("\u{3164}").0, "Someone");
        let err = load("first_name", serde_json::json!("Mi\u{202E}ra"))
            .expect_err("bidi first name")
            .to_string();
        assert!(
            err.contains("`first_name`") && err.contains("format"),
            "{err}"
        );

        let long = "x".repeat(MAX_SHEET_TEXT_CHARS + 1);
        let err = load("learned", serde_json::json!(long))
            .expect_err("a long learned")
            .to_string();
        assert!(err.contains("`learned` is 2001 characters"), "{err}");
        assert!(err.len() < 300, "{err}");
        let at_bound = "é".repeat(MAX_SHEET_TEXT_CHARS);
        assert!(load("learned", serde_json::json!(at_bound)).is_ok());
        let err = load(
            "spawn",
            serde_json::json!("s".repeat(MAX_SHEET_LABEL_CHARS + 1)),
        )
        .expect_err("a long spawn")
        .to_string();
        assert!(err.contains("`spawn`"), "{err}");
    }

    #[test]
    fn a_sheet_naming_an_unknown_place_lists_the_nearest_names() {
        let map = TownMap::load_tmx(TownMap::default_town_path()).unwrap();
        let mira = load_persona_sheets(default_personas_dir())
            .unwrap()
            .into_iter()
            .find(|s| s.first_name == "Mira")
            .unwrap();
        assert!(mira.validate(&map).is_ok());
        for (field, value, nearest) in [
            (
                "living_area",
                "Willowbrook:Okafor hose:bedroom",
                "\"Willowbrook:Okafor house:bedroom\"",
            ),
            (
                "workplace",
                "Willowbrook:Riverside Caffe:cafe",
                "\"Willowbrook:Riverside Cafe:cafe\"",
            ),
            ("spawn", "okafor_bed", "\"okafor-bed\""),
        ] {
            let mut sheet = mira.clone();
            match field {
                "living_area" => sheet.living_area = value.into(),
                "workplace" => sheet.workplace = Some(value.into()),
                _ => sheet.spawn = value.into(),
            }
            let err = sheet.validate(&map).map(|_| ()).unwrap_err().to_string();
            let hint = err
                .split("nearest names in the map are ")
                .nth(1)
                .unwrap_or("");
            assert!(hint.starts_with(nearest), "{field}: {err}");
            assert_eq!(hint.matches(", ").count(), 2, "three names: {err}");
            assert!(!err.contains("TileCoord"), "{err}");
        }
        let mut far = mira.clone();
        far.living_area = "x".repeat(100_000);
        let err = far.validate(&map).map(|_| ()).unwrap_err().to_string();
        assert!(err.len() < 600, "a short error: {} bytes", err.len());
        assert_eq!(edit_distance("Okafor hose", "okafor house"), 1);
        assert_eq!(edit_distance("", "abc"), 3);
    }
}
