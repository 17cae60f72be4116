import { useCallback, useEffect, type DragEvent } from 'react';
import {
  Background,
  BackgroundVariant,
  Controls,
  MiniMap,
  ReactFlow,
  useReactFlow,
  useStore,
  useStoreApi,
  type Node,
} from '@xyflow/react';
import { useEditor } from '../store/editor';
import type { PortEdge, StepNode } from '../store/graph';
import { StepNodeView } from './StepNodeView';
import { PortEdgeView } from './PortEdgeView';

// Module scope: React Flow re-creates every node when these objects change identity.
const nodeTypes = { step: StepNodeView };
const edgeTypes = { port: PortEdgeView };
export const DRAG_MIME = 'application/x-fluxo-kind';
const MULTI_SELECT_KEYS = ['Control', 'Meta'];
const SNAP: [number, number] = [10, 10];
const FIT_OPTIONS = { padding: 0.2, maxZoom: 1.2 };

const STATUS_COLORS: Record<string, string> = {
  succeeded: '#3fb68b',
  failed: '#f0616d',
  fallback: '#e0a84a',
  running: '#5aa9ff',
  skipped: '#3a4150',
  pending: '#4b5466',
};
const CATEGORY_COLORS: Record<string, string> = {
  trigger: '#8b7cf6',
  data: '#4fb3d9',
  flow: '#d9a64f',
  network: '#5fcf94',
  errors: '#ef6b73',
};

/** Zoomed out far enough that node details are unreadable: draw them as simple cards. */
const isFar = (s: { transform: [number, number, number] }) => s.transform[2] < 0.55;

export function Canvas() {
  const nodes = useEditor((s) => s.nodes);
  const edges = useEditor((s) => s.edges);
  const onNodesChange = useEditor((s) => s.onNodesChange);
  const onEdgesChange = useEditor((s) => s.onEdgesChange);
  const onConnect = useEditor((s) => s.onConnect);
  const isValidConnection = useEditor((s) => s.isValidConnection);
  const beginDrag = useEditor((s) => s.beginDrag);
  const endDrag = useEditor((s) => s.endDrag);
  const addStep = useEditor((s) => s.addStep);
  const focus = useEditor((s) => s.focus);
  const fitRequest = useEditor((s) => s.fitRequest);
  const { screenToFlowPosition, setCenter, getInternalNode, fitView, getZoom } = useReactFlow();
  const far = useStore(isFar);
  // Fit once every node of the (new) graph is measured: React Flow's own queued fitView fires
  // on the first measured batch, which after opening another workflow may be a few nodes only.
  const rfStore = useStoreApi<StepNode, PortEdge>();
  useEffect(() => {
    let frame = 0;
    let tries = 0;
    const tick = () => {
      const ids = useEditor.getState().nodes.map((n) => n.id);
      const lookup = rfStore.getState().nodeLookup;
      const ready = ids.every((id) => {
        const n = lookup.get(id);
        return !!n && !!n.measured.width && !!n.internals.handleBounds;
      });
      if (ready || ++tries > 120) void fitView(FIT_OPTIONS);
      else frame = requestAnimationFrame(tick);
    };
    frame = requestAnimationFrame(tick);
    return () => cancelAnimationFrame(frame);
  }, [fitRequest, fitView, rfStore]);

  useEffect(() => {
    if (!focus) return;
    const n = getInternalNode(focus.id);
    if (!n) return;
    const w = n.measured.width ?? 220;
    const h = n.measured.height ?? 80;
    void setCenter(n.internals.positionAbsolute.x + w / 2, n.internals.positionAbsolute.y + h / 2, {
      zoom: Math.max(getZoom(), 0.9),
      duration: 250,
    });
  }, [focus, getInternalNode, setCenter, getZoom]);

  const onDragOver = useCallback((e: DragEvent) => {
    if (e.dataTransfer.types.includes(DRAG_MIME)) {
      e.preventDefault();
      e.dataTransfer.dropEffect = 'copy';
    }
  }, []);

  const onDrop = useCallback(
    (e: DragEvent) => {
      const kind = e.dataTransfer.getData(DRAG_MIME);
      if (!kind) return;
      e.preventDefault();
      const p = screenToFlowPosition({ x: e.clientX, y: e.clientY });
      addStep(kind, { x: Math.round(p.x - 110), y: Math.round(p.y - 30) });
    },
    [screenToFlowPosition, addStep],
  );

  const minimapColor = useCallback((n: Node) => {
    const s = useEditor.getState();
    const st = s.run ? (s.runByStep[n.id]?.status ?? 'skipped') : null;
    if (st) return STATUS_COLORS[st] ?? '#666';
    const k = s.kinds[(n as StepNode).data.kind];
    return CATEGORY_COLORS[k?.category ?? ''] ?? '#888';
  }, []);

  return (
    <div className={`fx-canvas ${far ? 'is-far' : ''}`} data-testid="canvas" onDragOver={onDragOver} onDrop={onDrop}>
      <ReactFlow<StepNode, PortEdge>
        nodes={nodes}
        edges={edges}
        nodeTypes={nodeTypes}
        edgeTypes={edgeTypes}
        onNodesChange={onNodesChange}
        onEdgesChange={onEdgesChange}
        onConnect={onConnect}
        isValidConnection={isValidConnection}
        onNodeDragStart={beginDrag}
        onNodeDragStop={endDrag}
        onSelectionDragStart={beginDrag}
        onSelectionDragStop={endDrag}
        deleteKeyCode={null}
        selectionKeyCode="Shift"
        multiSelectionKeyCode={MULTI_SELECT_KEYS}
        snapToGrid
        snapGrid={SNAP}
        minZoom={0.1}
        maxZoom={2}
        connectionRadius={28}
        elevateNodesOnSelect
        colorMode="dark"
        fitView
        fitViewOptions={FIT_OPTIONS}
      >
        <Background variant={BackgroundVariant.Dots} gap={20} size={1.2} color="#2a3140" />
        <MiniMap pannable zoomable nodeColor={minimapColor} nodeStrokeWidth={0} maskColor="rgba(10,13,19,0.7)" data-testid="minimap" />
        <Controls showInteractive={false} />
      </ReactFlow>
    </div>
  );
}
