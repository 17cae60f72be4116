#!/usr/bin/env python3
"""Legitimate latency under slow clients (issue 42, bounded intake), measured by hand.

Starts `fluxo serve` (FLUXO_BIN, default target/debug/fluxo) on a free loopback port with one
webhook workflow, opens SLOW (default 1000) slow uploads from 127.0.0.1 (a `POST /hooks/slow`
head with `Content-Length: 1000000`, then a byte every 2 s; each reconnects when the server
lets it go), waits 3 s, then sends PROBES (default 200) `GET /healthz` and as many webhook
deliveries (fresh key, new connection each, one at a time) and prints p50/p99/max of each.

    python3 scripts/slow-clients.py            # SLOW=1000 PROBES=200
    SLOW=0 python3 scripts/slow-clients.py     # the same probes without the attack

Loopback only; everything stops after the probes (each has a 10 s timeout).
"""

import asyncio
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time

SLOW = int(os.environ.get("SLOW", "1000"))
PROBES = int(os.environ.get("PROBES", "200"))
BIN = os.environ.get("FLUXO_BIN", "target/debug/fluxo")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


async def request(port, raw, timeout=10.0):
    """Send `raw` on a new connection; answer (status, seconds) or (error, seconds)."""
    started = time.monotonic()
    try:
        r, w = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), timeout)
        w.write(raw)
        await w.drain()
        head = await asyncio.wait_for(r.readuntil(b"\r\n\r\n"), timeout)
        status = head.split(b" ", 2)[1].decode()
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        await asyncio.wait_for(r.readexactly(length), timeout)
        w.close()
        return status, time.monotonic() - started
    except Exception as e:  # noqa: BLE001 - any failure is a failed probe
        return f"error {type(e).__name__}", time.monotonic() - started


async def slow_upload(port, stop):
    head = (
        f"POST /hooks/slow HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        "Content-Type: application/json\r\nContent-Length: 1000000\r\n\r\n{"
    ).encode()
    for _ in range(1000):
        if stop.is_set():
            return
        try:
            r, w = await asyncio.open_connection("127.0.0.1", port)
            w.write(head)
            await w.drain()
            for _ in range(30):
                if stop.is_set():
                    break
                try:
                    got = await asyncio.wait_for(r.read(1024), 2.0)
                    break  # answered or closed
                except asyncio.TimeoutError:
                    w.write(b" ")
                    await w.drain()
            w.close()
        except Exception:  # noqa: BLE001 - reconnect
            await asyncio.sleep(0.05)


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


async def main():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    tmp = tempfile.mkdtemp()
    os.makedirs(f"{tmp}/workflows")
    for wid in ("slow", "fast"):
        wf = {
            "id": wid, "name": wid, "version": 1,
            "steps": [
                {"id": "hook", "kind": "webhook_trigger", "config": {}},
                {"id": "shape", "kind": "transform",
                 "config": {"fields": {"event": "{{ input.id | default('none') }}"}}},
            ],
            "edges": [{"from": "hook", "to": "shape"}],
        }
        with open(f"{tmp}/workflows/{wid}.json", "w") as f:
            json.dump(wf, f)
    port = free_port()
    log = open(f"{tmp}/serve.log", "w")
    child = subprocess.Popen(
        [BIN, "serve", "--addr", f"127.0.0.1:{port}", "--workflows", f"{tmp}/workflows",
         "--data-dir", f"{tmp}/data", "--token", "measure-token-0123456789abcdef0123456789"],
        stdout=subprocess.DEVNULL, stderr=log, env={**os.environ, "FLUXO_LOG": "warn"})
    try:
        health = f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()
        for _ in range(200):
            if (await request(port, health, 1.0))[0] == "200":
                break
            await asyncio.sleep(0.1)
        stop = asyncio.Event()
        attackers = [asyncio.create_task(slow_upload(port, stop)) for _ in range(SLOW)]
        await asyncio.sleep(3 if SLOW else 0)
        lat = {"healthz": [], "webhook": []}
        bad = {"healthz": [], "webhook": []}
        for i in range(PROBES):
            st, t = await request(port, health)
            (lat if st == "200" else bad)["healthz"].append(t if st == "200" else st)
            body = json.dumps({"id": f"evt-{i}"}).encode()
            hook = (
                f"POST /hooks/fast HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                f"Content-Type: application/json\r\nIdempotency-Key: m-{i}-{time.time()}\r\n"
                f"Content-Length: {len(body)}\r\n\r\n"
            ).encode() + body
            st, t = await request(port, hook)
            (lat if st == "202" else bad)["webhook"].append(t if st == "202" else st)
        stop.set()
        for a in attackers:
            a.cancel()
        print(f"{SLOW} slow clients, {PROBES} probes each ({BIN}):")
        for k in ("healthz", "webhook"):
            xs = lat[k]
            if xs:
                print(f"  {k}: p50 {pct(xs, 50)*1000:.1f} ms, p99 {pct(xs, 99)*1000:.1f} ms, "
                      f"max {max(xs)*1000:.1f} ms, failed {len(bad[k])}/{PROBES} {sorted(set(bad[k]))}")
            else:
                print(f"  {k}: every probe failed: {sorted(set(bad[k]))}")
    finally:
        child.kill()
        child.wait()


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
