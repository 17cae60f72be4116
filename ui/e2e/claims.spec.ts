// Claims made plain (issue 37, point 8), against the real `fluxo serve` of global-setup.ts: a
// blank workflow opens with no trigger and asks for one; the palette's "Claim the event" adds a
// Memory write that never overwrites, keyed by the trigger's event id, kept "4d"; its TTL
// takes units (a bad one is named, a good one saved as written), and the engine runs it.

import { mkdirSync } from 'node:fs';
import { expect, test } from '@playwright/test';
import { apiGet, baseUrl, edge, node, openEditor, select, token } from './helpers';

const ID = 'e2e-claims-made-plain';
const SHOTS = '/tmp/shots';

interface Step {
  id: string;
  kind: string;
  name?: string;
  config: Record<string, unknown>;
}

test('a blank workflow asks for its trigger; Claim the event is a claim keyed by the event id, its TTL in units', async ({ page, request }) => {
  await openEditor(page);
  await page.getByTestId('tab-workflows').click();
  await page.getByTestId('new-workflow').click();
  await expect(page.getByTestId('new-blank')).toContainText('pick how it starts');
  await page.getByTestId('new-blank').click();
  const confirm = page.getByTestId('confirm-dialog');
  if (await confirm.isVisible()) await page.getByTestId('confirm-ok').click();
  await expect(page.getByTestId('workflow-version')).toHaveText('new');

  // No trigger to delete first: the canvas is empty and asks how the workflow starts.
  await expect(page.locator('.react-flow__node')).toHaveCount(0);
  const prompt = page.getByTestId('trigger-prompt');
  await expect(prompt).toContainText('How does this workflow start?');
  await expect(prompt.getByTestId('pick-trigger-manual_trigger')).toBeVisible();
  await expect(prompt.getByTestId('pick-trigger-schedule_trigger')).toBeVisible();
  mkdirSync(SHOTS, { recursive: true });
  await page.screenshot({ path: `${SHOTS}/blank-pick-a-trigger.png` });
  await prompt.getByTestId('pick-trigger-webhook_trigger').click();
  await expect(node(page, 'hook')).toBeVisible();
  await expect(page.locator('.react-flow__node')).toHaveCount(1);
  await expect(prompt).toHaveCount(0);
  // The sender's event id is what the door dedupes on; the claim takes the same.
  await page.getByTestId('input-root_dedupe_key').fill('{{ input.event_id }}');

  // Nothing selected: the inspector edits the workflow.
  await page.locator('.react-flow__pane').click({ position: { x: 500, y: 500 } });
  await page.keyboard.press('Escape');
  const wfId = page.getByTestId('inspector-workflow').getByTestId('workflow-id');
  await wfId.fill(ID);
  await wfId.press('Enter');

  // The palette offers Claim the event beside the plain Memory step.
  await select(page, 'hook');
  await page.getByTestId('tab-steps').click();
  const plain = page.getByTestId('palette-memory');
  const claim = page.getByTestId('palette-preset-memory-claim');
  await expect(plain).toBeVisible();
  await expect(claim).toContainText('Claim the event');
  await claim.click();
  await expect(node(page, 'memory')).toBeVisible();
  await expect(edge(page, 'hook', 'out', 'memory')).toHaveCount(1);

  // Its inspector: named, a write that never overwrites, keyed by the event id, 4 days.
  const inspector = page.getByTestId('inspector-step');
  await expect(page.getByTestId('step-name')).toHaveValue('Claim the event');
  await expect(page.getByTestId('input-root_key')).toHaveValue('{{ input.event_id }}');
  await expect(page.getByTestId('input-root_namespace')).toHaveValue(`processed-${ID}`);
  await expect(page.locator('#root_allow_overwrite')).not.toBeChecked();
  const ttl = page.getByTestId('duration-ttl_s');
  await expect(ttl).toHaveValue('4d');
  await page.screenshot({ path: `${SHOTS}/claim-the-event.png` });

  // A bad duration: said at once, and by the engine's check, which names the forms.
  await ttl.fill('4 dayz');
  await expect(page.getByTestId('duration-hint-ttl_s')).toContainText('Not a duration yet');
  await expect(inspector).toContainText('`4 dayz` is not a duration');
  await expect(inspector).toContainText('4d');
  // A plain number keeps its old unit, and says what it means.
  await ttl.fill('345600');
  await expect(page.getByTestId('duration-hint-ttl_s')).toHaveText(/^345600 seconds = 4d\b/);
  await ttl.fill('36h');
  await expect(page.getByTestId('duration-hint-ttl_s')).not.toContainText('Not a duration');
  await expect(inspector).not.toContainText('is not a duration');
  await ttl.scrollIntoViewIfNeeded();
  await page.screenshot({ path: `${SHOTS}/claim-the-event-36h.png` });

  await page.getByTestId('save').click();
  await expect(page.getByTestId('draft-state')).toHaveText('Draft, never published');
  const answer = await apiGet<{ workflow?: { steps: Step[] }; steps?: Step[] }>(request, `/workflows/${ID}/draft`);
  const draft = (answer.workflow ?? answer) as { steps: Step[] };
  const hook = draft.steps.find((s) => s.id === 'hook')!;
  expect(hook.kind).toBe('webhook_trigger');
  expect(draft.steps.some((s) => s.kind === 'manual_trigger')).toBe(false);
  const saved = draft.steps.find((s) => s.id === 'memory')!;
  expect(saved.name).toBe('Claim the event');
  expect(saved.config).toEqual({
    operation: 'write',
    namespace: `processed-${ID}`,
    key: '{{ input.event_id }}',
    allow_overwrite: false,
    ttl_s: '36h',
  });

  // The engine reads it: a dry run claims the key for 36 hours.
  const r = await request.post(`${baseUrl()}/api/v1/workflows/${ID}/dry-run`, {
    headers: { Authorization: `Bearer ${token()}` },
    data: { input: { event_id: 'evt_1' }, workflow: draft },
  });
  expect(r.ok(), await r.text()).toBeTruthy();
  const run = (await r.json()) as { status: string; created_at: string; steps: { step_id: string; output?: { written?: boolean; expires_at?: string } }[] };
  expect(run.status).toBe('succeeded');
  const out = run.steps.find((s) => s.step_id === 'memory')!.output!;
  expect(out.written).toBe(true);
  const hours = (Date.parse(out.expires_at!) - Date.parse(run.created_at)) / 3_600_000;
  expect(hours).toBeGreaterThan(35.9);
  expect(hours).toBeLessThan(36.1);
});
