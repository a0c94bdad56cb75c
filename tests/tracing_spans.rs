//! Tracing: at `bevy_generative_agents=debug` every persona thought runs in a
//! `thought{persona, step}` span and every model call in a `model_call{kind, latency_ms, …}`
//! span inside it, whichever thread polls the thought. Checked with a subscriber layer that
//! writes down each debug line with the spans around it.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};

use bevy::log::tracing::field::{Field, Visit};
use bevy::log::tracing::span::{Attributes, Id, Record};
use bevy::log::tracing::{Event, Level, Subscriber};
use bevy::log::tracing_subscriber::filter::Targets;
use bevy::log::tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use bevy::log::tracing_subscriber::registry::LookupSpan;
use bevy::prelude::*;
use bevy_generative_agents::clock::SimClock;
use bevy_generative_agents::testing::{create_test_app, scripted_client, spawn_default_town};

/// A span's or an event's fields, by name.
#[derive(Default, Clone)]
struct Fields(BTreeMap<String, String>);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(
            field.name().to_string(),
            format!("{value:?}").trim_matches('"').to_string(),
        );
    }
}

impl Fields {
    fn text(&self) -> String {
        let mut out = String::new();
        for (key, value) in &self.0 {
            let _ = write!(
                out,
                "{}{key}={value}",
                if out.is_empty() { "" } else { " " }
            );
        }
        out
    }
}

/// Writes down every event as `span{fields}:span{fields} :: event fields`.
struct Lines(Arc<Mutex<Vec<String>>>);

impl<S> Layer<S> for Lines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        attrs.record(&mut fields);
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(fields);
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id)
            && let Some(fields) = span.extensions_mut().get_mut::<Fields>()
        {
            values.record(fields);
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        let scope: Vec<String> = ctx
            .event_scope(event)
            .map(|scope| {
                scope
                    .from_root()
                    .map(|span| {
                        let fields = span
                            .extensions()
                            .get::<Fields>()
                            .map(Fields::text)
                            .unwrap_or_default();
                        format!("{}{{{fields}}}", span.name())
                    })
                    .collect()
            })
            .unwrap_or_default();
        if let Ok(mut lines) = self.0.lock() {
            lines.push(format!("{} :: {}", scope.join(":"), fields.text()));
        }
    }
}

#[test]
fn thoughts_and_model_calls_run_in_spans_naming_the_persona_the_step_and_the_latency() {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let subscriber = bevy::log::tracing_subscriber::registry()
        .with(Lines(lines.clone()))
        .with(Targets::new().with_target("bevy_generative_agents", Level::DEBUG));
    bevy::log::tracing::subscriber::set_global_default(subscriber)
        .expect("the only subscriber of this test binary");

    let mut app = create_test_app(scripted_client(3));
    spawn_default_town(&mut app, Some(3), 3).expect("the default town loads");
    app.world_mut().resource_mut::<SimClock>().stop_at_step = Some(30);
    while app.world().resource::<SimClock>().step() < 30 {
        app.update();
    }

    let lines = lines.lock().expect("lines").clone();
    let calls: Vec<&String> = lines
        .iter()
        .filter(|l| l.ends_with("message=model call done"))
        .collect();
    assert!(calls.len() > 10, "few model calls seen: {lines:#?}");
    // Each model call sits in the thought of a persona, at a step, and says its kind and
    // latency.
    let names = ["Elena Reyes", "Mira Okafor", "Priya Natarajan"];
    for call in &calls {
        let (scope, _) = call.split_once(" :: ").expect("scoped");
        assert!(scope.starts_with("thought{persona="), "{call}");
        assert!(scope.contains(" step="), "{call}");
        assert!(
            scope.contains(":model_call{attempts=1 fail_safe=false kind="),
            "{call}"
        );
        assert!(scope.contains(" latency_ms="), "{call}");
    }
    for name in names {
        assert!(
            calls
                .iter()
                .any(|c| c.starts_with(&format!("thought{{persona={name} step=0}}:model_call{{"))),
            "no model call in {name}'s first thought"
        );
    }
    // The first thought plans the day: its wake-up hour is asked in a span of that kind.
    assert!(calls.iter().any(|c| c.contains("kind=wake_up_hour")));
    // And each thought ends with a line of its own.
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("thought{persona=") && l.contains("message=thought done"))
    );
}
