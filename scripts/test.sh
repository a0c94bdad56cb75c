#!/usr/bin/env bash
# The project's one test command (README "Run the tests"; CI calls it through .ci/run).
# Formatting, lints on both feature sets, docs, every test once (headless, then what the default
# features add), the README's first command under Xvfb, and the frame report. Ends with a table
# of each step's wall time and the total, also when a step fails.
set -euo pipefail
cd "$(dirname "$0")/.."

# Step timings: `step LABEL "what it checks"` closes the previous step and opens the next; the
# table is printed on exit, whatever the exit.
step_label=""
step_start=$SECONDS
step_times=()
close_step() {
  if [ -n "$step_label" ]; then
    step_times+=("$(printf '%6d s  %s%s' "$((SECONDS - step_start))" "$step_label" "${1:-}")")
    step_label=""
  fi
}
step() {
  close_step
  step_label="$1"
  step_start=$SECONDS
  printf '\n=== %s: %s\n' "$1" "$2"
}
print_step_times() {
  local status=$?
  if [ "$status" -ne 0 ]; then close_step "  (failed, exit $status)"; else close_step; fi
  printf '\n=== step timings (wall)\n'
  printf '%s\n' "${step_times[@]}"
  printf '%6d s  total\n' "$SECONDS"
}
trap print_step_times EXIT

# The Rust toolchain is the only prerequisite; rustfmt and clippy are added when rustup can.
if ! command -v cargo >/dev/null 2>&1; then
  echo "error: cargo was not found on PATH. Install the Rust toolchain (1.95 or newer), for" >&2
  echo "       example with rustup (https://rustup.rs), then run this script again." >&2
  exit 127
fi
for component in rustfmt clippy; do
  subcommand="${component/rustfmt/fmt}"
  if ! cargo "$subcommand" --version >/dev/null 2>&1; then
    if command -v rustup >/dev/null 2>&1; then
      rustup component add "$component"
    else
      echo "error: \`cargo $subcommand\` is not available; install the $component component." >&2
      exit 127
    fi
  fi
done

# Builds are cached outside the clone when the machine allows, so repeated runs are incremental;
# a clean machine simply builds from scratch.
if [ -z "${CARGO_TARGET_DIR:-}" ] && mkdir -p "${HOME:-/tmp}/.cache/bevy_generative_agents/target" 2>/dev/null; then
  export CARGO_TARGET_DIR="${HOME:-/tmp}/.cache/bevy_generative_agents/target"
fi
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"

# A cache shared by two checkouts (a clone and a worktree, or a CI clone at another path) can
# hold this crate built from the other one: cargo keys a workspace crate's build by its
# path-free name, and only rebuilds it when a source file is newer than that build, so a
# checkout whose files are older would run the other checkout's binaries, with the other
# checkout's paths baked in (`env!("CARGO_MANIFEST_DIR")` finds `assets/` there). The cache
# remembers which checkout built it last; another one rebuilds this crate (its dependencies
# stay cached).
if [ -n "${CARGO_TARGET_DIR:-}" ]; then
  built_by_file="$CARGO_TARGET_DIR/.built-by-checkout"
  built_by="$(cat "$built_by_file" 2>/dev/null || true)"
  if [ -d "$CARGO_TARGET_DIR/debug" ] && [ "$built_by" != "$PWD" ]; then
    echo "the build cache was last used by ${built_by:-another checkout}: rebuilding this crate"
    cargo clean --package bevy_generative_agents --quiet
  fi
  mkdir -p "$CARGO_TARGET_DIR" && printf '%s\n' "$PWD" > "$built_by_file"
fi

step deps "system packages for the window test (xvfb, software Vulkan, emoji font)"
bash scripts/install-deps.sh

step model "the local models (scripts/fetch-model.sh: the chat GGUF and all-MiniLM-L6-v2; the local-model and minilm tests load the real files)"
# The small model (--small): the tests' answers and CI's time are sized for SmolLM2-135M, and
# the 1.1 GB 1.5B model is the game's (scripts/play.sh), never the tests'.
GA_LOCAL_MODEL="${GA_LOCAL_MODEL:-$(bash scripts/fetch-model.sh --small)}"
export GA_LOCAL_MODEL
# Tests that need the model fail instead of skipping from here on.
export GA_REQUIRE_LOCAL_MODEL="${GA_REQUIRE_LOCAL_MODEL:-1}"

step fmt "rustfmt"
cargo fmt --all -- --check

# Clippy type-checks every target; without default features that also shows the library builds
# without the application, so no separate build of it is needed.
step clippy-headless "clippy without default features (the library alone, then with feature cli), and the library pulls no clap, indicatif or plotters"
cargo clippy --no-default-features --all-targets -- -D warnings
if cargo tree --no-default-features -e normal --prefix none | grep -E '^(clap|indicatif|plotters) '; then
  echo "error: the library without default features pulls the crates above" >&2
  exit 1
fi
cargo clippy --no-default-features --features cli --all-targets -- -D warnings

step clippy-default "clippy (default features)"
cargo clippy --all-targets -- -D warnings

step docs "docs"
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --no-default-features --quiet

step test-headless "every test, headless: no default features, feature cli (unit, integration, examples, doctests)"
cargo test --no-default-features --features cli

# With default features, only what the render, http and local-llm features add, so no
# end-to-end check runs twice in two builds: the unit tests (the feature modules' own, and
# code that branches on a feature), the test targets that exist only with those features or
# whose shared tests branch on one (`whole`), and of the targets with a few feature-gated tests
# just those (`partial`: the tests `--list` shows with default features and not headless).
# scripts/feature_tests.py sorts the targets from Cargo.toml and tests/*.rs. No doctest sits in
# a feature-gated module, so the doctests ran above.
step test-default "tests with default features: unit tests, and the integration tests the render, http and local-llm features add"
whole_list="$(python3 scripts/feature_tests.py whole)"
partial_list="$(python3 scripts/feature_tests.py partial)"
read -r -d '' -a whole <<< "$whole_list" || true
read -r -d '' -a partial <<< "$partial_list" || true
whole_args=(--lib --bins)
for target in "${whole[@]}"; do whole_args+=(--test "$target"); done
partial_args=()
for target in "${partial[@]}"; do partial_args+=(--test "$target"); done
# One build of every target first (cargo builds them in parallel); the examples as plain
# binaries, which tests/examples.rs runs. The game binary built here is the one the two Xvfb
# steps below run (same profile and features).
cargo test --no-run "${whole_args[@]}" "${partial_args[@]}"
cargo build --examples
cargo test "${whole_args[@]}"
lists="$(mktemp -d)"
for target in "${partial[@]}"; do
  cargo test --quiet --no-default-features --features cli --test "$target" -- --list --format terse \
    > "$lists/headless.txt"
  cargo test --quiet --test "$target" -- --list --format terse > "$lists/default.txt"
  sed -n 's/: test$//p' "$lists/headless.txt" | sort > "$lists/headless"
  sed -n 's/: test$//p' "$lists/default.txt" | sort > "$lists/default"
  names=()
  while IFS= read -r name; do names+=("$name"); done < <(comm -13 "$lists/headless" "$lists/default")
  if [ "${#names[@]}" -eq 0 ]; then
    echo "$target: no test of its own with default features (all ran headless)"
    continue
  fi
  echo "$target: ${#names[@]} of its tests need the default features: ${names[*]}"
  cargo test --test "$target" -- --exact "${names[@]}"
done
rm -rf "$lists"

step play "the README's first command (scripts/play.sh) in screenshot mode, under Xvfb"
play_png="$(mktemp -d)/play.png"
SMALLVILLE_PROFILE=dev WGPU_BACKEND=vulkan xvfb-run -a -s "-screen 0 1600x1000x24" \
  bash scripts/play.sh --screenshot "$play_png" --screenshot-after "${GA_PLAY_CHECK_SECONDS:-900}" \
  --screenshot-once-up
if [ ! -s "$play_png" ]; then
  echo "error: scripts/play.sh --screenshot wrote no picture" >&2
  exit 1
fi
# What the first minutes showed (the state written beside the picture): the town must be living,
# at least one persona out of bed at the default settings (issue 13). How soon depends on the
# machine: the embedded model plans one persona at a time, and its calls share two cores with the
# software renderer. The first persona was up after about 30 s on the development machine, after
# about 3.5 minutes on a machine half as fast, and not after five minutes on that machine at a
# busier hour (2026-11-28). So the game takes the picture as soon as someone is up
# (--screenshot-once-up), and the check fails only if nobody is after 15 minutes
# (GA_PLAY_CHECK_SECONDS): it waits for the event instead of timing the machine. The bound only
# costs time when the check fails, so it stays wide: a 2-minute bound (issue 52) would fail on
# the slower machine above and on a busy day, not only when the town is broken.
python3 -c 'import json, sys
s = json.load(open(sys.argv[1]))
up = [p["name"] for p in s["personas"] if p["out_of_bed"]]
print("after the wait:", s["time"], "step", s["step"], "up:", len(up), "of", len(s["personas"]), up)
if not up:
    sys.exit("error: after the wait nobody in the town is out of bed")' "${play_png%.png}.json"

step frames "the frame report: Fernside's 25 personas at 32x (scripted stand-in), under Xvfb"
# What a frame costs (issue 19): simulation CPU per frame and whole frames, p50 / p99 / max, as
# the screenshot run writes them. Printed, not asserted: speed targets live in benchmarks, and
# this is a debug build under software rendering.
frames_png="$(mktemp -d)/frames.png"
WGPU_BACKEND=vulkan xvfb-run -a -s "-screen 0 1600x1000x24" \
  cargo run --quiet -- --town fernside --speed 32 --llm-backend scripted \
  --screenshot "$frames_png" --screenshot-after 30
python3 -c 'import json, sys
s = json.load(open(sys.argv[1]))
r = s.get("frame_report")
if not r or r["frames"] < 50:
    sys.exit("error: the screenshot run wrote no frame report (or fewer than 50 frames)")
f = lambda k: "p50 %.2f / p99 %.2f / max %.2f ms" % (r[k]["p50"], r[k]["p99"], r[k]["max"])
print("frame report (debug, 25 personas, 32x):", r["frames"], "frames; sim", f("sim_ms"), "; frame", f("frame_ms"), ";", r["long_frames"], "frames over 50 ms")' "${frames_png%.png}.json"

echo
echo "all checks passed"
