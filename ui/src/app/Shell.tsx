import { Workflow } from 'lucide-react';
import type { ReactNode } from 'react';
import { useNav, type View } from './nav';
import { useEditor } from '../store/editor';
import { ConfirmDialog, ToastView } from './Overlays';
import { useBeforeUnload } from './Shortcuts';
import { RunsView } from '../history/RunsView';
import { MemoryView } from '../memory/MemoryView';
import { SettingsView } from '../settings/SettingsView';
import { NoticeBanner, useNotices } from './Notices';
import '../history/views.css';

const TABS: { view: View; label: string; title: string }[] = [
  { view: 'editor', label: 'Editor', title: 'The canvas editor' },
  { view: 'runs', label: 'Runs', title: 'Run history, run detail, replay' },
  { view: 'memory', label: 'Memory', title: 'Browse and delete Memory keys' },
  { view: 'settings', label: 'Settings', title: 'Listener, token, retention, environment variables' },
];

/**
 * The app's top-level views. Only the active one is mounted, so the editor's keyboard
 * shortcuts act only in the editor (its state lives in the store and survives a switch).
 */
export function Shell({ editor }: { editor: ReactNode }) {
  const view = useNav((s) => s.view);
  const go = useNav((s) => s.go);
  const ready = useEditor((s) => s.ready);
  const api = useEditor((s) => s.api);
  const [notices, dismissNotices] = useNotices(api);
  // The editor's guard, also while another view is shown.
  useBeforeUnload();
  return (
    <div className={`fx-shell ${notices.length ? 'has-notice' : ''}`} data-testid="shell" data-view={view}>
      <nav className="fx-appnav" aria-label="Views">
        <h1 className="fx-brand" title="Fluxo">
          <Workflow className="fx-logo" size={18} aria-hidden /> Fluxo
        </h1>
        {TABS.map((t) => (
          <button
            key={t.view}
            className={view === t.view ? 'is-active' : ''}
            onClick={() => go(t.view, t.view === 'runs' ? useNav.getState().runId : null)}
            title={t.title}
            data-testid={`view-${t.view}`}
            aria-current={view === t.view ? 'page' : undefined}
          >
            {t.label}
          </button>
        ))}
      </nav>
      <NoticeBanner notices={notices} onDismiss={dismissNotices} onOpenSettings={view === 'settings' ? undefined : () => go('settings')} />
      <main className="fx-shell-body">
        {view === 'editor' ? (
          ready ? (
            editor
          ) : (
            <div className="fx-loading" data-testid="loading">
              Loading the editor…
            </div>
          )
        ) : view === 'runs' ? <RunsView /> : view === 'memory' ? <MemoryView /> : <SettingsView />}
      </main>
      <ConfirmDialog />
      <ToastView />
    </div>
  );
}
