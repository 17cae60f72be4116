// Top-level navigation: Editor | Runs | Memory | Settings, kept in the URL fragment so a run
// can be linked (`#runs/<run-id>`), with the Runs view's filters after a `?`
// (`#runs/<run-id>?status=failed&range=24h`): reload, back/forward and a shared link restore
// them. The fragment may also carry `token=…` (taken by the App).

import { create } from 'zustand';

export type View = 'editor' | 'runs' | 'memory' | 'settings';
const VIEWS: View[] = ['editor', 'runs', 'memory', 'settings'];

export interface Route {
  view: View;
  /** The run open in the history's detail panel. */
  runId: string | null;
  /** The Runs view's filters as a query string (`status=failed&q=cus_1`), '' for none; kept while on another view. */
  params: string;
}

/** Parse `#runs/<id>?<params>`, `#memory`, `#settings` (anything else is the editor); `token=` parts are ignored. */
export function parseHash(hash: string): Route {
  const rest = hash.replace(/^#/, '').replace(/(^|&)token=[^&]*/g, '').replace(/^&+/, '');
  const q = rest.indexOf('?');
  const path = q < 0 ? rest.split('&')[0] : rest.slice(0, q);
  const params = q < 0 ? '' : rest.slice(q + 1);
  if (!path) return { view: 'editor', runId: null, params: '' };
  const [head, ...tail] = path.split('/');
  const view = (VIEWS as string[]).includes(head) ? (head as View) : 'editor';
  const runId = view === 'runs' && tail.length ? decodeURIComponent(tail.join('/')) : null;
  return { view, runId, params: view === 'runs' ? params : '' };
}

export function routeHash(r: Route): string {
  if (r.view === 'editor') return '';
  if (r.view !== 'runs') return `#${r.view}`;
  return `#runs${r.runId ? `/${encodeURIComponent(r.runId)}` : ''}${r.params ? `?${r.params}` : ''}`;
}

interface NavState extends Route {
  go(view: View, runId?: string | null): void;
  /** Open a run's detail in the history view (`replace`: in place of the current history entry). */
  openRun(id: string | null, opts?: { replace?: boolean }): void;
  /** Set the Runs view's filters (a new history entry, so Back returns to the previous ones). */
  setParams(params: string): void;
  /** A connection an app step asked for ("Connect …" in the inspector): Settings → Connections opens its form on it. */
  connectTo: { app: string; id: string } | null;
  /** Go to Settings → Connections with the form set to connect `app` as `id`. */
  connect(app: string, id: string): void;
}

/** Write the route to the address bar: a new history entry, or in place of the current one. */
function writeHash(r: Route, replace = false) {
  const h = routeHash(r);
  if (h === window.location.hash || (h === '' && window.location.hash === '')) return;
  const url = window.location.pathname + window.location.search + h;
  if (replace) history.replaceState(null, '', url);
  else history.pushState(null, '', url);
}

export const useNav = create<NavState>()((set, get) => ({
  ...parseHash(typeof window === 'undefined' ? '' : window.location.hash),
  go(view, runId = null) {
    const next = { view, runId: view === 'runs' ? runId : null };
    if (next.view === get().view && next.runId === get().runId) return;
    set(next);
    writeHash({ ...get() });
  },
  openRun(id, opts) {
    if (opts?.replace && get().view === 'runs') {
      if (get().runId === id) return;
      set({ runId: id });
      writeHash({ ...get() }, true);
      return;
    }
    get().go('runs', id);
  },
  setParams(params) {
    if (params === get().params) return;
    set({ params });
    if (get().view === 'runs') writeHash({ ...get() });
  },
  connectTo: null,
  connect(app, id) {
    set({ connectTo: { app, id } });
    get().go('settings');
  },
}));

if (typeof window !== 'undefined') {
  const sync = () => {
    if (/token=/.test(window.location.hash)) return;
    const r = parseHash(window.location.hash);
    const s = useNav.getState();
    // Another view's URL carries no filters: the Runs view keeps its own until it is shown again.
    const params = r.view === 'runs' ? r.params : s.params;
    if (r.view !== s.view || r.runId !== s.runId || params !== s.params) useNav.setState({ ...r, params });
  };
  window.addEventListener('hashchange', sync);
  window.addEventListener('popstate', sync);
}
