// This launch's notices (`Api.notices()`): the desktop app's first launch says that its seeded
// webhooks are unsigned and how to require signatures. Shown once, as a banner under the view
// tabs, until dismissed; a dismissed notice is not shown again (the window may reload while
// the app runs, and `app_info` keeps answering the same notices until the next launch).

import { useEffect, useState } from 'react';
import type { Api } from '../api';

const DISMISSED_KEY = 'fluxo.dismissedNotices';

function dismissed(): string[] {
  try {
    const v = JSON.parse(localStorage.getItem(DISMISSED_KEY) ?? '[]') as unknown;
    return Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : [];
  } catch {
    return [];
  }
}

/** The notices not dismissed yet, and the way to dismiss them. */
export function useNotices(api: Api | null): [string[], () => void] {
  const [notices, setNotices] = useState<string[]>([]);
  useEffect(() => {
    if (!api) return;
    let live = true;
    api.notices().then(
      (ns) => {
        const gone = new Set(dismissed());
        if (live) setNotices(ns.filter((n) => !gone.has(n)));
      },
      () => {},
    );
    return () => {
      live = false;
    };
  }, [api]);
  const dismiss = () => {
    // The newest few are enough: a notice is of one launch.
    localStorage.setItem(DISMISSED_KEY, JSON.stringify([...dismissed(), ...notices].slice(-20)));
    setNotices([]);
  };
  return [notices, dismiss];
}

export function NoticeBanner({ notices, onDismiss, onOpenSettings }: { notices: string[]; onDismiss: () => void; onOpenSettings?: () => void }) {
  if (!notices.length) return null;
  return (
    <div className="fx-notice" role="status" data-testid="notice-banner">
      <span className="fx-notice-icon" aria-hidden>
        !
      </span>
      <div className="fx-notice-text">
        {notices.map((n, i) => {
          // "First launch: …": the short lead in bold.
          const m = /^([^:]{1,30}):\s/.exec(n);
          return (
            <p key={i}>
              {m ? (
                <>
                  <strong>{m[1]}:</strong> {n.slice(m[0].length)}
                </>
              ) : (
                n
              )}
            </p>
          );
        })}
      </div>
      <div className="fx-notice-actions">
        {onOpenSettings && (
          <button className="fx-btn fx-btn-small" onClick={onOpenSettings} data-testid="notice-settings">
            Open Settings
          </button>
        )}
        <button className="fx-btn fx-btn-small fx-btn-primary" onClick={onDismiss} data-testid="notice-dismiss">
          Got it
        </button>
      </div>
    </div>
  );
}
