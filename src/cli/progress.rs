//! The progress bar of `smallville run`: steps, game time and model calls on stderr.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use bevy_generative_agents::llm::LlmClient;
use bevy_generative_agents::output::RunProgress;
use chrono::NaiveDateTime;
use indicatif::{ProgressBar, ProgressStyle};

/// How often the bar's message (game time, model calls) is refreshed.
const REFRESH: Duration = Duration::from_millis(200);

/// An indicatif bar (hidden when stderr is not a terminal).
pub struct ProgressBarWatcher {
    bar: ProgressBar,
    last_refresh: Mutex<Option<Instant>>,
}

impl ProgressBarWatcher {
    /// A bar, not yet sized.
    pub fn new() -> Self {
        let bar = ProgressBar::new(0);
        // The template is a constant; fall back to the default style if it were ever invalid.
        if let Ok(style) = ProgressStyle::with_template(
            "{elapsed_precise} [{bar:30}] {pos}/{len} steps · {msg} · eta {eta}",
        ) {
            bar.set_style(style.progress_chars("=> "));
        }
        Self {
            bar,
            last_refresh: Mutex::new(None),
        }
    }
}

impl RunProgress for ProgressBarWatcher {
    fn started(&self, total: u64) {
        self.bar.set_length(total);
    }

    fn stepped(&self, done: u64, now: NaiveDateTime, client: &LlmClient) {
        self.bar.set_position(done);
        let Ok(mut last) = self.last_refresh.lock() else {
            return;
        };
        if last.is_none_or(|at| at.elapsed() >= REFRESH) && !self.bar.is_hidden() {
            *last = Some(Instant::now());
            let calls = client.usage().totals.calls;
            self.bar.set_message(format!(
                "{} · {calls} LLM calls",
                now.format("%a %b %-d %H:%M")
            ));
        }
    }

    fn note(&self, text: &str) {
        self.bar.set_message(text.to_owned());
    }

    fn finished(&self) {
        self.bar.finish_and_clear();
    }
}
