#!/usr/bin/env bash
# Load benchmark of the webhook ingest path (`make load`).
#
# Starts the release `fluxo serve` on a temp data dir with a cheap webhook workflow
# (webhook_trigger -> transform) and measures, with 64 connections and the ~6 KB body of
# tests/fixtures/payloads/stripe/invoice.paid.json:
#   bare        a bare axum handler (examples/bare_axum.rs), the ceiling;
#   new keys    every request a distinct Idempotency-Key: claim + queued run in one sled
#               transaction, made durable by the group commit before the 202;
#   duplicates  one fixed key: every request answered 200 `duplicate: true`.
# Then it reports req/s, p50/p99 latency, the ratios to the ceiling, the peak RSS of
# fluxo serve (VmHWM) and checks that every 202 has its run.
#
# The load tool is wrk (Debian package) with a Lua script that sets a fresh Idempotency-Key on
# every request; the same script builds every request in all three runs (only the key differs),
# so the client's own cost is the same in each. oha cannot vary a header per request.
#
# Knobs: DURATION (10s), WARMUP (3s), CONNS (64), THREADS (2), WORKERS (fluxo serve --workers,
# 8), CACHE_MB (fluxo serve --cache-mb, 16), SKIP_BUILD=1.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-10s}
WARMUP=${WARMUP:-3s}
CONNS=${CONNS:-64}
THREADS=${THREADS:-2}
WORKERS=${WORKERS:-8}
CACHE_MB=${CACHE_MB:-16}
BODY=tests/fixtures/payloads/stripe/invoice.paid.json
TOKEN=load-token

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
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

wait_ready() {
  for _ in $(seq 1 200); do
    curl -fsS "$1/healthz" >/dev/null 2>&1 && return 0
    sleep 0.05
  done
  echo "load: $1 did not come up" >&2
  exit 1
}

mkdir -p "$tmp/workflows" "$tmp/data"
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

# One script for every run: `unique` sets a fresh key per request (thread id + counter),
# `fixed` the same key every time; done() prints one machine-readable line.
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

# run_wrk NAME URL MODE PREFIX DURATION -> prints the RESULT line, keeps it in $tmp/NAME.txt
run_wrk() {
  wrk -t"$THREADS" -c"$CONNS" -d"$5" --timeout 10s -s "$tmp/load.lua" "$2" -- "$BODY" "$3" "$4" \
    >"$tmp/$1.txt"
  grep '^RESULT' "$tmp/$1.txt"
}
# CPU time (user + system, in clock ticks) a process has used so far.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

echo "load: $(nproc) cores; wrk -t$THREADS -c$CONNS -d$DURATION (warm-up $WARMUP); body $(wc -c <"$BODY") bytes"

# --- (c) the ceiling: a bare axum handler ---------------------------------------------------
port=$(free_port)
"$BARE" "127.0.0.1:$port" >"$tmp/bare.log" 2>&1 &
bare_pid=$!; pids+=("$bare_pid")
wait_ready "http://127.0.0.1:$port"
run_wrk bare-warm "http://127.0.0.1:$port/hooks/load" unique warm "$WARMUP" >/dev/null
c0=$(cpu_ticks "$bare_pid")
echo -n "bare axum    "; run_wrk bare "http://127.0.0.1:$port/hooks/load" unique bare "$DURATION"
bare_cpu=$(( $(cpu_ticks "$bare_pid") - c0 ))
kill "$bare_pid"; wait "$bare_pid" 2>/dev/null || true

# --- fluxo serve --------------------------------------------------------------------------------
port=$(free_port)
url="http://127.0.0.1:$port"
"$FLUXO" serve --addr "127.0.0.1:$port" --workflows "$tmp/workflows" --data-dir "$tmp/data" \
  --token "$TOKEN" --workers "$WORKERS" --cache-mb "$CACHE_MB" --retention-runs 100000000 \
  >"$tmp/serve.log" 2>&1 &
serve_pid=$!; pids+=("$serve_pid")
wait_ready "$url"

api() { curl -fsS -H "Authorization: Bearer $TOKEN" "$url/api/v1$1"; }
queued() { api "/runs?status=queued&limit=1" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["runs"]))'; }
drain() {
  local start; start=$(date +%s.%N)
  for _ in $(seq 1 6000); do
    [ "$(queued)" = "0" ] && break
    sleep 0.1
  done
  python3 -c "import time; print(f'{time.time() - $start:.1f}')"
}

# (a) new keys
run_wrk new-warm "$url/hooks/load" unique warm "$WARMUP" >/dev/null
drain >/dev/null
c0=$(cpu_ticks "$serve_pid")
echo -n "new keys     "; run_wrk new "$url/hooks/load" unique new "$DURATION"
new_drain=$(drain)
new_cpu=$(( $(cpu_ticks "$serve_pid") - c0 ))
echo "              backlog of queued runs executed $new_drain s after the load stopped"

# (b) duplicates of one key (the first delivery creates its run)
curl -fsS -o /dev/null -X POST "$url/hooks/load" -H 'Content-Type: application/json' \
  -H 'Idempotency-Key: dup-fixed' --data-binary @"$BODY"
drain >/dev/null
run_wrk dup-warm "$url/hooks/load" fixed dup-fixed "$WARMUP" >/dev/null
c0=$(cpu_ticks "$serve_pid")
echo -n "duplicates   "; run_wrk dup "$url/hooks/load" fixed dup-fixed "$DURATION"
dup_cpu=$(( $(cpu_ticks "$serve_pid") - c0 ))

rss_kb=$(awk '/VmHWM/ {print $2}' "/proc/$serve_pid/status")

# Accounting: every 202 of the new-keys runs has its run (store count by status).
now_ms=$(($(date +%s%N) / 1000000))
since=$((now_ms - 2 * 86400000))
runs_total=$(api "/runs/stats?bucket=day&since=$since" | python3 -c '
import json, sys
d = json.load(sys.stdin)
print(sum(sum(b["counts"].values()) for b in d["buckets"]))')
kill "$serve_pid"; wait "$serve_pid" 2>/dev/null || true

python3 - "$tmp" "$rss_kb" "$runs_total" "$new_drain" "$CONNS" "$bare_cpu" "$new_cpu" "$dup_cpu" "$(getconf CLK_TCK)" <<'EOF'
import sys
tmp, rss_kb, runs_total, drain, conns = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
ticks = dict(zip(("bare", "new", "dup"), (int(x) for x in sys.argv[6:9])))
hz = int(sys.argv[9])
def read(name):
    for line in open(f"{tmp}/{name}.txt"):
        if line.startswith("RESULT"):
            return {k: float(v) for k, v in (p.split("=") for p in line.split()[1:])}
bare, new, dup = read("bare"), read("new"), read("dup")
warm_new = read("new-warm")
warm_dup = read("dup-warm")
expected_runs = int(warm_new["requests"] + new["requests"]) + 1
# Server CPU per request (user + system): robust when other work shares the cores. For new
# keys it includes executing the runs (until the backlog drained), not only accepting them.
us = {k: ticks[k] / hz * 1e6 / v["requests"] for k, v in (("bare", bare), ("new", new), ("dup", dup))}
print()
print("| run | req/s | p50 ms | p99 ms | vs bare | target | server CPU per request |")
print("|---|---:|---:|---:|---:|---|---:|")
print(f"| bare axum handler | {bare['req_s']:.0f} | {bare['p50_ms']:.2f} | {bare['p99_ms']:.2f} | 100% | ceiling | {us['bare']:.0f} us |")
r = new["req_s"] / bare["req_s"]
print(f"| new keys (durable claim + queued run) | {new['req_s']:.0f} | {new['p50_ms']:.2f} | {new['p99_ms']:.2f} | {r:.0%} | >= 50% {'ok' if r >= 0.5 else 'MISSED'} | {us['new']:.0f} us (incl. executing the run) |")
r2 = dup["req_s"] / bare["req_s"]
print(f"| duplicates (one key) | {dup['req_s']:.0f} | {dup['p50_ms']:.2f} | {dup['p99_ms']:.2f} | {r2:.0%} | >= 70% {'ok' if r2 >= 0.7 else 'MISSED'} | {us['dup']:.0f} us |")
rss_mb = rss_kb / 1024
print()
print(f"peak RSS of fluxo serve (VmHWM): {rss_mb:.0f} MB (target < 150 MB: {'ok' if rss_mb < 150 else 'MISSED'})")
# wrk stops with requests in flight: the server may have accepted a few it never counted.
in_flight = 2 * int(conns)
runs_ok = expected_runs <= runs_total <= expected_runs + in_flight
secs = new["duration_us"] / 1e6 + float(drain)
print(f"end to end: {new['requests'] / secs:.0f} runs/s accepted durably and executed "
      f"({new['requests']:.0f} runs in {secs:.1f} s: the load, then the backlog)")
print(f"runs in the store: {runs_total}; 202s counted by wrk: {expected_runs} "
      f"({'every 202 has its run' if runs_ok else 'MISMATCH'}; up to {in_flight} more were in "
      f"flight when wrk stopped); backlog drained {drain} s after the new-keys run")
bad = sum(int(x["non2xx"] + x["sockerr"]) for x in (bare, new, dup, warm_new, warm_dup))
if bad:
    print(f"load: {bad} requests failed or were not 2xx")
    sys.exit(1)
if not runs_ok:
    sys.exit(1)
EOF
