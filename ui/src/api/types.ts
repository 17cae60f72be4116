// Shapes of the Fluxo API (SPEC §1, §4, §5). The same shapes cross the Tauri IPC boundary.
//
// The API's own shapes come from the OpenAPI document, generated into ./schema.gen.ts
// (`npm run gen:api`; `make test` fails when it is stale): each is named here once. What the
// document leaves open (a workflow definition is free JSON there; event names are strings) is
// narrowed here, and what the API does not carry (request options, query filters, the
// workflow file's shape the editor works on) is written here. Still written here, as the UI
// reads them: RunRecord, StepRecord, RunPreview, RunSummary, RunPage, MemoryEntry and
// MemoryPage, whose fields the document gives as optional or nullable (`steps`, `attempts`,
// `started_at`, `duration_ms`, `ttl_left_ms`, …: serde defaults and Options) where the UI
// counts on a value.

import type { components } from './schema.gen';

/** The schemas of the OpenAPI document (`components.schemas`). */
export type Schemas = components['schemas'];

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
  run_timeout_s?: number;
  sender_retries?: number;
  [k: string]: unknown;
}

/** A workflow file (`workflows/*.json`). */
export interface Workflow {
  id: string;
  name: string;
  description?: string;
  version: number;
  settings?: WorkflowSettings;
  steps: StepDef[];
  edges: EdgeDef[];
}

/** `GET /workflows` entry. */
export type WorkflowSummary = Schemas['WorkflowSummary'];

export type JsonSchema = Record<string, unknown>;

/** One entry of the step catalog (`GET /step-kinds`). */
export type StepKind = Omit<Schemas['StepKind'], 'config_schema'> & { config_schema: JsonSchema };

export type Problem = Schemas['ValidationProblem'];

/** `GET /schedules` entry: a valid workflow that starts with a `schedule_trigger`. */
export type ScheduledWorkflow = Schemas['ScheduledWorkflow'];

/** `GET /schedules/preview`: the next fire times of a cron expression in its zone. */
export type SchedulePreview = Schemas['SchedulePreview'];

/** A problem of `invalid_schedule` (`ApiError.problems` of that code): which field and why. */
export interface ScheduleProblem {
  path: 'cron' | 'timezone' | string;
  message: string;
}

export type ValidateResult = Schemas['Validation'];

export type SaveResult = Omit<Schemas['WorkflowSaved'], 'workflow'> & { workflow: Workflow };

export type ErrorInfo = Schemas['ErrorInfo'];

export type Attempt = Schemas['Attempt'];

export type StepRunStatus = Schemas['StepStatus'];

export interface StepRecord {
  step_id: string;
  kind: string;
  status: StepRunStatus;
  started_at?: string;
  finished_at?: string;
  duration_ms?: number;
  resolved_config?: unknown;
  output?: unknown;
  error?: ErrorInfo | null;
  attempts: Attempt[];
  /** Ports the walk left this step by. */
  ports: string[];
  /** Not executed in this run (a resume): its recorded output and ports were reused from that run. */
  reused_from?: string;
}

/** `skipped`: a schedule tick that yielded to an earlier run (`overlap: skip`). */
export type RunStatus = Schemas['RunStatus'];

/** A run record (SPEC §4). */
export interface RunRecord {
  id: string;
  workflow_id: string;
  workflow_version?: number;
  trigger?: string;
  mode: 'live' | 'dry';
  status: RunStatus;
  created_at?: string;
  started_at?: string;
  finished_at?: string;
  duration_ms?: number;
  error?: ErrorInfo | null;
  warnings?: string[];
  steps: StepRecord[];
  input?: unknown;
  definition_hash?: string;
  idempotency_key?: string;
  /** The run this one replays. */
  replay_of?: string;
  /** The run whose `fan_out` step started this one. */
  parent_run?: string;
  /** Runs that replayed this one (newest last). */
  replayed_by?: string[];
  /** The first run of this run's lineage (itself unless it resumes another); "" on records older than lineages. */
  root_run_id?: string;
  /** The run this one resumes (SPEC §4 "Resume"). */
  resume_of?: string;
  /** The step a resume executes from, when one was chosen. */
  resume_from?: string;
  /** Runs that resumed this one (newest last). */
  resumed_by?: string[];
  /** A replay whose input was edited (it differs from the replayed run's). */
  input_edited?: boolean;
  /** The workflow definition as it ran. */
  snapshot?: Workflow | Record<string, never>;
}

export type RunTrigger = Schemas['Trigger'];

/** The list view of a run (`GET /runs` entries): everything but input, steps and snapshot. */
export interface RunSummary {
  id: string;
  workflow_id: string;
  workflow_version: number;
  trigger: RunTrigger;
  mode: 'live' | 'dry';
  status: RunStatus;
  idempotency_key?: string;
  replay_of?: string;
  /** The run whose `fan_out` step started this one. */
  parent_run?: string;
  resume_of?: string;
  created_at: string;
  finished_at?: string;
  duration_ms?: number;
  error_code?: string;
  error_message?: string;
}

/** Filters of `GET /runs` (all optional; empty strings are ignored). `since`/`until`: RFC 3339 or unix ms. */
export interface RunQuery {
  workflow?: string;
  status?: RunStatus | '';
  mode?: 'live' | 'dry' | '';
  trigger?: RunTrigger | '';
  /** Exact idempotency/event key. */
  key?: string;
  /** A run id or key, exact or prefix. */
  q?: string;
  since?: string | number;
  until?: string | number;
  /** 1..=500, default 50. */
  limit?: number;
  cursor?: string;
}

/** One page of runs, newest first; `next_cursor` only when more match. */
export interface RunPage {
  runs: RunSummary[];
  next_cursor?: string;
}

export interface RunStatsQuery {
  bucket?: 'minute' | 'hour' | 'day';
  since?: string | number;
  until?: string | number;
  workflow?: string;
}

/** `GET /runs/stats`: counts by status per time bucket (empty buckets left out). */
export type RunStats = Schemas['RunStats'];

export interface ReplayOptions {
  mode?: 'live' | 'dry';
  version?: 'current' | 'original';
  /** A corrected payload to run instead of the original input (absent: the original input). */
  input?: unknown;
  /** Answer at once with the queued run (`Prefer: respond-async`) instead of waiting for the end. */
  async?: boolean;
}

export interface ReplayPreviewOptions {
  version?: 'current' | 'original';
  /** A corrected payload to preview instead of the original input. */
  input?: unknown;
}

export interface ResumeOptions {
  /** The step to execute from (its upstream steps must all have succeeded); absent: the failed or in-flight step. */
  fromStep?: string;
  /** Answer at once with the queued run (`Prefer: respond-async`) instead of waiting for the end. */
  async?: boolean;
}

/** One step with side effects that a previewed resume or replay would execute. */
export type PlannedCall = Schemas['PlannedCall'];

export type PreviewWarning = Schemas['PreviewWarning'];

/** `POST /runs/{id}/resume/preview` and `/replay/preview`: the dry walk of the action; nothing is stored or sent. */
export interface RunPreview {
  /** The dry run the action would produce (not stored). */
  run: RunRecord;
  /** For a resume: the step it executes from (absent: the first step without a record). */
  from_step?: string;
  /** For a resume: the steps reused, not executed again. */
  reused: string[];
  calls: PlannedCall[];
  warnings: PreviewWarning[];
  /** For a replay: resume the replayed run instead (the replay would be stopped by its own claim). */
  resume_instead: boolean;
}

/** A Memory entry (`GET /memory/{ns}/{key}` and listings). */
export interface MemoryEntry {
  namespace: string;
  key: string;
  value: unknown;
  written_at: string;
  expires_at?: string;
  ttl_left_ms?: number;
}

export interface MemoryQuery {
  prefix?: string;
  /** Keys after this one (paging). */
  after?: string;
  /** 1..=1000, default 100. */
  limit?: number;
}

export interface MemoryPage {
  namespace?: string;
  entries: MemoryEntry[];
  next_after?: string | null;
}

/**
 * The settings document (`<data-dir>/settings.json`, `src/settings.rs`). `PUT /settings`
 * REPLACES it: send back the loaded document with only the edited fields changed, never one
 * rebuilt from the fields a form knows (see `settings/model.ts`).
 */
export type AppSettings = Schemas['AppSettings'];

/** `GET|PUT /settings`. */
export type SettingsView = Schemas['SettingsView'];

/** One server-sent `run` event. */
export type RunEvent = Omit<Schemas['RunEvent'], 'event'> & { event: 'run_started' | 'step_finished' | 'run_finished' };

export type Template = Omit<Schemas['Template'], 'workflow'> & { workflow: Workflow };

export type SamplePayload = Schemas['SamplePayload'];

/** The verdict of one row of a re-run safety check; `not_run` when a row it depends on failed. */
export type CheckVerdict = Schemas['Verdict'];

/** One row of a check: what was done, what a workflow safe to re-run does, what this one did. */
export type CheckRow = Schemas['CheckRow'];

/** `POST /workflows/{id}/check`: the re-run safety check against a throw-away sandbox and store. */
export type CheckReport = Schemas['CheckReport'];

export interface CheckOptions {
  /** Dot paths of the event's business ids; empty or absent: the server's default (`id`, plus `data.object.id`). */
  idPaths?: string[];
  /** Check this definition (the unsaved canvas) instead of the saved one. */
  workflow?: Workflow;
}

/** An error from either transport: problem+json over HTTP, `{code, message}` over IPC. */
export class ApiError extends Error {
  readonly code: string;
  readonly status?: number;
  readonly problems?: Problem[];
  /** The other members of the problem (e.g. `resumed_by` of `already_resumed`). */
  readonly extra: Record<string, unknown>;
  constructor(code: string, message: string, status?: number, problems?: Problem[], extra: Record<string, unknown> = {}) {
    super(message);
    this.name = 'ApiError';
    this.code = code;
    this.status = status;
    this.problems = problems;
    this.extra = extra;
  }
}
