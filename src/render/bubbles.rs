//! Speech and thought over the personas' heads:
//! - an **emoji bubble** with the current action's emoji (`act_pronunciatio`) in colour, drawn
//!   with Noto Color Emoji (found in the crate's `assets/fonts/`, `$SMALLVILLE_EMOJI_FONT`, or
//!   the system's font folders — `scripts/install-deps.sh` installs it on Debian);
//! - a **dialogue bubble** over whoever speaks, replaying the current chat line by line with a
//!   typewriter effect (lines that arrive one at a time, as a streaming backend delivers them,
//!   are typed as they come);
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
use crate::persist::ReplayActor;
use crate::persona::{ActionView, Mind, Persona};
use crate::settings::AgentSettings;

/// Characters typed per real second in dialogue bubbles.
pub const TYPE_CHARS_PER_SEC: f32 = 40.0;
/// Seconds a finished line stays up before the next one starts.
pub const LINE_HOLD_SECS: f32 = 1.6;
/// Widest a dialogue bubble's text gets before it wraps (world units).
pub const CHAT_WRAP_WIDTH: f32 = 190.0;
/// At most this many characters of `act_pronunciatio` are shown (models sometimes ramble).
pub const MAX_EMOJI_CHARS: usize = 6;

/// The colour emoji font, if one was found. Without it emoji fall back to the default font.
#[derive(Resource, Debug, Clone, Default)]
pub struct EmojiFont {
    /// The loaded font.
    pub handle: Option<Handle<Font>>,
    /// Where it was loaded from.
    pub path: Option<PathBuf>,
}

/// Where to look for a colour emoji font, first match wins.
pub fn emoji_font_candidates() -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(path) = std::env::var("SMALLVILLE_EMOJI_FONT")
        && !path.is_empty()
    {
        out.push(PathBuf::from(path));
    }
    let crate_fonts = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/fonts");
    out.push(crate_fonts.join("NotoColorEmoji.ttf"));
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
pub fn is_font_file(bytes: &[u8]) -> bool {
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
pub fn bubble_emoji(text: &str) -> String {
    text.chars()
        .filter(|&c| is_drawable_emoji(c))
        .take(MAX_EMOJI_CHARS)
        .collect()
}

/// Whether `c` is a pictograph or symbol with its own image in a colour emoji font.
pub fn is_drawable_emoji(c: char) -> bool {
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
    /// The first line of the chat being replayed (a new first line starts a new replay).
    pub first_line: Option<(String, String)>,
    /// The line being typed.
    pub line: usize,
    /// Real seconds since that line started.
    pub line_elapsed: f32,
}

/// Advances a replay by `dt` seconds over lines of the given character counts; returns the
/// line to show and how many of its characters are visible, or `None` once every line has been
/// typed and held. New lines appended later are picked up where the replay stands.
pub fn chat_playback(
    state: &mut ChatPlayback,
    line_chars: &[usize],
    dt: f32,
    chars_per_sec: f32,
    hold_secs: f32,
) -> Option<(usize, usize)> {
    state.line_elapsed += dt.max(0.0);
    loop {
        let chars = *line_chars.get(state.line)?;
        let typing = chars as f32 / chars_per_sec.max(1.0);
        if state.line_elapsed < typing + hold_secs {
            let visible = ((state.line_elapsed * chars_per_sec) as usize).min(chars);
            return Some((state.line, visible));
        }
        if state.line + 1 >= line_chars.len() {
            // Hold the last line until more arrive (or the chat ends): a streamed line may
            // still be coming.
            state.line_elapsed = typing + hold_secs;
            return None;
        }
        state.line_elapsed -= typing + hold_secs;
        state.line += 1;
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
/// The text inside a dialogue bubble.
#[derive(Component, Debug, Clone, Copy)]
pub struct ChatText;
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
            .add_systems(Startup, (load_emoji_font, setup_bubble_frame))
            .add_systems(
                Update,
                (
                    attach_bubbles,
                    update_emoji_bubbles,
                    update_thinking_markers,
                    play_chats,
                )
                    .chain()
                    .after(super::sprites::PersonaSpritesSystems),
            )
            .add_systems(PostUpdate, fit_bubbles_to_text);
    }
}

fn load_emoji_font(mut fonts: ResMut<Assets<Font>>, mut emoji: ResMut<EmojiFont>) {
    for path in emoji_font_candidates() {
        let Ok(bytes) = std::fs::read(&path) else {
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
                        Text2d::new(""),
                        TextFont::from_font_size(11.0),
                        TextColor(Color::srgb(0.1, 0.1, 0.14)),
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

fn play_chats(
    time: Res<Time>,
    mut personas: Query<(Entity, &Name, &ActionView, &mut ChatPlayback), With<Persona>>,
    children: Query<&Children>,
    mut bubbles: Query<&mut Visibility, With<ChatBubble>>,
    mut texts: Query<&mut Text2d, With<ChatText>>,
) {
    let dt = time.delta_secs();
    let names: HashMap<String, Entity> = personas
        .iter()
        .map(|(e, name, _, _)| (name.as_str().to_owned(), e))
        .collect();
    // Both partners usually hold the same chat: keep, per speaker, the longest text typed.
    let mut speaking: HashMap<Entity, String> = HashMap::new();
    for (entity, _, view, mut playback) in &mut personas {
        let first = view.chat.first().cloned();
        if view.chatting_with.is_none() || first.is_none() {
            if *playback != ChatPlayback::default() {
                *playback = ChatPlayback::default();
            }
            continue;
        }
        if playback.first_line != first {
            *playback = ChatPlayback {
                first_line: first,
                ..Default::default()
            };
        }
        let lengths: Vec<usize> = view.chat.iter().map(|(_, l)| l.chars().count()).collect();
        let Some((index, visible)) = chat_playback(
            &mut playback,
            &lengths,
            dt,
            TYPE_CHARS_PER_SEC,
            LINE_HOLD_SECS,
        ) else {
            continue;
        };
        let Some((speaker, line)) = view.chat.get(index) else {
            continue;
        };
        let speaker = names.get(speaker.as_str()).copied().unwrap_or(entity);
        let typed: String = line.chars().take(visible).collect();
        let entry = speaking.entry(speaker).or_default();
        if typed.chars().count() > entry.chars().count() {
            *entry = typed;
        }
    }
    for (entity, _, _, _) in &personas {
        let text = speaking.get(&entity);
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
                if let Ok(mut t) = texts.get_mut(text_entity) {
                    let wanted = text.cloned().unwrap_or_default();
                    if t.0 != wanted {
                        t.0 = wanted;
                    }
                }
            }
        }
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
            chat_playback(&mut s, &[20, 8], 0.25, 40.0, 1.0),
            Some((0, 10))
        );
        assert_eq!(
            chat_playback(&mut s, &[20, 8], 0.5, 40.0, 1.0),
            Some((0, 20))
        );
        assert_eq!(
            chat_playback(&mut s, &[20, 8], 0.5, 40.0, 1.0),
            Some((0, 20))
        );
        // 1.5 s have passed: line 1 begins, 0.11 s into it 4 chars show.
        assert_eq!(
            chat_playback(&mut s, &[20, 8], 0.36, 40.0, 1.0),
            Some((1, 4))
        );
        // After line 1's 0.2 s typing and 1 s hold, the replay is over.
        assert_eq!(chat_playback(&mut s, &[20, 8], 2.0, 40.0, 1.0), None);
    }

    #[test]
    fn playback_skips_lines_on_a_long_frame_and_resumes_with_new_lines() {
        let mut s = ChatPlayback::default();
        // 3 lines of 4 chars: each takes 0.1 + 1.0 s. 2.32 s lands 0.12 s into line 2.
        assert_eq!(
            chat_playback(&mut s, &[4, 4, 4], 2.32, 40.0, 1.0),
            Some((2, 4))
        );
        assert_eq!(chat_playback(&mut s, &[4, 4, 4], 5.0, 40.0, 1.0), None);
        // A streamed line arrives: it is typed from its start.
        assert_eq!(
            chat_playback(&mut s, &[4, 4, 4, 10], 0.12, 40.0, 1.0),
            Some((3, 4))
        );
    }

    #[test]
    fn empty_chat_plays_nothing() {
        let mut s = ChatPlayback::default();
        assert_eq!(chat_playback(&mut s, &[], 1.0, 40.0, 1.0), None);
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
