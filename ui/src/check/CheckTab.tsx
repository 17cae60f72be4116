import { ShieldCheck } from 'lucide-react';
import { Fragment, useEffect, useState } from 'react';
import { Markdownish } from '../inspector/widgets';
import { useEditor } from '../store/editor';
import { formatMs } from '../app/format';
import type { Verdict } from '../api';
import { checkSummary, useCheck } from './store';
import './check.css';

const SCENARIOS = [
  'first delivery',
  'same event twice',
  'new event (new ids)',
  'timeout after write, then redelivery',
  'forced failure, compensation',
  'replay of the failed run',
];

/** A scheduled poll that fans out: its rows come first, then the item workflow's. */
const POLL_SCENARIOS = [
  'first poll (3 items in the source)',
  'poll again, nothing new',
  'a new item, then two overlapping polls',
  'the item workflow: every row above',
];

/** What the canvas is, for the Check tab's wording: a plain workflow, a scheduled poll that
 * fans out (the event is one item of what it lists), or a fan-out of the event's items. */
type CheckShape = 'single' | 'poll' | 'fan_out';

function useCheckShape(): CheckShape {
  return useEditor((s) => {
    if (!s.nodes.some((n) => n.data.kind === 'fan_out')) return 'single';
    return s.nodes.some((n) => n.data.kind === 'schedule_trigger') ? 'poll' : 'fan_out';
  });
}

const EVENT_HINT: Record<CheckShape, string> = {
  single: 'The event is the run input',
  poll: 'The event is one item the poll lists (e.g. a payment; a Stripe event stands for its data.object)',
  fan_out: 'The event is the run input; its items start the item runs',
};

const VERDICT_LABEL: Record<Verdict, string> = { pass: 'PASS', fail: 'FAIL', not_run: 'not run' };

const CHECK_TITLE =
  'Prove the canvas is safe to re-run: the run input as the event, sent twice, after a timeout-after-write, with a new id, ' +
  'with a forced failure and compensation, then a replay; against a throw-away sandbox and store (nothing leaves this machine)';

/** The top bar's "Check" button (next to Dry Run). */
export function CheckButton() {
  const busy = useCheck((s) => s.busy);
  const runCheck = useCheck((s) => s.runCheck);
  return (
    <button className="fx-btn" onClick={() => void runCheck()} disabled={busy} title={CHECK_TITLE} aria-label="Check" data-testid="check">
      {busy ? 'Checking…' : <><ShieldCheck size={15} aria-hidden /> <span className="fx-btn-label-narrow">Check</span></>}
    </button>
  );
}

/** The dot on the "Check" tab: running, passed or failed (for the workflow on the canvas). */
export function CheckTabMark() {
  const busy = useCheck((s) => s.busy);
  const result = useCheck((s) => s.result);
  const workflowId = useEditor((s) => s.meta.id);
  if (busy) return <span className="fx-dot run-running" />;
  if (!result || result.workflowId !== workflowId) return null;
  return <span className={`fx-dot ${result.report.passed ? 'run-succeeded' : 'run-failed'}`} />;
}

function Elapsed({ since }: { since: number }) {
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    const t = setInterval(() => setNow(Date.now()), 250);
    return () => clearInterval(t);
  }, []);
  return <span className="fx-muted">{((now - since) / 1000).toFixed(1)} s</span>;
}

function Progress({ since, shape }: { since: number; shape: CheckShape }) {
  return (
    <div className="fx-check-progress" data-testid="check-progress" role="status" aria-live="polite">
      <div className="fx-row">
        <span className="fx-check-spinner" />
        <span>Checking the canvas against a throw-away sandbox and store…</span>
        <Elapsed since={since} />
      </div>
      <div className="fx-check-bar">
        <span />
      </div>
      <ul className="fx-check-scenarios fx-muted">
        {(shape === 'poll' ? POLL_SCENARIOS : SCENARIOS).map((s) => (
          <li key={s}>{s}</li>
        ))}
      </ul>
    </div>
  );
}

function IdPathsField() {
  const workflowId = useEditor((s) => s.meta.id);
  const value = useCheck((s) => s.idPaths[workflowId]) ?? useCheck.getState().idPathsFor(workflowId);
  const setIdPaths = useCheck((s) => s.setIdPaths);
  const busy = useCheck((s) => s.busy);
  const runCheck = useCheck((s) => s.runCheck);
  return (
    <label className="fx-check-idpaths">
      <span className="fx-muted">Id paths</span>
      <input
        className="fx-input fx-mono"
        value={value}
        placeholder="id, data.object.id (default)"
        spellCheck={false}
        data-testid="check-id-paths"
        title="Dot paths of the event's business ids, comma-separated: the “new event” row changes the values there. Empty: `id`, plus `data.object.id` when the event has it."
        onChange={(e) => setIdPaths(workflowId, e.target.value)}
        onKeyDown={(e) => {
          if (e.key === 'Enter' && !busy) void runCheck();
        }}
      />
    </label>
  );
}

export function CheckTab() {
  const busy = useCheck((s) => s.busy);
  const startedAt = useCheck((s) => s.startedAt);
  const result = useCheck((s) => s.result);
  const error = useCheck((s) => s.error);
  const seq = useCheck((s) => s.seq);
  const runCheck = useCheck((s) => s.runCheck);
  const clear = useCheck((s) => s.clear);
  const workflowId = useEditor((s) => s.meta.id);
  const rev = useEditor((s) => s.rev);
  const inputText = useEditor((s) => s.inputText);
  const setTab = useEditor((s) => s.setBottomTab);
  const shape = useCheckShape();

  const shown = result && result.workflowId === workflowId ? result : null;
  const failure = error && error.workflowId === workflowId ? error : null;
  const stale = !!shown && (shown.rev !== rev || shown.inputText !== inputText);

  let body;
  if (busy && startedAt) {
    body = <Progress since={startedAt} shape={shape} />;
  } else if (failure) {
    const errors = failure.problems?.filter((p) => p.severity === 'error').length ?? 0;
    body = (
      <div className="fx-check-error" data-testid="check-error" data-code={failure.code}>
        <span className="fx-code-tag">{failure.code}</span> <span className="fx-error-text">{failure.message}</span>
        {errors > 0 && (
          <button className="fx-btn fx-btn-small" onClick={() => setTab('problems')}>
            Show {errors} problem{errors === 1 ? '' : 's'}
          </button>
        )}
        {failure.code === 'invalid_check' && (
          <div className="fx-muted">Fix the run input (Run input tab) or the id paths, then check again.</div>
        )}
      </div>
    );
  } else if (shown) {
    const r = shown.report;
    body = (
      <div className="fx-check-report" data-testid="check-report" data-passed={r.passed ? 'true' : 'false'} data-stale={stale ? 'true' : 'false'} data-seq={seq}>
        <div className="fx-check-summary-row">
          <span className={`fx-check-badge ${r.passed ? 'is-pass' : 'is-fail'}`}>{r.passed ? 'SAFE' : 'NOT SAFE'}</span>
          <span className={`fx-check-summary ${r.passed ? 'fx-ok-text' : 'fx-error-text'}`} data-testid="check-summary">
            {checkSummary(r)}
          </span>
          <span className="fx-muted">{formatMs(shown.durationMs)}</span>
          {stale && (
            <span className="fx-warning-text" data-testid="check-stale">
              The canvas or the input changed since: check again
            </span>
          )}
        </div>
        <table className="fx-table fx-check-table" data-testid="check-table">
          <colgroup>
            <col className="fx-check-col-check" />
            <col className="fx-check-col-expected" />
            <col />
            <col className="fx-check-col-result" />
          </colgroup>
          <thead>
            <tr>
              <th>Check</th>
              <th>Expected</th>
              <th>Seen</th>
              <th>Result</th>
            </tr>
          </thead>
          <tbody>
            {r.checks.map((row, i) => (
              <Fragment key={i}>
                <tr className={`is-${row.verdict}`} data-testid="check-row" data-check={row.check} data-verdict={row.verdict}>
                  <td className="fx-check-name">{row.check}</td>
                  <td className="fx-muted">{row.expected}</td>
                  <td data-testid="check-seen">
                    <Markdownish text={row.seen} />
                  </td>
                  <td>
                    <span className={`fx-check-badge is-${row.verdict}`} data-testid="check-verdict">
                      {VERDICT_LABEL[row.verdict] ?? row.verdict}
                    </span>
                  </td>
                </tr>
                {(row.why || row.fix) && (
                  // Why it failed and what to change, across the whole table's width.
                  <tr className="fx-check-explain" data-testid="check-explain" data-check={row.check}>
                    <td colSpan={4}>
                      {row.why && (
                        <div data-testid="check-why">
                          <span className="fx-check-label is-why">Why</span> <Markdownish text={row.why} />
                        </div>
                      )}
                      {row.fix && (
                        <div data-testid="check-fix">
                          <span className="fx-check-label is-fix">Fix</span> <Markdownish text={row.fix} />
                        </div>
                      )}
                    </td>
                  </tr>
                )}
              </Fragment>
            ))}
          </tbody>
        </table>
        <div className="fx-check-notes">
          <div className="fx-muted">
            {r.env.length > 0 && (
              <>
                Pointed at the sandbox:{' '}
                {r.env.map((n, i) => (
                  <span key={n}>
                    {i > 0 && ', '}
                    <code>env.{n}</code>
                  </span>
                ))}
                {' · '}
              </>
            )}
            Id paths changed for the new event:{' '}
            {r.id_paths.map((p, i) => (
              <span key={p}>
                {i > 0 && ', '}
                <code>{p}</code>
              </span>
            ))}
          </div>
          {r.warnings.length > 0 && (
            <ul className="fx-check-warnings" data-testid="check-warnings">
              {r.warnings.map((w, i) => (
                <li key={i} className="fx-warning-text">
                  {w}
                </li>
              ))}
            </ul>
          )}
          {r.notes.length > 0 && (
            <ul className="fx-check-list fx-muted" data-testid="check-notes">
              {r.notes.map((n, i) => (
                <li key={i}>{n}</li>
              ))}
            </ul>
          )}
        </div>
      </div>
    );
  } else {
    body = (
      <div className="fx-empty" data-testid="check-empty">
        {shape === 'poll' ? (
          <>
            Check proves this poll is safe to re-run: it seeds the source the poll lists with three copies of the run input
            (one item, e.g. a payment), runs overlapping polls and the item runs they start, then checks the item workflow
            (the saved one) like any other. Nothing leaves this machine.
          </>
        ) : (
          <>
            Check proves this workflow is safe to re-run: it runs what is on the canvas with the run input as the event,
            against a throw-away sandbox and store. The same event twice, a timeout after a write, a new id, a forced
            failure with compensation, and a replay of the failed run. Nothing leaves this machine.
          </>
        )}
      </div>
    );
  }

  return (
    <div className="fx-check-tab" data-testid="check-tab">
      <div className="fx-results-head">
        <button className="fx-btn fx-btn-primary fx-btn-small" onClick={() => void runCheck()} disabled={busy} data-testid="check-again">
          {busy ? 'Checking…' : shown || failure ? 'Check again' : 'Check'}
        </button>
        <IdPathsField />
        <span className="fx-muted" data-testid="check-event-hint">
          {EVENT_HINT[shape]}
        </span>
        <span className="fx-spacer" />
        {(shown || failure) && !busy && (
          <button className="fx-btn fx-btn-small" onClick={clear} data-testid="clear-check">
            Clear
          </button>
        )}
      </div>
      {body}
    </div>
  );
}
