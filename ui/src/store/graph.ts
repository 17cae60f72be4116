// Conversion between a workflow file and the canvas graph, port rules, connection rules.

import type { Edge, Node } from '@xyflow/react';
import type { StepKind } from '../api';
import type { EdgeDef, StepDef, Workflow } from './workflowFile';

/** A JSON Schema (a step kind's `config_schema`, free JSON in the document), as the config forms read it. */
export type JsonSchema = Record<string, unknown>;

/** What a canvas node carries: the step minus its id and position (those live on the node). */
export type StepNodeData = {
  kind: string;
  name?: string;
  config: Record<string, unknown>;
};
export type StepNode = Node<StepNodeData, 'step'>;
export type PortEdge = Edge<{ port: string }, 'port'>;

/** The workflow minus steps and edges (id, name, description, version, settings, …). */
export type WorkflowMeta = Omit<Workflow, 'steps' | 'edges'>;

export const STEP_ID_RE = /^[A-Za-z_][A-Za-z0-9_-]{0,63}$/;
export const WORKFLOW_ID_RE = /^[a-z0-9][a-z0-9_-]{0,63}$/;

export function edgeId(from: string, port: string, to: string): string {
  return `${from}:${port}->${to}`;
}

export function toNode(s: StepDef, i = 0): StepNode {
  return {
    id: s.id,
    type: 'step',
    position: s.position ? { x: s.position.x, y: s.position.y } : { x: 280 * i, y: 0 },
    data: { kind: s.kind, ...(s.name !== undefined ? { name: s.name } : {}), config: s.config ?? {} },
  };
}

export function toEdge(e: EdgeDef): PortEdge {
  const port = e.port ?? 'out';
  return {
    id: edgeId(e.from, port, e.to),
    type: 'port',
    source: e.from,
    sourceHandle: port,
    target: e.to,
    targetHandle: 'in',
    data: { port },
  };
}

export function workflowToGraph(wf: Workflow): { meta: WorkflowMeta; nodes: StepNode[]; edges: PortEdge[] } {
  const { steps, edges, ...meta } = wf;
  return {
    meta,
    nodes: (steps ?? []).map(toNode),
    edges: (edges ?? []).map(toEdge),
  };
}

/** The workflow file for the canvas: steps in canvas order, positions rounded. */
export function graphToWorkflow(meta: WorkflowMeta, nodes: StepNode[], edges: PortEdge[]): Workflow {
  const steps: StepDef[] = nodes.map((n) => {
    const s: StepDef = { id: n.id, kind: n.data.kind, config: n.data.config };
    if (n.data.name) s.name = n.data.name;
    s.position = { x: Math.round(n.position.x), y: Math.round(n.position.y) };
    return s;
  });
  const out: EdgeDef[] = edges.map((e) => {
    const port = e.sourceHandle ?? 'out';
    return port === 'out' ? { from: e.source, to: e.target } : { from: e.source, port, to: e.target };
  });
  return { ...meta, steps, edges: out } as Workflow;
}

/** Output ports of a step: a router has one per route + `default` + `error`; others `out` + `error`. */
export function portsOf(kind: StepKind | undefined, config: Record<string, unknown>): string[] {
  if (kind?.dynamic_ports || kind?.kind === 'router') {
    const routes = Array.isArray(config.routes) ? (config.routes as { name?: unknown }[]) : [];
    const names = routes.map((r) => (typeof r?.name === 'string' ? r.name : '')).filter((n) => n !== '');
    return [...new Set(names), 'default', 'error'];
  }
  return kind?.ports?.length ? kind.ports : ['out', 'error'];
}

/** Is `to` reachable from `from` along edges? */
export function reaches(edges: { source: string; target: string }[], from: string, to: string): boolean {
  const next = new Map<string, string[]>();
  for (const e of edges) {
    const l = next.get(e.source);
    if (l) l.push(e.target);
    else next.set(e.source, [e.target]);
  }
  const seen = new Set<string>([from]);
  const stack = [from];
  while (stack.length) {
    const n = stack.pop()!;
    if (n === to) return true;
    for (const m of next.get(n) ?? []) {
      if (!seen.has(m)) {
        seen.add(m);
        stack.push(m);
      }
    }
  }
  return false;
}

export interface ConnectionLike {
  source: string | null;
  sourceHandle?: string | null;
  target: string | null;
  targetHandle?: string | null;
}

/**
 * Why a new edge is refused, or null if it is fine: no edge into a trigger, no self loop, no
 * cycle, the target must exist, and a port may feed several steps but each only once.
 */
export function connectionProblem(
  c: ConnectionLike,
  nodes: StepNode[],
  edges: PortEdge[],
  kinds: Record<string, StepKind>,
): string | null {
  if (!c.source || !c.target) return 'the edge needs both ends';
  if (c.source === c.target) return 'a step cannot feed itself';
  const target = nodes.find((n) => n.id === c.target);
  const source = nodes.find((n) => n.id === c.source);
  if (!target || !source) return 'no such step';
  if (kinds[target.data.kind]?.trigger) return 'a trigger has no input';
  const port = c.sourceHandle ?? 'out';
  if (!portsOf(kinds[source.data.kind], source.data.config).includes(port)) return `no port \`${port}\``;
  if (edges.some((e) => e.source === c.source && (e.sourceHandle ?? 'out') === port && e.target === c.target))
    return 'already connected';
  if (reaches(edges, c.target, c.source)) return 'this edge would close a cycle';
  return null;
}

const SHORT_IDS: Record<string, string> = {
  webhook_trigger: 'hook',
  manual_trigger: 'start',
  memory: 'memory',
  router: 'route',
  http_request: 'http',
  error_handler: 'on_error',
  publish_output: 'publish',
  transform: 'transform',
};

/** A fresh step id based on `base` (`memory`, `memory_2`, …). */
export function uniqueStepId(base: string, taken: Set<string>): string {
  let b = base.replace(/[^A-Za-z0-9_-]/g, '_').slice(0, 56);
  if (!/^[A-Za-z_]/.test(b)) b = `s_${b}`;
  if (!taken.has(b)) return b;
  const stem = b.replace(/_\d+$/, '') || 's';
  for (let i = 2; ; i++) {
    const id = `${stem}_${i}`;
    if (!taken.has(id)) return id;
  }
}

export function idForKind(kind: string, taken: Set<string>): string {
  return uniqueStepId(SHORT_IDS[kind] ?? kind, taken);
}

/** Resolve a local `$ref` (`#/$defs/X`) against the root schema. */
export function deref(schema: JsonSchema | undefined, root: JsonSchema): JsonSchema | undefined {
  let s = schema;
  for (let i = 0; s && typeof s.$ref === 'string' && i < 16; i++) {
    const path = (s.$ref as string).replace(/^#\//, '').split('/');
    let t: unknown = root;
    for (const p of path) t = (t as Record<string, unknown> | undefined)?.[p];
    const { $ref: _r, ...rest } = s;
    void _r;
    s = { ...(t as JsonSchema), ...rest };
  }
  return s;
}

/** A step kind's `config_schema` (free JSON in the document: a JSON Schema object, else none). */
export function configSchemaOf(kind: StepKind | undefined): JsonSchema {
  const s = kind?.config_schema;
  return s && typeof s === 'object' && !Array.isArray(s) ? (s as JsonSchema) : {};
}

/** A minimal config for a new step: every required field with its default or an empty value. */
export function defaultConfig(kind: StepKind | undefined): Record<string, unknown> {
  const root = configSchemaOf(kind);
  const props = (root.properties ?? {}) as Record<string, JsonSchema>;
  const required = (root.required ?? []) as string[];
  const out: Record<string, unknown> = {};
  for (const k of required) {
    const p = deref(props[k], root) ?? {};
    if ('default' in p && p.default !== null) out[k] = p.default;
    else if (Array.isArray(p.enum)) out[k] = p.enum[0];
    else if (Array.isArray(p.oneOf) && (p.oneOf[0] as JsonSchema)?.const !== undefined) out[k] = (p.oneOf[0] as JsonSchema).const;
    else {
      const t = Array.isArray(p.type) ? p.type[0] : p.type;
      out[k] = t === 'array' ? [] : t === 'object' ? {} : t === 'boolean' ? false : t === 'integer' || t === 'number' ? 0 : '';
    }
  }
  return out;
}

/** Steps upstream of `id` (every step that can run before it). */
export function upstreamOf(id: string, edges: { source: string; target: string }[]): string[] {
  const prev = new Map<string, string[]>();
  for (const e of edges) {
    const l = prev.get(e.target);
    if (l) l.push(e.source);
    else prev.set(e.target, [e.source]);
  }
  const seen = new Set<string>();
  const stack = [id];
  while (stack.length) {
    for (const m of prev.get(stack.pop()!) ?? []) {
      if (!seen.has(m)) {
        seen.add(m);
        stack.push(m);
      }
    }
  }
  seen.delete(id);
  return [...seen];
}

/** Replace `steps.<from>` references by `steps.<to>` in every string of a config. */
export function renameStepRefs(v: unknown, from: string, to: string): unknown {
  if (typeof v === 'string') {
    const re = new RegExp(`\\bsteps\\.${from.replace(/[-]/g, '\\-')}(?![A-Za-z0-9_-])`, 'g');
    return v.replace(re, `steps.${to}`);
  }
  if (Array.isArray(v)) return v.map((x) => renameStepRefs(x, from, to));
  if (v && typeof v === 'object') {
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, renameStepRefs(x, from, to)]));
  }
  return v;
}

/** Map `steps[3].config.url` → the step's index and the config path under it (`url`). */
export function parseProblemPath(path: string): { stepIndex?: number; edgeIndex?: number; configPath?: string[] } {
  const s = /^steps\[(\d+)\](?:\.config(?:\.(.*))?)?/.exec(path);
  if (s) {
    const rest = s[2];
    const configPath =
      /\.config/.test(path) ? (rest ? rest.split(/\.|\[(\d+)\]/).filter((x) => x !== undefined && x !== '') : []) : undefined;
    return { stepIndex: Number(s[1]), configPath };
  }
  const e = /^edges\[(\d+)\]/.exec(path);
  if (e) return { edgeIndex: Number(e[1]) };
  return {};
}
