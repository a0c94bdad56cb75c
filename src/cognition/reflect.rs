//! Reflect (SPEC §3.8): when enough poignant things have happened (the importance budget of
//! 150 is spent), a persona asks itself three questions about its latest memories, recalls what
//! bears on each, and stores five insights per question as thoughts resting on their evidence.
//! At the end of a conversation it also stores what the chat means for its plans and a memo.

use chrono::{Duration, NaiveDateTime};

use crate::memory::{NewMemory, NodeId, new_retrieve};
use crate::persona::MindState;
use crate::prompt::{PromptContext, run_prompt};
use crate::settings::AgentSettings;

use super::perceive::{embed_together, embedding_for, embedding_to_store};
use super::prompts::{
    ActionEventTriple, AfterChat, FocalPoints, Insight, InsightsWithEvidence, MemoAfterChat,
    PlanningThoughtAfterChat, ThoughtPoignancy,
};
use super::vocabulary::{PlanEvent, retrieval_params};

/// Whether reflection is due (SPEC §3.8): the budget is spent and something happened.
pub(crate) fn reflection_due(mind: &MindState) -> bool {
    mind.scratch.importance_trigger_curr <= 0 && mind.scratch.importance_ele_n > 0
}

/// What lean mode already knows of a thought before it is stored: its embedding (fetched with
/// others) and its poignancy (rated by the call that wrote it). `None` is asked as usual.
#[derive(Debug, Default)]
pub(crate) struct KnownOfThought {
    pub(crate) embedding: Option<Vec<f32>>,
    pub(crate) poignancy: Option<u8>,
}

/// Stores a thought: its triple, poignancy and embedding — from the model, unless `known`
/// has them — expiring after the configured days, resting on `evidence`. Returns its id
/// (`None` when it could not be stored).
pub(crate) async fn store_thought(
    mind: &mut MindState,
    ctx: &PromptContext,
    settings: &AgentSettings,
    now: NaiveDateTime,
    text: &str,
    evidence: Vec<NodeId>,
    known: KnownOfThought,
) -> Option<NodeId> {
    let name = mind.scratch.name.clone();
    let (triple, poignancy) = triple_and_poignancy(
        ctx,
        &name,
        || mind.scratch.identity_summary(),
        &mind.scratch.first_name,
        text,
        known.poignancy,
    )
    .await;
    // `None`: memory holds the text's vector already, which the thought reuses.
    let embedding = match known.embedding {
        Some(vector) => Some(vector),
        None => embedding_to_store(mind, ctx, text).await?,
    };
    let thought = WrittenThought {
        text: text.to_string(),
        triple,
        poignancy,
        embedding,
        expires_in_days: settings.thought_expiration_days,
    };
    keep_thought(mind, now, thought, evidence)
}

/// A thought's triple (from the model) and its poignancy (`known`, or from the model), the two
/// calls at once when both are asked.
async fn triple_and_poignancy(
    ctx: &PromptContext,
    name: &str,
    identity: impl FnOnce() -> String,
    first_name: &str,
    text: &str,
    known: Option<u8>,
) -> ((String, String, String), u8) {
    let triple = ActionEventTriple {
        name: name.to_string(),
        action: text.to_string(),
    };
    let (triple, poignancy) = match known {
        Some(poignancy) => (run_prompt(ctx, &triple).await.value, poignancy),
        None => {
            let poignancy = ThoughtPoignancy {
                identity: identity(),
                first_name: first_name.to_string(),
                thought: text.to_string(),
            };
            let (triple, poignancy) = bevy::tasks::futures_lite::future::zip(
                run_prompt(ctx, &triple),
                run_prompt(ctx, &poignancy),
            )
            .await;
            (triple.value, poignancy.value)
        }
    };
    let s = triple.subject.unwrap_or_else(|| name.to_string());
    let p = triple.predicate.unwrap_or_else(|| "is".into());
    let o = triple.object.unwrap_or_else(|| "thinking".into());
    ((s, p, o), poignancy)
}

/// A thought written away from the persona's mind (in a talk turn's task, SPEC §16), with all
/// the model gave it, stored by [`keep_thought`] when the mind is at hand.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct WrittenThought {
    /// The thought.
    pub(crate) text: String,
    /// Its subject, predicate and object.
    pub(crate) triple: (String, String, String),
    /// How much it matters (1..=10).
    pub(crate) poignancy: u8,
    /// Its vector (`None`: the memory holds the text's vector already).
    pub(crate) embedding: Option<Vec<f32>>,
    /// Days until it expires (`AgentSettings::thought_expiration_days`).
    pub(crate) expires_in_days: i64,
}

/// Stores a written thought, expiring after its days, resting on `evidence`.
pub(crate) fn keep_thought(
    mind: &mut MindState,
    now: NaiveDateTime,
    thought: WrittenThought,
    evidence: Vec<NodeId>,
) -> Option<NodeId> {
    let (s, p, o) = thought.triple;
    let mut memory = NewMemory::new(now, (s.clone(), p.clone(), o.clone()), thought.text)
        .keywords([s, p, o])
        .poignancy(thought.poignancy)
        .expires(now + Duration::days(thought.expires_in_days));
    memory.embedding = thought.embedding;
    match mind.associative.add_thought(memory, evidence) {
        Ok(id) => Some(id),
        Err(error) => {
            bevy::log::warn!(%error, "could not store a thought");
            None
        }
    }
}

/// Runs one reflection (SPEC §3.8) and resets the budget: focal points, then insights on what
/// each recalls — or, with lean mode's `one_pass_reflection`, insights straight from the latest
/// memories in one call.
pub(crate) async fn reflect(
    mind: &mut MindState,
    ctx: &PromptContext,
    settings: &AgentSettings,
    now: NaiveDateTime,
    events: &mut Vec<PlanEvent>,
) {
    let stored = if settings.lean.one_pass_reflection {
        reflect_in_one_pass(mind, ctx, settings, now).await
    } else {
        reflect_on_focal_points(mind, ctx, settings, now).await
    };
    mind.scratch.importance_trigger_curr = mind.scratch.params.importance_trigger_max;
    mind.scratch.importance_ele_n = 0;
    events.push(PlanEvent::Reflected(stored));
}

/// SPEC §3.8: questions about the latest memories, and insights on what each one recalls.
async fn reflect_on_focal_points(
    mind: &mut MindState,
    ctx: &PromptContext,
    settings: &AgentSettings,
    now: NaiveDateTime,
) -> Vec<String> {
    let name = mind.scratch.name.clone();
    let n = mind.scratch.importance_ele_n as usize;
    let statements: Vec<String> = mind
        .associative
        .latest_accessed_events_and_thoughts(n.max(1))
        .iter()
        .map(|node| node.description.clone())
        .collect();
    let focal_points = run_prompt(
        ctx,
        &FocalPoints {
            name: name.clone(),
            statements,
            count: settings.reflection_focal_points,
        },
    )
    .await
    .value;
    let params = retrieval_params(mind, settings);
    let mut stored = Vec::new();
    for point in focal_points {
        let Some(focal) = embedding_for(mind, ctx, &point).await else {
            continue;
        };
        let ids = match new_retrieve(
            &mut mind.associative,
            &focal,
            now,
            settings.retrieve_n,
            &params,
        ) {
            Ok(ids) => ids,
            Err(error) => {
                bevy::log::warn!(%error, "reflection retrieval failed");
                continue;
            }
        };
        let nodes: Vec<(NodeId, String)> = ids
            .iter()
            .filter_map(|id| {
                mind.associative
                    .node(*id)
                    .map(|n| (*id, n.description.clone()))
            })
            .collect();
        if nodes.is_empty() {
            continue;
        }
        let insights = run_prompt(
            ctx,
            &InsightsWithEvidence {
                name: name.clone(),
                statements: nodes.iter().map(|(_, d)| d.clone()).collect(),
                count: settings.reflection_insights,
                rated: false,
            },
        )
        .await
        .value;
        for insight in insights {
            let evidence = evidence_ids(&insight, &nodes);
            let known = KnownOfThought::default();
            if store_thought(mind, ctx, settings, now, &insight.text, evidence, known)
                .await
                .is_some()
            {
                stored.push(insight.text);
            }
        }
    }
    stored
}

/// Lean mode's reflection: the insights of every focal point at once
/// (`reflection_focal_points` × `reflection_insights` at most), from the latest memories the
/// focal points would have been asked about (at most `retrieve_n` of them), without the
/// questions and the recall per question, each insight rated in the same answer. The memories
/// an insight rests on count as recalled (their `last_accessed` is now, as retrieval would
/// have set it), and the insights are embedded in one request.
async fn reflect_in_one_pass(
    mind: &mut MindState,
    ctx: &PromptContext,
    settings: &AgentSettings,
    now: NaiveDateTime,
) -> Vec<String> {
    let n = (mind.scratch.importance_ele_n as usize).clamp(1, settings.retrieve_n.max(1));
    let nodes: Vec<(NodeId, String)> = mind
        .associative
        .latest_accessed_events_and_thoughts(n)
        .iter()
        .map(|node| (node.id, node.description.clone()))
        .collect();
    if nodes.is_empty() {
        return Vec::new();
    }
    let insights = run_prompt(
        ctx,
        &InsightsWithEvidence {
            name: mind.scratch.name.clone(),
            statements: nodes.iter().map(|(_, d)| d.clone()).collect(),
            count: settings
                .reflection_focal_points
                .saturating_mul(settings.reflection_insights),
            rated: true,
        },
    )
    .await
    .value;
    let texts: Vec<String> = insights.iter().map(|i| i.text.clone()).collect();
    let mut vectors = embed_together(mind, ctx, &texts).await;
    let mut stored = Vec::new();
    for insight in insights {
        let evidence = evidence_ids(&insight, &nodes);
        mind.associative.set_last_accessed(&evidence, now);
        let known = KnownOfThought {
            embedding: vectors.remove(&insight.text),
            poignancy: insight.poignancy,
        };
        if store_thought(mind, ctx, settings, now, &insight.text, evidence, known)
            .await
            .is_some()
        {
            stored.push(insight.text);
        }
    }
    stored
}

/// The memories an insight rests on: its statement indices into the `nodes` it was shown.
fn evidence_ids(insight: &Insight, nodes: &[(NodeId, String)]) -> Vec<NodeId> {
    insight
        .evidence
        .iter()
        .filter_map(|i| nodes.get(*i).map(|(id, _)| *id))
        .collect()
}

/// Whether the end-of-chat thoughts are due: chatting, the chat ends within the next step,
/// and they were not stored yet for this chat.
pub(crate) fn chat_thoughts_due(mind: &MindState, now: NaiveDateTime, sec_per_step: u32) -> bool {
    let s = &mind.scratch;
    s.chatting_with.is_some()
        && !s.chat.is_empty()
        && !s.chat_thoughts_done
        && s.chatting_end_time
            .is_some_and(|end| now + Duration::seconds(i64::from(sec_per_step)) >= end)
}

/// Stores the planning thought and the memo after a chat (SPEC §3.7), evidence = the chat's
/// latest memory nodes about the partner.
pub(crate) async fn chat_thoughts(
    mind: &mut MindState,
    ctx: &PromptContext,
    settings: &AgentSettings,
    now: NaiveDateTime,
) {
    let Some(partner) = mind.scratch.chatting_with.clone() else {
        return;
    };
    let conversation = mind.scratch.chat.clone();
    let evidence: Vec<NodeId> = mind
        .associative
        .last_chat_with(&partner)
        .map(|node| vec![node.id])
        .unwrap_or_default();
    think_after_chat(mind, ctx, settings, now, &partner, conversation, &evidence).await;
    mind.scratch.chat_thoughts_done = true;
}

/// Stores the planning thought and memo of each group conversation the persona left (SPEC
/// §16: [`Scratch::group_after_chats`](crate::persona::Scratch::group_after_chats), filled by
/// the group conversations), evidence = the conversation's latest passage.
pub(crate) async fn group_chat_thoughts(
    mind: &mut MindState,
    ctx: &PromptContext,
    settings: &AgentSettings,
    now: NaiveDateTime,
) {
    let left = std::mem::take(&mut mind.scratch.group_after_chats);
    for talk in left {
        let evidence: Vec<NodeId> = mind
            .associative
            .chats()
            .find(|node| node.object == talk.object)
            .map(|node| vec![node.id])
            .unwrap_or_default();
        let conversation = talk.lines;
        think_after_chat(
            mind,
            ctx,
            settings,
            now,
            &talk.partner,
            conversation,
            &evidence,
        )
        .await;
    }
}

/// The after-chat of any conversation (SPEC §3.7, §16): [`after_chat_texts`] over
/// `conversation` with `partner`, stored by [`store_after_chat`] resting on `evidence`.
pub(crate) async fn think_after_chat(
    mind: &mut MindState,
    ctx: &PromptContext,
    settings: &AgentSettings,
    now: NaiveDateTime,
    partner: &str,
    conversation: Vec<(String, String)>,
    evidence: &[NodeId],
) {
    let identity = settings
        .lean
        .after_chat_at_once
        .then(|| mind.scratch.identity_summary());
    let name = mind.scratch.name.clone();
    let first_name = mind.scratch.first_name.clone();
    let thoughts = after_chat_texts(
        ctx,
        settings,
        identity,
        &name,
        &first_name,
        partner,
        conversation,
    )
    .await;
    store_after_chat(mind, ctx, settings, now, thoughts, evidence).await;
}

/// Stores [`after_chat_texts`]' thoughts, resting on `evidence`: in lean mode their vectors
/// fetched together and their ratings as the one call gave them, in faithful mode each rated
/// and embedded as it is stored.
async fn store_after_chat(
    mind: &mut MindState,
    ctx: &PromptContext,
    settings: &AgentSettings,
    now: NaiveDateTime,
    thoughts: Vec<(String, Option<u8>)>,
    evidence: &[NodeId],
) {
    let mut vectors = if settings.lean.after_chat_at_once {
        let texts: Vec<String> = thoughts.iter().map(|(text, _)| text.clone()).collect();
        embed_together(mind, ctx, &texts).await
    } else {
        Default::default()
    };
    for (text, poignancy) in thoughts {
        let known = KnownOfThought {
            embedding: vectors.remove(&text),
            poignancy,
        };
        store_thought(mind, ctx, settings, now, &text, evidence.to_vec(), known).await;
    }
}

/// The two thoughts after a conversation (SPEC §3.7, §16): the planning thought (with its
/// `"For <name>'s planning: "`) and the memo, in that order, each with the poignancy lean
/// mode's one call rated (`None`: faithful mode's two calls, rated when stored). `identity` is
/// the persona's summary, asked only by the one call (`Some` with `after_chat_at_once`).
pub(crate) async fn after_chat_texts(
    ctx: &PromptContext,
    settings: &AgentSettings,
    identity: Option<String>,
    name: &str,
    first_name: &str,
    partner: &str,
    conversation: Vec<(String, String)>,
) -> Vec<(String, Option<u8>)> {
    if settings.lean.after_chat_at_once {
        let prompt = AfterChat {
            identity: identity.unwrap_or_default(),
            name: name.to_string(),
            first_name: first_name.to_string(),
            partner: partner.to_string(),
            conversation,
        };
        let thoughts = run_prompt(ctx, &prompt).await.value;
        vec![
            (
                format!("For {name}'s planning: {}", thoughts.planning),
                Some(thoughts.planning_poignancy),
            ),
            (thoughts.memo, Some(thoughts.memo_poignancy)),
        ]
    } else {
        let planning = PlanningThoughtAfterChat {
            name: name.to_string(),
            partner: partner.to_string(),
            conversation: conversation.clone(),
        };
        let memo = MemoAfterChat {
            name: name.to_string(),
            partner: partner.to_string(),
            conversation,
        };
        let (planning, memo) = bevy::tasks::futures_lite::future::zip(
            run_prompt(ctx, &planning),
            run_prompt(ctx, &memo),
        )
        .await;
        vec![
            (format!("For {name}'s planning: {}", planning.value), None),
            (memo.value, None),
        ]
    }
}

/// [`after_chat_texts`] written out away from the persona's mind (a talk turn's task): each
/// thought with its triple, poignancy and vector, for [`keep_thought`] to store. A thought whose
/// vector could not be had is left out, as [`store_thought`] leaves it.
pub(crate) async fn write_after_chat(
    ctx: &PromptContext,
    settings: &AgentSettings,
    identity: &str,
    name: &str,
    first_name: &str,
    partner: &str,
    conversation: Vec<(String, String)>,
) -> Vec<WrittenThought> {
    let lean_identity = settings
        .lean
        .after_chat_at_once
        .then(|| identity.to_string());
    let texts = after_chat_texts(
        ctx,
        settings,
        lean_identity,
        name,
        first_name,
        partner,
        conversation,
    )
    .await;
    let mut written = Vec::new();
    for (text, known) in texts {
        let (triple, poignancy) =
            triple_and_poignancy(ctx, name, || identity.to_string(), first_name, &text, known)
                .await;
        let Ok(vector) = ctx.embed_one(text.clone()).await else {
            continue;
        };
        written.push(WrittenThought {
            text,
            triple,
            poignancy,
            embedding: Some(vector),
            expires_in_days: settings.thought_expiration_days,
        });
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::{AssociativeMemory, ChatLine, NodeKind};
    use crate::persona::GroupAfterChat;
    use crate::prompt::PromptLibrary;

    fn ctx() -> PromptContext {
        PromptContext::new(crate::llm::town_script_client(7), PromptLibrary::default())
    }

    fn mind_with_a_passage() -> (MindState, NodeId) {
        let ctx = ctx();
        let text = "Talk in the group in the cafe: Bo Tan said \"The fair moved to Saturday\"";
        let vector = bevy::tasks::block_on(ctx.embed_one(text)).expect("the town script embeds");
        let mut mind = MindState {
            associative: AssociativeMemory::new("test", vector.len()),
            ..Default::default()
        };
        mind.scratch.name = "Eva Moss".into();
        mind.scratch.first_name = "Eva".into();
        let now = chrono::NaiveDate::from_ymd_opt(2023, 2, 13)
            .and_then(|d| d.and_hms_opt(9, 0, 0))
            .expect("a time");
        let chat = NewMemory::new(
            now,
            ("Eva Moss", "chat with", "the group in the cafe"),
            text,
        )
        .poignancy(2)
        .embedding(vector);
        let lines = vec![ChatLine::new("Bo Tan", "The fair moved to Saturday")];
        let id = mind.associative.add_chat(chat, lines).expect("stored");
        (mind, id)
    }

    /// A group conversation the persona left is thought over by its next thought (SPEC §16):
    /// the planning thought and the memo, resting on the conversation's latest passage, in
    /// faithful mode (two calls) and in lean mode (one `after_chat` answer); the queue empties.
    #[test]
    fn a_group_conversation_left_gets_its_planning_thought_and_memo() {
        for settings in [AgentSettings::default(), AgentSettings::lean()] {
            let (mut mind, passage) = mind_with_a_passage();
            mind.scratch.group_after_chats.push(GroupAfterChat {
                partner: "Bo Tan".into(),
                object: "the group in the cafe".into(),
                lines: vec![("Bo Tan".into(), "The fair moved to Saturday".into())],
            });
            let now = chrono::NaiveDate::from_ymd_opt(2023, 2, 13)
                .and_then(|d| d.and_hms_opt(9, 30, 0))
                .expect("a time");
            let ctx = ctx();
            bevy::tasks::block_on(group_chat_thoughts(&mut mind, &ctx, &settings, now));
            assert!(mind.scratch.group_after_chats.is_empty());
            let thoughts: Vec<_> = mind.associative.of_kind(NodeKind::Thought).collect();
            assert_eq!(thoughts.len(), 2, "{thoughts:?}");
            assert!(thoughts.iter().all(|t| t.filling.evidence() == [passage]));
            assert!(
                thoughts
                    .iter()
                    .any(|t| t.description.starts_with("For Eva Moss's planning: ")),
                "{thoughts:?}"
            );
            // Nothing left to think over: a second thought stores nothing.
            bevy::tasks::block_on(group_chat_thoughts(&mut mind, &ctx, &settings, now));
            assert_eq!(mind.associative.count(NodeKind::Thought), 2);
        }
    }
}
