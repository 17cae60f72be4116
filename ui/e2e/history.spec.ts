// Run history, run detail, Replay (with its dry-run preview), bulk replay, export, the Memory
// browser and Settings, against the real `fluxo serve` of global-setup.ts. A local mock stands
// for the destination; workflows point at it through the settings env variable E2E_MOCK_URL.

import { readFileSync } from 'node:fs';
import { expect, test } from '@playwright/test';
import { baseUrl, token } from './helpers';
import {
  api,
  deliver,
  filter,
  finished,
  flakyFlow,
  invoiceEvent,
  invoiceFlow,
  listGen,
  openRuns,
  reloaded,
  row,
  rowIds,
  search,
  setEnv,
  startMock,
  startRun,
  type Mock,
  type Run,
} from './history-helpers';

const FLAKY = 'e2e-flaky';
const INVOICE = 'e2e-invoice';
const NS = 'e2e-invoices';
const uniq = () => Math.random().toString(36).slice(2, 10);

let mock: Mock;

test.describe.serial('run history, replay, memory and settings', () => {
  test.beforeAll(async ({ request }) => {
    mock = await startMock();
    await setEnv(request, { E2E_MOCK_URL: mock.url });
    await api(request, 'PUT', `/workflows/${FLAKY}`, flakyFlow(FLAKY));
    await api(request, 'PUT', `/workflows/${INVOICE}`, invoiceFlow(INVOICE, NS));
  });

  test.afterAll(async () => {
    await mock?.close();
  });

  test('a failed run shows its attempts and waits; Replay after the fix succeeds and both runs link', async ({ page, request }) => {
    mock.mode = 'fail';
    const failed = await startRun(request, FLAKY, { n: 1 }, `flaky-${uniq()}`);
    expect(failed.status).toBe('failed');

    await openRuns(page);
    await filter(page, 'workflow', FLAKY);
    await expect(row(page, failed.id)).toHaveAttribute('data-status', 'failed');
    await row(page, failed.id).click();

    const detail = page.getByTestId('run-detail');
    await expect(detail).toHaveAttribute('data-run-id', failed.id);
    await expect(page.getByTestId('detail-status')).toHaveText('failed');
    const call = page.getByTestId('step-call');
    await expect(call).toHaveAttribute('data-status', 'failed');
    // Three attempts, each answered 500, with the fixed 200 ms wait before the 2nd and 3rd.
    const attempts = call.getByTestId('attempt');
    await expect(attempts).toHaveCount(3);
    for (let i = 0; i < 3; i++) await expect(attempts.nth(i)).toHaveAttribute('data-http-status', '500');
    await expect(attempts.nth(0).getByTestId('attempt-wait')).toHaveText('–');
    await expect(attempts.nth(1).getByTestId('attempt-wait')).toContainText('200 ms');
    await expect(attempts.nth(2).getByTestId('attempt-wait')).toContainText('200 ms');
    await expect(call.locator('.fx-timeline-seg.is-wait')).toHaveCount(2);
    await expect(call.getByTestId('step-error')).toContainText('HTTP 500');
    await expect(page.getByTestId('run-error')).toBeVisible();

    // Fix the destination, then replay from the detail: the dry preview first, then live.
    mock.mode = 'ok';
    const before = mock.requests.length;
    await page.getByTestId('detail-replay').click();
    const preview = page.getByTestId('replay-preview');
    await expect(preview).toHaveAttribute('data-state', 'ready');
    await expect(preview).toContainText(`will call POST ${mock.url}/flaky`);
    expect(mock.requests.length, 'the dry preview sends nothing').toBe(before);
    await page.getByTestId('replay-confirm').click();

    // A loaded run other than the original (while loading, the detail has no run id at all).
    await expect(detail).toHaveAttribute('data-run-id', otherThan(failed.id));
    const replayId = (await detail.getAttribute('data-run-id'))!;
    await expect(page.getByTestId('detail-status')).toHaveText('succeeded');
    await expect(page.getByTestId('replay-of-link')).toHaveAttribute('data-run-id', failed.id);
    expect(mock.requests.length - before).toBe(1);

    // And the way back: the original names its replay.
    await page.getByTestId('replay-of-link').click();
    await expect(detail).toHaveAttribute('data-run-id', failed.id);
    await expect(page.locator(`[data-testid="replayed-by-link"][data-run-id="${replayId}"]`)).toBeVisible();
    const stored = await api<Run>(request, 'GET', `/runs/${replayId}`);
    expect(stored.replay_of).toBe(failed.id);
    expect(stored.trigger).toBe('replay');
    // The list shows the new run (it arrived live) with its status.
    await expect(row(page, replayId)).toHaveAttribute('data-status', 'succeeded');
  });

  test('filters, key search and run id search find the right runs; new runs appear live', async ({ page, request }) => {
    const tag = uniq();
    mock.mode = 'ok';
    const a = await startRun(request, FLAKY, { n: 2 }, `e2e-key-a-${tag}`);
    const b = await startRun(request, FLAKY, { n: 3 }, `e2e-key-b-${tag}`);
    mock.mode = 'fail';
    const c = await startRun(request, FLAKY, { n: 4 }, `e2e-key-c-${tag}`);
    const dry = await api<Run>(request, 'POST', `/workflows/${FLAKY}/dry-run`, { input: { n: 5 } });
    expect([a.status, b.status, c.status, dry.mode]).toEqual(['succeeded', 'succeeded', 'failed', 'dry']);

    await openRuns(page);
    await filter(page, 'workflow', FLAKY);
    for (const r of [a, b, c, dry]) await expect(row(page, r.id)).toBeVisible();
    // Newest first.
    const ids = await rowIds(page);
    expect(ids.indexOf(dry.id)).toBeLessThan(ids.indexOf(c.id));
    expect(ids.indexOf(c.id)).toBeLessThan(ids.indexOf(a.id));

    // Exact key.
    await search(page, 'key', `e2e-key-b-${tag}`);
    await expect(page.getByTestId('run-row')).toHaveCount(1);
    await expect(row(page, b.id)).toBeVisible();
    await search(page, 'key', '');

    // Key prefix, and a run id, in the free search.
    await search(page, 'q', `e2e-key-a-${tag.slice(0, 4)}`);
    expect(await rowIds(page)).toEqual([a.id]);
    await search(page, 'q', c.id);
    expect(await rowIds(page)).toEqual([c.id]);
    await search(page, 'q', '');

    // Status, mode and trigger.
    await filter(page, 'status', 'failed');
    await expect(row(page, c.id)).toBeVisible();
    for (const s of await page.getByTestId('run-row').evaluateAll((els) => els.map((e) => e.getAttribute('data-status')))) expect(s).toBe('failed');
    await expect(row(page, a.id)).toHaveCount(0);
    await filter(page, 'status', '');
    await filter(page, 'mode', 'dry');
    await expect(row(page, dry.id)).toBeVisible();
    await expect(row(page, a.id)).toHaveCount(0);
    await filter(page, 'mode', '');
    await filter(page, 'trigger', 'api');
    for (const r of [a, b, c]) await expect(row(page, r.id)).toBeVisible();
    await expect(row(page, dry.id)).toHaveCount(0);
    await filter(page, 'trigger', '');

    // Time range: the last 15 minutes hold them.
    await filter(page, 'range', '15m');
    await expect(row(page, a.id)).toBeVisible();

    // Live: a run started elsewhere appears at the top without a reload.
    mock.mode = 'ok';
    const live = await startRun(request, FLAKY, { n: 6 }, `e2e-key-live-${tag}`);
    await expect(row(page, live.id)).toHaveAttribute('data-status', 'succeeded');
    expect((await rowIds(page))[0]).toBe(live.id);
  });

  test('the chart counts match the server, and clicking it filters the list', async ({ page, request }) => {
    await openRuns(page);
    const since = Date.now() - 7 * 86_400_000;
    const stats = await api<{ buckets: { counts: Record<string, number> }[] }>(request, 'GET', `/runs/stats?bucket=hour&since=${since}`);
    const total = (s: string) => stats.buckets.reduce((n, b) => n + (b.counts[s] ?? 0), 0);
    expect(total('failed')).toBeGreaterThan(0);
    await expect(page.getByTestId('chart-total-failed')).toHaveText(total('failed').toLocaleString('en-US'));
    await expect(page.getByTestId('chart-total-succeeded')).toHaveText(total('succeeded').toLocaleString('en-US'));
    await expect(page.getByTestId('chart-plot').locator('canvas').first()).toBeVisible();
    const sum = stats.buckets.reduce((n, b) => n + Object.values(b.counts).reduce((x, y) => x + y, 0), 0);
    await expect(page.getByTestId('status-chart')).toHaveAttribute('data-total', String(sum));

    // A status in the legend filters by it (once the list has reloaded).
    const gen = await listGen(page);
    await page.getByTestId('chart-status-failed').click();
    await expect(page.getByTestId('filter-status')).toHaveValue('failed');
    await reloaded(page, gen);
    await expect(page.getByTestId('run-row').first()).toBeVisible();
    for (const s of await page.getByTestId('run-row').evaluateAll((els) => els.map((e) => e.getAttribute('data-status')))) expect(s).toBe('failed');

    // A bar filters to its time bucket: the newest bucket holds this session's runs.
    const gen2 = await listGen(page);
    await page.getByTestId('chart-status-failed').click();
    await expect(page.getByTestId('filter-status')).toHaveValue('');
    await reloaded(page, gen2);
    // The chart is drawn again for the new filter: take its plot once it is there.
    const over = page.getByTestId('chart-plot').locator('.u-over');
    await expect(over).toBeVisible();
    await expect.poll(async () => (await over.boundingBox())?.width ?? 0).toBeGreaterThan(10);
    const box = (await over.boundingBox())!;
    await over.click({ position: { x: box.width - 4, y: box.height - 2 } });
    await expect(page.getByTestId('filter-range')).toHaveValue('custom');
    await expect(page.getByTestId('filter-since')).not.toHaveValue('');
  });

  test('replay preview on the invoice flow predicts the skip route, and the live replay takes it', async ({ page, request }) => {
    mock.mode = 'ok';
    const evt = `evt_e2e_preview_${uniq()}`;
    const first = await deliver(request, INVOICE, `d1-${evt}`, invoiceEvent(evt));
    expect(first.status).toBe('succeeded');
    expect(first.steps.find((s) => s.step_id === 'route')!.ports).toEqual(['default']);
    const deals = mock.requests.filter((r) => r.path === '/deals').length;

    await openRuns(page);
    await search(page, 'q', first.id);
    await row(page, first.id).click();
    await expect(page.getByTestId('run-detail')).toHaveAttribute('data-run-id', first.id);
    await page.getByTestId('detail-replay').click();
    await expect(page.getByTestId('replay-preview')).toHaveAttribute('data-state', 'ready');
    await expect(page.getByTestId('replay-preview-headline')).toHaveText(`memory key ${NS}/${evt} exists: this replay will take the skip route`);
    await page.getByTestId('replay-confirm').click();

    const detail = page.getByTestId('run-detail');
    await expect(detail).toHaveAttribute('data-run-id', otherThan(first.id));
    await expect(page.getByTestId('detail-status')).toHaveText('succeeded');
    const replayId = (await detail.getAttribute('data-run-id'))!;
    await expect(page.getByTestId('step-route').getByTestId('step-ports')).toHaveText('→ skip');
    const replay = await api<Run>(request, 'GET', `/runs/${replayId}`);
    expect(replay.replay_of).toBe(first.id);
    expect(replay.steps.find((s) => s.step_id === 'route')!.ports).toEqual(['skip']);
    expect(replay.steps.some((s) => s.step_id === 'create')).toBe(false);
    expect(mock.requests.filter((r) => r.path === '/deals').length, 'no second deal').toBe(deals);

    // Open on canvas: the snapshot with the path this run took.
    await page.getByTestId('open-on-canvas').click();
    const canvas = page.getByTestId('run-canvas');
    await expect(canvas.getByTestId('run-node-route')).toHaveAttribute('data-status', 'succeeded');
    await expect(canvas.getByTestId('run-node-skip')).toHaveAttribute('data-status', 'succeeded');
    await expect(canvas.getByTestId('run-node-create')).toHaveAttribute('data-status', 'skipped');
    await expect(canvas.getByTestId('run-edge-route:skip->skip')).toHaveAttribute('data-taken', 'true');
    await expect(canvas.getByTestId('run-edge-route:default->create')).toHaveAttribute('data-taken', 'false');
    await page.getByTestId('run-canvas-close').click();
    await expect(canvas).toHaveCount(0);
  });

  test('deleting a Memory key in the browser lets the next delivery of that event through', async ({ page, request }) => {
    mock.mode = 'ok';
    const evt = `evt_e2e_mem_${uniq()}`;
    const body = invoiceEvent(evt);
    const route = (r: Run) => r.steps.find((s) => s.step_id === 'route')!.ports;
    // New delivery keys each time, so the door's dedupe lets each in and the Memory claim decides.
    const first = await deliver(request, INVOICE, `m1-${evt}`, body);
    expect(route(first)).toEqual(['default']);
    expect(route(await deliver(request, INVOICE, `m2-${evt}`, body))).toEqual(['skip']);

    await page.goto(`${baseUrl()}/#token=${token()}`);
    await page.getByTestId('view-memory').click();
    // The namespace shows how many live keys it holds, as the API counts them.
    const listed = await api<{ counts: { namespace: string; keys: number }[] }>(request, 'GET', '/memory');
    const keys = listed.counts.find((c) => c.namespace === NS)!.keys;
    expect(keys).toBeGreaterThanOrEqual(1);
    await expect(page.getByTestId(`namespace-count-${NS}`)).toHaveText(keys.toLocaleString('en-US'));
    await page.getByTestId(`namespace-${NS}`).click();
    await page.getByTestId('memory-prefix').fill(evt);
    const entry = page.locator(`[data-testid="memory-row"][data-key="${evt}"]`);
    await expect(entry).toBeVisible();
    await expect(page.getByTestId('memory-row')).toHaveCount(1);
    await entry.click();
    await expect(page.getByTestId('memory-detail')).toContainText(evt);
    await expect(page.getByTestId('memory-ttl-left')).toContainText(/\d+ d \d+ h/);
    await expect(page.getByTestId('memory-value')).toContainText(String((body.data as { object: { id: string } }).object.id));
    // Written by the first delivery's claim step; the link opens that run.
    await expect(page.getByTestId('memory-written-by')).toContainText('step seen of run');
    await page.getByTestId('memory-writer-run').click();
    await expect(page.getByTestId('run-detail')).toHaveAttribute('data-run-id', first.id);
    await page.getByTestId('view-memory').click();
    await page.getByTestId(`namespace-${NS}`).click();
    await page.getByTestId('memory-prefix').fill(evt);
    await entry.click();

    await page.getByTestId('memory-detail-delete').click();
    await expect(page.getByTestId('confirm-dialog')).toContainText(evt);
    await page.getByTestId('confirm-ok').click();
    await expect(entry).toHaveCount(0);
    const gone = await request.get(`${baseUrl()}/api/v1/memory/${NS}/${evt}`, { headers: { Authorization: `Bearer ${token()}` } });
    expect(gone.status()).toBe(404);

    const deals = mock.requests.filter((r) => r.path === '/deals').length;
    const third = await deliver(request, INVOICE, `m3-${evt}`, body);
    expect(route(third)).toEqual(['default']);
    expect(third.status).toBe('succeeded');
    expect(mock.requests.filter((r) => r.path === '/deals').length).toBe(deals + 1);
  });

  test('bulk replay of the selected failed runs, with progress', async ({ page, request }) => {
    mock.mode = 'fail';
    const f1 = await startRun(request, FLAKY, { n: 10 }, `bulk-1-${uniq()}`);
    const f2 = await startRun(request, FLAKY, { n: 11 }, `bulk-2-${uniq()}`);
    mock.mode = 'ok';

    await openRuns(page);
    await filter(page, 'workflow', FLAKY);
    await filter(page, 'status', 'failed');
    await expect(row(page, f1.id)).toBeVisible();
    await expect(row(page, f2.id)).toBeVisible();
    const n = await page.getByTestId('run-row').count();
    // Hand-picked rows: every loaded one.
    for (const box of await page.getByTestId('run-select').all()) await box.check();
    await expect(page.getByTestId('selected-count')).toHaveText(`${n} run${n === 1 ? '' : 's'} selected`);
    await page.getByTestId('bulk-replay').click();
    // Each is previewed first (the same dry walk as a single replay), then replayed live.
    await expect(page.getByTestId('bulk-replay-summary')).toHaveAttribute('data-state', 'ready');
    await page.getByTestId('bulk-replay-confirm').click();
    const progress = page.getByTestId('bulk-progress');
    await expect(progress).toHaveAttribute('data-running', 'false', { timeout: 30_000 });
    await expect(progress).toHaveAttribute('data-done', String(n));
    await expect(page.getByTestId('bulk-succeeded')).toHaveText(`${n} succeeded`);
    for (const f of [f1, f2]) {
      const orig = await api<Run>(request, 'GET', `/runs/${f.id}`);
      expect(orig.replayed_by?.length).toBe(1);
      const replay = await finished(request, orig.replayed_by![0]);
      expect(replay.status).toBe('succeeded');
    }
  });

  test('exports the filtered runs as JSON Lines and CSV (the server streams them)', async ({ page, request }) => {
    const all: { id: string }[] = [];
    let cursor = '';
    for (;;) {
      const p = await api<{ runs: { id: string }[]; next_cursor?: string }>(request, 'GET', `/runs?workflow=${FLAKY}&limit=2${cursor ? `&cursor=${cursor}` : ''}`);
      all.push(...p.runs);
      if (!p.next_cursor) break;
      cursor = encodeURIComponent(p.next_cursor);
    }
    await openRuns(page);
    await filter(page, 'workflow', FLAKY);

    await page.getByTestId('export').click();
    const [jsonl] = await Promise.all([page.waitForEvent('download'), page.getByTestId('export-jsonl').click()]);
    expect(jsonl.suggestedFilename()).toMatch(/^fluxo-runs-\d{8}-\d{6}\.jsonl$/);
    const runs = readFileSync((await jsonl.path())!, 'utf8')
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => JSON.parse(l) as { id: string; workflow_id: string; input: unknown });
    expect(runs.map((r) => r.id)).toEqual(all.map((r) => r.id));
    expect(new Set(runs.map((r) => r.workflow_id))).toEqual(new Set([FLAKY]));
    expect(runs.every((r) => r.input !== undefined)).toBe(true);

    await page.getByTestId('export').click();
    const [csv] = await Promise.all([page.waitForEvent('download'), page.getByTestId('export-csv').click()]);
    expect(csv.suggestedFilename()).toMatch(/\.csv$/);
    const lines = readFileSync((await csv.path())!, 'utf8').trim().split('\r\n');
    expect(lines[0]).toBe(
      'id,workflow_id,workflow_version,status,mode,trigger,idempotency_key,created_at,finished_at,duration_ms,error_code,error_message,error_step,error_http_status,replay_of,resume_of,root_run_id,parent_run,fixed_by,resumed_by,input',
    );
    expect(lines.length).toBe(all.length + 1);
    expect(lines[1].startsWith(`${all[0].id},${FLAKY},`)).toBe(true);
  });

  test('settings: env variables added, edited and removed; retention; token shown; data dir read-only', async ({ page, request }) => {
    type Settings = { settings: { env: Record<string, string>; retention_days?: number }; effective: { retention_days?: number | null } };
    await page.goto(`${baseUrl()}/#token=${token()}`);
    await page.getByTestId('view-settings').click();
    await expect(page.getByTestId('settings-view')).toBeVisible();
    await expect(page.getByTestId('settings-data-dir')).not.toHaveValue('');
    await expect(page.getByTestId('settings-data-dir')).toHaveAttribute('readonly', '');

    // The mock's variable is listed.
    const names = page.getByTestId('env-name');
    await expect(names.first()).toBeVisible();
    expect(await names.evaluateAll((els) => els.map((e) => (e as HTMLInputElement).value))).toContain('E2E_MOCK_URL');

    // Add.
    await page.getByTestId('env-add').click();
    await names.last().fill('e2e_ui_var');
    await expect(names.last()).toHaveValue('E2E_UI_VAR');
    await page.getByTestId('env-value').last().fill('one');
    await page.getByTestId('settings-save').click();
    await expect(page.getByTestId('settings-save')).toBeDisabled();
    let s = await api<Settings>(request, 'GET', '/settings');
    expect(s.settings.env.E2E_UI_VAR).toBe('one');
    expect(s.settings.env.E2E_MOCK_URL).toBe(mock.url);

    // Edit, and a bad name is refused before saving.
    const envRow = async (name: string) => {
      const all = await names.evaluateAll((els) => els.map((e) => (e as HTMLInputElement).value));
      expect(all).toContain(name);
      return page.getByTestId('env-row').nth(all.indexOf(name));
    };
    await (await envRow('E2E_UI_VAR')).getByTestId('env-value').fill('two');
    await page.getByTestId('env-add').click();
    await names.last().fill('9BAD');
    await expect(page.getByTestId('settings-save')).toBeDisabled();
    await page.getByTestId('env-remove').last().click();
    await page.getByTestId('settings-save').click();
    await expect(page.getByTestId('settings-save')).toBeDisabled();
    s = await api<Settings>(request, 'GET', '/settings');
    expect(s.settings.env.E2E_UI_VAR).toBe('two');

    // Remove.
    await (await envRow('E2E_UI_VAR')).getByTestId('env-remove').click();
    await page.getByTestId('settings-save').click();
    await expect(page.getByTestId('settings-save')).toBeDisabled();
    s = await api<Settings>(request, 'GET', '/settings');
    expect(s.settings.env.E2E_UI_VAR).toBeUndefined();
    expect(s.settings.env.E2E_MOCK_URL).toBe(mock.url);

    // Retention in days, shown as in force, then cleared again.
    await page.getByTestId('settings-retention-days').fill('400');
    await page.getByTestId('settings-save').click();
    await expect(page.getByTestId('settings-effective')).toContainText('400 days');
    s = await api<Settings>(request, 'GET', '/settings');
    expect(s.settings.retention_days).toBe(400);
    await page.getByTestId('settings-retention-days').fill('');
    await page.getByTestId('settings-save').click();
    await expect(page.getByTestId('settings-effective')).toContainText('no age limit');

    // The token, on request.
    await expect(page.getByTestId('settings-token')).not.toHaveValue(token());
    await page.getByTestId('settings-token-show').click();
    await expect(page.getByTestId('settings-token')).toHaveValue(token());
  });
});

/** Matches a run id that is present and is not `id`. */
function otherThan(id: string): RegExp {
  return new RegExp(`^(?!${id}$).+$`);
}
