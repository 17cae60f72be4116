#!/usr/bin/env bash
# The real desktop window test (tests/desktop/): the built app (target/debug/fluxo-desktop,
# see scripts/desktop-build.sh) under Xvfb, driven by webdriverio through tauri-driver, which
# starts Debian's WebKitWebDriver. Screenshot: target/desktop-shot.png.
#
#   FLUXO_DESKTOP_ROOT_SHOT=path   also save the whole Xvfb screen (ImageMagick `import`)
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v xvfb-run >/dev/null || missing+=("xvfb-run (apt: xvfb xauth)")
command -v WebKitWebDriver >/dev/null || missing+=("WebKitWebDriver (apt: webkit2gtk-driver)")
command -v tauri-driver >/dev/null || [ -x "${CARGO_HOME:-$HOME/.cargo}/bin/tauri-driver" ] ||
  missing+=("tauri-driver (cargo install tauri-driver --locked)")
[ -x target/debug/fluxo-desktop ] || missing+=("target/debug/fluxo-desktop (scripts/desktop-build.sh)")
if [ ${#missing[@]} -gt 0 ]; then
  printf 'desktop-test: missing %s\n' "${missing[@]}" >&2
  echo "desktop-test: run scripts/setup.sh test" >&2
  exit 2
fi

cd tests/desktop
# --ignore-scripts: webdriverio's optional edgedriver/geckodriver installers would try to
# download browsers' drivers; the test uses tauri-driver only.
if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund --ignore-scripts
fi
exec xvfb-run -a -s "-screen 0 1280x800x24" npm test
