#!/usr/bin/env bash
# Play the game on a fresh Debian/Ubuntu machine that has only the Rust toolchain: installs the
# system packages the build and the window need (scripts/install-deps.sh: cmake, clang and
# libclang for the embedded model; Xvfb, software Vulkan, X libraries and fonts for the
# window), fetches the embedded model (scripts/fetch-model.sh), then builds and runs the game.
# Arguments go to the game: `bash scripts/play.sh --speed 4 --follow Mira`; `--headless` runs
# the headless demo instead of the window (for a machine without a display).
#
# The first build takes about 30-40 minutes on a 2-core machine (the render stack and llama.cpp
# in release mode); later runs start in seconds. SMALLVILLE_PROFILE=dev builds the debug
# profile instead (about 10-15 minutes the first time; CI runs it that way).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v cargo >/dev/null 2>&1; then
  echo "play: cargo was not found. Install the Rust toolchain (1.95 or newer), for example" >&2
  echo "      with rustup (https://rustup.rs), then run this script again." >&2
  exit 127
fi

# Without a display the game stops before opening its window and says what to do instead (exit
# code 2, no panic; its message comes through as it is). Say it before the build too, which can
# take half an hour: the game without a subcommand or --headless needs an X display.
case "${1:-}" in
  ""|-*)
    if [ "$(uname -s)" = Linux ] && [ -z "${DISPLAY:-}" ] && [[ " $* " != *" --headless "* ]]; then
      echo "play: no display (DISPLAY is not set), so the game will not open its window; stop" >&2
      echo "      here (Ctrl-C) and run \`xvfb-run -a bash scripts/play.sh\`, or add --headless" >&2
    fi
    ;;
esac

echo "play: system packages (scripts/install-deps.sh)" >&2
bash scripts/install-deps.sh

echo "play: the embedded model (scripts/fetch-model.sh)" >&2
if model="$(bash scripts/fetch-model.sh)"; then
  echo "play: model $model" >&2
else
  echo "play: no model could be fetched; the game will say so and use the offline scripted" >&2
  echo "      stand-in (canned answers, not a language model)" >&2
fi

profile=(--release)
if [ "${SMALLVILLE_PROFILE:-release}" = "dev" ]; then
  profile=()
fi
echo "play: building and starting the game (the first build takes a while; see above)" >&2
exec cargo run "${profile[@]}" --bin smallville -- "$@"
