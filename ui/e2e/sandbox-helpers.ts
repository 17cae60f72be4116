// `fluxo sandbox` for the browser tests: the real destination (Stripe-style Idempotency-Key,
// fault rules), started on a free port with its own temp data dir.

import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const repo = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');

export interface SandboxLogEntry {
  method: string;
  path: string;
  idempotency_key?: string | null;
  status: number | null;
  fault?: string | null;
  replayed?: boolean;
}

export interface Sandbox {
  url: string;
  /** A fault rule for every matching request until cleared (`POST /_sandbox/faults`). */
  fault(route: string, fault: string): Promise<void>;
  clearFaults(): Promise<void>;
  /** The request log, oldest first. */
  log(): Promise<SandboxLogEntry[]>;
  /** `GET /{collection}` as raw text (numbers exactly as stored). */
  listText(collection: string): Promise<string>;
  list<T = Record<string, unknown>>(collection: string): Promise<T[]>;
  close(): Promise<void>;
}

function freePort(): Promise<number> {
  return new Promise((ok, fail) => {
    const srv = createServer();
    srv.on('error', fail);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => ok(port));
    });
  });
}

async function call(url: string, method = 'GET', body?: unknown): Promise<Response> {
  const r = await fetch(url, {
    method,
    headers: body === undefined ? {} : { 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!r.ok) throw new Error(`${method} ${url}: ${r.status} ${await r.text()}`);
  return r;
}

export async function startSandbox(): Promise<Sandbox> {
  const bin = process.env.FLUXO_BIN ?? join(repo, 'target', 'debug', 'fluxo');
  const dir = mkdtempSync(join(tmpdir(), 'fluxo-e2e-sandbox-'));
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  let output = '';
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('FLUXO_')));
  const child = spawn(bin, ['sandbox', '--addr', `127.0.0.1:${port}`, '--data-dir', dir], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout?.on('data', (d) => (output += d));
  child.stderr?.on('data', (d) => (output += d));
  const deadline = Date.now() + 20_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`fluxo sandbox exited with ${child.exitCode}:\n${output}`);
    try {
      if ((await fetch(`${url}/healthz`)).ok) break;
    } catch {
      /* not up yet */
    }
    if (Date.now() > deadline) throw new Error(`fluxo sandbox did not start at ${url}:\n${output}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    url,
    async fault(route, fault) {
      await call(`${url}/_sandbox/faults`, 'POST', { route, fault });
    },
    async clearFaults() {
      await call(`${url}/_sandbox/faults`, 'DELETE');
    },
    async log() {
      return ((await (await call(`${url}/_sandbox/log`)).json()) as { data: SandboxLogEntry[] }).data;
    },
    async listText(collection) {
      return (await call(`${url}/${collection}`)).text();
    },
    async list<T>(collection: string) {
      return ((await (await call(`${url}/${collection}`)).json()) as { data: T[] }).data;
    },
    async close() {
      if (child.exitCode === null) {
        child.kill('SIGTERM');
        await new Promise<void>((r) => {
          const t = setTimeout(() => (child.kill('SIGKILL'), r()), 5000);
          child.once('exit', () => (clearTimeout(t), r()));
        });
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** invoice-paid-once pointed at `env.E2E_SANDBOX_URL` with its own namespace and quick retries; without its compensation when `undo` is false (the claim then stays held). */
export function resumeFlow(id: string, namespace: string, undo: boolean): Record<string, unknown> {
  const wf = JSON.parse(readFileSync(resolve(repo, 'workflows/invoice-paid-once.json'), 'utf8')) as {
    id: string;
    name: string;
    steps: { id: string; config: Record<string, unknown> }[];
    edges: { from: string; to: string }[];
  };
  wf.id = id;
  wf.name = `${wf.name} (e2e resume${undo ? '' : ', claim kept'})`;
  for (const s of wf.steps) {
    if (s.config.namespace) s.config.namespace = namespace;
    if (s.id === 'create') Object.assign(s.config, { url: '{{ env.E2E_SANDBOX_URL }}/deals', retries: 1, retry_base_delay_ms: 50 });
  }
  if (!undo) {
    wf.steps = wf.steps.filter((s) => s.id !== 'undo');
    wf.edges = wf.edges.filter((e) => e.to !== 'undo');
  }
  return wf;
}
