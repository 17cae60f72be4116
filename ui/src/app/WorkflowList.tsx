import { useEffect, useRef, useState } from 'react';
import { CalendarClock } from 'lucide-react';
import { useEditor } from '../store/editor';
import type { ScheduledWorkflow, Template, WithWorkflow } from '../api';
import { formatInZone, hasSeconds, relativeTime, tickFor, useNow } from '../inspector/schedule';

/** The soonest next tick of the listed schedules (ms), if any. */
function soonest(schedules: Record<string, ScheduledWorkflow>): number | undefined {
  let min: number | undefined;
  for (const s of Object.values(schedules)) {
    const t = s.next_at ? Date.parse(s.next_at) : NaN;
    if (!Number.isNaN(t) && (min === undefined || t < min)) min = t;
  }
  return min;
}

/** "next run in 3 min" under a scheduled workflow (the time itself in the tooltip). */
function NextRunHint({ sched, now }: { sched: ScheduledWorkflow; now: number }) {
  if (!sched.next_at) return null;
  const at = Date.parse(sched.next_at);
  return (
    <div
      className="fx-wf-next"
      data-testid={`workflow-next-run-${sched.workflow_id}`}
      title={`${sched.cron} in ${sched.timezone} · next run ${formatInZone(sched.next_at, sched.timezone, hasSeconds(sched.cron))}`}
    >
      <CalendarClock size={12} aria-hidden /> next run {at > now ? relativeTime(at, now) : 'due now'}
    </div>
  );
}

export function WorkflowList() {
  const workflows = useEditor((s) => s.workflows);
  const savedId = useEditor((s) => s.savedId);
  const openWorkflow = useEditor((s) => s.openWorkflow);
  const deleteWorkflow = useEditor((s) => s.deleteWorkflow);
  const guardDirty = useEditor((s) => s.guardDirty);
  const setLeftTab = useEditor((s) => s.setLeftTab);
  const schedules = useEditor((s) => s.schedules);
  const refreshSchedules = useEditor((s) => s.refreshSchedules);
  const [newOpen, setNewOpen] = useState(false);
  const next = soonest(schedules);
  const now = useNow(tickFor(next, Date.now()));
  // Fresh next ticks when the list is shown, and again once the soonest has passed (at most every 5 s).
  const asked = useRef(0);
  useEffect(() => {
    asked.current = Date.now();
    void refreshSchedules();
  }, [refreshSchedules]);
  useEffect(() => {
    if (next !== undefined && now > next && Date.now() - asked.current > 5000) {
      asked.current = Date.now();
      void refreshSchedules();
    }
  }, [now, next, refreshSchedules]);

  const open = async (id: string) => {
    if (id === savedId) return;
    if (!(await guardDirty('Open another workflow'))) return;
    await openWorkflow(id);
    setLeftTab('steps');
  };

  return (
    <div className="fx-wflist" data-testid="workflow-list">
      <button className="fx-btn fx-btn-primary fx-block" onClick={() => setNewOpen(true)} data-testid="new-workflow">
        + New workflow
      </button>
      <ul>
        {workflows.map((w) => (
          <li
            key={w.id}
            className={w.id === savedId ? 'is-active' : ''}
            data-testid={`workflow-item-${w.id}`}
            onClick={() => void open(w.id)}
          >
            <div className="fx-wf-name">{w.name || w.id}</div>
            <div className="fx-wf-meta">
              <span className="fx-mono">{w.id}</span>
              {w.draft_only ? (
                <span className="fx-warning-text" data-testid={`workflow-draft-${w.id}`} title="Never published: no webhook, no schedule">draft</span>
              ) : (
                <span>v{w.version}</span>
              )}
              {w.has_draft && !w.draft_only && (
                <span className="fx-warning-text" data-testid={`workflow-draft-${w.id}`} title="Unpublished changes (a draft)">
                  + draft
                </span>
              )}
              {w.errors > 0 ? (
                <span className="fx-error-text">{w.errors} error{w.errors > 1 ? 's' : ''}</span>
              ) : w.warnings > 0 ? (
                <span className="fx-warning-text">{w.warnings} warning{w.warnings > 1 ? 's' : ''}</span>
              ) : (
                <span className="fx-ok-text">valid</span>
              )}
            </div>
            {schedules[w.id] && <NextRunHint sched={schedules[w.id]} now={now} />}
            <button
              className="fx-icon-btn fx-wf-delete"
              title={`Delete ${w.id}`}
              data-testid={`delete-workflow-${w.id}`}
              onClick={(e) => {
                e.stopPropagation();
                void deleteWorkflow(w.id);
              }}
            >
              🗑
            </button>
          </li>
        ))}
        {workflows.length === 0 && <li className="fx-muted">No workflows in the folder yet.</li>}
      </ul>
      {newOpen && <NewWorkflowDialog onClose={() => setNewOpen(false)} />}
    </div>
  );
}

export function NewWorkflowDialog({ onClose }: { onClose(): void }) {
  const templates = useEditor((s) => s.templates);
  const newWorkflow = useEditor((s) => s.newWorkflow);
  const guardDirty = useEditor((s) => s.guardDirty);
  const setLeftTab = useEditor((s) => s.setLeftTab);
  const pick = async (t?: WithWorkflow<Template>) => {
    onClose();
    if (!(await guardDirty('Start a new workflow'))) return;
    newWorkflow(t);
    setLeftTab('steps');
  };
  return (
    <div className="fx-modal-backdrop" onClick={onClose}>
      <div className="fx-modal" role="dialog" aria-label="New workflow" onClick={(e) => e.stopPropagation()} data-testid="new-dialog">
        <h3>New workflow</h3>
        <div className="fx-template-grid">
          <button className="fx-template" onClick={() => void pick()} data-testid="new-blank">
            <strong>Blank</strong>
            <span className="fx-muted">An empty canvas: pick how it starts (webhook, schedule, manual), then add steps.</span>
          </button>
          {templates.map((t) => (
            <button key={t.id} className="fx-template" onClick={() => void pick(t)} data-testid={`new-from-${t.id}`}>
              <strong>{t.name}</strong>
              <span className="fx-muted">{t.workflow.description ?? `${t.workflow.steps.length} steps`}</span>
            </button>
          ))}
        </div>
        <div className="fx-modal-actions">
          <button className="fx-btn" onClick={onClose}>
            Cancel
          </button>
        </div>
      </div>
    </div>
  );
}
