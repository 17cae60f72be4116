// Run history: filters, the loaded runs (newest first, cursor paging), live updates from the
// event stream, the status chart's counts, selection and bulk replay. One zustand store; the
// views read it through selectors.

import { create } from 'zustand';
import type { Api, RunQuery, RunStats, RunStatus, RunSummary, RunTrigger } from '../api';
import { useEditor } from '../store/editor';

export type RangePreset = 'all' | '15m' | '1h' | '24h' | '7d' | '30d' | 'custom';

export const RANGES: { id: RangePreset; label: string; ms?: number }[] = [
  { id: 'all', label: 'All time' },
  { id: '15m', label: 'Last 15 min', ms: 15 * 60_000 },
  { id: '1h', label: 'Last hour', ms: 3_600_000 },
  { id: '24h', label: 'Last 24 h', ms: 86_400_000 },
  { id: '7d', label: 'Last 7 days', ms: 7 * 86_400_000 },
  { id: '30d', label: 'Last 30 days', ms: 30 * 86_400_000 },
  { id: 'custom', label: 'Custom…' },
];

export const STATUSES: RunStatus[] = ['succeeded', 'failed', 'timed_out', 'interrupted', 'running', 'queued'];
export const TRIGGERS: RunTrigger[] = ['webhook', 'api', 'manual', 'replay', 'cli'];
const FINAL = new Set<RunStatus>(['succeeded', 'failed', 'timed_out', 'interrupted']);

export interface Filters {
  workflow: string;
  status: RunStatus | '';
  mode: 'live' | 'dry' | '';
  trigger: RunTrigger | '';
  /** Exact idempotency/event key. */
  key: string;
  /** Run id or key, exact or prefix. */
  q: string;
  range: RangePreset;
  /** Custom range bounds, unix ms (inclusive since, exclusive until). */
  since: number | null;
  until: number | null;
}

export const EMPTY_FILTERS: Filters = {
  workflow: '',
  status: '',
  mode: '',
  trigger: '',
  key: '',
  q: '',
  range: 'all',
  since: null,
  until: null,
};

export interface BulkProgress {
  total: number;
  done: number;
  succeeded: number;
  failed: number;
  errors: string[];
  running: boolean;
  /** New runs, by replayed run id. */
  created: Record<string, string>;
}

const FIRST_PAGE = 100;
const NEXT_PAGE = 300;

/** The API query for filters, with the time range resolved at `now`. */
export function toQuery(f: Filters, now = Date.now()): RunQuery {
  const q: RunQuery = {
    workflow: f.workflow,
    status: f.status,
    mode: f.mode,
    trigger: f.trigger,
    key: f.key.trim(),
    q: f.q.trim(),
  };
  const preset = RANGES.find((r) => r.id === f.range);
  if (preset?.ms) q.since = now - preset.ms;
  if (f.range === 'custom') {
    if (f.since !== null) q.since = f.since;
    if (f.until !== null) q.until = f.until;
  }
  return q;
}

/** Does a run match the (resolved) query? Used for runs that the event stream reports. */
export function matches(r: RunSummary, q: RunQuery): boolean {
  if (q.workflow && r.workflow_id !== q.workflow) return false;
  if (q.status && r.status !== q.status) return false;
  if (q.mode && r.mode !== q.mode) return false;
  if (q.trigger && r.trigger !== q.trigger) return false;
  if (q.key && r.idempotency_key !== q.key) return false;
  if (q.q && !r.id.startsWith(q.q) && !(r.idempotency_key ?? '').startsWith(q.q)) return false;
  const t = Date.parse(r.created_at);
  if (typeof q.since === 'number' && t < q.since) return false;
  if (typeof q.until === 'number' && t >= q.until) return false;
  return true;
}

/** Newest first: by created_at, then id. */
function newer(a: RunSummary, b: RunSummary): boolean {
  return a.created_at === b.created_at ? a.id > b.id : a.created_at > b.created_at;
}

/** The chart's window and bucket for a query. */
export function statsWindow(q: RunQuery, now = Date.now()): { since: number; until: number; bucket: 'minute' | 'hour' | 'day' } {
  const until = typeof q.until === 'number' ? q.until : now + 1;
  const since = typeof q.since === 'number' ? q.since : until - 7 * 86_400_000;
  const span = until - since;
  const bucket = span <= 3 * 3_600_000 ? 'minute' : span <= 8 * 86_400_000 ? 'hour' : 'day';
  return { since, until, bucket };
}

export interface HistoryState {
  filters: Filters;
  /** The resolved query of the loaded list (paging continues with it). */
  query: RunQuery;
  runs: RunSummary[];
  ids: Set<string>;
  nextCursor: string | null;
  loading: boolean;
  error: string | null;
  /** Bumped by every reload: answers of older loads are dropped. */
  gen: number;
  /** Runs that appeared since the list was loaded (live). */
  liveCount: number;
  selected: Set<string>;
  stats: RunStats | null;
  statsError: string | null;
  statsWindow: { since: number; until: number; bucket: 'minute' | 'hour' | 'day' } | null;
  bulk: BulkProgress | null;

  setFilters(patch: Partial<Filters>): void;
  resetFilters(): void;
  reload(): Promise<void>;
  loadMore(): Promise<void>;
  loadStats(): Promise<void>;
  /** Merge what the event stream reported about these runs. */
  refreshRuns(ids: string[]): Promise<void>;
  toggleSelected(id: string, on?: boolean): void;
  selectFailed(): void;
  clearSelection(): void;
  bulkReplay(ids: string[], mode: 'live' | 'dry', version: 'current' | 'original'): Promise<void>;
  /** Upsert one run summary (e.g. a replay just started from the UI). */
  upsert(r: RunSummary): void;
}

const api = (): Api => {
  const a = useEditor.getState().api;
  if (!a) throw new Error('not connected');
  return a;
};

export const useHistory = create<HistoryState>()((set, get) => {
  /** Put runs in their place: replace known ones, insert new ones that belong to the loaded range. */
  const merge = (incoming: RunSummary[]) => {
    if (!incoming.length) return;
    const s = get();
    let runs = s.runs;
    const ids = s.ids;
    let inserted = 0;
    const fresh: RunSummary[] = [];
    for (const r of incoming) {
      if (ids.has(r.id)) {
        const i = runs.findIndex((x) => x.id === r.id);
        if (i >= 0 && runs[i] !== r) {
          if (runs === s.runs) runs = runs.slice();
          runs[i] = r;
        }
      } else if (matches(r, s.query)) {
        fresh.push(r);
      }
    }
    if (fresh.length) {
      fresh.sort((a, b) => (newer(a, b) ? -1 : 1));
      const last = runs[runs.length - 1];
      if (runs === s.runs) runs = runs.slice();
      for (const r of fresh) {
        // Older than the last loaded run while more pages exist: paging will bring it.
        if (last && s.nextCursor && !newer(r, last)) continue;
        let i = 0;
        while (i < runs.length && newer(runs[i], r)) i++;
        runs.splice(i, 0, r);
        ids.add(r.id);
        inserted++;
      }
    }
    if (runs !== s.runs) set({ runs, liveCount: s.liveCount + inserted });
  };

  return {
    filters: { ...EMPTY_FILTERS },
    query: toQuery(EMPTY_FILTERS),
    runs: [],
    ids: new Set(),
    nextCursor: null,
    loading: false,
    error: null,
    gen: 0,
    liveCount: 0,
    selected: new Set(),
    stats: null,
    statsError: null,
    statsWindow: null,
    bulk: null,

    setFilters(patch) {
      set((s) => ({ filters: { ...s.filters, ...patch } }));
      void get().reload();
      void get().loadStats();
    },

    resetFilters() {
      set({ filters: { ...EMPTY_FILTERS } });
      void get().reload();
      void get().loadStats();
    },

    async reload() {
      const gen = get().gen + 1;
      const query = toQuery(get().filters);
      set({ gen, query, loading: true, error: null, liveCount: 0 });
      try {
        const page = await api().listRuns({ ...query, limit: FIRST_PAGE });
        if (get().gen !== gen) return;
        set({
          runs: page.runs,
          ids: new Set(page.runs.map((r) => r.id)),
          nextCursor: page.next_cursor ?? null,
          loading: false,
          selected: new Set(),
        });
      } catch (e) {
        if (get().gen !== gen) return;
        set({ loading: false, error: (e as Error).message, runs: [], ids: new Set(), nextCursor: null });
      }
    },

    async loadMore() {
      const s = get();
      if (s.loading || !s.nextCursor) return;
      const gen = s.gen;
      set({ loading: true });
      try {
        const page = await api().listRuns({ ...s.query, limit: NEXT_PAGE, cursor: s.nextCursor });
        if (get().gen !== gen) return;
        const cur = get();
        const add = page.runs.filter((r) => !cur.ids.has(r.id));
        // `ids` is bookkeeping only (no view subscribes to it): grow it in place, no copy of 100k ids per page.
        for (const r of add) cur.ids.add(r.id);
        set({ runs: cur.runs.concat(add), nextCursor: page.next_cursor ?? null, loading: false });
      } catch (e) {
        if (get().gen !== gen) return;
        set({ loading: false, error: (e as Error).message });
      }
    },

    async loadStats() {
      const q = toQuery(get().filters);
      const w = statsWindow(q);
      try {
        const stats = await api().runStats({ bucket: w.bucket, since: w.since, until: w.until, workflow: q.workflow });
        set({ stats, statsWindow: w, statsError: null });
      } catch (e) {
        set({ statsError: (e as Error).message });
      }
    },

    async refreshRuns(ids) {
      const s = get();
      const gen = s.gen;
      try {
        // The newest runs of the current query: new ones and status changes near the top.
        const page = await api().listRuns({ ...s.query, limit: Math.min(500, Math.max(50, ids.length + 20)) });
        if (get().gen !== gen) return;
        merge(page.runs);
        const seen = new Set(page.runs.map((r) => r.id));
        // Loaded runs further down whose status changed.
        const rest = ids.filter((id) => !seen.has(id) && get().ids.has(id)).slice(0, 20);
        const found = await Promise.all(
          rest.map((id) =>
            api()
              .listRuns({ q: id, limit: 1 })
              .then((p) => p.runs.filter((r) => r.id === id))
              .catch(() => [] as RunSummary[]),
          ),
        );
        if (get().gen !== gen) return;
        merge(found.flat());
      } catch {
        /* the next event or a reload catches up */
      }
    },

    toggleSelected(id, on) {
      const selected = new Set(get().selected);
      const want = on ?? !selected.has(id);
      if (want) selected.add(id);
      else selected.delete(id);
      set({ selected });
    },

    selectFailed() {
      const failed = get().runs.filter((r) => r.status === 'failed' || r.status === 'timed_out' || r.status === 'interrupted');
      set({ selected: new Set(failed.map((r) => r.id)) });
    },

    clearSelection() {
      set({ selected: new Set() });
    },

    async bulkReplay(ids, mode, version) {
      if (!ids.length || get().bulk?.running) return;
      const bulk: BulkProgress = { total: ids.length, done: 0, succeeded: 0, failed: 0, errors: [], running: true, created: {} };
      set({ bulk });
      const update = (patch: Partial<BulkProgress>) => set((s) => ({ bulk: s.bulk ? { ...s.bulk, ...patch } : s.bulk }));
      const queue = [...ids];
      // Two at a time: each request waits for its run to finish.
      const worker = async () => {
        for (;;) {
          const id = queue.shift();
          if (!id) return;
          try {
            const run = await api().replayRun(id, { mode, version });
            const b = get().bulk!;
            update({
              done: b.done + 1,
              succeeded: b.succeeded + (run.status === 'succeeded' ? 1 : 0),
              failed: b.failed + (run.status !== 'succeeded' && FINAL.has(run.status) ? 1 : 0),
              created: { ...b.created, [id]: run.id },
            });
          } catch (e) {
            const b = get().bulk!;
            update({ done: b.done + 1, errors: [...b.errors, `${id}: ${(e as Error).message}`] });
          }
        }
      };
      await Promise.all([worker(), worker()]);
      update({ running: false });
      set({ selected: new Set() });
      void get().refreshRuns([...ids, ...Object.values(get().bulk?.created ?? {})]);
      void get().loadStats();
    },

    upsert(r) {
      merge([r]);
    },
  };
});

/** The summary of a full run record. */
export function summaryOf(r: import('../api').RunRecord): RunSummary {
  return {
    id: r.id,
    workflow_id: r.workflow_id,
    workflow_version: r.workflow_version ?? 0,
    trigger: (r.trigger ?? 'manual') as RunTrigger,
    mode: r.mode,
    status: r.status,
    idempotency_key: r.idempotency_key,
    replay_of: r.replay_of,
    created_at: r.created_at ?? new Date().toISOString(),
    finished_at: r.finished_at,
    duration_ms: r.duration_ms,
    error_code: r.error?.code,
    error_message: r.error?.message,
  };
}
