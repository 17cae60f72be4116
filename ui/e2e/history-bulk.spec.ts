// History that testers can trust (issue 15), against the real `fluxo serve` of global-setup.ts
// and a local mock destination:
// - "Select all failed matching" selects every failed run of the filters (more than the loaded
//   page), previews what the action does, and the action recovers exactly those, dry runs
//   excluded, with progress and links to the new runs;
// - a failure that a later replay fixed reads "fixed by <run>" and loses its primary Replay;
// - opening the Replay dialog (three times) stores no run.

import { expect, test, type APIRequestContext } from '@playwright/test';
import { api, filter, openRuns, row, setEnv, startMock, type Mock, type Run } from './history-helpers';

const uniq = () => Math.random().toString(36).slice(2, 10);

let mock: Mock;

/** A manual trigger and one POST to the mock (`env.E2E_MOCK_URL`), no retries. */
function callFlow(id: string): Record<string, unknown> {
  return {
    id,
    name: `Bulk call (e2e) ${id}`,
    version: 1,
    settings: { run_timeout_s: 20 },
    steps: [
      { id: 'start', kind: 'manual_trigger', position: { x: 0, y: 0 }, config: {} },
      {
        id: 'call',
        kind: 'http_request',
        position: { x: 280, y: 0 },
        config: { method: 'POST', url: '{{ env.E2E_MOCK_URL }}/bulk', body: { n: '{{ input.n }}' }, retries: 0, timeout_s: 5 },
      },
    ],
    edges: [{ from: 'start', to: 'call' }],
  };
}

interface FullRun extends Run {
  resume_of?: string;
  resumed_by?: string[];
}

/** Every run of a workflow (all pages), by the API. */
async function allRuns(request: APIRequestContext, workflow: string, status = ''): Promise<FullRun[]> {
  const out: FullRun[] = [];
  let cursor = '';
  for (;;) {
    const page = await api<{ runs: FullRun[]; next_cursor?: string }>(request, 'GET', `/runs?workflow=${workflow}&status=${status}&limit=500${cursor ? `&cursor=${cursor}` : ''}`);
    out.push(...page.runs);
    if (!page.next_cursor) return out;
    cursor = encodeURIComponent(page.next_cursor);
  }
}

/** `n` failed live runs of `workflow` (the mock failing), ten at a time. */
async function failedRuns(request: APIRequestContext, workflow: string, n: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i += 10) {
    const batch = await Promise.all(
      Array.from({ length: Math.min(10, n - i) }, (_, k) => api<Run>(request, 'POST', `/workflows/${workflow}/runs`, { input: { n: i + k } })),
    );
    for (const r of batch) expect(r.status).toBe('failed');
    ids.push(...batch.map((r) => r.id));
  }
  return ids;
}

test.describe.serial('history that testers can trust', () => {
  test.beforeAll(async ({ request }) => {
    mock = await startMock();
    await setEnv(request, { E2E_MOCK_URL: mock.url });
  });

  test.afterAll(async () => {
    await mock?.close();
  });

  test('select all failed matching: 250 failed runs (more than a page), resumed exactly, dry runs excluded', async ({ page, request }) => {
    const wf = `e2e-bulk-${uniq()}`;
    await api(request, 'PUT', `/workflows/${wf}`, callFlow(wf));
    mock.mode = 'fail';
    const failed = await failedRuns(request, wf, 250);
    // Three failed dry runs: their definition simulates a 500 answer.
    const dryFlow = callFlow(wf) as { steps: { id: string; config: Record<string, unknown> }[] };
    dryFlow.steps.find((st) => st.id === 'call')!.config.dry_run = { status: 500, body: {} };
    const dry: string[] = [];
    for (let i = 0; i < 3; i++) {
      const d = await api<Run>(request, 'POST', `/workflows/${wf}/dry-run`, { input: { n: 1000 + i }, workflow: dryFlow });
      expect([d.mode, d.status]).toEqual(['dry', 'failed']);
      dry.push(d.id);
    }
    mock.mode = 'ok';
    const before = mock.requests.length;

    await openRuns(page);
    await filter(page, 'workflow', wf);
    await filter(page, 'status', 'failed');
    // Only the first page is loaded.
    await expect(page.getByTestId('run-list')).toHaveAttribute('data-more', 'true');
    expect(Number(await page.getByTestId('run-list').getAttribute('data-count'))).toBeLessThan(253);

    await page.getByTestId('select-all-matching').click();
    await expect(page.getByTestId('matching-count')).toHaveAttribute('data-count', '253');
    await expect(page.getByTestId('matching-count')).toHaveText('All 253 failed runs matching selected');
    await expect(page.getByTestId('bulk-preview-line')).toHaveText('250 failed live runs: 250 will resume, 0 will replay; 3 dry runs excluded');
    // Loaded live rows show as selected, dry ones do not.
    await expect(row(page, failed[249]).getByTestId('run-select')).toBeChecked();
    expect(mock.requests.length, 'the preview sends nothing').toBe(before);
    if (process.env.FLUXO_SCREENSHOT_DIR) await page.screenshot({ path: `${process.env.FLUXO_SCREENSHOT_DIR}/history-select-all-matching.png` });

    await page.getByTestId('bulk-matching-start').click();
    await expect(page.getByTestId('confirm-dialog')).toContainText('250 failed live runs: 250 will resume, 0 will replay; 3 dry runs excluded');
    await page.getByTestId('confirm-ok').click();
    const progress = page.getByTestId('bulk-progress');
    await expect(progress).toHaveAttribute('data-kind', 'matching');
    await expect(progress).toHaveAttribute('data-total', '250');
    await expect(progress).toHaveAttribute('data-running', 'false', { timeout: 60_000 });
    await expect(progress).toHaveAttribute('data-done', '250');
    await expect(page.getByTestId('bulk-succeeded')).toHaveText('250 succeeded');
    await expect(page.getByTestId('bulk-started')).toHaveText('250 resumed, 0 replayed; 3 dry runs excluded');
    await expect(page.getByTestId('bulk-failed')).toHaveCount(0);

    // Exactly those: each live failure resumed once and sent once; the dry runs untouched.
    expect(mock.requests.length - before).toBe(250);
    const runs = await allRuns(request, wf);
    const byId = new Map(runs.map((r) => [r.id, r]));
    for (const id of failed) {
      const r = byId.get(id)!;
      expect(r.status).toBe('failed');
      const resumes = runs.filter((x) => x.resume_of === id);
      expect(resumes.map((x) => [x.status, x.mode])).toEqual([['succeeded', 'live']]);
    }
    for (const id of dry) {
      expect(runs.filter((x) => x.resume_of === id || x.replay_of === id)).toHaveLength(0);
    }
    expect(runs).toHaveLength(253 + 250);

    // The result summary links to the new runs.
    await page.getByTestId('bulk-results-toggle').click();
    await expect(page.getByTestId('bulk-result')).toHaveCount(250);
    const first = page.locator(`[data-testid=bulk-result][data-run-id="${failed[0]}"]`);
    await expect(first).toHaveAttribute('data-outcome', 'succeeded');
    const newId = (await first.getAttribute('data-new-run-id'))!;
    expect(runs.find((x) => x.id === newId)?.resume_of).toBe(failed[0]);
    await first.getByTestId('bulk-result-new').click();
    await expect(page.getByTestId('run-detail')).toHaveAttribute('data-run-id', newId);

    // Nothing left to do: all are fixed now.
    await page.getByTestId('select-all-matching').click();
    await expect(page.getByTestId('bulk-preview-line')).toHaveText('250 failed live runs: 0 will resume, 0 will replay; 250 skipped (fixed or already resumed); 3 dry runs excluded');
    await expect(page.getByTestId('bulk-matching-start')).toBeDisabled();
  });

  test('a failure that a later replay fixed reads "fixed by" and loses its primary action; lineage entries carry status and time', async ({ page, request }) => {
    const wf = `e2e-fixed-${uniq()}`;
    await api(request, 'PUT', `/workflows/${wf}`, callFlow(wf));
    mock.mode = 'fail';
    const [failedId] = await failedRuns(request, wf, 1);
    const [other] = await failedRuns(request, wf, 1);
    mock.mode = 'ok';
    const fix = await api<Run>(request, 'POST', `/runs/${failedId}/replay`, { mode: 'live' });
    expect(fix.status).toBe('succeeded');

    await openRuns(page);
    await filter(page, 'workflow', wf);
    const fixedRow = row(page, failedId);
    await expect(fixedRow).toHaveAttribute('data-fixed-by', fix.id);
    await expect(fixedRow.getByTestId('row-fixed-by')).toHaveText(`fixed by ${fix.id.slice(0, 8)}`);
    await expect(fixedRow.getByTestId('row-resume')).toHaveCount(0);
    await expect(fixedRow.getByTestId('row-replay')).toHaveCount(0);
    // A failure nobody fixed keeps its primary Resume.
    await expect(row(page, other).getByTestId('row-fixed-by')).toHaveCount(0);
    await expect(row(page, other).getByTestId('row-resume')).toBeVisible();

    await fixedRow.click();
    await expect(page.getByTestId('run-detail')).toHaveAttribute('data-run-id', failedId);
    await expect(page.getByTestId('detail-fixed-by')).toContainText('fixed by');
    await expect(page.getByTestId('fixed-by-link')).toHaveAttribute('data-run-id', fix.id);
    await expect(page.getByTestId('detail-resume')).toHaveCount(0);
    await expect(page.getByTestId('detail-replay')).not.toHaveClass(/fx-btn-primary/);
    // "Replayed by" names the run with its status and its time.
    const link = page.locator(`[data-testid="replayed-by-link"][data-run-id="${fix.id}"]`);
    await expect(link).toHaveAttribute('data-status', 'succeeded');
    await expect(link.locator('.fx-pill')).toHaveText('succeeded');
    await expect(link.getByTestId('run-ref-time')).not.toBeEmpty();
    // With the detail open, the row still reads "fixed by".
    await expect(fixedRow.getByTestId('row-fixed-by')).toBeVisible();
    await expect(fixedRow.getByTestId('row-resume')).toHaveCount(0);
    if (process.env.FLUXO_SCREENSHOT_DIR) await page.screenshot({ path: `${process.env.FLUXO_SCREENSHOT_DIR}/history-fixed-by.png` });
  });

  test('opening the Replay dialog three times adds no run to history', async ({ page, request }) => {
    const wf = `e2e-preview-${uniq()}`;
    await api(request, 'PUT', `/workflows/${wf}`, callFlow(wf));
    mock.mode = 'fail';
    const [failedId] = await failedRuns(request, wf, 1);
    mock.mode = 'ok';
    const count = async () => (await allRuns(request, wf)).length;
    const before = new Set((await allRuns(request, '')).map((r) => r.id));
    expect(await count()).toBe(1);
    const sent = mock.requests.length;

    await openRuns(page);
    await filter(page, 'workflow', wf);
    await expect(page.getByTestId('run-list')).toHaveAttribute('data-count', '1');
    for (let i = 0; i < 3; i++) {
      // From the row, then from the detail: the dialog predicts with a dry walk.
      if (i < 2) await row(page, failedId).getByTestId('row-replay').click();
      else {
        await row(page, failedId).click();
        await page.getByTestId('detail-replay').click();
      }
      await expect(page.getByTestId('replay-dialog')).toBeVisible();
      await expect(page.getByTestId('replay-preview')).toHaveAttribute('data-state', 'ready');
      await expect(page.getByTestId('replay-preview-headline')).toBeVisible();
      await page.getByTestId('replay-cancel').click();
      await expect(page.getByTestId('replay-dialog')).toHaveCount(0);
    }
    // Nothing stored, nothing sent, nothing new in the list.
    expect(await count()).toBe(1);
    // Anywhere in history: no run of this workflow and none linked to the run was added. (Not
    // "no run at all": an earlier test's background work on this shared server may still add
    // runs of its own workflows meanwhile.)
    const added = (await allRuns(request, '')).filter((r) => !before.has(r.id));
    expect(added.filter((r) => r.workflow_id === wf || r.replay_of === failedId || r.resume_of === failedId)).toEqual([]);
    expect(mock.requests.length).toBe(sent);
    await expect(page.getByTestId('run-list')).toHaveAttribute('data-count', '1');
    await expect(page.locator('[data-testid=run-row][data-mode=dry]')).toHaveCount(0);
    const orig = await api<Run>(request, 'GET', `/runs/${failedId}`);
    expect(orig.replayed_by ?? []).toEqual([]);
  });
});
