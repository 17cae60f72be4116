import { useEffect } from 'react';
import { useEditor } from '../store/editor';

export function ConfirmDialog() {
  const c = useEditor((s) => s.confirm);
  useEffect(() => {
    if (!c) return;
    const onKey = (e: KeyboardEvent) => {
      if (e.key === 'Escape') c.resolve(false);
    };
    window.addEventListener('keydown', onKey);
    return () => window.removeEventListener('keydown', onKey);
  }, [c]);
  if (!c) return null;
  return (
    <div className="fx-modal-backdrop" onClick={() => c.resolve(false)}>
      <div className="fx-modal" role="alertdialog" aria-label={c.title} data-testid="confirm-dialog" onClick={(e) => e.stopPropagation()}>
        <h3>{c.title}</h3>
        <p>{c.message}</p>
        <div className="fx-modal-actions">
          <button className="fx-btn" onClick={() => c.resolve(false)} data-testid="confirm-cancel">
            Cancel
          </button>
          <button
            className={`fx-btn ${c.danger ? 'fx-btn-danger' : 'fx-btn-primary'}`}
            onClick={() => c.resolve(true)}
            data-testid="confirm-ok"
            autoFocus
          >
            {c.confirmLabel}
          </button>
        </div>
      </div>
    </div>
  );
}

export function ToastView() {
  const toast = useEditor((s) => s.toast);
  useEffect(() => {
    if (!toast) return;
    const t = setTimeout(() => {
      if (useEditor.getState().toast?.id === toast.id) useEditor.setState({ toast: null });
    }, toast.kind === 'error' ? 6000 : 2500);
    return () => clearTimeout(t);
  }, [toast]);
  if (!toast) return null;
  return (
    <div className={`fx-toast fx-toast-${toast.kind}`} role="status" data-testid="toast" data-kind={toast.kind}>
      {toast.text}
    </div>
  );
}
