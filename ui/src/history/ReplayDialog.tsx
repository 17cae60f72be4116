import { Play } from 'lucide-react';
import { useEffect, useMemo, useState } from 'react';
import { hasRoundedInteger, parseJson, stringifyJson, type Mode, type PreviewWarning } from '../api';
import { useEditor } from '../store/editor';
import { useNav } from '../app/nav';
import { forecastReplay, useReplayDialog, type Prediction, type ReplayForecast } from './replay';
import { useResumeDialog } from './resume';
import { FixedBox, PreviewWarnings } from './ResumeDialog';
import { summaryOf, useHistory } from './store';
import { shortId } from './format';

type Version = 'current' | 'original';

/** The value of `v`, once it has not changed for `ms`. */
function useDebounced<T>(v: T, ms: number): T {
  const [d, setD] = useState(v);
  useEffect(() => {
    const t = setTimeout(() => setD(v), ms);
    return () => clearTimeout(t);
  }, [v, ms]);
  return d;
}

interface InputState {
  /** The run's input as loaded (integers beyond 2^53 kept exactly over HTTP). */
  original?: unknown;
  originalText?: string;
  error?: string;
}

/**
 * The replay's input, editable: the original run's input as JSON text. Answers the corrected
 * payload (as compact JSON text, integers exact) when it parses and differs from the original,
 * else null.
 */
function InputEditor({ runId, onEdited }: { runId: string; onEdited(text: string | null, invalid: boolean): void }) {
  const [loaded, setLoaded] = useState<InputState | null>(null);
  const [text, setText] = useState('');
  const tauri = useEditor((s) => s.api?.transport === 'tauri');

  useEffect(() => {
    let live = true;
    useEditor
      .getState()
      .api!.getRun(runId)
      .then((r) => {
        if (!live) return;
        const originalText = stringifyJson(r.input ?? null, 2);
        setLoaded({ original: r.input, originalText });
        setText(originalText);
      })
      .catch((e: Error) => live && setLoaded({ error: e.message }));
    return () => {
      live = false;
    };
  }, [runId]);

  const parsed = useMemo((): { ok: true; compact: string } | { ok: false; error: string } => {
    try {
      return { ok: true, compact: stringifyJson(parseJson(text)) };
    } catch (e) {
      return { ok: false, error: (e as Error).message };
    }
  }, [text]);
  const originalCompact = useMemo(() => (loaded && 'original' in loaded ? stringifyJson(loaded.original ?? null) : null), [loaded]);
  const edited = parsed.ok && originalCompact !== null && parsed.compact !== originalCompact;

  useEffect(() => {
    onEdited(edited && parsed.ok ? parsed.compact : null, !parsed.ok);
  }, [edited, parsed, onEdited]);

  if (!loaded) return <div className="fx-muted">Loading the run's input…</div>;
  if (loaded.error) return <div className="fx-error-text">Cannot load the run's input: {loaded.error}</div>;
  return (
    <div className="fx-input-editor" data-testid="replay-input-editor" data-edited={String(edited)} data-valid={String(parsed.ok)}>
      <textarea
        className="fx-code"
        rows={12}
        spellCheck={false}
        value={text}
        onChange={(e) => setText(e.target.value)}
        aria-label="Replay input (JSON)"
        data-testid="replay-input"
      />
      <div className="fx-row">
        {!parsed.ok ? (
          <span className="fx-error-text" data-testid="replay-input-error">
            Not JSON: {parsed.error}
          </span>
        ) : edited ? (
          <span className="fx-warn-text" data-testid="replay-input-status">
            Edited: the replay runs on this payload and is recorded as “input edited”.
          </span>
        ) : (
          <span className="fx-muted" data-testid="replay-input-status">
            The original input, unchanged.
          </span>
        )}
        <span className="fx-spacer" />
        <button
          className="fx-btn fx-btn-small"
          disabled={!parsed.ok}
          onClick={() => {
            try {
              setText(stringifyJson(parseJson(text), 2));
            } catch {
              /* not JSON: leave it */
            }
          }}
        >
          Format
        </button>
        <button className="fx-btn fx-btn-small" disabled={text === loaded.originalText} onClick={() => setText(loaded.originalText!)} data-testid="replay-input-reset">
          Reset to original
        </button>
      </div>
      {tauri && hasRoundedInteger(loaded.original) && (
        <div className="fx-warn-box">
          This input holds integers beyond 2^53, which this window shows rounded. Unedited, the replay uses the stored input
          exactly; to correct it, edit it in the browser UI (<code>fluxo serve</code>).
        </div>
      )}
    </div>
  );
}

/** The facts behind a replay prediction, one per line, and the preview's warnings (shared by the single and the bulk replay). */
export function PredictionLines({ prediction, warnings }: { prediction: Prediction; warnings: PreviewWarning[] }) {
  return (
    <>
      <ul className="fx-prediction-lines">
        {prediction.lines.map((l, i) => (
          <li key={i} className={`is-${l.tone}`}>
            {l.text}
          </li>
        ))}
      </ul>
      <PreviewWarnings warnings={warnings} testId="replay-warning" />
    </>
  );
}

/**
 * Replay a run: live or dry, current or original version, on the original input or a corrected
 * one. Before a live replay, the replay preview (a dry walk, never stored) predicts what it will
 * do: Memory claims that exist, the routes taken, the calls made with their Idempotency-Keys.
 * When the run's own lineage holds the claim that would stop the replay, it offers to resume
 * the run instead. The new run opens as soon as it is queued.
 */
export function ReplayDialog() {
  const target = useReplayDialog((s) => s.target);
  const close = useReplayDialog((s) => s.close);
  const [mode, setMode] = useState<Mode>('live');
  const [version, setVersion] = useState<Version>('current');
  const [editing, setEditing] = useState(false);
  const [edit, setEdit] = useState<{ text: string | null; invalid: boolean }>({ text: null, invalid: false });
  const [pred, setPred] = useState<{ loading: boolean; forecast?: ReplayForecast; error?: string } | null>(null);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const editedText = useDebounced(editing ? edit.text : null, 400);
  const onEdited = useMemo(() => (text: string | null, invalid: boolean) => setEdit({ text, invalid }), []);

  useEffect(() => {
    setMode('live');
    setVersion('current');
    setEditing(false);
    setEdit({ text: null, invalid: false });
    setError(null);
    setBusy(false);
  }, [target]);

  // The prediction: the replay preview with the chosen version and input (nothing stored or sent).
  useEffect(() => {
    if (!target || mode !== 'live') {
      setPred(null);
      return;
    }
    let live = true;
    setPred({ loading: true });
    const input = editedText === null ? undefined : parseJson(editedText);
    forecastReplay(useEditor.getState().api!, target.id, { version, input })
      .then((forecast) => live && setPred({ loading: false, forecast }))
      .catch((e: Error) => live && setPred({ loading: false, error: e.message }));
    return () => {
      live = false;
    };
  }, [target, mode, version, editedText]);

  useEffect(() => {
    if (!target) return;
    const onKey = (e: KeyboardEvent) => e.key === 'Escape' && !busy && close();
    window.addEventListener('keydown', onKey);
    return () => window.removeEventListener('keydown', onKey);
  }, [target, busy, close]);

  if (!target) return null;
  const edited = editing && edit.text !== null;
  const invalid = editing && edit.invalid;
  const preview = pred?.forecast?.preview;
  const result = pred?.forecast?.prediction ?? null;
  const ownClaim = preview?.warnings.filter((w) => w.code === 'own_claim') ?? [];
  const otherWarnings = preview?.warnings.filter((w) => w.code !== 'own_claim' && w.code !== 'lineage_fixed') ?? [];
  // The lineage was fixed (a resume or a replay succeeded): say so, name that run, offer to open it.
  const fixed = preview?.fixed_by;
  // The claim that sends this replay down its "already processed" branch, if one does.
  const fixedClaim = preview?.warnings.find((w) => w.code === 'lineage_fixed')?.step;
  const fixedDetail = `The event is handled: nothing is left to resume.${
    fixedClaim ? ` Step ${fixedClaim} would find the event's claim taken: this replay would take the "already processed" branch and do nothing.` : ''
  }`;
  // The run to resume instead: this one, or the newest run of its resume chain.
  const resumeTarget = preview?.resume_instead ? (preview.resume_run_id ?? target.id) : null;
  const resumeInstead = !!resumeTarget;

  const start = async () => {
    setBusy(true);
    setError(null);
    try {
      const input = edited ? parseJson(edit.text!) : undefined;
      const run = await useEditor.getState().api!.replayRun(target.id, { mode, version, input, async: true });
      useHistory.getState().upsert(summaryOf(run));
      close();
      useNav.getState().openRun(run.id);
      useEditor.getState().notify('ok', `${mode === 'dry' ? 'Dry replay' : 'Replay'} ${shortId(run.id)} started`);
    } catch (e) {
      setError((e as Error).message);
      setBusy(false);
    }
  };
  const resume = () => {
    close();
    useResumeDialog.getState().open({ id: resumeTarget ?? target.id, mode: target.mode });
  };
  const openFixer = (id: string) => {
    close();
    useNav.getState().openRun(id);
  };

  return (
    <div className="fx-modal-backdrop" onClick={() => !busy && close()}>
      <div className="fx-modal fx-replay" role="dialog" aria-label="Replay run" data-testid="replay-dialog" onClick={(e) => e.stopPropagation()}>
        <h3>
          Replay run <code>{shortId(target.id)}</code>
        </h3>
        <p>
          A new run of <code>{target.workflow_id}</code> with this run's input (or a corrected one), linked to it both ways. The
          trigger's dedupe is bypassed; Memory steps and outbound idempotency keys behave as in any run.
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
          <button
            className={`fx-btn fx-btn-small ${editing ? 'is-active' : ''}`}
            onClick={() => setEditing((e) => !e)}
            aria-expanded={editing}
            data-testid="replay-edit-input"
            title="Run the replay on a corrected payload"
          >
            {editing ? 'Use the original input' : 'Edit input…'}
          </button>
        </div>
        {editing && <InputEditor runId={target.id} onEdited={onEdited} />}
        {fixed && mode === 'live' && <FixedBox fix={fixed} detail={fixedDetail} testId="replay-fixed" onOpen={openFixer} />}
        {ownClaim.length > 0 && (
          <div className="fx-claim-box" data-testid="replay-own-claim">
            <strong>This replay would do nothing.</strong>
            {ownClaim.map((w, i) => (
              <div key={i}>{w.message}</div>
            ))}
            {resumeTarget && (
              <button className="fx-btn fx-btn-primary fx-btn-small" onClick={resume} data-testid="replay-resume-instead" data-run-id={resumeTarget}>
                <Play size={12} aria-hidden /> Resume run {shortId(resumeTarget)} instead
              </button>
            )}
          </div>
        )}
        {mode === 'live' ? (
          <div className="fx-prediction" data-testid="replay-preview" data-state={pred?.loading ? 'loading' : pred?.error ? 'error' : 'ready'}>
            <div className="fx-prediction-title">What it will do (a dry walk: nothing stored or sent)</div>
            {pred?.loading && <div className="fx-muted">Predicting the replay…</div>}
            {pred?.error && <div className="fx-error-text">The replay cannot be predicted: {pred.error}</div>}
            {result && (
              <>
                <div className={`fx-prediction-headline ${result.status === 'succeeded' ? '' : 'is-bad'}`} data-testid="replay-preview-headline">
                  {result.headline}
                </div>
                <PredictionLines prediction={result} warnings={otherWarnings} />
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
          <button
            className={`fx-btn ${resumeInstead || fixed ? '' : 'fx-btn-primary'}`}
            onClick={() => void start()}
            disabled={busy || invalid}
            data-testid="replay-confirm"
            autoFocus={!resumeInstead && !fixed}
          >
            {busy ? 'Starting…' : `${mode === 'live' ? 'Replay live' : 'Replay dry'}${edited ? ' with edited input' : ''}`}
          </button>
        </div>
      </div>
    </div>
  );
}
