#!/usr/bin/env bash
# The README's screenshot of the desktop app: runs the window test (a dry run of
# invoice-paid-once drawn on the canvas) and saves the whole Xvfb screen to
# docs/screenshots/desktop-dry-run.png. Needs what `make test-desktop` needs.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/desktop-build.sh
mkdir -p docs/screenshots
FLUXO_DESKTOP_ROOT_SHOT="$PWD/docs/screenshots/desktop-dry-run.png" bash scripts/desktop-test.sh
echo "saved docs/screenshots/desktop-dry-run.png"
