// Schedules as people read them: a cron expression in plain words (cronstrue), fire times on a
// zone's wall clock ("Mon 30 Mar, 02:30 (CEST)"), "in 3 h" hints, and the field problems of an
// `invalid_schedule` answer.

import { useEffect, useState } from 'react';
import cronstrue from 'cronstrue';
import { ApiError, type FieldProblem } from '../api';

/** Presets the cron field offers (5 fields, read in the step's zone). */
export const CRON_PRESETS: { label: string; cron: string }[] = [
  { label: 'Every 5 minutes', cron: '*/5 * * * *' },
  { label: 'Hourly', cron: '0 * * * *' },
  { label: 'Daily 09:00', cron: '0 9 * * *' },
  { label: 'Weekdays 09:00', cron: '0 9 * * 1-5' },
];

/**
 * The expression in plain words ("Every 2 seconds", "At 09:00, Monday through Friday"), 5 or 6
 * fields (seconds first, as the engine reads them); null when cronstrue cannot read it (the
 * server's preview says why).
 */
export function describeCron(expr: string): string | null {
  const text = expr.trim();
  if (!text) return null;
  try {
    return cronstrue.toString(text, {
      use24HourTimeFormat: true,
      throwExceptionOnParseError: true,
      // 0 = Sunday, 7 = Sunday too: as the engine (Vixie cron) reads day-of-week.
      dayOfWeekStartIndexZero: true,
    });
  } catch {
    return null;
  }
}

/** Does the expression have a seconds field (6 fields)? */
export function hasSeconds(expr: string): boolean {
  return expr.trim().split(/\s+/).length >= 6;
}

/** The `{path, message}` problems of an `invalid_schedule` error (either transport), else []. */
export function scheduleProblems(e: unknown): FieldProblem[] {
  if (!(e instanceof ApiError)) return [];
  const raw: unknown = e.extra.problems;
  if (!Array.isArray(raw)) return [];
  return raw
    .filter((p): p is { path?: unknown; message?: unknown } => !!p && typeof p === 'object')
    .map((p) => ({ path: typeof p.path === 'string' ? p.path : '', message: typeof p.message === 'string' ? p.message : String(p.message) }));
}

const zoneNames = new Map<string, Intl.DateTimeFormat[]>();

/** The zone's short name at an instant: "CEST", "EST", "UTC", else "GMT+9". */
function zoneName(instant: Date, timeZone: string): string {
  let fmts = zoneNames.get(timeZone);
  if (!fmts) {
    fmts = ['en-GB', 'en-US'].map((l) => new Intl.DateTimeFormat(l, { timeZone, timeZoneName: 'short' }));
    zoneNames.set(timeZone, fmts);
  }
  let name = '';
  for (const f of fmts) {
    name = f.formatToParts(instant).find((p) => p.type === 'timeZoneName')?.value ?? '';
    if (name && !name.startsWith('GMT')) return name;
  }
  return name;
}

const WEEKDAYS = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'];
const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
const LOCAL_RE = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

/**
 * A fire time on the zone's wall clock, as the server wrote it (`next_local`, RFC 3339 with
 * the zone's offset): "Mon 30 Mar, 02:30 (CEST)", with seconds when the schedule has them.
 * The wall clock is the server's (the scheduler's own DST rules); only the zone's short name
 * comes from the browser, else the offset ("UTC+01:00").
 */
export function formatFireTime(local: string, utc: string, timeZone: string, seconds: boolean): string {
  const m = LOCAL_RE.exec(local);
  if (!m) return local;
  const [, y, mo, d, h, mi, s, off] = m;
  // The weekday of the wall-clock date (a calendar fact, independent of zones).
  const wd = WEEKDAYS[new Date(Date.UTC(Number(y), Number(mo) - 1, Number(d))).getUTCDay()];
  const time = seconds ? `${h}:${mi}:${s}` : `${h}:${mi}`;
  let zone = off === 'Z' ? 'UTC' : `UTC${off}`;
  try {
    const name = zoneName(new Date(utc), timeZone || 'UTC');
    if (name) zone = name;
  } catch {
    /* a zone this browser does not know: keep the offset */
  }
  return `${wd} ${Number(d)} ${MONTHS[Number(mo) - 1]}, ${time} (${zone})`;
}

/**
 * An instant on a zone's wall clock, like {@link formatFireTime} but computed by the browser
 * (for `listSchedules`' `next_at`, which comes in UTC only): "Tue 1 Dec, 18:40 (UTC)".
 */
export function formatInZone(utc: string, timeZone: string, seconds: boolean): string {
  const at = new Date(utc);
  if (Number.isNaN(at.getTime())) return utc;
  try {
    const parts = new Intl.DateTimeFormat('en-GB', {
      timeZone: timeZone || 'UTC',
      year: 'numeric',
      month: '2-digit',
      day: '2-digit',
      hour: '2-digit',
      minute: '2-digit',
      second: '2-digit',
      hourCycle: 'h23',
    }).formatToParts(at);
    const get = (t: string) => parts.find((p) => p.type === t)?.value ?? '00';
    const local = `${get('year')}-${get('month')}-${get('day')}T${get('hour')}:${get('minute')}:${get('second')}Z`;
    return formatFireTime(local, utc, timeZone, seconds);
  } catch {
    return formatFireTime(at.toISOString().replace(/\.\d+Z$/, 'Z'), utc, 'UTC', seconds);
  }
}

/** "in 12 s", "in 4 min", "in 3 h", "in 2 days" (or "now" within a second; "… ago" when past). */
export function relativeTime(atMs: number, nowMs: number): string {
  const diff = atMs - nowMs;
  const abs = Math.abs(diff);
  let text: string;
  if (abs < 1000) return 'now';
  if (abs < 60_000) text = `${Math.round(abs / 1000)} s`;
  else if (abs < 3_600_000) text = `${Math.round(abs / 60_000)} min`;
  else if (abs < 36 * 3_600_000) text = `${Math.round(abs / 3_600_000)} h`;
  else text = `${Math.round(abs / 86_400_000)} days`;
  return diff > 0 ? `in ${text}` : `${text} ago`;
}

/** The current time, re-read every `everyMs`. */
export function useNow(everyMs: number): number {
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    const t = setInterval(() => setNow(Date.now()), everyMs);
    return () => clearInterval(t);
  }, [everyMs]);
  return now;
}

/** How often a "next run" hint needs re-reading: every second when it is under a minute away. */
export function tickFor(nextMs: number | undefined, nowMs: number): number {
  if (nextMs === undefined) return 60_000;
  const d = nextMs - nowMs;
  return d < 90_000 ? 1000 : d < 2 * 3_600_000 ? 15_000 : 60_000;
}
