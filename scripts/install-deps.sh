#!/usr/bin/env bash
# Installs what the desktop game (feature `render`) needs at run time on a fresh Debian/Ubuntu
# machine: an X server for headless machines (Xvfb), a Vulkan driver that works without a GPU
# (Mesa's lavapipe), the X11 libraries winit opens at run time, and the fonts the game draws
# with (Noto Color Emoji for the emoji bubbles) — and, to build the embedded local model
# (feature `local-llm`, on by default), the tools llama.cpp's build needs: cmake, and clang with
# libclang for the generated bindings.
#
# Idempotent: packages already installed are skipped, and nothing runs when all are present.
# Uses sudo when not root. Set SKIP_INSTALL_DEPS=1 to skip (e.g. on a machine you manage).
set -euo pipefail

if [ "${SKIP_INSTALL_DEPS:-0}" = "1" ]; then
  exit 0
fi

packages=(
  xvfb xauth
  libvulkan1 mesa-vulkan-drivers
  libx11-6 libx11-xcb1 libxcursor1 libxi6 libxrandr2 libxkbcommon-x11-0
  fonts-dejavu-core fonts-noto-color-emoji
  cmake clang libclang-dev
)

if ! command -v dpkg-query >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
  echo "install-deps: not a Debian-like system; install the equivalents of: ${packages[*]}" >&2
  exit 0
fi

missing=()
for pkg in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done

if [ "${#missing[@]}" -eq 0 ]; then
  exit 0
fi

sudo=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    sudo=(sudo)
  else
    echo "install-deps: need root or sudo to install: ${missing[*]}" >&2
    exit 1
  fi
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
