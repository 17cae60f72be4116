// Turns a step kind's JSON Schema (generated from the engine's Rust types) into what the form
// library renders: the schema without its draft marker and root title, and a uiSchema that
// picks template-aware inputs, key/value editors and JSON editors.

import type { UiSchema } from '@rjsf/utils';
import type { JsonSchema } from '../store/graph';
import { deref } from '../store/graph';
import { humanize } from '../app/format';

const isObj = (v: unknown): v is JsonSchema => !!v && typeof v === 'object' && !Array.isArray(v);

function typesOf(s: JsonSchema): string[] {
  const t = s.type;
  return Array.isArray(t) ? (t as string[]) : typeof t === 'string' ? [t] : [];
}

/** Names of config fields that are conditions (expressions without braces). */
const EXPRESSION_FIELDS = new Set(['when']);
/** Names whose value is not a template (plain identifiers). */
const PLAIN_FIELDS = new Set(['name', 'namespace']);

function uiFor(name: string, raw: JsonSchema, root: JsonSchema, required = false): UiSchema {
  const s = deref(raw, root) ?? {};
  const types = typesOf(s);
  // The label: the field's `title` from its Rust config type (`#[schemars(title = …)]`), else
  // one made from its name.
  const title = typeof raw.title === 'string' && raw.title ? raw.title : humanize(name);
  const ui: UiSchema = { 'ui:title': title };
  const hasChoices = Array.isArray(s.enum) || Array.isArray(s.oneOf) || Array.isArray(s.anyOf);
  // A time: one text field that takes units (`4d`, `36h`) or a plain number in the field's unit.
  if (s['x-fluxo-duration']) return { ...ui, 'ui:field': 'duration' };
  if (!types.length && !hasChoices && !s.properties) {
    // Any JSON (a body, a stored value, a dry-run sample): edited as JSON text.
    return { ...ui, 'ui:field': 'json' };
  }
  if (types.includes('object') && !s.properties && s.additionalProperties !== false) {
    const anyValue = s.additionalProperties === true || !isObj(s.additionalProperties) || !typesOf(s.additionalProperties).includes('string');
    return { ...ui, 'ui:field': 'map', 'ui:options': { anyValue } };
  }
  if (types.includes('string') && !hasChoices) {
    return {
      ...ui,
      'ui:widget': 'template',
      'ui:options': { expression: EXPRESSION_FIELDS.has(name), plain: PLAIN_FIELDS.has(name) },
    };
  }
  if (types.includes('boolean')) return { ...ui, 'ui:widget': 'bool' };
  if ((types.includes('integer') || types.includes('number')) && s.default !== undefined && s.default !== null) {
    return { ...ui, 'ui:placeholder': `${s.default} (default)` };
  }
  if (types.includes('array') && isObj(s.items)) {
    const item = deref(s.items as JsonSchema, root) ?? {};
    const props = (item.properties ?? {}) as Record<string, JsonSchema>;
    const items: UiSchema = { 'ui:label': false };
    const itemRequired = new Set(Array.isArray(item.required) ? (item.required as string[]) : []);
    for (const [k, v] of Object.entries(props)) items[k] = uiFor(k, v, root, itemRequired.has(k));
    // A list of plain strings (a webhook's `allowed_origins`): an item left empty is "", not
    // null, so the engine says what it wants ("`` is not a web origin …") instead of "invalid
    // type: null".
    if (typesOf(item).includes('string') && !item.properties) items['ui:emptyValue'] = '';
    return { ...ui, items, 'ui:options': { orderable: true } };
  }
  if (hasChoices) {
    // The empty first option says what leaving it unset means: a required one must be chosen,
    // an optional one falls back to its default (named when the schema names it).
    if (required) return { ...ui, 'ui:placeholder': 'Choose…' };
    const d = s.default;
    return { ...ui, 'ui:placeholder': d !== undefined && d !== null ? `${String(d)} (default)` : 'Not set' };
  }
  return ui;
}

export interface FormSpec {
  schema: JsonSchema;
  uiSchema: UiSchema;
}

const cache = new WeakMap<JsonSchema, FormSpec>();

/**
 * Normalise for the form library: a `oneOf` of constants without a `type` (how schemars writes
 * a documented string enum) gets its type and a title per option, so it renders as a select.
 */
function normalise(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(normalise);
  if (!isObj(v)) return v;
  const out: JsonSchema = Object.fromEntries(Object.entries(v).map(([k, x]) => [k, normalise(x)]));
  const alts = out.oneOf;
  // A new item of a list of strings starts as "" (the form library would add null).
  if (out.type === 'array' && isObj(out.items) && (out.items as JsonSchema).type === 'string' && (out.items as JsonSchema).default === undefined) {
    out.items = { ...(out.items as JsonSchema), default: '' };
  }
  if (Array.isArray(alts) && alts.length && alts.every((a) => isObj(a) && 'const' in a)) {
    if (!out.type) out.type = (alts[0] as JsonSchema).type ?? 'string';
    out.oneOf = alts.map((a) => ({ ...(a as JsonSchema), title: (a as JsonSchema).title ?? String((a as JsonSchema).const) }));
  }
  return out;
}

export function formSpec(configSchema: JsonSchema): FormSpec {
  const hit = cache.get(configSchema);
  if (hit) return hit;
  const { $schema: _s, title: _t, description: _d, ...schema } = normalise(configSchema) as JsonSchema;
  void _s;
  void _t;
  void _d;
  const uiSchema: UiSchema = { 'ui:submitButtonOptions': { norender: true } };
  const props = (schema.properties ?? {}) as Record<string, JsonSchema>;
  const required = new Set(Array.isArray(schema.required) ? (schema.required as string[]) : []);
  for (const [k, v] of Object.entries(props)) uiSchema[k] = uiFor(k, v, schema, required.has(k));
  const spec = { schema, uiSchema };
  cache.set(configSchema, spec);
  return spec;
}

/** Drop `undefined` members deeply (what JSON would drop anyway) for comparison and storage. */
export function clean<T>(v: T): T {
  return v === undefined ? v : (JSON.parse(JSON.stringify(v)) as T);
}

export function sameJson(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}
