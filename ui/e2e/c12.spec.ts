// Handed case C12: one webhook body with a duplicated member, `{"order_id":"A","order_id":"B"}`,
// is read the same way by every surface: the engine (key and route), the run in history, the
// editor after "Debug in editor", and a dry run of that text typed in the editor (also when the
// text holds an integer beyond 2^53, which the UI parses with lossless-json).

import { expect, test } from '@playwright/test';
import { apiPut, baseUrl } from './helpers';
import { finished, openRuns, row } from './history-helpers';

const uniq = () => Math.random().toString(36).slice(2, 10);

function ordersFlow(id: string) {
  return {
    id,
    name: id,
    version: 1,
    steps: [
      { id: 'hook', kind: 'webhook_trigger', position: { x: 0, y: 0 }, config: { dedupe_key: '{{ input.order_id }}' } },
      { id: 'route', kind: 'router', position: { x: 260, y: 0 }, config: { routes: [{ name: 'b', when: 'input.order_id == "B"' }] } },
      { id: 'matched', kind: 'transform', position: { x: 520, y: -80 }, config: { fields: { order: '{{ input.order_id }}' } } },
      { id: 'other', kind: 'transform', position: { x: 520, y: 80 }, config: { fields: { order: '{{ input.order_id }}' } } },
    ],
    edges: [
      { from: 'hook', to: 'route' },
      { from: 'route', port: 'b', to: 'matched' },
      { from: 'route', port: 'default', to: 'other' },
    ],
  };
}

test('C12: a duplicated member is B in the engine, the history view, the editor and a dry run', async ({ page, request }) => {
  const wf = `c12-orders-${uniq()}`;
  await apiPut(request, `/workflows/${wf}`, ordersFlow(wf));

  // The body exactly as a sender wrote it: the member twice.
  const deliver = (data: string) => request.post(`${baseUrl()}/hooks/${wf}`, { headers: { 'Content-Type': 'application/json' }, data });
  const first = await deliver('{"order_id":"A","order_id":"B"}');
  expect(first.status(), await first.text()).toBe(202);
  const { run_id } = (await first.json()) as { run_id: string };
  const run = await finished(request, run_id);
  expect(run.status).toBe('succeeded');
  expect(run.idempotency_key).toBe('B');
  expect(run.steps.find((s) => s.step_id === 'route')?.output).toEqual({ route: 'b' });
  // `{"order_id":"B"}` is the same event.
  const again = await deliver('{"order_id":"B"}');
  expect(again.status()).toBe(200);
  expect(await again.json()).toEqual({ run_id, duplicate: true });

  // The history view: key B, the route `b` taken, the input holds B only.
  await openRuns(page);
  await row(page, run_id).click();
  const detail = page.getByTestId('run-detail');
  await expect(detail).toHaveAttribute('data-run-id', run_id);
  await expect(page.getByTestId('detail-key')).toHaveText('B');
  await expect(page.getByTestId('step-route').getByTestId('step-ports')).toHaveText('→ b');
  await expect(page.getByTestId('step-matched')).toBeVisible();
  await expect(page.getByTestId('step-other')).toHaveCount(0);
  const inputView = page.getByTestId('run-input-json');
  await expect(inputView).toContainText('"B"');
  await expect(inputView).not.toContainText('"A"');

  // The editor, through "Debug in editor": the run input is B.
  await page.getByTestId('debug-in-editor').click();
  await expect(page.getByTestId('editor')).toBeVisible();
  await expect(page.getByTestId('inspector-workflow').getByTestId('workflow-id')).toHaveValue(wf);
  const input = page.getByTestId('run-input');
  await expect(input).toHaveValue(/"order_id": "B"/);
  await expect(input).not.toHaveValue(/"A"/);
  await page.getByTestId('dry-run').click();
  await expect(page.getByTestId('run-status')).toHaveText('succeeded');
  await expect(page.getByTestId('result-row-route')).toContainText('{"route":"b"}');
  await expect(page.getByTestId('result-row-matched')).toContainText('{"order":"B"}');
  await expect(page.getByTestId('result-row-other')).toContainText('not reached');

  // The same duplicated text typed into the run input, with an integer beyond 2^53 (the
  // lossless parser's path, which refused duplicated members before): B, the route matches.
  await page.getByTestId('edit-input').click();
  await input.fill('{"order_id":"A","order_id":"B","amount":1610521604143693812}');
  await page.getByTestId('format-input').click();
  await expect(input).toHaveValue(/"order_id": "B"/);
  await expect(input).not.toHaveValue(/"A"/);
  await expect(input).toHaveValue(/"amount": 1610521604143693812\b/);
  await page.getByTestId('dry-run').click();
  await expect(page.getByTestId('run-status')).toHaveText('succeeded');
  await expect(page.getByTestId('result-row-hook')).toContainText('"order_id":"B"');
  await expect(page.getByTestId('result-row-route')).toContainText('{"route":"b"}');
  await expect(page.getByTestId('result-row-other')).toContainText('not reached');
});
