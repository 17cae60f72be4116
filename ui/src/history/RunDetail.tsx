import { ChevronDown, ChevronRight, Play, RotateCcw, X } from 'lucide-react';
import { useCallback, useEffect, useMemo, useRef, useState } from 'react';
import { stringifyJson, type ApiError, type Attempt, type RunPreview, type RunRecord, type RunSummary, type StepRecord } from '../api';
import { recordedWorkflow } from '../store/workflowFile';
import { useEditor } from '../store/editor';
import { useNav } from '../app/nav';
import { formatMs } from '../app/format';
import { Deliveries } from './Deliveries';
import { JsonView } from './JsonView';
import { onRunEvent } from './events';
import { dryRunLabel, formatClock, formatTime } from './format';
import { learnRunName } from './names';
import { useReplayDialog } from './replay';
import { isResumable, latestResume, resumableSteps, resumedByOf, resumePoint, useResumeDialog } from './resume';
import { linkedIds, useSummaries } from './lineage';
import { fixedByOf, Lineage, RunRef } from './Lineage';
import { RunCanvas } from './RunCanvas';
import { OverflowActions, type RowAction } from '../app/OverflowActions';
import { summaryOf, useHistory } from './store';

const FINAL = new Set(['succeeded', 'failed', 'timed_out', 'interrupted']);

/** The run record, reloaded while it changes (run events for it). */
function useRunRecord(id: string) {
  const [run, setRun] = useState<RunRecord | null>(null);
  const [error, setError] = useState<string | null>(null);
  const seq = useRef(0);
  const load = useCallback(async () => {
    const api = useEditor.getState().api;
    if (!api) return;
    const n = ++seq.current;
    try {
      const r = await api.getRun(id);
      if (n !== seq.current) return;
      setRun(r);
      setError(null);
      learnRunName(r);
      useHistory.getState().upsert(summaryOf(r));
      const by = latestResume(r);
      if (by) useHistory.getState().learnResumes({ [r.id]: by });
    } catch (e) {
      if (n !== seq.current) return;
      setError((e as Error).message);
    }
  }, [id]);
  useEffect(() => {
    setRun(null);
    setError(null);
    void load();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const off = onRunEvent((e) => {
      if (e.run_id !== id) return;
      clearTimeout(timer);
      timer = setTimeout(() => void load(), e.event === 'run_finished' ? 0 : 120);
    });
    return () => {
      off();
      clearTimeout(timer);
    };
  }, [id, load]);
  // A queued or running run whose events were missed: poll until it ends.
  useEffect(() => {
    if (!run || FINAL.has(run.status)) return;
    const t = setInterval(() => void load(), 1500);
    return () => clearInterval(t);
  }, [run, load]);
  return { run, error, reload: load };
}

/** Attempts and the waits before them, on one time axis shared by every step of the run. */
function Timeline({ step, t0, total }: { step: StepRecord; t0: number; total: number }) {
  if (step.reused_from) {
    return <div className="fx-timeline is-reused" data-testid={`timeline-${step.step_id}`} title="Not executed in this run: its recorded output was reused" />;
  }
  const pct = (ms: number) => `${Math.max(0, Math.min(100, (ms / total) * 100))}%`;
  const segs: { left: number; width: number; cls: string; title: string }[] = [];
  step.attempts.forEach((a, i) => {
    const start = Date.parse(a.started_at) - t0;
    const delay = a.delay_before_ms ?? 0;
    if (delay > 0) segs.push({ left: start - delay, width: delay, cls: 'wait', title: `wait ${formatMs(delay)} before attempt ${i + 1}` });
    const ok = !a.error && (!a.http_status || a.http_status < 400);
    segs.push({
      left: start,
      width: a.duration_ms,
      cls: ok ? 'ok' : 'bad',
      title: `attempt ${i + 1}: ${formatMs(a.duration_ms)}${a.http_status ? ` · HTTP ${a.http_status}` : ''}${a.error ? ` · ${a.error}` : ''}`,
    });
  });
  if (!step.attempts.length && step.started_at) {
    segs.push({
      left: Date.parse(step.started_at) - t0,
      width: step.duration_ms ?? 0,
      cls: step.status === 'failed' ? 'bad' : 'ok',
      title: `${step.step_id}: ${formatMs(step.duration_ms ?? 0)}`,
    });
  }
  return (
    <div className="fx-timeline" data-testid={`timeline-${step.step_id}`}>
      {segs.map((s, i) => (
        <span
          key={i}
          className={`fx-timeline-seg is-${s.cls}`}
          style={{ left: pct(s.left), width: `max(3px, ${pct(s.width)})` }}
          title={s.title}
        />
      ))}
    </div>
  );
}

function AttemptRows({ attempts }: { attempts: Attempt[] }) {
  return (
    <table className="fx-table fx-attempt-table" data-testid="attempts">
      <thead>
        <tr>
          <th>#</th>
          <th>Waited before</th>
          <th>Started</th>
          <th>Took</th>
          <th>HTTP</th>
          <th>Error</th>
        </tr>
      </thead>
      <tbody>
        {attempts.map((a, i) => {
          const bad = !!a.error || (!!a.http_status && a.http_status >= 400);
          return (
            <tr key={i} data-testid="attempt" data-http-status={a.http_status ?? ''} className={bad ? 'is-bad' : ''}>
              <td>{i + 1}</td>
              <td data-testid="attempt-wait">{a.delay_before_ms ? `wait ${formatMs(a.delay_before_ms)}` : '–'}</td>
              <td className="fx-mono">{formatClock(a.started_at)}</td>
              <td>{formatMs(a.duration_ms)}</td>
              <td className={bad ? 'fx-error-text' : 'fx-ok-text'}>{a.http_status ?? ''}</td>
              <td className="fx-error-text">{a.error ?? ''}</td>
            </tr>
          );
        })}
      </tbody>
    </table>
  );
}

function StepCard({
  step,
  t0,
  total,
  open,
  onToggle,
  reusedFrom,
  onResumeHere,
}: {
  step: StepRecord;
  t0: number;
  total: number;
  open: boolean;
  onToggle(): void;
  /** The run the step's output was reused from (a resume), with its status. */
  reusedFrom?: { id: string; summary?: RunSummary | null };
  /** Offered on succeeded steps of a run that can be resumed. */
  onResumeHere?: () => void;
}) {
  const failed = step.status === 'failed';
  return (
    <div
      className={`fx-step-card ${failed ? 'is-failed' : ''} ${open ? 'is-open' : ''} ${reusedFrom ? 'is-reused' : ''}`}
      data-testid={`step-${step.step_id}`}
      data-status={step.status}
      data-reused-from={reusedFrom?.id ?? ''}
    >
      <div className="fx-step-head" onClick={onToggle} role="button" aria-expanded={open}>
        <span className="fx-json-caret">{open ? <ChevronDown size={14} aria-hidden /> : <ChevronRight size={14} aria-hidden />}</span>
        <span className={`fx-pill run-${step.status}`}>{step.status}</span>
        <code className="fx-step-id">{step.step_id}</code>
        <span className="fx-muted">{step.kind}</span>
        {step.ports?.length ? <span className="fx-mono fx-step-ports" data-testid="step-ports">→ {step.ports.join(', ')}</span> : null}
        <span className="fx-spacer" />
        {reusedFrom && (
          <span className="fx-reused-badge" data-testid="step-reused" onClick={(e) => e.stopPropagation()} title="Not executed in this run: its recorded output and route were reused">
            reused from <RunRef id={reusedFrom.id} summary={reusedFrom.summary} rel="reused_from" testId="step-reused-link" />
          </span>
        )}
        {onResumeHere && (
          <button
            className="fx-btn fx-btn-small fx-btn-ghost fx-resume-here"
            onClick={(e) => {
              e.stopPropagation();
              onResumeHere();
            }}
            title="Resume this run from this step: the steps before it are reused, this step and the ones after it execute again"
            data-testid="resume-from-here"
          >
            <Play size={12} aria-hidden /> Resume from here
          </button>
        )}
        {!reusedFrom && step.attempts.length > 1 && (
          <span className="fx-chip" data-testid="step-attempt-count">
            {step.attempts.length} attempts
          </span>
        )}
        {!reusedFrom && <span className="fx-muted">{formatMs(step.duration_ms ?? 0)}</span>}
      </div>
      <Timeline step={step} t0={t0} total={total} />
      {step.error && (
        <div className="fx-error-box" data-testid="step-error">
          <span className="fx-code-tag fx-error-code">{step.error.code}</span>
          {step.error.http_status ? <span className="fx-code-tag fx-error-code">HTTP {step.error.http_status}</span> : null}
          {step.error.attempts ? <span className="fx-muted">after {step.error.attempts} attempt{step.error.attempts > 1 ? 's' : ''}</span> : null}
          <div>{step.error.message}</div>
        </div>
      )}
      {open && (
        <div className="fx-step-body">
          {step.attempts.length > 0 && <AttemptRows attempts={step.attempts} />}
          <JsonView label="Resolved config" value={step.resolved_config} open={1} testId="step-config" />
          <JsonView label="Output" value={step.output} open={2} testId="step-output" />
        </div>
      )}
    </div>
  );
}

/**
 * What a failed, timed-out or interrupted run's Resume would do: the resume that exists already
 * (`by`), else the server's prediction of a new one (`preview`, or why it cannot be predicted).
 * Null while it loads and for runs that cannot be resumed.
 */
function useResumeState(run: RunRecord | null): { by?: string; preview?: RunPreview; error?: ApiError } | null {
  const resumable = !!run && isResumable(run.status);
  const latest = run ? latestResume(run) : undefined;
  const id = run?.id;
  const [state, setState] = useState<{ preview?: RunPreview; error?: ApiError; by?: string } | null>(null);
  useEffect(() => {
    setState(null);
    if (!id || !resumable || latest) return;
    let live = true;
    useEditor
      .getState()
      .api!.previewResume(id)
      .then((preview) => live && setState({ preview }))
      .catch(async (e: ApiError) => {
        const by = await resumedByOf(e, id);
        if (by) useHistory.getState().learnResumes({ [id]: by });
        if (live) setState({ error: e, by: by ?? undefined });
      });
    return () => {
      live = false;
    };
  }, [id, resumable, latest]);
  if (!resumable) return null;
  return latest ? { by: latest } : state;
}

/** The editor on the run's workflow with the run's input as the run input (lossless), like
 * n8n's "debug in editor"; asks first when another workflow's unsaved changes would go. */
async function debugInEditor(run: RunRecord): Promise<void> {
  const ed = useEditor.getState();
  // The same workflow on the canvas keeps its edits: only the run input changes.
  if (ed.meta.id !== run.workflow_id) {
    if (!(await ed.guardDirty('open this run in the editor'))) return;
    await ed.openWorkflow(run.workflow_id);
  }
  if (useEditor.getState().meta.id !== run.workflow_id) return;
  ed.setInputText(stringifyJson(run.input, 2));
  ed.setBottomTab('input');
  useNav.getState().go('editor');
}

export function RunDetail({ id }: { id: string }) {
  const { run, error } = useRunRecord(id);
  const openRun = useNav((s) => s.openRun);
  const openReplay = useReplayDialog((s) => s.open);
  const openResume = useResumeDialog((s) => s.open);
  const [openSteps, setOpenSteps] = useState<Record<string, boolean>>({});
  const [canvas, setCanvas] = useState(false);

  useEffect(() => setOpenSteps({}), [id]);
  const links = useMemo(() => (run ? linkedIds(run) : []), [run]);
  const summaries = useSummaries(links);
  // The run that fixed this one may be further down the lineage than the linked runs.
  const fixerId = run ? fixedByOf(run, summaries) : undefined;
  const fixerSummary = useSummaries(fixerId && !links.includes(fixerId) ? [fixerId] : []);
  const resumeHere = useMemo(() => (run ? resumableSteps(run) : new Set<string>()), [run]);
  const resume = useResumeState(run);

  const { t0, total } = useMemo(() => {
    if (!run) return { t0: 0, total: 1 };
    const start = Date.parse(run.started_at ?? run.created_at ?? '') || 0;
    let end = start + (run.duration_ms ?? 0);
    for (const st of run.steps) {
      for (const a of st.attempts) end = Math.max(end, Date.parse(a.started_at) + a.duration_ms);
      if (st.finished_at) end = Math.max(end, Date.parse(st.finished_at));
    }
    return { t0: start, total: Math.max(1, end - start) };
  }, [run]);

  if (error && !run) {
    return (
      <section className="fx-detail" data-testid="run-detail">
        <div className="fx-detail-head">
          <span className="fx-error-text">Cannot load run {id}: {error}</span>
          <span className="fx-spacer" />
          <button aria-label="Close" className="fx-icon-btn" onClick={() => openRun(null)} title="Close">
            <X size={15} aria-hidden />
          </button>
        </div>
      </section>
    );
  }
  if (!run) {
    return (
      <section className="fx-detail" data-testid="run-detail" data-loading="true">
        <div className="fx-empty">Loading run…</div>
      </section>
    );
  }
  const snapshot = recordedWorkflow(run);
  const fixedBy = fixedByOf(run, summaries);
  const fixer = fixedBy ? (summaries[fixedBy] ?? fixerSummary[fixedBy]) : undefined;
  const isOpen = (st: StepRecord) => openSteps[st.step_id] ?? st.status === 'failed';
  const resumedBy = resume?.by;
  const from = resume?.preview ? resumePoint(resume.preview) : null;
  const actions: RowAction[] = [
    ...(isResumable(run.status) && !resumedBy && !fixedBy
      ? [
          {
            key: 'resume',
            label: from ? `Resume from ${from}` : 'Resume',
            icon: <Play size={12} aria-hidden />,
            primary: true,
            title: resume?.error
              ? `The resume cannot be predicted: ${resume.error.message}`
              : `${from ? `Resume from ${from}` : 'Resume'}: continue where this run stopped; steps that succeeded are reused, the rest executes`,
            testId: 'detail-resume',
            data: { 'from-step': from ?? '', state: resume?.preview ? 'ready' : resume?.error ? 'error' : 'loading' },
            onSelect: () => openResume({ id: run.id, mode: run.mode, preview: resume?.preview }),
          },
        ]
      : []),
    {
      key: 'replay',
      label: 'Replay',
      icon: <RotateCcw size={13} aria-hidden />,
      primary: !(isResumable(run.status) || fixedBy),
      title: 'Replay this run (live or dry, current or original version)',
      testId: 'detail-replay',
      onSelect: () => openReplay({ id: run.id, workflow_id: run.workflow_id, status: run.status, mode: run.mode }),
    },
    {
      key: 'debug',
      label: 'Debug in editor',
      title: "Open the workflow in the editor with this run's input as the run input",
      testId: 'debug-in-editor',
      onSelect: () => void debugInEditor(run),
    },
    {
      key: 'canvas',
      label: 'Open on canvas',
      disabled: !snapshot,
      title: snapshot ? 'Draw the path this run took on the workflow as it ran' : 'No snapshot recorded',
      testId: 'open-on-canvas',
      onSelect: () => setCanvas(true),
    },
  ];
  const fixerTip = fixedBy && `Fixed by run ${fixedBy}${fixer ? ` (${fixer.trigger}, ${fixer.status})` : ''}: a later run of this run's lineage succeeded`;
  const resumerTip = resumedBy && `Resumed by run ${resumedBy}${summaries[resumedBy] ? ` (${summaries[resumedBy]!.status})` : ''}`;
  return (
    <section className="fx-detail" data-testid="run-detail" data-run-id={run.id} data-status={run.status}>
      <div className="fx-detail-head">
        <span className={`fx-pill fx-pill-lg run-${run.status}`} data-testid="detail-status">
          {run.status}
        </span>
        <OverflowActions actions={actions} label="More run actions" testId="detail-actions" moreTestId="detail-more" />
        <button aria-label="Close" className="fx-icon-btn" onClick={() => openRun(null)} title="Close" data-testid="detail-close">
          <X size={15} aria-hidden />
        </button>
      </div>
      <div className="fx-detail-sub">
        <code className="fx-detail-id" title={`Run id ${run.id}`}>
          {run.id}
        </code>
        {fixedBy && (
          <span className="fx-detail-badge fx-fixed-note" data-testid="detail-fixed-by" title={fixerTip}>
            fixed by <RunRef id={fixedBy} summary={fixer} rel="fixed_by" testId="fixed-by-link" />
          </span>
        )}
        {resumedBy && (
          <span className="fx-detail-badge fx-resumed-note" data-testid="detail-resumed-by" title={resumerTip}>
            Resumed by <RunRef id={resumedBy} summary={summaries[resumedBy]} rel="resumed_by" testId="resumed-by-link" />
          </span>
        )}
      </div>
      <div className="fx-detail-body">
        <dl className="fx-facts">
          <dt>Workflow</dt>
          <dd data-testid="detail-workflow">
            {run.mode === 'dry' && <><span data-testid="detail-label">{dryRunLabel(run, snapshot?.name)}</span> </>}
            <code>{run.workflow_id}</code>
            {run.mode !== 'dry' && <span className="fx-version"> v{run.workflow_version}</span>}
          </dd>
          <dt>Trigger</dt>
          <dd data-testid="detail-trigger">
            {run.trigger} · <span className={`fx-mode fx-mode-${run.mode}`}>{run.mode}</span>
            {run.resume_of && (
              <span className="fx-muted" data-testid="detail-resume-from">
                {' '}
                · executed from <code>{run.steps.find((st) => !st.reused_from)?.step_id ?? run.resume_from ?? '–'}</code>
              </span>
            )}
          </dd>
          <dt>Key</dt>
          <dd className="fx-mono" data-testid="detail-key">
            {run.idempotency_key ?? <span className="fx-muted">none</span>}
          </dd>
          <dt>Created</dt>
          <dd title={run.created_at}>{formatTime(run.created_at)}</dd>
          <dt>Duration</dt>
          <dd>{run.duration_ms !== undefined ? formatMs(run.duration_ms) : <span className="fx-muted">{run.status}</span>}</dd>
        </dl>
        <Lineage run={run} summaries={summaries} />
        <Deliveries run={run} />
        {run.error && (
          <div className="fx-error-box" data-testid="run-error">
            <span className="fx-code-tag fx-error-code">{run.error.code}</span>
            {run.error.http_status ? <span className="fx-code-tag fx-error-code">HTTP {run.error.http_status}</span> : null}
            {run.error.step && (
              <span className="fx-muted">
                at <code>{run.error.step}</code>
              </span>
            )}
            <div>{run.error.message}</div>
          </div>
        )}
        {run.warnings?.map((w, i) => (
          <div key={i} className="fx-warn-box">
            {w}
          </div>
        ))}
        <h4 className="fx-detail-section">
          Steps <span className="fx-count">{run.steps.length}</span>
          <span className="fx-spacer" />
          <span className="fx-legend">
            <span className="fx-timeline-seg is-ok" /> attempt <span className="fx-timeline-seg is-bad" /> failed{' '}
            <span className="fx-timeline-seg is-wait" /> backoff wait
          </span>
        </h4>
        <div className="fx-steps" data-testid="step-timeline">
          {run.steps.map((st) => (
            <StepCard
              key={st.step_id}
              step={st}
              t0={t0}
              total={total}
              open={isOpen(st)}
              onToggle={() => setOpenSteps((o) => ({ ...o, [st.step_id]: !isOpen(st) }))}
              reusedFrom={st.reused_from ? { id: st.reused_from, summary: summaries[st.reused_from] } : undefined}
              onResumeHere={resumeHere.has(st.step_id) ? () => openResume({ id: run.id, mode: run.mode, fromStep: st.step_id }) : undefined}
            />
          ))}
          {!run.steps.length && <div className="fx-empty">{FINAL.has(run.status) ? 'No step ran.' : 'Waiting for the first step…'}</div>}
        </div>
        <JsonView label="Input" value={run.input} open={1} testId="run-input-json" />
      </div>
      {canvas && snapshot && (
        <RunCanvas
          run={run}
          workflow={snapshot}
          onClose={() => setCanvas(false)}
          onPickStep={(sid) => {
            setCanvas(false);
            setOpenSteps((o) => ({ ...o, [sid]: true }));
            requestAnimationFrame(() => document.querySelector(`[data-testid="step-${CSS.escape(sid)}"]`)?.scrollIntoView({ block: 'center' }));
          }}
        />
      )}
    </section>
  );
}
