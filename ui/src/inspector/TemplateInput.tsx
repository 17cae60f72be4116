import { createContext, Fragment, useContext, useRef, useState, type ReactNode } from 'react';
import { Braces } from 'lucide-react';
import { completionsAt, DataTree, TemplatePreviewLine, useScope } from './DataHelp';

// Whether a pointer is down anywhere: the insert hint sits in the flow under its field (it never
// covers a button), so it must not vanish, and move what is below it, in the middle of a click.
let pointerDown = false;
if (typeof document !== 'undefined') {
  document.addEventListener('pointerdown', () => (pointerDown = true), true);
  document.addEventListener('pointerup', () => setTimeout(() => (pointerDown = false)), true);
}

/** Run `f` once the click in progress (if any) has landed where it was aimed. */
function afterClick(f: () => void): void {
  if (!pointerDown) return f();
  document.addEventListener('pointerup', () => setTimeout(f), { capture: true, once: true });
}

/** What the inspector knows about the step being edited: for the hints of template fields. */
export interface InspectorInfo {
  stepId: string;
  /** Steps that run before this one (their outputs are in scope). */
  upstream: string[];
  /** Server problems by config path (`url`, `headers.Idempotency-Key`, `routes.0.when`). */
  fieldErrors: Record<string, string[]>;
  /** Inside or after an error handler, `error` is in scope. */
  hasError: boolean;
}

export const InspectorContext = createContext<InspectorInfo>({ stepId: '', upstream: [], fieldErrors: {}, hasError: false });

const ROOTS = /\b(input|steps|env|run|error)\b/g;

function highlightExpr(text: string, key: string): ReactNode {
  const out: ReactNode[] = [];
  let last = 0;
  for (const m of text.matchAll(ROOTS)) {
    if (m.index! > last) out.push(text.slice(last, m.index));
    out.push(
      <span key={`${key}-${m.index}`} className="tpl-root">
        {m[0]}
      </span>,
    );
    last = m.index! + m[0].length;
  }
  out.push(text.slice(last));
  return out;
}

/** Highlighted copy of a template: `{{ … }}` blocks, the names in scope, an unclosed `{{` in red. */
export function highlight(text: string, expression = false): ReactNode {
  if (expression) return <span className="tpl-expr">{highlightExpr(text, 'e')}</span>;
  const parts = text.split(/(\{\{[\s\S]*?\}\}|\{\{[\s\S]*$)/);
  return parts.map((p, i) => {
    if (!p.startsWith('{{')) return <Fragment key={i}>{p}</Fragment>;
    const closed = p.endsWith('}}') && p.length >= 4;
    const inner = closed ? p.slice(2, -2) : p.slice(2);
    return (
      <span key={i} className={closed ? 'tpl-expr' : 'tpl-bad'}>
        <span className="tpl-brace">{'{{'}</span>
        {highlightExpr(inner, String(i))}
        {closed && <span className="tpl-brace">{'}}'}</span>}
      </span>
    );
  });
}

export interface TemplateInputProps {
  id?: string;
  value: string;
  onChange(v: string): void;
  onBlur?(): void;
  onFocus?(): void;
  placeholder?: string;
  multiline?: boolean;
  /** A condition without braces (router `when`). */
  expression?: boolean;
  /** A plain value (no templates expected): no hints. */
  plain?: boolean;
  disabled?: boolean;
  invalid?: boolean;
  testId?: string;
  /** Where the field sits, for the preview's rule on secrets (default `other`). */
  place?: 'header' | 'url' | 'other';
}

/**
 * A text field for templates: monospace, `{{ }}` highlighted under the caret (a transparent
 * textarea over a highlighted copy), and a hint with the names in scope that inserts them.
 */
export function TemplateInput(props: TemplateInputProps) {
  const { id, value, onChange, placeholder, multiline, expression, plain, disabled, invalid, testId, place } = props;
  const info = useContext(InspectorContext);
  const [focused, setFocused] = useState(false);
  const [dataOpen, setDataOpen] = useState(false);
  const [caret, setCaret] = useState<number | null>(null);
  const ref = useRef<HTMLTextAreaElement>(null);
  const scope = useScope(info.upstream);
  const completion = focused && !plain && caret !== null ? completionsAt(value, caret, scope, expression) : null;
  /** Replace the typed part of a path with `key` (path completion). */
  const complete = (key: string) => {
    if (!completion || caret === null) return;
    const next = value.slice(0, completion.from) + key + value.slice(caret);
    onChange(next);
    const at = completion.from + key.length;
    setCaret(at);
    requestAnimationFrame(() => {
      ref.current?.focus();
      ref.current?.setSelectionRange(at, at);
    });
  };

  const names = [
    { label: 'input', insert: 'input.' },
    ...info.upstream.map((s) => ({ label: `steps.${s}.output`, insert: `steps.${s}.output` })),
    ...(info.hasError ? [{ label: 'error', insert: 'error.message' }] : []),
    { label: 'env.NAME', insert: 'env.' },
    { label: 'run.id', insert: 'run.id' },
  ];

  const insert = (text: string) => {
    const el = ref.current;
    const start = el?.selectionStart ?? value.length;
    const end = el?.selectionEnd ?? value.length;
    const before = value.slice(0, start);
    const inside = /\{\{(?![\s\S]*\}\})[^]*$/.test(before) || expression;
    const piece = inside ? text : `{{ ${text} }}`;
    const next = before + piece + value.slice(end);
    onChange(next);
    const caret = before.length + (inside ? piece.length : piece.length - 3);
    requestAnimationFrame(() => {
      el?.focus();
      el?.setSelectionRange(caret, caret);
    });
  };

  return (
    <div className={`fx-tpl ${invalid ? 'is-invalid' : ''} ${plain ? 'is-plain' : ''}`}>
      <div className="fx-tpl-box">
        <div className="fx-tpl-hl" aria-hidden>
          {highlight(value, expression)}
          {'\u200b'}
        </div>
        <textarea
          id={id}
          ref={ref}
          rows={1}
          spellCheck={false}
          autoComplete="off"
          value={value}
          placeholder={placeholder}
          disabled={disabled}
          data-testid={testId}
          onChange={(e) => {
            onChange(multiline ? e.target.value : e.target.value.replace(/\n/g, ''));
            setCaret(e.target.selectionStart);
          }}
          onSelect={(e) => setCaret((e.target as HTMLTextAreaElement).selectionStart)}
          onKeyDown={(e) => {
            if (e.key === 'Tab' && completion && !e.shiftKey) {
              e.preventDefault();
              complete(completion.items[0]);
              return;
            }
            if (e.key === 'Enter' && !multiline) e.preventDefault();
          }}
          onFocus={() => {
            setFocused(true);
            props.onFocus?.();
          }}
          onBlur={() => {
            afterClick(() => {
              if (document.activeElement !== ref.current) setFocused(false);
            });
            props.onBlur?.();
          }}
        />
      </div>
      {focused && !plain && (
        <div className="fx-tpl-hint" onMouseDown={(e) => e.preventDefault()}>
          {completion && (
            <span className="fx-tpl-complete" data-testid="tpl-completions">
              <span className="fx-muted">Tab:</span>
              {completion.items.map((k) => (
                <button key={k} type="button" className="fx-chip fx-chip-button" onClick={() => complete(k)} data-testid={`tpl-complete-${k}`}>
                  {k}
                </button>
              ))}
            </span>
          )}
          <span className="fx-muted">{expression ? 'Condition over' : 'Insert'}</span>
          {names.map((n) => (
            <button key={n.label} type="button" className="fx-chip" onClick={() => insert(n.insert)}>
              {n.label}
            </button>
          ))}
          <button
            type="button"
            className={`fx-chip fx-chip-button ${dataOpen ? 'is-active' : ''}`}
            aria-expanded={dataOpen}
            onClick={() => setDataOpen(!dataOpen)}
            data-testid="data-help"
            title="The sample input and the last run's outputs: click a field to insert its path"
          >
            <Braces size={12} aria-hidden /> Data
          </button>
          {!expression && <span className="fx-muted">· {'{{ x | default("") }}'} for optional values</span>}
          {dataOpen && <DataTree upstream={info.upstream} onPick={insert} />}
          <TemplatePreviewLine template={value} expression={expression} upstream={info.upstream} place={place} />
        </div>
      )}
    </div>
  );
}
