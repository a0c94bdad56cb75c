//! The `outcome_toasts` example, run in-process: its app (the default town from 7 am, the
//! toast observers) over three game hours raises toasts for new days, new actions and at least
//! one conversation, and the same ones on a rerun.

#[expect(dead_code, reason = "the example's `main` is not called here")]
#[path = "../examples/outcome_toasts.rs"]
mod outcome_toasts;

use outcome_toasts::{run_hours, toast_app};

fn toasts(seed: u64) -> Vec<String> {
    let mut app = toast_app(seed).expect("the example's app builds");
    let mut shown = Vec::new();
    run_hours(&mut app, 3, |toast| shown.push(toast.to_string()));
    shown
}

#[test]
fn the_toast_example_toasts_days_actions_and_talks_the_same_way_every_run() {
    let first = toasts(7);
    let personas = 5;
    let new_days = first.iter().filter(|t| t.contains(" ☀ ")).count();
    assert_eq!(
        new_days, personas,
        "every persona plans its day once: {first:#?}"
    );
    assert!(
        first.iter().any(|t| t.contains(" start talking ")),
        "nobody talked in three hours: {first:#?}"
    );
    let actions = first
        .iter()
        .filter(|t| t.contains(" is ") && !t.contains(" start talking "))
        .count();
    assert!(actions >= personas * 3, "few actions: {first:#?}");
    // Toasts are in game-time order (the first five characters are HH:MM, all on one day).
    assert!(first.windows(2).all(|w| w[0][..5] <= w[1][..5]));
    assert_eq!(first, toasts(7), "a rerun toasts differently");
}
