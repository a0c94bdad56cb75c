//! The offline stand-in's answers to the group-conversation prompts (SPEC §8): built from what
//! the prompt shows — the persona's name and activity, the place, who is present, the lines so
//! far — so they fit any town and any cast. For tests and offline demos; not a language model.
//!
//! - **Join** (`group_join`): yes when the persona is named in the recent lines, else yes for
//!   about two personas in three (by a hash of name and the lines, so a rerun agrees).
//! - **Reply** (`group_reply`): answers the last speaker by name (or greets someone present),
//!   and says what the persona is doing there — naming people keeps the talk going, as it does
//!   in a real group.
//! - **Round** (`group_round`, lean mode): each persona listed decides as in a focused cycle,
//!   without tools, and plans its next two lines as if it had heard the others' lines of the
//!   round and of the beat after;
//!   each persona nearby answers the join question as above and, joining, opens with a reply.
//! - **Focused cycle** (`group_focus`): asked the time by name with the clock tool offered →
//!   `use_tool` `what_time_is_it`, then (asked again with what it found) the time; named in the
//!   new lines → a text reply to whoever named it; otherwise, by the hash, a reply, an emoji,
//!   or quiet.

use serde_json::json;

use super::scripted::fnv1a_parts;

/// What the prompt says about the scene.
struct Scene<'a> {
    name: &'a str,
    first_name: &'a str,
    activity: &'a str,
    place: &'a str,
    present: Vec<&'a str>,
    /// "Speaker: text" lines, oldest first.
    lines: Vec<&'a str>,
    /// Lines new since the persona last looked (focused cycle).
    new_lines: Vec<&'a str>,
    /// What the persona remembers, as the prompt lists it (recalled memories first).
    remembered: Vec<&'a str>,
}

/// The lines after the header line `label` up to the next blank line.
fn block<'a>(text: &'a str, label: &str) -> Vec<&'a str> {
    let Some((_, rest)) = text.split_once(label) else {
        return Vec::new();
    };
    rest.lines()
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .map(str::trim)
        .filter(|l| !l.starts_with('('))
        .collect()
}

fn scene(text: &str) -> Scene<'_> {
    // Stable first: the talk's line, then the persona's own —
    //   "A group conversation in <place>. Present: a, b." / "People are talking in <place>. …"
    //   "<name> is <activity>, in the conversation." / "…, following the conversation closely."
    //   / "<name> is <activity>."
    // — or, in templates edited before that layout, one line:
    //   "<name> is <activity>, in a group conversation in <place>. Present: a, b."
    let line = text
        .lines()
        .find(|l| l.contains("group conversation in ") || l.contains("People are talking in "))
        .unwrap_or("");
    let (who, place_part) = [
        ", in a group conversation in ",
        ", following a group conversation in ",
        ". People are talking in ",
        "A group conversation in ",
        "People are talking in ",
    ]
    .iter()
    .find_map(|marker| line.split_once(marker))
    .unwrap_or(("", ""));
    let (place, present) = place_part
        .split_once(". Present: ")
        .unwrap_or((place_part, ""));
    let place = place.trim_end_matches(" closely");
    let present = present_list(present);
    let (name, activity) = match who.split_once(" is ") {
        Some((name, activity)) => (name, activity),
        None => own_line(text),
    };
    let first_name = name.split_whitespace().next().unwrap_or(name);
    let lines = block(text, "The conversation so far:");
    let lines = if lines.is_empty() {
        block(text, "What they said lately:")
    } else {
        lines
    };
    let new_marker = format!("New since {first_name} last looked:");
    let remembered = block(text, &format!("{first_name} remembers:"))
        .into_iter()
        .map(|m| m.strip_prefix("- ").unwrap_or(m))
        .collect();
    Scene {
        remembered,
        name: name.trim(),
        first_name,
        activity: activity.trim(),
        place: place.trim(),
        present,
        lines,
        new_lines: block(text, &new_marker),
    }
}

/// The persona's own line under the talk's, "<name> is <activity>[, in the conversation | ,
/// following the conversation closely]." — the name is the identity summary's.
fn own_line(text: &str) -> (&str, &str) {
    let Some(name) = super::offline::field(text, "Name:").filter(|n| !n.is_empty()) else {
        return ("", "");
    };
    let activity = text
        .lines()
        .find_map(|l| l.trim().strip_prefix(name)?.strip_prefix(" is "))
        .map(|rest| {
            rest.trim_end_matches('.')
                .trim_end_matches(", following the conversation closely")
                .trim_end_matches(", in the conversation")
        })
        .unwrap_or("");
    (name, activity)
}

/// The names after "Present: " ("a, b." — "nobody else" is none).
fn present_list(text: &str) -> Vec<&str> {
    text.trim_end_matches('.')
        .split(", ")
        .map(str::trim)
        .filter(|p| !p.is_empty() && *p != "nobody else")
        .collect()
}

/// Whether any of `lines` names `first_name`; the speaker of the last one that does.
fn named_by<'a>(lines: &[&'a str], first_name: &str) -> Option<&'a str> {
    if first_name.is_empty() {
        return None;
    }
    lines.iter().rev().find_map(|line| {
        let (speaker, said) = line.split_once(": ")?;
        said.split(|c: char| !c.is_alphanumeric())
            .any(|w| w.eq_ignore_ascii_case(first_name))
            .then_some(speaker)
    })
}

/// The join answer: "yes" or "no".
pub(super) fn join(text: &str) -> bool {
    joins(&scene(text))
}

/// Whether the persona of `scene` joins the talk: named in its lines, or by the hash.
fn joins(scene: &Scene<'_>) -> bool {
    named_by(&scene.lines, scene.first_name).is_some()
        || !fnv1a_parts(&[scene.name, &scene.lines.len().to_string(), scene.place])
            .is_multiple_of(3)
}

/// First name of a full name.
fn first(name: &str) -> &str {
    name.split_whitespace().next().unwrap_or(name)
}

/// A spoken line for the persona.
pub(super) fn reply(text: &str) -> String {
    let scene = scene(text);
    say(&scene, scene.lines.last().copied())
}

/// What the stand-in opens a passing on with: a told fact is passed on behind it, and not
/// again behind itself.
const NEWS_OPENER: &str = "Did you hear? ";

/// Something the persona remembers being told that the talk has not heard yet: what someone
/// said to it in a talk turn (a memory "conversation with …: <speaker> said \"…\"", the first
/// quote), or news passed on to it at a table (a quoted line that opens with
/// [`NEWS_OPENER`]) in another place, without the opener; four words at least, and not a line
/// the talk has heard. The stand-in answers from what
/// the persona recalls, so a fact told in one conversation can travel to the next (SPEC §16)
/// — and it passes on nothing else, so small talk stays small talk.
fn news<'a>(scene: &Scene<'a>) -> Option<&'a str> {
    scene.remembered.iter().find_map(|memory| {
        let told_in_talk = memory.starts_with("conversation with ");
        // News heard in this very conversation: everyone here heard it too.
        let heard_at = memory
            .strip_prefix("Talk in the group in ")
            .or_else(|| memory.split_once(" said in ").map(|(_, rest)| rest))
            .and_then(|rest| rest.split_once(':'))
            .map(|(place, _)| place.trim());
        if !told_in_talk && heard_at == Some(scene.place) {
            return None;
        }
        memory
            .split('"')
            .skip(1)
            .step_by(2)
            .enumerate()
            .find_map(|(i, quoted)| {
                let told = match quoted.trim().strip_prefix(NEWS_OPENER) {
                    Some(passed_on) => passed_on.trim(),
                    None if told_in_talk && i == 0 => quoted.trim(),
                    None => return None,
                };
                let heard = scene.lines.iter().any(|line| line.contains(told));
                (told.split_whitespace().count() >= 4 && !heard).then_some(told)
            })
    })
}

fn say(scene: &Scene<'_>, answering: Option<&str>) -> String {
    if let Some(told) = news(scene) {
        return format!("{NEWS_OPENER}{told}");
    }
    let h = fnv1a_parts(&[scene.name, &scene.lines.join("|")]);
    // "attending a lecture (finding a seat)" → "attending a lecture".
    let activity = scene.activity.split(" (").next().unwrap_or("").trim();
    let activity = if activity.is_empty() {
        "here"
    } else {
        activity
    };
    let place = if scene.place.is_empty() {
        "here"
    } else {
        scene.place
    };
    match answering.and_then(|l| l.split_once(": ")) {
        Some((speaker, _)) if first(speaker) != scene.first_name => {
            let who = first(speaker);
            match h % 6 {
                0 => format!("Good point, {who}. I'm {activity} myself."),
                1 => format!("{who}, I was just thinking the same about {place}."),
                2 => format!("Ha, {who}, you always say that! How is your day going?"),
                3 => format!("I agree with {who}. It's nice to catch everyone in {place}."),
                4 => format!("Really, {who}? Tell me more."),
                _ => format!("{who}, count me in. I'll be {activity} until then anyway."),
            }
        }
        _ => {
            // Open the talk: greet someone present by name.
            let someone = scene
                .present
                .get((h as usize) % scene.present.len().max(1))
                .map_or("everyone", |p| first(p));
            format!("Hello {someone}! Nice to see you in {place}. I'm {activity}.")
        }
    }
}

/// The speaker of the last new line that names the persona and asks the time.
fn asked_the_time<'a>(lines: &[&'a str], first_name: &str) -> Option<&'a str> {
    lines.iter().rev().find_map(|line| {
        let (speaker, said) = line.split_once(": ")?;
        let asks = said.contains('?') && said.to_lowercase().contains("time");
        (asks && named_by(&[line], first_name).is_some()).then_some(speaker)
    })
}

/// What the clock tool told the persona ("… looked it up: what_time_is_it → {"now": …}"): the
/// time of day, "HH:MM".
fn looked_up_time(text: &str) -> Option<String> {
    let (_, rest) = text.split_once("looked it up: what_time_is_it → ")?;
    let json: serde_json::Value = serde_json::from_str(rest.lines().next()?).ok()?;
    let now = json.get("now")?.as_str()?;
    let (_, time) = now.rsplit_once(", ")?;
    Some(time.to_string())
}

/// A focused cycle's JSON. Asked the time by name, with the clock tool offered, the persona
/// looks it up first, then answers with what the tool said.
pub(super) fn focus(text: &str) -> String {
    let scene = scene(text);
    if let Some(asker) = asked_the_time(&scene.new_lines, scene.first_name) {
        if let Some(time) = looked_up_time(text) {
            return json!({
                "thought": "I checked the clock.",
                "plan": "text_reply",
                "reply": format!("It's {time}, {}.", first(asker)),
                "reason": "I was asked the time",
            })
            .to_string();
        }
        if text.contains("\n- what_time_is_it ") {
            return json!({
                "thought": format!("{} wants to know the time; let me check.", first(asker)),
                "plan": "use_tool",
                "tool": "what_time_is_it",
                "args": {},
                "reply": "",
                "reason": "I was asked the time",
            })
            .to_string();
        }
    }
    // Someone who just spoke lets the others talk.
    let spoke_lately = scene
        .lines
        .iter()
        .rev()
        .take(3)
        .any(|l| l.split_once(": ").is_some_and(|(who, _)| who == scene.name));
    focused(&scene, spoke_lately).to_string()
}

/// What a focused persona does without a tool: answers whoever named it; else, unless it
/// spoke lately, by the hash a reply, an emoji or quiet.
fn focused(scene: &Scene<'_>, spoke_lately: bool) -> serde_json::Value {
    if let Some(speaker) = named_by(&scene.new_lines, scene.first_name) {
        let line = say(scene, Some(&format!("{speaker}: …")));
        return json!({
            "thought": format!("{} spoke to me; I should answer.", first(speaker)),
            "plan": "text_reply",
            "reply": line,
            "reason": "I was named",
        });
    }
    let h = fnv1a_parts(&[scene.name, &scene.new_lines.join("|")]);
    match if spoke_lately { 0 } else { h % 3 } {
        0 => json!({
            "thought": "Nothing I need to add right now.",
            "plan": "no_reply",
            "reply": "",
            "reason": "listening",
        }),
        1 => json!({
            "thought": "I like what was said.",
            "plan": "emoji_reply",
            "reply": "👍",
            "reason": "agreeing",
        }),
        _ => json!({
            "thought": "I have something to add.",
            "plan": "text_reply",
            "reply": say(scene, scene.new_lines.last().copied()),
            "reason": "joining in",
        }),
    }
}

/// As the round's prompt asks, at most two of the table speak: those answering someone who
/// named them first, then in the order listed; the rest stay quiet.
fn at_most_two_speak(mut replies: Vec<serde_json::Value>) -> Vec<serde_json::Value> {
    let speaks = |r: &serde_json::Value| r["plan"] != "no_reply";
    let mut order: Vec<usize> = (0..replies.len())
        .filter(|&i| speaks(&replies[i]))
        .collect();
    order.sort_by_key(|&i| replies[i]["reason"] != "I was named");
    for &i in order.iter().skip(2) {
        replies[i]["plan"] = json!("no_reply");
        replies[i]["reply"] = json!("");
        replies[i]["reason"] = json!("letting the others talk");
    }
    replies
}

/// A lean round's JSON: each persona listed under "Following it closely:" decides as a
/// focused persona would on its own (no tools in a round), at most two of them speak; and
/// each plans its next line (`then`) as a focused persona would on hearing the others'
/// lines of this round — again at most two.
pub(super) fn round(text: &str) -> String {
    // "A group conversation in <place>. Present: a, b."
    let header = text
        .lines()
        .find_map(|l| l.strip_prefix("A group conversation in "))
        .unwrap_or("");
    let (place, present) = header.split_once(". Present: ").unwrap_or((header, ""));
    let present = present_list(present);
    let lines = block(text, "The conversation so far:");
    let new_lines = block(text, "New since they last looked:");
    let seat_scene = |seat| seat_scene(seat, place.trim(), &present, &lines, &new_lines);
    let seats: Vec<(Scene<'_>, bool)> = block(text, "Following it closely:")
        .into_iter()
        .filter_map(|seat| {
            let scene = seat_scene(seat)?;
            // In a round, who spoke in the last round lets the others talk.
            let spoke_lately = new_lines.iter().any(|l| said_by(l, scene.name));
            Some((scene, spoke_lately))
        })
        .collect();
    let mut replies = at_most_two_speak(
        seats
            .iter()
            .map(|(scene, spoke_lately)| focused(scene, *spoke_lately))
            .collect(),
    );
    // The exchange ahead, beat by beat (each seat answering the others' lines of the beat
    // before): a seat's next three lines are its `then`, `later` and `afterwards` — said at
    // its next cycles, which come when the others have said something.
    let mut beats: Vec<Vec<serde_json::Value>> = Vec::new();
    let mut history: Vec<String> = Vec::new();
    let mut before = replies.clone();
    for _ in 0..PLANNED_BEATS {
        let (answers, said) = beat_ahead(&seats, &before, &history);
        history.extend(said);
        beats.push(answers.clone());
        before = answers;
    }
    for (i, ((scene, _), reply)) in seats.iter().zip(&mut replies).enumerate() {
        let mut ahead = beats
            .iter()
            .filter_map(|beat| beat.get(i))
            .filter(|answer| answer["plan"] == "text_reply")
            .map(|answer| answer["reply"].clone());
        reply["name"] = json!(scene.name);
        reply["then"] = ahead.next().unwrap_or_else(|| json!(""));
        reply["later"] = ahead.next().unwrap_or_else(|| json!(""));
        reply["afterwards"] = ahead.next().unwrap_or_else(|| json!(""));
    }
    // Those nearby answer the join question as they would alone: joining, they open with a
    // line; staying out, they say nothing.
    for scene in block(text, "Nearby, not in the talk yet:")
        .into_iter()
        .filter_map(seat_scene)
    {
        let name = scene.name;
        replies.push(if joins(&scene) {
            json!({"name": name, "plan": "text_reply", "reply": say(&scene, lines.last().copied()), "then": "", "later": "", "afterwards": ""})
        } else {
            json!({"name": name, "plan": "no_reply", "reply": "", "then": "", "later": "", "afterwards": ""})
        });
    }
    json!({ "replies": replies }).to_string()
}

/// Beats of talk a round's stand-in plays ahead to find each seat's next three lines.
const PLANNED_BEATS: usize = 6;

/// The next beat of a round: each seat hears the others' lines of the beat `before` (one
/// answer per seat) after the lines so far and `history`, and answers as a focused persona
/// would (one who spoke in `before` lets the others talk); at most two speak. Returns the
/// answers and the lines of `before`.
fn beat_ahead(
    seats: &[(Scene<'_>, bool)],
    before: &[serde_json::Value],
    history: &[String],
) -> (Vec<serde_json::Value>, Vec<String>) {
    let said: Vec<String> = seats
        .iter()
        .zip(before)
        .filter(|(_, answer)| answer["plan"] == "text_reply")
        .filter_map(|((scene, _), answer)| {
            Some(format!("{}: {}", scene.name, answer["reply"].as_str()?))
        })
        .collect();
    let answers = at_most_two_speak(
        seats
            .iter()
            .zip(before)
            .map(|((scene, _), answer)| {
                let heard: Vec<&str> = said
                    .iter()
                    .map(String::as_str)
                    .filter(|l| !said_by(l, scene.name))
                    .collect();
                if heard.is_empty() {
                    return json!({"plan": "no_reply", "reply": "", "reason": "nothing new"});
                }
                let next = Scene {
                    remembered: scene.remembered.clone(),
                    name: scene.name,
                    first_name: scene.first_name,
                    activity: scene.activity,
                    place: scene.place,
                    present: scene.present.clone(),
                    lines: scene
                        .lines
                        .iter()
                        .copied()
                        .chain(history.iter().map(String::as_str))
                        .chain(said.iter().map(String::as_str))
                        .collect(),
                    new_lines: heard,
                };
                focused(&next, answer["plan"] != "no_reply")
            })
            .collect(),
    );
    (answers, said)
}

/// A round's seat line ("- Ana Ruiz is having coffee; friendly; currently: …") as a scene in
/// `place` with `present`, the `lines` so far, hearing the `new_lines` that are not its own.
fn seat_scene<'a>(
    seat: &'a str,
    place: &'a str,
    present: &[&'a str],
    lines: &[&'a str],
    new_lines: &[&'a str],
) -> Option<Scene<'a>> {
    let (name, rest) = seat.strip_prefix("- ")?.split_once(" is ")?;
    let remembered = rest
        .split_once("; remembers: ")
        .map(|(_, r)| r.split("; ").map(str::trim).collect())
        .unwrap_or_default();
    Some(Scene {
        remembered,
        name,
        first_name: first(name),
        activity: rest.split(';').next().unwrap_or("").trim(),
        place,
        present: present.iter().copied().filter(|p| *p != name).collect(),
        lines: lines.to_vec(),
        new_lines: new_lines
            .iter()
            .copied()
            .filter(|l| !said_by(l, name))
            .collect(),
    })
}

/// Whether `line` ("Speaker: text") was said by `name`.
fn said_by(line: &str, name: &str) -> bool {
    line.split_once(": ").is_some_and(|(who, _)| who == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_remembered_fact_is_passed_on_once() {
        let told = "Mo is a baker.\n\nMo Li is having coffee, in a group conversation in the main room. Present: Ana Ruiz, Bo Chen.\nMo remembers:\n- conversation with Player at 09:10: Player said \"The fair moved to Saturday at the Common.\"; Mo answered \"Oh!\"\n- Bo Chen said in the main room: \"Hi all\"\n\nThe conversation so far:\nAna Ruiz: Morning, Mo!\nBo Chen: Hi all\n\nWrite the one short line Mo says next.";
        assert_eq!(
            reply(told),
            "Did you hear? The fair moved to Saturday at the Common."
        );
        // Once the talk has heard it, the stand-in talks as before.
        let heard = told.replace(
            "Bo Chen: Hi all\n\nWrite",
            "Bo Chen: Did you hear? The fair moved to Saturday at the Common.\n\nWrite",
        );
        assert!(
            !reply(&heard).contains("The fair moved"),
            "{}",
            reply(&heard)
        );
        // Passed on again from a group line, without a second opener.
        let passed = told.replace(
            "- conversation with Player at 09:10: Player said \"The fair moved to Saturday at the Common.\"; Mo answered \"Oh!\"",
            "- Talk in the group in the kitchen: Ana Ruiz said \"Hello there, everyone!\"; Bo Chen said \"Did you hear? The fair moved to Saturday at the Common.\"",
        );
        assert_eq!(
            reply(&passed),
            "Did you hear? The fair moved to Saturday at the Common."
        );
        // News from this very conversation is not told again (everyone here heard it).
        let here = passed.replace("group in the kitchen", "group in the main room");
        assert!(!reply(&here).starts_with(NEWS_OPENER), "{}", reply(&here));
        // Short quotes (greetings) are no news.
        assert!(!reply(REPLY).starts_with(NEWS_OPENER));
    }

    const REPLY: &str = "Mo is a baker.\n\nMo Li is having coffee, in a group conversation in the main room. Present: Ana Ruiz, Bo Chen.\nMo remembers:\n(none)\n\nThe conversation so far:\nAna Ruiz: Morning, Mo!\nBo Chen: Hi all\n\nWrite the one short line Mo says next.";

    #[test]
    fn the_scene_is_read_from_any_cast() {
        let s = scene(REPLY);
        assert_eq!(s.name, "Mo Li");
        assert_eq!(s.first_name, "Mo");
        assert_eq!(s.activity, "having coffee");
        assert_eq!(s.place, "the main room");
        assert_eq!(s.present, vec!["Ana Ruiz", "Bo Chen"]);
        assert_eq!(s.lines.len(), 2);
        assert_eq!(named_by(&s.lines, "Mo"), Some("Ana Ruiz"));
        let line = reply(REPLY);
        assert!(line.contains("Bo"), "answers the last speaker: {line}");
    }

    #[test]
    fn the_scene_is_read_from_the_shipped_stable_first_templates() {
        let library = crate::prompt::PromptLibrary::default();
        let identity = "Name: Mo Li\nAge: 40\nCurrently: Mo is baking.\n";
        let inputs = [
            "Mo Li",
            identity,
            "having coffee",
            "the main room",
            "Ana Ruiz: Morning, Mo!\nBo Chen: Hi all",
            "Ana Ruiz, Bo Chen",
            "(none)",
            "Mo",
            "Ana Ruiz: Mo, tea?",
            "",
            "",
        ];
        for kind in ["group_reply", "group_focus", "group_join"] {
            let prompt = library.fill(kind, &inputs).expect("the template fills");
            assert!(prompt.starts_with(identity), "{kind}: identity first");
            let s = scene(&prompt);
            assert_eq!(s.name, "Mo Li", "{kind}");
            assert_eq!(s.first_name, "Mo", "{kind}");
            assert_eq!(s.activity, "having coffee", "{kind}");
            assert_eq!(s.place, "the main room", "{kind}");
            assert_eq!(s.present, vec!["Ana Ruiz", "Bo Chen"], "{kind}");
            assert_eq!(s.lines.len(), 2, "{kind}");
        }
        let focus = library.fill("group_focus", &inputs).expect("fills");
        assert_eq!(scene(&focus).new_lines, vec!["Ana Ruiz: Mo, tea?"]);
        // What changes from one look to the next (the persona's own line, what it recalls, what
        // is new) comes after the talk, so the next look reuses everything up to it.
        let later = library
            .fill(
                "group_focus",
                &[
                    "Mo Li",
                    identity,
                    "drinking tea",
                    "the main room",
                    "Ana Ruiz: Morning, Mo!\nBo Chen: Hi all\nAna Ruiz: Mo, tea?",
                    "Ana Ruiz, Bo Chen",
                    "- Ana likes tea",
                    "Mo",
                    "(nothing new)",
                    "",
                    "",
                ],
            )
            .expect("fills");
        let shared = crate::llm::common_prefix_len(&focus, &later);
        assert!(
            focus[..shared].ends_with("Bo Chen: Hi all\n"),
            "shared up to the talk's last common line: {:?}",
            &focus[..shared]
        );
    }

    #[test]
    fn a_named_persona_joins_and_answers_when_focused() {
        let join_prompt = "Id.\n\nMo Li is reading. People are talking in the #board channel. Present: Ana Ruiz.\nWhat they said lately:\nAna Ruiz: Mo, are you coming?\n\nWould Mo Li join?";
        assert!(join(join_prompt));
        let focus_prompt =
            format!("{REPLY}\n\nNew since Mo last looked:\nAna Ruiz: Mo, tea?\n\nThink.");
        let answer: serde_json::Value = serde_json::from_str(&focus(&focus_prompt)).expect("json");
        assert_eq!(answer["plan"], "text_reply");
        assert!(answer["reply"].as_str().is_some_and(|r| r.contains("Ana")));
    }

    #[test]
    fn in_a_round_each_persona_decides_for_itself() {
        let prompt = "A group conversation in the main room. Present: Ana Ruiz, Bo Chen, Mo Li.\n\nThe conversation so far:\nAna Ruiz: Mo, tea?\nBo Chen: Lovely day.\n\nNew since they last looked:\nAna Ruiz: Mo, tea?\nBo Chen: Lovely day.\n\nFollowing it closely:\n- Mo Li is having coffee; shy; currently: Mo is baking.\n- Bo Chen is reading (turning a page); calm\n\nFor each of Mo and Bo, think.";
        let answer: serde_json::Value = serde_json::from_str(&round(prompt)).expect("json");
        let replies = answer["replies"].as_array().expect("a list");
        assert_eq!(replies.len(), 2);
        // Mo was named: Mo answers Ana.
        assert_eq!(replies[0]["name"], "Mo Li");
        assert_eq!(replies[0]["plan"], "text_reply");
        assert!(
            replies[0]["reply"]
                .as_str()
                .is_some_and(|r| r.contains("Ana"))
        );
        // Bo spoke in the last round: Bo lets the others talk.
        assert_eq!(replies[1]["name"], "Bo Chen");
        assert_eq!(replies[1]["plan"], "no_reply");
        // A beat ahead: Mo's answer names Ana, not Bo, and Mo just spoke — Mo plans nothing;
        // Bo hears Mo and may join in (by the hash), never answering himself.
        assert_eq!(replies[0]["then"], "");
        let bo_then = replies[1]["then"].as_str().expect("a string");
        assert!(!bo_then.contains("Bo,"), "{bo_then}");
    }

    #[test]
    fn a_round_asks_those_nearby_to_join_and_a_named_one_joins_with_a_line() {
        let prompt = "A group conversation in the yard. Present: Ana Ruiz, Bo Chen, Di Park.\n\nThe conversation so far:\nBo Chen: Di, come and see the roses!\n\nNew since they last looked:\nBo Chen: Di, come and see the roses!\n\nFollowing it closely:\n- Ana Ruiz is weeding; kind\n\nNearby, not in the talk yet:\n- Di Park is reading; shy\n\nFor each of Ana and Di, think.";
        let answer: serde_json::Value = serde_json::from_str(&round(prompt)).expect("json");
        let replies = answer["replies"].as_array().expect("a list");
        let di = replies
            .iter()
            .find(|r| r["name"] == "Di Park")
            .expect("Di answers");
        assert_eq!(di["plan"], "text_reply", "named, Di joins: {di}");
        assert!(
            di["reply"].as_str().is_some_and(|r| r.contains("Bo")),
            "{di}"
        );
        assert_eq!(di["then"], "");
    }

    #[test]
    fn a_round_plans_the_answer_to_a_line_that_names_a_seat() {
        // Ana is asked by Bo; Cy hears both. Ana answers Bo now; Bo, named by Ana's answer,
        // plans to answer her next.
        let prompt = "A group conversation in the yard. Present: Ana Ruiz, Bo Chen.\n\nThe conversation so far:\nBo Chen: Ana, coffee later?\n\nNew since they last looked:\nBo Chen: Ana, coffee later?\n\nFollowing it closely:\n- Ana Ruiz is weeding; kind\n- Bo Chen is raking; calm\n\nFor each of Ana and Bo, think.";
        let answer: serde_json::Value = serde_json::from_str(&round(prompt)).expect("json");
        let replies = answer["replies"].as_array().expect("a list");
        assert_eq!(replies[0]["plan"], "text_reply");
        let ana = replies[0]["reply"].as_str().expect("a line");
        assert!(ana.contains("Bo"), "{ana}");
        let bo_then = replies[1]["then"].as_str().expect("a string");
        assert!(bo_then.contains("Ana"), "Bo answers Ana next: {bo_then}");
        // And a beat after that, Ana, named by Bo's planned answer, answers him.
        let ana_later = replies[0]["later"].as_str().expect("a string");
        assert!(
            ana_later.contains("Bo"),
            "Ana answers Bo after that: {ana_later}"
        );
    }
}
