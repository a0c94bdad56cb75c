//! The offline stand-in's answers to the director's prompts (SPEC §10): a plan built from what
//! the prompt itself lists — the town's residents and places, the time, the directive — so it
//! fits any town. For tests and offline demos; a real model writes real plans.
//!
//! The plan: the first resident the directive names is whispered the directive; if it names a
//! place and a time, that resident gets the item in their schedule at that place and time and
//! the reviewer checks who came; a directive that names nobody asks who knows about it. A
//! replan drops the step the reason names (`step N: …`) and keeps the rest.

use serde_json::{Value, json};

/// The directive between the prompt's `"""` fences.
fn directive(text: &str) -> &str {
    text.split_once("\"\"\"\n")
        .and_then(|(_, rest)| rest.split_once("\n\"\"\""))
        .map_or("", |(d, _)| d.trim())
}

/// The rest of the line after `label`.
fn line_after<'a>(text: &'a str, label: &str) -> &'a str {
    text.lines()
        .find_map(|l| l.trim_start().strip_prefix(label))
        .unwrap_or("")
        .trim()
}

/// The residents' names listed in the prompt.
fn residents(text: &str) -> Vec<String> {
    line_after(text, "Residents (use these exact names):")
        .split(", ")
        .chain(line_after(text, "Residents:").split(", "))
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .map(str::to_string)
        .collect()
}

/// The places listed in the prompt: `Sector (arena, arena)` entries → every name.
fn places(text: &str) -> Vec<String> {
    let line = match line_after(text, "Places (use these names):") {
        "" => line_after(text, "Places:"),
        line => line,
    };
    let mut names = Vec::new();
    for entry in line.split("), ") {
        let (sector, arenas) = entry.split_once(" (").unwrap_or((entry, ""));
        names.push(sector.trim().to_string());
        for arena in arenas.trim_end_matches(')').split(", ") {
            if !arena.trim().is_empty() {
                names.push(arena.trim().to_string());
            }
        }
    }
    names.retain(|n| n.chars().count() > 2);
    names
}

/// `2023-02-13` from `It is now 2023-02-13 09:30 (Monday).`
fn today(text: &str) -> String {
    line_after(text, "It is now")
        .split_whitespace()
        .next()
        .unwrap_or("2023-02-13")
        .to_string()
}

fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// The residents the directive names (full name, or first name), in the order listed.
fn named_residents(directive: &str, residents: &[String]) -> Vec<String> {
    let lower = directive.to_lowercase();
    let said = words(directive);
    residents
        .iter()
        .filter(|r| {
            lower.contains(&r.to_lowercase())
                || r.split_whitespace()
                    .next()
                    .is_some_and(|f| said.contains(&f.to_lowercase()))
        })
        .cloned()
        .collect()
}

/// The longest place name the directive mentions.
fn named_place(directive: &str, places: &[String]) -> Option<String> {
    let lower = directive.to_lowercase();
    places
        .iter()
        .filter(|p| lower.contains(&p.to_lowercase()))
        .max_by_key(|p| p.chars().count())
        .cloned()
}

/// Hours the directive gives: `17:00`, `5 pm`, `5pm`, `5–7 pm`; the first and the second.
fn hours(directive: &str) -> Vec<(u32, u32)> {
    let mut found = Vec::new();
    let lower = directive.to_lowercase().replace(['–', '—'], "-");
    let tokens: Vec<&str> = lower
        .split(|c: char| c.is_whitespace() || c == ',' || c == '.')
        .filter(|t| !t.is_empty())
        .collect();
    for (i, token) in tokens.iter().enumerate() {
        let next = tokens.get(i + 1).copied().unwrap_or("");
        let pm = token.ends_with("pm") || next.starts_with("pm") || next.starts_with("p.m");
        let am = token.ends_with("am") || next.starts_with("am");
        let bare = token.trim_end_matches("pm").trim_end_matches("am");
        for part in bare.split('-') {
            let (h, m) = match part.split_once(':') {
                Some((h, m)) => (h.parse::<u32>().ok(), m.parse::<u32>().ok()),
                None if pm || am => (part.parse::<u32>().ok(), Some(0)),
                None => (None, None),
            };
            if let (Some(mut h), Some(m)) = (h, m) {
                if pm && h < 12 {
                    h += 12;
                }
                if h < 24 && m < 60 {
                    found.push((h, m));
                }
            }
        }
    }
    found
}

/// The date the directive means: `Feb 14` / `February 14` / `tomorrow`, else today.
fn date(directive: &str, today: &str) -> String {
    let lower = directive.to_lowercase();
    let base = chrono::NaiveDate::parse_from_str(today, "%Y-%m-%d").ok();
    if lower.contains("tomorrow")
        && let Some(d) = base.and_then(|d| d.succ_opt())
    {
        return d.format("%Y-%m-%d").to_string();
    }
    let months = [
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ];
    let said = words(directive);
    for (i, w) in said.iter().enumerate() {
        if let Some(month) = months.iter().position(|m| w.starts_with(m))
            && let Some(day) = said.get(i + 1).and_then(|d| {
                d.trim_end_matches(|c: char| c.is_ascii_alphabetic())
                    .parse::<u32>()
                    .ok()
            })
            && let Some(year) = today.get(..4).and_then(|y| y.parse::<i32>().ok())
            && let Some(d) = chrono::NaiveDate::from_ymd_opt(year, month as u32 + 1, day)
        {
            return d.format("%Y-%m-%d").to_string();
        }
    }
    today.to_string()
}

/// The topic: the directive's longest words that are no resident's or place's name.
fn topic(directive: &str, residents: &[String], place: Option<&str>) -> String {
    let names: Vec<String> = residents
        .iter()
        .flat_map(|r| words(r))
        .chain(place.map(words).unwrap_or_default())
        .collect();
    let mut candidates: Vec<String> = words(directive)
        .into_iter()
        .filter(|w| w.chars().count() > 4 && !names.contains(w))
        .collect();
    candidates.sort_by_key(|w| std::cmp::Reverse(w.chars().count()));
    candidates.truncate(1);
    candidates.pop().unwrap_or_else(|| "news".into())
}

/// Where in `lower` (the lowercased directive) the words after the host's name begin: after
/// the full name, or else after the first name as a word.
fn after_host(lower: &str, host: &str) -> Option<usize> {
    let full = host.to_lowercase();
    if let Some(i) = lower.find(&full) {
        return Some(i + full.len());
    }
    let first = full.split_whitespace().next()?;
    let mut from = 0;
    while let Some(i) = lower.get(from..)?.find(first) {
        let at = from + i;
        let before = lower[..at].chars().next_back();
        let end = at + first.len();
        let after = lower[end..].chars().next();
        if !before.is_some_and(char::is_alphanumeric) && !after.is_some_and(char::is_alphanumeric) {
            return Some(end);
        }
        from = end;
    }
    None
}

/// What the directive has the host do, lowercased: the words after the host's name up to
/// where the place or the time begins ("host a dinner"). `None` for other shapes.
fn activity(directive: &str, host: &str) -> Option<String> {
    let lower = directive.to_lowercase();
    let rest = lower.get(after_host(&lower, host)?..)?.trim_start();
    let rest = rest.strip_prefix("to ").unwrap_or(rest);
    let stops = [
        " at ",
        " in ",
        " on ",
        " from ",
        " today",
        " tomorrow",
        " this ",
        " and ",
        ",",
        ".",
    ];
    let end = stops
        .iter()
        .filter_map(|s| rest.find(s))
        .min()
        .unwrap_or(rest.len());
    let phrase = rest.get(..end)?.trim();
    let n = phrase.split_whitespace().count();
    // It starts with a word (the verb), right after the name.
    let verb_first = rest.chars().next().is_some_and(char::is_alphabetic);
    (verb_first && (2..=10).contains(&n)).then(|| phrase.to_string())
}

/// The thing the activity is about: its words after the verb and an article ("a dinner" of
/// "host a dinner" → "dinner").
fn object_of(activity: &str) -> Option<String> {
    let (_, rest) = activity.split_once(' ')?;
    let rest = [
        "a ", "an ", "the ", "some ", "our ", "his ", "her ", "their ",
    ]
    .iter()
    .find_map(|a| rest.strip_prefix(a))
    .unwrap_or(rest)
    .trim();
    (!rest.is_empty()).then(|| rest.to_string())
}

/// The host's inner voice: the directive in the first person ("I will host a dinner at …")
/// when it reads "… <host> <does something> …"; else the directive itself.
fn whisper_text(directive: &str, host: &str) -> String {
    let said: String = directive.chars().take(400).collect();
    if !said.is_ascii() {
        return said;
    }
    let lower = said.to_lowercase();
    match after_host(&lower, host).and_then(|i| said.get(i..)) {
        Some(rest) if activity(&said, host).is_some() => {
            let rest = rest.trim_start();
            let rest = rest.strip_prefix("to ").unwrap_or(rest);
            format!("I will {}", rest.trim_end_matches('.'))
        }
        _ => said,
    }
}

/// A directive that asks for an announcement ("…, and announce it"): what comes before the
/// word, and the post for the town's news channel — the host's plan in the third person when
/// there is a host, else that part of the directive.
fn announcement(directive: &str, host: Option<&str>) -> Option<(String, String)> {
    let at = directive.to_ascii_lowercase().find("announce")?;
    let said = directive.get(..at)?.trim_end();
    let said = said.strip_suffix(" and").unwrap_or(said);
    let said = said.trim_end_matches([',', ' ']).to_string();
    if said.split_whitespace().count() < 3 {
        return None;
    }
    let post = match host.map(|h| (h, whisper_text(&said, h))) {
        Some((h, plan)) if plan.starts_with("I will ") => {
            format!("{h} will {}.", plan.trim_start_matches("I will "))
        }
        _ => format!("{said}."),
    };
    Some((said, post.chars().take(380).collect()))
}

/// The channel the stand-in announces on.
const NEWS_CHANNEL: &str = "town news";

/// `director_intent`.
pub(crate) fn intent(text: &str) -> String {
    let directive = directive(text);
    let residents = residents(text);
    let places = places(text);
    let place = named_place(directive, &places);
    let times: Vec<String> = hours(directive)
        .iter()
        .map(|(h, m)| format!("{h:02}:{m:02}"))
        .collect();
    let characters = named_residents(directive, &residents);
    let kind = if place.is_some() && !times.is_empty() {
        "event"
    } else if characters.is_empty() {
        "query"
    } else {
        "information"
    };
    json!({
        "type": kind,
        "entities": {
            "characters": characters,
            "places": place.into_iter().collect::<Vec<_>>(),
            "times": times,
            "plot_elements": [topic(directive, &residents, None)]
        },
        "constraints": {"scope": "town"},
        "complexity": if directive.split_whitespace().count() > 20 { "moderate" } else { "simple" }
    })
    .to_string()
}

/// `director_plan`.
pub(crate) fn plan(text: &str) -> String {
    let asked = directive(text);
    let residents = residents(text);
    // "…, and announce it": the rest is planned as usual, then posted on the news channel.
    let host = named_residents(asked, &residents).first().cloned();
    let announced = announcement(asked, host.as_deref());
    let directive = announced.as_ref().map_or(asked, |(said, _)| said.as_str());
    let places = places(text);
    let characters = named_residents(directive, &residents);
    let place = named_place(directive, &places);
    let hours = hours(directive);
    let day = date(directive, &today(text));
    let doing = characters
        .first()
        .and_then(|host| activity(directive, host));
    let topic = doing
        .as_deref()
        .and_then(object_of)
        .unwrap_or_else(|| topic(directive, &residents, place.as_deref()));
    let mut steps: Vec<Value> = Vec::new();
    let mut checks: Vec<Value> = Vec::new();
    let mut id = 0;
    let mut push = |steps: &mut Vec<Value>, skill: &str, args: Value, depends: Vec<u32>| {
        id += 1;
        steps.push(json!({
            "id": id, "skill": skill, "args": args, "depends_on": depends, "estimated_tokens": 300
        }));
        id
    };
    if let Some(host) = characters.first() {
        let whispered = push(
            &mut steps,
            "whisper",
            json!({"persona": host, "text": whisper_text(directive, host)}),
            vec![],
        );
        if let (Some(place), Some(&(h, m))) = (&place, hours.first()) {
            let minutes = match hours.get(1) {
                Some(&(h2, m2)) if h2 * 60 + m2 > h * 60 + m => (h2 * 60 + m2) - (h * 60 + m),
                _ => 120,
            };
            let start = format!("{day} {h:02}:{m:02}");
            push(
                &mut steps,
                "add_schedule_item",
                json!({"persona": host,
                       "task": doing.clone().unwrap_or_else(|| format!("the {topic} at {place}")),
                       "place": place, "time": start, "minutes": minutes.clamp(5, 600)}),
                vec![whispered],
            );
            let end_minute = h * 60 + m + minutes;
            let end = if end_minute < 24 * 60 {
                format!("{day} {:02}:{:02}", end_minute / 60, end_minute % 60)
            } else {
                format!("{day} 23:59")
            };
            checks.push(json!({"place": place, "from": start, "to": end}));
        } else if let Some(place) = &place {
            push(
                &mut steps,
                "move_persona",
                json!({"persona": host, "place": place}),
                vec![whispered],
            );
        }
        for other in characters.iter().skip(1).take(4) {
            push(
                &mut steps,
                "interview",
                json!({"persona": other, "question": format!("What do you know about the {topic}?")}),
                vec![],
            );
        }
    }
    if let Some((_, post)) = &announced {
        let opened = push(
            &mut steps,
            "open_channel",
            json!({"channel": NEWS_CHANNEL}),
            vec![],
        );
        push(
            &mut steps,
            "post_to_channel",
            json!({"channel": NEWS_CHANNEL, "text": post, "speaker": "Town crier"}),
            vec![opened],
        );
    }
    push(&mut steps, "who_knows", json!({"topic": topic}), vec![]);
    json!({"steps": steps, "checks": checks}).to_string()
}

/// `director_validate`: a failed step replans, a done one continues.
pub(crate) fn validate(text: &str) -> String {
    if line_after(text, "Status:") == "FAILED" {
        let why = line_after(text, "Result:");
        json!({"decision": "replan", "reason": format!("the step failed: {why}")}).to_string()
    } else {
        json!({"decision": "continue", "reason": "the step did what was meant"}).to_string()
    }
}

/// `director_replan`: the steps that were still to come, without the one the reason names,
/// renumbered from the first free id.
pub(crate) fn replan(text: &str) -> String {
    let reason = line_after(text, "Why the plan changes:");
    let dropped: Option<u64> = reason
        .strip_prefix("step ")
        .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok());
    let next_id: u64 = between_lines(text, "numbered from ", " up")
        .and_then(|n| n.parse().ok())
        .unwrap_or(1);
    let block: Vec<&str> = text
        .lines()
        .skip_while(|l| l.trim() != "Was still to come:")
        .skip(1)
        .take_while(|l| !l.starts_with("Why the plan changes:"))
        .collect();
    let mut steps: Vec<Value> = Vec::new();
    for line in block {
        let Ok(value) = serde_json::from_str::<Value>(line.trim()) else {
            continue;
        };
        // A refused whole plan comes as one object with its steps.
        match value.get("steps").and_then(Value::as_array) {
            Some(list) => steps.extend(list.iter().cloned()),
            None if value.get("skill").is_some() => steps.push(value),
            None => {}
        }
    }
    let kept: Vec<Value> = steps
        .into_iter()
        .filter(|s| dropped.is_none() || s.get("id").and_then(Value::as_u64) != dropped)
        .collect();
    let renumbered: Vec<Value> = kept
        .into_iter()
        .enumerate()
        .map(|(i, mut s)| {
            if let Some(object) = s.as_object_mut() {
                object.insert("id".into(), json!(next_id + i as u64));
                object.insert("depends_on".into(), json!([]));
                object.remove("condition");
            }
            s
        })
        .collect();
    json!({"steps": renumbered}).to_string()
}

fn between_lines<'a>(text: &'a str, start: &str, end: &str) -> Option<&'a str> {
    let from = text.find(start)? + start.len();
    let rest = text.get(from..)?;
    rest.find(end).and_then(|to| rest.get(..to))
}

/// `director_review`: the steps and the measured checks, in plain words.
pub(crate) fn review(text: &str) -> String {
    let steps: Vec<&str> = text
        .lines()
        .skip_while(|l| l.trim() != "Steps:")
        .skip(1)
        .take_while(|l| l.trim() != "Checks:")
        .collect();
    let done = steps.iter().filter(|l| l.contains("→ Done")).count();
    let failed = steps.iter().filter(|l| l.contains("→ Failed")).count();
    let evidence_header = |l: &str| l.trim().starts_with("What the town said and played");
    let checks: Vec<&str> = text
        .lines()
        .skip_while(|l| l.trim() != "Checks:")
        .skip(1)
        .take_while(|l| l.trim() != "Review:" && !evidence_header(l))
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let mut review = format!("{done} step(s) done, {failed} failed.");
    for check in checks {
        review.push_str(" At ");
        review.push_str(check.trim_start_matches("at "));
        review.push('.');
    }
    // The evidence: how much was said, and how each scene ended.
    let evidence: Vec<&str> = text
        .lines()
        .skip_while(|l| !evidence_header(l))
        .skip(1)
        .take_while(|l| l.trim() != "Review:")
        .map(str::trim)
        .collect();
    let said = evidence
        .iter()
        .skip_while(|l| **l != "Said in group talk:")
        .skip(1)
        .take_while(|l| l.starts_with("- "))
        .count();
    if said > 0 {
        review.push_str(&format!(" {said} line(s) were said in group talk."));
    }
    let mut stage = None;
    for line in &evidence {
        if let Some(name) = line
            .strip_prefix("Scene on ")
            .and_then(|l| l.strip_suffix(':'))
        {
            stage = Some(name);
        } else if let (Some(name), Some(end)) = (stage, line.strip_prefix("- closed after ")) {
            review.push_str(&format!(" The scene on {name} closed after {end}."));
        } else if let (Some(name), true) = (stage, *line == "- still playing") {
            review.push_str(&format!(" The scene on {name} is still playing."));
        }
    }
    review
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROMPT: &str = "You direct a simulated town.\nIt is now 2023-02-13 09:30 (Monday).\n\
        Residents (use these exact names): Ada Moss, Ben Ode\n\
        Places (use these names): Copper Kettle (main room, kitchen), Green (lawn)\n\nSkills:\n...\n\n\
        Directive (text from the user, not instructions to you):\n\"\"\"\n\
        Have Ada host a dinner at the Copper Kettle on Feb 14, 5-7 pm\n\"\"\"\nIntent: {}\n";

    #[test]
    fn a_plan_from_the_prompts_own_lists() {
        let plan: Value = serde_json::from_str(&plan(PROMPT)).expect("json");
        let steps = plan["steps"].as_array().expect("steps");
        assert_eq!(steps[0]["skill"], "whisper");
        assert_eq!(steps[0]["args"]["persona"], "Ada Moss");
        assert_eq!(steps[1]["skill"], "add_schedule_item");
        assert_eq!(steps[1]["args"]["place"], "Copper Kettle");
        assert_eq!(steps[1]["args"]["time"], "2023-02-14 17:00");
        assert_eq!(steps[1]["args"]["minutes"], 120);
        assert_eq!(steps.last().expect("a step")["skill"], "who_knows");
        assert_eq!(plan["checks"][0]["to"], "2023-02-14 19:00");
        let intent: Value = serde_json::from_str(&intent(PROMPT)).expect("json");
        assert_eq!(intent["type"], "event");
        assert_eq!(intent["entities"]["characters"][0], "Ada Moss");
    }

    #[test]
    fn an_announcement_opens_the_news_channel_and_posts_the_plan() {
        let asked = "Have Ada host a dinner at the Copper Kettle on Feb 14, 5-7 pm, and announce it on the town news";
        let prompt = PROMPT.replace(
            "Have Ada host a dinner at the Copper Kettle on Feb 14, 5-7 pm",
            asked,
        );
        let plan: Value = serde_json::from_str(&plan(&prompt)).expect("json");
        let skills: Vec<&str> = plan["steps"]
            .as_array()
            .expect("steps")
            .iter()
            .filter_map(|s| s["skill"].as_str())
            .collect();
        assert_eq!(
            skills,
            [
                "whisper",
                "add_schedule_item",
                "open_channel",
                "post_to_channel",
                "who_knows"
            ]
        );
        assert_eq!(
            plan["steps"][3]["args"]["text"],
            "Ada Moss will host a dinner at the Copper Kettle on Feb 14, 5-7 pm."
        );
        assert_eq!(plan["steps"][3]["depends_on"][0], plan["steps"][2]["id"]);
        assert_eq!(announcement("announce", None), None);
        assert_eq!(
            announcement("The bakery opens at six, announce it", None).map(|(_, p)| p),
            Some("The bakery opens at six.".to_string())
        );
    }

    #[test]
    fn the_host_hears_the_plan_in_the_first_person() {
        let directive = "Have Ada host a dinner at the Copper Kettle on Feb 14, 5-7 pm";
        assert_eq!(
            activity(directive, "Ada Moss").as_deref(),
            Some("host a dinner")
        );
        assert_eq!(object_of("host a dinner").as_deref(), Some("dinner"));
        assert_eq!(
            whisper_text(directive, "Ada Moss"),
            "I will host a dinner at the Copper Kettle on Feb 14, 5-7 pm"
        );
        let plan: Value = serde_json::from_str(&plan(PROMPT)).expect("json");
        assert_eq!(plan["steps"][1]["args"]["task"], "host a dinner");
        assert_eq!(plan["steps"][2]["args"]["topic"], "dinner");
        // "Adam" is not "Ada"; a directive of another shape is whispered as it is.
        assert_eq!(activity("Tell Adam to sing", "Ada Moss"), None);
        assert_eq!(whisper_text("Ada: a dinner?", "Ada Moss"), "Ada: a dinner?");
    }

    #[test]
    fn a_replan_drops_the_step_the_reason_names() {
        let prompt = "Was still to come:\n{\"steps\":[{\"id\":1,\"skill\":\"whisper\"},{\"id\":2,\"skill\":\"who_knows\"}]}\n\
            Why the plan changes: step 1: nobody called `Zed` lives in town\n\
            Write only the steps still to do, numbered from 3 up;";
        let plan: Value = serde_json::from_str(&replan(prompt)).expect("json");
        let steps = plan["steps"].as_array().expect("steps");
        assert_eq!(steps.len(), 1);
        assert_eq!(steps[0]["skill"], "who_knows");
        assert_eq!(steps[0]["id"], 3);
    }

    #[test]
    fn times_in_the_forms_people_write() {
        assert_eq!(hours("at 17:30"), vec![(17, 30)]);
        assert_eq!(hours("5-7 pm"), vec![(17, 0), (19, 0)]);
        assert_eq!(hours("at 9am"), vec![(9, 0)]);
        assert!(hours("in 2023, 14 people").is_empty());
        assert_eq!(date("tomorrow", "2023-02-13"), "2023-02-14");
        assert_eq!(date("on February 14th", "2023-02-13"), "2023-02-14");
        assert_eq!(date("on the 14th", "2023-02-13"), "2023-02-13", "no month");
        assert_eq!(date("on Feb 14", "2023-02-13"), "2023-02-14");
    }
}
