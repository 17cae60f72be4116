// Fit and level of detail, shared by the editor's canvas and the run canvas of history: Fit
// shows every node (error branches included) clear of the canvas' own overlays (zoom controls,
// minimap), at whatever zoom that takes; below COMPACT_ZOOM nodes draw a compact form whose name
// is sized for the screen, so a low zoom stays readable.

import { getNodesBounds, useReactFlow, useStore, useStoreApi, type Node, type ReactFlowState, type Viewport } from '@xyflow/react';
import { useEffect, useRef, useState, type CSSProperties } from 'react';

/** Fit never blows a small flow up past this. */
export const FIT_MAX_ZOOM = 1.1;
/** The canvases' lowest zoom (and Fit's). */
export const MIN_ZOOM = 0.05;
/** Below this zoom a 15 px title is under 11 px on screen: nodes draw their compact form. */
export const COMPACT_ZOOM = 0.75;
/** Room around the graph, and between a node and an overlay, in screen pixels. */
const PAD = 24;

interface Rect {
  x: number;
  y: number;
  w: number;
  h: number;
}

/** What the canvas' panels (zoom controls, minimap) cover, in the canvas' pixels. */
function overlays(dom: HTMLElement | null): Rect[] {
  if (!dom) return [];
  const host = dom.getBoundingClientRect();
  return [...dom.querySelectorAll('.react-flow__panel')]
    .map((el) => el.getBoundingClientRect())
    .filter((r) => r.width > 0 && r.height > 0)
    .map((r) => ({ x: r.left - host.left, y: r.top - host.top, w: r.width, h: r.height }));
}

const meets = (a: Rect, b: Rect) => a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;

/**
 * The viewport that shows every node inside `width`×`height` with none under an overlay: the
 * graph centred in the whole canvas when that clears the overlays, else in the canvas without
 * the overlays' bands (top and bottom, or left and right), whichever zooms closer.
 */
export function fitViewport(nodes: Node[], width: number, height: number, covered: Rect[]): Viewport | null {
  if (!nodes.length || !width || !height) return null;
  const b = getNodesBounds(nodes);
  const inTop = (r: Rect) => r.y + r.h / 2 < height / 2;
  const inLeft = (r: Rect) => r.x + r.w / 2 < width / 2;
  const band = (rs: Rect[], f: (r: Rect) => number) => Math.max(0, ...rs.map(f));
  const top = band(covered.filter(inTop), (r) => r.y + r.h);
  const bottom = band(covered.filter((r) => !inTop(r)), (r) => height - r.y);
  const left = band(covered.filter(inLeft), (r) => r.x + r.w);
  const right = band(covered.filter((r) => !inLeft(r)), (r) => width - r.x);
  const areas: Rect[] = [
    { x: 0, y: 0, w: width, h: height },
    { x: 0, y: top, w: width, h: height - top - bottom },
    { x: left, y: 0, w: width - left - right, h: height },
  ];
  const place = (a: Rect): Viewport => {
    const zoom = Math.max(MIN_ZOOM, Math.min(FIT_MAX_ZOOM, (a.w - 2 * PAD) / b.width, (a.h - 2 * PAD) / b.height));
    return { zoom, x: a.x + a.w / 2 - (b.x + b.width / 2) * zoom, y: a.y + a.h / 2 - (b.y + b.height / 2) * zoom };
  };
  const clear = (v: Viewport) =>
    nodes.every((n) => {
      const box = { x: n.position.x * v.zoom + v.x, y: n.position.y * v.zoom + v.y, w: (n.measured?.width ?? 0) * v.zoom, h: (n.measured?.height ?? 0) * v.zoom };
      return covered.every((r) => !meets(box, { x: r.x - PAD / 2, y: r.y - PAD / 2, w: r.w + PAD, h: r.h + PAD }));
    });
  const views = areas.filter((a) => a.w > 2 * PAD && a.h > 2 * PAD).map(place);
  // The banded areas clear the overlays by construction; the whole canvas only when the graph's shape allows.
  const ok = views.filter((v, i) => i > 0 || clear(v));
  return [...(ok.length ? ok : views)].sort((p, q) => q.zoom - p.zoom)[0] ?? null;
}

/** Fit the graph of a React Flow store (see {@link fitViewport}); answers whether it moved. */
export function fitWhole(state: Pick<ReactFlowState, 'nodeLookup' | 'width' | 'height' | 'domNode'>, setViewport: (v: Viewport) => unknown): boolean {
  const nodes = [...state.nodeLookup.values()].map((n) => ({ ...n, position: n.internals.positionAbsolute }));
  const v = fitViewport(nodes, state.width, state.height, overlays(state.domNode));
  if (v) void setViewport(v);
  return !!v;
}

/**
 * Fit the whole graph (see {@link fitWhole}) each time `request` changes, once every node of
 * `ids()` is measured (React Flow's own fitView fires on the first measured batch, which after
 * opening another workflow may be a few nodes only), or after two seconds of frames. Answers the
 * last request fitted (tests wait for it before they measure).
 */
export function useFitOnRequest(request: number, ids: () => string[]): number {
  const store = useStoreApi();
  const { setViewport } = useReactFlow();
  const [fitted, setFitted] = useState(-1);
  // Fit only when asked, not when these change identity.
  const latest = useRef({ ids, setViewport });
  latest.current = { ids, setViewport };
  useEffect(() => {
    let frame = 0;
    let tries = 0;
    const tick = () => {
      const s = store.getState();
      const ready = latest.current.ids().every((id) => {
        const n = s.nodeLookup.get(id);
        return !!n && !!n.measured.width && !!n.internals.handleBounds;
      });
      if ((ready && s.width > 0) || ++tries > 120) {
        fitWhole(s, latest.current.setViewport);
        setFitted(request);
      } else frame = requestAnimationFrame(tick);
    };
    frame = requestAnimationFrame(tick);
    return () => cancelAnimationFrame(frame);
  }, [request, store]);
  return fitted;
}

/** The zoom rounded down to a step of 0.02 below COMPACT_ZOOM, and 1 above it (so zooming re-renders rarely). */
const lodZoom = (s: ReactFlowState) => (s.transform[2] < COMPACT_ZOOM ? Math.max(0.02, Math.floor(s.transform[2] * 50) / 50) : 1);

/**
 * The level of detail of a canvas' nodes, for the element around its ReactFlow: the class
 * `fx-lod-compact` below {@link COMPACT_ZOOM}, and `--fx-zoom` for the compact form's sizes.
 */
export function useLevelOfDetail(): { compact: boolean; className: string; style: CSSProperties } {
  const zoom = useStore(lodZoom);
  const compact = zoom < 1;
  return { compact, className: compact ? 'fx-lod-compact' : '', style: { '--fx-zoom': zoom } as CSSProperties };
}
