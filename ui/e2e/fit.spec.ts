// Fit means the whole flow (issue 37, point 3), against the real `fluxo serve` of
// global-setup.ts: on the 8-step stripe-to-ledger (its error handler `fail` and the compensation
// `release` included) every node lies wholly in the part of the canvas nothing covers (side
// panels, bottom panel, zoom controls, minimap), on opening and after Fit, at 1280×720 with the
// panels open and at 1440×900; the zoom goes as low as that takes, and names stay readable
// through the nodes' compact form; the minimap covers no node of the workflow the app opens with.

import { expect, test, type Page } from '@playwright/test';
import { expectWholeFlowInView, fitDone, openEditor, openWorkflow, zoomOf } from './helpers';
import { api, detailAction, invoiceEvent, openRuns, row, search, type Run } from './history-helpers';

const FLOW = 'stripe-to-ledger';
const STEPS = ['hook', 'claim', 'route', 'skip', 'customer', 'invoice', 'fail', 'release'];

/** At a zoom below the readable one, nodes show their compact form with names of ≥ 10 px on screen. */
async function expectReadable(page: Page, what: string): Promise<void> {
  const zoom = await zoomOf(page);
  const canvas = page.getByTestId('canvas');
  if (zoom < 0.75) {
    await expect(canvas, what).toHaveAttribute('data-lod', 'compact');
    // The details give way: only the name is drawn.
    await expect(canvas.locator('.react-flow__node .fx-node-summary').first(), what).toBeHidden();
    await expect(canvas.locator('.react-flow__node .fx-node-sub').first(), what).toBeHidden();
  } else await expect(canvas, what).toHaveAttribute('data-lod', 'full');
  const titles = canvas.locator('.react-flow__node [data-testid=node-title]');
  for (const t of await titles.all()) {
    await expect(t).toBeVisible();
    const px = await t.evaluate((e) => parseFloat(getComputedStyle(e).fontSize));
    expect(px * zoom, `${what}: a name of ${px} px at zoom ${zoom} on screen`).toBeGreaterThanOrEqual(10);
  }
}

async function fit(page: Page): Promise<void> {
  await page.getByTestId('fit-view').click();
  await fitDone(page);
}

test.describe('Fit shows the whole flow', () => {
  test('at 1280×720 with the side panels and the bottom panel open', async ({ page }) => {
    await page.setViewportSize({ width: 1280, height: 720 });
    await openEditor(page);
    // The workflow the app opens with: nothing under the minimap (or anything else).
    await expect(page.locator('[data-testid=canvas] .react-flow__minimap')).toBeVisible();
    await expectWholeFlowInView(page, null, 'the opening view');

    await openWorkflow(page, FLOW);
    await expect(page.locator('[data-testid=canvas] .react-flow__minimap')).toBeVisible();
    await expect(page.getByTestId('left-panel')).toBeVisible();
    await expect(page.getByTestId('inspector')).toBeVisible();
    await expectWholeFlowInView(page, STEPS, `${FLOW} opened`);
    await fit(page);
    await expectWholeFlowInView(page, STEPS, `${FLOW} after Fit`);
    // Less than the old 0.75 floor: the whole flow takes a low zoom here, and stays readable.
    expect(await zoomOf(page)).toBeLessThan(0.75);
    await expectReadable(page, `${FLOW} after Fit`);
    if (process.env.FLUXO_SCREENSHOT_DIR) await page.screenshot({ path: `${process.env.FLUXO_SCREENSHOT_DIR}/fit-8-steps-1280x720.png` });

    // The bottom panel open too: the canvas is shorter, Fit still shows everything.
    await page.getByTestId('edit-input').click();
    await expect(page.getByTestId('bottom-panel')).toHaveClass(/is-open/);
    await fit(page);
    await expectWholeFlowInView(page, STEPS, `${FLOW} after Fit with the bottom panel open`);
    await expectReadable(page, `${FLOW} with the bottom panel open`);

    // Zoomed back in past the readable zoom, the full form returns.
    const zoomIn = page.locator('[data-testid=canvas] .react-flow__controls-zoomin');
    for (let i = 0; i < 8 && (await zoomOf(page)) < 0.8; i++) await zoomIn.click();
    await expect(page.getByTestId('canvas')).toHaveAttribute('data-lod', 'full');
    await expect(page.locator('[data-testid=canvas] .react-flow__node .fx-node-sub').first()).toBeVisible();
  });

  test('at 1440×900, with the panels and without them (no zoom floor either way)', async ({ page }) => {
    await page.setViewportSize({ width: 1440, height: 900 });
    await openEditor(page);
    await expectWholeFlowInView(page, null, 'the opening view');
    await openWorkflow(page, FLOW);
    await expectWholeFlowInView(page, STEPS, `${FLOW} opened`);
    await fit(page);
    await expectWholeFlowInView(page, STEPS, `${FLOW} after Fit`);
    await expectReadable(page, `${FLOW} after Fit`);
    const withPanels = await zoomOf(page);

    // Both side panels hidden: Fit uses the room (a closer zoom), still the whole flow.
    await page.getByTestId('toggle-left').click();
    await page.getByTestId('toggle-right').click();
    await expect(page.getByTestId('left-panel')).toHaveCount(0);
    await expect(page.getByTestId('inspector')).toHaveCount(0);
    await fit(page);
    await expectWholeFlowInView(page, STEPS, `${FLOW} after Fit without side panels`);
    await expectReadable(page, `${FLOW} without side panels`);
    expect(await zoomOf(page)).toBeGreaterThan(withPanels);
  });

  test('the run canvas of history shows the whole flow too, clear of its minimap, in the compact form', async ({ page, request }) => {
    await page.setViewportSize({ width: 1280, height: 720 });
    const run = await api<Run>(request, 'POST', `/workflows/${FLOW}/dry-run`, { input: invoiceEvent(`evt_fit_${Date.now()}`) });
    await openRuns(page);
    await search(page, 'q', run.id);
    await row(page, run.id).click();
    await expect(page.getByTestId('run-detail')).toHaveAttribute('data-run-id', run.id);
    await (await detailAction(page, 'open-on-canvas')).click();
    const flow = page.getByTestId('run-canvas-flow');
    await expect(flow).toHaveAttribute('data-fit-done', 'true');
    await expectWholeFlowInView(page, STEPS, 'the run canvas', '[data-testid=run-canvas-flow]');
    await expect(flow).toHaveAttribute('data-lod', 'compact');
    if (process.env.FLUXO_SCREENSHOT_DIR) await page.screenshot({ path: `${process.env.FLUXO_SCREENSHOT_DIR}/fit-run-canvas-1280x720.png` });
  });
});
