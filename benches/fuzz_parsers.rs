//! The long parser fuzz run (SPEC §12 R1): every parser that reads model text on 100,000
//! generated answers per kind (see `tests/support/parser_fuzz.rs` for the corpus, the
//! generators and the invariants). Not a timed benchmark: it prints, per kind, the cases run,
//! how many parsed, panics, invariant violations and wall time, and exits non-zero on any panic
//! or violation.
//!
//! ```text
//! cargo bench --no-default-features --bench fuzz_parsers            # 100,000 per kind
//! cargo bench --no-default-features --bench fuzz_parsers -- 1000000 # or FUZZ_CASES=1000000
//! ```
//!
//! `FUZZ_SEED` changes the generators' seed; `FUZZ_KIND` runs only kinds whose name contains it;
//! `FUZZ_THREADS` sets how many kinds run at once (default: every core).

#[path = "../tests/support/parser_fuzz.rs"]
mod parser_fuzz;

use std::process::ExitCode;
use std::time::Instant;

fn main() -> ExitCode {
    // `cargo bench` passes `--bench`; the first number among the arguments is the case count.
    let from_args = std::env::args()
        .skip(1)
        .find_map(|a| a.replace('_', "").parse::<u64>().ok());
    let from_env = std::env::var("FUZZ_CASES")
        .ok()
        .and_then(|v| v.replace('_', "").parse::<u64>().ok());
    let cases = from_args.or(from_env).unwrap_or(100_000);
    let seed = std::env::var("FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(13);
    let only = std::env::var("FUZZ_KIND").ok();
    let threads = std::env::var("FUZZ_THREADS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .or_else(|| std::thread::available_parallelism().ok().map(usize::from))
        .unwrap_or(1);

    let start = Instant::now();
    let corpus = parser_fuzz::hostile_corpus();
    let kinds = parser_fuzz::kinds();
    println!(
        "fuzzing {} parser kinds, {cases} cases each (seed {seed}, {threads} threads), hostile corpus of {} texts",
        kinds.len(),
        corpus.len()
    );
    println!(
        "{:<48} {:>9} {:>9} {:>7} {:>10} {:>9}",
        "kind", "cases", "parsed", "panics", "violations", "seconds"
    );
    let kinds: Vec<_> = kinds
        .into_iter()
        .filter(|kind| only.as_deref().is_none_or(|o| kind.name.contains(o)))
        .collect();
    let reports =
        parser_fuzz::quietly(|| parser_fuzz::fuzz_all(&kinds, &corpus, cases, seed, threads));
    let (mut panics, mut violations, mut total) = (0, 0, 0);
    for report in &reports {
        println!(
            "{:<48} {:>9} {:>9} {:>7} {:>10} {:>9.1}",
            report.name,
            report.cases,
            report.parsed,
            report.panics,
            report.violations,
            report.elapsed.as_secs_f64()
        );
        for example in &report.examples {
            println!("    {example}");
        }
        panics += report.panics;
        violations += report.violations;
        total += report.cases;
    }
    println!(
        "total: {total} cases, {panics} panics, {violations} invariant violations, {:.1} s",
        start.elapsed().as_secs_f64()
    );
    if panics + violations == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
