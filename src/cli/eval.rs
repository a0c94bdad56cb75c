//! `smallville eval-decisions` and `smallville bench-local`: the library measures, these print.

use std::process::ExitCode;

use bevy_generative_agents::eval::{EvalError, eval_backend, evaluate, load_items};

use super::args::EvalArgs;

/// `smallville eval-decisions`: prints the per-kind table; exit code 2 for unusable flags or
/// files, 1 when the report cannot be written.
pub fn eval_command(args: &EvalArgs) -> ExitCode {
    let mut llm_args = args.llm.clone();
    if args.backend.is_some() {
        llm_args.backend = args.backend;
    }
    let prepared = llm_args
        .resolve()
        .map_err(EvalError::from)
        .and_then(|config| {
            if let Some(dir) = &config.prompts {
                // The flag is shared with the simulation commands; say it does nothing here.
                eprintln!(
                    "note: eval-decisions asks each item in its own wording; the prompt \
                     overrides in {} are not used",
                    dir.display()
                );
            }
            Ok((load_items(&args.file)?, eval_backend(&config, args.norm)?))
        });
    let (items, backend) = match prepared {
        Ok(ready) => ready,
        Err(err) => {
            eprintln!("error: {err}");
            return ExitCode::from(2);
        }
    };
    let started = std::time::Instant::now();
    let report = bevy::tasks::block_on(evaluate(backend.as_ref(), &items, args.strategy));
    print!("{}", report.table());
    println!(
        "{} items in {:.1} s ({})",
        items.len(),
        started.elapsed().as_secs_f64(),
        args.file.display()
    );
    if let Some(path) = &args.json {
        let json = match serde_json::to_string_pretty(&report) {
            Ok(json) => json,
            Err(err) => {
                eprintln!("error: {err}");
                return ExitCode::FAILURE;
            }
        };
        if let Err(err) = std::fs::write(path, json) {
            eprintln!("error: {}: {err}", path.display());
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}

/// `smallville bench-local`: prints the figures; exit code 1 when the bench cannot run.
#[cfg(feature = "local-llm")]
pub fn bench_command(args: &super::args::BenchArgs) -> ExitCode {
    let report = match bevy_generative_agents::eval::bench::bench_local(&args.options()) {
        Ok(report) => report,
        Err(err) => {
            eprintln!("error: {err}");
            return ExitCode::FAILURE;
        }
    };
    let ratio = |ours: f64, theirs: f64| if theirs > 0.0 { ours / theirs } else { 0.0 };
    println!("model {} · {} thread(s)", report.model, report.threads);
    println!(
        "{:<28} {:>12} {:>12} {:>7}",
        "", "backend", "llama.cpp", "ratio"
    );
    println!(
        "{:<28} {:>12.1} {:>12.1} {:>7.2}",
        "prompt tokens/s",
        report.backend_prompt_tps,
        report.raw_prompt_tps,
        ratio(report.backend_prompt_tps, report.raw_prompt_tps)
    );
    println!(
        "{:<28} {:>12.1} {:>12.1} {:>7.2}",
        "generated tokens/s",
        report.backend_gen_tps,
        report.raw_gen_tps,
        ratio(report.backend_gen_tps, report.raw_gen_tps)
    );
    println!(
        "{:<28} {:>12.3}",
        "choice of 8, cold (s)", report.choice_cold_secs
    );
    println!(
        "{:<28} {:>12.3}",
        "choice of 8, warm (s)", report.choice_warm_secs
    );
    write_json(args.json.as_deref(), &report)
}

/// `smallville bench-town`: runs the town on the embedded model and prints the figures; exit
/// code 1 when the bench cannot run.
#[cfg(feature = "local-llm")]
pub fn town_bench_command(args: &super::args::TownBenchArgs) -> ExitCode {
    let report = match bevy_generative_agents::output::bench_town::bench_town(&args.options()) {
        Ok(report) => report,
        Err(err) => {
            eprintln!("error: {err}");
            return ExitCode::FAILURE;
        }
    };
    println!(
        "model {} · embeddings {} · {} thread(s) · {} game hours from {}",
        report.model, report.embedding_model, report.threads, report.hours, report.start
    );
    println!("{:<32} {:>12}", "calls", report.calls);
    println!("{:<32} {:>12}", "prompt tokens", report.prompt_tokens);
    println!(
        "{:<32} {:>12}",
        "  reused from the KV cache", report.prompt_tokens_reused
    );
    println!("{:<32} {:>12}", "  decoded", report.prompt_tokens_decoded);
    println!(
        "{:<32} {:>12.1}",
        "prompt tokens decoded per call", report.decoded_per_call
    );
    println!(
        "{:<32} {:>12}",
        "completion tokens", report.completion_tokens
    );
    println!(
        "{:<32} {:>12.1}",
        "tokens/s (decoded + generated)", report.tokens_per_second
    );
    println!("{:<32} {:>12.1}", "wall time (s)", report.wall_seconds);
    match (&report.first_up_seconds, &report.first_up) {
        (Some(secs), Some(who)) => {
            println!("{:<32} {:>12.1}  ({who})", "first persona up (s)", secs)
        }
        _ => println!("{:<32} {:>12}", "first persona up (s)", "nobody"),
    }
    write_json(args.json.as_deref(), &report)
}

/// Writes a bench's figures as JSON to `path` when one is given.
#[cfg(feature = "local-llm")]
fn write_json(path: Option<&std::path::Path>, report: &impl serde::Serialize) -> ExitCode {
    let Some(path) = path else {
        return ExitCode::SUCCESS;
    };
    let written = serde_json::to_string_pretty(report)
        .map_err(|e| e.to_string())
        .and_then(|json| std::fs::write(path, json).map_err(|e| e.to_string()));
    match written {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {}: {err}", path.display());
            ExitCode::FAILURE
        }
    }
}
