import { ChevronDown, ChevronRight } from 'lucide-react';
import { memo, useState } from 'react';
import { isLosslessNumber, stringifyJson } from '../api';

const MAX_ITEMS = 200;

type Json = unknown;

function isContainer(v: Json): v is Record<string, Json> | Json[] {
  return v !== null && typeof v === 'object' && !isLosslessNumber(v);
}

function Scalar({ v }: { v: Json }) {
  if (v === null) return <span className="fx-json-null">null</span>;
  if (typeof v === 'string') return <span className="fx-json-str">{JSON.stringify(v)}</span>;
  if (typeof v === 'number' || isLosslessNumber(v)) return <span className="fx-json-num">{String(v)}</span>;
  if (typeof v === 'boolean') return <span className="fx-json-bool">{String(v)}</span>;
  return <span>{String(v)}</span>;
}

function NodeImpl({ name, v, depth, open: openDepth }: { name?: string; v: Json; depth: number; open: number }) {
  const [open, setOpen] = useState(depth < openDepth);
  const [all, setAll] = useState(false);
  const label = name !== undefined ? <span className="fx-json-key">{name}: </span> : null;
  if (!isContainer(v)) {
    return (
      <div className="fx-json-line">
        {label}
        <Scalar v={v} />
      </div>
    );
  }
  const arr = Array.isArray(v);
  const entries: [string, Json][] = arr ? (v as Json[]).map((x, i) => [String(i), x]) : Object.entries(v);
  const [l, r] = arr ? ['[', ']'] : ['{', '}'];
  if (!entries.length) {
    return (
      <div className="fx-json-line">
        {label}
        <span className="fx-json-punct">
          {l}
          {r}
        </span>
      </div>
    );
  }
  const shown = all ? entries : entries.slice(0, MAX_ITEMS);
  return (
    <div className="fx-json-node">
      <div className="fx-json-line fx-json-toggle" onClick={() => setOpen((o) => !o)} role="button" aria-expanded={open}>
        <span className="fx-json-caret">{open ? <ChevronDown size={14} aria-hidden /> : <ChevronRight size={14} aria-hidden />}</span>
        {label}
        <span className="fx-json-punct">{l}</span>
        {!open && (
          <span className="fx-muted">
            {' '}
            {entries.length} {arr ? (entries.length === 1 ? 'item' : 'items') : entries.length === 1 ? 'key' : 'keys'} {r}
          </span>
        )}
      </div>
      {open && (
        <div className="fx-json-children">
          {shown.map(([k, x]) => (
            <JsonNode key={k} name={arr ? undefined : k} v={x} depth={depth + 1} open={openDepth} />
          ))}
          {!all && entries.length > MAX_ITEMS && (
            <button className="fx-btn fx-btn-small" onClick={() => setAll(true)}>
              Show {entries.length - MAX_ITEMS} more
            </button>
          )}
          <div className="fx-json-line fx-json-punct">{r}</div>
        </div>
      )}
    </div>
  );
}

const JsonNode = memo(NodeImpl);

/** A collapsible JSON viewer with a copy button (the whole value, pretty-printed). */
export function JsonView({ value, open = 2, label, testId }: { value: Json; open?: number; label?: string; testId?: string }) {
  const [copied, setCopied] = useState(false);
  const copy = async () => {
    const text = value === undefined ? '' : stringifyJson(value, 2);
    try {
      await navigator.clipboard.writeText(text);
    } catch {
      // Clipboard refused (no permission): select-and-copy through a hidden textarea.
      const ta = document.createElement('textarea');
      ta.value = text;
      document.body.appendChild(ta);
      ta.select();
      document.execCommand('copy');
      ta.remove();
    }
    setCopied(true);
    setTimeout(() => setCopied(false), 1200);
  };
  return (
    <div className="fx-json" data-testid={testId}>
      <div className="fx-json-head">
        {label && <span className="fx-json-label">{label}</span>}
        <span className="fx-spacer" />
        <button className="fx-btn fx-btn-small fx-btn-ghost" onClick={() => void copy()} title="Copy as JSON" data-testid="json-copy">
          {copied ? 'Copied' : 'Copy'}
        </button>
      </div>
      <div className="fx-json-body">
        {value === undefined ? <span className="fx-muted">none</span> : <JsonNode v={value} depth={0} open={open} />}
      </div>
    </div>
  );
}
