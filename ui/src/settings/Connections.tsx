import { useEffect, useRef, useState } from 'react';
import { useNav } from '../app/nav';
import type { ConnectionTest, ConnectionView } from '../api';
import { useEditor } from '../store/editor';

/** A credential as shown: its kind and its (masked) fields. */
function credentialText(c: ConnectionView['credential']): string {
  const fields = Object.entries(c as Record<string, unknown>)
    .filter(([k]) => k !== 'kind')
    .map(([k, v]) => `${k}=${String(v)}`);
  return `${(c as { kind: string }).kind} ${fields.join(' ')}`;
}

/**
 * The sandbox's OAuth endpoints for a base URL on this machine (`http://127.0.0.1:8788/hubspot`
 * → `http://127.0.0.1:8788/oauth/authorize`, `…/oauth/token`: `fluxo sandbox` serves one fake
 * OAuth server for every app), or null for any other host (the app's own endpoints apply).
 */
export function sandboxOAuthUrls(baseUrl: string): { authorize: string; token: string } | null {
  try {
    const u = new URL(baseUrl.trim());
    if (!['127.0.0.1', 'localhost', '[::1]'].includes(u.hostname)) return null;
    return { authorize: `${u.origin}/oauth/authorize`, token: `${u.origin}/oauth/token` };
  } catch {
    return null;
  }
}

/**
 * Settings → Connections: the accounts app actions act as, kept apart from workflows and
 * settings, encrypted at rest; their secrets are shown masked and never come back.
 */
export function ConnectionsCard() {
  const api = useEditor((s) => s.api);
  const connectors = useEditor((s) => s.connectors);
  const [list, setList] = useState<ConnectionView[] | null>(null);
  const [keySource, setKeySource] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [id, setId] = useState('');
  const [app, setApp] = useState('');
  const [kind, setKind] = useState('bearer');
  const [secret, setSecret] = useState('');
  const [username, setUsername] = useState('');
  const [baseUrl, setBaseUrl] = useState('');
  const [busy, setBusy] = useState(false);
  const [mode, setMode] = useState<'oauth' | 'paste'>('paste');
  const [clientId, setClientId] = useState('');
  const [clientSecret, setClientSecret] = useState('');
  const [authorizeUrl, setAuthorizeUrl] = useState('');
  const [tokenUrl, setTokenUrl] = useState('');
  const [flow, setFlow] = useState<{ state: string; url: string; title: string } | null>(null);
  const [flowMessage, setFlowMessage] = useState<{ ok: boolean; text: string } | null>(null);
  const [tests, setTests] = useState<Record<string, ConnectionTest | 'testing'>>({});
  const poll = useRef<number | null>(null);
  useEffect(() => () => {
    if (poll.current !== null) window.clearInterval(poll.current);
  }, []);

  const refreshConnections = useEditor((s) => s.refreshConnections);
  const reload = async () => {
    if (!api) return;
    void refreshConnections();
    try {
      setList(await api.listConnections());
      if (api.connectionsKeySource) setKeySource(await api.connectionsKeySource());
    } catch (e) {
      setError((e as Error).message);
    }
  };
  useEffect(() => {
    void reload();
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [api]);

  // "Connect …" from an app step's inspector: the form opens on that app and id.
  const connectTo = useNav((s) => s.connectTo);
  const pendingId = useRef<string | null>(null);
  const card = useRef<HTMLElement | null>(null);
  useEffect(() => {
    if (!connectTo || !connectors.some((c) => c.app === connectTo.app)) return;
    pendingId.current = connectTo.id;
    if (app === connectTo.app) setId(connectTo.id);
    else setApp(connectTo.app);
    useNav.setState({ connectTo: null });
    card.current?.scrollIntoView({ block: 'start' });
    // Keyboard users land in the form, not at the top of the page.
    card.current?.querySelector<HTMLSelectElement>('[data-testid="connection-app"]')?.focus();
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [connectTo, connectors]);

  const connector = connectors.find((c) => c.app === app);
  // OAuth connects through the browser ("Connect with …"); the other kinds are pasted.
  const oauth = (connector?.auth ?? []).find((a) => a.kind === 'oauth2');
  const kinds = (connector?.auth ?? []).filter((a) => a.kind !== 'oauth2');
  useEffect(() => {
    if (connector && !kinds.some((k) => k.kind === kind)) setKind(kinds[0]?.kind ?? 'bearer');
    // The default id follows the app (unless one was typed), or is the one a step asked for.
    if (connector && pendingId.current) {
      setId(pendingId.current);
      pendingId.current = null;
    } else if (connector && (!id || /-main$/.test(id))) setId(`${connector.app.replace(/_/g, '-')}-main`);
    setBaseUrl('');
    setFlowMessage(null);
    // The connector's first (preferred) kind decides which path shows first.
    setMode(connector?.auth[0]?.kind === 'oauth2' ? 'oauth' : 'paste');
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [app]);
  // A base URL on this machine is a sandbox fake: its OAuth endpoints are the sandbox's.
  useEffect(() => {
    const derived = sandboxOAuthUrls(baseUrl);
    setAuthorizeUrl(derived?.authorize ?? '');
    setTokenUrl(derived?.token ?? '');
  }, [baseUrl]);

  const stopPolling = () => {
    if (poll.current !== null) window.clearInterval(poll.current);
    poll.current = null;
  };

  const connectOAuth = async () => {
    if (!api || !connector) return;
    setBusy(true);
    setError(null);
    setFlowMessage(null);
    stopPolling();
    // Opened now, in the click, so a popup blocker lets it through; it goes to the app's page
    // once the flow has started (the desktop app opens the system browser itself).
    const win = api.transport === 'http' ? window.open('', '_blank') : null;
    try {
      const started = await api.startOAuth({
        app: connector.app,
        id: id.trim(),
        name: connector.title,
        client_id: clientId.trim(),
        client_secret: clientSecret || null,
        base_url: baseUrl.trim() || null,
        authorize_url: authorizeUrl.trim() || null,
        token_url: tokenUrl.trim() || null,
      });
      if (win) win.location.href = started.authorize_url;
      setFlow({ state: started.state, url: started.authorize_url, title: connector.title });
      const started_at = Date.now();
      poll.current = window.setInterval(() => {
        void (async () => {
          try {
            const f = await api.oauthStatus(started.state);
            if (f.state === 'connected') {
              stopPolling();
              setFlow(null);
              setFlowMessage({ ok: true, text: `Connected ${connector.title} as ${f.id}.` });
              setClientSecret('');
              await reload();
            } else if (f.state === 'failed') {
              stopPolling();
              setFlow(null);
              setFlowMessage({ ok: false, text: f.message ?? 'The connection failed.' });
            } else if (Date.now() - started_at > 10 * 60 * 1000) {
              stopPolling();
              setFlow(null);
              setFlowMessage({ ok: false, text: 'Nothing came back within 10 minutes: connect again.' });
            }
          } catch (e) {
            stopPolling();
            setFlow(null);
            setFlowMessage({ ok: false, text: (e as Error).message });
          }
        })();
      }, 700);
    } catch (e) {
      win?.close();
      setError((e as Error).message);
    } finally {
      setBusy(false);
    }
  };

  const test = async (cid: string) => {
    if (!api) return;
    setTests((t) => ({ ...t, [cid]: 'testing' }));
    try {
      const r = await api.testConnection(cid);
      setTests((t) => ({ ...t, [cid]: r }));
    } catch (e) {
      setTests((t) => ({ ...t, [cid]: { ok: false, status: null, message: (e as Error).message } }));
    }
  };
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
    <section className="fx-card" data-testid="settings-connections" ref={card}>
      <h3>Connections</h3>
      <p className="fx-help">
        The accounts App actions act as (HubSpot, Stripe, Slack, Google Sheets). Stored encrypted, apart from workflows; a secret is
        never shown again, only its last characters.
      </p>
      {keySource && (
        <p className="fx-muted" data-testid="connections-key-source">
          Encryption key: {keySource}.
        </p>
      )}
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
                <td className="fx-connection-actions">
                  <button
                    type="button"
                    className="fx-btn fx-btn-small"
                    disabled={tests[c.id] === 'testing'}
                    onClick={() => void test(c.id)}
                    data-testid={`connection-test-${c.id}`}
                  >
                    {tests[c.id] === 'testing' ? 'Testing…' : 'Test connection'}
                  </button>
                  <button type="button" className="fx-btn fx-btn-small fx-btn-danger" onClick={() => void remove(c.id)} data-testid={`connection-remove-${c.id}`}>
                    Remove
                  </button>
                  {tests[c.id] && tests[c.id] !== 'testing' && (
                    <div
                      className={(tests[c.id] as ConnectionTest).ok ? 'fx-ok-text' : 'fx-error-text'}
                      data-testid={`connection-test-result-${c.id}`}
                      data-ok={String((tests[c.id] as ConnectionTest).ok)}
                    >
                      {(tests[c.id] as ConnectionTest).ok ? '✓ ' : '✗ '}
                      {(tests[c.id] as ConnectionTest).message}
                    </div>
                  )}
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
            {oauth && (
              <div className="fx-seg" role="radiogroup" aria-label="How to connect">
                <button
                  type="button"
                  className={mode === 'oauth' ? 'is-active' : ''}
                  onClick={() => setMode('oauth')}
                  role="radio"
                  aria-checked={mode === 'oauth'}
                  data-testid="connection-mode-oauth"
                >
                  {oauth.title}
                </button>
                <button
                  type="button"
                  className={mode === 'paste' ? 'is-active' : ''}
                  onClick={() => setMode('paste')}
                  role="radio"
                  aria-checked={mode === 'paste'}
                  data-testid="connection-mode-paste"
                >
                  Paste a token
                </button>
              </div>
            )}
            {mode === 'oauth' && oauth ? (
              <>
                <div className="field-description">
                  Sign in to {connector.title} in a new window and allow access; Fluxo keeps the tokens it gets (encrypted) and
                  renews them. You need the client id of an OAuth app registered in {connector.title}&apos;s developer console
                  {' '}(its redirect URL: this server&apos;s <code>/api/v1/connections/oauth/callback</code>). Against{' '}
                  <code>fluxo sandbox</code> any client id works.
                </div>
                <label className="control-label" htmlFor="conn-client-id">Client id</label>
                <input id="conn-client-id" className="fx-input fx-mono" value={clientId} onChange={(e) => setClientId(e.target.value)} data-testid="connection-client-id" />
                <label className="control-label" htmlFor="conn-client-secret">Client secret (optional)</label>
                <input
                  id="conn-client-secret"
                  className="fx-input fx-mono"
                  type="password"
                  autoComplete="off"
                  value={clientSecret}
                  onChange={(e) => setClientSecret(e.target.value)}
                  data-testid="connection-client-secret"
                />
                <label className="control-label" htmlFor="conn-oauth-base">Base URL (optional)</label>
                <input
                  id="conn-oauth-base"
                  className="fx-input fx-mono"
                  value={baseUrl}
                  placeholder="the app's own; a sandbox fake: http://127.0.0.1:8788/hubspot"
                  onChange={(e) => setBaseUrl(e.target.value)}
                  data-testid="connection-base-url"
                />
                <details className="fx-connection-advanced">
                  <summary>Advanced: OAuth endpoints</summary>
                  <label className="control-label" htmlFor="conn-authorize-url">Authorize URL</label>
                  <input
                    id="conn-authorize-url"
                    className="fx-input fx-mono"
                    value={authorizeUrl}
                    placeholder={oauth.authorize_url ?? ''}
                    onChange={(e) => setAuthorizeUrl(e.target.value)}
                    data-testid="connection-authorize-url"
                  />
                  <label className="control-label" htmlFor="conn-token-url">Token URL</label>
                  <input
                    id="conn-token-url"
                    className="fx-input fx-mono"
                    value={tokenUrl}
                    placeholder={oauth.token_url ?? ''}
                    onChange={(e) => setTokenUrl(e.target.value)}
                    data-testid="connection-token-url"
                  />
                  <div className="field-description">Empty: {connector.title}&apos;s own. A base URL on this machine fills in the sandbox&apos;s.</div>
                </details>
                <button
                  type="button"
                  className="fx-btn fx-btn-primary"
                  disabled={busy || !id.trim() || !clientId.trim() || flow !== null}
                  onClick={() => void connectOAuth()}
                  data-testid="connection-oauth-connect"
                >
                  {oauth.title}
                </button>
                {flow && (
                  <div className="fx-help" data-testid="connection-oauth-waiting">
                    Waiting for {flow.title}: finish in the window that opened.{' '}
                    <a href={flow.url} target="_blank" rel="noreferrer">
                      Open it again
                    </a>
                    {' · '}
                    <button
                      type="button"
                      className="fx-link"
                      onClick={() => {
                        stopPolling();
                        setFlow(null);
                      }}
                    >
                      Cancel
                    </button>
                  </div>
                )}
              </>
            ) : (
              <>
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
          </>
        )}
        {flowMessage && (
          <div className={flowMessage.ok ? 'fx-ok-text' : 'fx-error-text'} data-testid="connection-oauth-result">
            {flowMessage.text}
          </div>
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
