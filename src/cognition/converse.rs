//! Reactions and conversations (SPEC §3.5, §3.7).
//!
//! After planning, a persona looks at what it just perceived and may react: **talk** to another
//! persona it sees, or **wait** for one who is using the place it is walking to. The guards are
//! pure (`talk_guards_pass`, `wait_guards_pass`); the model only decides among what the
//! guards allow.
//!
//! A wait changes one mind and happens inside the persona's thought. A conversation needs two
//! minds, so the thought only returns an intent; the dispatcher checks both minds out together
//! and runs `hold_conversation`: turn by turn, each line from the speaker's own memories, then
//! one summary line, and both personas get the chat action inserted into their day.
//!
//! When the conversation is watched (a `ChatStreamSink` is given), each line is asked for with
//! the answer streamed to an `UtteranceWatcher` and reported as finished once validated, so
//! the game can show it as it is spoken ([`chat_stream`](super::chat_stream)). The lines
//! themselves are the same either way.

use chrono::{Duration, NaiveDateTime, Timelike};
use rand::Rng;
use rand_chacha::ChaCha8Rng;

use crate::memory::NodeId;
use crate::persona::{ConversationRecord, EventTriple, MindState, ScheduleItem};
use crate::prompt::{AnswerWatcher, PromptContext, run_prompt, run_prompt_watched};
use crate::settings::AgentSettings;
use crate::world::ActionAddress;

use super::chat_stream::{ChatSide, ChatStreamSink, UtteranceWatcher};
use super::identity::retrieve_statements;
use super::prompts::{
    ConversationSummary, DecideToReact, DecideToTalk, NewDecompositionSchedule, NextUtterance,
    ReactChoice, RelationshipSummary, clock_text, readable_place, transcript,
};
use super::schedule::{reaction_window, schedule_pairs, total_minutes};
use super::vocabulary::{OtherPersona, PlanEvent};
use super::vocabulary::{add_new_action, date_text, minute_of_day};

/// The emoji of a chat action.
pub(crate) const CHAT_EMOJI: &str = "💬";
/// The emoji of a wait action.
pub(crate) const WAIT_EMOJI: &str = "⌛";

/// Picks the event to react to among the newly perceived ones (SPEC §3.5): never the persona's
/// own; another persona's event first (its subject has no `:`); else a random non-idle one.
pub(crate) fn choose_focus(
    mind: &MindState,
    perceived: &[NodeId],
    rng: &mut ChaCha8Rng,
) -> Option<NodeId> {
    let name = &mind.scratch.name;
    let candidates: Vec<NodeId> = perceived
        .iter()
        .copied()
        .filter(|id| {
            mind.associative
                .node(*id)
                .is_some_and(|n| &n.subject != name)
        })
        .collect();
    let persona_event = candidates.iter().copied().find(|id| {
        mind.associative
            .node(*id)
            .is_some_and(|n| !n.subject.contains(':') && !n.is_idle())
    });
    if persona_event.is_some() {
        return persona_event;
    }
    let active: Vec<NodeId> = candidates
        .into_iter()
        .filter(|id| mind.associative.node(*id).is_some_and(|n| !n.is_idle()))
        .collect();
    if active.is_empty() {
        return None;
    }
    active.get(rng.random_range(0..active.len())).copied()
}

/// Whether the persona is waiting (its address is `<waiting> x y`).
pub(crate) fn is_waiting(address: Option<&ActionAddress>) -> bool {
    address.is_some_and(ActionAddress::is_waiting)
}

/// The guards talking and waiting share (SPEC §3.5): both have an action, neither is asleep,
/// waiting or chatting, and it is not the quiet hour.
fn shared_guards_pass(
    mind: &MindState,
    target: &OtherPersona,
    now: NaiveDateTime,
    quiet_hour: u32,
) -> bool {
    let s = &mind.scratch;
    s.act_address.is_some()
        && s.act_description.is_some()
        && target.address.is_some()
        && !s.is_sleeping()
        && !target.sleeping
        && now.hour() != quiet_hour
        && !target.waiting
        && s.chatting_with.is_none()
        && !target.chatting
}

/// The hard guards of talking (SPEC §3.5), before the model is asked: the shared guards, the
/// target's action is known, and the cool-down with the target is over.
pub(crate) fn talk_guards_pass(
    mind: &MindState,
    target: &OtherPersona,
    now: NaiveDateTime,
    quiet_hour: u32,
) -> bool {
    shared_guards_pass(mind, target, now, quiet_hour)
        && !target.description.is_empty()
        && mind
            .scratch
            .chatting_with_buffer
            .get(&target.name)
            .copied()
            .unwrap_or(0)
            == 0
}

/// The guards of waiting (SPEC §3.5): the shared guards, the persona is on its way somewhere,
/// and both act at the same address.
pub(crate) fn wait_guards_pass(
    mind: &MindState,
    target: &OtherPersona,
    now: NaiveDateTime,
    quiet_hour: u32,
    walking: bool,
) -> bool {
    shared_guards_pass(mind, target, now, quiet_hour)
        && walking
        && mind.scratch.act_address.is_some()
        && mind.scratch.act_address == target.address
}

/// What a persona decided to do about what it perceived.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Reaction {
    /// Start a conversation with this persona.
    Talk(String),
    /// Wait until this time for the persona using the place.
    Wait {
        /// Whom the persona waits for.
        target: String,
        /// Until when.
        until: NaiveDateTime,
    },
}

/// Decides whether and how to react (SPEC §3.5). `memories` are the keyword-related memory
/// descriptions retrieved for the focus event.
#[expect(
    clippy::too_many_arguments,
    reason = "the inputs of SPEC §3.5's decision"
)]
pub(crate) async fn decide_reaction(
    mind: &MindState,
    ctx: &PromptContext,
    settings: &AgentSettings,
    target: &OtherPersona,
    memories: Vec<String>,
    place: &str,
    now: NaiveDateTime,
    walking: bool,
) -> Option<Reaction> {
    let s = &mind.scratch;
    if s.chatting_with.is_some() || is_waiting(s.act_address.as_ref()) {
        return None;
    }
    let activity = s.act_description.clone().unwrap_or_default();
    if talk_guards_pass(mind, target, now, settings.quiet_hour) {
        let last_chat = mind.associative.last_chat_with(&target.name).map(|node| {
            format!(
                "{} — {}",
                node.created.format("%B %d, %I:%M %p"),
                node.description
            )
        });
        let talk = run_prompt(
            ctx,
            &DecideToTalk {
                name: s.name.clone(),
                partner: target.name.clone(),
                time_text: clock_text(minute_of_day(now)),
                place: readable_place(place),
                activity: activity.clone(),
                partner_activity: target.description.clone(),
                memories: memories.clone(),
                last_chat,
            },
        )
        .await
        .value;
        if talk {
            return Some(Reaction::Talk(target.name.clone()));
        }
    }
    if wait_guards_pass(mind, target, now, settings.quiet_hour, walking)
        && let Some(end) = target.end_time
    {
        let until = end - Duration::minutes(1);
        if until <= now {
            return None;
        }
        let choice = run_prompt(
            ctx,
            &DecideToReact {
                name: s.name.clone(),
                partner: target.name.clone(),
                time_text: clock_text(minute_of_day(now)),
                place: readable_place(place),
                activity,
                partner_activity: target.description.clone(),
                memories,
            },
        )
        .await
        .value;
        if choice == ReactChoice::Wait {
            return Some(Reaction::Wait {
                target: target.name.clone(),
                until,
            });
        }
    }
    None
}

/// Inserts a reaction into today's schedule and re-plans the affected window with the model,
/// so the day still sums to 1440 minutes (SPEC §3.5).
pub(crate) async fn insert_into_schedule(
    mind: &mut MindState,
    ctx: &PromptContext,
    now: NaiveDateTime,
    inserted: &str,
    duration: u32,
) {
    let minute = minute_of_day(now);
    let s = &mind.scratch;
    let Some((first, last, start)) = reaction_window(
        &s.f_daily_schedule,
        &s.f_daily_schedule_hourly_org,
        minute,
        duration,
    ) else {
        return;
    };
    let items = schedule_pairs(&s.f_daily_schedule[first..last]);
    let prompt = NewDecompositionSchedule {
        first_name: s.first_name.clone(),
        date_text: date_text(now),
        window_start_minute: start,
        items,
        inserted: inserted.to_string(),
        insert_offset: minute.saturating_sub(start),
        inserted_duration: duration,
    };
    let window: Vec<ScheduleItem> = run_prompt(ctx, &prompt)
        .await
        .value
        .into_iter()
        .map(ScheduleItem::from)
        .collect();
    if total_minutes(&window) == total_minutes(&mind.scratch.f_daily_schedule[first..last])
        && !window.is_empty()
    {
        mind.scratch.f_daily_schedule.splice(first..last, window);
    }
}

/// Starts a wait (SPEC §3.5 "wait reaction").
pub(crate) async fn start_wait(
    mind: &mut MindState,
    ctx: &PromptContext,
    now: NaiveDateTime,
    tile: crate::world::TileCoord,
    target: &OtherPersona,
    until: NaiveDateTime,
) {
    let minutes = u32::try_from((until - now).num_minutes().max(1)).unwrap_or(1);
    let description = format!("waiting to start {}", target.description);
    insert_into_schedule(mind, ctx, now, &description, minutes).await;
    let name = mind.scratch.name.clone();
    add_new_action(
        mind,
        now,
        ActionAddress::Waiting(tile),
        minutes,
        description.clone(),
        WAIT_EMOJI.to_string(),
        EventTriple::new(name, "waiting to start", target.description.clone()),
        None,
    );
    mind.scratch.chatting_with = None;
    mind.scratch.chat.clear();
    mind.scratch.chatting_end_time = None;
}

/// One side of a conversation: the persona's action as the other sees it.
#[derive(Debug, Clone)]
pub(crate) struct SpeakerView {
    /// What the persona is doing.
    pub activity: String,
    /// Where (`w:s:a`).
    pub place: String,
}

/// Where a line goes when the conversation is watched: the stream and the line's side.
#[derive(Clone, Copy)]
struct Watched<'a> {
    sink: &'a ChatStreamSink,
    side: ChatSide,
}

/// The next line of `speaker` to `listener` (SPEC §3.7). The relationship summary comes
/// from `relationship_memo` when it holds one (lean mode keeps the first of a conversation
/// there).
#[expect(
    clippy::too_many_arguments,
    reason = "the inputs of SPEC §3.7's utterance"
)]
async fn next_line(
    speaker: &mut MindState,
    listener_name: &str,
    speaker_view: &SpeakerView,
    listener_view: &SpeakerView,
    conversation: &[(String, String)],
    ctx: &PromptContext,
    settings: &AgentSettings,
    now: NaiveDateTime,
    watched: Option<Watched<'_>>,
    relationship_memo: &mut Option<String>,
) -> (String, bool) {
    let name = speaker.scratch.name.clone();
    // The line's calls are the speaker's: a failed one is reported as theirs.
    ctx.speaking_for(Some(&name));
    let relationship = match relationship_memo.clone() {
        Some(known) => known,
        None => {
            let about = retrieve_statements(
                speaker,
                ctx,
                settings,
                &[listener_name.to_string()],
                now,
                50,
            )
            .await;
            let relationship = run_prompt(
                ctx,
                &RelationshipSummary {
                    name: name.clone(),
                    partner: listener_name.to_string(),
                    memories: about,
                },
            )
            .await
            .value;
            if settings.lean.relationship_once {
                *relationship_memo = Some(relationship.clone());
            }
            relationship
        }
    };
    let recent: Vec<(String, String)> = conversation.iter().rev().take(4).rev().cloned().collect();
    let mut points = vec![
        relationship.clone(),
        format!("{listener_name} is {}", listener_view.activity),
    ];
    if !recent.is_empty() {
        points.push(transcript(&recent));
    }
    let memories = retrieve_statements(speaker, ctx, settings, &points, now, 15).await;
    let previous_chat = speaker
        .associative
        .last_chat_with(listener_name)
        .filter(|node| now - node.created < Duration::minutes(settings.chat_context_minutes))
        .map(|node| {
            let lines: Vec<(String, String)> = node
                .filling
                .chat_lines()
                .iter()
                .map(|l| (l.speaker.clone(), l.line.clone()))
                .collect();
            transcript(&lines)
        });
    let prompt = NextUtterance {
        identity: speaker.scratch.identity_summary(),
        name: name.clone(),
        partner: listener_name.to_string(),
        time_text: clock_text(minute_of_day(now)),
        place: readable_place(&speaker_view.place),
        activity: speaker_view.activity.clone(),
        partner_activity: listener_view.activity.clone(),
        relationship,
        memories,
        previous_chat,
        conversation: conversation.to_vec(),
    };
    let line = conversation.len();
    let utterance = match watched {
        Some(Watched { sink, side }) => {
            let mut watcher: UtteranceWatcher = sink.watch_line(line, side, &name);
            let watcher: &mut dyn AnswerWatcher = &mut watcher;
            let utterance = run_prompt_watched(ctx, &prompt, Some(watcher)).await.value;
            // The validated line is the one that counts, whatever was shown on the way.
            sink.line_finished(line, side, &name, &utterance.text).await;
            utterance
        }
        None => run_prompt(ctx, &prompt).await.value,
    };
    (utterance.text, utterance.end)
}

/// Whether `line` repeats a line already said in the conversation (ignoring case, spacing and
/// punctuation): a conversation going round in circles ends there, as small chat models
/// otherwise echo one greeting for every round the settings allow.
pub(crate) fn said_before(lines: &[(String, String)], line: &str) -> bool {
    let plain = |text: &str| -> String {
        text.chars()
            .filter(|c| c.is_alphanumeric() || c.is_whitespace())
            .flat_map(char::to_lowercase)
            .collect::<String>()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    let line = plain(line);
    !line.is_empty() && lines.iter().any(|(_, said)| plain(said) == line)
}

/// Minutes a conversation takes: `ceil(chars / 8 / 30)`, at least 1 (SPEC §3.7).
pub(crate) fn conversation_minutes(lines: &[(String, String)]) -> u32 {
    let chars: usize = lines.iter().map(|(_, l)| l.chars().count()).sum();
    let minutes = (chars as f64 / 8.0 / 30.0).ceil() as u32;
    minutes.max(1)
}

/// What a held conversation produced, for the diaries.
#[derive(Debug, Clone)]
pub(crate) struct ConversationOutcome {
    /// The lines, `(speaker, line)`.
    pub lines: Vec<(String, String)>,
    /// The one-line summary ("conversing about …").
    pub summary: String,
    /// When it ends.
    pub end: NaiveDateTime,
}

/// Generates the conversation between `a` (who started it) and `b` (SPEC §3.7), reporting
/// each line to `stream` as it is spoken when the conversation is watched.
pub(crate) async fn generate_conversation(
    a: &mut MindState,
    b: &mut MindState,
    views: (&SpeakerView, &SpeakerView),
    ctx: &PromptContext,
    settings: &AgentSettings,
    now: NaiveDateTime,
    stream: Option<&ChatStreamSink>,
) -> Vec<(String, String)> {
    let mut lines: Vec<(String, String)> = Vec::new();
    let (a_name, b_name) = (a.scratch.name.clone(), b.scratch.name.clone());
    let watched = |side| stream.map(|sink| Watched { sink, side });
    // Lean mode's `relationship_once`: each side sums up the other once per conversation.
    let (mut a_knows, mut b_knows) = (None, None);
    for _ in 0..settings.max_chat_rounds {
        let (line, end) = next_line(
            a,
            &b_name,
            views.0,
            views.1,
            &lines,
            ctx,
            settings,
            now,
            watched(ChatSide::Initiator),
            &mut a_knows,
        )
        .await;
        let end = end || said_before(&lines, &line);
        lines.push((a_name.clone(), line));
        if end {
            break;
        }
        let (line, end) = next_line(
            b,
            &a_name,
            views.1,
            views.0,
            &lines,
            ctx,
            settings,
            now,
            watched(ChatSide::Partner),
            &mut b_knows,
        )
        .await;
        let end = end || said_before(&lines, &line);
        lines.push((b_name.clone(), line));
        if end {
            break;
        }
    }
    lines
}

/// Gives one side the chat action (SPEC §3.5 "chat reaction").
#[expect(clippy::too_many_arguments, reason = "one side of a chat")]
pub(crate) async fn start_chat(
    mind: &mut MindState,
    partner: &str,
    lines: &[(String, String)],
    summary: &str,
    minutes: u32,
    ctx: &PromptContext,
    settings: &AgentSettings,
    now: NaiveDateTime,
) {
    insert_into_schedule(mind, ctx, now, summary, minutes).await;
    let name = mind.scratch.name.clone();
    add_new_action(
        mind,
        now,
        ActionAddress::Persona(partner.to_string()),
        minutes,
        summary.to_string(),
        CHAT_EMOJI.to_string(),
        EventTriple::chat(name, partner),
        None,
    );
    let s = &mut mind.scratch;
    s.chatting_with = Some(partner.to_string());
    s.chat = lines.to_vec();
    s.chatting_with_buffer
        .insert(partner.to_string(), settings.chat_cooldown_steps);
    s.chatting_end_time = s
        .act_end_time()
        .or(Some(now + Duration::minutes(i64::from(minutes))));
    s.chat_thoughts_done = false;
}

/// Holds a whole conversation between two checked-out minds and starts the chat on both sides;
/// `stream`, when given, sees the lines as they are spoken (see [`generate_conversation`]).
pub(crate) async fn hold_conversation(
    a: &mut MindState,
    b: &mut MindState,
    views: (SpeakerView, SpeakerView),
    ctx: &PromptContext,
    settings: &AgentSettings,
    now: NaiveDateTime,
    stream: Option<&ChatStreamSink>,
) -> ConversationOutcome {
    let lines = generate_conversation(a, b, (&views.0, &views.1), ctx, settings, now, stream).await;
    ctx.speaking_for(None);
    let summary = run_prompt(
        ctx,
        &ConversationSummary {
            name: a.scratch.name.clone(),
            partner: b.scratch.name.clone(),
            conversation: lines.clone(),
        },
    )
    .await
    .value;
    let minutes = conversation_minutes(&lines);
    let (a_name, b_name) = (a.scratch.name.clone(), b.scratch.name.clone());
    start_chat(a, &b_name, &lines, &summary, minutes, ctx, settings, now).await;
    ctx.speaking_for(Some(&b_name));
    start_chat(b, &a_name, &lines, &summary, minutes, ctx, settings, now).await;
    ctx.speaking_for(None);
    let end = a
        .scratch
        .chatting_end_time
        .unwrap_or(now + Duration::minutes(i64::from(minutes)));
    ConversationOutcome {
        lines,
        summary,
        end,
    }
}

/// The diary entry of a conversation for one side.
pub(crate) fn conversation_record(
    with: &str,
    outcome: &ConversationOutcome,
    now: NaiveDateTime,
    step: u64,
) -> PlanEvent {
    PlanEvent::Conversation(ConversationRecord {
        with: with.to_string(),
        start: now,
        end: outcome.end,
        start_step: step,
        lines: outcome.lines.len(),
        summary: outcome.summary.clone(),
    })
}

/// The memories related to an event by keyword (SPEC §3.2, reactions): events and thoughts
/// sharing a keyword with its `(s, p, o)`, as descriptions, newest first, at most `limit`.
pub(crate) fn related_memories(mind: &MindState, focus: NodeId, limit: usize) -> Vec<String> {
    let Some(node) = mind.associative.node(focus) else {
        return Vec::new();
    };
    let (s, p, o) = node.spo();
    mind.associative
        .newest_relevant_not_idle([s, p, o], limit, |n| n.id != focus)
        .into_iter()
        .map(|n| n.description.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minutes_of_a_conversation() {
        let line = |n: usize| ("A".to_string(), "x".repeat(n));
        assert_eq!(conversation_minutes(&[]), 1);
        assert_eq!(conversation_minutes(&[line(240)]), 1);
        assert_eq!(conversation_minutes(&[line(241)]), 2);
        assert_eq!(conversation_minutes(&[line(400), line(400)]), 4);
    }

    #[test]
    fn a_line_said_before_ends_the_round() {
        let lines = vec![
            (
                "Mira".to_string(),
                "Good morning! Did you sleep well?".to_string(),
            ),
            ("Tomas".to_string(), "Yes, thanks.".to_string()),
        ];
        assert!(said_before(&lines, "good morning -- did you   sleep well"));
        assert!(said_before(&lines, "Yes, thanks"));
        assert!(!said_before(&lines, "Good morning! Did you sleep badly?"));
        assert!(!said_before(&lines, "..."), "an empty line is not a repeat");
        assert!(!said_before(&[], "Hello"));
    }

    #[test]
    fn guards() {
        use chrono::NaiveDate;
        let now = NaiveDate::from_ymd_opt(2023, 2, 13)
            .and_then(|d| d.and_hms_opt(10, 0, 0))
            .unwrap_or_default();
        let mut mind = MindState::default();
        let place = ActionAddress::parse("w:s:a:o").ok();
        mind.scratch.act_address = place.clone();
        mind.scratch.act_description = Some("reading".into());
        let target = OtherPersona {
            name: "B".into(),
            address: place,
            description: "writing".into(),
            ..Default::default()
        };
        assert!(talk_guards_pass(&mind, &target, now, 23));
        assert!(
            !talk_guards_pass(&mind, &target, now + Duration::hours(13), 23),
            "23:00"
        );
        assert!(wait_guards_pass(&mind, &target, now, 23, true));
        assert!(
            !wait_guards_pass(&mind, &target, now, 23, false),
            "not walking"
        );
        let asleep = OtherPersona {
            sleeping: true,
            ..target.clone()
        };
        assert!(!talk_guards_pass(&mind, &asleep, now, 23));
        mind.scratch.chatting_with_buffer.insert("B".into(), 5);
        assert!(!talk_guards_pass(&mind, &target, now, 23), "cool-down");
        assert!(
            wait_guards_pass(&mind, &target, now, 23, true),
            "waiting ignores the cool-down"
        );
    }

    #[test]
    fn waiting_addresses() {
        let parse = |s: &str| ActionAddress::parse(s).ok();
        assert!(is_waiting(parse("<waiting> 3 4").as_ref()));
        assert!(!is_waiting(parse("w:s:a:o").as_ref()));
        assert!(!is_waiting(None));
    }
}
