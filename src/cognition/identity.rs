//! Identity revision (SPEC §3.6): each new day after the first, a persona looks back at its
//! plans and the important events of its life, writes itself a planning note and a note on its
//! feelings, and from those a new `currently` and new daily requirements — so what happened
//! yesterday shapes today's plan.

use chrono::NaiveDateTime;

use crate::memory::new_retrieve;
use crate::persona::MindState;
use crate::prompt::{PromptContext, run_prompt};
use crate::settings::AgentSettings;

use super::perceive::embedding_for;
use super::prompts::{
    ReviseIdentityCurrently, ReviseIdentityDailyReq, ReviseIdentityFeelings,
    ReviseIdentityPlanNote, wake_up_item,
};
use super::vocabulary::date_text;
use super::vocabulary::{PlanEvent, retrieval_params};

/// The memories (descriptions, oldest first) best matching `focal_points`, `n` per point,
/// each once. Marks them accessed.
pub(crate) async fn retrieve_statements(
    mind: &mut MindState,
    ctx: &PromptContext,
    settings: &AgentSettings,
    focal_points: &[String],
    now: NaiveDateTime,
    n: usize,
) -> Vec<String> {
    let points: Vec<(&str, usize)> = focal_points.iter().map(|p| (p.as_str(), n)).collect();
    retrieve_each(mind, ctx, settings, &points, now, Recall::Described).await
}

/// How a retrieved memory is shown to the prompt.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Recall {
    /// Its description (prompts that list many memories for a conversation).
    Described,
    /// As the persona recalls it (`ConceptNode::recalled`): a group passage whole, for the
    /// planning note that turns what was said at a table into today's plans.
    Whole,
}

/// [`retrieve_statements`] with its own count per focal point.
async fn retrieve_each(
    mind: &mut MindState,
    ctx: &PromptContext,
    settings: &AgentSettings,
    focal_points: &[(&str, usize)],
    now: NaiveDateTime,
    recall: Recall,
) -> Vec<String> {
    let params = retrieval_params(mind, settings);
    let mut ids = Vec::new();
    for &(point, n) in focal_points {
        if n == 0 {
            continue;
        }
        let Some(embedding) = embedding_for(mind, ctx, point).await else {
            continue;
        };
        match new_retrieve(&mut mind.associative, &embedding, now, n, &params) {
            Ok(found) => {
                for id in found {
                    if !ids.contains(&id) {
                        ids.push(id);
                    }
                }
            }
            Err(error) => bevy::log::warn!(%error, "retrieval failed"),
        }
    }
    ids.sort();
    ids.iter()
        .filter_map(|id| mind.associative.node(*id))
        .map(|node| match recall {
            Recall::Described => node.description.clone(),
            Recall::Whole => node.recalled().to_string(),
        })
        .collect()
}

/// Revises `currently` and the daily requirements for the day starting at `now`.
pub(crate) async fn revise_identity(
    mind: &mut MindState,
    ctx: &PromptContext,
    settings: &AgentSettings,
    now: NaiveDateTime,
    wake_up_hour: u32,
    events: &mut Vec<PlanEvent>,
) {
    let name = mind.scratch.name.clone();
    let yesterday = now - chrono::Duration::days(1);
    let today = date_text(now);
    // Smallville's two focal points, then today's date itself: an event someone announced for
    // today ("the fair moved to Tuesday") is found by its day even when neither the persona's
    // name nor its plans are in it (SPEC §16). The date alone, with no question words, so a
    // bag-of-words embedding weighs the day and not "is" or "on".
    let plans = format!("{name}'s plan for {}.", date_text(yesterday));
    let events_of_life = format!("Important recent events for {name}'s life.");
    let focal = [
        (plans.as_str(), settings.retrieve_n),
        (events_of_life.as_str(), settings.retrieve_n),
        (today.as_str(), settings.today_focal_n),
    ];
    let memories = retrieve_each(mind, ctx, settings, &focal, now, Recall::Whole).await;
    let plan_note = ReviseIdentityPlanNote {
        name: name.clone(),
        date_text: today.clone(),
        memories: memories.clone(),
    };
    let feelings = ReviseIdentityFeelings {
        name: name.clone(),
        date_text: today.clone(),
        memories,
    };
    let (plan_note, feelings) = bevy::tasks::futures_lite::future::zip(
        run_prompt(ctx, &plan_note),
        run_prompt(ctx, &feelings),
    )
    .await;
    let currently = run_prompt(
        ctx,
        &ReviseIdentityCurrently {
            name: name.clone(),
            date_text: today.clone(),
            previous: mind.scratch.currently.clone(),
            plan_note: plan_note.value,
            feelings: feelings.value,
        },
    )
    .await
    .value;
    if !currently.trim().is_empty() {
        mind.scratch.currently = currently;
    }
    let daily = run_prompt(
        ctx,
        &ReviseIdentityDailyReq {
            identity: mind.scratch.identity_summary(),
            first_name: mind.scratch.first_name.clone(),
            date_text: today,
            wake_up_hour,
            home: mind.scratch.living_area.clone(),
            workplace: mind.scratch.workplace.clone(),
        },
    )
    .await
    .value;
    if !daily.is_empty() {
        mind.scratch.daily_plan_req = daily.join(", ");
    }
    let mut daily_req = vec![wake_up_item(wake_up_hour)];
    daily_req.extend(daily);
    mind.scratch.daily_req = daily_req;
    events.push(PlanEvent::IdentityRevised(now.date()));
}
