import { expect, test } from '@playwright/test';
import { startFluxo, type Fluxo } from './global-setup';

// A newcomer's first minute, on its own server: a fresh data dir, the shipped templates, and
// no environment variables at all. The first screen's one-click Dry Run must succeed.

let fluxo: Fluxo;
test.beforeAll(async () => {
  fluxo = await startFluxo();
});
test.afterAll(async () => {
  await fluxo?.stop();
});

test('on a fresh data dir with no env variables, the first screen\'s Dry Run succeeds', async ({ page }) => {
  await page.goto(`${fluxo.url}/#token=${fluxo.token}`);
  await expect(page.getByTestId('editor')).toBeVisible();
  await expect(page.locator('.react-flow__node').first()).toBeVisible();

  // The workflow opens with the sample event its template declares (settings.sample).
  await page.getByTestId('tab-input').click();
  await expect(page.getByTestId('run-input')).not.toHaveValue('{}');
  await expect(page.getByTestId('run-input')).toHaveValue(/"id": "evt_|"action": "opened"/);

  // One click.
  await page.getByTestId('dry-run').click();
  await expect(page.getByTestId('run-status')).toHaveText('succeeded');
  // Nothing was sent: the unset variables were stood in for, and the run says so.
  await expect(page.getByTestId('run-warnings')).toContainText('is not set: this dry run used');

  // The problems name every variable the settings lack, and lead to Settings.
  await page.getByTestId('tab-problems').click();
  const unset = page.locator('[data-testid=problem-row][data-code=env_unset]');
  await expect(unset.first()).toBeVisible();
  await expect(unset.first()).toContainText('Settings → Environment variables');
  await unset.first().getByTestId('problem-open-settings').click();
  await expect(page).toHaveURL(/#settings$/);
  // Settings says where webhooks reach this server now.
  await expect(page.getByTestId('settings-listening-now')).toContainText(`Listening now on ${fluxo.url}`);
});
