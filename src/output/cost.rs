//! What runs cost and what their personas did, side by side (`smallville compare`): the
//! faithful–lean report of lean mode.
//!
//! A [`RunCost`] is read from a run folder's `summary.json` and `usage.json`: per prompt kind
//! the calls and tokens, and four behaviour counts — arenas visited per day, conversations,
//! reflections and schedule items. Everything is divided by the run's **agent-days**
//! (personas × hours / 24), so runs of different lengths and casts compare; [`compare`] takes
//! the mean over each side's runs (several seeds smooth out what one seed's chance does to
//! a handful of conversations) and [`CostComparison::to_markdown`] writes the table.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::llm::{KindUsage, UsageReport};

use super::run::{SUMMARY_FILE, USAGE_FILE};
use super::summary::RunSummary;

/// Largest `summary.json` or `usage.json` read (a longer file is refused, not loaded).
const MAX_FILE_BYTES: u64 = 512 * 1024 * 1024;

/// Why a run folder could not be read.
#[derive(Debug, thiserror::Error)]
pub enum CostError {
    /// A file is missing or unreadable.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A file is not what a run writes.
    #[error("{path}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// One side of a comparison has no run.
    #[error("a comparison needs at least one run on each side")]
    NoRuns,
}

/// What the personas of a run did, in counts.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Behaviour {
    /// Arenas visited, summed over every persona's days.
    pub arenas: f64,
    /// One-to-one conversations held (each side counts its own).
    pub conversations: f64,
    /// Reflections run.
    pub reflections: f64,
    /// Items of the daily schedules.
    pub schedule_items: f64,
}

impl Behaviour {
    /// The four counts with their names, in report order.
    pub fn named(&self) -> [(&'static str, f64); 4] {
        [
            ("arenas visited", self.arenas),
            ("conversations", self.conversations),
            ("reflections", self.reflections),
            ("schedule items", self.schedule_items),
        ]
    }

    fn scaled(&self, by: f64) -> Self {
        Self {
            arenas: self.arenas * by,
            conversations: self.conversations * by,
            reflections: self.reflections * by,
            schedule_items: self.schedule_items * by,
        }
    }

    fn add(&mut self, other: &Self) {
        self.arenas += other.arenas;
        self.conversations += other.conversations;
        self.reflections += other.reflections;
        self.schedule_items += other.schedule_items;
    }
}

/// One run's cost and behaviour.
#[derive(Debug, Clone)]
pub struct RunCost {
    /// The run folder.
    pub dir: PathBuf,
    /// Whether the run was lean.
    pub lean: bool,
    /// Personas × game hours / 24.
    pub agent_days: f64,
    /// The model calls.
    pub usage: UsageReport,
    /// What the personas did.
    pub behaviour: Behaviour,
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, CostError> {
    let io = |source| CostError::Io {
        path: path.to_path_buf(),
        source,
    };
    let text = crate::files::read_text_at_most(path, MAX_FILE_BYTES).map_err(|err| match err {
        crate::files::ReadError::TooLarge { bytes, .. } => CostError::Invalid {
            path: path.to_path_buf(),
            message: format!("{bytes} bytes is more than a run writes ({MAX_FILE_BYTES} at most)"),
        },
        crate::files::ReadError::Io(err) => io(err),
    })?;
    serde_json::from_str(&text).map_err(|err| CostError::Invalid {
        path: path.to_path_buf(),
        message: err.to_string(),
    })
}

impl RunCost {
    /// Reads a run folder (`summary.json` and `usage.json`).
    pub fn load(dir: impl AsRef<Path>) -> Result<Self, CostError> {
        let dir = dir.as_ref();
        let summary: RunSummary = read_json(&dir.join(SUMMARY_FILE))?;
        let usage: UsageReport = read_json(&dir.join(USAGE_FILE))?;
        let agent_days = summary.run.personas.len() as f64 * summary.run.hours / 24.0;
        if !(agent_days.is_finite() && agent_days > 0.0) {
            return Err(CostError::Invalid {
                path: dir.join(SUMMARY_FILE),
                message: "the run has no persona-hours".into(),
            });
        }
        let mut behaviour = Behaviour::default();
        for persona in summary.personas.values() {
            behaviour.reflections += f64::from(persona.reflections);
            behaviour.conversations += persona.conversations.len() as f64;
            for day in &persona.days {
                behaviour.arenas += day.arenas_visited.len() as f64;
                behaviour.schedule_items += day.f_daily_schedule.len() as f64;
            }
        }
        Ok(Self {
            dir: dir.to_path_buf(),
            lean: summary.run.lean,
            agent_days,
            usage,
            behaviour,
        })
    }
}

/// Calls and tokens per agent-day.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Spend {
    /// Model calls (requests that reached the backend).
    pub calls: f64,
    /// Prompt tokens.
    pub prompt_tokens: f64,
    /// Completion tokens.
    pub completion_tokens: f64,
}

impl Spend {
    fn of(usage: &KindUsage, agent_days: f64) -> Self {
        Self {
            calls: usage.calls as f64 / agent_days,
            prompt_tokens: usage.prompt_tokens as f64 / agent_days,
            completion_tokens: usage.completion_tokens as f64 / agent_days,
        }
    }

    /// Prompt and completion tokens.
    pub fn tokens(&self) -> f64 {
        self.prompt_tokens + self.completion_tokens
    }

    fn add(&mut self, other: &Self, weight: f64) {
        self.calls += other.calls * weight;
        self.prompt_tokens += other.prompt_tokens * weight;
        self.completion_tokens += other.completion_tokens * weight;
    }
}

/// Two sides' mean spend per agent-day, per prompt kind and in total, and their behaviour.
#[derive(Debug, Clone, PartialEq)]
pub struct CostComparison {
    /// Runs on each side.
    pub runs: (usize, usize),
    /// Per prompt kind: (base, other).
    pub kinds: BTreeMap<String, (Spend, Spend)>,
    /// All kinds: (base, other).
    pub totals: (Spend, Spend),
    /// Behaviour per agent-day: (base, other).
    pub behaviour: (Behaviour, Behaviour),
}

/// `other / base`, or 1 when both are zero (nothing changed), or infinity.
fn ratio(other: f64, base: f64) -> f64 {
    if base == 0.0 {
        if other == 0.0 { 1.0 } else { f64::INFINITY }
    } else {
        other / base
    }
}

impl CostComparison {
    /// The other side's calls per agent-day over the base's.
    pub fn calls_ratio(&self) -> f64 {
        ratio(self.totals.1.calls, self.totals.0.calls)
    }

    /// The other side's tokens (prompt and completion) per agent-day over the base's.
    pub fn tokens_ratio(&self) -> f64 {
        ratio(self.totals.1.tokens(), self.totals.0.tokens())
    }

    /// Each behaviour count's ratio, other over base.
    pub fn behaviour_ratios(&self) -> [(&'static str, f64); 4] {
        let base = self.behaviour.0.named();
        let other = self.behaviour.1.named();
        std::array::from_fn(|i| (base[i].0, ratio(other[i].1, base[i].1)))
    }

    /// The report: one row per prompt kind (most calls on the base side first), the totals,
    /// and the behaviour counts, all per agent-day.
    pub fn to_markdown(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "Per agent-day, mean of {} base run(s) and {} other run(s).\n",
            self.runs.0, self.runs.1
        );
        out.push_str(
            "| prompt kind | calls (base) | calls (other) | tokens (base) | tokens (other) |\n\
             | --- | ---: | ---: | ---: | ---: |\n",
        );
        let mut kinds: Vec<_> = self.kinds.iter().collect();
        kinds.sort_by(|a, b| {
            b.1.0
                .calls
                .total_cmp(&a.1.0.calls)
                .then(b.1.1.calls.total_cmp(&a.1.1.calls))
                .then(a.0.cmp(b.0))
        });
        for (kind, (base, other)) in kinds {
            let _ = writeln!(
                out,
                "| {kind} | {:.1} | {:.1} | {:.0} | {:.0} |",
                base.calls,
                other.calls,
                base.tokens(),
                other.tokens()
            );
        }
        let (base, other) = &self.totals;
        let _ = writeln!(
            out,
            "| **all** | **{:.1}** | **{:.1}** ({:.0} %) | **{:.0}** | **{:.0}** ({:.0} %) |\n",
            base.calls,
            other.calls,
            100.0 * self.calls_ratio(),
            base.tokens(),
            other.tokens(),
            100.0 * self.tokens_ratio()
        );
        out.push_str("| behaviour | base | other | other / base |\n| --- | ---: | ---: | ---: |\n");
        let base = self.behaviour.0.named();
        let other = self.behaviour.1.named();
        for ((name, b), (_, o)) in base.iter().zip(other.iter()) {
            let _ = writeln!(
                out,
                "| {name} | {b:.2} | {o:.2} | {:.0} % |",
                100.0 * ratio(*o, *b)
            );
        }
        out
    }
}

/// The mean spend and behaviour per agent-day of `base` and of `other`, per prompt kind.
pub fn compare(base: &[RunCost], other: &[RunCost]) -> Result<CostComparison, CostError> {
    if base.is_empty() || other.is_empty() {
        return Err(CostError::NoRuns);
    }
    let kinds: BTreeSet<&String> = base
        .iter()
        .chain(other)
        .flat_map(|run| run.usage.kinds.keys())
        .collect();
    let side = |runs: &[RunCost], kind: Option<&str>| {
        let mut spend = Spend::default();
        let weight = 1.0 / runs.len() as f64;
        for run in runs {
            let usage = match kind {
                Some(kind) => run.usage.kinds.get(kind).copied().unwrap_or_default(),
                None => run.usage.totals,
            };
            spend.add(&Spend::of(&usage, run.agent_days), weight);
        }
        spend
    };
    let behaviour = |runs: &[RunCost]| {
        let mut mean = Behaviour::default();
        for run in runs {
            mean.add(
                &run.behaviour
                    .scaled(1.0 / (run.agent_days * runs.len() as f64)),
            );
        }
        mean
    };
    Ok(CostComparison {
        runs: (base.len(), other.len()),
        kinds: kinds
            .into_iter()
            .map(|kind| {
                (
                    kind.clone(),
                    (side(base, Some(kind)), side(other, Some(kind))),
                )
            })
            .collect(),
        totals: (side(base, None), side(other, None)),
        behaviour: (behaviour(base), behaviour(other)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(calls: u64, tokens: u64, agent_days: f64, reflections: f64) -> RunCost {
        let mut usage = UsageReport::default();
        let kind = KindUsage {
            calls,
            prompt_tokens: tokens,
            ..Default::default()
        };
        usage.kinds.insert("event_poignancy".into(), kind);
        usage.totals = kind;
        RunCost {
            dir: PathBuf::new(),
            lean: false,
            agent_days,
            usage,
            behaviour: Behaviour {
                reflections,
                ..Default::default()
            },
        }
    }

    #[test]
    fn spend_is_compared_per_agent_day_and_averaged_over_runs() {
        // Base: 100 calls over 2 agent-days and 300 over 2 → 50 and 150 per day, mean 100.
        let base = [run(100, 1000, 2.0, 4.0), run(300, 3000, 2.0, 4.0)];
        // Other: 40 calls in one agent-day.
        let other = [run(40, 300, 1.0, 1.0)];
        let c = compare(&base, &other).unwrap();
        assert!((c.totals.0.calls - 100.0).abs() < 1e-9);
        assert!((c.calls_ratio() - 0.4).abs() < 1e-9);
        assert!((c.tokens_ratio() - 0.3).abs() < 1e-9);
        let reflections = c.behaviour_ratios()[2];
        assert_eq!(reflections.0, "reflections");
        assert!(
            (reflections.1 - 0.5).abs() < 1e-9,
            "2 a day against 1: {reflections:?}"
        );
        let table = c.to_markdown();
        assert!(
            table.contains("| event_poignancy | 100.0 | 40.0 |"),
            "{table}"
        );
        assert!(table.contains("(40 %)"), "{table}");
    }

    #[test]
    fn a_side_without_runs_or_a_folder_without_files_is_an_error() {
        assert!(matches!(
            compare(&[], &[run(1, 1, 1.0, 0.0)]),
            Err(CostError::NoRuns)
        ));
        let dir = std::env::temp_dir().join(format!("bga-cost-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let err = RunCost::load(&dir).unwrap_err();
        assert!(err.to_string().contains("summary.json"), "{err}");
        std::fs::write(dir.join(SUMMARY_FILE), "{ not json").unwrap();
        let err = RunCost::load(&dir).unwrap_err();
        assert!(matches!(err, CostError::Invalid { .. }), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
