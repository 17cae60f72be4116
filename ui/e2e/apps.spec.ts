import { expect, test } from '@playwright/test';
import { newBlank, node, openEditor } from './helpers';

test('an app operation from the palette: its node says how a repeat dedupes, its fields come from the connector', async ({ page }) => {
  await openEditor(page);
  await newBlank(page);
  const apps = page.getByTestId('palette-apps');
  await expect(apps.getByTestId('palette-app-hubspot')).toBeVisible();
  // Every write in the palette carries its strategy; a write that cannot dedupe says so.
  await expect(page.getByTestId('palette-op-hubspot-create_deal').getByTestId('dedupe-badge')).toHaveText('not safe to repeat');
  await expect(page.getByTestId('palette-op-hubspot-upsert_contact').getByTestId('dedupe-badge')).toHaveText('upsert on email');

  await page.getByTestId('palette-op-hubspot-create_contact').click();
  const n = node(page, 'action');
  await expect(n).toBeVisible();
  await expect(n.locator('.fx-node-summary')).toHaveText('HubSpot · Create a contact');
  await expect(n.getByTestId('node-dedupe-badge')).toHaveText('409 is exists');

  // The inspector asks for the operation's own fields, titled by the connector.
  const inspector = page.getByTestId('inspector-step');
  await expect(inspector).toContainText('Fields');
  await expect(inspector).toContainText('Email');
  await expect(inspector).toContainText('First name');
  await expect(inspector).toContainText('`Create a contact` needs `email`');
  await expect(inspector).toContainText('No connection for this app yet: add one in Settings → Connections.');
  await page.screenshot({ path: '../docs/screenshots/app-action.png' });

  // "Connect HubSpot" takes the builder to Settings → Connections, the form set to HubSpot.
  const connect = inspector.getByTestId('inspector-connect');
  await expect(connect).toHaveText(/^Connect HubSpot/);
  await connect.click();
  const card = page.getByTestId('settings-connections');
  await expect(card).toBeVisible();
  await expect(card.getByTestId('connection-app')).toHaveValue('hubspot');
  await expect(card.getByTestId('connection-id')).toHaveValue('hubspot-main');
  await expect(card.getByTestId('connection-app')).toBeFocused();
  await page.getByTestId('view-editor').click();

  // The search finds operations by app and title.
  await page.getByTestId('palette-search').fill('slack');
  await expect(page.getByTestId('palette-op-slack-post_message').getByTestId('dedupe-badge')).toHaveText('repeat updates');
  await expect(page.getByTestId('palette-app-hubspot')).toHaveCount(0);
});
