#!/usr/bin/env bash
# Build the server package: fluxo_<version>_<arch>.deb (the `fluxo` CLI and server, its
# systemd unit, settings, shipped workflows, man pages, completions and the browser UI) with
# Debian's own tools: a tree staged here, dpkg-shlibdeps for Depends, dpkg-deb --build.
# Nothing is downloaded (beyond `npm ci` when ui/dist is not built yet).
#
#   PROFILE=release (default; `make package`) or debug (CI: reuses `make build`'s binary)
#   OUT=<dir>       where the .deb goes (default <target dir>/package)
#
# Prints the .deb's path on its last line. Packaging sources: packaging/deb/.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

profile="${PROFILE:-release}"
target="${CARGO_TARGET_DIR:-$root/target}"
case "$target" in /*) ;; *) target="$root/$target" ;; esac
out="${OUT:-$target/package}"
src=packaging/deb

version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n1)
changelog_version=$(sed -n '1s/^fluxo (\([^)]*\)).*/\1/p' "$src/changelog")
if [ "$version" != "$changelog_version" ]; then
  echo "package-deb: Cargo.toml says $version, $src/changelog says $changelog_version:" \
       "add a changelog entry" >&2
  exit 1
fi
arch=$(dpkg --print-architecture)

# 1. The binary.
case "$profile" in
  release) ${CARGO:-cargo} build --locked --release --bin fluxo; bin="$target/release/fluxo" ;;
  debug|dev) ${CARGO:-cargo} build --locked --bin fluxo; bin="$target/debug/fluxo" ;;
  *) echo "package-deb: PROFILE must be release or debug, not $profile" >&2; exit 2 ;;
esac

# Reproducible: every mtime, and the archive's, is the last commit's time (set after the
# build: some crates' build scripts rerun when SOURCE_DATE_EPOCH changes).
export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}"

# 2. The browser UI (ui/dist), built when missing or a placeholder.
if [ ! -f ui/dist/index.html ] || grep -q "was not built" ui/dist/index.html; then
  echo "package-deb: building the UI"
  ${MAKE:-make} --no-print-directory ui
fi

# 3. The tree.
stage="$out/stage"
rm -rf "$stage"
mkdir -p "$out"
umask 022
d() { mkdir -p "$stage/$1"; }
d DEBIAN; d usr/bin; d usr/share/man/man1; d usr/lib/systemd/system; d etc/fluxo/workflows
d usr/share/doc/fluxo/examples/workflows; d usr/share/fluxo
d usr/share/bash-completion/completions; d usr/share/zsh/vendor-completions
d usr/share/fish/vendor_completions.d
install -d -m 0700 "$stage/var/lib/fluxo"

install -m 0755 "$bin" "$stage/usr/bin/fluxo"
strip --strip-unneeded --remove-section=.comment --remove-section=.note "$stage/usr/bin/fluxo"

"$bin" man --out "$stage/usr/share/man/man1" >/dev/null
gzip -9n "$stage"/usr/share/man/man1/*.1
"$bin" completions bash >"$stage/usr/share/bash-completion/completions/fluxo"
"$bin" completions zsh >"$stage/usr/share/zsh/vendor-completions/_fluxo"
"$bin" completions fish >"$stage/usr/share/fish/vendor_completions.d/fluxo.fish"

install -m 0644 "$src/fluxo.service" "$stage/usr/lib/systemd/system/fluxo.service"
install -m 0644 "$src/fluxo.env" "$stage/etc/fluxo/fluxo.env"
# The templates that act only when called (webhooks, manual triggers) are installed live;
# a scheduled one would start calling its destination every few minutes on a fresh
# install, so those are examples to copy in.
for f in workflows/*.json; do
  if grep -q '"schedule_trigger"' "$f"; then
    install -m 0644 "$f" "$stage/usr/share/doc/fluxo/examples/workflows/"
  else
    install -m 0644 "$f" "$stage/etc/fluxo/workflows/"
  fi
done
cp -r ui/dist "$stage/usr/share/fluxo/ui"
chmod -R u=rwX,go=rX "$stage/usr/share/fluxo/ui"

install -m 0644 "$src/copyright" "$stage/usr/share/doc/fluxo/copyright"
d usr/share/lintian/overrides
install -m 0644 "$src/lintian-overrides" "$stage/usr/share/lintian/overrides/fluxo"
gzip -9n <"$src/changelog" >"$stage/usr/share/doc/fluxo/changelog.gz"

# 4. Control files.
for s in postinst prerm postrm; do install -m 0755 "$src/$s" "$stage/DEBIAN/$s"; done
(cd "$stage" && find etc -type f | sort | sed 's|^|/|') >"$stage/DEBIAN/conffiles"

# Depends: the shared libraries the binary links, as dpkg-shlibdeps reads them (it wants a
# debian/control to sit in; a stub in a temporary dir does).
shl=$(mktemp -d)
trap 'rm -rf "$shl"' EXIT
mkdir -p "$shl/debian"
printf 'Source: fluxo\n\nPackage: fluxo\nArchitecture: any\n' >"$shl/debian/control"
shlibs=$(cd "$shl" && dpkg-shlibdeps -O "$stage/usr/bin/fluxo" 2>/dev/null |
         sed -n 's/^shlibs:Depends=//p')
[ -n "$shlibs" ] || { echo "package-deb: dpkg-shlibdeps found no dependencies" >&2; exit 1; }
installed_kb=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)

cat >"$stage/DEBIAN/control" <<EOF
Package: fluxo
Version: $version
Architecture: $arch
Maintainer: Fluxo maintainers <maintainers@users.noreply.a-seed-ef05e18e.example>
Installed-Size: $installed_kb
Depends: $shlibs, adduser
Section: net
Priority: optional
Description: workflow engine for automations that are safe to re-run
 Fluxo runs workflows started by webhooks, schedules and its REST API, with
 deduplication at the door (Idempotency-Key), persistent Memory steps, routers,
 error handlers and HTTP steps with safe retries and outbound idempotency keys.
 .
 This package installs the fluxo command line and server, with the systemd
 service fluxo.service running "fluxo serve" as the system user fluxo
 (settings in /etc/fluxo/fluxo.env, workflows in /etc/fluxo/workflows, run
 history and the API token in /var/lib/fluxo) and the browser UI.
EOF

(cd "$stage" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z |
   xargs -0 md5sum) >"$stage/DEBIAN/md5sums"
chmod 0644 "$stage/DEBIAN/control" "$stage/DEBIAN/conffiles" "$stage/DEBIAN/md5sums"

find "$stage" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
deb="$out/fluxo_${version}_${arch}.deb"
# --root-owner-group: every file root:root in the archive (the modes postinst sets are
# dpkg-statoverrides). xz at a low level for a debug build: the CI's time, not its size.
level=6; [ "$profile" = release ] || level=1
dpkg-deb --root-owner-group -Zxz -z"$level" --build "$stage" "$deb" >/dev/null
echo "$deb"
