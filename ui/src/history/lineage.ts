// Summaries of linked runs (resumes, replays, ancestors) for the run detail's lineage, fetched
// cheaply (`GET /runs?q=<id>&limit=1`, an index lookup) and kept until the run changes.

import { useEffect, useState } from 'react';
import type { RunRecord, RunSummary } from '../api';
import { useEditor } from '../store/editor';
import { onRunEvent } from './events';
import { rootOf } from './resume';

const cache = new Map<string, Promise<RunSummary | null>>();
const FINAL = new Set(['succeeded', 'failed', 'timed_out', 'interrupted']);

/** The summary of run `id` (null when it does not exist or cannot be loaded). */
export function fetchSummary(id: string): Promise<RunSummary | null> {
  let p = cache.get(id);
  if (!p) {
    const api = useEditor.getState().api;
    p = api
      ? api
          .listRuns({ q: id, limit: 1 })
          .then((page) => page.runs.find((r) => r.id === id) ?? null)
          .catch(() => null)
      : Promise.resolve(null);
    cache.set(id, p);
    // Unfinished runs change: ask again next time.
    void p.then((s) => {
      if (!s || !FINAL.has(s.status)) setTimeout(() => cache.get(id) === p && cache.delete(id), 1000);
    });
  }
  return p;
}

/** Summaries of `ids`, refreshed when one of them changes. */
export function useSummaries(ids: string[]): Record<string, RunSummary | null> {
  const key = ids.join(',');
  const [out, setOut] = useState<Record<string, RunSummary | null>>({});
  useEffect(() => {
    let live = true;
    const list = key ? key.split(',') : [];
    const load = (id: string) => void fetchSummary(id).then((s) => live && setOut((o) => (o[id] === s ? o : { ...o, [id]: s })));
    list.forEach(load);
    const off = onRunEvent((e) => {
      if (e.event === 'step_finished' || !list.includes(e.run_id)) return;
      // The run changed: fetch it again.
      cache.delete(e.run_id);
      setTimeout(() => live && load(e.run_id), 50);
    });
    return () => {
      live = false;
      off();
    };
  }, [key]);
  return out;
}

/** The runs this one resumes, oldest first (the chain of `resume_of`, at most 10 back). */
export function useAncestors(run: RunRecord): RunSummary[] {
  const [chain, setChain] = useState<RunSummary[]>([]);
  useEffect(() => {
    let live = true;
    setChain([]);
    void (async () => {
      const out: RunSummary[] = [];
      let next = run.resume_of;
      while (next && out.length < 10) {
        const s = await fetchSummary(next);
        if (!s) break;
        out.unshift(s);
        next = s.resume_of;
      }
      if (live) setChain(out);
    })();
    return () => {
      live = false;
    };
  }, [run.resume_of]);
  return chain;
}

/** The runs a step of `run` started (a `fan_out` step's `run_ids`), in order. */
export function childRuns(run: RunRecord): string[] {
  const out: string[] = [];
  for (const st of run.steps) {
    const ids = (st.output as { run_ids?: unknown } | null | undefined)?.run_ids;
    if (Array.isArray(ids) && st.reused_from === undefined) for (const id of ids) if (typeof id === 'string') out.push(id);
  }
  return out;
}

/** Every run the detail links to, for one batch of summaries. */
export function linkedIds(run: RunRecord): string[] {
  const ids = new Set<string>();
  if (run.parent_run) ids.add(run.parent_run);
  for (const id of childRuns(run).slice(0, 12)) ids.add(id);
  if (run.replay_of) ids.add(run.replay_of);
  for (const id of run.replayed_by ?? []) ids.add(id);
  for (const id of run.resumed_by ?? []) ids.add(id);
  const root = rootOf(run);
  if (root !== run.id) ids.add(root);
  for (const st of run.steps) if (st.reused_from) ids.add(st.reused_from);
  ids.delete(run.id);
  return [...ids].slice(0, 24);
}
