import { Check, TriangleAlert } from 'lucide-react';
import { useEffect, useRef, useState } from 'react';
import { ApiError, type LineageFix, type PlannedCall, type PreviewWarning, type RunPreview } from '../api';
import { useEditor } from '../store/editor';
import { useNav } from '../app/nav';
import { plural, shortId } from './format';
import { predict } from './replay';
import { resumedByOf, resumePoint, useResumeDialog } from './resume';
import { summaryOf, useHistory } from './store';

/** The warnings of a preview, one box each. */
export function PreviewWarnings({ warnings, testId }: { warnings: PreviewWarning[]; testId: string }) {
  return (
    <>
      {warnings.map((w, i) => (
        <div key={i} className="fx-warn-box" data-testid={testId} data-code={w.code} data-step={w.step ?? ''}>
          <strong>{WARNING_TITLE[w.code] ?? w.code}</strong> {w.message}
        </div>
      ))}
    </>
  );
}

const WARNING_TITLE: Record<string, string> = {
  own_claim: 'Held by this run’s own claim.',
  lineage_fixed: 'Already fixed.',
  not_transient: 'The failure is not transient.',
  repeat_unsafe: 'Not safe to repeat.',
};

/** How the run that fixed a lineage came: for sentences. */
export function fixHow(fix: LineageFix): string {
  return fix.trigger === 'resume' ? 'a resume' : fix.trigger === 'replay' ? 'a replay' : 'a later run';
}

/**
 * A lineage a later run fixed (a resume or a replay that succeeded): says so, names that run,
 * and offers to open it, the only thing left to do.
 */
export function FixedBox({ fix, detail, testId, onOpen }: { fix: LineageFix; detail: string; testId: string; onOpen(id: string): void }) {
  return (
    <div className="fx-fixed-box" data-testid={testId} data-run-id={fix.run_id} data-trigger={fix.trigger}>
      <strong>
        <Check size={14} aria-hidden /> Already fixed by run <code>{shortId(fix.run_id)}</code> ({fixHow(fix)}), which succeeded.
      </strong>
      <div data-testid={`${testId}-detail`}>{detail}</div>
      <button className="fx-btn fx-btn-primary fx-btn-small" onClick={() => onOpen(fix.run_id)} data-testid={`${testId}-open`}>
        Open run {shortId(fix.run_id)}
      </button>
    </div>
  );
}

/** The calls a previewed run would send: request, Idempotency-Key, sent again or not, safe to repeat. */
export function CallTable({ calls }: { calls: PlannedCall[] }) {
  if (!calls.length) return <div className="fx-muted">No step with side effects executes: nothing is sent, no Memory key changes.</div>;
  return (
    <table className="fx-table fx-call-table" data-testid="preview-calls">
      <thead>
        <tr>
          <th>Step</th>
          <th>Does</th>
          <th>Idempotency-Key</th>
          <th>Repeat</th>
        </tr>
      </thead>
      <tbody>
        {calls.map((c) => (
          <tr
            key={c.step_id}
            data-testid="preview-call"
            data-step={c.step_id}
            data-again={String(c.again)}
            data-safe={String(c.repeat_safe)}
            className={c.repeat_safe ? '' : 'is-unsafe'}
          >
            <td>
              <code>{c.step_id}</code>
            </td>
            <td className="fx-call-what">
              {c.operation ? (
                <span>{c.operation}</span>
              ) : c.method || c.url ? (
                <span className="fx-mono">
                  {c.method ?? ''} {c.url ?? ''}
                </span>
              ) : (
                <span className="fx-muted">{c.kind}</span>
              )}
            </td>
            <td className="fx-mono" data-testid="preview-call-key">
              {c.idempotency_key ?? <span className="fx-muted">none</span>}
            </td>
            <td>
              <span className={c.again ? 'fx-tag fx-tag-again' : 'fx-tag'}>{c.again ? 'sent again' : 'first time'}</span>{' '}
              {c.repeat_safe ? (
                <span className="fx-ok-text" title="Repeating it cannot duplicate an effect">
                  <Check size={13} aria-hidden /> safe to repeat{c.dedupe ? ` (${c.dedupe})` : ''}
                </span>
              ) : (
                <span className="fx-error-text" data-testid="preview-call-unsafe">
                  <TriangleAlert size={13} aria-hidden /> {c.repeat_reason ?? 'repeating it may duplicate its effect'}
                </span>
              )}
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

function StepChips({ ids, cls, testId }: { ids: string[]; cls: string; testId: string }) {
  return (
    <span className="fx-step-chips">
      {ids.map((id) => (
        <code key={id} className={`fx-step-chip ${cls}`} data-testid={testId} data-step={id}>
          {id}
        </code>
      ))}
    </span>
  );
}

/** One sentence: what the resume will do. */
function headline(p: RunPreview, from: string | null): string {
  const executed = p.executed.length;
  const again = p.calls.filter((c) => c.again).length;
  const parts = [`reuses ${plural(p.reused.length, 'step')}`, `executes ${plural(executed, 'step')}${from ? ` from ${from}` : ''}`];
  if (again) parts.push(`sends ${plural(again, 'call')} again${p.calls.every((c) => !c.again || c.idempotency_key) ? ' with the same Idempotency-Key' : ''}`);
  return `This resume ${parts.join(', ')}.`;
}

/**
 * The dry prediction of a resume: reused steps, steps executed (the two lists partition the
 * previewed run's steps: both are read from the server's dry walk, the same walk the resume
 * makes), calls sent again, warnings.
 */
function ResumePlan({ preview }: { preview: RunPreview }) {
  const from = resumePoint(preview);
  const executed = preview.executed;
  // What the executed Memory steps and routers will find and take (the calls have their table).
  const facts = predict({
    ...preview.run,
    steps: preview.run.steps.filter((s) => !s.reused_from && s.kind !== 'http_request' && s.kind !== 'publish_output'),
  }).lines;
  return (
    <div className="fx-prediction" data-testid="resume-preview" data-from-step={from ?? ''}>
      <div className="fx-prediction-title">What it will do (a dry walk: nothing stored or sent)</div>
      <div className="fx-prediction-headline" data-testid="resume-headline">
        {headline(preview, from)}
      </div>
      <div className="fx-plan-grid">
        <span className="fx-muted">Reused</span>
        <span data-testid="resume-reused">
          {preview.reused.length ? <StepChips ids={preview.reused} cls="is-reused" testId="resume-reused-step" /> : <span className="fx-muted">none</span>}
        </span>
        <span className="fx-muted">Executes</span>
        <span data-testid="resume-executes">
          <StepChips ids={executed} cls="is-executed" testId="resume-executed-step" />
        </span>
      </div>
      {facts.length > 0 && (
        <ul className="fx-prediction-lines" data-testid="resume-facts">
          {facts.map((l, i) => (
            <li key={i} className={`is-${l.tone}`}>
              {l.text}
            </li>
          ))}
        </ul>
      )}
      <CallTable calls={preview.calls} />
      <PreviewWarnings warnings={preview.warnings.filter((w) => w.code !== 'lineage_fixed')} testId="resume-warning" />
    </div>
  );
}

/**
 * Resume a failed, timed-out or interrupted run: the preview first (steps reused, calls sent
 * again with their Idempotency-Keys, warnings), then the resume, whose run opens at once.
 */
export function ResumeDialog() {
  const target = useResumeDialog((s) => s.target);
  const close = useResumeDialog((s) => s.close);
  const [preview, setPreview] = useState<{ loading: boolean; result?: RunPreview; error?: ApiError } | null>(null);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<ApiError | null>(null);
  const [resumedBy, setResumedBy] = useState<string | null>(null);
  // The confirm button is disabled until the preview answers, so `autoFocus` cannot take it:
  // move the keyboard into the dialog once it can be pressed.
  const confirmRef = useRef<HTMLButtonElement>(null);
  const ready = !!preview?.result;
  useEffect(() => {
    if (ready) confirmRef.current?.focus();
  }, [ready]);

  useEffect(() => {
    setBusy(false);
    setError(null);
    setResumedBy(null);
    if (!target) return setPreview(null);
    if (target.preview) return setPreview({ loading: false, result: target.preview });
    let live = true;
    setPreview({ loading: true });
    useEditor
      .getState()
      .api!.previewResume(target.id, target.fromStep)
      .then((result) => live && setPreview({ loading: false, result }))
      .catch(async (e: ApiError) => {
        const by = await resumedByOf(e, target.id);
        if (by) useHistory.getState().learnResumes({ [target.id]: by });
        if (!live) return;
        setPreview({ loading: false, error: e });
        setResumedBy(by);
      });
    return () => {
      live = false;
    };
  }, [target]);

  useEffect(() => {
    if (!target) return;
    const onKey = (e: KeyboardEvent) => e.key === 'Escape' && !busy && close();
    window.addEventListener('keydown', onKey);
    return () => window.removeEventListener('keydown', onKey);
  }, [target, busy, close]);

  if (!target) return null;
  const result = preview?.result;
  // The step the resume really starts at (a reused claim another run holds now executes
  // again, before a chosen step): the preview's, once it answered.
  const from = result ? resumePoint(result) : (target.fromStep ?? null);
  const dry = target.mode === 'dry';
  const problem = error ?? preview?.error ?? null;
  const fixed = result?.fixed_by;
  // Resumed already, and that resume succeeded: the lineage is fixed.
  const fixedByResume = problem && resumedBy && problem.extra.fixed_by === resumedBy;

  const start = async () => {
    setBusy(true);
    setError(null);
    try {
      const run = await useEditor.getState().api!.resumeRun(target.id, { fromStep: target.fromStep, async: true });
      useHistory.getState().upsert(summaryOf(run));
      close();
      useNav.getState().openRun(run.id);
      useEditor.getState().notify('ok', `Resume ${shortId(run.id)} started`);
    } catch (e) {
      const by = await resumedByOf(e as ApiError, target.id);
      if (by) useHistory.getState().learnResumes({ [target.id]: by });
      setResumedBy(by);
      setError(e as ApiError);
      setBusy(false);
    }
  };
  const openRun = (id: string) => {
    close();
    useNav.getState().openRun(id);
  };

  return (
    <div className="fx-modal-backdrop" onClick={() => !busy && close()}>
      <div
        className="fx-modal fx-resume"
        role="dialog"
        aria-label="Resume run"
        data-testid="resume-dialog"
        data-state={preview?.loading ? 'loading' : problem ? 'error' : 'ready'}
        onClick={(e) => e.stopPropagation()}
      >
        <h3>
          Resume run <code>{shortId(target.id)}</code>
          {from && (
            <>
              {' '}
              from <code data-testid="resume-from">{from}</code>
            </>
          )}
        </h3>
        <p>
          A new run continues where this one stopped, with the same input and the definition this run ran. Steps that succeeded are
          reused: they are not executed again.{' '}
          {dry ? 'This run was a dry run: it is resumed dry, nothing is sent.' : 'From the resume point on, steps execute for real.'}
        </p>
        {preview?.loading && <div className="fx-muted">Predicting the resume…</div>}
        {fixed && (
          <FixedBox
            fix={fixed}
            detail="The event is handled: nothing is left to resume. Resuming this run would act on the event again; open the run that fixed it instead."
            testId="resume-fixed"
            onOpen={openRun}
          />
        )}
        {result && <ResumePlan preview={result} />}
        {problem &&
          (resumedBy ? (
            <div className={fixedByResume ? 'fx-fixed-box' : 'fx-warn-box'} data-testid="resume-already" data-fixed={String(!!fixedByResume)}>
              {fixedByResume ? (
                <strong>
                  <Check size={14} aria-hidden /> Already fixed: run{' '}
                  <button className="fx-link fx-mono" onClick={() => openRun(resumedBy)} data-testid="resume-already-link" data-run-id={resumedBy}>
                    {shortId(resumedBy)}
                  </button>{' '}
                  resumed it and succeeded. Nothing is left to resume.
                </strong>
              ) : (
                <span>
                  Already resumed by run{' '}
                  <button className="fx-link fx-mono" onClick={() => openRun(resumedBy)} data-testid="resume-already-link" data-run-id={resumedBy}>
                    {shortId(resumedBy)}
                  </button>
                  : {problem.message}
                </span>
              )}
            </div>
          ) : (
            <div className="fx-field-errors" data-testid="resume-error" data-code={problem.code}>
              {problem.message}
            </div>
          ))}
        <div className="fx-modal-actions">
          <button className="fx-btn" onClick={close} disabled={busy} data-testid="resume-cancel">
            Cancel
          </button>
          {resumedBy ? (
            <button className="fx-btn fx-btn-primary" onClick={() => openRun(resumedBy)} data-testid="resume-open-existing">
              Open the resume
            </button>
          ) : (
            <button
              className={`fx-btn ${fixed ? '' : 'fx-btn-primary'}`}
              onClick={() => void start()}
              disabled={busy || !result}
              data-testid="resume-confirm"
              ref={confirmRef}
            >
              {busy ? 'Resuming…' : `${dry ? 'Resume dry' : 'Resume'}${from ? ` from ${from}` : ''}`}
            </button>
          )}
        </div>
      </div>
    </div>
  );
}
