// Keyboard and screen reader (issue 37, point 7), against the real `fluxo serve` of
// global-setup.ts: axe finds no WCAG 2 A/AA violation on the four main pages (the editor, Runs
// with a run's detail open, Memory with a key open, Settings); run rows are focusable and open
// with Enter, arrows move between them; the workflow's fields are labelled; the bottom panel's
// tabs are tabs (arrow keys switch them).

import AxeBuilder from '@axe-core/playwright';
import { expect, test, type APIRequestContext, type Page } from '@playwright/test';
import { openEditor } from './helpers';
import { api, filter, openRuns, row, type Run } from './history-helpers';

const WF = 'e2e-a11y';
const NS = 'e2e-a11y';
const TAGS = ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'wcag22aa'];

/** A manual trigger and a Memory write: a run to list, and a key to browse. */
function memoryFlow(id: string): Record<string, unknown> {
  return {
    id,
    name: 'Accessibility check (e2e)',
    version: 1,
    settings: { run_timeout_s: 20 },
    steps: [
      { id: 'start', kind: 'manual_trigger', position: { x: 0, y: 0 }, config: {} },
      { id: 'keep', kind: 'memory', position: { x: 300, y: 0 }, config: { operation: 'write', namespace: NS, key: '{{ input.key }}', value: '{{ input }}' } },
    ],
    edges: [{ from: 'start', to: 'keep' }],
  };
}

/** Every WCAG 2 A/AA violation axe finds on the page, one readable line per element. */
async function violations(page: Page): Promise<string[]> {
  const r = await new AxeBuilder({ page }).withTags(TAGS).analyze();
  return r.violations.flatMap((v) =>
    v.nodes.map((n) => `${v.id} (${v.impact}): ${v.help}\n    at ${n.target.join(' ')}\n    ${(n.failureSummary ?? '').replace(/\n/g, '\n    ')}`),
  );
}

async function expectNoViolations(page: Page, where: string): Promise<void> {
  const found = await violations(page);
  expect(found, `axe on ${where}:\n${found.join('\n')}`).toEqual([]);
}

/** Three runs of a fresh copy of the Memory flow: their ids, newest last. */
async function seedRuns(request: APIRequestContext, id: string): Promise<string[]> {
  await api(request, 'PUT', `/workflows/${id}`, memoryFlow(id));
  const runs: string[] = [];
  for (const key of ['k-a11y-1', 'k-a11y-2', 'k-a11y-3']) {
    const r = await api<Run>(request, 'POST', `/workflows/${id}/runs`, { input: { key, note: 'for the axe check' } });
    expect(r.status).toBe('succeeded');
    runs.push(r.id);
  }
  return runs;
}

test.describe('keyboard and screen reader', () => {

  test('axe finds no WCAG 2 A/AA violation on the editor, Runs (a run open), Memory (a key open) and Settings', async ({ page, request }) => {
    const runs = await seedRuns(request, WF);
    await openEditor(page);
    await expectNoViolations(page, 'the editor');
    // A step with a form of many fields selected, and the bottom panel open on the run input.
    await page.locator('.react-flow__node:has([data-kind=http_request]) [data-testid=node-title]').first().click();
    await expect(page.getByTestId('step-id')).toBeVisible();
    await page.getByTestId('edit-input').click();
    await expectNoViolations(page, 'the editor with a step selected and the run input open');

    await page.getByTestId('view-runs').click();
    await expect(page.getByTestId('run-list')).toHaveAttribute('data-loading', 'false');
    await filter(page, 'workflow', WF);
    await row(page, runs[0]).click();
    await expect(page.getByTestId('run-detail')).toHaveAttribute('data-run-id', runs[0]);
    await expect(page.getByTestId('step-keep')).toBeVisible();
    await expectNoViolations(page, 'Runs with a run open');

    await page.getByTestId('view-memory').click();
    await page.getByTestId(`namespace-${NS}`).click();
    await page.locator('[data-testid="memory-row"][data-key="k-a11y-1"]').click();
    await expect(page.getByTestId('memory-detail')).toBeVisible();
    await expectNoViolations(page, 'Memory with a key open');

    await page.getByTestId('view-settings').click();
    await expect(page.getByTestId('settings-view')).toBeVisible();
    await expectNoViolations(page, 'Settings');
  });

  test('run rows are focusable: Tab reaches them, arrows move, Enter opens the run', async ({ page, request }) => {
    const wf = `e2e-a11y-rows-${Math.random().toString(36).slice(2, 8)}`;
    await seedRuns(request, wf);
    await openRuns(page);
    await filter(page, 'workflow', wf);
    await expect(page.locator('[data-testid="run-row"]')).toHaveCount(3);
    const first = page.locator('[data-testid="run-row"]').first();
    const second = page.locator('[data-testid="run-row"]').nth(1);
    // One row in the tab order (roving), reached with Tab from the filters.
    await expect(page.locator('[data-testid="run-row"][tabindex="0"]')).toHaveCount(1);
    await page.getByTestId('filter-key').focus();
    let reached = false;
    for (let i = 0; i < 80 && !reached; i++) {
      await page.keyboard.press('Tab');
      reached = await page.evaluate(() => document.activeElement?.getAttribute('data-testid') === 'run-row');
    }
    expect(reached, 'Tab reaches a run row').toBe(true);
    await expect(first).toBeFocused();
    await page.keyboard.press('ArrowDown');
    await expect(second).toBeFocused();
    await page.keyboard.press('ArrowUp');
    await expect(first).toBeFocused();
    await page.keyboard.press('ArrowDown');
    const id = (await second.getAttribute('data-run-id'))!;
    await page.keyboard.press('Enter');
    await expect(page.getByTestId('run-detail')).toHaveAttribute('data-run-id', id);
    await expect(second).toHaveAttribute('aria-current', 'true');
    // Focus stays on the row that was opened.
    await expect(second).toBeFocused();
  });

  test("the workflow's fields have labels; the bottom and left panels' tabs are tabs and switch with the arrow keys", async ({ page }) => {
    await openEditor(page);
    const form = page.getByTestId('inspector-workflow');
    for (const name of ['Workflow id (file name)', 'Name', 'Description', 'Run time limit']) await expect(form.getByLabel(name, { exact: true })).toBeVisible();

    const tabs = page.getByRole('tablist', { name: /Problems/ });
    await expect(tabs.getByRole('tab')).toHaveText([/Problems/, /Run results/, /Run input/, /Check/]);
    await tabs.getByRole('tab', { name: /Problems/ }).click();
    const problems = tabs.getByRole('tab', { name: /Problems/ });
    await expect(problems).toHaveAttribute('aria-selected', 'true');
    await expect(page.getByRole('tabpanel', { name: /Problems/ })).toBeVisible();
    await problems.focus();
    await page.keyboard.press('ArrowRight');
    const results = tabs.getByRole('tab', { name: /Run results/ });
    await expect(results).toBeFocused();
    await expect(results).toHaveAttribute('aria-selected', 'true');
    await expect(problems).toHaveAttribute('aria-selected', 'false');
    await expect(page.getByRole('tabpanel', { name: /Run results/ })).toBeVisible();
    await page.keyboard.press('End');
    await expect(tabs.getByRole('tab', { name: /Check/ })).toHaveAttribute('aria-selected', 'true');
    await page.keyboard.press('ArrowRight');
    await expect(problems).toHaveAttribute('aria-selected', 'true');
    await expect(problems).toBeFocused();
    // Only the selected tab is in the tab order.
    await expect(tabs.locator('[role=tab][tabindex="0"]')).toHaveCount(1);

    // The left panel's tabs too.
    const left = page.getByRole('tablist', { name: 'Steps or workflows' });
    const steps = left.getByRole('tab', { name: 'Steps' });
    await steps.click();
    await expect(page.getByRole('tabpanel', { name: 'Steps' })).toBeVisible();
    await page.keyboard.press('ArrowRight');
    await expect(left.getByRole('tab', { name: /Workflows/ })).toBeFocused();
    await expect(left.getByRole('tab', { name: /Workflows/ })).toHaveAttribute('aria-selected', 'true');
    await expect(page.getByTestId('workflow-list')).toBeVisible();
  });
});
