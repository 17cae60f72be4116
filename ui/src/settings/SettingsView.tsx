// Settings: the listener address, the API token (show, copy, regenerate), retention, the
// environment variables templates see as `env.NAME`, and the data directory (read-only).

import { useEffect, useState } from 'react';
import { isTauri, storeToken, type AppSettings, type SettingsView as View } from '../api';
import { useEditor } from '../store/editor';

const ENV_NAME = /^[A-Z_][A-Z0-9_]*$/;

interface EnvRow {
  id: number;
  name: string;
  value: string;
}

let rowSeq = 0;
const rowsOf = (env: Record<string, string>): EnvRow[] => Object.entries(env).map(([name, value]) => ({ id: ++rowSeq, name, value }));

function numOrUndef(s: string): number | undefined {
  const t = s.trim();
  if (!t) return undefined;
  const n = Number(t);
  return Number.isFinite(n) ? n : NaN;
}

export function SettingsView() {
  const api = useEditor((s) => s.api)!;
  const notify = useEditor((s) => s.notify);
  const ask = useEditor((s) => s.ask);
  const [view, setView] = useState<View | null>(null);
  const [loadError, setLoadError] = useState<string | null>(null);
  const [listener, setListener] = useState('');
  const [retRuns, setRetRuns] = useState('');
  const [retDays, setRetDays] = useState('');
  const [rows, setRows] = useState<EnvRow[]>([]);
  const [saving, setSaving] = useState(false);
  const [saveError, setSaveError] = useState<string | null>(null);
  const [token, setToken] = useState<string | null>(null);
  const [tokenShown, setTokenShown] = useState(false);

  const apply = (v: View) => {
    setView(v);
    setListener(v.settings.listener_addr ?? '');
    setRetRuns(v.settings.retention_runs?.toString() ?? '');
    setRetDays(v.settings.retention_days?.toString() ?? '');
    setRows(rowsOf(v.settings.env ?? {}));
  };

  useEffect(() => {
    api
      .getSettings()
      .then(apply)
      .catch((e: Error) => setLoadError(e.message));
  }, [api]);

  const names = rows.map((r) => r.name.trim());
  const rowError = (r: EnvRow, i: number): string | null => {
    const n = r.name.trim();
    if (!n) return r.value ? 'a name is needed' : null;
    if (!ENV_NAME.test(n)) return 'use A–Z, 0–9 and _ (not starting with a digit)';
    if (names.indexOf(n) !== i) return 'this name is used twice';
    return null;
  };
  const runsN = numOrUndef(retRuns);
  const daysN = numOrUndef(retDays);
  const runsErr = runsN !== undefined && (!Number.isInteger(runsN) || runsN < 1) ? 'a whole number, at least 1' : null;
  const daysErr = daysN !== undefined && (!Number.isInteger(daysN) || daysN < 1) ? 'a whole number of days, at least 1' : null;
  const listenerErr = listener.trim() && !/^(\[[0-9a-fA-F:.]+\]|[0-9.]+):\d{1,5}$/.test(listener.trim()) ? 'an address like 127.0.0.1:8787' : null;
  const invalid = !!runsErr || !!daysErr || !!listenerErr || rows.some((r, i) => rowError(r, i));

  const settingsNow = (): AppSettings => {
    const env: Record<string, string> = {};
    for (const r of rows) if (r.name.trim()) env[r.name.trim()] = r.value;
    const s: AppSettings = { env };
    if (runsN !== undefined) s.retention_runs = runsN;
    if (daysN !== undefined) s.retention_days = daysN;
    if (listener.trim()) s.listener_addr = listener.trim();
    return s;
  };
  const dirty = view !== null && JSON.stringify(settingsNow()) !== JSON.stringify({ ...view.settings, env: view.settings.env ?? {} });

  const save = async () => {
    setSaving(true);
    setSaveError(null);
    try {
      apply(await api.saveSettings(settingsNow()));
      notify('ok', 'Settings saved');
    } catch (e) {
      setSaveError((e as Error).message);
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

  if (loadError) return <div className="fx-empty fx-error-text">Cannot load the settings: {loadError}</div>;
  if (!view) return <div className="fx-empty">Loading settings…</div>;

  return (
    <div className="fx-settings" data-testid="settings-view">
      <div className="fx-settings-body">
        <section className="fx-card">
          <h3>Listener</h3>
          <label className="control-label" htmlFor="set-listener">
            Address of the desktop app's local listener
          </label>
          <input
            id="set-listener"
            className={`fx-input fx-mono ${listenerErr ? 'is-invalid' : ''}`}
            placeholder="127.0.0.1:8787"
            value={listener}
            onChange={(e) => setListener(e.target.value)}
            data-testid="settings-listener"
          />
          {listenerErr ? <div className="fx-field-errors">{listenerErr}</div> : <p className="field-description">Used by the desktop app from its next start; <code>fluxo serve</code> listens on its <code>--addr</code>.</p>}
        </section>

        <section className="fx-card">
          <h3>API token</h3>
          <p className="field-description">
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

        <section className="fx-card">
          <h3>Retention</h3>
          <p className="field-description">
            Finished runs beyond these limits are pruned (at start, then every minute); queued and running runs never are. Empty = the
            server's default. In force now:{' '}
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
            <input id="set-ret-runs" className={`fx-input ${runsErr ? 'is-invalid' : ''}`} inputMode="numeric" placeholder="10000" value={retRuns} onChange={(e) => setRetRuns(e.target.value)} data-testid="settings-retention-runs" />
            <label className="control-label" htmlFor="set-ret-days">
              Days kept
            </label>
            <input id="set-ret-days" className={`fx-input ${daysErr ? 'is-invalid' : ''}`} inputMode="numeric" placeholder="no limit" value={retDays} onChange={(e) => setRetDays(e.target.value)} data-testid="settings-retention-days" />
          </div>
          {(runsErr || daysErr) && <div className="fx-field-errors">{runsErr ?? daysErr}</div>}
        </section>

        <section className="fx-card">
          <h3>Environment variables</h3>
          <p className="field-description">
            Templates see them as <code>{'{{ env.NAME }}'}</code>. They win over <code>FLUXO_ENV_NAME</code> process variables; nothing else of the
            process environment is visible.
          </p>
          <div className="fx-env-rows" data-testid="settings-env">
            {rows.map((r, i) => {
              const err = rowError(r, i);
              return (
                <div key={r.id} className="fx-env-row" data-testid="env-row">
                  <input
                    className={`fx-input fx-mono ${err ? 'is-invalid' : ''}`}
                    placeholder="NAME"
                    value={r.name}
                    onChange={(e) => setRows((cur) => cur.map((x) => (x.id === r.id ? { ...x, name: e.target.value.toUpperCase() } : x)))}
                    data-testid="env-name"
                    aria-label="Variable name"
                  />
                  <input
                    className="fx-input fx-mono"
                    placeholder="value"
                    value={r.value}
                    onChange={(e) => setRows((cur) => cur.map((x) => (x.id === r.id ? { ...x, value: e.target.value } : x)))}
                    data-testid="env-value"
                    aria-label="Value"
                  />
                  <button className="fx-icon-btn" onClick={() => setRows((cur) => cur.filter((x) => x.id !== r.id))} title="Remove" data-testid="env-remove">
                    ✕
                  </button>
                  {err && <div className="fx-field-errors fx-env-err">{err}</div>}
                </div>
              );
            })}
          </div>
          <button className="fx-btn fx-btn-small" onClick={() => setRows((cur) => [...cur, { id: ++rowSeq, name: '', value: '' }])} data-testid="env-add">
            + Add variable
          </button>
        </section>

        <section className="fx-card">
          <h3>Data</h3>
          <div className="fx-settings-grid">
            <label className="control-label">Data directory</label>
            <input className="fx-input fx-mono" readOnly value={view.data_dir ?? '(in memory)'} data-testid="settings-data-dir" />
            <label className="control-label">Workflows folder</label>
            <input className="fx-input fx-mono" readOnly value={view.workflows_dir ?? ''} />
          </div>
        </section>
      </div>
      <div className="fx-settings-foot">
        {saveError && <span className="fx-error-text" data-testid="settings-error">{saveError}</span>}
        <span className="fx-spacer" />
        <button className="fx-btn" onClick={() => apply(view)} disabled={!dirty || saving}>
          Revert
        </button>
        <button className="fx-btn fx-btn-primary" onClick={() => void save()} disabled={!dirty || invalid || saving} data-testid="settings-save">
          {saving ? 'Saving…' : 'Save settings'}
        </button>
      </div>
    </div>
  );
}
