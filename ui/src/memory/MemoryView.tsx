// Memory browser: namespaces, keys by prefix (paged), a key's value, when it was written, when
// it expires and the time left, and delete with confirmation.

import { RotateCcw, X } from 'lucide-react';
import { useCallback, useEffect, useRef, useState } from 'react';
import type { MemoryEntry, NamespaceCount } from '../api';
import { useNav } from '../app/nav';
import { useEditor } from '../store/editor';
import { excerpt } from '../app/format';
import { JsonView } from '../history/JsonView';
import { formatLeft, formatTime } from '../history/format';

const PAGE = 100;

/** Time left, counting down from what the server said when the entry was read. */
function TimeLeft({ entry, readAt }: { entry: MemoryEntry; readAt: number }) {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    if (entry.ttl_left_ms === undefined) return;
    const t = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(t);
  }, [entry.ttl_left_ms]);
  if (entry.ttl_left_ms === undefined) return <span className="fx-muted">never expires</span>;
  const left = entry.ttl_left_ms - (now - readAt);
  return <span className={left <= 0 ? 'fx-error-text' : left < 60_000 ? 'fx-warning-text' : ''}>{formatLeft(left)}</span>;
}

export function MemoryView() {
  const api = useEditor((s) => s.api)!;
  const ask = useEditor((s) => s.ask);
  const notify = useEditor((s) => s.notify);
  const [namespaces, setNamespaces] = useState<string[] | null>(null);
  const [nsError, setNsError] = useState<string | null>(null);
  const [ns, setNs] = useState<string | null>(null);
  const [prefix, setPrefix] = useState('');
  const [entries, setEntries] = useState<MemoryEntry[]>([]);
  const [next, setNext] = useState<string | null>(null);
  const [loading, setLoading] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [readAt, setReadAt] = useState(Date.now());
  const [sel, setSel] = useState<MemoryEntry | null>(null);
  const [counts, setCounts] = useState<Record<string, NamespaceCount>>({});
  const openRun = useNav((s) => s.openRun);
  const seq = useRef(0);

  const loadNamespaces = useCallback(async () => {
    try {
      const counted = await api.memoryCounts();
      const list = counted.map((c) => c.namespace);
      setCounts(Object.fromEntries(counted.map((c) => [c.namespace, c])));
      setNamespaces(list);
      setNsError(null);
      setNs((cur) => (cur && list.includes(cur) ? cur : (list[0] ?? null)));
    } catch (e) {
      setNsError((e as Error).message);
    }
  }, [api]);

  useEffect(() => {
    void loadNamespaces();
  }, [loadNamespaces]);

  const load = useCallback(
    async (more: boolean) => {
      if (!ns) return;
      const n = ++seq.current;
      setLoading(true);
      try {
        const page = await api.listMemory(ns, { prefix, limit: PAGE, after: more ? (next ?? undefined) : undefined });
        if (n !== seq.current) return;
        setEntries((cur) => (more ? [...cur, ...page.entries] : page.entries));
        setNext(page.next_after ?? null);
        setReadAt(Date.now());
        setError(null);
      } catch (e) {
        if (n !== seq.current) return;
        setError((e as Error).message);
      } finally {
        if (n === seq.current) setLoading(false);
      }
    },
    [api, ns, prefix, next],
  );

  // A new namespace or prefix: the first page (after a pause in typing).
  useEffect(() => {
    setSel(null);
    const t = setTimeout(() => void load(false), prefix ? 250 : 0);
    return () => clearTimeout(t);
  }, [ns, prefix]);

  const remove = async (e: MemoryEntry) => {
    const ok = await ask({
      title: 'Delete Memory key?',
      message: `“${e.key}” in namespace “${e.namespace}” will be deleted. A workflow that claims this key (a no-overwrite write) will treat its event as new again.`,
      confirmLabel: 'Delete key',
      danger: true,
    });
    if (!ok) return;
    try {
      await api.deleteMemory(e.namespace, e.key);
      setEntries((cur) => cur.filter((x) => !(x.namespace === e.namespace && x.key === e.key)));
      setSel((cur) => (cur && cur.key === e.key && cur.namespace === e.namespace ? null : cur));
      notify('ok', `Deleted ${e.namespace}/${e.key}`);
    } catch (err) {
      notify('error', `Not deleted: ${(err as Error).message}`);
      void load(false);
    }
  };

  const openEntry = async (e: MemoryEntry) => {
    setSel(e);
    try {
      const fresh = await api.getMemory(e.namespace, e.key);
      setSel(fresh);
      setReadAt(Date.now());
    } catch {
      /* keep what the listing said (it may have expired meanwhile) */
    }
  };

  return (
    <div className="fx-memory" data-testid="memory-view">
      <aside className="fx-left fx-ns-list" data-testid="namespaces">
        <div className="fx-side-head">
          <strong>Namespaces</strong>
          <span className="fx-spacer" />
          <button className="fx-btn fx-btn-small fx-btn-ghost" onClick={() => void loadNamespaces()} title="Refresh" aria-label="Refresh" data-testid="memory-refresh">
            <RotateCcw size={12} aria-hidden />
          </button>
        </div>
        {nsError && <div className="fx-empty fx-error-text">{nsError}</div>}
        {namespaces && !namespaces.length && <div className="fx-empty">No Memory keys yet. Workflows write them with Memory steps.</div>}
        <ul>
          {namespaces?.map((n) => (
            <li key={n} className={n === ns ? 'is-active' : ''} onClick={() => setNs(n)} data-testid={`namespace-${n}`}>
              <span className="fx-ns-name">{n}</span>
              {counts[n] && (
                <span className="fx-count" data-testid={`namespace-count-${n}`} title={`${counts[n].keys.toLocaleString('en-US')}${counts[n].more ? '+' : ''} live keys`}>
                  {counts[n].keys.toLocaleString('en-US')}
                  {counts[n].more ? '+' : ''}
                </span>
              )}
            </li>
          ))}
        </ul>
      </aside>
      <section className="fx-mem-main">
        <div className="fx-runs-bar">
          <strong className="fx-mono">{ns ?? '—'}</strong>
          <input
            className="fx-input fx-filter-search fx-mono"
            type="search"
            placeholder="Key prefix…"
            value={prefix}
            onChange={(e) => setPrefix(e.target.value)}
            disabled={!ns}
            data-testid="memory-prefix"
          />
          <span className="fx-spacer" />
          <span className="fx-muted" data-testid="memory-count">
            {entries.length} key{entries.length === 1 ? '' : 's'}
            {next ? '+' : ''}
          </span>
        </div>
        <div className="fx-mem-body">
          <div className="fx-mem-table-wrap">
            <table className="fx-table" data-testid="memory-table">
              <thead>
                <tr>
                  <th>Key</th>
                  <th>Value</th>
                  <th>Written</th>
                  <th>Expires</th>
                  <th>Time left</th>
                  <th />
                </tr>
              </thead>
              <tbody>
                {entries.map((e) => (
                  <tr
                    key={e.key}
                    className={`is-clickable ${sel?.key === e.key ? 'is-selected' : ''}`}
                    onClick={() => void openEntry(e)}
                    data-testid="memory-row"
                    data-key={e.key}
                  >
                    <td className="fx-mono">{e.key}</td>
                    <td className="fx-mono fx-excerpt">{excerpt(e.value, 80)}</td>
                    <td title={e.written_at}>{formatTime(e.written_at)}</td>
                    <td title={e.expires_at}>{e.expires_at ? formatTime(e.expires_at) : <span className="fx-muted">never</span>}</td>
                    <td>
                      <TimeLeft entry={e} readAt={readAt} />
                    </td>
                    <td>
                      <button aria-label="Delete this key"
                        className="fx-icon-btn"
                        onClick={(ev) => {
                          ev.stopPropagation();
                          void remove(e);
                        }}
                        title="Delete this key"
                        data-testid="memory-delete"
                      >
                        <X size={15} aria-hidden />
                      </button>
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
            {!entries.length && !loading && ns && <div className="fx-empty">{error ? <span className="fx-error-text">{error}</span> : prefix ? 'No key starts with this prefix.' : 'This namespace is empty.'}</div>}
            {next && (
              <div className="fx-empty">
                <button className="fx-btn fx-btn-small" onClick={() => void load(true)} disabled={loading} data-testid="memory-more">
                  {loading ? 'Loading…' : 'Load more'}
                </button>
              </div>
            )}
          </div>
          {sel && (
            <aside className="fx-mem-detail" data-testid="memory-detail">
              <div className="fx-side-head">
                <code className="fx-mem-key">{sel.key}</code>
                <span className="fx-spacer" />
                <button className="fx-btn fx-btn-small fx-btn-danger" onClick={() => void remove(sel)} data-testid="memory-detail-delete">
                  Delete
                </button>
                <button aria-label="Close" className="fx-icon-btn" onClick={() => setSel(null)} title="Close">
                  <X size={15} aria-hidden />
                </button>
              </div>
              <dl className="fx-facts">
                <dt>Namespace</dt>
                <dd className="fx-mono">{sel.namespace}</dd>
                <dt>Written</dt>
                <dd title={sel.written_at}>{formatTime(sel.written_at)}</dd>
                <dt>Expires</dt>
                <dd title={sel.expires_at}>{sel.expires_at ? formatTime(sel.expires_at) : 'never'}</dd>
                <dt>Time left</dt>
                <dd data-testid="memory-ttl-left">
                  <TimeLeft entry={sel} readAt={readAt} />
                </dd>
                <dt>Written by</dt>
                <dd data-testid="memory-written-by">
                  {sel.owner ? (
                    <>
                      step <code>{sel.owner.step_id}</code> of run{' '}
                      <button className="fx-btn-ghost fx-link fx-mono" onClick={() => openRun(sel.owner!.run_id)} title="Open the run (its lineage shows any resume)" data-testid="memory-writer-run">
                        {sel.owner.run_id.slice(0, 13)}…
                      </button>
                    </>
                  ) : (
                    <span className="fx-muted">not a run (the API or a person)</span>
                  )}
                </dd>
              </dl>
              <JsonView label="Value" value={sel.value} open={3} testId="memory-value" />
            </aside>
          )}
        </div>
      </section>
    </div>
  );
}
