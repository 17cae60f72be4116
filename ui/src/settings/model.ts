// The Settings form's model: what the form holds, and the document it saves.
//
// `PUT /settings` REPLACES the whole document (`src/settings.rs`), so the document saved is
// the one loaded with only the fields the form edits changed: a field set through the API or
// the file that this form does not show (or a field a newer server adds) is sent back as it
// came. Secret env values come back masked (`••••1234`); a secret left untouched is sent back
// as its mask, which keeps the stored value.

import type { AppSettings, SettingsView } from '../api';

export const ENV_NAME = /^[A-Z_][A-Z0-9_]*$/;
/** The mask of a secret value (`src/secrets.rs`). */
export const MASK = '••••';

/**
 * Words that make an env variable secret by its name alone (`SECRET_ENV_WORDS` in
 * `src/secrets.rs`, case-insensitive). Only a hint for names typed but not saved yet: after a
 * save, the server's `secret_names` decides.
 */
const SECRET_WORDS = ['KEY', 'TOKEN', 'SECRET', 'PASSWORD', 'PASSWD', 'PASSPHRASE', 'PWD', 'AUTH', 'CREDENTIAL', 'PRIVATE', 'COOKIE', 'SESSION'];

export function secretByName(name: string): boolean {
  const up = name.toUpperCase();
  return SECRET_WORDS.some((w) => up.includes(w));
}

export interface EnvRow {
  id: number;
  name: string;
  /** What the value field holds. For a stored secret, '' = keep the stored value. */
  value: string;
  /** The name this variable had when loaded (undefined: added in this form). */
  loadedName?: string;
  /** The mask the server showed for a secret value (the value is write-only then). */
  mask?: string;
  /** Listed in `secret_env` (the "secret" checkbox). */
  flagged: boolean;
}

export interface ListRow {
  id: number;
  value: string;
}

export interface SettingsForm {
  listener: string;
  /** Desktop: run the sandbox destination (`sandbox`). */
  sandbox: boolean;
  retRuns: string;
  retDays: string;
  rows: EnvRow[];
  /** `secret_env` names that are no variable of this form (a `FLUXO_ENV_*` process variable, a removed row): kept. */
  otherSecrets: string[];
  hosts: ListRow[];
  outbound: ListRow[];
}

let seq = 0;
export const nextId = () => ++seq;

export function formOf(view: SettingsView): SettingsForm {
  const s = view.settings;
  const env = s.env ?? {};
  const flagged = new Set(s.secret_env ?? []);
  const secret = new Set(view.secret_names ?? Object.keys(env).filter((n) => env[n].startsWith(MASK)));
  return {
    listener: s.listener_addr ?? '',
    sandbox: s.sandbox ?? false,
    retRuns: s.retention_runs?.toString() ?? '',
    retDays: s.retention_days?.toString() ?? '',
    rows: Object.entries(env).map(([name, value]) =>
      secret.has(name) && value.startsWith(MASK)
        ? { id: nextId(), name, value: '', loadedName: name, mask: value, flagged: flagged.has(name) }
        : { id: nextId(), name, value, loadedName: name, flagged: flagged.has(name) },
    ),
    otherSecrets: [...flagged].filter((n) => !(n in env)),
    hosts: (s.allowed_hosts ?? []).map((value) => ({ id: nextId(), value })),
    outbound: (s.outbound_allow ?? []).map((value) => ({ id: nextId(), value })),
  };
}

/** Whether the row's value is the stored secret, kept (nothing typed over it). */
export const keepsStored = (r: EnvRow) => r.mask !== undefined && r.value === '';

/** Whether the row is secret: its value is masked by the server, or will be once saved. */
export const isSecretRow = (r: EnvRow) => r.flagged || secretByName(r.name.trim()) || (keepsStored(r) && r.name.trim() === r.loadedName);

/** `''` → undefined, else the number (NaN when not one). */
export function numOrUndef(s: string): number | undefined {
  const t = s.trim();
  if (!t) return undefined;
  const n = Number(t);
  return Number.isFinite(n) ? n : NaN;
}

function setOrDrop<K extends keyof AppSettings>(doc: AppSettings, key: K, value: AppSettings[K] | undefined): void {
  if (value === undefined) delete doc[key];
  else doc[key] = value;
}

const listOf = (rows: ListRow[]) => rows.map((r) => r.value.trim()).filter(Boolean);

/**
 * The document to save: `loaded` (as the server showed it) with the form's fields in place.
 * Fields the form does not edit are kept as they are; empty lists and unset numbers are
 * dropped, as the server writes them.
 */
export function documentOf(loaded: AppSettings, f: SettingsForm): AppSettings {
  const doc: AppSettings = { ...loaded };
  const env: Record<string, string> = {};
  for (const r of f.rows) {
    const name = r.name.trim();
    if (name) env[name] = keepsStored(r) ? r.mask! : r.value;
  }
  doc.env = env;
  const secret = new Set(f.otherSecrets);
  for (const r of f.rows) if (r.flagged && r.name.trim()) secret.add(r.name.trim());
  setOrDrop(doc, 'secret_env', secret.size ? [...secret].sort() : undefined);
  setOrDrop(doc, 'retention_runs', numOrUndef(f.retRuns));
  setOrDrop(doc, 'retention_days', numOrUndef(f.retDays));
  setOrDrop(doc, 'listener_addr', f.listener.trim() || undefined);
  setOrDrop(doc, 'sandbox', f.sandbox ? true : loaded.sandbox === undefined || loaded.sandbox === null ? undefined : false);
  const hosts = listOf(f.hosts);
  setOrDrop(doc, 'allowed_hosts', hosts.length ? hosts : undefined);
  const outbound = listOf(f.outbound);
  setOrDrop(doc, 'outbound_allow', outbound.length ? outbound : undefined);
  return doc;
}

/** JSON with object keys sorted (the server's key order is not ours). */
function canonical(v: unknown): string {
  return JSON.stringify(v, (_k, x: unknown) =>
    x && typeof x === 'object' && !Array.isArray(x) ? Object.fromEntries(Object.entries(x as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) : x,
  );
}

/** Whether saving `doc` would change what the server holds (`loaded`). */
export function changed(loaded: AppSettings, doc: AppSettings): boolean {
  return canonical({ ...loaded, env: loaded.env ?? {} }) !== canonical(doc);
}

/** Where a 400 `invalid_settings` detail belongs (`SettingsError` in `src/settings.rs`). */
export type ErrorPlace =
  | { field: 'env'; rowId: number }
  | { field: 'hosts' | 'outbound'; rowId: number }
  | { field: 'listener' | 'retRuns' | 'retDays' }
  | { field: 'form' };

export function placeOf(detail: string, f: SettingsForm): ErrorPlace {
  const envRow = (name: string) => f.rows.find((r) => r.name.trim() === name);
  let m = /^env\.([A-Z0-9_]+):/.exec(detail) ?? /^env variable name `([^`]*)`/.exec(detail) ?? /^secret_env: `([^`]*)`/.exec(detail);
  if (m) {
    const r = envRow(m[1]);
    if (r) return { field: 'env', rowId: r.id };
  }
  // `allowed_hosts[i] …` / `outbound_allow[i] …`: an index into the list as sent (blank rows
  // are not sent).
  for (const [name, field] of [['allowed_hosts', 'hosts'], ['outbound_allow', 'outbound']] as const) {
    m = new RegExp(`^${name}\\[(\\d+)\\]`).exec(detail);
    if (m) {
      const sent = f[field].filter((r) => r.value.trim());
      const r = sent[Number(m[1])];
      if (r) return { field, rowId: r.id };
    }
  }
  if (detail.startsWith('retention_runs')) return { field: 'retRuns' };
  if (detail.startsWith('retention_days')) return { field: 'retDays' };
  if (detail.startsWith('listener_addr')) return { field: 'listener' };
  return { field: 'form' };
}
