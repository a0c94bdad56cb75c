//! Speech and thought over the personas' heads:
//! - an **emoji bubble** with the current action's emoji (`act_pronunciatio`) in colour, drawn
//!   with Noto Color Emoji (found in the crate's `assets/fonts/`, `$SMALLVILLE_EMOJI_FONT`, or
//!   the system's font folders — `scripts/install-deps.sh` installs it on Debian);
//! - a **dialogue bubble** over whoever speaks, typing the chat line by line (typewriter). While
//!   a conversation is still being generated and is watched ([`ChatStream`], which the game
//!   turns on), the bubble types each line as the model speaks it: never ahead of the text
//!   received, and the speaker's bubble grows as tokens arrive. When the finished conversation
//!   lands as the chat action, the bubble **goes on from where it stands** — the playback is
//!   keyed by the conversation's first line, which the stream and the landed chat share, so the
//!   lines already shown live are not typed again, and the line on screen keeps its typed
//!   characters (when the validated line begins with what was shown; otherwise that line is
//!   retyped, since it says something else). A conversation that lands in one piece (nobody
//!   watching, or a backend that answers at once) is replayed line by line as before. Emoji in
//!   a line are drawn in colour: the line is split into spans ([`chat_runs`]), the emoji ones
//!   in the emoji font (Bevy's text has no per-glyph fallback to it here, and one span would
//!   tint the emoji with the text colour);
//! - a **group line** (SPEC §8, [`GroupLineSpoken`]) in the speaker's dialogue bubble, typed at
//!   the same pace and held as long as a chat line, unless the persona is speaking in a
//!   one-to-one conversation; an emoji reply is a bubble holding only the emoji, in colour;
//! - in a replay, a **recorded line** ([`RecordedBubble`]: a group line, a talk turn or a stage
//!   narration from the run's record, kept on the actor by the replay for a few seconds of
//!   replay time) in the same dialogue bubble, whole rather than typed, on the same terms as a
//!   group line;
//! - a **💭 marker** while a persona's mind is checked out to a model call in
//!   [`TimeMode::Realtime`], once it has been pending for
//!   [`AgentSettings::thinking_marker_after_secs`] (never over a replay's
//!   [`ReplayActor`], which has no mind to wait for).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use bevy::prelude::*;
use bevy::sprite::{Anchor, BorderRect, SliceScaleMode, SpriteImageMode, TextureSlicer};
use bevy::text::{LineBreak, TextBounds, TextLayoutInfo};

use super::art::{self, BUBBLE_CORNER};
use super::sprites::{PersonaSprite, canvas_image};
use super::z;
use crate::clock::{AwaitingCognition, SimClock, TimeMode};
use crate::cognition::ChatStream;
use crate::group::GroupLineSpoken;
use crate::output::{RecordedBubble, ReplayActor};
use crate::persona::{ActionView, Mind, Persona};
use crate::settings::AgentSettings;

/// Characters typed per real second in dialogue bubbles.
pub(crate) const TYPE_CHARS_PER_SEC: f32 = 40.0;
/// Seconds a finished line stays up before the next one starts.
pub(crate) const LINE_HOLD_SECS: f32 = 1.6;
/// Widest a dialogue bubble's text gets before it wraps (world units).
pub(crate) const CHAT_WRAP_WIDTH: f32 = 190.0;
/// At most this many characters of `act_pronunciatio` are shown (models sometimes ramble).
pub(crate) const MAX_EMOJI_CHARS: usize = 6;

/// The latest group line each persona said, and the real seconds since it was said.
#[derive(Resource, Debug, Default)]
pub(crate) struct GroupSpeech(HashMap<Entity, (String, f32)>);

impl GroupSpeech {
    /// Types `text` in `persona`'s bubble, as a line just said (a stage actor's plan).
    pub(crate) fn say(&mut self, persona: Entity, text: &str) {
        self.0.insert(persona, (text.to_string(), 0.0));
    }

    /// The group lines in bubbles now, "Name: text as typed so far", by name.
    pub(crate) fn shown<'a>(&self, name_of: impl Fn(Entity) -> Option<&'a str>) -> Vec<String> {
        let mut shown: Vec<String> = self
            .0
            .iter()
            .filter_map(|(entity, (line, elapsed))| {
                let text = group_line_shown(line, *elapsed)?;
                Some(format!("{}: {text}", name_of(*entity)?))
            })
            .collect();
        shown.sort();
        shown
    }
}

/// How much of a group line `elapsed` real seconds after it was said is shown: typed at
/// [`TYPE_CHARS_PER_SEC`], then held [`LINE_HOLD_SECS`]; `None` once it is over.
pub(crate) fn group_line_shown(line: &str, elapsed: f32) -> Option<String> {
    let chars = line.chars().count();
    let typing = chars as f32 / TYPE_CHARS_PER_SEC;
    (elapsed >= 0.0 && elapsed < typing + LINE_HOLD_SECS && chars > 0).then(|| {
        line.chars()
            .take(typed_chars(elapsed, TYPE_CHARS_PER_SEC, chars))
            .collect()
    })
}

/// Ages the group lines on screen and takes in the newly said ones (a persona's new line
/// replaces its last).
fn hear_group_lines(
    time: Res<Time>,
    mut said: MessageReader<GroupLineSpoken>,
    mut speech: ResMut<GroupSpeech>,
) {
    let dt = time.delta_secs();
    speech.0.retain(|_, (line, elapsed)| {
        *elapsed += dt;
        group_line_shown(line, *elapsed).is_some()
    });
    for line in said.read() {
        if let Some(persona) = line.persona {
            speech.0.insert(persona, (line.text.clone(), 0.0));
        }
    }
}

/// The colour emoji font, if one was found. Without it emoji fall back to the default font.
#[derive(Resource, Debug, Clone, Default)]
pub struct EmojiFont {
    /// The loaded font.
    pub handle: Option<Handle<Font>>,
    /// Where it was loaded from.
    pub path: Option<PathBuf>,
}

/// Where to look for a colour emoji font, first match wins.
pub(crate) fn emoji_font_candidates() -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(path) = std::env::var("SMALLVILLE_EMOJI_FONT")
        && !path.is_empty()
    {
        out.push(PathBuf::from(path));
    }
    out.push(crate::files::crate_file("assets/fonts/NotoColorEmoji.ttf"));
    for dir in [
        "/usr/share/fonts/truetype/noto",
        "/usr/share/fonts/noto",
        "/usr/share/fonts/google-noto-emoji",
        "/usr/share/fonts/noto-emoji",
        "/usr/local/share/fonts",
    ] {
        out.push(Path::new(dir).join("NotoColorEmoji.ttf"));
    }
    out
}

/// Whether `bytes` look like an OpenType/TrueType font file.
pub(crate) fn is_font_file(bytes: &[u8]) -> bool {
    matches!(
        bytes.get(..4),
        Some([0, 1, 0, 0]) | Some(b"OTTO") | Some(b"true") | Some(b"ttcf")
    )
}

/// Keeps what the emoji font can draw of `act_pronunciatio`, at most [`MAX_EMOJI_CHARS`].
///
/// Bevy's text renderer treats a glyph without an image as a fatal error, and the colour emoji
/// font has image-less glyphs (variation selectors, the zero-width joiner, `.notdef` for
/// letters). Models write all of those ("☕️", "eating 🍝"), so only pictographs, symbols and
/// skin-tone modifiers are kept; joined sequences fall apart into their parts ("🧑‍🍳" → "🧑🍳")
/// rather than risk an unjoined joiner.
pub(crate) fn bubble_emoji(text: &str) -> String {
    text.chars()
        .filter(|&c| is_drawable_emoji(c))
        .take(MAX_EMOJI_CHARS)
        .collect()
}

/// Whether `c` is a pictograph or symbol with its own image in a colour emoji font.
pub(crate) fn is_drawable_emoji(c: char) -> bool {
    matches!(c,
        '\u{1F000}'..='\u{1FAFF}'   // pictographs, emoticons, transport, flags' letters, tones
        | '\u{2600}'..='\u{27BF}'   // miscellaneous symbols and dingbats (☕ ⚽ ✂)
        | '\u{2300}'..='\u{23FF}'   // technical (⌚ ⏰ ⌛)
        | '\u{2B00}'..='\u{2BFF}'   // ⭐ ⬛
    )
}

/// Where a persona's replay of its current chat stands.
#[derive(Component, Debug, Clone, Default, PartialEq)]
pub struct ChatPlayback {
    /// The first line of the chat being replayed, its key: a new first line starts a new
    /// replay, the same one (a streamed chat that lands) goes on. `None` while a streamed first
    /// line is still being spoken.
    pub first_line: Option<(String, String)>,
    /// The line being typed.
    pub line: usize,
    /// Real seconds since that line started.
    pub line_elapsed: f32,
}

/// Advances a replay by `dt` seconds over lines of the given character counts; returns the
/// line to show and how many of its characters are visible, or `None` once every line has been
/// typed and held. New lines appended later are picked up where the replay stands.
///
/// With `open_last`, the last line is still arriving (streamed) and `line_chars` holds what
/// has been received of it: it is typed no further than that, and when more arrives typing
/// goes on from there at the same pace (no jump), and the replay waits on it.
pub fn chat_playback(
    state: &mut ChatPlayback,
    line_chars: &[usize],
    open_last: bool,
    dt: f32,
    chars_per_sec: f32,
    hold_secs: f32,
) -> Option<(usize, usize)> {
    let chars_per_sec = chars_per_sec.max(1.0);
    state.line_elapsed += dt.max(0.0);
    loop {
        let chars = *line_chars.get(state.line)?;
        let typing = chars as f32 / chars_per_sec;
        let last = state.line + 1 >= line_chars.len();
        if open_last && last {
            state.line_elapsed = state.line_elapsed.min(typing);
            return Some((
                state.line,
                typed_chars(state.line_elapsed, chars_per_sec, chars),
            ));
        }
        if state.line_elapsed < typing + hold_secs {
            return Some((
                state.line,
                typed_chars(state.line_elapsed, chars_per_sec, chars),
            ));
        }
        if last {
            // Hold the last line until more arrive (or the chat ends): a streamed line may
            // still be coming.
            state.line_elapsed = typing + hold_secs;
            return None;
        }
        state.line_elapsed -= typing + hold_secs;
        state.line += 1;
    }
}

/// Characters typed after `elapsed` seconds, at most `chars`. The small slack keeps a line
/// whose typing time was clamped to exactly `chars / chars_per_sec` from losing its last
/// character to rounding.
fn typed_chars(elapsed: f32, chars_per_sec: f32, chars: usize) -> usize {
    ((elapsed * chars_per_sec + 1e-3) as usize).min(chars)
}

/// The chat a persona's dialogue bubble plays: its conversation's stream while it is spoken,
/// else the chat of its action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BubbleChat {
    /// The lines, `(speaker, line)`.
    pub lines: Vec<(String, String)>,
    /// Whether the last line is still arriving.
    pub open: bool,
}

impl BubbleChat {
    /// The conversation's first line once it is finished (its key; see [`follow_chat`]).
    pub(crate) fn first_finished(&self) -> Option<&(String, String)> {
        if self.open && self.lines.len() == 1 {
            None
        } else {
            self.lines.first()
        }
    }
}

/// What `view`'s persona's bubble plays: `live` — the [`ChatStream`] of a conversation the
/// persona is in, with the speaker's name — while there is one (the finished lines, then the
/// partial line when something of it has arrived), else the landed chat of its action.
pub(crate) fn bubble_chat(
    view: &ActionView,
    live: Option<(&ChatStream, &str)>,
) -> Option<BubbleChat> {
    if let Some((stream, speaker)) = live {
        let mut lines = stream.lines.clone();
        let open = !stream.partial.trim().is_empty();
        if open {
            lines.push((speaker.to_string(), stream.partial.clone()));
        }
        return (!lines.is_empty()).then_some(BubbleChat { lines, open });
    }
    (view.chatting_with.is_some() && !view.chat.is_empty()).then(|| BubbleChat {
        lines: view.chat.clone(),
        open: false,
    })
}

/// Keeps a playback with its conversation. A playback is keyed by the conversation's first
/// finished line, which the stream and the landed chat share: the same key goes on where it
/// stands (a stream turning into the landed chat included); a different one starts over, as
/// does a conversation still on its first line over a playback that has a key. A playback
/// without a key yet (fresh, or typing a streamed first line) takes the chat's.
pub(crate) fn follow_chat(state: &mut ChatPlayback, chat: &BubbleChat) {
    let first = chat.first_finished();
    let same = match (&state.first_line, first) {
        (Some(shown), Some(first)) => shown == first,
        (Some(_), None) => false,
        (None, _) => true,
    };
    if !same {
        *state = ChatPlayback::default();
    }
    if state.first_line.is_none() {
        state.first_line = first.cloned();
    }
}

/// The emoji bubble above a persona (child of the persona).
#[derive(Component, Debug, Clone, Copy)]
pub struct EmojiBubble;
/// The emoji text inside the emoji bubble.
#[derive(Component, Debug, Clone, Copy)]
pub struct EmojiText;
/// The 💭 marker (child of the persona).
#[derive(Component, Debug, Clone, Copy)]
pub struct ThinkingMarker;
/// The dialogue bubble above a persona (child of the persona).
#[derive(Component, Debug, Clone, Copy)]
pub struct ChatBubble;
/// The text inside a dialogue bubble (its spans are children; see [`ChatLine`]).
#[derive(Component, Debug, Clone, Copy)]
pub struct ChatText;
/// The line a dialogue bubble shows this frame (on the [`ChatText`]); drawn as `chat_runs`
/// spans.
#[derive(Component, Debug, Clone, Default, PartialEq, Eq)]
pub struct ChatLine(pub String);
/// Which of a [`ChatText`]'s spans are emoji, in order.
#[derive(Component, Debug, Clone, Default)]
struct ChatSpanKinds(Vec<bool>);

/// The colour of dialogue text.
const CHAT_TEXT_COLOR: Color = Color::srgb(0.1, 0.1, 0.14);
/// The size of dialogue text.
const CHAT_FONT_SIZE: f32 = 11.0;
/// Sizes a bubble's background to its text child: `padding` around the text, at least `min`.
#[derive(Component, Debug, Clone, Copy)]
pub struct FitToText {
    /// Space around the text.
    pub padding: Vec2,
    /// Smallest size.
    pub min: Vec2,
}

/// When the mind was last seen leaving (for the thinking marker when no
/// [`AwaitingCognition`] says so).
#[derive(Component, Debug, Clone, Copy, Default)]
struct ThoughtTimer {
    out_for: f32,
}

#[derive(Resource, Debug, Clone)]
struct BubbleFrame(Handle<Image>);

/// Emoji, dialogue and thinking bubbles.
#[derive(Debug, Default, Clone, Copy)]
pub struct BubblesPlugin;

impl Plugin for BubblesPlugin {
    fn build(&self, app: &mut App) {
        app.init_resource::<EmojiFont>()
            .init_resource::<GroupSpeech>()
            .add_message::<GroupLineSpoken>()
            .add_systems(Startup, (load_emoji_font, setup_bubble_frame))
            .add_systems(
                Update,
                (
                    attach_bubbles,
                    update_emoji_bubbles,
                    update_thinking_markers,
                    hear_group_lines,
                    play_chats,
                    draw_chat_lines,
                )
                    .chain()
                    .after(super::sprites::PersonaSpritesSystems),
            )
            // Fitted to this frame's text layout (after the layout, before the bounds): a
            // bubble would otherwise keep its last line's size for a frame — a screenshot
            // caught an emoji in a bubble as wide as the line before it.
            .add_systems(
                PostUpdate,
                fit_bubbles_to_text
                    .after(bevy::sprite::update_text2d_layout)
                    .before(bevy::camera::visibility::VisibilitySystems::CalculateBounds),
            );
    }
}

fn load_emoji_font(mut fonts: ResMut<Assets<Font>>, mut emoji: ResMut<EmojiFont>) {
    for path in emoji_font_candidates() {
        let Ok(bytes) = crate::files::read_at_most(&path, crate::files::MAX_FONT_BYTES) else {
            continue;
        };
        if !is_font_file(&bytes) {
            warn!("{} is not a font file; skipped", path.display());
            continue;
        }
        info!("emoji font: {}", path.display());
        emoji.handle = Some(fonts.add(Font::from_bytes(bytes)));
        emoji.path = Some(path);
        return;
    }
    warn!(
        "no colour emoji font found (install fonts-noto-color-emoji, or set SMALLVILLE_EMOJI_FONT); \
         emoji bubbles fall back to the default font"
    );
}

fn setup_bubble_frame(mut commands: Commands, mut images: ResMut<Assets<Image>>) {
    let frame = art::bubble_frame(24, [255, 255, 252, 245], [40, 36, 48, 255]);
    commands.insert_resource(BubbleFrame(images.add(canvas_image(&frame))));
}

fn bubble_sprite(frame: &BubbleFrame, size: Vec2) -> Sprite {
    Sprite {
        image: frame.0.clone(),
        custom_size: Some(size),
        image_mode: SpriteImageMode::Sliced(TextureSlicer {
            border: BorderRect::all(BUBBLE_CORNER as f32),
            center_scale_mode: SliceScaleMode::Stretch,
            sides_scale_mode: SliceScaleMode::Stretch,
            max_corner_scale: 1.0,
        }),
        ..Default::default()
    }
}

fn attach_bubbles(
    mut commands: Commands,
    frame: Option<Res<BubbleFrame>>,
    emoji: Res<EmojiFont>,
    new: Query<Entity, (With<Persona>, Added<PersonaSprite>)>,
) {
    let Some(frame) = frame else {
        return;
    };
    let emoji_font = TextFont {
        font: emoji.handle.clone().unwrap_or_default().into(),
        font_size: 15.0.into(),
        ..Default::default()
    };
    for persona in &new {
        commands
            .entity(persona)
            .insert((ChatPlayback::default(), ThoughtTimer::default()));
        commands.entity(persona).with_children(|parent| {
            parent
                .spawn((
                    EmojiBubble,
                    bubble_sprite(&frame, Vec2::new(24.0, 22.0)),
                    Anchor::BOTTOM_CENTER,
                    FitToText {
                        padding: Vec2::new(8.0, 5.0),
                        min: Vec2::new(22.0, 22.0),
                    },
                    Transform::from_xyz(0.0, 14.0, z::BUBBLES - z::PERSONAS),
                    Visibility::Hidden,
                ))
                .with_children(|bubble| {
                    bubble.spawn((
                        EmojiText,
                        Text2d::new(""),
                        emoji_font.clone(),
                        Anchor::BOTTOM_CENTER,
                        Transform::from_xyz(0.0, 3.0, 0.1),
                    ));
                });
            parent.spawn((
                ThinkingMarker,
                Text2d::new("💭"),
                emoji_font.clone().with_font_size(13.0),
                Anchor::BOTTOM_LEFT,
                Transform::from_xyz(9.0, 24.0, z::BUBBLES - z::PERSONAS + 0.2),
                Visibility::Hidden,
            ));
            parent
                .spawn((
                    ChatBubble,
                    bubble_sprite(&frame, Vec2::new(40.0, 24.0)),
                    Anchor::BOTTOM_CENTER,
                    FitToText {
                        padding: Vec2::new(12.0, 8.0),
                        min: Vec2::new(24.0, 20.0),
                    },
                    Transform::from_xyz(0.0, 40.0, z::BUBBLES - z::PERSONAS + 0.5),
                    Visibility::Hidden,
                ))
                .with_children(|bubble| {
                    bubble.spawn((
                        ChatText,
                        ChatLine::default(),
                        ChatSpanKinds::default(),
                        Text2d::new(""),
                        TextFont::from_font_size(CHAT_FONT_SIZE),
                        TextColor(CHAT_TEXT_COLOR),
                        TextLayout::new(Justify::Center, LineBreak::WordBoundary),
                        TextBounds::new_horizontal(CHAT_WRAP_WIDTH),
                        Anchor::BOTTOM_CENTER,
                        Transform::from_xyz(0.0, 4.0, 0.1),
                    ));
                });
        });
    }
}

#[expect(clippy::type_complexity, reason = "a query with its filters")]
fn update_emoji_bubbles(
    personas: Query<(&ActionView, &Children), (With<Persona>, Changed<ActionView>)>,
    mut bubbles: Query<(&mut Visibility, &Children), With<EmojiBubble>>,
    mut texts: Query<&mut Text2d, With<EmojiText>>,
) {
    for (view, children) in &personas {
        let shown = bubble_emoji(&view.emoji);
        for child in children.iter() {
            let Ok((mut visibility, bubble_children)) = bubbles.get_mut(child) else {
                continue;
            };
            visibility.set_if_neq(if shown.is_empty() {
                Visibility::Hidden
            } else {
                Visibility::Inherited
            });
            for text_entity in bubble_children.iter() {
                if let Ok(mut text) = texts.get_mut(text_entity)
                    && text.0 != shown
                {
                    text.0 = shown.clone();
                }
            }
        }
    }
}

#[expect(clippy::type_complexity, reason = "a query with its filters")]
fn update_thinking_markers(
    time: Res<Time>,
    clock: Res<SimClock>,
    settings: Option<Res<AgentSettings>>,
    mut personas: Query<
        (
            &Mind,
            Option<&AwaitingCognition>,
            &mut ThoughtTimer,
            &Children,
            Has<ReplayActor>,
        ),
        With<Persona>,
    >,
    mut markers: Query<&mut Visibility, With<ThinkingMarker>>,
) {
    let after = settings
        .map(|s| s.thinking_marker_after_secs)
        .unwrap_or(1.5);
    for (mind, awaiting, mut timer, children, replayed) in &mut personas {
        timer.out_for = if mind.is_home() || replayed {
            0.0
        } else {
            timer.out_for + time.delta_secs()
        };
        let pending_for = awaiting
            .map(|a| a.since.elapsed().as_secs_f32())
            .unwrap_or(timer.out_for)
            .max(timer.out_for);
        let show = clock.mode == TimeMode::Realtime
            && !mind.is_home()
            && !replayed
            && pending_for >= after;
        for child in children.iter() {
            if let Ok(mut visibility) = markers.get_mut(child) {
                visibility.set_if_neq(if show {
                    Visibility::Inherited
                } else {
                    Visibility::Hidden
                });
            }
        }
    }
}

#[expect(clippy::type_complexity, reason = "a query with its filters")]
fn play_chats(
    time: Res<Time>,
    mut personas: Query<
        (
            Entity,
            &Name,
            &ActionView,
            &mut ChatPlayback,
            Option<&RecordedBubble>,
        ),
        With<Persona>,
    >,
    live: Query<&ChatStream>,
    group: Res<GroupSpeech>,
    children: Query<&Children>,
    mut bubbles: Query<&mut Visibility, With<ChatBubble>>,
    mut lines: Query<&mut ChatLine>,
) {
    let dt = time.delta_secs();
    let names: HashMap<String, Entity> = personas
        .iter()
        .map(|(e, name, ..)| (name.as_str().to_owned(), e))
        .collect();
    let name_of: HashMap<Entity, &str> = personas
        .iter()
        .map(|(e, name, ..)| (e, name.as_str()))
        .collect();
    // A conversation being spoken plays on both its speaker's and its listener's playback.
    let mut streams: HashMap<Entity, (&ChatStream, &str)> = HashMap::new();
    for stream in &live {
        let speaker = name_of.get(&stream.speaker).copied().unwrap_or_default();
        streams.insert(stream.speaker, (stream, speaker));
        streams.insert(stream.listener, (stream, speaker));
    }
    let mut playing: Vec<(Entity, BubbleChat)> = Vec::new();
    for (entity, _, view, ..) in &personas {
        if let Some(chat) = bubble_chat(view, streams.get(&entity).copied()) {
            playing.push((entity, chat));
        }
    }
    let playing: HashMap<Entity, BubbleChat> = playing.into_iter().collect();
    // Both partners usually hold the same chat: keep, per speaker, the longest text typed.
    let mut speaking: HashMap<Entity, String> = HashMap::new();
    for (entity, _, _, mut playback, _) in &mut personas {
        let Some(chat) = playing.get(&entity) else {
            if *playback != ChatPlayback::default() {
                *playback = ChatPlayback::default();
            }
            continue;
        };
        follow_chat(&mut playback, chat);
        let lengths: Vec<usize> = chat.lines.iter().map(|(_, l)| l.chars().count()).collect();
        let Some((index, visible)) = chat_playback(
            &mut playback,
            &lengths,
            chat.open,
            dt,
            TYPE_CHARS_PER_SEC,
            LINE_HOLD_SECS,
        ) else {
            continue;
        };
        let Some((speaker, line)) = chat.lines.get(index) else {
            continue;
        };
        let speaker = names.get(speaker.as_str()).copied().unwrap_or(entity);
        let typed: String = line.chars().take(visible).collect();
        let entry = speaking.entry(speaker).or_default();
        if typed.chars().count() > entry.chars().count() {
            *entry = typed;
        }
    }
    // A group line shows where no one-to-one line is being spoken.
    for (persona, (line, elapsed)) in &group.0 {
        if !speaking.contains_key(persona)
            && let Some(shown) = group_line_shown(line, *elapsed)
        {
            speaking.insert(*persona, shown);
        }
    }
    // So does a replay's recorded line, whole: the replay holds it for as long as it is up.
    for (entity, .., recorded) in &personas {
        if let Some(recorded) = recorded
            && !speaking.contains_key(&entity)
        {
            speaking.insert(entity, recorded.text.clone());
        }
    }
    for (entity, ..) in &personas {
        // Nothing typed yet: no bubble (an empty one would keep its last line's size).
        let text = speaking.get(&entity).filter(|t| !t.is_empty());
        let Ok(kids) = children.get(entity) else {
            continue;
        };
        for child in kids.iter() {
            let Ok(mut visibility) = bubbles.get_mut(child) else {
                continue;
            };
            visibility.set_if_neq(if text.is_some() {
                Visibility::Inherited
            } else {
                Visibility::Hidden
            });
            let Ok(bubble_kids) = children.get(child) else {
                continue;
            };
            for text_entity in bubble_kids.iter() {
                if let Ok(mut line) = lines.get_mut(text_entity) {
                    line.set_if_neq(ChatLine(text.cloned().unwrap_or_default()));
                }
            }
        }
    }
}

/// Characters that only join or restyle emoji: the zero-width joiner, variation selectors, the
/// keycap mark and tag characters. The emoji font has no image for them (which Bevy's text
/// treats as fatal) and the default font draws them as boxes, so dialogue drops them; joined
/// sequences fall apart into their parts, as in [`bubble_emoji`].
pub(crate) fn is_emoji_joiner(c: char) -> bool {
    matches!(c,
        '\u{200D}' | '\u{FE00}'..='\u{FE0F}' | '\u{20E3}' | '\u{E0020}'..='\u{E007F}')
}

/// Splits a dialogue line into runs for the default font (`false`) and runs of emoji for the
/// colour emoji font (`true`, only characters it draws: [`is_drawable_emoji`]); emoji joiners
/// are dropped ([`is_emoji_joiner`]).
pub(crate) fn chat_runs(text: &str) -> Vec<(String, bool)> {
    let mut runs: Vec<(String, bool)> = Vec::new();
    for c in text.chars().filter(|&c| !is_emoji_joiner(c)) {
        let emoji = is_drawable_emoji(c);
        match runs.last_mut() {
            Some((run, kind)) if *kind == emoji => run.push(c),
            _ => runs.push((c.to_string(), emoji)),
        }
    }
    runs
}

/// Draws each changed [`ChatLine`] as spans of its [`ChatText`]: updated in place while the
/// runs keep their kinds (the typewriter adds a character at a time), rebuilt when they change.
fn draw_chat_lines(
    mut commands: Commands,
    emoji: Res<EmojiFont>,
    mut lines: Query<(Entity, &ChatLine, &mut ChatSpanKinds, Option<&Children>), Changed<ChatLine>>,
    mut spans: Query<&mut TextSpan>,
) {
    for (entity, line, mut kinds, children) in &mut lines {
        let runs = chat_runs(&line.0);
        let wanted: Vec<bool> = runs.iter().map(|(_, emoji)| *emoji).collect();
        let existing: Vec<Entity> = children
            .map(|c| c.iter().filter(|e| spans.contains(*e)).collect())
            .unwrap_or_default();
        if kinds.0 == wanted && existing.len() == runs.len() {
            for (span_entity, (text, _)) in existing.iter().zip(runs) {
                if let Ok(mut span) = spans.get_mut(*span_entity)
                    && span.0 != text
                {
                    span.0 = text;
                }
            }
            continue;
        }
        for span_entity in existing {
            commands.entity(span_entity).despawn();
        }
        kinds.0 = wanted;
        commands.entity(entity).with_children(|parent| {
            for (text, is_emoji) in runs {
                match (is_emoji, &emoji.handle) {
                    // White: colour glyphs are tinted by the text colour.
                    (true, Some(font)) => parent.spawn((
                        TextSpan::new(text),
                        TextFont {
                            font: font.clone().into(),
                            font_size: CHAT_FONT_SIZE.into(),
                            ..Default::default()
                        },
                        TextColor(Color::WHITE),
                    )),
                    _ => parent.spawn((
                        TextSpan::new(text),
                        TextFont::from_font_size(CHAT_FONT_SIZE),
                        TextColor(CHAT_TEXT_COLOR),
                    )),
                };
            }
        });
    }
}

fn fit_bubbles_to_text(
    mut bubbles: Query<(&FitToText, &mut Sprite, &Children)>,
    texts: Query<&TextLayoutInfo>,
) {
    for (fit, mut sprite, children) in &mut bubbles {
        let Some(info) = children.iter().find_map(|c| texts.get(c).ok()) else {
            continue;
        };
        let scale = if info.scale_factor > 0.0 {
            info.scale_factor
        } else {
            1.0
        };
        let size = (info.size / scale + fit.padding).max(fit.min);
        if sprite.custom_size != Some(size) {
            sprite.custom_size = Some(size);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn playback_types_holds_and_moves_on() {
        let mut s = ChatPlayback::default();
        // Line 0 has 20 chars: typed in 0.5 s at 40/s, then held 1 s.
        assert_eq!(
            chat_playback(&mut s, &[20, 8], false, 0.25, 40.0, 1.0),
            Some((0, 10))
        );
        assert_eq!(
            chat_playback(&mut s, &[20, 8], false, 0.5, 40.0, 1.0),
            Some((0, 20))
        );
        assert_eq!(
            chat_playback(&mut s, &[20, 8], false, 0.5, 40.0, 1.0),
            Some((0, 20))
        );
        // 1.5 s have passed: line 1 begins, 0.11 s into it 4 chars show.
        assert_eq!(
            chat_playback(&mut s, &[20, 8], false, 0.36, 40.0, 1.0),
            Some((1, 4))
        );
        // After line 1's 0.2 s typing and 1 s hold, the replay is over.
        assert_eq!(chat_playback(&mut s, &[20, 8], false, 2.0, 40.0, 1.0), None);
    }

    #[test]
    fn playback_skips_lines_on_a_long_frame_and_resumes_with_new_lines() {
        let mut s = ChatPlayback::default();
        // 3 lines of 4 chars: each takes 0.1 + 1.0 s. 2.32 s lands 0.12 s into line 2.
        assert_eq!(
            chat_playback(&mut s, &[4, 4, 4], false, 2.32, 40.0, 1.0),
            Some((2, 4))
        );
        assert_eq!(
            chat_playback(&mut s, &[4, 4, 4], false, 5.0, 40.0, 1.0),
            None
        );
        // A streamed line arrives: it is typed from its start.
        assert_eq!(
            chat_playback(&mut s, &[4, 4, 4, 10], false, 0.12, 40.0, 1.0),
            Some((3, 4))
        );
    }

    /// A stream of `lines` finished lines and the partial line `partial` (spoken by `speaker`).
    fn stream(lines: &[(&str, &str)], partial: &str, speaker: Entity) -> ChatStream {
        ChatStream {
            speaker,
            listener: Entity::PLACEHOLDER,
            lines: lines
                .iter()
                .map(|(s, l)| (s.to_string(), l.to_string()))
                .collect(),
            partial: partial.to_string(),
        }
    }

    /// One frame of a bubble: follow the chat, advance, and return `(line, typed text)`.
    fn frame(state: &mut ChatPlayback, chat: &BubbleChat, dt: f32) -> Option<(usize, String)> {
        follow_chat(state, chat);
        let lengths: Vec<usize> = chat.lines.iter().map(|(_, l)| l.chars().count()).collect();
        let (line, visible) = chat_playback(state, &lengths, chat.open, dt, 40.0, 1.0)?;
        let text = chat.lines.get(line)?.1.chars().take(visible).collect();
        Some((line, text))
    }

    #[test]
    fn a_streamed_line_is_typed_no_further_than_received_and_without_jumps() {
        let view = ActionView::default();
        let mut s = ChatPlayback::default();
        let live = stream(&[], "Good", Entity::PLACEHOLDER);
        let chat = bubble_chat(&view, Some((&live, "Ana"))).expect("a partial line plays");
        assert!(chat.open);
        // 1 s would type 40 characters; only 4 have arrived.
        assert_eq!(frame(&mut s, &chat, 1.0), Some((0, "Good".into())));
        // More arrives after a long wait: typed on from there at 40/s, not all at once.
        let live = stream(&[], "Good morning, Bo", Entity::PLACEHOLDER);
        let chat = bubble_chat(&view, Some((&live, "Ana"))).expect("plays");
        assert_eq!(frame(&mut s, &chat, 0.1), Some((0, "Good mor".into())));
        // A retry blanks the line: nothing to show, and typing restarts when it regrows.
        let live = stream(&[], "", Entity::PLACEHOLDER);
        assert_eq!(bubble_chat(&view, Some((&live, "Ana"))), None);
        let live = stream(&[], "Hi", Entity::PLACEHOLDER);
        let chat = bubble_chat(&view, Some((&live, "Ana"))).expect("plays");
        assert_eq!(frame(&mut s, &chat, 0.0), Some((0, "Hi".into())));
    }

    #[test]
    fn a_landing_chat_goes_on_where_the_stream_stood() {
        let view = ActionView::default();
        let mut s = ChatPlayback::default();
        let first = ("Ana", "Good morning, Bo!");
        // Line 0 streamed and finished, typed and held; line 1 being spoken by Bo.
        let live = stream(&[first], "", Entity::PLACEHOLDER);
        let chat = bubble_chat(&view, Some((&live, "Ana"))).expect("plays");
        assert_eq!(frame(&mut s, &chat, 0.2), Some((0, "Good mor".into())));
        assert_eq!(frame(&mut s, &chat, 0.5), Some((0, first.1.into())));
        let live = stream(&[first], "Hi Ana! It's", Entity::PLACEHOLDER);
        let chat = bubble_chat(&view, Some((&live, "Bo"))).expect("plays");
        // 0.725 s of hold left on line 0, then line 1 starts and types at most what arrived.
        assert_eq!(frame(&mut s, &chat, 1.2), Some((1, "Hi Ana! It's".into())));
        // The conversation lands: the chat action holds the validated lines.
        let landed = ActionView {
            chatting_with: Some("Bo".into()),
            chat: vec![
                (first.0.into(), first.1.into()),
                ("Bo".into(), "Hi Ana! It's going well.".into()),
            ],
            ..Default::default()
        };
        let chat = bubble_chat(&landed, None).expect("the landed chat plays");
        assert!(!chat.open);
        // Not typed again from line 0: line 1 goes on from its 12 characters.
        assert_eq!(
            frame(&mut s, &chat, 0.05),
            Some((1, "Hi Ana! It's g".into()))
        );
        assert_eq!(
            frame(&mut s, &chat, 1.0),
            Some((1, "Hi Ana! It's going well.".into()))
        );
        // After its hold the chat is over, nothing is replayed.
        assert_eq!(frame(&mut s, &chat, 1.0), None);
        assert_eq!(frame(&mut s, &chat, 5.0), None);
    }

    #[test]
    fn a_different_chat_starts_over() {
        let mut s = ChatPlayback::default();
        let one = ActionView {
            chatting_with: Some("Bo".into()),
            chat: vec![("Ana".into(), "One".into())],
            ..Default::default()
        };
        let chat = bubble_chat(&one, None).expect("plays");
        assert_eq!(frame(&mut s, &chat, 3.0), None);
        // A landed chat with another first line is a new replay.
        let other = ActionView {
            chat: vec![("Bo".into(), "Three".into())],
            ..one.clone()
        };
        let chat = bubble_chat(&other, None).expect("plays");
        assert_eq!(frame(&mut s, &chat, 0.0), Some((0, String::new())));
        assert_eq!(s.first_line, Some(("Bo".into(), "Three".into())));
        // So is a new conversation still on its (streamed) first line.
        let live = stream(&[], "Two", Entity::PLACEHOLDER);
        let chat = bubble_chat(&other, Some((&live, "Bo"))).expect("the stream wins");
        assert_eq!(frame(&mut s, &chat, 0.025), Some((0, "T".into())));
        assert_eq!(s.first_line, None);
        // A persona in no chat plays nothing.
        assert_eq!(bubble_chat(&ActionView::default(), None), None);
    }

    proptest::proptest! {
        #[test]
        fn typed_text_never_exceeds_what_was_received(
            steps in proptest::collection::vec((0.0f32..0.5, 0usize..12, proptest::bool::ANY), 1..40),
        ) {
            let mut s = ChatPlayback::default();
            let mut received = 0usize;
            let mut typed = 0usize;
            for (dt, grow, finish) in steps {
                received += grow;
                // A closed line may be typed to its end; an open one only to what arrived.
                let shown = chat_playback(&mut s, &[received], !finish, dt, 40.0, 1.0);
                if let Some((line, visible)) = shown {
                    proptest::prop_assert_eq!(line, 0);
                    proptest::prop_assert!(visible <= received);
                    proptest::prop_assert!(visible >= typed, "typing went back");
                    typed = visible;
                }
                if finish {
                    break;
                }
            }
        }
    }

    #[test]
    fn dialogue_splits_emoji_into_their_own_runs() {
        let run = |t: &str, e| (t.to_string(), e);
        assert_eq!(chat_runs(""), vec![]);
        assert_eq!(chat_runs("Hi Bo!"), vec![run("Hi Bo!", false)]);
        assert_eq!(
            chat_runs("Coffee ☕\u{FE0F} at 5? 😀😀"),
            vec![
                run("Coffee ", false),
                run("☕", true),
                run(" at 5? ", false),
                run("😀😀", true)
            ]
        );
        // Joined sequences fall apart; skin tones stay; keycaps lose their mark.
        assert_eq!(chat_runs("🧑\u{200D}🍳"), vec![run("🧑🍳", true)]);
        assert_eq!(chat_runs("👋🏽 hi"), vec![run("👋🏽", true), run(" hi", false)]);
        assert_eq!(chat_runs("#\u{FE0F}\u{20E3}1"), vec![run("#1", false)]);
    }

    /// The texts and kinds of a chat text's spans.
    fn spans_of(app: &mut App, text: Entity) -> Vec<(Entity, String, bool)> {
        let world = app.world();
        let Some(children) = world.get::<Children>(text) else {
            return Vec::new();
        };
        children
            .iter()
            .filter_map(|e| {
                let span = world.get::<TextSpan>(e)?;
                let color = world.get::<TextColor>(e)?;
                Some((e, span.0.clone(), color.0 == Color::WHITE))
            })
            .collect()
    }

    #[test]
    fn chat_lines_become_spans_updated_in_place_while_typing() {
        let mut app = App::new();
        app.init_resource::<EmojiFont>()
            .init_resource::<Assets<Font>>()
            .add_systems(Update, draw_chat_lines);
        let text = app
            .world_mut()
            .spawn((ChatLine("Hi ".into()), ChatSpanKinds::default()))
            .id();
        app.update();
        let first = spans_of(&mut app, text);
        assert_eq!(first.len(), 1);
        assert_eq!(first[0].1, "Hi ");
        // The typewriter adds a character: the same span is updated.
        app.world_mut()
            .entity_mut(text)
            .insert(ChatLine("Hi B".into()));
        app.update();
        let typed = spans_of(&mut app, text);
        assert_eq!(typed.len(), 1);
        assert_eq!((typed[0].0, typed[0].1.as_str()), (first[0].0, "Hi B"));
        // An emoji arrives: spans are rebuilt, the emoji one untinted.
        app.world_mut()
            .entity_mut(text)
            .insert(ChatLine("Hi Bo ☕!".into()));
        app.update();
        let runs: Vec<(String, bool)> = spans_of(&mut app, text)
            .into_iter()
            .map(|(_, t, white)| (t, white))
            .collect();
        // Without an emoji font the emoji span keeps the text's font and colour.
        assert_eq!(
            runs,
            vec![
                ("Hi Bo ".into(), false),
                ("☕".into(), false),
                ("!".into(), false)
            ]
        );
        assert!(app.world().get_entity(first[0].0).is_err(), "old span gone");
        // With the emoji font, the emoji span is drawn in it, in white.
        let font = app
            .world_mut()
            .resource_mut::<Assets<Font>>()
            .reserve_handle();
        app.world_mut().resource_mut::<EmojiFont>().handle = Some(font.clone());
        app.world_mut()
            .entity_mut(text)
            .insert(ChatLine("☕ ok".into()));
        app.update();
        let spans = spans_of(&mut app, text);
        assert_eq!(spans.len(), 2);
        let fonts: Vec<bool> = spans
            .iter()
            .map(|(e, _, _)| {
                app.world()
                    .get::<TextFont>(*e)
                    .is_some_and(|f| f.font == FontSource::Handle(font.clone()))
            })
            .collect();
        assert_eq!(fonts, vec![true, false]);
        assert_eq!(
            spans.iter().map(|(_, _, w)| *w).collect::<Vec<_>>(),
            vec![true, false]
        );
        // An empty line has no spans.
        app.world_mut().entity_mut(text).insert(ChatLine::default());
        app.update();
        assert!(spans_of(&mut app, text).is_empty());
    }

    #[test]
    fn a_group_line_is_typed_held_and_gone() {
        let line = "Has anyone tried the new bread? 🍞";
        let chars = line.chars().count();
        assert_eq!(group_line_shown(line, 0.0).as_deref(), Some(""));
        let half = group_line_shown(line, chars as f32 / 2.0 / TYPE_CHARS_PER_SEC).expect("typing");
        assert!(half.chars().count() >= chars / 2 - 1 && half.chars().count() <= chars / 2 + 1);
        assert!(line.starts_with(&half));
        let typed = chars as f32 / TYPE_CHARS_PER_SEC;
        assert_eq!(group_line_shown(line, typed + 0.1).as_deref(), Some(line));
        assert_eq!(group_line_shown(line, typed + LINE_HOLD_SECS + 0.01), None);
        assert_eq!(group_line_shown("", 0.0), None);
        assert_eq!(group_line_shown("👍", 0.5).as_deref(), Some("👍"));
    }

    #[test]
    fn a_personas_group_line_is_kept_for_its_bubble_and_a_game_post_is_not() {
        let mut app = App::new();
        app.add_plugins(MinimalPlugins)
            .init_resource::<GroupSpeech>()
            .add_message::<GroupLineSpoken>()
            .add_systems(Update, hear_group_lines);
        let speaker = app.world_mut().spawn_empty().id();
        app.world_mut().write_message(GroupLineSpoken {
            stream: crate::group::StreamKey::Arena("t:cafe:counter".into()),
            seq: 1,
            speaker: "Ana".into(),
            persona: Some(speaker),
            text: "🎉".into(),
            emoji: true,
            time: chrono::NaiveDateTime::default(),
        });
        app.world_mut().write_message(GroupLineSpoken {
            stream: crate::group::StreamKey::Channel("board".into()),
            seq: 2,
            speaker: "the mayor".into(),
            persona: None,
            text: "Market on Sunday".into(),
            emoji: false,
            time: chrono::NaiveDateTime::default(),
        });
        app.update();
        let speech = app.world().resource::<GroupSpeech>();
        assert_eq!(speech.0.len(), 1, "a post by game code has no bubble");
        assert_eq!(speech.0.get(&speaker).map(|(t, _)| t.as_str()), Some("🎉"));
    }

    #[test]
    fn a_replays_recorded_line_is_shown_whole_in_the_dialogue_bubble() {
        let mut app = App::new();
        app.add_plugins(MinimalPlugins)
            .init_resource::<GroupSpeech>()
            .add_systems(Update, play_chats);
        let recorded = RecordedBubble {
            kind: crate::output::BubbleKind::Group,
            text: "Anyone for more coffee? ☕".into(),
            step: 4407,
        };
        let mut line = Entity::PLACEHOLDER;
        let mut bubble = Entity::PLACEHOLDER;
        let ada = app
            .world_mut()
            .spawn((
                Persona,
                ReplayActor,
                Name::new("Ada"),
                ChatPlayback::default(),
                recorded.clone(),
            ))
            .with_children(|persona| {
                bubble = persona
                    .spawn((ChatBubble, Visibility::Hidden))
                    .with_children(|b| {
                        line = b.spawn((ChatText, ChatLine::default())).id();
                    })
                    .id();
            })
            .id();
        app.update();
        let world = app.world();
        assert_eq!(
            world.get::<ChatLine>(line),
            Some(&ChatLine(recorded.text.clone())),
            "whole at once, not typed"
        );
        assert_eq!(
            world.get::<Visibility>(bubble),
            Some(&Visibility::Inherited)
        );
        // The replay takes it away: the bubble goes.
        app.world_mut().entity_mut(ada).remove::<RecordedBubble>();
        app.update();
        let world = app.world();
        assert_eq!(world.get::<ChatLine>(line), Some(&ChatLine::default()));
        assert_eq!(world.get::<Visibility>(bubble), Some(&Visibility::Hidden));
    }

    #[test]
    fn the_shown_group_lines_are_named_and_typed_so_far() {
        let (ana, bo, gone) = (
            Entity::from_raw_u32(1).expect("an index"),
            Entity::from_raw_u32(2).expect("an index"),
            Entity::from_raw_u32(3).expect("an index"),
        );
        let mut speech = GroupSpeech::default();
        speech.0.insert(ana, ("Morning!".into(), 0.1));
        speech.0.insert(bo, ("Over".into(), 60.0));
        speech.0.insert(gone, ("Nobody knows me".into(), 0.5));
        let names = |e: Entity| match e.index_u32() {
            1 => Some("Ana"),
            2 => Some("Bo"),
            _ => None,
        };
        // Ana's line is being typed (4 characters in 0.1 s at 40/s); Bo's is over; a speaker
        // without a name is left out.
        assert_eq!(speech.shown(names), vec!["Ana: Morn".to_string()]);
    }

    #[test]
    fn empty_chat_plays_nothing() {
        let mut s = ChatPlayback::default();
        assert_eq!(chat_playback(&mut s, &[], false, 1.0, 40.0, 1.0), None);
    }

    #[test]
    fn emoji_keep_only_what_the_font_draws() {
        assert_eq!(bubble_emoji(" ☕ "), "☕");
        assert_eq!(bubble_emoji("😴💤"), "😴💤");
        // Variation selectors, joiners, letters and digits would crash the text renderer.
        assert_eq!(bubble_emoji("☕\u{FE0F}"), "☕");
        assert_eq!(bubble_emoji("🧑\u{200D}🍳"), "🧑🍳");
        assert_eq!(bubble_emoji("eating 🍝!"), "🍝");
        assert_eq!(bubble_emoji("#1"), "");
        // Skin tones stay.
        assert_eq!(bubble_emoji("👋🏽"), "👋🏽");
        assert_eq!(
            bubble_emoji("🍳🍳🍳🍳🍳🍳🍳🍳").chars().count(),
            MAX_EMOJI_CHARS
        );
        assert_eq!(bubble_emoji(""), "");
    }

    #[test]
    fn font_magic() {
        assert!(is_font_file(&[0, 1, 0, 0, 9]));
        assert!(is_font_file(b"OTTO...."));
        assert!(!is_font_file(b"\x89PNG"));
        assert!(!is_font_file(b"ab"));
    }

    #[test]
    fn emoji_font_candidates_prefer_the_environment_then_the_crate() {
        let list = emoji_font_candidates();
        assert!(
            list.iter()
                .any(|p| p.ends_with("assets/fonts/NotoColorEmoji.ttf"))
        );
        assert!(list.iter().any(|p| p.starts_with("/usr/share/fonts")));
    }
}
