// Workflow names for dry-run labels. A draft's name is only in its run's snapshot (an unsaved
// canvas has no file), so it is read from the run record once and kept for the session; a
// published version's name comes from the workflow list.

import { useEffect } from 'react';
import { create } from 'zustand';
import type { RunRecord, RunSummary } from '../api';
import { useEditor } from '../store/editor';
import { recordedWorkflow } from '../store/workflowFile';

const useNames = create<Record<string, string>>(() => ({}));
const asked = new Set<string>();

/** Remember the workflow name a run record ran with (e.g. one the detail has loaded). */
export function learnRunName(run: RunRecord): void {
  const name = recordedWorkflow(run)?.name;
  if (name && useNames.getState()[run.id] !== name) useNames.setState({ [run.id]: name });
}

/** The workflow name to label a dry run with (undefined until known, and for live runs). */
export function useDryRunName(r: RunSummary): string | undefined {
  const draft = r.mode === 'dry' && r.workflow_version === 0;
  const known = useNames((s) => s[r.id]);
  const listed = useEditor((s) => (r.mode === 'dry' && !draft ? s.workflows.find((w) => w.id === r.workflow_id)?.name : undefined));
  useEffect(() => {
    const api = useEditor.getState().api;
    if (!draft || known || asked.has(r.id) || !api) return;
    asked.add(r.id);
    api.getRun(r.id).then(learnRunName, () => asked.delete(r.id));
  }, [draft, known, r.id]);
  return known ?? listed;
}
