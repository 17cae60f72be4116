import { useEffect } from 'react';
import { useEditor } from '../store/editor';
import { MOD } from './format';

export const SHORTCUTS: [string, string][] = [
  [`${MOD}+S`, 'Save a draft (Publish makes it live)'],
  [`${MOD}+Enter`, 'Dry Run'],
  [`${MOD}+Z`, 'Undo'],
  [`${MOD}+Shift+Z / ${MOD}+Y`, 'Redo'],
  [`${MOD}+C / ${MOD}+X / ${MOD}+V`, 'Copy / cut / paste steps'],
  [`${MOD}+A`, 'Select all steps'],
  ['Delete / Backspace', 'Delete the selection'],
  ['Shift+drag', 'Box-select'],
  [`${MOD}+click`, 'Add to the selection'],
  [`${MOD}+Shift+L`, 'Auto-layout'],
  ['Shift+1', 'Fit the whole flow in view'],
  ['Esc', 'Clear the selection'],
  ['Tab, then Enter', 'Focus a step, select it'],
  ['Click a palette step', 'Add it after the selected step, connected'],
  ['Drop a wire on empty canvas', 'Pick the next step there, connected'],
];

export function Shortcuts({ onClose }: { onClose(): void }) {
  return (
    <div className="fx-popover" role="dialog" aria-label="Keyboard shortcuts" onClick={onClose}>
      <h4>Keyboard shortcuts</h4>
      <table>
        <tbody>
          {SHORTCUTS.map(([k, v]) => (
            <tr key={k}>
              <td>
                <kbd>{k}</kbd>
              </td>
              <td>{v}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

function inTextField(t: EventTarget | null): boolean {
  const el = t as HTMLElement | null;
  if (!el) return false;
  const tag = el.tagName;
  return tag === 'INPUT' || tag === 'TEXTAREA' || tag === 'SELECT' || el.isContentEditable;
}

/** The editor's keyboard shortcuts (text fields keep their own undo, copy and delete). */
export function useShortcuts() {
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      const s = useEditor.getState();
      if (s.confirm) return;
      const mod = e.ctrlKey || e.metaKey;
      const key = e.key.toLowerCase();
      const text = inTextField(e.target);
      if (mod && key === 's') {
        e.preventDefault();
        void s.save();
        return;
      }
      if (mod && key === 'enter') {
        e.preventDefault();
        void s.dryRun();
        return;
      }
      if (text) return;
      if (mod && key === 'z') {
        e.preventDefault();
        if (e.shiftKey) s.redo();
        else s.undo();
      } else if (mod && key === 'y') {
        e.preventDefault();
        s.redo();
      } else if (mod && key === 'c') {
        if (window.getSelection()?.toString()) return;
        e.preventDefault();
        s.copySelection();
      } else if (mod && key === 'x') {
        if (window.getSelection()?.toString()) return;
        e.preventDefault();
        s.cutSelection();
      } else if (mod && key === 'v') {
        e.preventDefault();
        s.paste();
      } else if (mod && key === 'a') {
        e.preventDefault();
        s.selectAll();
      } else if (mod && e.shiftKey && key === 'l') {
        e.preventDefault();
        s.autoLayout();
      } else if (!mod && (e.key === 'Delete' || e.key === 'Backspace')) {
        e.preventDefault();
        s.deleteSelection();
      } else if (e.key === 'Escape') {
        s.selectNode(null);
      } else if (e.shiftKey && (e.key === '!' || e.code === 'Digit1')) {
        s.requestFit();
      }
    };
    window.addEventListener('keydown', onKey);
    return () => window.removeEventListener('keydown', onKey);
  }, []);
}

/** Validate the definition after each change (debounced), through the engine's validator. */
export function useAutoValidate(delayMs = 300) {
  const rev = useEditor((s) => s.rev);
  const ready = useEditor((s) => s.api !== null);
  useEffect(() => {
    if (!ready) return;
    const t = setTimeout(() => void useEditor.getState().validateNow(), delayMs);
    return () => clearTimeout(t);
  }, [rev, ready, delayMs]);
}

/** Ask the browser to confirm leaving the page with unsaved changes. */
export function useBeforeUnload() {
  const dirty = useEditor((s) => s.dirty);
  useEffect(() => {
    if (!dirty) return;
    const h = (e: BeforeUnloadEvent) => {
      e.preventDefault();
      e.returnValue = '';
    };
    window.addEventListener('beforeunload', h);
    return () => window.removeEventListener('beforeunload', h);
  }, [dirty]);
}
