//! What a save keeps of the group conversations (SPEC §11), so that a loaded town goes on
//! talking where it stopped: the open streams with their latest lines and the lean rounds'
//! beats (`groups.json`), and each persona's attention (`personas/<name>/group.json`) — its
//! sub-flows, the lines it has seen and observed, the lines it heard but has not remembered
//! yet, and the lines a lean round planned for it.
//!
//! Entities do not outlive a save, so personas are written by name and found again by name on
//! loading. What a persona's attention only caches (the words of who it is, the social state
//! of its activity) is read again from the persona when next needed, and calls in flight are
//! never saved: a save waits for them (`calls_in_flight`).
//!
//! Both files are untrusted on loading (a save may have been edited or damaged):
//! [`GroupsFile::check`] and [`GroupFile::check`] refuse, naming the field, anything the heart
//! flow could not have written — a member or seat who is not a persona of the save, a line
//! past its stream's count or longer than a line may be, a channel name a game could not
//! open, a number that is not finite, a vector of another dimension — before the world is
//! touched.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use bevy::prelude::*;
use chrono::NaiveDateTime;
use serde::{Deserialize, Serialize};

use crate::world::{TileCoord, TileEvent};

use super::attention::SubFlow;
use super::heart::{
    GroupAttention, GroupCalls, HeardLine, LastRounds, PendingMemory, PlannedLine, Said, drop_calls,
};
use super::social::Engagement;
use super::social::{Attention, SocialState};
use super::stream::{
    GroupLine, GroupStream, GroupStreams, MAX_CHANNELS, MAX_LINE_CHARS, MAX_LINES, StreamKey,
    check_channel_name,
};

/// `groups.json`: the open streams and the lean rounds' beats.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupsFile {
    /// Every open stream, in key order.
    pub streams: Vec<SavedStream>,
    /// Lean rounds: the step of each stream's last round.
    pub rounds: Vec<SavedRound>,
}

/// One open stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SavedStream {
    /// Which stream.
    pub key: StreamKey,
    /// Its members, by name.
    pub members: Vec<String>,
    /// When it opened.
    pub opened: NaiveDateTime,
    /// Lines said since it opened.
    pub said: u64,
    /// Its latest lines, oldest first.
    pub lines: Vec<SavedLine>,
    /// Where an arena's talk shows to bystanders, the event (also in `world/events.json`) and
    /// when it was written (version 4 on; absent when it shows nowhere).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shown: Option<(TileCoord, TileEvent, NaiveDateTime)>,
}

/// One line of a stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SavedLine {
    /// Its place in the stream's history (1, 2, …).
    pub seq: u64,
    /// Who said it, as the stream shows it.
    pub speaker: String,
    /// The persona who said it (by name), if a persona did.
    pub persona: Option<String>,
    /// What was said.
    pub text: String,
    /// Whether it is an emoji reply.
    pub emoji: bool,
    /// Game time.
    pub time: NaiveDateTime,
    /// The embedding of its memory description, once it landed (version 4 on; absent before).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub embedding: Option<Vec<f32>>,
}

/// The step of a stream's last lean round.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SavedRound {
    /// Which stream.
    pub stream: StreamKey,
    /// The step of its last round.
    pub step: u64,
}

/// `personas/<name>/group.json`: one persona's attention to the group conversations.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupFile {
    /// The global social state it last had.
    pub social: SocialState,
    /// Game seconds until it may be asked to join a stream again.
    pub join_in: f32,
    /// Its sub-flows, in stream order.
    pub flows: Vec<SavedFlow>,
    /// The last line of each stream it has heard.
    pub seen: Vec<SavedSeen>,
    /// For each focused stream: the last line its previous cycle observed, and the step from
    /// which the next cycle may run.
    pub cycles: Vec<SavedCycle>,
    /// Lines heard and not yet stored as memories, in the order heard.
    pub pending: Vec<SavedHeard>,
    /// Lean mode: the lines a round planned for its next cycles, per stream.
    pub planned: Vec<SavedPlan>,
}

impl Default for GroupFile {
    /// The attention of a persona that never heard a stream.
    fn default() -> Self {
        Self::of(&GroupAttention::default(), &HashMap::new())
    }
}

/// One sub-flow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SavedFlow {
    /// Which stream.
    pub stream: StreamKey,
    /// The sub-flow.
    pub flow: SubFlow,
}

/// The last line of a stream a persona has heard.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SavedSeen {
    /// Which stream.
    pub stream: StreamKey,
    /// The line's `seq`.
    pub seq: u64,
}

/// A focused stream's cycle.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SavedCycle {
    /// Which stream.
    pub stream: StreamKey,
    /// The last line the previous cycle observed.
    pub looked: u64,
    /// The step from which the next cycle may run.
    pub due: u64,
}

/// A line heard and not yet stored as a memory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SavedHeard {
    /// When it was said.
    pub time: NaiveDateTime,
    /// Who said it.
    pub speaker: String,
    /// The speaker's name as a keyword.
    pub speaker_keyword: String,
    /// What was said.
    pub line: String,
    /// The memory's object (`the group in <place>`).
    pub object: String,
    /// The memory's description.
    pub description: String,
    /// The description's embedding.
    pub embedding: Vec<f32>,
    /// Whether the line names the persona.
    pub named: bool,
}

/// A line a lean round planned, with its memory's description and embedding.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SavedSaid {
    /// The line.
    pub text: String,
    /// Whether it is an emoji.
    pub emoji: bool,
    /// Its memory's description.
    pub description: String,
    /// The description's embedding, if it was made.
    pub embedding: Option<Vec<f32>>,
}

/// What a lean round planned for a persona's next cycles in one stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SavedPlan {
    /// Which stream.
    pub stream: StreamKey,
    /// The line for the next cycle.
    pub said: SavedSaid,
    /// The lines for the cycles after, in order.
    pub later: Vec<SavedSaid>,
    /// The stream's last line when the round was asked.
    pub after: u64,
    /// The round's seats, by name.
    pub seats: Vec<String>,
    /// The last step at which it may be said.
    pub until: u64,
}

/// A field of a group file that cannot be loaded, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupFileError {
    /// The field's path, e.g. `streams[2].lines[0].seq`.
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}

impl GroupFileError {
    fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// A name that must be one of the save's personas.
fn check_persona(
    personas: &BTreeSet<&str>,
    field: String,
    name: &str,
) -> Result<(), GroupFileError> {
    if personas.contains(name) {
        Ok(())
    } else {
        Err(GroupFileError::new(
            field,
            format!("{name:?} is not a persona of this save"),
        ))
    }
}

/// A stream key the heart flow or a game could have opened.
fn check_key(field: &str, key: &StreamKey) -> Result<(), GroupFileError> {
    match key {
        StreamKey::Arena(address) if address.trim().is_empty() => Err(GroupFileError::new(
            field,
            "an arena stream needs an address",
        )),
        StreamKey::Arena(_) => Ok(()),
        StreamKey::Channel(name) => match check_channel_name(name) {
            Ok(checked) if checked == *name => Ok(()),
            Ok(_) => Err(GroupFileError::new(
                field,
                "a channel name has no spaces around it",
            )),
            Err(why) => Err(GroupFileError::new(field, why)),
        },
    }
}

/// Stream keys of a list: each one the heart flow or a game could have opened, none twice.
/// `field(i)` names the key of item `i`.
fn check_keys<'a>(
    keys: impl IntoIterator<Item = &'a StreamKey>,
    field: impl Fn(usize) -> String,
) -> Result<(), GroupFileError> {
    let mut once = BTreeSet::new();
    for (i, key) in keys.into_iter().enumerate() {
        check_key(&field(i), key)?;
        if !once.insert(key) {
            return Err(GroupFileError::new(field(i), "the stream appears twice"));
        }
    }
    Ok(())
}

/// A line's text: at most [`MAX_LINE_CHARS`] characters, as every line said is cut.
fn check_text(field: String, text: &str) -> Result<(), GroupFileError> {
    if text.chars().count() > MAX_LINE_CHARS {
        return Err(GroupFileError::new(
            field,
            format!("a line has at most {MAX_LINE_CHARS} characters"),
        ));
    }
    Ok(())
}

/// A number of the attention: finite and not negative.
fn check_amount(field: String, value: f32) -> Result<(), GroupFileError> {
    if value.is_finite() && value >= 0.0 {
        Ok(())
    } else {
        Err(GroupFileError::new(
            field,
            format!("{value} is not a finite amount of at least 0"),
        ))
    }
}

/// Most numbers of a saved line's embedding (a stream's lines are checked before the save's
/// embedding dimension is known; a persona's memories are checked against it).
const MAX_EMBEDDING_DIM: usize = 4_096;

/// A memory's vector: `dim` finite numbers (any dimension while the save records none).
fn check_vector(field: String, vector: &[f32], dim: usize) -> Result<(), GroupFileError> {
    if dim > 0 && vector.len() != dim {
        return Err(GroupFileError::new(
            field,
            format!(
                "{} numbers, but the save's embeddings have {dim}",
                vector.len()
            ),
        ));
    }
    if vector.is_empty() || vector.iter().any(|v| !v.is_finite()) {
        return Err(GroupFileError::new(
            field,
            "an embedding is a non-empty list of finite numbers",
        ));
    }
    Ok(())
}

impl GroupsFile {
    /// The open streams and rounds of `world`, personas named by `names` (an entity without a
    /// name — no longer a persona — is left out of a stream's members).
    pub(crate) fn of(world: &World, names: &HashMap<Entity, String>) -> Self {
        let streams = world
            .get_resource::<GroupStreams>()
            .map(|streams| {
                streams
                    .iter()
                    .map(|stream| SavedStream {
                        key: stream.key.clone(),
                        members: stream
                            .members
                            .iter()
                            .filter_map(|m| names.get(m).cloned())
                            .collect(),
                        opened: stream.opened,
                        said: stream.said,
                        lines: stream
                            .lines
                            .iter()
                            .map(|line| SavedLine {
                                seq: line.seq,
                                speaker: line.speaker.clone(),
                                persona: line.persona.and_then(|p| names.get(&p).cloned()),
                                text: line.text.clone(),
                                emoji: line.emoji,
                                time: line.time,
                                embedding: stream.embedding(line.seq).map(<[f32]>::to_vec),
                            })
                            .collect(),
                        shown: stream.shown.clone(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        let rounds = world
            .get_resource::<LastRounds>()
            .map(|rounds| {
                rounds
                    .0
                    .iter()
                    .map(|(stream, &step)| SavedRound {
                        stream: stream.clone(),
                        step,
                    })
                    .collect()
            })
            .unwrap_or_default();
        Self { streams, rounds }
    }

    /// The tiles the file names (checked against the map when a save loads).
    pub(crate) fn tiles(&self) -> impl Iterator<Item = TileCoord> + '_ {
        self.streams
            .iter()
            .filter_map(|s| s.shown.as_ref().map(|(tile, _, _)| *tile))
    }

    /// Checks everything the heart flow relies on, against the save's persona names.
    pub fn check(&self, personas: &BTreeSet<&str>) -> Result<(), GroupFileError> {
        check_keys(self.streams.iter().map(|s| &s.key), |i| {
            format!("streams[{i}].key")
        })?;
        let mut channels = 0;
        for (i, stream) in self.streams.iter().enumerate() {
            let at = |rest: &str| format!("streams[{i}]{rest}");
            if matches!(stream.key, StreamKey::Channel(_)) {
                channels += 1;
                if channels > MAX_CHANNELS {
                    return Err(GroupFileError::new(
                        at(".key"),
                        format!("at most {MAX_CHANNELS} channels may be open"),
                    ));
                }
            }
            let mut members = BTreeSet::new();
            for (j, member) in stream.members.iter().enumerate() {
                check_persona(personas, at(&format!(".members[{j}]")), member)?;
                if !members.insert(member) {
                    return Err(GroupFileError::new(
                        at(&format!(".members[{j}]")),
                        format!("{member:?} appears twice"),
                    ));
                }
            }
            if let Some((_, event, _)) = &stream.shown {
                let long = |t: &str| t.chars().count() > 1_000;
                if long(&event.subject)
                    || [&event.predicate, &event.object, &event.description]
                        .into_iter()
                        .flatten()
                        .any(|t| long(t))
                {
                    return Err(GroupFileError::new(
                        at(".shown"),
                        "a talk's event has at most 1,000 characters a field",
                    ));
                }
            }
            if stream.lines.len() > MAX_LINES {
                return Err(GroupFileError::new(
                    at(".lines"),
                    format!("a stream keeps at most {MAX_LINES} lines"),
                ));
            }
            let mut last = 0;
            for (j, line) in stream.lines.iter().enumerate() {
                let field = |rest: &str| at(&format!(".lines[{j}]{rest}"));
                if line.seq <= last || line.seq > stream.said {
                    return Err(GroupFileError::new(
                        field(".seq"),
                        format!(
                            "{} is not after the line before ({last}) and at most `said` ({})",
                            line.seq, stream.said
                        ),
                    ));
                }
                last = line.seq;
                if let Some(vector) = &line.embedding {
                    if vector.len() > MAX_EMBEDDING_DIM {
                        return Err(GroupFileError::new(
                            field(".embedding"),
                            format!("at most {MAX_EMBEDDING_DIM} numbers"),
                        ));
                    }
                    check_vector(field(".embedding"), vector, 0)?;
                }
                if line.speaker.trim().is_empty() {
                    return Err(GroupFileError::new(
                        field(".speaker"),
                        "a line needs a speaker",
                    ));
                }
                if let Some(persona) = &line.persona {
                    check_persona(personas, field(".persona"), persona)?;
                }
                check_text(field(".text"), &line.text)?;
            }
        }
        check_keys(self.rounds.iter().map(|r| &r.stream), |i| {
            format!("rounds[{i}].stream")
        })
    }
}

impl SavedSaid {
    fn of(said: &Said) -> Self {
        Self {
            text: said.text.clone(),
            emoji: said.emoji,
            description: said.description.clone(),
            embedding: said.embedding.clone(),
        }
    }

    fn into_said(self) -> Said {
        Said {
            text: self.text,
            emoji: self.emoji,
            description: self.description,
            embedding: self.embedding,
        }
    }

    fn check(&self, field: &str, dim: usize) -> Result<(), GroupFileError> {
        check_text(format!("{field}.text"), &self.text)?;
        match &self.embedding {
            Some(vector) => check_vector(format!("{field}.embedding"), vector, dim),
            None => Ok(()),
        }
    }
}

impl GroupFile {
    /// What a save keeps of `group`, personas named by `names` (a seat no longer a persona is
    /// left out).
    pub(crate) fn of(group: &GroupAttention, names: &HashMap<Entity, String>) -> Self {
        Self {
            social: group.attention.social,
            join_in: group.attention.join_in,
            flows: group
                .attention
                .flows
                .iter()
                .map(|(stream, flow)| SavedFlow {
                    stream: stream.clone(),
                    flow: flow.clone(),
                })
                .collect(),
            seen: group
                .seen
                .iter()
                .map(|(stream, &seq)| SavedSeen {
                    stream: stream.clone(),
                    seq,
                })
                .collect(),
            cycles: group
                .cycles
                .iter()
                .map(|(stream, &(looked, due))| SavedCycle {
                    stream: stream.clone(),
                    looked,
                    due,
                })
                .collect(),
            pending: group
                .pending
                .iter()
                .map(|pending| {
                    let heard = &pending.heard;
                    SavedHeard {
                        time: heard.time,
                        speaker: heard.speaker.clone(),
                        speaker_keyword: heard.speaker_keyword.clone(),
                        line: heard.line.clone(),
                        object: heard.object.clone(),
                        description: heard.description.clone(),
                        embedding: heard.embedding.clone(),
                        named: pending.named,
                    }
                })
                .collect(),
            planned: group
                .planned
                .iter()
                .map(|(stream, plan)| SavedPlan {
                    stream: stream.clone(),
                    said: SavedSaid::of(&plan.said),
                    later: plan.later.iter().map(SavedSaid::of).collect(),
                    after: plan.after,
                    seats: plan
                        .seats
                        .iter()
                        .filter_map(|seat| names.get(seat).cloned())
                        .collect(),
                    until: plan.until,
                })
                .collect(),
        }
    }

    /// Checks everything the heart flow relies on, against the save's persona names and the
    /// dimension of its embeddings (0: not known yet).
    pub fn check(&self, personas: &BTreeSet<&str>, dim: usize) -> Result<(), GroupFileError> {
        check_amount("join_in".into(), self.join_in)?;
        check_keys(self.flows.iter().map(|f| &f.stream), |i| {
            format!("flows[{i}].stream")
        })?;
        check_keys(self.seen.iter().map(|s| &s.stream), |i| {
            format!("seen[{i}].stream")
        })?;
        check_keys(self.cycles.iter().map(|c| &c.stream), |i| {
            format!("cycles[{i}].stream")
        })?;
        check_keys(self.planned.iter().map(|p| &p.stream), |i| {
            format!("planned[{i}].stream")
        })?;
        for (i, saved) in self.flows.iter().enumerate() {
            let at = |rest: &str| format!("flows[{i}]{rest}");
            let flow = &saved.flow;
            for (name, value) in [
                ("interest", flow.interest),
                ("willingness", flow.willingness),
                ("focus_chance", flow.focus_chance),
                ("focus_draw_in", flow.focus_draw_in),
                ("silent_for", flow.silent_for),
                ("absent_for", flow.absent_for),
                ("addressed_for", flow.addressed_for),
            ] {
                check_amount(at(&format!(".flow.{name}")), value)?;
            }
            if flow.focus_chance > 1.0 {
                return Err(GroupFileError::new(
                    at(".flow.focus_chance"),
                    "a chance is at most 1",
                ));
            }
        }
        for (i, heard) in self.pending.iter().enumerate() {
            let at = |rest: &str| format!("pending[{i}]{rest}");
            check_text(at(".line"), &heard.line)?;
            check_vector(at(".embedding"), &heard.embedding, dim)?;
        }
        for (i, plan) in self.planned.iter().enumerate() {
            let at = |rest: &str| format!("planned[{i}]{rest}");
            plan.said.check(&at(".said"), dim)?;
            for (j, later) in plan.later.iter().enumerate() {
                later.check(&at(&format!(".later[{j}]")), dim)?;
            }
            for (j, seat) in plan.seats.iter().enumerate() {
                check_persona(personas, at(&format!(".seats[{j}]")), seat)?;
            }
        }
        Ok(())
    }

    /// The attention this file describes, personas found by `entities`.
    fn into_attention(self, entities: &BTreeMap<String, Entity>) -> GroupAttention {
        let mut group = GroupAttention::default();
        group.attention = Attention {
            social: self.social,
            flows: self
                .flows
                .into_iter()
                .map(|saved| (saved.stream, saved.flow))
                .collect(),
            join_in: self.join_in,
            // Read again from the persona's action at its next step, before it is used.
            engagement: Engagement::default(),
        };
        group.seen = self
            .seen
            .into_iter()
            .map(|saved| (saved.stream, saved.seq))
            .collect();
        group.cycles = self
            .cycles
            .into_iter()
            .map(|saved| (saved.stream, (saved.looked, saved.due)))
            .collect();
        group.pending = self
            .pending
            .into_iter()
            .map(|saved| PendingMemory {
                heard: Arc::new(HeardLine {
                    time: saved.time,
                    speaker: saved.speaker,
                    speaker_keyword: saved.speaker_keyword,
                    line: saved.line,
                    object: saved.object,
                    description: saved.description,
                    embedding: saved.embedding,
                }),
                named: saved.named,
            })
            .collect();
        group.planned = self
            .planned
            .into_iter()
            .map(|saved| {
                let plan = PlannedLine {
                    said: saved.said.into_said(),
                    later: saved.later.into_iter().map(SavedSaid::into_said).collect(),
                    after: saved.after,
                    seats: saved
                        .seats
                        .iter()
                        .filter_map(|seat| entities.get(seat).copied())
                        .collect(),
                    until: saved.until,
                };
                (saved.stream, plan)
            })
            .collect();
        group
    }
}

/// Group calls in flight: a save waits for them as it waits for thoughts (a persona's call
/// also keeps it [`AwaitingCognition`](crate::clock::AwaitingCognition); a game's post is
/// embedded by a call of no persona).
pub(crate) fn calls_in_flight(world: &World) -> usize {
    world
        .get_resource::<GroupCalls>()
        .map_or(0, GroupCalls::len)
}

/// Puts a loaded save's group conversations into `world`, replacing whatever streams, rounds
/// and calls it had (a call in flight belongs to the town being replaced; dropping its task
/// cancels it). `attention` pairs each spawned persona with its file; `entities` finds a
/// persona by name. The files were checked when the save was decoded.
pub(crate) fn restore(
    world: &mut World,
    groups: GroupsFile,
    attention: Vec<(Entity, GroupFile)>,
    entities: &BTreeMap<String, Entity>,
) {
    let streams = groups.streams.into_iter().map(|saved| {
        let key = saved.key;
        let embeddings = saved
            .lines
            .iter()
            .filter_map(|line| Some((line.seq, line.embedding.as_deref()?.into())))
            .collect();
        GroupStream {
            embeddings,
            awaiting: BTreeSet::new(),
            shown: saved.shown,
            members: saved
                .members
                .iter()
                .filter_map(|name| entities.get(name).copied())
                .collect(),
            lines: saved
                .lines
                .into_iter()
                .map(|line| GroupLine {
                    seq: line.seq,
                    speaker: line.speaker,
                    persona: line.persona.and_then(|name| entities.get(&name).copied()),
                    text: line.text,
                    emoji: line.emoji,
                    time: line.time,
                })
                .collect(),
            opened: saved.opened,
            said: saved.said,
            key,
        }
    });
    let streams: Vec<GroupStream> = streams.collect();
    // Members of a talk shown to bystanders do not perceive it themselves (see `talk`).
    let mut taking_part: BTreeMap<Entity, Vec<String>> = BTreeMap::new();
    for stream in &streams {
        if let Some((_, event, _)) = &stream.shown {
            for member in &stream.members {
                taking_part
                    .entry(*member)
                    .or_default()
                    .push(event.subject.clone());
            }
        }
    }
    world.insert_resource(GroupStreams::from_streams(streams));
    super::talk::set_taking_part(world, taking_part);
    world.insert_resource(LastRounds(
        groups
            .rounds
            .into_iter()
            .map(|round| (round.stream, round.step))
            .collect(),
    ));
    drop_calls(world);
    for (entity, file) in attention {
        let group = file.into_attention(entities);
        if let Ok(mut persona) = world.get_entity_mut(entity) {
            persona.insert(group);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::ChatState;

    const DIM: usize = 4;

    fn time(minute: u32) -> NaiveDateTime {
        chrono::NaiveDate::from_ymd_opt(2023, 2, 13)
            .and_then(|d| d.and_hms_opt(9, minute, 0))
            .expect("time")
    }

    fn said(text: &str) -> Said {
        Said {
            text: text.into(),
            emoji: false,
            description: format!("Ada said in the cafe: {text}"),
            embedding: Some(vec![0.5; DIM]),
        }
    }

    /// An attention with every field in use, and the names of its two personas.
    fn busy_attention(ada: Entity, bo: Entity) -> GroupAttention {
        let cafe = StreamKey::Arena("town:cafe:counter".into());
        let board = StreamKey::Channel("notice board".into());
        let mut group = GroupAttention::default();
        group.attention.social = SocialState::Focused;
        group.attention.join_in = 12.5;
        *group.attention.flow(&cafe) = SubFlow {
            state: ChatState::Focused,
            interest: 7.25,
            willingness: 1.5,
            focus_chance: 0.3,
            focus_draw_in: 2.0,
            no_replies: 1,
            silent_for: 40.0,
            absent_for: 0.0,
            addressed_for: 30.0,
        };
        group.attention.flow(&board);
        group.seen.insert(cafe.clone(), 9);
        group.seen.insert(board, 2);
        group.cycles.insert(cafe.clone(), (8, 3250));
        group.pending.push(PendingMemory {
            heard: Arc::new(HeardLine {
                time: time(5),
                speaker: "Bo Lind".into(),
                speaker_keyword: "bo lind".into(),
                line: "Ada, the bread is out!".into(),
                object: "the group in counter".into(),
                description: "Bo Lind said in counter: Ada, the bread is out!".into(),
                embedding: vec![0.25; DIM],
            }),
            named: true,
        });
        group.planned.insert(
            cafe,
            PlannedLine {
                said: said("Then I'll have a roll."),
                later: vec![said("Thanks, Bo.")],
                after: 9,
                seats: vec![ada, bo],
                until: 3260,
            },
        );
        group
    }

    fn names(pairs: &[(Entity, &str)]) -> HashMap<Entity, String> {
        pairs.iter().map(|(e, n)| (*e, (*n).to_owned())).collect()
    }

    #[test]
    fn an_attention_comes_back_as_it_was_saved() {
        let mut world = World::new();
        let (ada, bo) = (world.spawn_empty().id(), world.spawn_empty().id());
        let group = busy_attention(ada, bo);
        let file = GroupFile::of(&group, &names(&[(ada, "Ada Quill"), (bo, "Bo Lind")]));
        let json = serde_json::to_string_pretty(&file).expect("json");
        let back: GroupFile = serde_json::from_str(&json).expect("parse");
        assert_eq!(back, file, "the JSON round trip is exact (floats included)");
        let personas = BTreeSet::from(["Ada Quill", "Bo Lind"]);
        assert_eq!(back.check(&personas, DIM), Ok(()));
        // Loaded into another world, where the personas have other entities.
        let mut other = World::new();
        let (ada2, bo2) = (other.spawn_empty().id(), other.spawn_empty().id());
        let entities =
            BTreeMap::from([("Ada Quill".to_owned(), ada2), ("Bo Lind".to_owned(), bo2)]);
        let loaded = back.into_attention(&entities);
        assert_eq!(loaded.attention, group.attention);
        assert_eq!(loaded.seen, group.seen);
        assert_eq!(loaded.cycles, group.cycles);
        assert_eq!(loaded.pending, group.pending);
        let plan = loaded.planned.values().next().expect("a plan");
        assert_eq!(plan.seats, vec![ada2, bo2], "seats found by name");
        assert_eq!(plan.said, group.planned.values().next().expect("plan").said);
    }

    #[test]
    fn streams_come_back_with_their_speakers_found_by_name() {
        let mut world = World::new();
        let (ada, bo, gone) = (
            world.spawn_empty().id(),
            world.spawn_empty().id(),
            world.spawn_empty().id(),
        );
        let key = StreamKey::Arena("town:cafe:counter".into());
        let mut streams = GroupStreams::default();
        streams.open(key.clone(), time(1));
        streams.say(&key, "Ada Quill", Some(ada), "Morning!", false, time(2));
        streams.say(&key, "Mayor", None, "Fair on Saturday.", false, time(3));
        if let Some(stream) = streams.get_mut(&key) {
            stream.members = [ada, bo, gone].into();
        }
        world.insert_resource(streams);
        world.insert_resource(LastRounds(BTreeMap::from([(key.clone(), 3240)])));
        // `gone` is no persona any more: left out of the members.
        let file = GroupsFile::of(&world, &names(&[(ada, "Ada Quill"), (bo, "Bo Lind")]));
        let mut members = file.streams[0].members.clone();
        members.sort();
        assert_eq!(members, ["Ada Quill", "Bo Lind"]);
        assert_eq!(
            file.check(&BTreeSet::from(["Ada Quill", "Bo Lind"])),
            Ok(())
        );

        let mut other = World::new();
        let (ada2, bo2) = (other.spawn_empty().id(), other.spawn_empty().id());
        other.insert_resource(GroupStreams::default());
        let entities =
            BTreeMap::from([("Ada Quill".to_owned(), ada2), ("Bo Lind".to_owned(), bo2)]);
        restore(&mut other, file, Vec::new(), &entities);
        let streams = other.resource::<GroupStreams>();
        let back = streams.get(&key).expect("the stream is open");
        assert_eq!(back.members, [ada2, bo2].into());
        assert_eq!(back.said, 2);
        let speakers: Vec<_> = back.lines.iter().map(|l| l.persona).collect();
        assert_eq!(speakers, [Some(ada2), None]);
        assert_eq!(other.resource::<LastRounds>().0.get(&key), Some(&3240));
        assert_eq!(calls_in_flight(&other), 0);
    }

    /// A way to break a file.
    type Damage<T> = Box<dyn Fn(&mut T)>;

    /// A valid `groups.json` with one stream of two lines, as JSON to break.
    fn groups_json() -> serde_json::Value {
        serde_json::json!({
            "streams": [{
                "key": {"Channel": "notice board"},
                "members": ["Ada Quill"],
                "opened": "2023-02-13T09:00:00",
                "said": 5,
                "lines": [
                    {"seq": 4, "speaker": "Mayor", "persona": null, "text": "Fair!",
                     "emoji": false, "time": "2023-02-13T09:01:00"},
                    {"seq": 5, "speaker": "Ada Quill", "persona": "Ada Quill", "text": "Yes!",
                     "emoji": false, "time": "2023-02-13T09:02:00"}
                ]
            }],
            "rounds": []
        })
    }

    fn check_groups(value: &serde_json::Value) -> Result<(), String> {
        let file: GroupsFile = serde_json::from_value(value.clone()).map_err(|e| e.to_string())?;
        file.check(&BTreeSet::from(["Ada Quill", "Bo Lind"]))
            .map_err(|e| format!("{}: {}", e.field, e.message))
    }

    #[test]
    fn a_damaged_or_hostile_groups_file_is_refused_naming_the_field() {
        assert_eq!(check_groups(&groups_json()), Ok(()));
        let long = "x".repeat(MAX_LINE_CHARS + 1);
        let mut many_lines = groups_json();
        many_lines["streams"][0]["said"] = serde_json::json!(100);
        many_lines["streams"][0]["lines"] = (1..=MAX_LINES as u64 + 1)
            .map(|seq| {
                serde_json::json!({"seq": seq, "speaker": "Mayor", "persona": null,
                    "text": "hi", "emoji": false, "time": "2023-02-13T09:01:00"})
            })
            .collect();
        let channels: Vec<serde_json::Value> = (0..=MAX_CHANNELS)
            .map(|i| {
                serde_json::json!({"key": {"Channel": format!("c{i}")}, "members": [],
                    "opened": "2023-02-13T09:00:00", "said": 0, "lines": []})
            })
            .collect();
        let cases: Vec<(&str, Damage<serde_json::Value>, &str)> = vec![
            (
                "stranger member",
                Box::new(|v| v["streams"][0]["members"][0] = "Eve".into()),
                "streams[0].members[0]",
            ),
            (
                "member twice",
                Box::new(|v| {
                    v["streams"][0]["members"] = serde_json::json!(["Bo Lind", "Bo Lind"])
                }),
                "streams[0].members[1]",
            ),
            (
                "stranger speaker",
                Box::new(|v| v["streams"][0]["lines"][1]["persona"] = "Eve".into()),
                "streams[0].lines[1].persona",
            ),
            (
                "seq past said",
                Box::new(|v| v["streams"][0]["said"] = 4.into()),
                "streams[0].lines[1].seq",
            ),
            (
                "seq backwards",
                Box::new(|v| v["streams"][0]["lines"][1]["seq"] = 3.into()),
                "streams[0].lines[1].seq",
            ),
            (
                "seq zero",
                Box::new(|v| v["streams"][0]["lines"][0]["seq"] = 0.into()),
                "streams[0].lines[0].seq",
            ),
            (
                "long line",
                Box::new(move |v| v["streams"][0]["lines"][0]["text"] = long.clone().into()),
                "streams[0].lines[0].text",
            ),
            (
                "no speaker",
                Box::new(|v| v["streams"][0]["lines"][0]["speaker"] = " ".into()),
                "streams[0].lines[0].speaker",
            ),
            (
                "path in channel",
                Box::new(|v| v["streams"][0]["key"] = serde_json::json!({"Channel": "../../etc"})),
                "streams[0].key",
            ),
            (
                "control in channel",
                Box::new(|v| v["streams"][0]["key"] = serde_json::json!({"Channel": "a\u{0}b"})),
                "streams[0].key",
            ),
            (
                "padded channel",
                Box::new(|v| v["streams"][0]["key"] = serde_json::json!({"Channel": " board "})),
                "streams[0].key",
            ),
            (
                "empty arena",
                Box::new(|v| v["streams"][0]["key"] = serde_json::json!({"Arena": ""})),
                "streams[0].key",
            ),
            (
                "stream twice",
                Box::new(|v| {
                    let s = v["streams"][0].clone();
                    v["streams"].as_array_mut().expect("array").push(s);
                }),
                "streams[1].key",
            ),
            (
                "too many lines",
                Box::new(move |v| *v = many_lines.clone()),
                "streams[0].lines",
            ),
            (
                "too many channels",
                Box::new(move |v| v["streams"] = channels.clone().into()),
                "streams[64].key",
            ),
            (
                "round twice",
                Box::new(
                    |v| v["rounds"] = serde_json::json!([{"stream": {"Arena": "a"}, "step": 1}, {"stream": {"Arena": "a"}, "step": 2}]),
                ),
                "rounds[1].stream",
            ),
        ];
        for (what, break_it, field) in cases {
            let mut value = groups_json();
            break_it(&mut value);
            let refused = check_groups(&value).expect_err(what);
            assert!(
                refused.starts_with(&format!("{field}: ")),
                "{what}: {refused}"
            );
        }
        // Unknown fields and wrong types are refused by the parser.
        let mut extra = groups_json();
        extra["streams"][0]["lines"][0]["evil"] = true.into();
        assert!(check_groups(&extra).is_err());
        let mut typed = groups_json();
        typed["streams"][0]["said"] = "five".into();
        assert!(check_groups(&typed).is_err());
    }

    #[test]
    fn a_damaged_or_hostile_attention_is_refused_naming_the_field() {
        let mut world = World::new();
        let (ada, bo) = (world.spawn_empty().id(), world.spawn_empty().id());
        let valid = GroupFile::of(
            &busy_attention(ada, bo),
            &names(&[(ada, "Ada Quill"), (bo, "Bo Lind")]),
        );
        let personas = BTreeSet::from(["Ada Quill", "Bo Lind"]);
        assert_eq!(valid.check(&personas, DIM), Ok(()));
        assert_eq!(
            valid.check(&personas, 0),
            Ok(()),
            "a dimension not known yet"
        );
        let cases: Vec<(&str, Damage<GroupFile>, &str)> = vec![
            (
                "infinite join_in",
                Box::new(|f| f.join_in = f32::INFINITY),
                "join_in",
            ),
            (
                "negative interest",
                Box::new(|f| f.flows[0].flow.interest = -1.0),
                "flows[0].flow.interest",
            ),
            (
                "NaN willingness",
                Box::new(|f| f.flows[0].flow.willingness = f32::NAN),
                "flows[0].flow.willingness",
            ),
            (
                "chance over 1",
                Box::new(|f| f.flows[0].flow.focus_chance = 1.5),
                "flows[0].flow.focus_chance",
            ),
            (
                "flow twice",
                Box::new(|f| {
                    let x = f.flows[0].clone();
                    f.flows.push(x);
                }),
                "flows[2].stream",
            ),
            (
                "seen twice",
                Box::new(|f| {
                    let x = f.seen[0].clone();
                    f.seen.push(x);
                }),
                "seen[2].stream",
            ),
            (
                "bad cycle key",
                Box::new(|f| f.cycles[0].stream = StreamKey::Channel("no/slash".into())),
                "cycles[0].stream",
            ),
            (
                "short vector",
                Box::new(|f| f.pending[0].embedding.pop().map(drop).unwrap_or(())),
                "pending[0].embedding",
            ),
            (
                "NaN vector",
                Box::new(|f| f.pending[0].embedding[0] = f32::NAN),
                "pending[0].embedding",
            ),
            (
                "long heard line",
                Box::new(|f| f.pending[0].line = "y".repeat(MAX_LINE_CHARS + 1)),
                "pending[0].line",
            ),
            (
                "stranger seat",
                Box::new(|f| f.planned[0].seats[1] = "Eve".into()),
                "planned[0].seats[1]",
            ),
            (
                "long planned line",
                Box::new(|f| f.planned[0].said.text = "z".repeat(MAX_LINE_CHARS + 1)),
                "planned[0].said.text",
            ),
            (
                "wide later vector",
                Box::new(|f| f.planned[0].later[0].embedding = Some(vec![0.1; DIM + 1])),
                "planned[0].later[0].embedding",
            ),
            (
                "empty vector",
                Box::new(|f| f.planned[0].said.embedding = Some(Vec::new())),
                "planned[0].said.embedding",
            ),
        ];
        for (what, break_it, field) in cases {
            let mut file = valid.clone();
            break_it(&mut file);
            let refused = file.check(&personas, DIM).expect_err(what);
            assert_eq!(refused.field, field, "{what}: {}", refused.message);
        }
    }
}
