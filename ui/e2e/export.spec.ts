// Exports (issue 15): "An export of a run whose input holds `=HYPERLINK("x")` and `-5` opens as
// text and as the number -5". The Runs view's Export asks the server (`GET /runs/export`, with
// the filters and the input columns typed in the menu); the downloaded CSV is opened with a real
// spreadsheet parser (SheetJS), and the JSON Lines export parses line by line.

import { readFileSync } from 'node:fs';
import { expect, test } from '@playwright/test';
import * as XLSX from 'xlsx';
import { apiPut } from './helpers';
import { filter, openRuns, startRun } from './history-helpers';

const uniq = () => Math.random().toString(36).slice(2, 10);

test('a CSV export opens in a spreadsheet with the formula as text and -5 as a number; JSON Lines parse', async ({ page, request }) => {
  const wf = `export-notes-${uniq()}`;
  await apiPut(request, `/workflows/${wf}`, {
    id: wf,
    name: wf,
    version: 1,
    steps: [
      { id: 'start', kind: 'manual_trigger', position: { x: 0, y: 0 }, config: {} },
      { id: 'shape', kind: 'transform', position: { x: 260, y: 0 }, config: { fields: { note: '{{ input.note }}' } } },
    ],
    edges: [{ from: 'start', to: 'shape' }],
  });
  const input = { note: '=HYPERLINK("x")', amount: -5 };
  const run = await startRun(request, wf, input);
  expect(run.status).toBe('succeeded');

  await openRuns(page);
  await filter(page, 'workflow', wf);

  // CSV with two input columns, typed in the export menu.
  await page.getByTestId('export').click();
  await page.getByTestId('export-fields').fill('input.note, input.amount');
  const [csv] = await Promise.all([page.waitForEvent('download'), page.getByTestId('export-csv').click()]);
  expect(csv.suggestedFilename()).toMatch(/^fluxo-runs-\d{8}-\d{6}\.csv$/);
  const book = XLSX.read(readFileSync((await csv.path())!), { type: 'buffer' });
  const sheet = book.Sheets[book.SheetNames[0]];
  const range = XLSX.utils.decode_range(sheet['!ref']!);
  expect(range.e.r).toBe(1); // the header and one run
  const header: string[] = [];
  for (let c = range.s.c; c <= range.e.c; c++) header.push(String(sheet[XLSX.utils.encode_cell({ r: 0, c })]?.v ?? ''));
  const cell = (name: string) => sheet[XLSX.utils.encode_cell({ r: 1, c: header.indexOf(name) })] as XLSX.CellObject;
  expect(header.slice(-2)).toEqual(['input.note', 'input.amount']);
  expect(cell('id').v).toBe(run.id);
  const note = cell('input.note');
  expect(note.t).toBe('s'); // text…
  expect(note.v).toBe(`'=HYPERLINK("x")`);
  expect(note.f).toBeUndefined(); // …never a formula
  const amount = cell('input.amount');
  expect(amount.t).toBe('n');
  expect(amount.v).toBe(-5);
  await expect(page.getByTestId('toast')).toContainText('Exported the runs as CSV');

  // The columns are remembered; JSON Lines carry the whole input.
  await page.getByTestId('export').click();
  await expect(page.getByTestId('export-fields')).toHaveValue('input.note, input.amount');
  const [jsonl] = await Promise.all([page.waitForEvent('download'), page.getByTestId('export-jsonl').click()]);
  const lines = readFileSync((await jsonl.path())!, 'utf8')
    .trimEnd()
    .split('\n')
    .map((l) => JSON.parse(l) as { id: string; input: unknown });
  expect(lines).toHaveLength(1);
  expect(lines[0].id).toBe(run.id);
  expect(lines[0].input).toEqual(input);

  // A bad path is the server's precise problem, shown to the user.
  await page.getByTestId('export').click();
  await page.getByTestId('export-fields').fill('data.customer');
  await page.getByTestId('export-csv').click();
  await expect(page.getByTestId('toast')).toContainText('`data.customer` does not start at `input`');
});

test('the Export menu works from the keyboard, and the Runs view follows a narrower window', async ({ page }) => {
  await openRuns(page);
  const button = page.getByTestId('export');
  const menu = page.getByTestId('export-menu');
  // Enter opens it; Escape closes it with focus on the button, and gives focus back to it
  // from inside the menu.
  await button.focus();
  await page.keyboard.press('Enter');
  await expect(menu).toBeVisible();
  await expect(button).toHaveAttribute('aria-expanded', 'true');
  await page.keyboard.press('Escape');
  await expect(menu).toBeHidden();
  await expect(button).toBeFocused();
  await page.keyboard.press('Enter');
  await page.keyboard.press('Tab');
  await expect(page.getByTestId('export-fields')).toBeFocused();
  await page.keyboard.press('Escape');
  await expect(menu).toBeHidden();
  await expect(button).toBeFocused();
  // Tab past its last item closes it.
  await page.keyboard.press('Enter');
  for (let i = 0; i < 4; i++) await page.keyboard.press('Tab');
  await expect(menu).toBeHidden();
  // From 1440 to 1280 px wide: nothing wider than the window (the chart shrinks with it), so
  // Export and the rows' Replay stay on screen.
  await page.setViewportSize({ width: 1280, height: 720 });
  await expect.poll(() => page.evaluate(() => document.documentElement.scrollWidth)).toBe(1280);
  await expect(button).toBeInViewport();
});
