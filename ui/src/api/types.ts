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
  steps: StepDef[];
  edges: EdgeDef[];
}

/** `GET /workflows` entry. */
export interface WorkflowSummary {
  id: string;
  name: string;
  version: number;
  valid: boolean;
  errors: number;
  warnings: number;
  trigger: string | null;
  /** The editor keeps an unpublished draft of it. */
  has_draft?: boolean;
  /** Only a draft, never published: no live file, no webhook (version 0). */
  draft_only?: boolean;
}

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

/** A workflow's draft (`GET /workflows/{id}/draft`): what Save keeps; nothing runs it. */
export interface Draft {
  /** The definition exactly as saved (it may not validate; its `id` may be absent). */
  workflow: Workflow;
  /** The live version it was saved over (null: never published). */
  based_on_version: number | null;
  /** Unix ms. */
  saved_at: number;
  /** The live file's version now (null: no live file). */
  live_version: number | null;
}

/** The answer to saving a draft. */
export interface DraftSaved {
  valid: boolean;
  problems: Problem[];
  based_on_version: number | null;
  saved_at: number;
}

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
  /** Runs that resumed this one. */
  resumed_by?: string[];
  /** Runs that replayed this one (newest last). */
  replayed_by?: string[];
  /** A failed run that a later run of its lineage fixed: the first resume or replay (or theirs) that succeeded, live for a live run. */
  fixed_by?: string;
  created_at: string;
  finished_at?: string;
  duration_ms?: number;
  error_code?: string;
  error_message?: string;
  /** The step the final error came from. */
  error_step?: string;
  /** The final error's HTTP status, when it was an HTTP answer. */
  error_http_status?: number;
}

/** Filters of `GET /runs` (all optional; empty strings are ignored). `since`/`until`: RFC 3339 or unix ms. */
/** What {@link Api.exportRuns} writes. */
export interface ExportOptions {
  /** `csv`: the summary columns plus `fields`; `jsonl`: one JSON object per run (its summary and whole input). */
  format: 'csv' | 'jsonl';
  /**
   * CSV input columns: comma-separated dot paths from `input` (`input.data.object.customer,input.amount`).
   * Empty or absent: one `input` column holding the whole input as JSON.
   */
  fields?: string;
}

/** Where an export went. */
export interface ExportResult {
  /** The file name. */
  name: string;
  /** Its size in bytes. */
  bytes: number;
  /** The full path where the desktop app wrote it (absent in the browser: a download). */
  path?: string;
}

export interface RunQuery {
  workflow?: string;
  status?: RunStatus | '';
  mode?: 'live' | 'dry' | '';
  trigger?: RunTrigger | '';
  /** Exact idempotency/event key. */
  key?: string;
  /** A run id, a key or a value inside the run (a customer id…), exact or prefix. */
  q?: string;
  /** Failure reason, as `GET /runs/stats` groups them (`HTTP 500 at create`). */
  error?: string;
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

/** Which runs a bulk action covers: the filters of `GET /runs`, without paging. */
export type RunFilter = Omit<RunQuery, 'limit' | 'cursor'>;

/** What a bulk action does (or did) with one failed live run. */
export interface BulkItem {
  run_id: string;
  /** `resume`, `replay` (live), `skip` (`reason`: `fixed`, `already_resumed`, `not_runnable`), `error` (not started: `reason` is the problem code). */
  action: 'resume' | 'replay' | 'skip' | 'error';
  /** The new (queued) run; on a `fixed`/`already_resumed` skip, the run that fixed or resumed it. */
  new_run_id?: string;
  reason?: string;
  detail?: string;
}

/** `POST /runs/bulk/preview` and `POST /runs/bulk`: every failed run matching a filter, counted, with each live run's action. */
export interface BulkSummary {
  /** Failed, timed-out and interrupted runs matching the filter, dry ones included. */
  matched: number;
  live: number;
  resume: number;
  replay: number;
  skipped: number;
  /** Runs that could not be started (the action only). */
  errors: number;
  /** Dry runs matched and left out: a dry run is never replayed live. */
  dry_excluded: number;
  /** The most runs one action covers (10,000; more is `too_many_runs`). */
  limit: number;
  /** When the set was read (RFC 3339): passed as `filter.until` to act on exactly the previewed runs. */
  as_of: string;
  runs: BulkItem[];
}

/** The list's filters, the range (default: all time, from the oldest matching run) and the bucket (`auto`: ≤ 60 bars). */
export interface RunStatsQuery extends Omit<RunQuery, 'limit' | 'cursor'> {
  bucket?: 'auto' | 'minute' | 'hour' | 'day';
}

/** Nearest-rank duration percentiles of finished runs. */
export interface DurationPercentiles {
  workflow_id?: string;
  count: number;
  p50_ms?: number;
  p95_ms?: number;
  p99_ms?: number;
}

/** `GET /runs/stats`: counts by status per time bucket (empty buckets left out), for the list's filters. */
export interface RunStats {
  bucket_ms: number;
  since?: string;
  until?: string;
  buckets: { start: string; counts: Partial<Record<RunStatus, number>> }[];
  /** Runs matching the filters in the range. */
  total?: number;
  counts?: Partial<Record<RunStatus, number>>;
  /** False past 200,000 matching runs (the figures cover the newest). */
  complete?: boolean;
  duration?: DurationPercentiles;
  durations?: DurationPercentiles[];
  /** Failed runs grouped by reason (`HTTP 500 at create`), most first. */
  failures?: { reason: string; count: number }[];
}

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
  /** The run lineage (its root run) and step that wrote it, when a Memory step did. */
  owner?: { run_id: string; step_id: string };
}

/** Live keys of a namespace (`GET /memory` `counts`); `more`: past 10,000, not all counted. */
export interface NamespaceCount {
  namespace: string;
  keys: number;
  more: boolean;
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

/** `POST /templates/preview`: one template rendered as a step would render it. */
export interface TemplatePreviewRequest {
  template: string;
  /** A router condition (no braces): answered `true`/`false`. */
  expression?: boolean;
  /** The run input (the editor's sample). */
  input?: unknown;
  /** Earlier steps' outputs by step id (from the last run). */
  steps?: Record<string, unknown>;
}

/** The rendered value, or why it does not render; `env_unset`: variables stood in for. */
export interface TemplatePreviewResult {
  value?: unknown;
  error?: string;
  env_unset: string[];
}
