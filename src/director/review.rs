//! The reviewer's facts: who was where, measured in the town while a directive runs, never
//! asked of a model. Each [`OutcomeCheck`] (an arena and a window of game time) collects the
//! personas seen standing in that arena during the window; the review lists them, and the
//! model only writes the prose around them.

use std::collections::BTreeSet;

use chrono::NaiveDateTime;
use serde::{Deserialize, Serialize};

use super::plan::OutcomeCheck;

/// One check and what the town showed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckResult {
    /// The check.
    pub check: OutcomeCheck,
    /// The arena it resolved to (`world:sector:arena`), if it did.
    pub arena: Option<String>,
    /// Who was seen there in the window, by name.
    pub present: BTreeSet<String>,
}

impl CheckResult {
    /// A check with nobody seen yet.
    pub fn new(check: OutcomeCheck, arena: Option<String>) -> Self {
        Self {
            check,
            arena,
            present: BTreeSet::new(),
        }
    }

    /// Notes who stands where at `now` (`(name, arena)` pairs).
    pub fn observe<'a>(
        &mut self,
        now: NaiveDateTime,
        positions: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) {
        let Some(arena) = &self.arena else { return };
        if now < self.check.from || now > self.check.to {
            return;
        }
        for (name, at) in positions {
            if at == arena {
                self.present.insert(name.to_string());
            }
        }
    }

    /// The check as the review prompt and the report show it.
    pub fn line(&self) -> String {
        let who: Vec<&str> = self.present.iter().map(String::as_str).collect();
        format!(
            "at {} from {} to {}: {} present{}{}",
            self.arena.as_deref().unwrap_or(&self.check.place),
            self.check.from.format("%Y-%m-%d %H:%M"),
            self.check.to.format("%Y-%m-%d %H:%M"),
            who.len(),
            if who.is_empty() { "" } else { " — " },
            who.join(", ")
        )
    }
}

/// The reviewer's report.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Review {
    /// Steps done.
    pub steps_done: usize,
    /// Steps failed.
    pub steps_failed: usize,
    /// Steps skipped (their condition did not hold, or a step they depend on did not run).
    pub steps_skipped: usize,
    /// The checks, measured.
    pub checks: Vec<CheckResult>,
    /// The prose (the model's, or the fail-safe listing).
    pub summary: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> NaiveDateTime {
        NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M").expect("time")
    }

    #[test]
    fn presence_counts_only_inside_the_window_and_the_arena() {
        let check = OutcomeCheck {
            place: "cafe".into(),
            from: t("2023-02-14 17:00"),
            to: t("2023-02-14 19:00"),
        };
        let mut result = CheckResult::new(check, Some("T:Cafe:main room".into()));
        result.observe(t("2023-02-14 16:59"), [("Ada", "T:Cafe:main room")]);
        result.observe(
            t("2023-02-14 17:30"),
            [("Ben", "T:Cafe:main room"), ("Cy", "T:Park:lawn")],
        );
        result.observe(t("2023-02-14 19:00"), [("Di", "T:Cafe:main room")]);
        result.observe(t("2023-02-14 19:01"), [("Ed", "T:Cafe:main room")]);
        let names: Vec<&str> = result.present.iter().map(String::as_str).collect();
        assert_eq!(names, vec!["Ben", "Di"]);
        assert!(
            result.line().contains("2 present — Ben, Di"),
            "{}",
            result.line()
        );
        let mut unresolved = CheckResult::new(result.check.clone(), None);
        unresolved.observe(t("2023-02-14 17:30"), [("Ben", "T:Cafe:main room")]);
        assert!(unresolved.present.is_empty());
    }
}
