// Settings: the listener address, the API token (show, copy, regenerate), the host names the
// server answers to, the environment variables templates see as `env.NAME` (secret ones
// write-only), the outbound allowlist, retention, and the data directory (read-only).
//
// The form edits a copy of the loaded document and saves that copy (`model.ts`): the PUT
// replaces the whole document, so nothing the form does not show may be dropped.

import { X } from 'lucide-react';
import { useEffect, useRef, useState, type ReactNode } from 'react';
import { isTauri, storeToken, type SettingsView as View } from '../api';
import { useEditor } from '../store/editor';
import { ConnectionsCard } from './Connections';
import { changed, documentOf, ENV_NAME, formOf, isSecretRow, keepsStored, nextId, numOrUndef, placeOf, secretByName, type EnvRow, type ErrorPlace, type ListRow, type SettingsForm } from './model';

/** A server refusal placed on the field it names (`key`: see `keyOf`). */
interface ServerError {
  key: string;
  message: string;
}

const keyOf = (p: ErrorPlace) => ('rowId' in p ? `${p.field}:${p.rowId}` : p.field);

/** The names this page is always answered on (no `allowed_hosts` entry needed). */
const LOOPBACK = new Set(['localhost', '127.0.0.1', '[::1]']);

/** Whether an `allowed_hosts` entry lets the server answer this page (`name` any port, `name:port` that port). */
function entryMatchesPage(entry: string): boolean {
  const e = entry.trim().toLowerCase().replace(/\.(?=:|$)/, '');
  const host = window.location.hostname.toLowerCase();
  const port = window.location.port || (window.location.protocol === 'https:' ? '443' : '80');
  const [name, p] = e.startsWith('[') ? [e.slice(0, e.indexOf(']') + 1), e.slice(e.indexOf(']') + 2)] : [e.split(':')[0], e.split(':')[1] ?? ''];
  return name === host && (!p || p === port);
}

function hostProblem(v: string): string | null {
  const t = v.trim();
  if (!t) return null;
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(t)) return 'write only the name, without http:// or https://';
  if (/\s/.test(t)) return 'no spaces';
  if (t.includes('/')) return 'no path: only name or name:port';
  if (t.includes('*')) return 'no wildcards: list each name';
  if (t.includes('@')) return 'no user name: only name or name:port';
  if (!t.startsWith('[') && (t.match(/:/g) ?? []).length > 1) return 'an IPv6 address goes in brackets, e.g. [::1]:8787';
  const port = t.startsWith('[') ? t.slice(t.indexOf(']') + 1).replace(/^:/, '') : t.split(':').slice(1).join(':');
  if (port && !(/^\d{1,5}$/.test(port) && Number(port) <= 65535)) return 'the port must be a number up to 65535';
  return null;
}

function outboundProblem(v: string): string | null {
  const t = v.trim();
  if (!t) return null;
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(t)) return 'write only the host, IP or CIDR block, without http:// or https://';
  if (/\s/.test(t)) return 'no spaces';
  return null;
}

export function SettingsView() {
  const api = useEditor((s) => s.api)!;
  const notify = useEditor((s) => s.notify);
  const ask = useEditor((s) => s.ask);
  const [view, setView] = useState<View | null>(null);
  const [loadError, setLoadError] = useState<string | null>(null);
  const [form, setForm] = useState<SettingsForm | null>(null);
  const [saving, setSaving] = useState(false);
  const [serverError, setServerError] = useState<ServerError | null>(null);
  const [token, setToken] = useState<string | null>(null);
  const [tokenShown, setTokenShown] = useState(false);
  const bodyRef = useRef<HTMLDivElement>(null);

  const apply = (v: View) => {
    setView(v);
    setForm(formOf(v));
    setServerError(null);
  };

  useEffect(() => {
    api
      .getSettings()
      .then(apply)
      .catch((e: Error) => setLoadError(e.message));
  }, [api]);

  // A refusal placed on a field: show that field.
  useEffect(() => {
    if (!serverError || serverError.key === 'form') return;
    bodyRef.current?.querySelector(`[data-error-key="${serverError.key}"]`)?.scrollIntoView({ block: 'center', behavior: 'smooth' });
  }, [serverError]);

  if (loadError) return <div className="fx-empty fx-error-text">Cannot load the settings: {loadError}</div>;
  if (!view || !form) return <div className="fx-empty">Loading settings…</div>;

  /** Change the form; a server refusal of what `key` names is then stale. */
  const edit = (key: string, fn: (f: SettingsForm) => SettingsForm) => {
    setForm((f) => (f ? fn(f) : f));
    setServerError((e) => (e && e.key === key ? null : e));
  };
  const editRow = (id: number, patch: Partial<EnvRow>) => edit(`env:${id}`, (f) => ({ ...f, rows: f.rows.map((r) => (r.id === id ? { ...r, ...patch } : r)) }));
  const removeRow = (r: EnvRow) =>
    edit(`env:${r.id}`, (f) => ({
      ...f,
      rows: f.rows.filter((x) => x.id !== r.id),
      // A variable flagged secret stays flagged (a FLUXO_ENV_ process variable of that name is masked too); the list below can unflag it.
      otherSecrets: r.flagged && r.name.trim() && !f.otherSecrets.includes(r.name.trim()) ? [...f.otherSecrets, r.name.trim()] : f.otherSecrets,
    }));
  const serverErr = (key: string) => (serverError?.key === key ? serverError.message : null);

  const names = form.rows.map((r) => r.name.trim());
  const rowError = (r: EnvRow, i: number): string | null => {
    const n = r.name.trim();
    if (!n) return r.value || r.mask ? 'a name is needed' : null;
    if (!ENV_NAME.test(n)) return 'use A–Z, 0–9 and _ (not starting with a digit)';
    if (names.indexOf(n) !== i) return 'this name is used twice';
    if (keepsStored(r) && r.loadedName !== n) return `the stored secret stays with ${r.loadedName}: type the value again for ${n}`;
    return null;
  };
  const runsN = numOrUndef(form.retRuns);
  const daysN = numOrUndef(form.retDays);
  const runsErr = runsN !== undefined && (!Number.isInteger(runsN) || runsN < 1) ? 'a whole number, at least 1' : null;
  const daysErr = daysN !== undefined && (!Number.isInteger(daysN) || daysN < 1) ? 'a whole number of days, at least 1' : null;
  const listenerErr = form.listener.trim() && !/^(\[[0-9a-fA-F:.]+\]|[0-9.]+):\d{1,5}$/.test(form.listener.trim()) ? 'an address like 127.0.0.1:8787' : null;
  const invalid =
    !!runsErr ||
    !!daysErr ||
    !!listenerErr ||
    form.rows.some((r, i) => rowError(r, i)) ||
    form.hosts.some((r) => hostProblem(r.value)) ||
    form.outbound.some((r) => outboundProblem(r.value));

  const doc = documentOf(view.settings, form);
  const dirty = changed(view.settings, doc);

  // Reached through a name of allowed_hosts that the edit removes: the server would refuse this very page.
  const pageHost = window.location.hostname.toLowerCase();
  const pageNeedsEntry = !isTauri() && !LOOPBACK.has(pageHost) && !LOOPBACK.has(`[${pageHost}]`) && !/^[\d.]+$|^\[/.test(pageHost);
  const lockout = pageNeedsEntry && (view.settings.allowed_hosts ?? []).some(entryMatchesPage) && !(doc.allowed_hosts ?? []).some(entryMatchesPage);

  const save = async () => {
    if (lockout) {
      const ok = await ask({
        title: `Stop answering to ${window.location.host}?`,
        message: `This page is open at ${window.location.host}. Without it in "Allowed host names", the server refuses this page (421) as soon as the settings are saved; open Fluxo at its own address to add it back.`,
        confirmLabel: 'Save anyway',
        danger: true,
      });
      if (!ok) return;
    }
    setSaving(true);
    setServerError(null);
    try {
      apply(await api.saveSettings(doc));
      notify('ok', 'Settings saved');
    } catch (e) {
      const err = e as { code?: string; message: string };
      const place: ErrorPlace = err.code === 'invalid_settings' ? placeOf(err.message, form) : { field: 'form' };
      setServerError({ key: keyOf(place), message: err.message });
    } finally {
      setSaving(false);
    }
  };

  const showToken = async () => {
    if (tokenShown) {
      setTokenShown(false);
      return;
    }
    try {
      setToken(await api.getToken());
      setTokenShown(true);
    } catch (e) {
      notify('error', `Cannot read the token: ${(e as Error).message}`);
    }
  };

  const regenerate = async () => {
    const ok = await ask({
      title: 'Regenerate the API token?',
      message: 'The current token stops working at once: scripts and other browsers that use it must be given the new one. This page switches to the new token.',
      confirmLabel: 'Regenerate',
      danger: true,
    });
    if (!ok) return;
    try {
      const t = await api.regenerateToken();
      if (!isTauri()) storeToken(t);
      setToken(t);
      setTokenShown(true);
      notify('ok', 'New API token in use');
    } catch (e) {
      notify('error', `Not regenerated: ${(e as Error).message}`);
    }
  };

  const footError = serverError && (serverError.key === 'form' ? serverError.message : 'Not saved: see the message in red above.');

  return (
    <div className="fx-settings" data-testid="settings-view">
      <div className="fx-settings-body" ref={bodyRef}>
        <section className="fx-card">
          <h3>Listener</h3>
          <label className="control-label" htmlFor="set-listener">
            Address of the desktop app's local listener
          </label>
          <input
            id="set-listener"
            className={`fx-input fx-mono ${listenerErr || serverErr('listener') ? 'is-invalid' : ''}`}
            placeholder="127.0.0.1:8787"
            value={form.listener}
            onChange={(e) => edit('listener', (f) => ({ ...f, listener: e.target.value }))}
            data-testid="settings-listener"
            data-error-key="listener"
          />
          <ListeningNow />
          {isTauri() && (
            <label className="fx-check-row" data-testid="settings-sandbox">
              <input
                type="checkbox"
                checked={form.sandbox}
                onChange={(e) => edit('sandbox', (f) => ({ ...f, sandbox: e.target.checked }))}
              />{' '}
              Run the sandbox destination while the app is open: the templates' variables (<code>env.CRM_URL</code>, …) point at
              it unless set below, so they run end to end. From the next start.
            </label>
          )}
          {listenerErr || serverErr('listener') ? (
            <div className="fx-field-errors">{listenerErr ?? serverErr('listener')}</div>
          ) : (
            <p className="fx-help">
              Used by the desktop app from its next start; <code>fluxo serve</code> listens on its <code>--addr</code>.
            </p>
          )}
        </section>

        <section className="fx-card">
          <h3>API token</h3>
          <p className="fx-help">
            Management routes (<code>/api/v1/…</code>) need <code>Authorization: Bearer &lt;token&gt;</code>.
          </p>
          <div className="fx-row">
            <input className="fx-input fx-mono" readOnly value={tokenShown && token ? token : '••••••••••••••••••••••••'} data-testid="settings-token" aria-label="API token" />
            <button className="fx-btn fx-btn-small" onClick={() => void showToken()} data-testid="settings-token-show">
              {tokenShown ? 'Hide' : 'Show'}
            </button>
            <button className="fx-btn fx-btn-small" disabled={!tokenShown || !token} onClick={() => token && void navigator.clipboard?.writeText(token).then(() => notify('ok', 'Token copied'))}>
              Copy
            </button>
            <button className="fx-btn fx-btn-small fx-btn-danger" onClick={() => void regenerate()} data-testid="settings-token-regenerate">
              Regenerate
            </button>
          </div>
        </section>

        <ListCard
          title="Allowed host names"
          testId="settings-hosts"
          rows={form.hosts}
          placeholder="fluxo.example.com"
          addLabel="+ Add host name"
          problem={hostProblem}
          serverErr={(id) => serverErr(`hosts:${id}`)}
          errorKey={(id) => `hosts:${id}`}
          onChange={(rows, key) => edit(key, (f) => ({ ...f, hosts: rows }))}
          help={
            <>
              <p className="fx-help">
                The server answers only to its own address (<code>localhost</code>, <code>127.0.0.1</code>, the address it listens on) and to the names
                listed here; any other name gets 421. This stops web pages from reaching Fluxo through a look-alike domain (DNS rebinding).
              </p>
              <p className="fx-help">
                Behind a reverse proxy or a tunnel, add its public name: <code>name</code> (any port) or <code>name:port</code>, e.g.{' '}
                <code>fluxo.example.com</code>.
              </p>
            </>
          }
          after={
            lockout && (
              <div className="fx-field-warn" data-testid="hosts-lockout">
                This page is open at <code>{window.location.host}</code>: without it in the list, the server will refuse this page once saved.
              </div>
            )
          }
        />

        <ConnectionsCard />

        <section className="fx-card">
          <h3>Environment variables</h3>
          <p className="fx-help">
            Templates see them as <code>{'{{ env.NAME }}'}</code>. They win over <code>FLUXO_ENV_NAME</code> process variables; nothing else of the
            process environment is visible.
          </p>
          <p className="fx-help">
            <strong>Secret</strong> values (API keys, passwords, webhook URLs with a key in them) are never shown again once saved, and are masked in
            run records. A name containing <code>KEY</code>, <code>TOKEN</code>, <code>SECRET</code>, <code>PASSWORD</code>, <code>AUTH</code>… is
            secret anyway; tick <em>Secret</em> for any other, such as <code>SLACK_WEBHOOK_URL</code>. Leave a stored secret empty to keep it; type
            to replace it.
          </p>
          {form.rows.length > 0 && (
            <div className="fx-env-row fx-env-head" aria-hidden>
              <span>Name</span>
              <span>Value</span>
              <span>Secret</span>
              <span />
            </div>
          )}
          <div className="fx-env-rows" data-testid="settings-env">
            {form.rows.map((r, i) => {
              const err = rowError(r, i) ?? serverErr(`env:${r.id}`);
              const secret = isSecretRow(r);
              const byName = secretByName(r.name.trim());
              const replacing = r.mask !== undefined && r.value !== '';
              return (
                <div key={r.id} className="fx-env-row" data-testid="env-row" data-secret={secret ? 'true' : 'false'} data-error-key={`env:${r.id}`}>
                  <input
                    className={`fx-input fx-mono ${rowError(r, i) ? 'is-invalid' : ''}`}
                    placeholder="NAME"
                    value={r.name}
                    onChange={(e) => editRow(r.id, { name: e.target.value.toUpperCase() })}
                    data-testid="env-name"
                    aria-label="Variable name"
                  />
                  <input
                    className={`fx-input fx-mono ${serverErr(`env:${r.id}`) ? 'is-invalid' : ''}`}
                    type={secret ? 'password' : 'text'}
                    autoComplete={secret ? 'new-password' : 'off'}
                    placeholder={r.mask !== undefined ? `${r.mask}  stored · type to replace` : secret ? 'value (hidden once saved)' : 'value'}
                    value={r.value}
                    onChange={(e) => editRow(r.id, { value: e.target.value })}
                    data-testid="env-value"
                    aria-label={r.mask !== undefined ? `Value of ${r.name} (stored secret ${r.mask}; type to replace)` : 'Value'}
                  />
                  <label
                    className="fx-env-secret"
                    title={
                      byName && !r.flagged
                        ? 'Secret by its name (it contains KEY, TOKEN, SECRET, PASSWORD, AUTH…)'
                        : 'Secret: the value is never shown again once saved, and is masked in run records'
                    }
                  >
                    <input
                      type="checkbox"
                      checked={r.flagged || byName}
                      disabled={byName && !r.flagged}
                      onChange={(e) => editRow(r.id, { flagged: e.target.checked })}
                      data-testid="env-secret"
                      aria-label={`${r.name || 'Variable'} is secret`}
                    />
                  </label>
                  <button className="fx-icon-btn" onClick={() => removeRow(r)} title="Remove" aria-label={`Remove ${r.name || 'variable'}`} data-testid="env-remove">
                    <X size={15} aria-hidden />
                  </button>
                  {err && (
                    <div className="fx-field-errors fx-env-err" data-testid="env-error">
                      {err}
                    </div>
                  )}
                  {replacing && (
                    <div className="fx-env-note">
                      Replaces the stored value ({r.mask}) when saved.{' '}
                      <button className="fx-link-btn" onClick={() => editRow(r.id, { value: '' })} data-testid="env-keep">
                        Keep the stored value
                      </button>
                    </div>
                  )}
                </div>
              );
            })}
          </div>
          <button className="fx-btn fx-btn-small" onClick={() => edit('env', (f) => ({ ...f, rows: [...f.rows, { id: nextId(), name: '', value: '', flagged: false }] }))} data-testid="env-add">
            + Add variable
          </button>
          {form.otherSecrets.length > 0 && (
            <div className="fx-other-secrets" data-testid="other-secrets">
              <span className="fx-help">Also treated as secret (no value here, e.g. a <code>FLUXO_ENV_</code> process variable):</span>
              {form.otherSecrets.map((n) => (
                <span key={n} className="fx-chip">
                  <code>{n}</code>
                  <button className="fx-icon-btn" title={`Stop treating ${n} as secret`} aria-label={`Stop treating ${n} as secret`} onClick={() => edit('env', (f) => ({ ...f, otherSecrets: f.otherSecrets.filter((x) => x !== n) }))}>
                    <X size={15} aria-hidden />
                  </button>
                </span>
              ))}
            </div>
          )}
        </section>

        <ListCard
          title="Outbound allowlist"
          testId="settings-outbound"
          rows={form.outbound}
          placeholder="crm.internal, 10.0.0.0/8"
          addLabel="+ Add destination"
          problem={outboundProblem}
          serverErr={(id) => serverErr(`outbound:${id}`)}
          errorKey={(id) => `outbound:${id}`}
          onChange={(rows, key) => edit(key, (f) => ({ ...f, outbound: rows }))}
          help={
            <p className="fx-help">
              A step with <em>Allow input host</em> on may call a host taken from the event (e.g. <code>{'{{ input.callback_url }}'}</code>); Fluxo refuses
              such a call when the host is private: this machine, the local network, a cloud metadata address. List here the private destinations those
              steps may still reach: a host name (<code>crm.internal</code>), an IP (<code>127.0.0.1</code>) or a block (<code>10.0.0.0/8</code>), on every
              port, or with <code>:port</code> on that port only (<code>127.0.0.1:9000</code>, <code>[::1]:9000</code>). Hosts written in a workflow or
              taken from env variables need no entry.
            </p>
          }
        />

        <section className="fx-card">
          <h3>Retention</h3>
          <p className="fx-help">
            Finished runs beyond these limits are pruned (at start, then every minute); queued and running runs never are. Empty = the server's
            default. In force now:{' '}
            <strong data-testid="settings-effective">
              {view.effective.retention_runs ? `${view.effective.retention_runs.toLocaleString('en-US')} runs per workflow` : 'no run limit'}
              {' · '}
              {view.effective.retention_days ? `${view.effective.retention_days} days` : 'no age limit'}
            </strong>
          </p>
          <div className="fx-settings-grid">
            <label className="control-label" htmlFor="set-ret-runs">
              Runs kept per workflow
            </label>
            <input
              id="set-ret-runs"
              className={`fx-input ${runsErr || serverErr('retRuns') ? 'is-invalid' : ''}`}
              inputMode="numeric"
              placeholder="10000"
              value={form.retRuns}
              onChange={(e) => edit('retRuns', (f) => ({ ...f, retRuns: e.target.value }))}
              data-testid="settings-retention-runs"
              data-error-key="retRuns"
            />
            <label className="control-label" htmlFor="set-ret-days">
              Days kept
            </label>
            <input
              id="set-ret-days"
              className={`fx-input ${daysErr || serverErr('retDays') ? 'is-invalid' : ''}`}
              inputMode="numeric"
              placeholder="no limit"
              value={form.retDays}
              onChange={(e) => edit('retDays', (f) => ({ ...f, retDays: e.target.value }))}
              data-testid="settings-retention-days"
              data-error-key="retDays"
            />
          </div>
          {(runsErr || daysErr || serverErr('retRuns') || serverErr('retDays')) && (
            <div className="fx-field-errors">{runsErr ?? daysErr ?? serverErr('retRuns') ?? serverErr('retDays')}</div>
          )}
        </section>

        <section className="fx-card">
          <h3>Data</h3>
          <div className="fx-settings-grid">
            <label className="control-label" htmlFor="settings-data-dir">
              Data directory
            </label>
            <input id="settings-data-dir" className="fx-input fx-mono" readOnly value={view.data_dir ?? '(in memory)'} data-testid="settings-data-dir" />
            <label className="control-label" htmlFor="settings-workflows-dir">
              Workflows folder
            </label>
            <input id="settings-workflows-dir" className="fx-input fx-mono" readOnly value={view.workflows_dir ?? ''} />
          </div>
        </section>
      </div>
      <div className="fx-settings-foot">
        {footError ? (
          <span className="fx-error-text" data-testid="settings-error">
            {footError}
          </span>
        ) : dirty && invalid ? (
          <span className="fx-warning-text" data-testid="settings-invalid">
            Fix the fields marked in red to save.
          </span>
        ) : (
          dirty && <span className="fx-muted-2">Unsaved changes.</span>
        )}
        <span className="fx-spacer" />
        <button className="fx-btn" onClick={() => apply(view)} disabled={!dirty || saving} data-testid="settings-revert">
          Revert
        </button>
        <button className="fx-btn fx-btn-primary" onClick={() => void save()} disabled={!dirty || invalid || saving} data-testid="settings-save">
          {saving ? 'Saving…' : 'Save settings'}
        </button>
      </div>
    </div>
  );
}

/** A card that edits a list of strings, one input per entry. */
function ListCard(props: {
  title: string;
  testId: string;
  help: ReactNode;
  rows: ListRow[];
  placeholder: string;
  addLabel: string;
  problem: (v: string) => string | null;
  serverErr: (id: number) => string | null;
  errorKey: (id: number) => string;
  onChange: (rows: ListRow[], key: string) => void;
  after?: ReactNode;
}) {
  const { rows, onChange } = props;
  return (
    <section className="fx-card" data-testid={props.testId}>
      <h3>{props.title}</h3>
      {props.help}
      <div className="fx-list-rows">
        {rows.map((r) => {
          const err = props.problem(r.value) ?? props.serverErr(r.id);
          return (
            <div key={r.id} className="fx-list-row" data-testid="list-row" data-error-key={props.errorKey(r.id)}>
              <input
                className={`fx-input fx-mono ${err ? 'is-invalid' : ''}`}
                placeholder={props.placeholder}
                value={r.value}
                onChange={(e) =>
                  onChange(
                    rows.map((x) => (x.id === r.id ? { ...x, value: e.target.value } : x)),
                    props.errorKey(r.id),
                  )
                }
                data-testid="list-value"
                aria-label={`${props.title}: entry`}
              />
              <button
                className="fx-icon-btn"
                onClick={() =>
                  onChange(
                    rows.filter((x) => x.id !== r.id),
                    props.errorKey(r.id),
                  )
                }
                title="Remove"
                aria-label={`Remove ${r.value || 'entry'}`}
                data-testid="list-remove"
              >
                <X size={15} aria-hidden />
              </button>
              {err && (
                <div className="fx-field-errors fx-env-err" data-testid="list-error">
                  {err}
                </div>
              )}
            </div>
          );
        })}
      </div>
      {props.after}
      <button className="fx-btn fx-btn-small" onClick={() => onChange([...rows, { id: nextId(), value: '' }], '')} data-testid="list-add">
        {props.addLabel}
      </button>
    </section>
  );
}

/** Where webhooks reach this app or server now (which may differ from the saved address: the
 * desktop's FLUXO_DESKTOP_PORT, or `fluxo serve --addr`). */
function ListeningNow() {
  const api = useEditor((s) => s.api);
  const [now, setNow] = useState<string | null>(null);
  useEffect(() => {
    let live = true;
    api?.webhookBase().then(
      (b) => live && setNow(b.replace(/\/hooks$/, '')),
      () => live && setNow(null),
    );
    return () => {
      live = false;
    };
  }, [api]);
  if (!now) return null;
  return (
    <p className="fx-help" data-testid="settings-listening-now">
      Listening now on <code>{now}</code> (webhooks: <code>POST {now}/hooks/&lt;workflow id&gt;</code>).
    </p>
  );
}
