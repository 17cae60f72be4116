import { Fragment, useMemo, useState, type DragEvent } from 'react';
import { useEditor } from '../store/editor';
import { CategoryIcon } from '../canvas/icons';
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

/**
 * The step catalog as cards: a click (or Enter) adds the step to the right of the selected step
 * and connects it, or to the right of the last step; a drag drops it where it is let go.
 */
export function Palette() {
  const catalog = useEditor((s) => s.catalog);
  const connectors = useEditor((s) => s.connectors);
  const addStepAfter = useEditor((s) => s.addStepAfter);
  const addAppStep = useEditor((s) => s.addAppStep);
  const addPresetStep = useEditor((s) => s.addPresetStep);
  const selected = useEditor((s) => (s.selectedIds.length === 1 ? s.selectedIds[0] : null));
  const [q, setQ] = useState('');

  const groups = useMemo(() => {
    const needle = q.trim().toLowerCase();
    const list = catalog.filter(
      (k) =>
        !needle ||
        `${k.title} ${k.kind} ${k.description} ${(k.presets ?? []).map((p) => `${p.title} ${p.description}`).join(' ')}`
          .toLowerCase()
          .includes(needle),
    );
    const by = new Map<string, StepKind[]>();
    for (const k of list) by.set(k.category, [...(by.get(k.category) ?? []), k]);
    return [...by.entries()].sort(
      ([a], [b]) => (CATEGORY_ORDER.indexOf(a) + 1 || 99) - (CATEGORY_ORDER.indexOf(b) + 1 || 99),
    );
  }, [catalog, q]);

  // Apps: each connector's operations, under its name (the search matches app and operation).
  const apps = useMemo(() => {
    const needle = q.trim().toLowerCase();
    return connectors
      .map((c) => ({
        ...c,
        operations: c.operations.filter(
          (o) => !needle || `${c.title} ${o.title} ${o.description}`.toLowerCase().includes(needle),
        ),
      }))
      .filter((c) => c.operations.length > 0);
  }, [connectors, q]);

  const onDragStart = (e: DragEvent, kind: string) => {
    e.dataTransfer.setData(DRAG_MIME, kind);
    e.dataTransfer.effectAllowed = 'copy';
  };


  return (
    <div className="fx-palette" data-testid="palette">
      <input
        className="fx-search"
        placeholder="Search steps"
        aria-label="Search steps"
        value={q}
        onChange={(e) => setQ(e.target.value)}
        data-testid="palette-search"
      />
      <p className="fx-palette-hint" data-testid="palette-hint">
        {selected ? (
          <>
            Click a step to add it after <code>{selected}</code>, or drag it onto the canvas.
          </>
        ) : (
          'Click a step to add it, or drag it onto the canvas.'
        )}
      </p>
      {groups.map(([cat, kinds]) => (
        <section key={cat} className="fx-palette-group">
          <h2>{CATEGORY_TITLE[cat] ?? cat}</h2>
          {kinds.map((k) => (
            <Fragment key={k.kind}>
              <button
                type="button"
                className={`fx-palette-item fx-cat-${k.category}`}
                draggable
                onDragStart={(e) => onDragStart(e, k.kind)}
                onClick={() => addStepAfter(k.kind)}
                title={`${k.description}\n\nOutput: ${k.output}\n\nClick to add${selected ? ` after ${selected}` : ''}, or drag onto the canvas.`}
                data-testid={`palette-${k.kind}`}
              >
                <CategoryIcon category={k.category} />
                <div>
                  <div className="fx-palette-title">{k.title}</div>
                  <div className="fx-palette-desc">{k.description}</div>
                </div>
              </button>
              {(k.presets ?? []).map((p) => (
                <button
                  type="button"
                  key={`${k.kind}/${p.id}`}
                  className={`fx-palette-item fx-palette-preset fx-cat-${k.category}`}
                  onClick={() => addPresetStep(k.kind, p.id)}
                  title={`${p.description}\n\nA ${k.title} step, ready-made. Click to add${selected ? ` after ${selected}` : ''}.`}
                  data-testid={`palette-preset-${k.kind}-${p.id}`}
                >
                  <CategoryIcon category={k.category} />
                  <div>
                    <div className="fx-palette-title">{p.title}</div>
                    <div className="fx-palette-desc">{p.description}</div>
                  </div>
                </button>
              ))}
            </Fragment>
          ))}
        </section>
      ))}
      {apps.length > 0 && (
        <section className="fx-palette-group" data-testid="palette-apps">
          <h2>Apps</h2>
          {apps.map((c) => (
            <div key={c.app} className="fx-palette-app" data-testid={`palette-app-${c.app}`}>
              <h3>{c.title}</h3>
              {c.operations.map((o) => (
                <button
                  type="button"
                  key={o.name}
                  className="fx-palette-item fx-cat-network"
                  onClick={() => addAppStep(c.app, o.name)}
                  title={`${o.description || o.title}\n\nClick to add${selected ? ` after ${selected}` : ''}; pick a connection in the inspector.`}
                  data-testid={`palette-op-${c.app}-${o.name}`}
                >
                  <CategoryIcon category="network" />
                  <div>
                    <div className="fx-palette-title">{o.title}</div>
                    {o.dedupe && (
                      <div className={`fx-dedupe-badge fx-dedupe-${o.dedupe.strategy}`} data-testid="dedupe-badge">
                        {o.dedupe.badge}
                      </div>
                    )}
                  </div>
                </button>
              ))}
            </div>
          ))}
        </section>
      )}
      {groups.length === 0 && apps.length === 0 && <p className="fx-muted">No step matches “{q}”.</p>}
    </div>
  );
}
