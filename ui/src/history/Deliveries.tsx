// A run's deliveries (issue 37): the one that started it, then every duplicate of its event that
// Fluxo stopped, each with its time, the answer its sender got and where it was stopped (the
// door, a Memory claim, the app's own dedupe). Read from `GET /runs/{id}/deliveries`, again
// every few seconds while shown: a repeat at the door changes no run, so no run event says so.

import { useCallback, useEffect, useState } from 'react';
import type { Deliveries as DeliveriesOf, RunRecord, Stopped } from '../api';
import { useEditor } from '../store/editor';
import { useNav } from '../app/nav';
import { formatTime } from './format';

const REFRESH_MS = 5000;

/** The names of an app write's dedupe strategies, as a builder reads them. */
const STRATEGY: Record<string, string> = {
  native_key: "the app's idempotency key",
  upsert: "the app's upsert",
  conflict_is_exists: 'the app answering that it exists',
  kept_id: 'the record id Fluxo kept (updated, not written again)',
  find_then_create: "the app's search (found, not created)",
  find_or_create: 'the lookup (found, not created)',
};

/** Where a duplicate was stopped, in one phrase. */
export function stoppedByText(s: Stopped): string {
  switch (s.by) {
    case 'door':
      return 'stopped at the door (same key within the dedupe window)';
    case 'run_api':
      return 'stopped by the run API (same Idempotency-Key: the first answer again)';
    case 'memory_claim':
      return `stopped by the Memory claim at ${s.step_id}`;
    case 'app':
      return `stopped at ${s.step_id} by ${STRATEGY[s.strategy] ?? s.strategy}`;
  }
}

function answerText(answer?: number, first = false): string | null {
  if (answer === undefined) return null;
  if (first) return `answered ${answer}`;
  return answer === 200 ? 'answered 200 duplicate: true' : `answered ${answer}`;
}

/** The deliveries of `run`, newest state on each refresh; `null` until the first answer. */
function useDeliveries(run: RunRecord): DeliveriesOf | null {
  const [d, setD] = useState<DeliveriesOf | null>(null);
  const load = useCallback(async () => {
    const api = useEditor.getState().api;
    if (!api) return;
    try {
      setD(await api.runDeliveries(run.id));
    } catch {
      /* shown as no deliveries: the run itself still shows */
    }
  }, [run.id]);
  useEffect(() => {
    setD(null);
    void load();
    const t = setInterval(() => void load(), REFRESH_MS);
    return () => clearInterval(t);
  }, [load, run.status]);
  return d;
}

/** The Deliveries section of a run's detail. Dry runs have none to show. */
export function Deliveries({ run }: { run: RunRecord }) {
  const d = useDeliveries(run);
  if (run.mode === 'dry' || !d) return null;
  const openRun = useNav.getState().openRun;
  return (
    <div className="fx-deliveries" data-testid="run-deliveries" data-duplicates={d.duplicates_stopped}>
      <h4 className="fx-detail-section">
        Deliveries <span className="fx-count">{1 + d.duplicates_stopped}</span>
        {d.duplicates_stopped > 0 && (
          <span className="fx-dup-tag" data-testid="detail-duplicates">
            {d.duplicates_stopped} {d.duplicates_stopped === 1 ? 'duplicate' : 'duplicates'} stopped
          </span>
        )}
      </h4>
      <ol className="fx-delivery-list">
        <li className="fx-delivery is-first" data-testid="delivery-first">
          <time dateTime={d.first.at}>{formatTime(d.first.at)}</time>
          <span>
            <strong>First delivery</strong> · {d.first.trigger}
            {d.first.key ? (
              <>
                {' '}
                · key <code>{d.first.key}</code>
              </>
            ) : null}
            {answerText(d.first.answer, true) ? ` · ${answerText(d.first.answer, true)}` : ''} · started this run
          </span>
        </li>
        {d.stopped.map((s, i) => (
          <li key={i} className="fx-delivery is-duplicate" data-testid="delivery-duplicate" data-by={s.by}>
            <time dateTime={s.first_at} title={s.count > 1 ? `${s.first_at} – ${s.last_at}` : s.first_at}>
              {formatTime(s.first_at)}
            </time>
            <span>
              <strong>{s.count > 1 ? `${s.count} duplicates` : 'Duplicate'}</strong>
              {formatTime(s.last_at) !== formatTime(s.first_at) ? ` (until ${formatTime(s.last_at)})` : ''} · {stoppedByText(s)}
              {answerText(s.answer) ? ` · ${answerText(s.answer)}` : ''}
              {s.stopped_run && (
                <>
                  {' '}
                  · its run{' '}
                  <button className="fx-link" onClick={() => openRun(s.stopped_run!)} data-testid="delivery-stopped-run">
                    {s.stopped_run.slice(0, 8)}
                  </button>{' '}
                  did nothing twice
                </>
              )}
            </span>
          </li>
        ))}
        {d.duplicates_stopped === 0 && (
          <li className="fx-delivery fx-muted" data-testid="delivery-none">
            No duplicate of this event has arrived (or it came after its dedupe window).
          </li>
        )}
      </ol>
    </div>
  );
}
