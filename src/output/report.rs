//! Run reports (SPEC §11): `report.html` with PNG charts, and the numbers as `report.json`.
//!
//! [`write_report`] reads a run folder — `summary.json`, `usage.json` and `movement.jsonl`, as
//! `smallville run` writes them — and, with the `charts` feature (part of `cli`, on by
//! default), draws with `plotters` on its bitmap backend (`output/charts.rs`):
//! - `timeline-<date>.png` per game day: one row per persona, each action a coloured bar from
//!   when it started to when it changed (colours by kind of activity: sleep, routine, meal,
//!   work, social, leisure, other), hours on the axis;
//! - `llm-usage.png`: model calls and tokens per prompt kind;
//! - `conversations.png`: who talked with whom, line width by number of conversations.
//!
//! With a run record (`record.jsonl`), the HTML also charts its group lines, talk turns, stage
//! turns and director changes per day, as inline SVG beside their table (in every build: it
//! needs neither `plotters` nor a font).
//!
//! Text in the images needs a TrueType font: DejaVu Sans (installed by
//! `scripts/install-deps.sh`, package `fonts-dejavu-core`) or the file named by
//! `GA_REPORT_FONT`. Without one the charts are drawn without labels and the HTML says so;
//! the HTML tables carry every label either way. Timelines come from the movement log (what
//! each persona actually did, step by step), so they match a replay.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use chrono::NaiveDateTime;
use serde::{Deserialize, Serialize};

use crate::output::run::{MOVEMENT_FILE, SUMMARY_FILE, USAGE_FILE, UsageFile};
use crate::output::{MovementLogData, RunSummary, read_movement_log};
use crate::persist::PersistError;

/// The HTML report's file name in the run folder.
pub(crate) const REPORT_HTML: &str = "report.html";
/// The numbers' file name in the run folder.
pub(crate) const REPORT_JSON: &str = "report.json";
/// The folder (inside the run folder) holding the charts.
#[cfg(feature = "charts")]
pub(crate) const IMAGES_DIR: &str = "report";

/// A kind of activity, for colours and totals.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Category {
    /// Sleeping.
    Sleep,
    /// Washing, dressing, tidying.
    Routine,
    /// Eating and drinking.
    Meal,
    /// Work and study.
    Work,
    /// Talking, meeting, waiting for someone.
    Social,
    /// Walks, reading, music, the pub.
    Leisure,
    /// Anything else, and no action yet.
    Other,
}

impl Category {
    /// Every category, in legend order.
    pub(crate) const ALL: [Category; 7] = [
        Category::Sleep,
        Category::Routine,
        Category::Meal,
        Category::Work,
        Category::Social,
        Category::Leisure,
        Category::Other,
    ];

    /// The category of an action description (`"act @ address"` or just the act).
    pub fn of(description: &str) -> Self {
        let act = description
            .split(" @ ")
            .next()
            .unwrap_or(description)
            .to_lowercase();
        let tokens: Vec<&str> = act
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .collect();
        // A keyword matches the start of a word ("teach" in "teaching", not "tea" in it);
        // keywords with a space match the phrase.
        let has = |words: &[&str]| {
            words.iter().any(|w| {
                if w.contains(' ') {
                    act.contains(w)
                } else {
                    tokens.iter().any(|t| t.starts_with(w))
                }
            })
        };
        if act.trim().is_empty() {
            Category::Other
        } else if crate::persona::is_sleep_text(&act) || has(&["sleep", "nap", "asleep"]) {
            Category::Sleep
        } else if has(&["chat", "convers", "talk", "meet", "waiting for", "visit"]) {
            Category::Social
        } else if tokens.contains(&"tea")
            || has(&[
                "breakfast",
                "lunch",
                "dinner",
                "eat",
                "meal",
                "snack",
                "coffee",
                "cook",
            ])
        {
            Category::Meal
        } else if has(&[
            "shower", "brush", "dress", "wash", "ready", "routine", "tidy", "clean", "bath",
            "groom", "toilet",
        ]) {
            Category::Routine
        } else if has(&[
            "work",
            "teach",
            "class",
            "study",
            "lectur",
            "serv",
            "writ",
            "research",
            "grade",
            "shift",
            "customer",
            "stock",
            "shelf",
            "shelves",
            "inventory",
            "open",
            "clos",
            "prepar",
            "email",
            "office",
            "paper",
            "homework",
            "lesson",
        ]) {
            Category::Work
        } else if has(&[
            "walk", "park", "read", "piano", "pub", "relax", "garden", "music", "dart", "game",
            "drink", "stroll", "book", "errand", "grocer", "shop",
        ]) {
            Category::Leisure
        } else {
            Category::Other
        }
    }

    /// The category's name.
    pub fn name(self) -> &'static str {
        match self {
            Category::Sleep => "sleep",
            Category::Routine => "routine",
            Category::Meal => "meal",
            Category::Work => "work",
            Category::Social => "social",
            Category::Leisure => "leisure",
            Category::Other => "other",
        }
    }

    /// Its colour in charts and the HTML, as RGB.
    pub(super) fn rgb(self) -> (u8, u8, u8) {
        match self {
            Category::Sleep => (72, 84, 140),
            Category::Routine => (120, 180, 220),
            Category::Meal => (240, 170, 60),
            Category::Work => (200, 80, 70),
            Category::Social => (180, 90, 190),
            Category::Leisure => (90, 170, 90),
            Category::Other => (170, 170, 170),
        }
    }

    fn css(self) -> String {
        let (r, g, b) = self.rgb();
        format!("#{r:02x}{g:02x}{b:02x}")
    }
}

/// One stretch of a persona's log with the same action.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Segment {
    /// When it started.
    pub start: NaiveDateTime,
    /// When the next action started (or the log ended).
    pub end: NaiveDateTime,
    /// `"act @ address"`.
    pub description: String,
    /// Its category.
    pub category: Category,
}

impl Segment {
    pub(super) fn minutes(&self) -> f64 {
        (self.end - self.start).num_seconds() as f64 / 60.0
    }
}

/// Each persona's actions over the log, in order.
pub(crate) fn timelines(log: &MovementLogData) -> BTreeMap<String, Vec<Segment>> {
    let step_secs = match (log.lines.first(), log.lines.get(1)) {
        (Some(a), Some(b)) => (b.time - a.time).num_seconds().max(1),
        _ => 10,
    };
    let Some(last) = log.lines.last() else {
        return BTreeMap::new();
    };
    let end_of_log = last.time + chrono::Duration::seconds(step_secs);
    let mut out: BTreeMap<String, Vec<Segment>> = BTreeMap::new();
    for line in &log.lines {
        for (name, delta) in &line.personas {
            let Some(description) = &delta.description else {
                continue;
            };
            let segments = out.entry(name.clone()).or_default();
            if let Some(previous) = segments.last_mut() {
                previous.end = line.time;
            }
            segments.push(Segment {
                start: line.time,
                end: end_of_log,
                description: description.clone(),
                category: Category::of(description),
            });
        }
    }
    for segments in out.values_mut() {
        segments.retain(|s| s.end > s.start);
    }
    out
}

/// One persona's numbers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PersonaReport {
    /// Minutes per category over the log.
    pub minutes_by_category: BTreeMap<Category, f64>,
    /// The longest activities (act only, summed), longest first, at most 12.
    pub top_activities: Vec<(String, f64)>,
    /// Distinct actions started.
    pub actions: usize,
    /// Tiles walked (tile changes in the log).
    pub tiles_walked: u64,
    /// Conversations held (from the summary).
    pub conversations: usize,
    /// Reflections run (from the summary).
    pub reflections: u32,
}

/// Model use of one prompt kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct KindNumbers {
    /// Calls that reached the backend.
    pub calls: u64,
    /// Answers from the cache.
    pub cache_hits: u64,
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Completion tokens.
    pub completion_tokens: u64,
    /// Fail-safes used.
    pub fail_safes: u64,
}

/// One conversation (each is listed once, not once per side).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConversationRow {
    /// When it started.
    pub start: NaiveDateTime,
    /// The two personas, sorted.
    pub between: (String, String),
    /// Lines spoken.
    pub lines: usize,
    /// One line summing it up (the first side's).
    pub summary: String,
}

/// Everything `report.json` holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunReportData {
    /// First and last step of the log.
    pub steps: (u64, u64),
    /// Game time of the first and last step.
    pub time: (NaiveDateTime, NaiveDateTime),
    /// The backend and model.
    pub backend: String,
    /// The chat model.
    pub model: String,
    /// The prompt library's version and override files (`None` for run folders written before
    /// `usage.json` recorded them).
    #[serde(default)]
    pub prompts: Option<crate::prompt::PromptProvenance>,
    /// Per persona.
    pub personas: BTreeMap<String, PersonaReport>,
    /// Model use per prompt kind.
    pub llm_kinds: BTreeMap<String, KindNumbers>,
    /// Model use in total.
    pub llm_totals: KindNumbers,
    /// Per server of a pool of model servers (empty for one server or an offline backend).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub llm_endpoints: Vec<crate::llm::EndpointUsage>,
    /// Conversations, oldest first.
    pub conversations: Vec<ConversationRow>,
    /// What the seed systems did each day, from `record.jsonl` (empty without one).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub record_per_day: BTreeMap<chrono::NaiveDate, RecordCounts>,
    /// The images, relative to the run folder.
    pub images: Vec<PathBuf>,
    /// Whether the images have text (a font was found).
    pub labelled: bool,
}

/// How many of each kind of `record.jsonl` line one day holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RecordCounts {
    /// Lines said in group conversations.
    pub group_lines: u64,
    /// Talk turns answered.
    pub talk_turns: u64,
    /// Stage turns resolved.
    pub stage_turns: u64,
    /// The director's state changes.
    pub director_changes: u64,
}

/// `record.jsonl`'s lines counted per day of game time (none when the folder has no record).
fn record_per_day(dir: &Path) -> Result<BTreeMap<chrono::NaiveDate, RecordCounts>, PersistError> {
    use super::record::{Happened, RECORD_FILE, read_record};
    let path = dir.join(RECORD_FILE);
    if !path.exists() {
        return Ok(BTreeMap::new());
    }
    let lines = read_record(&path).map_err(|message| PersistError::Invalid {
        file: path.clone(),
        field: String::new(),
        message,
    })?;
    let mut days: BTreeMap<chrono::NaiveDate, RecordCounts> = BTreeMap::new();
    for line in lines {
        let day = days.entry(line.time.date()).or_default();
        let count = match line.what {
            Happened::GroupLine { .. } => &mut day.group_lines,
            Happened::TalkTurn { .. } => &mut day.talk_turns,
            Happened::StageTurn { .. } => &mut day.stage_turns,
            Happened::DirectorState { .. } => &mut day.director_changes,
        };
        *count += 1;
    }
    Ok(days)
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, PersistError> {
    let bytes = crate::persist::files::read_file(path)?;
    crate::persist::format::parse(path, &bytes)
}

fn numbers(u: &crate::llm::KindUsage) -> KindNumbers {
    KindNumbers {
        calls: u.calls,
        cache_hits: u.cache_hits,
        prompt_tokens: u.prompt_tokens,
        completion_tokens: u.completion_tokens,
        fail_safes: u.fail_safes,
    }
}

/// Reads the run folder `dir`, writes the charts, `report.html` and `report.json`, and returns
/// the numbers. See the [module docs](self).
pub fn write_report(dir: &Path) -> Result<RunReportData, PersistError> {
    let summary: RunSummary = read_json(&dir.join(SUMMARY_FILE))?;
    let UsageFile { usage, prompts }: UsageFile = read_json(&dir.join(USAGE_FILE))?;
    let movement_path = dir.join(MOVEMENT_FILE);
    let log = read_movement_log(&movement_path).map_err(|err| PersistError::Invalid {
        file: movement_path.clone(),
        field: String::new(),
        message: err.to_string(),
    })?;
    let (Some(first), Some(last)) = (log.lines.first(), log.lines.last()) else {
        return Err(PersistError::Invalid {
            file: movement_path,
            field: String::new(),
            message: "the movement log is empty".into(),
        });
    };
    let timelines = timelines(&log);

    let mut personas = BTreeMap::new();
    for (name, segments) in &timelines {
        let mut minutes_by_category: BTreeMap<Category, f64> = BTreeMap::new();
        let mut by_activity: BTreeMap<String, f64> = BTreeMap::new();
        for s in segments {
            *minutes_by_category.entry(s.category).or_default() += s.minutes();
            let act = s.description.split(" @ ").next().unwrap_or("").to_owned();
            *by_activity.entry(act).or_default() += s.minutes();
        }
        let mut top_activities: Vec<(String, f64)> = by_activity.into_iter().collect();
        top_activities.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        top_activities.truncate(12);
        let tiles_walked = log
            .lines
            .iter()
            .skip(1)
            .filter(|l| l.personas.get(name).is_some_and(|d| d.tile.is_some()))
            .count() as u64;
        let from_summary = summary.personas.get(name);
        personas.insert(
            name.clone(),
            PersonaReport {
                minutes_by_category,
                top_activities,
                actions: segments.len(),
                tiles_walked,
                conversations: from_summary.map_or(0, |p| p.conversations.len()),
                reflections: from_summary.map_or(0, |p| p.reflections),
            },
        );
    }

    let mut seen = BTreeSet::new();
    let mut conversations = Vec::new();
    for (name, p) in &summary.personas {
        for c in &p.conversations {
            let between = if *name <= c.with {
                (name.clone(), c.with.clone())
            } else {
                (c.with.clone(), name.clone())
            };
            if seen.insert((c.start, between.clone())) {
                conversations.push(ConversationRow {
                    start: c.start,
                    between,
                    lines: c.lines,
                    summary: c.summary.clone(),
                });
            }
        }
    }
    conversations.sort_by(|a, b| (a.start, &a.between).cmp(&(b.start, &b.between)));

    let (images, labelled) =
        super::charts::draw_charts(dir, &log, &timelines, &usage, &conversations)?;
    let record_per_day = record_per_day(dir)?;

    let data = RunReportData {
        steps: (first.step, last.step),
        time: (first.time, last.time),
        backend: usage.backend.clone(),
        model: usage.model.clone(),
        prompts,
        personas,
        llm_kinds: usage
            .kinds
            .iter()
            .map(|(k, u)| (k.clone(), numbers(u)))
            .collect(),
        llm_totals: numbers(&usage.totals),
        llm_endpoints: usage.endpoints.clone(),
        conversations,
        record_per_day,
        images,
        labelled,
    };
    let json_path = dir.join(REPORT_JSON);
    let mut json = serde_json::to_vec_pretty(&data).map_err(|err| PersistError::Invalid {
        file: json_path.clone(),
        field: String::new(),
        message: err.to_string(),
    })?;
    json.push(b'\n');
    write_file(&json_path, &json)?;
    let html = render_html(&data, &summary, &timelines);
    write_file(&dir.join(REPORT_HTML), html.as_bytes())?;
    Ok(data)
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<(), PersistError> {
    crate::output::write_atomic(path, bytes).map_err(|source| PersistError::Io {
        path: path.to_owned(),
        source,
    })
}

/// Escapes text for HTML.
pub(crate) fn escape_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn hm(minutes: f64) -> String {
    let m = minutes.round() as i64;
    format!("{}:{:02}", m / 60, m % 60)
}

/// The HTML report: the run's header, each persona's day, the model calls, the conversations.
fn render_html(
    data: &RunReportData,
    summary: &RunSummary,
    timelines: &BTreeMap<String, Vec<Segment>>,
) -> String {
    let mut h = String::new();
    html_header(&mut h, data, summary);
    html_days(&mut h, data, timelines);
    html_model_calls(&mut h, data);
    html_conversations(&mut h, data);
    h.push_str("</body></html>\n");
    h
}

/// `<img>` tags for the report's images whose file name satisfies `pick`.
fn html_images(h: &mut String, data: &RunReportData, pick: impl Fn(&str) -> bool, attrs: &str) {
    use std::fmt::Write as _;
    for image in &data.images {
        let name = image
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if pick(&name) {
            let _ = writeln!(
                h,
                "<img src=\"{}\" {attrs}>",
                escape_html(&image.to_string_lossy())
            );
        }
    }
}

/// The document head and the run's one-paragraph summary, with what the reader must know
/// about the backend and the charts.
fn html_header(h: &mut String, data: &RunReportData, summary: &RunSummary) {
    use std::fmt::Write as _;
    let _ = write!(
        h,
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>Run report</title>\n\
         <style>body{{font-family:sans-serif;margin:2em;max-width:1450px}}\
         table{{border-collapse:collapse;margin:1em 0}}td,th{{border:1px solid #ccc;\
         padding:3px 8px;text-align:left}}th{{background:#eee}}img{{max-width:100%;\
         border:1px solid #ddd;margin:0.5em 0}}.sw{{display:inline-block;width:12px;\
         height:12px;margin-right:4px}}</style></head><body>\n"
    );
    let _ = writeln!(
        h,
        "<h1>Run report</h1>\n<p>Steps {}–{} ({} – {}), backend <b>{}</b>, model <b>{}</b>, \
         {} personas, seed {}.</p>",
        data.steps.0,
        data.steps.1,
        data.time.0,
        data.time.1,
        escape_html(&data.backend),
        escape_html(&data.model),
        data.personas.len(),
        summary.run.seed
    );
    let _ = writeln!(
        h,
        "<p>Prompts: {}.</p>",
        data.prompts
            .as_ref()
            .map_or_else(|| "not recorded".to_owned(), |p| escape_html(&p.describe()))
    );
    if data.backend == "scripted" {
        h.push_str(
            "<p><i>The backend was the offline scripted town script — canned, deterministic \
             answers, not a language model.</i></p>\n",
        );
    }
    if data.images.is_empty() {
        h.push_str(
            "<p><i>This build draws no charts (the <code>charts</code> feature is off); the \
             tables below have every number.</i></p>\n",
        );
    } else if !data.labelled {
        h.push_str(
            "<p><i>No TrueType font was found, so the charts have no labels; the tables \
             below have every number.</i></p>\n",
        );
    }
}

/// Each persona's day: the timelines, minutes by kind of activity, every action.
fn html_days(h: &mut String, data: &RunReportData, timelines: &BTreeMap<String, Vec<Segment>>) {
    use std::fmt::Write as _;
    h.push_str("<h2>Each persona's day</h2>\n<p>");
    for c in Category::ALL {
        let _ = write!(
            h,
            "<span class=\"sw\" style=\"background:{}\"></span>{} &nbsp; ",
            c.css(),
            c.name()
        );
    }
    h.push_str("</p>\n");
    html_images(
        h,
        data,
        |name| name.starts_with("timeline"),
        "alt=\"timeline\"",
    );
    h.push_str(
        "<table><tr><th>persona</th><th>actions</th><th>tiles walked</th>\
         <th>conversations</th><th>reflections</th>",
    );
    for c in Category::ALL {
        let _ = write!(h, "<th>{}</th>", c.name());
    }
    h.push_str("</tr>\n");
    for (name, p) in &data.personas {
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>",
            escape_html(name),
            p.actions,
            p.tiles_walked,
            p.conversations,
            p.reflections
        );
        for c in Category::ALL {
            let _ = write!(
                h,
                "<td>{}</td>",
                hm(p.minutes_by_category.get(&c).copied().unwrap_or(0.0))
            );
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</table>\n");
    for (name, segments) in timelines {
        let _ = writeln!(
            h,
            "<details><summary>{} — {} actions</summary><table><tr><th>from</th><th>to</th>\
             <th>action</th></tr>",
            escape_html(name),
            segments.len()
        );
        for s in segments {
            let _ = writeln!(
                h,
                "<tr><td>{}</td><td>{}</td><td><span class=\"sw\" style=\"background:{}\">\
                 </span>{}</td></tr>",
                s.start.format("%a %H:%M"),
                s.end.format("%a %H:%M"),
                s.category.css(),
                escape_html(&s.description)
            );
        }
        h.push_str("</table></details>\n");
    }
}

/// Model calls and tokens per prompt kind, and the total.
fn html_model_calls(h: &mut String, data: &RunReportData) {
    use std::fmt::Write as _;
    h.push_str("<h2>Model calls and tokens per prompt kind</h2>\n");
    html_images(h, data, |name| name == "llm-usage.png", "alt=\"usage\"");
    h.push_str(
        "<table><tr><th>kind</th><th>calls</th><th>cache hits</th><th>prompt tokens</th>\
         <th>completion tokens</th><th>fail-safes</th></tr>\n",
    );
    let rows = data
        .llm_kinds
        .iter()
        .map(|(k, n)| (k.as_str(), n))
        .chain(std::iter::once(("total", &data.llm_totals)));
    for (kind, n) in rows {
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape_html(kind),
            n.calls,
            n.cache_hits,
            n.prompt_tokens,
            n.completion_tokens,
            n.fail_safes
        );
    }
    h.push_str("</table>\n");
    html_endpoints(h, data);
}

/// Calls, errors, latency and health per model server, when the run used a pool.
fn html_endpoints(h: &mut String, data: &RunReportData) {
    use std::fmt::Write as _;
    if data.llm_endpoints.is_empty() {
        return;
    }
    h.push_str("<h2>Model servers</h2>\n");
    h.push_str(
        "<table><tr><th>pool</th><th>server</th><th>model</th><th>weight</th><th>calls</th>\
         <th>errors</th><th>429s</th><th>mean ms</th><th>max ms</th><th>ejections</th>\
         <th>re-admissions</th><th>affinity hits</th></tr>\n",
    );
    for e in &data.llm_endpoints {
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td>{:.0}</td><td>{}</td><td>{}</td><td>{}</td><td>{}/{}</td></tr>",
            escape_html(&e.pool),
            escape_html(&e.url),
            escape_html(&e.model),
            e.weight,
            e.calls,
            e.errors,
            e.rate_limited,
            e.mean_latency_ms(),
            e.max_latency_ms,
            e.ejections,
            e.readmissions,
            e.affinity_hits,
            e.affinity_calls
        );
    }
    h.push_str("</table>\n");
}

/// Who talked with whom, when, and about what.
fn html_conversations(h: &mut String, data: &RunReportData) {
    use std::fmt::Write as _;
    h.push_str("<h2>Conversations</h2>\n");
    html_images(
        h,
        data,
        |name| name == "conversations.png",
        "alt=\"conversations\" style=\"max-width:600px\"",
    );
    h.push_str("<table><tr><th>when</th><th>between</th><th>lines</th><th>summary</th></tr>\n");
    for c in &data.conversations {
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{} — {}</td><td>{}</td><td>{}</td></tr>",
            c.start.format("%a %H:%M"),
            escape_html(&c.between.0),
            escape_html(&c.between.1),
            c.lines,
            escape_html(&c.summary)
        );
    }
    if data.conversations.is_empty() {
        h.push_str("<tr><td colspan=\"4\">none</td></tr>\n");
    }
    h.push_str("</table>\n");
    html_record(h, data);
}

/// The seed systems' day by day, from `record.jsonl` (SPEC §16): the chart, then the table.
fn html_record(h: &mut String, data: &RunReportData) {
    use std::fmt::Write as _;
    if data.record_per_day.is_empty() {
        return;
    }
    h.push_str("<h2>Group talk, talks, scenes and directives</h2>\n");
    h.push_str(&super::charts::record_chart_svg(&data.record_per_day));
    h.push_str(
        "\n<table><tr><th>day</th>\
         <th>group lines</th><th>talk turns</th><th>stage turns</th>\
         <th>director changes</th></tr>\n",
    );
    for (day, c) in &data.record_per_day {
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            day.format("%a %b %d"),
            c.group_lines,
            c.talk_turns,
            c.stage_turns,
            c.director_changes
        );
    }
    h.push_str("</table>\n");
}

#[cfg(test)]
mod tests {
    use chrono::Timelike;
    /// The hour of day of `time` as a fraction.
    fn hour_of_day(time: NaiveDateTime) -> f64 {
        f64::from(time.hour()) + f64::from(time.minute()) / 60.0 + f64::from(time.second()) / 3600.0
    }

    use super::*;
    use crate::output::parse_movement_log;

    fn log(text: &str) -> MovementLogData {
        parse_movement_log(std::io::Cursor::new(text)).expect("valid log")
    }

    #[test]
    fn categories_follow_the_words() {
        assert_eq!(Category::of("sleeping @ w:h:bedroom:bed"), Category::Sleep);
        assert_eq!(
            Category::of("having breakfast @ w:h:kitchen"),
            Category::Meal
        );
        assert_eq!(
            Category::of("teaching a class @ w:c:classroom"),
            Category::Work
        );
        assert_eq!(
            Category::of("chatting with Bo @ w:p:park"),
            Category::Social
        );
        assert_eq!(
            Category::of("taking a shower @ w:h:bathroom"),
            Category::Routine
        );
        assert_eq!(
            Category::of("walking in the park @ w:p:park"),
            Category::Leisure
        );
        assert_eq!(Category::of(""), Category::Other);
        assert_eq!(Category::of("pondering @ x"), Category::Other);
    }

    #[test]
    fn timelines_cut_segments_where_the_action_changes() {
        let text = concat!(
            r#"{"step":0,"time":"2023-02-13T07:00:00","personas":{"A":{"tile":[1,1],"emoji":"z","description":"sleeping @ b","chat":null}}}"#,
            "\n",
            r#"{"step":1,"time":"2023-02-13T07:00:10","personas":{"A":{"tile":[1,2]}}}"#,
            "\n",
            r#"{"step":2,"time":"2023-02-13T07:00:20","personas":{"A":{"description":"eating breakfast @ k"}}}"#,
            "\n",
            r#"{"step":3,"time":"2023-02-13T07:00:30","personas":{}}"#,
            "\n"
        );
        let t = timelines(&log(text));
        let a = t.get("A").expect("A");
        assert_eq!(a.len(), 2);
        assert_eq!(a[0].category, Category::Sleep);
        assert_eq!((a[0].end - a[0].start).num_seconds(), 20);
        assert_eq!(a[1].category, Category::Meal);
        // The last action lasts until one step after the last line.
        assert_eq!((a[1].end - a[1].start).num_seconds(), 20);
        assert!((hour_of_day(a[1].start) - (7.0 + 20.0 / 3600.0)).abs() < 1e-9);
    }

    #[test]
    fn html_is_escaped() {
        assert_eq!(
            escape_html("<a href='x'>&\"</a>"),
            "&lt;a href=&#39;x&#39;&gt;&amp;&quot;&lt;/a&gt;"
        );
        assert_eq!(hm(61.4), "1:01");
    }
}
