// The run history with 100,000 runs: time from the tab click (and from navigation) to the
// first rows, and frame times while scrolling the list fast (pages load as it goes). Prints
// the numbers; never fails on timing, only on the page not working.
//
// It seeds its own data dir with `examples/seed_runs.rs` (built with `cargo build --release
// --example seed_runs` if missing) and starts its own `fluxo serve` (release binary if built,
// else debug). `FLUXO_HISTORY_RUNS` changes the count. Or point it at a
// server you seeded: FLUXO_HISTORY_URL and FLUXO_HISTORY_TOKEN.

import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, test, type Page } from '@playwright/test';

const repo = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const RUNS = Number(process.env.FLUXO_HISTORY_RUNS ?? 100_000);

function freePort(): Promise<number> {
  return new Promise((ok, fail) => {
    const srv = createServer();
    srv.on('error', fail);
    srv.listen(0, '127.0.0.1', () => {
      const a = srv.address();
      srv.close(() => ok(typeof a === 'object' && a ? a.port : 0));
    });
  });
}

let child: ChildProcess | null = null;
let tmp: string | null = null;
let url = process.env.FLUXO_HISTORY_URL ?? '';
let tok = process.env.FLUXO_HISTORY_TOKEN ?? '';

test.beforeAll(async () => {
  test.setTimeout(900_000);
  if (url) return;
  const seed = join(repo, 'target', 'release', 'examples', 'seed_runs');
  if (!existsSync(seed)) {
    const b = spawnSync('cargo', ['build', '--release', '--example', 'seed_runs'], { cwd: repo, stdio: 'inherit' });
    if (b.status !== 0 || !existsSync(seed)) throw new Error(`cannot build the seeder: cargo build --release --example seed_runs (in ${repo})`);
  }
  tmp = mkdtempSync(join(tmpdir(), 'fluxo-history-perf-'));
  const data = join(tmp, 'data');
  const t = Date.now();
  const r = spawnSync(seed, ['--data-dir', data, '--runs', String(RUNS), '--span-hours', '48'], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`seed_runs failed: ${r.stderr}`);
  console.log(`seeded ${RUNS} runs in ${((Date.now() - t) / 1000).toFixed(1)} s`);
  const release = join(repo, 'target', 'release', 'fluxo');
  const bin = process.env.FLUXO_BIN ?? (existsSync(release) ? release : join(repo, 'target', 'debug', 'fluxo'));
  const port = await freePort();
  tok = `perf-${Math.random().toString(36).slice(2)}-0123456789abcdef0123456789`;
  url = `http://127.0.0.1:${port}`;
  child = spawn(
    bin,
    ['serve', '--addr', `127.0.0.1:${port}`, '--workflows', join(repo, 'workflows'), '--data-dir', data, '--token', tok, '--ui', join(repo, 'ui', 'dist'), '--retention-runs', '100000000'],
    { stdio: 'ignore' },
  );
  await expect
    .poll(async () => {
      try {
        return (await fetch(`${url}/healthz`)).ok;
      } catch {
        return false;
      }
    }, { timeout: 60_000 })
    .toBe(true);
});

test.afterAll(async () => {
  if (child && child.exitCode === null) {
    child.kill('SIGTERM');
    await new Promise((r) => child!.once('exit', r));
  }
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

/** Arm in-page timers: the tab click and the first run row, in performance.now() time. */
async function armTimers(page: Page) {
  await page.evaluate(() => {
    const w = window as unknown as { __t: { click?: number; rows?: number } };
    w.__t = {};
    document.querySelector('[data-testid="view-runs"]')?.addEventListener('click', () => (w.__t.click ??= performance.now()), { capture: true });
    const mo = new MutationObserver(() => {
      if (w.__t.rows === undefined && document.querySelector('[data-testid="run-row"]')) {
        w.__t.rows = performance.now();
        mo.disconnect();
      }
    });
    mo.observe(document.body, { childList: true, subtree: true });
  });
}

const stats = (xs: number[]) => {
  const d = [...xs].sort((a, b) => a - b);
  const q = (p: number) => d[Math.min(d.length - 1, Math.floor(p * d.length))] ?? NaN;
  return { n: d.length, p50: q(0.5), p95: q(0.95), max: d[d.length - 1] ?? NaN };
};

test(`run history with ${RUNS.toLocaleString('en-US')} runs: first rows and scrolling`, async ({ page }) => {
  test.setTimeout(300_000);
  const head = await (await fetch(`${url}/api/v1/runs?limit=1`, { headers: { Authorization: `Bearer ${tok}` } })).json();
  expect(head.runs.length).toBe(1);

  // Tab click → first rows (the view mounts, asks for the first page, renders).
  const clicks: number[] = [];
  await page.goto(`${url}/#token=${tok}`);
  await expect(page.getByTestId('editor')).toBeVisible();
  for (let i = 0; i < 7; i++) {
    await armTimers(page);
    await page.getByTestId('view-runs').click();
    await expect(page.getByTestId('run-row').first()).toBeVisible();
    const t = await page.evaluate(() => (window as unknown as { __t: { click: number; rows: number } }).__t);
    clicks.push(t.rows - t.click);
    await page.getByTestId('view-editor').click();
    await expect(page.getByTestId('editor')).toBeVisible();
  }

  // Navigation straight to the Runs view → first rows (loads the app, the editor's catalog, then the list).
  await page.addInitScript(() => {
    const w = window as unknown as { __firstRow?: number };
    const mo = new MutationObserver(() => {
      if (w.__firstRow === undefined && document.querySelector('[data-testid="run-row"]')) {
        w.__firstRow = performance.now();
        mo.disconnect();
      }
    });
    mo.observe(document, { childList: true, subtree: true });
  });
  const navs: number[] = [];
  for (let i = 0; i < 5; i++) {
    await page.goto('about:blank');
    await page.goto(`${url}/#runs&token=${tok}`);
    await expect(page.getByTestId('run-row').first()).toBeVisible();
    navs.push(await page.evaluate(() => (window as unknown as { __firstRow: number }).__firstRow));
  }

  // Scroll fast: 120 px per frame for 900 frames (about 3,200 rows), pages loading on the way.
  const scroll = await page.evaluate(
    () =>
      new Promise<{ frames: number[]; rows: number; scrolled: number }>((done) => {
        const el = document.querySelector('[data-testid="run-scroll"]') as HTMLElement;
        const frames: number[] = [];
        let n = 0;
        const loop = (t: number) => {
          frames.push(t);
          el.scrollTop += 120;
          if (++n < 900) requestAnimationFrame(loop);
          else done({ frames, rows: Number(document.querySelector('[data-testid="run-list"]')!.getAttribute('data-count')), scrolled: el.scrollTop });
        };
        requestAnimationFrame(loop);
      }),
  );
  const deltas = scroll.frames.slice(1).map((t, i) => t - scroll.frames[i]);
  const rendered = await page.getByTestId('run-row').count();

  // Load a long list (jump to the end until 20,000 runs are loaded), then scroll it back up fast.
  const target = Math.min(20_000, RUNS);
  const loaded = await page.evaluate(
    (want) =>
      new Promise<{ rows: number; ms: number }>((done) => {
        const el = document.querySelector('[data-testid="run-scroll"]') as HTMLElement;
        const list = document.querySelector('[data-testid="run-list"]')!;
        const t0 = performance.now();
        const tick = () => {
          const rows = Number(list.getAttribute('data-count'));
          if (rows >= want || list.getAttribute('data-more') !== 'true' || performance.now() - t0 > 120_000) return done({ rows, ms: performance.now() - t0 });
          el.scrollTop = el.scrollHeight;
          requestAnimationFrame(tick);
        };
        tick();
      }),
    target,
  );
  const up = await page.evaluate(
    () =>
      new Promise<number[]>((done) => {
        const el = document.querySelector('[data-testid="run-scroll"]') as HTMLElement;
        const frames: number[] = [];
        let n = 0;
        const loop = (t: number) => {
          frames.push(t);
          el.scrollTop -= 240;
          if (++n < 600) requestAnimationFrame(loop);
          else done(frames);
        };
        requestAnimationFrame(loop);
      }),
  );
  const upDeltas = up.slice(1).map((t, i) => t - up[i]);

  const c = stats(clicks);
  const s = stats(deltas);
  console.log(`\nRun history, ${RUNS.toLocaleString('en-US')} runs in the store:`);
  console.log(`  tab click → first rows    median ${c.p50.toFixed(0)} ms  max ${c.max.toFixed(0)} ms  (${clicks.map((x) => x.toFixed(0)).join(', ')})`);
  console.log(`  navigation → first rows   median ${stats(navs).p50.toFixed(0)} ms  (${navs.map((x) => x.toFixed(0)).join(', ')})`);
  console.log(
    `  scrolling (rAF deltas)    p50 ${s.p50.toFixed(1)} ms  p95 ${s.p95.toFixed(1)} ms  max ${s.max.toFixed(1)} ms  frames > 50 ms: ${deltas.filter((d) => d > 50).length}/${deltas.length}`,
  );
  console.log(`  after scrolling: ${scroll.rows.toLocaleString('en-US')} runs loaded, ${rendered} rows in the DOM, scrollTop ${scroll.scrolled}`);
  const u = stats(upDeltas);
  console.log(`  ${loaded.rows.toLocaleString('en-US')} runs loaded by paging to the end in ${(loaded.ms / 1000).toFixed(1)} s; then scrolling up 240 px/frame:`);
  console.log(
    `                            p50 ${u.p50.toFixed(1)} ms  p95 ${u.p95.toFixed(1)} ms  max ${u.max.toFixed(1)} ms  frames > 50 ms: ${upDeltas.filter((d) => d > 50).length}/${upDeltas.length}, ${await page.getByTestId('run-row').count()} rows in the DOM`,
  );
  expect(scroll.rows).toBeGreaterThan(1000);
  expect(rendered).toBeLessThan(200);
});
