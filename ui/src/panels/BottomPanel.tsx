import { ChevronDown, ChevronUp, CircleX, Play, TriangleAlert } from 'lucide-react';
import { useMemo, useState } from 'react';
import { useEditor, runFinished } from '../store/editor';
import { excerpt, formatMs } from '../app/format';
import { parseJson, stringifyJson, type ValidationProblem } from '../api';
import { TabList, tabPanelProps } from '../app/Tabs';
import { CheckTab, CheckTabMark } from '../check/CheckTab';
import { useNav } from '../app/nav';

function ProblemsTab() {
  const problems = useEditor((s) => s.problems);
  const validation = useEditor((s) => s.validation);
  const selectNode = useEditor((s) => s.selectNode);
  const go = useNav((s) => s.go);
  const nodeIds = useEditor((s) => s.nodes.map((n) => n.id).join('\u0000'));
  const sorted = useMemo(
    () => [...problems].sort((a, b) => (a.severity === b.severity ? 0 : a.severity === 'error' ? -1 : 1)),
    [problems],
  );
  if (!problems.length) {
    return (
      <div className="fx-empty" data-testid="problems-empty">
        {validation === 'pending' ? 'Checking…' : validation === 'failed' ? 'Could not validate (is the server running?)' : 'No problems: the workflow is valid and lint-clean.'}
      </div>
    );
  }
  const exists = new Set(nodeIds.split('\u0000'));
  return (
    <table className="fx-table fx-problems" data-testid="problems-list">
      <thead>
        <tr>
          <th />
          <th>Step</th>
          <th>Code</th>
          <th>Message</th>
          <th>Where</th>
        </tr>
      </thead>
      <tbody>
        {sorted.map((p: ValidationProblem, i) => (
          <tr
            key={i}
            className={`${p.severity} ${p.step && exists.has(p.step) ? 'is-clickable' : ''}`}
            data-testid="problem-row"
            data-step={p.step ?? ''}
            data-code={p.code}
            onClick={() => p.step && exists.has(p.step) && selectNode(p.step, true)}
          >
            <td>
              <span className={`fx-sev fx-sev-${p.severity}`} title={p.severity}>
                {p.severity === 'error' ? <CircleX size={15} aria-label="error" /> : <TriangleAlert size={15} aria-label="warning" />}
              </span>
            </td>
            <td className="fx-mono">{p.step ?? '—'}</td>
            <td>
              <span className="fx-code-tag">{p.code}</span>
            </td>
            <td>
              {p.message}
              {p.code === 'env_unset' && (
                <>
                  {' '}
                  <button
                    className="fx-btn fx-btn-small"
                    data-testid="problem-open-settings"
                    onClick={(e) => {
                      e.stopPropagation();
                      go('settings');
                    }}
                  >
                    Open Settings
                  </button>
                </>
              )}
            </td>
            <td className="fx-mono fx-muted">{p.path}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

function ResultsTab() {
  const run = useEditor((s) => s.run);
  const runByStep = useEditor((s) => s.runByStep);
  const nodes = useEditor((s) => s.nodes);
  const selectNode = useEditor((s) => s.selectNode);
  const clearRun = useEditor((s) => s.clearRun);
  const busy = useEditor((s) => s.runBusy);
  if (!run) {
    return (
      <div className="fx-empty" data-testid="results-empty">
        {busy ? 'Running…' : 'No run yet. Dry Run simulates every side effect; Run starts a live run of the saved workflow.'}
      </div>
    );
  }
  const finished = runFinished(run);
  // Steps in the order they ran, then the ones the walk did not reach.
  const ran = run.steps.length ? run.steps : Object.values(runByStep);
  const ranIds = new Set(ran.map((s) => s.step_id));
  const rows = [
    ...ran.map((r) => ({ id: r.step_id, rec: runByStep[r.step_id] ?? r })),
    ...nodes.filter((n) => !ranIds.has(n.id)).map((n) => ({ id: n.id, rec: undefined })),
  ];
  return (
    <div className="fx-results" data-testid="results">
      <div className="fx-results-head" data-testid="run-summary">
        <span className={`fx-pill run-${run.status}`} data-testid="run-status">
          {run.status}
        </span>
        <span className="fx-tag">{run.mode === 'dry' ? 'dry run' : 'live run'}</span>
        <span className="fx-mono fx-muted" title="Run id" data-testid="run-id">
          {run.id}
        </span>
        {run.duration_ms !== undefined && <span className="fx-muted">{formatMs(run.duration_ms)}</span>}
        {run.error && (
          <span className="fx-run-error" data-testid="run-error">
            <span className="fx-code-tag">{run.error.code}</span> {run.error.message}
          </span>
        )}
        {run.warnings?.length ? (
          <span className="fx-run-warnings" data-testid="run-warnings">
            {run.warnings.map((w, i) => (
              <span key={i} className="fx-warning-text">
                {w}
              </span>
            ))}
          </span>
        ) : null}
        <span className="fx-spacer" />
        <button className="fx-btn fx-btn-small" onClick={clearRun} data-testid="clear-run">
          Clear
        </button>
      </div>
      <table className="fx-table" data-testid="results-table">
        <thead>
          <tr>
            <th>Step</th>
            <th>Kind</th>
            <th>Status</th>
            <th>Attempts</th>
            <th>Duration</th>
            <th>Left by</th>
            <th>Output</th>
          </tr>
        </thead>
        <tbody>
          {rows.map(({ id, rec }) => {
            const node = nodes.find((n) => n.id === id);
            const status = rec?.status ?? (finished ? 'skipped' : 'pending');
            return (
              <tr key={id} className="is-clickable" data-testid={`result-row-${id}`} data-status={status} onClick={() => node && selectNode(id, true)}>
                <td className="fx-mono">{id}</td>
                <td>{node?.data.kind ?? rec?.kind}</td>
                <td>
                  <span className={`fx-pill run-${status}`}>{status === 'skipped' ? 'not reached' : status}</span>
                </td>
                <td>{rec?.attempts.length || ''}</td>
                <td>{rec?.duration_ms !== undefined ? formatMs(rec.duration_ms) : ''}</td>
                <td className="fx-mono">{rec?.ports?.join(', ')}</td>
                <td className="fx-mono fx-excerpt" title={rec?.error ? rec.error.message : rec?.output !== undefined ? excerpt(rec.output, 2000) : ''}>
                  {rec?.error ? <span className="fx-error-text">{rec.error.code}: {rec.error.message}</span> : rec?.output !== undefined ? excerpt(rec.output, 140) : ''}
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </div>
  );
}

function InputTab() {
  const text = useEditor((s) => s.inputText);
  const setInputText = useEditor((s) => s.setInputText);
  const samples = useEditor((s) => s.samples);
  const dryRun = useEditor((s) => s.dryRun);
  const [choice, setChoice] = useState('');
  let error: string | null = null;
  try {
    if (text.trim()) parseJson(text);
  } catch (e) {
    error = (e as Error).message;
  }
  return (
    <div className="fx-input-tab">
      <div className="fx-row">
        <label className="fx-label" htmlFor="sample-select">
          Sample payload
        </label>
        <select
          id="sample-select"
          className="fx-input"
          value={choice}
          data-testid="sample-select"
          onChange={(e) => {
            setChoice(e.target.value);
            const p = samples.find((x) => x.name === e.target.value);
            if (p) setInputText(stringifyJson(p.payload, 2));
          }}
        >
          <option value="">Choose a real payload…</option>
          {samples.map((p) => (
            <option key={p.name} value={p.name}>
              {p.name}
            </option>
          ))}
        </select>
        <button
          className="fx-btn fx-btn-small"
          onClick={() => {
            try {
              setInputText(stringifyJson(parseJson(text), 2));
            } catch {
              /* leave it */
            }
          }}
          data-testid="format-input"
        >
          Format
        </button>
        {error ? (
          <span className="fx-error-text fx-input-hint" title={error}>
            Not JSON: {error}
          </span>
        ) : (
          <span className="fx-muted fx-input-hint" title="Remembered for this workflow; the trigger's payload is `input`">
            Remembered for this workflow · the trigger's payload is <code>input</code>
          </span>
        )}
        <button className="fx-btn fx-btn-primary fx-btn-small fx-input-run" onClick={() => void dryRun()} disabled={!!error} data-testid="input-dry-run">
          <Play size={14} aria-hidden /> Dry Run with this input
        </button>
      </div>
      <textarea
        className={`fx-code fx-input-json ${error ? 'is-invalid' : ''}`}
        spellCheck={false}
        value={text}
        aria-label="Run input (JSON)"
        data-testid="run-input"
        onChange={(e) => setInputText(e.target.value)}
      />
    </div>
  );
}

export function BottomPanel() {
  const tab = useEditor((s) => s.bottomTab);
  const open = useEditor((s) => s.bottomOpen);
  const setTab = useEditor((s) => s.setBottomTab);
  const toggle = useEditor((s) => s.toggleBottom);
  const errors = useEditor((s) => s.problems.filter((p) => p.severity === 'error').length);
  const warnings = useEditor((s) => s.problems.length) - errors;
  const run = useEditor((s) => s.run);
  return (
    <section className={`fx-bottom ${open ? 'is-open' : ''}`} data-testid="bottom-panel">
      <div className="fx-tabs">
        <TabList
          base="fx-bottom"
          label="Problems, run results, run input and check"
          value={tab}
          onSelect={setTab}
          hasPanel={open}
          tabs={[
            {
              id: 'problems',
              testId: 'tab-problems',
              label: (
                <>
                  Problems
                  {errors > 0 && <span className="fx-count fx-count-error">{errors}</span>}
                  {warnings > 0 && <span className="fx-count fx-count-warning">{warnings}</span>}
                </>
              ),
            },
            {
              id: 'results',
              testId: 'tab-results',
              label: (
                <>
                  Run results
                  {run && <span className={`fx-dot run-${run.status}`} />}
                </>
              ),
            },
            { id: 'input', testId: 'tab-input', label: 'Run input' },
            {
              id: 'check',
              testId: 'tab-check',
              label: (
                <>
                  Check
                  <CheckTabMark />
                </>
              ),
            },
          ]}
        />
        <span className="fx-spacer" />
        <button
          onClick={() => toggle()}
          title={open ? 'Hide panel' : 'Show panel'}
          aria-label={open ? 'Hide the bottom panel' : 'Show the bottom panel'}
          aria-expanded={open}
          data-testid="toggle-bottom"
        >
          {open ? <ChevronDown size={16} aria-hidden /> : <ChevronUp size={16} aria-hidden />}
        </button>
      </div>
      {open && (
        <div className="fx-bottom-body" {...tabPanelProps('fx-bottom', tab)}>
          {tab === 'problems' ? <ProblemsTab /> : tab === 'results' ? <ResultsTab /> : tab === 'check' ? <CheckTab /> : <InputTab />}
        </div>
      )}
    </section>
  );
}
