import { expect, type APIRequestContext, type Locator, type Page } from '@playwright/test';

export const baseUrl = () => process.env.FLUXO_E2E_URL!;
export const token = () => process.env.FLUXO_E2E_TOKEN!;
export const MOD = process.platform === 'darwin' ? 'Meta' : 'Control';

/** Open the editor with the token in the URL fragment, and wait for it to be ready. */
export async function openEditor(page: Page): Promise<void> {
  await page.goto(`${baseUrl()}/#token=${token()}`);
  await expect(page.getByTestId('editor')).toBeVisible();
  await expect(page.locator('.react-flow__node').first()).toBeVisible();
  await fitDone(page);
}

/** Wait until the canvas has fitted the graph it shows (after opening a workflow, Fit, Layout). */
export async function fitDone(page: Page): Promise<void> {
  await expect(page.getByTestId('canvas')).toHaveAttribute('data-fit-done', 'true');
}

/** The canvas' zoom, from React Flow's viewport transform. */
export async function zoomOf(page: Page): Promise<number> {
  const t = await page.locator('.react-flow__viewport').first().evaluate((e) => (e as HTMLElement).style.transform);
  const m = /scale\(([\d.]+)\)/.exec(t);
  expect(m, `viewport transform ${t}`).not.toBeNull();
  return Number(m![1]);
}

interface Box {
  x: number;
  y: number;
  width: number;
  height: number;
}

/** Every node's box, the canvas' box, and the boxes of what may cover part of it. */
async function canvasLayout(page: Page, scope: string): Promise<{ nodes: Record<string, Box>; canvas: Box; covers: Record<string, Box> }> {
  return page.evaluate((scope) => {
    const box = (e: Element): Box => {
      const r = e.getBoundingClientRect();
      return { x: r.x, y: r.y, width: r.width, height: r.height };
    };
    const nodes: Record<string, Box> = {};
    for (const n of Array.from(document.querySelectorAll(`${scope} .react-flow__node`))) nodes[n.getAttribute('data-id')!] = box(n);
    const covers: Record<string, Box> = {};
    const named: Record<string, string> = {
      minimap: `${scope} .react-flow__minimap`,
      controls: `${scope} .react-flow__controls`,
      'left panel': '[data-testid=left-panel]',
      inspector: '[data-testid=inspector]',
      'bottom panel': '[data-testid=bottom-panel]',
      'top bar': '.fx-topbar',
    };
    for (const [name, sel] of Object.entries(named)) {
      const el = document.querySelector(sel);
      if (el) covers[name] = box(el);
    }
    return { nodes, canvas: box(document.querySelector(`${scope} .react-flow`)!), covers };
  }, scope);
}

const meets = (a: Box, b: Box) => a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height;

/** Every node of the canvas (the editor's, or the one inside `scope`) lies wholly inside it and the window, and under nothing. */
export async function expectWholeFlowInView(page: Page, expected: string[] | null, what: string, scope = '[data-testid=canvas]'): Promise<void> {
  const { nodes, canvas, covers } = await canvasLayout(page, scope);
  const vp = page.viewportSize()!;
  if (expected) expect(Object.keys(nodes).sort(), what).toEqual([...expected].sort());
  expect(Object.keys(nodes).length, what).toBeGreaterThan(0);
  for (const [id, b] of Object.entries(nodes)) {
    const inside =
      b.x >= Math.max(0, canvas.x) &&
      b.y >= Math.max(0, canvas.y) &&
      b.x + b.width <= Math.min(vp.width, canvas.x + canvas.width) &&
      b.y + b.height <= Math.min(vp.height, canvas.y + canvas.height);
    expect(inside, `${what}: node ${id} ${JSON.stringify(b)} inside the canvas ${JSON.stringify(canvas)}`).toBe(true);
    for (const [name, c] of Object.entries(covers)) expect(meets(b, c), `${what}: node ${id} under the ${name}`).toBe(false);
  }
}

/** Call the API directly (for seeding and for checking what the UI saved). */
export async function apiGet<T>(request: APIRequestContext, path: string): Promise<T> {
  const r = await request.get(`${baseUrl()}/api/v1${path}`, { headers: { Authorization: `Bearer ${token()}` } });
  expect(r.ok(), `GET ${path}: ${r.status()}`).toBeTruthy();
  return (await r.json()) as T;
}

export async function apiPut(request: APIRequestContext, path: string, body: unknown): Promise<void> {
  const r = await request.put(`${baseUrl()}/api/v1${path}`, {
    headers: { Authorization: `Bearer ${token()}` },
    data: body,
  });
  expect(r.ok(), `PUT ${path}: ${r.status()} ${await r.text()}`).toBeTruthy();
}

export async function openWorkflow(page: Page, id: string): Promise<void> {
  await page.getByTestId('tab-workflows').click();
  await page.getByTestId(`workflow-item-${id}`).click();
  const dialog = page.getByTestId('confirm-dialog');
  if (await dialog.isVisible()) await page.getByTestId('confirm-ok').click();
  await expect(page.getByTestId('workflow-version')).not.toHaveText('new');
  await expect(page.getByTestId('inspector-workflow').getByTestId('workflow-id')).toHaveValue(id);
  await fitDone(page);
}

/** A new blank workflow with the trigger picked on its empty canvas (default: a manual trigger `start`). */
export async function newBlank(page: Page, trigger = 'manual_trigger'): Promise<void> {
  await page.getByTestId('tab-workflows').click();
  await page.getByTestId('new-workflow').click();
  await page.getByTestId('new-blank').click();
  const dialog = page.getByTestId('confirm-dialog');
  if (await dialog.isVisible()) await page.getByTestId('confirm-ok').click();
  await page.getByTestId(`pick-trigger-${trigger}`).click();
  if (trigger === 'manual_trigger') await expect(page.getByTestId('node-start')).toBeVisible();
  await fitDone(page);
  await page.getByTestId('tab-steps').click();
}

export function node(page: Page, id: string): Locator {
  return page.getByTestId(`node-${id}`);
}

export function edge(page: Page, from: string, port: string, to: string): Locator {
  return page.getByTestId(`edge-${from}:${port}->${to}`);
}

/** Drag a step kind from the palette onto the canvas at (x, y) of the canvas; returns its id. */
export async function dropStep(page: Page, kind: string, x: number, y: number): Promise<string> {
  await page.getByTestId('tab-steps').click();
  const before = await page.locator('.react-flow__node').count();
  await page.getByTestId(`palette-${kind}`).dragTo(page.getByTestId('canvas'), { targetPosition: { x, y } });
  await expect(page.locator('.react-flow__node')).toHaveCount(before + 1);
  const id = await page.getByTestId('step-id').inputValue();
  await expect(node(page, id)).toBeVisible();
  return id;
}

/** Rename the selected step in the inspector. */
export async function renameSelected(page: Page, next: string): Promise<void> {
  const input = page.getByTestId('step-id');
  await input.fill(next);
  await input.press('Enter');
  await expect(node(page, next)).toBeVisible();
}

/** Wire `from`'s port to `to` by dragging between the handles, and wait for the edge. */
export async function connect(page: Page, from: string, port: string, to: string): Promise<void> {
  const src = node(page, from).getByTestId(`handle-${port}`);
  const dst = node(page, to).getByTestId('handle-in');
  const a = (await src.boundingBox())!;
  const b = (await dst.boundingBox())!;
  await page.mouse.move(a.x + a.width / 2, a.y + a.height / 2);
  await page.mouse.down();
  await page.mouse.move(b.x + b.width / 2 - 20, b.y + b.height / 2, { steps: 8 });
  await page.mouse.move(b.x + b.width / 2, b.y + b.height / 2, { steps: 4 });
  await page.mouse.up();
  await expect(edge(page, from, port, to)).toHaveCount(1);
}

/** Try a connection that must be refused; returns after the mouse is released. */
export async function tryConnect(page: Page, from: string, port: string, to: string): Promise<void> {
  const src = node(page, from).getByTestId(`handle-${port}`);
  const dstNode = node(page, to);
  const inHandle = dstNode.getByTestId('handle-in');
  const target = (await inHandle.count()) ? inHandle : dstNode;
  const a = (await src.boundingBox())!;
  const b = (await target.boundingBox())!;
  await page.mouse.move(a.x + a.width / 2, a.y + a.height / 2);
  await page.mouse.down();
  await page.mouse.move(b.x + b.width / 2, b.y + b.height / 2, { steps: 10 });
  await page.mouse.up();
}

/** Whether the title of step `id` lies wholly inside the visible canvas pane. */
export async function isOnCanvas(page: Page, id: string): Promise<boolean> {
  const title = await node(page, id).getByTestId('node-title').boundingBox();
  const pane = await page.locator('.react-flow').boundingBox();
  if (!title || !pane) return false;
  return title.x >= pane.x && title.y >= pane.y && title.x + title.width <= pane.x + pane.width && title.y + title.height <= pane.y + pane.height;
}

/**
 * Select a step by clicking its title. An open inspector narrows the canvas, so a step just
 * added beside the selected one can lie under it, where a click lands on the inspector (seen in
 * CI): the canvas is zoomed out until the title is on screen, and a click that lands while the
 * canvas still moves is retried.
 */
export async function select(page: Page, id: string): Promise<void> {
  const zoomOut = page.locator('.react-flow__controls-zoomout');
  await expect(async () => {
    for (let i = 0; i < 6 && !(await isOnCanvas(page, id)); i++) await zoomOut.click({ timeout: 2_000 });
    await node(page, id).getByTestId('node-title').click({ timeout: 2_000 });
    await expect(page.getByTestId('step-id')).toHaveValue(id, { timeout: 2_000 });
  }).toPass({ timeout: 20_000 });
}

/** Wait until the debounced validation has answered for the current canvas. */
export async function settled(page: Page): Promise<void> {
  await expect(page.getByTestId('validation-status')).toHaveAttribute('data-current', 'true');
}
