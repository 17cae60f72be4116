// The run list: virtualised (only the visible rows are in the DOM), newest first, the next page
// loaded as the end comes into view; rows keep their place when new runs arrive above them.

import { Play, RotateCcw } from 'lucide-react';
import { memo, useEffect, useLayoutEffect, useRef, useState, type FocusEvent, type KeyboardEvent } from 'react';
import { useVirtualizer } from '@tanstack/react-virtual';
import type { RunSummary } from '../api';
import { formatMs } from '../app/format';
import { useNav } from '../app/nav';
import { useHistory } from './store';
import { dryRunLabel, dryRunOf, formatTime, shortId } from './format';
import { useDryRunName } from './names';
import { useReplayDialog } from './replay';
import { isResumable, useResumeDialog } from './resume';

export const ROW_H = 34;

/** One run of the list: a table row, in the tab order when it is the list's current row (roving tabindex). */
const Row = memo(function Row({
  r,
  index,
  top,
  active,
  checked,
  tabbable,
  resumedBy,
}: {
  r: RunSummary;
  index: number;
  top: number;
  active: boolean;
  checked: boolean;
  tabbable: boolean;
  /** The run's newest resume, when known. */
  resumedBy?: string;
}) {
  const failed = isResumable(r.status);
  const fixedBy = failed ? r.fixed_by : undefined;
  const dryName = useDryRunName(r);
  return (
    <div
      className={`fx-run-row ${active ? 'is-active' : ''} ${checked ? 'is-checked' : ''}`}
      style={{ transform: `translateY(${top}px)` }}
      role="row"
      aria-rowindex={index + 2}
      aria-current={active ? 'true' : undefined}
      tabIndex={tabbable ? 0 : -1}
      data-index={index}
      data-testid="run-row"
      data-run-id={r.id}
      data-status={r.status}
      data-workflow={r.workflow_id}
      data-key={r.idempotency_key ?? ''}
      data-mode={r.mode}
      data-trigger={r.trigger}
      data-fixed-by={fixedBy ?? ''}
      onClick={() => useNav.getState().openRun(r.id)}
      title={r.error_message ? `${r.error_code}: ${r.error_message}` : undefined}
    >
      <span className="fx-run-cell fx-run-check" role="cell" onClick={(e) => e.stopPropagation()}>
        <input
          type="checkbox"
          checked={checked}
          aria-label={`Select run ${r.id}`}
          onChange={(e) => useHistory.getState().toggleSelected(r.id, e.target.checked)}
          data-testid="run-select"
        />
      </span>
      <span className="fx-run-cell fx-run-status" role="cell">
        <span className={`fx-pill run-${r.status}`}>{r.status.replace('_', ' ')}</span>
      </span>
      <span className="fx-run-cell fx-run-wf" role="cell">
        {r.mode === 'dry' ? (
          // The name may be cut short, never what ran. Beside the detail, a draft reads "· draft" (only dry runs run drafts).
          <>
            <span className="fx-run-wf-id" title={`${dryRunLabel(r, dryName)} (workflow ${r.workflow_id})`}>
              {dryName || r.workflow_id}
            </span>{' '}
            <span className="fx-run-dry-kind">
              · {dryRunOf(r)}
              <span className={r.workflow_version === 0 ? 'fx-run-dry-word' : ''}> dry run</span>
            </span>
          </>
        ) : (
          <>
            <span className="fx-run-wf-id">{r.workflow_id}</span>
            <span className="fx-muted fx-mono">v{r.workflow_version}</span>
          </>
        )}
        {r.error_code && (
          <span className="fx-code-tag fx-error-code" data-testid="row-error" title={r.error_step ? `at ${r.error_step}` : undefined}>
            {r.error_http_status ? `HTTP ${r.error_http_status}` : r.error_code}
          </span>
        )}
        {r.duplicates_stopped ? (
          <span
            className="fx-dup-tag"
            data-testid="row-duplicates"
            title={`${r.duplicates_stopped} duplicate ${r.duplicates_stopped === 1 ? 'delivery' : 'deliveries'} of this event stopped: open the run to see each`}
          >
            +{r.duplicates_stopped} {r.duplicates_stopped === 1 ? 'duplicate' : 'duplicates'} stopped
          </span>
        ) : null}
        {r.replay_of && (
          <span className="fx-muted" title={`Replay of ${r.replay_of}`}>
            <RotateCcw size={12} aria-hidden />
          </span>
        )}
        {r.resume_of && (
          <span className="fx-muted" title={`Resume of ${r.resume_of}`} data-testid="row-resume-of">
            <Play size={12} aria-hidden />
          </span>
        )}
      </span>
      <span className="fx-run-cell fx-run-trigger" role="cell">
        {r.trigger}
      </span>
      <span className="fx-run-cell fx-run-key fx-mono" role="cell" title={r.idempotency_key}>
        {r.idempotency_key ?? ''}
      </span>
      <span className="fx-run-cell fx-run-id fx-mono fx-muted" role="cell" title={r.id}>
        {shortId(r.id)}
      </span>
      <span className="fx-run-cell fx-run-time" role="cell" title={r.created_at}>
        {formatTime(r.created_at)}
      </span>
      <span className="fx-run-cell fx-run-dur" role="cell">{r.duration_ms !== undefined ? formatMs(r.duration_ms) : ''}</span>
      <span className="fx-run-cell fx-run-actions" role="cell" onClick={(e) => e.stopPropagation()}>
        {fixedBy && (
          <button
            className="fx-btn fx-btn-small fx-btn-ghost fx-fixed-by"
            onClick={() => useNav.getState().openRun(fixedBy)}
            title={`This failure was fixed by run ${fixedBy}: open it`}
            data-testid="row-fixed-by"
            data-run-id={fixedBy}
          >
            fixed by <span className="fx-mono">{fixedBy.slice(0, 8)}</span>
          </button>
        )}
        {failed && !fixedBy && resumedBy && (
          <button
            className="fx-btn fx-btn-small fx-btn-ghost"
            onClick={() => useNav.getState().openRun(resumedBy)}
            title={`Resumed by run ${resumedBy}: open it`}
            data-testid="row-resumed"
            data-run-id={resumedBy}
          >
            <Play size={12} aria-hidden /> resumed
          </button>
        )}
        {failed && !fixedBy && !resumedBy && (
          <button
            className="fx-btn fx-btn-small fx-btn-primary"
            onClick={() => useResumeDialog.getState().open({ id: r.id, mode: r.mode })}
            title="Resume this run where it stopped"
            data-testid="row-resume"
          >
            <Play size={12} aria-hidden /> Resume
          </button>
        )}
        {!fixedBy && (
        <button
          className="fx-btn fx-btn-small"
          onClick={() => useReplayDialog.getState().open({ id: r.id, workflow_id: r.workflow_id, status: r.status, mode: r.mode })}
          title="Replay this run"
          aria-label="Replay this run"
          data-testid="row-replay"
        >
          <RotateCcw size={13} aria-hidden />
          {!failed && ' Replay'}
        </button>
        )}
      </span>
    </div>
  );
});

export function RunList() {
  const runs = useHistory((s) => s.runs);
  const loading = useHistory((s) => s.loading);
  const error = useHistory((s) => s.error);
  const nextCursor = useHistory((s) => s.nextCursor);
  const selected = useHistory((s) => s.selected);
  const matchingIds = useHistory((s) => s.matching?.ids);
  const resumedBy = useHistory((s) => s.resumedBy);
  const gen = useHistory((s) => s.gen);
  const activeId = useNav((s) => s.runId);
  const scroller = useRef<HTMLDivElement>(null);
  const v = useVirtualizer({
    count: runs.length,
    getScrollElement: () => scroller.current,
    estimateSize: () => ROW_H,
    overscan: 10,
    getItemKey: (i) => runs[i]?.id ?? i,
  });
  const items = v.getVirtualItems();
  const lastIndex = items.length ? items[items.length - 1].index : -1;

  // Load the next page when the end of what is loaded comes into view.
  useEffect(() => {
    if (nextCursor && !loading && lastIndex >= runs.length - 40) void useHistory.getState().loadMore();
  }, [lastIndex, runs.length, nextCursor, loading]);

  // Keep the first visible row in place when runs are inserted above it (live updates).
  const anchor = useRef<{ id: string; index: number; offset: number } | null>(null);
  useLayoutEffect(() => {
    const el = scroller.current;
    const a = anchor.current;
    if (el && a && el.scrollTop > 0 && runs[a.index]?.id !== a.id) {
      let i = -1;
      for (let k = a.index; k < Math.min(runs.length, a.index + 2000); k++) {
        if (runs[k].id === a.id) {
          i = k;
          break;
        }
      }
      if (i > a.index) el.scrollTop = i * ROW_H + a.offset;
    }
  }, [runs]);
  const onScroll = () => {
    const el = scroller.current;
    if (!el) return;
    const index = Math.floor(el.scrollTop / ROW_H);
    const r = useHistory.getState().runs[index];
    anchor.current = r ? { id: r.id, index, offset: el.scrollTop - index * ROW_H } : null;
  };

  // The keyboard: one row in the tab order (the open run's, else the first); arrows, Home and
  // End move between rows (scrolling the list), Enter opens the focused row's run.
  const [cursor, setCursor] = useState(0);
  const activeIndex = activeId ? runs.findIndex((r) => r.id === activeId) : -1;
  useEffect(() => {
    if (activeIndex >= 0) setCursor(activeIndex);
  }, [activeIndex]);
  const current = Math.min(cursor, Math.max(0, runs.length - 1));
  const pendingFocus = useRef<number | null>(null);
  useEffect(() => {
    const i = pendingFocus.current;
    if (i === null) return;
    const el = scroller.current?.querySelector<HTMLElement>(`[data-testid="run-row"][data-index="${i}"]`);
    if (!el) return;
    pendingFocus.current = null;
    el.focus();
  });
  const onFocus = (e: FocusEvent<HTMLDivElement>) => {
    const i = (e.target as HTMLElement).dataset.index;
    if (i !== undefined) setCursor(Number(i));
  };
  const onKeyDown = (e: KeyboardEvent<HTMLDivElement>) => {
    const el = e.target as HTMLElement;
    if (!el.matches('[data-testid="run-row"]')) return;
    const i = Number(el.dataset.index);
    if (e.key === 'Enter') {
      e.preventDefault();
      useNav.getState().openRun(runs[i].id);
      return;
    }
    const to = { ArrowDown: i + 1, ArrowUp: i - 1, Home: 0, End: runs.length - 1 }[e.key];
    if (to === undefined || to < 0 || to >= runs.length) return;
    e.preventDefault();
    setCursor(to);
    pendingFocus.current = to;
    v.scrollToIndex(to, { align: 'auto' });
  };

  return (
    <div className="fx-run-list" role="table" aria-label="Runs" aria-rowcount={runs.length + 1} data-testid="run-list" data-count={runs.length} data-loading={String(loading)} data-more={String(!!nextCursor)} data-gen={gen}>
      <div className="fx-run-row fx-run-header" role="row" aria-rowindex={1}>
        <span className="fx-run-cell fx-run-check" role="columnheader" aria-label="Select" />
        <span className="fx-run-cell fx-run-status" role="columnheader">Status</span>
        <span className="fx-run-cell fx-run-wf" role="columnheader">Workflow</span>
        <span className="fx-run-cell fx-run-trigger" role="columnheader">Trigger</span>
        <span className="fx-run-cell fx-run-key" role="columnheader">Key</span>
        <span className="fx-run-cell fx-run-id" role="columnheader">Run</span>
        <span className="fx-run-cell fx-run-time" role="columnheader">Created</span>
        <span className="fx-run-cell fx-run-dur" role="columnheader">Took</span>
        <span className="fx-run-cell fx-run-actions" role="columnheader" aria-label="Actions" />
      </div>
      <div className="fx-run-scroll" ref={scroller} onScroll={onScroll} onKeyDown={onKeyDown} onFocus={onFocus} data-testid="run-scroll">
        <div style={{ height: v.getTotalSize(), position: 'relative' }}>
          {items.map((it) => {
            const r = runs[it.index];
            return r ? (
              <Row
                key={r.id}
                r={r}
                index={it.index}
                top={it.start}
                active={r.id === activeId}
                checked={selected.has(r.id) || !!matchingIds?.has(r.id)}
                tabbable={it.index === current}
                resumedBy={resumedBy[r.id]}
              />
            ) : null;
          })}
        </div>
        {!runs.length && !loading && (
          <div className="fx-empty" data-testid="runs-empty">
            {error ? <span className="fx-error-text">Cannot load runs: {error}</span> : 'No runs match these filters.'}
          </div>
        )}
      </div>
      <div className="fx-run-foot">
        <span data-testid="runs-loaded">
          {runs.length.toLocaleString('en-US')} run{runs.length === 1 ? '' : 's'} loaded{nextCursor ? ' · more below' : ''}
        </span>
        {loading && <span className="fx-muted">Loading…</span>}
        {error && runs.length > 0 && <span className="fx-error-text">{error}</span>}
      </div>
    </div>
  );
}
