// History that keeps its place (issue 37, point 10), against the real `fluxo serve` of
// global-setup.ts and a local mock destination:
// - a filter that excludes the open run closes its detail (one that keeps it, keeps it open);
// - the filters and the open run live in the URL: reload, back/forward and a pasted link
//   restore them;
// - a dry run of an unsaved workflow reads "<name> · draft dry run", not "manual DRY v0";
// - "Replay selected" previews each run with the single replay's dry walk (predicted outcome
//   per run and a summary) before the live replay is offered.

import { expect, test, type Page } from '@playwright/test';
import { newBlank, openEditor } from './helpers';
import { api, deliver, filter, invoiceEvent, invoiceFlow, openRuns, reloaded, listGen, row, search, setEnv, startMock, type Mock, type Run } from './history-helpers';

const uniq = () => Math.random().toString(36).slice(2, 10);
const shots = process.env.FLUXO_SCREENSHOT_DIR;

let mock: Mock;

/** A manual trigger and one POST to the mock, no retries; `dryStatus`: the answer a dry walk simulates. */
function callFlow(id: string, dryStatus?: number): Record<string, unknown> {
  const call: Record<string, unknown> = { method: 'POST', url: '{{ env.E2E_MOCK_URL }}/place', body: { n: '{{ input.n }}' }, retries: 0, timeout_s: 5 };
  if (dryStatus) call.dry_run = { status: dryStatus, body: {} };
  return {
    id,
    name: `Place call (e2e) ${id}`,
    version: 1,
    settings: { run_timeout_s: 20 },
    steps: [
      { id: 'start', kind: 'manual_trigger', position: { x: 0, y: 0 }, config: {} },
      { id: 'call', kind: 'http_request', position: { x: 280, y: 0 }, config: call },
    ],
    edges: [{ from: 'start', to: 'call' }],
  };
}

/** A run of `workflow` with the mock answering `mode`. */
async function runWith(request: Parameters<typeof api>[0], workflow: string, mode: Mock['mode'], n: number): Promise<Run> {
  mock.mode = mode;
  const r = await api<Run>(request, 'POST', `/workflows/${workflow}/runs`, { input: { n } });
  expect(r.status).toBe(mode === 'ok' ? 'succeeded' : 'failed');
  return r;
}

const detail = (page: Page) => page.getByTestId('run-detail');

test.describe.serial('history keeps its place', () => {
  test.beforeAll(async ({ request }) => {
    mock = await startMock();
    await setEnv(request, { E2E_MOCK_URL: mock.url });
  });

  test.afterAll(async () => {
    await mock?.close();
  });

  test('a filter that excludes the open run closes its detail; one that keeps it leaves it open', async ({ page, request }) => {
    const wf = `e2e-place-${uniq()}`;
    await api(request, 'PUT', `/workflows/${wf}`, callFlow(wf));
    const ok = await runWith(request, wf, 'ok', 1);
    const bad = await runWith(request, wf, 'fail', 2);

    await openRuns(page);
    await filter(page, 'workflow', wf);
    await row(page, ok.id).click();
    await expect(detail(page)).toHaveAttribute('data-run-id', ok.id);

    // Live only: the succeeded live run still matches, its detail stays.
    await filter(page, 'mode', 'live');
    await expect(row(page, ok.id)).toBeVisible();
    await expect(detail(page)).toHaveAttribute('data-run-id', ok.id);

    // Failed only: the open run is excluded, its detail closes (and the URL names no run).
    await filter(page, 'status', 'failed');
    await expect(row(page, bad.id)).toBeVisible();
    await expect(row(page, ok.id)).toHaveCount(0);
    await expect(detail(page)).toHaveCount(0);
    await expect(page).not.toHaveURL(new RegExp(ok.id));

    // Excluded by a search, too.
    await row(page, bad.id).click();
    await expect(detail(page)).toHaveAttribute('data-run-id', bad.id);
    await search(page, 'q', ok.id);
    await expect(page.getByTestId('runs-empty')).toBeVisible();
    await expect(detail(page)).toHaveCount(0);
  });

  test('the filters and the open run live in the URL: reload, back/forward and a pasted link restore them', async ({ page, request, context }) => {
    const wf = `e2e-url-${uniq()}`;
    await api(request, 'PUT', `/workflows/${wf}`, callFlow(wf));
    const ok = await runWith(request, wf, 'ok', 1);
    const bad1 = await runWith(request, wf, 'fail', 2);
    const bad2 = await runWith(request, wf, 'fail', 3);

    await openRuns(page);
    await filter(page, 'workflow', wf);
    await filter(page, 'status', 'failed');
    await filter(page, 'range', '24h');
    await search(page, 'q', bad1.id);
    await row(page, bad1.id).click();
    await expect(detail(page)).toHaveAttribute('data-run-id', bad1.id);
    const url = page.url();
    expect(url).toContain(`#runs/${bad1.id}?`);

    /** The filters on screen, the rows listed and the open run. */
    const expectPlace = async (p: Page, place: { status: string; range: string; q: string; rows: string[]; open: string | null }) => {
      await expect(p.getByTestId('filter-workflow')).toHaveValue(wf);
      await expect(p.getByTestId('filter-status')).toHaveValue(place.status);
      await expect(p.getByTestId('filter-range')).toHaveValue(place.range);
      await expect(p.getByTestId('filter-q')).toHaveValue(place.q);
      await expect(p.getByTestId('run-list')).toHaveAttribute('data-loading', 'false');
      await expect(p.getByTestId('run-list')).toHaveAttribute('data-count', String(place.rows.length));
      for (const id of place.rows) await expect(row(p, id)).toBeVisible();
      if (place.open) await expect(detail(p)).toHaveAttribute('data-run-id', place.open);
      else await expect(detail(p)).toHaveCount(0);
    };

    // Reload: everything is back.
    await page.reload();
    await expectPlace(page, { status: 'failed', range: '24h', q: bad1.id, rows: [bad1.id], open: bad1.id });
    // The open run, loaded beside the list, is not counted as a new arrival.
    await expect(page.getByTestId('live-badge')).not.toContainText('new');
    if (shots) await page.screenshot({ path: `${shots}/history-filters-restored.png` });

    // Back: the detail closes; back again: the search goes; forward: it comes back.
    await page.goBack();
    await expectPlace(page, { status: 'failed', range: '24h', q: bad1.id, rows: [bad1.id], open: null });
    await page.goBack();
    await expectPlace(page, { status: 'failed', range: '24h', q: '', rows: [bad2.id, bad1.id], open: null });
    await expect(row(page, ok.id)).toHaveCount(0);
    await page.goForward();
    await expectPlace(page, { status: 'failed', range: '24h', q: bad1.id, rows: [bad1.id], open: null });

    // A shared link, opened in another tab.
    const other = await context.newPage();
    await other.goto(url);
    await expectPlace(other, { status: 'failed', range: '24h', q: bad1.id, rows: [bad1.id], open: bad1.id });

    // Leaving for the editor and coming back by the top navigation keeps the filters.
    await other.getByTestId('view-editor').click();
    await expect(other.getByTestId('editor')).toBeVisible();
    await other.getByTestId('view-runs').click();
    await expectPlace(other, { status: 'failed', range: '24h', q: bad1.id, rows: [bad1.id], open: null });

    // Reset clears the URL's filters too: a reload shows every run again.
    const before = await listGen(other);
    await other.getByTestId('filter-reset').click();
    await reloaded(other, before);
    await other.reload();
    await expect(other.getByTestId('filter-workflow')).toHaveValue('');
    await expect(other.getByTestId('filter-status')).toHaveValue('');
    await expect(row(other, ok.id)).toBeVisible();
  });

  test('a dry run of an unsaved workflow is labelled with its name and "draft", not "manual DRY v0"', async ({ page, request }) => {
    const tag = uniq();
    const name = `Invoice paid once ${tag}`;
    await openEditor(page);
    await newBlank(page);
    await page.getByTestId('workflow-name').fill(name);
    await page.getByTestId('dry-run').click();
    await expect(page.getByTestId('run-status')).toHaveText('succeeded');
    const runId = (await page.getByTestId('run-id').textContent())!.trim();
    const stored = await api<Run & { workflow_version: number }>(request, 'GET', `/runs/${encodeURIComponent(runId)}`);
    expect([stored.mode, stored.trigger, stored.workflow_version]).toEqual(['dry', 'manual', 0]);

    await page.getByTestId('view-runs').click();
    await expect(page.getByTestId('run-list')).toHaveAttribute('data-loading', 'false');
    await search(page, 'q', runId);
    const r = row(page, runId);
    await expect(r).toContainText(`${name} · draft dry run`);
    await expect(r).not.toContainText('v0');

    // After a reload (nothing remembered in the page), the name comes from the run itself.
    await page.reload();
    await expect(row(page, runId)).toContainText(`${name} · draft dry run`);
    await row(page, runId).click();
    await expect(page.getByTestId('detail-label')).toHaveText(`${name} · draft dry run`);
    await expect(page.getByTestId('detail-workflow')).not.toContainText('v0');
    if (shots) await page.screenshot({ path: `${shots}/history-draft-dry-run.png` });
  });

  test('"Replay selected" previews each run like a single replay, with a summary, before replaying live', async ({ page, request }) => {
    const tag = uniq();
    const good = `e2e-bulkpv-ok-${tag}`;
    const doomed = `e2e-bulkpv-doomed-${tag}`;
    const keep = `e2e-bulkpv-keep-${tag}`;
    await api(request, 'PUT', `/workflows/${good}`, callFlow(good));
    // Its current version's call answers 500 in a dry walk: a replay is predicted to fail.
    await api(request, 'PUT', `/workflows/${doomed}`, callFlow(doomed, 500));
    // The invoice flow without its compensation: a failed run keeps its claim, so a replay does nothing.
    const inv = invoiceFlow(keep, `e2e-bulkpv-${tag}`) as { steps: { id: string; config: Record<string, unknown> }[]; edges: { to: string }[] };
    inv.steps = inv.steps.filter((s) => s.id !== 'undo');
    inv.edges = inv.edges.filter((e) => e.to !== 'undo');
    inv.steps.find((s) => s.id === 'create')!.config.retries = 0;
    await api(request, 'PUT', `/workflows/${keep}`, inv);

    const a = await runWith(request, good, 'fail', 1);
    const b = await runWith(request, doomed, 'fail', 2);
    mock.mode = 'fail';
    const c = await deliver(request, keep, `k-${tag}`, invoiceEvent(`evt_bulkpv_${tag}`));
    expect(c.status).toBe('failed');
    const dry = await api<Run>(request, 'POST', `/workflows/${good}/dry-run`, { input: { n: 9 } });
    mock.mode = 'ok';
    const sent = mock.requests.length;

    await openRuns(page);
    for (const r of [a, b, c, dry]) await row(page, r.id).getByTestId('run-select').check();
    await expect(page.getByTestId('selected-count')).toHaveText('4 runs selected');
    await page.getByTestId('bulk-replay').click();

    const dialog = page.getByTestId('bulk-replay-dialog');
    await expect(dialog).toBeVisible();
    const summary = page.getByTestId('bulk-replay-summary');
    await expect(summary).toHaveAttribute('data-state', 'ready');
    const forecast = (id: string) => dialog.locator(`[data-testid=bulk-forecast][data-run-id="${id}"]`);
    await expect(dialog.getByTestId('bulk-forecast')).toHaveCount(3);
    await expect(forecast(dry.id)).toHaveCount(0);
    await expect(forecast(a.id)).toHaveAttribute('data-outcome', 'succeed');
    await expect(forecast(a.id).getByTestId('bulk-forecast-headline')).toHaveText('this replay will make 1 external call (call)');
    await expect(forecast(b.id)).toHaveAttribute('data-outcome', 'fail');
    await expect(forecast(b.id).getByTestId('bulk-forecast-headline')).toContainText('this replay is predicted to fail: step call fails');
    await expect(forecast(c.id)).toHaveAttribute('data-outcome', 'nothing');
    await expect(forecast(c.id).getByTestId('bulk-forecast-headline')).toContainText('exists: this replay will take the skip route');
    await expect(summary).toHaveText(
      'Of 3 live runs: 1 will succeed, 1 will fail, 1 would do nothing (stopped by its own claim: resume it instead); 1 dry run left out (never replayed live)',
    );
    // The facts behind a prediction, as in the single replay dialog.
    await forecast(a.id).getByTestId('bulk-forecast-headline').click();
    await expect(forecast(a.id)).toContainText(`step call will call POST ${mock.url}/place`);
    await forecast(c.id).getByTestId('bulk-forecast-headline').click();
    await expect(forecast(c.id).getByTestId('replay-warning')).toHaveAttribute('data-code', 'own_claim');
    expect(mock.requests.length, 'the previews send nothing').toBe(sent);
    if (shots) await dialog.screenshot({ path: `${shots}/history-bulk-replay-preview.png` });

    // Then the live replay, as offered.
    await page.getByTestId('bulk-replay-confirm').click();
    await expect(dialog).toHaveCount(0);
    const progress = page.getByTestId('bulk-progress');
    await expect(progress).toHaveAttribute('data-running', 'false', { timeout: 30_000 });
    await expect(progress).toHaveAttribute('data-done', '4');
    const replayed = await api<Run>(request, 'GET', `/runs/${a.id}`);
    expect(replayed.replayed_by?.length).toBe(1);
    expect(mock.requests.length).toBeGreaterThan(sent);
  });
});

