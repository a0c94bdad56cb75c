//! The report's chart images (feature `charts`): day timelines, model usage, who talked with
//! whom — drawn with `plotters` on its bitmap backend. Without the feature the report has its
//! tables and no images.
//!
//! The record's chart ([`record_chart_svg`]: group lines, talk turns, stage turns and director
//! changes per day) is inline SVG in the HTML, drawn in every build: bars and a few labels need
//! no chart library, and the browser draws its text, so it needs no font either.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use chrono::NaiveDate;

use super::MovementLogData;
use super::report::{ConversationRow, RecordCounts, Segment, escape_html};
use crate::llm::UsageReport;
use crate::persist::PersistError;

/// At most this many game days get a timeline image (the latest ones).
#[cfg(feature = "charts")]
const MAX_TIMELINE_DAYS: usize = 14;

/// Draws every chart into `dir`'s images folder; returns the images (relative to `dir`) and
/// whether they have text (a font was found).
#[cfg(feature = "charts")]
pub(super) fn draw_charts(
    dir: &Path,
    log: &MovementLogData,
    timelines: &BTreeMap<String, Vec<Segment>>,
    usage: &UsageReport,
    conversations: &[ConversationRow],
) -> Result<(Vec<PathBuf>, bool), PersistError> {
    use super::report::IMAGES_DIR;
    use std::collections::BTreeSet;

    let labelled = drawing::fonts_ready();
    let images_dir = dir.join(IMAGES_DIR);
    std::fs::create_dir_all(&images_dir).map_err(|source| PersistError::Io {
        path: images_dir.clone(),
        source,
    })?;
    let mut images = Vec::new();
    let days: BTreeSet<chrono::NaiveDate> = log.lines.iter().map(|l| l.time.date()).collect();
    let skip = days.len().saturating_sub(MAX_TIMELINE_DAYS);
    for day in days.into_iter().skip(skip) {
        let relative = Path::new(IMAGES_DIR).join(format!("timeline-{day}.png"));
        drawing::draw_timeline(&dir.join(&relative), day, timelines, labelled)?;
        images.push(relative);
    }
    let relative = Path::new(IMAGES_DIR).join("llm-usage.png");
    drawing::draw_usage(&dir.join(&relative), usage, labelled)?;
    images.push(relative);
    let relative = Path::new(IMAGES_DIR).join("conversations.png");
    let names: Vec<String> = timelines.keys().cloned().collect();
    drawing::draw_conversations(&dir.join(&relative), &names, conversations, labelled)?;
    images.push(relative);
    Ok((images, labelled))
}

/// Without the `charts` feature: no images (the HTML tables carry every number).
#[cfg(not(feature = "charts"))]
pub(super) fn draw_charts(
    _dir: &Path,
    _log: &MovementLogData,
    _timelines: &BTreeMap<String, Vec<Segment>>,
    _usage: &UsageReport,
    _conversations: &[ConversationRow],
) -> Result<(Vec<PathBuf>, bool), PersistError> {
    Ok((Vec::new(), false))
}

/// At most this many game days get a bar group in the record's chart (the latest ones).
pub(super) const MAX_RECORD_CHART_DAYS: usize = 31;

/// The record's kinds in chart order: the [`RecordCounts`] field's name, the label, the colour.
const RECORD_KINDS: [(&str, &str, (u8, u8, u8)); 4] = [
    ("group_lines", "group lines", (70, 110, 190)),
    ("talk_turns", "talk turns", (90, 160, 110)),
    ("stage_turns", "stage turns", (230, 150, 60)),
    ("director_changes", "director changes", (180, 90, 190)),
];

/// The counts of `c` in [`RECORD_KINDS`] order.
fn record_counts(c: &RecordCounts) -> [u64; 4] {
    [
        c.group_lines,
        c.talk_turns,
        c.stage_turns,
        c.director_changes,
    ]
}

/// `record.jsonl`'s lines per day as an inline SVG bar chart, laid out as the model usage
/// chart is: a title, a row per day (the latest [`MAX_RECORD_CHART_DAYS`]) with a bar per kind
/// — group lines, talk turns, stage turns, director changes — as long as its count against the
/// largest, the count at its end, and a legend. Every bar is a `rect` with `data-day`,
/// `data-kind` (the [`RecordCounts`] field) and `data-count`, and a tooltip; every text is
/// escaped. Empty without days.
pub(super) fn record_chart_svg(per_day: &BTreeMap<NaiveDate, RecordCounts>) -> String {
    use std::fmt::Write as _;
    if per_day.is_empty() {
        return String::new();
    }
    let skip = per_day.len().saturating_sub(MAX_RECORD_CHART_DAYS);
    let days: Vec<(&NaiveDate, &RecordCounts)> = per_day.iter().skip(skip).collect();
    let (left, top, bar_h, gap, width) = (130i64, 56i64, 14i64, 3i64, 900i64);
    let plot_w = width - left - 90;
    let group_h = (bar_h + gap) * RECORD_KINDS.len() as i64 + 12;
    let legend_y = top + group_h * days.len() as i64 + 8;
    let height = legend_y + 30;
    let max = days
        .iter()
        .flat_map(|(_, c)| record_counts(c))
        .max()
        .unwrap_or(0)
        .max(1);
    let mut svg = String::new();
    let _ = write!(
        svg,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"record-chart\" width=\"{width}\" \
         height=\"{height}\" viewBox=\"0 0 {width} {height}\" role=\"img\" \
         font-family=\"sans-serif\"><rect width=\"{width}\" height=\"{height}\" fill=\"white\"/>"
    );
    let title = if skip > 0 {
        format!(
            "Group lines, talk turns, stage turns & director changes per day (the latest {})",
            days.len()
        )
    } else {
        "Group lines, talk turns, stage turns & director changes per day".to_owned()
    };
    let _ = write!(
        svg,
        "<text x=\"{left}\" y=\"28\" font-size=\"16\">{}</text>",
        escape_html(&title)
    );
    for (i, (day, counts)) in days.iter().enumerate() {
        let y0 = top + group_h * i as i64;
        let label = escape_html(&day.format("%a %b %d").to_string());
        let _ = write!(
            svg,
            "<text x=\"8\" y=\"{}\" font-size=\"13\">{label}</text>",
            y0 + 2 * (bar_h + gap) + 2
        );
        for (k, ((field, name, (r, g, b)), count)) in
            RECORD_KINDS.iter().zip(record_counts(counts)).enumerate()
        {
            let y = y0 + (bar_h + gap) * k as i64;
            // Counts come from a file: widths are computed wide, so none can overflow.
            let w = i128::from(count) * i128::from(plot_w) / i128::from(max);
            let _ = write!(
                svg,
                "<rect x=\"{left}\" y=\"{y}\" width=\"{w}\" height=\"{bar_h}\" \
                 fill=\"rgb({r},{g},{b})\" data-day=\"{day}\" data-kind=\"{field}\" \
                 data-count=\"{count}\"><title>{label}: {count} {}</title></rect>\
                 <text x=\"{}\" y=\"{}\" font-size=\"11\">{count}</text>",
                escape_html(name),
                i128::from(left) + w + 4,
                y + bar_h - 3
            );
        }
    }
    for (k, (_, name, (r, g, b))) in RECORD_KINDS.iter().enumerate() {
        let x = left + k as i64 * 170;
        let _ = write!(
            svg,
            "<rect x=\"{x}\" y=\"{legend_y}\" width=\"18\" height=\"14\" \
             fill=\"rgb({r},{g},{b})\"/><text x=\"{}\" y=\"{}\" font-size=\"13\">{}</text>",
            x + 24,
            legend_y + 12,
            escape_html(name)
        );
    }
    svg.push_str("</svg>");
    svg
}

#[cfg(feature = "charts")]
mod drawing {
    use std::collections::BTreeMap;
    use std::path::{Path, PathBuf};
    use std::sync::OnceLock;

    use chrono::{NaiveDate, NaiveDateTime};
    use plotters::prelude::*;
    use plotters::style::FontStyle;

    use super::super::report::Category;
    use super::{ConversationRow, Segment};
    use crate::llm::UsageReport;
    use crate::persist::PersistError;

    fn rgb(category: Category) -> RGBColor {
        let (r, g, b) = category.rgb();
        RGBColor(r, g, b)
    }

    /// Where a font is looked for, in order (after `GA_REPORT_FONT`).
    const FONT_PATHS: &[&str] = &[
        "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
        "/usr/share/fonts/TTF/DejaVuSans.ttf",
        "/usr/share/fonts/dejavu/DejaVuSans.ttf",
        "/usr/share/fonts/dejavu-sans-fonts/DejaVuSans.ttf",
        "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
        "/Library/Fonts/Arial.ttf",
        "C:\\Windows\\Fonts\\arial.ttf",
    ];

    /// The font family name the charts use once a font is registered.
    const FONT: &str = "sans-serif";

    /// Registers a font with plotters once; whether text can be drawn.
    pub(super) fn fonts_ready() -> bool {
        static READY: OnceLock<bool> = OnceLock::new();
        *READY.get_or_init(|| {
            let candidates = std::env::var_os("GA_REPORT_FONT")
                .map(PathBuf::from)
                .into_iter()
                .chain(FONT_PATHS.iter().map(PathBuf::from));
            for path in candidates {
                let Ok(bytes) = crate::files::read_at_most(&path, crate::files::MAX_FONT_BYTES)
                else {
                    continue;
                };
                // Registered fonts live for the whole process (plotters wants `'static` data).
                let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                if plotters::style::register_font(FONT, FontStyle::Normal, bytes).is_ok() {
                    return true;
                }
            }
            bevy::log::warn!(
                "no TrueType font found for report charts (install fonts-dejavu-core or set \
                 GA_REPORT_FONT); charts are drawn without labels"
            );
            false
        })
    }

    fn chart_err(path: &Path) -> impl Fn(String) -> PersistError + '_ {
        move |message| PersistError::Chart {
            path: path.to_owned(),
            message,
        }
    }

    /// Draws `text` when a font is registered.
    fn label<DB: DrawingBackend>(
        area: &DrawingArea<DB, plotters::coord::Shift>,
        labelled: bool,
        text: &str,
        at: (i32, i32),
        size: u32,
    ) -> Result<(), String> {
        if !labelled {
            return Ok(());
        }
        let style = TextStyle::from((FONT, size).into_font()).color(&BLACK);
        area.draw(&Text::new(text.to_owned(), at, style))
            .map_err(|e| e.to_string())
    }

    pub(super) fn draw_timeline(
        path: &Path,
        day: NaiveDate,
        timelines: &BTreeMap<String, Vec<Segment>>,
        labelled: bool,
    ) -> Result<(), PersistError> {
        let err = chart_err(path);
        let rows = timelines.len().max(1) as u32;
        let (left, top, row_h, width) = (170i32, 50i32, 44i32, 1400u32);
        let plot_w = width as i32 - left - 30;
        let height = (top + row_h * rows as i32 + 70) as u32;
        let root = BitMapBackend::new(path, (width, height)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
        label(
            &root,
            labelled,
            &format!("What everyone did on {day}"),
            (left, 12),
            20,
        )
        .map_err(&err)?;
        let day_start = day.and_hms_opt(0, 0, 0).unwrap_or_default();
        let x_of = |t: NaiveDateTime| -> i32 {
            let secs = (t - day_start).num_seconds().clamp(0, 86_400);
            left + (secs * i64::from(plot_w) / 86_400) as i32
        };
        for hour in 0..=24 {
            let x = left + hour * plot_w / 24;
            root.draw(&PathElement::new(
                vec![(x, top - 4), (x, top + row_h * rows as i32)],
                RGBColor(225, 225, 225),
            ))
            .map_err(|e| err(e.to_string()))?;
            if hour % 2 == 0 {
                label(
                    &root,
                    labelled,
                    &format!("{hour:02}"),
                    (x - 8, top + row_h * rows as i32 + 4),
                    13,
                )
                .map_err(&err)?;
            }
        }
        for (i, (name, segments)) in timelines.iter().enumerate() {
            let y0 = top + row_h * i as i32 + 6;
            let y1 = y0 + row_h - 12;
            label(&root, labelled, name, (8, y0 + 8), 15).map_err(&err)?;
            for s in segments {
                if s.end.date() < day || s.start.date() > day {
                    continue;
                }
                let (x0, x1) = (x_of(s.start), x_of(s.end));
                if x1 <= x0 {
                    continue;
                }
                root.draw(&Rectangle::new(
                    [(x0, y0), (x1, y1)],
                    rgb(s.category).filled(),
                ))
                .map_err(|e| err(e.to_string()))?;
            }
        }
        // Legend.
        let legend_y = top + row_h * rows as i32 + 28;
        for (i, category) in Category::ALL.iter().enumerate() {
            let x = left + i as i32 * 150;
            root.draw(&Rectangle::new(
                [(x, legend_y), (x + 18, legend_y + 14)],
                rgb(*category).filled(),
            ))
            .map_err(|e| err(e.to_string()))?;
            label(&root, labelled, category.name(), (x + 24, legend_y), 14).map_err(&err)?;
        }
        root.present().map_err(|e| err(e.to_string()))
    }

    pub(super) fn draw_usage(
        path: &Path,
        usage: &UsageReport,
        labelled: bool,
    ) -> Result<(), PersistError> {
        let err = chart_err(path);
        let kinds: Vec<(&String, &crate::llm::KindUsage)> = usage.kinds.iter().collect();
        let rows = kinds.len().max(1) as i32;
        let (left, top, row_h, width) = (220i32, 50i32, 26i32, 1200u32);
        let panel_w = (width as i32 - left - 160) / 2;
        let height = (top + rows * row_h + 40) as u32;
        let root = BitMapBackend::new(path, (width, height)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
        let max_calls = kinds
            .iter()
            .map(|(_, u)| u.calls + u.cache_hits)
            .max()
            .unwrap_or(0)
            .max(1);
        let max_tokens = kinds
            .iter()
            .map(|(_, u)| u.prompt_tokens + u.completion_tokens)
            .max()
            .unwrap_or(0)
            .max(1);
        label(
            &root,
            labelled,
            "Model calls per prompt kind (grey: from cache)",
            (left, 12),
            16,
        )
        .map_err(&err)?;
        label(
            &root,
            labelled,
            "Tokens (prompt + completion)",
            (left + panel_w + 40, 12),
            16,
        )
        .map_err(&err)?;
        for (i, (kind, u)) in kinds.iter().enumerate() {
            let y0 = top + i as i32 * row_h;
            let y1 = y0 + row_h - 6;
            label(&root, labelled, kind, (8, y0 + 2), 13).map_err(&err)?;
            let calls_w = (u.calls as i64 * panel_w as i64 / max_calls as i64) as i32;
            let hits_w = (u.cache_hits as i64 * panel_w as i64 / max_calls as i64) as i32;
            root.draw(&Rectangle::new(
                [(left, y0), (left + calls_w.max(1), y1)],
                RGBColor(70, 110, 190).filled(),
            ))
            .map_err(|e| err(e.to_string()))?;
            if hits_w > 0 {
                root.draw(&Rectangle::new(
                    [(left + calls_w, y0), (left + calls_w + hits_w, y1)],
                    RGBColor(190, 190, 190).filled(),
                ))
                .map_err(|e| err(e.to_string()))?;
            }
            label(
                &root,
                labelled,
                &format!("{}", u.calls + u.cache_hits),
                (left + calls_w + hits_w + 4, y0 + 2),
                12,
            )
            .map_err(&err)?;
            let x = left + panel_w + 40;
            let tokens = u.prompt_tokens + u.completion_tokens;
            let prompt_w = (u.prompt_tokens as i64 * panel_w as i64 / max_tokens as i64) as i32;
            let completion_w =
                (u.completion_tokens as i64 * panel_w as i64 / max_tokens as i64) as i32;
            root.draw(&Rectangle::new(
                [(x, y0), (x + prompt_w.max(1), y1)],
                RGBColor(90, 160, 110).filled(),
            ))
            .map_err(|e| err(e.to_string()))?;
            root.draw(&Rectangle::new(
                [(x + prompt_w, y0), (x + prompt_w + completion_w.max(1), y1)],
                RGBColor(230, 150, 60).filled(),
            ))
            .map_err(|e| err(e.to_string()))?;
            label(
                &root,
                labelled,
                &format!("{tokens}"),
                (x + prompt_w + completion_w + 4, y0 + 2),
                12,
            )
            .map_err(&err)?;
        }
        root.present().map_err(|e| err(e.to_string()))
    }

    pub(super) fn draw_conversations(
        path: &Path,
        names: &[String],
        conversations: &[ConversationRow],
        labelled: bool,
    ) -> Result<(), PersistError> {
        let err = chart_err(path);
        let (width, height) = (800u32, 800u32);
        let root = BitMapBackend::new(path, (width, height)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
        label(&root, labelled, "Who talked with whom", (20, 12), 20).map_err(&err)?;
        let n = names.len().max(1) as f64;
        let (cx, cy, r) = (400.0f64, 420.0f64, 280.0f64);
        let position = |i: usize| -> (i32, i32) {
            let angle = std::f64::consts::TAU * i as f64 / n - std::f64::consts::FRAC_PI_2;
            ((cx + r * angle.cos()) as i32, (cy + r * angle.sin()) as i32)
        };
        let index: BTreeMap<&str, usize> = names
            .iter()
            .enumerate()
            .map(|(i, n)| (n.as_str(), i))
            .collect();
        let mut pairs: BTreeMap<(usize, usize), u32> = BTreeMap::new();
        for c in conversations {
            if let (Some(&a), Some(&b)) = (
                index.get(c.between.0.as_str()),
                index.get(c.between.1.as_str()),
            ) {
                *pairs.entry((a.min(b), a.max(b))).or_default() += 1;
            }
        }
        for (&(a, b), &count) in &pairs {
            let style =
                ShapeStyle::from(&RGBColor(180, 90, 190)).stroke_width(1 + 2 * count.min(8));
            root.draw(&PathElement::new(vec![position(a), position(b)], style))
                .map_err(|e| err(e.to_string()))?;
            let (pa, pb) = (position(a), position(b));
            label(
                &root,
                labelled,
                &format!("{count}"),
                ((pa.0 + pb.0) / 2 + 6, (pa.1 + pb.1) / 2 - 6),
                16,
            )
            .map_err(&err)?;
        }
        for (i, name) in names.iter().enumerate() {
            let (x, y) = position(i);
            root.draw(&Circle::new((x, y), 14, RGBColor(72, 84, 140).filled()))
                .map_err(|e| err(e.to_string()))?;
            label(&root, labelled, name, (x - 50, y + 20), 15).map_err(&err)?;
        }
        root.present().map_err(|e| err(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn day(d: u32) -> NaiveDate {
        NaiveDate::from_ymd_opt(2023, 2, d).expect("a date")
    }

    /// The `data-day`, `data-kind`, `data-count` and `width` of every bar.
    fn bars(svg: &str) -> Vec<(String, String, u64, i64)> {
        let attr = |rect: &str, name: &str| -> String {
            rect.split(&format!(" {name}=\""))
                .nth(1)
                .and_then(|rest| rest.split('"').next())
                .unwrap_or_default()
                .to_owned()
        };
        svg.split("<rect ")
            .skip(1)
            .filter(|rect| rect.contains("data-kind"))
            .map(|rect| {
                (
                    attr(rect, "data-day"),
                    attr(rect, "data-kind"),
                    attr(rect, "data-count").parse().expect("a count"),
                    attr(rect, "width").parse().expect("a width"),
                )
            })
            .collect()
    }

    #[test]
    fn the_record_chart_has_a_bar_per_kind_per_day_with_escaped_labels() {
        let per_day = BTreeMap::from([
            (
                day(13),
                RecordCounts {
                    group_lines: 120,
                    talk_turns: 3,
                    stage_turns: 0,
                    director_changes: 6,
                },
            ),
            (
                day(14),
                RecordCounts {
                    group_lines: 60,
                    talk_turns: 0,
                    stage_turns: 2,
                    director_changes: 0,
                },
            ),
        ]);
        let svg = record_chart_svg(&per_day);
        assert!(
            svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""),
            "{svg}"
        );
        assert!(svg.ends_with("</svg>"));
        let bars = bars(&svg);
        let kinds = [
            "group_lines",
            "talk_turns",
            "stage_turns",
            "director_changes",
        ];
        let expected: Vec<(String, String, u64)> = [
            ("2023-02-13", [120, 3, 0, 6]),
            ("2023-02-14", [60, 0, 2, 0]),
        ]
        .iter()
        .flat_map(|(d, counts)| {
            kinds
                .iter()
                .zip(counts)
                .map(|(k, c)| ((*d).to_owned(), (*k).to_owned(), *c))
        })
        .collect();
        let got: Vec<(String, String, u64)> = bars
            .iter()
            .map(|(d, k, c, _)| (d.clone(), k.clone(), *c))
            .collect();
        assert_eq!(got, expected, "a bar per kind per day, in order");
        // Lengths by count against the largest: 120 fills the plot, 60 half of it, 0 nothing.
        let width_of = |d: &str, k: &str| {
            bars.iter()
                .find(|(day, kind, ..)| day == d && kind == k)
                .map(|b| b.3)
                .expect("a bar")
        };
        let full = width_of("2023-02-13", "group_lines");
        assert!(full > 500, "{full}");
        assert_eq!(width_of("2023-02-14", "group_lines"), full / 2);
        assert_eq!(width_of("2023-02-13", "stage_turns"), 0);
        assert!(width_of("2023-02-13", "director_changes") > 0);
        // Labels are escaped: the title's "&", and nothing unescaped is left.
        assert!(
            svg.contains("stage turns &amp; director changes per day"),
            "{svg}"
        );
        assert!(!svg.contains(" & "), "{svg}");
        assert!(svg.contains(">Mon Feb 13</text>") && svg.contains(">Tue Feb 14</text>"));
        assert!(
            svg.contains("<title>Mon Feb 13: 120 group lines</title>"),
            "{svg}"
        );
        for name in [
            "group lines",
            "talk turns",
            "stage turns",
            "director changes",
        ] {
            assert!(svg.contains(&format!(">{name}</text>")), "legend {name}");
        }
    }

    #[test]
    fn the_record_chart_shows_the_latest_days_and_nothing_without_a_record() {
        assert_eq!(record_chart_svg(&BTreeMap::new()), "");
        let per_day: BTreeMap<NaiveDate, RecordCounts> = (0..MAX_RECORD_CHART_DAYS as i64 + 5)
            .map(|i| {
                (
                    day(1) + chrono::Duration::days(i),
                    RecordCounts {
                        group_lines: u64::MAX - i as u64,
                        ..Default::default()
                    },
                )
            })
            .collect();
        let svg = record_chart_svg(&per_day);
        let bars = bars(&svg);
        assert_eq!(bars.len(), MAX_RECORD_CHART_DAYS * 4);
        assert_eq!(bars[0].0, (day(1) + chrono::Duration::days(5)).to_string());
        assert!(svg.contains(&format!("(the latest {MAX_RECORD_CHART_DAYS})")));
        // Huge counts stay within the plot.
        assert!(bars.iter().all(|b| (0..=680).contains(&b.3)), "{bars:?}");
    }
}
