// Runs over time by status: stacked bars (uPlot, canvas). Click a bar to filter the list to
// that time bucket (and to the status under the pointer); click a status to filter by it.

import { useEffect, useMemo, useRef, useState } from 'react';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import type { RunStatus } from '../api';
import { useHistory } from './store';
import { formatTime, plural } from './format';

/** Bottom to top. */
const STACK: RunStatus[] = ['succeeded', 'failed', 'timed_out', 'interrupted', 'skipped', 'running', 'queued'];
export const STATUS_COLOR: Record<RunStatus, string> = {
  succeeded: '#3fb68b',
  failed: '#f0616d',
  timed_out: '#e0a84a',
  interrupted: '#b07cf6',
  skipped: '#8a93a6',
  running: '#5aa9ff',
  queued: '#6b768d',
};

/** The duplicates-stopped line over the bars. */
export const DUPLICATES_COLOR = '#ffd166';

interface Series {
  xs: number[];
  /** Counts per status per bucket. */
  counts: Record<RunStatus, number[]>;
  totals: Record<RunStatus, number>;
  /** Duplicates stopped per bucket (`null`: none, so no point is drawn). */
  dups: (number | null)[];
  bucketMs: number;
}

function buildSeries(): Series | null {
  const { stats, statsWindow } = useHistory.getState();
  if (!stats || !statsWindow) return null;
  const b = stats.bucket_ms;
  if (!Number.isFinite(statsWindow.since) || !Number.isFinite(statsWindow.until)) return null;
  const first = Math.floor(statsWindow.since / b) * b;
  const n = Math.max(1, Math.ceil((statsWindow.until - first) / b));
  const xs = Array.from({ length: n }, (_, i) => first + i * b);
  const counts = Object.fromEntries(STACK.map((s) => [s, new Array<number>(n).fill(0)])) as Record<RunStatus, number[]>;
  const totals = Object.fromEntries(STACK.map((s) => [s, 0])) as Record<RunStatus, number>;
  for (const bucket of stats.buckets) {
    const i = Math.round((Date.parse(bucket.start) - first) / b);
    if (i < 0 || i >= n) continue;
    for (const [st, c] of Object.entries(bucket.counts)) {
      if (!(st in counts) || !c) continue;
      counts[st as RunStatus][i] += c;
      totals[st as RunStatus] += c;
    }
  }
  const dups = new Array<number | null>(n).fill(null);
  for (const bucket of stats.duplicates?.buckets ?? []) {
    const i = Math.round((Date.parse(bucket.start) - first) / b);
    if (i < 0 || i >= n || !bucket.count) continue;
    dups[i] = (dups[i] ?? 0) + bucket.count;
  }
  return { xs, counts, totals, dups, bucketMs: b };
}

/** `5 min`, `3 h`, `day`, `7 days`: a bucket width. */
function bucketLabel(ms: number): string {
  if (ms % 86_400_000 === 0) return ms === 86_400_000 ? 'day' : `${ms / 86_400_000} days`;
  if (ms % 3_600_000 === 0) return ms === 3_600_000 ? 'hour' : `${ms / 3_600_000} h`;
  return ms === 60_000 ? 'minute' : `${Math.round(ms / 60_000)} min`;
}

/** `850 ms`, `1.2 s`, `3.4 min`. */
export function formatMs(ms: number | undefined): string {
  if (ms === undefined) return '–';
  if (ms < 1000) return `${ms} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
  return `${(ms / 60_000).toFixed(1)} min`;
}

/** Durations (p50/p95/p99, overall, per workflow, and per step when the filter names one workflow) and failures grouped by reason; a group filters the list. */
function ChartFacts() {
  const stats = useHistory((s) => s.stats);
  const error = useHistory((s) => s.filters.error);
  const setFilters = useHistory((s) => s.setFilters);
  if (!stats) return null;
  const d = stats.duration;
  const per = (stats.durations ?? []).filter((w) => w.count > 0);
  // In the workflow file's order (the server sends them so).
  const steps = (stats.steps ?? []).filter((s) => s.count > 0);
  const failures = stats.failures ?? [];
  return (
    <div className="fx-chart-facts">
      <span className="fx-chart-pcts" data-testid="chart-percentiles" title={per.map((w) => `${w.workflow_id}: p50 ${formatMs(w.p50_ms)} · p95 ${formatMs(w.p95_ms)} · p99 ${formatMs(w.p99_ms)} (${w.count})`).join('\n')}>
        {d && d.count > 0 ? (
          <>
            Duration <b>p50</b> <span data-testid="chart-p50">{formatMs(d.p50_ms)}</span> · <b>p95</b> <span data-testid="chart-p95">{formatMs(d.p95_ms)}</span> · <b>p99</b>{' '}
            <span data-testid="chart-p99">{formatMs(d.p99_ms)}</span>
            {per.length > 1 && <span className="fx-muted"> · {per.length} workflows (hover)</span>}
          </>
        ) : (
          <span className="fx-muted">No finished runs to time</span>
        )}
      </span>
      {per.length > 1 && (
        <span className="fx-chart-wf-pcts" data-testid="chart-workflow-percentiles">
          {per.slice(0, 4).map((w) => (
            <span key={w.workflow_id} className="fx-muted" data-testid="chart-workflow-pct" data-workflow={w.workflow_id}>
              {w.workflow_id} p50 {formatMs(w.p50_ms)} · p95 {formatMs(w.p95_ms)} · p99 {formatMs(w.p99_ms)}
            </span>
          ))}
        </span>
      )}
      {steps.length > 0 && (
        <span
          className="fx-chart-wf-pcts"
          data-testid="chart-step-percentiles"
          title={steps.map((s) => `${s.step_id}: p50 ${formatMs(s.p50_ms)} · p95 ${formatMs(s.p95_ms)} · p99 ${formatMs(s.p99_ms)} (${s.count})`).join('\n')}
        >
          <span className="fx-muted">Steps:</span>
          {steps.slice(0, 8).map((s) => (
            <span key={s.step_id} className="fx-muted" data-testid="chart-step-pct" data-step={s.step_id}>
              <b>{s.step_id}</b> p50 {formatMs(s.p50_ms)} · p95 {formatMs(s.p95_ms)} · p99 {formatMs(s.p99_ms)}
            </span>
          ))}
          {steps.length > 8 && <span className="fx-muted">+{steps.length - 8} more (hover)</span>}
        </span>
      )}
      {failures.length > 0 && (
        <span className="fx-chart-failures" data-testid="chart-failures">
          <span className="fx-muted">Failures:</span>
          {failures.slice(0, 6).map((g) => (
            <button
              key={g.reason}
              className={`fx-failure-group ${error === g.reason ? 'is-active' : ''}`}
              onClick={() => setFilters({ error: error === g.reason ? '' : g.reason })}
              title={error === g.reason ? 'Show every run' : `Show the runs that failed with ${g.reason}`}
              data-testid="chart-failure"
              data-reason={g.reason}
            >
              {g.reason}: <b>{g.count.toLocaleString('en-US')}</b>
            </button>
          ))}
        </span>
      )}
    </div>
  );
}

export function StatusChart() {
  const stats = useHistory((s) => s.stats);
  const statsError = useHistory((s) => s.statsError);
  const status = useHistory((s) => s.filters.status);
  const setFilters = useHistory((s) => s.setFilters);
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const [hover, setHover] = useState<number | null>(null);
  const series = useMemo(() => (stats ? buildSeries() : null), [stats]);
  const seriesRef = useRef(series);
  seriesRef.current = series;

  const pick = (idx: number, st: RunStatus | null) => {
    const s = seriesRef.current;
    if (!s) return;
    const start = s.xs[idx];
    setFilters({ range: 'custom', since: start, until: start + s.bucketMs, ...(st ? { status: st } : {}) });
  };
  const pickRef = useRef(pick);
  pickRef.current = pick;

  useEffect(() => {
    const el = box.current;
    if (!el || !series) return;
    const bucketS = series.bucketMs / 1000;
    // Cumulative stacks, drawn top-most first so each later (lower) one paints over its part.
    const cum: number[][] = [];
    let acc = new Array<number>(series.xs.length).fill(0);
    for (const st of STACK) {
      acc = acc.map((v, i) => v + series.counts[st][i]);
      cum.push(acc);
    }
    const order = STACK.map((st, i) => ({ st, data: cum[i] })).reverse();
    const data: uPlot.AlignedData = [series.xs.map((x) => x / 1000 + bucketS / 2), ...order.map((o) => o.data), series.dups];
    const bars = uPlot.paths.bars!({ size: [0.86, 48], align: 0 });
    const opts: uPlot.Options = {
      width: Math.max(200, el.clientWidth),
      height: 120,
      legend: { show: false },
      padding: [8, 8, 0, 0],
      cursor: { drag: { x: false, y: false }, points: { show: false }, y: false },
      scales: {
        x: { time: true, range: [series.xs[0] / 1000, series.xs[series.xs.length - 1] / 1000 + bucketS] },
        y: { range: (_u, _min, max) => [0, Math.max(1, max * 1.08)] },
        // Its own scale: a burst of retries can outnumber the runs many times over.
        dups: { range: (_u, _min, max) => [0, Math.max(1, (max ?? 0) * 1.15)] },
      },
      axes: [
        { stroke: '#9aa5bb', grid: { stroke: '#1f2636', width: 1 }, ticks: { stroke: '#283042', width: 1 }, font: '11px sans-serif' },
        { stroke: '#9aa5bb', grid: { stroke: '#1f2636', width: 1 }, ticks: { show: false }, size: 40, font: '11px sans-serif' },
      ],
      series: [
        {},
        ...order.map((o) => ({ label: o.st, fill: STATUS_COLOR[o.st], stroke: STATUS_COLOR[o.st], width: 0, paths: bars, points: { show: false } })),
        { label: 'duplicates stopped', scale: 'dups', stroke: DUPLICATES_COLOR, width: 2, spanGaps: false, points: { show: true, size: 7, fill: DUPLICATES_COLOR, stroke: DUPLICATES_COLOR } },
      ],
      hooks: {
        setCursor: [(u) => setHover(u.cursor.idx ?? null)],
      },
    };
    const u = new uPlot(opts, data, el);
    plot.current = u;
    const onClick = () => {
      const idx = u.cursor.idx;
      if (idx === null || idx === undefined) return;
      const top = u.cursor.top ?? -1;
      const y = top >= 0 ? u.posToVal(top, 'y') : Infinity;
      let st: RunStatus | null = null;
      for (let k = 0; k < STACK.length; k++) {
        if (series.counts[STACK[k]][idx] > 0 && y <= cum[k][idx]) {
          st = STACK[k];
          break;
        }
      }
      pickRef.current(idx, st);
    };
    u.over.addEventListener('click', onClick);
    u.over.style.cursor = 'pointer';
    const ro = new ResizeObserver(() => {
      if (el.clientWidth) u.setSize({ width: el.clientWidth, height: 120 });
    });
    ro.observe(el);
    return () => {
      ro.disconnect();
      u.over.removeEventListener('click', onClick);
      u.destroy();
      plot.current = null;
    };
  }, [series]);

  const total = stats?.total ?? (series ? STACK.reduce((a, s) => a + series.totals[s], 0) : 0);
  const dupTotal = stats?.duplicates?.total ?? 0;
  const dupFilter = useHistory((s) => s.filters.duplicates);
  const hoverText =
    series && hover !== null && series.xs[hover] !== undefined
      ? `${formatTime(new Date(series.xs[hover]).toISOString())} · ${
          STACK.filter((s) => series.counts[s][hover])
            .map((s) => `${series.counts[s][hover]} ${s}`)
            .join(' · ') || 'no runs'
        }${series.dups[hover] ? ` · ${series.dups[hover]} ${series.dups[hover] === 1 ? 'duplicate' : 'duplicates'} stopped` : ''}`
      : null;

  return (
    <div
      className="fx-chart"
      data-testid="status-chart"
      data-total={total}
      data-buckets={stats?.buckets.length ?? 0}
      data-since={stats?.since ?? ''}
      data-until={stats?.until ?? ''}
      data-bucket-ms={stats?.bucket_ms ?? 0}
      data-duplicates={dupTotal}
    >
      <div className="fx-chart-head">
        <span className="fx-chart-title">Runs over time</span>
        {stats && (
          <span className="fx-chart-total" data-testid="chart-match-total">
            <b>{plural(total, 'run')}</b> {total === 1 ? 'matches' : 'match'}
            {stats.complete === false ? ' (figures of the newest 200,000)' : ''}
          </span>
        )}
        {series && <span className="fx-muted">per {bucketLabel(series.bucketMs)}{stats?.since ? ` · since ${formatTime(stats.since)}` : ''}</span>}
        <span className="fx-chart-legend">
          {STACK.map((st) => (
            <button
              key={st}
              className={`fx-legend-item ${status === st ? 'is-active' : ''}`}
              onClick={() => setFilters({ status: status === st ? '' : st })}
              title={status === st ? 'Show every status' : `Show ${st} runs only`}
              data-testid={`chart-status-${st}`}
            >
              <span className="fx-legend-swatch" style={{ background: STATUS_COLOR[st] }} />
              {st.replace('_', ' ')} <span data-testid={`chart-total-${st}`}>{series ? series.totals[st].toLocaleString('en-US') : '–'}</span>
            </button>
          ))}
          <button
            className={`fx-legend-item ${dupFilter ? 'is-active' : ''}`}
            onClick={() => setFilters({ duplicates: dupFilter ? '' : 'stopped' })}
            title={dupFilter ? 'Show every run' : 'Duplicate deliveries Fluxo stopped (the line): show the runs that stopped them'}
            data-testid="chart-duplicates"
          >
            <span className="fx-legend-swatch fx-legend-line" style={{ background: DUPLICATES_COLOR }} />
            duplicates stopped <span data-testid="chart-total-duplicates">{dupTotal.toLocaleString('en-US')}</span>
          </button>
        </span>
        <span className="fx-spacer" />
        <span className="fx-muted fx-chart-hover">{hoverText ?? 'Click a bar to filter to its time (and status)'}</span>
      </div>
      {statsError ? <div className="fx-empty fx-error-text">Cannot load the chart: {statsError}</div> : <div ref={box} className="fx-chart-plot" data-testid="chart-plot" />}
      <ChartFacts />
    </div>
  );
}
