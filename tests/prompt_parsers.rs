//! Every parser that reads model text is total: arbitrary strings — unicode, megabytes, broken
//! JSON, `<think>` blocks, code fences — give `Ok` or `Err`, never a panic, and every `Ok`
//! satisfies the prompt's invariants (a poignancy is in 1..=10, a choice is one of the options,
//! a decomposition sums to its block, …). Well-formed answers are also checked to parse to the
//! value they state, so the invariants cannot hold vacuously.
//!
//! Covered: `Prompt::parse` of every typed prompt in `cognition::prompts` (and
//! `prompt::JsonQuestion`), the `prompt` helpers (`parse_int_in_range`, `parse_yes_no`,
//! `parse_choice`, `bounded_text`), cleaning (`clean_response`, `extract_json`), and template
//! filling (`PromptTemplate`, `PromptLibrary`) — including every prompt's `request` with
//! arbitrary inputs.

use bevy_generative_agents::cognition::prompts::{
    ActionArena, ActionDetails, ActionEmoji, ActionEventTriple, ActionObject, ActionPlace,
    ActionSector, AfterChat, ChatPoignancy, ConversationSummary, DailyPlan, DecideToReact,
    DecideToTalk, EventPoignancies, EventPoignancy, FocalPoints, HourlySchedule,
    InsightsWithEvidence, MemoAfterChat, NewDecompositionSchedule, NextUtterance,
    ObjectDescription, ObjectEmoji, ObjectEventTriple, PlanningThoughtAfterChat, ReactChoice,
    RelationshipSummary, ReviseIdentityCurrently, ReviseIdentityDailyReq, ReviseIdentityFeelings,
    ReviseIdentityPlanNote, TaskDecomposition, ThoughtPoignancy, UsedObject, WakeUpHour,
    WhisperThought, insert_into_window,
};
use bevy_generative_agents::persona::EventTriple;
use bevy_generative_agents::prompt::{
    HEADER_MARKER, JsonQuestion, Prompt, PromptLibrary, PromptTemplate, TemplateError,
    bounded_text, clean_response, extract_json, parse_choice, parse_int_in_range, parse_yes_no,
};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------------
// Arbitrary model output

/// Pieces models really produce, plus the characters that break naive slicing.
const PIECES: &[&str] = &[
    "<think>",
    "</think>",
    "<THINK>",
    "</Think>",
    "```",
    "```json\n",
    "\n```",
    "{",
    "}",
    "[",
    "]",
    "\"",
    "\\",
    "\\\"",
    ",",
    ":",
    "\n",
    "\r\n",
    "\t",
    " ",
    "-",
    "–",
    "1) ",
    "2. ",
    "(3) ",
    "- ",
    "* ",
    "• ",
    "{\"utterance\": \"Morning, Sam!\", \"end\": false}",
    "{\"utterance\": \"\", \"end\": \"maybe\"}",
    "{\"insights\": [{\"insight\": \"Mira loves mornings\", \"evidence\": [1, 99, 0, 1]}]}",
    "[{\"text\": \"x\", \"evidence\": [\"2\"]}]",
    "[\"Why?\", \"Who?\", \"How?\"]",
    "[\"Mira Okafor\", \"is\", \"brewing coffee\"]",
    "{\"a\": {\"b\": [1, 2, {\"c\": null}]}}",
    "(duration in minutes: ",
    "duration in minutes:",
    ", minutes left: ",
    " min)",
    "minutes",
    "am",
    "pm",
    "a.m.",
    "7:30 ",
    "12:00 am: ",
    "0630",
    "23:59",
    "Rating: ",
    "0",
    "10",
    "11",
    "24",
    "5",
    "-1",
    "1440",
    "rating",
    "Option 1",
    "option 2",
    "option1",
    "yes",
    "No",
    "TRUE",
    "wait",
    "keep going",
    "continue",
    "conversing about ",
    "talking about",
    "discussed",
    "(because of 1, 3)",
    "(because of 999999999999999999999)",
    "Answer:",
    "answer: ",
    "Summary:",
    "Mira Okafor",
    "Mira is ",
    "Mira: ",
    "wake up and complete the morning routine at 6:00 am",
    "cafe",
    "Cafe Kitchen",
    "bar",
    "coffee machine",
    "The coffee machine is ",
    "brewing coffee",
    "(Mira Okafor, is, ",
    ")",
    "🙂",
    "☕",
    "👩‍🍳",
    "👍🏽",
    "\u{200D}",
    "\u{FE0F}",
    "1\u{20E3}",
    "\u{E0067}",
    "é",
    "日本語",
    "İ",
    "ß",
    "\u{0}",
    "\u{FEFF}",
    "\u{202E}",
];

fn fragment() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => select(PIECES).prop_map(str::to_owned),
        1 => "[0-9]{1,25}",
        1 => "-[0-9]{1,4}",
        1 => "\\PC{0,12}",
        1 => any::<char>().prop_map(String::from),
    ]
}

/// Short answers around a number, biased to the edges of every numeric range the parsers
/// check (ratings 1..=10, hours 0..=23, minutes).
fn number_answer() -> impl Strategy<Value = String> {
    let edges: &[i64] = &[-1, 0, 1, 5, 9, 10, 11, 12, 13, 23, 24, 59, 60, 99, 1440];
    let number = prop_oneof![3 => select(edges), 1 => -30i64..1500];
    (select(PIECES), number, select(PIECES), any::<bool>()).prop_map(|(a, n, b, bare)| {
        if bare {
            n.to_string()
        } else {
            format!("{a}{n}{b}")
        }
    })
}

/// Model output without the huge case, for inputs that are copied many times over.
fn short_text() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => vec(fragment(), 0..12).prop_map(|v| v.concat()),
        1 => any::<String>(),
    ]
}

/// Model output: mostly sequences of realistic pieces, sometimes arbitrary unicode, and now and
/// then tens of kilobytes (past every parser's scan bound).
fn model_text() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => vec(fragment(), 0..40).prop_map(|v| v.concat()),
        2 => any::<String>(),
        1 => (vec(fragment(), 1..6), 5_000usize..40_000).prop_map(|(pieces, size)| {
            let unit = pieces.concat();
            if unit.is_empty() {
                return String::new();
            }
            unit.repeat(size / unit.len() + 1)
        }),
    ]
}

// ---------------------------------------------------------------------------------------------
// Invariant checks

fn chars(s: &str) -> usize {
    s.chars().count()
}

/// Free text as `free_text`/`bounded_text` leave it: non-empty, single-spaced, trimmed, bounded.
fn check_free_text(kind: &str, s: &str, max: usize) -> Result<(), TestCaseError> {
    prop_assert!(!s.is_empty(), "{kind}: empty text accepted");
    prop_assert!(chars(s) <= max, "{kind}: {} chars > {max}", chars(s));
    prop_assert_eq!(s.trim(), s, "{}: untrimmed text", kind);
    prop_assert!(
        !s.chars().any(|c| c.is_whitespace() && c != ' ') && !s.contains("  "),
        "{kind}: whitespace not collapsed: {s:?}"
    );
    Ok(())
}

/// A list item: non-empty and bounded.
fn check_items(kind: &str, items: &[String], max_chars: usize) -> Result<(), TestCaseError> {
    for item in items {
        prop_assert!(!item.trim().is_empty(), "{kind}: empty item in {items:?}");
        prop_assert!(chars(item) <= max_chars, "{kind}: item too long: {item:?}");
    }
    Ok(())
}

fn is_emoji_modifier(c: char) -> bool {
    matches!(c as u32, 0x200D | 0xFE0E | 0xFE0F | 0x20E3 | 0x1F3FB..=0x1F3FF | 0xE0020..=0xE007F)
}

/// 1–3 emoji clusters and nothing else: no ASCII (letters, digits, punctuation), spaces or
/// control characters. (Symbols such as 🅰 count as emoji even though Unicode calls them
/// alphabetic.)
fn check_emoji(kind: &str, s: &str) -> Result<(), TestCaseError> {
    prop_assert!(!s.is_empty(), "{kind}: empty emoji");
    prop_assert!(
        s.chars()
            .all(|c| !c.is_ascii() && !c.is_whitespace() && !c.is_control()),
        "{kind}: text in emoji {s:?}"
    );
    let mut clusters = 0;
    let mut previous = None;
    for c in s.chars() {
        if !is_emoji_modifier(c) && previous != Some('\u{200D}') {
            clusters += 1;
        }
        previous = Some(c);
    }
    prop_assert!(
        (1..=3).contains(&clusters),
        "{kind}: {clusters} emoji in {s:?}"
    );
    Ok(())
}

fn check_triple(kind: &str, t: &EventTriple, subject: &str) -> Result<(), TestCaseError> {
    prop_assert_eq!(t.subject.as_deref(), Some(subject), "{}: subject", kind);
    let predicate = t.predicate.as_deref().unwrap_or("");
    let object = t.object.as_deref().unwrap_or("");
    prop_assert!(!predicate.is_empty(), "{kind}: empty predicate");
    prop_assert!(
        chars(predicate) <= 40 && predicate.split_whitespace().count() <= 5,
        "{kind}: predicate is not a short verb: {predicate:?}"
    );
    prop_assert!(!object.is_empty(), "{kind}: empty object");
    prop_assert!(chars(object) <= 80, "{kind}: object too long: {object:?}");
    Ok(())
}

/// Step lists: every step named, positive, a multiple of 5 except perhaps the last, and the
/// whole summing to `total`.
fn check_steps(kind: &str, steps: &[(String, u32)], total: u32) -> Result<(), TestCaseError> {
    prop_assert!(!steps.is_empty(), "{kind}: no steps");
    let sum: u64 = steps.iter().map(|(_, m)| u64::from(*m)).sum();
    prop_assert_eq!(sum, u64::from(total), "{}: steps {:?}", kind, steps);
    for (text, minutes) in steps {
        prop_assert!(!text.trim().is_empty(), "{kind}: unnamed step in {steps:?}");
        prop_assert!(*minutes > 0, "{kind}: zero-minute step in {steps:?}");
    }
    Ok(())
}

fn check_decomposition_steps(steps: &[(String, u32)], total: u32) -> Result<(), TestCaseError> {
    check_steps("task_decomposition", steps, total)?;
    let last = steps.len() - 1;
    for (i, (text, minutes)) in steps.iter().enumerate() {
        prop_assert!(chars(text) <= 120, "step too long: {text:?}");
        if i < last || total.is_multiple_of(5) {
            prop_assert_eq!(minutes % 5, 0, "step {} of {:?} is not 5-minute", i, steps);
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The prompts, built with realistic inputs

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

fn conversation() -> Vec<(String, String)> {
    vec![
        ("Mira Okafor".into(), "Morning, Sam! Coffee?".into()),
        (
            "Sam Lindqvist".into(),
            "Please — the usual. Are you coming to the open mic?".into(),
        ),
    ]
}

const IDENTITY: &str = "Name: Mira Okafor\nAge: 34\nInnate traits: warm, early riser\n\
                        Currently: Mira runs the Riverside Cafe and plans an open mic night.";

fn wake_up() -> WakeUpHour {
    WakeUpHour {
        identity: IDENTITY.into(),
        lifestyle: "Mira goes to bed around 10 pm and wakes up around 5 am.".into(),
        first_name: "Mira".into(),
        fail_safe_hour: 8,
    }
}

fn daily_plan() -> DailyPlan {
    DailyPlan {
        identity: IDENTITY.into(),
        first_name: "Mira".into(),
        date_text: "Monday February 13".into(),
        wake_up_hour: 5,
        home: "Willowbrook:Okafor house:bedroom".into(),
        workplace: Some("Willowbrook:Riverside Cafe:cafe".into()),
    }
}

fn hourly(wake_up_hour: u32) -> HourlySchedule {
    HourlySchedule {
        identity: IDENTITY.into(),
        first_name: "Mira".into(),
        date_text: "Monday February 13".into(),
        home: "Willowbrook:Okafor house:bedroom".into(),
        workplace: Some("Willowbrook:Riverside Cafe:cafe".into()),
        daily_plan: strings(&["open the cafe at 6:00 am", "lunch at 12:00 pm"]),
        wake_up_hour,
    }
}

fn decomposition(duration: u32) -> TaskDecomposition {
    TaskDecomposition {
        identity: IDENTITY.into(),
        first_name: "Mira".into(),
        date_text: "Monday February 13".into(),
        schedule: vec![
            ("sleeping".into(), 300),
            ("opening the cafe".into(), 60),
            ("serving customers".into(), 240),
        ],
        task: "opening the cafe".into(),
        start_minute: 300,
        duration,
    }
}

fn new_decomposition(insert_offset: u32, inserted_duration: u32) -> NewDecompositionSchedule {
    NewDecompositionSchedule {
        first_name: "Mira".into(),
        date_text: "Monday February 13".into(),
        window_start_minute: 600,
        items: vec![
            ("serving customers (taking orders)".into(), 30),
            ("serving customers (brewing coffee)".into(), 25),
            ("serving customers (wiping tables)".into(), 65),
        ],
        inserted: "chatting with Sam Lindqvist about the open mic".into(),
        insert_offset,
        inserted_duration,
    }
}

fn sector() -> ActionSector {
    ActionSector {
        name: "Mira Okafor".into(),
        action: "serving customers (brewing coffee)".into(),
        living_sector: "Okafor house".into(),
        workplace_sector: Some("Riverside Cafe".into()),
        current_sector: "Okafor house".into(),
        options: strings(&[
            "Okafor house",
            "Riverside Cafe",
            "Maple Park",
            "Copper Kettle Pub",
        ]),
        option_arenas: Vec::new(),
    }
}

fn arena() -> ActionArena {
    ActionArena {
        name: "Mira Okafor".into(),
        action: "serving customers (brewing coffee)".into(),
        sector: "Riverside Cafe".into(),
        living_arena: "bedroom".into(),
        options: strings(&["cafe", "cafe kitchen"]),
    }
}

fn object() -> ActionObject {
    ActionObject {
        name: "Mira Okafor".into(),
        action: "serving customers (brewing coffee)".into(),
        place: "Riverside Cafe, cafe".into(),
        options: strings(&[
            "cafe counter",
            "coffee machine",
            "customer table",
            "bookshelf",
        ]),
        seed: 11,
    }
}

fn object_description() -> ObjectDescription {
    ObjectDescription {
        name: "Mira Okafor".into(),
        object: "coffee machine".into(),
        action: "serving customers (brewing coffee)".into(),
    }
}

fn object_triple() -> ObjectEventTriple {
    ObjectEventTriple {
        object_address: "Willowbrook:Riverside Cafe:cafe:coffee machine".into(),
        object_name: "coffee machine".into(),
        object_state: "coffee machine is brewing coffee".into(),
    }
}

fn next_utterance() -> NextUtterance {
    NextUtterance {
        identity: IDENTITY.into(),
        name: "Mira Okafor".into(),
        partner: "Sam Lindqvist".into(),
        time_text: "7:30 am".into(),
        place: "Riverside Cafe, cafe".into(),
        activity: "serving customers".into(),
        partner_activity: "drinking coffee".into(),
        relationship: "Mira and Sam are old friends.".into(),
        memories: strings(&["Sam plays the piano at the pub"]),
        previous_chat: None,
        conversation: conversation(),
    }
}

fn statements() -> Vec<String> {
    strings(&[
        "Mira Okafor is brewing coffee",
        "Sam Lindqvist is playing the piano",
        "Mira Okafor plans an open mic night",
        "Ana Reyes is reading at the library",
    ])
}

fn daily_req() -> ReviseIdentityDailyReq {
    ReviseIdentityDailyReq {
        identity: IDENTITY.into(),
        first_name: "Mira".into(),
        date_text: "Tuesday February 14".into(),
        wake_up_hour: 5,
        home: "Willowbrook:Okafor house:bedroom".into(),
        workplace: Some("Willowbrook:Riverside Cafe:cafe".into()),
    }
}

fn json_question() -> JsonQuestion {
    JsonQuestion {
        task: "Name the cafe's busiest hour.".into(),
        example: json!({"hour": 8, "reason": "commuters"}),
        required_keys: strings(&["hour", "reason"]),
    }
}

// ---------------------------------------------------------------------------------------------
// Every parser on one text

/// Runs every parser on `text` and checks each `Ok` against its prompt's invariants.
fn check_every_parser(text: &str, duration: u32) -> Result<(), TestCaseError> {
    // Planning.
    if let Ok(hour) = wake_up().parse(text) {
        prop_assert!(hour <= 23, "wake-up hour {hour}");
    }
    if let Ok(items) = daily_plan().parse(text) {
        prop_assert!(
            (DailyPlan::MIN_ITEMS..=DailyPlan::MAX_ITEMS).contains(&items.len()),
            "daily plan of {} items",
            items.len()
        );
        check_items("daily_plan", &items, 150)?;
        for item in &items {
            let lower = item.to_ascii_lowercase();
            prop_assert!(
                !lower.starts_with("wake up") && !lower.contains("morning routine"),
                "wake-up item kept: {item:?}"
            );
        }
    }
    for wake in [0, 6, 23] {
        if let Ok(schedule) = hourly(wake).parse(text) {
            prop_assert_eq!(schedule.len() as u32, 24 - wake, "hourly schedule length");
            check_items("hourly_schedule", &schedule, 120)?;
        }
    }
    for total in [duration, 60, 7] {
        let prompt = decomposition(total);
        if let Ok(steps) = prompt.parse(text) {
            check_decomposition_steps(&steps, total)?;
        }
    }
    for (offset, length) in [(10, 20), (0, 5), (100, 60), (200, 30)] {
        let prompt = new_decomposition(offset, length);
        let fail_safe = prompt.fail_safe();
        let total = prompt.total();
        if let Ok(schedule) = prompt.parse(text) {
            check_steps("new_decomposition_schedule", &schedule, total)?;
            // The part up to and including the inserted action is fixed.
            let fixed = fail_safe
                .iter()
                .position(|(task, _)| *task == prompt.inserted)
                .map_or(fail_safe.len(), |i| i + 1);
            prop_assert!(schedule.len() >= fixed, "fixed part lost: {schedule:?}");
            prop_assert_eq!(
                &schedule[..fixed],
                &fail_safe[..fixed],
                "fixed part changed"
            );
        }
    }

    // Grounding.
    let sector = sector();
    if let Ok(choice) = sector.parse(text) {
        prop_assert!(sector.options.contains(&choice), "sector {choice:?}");
    }
    let arena = arena();
    if let Ok(choice) = arena.parse(text) {
        prop_assert!(arena.options.contains(&choice), "arena {choice:?}");
    }
    let object = object();
    if let Ok(choice) = object.parse(text) {
        prop_assert!(object.options.contains(&choice), "object {choice:?}");
    }
    let no_options = ActionObject {
        options: Vec::new(),
        ..object
    };
    prop_assert!(no_options.parse(text).is_err(), "chose among no options");
    let action_emoji = ActionEmoji {
        action: "brewing coffee".into(),
    };
    if let Ok(emoji) = action_emoji.parse(text) {
        check_emoji("action_emoji", &emoji)?;
    }
    let object_emoji = ObjectEmoji {
        object_state: "coffee machine is brewing coffee".into(),
    };
    if let Ok(emoji) = object_emoji.parse(text) {
        check_emoji("object_emoji", &emoji)?;
    }
    let action_triple = ActionEventTriple {
        name: "Mira Okafor".into(),
        action: "serving customers (brewing coffee)".into(),
    };
    if let Ok(triple) = action_triple.parse(text) {
        check_triple("action_event_triple", &triple, "Mira Okafor")?;
    }
    let object_triple = object_triple();
    if let Ok(triple) = object_triple.parse(text) {
        check_triple(
            "object_event_triple",
            &triple,
            &object_triple.object_address,
        )?;
    }
    if let Ok(description) = object_description().parse(text) {
        let state = description.strip_prefix("coffee machine is ");
        prop_assert!(state.is_some(), "description {description:?}");
        let state = state.unwrap_or_default();
        prop_assert!(
            !state.trim().is_empty() && chars(state) <= 80,
            "object state {state:?}"
        );
    }

    // Poignancy.
    let event = EventPoignancy {
        identity: IDENTITY.into(),
        first_name: "Mira".into(),
        event: "Sam Lindqvist is playing the piano".into(),
    };
    let chat = ChatPoignancy {
        identity: IDENTITY.into(),
        first_name: "Mira".into(),
        conversation: "Mira: Coffee?\nSam: Please.".into(),
    };
    let thought = ThoughtPoignancy {
        identity: IDENTITY.into(),
        first_name: "Mira".into(),
        thought: "Mira wants to host an open mic night".into(),
    };
    for poignancy in [event.parse(text), chat.parse(text), thought.parse(text)]
        .into_iter()
        .flatten()
    {
        prop_assert!((1..=10).contains(&poignancy), "poignancy {poignancy}");
    }

    // Reacting and talking.
    let talk = DecideToTalk {
        name: "Mira Okafor".into(),
        partner: "Sam Lindqvist".into(),
        time_text: "7:30 am".into(),
        place: "Riverside Cafe, cafe".into(),
        activity: "serving customers".into(),
        partner_activity: "drinking coffee".into(),
        memories: statements(),
        last_chat: None,
    };
    let lower = text.to_lowercase();
    match talk.parse(text) {
        Ok(true) => prop_assert!(lower.contains("yes") || lower.contains("true")),
        Ok(false) => prop_assert!(lower.contains("no") || lower.contains("false")),
        Err(_) => {}
    }
    let react = DecideToReact {
        name: "Mira Okafor".into(),
        partner: "Sam Lindqvist".into(),
        time_text: "7:30 am".into(),
        place: "Okafor house, bathroom".into(),
        activity: "taking a shower".into(),
        partner_activity: "taking a shower".into(),
        memories: Vec::new(),
    };
    match react.parse(text) {
        Ok(ReactChoice::Wait) => {
            prop_assert!(lower.contains("option") || lower.contains('1') || lower.contains("wait"))
        }
        Ok(ReactChoice::KeepGoing) => prop_assert!(
            lower.contains("option")
                || lower.contains('2')
                || lower.contains("keep going")
                || lower.contains("continue")
        ),
        Err(_) => {}
    }
    let relationship = RelationshipSummary {
        name: "Mira Okafor".into(),
        partner: "Sam Lindqvist".into(),
        memories: statements(),
    };
    if let Ok(summary) = relationship.parse(text) {
        check_free_text("relationship_summary", &summary, 400)?;
    }
    if let Ok(utterance) = next_utterance().parse(text) {
        check_free_text("next_utterance", &utterance.text, NextUtterance::MAX_CHARS)?;
    }
    let summary = ConversationSummary {
        name: "Mira Okafor".into(),
        partner: "Sam Lindqvist".into(),
        conversation: conversation(),
    };
    if let Ok(summary) = summary.parse(text) {
        let topic = summary.strip_prefix("conversing about ");
        prop_assert!(topic.is_some(), "summary {summary:?}");
        let topic = topic.unwrap_or_default();
        prop_assert!(!topic.trim().is_empty(), "empty topic");
        prop_assert!(chars(topic) <= ConversationSummary::MAX_TOPIC_CHARS);
    }
    let planning = PlanningThoughtAfterChat {
        name: "Mira Okafor".into(),
        partner: "Sam Lindqvist".into(),
        conversation: conversation(),
    };
    if let Ok(note) = planning.parse(text) {
        check_free_text("planning_thought_after_chat", &note, 300)?;
    }
    let memo = MemoAfterChat {
        name: "Mira Okafor".into(),
        partner: "Sam Lindqvist".into(),
        conversation: conversation(),
    };
    if let Ok(note) = memo.parse(text) {
        check_free_text("memo_after_chat", &note, 300)?;
    }

    // Reflection.
    for count in [0, 1, 3] {
        let focal = FocalPoints {
            name: "Mira Okafor".into(),
            statements: statements(),
            count,
        };
        if let Ok(questions) = focal.parse(text) {
            prop_assert_eq!(questions.len(), count, "focal points");
            check_items("focal_points", &questions, 300)?;
        }
    }
    for count in [1, 5] {
        let insights = InsightsWithEvidence {
            name: "Mira Okafor".into(),
            statements: statements(),
            count,
            rated: count == 5,
        };
        if let Ok(found) = insights.parse(text) {
            prop_assert!(
                (1..=count).contains(&found.len()),
                "{} insights",
                found.len()
            );
            for insight in &found {
                prop_assert!(!insight.text.trim().is_empty() && chars(&insight.text) <= 300);
                for (i, index) in insight.evidence.iter().enumerate() {
                    prop_assert!(*index < insights.statements.len(), "evidence {index}");
                    prop_assert!(
                        !insight.evidence[..i].contains(index),
                        "repeated evidence {:?}",
                        insight.evidence
                    );
                }
            }
        }
    }

    // Identity and whispers.
    let plan_note = ReviseIdentityPlanNote {
        name: "Mira Okafor".into(),
        date_text: "Tuesday February 14".into(),
        memories: statements(),
    };
    if let Ok(note) = plan_note.parse(text) {
        check_free_text("revise_identity_plan_note", &note, 600)?;
    }
    let feelings = ReviseIdentityFeelings {
        name: "Mira Okafor".into(),
        date_text: "Tuesday February 14".into(),
        memories: statements(),
    };
    if let Ok(note) = feelings.parse(text) {
        check_free_text("revise_identity_feelings", &note, 600)?;
    }
    let currently = ReviseIdentityCurrently {
        name: "Mira Okafor".into(),
        date_text: "Tuesday February 14".into(),
        previous: "Mira runs the Riverside Cafe.".into(),
        plan_note: "I will rehearse.".into(),
        feelings: "I feel excited.".into(),
    };
    if let Ok(status) = currently.parse(text) {
        check_free_text("revise_identity_currently", &status, 600)?;
    }
    if let Ok(goals) = daily_req().parse(text) {
        prop_assert!(
            (ReviseIdentityDailyReq::MIN_ITEMS..=ReviseIdentityDailyReq::MAX_ITEMS)
                .contains(&goals.len()),
            "{} goals",
            goals.len()
        );
        check_items("revise_identity_daily_req", &goals, 150)?;
    }
    let whisper = WhisperThought {
        name: "Mira Okafor".into(),
        whisper: "you want to open a bakery".into(),
    };
    if let Ok(thought) = whisper.parse(text) {
        check_free_text("whisper_thought", &thought, 300)?;
    }

    // Game code's one-off JSON questions.
    if let Ok(value) = json_question().parse(text) {
        let object = value.as_ref().and_then(Value::as_object);
        prop_assert!(object.is_some(), "not an object: {value:?}");
        let object = object.cloned().unwrap_or_default();
        prop_assert!(object.contains_key("hour") && object.contains_key("reason"));
    }
    Ok(())
}

/// Checks on the shared helpers for one text.
fn check_helpers(text: &str) -> Result<(), TestCaseError> {
    let cleaned = clean_response(text);
    prop_assert_eq!(cleaned.trim(), cleaned.as_str(), "cleaned text is trimmed");
    prop_assert!(
        !cleaned.to_ascii_lowercase().contains("<think>"),
        "a <think> tag survived: {cleaned:?}"
    );
    prop_assert!(
        !cleaned.to_ascii_lowercase().contains("<prestart"),
        "a <prestart> tag survived: {cleaned:?}"
    );
    // Only think and prestart tags and fences are cleaned away.
    let lower = text.to_ascii_lowercase();
    if !lower.contains("think") && !lower.contains("prestart") && !text.contains("```") {
        prop_assert_eq!(cleaned.as_str(), text.trim(), "clean text was changed");
    }

    if let Some(value) = extract_json(text) {
        prop_assert!(value.is_object() || value.is_array(), "extracted {value:?}");
    }
    if !text.contains(['{', '[']) {
        prop_assert!(extract_json(text).is_none());
    }

    for (min, max) in [(1, 10), (0, 23), (-5, 5), (i64::MIN, i64::MAX)] {
        if let Ok(value) = parse_int_in_range(text, min, max) {
            prop_assert!(
                (min..=max).contains(&value),
                "{value} outside {min}..={max}"
            );
        }
    }
    if !text.chars().any(|c| c.is_ascii_digit()) {
        prop_assert!(parse_int_in_range(text, i64::MIN, i64::MAX).is_err());
    }
    let lower = text.to_lowercase();
    match parse_yes_no(text) {
        Ok(true) => prop_assert!(lower.contains("yes") || lower.contains("true")),
        Ok(false) => prop_assert!(lower.contains("no") || lower.contains("false")),
        Err(_) => {}
    }
    let options = ["cafe", "cafe kitchen", "bar", "日本語", ""];
    if let Ok(index) = parse_choice(text, &options) {
        prop_assert!(index < options.len() && !options[index].is_empty());
    }
    prop_assert!(parse_choice(text, &[] as &[&str]).is_err());
    for max in [1, 10, 300] {
        if let Ok(bounded) = bounded_text(text, max) {
            prop_assert!(!bounded.is_empty() && chars(&bounded) <= max);
            prop_assert!(!bounded.starts_with(' ') && !bounded.contains("  "));
            prop_assert!(!bounded.chars().any(|c| c.is_whitespace() && c != ' '));
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 64,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Every prompt parser, on raw text and on text as `run_prompt` hands it over (cleaned).
    #[test]
    fn every_prompt_parser_is_total_and_keeps_its_invariants(
        text in model_text(),
        duration in 1u32..=1440,
    ) {
        check_every_parser(&text, duration)?;
        check_every_parser(&clean_response(&text), duration)?;
    }

    /// Short numeric answers, where range checks matter most.
    #[test]
    fn short_numeric_answers_keep_invariants(text in number_answer(), duration in 1u32..=1440) {
        check_every_parser(&text, duration)?;
        check_helpers(&text)?;
    }

    /// The shared helpers: cleaning, JSON extraction, numbers, yes/no, choices, bounded text.
    #[test]
    fn helpers_are_total(text in model_text()) {
        check_helpers(&text)?;
    }

    /// Well-formed answers with prose and reasoning around them parse to what they state.
    #[test]
    fn well_formed_answers_parse_to_their_values(
        think in "[a-z ,.?]{0,40}",
        rating in 1u8..=10,
        hour in 0u32..=23,
        option in 0usize..4,
        steps in vec(("[a-z]{1,8}( [a-z]{1,8}){0,3}", 1u32..=90), 1..8),
    ) {
        let wrap = |answer: String| clean_response(&format!("<think>{think}</think>\n{answer}"));

        let poignancy = EventPoignancy::default();
        for out_of_range in ["0", "11", "-3", "Rating: 0", "none"] {
            prop_assert!(poignancy.parse(out_of_range).is_err(), "{out_of_range}");
        }
        for not_an_hour in ["24", "-1", "13 pm", "0 am", "early"] {
            prop_assert!(wake_up().parse(not_an_hour).is_err(), "{not_an_hour}");
        }
        prop_assert_eq!(poignancy.parse(&wrap(format!("Rating: {rating}"))), Ok(rating));
        prop_assert_eq!(wake_up().parse(&wrap(format!("{hour}:00"))), Ok(hour));

        let sector = sector();
        let answer = wrap(format!("```\n{}\n```", sector.options[option]));
        prop_assert_eq!(sector.parse(&answer), Ok(sector.options[option].clone()));

        // Durations that already sum to the block are kept exactly.
        let total: u32 = steps.iter().map(|(_, m)| m * 5).sum();
        let lines: Vec<String> = steps
            .iter()
            .enumerate()
            .map(|(i, (text, m))| format!("{}) {text} (duration in minutes: {})", i + 1, m * 5))
            .collect();
        let prompt = decomposition(total);
        let expected: Vec<(String, u32)> =
            steps.iter().map(|(text, m)| (text.clone(), m * 5)).collect();
        prop_assert_eq!(prompt.parse(&wrap(lines.join("\n"))), Ok(expected));

        let utterance = next_utterance()
            .parse(&wrap("{\"utterance\": \"Mira Okafor: See you tonight!\", \"end\": \"yes\"}".into()));
        prop_assert_eq!(
            utterance.map(|u| (u.text, u.end)),
            Ok(("See you tonight!".to_owned(), true))
        );
    }

    /// JSON embedded in prose without brackets is found and equals what was embedded.
    #[test]
    fn embedded_json_is_extracted(
        before in "[^\\[{]{0,40}",
        after in "\\PC{0,40}",
        keys in vec(("[a-z]{1,6}", any::<i32>(), "\\PC{0,10}"), 0..5),
    ) {
        let value: Value = keys
            .iter()
            .map(|(k, n, s)| (k.clone(), json!([n, s, {"nested": [s]}])))
            .collect::<serde_json::Map<_, _>>()
            .into();
        let text = format!("{before}{value}{after}");
        prop_assert_eq!(extract_json(&text), Some(value));
    }

    /// A number in prose is found when in range and rejected outside it.
    #[test]
    fn integers_in_prose(before in "[^0-9-]{0,20}", n in 0i64..100_000, after in "\\PC{0,20}") {
        let text = format!("{before}{n} {after}");
        prop_assert_eq!(parse_int_in_range(&text, 0, 100_000), Ok(n));
        prop_assert!(parse_int_in_range(&text, n + 1, n + 10).is_err());
    }

    /// An option answered exactly (any case, quotes, a trailing period) is that option.
    #[test]
    fn exact_choices(index in 0usize..4, upper in any::<bool>()) {
        let options = ["Okafor house", "Riverside Cafe", "Maple Park", "Copper Kettle Pub"];
        let answer = if upper { options[index].to_uppercase() } else { options[index].to_owned() };
        prop_assert_eq!(parse_choice(&format!(" \"{answer}.\" "), &options), Ok(index));
    }
}

// ---------------------------------------------------------------------------------------------
// Templates

/// Literal template text: no `!`, so the only placeholders are the ones put there.
fn literal() -> impl Strategy<Value = String> {
    "[^!]{0,30}"
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 48,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Filling replaces each placeholder with its input verbatim (inputs are never expanded
    /// again), and a placeholder without an input is a `MissingInput` error.
    #[test]
    fn template_filling(
        segments in vec((literal(), 0usize..6), 0..8),
        tail in literal(),
        inputs in vec(prop_oneof![short_text(), Just("!<INPUT 0>!".to_owned())], 0..6),
        header in proptest::option::of(literal()),
    ) {
        // Bodies start after the header's line break: leading line breaks are not content.
        let mut segments = segments;
        let mut tail = tail;
        match segments.first_mut() {
            Some((first, _)) => *first = first.trim_start_matches(['\n', '\r']).to_owned(),
            None => tail = tail.trim_start_matches(['\n', '\r']).to_owned(),
        }
        let mut body = String::new();
        let mut expected = String::new();
        let mut needed = None;
        for (text, index) in &segments {
            body.push_str(text);
            body.push_str(&format!("!<INPUT {index}>!"));
            expected.push_str(text);
            expected.push_str(inputs.get(*index).map_or("", String::as_str));
            needed = needed.max(Some(*index));
        }
        body.push_str(&tail);
        expected.push_str(&tail);
        let text = match &header {
            Some(h) => format!("{h}\n{HEADER_MARKER}\n{body}"),
            None => body.clone(),
        };
        let template = PromptTemplate::parse("t", &text);
        prop_assert_eq!(template.body(), body.as_str());
        prop_assert_eq!(template.header().is_some(), header.is_some());
        prop_assert_eq!(template.max_input(), needed);
        match template.fill(&inputs) {
            Ok(filled) => {
                prop_assert!(needed.is_none_or(|n| n < inputs.len()));
                prop_assert_eq!(filled, expected);
            }
            Err(TemplateError::MissingInput { index, given, .. }) => {
                prop_assert_eq!(given, inputs.len());
                prop_assert!(index >= inputs.len());
                prop_assert!(needed.is_some_and(|n| n >= inputs.len()));
            }
            Err(other) => prop_assert!(false, "unexpected error {other}"),
        }
    }

    /// Arbitrary template text and inputs never panic.
    #[test]
    fn arbitrary_templates_never_panic(text in model_text(), inputs in vec(model_text(), 0..4)) {
        let template = PromptTemplate::parse("arbitrary", &text);
        let _ = template.max_input();
        if let Ok(filled) = template.fill(&inputs)
            && template.max_input().is_none()
        {
            prop_assert_eq!(filled.as_str(), template.body());
        }
    }

    /// Every shipped template fills with any inputs, and each input appears in the prompt.
    #[test]
    fn shipped_templates_fill_with_any_inputs(inputs in vec(short_text(), 12)) {
        let library = PromptLibrary::embedded();
        for name in library.names() {
            let template = library.get(name);
            prop_assert!(template.is_ok());
            let Ok(template) = template else { continue };
            let used = template.max_input().map_or(0, |n| n + 1);
            prop_assert!(used <= inputs.len(), "{name} uses {used} inputs");
            let filled = template.fill(&inputs[..used]);
            prop_assert!(filled.is_ok(), "{name}: {filled:?}");
            let filled = filled.unwrap_or_default();
            for (i, input) in inputs[..used].iter().enumerate() {
                if template.body().contains(&format!("!<INPUT {i}>!")) {
                    prop_assert!(filled.contains(input.as_str()), "{name}: input {i} missing");
                }
            }
        }
    }

    /// Every typed prompt builds its request from the shipped templates whatever its inputs.
    #[test]
    fn every_prompt_builds_its_request(
        a in short_text(),
        b in short_text(),
        hour in 0u32..=40,
        minutes in 0u32..=3000,
        list in vec(short_text(), 0..4),
    ) {
        let library = PromptLibrary::embedded();
        let lines = vec![(a.clone(), b.clone())];
        let items = vec![(a.clone(), minutes), (b.clone(), minutes / 2)];
        let kinds: Vec<(&str, Result<String, TemplateError>)> = vec![
            request(&WakeUpHour { identity: a.clone(), lifestyle: b.clone(), first_name: a.clone(), fail_safe_hour: hour }, &library),
            request(&DailyPlan { identity: a.clone(), first_name: b.clone(), date_text: a.clone(), wake_up_hour: hour, home: b.clone(), workplace: Some(a.clone()) }, &library),
            request(&HourlySchedule { identity: a.clone(), first_name: b.clone(), date_text: a.clone(), home: b.clone(), workplace: None, daily_plan: list.clone(), wake_up_hour: hour }, &library),
            request(&TaskDecomposition { identity: a.clone(), first_name: b.clone(), date_text: a.clone(), schedule: items.clone(), task: b.clone(), start_minute: minutes, duration: minutes }, &library),
            request(&NewDecompositionSchedule { first_name: a.clone(), date_text: b.clone(), window_start_minute: minutes, items: items.clone(), inserted: b.clone(), insert_offset: hour, inserted_duration: minutes }, &library),
            request(&ActionSector { name: a.clone(), action: b.clone(), living_sector: a.clone(), workplace_sector: None, current_sector: b.clone(), options: list.clone() , option_arenas: Vec::new() }, &library),
            request(&ActionArena { name: a.clone(), action: b.clone(), sector: a.clone(), living_arena: b.clone(), options: list.clone() }, &library),
            request(&ActionObject { name: a.clone(), action: b.clone(), place: a.clone(), options: list.clone(), seed: u64::from(minutes) }, &library),
            request(&ActionEmoji { action: a.clone() }, &library),
            request(&ObjectEmoji { object_state: b.clone() }, &library),
            request(&ActionEventTriple { name: a.clone(), action: b.clone() }, &library),
            request(&ObjectDescription { name: a.clone(), object: b.clone(), action: a.clone() }, &library),
            request(&ObjectEventTriple { object_address: a.clone(), object_name: b.clone(), object_state: a.clone() }, &library),
            request(&EventPoignancy { identity: a.clone(), first_name: b.clone(), event: a.clone() }, &library),
            request(&ChatPoignancy { identity: a.clone(), first_name: b.clone(), conversation: a.clone() }, &library),
            request(&ThoughtPoignancy { identity: a.clone(), first_name: b.clone(), thought: a.clone() }, &library),
            request(&DecideToTalk { name: a.clone(), partner: b.clone(), time_text: a.clone(), place: b.clone(), activity: a.clone(), partner_activity: b.clone(), memories: list.clone(), last_chat: Some(a.clone()) }, &library),
            request(&DecideToReact { name: a.clone(), partner: b.clone(), time_text: a.clone(), place: b.clone(), activity: a.clone(), partner_activity: b.clone(), memories: list.clone() }, &library),
            request(&RelationshipSummary { name: a.clone(), partner: b.clone(), memories: list.clone() }, &library),
            request(&NextUtterance { identity: a.clone(), name: a.clone(), partner: b.clone(), conversation: lines.clone(), memories: list.clone(), ..next_utterance() }, &library),
            request(&ConversationSummary { name: a.clone(), partner: b.clone(), conversation: lines.clone() }, &library),
            request(&PlanningThoughtAfterChat { name: a.clone(), partner: b.clone(), conversation: lines.clone() }, &library),
            request(&MemoAfterChat { name: a.clone(), partner: b.clone(), conversation: lines.clone() }, &library),
            request(&FocalPoints { name: a.clone(), statements: list.clone(), count: hour as usize }, &library),
            request(&InsightsWithEvidence { name: a.clone(), statements: list.clone(), count: hour as usize, rated: false }, &library),
            request(&InsightsWithEvidence { name: a.clone(), statements: list.clone(), count: hour as usize, rated: true }, &library),
            request(&ActionPlace { name: a.clone(), action: b.clone(), sector: a.clone(), living_arena: b.clone(), places: vec![(a.clone(), list.clone()), (b.clone(), Vec::new())], seed: u64::from(minutes) }, &library),
            request(&ActionDetails { identity: a.clone(), name: a.clone(), first_name: b.clone(), action: b.clone(), object: Some(UsedObject { name: b.clone(), address: a.clone() }) }, &library),
            request(&ActionDetails { identity: a.clone(), name: a.clone(), first_name: b.clone(), action: b.clone(), object: None }, &library),
            request(&EventPoignancies { identity: a.clone(), first_name: b.clone(), events: list.clone() }, &library),
            request(&AfterChat { identity: a.clone(), name: a.clone(), first_name: b.clone(), partner: b.clone(), conversation: lines.clone() }, &library),
            request(&ReviseIdentityPlanNote { name: a.clone(), date_text: b.clone(), memories: list.clone() }, &library),
            request(&ReviseIdentityFeelings { name: a.clone(), date_text: b.clone(), memories: list.clone() }, &library),
            request(&ReviseIdentityCurrently { name: a.clone(), date_text: b.clone(), previous: a.clone(), plan_note: b.clone(), feelings: a.clone() }, &library),
            request(&ReviseIdentityDailyReq { identity: a.clone(), first_name: b.clone(), date_text: a.clone(), wake_up_hour: hour, home: b.clone(), workplace: Some(a.clone()) }, &library),
            request(&WhisperThought { name: a.clone(), whisper: b.clone() }, &library),
            request(&JsonQuestion { task: a.clone(), example: json!({"k": b.clone()}), required_keys: vec![] }, &library),
        ];
        prop_assert_eq!(kinds.len(), 37);
        for (kind, prompt) in kinds {
            prop_assert!(prompt.is_ok(), "{kind}: {prompt:?}");
            let prompt = prompt.unwrap_or_default();
            prop_assert!(!prompt.contains("!<INPUT") || a.contains("!<INPUT") || b.contains("!<INPUT")
                || list.iter().any(|l| l.contains("!<INPUT")), "{kind}: unfilled placeholder");
        }
    }
}

/// The request's kind (checked against the prompt's) and its prompt text.
fn request<P: Prompt>(
    prompt: &P,
    library: &PromptLibrary,
) -> (&'static str, Result<String, TemplateError>) {
    let kind = prompt.kind();
    let built = prompt.request(library).map(|request| {
        assert_eq!(request.kind, kind, "request kind");
        request
            .messages
            .iter()
            .map(|m| m.content.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    });
    (kind, built)
}

// ---------------------------------------------------------------------------------------------
// Megabyte answers

/// Answers of megabytes finish (each parser bounds its scan) and give the expected result.
#[test]
fn megabyte_answers_are_handled() {
    let braces = "{".repeat(300_000);
    assert_eq!(extract_json(&braces), None);
    assert!(json_question().parse(&braces).is_err());
    let prose = format!(
        "{}{{\"hour\": 8, \"reason\": \"x\"}}",
        "so, ".repeat(250_000)
    );
    assert_eq!(
        json_question().parse(&prose),
        Ok(Some(json!({"hour": 8, "reason": "x"})))
    );

    let thinking = format!("{}7", "<think>hmm</think>".repeat(60_000));
    assert_eq!(clean_response(&thinking), "7");
    assert_eq!(
        EventPoignancy::default().parse(&clean_response(&thinking)),
        Ok(7)
    );

    let rambling = "la ".repeat(400_000);
    assert!(DailyPlan::default().parse(&rambling).is_err());
    assert_eq!(bounded_text(&rambling, 5).as_deref(), Ok("la la"));
    let steps = "1) stir (duration in minutes: 5)\n".repeat(30_000);
    let decomposed = decomposition(60).parse(&steps);
    assert_eq!(decomposed, Ok(vec![("stir".to_owned(), 5); 12]));
    let fail_safe = insert_into_window(&[("a".to_owned(), 10)], 5, "b", 100);
    assert_eq!(fail_safe, vec![("a".to_owned(), 5), ("b".to_owned(), 5)]);
}
