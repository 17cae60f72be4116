import { useCallback, useEffect, type DragEvent } from 'react';
import {
  Background,
  BackgroundVariant,
  ControlButton,
  Controls,
  MiniMap,
  ReactFlow,
  useReactFlow,
  useStore,
  useStoreApi,
  type FinalConnectionState,
  type Node,
} from '@xyflow/react';
import { Maximize } from 'lucide-react';
import { useEditor } from '../store/editor';
import type { PortEdge, StepNode } from '../store/graph';
import { StepNodeView } from './StepNodeView';
import { PortEdgeView } from './PortEdgeView';
import { StepPickerView } from './StepPicker';
import { fitWhole, MIN_ZOOM, useFitOnRequest, useLevelOfDetail } from './fit';
import { CategoryIcon } from './icons';

// Module scope: React Flow re-creates every node when these objects change identity.
const nodeTypes = { step: StepNodeView };
const edgeTypes = { port: PortEdgeView };
export const DRAG_MIME = 'application/x-fluxo-kind';
const MULTI_SELECT_KEYS = ['Control', 'Meta'];
const SNAP: [number, number] = [10, 10];
const PRO_OPTIONS = { hideAttribution: true };

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

/** Room for a minimap that does not sit on the graph: a canvas of at least 640x460. */
const roomForMinimap = (s: { width: number; height: number }) => s.width >= 640 && s.height >= 460;

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
  const openPicker = useEditor((s) => s.openPicker);
  const picker = useEditor((s) => s.picker);
  const run = useEditor((s) => s.run);
  const runByStep = useEditor((s) => s.runByStep);
  const kinds = useEditor((s) => s.kinds);
  const rf = useReactFlow<StepNode, PortEdge>();
  const rfStore = useStoreApi<StepNode, PortEdge>();
  const { screenToFlowPosition, setCenter, getInternalNode, getZoom, getViewport } = rf;
  const lod = useLevelOfDetail();
  const minimapRoom = useStore(roomForMinimap);
  const fit = useCallback(() => fitWhole(rfStore.getState(), rf.setViewport), [rf, rfStore]);
  // The last fit request applied (tests wait for it before they measure or zoom).
  const fitted = useFitOnRequest(fitRequest, () => useEditor.getState().nodes.map((n) => n.id));

  useEffect(() => {
    if (!focus) return;
    let frame = 0;
    let tries = 0;
    const go = () => {
      const n = getInternalNode(focus.id);
      // A step just added is measured a frame or two later.
      if ((!n || !n.measured.width) && ++tries < 30) {
        frame = requestAnimationFrame(go);
        return;
      }
      if (!n) return;
      const w = n.measured.width ?? 220;
      const h = n.measured.height ?? 80;
      const cx = n.internals.positionAbsolute.x + w / 2;
      const cy = n.internals.positionAbsolute.y + h / 2;
      if (focus.keepZoom) {
        // A step just added: pan only if it is not fully in view.
        const { x, y, zoom } = getViewport();
        const { width, height } = rfStore.getState();
        const left = n.internals.positionAbsolute.x * zoom + x;
        const top = n.internals.positionAbsolute.y * zoom + y;
        if (left >= 0 && top >= 0 && left + w * zoom <= width && top + h * zoom <= height) return;
        void setCenter(cx, cy, { zoom, duration: 200 });
        return;
      }
      void setCenter(cx, cy, { zoom: Math.max(getZoom(), 0.9), duration: 250 });
    };
    go();
    return () => cancelAnimationFrame(frame);
  }, [focus, getInternalNode, setCenter, getZoom, getViewport, rfStore]);

  // A wire dropped on empty canvas: offer the steps to add there, connected to the wire's port.
  const onConnectEnd = useCallback(
    (event: MouseEvent | TouchEvent, state: FinalConnectionState) => {
      if (state.isValid || !state.fromNode || state.fromHandle?.type !== 'source') return;
      const target = event.target as Element | null;
      if (!target?.classList.contains('react-flow__pane')) return;
      const pt = 'changedTouches' in event ? event.changedTouches[0] : event;
      const host = (target.closest('.fx-canvas') as HTMLElement | null)?.getBoundingClientRect();
      openPicker({
        screen: { x: pt.clientX - (host?.left ?? 0), y: pt.clientY - (host?.top ?? 0) },
        flow: screenToFlowPosition({ x: pt.clientX, y: pt.clientY }),
        from: state.fromNode.id,
        port: state.fromHandle.id ?? 'out',
      });
    },
    [openPicker, screenToFlowPosition],
  );

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

  // Depends on the run shown, so the minimap redraws with it (and forgets a cleared run).
  const minimapColor = useCallback(
    (n: Node) => {
      const st = run ? (runByStep[n.id]?.status ?? 'skipped') : null;
      if (st) return STATUS_COLORS[st] ?? '#666';
      const k = kinds[(n as StepNode).data.kind];
      return CATEGORY_COLORS[k?.category ?? ''] ?? '#888';
    },
    [run, runByStep, kinds],
  );

  return (
    <div
      className={`fx-canvas ${lod.className}`}
      style={lod.style}
      data-testid="canvas"
      data-fit-done={fitted === fitRequest}
      data-lod={lod.compact ? 'compact' : 'full'}
      onDragOver={onDragOver}
      onDrop={onDrop}
    >
      <ReactFlow<StepNode, PortEdge>
        nodes={nodes}
        edges={edges}
        nodeTypes={nodeTypes}
        edgeTypes={edgeTypes}
        onNodesChange={onNodesChange}
        onEdgesChange={onEdgesChange}
        onConnect={onConnect}
        onConnectEnd={onConnectEnd}
        onPaneClick={() => picker && openPicker(null)}
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
        minZoom={MIN_ZOOM}
        maxZoom={2}
        connectionRadius={28}
        elevateNodesOnSelect
        colorMode="dark"
        proOptions={PRO_OPTIONS}
      >
        <Background variant={BackgroundVariant.Dots} gap={20} size={1.2} color="#2a3140" />
        {nodes.length > 3 && minimapRoom && (
          <MiniMap
            pannable
            zoomable
            nodeColor={minimapColor}
            nodeStrokeWidth={0}
            maskColor="rgba(10,13,19,0.55)"
            style={{ width: 150, height: 96 }}
            ariaLabel="Minimap"
            data-testid="minimap"
            data-run={run ? run.id : ''}
          />
        )}
        <Controls showInteractive={false} showFitView={false} aria-label="Zoom">
          <ControlButton onClick={fit} className="react-flow__controls-fitview" title="Fit the whole flow in view" aria-label="Fit view">
            <Maximize aria-hidden />
          </ControlButton>
        </Controls>
      </ReactFlow>
      {picker && <StepPickerView />}
      <TriggerPrompt />
    </div>
  );
}

/**
 * A workflow without a trigger (a blank one starts so): ask how it starts, one button per
 * trigger kind of the catalog. Picking one adds it; the prompt goes once a trigger is there.
 */
function TriggerPrompt() {
  const catalog = useEditor((s) => s.catalog);
  const hasTrigger = useEditor((s) => s.nodes.some((n) => s.kinds[n.data.kind]?.trigger));
  const empty = useEditor((s) => s.nodes.length === 0);
  const addTrigger = useEditor((s) => s.addTrigger);
  const triggers = catalog.filter((k) => k.trigger);
  if (hasTrigger || !triggers.length) return null;
  return (
    <div className={`fx-trigger-prompt ${empty ? 'is-empty' : ''}`} role="group" aria-label="Pick a trigger" data-testid="trigger-prompt">
      <strong>How does this workflow start?</strong>
      <span className="fx-muted">Pick a trigger; then add steps from the palette.</span>
      <div className="fx-trigger-choices">
        {triggers.map((k) => (
          <button key={k.kind} type="button" className="fx-btn" onClick={() => addTrigger(k.kind)} title={k.description} data-testid={`pick-trigger-${k.kind}`}>
            <CategoryIcon category={k.category} /> {k.title}
          </button>
        ))}
      </div>
    </div>
  );
}
