#!/usr/bin/env bash
# The server package's test (`make test-package`, part of `make test`): builds the .deb
# (scripts/package-deb.sh; PROFILE=debug by default here, which reuses `make build`'s binary:
# the release build costs minutes on 2 cores), then
#   1. its control data and contents (dpkg-deb -I / -c);
#   2. lintian: no errors (warnings are printed);
#   3. installs it into a throwaway root (dpkg-deb -x) and starts the installed unit's
#      ExecStart command line, its paths mapped into that root, with its EnvironmentFile and
#      a free port, as an unprivileged user when run as root (the unit's User=), with only the
#      unit's ReadWritePaths writable; one webhook to a shipped workflow is answered 202, its
#      redelivery 200 (duplicate), the run is recorded and succeeds against the sandbox the
#      package's own binary starts, and the server stops cleanly on SIGTERM.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

fail() { echo "package-test: FAIL: $*" >&2; exit 1; }
ok() { echo "package-test: ok: $*"; }
passed=0
check() { passed=$((passed + 1)); ok "$*"; }

t0=$(date +%s)
deb=$(PROFILE="${PROFILE:-debug}" bash scripts/package-deb.sh | tail -n1)
[ -f "$deb" ] || fail "no package built"
echo "package-test: built $deb in $(( $(date +%s) - t0 )) s ($(du -h "$deb" | cut -f1))"

work=$(mktemp -d /tmp/fluxo-package-test.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# 1. Control data and contents.
info=$(dpkg-deb -I "$deb")
for want in '^ Package: fluxo$' '^ Architecture: ' '^ Depends: .*libc6 \(>= [0-9.]+\).*, adduser$' \
            '^ Maintainer: ' '^ Description: ' '\* +postinst ' '\* +prerm ' '\* +postrm ' ' conffiles '; do
  grep -qE -- "$want" <<<"$info" || fail "dpkg-deb -I: no line matching '$want'"$'\n'"$info"
done
check "control: Package, Depends (from dpkg-shlibdeps), maintainer scripts"

contents=$(dpkg-deb -c "$deb")
has() { # mode-prefix path
  grep -qE "^$1 root/root .* \./$2\$" <<<"$contents" || fail "dpkg-deb -c: no $1 ./$2"
}
has -rwxr-xr-x usr/bin/fluxo
has -rw-r--r-- usr/lib/systemd/system/fluxo.service
has -rw-r--r-- etc/fluxo/fluxo.env
has -rw-r--r-- etc/fluxo/workflows/invoice-paid-once.json
has -rw-r--r-- usr/share/doc/fluxo/examples/workflows/polling-sync.json
has drwx------ var/lib/fluxo/
has -rw-r--r-- usr/share/man/man1/fluxo.1.gz
has -rw-r--r-- usr/share/man/man1/fluxo-serve.1.gz
has -rw-r--r-- usr/share/bash-completion/completions/fluxo
has -rw-r--r-- usr/share/zsh/vendor-completions/_fluxo
has -rw-r--r-- usr/share/fish/vendor_completions.d/fluxo.fish
has -rw-r--r-- usr/share/fluxo/ui/index.html
has -rw-r--r-- usr/share/doc/fluxo/copyright
has -rw-r--r-- usr/share/doc/fluxo/changelog.gz
if grep -q 'etc/fluxo/workflows/polling-sync.json' <<<"$contents"; then
  fail "a scheduled workflow is installed live"
fi
check "contents: binary, unit, settings, workflows, data dir 0700, man, completions, UI, docs"

# 2. lintian.
lint=$(lintian --fail-on none --tag-display-limit 0 "$deb" 2>&1) || fail "lintian did not run"$'\n'"$lint"
errors=$(grep -c '^E: ' <<<"$lint" || true)
warnings=$(grep -c '^W: ' <<<"$lint" || true)
[ -z "$lint" ] || echo "$lint" | sed 's/^/  lintian: /'
[ "$errors" -eq 0 ] || fail "lintian: $errors errors"
check "lintian: 0 errors, $warnings warnings"

# 3. Install into a throwaway root and start the unit's command line.
root="$work/root"
dpkg-deb -x "$deb" "$root"
dpkg-deb -e "$deb" "$work/control"
for s in postinst prerm postrm; do sh -n "$work/control/$s" || fail "$s: syntax"; done
conf=$(cat "$work/control/conffiles")
[ "$conf" = "$(cd "$root" && find etc -type f | sort | sed 's|^|/|')" ] ||
  fail "conffiles is not every file under /etc: $conf"
check "maintainer scripts parse; conffiles = every file under /etc"

unit="$root/usr/lib/systemd/system/fluxo.service"
key() { sed -n "s/^$1=//p" "$unit"; }
[ "$(key User)" = fluxo ] || fail "the unit does not run as fluxo"
for h in 'NoNewPrivileges=yes' 'ProtectSystem=strict' 'PrivateTmp=yes' 'ProtectHome=yes' \
         'ReadWritePaths=/var/lib/fluxo /etc/fluxo/workflows'; do
  grep -qx "$h" "$unit" || fail "the unit lacks $h"
done
if command -v systemd-analyze >/dev/null; then
  # The unit's own problems (unknown keys, bad values); that /usr/bin/fluxo is not
  # installed on this host is not one.
  v=$(systemd-analyze verify --man=no "$unit" 2>&1 |
      grep -v '^fluxo.service: Command /usr/bin/fluxo is not executable' || true)
  [ -z "$v" ] || fail "systemd-analyze verify: $v"
fi
exec_start=$(key ExecStart)
envfile=$(key EnvironmentFile)
[ -n "$exec_start" ] && [ -n "$envfile" ] || fail "no ExecStart/EnvironmentFile in the unit"
case "$exec_start$envfile" in *[\"\'\\\$%]*) fail "the test cannot parse quoting or specifiers: $exec_start" ;; esac
read -ra words <<<"$exec_start"
cmd=()
for w in "${words[@]}"; do
  case "$w" in /*) cmd+=("$root$w") ;; *) cmd+=("$w") ;; esac
done
check "unit: User=fluxo, hardening, ExecStart=$exec_start"

# Every FLUXO_ setting the env file names is one `fluxo serve` reads.
help=$("$root/usr/bin/fluxo" serve --help)
while read -r name; do
  case "$name" in FLUXO_LOG|FLUXO_OUTBOUND_ALLOW|FLUXO_ENV_*) continue ;; esac
  grep -qE "\[env: $name[]=]" <<<"$help" || fail "$envfile names $name, which fluxo serve does not read"
done < <(sed -n 's/^#\{0,1\}\(FLUXO_[A-Z0-9_]*\)=.*/\1/p' "$root$envfile")
check "every FLUXO_* in $envfile is a flag's environment variable"

# The environment systemd gives the service: the env file (KEY=value lines), no other.
run_env=(env -i PATH=/usr/bin:/bin)
while IFS= read -r line; do
  case "$line" in ''|'#'*) continue ;; esac
  run_env+=("$line")
done <"$root$envfile"

# As root, run as an unprivileged user (the unit's User=fluxo), for whom only the unit's
# ReadWritePaths are writable (what postinst and ProtectSystem=strict give fluxo).
as=()
if [ "$(id -u)" -eq 0 ]; then
  chmod 0755 "$work"
  chown -R nobody:nogroup "$root/var/lib/fluxo" "$root/etc/fluxo/workflows"
  as=(setpriv --reuid=nobody --regid=nogroup --clear-groups --no-new-privs)
fi

wait_line() { # file pattern process-id: the first line of file matching pattern
  local deadline=$(( $(date +%s) + 60 ))
  while [ "$(date +%s)" -lt "$deadline" ]; do
    if grep -m1 -o "$2" "$1" 2>/dev/null; then return 0; fi
    kill -0 "$3" 2>/dev/null || { cat "$1" >&2; fail "process $3 exited early"; }
    sleep 0.1
  done
  cat "$1" >&2; fail "no '$2' in $1 within 60 s"
}

# The destination the shipped workflow calls (env.CRM_URL): the package's own sandbox.
(cd / && exec "${as[@]}" "$root/usr/bin/fluxo" sandbox --addr 127.0.0.1:0) >"$work/sandbox.log" 2>&1 &
pids+=($!)
crm=$(wait_line "$work/sandbox.log" 'http://127\.0\.0\.1:[0-9]*' "${pids[-1]}")

(cd / && exec "${as[@]}" "${run_env[@]}" FLUXO_ADDR=127.0.0.1:0 FLUXO_ENV_CRM_URL="$crm" "${cmd[@]}") \
  >"$work/serve.log" 2>&1 &
server=$!
pids+=("$server")
url=$(wait_line "$work/serve.log" 'http://127\.0\.0\.1:[0-9]*' "$server")
check "the unit's command line started: $url"

tokfile="$root/var/lib/fluxo/token"
[ -f "$tokfile" ] || fail "no token generated in /var/lib/fluxo/token"
[ "$(stat -c %a "$tokfile")" = 600 ] || fail "token file mode $(stat -c %a "$tokfile")"
token=$(cat "$tokfile")
[ -n "$token" ] || fail "empty token"
grep -qF "$token" "$work/serve.log" && fail "the token was printed (the journal would keep it)"
grep -q "API token: generated, saved in $tokfile" "$work/serve.log" ||
  fail "the start does not say where the token is"$'\n'"$(cat "$work/serve.log")"
check "token generated on first start in /var/lib/fluxo/token (0600), not printed"

event=tests/fixtures/payloads/stripe/invoice.paid.json
deliver() {
  curl -sS -o "$work/answer.json" -w '%{http_code}' -X POST "$url/hooks/invoice-paid-once" \
    -H 'Idempotency-Key: evt_package_test' -H 'Content-Type: application/json' \
    --data-binary "@$repo/$event"
}
code=$(deliver)
[ "$code" = 202 ] || fail "webhook answered $code: $(cat "$work/answer.json")"
run_id=$(jq -er '.run_id' "$work/answer.json")
[ "$(jq -r '.duplicate' "$work/answer.json")" = false ] || fail "first delivery is a duplicate"
code=$(deliver)
[ "$code" = 200 ] || fail "redelivery answered $code: $(cat "$work/answer.json")"
[ "$(jq -r '.run_id, .duplicate' "$work/answer.json" | paste -sd' ')" = "$run_id true" ] ||
  fail "redelivery: $(cat "$work/answer.json")"
check "webhook: 202 then 200 duplicate (run $run_id)"

api() { curl -sS -H "Authorization: Bearer $token" "$url/api/v1/$1"; }
deadline=$(( $(date +%s) + 60 ))
status=""
while [ "$(date +%s)" -lt "$deadline" ]; do
  status=$(api "runs/$run_id" | jq -r '.status')
  case "$status" in queued|running) sleep 0.1 ;; *) break ;; esac
done
[ "$status" = succeeded ] || fail "run $run_id: $(api "runs/$run_id")"
[ "$(api "runs/$run_id" | jq -r '.workflow_id')" = invoice-paid-once ] || fail "wrong workflow"
deals=$(curl -sS "$crm/deals" | jq '.data | length')
[ "$deals" = 1 ] || fail "the destination has $deals deals, not 1"
code=$(curl -sS -o /dev/null -w '%{http_code}' "$url/api/v1/runs")
[ "$code" = 401 ] || fail "the API without the token answered $code"
curl -sS "$url/" | grep -q '<div id="root">' || fail "the browser UI is not served at /"
check "run recorded and succeeded (1 deal at the destination); API needs the token; UI at /"

kill -TERM "$server"
rc=0; wait "$server" || rc=$?
[ "$rc" = 0 ] || fail "the server exited $rc on SIGTERM"$'\n'"$(cat "$work/serve.log")"
shown=$("${as[@]}" "$root/usr/bin/fluxo" --data-dir "$root/var/lib/fluxo" runs show "$run_id" --json |
        jq -r '.status')
[ "$shown" = succeeded ] || fail "after the stop, fluxo runs show says $shown"
[ "$(stat -c %a "$root/var/lib/fluxo")" = 700 ] || fail "data dir mode changed"
check "SIGTERM: exit 0; the run is in /var/lib/fluxo after the stop"

echo "package-test: package built and tested in $(( $(date +%s) - t0 )) s"
echo "package-test: $passed passed, 0 failed"
