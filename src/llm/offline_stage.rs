//! The offline stand-in's answers to the stage prompts (SPEC §9), built from what the prompt
//! shows — the actor's own block, the actors it can see, every plan for the narrator — so they
//! fit any scene and any cast. For tests and offline demos; not a language model.
//!
//! - **Actor** (`stage_actor`): low on health (under a third), it backs away; otherwise, by a
//!   hash of its name and the stage it sees, it watches, talks to or attacks someone it sees.
//! - **Narrator** (`stage_resolve`): each plan happens as written; a plan that attacks an actor
//!   by name takes the attacker's attack from the target's health.

use serde_json::json;

use super::scripted::fnv1a_parts;

/// The names in `**Name**:` state lines of `text`, in order.
fn state_names(text: &str) -> Vec<&str> {
    text.split("**")
        .collect::<Vec<_>>()
        .windows(2)
        .filter(|w| w[1].starts_with(':'))
        .map(|w| w[0])
        .filter(|n| !n.is_empty() && n.len() <= 60 && !n.contains('\n'))
        .collect()
}

/// The first integer after `"key": ` in `text`.
fn number_after(text: &str, key: &str) -> Option<i64> {
    let (_, rest) = text.split_once(&format!("\"{key}\": "))?;
    let digits: String = rest
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '-')
        .collect();
    digits.parse().ok()
}

/// An actor's observation and plan, JSON.
pub(super) fn actor(text: &str) -> String {
    let name = text
        .split_once("You are ")
        .and_then(|(_, rest)| rest.split_once(", an actor"))
        .map_or("", |(name, _)| name.trim());
    let stage = text
        .split_once("The stage, as you see it:")
        .map_or("", |(_, s)| s);
    let others: Vec<&str> = state_names(stage)
        .into_iter()
        .filter(|n| *n != name)
        .collect();
    let health = number_after(text, "health").unwrap_or(100);
    let max = number_after(text, "max_health").unwrap_or(100).max(1);
    let answer = match others.first() {
        None => json!({"observation": "Nobody else is here.", "plan": "I look around and wait."}),
        // Something it was told today and the others may not know: it passes it on.
        Some(_) if health * 3 >= max && news(text).is_some() => json!({
            "observation": "Everyone here should hear what I was told.",
            "plan": format!("I tell everyone: {NEWS_OPENER}{}", news(text).unwrap_or_default()),
        }),
        Some(_) if health * 3 < max => json!({
            "observation": "I am badly hurt.",
            "plan": "I back away toward the way out.",
        }),
        Some(_) => {
            let h = fnv1a_parts(&[name, stage]);
            let who = others[(h as usize / 3) % others.len()];
            match h % 3 {
                0 => json!({
                    "observation": format!("{who} is watching me."),
                    "plan": format!("I keep my eyes on {who} and hold my ground."),
                }),
                1 => json!({
                    "observation": format!("{who} looks tense."),
                    "plan": format!("I call out to {who} and try to talk this down."),
                }),
                _ => json!({
                    "observation": format!("{who} is within reach."),
                    "plan": format!("I attack {who}."),
                }),
            }
        }
    };
    answer.to_string()
}

/// How the stand-in passes news on (the group stand-in's words too).
const NEWS_OPENER: &str = "Did you hear? ";

/// What the actor was told in a talk (a remembered `conversation with …` whose first quote
/// has four words or more), as its prompt shows it remembering lately.
fn news(text: &str) -> Option<&str> {
    let (_, lately) = text.split_once(" remembers lately:")?;
    lately
        .trim_start_matches(['\r', '\n'])
        .lines()
        .map_while(|l| l.strip_prefix("- "))
        .filter(|m| m.starts_with("conversation with "))
        .find_map(|m| {
            let told = m.split('"').nth(1)?.trim();
            (told.split_whitespace().count() >= 4).then_some(told)
        })
}

/// "I keep my eyes on Lu." → "keeps their eyes on Lu." (the stand-in's own plans only).
fn third_person(plan: &str) -> String {
    let Some(rest) = plan.strip_prefix("I ") else {
        return format!("does this: {plan}");
    };
    let (verb, tail) = rest.split_once(' ').unwrap_or((rest, ""));
    let verb = verb.trim_end_matches('.');
    let tail = tail
        .replace(" my ", " their ")
        .replace(" and wait", " and waits")
        .replace(" and try ", " and tries ");
    let tail = tail
        .strip_prefix("my ")
        .map_or(tail.clone(), |t| format!("their {t}"));
    if tail.is_empty() {
        format!("{verb}s.")
    } else {
        format!("{verb}s {tail}")
    }
}

/// The narrator's resolution, JSON.
pub(super) fn resolve(text: &str) -> String {
    struct Planned<'a> {
        name: &'a str,
        attack: i64,
        plan: &'a str,
    }
    let mut planned = Vec::new();
    for section in text.split("\n### ").skip(1) {
        let name = section
            .lines()
            .next()
            .unwrap_or("")
            .trim_end_matches(" (hidden)")
            .trim();
        let attack = section
            .split_once("attack ")
            .and_then(|(_, rest)| {
                rest.chars()
                    .take_while(char::is_ascii_digit)
                    .collect::<String>()
                    .parse()
                    .ok()
            })
            .unwrap_or(0);
        let plan = section
            .lines()
            .find_map(|l| l.strip_prefix("- plan: "))
            .unwrap_or("(no plan)");
        planned.push(Planned { name, attack, plan });
    }
    let mut updates = Vec::new();
    let mut told = Vec::new();
    for p in &planned {
        let target = p
            .plan
            .strip_prefix("I attack ")
            .map(|t| t.trim_end_matches('.'));
        match target.and_then(|t| planned.iter().find(|q| q.name == t)) {
            Some(target) => {
                told.push(format!("{} strikes at {}.", p.name, target.name));
                updates.push(json!({"name": target.name, "attributes": {"health": -p.attack}}));
            }
            None => told.push(format!("{} {}", p.name, third_person(p.plan))),
        }
    }
    json!({"summary": told.join(" "), "updates": updates}).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_actor_passes_on_what_it_was_told_in_a_talk() {
        let prompt = "You are Ada Quill, an actor in a scene. Ada is a baker.\n\
            What Ada Quill remembers lately:\n\
            - the oven is hot\n\
            - conversation with Player at 07:10: Player said \"the harvest fair moved to Saturday\"; Ada answered \"oh!\"\n\n\
            Yourself:\n{}\n\nThe stage, as you see it:\n**Ada Quill**: bar\n**Ben Ode**: door\n";
        let answer: serde_json::Value = serde_json::from_str(&actor(prompt)).expect("JSON");
        assert_eq!(
            answer["plan"],
            "I tell everyone: Did you hear? the harvest fair moved to Saturday"
        );
        assert_eq!(news("no memories here"), None);
        let short = prompt.replace("the harvest fair moved to Saturday", "hi there");
        assert_eq!(news(&short), None, "fewer than four words is no news");
    }

    #[test]
    fn the_stand_in_reads_any_cast() {
        let prompt = "You are Mo, an actor in a scene. (x)\n\nYourself:\n{\"attributes\": {\"attack\": 7, \"health\": 90, \"max_health\": 100}}\n\nThe stage, as you see it:\n{\"actor_states\": \"**Mo**: door | standing | -\\n**Lu**: bar | sitting | -\"}";
        let answer: serde_json::Value = serde_json::from_str(&actor(prompt)).expect("JSON");
        assert!(
            answer["plan"].as_str().is_some_and(|p| p.contains("Lu")),
            "{answer}"
        );
        let hurt = prompt.replace("\"health\": 90", "\"health\": 10");
        let answer: serde_json::Value = serde_json::from_str(&actor(&hurt)).expect("JSON");
        assert_eq!(answer["plan"], "I back away toward the way out.");

        let plans = "narrator\n### Mo\n- state: door | standing | -\n- health 90/100, attack 7\n- plan: I attack Lu.\n\n### Lu (hidden)\n- state: bar | sitting | -\n- health 50/100, attack 3\n- plan: I keep still.\n\n";
        let r: serde_json::Value = serde_json::from_str(&resolve(plans)).expect("JSON");
        assert_eq!(
            r["updates"][0],
            json!({"name": "Lu", "attributes": {"health": -7}})
        );
        assert_eq!(r["summary"], "Mo strikes at Lu. Lu keeps still.");
        assert_eq!(
            third_person("I keep my eyes on Lu."),
            "keeps their eyes on Lu."
        );
        assert_eq!(
            third_person("I look around and wait."),
            "looks around and waits."
        );
    }
}
