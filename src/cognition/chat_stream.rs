//! Conversations as they are spoken: the [`ChatStream`] of a running conversation (SPEC §3.7,
//! §6 "dialogue bubbles … typewriter when streaming").
//!
//! A conversation is generated off the main thread, turn by turn, and lands in the ECS only when
//! it is over ([`ActionView::chat`](crate::persona::ActionView)). When something is watching —
//! [`ChatStreamSettings::enabled`], which the game turns on; off by default, so headless runs
//! pay nothing and stay byte-identical — the conversation task also reports the lines as they
//! are spoken:
//!
//! 1. `open_chat_stream` makes a **bounded** channel for one conversation: its
//!    `ChatStreamSink` goes into the task, its [`ChatStreamFeed`] onto the initiator next to
//!    the task.
//! 2. Each utterance is asked for with `run_prompt_watched`
//!    and an `UtteranceWatcher`: the model's deltas are accumulated, the partial value of the
//!    JSON answer's `"utterance"` string is read out of the partial text ([`partial_utterance`],
//!    a pure function of the text so far, so how the deltas are cut does not matter) and sent as
//!    a `ChatStreamUpdate::Partial` — with `try_send`: a full channel drops it, and the next
//!    one, which carries the whole partial line again, supersedes it.
//! 3. When the prompt framework has parsed and validated the line (retries and fail-safe as
//!    always), the task sends `ChatStreamUpdate::Finished` with the line that counts; this
//!    one waits for room, so no finished line is lost.
//! 4. `drain_chat_streams` (in [`SimPoll`], after the thoughts are collected) empties every
//!    feed each frame into a [`ChatStream`] component on the persona speaking (or who spoke
//!    last): speaker, listener, the lines finished so far and the partial line. When the
//!    initiator no longer carries the conversation task — it landed as the chat action, or it
//!    was dropped, which cancels it — the feed and the stream go in the same pass, so no stale
//!    partial line is left behind and the landed chat takes over in the same frame.
//!
//! Streaming is display only: a partial line may still be rejected by the parser, and the
//! finished lines (and the chat that lands) are the validated ones.

use std::collections::HashMap;

use bevy::prelude::*;

use crate::clock::{PollSystems, SimPoll};
use crate::prompt::clean::{Bracket, matching_close};
use crate::prompt::{AnswerWatcher, clean_response};

use super::prompts::NextUtterance;
use super::vocabulary::Conversing;

/// The default capacity of a conversation's channel to the ECS.
pub(crate) const DEFAULT_CHAT_STREAM_CAPACITY: usize = 64;

/// The most bytes of one answer read for the partial line: an utterance is a couple of hundred
/// tokens, and re-reading the text on every delta must stay cheap whatever a model sends.
pub(crate) const MAX_WATCHED_BYTES: usize = 16 * 1024;

/// At most this many `{` are tried as the start of the answer's JSON object.
const MAX_OBJECT_CANDIDATES: usize = 16;

/// At most this many updates are taken from one feed per drain.
const MAX_UPDATES_PER_DRAIN: usize = 1024;

/// Whether conversations are streamed to the ECS as they are spoken.
#[derive(Resource, Reflect, Debug, Clone, PartialEq)]
#[reflect(Resource, Debug, Default)]
pub struct ChatStreamSettings {
    /// Stream utterances into [`ChatStream`] components (default `false`: nobody is watching,
    /// and the model is called exactly as without streaming).
    pub enabled: bool,
    /// Capacity of each conversation's bounded channel (default
    /// `DEFAULT_CHAT_STREAM_CAPACITY`, at least 1).
    pub capacity: usize,
}

impl Default for ChatStreamSettings {
    fn default() -> Self {
        Self {
            enabled: false,
            capacity: DEFAULT_CHAT_STREAM_CAPACITY,
        }
    }
}

impl ChatStreamSettings {
    /// Settings with streaming on.
    pub fn watching() -> Self {
        Self {
            enabled: true,
            ..Default::default()
        }
    }
}

/// Which side of a conversation speaks.
#[derive(Reflect, Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ChatSide {
    /// The persona who started the conversation (speaks first).
    Initiator,
    /// The persona spoken to.
    Partner,
}

/// What a conversation task tells the ECS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ChatStreamUpdate {
    /// Line number `line` (0-based) is being spoken by `side`; `text` is all of it received so
    /// far (not a delta, so a dropped update is superseded by the next).
    Partial {
        /// The line's number in the conversation.
        line: usize,
        /// Who speaks it.
        side: ChatSide,
        /// The line so far, as it will be displayed.
        text: String,
    },
    /// Line number `line` is final: the validated utterance.
    Finished {
        /// The line's number in the conversation.
        line: usize,
        /// Who spoke it.
        side: ChatSide,
        /// The speaker's name.
        speaker: String,
        /// The line.
        text: String,
    },
}

/// The conversation task's end of a chat stream. Cheap to clone.
#[derive(Debug, Clone)]
pub(crate) struct ChatStreamSink {
    sender: async_channel::Sender<ChatStreamUpdate>,
}

impl ChatStreamSink {
    /// A watcher for the answer to line number `line`, spoken by `side` (named `speaker`).
    pub(crate) fn watch_line(
        &self,
        line: usize,
        side: ChatSide,
        speaker: &str,
    ) -> UtteranceWatcher {
        UtteranceWatcher {
            sender: self.sender.clone(),
            line,
            side,
            speaker: speaker.to_string(),
            raw: String::new(),
            shown: String::new(),
        }
    }

    /// Reports line number `line` as final. Waits for room in the channel (the ECS drains it
    /// every frame); returns at once when nobody watches any more.
    pub(crate) async fn line_finished(
        &self,
        line: usize,
        side: ChatSide,
        speaker: &str,
        text: &str,
    ) {
        // A closed channel only means the conversation is no longer watched.
        let _ = self
            .sender
            .send(ChatStreamUpdate::Finished {
                line,
                side,
                speaker: speaker.to_string(),
                text: text.to_string(),
            })
            .await;
    }
}

/// Watches the model's answer to one utterance and sends the partial line when it grows
/// (see the module docs). Implements [`AnswerWatcher`].
#[derive(Debug)]
pub(crate) struct UtteranceWatcher {
    sender: async_channel::Sender<ChatStreamUpdate>,
    line: usize,
    side: ChatSide,
    speaker: String,
    /// The current attempt's text (at most [`MAX_WATCHED_BYTES`]).
    raw: String,
    /// The partial line the ECS was last sent.
    shown: String,
}

impl UtteranceWatcher {
    /// The partial line of the text received so far, as it is displayed.
    pub fn partial(&self) -> String {
        partial_utterance(&self.raw)
            .map(|line| display_line(&line, &self.speaker))
            .unwrap_or_default()
    }

    fn publish(&mut self) {
        let text = self.partial();
        if text == self.shown {
            return;
        }
        let update = ChatStreamUpdate::Partial {
            line: self.line,
            side: self.side,
            text: text.clone(),
        };
        // Full: this one is dropped and the next delta sends the whole line again. Closed:
        // nobody watches.
        if self.sender.try_send(update).is_ok() {
            self.shown = text;
        }
    }
}

impl AnswerWatcher for UtteranceWatcher {
    fn attempt_started(&mut self, _attempt: u32) {
        // A retry starts from nothing: what the rejected answer showed is void.
        self.raw.clear();
        self.publish();
    }

    fn delta(&mut self, text: &str) {
        let room = MAX_WATCHED_BYTES.saturating_sub(self.raw.len());
        if room == 0 {
            return;
        }
        self.raw.push_str(truncate_bytes(text, room));
        self.publish();
    }
}

/// The longest prefix of `text` of at most `max` bytes that ends on a character boundary.
fn truncate_bytes(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// A conversation's stream as received so far. Pure; [`ChatStreamState::apply`] is the whole
/// state machine:
/// - it starts with the initiator about to speak and nothing said;
/// - a [`ChatStreamUpdate::Partial`] for the next line makes its side the speaker and sets the
///   partial line (an empty one after a rejected attempt);
/// - a [`ChatStreamUpdate::Finished`] for the next line appends it; its speaker stays the
///   speaker, with no partial line, until the other side starts;
/// - updates for lines already finished are stale and ignored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ChatStreamState {
    /// The finished lines, `(speaker, line)`.
    pub lines: Vec<(String, String)>,
    /// Who speaks (or spoke last).
    pub speaking: ChatSide,
    /// The line being spoken, as received so far.
    pub partial: String,
}

impl Default for ChatStreamState {
    fn default() -> Self {
        Self {
            lines: Vec::new(),
            speaking: ChatSide::Initiator,
            partial: String::new(),
        }
    }
}

impl ChatStreamState {
    /// Applies one update (see the type's docs).
    pub fn apply(&mut self, update: ChatStreamUpdate) {
        match update {
            ChatStreamUpdate::Partial { line, side, text } => {
                if line < self.lines.len() {
                    return;
                }
                self.speaking = side;
                self.partial = text;
            }
            ChatStreamUpdate::Finished {
                line,
                side,
                speaker,
                text,
            } => {
                if line < self.lines.len() {
                    return;
                }
                self.lines.push((speaker, text));
                self.speaking = side;
                self.partial.clear();
            }
        }
    }
}

/// The ECS end of a conversation's stream, on the initiator next to its conversation task.
/// Removed by `drain_chat_streams` when the task is gone.
#[derive(Component, Debug)]
pub struct ChatStreamFeed {
    receiver: async_channel::Receiver<ChatStreamUpdate>,
    initiator: Entity,
    partner: Entity,
    state: ChatStreamState,
}

impl ChatStreamFeed {
    /// Takes what the task sent since the last drain.
    fn drain(&mut self) {
        for _ in 0..MAX_UPDATES_PER_DRAIN {
            let Ok(update) = self.receiver.try_recv() else {
                break;
            };
            self.state.apply(update);
        }
    }

    /// The stream component as it should be now, on the speaker.
    fn stream(&self) -> ChatStream {
        let (speaker, listener) = match self.state.speaking {
            ChatSide::Initiator => (self.initiator, self.partner),
            ChatSide::Partner => (self.partner, self.initiator),
        };
        ChatStream {
            speaker,
            listener,
            lines: self.state.lines.clone(),
            partial: self.state.partial.clone(),
        }
    }
}

/// Opens the stream of a conversation between `initiator` and `partner`, or `None` when
/// nobody is watching ([`ChatStreamSettings::enabled`] is off).
pub(crate) fn open_chat_stream(
    settings: Option<&ChatStreamSettings>,
    initiator: Entity,
    partner: Entity,
) -> Option<(ChatStreamSink, ChatStreamFeed)> {
    let settings = settings.filter(|s| s.enabled)?;
    let (sender, receiver) = async_channel::bounded(settings.capacity.max(1));
    Some((
        ChatStreamSink { sender },
        ChatStreamFeed {
            receiver,
            initiator,
            partner,
            state: ChatStreamState::default(),
        },
    ))
}

/// A conversation being spoken, on the persona speaking (or who spoke last, while the other
/// prepares an answer). Present from the start of a streamed conversation until it lands as
/// the chat action or is cancelled (see the module docs).
#[derive(Component, Reflect, Debug, Clone, PartialEq, Eq)]
#[reflect(Component, Debug)]
pub struct ChatStream {
    /// The persona speaking (the entity this is on).
    pub speaker: Entity,
    /// The persona spoken to; the persona itself when it answers someone who is no persona
    /// (the player, through [`dialogue`](crate::dialogue) — which owns such a stream).
    pub listener: Entity,
    /// The lines finished so far, `(speaker, line)` (validated: these are what the chat will
    /// hold).
    pub lines: Vec<(String, String)>,
    /// The line being spoken, as received so far; empty between lines.
    pub partial: String,
}

impl ChatStream {
    /// Whether `entity` takes part in this conversation.
    pub fn involves(&self, entity: Entity) -> bool {
        self.speaker == entity || self.listener == entity
    }
}

/// Moves what every running conversation sent into its [`ChatStream`], and clears the feed and
/// the stream of conversations that are over (landed or cancelled). Runs in [`SimPoll`] after
/// the thoughts are collected, so a landing chat and its stream's end are seen together.
pub(crate) fn drain_chat_streams(
    mut commands: Commands,
    mut feeds: Query<(Entity, &mut ChatStreamFeed, Has<Conversing>)>,
    mut streams: Query<(Entity, &mut ChatStream)>,
) {
    let mut wanted: HashMap<Entity, ChatStream> = HashMap::new();
    for (entity, mut feed, conversing) in &mut feeds {
        if !conversing {
            commands.entity(entity).remove::<ChatStreamFeed>();
            continue;
        }
        feed.drain();
        let stream = feed.stream();
        wanted.insert(stream.speaker, stream);
    }
    for (entity, mut stream) in &mut streams {
        match wanted.remove(&entity) {
            Some(next) => {
                stream.set_if_neq(next);
            }
            // A stream whose listener is the persona itself is a dialogue with someone who is
            // no persona (the player): the dialogue owns it.
            None if stream.listener == entity => {}
            // Over, cancelled, or moved to the other speaker.
            None => {
                commands.entity(entity).remove::<ChatStream>();
            }
        }
    }
    for (speaker, stream) in wanted {
        commands.entity(speaker).try_insert(stream);
    }
}

/// Streams conversations into [`ChatStream`]s when [`ChatStreamSettings::enabled`] (part of
/// [`CognitionPlugin`](super::CognitionPlugin)).
#[derive(Default)]
pub struct ChatStreamPlugin;

impl Plugin for ChatStreamPlugin {
    fn build(&self, app: &mut App) {
        app.init_resource::<ChatStreamSettings>()
            .register_type::<ChatStreamSettings>()
            .register_type::<ChatStream>()
            .add_systems(SimPoll, drain_chat_streams.after(PollSystems::LandThoughts));
    }
}

/// How a partial line is displayed: like the parser's final line as far as can be known —
/// leading space and quotes dropped, a complete `"<speaker>:"` label removed, runs of
/// whitespace as one space, at most [`NextUtterance::MAX_CHARS`] characters.
pub fn display_line(partial: &str, speaker: &str) -> String {
    let mut text = partial.trim_start_matches(|c: char| {
        c.is_whitespace() || matches!(c, '"' | '\'' | '`' | '“' | '”')
    });
    let first = speaker.split_whitespace().next().unwrap_or_default();
    for name in [speaker, first] {
        if name.is_empty() {
            continue;
        }
        if let Some(rest) = text
            .get(..name.len())
            .filter(|head| head.eq_ignore_ascii_case(name))
            .and_then(|_| text.get(name.len()..))
            .and_then(|rest| rest.trim_start().strip_prefix(':'))
        {
            text = rest.trim_start();
            break;
        }
    }
    let mut out = String::with_capacity(text.len());
    let mut chars = 0;
    let mut space = false;
    for c in text.chars() {
        if c.is_whitespace() {
            space = true;
            continue;
        }
        if space && !out.is_empty() {
            if chars == NextUtterance::MAX_CHARS {
                return out;
            }
            out.push(' ');
            chars += 1;
        }
        space = false;
        if chars == NextUtterance::MAX_CHARS {
            return out;
        }
        out.push(c);
        chars += 1;
    }
    if space && !out.is_empty() && chars < NextUtterance::MAX_CHARS {
        out.push(' ');
    }
    out
}

/// The partial value of the `"utterance"` string in a model's partial answer (see
/// [`partial_string_field`]).
pub fn partial_utterance(raw: &str) -> Option<String> {
    partial_string_field(raw, "utterance")
}

/// The value of the string field `key` of the JSON object a model is writing, as far as `raw`
/// (the answer so far) goes. `None` until the value's opening quote has arrived, or when the
/// answer is not going to have it.
///
/// The answer is read the way the prompt framework will read the whole of it: `<think>` blocks
/// and code fences are cleaned away ([`clean_response`]), prose before the JSON is skipped
/// (each `{` is tried in turn, as [`extract_json`](crate::prompt::extract_json) does), keys may
/// come in any order and other values are skipped whole, only the top-level object's field
/// counts. Escapes are decoded, `\uXXXX` surrogate pairs included; an escape cut off at the end
/// of `raw` is left out until the rest arrives, and the value stops at anything the JSON
/// parser would reject. A plain-text answer gives `None`: the parser will reject it, so what
/// would be shown is not what will be said.
///
/// Because it reads the whole text each time, the result depends only on the text and not on
/// how it was cut into deltas; for any prefix of a valid answer it is a prefix of the final
/// value.
pub fn partial_string_field(raw: &str, key: &str) -> Option<String> {
    let raw = truncate_bytes(raw, MAX_WATCHED_BYTES);
    let cleaned = clean_response(raw);
    let bytes = cleaned.as_bytes();
    let mut from = 0;
    for _ in 0..MAX_OBJECT_CANDIDATES {
        let start = from + cleaned.get(from..)?.find('{')?;
        match scan_object(&cleaned, start, key) {
            Scan::Found(value) => return Some(value),
            Scan::Incomplete | Scan::Absent => return None,
            Scan::Invalid => from = start + 1,
        }
        if from >= bytes.len() {
            return None;
        }
    }
    None
}

/// What scanning one candidate object found.
#[derive(Debug, PartialEq, Eq)]
enum Scan {
    /// The field's string value, complete or as far as the text goes.
    Found(String),
    /// The text ends before the field was found.
    Incomplete,
    /// Not JSON from here on: try the next candidate.
    Invalid,
    /// The object is complete (or the field is not a string): the field will not come.
    Absent,
}

/// Why reading a JSON token stopped short.
enum Short {
    /// The text ended inside it.
    End,
    /// It is not valid JSON.
    Invalid,
}

/// Scans the object opening at `start` for the string field `key`.
fn scan_object(text: &str, start: usize, key: &str) -> Scan {
    let bytes = text.as_bytes();
    let mut pos = start + 1;
    loop {
        pos = skip_ws(bytes, pos);
        match bytes.get(pos) {
            None => return Scan::Incomplete,
            Some(b'}') => return Scan::Absent,
            Some(b'"') => {}
            Some(_) => return Scan::Invalid,
        }
        let (name, after) = match read_string(text, pos) {
            Ok(read) => read,
            Err(Short::End) => return Scan::Incomplete,
            Err(Short::Invalid) => return Scan::Invalid,
        };
        pos = skip_ws(bytes, after);
        match bytes.get(pos) {
            None => return Scan::Incomplete,
            Some(b':') => pos = skip_ws(bytes, pos + 1),
            Some(_) => return Scan::Invalid,
        }
        if name == key {
            return match bytes.get(pos) {
                None => Scan::Incomplete,
                Some(b'"') => Scan::Found(read_partial_string(text, pos)),
                Some(_) => Scan::Absent,
            };
        }
        pos = match skip_value(text, pos) {
            Ok(after) => skip_ws(bytes, after),
            Err(Short::End) => return Scan::Incomplete,
            Err(Short::Invalid) => return Scan::Invalid,
        };
        match bytes.get(pos) {
            None => return Scan::Incomplete,
            Some(b',') => pos += 1,
            Some(b'}') => return Scan::Absent,
            Some(_) => return Scan::Invalid,
        }
    }
}

fn skip_ws(bytes: &[u8], mut pos: usize) -> usize {
    while bytes
        .get(pos)
        .is_some_and(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
    {
        pos += 1;
    }
    pos
}

/// Skips the JSON value at `pos`; returns the position after it.
fn skip_value(text: &str, pos: usize) -> Result<usize, Short> {
    let bytes = text.as_bytes();
    match bytes.get(pos) {
        None => Err(Short::End),
        Some(b'"') => read_string(text, pos).map(|(_, after)| after),
        Some(b'{' | b'[') => skip_nested(bytes, pos),
        Some(b) if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'+' | b'.') => {
            let mut end = pos;
            while bytes
                .get(end)
                .is_some_and(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'+' | b'.'))
            {
                end += 1;
            }
            // A literal that runs to the end of the text may still be growing.
            if end == bytes.len() {
                Err(Short::End)
            } else {
                Ok(end)
            }
        }
        Some(_) => Err(Short::Invalid),
    }
}

/// Skips the object or array opening at `pos` (brackets matched, strings honoured, nesting
/// bounded as the answer parser bounds it).
fn skip_nested(bytes: &[u8], pos: usize) -> Result<usize, Short> {
    match matching_close(bytes, pos, &mut Vec::new()).0 {
        Bracket::Closed(close) => Ok(close + 1),
        Bracket::Unclosed => Err(Short::End),
        Bracket::Invalid => Err(Short::Invalid),
    }
}

/// Reads the complete string opening at `pos`: its decoded value and the position after it.
fn read_string(text: &str, pos: usize) -> Result<(String, usize), Short> {
    let mut out = String::new();
    match decode_string(text, pos, &mut out) {
        Decoded::Closed(after) => Ok((out, after)),
        Decoded::Open => Err(Short::End),
        Decoded::Invalid => Err(Short::Invalid),
    }
}

/// Reads the string opening at `pos` as far as it goes.
fn read_partial_string(text: &str, pos: usize) -> String {
    let mut out = String::new();
    decode_string(text, pos, &mut out);
    out
}

/// How decoding a string ended.
enum Decoded {
    /// At its closing quote; the position after it.
    Closed(usize),
    /// At the end of the text (a cut-off escape is left out).
    Open,
    /// At something JSON does not allow in a string.
    Invalid,
}

/// Decodes the JSON string whose opening quote is at `pos` into `out`, as far as it is
/// complete and valid.
fn decode_string(text: &str, pos: usize, out: &mut String) -> Decoded {
    let Some(body) = text.get(pos + 1..) else {
        return Decoded::Open;
    };
    let mut chars = body.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Decoded::Closed(pos + 1 + i + 1),
            '\\' => {
                let rest = body.get(i + 1..).unwrap_or_default();
                match decode_escape(rest) {
                    Escape::Char(decoded, len) => {
                        out.push(decoded);
                        for _ in 0..len {
                            chars.next();
                        }
                    }
                    Escape::Cut => return Decoded::Open,
                    Escape::Invalid => return Decoded::Invalid,
                }
            }
            c if u32::from(c) < 0x20 => return Decoded::Invalid,
            c => out.push(c),
        }
    }
    Decoded::Open
}

/// An escape sequence after its backslash.
enum Escape {
    /// The character and how many (ASCII) characters after the backslash it took.
    Char(char, usize),
    /// The text ends inside it.
    Cut,
    /// Not a valid JSON escape.
    Invalid,
}

fn decode_escape(rest: &str) -> Escape {
    let Some(kind) = rest.chars().next() else {
        return Escape::Cut;
    };
    let simple = match kind {
        '"' => '"',
        '\\' => '\\',
        '/' => '/',
        'b' => '\u{8}',
        'f' => '\u{c}',
        'n' => '\n',
        'r' => '\r',
        't' => '\t',
        'u' => return decode_unicode_escape(rest),
        _ => return Escape::Invalid,
    };
    Escape::Char(simple, 1)
}

/// `uXXXX`, or a surrogate pair `uXXXX\uXXXX`.
fn decode_unicode_escape(rest: &str) -> Escape {
    let high = match hex4(rest.get(1..)) {
        Hex::Value(v) => v,
        Hex::Cut => return Escape::Cut,
        Hex::Invalid => return Escape::Invalid,
    };
    if !(0xD800..0xE000).contains(&high) {
        return char::from_u32(high).map_or(Escape::Invalid, |c| Escape::Char(c, 5));
    }
    if high >= 0xDC00 {
        // A low surrogate first: the JSON parser rejects it.
        return Escape::Invalid;
    }
    // The low half must follow as `\uXXXX`.
    let tail = rest.get(5..).unwrap_or_default();
    let prefix = "\\u";
    if tail.len() < prefix.len() {
        return if prefix.starts_with(tail) {
            Escape::Cut
        } else {
            Escape::Invalid
        };
    }
    if !tail.starts_with(prefix) {
        return Escape::Invalid;
    }
    let low = match hex4(tail.get(2..)) {
        Hex::Value(v) => v,
        Hex::Cut => return Escape::Cut,
        Hex::Invalid => return Escape::Invalid,
    };
    if !(0xDC00..0xE000).contains(&low) {
        return Escape::Invalid;
    }
    let code = 0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00);
    char::from_u32(code).map_or(Escape::Invalid, |c| Escape::Char(c, 11))
}

/// Four hex digits.
enum Hex {
    Value(u32),
    Cut,
    Invalid,
}

fn hex4(text: Option<&str>) -> Hex {
    let text = text.unwrap_or_default();
    let mut value = 0u32;
    let mut seen = 0;
    for c in text.chars().take(4) {
        let Some(digit) = c.to_digit(16) else {
            return Hex::Invalid;
        };
        value = value * 16 + digit;
        seen += 1;
    }
    if seen < 4 {
        Hex::Cut
    } else {
        Hex::Value(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn part(raw: &str) -> Option<String> {
        partial_utterance(raw)
    }

    #[test]
    fn reads_the_utterance_as_it_grows() {
        assert_eq!(part(""), None);
        assert_eq!(part("{"), None);
        assert_eq!(part(r#"{"utter"#), None);
        assert_eq!(part(r#"{"utterance""#), None);
        assert_eq!(part(r#"{"utterance": "#), None);
        assert_eq!(part(r#"{"utterance": ""#), Some(String::new()));
        assert_eq!(part(r#"{"utterance": "Hi Ma"#), Some("Hi Ma".into()));
        assert_eq!(
            part(r#"{"utterance": "Hi Maria!", "end": fal"#),
            Some("Hi Maria!".into())
        );
        assert_eq!(
            part(r#"{"utterance": "Hi Maria!", "end": false}"#),
            Some("Hi Maria!".into())
        );
    }

    #[test]
    fn keys_in_either_order_and_other_values_skipped() {
        assert_eq!(
            part(r#"{"end": false, "utterance": "Yes"#),
            Some("Yes".into())
        );
        // While another value is still arriving, the utterance may yet come.
        assert_eq!(part(r#"{"end": fa"#), None);
        assert_eq!(
            part(r#"{"mood": {"a": "}", "b": [1, "]"]}, "utterance": "ok"#),
            Some("ok".into())
        );
        assert_eq!(
            part(r#"{"note": "the \"utterance\": \"no\"", "utterance": "yes"#),
            Some("yes".into())
        );
        // Only the top-level field counts, as in the parser.
        assert_eq!(part(r#"{"reply": {"utterance": "nested"}}"#), None);
        // A complete object without it: the answer will be rejected.
        assert_eq!(part(r#"{"end": true} {"utterance": "late"}"#), None);
        // Not a string.
        assert_eq!(part(r#"{"utterance": 5"#), None);
    }

    #[test]
    fn escapes_decode_and_cut_escapes_wait() {
        assert_eq!(
            part(r#"{"utterance": "a\"b\\c\/d\ne"#),
            Some("a\"b\\c/d\ne".into())
        );
        assert_eq!(part(r#"{"utterance": "caf\u00e9"#), Some("café".into()));
        // Cut inside an escape: left out until the rest arrives.
        assert_eq!(part(r#"{"utterance": "caf\"#), Some("caf".into()));
        assert_eq!(part(r#"{"utterance": "caf\u00"#), Some("caf".into()));
        assert_eq!(part(r#"{"utterance": "caf\u00e"#), Some("caf".into()));
        // A surrogate pair, cut at every place.
        let full = r#"{"utterance": "hi \ud83d\ude00!"#;
        assert_eq!(part(full), Some("hi 😀!".into()));
        for cut in 16..full.len() - 1 {
            let got = part(&full[..cut]).unwrap_or_default();
            assert!("hi 😀!".starts_with(&got), "{cut}: {got:?}");
            assert!(!got.contains('\u{fffd}'));
        }
        assert_eq!(part(r#"{"utterance": "hi \ud83d\u"#), Some("hi ".into()));
        // What the parser rejects stops the value.
        assert_eq!(part(r#"{"utterance": "bad \x escape"#), Some("bad ".into()));
        assert_eq!(
            part(r#"{"utterance": "lone \ude00 low"#),
            Some("lone ".into())
        );
        assert_eq!(
            part(r#"{"utterance": "lone \ud83d high"#),
            Some("lone ".into())
        );
        assert_eq!(part("{\"utterance\": \"raw\nnewline"), Some("raw".into()));
    }

    #[test]
    fn prose_fences_and_thinking_around_the_json() {
        assert_eq!(
            part("Sure! Here is my answer: {\"utterance\": \"Hello"),
            Some("Hello".into())
        );
        assert_eq!(
            part("Note {this}: {\"utterance\": \"Hello"),
            Some("Hello".into())
        );
        assert_eq!(part("```json\n{\"utterance\": \"Hel"), Some("Hel".into()));
        assert_eq!(
            part("```json\n{\"utterance\": \"Hello\"}\n```"),
            Some("Hello".into())
        );
        assert_eq!(part("<think>maybe {\"utterance\": \"no\"} hmm"), None);
        assert_eq!(
            part("<think>maybe {\"utterance\": \"no\"}</think>{\"utterance\": \"yes"),
            Some("yes".into())
        );
        assert_eq!(
            part("[{\"utterance\": \"in a list"),
            Some("in a list".into())
        );
    }

    #[test]
    fn plain_text_answers_show_nothing() {
        assert_eq!(part("Hello there, Maria!"), None);
        assert_eq!(part("Isabella: nice to see you"), None);
    }

    #[test]
    fn display_follows_the_parser() {
        assert_eq!(
            display_line("  \"Hi  there ", "Isabella Rodriguez"),
            "Hi there "
        );
        assert_eq!(display_line("Isabella: Hi", "Isabella Rodriguez"), "Hi");
        assert_eq!(
            display_line("isabella rodriguez : Hi", "Isabella Rodriguez"),
            "Hi"
        );
        assert_eq!(display_line("Isabel", "Isabella Rodriguez"), "Isabel");
        assert_eq!(display_line("", "A"), "");
        let long = "x".repeat(NextUtterance::MAX_CHARS + 20);
        assert_eq!(
            display_line(&long, "A").chars().count(),
            NextUtterance::MAX_CHARS
        );
        let words = "ab ".repeat(200);
        assert_eq!(
            display_line(&words, "A").chars().count(),
            NextUtterance::MAX_CHARS
        );
    }

    #[test]
    fn the_state_machine_follows_the_lines() {
        let mut s = ChatStreamState::default();
        assert_eq!(s.speaking, ChatSide::Initiator);
        let partial = |line, side, text: &str| ChatStreamUpdate::Partial {
            line,
            side,
            text: text.into(),
        };
        let finished = |line, side, speaker: &str, text: &str| ChatStreamUpdate::Finished {
            line,
            side,
            speaker: speaker.into(),
            text: text.into(),
        };
        s.apply(partial(0, ChatSide::Initiator, "Hi"));
        assert_eq!(s.partial, "Hi");
        s.apply(finished(0, ChatSide::Initiator, "A", "Hi B."));
        assert_eq!(
            (s.lines.len(), s.partial.as_str(), s.speaking),
            (1, "", ChatSide::Initiator)
        );
        // A late partial of a finished line is stale.
        s.apply(partial(0, ChatSide::Initiator, "Hi B"));
        assert_eq!(s.partial, "");
        s.apply(partial(1, ChatSide::Partner, "Hel"));
        assert_eq!((s.speaking, s.partial.as_str()), (ChatSide::Partner, "Hel"));
        // A retry blanks the line.
        s.apply(partial(1, ChatSide::Partner, ""));
        assert_eq!(s.partial, "");
        s.apply(finished(1, ChatSide::Partner, "B", "Hello."));
        s.apply(finished(1, ChatSide::Partner, "B", "again"));
        assert_eq!(
            s.lines,
            vec![("A".into(), "Hi B.".into()), ("B".into(), "Hello.".into())]
        );
    }

    #[test]
    fn the_watcher_sends_growing_lines_and_blanks_on_a_retry() {
        let (sender, receiver) = async_channel::bounded(64);
        let sink = ChatStreamSink { sender };
        let mut watcher = sink.watch_line(3, ChatSide::Partner, "Bob");
        watcher.attempt_started(0);
        for delta in [
            "{\"utter",
            "ance\": \"Bob",
            ": Hi",
            " there",
            "\", \"end\": true}",
        ] {
            watcher.delta(delta);
        }
        watcher.attempt_started(1);
        let texts: Vec<String> = std::iter::from_fn(|| receiver.try_recv().ok())
            .map(|u| match u {
                ChatStreamUpdate::Partial {
                    line: 3,
                    side: ChatSide::Partner,
                    text,
                } => text,
                other => panic!("unexpected {other:?}"),
            })
            .collect();
        // Nothing before the value starts; the speaker's label shows until its colon arrives,
        // then goes; no repeats; blank on a retry.
        assert_eq!(texts, vec!["Bob", "Hi", "Hi there", ""]);
    }

    #[test]
    fn a_full_channel_drops_partials_and_the_next_one_catches_up() {
        let (sender, receiver) = async_channel::bounded(1);
        let sink = ChatStreamSink { sender };
        let mut watcher = sink.watch_line(0, ChatSide::Initiator, "A");
        watcher.delta("{\"utterance\": \"a");
        watcher.delta("b");
        watcher.delta("c");
        assert_eq!(
            receiver.try_recv().ok(),
            Some(ChatStreamUpdate::Partial {
                line: 0,
                side: ChatSide::Initiator,
                text: "a".into()
            })
        );
        watcher.delta("d");
        assert_eq!(
            receiver.try_recv().ok(),
            Some(ChatStreamUpdate::Partial {
                line: 0,
                side: ChatSide::Initiator,
                text: "abcd".into()
            })
        );
    }

    /// A JSON answer to a next-utterance prompt, the way models write them.
    fn answer(utterance: &str, end: bool, end_first: bool, wrap: u8) -> String {
        let line = serde_json::to_string(utterance).unwrap_or_default();
        let object = if end_first {
            format!("{{\"end\": {end}, \"utterance\": {line}}}")
        } else {
            format!("{{\"utterance\":{line},\n \"end\":{end}}}")
        };
        match wrap {
            0 => object,
            1 => format!("```json\n{object}\n```"),
            2 => format!("Here you go: {object} Hope that helps."),
            _ => format!("<think>{{\"utterance\": \"no\"}}</think>{object}"),
        }
    }

    proptest! {
        #[test]
        fn any_split_of_a_valid_answer_gives_prefixes_of_the_line(
            utterance in "\\PC{0,40}|[a-z \"\\\\/\u{0}-\u{1f}é😀🧑‍🍳]{0,30}",
            end in any::<bool>(),
            end_first in any::<bool>(),
            wrap in 0u8..4,
            cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..12),
        ) {
            // Text that would break the final parse as well (a fence or a think tag inside the
            // line) is not a valid answer.
            prop_assume!(!utterance.contains("```") && !utterance.to_ascii_lowercase().contains("think>"));
            let text = answer(&utterance, end, end_first, wrap);
            let boundaries: Vec<usize> = (0..=text.len()).filter(|i| text.is_char_boundary(*i)).collect();
            let mut points: Vec<usize> = cuts.iter().map(|c| boundaries[c.index(boundaries.len())]).collect();
            points.push(text.len());
            points.sort_unstable();
            points.dedup();
            let mut previous = String::new();
            let mut raw = String::new();
            let mut from = 0;
            for point in points {
                raw.push_str(&text[from..point]);
                from = point;
                let got = partial_utterance(&raw).unwrap_or_default();
                prop_assert!(utterance.starts_with(&got), "{raw:?} gave {got:?}");
                prop_assert!(got.starts_with(&previous), "shrank from {previous:?} to {got:?}");
                previous = got;
            }
            prop_assert_eq!(partial_utterance(&text), Some(utterance));
        }

        #[test]
        fn any_text_is_read_without_panicking(raw in "\\PC{0,200}|[{}\\[\\]\"\\\\:,u0-9a-f ]{0,80}") {
            if let Some(line) = partial_utterance(&raw) {
                // Decoding only ever shortens: an escape is longer than what it stands for.
                prop_assert!(line.len() <= raw.len());
            }
        }
    }
}
