//! Is there a display to open the window on? Asked before the window is built, so a machine
//! without one (a server, a container, an SSH session) gets a paragraph saying what to do
//! instead of a panic and a backtrace from inside `bevy_winit` when it builds its event loop.

use std::ffi::OsString;
use std::process::ExitCode;

/// Whether this build can open Wayland windows. The `render` feature turns on Bevy's `x11`
/// backend and not `wayland` (see Cargo.toml), so winit needs an X server: a Wayland session
/// reaches it through XWayland, which sets `DISPLAY`.
const WAYLAND_BUILT: bool = false;

/// Why there is no display to open the window on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoDisplay {
    /// None of `DISPLAY`, `WAYLAND_DISPLAY` and `WAYLAND_SOCKET` is set.
    Unset,
    /// Only Wayland's variables are set, and this build speaks X11 only.
    WaylandOnly,
}

impl std::fmt::Display for NoDisplay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            NoDisplay::Unset => "neither DISPLAY nor WAYLAND_DISPLAY nor WAYLAND_SOCKET is set",
            NoDisplay::WaylandOnly => {
                "WAYLAND_DISPLAY or WAYLAND_SOCKET is set but DISPLAY is not, and this build \
                 opens windows through X11 only (XWayland sets DISPLAY)"
            }
        })
    }
}

/// Looks for a display the way winit does, through `var` (an environment lookup, so tests pass
/// their own): on Linux and the BSDs an X server (`DISPLAY`) or, in builds with Wayland
/// (`wayland_built`), a Wayland compositor (`WAYLAND_DISPLAY` or `WAYLAND_SOCKET`). An empty
/// variable counts as unset. Other systems (`os`, as in [`std::env::consts::OS`]) always have
/// their own window system.
pub fn find_display(
    os: &str,
    wayland_built: bool,
    var: impl Fn(&str) -> Option<OsString>,
) -> Result<(), NoDisplay> {
    if !matches!(os, "linux" | "freebsd" | "dragonfly" | "netbsd" | "openbsd") {
        return Ok(());
    }
    let set = |name: &str| var(name).is_some_and(|value| !value.is_empty());
    let wayland = set("WAYLAND_DISPLAY") || set("WAYLAND_SOCKET");
    match (set("DISPLAY"), wayland) {
        (true, _) => Ok(()),
        (false, true) if wayland_built => Ok(()),
        (false, true) => Err(NoDisplay::WaylandOnly),
        (false, false) => Err(NoDisplay::Unset),
    }
}

/// What the window would have shown, for the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Window {
    /// The game (`smallville` without a subcommand).
    Game,
    /// `smallville replay DIR`.
    Replay,
}

/// The paragraph printed when there is no display: why, and the ways on from here (a virtual X
/// server, or the headless commands).
pub fn no_display_message(why: NoDisplay, window: Window) -> String {
    let headless = match window {
        Window::Game => {
            "To run the town without a window, add `--headless` (`bash scripts/play.sh \
             --headless`: an hour of the town, printed as it goes), or simulate and record it \
             with `smallville run --hours 2 --out runs/first` (`cargo run --release -- run \
             --hours 2 --out runs/first` from the clone) and watch the recording later with \
             `smallville replay runs/first` where there is a display."
        }
        Window::Replay => {
            "To check the movement log without a window, add `--check` (`smallville replay DIR \
             --check`)."
        }
    };
    format!(
        "smallville: there is no display to open the window on ({why}), so nothing was \
         started. To watch the town on a machine without a screen, run it under a virtual X \
         server: `xvfb-run -a bash scripts/play.sh` (scripts/install-deps.sh installs Xvfb), or \
         connect with `ssh -X`. {headless}"
    )
}

/// The check of this process's environment: `Ok` with a display, otherwise the paragraph on
/// stderr and exit code 2 (no panic, no backtrace).
pub fn require_display(window: Window) -> Result<(), ExitCode> {
    find_display(std::env::consts::OS, WAYLAND_BUILT, |name| {
        std::env::var_os(name)
    })
    .map_err(|why| {
        eprintln!("{}", no_display_message(why, window));
        ExitCode::from(2)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An environment holding exactly `vars`.
    fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<OsString> + use<> {
        let vars: Vec<(String, OsString)> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), OsString::from(v)))
            .collect();
        move |name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
    }

    #[test]
    fn x11_is_a_display() {
        assert_eq!(
            find_display("linux", false, env(&[("DISPLAY", ":0")])),
            Ok(())
        );
        assert_eq!(
            find_display(
                "freebsd",
                false,
                env(&[("DISPLAY", ":1"), ("WAYLAND_DISPLAY", "wayland-0")])
            ),
            Ok(())
        );
    }

    #[test]
    fn nothing_set_or_empty_is_no_display() {
        assert_eq!(
            find_display("linux", false, env(&[])),
            Err(NoDisplay::Unset)
        );
        assert_eq!(
            find_display("linux", true, env(&[("DISPLAY", "")])),
            Err(NoDisplay::Unset)
        );
    }

    #[test]
    fn wayland_counts_only_in_builds_that_speak_it() {
        for var in ["WAYLAND_DISPLAY", "WAYLAND_SOCKET"] {
            let only_wayland = env(&[(var, "wayland-0")]);
            assert_eq!(
                find_display("linux", false, &only_wayland),
                Err(NoDisplay::WaylandOnly)
            );
            assert_eq!(find_display("linux", true, &only_wayland), Ok(()));
        }
    }

    #[test]
    fn other_systems_have_their_own_window_system() {
        for os in ["macos", "windows", "ios", "android"] {
            assert_eq!(find_display(os, false, env(&[])), Ok(()), "{os}");
        }
    }

    #[test]
    fn the_message_says_why_and_the_ways_on() {
        let game = no_display_message(NoDisplay::Unset, Window::Game);
        for part in [
            "no display",
            "neither DISPLAY nor WAYLAND_DISPLAY",
            "xvfb-run -a bash scripts/play.sh",
            "--headless",
            "smallville run --hours",
        ] {
            assert!(game.contains(part), "{part:?} in {game}");
        }
        assert!(!game.contains('\n'), "one paragraph: {game}");
        let replay = no_display_message(NoDisplay::WaylandOnly, Window::Replay);
        assert!(replay.contains("X11 only"), "{replay}");
        assert!(replay.contains("--check"), "{replay}");
    }
}
