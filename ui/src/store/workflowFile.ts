// The workflow file (`workflows/*.json`, SPEC §1) as the editor works on it: what the canvas
// graph is converted from and back to (./graph.ts), saved, drafted, validated, dry-run and
// checked. The API carries a definition as free JSON (it keeps and answers files exactly as
// written, invalid drafts included), so this shape is the editor's, not the document's: the
// API client reads the definitions it answers as this (`WithWorkflow` in api/api.ts).

export interface Position {
  x: number;
  y: number;
}

/** One step of a workflow file. */
export interface StepDef {
  id: string;
  kind: string;
  name?: string;
  position?: Position;
  config: Record<string, unknown>;
}

/** An edge leaves a named port (`out` when omitted) and enters a step. */
export interface EdgeDef {
  from: string;
  port?: string;
  to: string;
}

export interface WorkflowSettings {
  /** Seconds, or a duration with units (`2m`, `90s`). */
  run_timeout_s?: number | string;
  sender_retries?: number;
  /** The built-in sample payload the editor preselects as the run input (`stripe/invoice.paid.json`). */
  sample?: string;
  [k: string]: unknown;
}

/** A workflow file (`workflows/*.json`). */
export interface Workflow {
  id: string;
  name: string;
  description?: string;
  version: number;
  settings?: WorkflowSettings;
  /** The secret env variables the workflow reads (`["API_KEY"]`); any other secret is refused. */
  secrets?: string[];
  steps: StepDef[];
  edges: EdgeDef[];
}

/**
 * The definition a run recorded (`RunRecord.snapshot`, free JSON in the document: `null` on a
 * record without one, `{}` on old ones), as a workflow file when it has steps, else null.
 */
export function recordedWorkflow(run: { snapshot?: unknown }): Workflow | null {
  const s = run.snapshot;
  return s && typeof s === 'object' && Array.isArray((s as { steps?: unknown }).steps) ? (s as Workflow) : null;
}
