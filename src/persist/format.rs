//! The save folder's documents and their conversion to and from the in-memory [`SaveData`].
//!
//! Encoding is deterministic (pretty JSON, ordered maps, shortest round-trip floats), so two
//! saves of the same state are byte-identical except for `meta.json`'s `saved_at_unix`.
//! Decoding is strict: unknown fields are refused, every field is required (a persona's
//! `scratch.json` included, whose type otherwise tolerates gaps), and each error names the
//! file and the field path (`personas/Ada Okafor/body.json: planned_path[3]: invalid type …`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use chrono::NaiveDateTime;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::files::read_file;
use super::{FORMAT_NAME, FORMAT_VERSION, OLDEST_FORMAT_VERSION, PersistError};
use crate::clock::TimeMode;
use crate::dialogue::prompts::truncate_chars;
use crate::group::save::{GroupFile, GroupFileError, GroupsFile};
use crate::memory::{
    AssociativeMemory, AssociativeMemoryJson, EMBEDDINGS_FILE, KW_STRENGTH_FILE, NODES_FILE,
    SpatialMemory,
};
use crate::persona::{ActionView, Body, Diary, MindState, Scratch};
use crate::settings::AgentSettings;
use crate::stage::save::StagesFile;
use crate::world::{ActionAddress, TileCoord, TileEvent};

/// `meta.json`.
pub(crate) const META_FILE: &str = "meta.json";
/// `settings.json`: the simulation's [`AgentSettings`].
pub(crate) const SETTINGS_FILE: &str = "settings.json";
/// `world/events.json`: every tile event on the map.
pub(crate) const EVENTS_FILE: &str = "world/events.json";
/// `pending.json`: work decided but not yet started (conversation intents).
pub(crate) const PENDING_FILE: &str = "pending.json";
/// The folder holding one sub-folder per persona.
pub(crate) const PERSONAS_DIR: &str = "personas";
/// A persona's scratch.
pub(crate) const SCRATCH_FILE: &str = "scratch.json";
/// A persona's spatial memory.
pub(crate) const SPATIAL_FILE: &str = "spatial_memory.json";
/// A persona's associative memory folder.
pub(crate) const ASSOCIATIVE_DIR: &str = "associative_memory";
/// A persona's body (tile, path, object event, last perceived tile).
pub(crate) const BODY_FILE: &str = "body.json";
/// A persona's visible action.
pub(crate) const ACTION_FILE: &str = "action.json";
/// A persona's diary.
pub(crate) const DIARY_FILE: &str = "diary.json";
/// A persona's random stream.
pub(crate) const RNG_FILE: &str = "rng.json";
/// A persona's dialogue state: speaker profiles and appointments (format version 2 on).
pub(crate) const DIALOGUE_FILE: &str = "dialogue.json";
/// `groups.json`: the open group conversations (format version 3 on).
pub(crate) const GROUPS_FILE: &str = "groups.json";
/// `stages.json`: the stage scenes playing and their aftermaths waiting (format version 4 on).
pub(crate) const STAGES_FILE: &str = "stages.json";
/// A persona's attention to the group conversations (format version 3 on).
pub(crate) const GROUP_FILE: &str = "group.json";

/// `dialogue.json`: what a persona keeps from being talked to (SPEC §7.4).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DialogueFile {
    /// What it knows of each speaker.
    pub profiles: crate::dialogue::SpeakerProfiles,
    /// Places it agreed to be at.
    pub appointments: crate::dialogue::Appointments,
    /// Its conversations' turns so far, by speaker, oldest first (SPEC §16: a session goes on
    /// after a load as if never stopped). Absent when there are none (and in older saves).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub sessions: std::collections::BTreeMap<String, Vec<crate::dialogue::SessionTurn>>,
}

impl DialogueFile {
    /// Most speakers with a session kept, and most turns kept of one session.
    pub const MAX_SESSIONS: usize = 1_000;
    /// See [`Self::MAX_SESSIONS`].
    pub const MAX_SESSION_TURNS: usize = 10_000;
    /// Most characters of a kept turn's message, reply or pre-start results (a turn's are far
    /// shorter: a message is cut to 4,000, a reply to 2,000).
    pub const MAX_TURN_CHARS: usize = 16_000;

    /// Checks the bounds of the sessions: `(field, why)` of the first one broken.
    fn check(&self) -> Result<(), (String, String)> {
        if self.sessions.len() > Self::MAX_SESSIONS {
            return Err((
                "sessions".into(),
                format!("more than {} speakers", Self::MAX_SESSIONS),
            ));
        }
        for (speaker, turns) in &self.sessions {
            let field = || format!("sessions[{}]", truncate_chars(speaker, 40));
            if speaker.chars().count() > 200 || speaker.chars().any(char::is_control) {
                return Err((
                    field(),
                    "a speaker is at most 200 characters, none a control character".into(),
                ));
            }
            if turns.len() > Self::MAX_SESSION_TURNS {
                return Err((
                    field(),
                    format!("more than {} turns", Self::MAX_SESSION_TURNS),
                ));
            }
            let long = |t: &str| t.chars().count() > Self::MAX_TURN_CHARS;
            if turns
                .iter()
                .any(|t| long(&t.message) || long(&t.reply) || long(&t.kept_prestart))
            {
                return Err((
                    field(),
                    format!(
                        "a turn's text is at most {} characters",
                        Self::MAX_TURN_CHARS
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// The embedding model the memories were embedded with (SPEC §5).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmbeddingInfo {
    /// The embedding model's name.
    pub model: String,
    /// The vectors' dimension (0 when nothing was embedded yet).
    pub dim: usize,
}

/// `meta.json`: what the save is, and the clock.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SaveMeta {
    /// Always `FORMAT_NAME`.
    pub format: String,
    /// `FORMAT_VERSION` of the writer.
    pub format_version: u32,
    /// The crate version that wrote it.
    pub crate_version: String,
    /// Wall-clock time of the save (seconds since the Unix epoch). The only field that differs
    /// between two saves of the same state.
    pub saved_at_unix: u64,
    /// The seed the simulation was started with.
    pub seed: u64,
    /// Steps taken so far.
    pub step: u64,
    /// Game time of step 0.
    pub start: NaiveDateTime,
    /// Game time of the next step (`start + step × sec_per_step`).
    pub current_time: NaiveDateTime,
    /// Game seconds per step.
    pub sec_per_step: u32,
    /// The clock's mode when saved.
    pub time_mode: TimeMode,
    /// The Tiled map the simulation runs on: relative to the asset root for a shipped town
    /// (`assets/maps/willowbrook.tmx`), so the save moves between machines; absolute for
    /// other maps and in saves written before (see [`SaveMeta::map_path`]).
    pub map: PathBuf,
    /// The map's world name.
    pub world: String,
    /// The personas, in spawn order (one folder each under `personas/`).
    pub personas: Vec<String>,
    /// The embedding model and dimension of every memory.
    pub embedding: EmbeddingInfo,
    /// The save this one was forked from, if any.
    pub forked_from: Option<PathBuf>,
    /// The prompt library's version and override files the simulation asked with (absent in
    /// saves written before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompts: Option<crate::prompt::PromptProvenance>,
    /// The save sections it holds (`sections/<name>.json`, see
    /// [`sections`](super::sections)); absent when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sections: Vec<String>,
}

impl SaveMeta {
    /// The map file on this machine: [`map`](Self::map) as
    /// [`resolve_crate_path`](crate::files::resolve_crate_path) finds it (a shipped town under
    /// this checkout's asset root, wherever the save was written; an older save's absolute
    /// path as it is).
    pub fn map_path(&self) -> PathBuf {
        crate::files::resolve_crate_path(&self.map)
    }
}

/// `body.json`: a persona's [`Body`] plus the tile it last perceived from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct BodyFile {
    /// The current tile.
    pub tile: TileCoord,
    /// Tiles still to walk, next first.
    pub planned_path: Vec<TileCoord>,
    /// Whether the current action's path is planned.
    pub path_set: bool,
    /// The tile of the previous step.
    pub previous_tile: TileCoord,
    /// Where the persona's object event was placed, to turn idle next step.
    pub object_event_at: Option<(TileCoord, String)>,
    /// The tile the persona last looked around from (its percepts are otherwise rebuilt).
    pub perceived_from: Option<TileCoord>,
}

/// `action.json`: a persona's [`ActionView`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ActionFile {
    /// Where the action happens, in its text form; `""` before the first action.
    #[serde(with = "text_or_empty")]
    pub address: Option<ActionAddress>,
    /// What the persona is doing.
    pub description: String,
    /// The action as an emoji.
    pub emoji: String,
    /// The event on the persona's tile.
    pub event: Option<TileEvent>,
    /// The event of the object in use.
    pub object_event: Option<TileEvent>,
    /// The persona's home.
    pub living_area: String,
    /// The chat partner.
    pub chatting_with: Option<String>,
    /// The current chat's lines.
    pub chat: Vec<(String, String)>,
    /// When the current action ends.
    pub end_time: Option<NaiveDateTime>,
}

/// An optional action address saved as its text form, `""` for none (as format 1 always did).
mod text_or_empty {
    use serde::{Deserialize, Deserializer, Serializer};

    use crate::world::ActionAddress;

    pub(super) fn serialize<S: Serializer>(
        address: &Option<ActionAddress>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match address {
            Some(address) => serializer.collect_str(address),
            None => serializer.serialize_str(""),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<ActionAddress>, D::Error> {
        let text = String::deserialize(deserializer)?;
        if text.is_empty() {
            return Ok(None);
        }
        ActionAddress::parse(&text)
            .map(Some)
            .map_err(serde::de::Error::custom)
    }
}

impl ActionFile {
    fn of(view: &ActionView) -> Self {
        Self {
            address: view.address.clone(),
            description: view.description.clone(),
            emoji: view.emoji.clone(),
            event: view.event.clone(),
            object_event: view.object_event.clone(),
            living_area: view.living_area.clone(),
            chatting_with: view.chatting_with.clone(),
            chat: view.chat.clone(),
            end_time: view.end_time,
        }
    }

    fn into_view(self) -> ActionView {
        ActionView {
            address: self.address,
            description: self.description,
            emoji: self.emoji,
            event: self.event,
            object_event: self.object_event,
            living_area: self.living_area,
            chatting_with: self.chatting_with,
            chat: self.chat,
            end_time: self.end_time,
        }
    }
}

/// `rng.json`: the exact position of a persona's ChaCha8 stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RngFile {
    /// The 32-byte seed as 64 hex digits.
    pub seed: String,
    /// The stream number.
    pub stream: u64,
    /// The position in the stream, in 32-bit words (a decimal string: it exceeds 64 bits).
    pub word_pos: String,
}

impl RngFile {
    /// The state of `rng`.
    pub fn of(rng: &ChaCha8Rng) -> Self {
        let seed: String = rng.get_seed().iter().map(|b| format!("{b:02x}")).collect();
        Self {
            seed,
            stream: rng.get_stream(),
            word_pos: rng.get_word_pos().to_string(),
        }
    }

    /// The generator at exactly this position, or which field is wrong.
    pub(crate) fn to_rng(&self) -> Result<ChaCha8Rng, (&'static str, String)> {
        let bytes = self.seed.as_bytes();
        if bytes.len() != 64 {
            return Err(("seed", "expected 64 hex digits".into()));
        }
        let mut seed = [0u8; 32];
        for (slot, pair) in seed.iter_mut().zip(bytes.chunks_exact(2)) {
            let text = std::str::from_utf8(pair).map_err(|_| ("seed", "not hex".to_owned()))?;
            *slot = u8::from_str_radix(text, 16).map_err(|_| ("seed", "not hex".to_owned()))?;
        }
        let word_pos: u128 = self
            .word_pos
            .parse()
            .map_err(|_| ("word_pos", format!("{:?} is not a number", self.word_pos)))?;
        if word_pos >= 1 << 68 {
            return Err(("word_pos", "beyond the 68-bit stream".into()));
        }
        let mut rng = ChaCha8Rng::from_seed(seed);
        rng.set_stream(self.stream);
        rng.set_word_pos(word_pos);
        Ok(rng)
    }
}

/// One tile's events in `world/events.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TileEvents {
    /// The tile.
    pub tile: TileCoord,
    /// Its events, in the map's order.
    pub events: Vec<TileEvent>,
}

/// `world/events.json`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventsFile {
    /// Every tile that has events, row by row.
    pub tiles: Vec<TileEvents>,
}

/// `pending.json`: conversations a persona decided to start at the next step.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PendingFile {
    /// `(initiator, target)` names, in the order they were decided.
    pub chat_intents: Vec<(String, String)>,
}

/// One persona's saved state.
#[derive(Debug, Clone)]
pub struct PersonaSave {
    /// The persona's name (its folder's name).
    pub name: String,
    /// Scratch, memories and random stream.
    pub mind: MindState,
    /// Tile and path.
    pub body: Body,
    /// The visible action.
    pub view: ActionView,
    /// The record for reports.
    pub diary: Diary,
    /// The tile its percepts were last gathered from.
    pub perceived_from: Option<TileCoord>,
    /// Speaker profiles and appointments.
    pub dialogue: DialogueFile,
    /// Its attention to the group conversations.
    pub group: GroupFile,
}

/// Borrowed views of one persona, for encoding without cloning its memory.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PersonaRef<'a> {
    /// Name.
    pub name: &'a str,
    /// Mind (must be home).
    pub mind: &'a MindState,
    /// Body.
    pub body: &'a Body,
    /// Visible action.
    pub view: &'a ActionView,
    /// Diary.
    pub diary: &'a Diary,
    /// The tile its percepts were last gathered from.
    pub perceived_from: Option<TileCoord>,
    /// Speaker profiles and appointments.
    pub dialogue: &'a DialogueFile,
    /// Its attention to the group conversations.
    pub group: &'a GroupFile,
}

/// A whole save in memory, validated.
#[derive(Debug, Clone)]
pub struct SaveData {
    /// `meta.json`.
    pub meta: SaveMeta,
    /// `settings.json`.
    pub settings: AgentSettings,
    /// `world/events.json`.
    pub events: EventsFile,
    /// `pending.json`.
    pub pending: PendingFile,
    /// `groups.json`.
    pub groups: GroupsFile,
    /// `stages.json`.
    pub stages: StagesFile,
    /// The sections of systems above the format, by name (`meta.sections`).
    pub sections: BTreeMap<String, Vec<u8>>,
    /// The personas, in `meta.personas` order.
    pub personas: Vec<PersonaSave>,
}

impl SaveData {
    /// The borrowed views of the personas.
    pub(crate) fn persona_refs(&self) -> Vec<PersonaRef<'_>> {
        self.personas
            .iter()
            .map(|p| PersonaRef {
                name: &p.name,
                mind: &p.mind,
                body: &p.body,
                view: &p.view,
                diary: &p.diary,
                perceived_from: p.perceived_from,
                dialogue: &p.dialogue,
                group: &p.group,
            })
            .collect()
    }

    /// The save's files (see [`encode`]).
    pub(crate) fn encode(&self) -> Result<Vec<(PathBuf, Vec<u8>)>, PersistError> {
        let town = TownFiles {
            settings: &self.settings,
            events: &self.events,
            pending: &self.pending,
            groups: &self.groups,
            stages: &self.stages,
            sections: &self.sections,
        };
        encode(&self.meta, &town, &self.persona_refs())
    }
}

pub use crate::persona::{MAX_PERSONA_NAME_BYTES, check_persona_name};

/// The most characters of a saved persona's identity text (`learned`, `currently`, …): ten
/// times what a sheet may hold ([`MAX_SHEET_TEXT_CHARS`](crate::persona::MAX_SHEET_TEXT_CHARS)),
/// as the model revises some of it day by day; a longer one is refused when the save loads.
pub const MAX_SAVED_TEXT_CHARS: usize = 20_000;

/// A persona's folder, relative to the save.
pub(crate) fn persona_dir(name: &str) -> PathBuf {
    Path::new(PERSONAS_DIR).join(name)
}

fn to_json<T: Serialize + ?Sized>(file: &Path, value: &T) -> Result<Vec<u8>, PersistError> {
    let mut bytes = serde_json::to_vec_pretty(value).map_err(|err| PersistError::Invalid {
        file: file.to_owned(),
        field: String::new(),
        message: format!("cannot serialise: {err}"),
    })?;
    bytes.push(b'\n');
    Ok(bytes)
}

/// The files of a save beside `meta.json` and the personas' folders, borrowed.
pub(crate) struct TownFiles<'a> {
    pub settings: &'a AgentSettings,
    pub events: &'a EventsFile,
    pub pending: &'a PendingFile,
    pub groups: &'a GroupsFile,
    pub stages: &'a StagesFile,
    pub sections: &'a BTreeMap<String, Vec<u8>>,
}

/// Every file of a save, paths relative to the save folder, in a fixed order (`meta.json`
/// and then `manifest.json` last, so a partially copied folder lacks them).
pub(crate) fn encode(
    meta: &SaveMeta,
    town: &TownFiles<'_>,
    personas: &[PersonaRef<'_>],
) -> Result<Vec<(PathBuf, Vec<u8>)>, PersistError> {
    let TownFiles {
        settings,
        events,
        pending,
        groups,
        stages,
        sections,
    } = *town;
    let mut files = Vec::new();
    let mut push = |path: PathBuf, bytes: Vec<u8>| files.push((path, bytes));
    push(
        SETTINGS_FILE.into(),
        to_json(Path::new(SETTINGS_FILE), settings)?,
    );
    push(EVENTS_FILE.into(), to_json(Path::new(EVENTS_FILE), events)?);
    push(
        PENDING_FILE.into(),
        to_json(Path::new(PENDING_FILE), pending)?,
    );
    push(GROUPS_FILE.into(), to_json(Path::new(GROUPS_FILE), groups)?);
    push(STAGES_FILE.into(), to_json(Path::new(STAGES_FILE), stages)?);
    for (name, bytes) in sections {
        push(super::sections::section_file(name), bytes.clone());
    }
    for persona in personas {
        check_persona_name(persona.name).map_err(|message| PersistError::Invalid {
            file: META_FILE.into(),
            field: "personas".into(),
            message,
        })?;
        let dir = persona_dir(persona.name);
        let file = |name: &str| dir.join(name);
        push(
            file(SCRATCH_FILE),
            to_json(&file(SCRATCH_FILE), &persona.mind.scratch)?,
        );
        let spatial = persona
            .mind
            .spatial
            .to_json()
            .map_err(|source| PersistError::Memory {
                path: file(SPATIAL_FILE),
                source,
            })?;
        push(file(SPATIAL_FILE), to_json(&file(SPATIAL_FILE), &spatial)?);
        let assoc_dir = dir.join(ASSOCIATIVE_DIR);
        let memory = persona
            .mind
            .associative
            .to_json_strings()
            .map_err(|source| PersistError::Memory {
                path: assoc_dir.clone(),
                source,
            })?;
        for (name, mut text) in [
            (NODES_FILE, memory.nodes),
            (EMBEDDINGS_FILE, memory.embeddings),
            (KW_STRENGTH_FILE, memory.kw_strength),
        ] {
            text.push('\n');
            push(assoc_dir.join(name), text.into_bytes());
        }
        let body = BodyFile {
            tile: persona.body.tile,
            planned_path: persona.body.planned_path.iter().copied().collect(),
            path_set: persona.body.path_set,
            previous_tile: persona.body.previous_tile,
            object_event_at: persona.body.object_event_at.clone(),
            perceived_from: persona.perceived_from,
        };
        push(file(BODY_FILE), to_json(&file(BODY_FILE), &body)?);
        push(
            file(ACTION_FILE),
            to_json(&file(ACTION_FILE), &ActionFile::of(persona.view))?,
        );
        push(file(DIARY_FILE), to_json(&file(DIARY_FILE), persona.diary)?);
        push(
            file(RNG_FILE),
            to_json(&file(RNG_FILE), &RngFile::of(&persona.mind.rng))?,
        );
        push(
            file(DIALOGUE_FILE),
            to_json(&file(DIALOGUE_FILE), persona.dialogue)?,
        );
        push(file(GROUP_FILE), to_json(&file(GROUP_FILE), persona.group)?);
    }
    push(META_FILE.into(), to_json(Path::new(META_FILE), meta)?);
    super::manifest::seal(&mut files)?;
    Ok(files)
}

/// Parses `bytes` as `T`, naming the file and the field path on error.
pub fn parse<T: DeserializeOwned>(file: &Path, bytes: &[u8]) -> Result<T, PersistError> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value: T = serde_path_to_error::deserialize(&mut de).map_err(|err| {
        let field = err.path().to_string();
        let inner = err.into_inner();
        PersistError::Invalid {
            file: file.to_owned(),
            field: if field == "." { String::new() } else { field },
            message: describe_json_error(&inner),
        }
    })?;
    de.end().map_err(|err| PersistError::Invalid {
        file: file.to_owned(),
        field: String::new(),
        message: describe_json_error(&err),
    })?;
    Ok(value)
}

fn describe_json_error(err: &serde_json::Error) -> String {
    if err.is_eof() {
        format!("the file is truncated ({err})")
    } else {
        err.to_string()
    }
}

/// Checks that every top-level field `T::default()` writes is present in `bytes`, for types
/// whose serde attributes would otherwise fill gaps with defaults.
fn require_all_fields<T: Serialize + Default>(
    file: &Path,
    bytes: &[u8],
) -> Result<(), PersistError> {
    let (Ok(serde_json::Value::Object(expected)), Ok(serde_json::Value::Object(found))) = (
        serde_json::to_value(T::default()),
        serde_json::from_slice::<serde_json::Value>(bytes),
    ) else {
        return Ok(());
    };
    match expected.keys().find(|key| !found.contains_key(*key)) {
        Some(missing) => Err(PersistError::Invalid {
            file: file.to_owned(),
            field: missing.clone(),
            message: format!("missing field `{missing}`"),
        }),
        None => Ok(()),
    }
}

/// Reads and validates only `meta.json` of the save at `root`.
pub(crate) fn read_meta(root: &Path) -> Result<SaveMeta, PersistError> {
    let path = root.join(META_FILE);
    let meta: SaveMeta = parse(&path, &read_file(&path)?)?;
    validate_meta(&meta, &path)?;
    Ok(meta)
}

/// Reads and validates the save at `root`, and checks it against its manifest (see
/// `decode_with`).
pub fn decode(root: &Path) -> Result<SaveData, PersistError> {
    decode_with(root, super::SaveIntegrity::Verify)
}

/// Reads and validates the save at `root` (see the [module docs](self)), then — unless
/// `integrity` trusts edits — checks every file the decoding read against `manifest.json`
/// ([`manifest`](super::manifest)): the checksum of the very bytes decoded, so a file the
/// manifest does not list, or one that changed, is refused naming it, whatever system's file it
/// is. Loads nothing on error.
pub fn decode_with(root: &Path, integrity: super::SaveIntegrity) -> Result<SaveData, PersistError> {
    let read = std::cell::RefCell::new(Vec::new());
    let data = decode_from(root, &|path: &Path| {
        let bytes = read_file(path)?;
        let relative = path.strip_prefix(root).unwrap_or(path).to_owned();
        read.borrow_mut()
            .push((relative, super::manifest::checksum(&bytes)));
        Ok(bytes)
    })?;
    if integrity == super::SaveIntegrity::Verify {
        super::manifest::verify(root, &read.into_inner())?;
    }
    Ok(data)
}

/// Decodes a save from files held in memory (paths relative to the save, as
/// [`capture_save`](super::capture_save) makes them).
pub(crate) fn decode_in_memory(files: &[(PathBuf, Vec<u8>)]) -> Result<SaveData, PersistError> {
    let by_path: std::collections::HashMap<&Path, &[u8]> = files
        .iter()
        .map(|(p, b)| (p.as_path(), b.as_slice()))
        .collect();
    decode_from(Path::new(""), &|path: &Path| {
        by_path
            .get(path)
            .map(|b| b.to_vec())
            .ok_or_else(|| PersistError::Invalid {
                file: path.to_owned(),
                field: String::new(),
                message: "missing from the snapshot".into(),
            })
    })
}

/// Reads a file of a save (given its path under `root`).
type ReadFile<'a> = &'a dyn Fn(&Path) -> Result<Vec<u8>, PersistError>;

fn decode_from(root: &Path, read_file: ReadFile<'_>) -> Result<SaveData, PersistError> {
    let read =
        |relative: &Path| -> Result<Vec<u8>, PersistError> { read_file(&root.join(relative)) };
    let file_of = |relative: &Path| root.join(relative);

    let meta_path = Path::new(META_FILE);
    let meta: SaveMeta = parse(&file_of(meta_path), &read(meta_path)?)?;
    validate_meta(&meta, &file_of(meta_path))?;

    let settings_path = Path::new(SETTINGS_FILE);
    let settings_bytes = read(settings_path)?;
    let settings: AgentSettings = parse(&file_of(settings_path), &settings_bytes)?;
    require_all_fields::<AgentSettings>(&file_of(settings_path), &settings_bytes)?;
    let events_path = Path::new(EVENTS_FILE);
    let events: EventsFile = parse(&file_of(events_path), &read(events_path)?)?;
    let pending_path = Path::new(PENDING_FILE);
    let pending: PendingFile = parse(&file_of(pending_path), &read(pending_path)?)?;
    for (i, (from, to)) in pending.chat_intents.iter().enumerate() {
        for (who, name) in [("0", from), ("1", to)] {
            if !meta.personas.contains(name) {
                return Err(PersistError::Invalid {
                    file: file_of(pending_path),
                    field: format!("chat_intents[{i}][{who}]"),
                    message: format!("{name:?} is not a persona of this save"),
                });
            }
        }
    }

    let names: BTreeSet<&str> = meta.personas.iter().map(String::as_str).collect();
    // Version 1 and 2 saves did not keep the group conversations: they load with none open.
    let groups: GroupsFile = if meta.format_version >= 3 {
        let groups_path = Path::new(GROUPS_FILE);
        let groups: GroupsFile = parse(&file_of(groups_path), &read(groups_path)?)?;
        groups
            .check(&names)
            .map_err(|error| group_error(file_of(groups_path), error))?;
        groups
    } else {
        GroupsFile::default()
    };
    // Before version 4 no save kept a stage scene.
    let stages: StagesFile = if meta.format_version >= 4 {
        let stages_path = Path::new(STAGES_FILE);
        let stages: StagesFile = parse(&file_of(stages_path), &read(stages_path)?)?;
        stages
            .check(&names)
            .map_err(|error| PersistError::Invalid {
                file: file_of(stages_path),
                field: error.field,
                message: error.message,
            })?;
        stages
    } else {
        StagesFile::default()
    };
    let mut sections = BTreeMap::new();
    if meta.sections.len() > super::sections::MAX_SECTIONS {
        return Err(PersistError::Invalid {
            file: file_of(meta_path),
            field: "sections".into(),
            message: format!("at most {} sections", super::sections::MAX_SECTIONS),
        });
    }
    for (i, name) in meta.sections.iter().enumerate() {
        if !super::sections::valid_name(name) || sections.contains_key(name) {
            return Err(PersistError::Invalid {
                file: file_of(meta_path),
                field: format!("sections[{i}]"),
                message: "a section's name is 1–32 of a-z, 0-9, _, each once".into(),
            });
        }
        let bytes = read(&super::sections::section_file(name))?;
        sections.insert(name.clone(), bytes);
    }

    let mut personas = Vec::with_capacity(meta.personas.len());
    for name in &meta.personas {
        personas.push(decode_persona(
            root,
            read_file,
            name,
            &names,
            &meta.embedding,
            meta.format_version,
        )?);
    }
    Ok(SaveData {
        meta,
        settings,
        events,
        pending,
        groups,
        stages,
        sections,
        personas,
    })
}

fn validate_meta(meta: &SaveMeta, path: &Path) -> Result<(), PersistError> {
    let invalid = |field: &str, message: String| PersistError::Invalid {
        file: path.to_owned(),
        field: field.to_owned(),
        message,
    };
    if meta.format != FORMAT_NAME {
        return Err(invalid(
            "format",
            format!("expected {FORMAT_NAME:?}, found {:?}", meta.format),
        ));
    }
    if !(OLDEST_FORMAT_VERSION..=FORMAT_VERSION).contains(&meta.format_version) {
        return Err(invalid(
            "format_version",
            format!(
                "this build reads versions {OLDEST_FORMAT_VERSION} to {FORMAT_VERSION}, the save is version {}",
                meta.format_version
            ),
        ));
    }
    if meta.sec_per_step == 0 {
        return Err(invalid("sec_per_step", "must be at least 1".into()));
    }
    let expected = i64::try_from(meta.step)
        .ok()
        .and_then(|s| s.checked_mul(i64::from(meta.sec_per_step)))
        .and_then(|secs| {
            meta.start
                .checked_add_signed(chrono::Duration::seconds(secs))
        });
    if expected != Some(meta.current_time) {
        return Err(invalid(
            "current_time",
            format!(
                "{} is not start + step × sec_per_step ({})",
                meta.current_time,
                expected.map_or_else(|| "out of range".to_owned(), |t| t.to_string())
            ),
        ));
    }
    let mut seen = BTreeSet::new();
    for (i, name) in meta.personas.iter().enumerate() {
        check_persona_name(name).map_err(|m| invalid(&format!("personas[{i}]"), m))?;
        if !seen.insert(name) {
            return Err(invalid(
                &format!("personas[{i}]"),
                format!("{name:?} appears twice"),
            ));
        }
    }
    Ok(())
}

/// A group file's refusal as the save's error, naming the file.
fn group_error(file: PathBuf, error: GroupFileError) -> PersistError {
    PersistError::Invalid {
        file,
        field: error.field,
        message: error.message,
    }
}

fn decode_persona(
    root: &Path,
    read_file: ReadFile<'_>,
    name: &str,
    names: &BTreeSet<&str>,
    embedding: &EmbeddingInfo,
    format_version: u32,
) -> Result<PersonaSave, PersistError> {
    let dir = root.join(persona_dir(name));
    let path = |file: &str| dir.join(file);

    let scratch_bytes = read_file(&path(SCRATCH_FILE))?;
    let scratch: Scratch = parse(&path(SCRATCH_FILE), &scratch_bytes)?;
    require_all_fields::<Scratch>(&path(SCRATCH_FILE), &scratch_bytes)?;
    if scratch.name != name {
        return Err(PersistError::Invalid {
            file: path(SCRATCH_FILE),
            field: "name".into(),
            message: format!("{:?} does not match its folder {name:?}", scratch.name),
        });
    }
    // The identity's free text rides along in every prompt about the persona: bounded here,
    // when the save loads (a model's revisions stay far below; a sheet allows 2,000).
    for (field, text) in [
        ("first_name", &scratch.first_name),
        ("last_name", &scratch.last_name),
        ("innate", &scratch.innate),
        ("learned", &scratch.learned),
        ("currently", &scratch.currently),
        ("lifestyle", &scratch.lifestyle),
        ("daily_plan_req", &scratch.daily_plan_req),
    ] {
        let chars = text.chars().count();
        if chars > MAX_SAVED_TEXT_CHARS {
            return Err(PersistError::Invalid {
                file: path(SCRATCH_FILE),
                field: field.into(),
                message: format!(
                    "{chars} characters; a persona's {field} holds at most {MAX_SAVED_TEXT_CHARS}"
                ),
            });
        }
    }
    // The group conversations left and not thought over yet (SPEC §16): as many and as long as
    // the heart flow ever queues.
    let talks = &scratch.group_after_chats;
    let long = |text: &str| text.chars().count() > MAX_SAVED_TEXT_CHARS;
    let refused = if talks.len() > Scratch::MAX_GROUP_AFTER_CHATS {
        Some(format!(
            "{} conversations; at most {} wait for their after-chat",
            talks.len(),
            Scratch::MAX_GROUP_AFTER_CHATS
        ))
    } else if talks
        .iter()
        .any(|t| t.lines.len() > Scratch::MAX_GROUP_AFTER_CHAT_LINES)
    {
        Some(format!(
            "a conversation of more than {} lines",
            Scratch::MAX_GROUP_AFTER_CHAT_LINES
        ))
    } else if talks.iter().any(|t| {
        long(&t.partner)
            || long(&t.object)
            || t.lines.iter().any(|(who, line)| long(who) || long(line))
    }) {
        Some(format!(
            "a text of more than {MAX_SAVED_TEXT_CHARS} characters"
        ))
    } else {
        None
    };
    if let Some(message) = refused {
        return Err(PersistError::Invalid {
            file: path(SCRATCH_FILE),
            field: "group_after_chats".into(),
            message,
        });
    }
    let spatial_value: serde_json::Value =
        parse(&path(SPATIAL_FILE), &read_file(&path(SPATIAL_FILE))?)?;
    let spatial =
        SpatialMemory::from_json(spatial_value).map_err(|source| PersistError::Memory {
            path: path(SPATIAL_FILE),
            source,
        })?;

    let assoc = dir.join(ASSOCIATIVE_DIR);
    // Parsed here first so a truncated or mistyped document is reported with its path.
    let document = |file: &str| -> Result<serde_json::Value, PersistError> {
        let file_path = assoc.join(file);
        parse(&file_path, &read_file(&file_path)?)
    };
    let json = AssociativeMemoryJson {
        nodes: document(NODES_FILE)?,
        embeddings: document(EMBEDDINGS_FILE)?,
        kw_strength: document(KW_STRENGTH_FILE)?,
    };
    let associative =
        AssociativeMemory::from_json(json).map_err(|source| PersistError::Memory {
            path: assoc.clone(),
            source,
        })?;
    let store = associative.embeddings();
    let model_differs = !store.model().is_empty() && store.model() != embedding.model;
    if !store.is_empty() && (model_differs || store.dim() != embedding.dim) {
        return Err(PersistError::Invalid {
            file: assoc.join(EMBEDDINGS_FILE),
            field: "model".into(),
            message: format!(
                "embedded with {} ({} dimensions) but meta.json says {} ({} dimensions)",
                store.model(),
                store.dim(),
                embedding.model,
                embedding.dim
            ),
        });
    }

    let body: BodyFile = parse(&path(BODY_FILE), &read_file(&path(BODY_FILE))?)?;
    let action: ActionFile = parse(&path(ACTION_FILE), &read_file(&path(ACTION_FILE))?)?;
    let diary: Diary = parse(&path(DIARY_FILE), &read_file(&path(DIARY_FILE))?)?;
    let rng_file: RngFile = parse(&path(RNG_FILE), &read_file(&path(RNG_FILE))?)?;
    // Version 1 saves have no dialogue file: nothing was kept then.
    let dialogue: DialogueFile = if format_version >= 2 {
        let dialogue: DialogueFile =
            parse(&path(DIALOGUE_FILE), &read_file(&path(DIALOGUE_FILE))?)?;
        dialogue
            .check()
            .map_err(|(field, message)| PersistError::Invalid {
                file: path(DIALOGUE_FILE),
                field,
                message,
            })?;
        dialogue
    } else {
        DialogueFile::default()
    };
    let group: GroupFile = if format_version >= 3 {
        let group: GroupFile = parse(&path(GROUP_FILE), &read_file(&path(GROUP_FILE))?)?;
        group
            .check(names, embedding.dim)
            .map_err(|error| group_error(path(GROUP_FILE), error))?;
        group
    } else {
        GroupFile::default()
    };
    let rng = rng_file
        .to_rng()
        .map_err(|(field, message)| PersistError::Invalid {
            file: path(RNG_FILE),
            field: field.into(),
            message,
        })?;

    Ok(PersonaSave {
        name: name.to_owned(),
        mind: MindState {
            scratch,
            associative,
            spatial,
            rng,
        },
        body: Body {
            tile: body.tile,
            planned_path: body.planned_path.into_iter().collect(),
            path_set: body.path_set,
            previous_tile: body.previous_tile,
            object_event_at: body.object_event_at,
        },
        view: action.into_view(),
        diary,
        perceived_from: body.perceived_from,
        dialogue,
        group,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::RngCore;

    #[test]
    fn rng_round_trips_mid_block() {
        let mut rng = ChaCha8Rng::seed_from_u64(42);
        rng.set_stream(7);
        for _ in 0..5 {
            rng.next_u32();
        }
        let file = RngFile::of(&rng);
        let json = serde_json::to_string(&file).expect("json");
        let back: RngFile = serde_json::from_str(&json).expect("parse");
        let mut restored = back.to_rng().expect("rng");
        assert_eq!(restored, rng);
        let expected: Vec<u64> = (0..20).map(|_| rng.next_u64()).collect();
        let got: Vec<u64> = (0..20).map(|_| restored.next_u64()).collect();
        assert_eq!(got, expected);
    }

    #[test]
    fn bad_rng_fields_are_named() {
        let good = RngFile::of(&ChaCha8Rng::seed_from_u64(1));
        let short = RngFile {
            seed: "ab".into(),
            ..good.clone()
        };
        assert_eq!(short.to_rng().expect_err("short").0, "seed");
        let hex = RngFile {
            seed: "zz".repeat(32),
            ..good.clone()
        };
        assert_eq!(hex.to_rng().expect_err("hex").0, "seed");
        let pos = RngFile {
            word_pos: "-1".into(),
            ..good
        };
        assert_eq!(pos.to_rng().expect_err("pos").0, "word_pos");
    }

    #[test]
    fn parse_errors_name_the_field_path() {
        let file = Path::new("p/body.json");
        let text = r#"{"tile":[1,2],"planned_path":[[1,2],["x",3]],"path_set":true,
            "previous_tile":[1,2],"object_event_at":null,"perceived_from":null}"#;
        let err = parse::<BodyFile>(file, text.as_bytes()).expect_err("bad tile");
        let message = err.to_string();
        assert!(message.contains("p/body.json"), "{message}");
        assert!(message.contains("planned_path[1]"), "{message}");

        let truncated = &text[..25];
        let err = parse::<BodyFile>(file, truncated.as_bytes()).expect_err("truncated");
        assert!(err.to_string().contains("truncated"), "{err}");

        let missing = r#"{"tile":[1,2]}"#;
        let err = parse::<BodyFile>(file, missing.as_bytes()).expect_err("missing");
        assert!(err.to_string().contains("planned_path"), "{err}");

        let trailing = format!("{text} x");
        assert!(parse::<BodyFile>(file, trailing.as_bytes()).is_err());
    }

    #[test]
    fn action_addresses_are_saved_as_text() {
        let file = Path::new("action.json");
        let view = ActionView {
            address: ActionAddress::parse("<waiting> 3 -4").ok(),
            ..Default::default()
        };
        let text = serde_json::to_string(&ActionFile::of(&view)).expect("json");
        assert!(text.contains(r#""address":"<waiting> 3 -4""#), "{text}");
        let back = parse::<ActionFile>(file, text.as_bytes()).expect("parse");
        assert_eq!(back.into_view(), view);

        let none = serde_json::to_string(&ActionFile::of(&ActionView::default())).expect("json");
        let empty = r#""address":"""#;
        assert!(none.contains(empty), "{none}");
        let back = parse::<ActionFile>(file, none.as_bytes()).expect("parse");
        assert_eq!(back.address, None);

        let bad = none.replace(empty, r#""address":"<waiting> x""#);
        let err = parse::<ActionFile>(file, bad.as_bytes()).expect_err("bad address");
        let message = err.to_string();
        assert!(
            message.contains("address") && message.contains("<waiting>"),
            "{message}"
        );
    }

    #[test]
    fn scratch_must_have_every_field() {
        let mut value = serde_json::to_value(Scratch::default()).expect("value");
        if let serde_json::Value::Object(map) = &mut value {
            map.remove("act_address");
        }
        let bytes = serde_json::to_vec(&value).expect("bytes");
        let err = require_all_fields::<Scratch>(Path::new("s.json"), &bytes).expect_err("gap");
        assert!(err.to_string().contains("act_address"), "{err}");
        let full = serde_json::to_vec(&Scratch::default()).expect("bytes");
        assert!(require_all_fields::<Scratch>(Path::new("s.json"), &full).is_ok());
    }

    #[test]
    fn meta_without_prompts_still_reads_and_with_them_round_trips() {
        let mut meta = serde_json::json!({
            "format": FORMAT_NAME, "format_version": FORMAT_VERSION, "crate_version": "0.1.0",
            "saved_at_unix": 0, "seed": 1, "step": 0, "start": "2023-02-13T00:00:00",
            "current_time": "2023-02-13T00:00:00", "sec_per_step": 10, "time_mode": "lockstep",
            "map": "m.tmx", "world": "w", "personas": [], "embedding": {"model": "e", "dim": 0},
            "forked_from": null
        });
        let old: SaveMeta = serde_json::from_value(meta.clone()).expect("a save without prompts");
        assert_eq!(old.prompts, None);
        meta["prompts"] = serde_json::json!({
            "version": "v1",
            "overrides": [{"file": "wake_up_hour.txt", "sha256": "ab"}]
        });
        let new: SaveMeta = serde_json::from_value(meta.clone()).expect("a save with prompts");
        assert_eq!(
            new.prompts.as_ref().map(|p| p.overrides[0].file.as_str()),
            Some("wake_up_hour.txt")
        );
        assert_eq!(serde_json::to_value(&new).expect("json"), meta);
    }

    #[test]
    fn persona_names_must_be_folder_names() {
        assert!(check_persona_name("Ada Okafor").is_ok());
        for bad in [
            "",
            "  ",
            "../x",
            "a/b",
            ".hidden",
            "c:d",
            "tab\there",
            "new\nline",
        ] {
            assert!(check_persona_name(bad).is_err(), "{bad:?}");
        }
        assert!(check_persona_name(&"é".repeat(127)).is_ok(), "254 bytes");
        let long = "x/".repeat(1 << 19);
        let err = check_persona_name(&long).expect_err("a megabyte");
        assert!(err.contains("1048576 bytes") && err.len() < 300, "{err}");
    }
}
