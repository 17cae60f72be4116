import { useEffect, useState } from 'react';
import type { RunRecord } from '../api';
import { useEditor } from '../store/editor';
import { useNav } from '../app/nav';
import { predict, useReplayDialog, type Prediction } from './replay';
import { summaryOf, useHistory } from './store';
import { shortId } from './format';

type Mode = 'live' | 'dry';
type Version = 'current' | 'original';

/**
 * Replay a run: live or dry, current or original version. Before a live replay, a dry replay
 * of the same run predicts what it will do (Memory claims that exist, the routes taken, the
 * calls made). The new run opens as soon as it is queued.
 */
export function ReplayDialog() {
  const target = useReplayDialog((s) => s.target);
  const close = useReplayDialog((s) => s.close);
  const [mode, setMode] = useState<Mode>('live');
  const [version, setVersion] = useState<Version>('current');
  const [pred, setPred] = useState<{ loading: boolean; result?: Prediction; dry?: RunRecord; error?: string } | null>(null);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);

  useEffect(() => {
    setMode('live');
    setVersion('current');
    setError(null);
    setBusy(false);
  }, [target]);

  // The prediction: a dry replay of the same run with the chosen version.
  useEffect(() => {
    if (!target || mode !== 'live') {
      setPred(null);
      return;
    }
    let live = true;
    setPred({ loading: true });
    const api = useEditor.getState().api!;
    api
      .replayRun(target.id, { mode: 'dry', version })
      .then((dry) => {
        if (!live) return;
        setPred({ loading: false, result: predict(dry), dry });
        useHistory.getState().upsert(summaryOf(dry));
      })
      .catch((e: Error) => live && setPred({ loading: false, error: e.message }));
    return () => {
      live = false;
    };
  }, [target, mode, version]);

  useEffect(() => {
    if (!target) return;
    const onKey = (e: KeyboardEvent) => e.key === 'Escape' && !busy && close();
    window.addEventListener('keydown', onKey);
    return () => window.removeEventListener('keydown', onKey);
  }, [target, busy, close]);

  if (!target) return null;

  const start = async () => {
    setBusy(true);
    setError(null);
    try {
      const run = await useEditor.getState().api!.replayRun(target.id, { mode, version, async: true });
      useHistory.getState().upsert(summaryOf(run));
      close();
      useNav.getState().openRun(run.id);
      useEditor.getState().notify('ok', `${mode === 'dry' ? 'Dry replay' : 'Replay'} ${shortId(run.id)} started`);
    } catch (e) {
      setError((e as Error).message);
      setBusy(false);
    }
  };

  return (
    <div className="fx-modal-backdrop" onClick={() => !busy && close()}>
      <div className="fx-modal fx-replay" role="dialog" aria-label="Replay run" data-testid="replay-dialog" onClick={(e) => e.stopPropagation()}>
        <h3>
          Replay run <code>{shortId(target.id)}</code>
        </h3>
        <p>
          A new run of <code>{target.workflow_id}</code> with this run's input, linked to it both ways. The trigger's dedupe is
          bypassed; Memory steps and outbound idempotency keys behave as in any run.
        </p>
        <div className="fx-seg-row">
          <div className="fx-seg" role="radiogroup" aria-label="Mode">
            <button className={mode === 'live' ? 'is-active' : ''} onClick={() => setMode('live')} data-testid="replay-mode-live" role="radio" aria-checked={mode === 'live'}>
              Live
            </button>
            <button className={mode === 'dry' ? 'is-active' : ''} onClick={() => setMode('dry')} data-testid="replay-mode-dry" role="radio" aria-checked={mode === 'dry'}>
              Dry
            </button>
          </div>
          <div className="fx-seg" role="radiogroup" aria-label="Version">
            <button
              className={version === 'current' ? 'is-active' : ''}
              onClick={() => setVersion('current')}
              data-testid="replay-version-current"
              role="radio"
              aria-checked={version === 'current'}
              title="The workflow as it is saved now"
            >
              Current version
            </button>
            <button
              className={version === 'original' ? 'is-active' : ''}
              onClick={() => setVersion('original')}
              data-testid="replay-version-original"
              role="radio"
              aria-checked={version === 'original'}
              title="The definition this run ran (its snapshot)"
            >
              Original version
            </button>
          </div>
        </div>
        {mode === 'live' ? (
          <div className="fx-prediction" data-testid="replay-preview" data-state={pred?.loading ? 'loading' : pred?.error ? 'error' : 'ready'}>
            <div className="fx-prediction-title">What a dry run predicts</div>
            {pred?.loading && <div className="fx-muted">Dry-running the replay…</div>}
            {pred?.error && <div className="fx-error-text">The dry run could not run: {pred.error}</div>}
            {pred?.result && (
              <>
                <div className={`fx-prediction-headline ${pred.result.status === 'succeeded' ? '' : 'is-bad'}`} data-testid="replay-preview-headline">
                  {pred.result.headline}
                </div>
                <ul className="fx-prediction-lines">
                  {pred.result.lines.map((l, i) => (
                    <li key={i} className={`is-${l.tone}`}>
                      {l.text}
                    </li>
                  ))}
                </ul>
                {pred.dry && (
                  <button className="fx-link fx-muted" onClick={() => (close(), useNav.getState().openRun(pred.dry!.id))} data-testid="replay-preview-open">
                    Open the dry run {shortId(pred.dry.id)}
                  </button>
                )}
              </>
            )}
          </div>
        ) : (
          <p className="fx-muted">A dry replay simulates every Memory write and external call: nothing changes and nothing is sent.</p>
        )}
        {error && <div className="fx-field-errors">{error}</div>}
        <div className="fx-modal-actions">
          <button className="fx-btn" onClick={close} disabled={busy} data-testid="replay-cancel">
            Cancel
          </button>
          <button className="fx-btn fx-btn-primary" onClick={() => void start()} disabled={busy} data-testid="replay-confirm" autoFocus>
            {busy ? 'Starting…' : mode === 'live' ? 'Replay live' : 'Replay dry'}
          </button>
        </div>
      </div>
    </div>
  );
}
