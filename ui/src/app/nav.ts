// Top-level navigation: Editor | Runs | Memory | Settings, kept in the URL fragment so a run
// can be linked (`#runs/<run-id>`). The fragment may also carry `token=…` (taken by the App).

import { create } from 'zustand';

export type View = 'editor' | 'runs' | 'memory' | 'settings';
const VIEWS: View[] = ['editor', 'runs', 'memory', 'settings'];

export interface Route {
  view: View;
  /** The run open in the history's detail panel. */
  runId: string | null;
}

/** Parse `#runs/<id>`, `#memory`, `#settings` (anything else is the editor); `token=` parts are ignored. */
export function parseHash(hash: string): Route {
  const part = hash
    .replace(/^#/, '')
    .split('&')
    .find((p) => p && !p.startsWith('token='));
  if (!part) return { view: 'editor', runId: null };
  const [head, ...rest] = part.split('/');
  const view = (VIEWS as string[]).includes(head) ? (head as View) : 'editor';
  const runId = view === 'runs' && rest.length ? decodeURIComponent(rest.join('/')) : null;
  return { view, runId };
}

export function routeHash(r: Route): string {
  if (r.view === 'editor') return '';
  return r.view === 'runs' && r.runId ? `#runs/${encodeURIComponent(r.runId)}` : `#${r.view}`;
}

interface NavState extends Route {
  go(view: View, runId?: string | null): void;
  /** Open a run's detail in the history view. */
  openRun(id: string | null): void;
  /** A connection an app step asked for ("Connect …" in the inspector): Settings → Connections opens its form on it. */
  connectTo: { app: string; id: string } | null;
  /** Go to Settings → Connections with the form set to connect `app` as `id`. */
  connect(app: string, id: string): void;
}

export const useNav = create<NavState>()((set, get) => ({
  ...parseHash(typeof window === 'undefined' ? '' : window.location.hash),
  go(view, runId = null) {
    const next = { view, runId: view === 'runs' ? runId : null };
    if (next.view === get().view && next.runId === get().runId) return;
    set(next);
    const h = routeHash(next);
    if (h !== window.location.hash && !(h === '' && window.location.hash === '')) {
      history.pushState(null, '', window.location.pathname + window.location.search + h);
    }
  },
  openRun(id) {
    get().go('runs', id);
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
    if (r.view !== s.view || r.runId !== s.runId) useNav.setState(r);
  };
  window.addEventListener('hashchange', sync);
  window.addEventListener('popstate', sync);
}
