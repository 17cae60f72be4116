import { invoke } from '@tauri-apps/api/core';
import { listen } from '@tauri-apps/api/event';
import type { Api } from './api';
import {
  ApiError,
  type Problem,
  type RunEvent,
  type RunRecord,
  type SamplePayload,
  type SaveResult,
  type StepKind,
  type Template,
  type ValidateResult,
  type Workflow,
  type WorkflowSummary,
} from './types';

/**
 * The API over the desktop shell's IPC. Command names and arguments (Tauri maps the Rust
 * commands' snake_case parameters to these camelCase keys):
 *
 * | command | args | answer |
 * |---|---|---|
 * | `list_workflows` | – | `WorkflowSummary[]` |
 * | `get_workflow` | `{id}` | `Workflow` |
 * | `save_workflow` | `{id, workflow}` | `{workflow, version, valid, problems}` |
 * | `delete_workflow` | `{id}` | – |
 * | `validate_workflow` | `{workflow}` | `{valid, problems}` |
 * | `dry_run` | `{id, input, workflow?}` | `RunRecord` |
 * | `start_run` | `{id, input}` | the queued `RunRecord` |
 * | `get_run` | `{id}` | `RunRecord` |
 * | `step_kinds` / `templates` / `sample_payloads` | – | arrays |
 *
 * Errors cross as `{code, message, problems?}`. Run progress arrives as the `run-event` event
 * with the same payload as the HTTP server's SSE `run` event.
 */
export class TauriApi implements Api {
  readonly transport = 'tauri' as const;

  private async call<T>(cmd: string, args?: Record<string, unknown>): Promise<T> {
    try {
      return await invoke<T>(cmd, args);
    } catch (e) {
      if (e && typeof e === 'object' && 'code' in e) {
        const x = e as { code: string; message?: string; problems?: Problem[] };
        throw new ApiError(x.code, x.message ?? x.code, undefined, x.problems);
      }
      throw new ApiError('ipc', String(e));
    }
  }

  listWorkflows(): Promise<WorkflowSummary[]> {
    return this.call('list_workflows');
  }
  getWorkflow(id: string): Promise<Workflow> {
    return this.call('get_workflow', { id });
  }
  saveWorkflow(id: string, workflow: Workflow): Promise<SaveResult> {
    return this.call('save_workflow', { id, workflow });
  }
  deleteWorkflow(id: string): Promise<void> {
    return this.call('delete_workflow', { id });
  }
  validateWorkflow(workflow: Workflow): Promise<ValidateResult> {
    return this.call('validate_workflow', { workflow });
  }
  dryRun(id: string, input: unknown, workflow?: Workflow): Promise<RunRecord> {
    return this.call('dry_run', { id, input, workflow: workflow ?? null });
  }
  startRun(id: string, input: unknown): Promise<RunRecord> {
    return this.call('start_run', { id, input });
  }
  getRun(id: string): Promise<RunRecord> {
    return this.call('get_run', { id });
  }
  stepKinds(): Promise<StepKind[]> {
    return this.call('step_kinds');
  }
  templates(): Promise<Template[]> {
    return this.call('templates');
  }
  samplePayloads(): Promise<SamplePayload[]> {
    return this.call('sample_payloads');
  }
  async subscribeRunEvents(onEvent: (e: RunEvent) => void): Promise<() => void> {
    return listen<RunEvent>('run-event', (e) => onEvent(e.payload));
  }
}
