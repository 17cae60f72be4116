import { ChevronDown, Play, RotateCcw, X } from 'lucide-react';
import { useEffect, useRef, useState } from 'react';
import type { RunEvent, RunStatus, Trigger } from '../api';
import { useEditor } from '../store/editor';
import { useNav } from '../app/nav';
import { RunList } from './RunList';
import { RunDetail } from './RunDetail';
import { ReplayDialog } from './ReplayDialog';
import { BulkReplayDialog } from './BulkReplayDialog';
import { useBulkReplayDialog } from './replay';
import { ResumeDialog } from './ResumeDialog';
import { StatusChart } from './StatusChart';
import { onRunEvent, onStreamReset } from './events';
import { fromLocalInput, plural, shortId, toLocalInput } from './format';
import { isResumable } from './resume';
import { previewLine, RANGES, STATUSES, TRIGGERS, useHistory, type BulkProgress, type RangePreset } from './store';

/** A text filter applied after a pause in typing (or on Enter). */
function SearchInput({
  value,
  onCommit,
  placeholder,
  testId,
  title,
}: {
  value: string;
  onCommit(v: string): void;
  placeholder: string;
  testId: string;
  title: string;
}) {
  const [text, setText] = useState(value);
  useEffect(() => setText(value), [value]);
  useEffect(() => {
    if (text === value) return;
    const t = setTimeout(() => onCommit(text), 350);
    return () => clearTimeout(t);
  }, [text, value, onCommit]);
  return (
    <input
      className="fx-input fx-filter-search fx-mono"
      type="search"
      value={text}
      placeholder={placeholder}
      title={title}
      aria-label={title}
      onChange={(e) => setText(e.target.value)}
      onKeyDown={(e) => e.key === 'Enter' && onCommit(text)}
      data-testid={testId}
      spellCheck={false}
    />
  );
}

function Filters() {
  const f = useHistory((s) => s.filters);
  const setFilters = useHistory((s) => s.setFilters);
  const reset = useHistory((s) => s.resetFilters);
  const workflows = useEditor((s) => s.workflows);
  const commitQ = useRef((v: string) => useHistory.getState().setFilters({ q: v })).current;
  const commitKey = useRef((v: string) => useHistory.getState().setFilters({ key: v })).current;
  const any = f.workflow || f.status || f.mode || f.trigger || f.key || f.q || f.error || f.duplicates || f.range !== 'all';
  return (
    <div className="fx-filters" data-testid="run-filters">
      <select className="fx-input" value={f.workflow} onChange={(e) => setFilters({ workflow: e.target.value })} data-testid="filter-workflow" aria-label="Workflow">
        <option value="">All workflows</option>
        {workflows.map((w) => (
          <option key={w.id} value={w.id}>
            {w.id}
          </option>
        ))}
        {f.workflow && !workflows.some((w) => w.id === f.workflow) && <option value={f.workflow}>{f.workflow}</option>}
      </select>
      <select className="fx-input" value={f.status} onChange={(e) => setFilters({ status: e.target.value as RunStatus | '' })} data-testid="filter-status" aria-label="Status">
        <option value="">Any status</option>
        {STATUSES.map((s) => (
          <option key={s} value={s}>
            {s.replace('_', ' ')}
          </option>
        ))}
      </select>
      <select className="fx-input" value={f.mode} onChange={(e) => setFilters({ mode: e.target.value as 'live' | 'dry' | '' })} data-testid="filter-mode" aria-label="Mode">
        <option value="">Live and dry</option>
        <option value="live">Live</option>
        <option value="dry">Dry</option>
      </select>
      <select className="fx-input" value={f.trigger} onChange={(e) => setFilters({ trigger: e.target.value as Trigger | '' })} data-testid="filter-trigger" aria-label="Trigger">
        <option value="">Any trigger</option>
        {TRIGGERS.map((t) => (
          <option key={t} value={t}>
            {t}
          </option>
        ))}
      </select>
      <select
        className="fx-input"
        value={f.range}
        onChange={(e) => {
          const range = e.target.value as RangePreset;
          if (range === 'custom') setFilters({ range, since: f.since ?? Date.now() - 86_400_000, until: f.until });
          else setFilters({ range, since: null, until: null });
        }}
        data-testid="filter-range"
        aria-label="Time range"
      >
        {RANGES.map((r) => (
          <option key={r.id} value={r.id}>
            {r.label}
          </option>
        ))}
      </select>
      {f.range === 'custom' && (
        <>
          <input
            className="fx-input fx-filter-date"
            type="datetime-local"
            value={toLocalInput(f.since)}
            onChange={(e) => setFilters({ since: fromLocalInput(e.target.value) })}
            data-testid="filter-since"
            aria-label="From"
          />
          <span className="fx-muted">–</span>
          <input
            className="fx-input fx-filter-date"
            type="datetime-local"
            value={toLocalInput(f.until)}
            onChange={(e) => setFilters({ until: fromLocalInput(e.target.value) })}
            data-testid="filter-until"
            aria-label="Until"
          />
        </>
      )}
      <SearchInput
        value={f.q}
        onCommit={commitQ}
        placeholder="Run id, key or a value (cus_…)…"
        testId="filter-q"
        title="A run id, an idempotency/event key, or a value inside the run (a customer or invoice id in its input or a step's output): exact or its beginning"
      />
      {f.error && (
        <button className="fx-filter-chip" onClick={() => setFilters({ error: '' })} title="Show every run" data-testid="filter-error">
          Failed with {f.error} ×
        </button>
      )}
      <label className="fx-filter-check" title="Only runs whose event arrived more than once, where Fluxo stopped the repeat (at the door, by a Memory claim or by the app's dedupe)">
        <input
          type="checkbox"
          checked={f.duplicates === 'stopped'}
          onChange={(e) => setFilters({ duplicates: e.target.checked ? 'stopped' : '' })}
          data-testid="filter-duplicates"
        />
        Stopped duplicates
      </label>
      <SearchInput value={f.key} onCommit={commitKey} placeholder="Exact event key…" testId="filter-key" title="An idempotency/event key, exactly" />
      {any && (
        <button className="fx-btn fx-btn-small fx-btn-ghost" onClick={reset} data-testid="filter-reset">
          Reset
        </button>
      )}
    </div>
  );
}

const FIELDS_KEY = 'fluxo.export.fields';

/** A size for people: `812 B`, `12.4 KB`, `3.1 MB`. */
function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KB`;
  return `${(n / 1024 / 1024).toFixed(1)} MB`;
}

/**
 * Export the runs matching the filters with the server's export (`GET /runs/export`, or the
 * desktop's `export_runs`): CSV with the input paths typed here as extra columns (the whole
 * input in one column when empty), or JSON Lines. The formula-injection rule lives there.
 */
function ExportMenu() {
  const [open, setOpen] = useState(false);
  const [fields, setFields] = useState(() => localStorage.getItem(FIELDS_KEY) ?? '');
  const [progress, setProgress] = useState<number | null>(null);
  const ctl = useRef<AbortController | null>(null);
  const button = useRef<HTMLButtonElement | null>(null);
  const run = async (format: 'csv' | 'jsonl') => {
    setOpen(false);
    localStorage.setItem(FIELDS_KEY, fields);
    const c = new AbortController();
    ctl.current = c;
    setProgress(0);
    try {
      const api = useEditor.getState().api!;
      const r = await api.exportRuns(useHistory.getState().query, { format, fields }, setProgress, c.signal);
      const what = format === 'csv' ? 'CSV' : 'JSON Lines';
      useEditor.getState().notify('ok', r.path ? `Exported the runs as ${what} to ${r.path} (${formatBytes(r.bytes)})` : `Exported the runs as ${what} (${formatBytes(r.bytes)})`);
    } catch (e) {
      if ((e as Error).name !== 'AbortError') useEditor.getState().notify('error', `Export failed: ${(e as Error).message}`);
    } finally {
      setProgress(null);
      ctl.current = null;
    }
  };
  if (progress !== null) {
    return (
      <span className="fx-row" data-testid="export-progress">
        <span className="fx-muted">Exporting… {formatBytes(progress)}</span>
        <button className="fx-btn fx-btn-small" onClick={() => ctl.current?.abort()}>
          Cancel
        </button>
      </span>
    );
  }
  return (
    <span
      className="fx-menu-wrap"
      // Escape closes it wherever focus is in it (the button included) and gives focus back to
      // the button; Tab past its last item closes it too (a menu button's usual keyboard).
      onKeyDown={(e) => {
        if (e.key === 'Escape' && open) {
          e.stopPropagation();
          setOpen(false);
          button.current?.focus();
        }
      }}
      onBlur={(e) => {
        if (open && !e.currentTarget.contains(e.relatedTarget as Node | null)) setOpen(false);
      }}
    >
      <button
        ref={button}
        className="fx-btn fx-btn-small"
        onClick={() => setOpen((o) => !o)}
        data-testid="export"
        title="Download the runs matching these filters"
        aria-haspopup="true"
        aria-expanded={open}
      >
        Export <ChevronDown size={14} aria-hidden />
      </button>
      {open && (
        <span
          className="fx-menu fx-export-menu"
          data-testid="export-menu"
          // Closes when the pointer leaves, unless the columns field is being typed in.
          onMouseLeave={(e) => !e.currentTarget.contains(document.activeElement) && setOpen(false)}
        >
          <label className="fx-export-fields">
            <span className="fx-muted">CSV columns from the input (empty: the whole input as JSON)</span>
            <input
              className="fx-input fx-mono"
              value={fields}
              onChange={(e) => setFields(e.target.value)}
              placeholder="input.data.object.customer, input.amount"
              spellCheck={false}
              data-testid="export-fields"
              aria-label="CSV columns from the input"
            />
          </label>
          <button onClick={() => void run('csv')} data-testid="export-csv" title="Opens safely in a spreadsheet: text that looks like a formula starts with ', numbers stay numbers">
            CSV
          </button>
          <button onClick={() => void run('jsonl')} data-testid="export-jsonl" title="One JSON object per run: its summary and its whole input">
            JSON Lines
          </button>
        </span>
      )}
    </span>
  );
}

/** What became of each run of the last bulk action, with links to the new runs. */
function BulkResults({ bulk }: { bulk: BulkProgress }) {
  const openRun = useNav((s) => s.openRun);
  const [open, setOpen] = useState(false);
  if (!bulk.results.length) return null;
  return (
    <span className="fx-menu-wrap">
      <button className="fx-btn fx-btn-small" onClick={() => setOpen((o) => !o)} data-testid="bulk-results-toggle" aria-expanded={open}>
        Results <ChevronDown size={14} aria-hidden />
      </button>
      {open && (
        <div className="fx-menu fx-bulk-results" data-testid="bulk-results">
          {bulk.results.map((r) => (
            <div key={r.id} className={`fx-bulk-result is-${r.outcome}`} data-testid="bulk-result" data-run-id={r.id} data-outcome={r.outcome} data-new-run-id={r.newId ?? ''}>
              <button className="fx-link fx-mono" onClick={() => openRun(r.id)} title={r.id}>
                {shortId(r.id)}
              </button>
              {r.newId && (
                <>
                  <span className="fx-muted">→</span>
                  <button className="fx-link fx-mono" onClick={() => openRun(r.newId!)} title={r.newId} data-testid="bulk-result-new">
                    {shortId(r.newId)}
                  </button>
                </>
              )}
              {r.action && <span className="fx-muted">{r.action}</span>}
              <span className={`fx-pill run-${r.outcome === 'error' ? 'failed' : r.outcome}`}>{r.outcome}</span>
              {r.mode === 'dry' && <span className="fx-mode fx-mode-dry">dry</span>}
              {r.note && <span className="fx-muted fx-bulk-note">{r.note}</span>}
            </div>
          ))}
        </div>
      )}
    </span>
  );
}

/** "Select all matching": the server's count of every failed run of the filters and what the action would do. */
function MatchingBar({ version, setVersion }: { version: 'current' | 'original'; setVersion(v: 'current' | 'original'): void }) {
  const m = useHistory((s) => s.matching)!;
  const bulk = useHistory((s) => s.bulk);
  const clear = useHistory((s) => s.clearSelection);
  const p = m.preview;
  const n = p ? p.resume + p.replay : 0;
  const go = async () => {
    if (!p) return;
    const ok = await useEditor.getState().ask({
      title: `Resume or replay ${plural(n, 'failed run')}?`,
      message:
        `${previewLine(p)}. Resumes continue where each run stopped (steps that succeeded are reused); ` +
        `replays run again live with the ${version} version. Dry runs are never replayed live. The new runs are queued and linked to the runs they recover.`,
      confirmLabel: `Start ${n}`,
    });
    if (ok) await useHistory.getState().bulkMatching(version);
  };
  return (
    <span className="fx-row fx-matching" data-testid="matching" data-loading={String(m.loading)}>
      {m.loading && <span className="fx-muted">Counting the failed runs that match…</span>}
      {m.error && (
        <span className="fx-error-text" data-testid="matching-error">
          {m.error}
        </span>
      )}
      {p && (
        <>
          <span data-testid="matching-count" data-count={p.matched}>
            All {plural(p.matched, 'failed run')} matching selected
          </span>
          <span className="fx-muted" data-testid="bulk-preview-line" data-resume={p.resume} data-replay={p.replay} data-skipped={p.skipped} data-dry={p.dry_excluded}>
            {previewLine(p)}
          </span>
          {p.replay > 0 && (
            <select className="fx-input fx-input-small" value={version} onChange={(e) => setVersion(e.target.value as 'current' | 'original')} aria-label="Version for the replays">
              <option value="current">replay with the current version</option>
              <option value="original">replay with the original version</option>
            </select>
          )}
          <button className="fx-btn fx-btn-small fx-btn-primary" onClick={() => void go()} disabled={!n || !!bulk?.running} data-testid="bulk-matching-start">
            <Play size={12} aria-hidden /> Resume / replay {n.toLocaleString('en-US')}
          </button>
        </>
      )}
      <button className="fx-btn fx-btn-small fx-btn-ghost" onClick={clear} data-testid="matching-clear">
        Clear
      </button>
    </span>
  );
}

function SelectionBar() {
  const selected = useHistory((s) => s.selected);
  const bulk = useHistory((s) => s.bulk);
  const matching = useHistory((s) => s.matching);
  const selectAllMatching = useHistory((s) => s.selectAllMatching);
  const clear = useHistory((s) => s.clearSelection);
  const bulkResume = useHistory((s) => s.bulkResume);
  const runs = useHistory((s) => s.runs);
  const [version, setVersion] = useState<'current' | 'original'>('current');
  const n = selected.size;
  const picked = runs.filter((r) => selected.has(r.id));
  const resumable = picked.filter((r) => isResumable(r.status));
  const dry = resumable.filter((r) => r.mode === 'dry').length;
  const dryPicked = picked.filter((r) => r.mode === 'dry').length;
  const go = () => useBulkReplayDialog.getState().open([...selected], version);
  const resume = async () => {
    const ids = [...selected];
    const others = n - resumable.length;
    const ok = await useEditor.getState().ask({
      title: `Resume ${plural(resumable.length, 'run')}?`,
      message:
        `Each selected failed, timed-out or interrupted run continues where it stopped, two at a time: steps that succeeded are reused, ` +
        `the failed step and the ones after it execute again. Runs already resumed are skipped.` +
        (dry ? ` ${plural(dry, 'dry run')} ${dry === 1 ? 'is' : 'are'} resumed dry (nothing is sent).` : '') +
        (others ? ` ${plural(others, 'other selected run')} (not failed) ${others === 1 ? 'is' : 'are'} skipped.` : ''),
      confirmLabel: `Resume ${resumable.length}`,
    });
    if (ok) await bulkResume(ids);
  };
  const verb =
    bulk?.kind === 'matching'
      ? bulk.running
        ? 'Recovering'
        : 'Recovered'
      : bulk?.kind === 'resume'
        ? bulk.running
          ? 'Resuming'
          : 'Resumed'
        : bulk?.running
          ? 'Replaying'
          : 'Replayed';
  return (
    <div className="fx-selbar" data-testid="selection-bar">
      {!matching && (
        <button
          className="fx-btn fx-btn-small"
          onClick={() => void selectAllMatching()}
          disabled={!!bulk?.running}
          data-testid="select-all-matching"
          title="Select every failed, timed-out or interrupted run matching the filters: all of them, not only the loaded rows"
        >
          Select all failed matching
        </button>
      )}
      {matching && <MatchingBar version={version} setVersion={setVersion} />}
      {!matching && n > 0 && (
        <>
          <span data-testid="selected-count">{plural(n, 'run')} selected</span>
          <button
            className="fx-btn fx-btn-small fx-btn-primary"
            onClick={() => void resume()}
            disabled={!!bulk?.running || !resumable.length}
            data-testid="bulk-resume"
            title="Continue each selected failed, timed-out or interrupted run where it stopped"
          >
            <Play size={12} aria-hidden /> Resume selected
          </button>
          <span className="fx-muted">or replay with the</span>
          <select className="fx-input fx-input-small" value={version} onChange={(e) => setVersion(e.target.value as 'current' | 'original')} aria-label="Version for bulk replay">
            <option value="current">current version</option>
            <option value="original">original version</option>
          </select>
          <button className="fx-btn fx-btn-small" onClick={go} disabled={!!bulk?.running || n === dryPicked} data-testid="bulk-replay">
            <RotateCcw size={13} aria-hidden /> Replay selected
          </button>
          <button className="fx-btn fx-btn-small fx-btn-ghost" onClick={clear}>
            Clear
          </button>
        </>
      )}
      {bulk && (
        <span className="fx-bulk" data-testid="bulk-progress" data-kind={bulk.kind} data-done={bulk.done} data-total={bulk.total} data-running={String(bulk.running)}>
          <span className="fx-progress">
            <span style={{ width: `${bulk.total ? (bulk.done / bulk.total) * 100 : 100}%` }} />
          </span>
          <span>
            {verb} {bulk.done}/{bulk.total}
          </span>
          {bulk.kind === 'matching' && (
            <span className="fx-muted" data-testid="bulk-started" data-resumed={bulk.resumed ?? 0} data-replayed={bulk.replayed ?? 0} data-dry={bulk.dryExcluded ?? 0}>
              {bulk.resumed ?? 0} resumed, {bulk.replayed ?? 0} replayed
              {bulk.dryExcluded ? `; ${plural(bulk.dryExcluded, 'dry run')} excluded` : ''}
            </span>
          )}
          <span className="fx-ok-text" data-testid="bulk-succeeded">
            {bulk.succeeded} succeeded
          </span>
          {bulk.failed > 0 && (
            <span className="fx-error-text" data-testid="bulk-failed">
              {bulk.failed} failed
            </span>
          )}
          {bulk.skipped > 0 && (
            <span className="fx-muted" data-testid="bulk-skipped">
              {bulk.skipped} skipped
            </span>
          )}
          {bulk.errors.length > 0 && (
            <span className="fx-error-text" title={bulk.errors.join('\n')} data-testid="bulk-errors">
              {bulk.errors.length} not started
            </span>
          )}
          {bulk.results.length > 0 && <BulkResults bulk={bulk} />}
          {!bulk.running && (
            <button aria-label="Dismiss" className="fx-icon-btn" onClick={() => useHistory.setState({ bulk: null })} title="Dismiss">
              <X size={15} aria-hidden />
            </button>
          )}
        </span>
      )}
    </div>
  );
}

function LiveBadge() {
  const [on, setOn] = useState(false);
  const liveCount = useHistory((s) => s.liveCount);
  useEffect(() => {
    // Batch what the stream says: one refresh per quarter second at most.
    const pending = new Set<string>();
    let timer: ReturnType<typeof setTimeout> | undefined;
    let statsTimer: ReturnType<typeof setTimeout> | undefined;
    const flush = () => {
      timer = undefined;
      const ids = [...pending];
      pending.clear();
      void useHistory.getState().refreshRuns(ids);
    };
    const off = onRunEvent((e: RunEvent) => {
      setOn(true);
      if (e.event === 'step_finished') return;
      pending.add(e.run_id);
      timer ??= setTimeout(flush, 250);
      if (e.event === 'run_finished' && !statsTimer) {
        statsTimer = setTimeout(() => {
          statsTimer = undefined;
          void useHistory.getState().loadStats();
        }, 1500);
      }
    });
    // Events were lost while disconnected: what the list shows may be stale, so load it again.
    const offReset = onStreamReset(() => {
      const h = useHistory.getState();
      void h.reload();
      void h.loadStats();
    });
    return () => {
      off();
      offReset();
      clearTimeout(timer);
      clearTimeout(statsTimer);
    };
  }, []);
  return (
    <span className={`fx-live ${on ? 'is-on' : ''}`} title="New runs and status changes appear as they happen" data-testid="live-badge">
      <span className="fx-live-dot" /> Live{liveCount > 0 ? ` · ${liveCount} new` : ''}
    </span>
  );
}

export function RunsView() {
  const runId = useNav((s) => s.runId);
  useEffect(() => {
    const s = useHistory.getState();
    void s.reload();
    void s.loadStats();
    void useEditor.getState().refreshWorkflows();
  }, []);
  return (
    <div className="fx-runs" data-testid="runs-view">
      <div className="fx-runs-bar">
        <Filters />
        <span className="fx-spacer" />
        <LiveBadge />
        <ExportMenu />
      </div>
      <StatusChart />
      <SelectionBar />
      <div className={`fx-runs-body ${runId ? 'has-detail' : ''}`}>
        <RunList />
        {runId && <RunDetail key={runId} id={runId} />}
      </div>
      <ReplayDialog />
      <BulkReplayDialog />
      <ResumeDialog />
    </div>
  );
}
