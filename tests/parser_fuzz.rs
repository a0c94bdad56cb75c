//! The short version of the parser fuzz run (`benches/fuzz_parsers.rs` runs 100,000 cases per
//! kind): every parser that reads model text, on 2,000 answers per kind generated from the
//! hostile corpus and mutated valid answers — no panics, every accepted value and every
//! fail-safe within its prompt's invariants, and every kind's valid answers accepted (so the
//! invariants cannot hold vacuously).

#[path = "support/parser_fuzz.rs"]
mod parser_fuzz;

use bevy_generative_agents::prompt::clean_response;

/// Cases per kind; `FUZZ_CASES` raises it.
fn cases() -> u64 {
    std::env::var("FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000)
}

#[test]
fn every_parser_survives_hostile_and_mutated_answers() {
    // Megabyte answers are in the long run and in `prompt_parsers`; unoptimised, 256 KB ones
    // already pass every parser's scan bound.
    let corpus = parser_fuzz::hostile_corpus_with(256 * 1024);
    let kinds = parser_fuzz::kinds();
    assert!(kinds.len() >= 45, "{} kinds", kinds.len());
    let cases = cases();
    let reports = parser_fuzz::quietly(|| parser_fuzz::fuzz_all(&kinds, &corpus, cases, 13, 2));
    let failures: Vec<String> = reports
        .iter()
        .filter(|r| r.panics + r.violations > 0)
        .map(|r| {
            format!(
                "{}: {} panics, {} violations\n  {}",
                r.name,
                r.panics,
                r.violations,
                r.examples.join("\n  ")
            )
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    for report in &reports {
        assert_eq!(report.cases, cases, "{}", report.name);
    }
}

#[test]
fn every_valid_seed_answer_is_accepted() {
    let mut rejected = Vec::new();
    for kind in parser_fuzz::kinds() {
        for answer in &kind.valid {
            let outcome = (kind.run)(answer);
            if outcome != Ok(true) {
                rejected.push(format!(
                    "{}: {answer:?} (cleaned {:?}): {outcome:?}",
                    kind.name,
                    clean_response(answer)
                ));
            }
        }
    }
    assert!(rejected.is_empty(), "{}", rejected.join("\n"));
}
