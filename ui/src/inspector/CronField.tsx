// The cron field of a `schedule_trigger`: the expression, presets, and while typing (300 ms
// after the last key) what it means in plain words and its next 5 fire times in the step's
// zone, from the scheduler's own rules (`previewSchedule`); the server's problem inline when
// the expression or the zone does not parse.

import { useContext, useEffect, useRef, useState } from 'react';
import { CalendarClock } from 'lucide-react';
import type { WidgetProps } from '@rjsf/utils';
import type { SchedulePreview, FieldProblem } from '../api';
import { useEditor } from '../store/editor';
import { InspectorContext } from './TemplateInput';
import { Markdownish } from './widgets';
import { CRON_PRESETS, describeCron, formatFireTime, hasSeconds, relativeTime, scheduleProblems, tickFor, useNow } from './schedule';

const DEBOUNCE_MS = 300;
const COUNT = 5;

interface Answer {
  /** What was asked: `cron`, zone. */
  cron: string;
  timezone: string;
  preview?: SchedulePreview;
  problems?: FieldProblem[];
  /** Anything else (offline, an older engine). */
  error?: string;
}

/** One calm line on where schedules run: the desktop app while open, a server while it runs. */
export function ScheduleNotice() {
  const transport = useEditor((s) => s.api?.transport);
  return (
    <p className="fx-muted fx-schedule-notice" data-testid="schedule-notice">
      <CalendarClock size={13} aria-hidden />{' '}
      {transport === 'tauri' ? (
        <Markdownish text="Schedules run while the Fluxo app is open (or on a `fluxo serve`)." />
      ) : (
        'Schedules run while this server runs.'
      )}
    </p>
  );
}

/** The preview of `cron` in `timezone`, asked 300 ms after the last change and again once the first time has passed. */
function useSchedulePreview(cron: string, timezone: string): { answer: Answer | null; pending: boolean } {
  const api = useEditor((s) => s.api);
  const [answer, setAnswer] = useState<Answer | null>(null);
  const [again, setAgain] = useState(0);
  const seq = useRef(0);
  const trimmed = cron.trim();
  useEffect(() => {
    const n = ++seq.current;
    if (!api || !trimmed) {
      setAnswer(null);
      return;
    }
    const t = setTimeout(() => {
      api.previewSchedule(trimmed, timezone || undefined, COUNT).then(
        (preview) => n === seq.current && setAnswer({ cron: trimmed, timezone, preview }),
        (e: unknown) => {
          if (n !== seq.current) return;
          const problems = scheduleProblems(e);
          setAnswer(
            problems.length
              ? { cron: trimmed, timezone, problems }
              : { cron: trimmed, timezone, error: e instanceof Error ? e.message : String(e) },
          );
        },
      );
    }, DEBOUNCE_MS);
    return () => clearTimeout(t);
  }, [api, trimmed, timezone, again]);

  // Once the first listed time has passed, ask again (at most once a second).
  const first = answer?.preview?.next[0];
  const firstMs = first ? Date.parse(first) : undefined;
  const now = useNow(tickFor(firstMs, Date.now()));
  useEffect(() => {
    if (firstMs !== undefined && now > firstMs) setAgain((x) => x + 1);
  }, [now, firstMs]);

  const pending = !!trimmed && (!answer || answer.cron !== trimmed || answer.timezone !== timezone);
  return { answer, pending };
}

export function CronWidget(props: WidgetProps) {
  const { id, value, onChange, onBlur, onFocus, disabled, readonly, rawErrors, placeholder } = props;
  const { stepId } = useContext(InspectorContext);
  const timezone = useEditor((s) => {
    const tz = s.nodes.find((n) => n.id === stepId)?.data.config.timezone;
    return typeof tz === 'string' && tz.trim() ? tz.trim() : 'UTC';
  });
  const text = typeof value === 'string' ? value : '';
  const { answer, pending } = useSchedulePreview(text, timezone);
  const now = useNow(1000);

  // The description follows the same debounce as the preview, so the two change together.
  const [described, setDescribed] = useState(() => describeCron(text));
  useEffect(() => {
    const t = setTimeout(() => setDescribed(describeCron(text)), DEBOUNCE_MS);
    return () => clearTimeout(t);
  }, [text]);

  const cronProblems = answer?.problems?.filter((p) => p.path !== 'timezone') ?? [];
  const zoneProblems = answer?.problems?.filter((p) => p.path === 'timezone') ?? [];
  const preview = answer?.preview;
  const seconds = hasSeconds(preview?.cron ?? text);
  // Validation's problems of this field (the form hides them under it: shown here), less those the preview already says.
  const otherErrors = (rawErrors ?? []).filter((m) => !cronProblems.some((p) => p.message === m));
  const invalid = cronProblems.length > 0 || otherErrors.length > 0;

  return (
    <div className="fx-cron" data-testid="cron-field">
      <input
        id={id}
        className={`fx-input fx-mono ${invalid ? 'is-invalid' : ''}`}
        value={text}
        spellCheck={false}
        autoComplete="off"
        placeholder={placeholder || '*/5 * * * *'}
        disabled={disabled || readonly}
        aria-describedby={`${id}-preview`}
        aria-invalid={invalid || undefined}
        data-testid="cron-input"
        onChange={(e) => onChange(e.target.value === '' ? undefined : e.target.value)}
        onBlur={() => onBlur(id, value)}
        onFocus={() => onFocus(id, value)}
      />
      <div className="fx-cron-presets" role="group" aria-label="Presets">
        {CRON_PRESETS.map((p) => (
          <button
            key={p.cron}
            type="button"
            className={`fx-chip fx-chip-button ${text.trim() === p.cron ? 'is-active' : ''}`}
            title={p.cron}
            disabled={disabled || readonly}
            data-testid={`cron-preset-${p.cron.replace(/[^0-9a-z]+/gi, '_')}`}
            onClick={() => onChange(p.cron)}
          >
            {p.label}
          </button>
        ))}
      </div>
      {otherErrors.length > 0 && (
        <ul className="fx-field-errors" data-testid="cron-validation-errors">
          {otherErrors.map((m, i) => (
            <li key={i}>{m}</li>
          ))}
        </ul>
      )}
      <div
        id={`${id}-preview`}
        className={`fx-cron-preview ${pending ? 'is-pending' : ''}`}
        aria-live="polite"
        data-testid="cron-preview"
        data-pending={pending ? 'true' : 'false'}
      >
        {!text.trim() ? (
          <p className="fx-muted">
            Five fields (<code>minute hour day month weekday</code>), or six with seconds first.
          </p>
        ) : cronProblems.length > 0 ? (
          <ul className="fx-field-errors" data-testid="cron-problem">
            {cronProblems.map((p, i) => (
              <li key={i}>{p.message}</li>
            ))}
          </ul>
        ) : (
          <>
            {described && (
              <div className="fx-cron-desc" data-testid="cron-description">
                {described}
              </div>
            )}
            {zoneProblems.length > 0 && (
              <ul className="fx-field-errors" data-testid="cron-zone-problem">
                {zoneProblems.map((p, i) => (
                  <li key={i}>Time zone: {p.message}</li>
                ))}
              </ul>
            )}
            {answer?.error && (
              <p className="fx-muted" data-testid="cron-preview-error">
                No preview of the fire times: {answer.error}
              </p>
            )}
            {preview && (
              <>
                <div className="fx-cron-next-head">
                  {preview.next.length ? `Next ${preview.next.length} runs` : 'It never fires again'}{' '}
                  <span className="fx-muted">· {preview.timezone}</span>
                </div>
                <ol className="fx-cron-next" data-testid="cron-next">
                  {preview.next.map((utc, i) => (
                    <li key={utc} data-testid="cron-next-time" title={utc}>
                      <span>{formatFireTime(preview.next_local[i] ?? utc, utc, preview.timezone, seconds)}</span>
                      <span className="fx-muted">{relativeTime(Date.parse(utc), now)}</span>
                    </li>
                  ))}
                </ol>
              </>
            )}
          </>
        )}
      </div>
      <ScheduleNotice />
    </div>
  );
}

/** IANA zones this browser knows (for suggestions only: the server decides what is valid). */
let zones: string[] | null = null;
function knownZones(): string[] {
  if (!zones) {
    const f = (Intl as unknown as { supportedValuesOf?: (k: string) => string[] }).supportedValuesOf;
    try {
      zones = f ? ['UTC', ...f('timeZone').filter((z) => z !== 'UTC')] : ['UTC'];
    } catch {
      zones = ['UTC'];
    }
  }
  return zones;
}

/** A schedule trigger's zone: a plain field (not a template) that suggests IANA names. */
export function TimezoneWidget(props: WidgetProps) {
  const { id, value, onChange, onBlur, onFocus, disabled, readonly, rawErrors, placeholder } = props;
  const listId = `${id}-zones`;
  return (
    <>
      <input
        id={id}
        className={`fx-input fx-mono ${rawErrors?.length ? 'is-invalid' : ''}`}
        value={typeof value === 'string' ? value : ''}
        list={listId}
        spellCheck={false}
        autoComplete="off"
        placeholder={placeholder || 'UTC (default)'}
        disabled={disabled || readonly}
        data-testid={`input-${id}`}
        onChange={(e) => onChange(e.target.value === '' ? undefined : e.target.value)}
        onBlur={() => onBlur(id, value)}
        onFocus={() => onFocus(id, value)}
      />
      <datalist id={listId}>
        {knownZones().map((z) => (
          <option key={z} value={z} />
        ))}
      </datalist>
    </>
  );
}
