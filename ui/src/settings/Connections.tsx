import { useEffect, useState } from 'react';
import type { ConnectionView } from '../api';
import { useEditor } from '../store/editor';

/** A credential as shown: its kind and its (masked) fields. */
function credentialText(c: ConnectionView['credential']): string {
  const fields = Object.entries(c as Record<string, unknown>)
    .filter(([k]) => k !== 'kind')
    .map(([k, v]) => `${k}=${String(v)}`);
  return `${(c as { kind: string }).kind} ${fields.join(' ')}`;
}

/**
 * Settings → Connections: the accounts app actions act as, kept apart from workflows and
 * settings, encrypted at rest; their secrets are shown masked and never come back.
 */
export function ConnectionsCard() {
  const api = useEditor((s) => s.api);
  const connectors = useEditor((s) => s.connectors);
  const [list, setList] = useState<ConnectionView[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [id, setId] = useState('');
  const [app, setApp] = useState('');
  const [kind, setKind] = useState('bearer');
  const [secret, setSecret] = useState('');
  const [username, setUsername] = useState('');
  const [baseUrl, setBaseUrl] = useState('');
  const [busy, setBusy] = useState(false);

  const refreshConnections = useEditor((s) => s.refreshConnections);
  const reload = async () => {
    if (!api) return;
    void refreshConnections();
    try {
      setList(await api.listConnections());
    } catch (e) {
      setError((e as Error).message);
    }
  };
  useEffect(() => {
    void reload();
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [api]);

  const connector = connectors.find((c) => c.app === app);
  // OAuth connects through a browser flow (not built yet): paste-a-secret kinds only.
  const kinds = (connector?.auth ?? []).filter((a) => a.kind !== 'oauth2');
  useEffect(() => {
    if (connector && !kinds.some((k) => k.kind === kind)) setKind(kinds[0]?.kind ?? 'bearer');
    if (connector && !id) setId(`${connector.app.replace(/_/g, '-')}-main`);
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [app]);
  const help = kinds.find((k) => k.kind === kind)?.help;

  const save = async () => {
    if (!api) return;
    setBusy(true);
    setError(null);
    const credential =
      kind === 'basic'
        ? { kind, username, password: secret }
        : kind === 'webhook_url'
          ? { kind, url: secret }
          : { kind, token: secret };
    try {
      await api.putConnection(id.trim(), {
        app,
        name: connector?.title ?? app,
        credential: credential as ConnectionView['credential'],
        base_url: baseUrl.trim() || null,
      });
      setSecret('');
      setUsername('');
      await reload();
    } catch (e) {
      setError((e as Error).message);
    } finally {
      setBusy(false);
    }
  };

  const remove = async (cid: string) => {
    if (!api) return;
    try {
      await api.deleteConnection(cid);
      await reload();
    } catch (e) {
      setError((e as Error).message);
    }
  };

  return (
    <section className="fx-card" data-testid="settings-connections">
      <h3>Connections</h3>
      <p className="fx-help">
        The accounts App actions act as (HubSpot, Stripe, Slack, Google Sheets). Stored encrypted, apart from workflows; a secret is
        never shown again, only its last characters.
      </p>
      {list === null ? (
        <p className="fx-muted">Loading…</p>
      ) : list.length === 0 ? (
        <p className="fx-muted" data-testid="connections-empty">
          No connection yet: add one below, then pick it in an App action step.
        </p>
      ) : (
        <table className="fx-table" data-testid="connections-list">
          <thead>
            <tr>
              <th>Id</th>
              <th>App</th>
              <th>Credential</th>
              <th>Base URL</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {list.map((c) => (
              <tr key={c.id} data-testid={`connection-${c.id}`}>
                <td className="fx-mono">{c.id}</td>
                <td>{connectors.find((k) => k.app === c.app)?.title ?? c.app}</td>
                <td className="fx-mono">{credentialText(c.credential)}</td>
                <td className="fx-mono">{c.base_url ?? <span className="fx-muted">the app&apos;s</span>}</td>
                <td>
                  <button type="button" className="fx-btn fx-btn-small fx-btn-danger" onClick={() => void remove(c.id)} data-testid={`connection-remove-${c.id}`}>
                    Remove
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <div className="fx-connection-form" data-testid="connection-form">
        <label className="control-label" htmlFor="conn-app">App</label>
        <select id="conn-app" className="fx-input" value={app} onChange={(e) => setApp(e.target.value)} data-testid="connection-app">
          <option value="">Choose an app…</option>
          {connectors.map((c) => (
            <option key={c.app} value={c.app}>
              {c.title}
            </option>
          ))}
        </select>
        {connector && (
          <>
            <label className="control-label" htmlFor="conn-id">Connection id</label>
            <input id="conn-id" className="fx-input fx-mono" value={id} onChange={(e) => setId(e.target.value)} data-testid="connection-id" />
            <label className="control-label" htmlFor="conn-kind">Credential</label>
            <select id="conn-kind" className="fx-input" value={kind} onChange={(e) => setKind(e.target.value)} data-testid="connection-kind">
              {kinds.map((k) => (
                <option key={k.kind} value={k.kind}>
                  {k.title}
                </option>
              ))}
            </select>
            {help && <div className="field-description">{help}</div>}
            {kind === 'basic' && (
              <>
                <label className="control-label" htmlFor="conn-user">User name</label>
                <input id="conn-user" className="fx-input" value={username} onChange={(e) => setUsername(e.target.value)} />
              </>
            )}
            <label className="control-label" htmlFor="conn-secret">{kind === 'webhook_url' ? 'Webhook URL' : kind === 'basic' ? 'Password' : 'Token'}</label>
            <input
              id="conn-secret"
              className="fx-input fx-mono"
              type="password"
              autoComplete="off"
              value={secret}
              onChange={(e) => setSecret(e.target.value)}
              data-testid="connection-secret"
            />
            <label className="control-label" htmlFor="conn-base">Base URL (optional)</label>
            <input
              id="conn-base"
              className="fx-input fx-mono"
              value={baseUrl}
              placeholder="the app's own; a sandbox fake: http://127.0.0.1:8788/hubspot"
              onChange={(e) => setBaseUrl(e.target.value)}
              data-testid="connection-base-url"
            />
            <button
              type="button"
              className="fx-btn fx-btn-primary"
              disabled={busy || !id.trim() || !secret}
              onClick={() => void save()}
              data-testid="connection-save"
            >
              Save connection
            </button>
          </>
        )}
        {error && (
          <div className="fx-error-text" data-testid="connection-error">
            {error}
          </div>
        )}
      </div>
    </section>
  );
}
