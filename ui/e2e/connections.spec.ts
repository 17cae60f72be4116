import { expect, test } from '@playwright/test';
import { apiGet, openEditor } from './helpers';

test('Settings → Connections: add a HubSpot token, shown masked only, then removed', async ({ page, request }) => {
  await openEditor(page);
  await page.getByTestId('view-settings').click();
  const card = page.getByTestId('settings-connections');
  await expect(card).toBeVisible();
  await card.getByTestId('connection-app').selectOption('hubspot');
  await expect(card.getByTestId('connection-id')).toHaveValue('hubspot-main');
  await expect(card).toContainText('Private apps');
  await card.getByTestId('connection-secret').fill('pat-na1-e2e-0123456789abcd');
  await card.getByTestId('connection-base-url').fill('http://127.0.0.1:9/hubspot');
  await card.getByTestId('connection-save').click();
  const row = card.getByTestId('connection-hubspot-main');
  await expect(row).toContainText('bearer token=••••abcd');
  await expect(card).not.toContainText('pat-na1-e2e');
  await card.scrollIntoViewIfNeeded();
  await card.screenshot({ path: '../docs/screenshots/connections.png' });
  // The API answers the mask too, never the token.
  const list = await apiGet<{ connections: unknown[] }>(request, '/connections');
  expect(JSON.stringify(list)).not.toContain('pat-na1-e2e');
  // The connection is offered to an App action of the same app.
  await page.getByTestId('view-editor').click();
  await page.getByTestId('palette-op-hubspot-create_contact').click();
  const picker = page.getByTestId('inspector-step').locator('select').filter({ hasText: 'hubspot-main' });
  await expect(picker).toHaveCount(1);
  await picker.selectOption({ label: 'hubspot-main' });
  await expect(page.getByTestId('inspector-step').getByText('No connection for this app yet')).toHaveCount(0);
  await page.getByTestId('view-settings').click();
  // A bad id is refused with the field named.
  await card.getByTestId('connection-app').selectOption('hubspot');
  await card.getByTestId('connection-id').fill('Bad Id');
  await card.getByTestId('connection-secret').fill('x');
  await card.getByTestId('connection-save').click();
  await expect(card.getByTestId('connection-error')).toContainText('id');
  await row.getByTestId('connection-remove-hubspot-main').click();
  await expect(row).toHaveCount(0);
});
