#!/usr/bin/env bash
# Install what a fresh Debian/Ubuntu machine lacks for `make test` or `make run`.
# Idempotent: only installs what is missing. Needs root (or sudo) for apt.
set -euo pipefail
what="${1:-test}"
cd "$(dirname "$0")/.."

apt_pkgs=()
need() { dpkg -s "$1" >/dev/null 2>&1 || apt_pkgs+=("$1"); }

# Always: a C toolchain and pkg-config for -sys crates; dpkg-dev (dpkg-shlibdeps) for `make package`.
need build-essential
need dpkg-dev
need pkg-config
need curl
# The desktop app (src-tauri/, a workspace member: `cargo test --workspace` builds it too).
# libdbus-1-dev: tao and the OS keyring (the Secret Service over D-Bus) link libdbus.
for p in libwebkit2gtk-4.1-dev wget file libxdo-dev libssl-dev libayatana-appindicator3-dev \
         librsvg2-dev libdbus-1-dev; do need "$p"; done
case "$what" in
  test)
    need chromium          # browser end-to-end tests (Debian's build, never a downloaded one)
    # The desktop window test: Xvfb, screenshots, WebKitGTK's WebDriver (WebKitWebDriver).
    for p in xvfb xauth imagemagick webkit2gtk-driver; do need "$p"; done
    # The PostgreSQL store tests start their own throwaway server (initdb, pg_ctl).
    need postgresql
    # The server package's test (scripts/package-test.sh): lintian, and jq for the API's JSON.
    need lintian
    need jq
    # The desktop's keyring test runs the real Secret Service in a private session bus.
    need dbus-daemon
    need gnome-keyring
    ;;
esac
# Node.js with npm (the UI build): Debian's packages only when no node is on PATH
# (NodeSource's nodejs already ships npm and conflicts with Debian's npm package).
if ! command -v node >/dev/null 2>&1; then need nodejs; need npm; fi

if [ ${#apt_pkgs[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "setup: installing ${apt_pkgs[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${apt_pkgs[@]}" >/dev/null
fi

if ! command -v cargo >/dev/null 2>&1; then
  echo "setup: Rust is missing; install it with rustup (https://rustup.rs) and re-run" >&2
  exit 1
fi

# The desktop window test drives the app through tauri-driver (crates.io, about 40 s to build).
if [ "$what" = test ] && ! command -v tauri-driver >/dev/null 2>&1 &&
   [ ! -x "${CARGO_HOME:-$HOME/.cargo}/bin/tauri-driver" ]; then
  echo "setup: installing tauri-driver"
  cargo install tauri-driver --version 2.1.0 --locked --quiet
fi
