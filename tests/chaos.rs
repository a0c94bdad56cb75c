//! R2 chaos, short (SPEC §12): five personas for two game hours, in Lockstep and in Realtime,
//! against a loopback server with 30 % transport faults and 20 % garbage. The two-day version
//! is `cargo bench --no-default-features --features http,cli --bench chaos`.

#[path = "support/chaos.rs"]
mod chaos;

use bevy_generative_agents::clock::TimeMode;

fn assert_survives(mode: TimeMode) {
    let outcome = chaos::run_chaos(2.0, mode, 5, 23);
    println!("{outcome}");
    if let Err(problems) = outcome.check() {
        panic!("{outcome}\n{problems}");
    }
    // The test means something: the server misbehaved in every way, and the run went on.
    assert_eq!(outcome.steps, 720, "{outcome}");
    assert!(outcome.injected.len() >= 6, "{outcome}");
    assert!(outcome.garbage > 0, "{outcome}");
    // No step waits on failures longer than one call may take, `timeout × (retries + 1)`: a
    // thought's failed attempts and back-off share one budget (`RetryBudget`), and once the
    // backend gives out the rest of the thought takes its fail-safes. One second on top for
    // the step's own work and the loopback answers that did come.
    let bound = chaos::TIMEOUT * (chaos::RETRIES + 1) + std::time::Duration::from_secs(1);
    assert!(
        outcome.max_step_wait <= bound,
        "a step waited {:?} (bound {bound:?}): {outcome}",
        outcome.max_step_wait
    );
}

#[test]
fn lockstep_survives_a_misbehaving_server() {
    assert_survives(TimeMode::Lockstep);
}

#[test]
fn realtime_survives_a_misbehaving_server() {
    assert_survives(TimeMode::Realtime);
}
