import { expect, test, type Page } from '@playwright/test';
import { apiGet, connect, node, openEditor, openWorkflow, select, settled } from './helpers';

interface WorkflowFile {
  steps: { id: string; config: Record<string, unknown> }[];
}

/** The run input from a real sample payload (Check sends it as the event). */
async function pickSample(page: Page, name: string, expected: RegExp): Promise<void> {
  await page.getByTestId('tab-input').click();
  await page.getByTestId('sample-select').selectOption(name);
  await expect(page.getByTestId('run-input')).toHaveValue(expected);
}

test.describe('Check: is the workflow safe to re-run?', () => {
  test('invoice-paid-once passes every check; without its claim and Idempotency-Key it does not', async ({ page, request }) => {
    await openEditor(page);
    await openWorkflow(page, 'invoice-paid-once');
    await pickSample(page, 'stripe/invoice.paid.json', /"type": "invoice.paid"/);

    // Safe: every row passes.
    await page.getByTestId('check').click();
    await expect(page.getByTestId('tab-check')).toHaveClass(/is-active/);
    const report = page.getByTestId('check-report');
    await expect(report).toHaveAttribute('data-passed', 'true');
    const rows = page.getByTestId('check-row');
    const n = await rows.count();
    expect(n).toBeGreaterThanOrEqual(6);
    await expect(page.locator('[data-testid=check-row]:not([data-verdict=pass])')).toHaveCount(0);
    for (let i = 0; i < n; i++) {
      await expect(rows.nth(i).getByTestId('check-verdict')).toHaveText('PASS');
    }
    await expect(page.locator('[data-testid=check-row][data-check="same event twice"]')).toHaveCount(1);
    await expect(page.getByTestId('check-summary')).toHaveText(`${n} of ${n} checks passed: safe to re-run`);
    await expect(page.getByTestId('check-notes')).toContainText('throw-away data dir');
    await expect(page.getByTestId('check')).toBeEnabled();

    // Unsafe, on the canvas only: no Idempotency-Key on the POST, and the Memory claim
    // (seen → route → skip) bypassed: hook → create.
    await select(page, 'create');
    await expect(page.getByTestId('map-headers-key-0')).toHaveValue('Idempotency-Key');
    await page.getByTestId('map-headers').getByTitle('Remove').click();
    await expect(page.getByTestId('map-headers-key-0')).toHaveCount(0);
    for (const id of ['seen', 'route', 'skip']) {
      await select(page, id);
      await page.keyboard.press('Delete');
      await expect(node(page, id)).toHaveCount(0);
    }
    await connect(page, 'hook', 'out', 'create');
    await settled(page);
    await expect(page.getByTestId('validation-status')).toHaveAttribute('data-state', 'warning');
    await expect(node(page, 'create').getByTestId('node-badge-warning')).toHaveAttribute('data-codes', /lint_unguarded_write/);

    // The shown report is now out of date.
    await page.getByTestId('tab-check').click();
    await expect(report).toHaveAttribute('data-stale', 'true');
    await expect(page.getByTestId('check-stale')).toBeVisible();

    await page.getByTestId('check').click();
    await expect(report).toHaveAttribute('data-passed', 'false');
    await expect(report).toHaveAttribute('data-stale', 'false');
    const twice = page.locator('[data-testid=check-row][data-check="same event twice"]');
    await expect(twice).toHaveAttribute('data-verdict', 'fail');
    await expect(twice.getByTestId('check-verdict')).toHaveText('FAIL');
    const failed = await page.locator('[data-testid=check-row][data-verdict=fail]').count();
    expect(failed).toBeGreaterThanOrEqual(1);
    await expect(page.getByTestId('check-summary')).toHaveText(`${failed} of ${await rows.count()} checks failed: not safe to re-run`);
    await expect(page.getByTestId('check-warnings')).toContainText('lint_unguarded_write');

    // The check ran the unsaved canvas: the saved file is untouched.
    await expect(page.getByTestId('dirty-dot')).toBeVisible();
    const saved = await apiGet<WorkflowFile>(request, '/workflows/invoice-paid-once');
    expect(saved.steps.map((s) => s.id)).toContain('seen');
    expect(saved.steps.find((s) => s.id === 'create')?.config.headers).toEqual({
      'Idempotency-Key': 'deal-{{ input.data.object.id }}',
    });
  });

  test('a failure alert: why and fix until the builder ticks it as an expected effect, then a passing row that says so', async ({ page }) => {
    await openEditor(page);
    await openWorkflow(page, 'invoice-paid-to-hubspot');
    await pickSample(page, 'stripe/invoice.paid.json', /"type": "invoice.paid"/);

    // The Slack alert after the error handler: the inspector offers the declaration with a
    // line of help. The template declares it; a builder who has not gets why and fix.
    await select(page, 'notify');
    const declared = page.getByLabel('Expected effect on the failure path');
    await expect(declared).toBeChecked();
    await expect(page.getByTestId('inspector-step')).toContainText('An alert or audit log meant to run when the flow fails: Check counts what it writes there as expected.');
    await declared.uncheck();
    await expect(declared).not.toBeChecked();
    // A step that is not a call (the Memory-free trigger here) does not offer it.
    await select(page, 'hook');
    await expect(page.getByLabel('Expected effect on the failure path')).toHaveCount(0);

    await page.getByTestId('check').click();
    const report = page.getByTestId('check-report');
    await expect(report).toHaveAttribute('data-passed', 'false');
    const replay = page.locator('[data-testid=check-row][data-check^="replay of the run failed"]');
    await expect(replay).toHaveAttribute('data-verdict', 'fail');
    const explain = page.locator('[data-testid=check-explain][data-check^="replay of the run failed"]');
    await expect(explain.getByTestId('check-why')).toHaveText(
      'Why notify wrote 1 slack message on the failure path and is not declared an expected effect, so a failure and its replay leave 1 hubspot deal, 1 slack message where one delivery leaves 1 hubspot deal',
    );
    await expect(explain.getByTestId('check-fix')).toContainText(
      'if notify is meant to run when the flow fails (an alert, an audit log), declare it: tick "Expected effect on the failure path" in its inspector',
    );
    // Only failed rows say why.
    await expect(page.getByTestId('check-why')).toHaveCount(1);
    await expect(page.getByTestId('check-fix')).toHaveCount(1);
    const shots = process.env.FLUXO_SHOTS_DIR;
    if (shots) {
      await explain.scrollIntoViewIfNeeded();
      await page.screenshot({ path: `${shots}/check-why-fix.png` });
    }

    // Ticked: Check passes, and the row says why the alert is no duplicate.
    await select(page, 'notify');
    await page.getByLabel('Expected effect on the failure path').check();
    await page.getByTestId('check').click();
    await expect(report).toHaveAttribute('data-passed', 'true');
    await expect(replay).toHaveAttribute('data-verdict', 'pass');
    await expect(replay.getByTestId('check-seen')).toHaveText(
      'replay succeeded; 1 hubspot deal, 1 slack message (1 slack message expected: notify is declared an expected effect on the failure path)',
    );
    await expect(page.locator('[data-testid=check-row][data-check^="forced failure"]')).toContainText(
      'the failure path wrote 1 slack message, expected: notify is declared an expected effect on the failure path',
    );
    await expect(page.getByTestId('check-why')).toHaveCount(0);
    if (shots) {
      await replay.scrollIntoViewIfNeeded();
      await page.screenshot({ path: `${shots}/check-expected-effect.png` });
    }
  });

  test('names a bad id path and a workflow with errors instead of a report', async ({ page }) => {
    await openEditor(page);
    await openWorkflow(page, 'invoice-paid-once');
    await pickSample(page, 'stripe/invoice.paid.json', /"type": "invoice.paid"/);

    // An id path the event does not have: the tab says which.
    await page.getByTestId('tab-check').click();
    await expect(page.getByTestId('check-empty')).toBeVisible();
    await page.getByTestId('check-id-paths').fill('id, nope.x');
    await page.getByTestId('check-again').click();
    const error = page.getByTestId('check-error');
    await expect(error).toHaveAttribute('data-code', 'invalid_check');
    await expect(error).toContainText('nope.x');

    // Remembered for this workflow; a good path gives a report again.
    await page.reload();
    await expect(page.getByTestId('editor')).toBeVisible();
    await page.getByTestId('tab-check').click();
    await expect(page.getByTestId('check-id-paths')).toHaveValue('id, nope.x');
    await page.getByTestId('check-id-paths').fill('id, data.object.id');
    await page.getByTestId('check-id-paths').press('Enter');
    await expect(page.getByTestId('check-report')).toHaveAttribute('data-passed', 'true');

    // A step that cannot be reached is a validation error: no report, the problems are named.
    await select(page, 'seen');
    await page.keyboard.press('Delete');
    await expect(node(page, 'seen')).toHaveCount(0);
    await page.getByTestId('check').click();
    await expect(error).toHaveAttribute('data-code', 'workflow_invalid');
    await expect(page.getByTestId('check-report')).toHaveCount(0);
    await expect(page.getByTestId('toast')).toContainText('before a check');
  });

  test('a scheduled poll is checked with overlapping polls and its item workflow', async ({ page }) => {
    await openEditor(page);
    await openWorkflow(page, 'polling-sync');
    await page.getByTestId('tab-check').click();
    await expect(page.getByTestId('check-event-hint')).toContainText('one item the poll lists');
    await expect(page.getByTestId('check-empty')).toContainText('overlapping polls');
    // A Stripe event stands for its charge, the item the poll lists.
    await pickSample(page, 'stripe/charge.succeeded.json', /"type": "charge.succeeded"/);
    await page.getByTestId('check').click();
    const report = page.getByTestId('check-report');
    await expect(report).toHaveAttribute('data-passed', 'true');
    for (const name of ['first poll (3 items in `payments`)', 'poll again, nothing new', 'a new item, then two overlapping polls before its run starts']) {
      const row = page.locator(`[data-testid=check-row][data-check="${name}"]`);
      await expect(row).toHaveAttribute('data-verdict', 'pass');
    }
    await expect(page.locator('[data-testid=check-row][data-check="poll again, nothing new"]')).toContainText('0 started, 3 duplicates');
    await expect(page.locator('[data-testid=check-row][data-check^="item run (`polling-sync-item`): engine killed"]')).toHaveAttribute('data-verdict', 'pass');
    await expect(page.getByTestId('check-notes')).toContainText('the poll lists `payments`');
  });
});
