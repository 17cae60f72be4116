// Replay: the prediction shown before a live replay (from the replay preview's dry walk, which
// is never stored), and the dialog's state.

import { create } from 'zustand';
import type { Api, PlannedCall, ReplayPreviewOptions, RunPreview, RunRecord, StepRecord } from '../api';

export interface ReplayTarget {
  id: string;
  workflow_id: string;
  status: string;
  mode: 'live' | 'dry';
}

interface ReplayDialogState {
  target: ReplayTarget | null;
  open(t: ReplayTarget): void;
  close(): void;
}

export const useReplayDialog = create<ReplayDialogState>()((set) => ({
  target: null,
  open: (target) => set({ target }),
  close: () => set({ target: null }),
}));

/** "Replay selected": the runs to replay live, each previewed first, and the version to replay with. */
interface BulkReplayDialogState {
  ids: string[] | null;
  version: 'current' | 'original';
  open(ids: string[], version: 'current' | 'original'): void;
  close(): void;
}

export const useBulkReplayDialog = create<BulkReplayDialogState>()((set) => ({
  ids: null,
  version: 'current',
  open: (ids, version) => set({ ids, version }),
  close: () => set({ ids: null }),
}));

export interface Prediction {
  /** One sentence: what the live replay is predicted to do. */
  headline: string;
  /** The facts behind it, one per line. */
  lines: { text: string; tone: 'info' | 'warn' | 'error' | 'ok' }[];
  /** The route each router takes, by step id. */
  routes: Record<string, string>;
  /** Steps that would make an external call (HTTP, publish). */
  calls: string[];
  status: string;
}

type Obj = Record<string, unknown>;
const obj = (v: unknown): Obj => (v && typeof v === 'object' && !Array.isArray(v) ? (v as Obj) : {});
const str = (v: unknown): string => (typeof v === 'string' ? v : v === undefined || v === null ? '' : JSON.stringify(v));

function routeOf(st: StepRecord): string | null {
  const out = obj(st.output);
  if (typeof out.route === 'string') return out.route;
  if (Array.isArray(out.routes) && out.routes.length) return out.routes.map(str).join(', ');
  const ports = (st.ports ?? []).filter((p) => p !== 'error');
  return ports.length ? ports.join(', ') : null;
}

/**
 * What a dry run predicts a live run would do: Memory claims that exist (`written: false`) or
 * are free, the route each router takes, the external calls it would make (with the
 * Idempotency-Key of each, from the preview's `calls`), and where it would fail.
 */
export function predict(dry: RunRecord, planned: PlannedCall[] = []): Prediction {
  const lines: Prediction['lines'] = [];
  const routes: Record<string, string> = {};
  const calls: string[] = [];
  let existsClause: string | null = null;
  let firstRoute: string | null = null;
  let failure: string | null = null;

  for (const st of dry.steps ?? []) {
    const rc = obj(st.resolved_config);
    const out = obj(st.output);
    if (st.kind === 'memory') {
      const ns = str(rc.namespace);
      const key = str(out.key) || str(rc.key);
      const where = `${ns}/${key}`;
      const op = str(rc.operation);
      if (op === 'write' && out.written === false) {
        const clause = `memory key ${where} exists`;
        existsClause ??= clause;
        lines.push({ text: `${clause} (step ${st.step_id}: the write is refused, ${str(out.reason) || 'exists'})`, tone: 'warn' });
      } else if (op === 'write' && out.written === true) {
        lines.push({ text: `memory key ${where} is free: step ${st.step_id} will write it`, tone: 'ok' });
      } else if (op === 'read') {
        lines.push({ text: `memory key ${where} ${out.found ? 'is found' : 'is not found'} (step ${st.step_id})`, tone: 'info' });
      } else if (op === 'delete') {
        lines.push({ text: `step ${st.step_id} will delete memory key ${where}${out.deleted === false ? ' (not there)' : ''}`, tone: 'info' });
      }
    } else if (st.kind === 'router') {
      const r = routeOf(st);
      if (r) {
        routes[st.step_id] = r;
        firstRoute ??= r;
        lines.push({ text: `router ${st.step_id} takes the ${r} route`, tone: 'info' });
      }
    } else if (st.kind === 'http_request' || st.kind === 'publish_output') {
      const method = st.kind === 'publish_output' ? 'POST' : str(rc.method) || 'GET';
      const url = str(rc.url);
      calls.push(st.step_id);
      const plan = planned.find((c) => c.step_id === st.step_id);
      const keyText = !plan ? '' : plan.idempotency_key ? ` with Idempotency-Key ${plan.idempotency_key}` : ' without an Idempotency-Key';
      lines.push({ text: `step ${st.step_id} will call ${method} ${url || '(no url)'}${keyText}`, tone: plan && !plan.repeat_safe ? 'warn' : 'info' });
    }
    if (st.error && st.status === 'failed' && !failure) {
      failure = `step ${st.step_id} fails: ${st.error.code}${st.error.http_status ? ` (HTTP ${st.error.http_status})` : ''}: ${st.error.message}`;
      lines.push({ text: failure, tone: 'error' });
    }
  }

  let headline: string;
  if (existsClause && firstRoute) headline = `${existsClause}: this replay will take the ${firstRoute} route`;
  else if (existsClause) headline = `${existsClause}: the workflow's own dedupe will see this event as processed`;
  else if (dry.status !== 'succeeded' && (failure || dry.error))
    headline = `this replay is predicted to fail: ${failure ?? `${dry.error!.code}: ${dry.error!.message}`}`;
  else if (firstRoute) headline = `this replay will take the ${firstRoute} route${calls.length ? ` and make ${calls.length} external call${calls.length > 1 ? 's' : ''}` : ''}`;
  else if (calls.length) headline = `this replay will make ${calls.length} external call${calls.length > 1 ? 's' : ''} (${calls.join(', ')})`;
  else headline = `this replay is predicted to ${dry.status === 'succeeded' ? 'succeed' : `end ${dry.status}`}`;

  return { headline, lines, routes, calls, status: dry.status };
}

/** What a live replay is predicted to do, in one word: succeed, fail, or nothing (its own lineage's claim stops it). */
export type Outcome = 'succeed' | 'fail' | 'nothing';

export interface ReplayForecast {
  preview: RunPreview;
  prediction: Prediction;
  outcome: Outcome;
}

/** Preview a live replay of run `id` (a dry walk: nothing stored or sent) and predict from it. */
export async function forecastReplay(api: Api, id: string, options: ReplayPreviewOptions): Promise<ReplayForecast> {
  const preview = await api.previewReplay(id, options);
  const prediction = predict(preview.run, preview.calls);
  const outcome: Outcome = preview.warnings.some((w) => w.code === 'own_claim') ? 'nothing' : prediction.status === 'succeeded' ? 'succeed' : 'fail';
  return { preview, prediction, outcome };
}
