//! The offline **town script**: scripted answers that make a believable day in a town.
//!
//! This is a deterministic script for tests and offline demos — **not a language model**. It
//! is a [`ScriptedBackend`] (its name and model are `"scripted"`) with a responder for every
//! prompt kind of the cognitive loop (`cognition::prompts`, templates `prompts/v1/<kind>.txt`)
//! and a chooser for every closed-set prompt. Each answer is computed from the filled prompt
//! text alone — the lines the templates print (`Name:`, `Lifestyle:`, `Home:`, `Workplace:`,
//! `Activity:`, the hour labels, the numbered statements …) — so it works for any persona file,
//! and it is shaped so the prompt's parser accepts it on the first try: a healthy run on this
//! backend uses no retries and no fail-safes.
//!
//! What the script makes happen:
//! - **A day like a real person's, in any town.** The wake-up hour comes from the lifestyle
//!   line ("wakes up around 6 am"), the bedtime too; work hours from phrases such as "opens the
//!   cafe at 7 am", "until 3 pm", "from 10 am to 5 pm". The job is read from the sentences
//!   about the persona (not about their family: "His wife is a teacher" makes nobody a
//!   teacher) and from the workplace's own name and room: teaching, studying, writing, a cafe
//!   or bakery, a shop, or the trade the sheet names ("is a fishmonger"). A day is: the morning
//!   routine, breakfast at home, work at the workplace, lunch out, more work, an errand
//!   (groceries, a walk, a coffee), dinner at home, an evening out (the pub, the park, the
//!   piano), getting ready for bed, sleep. Errands and evenings vary by date (a per-day random
//!   stream seeded from `(seed, name, date)`), so the daily plan, the hourly schedule and the
//!   revised daily requirement of one day agree with each other.
//! - **Only the town's own places.** The planning prompts show no map names but the persona's
//!   home and workplace (the `Home:` and `Workplace:` lines, from the sheet's `living_area`
//!   and `workplace`), so activities name those and call every other place by its kind ("at
//!   the cafe", "in the park"). The sector, arena and object choosers answer only with the
//!   prompt's options — the loaded map's names: the option the activity names (the step inside
//!   the parentheses first, then the hourly task), home or workplace, keyword rules from the
//!   activity's words to words in the options' names (sleeping → a bed, bunk or cot; lunch →
//!   a cafe, bakery, diner or tavern; a walk → a park, green, square or harbour …), then shared
//!   words. Ties go to the option whose name hashes lowest with the persona and the activity,
//!   never to a position in the list. When nothing matched, the answer is a guess (a public
//!   place for an errand, else staying put), counted as `guesses` under its prompt kind in
//!   `usage.json`.
//! - **Conversations.** `decide_to_talk` says yes to awake personas in the daytime (likelier
//!   when they never talked); utterances greet the partner by name, ask about their activity,
//!   share the speaker's `currently`, and end after 3 to 6 lines.
//! - **Reflection.** Poignancy varies — chats 5–8, social events and plans 4–7, work 3–5,
//!   meals and outings 3–4, other routine 2–4, things and sleep 1–2 — so the 150-point trigger is crossed during a day; focal points and
//!   insights cite valid statements.
//! - **Identity revision.** The planning note picks up an event the memories announce for
//!   today ("the harvest fair moved to Tuesday at the Common, at 3 pm": see `offline_outing`)
//!   or else yesterday's follow-ups ("should follow up with …"), and the new `currently` keeps
//!   the first sentence of the old one and adds today's intention, so it changes a little
//!   every day; an outing in `currently` takes its hours in the plan and the schedule. News of
//!   an event on a named day is rated 6–8.
//!
//! Embeddings stay the scripted backend's hashed bag of words.

use std::borrow::Cow;

use rand::Rng;
use serde_json::json;

use super::offline_outing::{Outing, announced_today, announces_an_event};
use crate::llm::{
    ChoiceRequest, LlmClient, ScriptGuesses, ScriptRng, ScriptedBackend, word_overlap_scores,
};

// Places other than home and work are named by kind, never by name: the planning prompts show
// no map names but the persona's home and workplace, and the grounding choosers map these
// words to the loaded map's own places (see "Grounding answers").

/// Where people have lunch or a coffee.
const CAFE: &str = "the cafe";
/// Where groceries are bought.
const GROCERY: &str = "the market";
/// Where people walk.
const PARK: &str = "the park";
/// Where people meet in the evening.
const PUB: &str = "the pub";

/// A client over the town script seeded with `seed`: a deterministic [`ScriptedBackend`], not a
/// model.
pub fn town_script_client(seed: u64) -> LlmClient {
    LlmClient::new(std::sync::Arc::new(town_script_backend(seed)))
}

/// The town script: a [`ScriptedBackend`] seeded with `seed` that answers every prompt kind of
/// the cognitive loop. See the [module docs](self). Deterministic: the same seed and prompt
/// always give the same answer.
pub fn town_script_backend(seed: u64) -> ScriptedBackend {
    let backend = ScriptedBackend::new(seed);
    let sector_log = backend.guess_log();
    let sector_scores_log = backend.guess_log();
    let arena_log = backend.guess_log();
    let arena_scores_log = backend.guess_log();
    let object_log = backend.guess_log();
    let object_scores_log = backend.guess_log();
    let place_log = backend.guess_log();
    let place_scores_log = backend.guess_log();
    backend
        // Planning.
        .with_responder("wake_up_hour", |req, _| wake_up_hour(&req.prompt_text()))
        .with_responder("daily_plan", move |req, _| {
            daily_plan(seed, &req.prompt_text())
        })
        .with_responder("hourly_schedule", move |req, _| {
            hourly_schedule(seed, &req.prompt_text())
        })
        .with_responder("task_decomposition", |req, _| {
            task_decomposition(&req.prompt_text())
        })
        .with_responder("new_decomposition_schedule", |req, _| {
            new_decomposition(&req.prompt_text())
        })
        // Grounding.
        .with_responder("action_sector", move |req, _| {
            answer_choice(
                &req.prompt_text(),
                choose_sector,
                &sector_log,
                "action_sector",
            )
        })
        .with_chooser("action_sector", move |req, _| {
            choice_scores(req, choose_sector, &sector_scores_log, "action_sector")
        })
        .with_responder("action_arena", move |req, _| {
            answer_choice(&req.prompt_text(), choose_arena, &arena_log, "action_arena")
        })
        .with_chooser("action_arena", move |req, _| {
            choice_scores(req, choose_arena, &arena_scores_log, "action_arena")
        })
        .with_responder("action_object", move |req, _| {
            answer_choice(
                &req.prompt_text(),
                choose_object,
                &object_log,
                "action_object",
            )
        })
        .with_chooser("action_object", move |req, _| {
            choice_scores(req, choose_object, &object_scores_log, "action_object")
        })
        .with_responder("action_place", move |req, _| {
            answer_choice(&req.prompt_text(), choose_place, &place_log, "action_place")
        })
        .with_chooser("action_place", move |req, _| {
            choice_scores(req, choose_place, &place_scores_log, "action_place")
        })
        .with_responder("action_emoji", |req, _| action_emoji(&req.prompt_text()))
        .with_responder("action_event_triple", |req, _| {
            action_event_triple(&req.prompt_text())
        })
        .with_responder("object_description", |req, _| {
            object_description(&req.prompt_text())
        })
        .with_responder("object_emoji", |req, _| object_emoji(&req.prompt_text()))
        .with_responder("action_details", |req, rng| {
            action_details(&req.prompt_text(), rng)
        })
        .with_responder("object_event_triple", |req, _| {
            object_event_triple(&req.prompt_text())
        })
        // Perceiving.
        .with_responder("event_poignancy", |req, rng| {
            event_poignancy(&req.prompt_text(), rng).to_string()
        })
        .with_responder("event_poignancies", |req, rng| {
            event_poignancies(&req.prompt_text(), rng)
        })
        .with_responder("chat_poignancy", |_, rng| {
            rng.random_range(5..=8u8).to_string()
        })
        .with_responder("thought_poignancy", |req, rng| {
            thought_poignancy(&req.prompt_text(), rng).to_string()
        })
        // Reacting and talking.
        .with_responder("decide_to_talk", move |req, _| {
            if decide_to_talk(seed, &req.prompt_text()) {
                "yes".to_string()
            } else {
                "no".to_string()
            }
        })
        .with_chooser("decide_to_talk", move |req, _| {
            if decide_to_talk(seed, &choice_prompt(req)) {
                vec![0.0, -5.0]
            } else {
                vec![-5.0, 0.0]
            }
        })
        .with_responder("decide_to_react", |req, _| {
            if decide_to_wait(&req.prompt_text()) {
                "Option 1".to_string()
            } else {
                "Option 2".to_string()
            }
        })
        .with_chooser("decide_to_react", |req, _| {
            if decide_to_wait(&choice_prompt(req)) {
                vec![0.0, -5.0]
            } else {
                vec![-5.0, 0.0]
            }
        })
        .with_responder("relationship_summary", |req, _| {
            relationship_summary(&req.prompt_text())
        })
        .with_responder("next_utterance", |req, rng| {
            next_utterance(&req.prompt_text(), rng)
        })
        .with_responder("conversation_summary", |req, _| {
            conversation_summary(&req.prompt_text())
        })
        .with_responder("planning_thought_after_chat", |req, _| {
            after_chat(&req.prompt_text(), AfterChat::Planning)
        })
        .with_responder("memo_after_chat", |req, _| {
            after_chat(&req.prompt_text(), AfterChat::Memo)
        })
        .with_responder("after_chat", |req, rng| {
            after_chat_at_once(&req.prompt_text(), rng)
        })
        // Reflecting.
        .with_responder("focal_points", |req, _| focal_points(&req.prompt_text()))
        .with_responder("insights_with_evidence", |req, _| {
            insights(&req.prompt_text())
        })
        .with_responder("insights_rated", |req, rng| {
            rated_insights(&req.prompt_text(), rng)
        })
        // The new day.
        .with_responder("revise_identity_plan_note", |req, _| {
            plan_note(&req.prompt_text())
        })
        .with_responder("revise_identity_feelings", |req, _| {
            feelings(&req.prompt_text())
        })
        .with_responder("revise_identity_currently", |req, rng| {
            currently(&req.prompt_text(), rng)
        })
        .with_responder("revise_identity_daily_req", move |req, _| {
            daily_requirement(seed, &req.prompt_text())
        })
        .with_responder("whisper_thought", |req, _| whisper(&req.prompt_text()))
        .with_responder("generic_json", |req, _| generic_json(&req.prompt_text()))
        // Talking to a persona (SPEC §7): answer at once, no tools.
        .with_responder("dialogue_planner", |req, _| {
            dialogue_reply(&req.prompt_text())
        })
        .with_responder("dialogue_final", |req, _| {
            serde_json::from_str::<serde_json::Value>(&dialogue_reply(&req.prompt_text()))
                .ok()
                .and_then(|v| v.get("message").and_then(|m| m.as_str()).map(str::to_owned))
                .unwrap_or_default()
        })
        // The director (SPEC §10): plans from the prompt's own lists of residents and places.
        .with_responder("director_intent", |req, _| {
            super::offline_director::intent(&req.prompt_text())
        })
        .with_responder("director_plan", |req, _| {
            super::offline_director::plan(&req.prompt_text())
        })
        .with_responder("director_validate", |req, _| {
            super::offline_director::validate(&req.prompt_text())
        })
        .with_responder("director_replan", |req, _| {
            super::offline_director::replan(&req.prompt_text())
        })
        .with_responder("director_review", |req, _| {
            super::offline_director::review(&req.prompt_text())
        })
        // Group conversations (SPEC §8): from the prompt's own scene and lines.
        .with_responder("group_join", |req, _| {
            if super::offline_group::join(&req.prompt_text()) {
                "yes".to_string()
            } else {
                "no".to_string()
            }
        })
        .with_chooser("group_join", |req, _| {
            if super::offline_group::join(&choice_prompt(req)) {
                vec![0.0, -5.0]
            } else {
                vec![-5.0, 0.0]
            }
        })
        .with_responder("group_reply", |req, _| {
            super::offline_group::reply(&req.prompt_text())
        })
        .with_responder("group_focus", |req, _| {
            super::offline_group::focus(&req.prompt_text())
        })
        .with_responder("group_round", |req, _| {
            super::offline_group::round(&req.prompt_text())
        })
        .with_responder("stage_actor", |req, _| {
            super::offline_stage::actor(&req.prompt_text())
        })
        .with_responder("stage_resolve", |req, _| {
            super::offline_stage::resolve(&req.prompt_text())
        })
        .with_responder("dialogue_speaker_profile", |req, _| {
            let text = req.prompt_text();
            let speaker = between(&text, "Profile of ", ":").unwrap_or("They").trim();
            format!("{speaker} came by for a chat.")
        })
}

/// The offline stand-in's reply to a message: who the persona is and what it is doing.
fn dialogue_reply(text: &str) -> String {
    // The observation line just before "Now:": "<name> is at <place> and is <doing>." (the
    // persona's own description earlier in the prompt may say " and is " too).
    let doing = text
        .find(".\nNow:")
        .and_then(|end| text.get(..end))
        .and_then(|head| head.rsplit('\n').next())
        .and_then(|line| line.rsplit_once(" and is "))
        .map_or("busy", |(_, doing)| doing)
        .trim();
    let who = between(text, "\nYou are ", ", talking with")
        .unwrap_or("I")
        .trim();
    let reply = format!("Hello! I'm {who}, and right now I'm {doing}.");
    serde_json::json!({"action": "finish", "message": reply}).to_string()
}

// =============================================================================================
// Reading the prompt text.

/// The rest of the first line that starts (after indentation) with `label`, trimmed.
pub(super) fn field<'a>(text: &'a str, label: &str) -> Option<&'a str> {
    text.lines()
        .find_map(|line| line.trim_start().strip_prefix(label))
        .map(str::trim)
}

/// The text between the first `start` and the next `end` after it (or the end of `text`).
fn between<'a>(text: &'a str, start: &str, end: &str) -> Option<&'a str> {
    let from = text.find(start)? + start.len();
    let rest = text.get(from..)?;
    Some(match rest.find(end) {
        Some(to) => rest.get(..to).unwrap_or(rest),
        None => rest,
    })
}

/// The lines after the line equal to `header` (trimmed), up to the first blank line.
fn block_after<'a>(text: &'a str, header: &str) -> Vec<&'a str> {
    text.lines()
        .skip_while(|line| line.trim() != header)
        .skip(1)
        .map(str::trim)
        .take_while(|line| !line.is_empty())
        .collect()
}

/// The items of a numbered block ("1. a" lines), without their numbers; `(none)` is empty.
fn numbered_items<'a>(lines: &[&'a str]) -> Vec<&'a str> {
    lines
        .iter()
        .filter_map(|line| {
            let digits = line.bytes().take_while(u8::is_ascii_digit).count();
            if digits == 0 {
                return None;
            }
            let rest = line.get(digits..)?;
            let rest = rest.strip_prefix('.').or_else(|| rest.strip_prefix(')'))?;
            Some(rest.trim())
        })
        .collect()
}

/// The first word of a name.
fn first_word(name: &str) -> &str {
    name.split_whitespace().next().unwrap_or(name)
}

/// Lowercased word tokens.
fn tokens(text: &str) -> Vec<String> {
    crate::llm::word_tokens(text).collect()
}

/// Whether `needle`'s words appear contiguously among `haystack`'s words (`haystack` as
/// [`tokens`] gives them). A needle word already in lowercase is compared where it lies, not
/// copied: the script asks this of a few dozen phrases for every prompt it answers.
fn contains_words(haystack: &[String], needle: &str) -> bool {
    let words: Vec<Cow<'_, str>> = crate::llm::word_pieces(needle)
        .map(|w| {
            if w.bytes().all(|b| b.is_ascii() && !b.is_ascii_uppercase()) {
                Cow::Borrowed(w)
            } else {
                Cow::Owned(w.to_lowercase())
            }
        })
        .collect();
    !words.is_empty()
        && haystack.windows(words.len()).any(|window| {
            window
                .iter()
                .zip(&words)
                .all(|(w, n)| w.as_str() == n.as_ref())
        })
}

/// The option (index) named in `text` with the most words, if any.
fn best_mention(text: &str, options: &[String]) -> Option<usize> {
    let words = tokens(text);
    options
        .iter()
        .enumerate()
        .filter(|(_, option)| contains_words(&words, option))
        .max_by_key(|(i, option)| (tokens(option).len(), usize::MAX - i))
        .map(|(i, _)| i)
}

/// The index of the option equal to `name`, ignoring case and surrounding space.
fn option_named(options: &[String], name: &str) -> Option<usize> {
    options
        .iter()
        .position(|o| o.trim().eq_ignore_ascii_case(name.trim()))
}

/// Splits "task (step)" into the task and the step; text without a trailing parenthesis is
/// all task.
fn split_activity(activity: &str) -> (&str, Option<&str>) {
    let activity = activity.trim();
    if let Some(inner) = activity.strip_suffix(')')
        && let Some(open) = inner.rfind(" (")
    {
        let task = inner.get(..open).unwrap_or(inner).trim();
        let step = inner.get(open + 2..).unwrap_or("").trim();
        if !task.is_empty() && !step.is_empty() {
            return (task, Some(step));
        }
    }
    (activity, None)
}

/// The "Activity:" line, whatever the prompt.
fn activity_line(text: &str) -> &str {
    field(text, "Activity:").unwrap_or("")
}

/// The options of a choice prompt: its "- name" lines after "Options:".
fn listed_options(text: &str) -> Vec<String> {
    block_after(text, "Options:")
        .into_iter()
        .filter_map(|line| line.strip_prefix("- "))
        .map(|o| o.trim().to_string())
        .collect()
}

/// A choice request's prompt as one text.
fn choice_prompt(request: &ChoiceRequest) -> String {
    request
        .messages
        .iter()
        .map(|m| m.content.as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Scores for a choice request: 0 for the chosen option, a word-overlap score (always below
/// 0) for the others. A guess is recorded under `kind` in `guesses`.
fn choice_scores(
    request: &ChoiceRequest,
    choose: Choose,
    guesses: &ScriptGuesses,
    kind: &str,
) -> Vec<f32> {
    let prompt = choice_prompt(request);
    let mut scores: Vec<f32> = word_overlap_scores(&prompt, &request.options)
        .into_iter()
        .map(|s| s - 10.0)
        .collect();
    if let Some(pick) = choose(&prompt, &request.options) {
        if pick.guessed {
            bevy::log::debug!(
                kind,
                activity = activity_line(&prompt),
                "the town script guessed"
            );
            guesses.record(kind);
        }
        if let Some(slot) = scores.get_mut(pick.index) {
            *slot = 0.0;
        }
    }
    scores
}

/// The free-generation answer to a choice prompt: the chosen option's name. A guess is
/// recorded under `kind` in `guesses`.
fn answer_choice(text: &str, choose: Choose, guesses: &ScriptGuesses, kind: &str) -> String {
    let options = listed_options(text);
    let Some(pick) = choose(text, &options) else {
        return String::new();
    };
    if pick.guessed {
        bevy::log::debug!(
            kind,
            activity = activity_line(text),
            "the town script guessed"
        );
        guesses.record(kind);
    }
    options.get(pick.index).cloned().unwrap_or_default()
}

// =============================================================================================
// Clock times in free text.

/// A clock time at the very start of `s` ("7", "7:30", "7 am", "10:30 pm"): `(hour, minute,
/// had am/pm, bytes read)`. The hour is on the 24-hour clock.
fn clock_at(s: &str) -> Option<(u32, u32, bool, usize)> {
    let b = s.as_bytes();
    let digits = b.iter().take_while(|c| c.is_ascii_digit()).count();
    if digits == 0 || digits > 2 {
        return None;
    }
    let mut hour: u32 = s.get(..digits)?.parse().ok()?;
    let mut minute = 0;
    let mut i = digits;
    if b.get(i) == Some(&b':')
        && b.get(i + 1).is_some_and(u8::is_ascii_digit)
        && b.get(i + 2).is_some_and(u8::is_ascii_digit)
    {
        minute = s.get(i + 1..i + 3)?.parse().ok()?;
        i += 3;
    }
    let mut j = i;
    while b.get(j) == Some(&b' ') {
        j += 1;
    }
    let meridiem = match (
        b.get(j).map(u8::to_ascii_lowercase),
        b.get(j + 1).map(u8::to_ascii_lowercase),
    ) {
        (Some(c @ (b'a' | b'p')), Some(b'm'))
            if !b.get(j + 2).is_some_and(u8::is_ascii_alphabetic) =>
        {
            i = j + 2;
            Some(c == b'p')
        }
        _ => None,
    };
    if minute > 59 {
        return None;
    }
    match meridiem {
        Some(pm) => {
            if hour == 0 || hour > 12 {
                return None;
            }
            hour = match (pm, hour) {
                (false, 12) => 0,
                (true, 12) => 12,
                (true, h) => h + 12,
                (false, h) => h,
            };
        }
        None if hour > 23 => return None,
        None => {}
    }
    Some((hour, minute, meridiem.is_some(), i))
}

/// A time mention in free text: its hour, where it starts and ends, and whether it had am/pm.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Mention {
    pub(super) hour: u32,
    pub(super) start: usize,
    pub(super) end: usize,
    pub(super) meridiem: bool,
}

/// Every clock time in `text` ("7 am", "10:30 pm", "midnight" = 24, "noon" = 12), in order.
pub(super) fn time_mentions(text: &str) -> Vec<Mention> {
    let lower = text.to_ascii_lowercase();
    let b = lower.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let boundary = i == 0 || !b[i - 1].is_ascii_alphanumeric();
        if boundary && b[i].is_ascii_digit() {
            if let Some((hour, _, meridiem, len)) = lower.get(i..).and_then(clock_at) {
                out.push(Mention {
                    hour,
                    start: i,
                    end: i + len,
                    meridiem,
                });
                i += len.max(1);
                continue;
            }
        } else if boundary {
            for (word, hour) in [("midnight", 24), ("noon", 12)] {
                if lower.get(i..).is_some_and(|rest| rest.starts_with(word)) {
                    out.push(Mention {
                        hour,
                        start: i,
                        end: i + word.len(),
                        meridiem: true,
                    });
                }
            }
        }
        i += 1;
    }
    out
}

/// The first hour stated in `text` (a bare number counts).
fn first_hour_in(text: &str) -> Option<u32> {
    time_mentions(text).first().map(|m| m.hour.min(23))
}

/// An hour as prompts show it ("7:00 am"); 24 is midnight.
pub(super) fn hour_label(hour: u32) -> String {
    crate::clock::hour_text(hour % 24)
}

// =============================================================================================
// Who the persona is and what their day looks like.

/// What the persona does for a living, read from the identity text.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Job {
    /// Runs or works at a café.
    Cafe,
    /// Teaches (the subject).
    Teach(String),
    /// Studies (the subject).
    Study(String),
    /// Writes books.
    Write,
    /// Works at a shop.
    Shop,
    /// A trade the sheet names ("is a fishmonger" → `fishmonger`).
    Trade(String),
    /// Anything else.
    Other,
}

/// What the persona likes to do in the evening.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Evening {
    Piano,
    Walk,
    Pub,
}

/// Everything the script needs to know about a persona, read from a prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Profile {
    name: String,
    first: String,
    workplace: Option<String>,
    /// The room of the workplace ("cafe" of "Riverside Cafe, cafe"); may be empty.
    work_arena: String,
    /// The room the persona lives in ("bedroom" of "Okafor house, bedroom").
    home_arena: String,
    job: Job,
    wake: u32,
    /// Bedtime hour; 24 is midnight, 25 is 1 am.
    bed: u32,
    work_start: u32,
    work_end: u32,
    evening: Evening,
    /// Someone `currently` says the persona wants to follow up with.
    follow_up: Option<String>,
    /// An event `currently` says the persona goes to today.
    outing: Option<Outing>,
}

/// The word after `marker` in `text` (ASCII case-insensitive), if it is a plain word.
fn word_after(text: &str, marker: &str) -> Option<String> {
    let lower = text.to_ascii_lowercase();
    let at = lower.find(marker)? + marker.len();
    let word: String = lower
        .get(at..)?
        .chars()
        .take_while(|c| c.is_alphabetic() || *c == '-')
        .collect();
    (!word.is_empty()).then_some(word)
}

/// The word before `marker` in `text` (ASCII case-insensitive), if it is a plain word.
fn word_before(text: &str, marker: &str) -> Option<String> {
    let lower = text.to_ascii_lowercase();
    let at = lower.find(marker)?;
    let word = lower.get(..at)?.split_whitespace().last()?.to_string();
    (word.chars().all(char::is_alphabetic) && !matches!(word.as_str(), "a" | "an" | "the"))
        .then_some(word)
}

/// The sentences of `text` about the persona: the first one and those whose subject is the
/// persona (its name, first name or a personal pronoun).
fn own_sentences(text: &str, name: &str, first: &str) -> String {
    text.split_inclusive(['.', '!', '?'])
        .map(str::trim)
        .enumerate()
        .filter(|(i, sentence)| {
            *i == 0
                || (!name.is_empty() && sentence.starts_with(name))
                || (!first.is_empty() && sentence.starts_with(first))
                || ["He ", "She ", "They "]
                    .iter()
                    .any(|p| sentence.starts_with(p))
        })
        .map(|(_, sentence)| sentence)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The trade named by "is a …", "is an …" or "works as a …" ("is a retired sailor who …" →
/// `sailor`): the last word before a preposition, a relative pronoun or a punctuation mark.
fn trade_of(own: &str) -> Option<String> {
    let lower = own.to_lowercase();
    let at = ["works as a ", "works as an ", " is a ", " is an "]
        .iter()
        .filter_map(|m| lower.find(m).map(|i| i + m.len()))
        .min()?;
    let mut last = None;
    for word in lower.get(at..)?.split_whitespace().take(4) {
        let clean: String = word
            .chars()
            .filter(|c| c.is_alphabetic() || *c == '-')
            .collect();
        if clean.is_empty()
            || PREPOSITIONS.contains(&clean.as_str())
            || ["who", "and", "that", "which"].contains(&clean.as_str())
        {
            break;
        }
        last = Some(clean);
        if word.ends_with([',', '.', ';']) {
            break;
        }
    }
    last.filter(|w| w.chars().count() >= 3)
}

impl Profile {
    /// Reads the persona from a prompt that shows the identity summary (and, for planning
    /// prompts, the Home and Workplace lines). `first_name` is used when there is no `Name:`.
    fn read(text: &str, first_name: &str) -> Self {
        let name = field(text, "Name:")
            .filter(|n| !n.is_empty())
            .unwrap_or(first_name)
            .to_string();
        let first = first_word(&name).to_string();
        let lifestyle = field(text, "Lifestyle:").unwrap_or("");
        let learned = field(text, "Learned traits:").unwrap_or("");
        let requirement = field(text, "Daily plan requirement:").unwrap_or("");
        let currently = field(text, "Currently:").unwrap_or("");
        let workplace_line = field(text, "Workplace:").unwrap_or("none");
        let (workplace, work_arena) = match workplace_line.split_once(',') {
            _ if workplace_line.eq_ignore_ascii_case("none") || workplace_line.is_empty() => {
                (None, String::new())
            }
            Some((sector, arena)) => (Some(sector.trim().to_string()), arena.trim().to_string()),
            None => (Some(workplace_line.to_string()), String::new()),
        };
        let home_arena = field(text, "Home:")
            .and_then(|h| h.split_once(','))
            .map(|(_, arena)| arena.trim().to_string())
            .filter(|a| !a.is_empty())
            .unwrap_or_else(|| "bedroom".to_string());
        // Only sentences about the persona tell their job ("His wife is a teacher" does not).
        let own = own_sentences(learned, &name, &first);
        let about = format!("{own} {requirement}").to_ascii_lowercase();
        let place_words = tokens(&format!(
            "{} {work_arena}",
            workplace.as_deref().unwrap_or("")
        ));
        let at_work = |words: &[&str]| words.iter().any(|w| names_word(&place_words, w));
        let job = if about.contains("teach") {
            Job::Teach(word_after(&own, "teaches ").unwrap_or_default())
        } else if about.contains("student") || about.contains(" studies") {
            Job::Study(word_before(&own, " student").unwrap_or_default())
        } else if about.contains("novel") || about.contains("writer") || about.contains("writes") {
            Job::Write
        } else if at_work(&["cafe", "coffee", "bakery", "tearoom", "teahouse"]) {
            Job::Cafe
        } else if let Some(trade) = trade_of(&own) {
            Job::Trade(trade)
        } else if at_work(&["store", "grocery", "grocer", "shop", "market", "stall"]) {
            Job::Shop
        } else {
            Job::Other
        };

        let (wake, bed) = wake_and_bed(lifestyle);
        let (start, end) = work_hours(&format!("{lifestyle}. {requirement}"));
        let work_start = start
            .filter(|s| *s > wake && *s < 18)
            .unwrap_or((wake + 2).min(11));
        let work_end = end
            .filter(|e| *e > work_start)
            .unwrap_or(17)
            .clamp(work_start + 1, 18);
        // A teacher's morning classes are followed by an afternoon in the office.
        let work_end = match job {
            Job::Teach(_) if work_end < 15 => 17,
            _ => work_end,
        };

        let everything = format!("{learned} {requirement} {currently} {lifestyle}");
        let lower = everything.to_ascii_lowercase();
        let evening = if lower.contains("piano") {
            Evening::Piano
        } else if lower.contains("walk") || lower.contains("park") {
            Evening::Walk
        } else {
            Evening::Pub
        };
        let follow_up = between(currently, "follow up with ", " about")
            .map(|n| n.trim().to_string())
            .filter(|n| !n.is_empty() && n.len() < 60);
        Self {
            name,
            first,
            workplace,
            work_arena,
            home_arena,
            job,
            wake: wake.min(23),
            bed,
            work_start,
            work_end,
            evening,
            follow_up,
            outing: Outing::from_status(currently),
        }
    }
}

/// Wake-up and bedtime hours from a lifestyle line; defaults 7 and 23. A bedtime in the small
/// hours is returned past 24 (1 am → 25).
fn wake_and_bed(lifestyle: &str) -> (u32, u32) {
    let lower = lifestyle.to_ascii_lowercase();
    let mut wake = None;
    let mut bed = None;
    let mut clause_start = 0;
    for mention in time_mentions(lifestyle) {
        let context = lower.get(clause_start..mention.start).unwrap_or("");
        if (context.contains("wake") || context.contains("get up") || context.contains("gets up"))
            && wake.is_none()
        {
            wake = Some(mention.hour.min(23));
        } else if (context.contains("bed") || context.contains("sleep")) && bed.is_none() {
            bed = Some(match mention.hour {
                h @ 0..=5 if mention.meridiem || h < 5 => h + 24,
                h => h,
            });
        }
        clause_start = mention.end;
    }
    let wake = wake.unwrap_or(7);
    let bed = bed.unwrap_or(23).clamp(wake + 8, 26);
    (wake, bed)
}

/// Work start and end hours from phrases like "opens the cafe at 7 am", "from 10 am to 5 pm",
/// "until 3 pm". Wake-up and bedtime mentions are skipped.
fn work_hours(text: &str) -> (Option<u32>, Option<u32>) {
    let lower = text.to_ascii_lowercase();
    let mut start = None;
    let mut end = None;
    let mut clause_start = 0;
    for mention in time_mentions(text) {
        let context = lower.get(clause_start..mention.start).unwrap_or("");
        clause_start = mention.end;
        if context.contains("wake") || context.contains("bed") || context.contains("sleep") {
            continue;
        }
        let before = context.trim_end();
        let is_end = ["until", "till", " to", "-"]
            .iter()
            .any(|w| before.ends_with(w));
        if is_end {
            if end.is_none() {
                end = Some(mention.hour);
            }
        } else if start.is_none() {
            start = Some(mention.hour);
        }
    }
    (start, end)
}

/// One activity of the day: how the schedule says it (-ing form, naming the place) and how
/// a plan item says it (base form).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Act {
    ing: String,
    base: String,
}

fn act(ing: impl Into<String>, base: impl Into<String>) -> Act {
    Act {
        ing: ing.into(),
        base: base.into(),
    }
}

/// Per-day choices, drawn once from the day's random stream so every prompt of that day
/// agrees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct DayChoices {
    errand: usize,
    evening_alt: bool,
    relax: usize,
}

impl DayChoices {
    fn draw(seed: u64, profile: &Profile, date: &str) -> Self {
        let mut rng = ScriptRng::for_call(seed, "town_day", &format!("{}|{date}", profile.name));
        Self {
            errand: rng.random_range(0..3),
            evening_alt: rng.random_bool(0.35),
            relax: rng.random_range(0..3),
        }
    }
}

/// What the persona does in the hour starting at `hour` (0..=23).
fn activity_at(profile: &Profile, day: DayChoices, hour: u32) -> Act {
    let wake = profile.wake;
    let workplace = profile.workplace.as_deref();
    let start = profile.work_start;
    let end = profile.work_end.max(13);
    let breakfast_apart = start > wake + 1;
    if hour < wake || hour >= profile.bed {
        return act("sleeping", "sleep");
    }
    if hour == wake {
        return if breakfast_apart {
            act(
                "waking up and completing the morning routine at home",
                "wake up and get ready",
            )
        } else {
            act(
                "waking up and completing the morning routine with breakfast at home",
                "get ready and have breakfast at home",
            )
        };
    }
    if hour + 1 == profile.bed || (hour == 23 && profile.bed > 24) {
        return act("getting ready for bed at home", "get ready for bed");
    }
    if let Some(outing) = profile.outing.as_ref().filter(|o| o.covers(hour)) {
        return act(
            format!("going to {}", outing.what),
            format!("go to {}", outing.what),
        );
    }
    if hour == wake + 1 && breakfast_apart {
        return act(
            "having breakfast in the kitchen at home",
            "have breakfast at home",
        );
    }
    if hour < start && hour < 12 {
        return act(
            "reading the news in the kitchen at home",
            "read the news at home",
        );
    }
    if hour == 12 {
        return act(
            format!("having lunch at {CAFE}"),
            format!("have lunch at {CAFE}"),
        );
    }
    if hour < end && hour >= start {
        return work_activity(profile, workplace, hour < 12 && hour == start, hour > 12);
    }
    if hour < 18 {
        return errand(profile, day, hour == end);
    }
    if hour == 18 {
        return act(
            "cooking and eating dinner in the kitchen at home",
            "cook and eat dinner at home",
        );
    }
    if hour == 19 || (hour == 20 && profile.evening == Evening::Piano) {
        return evening(profile, day);
    }
    match (day.relax + hour as usize) % 3 {
        0 => act(
            format!("reading a book in the {} at home", profile.home_arena),
            "read a book at home",
        ),
        1 => act(
            format!("writing in a journal in the {} at home", profile.home_arena),
            "write in a journal at home",
        ),
        _ => act(
            format!(
                "relaxing with some music in the {} at home",
                profile.home_arena
            ),
            "relax at home",
        ),
    }
}

/// The work activity of one hour.
fn work_activity(
    profile: &Profile,
    workplace: Option<&str>,
    first_hour: bool,
    afternoon: bool,
) -> Act {
    let Some(w) = workplace else {
        return act(
            format!(
                "working on the day's tasks in the {} at home",
                profile.home_arena
            ),
            "work on the day's tasks at home",
        );
    };
    match &profile.job {
        Job::Cafe if first_hour => act(
            format!("opening {w} and brewing the first coffee"),
            format!("open {w}"),
        ),
        Job::Cafe if afternoon => act(
            format!("baking pastries and cleaning up at {w}"),
            format!("bake and clean up at {w}"),
        ),
        Job::Cafe => act(
            format!("serving customers at {w}"),
            format!("serve customers at {w}"),
        ),
        Job::Teach(subject) if !afternoon => {
            let subject = if subject.is_empty() { "the" } else { subject };
            act(
                format!("teaching a {subject} class in the classroom at {w}"),
                format!("teach a {subject} class at {w}"),
            )
        }
        Job::Teach(_) => act(
            format!("grading lab reports in the office at {w}"),
            format!("grade lab reports in the office at {w}"),
        ),
        Job::Study(subject) if !afternoon => {
            let subject = if subject.is_empty() { "a" } else { subject };
            act(
                format!("attending a {subject} lecture in the classroom at {w}"),
                format!("attend a {subject} lecture at {w}"),
            )
        }
        Job::Study(subject) => {
            let subject = if subject.is_empty() {
                "for class"
            } else {
                subject
            };
            act(
                format!("studying {subject} in the library at {w}"),
                format!("study {subject} in the library at {w}"),
            )
        }
        Job::Write if !afternoon => act(
            format!("writing the novel in the library at {w}"),
            format!("write the novel in the library at {w}"),
        ),
        Job::Write => act(
            format!("revising chapters in the library at {w}"),
            format!("revise chapters in the library at {w}"),
        ),
        Job::Shop if !afternoon => act(
            format!("stocking shelves at {w}"),
            format!("stock shelves at {w}"),
        ),
        Job::Shop => act(
            format!("serving customers at the cash register at {w}"),
            format!("serve customers at {w}"),
        ),
        Job::Trade(trade) if afternoon => act(
            format!(
                "finishing the day's work as a {trade}{} at {w}",
                room(profile)
            ),
            format!("finish the day's work at {w}"),
        ),
        Job::Trade(trade) => act(
            format!("working as a {trade}{} at {w}", room(profile)),
            format!("work as a {trade} at {w}"),
        ),
        Job::Other => act(
            format!("working{} at {w}", room(profile)),
            format!("work at {w}"),
        ),
    }
}

/// " in the <work room>" when the sheet names the workplace's room, else nothing.
fn room(profile: &Profile) -> String {
    if profile.work_arena.is_empty() {
        String::new()
    } else {
        format!(" in the {}", profile.work_arena)
    }
}

/// The afternoon errand (or, after it, some free time).
fn errand(profile: &Profile, day: DayChoices, first: bool) -> Act {
    if !first {
        return act(
            format!("taking a walk in {PARK}"),
            format!("take a walk in {PARK}"),
        );
    }
    let coffee_ok = profile.job != Job::Cafe;
    match day.errand {
        1 => act(
            format!("taking a walk in {PARK}"),
            format!("take a walk in {PARK}"),
        ),
        2 if coffee_ok => act(
            format!("having a coffee at {CAFE}"),
            format!("have a coffee at {CAFE}"),
        ),
        _ => act(
            format!("buying groceries at {GROCERY}"),
            format!("buy groceries at {GROCERY}"),
        ),
    }
}

/// The evening out.
fn evening(profile: &Profile, day: DayChoices) -> Act {
    let pub_night = act(
        format!("meeting friends for a drink at {PUB}"),
        format!("meet friends for a drink at {PUB}"),
    );
    let walk = act(
        format!("taking an evening walk in {PARK}"),
        format!("take an evening walk in {PARK}"),
    );
    match (profile.evening, day.evening_alt) {
        (Evening::Piano, _) => act(
            format!("playing the piano at {PUB}"),
            format!("play the piano at {PUB}"),
        ),
        (Evening::Walk, false) | (Evening::Pub, true) => walk,
        (Evening::Walk, true) | (Evening::Pub, false) => pub_night,
    }
}

/// The day from the wake-up hour to midnight as blocks `(start hour, end hour, activity)`,
/// consecutive equal hours merged.
fn day_blocks(profile: &Profile, day: DayChoices) -> Vec<(u32, u32, Act)> {
    let mut blocks: Vec<(u32, u32, Act)> = Vec::new();
    for hour in profile.wake..24 {
        let activity = activity_at(profile, day, hour);
        match blocks.last_mut() {
            Some((_, end, last)) if *last == activity => *end = hour + 1,
            _ => blocks.push((hour, hour + 1, activity)),
        }
    }
    blocks
}

/// Plan items for the day (without the wake-up item), at most `max`, always ending with the
/// bedtime.
fn plan_items(profile: &Profile, day: DayChoices, max: usize) -> Vec<String> {
    let mut items: Vec<String> = day_blocks(profile, day)
        .into_iter()
        .filter(|(start, _, a)| {
            *start != profile.wake
                && a.ing != "sleeping"
                && !a.ing.starts_with("getting ready for bed")
                && !a
                    .ing
                    .ends_with(&format!("in the {} at home", profile.home_arena))
        })
        .map(|(start, end, a)| {
            let base = match (&profile.follow_up, a.ing.starts_with("having lunch")) {
                (Some(who), true) => format!("{} and catch up with {who}", a.base),
                _ => a.base,
            };
            if end == start + 1 {
                format!("{base} at {}", hour_label(start))
            } else {
                format!("{base} from {} to {}", hour_label(start), hour_label(end))
            }
        })
        .collect();
    items.truncate(max.saturating_sub(1));
    items.push(format!("go to bed at {}", hour_label(profile.bed)));
    while items.len() < 4 {
        items.insert(0, "relax at home".to_string());
    }
    items
}

/// The date from "Today is Monday February 13." (empty when absent).
fn date_of(text: &str) -> &str {
    between(text, "Today is ", ". ")
        .or_else(|| between(text, "Today is ", ".\n"))
        .unwrap_or("")
        .trim()
}

// =============================================================================================
// Planning answers.

fn wake_up_hour(text: &str) -> String {
    let lifestyle = field(text, "Lifestyle:").unwrap_or("");
    wake_and_bed(lifestyle).0.to_string()
}

fn daily_plan(seed: u64, text: &str) -> String {
    let first = between(text, "List what ", " will do").unwrap_or("");
    let mut profile = Profile::read(text, first);
    if let Some(wake) = between(text, "morning routine at ", "\n").and_then(first_hour_in) {
        profile.wake = wake;
    }
    let day = DayChoices::draw(seed, &profile, date_of(text));
    numbered(&plan_items(&profile, day, 8))
}

fn hourly_schedule(seed: u64, text: &str) -> String {
    let first = between(text, "Write ", "'s schedule").unwrap_or("");
    let mut profile = Profile::read(text, first);
    let labels: Vec<(&str, u32)> = text
        .lines()
        .skip_while(|l| l.trim() != "Hours to fill:")
        .skip(1)
        .map(str::trim)
        .filter_map(|l| Some((l, first_hour_in(l)?)))
        .collect();
    if let Some((_, wake)) = labels.first() {
        profile.wake = *wake;
    }
    let day = DayChoices::draw(seed, &profile, date_of(text));
    labels
        .iter()
        .map(|(label, hour)| format!("{label} {}", activity_at(&profile, day, *hour).ing))
        .collect::<Vec<_>>()
        .join("\n")
}

fn daily_requirement(seed: u64, text: &str) -> String {
    let first = between(text, "List ", "'s goals").unwrap_or("");
    let mut profile = Profile::read(text, first);
    if let Some(wake) = between(text, " wakes up at ", "\n").and_then(first_hour_in) {
        profile.wake = wake;
    }
    let day = DayChoices::draw(seed, &profile, date_of(text));
    // Breakfast and the like are implied; keep the goals that shape the day.
    let items: Vec<String> = plan_items(&profile, day, 8)
        .into_iter()
        .filter(|i| !i.starts_with("have breakfast") && !i.starts_with("read the news"))
        .collect();
    let keep = items.len().clamp(4, 6);
    let mut goals: Vec<String> = items.iter().take(keep - 1).cloned().collect();
    if let Some(last) = items.last() {
        goals.push(last.clone());
    }
    numbered(&goals)
}

fn numbered(items: &[String]) -> String {
    items
        .iter()
        .enumerate()
        .map(|(i, item)| format!("{}) {item}", i + 1))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The steps a task breaks into; each names its arena and object so grounding follows.
fn steps_for(task: &str) -> Vec<String> {
    let lower = task.to_ascii_lowercase();
    let has = |w: &str| lower.contains(w);
    let list: &[&str] = if has("morning routine") && has("breakfast") {
        &[
            "getting out of bed in the bedroom",
            "taking a shower in the bathroom",
            "getting dressed at the closet in the bedroom",
            "making breakfast at the stove in the kitchen",
            "eating breakfast at the dining table in the kitchen",
        ]
    } else if has("morning routine") {
        &[
            "getting out of bed in the bedroom",
            "taking a shower in the bathroom",
            "brushing teeth at the sink in the bathroom",
            "getting dressed at the closet in the bedroom",
        ]
    } else if has("ready for bed") {
        &[
            "brushing teeth at the sink in the bathroom",
            "changing into pyjamas at the closet in the bedroom",
            "reading a few pages at the desk in the bedroom",
        ]
    } else if has("breakfast") || has("dinner") || (has("lunch") && has("home")) {
        &[
            "taking food out of the refrigerator in the kitchen",
            "cooking at the stove in the kitchen",
            "eating at the dining table in the kitchen",
            "tidying the kitchen counter in the kitchen",
        ]
    } else if has("lunch") {
        &[
            "ordering lunch at the cafe counter",
            "eating lunch at a customer table",
            "having a coffee at a customer table",
            "browsing the bookshelf in the cafe",
        ]
    } else if has("having a coffee") {
        &[
            "ordering a coffee at the cafe counter",
            "drinking coffee at a customer table",
            "browsing the bookshelf in the cafe",
        ]
    } else if has("opening") && has("cafe") {
        &[
            "turning on the coffee machine",
            "setting out pastries at the cafe counter",
            "serving the first customers at the cafe counter",
        ]
    } else if has("baking") {
        &[
            "baking pastries at the stove in the cafe kitchen",
            "washing cups at the kitchen sink in the cafe kitchen",
            "wiping down each customer table",
            "serving customers at the cafe counter",
        ]
    } else if has("serving customers") && has("cafe") {
        &[
            "brewing coffee at the coffee machine",
            "serving customers at the cafe counter",
            "chatting with regulars at the cafe counter",
            "wiping down each customer table",
        ]
    } else if has("teaching") {
        &[
            "setting up lecture notes at the lectern",
            "lecturing at the lectern in the classroom",
            "writing equations on the blackboard",
            "answering questions at a student desk",
        ]
    } else if has("grading") || has("office") {
        &[
            "answering emails at the computer in the office",
            "grading lab reports at the desk in the office",
            "preparing the next lecture at the desk in the office",
        ]
    } else if has("attending") {
        &[
            "finding a seat at a student desk in the classroom",
            "taking notes at a student desk in the classroom",
            "copying formulas from the blackboard",
        ]
    } else if has("studying") {
        &[
            "finding books at the bookshelf in the library",
            "reading at the reading table in the library",
            "working through practice problems at the reading table",
            "reviewing notes at the reading table in the library",
        ]
    } else if has("novel") || has("chapters") {
        &[
            "rereading yesterday's pages at the reading table",
            "writing new pages at the reading table in the library",
            "looking up references at the bookshelf in the library",
            "revising the plot outline at the reading table",
        ]
    } else if has("stocking") {
        &[
            "unpacking deliveries by the shelf",
            "stocking the shelf with new goods",
            "arranging fruit at the produce stand",
        ]
    } else if has("cash register") {
        &[
            "serving customers at the cash register",
            "tidying the shelf near the entrance",
            "restocking the produce stand",
        ]
    } else if has("groceries") {
        &[
            "picking groceries from the shelf",
            "choosing vegetables at the produce stand",
            "paying at the cash register",
        ]
    } else if has("walk") || has("park") {
        &[
            "walking around the pond in the park",
            "sitting on a bench in the park",
            "looking at the fountain in the park",
            "strolling through the garden in the park",
        ]
    } else if has("piano") {
        &[
            "warming up at the piano",
            "playing a new song at the piano",
            "having a drink at the bar counter",
        ]
    } else if has("drink") || has("pub") {
        &[
            "ordering a drink at the bar counter",
            "chatting with friends at a pub table",
            "playing darts at the dartboard",
        ]
    } else if has("working as a ") || has("day's work as a ") {
        let trade = between(&lower, " as a ", " ")
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .unwrap_or("worker");
        return vec![
            format!("getting the {trade}'s work ready"),
            format!("working as a {trade}"),
            "serving customers at the counter".to_string(),
            format!("tidying up after the {trade}'s work"),
        ];
    } else if has("day's tasks") {
        &[
            "answering letters at the desk",
            "working through the to-do list at the desk",
            "tidying the desk",
        ]
    } else if has("journal") {
        &[
            "writing in a journal at the desk in the bedroom",
            "tidying the closet in the bedroom",
        ]
    } else if has("reading") || has("relaxing") {
        &[
            "reading a book at the desk in the bedroom",
            "relaxing on the bed in the bedroom",
            "tidying the closet in the bedroom",
        ]
    } else {
        return vec![
            format!("getting started on {task}"),
            task.to_string(),
            format!("finishing up {task}"),
        ];
    };
    list.iter().map(|s| (*s).to_string()).collect()
}

/// `total` minutes split into `count` steps of whole 5-minute multiples (the last one absorbs
/// a remainder that is not a multiple of 5). Fewer steps when there are not enough minutes.
fn split_minutes(total: u32, count: usize) -> Vec<u32> {
    let units = total / 5;
    if units == 0 {
        return vec![total];
    }
    let count = (count.max(1) as u32).min(units);
    let (per, extra) = (units / count, units % count);
    let mut parts: Vec<u32> = (0..count)
        .map(|i| (per + u32::from(i < extra)) * 5)
        .collect();
    if let Some(last) = parts.last_mut() {
        *last += total % 5;
    }
    parts
}

/// How many steps a block of `minutes` gets: one per ~20 minutes for up to two hours, one per
/// ~30 minutes (at most 8) for longer blocks.
fn step_count(minutes: u32) -> usize {
    if minutes <= 120 {
        (minutes / 20).clamp(1, 6) as usize
    } else {
        (minutes / 30).clamp(4, 8) as usize
    }
}

fn task_decomposition(text: &str) -> String {
    let task = field(text, "Task:").unwrap_or("").trim();
    let total = field(text, "Total minutes:")
        .and_then(|m| m.parse::<u32>().ok())
        .unwrap_or(60);
    let steps = steps_for(task);
    let parts = split_minutes(total, step_count(total));
    let mut left = total;
    parts
        .iter()
        .enumerate()
        .map(|(i, minutes)| {
            left = left.saturating_sub(*minutes);
            let step = steps
                .get(i % steps.len().max(1))
                .map_or(task, String::as_str);
            format!(
                "{}) {step} (duration in minutes: {minutes}, minutes left: {left})",
                i + 1
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn new_decomposition(text: &str) -> String {
    // The next activity may itself be a step this answer wrote before: "getting back to" is
    // said once, not piled up chat after chat (that would be a garbled answer).
    fn unwound(mut text: &str) -> &str {
        while let Some(rest) = text.strip_prefix("getting back to ") {
            text = rest.trim_start();
        }
        text
    }
    let next = unwound(field(text, "Next planned activity:").unwrap_or("").trim());
    let (task, _) = split_activity(next);
    let task = unwound(task);
    let task = if task.is_empty() {
        "the day's plan"
    } else {
        task
    };
    let total = field(text, "Minutes to fill:")
        .and_then(|m| m.parse::<u32>().ok())
        .unwrap_or(0);
    let next = if next.is_empty() { task } else { next };
    if total >= 15 {
        format!(
            "1) getting back to {task} (duration in minutes: 5)\n2) {next} (duration in minutes: {})",
            total - 5
        )
    } else {
        format!("1) {next} (duration in minutes: {})", total.max(1))
    }
}

// =============================================================================================
// Grounding answers.
//
// The choosers know only what the prompt shows: the persona's home and workplace (sector
// prompt), the activity, and the options — the loaded map's own sector, arena and object names.
// They never answer with a name that is not an option. In order, a chooser takes:
// 1. an option the activity names (the step inside the parentheses first, then the task);
// 2. home or workplace for activities done there (sector prompt only);
// 3. a keyword rule: the activity's words map to words an option's name contains ("sleeping" →
//    an object named like a bed, "lunch" → a sector named like a cafe or a tavern), rules and
//    their place words in preference order;
// 4. the options sharing the most words with the activity;
// 5. otherwise a **guess** among the plausible options (not somebody's house, for a sector),
//    recorded in the backend's guess log (`guesses` in `usage.json`).
// Ties at any step are broken deliberately, never by position: the option whose name hashes
// lowest (FNV-1a) together with the prompt's first line (who is choosing) and the activity.
// So the same persona doing the same thing picks the same place whatever order the map lists
// its places in, and different personas spread over equally good places.

/// A chooser's answer: the option and whether no word of the prompt decided it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Pick {
    index: usize,
    guessed: bool,
}

impl Pick {
    fn sure(index: usize) -> Self {
        Self {
            index,
            guessed: false,
        }
    }

    fn guess(index: usize) -> Self {
        Self {
            index,
            guessed: true,
        }
    }
}

/// A chooser: the prompt text and its options in, a pick out (`None` only without options).
type Choose = fn(&str, &[String]) -> Option<Pick>;

/// Words of activities done at home.
const HOME_WORDS: &[&str] = &[
    "home",
    "sleeping",
    "sleep",
    "asleep",
    "bed",
    "shower",
    "morning routine",
    "breakfast",
    "dinner",
];

/// Words of activities done at work.
const WORK_WORDS: &[&str] = &[
    "work",
    "working",
    "teaching",
    "studying",
    "writing",
    "grading",
    "lecture",
    "class",
    "shift",
    "serving customers",
    "stocking",
];

/// Words that mark a sector as somebody's dwelling: never a destination for an errand.
const DWELLING_WORDS: &[&str] = &[
    "house",
    "home",
    "cottage",
    "flat",
    "apartment",
    "apartments",
    "cabin",
    "dorm",
    "dormitory",
    "residence",
    "lodging",
    "lodgings",
    "hut",
    "manor",
    "farmhouse",
    "bungalow",
    "villa",
    "homestead",
];

/// Purposes of going out: activity words → sector-name words, best first.
const SECTOR_PURPOSES: &[(&[&str], &[&str])] = &[
    (
        &["lunch", "coffee", "cafe", "tea", "snack"],
        &[
            "cafe",
            "coffee",
            "teahouse",
            "tearoom",
            "bakery",
            "diner",
            "bistro",
            "restaurant",
            "canteen",
            "eatery",
            "kitchen",
            "tavern",
            "inn",
            "pub",
        ],
    ),
    (
        &["groceries", "shopping", "shop", "market", "errand"],
        &[
            "grocery", "grocer", "market", "shop", "store", "mart", "general", "bakery", "butcher",
            "emporium", "bazaar",
        ],
    ),
    (
        &["walk", "stroll", "park", "outdoors", "fresh air"],
        &[
            "park",
            "garden",
            "gardens",
            "green",
            "common",
            "square",
            "plaza",
            "meadow",
            "woods",
            "forest",
            "beach",
            "shore",
            "pier",
            "harbour",
            "harbor",
            "wharf",
            "quay",
            "promenade",
            "trail",
            "field",
            "orchard",
            "lake",
            "river",
            "pond",
        ],
    ),
    (
        &["pub", "drink", "piano", "darts", "friends", "music"],
        &[
            "pub", "tavern", "inn", "bar", "saloon", "alehouse", "taproom", "club", "lounge",
            "hall", "theatre", "theater",
        ],
    ),
];

/// Arena-name words (in preference order) by activity keyword.
const ARENA_KEYWORDS: &[(&[&str], &[&str])] = &[
    (
        &["shower", "teeth", "toilet", "bath", "washing", "wash"],
        &["bathroom", "washroom", "bath", "lavatory"],
    ),
    (
        &[
            "bed", "sleeping", "asleep", "sleep", "nap", "dressed", "pyjamas", "closet", "journal",
        ],
        &[
            "bedroom", "dorm", "bunkroom", "loft", "attic", "chamber", "quarters", "bunk",
            "sleeping",
        ],
    ),
    (
        &["baking", "pastries", "cups", "dishes"],
        &["cafe kitchen", "bakehouse", "kitchen", "galley"],
    ),
    (
        &[
            "breakfast",
            "dinner",
            "cooking",
            "stove",
            "refrigerator",
            "meal",
        ],
        &["kitchen", "galley", "dining", "scullery"],
    ),
    (
        &["lunch", "coffee", "customers", "serving", "counter"],
        &[
            "cafe", "store", "shop", "bar", "taproom", "tearoom", "dining", "hall", "counter",
        ],
    ),
    (
        &[
            "teaching",
            "lecture",
            "lecturing",
            "class",
            "blackboard",
            "lectern",
        ],
        &["classroom", "schoolroom", "lecture"],
    ),
    (
        &["emails", "grading", "computer", "office"],
        &["office", "study"],
    ),
    (
        &[
            "studying", "reading", "books", "novel", "writing", "library",
        ],
        &["library", "study", "reading"],
    ),
    (
        &["drink", "piano", "darts", "pub"],
        &["bar", "taproom", "lounge"],
    ),
    (
        &[
            "walk", "walking", "bench", "pond", "fountain", "garden", "park",
        ],
        &["park", "garden", "green", "lawn", "path", "grounds"],
    ),
    (
        &["groceries", "shelf", "stocking", "register", "produce"],
        &["store", "shop", "market", "stall"],
    ),
];

/// Object-name words (in preference order) by activity keyword.
const OBJECT_KEYWORDS: &[(&[&str], &[&str])] = &[
    (
        &["sleeping", "asleep", "nap", "sleep"],
        &[
            "bed", "bunk", "cot", "hammock", "mattress", "futon", "berth",
        ],
    ),
    (&["shower"], &["shower", "bath", "tub"]),
    (&["teeth", "wash"], &["sink", "basin", "washstand"]),
    (&["toilet"], &["toilet", "privy"]),
    (
        &["dressed", "pyjamas", "clothes", "closet"],
        &["closet", "wardrobe", "dresser", "chest"],
    ),
    (&["cups", "dishes"], &["kitchen sink", "sink", "basin"]),
    (
        &["cooking", "baking", "frying", "stove"],
        &["stove", "oven", "hearth", "range"],
    ),
    (
        &["refrigerator", "fridge", "food"],
        &["refrigerator", "fridge", "pantry", "larder"],
    ),
    (
        &["eating", "meal", "breakfast", "dinner", "lunch"],
        &["dining table", "table", "counter", "desk"],
    ),
    (&["coffee"], &["coffee machine", "coffee", "counter"]),
    (
        &["customers", "serving", "order", "ordering"],
        &["counter", "cash register", "register", "till"],
    ),
    (
        &["lecturing", "lecture", "teaching"],
        &["lectern", "podium"],
    ),
    (
        &["blackboard", "equations", "formulas"],
        &["blackboard", "chalkboard", "whiteboard"],
    ),
    (&["emails", "computer"], &["computer", "laptop"]),
    (
        &["grading", "writing", "journal", "notes", "papers"],
        &["desk", "reading table", "table"],
    ),
    (
        &["reading", "books", "book", "studying"],
        &[
            "reading table",
            "bookshelf",
            "desk",
            "armchair",
            "table",
            "chair",
        ],
    ),
    (&["piano", "song", "music"], &["piano"]),
    (&["drink", "pint"], &["bar counter", "bar", "counter"]),
    (&["darts"], &["dartboard"]),
    (&["friends"], &["pub table", "table", "bench"]),
    (&["pond"], &["pond"]),
    (&["bench", "sitting"], &["bench", "seat"]),
    (&["fountain"], &["fountain"]),
    (
        &["garden", "flowers", "walking", "walk"],
        &["garden", "pond", "path", "flower"],
    ),
    (
        &["groceries", "stocking", "goods", "shelf"],
        &["shelf", "shelves", "stand", "stall"],
    ),
    (
        &["paying", "register"],
        &["cash register", "register", "till", "scales", "counter"],
    ),
    (
        &["vegetables", "fruit", "produce"],
        &["produce stand", "stand", "stall", "crate"],
    ),
    (
        &["work", "working", "shift", "opening", "tools"],
        &["workbench", "bench", "counter", "desk", "table"],
    ),
    (&["bed"], &["bed", "bunk", "cot"]),
];

fn has_any(words: &[String], phrases: &[&str]) -> bool {
    phrases.iter().any(|p| contains_words(words, p))
}

/// Whether an option's name contains `word`: as whole words, or as the head of a compound
/// ("fishmarket" names a market) or in a plural ("benches").
fn names_word(option_words: &[String], word: &str) -> bool {
    if word.contains(' ') {
        return contains_words(option_words, word);
    }
    option_words.iter().any(|w| {
        w == word
            || (word.len() >= 4 && w.ends_with(word))
            || (w.starts_with(word) && w.len() <= word.len() + 2 && word.len() >= 3)
    })
}

/// Who is choosing and for what: the key of the deterministic tie-break.
fn choice_key(text: &str) -> String {
    let first_line = text.lines().map(str::trim).find(|l| !l.is_empty());
    format!("{}|{}", first_line.unwrap_or(""), activity_line(text))
}

/// The candidate whose name hashes lowest with `key` (FNV-1a of `key`, a separator and the
/// lowercased name): a tie-break that ignores the options' order.
fn tie_break(key: &str, options: &[String], candidates: &[usize]) -> Option<usize> {
    candidates.iter().copied().min_by_key(|&i| {
        let name = options
            .get(i)
            .map_or(String::new(), |o| o.trim().to_lowercase());
        (
            crate::llm::fnv1a(format!("{key}\u{1f}{name}").as_bytes()),
            i,
        )
    })
}

/// The options whose names contain the best-ranked place word of the first rule that matches
/// `text` and has any such option; of those, the ones with the fewest words.
fn rule_candidates(text: &str, rules: &[(&[&str], &[&str])], options: &[String]) -> Vec<usize> {
    let words = tokens(text);
    let option_words: Vec<Vec<String>> = options.iter().map(|o| tokens(o)).collect();
    for (keys, targets) in rules {
        if !has_any(&words, keys) {
            continue;
        }
        for target in *targets {
            let found: Vec<usize> = option_words
                .iter()
                .enumerate()
                .filter(|(_, ow)| names_word(ow, target))
                .map(|(i, _)| i)
                .collect();
            // The plainest names first: "cafe" over "cafe kitchen" for a coffee.
            let plainest = found.iter().map(|&i| option_words[i].len()).min();
            if let Some(plainest) = plainest {
                return found
                    .into_iter()
                    .filter(|&i| option_words[i].len() == plainest)
                    .collect();
            }
        }
    }
    Vec::new()
}

/// Words too common to tell places apart.
const STOP_WORDS: &[&str] = &[
    "the", "and", "for", "with", "from", "into", "onto", "some", "his", "her", "their", "its",
];

/// The options sharing the most (3+ letter, non-stop) words with `text`; empty when none
/// shares any.
fn overlap_candidates(text: &str, options: &[String]) -> Vec<usize> {
    let words = tokens(text);
    let counts: Vec<usize> = options
        .iter()
        .map(|o| {
            let ow = tokens(o);
            ow.iter()
                .filter(|w| w.len() >= 3 && !STOP_WORDS.contains(&w.as_str()))
                .filter(|w| words.iter().any(|a| shares_stem(a, w)))
                .count()
        })
        .collect();
    let best = counts.iter().copied().max().unwrap_or(0);
    if best == 0 {
        return Vec::new();
    }
    (0..options.len()).filter(|&i| counts[i] == best).collect()
}

/// Whether two words share a stem: equal, or one (4+ letters) starts or ends the other
/// ("fishmonger" and "fish", "baker" and "bakery").
fn shares_stem(a: &str, b: &str) -> bool {
    let within = |long: &str, short: &str| {
        short.chars().count() >= 4 && (long.starts_with(short) || long.ends_with(short))
    };
    a == b || within(a, b) || within(b, a)
}

/// Grounds in the step first, then the task: a named option, a keyword rule, shared words.
fn ground(
    key: &str,
    activity: &str,
    rules: &[(&[&str], &[&str])],
    options: &[String],
) -> Option<usize> {
    let (task, step) = split_activity(activity);
    let parts: Vec<&str> = step.into_iter().chain(std::iter::once(task)).collect();
    for part in &parts {
        if let Some(i) = best_mention(part, options) {
            return Some(i);
        }
        let found = rule_candidates(part, rules, options);
        if let Some(i) = tie_break(key, options, &found) {
            return Some(i);
        }
    }
    parts.iter().find_map(|part| {
        let found = overlap_candidates(part, options);
        tie_break(key, options, &found)
    })
}

/// Whether an option is a dwelling (by its whole words: a lighthouse is no house).
fn is_dwelling(option: &str) -> bool {
    let words = tokens(option);
    DWELLING_WORDS.iter().any(|w| contains_words(&words, w))
}

fn choose_sector(text: &str, options: &[String]) -> Option<Pick> {
    if options.is_empty() {
        return None;
    }
    let key = choice_key(text);
    let activity = activity_line(text);
    let (task, step) = split_activity(activity);
    for part in step.into_iter().chain(std::iter::once(task)) {
        if let Some(i) = best_mention(part, options) {
            return Some(Pick::sure(i));
        }
    }
    let words = tokens(activity);
    let home = field(text, "Home:").unwrap_or("");
    let work = field(text, "Workplace:").unwrap_or("none");
    let current = field(text, "Current area:").unwrap_or("");
    if has_any(&words, HOME_WORDS)
        && let Some(i) = option_named(options, home)
    {
        return Some(Pick::sure(i));
    }
    if has_any(&words, WORK_WORDS)
        && !work.eq_ignore_ascii_case("none")
        && let Some(i) = option_named(options, work)
    {
        return Some(Pick::sure(i));
    }
    // Somebody else's house is no place for an errand; one's own home and workplace are.
    let mine = |i: &usize| {
        options
            .get(*i)
            .is_some_and(|o| !is_dwelling(o) || o.trim().eq_ignore_ascii_case(home.trim()))
    };
    let purposeful = SECTOR_PURPOSES
        .iter()
        .any(|(keys, _)| has_any(&words, keys));
    let found: Vec<usize> = rule_candidates(activity, SECTOR_PURPOSES, options)
        .into_iter()
        .filter(mine)
        .collect();
    if let Some(i) = tie_break(&key, options, &found) {
        return Some(Pick::sure(i));
    }
    let found: Vec<usize> = overlap_candidates(activity, options)
        .into_iter()
        .filter(mine)
        .collect();
    if let Some(i) = tie_break(&key, options, &found) {
        return Some(Pick::sure(i));
    }
    if purposeful {
        // Going out for something this town names no place for: some public place.
        let public: Vec<usize> = (0..options.len())
            .filter(|i| {
                options.get(*i).is_some_and(|o| {
                    !is_dwelling(o)
                        && !o.trim().eq_ignore_ascii_case(work.trim())
                        && !o.trim().eq_ignore_ascii_case(home.trim())
                })
            })
            .collect();
        if let Some(i) = tie_break(&key, options, &public) {
            return Some(Pick::guess(i));
        }
    }
    // Nothing says where: stay (the prompt's own rule), else go home, else any option.
    let fallback = option_named(options, current)
        .or_else(|| option_named(options, home))
        .or_else(|| tie_break(&key, options, &(0..options.len()).collect::<Vec<_>>()));
    fallback.map(Pick::guess)
}

fn choose_arena(text: &str, options: &[String]) -> Option<Pick> {
    if options.is_empty() {
        return None;
    }
    let key = choice_key(text);
    let activity = activity_line(text);
    if let Some(i) = ground(&key, activity, ARENA_KEYWORDS, options) {
        return Some(Pick::sure(i));
    }
    // At home in a place without the room the activity names (a dorm has no kitchen): one's
    // own room, the one slept in.
    if contains_words(&tokens(activity), "home") {
        let own = rule_candidates("sleeping", ARENA_KEYWORDS, options);
        if let Some(i) = tie_break(&key, options, &own) {
            return Some(Pick::sure(i));
        }
    }
    let all: Vec<usize> = (0..options.len()).collect();
    tie_break(&key, options, &all).map(Pick::guess)
}

fn choose_object(text: &str, options: &[String]) -> Option<Pick> {
    if options.is_empty() {
        return None;
    }
    let key = choice_key(text);
    let activity = activity_line(text);
    if let Some(i) = ground(&key, activity, OBJECT_KEYWORDS, options) {
        return Some(Pick::sure(i));
    }
    let all: Vec<usize> = (0..options.len()).collect();
    tie_break(&key, options, &all).map(Pick::guess)
}

/// Lean mode's room and object at once ("room: object" options, "room" for a room without
/// objects): the room as [`choose_arena`] picks it, then its object as [`choose_object`] does.
fn choose_place(text: &str, options: &[String]) -> Option<Pick> {
    let split = |option: &String| match option.split_once(": ") {
        Some((arena, object)) => (arena.trim().to_string(), Some(object.trim().to_string())),
        None => (option.trim().to_string(), None),
    };
    let places: Vec<(String, Option<String>)> = options.iter().map(split).collect();
    let mut arenas: Vec<String> = Vec::new();
    for (arena, _) in &places {
        if !arenas.contains(arena) {
            arenas.push(arena.clone());
        }
    }
    let arena_pick = choose_arena(text, &arenas)?;
    let arena = arenas.get(arena_pick.index)?;
    let in_arena: Vec<usize> = (0..places.len())
        .filter(|&i| places.get(i).is_some_and(|(a, _)| a == arena))
        .collect();
    let objects: Vec<String> = in_arena
        .iter()
        .filter_map(|&i| places.get(i).and_then(|(_, o)| o.clone()))
        .collect();
    if objects.is_empty() {
        return in_arena.first().map(|&index| Pick {
            index,
            guessed: arena_pick.guessed,
        });
    }
    let object_pick = choose_object(text, &objects)?;
    let object = objects.get(object_pick.index)?;
    let index = in_arena.into_iter().find(|&i| {
        places
            .get(i)
            .is_some_and(|(_, o)| o.as_ref() == Some(object))
    })?;
    Some(Pick {
        index,
        guessed: arena_pick.guessed || object_pick.guessed,
    })
}

/// Emoji by keyword; the first matching rule wins.
const EMOJI: &[(&[&str], &str)] = &[
    (&["chat", "chatting", "conversing", "talking"], "💬"),
    (&["sleeping", "asleep"], "😴"),
    (&["shower"], "🚿"),
    (&["teeth"], "🪥"),
    (&["dressed", "pyjamas", "closet"], "👕"),
    (&["bed"], "🛏"),
    (&["coffee"], "☕"),
    (
        &["breakfast", "lunch", "dinner", "eating", "cooking", "meal"],
        "🍽",
    ),
    (&["baking", "pastries"], "🥐"),
    (&["customers", "serving", "cups"], "🧑‍🍳"),
    (
        &["teaching", "lecturing", "lecture", "class", "blackboard"],
        "🏫",
    ),
    (&["grading", "emails", "notes", "writing", "journal"], "📝"),
    (&["studying", "reading", "books", "book", "novel"], "📚"),
    (&["groceries", "stocking", "shelf", "register"], "🛒"),
    (
        &["walk", "walking", "park", "garden", "pond", "bench"],
        "🌳",
    ),
    (&["piano", "song", "music"], "🎹"),
    (&["drink", "pub", "darts"], "🍺"),
];

fn emoji_for(text: &str) -> &'static str {
    let words = tokens(text);
    EMOJI
        .iter()
        .find(|(keys, _)| has_any(&words, keys))
        .map_or("🙂", |(_, emoji)| *emoji)
}

fn action_emoji(text: &str) -> String {
    emoji_for(activity_line(text)).to_string()
}

fn object_emoji(text: &str) -> String {
    emoji_for(field(text, "Object state:").unwrap_or("")).to_string()
}

/// Words that end a triple's object phrase.
const PREPOSITIONS: &[&str] = &[
    "at", "in", "on", "with", "from", "for", "to", "by", "of", "around", "through", "near",
];

/// `(predicate, object)` of an activity: its first word and the words up to a preposition.
fn predicate_object(activity: &str) -> (String, String) {
    let words: Vec<&str> = activity.split_whitespace().collect();
    match words.as_slice() {
        [] => ("is".to_string(), "idle".to_string()),
        [only] => ("is".to_string(), (*only).to_string()),
        [verb, rest @ ..] => {
            let is_preposition = |w: &&str| PREPOSITIONS.contains(&w.to_ascii_lowercase().as_str());
            let mut object: Vec<&str> = rest
                .iter()
                .take_while(|w| !is_preposition(w))
                .copied()
                .collect();
            if object.is_empty() {
                // "cooking at the stove" → "the stove".
                object = rest
                    .iter()
                    .skip_while(|w| is_preposition(w))
                    .take_while(|w| !is_preposition(w))
                    .copied()
                    .collect();
            }
            let object = if object.is_empty() {
                rest.join(" ")
            } else {
                object.join(" ")
            };
            let object: String = object
                .chars()
                .filter(|c| !matches!(c, ',' | '(' | ')'))
                .take(60)
                .collect();
            ((*verb).to_string(), object.trim().to_string())
        }
    }
}

fn action_event_triple(text: &str) -> String {
    let name = between(text, "Answer: (", ",")
        .map(str::trim)
        .unwrap_or("")
        .to_string();
    let line = field(text, "Activity:").unwrap_or("");
    let activity = line
        .strip_prefix(name.as_str())
        .map(|rest| rest.trim_start().strip_prefix("is ").unwrap_or(rest))
        .unwrap_or(line);
    let (task, step) = split_activity(activity);
    let (predicate, object) = predicate_object(step.unwrap_or(task));
    format!("({name}, {predicate}, {object})")
}

/// What an object is doing while it is used.
fn object_state(object: &str, activity: &str) -> String {
    let lower = activity.to_ascii_lowercase();
    let state = match object.trim().to_ascii_lowercase().as_str() {
        "bed" if lower.contains("sleep") => "being slept in",
        "bed" => "being used",
        "shower" => "running hot water",
        "sink" | "kitchen sink" => "running water",
        "toilet" => "in use",
        "stove" => "heating a pan",
        "refrigerator" => "open",
        "kitchen counter" => "covered with ingredients",
        "dining table" => "set for a meal",
        "desk" => "covered with papers",
        "closet" => "open",
        "coffee machine" => "brewing coffee",
        "cafe counter" => "busy with orders",
        "customer table" | "pub table" => "occupied",
        "bookshelf" => "being browsed",
        "bar counter" => "serving drinks",
        "dartboard" => "being played",
        "piano" => "playing music",
        "bench" => "occupied",
        "fountain" => "splashing",
        "garden" => "in bloom",
        "pond" => "reflecting the sky",
        "shelf" if lower.contains("stock") => "being restocked",
        "shelf" => "being browsed",
        "cash register" => "ringing up purchases",
        "produce stand" => "full of fresh vegetables",
        "lectern" => "holding lecture notes",
        "student desk" => "occupied by a student",
        "blackboard" => "covered in notes",
        "reading table" => "covered with open books",
        "computer" => "showing emails",
        _ => "in use",
    };
    state.to_string()
}

fn object_description(text: &str) -> String {
    let object = field(text, "Object:").unwrap_or("object");
    let activity = activity_line(text);
    format!("{object} is {}", object_state(object, activity))
}

fn object_event_triple(text: &str) -> String {
    let object = between(text, "Answer: (", ",").map_or("", str::trim);
    let state = field(text, "Object state:").unwrap_or("");
    let (predicate, rest) = state_triple(object, state);
    format!("({object}, {predicate}, {rest})")
}

/// `(predicate, object)` of an object's state "<object> is <state>".
fn state_triple(object: &str, state: &str) -> (String, String) {
    let state = state
        .strip_prefix(object)
        .map(str::trim_start)
        .unwrap_or(state);
    let state = state.strip_prefix("is ").unwrap_or(state).trim();
    let words: Vec<&str> = state.split_whitespace().collect();
    match words.as_slice() {
        [verb, rest @ ..] if verb.ends_with("ing") && *verb != "being" && !rest.is_empty() => {
            ((*verb).to_string(), rest.join(" "))
        }
        _ if state.is_empty() => ("is".to_string(), "idle".to_string()),
        _ => ("is".to_string(), state.to_string()),
    }
}

/// Lean mode's action details: what the single prompts answer (emoji, triples, the object's
/// state, the event ratings), by the same rules, as one JSON object.
fn action_details(text: &str, rng: &mut ScriptRng) -> String {
    let name = field(text, "Person:").unwrap_or("");
    let activity = activity_line(text);
    let (task, step) = split_activity(activity);
    let (predicate, what) = predicate_object(step.unwrap_or(task));
    let importance = event_poignancy(&format!("Event: {name} is {activity}"), rng);
    let mut answer = json!({
        "emoji": emoji_for(activity),
        "event": [name, predicate, what],
        "importance": importance,
    });
    if let Some(object) = field(text, "Object:").filter(|o| !o.is_empty() && *o != "(none)") {
        let state = format!("{object} is {}", object_state(object, activity));
        let (state_predicate, state_what) = state_triple(object, &state);
        let state_importance = event_poignancy(&format!("Event: {state}"), rng);
        if let Some(map) = answer.as_object_mut() {
            map.insert("object_emoji".into(), json!(emoji_for(&state)));
            map.insert(
                "object_event".into(),
                json!([object, state_predicate, state_what]),
            );
            map.insert("object_importance".into(), json!(state_importance));
            map.insert("object_state".into(), json!(state));
        }
    }
    answer.to_string()
}

// =============================================================================================
// Perceiving answers.

fn event_poignancy(text: &str, rng: &mut ScriptRng) -> u8 {
    let original = field(text, "Event:").unwrap_or("");
    let event = original.to_ascii_lowercase();
    let words = tokens(&event);
    // "<object> is <state>": a thing, not a person — its subject is lowercase.
    let about_a_thing = original
        .split(" is ")
        .next()
        .is_some_and(|s| !s.chars().any(char::is_uppercase));
    if event.ends_with(" is idle") || event == "idle" || has_any(&words, &["sleeping", "asleep"]) {
        1
    } else if has_any(&words, &["chat", "chatting", "conversing", "talking"]) {
        rng.random_range(5..=8)
    } else if announces_an_event(original) {
        // News of an event on a named day: something to plan around.
        rng.random_range(6..=8)
    } else if has_any(
        &words,
        &[
            "open mic", "party", "exam", "perform", "album", "song", "piano",
        ],
    ) {
        rng.random_range(4..=6)
    } else if has_any(&words, WORK_WORDS) {
        rng.random_range(3..=5)
    } else if about_a_thing {
        rng.random_range(1..=2)
    } else if has_any(
        &words,
        &[
            "breakfast",
            "lunch",
            "dinner",
            "coffee",
            "walk",
            "park",
            "pub",
            "drink",
            "groceries",
        ],
    ) {
        rng.random_range(3..=4)
    } else {
        rng.random_range(2..=4)
    }
}

/// Lean mode's ratings of a step's events: each numbered event rated as `event_poignancy`
/// rates it, as `{"ratings": [..]}`.
fn event_poignancies(text: &str, rng: &mut ScriptRng) -> String {
    let ratings: Vec<u8> = numbered_items(&block_after(text, "Events:"))
        .into_iter()
        .map(|event| event_poignancy(&format!("Event: {event}"), rng))
        .collect();
    json!({ "ratings": ratings }).to_string()
}

fn thought_poignancy(text: &str, rng: &mut ScriptRng) -> u8 {
    let thought = field(text, "Thought:").unwrap_or("").to_ascii_lowercase();
    if thought.contains("plan for") {
        5
    } else if thought.contains("follow up") || thought.contains("planning") {
        rng.random_range(5..=7)
    } else if thought.contains("interesting") || thought.contains("convers") {
        rng.random_range(4..=6)
    } else {
        rng.random_range(3..=5)
    }
}

// =============================================================================================
// Reacting and talking.

/// Whether an activity means the person is asleep or about to be.
fn is_asleep(activity: &str) -> bool {
    let lower = activity.to_ascii_lowercase();
    lower.contains("sleep") || lower.contains("asleep") || lower.contains("ready for bed")
}

/// Whether to start talking. The coin is seeded from the prompt text itself, so the scored
/// and the generated path agree.
fn decide_to_talk(seed: u64, text: &str) -> bool {
    let mut rng = ScriptRng::for_call(seed, "decide_to_talk", text.trim_end());
    let mut activities = text
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("Activity of "))
        .filter_map(|l| l.split_once(": ").map(|(_, a)| a));
    let (Some(mine), Some(theirs)) = (activities.next(), activities.next()) else {
        return false;
    };
    let hour = field(text, "Time:").and_then(first_hour_in).unwrap_or(12);
    let busy = |a: &str| {
        let lower = a.to_ascii_lowercase();
        is_asleep(a) || lower.contains("chat") || lower.contains("conversing")
    };
    if busy(mine) || busy(theirs) || !(7..22).contains(&hour) {
        return false;
    }
    let never = field(text, "Last conversation:").is_none_or(|l| l.eq_ignore_ascii_case("never"));
    rng.random_bool(if never { 0.75 } else { 0.45 })
}

fn decide_to_wait(text: &str) -> bool {
    let activities: Vec<&str> = text
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("Activity of "))
        .collect();
    let private = |a: &str| {
        let lower = a.to_ascii_lowercase();
        ["shower", "toilet", "bathroom"]
            .iter()
            .any(|w| lower.contains(w))
    };
    activities.len() >= 2 && activities.iter().all(|a| private(a))
}

fn relationship_summary(text: &str) -> String {
    let (me, partner) = between(text, "relationship between ", ", based")
        .and_then(|pair| pair.split_once(" and "))
        .map_or(("They", "each other"), |(a, b)| (a.trim(), b.trim()));
    let memories = numbered_items(&block_after(text, &format!("What {me} remembers:")));
    let partner_first = first_word(partner);
    let about: Vec<&&str> = memories
        .iter()
        .filter(|m| m.contains(partner_first))
        .collect();
    let talked = about.iter().find_map(|m| {
        let lower = m.to_ascii_lowercase();
        lower
            .find("conversing about ")
            .and_then(|at| m.get(at..))
            .or_else(|| lower.contains("follow up").then_some(**m))
    });
    match (talked, about.len()) {
        (Some(topic), _) => format!(
            "{me} and {partner} know each other from around town and have talked recently ({}).",
            topic.trim_end_matches('.')
        ),
        (None, 0) => {
            format!("{me} and {partner} are neighbours in town who barely know each other yet.")
        }
        (None, n) => format!(
            "{me} has often seen {partner} around town ({n} recent memories) but they have not talked much."
        ),
    }
}

/// The first sentence of `text`.
fn first_sentence(text: &str) -> &str {
    let text = text.trim();
    match text.find(". ") {
        Some(at) => text.get(..=at).unwrap_or(text),
        None => text,
    }
    .trim()
}

/// The speaker's `currently` as a first-person phrase without "I'm" ("planning a small
/// open-mic evening at the cafe and want to …"), for utterances.
fn topic_phrase(name: &str, currently: &str) -> Option<String> {
    let sentence = first_sentence(currently).trim_end_matches('.');
    let first = first_word(name);
    let rest = [name, first]
        .iter()
        .filter(|n| !n.is_empty())
        .find_map(|n| sentence.strip_prefix(n))
        .and_then(|r| r.trim_start().strip_prefix("is "))?;
    let mut out: Vec<String> = Vec::new();
    let words: Vec<&str> = rest.split_whitespace().collect();
    let mut i = 0;
    while let Some(word) = words.get(i) {
        let lower = word.to_ascii_lowercase();
        match lower.as_str() {
            "her" | "his" | "their" => out.push("my".to_string()),
            "she" | "he" => out.push("I".to_string()),
            "and" => {
                out.push("and".to_string());
                // "and is looking" → "and I'm looking"; "and wonders" → "and I wonder".
                if let Some(next) = words.get(i + 1) {
                    if *next == "is" {
                        out.push("I'm".to_string());
                        i += 1;
                    } else if next.len() > 3
                        && next.ends_with('s')
                        && !next.ends_with("ss")
                        && next.chars().all(|c| c.is_ascii_lowercase())
                    {
                        let stem = next
                            .strip_suffix("es")
                            .filter(|s| s.ends_with("sh") || s.ends_with("ch"))
                            .or_else(|| next.strip_suffix('s'))
                            .unwrap_or(next);
                        out.push("I".to_string());
                        out.push(stem.to_string());
                        i += 1;
                    }
                }
            }
            _ => out.push((*word).to_string()),
        }
        i += 1;
    }
    let phrase = out.join(" ");
    (!phrase.is_empty()).then_some(phrase)
}

/// The core of an activity ("serving customers at Riverside Cafe (…)" → "serving customers
/// at Riverside Cafe").
fn activity_core(activity: &str) -> &str {
    split_activity(activity).0.trim_end_matches('.')
}

/// The marker before a speaker's topic in an utterance; summaries look for it.
const TOPIC_MARKER: &str = "these days I'm ";

fn next_utterance(text: &str, rng: &mut ScriptRng) -> String {
    let me = field(text, "Name:").unwrap_or("").to_string();
    let partner = between(text, " say next to ", "?")
        .map_or("", str::trim)
        .to_string();
    let partner_first = first_word(&partner).to_string();
    let currently = field(text, "Currently:").unwrap_or("");
    let (my_activity, their_activity) = text
        .lines()
        .find_map(|l| {
            let rest = l.trim().strip_prefix(&format!("{me} is "))?;
            let (mine, theirs) = rest.split_once(&format!(". {partner} is "))?;
            Some((mine.to_string(), theirs.trim_end_matches('.').to_string()))
        })
        .unwrap_or_default();
    let hour = field(text, "Time:").and_then(first_hour_in).unwrap_or(12);
    let previous = field(text, "Their previous conversation:")
        .is_some_and(|p| !p.eq_ignore_ascii_case("none") && !p.is_empty());
    let said: Vec<&str> = text
        .lines()
        .skip_while(|l| l.trim() != "Conversation so far:")
        .skip(1)
        .take_while(|l| l.trim() != "---")
        .map(str::trim)
        .filter(|l| !l.is_empty() && *l != "(nothing said yet)")
        .collect();
    let turn = said.len();
    // The length is fixed by who talks and how it started, so every turn agrees on it.
    let mut names = [me.as_str(), partner.as_str()];
    names.sort_unstable();
    let opener = said.first().copied().unwrap_or("");
    let mut length_rng =
        ScriptRng::for_call(0, "conversation_length", &format!("{names:?}{opener}"));
    let length = length_rng.random_range(3..=6usize);
    let end = turn + 1 >= length;

    let greeting = match hour {
        0..=11 => "Good morning",
        12..=17 => "Good afternoon",
        _ => "Good evening",
    };
    let mine = activity_core(&my_activity);
    let theirs = activity_core(&their_activity);
    let topic = topic_phrase(&me, currently);
    let follow_up = between(currently, "follow up with ", ".")
        .map(|f| f.split(" at lunch").next().unwrap_or(f))
        .filter(|f| !partner_first.is_empty() && f.starts_with(&partner_first));
    let line = if end {
        let back = if mine.is_empty() { "my day" } else { mine };
        format!("It was good to talk, {partner_first}. I should get back to {back}. See you soon!")
    } else {
        match turn {
            0 => match follow_up.and_then(|f| f.split_once(" about ")) {
                Some((_, what)) => format!(
                    "{greeting}, {partner_first}! I was hoping to run into you. Any news about {}?",
                    what.trim_end_matches('.').replace(" their ", " your ")
                ),
                None if previous => format!(
                    "{greeting} again, {partner_first}! Still {}?",
                    if theirs.is_empty() { "busy" } else { theirs }
                ),
                None if theirs.is_empty() => format!("{greeting}, {partner_first}! How are you?"),
                None => format!("{greeting}, {partner_first}! How is {theirs} going?"),
            },
            1 => {
                let doing = if mine.is_empty() {
                    "It's going well, thanks.".to_string()
                } else {
                    format!("It's going well, thanks. I'm {mine}.")
                };
                match &topic {
                    Some(t) => format!("Hi {partner_first}! {doing} And {TOPIC_MARKER}{t}."),
                    None => format!("Hi {partner_first}! {doing}"),
                }
            }
            2 => match &topic {
                Some(t) => {
                    format!("That sounds exciting, {partner_first}! As for me, {TOPIC_MARKER}{t}.")
                }
                None => {
                    format!("That sounds lovely, {partner_first}. I've had a quiet day myself.")
                }
            },
            3 => {
                let places = [CAFE, PARK, PUB];
                let place = rng.pick(&places).copied().unwrap_or(CAFE);
                format!(
                    "I hope it goes well. Maybe we can talk more at {place} tomorrow, {partner_first}?"
                )
            }
            4 => format!("I'd like that, {partner_first}. Good luck with everything!"),
            _ => format!("Take care, {partner_first}!"),
        }
    };
    json!({ "utterance": line, "end": end }).to_string()
}

/// The transcript of a conversation prompt as `(speaker, line)` pairs.
fn transcript_lines(text: &str, a: &str, b: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|l| {
            let (who, line) = l.split_once(": ")?;
            let who = who.trim();
            let known = [a, b, first_word(a), first_word(b)].contains(&who);
            (known && !who.is_empty()).then(|| (who.to_string(), line.trim().to_string()))
        })
        .collect()
}

/// The topic `speaker` shared in a conversation (the phrase after [`TOPIC_MARKER`]).
fn shared_topic(lines: &[(String, String)], speaker: &str) -> Option<String> {
    lines
        .iter()
        .filter(|(who, _)| who == speaker || who == first_word(speaker))
        .find_map(|(_, line)| {
            let at = line.find(TOPIC_MARKER)? + TOPIC_MARKER.len();
            let phrase = line.get(at..)?.trim_end_matches(['.', '!', '?']);
            // The main clause is the topic: "planning a party and I want …" → "planning a party".
            let phrase = phrase.split(" and I").next().unwrap_or(phrase).trim();
            (!phrase.is_empty()).then(|| phrase.to_string())
        })
}

/// A first-person topic in the third person ("my novel" → "their novel").
fn third_person(phrase: &str) -> String {
    phrase
        .split_whitespace()
        .map(|w| match w {
            "my" => "their",
            "I'm" => "is",
            "I" => "they",
            other => other,
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A third-person topic as an -ing phrase: "being" goes before one that is not
/// ("stuck on a chapter" → "being stuck on a chapter").
fn gerund_phrase(topic: &str) -> String {
    let topic = third_person(topic);
    let gerund = topic
        .split_whitespace()
        .next()
        .is_some_and(|w| w.ends_with("ing"));
    if gerund {
        topic
    } else {
        format!("being {topic}")
    }
}

/// The two speakers of a conversation prompt.
fn speakers(text: &str) -> (String, String) {
    between(text, "Conversation between ", ":\n")
        .and_then(|pair| pair.split_once(" and "))
        .map(|(a, b)| (a.trim().to_string(), b.trim().to_string()))
        .unwrap_or_default()
}

fn conversation_summary(text: &str) -> String {
    let (a, b) = speakers(text);
    let lines = transcript_lines(text, &a, &b);
    let topics: Vec<String> = [&a, &b]
        .iter()
        .filter_map(|who| {
            let topic = shared_topic(&lines, who)?;
            Some(format!("{} {}", first_word(who), gerund_phrase(&topic)))
        })
        .collect();
    let topic = if topics.is_empty() {
        "how their day is going".to_string()
    } else {
        topics.join(" and ")
    };
    let topic: String = topic.chars().take(140).collect();
    format!("conversing about {}", topic.trim_end())
}

/// Which thought to write after a chat.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AfterChat {
    Planning,
    Memo,
}

fn after_chat(text: &str, which: AfterChat) -> String {
    let (me, partner) = speakers(text);
    let lines = transcript_lines(text, &me, &partner);
    let first = first_word(&me);
    let partner_first = first_word(&partner);
    let topic = shared_topic(&lines, &partner);
    match (which, topic) {
        (AfterChat::Planning, Some(t)) => {
            format!(
                "{first} should follow up with {partner} about {}.",
                gerund_phrase(&t)
            )
        }
        (AfterChat::Planning, None) => {
            format!("{first} should say hello to {partner} again soon.")
        }
        (AfterChat::Memo, Some(t)) => {
            format!(
                "{first} found it interesting that {partner_first} is {}.",
                third_person(&t)
            )
        }
        (AfterChat::Memo, None) => {
            format!("{first} enjoyed catching up with {partner_first}.")
        }
    }
}

/// Lean mode's thoughts after a chat: both sentences and their ratings, by the single
/// prompts' rules, as one JSON object.
fn after_chat_at_once(text: &str, rng: &mut ScriptRng) -> String {
    let (me, _) = speakers(text);
    let planning = after_chat(text, AfterChat::Planning);
    let memo = after_chat(text, AfterChat::Memo);
    let planning_importance =
        thought_poignancy(&format!("Thought: For {me}'s planning: {planning}"), rng);
    let memo_importance = thought_poignancy(&format!("Thought: {memo}"), rng);
    json!({
        "planning": planning,
        "planning_importance": planning_importance,
        "memo": memo,
        "memo_importance": memo_importance,
    })
    .to_string()
}

// =============================================================================================
// Reflecting.

/// Statements of a reflection prompt, numbered from 1.
fn statements(text: &str, header: &str) -> Vec<String> {
    numbered_items(&block_after(text, header))
        .into_iter()
        .map(str::to_string)
        .collect()
}

/// Someone the statements say the persona talked with or should follow up with.
fn someone_in(statements: &[String]) -> Option<String> {
    statements.iter().find_map(|s| {
        between(s, "follow up with ", " about")
            .or_else(|| between(s, "interesting that ", " is "))
            .map(|n| n.trim().to_string())
            .filter(|n| !n.is_empty() && n.split_whitespace().count() <= 3)
    })
}

fn focal_points(text: &str) -> String {
    let name = between(text, "Recent events and thoughts of ", ":")
        .unwrap_or("")
        .trim();
    let count = field(text, "Number of questions:")
        .and_then(|n| n.parse::<usize>().ok())
        .unwrap_or(3)
        .clamp(1, 10);
    let items = statements(text, &format!("Recent events and thoughts of {name}:"));
    let mut questions = Vec::new();
    if let Some(person) = someone_in(&items) {
        questions.push(format!("What does {name} think of {person}?"));
    }
    questions.extend([
        format!("What is {name} most focused on these days?"),
        format!("How does {name} balance work and time with other people?"),
        format!("What matters most to {name} right now?"),
        format!("How does {name} feel about daily life in town?"),
    ]);
    while questions.len() < count {
        questions.push(format!(
            "What else has {name} noticed today? ({})",
            questions.len() + 1
        ));
    }
    questions.truncate(count);
    numbered(&questions)
}

/// Insight themes: keywords, and the insight they support (see [`InsightTheme::insight`]).
const INSIGHT_THEMES: [(&[&str], InsightTheme); 5] = [
    (
        &["conversing", "chat", "talk", "follow up", "interesting"],
        InsightTheme::Social,
    ),
    (
        &[
            "serving",
            "teaching",
            "studying",
            "writing",
            "stocking",
            "working",
            "grading",
            "lecture",
            "customers",
            "novel",
            "class",
        ],
        InsightTheme::Work,
    ),
    (
        &[
            "breakfast",
            "lunch",
            "dinner",
            "cooking",
            "eating",
            "coffee",
        ],
        InsightTheme::Meals,
    ),
    (
        &["park", "walk", "pub", "piano", "drink", "bench"],
        InsightTheme::Unwinding,
    ),
    (&["plan for", "planning", "plan"], InsightTheme::Plans),
];

/// What an insight of [`INSIGHT_THEMES`] is about; its sentence is written only when some
/// statement supports it.
#[derive(Debug, Clone, Copy)]
enum InsightTheme {
    Social,
    Work,
    Meals,
    Unwinding,
    Plans,
}

impl InsightTheme {
    /// The insight about `name`, who talks with `person` (if the statements name someone).
    fn insight(self, name: &str, person: Option<&str>) -> String {
        match (self, person) {
            (Self::Social, Some(p)) => {
                format!("{name} is getting to know {p} better and enjoys their conversations")
            }
            (Self::Social, None) => {
                format!("{name} enjoys talking with people in town and keeps up with their news")
            }
            (Self::Work, _) => format!("{name} puts steady effort into work every day"),
            (Self::Meals, _) => format!("{name} keeps regular meal times and likes good food"),
            (Self::Unwinding, _) => format!("{name} likes to unwind around town after work"),
            (Self::Plans, _) => format!("{name} follows a clear plan for each day"),
        }
    }
}

fn insights(text: &str) -> String {
    insights_answer(text).to_string()
}

/// [`insights`] as JSON.
fn insights_answer(text: &str) -> serde_json::Value {
    let name = between(text, "Statements about ", ":").unwrap_or("").trim();
    let count = field(text, "Number of insights:")
        .and_then(|n| n.parse::<usize>().ok())
        .unwrap_or(5)
        .max(1);
    let items = statements(text, &format!("Statements about {name}:"));
    let person = someone_in(&items);
    let lowered: Vec<String> = items.iter().map(|s| s.to_ascii_lowercase()).collect();
    let mut out = Vec::new();
    for (keys, theme) in INSIGHT_THEMES {
        let evidence: Vec<usize> = lowered
            .iter()
            .enumerate()
            .filter(|(_, lower)| keys.iter().any(|k| lower.contains(k)))
            .map(|(i, _)| i + 1)
            .take(5)
            .collect();
        if !evidence.is_empty() {
            let insight = theme.insight(name, person.as_deref());
            out.push(json!({ "insight": insight, "evidence": evidence }));
        }
    }
    if out.is_empty() {
        let evidence: Vec<usize> = (1..=items.len().min(3)).collect();
        out.push(json!({
            "insight": format!("{name} has had a quiet, ordinary stretch of days"),
            "evidence": evidence,
        }));
    }
    out.truncate(count);
    json!({ "insights": out })
}

/// Lean mode's rated insights: [`insights`], each rated as `thought_poignancy` rates it.
fn rated_insights(text: &str, rng: &mut ScriptRng) -> String {
    let mut answer = insights_answer(text);
    if let Some(items) = answer
        .get_mut("insights")
        .and_then(serde_json::Value::as_array_mut)
    {
        for item in items {
            let thought = item["insight"].as_str().unwrap_or("").to_string();
            item["importance"] = json!(thought_poignancy(&format!("Thought: {thought}"), rng));
        }
    }
    answer.to_string()
}

// =============================================================================================
// The new day.

/// "I should follow up with X about Y" from the memories, in the first person.
fn follow_up_note(memories: &[String]) -> Option<String> {
    memories.iter().find_map(|m| {
        let at = m.find("should follow up with ")?;
        let rest = m.get(at..)?.trim_end_matches('.');
        Some(format!("I {}", rest.replace(" their ", " my ")))
    })
}

fn memories_of(text: &str) -> Vec<String> {
    let name = between(text, "What ", " remembers:").unwrap_or("").trim();
    statements(text, &format!("What {name} remembers:"))
}

fn plan_note(text: &str) -> String {
    let memories = memories_of(text);
    if let Some(outing) = announced_today(&memories, date_of(text)) {
        return outing.note();
    }
    if let Some(note) = follow_up_note(&memories) {
        return format!("{note} today, maybe over lunch at {CAFE}.");
    }
    let chatted = memories.iter().find_map(|m| {
        let at = m.find("interesting that ")? + "interesting that ".len();
        m.get(at..).map(|s| s.trim_end_matches('.').to_string())
    });
    match chatted {
        Some(what) => format!(
            "I want to hear more now that I know {what}. Otherwise I will keep to my routine today."
        ),
        None => {
            "I will keep to my routine today and try to talk with someone new at lunch.".to_string()
        }
    }
}

fn feelings(text: &str) -> String {
    let memories = memories_of(text);
    let chats = memories
        .iter()
        .filter(|m| {
            let lower = m.to_ascii_lowercase();
            lower.contains("conversing")
                || lower.contains("follow up")
                || lower.contains("interesting")
        })
        .count();
    match chats {
        0 => "I feel calm but a little lonely; I would like some company today.".to_string(),
        1 => "I feel good about the conversation I had recently, though I am a little tired."
            .to_string(),
        _ => "I feel connected after the conversations I have had lately, and I am curious to hear more."
            .to_string(),
    }
}

fn currently(text: &str, rng: &mut ScriptRng) -> String {
    let name = between(text, "Write ", "'s status").unwrap_or("").trim();
    let first = first_word(name);
    let previous = field(text, "Previous status:").unwrap_or("");
    let base = first_sentence(previous);
    let base = if base.is_empty() {
        format!("{name} lives in town.")
    } else if base.ends_with('.') {
        base.to_string()
    } else {
        format!("{base}.")
    };
    let notes = text
        .lines()
        .skip_while(|l| !l.starts_with("Notes "))
        .skip(1)
        .take(2)
        .collect::<Vec<_>>()
        .join(" ");
    let today = if let Some(outing) = Outing::from_note(&notes) {
        outing.status(first)
    } else if let Some(at) = notes.find("I should follow up with ") {
        let rest = notes
            .get(at + "I should ".len()..)
            .and_then(|r| r.split(" today").next())
            .unwrap_or("follow up with a friend");
        format!(
            "Today, {first} wants to {} at lunch at {CAFE}.",
            rest.replace(" my ", " their ")
        )
    } else {
        let wishes = [
            format!("hopes to meet someone new at {CAFE}"),
            format!("wants to take a long walk at {PARK}"),
            "plans to get a lot done at work".to_string(),
            format!("is looking forward to the evening at {PUB}"),
        ];
        let wish = rng.pick(&wishes).cloned().unwrap_or_default();
        format!("Today, {first} {wish}.")
    };
    format!("{base} {today}")
}

fn whisper(text: &str) -> String {
    let name = between(text, "statement about ", ", in the third person")
        .unwrap_or("")
        .trim();
    let whisper = field(text, "Whisper:").unwrap_or("");
    let rewritten = whisper
        .split_whitespace()
        .map(|w| match w.to_ascii_lowercase().as_str() {
            "you" => "they",
            "your" => "their",
            "yourself" => "themselves",
            "you're" => "they're",
            _ => w,
        })
        .collect::<Vec<_>>()
        .join(" ");
    format!(
        "{name} thinks that {}.",
        rewritten.trim_end_matches(['.', '!'])
    )
}

fn generic_json(text: &str) -> String {
    between(text, "shaped like this example:\n", "\n\n")
        .map(str::trim)
        .filter(|e| serde_json::from_str::<serde_json::Value>(e).is_ok())
        .unwrap_or("{}")
        .to_string()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::sync::Arc;

    use bevy::tasks::block_on;

    use super::*;

    use crate::cognition::prompts::*;
    use crate::llm::{ChatRequest, LlmClient};
    use crate::persona::{EventTriple, PersonaSheet, default_personas_dir, load_persona_sheets};
    use crate::prompt::{
        JsonQuestion, Prompt, PromptContext, PromptLibrary, clean_response, run_prompt,
    };
    use crate::settings::AgentSettings;

    /// The phrase search the script did before it stopped copying the phrase's words.
    fn contains_words_by_copy(haystack: &[String], needle: &str) -> bool {
        let needle = tokens(needle);
        !needle.is_empty()
            && haystack
                .windows(needle.len())
                .any(|w| w == needle.as_slice())
    }

    #[test]
    fn phrases_are_found_as_when_their_words_were_copied() {
        let texts = [
            "",
            "Ada is serving customers at the café",
            "ADA IS Serving   Customers, then a CLASS; straße Straße STRASSE",
            "open mic night at the pub: open-mic, OPEN MIC",
            "İstanbul ΟΔΥΣΣΕΥΣ odyssey café Café",
        ];
        let phrases = [
            "",
            " ",
            "--",
            "serving customers",
            "Serving Customers",
            "customers",
            "class",
            "open mic",
            "open mic night",
            "mic night at",
            "straße",
            "STRASSE",
            "café",
            "İstanbul",
            "ΟΔΥΣΣΕΥΣ",
            "οδυσσευσ",
            "at the pub open mic",
            "a",
            "is serving",
        ];
        for text in texts {
            let words = tokens(text);
            for phrase in phrases {
                assert_eq!(
                    contains_words(&words, phrase),
                    contains_words_by_copy(&words, phrase),
                    "{phrase:?} in {text:?}"
                );
            }
        }
        assert!(contains_words(&tokens("Open mic tonight"), "open MIC"));
    }

    const DATE: &str = "Monday February 13";

    fn context() -> PromptContext {
        let client = LlmClient::new(Arc::new(town_script_backend(7)));
        PromptContext::new(client, PromptLibrary::default())
    }

    /// Runs `prompt` and checks it parsed on the first try.
    fn run<P: Prompt>(ctx: &PromptContext, prompt: &P) -> P::Output {
        let outcome = block_on(run_prompt(ctx, prompt));
        assert!(!outcome.fail_safe, "{} fell back", prompt.kind());
        assert_eq!(outcome.attempts, 1, "{} needed retries", prompt.kind());
        outcome.value
    }

    /// No prompt of this context needed a retry or a fail-safe.
    fn assert_clean(ctx: &PromptContext) {
        let usage = ctx.client.usage();
        assert_eq!(usage.totals.fail_safes, 0, "{usage:?}");
        assert_eq!(usage.totals.retries, 0, "{usage:?}");
        assert!(usage.totals.calls > 0);
    }

    /// The free-generation answer parses to the same value as the scored choice.
    fn generated<P: Prompt>(prompt: &P) -> P::Output
    where
        P::Output: std::fmt::Debug,
    {
        let backend = town_script_backend(7);
        let request = prompt.request(&PromptLibrary::default()).expect("template");
        prompt
            .parse(&clean_response(&backend.answer(&request)))
            .expect("the generated answer parses")
    }

    fn sheet(first: &str) -> PersonaSheet {
        load_persona_sheets(default_personas_dir())
            .expect("sheets")
            .into_iter()
            .find(|s| s.first_name == first)
            .expect("persona")
    }

    fn identity(first: &str) -> String {
        sheet(first)
            .to_scratch(&AgentSettings::default())
            .identity_summary()
    }

    fn wake_up(ctx: &PromptContext, first: &str) -> u32 {
        let s = sheet(first);
        run(
            ctx,
            &WakeUpHour {
                identity: identity(first),
                lifestyle: s.lifestyle.clone(),
                first_name: s.first_name.clone(),
                fail_safe_hour: 8,
            },
        )
    }

    fn schedule(ctx: &PromptContext, first: &str) -> (u32, Vec<String>) {
        let s = sheet(first);
        let wake = wake_up(ctx, first);
        let plan = run(
            ctx,
            &DailyPlan {
                identity: identity(first),
                first_name: s.first_name.clone(),
                date_text: DATE.into(),
                wake_up_hour: wake,
                home: s.living_area.clone(),
                workplace: s.workplace.clone(),
            },
        );
        let hourly = run(
            ctx,
            &HourlySchedule {
                identity: identity(first),
                first_name: s.first_name.clone(),
                date_text: DATE.into(),
                home: s.living_area.clone(),
                workplace: s.workplace.clone(),
                daily_plan: plan,
                wake_up_hour: wake,
            },
        );
        (wake, hourly)
    }

    fn sectors() -> Vec<String> {
        [
            "Okafor house",
            "Reyes house",
            "Lindqvist house",
            "Riverside Cafe",
            "Copper Kettle Pub",
            "Maple Park",
            "Elm Street Grocery",
            "Northgate College",
        ]
        .map(String::from)
        .to_vec()
    }

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| (*s).to_string()).collect()
    }

    #[test]
    fn every_template_kind_has_a_scripted_answer() {
        let backend = town_script_backend(1);
        let library = PromptLibrary::default();
        let kinds: Vec<&str> = library.names().collect();
        assert!(kinds.len() >= 31, "{kinds:?}");
        for kind in kinds {
            let answer = backend.answer(&ChatRequest::new(kind, "Name: Nobody"));
            assert_ne!(
                answer,
                format!("(scripted answer for `{kind}`)"),
                "{kind} has no responder"
            );
        }
    }

    #[test]
    fn wake_up_hours_follow_the_lifestyle() {
        let ctx = context();
        for (first, hour) in [
            ("Mira", 6),
            ("Sam", 9),
            ("Elena", 8),
            ("Priya", 7),
            ("Tomas", 7),
        ] {
            assert_eq!(wake_up(&ctx, first), hour, "{first}");
        }
        assert_clean(&ctx);
    }

    #[test]
    fn daily_plan_is_a_believable_day() {
        let ctx = context();
        let s = sheet("Mira");
        let plan = run(
            &ctx,
            &DailyPlan {
                identity: identity("Mira"),
                first_name: "Mira".into(),
                date_text: DATE.into(),
                wake_up_hour: 6,
                home: s.living_area.clone(),
                workplace: s.workplace.clone(),
            },
        );
        assert!((5..=8).contains(&plan.len()), "{plan:?}");
        assert_eq!(plan[0], "open Riverside Cafe at 7:00 am");
        assert!(plan.iter().any(|i| i.starts_with("have lunch at the cafe")));
        assert!(plan.iter().any(|i| i.starts_with("cook and eat dinner")));
        assert_eq!(
            plan.last().map(String::as_str),
            Some("go to bed at 10:00 pm")
        );
        assert_clean(&ctx);
    }

    #[test]
    fn hourly_schedules_fit_each_persona() {
        let ctx = context();
        let at = |wake: u32, hours: &[String], hour: u32| hours[(hour - wake) as usize].clone();

        let (wake, mira) = schedule(&ctx, "Mira");
        assert_eq!((wake, mira.len()), (6, 18));
        assert!(
            mira[0].contains("morning routine with breakfast"),
            "{mira:?}"
        );
        assert_eq!(
            at(wake, &mira, 7),
            "opening Riverside Cafe and brewing the first coffee"
        );
        assert_eq!(at(wake, &mira, 9), "serving customers at Riverside Cafe");
        assert_eq!(at(wake, &mira, 12), "having lunch at the cafe");
        assert_eq!(
            at(wake, &mira, 18),
            "cooking and eating dinner in the kitchen at home"
        );
        assert_eq!(at(wake, &mira, 21), "getting ready for bed at home");
        assert_eq!(at(wake, &mira, 22), "sleeping");
        assert_eq!(at(wake, &mira, 23), "sleeping");
        let distinct: BTreeSet<&String> = mira.iter().collect();
        assert!(distinct.len() >= 5, "{distinct:?}");

        let (wake, tomas) = schedule(&ctx, "Tomas");
        assert_eq!(
            at(wake, &tomas, 8),
            "having breakfast in the kitchen at home"
        );
        assert_eq!(
            at(wake, &tomas, 9),
            "teaching a chemistry class in the classroom at Northgate College"
        );
        assert_eq!(
            at(wake, &tomas, 14),
            "grading lab reports in the office at Northgate College"
        );
        assert_eq!(at(wake, &tomas, 23), "sleeping");

        let (wake, sam) = schedule(&ctx, "Sam");
        assert_eq!(wake, 9);
        assert_eq!(at(wake, &sam, 10), "stocking shelves at Elm Street Grocery");
        assert_eq!(at(wake, &sam, 19), "playing the piano at the pub");
        assert_eq!(at(wake, &sam, 20), "playing the piano at the pub");
        assert_eq!(at(wake, &sam, 23), "getting ready for bed at home");

        let (wake, priya) = schedule(&ctx, "Priya");
        assert_eq!(
            at(wake, &priya, 10),
            "attending a chemistry lecture in the classroom at Northgate College"
        );
        assert_eq!(
            at(wake, &priya, 14),
            "studying chemistry in the library at Northgate College"
        );

        let (wake, elena) = schedule(&ctx, "Elena");
        assert_eq!(
            at(wake, &elena, 10),
            "writing the novel in the library at Northgate College"
        );
        assert_eq!(at(wake, &elena, 19), "taking an evening walk in the park");
        assert_clean(&ctx);
    }

    #[test]
    fn the_day_changes_with_the_date() {
        let profile = Profile::read(&identity("Tomas"), "Tomas");
        let days: BTreeSet<Vec<String>> = (13..20)
            .map(|d| {
                let day = DayChoices::draw(3, &profile, &format!("Monday February {d}"));
                day_blocks(&profile, day)
                    .into_iter()
                    .map(|(_, _, a)| a.ing)
                    .collect()
            })
            .collect();
        assert!(days.len() >= 2, "a week of identical days");
    }

    #[test]
    fn decompositions_sum_to_the_block_in_five_minute_steps() {
        let ctx = context();
        for (task, start, minutes) in [
            ("serving customers at Riverside Cafe", 480, 240),
            (
                "waking up and completing the morning routine at home",
                420,
                60,
            ),
            ("cooking and eating dinner in the kitchen at home", 1080, 60),
            ("juggling", 600, 47),
        ] {
            let steps = run(
                &ctx,
                &TaskDecomposition {
                    identity: identity("Mira"),
                    first_name: "Mira".into(),
                    date_text: DATE.into(),
                    schedule: vec![("sleeping".into(), start), (task.into(), minutes)],
                    task: task.into(),
                    start_minute: start,
                    duration: minutes,
                },
            );
            let total: u32 = steps.iter().map(|(_, m)| m).sum();
            assert_eq!(total, minutes, "{task}: {steps:?}");
            let (last, rest) = steps.split_last().expect("steps");
            assert!(rest.iter().all(|(_, m)| m % 5 == 0 && *m > 0), "{steps:?}");
            assert_eq!(last.1 % 5, minutes % 5);
            if minutes >= 60 {
                assert!(steps.len() >= 3, "{steps:?}");
            }
        }
        let routine = generated(&TaskDecomposition {
            task: "waking up and completing the morning routine at home".into(),
            duration: 60,
            first_name: "Mira".into(),
            ..Default::default()
        });
        assert_eq!(
            routine,
            vec![
                ("getting out of bed in the bedroom".to_string(), 20),
                ("taking a shower in the bathroom".to_string(), 20),
                ("brushing teeth at the sink in the bathroom".to_string(), 20),
            ]
        );
        assert_clean(&ctx);
    }

    #[test]
    fn a_chat_is_fitted_into_the_window() {
        let ctx = context();
        let items = vec![
            (
                "serving customers at Riverside Cafe (brewing coffee at the coffee machine)"
                    .to_string(),
                30,
            ),
            (
                "serving customers at Riverside Cafe (serving customers at the cafe counter)"
                    .to_string(),
                30,
            ),
        ];
        let window = run(
            &ctx,
            &NewDecompositionSchedule {
                first_name: "Mira".into(),
                date_text: DATE.into(),
                window_start_minute: 600,
                items,
                inserted: "chatting with Priya Natarajan".into(),
                insert_offset: 10,
                inserted_duration: 15,
            },
        );
        assert_eq!(
            window,
            vec![
                (
                    "serving customers at Riverside Cafe (brewing coffee at the coffee machine)"
                        .to_string(),
                    10
                ),
                ("chatting with Priya Natarajan".to_string(), 15),
                (
                    "getting back to serving customers at Riverside Cafe".to_string(),
                    5
                ),
                (
                    "serving customers at Riverside Cafe (brewing coffee at the coffee machine)"
                        .to_string(),
                    30
                ),
            ]
        );
        assert_clean(&ctx);
    }

    fn sector(name: &str, action: &str) -> ActionSector {
        let s = sheet(name);
        let home = s.living_area.split(':').nth(1).unwrap_or("").to_string();
        ActionSector {
            name: s.name.clone(),
            action: action.into(),
            living_sector: home.clone(),
            workplace_sector: s
                .workplace
                .as_deref()
                .and_then(|w| w.split(':').nth(1))
                .map(String::from),
            current_sector: home,
            options: sectors(),
            option_arenas: Vec::new(),
        }
    }

    #[test]
    fn actions_land_in_the_right_sector() {
        let ctx = context();
        for (who, action, expected) in [
            (
                "Mira",
                "waking up and completing the morning routine at home (taking a shower in the bathroom)",
                "Okafor house",
            ),
            ("Mira", "sleeping", "Okafor house"),
            (
                "Mira",
                "having breakfast in the kitchen at home (cooking at the stove in the kitchen)",
                "Okafor house",
            ),
            (
                "Mira",
                "serving customers at Riverside Cafe",
                "Riverside Cafe",
            ),
            ("Mira", "working", "Riverside Cafe"),
            (
                "Tomas",
                "having lunch at Riverside Cafe (ordering lunch at the cafe counter)",
                "Riverside Cafe",
            ),
            (
                "Tomas",
                "teaching a chemistry class in the classroom at Northgate College (lecturing at the lectern in the classroom)",
                "Northgate College",
            ),
            ("Tomas", "sleeping", "Reyes house"),
            (
                "Sam",
                "buying groceries at Elm Street Grocery (paying at the cash register)",
                "Elm Street Grocery",
            ),
            ("Priya", "going for a stroll", "Maple Park"),
            ("Elena", "having a drink with friends", "Copper Kettle Pub"),
        ] {
            let prompt = sector(who, action);
            assert_eq!(run(&ctx, &prompt), expected, "{who}: {action}");
            assert_eq!(generated(&prompt), expected, "{who}: {action} (generated)");
        }
        assert_clean(&ctx);
    }

    #[test]
    fn actions_land_in_the_right_arena_and_object() {
        let ctx = context();
        let house_arenas = strings(&["bedroom", "kitchen", "bathroom"]);
        let college = strings(&["classroom", "library", "dorm room", "office"]);
        let cafe = strings(&["cafe", "cafe kitchen"]);
        for (sector_name, action, options, expected) in [
            (
                "Okafor house",
                "waking up and completing the morning routine at home (taking a shower in the bathroom)",
                &house_arenas,
                "bathroom",
            ),
            (
                "Okafor house",
                "waking up and completing the morning routine at home (getting dressed at the closet in the bedroom)",
                &house_arenas,
                "bedroom",
            ),
            (
                "Okafor house",
                "having breakfast in the kitchen at home",
                &house_arenas,
                "kitchen",
            ),
            ("Okafor house", "sleeping", &house_arenas, "bedroom"),
            (
                "Riverside Cafe",
                "baking pastries and cleaning up at Riverside Cafe (baking pastries at the stove in the cafe kitchen)",
                &cafe,
                "cafe kitchen",
            ),
            (
                "Riverside Cafe",
                "having lunch at Riverside Cafe",
                &cafe,
                "cafe",
            ),
            (
                "Northgate College",
                "teaching a chemistry class in the classroom at Northgate College",
                &college,
                "classroom",
            ),
            (
                "Northgate College",
                "grading lab reports in the office at Northgate College",
                &college,
                "office",
            ),
            (
                "Northgate College",
                "studying chemistry in the library at Northgate College",
                &college,
                "library",
            ),
        ] {
            let prompt = ActionArena {
                name: "Mira Okafor".into(),
                action: action.into(),
                sector: sector_name.into(),
                living_arena: "bedroom".into(),
                options: options.clone(),
            };
            assert_eq!(run(&ctx, &prompt), expected, "{action}");
            assert_eq!(generated(&prompt), expected, "{action} (generated)");
        }

        let bedroom = strings(&["bed", "desk", "closet"]);
        let bathroom = strings(&["shower", "sink", "toilet"]);
        let kitchen = strings(&["stove", "refrigerator", "kitchen counter", "dining table"]);
        let cafe_objects = strings(&[
            "cafe counter",
            "coffee machine",
            "customer table",
            "bookshelf",
        ]);
        let bar = strings(&["bar counter", "pub table", "dartboard", "piano"]);
        let park = strings(&["bench", "fountain", "garden", "pond"]);
        let store = strings(&["shelf", "cash register", "produce stand"]);
        for (action, options, expected) in [
            ("sleeping", &bedroom, "bed"),
            (
                "waking up and completing the morning routine at home (getting out of bed in the bedroom)",
                &bedroom,
                "bed",
            ),
            (
                "waking up and completing the morning routine at home (taking a shower in the bathroom)",
                &bathroom,
                "shower",
            ),
            (
                "getting ready for bed at home (brushing teeth at the sink in the bathroom)",
                &bathroom,
                "sink",
            ),
            (
                "cooking and eating dinner in the kitchen at home (eating at the dining table in the kitchen)",
                &kitchen,
                "dining table",
            ),
            (
                "having breakfast in the kitchen at home",
                &kitchen,
                "dining table",
            ),
            (
                "serving customers at Riverside Cafe (brewing coffee at the coffee machine)",
                &cafe_objects,
                "coffee machine",
            ),
            (
                "serving customers at Riverside Cafe",
                &cafe_objects,
                "cafe counter",
            ),
            ("playing the piano at Copper Kettle Pub", &bar, "piano"),
            (
                "meeting friends for a drink at Copper Kettle Pub (ordering a drink at the bar counter)",
                &bar,
                "bar counter",
            ),
            (
                "taking a walk at Maple Park (sitting on a bench in the park)",
                &park,
                "bench",
            ),
            (
                "buying groceries at Elm Street Grocery (paying at the cash register)",
                &store,
                "cash register",
            ),
        ] {
            let prompt = ActionObject {
                name: "Mira Okafor".into(),
                action: action.into(),
                place: "somewhere".into(),
                options: options.clone(),
                seed: 0,
            };
            assert_eq!(run(&ctx, &prompt), expected, "{action}");
            assert_eq!(generated(&prompt), expected, "{action} (generated)");
        }
        assert_clean(&ctx);
    }

    #[test]
    fn emoji_triples_and_object_states() {
        let ctx = context();
        let shower = "waking up and completing the morning routine at home (taking a shower in the bathroom)";
        assert_eq!(
            run(
                &ctx,
                &ActionEmoji {
                    action: shower.into()
                }
            ),
            "🚿"
        );
        assert_eq!(
            run(
                &ctx,
                &ActionEmoji {
                    action: "sleeping".into()
                }
            ),
            "😴"
        );
        assert_eq!(
            run(
                &ctx,
                &ActionEventTriple {
                    name: "Mira Okafor".into(),
                    action: shower.into(),
                }
            ),
            EventTriple::new("Mira Okafor", "taking", "a shower")
        );
        assert_eq!(
            run(
                &ctx,
                &ActionEventTriple {
                    name: "Mira Okafor".into(),
                    action: "having breakfast in the kitchen at home (cooking at the stove in the kitchen)".into(),
                }
            ),
            EventTriple::new("Mira Okafor", "cooking", "the stove")
        );
        assert_eq!(
            run(
                &ctx,
                &ActionEventTriple {
                    name: "Sam Lindqvist".into(),
                    action: "sleeping".into(),
                }
            ),
            EventTriple::new("Sam Lindqvist", "is", "sleeping")
        );
        let state = run(
            &ctx,
            &ObjectDescription {
                name: "Mira Okafor".into(),
                object: "coffee machine".into(),
                action:
                    "serving customers at Riverside Cafe (brewing coffee at the coffee machine)"
                        .into(),
            },
        );
        assert_eq!(state, "coffee machine is brewing coffee");
        assert_eq!(
            run(
                &ctx,
                &ObjectEmoji {
                    object_state: state.clone()
                }
            ),
            "☕"
        );
        let address = "Willowbrook:Riverside Cafe:cafe:coffee machine";
        assert_eq!(
            run(
                &ctx,
                &ObjectEventTriple {
                    object_address: address.into(),
                    object_name: "coffee machine".into(),
                    object_state: state,
                }
            ),
            EventTriple::new(address, "brewing", "coffee")
        );
        assert_eq!(
            run(
                &ctx,
                &ObjectEventTriple {
                    object_address: "W:Okafor house:bedroom:bed".into(),
                    object_name: "bed".into(),
                    object_state: "bed is being slept in".into(),
                }
            ),
            EventTriple::new("W:Okafor house:bedroom:bed", "is", "being slept in")
        );
        assert_clean(&ctx);
    }

    #[test]
    fn poignancy_tells_chats_from_routine() {
        let ctx = context();
        let event = |e: &str| {
            run(
                &ctx,
                &EventPoignancy {
                    identity: identity("Mira"),
                    first_name: "Mira".into(),
                    event: e.into(),
                },
            )
        };
        for i in 0..6 {
            let chat = event(&format!("Priya Natarajan is conversing about topic {i}"));
            assert!((5..=8).contains(&chat), "{chat}");
            let thing = event(&format!("bed is being slept in {i}"));
            assert!((1..=2).contains(&thing), "{thing}");
            let work = event(&format!(
                "Sam Lindqvist is stocking shelves at Elm Street Grocery {i}"
            ));
            assert!((3..=5).contains(&work), "{work}");
        }
        assert_eq!(event("Mira Okafor is sleeping"), 1);
        let chat = run(
            &ctx,
            &ChatPoignancy {
                identity: identity("Mira"),
                first_name: "Mira".into(),
                conversation: "Mira: Hi!\nPriya: Hello!".into(),
            },
        );
        assert!((5..=8).contains(&chat));
        let plan = run(
            &ctx,
            &ThoughtPoignancy {
                identity: identity("Mira"),
                first_name: "Mira".into(),
                thought: "This is Mira Okafor's plan for Monday February 13: …".into(),
            },
        );
        assert_eq!(plan, 5);
        assert_clean(&ctx);
    }

    /// A persona's own actions over a scripted day add up past the 150-point reflection trigger.
    #[test]
    fn a_day_of_events_crosses_the_reflection_trigger() {
        let ctx = context();
        let (wake, hours) = schedule(&ctx, "Mira");
        let mut total = 0u32;
        for (hour, task) in (wake..).zip(hours.iter()) {
            let steps = if task == "sleeping" {
                vec![(task.clone(), 60)]
            } else {
                run(
                    &ctx,
                    &TaskDecomposition {
                        identity: identity("Mira"),
                        first_name: "Mira".into(),
                        date_text: DATE.into(),
                        schedule: vec![],
                        task: task.clone(),
                        start_minute: hour * 60,
                        duration: 60,
                    },
                )
            };
            for (step, _) in steps {
                let rating = run(
                    &ctx,
                    &EventPoignancy {
                        identity: identity("Mira"),
                        first_name: "Mira".into(),
                        event: format!("Mira Okafor is {}", subtask_description(task, &step)),
                    },
                );
                total += u32::from(rating);
            }
        }
        assert!(total >= 150, "only {total} poignancy over a day");
        assert_clean(&ctx);
    }

    fn talk(time: &str, mine: &str, theirs: &str, last: Option<&str>) -> DecideToTalk {
        DecideToTalk {
            name: "Mira Okafor".into(),
            partner: "Priya Natarajan".into(),
            time_text: time.into(),
            place: "Riverside Cafe, cafe".into(),
            activity: mine.into(),
            partner_activity: theirs.into(),
            memories: vec!["Priya Natarajan is having lunch at Riverside Cafe".into()],
            last_chat: last.map(String::from),
        }
    }

    #[test]
    fn awake_neighbours_often_talk() {
        let ctx = context();
        let serving = "serving customers at Riverside Cafe";
        let lunch = "having lunch at Riverside Cafe";
        let mut yes = 0;
        for minute in (8 * 60..21 * 60).step_by(20) {
            let time = clock_text(minute);
            let prompt = talk(&time, serving, lunch, None);
            let answer = run(&ctx, &prompt);
            assert_eq!(answer, generated(&prompt));
            yes += usize::from(answer);
            assert!(!run(&ctx, &talk(&time, serving, "sleeping", None)));
        }
        assert!(yes >= 20, "only {yes} of 39 chances taken");
        assert!(!run(&ctx, &talk("10:30 pm", serving, lunch, None)));
        assert!(!run(&ctx, &talk("6:00 am", serving, lunch, None)));
        let wait = DecideToReact {
            name: "Mira Okafor".into(),
            partner: "Tomas Reyes".into(),
            time_text: "7:00 am".into(),
            place: "Reyes house, bathroom".into(),
            activity: "taking a shower in the bathroom".into(),
            partner_activity: "taking a shower in the bathroom".into(),
            memories: vec![],
        };
        assert_eq!(run(&ctx, &wait), ReactChoice::Wait);
        assert_eq!(generated(&wait), ReactChoice::Wait);
        let go_on = DecideToReact {
            activity: serving.into(),
            ..wait
        };
        assert_eq!(run(&ctx, &go_on), ReactChoice::KeepGoing);
        assert_clean(&ctx);
    }

    #[test]
    fn a_conversation_runs_its_course_and_is_remembered() {
        let ctx = context();
        let people = [
            (
                "Mira Okafor",
                "serving customers at Riverside Cafe (serving customers at the cafe counter)",
                "Mira",
            ),
            (
                "Priya Natarajan",
                "having lunch at Riverside Cafe (eating lunch at a customer table)",
                "Priya",
            ),
        ];
        let mut lines: Vec<(String, String)> = Vec::new();
        let mut ended = false;
        for turn in 0..16 {
            let (me, mine, first) = people[turn % 2];
            let (partner, theirs, _) = people[(turn + 1) % 2];
            let utterance = run(
                &ctx,
                &NextUtterance {
                    identity: identity(first),
                    name: me.into(),
                    partner: partner.into(),
                    time_text: "12:20 pm".into(),
                    place: "Riverside Cafe, cafe".into(),
                    activity: mine.into(),
                    partner_activity: theirs.into(),
                    relationship: "They know each other a little.".into(),
                    memories: vec![],
                    previous_chat: None,
                    conversation: lines.clone(),
                },
            );
            lines.push((me.to_string(), utterance.text));
            if utterance.end {
                ended = true;
                break;
            }
        }
        assert!(ended, "{lines:?}");
        assert!((3..=6).contains(&lines.len()), "{lines:?}");
        assert_eq!(
            lines[0].1,
            "Good afternoon, Priya! How is having lunch at Riverside Cafe going?"
        );
        assert!(
            lines[1]
                .1
                .starts_with("Hi Mira! It's going well, thanks. I'm having lunch")
        );
        assert!(
            lines[1]
                .1
                .contains("these days I'm studying for a chemistry exam"),
            "{lines:?}"
        );
        assert!(
            lines
                .last()
                .is_some_and(|(_, l)| l.contains("It was good to talk"))
        );

        let summary = run(
            &ctx,
            &ConversationSummary {
                name: "Mira Okafor".into(),
                partner: "Priya Natarajan".into(),
                conversation: lines.clone(),
            },
        );
        assert!(summary.starts_with("conversing about "), "{summary}");
        assert!(
            summary.contains("Priya studying for a chemistry exam"),
            "{summary}"
        );

        let planning = run(
            &ctx,
            &PlanningThoughtAfterChat {
                name: "Mira Okafor".into(),
                partner: "Priya Natarajan".into(),
                conversation: lines.clone(),
            },
        );
        assert_eq!(
            planning,
            "Mira should follow up with Priya Natarajan about studying for a chemistry exam."
        );
        let memo = run(
            &ctx,
            &MemoAfterChat {
                name: "Mira Okafor".into(),
                partner: "Priya Natarajan".into(),
                conversation: lines,
            },
        );
        assert_eq!(
            memo,
            "Mira found it interesting that Priya is studying for a chemistry exam."
        );
        let relationship = run(
            &ctx,
            &RelationshipSummary {
                name: "Mira Okafor".into(),
                partner: "Priya Natarajan".into(),
                memories: vec![
                    "Priya Natarajan is conversing about Priya studying for a chemistry exam"
                        .into(),
                ],
            },
        );
        assert!(relationship.contains("talked recently"), "{relationship}");
        assert_clean(&ctx);
    }

    #[test]
    fn reflection_questions_and_insights_cite_real_statements() {
        let ctx = context();
        let statements = strings(&[
            "Mira Okafor is serving customers at Riverside Cafe",
            "Mira should follow up with Priya Natarajan about studying for a chemistry exam.",
            "Mira Okafor is having lunch at Riverside Cafe",
            "coffee machine is brewing coffee",
        ]);
        let questions = run(
            &ctx,
            &FocalPoints {
                name: "Mira Okafor".into(),
                statements: statements.clone(),
                count: 3,
            },
        );
        assert_eq!(questions.len(), 3);
        assert_eq!(
            questions[0],
            "What does Mira Okafor think of Priya Natarajan?"
        );
        let insights = run(
            &ctx,
            &InsightsWithEvidence {
                name: "Mira Okafor".into(),
                statements: statements.clone(),
                count: 5,
                rated: false,
            },
        );
        assert!(!insights.is_empty() && insights.len() <= 5);
        assert!(insights.iter().all(|i| !i.evidence.is_empty()
            && i.evidence.iter().all(|e| *e < statements.len())));
        assert_eq!(insights[0].evidence, vec![1]);
        assert!(insights[0].text.contains("Priya Natarajan"));
        let none = run(
            &ctx,
            &InsightsWithEvidence {
                name: "Mira Okafor".into(),
                statements: vec![],
                count: 5,
                rated: false,
            },
        );
        assert_eq!(none.len(), 1);
        // Rated (lean mode's one pass): the same insights, each with its rating.
        let rated = run(
            &ctx,
            &InsightsWithEvidence {
                name: "Mira Okafor".into(),
                statements: statements.clone(),
                count: 5,
                rated: true,
            },
        );
        assert_eq!(
            rated.iter().map(|i| &i.text).collect::<Vec<_>>(),
            insights.iter().map(|i| &i.text).collect::<Vec<_>>()
        );
        assert!(
            rated
                .iter()
                .all(|i| i.poignancy.is_some_and(|p| (1..=10).contains(&p)))
        );
        assert!(none[0].evidence.is_empty());
        assert_clean(&ctx);
    }

    #[test]
    fn identity_revision_carries_yesterday_into_today() {
        let ctx = context();
        let memories = strings(&[
            "This is Mira Okafor's plan for Monday February 13: open the cafe",
            "For Mira's planning: Mira should follow up with Priya Natarajan about studying for a chemistry exam.",
            "Mira found it interesting that Priya is studying for a chemistry exam.",
        ]);
        let date = "Tuesday February 14";
        let note = run(
            &ctx,
            &ReviseIdentityPlanNote {
                name: "Mira Okafor".into(),
                date_text: date.into(),
                memories: memories.clone(),
            },
        );
        assert_eq!(
            note,
            "I should follow up with Priya Natarajan about studying for a chemistry exam today, maybe over lunch at the cafe."
        );
        let feelings = run(
            &ctx,
            &ReviseIdentityFeelings {
                name: "Mira Okafor".into(),
                date_text: date.into(),
                memories,
            },
        );
        assert!(feelings.starts_with("I feel connected"), "{feelings}");
        let previous = sheet("Mira").currently;
        let currently = run(
            &ctx,
            &ReviseIdentityCurrently {
                name: "Mira Okafor".into(),
                date_text: date.into(),
                previous: previous.clone(),
                plan_note: note,
                feelings: feelings.clone(),
            },
        );
        assert_eq!(
            currently,
            format!(
                "{previous} Today, Mira wants to follow up with Priya Natarajan about studying for a chemistry exam at lunch at the cafe."
            )
        );
        // A quiet day still changes the status, and the status does not grow day after day.
        let quiet = run(
            &ctx,
            &ReviseIdentityCurrently {
                name: "Mira Okafor".into(),
                date_text: "Wednesday February 15".into(),
                previous: currently.clone(),
                plan_note: "I will keep to my routine today.".into(),
                feelings,
            },
        );
        assert_ne!(quiet, currently);
        assert!(quiet.starts_with(&previous), "{quiet}");
        assert_eq!(quiet.matches("Today,").count(), 1);

        let s = sheet("Mira");
        let identity = identity("Mira").replace(&previous, &currently);
        let goals = run(
            &ctx,
            &ReviseIdentityDailyReq {
                identity,
                first_name: "Mira".into(),
                date_text: date.into(),
                wake_up_hour: 6,
                home: s.living_area.clone(),
                workplace: s.workplace.clone(),
            },
        );
        assert!((4..=6).contains(&goals.len()), "{goals:?}");
        assert!(
            goals
                .iter()
                .any(|g| g.contains("catch up with Priya Natarajan")),
            "{goals:?}"
        );
        assert_clean(&ctx);
    }

    #[test]
    fn whispers_and_json_questions() {
        let ctx = context();
        let thought = run(
            &ctx,
            &WhisperThought {
                name: "Sam Lindqvist".into(),
                whisper: "you should play your new song tonight".into(),
            },
        );
        assert_eq!(
            thought,
            "Sam Lindqvist thinks that they should play their new song tonight."
        );
        let example = json!({"mood": "happy", "score": 3});
        let answer = run(
            &ctx,
            &JsonQuestion {
                task: "How is the town?".into(),
                example: example.clone(),
                required_keys: vec!["mood".into()],
            },
        );
        assert_eq!(answer, Some(example));
        assert_clean(&ctx);
    }

    #[test]
    fn text_helpers() {
        assert_eq!(split_minutes(60, 3), vec![20, 20, 20]);
        assert_eq!(split_minutes(47, 3), vec![15, 15, 17]);
        assert_eq!(split_minutes(10, 6), vec![5, 5]);
        assert_eq!(split_minutes(3, 2), vec![3]);
        assert_eq!(
            wake_and_bed("goes to bed around 1 am, wakes up around 9 am"),
            (9, 25)
        );
        assert_eq!(
            wake_and_bed("goes to bed around midnight, wakes up around 8 am"),
            (8, 24)
        );
        assert_eq!(wake_and_bed("loves mornings"), (7, 23));
        assert_eq!(
            work_hours("opens the cafe at 7 am. serves customers until 3 pm"),
            (Some(7), Some(15))
        );
        assert_eq!(work_hours("works from 10 am to 5 pm"), (Some(10), Some(17)));
        assert_eq!(
            topic_phrase(
                "Sam Lindqvist",
                "Sam Lindqvist is writing a new song and wonders whether to perform it."
            )
            .as_deref(),
            Some("writing a new song and I wonder whether to perform it")
        );
        assert_eq!(
            topic_phrase(
                "Elena Reyes",
                "Elena Reyes is stuck on the last chapter of her mystery novel and is looking for inspiration."
            )
            .as_deref(),
            Some("stuck on the last chapter of my mystery novel and I'm looking for inspiration")
        );
        assert_eq!(split_activity("a (b)"), ("a", Some("b")));
        assert_eq!(split_activity("a (b) c"), ("a (b) c", None));
        assert_eq!(
            best_mention("the cafe kitchen", &strings(&["cafe", "cafe kitchen"])),
            Some(1)
        );
        assert_eq!(best_mention("the bedroom", &strings(&["bed"])), None);
    }

    /// A choice prompt's answer through the scored path of a client over the town script.
    fn chosen<P: Prompt<Output = String>>(ctx: &PromptContext, prompt: &P) -> String {
        run(ctx, prompt)
    }

    #[test]
    fn choices_use_the_maps_own_words_whatever_the_option_order() {
        let ctx = context();
        let object = |action: &str, options: &[&str]| ActionObject {
            name: "Bram Visser".into(),
            action: action.into(),
            place: "Visser cottage, bedroom".into(),
            options: strings(options),
            seed: 0,
        };
        // Sleeping goes to the bed by any name, never to the last option.
        for options in [
            ["washstand", "cot", "wardrobe"],
            ["wardrobe", "washstand", "cot"],
            ["cot", "wardrobe", "washstand"],
        ] {
            assert_eq!(chosen(&ctx, &object("sleeping", &options)), "cot");
            assert_eq!(generated(&object("sleeping", &options)), "cot");
        }
        // Lunch goes to the place named most like a cafe, by the rule's order, not the list's.
        let sector = |options: &[&str]| ActionSector {
            name: "Bram Visser".into(),
            action: "having lunch at the cafe".into(),
            living_sector: "Visser cottage".into(),
            workplace_sector: Some("Fish Market".into()),
            current_sector: "Fish Market".into(),
            options: strings(options),
            option_arenas: Vec::new(),
        };
        let town = [
            "Visser cottage",
            "Harbour Bakery",
            "Gull Tearoom",
            "Fish Market",
        ];
        let mut reversed = town;
        reversed.reverse();
        assert_eq!(chosen(&ctx, &sector(&town)), "Gull Tearoom");
        assert_eq!(chosen(&ctx, &sector(&reversed)), "Gull Tearoom");
        // A tie (two bakeries) is broken by name, so the order does not matter either.
        let twins = ["Harbour Bakery", "Visser cottage", "Mill Bakery"];
        let mut twins_reversed = twins;
        twins_reversed.reverse();
        let pick = chosen(&ctx, &sector(&twins));
        assert!(pick.ends_with("Bakery"), "{pick}");
        assert_eq!(chosen(&ctx, &sector(&twins_reversed)), pick);
        // A walk never ends in somebody's house, and a lighthouse is no house.
        let walk = ActionSector {
            action: "taking a walk in the park".into(),
            ..sector(&["Quill cottage", "Lighthouse Green", "Fish Market"])
        };
        assert_eq!(chosen(&ctx, &walk), "Lighthouse Green");
        assert_eq!(ctx.client.usage().totals.guesses, 0);
        assert_clean(&ctx);
    }

    #[test]
    fn a_guess_is_counted_and_still_an_option() {
        let ctx = context();
        let prompt = ActionObject {
            name: "Bram Visser".into(),
            action: "sleeping".into(),
            place: "Visser cottage, bedroom".into(),
            options: strings(&["zorvel", "quimp"]),
            seed: 0,
        };
        let first = chosen(&ctx, &prompt);
        assert!(prompt.options.contains(&first));
        let swapped = ActionObject {
            options: strings(&["quimp", "zorvel"]),
            ..prompt.clone()
        };
        assert_eq!(chosen(&ctx, &swapped), first);
        assert_eq!(ctx.client.usage().kind("action_object").guesses, 2);
        let backend = town_script_backend(1);
        let request = prompt.request(&PromptLibrary::default()).expect("template");
        assert!(prompt.options.contains(&backend.answer(&request)));
        assert_eq!(backend.guesses(), 1);
    }

    #[test]
    fn the_job_is_the_personas_own_not_the_familys() {
        let identity = "Name: Bram Visser\nLearned traits: Bram Visser is a fishmonger who sells \
                        the catch. His wife Anna Visser is a teacher at the school.\n\
                        Daily plan requirement: Bram Visser sells fish until 1 pm.\n\
                        Home: Visser cottage, bedroom\nWorkplace: Fish Market, market hall\n";
        let bram = Profile::read(identity, "Bram");
        assert_eq!(bram.job, Job::Trade("fishmonger".into()));
        assert_eq!(bram.home_arena, "bedroom");
        let hour = activity_at(&bram, DayChoices::draw(1, &bram, DATE), 10);
        assert_eq!(
            hour.ing,
            "working as a fishmonger in the market hall at Fish Market"
        );
        assert_eq!(
            trade_of("Otto is a retired sailor who mends nets."),
            Some("sailor".into())
        );
        assert_eq!(trade_of("Otto mends nets."), None);
    }

    #[test]
    fn the_stand_ins_reply_says_who_and_what_from_the_observation_line_only() {
        let prompt = "Identity: Elena Reyes is stuck on her novel and is looking for ideas.\n\
                      You are Elena Reyes, talking with Player.\n\
                      Elena does not know Player yet.\n\
                      Elena is at Town:Reyes house:bedroom and is sleeping.\n\
                      Now: Monday February 13, 07:09";
        let reply: serde_json::Value = serde_json::from_str(&dialogue_reply(prompt)).expect("JSON");
        assert_eq!(
            reply["message"],
            "Hello! I'm Elena Reyes, and right now I'm sleeping."
        );
        // Without the observation line: a short stand-in, never the prompt.
        let reply: serde_json::Value = serde_json::from_str(&dialogue_reply(
            "Identity.\nYou are Ada, talking with Player.\n",
        ))
        .expect("JSON");
        assert_eq!(reply["message"], "Hello! I'm Ada, and right now I'm busy.");
    }
}
