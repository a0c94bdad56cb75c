//! The talk box: the player talks to the selected persona from the inspector (SPEC §7).
//!
//! Select a persona, press `Enter` (or click the box), type, press `Enter` again: the text goes
//! out as [`DialogueRequest::say`] from [`PLAYER`] — or, with *inner voice* ticked, as
//! [`DialogueRequest::whisper`], a thought the persona will remember having had — or, with
//! *to everyone here* ticked, as [`DialogueRequest::to_group`]: said into the group
//! conversation around the persona (the inspector's *Group conversations* section shows the
//! stream and who answers; one to one when there is no group). The dialogue
//! pipeline answers off the main thread; the box shows the exchange as it happens — the
//! persona's [`DialogueStream`] (the reply as the model writes it and one line per tool it
//! used) under the session's earlier turns ([`DialogueSessions`]) — and the reply also types out
//! in the persona's bubble ([`BubblesPlugin`](super::BubblesPlugin)).
//!
//! While the box has the keyboard, the game's own keys (speed digits, camera, `Tab`, `F`, `Esc`,
//! quick save) ignore what is typed: every shortcut system checks
//! [`EguiWantsInput`](bevy_egui::input::EguiWantsInput).
//!
//! What the player types is untrusted: it is cut to [`MAX_MESSAGE_CHARS`] here and neutralised
//! by the dialogue pipeline (no forged tool calls, no `<think>` or pre-start blocks) before any
//! prompt sees it. The box itself is plain data: [`talk_request`] turns a draft into a request
//! and [`talk_lines`] the dialogue state into the lines shown, both pure; [`TalkView`] keeps the
//! lines drawn in the last frame for game code and tests.

use bevy::prelude::*;
use bevy_egui::egui;

use crate::dialogue::{DialogueRequest, DialogueSessions, DialogueStream, SessionTurn};

/// The speaker name the talk box sends as.
pub const PLAYER: &str = "Player";
/// The most characters one message may have (the box stops taking more).
pub const MAX_MESSAGE_CHARS: usize = 2_000;
/// Earlier turns of the session shown above the current one.
pub(crate) const SHOWN_TURNS: usize = 4;

/// The talk box's draft and mode.
#[derive(Resource, Debug, Clone, Default, PartialEq, Eq)]
pub struct TalkBox {
    /// What is typed so far.
    pub draft: String,
    /// Send as an inner voice (a whisper) instead of saying it.
    pub whisper: bool,
    /// Say it to everyone in the group conversation around the persona (a whisper wins).
    pub to_group: bool,
    /// The persona the draft is for (a new selection clears it).
    pub persona: Option<Entity>,
}

/// One line of the talk box.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TalkLine {
    /// What someone said to the persona: speaker, text.
    Said(String, String),
    /// What the persona answered (`true` while it is still being written).
    Replied(String, bool),
    /// A tool the persona used this turn, as a player reads it.
    Tool(String),
}

impl TalkLine {
    /// The line as plain text (`"Player: hello"`, `"Mira: hi"`, `"📅 added: …"`).
    pub fn text(&self, persona: &str) -> String {
        match self {
            Self::Said(speaker, text) => format!("{speaker}: {text}"),
            Self::Replied(text, true) => format!("{persona}: {text}…"),
            Self::Replied(text, false) => format!("{persona}: {text}"),
            Self::Tool(line) => line.clone(),
        }
    }
}

/// The lines drawn in the talk box in the last frame (empty when no persona is selected).
#[derive(Resource, Debug, Clone, Default, PartialEq, Eq)]
pub struct TalkView {
    /// The persona the box talks to.
    pub persona: Option<Entity>,
    /// Its lines, oldest first, as [`TalkLine::text`] writes them.
    pub lines: Vec<String>,
}

/// The request a draft becomes, or `None` for a draft with nothing to say. Surrounding
/// whitespace is dropped and the text cut to [`MAX_MESSAGE_CHARS`] characters.
pub fn talk_request(
    persona: Entity,
    draft: &str,
    whisper: bool,
    to_group: bool,
) -> Option<DialogueRequest> {
    let text = draft.trim();
    if text.is_empty() {
        return None;
    }
    let text: String = text.chars().take(MAX_MESSAGE_CHARS).collect();
    Some(if whisper {
        DialogueRequest::whisper(persona, text)
    } else if to_group {
        DialogueRequest::to_group(persona, PLAYER, text)
    } else {
        DialogueRequest::say(persona, PLAYER, text)
    })
}

/// What the box shows: the last `SHOWN_TURNS` finished turns with the player, then the
/// current turn from the persona's [`DialogueStream`] (any speaker: a whisper or a game's own
/// request shows too) unless it is already the last finished turn.
pub fn talk_lines(turns: &[SessionTurn], stream: Option<&DialogueStream>) -> Vec<TalkLine> {
    let mut lines = Vec::new();
    let current = stream.filter(|s| !s.message.is_empty());
    // A finished say-turn is both the stream and the session's last turn: show it once.
    let last_is_current = current.is_some_and(|s| {
        !s.running
            && s.speaker == PLAYER
            && turns
                .last()
                .is_some_and(|t| t.message == s.message && t.reply == s.partial)
    });
    let shown = if last_is_current {
        &turns[..turns.len() - 1]
    } else {
        turns
    };
    for turn in &shown[shown.len().saturating_sub(SHOWN_TURNS)..] {
        lines.push(TalkLine::Said(PLAYER.to_owned(), turn.message.clone()));
        lines.push(TalkLine::Replied(turn.reply.clone(), false));
    }
    if let Some(s) = current {
        lines.push(TalkLine::Said(s.speaker.clone(), s.message.clone()));
        lines.extend(s.tool_lines.iter().cloned().map(TalkLine::Tool));
        if s.running || !s.partial.is_empty() {
            lines.push(TalkLine::Replied(s.partial.clone(), s.running));
        }
    }
    lines
}

/// What the talk box reads and writes (a parameter of the inspector's drawing system).
#[derive(bevy::ecs::system::SystemParam)]
pub(super) struct Talk<'w, 's> {
    draft: ResMut<'w, TalkBox>,
    view: ResMut<'w, TalkView>,
    sessions: Res<'w, DialogueSessions>,
    streams: Query<'w, 's, &'static DialogueStream>,
    /// `None` when the app has no dialogue pipeline (a replay, or a game without
    /// `DialoguePlugin`): then there is no box to draw.
    requests: Option<MessageWriter<'w, DialogueRequest>>,
}

impl Talk<'_, '_> {
    /// Nothing to talk to (no persona selected, or a replay's).
    pub(super) fn clear(&mut self) {
        self.view.set_if_neq(TalkView::default());
    }

    /// The talk box's section of the inspector for `persona` (`name`): the lines, the text
    /// field and the inner-voice toggle. A sent message goes out as a [`DialogueRequest`].
    pub(super) fn section(&mut self, ui: &mut egui::Ui, persona: Entity, name: &str) {
        let Some(requests) = self.requests.as_mut() else {
            self.clear();
            return;
        };
        let talk = self.draft.as_mut();
        if talk.persona != Some(persona) {
            talk.persona = Some(persona);
            talk.draft.clear();
        }
        ui.label(egui::RichText::new(format!("Talk to {name}")).strong());
        let lines = talk_lines(
            self.sessions.turns(persona, PLAYER),
            self.streams.get(persona).ok(),
        );
        let texts: Vec<String> = lines.iter().map(|l| l.text(name)).collect();
        for (line, text) in lines.iter().zip(&texts) {
            let rich = egui::RichText::new(text).small();
            ui.label(match line {
                TalkLine::Said(..) => rich.color(egui::Color32::LIGHT_BLUE),
                TalkLine::Replied(_, true) => rich.italics(),
                TalkLine::Replied(_, false) => rich,
                TalkLine::Tool(_) => rich.color(egui::Color32::from_rgb(235, 190, 110)),
            });
        }
        self.view.set_if_neq(TalkView {
            persona: Some(persona),
            lines: texts,
        });

        let hint = if talk.whisper {
            "a thought for them (Enter sends)"
        } else if talk.to_group {
            "say it to everyone here (Enter sends)"
        } else {
            "say something (Enter sends)"
        };
        let field = ui.add(
            egui::TextEdit::singleline(&mut talk.draft)
                .hint_text(hint)
                .char_limit(MAX_MESSAGE_CHARS)
                .desired_width(f32::INFINITY),
        );
        let enter = ui.input(|i| i.key_pressed(egui::Key::Enter));
        let send_clicked = ui
            .horizontal(|ui| {
                ui.checkbox(&mut talk.whisper, "inner voice")
                    .on_hover_text("a whisper: stored as the persona's own thought");
                ui.checkbox(&mut talk.to_group, "to everyone here")
                    .on_hover_text("said into the group conversation around them");
                ui.button("Send").clicked()
            })
            .inner;
        if (field.lost_focus() && enter) || send_clicked {
            if let Some(request) = talk_request(persona, &talk.draft, talk.whisper, talk.to_group) {
                requests.write(request);
                talk.draft.clear();
            }
        } else if enter && !field.has_focus() && !ui.ctx().egui_wants_keyboard_input() {
            // Enter with nothing focused opens the box, as in most games' chat.
            field.request_focus();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(message: &str, reply: &str) -> SessionTurn {
        SessionTurn {
            message: message.into(),
            reply: reply.into(),
            kept_prestart: String::new(),
        }
    }

    #[test]
    fn a_draft_becomes_a_say_a_whisper_or_a_group_line_and_blank_drafts_nothing() {
        let p = Entity::from_raw_u32(7).expect("an entity index");
        assert_eq!(
            talk_request(p, "  hello there \n", false, false),
            Some(DialogueRequest::say(p, PLAYER, "hello there"))
        );
        assert_eq!(
            talk_request(p, "the bakery is closing", true, false),
            Some(DialogueRequest::whisper(p, "the bakery is closing"))
        );
        assert_eq!(
            talk_request(p, "Morning, all!", false, true),
            Some(DialogueRequest::to_group(p, PLAYER, "Morning, all!"))
        );
        // A whisper stays a whisper.
        assert_eq!(
            talk_request(p, "quiet", true, true),
            Some(DialogueRequest::whisper(p, "quiet"))
        );
        assert_eq!(talk_request(p, " \t\n", false, false), None);
        let long = "é".repeat(MAX_MESSAGE_CHARS + 50);
        let Some(DialogueRequest {
            mode: crate::dialogue::DialogueMode::Say(text),
            ..
        }) = talk_request(p, &long, false, false)
        else {
            panic!("a long draft is still sent");
        };
        assert_eq!(text.chars().count(), MAX_MESSAGE_CHARS);
    }

    #[test]
    fn lines_show_earlier_turns_then_the_running_one_with_its_tools() {
        let turns = vec![turn("hi", "hello"), turn("busy?", "a little")];
        let stream = DialogueStream {
            speaker: PLAYER.into(),
            message: "meet at noon?".into(),
            partial: "Sure, I'll".into(),
            tool_lines: vec!["📅 added: lunch at Cafe, 12:00".into()],
            running: true,
        };
        let texts: Vec<String> = talk_lines(&turns, Some(&stream))
            .iter()
            .map(|l| l.text("Mira"))
            .collect();
        assert_eq!(
            texts,
            [
                "Player: hi",
                "Mira: hello",
                "Player: busy?",
                "Mira: a little",
                "Player: meet at noon?",
                "📅 added: lunch at Cafe, 12:00",
                "Mira: Sure, I'll…",
            ]
        );
    }

    #[test]
    fn a_finished_turn_shows_once_and_old_turns_are_cut() {
        let mut turns: Vec<SessionTurn> = (0..9)
            .map(|i| turn(&format!("m{i}"), &format!("r{i}")))
            .collect();
        turns.push(turn("last", "done"));
        let stream = DialogueStream {
            speaker: PLAYER.into(),
            message: "last".into(),
            partial: "done".into(),
            tool_lines: Vec::new(),
            running: false,
        };
        let lines = talk_lines(&turns, Some(&stream));
        let texts: Vec<String> = lines.iter().map(|l| l.text("Mira")).collect();
        assert_eq!(texts.len(), 2 * SHOWN_TURNS + 2);
        assert_eq!(texts.first().map(String::as_str), Some("Player: m5"));
        assert_eq!(
            texts.iter().filter(|t| t.as_str() == "Mira: done").count(),
            1
        );
        // A whisper is no session turn: it shows from the stream under the player's turns.
        let whisper = DialogueStream {
            speaker: "inner voice".into(),
            message: "you left the oven on".into(),
            partial: "I should check the oven.".into(),
            tool_lines: Vec::new(),
            running: false,
        };
        let texts: Vec<String> = talk_lines(&turns, Some(&whisper))
            .iter()
            .map(|l| l.text("Mira"))
            .collect();
        assert_eq!(
            texts[texts.len() - 2..],
            [
                "inner voice: you left the oven on",
                "Mira: I should check the oven."
            ]
        );
        assert!(talk_lines(&[], None).is_empty());
    }
}
