import { useMemo, useState, type DragEvent } from 'react';
import { useReactFlow } from '@xyflow/react';
import { useEditor } from '../store/editor';
import { CATEGORY_ICON } from '../canvas/StepNodeView';
import { DRAG_MIME } from '../canvas/Canvas';
import type { StepKind } from '../api';

const CATEGORY_ORDER = ['trigger', 'data', 'flow', 'network', 'errors'];
const CATEGORY_TITLE: Record<string, string> = {
  trigger: 'Triggers',
  data: 'Data',
  flow: 'Flow',
  network: 'Network',
  errors: 'Errors',
};

/** The step catalog as draggable cards (drag onto the canvas, or double-click to add). */
export function Palette() {
  const catalog = useEditor((s) => s.catalog);
  const addStep = useEditor((s) => s.addStep);
  const { screenToFlowPosition } = useReactFlow();
  const [q, setQ] = useState('');

  const groups = useMemo(() => {
    const needle = q.trim().toLowerCase();
    const list = catalog.filter(
      (k) => !needle || `${k.title} ${k.kind} ${k.description}`.toLowerCase().includes(needle),
    );
    const by = new Map<string, StepKind[]>();
    for (const k of list) by.set(k.category, [...(by.get(k.category) ?? []), k]);
    return [...by.entries()].sort(
      ([a], [b]) => (CATEGORY_ORDER.indexOf(a) + 1 || 99) - (CATEGORY_ORDER.indexOf(b) + 1 || 99),
    );
  }, [catalog, q]);

  const onDragStart = (e: DragEvent, kind: string) => {
    e.dataTransfer.setData(DRAG_MIME, kind);
    e.dataTransfer.effectAllowed = 'copy';
  };

  const addAtCentre = (kind: string) => {
    const el = document.querySelector('.fx-canvas')?.getBoundingClientRect();
    const p = el
      ? screenToFlowPosition({ x: el.left + el.width / 2, y: el.top + el.height / 2 })
      : { x: 0, y: 0 };
    addStep(kind, { x: Math.round(p.x - 110), y: Math.round(p.y - 30) });
  };

  return (
    <div className="fx-palette" data-testid="palette">
      <input
        className="fx-search"
        placeholder="Search steps"
        value={q}
        onChange={(e) => setQ(e.target.value)}
        data-testid="palette-search"
      />
      {groups.map(([cat, kinds]) => (
        <section key={cat} className="fx-palette-group">
          <h3>{CATEGORY_TITLE[cat] ?? cat}</h3>
          {kinds.map((k) => (
            <div
              key={k.kind}
              className={`fx-palette-item fx-cat-${k.category}`}
              draggable
              onDragStart={(e) => onDragStart(e, k.kind)}
              onDoubleClick={() => addAtCentre(k.kind)}
              onKeyDown={(e) => e.key === 'Enter' && addAtCentre(k.kind)}
              tabIndex={0}
              role="button"
              title={`${k.description}\n\nOutput: ${k.output}\n\nDrag onto the canvas, or double-click to add.`}
              data-testid={`palette-${k.kind}`}
            >
              <span className="fx-node-icon" aria-hidden>
                {CATEGORY_ICON[k.category] ?? '•'}
              </span>
              <div>
                <div className="fx-palette-title">{k.title}</div>
                <div className="fx-palette-desc">{k.description}</div>
              </div>
            </div>
          ))}
        </section>
      ))}
      {groups.length === 0 && <p className="fx-muted">No step matches “{q}”.</p>}
    </div>
  );
}
