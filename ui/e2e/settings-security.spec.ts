// Settings and the security fields (issue 13) against the real `fluxo serve` of
// global-setup.ts: the Settings view saves the whole document back (PUT replaces it), so
// fields set through the API (allowed_hosts, outbound_allow, secret_env) and stored secret
// values must survive a save of an unrelated change; secrets are write-only in the form.

import { request as httpRequest } from 'node:http';
import { resolve } from 'node:path';
import { expect, test, type Page } from '@playwright/test';
import { baseUrl, token } from './helpers';
import { api, startMock, startRun, type Mock } from './history-helpers';

interface Settings {
  env: Record<string, string>;
  secret_env?: string[];
  retention_runs?: number;
  retention_days?: number;
  listener_addr?: string;
  outbound_allow?: string[];
  allowed_hosts?: string[];
}
interface View {
  settings: Settings;
  secret_names?: string[];
}

const FLOW = 'e2e-secret-echo';
const SLACK = 'E2E_SLACK_WEBHOOK_URL';
const SLACK_VALUE = 'https://hooks.slack.com/services/T0/B0/e2e-slack-1234';
const TOKEN_VAR = 'E2E_API_TOKEN';
const TOKEN_VALUE = 'tok-e2e-abcdefgh5678';
const PLAIN = 'E2E_CRM_HOOK_URL';
const PLAIN_VALUE = 'https://crm.example.com/hooks/e2e-9999';
const HOSTS = ['fluxo.e2e.test', 'tunnel.e2e.test:8443'];
const OUTBOUND = ['10.0.0.0/8', 'crm.internal'];

/** The answer's status to GET `path` with this `Host` header (Node's http: a browser client would not let us set it). */
function statusWithHost(path: string, host: string): Promise<number> {
  const u = new URL(`${baseUrl()}${path}`);
  return new Promise((ok, fail) => {
    const req = httpRequest({ host: u.hostname, port: u.port, path: u.pathname, headers: { Host: host, Authorization: `Bearer ${token()}` } }, (res) => {
      res.resume();
      ok(res.statusCode ?? 0);
    });
    req.on('error', fail);
    req.end();
  });
}

async function openSettings(page: Page): Promise<void> {
  await page.goto(`${baseUrl()}/#token=${token()}`);
  await page.getByTestId('view-settings').click();
  await expect(page.getByTestId('settings-view')).toBeVisible();
}

/** The env row of variable `name`. */
async function envRow(page: Page, name: string) {
  const names = page.getByTestId('env-name');
  await expect(names.first()).toBeVisible();
  const all = await names.evaluateAll((els) => els.map((e) => (e as HTMLInputElement).value));
  expect(all).toContain(name);
  return page.getByTestId('env-row').nth(all.indexOf(name));
}

/** The entries of a list card, as shown. */
async function listValues(page: Page, card: string): Promise<string[]> {
  const inputs = page.getByTestId(card).getByTestId('list-value');
  await expect(inputs.first()).toBeVisible();
  return inputs.evaluateAll((els) => els.map((e) => (e as HTMLInputElement).value));
}

/** Save, and wait for the server's answer: the button is disabled while the save is in flight
 * too, so a disabled button alone does not mean the settings are stored. */
async function save(page: Page): Promise<void> {
  const stored = page.waitForResponse(
    (r) => r.request().method() === 'PUT' && new URL(r.url()).pathname === '/api/v1/settings',
  );
  await page.getByTestId('settings-save').click();
  expect((await stored).ok()).toBe(true);
  await expect(page.getByTestId('settings-save')).toBeDisabled();
  await expect(page.getByTestId('settings-error')).toHaveCount(0);
}

let original: Settings;
let mock: Mock;

test.describe.serial('settings: security fields survive the form; secrets are write-only', () => {
  test.beforeAll(async ({ request }) => {
    original = (await api<View>(request, 'GET', '/settings')).settings;
    mock = await startMock();
    mock.mode = 'ok';
    // Set through the API, as a script or the settings file would.
    await api(request, 'PUT', '/settings', {
      ...original,
      env: { ...original.env, [SLACK]: SLACK_VALUE, [TOKEN_VAR]: TOKEN_VALUE, [PLAIN]: PLAIN_VALUE, E2E_SEC_MOCK: mock.url },
      secret_env: [...new Set([...(original.secret_env ?? []), SLACK])].sort(),
      allowed_hosts: HOSTS,
      outbound_allow: OUTBOUND,
    });
    // A flow that sends the secret to the mock: what a destination receives is the real value.
    await api(request, 'PUT', `/workflows/${FLOW}`, {
      id: FLOW,
      name: 'Secret echo (e2e)',
      version: 1,
      // A workflow reads only the secrets it declares; a secret renders whole in a header.
      secrets: [SLACK],
      steps: [
        { id: 'start', kind: 'manual_trigger', position: { x: 0, y: 0 }, config: {} },
        {
          id: 'send',
          kind: 'http_request',
          position: { x: 280, y: 0 },
          config: { method: 'POST', url: '{{ env.E2E_SEC_MOCK }}/echo', headers: { 'X-Slack': `{{ env.${SLACK} }}` }, body: {}, timeout_s: 5 },
        },
      ],
      edges: [{ from: 'start', to: 'send' }],
    });
  });

  test.afterAll(async ({ request }) => {
    await api(request, 'DELETE', `/workflows/${FLOW}`).catch(() => {});
    // Masked values of the original document resolve to the stored ones.
    const now = (await api<View>(request, 'GET', '/settings')).settings;
    const env = Object.fromEntries(Object.keys(original.env).map((k) => [k, now.env[k] ?? original.env[k]]));
    await api(request, 'PUT', '/settings', { ...original, env });
    await mock?.close();
  });

  test('saving an unrelated change keeps allowed_hosts, outbound_allow, secret_env and stored secrets', async ({ page, request }) => {
    // Before: the server answers to the extra names.
    expect(await statusWithHost('/api/v1/settings', 'fluxo.e2e.test')).toBe(200);
    expect(await statusWithHost('/api/v1/settings', 'not-listed.e2e.test')).toBe(421);

    await openSettings(page);
    // The lists show what the API set.
    expect(await listValues(page, 'settings-hosts')).toEqual(HOSTS);
    expect(await listValues(page, 'settings-outbound')).toEqual(OUTBOUND);
    // Secrets: write-only fields that show the mask, never the value.
    for (const [name, mask] of [
      [SLACK, '••••1234'],
      [TOKEN_VAR, '••••5678'],
    ]) {
      const row = await envRow(page, name);
      await expect(row).toHaveAttribute('data-secret', 'true');
      const value = row.getByTestId('env-value');
      await expect(value).toHaveAttribute('type', 'password');
      await expect(value).toHaveValue('');
      await expect(value).toHaveAttribute('placeholder', new RegExp(`^${mask}`));
    }
    // SLACK is secret because settings say so (the checkbox); the token by its name (checked, fixed).
    await expect((await envRow(page, SLACK)).getByTestId('env-secret')).toBeChecked();
    await expect((await envRow(page, SLACK)).getByTestId('env-secret')).toBeEnabled();
    await expect((await envRow(page, TOKEN_VAR)).getByTestId('env-secret')).toBeChecked();
    await expect((await envRow(page, TOKEN_VAR)).getByTestId('env-secret')).toBeDisabled();
    await expect((await envRow(page, PLAIN)).getByTestId('env-value')).toHaveValue(PLAIN_VALUE);
    expect(await page.content()).not.toContain(SLACK_VALUE);

    // An unrelated change.
    await page.getByTestId('settings-retention-runs').fill('777');
    await save(page);

    const s = (await api<View>(request, 'GET', '/settings')).settings;
    expect(s.retention_runs).toBe(777);
    expect(s.allowed_hosts).toEqual(HOSTS);
    expect(s.outbound_allow).toEqual(OUTBOUND);
    expect(s.secret_env).toContain(SLACK);
    expect(s.env[SLACK]).toBe('••••1234');
    expect(s.env[TOKEN_VAR]).toBe('••••5678');
    expect(s.env[PLAIN]).toBe(PLAIN_VALUE);
    // Still answered on the listed name (the bug answered 421 here), still not on others.
    expect(await statusWithHost('/api/v1/settings', 'fluxo.e2e.test')).toBe(200);
    expect(await statusWithHost('/api/v1/settings', 'tunnel.e2e.test:8443')).toBe(200);
    expect(await statusWithHost('/api/v1/settings', 'not-listed.e2e.test')).toBe(421);
    // The stored value itself survived, not its mask: a destination receives it.
    const run = await startRun(request, FLOW, {});
    expect(run.status).toBe('succeeded');
    expect(mock.requests.at(-1)!.headers['x-slack']).toBe(SLACK_VALUE);
  });

  test('the Secret checkbox flags a variable: secret_env lists it and its value comes back masked', async ({ page, request }) => {
    await openSettings(page);
    const row = await envRow(page, PLAIN);
    await expect(row.getByTestId('env-secret')).not.toBeChecked();
    await row.getByTestId('env-secret').check();
    // Hidden at once, before saving.
    await expect(row.getByTestId('env-value')).toHaveAttribute('type', 'password');
    await save(page);

    const v = await api<View>(request, 'GET', '/settings');
    expect(v.settings.secret_env).toContain(PLAIN);
    expect(v.settings.secret_env).toContain(SLACK);
    expect(v.secret_names).toContain(PLAIN);
    expect(v.settings.env[PLAIN]).toBe('••••9999');
    // The form now shows it as a stored secret.
    const after = await envRow(page, PLAIN);
    await expect(after.getByTestId('env-value')).toHaveValue('');
    await expect(after.getByTestId('env-value')).toHaveAttribute('placeholder', /^••••9999/);
    // Unflagging is the same checkbox; the value is kept and readable again.
    await after.getByTestId('env-secret').uncheck();
    await save(page);
    const w = await api<View>(request, 'GET', '/settings');
    expect(w.settings.secret_env ?? []).not.toContain(PLAIN);
    expect(w.settings.env[PLAIN]).toBe(PLAIN_VALUE);
    await expect((await envRow(page, PLAIN)).getByTestId('env-value')).toHaveValue(PLAIN_VALUE);
  });

  test('a placeholder that is not the stored mask is refused, shown next to its variable', async ({ page, request }) => {
    await openSettings(page);
    const row = await envRow(page, TOKEN_VAR);
    await row.getByTestId('env-value').fill('••••0000');
    await expect(row.getByTestId('env-keep')).toBeVisible();
    await page.getByTestId('settings-save').click();

    await expect(row.getByTestId('env-error')).toContainText(`env.${TOKEN_VAR}`);
    await expect(row.getByTestId('env-error')).toContainText('masked placeholder');
    await expect(row.getByTestId('env-value')).toHaveClass(/is-invalid/);
    await expect(page.getByTestId('settings-error')).toBeVisible();
    expect((await api<View>(request, 'GET', '/settings')).settings.env[TOKEN_VAR]).toBe('••••5678');

    // Keep the stored value: the error goes, the save passes, the value is unchanged.
    await row.getByTestId('env-keep').click();
    await expect(row.getByTestId('env-error')).toHaveCount(0);
    await page.getByTestId('settings-retention-runs').fill('778');
    await save(page);
    const s = (await api<View>(request, 'GET', '/settings')).settings;
    expect(s.env[TOKEN_VAR]).toBe('••••5678');
    expect(s.retention_runs).toBe(778);
  });

  test('host names and outbound entries are edited as lists; a URL is refused before saving', async ({ page, request }) => {
    await openSettings(page);
    const hosts = page.getByTestId('settings-hosts');
    await hosts.getByTestId('list-add').click();
    await hosts.getByTestId('list-value').last().fill('https://proxy.e2e.test/');
    await expect(hosts.getByTestId('list-error')).toContainText('without http');
    await expect(page.getByTestId('settings-save')).toBeDisabled();
    await hosts.getByTestId('list-value').last().fill('proxy.e2e.test');
    await hosts.getByTestId('list-remove').first().click();

    const outbound = page.getByTestId('settings-outbound');
    await outbound.getByTestId('list-add').click();
    await outbound.getByTestId('list-value').last().fill('not a host');
    await expect(outbound.getByTestId('list-error')).toContainText('no spaces');
    await outbound.getByTestId('list-value').last().fill('192.168.1.0/33');
    // Only the server knows every rule: its refusal lands on the entry.
    await page.getByTestId('settings-save').click();
    await expect(outbound.getByTestId('list-error')).toContainText('`192.168.1.0/33`: `/33` is not a prefix length from 0 to 32');
    await outbound.getByTestId('list-value').last().fill('192.168.1.0/24');
    await save(page);

    const s = (await api<View>(request, 'GET', '/settings')).settings;
    expect(s.allowed_hosts).toEqual(['tunnel.e2e.test:8443', 'proxy.e2e.test']);
    expect(s.outbound_allow).toEqual([...OUTBOUND, '192.168.1.0/24']);
    expect(s.env[SLACK]).toBe('••••1234');
    expect(await statusWithHost('/api/v1/settings', 'proxy.e2e.test')).toBe(200);
    expect(await statusWithHost('/api/v1/settings', 'fluxo.e2e.test')).toBe(421);
  });
});

// The README's screenshot of the three cards: `FLUXO_UPDATE_SCREENSHOTS=1 npx playwright test
// e2e/settings-security.spec.ts -g screenshot` refreshes docs/screenshots/settings-security.png
// (1440x900); every run checks what it shows.
test.describe('settings screenshot', () => {
  test('screenshot: host names, secret env variables, outbound allowlist', async ({ page, request }) => {
    const before = (await api<View>(request, 'GET', '/settings')).settings;
    await api(request, 'PUT', '/settings', {
      ...before,
      env: {
        ...before.env,
        CRM_URL: 'https://crm.example.com',
        SLACK_WEBHOOK_URL: 'https://hooks.slack.com/services/T000/B000/XXXXXXXX8f2c',
        STRIPE_API_KEY: 'sk_live_51Hxxxxxxxxxxxxxxxxxxx4242',
      },
      secret_env: [...new Set([...(before.secret_env ?? []), 'SLACK_WEBHOOK_URL'])].sort(),
      allowed_hosts: ['fluxo.example.com'],
      outbound_allow: ['crm.internal', '10.0.0.0/8'],
    });
    try {
      await page.setViewportSize({ width: 1440, height: 900 });
      await openSettings(page);
      await page.getByTestId('settings-hosts').evaluate((e) => e.scrollIntoView({ block: 'start' }));
      await page.mouse.move(0, 0);
      await expect(page.getByTestId('settings-hosts').getByTestId('list-value').first()).toHaveValue('fluxo.example.com');
      const html = await page.content();
      expect(html, 'no secret value reaches the page').not.toContain('sk_live_51Hxxxxxxxxxxxxxxxxxxx4242');
      expect(html).not.toContain('XXXXXXXX8f2c');
      if (process.env.FLUXO_UPDATE_SCREENSHOTS) {
        await page.screenshot({ path: resolve(process.cwd(), '..', 'docs', 'screenshots', 'settings-security.png') });
      }
    } finally {
      await api(request, 'PUT', '/settings', before);
    }
  });
});
