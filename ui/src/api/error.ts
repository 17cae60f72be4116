import type { ProblemItem, ValidationProblem } from './schemas';

/** An error from either transport: problem+json over HTTP, `{code, message}` over IPC. */
export class ApiError extends Error {
  readonly code: string;
  readonly status?: number;
  /**
   * The validation problems of `invalid_workflow` / `workflow_invalid` (of the `problems` member,
   * the ones with a `severity`; the `{path, message}` field problems of `invalid_schedule` stay
   * in `extra.problems`); absent when there are none.
   */
  readonly problems?: ValidationProblem[];
  /** The other members of the problem (e.g. `resumed_by` of `already_resumed`). */
  readonly extra: Record<string, unknown>;
  constructor(code: string, message: string, status?: number, problems?: ProblemItem[], extra: Record<string, unknown> = {}) {
    super(message);
    this.name = 'ApiError';
    this.code = code;
    this.status = status;
    const validation = problems?.filter((p): p is ValidationProblem => typeof p === 'object' && p !== null && 'severity' in p);
    this.problems = validation?.length ? validation : undefined;
    this.extra = extra;
  }
}
