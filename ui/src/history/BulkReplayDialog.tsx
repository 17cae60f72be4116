import { RotateCcw } from 'lucide-react';
import { useEffect, useMemo, useState } from 'react';
import { useEditor } from '../store/editor';
import { plural, shortId } from './format';
import { eachPooled } from './pool';
import { PredictionLines } from './ReplayDialog';
import { forecastReplay, useBulkReplayDialog, type Outcome, type ReplayForecast } from './replay';
import { useHistory } from './store';

type Forecast = { forecast: ReplayForecast } | { error: string };

const OUTCOME: Record<Outcome | 'error' | 'loading', { label: string; pill: string }> = {
  succeed: { label: 'will succeed', pill: 'succeeded' },
  fail: { label: 'will fail', pill: 'failed' },
  nothing: { label: 'does nothing', pill: 'skipped' },
  error: { label: 'cannot predict', pill: 'failed' },
  loading: { label: 'predicting…', pill: 'queued' },
};

/** "Of 3 live runs: 1 will succeed, 1 will fail; 1 dry run left out". */
function summaryLine(outcomes: (Outcome | 'error')[], live: number, dry: number): string {
  const n = (o: Outcome | 'error') => outcomes.filter((x) => x === o).length;
  const parts = [
    n('succeed') && `${n('succeed')} will succeed`,
    n('fail') && `${n('fail')} will fail`,
    n('nothing') && `${n('nothing')} would do nothing (stopped by ${n('nothing') === 1 ? 'its' : 'their'} own claim: resume ${n('nothing') === 1 ? 'it' : 'them'} instead)`,
    n('error') && `${n('error')} cannot be predicted`,
  ].filter(Boolean);
  return `Of ${plural(live, 'live run')}: ${parts.join(', ') || 'nothing to replay'}${dry ? `; ${plural(dry, 'dry run')} left out (never replayed live)` : ''}`;
}

/**
 * "Replay selected": before any live replay, each selected live run is previewed with the same
 * dry walk as a single replay (two at a time; nothing stored or sent), with its predicted
 * outcome and the facts behind it, and a summary. The live replay is offered once every
 * prediction is in. Dry runs are left out: a dry run is never replayed live.
 */
export function BulkReplayDialog() {
  const ids = useBulkReplayDialog((s) => s.ids);
  const version = useBulkReplayDialog((s) => s.version);
  const close = useBulkReplayDialog((s) => s.close);
  const [forecasts, setForecasts] = useState<Record<string, Forecast>>({});
  // The selected runs' summaries as the dialog opened, and the live ones (dry runs are never replayed live).
  const byId = useMemo(() => new Map(useHistory.getState().runs.filter((r) => ids?.includes(r.id)).map((r) => [r.id, r])), [ids]);
  const live = useMemo(() => (ids ?? []).filter((id) => byId.get(id)?.mode !== 'dry'), [ids, byId]);
  const dry = (ids?.length ?? 0) - live.length;

  useEffect(() => {
    setForecasts({});
    if (!ids) return;
    let on = true;
    const api = useEditor.getState().api!;
    void eachPooled(live, 2, async (id) => {
      if (!on) return;
      const f: Forecast = await forecastReplay(api, id, { version }).then(
        (forecast) => ({ forecast }),
        (e: Error) => ({ error: e.message }),
      );
      if (on) setForecasts((cur) => ({ ...cur, [id]: f }));
    });
    return () => {
      on = false;
    };
  }, [ids, live, version]);

  useEffect(() => {
    if (!ids) return;
    const onKey = (e: KeyboardEvent) => e.key === 'Escape' && close();
    window.addEventListener('keydown', onKey);
    return () => window.removeEventListener('keydown', onKey);
  }, [ids, close]);

  if (!ids) return null;
  const outcomes = live.map((id) => forecasts[id]).filter(Boolean).map((f) => ('forecast' in f ? f.forecast.outcome : 'error'));
  const ready = outcomes.length === live.length;
  const start = () => {
    close();
    void useHistory.getState().bulkReplay(ids, 'live', version);
  };
  return (
    <div className="fx-modal-backdrop" onClick={close}>
      <div className="fx-modal fx-bulk-replay" role="dialog" aria-label="Replay selected runs" data-testid="bulk-replay-dialog" onClick={(e) => e.stopPropagation()}>
        <h3>Replay {plural(live.length, 'run')} live?</h3>
        <p>
          Each run is replayed live with the {version} version of its workflow, two at a time, and linked to the run it replays.
          First, what each replay is predicted to do (a dry walk: nothing stored or sent):
        </p>
        <div className="fx-prediction" data-testid="bulk-replay-summary" data-state={ready ? 'ready' : 'loading'}>
          {ready ? summaryLine(outcomes, live.length, dry) : `Predicting each replay… ${outcomes.length} of ${live.length} done`}
        </div>
        <ul className="fx-bulk-forecasts">
          {live.map((id) => {
            const f = forecasts[id];
            const outcome = !f ? 'loading' : 'forecast' in f ? f.forecast.outcome : 'error';
            const r = byId.get(id);
            return (
              <li key={id} className="fx-bulk-forecast" data-testid="bulk-forecast" data-run-id={id} data-outcome={outcome}>
                <div className="fx-row">
                  <code title={id}>{shortId(id)}</code>
                  <span className="fx-muted">{r?.workflow_id}</span>
                  <span className="fx-spacer" />
                  <span className={`fx-pill run-${OUTCOME[outcome].pill}`}>{OUTCOME[outcome].label}</span>
                </div>
                {f && 'error' in f && <div className="fx-error-text">The replay cannot be predicted: {f.error}</div>}
                {f && 'forecast' in f && (
                  <details>
                    <summary className={`fx-prediction-headline ${outcome === 'succeed' ? '' : 'is-bad'}`} data-testid="bulk-forecast-headline">
                      {f.forecast.prediction.headline}
                    </summary>
                    <PredictionLines prediction={f.forecast.prediction} warnings={f.forecast.preview.warnings} />
                  </details>
                )}
              </li>
            );
          })}
        </ul>
        <div className="fx-modal-actions">
          <button className="fx-btn" onClick={close} data-testid="bulk-replay-cancel">
            Cancel
          </button>
          <button className="fx-btn fx-btn-primary" onClick={start} disabled={!ready || !live.length} data-testid="bulk-replay-confirm" autoFocus>
            <RotateCcw size={13} aria-hidden /> Replay {live.length} live
          </button>
        </div>
      </div>
    </div>
  );
}
