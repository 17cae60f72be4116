// Starts a real `fluxo serve` for the browser tests: a free port, a temp data dir, a temp copy
// of the example workflows, a known token, and the built UI (ui/dist). Tests read
// FLUXO_E2E_URL and FLUXO_E2E_TOKEN. The returned function stops the server.

import { spawn, type ChildProcess } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const uiDir = resolve(here, '..');
const repo = resolve(uiDir, '..');

function freePort(): Promise<number> {
  return new Promise((ok, fail) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', fail);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => ok(port));
    });
  });
}

async function waitHealthy(url: string, child: ChildProcess, log: () => string): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`fluxo serve exited with ${child.exitCode}:\n${log()}`);
    try {
      const r = await fetch(`${url}/healthz`);
      if (r.ok) return;
    } catch {
      /* not up yet */
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`fluxo serve did not become healthy at ${url}:\n${log()}`);
}

/** A running `fluxo serve` on temp folders: its URL, token, workflows folder, and a stop. */
export interface Fluxo {
  url: string;
  token: string;
  workflows: string;
  stop(): Promise<void>;
}

/** Start `fluxo serve` on a free port with a fresh temp data dir, a temp copy of the example
 * workflows, a known token, the built UI, and no `FLUXO_*` variables (so no `env.*` is set). */
export async function startFluxo(): Promise<Fluxo> {
  const bin = process.env.FLUXO_BIN ?? join(repo, 'target', 'debug', 'fluxo');
  if (!existsSync(bin)) throw new Error(`no fluxo binary at ${bin}: run \`cargo build\` in ${repo} (or set FLUXO_BIN)`);
  const dist = join(uiDir, 'dist');
  if (!existsSync(join(dist, 'index.html'))) throw new Error(`no built UI in ${dist}: run \`npm run build\` first`);

  const tmp = mkdtempSync(join(tmpdir(), 'fluxo-e2e-'));
  const workflows = join(tmp, 'workflows');
  const dataDir = join(tmp, 'data');
  cpSync(join(repo, 'workflows'), workflows, { recursive: true, filter: (src) => !src.endsWith('~') });
  const port = await freePort();
  const token = `e2e-${Math.random().toString(36).slice(2)}-0123456789abcdef0123456789`;
  const url = `http://127.0.0.1:${port}`;
  let output = '';
  // No FLUXO_ENV_* variables: `env.CRM_URL` is missing (dry runs use a placeholder for it).
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('FLUXO_')));
  const child = spawn(
    bin,
    ['serve', '--addr', `127.0.0.1:${port}`, '--workflows', workflows, '--data-dir', dataDir, '--token', token, '--ui', dist, '--workers', '2'],
    { env: { ...env, RUST_LOG: env.RUST_LOG ?? 'warn' }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  child.stdout?.on('data', (d) => (output += d));
  child.stderr?.on('data', (d) => (output += d));
  await waitHealthy(url, child, () => output);

  const stop = async () => {
    if (child.exitCode === null) {
      child.kill('SIGTERM');
      await new Promise<void>((r) => {
        const t = setTimeout(() => {
          child.kill('SIGKILL');
          r();
        }, 8000);
        child.once('exit', () => {
          clearTimeout(t);
          r();
        });
      });
    }
    rmSync(tmp, { recursive: true, force: true });
  };
  return { url, token, workflows, stop };
}

export default async function globalSetup(): Promise<() => Promise<void>> {
  const fluxo = await startFluxo();
  process.env.FLUXO_E2E_URL = fluxo.url;
  process.env.FLUXO_E2E_TOKEN = fluxo.token;
  process.env.FLUXO_E2E_WORKFLOWS = fluxo.workflows;
  console.log(`fluxo serve on ${fluxo.url} (workflows: ${readdirSync(fluxo.workflows).length} files)`);
  return fluxo.stop;
}
