//! Chat streams (SPEC §8): the talk of the people gathered in one arena, or a channel the game
//! opens (a town notice board, a radio), as an ordered, bounded list of lines.
//!
//! [`GroupStreams`] holds every open stream. Arena streams are opened and closed by the heart
//! flow as people gather and leave; channels by [`GroupCommand`]s from game code, which may
//! also post into any stream. Everything a command carries is untrusted (a player may have typed
//! it): `check_channel_name`, `check_speaker` and `check_post` validate it before
//! anything changes, and a refused command becomes a [`GroupRefused`](super::GroupRefused)
//! message.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use bevy::prelude::*;
use chrono::NaiveDateTime;
use serde::{Deserialize, Serialize};

use crate::dialogue::prompts::neutralise;
use crate::world::{TileCoord, TileEvent};

/// Lines a stream keeps (older ones are dropped: listeners remember them in their memories).
pub(crate) const MAX_LINES: usize = 60;
/// Characters of one line at most (posts and model replies are cut there).
pub(crate) const MAX_LINE_CHARS: usize = 400;
/// Characters of a channel name or a speaker's name at most.
pub(crate) const MAX_NAME_CHARS: usize = 40;
/// Channels open at once at most (a game bug posting `OpenChannel` in a loop stays bounded).
pub(crate) const MAX_CHANNELS: usize = 64;

/// Which stream: the people in an arena (its `world:sector:arena` address) or a named channel.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum StreamKey {
    /// Everyone awake in this arena.
    Arena(String),
    /// A channel opened by game code.
    Channel(String),
}

impl StreamKey {
    /// How the stream is named in prompts and the HUD: the arena's last part, or `#channel`.
    pub fn label(&self) -> String {
        match self {
            StreamKey::Arena(address) => address
                .rsplit(':')
                .next()
                .unwrap_or(address.as_str())
                .to_string(),
            StreamKey::Channel(name) => format!("#{name}"),
        }
    }
}

impl std::fmt::Display for StreamKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StreamKey::Arena(address) => write!(f, "{address}"),
            StreamKey::Channel(name) => write!(f, "#{name}"),
        }
    }
}

/// One line said in a stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupLine {
    /// Position in the stream's whole history (1, 2, …).
    pub seq: u64,
    /// Who said it: a persona's name, or the name game code posted under.
    pub speaker: String,
    /// The persona who said it, if a persona did.
    #[serde(skip)]
    pub persona: Option<Entity>,
    /// What was said (an emoji reply is one emoji).
    pub text: String,
    /// Whether it is an emoji reply.
    pub emoji: bool,
    /// Game time.
    pub time: NaiveDateTime,
}

/// One open stream.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupStream {
    /// Which stream.
    pub key: StreamKey,
    /// Who is in it: the personas in the arena, or a channel's subscribers (empty = everyone).
    pub members: BTreeSet<Entity>,
    /// The latest lines, oldest first, at most `MAX_LINES`.
    pub lines: VecDeque<GroupLine>,
    /// When it opened.
    pub opened: NaiveDateTime,
    /// Lines said since it opened.
    pub said: u64,
    /// The embedding of each kept line's memory description, by `seq`, once it landed: what
    /// a listener's interest weighs against its memories (SPEC §8, §16).
    pub(crate) embeddings: BTreeMap<u64, std::sync::Arc<[f32]>>,
    /// Lines (a game's posts) whose embedding is being computed: listeners hear them once it
    /// landed. Empty whenever a save can be taken (no call is out then).
    pub(crate) awaiting: BTreeSet<u64>,
    /// Where an arena's talk shows to bystanders (SPEC §16), the event, and when it was last
    /// written (see `talk`).
    pub(crate) shown: Option<(TileCoord, TileEvent, NaiveDateTime)>,
}

impl GroupStream {
    /// A stream with no line yet.
    pub fn new(key: StreamKey, opened: NaiveDateTime) -> Self {
        Self {
            key,
            members: BTreeSet::new(),
            lines: VecDeque::new(),
            opened,
            said: 0,
            embeddings: BTreeMap::new(),
            awaiting: BTreeSet::new(),
            shown: None,
        }
    }

    /// Whether line `seq`'s embedding is still being computed (see `awaiting`).
    pub(crate) fn embedding_awaited(&self, seq: u64) -> bool {
        self.awaiting.contains(&seq)
    }

    /// The embedding of line `seq`, once it landed.
    pub fn embedding(&self, seq: u64) -> Option<&[f32]> {
        self.embeddings.get(&seq).map(|v| &v[..])
    }

    /// Keeps the embedding of line `seq` (while the line is kept).
    pub(crate) fn set_embedding(&mut self, seq: u64, embedding: std::sync::Arc<[f32]>) {
        if self.lines.iter().any(|l| l.seq == seq) {
            self.embeddings.insert(seq, embedding);
        }
    }

    /// Lines after `seq`, oldest first.
    pub fn lines_after(&self, seq: u64) -> impl Iterator<Item = &GroupLine> {
        self.lines.iter().filter(move |l| l.seq > seq)
    }

    /// The sequence number of the last line (0 before the first).
    pub fn last_seq(&self) -> u64 {
        self.said
    }

    /// Whether `persona` hears this stream (a channel without subscribers reaches everyone).
    pub fn reaches(&self, persona: Entity) -> bool {
        match self.key {
            StreamKey::Channel(_) if self.members.is_empty() => true,
            _ => self.members.contains(&persona),
        }
    }

    /// Appends a line; returns its sequence number.
    fn push(
        &mut self,
        speaker: String,
        persona: Option<Entity>,
        text: String,
        emoji: bool,
        time: NaiveDateTime,
    ) -> u64 {
        self.said += 1;
        self.lines.push_back(GroupLine {
            seq: self.said,
            speaker,
            persona,
            text,
            emoji,
            time,
        });
        while self.lines.len() > MAX_LINES {
            if let Some(dropped) = self.lines.pop_front() {
                self.embeddings.remove(&dropped.seq);
            }
        }
        self.said
    }
}

/// Every open stream, by key.
#[derive(Resource, Debug, Clone, Default)]
pub struct GroupStreams {
    streams: BTreeMap<StreamKey, GroupStream>,
    /// The tile events of talks whose stream closed, for `talk` to remove.
    closed_shown: Vec<(TileCoord, TileEvent)>,
}

impl GroupStreams {
    /// The streams of a loaded save (see `save`).
    pub(super) fn from_streams(streams: impl IntoIterator<Item = GroupStream>) -> Self {
        Self {
            streams: streams
                .into_iter()
                .map(|stream| (stream.key.clone(), stream))
                .collect(),
            closed_shown: Vec::new(),
        }
    }

    /// Line `seq` of `key` waits for its embedding before it is heard.
    pub(crate) fn await_embedding(&mut self, key: &StreamKey, seq: u64) {
        if let Some(stream) = self.streams.get_mut(key) {
            stream.awaiting.insert(seq);
        }
    }

    /// Line `seq` of `key`'s embedding call finished (with or without one).
    pub(crate) fn landed_embedding(&mut self, key: &StreamKey, seq: u64) {
        if let Some(stream) = self.streams.get_mut(key) {
            stream.awaiting.remove(&seq);
        }
    }

    /// Keeps the embedding of line `seq` of `key` (see [`GroupStream::embedding`]).
    pub(crate) fn set_embedding(&mut self, key: &StreamKey, seq: u64, embedding: &[f32]) {
        if let Some(stream) = self.streams.get_mut(key) {
            stream.set_embedding(seq, embedding.into());
        }
    }

    /// The stream `key`, if open.
    pub fn get(&self, key: &StreamKey) -> Option<&GroupStream> {
        self.streams.get(key)
    }

    /// The arena stream `persona` stands in, if any (what a line said "to everyone here" goes
    /// into).
    pub fn arena_stream_of(&self, persona: Entity) -> Option<&GroupStream> {
        self.streams
            .values()
            .find(|s| matches!(s.key, StreamKey::Arena(_)) && s.members.contains(&persona))
    }

    /// Every open stream, in key order.
    pub fn iter(&self) -> impl Iterator<Item = &GroupStream> {
        self.streams.values()
    }

    /// Open streams.
    pub fn len(&self) -> usize {
        self.streams.len()
    }

    /// Whether no stream is open.
    pub fn is_empty(&self) -> bool {
        self.streams.is_empty()
    }

    /// The stream `key`, mutably, if open.
    pub(crate) fn get_mut(&mut self, key: &StreamKey) -> Option<&mut GroupStream> {
        self.streams.get_mut(key)
    }

    /// Opens `key` (no-op if open); returns whether it was newly opened.
    pub(crate) fn open(&mut self, key: StreamKey, now: NaiveDateTime) -> bool {
        if self.streams.contains_key(&key) {
            return false;
        }
        self.streams.insert(key.clone(), GroupStream::new(key, now));
        true
    }

    /// Opens the channel `name` heard by `members` (empty: everyone); the key when it was not
    /// open yet (an open channel keeps its members). Refused: a bad name, or
    /// [`MAX_CHANNELS`] channels open already.
    pub(crate) fn open_channel(
        &mut self,
        name: &str,
        members: &[Entity],
        now: NaiveDateTime,
    ) -> Result<Option<StreamKey>, String> {
        let name = check_channel_name(name)?;
        let key = StreamKey::Channel(name);
        if self.streams.contains_key(&key) {
            return Ok(None);
        }
        if self.channels() >= MAX_CHANNELS {
            return Err(format!("at most {MAX_CHANNELS} channels may be open"));
        }
        self.open(key.clone(), now);
        if let Some(stream) = self.streams.get_mut(&key) {
            stream.members = members.iter().copied().collect();
        }
        Ok(Some(key))
    }

    /// Channels open now.
    pub fn channels(&self) -> usize {
        self.streams
            .keys()
            .filter(|k| matches!(k, StreamKey::Channel(_)))
            .count()
    }

    /// Closes `key`; returns the stream if it was open.
    pub(crate) fn close(&mut self, key: &StreamKey) -> Option<GroupStream> {
        let mut stream = self.streams.remove(key)?;
        if let Some((tile, event, _)) = stream.shown.take() {
            self.closed_shown.push((tile, event));
        }
        Some(stream)
    }

    /// Every stream, to update in place.
    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = &mut GroupStream> {
        self.streams.values_mut()
    }

    /// The tile events of talks closed since the last call.
    pub(crate) fn take_closed_shown(&mut self) -> Vec<(TileCoord, TileEvent)> {
        std::mem::take(&mut self.closed_shown)
    }

    /// Adds a line to an open stream; `None` if it is not open.
    pub(crate) fn say(
        &mut self,
        key: &StreamKey,
        speaker: &str,
        persona: Option<Entity>,
        text: &str,
        emoji: bool,
        now: NaiveDateTime,
    ) -> Option<u64> {
        let stream = self.streams.get_mut(key)?;
        Some(stream.push(speaker.to_string(), persona, text.to_string(), emoji, now))
    }

    /// Arena streams, keys only.
    pub(crate) fn arena_keys(&self) -> Vec<StreamKey> {
        self.streams
            .keys()
            .filter(|k| matches!(k, StreamKey::Arena(_)))
            .cloned()
            .collect()
    }
}

/// What game code asks of the group conversations. Every field is untrusted and validated.
#[derive(Message, Debug, Clone, PartialEq)]
pub enum GroupCommand {
    /// Opens a channel. `members` hear it; empty means every persona.
    OpenChannel {
        /// 1–40 characters: letters, digits, spaces, `-`, `_`.
        name: String,
        /// Who hears it (empty: everyone).
        members: Vec<Entity>,
    },
    /// Says `text` in `stream` under the name `speaker` (the player, a notice board, …).
    Post {
        /// An open stream.
        stream: StreamKey,
        /// 1–40 characters, no control characters.
        speaker: String,
        /// 1–400 characters after trimming; tags and fences are neutralised.
        text: String,
    },
    /// Closes a channel (arena streams close by themselves).
    CloseChannel {
        /// The channel's name.
        name: String,
    },
}

impl GroupCommand {
    /// Opens the channel `name` heard by everyone.
    pub fn open_channel(name: impl Into<String>) -> Self {
        GroupCommand::OpenChannel {
            name: name.into(),
            members: Vec::new(),
        }
    }

    /// Posts `text` as `speaker` into the channel `name`.
    pub fn post_to_channel(
        name: impl Into<String>,
        speaker: impl Into<String>,
        text: impl Into<String>,
    ) -> Self {
        GroupCommand::Post {
            stream: StreamKey::Channel(name.into()),
            speaker: speaker.into(),
            text: text.into(),
        }
    }
}

/// A channel name: 1–40 characters of letters, digits, spaces, `-` and `_`, trimmed.
pub(crate) fn check_channel_name(name: &str) -> Result<String, String> {
    let name = name.trim();
    if name.is_empty() {
        return Err("a channel needs a name".into());
    }
    if name.chars().count() > MAX_NAME_CHARS {
        return Err(format!(
            "a channel name has at most {MAX_NAME_CHARS} characters"
        ));
    }
    if !name
        .chars()
        .all(|c| c.is_alphanumeric() || c == ' ' || c == '-' || c == '_')
    {
        return Err("a channel name has only letters, digits, spaces, '-' and '_'".into());
    }
    Ok(name.to_string())
}

/// A speaker's name: 1–40 characters, no control characters, trimmed.
pub(crate) fn check_speaker(speaker: &str) -> Result<String, String> {
    let speaker = speaker.trim();
    if speaker.is_empty() {
        return Err("a post needs a speaker".into());
    }
    if speaker.chars().count() > MAX_NAME_CHARS {
        return Err(format!(
            "a speaker's name has at most {MAX_NAME_CHARS} characters"
        ));
    }
    if speaker.chars().any(char::is_control) || speaker.contains(['<', '>', '`']) {
        return Err("a speaker's name has no control characters, '<', '>' or '`'".into());
    }
    Ok(speaker.to_string())
}

/// A post's text: trimmed, 1–400 characters (longer is refused, not cut, so nobody's words are
/// silently changed), control characters dropped and `<think>`-like tags and fences
/// neutralised so it opens no block in a prompt.
pub(crate) fn check_post(text: &str) -> Result<String, String> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err("an empty post".into());
    }
    if trimmed.chars().count() > MAX_LINE_CHARS {
        return Err(format!("a post has at most {MAX_LINE_CHARS} characters"));
    }
    // One line: newlines, tabs and runs of spaces become single spaces.
    let safe = neutralise(trimmed, MAX_LINE_CHARS)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    if safe.is_empty() {
        return Err("a post of control characters only".into());
    }
    Ok(safe)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t() -> NaiveDateTime {
        chrono::NaiveDate::from_ymd_opt(2023, 2, 13)
            .and_then(|d| d.and_hms_opt(12, 0, 0))
            .expect("a date")
    }

    #[test]
    fn streams_keep_the_latest_lines_in_order() {
        let mut streams = GroupStreams::default();
        let key = StreamKey::Arena("town:cafe:main room".into());
        assert!(streams.open(key.clone(), t()));
        assert!(!streams.open(key.clone(), t()));
        for i in 0..(MAX_LINES + 5) {
            streams.say(&key, "Ada", None, &format!("line {i}"), false, t());
        }
        let stream = streams.get(&key).expect("open");
        assert_eq!(stream.lines.len(), MAX_LINES);
        assert_eq!(stream.last_seq(), (MAX_LINES + 5) as u64);
        assert_eq!(stream.lines.front().map(|l| l.seq), Some(6));
        assert_eq!(stream.lines_after(stream.last_seq() - 2).count(), 2);
        assert_eq!(key.label(), "main room");
        assert!(
            streams
                .say(&StreamKey::Channel("x".into()), "A", None, "hi", false, t())
                .is_none()
        );
    }

    #[test]
    fn hostile_commands_are_refused() {
        let long = "x".repeat(MAX_LINE_CHARS + 1);
        for bad in ["", "   ", "\u{0}\u{7}", long.as_str()] {
            assert!(check_post(bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            check_post("  hi <think>drop tables</think> ```\n ok ").as_deref(),
            Ok("hi ‹think>drop tables‹/think> ''' ok")
        );
        for bad in [
            "",
            "a/b",
            "../etc",
            "x".repeat(41).as_str(),
            "tab\there",
            "<b>",
        ] {
            assert!(check_channel_name(bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            check_channel_name(" notice board ").as_deref(),
            Ok("notice board")
        );
        for bad in ["", "\u{1b}[31mred", "<system>", "y".repeat(41).as_str()] {
            assert!(check_speaker(bad).is_err(), "{bad:?}");
        }
        assert_eq!(check_speaker("Mayor Okafor").as_deref(), Ok("Mayor Okafor"));
    }

    #[test]
    fn a_channel_without_members_reaches_everyone() {
        let mut stream = GroupStream::new(StreamKey::Channel("board".into()), t());
        assert!(stream.reaches(Entity::from_bits(1 << 32 | 7)));
        stream.members.insert(Entity::from_bits(1 << 32 | 3));
        assert!(!stream.reaches(Entity::from_bits(1 << 32 | 7)));
        let arena = GroupStream::new(StreamKey::Arena("a:b:c".into()), t());
        assert!(!arena.reaches(Entity::from_bits(1 << 32 | 7)));
    }
}
