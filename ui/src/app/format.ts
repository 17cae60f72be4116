import { stringifyJson } from '../api/json';

/** JSON text of a value (integers beyond 2^53 with every digit), cut to `max` characters. */
export function excerpt(v: unknown, max = 120): string {
  let s: string;
  try {
    s = typeof v === 'string' ? JSON.stringify(v) : stringifyJson(v, max > 200 ? 2 : 0) ?? 'null';
  } catch {
    s = String(v);
  }
  return s.length > max ? `${s.slice(0, max - 1)}…` : s;
}

export function formatMs(ms: number | undefined): string {
  if (ms === undefined || ms === null) return '';
  if (ms < 1000) return `${ms} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
  return `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1000)} s`;
}

export function humanize(key: string): string {
  const unit = /_(s|ms)$/.exec(key)?.[1];
  const base = key.replace(/_(s|ms)$/, '').replace(/_/g, ' ');
  const t = base.charAt(0).toUpperCase() + base.slice(1);
  return unit ? `${t} (${unit})` : t;
}

export const isMac = typeof navigator !== 'undefined' && /Mac|iPhone|iPad/.test(navigator.platform);
export const MOD = isMac ? '⌘' : 'Ctrl';
