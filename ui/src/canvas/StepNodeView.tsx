import { memo, useEffect, useMemo, useRef, useState } from 'react';
import { Handle, NodeToolbar, Position, useReactFlow, useUpdateNodeInternals, type NodeProps } from '@xyflow/react';
import { useEditor, runFinished } from '../store/editor';
import { portsOf, type StepNode } from '../store/graph';
import type { StepKind } from '../api';
import { excerpt, formatMs } from '../app/format';
import { CircleX, Plus, TriangleAlert } from 'lucide-react';
import { CategoryIcon } from './icons';
import { describeCron } from '../inspector/schedule';


/** One line saying what the step is set to do. */
function summary(kind: string, c: Record<string, unknown>, workflowId: string): string {
  const str = (v: unknown) => (typeof v === 'string' ? v : v === undefined || v === null ? '' : JSON.stringify(v));
  switch (kind) {
    case 'webhook_trigger':
      return `POST /hooks/${workflowId}`;
    case 'manual_trigger':
      return 'Started from the app, CLI or API';
    case 'schedule_trigger': {
      const cron = str(c.cron).trim();
      const tz = str(c.timezone).trim();
      if (!cron) return 'no schedule yet';
      return `${describeCron(cron) ?? cron}${tz && tz !== 'UTC' ? ` (${tz})` : ''}`;
    }
    case 'memory':
      return `${str(c.operation) || '?'} ${str(c.namespace) || '…'} / ${str(c.key) || '…'}`;
    case 'router': {
      const n = Array.isArray(c.routes) ? c.routes.length : 0;
      return `${n} route${n === 1 ? '' : 's'} · ${str(c.mode) || 'first'} match`;
    }
    case 'http_request':
      return `${str(c.method) || 'GET'} ${str(c.url) || '…'}`;
    case 'publish_output':
      return `POST ${str(c.url) || '…'}`;
    case 'error_handler':
      return `on error: ${str(c.mode) || '?'}`;
    case 'transform': {
      const f = c.fields && typeof c.fields === 'object' ? Object.keys(c.fields) : [];
      return f.length ? `{ ${f.join(', ')} }` : 'no fields';
    }
    default:
      return '';
  }
}

function PortHandle({ port }: { port: string }) {
  const isError = port === 'error';
  return (
    <Handle
      type="source"
      id={port}
      position={Position.Right}
      className={isError ? 'fx-handle fx-handle-error' : 'fx-handle fx-handle-out'}
      data-testid={`handle-${port}`}
      title={isError ? 'error: taken when this step fails' : port}
    />
  );
}

/** "+" beside a port (on a selected or hovered step): opens the step picker to the right of it,
 * and the picked step is added there, connected from this port (like dropping a wire). */
function PortPlus({ node, port }: { node: string; port: string }) {
  const openPicker = useEditor((s) => s.openPicker);
  const { screenToFlowPosition } = useReactFlow();
  return (
    <button
      type="button"
      className="fx-port-plus nodrag nopan"
      aria-label={`Add a step after ${node}.${port}`}
      title={`Add a step after this ${port === 'error' ? 'error port' : 'port'}`}
      data-testid={`port-plus-${port}`}
      onClick={(e) => {
        e.stopPropagation();
        const b = e.currentTarget.getBoundingClientRect();
        const host = (e.currentTarget.closest('.fx-canvas') as HTMLElement | null)?.getBoundingClientRect();
        const at = { x: b.right + 60, y: b.top + b.height / 2 };
        openPicker({
          screen: { x: at.x - (host?.left ?? 0), y: at.y - (host?.top ?? 0) },
          flow: screenToFlowPosition(at),
          from: node,
          port,
        });
      }}
    >
      <Plus size={11} aria-hidden />
    </button>
  );
}

function StepNodeViewImpl({ id, data, selected }: NodeProps<StepNode>) {
  const kind: StepKind | undefined = useEditor((s) => s.kinds[data.kind]);
  const workflowId = useEditor((s) => s.meta.id);
  const probs = useEditor((s) => s.problemsByStep[id]);
  const rec = useEditor((s) => s.runByStep[id]);
  const runState = useEditor((s) =>
    s.run ? (s.runByStep[id]?.status ?? (runFinished(s.run) ? 'skipped' : 'pending')) : null,
  );
  const [hover, setHover] = useState(false);
  const ports = useMemo(() => portsOf(kind, data.config), [kind, data.config]);
  // An app action: its app and operation, and how a repeat of its write dedupes.
  const app = useEditor((s) => (data.kind === 'action' ? s.connectors.find((c) => c.app === data.config.connector) : undefined));
  const op = app?.operations.find((o) => o.name === data.config.operation);
  const portKey = ports.join('|');
  const updateNodeInternals = useUpdateNodeInternals();
  // Handles moved (router routes changed): re-measure. Not on mount, where React Flow measures
  // anyway (and an early update would fire a queued fitView before the other nodes are sized).
  const lastPorts = useRef(portKey);
  useEffect(() => {
    if (lastPorts.current === portKey) return;
    lastPorts.current = portKey;
    updateNodeInternals(id);
  }, [id, portKey, updateNodeInternals]);

  const category = kind?.category ?? 'unknown';
  const isTrigger = !!kind?.trigger;
  const errors = probs?.errors.length ?? 0;
  const warnings = probs?.warnings.length ?? 0;
  const firstProblem = probs?.errors[0] ?? probs?.warnings[0];
  const mainPorts = ports.filter((p) => p !== 'error');
  const classes = [
    'fx-node',
    `fx-cat-${category}`,
    selected ? 'is-selected' : '',
    runState ? `run-${runState}` : '',
    errors ? 'has-errors' : warnings ? 'has-warnings' : '',
    !kind ? 'is-unknown' : '',
  ].join(' ');

  return (
    <div
      className={classes}
      data-testid={`node-${id}`}
      data-kind={data.kind}
      data-status={runState ?? ''}
      onMouseEnter={() => setHover(true)}
      onMouseLeave={() => setHover(false)}
    >
      {!isTrigger && <Handle type="target" id="in" position={Position.Left} className="fx-handle fx-handle-in" data-testid="handle-in" />}
      <div className="fx-node-head">
        <CategoryIcon category={category} />
        <span className="fx-node-title" data-testid="node-title">
          {data.name || kind?.title || data.kind}
        </span>
        {errors > 0 && (
          <span className="fx-badge fx-badge-error" data-testid="node-badge-error" title={probs!.errors.map((p) => p.message).join('\n')}>
            <CircleX size={11} strokeWidth={2.5} aria-label="errors" />
            <span>{errors}</span>
          </span>
        )}
        {warnings > 0 && (
          <span
            className="fx-badge fx-badge-warning"
            data-testid="node-badge-warning"
            data-codes={probs!.warnings.map((p) => p.code).join(' ')}
            title={probs!.warnings.map((p) => p.message).join('\n')}
          >
            <TriangleAlert size={11} strokeWidth={2.5} aria-label="warnings" />
            <span>{warnings}</span>
          </span>
        )}
      </div>
      <div className="fx-node-sub">
        <code>{id}</code>
        <span>{kind?.title ?? `unknown kind ${data.kind}`}</span>
      </div>
      <div className="fx-node-summary" title={summary(data.kind, data.config, workflowId)}>
        {op ? `${app!.title} · ${op.title}` : summary(data.kind, data.config, workflowId)}
      </div>
      {op?.dedupe && (
        <div
          className={`fx-dedupe-badge fx-dedupe-${op.dedupe.strategy}`}
          data-testid="node-dedupe-badge"
          title={`How a repeat of this write dedupes: ${op.dedupe.strategy}`}
        >
          {op.dedupe.badge}
        </div>
      )}
      {firstProblem && (
        <div
          className={`fx-node-problem ${firstProblem.severity}`}
          data-testid="node-problem"
          data-code={firstProblem.code}
          title={firstProblem.message}
        >
          {firstProblem.message}
        </div>
      )}
      {runState && (
        <div className="fx-node-run" data-testid="node-run">
          <span className={`fx-pill run-${runState}`} data-testid="node-run-status">
            {runState}
          </span>
          {rec?.duration_ms !== undefined && <span>{formatMs(rec.duration_ms)}</span>}
          {rec && rec.attempts.length > 1 && <span>{rec.attempts.length} attempts</span>}
          {rec?.ports?.length ? <span className="fx-node-ports">→ {rec.ports.join(', ')}</span> : null}
        </div>
      )}
      <div className="fx-node-ports-col">
        {mainPorts.map((p) => (
          <div key={p} className={`fx-port-row ${mainPorts.length > 1 || p !== 'out' ? 'labelled' : ''}`}>
            {(mainPorts.length > 1 || p !== 'out') && <span className="fx-port-label">{p}</span>}
            <PortHandle port={p} />
            {(selected || hover) && <PortPlus node={id} port={p} />}
          </div>
        ))}
        <div className="fx-port-row fx-port-row-error labelled">
          <span className="fx-port-label">error</span>
          <PortHandle port="error" />
          {(selected || hover) && <PortPlus node={id} port="error" />}
        </div>
      </div>
      {rec && (
        <NodeToolbar isVisible={hover || selected} position={Position.Top} className="fx-node-output" align="start">
          <div data-testid={`node-output-${id}`}>
            <div className="fx-node-output-head">
              <span className={`fx-pill run-${rec.status}`}>{rec.status}</span>
              {rec.duration_ms !== undefined && <span>{formatMs(rec.duration_ms)}</span>}
              {rec.ports?.length ? <span>→ {rec.ports.join(', ')}</span> : null}
            </div>
            {rec.error && <div className="fx-node-output-error">{rec.error.code}: {rec.error.message}</div>}
            {rec.output !== undefined && <pre>{excerpt(rec.output, 600)}</pre>}
          </div>
        </NodeToolbar>
      )}
    </div>
  );
}

export const StepNodeView = memo(StepNodeViewImpl);
