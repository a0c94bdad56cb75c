#!/usr/bin/env bash
# The project's one test command (README "Run the tests"; CI calls it through .ci/run).
# Formatting, lints on both feature sets, docs, and every test headless and with default features.
set -euo pipefail
cd "$(dirname "$0")/.."

# Builds are cached outside the clone when the machine allows, so repeated runs are incremental;
# a clean machine simply builds from scratch.
if [ -z "${CARGO_TARGET_DIR:-}" ] && mkdir -p "${HOME:-/tmp}/.cache/bevy_generative_agents/target" 2>/dev/null; then
  export CARGO_TARGET_DIR="${HOME:-/tmp}/.cache/bevy_generative_agents/target"
fi
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"

step() { printf '\n=== %s\n' "$*"; }

step "rustfmt"
cargo fmt --all -- --check

step "clippy (headless core, no default features)"
cargo clippy --no-default-features --all-targets -- -D warnings

step "clippy (default features)"
cargo clippy --all-targets -- -D warnings

step "docs"
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --no-default-features --quiet

step "tests (headless core, no default features)"
cargo test --no-default-features

step "tests (default features)"
cargo test

echo
echo "all checks passed"
