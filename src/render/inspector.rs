//! The inspector: a side panel listing the personas; pick one (there or by clicking it in the
//! town) to see what it is up to — `currently`, the current action and its address, today's
//! schedule with the current item highlighted (decomposed sub-tasks included), recent memories
//! with their poignancy and type, the chat it is in (while it is still being spoken, from its
//! [`ChatStream`], the line in progress in italics), its group conversations (SPEC §8: the social
//! state, and per stream the sub-flow's state, interest and willingness, with the stream's
//! latest lines), and who it has talked to.
//!
//! A persona's [`Mind`] is away while it thinks, so the panel reads a [`MindSnapshot`] refreshed
//! whenever the mind is home, and says when it is showing an older one. A replay's personas
//! ([`ReplayActor`]) have no mind at all: for them the panel shows what the movement log
//! recorded — the action, its address, the chat — and says that is all there is.
//!
//! Under them, the talk box ([`TalkBox`](super::TalkBox)): type to the selected persona and read its
//! answer as it is written.
//!
//! Keyboard: `Tab` next persona · `Esc` deselect · `F` follow on/off · `Enter` talk.

use std::collections::BTreeMap;

use bevy::prelude::*;
use bevy_egui::input::EguiWantsInput;
use bevy_egui::{EguiContexts, EguiPrimaryContextPass, egui};
use chrono::NaiveDateTime;

use super::hud::{GameUiSystems, HudState};
use super::sprites::Selected;
use super::talk::{Talk, TalkBox, TalkView};
use crate::clock::SimClock;
use crate::cognition::ChatStream;
use crate::dialogue::DialogueSessions;
use crate::group::{ChatState, GroupAttention, GroupStreams, StreamKey};
use crate::memory::NodeKind;
use crate::output::ReplayActor;
use crate::persona::{ActionView, Body, Diary, Mind, Persona, ScheduleItem};

/// Memories kept in a snapshot (the most recent ones).
pub(crate) const SNAPSHOT_MEMORIES: usize = 14;
/// Real seconds between snapshot refreshes of one persona.
const SNAPSHOT_EVERY_SECS: f32 = 0.5;

/// One remembered thing, as the inspector lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryLine {
    /// Event, chat or thought.
    pub kind: NodeKind,
    /// 1–10.
    pub poignancy: u8,
    /// When it was formed.
    pub created: NaiveDateTime,
    /// What the persona remembers.
    pub description: String,
}

/// What the inspector shows of a persona's mind, copied while the mind is home.
#[derive(Component, Debug, Clone, Default, PartialEq)]
pub struct MindSnapshot {
    /// The game time of the copy (`None` before the first).
    pub taken_at: Option<NaiveDateTime>,
    /// What the persona is up to these days.
    pub currently: String,
    /// The current action.
    pub action: String,
    /// The action's address.
    pub address: String,
    /// When the action started.
    pub action_start: Option<NaiveDateTime>,
    /// Its planned minutes.
    pub action_minutes: Option<u32>,
    /// Today's schedule as `(task, minutes)`, progressively decomposed.
    pub schedule: Vec<ScheduleItem>,
    /// Today's undecomposed hourly schedule.
    pub hourly: Vec<ScheduleItem>,
    /// The most recent memories, newest first.
    pub memories: Vec<MemoryLine>,
    /// How many memories the persona has.
    pub memory_count: usize,
}

/// Real time since the last snapshot of a persona.
#[derive(Component, Debug, Clone, Copy, Default)]
struct SnapshotAge(f32);

/// The index of the schedule item running at `minute_of_day` (items run back to back from
/// midnight); `None` past the schedule's end or for an empty schedule.
pub fn current_schedule_index(schedule: &[ScheduleItem], minute_of_day: u32) -> Option<usize> {
    crate::cognition::schedule::schedule_index(schedule, minute_of_day)
}

/// The schedule items to list: `before` items before the current one to `after` after it (the
/// first items when nothing is current), within `0..len`.
pub(crate) fn schedule_window(
    len: usize,
    current: Option<usize>,
    before: usize,
    after: usize,
) -> std::ops::Range<usize> {
    let centre = current.unwrap_or(0).min(len);
    let start = centre.saturating_sub(before);
    let end = (centre + after + 1).min(len);
    start..end.max(start)
}

/// `HH:MM` of a minute of the day.
pub(crate) fn clock_label(minute_of_day: u32) -> String {
    format!("{:02}:{:02}", (minute_of_day / 60) % 24, minute_of_day % 60)
}

/// Conversations grouped by partner: `(partner, count, last summary, last start)`, most recent
/// first.
pub(crate) fn relationships(diary: &Diary) -> Vec<(String, usize, String, NaiveDateTime)> {
    let mut by: BTreeMap<&str, (usize, &str, NaiveDateTime)> = BTreeMap::new();
    for c in &diary.conversations {
        let entry = by.entry(c.with.as_str()).or_insert((0, "", c.start));
        entry.0 += 1;
        if c.start >= entry.2 {
            entry.1 = c.summary.as_str();
            entry.2 = c.start;
        }
    }
    let mut out: Vec<_> = by
        .into_iter()
        .map(|(who, (n, summary, when))| (who.to_owned(), n, summary.to_owned(), when))
        .collect();
    out.sort_by(|a, b| b.3.cmp(&a.3).then_with(|| a.0.cmp(&b.0)));
    out
}

/// The persona panel.
#[derive(Debug, Default, Clone, Copy)]
pub struct InspectorPlugin;

impl Plugin for InspectorPlugin {
    fn build(&self, app: &mut App) {
        app.init_resource::<TalkBox>()
            .init_resource::<TalkView>()
            .init_resource::<DialogueSessions>()
            .add_systems(
                Update,
                (attach_snapshots, refresh_snapshots, selection_keys),
            )
            .add_systems(
                EguiPrimaryContextPass,
                draw_inspector.in_set(GameUiSystems::Panels),
            );
    }
}

#[expect(clippy::type_complexity, reason = "a query with its filters")]
fn attach_snapshots(
    mut commands: Commands,
    new: Query<Entity, (With<Persona>, Without<MindSnapshot>, Without<ReplayActor>)>,
) {
    for entity in &new {
        commands
            .entity(entity)
            .insert((MindSnapshot::default(), SnapshotAge(f32::INFINITY)));
    }
}

fn refresh_snapshots(
    time: Res<Time>,
    clock: Res<SimClock>,
    selected: Res<Selected>,
    mut personas: Query<(Entity, &Mind, &mut MindSnapshot, &mut SnapshotAge), With<Persona>>,
) {
    for (entity, mind, mut snapshot, mut age) in &mut personas {
        age.0 += time.delta_secs();
        // The selected persona is refreshed every frame; the others now and then, so a newly
        // selected one has something to show at once.
        let due = selected.entity == Some(entity) || age.0 >= SNAPSHOT_EVERY_SECS;
        let Some(state) = mind.get().filter(|_| due) else {
            continue;
        };
        let s = &state.scratch;
        let nodes = state.associative.nodes();
        let memories = nodes
            .iter()
            .rev()
            .take(SNAPSHOT_MEMORIES)
            .map(|n| MemoryLine {
                kind: n.kind,
                poignancy: n.poignancy,
                created: n.created,
                description: n.description.clone(),
            })
            .collect();
        let fresh = MindSnapshot {
            taken_at: Some(clock.now()),
            currently: s.currently.clone(),
            action: s.act_description.clone().unwrap_or_default(),
            address: s
                .act_address
                .as_ref()
                .map(ToString::to_string)
                .unwrap_or_default(),
            action_start: s.act_start_time,
            action_minutes: s.act_duration,
            schedule: s.f_daily_schedule.clone(),
            hourly: s.f_daily_schedule_hourly_org.clone(),
            memories,
            memory_count: nodes.len(),
        };
        snapshot.set_if_neq(fresh);
        age.0 = 0.0;
    }
}

fn selection_keys(
    keys: Res<ButtonInput<KeyCode>>,
    wants: Option<Res<EguiWantsInput>>,
    mut selected: ResMut<Selected>,
    personas: Query<(Entity, &Name), With<Persona>>,
) {
    if wants.is_some_and(|w| w.wants_keyboard_input()) {
        return;
    }
    if keys.just_pressed(KeyCode::Escape) {
        selected.entity = None;
        selected.follow = false;
    }
    if keys.just_pressed(KeyCode::KeyF) && selected.entity.is_some() {
        selected.follow = !selected.follow;
    }
    if keys.just_pressed(KeyCode::Tab) {
        let mut list: Vec<(String, Entity)> = personas
            .iter()
            .map(|(e, n)| (n.as_str().to_owned(), e))
            .collect();
        list.sort();
        let next = match selected
            .entity
            .and_then(|cur| list.iter().position(|(_, e)| *e == cur))
        {
            Some(i) => list.get((i + 1) % list.len().max(1)),
            None => list.first(),
        };
        if let Some((_, e)) = next {
            selected.entity = Some(*e);
            selected.follow = true;
        }
    }
}

fn kind_colour(kind: NodeKind) -> egui::Color32 {
    match kind {
        NodeKind::Event => egui::Color32::from_rgb(140, 190, 255),
        NodeKind::Chat => egui::Color32::from_rgb(150, 230, 150),
        NodeKind::Thought => egui::Color32::from_rgb(235, 190, 110),
    }
}

#[expect(
    clippy::type_complexity,
    reason = "one query reads everything the panel shows"
)]
fn draw_inspector(
    mut contexts: EguiContexts,
    hud: Res<HudState>,
    clock: Res<SimClock>,
    mut selected: ResMut<Selected>,
    personas: Query<
        (
            Entity,
            &Name,
            &ActionView,
            &Mind,
            Option<&MindSnapshot>,
            &Diary,
            (&Body, Has<ReplayActor>, Option<&GroupAttention>),
        ),
        With<Persona>,
    >,
    (streams, groups): (Query<&ChatStream>, Option<Res<GroupStreams>>),
    mut talk: Talk,
) -> Result {
    let ctx = contexts.ctx_mut()?.clone();
    // Only a text field keeps the keyboard: a button or checkbox focused by a click or by
    // egui's own `Tab` navigation would hide every game shortcut from the player.
    if !ctx.text_edit_focused()
        && let Some(focused) = ctx.memory(|m| m.focused())
    {
        ctx.memory_mut(|m| m.surrender_focus(focused));
    }
    let mut rect = ctx.viewport_rect();
    rect.min.y += hud.bar_height;
    let mut root = egui::Ui::new(
        ctx.clone(),
        "inspector root".into(),
        egui::UiBuilder::new()
            .layer_id(egui::LayerId::background())
            .max_rect(rect),
    );
    let mut list: Vec<_> = personas.iter().collect();
    list.sort_by(|a, b| a.1.as_str().cmp(b.1.as_str()));
    // The conversation the selected persona is in while it is still being spoken.
    let live = selected.entity.and_then(|e| {
        streams
            // A persona's answer to the player is its own stream: the talk box shows it.
            .iter()
            .find(|s| s.involves(e) && s.speaker != s.listener)
            .map(|s| (e, s))
    });
    let name_of = |entity: Entity| {
        list.iter()
            .find(|p| p.0 == entity)
            .map_or("someone", |p| p.1.as_str())
    };

    egui::Panel::right("inspector")
        .default_size(super::camera::INSPECTOR_WIDTH)
        .show(&mut root, |ui| {
            egui::ScrollArea::vertical().show(ui, |ui| {
                ui.heading("Personas");
                for (entity, name, view, mind, _, _, (_, replayed, _)) in &list {
                    persona_row(
                        ui,
                        &mut selected,
                        *entity,
                        name,
                        view,
                        mind.is_home() || *replayed,
                    );
                }
                ui.separator();
                let Some((
                    selected_entity,
                    name,
                    view,
                    mind,
                    snapshot,
                    diary,
                    (body, replayed, group),
                )) = selected.entity.and_then(|e| list.iter().find(|p| p.0 == e))
                else {
                    ui.label("Click a persona in the town or in this list (Tab cycles).");
                    talk.clear();
                    return;
                };
                ui.horizontal(|ui| {
                    ui.heading(name.as_str());
                    let mut follow = selected.follow;
                    if ui.checkbox(&mut follow, "follow (F)").changed() {
                        selected.follow = follow;
                    }
                });
                if *replayed {
                    replayed_persona(ui, view, body);
                    talk.clear();
                    return;
                }
                let empty = MindSnapshot::default();
                let snap = snapshot.unwrap_or(&empty);
                mind_lines(ui, mind, snap, view);

                conversation(ui, view, live, name_of);
                if let Some(group) = group {
                    group_section(ui, group, groups.as_deref());
                }

                ui.separator();
                talk.section(ui, *selected_entity, name.as_str());

                ui.separator();
                schedule_sections(ui, snap, clock.minute_of_day());
                memories_section(ui, snap);
                relationships_section(ui, diary);
            });
        });
    Ok(())
}

/// A row of the persona list: emoji, name, 💭 while its mind is out; a click selects it.
fn persona_row(
    ui: &mut egui::Ui,
    selected: &mut Selected,
    entity: Entity,
    name: &Name,
    view: &ActionView,
    home: bool,
) {
    let thinking = if home { "" } else { " 💭" };
    let label = format!("{} {}{thinking}", view.emoji, name.as_str());
    if ui
        .selectable_label(selected.entity == Some(entity), label)
        .on_hover_text(&view.description)
        .clicked()
    {
        selected.entity = Some(entity);
        selected.follow = true;
    }
}

/// "Thinking…" while the mind is out, then what the persona is currently about and doing.
fn mind_lines(ui: &mut egui::Ui, mind: &Mind, snap: &MindSnapshot, view: &ActionView) {
    if !mind.is_home() {
        let when = snap
            .taken_at
            .map(|t| t.format("%H:%M").to_string())
            .unwrap_or_else(|| "never".into());
        ui.colored_label(
            egui::Color32::LIGHT_BLUE,
            format!("💭 thinking… (mind as of {when})"),
        );
    }
    ui.label(egui::RichText::new("Currently").strong());
    ui.label(if snap.currently.is_empty() {
        "—"
    } else {
        snap.currently.as_str()
    });

    doing(ui, view);
    if let (Some(start), Some(minutes)) = (snap.action_start, snap.action_minutes) {
        ui.label(
            egui::RichText::new(format!("since {} for {minutes} min", start.format("%H:%M")))
                .small(),
        );
    }
}

/// The conversation the persona is in: the finished transcript, or the one still being
/// spoken (with the line being written).
fn conversation<'a>(
    ui: &mut egui::Ui,
    view: &ActionView,
    live: Option<(Entity, &ChatStream)>,
    name_of: impl Fn(Entity) -> &'a str,
) {
    if let Some(partner) = &view.chatting_with {
        ui.separator();
        ui.label(egui::RichText::new(format!("Talking with {partner}")).strong());
        for (speaker, line) in &view.chat {
            ui.label(format!("{speaker}: {line}"));
        }
    } else if let Some((me, stream)) = live {
        let partner = if stream.speaker == me {
            stream.listener
        } else {
            stream.speaker
        };
        ui.separator();
        ui.label(egui::RichText::new(format!("Talking with {} …", name_of(partner))).strong());
        for (speaker, line) in &stream.lines {
            ui.label(format!("{speaker}: {line}"));
        }
        if !stream.partial.is_empty() {
            ui.label(
                egui::RichText::new(format!("{}: {}…", name_of(stream.speaker), stream.partial))
                    .italics(),
            );
        }
    }
}

/// Today's schedule around the current item, and the hourly plan before decomposition.
fn schedule_sections(ui: &mut egui::Ui, snap: &MindSnapshot, minute: u32) {
    egui::CollapsingHeader::new(format!("Today's schedule ({} items)", snap.schedule.len()))
        .default_open(true)
        .show(ui, |ui| {
            let current = current_schedule_index(&snap.schedule, minute);
            let shown = schedule_window(snap.schedule.len(), current, 2, 9);
            if shown.start > 0 {
                ui.label(egui::RichText::new(format!("… {} earlier", shown.start)).small());
            }
            let mut start: u32 = snap
                .schedule
                .iter()
                .take(shown.start)
                .map(|item| item.minutes)
                .sum();
            for (i, ScheduleItem { task, minutes }) in snap
                .schedule
                .iter()
                .enumerate()
                .skip(shown.start)
                .take(shown.len())
            {
                let text = format!("{} {task} ({minutes}m)", clock_label(start));
                start = start.saturating_add(*minutes);
                if Some(i) == current {
                    ui.label(
                        egui::RichText::new(format!("▶ {text}"))
                            .strong()
                            .color(egui::Color32::YELLOW),
                    );
                } else {
                    ui.label(egui::RichText::new(text).small());
                }
            }
            let later = snap.schedule.len().saturating_sub(shown.end);
            if later > 0 {
                ui.label(egui::RichText::new(format!("… {later} later")).small());
            }
            if snap.schedule.is_empty() {
                ui.label("(no plan yet)");
            }
        });
    egui::CollapsingHeader::new("Hourly plan (before decomposition)")
        .default_open(false)
        .show(ui, |ui| {
            let mut start = 0u32;
            for ScheduleItem { task, minutes } in &snap.hourly {
                ui.label(egui::RichText::new(format!("{} {task}", clock_label(start))).small());
                start = start.saturating_add(*minutes);
            }
        });
}

/// The newest memories with kind, poignancy and time.
fn memories_section(ui: &mut egui::Ui, snap: &MindSnapshot) {
    egui::CollapsingHeader::new(format!("Recent memories ({} total)", snap.memory_count))
        .default_open(true)
        .show(ui, |ui| {
            for m in &snap.memories {
                ui.horizontal_wrapped(|ui| {
                    ui.label(
                        egui::RichText::new(format!("{} p{}", m.kind, m.poignancy))
                            .small()
                            .color(kind_colour(m.kind)),
                    );
                    ui.label(
                        egui::RichText::new(m.created.format("%H:%M").to_string())
                            .small()
                            .monospace(),
                    );
                    ui.label(egui::RichText::new(&m.description).small());
                });
            }
            if snap.memories.is_empty() {
                ui.label("(nothing yet)");
            }
        });
}

/// One sub-flow as the inspector shows it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct GroupRow {
    /// The stream: an arena's name, or `#channel`.
    pub stream: StreamKey,
    pub state: ChatState,
    pub interest: f32,
    pub willingness: f32,
}

/// The persona's sub-flows, the closely followed first, then the casually followed, then the
/// absent ones; by stream within a state.
pub(crate) fn group_rows(group: &GroupAttention) -> Vec<GroupRow> {
    let mut rows: Vec<GroupRow> = group
        .attention
        .flows
        .iter()
        .map(|(stream, flow)| GroupRow {
            stream: stream.clone(),
            state: flow.state,
            interest: flow.interest,
            willingness: flow.willingness,
        })
        .collect();
    rows.sort_by(|a, b| b.state.cmp(&a.state).then_with(|| a.stream.cmp(&b.stream)));
    rows
}

fn state_label(state: ChatState) -> &'static str {
    match state {
        ChatState::Focused => "FOCUSED",
        ChatState::Chat => "CHAT",
        ChatState::Absent => "ABSENT",
    }
}

/// The social state and the sub-flows, each with its stream's latest lines while followed.
fn group_section(ui: &mut egui::Ui, group: &GroupAttention, streams: Option<&GroupStreams>) {
    let rows = group_rows(group);
    egui::CollapsingHeader::new("Group conversations")
        .default_open(true)
        .show(ui, |ui| {
            ui.label(
                egui::RichText::new(format!("Social state: {:?}", group.attention.social)).small(),
            );
            for row in &rows {
                ui.label(
                    egui::RichText::new(format!(
                        "{} — {}  interest {:.1} · willingness {:.2}",
                        row.stream.label(),
                        state_label(row.state),
                        row.interest,
                        row.willingness
                    ))
                    .strong(),
                );
                if row.state == ChatState::Absent {
                    continue;
                }
                let Some(stream) = streams.and_then(|s| s.get(&row.stream)) else {
                    continue;
                };
                let skip = stream.lines.len().saturating_sub(3);
                for line in stream.lines.iter().skip(skip) {
                    ui.label(
                        egui::RichText::new(format!("{}: {}", line.speaker, line.text)).small(),
                    );
                }
            }
            if rows.is_empty() {
                ui.label("(in no group conversation)");
            }
        });
}

/// Whom the persona has talked to, how often, and the last summary.
fn relationships_section(ui: &mut egui::Ui, diary: &Diary) {
    egui::CollapsingHeader::new("Has talked to")
        .default_open(true)
        .show(ui, |ui| {
            let rel = relationships(diary);
            for (who, n, summary, when) in &rel {
                ui.label(
                    egui::RichText::new(format!("{who} — {n}× (last {})", when.format("%a %H:%M")))
                        .strong(),
                );
                if !summary.is_empty() {
                    ui.label(egui::RichText::new(summary).small());
                }
            }
            if rel.is_empty() {
                ui.label("(no conversations yet)");
            }
        });
}

/// The "Doing" lines: emoji and action, and the address it happens at.
fn doing(ui: &mut egui::Ui, view: &ActionView) {
    ui.label(egui::RichText::new("Doing").strong());
    ui.label(format!(
        "{} {}",
        view.emoji,
        if view.description.is_empty() {
            "(no action yet)"
        } else {
            view.description.as_str()
        }
    ));
    if let Some(address) = &view.address {
        ui.label(egui::RichText::new(address.to_string()).monospace().small());
    }
}

/// What the inspector knows of a replay's persona: what the movement log recorded.
fn replayed_persona(ui: &mut egui::Ui, view: &ActionView, body: &Body) {
    doing(ui, view);
    ui.label(
        egui::RichText::new(format!("tile [{}, {}]", body.tile.x, body.tile.y))
            .monospace()
            .small(),
    );
    if !view.chat.is_empty() {
        ui.separator();
        let partner = view.chatting_with.as_deref().unwrap_or("someone");
        ui.label(egui::RichText::new(format!("Talking with {partner}")).strong());
        for (speaker, line) in &view.chat {
            ui.label(format!("{speaker}: {line}"));
        }
    }
    ui.separator();
    ui.label(
        egui::RichText::new(
            "Replay: the movement log records where each persona was and what it showed, not \
             its mind — no plan, memories or conversations to show.",
        )
        .small()
        .italics(),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::persona::ConversationRecord;
    use chrono::NaiveDate;

    fn at(h: u32, m: u32) -> NaiveDateTime {
        NaiveDate::from_ymd_opt(2023, 2, 13)
            .unwrap()
            .and_hms_opt(h, m, 0)
            .unwrap()
    }

    #[test]
    fn current_item_of_a_back_to_back_schedule() {
        let s = vec![
            ScheduleItem::new("sleeping", 420),
            ScheduleItem::new("waking up (brushing teeth)", 15),
            ScheduleItem::new("waking up (making coffee)", 45),
            ScheduleItem::new("work", 960),
        ];
        assert_eq!(current_schedule_index(&s, 0), Some(0));
        assert_eq!(current_schedule_index(&s, 419), Some(0));
        assert_eq!(current_schedule_index(&s, 420), Some(1));
        assert_eq!(current_schedule_index(&s, 435), Some(2));
        assert_eq!(current_schedule_index(&s, 1439), Some(3));
        assert_eq!(current_schedule_index(&s, 1440), None);
        assert_eq!(current_schedule_index(&[], 10), None);
    }

    #[test]
    fn schedule_window_around_the_current_item() {
        assert_eq!(schedule_window(38, Some(20), 2, 9), 18..30);
        assert_eq!(schedule_window(38, Some(1), 2, 9), 0..11);
        assert_eq!(schedule_window(38, Some(36), 2, 9), 34..38);
        assert_eq!(schedule_window(5, None, 2, 9), 0..5);
        assert_eq!(schedule_window(0, None, 2, 9), 0..0);
    }

    #[test]
    fn group_rows_put_the_closely_followed_first() {
        use crate::group::SubFlow;
        let mut group = GroupAttention::default();
        for (name, state, interest) in [
            ("t:cafe:counter", ChatState::Chat, 2.0),
            ("t:park:bench", ChatState::Absent, 0.5),
            ("t:pub:bar", ChatState::Focused, 6.0),
        ] {
            group.attention.flows.insert(
                StreamKey::Arena(name.into()),
                SubFlow {
                    state,
                    interest,
                    ..SubFlow::default()
                },
            );
        }
        let rows = group_rows(&group);
        let order: Vec<(String, ChatState)> =
            rows.iter().map(|r| (r.stream.label(), r.state)).collect();
        assert_eq!(
            order,
            [
                ("bar".to_string(), ChatState::Focused),
                ("counter".to_string(), ChatState::Chat),
                ("bench".to_string(), ChatState::Absent),
            ]
        );
        assert_eq!(rows[0].interest, 6.0);
        assert!(group_rows(&GroupAttention::default()).is_empty());
    }

    #[test]
    fn clock_labels() {
        assert_eq!(clock_label(0), "00:00");
        assert_eq!(clock_label(435), "07:15");
        assert_eq!(clock_label(1439), "23:59");
    }

    #[test]
    fn relationships_group_by_partner_newest_first() {
        let conv = |with: &str, h: u32, summary: &str| ConversationRecord {
            with: with.into(),
            start: at(h, 0),
            end: at(h, 10),
            start_step: 0,
            lines: 4,
            summary: summary.into(),
        };
        let diary = Diary {
            conversations: vec![
                conv("Sam", 8, "coffee"),
                conv("Elena", 9, "the party"),
                conv("Sam", 12, "lunch plans"),
            ],
            ..Default::default()
        };
        let rel = relationships(&diary);
        assert_eq!(rel.len(), 2);
        assert_eq!(rel[0], ("Sam".into(), 2, "lunch plans".into(), at(12, 0)));
        assert_eq!(rel[1], ("Elena".into(), 1, "the party".into(), at(9, 0)));
    }
}
