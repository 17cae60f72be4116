import { CircleHelp, Rocket, Undo, LayoutGrid, Maximize, PanelLeftClose, PanelLeftOpen, PanelRightClose, PanelRightOpen, Play, Redo2, Save, SquarePen, Undo2, Zap } from 'lucide-react';
import { useState } from 'react';
import { useEditor } from '../store/editor';
import { MOD } from './format';
import { Shortcuts } from './Shortcuts';
import { CheckButton } from '../check/CheckTab';

function ValidationStatus() {
  const validation = useEditor((s) => s.validation);
  const errors = useEditor((s) => s.problems.filter((p) => p.severity === 'error').length);
  const warnings = useEditor((s) => s.problems.length) - errors;
  const setTab = useEditor((s) => s.setBottomTab);
  const rev = useEditor((s) => s.rev);
  const validatedRev = useEditor((s) => s.validatedRev);
  let cls = 'ok';
  let text = 'Valid';
  if (validation === 'pending' && !errors && !warnings) {
    cls = 'pending';
    text = 'Checking…';
  } else if (validation === 'failed') {
    cls = 'error';
    text = 'Not checked';
  } else if (errors) {
    cls = 'error';
    text = `${errors} error${errors > 1 ? 's' : ''}`;
  } else if (warnings) {
    cls = 'warning';
    text = `Valid · ${warnings} warning${warnings > 1 ? 's' : ''}`;
  }
  return (
    <button className={`fx-status fx-status-${cls}`} onClick={() => setTab('problems')} data-testid="validation-status"
      data-state={cls}
      data-current={validatedRev === rev ? 'true' : 'false'}
    >
      <span className="fx-status-dot" />
      {text}
      {errors > 0 && warnings > 0 && <span className="fx-muted fx-status-extra"> · {warnings} warning{warnings > 1 ? 's' : ''}</span>}
    </button>
  );
}

/** Draft and live in words: what is live, and whether the canvas is (or has) unpublished changes. */
export function draftStateText(liveVersion: number | null, hasDraft: boolean, dirty: boolean, savedId: string | null): { state: string; text: string } {
  if (liveVersion === null) {
    if (hasDraft) return { state: 'draft-only', text: dirty ? 'Draft, never published · unsaved edits' : 'Draft, never published' };
    return { state: 'new', text: savedId ? 'Not published' : 'New, not saved' };
  }
  if (hasDraft) return { state: 'draft', text: `Live v${liveVersion} · editing a draft (unpublished changes)${dirty ? ' · unsaved edits' : ''}` };
  if (dirty) return { state: 'unsaved', text: `Live v${liveVersion} · unsaved changes` };
  return { state: 'live', text: `Live v${liveVersion} · no changes` };
}

function DraftState() {
  const liveVersion = useEditor((s) => s.liveVersion);
  const hasDraft = useEditor((s) => s.hasDraft);
  const dirty = useEditor((s) => s.dirty);
  const savedId = useEditor((s) => s.savedId);
  const { state, text } = draftStateText(liveVersion, hasDraft, dirty, savedId);
  return (
    <span
      className={`fx-draft-state fx-draft-state-${state}`}
      data-testid="draft-state"
      data-state={state}
      title="Webhooks, schedules and live runs use the live (published) version; Save keeps a draft, Publish makes it live."
    >
      {text}
    </span>
  );
}

export function TopBar() {
  const name = useEditor((s) => s.meta.name);
  const id = useEditor((s) => s.meta.id);
  const version = useEditor((s) => s.meta.version);
  const savedId = useEditor((s) => s.savedId);
  const dirty = useEditor((s) => s.dirty);
  const saving = useEditor((s) => s.saving);
  const busy = useEditor((s) => s.runBusy);
  const canUndo = useEditor((s) => s.past.length > 0);
  const canRedo = useEditor((s) => s.future.length > 0);
  const setMeta = useEditor((s) => s.setMeta);
  const save = useEditor((s) => s.save);
  const publish = useEditor((s) => s.publish);
  const publishing = useEditor((s) => s.publishing);
  const discardDraft = useEditor((s) => s.discardDraft);
  const liveVersion = useEditor((s) => s.liveVersion);
  const hasDraft = useEditor((s) => s.hasDraft);
  const errors = useEditor((s) => s.problems.filter((p) => p.severity === 'error').length);
  const dryRun = useEditor((s) => s.dryRun);
  const runLive = useEditor((s) => s.runLive);
  const undo = useEditor((s) => s.undo);
  const redo = useEditor((s) => s.redo);
  const autoLayout = useEditor((s) => s.autoLayout);
  const requestFit = useEditor((s) => s.requestFit);
  const setBottomTab = useEditor((s) => s.setBottomTab);
  const leftOpen = useEditor((s) => s.leftOpen);
  const rightOpen = useEditor((s) => s.rightOpen);
  const togglePanel = useEditor((s) => s.togglePanel);
  const [help, setHelp] = useState(false);

  return (
    <header className="fx-topbar" data-testid="topbar">
      <button
        className="fx-btn fx-btn-ghost fx-btn-icon"
        onClick={() => togglePanel('left')}
        title={leftOpen ? 'Hide the steps panel' : 'Show the steps panel'}
        aria-label={leftOpen ? 'Hide the steps panel' : 'Show the steps panel'}
        aria-expanded={leftOpen}
        aria-controls="fx-left-panel"
        data-testid="toggle-left"
      >
        {leftOpen ? <PanelLeftClose size={18} aria-hidden /> : <PanelLeftOpen size={18} aria-hidden />}
      </button>
      <div className="fx-title-block">
        <div className="fx-title">
          <input
            className="fx-name"
            value={name}
            placeholder="Workflow name"
            aria-label="Workflow name"
            data-testid="workflow-name"
            onChange={(e) => setMeta({ name: e.target.value }, 'meta:name')}
            size={Math.max(12, Math.min(48, name.length + 1))}
          />
          <span className="fx-mono fx-muted fx-wf-id" title={`Workflow id (file name): ${id}`}>
            {id}
          </span>
          <span
            className="fx-version"
            data-testid="workflow-version"
            data-canvas-version={version}
            title={liveVersion !== null ? 'The live (published) version: bumped by every publish' : 'Never published'}
          >
            {liveVersion !== null ? `v${liveVersion}` : 'new'}
          </span>
          {dirty && <span className="fx-dirty" data-testid="dirty-dot" title="Unsaved changes" />}
        </div>
        <DraftState />
      </div>
      <ValidationStatus />
      <span className="fx-spacer" />
      <div className="fx-toolgroup">
        <button className="fx-btn fx-btn-ghost fx-btn-icon" onClick={undo} disabled={!canUndo} title={`Undo (${MOD}+Z)`} aria-label="Undo" data-testid="undo">
          <Undo2 size={17} aria-hidden />
        </button>
        <button className="fx-btn fx-btn-ghost fx-btn-icon" onClick={redo} disabled={!canRedo} title={`Redo (${MOD}+Shift+Z)`} aria-label="Redo" data-testid="redo">
          <Redo2 size={17} aria-hidden />
        </button>
        <button className="fx-btn fx-btn-ghost" onClick={autoLayout} title={`Auto-layout (${MOD}+Shift+L)`} aria-label="Layout" data-testid="auto-layout">
          <LayoutGrid size={16} aria-hidden /> <span className="fx-btn-label">Layout</span>
        </button>
        <button className="fx-btn fx-btn-ghost" onClick={requestFit} title="Fit the whole flow in view (Shift+1)" aria-label="Fit" data-testid="fit-view">
          <Maximize size={16} aria-hidden /> <span className="fx-btn-label">Fit</span>
        </button>
        <button
          className="fx-btn fx-btn-ghost fx-btn-icon"
          onClick={() => setHelp((h) => !h)}
          title="Keyboard shortcuts"
          aria-label="Keyboard shortcuts"
          aria-expanded={help}
          data-testid="shortcuts"
        >
          <CircleHelp size={17} aria-hidden />
        </button>
      </div>
      <div className="fx-toolgroup">
        <button className="fx-btn" onClick={() => setBottomTab('input')} title="Edit the run input" aria-label="Input" data-testid="edit-input">
          <SquarePen size={15} aria-hidden /> <span className="fx-btn-label-narrow">Input</span>
        </button>
        <button
          className="fx-btn fx-btn-primary"
          onClick={() => void dryRun()}
          disabled={!!busy}
          title={`Dry run what is on the canvas: templates and routing for real, every side effect simulated (${MOD}+Enter)`}
          data-testid="dry-run"
        >
          {busy === 'dry' ? (
            'Running…'
          ) : (
            <>
              <Play size={15} aria-hidden /> Dry Run
            </>
          )}
        </button>
        <CheckButton />
        <button
          className="fx-btn"
          onClick={() => void runLive()}
          disabled={!!busy}
          title={
            liveVersion === null
              ? 'A live run needs a published version: publish this workflow first'
              : hasDraft || dirty
                ? `Start a live run of live v${liveVersion}: your draft is not published, so it does not run`
                : `Start a live run of live v${liveVersion}`
          }
          aria-label="Run"
          data-testid="run-live"
          data-runs-draft={hasDraft || dirty ? 'false' : undefined}
        >
          {busy === 'live' ? (
            'Running…'
          ) : (
            <>
              <Zap size={15} aria-hidden /> <span className="fx-btn-label-tight">Run</span>
            </>
          )}
        </button>
        <button className="fx-btn" onClick={() => void save()} disabled={saving} title={`Save a draft (${MOD}+S): not live until you publish it`} aria-label="Save" data-testid="save">
          {saving ? (
            'Saving…'
          ) : (
            <>
              <Save size={15} aria-hidden /> <span className="fx-btn-label-tight">Save</span>
            </>
          )}
        </button>
        {(hasDraft || (dirty && liveVersion !== null)) && (
          <button
            className="fx-btn"
            onClick={() => void discardDraft()}
            title={liveVersion === null ? 'Discard the draft (it was never published)' : `Discard the draft and go back to live v${liveVersion}`}
            aria-label="Discard draft"
            data-testid="discard-draft"
          >
            <Undo size={15} aria-hidden /> <span className="fx-btn-label-narrow">Discard draft</span>
          </button>
        )}
        <span
          className="fx-tooltip-wrap"
          title={
            errors
              ? `Fix ${errors} error${errors > 1 ? 's' : ''} to publish`
              : !hasDraft && !dirty && savedId
                ? 'Nothing to publish: the live version is what you see'
                : `Make this the live version: webhooks, schedules and runs use it${dirty ? ' (saves the draft first)' : ''}`
          }
          data-testid="publish-tooltip"
        >
          <button
            className="fx-btn fx-btn-primary"
            onClick={() => void publish()}
            disabled={errors > 0 || publishing || saving || (!hasDraft && !dirty && !!savedId)}
            aria-label="Publish"
            data-testid="publish"
          >
            {publishing ? (
              'Publishing…'
            ) : (
              <>
                <Rocket size={15} aria-hidden /> Publish
              </>
            )}
          </button>
        </span>
      </div>
      <button
        className="fx-btn fx-btn-ghost fx-btn-icon"
        onClick={() => togglePanel('right')}
        title={rightOpen ? 'Hide the inspector' : 'Show the inspector'}
        aria-label={rightOpen ? 'Hide the inspector' : 'Show the inspector'}
        aria-expanded={rightOpen}
        aria-controls="fx-inspector-panel"
        data-testid="toggle-right"
      >
        {rightOpen ? <PanelRightClose size={18} aria-hidden /> : <PanelRightOpen size={18} aria-hidden />}
      </button>
      {help && <Shortcuts onClose={() => setHelp(false)} />}
    </header>
  );
}
