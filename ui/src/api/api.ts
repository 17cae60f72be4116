import type { operations } from './schema.gen';
import type {
  AppSettings,
  BulkSummary,
  CheckReport,
  Deliveries,
  Draft,
  DraftSaved,
  MemoryEntry,
  MemoryPage,
  Mode,
  NamespaceCount,
  RunEvent,
  RunPage,
  RunPreview,
  RunRecord,
  RunStats,
  RunStatus,
  SamplePayload,
  ConnectorEntry,
  ConnectionInput,
  ConnectionTest,
  ConnectionView,
  OAuthFlow,
  OAuthStarted,
  OAuthStartInput,
  ScheduledWorkflow,
  SchedulePreview,
  SettingsView,
  StepKind,
  Template,
  TemplatePreview,
  TemplatePreviewAnswer,
  Trigger,
  Validation,
  WorkflowSaved,
  WorkflowSummary,
} from './schemas';
import type { Workflow } from '../store/workflowFile';

// What the client sends that is no schema of the document: query strings (their parameters
// are in the document, and the keys of these types are checked against them below), and the
// options of the calls, which each transport turns into a body, headers or IPC arguments.

/**
 * Filters of `GET /runs` (all optional; empty strings are ignored, as the list's filter form
 * keeps them). `since`/`until`: RFC 3339 or unix ms.
 */
export interface RunQuery {
  workflow?: string;
  status?: RunStatus | '';
  mode?: Mode | '';
  trigger?: Trigger | '';
  /** Exact idempotency/event key. */
  key?: string;
  /** A run id, a key or a value inside the run (a customer id…), exact or prefix. */
  q?: string;
  /** Failure reason, as `GET /runs/stats` groups them (`HTTP 500 at create`). */
  error?: string;
  /** `stopped`: only runs that stopped a duplicate delivery. */
  duplicates?: 'stopped' | '';
  since?: string | number;
  until?: string | number;
  /** 1..=500, default 50. */
  limit?: number;
  cursor?: string;
}

/** The list's filters without paging: which runs the chart counts and a bulk action covers (sent as the `RunFilter` schema, empty members left out). */
export type RunQueryFilter = Omit<RunQuery, 'limit' | 'cursor'>;

/** The list's filters, the range (default: all time, from the oldest matching run) and the bucket (`auto`: ≤ 60 bars). */
export interface RunStatsQuery extends RunQueryFilter {
  bucket?: 'auto' | 'minute' | 'hour' | 'day';
}

/** `GET /memory/{namespace}` query. */
export interface MemoryQuery {
  prefix?: string;
  /** Keys after this one (paging). */
  after?: string;
  /** 1..=1000, default 100. */
  limit?: number;
}

/** The query parameters of operation `Op` in the document. */
type QueryOf<Op extends keyof operations> = NonNullable<operations[Op]['parameters']['query']>;
/** `true` when every key of `Q` is a query parameter of `Op`, else `never`. */
type OnlyParams<Q, Op extends keyof operations> = Exclude<keyof Q, keyof QueryOf<Op>> extends never ? true : never;
// Compile-time checks: a filter the server does not document fails `tsc`.
export const queryParamsDocumented: [
  OnlyParams<RunQuery, 'list_runs'>,
  OnlyParams<RunStatsQuery, 'stats'>,
  OnlyParams<MemoryQuery, 'memory_list'>,
] = [true, true, true];

export interface ReplayOptions {
  mode?: Mode;
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

export interface CheckOptions {
  /** Dot paths of the event's business ids; empty or absent: the server's default (`id`, plus `data.object.id`). */
  idPaths?: string[];
  /** Check this definition (the unsaved canvas) instead of the saved one. */
  workflow?: Workflow;
}

/**
 * An answer whose `workflow` the document gives as free JSON (the definition exactly as stored),
 * read by the editor as its workflow file model.
 */
export type WithWorkflow<T extends { workflow?: unknown }> = Omit<T, 'workflow'> & { workflow: Workflow };

/** What {@link Api.exportRuns} writes (the options of `GET /runs/export`). */
export interface ExportOptions {
  /** `csv`: the summary columns plus `fields`; `jsonl`: one JSON object per run (its summary and whole input). */
  format: 'csv' | 'jsonl';
  /**
   * CSV input columns: comma-separated dot paths from `input` (`input.data.object.customer,input.amount`).
   * Empty or absent: one `input` column holding the whole input as JSON.
   */
  fields?: string;
}

/** Where an export went (the browser's download or the desktop's file). */
export interface ExportResult {
  /** The file name. */
  name: string;
  /** Its size in bytes. */
  bytes: number;
  /** The full path where the desktop app wrote it (absent in the browser: a download). */
  path?: string;
}

/**
 * Everything the editor asks of Fluxo. Two transports implement it: {@link HttpApi}
 * (`fluxo serve`, bearer token) and {@link TauriApi} (the desktop shell's IPC commands).
 * Both reject with an `ApiError` carrying a stable `code`.
 */
export interface Api {
  /** `http` or `tauri`: the UI hides the token screen inside the desktop shell. */
  readonly transport: 'http' | 'tauri';
  /** Where webhooks reach this engine: `<listener>/hooks` (the app's local listener, or this server). */
  webhookBase(): Promise<string>;
  /**
   * Plain-words notices of this launch, to show once: the desktop app's first launch says its
   * seeded webhooks are unsigned and how to require signatures (`app_info().notices`). Always
   * empty in the browser.
   */
  notices(): Promise<string[]>;
  listWorkflows(): Promise<WorkflowSummary[]>;
  /** The workflow file exactly as stored. */
  getWorkflow(id: string): Promise<Workflow>;
  /**
   * Saves and publishes (the engine bumps the version): what webhooks, schedules and runs use
   * from now on. A definition with validation errors is refused (`workflow_invalid`).
   */
  saveWorkflow(id: string, workflow: Workflow): Promise<WithWorkflow<WorkflowSaved>>;
  /** The workflow's draft, or null when it has none. */
  getDraft(id: string): Promise<WithWorkflow<Draft> | null>;
  /** Keep `workflow` as the draft of `id`, even with validation errors; the live version is untouched. */
  saveDraft(id: string, workflow: Workflow): Promise<DraftSaved>;
  /** Delete the draft of `id` (none: resolves all the same); the live version is untouched. */
  discardDraft(id: string): Promise<void>;
  /** Make the draft of `id` live (refused with `workflow_invalid` and its problems when it has errors). */
  publishWorkflow(id: string): Promise<WithWorkflow<WorkflowSaved>>;
  deleteWorkflow(id: string): Promise<void>;
  validateWorkflow(workflow: Workflow): Promise<Validation>;
  /** A dry run; with `workflow`, of that definition (the unsaved canvas) instead of the saved one. */
  dryRun(id: string, input: unknown, workflow?: Workflow): Promise<RunRecord>;
  /** Queue a live run and answer at once with the queued record. */
  startRun(id: string, input: unknown): Promise<RunRecord>;
  getRun(id: string): Promise<RunRecord>;
  /** A run's deliveries: the one that started it and every duplicate of it Fluxo stopped. */
  runDeliveries(id: string): Promise<Deliveries>;
  /**
   * The re-run safety check (`fluxo check`) with `event`: the same event twice, a timeout after
   * a write, a new id, a forced failure with compensation, a replay; against a throw-away
   * sandbox and store. With `options.workflow`, of that definition (the unsaved canvas).
   */
  checkWorkflow(id: string, event: unknown, options?: CheckOptions): Promise<CheckReport>;
  stepKinds(): Promise<StepKind[]>;

  // Schedules (issue 12)
  /** Every valid workflow that starts with a `schedule_trigger`, with its next tick. */
  listSchedules(): Promise<ScheduledWorkflow[]>;
  /**
   * The next `count` (default 5, at most 20) fire times of `cron` in `timezone` (default `UTC`),
   * by the scheduler's own rules. Rejects with `invalid_schedule`, whose `problems`
   * ({@link FieldProblem}) name the field (`cron`, `timezone`).
   */
  previewSchedule(cron: string, timezone?: string, count?: number): Promise<SchedulePreview>;
  templates(): Promise<WithWorkflow<Template>[]>;
  samplePayloads(): Promise<SamplePayload[]>;
  /** The connectors and their operations (`GET /connectors`). */
  connectors(): Promise<ConnectorEntry[]>;
  /** Connections, secrets masked (`GET /connections`). */
  listConnections(): Promise<ConnectionView[]>;
  /**
   * Where the key encrypting the connections lives, in words (the desktop only: the OS keyring
   * entry, or the data dir's key file and why the keyring was not used).
   */
  connectionsKeySource?(): Promise<string | null>;
  /** Add or replace one; a mask sent back keeps the stored secret. */
  putConnection(id: string, connection: ConnectionInput): Promise<ConnectionView>;
  deleteConnection(id: string): Promise<void>;
  /** "Test connection": the app's test request as connection `id` (`{ok, status, message}`). */
  testConnection(id: string): Promise<ConnectionTest>;
  /**
   * Start connecting an app with OAuth 2 (PKCE, loopback redirect): the authorize URL to open
   * and the flow's `state`. The desktop app opens the system browser itself.
   */
  startOAuth(start: OAuthStartInput): Promise<OAuthStarted>;
  /** What became of an OAuth connect flow (`pending`, `connected`, `failed`). */
  oauthStatus(state: string): Promise<OAuthFlow>;
  /** One template rendered as a step would render it, against a sample input and earlier outputs. */
  previewTemplate(request: TemplatePreview): Promise<TemplatePreviewAnswer>;
  /**
   * Subscribe to run progress. Resolves once the subscription is live (so a run started after
   * it cannot be missed) with the function that ends it. Over HTTP a dropped stream reconnects
   * by itself and resumes after the last event id (`Last-Event-ID`: every missed event, once);
   * when the server cannot resume (the missed events left its buffer of 1,024, or it
   * restarted) `onReset` is called: reload what is shown.
   */
  subscribeRunEvents(onEvent: (e: RunEvent) => void, onReset?: () => void): Promise<() => void>;

  // Run history, replay (issue 5)
  /** A page of run summaries matching the filters, newest first (`next_cursor` for the next). */
  listRuns(query: RunQuery): Promise<RunPage>;
  /** Counts by status per time bucket. */
  runStats(query: RunStatsQuery): Promise<RunStats>;
  /**
   * Export every run matching `query` (its `limit` and `cursor` ignored) with the server's one
   * export (`GET /runs/export`): CSV that spreadsheets open safely (text that looks like a
   * formula gets a leading `'`, numbers stay numbers) or JSON Lines. The browser saves it as a
   * download; the desktop app writes it to the Downloads folder. `onProgress` gets the bytes
   * received so far. Errors: `invalid_parameter`, `invalid_field` (a bad `fields` path).
   */
  exportRuns(query: RunQuery, options: ExportOptions, onProgress?: (bytes: number) => void, signal?: AbortSignal): Promise<ExportResult>;
  /**
   * Replay a run: a new run of its input (or of `options.input`, a corrected payload) linked by
   * `replay_of` (both ways). Waits for the end and answers the new run; with `async`, answers
   * the queued run at once.
   */
  replayRun(id: string, options: ReplayOptions): Promise<RunRecord>;
  /** The dry walk of a replay (nothing stored or sent): its run, calls, warnings (`own_claim` → `resume_instead`). */
  previewReplay(id: string, options: ReplayPreviewOptions): Promise<RunPreview>;
  /**
   * Resume a failed, timed-out or interrupted run (SPEC §4): a new run linked by `resume_of`
   * that reuses the steps that succeeded and executes from the failed/in-flight step or
   * `options.fromStep`, in the original's mode. Errors: `nothing_to_resume`, `already_resumed`
   * (`extra.resumed_by`), `invalid_from_step`, `run_not_found`, `workflow_invalid`.
   */
  resumeRun(id: string, options: ResumeOptions): Promise<RunRecord>;
  /** The dry walk of a resume (nothing stored or sent): reused steps, calls sent again with their keys, warnings. */
  previewResume(id: string, fromStep?: string): Promise<RunPreview>;
  /**
   * What a bulk resume/replay of every failed run matching `filter` would do (nothing written):
   * counts (to resume, to replay live, skipped, dry runs excluded) and each live run's action.
   * Error `too_many_runs` past 10,000 runs.
   */
  previewBulk(filter: RunQueryFilter, version?: 'current' | 'original'): Promise<BulkSummary>;
  /** Resume (else replay live) every failed live run matching `filter`, as previewed; the new runs are queued and named per original. */
  startBulk(filter: RunQueryFilter, version?: 'current' | 'original'): Promise<BulkSummary>;

  // Memory browser
  memoryNamespaces(): Promise<string[]>;
  /** Live keys per namespace (at most 10,000 counted each). */
  memoryCounts(): Promise<NamespaceCount[]>;
  listMemory(namespace: string, query: MemoryQuery): Promise<MemoryPage>;
  getMemory(namespace: string, key: string): Promise<MemoryEntry>;
  deleteMemory(namespace: string, key: string): Promise<void>;

  // Settings
  getSettings(): Promise<SettingsView>;
  saveSettings(settings: AppSettings): Promise<SettingsView>;
  /** The API token (shown on request). */
  getToken(): Promise<string>;
  /** A new API token; the old one stops working at once, and this Api uses the new one from now on. */
  regenerateToken(): Promise<string>;
}
