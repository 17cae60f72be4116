#!/usr/bin/env bash
# The desktop package checked by hand (issue 16), as a person installs it: `apt install` of the
# .deb that `make package-desktop` built (its Depends resolved by apt), then the installed
# /usr/bin/fluxo-desktop started under Xvfb as a first launch (a fresh HOME), and the whole
# screen saved once the editor shows: docs/screenshots/desktop-installed.png (the README's
# Packages section; the screen is the window's default size, 1280x800). Needs root (apt) and
# what `make test-desktop` needs (xvfb, ImageMagick).
#   bash scripts/desktop-deb-shot.sh [path/to/fluxo-desktop_<v>_<arch>.deb]
set -euo pipefail
cd "$(dirname "$0")/.."
deb=${1:-$(ls -t target/release/bundle/deb/*.deb 2>/dev/null | head -n1)}
[ -f "$deb" ] || { echo "desktop-deb-shot: no .deb (make package-desktop)" >&2; exit 2; }
out=${OUT:-docs/screenshots/desktop-installed.png}

echo "desktop-deb-shot: lintian"
lintian --fail-on none "$deb" | sed 's/^/  /' || true
echo "desktop-deb-shot: installing $deb"
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$(realpath "$deb")" >/dev/null
dpkg -s fluxo-desktop | grep -E '^(Status|Version|Depends):' | sed 's/^/  /'
dpkg -L fluxo-desktop | grep -E '/bin/|\.desktop$|/icons/.*/apps/' | sed 's/^/  /'
desktop_file=$(dpkg -L fluxo-desktop | grep '\.desktop$' | head -n1)
grep -E '^(Name|Exec|Icon|Categories)=' "$desktop_file" | sed 's/^/  /'

home=$(mktemp -d)
trap 'rm -rf "$home"' EXIT
# A first launch: no data dir, no settings. The menu entry's Exec line is what runs.
exec_line=$(sed -n 's/^Exec=//p' "$desktop_file" | head -n1 | sed 's/ %[fFuU]//')
HOME="$home" XDG_DATA_HOME="$home/.local/share" XDG_CONFIG_HOME="$home/.config" \
  xvfb-run -a -s "-screen 0 1280x800x24" bash -c "
    $exec_line >'$home/app.log' 2>&1 &
    app=\$!
    sleep ${WAIT_S:-20}
    import -window root '$PWD/$out'
    kill \$app; wait \$app 2>/dev/null || true
  "
echo "desktop-deb-shot: saved $out"
tail -5 "$home/app.log" | sed 's/^/  app: /' || true
