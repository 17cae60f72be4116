#!/usr/bin/env bash
# Build the desktop app: the UI (`make ui`, only when ui/dist is missing, a placeholder, or
# older than ui's sources), then the Tauri binary target/debug/fluxo-desktop, which embeds
# ui/dist (tauri.conf.json has no devUrl, and the crate's default `custom-protocol` feature
# serves the embedded files).
set -euo pipefail
cd "$(dirname "$0")/.."

dist=ui/dist/index.html
stale=""
if [ ! -f "$dist" ] || grep -q "was not built" "$dist"; then
  stale="missing"
elif [ -n "$(find ui/src ui/index.html ui/package.json ui/package-lock.json ui/vite.config.ts \
            -newer "$dist" -print -quit 2>/dev/null)" ]; then
  stale="older than its sources"
fi
if [ -n "$stale" ]; then
  echo "desktop-build: ui/dist $stale: building the UI"
  ${MAKE:-make} --no-print-directory ui
fi

${CARGO:-cargo} build --locked -p fluxo-desktop
