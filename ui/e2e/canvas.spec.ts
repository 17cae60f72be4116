import { expect, test } from '@playwright/test';
import { baseUrl, newBlank, node, openEditor, token } from './helpers';

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
