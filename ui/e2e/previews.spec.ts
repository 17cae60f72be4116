// Previews that tell the truth (issue 37, points 4 and 5), against the real `fluxo serve` of
// global-setup.ts and a real `fluxo sandbox` as the CRM:
//
// * the replay preview follows the lineage: a failed run whose resume (or a replay) succeeded
//   says it was fixed, names the run that fixed it, and offers no dead "Resume … instead";
// * the resume dialog of a replay that failed, after the original was resumed, partitions the
//   steps into reused and executed, its title names the first step that really executes, and
//   the resumed run then does exactly that (its step records).

import { mkdirSync } from 'node:fs';
import { expect, test, type Page } from '@playwright/test';
import { api, deliver, invoiceEvent, openRuns, row, search, setEnv, type Run } from './history-helpers';
import { resumeFlow, startSandbox, type Sandbox } from './sandbox-helpers';

const FLOW = 'e2e-previews';
const KEEP = 'e2e-previews-keep';
const uniq = () => Math.random().toString(36).slice(2, 10);
/** The UI's short run id (`shortId`). */
const short = (id: string) => `${id.slice(0, 8)}…${id.slice(-4)}`;
const SHOTS = '/tmp/shots';

interface FullRun extends Run {
  resume_of?: string;
  resumed_by?: string[];
  steps: (Run['steps'][number] & { reused_from?: string })[];
}

let sandbox: Sandbox;

function paidEvent(evt: string, invoice: string): Record<string, unknown> {
  const e = invoiceEvent(evt) as { data: { object: Record<string, unknown> } };
  return { ...e, data: { ...e.data, object: { ...e.data.object, id: invoice } } };
}

async function posts(key: string): Promise<number> {
  return (await sandbox.log()).filter((l) => l.method === 'POST' && l.path === '/deals' && l.idempotency_key === key).length;
}

/** Run `act` while every POST /deals answers 500. */
async function whileCrmFails<T>(act: () => Promise<T>): Promise<T> {
  await sandbox.fault('POST /deals', 'error_500_before_write');
  try {
    return await act();
  } finally {
    await sandbox.clearFaults();
  }
}

async function openRun(page: Page, id: string): Promise<void> {
  // A fresh load (the same URL again would only be a hash change).
  await page.goto('about:blank');
  await openRuns(page);
  await search(page, 'q', id);
  await row(page, id).click();
  await expect(page.getByTestId('run-detail')).toHaveAttribute('data-run-id', id);
}

async function shot(page: Page, name: string): Promise<void> {
  mkdirSync(SHOTS, { recursive: true });
  await page.screenshot({ path: `${SHOTS}/${name}.png` });
}

test.describe.serial('previews follow the lineage', () => {
  test.beforeAll(async ({ request }) => {
    sandbox = await startSandbox();
    await setEnv(request, { E2E_SANDBOX_URL: sandbox.url });
    await api(request, 'PUT', `/workflows/${FLOW}`, resumeFlow(FLOW, FLOW, true));
    await api(request, 'PUT', `/workflows/${KEEP}`, resumeFlow(KEEP, KEEP, false));
  });

  test.afterAll(async () => {
    await sandbox?.close();
  });

  test('a run fixed by its resume, or by a replay: the replay preview says so, names the fix, offers no resume', async ({ page, request }) => {
    // Fixed by its resume: no compensation, so the failed run's claim stays the lineage's.
    const tag = uniq();
    const failed = await whileCrmFails(() => deliver(request, KEEP, `d-fix-${tag}`, paidEvent(`evt_fix_${tag}`, `in_fix_${tag}`)));
    expect(failed.status).toBe('failed');
    const resumed = await api<FullRun>(request, 'POST', `/runs/${failed.id}/resume`, {});
    expect(resumed.status).toBe('succeeded');
    const postsBefore = await posts(`deal-in_fix_${tag}`);

    await openRun(page, failed.id);
    await expect(page.getByTestId('fixed-by-link')).toHaveAttribute('data-run-id', resumed.id);
    await page.getByTestId('detail-replay').click();
    const dialog = page.getByTestId('replay-dialog');
    await expect(dialog.getByTestId('replay-preview')).toHaveAttribute('data-state', 'ready');
    const fixed = dialog.getByTestId('replay-fixed');
    await expect(fixed).toHaveAttribute('data-run-id', resumed.id);
    await expect(fixed).toHaveAttribute('data-trigger', 'resume');
    await expect(fixed).toContainText(`Already fixed by run ${short(resumed.id)} (a resume), which succeeded.`);
    await expect(fixed.getByTestId('replay-fixed-detail')).toHaveText(
      'The event is handled: nothing is left to resume. Step seen would find the event\'s claim taken: this replay would take the "already processed" branch and do nothing.',
    );
    // Nothing dead: no "did not finish", no Resume … instead (that resume exists and succeeded).
    await expect(dialog).not.toContainText('did not finish');
    await expect(dialog.getByTestId('replay-resume-instead')).toHaveCount(0);
    await expect(dialog.getByTestId('replay-own-claim')).toHaveCount(0);
    // The prediction itself is unchanged: the claim sends a replay down the skip route.
    await expect(dialog.getByTestId('replay-preview-headline')).toHaveText(`memory key ${KEEP}/evt_fix_${tag} exists: this replay will take the skip route`);
    await expect(dialog.getByTestId('replay-confirm')).not.toHaveClass(/fx-btn-primary/);
    await shot(page, 'replay-preview-fixed');
    expect(await posts(`deal-in_fix_${tag}`), 'a preview sends nothing').toBe(postsBefore);
    // The one action offered opens the run that fixed it.
    await fixed.getByTestId('replay-fixed-open').click();
    await expect(dialog).toHaveCount(0);
    await expect(page.getByTestId('run-detail')).toHaveAttribute('data-run-id', resumed.id);

    // Fixed by a replay: the compensation released the claim, the replay took it and succeeded.
    const tag2 = uniq();
    const failed2 = await whileCrmFails(() => deliver(request, FLOW, `d-rfix-${tag2}`, paidEvent(`evt_rfix_${tag2}`, `in_rfix_${tag2}`)));
    expect(failed2.status).toBe('failed');
    const replay = await api<FullRun>(request, 'POST', `/runs/${failed2.id}/replay`, {});
    expect(replay.status).toBe('succeeded');
    await openRun(page, failed2.id);
    await page.getByTestId('detail-replay').click();
    await expect(dialog.getByTestId('replay-preview')).toHaveAttribute('data-state', 'ready');
    await expect(dialog.getByTestId('replay-fixed')).toHaveAttribute('data-run-id', replay.id);
    await expect(dialog.getByTestId('replay-fixed')).toContainText(`Already fixed by run ${short(replay.id)} (a replay), which succeeded.`);
    await expect(dialog.getByTestId('replay-resume-instead')).toHaveCount(0);
    await page.getByTestId('replay-cancel').click();
  });

  test('the resume dialog of a replay that failed, after the original was resumed, partitions the steps as the resume does', async ({ page, request }) => {
    const tag = uniq();
    const invoice = `in_part_${tag}`;
    const key = `deal-${invoice}`;
    // The original fails (its compensation releases the claim); a replay of it takes the claim,
    // fails and releases it too; then the original is resumed and takes the claim back.
    const [original, replay] = await whileCrmFails(async () => {
      const o = await deliver(request, FLOW, `d-part-${tag}`, paidEvent(`evt_part_${tag}`, invoice));
      const r = await api<FullRun>(request, 'POST', `/runs/${o.id}/replay`, {});
      return [o, r] as const;
    });
    expect([original.status, replay.status]).toEqual(['failed', 'failed']);
    const resumed = await api<FullRun>(request, 'POST', `/runs/${original.id}/resume`, {});
    expect(resumed.status).toBe('succeeded');
    const postsBefore = await posts(key);

    await openRun(page, replay.id);
    const resume = page.getByTestId('detail-resume');
    // The claim the replay made is held by the original's lineage now: the resume claims
    // again (and is told "exists"), so it starts at the claim, not at create.
    await expect(resume).toHaveAttribute('data-state', 'ready');
    await expect(resume).toHaveText('Resume from seen');
    await resume.click();
    const dialog = page.getByTestId('resume-dialog');
    await expect(dialog).toHaveAttribute('data-state', 'ready');
    await expect(dialog.getByTestId('resume-from')).toHaveText('seen');
    const reused = await dialog.getByTestId('resume-reused-step').allTextContents();
    const executed = await dialog.getByTestId('resume-executed-step').allTextContents();
    expect(reused).toEqual(['hook']);
    expect(executed).toEqual(['seen', 'route', 'skip']);
    expect(reused.filter((s) => executed.includes(s)), 'no step both reused and executed').toEqual([]);
    await expect(dialog.getByTestId('resume-headline')).toHaveText(/^This resume reuses 1 step, executes 3 steps from seen\b/);
    // Why: the claim is taken now, so the resume takes the skip route.
    await expect(dialog.getByTestId('resume-facts')).toContainText(`memory key ${FLOW}/evt_part_${tag} exists`);
    await expect(dialog.getByTestId('resume-facts')).toContainText('router route takes the skip route');
    await expect(dialog.getByTestId('preview-call')).toHaveCount(1);
    await expect(dialog.locator('[data-testid=preview-call][data-step=seen]')).toBeVisible();
    await expect(page.getByTestId('resume-confirm')).toHaveText('Resume from seen');
    await shot(page, 'resume-dialog-partition');
    await page.getByTestId('resume-confirm').click();

    const detail = page.getByTestId('run-detail');
    await expect(detail).toHaveAttribute('data-run-id', new RegExp(`^(?!${replay.id}$).+$`));
    const newId = (await detail.getAttribute('data-run-id'))!;
    await expect(page.getByTestId('detail-status')).toHaveText('succeeded');
    await expect(page.getByTestId('detail-resume-from')).toContainText('executed from seen');

    // The resumed run did what the dialog said, step for step.
    const done = await api<FullRun>(request, 'GET', `/runs/${newId}`);
    expect(done.resume_of).toBe(replay.id);
    expect(done.steps.map((s) => s.step_id)).toEqual([...reused, ...executed]);
    expect(done.steps.filter((s) => s.reused_from).map((s) => s.step_id)).toEqual(reused);
    expect(done.steps.filter((s) => !s.reused_from).map((s) => s.step_id)).toEqual(executed);
    const seen = done.steps.find((s) => s.step_id === 'seen')!;
    expect(seen.output).toMatchObject({ written: false, claimed_by: original.id });
    expect(await posts(key), 'no deal call: the original’s resume created it').toBe(postsBefore);
  });
});
