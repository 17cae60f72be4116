// Search inside runs and analytics that follow the filter (issue 15), against the real
// `fluxo serve` of global-setup.ts and a local mock destination:
// - a customer id (and an invoice id) from inside the Stripe event finds its runs;
// - the chart follows the filters: "N runs match", its range starts at the oldest matching run,
//   a time range moves it; duration percentiles (per step once a workflow is chosen) and
//   failure groups are shown, and a group filters the list; the error column reads "HTTP 500";
// - "Live · N new" counts only runs created after the page loaded.

import { expect, test } from '@playwright/test';
import { api, filter, openRuns, row, rowIds, search, setEnv, startMock, type Mock, type Run } from './history-helpers';

const uniq = Math.random().toString(36).slice(2, 8);
const WF = `search-${uniq}`;
const CUS_A = `cus_QXg${uniq}A`;
const CUS_B = `cus_QXg${uniq}B`;

let mock: Mock;

/** A Stripe `invoice.payment_failed`-like event for a customer and an invoice. */
const event = (customer: string, invoice: string) => ({
  id: `evt_${uniq}_${invoice}`,
  type: 'invoice.payment_failed',
  data: { object: { id: invoice, object: 'invoice', customer, amount_due: 4200, currency: 'eur' } },
});

test.describe.serial('search inside runs, analytics that follow the filter', () => {
  const failedA: string[] = [];
  const okB: string[] = [];

  test.beforeAll(async ({ request }) => {
    mock = await startMock();
    await setEnv(request, { E2E_MOCK_URL: mock.url });
    await api(request, 'PUT', `/workflows/${WF}`, {
      id: WF,
      name: `Search (e2e) ${WF}`,
      version: 1,
      settings: { run_timeout_s: 20 },
      steps: [
        { id: 'start', kind: 'manual_trigger', position: { x: 0, y: 0 }, config: {} },
        {
          id: 'create',
          kind: 'http_request',
          position: { x: 280, y: 0 },
          config: { method: 'POST', url: '{{ env.E2E_MOCK_URL }}/deals', body: { customer: '{{ input.data.object.customer }}' }, retries: 0, timeout_s: 5 },
        },
      ],
      edges: [{ from: 'start', to: 'create' }],
    });
    mock.mode = 'fail';
    for (let i = 0; i < 3; i++) {
      const r = await api<Run>(request, 'POST', `/workflows/${WF}/runs`, { input: event(CUS_A, `in_load_01${i}${uniq}`) });
      expect(r.status).toBe('failed');
      failedA.push(r.id);
    }
    mock.mode = 'ok';
    for (let i = 0; i < 2; i++) {
      const r = await api<Run>(request, 'POST', `/workflows/${WF}/runs`, { input: event(CUS_B, `in_load_02${i}${uniq}`) });
      expect(r.status).toBe('succeeded');
      okB.push(r.id);
    }
  });

  test.afterAll(async () => {
    await mock?.close();
  });

  test('a customer id from inside the payload finds its runs; the chart follows the search', async ({ page }) => {
    await openRuns(page);
    await expect(page.getByTestId('live-badge')).not.toContainText('new');

    await search(page, 'q', CUS_A);
    expect((await rowIds(page)).sort()).toEqual([...failedA].sort());
    await expect(page.getByTestId('chart-match-total')).toHaveText('3 runs match');
    await expect(page.getByTestId('status-chart')).toHaveAttribute('data-total', '3');
    await expect(page.getByTestId('chart-total-failed')).toHaveText('3');
    // The error column names the HTTP status, not `http_status`.
    await expect(row(page, failedA[0]).getByTestId('row-error')).toHaveText('HTTP 500');

    // A prefix finds both customers; an invoice id finds its one run.
    await search(page, 'q', `cus_QXg${uniq}`);
    expect((await rowIds(page)).sort()).toEqual([...failedA, ...okB].sort());
    await expect(page.getByTestId('chart-match-total')).toHaveText('5 runs match');
    await search(page, 'q', `in_load_021${uniq}`);
    expect(await rowIds(page)).toEqual([okB[1]]);
    await expect(page.getByTestId('chart-match-total')).toHaveText('1 run matches');
  });

  test('the chart range starts at the oldest matching run and moves with the time filter; percentiles and failure groups', async ({ page, request }) => {
    await openRuns(page);
    await search(page, 'q', `cus_QXg${uniq}`);
    const oldest = await api<Run & { created_at: string }>(request, 'GET', `/runs/${failedA[0]}`);
    const chart = page.getByTestId('status-chart');
    // All time: from the oldest matching run (a minute-wide bucket for these few seconds of runs).
    await expect(chart).toHaveAttribute('data-since', oldest.created_at);
    await expect(chart).toHaveAttribute('data-bucket-ms', '60000');
    expect(Number(await chart.getAttribute('data-buckets'))).toBeLessThanOrEqual(60);

    // A time range moves the chart's range.
    await filter(page, 'range', '7d');
    await expect.poll(async () => Date.parse((await chart.getAttribute('data-since')) ?? '')).toBeLessThan(Date.parse(oldest.created_at) - 6 * 86_400_000);
    await expect(chart).toHaveAttribute('data-bucket-ms', String(3 * 3_600_000));
    await expect(page.getByTestId('chart-match-total')).toHaveText('5 runs match');

    // Duration percentiles of the matching runs.
    await expect(page.getByTestId('chart-p50')).toHaveText(/\d+(\.\d+)? (ms|s)/);
    await expect(page.getByTestId('chart-p99')).toHaveText(/\d+(\.\d+)? (ms|s)/);

    // Failures grouped by reason; a group filters the list.
    const group = page.locator('[data-testid="chart-failure"][data-reason="HTTP 500 at create"]');
    await expect(group).toHaveText('HTTP 500 at create: 3');
    await group.click();
    await expect(page.getByTestId('filter-error')).toBeVisible();
    await expect(page.getByTestId('chart-match-total')).toHaveText('3 runs match');
    await expect.poll(async () => (await rowIds(page)).sort()).toEqual([...failedA].sort());
    await page.getByTestId('filter-error').click();
    await expect(page.getByTestId('chart-match-total')).toHaveText('5 runs match');

    // Per step once the filter names the workflow: each of its steps, in the file's order.
    await expect(page.getByTestId('chart-step-percentiles')).toHaveCount(0);
    await filter(page, 'workflow', WF);
    const steps = page.getByTestId('chart-step-pct');
    await expect(steps).toHaveCount(2);
    await expect(steps.nth(0)).toHaveAttribute('data-step', 'start');
    await expect(steps.nth(1)).toHaveAttribute('data-step', 'create');
    await expect(steps.nth(1)).toHaveText(/^create p50 \d+(\.\d+)? (ms|s) · p95 .+ · p99 \d+(\.\d+)? (ms|s)$/);
    await expect(page.getByTestId('chart-step-percentiles')).toHaveAttribute('title', /create: p50 .+ \(5\)/);

    // FLUXO_SCREENSHOT=path: a picture of the chart with its total, percentiles (per step too)
    // and failure groups (README's docs/screenshots/history-analytics.png).
    if (process.env.FLUXO_SCREENSHOT) await page.screenshot({ path: process.env.FLUXO_SCREENSHOT });
  });

  test('"Live · N new" counts only runs created after the page loaded', async ({ page, request }) => {
    await openRuns(page);
    await filter(page, 'workflow', WF);
    // Events of older runs (a status change reported by the stream) are not new runs.
    await expect(page.getByTestId('live-badge')).not.toContainText('new');
    mock.mode = 'ok';
    const fresh = await api<Run>(request, 'POST', `/workflows/${WF}/runs`, { input: event(CUS_B, `in_load_03${uniq}`) });
    await expect(row(page, fresh.id)).toBeVisible();
    await expect(page.getByTestId('live-badge')).toContainText('Live · 1 new');
  });
});
