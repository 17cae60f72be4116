import type { Api } from './api';
import { SseParser } from './sse';
import { parseJson, stringifyJson } from './json';
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
  Problem,
  RunEvent,
  RunFilter,
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

/** The API over HTTP against `fluxo serve` (same origin by default), with a bearer token. */
export class HttpApi implements Api {
  readonly transport = 'http' as const;
  constructor(
    // Not readonly: `regenerateToken` switches to the new one.
    private token: string,
    private readonly base = '',
  ) {}

  webhookBase(): Promise<string> {
    return Promise.resolve(`${this.base || window.location.origin}/hooks`);
  }

  notices(): Promise<string[]> {
    return Promise.resolve([]);
  }

  /**
   * One call. Bodies are written with {@link stringifyJson}; answers are read with
   * {@link parseJson} (integers beyond 2^53 kept exactly: run inputs, step outputs, Memory
   * values) unless `lossless` is false (workflow definitions, which the schema forms edit as
   * plain numbers), then `JSON.parse`.
   */
  private async request<T>(method: string, path: string, body?: unknown, headers: Record<string, string> = {}, lossless = true): Promise<T> {
    let resp: Response;
    try {
      resp = await fetch(`${this.base}/api/v1${path}`, {
        method,
        headers: {
          Authorization: `Bearer ${this.token}`,
          ...(body === undefined ? {} : { 'Content-Type': 'application/json' }),
          ...headers,
        },
        body: body === undefined ? undefined : stringifyJson(body),
      });
    } catch (e) {
      throw new ApiError('network', `cannot reach the Fluxo server: ${(e as Error).message}`);
    }
    if (resp.status === 204) return undefined as T;
    const text = await resp.text();
    let json: unknown = undefined;
    try {
      json = text ? (lossless ? parseJson(text) : JSON.parse(text)) : undefined;
    } catch {
      /* not JSON */
    }
    if (!resp.ok) {
      const p = (json ?? {}) as Partial<Problem> & Record<string, unknown>;
      throw new ApiError(
        p.code ?? `http_${resp.status}`,
        p.detail ?? p.title ?? (text || resp.statusText),
        resp.status,
        p.problems,
        p,
      );
    }
    return json as T;
  }

  async listWorkflows(): Promise<WorkflowSummary[]> {
    return (await this.request<{ workflows: WorkflowSummary[] }>('GET', '/workflows', undefined, {}, false)).workflows;
  }
  getWorkflow(id: string): Promise<Workflow> {
    return this.request('GET', `/workflows/${encodeURIComponent(id)}`, undefined, {}, false);
  }
  saveWorkflow(id: string, workflow: Workflow): Promise<WithWorkflow<WorkflowSaved>> {
    return this.request('PUT', `/workflows/${encodeURIComponent(id)}`, workflow, {}, false);
  }
  async getDraft(id: string): Promise<WithWorkflow<Draft> | null> {
    try {
      return await this.request<WithWorkflow<Draft>>('GET', `/workflows/${encodeURIComponent(id)}/draft`, undefined, {}, false);
    } catch (e) {
      if (e instanceof ApiError && e.code === 'draft_not_found') return null;
      throw e;
    }
  }
  saveDraft(id: string, workflow: Workflow): Promise<DraftSaved> {
    return this.request('PUT', `/workflows/${encodeURIComponent(id)}/draft`, workflow, {}, false);
  }
  async discardDraft(id: string): Promise<void> {
    try {
      await this.request('DELETE', `/workflows/${encodeURIComponent(id)}/draft`);
    } catch (e) {
      if (!(e instanceof ApiError && e.code === 'draft_not_found')) throw e;
    }
  }
  publishWorkflow(id: string): Promise<WithWorkflow<WorkflowSaved>> {
    return this.request('POST', `/workflows/${encodeURIComponent(id)}/publish`, undefined, {}, false);
  }
  deleteWorkflow(id: string): Promise<void> {
    return this.request('DELETE', `/workflows/${encodeURIComponent(id)}`);
  }
  validateWorkflow(workflow: Workflow): Promise<Validation> {
    return this.request('POST', '/workflows/validate', workflow, {}, false);
  }
  dryRun(id: string, input: unknown, workflow?: Workflow): Promise<RunRecord> {
    return this.request('POST', `/workflows/${encodeURIComponent(id)}/dry-run`, workflow ? { input, workflow } : { input });
  }
  startRun(id: string, input: unknown): Promise<RunRecord> {
    // A person pressed Run: `manual`, as the desktop app records it.
    return this.request('POST', `/workflows/${encodeURIComponent(id)}/runs`, { input, trigger: 'manual' }, { Prefer: 'respond-async' });
  }
  getRun(id: string): Promise<RunRecord> {
    // The input may be shown, edited and sent back (replay with edited input): lossless.
    return this.request('GET', `/runs/${encodeURIComponent(id)}`);
  }
  runDeliveries(id: string): Promise<Deliveries> {
    return this.request('GET', `/runs/${encodeURIComponent(id)}/deliveries`);
  }
  checkWorkflow(id: string, event: unknown, options: CheckOptions = {}): Promise<CheckReport> {
    const body: Record<string, unknown> = { event };
    if (options.idPaths?.length) body.id_paths = options.idPaths;
    if (options.workflow) body.workflow = options.workflow;
    return this.request('POST', `/workflows/${encodeURIComponent(id)}/check`, body);
  }
  listSchedules(): Promise<ScheduledWorkflow[]> {
    return this.request('GET', '/schedules');
  }
  previewSchedule(cron: string, timezone?: string, count?: number): Promise<SchedulePreview> {
    return this.request('GET', `/schedules/preview${queryString({ cron, timezone, count })}`);
  }
  stepKinds(): Promise<StepKind[]> {
    return this.request('GET', '/step-kinds', undefined, {}, false);
  }
  async templates(): Promise<WithWorkflow<Template>[]> {
    return (await this.request<{ templates: WithWorkflow<Template>[] }>('GET', '/templates', undefined, {}, false)).templates;
  }
  previewTemplate(request: TemplatePreview): Promise<TemplatePreviewAnswer> {
    return this.request('POST', '/templates/preview', request);
  }
  async samplePayloads(): Promise<SamplePayload[]> {
    return (await this.request<{ payloads: SamplePayload[] }>('GET', '/sample-payloads')).payloads;
  }
  async connectors(): Promise<ConnectorEntry[]> {
    return (await this.request<{ connectors: ConnectorEntry[] }>('GET', '/connectors')).connectors;
  }
  async listConnections(): Promise<ConnectionView[]> {
    return (await this.request<{ connections: ConnectionView[] }>('GET', '/connections')).connections;
  }
  putConnection(id: string, connection: ConnectionInput): Promise<ConnectionView> {
    return this.request('PUT', `/connections/${encodeURIComponent(id)}`, connection);
  }
  async deleteConnection(id: string): Promise<void> {
    await this.request('DELETE', `/connections/${encodeURIComponent(id)}`);
  }
  testConnection(id: string): Promise<ConnectionTest> {
    return this.request('POST', `/connections/${encodeURIComponent(id)}/test`);
  }
  startOAuth(start: OAuthStartInput): Promise<OAuthStarted> {
    return this.request('POST', '/connections/oauth/start', start);
  }
  oauthStatus(state: string): Promise<OAuthFlow> {
    return this.request('GET', `/connections/oauth/${encodeURIComponent(state)}`);
  }

  listRuns(query: RunQuery): Promise<RunPage> {
    return this.request('GET', `/runs${queryString(query)}`);
  }
  runStats(query: RunStatsQuery): Promise<RunStats> {
    return this.request('GET', `/runs/stats${queryString(query)}`);
  }
  async exportRuns(query: RunQuery, options: ExportOptions, onProgress?: (bytes: number) => void, signal?: AbortSignal): Promise<ExportResult> {
    const q = { ...query, limit: undefined, cursor: undefined, format: options.format, fields: options.fields?.trim() };
    let resp: Response;
    try {
      resp = await fetch(`${this.base}/api/v1/runs/export${queryString(q)}`, { headers: { Authorization: `Bearer ${this.token}` }, signal });
    } catch (e) {
      if ((e as Error).name === 'AbortError') throw e;
      throw new ApiError('network', `cannot reach the Fluxo server: ${(e as Error).message}`);
    }
    if (!resp.ok || !resp.body) {
      const text = await resp.text();
      let p: { code?: string; detail?: string; title?: string } = {};
      try {
        p = JSON.parse(text) as typeof p;
      } catch {
        /* not JSON */
      }
      throw new ApiError(p.code ?? `http_${resp.status}`, p.detail ?? p.title ?? (text || resp.statusText), resp.status);
    }
    const name = /filename="([^"]+)"/.exec(resp.headers.get('content-disposition') ?? '')?.[1] ?? `fluxo-runs.${options.format}`;
    const type = resp.headers.get('content-type') ?? 'application/octet-stream';
    // Streamed: the parts are kept as they come (no text decoding), then saved as one file.
    const reader = resp.body.getReader();
    const parts: Uint8Array[] = [];
    let bytes = 0;
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      parts.push(value);
      bytes += value.length;
      onProgress?.(bytes);
    }
    saveBlob(name, new Blob(parts as BlobPart[], { type }));
    return { name, bytes };
  }
  replayRun(id: string, options: ReplayOptions): Promise<RunRecord> {
    const body: Record<string, unknown> = { mode: options.mode ?? 'live', version: options.version ?? 'current' };
    if (options.input !== undefined) body.input = options.input;
    return this.request('POST', `/runs/${encodeURIComponent(id)}/replay`, body, options.async ? { Prefer: 'respond-async' } : {}, true);
  }
  previewReplay(id: string, options: ReplayPreviewOptions): Promise<RunPreview> {
    const body: Record<string, unknown> = { version: options.version ?? 'current' };
    if (options.input !== undefined) body.input = options.input;
    return this.request('POST', `/runs/${encodeURIComponent(id)}/replay/preview`, body, {}, true);
  }
  resumeRun(id: string, options: ResumeOptions): Promise<RunRecord> {
    const body = options.fromStep ? { from_step: options.fromStep } : {};
    return this.request('POST', `/runs/${encodeURIComponent(id)}/resume`, body, options.async ? { Prefer: 'respond-async' } : {}, true);
  }
  previewResume(id: string, fromStep?: string): Promise<RunPreview> {
    return this.request('POST', `/runs/${encodeURIComponent(id)}/resume/preview`, fromStep ? { from_step: fromStep } : {}, {}, true);
  }
  previewBulk(filter: RunQueryFilter, version: 'current' | 'original' = 'current'): Promise<BulkSummary> {
    return this.request('POST', '/runs/bulk/preview', { filter: cleanFilter(filter), version }, {}, false);
  }
  startBulk(filter: RunQueryFilter, version: 'current' | 'original' = 'current'): Promise<BulkSummary> {
    return this.request('POST', '/runs/bulk', { filter: cleanFilter(filter), version }, {}, false);
  }
  async memoryNamespaces(): Promise<string[]> {
    return (await this.request<{ namespaces: string[] }>('GET', '/memory')).namespaces;
  }
  async memoryCounts(): Promise<NamespaceCount[]> {
    return (await this.request<{ counts: NamespaceCount[] }>('GET', '/memory', undefined, {}, false)).counts;
  }
  listMemory(namespace: string, query: MemoryQuery): Promise<MemoryPage> {
    return this.request('GET', `/memory/${encodeURIComponent(namespace)}${queryString(query)}`);
  }
  getMemory(namespace: string, key: string): Promise<MemoryEntry> {
    return this.request('GET', `/memory/${encodeURIComponent(namespace)}/${encodeURIComponent(key)}`);
  }
  async deleteMemory(namespace: string, key: string): Promise<void> {
    await this.request('DELETE', `/memory/${encodeURIComponent(namespace)}/${encodeURIComponent(key)}`);
  }
  getSettings(): Promise<SettingsView> {
    return this.request('GET', '/settings', undefined, {}, false);
  }
  saveSettings(settings: AppSettings): Promise<SettingsView> {
    return this.request('PUT', '/settings', settings, {}, false);
  }
  async getToken(): Promise<string> {
    return (await this.request<{ token: string }>('GET', '/settings/token')).token;
  }
  async regenerateToken(): Promise<string> {
    const { token } = await this.request<{ token: string }>('POST', '/settings/token');
    this.token = token;
    return token;
  }

  async subscribeRunEvents(onEvent: (e: RunEvent) => void, onReset?: () => void): Promise<() => void> {
    const ctl = new AbortController();
    // The id of the last event received: a reconnect resumes after it (`Last-Event-ID`), and
    // the server sends every buffered event after it, or `reset` when it cannot.
    let lastEventId = '';
    const open = async () => {
      const headers: Record<string, string> = { Authorization: `Bearer ${this.token}`, Accept: 'text/event-stream' };
      if (lastEventId) headers['Last-Event-ID'] = lastEventId;
      const resp = await fetch(`${this.base}/api/v1/events`, { headers, signal: ctl.signal });
      if (!resp.ok || !resp.body) throw new ApiError(`http_${resp.status}`, 'cannot open the event stream', resp.status);
      return resp.body.pipeThrough(new TextDecoderStream()).getReader();
    };
    const pump = async (reader: ReadableStreamDefaultReader<string>) => {
      const parser = new SseParser((m) => {
        if (m.event === 'reset') {
          onReset?.();
          return;
        }
        if (m.event !== 'run') return;
        try {
          onEvent(parseJson(m.data) as RunEvent);
        } catch {
          /* ignore a malformed event */
        }
      });
      try {
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          parser.push(value);
          lastEventId = parser.lastEventId || lastEventId;
        }
      } catch {
        /* aborted or dropped */
      }
    };
    let reader = await open();
    void (async () => {
      let delay = 500;
      while (!ctl.signal.aborted) {
        await pump(reader);
        // Dropped (a restart, a proxy's timeout, the network): reconnect, resuming after the
        // last id, with a growing pause while the server cannot be reached.
        for (;;) {
          await new Promise((r) => setTimeout(r, delay));
          if (ctl.signal.aborted) return;
          try {
            reader = await open();
            delay = 500;
            break;
          } catch {
            delay = Math.min(delay * 2, 15_000);
          }
        }
      }
    })();
    return () => ctl.abort();
  }
}

/** Hand the browser a file to save (a download named `name`). */
function saveBlob(name: string, blob: Blob): void {
  const url = URL.createObjectURL(blob);
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

/** `?a=1&b=2` from the set, non-empty members of `q` (or `''`). */
export function queryString(q: object): string {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(q)) {
    if (v === undefined || v === null || v === '') continue;
    p.set(k, String(v));
  }
  const s = p.toString();
  return s ? `?${s}` : '';
}

/** The body's `RunFilter`: the set members of the list's filters (unix ms sent as text, which the server reads as such). */
function cleanFilter(f: RunQueryFilter): RunFilter {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(f)) {
    if (v === undefined || v === null || v === '') continue;
    out[k] = String(v);
  }
  return out as RunFilter;
}
