#!/usr/bin/env bash
# Load benchmark of the webhook ingest path (`make load`).
#
# Starts release `fluxo serve` processes with a cheap webhook workflow (webhook_trigger ->
# transform) and measures, in one sitting, with CONNS connections and the ~6 KB body of
# tests/fixtures/payloads/stripe/invoice.paid.json:
#   bare        a bare axum handler (examples/bare_axum.rs), the ceiling: first, and again
#               right after each configuration's duplicates, which the duplicates' target is
#               checked against (this machine's throughput drifts by 15-30% within minutes);
#   node-red    Node-RED (npm `node-red@4`, installed once into ~/.cache/fluxo-load), a flow of
#               http in (POST /hooks/load) -> http response echoing the parsed body with 202:
#               no durability, no dedupe; the bar the sled ingest must double (issue 11);
#   sled        one `fluxo serve` on the embedded sled store (the default);
#   pg×1        one `fluxo serve --store postgres://…` on a fresh database;
#   pg×3        three `fluxo serve --store postgres://…` on one (other) fresh database, each
#               with its own --data-dir and port, all sharing --workflows; the load is split
#               over three concurrent wrk instances (CONNS/3 connections each, one per process,
#               distinct key prefixes), their req/s summed, the worst p50/p99 reported.
# and for each fluxo configuration:
#   new keys    every request a distinct Idempotency-Key: claim + queued run, durable before
#               the 202 (sled: one transaction made durable by the group commit; PostgreSQL:
#               committed);
#   duplicates  one fixed key per process (each first delivered once): every request answered
#               200 `duplicate: true`.
# Every measured run (not the warm-ups) starts once the machine is quiet again (at least 80%
# idle over a second; `quiet`), so it does not share the CPU with what the run before left
# behind (a database's checkpoint, a store's background writes).
# It reports req/s, p50/p99 latency, the ratio to the ceiling, end-to-end runs/s (runs created
# by the new-keys load / (load duration + time until no run is queued or running)), the peak
# RSS (VmHWM) of every fluxo process, and checks that every 202 has its run (runs counted
# through /api/v1/runs/stats) and that each run was executed once (the processes'
# `fluxo_runs_total` summed equals the runs stored).
#
# PostgreSQL: a throwaway server of its own (never a system service): initdb/pg_ctl from PATH,
# else the newest /usr/lib/postgresql/*/bin; `initdb -A trust -U fluxo` in $tmp/pg, a free
# port on 127.0.0.1, its socket in $tmp/pg/sock; as root every server command runs as the
# `postgres` user (runuser), as tests/common/pg.rs does. Stopped by the exit trap.
#
# The load tool is wrk (Debian package) with a Lua script that sets a fresh Idempotency-Key on
# every request; the same script builds every request in every run (only the key differs), so
# the client's own cost is the same in each. oha cannot vary a header per request.
#
# Knobs: DURATION (10s), WARMUP (3s), CONNS (64), THREADS (2; with 3 wrk instances each gets
# ceil(THREADS/3)), WORKERS (fluxo serve --workers, 8), CACHE_MB (fluxo serve --cache-mb, 16),
# PG=0 (skip the PostgreSQL part), PG_CEILING=0 (skip pgbench's ceiling below), NODE_RED=0
# (skip Node-RED), SKIP_BUILD=1.
#
# PostgreSQL's ceiling: after pg×3, pgbench (4 clients, DURATION) runs statements that do what
# a batch of the claims lane does, one statement a transaction by itself: 32 webhook claims
# and their queued runs in the ingest inbox (a record holding the 6 KB body, 5 search values
# each), on a migrated database of the same server, with no fluxo, wrk or run executing beside
# it: what PostgreSQL alone takes on this machine.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-10s}
WARMUP=${WARMUP:-3s}
CONNS=${CONNS:-64}
THREADS=${THREADS:-2}
WORKERS=${WORKERS:-8}
CACHE_MB=${CACHE_MB:-16}
PG=${PG:-1}
PG_CEILING=${PG_CEILING:-1}
NODE_RED=${NODE_RED:-1}
BODY=tests/fixtures/payloads/stripe/invoice.paid.json
TOKEN=load-token-0123456789abcdef0123456789

if ! command -v wrk >/dev/null 2>&1; then
  echo "load: installing wrk (Debian package)"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq wrk >/dev/null
fi
if [ -z "${SKIP_BUILD:-}" ]; then
  cargo build --release --locked --bin fluxo --example bare_axum
fi
FLUXO=target/release/fluxo
BARE=target/release/examples/bare_axum

tmp=$(mktemp -d)
pids=()
pg_bin=""
pg_stop() {
  [ -n "$pg_bin" ] && [ -f "$tmp/pg/data/postmaster.pid" ] || return 0
  (cd "$tmp/pg" && pg_cmd "$pg_bin/pg_ctl" -D "$tmp/pg/data" stop -m fast -w >/dev/null 2>&1) || true
}
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  pg_stop
  rm -rf "$tmp"
}
trap cleanup EXIT

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# wait_ready URL [PID LOG]: /healthz answers (a PostgreSQL store migrates first: up to 30 s).
wait_ready() {
  for _ in $(seq 1 600); do
    curl -fsS "$1/healthz" >/dev/null 2>&1 && return 0
    if [ -n "${2:-}" ] && ! kill -0 "$2" 2>/dev/null; then break; fi
    sleep 0.05
  done
  echo "load: $1 did not come up" >&2
  [ -n "${3:-}" ] && tail -20 "$3" >&2
  exit 1
}

mkdir -p "$tmp/workflows"
cat >"$tmp/workflows/load.json" <<'EOF'
{
  "id": "load",
  "name": "Load benchmark: webhook -> transform",
  "version": 1,
  "steps": [
    { "id": "hook", "kind": "webhook_trigger", "config": {} },
    { "id": "shape", "kind": "transform",
      "config": { "fields": { "invoice": "{{ input.data.object.id }}",
                              "amount": "{{ input.data.object.amount_paid }}" } } }
  ],
  "edges": [ { "from": "hook", "to": "shape" } ]
}
EOF

# One script for every run: `unique` sets a fresh key per request (prefix + thread id +
# counter), `fixed` the prefix itself every time; done() prints one machine-readable line.
cat >"$tmp/load.lua" <<'EOF'
local counter = 0
local next_tid = 0

function setup(thread)
  next_tid = next_tid + 1
  thread:set("tid", next_tid)
end

function init(args)
  local f = assert(io.open(args[1], "rb"))
  body = f:read("*a")
  f:close()
  mode = args[2]
  prefix = args[3]
end

function request()
  counter = counter + 1
  local key
  if mode == "unique" then
    key = prefix .. "-" .. tid .. "-" .. counter
  else
    key = prefix
  end
  return wrk.format("POST", nil,
    { ["Content-Type"] = "application/json", ["Idempotency-Key"] = key }, body)
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "RESULT requests=%d duration_us=%d req_s=%.0f p50_ms=%.2f p99_ms=%.2f non2xx=%d sockerr=%d\n",
    summary.requests, summary.duration, summary.requests / (summary.duration / 1e6),
    latency:percentile(50) / 1000, latency:percentile(99) / 1000,
    e.status, e.connect + e.read + e.write + e.timeout))
end
EOF

# The key prefix of instance I of N (one instance: the prefix itself).
inst_prefix() { if [ "$3" -gt 1 ]; then echo "$1-$2"; else echo "$1"; fi; }

# run_load NAME MODE PREFIX DURATION URL...: one wrk per URL, all at once, CONNS/N connections
# each; keeps each RESULT in $tmp/NAME.I.txt and their sum (req/s and requests summed, worst
# p50/p99, longest duration) in $tmp/NAME.txt, and prints the sum.
run_load() {
  local name=$1 mode=$2 prefix=$3 dur=$4; shift 4
  local n=$# i=0 conns threads u wpids=()
  conns=$((CONNS / n)); threads=$(((THREADS + n - 1) / n))
  [ "$threads" -gt "$conns" ] && threads=$conns
  for u in "$@"; do
    wrk -t"$threads" -c"$conns" -d"$dur" --timeout 10s -s "$tmp/load.lua" "$u/hooks/load" \
      -- "$BODY" "$mode" "$(inst_prefix "$prefix" "$i" "$n")" >"$tmp/$name.$i.txt" &
    wpids+=("$!"); i=$((i + 1))
  done
  for u in "${wpids[@]}"; do wait "$u"; done
  python3 - "$tmp" "$name" "$n" <<'EOF'
import sys
tmp, name, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
parts = []
for i in range(n):
    line = next((l for l in open(f"{tmp}/{name}.{i}.txt") if l.startswith("RESULT")), None)
    if line is None:
        sys.exit(f"load: wrk printed no RESULT for {name}.{i}: {open(f'{tmp}/{name}.{i}.txt').read()}")
    parts.append({k: float(v) for k, v in (p.split("=") for p in line.split()[1:])})
s = lambda k: sum(p[k] for p in parts)
m = lambda k: max(p[k] for p in parts)
out = (f"RESULT requests={s('requests'):.0f} duration_us={m('duration_us'):.0f} req_s={s('req_s'):.0f} "
       f"p50_ms={m('p50_ms'):.2f} p99_ms={m('p99_ms'):.2f} non2xx={s('non2xx'):.0f} sockerr={s('sockerr'):.0f}")
open(f"{tmp}/{name}.txt", "w").write(out + "\n")
if n > 1:
    out += "  (per process: " + " / ".join(f"{p['req_s']:.0f}" for p in parts) + " req/s)"
print(out)
EOF
}

# quiet: wait (at most 60 s) until the machine is at least 80% idle over a second, so a
# measurement does not share the CPU with what the one before left running (PostgreSQL's
# checkpoint and autovacuum after a load of new keys, sled's journal applier, the kernel
# writing back a store): the duplicates' target compares two runs a minute apart.
quiet() {
  local i a b
  for i in $(seq 1 60); do
    a=$(awk '/^cpu / {print $5 + $6, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9}' /proc/stat)
    sleep 1
    b=$(awk '/^cpu / {print $5 + $6, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9}' /proc/stat)
    if python3 -c "import sys; i0, t0, i1, t1 = map(float, sys.argv[1:]); sys.exit(0 if (i1 - i0) >= 0.8 * (t1 - t0) else 1)" $a $b; then
      return 0
    fi
  done
  echo "load: the machine did not go quiet within 60 s; measuring anyway" >&2
}

# CPU time (user + system, in clock ticks) the processes have used so far.
cpu_ticks() { local p s=0; for p in "$@"; do s=$((s + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done; echo "$s"; }

api() { curl -fsS -H "Authorization: Bearer $TOKEN" "$1/api/v1$2"; }
# Runs still queued or running (0 or 1 of each: limit=1).
pending() {
  local s n=0
  for s in queued running; do
    n=$((n + $(api "$1" "/runs?status=$s&limit=1" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["runs"]))')))
  done
  echo "$n"
}
# drain URL: wait until no run is queued or running; prints the seconds it took.
drain() {
  local start; start=$(date +%s.%N)
  for _ in $(seq 1 6000); do
    [ "$(pending "$1")" = "0" ] && break
    sleep 0.1
  done
  python3 -c "import time; print(f'{time.time() - $start:.1f}')"
}
# Runs in the store, every status (the store is fresh for each configuration).
runs_total() {
  local since=$(( $(date +%s%N) / 1000000 - 2 * 86400000 ))
  api "$1" "/runs/stats?bucket=day&since=$since" | python3 -c '
import json, sys
d = json.load(sys.stdin)
print(sum(sum(b["counts"].values()) for b in d["buckets"]))'
}
# Runs this process executed to their end (its `fluxo_runs_total` counters summed): with every
# process alive throughout, the runs in the store are each executed exactly once.
executions() {
  curl -fsS -H "Authorization: Bearer $TOKEN" "$1/metrics" |
    awk '/^fluxo_runs_total[{ ]/ {s += $NF} END {printf "%d\n", s}'
}

# measure_bare NAME: a fresh bare axum process, WARMUP then DURATION of new keys; keeps the
# result in $tmp/NAME.txt and its CPU ticks in $tmp/NAME.cpu.
measure_bare() {
  local name=$1 port pid c0
  port=$(free_port)
  "$BARE" "127.0.0.1:$port" >"$tmp/$name.log" 2>&1 &
  pid=$!; pids+=("$pid")
  wait_ready "http://127.0.0.1:$port" "$pid" "$tmp/$name.log"
  run_load "$name-warm" unique warm "$WARMUP" "http://127.0.0.1:$port" >/dev/null
  quiet
  c0=$(cpu_ticks "$pid")
  printf '%-16s' "bare axum"; run_load "$name" unique "$name" "$DURATION" "http://127.0.0.1:$port"
  echo $(($(cpu_ticks "$pid") - c0)) >"$tmp/$name.cpu"
  kill "$pid"; wait "$pid" 2>/dev/null || true
}

# measure LABEL N [STORE_URL]: N `fluxo serve` processes (own data dir and port, shared
# workflows, the same store), new keys then duplicates. Appends one line to $tmp/configs.txt:
# label n drain_s cpu_new cpu_dup runs_total executions rss_kb,rss_kb,...
measure() {
  local label=$1 n=$2 store=${3:-} i port d c0 cpu_new cpu_dup key rss="" total execs=0 u
  local urls=() spids=() args
  # The configuration before wrote hundreds of MB (its store, its journal): let the kernel
  # write them back now, not during this one's load, where they slowed every fsync (pg×1
  # measured 1,062 new keys/s right after the sled run, 1,500-2,000 on its own).
  sync
  for ((i = 0; i < n; i++)); do
    port=$(free_port)
    args=(serve --addr "127.0.0.1:$port" --workflows "$tmp/workflows" --data-dir "$tmp/$label-data$i"
      --token "$TOKEN" --workers "$WORKERS" --cache-mb "$CACHE_MB" --retention-runs 100000000)
    [ -n "$store" ] && args+=(--store "$store")
    "$FLUXO" "${args[@]}" >"$tmp/$label-serve$i.log" 2>&1 &
    spids+=("$!"); pids+=("$!"); urls+=("http://127.0.0.1:$port")
  done
  for ((i = 0; i < n; i++)); do wait_ready "${urls[$i]}" "${spids[$i]}" "$tmp/$label-serve$i.log"; done

  # (a) new keys
  run_load "$label-new-warm" unique "$label-warm" "$WARMUP" "${urls[@]}" >/dev/null
  drain "${urls[0]}" >/dev/null
  quiet
  c0=$(cpu_ticks "${spids[@]}")
  printf '%-16s' "$label new keys"; run_load "$label-new" unique "$label-new" "$DURATION" "${urls[@]}"
  d=$(drain "${urls[0]}")
  cpu_new=$(($(cpu_ticks "${spids[@]}") - c0))
  echo "                backlog of queued runs executed $d s after the load stopped"

  # (b) duplicates of one key per process (its first delivery creates its run)
  for ((i = 0; i < n; i++)); do
    key=$(inst_prefix "$label-dup" "$i" "$n")
    curl -fsS -o /dev/null -X POST "${urls[$i]}/hooks/load" -H 'Content-Type: application/json' \
      -H "Idempotency-Key: $key" --data-binary @"$BODY"
  done
  drain "${urls[0]}" >/dev/null
  run_load "$label-dup-warm" fixed "$label-dup" "$WARMUP" "${urls[@]}" >/dev/null
  quiet
  c0=$(cpu_ticks "${spids[@]}")
  printf '%-16s' "$label duplicates"; run_load "$label-dup" fixed "$label-dup" "$DURATION" "${urls[@]}"
  cpu_dup=$(($(cpu_ticks "${spids[@]}") - c0))
  # (c) the ceiling again, right after: the duplicates' target compares the two (this machine's
  # throughput drifts by 15-30% over minutes; the first bare run is minutes away by now).
  measure_bare "$label-bare"

  for p in "${spids[@]}"; do rss="$rss${rss:+,}$(awk '/VmHWM/ {print $2}' "/proc/$p/status")"; done
  total=$(runs_total "${urls[0]}")
  for u in "${urls[@]}"; do execs=$((execs + $(executions "$u"))); done
  for p in "${spids[@]}"; do kill "$p"; done
  for p in "${spids[@]}"; do wait "$p" 2>/dev/null || true; done
  echo "$label $n $d $cpu_new $cpu_dup $total $execs $rss" >>"$tmp/configs.txt"
}

# --- PostgreSQL: a throwaway server -------------------------------------------------------------
pg_cmd() { if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
find_pg_bin() {
  local d
  if command -v initdb >/dev/null 2>&1; then
    d=$(dirname "$(readlink -f "$(command -v initdb)")")
    [ -x "$d/pg_ctl" ] && { echo "$d"; return 0; }
    d=$(dirname "$(command -v initdb)")
    [ -x "$d/pg_ctl" ] && { echo "$d"; return 0; }
  fi
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ] && { echo "$d"; return 0; }
  done
  return 1
}
pg_port=""
pg_start() {
  pg_bin=$(find_pg_bin) || {
    echo "load: PostgreSQL's initdb/pg_ctl are not on PATH nor in /usr/lib/postgresql/*/bin:" \
      "run scripts/setup.sh test, or PG=0 to skip" >&2
    exit 1
  }
  mkdir -p "$tmp/pg/sock"
  if [ "$(id -u)" -eq 0 ]; then
    chmod o+x "$tmp"  # mktemp -d is 0700: let `postgres` reach its own directory
    chown -R postgres:postgres "$tmp/pg"
  fi
  (cd "$tmp/pg" && pg_cmd "$pg_bin/initdb" -D "$tmp/pg/data" -A trust -U fluxo -E UTF8 --locale=C \
    >"$tmp/pg/initdb.log" 2>&1) || { cat "$tmp/pg/initdb.log" >&2; exit 1; }
  local _
  for _ in 1 2 3 4 5; do  # another process may take the free port in between: retry
    pg_port=$(free_port)
    if (cd "$tmp/pg" && pg_cmd "$pg_bin/pg_ctl" -D "$tmp/pg/data" -l "$tmp/pg/server.log" \
      -o "-p $pg_port -k $tmp/pg/sock -c listen_addresses=127.0.0.1" -w -t 60 start \
      </dev/null >/dev/null 2>&1); then
      return 0
    fi
  done
  echo "load: the PostgreSQL server did not start" >&2
  tail -20 "$tmp/pg/server.log" >&2
  exit 1
}
pg_createdb() {
  "$pg_bin/psql" -q -h 127.0.0.1 -p "$pg_port" -U fluxo -d postgres -v ON_ERROR_STOP=1 \
    -c "CREATE DATABASE $1" >/dev/null
  echo "postgres://fluxo@127.0.0.1:$pg_port/$1"
}

# pg_ceiling URL: pgbench's transactions of 32 claims + queued runs (see the header) on a
# migrated database; writes their rate (transactions/s) to $tmp/ceiling.txt.
pg_ceiling() {
  local url=$1 secs tps
  case $DURATION in  # wrk's duration as pgbench's seconds
    *m) secs=$((${DURATION%m} * 60)) ;;
    *s) secs=${DURATION%s} ;;
    *) secs=$DURATION ;;
  esac
  "$FLUXO" db migrate --store "$url" --data-dir "$tmp/ceiling-data" >/dev/null
  python3 - "$BODY" "$tmp/pg/ceiling.sql" <<'EOF'
import json, sys
body = json.load(open(sys.argv[1]))
record = json.dumps({"id": "r", "workflow_id": "load", "status": "queued", "input": body,
                     "steps": [], "snapshot": {"id": "load"}}).replace("'", "''")
summary = json.dumps({"id": "r", "workflow_id": "load", "status": "queued"}).replace("'", "''")
k = "'pb-' || :b || '-' || g || '-' || :client_id"
r = "'r-' || :b || '-' || g || '-' || :client_id"
open(sys.argv[2], "w").write(f"""\\set b random(1, 1000000000)
WITH won AS (INSERT INTO webhook_claims (workflow_id, key, run_id, claimed_at, expires_at)
  SELECT 'load', {k}, {r}, 1, 9999999999999 FROM generate_series(1, 32) g
  RETURNING key, run_id)
INSERT INTO run_inbox (id, workflow_id, status, mode, trigger, idempotency_key, created_at, root_run_id, summary, record, search_values)
  SELECT run_id, 'load', 'queued', 'live', 'webhook', key, 1767225600000, run_id, '{summary}', '{record}',
    ARRAY(SELECT 'v' || v || '-' || run_id FROM generate_series(1, 5) v) FROM won;
""")
EOF
  if [ "$(id -u)" -eq 0 ]; then chown postgres:postgres "$tmp/pg/ceiling.sql"; fi
  tps=$(cd "$tmp/pg" && pg_cmd "$pg_bin/pgbench" -h 127.0.0.1 -p "$pg_port" -U fluxo -n \
    -f "$tmp/pg/ceiling.sql" -c 4 -j 2 -T "$secs" "${url##*/}" 2>&1 | awk '/^tps/ {print $3}')
  printf '%-16s' "pg alone"
  python3 -c "import sys; t = float(sys.argv[1]); print(f'pgbench: {t:,.0f} transactions/s of 32 claims + queued runs = {t * 32:,.0f} claims/s')" "$tps"
  echo "$tps" >"$tmp/ceiling.txt"
}

echo "load: $(date -u '+%F %T UTC'); load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "load: $(nproc) cores; wrk -t$THREADS -c$CONNS -d$DURATION (warm-up $WARMUP); body $(wc -c <"$BODY") bytes"

# --- (c) the ceiling: a bare axum handler ---------------------------------------------------
measure_bare bare
# --- Node-RED's non-durable echo (the bar) ------------------------------------------------------
if [ "$NODE_RED" != "0" ]; then
  nr_dir="${XDG_CACHE_HOME:-$HOME/.cache}/fluxo-load/node-red"
  if [ ! -x "$nr_dir/node_modules/.bin/node-red" ]; then
    echo "load: installing Node-RED (npm node-red@4) into $nr_dir"
    mkdir -p "$nr_dir"
    (cd "$nr_dir" && npm install --no-audit --no-fund --loglevel=error node-red@4 >/dev/null)
  fi
  mkdir -p "$tmp/node-red"
  cat >"$tmp/node-red/flows.json" <<'EOF'
[
  {"id": "tab", "type": "tab", "label": "load"},
  {"id": "in", "type": "http in", "z": "tab", "url": "/hooks/load", "method": "post", "wires": [["out"]]},
  {"id": "out", "type": "http response", "z": "tab", "statusCode": "202", "wires": []},
  {"id": "hin", "type": "http in", "z": "tab", "url": "/healthz", "method": "get", "wires": [["hout"]]},
  {"id": "hout", "type": "http response", "z": "tab", "statusCode": "200", "wires": []}
]
EOF
  cat >"$tmp/node-red/settings.js" <<'EOF'
module.exports = { httpAdminRoot: false, flowFile: "flows.json", logging: { console: { level: "warn" } } };
EOF
  port=$(free_port)
  "$nr_dir/node_modules/.bin/node-red" --port "$port" --userDir "$tmp/node-red" \
    --settings "$tmp/node-red/settings.js" >"$tmp/node-red.log" 2>&1 &
  nr_pid=$!; pids+=("$nr_pid")
  wait_ready "http://127.0.0.1:$port" "$nr_pid" "$tmp/node-red.log"
  echo "load: Node-RED $(node -p "require('$nr_dir/node_modules/node-red/package.json').version") on node $(node --version)"
  run_load node-red-warm unique nrwarm "$WARMUP" "http://127.0.0.1:$port" >/dev/null
  quiet
  printf '%-16s' "node-red echo"; run_load node-red unique nr "$DURATION" "http://127.0.0.1:$port"
  # Node-RED's own process (node), its peak RSS in kB.
  awk '/VmHWM/ {print $2}' "/proc/$nr_pid/status" >"$tmp/node-red.rss"
  kill "$nr_pid"; wait "$nr_pid" 2>/dev/null || true
fi

# --- fluxo serve --------------------------------------------------------------------------------
: >"$tmp/configs.txt"
measure sled 1
if [ "$PG" != "0" ]; then
  pg_start
  echo "load: PostgreSQL $("$pg_bin/postgres" --version | awk '{print $3}') on 127.0.0.1:$pg_port ($tmp/pg)"
  measure pg1 1 "$(pg_createdb load_pg1)"
  measure pg3 3 "$(pg_createdb load_pg3)"
  [ "$PG_CEILING" != "0" ] && pg_ceiling "$(pg_createdb load_ceiling)"
  pg_stop
fi

echo "load: done $(date -u '+%F %T UTC'); load average $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$tmp" "$CONNS" "$(getconf CLK_TCK)" <<'EOF'
import sys
tmp, conns, hz = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def read(name):
    for line in open(f"{tmp}/{name}.txt"):
        if line.startswith("RESULT"):
            return {k: float(v) for k, v in (p.split("=") for p in line.split()[1:])}
bare = read("bare")
names = {"sled": "sled", "pg1": "pg×1", "pg3": "pg×3"}
configs = []
for line in open(f"{tmp}/configs.txt"):
    label, n, drain, cpu_new, cpu_dup, total, execs, rss = line.split()
    configs.append(dict(label=label, name=names[label], n=int(n), drain=float(drain),
                        cpu_new=int(cpu_new), cpu_dup=int(cpu_dup), total=int(total),
                        execs=int(execs),
                        rss=[int(x) / 1024 for x in rss.split(",")],
                        new=read(f"{label}-new"), dup=read(f"{label}-dup"),
                        warm_new=read(f"{label}-new-warm"), warm_dup=read(f"{label}-dup-warm"),
                        bare=read(f"{label}-bare"), warm_bare=read(f"{label}-bare-warm")))

def e2e(c):
    secs = c["new"]["duration_us"] / 1e6 + c["drain"]
    return c["new"]["requests"] / secs, secs
def rss(c):
    return " / ".join(f"{x:.0f}" for x in c["rss"]) + " MB"

print()
print("| run | req/s | p50 ms | p99 ms | vs bare | runs/s end-to-end | peak RSS (VmHWM) |")
print("|---|---:|---:|---:|---:|---:|---:|")
print(f"| bare axum | {bare['req_s']:,.0f} | {bare['p50_ms']:.2f} | {bare['p99_ms']:.2f} | 100% | | |")
import os
node_red = read("node-red") if os.path.exists(f"{tmp}/node-red.txt") else None
if node_red:
    nr_rss = int(open(f"{tmp}/node-red.rss").read().strip() or 0) / 1024
    print(f"| Node-RED echo (not durable) | {node_red['req_s']:,.0f} | {node_red['p50_ms']:.2f} | "
          f"{node_red['p99_ms']:.2f} | {node_red['req_s'] / bare['req_s']:.0%} | | {nr_rss:.0f} MB |")
for c in configs:
    for kind, r in (("new keys", c["new"]), ("duplicates", c["dup"])):
        runs_s = f"{e2e(c)[0]:,.0f}" if kind == "new keys" else ""
        print(f"| {c['name']} {kind} | {r['req_s']:,.0f} | {r['p50_ms']:.2f} | {r['p99_ms']:.2f} | "
              f"{r['req_s'] / bare['req_s']:.0%} | {runs_s} | {rss(c)} |")
    b = c["bare"]
    print(f"| bare axum, right after {c['name']} duplicates | {b['req_s']:,.0f} | {b['p50_ms']:.2f} | "
          f"{b['p99_ms']:.2f} | {b['req_s'] / bare['req_s']:.0%} | | |")
print()
if any(c["n"] > 1 for c in configs):
    print("pg×3: req/s summed over the three processes, p50/p99 the worst of the three; "
          "RSS per process.")

ok = True
# The new-keys bar: 2x Node-RED's non-durable echo in this sitting, else (NODE_RED=0) 2x the
# top of ARCHITECTURE.md's 2,600-4,200 req/s. The same targets hold for every store.
if node_red:
    bar, bar_src = 2 * node_red["req_s"], f"2 x Node-RED's {node_red['req_s']:,.0f} measured above"
else:
    bar, bar_src = 2 * 4200, "NODE_RED=0: 2 x ARCHITECTURE.md's 2,600-4,200"
ceiling = float(open(f"{tmp}/ceiling.txt").read()) * 32 if os.path.exists(f"{tmp}/ceiling.txt") else None
for c in configs:
    r = c["new"]["req_s"]
    alone = f" (PostgreSQL alone, pgbench: {ceiling:,.0f} claims + queued runs/s)" if ceiling and c["label"] != "sled" else ""
    print(f"target: durable new keys on {c['name']} >= {bar:,.0f} req/s ({bar_src}): {r:,.0f} req/s -> "
          f"{'ok' if r >= bar else 'MISSED'}{alone}")
    r2 = c["dup"]["req_s"] / c["bare"]["req_s"]
    print(f"target: duplicates on {c['name']} >= 90% of bare axum run right after them "
          f"({c['bare']['req_s']:,.0f} req/s): {r2:.0%} -> {'ok' if r2 >= 0.9 else 'MISSED'} "
          f"(against the first bare run: {c['dup']['req_s'] / bare['req_s']:.0%})")
for c in configs:
    worst = max(c["rss"])
    print(f"target: peak RSS of every fluxo serve ({c['name']}) < 150 MB: {rss(c)} -> "
          f"{'ok' if worst < 150 else 'MISSED'}")
print()
for c in configs:
    # every 202 of the new-keys load (and its warm-up) and each duplicate key's first delivery
    expected = int(c["warm_new"]["requests"] + c["new"]["requests"]) + c["n"]
    # wrk stops with requests in flight: the server may have accepted a few it never counted.
    in_flight = 2 * conns
    runs_ok = expected <= c["total"] <= expected + in_flight
    # Each run executed once: the processes' `fluxo_runs_total` summed equals the runs stored.
    once = c["execs"] == c["total"]
    ok = ok and runs_ok and once
    per_s, secs = e2e(c)
    us = lambda ticks, r: ticks / hz * 1e6 / r["requests"]
    print(f"{c['name']}: {c['total']} runs in the store; 202s counted by wrk {expected} "
          f"({'every 202 has its run' if runs_ok else 'MISMATCH'}; up to {in_flight} more were in "
          f"flight when wrk stopped); {c['execs']} runs executed "
          f"({'each run once' if once else 'NOT each run once'}); end to end {per_s:,.0f} runs/s ({c['new']['requests']:.0f} runs "
          f"in {secs:.1f} s: the load, then the backlog drained in {c['drain']} s); fluxo CPU per "
          f"request: new keys {us(c['cpu_new'], c['new']):.0f} us (incl. executing the run), "
          f"duplicates {us(c['cpu_dup'], c['dup']):.0f} us")
cpu = lambda name: int(open(f"{tmp}/{name}.cpu").read())
print(f"bare axum: CPU per request {cpu('bare') / hz * 1e6 / bare['requests']:.0f} us"
      + "".join(f"; right after {c['name']} duplicates "
                f"{cpu(c['label'] + '-bare') / hz * 1e6 / c['bare']['requests']:.0f} us" for c in configs))
results = [bare, read("bare-warm")] + ([node_red, read("node-red-warm")] if node_red else [])
for c in configs:
    results += [c["new"], c["dup"], c["warm_new"], c["warm_dup"], c["bare"], c["warm_bare"]]
bad = sum(int(x["non2xx"] + x["sockerr"]) for x in results)
if bad:
    print(f"load: {bad} requests failed or were not 2xx")
    ok = False
sys.exit(0 if ok else 1)
EOF
