import { expect, test, type Page } from '@playwright/test';
import { edge, node, openEditor, openWorkflow, select, settled } from './helpers';

// Handed case C14: copy and paste in the editor (../shared/cases/README.md).

/** Every drawn edge joins two steps that are on the canvas. */
async function edgesJoinPresentSteps(page: Page): Promise<void> {
  const ids = await page.locator('.react-flow__edge [data-testid^="edge-"], [data-testid^="edge-"]').evaluateAll((els) =>
    els.map((e) => e.getAttribute('data-testid')!).filter((t) => t.includes('->')),
  );
  expect(ids.length).toBeGreaterThan(0);
  for (const id of ids) {
    const [from, to] = id.replace(/^edge-/, '').split('->');
    await expect(node(page, from.split(':')[0])).toHaveCount(1);
    await expect(node(page, to)).toHaveCount(1);
  }
}

test('C14: copied steps get new ids, their edge and templates follow; a cut pasted back keeps ids and edges', async ({ page }) => {
  await openEditor(page);
  await openWorkflow(page, 'invoice-paid-once');
  const mod = process.platform === 'darwin' ? 'Meta' : 'Control';

  // Copy `seen` → `route` (route's condition reads steps.seen) and paste into the same workflow.
  await select(page, 'seen');
  await node(page, 'route').getByTestId('node-title').click({ modifiers: [mod] });
  await page.keyboard.press(`${mod}+c`);
  await page.keyboard.press(`${mod}+v`);
  await expect(node(page, 'seen_2')).toBeVisible();
  await expect(node(page, 'route_2')).toBeVisible();
  await expect(edge(page, 'seen_2', 'out', 'route_2')).toHaveCount(1);
  // The originals are untouched; the copy's template names the copy.
  await expect(edge(page, 'seen', 'out', 'route')).toHaveCount(1);
  await page.keyboard.press('Escape');
  await select(page, 'route_2');
  await expect(page.getByTestId('inspector')).toContainText('steps.seen_2.output.written == false');
  await select(page, 'route');
  await expect(page.getByTestId('inspector')).toContainText('steps.seen.output.written == false');
  // The copies hang loose (nothing leads to them yet): that is the only error.
  await settled(page);
  const errors = page.locator('[data-testid=problem-row].error');
  await expect(errors).toHaveCount(2);
  for (const code of await errors.evaluateAll((els) => els.map((e) => e.getAttribute('data-code')))) expect(code).toBe('unreachable');
  await edgesJoinPresentSteps(page);

  // Undo the paste, then cut the two steps: they go, with the edges that joined them.
  await page.getByTestId('canvas').click({ position: { x: 5, y: 5 } });
  await page.keyboard.press(`${mod}+z`);
  await expect(node(page, 'seen_2')).toHaveCount(0);
  await select(page, 'seen');
  await node(page, 'route').getByTestId('node-title').click({ modifiers: [mod] });
  await page.keyboard.press(`${mod}+x`);
  await expect(node(page, 'seen')).toHaveCount(0);
  await expect(node(page, 'route')).toHaveCount(0);
  await expect(edge(page, 'hook', 'out', 'seen')).toHaveCount(0);

  // Pasted back: the same ids, and the edges from the rest of the flow attach again.
  await page.keyboard.press(`${mod}+v`);
  await expect(node(page, 'seen')).toBeVisible();
  await expect(node(page, 'route')).toBeVisible();
  await expect(node(page, 'seen_2')).toHaveCount(0);
  for (const [f, p, t] of [
    ['hook', 'out', 'seen'],
    ['seen', 'out', 'route'],
    ['route', 'default', 'create'],
    ['route', 'skip', 'skip'],
  ]) {
    await expect(edge(page, f, p, t)).toHaveCount(1);
  }
  await settled(page);
  await expect(page.getByTestId('validation-status')).not.toHaveAttribute('data-state', 'error');
  await edgesJoinPresentSteps(page);
});
