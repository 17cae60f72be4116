import { useRef, type KeyboardEvent, type ReactNode } from 'react';

/** One tab of a {@link TabList}. */
export interface TabDef<T extends string> {
  id: T;
  label: ReactNode;
  testId?: string;
  title?: string;
}

const tabId = (base: string, id: string) => `${base}-tab-${id}`;
const panelId = (base: string, id: string) => `${base}-panel-${id}`;

/**
 * A WAI-ARIA tab list: `tablist` of `tab`s with `aria-selected`, only the selected tab in the
 * tab order, and the arrow keys (Left/Right, Home/End) selecting and focusing the next tab.
 * `hasPanel` says whether the selected tab's panel is shown ({@link tabPanelProps}): a closed
 * panel is not pointed at.
 */
export function TabList<T extends string>({
  tabs,
  value,
  onSelect,
  label,
  base,
  hasPanel = true,
}: {
  tabs: TabDef<T>[];
  value: T;
  onSelect(id: T): void;
  label: string;
  /** Prefix of the tabs' and panels' element ids (unique on the page). */
  base: string;
  hasPanel?: boolean;
}) {
  const list = useRef<HTMLDivElement>(null);
  const onKeyDown = (e: KeyboardEvent) => {
    const at = tabs.findIndex((t) => t.id === value);
    const to = { ArrowRight: at + 1, ArrowLeft: at - 1, Home: 0, End: tabs.length - 1 }[e.key];
    if (to === undefined) return;
    e.preventDefault();
    const next = tabs[(to + tabs.length) % tabs.length];
    onSelect(next.id);
    list.current?.querySelector<HTMLElement>(`#${CSS.escape(tabId(base, next.id))}`)?.focus();
  };
  return (
    <div className="fx-tablist" role="tablist" aria-label={label} ref={list} onKeyDown={onKeyDown}>
      {tabs.map((t) => {
        const selected = t.id === value;
        return (
          <button
            key={t.id}
            id={tabId(base, t.id)}
            role="tab"
            aria-selected={selected}
            aria-controls={selected && hasPanel ? panelId(base, t.id) : undefined}
            tabIndex={selected ? 0 : -1}
            className={selected ? 'is-active' : ''}
            onClick={() => onSelect(t.id)}
            title={t.title}
            data-testid={t.testId}
          >
            {t.label}
          </button>
        );
      })}
    </div>
  );
}

/** The attributes of the panel of tab `id` of the {@link TabList} with the same `base`. */
export function tabPanelProps(base: string, id: string) {
  return { role: 'tabpanel', id: panelId(base, id), 'aria-labelledby': tabId(base, id) } as const;
}
