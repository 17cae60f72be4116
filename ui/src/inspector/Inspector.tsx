import { memo, useEffect, useMemo, useState } from 'react';
import Form from '@rjsf/core';
import type { ErrorSchema, RJSFSchema } from '@rjsf/utils';
import { customizeValidator } from '@rjsf/validator-ajv8';
import Ajv2020 from 'ajv/dist/2020';
import { useShallow } from 'zustand/react/shallow';
import { useEditor } from '../store/editor';
import { useNav } from '../app/nav';
import { configSchemaOf, portsOf, upstreamOf, WORKFLOW_ID_RE } from '../store/graph';
import { clean, formSpec, sameJson } from './schemaForm';
import { InspectorContext, type InspectorInfo } from './TemplateInput';
import { fields, Markdownish, templates, widgets } from './widgets';
import { excerpt, formatMs } from '../app/format';
import { stringifyJson } from '../api';
import { CronWidget, ScheduleNotice, TimezoneWidget } from './CronField';
import { formatInZone, hasSeconds, relativeTime, tickFor, useNow } from './schedule';
import type { UiSchema } from '@rjsf/utils';

// The engine's schemas are JSON Schema 2020-12.
const validator = customizeValidator({ AjvClass: Ajv2020 });
const stepWidgets = { ...widgets, cron: CronWidget, timezone: TimezoneWidget };
const SCHEDULE = 'schedule_trigger';

/** A schedule trigger's cron field (the expression, its plain-words description and next fire times) and zone (a plain field with IANA suggestions). */
function withCron(ui: UiSchema): UiSchema {
  return {
    ...ui,
    // The widget shows the field's problems itself (once: the preview's and validation's are the same text).
    cron: { ...(ui.cron as UiSchema | undefined), 'ui:widget': 'cron', 'ui:hideError': true },
    timezone: { ...(ui.timezone as UiSchema | undefined), 'ui:widget': 'timezone' },
  };
}

const DEFAULTS_BEHAVIOUR = {
  emptyObjectFields: 'skipDefaults',
  arrayMinItems: { populate: 'never' },
  constAsDefaults: 'never',
} as const;

/** Server messages by config path → the form library's error tree. */
function toErrorSchema(fieldErrors: Record<string, string[]>): ErrorSchema {
  const root: Record<string, unknown> = {};
  for (const [path, msgs] of Object.entries(fieldErrors)) {
    if (!path) continue;
    let node = root;
    for (const seg of path.split('.')) node = (node[seg] ??= {}) as Record<string, unknown>;
    node.__errors = [...((node.__errors as string[]) ?? []), ...msgs];
  }
  return root as ErrorSchema;
}

/** Commit-on-blur text input (ids: renaming on each keystroke would rewire the graph). */
function IdInput({ value, onCommit, testId, pattern, label }: { value: string; onCommit(v: string): string | null; testId: string; pattern?: string; label: string }) {
  const [text, setText] = useState(value);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    setText(value);
    setError(null);
  }, [value]);
  const commit = () => {
    if (text === value) return;
    const err = onCommit(text.trim());
    setError(err);
    if (err) return;
  };
  return (
    <>
      <input
        className={`fx-input fx-mono ${error ? 'is-invalid' : ''}`}
        value={text}
        pattern={pattern}
        spellCheck={false}
        aria-label={label}
        data-testid={testId}
        onChange={(e) => setText(e.target.value)}
        onBlur={commit}
        onKeyDown={(e) => {
          if (e.key === 'Enter') commit();
          if (e.key === 'Escape') {
            setText(value);
            setError(null);
          }
        }}
      />
      {error && <div className="fx-field-errors">{error}</div>}
    </>
  );
}

const StepForm = memo(function StepForm({ id }: { id: string }) {
  // Narrow selectors: dragging nodes must not re-render the form.
  const data = useEditor((s) => s.nodes.find((n) => n.id === id)?.data);
  const kind = useEditor((s) => (data ? s.kinds[data.kind] : undefined));
  const upstream = useEditor(useShallow((s) => upstreamOf(id, s.edges)));
  const hasError = useEditor((s) =>
    [id, ...upstream].some((u) => s.nodes.find((n) => n.id === u)?.data.kind === 'error_handler'),
  );
  const probs = useEditor((s) => s.problemsByStep[id]);
  const rec = useEditor((s) => s.runByStep[id]);
  const updateStep = useEditor((s) => s.updateStep);
  const renameStep = useEditor((s) => s.renameStep);

  const info: InspectorInfo = useMemo(
    () => ({ stepId: id, upstream, fieldErrors: probs?.fields ?? {}, hasError }),
    [id, upstream, probs, hasError],
  );
  const extraErrors = useMemo(() => toErrorSchema(probs?.fields ?? {}), [probs]);

  // An app action's fields are its operation's input (the connector says what they are).
  const opInput = useEditor((s) =>
    data?.kind === 'action'
      ? s.connectors.find((c) => c.app === data.config.connector)?.operations.find((o) => o.name === data.config.operation)?.input
      : undefined,
  );
  const appTitle = useEditor((s) =>
    data?.kind === 'action' ? s.connectors.find((c) => c.app === data.config.connector)?.title : undefined,
  );
  const connectionIds = useEditor(
    useShallow((s) => (data?.kind === 'action' ? s.connections.filter((c) => c.app === data.config.connector).map((c) => c.id) : [])),
  );
  const spec = useMemo(() => {
    if (!kind) return null;
    let schema = configSchemaOf(kind);
    if (opInput && typeof opInput === 'object') {
      const props = { ...((schema.properties ?? {}) as Record<string, unknown>) };
      props.params = { ...(opInput as Record<string, unknown>), title: 'Fields' };
      // The connections of this app to pick from; none yet: say where to add one.
      const connection = (props.connection ?? {}) as Record<string, unknown>;
      props.connection = connectionIds.length
        ? { ...connection, enum: connectionIds }
        : { ...connection, description: 'No connection for this app yet: add one in Settings → Connections.' };
      schema = { ...schema, properties: props };
    }
    const base = formSpec(schema);
    return kind.kind === SCHEDULE ? { ...base, uiSchema: withCron(base.uiSchema) } : base;
  }, [kind, opInput, connectionIds]);

  if (!data) return null;
  const stepLevel = [...(probs?.errors ?? []), ...(probs?.warnings ?? [])].filter(
    (p) => !/\.config\.[^.]/.test(p.path) || !spec,
  );

  return (
    <InspectorContext.Provider value={info}>
      <div className="fx-inspector-body" data-testid="inspector-step">
        <header className="fx-inspector-head">
          <div className="fx-inspector-kind">{kind?.title ?? data.kind}</div>
          {kind && (
            <p className="fx-muted">
              <Markdownish text={kind.description} />
            </p>
          )}
        </header>
        <div className="form-group">
          <label className="control-label">Step id</label>
          <IdInput value={id} testId="step-id" label="Step id" onCommit={(v) => renameStep(id, v)} />
        </div>
        <div className="form-group">
          <label className="control-label" htmlFor="step-name">
            Name
          </label>
          <input
            id="step-name"
            className="fx-input"
            value={data.name ?? ''}
            placeholder={kind?.title}
            data-testid="step-name"
            onChange={(e) => updateStep(id, { name: e.target.value }, `name:${id}`)}
          />
        </div>
        {stepLevel.length > 0 && (
          <ul className="fx-step-problems" data-testid="inspector-problems">
            {stepLevel.map((p, i) => (
              <li key={i} className={p.severity}>
                <span className="fx-code-tag">{p.code}</span> {p.message}
              </li>
            ))}
          </ul>
        )}
        {spec ? (
          <Form
            key={`${id}:${data.kind}`}
            className="fx-form"
            schema={spec.schema as RJSFSchema}
            uiSchema={spec.uiSchema}
            formData={data.config}
            validator={validator}
            widgets={stepWidgets}
            fields={fields}
            templates={templates}
            extraErrors={extraErrors}
            showErrorList={false}
            noHtml5Validate
            experimental_defaultFormStateBehavior={DEFAULTS_BEHAVIOUR}
            onChange={(e) => {
              const next = clean(e.formData ?? {}) as Record<string, unknown>;
              const cur = useEditor.getState().nodes.find((n) => n.id === id)?.data.config;
              if (!sameJson(next, cur)) updateStep(id, { config: next }, `config:${id}`);
            }}
          />
        ) : (
          <p className="fx-muted">This build of the engine has no step kind `{data.kind}`.</p>
        )}
        {data.kind === 'action' && appTitle && !connectionIds.includes(String(data.config.connection ?? '')) && (
          <div className="form-group">
            <button
              type="button"
              className="fx-btn"
              data-testid="inspector-connect"
              onClick={() => {
                const app = String(data.config.connector);
                const want = String(data.config.connection ?? '') || `${app.replace(/_/g, '-')}-main`;
                useNav.getState().connect(app, want);
              }}
            >
              Connect {appTitle}
              {data.config.connection ? ` as ${String(data.config.connection)}` : ''}
            </button>
          </div>
        )}
        <section className="fx-inspector-section">
          <h4>Ports</h4>
          <div className="fx-ports">
            {portsOf(kind, data.config).map((p) => (
              <span key={p} className={`fx-chip ${p === 'error' ? 'fx-chip-error' : ''}`}>
                {p}
              </span>
            ))}
          </div>
          {kind && <p className="fx-muted">Output: {kind.output}</p>}
        </section>
        {rec && (
          <section className="fx-inspector-section" data-testid="inspector-run">
            <h4>
              Last run <span className={`fx-pill run-${rec.status}`}>{rec.status}</span>{' '}
              {rec.duration_ms !== undefined && <span className="fx-muted">{formatMs(rec.duration_ms)}</span>}
            </h4>
            {rec.error && (
              <div className="fx-run-error">
                <span className="fx-code-tag">{rec.error.code}</span> {rec.error.message}
                {rec.error.http_status ? ` (HTTP ${rec.error.http_status})` : ''}
              </div>
            )}
            {rec.output !== undefined && (
              <>
                <div className="fx-muted">Output</div>
                <pre className="fx-pre" data-testid="inspector-output">{stringifyJson(rec.output, 2)}</pre>
              </>
            )}
            {rec.resolved_config !== undefined && rec.resolved_config !== null && (
              <details>
                <summary>Resolved config</summary>
                <pre className="fx-pre">{stringifyJson(rec.resolved_config, 2)}</pre>
              </details>
            )}
            {rec.attempts.length > 0 && (
              <table className="fx-table fx-attempts">
                <thead>
                  <tr>
                    <th>#</th>
                    <th>Waited</th>
                    <th>Took</th>
                    <th>HTTP</th>
                    <th>Error</th>
                  </tr>
                </thead>
                <tbody>
                  {rec.attempts.map((a, i) => (
                    <tr key={i}>
                      <td>{i + 1}</td>
                      <td>{formatMs(a.delay_before_ms ?? 0)}</td>
                      <td>{formatMs(a.duration_ms)}</td>
                      <td>{a.http_status ?? ''}</td>
                      <td title={a.error ?? ''}>{a.error ? excerpt(a.error, 60) : ''}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            )}
          </section>
        )}
      </div>
    </InspectorContext.Provider>
  );
});

function WorkflowForm() {
  const meta = useEditor((s) => s.meta);
  const setMeta = useEditor((s) => s.setMeta);
  const nodes = useEditor((s) => s.nodes.length);
  const edges = useEditor((s) => s.edges.length);
  const hasWebhook = useEditor((s) => s.nodes.some((n) => n.data.kind === 'webhook_trigger'));
  const hasSchedule = useEditor((s) => s.nodes.some((n) => n.data.kind === SCHEDULE));
  const savedId = useEditor((s) => s.savedId);
  const liveVersion = useEditor((s) => s.liveVersion);
  return (
    <div className="fx-inspector-body" data-testid="inspector-workflow">
      <header className="fx-inspector-head">
        <div className="fx-inspector-kind">Workflow</div>
        <p className="fx-muted">
          {nodes} steps · {edges} edges · select a step to edit it
        </p>
      </header>
      <div className="form-group">
        <label className="control-label">Id (file name)</label>
        <IdInput
          value={meta.id}
          testId="workflow-id"
          label="Workflow id (file name)"
          onCommit={(v) => {
            if (!WORKFLOW_ID_RE.test(v)) return 'Lowercase letters, digits, - and _ (start with a letter or digit; max 64).';
            setMeta({ id: v });
            return null;
          }}
        />
        {savedId && savedId !== meta.id && (
          <div className="fx-muted">
            Saving keeps a draft as {meta.id} (publish to create {meta.id}.json);{' '}
            {liveVersion !== null ? `${savedId} stays live until you delete it.` : `the draft of ${savedId} moves with it.`}
          </div>
        )}
      </div>
      <div className="form-group">
        <label className="control-label" htmlFor="workflow-name">
          Name
        </label>
        <input id="workflow-name" className="fx-input" value={meta.name} data-testid="workflow-name-field" onChange={(e) => setMeta({ name: e.target.value }, 'meta:name')} />
      </div>
      <div className="form-group">
        <label className="control-label" htmlFor="workflow-description">
          Description
        </label>
        <textarea
          id="workflow-description"
          className="fx-input"
          rows={4}
          value={meta.description ?? ''}
          onChange={(e) => setMeta({ description: e.target.value || undefined }, 'meta:description')}
        />
      </div>
      <div className="form-group">
        <label className="control-label" htmlFor="workflow-run-timeout">
          Run time limit
        </label>
        <input
          id="workflow-run-timeout"
          className="fx-input"
          spellCheck={false}
          value={meta.settings?.run_timeout_s ?? ''}
          placeholder="50s (default)"
          data-testid="workflow-run-timeout"
          onChange={(e) => {
            const t = e.target.value.trim();
            setMeta(
              { settings: { ...meta.settings, run_timeout_s: t === '' ? undefined : /^\d+$/.test(t) ? Number(t) : e.target.value } },
              'meta:timeout',
            );
          }}
        />
        <div className="field-description">Backoff waits count; no retry is scheduled past it. Seconds, or units: 90s, 2m.</div>
      </div>
      <SecretsField secrets={meta.secrets} onChange={(secrets) => setMeta({ secrets }, 'meta:secrets')} />
      {hasWebhook && (
        <section className="fx-inspector-section">
          <h4>Webhook</h4>
          <WebhookAddress id={meta.id} />
          <ListenForTestEvent id={savedId} />
        </section>
      )}
      {hasSchedule && (
        <section className="fx-inspector-section" data-testid="workflow-schedule">
          <h4>Schedule</h4>
          <NextRun id={savedId} />
          <ScheduleNotice />
        </section>
      )}
    </div>
  );
}

/** The saved workflow's next tick (from `listSchedules`), or why there is none. */
/** The workflow's `secrets`: the secret env variables it may read, typed as a comma list. */
function SecretsField({ secrets, onChange }: { secrets?: string[]; onChange(v: string[] | undefined): void }) {
  const [text, setText] = useState((secrets ?? []).join(', '));
  useEffect(() => {
    // A change from elsewhere (undo, another workflow) replaces what is typed.
    const current = text.split(',').map((x) => x.trim()).filter(Boolean);
    if (!sameJson(current, secrets ?? [])) setText((secrets ?? []).join(', '));
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [secrets]);
  return (
    <div className="form-group">
      <label className="control-label" htmlFor="workflow-secrets">Secrets</label>
      <input
        id="workflow-secrets"
        className="fx-input"
        data-testid="workflow-secrets-field"
        value={text}
        placeholder="API_KEY, DB_PASSWORD"
        onChange={(e) => {
          setText(e.target.value);
          const names = e.target.value.split(',').map((x) => x.trim()).filter(Boolean);
          onChange(names.length ? names : undefined);
        }}
      />
      <div className="field-description">
        Secret env variables this workflow may read. A secret renders only whole, as {'{{ env.API_KEY }}'}, in a header value or a
        URL&apos;s credentials; it is never shown.
      </div>
    </div>
  );
}

function NextRun({ id }: { id: string | null }) {
  const sched = useEditor((s) => (id ? s.schedules[id] : undefined));
  const dirty = useEditor((s) => s.dirty);
  const at = sched?.next_at ? Date.parse(sched.next_at) : undefined;
  const now = useNow(tickFor(at, Date.now()));
  let text: string;
  if (!sched) text = id ? 'Not scheduled yet: save a valid workflow to schedule it.' : 'Save the workflow to schedule it.';
  else if (at === undefined || !sched.next_at) text = 'It never fires again.';
  else text = `Next run ${at > now ? relativeTime(at, now) : 'due now'} · ${formatInZone(sched.next_at, sched.timezone, hasSeconds(sched.cron))}`;
  return (
    <div className="fx-next-run" data-testid="workflow-next-run">
      <div>{text}</div>
      {sched && (
        <div className="fx-muted">
          <code>{sched.cron}</code> in {sched.timezone}
          {dirty ? ' (as saved)' : ''}
        </div>
      )}
    </div>
  );
}

/** `POST <listener>/hooks/<id>`: this server in a browser, the app's local listener in the
 * desktop shell (where `window.location` is the app's own scheme). */
function WebhookAddress({ id }: { id: string }) {
  const api = useEditor((s) => s.api);
  const [base, setBase] = useState<string | null>(null);
  useEffect(() => {
    let live = true;
    api?.webhookBase().then((b) => live && setBase(b), () => live && setBase(null));
    return () => {
      live = false;
    };
  }, [api]);
  return <code className="fx-pre">POST {base ?? '…/hooks'}/{id}</code>;
}

/** "Listen for a test event": the next delivery to this workflow's webhook (a real sender, or
 * curl) becomes the run input, like n8n's test URL, without a second address. */
function ListenForTestEvent({ id }: { id: string | null }) {
  const api = useEditor((s) => s.api);
  const setInputText = useEditor((s) => s.setInputText);
  const notify = useEditor((s) => s.notify);
  const openInput = useEditor((s) => s.setBottomTab);
  const [listening, setListening] = useState(false);
  useEffect(() => {
    if (!listening || !api || !id) return;
    let stop: (() => void) | undefined;
    let done = false;
    void api
      .subscribeRunEvents((e) => {
        if (done || e.event !== 'run_started' || e.workflow_id !== id || e.mode !== 'live') return;
        void api.getRun(e.run_id).then((run) => {
          if (done || run.trigger !== 'webhook') return;
          done = true;
          setInputText(stringifyJson(run.input, 2));
          openInput('input');
          notify('info', `Captured the delivery of run ${run.id.slice(0, 13)}… as the run input`);
          setListening(false);
        });
      })
      .then((s) => {
        stop = s;
        if (done) s();
      });
    return () => {
      done = true;
      stop?.();
    };
  }, [listening, api, id, setInputText, openInput, notify]);
  if (!id) return <div className="fx-muted">Save the workflow to receive deliveries.</div>;
  return (
    <div className="fx-row" data-testid="listen-test-event" data-listening={listening ? 'true' : 'false'}>
      <button className={`fx-btn fx-btn-small ${listening ? 'is-active' : ''}`} onClick={() => setListening(!listening)} data-testid="listen-toggle">
        {listening ? 'Stop listening' : 'Listen for a test event'}
      </button>
      <span className="fx-muted">
        {listening ? 'Waiting for the next delivery to the address above (it runs as usual)…' : 'The next delivery becomes the run input.'}
      </span>
    </div>
  );
}

export function Inspector() {
  const selected = useEditor((s) => s.selectedIds);
  const deleteSelection = useEditor((s) => s.deleteSelection);
  const copySelection = useEditor((s) => s.copySelection);
  const cutSelection = useEditor((s) => s.cutSelection);
  const paste = useEditor((s) => s.paste);
  const canPaste = useEditor((s) => !!s.clipboard);
  return (
    <aside className="fx-inspector" id="fx-inspector-panel" aria-label="Inspector" data-testid="inspector">
      {selected.length === 1 ? (
        <StepForm id={selected[0]} key={selected[0]} />
      ) : selected.length > 1 ? (
        <div className="fx-inspector-body">
          <header className="fx-inspector-head">
            <div className="fx-inspector-kind">{selected.length} steps selected</div>
          </header>
          <div className="fx-row">
            <button className="fx-btn" onClick={copySelection} data-testid="selection-copy">
              Copy
            </button>
            <button className="fx-btn" onClick={cutSelection} data-testid="selection-cut">
              Cut
            </button>
            <button className="fx-btn" onClick={paste} disabled={!canPaste} data-testid="selection-paste">
              Paste
            </button>
            <button className="fx-btn fx-btn-danger" onClick={deleteSelection}>
              Delete
            </button>
          </div>
        </div>
      ) : (
        <WorkflowForm />
      )}
    </aside>
  );
}
