import type { Api } from './api';
import { HttpApi } from './http';
import { TauriApi } from './tauri';

export type {
  Api,
  CheckOptions,
  MemoryQuery,
  ReplayOptions,
  ReplayPreviewOptions,
  ResumeOptions,
  RunQuery,
  RunQueryFilter,
  RunStatsQuery,
  WithWorkflow,
} from './api';
export * from './schemas';
export { ApiError } from './error';
export { LosslessNumber, parseJson, stringifyJson, hasRoundedInteger } from './json';
export { isLosslessNumber } from 'lossless-json';
export { HttpApi } from './http';
export { TauriApi } from './tauri';

const TOKEN_KEY = 'fluxo.token';

/** Inside the desktop shell? */
export function isTauri(): boolean {
  return typeof window !== 'undefined' && '__TAURI_INTERNALS__' in window;
}

/**
 * The API token for the HTTP transport: taken from the URL fragment `#token=...` (then kept
 * in localStorage and removed from the address bar), else from localStorage.
 */
export function takeToken(): string | null {
  const m = /(?:^#|&)token=([^&]+)/.exec(window.location.hash);
  if (m) {
    const t = decodeURIComponent(m[1]);
    localStorage.setItem(TOKEN_KEY, t);
    const rest = window.location.hash.replace(/(^#|&)token=[^&]+/, '$1').replace(/^#&/, '#');
    history.replaceState(null, '', window.location.pathname + window.location.search + (rest === '#' ? '' : rest));
    return t;
  }
  return localStorage.getItem(TOKEN_KEY);
}

export function storeToken(t: string): void {
  localStorage.setItem(TOKEN_KEY, t);
}

export function forgetToken(): void {
  localStorage.removeItem(TOKEN_KEY);
}

/** The transport for where the page runs: Tauri IPC in the desktop shell, else HTTP. */
export function createApi(token: string | null): Api | null {
  if (isTauri()) return new TauriApi();
  return token ? new HttpApi(token) : null;
}
