// A run detail that never overflows (issue 37, point 2), against the real `fluxo serve` of
// global-setup.ts and a local mock destination: a failed run that a resume fixed shows both
// badges ("fixed by …", "Resumed by …") with every header action on screen or in the "More"
// menu, at 1280×720 and 1440×900; opening Replay or Resume never scrolls the app sideways.

import { expect, test, type Page } from '@playwright/test';
import { api, detailAction, filter, openRuns, row, setEnv, startMock, type Mock, type Run } from './history-helpers';

const uniq = () => Math.random().toString(36).slice(2, 10);

/** A manual trigger and one POST to the mock (`env.E2E_MOCK_URL`), no retries. */
function callFlow(id: string): Record<string, unknown> {
  return {
    id,
    name: `Detail header (e2e) ${id}`,
    version: 1,
    settings: { run_timeout_s: 20 },
    steps: [
      { id: 'start', kind: 'manual_trigger', position: { x: 0, y: 0 }, config: {} },
      {
        id: 'call_the_destination_with_a_long_step_name',
        kind: 'http_request',
        position: { x: 280, y: 0 },
        config: { method: 'POST', url: '{{ env.E2E_MOCK_URL }}/detail', body: { n: '{{ input.n }}' }, retries: 0, timeout_s: 5 },
      },
    ],
    edges: [{ from: 'start', to: 'call_the_destination_with_a_long_step_name' }],
  };
}

/** The header's actions: their test ids and their names (as the "More" menu lists them). */
const ACTIONS = [
  { id: 'detail-replay', name: 'Replay' },
  { id: 'debug-in-editor', name: 'Debug in editor' },
  { id: 'open-on-canvas', name: 'Open on canvas' },
];

let mock: Mock;
let wf: string;
/** A failed run fixed by its resume (both badges), and a failed run nobody fixed (it offers Resume). */
let fixedId: string;
let resumeId: string;
let openId: string;

/** Whether a box lies wholly inside the viewport. */
async function inViewport(page: Page, testId: string, scope = page.getByTestId('run-detail')): Promise<boolean> {
  const box = await scope.getByTestId(testId).boundingBox();
  const vp = page.viewportSize()!;
  return !!box && box.x >= 0 && box.y >= 0 && box.x + box.width <= vp.width + 0.5 && box.y + box.height <= vp.height + 0.5;
}

/** Nothing of the app is scrolled sideways and the document is no wider than the window. */
async function expectNoSideScroll(page: Page): Promise<void> {
  const state = await page.evaluate(() => {
    const scrolled: string[] = [];
    const detail = document.querySelector('[data-testid="run-detail"]');
    // The document, and every box from the run detail up to it (the app's containers).
    for (let el: Element | null = detail ?? document.getElementById('root'); el; el = el.parentElement) {
      if (el.scrollLeft !== 0) scrolled.push(`${el.tagName.toLowerCase()}.${el.className} scrollLeft=${el.scrollLeft}`);
    }
    const doc = document.scrollingElement!;
    return { scrolled, docLeft: doc.scrollLeft, docWidth: doc.scrollWidth, win: window.innerWidth };
  });
  expect(state.scrolled, 'no app container is scrolled sideways').toEqual([]);
  expect(state.docLeft).toBe(0);
  expect(state.docWidth, 'the document is no wider than the window').toBeLessThanOrEqual(state.win);
  // The top navigation is still on screen.
  for (const v of ['view-editor', 'view-runs', 'view-memory', 'view-settings']) {
    const box = (await page.getByTestId(v).boundingBox())!;
    expect(box.x, `${v} on screen`).toBeGreaterThanOrEqual(0);
    expect(box.x + box.width, `${v} on screen`).toBeLessThanOrEqual(state.win);
  }
}

async function openDetail(page: Page, id: string): Promise<void> {
  await openRuns(page);
  await filter(page, 'workflow', wf);
  await row(page, id).click();
  await expect(page.getByTestId('run-detail')).toHaveAttribute('data-run-id', id);
}

test.describe.serial('run detail header', () => {
  test.beforeAll(async ({ request }) => {
    mock = await startMock();
    await setEnv(request, { E2E_MOCK_URL: mock.url });
    wf = `e2e-detail-${uniq()}`;
    await api(request, 'PUT', `/workflows/${wf}`, callFlow(wf));
    mock.mode = 'fail';
    const failed = await api<Run>(request, 'POST', `/workflows/${wf}/runs`, { input: { n: 1 } });
    const other = await api<Run>(request, 'POST', `/workflows/${wf}/runs`, { input: { n: 2 } });
    expect([failed.status, other.status]).toEqual(['failed', 'failed']);
    mock.mode = 'ok';
    const resumed = await api<Run>(request, 'POST', `/runs/${failed.id}/resume`, {});
    expect(resumed.status).toBe('succeeded');
    // A replay too: the lineage grows, the header does not.
    await api<Run>(request, 'POST', `/runs/${failed.id}/replay`, { mode: 'live' });
    [fixedId, resumeId, openId] = [failed.id, resumed.id, other.id];
  });

  test.afterAll(async () => {
    await mock?.close();
  });

  for (const vp of [
    { width: 1280, height: 720 },
    { width: 1440, height: 900 },
  ]) {
    test(`at ${vp.width}×${vp.height} a fixed run's header keeps every action on screen or in "More"; dialogs do not scroll the app`, async ({ page }) => {
      await page.setViewportSize(vp);
      await openDetail(page, fixedId);
      const detail = page.getByTestId('run-detail');
      const fixed = detail.getByTestId('detail-fixed-by');
      const resumed = detail.getByTestId('detail-resumed-by');
      await expect(fixed.getByTestId('fixed-by-link')).toHaveAttribute('data-status', 'succeeded');
      await expect(resumed.getByTestId('resumed-by-link')).toHaveAttribute('data-status', 'succeeded');
      await expect(fixed.getByTestId('fixed-by-link')).toHaveAttribute('data-run-id', resumeId);

      // Both badges on screen; cut with an ellipsis when narrow, and then their tooltip says it all.
      for (const [badge, testId] of [
        [fixed, 'detail-fixed-by'],
        [resumed, 'detail-resumed-by'],
      ] as const) {
        expect(await inViewport(page, testId), `${testId} on screen`).toBe(true);
        await expect(badge).toHaveAttribute('title', new RegExp(resumeId));
        const cut = await badge.evaluate((el) => el.scrollWidth > el.clientWidth);
        if (cut) expect(await badge.evaluate((el) => getComputedStyle(el).textOverflow)).toBe('ellipsis');
      }

      // Every action: on screen in the header, or an item of the "More" menu; never both, never neither.
      const more = detail.getByTestId('detail-more');
      const menuItems: string[] = [];
      if (await more.isVisible()) {
        expect(await inViewport(page, 'detail-more'), 'More on screen').toBe(true);
        await expect(more).toHaveAttribute('aria-haspopup', 'menu');
        await expect(more).toHaveAttribute('aria-expanded', 'false');
        await more.click();
        await expect(more).toHaveAttribute('aria-expanded', 'true');
        const menu = page.getByRole('menu');
        await expect(menu).toBeVisible();
        for (const item of await menu.getByRole('menuitem').all()) {
          menuItems.push((await item.getAttribute('data-testid'))!);
          const box = (await item.boundingBox())!;
          expect(box.x >= 0 && box.x + box.width <= vp.width && box.y + box.height <= vp.height, 'menu item on screen').toBe(true);
        }
        await page.keyboard.press('Escape');
        await expect(menu).toHaveCount(0);
        await expect(more).toBeFocused();
      }
      for (const a of ACTIONS) {
        const inline = detail.getByTestId('detail-actions').getByTestId(a.id);
        const shown = (await inline.count()) > 0 && (await inline.isVisible());
        expect(shown !== menuItems.includes(a.id), `${a.name}: in the header (${shown}) or in More (${menuItems.includes(a.id)})`).toBe(true);
        if (shown) expect(await inViewport(page, a.id), `${a.name} on screen`).toBe(true);
      }
      expect(await inViewport(page, 'detail-close'), 'Close on screen').toBe(true);
      await expectNoSideScroll(page);
      if (process.env.FLUXO_SCREENSHOT_DIR) await page.screenshot({ path: `${process.env.FLUXO_SCREENSHOT_DIR}/run-detail-fixed-${vp.width}.png` });

      // Replay (wherever it is): the dialog opens, nothing moves sideways.
      await (await detailAction(page, 'detail-replay')).click();
      await expect(page.getByTestId('replay-preview')).toHaveAttribute('data-state', 'ready');
      await expectNoSideScroll(page);
      await page.getByTestId('replay-cancel').click();
      await expect(page.getByTestId('replay-dialog')).toHaveCount(0);
      await expectNoSideScroll(page);

      // Resume on a failure nobody fixed: the same.
      await row(page, openId).click();
      await expect(detail).toHaveAttribute('data-run-id', openId);
      await detail.getByTestId('detail-resume').click();
      await expect(page.getByTestId('resume-dialog')).toHaveAttribute('data-state', 'ready');
      await expectNoSideScroll(page);
      await page.getByTestId('resume-cancel').click();
      await expect(page.getByTestId('resume-dialog')).toHaveCount(0);
      for (const a of ACTIONS) {
        const inline = detail.getByTestId('detail-actions').getByTestId(a.id);
        if ((await inline.count()) && (await inline.isVisible())) expect(await inViewport(page, a.id), `${a.name} on screen`).toBe(true);
      }
      expect(await inViewport(page, 'detail-close'), 'Close on screen').toBe(true);
      await expectNoSideScroll(page);
    });
  }

  test('the "More" menu works from the keyboard: arrows move, Enter runs an item, Escape closes', async ({ page }) => {
    // A failure nobody fixed offers "Resume from <a long step>" first: at 1280 the rest cannot all fit.
    await page.setViewportSize({ width: 1280, height: 720 });
    await openDetail(page, openId);
    const detail = page.getByTestId('run-detail');
    await expect(detail.getByTestId('detail-resume')).toHaveAttribute('data-state', 'ready');
    const more = detail.getByTestId('detail-more');
    await expect(more).toBeVisible();
    await more.focus();
    await page.keyboard.press('ArrowDown');
    const menu = page.getByRole('menu');
    await expect(menu).toBeVisible();
    await expect(more).toHaveAttribute('aria-expanded', 'true');
    const items = menu.getByRole('menuitem');
    await expect(items.first()).toBeFocused();
    const n = await items.count();
    // Down walks the items and wraps round to the first; Up from the first goes to the last.
    for (let i = 1; i < n; i++) {
      await page.keyboard.press('ArrowDown');
      await expect(items.nth(i)).toBeFocused();
    }
    await page.keyboard.press('ArrowDown');
    await expect(items.first()).toBeFocused();
    await page.keyboard.press('ArrowUp');
    await expect(items.last()).toBeFocused();
    await page.keyboard.press('Escape');
    await expect(menu).toHaveCount(0);
    await expect(more).toBeFocused();
    // The menu holds the last actions of the row: Open on canvas is always among them. Enter runs it.
    await page.keyboard.press('Enter');
    await expect(menu).toBeVisible();
    await expect(items.last()).toHaveAttribute('data-testid', 'open-on-canvas');
    await page.keyboard.press('End');
    await expect(items.last()).toBeFocused();
    if (process.env.FLUXO_SCREENSHOT_DIR) await page.screenshot({ path: `${process.env.FLUXO_SCREENSHOT_DIR}/run-detail-more-menu.png` });
    await page.keyboard.press('Enter');
    await expect(page.getByTestId('run-canvas')).toBeVisible();
    await expect(menu).toHaveCount(0);
    await expectNoSideScroll(page);
  });
});
