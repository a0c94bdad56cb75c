//! The dialogue pipeline's own cost per turn (SPEC §7), beyond model time: a persona with 1,000
//! memories answers a message on an instant backend (the scripted one: planner finish+message,
//! then importance and profile), so what is measured is the ECS side, retrieval, prompt
//! building, parsing and storage.
//!
//! Run with `cargo bench --no-default-features --bench dialogue_turn`. Target: under 5 ms.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use bevy::prelude::*;
use bevy_generative_agents::clock::{SimClock, SimSpeed};
use bevy_generative_agents::dialogue::{DialogueReplied, DialogueRequest};
use bevy_generative_agents::llm::{
    LlmClient, SCRIPTED_EMBEDDING_DIM, hashed_bow_embedding, town_script_backend,
};
use bevy_generative_agents::memory::NewMemory;
use bevy_generative_agents::persona::Mind;
use bevy_generative_agents::testing::{create_test_app, spawn_default_town};
use criterion::{Criterion, criterion_group, criterion_main};

#[derive(Resource, Default)]
struct Replies(u64);

fn setup(memories: usize) -> (App, Entity) {
    let backend = town_script_backend(5).with_responder("dialogue_planner", |_, _| {
        r#"{"action":"finish","message":"Happy to help, see you later."}"#.into()
    });
    let mut app = create_test_app(LlmClient::new(Arc::new(backend)));
    let persona = spawn_default_town(&mut app, Some(1), 5).expect("town")[0];
    {
        let mut clock = app.world_mut().resource_mut::<SimClock>();
        clock.stop_at_step = Some(1);
    }
    for _ in 0..1_000 {
        app.update();
        if app.world().resource::<SimClock>().step() >= 1 {
            break;
        }
    }
    app.world_mut().resource_mut::<SimClock>().speed = SimSpeed::Paused;
    let now = app.world().resource::<SimClock>().now();
    let topics = [
        "bread", "coffee", "garden", "music", "library", "market", "river", "school",
    ];
    {
        let mut mind = app.world_mut().get_mut::<Mind>(persona).expect("mind");
        let state = mind.get_mut().expect("home");
        for i in 0..memories {
            let text = format!(
                "remembered talk number {i} about the {} and the {}",
                topics[i % topics.len()],
                topics[(i / 3) % topics.len()]
            );
            let memory = NewMemory::new(now, ("me", "remembers", "talk"), text.clone())
                .poignancy((i % 10) as u8 + 1)
                .embedding(hashed_bow_embedding(&text, SCRIPTED_EMBEDDING_DIM));
            state
                .associative
                .add_thought(memory, Vec::new())
                .expect("memory added");
        }
    }
    app.init_resource::<Replies>()
        .add_observer(|_: On<DialogueReplied>, mut r: ResMut<Replies>| r.0 += 1);
    (app, persona)
}

fn bench(c: &mut Criterion) {
    let (mut app, persona) = setup(1_000);
    let mut group = c.benchmark_group("dialogue_turn");
    group.measurement_time(Duration::from_secs(8));
    group.bench_function("say_1000_memories", |b| {
        b.iter(|| {
            let before = app.world().resource::<Replies>().0;
            app.world_mut().write_message(DialogueRequest::say(
                persona,
                "Player",
                "Could you tell me about the garden and the market?",
            ));
            while app.world().resource::<Replies>().0 == before {
                app.update();
            }
            black_box(app.world().resource::<Replies>().0)
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
