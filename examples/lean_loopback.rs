//! Lean mode's bill on the wire: the default town's first five personas live the same game
//! hours faithful and lean, each against a loopback OpenAI-compatible server (the crate's
//! `FakeOpenAi` on 127.0.0.1, answering with the offline town script), and the two are set
//! side by side per prompt kind — calls, prompt and completion tokens per agent-day, and the
//! behaviour that must not move.
//!
//! ```sh
//! cargo run --release --no-default-features --features http --example lean_loopback -- 48 3
//! #                                                                    game hours ^   ^ seeds
//! # a third argument names the folder for the runs (default target/lean-loopback)
//! ```
//!
//! Over HTTP every question is generated text: the choice kinds (`action_sector`,
//! `action_place`, `decide_to_talk`, …), which the scripted backend scores without tokens,
//! cost their prompt here, and embeddings report their input tokens. The answers are the
//! town script's — deterministic canned text, not a language model — so the numbers measure
//! what lean mode asks, not how well a model answers. The run folders are kept
//! (`smallville compare` reads them again).

use std::path::PathBuf;

use bevy_generative_agents::llm::BackendChoice;
use bevy_generative_agents::output::cost::{RunCost, compare};
use bevy_generative_agents::output::{RunOptions, run};
use bevy_generative_agents::prompt::PromptLibrary;
use bevy_generative_agents::testing::fake_openai::{
    FakeOpenAi, FakeOpenAiConfig, scripted_answers,
};
use bevy_generative_agents::testing::town_script::town_script_backend;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let hours: f64 = match args.next() {
        Some(arg) => arg
            .parse()
            .map_err(|err| format!("expected game hours, got {arg:?}: {err}"))?,
        None => 48.0,
    };
    let seeds: u64 = match args.next() {
        Some(arg) => arg
            .parse()
            .map_err(|err| format!("expected a number of seeds, got {arg:?}: {err}"))?,
        None => 3,
    };
    let root = args.next().map_or_else(
        || PathBuf::from("target").join("lean-loopback"),
        PathBuf::from,
    );
    let (mut faithful, mut lean) = (Vec::new(), Vec::new());
    for seed in 1..=seeds.max(1) {
        for is_lean in [false, true] {
            // A fresh server per run: the same script, no state carried between runs.
            let server = FakeOpenAi::start(FakeOpenAiConfig::new(scripted_answers(
                town_script_backend(seed),
                &PromptLibrary::default(),
            )))?;
            let side = if is_lean { "lean" } else { "faithful" };
            let out = root.join(format!("{side}-{seed}"));
            if out.exists() {
                std::fs::remove_dir_all(&out)?;
            }
            let mut options = RunOptions::new(hours, &out)
                .with_backend(BackendChoice::Http)
                .with_personas(5)
                .with_seed(seed);
            options.llm.base_url = Some(server.base_url());
            options.llm.model = "town-script".into();
            options.llm.embed_model = "town-script-embedder".into();
            options.report = false;
            options.lean = is_lean;
            run(&options)?;
            println!(
                "{side} seed {seed}: {} requests served on {}",
                server.calls(),
                server.base_url()
            );
            let cost = RunCost::load(&out)?;
            if is_lean {
                lean.push(cost);
            } else {
                faithful.push(cost);
            }
        }
    }
    let comparison = compare(&faithful, &lean)?;
    println!("\n{hours} game hours x 5 personas x {seeds} seed(s), over HTTP on loopback\n");
    println!("{}", comparison.to_markdown());
    Ok(())
}
