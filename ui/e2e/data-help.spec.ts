import { expect, test } from '@playwright/test';
import { node, openEditor, openWorkflow, select } from './helpers';

test('a field inserted by click from the sample tree, with its live preview; outputs of the last run too', async ({ page }) => {
  await openEditor(page);
  await openWorkflow(page, 'invoice-paid-once');
  await page.getByTestId('tab-input').click();
  await page.getByTestId('sample-select').selectOption('stripe/invoice.paid.json');
  await expect(page.getByTestId('run-input')).toHaveValue(/"type": "invoice.paid"/);

  // The claim's key, emptied, then filled from the tree of the sample.
  await select(page, 'seen');
  const key = page.getByTestId('input-root_key');
  await key.fill('');
  await page.getByTestId('data-help').click();
  const tree = page.getByTestId('data-tree');
  await expect(tree).toBeVisible();
  await tree.getByTestId('data-toggle-input.data').click();
  await tree.getByTestId('data-toggle-input.data.object').click();
  await tree.getByTestId('data-node-input.data.object.customer').click();
  await expect(key).toHaveValue('{{ input.data.object.customer }}');
  await expect(key).toBeFocused();
  // The server renders it against the sample, as the step would.
  const preview = page.getByTestId('tpl-preview');
  await expect(preview).toHaveAttribute('data-state', 'ok');
  await expect(page.getByTestId('tpl-preview-value')).toHaveText(/^cus_/);

  // Typed text around it is previewed too; a path the sample lacks says so.
  await key.press('End');
  await key.pressSequentially('-x');
  await expect(page.getByTestId('tpl-preview-value')).toHaveText(/^cus_\w+-x$/);
  await key.fill('{{ input.data.object.nope }}');
  await expect(preview).toHaveAttribute('data-state', 'error');
  await expect(preview).toContainText('missing value `input.data.object.nope`');
  // A template asking for terabytes is refused with the budget it broke; the server lives.
  await key.fill('{{ input.id * 100000000000 }}');
  await expect(preview).toHaveAttribute('data-state', 'error');
  await expect(preview).toContainText('the memory budget of one value in a template');
  // Path completion: what the sample has at the path typed so far; Tab takes the first.
  await key.fill('');
  await key.pressSequentially('{{ input.data.ob');
  await expect(page.getByTestId('tpl-completions')).toContainText('object');
  await key.press('Tab');
  await expect(key).toHaveValue('{{ input.data.object');
  await key.pressSequentially('.customer_e');
  await page.getByTestId('tpl-complete-customer_email').click();
  await expect(key).toHaveValue('{{ input.data.object.customer_email');
  await key.pressSequentially(' }}');
  await expect(page.getByTestId('tpl-completions')).toHaveCount(0);
  await key.fill('{{ input.data.object.id }}');

  // After a dry run, the outputs of upstream steps are in the tree of a later step's field.
  await page.getByTestId('dry-run').click();
  await expect(page.getByTestId('run-status')).toHaveText('succeeded');
  await select(page, 'create');
  const idem = page.getByTestId('map-headers-value-0').locator('textarea');
  await idem.click();
  await page.getByTestId('data-help').click();
  await page.getByTestId('data-toggle-steps.seen.output').click().catch(() => {});
  await expect(page.getByTestId('data-node-steps.seen.output.written')).toBeVisible();
  await expect(page.getByTestId('tpl-preview-value')).toHaveText(/^deal-in_/);
  await expect(node(page, 'create')).toBeVisible();
});

test('field labels come from the config types\' titles, not from field names', async ({ page }) => {
  await openEditor(page);
  await openWorkflow(page, 'invoice-paid-once');
  await select(page, 'seen');
  const inspector = page.getByTestId('inspector');
  await expect(inspector).toContainText('Expires after');
  await expect(inspector).toContainText('Overwrite an existing key');
  await expect(inspector).not.toContainText('Ttl (s)');
  await select(page, 'create');
  for (const label of ['URL', 'Timeout per attempt', 'Backoff', 'Longest retry delay', 'Dry-run answer']) {
    await expect(inspector.locator('label, .control-label, legend').filter({ hasText: new RegExp(`^${label.replace(/[()]/g, '\\$&')}\\*?$`) }).first()).toBeVisible();
  }
});

test('secrets in the editor: declared in the workflow, previewed as masks in a header, refused elsewhere', async ({ page }) => {
  await openEditor(page);
  await openWorkflow(page, 'invoice-paid-once');
  await page.getByTestId('tab-input').click();
  await page.getByTestId('sample-select').selectOption('stripe/invoice.paid.json');

  // Not declared yet: the preview says what a run would say.
  await select(page, 'create');
  const header = page.getByTestId('map-headers-value-0').locator('textarea');
  await header.fill('Bearer {{ env.E2E_API_TOKEN }}');
  const preview = page.getByTestId('map-headers-value-0').getByTestId('tpl-preview');
  await expect(preview).toHaveAttribute('data-state', 'error');
  await expect(preview).toContainText('add "E2E_API_TOKEN" to the workflow\'s `secrets`');

  // Declared on the workflow: a header shows the mask, never the value.
  await page.keyboard.press('Escape');
  await page.locator('.react-flow__pane').click({ position: { x: 5, y: 5 } });
  const secrets = page.getByTestId('workflow-secrets-field');
  await expect(secrets).toBeVisible();
  await secrets.fill('E2E_API_TOKEN');
  await select(page, 'create');
  await header.click();
  await expect(preview).toHaveAttribute('data-state', 'ok');
  await expect(page.getByTestId('map-headers-value-0').getByTestId('tpl-preview-value')).toHaveText(/^Bearer ••••/);
  await page.getByTestId('map-headers').scrollIntoViewIfNeeded();
  await page.getByTestId('map-headers').screenshot({ path: '../docs/screenshots/secret-preview.png' });

  // A transformed secret, or one in the body, fails naming the secret.
  await header.fill('{{ env.E2E_API_TOKEN | reverse }}');
  await expect(preview).toHaveAttribute('data-state', 'error');
  await expect(preview).toContainText('secret `env.E2E_API_TOKEN` cannot be transformed');
});
