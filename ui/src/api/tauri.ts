import { invoke } from '@tauri-apps/api/core';
import { listen } from '@tauri-apps/api/event';
import type { Api } from './api';
import { canStringifyRaw, hasLosslessNumber } from './json';
import { ApiError } from './error';
import type {
  AppSettings,
  BulkSummary,
  CheckReport,
  Deliveries,
  Draft,
  DraftSaved,
  MemoryEntry,
  MemoryPage,
  NamespaceCount,
  ProblemItem,
  RunEvent,
  RunPage,
  RunPreview,
  RunRecord,
  RunStats,
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
  Validation,
  WorkflowSaved,
  WorkflowSummary,
} from './schemas';
import type {
  CheckOptions,
  ExportOptions,
  ExportResult,
  MemoryQuery,
  ReplayOptions,
  ReplayPreviewOptions,
  ResumeOptions,
  RunQuery,
  RunQueryFilter,
  RunStatsQuery,
  WithWorkflow,
} from './api';
import type { Workflow } from '../store/workflowFile';

/**
 * The API over the desktop shell's IPC. Command names and arguments (Tauri maps the Rust
 * commands' snake_case parameters to these camelCase keys):
 *
 * | command | args | answer |
 * |---|---|---|
 * | `list_workflows` | – | `WorkflowSummary[]` |
 * | `get_workflow` | `{id}` | `Workflow` |
 * | `save_workflow` | `{id, workflow}` | `{workflow, version, valid, problems}` (saved and published; `workflow_invalid` with errors) |
 * | `get_draft` | `{id}` | `Draft` (`draft_not_found`: none) |
 * | `save_draft` | `{id, workflow}` | `{valid, problems, based_on_version, saved_at}` |
 * | `discard_draft` | `{id}` | – (`draft_not_found`: none) |
 * | `publish_workflow` | `{id}` | `{workflow, version, valid, problems}` (`workflow_invalid` with `problems`) |
 * | `delete_workflow` | `{id}` | – |
 * | `validate_workflow` | `{workflow}` | `{valid, problems}` |
 * | `dry_run` | `{id, input, workflow?}` | `RunRecord` |
 * | `start_run` | `{id, input}` | the queued `RunRecord` |
 * | `get_run` | `{id}` | `RunRecord` |
 * | `run_deliveries` | `{id}` | `Deliveries` (as `GET /runs/{id}/deliveries`) |
 * | `check_workflow` | `{id, event, idPaths, workflow}` (`idPaths`/`workflow` may be null) | `CheckReport` |
 * | `step_kinds` / `templates` / `sample_payloads` | – | arrays |
 * | `list_schedules` | – | `ScheduledWorkflow[]` (as `GET /schedules`) |
 * | `preview_schedule` | `{cron, timezone, count}` (`timezone`/`count` may be null) | `SchedulePreview`; `invalid_schedule` with `problems: [{path, message}]` |
 * | `list_runs` | `{query: RunQuery}` | `{runs, next_cursor?}` (as `GET /runs`) |
 * | `export_runs` | `{query: RunQuery, format, fields}` (`fields` may be null) | `{path, bytes}`: the file written to the Downloads folder (the bytes of `GET /runs/export`) |
 * | `run_stats` | `{query: RunStatsQuery}` | `{bucket_ms, buckets}` (as `GET /runs/stats`) |
 * | `replay_run` | `{id, mode, version, input, wait}` (`input`: null = the original input) | the new `RunRecord` (finished if `wait`, else queued) |
 * | `preview_replay` | `{id, version, input}` | `RunPreview` (nothing stored or sent) |
 * | `resume_run` | `{id, fromStep, wait}` (`fromStep` may be null) | the new `RunRecord` (finished if `wait`, else queued) |
 * | `preview_resume` | `{id, fromStep}` | `RunPreview` (nothing stored or sent) |
 * | `preview_bulk` / `start_bulk` | `{filter: RunQueryFilter, version}` | `BulkSummary` (as `POST /runs/bulk/preview` / `POST /runs/bulk`) |
 * | `memory_namespaces` | – | `string[]` |
 * | `memory_counts` | – | `{namespace, keys, more}[]` |
 * | `memory_list` | `{namespace, prefix, after, limit}` | `{entries, next_after}` |
 * | `memory_get` / `memory_delete` | `{namespace, key}` | `MemoryEntry` / – |
 * | `list_connections` | – | `{connections, key_source}` (`key_source`: where the key lives, in words) |
 * | `app_info` | – | `{listener_url, webhook_base, data_dir, workflows_dir, notices}` |
 * | `get_settings` | – | `{settings, secret_names, effective, data_dir, workflows_dir}` |
 * | `save_settings` | `{settings}` | the same as `get_settings` |
 * | `get_token` / `regenerate_token` | – | the token (string) |
 *
 * Errors cross as `{code, message, problems?}`. Run progress arrives as the `run-event` event
 * with the same payload as the HTTP server's SSE `run` event.
 */
/** The `app_info` command's answer (`src-tauri/src/commands/app.rs`). */
interface AppInfo {
  listener_url: string;
  webhook_base: string;
  data_dir: string;
  workflows_dir?: string | null;
  /** Non-empty only on the first launch. */
  notices?: string[];
}

export class TauriApi implements Api {
  readonly transport = 'tauri' as const;

  private async call<T>(cmd: string, args?: Record<string, unknown>): Promise<T> {
    try {
      return await invoke<T>(cmd, args);
    } catch (e) {
      if (e && typeof e === 'object' && 'code' in e) {
        const x = e as { code: string; message?: string; problems?: ProblemItem[] } & Record<string, unknown>;
        throw new ApiError(x.code, x.message ?? x.code, undefined, x.problems, x);
      }
      throw new ApiError('ipc', String(e));
    }
  }

  async webhookBase(): Promise<string> {
    return (await this.appInfo()).webhook_base;
  }

  async notices(): Promise<string[]> {
    return (await this.appInfo()).notices ?? [];
  }

  /** `app_info` is fixed at launch: asked once. */
  private info?: Promise<AppInfo>;
  private appInfo(): Promise<AppInfo> {
    this.info ??= this.call<AppInfo>('app_info');
    // A failed call is asked again next time.
    this.info.catch(() => (this.info = undefined));
    return this.info;
  }

  listWorkflows(): Promise<WorkflowSummary[]> {
    return this.call('list_workflows');
  }
  getWorkflow(id: string): Promise<Workflow> {
    return this.call('get_workflow', { id });
  }
  saveWorkflow(id: string, workflow: Workflow): Promise<WithWorkflow<WorkflowSaved>> {
    return this.call('save_workflow', { id, workflow });
  }
  async getDraft(id: string): Promise<WithWorkflow<Draft> | null> {
    try {
      return await this.call<WithWorkflow<Draft>>('get_draft', { id });
    } catch (e) {
      if (e instanceof ApiError && e.code === 'draft_not_found') return null;
      throw e;
    }
  }
  saveDraft(id: string, workflow: Workflow): Promise<DraftSaved> {
    return this.call('save_draft', { id, workflow });
  }
  async discardDraft(id: string): Promise<void> {
    try {
      await this.call('discard_draft', { id });
    } catch (e) {
      if (!(e instanceof ApiError && e.code === 'draft_not_found')) throw e;
    }
  }
  publishWorkflow(id: string): Promise<WithWorkflow<WorkflowSaved>> {
    return this.call('publish_workflow', { id });
  }
  deleteWorkflow(id: string): Promise<void> {
    return this.call('delete_workflow', { id });
  }
  validateWorkflow(workflow: Workflow): Promise<Validation> {
    return this.call('validate_workflow', { workflow });
  }
  dryRun(id: string, input: unknown, workflow?: Workflow): Promise<RunRecord> {
    return this.call('dry_run', { id, input, workflow: workflow ?? null });
  }
  startRun(id: string, input: unknown): Promise<RunRecord> {
    return this.call('start_run', { id, input });
  }
  getRun(id: string): Promise<RunRecord> {
    return this.call('get_run', { id });
  }
  runDeliveries(id: string): Promise<Deliveries> {
    return this.call('run_deliveries', { id });
  }
  checkWorkflow(id: string, event: unknown, options: CheckOptions = {}): Promise<CheckReport> {
    return this.call('check_workflow', {
      id,
      event,
      idPaths: options.idPaths?.length ? options.idPaths : null,
      workflow: options.workflow ?? null,
    });
  }
  listSchedules(): Promise<ScheduledWorkflow[]> {
    return this.call('list_schedules');
  }
  previewSchedule(cron: string, timezone?: string, count?: number): Promise<SchedulePreview> {
    return this.call('preview_schedule', { cron, timezone: timezone || null, count: count ?? null });
  }
  stepKinds(): Promise<StepKind[]> {
    return this.call('step_kinds');
  }
  templates(): Promise<WithWorkflow<Template>[]> {
    return this.call('templates');
  }
  samplePayloads(): Promise<SamplePayload[]> {
    return this.call('sample_payloads');
  }
  connectors(): Promise<ConnectorEntry[]> {
    return this.call('connectors');
  }
  async listConnections(): Promise<ConnectionView[]> {
    return (await this.call<{ connections: ConnectionView[] }>('list_connections')).connections;
  }
  async connectionsKeySource(): Promise<string | null> {
    return (await this.call<{ key_source?: string }>('list_connections')).key_source ?? null;
  }
  putConnection(id: string, connection: ConnectionInput): Promise<ConnectionView> {
    return this.call('put_connection', { id, connection });
  }
  deleteConnection(id: string): Promise<void> {
    return this.call('delete_connection', { id });
  }
  testConnection(id: string): Promise<ConnectionTest> {
    return this.call('test_connection', { id });
  }
  startOAuth(start: OAuthStartInput): Promise<OAuthStarted> {
    return this.call('start_oauth_connection', { start });
  }
  oauthStatus(state: string): Promise<OAuthFlow> {
    return this.call('oauth_connection_status', { flow: state });
  }
  previewTemplate(request: TemplatePreview): Promise<TemplatePreviewAnswer> {
    return this.call('preview_template', { request });
  }
  listRuns(query: RunQuery): Promise<RunPage> {
    return this.call('list_runs', { query: clean(query) });
  }
  runStats(query: RunStatsQuery): Promise<RunStats> {
    return this.call('run_stats', { query: clean(query) });
  }
  async exportRuns(query: RunQuery, options: ExportOptions, onProgress?: (bytes: number) => void): Promise<ExportResult> {
    const { limit: _limit, cursor: _cursor, ...filters } = query;
    const r = await this.call<{ path: string; bytes: number }>('export_runs', {
      query: clean(filters),
      format: options.format,
      fields: options.fields?.trim() || null,
    });
    onProgress?.(r.bytes);
    return { name: r.path.split(/[\\/]/).pop() ?? r.path, bytes: r.bytes, path: r.path };
  }
  async replayRun(id: string, options: ReplayOptions): Promise<RunRecord> {
    return this.call('replay_run', {
      id,
      mode: options.mode ?? 'live',
      version: options.version ?? 'current',
      input: ipcValue(options.input),
      wait: !options.async,
    });
  }
  async previewReplay(id: string, options: ReplayPreviewOptions): Promise<RunPreview> {
    return this.call('preview_replay', { id, version: options.version ?? 'current', input: ipcValue(options.input) });
  }
  resumeRun(id: string, options: ResumeOptions): Promise<RunRecord> {
    return this.call('resume_run', { id, fromStep: options.fromStep ?? null, wait: !options.async });
  }
  previewResume(id: string, fromStep?: string): Promise<RunPreview> {
    return this.call('preview_resume', { id, fromStep: fromStep ?? null });
  }
  previewBulk(filter: RunQueryFilter, version: 'current' | 'original' = 'current'): Promise<BulkSummary> {
    return this.call('preview_bulk', { filter: clean(filter), version });
  }
  startBulk(filter: RunQueryFilter, version: 'current' | 'original' = 'current'): Promise<BulkSummary> {
    return this.call('start_bulk', { filter: clean(filter), version });
  }
  memoryNamespaces(): Promise<string[]> {
    return this.call('memory_namespaces');
  }
  memoryCounts(): Promise<NamespaceCount[]> {
    return this.call('memory_counts');
  }
  listMemory(namespace: string, query: MemoryQuery): Promise<MemoryPage> {
    return this.call('memory_list', {
      namespace,
      prefix: query.prefix ?? null,
      after: query.after ?? null,
      limit: query.limit ?? null,
    });
  }
  getMemory(namespace: string, key: string): Promise<MemoryEntry> {
    return this.call('memory_get', { namespace, key });
  }
  deleteMemory(namespace: string, key: string): Promise<void> {
    return this.call('memory_delete', { namespace, key });
  }
  getSettings(): Promise<SettingsView> {
    return this.call('get_settings');
  }
  saveSettings(settings: AppSettings): Promise<SettingsView> {
    return this.call('save_settings', { settings });
  }
  getToken(): Promise<string> {
    return this.call('get_token');
  }
  regenerateToken(): Promise<string> {
    return this.call('regenerate_token');
  }
  async subscribeRunEvents(onEvent: (e: RunEvent) => void): Promise<() => void> {
    // In-process events: no connection to lose, so never a reset.
    return listen<RunEvent>('run-event', (e) => onEvent(e.payload));
  }
}

/**
 * A JSON value for an IPC argument (`undefined` → null, the Rust side's `None`). `invoke`
 * serializes with `JSON.stringify`: an integer beyond 2^53 crosses exactly only where the
 * webview has `JSON.rawJSON`; elsewhere refuse rather than send a rounded number.
 */
function ipcValue(v: unknown): unknown {
  if (v === undefined) return null;
  if (!canStringifyRaw && hasLosslessNumber(v)) {
    throw new ApiError('lossy_number', 'this window cannot send integers beyond 2^53 exactly; use the browser UI (fluxo serve) for this input');
  }
  return v;
}

/** The set, non-empty members of a query (the shell's structs take absent fields as `None`). */
function clean(q: object): Record<string, unknown> {
  return Object.fromEntries(Object.entries(q).filter(([, v]) => v !== undefined && v !== null && v !== ''));
}
