// Resume (SPEC §4): which runs and steps can be resumed, the step a resume executes from, and
// the resume dialog's state.

import { create } from 'zustand';
import type { ApiError, RunPreview, RunRecord, RunStatus } from '../api';
import { recordedWorkflow } from '../store/workflowFile';
import { useEditor } from '../store/editor';

/** The statuses a resume accepts. */
export const RESUMABLE = new Set<RunStatus>(['failed', 'timed_out', 'interrupted']);

export const isResumable = (status: string): boolean => RESUMABLE.has(status as RunStatus);

export interface ResumeTarget {
  id: string;
  /** The run's mode: a resume keeps it (a preview's run is always dry, so it cannot tell). */
  mode: 'live' | 'dry';
  /** The step to execute from; absent: the failed or in-flight step. */
  fromStep?: string;
  /** A preview already fetched for the same `fromStep` (the detail's button has one). */
  preview?: RunPreview;
}

interface ResumeDialogState {
  target: ResumeTarget | null;
  open(t: ResumeTarget): void;
  close(): void;
}

export const useResumeDialog = create<ResumeDialogState>()((set) => ({
  target: null,
  open: (target) => set({ target }),
  close: () => set({ target: null }),
}));

/** The step a resume executes from: the first step of the preview's dry walk it executes. */
export function resumePoint(p: RunPreview): string | null {
  return p.from_step ?? p.executed[0] ?? null;
}

/** The most recent run that resumed `run` (its `resumed_by` is newest last). */
export function latestResume(run: Pick<RunRecord, 'resumed_by'>): string | null {
  const r = run.resumed_by;
  return r?.length ? r[r.length - 1] : null;
}

/** The lineage's root run: `root_run_id`, or the run itself on records older than lineages. */
export const rootOf = (run: Pick<RunRecord, 'id' | 'root_run_id'>): string => run.root_run_id || run.id;

/**
 * The steps "Resume from here" is offered on: steps that succeeded on the run's main path (reached
 * from the trigger without taking an `error` port), except error handlers. The engine refuses an
 * error handler, and a step behind one would need the error that sent the walk there.
 */
export function resumableSteps(run: RunRecord): Set<string> {
  const out = new Set<string>();
  if (!isResumable(run.status) || latestResume(run)) return out;
  const wf = recordedWorkflow(run);
  if (!wf) return out;
  const kinds = new Map(wf.steps.map((s) => [s.id, s.kind]));
  const first = run.steps[0]?.step_id;
  if (!first) return out;
  const main = new Set([first]);
  const queue = [first];
  while (queue.length) {
    const from = queue.shift()!;
    for (const e of wf.edges) {
      if (e.from !== from || (e.port ?? 'out') === 'error' || main.has(e.to)) continue;
      main.add(e.to);
      queue.push(e.to);
    }
  }
  for (const st of run.steps) {
    if (st.status === 'succeeded' && main.has(st.step_id) && kinds.get(st.step_id) !== 'error_handler') out.add(st.step_id);
  }
  return out;
}

/**
 * The run that already resumed `id`, for an `already_resumed` error: the problem's `resumed_by`
 * (HTTP), else the newest entry of the run's own `resumed_by` (the desktop IPC drops extras).
 */
export async function resumedByOf(e: ApiError, id: string): Promise<string | null> {
  if (e.code !== 'already_resumed') return null;
  if (typeof e.extra.resumed_by === 'string') return e.extra.resumed_by;
  try {
    return latestResume(await useEditor.getState().api!.getRun(id));
  } catch {
    return null;
  }
}
