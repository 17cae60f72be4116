// The Runs view's filters in the URL (`#runs?status=failed&range=24h`, see app/nav.ts): only
// what differs from the empty filters, in a fixed order, so one set of filters has one URL.

import type { RunStatus, Trigger } from '../api';
import { useNav } from '../app/nav';
import { EMPTY_FILTERS, RANGES, STATUSES, TRIGGERS, useHistory, type Filters, type RangePreset } from './store';

const TEXT = ['workflow', 'key', 'q', 'error'] as const;

/** The query string of `f` ('' for the empty filters). */
export function filtersToParams(f: Filters): string {
  const p = new URLSearchParams();
  if (f.workflow) p.set('workflow', f.workflow);
  if (f.status) p.set('status', f.status);
  if (f.mode) p.set('mode', f.mode);
  if (f.trigger) p.set('trigger', f.trigger);
  if (f.key.trim()) p.set('key', f.key.trim());
  if (f.q.trim()) p.set('q', f.q.trim());
  if (f.error) p.set('error', f.error);
  if (f.duplicates) p.set('duplicates', f.duplicates);
  if (f.range !== 'all') p.set('range', f.range);
  if (f.range === 'custom' && f.since !== null) p.set('since', String(f.since));
  if (f.range === 'custom' && f.until !== null) p.set('until', String(f.until));
  return p.toString();
}

/** The filters a query string names; unknown names and values are ignored (a hand-edited link). */
export function paramsToFilters(params: string): Filters {
  const p = new URLSearchParams(params);
  const f: Filters = { ...EMPTY_FILTERS };
  for (const k of TEXT) f[k] = p.get(k) ?? '';
  const status = p.get('status');
  if (status && (STATUSES as string[]).includes(status)) f.status = status as RunStatus;
  const mode = p.get('mode');
  if (mode === 'live' || mode === 'dry') f.mode = mode;
  const trigger = p.get('trigger');
  if (trigger && (TRIGGERS as string[]).includes(trigger)) f.trigger = trigger as Trigger;
  if (p.get('duplicates') === 'stopped') f.duplicates = 'stopped';
  const range = p.get('range');
  if (range && RANGES.some((r) => r.id === range)) f.range = range as RangePreset;
  if (f.range === 'custom') {
    const ms = (k: string) => (p.get(k) && Number.isFinite(Number(p.get(k))) ? Number(p.get(k)) : null);
    f.since = ms('since');
    f.until = ms('until');
  }
  return f;
}

/**
 * Keep the history's filters and the URL in step, both ways: the URL's filters are the
 * starting ones; a filter changed on screen is a new history entry; a URL changed by
 * back/forward (or a pasted link) shows its filters.
 */
export function bindFiltersToUrl(): void {
  useHistory.setState({ filters: paramsToFilters(useNav.getState().params) });
  useHistory.subscribe((s, prev) => {
    if (s.filters !== prev.filters) useNav.getState().setParams(filtersToParams(s.filters));
  });
  useNav.subscribe((n, prev) => {
    if (n.params === prev.params || n.params === filtersToParams(useHistory.getState().filters)) return;
    useHistory.getState().applyFilters(paramsToFilters(n.params));
  });
}
