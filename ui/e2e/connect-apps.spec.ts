// Issue 35's "what it must show": a builder connects HubSpot in Settings (the fake OAuth flow of
// `fluxo sandbox`), adds Slack with a pasted bot token, builds "Stripe invoice.paid → HubSpot
// upsert contact → Slack message" from the palette without typing a URL or a header, dry-runs
// it, runs it live twice with the same event: one contact, one message.

import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, test, type Page } from '@playwright/test';
import { apiGet, baseUrl, edge, newBlank, node, openEditor, select } from './helpers';
import { startSandbox, type Sandbox } from './sandbox-helpers';

const WF = 'invoice-to-hubspot-slack-e2e';
const here = dirname(fileURLToPath(import.meta.url));

/** Stripe's invoice.paid fixture (tests/fixtures/payloads), with a customer email (HubSpot upserts on it). */
function invoicePaid(): Record<string, unknown> {
  const evt = JSON.parse(readFileSync(resolve(here, '../../tests/fixtures/payloads/stripe/invoice.paid.json'), 'utf8')) as {
    id: string;
    data: { object: Record<string, unknown> };
  };
  evt.data.object.customer_email ??= 'ada@example.com';
  evt.data.object.customer_name ??= 'Ada Lovelace';
  return evt;
}

let sandbox: Sandbox;
test.beforeAll(async () => {
  sandbox = await startSandbox();
});
test.afterAll(async () => {
  await sandbox?.close();
});

async function fillTemplate(page: Page, testId: string, value: string) {
  await page.locator(`#${testId.replace(/^input-/, '')}`).fill(value, { timeout: 10_000 });
}

test('connect HubSpot with OAuth, build invoice.paid → HubSpot → Slack from the palette, run twice: one contact, one message', async ({ page, request }) => {
  test.setTimeout(180_000);
  await openEditor(page);
  await page.getByTestId('view-settings').click();
  const card = page.getByTestId('settings-connections');

  // HubSpot through the sandbox's OAuth server: a base URL on this machine fills in its endpoints.
  await card.getByTestId('connection-app').selectOption('hubspot');
  await card.getByTestId('connection-mode-oauth').click();
  await card.getByTestId('connection-client-id').fill('fluxo-e2e');
  await card.getByTestId('connection-base-url').fill(`${sandbox.url}/hubspot`);
  await expect(card.getByTestId('connection-authorize-url')).toHaveValue(`${sandbox.url}/oauth/authorize`);
  await expect(card.getByTestId('connection-token-url')).toHaveValue(`${sandbox.url}/oauth/token`);
  const popupOpened = page.context().waitForEvent('page');
  await card.getByTestId('connection-oauth-connect').click();
  const popup = await popupOpened;
  // The fake approves at once and redirects to fluxo serve's callback, which finishes the flow.
  await expect(popup.locator('#message')).toHaveText('Connected HubSpot as hubspot-main. You can close this window.');
  await popup.close();
  await expect(card.getByTestId('connection-oauth-result')).toHaveText('Connected HubSpot as hubspot-main.');
  const hubRow = card.getByTestId('connection-hubspot-main');
  await expect(hubRow).toContainText('oauth2 access_token=••••');
  await expect(hubRow).toContainText(`token_url=${sandbox.url}/oauth/token`);
  // Test connection: the app's test request with the OAuth token.
  await hubRow.getByTestId('connection-test-hubspot-main').click();
  await expect(hubRow.getByTestId('connection-test-result-hubspot-main')).toHaveAttribute('data-ok', 'true');
  await expect(hubRow.getByTestId('connection-test-result-hubspot-main')).toContainText('HubSpot accepted the credentials (200');
  // The API answers it masked.
  const listed = await apiGet<{ connections: { id: string; credential: Record<string, unknown> }[] }>(request, '/connections');
  const hub = listed.connections.find((c) => c.id === 'hubspot-main')!;
  expect(hub.credential.kind).toBe('oauth2');
  expect(String(hub.credential.access_token)).toMatch(/^••••/);
  expect(JSON.stringify(listed)).not.toContain('sbx_at_');

  // Slack: paste a sandbox bot token.
  await card.getByTestId('connection-app').selectOption('slack');
  await expect(card.getByTestId('connection-id')).toHaveValue('slack-main');
  await card.getByTestId('connection-secret').fill('xoxb-sandbox-e2e-0123456789');
  await card.getByTestId('connection-base-url').fill(`${sandbox.url}/slack`);
  await card.getByTestId('connection-save').click();
  const slackRow = card.getByTestId('connection-slack-main');
  await expect(slackRow).toContainText('bearer token=••••6789');
  await slackRow.getByTestId('connection-test-slack-main').click();
  await expect(slackRow.getByTestId('connection-test-result-slack-main')).toHaveAttribute('data-ok', 'true');
  await card.scrollIntoViewIfNeeded();
  await card.screenshot({ path: '../docs/screenshots/connect-hubspot.png' });

  // Build the flow from the palette: a webhook trigger, then two app operations.
  await page.getByTestId('view-editor').click();
  await newBlank(page);
  await page.keyboard.press('Escape');
  const wfId = page.getByTestId('inspector-workflow').getByTestId('workflow-id');
  await wfId.fill(WF);
  await wfId.press('Enter');
  await page.getByTestId('workflow-name').fill('Stripe invoice paid → HubSpot contact → Slack message');
  await select(page, 'start');
  await page.keyboard.press('Delete');
  await expect(node(page, 'start')).toHaveCount(0);
  await page.getByTestId('tab-steps').click();
  await page.getByTestId('palette-webhook_trigger').click();
  const hook = await page.getByTestId('step-id').inputValue();
  await page.getByTestId('input-root_dedupe_key').fill('{{ input.id }}');

  await page.getByTestId('palette-op-hubspot-upsert_contact').click();
  const contact = await page.getByTestId('step-id').inputValue();
  await expect(edge(page, hook, 'out', contact)).toHaveCount(1);
  await expect(node(page, contact).getByTestId('node-dedupe-badge')).toHaveText('upsert on email');
  await page.locator('#root_connection').selectOption('hubspot-main');
  await fillTemplate(page, 'input-root_params_email', '{{ input.data.object.customer_email }}');
  await fillTemplate(page, 'input-root_params_firstname', 'Ada');

  await page.getByTestId('palette-op-slack-post_message').click();
  const message = await page.getByTestId('step-id').inputValue();
  await expect(edge(page, contact, 'out', message)).toHaveCount(1);
  await expect(node(page, message).getByTestId('node-dedupe-badge')).toHaveText('repeat updates');
  await page.locator('#root_connection').selectOption('slack-main');
  await fillTemplate(page, 'input-root_params_channel', '#general');
  await fillTemplate(page, 'input-root_params_text', 'Invoice {{ input.data.object.id }} paid by {{ input.data.object.customer_email }}');

  // Dry run with the event: nothing reaches the apps.
  const event = invoicePaid();
  await page.getByTestId('tab-input').click();
  await page.getByTestId('run-input').fill(JSON.stringify(event, null, 2));
  await page.getByTestId('dry-run').click();
  await expect(page.getByTestId('run-status')).toHaveText('succeeded');
  for (const id of [hook, contact, message]) await expect(node(page, id)).toHaveAttribute('data-status', 'succeeded');
  const vendor = async (app: string) => (await (await request.get(`${sandbox.url}/_sandbox/vendors/${app}`)).json()) as Record<string, unknown>;
  expect((await vendor('hubspot')).contacts).toEqual([]);
  await page.screenshot({ path: '../docs/screenshots/connect-apps-flow.png' });

  // Publish: webhooks run the published version.
  await page.getByTestId('publish').click();
  await expect(page.getByTestId('workflow-version')).toHaveText('v1');

  // Live, twice, the same event (Stripe retries a delivery): the second is a duplicate.
  for (let i = 0; i < 2; i++) {
    const r = await request.post(`${baseUrl()}/hooks/${WF}`, { headers: { 'Content-Type': 'application/json' }, data: event });
    expect(r.status(), await r.text()).toBeLessThan(300);
  }
  await expect(async () => {
    const contacts = (await vendor('hubspot')).contacts as { properties: Record<string, string> }[];
    expect(contacts).toHaveLength(1);
    expect(contacts[0].properties.email).toBe('ada@example.com');
  }).toPass({ timeout: 20_000 });
  await expect(async () => {
    const channels = (await vendor('slack')).channels as { name: string; messages: { text: string }[] }[];
    const general = channels.find((c) => c.name === 'general')!;
    expect(general.messages).toHaveLength(1);
    expect(general.messages[0].text).toContain('paid by ada@example.com');
  }).toPass({ timeout: 20_000 });
  // Still one of each a moment later (the duplicate did not run late).
  await page.waitForTimeout(1000);
  expect(((await vendor('hubspot')).contacts as unknown[]).length).toBe(1);
});
