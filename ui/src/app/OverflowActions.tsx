import { MoreHorizontal } from 'lucide-react';
import { useId, useLayoutEffect, useRef, useState, type KeyboardEvent, type ReactNode } from 'react';

/** One action of an {@link OverflowActions} row. */
export interface RowAction {
  key: string;
  label: string;
  icon?: ReactNode;
  title?: string;
  disabled?: boolean;
  primary?: boolean;
  testId?: string;
  /** Extra `data-*` attributes of the button (and of its menu item), without the `data-` prefix. */
  data?: Record<string, string>;
  onSelect(): void;
}

const GAP = 8;

const dataAttrs = (a: RowAction) => Object.fromEntries(Object.entries(a.data ?? {}).map(([k, v]) => [`data-${k}`, v]));

/**
 * A row of buttons that never overflows its box: the actions that fit are shown in order, the
 * rest go into a "More" menu button (WAI-ARIA menu button: arrows, Home/End, Escape, Tab). The
 * row takes the width its parent leaves it (`flex: 1 1 0`) and measures hidden copies of the
 * buttons to decide how many fit.
 */
export function OverflowActions({ actions, label, testId, moreTestId }: { actions: RowAction[]; label: string; testId?: string; moreTestId?: string }) {
  const box = useRef<HTMLDivElement>(null);
  const measure = useRef<HTMLDivElement>(null);
  const [shown, setShown] = useState(actions.length);

  useLayoutEffect(() => {
    const fit = () => {
      if (!box.current || !measure.current) return;
      const widths = [...measure.current.children].map((c) => c.getBoundingClientRect().width);
      const more = widths.pop() ?? 0;
      const avail = box.current.clientWidth;
      const width = (n: number) => widths.slice(0, n).reduce((s, w) => s + w + GAP, 0);
      let n = widths.length;
      if (width(n) - GAP > avail) while (n > 0 && width(n) + more > avail) n--;
      setShown(n);
    };
    fit();
    const ro = new ResizeObserver(fit);
    if (box.current) ro.observe(box.current);
    if (measure.current) ro.observe(measure.current);
    return () => ro.disconnect();
  }, [actions.length]);

  const inline = actions.slice(0, shown);
  const rest = actions.slice(shown);
  return (
    <div className="fx-actions" ref={box} data-testid={testId} data-shown={shown}>
      {/* The buttons as they would look, to measure them: never seen, never focused. */}
      <div className="fx-actions-measure" ref={measure} aria-hidden="true">
        {actions.map((a) => (
          <span key={a.key} className={`fx-btn fx-btn-small ${a.primary ? 'fx-btn-primary' : ''}`}>
            {a.icon}
            <span className="fx-action-label">{a.label}</span>
          </span>
        ))}
        <span className="fx-btn fx-btn-small fx-btn-icon">
          <MoreHorizontal size={14} aria-hidden /> More
        </span>
      </div>
      {inline.map((a) => (
        <button
          key={a.key}
          className={`fx-btn fx-btn-small ${a.primary ? 'fx-btn-primary' : ''}`}
          onClick={a.onSelect}
          disabled={a.disabled}
          title={a.title}
          data-testid={a.testId}
          {...dataAttrs(a)}
        >
          {a.icon}
          <span className="fx-action-label">{a.label}</span>
        </button>
      ))}
      {rest.length > 0 && <MoreMenu actions={rest} label={label} testId={moreTestId} />}
    </div>
  );
}

/** The "More" button and its menu of the actions that did not fit. */
function MoreMenu({ actions, label, testId }: { actions: RowAction[]; label: string; testId?: string }) {
  const [open, setOpen] = useState(false);
  const button = useRef<HTMLButtonElement>(null);
  const menu = useRef<HTMLDivElement>(null);
  const id = useId();
  const items = () => [...(menu.current?.querySelectorAll<HTMLButtonElement>('[role="menuitem"]:not(:disabled)') ?? [])];
  const focusItem = (which: 'first' | 'last') => requestAnimationFrame(() => {
    const all = items();
    all[which === 'first' ? 0 : all.length - 1]?.focus();
  });
  const close = (refocus: boolean) => {
    setOpen(false);
    if (refocus) button.current?.focus();
  };
  const onButtonKey = (e: KeyboardEvent) => {
    if (e.key === 'ArrowDown' || e.key === 'ArrowUp') {
      e.preventDefault();
      setOpen(true);
      focusItem(e.key === 'ArrowDown' ? 'first' : 'last');
    }
  };
  const onMenuKey = (e: KeyboardEvent) => {
    const all = items();
    const at = all.indexOf(document.activeElement as HTMLButtonElement);
    const go = (i: number) => {
      e.preventDefault();
      all[(i + all.length) % all.length]?.focus();
    };
    if (e.key === 'ArrowDown') go(at + 1);
    else if (e.key === 'ArrowUp') go(at - 1);
    else if (e.key === 'Home') go(0);
    else if (e.key === 'End') go(all.length - 1);
    else if (e.key === 'Escape') {
      e.preventDefault();
      e.stopPropagation();
      close(true);
    } else if (e.key === 'Tab') close(false);
  };
  return (
    <span
      className="fx-menu-wrap"
      onBlur={(e) => {
        if (open && !e.currentTarget.contains(e.relatedTarget as Node | null)) setOpen(false);
      }}
    >
      <button
        ref={button}
        className="fx-btn fx-btn-small fx-btn-icon"
        onClick={() => {
          setOpen((o) => !o);
          if (!open) focusItem('first');
        }}
        onKeyDown={onButtonKey}
        aria-haspopup="menu"
        aria-expanded={open}
        aria-controls={open ? id : undefined}
        aria-label={label}
        title={label}
        data-testid={testId}
      >
        <MoreHorizontal size={14} aria-hidden /> More
      </button>
      {open && (
        <div className="fx-menu" role="menu" id={id} aria-label={label} ref={menu} onKeyDown={onMenuKey}>
          {actions.map((a) => (
            <button
              key={a.key}
              role="menuitem"
              tabIndex={-1}
              className={a.primary ? 'is-primary' : ''}
              onClick={() => {
                close(false);
                a.onSelect();
              }}
              disabled={a.disabled}
              title={a.title}
              data-testid={a.testId}
              {...dataAttrs(a)}
            >
              {a.icon} {a.label}
            </button>
          ))}
        </div>
      )}
    </span>
  );
}
