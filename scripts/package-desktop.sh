#!/usr/bin/env bash
# The desktop app's .deb through Tauri's bundler (the tauri CLI from ui's devDependencies):
# a release build of src-tauri (fluxo-desktop) with ui/dist embedded, the icon, a .desktop
# entry, and Depends on the WebKitGTK and GTK libraries as the bundler declares them
# (src-tauri/tauri.conf.json, "bundle"). A release Tauri build takes many minutes on 2 cores,
# so CI does not run this. Prints the .deb's path on its last line.
set -euo pipefail
cd "$(dirname "$0")/.."
target="${CARGO_TARGET_DIR:-$PWD/target}"
case "$target" in /*) ;; *) target="$PWD/$target" ;; esac

[ -x ui/node_modules/.bin/tauri ] || (cd ui && npm ci --no-audit --no-fund)
if [ ! -f ui/dist/index.html ] || grep -q "was not built" ui/dist/index.html; then
  ${MAKE:-make} --no-print-directory ui
fi
(cd src-tauri && ../ui/node_modules/.bin/tauri build --ci --bundles deb)
deb=$(ls -t "$target"/release/bundle/deb/*.deb | head -n1)
dpkg-deb -f "$deb" Package Version Depends
dpkg-deb -c "$deb" | grep -E '\.desktop$|/icons/|/bin/' | sed 's/^/  /'
echo "$deb"
