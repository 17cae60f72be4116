// A fan-out's parent and children link both ways in the run detail (issue 12: "a parent run
// that links to its children"), against a real `fluxo serve`: the parent's fan_out step starts
// one child per distinct item; the parent lists them, each child names its parent.

import { expect, test, type Page } from '@playwright/test';
import { api, openRuns, row, search } from './history-helpers';

interface FullRun {
  id: string;
  status: string;
  trigger: string;
  parent_run?: string;
  steps: { step_id: string; output?: { run_ids?: string[]; started?: number; duplicates?: number } }[];
}

const CHILD = 'e2e-fanout-child';
const PARENT = 'e2e-fanout-parent';

async function openRun(page: Page, id: string): Promise<void> {
  await openRuns(page);
  await search(page, 'q', id);
  await row(page, id).click();
  await expect(page.getByTestId('run-detail')).toHaveAttribute('data-run-id', id);
}

test('a fan-out parent lists the runs it started; each child links back to it', async ({ page, request }) => {
  await api(request, 'PUT', `/workflows/${CHILD}`, {
    id: CHILD,
    name: 'e2e fan-out child',
    version: 1,
    steps: [
      { id: 'start', kind: 'manual_trigger', config: {} },
      { id: 'shape', kind: 'transform', config: { fields: { sku: '{{ input.sku }}' } } },
    ],
    edges: [{ from: 'start', to: 'shape' }],
  });
  await api(request, 'PUT', `/workflows/${PARENT}`, {
    id: PARENT,
    name: 'e2e fan-out parent',
    version: 1,
    steps: [
      { id: 'start', kind: 'manual_trigger', config: {} },
      { id: 'each', kind: 'fan_out', config: { items: '{{ input.items }}', key: '{{ item.sku }}', workflow: CHILD } },
    ],
    edges: [{ from: 'start', to: 'each' }],
  });
  const tag = Date.now().toString(36);
  const items = [{ sku: `a-${tag}` }, { sku: `b-${tag}` }, { sku: `a-${tag}` }];
  const parent = await api<FullRun>(request, 'POST', `/workflows/${PARENT}/runs`, { input: { items } });
  expect(parent.status).toBe('succeeded');
  const out = parent.steps.find((s) => s.step_id === 'each')!.output!;
  expect([out.started, out.duplicates]).toEqual([2, 1]);
  const children = out.run_ids!;
  expect(children).toHaveLength(2);

  await openRun(page, parent.id);
  const started = page.getByTestId('detail-children');
  await expect(started).toContainText('Started 2');
  await expect(started.getByTestId('child-run-link')).toHaveCount(2);
  await started.locator(`[data-testid=child-run-link][data-run-id="${children[0]}"]`).click();
  await expect(page.getByTestId('run-detail')).toHaveAttribute('data-run-id', children[0]);
  const back = page.getByTestId('detail-parent-run').getByTestId('parent-run-link');
  await expect(back).toHaveAttribute('data-run-id', parent.id);

  const child = await api<FullRun>(request, 'GET', `/runs/${children[0]}`);
  expect([child.trigger, child.parent_run]).toEqual(['fan_out', parent.id]);
  await back.click();
  await expect(page.getByTestId('run-detail')).toHaveAttribute('data-run-id', parent.id);
});
