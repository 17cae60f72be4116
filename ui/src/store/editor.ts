// The editor's one store (zustand): the open workflow as a canvas graph, its history, the
// catalog, validation problems, the last run drawn on the canvas, and the panels' state.
// Components read it through selectors; actions live here so keyboard shortcuts, menus and
// tests go through the same code.

import { create } from 'zustand';
import { applyEdgeChanges, applyNodeChanges, type Connection, type EdgeChange, type NodeChange } from '@xyflow/react';
import dagre from '@dagrejs/dagre';
import {
  ApiError,
  parseJson,
  stringifyJson,
  type Api,
  type ValidationProblem,
  type RunEvent,
  type RunRecord,
  type SamplePayload,
  type ConnectorEntry,
  type ConnectionView,
  type ScheduledWorkflow,
  type StepKind,
  type StepRecord,
  type Template,
  type WithWorkflow,
  type WorkflowSummary,
} from '../api';
import type { Workflow } from './workflowFile';
import {
  STEP_ID_RE,
  WORKFLOW_ID_RE,
  connectionProblem,
  defaultConfig,
  edgeId,
  graphToWorkflow,
  idForKind,
  parseProblemPath,
  portsOf,
  renameStepRefs,
  toEdge,
  uniqueStepId,
  workflowToGraph,
  type PortEdge,
  type StepNode,
  type StepNodeData,
  type WorkflowMeta,
} from './graph';

export type BottomTab = 'problems' | 'results' | 'input' | 'check';
export type LeftTab = 'steps' | 'workflows';

export interface StepProblems {
  errors: ValidationProblem[];
  warnings: ValidationProblem[];
  /** Messages by config path (`url`, `headers.Idempotency-Key`, `routes.0.when`). */
  fields: Record<string, string[]>;
}

interface Snapshot {
  meta: WorkflowMeta;
  nodes: StepNode[];
  edges: PortEdge[];
}

export interface Toast {
  id: number;
  kind: 'info' | 'ok' | 'error';
  text: string;
}

export interface StepPicker {
  screen: { x: number; y: number };
  flow: { x: number; y: number };
  from: string;
  port: string;
}

/** A node's box as drawn at full detail (measured when React Flow has measured it). */
export const NODE_W = 216;
const NODE_H = 110;
const GAP_X = 80;
const GAP_Y = 30;

function boxOf(n: StepNode) {
  return { x: n.position.x, y: n.position.y, w: n.measured?.width ?? NODE_W, h: n.measured?.height ?? NODE_H };
}

/** `p`, or the nearest free spot below it (then further right), so a new step never covers another. */
export function freeSpot(nodes: StepNode[], p: { x: number; y: number }): { x: number; y: number } {
  const hits = (x: number, y: number) =>
    nodes.some((n) => {
      const b = boxOf(n);
      return x < b.x + b.w + 10 && x + NODE_W + 10 > b.x && y < b.y + b.h + 10 && y + NODE_H + 10 > b.y;
    });
  for (let col = 0; col < 50; col++) {
    const x = p.x + col * (NODE_W + GAP_X);
    for (let row = 0; row < 12; row++) {
      const y = p.y + row * (NODE_H + GAP_Y);
      if (!hits(x, y)) return { x: Math.round(x), y: Math.round(y) };
    }
  }
  return p;
}

const PANELS_KEY = 'fluxo.panels';
function storedPanels(): { left: boolean; right: boolean } {
  try {
    const v = JSON.parse(localStorage.getItem(PANELS_KEY) ?? '{}') as { left?: unknown; right?: unknown };
    return { left: v.left !== false, right: v.right !== false };
  } catch {
    return { left: true, right: true };
  }
}

export interface ConfirmRequest {
  title: string;
  message: string;
  confirmLabel: string;
  danger?: boolean;
  resolve: (ok: boolean) => void;
}

const HISTORY_LIMIT = 200;
const COALESCE_MS = 1200;
const TERMINAL = new Set(['succeeded', 'failed', 'timed_out', 'interrupted']);
const inputKey = (id: string) => `fluxo.input.${id}`;
const LAST_WF_KEY = 'fluxo.lastWorkflow';

/**
 * What the canvas knows of a step of the drawn run: its record, or while the run goes, what its
 * `step_finished` event told (the status; no timing, attempts or output until the record).
 */
export type StepProgress = Pick<StepRecord, 'step_id' | 'kind' | 'status' | 'attempts' | 'ports'> & Partial<StepRecord>;

export interface EditorState {
  api: Api | null;
  ready: boolean;
  loadError: string | null;
  catalog: StepKind[];
  kinds: Record<string, StepKind>;
  workflows: WorkflowSummary[];
  /** Scheduled workflows by id, with their next tick (`listSchedules`; refreshed with the list). */
  schedules: Record<string, ScheduledWorkflow>;
  templates: WithWorkflow<Template>[];
  samples: SamplePayload[];
  /** The connectors and their operations (`GET /connectors`): the palette's Apps. */
  connectors: ConnectorEntry[];
  /** The connections (masked), for the app action's connection picker. */
  connections: ConnectionView[];
  /** Read the connections again (after Settings → Connections changed them). */
  refreshConnections(): Promise<void>;

  meta: WorkflowMeta;
  /** The id the workflow has on the server (null: never saved, as a draft or live). */
  savedId: string | null;
  /** The live (published) version: what webhooks, schedules and runs use (null: never published). */
  liveVersion: number | null;
  /** The server keeps a draft of it (saved, unpublished changes). */
  hasDraft: boolean;
  nodes: StepNode[];
  edges: PortEdge[];
  selectedIds: string[];
  dirty: boolean;
  /** Bumped by every change of the definition (drives validation). */
  rev: number;
  past: Snapshot[];
  future: Snapshot[];
  coalesce: { key: string; at: number } | null;
  /** Copied (or cut) steps and the edges among them; a cut also keeps the edges that joined
   * them to the rest of the flow (`boundary`), re-attached when pasted with the same ids. */
  clipboard: { nodes: StepNode[]; edges: PortEdge[]; boundary: PortEdge[] } | null;
  pasteCount: number;
  /** A request to the canvas to centre a node (the canvas owns the viewport). */
  focus: { id: string; n: number; keepZoom?: boolean } | null;
  fitRequest: number;

  problems: ValidationProblem[];
  problemsByStep: Record<string, StepProblems>;
  problemEdges: Record<string, 'error' | 'warning'>;
  validation: 'idle' | 'pending' | 'done' | 'failed';
  validateSeq: number;
  /** The `rev` the shown problems belong to. */
  validatedRev: number;

  inputText: string;
  run: RunRecord | null;
  runByStep: Record<string, StepProgress>;
  runBusy: null | 'dry' | 'live';

  leftTab: LeftTab;
  /** The side panels (palette and inspector) shown; the canvas takes the room of a hidden one. */
  leftOpen: boolean;
  rightOpen: boolean;
  bottomTab: BottomTab;
  bottomOpen: boolean;
  /** The step picker opened by dropping a wire on empty canvas (screen point, flow point, the wire's source). */
  picker: StepPicker | null;
  toast: Toast | null;
  confirm: ConfirmRequest | null;
  saving: boolean;
  publishing: boolean;

  // lifecycle
  init(api: Api): Promise<void>;
  refreshWorkflows(): Promise<void>;
  /** Ask for the schedules' next ticks again (an engine without them leaves the map empty). */
  refreshSchedules(): Promise<void>;
  loadWorkflow(wf: Workflow, savedId: string | null, dirty?: boolean, state?: { liveVersion: number | null; hasDraft: boolean }): void;
  openWorkflow(id: string): Promise<void>;
  newWorkflow(template?: WithWorkflow<Template>): void;
  /** Save the canvas as the workflow's draft (never live: Publish makes it live). */
  save(): Promise<boolean>;
  /** Publish: save the draft first when the canvas has changes, then make it the live version. */
  publish(): Promise<boolean>;
  /** Discard the draft (asks first) and go back to the live version. */
  discardDraft(): Promise<void>;
  deleteWorkflow(id: string): Promise<void>;
  toWorkflow(): Workflow;

  // canvas
  onNodesChange(changes: NodeChange<StepNode>[]): void;
  onEdgesChange(changes: EdgeChange<PortEdge>[]): void;
  onConnect(c: Connection): void;
  isValidConnection(c: Connection | PortEdge): boolean;
  beginDrag(): void;
  endDrag(): void;
  addStep(kind: string, position: { x: number; y: number }): string;
  /** Add a step to the right of the selected step (connected to it) or of the last step. */
  addStepAfter(kind: string): string;
  /** Add an `action` step for `operation` of connector `app`, as {@link addStepAfter} does. */
  addAppStep(app: string, operation: string): string;
  /**
   * Add a ready-made step of `kind` (a catalog preset, e.g. Memory's "Claim the event"), as
   * {@link addStepAfter} does: named after it, its config filled from the workflow (the event's
   * id template, a namespace of the workflow's own).
   */
  addPresetStep(kind: string, presetId: string): string | null;
  /** Add the workflow's trigger (a blank workflow has none), left of any step. */
  addTrigger(kind: string): string;
  /** Add a step where the picker was opened and wire the picker's source port to it. */
  pickStep(kind: string): string | null;
  openPicker(p: StepPicker | null): void;
  updateStep(id: string, patch: Partial<StepNodeData>, coalesceKey?: string): void;
  renameStep(id: string, next: string): string | null;
  setMeta(patch: Partial<WorkflowMeta>, coalesceKey?: string): void;
  deleteSelection(): void;
  deleteEdge(id: string): void;
  copySelection(): void;
  /** Copy the selection, then delete it (C14: a cut pasted back keeps its ids and edges). */
  cutSelection(): void;
  /** Paste the clipboard: copies get fresh ids (their `steps.<id>` templates follow); steps
   * whose ids are free (after a cut) keep them, with their edges to the rest of the flow. */
  paste(): void;
  selectAll(): void;
  undo(): void;
  redo(): void;
  autoLayout(): void;
  selectNode(id: string | null, center?: boolean): void;
  requestFit(): void;

  // validation and runs
  validateNow(): Promise<void>;
  setInputText(text: string): void;
  dryRun(): Promise<void>;
  runLive(): Promise<void>;
  clearRun(): void;

  // chrome
  setLeftTab(t: LeftTab): void;
  togglePanel(side: 'left' | 'right', open?: boolean): void;
  setBottomTab(t: BottomTab): void;
  toggleBottom(open?: boolean): void;
  notify(kind: Toast['kind'], text: string): void;
  ask(req: Omit<ConfirmRequest, 'resolve'>): Promise<boolean>;
  /** Ask before discarding unsaved changes; true = go ahead. */
  guardDirty(action: string): Promise<boolean>;
}

function snapshotOf(s: Pick<EditorState, 'meta' | 'nodes' | 'edges'>): Snapshot {
  return {
    meta: s.meta,
    nodes: s.nodes.map((n) => ({ ...n, selected: false, dragging: false })),
    edges: s.edges.map((e) => ({ ...e, selected: false })),
  };
}

function selectedOf(nodes: StepNode[], prev: string[]): string[] {
  const ids = nodes.filter((n) => n.selected).map((n) => n.id);
  return ids.length === prev.length && ids.every((x, i) => x === prev[i]) ? prev : ids;
}

function parseInput(text: string): { ok: true; value: unknown } | { ok: false; error: string } {
  if (!text.trim()) return { ok: true, value: {} };
  try {
    return { ok: true, value: parseJson(text) };
  } catch (e) {
    return { ok: false, error: (e as Error).message };
  }
}

/** The run input a workflow opens with: what was last typed for it, else its trigger's
 * `sample_input`, else the built-in sample its `settings.sample` names, else `{}`. */
function defaultInputFor(wf: Workflow, samples: SamplePayload[]): string {
  const stored = localStorage.getItem(inputKey(wf.id));
  if (stored !== null) return stored;
  for (const s of wf.steps ?? []) {
    const sample = (s.config as { sample_input?: unknown })?.sample_input;
    if (sample !== undefined && sample !== null) return stringifyJson(sample, 2);
  }
  const named = samples.find((p) => p.name === wf.settings?.sample);
  if (named) return stringifyJson(named.payload, 2);
  return '{}';
}

/**
 * A blank workflow: no step, not even a trigger. The canvas asks how it starts (webhook,
 * schedule, manual), so a webhook flow does not begin by deleting a manual trigger.
 */
function blankWorkflow(id: string): Workflow {
  return {
    id,
    name: 'Untitled workflow',
    version: 0,
    settings: { run_timeout_s: 50 },
    steps: [],
    edges: [],
  };
}

/**
 * The template of the event's id, for a claim's key: the webhook trigger's `dedupe_key` when it
 * has one (what its deliveries are deduplicated by), else `{{ input.id }}` (Stripe's, GitHub's
 * delivery and most senders' event id, as the templates' claims use).
 */
function eventIdTemplate(nodes: StepNode[], kinds: Record<string, StepKind>): string {
  const trigger = nodes.find((n) => kinds[n.data.kind]?.trigger);
  const key = (trigger?.data.config as { dedupe_key?: unknown } | undefined)?.dedupe_key;
  return typeof key === 'string' && key.trim() ? key : '{{ input.id }}';
}

function uniqueWorkflowId(base: string, taken: Set<string>): string {
  if (!taken.has(base)) return base;
  for (let i = 2; ; i++) if (!taken.has(`${base}-${i}`)) return `${base}-${i}`;
}

let toastSeq = 0;

export const useEditor = create<EditorState>()((set, get) => {
  /** Record the current state for undo, then mark the definition changed. */
  const checkpoint = (coalesceKey?: string) => {
    const s = get();
    const now = Date.now();
    if (coalesceKey && s.coalesce && s.coalesce.key === coalesceKey && now - s.coalesce.at < COALESCE_MS) {
      set({ coalesce: { key: coalesceKey, at: now } });
      return;
    }
    const past = [...s.past, snapshotOf(s)];
    if (past.length > HISTORY_LIMIT) past.shift();
    set({ past, future: [], coalesce: coalesceKey ? { key: coalesceKey, at: now } : null });
  };
  const changed = () => set((s) => ({ dirty: true, rev: s.rev + 1 }));

  const applyRun = (run: RunRecord | null) => {
    const byStep: Record<string, StepRecord> = {};
    for (const st of run?.steps ?? []) byStep[st.step_id] = st;
    set({ run, runByStep: byStep });
  };

  return {
    api: null,
    ready: false,
    loadError: null,
    catalog: [],
    kinds: {},
    workflows: [],
    schedules: {},
    templates: [],
    samples: [],
    connectors: [],
    connections: [],

    meta: { id: 'untitled', name: 'Untitled workflow', version: 0 },
    savedId: null,
    liveVersion: null,
    hasDraft: false,
    nodes: [],
    edges: [],
    selectedIds: [],
    dirty: false,
    rev: 0,
    past: [],
    future: [],
    coalesce: null,
    clipboard: null,
    pasteCount: 0,
    focus: null,
    fitRequest: 0,

    problems: [],
    problemsByStep: {},
    problemEdges: {},
    validation: 'idle',
    validateSeq: 0,
    validatedRev: -1,

    inputText: '{}',
    run: null,
    runByStep: {},
    runBusy: null,

    leftTab: 'steps',
    leftOpen: storedPanels().left,
    rightOpen: storedPanels().right,
    bottomTab: 'problems',
    // Closed until there is something to show: a run's result, errors, the input asked for.
    bottomOpen: false,
    picker: null,
    toast: null,
    confirm: null,
    saving: false,
    publishing: false,

    async init(api) {
      set({ api, ready: false, loadError: null });
      try {
        const [catalog, workflows, templates, samples, connectors] = await Promise.all([
          api.stepKinds(),
          api.listWorkflows(),
          api.templates().catch(() => [] as WithWorkflow<Template>[]),
          api.samplePayloads().catch(() => [] as SamplePayload[]),
          api.connectors().catch(() => [] as ConnectorEntry[]),
        ]);
        set({ catalog, kinds: Object.fromEntries(catalog.map((k) => [k.kind, k])), workflows, templates, samples, connectors });
        void get().refreshConnections();
        void get().refreshSchedules();
        const last = localStorage.getItem(LAST_WF_KEY);
        const first = workflows.find((w) => w.id === last) ?? workflows[0];
        if (first) await get().openWorkflow(first.id);
        else get().newWorkflow();
        set({ ready: true });
      } catch (e) {
        set({ loadError: (e as Error).message, ready: false });
        throw e;
      }
    },

    async refreshConnections() {
      const api = get().api;
      if (!api) return;
      set({ connections: await api.listConnections().catch(() => get().connections) });
    },

    async refreshWorkflows() {
      const api = get().api;
      if (!api) return;
      const [workflows] = await Promise.all([api.listWorkflows(), get().refreshSchedules()]);
      set({ workflows });
    },

    async refreshSchedules() {
      const api = get().api;
      if (!api) return;
      try {
        const list = await api.listSchedules();
        set({ schedules: Object.fromEntries(list.map((x) => [x.workflow_id, x])) });
      } catch {
        /* an older engine, or offline: no "next run" hints */
      }
    },

    loadWorkflow(wf, savedId, dirty = false, state = { liveVersion: null, hasDraft: false }) {
      const { meta, nodes, edges } = workflowToGraph(wf);
      set((s) => ({
        meta,
        savedId,
        liveVersion: state.liveVersion,
        hasDraft: state.hasDraft,
        nodes,
        edges,
        selectedIds: [],
        dirty,
        rev: s.rev + 1,
        past: [],
        future: [],
        coalesce: null,
        problems: [],
        problemsByStep: {},
        problemEdges: {},
        validation: 'idle',
        run: null,
        runByStep: {},
        picker: null,
        bottomOpen: false,
        inputText: defaultInputFor(wf, s.samples),
        fitRequest: s.fitRequest + 1,
      }));
      if (savedId) localStorage.setItem(LAST_WF_KEY, savedId);
    },

    async openWorkflow(id) {
      const api = get().api!;
      try {
        // The draft if there is one (what the builder was editing), else the live file.
        const [live, draft] = await Promise.all([
          api.getWorkflow(id).catch((e: ApiError) => {
            if (e.code === 'workflow_not_found') return null;
            throw e;
          }),
          api.getDraft(id),
        ]);
        const wf = draft ? { ...draft.workflow, id: draft.workflow.id ?? id } : live;
        if (!wf) throw new ApiError('workflow_not_found', `no workflow \`${id}\``);
        get().loadWorkflow(wf, id, false, { liveVersion: live ? (live.version ?? 0) : null, hasDraft: !!draft });
      } catch (e) {
        get().notify('error', `Cannot open \`${id}\`: ${(e as Error).message}`);
      }
    },

    newWorkflow(template) {
      const taken = new Set(get().workflows.map((w) => w.id));
      if (template) {
        const wf = structuredClone(template.workflow);
        wf.id = uniqueWorkflowId(template.id, taken);
        wf.version = 0;
        get().loadWorkflow(wf, null, true);
      } else {
        get().loadWorkflow(blankWorkflow(uniqueWorkflowId('untitled-workflow', taken)), null, true);
      }
    },

    toWorkflow() {
      const s = get();
      return graphToWorkflow(s.meta, s.nodes, s.edges);
    },

    async save() {
      const s = get();
      const api = s.api!;
      const wf = s.toWorkflow();
      if (!WORKFLOW_ID_RE.test(wf.id)) {
        s.notify('error', `Workflow id \`${wf.id}\` must be lowercase letters, digits, - or _ (max 64).`);
        return false;
      }
      const renamedFrom = s.savedId && s.savedId !== wf.id ? s.savedId : null;
      if ((renamedFrom || !s.savedId) && s.workflows.some((w) => w.id === wf.id)) {
        const ok = await s.ask({
          title: 'Replace workflow?',
          message: `A workflow with the id “${wf.id}” exists. Saving replaces it.`,
          confirmLabel: 'Replace',
          danger: true,
        });
        if (!ok) return false;
      }
      set({ saving: true });
      try {
        const res = await api.saveDraft(wf.id, wf);
        // The live version of the id saved under (a new id may name a published workflow).
        const target = renamedFrom || !s.savedId ? s.workflows.find((w) => w.id === wf.id) : undefined;
        const liveVersion = renamedFrom || !s.savedId ? (target && !target.draft_only ? target.version : null) : s.liveVersion;
        let renameNote = '';
        if (renamedFrom) {
          // A draft moves with the rename; a published workflow stays live until it is deleted.
          try {
            await api.discardDraft(renamedFrom);
            if (s.liveVersion !== null) renameNote = ` ${renamedFrom} stays live until you delete it.`;
            else localStorage.removeItem(inputKey(renamedFrom));
          } catch (e) {
            s.notify('error', `Saved as ${wf.id}, but the draft of ${renamedFrom} could not be discarded: ${(e as Error).message}`);
          }
        }
        // Nothing changes on the server's side of the canvas: keep it (and its history) as is.
        set((st) => ({
          savedId: wf.id,
          hasDraft: true,
          liveVersion,
          // Edits made while the request was in flight stay unsaved.
          dirty: st.rev !== s.rev,
        }));
        localStorage.setItem(LAST_WF_KEY, wf.id);
        localStorage.setItem(inputKey(wf.id), get().inputText);
        const errors = res.problems.filter((p) => p.severity === 'error').length;
        get().notify(
          errors ? 'info' : 'ok',
          (errors
            ? `Draft saved with ${errors} error${errors > 1 ? 's' : ''}: fix ${errors > 1 ? 'them' : 'it'} to publish.`
            : liveVersion === null
              ? 'Draft saved: not live until you publish it.'
              : `Draft saved: live v${liveVersion} runs until you publish.`) + renameNote,
        );
        void get().refreshWorkflows();
        return true;
      } catch (e) {
        const err = e as ApiError;
        if (err.problems?.length) {
          set({ bottomTab: 'problems', bottomOpen: true });
        }
        get().notify('error', `Not saved: ${err.message}`);
        return false;
      } finally {
        set({ saving: false });
      }
    },

    async publish() {
      const s = get();
      if (!s.api || s.publishing || s.saving) return false;
      if (s.dirty || !s.savedId || s.meta.id !== s.savedId) {
        if (!(await get().save())) return false;
      } else if (!s.hasDraft) {
        s.notify('info', 'Nothing to publish: the live version is what you see.');
        return false;
      }
      const id = get().savedId!;
      set({ publishing: true });
      try {
        const res = await get().api!.publishWorkflow(id);
        set((st) => ({ liveVersion: res.version, hasDraft: false, meta: { ...st.meta, version: res.version } }));
        get().notify('ok', `Published v${res.version}: webhooks, schedules and runs use it now.`);
        void get().refreshWorkflows();
        return true;
      } catch (e) {
        const err = e as ApiError;
        if (err.problems?.length) set({ bottomTab: 'problems', bottomOpen: true });
        get().notify('error', `Not published: ${err.message}`);
        return false;
      } finally {
        set({ publishing: false });
      }
    },

    async discardDraft() {
      const s = get();
      if (!s.api) return;
      const id = s.savedId;
      const name = s.meta.name || s.meta.id;
      const ok = await s.ask({
        title: 'Discard draft?',
        message:
          s.liveVersion === null
            ? `“${name}” has never been published: discarding its draft deletes it.`
            : `Your unpublished changes to “${name}” are lost and the editor goes back to live v${s.liveVersion}.`,
        confirmLabel: 'Discard draft',
        danger: true,
      });
      if (!ok) return;
      try {
        if (id && s.hasDraft) await s.api.discardDraft(id);
        await get().refreshWorkflows();
        if (id && s.liveVersion !== null) await get().openWorkflow(id);
        else {
          const next = get().workflows[0];
          if (next) await get().openWorkflow(next.id);
          else get().newWorkflow();
        }
        get().notify('ok', s.liveVersion === null ? `Discarded ${id ?? name}` : `Back to live v${s.liveVersion}`);
      } catch (e) {
        get().notify('error', `Not discarded: ${(e as Error).message}`);
      }
    },

    async deleteWorkflow(id) {
      const s = get();
      const ok = await s.ask({
        title: 'Delete workflow?',
        message: `“${s.workflows.find((w) => w.id === id)?.name ?? id}” (${id}.json) will be deleted. Its run history stays.`,
        confirmLabel: 'Delete',
        danger: true,
      });
      if (!ok) return;
      try {
        await s.api!.deleteWorkflow(id);
        localStorage.removeItem(inputKey(id));
        await get().refreshWorkflows();
        if (get().savedId === id) {
          const next = get().workflows[0];
          if (next) await get().openWorkflow(next.id);
          else get().newWorkflow();
        }
        get().notify('ok', `Deleted ${id}`);
      } catch (e) {
        get().notify('error', `Not deleted: ${(e as Error).message}`);
      }
    },

    onNodesChange(changes) {
      const s = get();
      let moved = false;
      let structural = false;
      for (const c of changes) {
        if (c.type === 'position' && c.position) moved = true;
        if (c.type === 'remove' || c.type === 'add') structural = true;
      }
      if (structural) checkpoint();
      const nodes = applyNodeChanges(changes, s.nodes);
      const hasSelect = changes.some((c) => c.type === 'select' || c.type === 'remove' || c.type === 'add');
      set({ nodes, selectedIds: hasSelect ? selectedOf(nodes, s.selectedIds) : s.selectedIds });
      if (structural) changed();
      else if (moved && !s.dirty) set({ dirty: true });
    },

    onEdgesChange(changes) {
      const s = get();
      const structural = changes.some((c) => c.type === 'remove' || c.type === 'add');
      if (structural) checkpoint();
      set({ edges: applyEdgeChanges(changes, s.edges) });
      if (structural) changed();
    },

    isValidConnection(c) {
      const s = get();
      return connectionProblem(c, s.nodes, s.edges, s.kinds) === null;
    },

    onConnect(c) {
      const s = get();
      const why = connectionProblem(c, s.nodes, s.edges, s.kinds);
      if (why) {
        s.notify('error', `Not connected: ${why}`);
        return;
      }
      checkpoint();
      const e = toEdge({ from: c.source!, port: c.sourceHandle ?? 'out', to: c.target! });
      set({ edges: [...s.edges, e] });
      changed();
    },

    beginDrag() {
      checkpoint();
    },

    endDrag() {
      // A click that moved nothing leaves no undo step.
      const s = get();
      const top = s.past[s.past.length - 1];
      if (!top || top.nodes.length !== s.nodes.length) return;
      const same = top.nodes.every(
        (n, i) => n.id === s.nodes[i].id && n.position.x === s.nodes[i].position.x && n.position.y === s.nodes[i].position.y,
      );
      if (same && top.edges.length === s.edges.length) set({ past: s.past.slice(0, -1) });
    },

    addStep(kind, position) {
      const s = get();
      const k = s.kinds[kind];
      const id = idForKind(kind, new Set(s.nodes.map((n) => n.id)));
      checkpoint();
      const node: StepNode = {
        id,
        type: 'step',
        position: freeSpot(s.nodes, position),
        data: { kind, config: defaultConfig(k) },
        selected: true,
      };
      const nodes = [...s.nodes.map((n) => (n.selected ? { ...n, selected: false } : n)), node];
      set({ nodes, selectedIds: [id], edges: s.edges.map((e) => (e.selected ? { ...e, selected: false } : e)) });
      changed();
      return id;
    },

    addStepAfter(kind) {
      const s = get();
      const selected = s.nodes.filter((n) => n.selected);
      const anchor = selected.length === 1 ? selected[0] : s.nodes[s.nodes.length - 1];
      const at = anchor ? { x: anchor.position.x + (anchor.measured?.width ?? NODE_W) + GAP_X, y: anchor.position.y } : { x: 0, y: 0 };
      const id = get().addStep(kind, at);
      if (selected.length === 1) {
        const from = selected[0];
        const port = portsOf(s.kinds[from.data.kind], from.data.config).find((p) => p !== 'error');
        const st = get();
        if (port && connectionProblem({ source: from.id, sourceHandle: port, target: id }, st.nodes, st.edges, st.kinds) === null) {
          set({ edges: [...st.edges, toEdge({ from: from.id, port, to: id })] });
          changed();
        }
      }
      set((st) => ({ focus: { id, n: (st.focus?.n ?? 0) + 1, keepZoom: true } }));
      return id;
    },

    addPresetStep(kind, presetId) {
      const preset = get().kinds[kind]?.presets?.find((p) => p.id === presetId);
      if (!preset) return null;
      const id = get().addStepAfter(kind);
      const st = get();
      const config = { ...((preset.config ?? {}) as Record<string, unknown>) };
      for (const [member, fill] of Object.entries(preset.fill ?? {})) {
        if (fill === 'event_id') config[member] = eventIdTemplate(st.nodes, st.kinds);
        else if (fill === 'workflow_namespace') config[member] = `processed-${st.meta.id}`.slice(0, 128);
      }
      set((x) => ({ nodes: x.nodes.map((n) => (n.id === id ? { ...n, data: { ...n.data, config, name: preset.title } } : n)) }));
      changed();
      return id;
    },

    addTrigger(kind) {
      const s = get();
      const left = s.nodes.length ? Math.min(...s.nodes.map((n) => n.position.x)) - (NODE_W + GAP_X) : 0;
      const top = s.nodes.length ? Math.min(...s.nodes.map((n) => n.position.y)) : 0;
      const id = get().addStep(kind, { x: left, y: top });
      // The first step of a blank canvas: fit it as an opened workflow is (the view the steps
      // added next are placed in); else bring the new trigger into view.
      if (!s.nodes.length) set((st) => ({ fitRequest: st.fitRequest + 1 }));
      else set((st) => ({ focus: { id, n: (st.focus?.n ?? 0) + 1, keepZoom: true } }));
      return id;
    },

    addAppStep(app, operation) {
      const id = get().addStepAfter('action');
      const node = get().nodes.find((n) => n.id === id);
      const config = { ...(node?.data.config ?? {}), connector: app, operation, connection: '', params: {} };
      set((st) => ({ nodes: st.nodes.map((n) => (n.id === id ? { ...n, data: { ...n.data, config } } : n)) }));
      changed();
      return id;
    },

    pickStep(kind) {
      const s = get();
      const p = s.picker;
      if (!p) return null;
      set({ picker: null });
      const id = s.addStep(kind, { x: Math.round(p.flow.x), y: Math.round(p.flow.y - 40) });
      const st = get();
      if (connectionProblem({ source: p.from, sourceHandle: p.port, target: id }, st.nodes, st.edges, st.kinds) === null) {
        set({ edges: [...st.edges, toEdge({ from: p.from, port: p.port, to: id })] });
        changed();
      }
      set((x) => ({ focus: { id, n: (x.focus?.n ?? 0) + 1, keepZoom: true } }));
      return id;
    },

    openPicker(p) {
      set({ picker: p });
    },

    updateStep(id, patch, coalesceKey) {
      const s = get();
      const node = s.nodes.find((n) => n.id === id);
      if (!node) return;
      checkpoint(coalesceKey ?? `step:${id}`);
      const data: StepNodeData = { ...node.data, ...patch };
      if (patch.name !== undefined && !patch.name) delete data.name;
      let edges = s.edges;
      // A router's ports follow its routes: renamed routes keep their edges, removed ones drop theirs.
      if (patch.config) {
        const kind = s.kinds[node.data.kind];
        const before = portsOf(kind, node.data.config);
        const after = portsOf(kind, data.config);
        if (before.join('\u0000') !== after.join('\u0000')) {
          const rename = new Map<string, string>();
          if (before.length === after.length) before.forEach((p, i) => p !== after[i] && rename.set(p, after[i]));
          edges = edges.flatMap((e) => {
            if (e.source !== id) return [e];
            const port = e.sourceHandle ?? 'out';
            const np = rename.get(port) ?? port;
            if (!after.includes(np)) return [];
            return np === port ? [e] : [{ ...toEdge({ from: e.source, port: np, to: e.target }) }];
          });
        }
      }
      set({ nodes: s.nodes.map((n) => (n.id === id ? { ...n, data } : n)), edges });
      changed();
    },

    renameStep(id, next) {
      const s = get();
      if (next === id) return null;
      if (!STEP_ID_RE.test(next)) return 'Use letters, digits, _ or - (start with a letter or _; max 64).';
      if (s.nodes.some((n) => n.id === next)) return `A step \`${next}\` exists.`;
      checkpoint();
      const nodes = s.nodes.map((n) =>
        n.id === id
          ? { ...n, id: next }
          : { ...n, data: { ...n.data, config: renameStepRefs(n.data.config, id, next) as Record<string, unknown> } },
      );
      const edges = s.edges.map((e) =>
        e.source === id || e.target === id
          ? toEdge({
              from: e.source === id ? next : e.source,
              port: e.sourceHandle ?? 'out',
              to: e.target === id ? next : e.target,
            })
          : e,
      );
      const runByStep = { ...s.runByStep };
      if (runByStep[id]) {
        runByStep[next] = runByStep[id];
        delete runByStep[id];
      }
      set({ nodes, edges, runByStep, selectedIds: s.selectedIds.map((x) => (x === id ? next : x)) });
      changed();
      return null;
    },

    setMeta(patch, coalesceKey) {
      checkpoint(coalesceKey ?? 'meta');
      set((s) => ({ meta: { ...s.meta, ...patch } }));
      changed();
    },

    deleteSelection() {
      const s = get();
      const gone = new Set(s.nodes.filter((n) => n.selected).map((n) => n.id));
      const edgesGone = new Set(s.edges.filter((e) => e.selected).map((e) => e.id));
      if (!gone.size && !edgesGone.size) return;
      checkpoint();
      set({
        nodes: s.nodes.filter((n) => !gone.has(n.id)),
        edges: s.edges.filter((e) => !edgesGone.has(e.id) && !gone.has(e.source) && !gone.has(e.target)),
        selectedIds: [],
      });
      changed();
    },

    deleteEdge(id) {
      const s = get();
      if (!s.edges.some((e) => e.id === id)) return;
      checkpoint();
      set({ edges: s.edges.filter((e) => e.id !== id) });
      changed();
    },

    copySelection() {
      const s = get();
      const nodes = s.nodes.filter((n) => n.selected);
      if (!nodes.length) return;
      const ids = new Set(nodes.map((n) => n.id));
      const edges = s.edges.filter((e) => ids.has(e.source) && ids.has(e.target));
      set({ clipboard: { nodes: structuredClone(nodes), edges: structuredClone(edges), boundary: [] }, pasteCount: 0 });
      const text = JSON.stringify(graphToWorkflow(s.meta, nodes, edges));
      void navigator.clipboard?.writeText(text).catch(() => {});
      s.notify('info', `Copied ${nodes.length} step${nodes.length > 1 ? 's' : ''}`);
    },

    cutSelection() {
      const s = get();
      const nodes = s.nodes.filter((n) => n.selected);
      if (!nodes.length) return;
      const ids = new Set(nodes.map((n) => n.id));
      const edges = s.edges.filter((e) => ids.has(e.source) && ids.has(e.target));
      const boundary = s.edges.filter((e) => ids.has(e.source) !== ids.has(e.target));
      // A cut pastes back where it was (no offset on the first paste).
      set({ clipboard: { nodes: structuredClone(nodes), edges: structuredClone(edges), boundary: structuredClone(boundary) }, pasteCount: -1 });
      void navigator.clipboard?.writeText(JSON.stringify(graphToWorkflow(s.meta, nodes, edges))).catch(() => {});
      get().deleteSelection();
      s.notify('info', `Cut ${nodes.length} step${nodes.length > 1 ? 's' : ''}`);
    },

    paste() {
      const s = get();
      const clip = s.clipboard;
      if (!clip) return;
      checkpoint();
      const taken = new Set(s.nodes.map((n) => n.id));
      const map = new Map<string, string>();
      const offset = 40 * (s.pasteCount + 1);
      for (const n of clip.nodes) {
        const id = uniqueStepId(n.id, taken);
        taken.add(id);
        map.set(n.id, id);
      }
      const fresh: StepNode[] = clip.nodes.map((n) => {
        // Templates in the copies that name a copied step name its copy.
        let config = structuredClone(n.data.config) as unknown;
        for (const [from, to] of map) if (from !== to) config = renameStepRefs(config, from, to);
        return {
          id: map.get(n.id)!,
          type: 'step',
          position: { x: n.position.x + offset, y: n.position.y + offset },
          data: { ...structuredClone(n.data), config: config as Record<string, unknown> },
          selected: true,
        };
      });
      const freshEdges = clip.edges.map((e) =>
        toEdge({ from: map.get(e.source)!, port: e.sourceHandle ?? 'out', to: map.get(e.target)! }),
      );
      // A cut's edges to the rest of the flow come back when both ends are there again.
      const present = new Set([...s.nodes.map((n) => n.id), ...fresh.map((n) => n.id)]);
      const kept = (id: string) => (map.has(id) ? map.get(id) === id : true);
      const reattached = clip.boundary
        .filter((e) => kept(e.source) && kept(e.target) && present.has(e.source) && present.has(e.target))
        .filter((e) => !s.edges.some((x) => x.id === e.id))
        .map((e) => toEdge({ from: e.source, port: e.sourceHandle ?? 'out', to: e.target }));
      const nodes = [...s.nodes.map((n) => (n.selected ? { ...n, selected: false } : n)), ...fresh];
      set({
        nodes,
        edges: [...s.edges, ...freshEdges, ...reattached],
        selectedIds: fresh.map((n) => n.id),
        pasteCount: s.pasteCount + 1,
      });
      changed();
    },

    selectAll() {
      const s = get();
      const nodes = s.nodes.map((n) => (n.selected ? n : { ...n, selected: true }));
      set({ nodes, selectedIds: selectedOf(nodes, s.selectedIds) });
    },

    undo() {
      const s = get();
      const prev = s.past[s.past.length - 1];
      if (!prev) return;
      set({
        ...prev,
        past: s.past.slice(0, -1),
        future: [...s.future, snapshotOf(s)],
        selectedIds: [],
        coalesce: null,
        dirty: true,
        rev: s.rev + 1,
      });
    },

    redo() {
      const s = get();
      const next = s.future[s.future.length - 1];
      if (!next) return;
      set({
        ...next,
        future: s.future.slice(0, -1),
        past: [...s.past, snapshotOf(s)],
        selectedIds: [],
        coalesce: null,
        dirty: true,
        rev: s.rev + 1,
      });
    },

    autoLayout() {
      const s = get();
      if (!s.nodes.length) return;
      checkpoint();
      const g = new dagre.graphlib.Graph();
      g.setGraph({ rankdir: 'LR', nodesep: 40, ranksep: 90, marginx: 0, marginy: 0 });
      g.setDefaultEdgeLabel(() => ({}));
      // Sizes at full detail (zoomed out, nodes are drawn smaller than they are when read).
      const size = (n: StepNode) => ({
        width: Math.max(n.measured?.width ?? 0, 216),
        height: Math.max(n.measured?.height ?? 0, 130 + 18 * (portsOf(s.kinds[n.data.kind], n.data.config).length - 2)),
      });
      for (const n of s.nodes) g.setNode(n.id, size(n));
      for (const e of s.edges) g.setEdge(e.source, e.target);
      dagre.layout(g);
      const nodes = s.nodes.map((n) => {
        const p = g.node(n.id);
        const { width: w, height: h } = size(n);
        return { ...n, position: { x: Math.round(p.x - w / 2), y: Math.round(p.y - h / 2) } };
      });
      set((st) => ({ nodes, fitRequest: st.fitRequest + 1 }));
      changed();
    },

    selectNode(id, center = false) {
      const s = get();
      const nodes = s.nodes.map((n) => {
        const sel = n.id === id;
        return n.selected === sel ? n : { ...n, selected: sel };
      });
      set({
        nodes,
        edges: s.edges.some((e) => e.selected) ? s.edges.map((e) => ({ ...e, selected: false })) : s.edges,
        selectedIds: selectedOf(nodes, s.selectedIds),
        focus: center && id ? { id, n: (s.focus?.n ?? 0) + 1 } : s.focus,
      });
    },

    requestFit() {
      set((s) => ({ fitRequest: s.fitRequest + 1 }));
    },

    async validateNow() {
      const s = get();
      if (!s.api) return;
      const seq = s.validateSeq + 1;
      set({ validateSeq: seq, validation: 'pending' });
      const rev = s.rev;
      const wf = s.toWorkflow();
      try {
        const res = await s.api.validateWorkflow(wf);
        if (get().validateSeq !== seq) return;
        const byStep: Record<string, StepProblems> = {};
        const edgeMarks: Record<string, 'error' | 'warning'> = {};
        for (const p of res.problems) {
          const loc = parseProblemPath(p.path);
          const stepId = p.step ?? (loc.stepIndex !== undefined ? wf.steps[loc.stepIndex]?.id : undefined);
          if (loc.edgeIndex !== undefined) {
            const e = wf.edges[loc.edgeIndex];
            if (e) {
              const id = edgeId(e.from, e.port ?? 'out', e.to);
              if (edgeMarks[id] !== 'error') edgeMarks[id] = p.severity;
            }
          }
          if (!stepId) continue;
          const bucket = (byStep[stepId] ??= { errors: [], warnings: [], fields: {} });
          (p.severity === 'error' ? bucket.errors : bucket.warnings).push(p);
          if (loc.configPath && loc.stepIndex !== undefined && wf.steps[loc.stepIndex]?.id === stepId) {
            const key = loc.configPath.join('.');
            (bucket.fields[key] ??= []).push(p.severity === 'warning' ? `Warning: ${p.message}` : p.message);
          }
        }
        const hadErrors = get().problems.some((p) => p.severity === 'error');
        const hasErrors = res.problems.some((p) => p.severity === 'error');
        set({ problems: res.problems, problemsByStep: byStep, problemEdges: edgeMarks, validation: 'done', validatedRev: rev });
        // Errors appearing are something to show: open the panel on them (once; closing it sticks).
        // Not on an empty canvas: its only problem is the missing trigger, which the canvas's
        // "How does this workflow start?" prompt asks for.
        if (hasErrors && !hadErrors && !get().bottomOpen && wf.steps.length > 0) set({ bottomOpen: true, bottomTab: 'problems' });
      } catch (e) {
        if (get().validateSeq !== seq) return;
        set({ validation: 'failed' });
        if ((e as ApiError).code === 'network') get().notify('error', (e as Error).message);
      }
    },

    setInputText(text) {
      set({ inputText: text });
      localStorage.setItem(inputKey(get().meta.id), text);
    },

    async dryRun() {
      const s = get();
      if (!s.api || s.runBusy) return;
      const input = parseInput(s.inputText);
      if (!input.ok) {
        set({ bottomTab: 'input', bottomOpen: true });
        s.notify('error', `The run input is not JSON: ${input.error}`);
        return;
      }
      set({ runBusy: 'dry' });
      try {
        const run = await s.api.dryRun(s.meta.id, input.value, s.toWorkflow());
        applyRun(run);
        set({ bottomTab: 'results', bottomOpen: true });
      } catch (e) {
        const err = e as ApiError;
        if (err.problems?.length) {
          set({ bottomTab: 'problems', bottomOpen: true });
          const n = err.problems.filter((p) => p.severity === 'error').length;
          get().notify('error', `Fix ${n} error${n === 1 ? '' : 's'} before a dry run`);
        } else get().notify('error', `Dry run failed: ${err.message}`);
      } finally {
        set({ runBusy: null });
      }
    },

    async runLive() {
      const s = get();
      if (!s.api || s.runBusy) return;
      const input = parseInput(s.inputText);
      if (!input.ok) {
        set({ bottomTab: 'input', bottomOpen: true });
        s.notify('error', `The run input is not JSON: ${input.error}`);
        return;
      }
      if (s.liveVersion === null) {
        // Nothing is live yet: a live run needs a published version (the server refuses to
        // publish one with errors, and says so).
        const ok = await s.ask({
          title: 'Publish and run?',
          message: 'A live run uses the published workflow, and this one has never been published. Publish it and run it?',
          confirmLabel: 'Publish and run',
        });
        if (!ok || !(await get().publish())) return;
      }
      const api = s.api;
      const id = get().savedId!;
      set({ runBusy: 'live', bottomTab: 'results', bottomOpen: true });
      let runId: string | null = null;
      const early: RunEvent[] = [];
      let finished = false;
      let unsubscribe: () => void = () => {};
      let poll: ReturnType<typeof setInterval> | undefined;
      const finish = async () => {
        if (finished || !runId) return;
        finished = true;
        unsubscribe();
        clearInterval(poll);
        try {
          const full = await api.getRun(runId);
          if (get().run?.id === runId) applyRun(full);
        } catch (e) {
          get().notify('error', `Cannot load the run: ${(e as Error).message}`);
        }
        set({ runBusy: null });
      };
      const onEvent = (ev: RunEvent) => {
        if (!runId) {
          early.push(ev);
          return;
        }
        if (ev.run_id !== runId || finished) return;
        const cur = get();
        if (cur.run?.id !== runId) return;
        if (ev.event === 'step_finished' && ev.step_id) {
          const rec: StepProgress = {
            step_id: ev.step_id,
            kind: cur.nodes.find((n) => n.id === ev.step_id)?.data.kind ?? '',
            status: ev.status as StepRecord['status'],
            attempts: [],
            ports: [],
          };
          set({ runByStep: { ...cur.runByStep, [ev.step_id]: rec }, run: { ...cur.run, status: 'running' } });
        } else if (ev.event === 'run_started') {
          set({ run: { ...cur.run, status: 'running' } });
        } else if (ev.event === 'run_finished') {
          void finish();
        }
      };
      try {
        unsubscribe = await api.subscribeRunEvents(onEvent).catch(() => () => {});
        const queued = await api.startRun(id, input.value);
        runId = queued.id;
        applyRun({ ...queued, steps: [] });
        early.splice(0).forEach(onEvent);
        // The event stream is the fast path; polling covers a dropped stream.
        poll = setInterval(async () => {
          try {
            const r = await api.getRun(runId!);
            if (TERMINAL.has(r.status)) void finish();
          } catch {
            /* keep waiting */
          }
        }, 1000);
      } catch (e) {
        unsubscribe();
        clearInterval(poll);
        set({ runBusy: null });
        const err = e as ApiError;
        if (err.problems?.length) set({ bottomTab: 'problems' });
        get().notify('error', `Run not started: ${err.message}`);
      }
    },

    clearRun() {
      applyRun(null);
    },

    setLeftTab(t) {
      set({ leftTab: t, leftOpen: true });
    },
    togglePanel(side, open) {
      const s = get();
      const next = { left: side === 'left' ? (open ?? !s.leftOpen) : s.leftOpen, right: side === 'right' ? (open ?? !s.rightOpen) : s.rightOpen };
      set({ leftOpen: next.left, rightOpen: next.right });
      localStorage.setItem(PANELS_KEY, JSON.stringify(next));
    },
    setBottomTab(t) {
      set({ bottomTab: t, bottomOpen: true });
    },
    toggleBottom(open) {
      set((s) => ({ bottomOpen: open ?? !s.bottomOpen }));
    },
    notify(kind, text) {
      set({ toast: { id: ++toastSeq, kind, text } });
    },
    ask(req) {
      return new Promise<boolean>((resolve) => {
        set({
          confirm: {
            ...req,
            resolve: (ok) => {
              set({ confirm: null });
              resolve(ok);
            },
          },
        });
      });
    },
    async guardDirty(action) {
      if (!get().dirty) return true;
      return get().ask({
        title: 'Discard unsaved changes?',
        message: `“${get().meta.name || get().meta.id}” has unsaved changes. ${action} anyway and lose them?`,
        confirmLabel: 'Discard changes',
        danger: true,
      });
    },
  };
});

/** Is a run shown and finished (so steps without a record were not reached)? */
export function runFinished(run: RunRecord | null): boolean {
  return !!run && TERMINAL.has(run.status);
}
