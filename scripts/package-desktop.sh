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

# What Tauri's bundler leaves out, added to its package in place (what lintian reports on it):
# the binary stripped of symbols (strip --strip-unneeded, as dh_strip does), a Debian changelog
# and a man page (packaging/desktop/, gzip -9n), libc6 in Depends (the binary links glibc),
# the long description wrapped. md5sums and Installed-Size are recomputed. Run on the
# bundler's fresh output only (it is rebuilt by every `tauri build`).
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
dpkg-deb -R "$deb" "$work/root"
for bin in "$work"/root/usr/bin/*; do strip --strip-unneeded "$bin"; done
pkg=$(dpkg-deb -f "$deb" Package)
install -d "$work/root/usr/share/doc/$pkg"
gzip -9n <packaging/desktop/changelog >"$work/root/usr/share/doc/$pkg/changelog.gz"
chmod 0644 "$work/root/usr/share/doc/$pkg/changelog.gz"
# A man page (packaging/desktop/fluxo-desktop.1).
install -d "$work/root/usr/share/man/man1"
gzip -9n <packaging/desktop/fluxo-desktop.1 >"$work/root/usr/share/man/man1/fluxo-desktop.1.gz"
chmod 0644 "$work/root/usr/share/man/man1/fluxo-desktop.1.gz"
libc=$(dpkg-query -W -f='${Version}' libc6 | cut -d- -f1 | cut -d. -f1,2)
control="$work/root/DEBIAN/control"
grep -q '^Depends:.*libc6' "$control" ||
  sed -i "s/^Depends: /Depends: libc6 (>= $libc), /" "$control"
# The bundler writes the long description as one line: wrap it at 79 columns (Debian policy
# 5.6.13; lintian's extended-description-line-too-long).
python3 - "$control" <<'PY'
import sys, textwrap
path = sys.argv[1]
lines = open(path).read().splitlines()
out = []
for line in lines:
    if line.startswith(" ") and len(line) > 80 and line.strip() != ".":
        out += [" " + l for l in textwrap.wrap(line.strip(), 78)]
    else:
        out.append(line)
open(path, "w").write("\n".join(out) + "\n")
PY
size=$(du -sk --exclude=DEBIAN "$work/root" | cut -f1)
sed -i "s/^Installed-Size: .*/Installed-Size: $size/" "$control"
(cd "$work/root" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' |
  sort -z | xargs -0 md5sum >DEBIAN/md5sums)
dpkg-deb --root-owner-group -Zxz -b "$work/root" "$deb" >/dev/null

dpkg-deb -f "$deb" Package Version Depends
dpkg-deb -c "$deb" | grep -E '\.desktop$|/icons/|/bin/' | sed 's/^/  /'
echo "$deb"
