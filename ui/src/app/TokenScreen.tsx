import { Workflow } from 'lucide-react';
import { useState } from 'react';
import { HttpApi } from '../api';

/** Asks for the API token of `fluxo serve` (in <data-dir>/token), and checks it. */
export function TokenScreen({ onToken, reason }: { onToken(t: string): void; reason?: string }) {
  const [token, setToken] = useState('');
  const [error, setError] = useState<string | null>(reason ?? null);
  const [busy, setBusy] = useState(false);
  const submit = async () => {
    const t = token.trim();
    if (!t) return;
    setBusy(true);
    try {
      await new HttpApi(t).listWorkflows();
      onToken(t);
    } catch (e) {
      setError((e as Error).message);
    } finally {
      setBusy(false);
    }
  };
  return (
    <div className="fx-token-screen" data-testid="token-screen">
      <form
        className="fx-modal"
        onSubmit={(e) => {
          e.preventDefault();
          void submit();
        }}
      >
        <h3>
          <Workflow className="fx-logo" size={18} aria-hidden /> Connect to Fluxo
        </h3>
        <p>
          Paste the API token of this server. It is in <code>&lt;data-dir&gt;/token</code>, or the value given to{' '}
          <code>fluxo serve --token</code>. Opening the page as <code>/#token=…</code> fills it in.
        </p>
        <input
          className="fx-input fx-mono"
          type="password"
          autoFocus
          placeholder="API token"
          value={token}
          onChange={(e) => setToken(e.target.value)}
          data-testid="token-input"
        />
        {error && <div className="fx-field-errors">{error}</div>}
        <div className="fx-modal-actions">
          <button className="fx-btn fx-btn-primary" type="submit" disabled={busy || !token.trim()} data-testid="token-submit">
            {busy ? 'Checking…' : 'Connect'}
          </button>
        </div>
      </form>
    </div>
  );
}
