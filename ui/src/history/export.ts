// Export of the filtered runs, client-side: page through GET /runs with the list's query and
// hand the browser a file.

import type { RunQuery, RunSummary } from '../api';
import { useEditor } from '../store/editor';

export const CSV_COLUMNS: (keyof RunSummary)[] = [
  'id',
  'workflow_id',
  'workflow_version',
  'status',
  'mode',
  'trigger',
  'idempotency_key',
  'replay_of',
  'created_at',
  'finished_at',
  'duration_ms',
  'error_code',
  'error_message',
];

/** Every run matching `query`, newest first, 500 a page; `onProgress` after each page. */
export async function fetchAll(query: RunQuery, onProgress: (n: number) => void, signal: AbortSignal): Promise<RunSummary[]> {
  const api = useEditor.getState().api!;
  const out: RunSummary[] = [];
  let cursor: string | undefined;
  for (;;) {
    if (signal.aborted) throw new DOMException('cancelled', 'AbortError');
    const page = await api.listRuns({ ...query, limit: 500, cursor });
    out.push(...page.runs);
    onProgress(out.length);
    if (!page.next_cursor) return out;
    cursor = page.next_cursor;
  }
}

/** One CSV field (RFC 4180); text that a spreadsheet would run as a formula is prefixed with `'`. */
export function csvField(v: unknown): string {
  if (v === undefined || v === null) return '';
  let s = typeof v === 'string' ? v : String(v);
  if (typeof v === 'string' && /^[=+\-@\t\r]/.test(s)) s = `'${s}`;
  return /[",\r\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

export function toCsv(runs: RunSummary[]): string {
  const lines = [CSV_COLUMNS.join(',')];
  for (const r of runs) lines.push(CSV_COLUMNS.map((c) => csvField(r[c])).join(','));
  return lines.join('\r\n') + '\r\n';
}

export function download(name: string, type: string, text: string): void {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

export function exportName(ext: string, now = new Date()): string {
  const p = (n: number) => String(n).padStart(2, '0');
  return `fluxo-runs-${now.getFullYear()}${p(now.getMonth() + 1)}${p(now.getDate())}-${p(now.getHours())}${p(now.getMinutes())}${p(now.getSeconds())}.${ext}`;
}
