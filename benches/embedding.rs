//! Sentence-embedding throughput of the in-process all-MiniLM-L6-v2 (`llm::MiniLm`): one
//! memory-sized sentence, and a batch of 32 (the memories of a busy step), reported by
//! criterion as sentences per second (`elem/s`). The embedder runs on one thread.
//!
//! Run with `cargo bench --no-default-features --bench embedding` after
//! `scripts/fetch-model.sh` (it needs the model in the cache). The target is at least 100
//! sentences/s for the batch of 32 on one thread of the 2-core development machine.
//!
//! Criterion's rate is wall-clock time, which on a machine shared with other builds understates
//! what one core does; the bench also prints the rate per second of this process's own CPU
//! time (Linux, from `/proc/self/stat`) over a few seconds of batches.

use std::hint::black_box;

use bevy_generative_agents::llm::{LlmConfig, MiniLm, minilm_dir};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

/// Memory descriptions of the length a town writes (8–20 words).
const SENTENCES: [&str; 32] = [
    "Isabella Rodriguez is opening Hobbs Cafe for the day",
    "Klaus Mueller is reading a book on urban sociology at the library",
    "the stove is idle",
    "Maria Lopez is studying for her physics exam at the college library table",
    "Tom Moreno is stocking the shelves of the grocery store with fresh vegetables",
    "John Lin asked Eddy about his music composition for the school recital",
    "the refrigerator is being used to store leftover pasta from last night's dinner",
    "Sam Moore is talking with Jennifer about his campaign for the local mayor election",
    "Ayesha Khan is writing an essay on Shakespeare's sonnets in her dorm room",
    "the bed is being slept in",
    "Wolfgang Schulz is jogging along the river path before his morning classes",
    "Carmen Ortiz is arranging flowers at the shop window",
    "Isabella is inviting customers to a Valentine's Day party at the cafe on February 14th",
    "Adam Smith thinks the new park is a waste of the town's money",
    "the piano is being played",
    "Yuriko Yamamoto is watering the tomatoes and basil in her garden",
    "Arthur Burton is wiping down the bar counter at the pub after closing time",
    "Mei Lin is grading her students' essays at the kitchen table",
    "Eddy Lin is practicing a new piece on the piano in the common room",
    "Giorgio Rossi is solving a difficult math problem on the whiteboard",
    "the coffee machine is brewing a fresh pot",
    "Latoya Williams is photographing birds near the pond in Johnson Park",
    "Rajiv Patel is painting a landscape of the hills behind the college",
    "Abigail Chen is debugging her animation software late at night",
    "Francisco Lopez is rehearsing a comedy routine for the open mic night",
    "Hailey Johnson is writing in her journal about the day she had",
    "Ryan Park is fixing a leaky faucet in the apartment bathroom",
    "Tamara Taylor is reading her new children's book aloud to a group of kids",
    "the shelf is being restocked with canned soup",
    "Jane Moreno is walking her beagle around the block after dinner",
    "Carlos Gomez is carrying a new sofa up the stairs with a neighbour's help",
    "Jennifer Moore is mixing watercolours for a painting of the river at sunset",
];

fn bench(c: &mut Criterion) {
    let Some(dir) = LlmConfig::from_env()
        .ok()
        .and_then(|config| config.model_cache)
        .and_then(|cache| minilm_dir(&cache))
    else {
        eprintln!("SKIPPED: no all-MiniLM-L6-v2 in the model cache (run scripts/fetch-model.sh)");
        return;
    };
    let model = match MiniLm::load(&dir) {
        Ok(model) => model,
        Err(err) => {
            eprintln!("SKIPPED: the model does not load: {err}");
            return;
        }
    };
    let tokens: usize = SENTENCES.iter().map(|s| model.tokenize(s).len()).sum();
    eprintln!(
        "{} sentences, {tokens} tokens ({:.1} per sentence with [CLS] and [SEP])",
        SENTENCES.len(),
        tokens as f64 / SENTENCES.len() as f64
    );
    let mut group = c.benchmark_group("minilm_embedding");
    group.throughput(Throughput::Elements(1));
    group.bench_function("single_sentence", |b| {
        b.iter(|| black_box(model.embed(black_box(&SENTENCES[1..2]))));
    });
    group.throughput(Throughput::Elements(SENTENCES.len() as u64));
    group.bench_function("batch_of_32", |b| {
        b.iter(|| black_box(model.embed(black_box(&SENTENCES[..]))));
    });
    group.finish();
    cpu_time_rate(&model);
}

/// Batches of 32 for about five seconds: sentences per wall second and per CPU second.
fn cpu_time_rate(model: &MiniLm) {
    let Some(cpu_before) = cpu_seconds() else {
        return;
    };
    let start = std::time::Instant::now();
    let mut sentences = 0usize;
    while start.elapsed().as_secs_f64() < 5.0 {
        black_box(model.embed(black_box(&SENTENCES[..])));
        sentences += SENTENCES.len();
    }
    let wall = start.elapsed().as_secs_f64();
    let Some(cpu_after) = cpu_seconds() else {
        return;
    };
    eprintln!(
        "batch_of_32: {sentences} sentences, {:.1} sentences per wall second, {:.1} per CPU \
         second of this process ({:.0} % of a core while it ran)",
        sentences as f64 / wall,
        sentences as f64 / (cpu_after - cpu_before),
        100.0 * (cpu_after - cpu_before) / wall
    );
}

/// User + system CPU seconds of this process (Linux; clock ticks of 1/100 s).
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The fields after the command name, which is in parentheses and may contain spaces.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / 100.0)
}

criterion_group!(benches, bench);
criterion_main!(benches);
