import { resolve } from 'node:path';
import { expect, test, type APIRequestContext } from '@playwright/test';
import { apiGet, baseUrl, openEditor, openWorkflow, select, settled, token } from './helpers';

// Issue 14, item 2: Save keeps a draft, Publish makes it live. A workflow made invalid and
// saved keeps serving its last published version to webhooks.

const ID = `drafts-e2e-${Date.now().toString(36)}`;
const auth = () => ({ Authorization: `Bearer ${token()}` });

interface Run {
  id: string;
  status: string;
  workflow_version: number;
  steps: { step_id: string; output?: Record<string, unknown> }[];
}

/** Deliver a GitHub "issue closed" event to the workflow's webhook (202) and wait for its run. */
async function deliver(request: APIRequestContext, n: number): Promise<Run> {
  const r = await request.post(`${baseUrl()}/hooks/${ID}`, {
    data: { action: 'closed', issue: { id: 9000 + n, number: n }, repository: { full_name: 'acme/app' } },
  });
  expect(r.status(), await r.text()).toBe(202);
  const { run_id } = (await r.json()) as { run_id: string };
  let run: Run | undefined;
  await expect
    .poll(async () => {
      run = await apiGet<Run>(request, `/runs/${run_id}`);
      return run.status;
    })
    .toBe('succeeded');
  return run!;
}

const ignored = (run: Run) => run.steps.find((s) => s.step_id === 'ignore')?.output?.ignored;

test.afterAll(async ({ request }) => {
  await request.delete(`${baseUrl()}/api/v1/workflows/${ID}`, { headers: auth() }).catch(() => undefined);
});

test('an invalid draft never goes live: webhooks keep the published version until a fixed draft is published', async ({ page, request }) => {
  await openEditor(page);
  // A template, under an id of its own, saved (a draft: not live) and published (v1).
  await page.getByTestId('tab-workflows').click();
  await page.getByTestId('new-workflow').click();
  await page.getByTestId('new-from-github-issue-to-ticket').click();
  await page.keyboard.press('Escape');
  const wfId = page.getByTestId('inspector-workflow').getByTestId('workflow-id');
  await wfId.fill(ID);
  await wfId.press('Enter');
  await page.getByTestId('save').click();
  await expect(page.getByTestId('draft-state')).toHaveText('Draft, never published');
  const early = await request.post(`${baseUrl()}/hooks/${ID}`, { data: { action: 'closed' } });
  expect(early.status(), 'a draft has no webhook').toBe(404);
  await page.getByTestId('publish').click();
  await expect(page.getByTestId('workflow-version')).toHaveText('v1');
  await expect(page.getByTestId('draft-state')).toHaveText('Live v1 · no changes');
  await expect(page.getByTestId('publish')).toBeDisabled();

  // Made invalid (an unclosed template) and saved: a draft; Publish is disabled, saying why.
  await select(page, 'ignore');
  await page.getByTestId('map-fields-value-0').locator('textarea').fill('issue action {{ input.action');
  await settled(page);
  await expect(page.getByTestId('validation-status')).toHaveAttribute('data-state', 'error');
  await page.getByTestId('save').click();
  await expect(page.getByTestId('dirty-dot')).toHaveCount(0);
  await expect(page.getByTestId('draft-state')).toHaveText('Live v1 · editing a draft (unpublished changes)');
  await expect(page.getByTestId('draft-state')).toHaveAttribute('data-state', 'draft');
  await expect(page.getByTestId('publish')).toBeDisabled();
  await expect(page.getByTestId('publish-tooltip')).toHaveAttribute('title', 'Fix 1 error to publish');
  await expect(page.getByTestId('run-live')).toHaveAttribute('title', /live v1: your draft is not published/);
  await expect(page.getByTestId('workflow-version')).toHaveText('v1');

  // The webhook is still accepted, and runs v1 (the published text of `ignore`).
  const live = await apiGet<{ version: number; steps: { id: string; config: { fields?: Record<string, string> } }[] }>(request, `/workflows/${ID}`);
  expect(live.version).toBe(1);
  expect(live.steps.find((s) => s.id === 'ignore')?.config.fields?.ignored).toBe('issue action {{ input.action }}');
  const before = await deliver(request, 1);
  expect(before.workflow_version).toBe(1);
  expect(ignored(before)).toBe('issue action closed');

  // Fixed and published (Publish saves the dirty canvas first): live v2, the draft gone.
  await page.getByTestId('map-fields-value-0').locator('textarea').fill('issue action {{ input.action }} (fixed)');
  await settled(page);
  await expect(page.getByTestId('publish')).toBeEnabled();
  await page.getByTestId('publish').click();
  await expect(page.getByTestId('workflow-version')).toHaveText('v2');
  await expect(page.getByTestId('draft-state')).toHaveText('Live v2 · no changes');
  const draft = await request.get(`${baseUrl()}/api/v1/workflows/${ID}/draft`, { headers: auth() });
  expect(draft.status()).toBe(404);
  const after = await deliver(request, 2);
  expect(after.workflow_version).toBe(2);
  expect(ignored(after)).toBe('issue action closed (fixed)');

  // Reload: the live version, nothing unpublished.
  await page.reload();
  await expect(page.getByTestId('editor')).toBeVisible();
  await expect(page.getByTestId('inspector-workflow').getByTestId('workflow-id')).toHaveValue(ID);
  await expect(page.getByTestId('draft-state')).toHaveText('Live v2 · no changes');

  // Discard draft: a saved change, discarded after a confirm, returns to live v2.
  await page.getByTestId('workflow-name').fill('Renamed in a draft');
  await page.getByTestId('save').click();
  await expect(page.getByTestId('draft-state')).toHaveAttribute('data-state', 'draft');
  await page.reload();
  await expect(page.getByTestId('workflow-name')).toHaveValue('Renamed in a draft');
  await expect(page.getByTestId('draft-state')).toHaveText('Live v2 · editing a draft (unpublished changes)');
  await page.getByTestId('discard-draft').click();
  await expect(page.getByTestId('confirm-dialog')).toContainText('back to live v2');
  await page.getByTestId('confirm-ok').click();
  await expect(page.getByTestId('draft-state')).toHaveText('Live v2 · no changes');
  await expect(page.getByTestId('workflow-name')).not.toHaveValue('Renamed in a draft');
  await expect(page.getByTestId('discard-draft')).toHaveCount(0);
});

test('screenshot: the top bar reads the draft state in full, at 1440 and 1280 wide', async ({ page }) => {
  await openEditor(page);
  await openWorkflow(page, ID);
  await select(page, 'ignore');
  await page.getByTestId('map-fields-value-0').locator('textarea').fill('issue action {{ input.action');
  await settled(page);
  await page.getByTestId('save').click();
  const state = page.getByTestId('draft-state');
  await expect(state).toHaveText('Live v2 · editing a draft (unpublished changes)');
  for (const width of [1280, 1440]) {
    await page.setViewportSize({ width, height: width === 1280 ? 720 : 900 });
    // The words are not cut off, and Publish is in the window.
    expect(await state.evaluate((el) => el.scrollWidth <= el.clientWidth)).toBe(true);
    await expect(page.getByTestId('publish')).toBeInViewport({ ratio: 1 });
  }
  await page.getByTestId('publish-tooltip').hover();
  const dir = process.env.FLUXO_UPDATE_SCREENSHOTS ? resolve(process.cwd(), '..', 'docs', 'screenshots') : process.env.FLUXO_SCREENSHOT_DIR;
  if (dir) await page.getByTestId('topbar').screenshot({ path: resolve(dir, 'drafts.png') });
});
