// Run history: filters, the loaded runs (newest first, cursor paging), live updates from the
// event stream, the status chart's counts, selection, bulk replay and resume. One zustand store; the
// views read it through selectors.

import { create } from 'zustand';
import type { Api, ApiError, BulkSummary, RunQueryFilter, RunQuery, RunRecord, RunStats, RunStatus, RunSummary, Trigger } from '../api';
import { onRunEvent } from './events';
import { useEditor } from '../store/editor';
import { useNav } from '../app/nav';
import { isResumable, resumedByOf } from './resume';
import { plural } from './format';
import { eachPooled } from './pool';

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

export const STATUSES: RunStatus[] = ['succeeded', 'failed', 'timed_out', 'interrupted', 'skipped', 'running', 'queued'];
export const TRIGGERS: Trigger[] = ['webhook', 'api', 'manual', 'schedule', 'fan_out', 'replay', 'resume', 'cli'];

export interface Filters {
  workflow: string;
  status: RunStatus | '';
  mode: 'live' | 'dry' | '';
  trigger: Trigger | '';
  /** Exact idempotency/event key. */
  key: string;
  /** Run id, key or a value inside the run (a customer id…), exact or prefix. */
  q: string;
  /** Failure reason (a group of the chart: `HTTP 500 at create`). */
  error: string;
  /** `stopped`: only runs that stopped a duplicate delivery. */
  duplicates: 'stopped' | '';
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
  error: '',
  duplicates: '',
  range: 'all',
  since: null,
  until: null,
};

/** What became of one run of a bulk replay or resume. */
export interface BulkResult {
  id: string;
  /** `succeeded`/`failed`: the new run's end; `queued`: started, not finished yet; `skipped`: not resumable, already resumed, fixed or a dry run; `error`: not started. */
  outcome: 'succeeded' | 'failed' | 'queued' | 'skipped' | 'error';
  /** What was started for it (a bulk action over the matching set). */
  action?: 'resume' | 'replay';
  /** The new run, or (skipped as already resumed) the existing resume. */
  newId?: string;
  /** The new run's mode (a dry run is resumed dry). */
  mode?: 'live' | 'dry';
  note?: string;
}

export interface BulkProgress {
  /** `matching`: the server-side action over every failed run matching the filters. */
  kind: 'replay' | 'resume' | 'matching';
  total: number;
  done: number;
  succeeded: number;
  failed: number;
  /** Resume: runs not resumed on purpose (already resumed, or not failed/timed out/interrupted). */
  skipped: number;
  errors: string[];
  running: boolean;
  /** New runs, by replayed/resumed run id. */
  created: Record<string, string>;
  results: BulkResult[];
  /** `matching`: runs resumed and replayed, and dry runs left out. */
  resumed?: number;
  replayed?: number;
  dryExcluded?: number;
}

/** "Select all matching": every failed run of the filters, counted by the server, with what a bulk action would do. */
export interface MatchingSelection {
  filter: RunQueryFilter;
  loading: boolean;
  preview: BulkSummary | null;
  error: string | null;
  /** Runs the action would start something for (resume or replay). */
  ids: Set<string>;
}

/** The bulk filter of a resolved list query. */
export function filterOf(q: RunQuery): RunQueryFilter {
  const { limit: _l, cursor: _c, ...f } = q;
  return f;
}

/** "53 failed live runs: 41 will resume, 12 will replay; 3 dry runs excluded". */
export function previewLine(p: BulkSummary): string {
  const parts = [`${plural(p.live, 'failed live run')}: ${p.resume} will resume, ${p.replay} will replay`];
  if (p.skipped) parts.push(`${p.skipped} skipped (fixed or already resumed)`);
  if (p.dry_excluded) parts.push(`${plural(p.dry_excluded, 'dry run')} excluded`);
  return parts.join('; ');
}

const FINAL_STATUSES = new Set(['succeeded', 'failed', 'timed_out', 'interrupted', 'skipped']);

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
    error: f.error,
    duplicates: f.duplicates,
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
  // A value inside the run (not in the summary) cannot be checked here: such runs come with the next load.
  if (q.q && !r.id.startsWith(q.q) && !(r.idempotency_key ?? '').startsWith(q.q)) return false;
  if (q.error && failureReason(r) !== q.error) return false;
  // A new run has stopped none yet; one that has is counted by the next load.
  if (q.duplicates && !r.duplicates_stopped) return false;
  const t = Date.parse(r.created_at);
  if (typeof q.since === 'number' && t < q.since) return false;
  if (typeof q.until === 'number' && t >= q.until) return false;
  return true;
}

/** Newest first: by created_at, then id. */
function newer(a: RunSummary, b: RunSummary): boolean {
  return a.created_at === b.created_at ? a.id > b.id : a.created_at > b.created_at;
}

/** Why a run failed, as the server groups failures: `HTTP 500 at create`, `<code> at <step>`. */
export function failureReason(r: RunSummary): string | undefined {
  if (!r.error_code) return undefined;
  const what = r.error_http_status ? `HTTP ${r.error_http_status}` : r.error_code;
  return r.error_step ? `${what} at ${r.error_step}` : what;
}

/** The chart's window as the server answered it (all time: from the oldest matching run). */
export function statsWindow(stats: RunStats): { since: number; until: number; bucketMs: number } {
  return { since: Date.parse(stats.since ?? ''), until: Date.parse(stats.until ?? ''), bucketMs: stats.bucket_ms };
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
  /** Runs created after the list was loaded that arrived live. */
  liveCount: number;
  /** The newest `created_at` known when the list was loaded: only runs created after it count as new. */
  loadedNewest: string;
  selected: Set<string>;
  stats: RunStats | null;
  statsError: string | null;
  statsWindow: { since: number; until: number; bucketMs: number } | null;
  bulk: BulkProgress | null;
  /** "Select all matching" (server-side), or null. */
  matching: MatchingSelection | null;
  /**
   * Runs known to have been resumed (original id → its newest resume), learnt from the summaries
   * seen (their `resume_of`) and from resumes started here: summaries carry no `resumed_by`.
   */
  resumedBy: Record<string, string>;

  setFilters(patch: Partial<Filters>): void;
  resetFilters(): void;
  /**
   * Show the runs of `filters` (the URL's, on reload or back/forward): the list and the chart
   * load again, and the open run's detail closes when the new filters exclude that run.
   */
  applyFilters(filters: Filters): void;
  /** Load the first page of the filters; true when its answer was applied (no newer load replaced it). */
  reload(): Promise<boolean>;
  loadMore(): Promise<void>;
  loadStats(): Promise<void>;
  /** Merge what the event stream reported about these runs. */
  refreshRuns(ids: string[]): Promise<void>;
  toggleSelected(id: string, on?: boolean): void;
  /** Select every failed run matching the filters (not only the loaded rows): the server counts them and previews the action. */
  selectAllMatching(): Promise<void>;
  clearSelection(): void;
  /** Resume (else replay live) every failed live run of the matching selection; progress follows the new runs. */
  bulkMatching(version: 'current' | 'original'): Promise<void>;
  bulkReplay(ids: string[], mode: 'live' | 'dry', version: 'current' | 'original'): Promise<void>;
  /**
   * Resume each run of `ids` that failed, timed out or was interrupted (in its own mode: a dry
   * run is resumed dry), two at a time; `already_resumed` and other statuses count as skipped.
   */
  bulkResume(ids: string[]): Promise<void>;
  /** Remember that runs were resumed (original id → its resume), e.g. from a run record's `resumed_by`. */
  learnResumes(map: Record<string, string>): void;
  /** Upsert one run summary (e.g. a replay just started from the UI). */
  upsert(r: RunSummary): void;
}

const api = (): Api => {
  const a = useEditor.getState().api;
  if (!a) throw new Error('not connected');
  return a;
};

export const useHistory = create<HistoryState>()((set, get) => {
  /** Remember which runs these summaries resume (newest first in a page: the first seen wins). */
  const noteResumes = (runs: RunSummary[], extra: Record<string, string> = {}) => {
    const cur = get().resumedBy;
    let next: Record<string, string> | null = null;
    const add = (orig: string, by: string) => {
      const have = (next ?? cur)[orig];
      if (have && have >= by) return; // UUIDv7: later ids sort higher
      next ??= { ...cur };
      next[orig] = by;
    };
    for (const r of runs) if (r.resume_of) add(r.resume_of, r.id);
    for (const [orig, by] of Object.entries(extra)) add(orig, by);
    if (next) set({ resumedBy: next });
  };

  /** Put runs in their place: replace known ones, insert new ones that belong to the loaded range. */
  const merge = (incoming: RunSummary[]) => {
    if (!incoming.length) return;
    noteResumes(incoming);
    const s = get();
    let runs = s.runs;
    const ids = s.ids;
    let arrived = 0;
    const fresh: RunSummary[] = [];
    for (const r of incoming) {
      if (ids.has(r.id)) {
        const i = runs.findIndex((x) => x.id === r.id);
        if (i >= 0 && runs[i] !== r) {
          if (runs === s.runs) runs = runs.slice();
          runs[i] = keepListed(runs[i], r);
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
        // New only if created after the load (not an older run the stream reports a change of).
        if (r.created_at > s.loadedNewest) arrived++;
      }
    }
    if (runs !== s.runs) set({ runs, liveCount: s.liveCount + arrived });
  };

  const outcomeOf = (id: string, run: RunRecord): BulkResult => ({
    id,
    outcome: run.status === 'succeeded' ? 'succeeded' : 'failed',
    newId: run.id,
    mode: run.mode,
    note: run.status === 'succeeded' ? undefined : `${run.status}${run.error ? `: ${run.error.message}` : ''}`,
  });

  /** Run `action` on each id, two at a time (each request waits for its run to end), with progress. */
  const runBulk = async (kind: BulkProgress['kind'], ids: string[], action: (id: string) => Promise<BulkResult>) => {
    if (!ids.length || get().bulk?.running) return;
    set({
      bulk: { kind, total: ids.length, done: 0, succeeded: 0, failed: 0, skipped: 0, errors: [], running: true, created: {}, results: [] },
    });
    const add = (r: BulkResult, error?: string) =>
      set((s) => {
        const b = s.bulk!;
        return {
          bulk: {
            ...b,
            done: b.done + 1,
            succeeded: b.succeeded + (r.outcome === 'succeeded' ? 1 : 0),
            failed: b.failed + (r.outcome === 'failed' ? 1 : 0),
            skipped: b.skipped + (r.outcome === 'skipped' ? 1 : 0),
            errors: error ? [...b.errors, error] : b.errors,
            created: r.newId && r.outcome !== 'skipped' ? { ...b.created, [r.id]: r.newId } : b.created,
            results: [...b.results, r],
          },
        };
      });
    await eachPooled(ids, 2, async (id) => {
      try {
        add(await action(id));
      } catch (e) {
        const msg = (e as Error).message;
        add({ id, outcome: 'error', note: msg }, `${id}: ${msg}`);
      }
    });
    set((s) => ({ bulk: s.bulk ? { ...s.bulk, running: false } : s.bulk, selected: new Set() }));
    if (kind === 'resume') {
      const found = get().bulk?.results.filter((r) => r.newId && (r.outcome !== 'skipped' || r.note === 'already resumed')) ?? [];
      noteResumes([], Object.fromEntries(found.map((r) => [r.id, r.newId!])));
    }
    void get().refreshRuns([...ids, ...Object.values(get().bulk?.created ?? {})]);
    void get().loadStats();
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
    loadedNewest: '',
    selected: new Set(),
    stats: null,
    statsError: null,
    statsWindow: null,
    bulk: null,
    matching: null,
    resumedBy: {},

    setFilters(patch) {
      get().applyFilters({ ...get().filters, ...patch });
    },

    resetFilters() {
      get().applyFilters({ ...EMPTY_FILTERS });
    },

    applyFilters(filters) {
      const openId = useNav.getState().runId;
      const open = openId ? get().runs.find((r) => r.id === openId) : undefined;
      set({ filters });
      void get()
        .reload()
        .then((applied) => {
          const s = get();
          if (!applied || !openId || useNav.getState().runId !== openId || s.ids.has(openId)) return;
          // Not in the new list: excluded when the list is complete, or when its summary does not match.
          if (!s.nextCursor || (open && !matches(open, s.query))) useNav.getState().openRun(null, { replace: true });
        });
      void get().loadStats();
    },

    async reload() {
      const gen = get().gen + 1;
      const query = toQuery(get().filters);
      const loadStart = Date.now();
      set({ gen, query, loading: true, error: null, liveCount: 0, matching: null });
      try {
        const page = await api().listRuns({ ...query, limit: FIRST_PAGE });
        if (get().gen !== gen) return false;
        noteResumes(page.runs);
        set({
          // Runs are newest first; with none loaded, the load's own instant.
          loadedNewest: page.runs[0]?.created_at ?? new Date(loadStart).toISOString(),
          runs: page.runs,
          ids: new Set(page.runs.map((r) => r.id)),
          nextCursor: page.next_cursor ?? null,
          loading: false,
          selected: new Set(),
          // A run merged while this page loaded (the open run's record) is in the page: not new.
          liveCount: 0,
        });
        return true;
      } catch (e) {
        if (get().gen !== gen) return false;
        set({ loading: false, error: (e as Error).message, runs: [], ids: new Set(), nextCursor: null });
        return false;
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
        noteResumes(add);
        set({ runs: cur.runs.concat(add), nextCursor: page.next_cursor ?? null, loading: false });
      } catch (e) {
        if (get().gen !== gen) return;
        set({ loading: false, error: (e as Error).message });
      }
    },

    async loadStats() {
      const q = toQuery(get().filters);
      try {
        // The list's filters; all time starts at the oldest matching run; `auto`: at most 60 bars.
        const stats = await api().runStats({ ...q, bucket: 'auto' });
        set({ stats, statsWindow: statsWindow(stats), statsError: null });
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

    async selectAllMatching() {
      const filter = filterOf(get().query);
      set({ selected: new Set(), matching: { filter, loading: true, preview: null, error: null, ids: new Set() } });
      try {
        const preview = await api().previewBulk(filter);
        if (get().matching?.filter !== filter) return;
        const ids = new Set(preview.runs.filter((r) => r.action === 'resume' || r.action === 'replay').map((r) => r.run_id));
        set({ matching: { filter, loading: false, preview, error: null, ids } });
      } catch (e) {
        if (get().matching?.filter !== filter) return;
        set({ matching: { filter, loading: false, preview: null, error: (e as Error).message, ids: new Set() } });
      }
    },

    clearSelection() {
      set({ selected: new Set(), matching: null });
    },

    async bulkMatching(version) {
      const m = get().matching;
      if (!m?.preview || get().bulk?.running) return;
      // Exactly the previewed set: nothing that arrived after the preview.
      const asOf = Date.parse(m.preview.as_of);
      const until = typeof m.filter.until === 'number' ? Math.min(m.filter.until, asOf) : asOf;
      const filter = { ...m.filter, until };
      set({
        bulk: { kind: 'matching', total: 0, done: 0, succeeded: 0, failed: 0, skipped: 0, errors: [], running: true, created: {}, results: [] },
      });
      let done: BulkSummary;
      try {
        done = await api().startBulk(filter, version);
      } catch (e) {
        set({ bulk: { kind: 'matching', total: 0, done: 0, succeeded: 0, failed: 0, skipped: 0, errors: [(e as Error).message], running: false, created: {}, results: [] } });
        return;
      }
      const results: BulkResult[] = done.runs.map((r) =>
        r.action === 'resume' || r.action === 'replay'
          ? { id: r.run_id, outcome: 'queued', action: r.action, newId: r.new_run_id ?? undefined, mode: 'live' }
          : { id: r.run_id, outcome: r.action === 'skip' ? 'skipped' : 'error', newId: r.new_run_id ?? undefined, note: r.detail ?? r.reason ?? undefined },
      );
      const pending = new Map(results.filter((r) => r.outcome === 'queued' && r.newId).map((r) => [r.newId!, r]));
      const created = Object.fromEntries(results.filter((r) => r.outcome === 'queued' && r.newId).map((r) => [r.id, r.newId!]));
      set({
        matching: null,
        selected: new Set(),
        bulk: {
          kind: 'matching',
          total: pending.size,
          done: 0,
          succeeded: 0,
          failed: 0,
          skipped: done.skipped,
          errors: done.runs.filter((r) => r.action === 'error').map((r) => `${r.run_id}: ${r.detail ?? r.reason}`),
          running: pending.size > 0,
          created,
          results,
          resumed: done.resume,
          replayed: done.replay,
          dryExcluded: done.dry_excluded,
        },
      });
      noteResumes([], Object.fromEntries(results.filter((r) => r.action === 'resume' && r.newId).map((r) => [r.id, r.newId!])));
      // Progress: each new run's end, from the event stream, and a catch-up listing for ends the stream told before we listened.
      const finish = (runId: string, status: string) => {
        const r = pending.get(runId);
        if (!r || !FINAL_STATUSES.has(status)) return;
        pending.delete(runId);
        const ok = status === 'succeeded';
        set((s) => {
          const b = s.bulk;
          if (!b || b.kind !== 'matching') return {};
          return {
            bulk: {
              ...b,
              done: b.done + 1,
              succeeded: b.succeeded + (ok ? 1 : 0),
              failed: b.failed + (ok ? 0 : 1),
              running: pending.size > 0,
              results: b.results.map((x) => (x === r || x.newId === runId ? { ...x, outcome: ok ? 'succeeded' : 'failed', note: ok ? undefined : status.replace('_', ' ') } : x)),
            },
          };
        });
      };
      if (!pending.size) return;
      const since = Date.parse(done.as_of) - 1;
      await new Promise<void>((resolve) => {
        let timer: ReturnType<typeof setTimeout> | undefined;
        const off = onRunEvent((e) => {
          if (e.event === 'run_finished') finish(e.run_id, e.status);
          if (!pending.size) end();
        });
        const end = () => {
          off();
          clearTimeout(timer);
          resolve();
        };
        const catchUp = async () => {
          try {
            let cursor: string | undefined;
            for (let i = 0; i < 25 && pending.size; i++) {
              const page = await api().listRuns({ since, limit: 500, cursor });
              for (const r of page.runs) finish(r.id, r.status);
              if (!page.next_cursor) break;
              cursor = page.next_cursor;
            }
          } catch {
            /* the stream or the next catch-up */
          }
          if (!pending.size) end();
          else timer = setTimeout(() => void catchUp(), 2000);
        };
        void catchUp();
      });
      void get().refreshRuns([...Object.keys(created), ...Object.values(created)]);
      void get().loadStats();
    },

    async bulkReplay(ids, mode, version) {
      const known = new Map(get().runs.map((r) => [r.id, r]));
      await runBulk('replay', ids, async (id) => {
        // A dry run is never replayed live.
        if (mode === 'live' && known.get(id)?.mode === 'dry') return { id, outcome: 'skipped', mode: 'dry', note: 'dry run: never replayed live' };
        const run = await api().replayRun(id, { mode, version });
        return outcomeOf(id, run);
      });
    },

    async bulkResume(ids) {
      const known = new Map(get().runs.map((r) => [r.id, r]));
      await runBulk('resume', ids, async (id) => {
        const r = known.get(id);
        if (r && !isResumable(r.status)) return { id, outcome: 'skipped', note: `${r.status.replace('_', ' ')}: nothing to resume` };
        try {
          return outcomeOf(id, await api().resumeRun(id, {}));
        } catch (e) {
          const err = e as ApiError;
          if (err.code === 'already_resumed') return { id, outcome: 'skipped', newId: (await resumedByOf(err, id)) ?? undefined, note: 'already resumed' };
          if (err.code === 'nothing_to_resume') return { id, outcome: 'skipped', note: err.message };
          throw e;
        }
      });
    },

    upsert(r) {
      merge([r]);
    },

    learnResumes(map) {
      noteResumes([], map);
    },
  };
});

/**
 * `next`, keeping what only a listing computes (`app::runs::list`) when `next` was made from a
 * full record (the open run: `summaryOf`) and lacks it: `fixed_by` (a fix is never undone; kept
 * while the status is the same) and `duplicates_stopped` (a count only grows).
 */
function keepListed(prev: RunSummary, next: RunSummary): RunSummary {
  const fixed = prev.fixed_by && !next.fixed_by && prev.status === next.status ? { fixed_by: prev.fixed_by } : {};
  const dups = prev.duplicates_stopped && !next.duplicates_stopped ? { duplicates_stopped: prev.duplicates_stopped } : {};
  return Object.keys(fixed).length || Object.keys(dups).length ? { ...next, ...fixed, ...dups } : next;
}

/** The summary of a full run record, as the server makes one (`impl From<&RunRecord> for RunSummary`). */
export function summaryOf(r: import('../api').RunRecord): RunSummary {
  return {
    id: r.id,
    workflow_id: r.workflow_id,
    workflow_version: r.workflow_version,
    trigger: r.trigger,
    mode: r.mode,
    status: r.status,
    idempotency_key: r.idempotency_key,
    replay_of: r.replay_of,
    resume_of: r.resume_of,
    resumed_by: r.resumed_by,
    replayed_by: r.replayed_by,
    root_run_id: r.root_run_id || r.id,
    parent_run: r.parent_run,
    created_at: r.created_at,
    finished_at: r.finished_at,
    duration_ms: r.duration_ms,
    error_code: r.error?.code,
    error_message: r.error?.message,
    error_step: r.error?.step,
    error_http_status: r.error?.http_status,
  };
}
