// The API's shapes (SPEC §1, §4, §5), named: each is a schema of the OpenAPI document, generated
// into ./schema.gen.ts (`npm run gen:api`; `make test` fails when it is stale). This module only
// names them; it defines no shape (`scripts/gen-api.sh --check` fails on a hand-written one).
// The same shapes cross the Tauri IPC boundary. Where the document leaves a member open (a
// workflow definition is free JSON there), the API client says how the UI reads it
// (`WithWorkflow` in ./api.ts).

import type { components } from './schema.gen';

/** The schemas of the OpenAPI document (`components.schemas`). */
export type Schemas = components['schemas'];

export type AppSettings = Schemas['AppSettings'];
export type Attempt = Schemas['Attempt'];
export type BulkItem = Schemas['BulkItem'];
export type BulkSummary = Schemas['BulkSummary'];
export type CheckReport = Schemas['CheckReport'];
export type CheckRow = Schemas['CheckRow'];
export type ClaimOwner = Schemas['ClaimOwner'];
export type Draft = Schemas['Draft'];
export type DraftSaved = Schemas['DraftSaved'];
export type DurationPercentiles = Schemas['DurationPercentiles'];
export type ErrorInfo = Schemas['ErrorInfo'];
export type FailureGroup = Schemas['FailureGroup'];
export type FieldProblem = Schemas['FieldProblem'];
export type LineageFix = Schemas['LineageFix'];
export type MemoryEntry = Schemas['MemoryEntry'];
export type MemoryPage = Schemas['MemoryPage'];
export type Mode = Schemas['Mode'];
export type NamespaceCount = Schemas['NamespaceCount'];
export type PlannedCall = Schemas['PlannedCall'];
export type PreviewWarning = Schemas['PreviewWarning'];
export type Problem = Schemas['Problem'];
export type Preset = Schemas['Preset'];
export type ProblemItem = Schemas['ProblemItem'];
export type RunEvent = Schemas['RunEvent'];
export type Deliveries = Schemas['Deliveries'];
export type Stopped = Schemas['Stopped'];
export type RunFilter = Schemas['RunFilter'];
export type RunPage = Schemas['RunPage'];
export type RunPreview = Schemas['RunPreview'];
export type RunRecord = Schemas['RunRecord'];
export type RunStats = Schemas['RunStats'];
export type RunStatus = Schemas['RunStatus'];
export type RunSummary = Schemas['RunSummary'];
export type SamplePayload = Schemas['SamplePayload'];
export type ConnectorEntry = Schemas['ConnectorEntry'];
export type ConnectionView = Schemas['ConnectionView'];
export type ConnectionInput = Schemas['ConnectionInput'];
export type ConnectionTest = Schemas['ConnectionTest'];
export type OAuthFlow = Schemas['OAuthFlow'];
export type OAuthStarted = Schemas['OAuthStarted'];
export type OAuthStartInput = Schemas['OAuthStartInput'];
export type ConnectorOperation = Schemas['ConnectorOperation'];
export type SchedulePreview = Schemas['SchedulePreview'];
export type ScheduledWorkflow = Schemas['ScheduledWorkflow'];
export type SettingsView = Schemas['SettingsView'];
export type StatsBucket = Schemas['StatsBucket'];
export type StepKind = Schemas['StepKind'];
export type StepRecord = Schemas['StepRecord'];
export type StepStatus = Schemas['StepStatus'];
export type Template = Schemas['Template'];
export type TemplatePreview = Schemas['TemplatePreview'];
export type TemplatePreviewAnswer = Schemas['TemplatePreviewAnswer'];
export type Trigger = Schemas['Trigger'];
export type Validation = Schemas['Validation'];
export type ValidationProblem = Schemas['ValidationProblem'];
export type Verdict = Schemas['Verdict'];
export type WorkflowSaved = Schemas['WorkflowSaved'];
export type WorkflowSummary = Schemas['WorkflowSummary'];
