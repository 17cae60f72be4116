import type { RunRecord, RunSummary } from '../api';
import { useNav } from '../app/nav';
import { formatTime, shortId } from './format';
import { childRuns, useAncestors } from './lineage';
import { rootOf } from './resume';

/** A linked run: its short id (click → its detail) and, once known, its status. */
export function RunRef({ id, summary, rel, testId }: { id: string; summary?: RunSummary | null; rel?: string; testId?: string }) {
  const openRun = useNav((s) => s.openRun);
  return (
    <button
      className="fx-run-ref"
      onClick={() => openRun(id)}
      title={`${id}${summary ? ` · ${summary.trigger} · ${summary.status}` : ''}`}
      data-testid={testId}
      data-run-id={id}
      data-rel={rel}
      data-status={summary?.status ?? ''}
    >
      <span className="fx-link fx-mono">{shortId(id)}</span>
      {summary && <span className={`fx-pill run-${summary.status}`}>{summary.status.replace('_', ' ')}</span>}
      {summary && (
        <span className="fx-muted fx-run-ref-time" title={summary.finished_at ? `finished ${summary.finished_at}` : `created ${summary.created_at}`} data-testid="run-ref-time">
          {formatTime(summary.finished_at ?? summary.created_at)}
        </span>
      )}
    </button>
  );
}

function ChainNode({ s, current }: { s: { id: string; trigger?: string; status: string; mode?: string; created_at?: string; finished_at?: string }; current: boolean }) {
  const openRun = useNav((st) => st.openRun);
  return (
    <button
      className={`fx-chain-node ${current ? 'is-current' : ''}`}
      onClick={() => !current && openRun(s.id)}
      disabled={current}
      title={current ? `${s.id} (this run)` : s.id}
      data-testid="lineage-run"
      data-run-id={s.id}
      data-status={s.status}
      data-current={String(current)}
    >
      <span className="fx-chain-trigger">{s.trigger ?? ''}</span>
      <span className={`fx-pill run-${s.status}`}>{s.status.replace('_', ' ')}</span>
      <span className="fx-mono">{shortId(s.id)}</span>
      {s.created_at && <span className="fx-muted fx-run-ref-time">{formatTime(s.finished_at ?? s.created_at)}</span>}
    </button>
  );
}

/**
 * The run's lineage: the resumes it belongs to (root → … → this run → the runs that resumed it),
 * and the replays on either side. Every run is a link, with its status.
 */
export function Lineage({ run, summaries }: { run: RunRecord; summaries: Record<string, RunSummary | null> }) {
  const ancestors = useAncestors(run);
  const resumes = run.resumed_by ?? [];
  const replays = run.replayed_by ?? [];
  const root = rootOf(run);
  const rootShown = root === run.id || ancestors.some((a) => a.id === root);
  const children = childRuns(run);
  if (!run.resume_of && !resumes.length && !run.replay_of && !replays.length && rootShown && !run.parent_run && !children.length) return null;
  return (
    <div className="fx-lineage" data-testid="lineage" data-root={root}>
      {(run.resume_of || resumes.length > 0) && (
        <div className="fx-chain" data-testid="lineage-chain">
          <span className="fx-muted" title="The first run, then each resume of it, in order">
            Resumes
          </span>
          {ancestors.map((a) => (
            <span key={a.id} className="fx-chain-step">
              <ChainNode s={a} current={false} />
              <span className="fx-chain-arrow" title="resumed by">
                →
              </span>
            </span>
          ))}
          {run.resume_of && !ancestors.length && (
            <span className="fx-chain-step">
              <RunRef id={run.resume_of} summary={summaries[run.resume_of]} rel="resume_of" testId="lineage-resume-of" />
              <span className="fx-chain-arrow" title="resumed by">
                →
              </span>
            </span>
          )}
          <ChainNode s={run} current />
          {resumes.map((id) => (
            <span key={id} className="fx-chain-step">
              <span className="fx-chain-arrow" title="resumed by">
                →
              </span>
              {summaries[id] ? <ChainNode s={summaries[id]!} current={false} /> : <RunRef id={id} rel="resumed_by" testId="lineage-resumed-by" />}
            </span>
          ))}
        </div>
      )}
      {!rootShown && (
        <div className="fx-lineage-row">
          <span className="fx-muted">Lineage root</span>
          <RunRef id={root} summary={summaries[root]} rel="root" testId="lineage-root" />
        </div>
      )}
      {run.parent_run && (
        <div className="fx-lineage-row" data-testid="detail-parent-run">
          <span className="fx-muted" title="The run whose fan_out step started this one">
            Fan-out of
          </span>
          <RunRef id={run.parent_run} summary={summaries[run.parent_run]} rel="parent_run" testId="parent-run-link" />
        </div>
      )}
      {children.length > 0 && (
        <div className="fx-lineage-row" data-testid="detail-children">
          <span className="fx-muted" title="Runs this run's fan_out step started">
            Started {children.length}
          </span>
          <span className="fx-links">
            {children.slice(0, 12).map((id) => (
              <RunRef key={id} id={id} summary={summaries[id]} rel="child" testId="child-run-link" />
            ))}
            {children.length > 12 && <span className="fx-muted">and {children.length - 12} more</span>}
          </span>
        </div>
      )}
      {run.replay_of && (
        <div className="fx-lineage-row" data-testid="detail-replay-of">
          <span className="fx-muted">Replay of</span>
          <RunRef id={run.replay_of} summary={summaries[run.replay_of]} rel="replay_of" testId="replay-of-link" />
          {run.input_edited && (
            <span className="fx-tag" data-testid="input-edited" title="This replay ran on a corrected payload, not the original input">
              input edited
            </span>
          )}
        </div>
      )}
      {replays.length > 0 && (
        <div className="fx-lineage-row" data-testid="detail-replayed-by">
          <span className="fx-muted">Replayed by</span>
          <span className="fx-links">
            {replays.map((id) => (
              <RunRef key={id} id={id} summary={summaries[id]} rel="replayed_by" testId="replayed-by-link" />
            ))}
          </span>
        </div>
      )}
    </div>
  );
}

/**
 * The run that fixed `run` (failed, timed out or interrupted), from its direct resumes and
 * replays: one that succeeded (live for a live run), or the run the server says fixed one of them.
 */
export function fixedByOf(run: RunRecord, summaries: Record<string, RunSummary | null>): string | undefined {
  if (!['failed', 'timed_out', 'interrupted'].includes(run.status)) return undefined;
  for (const id of [...(run.resumed_by ?? []), ...(run.replayed_by ?? [])]) {
    const s = summaries[id];
    if (!s) continue;
    if (s.status === 'succeeded' && (s.mode === 'live' || run.mode === 'dry')) return id;
    if (s.fixed_by) return s.fixed_by;
  }
  return undefined;
}
