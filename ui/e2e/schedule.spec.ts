// Schedules in the editor (issue 12), against a real `fluxo serve` on the real clock: the cron
// field says what an expression means and when it fires next (the server's preview), shows the
// server's problem when it does not parse, and a schedule made in the editor fires into history
// and shows its next run in the workflow list.
//
// The README's screenshot: `FLUXO_UPDATE_SCREENSHOTS=1 npx playwright test e2e/schedule.spec.ts -g screenshot`
// refreshes docs/screenshots/schedule.png; every run checks what it shows.

import { resolve } from 'node:path';
import { expect, test, type Page } from '@playwright/test';
import { dropStep, edge, newBlank, node, openEditor, select } from './helpers';
import { api, filter, openRuns } from './history-helpers';

/** Replace the blank workflow's manual trigger by a schedule trigger and a transform; returns the trigger's id. */
async function scheduledDraft(page: Page, workflowId?: string): Promise<{ trigger: string; transform: string }> {
  await newBlank(page);
  if (workflowId) {
    await page.keyboard.press('Escape');
    const wfId = page.getByTestId('inspector-workflow').getByTestId('workflow-id');
    await wfId.fill(workflowId);
    await wfId.press('Enter');
  }
  await select(page, 'start');
  await page.keyboard.press('Delete');
  await expect(node(page, 'start')).toHaveCount(0);
  const trigger = await dropStep(page, 'schedule_trigger', 150, 150);
  // A palette click adds the step after the selected one, wired to it.
  await page.getByTestId('palette-transform').click();
  const transform = await page.getByTestId('step-id').inputValue();
  await expect(edge(page, trigger, 'out', transform)).toHaveCount(1);
  await page.getByTestId('map-fields-add').click();
  await page.getByTestId('map-fields-key-0').fill('at');
  await page.getByTestId('map-fields-value-0').locator('textarea').fill('{{ input.scheduled_at }}');
  await select(page, trigger);
  return { trigger, transform };
}

test('the cron field describes the expression and lists its next 5 fire times; an invalid one shows the problem', async ({ page }) => {
  await openEditor(page);
  await scheduledDraft(page);
  const cron = page.getByTestId('cron-input');
  const preview = page.getByTestId('cron-preview');

  await cron.fill('*/2 * * * * *');
  await expect(preview.getByTestId('cron-description')).toContainText('2 seconds');
  await expect(preview.getByTestId('cron-next-time')).toHaveCount(5);
  // Two seconds apart, with seconds shown, soon.
  const times = await preview.getByTestId('cron-next-time').evaluateAll((els) => els.map((e) => Date.parse(e.getAttribute('title') ?? '')));
  for (let i = 1; i < times.length; i++) expect(times[i] - times[i - 1]).toBe(2000);
  expect(times[0] - Date.now()).toBeLessThan(5000);
  await expect(preview.getByTestId('cron-next-time').first()).toContainText(/\d\d:\d\d:\d\d \(UTC\)/);
  await expect(preview.getByTestId('cron-next-time').first()).toContainText(/in \d+ s|now/);
  await expect(page.getByTestId('cron-field').getByTestId('schedule-notice')).toHaveText('Schedules run while this server runs.');

  // The server's own problem, inline under the field; no description, no times, no crash.
  await cron.fill('61 * * * *');
  await expect(preview.getByTestId('cron-problem')).toContainText('`61 * * * *` is not a valid cron expression');
  await expect(preview.getByTestId('cron-next-time')).toHaveCount(0);
  await expect(preview.getByTestId('cron-description')).toHaveCount(0);
  await expect(cron).toHaveAttribute('aria-invalid', 'true');

  // A zone: the times on its wall clock; a zone that does not exist says so.
  await page.getByTestId('cron-preset-0_9_1_5').click();
  await expect(cron).toHaveValue('0 9 * * 1-5');
  await page.getByTestId('input-root_timezone').fill('Europe/Berlin');
  await expect(preview).toHaveAttribute('data-pending', 'false');
  await expect(preview.getByTestId('cron-description')).toHaveText('At 09:00, Monday through Friday');
  await expect(preview.getByTestId('cron-next-time')).toHaveCount(5);
  for (const t of await preview.getByTestId('cron-next-time').allTextContents()) expect(t).toMatch(/^(Mon|Tue|Wed|Thu|Fri) \d+ \w{3}, 09:00 \((CET|CEST)\)/);
  await page.getByTestId('input-root_timezone').fill('Mars/Olympus');
  await expect(preview.getByTestId('cron-zone-problem')).toContainText('`Mars/Olympus` is not an IANA time zone name');
});

test.describe.serial('a schedule made in the editor', () => {
  const id = `e2e-sched-${Date.now().toString(36)}`;
  test.afterAll(async ({ request }) => {
    // Stop the ticks: the server keeps running for the other specs.
    await api(request, 'DELETE', `/workflows/${id}`).catch(() => undefined);
  });

  test('fires every 2 seconds into history (trigger schedule) and shows its next run in the list', async ({ page }) => {
    await openEditor(page);
    await scheduledDraft(page, id);
    await page.getByTestId('cron-input').fill('*/2 * * * * *');
    await expect(page.getByTestId('cron-next-time')).toHaveCount(5);
    // Publish (saves the draft first): only a published schedule ticks.
    await page.getByTestId('publish').click();
    await expect(page.getByTestId('workflow-version')).not.toHaveText('new');

    // The workflow list: "next run in …" for this workflow.
    await page.getByTestId('tab-workflows').click();
    await expect(page.getByTestId(`workflow-next-run-${id}`)).toContainText(/next run (in \d+ s|now|due now)/);
    // The workflow's inspector says when and where it runs.
    await page.keyboard.press('Escape');
    await expect(page.getByTestId('workflow-schedule').getByTestId('workflow-next-run')).toContainText(/Next run (in \d+ s|due now) · \w{3} \d+ \w{3}, \d\d:\d\d:\d\d \(UTC\)/);
    await expect(page.getByTestId('workflow-schedule').getByTestId('workflow-next-run')).toContainText('*/2 * * * * * in UTC');

    // History: a run with trigger `schedule` for this workflow within ~10 s (the list is live).
    await openRuns(page);
    await filter(page, 'workflow', id);
    await filter(page, 'trigger', 'schedule');
    const rows = page.locator(`[data-testid="run-row"][data-workflow="${id}"][data-trigger="schedule"]`);
    await expect
      .poll(async () => rows.count(), { timeout: 12_000, message: 'a scheduled run in history' })
      .toBeGreaterThan(0);
    await expect(rows.first()).toBeVisible();
  });
});

test('screenshot: the cron field with its plain-words description and next fire times', async ({ page }) => {
  await page.setViewportSize({ width: 1280, height: 720 });
  await openEditor(page);
  await scheduledDraft(page);
  await page.getByTestId('workflow-name').fill('Weekday morning report');
  await page.getByTestId('step-name').fill('Weekdays 09:00');
  await page.getByTestId('cron-preset-0_9_1_5').click();
  await page.getByTestId('input-root_timezone').fill('Europe/Berlin');
  const preview = page.getByTestId('cron-preview');
  await expect(preview).toHaveAttribute('data-pending', 'false');
  await expect(preview.getByTestId('cron-next-time')).toHaveCount(5);
  // The cron field at the top of the inspector, its preview under it.
  await page.getByTestId('cron-field').evaluate((el) => el.closest('.form-group')?.scrollIntoView({ block: 'start' }));
  // Nothing of the preview is cut off: the list and the notice are inside the window.
  await expect(preview.getByTestId('cron-next-time').last()).toBeInViewport({ ratio: 1 });
  await expect(page.getByTestId('cron-field').getByTestId('schedule-notice')).toBeInViewport({ ratio: 1 });
  const box = (await preview.boundingBox())!;
  expect(box.x + box.width).toBeLessThanOrEqual(1280);
  await page.getByTestId('input-root_timezone').blur();
  await page.mouse.move(0, 719);
  const dir = process.env.FLUXO_UPDATE_SCREENSHOTS ? resolve(process.cwd(), '..', 'docs', 'screenshots') : process.env.FLUXO_SCREENSHOT_DIR;
  if (dir) await page.screenshot({ path: resolve(dir, 'schedule.png') });
});
