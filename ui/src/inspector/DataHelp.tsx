// Data help for template fields: a tree of the data in scope (the sample run input and the
// last run's outputs of the steps upstream) whose fields insert their path on click, and a live
// preview of the field rendered by the server exactly as a step would render it.

import { ChevronDown, ChevronRight } from 'lucide-react';
import { useEffect, useMemo, useState } from 'react';
import { isLosslessNumber, parseJson, stringifyJson, type TemplatePreviewAnswer } from '../api';
import { useEditor } from '../store/editor';

const IDENT = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** `base.key`, `base["odd key"]`, `base[0]`: a path a template can read. */
export function childPath(base: string, key: string | number): string {
  if (typeof key === 'number') return `${base}[${key}]`;
  return IDENT.test(key) ? `${base}.${key}` : `${base}[${JSON.stringify(key)}]`;
}

/** The sample input as the editor holds it (lossless), or undefined when it is not JSON. */
function useSample(): unknown {
  const text = useEditor((s) => s.inputText);
  return useMemo(() => {
    try {
      return text.trim() ? parseJson(text) : {};
    } catch {
      return undefined;
    }
  }, [text]);
}

/** Outputs of `upstream` steps from the run shown in the editor (the last dry or live run). */
function useUpstreamOutputs(upstream: string[]): Record<string, unknown> {
  const runByStep = useEditor((s) => s.runByStep);
  return useMemo(() => {
    const out: Record<string, unknown> = {};
    for (const id of upstream) {
      const rec = runByStep[id];
      if (rec && rec.output !== undefined && rec.output !== null) out[id] = rec.output;
    }
    return out;
  }, [runByStep, upstream]);
}

function isBranch(v: unknown): v is Record<string, unknown> | unknown[] {
  return v !== null && typeof v === 'object' && !isLosslessNumber(v);
}

function leafText(v: unknown): string {
  const s = typeof v === 'string' ? JSON.stringify(v) : stringifyJson(v);
  return s.length > 48 ? `${s.slice(0, 47)}…` : s;
}

function TreeNode({ label, path, value, depth, onPick }: { label: string; path: string; value: unknown; depth: number; onPick(path: string): void }) {
  const [open, setOpen] = useState(depth < 1);
  const branch = isBranch(value);
  const entries: [string | number, unknown][] = branch
    ? Array.isArray(value)
      ? value.slice(0, 50).map((v, i) => [i, v])
      : Object.entries(value).slice(0, 100)
    : [];
  return (
    <li>
      <div className="fx-data-row" style={{ paddingLeft: depth * 12 }}>
        {branch ? (
          <button type="button" className="fx-data-toggle" aria-label={open ? 'Collapse' : 'Expand'} onClick={() => setOpen(!open)} data-testid={`data-toggle-${path}`}>
            {open ? <ChevronDown size={13} aria-hidden /> : <ChevronRight size={13} aria-hidden />}
          </button>
        ) : (
          <span className="fx-data-toggle" />
        )}
        <button type="button" className="fx-data-key" title={`Insert ${path}`} onClick={() => onPick(path)} data-testid={`data-node-${path}`}>
          {label}
        </button>
        {!branch && <span className="fx-data-value fx-mono">{leafText(value)}</span>}
        {branch && !open && <span className="fx-muted">{Array.isArray(value) ? `[${value.length}]` : `{${Object.keys(value).length}}`}</span>}
      </div>
      {branch && open && (
        <ul>
          {entries.map(([k, v]) => (
            <TreeNode key={String(k)} label={String(k)} path={childPath(path, k)} value={v} depth={depth + 1} onPick={onPick} />
          ))}
        </ul>
      )}
    </li>
  );
}

/** The data in scope of a field as a tree; a click on a field inserts its path. */
export function DataTree({ upstream, onPick }: { upstream: string[]; onPick(path: string): void }) {
  const sample = useSample();
  const outputs = useUpstreamOutputs(upstream);
  const missing = upstream.filter((id) => !(id in outputs));
  return (
    <div className="fx-data-tree" data-testid="data-tree">
      <ul>
        {sample === undefined ? (
          <li className="fx-muted">input: the run input is not JSON (Run input tab)</li>
        ) : (
          <TreeNode label="input" path="input" value={sample} depth={0} onPick={onPick} />
        )}
        {Object.entries(outputs).map(([id, out]) => (
          <TreeNode key={id} label={`steps.${id}.output`} path={`steps.${id}.output`} value={out} depth={1} onPick={onPick} />
        ))}
      </ul>
      {missing.length > 0 && (
        <div className="fx-muted">
          {missing.map((m) => `steps.${m}`).join(', ')}: no output yet; Dry Run to see {missing.length === 1 ? 'it' : 'them'} here.
        </div>
      )}
    </div>
  );
}

/** The field rendered by the server against the sample input and the last run (debounced). */
export function TemplatePreviewLine({
  template,
  expression,
  upstream,
  place,
}: {
  template: string;
  expression?: boolean;
  upstream: string[];
  place?: 'header' | 'url' | 'other';
}) {
  const api = useEditor((s) => s.api);
  const secrets = useEditor((s) => s.meta.secrets);
  const sample = useSample();
  const outputs = useUpstreamOutputs(upstream);
  const [result, setResult] = useState<TemplatePreviewAnswer | null>(null);
  const shown = expression ? template.trim() !== '' : template.includes('{{');
  useEffect(() => {
    if (!api || !shown || sample === undefined) return;
    let live = true;
    const t = setTimeout(() => {
      api
        .previewTemplate({ template, expression, input: sample, steps: outputs, secrets: secrets ?? [], place: place ?? 'other' })
        .then((r) => live && setResult(r))
        .catch((e: Error) => live && setResult({ error: e.message, env_unset: [] }));
    }, 250);
    return () => {
      live = false;
      clearTimeout(t);
    };
  }, [api, template, expression, sample, outputs, shown, secrets, place]);
  if (!shown) return null;
  if (sample === undefined) return <div className="fx-tpl-preview fx-muted">Preview: the run input is not JSON</div>;
  if (!result) return <div className="fx-tpl-preview fx-muted" data-testid="tpl-preview" data-state="pending">Preview: …</div>;
  if (result.error !== undefined) {
    return (
      <div className="fx-tpl-preview" data-testid="tpl-preview" data-state="error">
        <span className="fx-muted">Preview:</span> <span className="fx-warning-text">{result.error}</span>
      </div>
    );
  }
  const text = typeof result.value === 'string' ? result.value : stringifyJson(result.value);
  return (
    <div className="fx-tpl-preview" data-testid="tpl-preview" data-state="ok" title="Rendered against the run input and the last run, as a step would render it">
      <span className="fx-muted">Preview:</span> <span className="fx-mono" data-testid="tpl-preview-value">{text}</span>
      {!!result.env_unset?.length && <span className="fx-muted"> (unset: {result.env_unset.map((n) => `env.${n}`).join(', ')})</span>}
    </div>
  );
}

/** What a template in this field can read: `input` (the sample) and `steps.<id>.output` of the
 * upstream steps that have one in the last run. */
export function useScope(upstream: string[]): Record<string, unknown> | undefined {
  const sample = useSample();
  const outputs = useUpstreamOutputs(upstream);
  return useMemo(() => {
    if (sample === undefined) return undefined;
    const steps: Record<string, unknown> = {};
    for (const [id, out] of Object.entries(outputs)) steps[id] = { output: out };
    return { input: sample, steps };
  }, [sample, outputs]);
}

/** Path completion at the caret: inside `{{ … }}` (or a condition), after `input.data.` or
 * `steps.seen.output.wr`, the keys of the value at the path so far that start with what is
 * typed. `from` is where the typed part starts (replaced by a pick). */
export function completionsAt(text: string, caret: number, scope: Record<string, unknown> | undefined, expression = false): { from: number; items: string[] } | null {
  if (!scope) return null;
  const before = text.slice(0, caret);
  if (!expression) {
    const open = before.lastIndexOf('{{');
    if (open < 0 || before.lastIndexOf('}}') > open) return null;
  }
  const m = /([A-Za-z_][\w-]*(?:\.[\w-]+|\[\d+\])*)\.([\w-]*)$/.exec(before);
  if (!m) return null;
  let cur: unknown = scope;
  for (const seg of m[1].split(/\.|\[(\d+)\]/).filter((x) => x !== undefined && x !== '')) {
    if (cur === null || typeof cur !== 'object' || isLosslessNumber(cur)) return null;
    cur = Array.isArray(cur) ? cur[Number(seg)] : (cur as Record<string, unknown>)[seg];
  }
  if (cur === null || typeof cur !== 'object' || Array.isArray(cur) || isLosslessNumber(cur)) return null;
  const typed = m[2];
  const items = Object.keys(cur)
    .filter((k) => k.startsWith(typed) && k !== typed && IDENT.test(k))
    .slice(0, 8);
  return items.length ? { from: caret - typed.length, items } : null;
}
