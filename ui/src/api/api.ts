import type {
  RunEvent,
  RunRecord,
  SamplePayload,
  SaveResult,
  StepKind,
  Template,
  ValidateResult,
  Workflow,
  WorkflowSummary,
} from './types';

/**
 * Everything the editor asks of Fluxo. Two transports implement it: {@link HttpApi}
 * (`fluxo serve`, bearer token) and {@link TauriApi} (the desktop shell's IPC commands).
 * Both reject with an `ApiError` carrying a stable `code`.
 */
export interface Api {
  /** `http` or `tauri`: the UI hides the token screen inside the desktop shell. */
  readonly transport: 'http' | 'tauri';
  listWorkflows(): Promise<WorkflowSummary[]>;
  /** The workflow file exactly as stored. */
  getWorkflow(id: string): Promise<Workflow>;
  /** Saves (the engine bumps the version). Drafts with validation errors are saved too. */
  saveWorkflow(id: string, workflow: Workflow): Promise<SaveResult>;
  deleteWorkflow(id: string): Promise<void>;
  validateWorkflow(workflow: Workflow): Promise<ValidateResult>;
  /** A dry run; with `workflow`, of that definition (the unsaved canvas) instead of the saved one. */
  dryRun(id: string, input: unknown, workflow?: Workflow): Promise<RunRecord>;
  /** Queue a live run and answer at once with the queued record. */
  startRun(id: string, input: unknown): Promise<RunRecord>;
  getRun(id: string): Promise<RunRecord>;
  stepKinds(): Promise<StepKind[]>;
  templates(): Promise<Template[]>;
  samplePayloads(): Promise<SamplePayload[]>;
  /**
   * Subscribe to run progress. Resolves once the subscription is live (so a run started after
   * it cannot be missed) with the function that ends it.
   */
  subscribeRunEvents(onEvent: (e: RunEvent) => void): Promise<() => void>;
}
