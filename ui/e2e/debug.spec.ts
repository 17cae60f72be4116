import { expect, test } from '@playwright/test';
import { baseUrl, openWorkflow } from './helpers';
import { deliver, invoiceEvent, openRuns, row } from './history-helpers';

const uniq = () => Math.random().toString(36).slice(2, 10);

test('Debug in editor: a past run opens its workflow with the run input, every digit kept', async ({ page, request }) => {
  const tag = uniq();
  // A number beyond 2^53, written as JSON text (a JS number would round it).
  const text = JSON.stringify(invoiceEvent(`evt_dbg_${tag}`)).replace(/^\{/, '{"amount_big":1610521604143693812,');
  const r = await request.post(`${baseUrl()}/hooks/invoice-paid-once`, {
    headers: { 'Content-Type': 'application/json', 'Idempotency-Key': `evt_dbg_${tag}` },
    data: text,
  });
  expect(r.status(), await r.text()).toBe(202);
  const { run_id } = (await r.json()) as { run_id: string };

  await openRuns(page);
  await row(page, run_id).click();
  await expect(page.getByTestId('run-detail')).toHaveAttribute('data-run-id', run_id);
  await page.getByTestId('debug-in-editor').click();
  await expect(page.getByTestId('editor')).toBeVisible();
  await expect(page.getByTestId('inspector-workflow').getByTestId('workflow-id')).toHaveValue('invoice-paid-once');
  const input = page.getByTestId('run-input');
  await expect(input).toHaveValue(new RegExp(`"id": "evt_dbg_${tag}"`));
  await expect(input).toHaveValue(/"amount_big": 1610521604143693812\b/);
});

test('Listen for a test event: the next delivery to the webhook becomes the run input', async ({ page, request }) => {
  await page.goto(`${baseUrl()}/#token=${process.env.FLUXO_E2E_TOKEN}`);
  await expect(page.getByTestId('editor')).toBeVisible();
  await openWorkflow(page, 'invoice-paid-once');
  const listen = page.getByTestId('listen-test-event');
  await page.getByTestId('listen-toggle').click();
  await expect(listen).toHaveAttribute('data-listening', 'true');

  const tag = uniq();
  await deliver(request, 'invoice-paid-once', `evt_listen_${tag}`, invoiceEvent(`evt_listen_${tag}`));
  await expect(page.getByTestId('run-input')).toHaveValue(new RegExp(`"id": "evt_listen_${tag}"`));
  await expect(listen).toHaveAttribute('data-listening', 'false');
  // One capture: a later delivery does not replace it.
  await deliver(request, 'invoice-paid-once', `evt_after_${tag}`, invoiceEvent(`evt_after_${tag}`));
  await expect(page.getByTestId('run-input')).toHaveValue(new RegExp(`"id": "evt_listen_${tag}"`));
});
