//! R2 chaos (SPEC §12): five personas live two game days against a loopback OpenAI-compatible
//! server that misbehaves on purpose, in Lockstep and in Realtime.
//!
//! Of the server's answers, 30 % are transport faults — 429 with `Retry-After`, 500, 503, a
//! connection closed without an answer, a hang past the client's timeout, a cut-off event
//! stream, a 200 that is HTML, embeddings of the wrong dimension or not numbers — and 20 % are
//! garbage text (empty, prose, cut-off JSON, 100 KB, `<think>` blocks, wrong types). The rest
//! are the offline town script's answers. The run must finish with every invariant holding:
//! the movement log replays on the map (`check_replay`), every persona's saved day sums to
//! 1,440 minutes, and `usage.json` counts the faults the client saw. It prints where the time
//! went: the longest real wait for one step against the bound `timeout × (retries + 1)` per
//! call.
//!
//! ```text
//! cargo bench --no-default-features --features http,cli --bench chaos -- [--hours 48] [--mode lockstep|realtime|both]
//! ```
//!
//! A short version (two game hours, both modes) runs in the test command as
//! `tests/chaos.rs`; this is the long one.

use bevy_generative_agents::clock::TimeMode;

#[path = "../tests/support/chaos.rs"]
mod chaos;

fn main() {
    let mut hours = 48.0;
    let mut modes = vec![TimeMode::Lockstep, TimeMode::Realtime];
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--hours" => {
                hours = args
                    .next()
                    .and_then(|h| h.parse().ok())
                    .expect("--hours takes a number")
            }
            "--mode" => {
                modes = match args.next().as_deref() {
                    Some("lockstep") => vec![TimeMode::Lockstep],
                    Some("realtime") => vec![TimeMode::Realtime],
                    _ => vec![TimeMode::Lockstep, TimeMode::Realtime],
                }
            }
            // cargo bench passes --bench; anything else is ignored.
            _ => {}
        }
    }
    for mode in modes {
        let outcome = chaos::run_chaos(hours, mode, 5, 17);
        println!("{outcome}");
        if let Err(problems) = outcome.check() {
            eprintln!("chaos {mode:?}: {problems}");
            std::process::exit(1);
        }
    }
}
