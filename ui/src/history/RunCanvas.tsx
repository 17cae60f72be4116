// "Open on canvas": the workflow as the run ran it (its snapshot), read-only, with the run
// drawn the way the editor draws a dry run: each step's status ring and result, the walked
// edges lit, steps not reached dimmed. Same node and edge classes as the editor's canvas.

import { X } from 'lucide-react';
import { createContext, memo, useContext, useEffect, useMemo } from 'react';
import {
  Background,
  BackgroundVariant,
  Controls,
  Handle,
  MiniMap,
  Position,
  ReactFlow,
  ReactFlowProvider,
  getBezierPath,
  type EdgeProps,
  type NodeProps,
} from '@xyflow/react';
import type { RunRecord, StepKind, StepRecord } from '../api';
import type { Workflow } from '../store/workflowFile';
import { useEditor } from '../store/editor';
import { portsOf, workflowToGraph, type PortEdge, type StepNode } from '../store/graph';
import { CategoryIcon } from '../canvas/icons';
import { excerpt, formatMs } from '../app/format';
import { MIN_ZOOM, useFitOnRequest, useLevelOfDetail } from '../canvas/fit';

interface RunView {
  byStep: Record<string, StepRecord>;
  finished: boolean;
  kinds: Record<string, StepKind>;
}

const RunCtx = createContext<RunView>({ byStep: {}, finished: true, kinds: {} });
const FINAL = new Set(['succeeded', 'failed', 'timed_out', 'interrupted']);

function RunNodeImpl({ id, data }: NodeProps<StepNode>) {
  const { byStep, finished, kinds } = useContext(RunCtx);
  const kind = kinds[data.kind];
  const rec = byStep[id];
  const state: string = rec?.status ?? (finished ? 'skipped' : 'pending');
  const ports = portsOf(kind, data.config);
  const main = ports.filter((p) => p !== 'error');
  const category = kind?.category ?? 'unknown';
  return (
    <div
      className={`fx-node fx-cat-${category} run-${state} ${rec?.reused_from ? 'is-reused' : ''}`}
      data-testid={`run-node-${id}`}
      data-status={state}
      data-reused-from={rec?.reused_from ?? ''}
      title={
        rec
          ? `${rec.reused_from ? `reused from run ${rec.reused_from} (not executed in this run)\n` : ''}${rec.error ? `${rec.error.code}: ${rec.error.message}` : excerpt(rec.output, 600)}`
          : 'not reached'
      }
    >
      {!kind?.trigger && <Handle type="target" id="in" position={Position.Left} className="fx-handle fx-handle-in" isConnectable={false} />}
      <div className="fx-node-head">
        <CategoryIcon category={category} />
        <span className="fx-node-title">{data.name || kind?.title || data.kind}</span>
      </div>
      <div className="fx-node-sub">
        <code>{id}</code>
        <span>{kind?.title ?? data.kind}</span>
      </div>
      <div className="fx-node-run">
        <span className={`fx-pill run-${state}`}>{state === 'skipped' ? 'not reached' : state}</span>
        {rec?.reused_from ? (
          <span className="fx-node-reused" data-testid="run-node-reused">
            reused
          </span>
        ) : (
          rec?.duration_ms !== undefined && <span>{formatMs(rec.duration_ms)}</span>
        )}
        {rec && rec.attempts.length > 1 && <span>{rec.attempts.length} attempts</span>}
        {rec?.ports?.length ? <span className="fx-node-ports">→ {rec.ports.join(', ')}</span> : null}
      </div>
      {rec?.error && <div className="fx-node-problem error">{rec.error.code}{rec.error.http_status ? ` · HTTP ${rec.error.http_status}` : ''}</div>}
      <div className="fx-node-ports-col">
        {main.map((p) => (
          <div key={p} className={`fx-port-row ${main.length > 1 || p !== 'out' ? 'labelled' : ''}`}>
            {(main.length > 1 || p !== 'out') && <span className="fx-port-label">{p}</span>}
            <Handle type="source" id={p} position={Position.Right} className="fx-handle fx-handle-out" isConnectable={false} />
          </div>
        ))}
        <div className="fx-port-row fx-port-row-error labelled">
          <span className="fx-port-label">error</span>
          <Handle type="source" id="error" position={Position.Right} className="fx-handle fx-handle-error" isConnectable={false} />
        </div>
      </div>
    </div>
  );
}

function RunEdgeImpl({ id, source, sourceX, sourceY, targetX, targetY, sourcePosition, targetPosition, data }: EdgeProps<PortEdge>) {
  const { byStep } = useContext(RunCtx);
  const port = data?.port ?? 'out';
  const taken = !!byStep[source]?.ports?.includes(port);
  const [path] = getBezierPath({ sourceX, sourceY, targetX, targetY, sourcePosition, targetPosition });
  const cls = ['fx-edge', port === 'error' ? 'fx-edge-error' : '', taken ? 'fx-edge-taken' : 'fx-edge-idle'].join(' ');
  return <path d={path} className={cls} fill="none" data-testid={`run-edge-${id}`} data-taken={String(taken)} />;
}

const nodeTypes = { step: memo(RunNodeImpl) };
const edgeTypes = { port: memo(RunEdgeImpl) };
const PRO_OPTIONS = { hideAttribution: true };
const MINIMAP: Record<string, string> = { succeeded: '#3fb68b', failed: '#f0616d', fallback: '#e0a84a', running: '#5aa9ff', skipped: '#3a4150' };

export function RunCanvas({
  run,
  workflow,
  onClose,
  onPickStep,
}: {
  run: RunRecord;
  workflow: Workflow;
  onClose(): void;
  onPickStep(stepId: string): void;
}) {
  const kinds = useEditor((s) => s.kinds);
  const { nodes, edges } = useMemo(() => workflowToGraph(workflow), [workflow]);
  const view = useMemo<RunView>(() => {
    const byStep: Record<string, StepRecord> = {};
    for (const st of run.steps) byStep[st.step_id] = st;
    return { byStep, finished: FINAL.has(run.status), kinds };
  }, [run, kinds]);
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => e.key === 'Escape' && onClose();
    window.addEventListener('keydown', onKey);
    return () => window.removeEventListener('keydown', onKey);
  }, [onClose]);
  return (
    <div className="fx-modal-backdrop" onClick={onClose}>
      <div className="fx-run-canvas" onClick={(e) => e.stopPropagation()} data-testid="run-canvas" role="dialog" aria-label="Run on canvas">
        <div className="fx-run-canvas-head">
          <strong>{workflow.name || workflow.id}</strong>
          <span className="fx-version">v{workflow.version}</span>
          <span className="fx-muted">as run by</span>
          <code>{run.id}</code>
          <span className={`fx-pill run-${run.status}`}>{run.status}</span>
          {run.steps.some((st) => st.reused_from) && (
            <span className="fx-muted">
              <span className="fx-node-reused">reused</span> = not executed in this run
            </span>
          )}
          <span className="fx-spacer" />
          <span className="fx-muted">Read-only · click a step for its details</span>
          <button aria-label="Close (Esc)" className="fx-icon-btn" onClick={onClose} title="Close (Esc)" data-testid="run-canvas-close">
            <X size={15} aria-hidden />
          </button>
        </div>
        <RunCtx.Provider value={view}>
          <ReactFlowProvider>
            <RunFlow nodes={nodes} edges={edges} onPickStep={onPickStep} />
          </ReactFlowProvider>
        </RunCtx.Provider>
      </div>
    </div>
  );
}

/** The run's graph, read-only: fitted whole (clear of the minimap) once its nodes are measured, in the compact form when far. */
function RunFlow({ nodes, edges, onPickStep }: { nodes: StepNode[]; edges: PortEdge[]; onPickStep(stepId: string): void }) {
  const { byStep } = useContext(RunCtx);
  const lod = useLevelOfDetail();
  const fitted = useFitOnRequest(0, () => nodes.map((n) => n.id)) === 0;
  return (
    <div className={`fx-canvas ${lod.className}`} style={lod.style} data-testid="run-canvas-flow" data-fit-done={fitted} data-lod={lod.compact ? 'compact' : 'full'}>
      <ReactFlow<StepNode, PortEdge>
        nodes={nodes}
        edges={edges}
        nodeTypes={nodeTypes}
        edgeTypes={edgeTypes}
        nodesDraggable={false}
        nodesConnectable={false}
        elementsSelectable={false}
        edgesFocusable={false}
        nodesFocusable={false}
        deleteKeyCode={null}
        onNodeClick={(_, n) => onPickStep(n.id)}
        colorMode="dark"
        proOptions={PRO_OPTIONS}
        minZoom={MIN_ZOOM}
        maxZoom={2}
      >
        <Background variant={BackgroundVariant.Dots} gap={20} size={1.2} color="#2a3140" />
        <MiniMap
          pannable
          zoomable
          nodeStrokeWidth={0}
          maskColor="rgba(10,13,19,0.7)"
          style={{ width: 150, height: 96 }}
          nodeColor={(n) => MINIMAP[byStep[n.id]?.status ?? 'skipped'] ?? '#3a4150'}
        />
        <Controls showInteractive={false} />
      </ReactFlow>
    </div>
  );
}
