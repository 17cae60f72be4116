import type {
  NamespaceCount,
  TemplatePreviewRequest,
  TemplatePreviewResult,
  AppSettings,
  BulkSummary,
  RunFilter,
  CheckOptions,
  CheckReport,
  Draft,
  DraftSaved,
  MemoryEntry,
  MemoryPage,
  MemoryQuery,
  ReplayOptions,
  ReplayPreviewOptions,
  ResumeOptions,
  ExportOptions,
  ExportResult,
  RunPage,
  RunPreview,
  RunQuery,
  RunStats,
  RunStatsQuery,
  SettingsView,
  RunEvent,
  SchedulePreview,
  ScheduledWorkflow,
  RunRecord,
  SamplePayload,
  SaveResult,
  StepKind,
  Template,
  ValidateResult,
  Workflow,
  WorkflowSummary,
} from './types';

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
  saveWorkflow(id: string, workflow: Workflow): Promise<SaveResult>;
  /** The workflow's draft, or null when it has none. */
  getDraft(id: string): Promise<Draft | null>;
  /** Keep `workflow` as the draft of `id`, even with validation errors; the live version is untouched. */
  saveDraft(id: string, workflow: Workflow): Promise<DraftSaved>;
  /** Delete the draft of `id` (none: resolves all the same); the live version is untouched. */
  discardDraft(id: string): Promise<void>;
  /** Make the draft of `id` live (refused with `workflow_invalid` and its problems when it has errors). */
  publishWorkflow(id: string): Promise<SaveResult>;
  deleteWorkflow(id: string): Promise<void>;
  validateWorkflow(workflow: Workflow): Promise<ValidateResult>;
  /** A dry run; with `workflow`, of that definition (the unsaved canvas) instead of the saved one. */
  dryRun(id: string, input: unknown, workflow?: Workflow): Promise<RunRecord>;
  /** Queue a live run and answer at once with the queued record. */
  startRun(id: string, input: unknown): Promise<RunRecord>;
  getRun(id: string): Promise<RunRecord>;
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
   * ({@link ScheduleProblem}) name the field (`cron`, `timezone`).
   */
  previewSchedule(cron: string, timezone?: string, count?: number): Promise<SchedulePreview>;
  templates(): Promise<Template[]>;
  samplePayloads(): Promise<SamplePayload[]>;
  /** One template rendered as a step would render it, against a sample input and earlier outputs. */
  previewTemplate(request: TemplatePreviewRequest): Promise<TemplatePreviewResult>;
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
  previewBulk(filter: RunFilter, version?: 'current' | 'original'): Promise<BulkSummary>;
  /** Resume (else replay live) every failed live run matching `filter`, as previewed; the new runs are queued and named per original. */
  startBulk(filter: RunFilter, version?: 'current' | 'original'): Promise<BulkSummary>;

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
