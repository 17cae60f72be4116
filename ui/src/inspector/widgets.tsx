// Custom pieces of the JSON-Schema form: template fields, key/value maps, JSON values,
// booleans that show their default, markdown-ish help text.

import { ArrowDown, ArrowUp, Copy, Plus, X, type LucideIcon } from 'lucide-react';
import { useContext, useEffect, useState, type ReactNode } from 'react';
import type { DescriptionFieldProps, FieldProps, IconButtonProps, RegistryFieldsType, RegistryWidgetsType, WidgetProps } from '@rjsf/utils';
import { InspectorContext, TemplateInput } from './TemplateInput';
import { humanize } from '../app/format';

/** `code`, **bold** and line breaks of the schema's doc comments. */
export function Markdownish({ text }: { text: string }) {
  const parts = text.split(/(`[^`]+`|\*\*[^*]+\*\*)/);
  return (
    <>
      {parts.map((p, i) =>
        p.startsWith('`') ? (
          <code key={i}>{p.slice(1, -1)}</code>
        ) : p.startsWith('**') ? (
          <strong key={i}>{p.slice(2, -2)}</strong>
        ) : (
          p.replace(/\n/g, ' ')
        ),
      )}
    </>
  );
}

function DescriptionField({ id, description }: DescriptionFieldProps) {
  if (!description) return null;
  return (
    <div id={id} className="field-description">
      {typeof description === 'string' ? <Markdownish text={description} /> : description}
    </div>
  );
}

function pathKey(fieldPath: (string | number)[]): string {
  return fieldPath.map(String).join('.');
}

function ServerErrors({ path }: { path: string }) {
  const info = useContext(InspectorContext);
  const errs = info.fieldErrors[path];
  if (!errs?.length) return null;
  return (
    <ul className="fx-field-errors" data-testid={`field-error-${path}`}>
      {errs.map((e, i) => (
        <li key={i}>{e}</li>
      ))}
    </ul>
  );
}

function TemplateWidget(props: WidgetProps) {
  const { id, value, onChange, onBlur, onFocus, options, disabled, readonly, placeholder, rawErrors } = props;
  return (
    <TemplateInput
      id={id}
      value={typeof value === 'string' ? value : value === undefined || value === null ? '' : String(value)}
      onChange={(v) => onChange(v === '' ? options.emptyValue : v)}
      onBlur={() => onBlur(id, value)}
      onFocus={() => onFocus(id, value)}
      placeholder={placeholder}
      expression={!!options.expression}
      plain={!!options.plain}
      multiline={!!options.multiline}
      disabled={disabled || readonly}
      invalid={!!rawErrors?.length}
      testId={`input-${id}`}
      place={/(^|_)url$/.test(id) ? 'url' : 'other'}
    />
  );
}

function BoolWidget(props: WidgetProps) {
  const { id, value, onChange, schema, disabled, readonly, label } = props;
  const dflt = schema.default;
  const effective = value === undefined ? dflt === true : !!value;
  return (
    <label className="fx-check" htmlFor={id}>
      <input
        id={id}
        type="checkbox"
        checked={effective}
        disabled={disabled || readonly}
        data-testid={`input-${id}`}
        onChange={(e) => onChange(e.target.checked)}
      />
      <span>{label}</span>
      {value === undefined && typeof dflt === 'boolean' && <span className="fx-muted"> (default)</span>}
    </label>
  );
}

function FieldHead({ title, description, required }: { title: string; description?: unknown; required?: boolean }) {
  return (
    <>
      <label className="control-label">
        {title}
        {required && <span className="required">*</span>}
      </label>
      {typeof description === 'string' && (
        <div className="field-description">
          <Markdownish text={description} />
        </div>
      )}
    </>
  );
}

interface Row {
  key: string;
  text: string;
  json: boolean;
}

function rowsOf(v: unknown): Row[] {
  if (!v || typeof v !== 'object' || Array.isArray(v)) return [];
  return Object.entries(v as Record<string, unknown>).map(([key, x]) =>
    typeof x === 'string' ? { key, text: x, json: false } : { key, text: JSON.stringify(x), json: true },
  );
}

function objectOf(rows: Row[]): { value: Record<string, unknown>; bad: number[] } {
  const value: Record<string, unknown> = {};
  const bad: number[] = [];
  rows.forEach((r, i) => {
    if (!r.key) return;
    if (r.json) {
      try {
        value[r.key] = JSON.parse(r.text);
      } catch {
        bad.push(i);
      }
    } else value[r.key] = r.text;
  });
  return { value, bad };
}

/** A `{name: template}` map (headers, query, transform fields) as editable rows. */
function MapField(props: FieldProps) {
  const { formData, onChange, fieldPathId, uiSchema, schema, name, required } = props;
  const anyValue = !!(uiSchema?.['ui:options'] as { anyValue?: boolean } | undefined)?.anyValue;
  const [rows, setRows] = useState<Row[]>(() => rowsOf(formData));
  const external = JSON.stringify(formData ?? {});
  // Follow changes made elsewhere (undo, another field), keep half-typed rows otherwise.
  useEffect(() => {
    if (JSON.stringify(objectOf(rows).value) !== external) setRows(rowsOf(formData));
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [external]);
  const { bad } = objectOf(rows);
  const base = pathKey(fieldPathId.path);
  const commit = (next: Row[]) => {
    setRows(next);
    const { value } = objectOf(next);
    onChange(Object.keys(value).length || formData !== undefined ? value : undefined, fieldPathId.path);
  };
  const title = (uiSchema?.['ui:title'] as string) ?? humanize(name);
  return (
    <div className="form-group field fx-map" data-testid={`map-${base}`}>
      <FieldHead title={title} description={schema.description} required={required} />
      {rows.map((r, i) => (
        <div className="fx-map-row" key={i}>
          <input
            className="fx-map-key"
            placeholder="name"
            value={r.key}
            data-testid={`map-${base}-key-${i}`}
            onChange={(e) => commit(rows.map((x, j) => (j === i ? { ...x, key: e.target.value } : x)))}
          />
          <div className="fx-map-value" data-testid={`map-${base}-value-${i}`}>
            <TemplateInput
              value={r.text}
              invalid={bad.includes(i)}
              placeholder={r.json ? 'JSON, e.g. true or 3' : 'value or {{ template }}'}
              onChange={(v) => commit(rows.map((x, j) => (j === i ? { ...x, text: v } : x)))}
              plain={r.json}
              place={base === 'headers' ? 'header' : 'other'}
            />
            <ServerErrors path={`${base}.${r.key}`} />
          </div>
          {anyValue && (
            <select
              className="fx-map-type"
              value={r.json ? 'json' : 'text'}
              title="Text (templates allowed) or a JSON value"
              onChange={(e) => commit(rows.map((x, j) => (j === i ? { ...x, json: e.target.value === 'json' } : x)))}
            >
              <option value="text">text</option>
              <option value="json">JSON</option>
            </select>
          )}
          <button aria-label="Remove" type="button" className="fx-icon-btn" title="Remove" onClick={() => commit(rows.filter((_, j) => j !== i))}>
            <X size={15} aria-hidden />
          </button>
        </div>
      ))}
      <button
        type="button"
        className="fx-btn fx-btn-small"
        data-testid={`map-${base}-add`}
        onClick={() => setRows([...rows, { key: '', text: '', json: false }])}
      >
        + Add {name === 'headers' ? 'header' : name === 'query' ? 'parameter' : 'field'}
      </button>
    </div>
  );
}

/** Any JSON value (a request body, a stored value, a dry-run sample), as JSON text. */
function JsonField(props: FieldProps) {
  const { formData, onChange, fieldPathId, uiSchema, schema, name, required } = props;
  const toText = (v: unknown) => (v === undefined ? '' : JSON.stringify(v, null, 2));
  const [text, setText] = useState(() => toText(formData));
  const [error, setError] = useState<string | null>(null);
  const external = JSON.stringify(formData);
  useEffect(() => {
    let parsed: unknown;
    try {
      parsed = text.trim() ? JSON.parse(text) : undefined;
    } catch {
      return; // keep the half-typed text
    }
    if (JSON.stringify(parsed) !== external) {
      setText(toText(formData));
      setError(null);
    }
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [external]);
  const base = pathKey(fieldPathId.path);
  const title = (uiSchema?.['ui:title'] as string) ?? humanize(name);
  return (
    <div className="form-group field fx-json">
      <FieldHead title={title} description={schema.description} required={required} />
      <textarea
        className={`fx-code ${error ? 'is-invalid' : ''}`}
        spellCheck={false}
        value={text}
        rows={Math.min(14, Math.max(2, text.split('\n').length))}
        placeholder='JSON, e.g. {"id": "{{ input.id }}"} or "text"'
        data-testid={`json-${base}`}
        onChange={(e) => {
          const t = e.target.value;
          setText(t);
          if (!t.trim()) {
            setError(null);
            onChange(undefined, fieldPathId.path);
            return;
          }
          try {
            const v = JSON.parse(t);
            setError(null);
            onChange(v, fieldPathId.path);
          } catch (err) {
            setError((err as Error).message);
          }
        }}
      />
      {error && <div className="fx-field-errors">Not JSON yet: {error}</div>}
    </div>
  );
}

/** Units the engine's duration parser (humantime) reads, for a hint before the server answers. */
const DURATION_RE =
  /^(\s*\d+\s*(nsec|ns|usec|us|µs|msec|ms|seconds?|secs?|s|minutes?|mins?|m|hours?|hrs?|h|days?|d|weeks?|w|months?|M|years?|y)\s*)+$/;
const PLAIN_NUMBER_RE = /^\s*\d+(\.\d+)?\s*$/;

/** A duration in words: `345600 s` → `4 days`, for the hint under a plain number. */
function spelled(n: number, unit: 's' | 'ms'): string {
  let ms = unit === 'ms' ? n : n * 1000;
  const parts: string[] = [];
  for (const [size, name] of [
    [86_400_000, 'd'],
    [3_600_000, 'h'],
    [60_000, 'm'],
    [1000, 's'],
    [1, 'ms'],
  ] as const) {
    const k = Math.floor(ms / size);
    if (k) parts.push(`${k}${name}`);
    ms -= k * size;
  }
  return parts.join(' ') || '0s';
}

/**
 * A time (`"x-fluxo-duration"` in the config schema): one text field that takes units (`4d`,
 * `36h`, `90s`, `500ms`) or a plain number in the field's unit (kept a number in the file, as
 * before). Says what a plain number means, and hints when the text is not a duration yet; the
 * engine's check names the field and the accepted forms.
 */
function DurationField(props: FieldProps) {
  const { formData, onChange, fieldPathId, uiSchema, schema, name, required } = props;
  const unit = (schema as Record<string, unknown>)['x-fluxo-duration'] === 'ms' ? 'ms' : 's';
  const toText = (v: unknown) => (v === undefined || v === null ? '' : String(v));
  const [text, setText] = useState(() => toText(formData));
  const external = toText(formData);
  useEffect(() => {
    if (external !== text.trim()) setText(external);
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [external]);
  const base = pathKey(fieldPathId.path);
  const title = (uiSchema?.['ui:title'] as string) ?? humanize(name);
  const dflt = schema.default;
  const t = text.trim();
  const plain = PLAIN_NUMBER_RE.test(t);
  const bad = t !== '' && !plain && !DURATION_RE.test(t);
  return (
    <div className="form-group field fx-duration">
      <FieldHead title={title} description={schema.description} required={required} />
      <input
        id={fieldPathId.$id}
        className={`form-control ${bad ? 'is-invalid' : ''}`}
        value={text}
        spellCheck={false}
        placeholder={dflt !== undefined && dflt !== null ? `${String(dflt)}${unit === 'ms' ? ' ms' : ' s'} (default)` : 'e.g. 4d, 36h, 90s'}
        aria-invalid={bad}
        data-testid={`duration-${base}`}
        onChange={(e) => {
          const v = e.target.value;
          setText(v);
          const s = v.trim();
          onChange(s === '' ? undefined : PLAIN_NUMBER_RE.test(s) ? Number(s) : s, fieldPathId.path);
        }}
      />
      <div className={bad ? 'fx-field-errors' : 'fx-duration-hint fx-muted'} data-testid={`duration-hint-${base}`}>
        {bad
          ? `Not a duration yet: write a number of ${unit === 'ms' ? 'milliseconds' : 'seconds'}, or use units: 4d, 36h, 90s, 500ms.`
          : plain
            ? `${t} ${unit === 'ms' ? 'milliseconds' : 'seconds'} = ${spelled(Number(t), unit)}. Units work too: 4d, 36h, 90s, 500ms.`
            : 'Units: ms, s, m, h, d, w (e.g. 4d, 36h, 1h 30m), or a plain number of ' + (unit === 'ms' ? 'milliseconds.' : 'seconds.')}
      </div>
    </div>
  );
}

function AddButton({ onClick, disabled, className }: IconButtonProps) {
  return (
    <button type="button" className={`fx-btn fx-btn-small ${className ?? ''}`} onClick={onClick} disabled={disabled} data-testid="array-add">
      <Plus size={14} aria-hidden /> Add
    </button>
  );
}

/** The form library's item buttons (move, copy, remove) with lucide icons and a name. */
function iconButton(Icon: LucideIcon, label: string, danger = false) {
  return function IconButton({ onClick, disabled, className, title, id }: IconButtonProps) {
    return (
      <button
        type="button"
        id={id}
        className={`btn ${danger ? 'btn-danger' : 'btn-default'} ${className ?? ''}`}
        onClick={onClick}
        disabled={disabled}
        title={title ?? label}
        aria-label={title ?? label}
      >
        <Icon size={14} aria-hidden />
      </button>
    );
  };
}

export const widgets: RegistryWidgetsType = { template: TemplateWidget, bool: BoolWidget };
export const fields: RegistryFieldsType = { map: MapField, json: JsonField, duration: DurationField };
export const templates = {
  DescriptionFieldTemplate: DescriptionField,
  ButtonTemplates: {
    AddButton,
    MoveUpButton: iconButton(ArrowUp, 'Move up'),
    MoveDownButton: iconButton(ArrowDown, 'Move down'),
    CopyButton: iconButton(Copy, 'Copy'),
    RemoveButton: iconButton(X, 'Remove', true),
  },
};

export function FieldErrorsFor({ path }: { path: string }): ReactNode {
  return <ServerErrors path={path} />;
}
