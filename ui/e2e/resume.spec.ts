// Resume (SPEC §4) in the Runs view, against the real `fluxo serve` of global-setup.ts and a real
// `fluxo sandbox` as the destination: a failed run resumed from its failed step (reused steps,
// lineage, one deal), the replay preview that warns about the lineage's own claim and offers
// Resume instead, a replay with an edited input (big integers kept), and bulk resume.

import { resolve } from 'node:path';
import { expect, test, type Page } from '@playwright/test';
import { baseUrl, token } from './helpers';
import { api, deliver, filter, invoiceEvent, openRuns, row, search, setEnv, type Run } from './history-helpers';
import { resumeFlow, startSandbox, type Sandbox } from './sandbox-helpers';

const FLOW = 'e2e-resume';
const KEEP = 'e2e-resume-keep';
const NS = 'e2e-resume';
const NS_KEEP = 'e2e-resume-keep';
const uniq = () => Math.random().toString(36).slice(2, 10);

interface Deal {
  id: string;
  external_id: string;
}

interface FullRun extends Run {
  resume_of?: string;
  resumed_by?: string[];
  root_run_id?: string;
  input_edited?: boolean;
  steps: (Run['steps'][number] & { reused_from?: string })[];
}

let sandbox: Sandbox;

/** Stripe's invoice.paid with its event id and invoice id (the deal's Idempotency-Key) replaced. */
function paidEvent(evt: string, invoice: string): Record<string, unknown> {
  const e = invoiceEvent(evt) as { data: { object: Record<string, unknown> } };
  return { ...e, data: { ...e.data, object: { ...e.data.object, id: invoice } } };
}

const stepOf = (r: FullRun, id: string) => r.steps.find((s) => s.step_id === id);

/** The POSTs of `/deals` the sandbox received with this Idempotency-Key. */
async function posts(key: string): Promise<number> {
  return (await sandbox.log()).filter((l) => l.method === 'POST' && l.path === '/deals' && l.idempotency_key === key).length;
}

async function deals(invoice: string): Promise<Deal[]> {
  return (await sandbox.list<Deal>('deals')).filter((d) => d.external_id === invoice);
}

/** A failed delivery: every POST /deals answers 500 while it runs, then the destination is fixed. */
async function failedDelivery(request: Parameters<typeof deliver>[0], workflow: string, evt: string, invoice: string): Promise<FullRun> {
  await sandbox.fault('POST /deals', 'error_500_before_write');
  try {
    const run = (await deliver(request, workflow, `d-${evt}`, paidEvent(evt, invoice))) as FullRun;
    expect(run.status).toBe('failed');
    expect(stepOf(run, 'create')!.status).toBe('failed');
    return run;
  } finally {
    await sandbox.clearFaults();
  }
}

async function openRun(page: Page, id: string): Promise<void> {
  await openRuns(page);
  await search(page, 'q', id);
  await row(page, id).click();
  await expect(page.getByTestId('run-detail')).toHaveAttribute('data-run-id', id);
}

/** The run the detail shows once it has left `id` (while loading it has no run id at all). */
async function nextRun(page: Page, id: string): Promise<string> {
  const detail = page.getByTestId('run-detail');
  await expect(detail).toHaveAttribute('data-run-id', new RegExp(`^(?!${id}$).+$`));
  return (await detail.getAttribute('data-run-id'))!;
}

test.describe.serial('resume', () => {
  test.beforeAll(async ({ request }) => {
    sandbox = await startSandbox();
    await setEnv(request, { E2E_SANDBOX_URL: sandbox.url });
    await api(request, 'PUT', `/workflows/${FLOW}`, resumeFlow(FLOW, NS, true));
    await api(request, 'PUT', `/workflows/${KEEP}`, resumeFlow(KEEP, NS_KEEP, false));
  });

  test.afterAll(async () => {
    await sandbox?.close();
  });

  test('a failed run resumes from its failed step: reused steps, lineage both ways, one deal', async ({ page, request }) => {
    const tag = uniq();
    const invoice = `in_resume_${tag}`;
    const key = `deal-${invoice}`;
    const failed = await failedDelivery(request, FLOW, `evt_resume_${tag}`, invoice);
    expect(stepOf(failed, 'undo')!.output).toEqual({ deleted: true });
    expect(await posts(key)).toBe(2);

    await openRun(page, failed.id);
    const resume = page.getByTestId('detail-resume');
    await expect(resume).toHaveText('Resume from create');
    await expect(page.getByTestId('detail-replay')).not.toHaveClass(/fx-btn-primary/);

    // "Resume from here" on the steps that succeeded on the main path, not on the error branch.
    for (const id of ['hook', 'seen', 'route']) await expect(page.getByTestId(`step-${id}`).getByTestId('resume-from-here')).toBeVisible();
    for (const id of ['create', 'fail', 'undo']) await expect(page.getByTestId(`step-${id}`).getByTestId('resume-from-here')).toHaveCount(0);
    await page.getByTestId('step-seen').getByTestId('resume-from-here').click();
    const dialog = page.getByTestId('resume-dialog');
    await expect(dialog).toHaveAttribute('data-state', 'ready');
    await expect(dialog.getByTestId('resume-from')).toHaveText('seen');
    await expect(dialog.getByTestId('resume-reused-step')).toHaveText(['hook']);
    await page.getByTestId('resume-cancel').click();
    await expect(dialog).toHaveCount(0);

    // The primary action: the prediction first.
    await resume.click();
    await expect(dialog).toHaveAttribute('data-state', 'ready');
    await expect(dialog.getByTestId('resume-from')).toHaveText('create');
    await expect(dialog.getByTestId('resume-reused-step')).toHaveText(['hook', 'seen', 'route']);
    await expect(dialog.getByTestId('resume-executed-step')).toHaveText(['create']);
    const call = dialog.locator('[data-testid=preview-call][data-step=create]');
    await expect(call).toHaveAttribute('data-again', 'true');
    await expect(call).toHaveAttribute('data-safe', 'true');
    await expect(call).toContainText(`POST ${sandbox.url}/deals`);
    await expect(call.getByTestId('preview-call-key')).toHaveText(key);
    await expect(dialog.getByTestId('resume-headline')).toHaveText(
      'This resume reuses 3 steps, executes 1 step from create, sends 1 call again with the same Idempotency-Key.',
    );
    expect(await posts(key), 'the preview sends nothing').toBe(2);
    await expect(page.getByTestId('resume-confirm')).toHaveText('Resume from create');
    if (process.env.FLUXO_UPDATE_SCREENSHOTS) {
      await page.screenshot({ path: resolve(process.cwd(), '..', 'docs', 'screenshots', 'resume.png') });
    }
    await page.getByTestId('resume-confirm').click();

    const resumedId = await nextRun(page, failed.id);
    await expect(page.getByTestId('detail-status')).toHaveText('succeeded');
    await expect(page.getByTestId('detail-trigger')).toContainText('resume');
    await expect(page.getByTestId('detail-resume-from')).toContainText('create');
    for (const id of ['hook', 'seen', 'route']) {
      const card = page.getByTestId(`step-${id}`);
      await expect(card).toHaveAttribute('data-reused-from', failed.id);
      await expect(card.getByTestId('step-reused')).toContainText('reused from');
      await expect(card.getByTestId('step-reused-link')).toHaveAttribute('data-run-id', failed.id);
    }
    await expect(page.getByTestId('step-create')).toHaveAttribute('data-reused-from', '');
    await expect(page.getByTestId('step-create')).toHaveAttribute('data-status', 'succeeded');
    // The lineage: the original (failed) → this run.
    const chain = page.getByTestId('lineage-chain');
    await expect(chain.locator(`[data-testid=lineage-run][data-run-id="${failed.id}"]`)).toHaveAttribute('data-status', 'failed');
    await expect(chain.locator(`[data-testid=lineage-run][data-run-id="${resumedId}"]`)).toHaveAttribute('data-current', 'true');
    if (process.env.FLUXO_UPDATE_SCREENSHOTS) {
      await page.screenshot({ path: resolve(process.cwd(), '..', 'docs', 'screenshots', 'resumed-run.png') });
    }

    // On the canvas too.
    await page.getByTestId('open-on-canvas').click();
    const canvas = page.getByTestId('run-canvas');
    for (const id of ['hook', 'seen', 'route']) await expect(canvas.getByTestId(`run-node-${id}`)).toHaveAttribute('data-reused-from', failed.id);
    await expect(canvas.getByTestId('run-node-create')).toHaveAttribute('data-reused-from', '');
    await expect(canvas.getByTestId('run-node-seen').getByTestId('run-node-reused')).toBeVisible();
    await page.getByTestId('run-canvas-close').click();

    // And back: the original names its resume (with its status) instead of offering another.
    await chain.locator(`[data-testid=lineage-run][data-run-id="${failed.id}"]`).click();
    await expect(page.getByTestId('run-detail')).toHaveAttribute('data-run-id', failed.id);
    const by = page.getByTestId('detail-resumed-by').getByTestId('resumed-by-link');
    await expect(by).toHaveAttribute('data-run-id', resumedId);
    await expect(by).toHaveAttribute('data-status', 'succeeded');
    await expect(page.getByTestId('detail-resume')).toHaveCount(0);
    await expect(page.getByTestId('resume-from-here')).toHaveCount(0);
    // The resume succeeded: the original reads "fixed by" it.
    await expect(page.getByTestId('fixed-by-link')).toHaveAttribute('data-run-id', resumedId);
    // The list knows too: the row links to the resume that fixed it instead of offering one.
    await expect(row(page, failed.id).getByTestId('row-fixed-by')).toHaveAttribute('data-run-id', resumedId);
    await expect(row(page, failed.id).getByTestId('row-resume')).toHaveCount(0);
    await row(page, failed.id).getByTestId('row-fixed-by').click();
    await expect(page.getByTestId('run-detail')).toHaveAttribute('data-run-id', resumedId);

    // What the server and the destination say.
    const orig = await api<FullRun>(request, 'GET', `/runs/${failed.id}`);
    expect(orig.status).toBe('failed');
    expect(orig.resumed_by).toEqual([resumedId]);
    const resumed = await api<FullRun>(request, 'GET', `/runs/${resumedId}`);
    expect([resumed.status, resumed.trigger, resumed.resume_of, resumed.root_run_id]).toEqual(['succeeded', 'resume', failed.id, failed.id]);
    expect(resumed.steps.map((s) => [s.step_id, s.reused_from ?? null])).toEqual([
      ['hook', failed.id],
      ['seen', failed.id],
      ['route', failed.id],
      ['create', null],
    ]);
    expect(await deals(invoice)).toHaveLength(1);
    expect(await posts(key), 'the two failed attempts, then the resumed one with the same key').toBe(3);
  });

  test('a replay stopped by the lineage’s own claim warns and offers Resume instead; a concurrent resume is linked', async ({ page, request }) => {
    const tag = uniq();
    const evt = `evt_keep_${tag}`;
    const invoice = `in_keep_${tag}`;
    const failed = await failedDelivery(request, KEEP, evt, invoice);
    // No compensation in this workflow: the failed run's claim is still held.
    await api(request, 'GET', `/memory/${NS_KEEP}/${evt}`);
    const runsBefore = (await api<{ runs: unknown[] }>(request, 'GET', `/runs?workflow=${KEEP}&limit=500`)).runs.length;
    const postsBefore = await posts(`deal-${invoice}`);

    await openRun(page, failed.id);
    await page.getByTestId('detail-replay').click();
    await expect(page.getByTestId('replay-preview')).toHaveAttribute('data-state', 'ready');
    const warning = page.getByTestId('replay-own-claim');
    await expect(warning).toContainText('This replay would do nothing.');
    await expect(warning).toContainText(`claimed by run \`${failed.id}\``);
    await expect(page.getByTestId('replay-preview-headline')).toHaveText(`memory key ${NS_KEEP}/${evt} exists: this replay will take the skip route`);
    await expect(page.getByTestId('replay-confirm')).not.toHaveClass(/fx-btn-primary/);
    // The preview stored no run and sent nothing.
    expect((await api<{ runs: unknown[] }>(request, 'GET', `/runs?workflow=${KEEP}&limit=500`)).runs.length).toBe(runsBefore);
    expect(await posts(`deal-${invoice}`)).toBe(postsBefore);

    await page.getByTestId('replay-resume-instead').click();
    await expect(page.getByTestId('replay-dialog')).toHaveCount(0);
    const dialog = page.getByTestId('resume-dialog');
    await expect(dialog).toHaveAttribute('data-state', 'ready');
    await expect(dialog.getByTestId('resume-from')).toHaveText('create');
    await expect(dialog.getByTestId('resume-reused-step')).toHaveText(['hook', 'seen', 'route']);
    // Someone else resumes it meanwhile (through the API): confirming meets the server's
    // 409 already_resumed, and the dialog links to that resume instead.
    const other = await api<FullRun>(request, 'POST', `/runs/${failed.id}/resume`, {});
    await page.getByTestId('resume-confirm').click();
    await expect(dialog.getByTestId('resume-already-link')).toHaveAttribute('data-run-id', other.id);
    await expect(dialog.getByTestId('resume-confirm')).toHaveCount(0);
    await dialog.getByTestId('resume-open-existing').click();
    await expect(dialog).toHaveCount(0);

    const resumedId = await nextRun(page, failed.id);
    expect(resumedId).toBe(other.id);
    await expect(page.getByTestId('detail-status')).toHaveText('succeeded');
    const resumed = await api<FullRun>(request, 'GET', `/runs/${resumedId}`);
    expect([resumed.status, resumed.resume_of]).toEqual(['succeeded', failed.id]);
    expect(stepOf(resumed, 'route')!.ports).toEqual(['default']);
    expect(await deals(invoice)).toHaveLength(1);
  });

  test('a replay with an edited input runs on it, keeps big integers exactly, and says so', async ({ page, request }) => {
    const tag = uniq();
    const failed = await failedDelivery(request, KEEP, `evt_edit_${tag}`, `in_edit_${tag}`);
    const evt = `evt_fixed_${tag}`;
    const invoice = `in_fixed_${tag}`;
    const big = '9007199254740993'; // 2^53 + 1: JSON.parse would make it ...992

    await openRun(page, failed.id);
    await page.getByTestId('detail-replay').click();
    await page.getByTestId('replay-edit-input').click();
    const input = page.getByTestId('replay-input');
    await expect(input).toHaveValue(/"type": "invoice.paid"/);
    const value = JSON.parse(await input.inputValue()) as { id: string; data: { object: Record<string, unknown> } };
    value.id = evt;
    value.data.object.id = invoice;
    value.data.object.amount_paid = '@BIG@';
    await input.fill(JSON.stringify(value, null, 2).replace('"@BIG@"', big));
    await expect(page.getByTestId('replay-input-editor')).toHaveAttribute('data-edited', 'true');
    // The corrected event's claim is free: no warning, and the call carries the new key.
    await expect(page.getByTestId('replay-preview')).toContainText(`with Idempotency-Key deal-${invoice}`);
    await expect(page.getByTestId('replay-own-claim')).toHaveCount(0);
    // Broken JSON cannot be replayed.
    await input.press('End');
    await input.pressSequentially('x');
    await expect(page.getByTestId('replay-input-error')).toBeVisible();
    await expect(page.getByTestId('replay-confirm')).toBeDisabled();
    await input.press('Backspace');
    await expect(page.getByTestId('replay-confirm')).toHaveText('Replay live with edited input');
    await page.getByTestId('replay-confirm').click();

    const replayId = await nextRun(page, failed.id);
    await expect(page.getByTestId('detail-status')).toHaveText('succeeded');
    await expect(page.getByTestId('input-edited')).toBeVisible();
    await expect(page.getByTestId('replay-of-link')).toHaveAttribute('data-run-id', failed.id);
    // The input as shown: the big integer's exact digits.
    const shown = page.getByTestId('run-input-json');
    await shown.locator('.fx-json-toggle', { hasText: 'data:' }).click();
    await shown.locator('.fx-json-toggle', { hasText: 'object:' }).click();
    await expect(shown.locator('.fx-json-line', { hasText: 'amount_paid:' })).toHaveText(`amount_paid: ${big}`);

    const r = await request.get(`${baseUrl()}/api/v1/runs/${replayId}`, { headers: { Authorization: `Bearer ${token()}` } });
    const text = await r.text();
    expect(text).toContain(`"amount_paid":${big}`);
    const replay = JSON.parse(text) as FullRun;
    expect([replay.status, replay.replay_of, replay.input_edited]).toEqual(['succeeded', failed.id, true]);
    expect(await deals(invoice)).toHaveLength(1);
    expect(await sandbox.listText('deals')).toContain(`"amount":${big}`);
  });

  test('bulk resume of the selected failed runs: resumed (a dry one dry), already resumed ones skipped, results linked', async ({ page, request }) => {
    const tag = uniq();
    const f1 = await failedDelivery(request, FLOW, `evt_bulk1_${tag}`, `in_bulk1_${tag}`);
    const f2 = await failedDelivery(request, FLOW, `evt_bulk2_${tag}`, `in_bulk2_${tag}`);
    // A failed dry run: its definition reads as a number an env variable that is not set yet
    // (a dry run's placeholder for it is a URL, no number: template_error at create).
    const envName = `E2E_DRY_${tag.toUpperCase()}`;
    const dryFlow = resumeFlow(FLOW, NS, true) as { steps: { id: string; config: Record<string, unknown> }[] };
    const create = dryFlow.steps.find((st) => st.id === 'create')!;
    create.config.headers = { ...(create.config.headers as Record<string, string>), 'X-Shard': `{{ env.${envName} | int }}` };
    const dryInvoice = `in_bulkdry_${tag}`;
    const dry = await api<FullRun>(request, 'POST', `/workflows/${FLOW}/dry-run`, { input: paidEvent(`evt_bulkdry_${tag}`, dryInvoice), workflow: dryFlow });
    expect([dry.mode, dry.status, stepOf(dry, 'create')!.status]).toEqual(['dry', 'failed', 'failed']);
    await setEnv(request, { [envName]: '7' });

    await openRuns(page);
    await filter(page, 'workflow', FLOW);
    await filter(page, 'status', 'failed');
    await expect(row(page, f1.id)).toBeVisible();
    await expect(row(page, f2.id)).toBeVisible();
    const n = await page.getByTestId('run-row').count();
    // The first test's run, resumed already, is among them.
    expect(n).toBeGreaterThanOrEqual(4);
    // Hand-picked rows: every loaded one.
    for (const box of await page.getByTestId('run-select').all()) await box.check();
    await page.getByTestId('bulk-resume').click();
    await expect(page.getByTestId('confirm-dialog')).toContainText(`Resume ${n} runs?`);
    await page.getByTestId('confirm-ok').click();
    const progress = page.getByTestId('bulk-progress');
    await expect(progress).toHaveAttribute('data-running', 'false', { timeout: 30_000 });
    await expect(progress).toHaveAttribute('data-kind', 'resume');
    await expect(progress).toHaveAttribute('data-done', String(n));
    await expect(page.getByTestId('bulk-succeeded')).toHaveText('3 succeeded');
    await expect(page.getByTestId('bulk-skipped')).toHaveText(`${n - 3} skipped`);
    await expect(page.getByTestId('bulk-failed')).toHaveCount(0);
    await expect(page.getByTestId('bulk-errors')).toHaveCount(0);

    await page.getByTestId('bulk-results-toggle').click();
    const results = page.getByTestId('bulk-result');
    await expect(results).toHaveCount(n);
    for (const f of [f1, f2]) {
      const res = page.locator(`[data-testid=bulk-result][data-run-id="${f.id}"]`);
      await expect(res).toHaveAttribute('data-outcome', 'succeeded');
      const orig = await api<FullRun>(request, 'GET', `/runs/${f.id}`);
      expect(orig.resumed_by).toHaveLength(1);
      await expect(res).toHaveAttribute('data-new-run-id', orig.resumed_by![0]);
      const resumed = await api<FullRun>(request, 'GET', `/runs/${orig.resumed_by![0]}`);
      expect([resumed.status, resumed.mode, resumed.resume_of]).toEqual(['succeeded', 'live', f.id]);
    }
    await expect(page.locator('[data-testid=bulk-result][data-outcome=skipped]')).toHaveCount(n - 3);
    // The dry run was resumed dry: nothing was sent for it.
    const dryAfter = await api<FullRun>(request, 'GET', `/runs/${dry.id}`);
    expect(dryAfter.resumed_by).toHaveLength(1);
    const dryResume = await api<FullRun>(request, 'GET', `/runs/${dryAfter.resumed_by![0]}`);
    expect([dryResume.mode, dryResume.status, dryResume.resume_of]).toEqual(['dry', 'succeeded', dry.id]);
    await expect(page.locator(`[data-testid=bulk-result][data-run-id="${dry.id}"] .fx-mode-dry`)).toBeVisible();
    expect(await posts(`deal-${dryInvoice}`)).toBe(0);
    expect(await deals(`in_bulk1_${tag}`)).toHaveLength(1);
    expect(await deals(`in_bulk2_${tag}`)).toHaveLength(1);

    // A result links to its new run.
    await page.locator(`[data-testid=bulk-result][data-run-id="${f1.id}"]`).getByTestId('bulk-result-new').click();
    const orig = await api<FullRun>(request, 'GET', `/runs/${f1.id}`);
    await expect(page.getByTestId('run-detail')).toHaveAttribute('data-run-id', orig.resumed_by![0]);
  });
});
