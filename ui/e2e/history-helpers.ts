// Helpers of history.spec.ts: a scriptable local HTTP mock, API calls for seeding runs and
// deliveries, and the Runs view.

import { createServer, type IncomingMessage, type Server } from 'node:http';
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, type APIRequestContext, type Page } from '@playwright/test';
import { baseUrl, token } from './helpers';

const repo = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');

export interface MockRequest {
  method: string;
  path: string;
  headers: IncomingMessage['headers'];
  body: string;
}

/** A local destination that answers 500 (`fail`) or 201 (`ok`) and records every request. */
export interface Mock {
  url: string;
  mode: 'fail' | 'ok';
  requests: MockRequest[];
  close(): Promise<void>;
}

export async function startMock(): Promise<Mock> {
  const mock: Mock = { url: '', mode: 'fail', requests: [], close: async () => {} };
  const server: Server = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      mock.requests.push({ method: req.method ?? '', path: req.url ?? '', headers: req.headers, body });
      if (mock.mode === 'fail') {
        res.writeHead(500, { 'Content-Type': 'application/json' });
        res.end('{"error":"mock is failing"}');
      } else {
        res.writeHead(201, { 'Content-Type': 'application/json' });
        res.end(JSON.stringify({ id: `deal_${mock.requests.length}`, status: 'created' }));
      }
    });
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  const addr = server.address();
  mock.url = `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}`;
  mock.close = () =>
    new Promise<void>((ok) => {
      server.close(() => ok());
      // The engine's HTTP client keeps connections alive: end them, or close waits for their idle timeout.
      server.closeAllConnections();
    });
  return mock;
}

const auth = () => ({ Authorization: `Bearer ${token()}` });

export async function api<T>(request: APIRequestContext, method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<T> {
  const r = await request.fetch(`${baseUrl()}/api/v1${path}`, { method, headers: { ...auth(), ...headers }, data: body });
  expect(r.ok(), `${method} ${path}: ${r.status()} ${await r.text()}`).toBeTruthy();
  const text = await r.text();
  return (text ? JSON.parse(text) : undefined) as T;
}

export interface Run {
  id: string;
  workflow_id: string;
  status: string;
  mode: string;
  trigger: string;
  idempotency_key?: string;
  replay_of?: string;
  replayed_by?: string[];
  steps: { step_id: string; status: string; ports: string[]; attempts: { http_status?: number }[]; output?: Record<string, unknown> }[];
}

/** Start a run and wait for its end (the API answers the finished run). */
export function startRun(request: APIRequestContext, workflow: string, input: unknown, key?: string): Promise<Run> {
  return api<Run>(request, 'POST', `/workflows/${workflow}/runs`, { input }, key ? { 'Idempotency-Key': key } : {});
}

/** Deliver a webhook with an `Idempotency-Key`; returns the run id once the run has ended. */
export async function deliver(request: APIRequestContext, workflow: string, key: string, body: unknown): Promise<Run> {
  const r = await request.post(`${baseUrl()}/hooks/${workflow}`, { headers: { 'Idempotency-Key': key }, data: body });
  expect(r.status(), await r.text()).toBe(202);
  const { run_id } = (await r.json()) as { run_id: string };
  return finished(request, run_id);
}

const FINAL = ['succeeded', 'failed', 'timed_out', 'interrupted'];

/** The run once it has ended. */
export async function finished(request: APIRequestContext, id: string): Promise<Run> {
  let run: Run | null = null;
  await expect
    .poll(
      async () => {
        run = await api<Run>(request, 'GET', `/runs/${id}`);
        return FINAL.includes(run.status);
      },
      { timeout: 30_000 },
    )
    .toBe(true);
  return run!;
}

/** Add (or replace) env variables in the server's settings, keeping the others. */
export async function setEnv(request: APIRequestContext, vars: Record<string, string>): Promise<void> {
  const cur = await api<{ settings: { env: Record<string, string> } & Record<string, unknown> }>(request, 'GET', '/settings');
  await api(request, 'PUT', '/settings', { ...cur.settings, env: { ...cur.settings.env, ...vars } });
}

/** Stripe's invoice.paid payload with its event id replaced. */
export function invoiceEvent(id: string): Record<string, unknown> {
  const p = JSON.parse(readFileSync(resolve(repo, 'tests/fixtures/payloads/stripe/invoice.paid.json'), 'utf8')) as Record<string, unknown>;
  return { ...p, id };
}

/** The invoice-paid-once flow, pointed at `env.E2E_MOCK_URL` with its own Memory namespace. */
export function invoiceFlow(id: string, namespace: string): Record<string, unknown> {
  const wf = JSON.parse(readFileSync(resolve(repo, 'workflows/invoice-paid-once.json'), 'utf8')) as {
    id: string;
    name: string;
    steps: { id: string; config: Record<string, unknown> }[];
  };
  wf.id = id;
  wf.name = `${wf.name} (e2e copy)`;
  for (const s of wf.steps) {
    if (s.config.namespace) s.config.namespace = namespace;
    if (s.id === 'create') s.config.url = '{{ env.E2E_MOCK_URL }}/deals';
  }
  return wf;
}

/** A manual trigger and one POST to the mock, retried twice with a fixed 200 ms wait; no error edge. */
export function flakyFlow(id: string): Record<string, unknown> {
  return {
    id,
    name: 'Flaky call (e2e)',
    version: 1,
    settings: { run_timeout_s: 20 },
    steps: [
      { id: 'start', kind: 'manual_trigger', position: { x: 0, y: 0 }, config: {} },
      {
        id: 'call',
        kind: 'http_request',
        position: { x: 280, y: 0 },
        config: {
          method: 'POST',
          url: '{{ env.E2E_MOCK_URL }}/flaky',
          headers: { 'Idempotency-Key': 'flaky-{{ run.id }}' },
          body: { n: '{{ input.n }}' },
          retries: 2,
          retry_strategy: 'fixed',
          retry_base_delay_ms: 200,
          timeout_s: 5,
        },
      },
    ],
    edges: [{ from: 'start', to: 'call' }],
  };
}

/** Open the Runs view (from the editor, as a user does). */
export async function openRuns(page: Page): Promise<void> {
  await page.goto(`${baseUrl()}/#token=${token()}`);
  await expect(page.getByTestId('editor')).toBeVisible();
  await page.getByTestId('view-runs').click();
  await expect(page.getByTestId('runs-view')).toBeVisible();
  await expect(page.getByTestId('run-list')).toHaveAttribute('data-loading', 'false');
}

export function row(page: Page, runId: string) {
  return page.locator(`[data-testid="run-row"][data-run-id="${runId}"]`);
}

/** The list's load generation (bumped by every reload). */
export async function listGen(page: Page): Promise<number> {
  return Number(await page.getByTestId('run-list').getAttribute('data-gen'));
}

/** Wait until the list has reloaded after generation `before` and the load has answered. */
export async function reloaded(page: Page, before: number): Promise<void> {
  await expect.poll(() => listGen(page)).toBeGreaterThan(before);
  await expect(page.getByTestId('run-list')).toHaveAttribute('data-loading', 'false');
}

/** Set a filter's select and wait for the list to reload. */
export async function filter(page: Page, which: 'workflow' | 'status' | 'mode' | 'trigger' | 'range', value: string): Promise<void> {
  const before = await listGen(page);
  await page.getByTestId(`filter-${which}`).selectOption(value);
  await reloaded(page, before);
}

/** Type into a search filter (`q` or `key`), commit with Enter, and wait for the list. */
export async function search(page: Page, which: 'q' | 'key', text: string): Promise<void> {
  const before = await listGen(page);
  await page.getByTestId(`filter-${which}`).fill(text);
  await page.getByTestId(`filter-${which}`).press('Enter');
  await reloaded(page, before);
}

/** The run ids of the rendered rows, top to bottom. */
export async function rowIds(page: Page): Promise<string[]> {
  return page.locator('[data-testid="run-row"]').evaluateAll((els) => els.map((e) => e.getAttribute('data-run-id') ?? ''));
}

/** The run detail's action `testId`: its button in the header when shown there, else its item in the opened "More" menu. */
export async function detailAction(page: Page, testId: string) {
  const detail = page.getByTestId('run-detail');
  const inline = detail.getByTestId('detail-actions').getByTestId(testId);
  if (await inline.isVisible()) return inline;
  await detail.getByTestId('detail-more').click();
  const item = page.getByRole('menu').getByTestId(testId);
  await expect(item).toBeVisible();
  return item;
}
