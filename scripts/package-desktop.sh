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

# What Tauri's bundler leaves out, added to its package in place (lintian's errors on it): the
# binary stripped of symbols (strip --strip-unneeded, as dh_strip does), a Debian changelog
# (packaging/desktop/changelog, gzip -9n), and libc6 in Depends (the binary links glibc:
# dpkg-shlibdeps' floor for it). md5sums and Installed-Size are recomputed.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
dpkg-deb -R "$deb" "$work/root"
for bin in "$work"/root/usr/bin/*; do strip --strip-unneeded "$bin"; done
pkg=$(dpkg-deb -f "$deb" Package)
install -d "$work/root/usr/share/doc/$pkg"
gzip -9n <packaging/desktop/changelog >"$work/root/usr/share/doc/$pkg/changelog.gz"
chmod 0644 "$work/root/usr/share/doc/$pkg/changelog.gz"
libc=$(dpkg-query -W -f='${Version}' libc6 | cut -d- -f1 | cut -d. -f1,2)
control="$work/root/DEBIAN/control"
grep -q '^Depends:.*libc6' "$control" ||
  sed -i "s/^Depends: /Depends: libc6 (>= $libc), /" "$control"
size=$(du -sk --exclude=DEBIAN "$work/root" | cut -f1)
sed -i "s/^Installed-Size: .*/Installed-Size: $size/" "$control"
(cd "$work/root" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' |
  sort -z | xargs -0 md5sum >DEBIAN/md5sums)
dpkg-deb --root-owner-group -Zxz -b "$work/root" "$deb" >/dev/null

dpkg-deb -f "$deb" Package Version Depends
dpkg-deb -c "$deb" | grep -E '\.desktop$|/icons/|/bin/' | sed 's/^/  /'
echo "$deb"
