const pad = (n: number, w = 2) => String(n).padStart(w, '0');

/** `2026-11-30 12:47:03` in local time (the ISO instant in the title). */
export function formatTime(iso: string | undefined | null): string {
  if (!iso) return '';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

/** `12:47:03.120` (local), for attempts inside one run. */
export function formatClock(iso: string | undefined | null): string {
  if (!iso) return '';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
}

/** `1 h 05 min`, `3 min 20 s`, `42 s` for a time left. */
export function formatLeft(ms: number): string {
  if (ms <= 0) return 'expired';
  const s = Math.floor(ms / 1000);
  const d = Math.floor(s / 86400);
  const h = Math.floor((s % 86400) / 3600);
  const m = Math.floor((s % 3600) / 60);
  if (d) return `${d} d ${h} h`;
  if (h) return `${h} h ${pad(m)} min`;
  if (m) return `${m} min ${pad(s % 60)} s`;
  return `${s} s`;
}

export const shortId = (id: string) => (id.length > 13 ? `${id.slice(0, 8)}…${id.slice(-4)}` : id);

/** `datetime-local` input value for unix ms (local time). */
export function toLocalInput(ms: number | null): string {
  if (ms === null) return '';
  const d = new Date(ms);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

export function fromLocalInput(v: string): number | null {
  if (!v) return null;
  const t = new Date(v).getTime();
  return Number.isNaN(t) ? null : t;
}

export function plural(n: number, one: string, many = `${one}s`): string {
  return `${n.toLocaleString('en-US')} ${n === 1 ? one : many}`;
}

/** What a dry run ran: `draft` (version 0: never published, e.g. the editor's unsaved canvas) or a published version, `v3`. */
export function dryRunOf(r: { workflow_version: number }): string {
  return r.workflow_version === 0 ? 'draft' : `v${r.workflow_version}`;
}

/** A dry run's label: its workflow's name (else id) and what ran. `Invoice paid once · draft dry run`, `Invoice paid once · v3 dry run`. */
export function dryRunLabel(r: { workflow_id: string; workflow_version: number }, name?: string | null): string {
  return `${name || r.workflow_id} · ${dryRunOf(r)} dry run`;
}
