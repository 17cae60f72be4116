import { useEffect, useMemo, useRef, useState } from 'react';
import { useEditor } from '../store/editor';
import { CategoryIcon } from './icons';

/**
 * The step picker a wire dropped on empty canvas opens: search, pick with a click or Enter,
 * and the new step lands there, connected to the wire's port. Escape closes it.
 */
export function StepPickerView() {
  const picker = useEditor((s) => s.picker);
  const catalog = useEditor((s) => s.catalog);
  const pickStep = useEditor((s) => s.pickStep);
  const openPicker = useEditor((s) => s.openPicker);
  const [q, setQ] = useState('');
  const [active, setActive] = useState(0);
  const search = useRef<HTMLInputElement>(null);
  const list = useMemo(() => {
    const needle = q.trim().toLowerCase();
    return catalog.filter((k) => !k.trigger && (!needle || `${k.title} ${k.kind} ${k.description}`.toLowerCase().includes(needle)));
  }, [catalog, q]);
  useEffect(() => search.current?.focus(), []);
  if (!picker) return null;
  const close = () => openPicker(null);
  const choose = (kind: string) => {
    pickStep(kind);
  };
  // At the drop point, inside the canvas: to its left when there is no room on its right.
  const host = document.querySelector('.fx-canvas')?.getBoundingClientRect();
  const W = 280;
  const roomRight = picker.screen.x + 8 + W <= (host?.width ?? 800) - 8;
  const left = Math.max(8, roomRight ? picker.screen.x + 8 : picker.screen.x - 8 - W);
  const top = Math.max(8, Math.min(picker.screen.y - 20, (host?.height ?? 600) - 330));
  return (
    <div
      className="fx-picker"
      style={{ left, top }}
      role="dialog"
      aria-label={`Add a step after ${picker.from}`}
      data-testid="step-picker"
      onKeyDown={(e) => {
        if (e.key === 'Escape') {
          e.stopPropagation();
          close();
        } else if (e.key === 'ArrowDown') {
          e.preventDefault();
          setActive((a) => Math.min(a + 1, list.length - 1));
        } else if (e.key === 'ArrowUp') {
          e.preventDefault();
          setActive((a) => Math.max(a - 1, 0));
        } else if (e.key === 'Enter' && list[active] && e.target === search.current) {
          e.preventDefault();
          choose(list[active].kind);
        }
      }}
    >
      <div className="fx-picker-head">
        Add a step after <code>{picker.from}</code>
        {picker.port !== 'out' && (
          <>
            {' '}
            · <code>{picker.port}</code>
          </>
        )}
      </div>
      <input
        ref={search}
        className="fx-search"
        placeholder="Search steps"
        aria-label="Search steps"
        value={q}
        onChange={(e) => {
          setQ(e.target.value);
          setActive(0);
        }}
        data-testid="picker-search"
      />
      <ul className="fx-picker-list" role="listbox" aria-label="Steps">
        {list.map((k, i) => (
          <li key={k.kind} role="option" aria-selected={i === active}>
            <button
              type="button"
              className={`fx-picker-item fx-cat-${k.category} ${i === active ? 'is-active' : ''}`}
              onClick={() => choose(k.kind)}
              onMouseEnter={() => setActive(i)}
              data-testid={`picker-${k.kind}`}
            >
              <CategoryIcon category={k.category} />
              <span>
                <span className="fx-picker-title">{k.title}</span>
                <span className="fx-picker-desc">{k.description}</span>
              </span>
            </button>
          </li>
        ))}
        {!list.length && <li className="fx-muted">No step matches “{q}”.</li>}
      </ul>
    </div>
  );
}
