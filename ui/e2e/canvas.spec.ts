import { resolve } from 'node:path';
import AxeBuilder from '@axe-core/playwright';
import { expect, test, type Page } from '@playwright/test';
import { baseUrl, edge, expectWholeFlowInView, fitDone, newBlank, node, openEditor, openWorkflow, select, token, zoomOf } from './helpers';

/** Below this zoom nodes draw their compact form (src/canvas/fit.ts COMPACT_ZOOM). */
const READABLE_ZOOM = 0.75;

// A Stripe/Twitter-sized id: beyond 2^53, `JSON.parse` would make it …693800.
const BIG = '1610521604143693812';

test('a 19-digit id survives Format, a dry run from the editor, its display, the copy and the stored run', async ({ page, request, context }) => {
  await context.grantPermissions(['clipboard-read', 'clipboard-write']);
  await openEditor(page);
  await newBlank(page);

  await page.getByTestId('edit-input').click();
  const input = page.getByTestId('run-input');
  await input.fill(`{"id": ${BIG}}`);
  await page.getByTestId('format-input').click();
  await expect(input).toHaveValue(`{\n  "id": ${BIG}\n}`);

  await page.getByTestId('dry-run').click();
  await expect(page.getByTestId('run-status')).toHaveText('succeeded');
  // The trigger's output (the input) in the results table and on the node's output card.
  await expect(page.getByTestId('result-row-start')).toContainText(BIG);
  await node(page, 'start').hover();
  await expect(page.getByTestId('node-output-start')).toContainText(BIG);

  // What the server stored: the raw text of the run, not a rounded double.
  const runId = (await page.getByTestId('run-id').textContent())!.trim();
  const r = await request.get(`${baseUrl()}/api/v1/runs/${encodeURIComponent(runId)}`, { headers: { Authorization: `Bearer ${token()}` } });
  expect(r.ok()).toBeTruthy();
  const raw = await r.text();
  expect(raw).toContain(`"id":${BIG}`);
  expect(raw).not.toContain('1610521604143693800');

  // The run detail in history shows and copies the digits.
  await page.getByTestId('view-runs').click();
  await page.goto(`${baseUrl()}/#runs/${encodeURIComponent(runId)}`);
  await expect(page.getByTestId('run-detail')).toHaveAttribute('data-run-id', runId);
  const shown = page.getByTestId('run-input-json');
  await expect(shown.locator('.fx-json-line', { hasText: 'id:' })).toHaveText(`id: ${BIG}`);
  await shown.getByTestId('json-copy').click();
  expect(await page.evaluate(() => navigator.clipboard.readText())).toContain(`"id": ${BIG}`);
  await page.getByTestId('step-start').locator('.fx-step-head').click();
  await expect(page.getByTestId('step-start').getByTestId('step-output')).toContainText(BIG);
});

test('a 19-digit Memory value shows and copies with every digit', async ({ page, request, context }) => {
  await context.grantPermissions(['clipboard-read', 'clipboard-write']);
  const auth = { Authorization: `Bearer ${token()}` };
  const wf = {
    id: 'e2e-big-memory',
    name: 'Big ids into Memory',
    version: 0,
    settings: { run_timeout_s: 50 },
    steps: [
      { id: 'start', kind: 'manual_trigger', position: { x: 0, y: 0 }, config: {} },
      {
        id: 'keep',
        kind: 'memory',
        position: { x: 300, y: 0 },
        config: { operation: 'write', namespace: 'big-ids', key: '{{ input.key }}', value: '{{ input.id }}' },
      },
    ],
    edges: [{ from: 'start', to: 'keep' }],
  };
  const put = await request.put(`${baseUrl()}/api/v1/workflows/${wf.id}`, { headers: auth, data: wf });
  expect(put.ok(), await put.text()).toBeTruthy();
  // The body as text: a JS object would round the id before it is sent.
  const run = await request.post(`${baseUrl()}/api/v1/workflows/${wf.id}/runs`, {
    headers: { ...auth, 'Content-Type': 'application/json' },
    data: `{"input": {"key": "k-big", "id": ${BIG}}}`,
  });
  expect(run.ok(), await run.text()).toBeTruthy();
  await expect
    .poll(async () => (await request.get(`${baseUrl()}/api/v1/memory/big-ids/k-big`, { headers: auth })).text())
    .toContain(BIG);

  await page.goto(`${baseUrl()}/#token=${token()}`);
  await page.getByTestId('view-memory').click();
  await page.getByTestId('namespace-big-ids').click();
  const row = page.locator('[data-testid="memory-row"][data-key="k-big"]');
  await expect(row).toContainText(BIG);
  await row.click();
  const value = page.getByTestId('memory-value');
  await expect(value).toContainText(BIG);
  await value.getByTestId('json-copy').click();
  expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(BIG);
});

/** Wait until the canvas has stopped panning (an added step is brought into view with an animation). */
async function viewportSettled(page: Page): Promise<void> {
  const read = () => page.locator('.react-flow__viewport').evaluate((e) => (e as HTMLElement).style.transform);
  let last = await read();
  await expect(async () => {
    await page.waitForTimeout(120);
    const now = await read();
    const same = now === last;
    last = now;
    expect(same).toBe(true);
  }).toPass();
}

async function newFromTemplate(page: Page, id: string): Promise<void> {
  await page.getByTestId('tab-workflows').click();
  await page.getByTestId('new-workflow').click();
  await page.getByTestId(`new-from-${id}`).click();
  const dialog = page.getByTestId('confirm-dialog');
  if (await dialog.isVisible()) await page.getByTestId('confirm-ok').click();
  await expect(page.getByTestId('workflow-version')).toHaveText('new');
  await fitDone(page);
}

for (const [width, height] of [
  [1280, 720],
  [1440, 900],
] as const) {
  test.describe(`a canvas for people, at ${width}x${height}`, () => {
    test.use({ viewport: { width, height } });

    test('Fit shows every step of every template readably: title size, port targets at the readable zoom; no attribution badge; the input panel fits', async ({ page, request }) => {
      await openEditor(page);
      const { templates } = await (
        await request.get(`${baseUrl()}/api/v1/templates`, { headers: { Authorization: `Bearer ${token()}` } })
      ).json() as { templates: { id: string; workflow: { steps: unknown[] } }[] };
      expect(templates.length).toBeGreaterThan(0);
      for (const t of templates) {
        await newFromTemplate(page, t.id);
        await expect(page.locator('.react-flow__node')).toHaveCount(t.workflow.steps.length);
        await page.getByTestId('fit-view').click();
        await fitDone(page);
        const zoom = await zoomOf(page);
        // Every step in view; a title on screen is at least 11 px (the compact form below the readable zoom).
        await expectWholeFlowInView(page, null, t.id);
        await expect(page.getByTestId('canvas')).toHaveAttribute('data-lod', zoom < READABLE_ZOOM ? 'compact' : 'full');
        const title = page.locator('.react-flow__node [data-testid=node-title]').first();
        const px = await title.evaluate((e) => parseFloat(getComputedStyle(e).fontSize));
        expect(px * zoom, `title size on screen in ${t.id}`).toBeGreaterThanOrEqual(11);
        // Zoomed in to the readable zoom, a port's target is at least 12 px across on screen: 6 px
        // either side of its centre hit it.
        for (let i = 0; i < 8 && (await zoomOf(page)) < READABLE_ZOOM; i++) await page.locator('.react-flow__controls-zoomin').click();
        await expect(page.getByTestId('canvas')).toHaveAttribute('data-lod', 'full');
        const pane = (await page.locator('.react-flow').boundingBox())!;
        const handles = page.locator('.react-flow__node [data-testid=handle-out], .react-flow__node [data-testid=handle-error]');
        let b: { x: number; y: number; width: number; height: number } | null = null;
        for (const h of await handles.all()) {
          const hb = await h.boundingBox();
          if (hb && hb.x > pane.x + 60 && hb.y > pane.y + 10 && hb.x + hb.width < pane.x + pane.width - 10 && hb.y + hb.height < pane.y + pane.height - 130) {
            b = hb;
            break;
          }
        }
        expect(b, `a port of ${t.id} in view`).not.toBeNull();
        const cx = b!.x + b!.width / 2;
        const cy = b!.y + b!.height / 2;
        for (const [dx, dy] of [
          [-6, 0],
          [6, 0],
          [0, -6],
          [0, 6],
        ]) {
          const hit = await page.evaluate(([x, y]) => !!document.elementFromPoint(x, y)?.closest('.react-flow__handle'), [cx + dx, cy + dy]);
          expect(hit, `port target at ${dx},${dy} in ${t.id}`).toBe(true);
        }
      }
      await expect(page.locator('.react-flow__attribution')).toHaveCount(0);
      await expect(page.getByText('React Flow', { exact: true })).toHaveCount(0);

      // The bottom panel is closed until asked for; its primary button is not clipped at 1280 px.
      await expect(page.getByTestId('bottom-panel')).not.toHaveClass(/is-open/);
      await page.getByTestId('edit-input').click();
      const run = page.getByTestId('input-dry-run');
      await expect(run).toBeVisible();
      const rb = (await run.boundingBox())!;
      const pb = (await page.getByTestId('bottom-panel').boundingBox())!;
      expect(rb.x + rb.width).toBeLessThanOrEqual(pb.x + pb.width);
      expect(await run.evaluate((e) => e.scrollWidth <= e.clientWidth)).toBe(true);
    });

    test('the side panels collapse and come back from the keyboard; the canvas takes their room', async ({ page }) => {
      await openEditor(page);
      const canvas = page.getByTestId('canvas');
      const before = (await canvas.boundingBox())!.width;
      await page.getByTestId('toggle-left').focus();
      await page.keyboard.press('Enter');
      await expect(page.getByTestId('left-panel')).toHaveCount(0);
      await page.getByTestId('toggle-right').focus();
      await page.keyboard.press('Enter');
      await expect(page.getByTestId('inspector')).toHaveCount(0);
      await expect.poll(async () => (await canvas.boundingBox())!.width).toBeGreaterThan(before + 500);
      await page.keyboard.press('Enter');
      await page.getByTestId('toggle-left').focus();
      await page.keyboard.press('Enter');
      await expect(page.getByTestId('left-panel')).toBeVisible();
      await expect(page.getByTestId('inspector')).toBeVisible();
    });
  });
}

test('a click on a palette card adds the step after the selected one and connects it; never on top of another', async ({ page }) => {
  await openEditor(page);
  await newBlank(page);
  await select(page, 'start');
  await page.getByTestId('palette-transform').click();
  await expect(node(page, 'transform')).toBeVisible();
  await expect(edge(page, 'start', 'out', 'transform')).toHaveCount(1);
  await expect(page.getByTestId('step-id')).toHaveValue('transform');
  // Chained: the new step is selected, the next click goes after it.
  await page.getByTestId('palette-http_request').click();
  await expect(edge(page, 'transform', 'out', 'http')).toHaveCount(1);
  // Nothing selected: added after the last step, unconnected, on free ground.
  await page.keyboard.press('Escape');
  await page.locator('.react-flow__pane').click({ position: { x: 10, y: 10 } });
  await page.getByTestId('palette-transform').click();
  await expect(node(page, 'transform_2')).toBeVisible();
  await expect(page.locator('[data-testid^="edge-"][data-testid$="->transform_2"]')).toHaveCount(0);
  const boxes = await page.locator('.react-flow__node').evaluateAll((els) =>
    els.map((e) => {
      const r = e.getBoundingClientRect();
      return { id: e.getAttribute('data-id'), x: r.x, y: r.y, w: r.width, h: r.height };
    }),
  );
  expect(boxes).toHaveLength(4);
  for (const a of boxes)
    for (const b of boxes) {
      if (a.id === b.id) continue;
      const overlap = a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;
      expect(overlap, `${a.id} overlaps ${b.id}`).toBe(false);
    }
});

test('a wire dropped on empty canvas opens the step picker there; the chosen step is added and connected', async ({ page }) => {
  await openEditor(page);
  await newBlank(page);
  const src = node(page, 'start').getByTestId('handle-out');
  const a = (await src.boundingBox())!;
  const drop = { x: a.x + 260, y: a.y + 40 };
  await page.mouse.move(a.x + a.width / 2, a.y + a.height / 2);
  await page.mouse.down();
  await page.mouse.move(drop.x - 40, drop.y, { steps: 8 });
  await page.mouse.move(drop.x, drop.y, { steps: 4 });
  await page.mouse.up();
  const picker = page.getByTestId('step-picker');
  await expect(picker).toBeVisible();
  // Opened at the drop point (beside it), with the search focused.
  const pb = (await picker.boundingBox())!;
  expect(Math.min(Math.abs(pb.x - drop.x), Math.abs(pb.x + pb.width - drop.x))).toBeLessThan(20);
  expect(Math.abs(pb.y - drop.y)).toBeLessThan(40);
  await expect(page.getByTestId('picker-search')).toBeFocused();
  await page.keyboard.type('transf');
  await expect(picker.locator('[data-testid^="picker-"]:not([data-testid=picker-search])')).toHaveCount(1);
  await page.keyboard.press('Enter');
  await expect(picker).toHaveCount(0);
  await expect(node(page, 'transform')).toBeVisible();
  await expect(edge(page, 'start', 'out', 'transform')).toHaveCount(1);
  // Where the wire was let go, relative to the trigger (the canvas may have panned to show it).
  await viewportSettled(page);
  const nb = (await node(page, 'transform').boundingBox())!;
  const a2 = (await src.boundingBox())!;
  expect(Math.abs(nb.x - a2.x - (drop.x - a.x))).toBeLessThan(30);
  // Brought fully into view.
  const cb = (await page.getByTestId('canvas').boundingBox())!;
  expect(nb.x + nb.width).toBeLessThanOrEqual(cb.x + cb.width);

  // Again from the trigger's error port, picked with a click; Escape closes an unwanted picker.
  const t = (await node(page, 'start').getByTestId('handle-error').boundingBox())!;
  await page.mouse.move(t.x + t.width / 2, t.y + t.height / 2);
  await page.mouse.down();
  await page.mouse.move(t.x + 20, t.y + 200, { steps: 8 });
  await page.mouse.up();
  await expect(picker).toBeVisible();
  await page.keyboard.press('Escape');
  await expect(picker).toHaveCount(0);
  await page.mouse.move(t.x + t.width / 2, t.y + t.height / 2);
  await page.mouse.down();
  await page.mouse.move(t.x + 20, t.y + 200, { steps: 8 });
  await page.mouse.up();
  await expect(picker).toContainText('error');
  await picker.getByTestId('picker-http_request').click();
  await expect(edge(page, 'start', 'error', 'http')).toHaveCount(1);
});

/** Drag a wire from `from`'s `port` and let go on empty canvas beside it; pick `kind` in the
 * step picker. Answers the new step's id. */
async function wireToNew(page: Page, from: string, port: string, kind: string): Promise<string> {
  await viewportSettled(page);
  const before = new Set(await page.locator('.react-flow__node').evaluateAll((els) => els.map((e) => e.getAttribute('data-id'))));
  const h = (await node(page, from).getByTestId(`handle-${port}`).boundingBox())!;
  const cb = (await page.getByTestId('canvas').boundingBox())!;
  // The first spot beside the port that is empty canvas (the pane, not a node or a control).
  const spots = [
    [200, 0], [200, 110], [200, -110], [120, 160], [120, -160], [60, 220], [-200, 180],
  ].map(([dx, dy]) => ({ x: h.x + h.width / 2 + dx, y: h.y + h.height / 2 + dy }));
  let drop: { x: number; y: number } | undefined;
  for (const p of spots) {
    if (p.x < cb.x + 20 || p.x > cb.x + cb.width - 190 || p.y < cb.y + 20 || p.y > cb.y + cb.height - 60) continue;
    const onPane = await page.evaluate(([x, y]) => !!document.elementFromPoint(x, y)?.classList.contains('react-flow__pane'), [p.x, p.y]);
    if (onPane) {
      drop = p;
      break;
    }
  }
  expect(drop, `an empty spot beside ${from}.${port}`).toBeTruthy();
  await page.mouse.move(h.x + h.width / 2, h.y + h.height / 2);
  await page.mouse.down();
  await page.mouse.move(drop!.x - 30, drop!.y, { steps: 8 });
  await page.mouse.move(drop!.x, drop!.y, { steps: 4 });
  await page.mouse.up();
  const picker = page.getByTestId('step-picker');
  await expect(picker).toBeVisible();
  await picker.getByTestId(`picker-${kind}`).click();
  await expect(picker).toHaveCount(0);
  await expect(page.locator('.react-flow__node')).toHaveCount(before.size + 1);
  const after = await page.locator('.react-flow__node').evaluateAll((els) => els.map((e) => e.getAttribute('data-id')));
  const id = after.find((x) => !before.has(x))!;
  await expect(edge(page, from, port, id)).toHaveCount(1);
  return id;
}

test('a flow of 6 steps wired with the picker on drop only: trigger → claim → router → POST → handler → release', async ({ page }) => {
  await openEditor(page);
  await newBlank(page);
  const claim = await wireToNew(page, 'start', 'out', 'memory');
  const route = await wireToNew(page, claim, 'out', 'router');
  const create = await wireToNew(page, route, 'default', 'http_request');
  const handler = await wireToNew(page, create, 'error', 'error_handler');
  const release = await wireToNew(page, handler, 'out', 'memory');
  await expect(page.locator('.react-flow__node')).toHaveCount(6);
  const ids = [claim, route, create, handler, release];
  expect(new Set(ids).size).toBe(5);
  // Five wires, each drawn by a drop: the chain is whole.
  await expect(page.locator('[data-testid^="edge-"][data-testid*="->"]')).toHaveCount(5);
  for (const [f, p, t] of [
    ['start', 'out', claim],
    [claim, 'out', route],
    [route, 'default', create],
    [create, 'error', handler],
    [handler, 'out', release],
  ]) {
    await expect(edge(page, f, p, t)).toHaveAttribute('data-port', p);
  }
});

test('a "+" beside a port of the selected step opens the step picker; the pick is added after it, connected', async ({ page }) => {
  await openEditor(page);
  await newBlank(page);
  await select(page, 'start');
  await node(page, 'start').getByTestId('port-plus-out').click();
  const picker = page.getByTestId('step-picker');
  await expect(picker).toBeVisible();
  await expect(page.getByTestId('picker-search')).toBeFocused();
  await picker.getByTestId('picker-transform').click();
  await expect(node(page, 'transform')).toBeVisible();
  await expect(edge(page, 'start', 'out', 'transform')).toHaveCount(1);
  // From an error port too.
  await select(page, 'transform');
  await node(page, 'transform').getByTestId('port-plus-error').click();
  await picker.getByTestId('picker-error_handler').click();
  await expect(page.locator('[data-testid^="edge-transform:error->"]')).toHaveCount(1);
  await expect(page.locator('.react-flow__node')).toHaveCount(3);
});

test('keyboard focus on a node and a button shows a focus ring', async ({ page }) => {
  await openEditor(page);
  await newBlank(page);
  // Tab through the page until the trigger node has the focus.
  let found = false;
  for (let i = 0; i < 80 && !found; i++) {
    await page.keyboard.press('Tab');
    found = await page.evaluate(() => document.activeElement?.getAttribute('data-id') === 'start');
  }
  expect(found, 'the node is reachable with Tab').toBe(true);
  const ring = await node(page, 'start').evaluate((e) => {
    const s = getComputedStyle(e);
    const w = getComputedStyle(e.closest('.react-flow__node')!);
    return { shadow: s.boxShadow, outline: w.outlineStyle };
  });
  expect(ring.shadow !== 'none' || ring.outline !== 'none').toBe(true);
  expect(ring.shadow).toContain('rgb(255, 209, 102)');
  // Enter selects the focused step; a palette card then adds the next step after it.
  await page.keyboard.press('Enter');
  await expect(page.getByTestId('step-id')).toHaveValue('start');
  await page.getByTestId('palette-transform').focus();
  await page.keyboard.press('Enter');
  // An edge focused from the keyboard: drawn in the focus colour.
  await expect(edge(page, 'start', 'out', 'transform')).toHaveCount(1);
  found = false;
  for (let i = 0; i < 80 && !found; i++) {
    await page.keyboard.press('Tab');
    found = await page.evaluate(() => !!document.activeElement?.classList.contains('react-flow__edge'));
  }
  expect(found, 'the edge is reachable with Tab').toBe(true);
  await expect(edge(page, 'start', 'out', 'transform')).toHaveCSS('stroke', 'rgb(255, 209, 102)');
  // A button focused from the keyboard.
  await page.getByTestId('palette-search').focus();
  await page.keyboard.press('Shift+Tab');
  const outline = await page.evaluate(() => (document.activeElement ? getComputedStyle(document.activeElement).outlineStyle : 'none'));
  expect(outline).not.toBe('none');
});

test('the minimap is small and shows the current run only: its colours come with a run and go with it', async ({ page }) => {
  await openEditor(page);
  await openWorkflow(page, 'invoice-paid-once');
  const minimap = page.locator('.react-flow__minimap');
  await expect(minimap).toBeVisible();
  const box = (await minimap.boundingBox())!;
  expect(box.width * box.height).toBeLessThanOrEqual(160 * 110);
  const fills = () => page.locator('.react-flow__minimap-node').evaluateAll((els) => els.map((e) => getComputedStyle(e).fill));
  const SUCCEEDED = 'rgb(63, 182, 139)';
  const FAILED = 'rgb(240, 97, 109)';
  expect(await fills()).not.toContain(SUCCEEDED);
  await page.getByTestId('edit-input').click();
  await page.getByTestId('sample-select').selectOption('stripe/invoice.paid.json');
  await page.getByTestId('dry-run').click();
  await expect(page.getByTestId('run-status')).toHaveText('succeeded');
  await expect.poll(fills).toContain(SUCCEEDED);
  expect(await fills()).not.toContain(FAILED);
  await page.getByTestId('clear-run').click();
  await expect.poll(fills).not.toContain(SUCCEEDED);
});

test('the insert hint never covers the button below its field; required selects offer no meaningless default', async ({ page }) => {
  await openEditor(page);
  await openWorkflow(page, 'invoice-paid-once');
  await select(page, 'create');
  const value = page.getByTestId('map-headers-value-0').locator('textarea');
  await value.click();
  await expect(page.locator('.fx-tpl-hint')).toBeVisible();
  const add = page.getByTestId('map-headers-add');
  await add.scrollIntoViewIfNeeded();
  const b = (await add.boundingBox())!;
  const hit = await page.evaluate(([x, y]) => document.elementFromPoint(x, y)?.closest('[data-testid=map-headers-add]') !== null, [b.x + b.width / 2, b.y + b.height / 2]);
  expect(hit, '"+ Add header" is not under the hint').toBe(true);
  // A click on it lands, although the hint goes away when the field loses the focus.
  await add.click();
  await expect(page.getByTestId('map-headers-key-1')).toBeVisible();
  // The required `method` select: no option called "default".
  const options = await page.locator('#root_method option').allTextContents();
  expect(options).toContain('POST');
  expect(options.map((o) => o.trim().toLowerCase())).not.toContain('default');
});

/** What axe found, one line per element, for a readable failure. */
function found(r: Awaited<ReturnType<AxeBuilder['analyze']>>, impacts?: string[]): string[] {
  return r.violations
    .filter((v) => !impacts || impacts.includes(v.impact ?? ''))
    .flatMap((v) => v.nodes.map((n) => `${v.id} (${v.impact}) ${n.target.join(' ')}: ${n.failureSummary ?? ''}`));
}

test('the editor and the run history pass the color-contrast check (WCAG AA), and axe finds nothing serious', async ({ page }) => {
  await openEditor(page);
  await newFromTemplate(page, 'invoice-paid-once');
  await page.getByTestId('edit-input').click();
  expect(found(await new AxeBuilder({ page }).withRules(['color-contrast']).analyze())).toEqual([]);
  await select(page, 'create');
  expect(found(await new AxeBuilder({ page }).analyze(), ['serious', 'critical'])).toEqual([]);
  await page.getByTestId('view-runs').click();
  await expect(page.getByTestId('run-list')).toHaveAttribute('data-loading', 'false');
  expect(found(await new AxeBuilder({ page }).withRules(['color-contrast']).analyze())).toEqual([]);
  expect(found(await new AxeBuilder({ page }).analyze(), ['serious', 'critical'])).toEqual([]);
});

// The README's editor screenshots: `FLUXO_UPDATE_SCREENSHOTS=1 npx playwright test e2e/canvas.spec.ts -g screenshot`
// refreshes docs/screenshots/editor-1280x720.png and editor-1440x900.png; every run checks what they show.
for (const [width, height] of [
  [1280, 720],
  [1440, 900],
] as const) {
  test(`screenshot: the editor on a template at ${width}x${height}`, async ({ page }) => {
    await page.setViewportSize({ width, height });
    await openEditor(page);
    await newFromTemplate(page, 'invoice-paid-once');
    await page.getByTestId('fit-view').click();
    await fitDone(page);
    await expectWholeFlowInView(page, null, 'invoice-paid-once');
    // Nothing in the top bar is pushed out of the window.
    for (const id of ['dry-run', 'save', 'toggle-right']) {
      const b = (await page.getByTestId(id).boundingBox())!;
      expect(b.x + b.width, id).toBeLessThanOrEqual(width);
    }
    await page.mouse.move(0, height - 1);
    const dir = process.env.FLUXO_UPDATE_SCREENSHOTS ? resolve(process.cwd(), '..', 'docs', 'screenshots') : process.env.FLUXO_SCREENSHOT_DIR;
    if (dir) await page.screenshot({ path: resolve(dir, `editor-${width}x${height}.png`) });
  });
}
