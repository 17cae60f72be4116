// Issue 37, point 1: the duplicate that Fluxo stopped is visible where people look. One Stripe
// event is delivered three times with one Idempotency-Key (the door stops two) and once more
// with another key (the workflow's Memory claim stops it). The run list says "+3 duplicates
// stopped", the run lists each delivery with its answer and where it was stopped, the filter
// keeps only runs that stopped one, and the chart draws them over time.

import { expect, test } from '@playwright/test';
import { baseUrl } from './helpers';
import { api, deliver, filter, finished, invoiceEvent, invoiceFlow, openRuns, reloaded, listGen, row, rowIds, setEnv, startMock, type Mock } from './history-helpers';

const WF = 'e2e-dups';
const uniq = () => Math.random().toString(36).slice(2, 10);

let mock: Mock;

test.describe.serial('duplicates stopped', () => {
  test.beforeAll(async ({ request }) => {
    mock = await startMock();
    mock.mode = 'ok';
    await setEnv(request, { E2E_MOCK_URL: mock.url });
    await api(request, 'PUT', `/workflows/${WF}`, invoiceFlow(WF, `e2e-dups-${uniq()}`));
  });
  test.afterAll(async () => {
    await mock?.close();
  });

  test('each stopped duplicate is listed on its run, counted in the list, filtered and charted', async ({ page, request }) => {
    const evt = invoiceEvent(`evt_dup_${uniq()}`);
    const key = `dup-${uniq()}`;
    const first = await deliver(request, WF, key, evt);
    expect(first.status).toBe('succeeded');
    for (let i = 0; i < 2; i++) {
      const again = await request.post(`${baseUrl()}/hooks/${WF}`, { headers: { 'Idempotency-Key': key }, data: evt });
      expect(again.status()).toBe(200);
      expect(((await again.json()) as { duplicate: boolean }).duplicate).toBe(true);
    }
    // The same event under another key: the door lets it in, the claim stops it.
    const other = await request.post(`${baseUrl()}/hooks/${WF}`, { headers: { 'Idempotency-Key': `${key}-b` }, data: evt });
    expect(other.status()).toBe(202);
    const stoppedRun = await finished(request, ((await other.json()) as { run_id: string }).run_id);
    expect(stoppedRun.steps.map((s) => s.step_id)).toContain('skip');
    // A second, unrelated event that nobody repeated.
    const lone = await deliver(request, WF, `lone-${uniq()}`, invoiceEvent(`evt_lone_${uniq()}`));
    expect(mock.requests.filter((r) => r.path === '/deals')).toHaveLength(2);

    await openRuns(page);
    await filter(page, 'workflow', WF);
    const tag = row(page, first.id).getByTestId('row-duplicates');
    await expect(tag).toHaveText('+3 duplicates stopped');
    await expect(tag).toBeInViewport({ ratio: 1 });
    await expect(row(page, lone.id).getByTestId('row-duplicates')).toHaveCount(0);
    await expect(row(page, stoppedRun.id).getByTestId('row-duplicates')).toHaveCount(0);

    // The run lists its deliveries: the first, the door's two, the claim's one.
    await row(page, first.id).click();
    // Opening the run keeps the row's count (the open run's summary is made from its record).
    await expect(tag).toHaveText('+3 duplicates stopped');
    const deliveries = page.getByTestId('run-deliveries');
    await expect(deliveries).toHaveAttribute('data-duplicates', '3');
    await expect(deliveries.getByTestId('delivery-first')).toContainText('answered 202');
    await expect(deliveries.getByTestId('delivery-first')).toContainText(key);
    const door = deliveries.locator('[data-testid="delivery-duplicate"][data-by="door"]');
    await expect(door.first()).toContainText('stopped at the door');
    await expect(door.first()).toContainText('answered 200 duplicate: true');
    expect(await door.allInnerTexts()).toHaveLength(await door.count());
    const claim = deliveries.locator('[data-testid="delivery-duplicate"][data-by="memory_claim"]');
    await expect(claim).toContainText('stopped by the Memory claim at seen');
    await expect(claim.getByTestId('delivery-stopped-run')).toHaveText(stoppedRun.id.slice(0, 8));
    await page.getByTestId('run-detail').screenshot({ path: '../docs/screenshots/run-duplicates-stopped.png' });
    // Its link opens the run the claim stopped.
    await claim.getByTestId('delivery-stopped-run').click();
    await expect(page.getByTestId('run-detail')).toHaveAttribute('data-run-id', stoppedRun.id);

    // The chart counts them beside the runs.
    const chart = page.getByTestId('status-chart');
    await expect(chart).toHaveAttribute('data-duplicates', '3');
    await expect(page.getByTestId('chart-total-duplicates')).toHaveText('3');
    await chart.screenshot({ path: '../docs/screenshots/history-duplicates.png' });

    // The filter keeps only the run that stopped them.
    const before = await listGen(page);
    await page.getByTestId('filter-duplicates').check();
    await reloaded(page, before);
    await expect.poll(() => rowIds(page)).toEqual([first.id]);
    // It lives in the URL with the other filters: a reload keeps it.
    expect(page.url()).toContain('duplicates=stopped');
    await page.reload();
    await expect(page.getByTestId('filter-duplicates')).toBeChecked();
    await expect.poll(() => rowIds(page)).toEqual([first.id]);
    // The chart's legend entry is the same filter.
    await expect(page.getByTestId('chart-duplicates')).toHaveClass(/is-active/);
    const again = await listGen(page);
    await page.getByTestId('chart-duplicates').click();
    await reloaded(page, again);
    await expect(page.getByTestId('filter-duplicates')).not.toBeChecked();
    await expect.poll(async () => (await rowIds(page)).length).toBe(3);
  });
});
