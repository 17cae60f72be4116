// Interaction smoothness with a 300-step workflow: frame times (requestAnimationFrame deltas)
// while panning the canvas and dragging nodes. It prints p50/p95/max; it never fails on timing
// (the numbers depend on the machine), only on the page not working.

import { expect, test, type Page } from '@playwright/test';
import { apiPut, node, openEditor, openWorkflow } from './helpers';

const STEPS = 300;
const COLS = 20;

function bigWorkflow() {
  const steps: unknown[] = [{ id: 'start', kind: 'manual_trigger', position: { x: 0, y: 0 }, config: {} }];
  const edges: unknown[] = [];
  for (let i = 1; i < STEPS; i++) {
    const row = Math.floor(i / COLS);
    const col = i % COLS;
    steps.push({
      id: `t${i}`,
      kind: 'transform',
      position: { x: col * 260, y: row * 170 },
      config: { fields: { n: i, label: `step ${i} of {{ input.name | default("run") }}` } },
    });
    const prev = col === 0 ? (row === 1 ? 'start' : `t${i - COLS}`) : i === 1 ? 'start' : `t${i - 1}`;
    edges.push({ from: prev, to: `t${i}` });
  }
  return { id: 'perf-300', name: 'Performance: 300 steps', version: 0, steps, edges };
}

async function record(page: Page, action: () => Promise<void>) {
  await page.evaluate(() => {
    const w = window as unknown as { __frames: number[]; __rec: boolean };
    w.__frames = [];
    w.__rec = true;
    const loop = (t: number) => {
      w.__frames.push(t);
      if (w.__rec) requestAnimationFrame(loop);
    };
    requestAnimationFrame(loop);
  });
  const t0 = Date.now();
  await action();
  const wall = Date.now() - t0;
  const frames = await page.evaluate(() => {
    const w = window as unknown as { __frames: number[]; __rec: boolean };
    w.__rec = false;
    return w.__frames;
  });
  const d = frames.slice(1).map((t, i) => t - frames[i]).sort((a, b) => a - b);
  const q = (p: number) => d[Math.min(d.length - 1, Math.floor(p * d.length))] ?? NaN;
  return { frames: d.length, p50: q(0.5), p95: q(0.95), max: d[d.length - 1] ?? NaN, wall };
}

async function drag(page: Page, from: { x: number; y: number }, dx: number, dy: number, steps: number) {
  await page.mouse.move(from.x, from.y);
  await page.mouse.down();
  for (let i = 1; i <= steps; i++) {
    await page.mouse.move(from.x + (dx * i) / steps, from.y + (dy * i) / steps);
  }
  await page.mouse.up();
}

test('frame times with 300 steps on the canvas', async ({ page, request }) => {
  await apiPut(request, '/workflows/perf-300', bigWorkflow());
  await openEditor(page);
  await openWorkflow(page, 'perf-300');
  await expect(page.locator('.react-flow__node')).toHaveCount(STEPS);
  await expect(page.locator('[data-testid^="edge-"]')).toHaveCount(STEPS - 1);
  const pane = (await page.locator('.react-flow__pane').boundingBox())!;
  const centre = { x: pane.x + pane.width / 2, y: pane.y + pane.height / 2 };
  const results: Record<string, Awaited<ReturnType<typeof record>>> = {};

  // Everything in view: the worst case for drawing. Fit stops at a readable zoom, so zoom out
  // with the controls until the whole graph is drawn.
  const zoomOut = page.locator('.react-flow__controls-zoomout');
  for (let i = 0; i < 20 && (await zoomOut.isEnabled()); i++) {
    const inView = await page.locator('.react-flow__node').evaluateAll((els) => {
      const pane = document.querySelector('.react-flow__pane')!.getBoundingClientRect();
      return els.every((e) => {
        const r = e.getBoundingClientRect();
        return r.left >= pane.left && r.right <= pane.right && r.top >= pane.top && r.bottom <= pane.bottom;
      });
    });
    if (inView) break;
    await zoomOut.click();
  }
  await page.waitForTimeout(300);
  results['pan, all 300 in view'] = await record(page, () => drag(page, { x: pane.x + 30, y: pane.y + 30 }, 300, 200, 90));

  // Zoomed in (about 100 %): a part of the graph in view.
  for (let i = 0; i < 3; i++) await page.locator('.react-flow__controls-zoomin').click();
  await page.waitForTimeout(300);
  results['pan, zoomed in'] = await record(page, () => drag(page, { x: centre.x, y: pane.y + 20 }, -250, 120, 90));
  await page.getByTestId('fit-view').click();
  await page.waitForTimeout(300);
  const box = (await node(page, 't1').getByTestId('node-title').boundingBox())!;
  results['drag one node'] = await record(page, () => drag(page, { x: box.x + 5, y: box.y + 5 }, 180, 120, 90));

  // All 300 selected and dragged together.
  await page.locator('.react-flow__pane').click({ position: { x: 5, y: 5 } });
  await page.keyboard.press('Control+a');
  const box2 = (await node(page, 't2').getByTestId('node-title').boundingBox())!;
  results['drag all 300 selected'] = await record(page, () => drag(page, { x: box2.x + 5, y: box2.y + 5 }, 120, 80, 60));

  console.log('\nFrame times, 300 steps (rAF deltas, ms):');
  for (const [k, r] of Object.entries(results)) {
    console.log(
      `  ${k.padEnd(24)} p50 ${r.p50.toFixed(1).padStart(6)}  p95 ${r.p95.toFixed(1).padStart(6)}  max ${r.max.toFixed(1).padStart(6)}  (${r.frames} frames, ${r.wall} ms)`,
    );
  }
  for (const r of Object.values(results)) expect(r.frames).toBeGreaterThan(5);
});
