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
    let triple = ActionEventTriple {
        name: name.clone(),
        action: text.to_string(),
    };
    let (triple, poignancy) = match known.poignancy {
        Some(poignancy) => (run_prompt(ctx, &triple).await.value, poignancy),
        None => {
            let poignancy = ThoughtPoignancy {
                identity: mind.scratch.identity_summary(),
                first_name: mind.scratch.first_name.clone(),
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
    // `None`: memory holds the text's vector already, which the thought reuses.
    let embedding = match known.embedding {
        Some(vector) => Some(vector),
        None => embedding_to_store(mind, ctx, text).await?,
    };
    let s = triple.subject.unwrap_or(name);
    let p = triple.predicate.unwrap_or_else(|| "is".into());
    let o = triple.object.unwrap_or_else(|| "thinking".into());
    let mut memory = NewMemory::new(now, (s.clone(), p.clone(), o.clone()), text.to_string())
        .keywords([s, p, o])
        .poignancy(poignancy)
        .expires(now + Duration::days(settings.thought_expiration_days));
    memory.embedding = embedding;
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
    let name = mind.scratch.name.clone();
    let conversation = mind.scratch.chat.clone();
    let evidence: Vec<NodeId> = mind
        .associative
        .last_chat_with(&partner)
        .map(|node| vec![node.id])
        .unwrap_or_default();
    if settings.lean.after_chat_at_once {
        let prompt = AfterChat {
            identity: mind.scratch.identity_summary(),
            name: name.clone(),
            first_name: mind.scratch.first_name.clone(),
            partner,
            conversation,
        };
        let thoughts = run_prompt(ctx, &prompt).await.value;
        let planning = format!("For {name}'s planning: {}", thoughts.planning);
        let mut vectors =
            embed_together(mind, ctx, &[planning.clone(), thoughts.memo.clone()]).await;
        for (text, poignancy) in [
            (planning, thoughts.planning_poignancy),
            (thoughts.memo, thoughts.memo_poignancy),
        ] {
            let known = KnownOfThought {
                embedding: vectors.remove(&text),
                poignancy: Some(poignancy),
            };
            store_thought(mind, ctx, settings, now, &text, evidence.clone(), known).await;
        }
    } else {
        let planning = PlanningThoughtAfterChat {
            name: name.clone(),
            partner: partner.clone(),
            conversation: conversation.clone(),
        };
        let memo = MemoAfterChat {
            name: name.clone(),
            partner,
            conversation,
        };
        let (planning, memo) = bevy::tasks::futures_lite::future::zip(
            run_prompt(ctx, &planning),
            run_prompt(ctx, &memo),
        )
        .await;
        let planning = format!("For {name}'s planning: {}", planning.value);
        for text in [planning, memo.value] {
            let known = KnownOfThought::default();
            store_thought(mind, ctx, settings, now, &text, evidence.clone(), known).await;
        }
    }
    mind.scratch.chat_thoughts_done = true;
}
