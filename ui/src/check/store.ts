// The "Check" feature's state: the re-run safety check (`fluxo check`) of what is on the
// canvas, with the run input as the event. Kept apart from the editor's store; it reads the
// canvas, the input and the API from there, and shows its report in the bottom panel's
// "Check" tab.

import { create } from 'zustand';
import { parseJson, type ApiError, type CheckReport, type ValidationProblem } from '../api';
import { useEditor } from '../store/editor';

const idPathsKey = (id: string) => `fluxo.checkIdPaths.${id}`;

/** A report, and what it was made of. */
export interface CheckResult {
  report: CheckReport;
  /** The workflow id on the canvas when the check started. */
  workflowId: string;
  /** The editor's `rev` then (a later edit makes the report stale). */
  rev: number;
  /** The run input then. */
  inputText: string;
  finishedAt: number;
  durationMs: number;
}

/** Why the last check did not give a report. */
export interface CheckFailure {
  workflowId: string;
  code: string;
  message: string;
  problems?: ValidationProblem[];
}

export interface CheckState {
  busy: boolean;
  /** When the running check started (for the elapsed time). */
  startedAt: number | null;
  result: CheckResult | null;
  error: CheckFailure | null;
  /** Bumped by every finished check (tests and the tab can tell a new answer from the last one). */
  seq: number;
  /** The id paths field's text, by workflow id (also kept in localStorage). */
  idPaths: Record<string, string>;

  /** Check the canvas with the run input; the report goes to the "Check" tab. */
  runCheck(): Promise<void>;
  idPathsFor(workflowId: string): string;
  setIdPaths(workflowId: string, text: string): void;
  clear(): void;
}

/** `a, b.c ,, d` → `['a', 'b.c', 'd']`. */
export function parseIdPaths(text: string): string[] {
  return text
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean);
}

function parseEvent(text: string): { ok: true; value: unknown } | { ok: false; error: string } {
  if (!text.trim()) return { ok: true, value: {} };
  try {
    return { ok: true, value: parseJson(text) };
  } catch (e) {
    return { ok: false, error: (e as Error).message };
  }
}

/** "6 of 6 checks passed: safe to re-run" / "2 of 6 checks failed: not safe to re-run". */
export function checkSummary(report: CheckReport): string {
  const total = report.checks.length;
  const failed = report.checks.filter((r) => r.verdict === 'fail').length;
  const passed = report.checks.filter((r) => r.verdict === 'pass').length;
  const s = total === 1 ? '' : 's';
  if (report.passed) return `${passed} of ${total} check${s} passed: safe to re-run`;
  if (failed) return `${failed} of ${total} check${s} failed: not safe to re-run`;
  return `${passed} of ${total} check${s} passed: not safe to re-run`;
}

export const useCheck = create<CheckState>()((set, get) => ({
  busy: false,
  startedAt: null,
  result: null,
  error: null,
  seq: 0,
  idPaths: {},

  async runCheck() {
    const ed = useEditor.getState();
    if (!ed.api || get().busy) return;
    const event = parseEvent(ed.inputText);
    if (!event.ok) {
      ed.setBottomTab('input');
      ed.notify('error', `The run input is not JSON: ${event.error}`);
      return;
    }
    const workflowId = ed.meta.id;
    const rev = ed.rev;
    const inputText = ed.inputText;
    const idPaths = parseIdPaths(get().idPathsFor(workflowId));
    const startedAt = Date.now();
    set({ busy: true, startedAt, error: null });
    ed.setBottomTab('check');
    try {
      const report = await ed.api.checkWorkflow(workflowId, event.value, { idPaths, workflow: ed.toWorkflow() });
      const finishedAt = Date.now();
      set((s) => ({
        result: { report, workflowId, rev, inputText, finishedAt, durationMs: finishedAt - startedAt },
        error: null,
        seq: s.seq + 1,
      }));
    } catch (e) {
      const err = e as ApiError;
      set((s) => ({
        error: { workflowId, code: err.code ?? 'error', message: err.message, problems: err.problems },
        seq: s.seq + 1,
      }));
      const cur = useEditor.getState();
      if (err.problems?.some((p) => p.severity === 'error')) {
        const n = err.problems.filter((p) => p.severity === 'error').length;
        cur.notify('error', `Fix ${n} error${n === 1 ? '' : 's'} before a check`);
      } else if (err.code !== 'invalid_check') {
        cur.notify('error', `Check failed: ${err.message}`);
      }
    } finally {
      set({ busy: false, startedAt: null });
    }
  },

  idPathsFor(workflowId) {
    const known = get().idPaths[workflowId];
    if (known !== undefined) return known;
    try {
      return localStorage.getItem(idPathsKey(workflowId)) ?? '';
    } catch {
      return '';
    }
  },

  setIdPaths(workflowId, text) {
    set((s) => ({ idPaths: { ...s.idPaths, [workflowId]: text } }));
    try {
      if (text.trim()) localStorage.setItem(idPathsKey(workflowId), text);
      else localStorage.removeItem(idPathsKey(workflowId));
    } catch {
      /* private mode: kept for this session only */
    }
  },

  clear() {
    set({ result: null, error: null });
  },
}));
