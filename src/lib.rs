//! # Fluxo
//!
//! A workflow engine for automations that are safe to re-run. Senders deliver at least once;
//! Fluxo turns that into effects that happen once: webhook dedupe at the door, Memory claims
//! with TTL, outbound idempotency keys, safe retries inside a run deadline, dry runs and replay.
//!
//! # Layout
//!
//! * [`clock`]: UTC time (unix ms) and waits through a [`clock::Clock`] the tests control.
//! * [`run`]: the run record (runs, steps, attempts, statuses, time-sortable ids).
//! * [`template`]: templates (minijinja, strict), the leaf step kinds and validation share.
//! * [`steps`]: the [`steps::StepKind`] contract, the one [`steps::Registry`], the ports, one
//!   file per kind; and what a step touches: live/dry side effects ([`steps::effects`]), HTTP
//!   transports and the outbound rules ([`steps::outbound`]: hosts from run data, redirects,
//!   response caps), safe retries ([`steps::retry`]), child runs ([`steps::children`]).
//! * [`workflow`]: the file model, validation reporting every problem at once, the
//!   idempotency/retry linter, compilation, a folder of workflow files.
//! * [`runtime`]: the executor (graph walk, error edges, handler modes, run deadline), the one
//!   replay path ([`runtime::Engine::link_replay`]), resume planning and previews, the crash
//!   recovery rule ([`runtime::Engine::recover_running`]).
//! * [`store`]: storage traits (memory keys with TTL, runs, idempotency records, the shared
//!   run queue with leases), the sled backend (embedded, the default; deliveries land in its
//!   ingest journal), the PostgreSQL backend (several processes on one database; deliveries
//!   land in its ingest inbox), an in-memory backend, and the in-flight log
//!   ([`store::flight`]: which run was in which step when the process died).
//! * [`telemetry`]: every Prometheus metric, named and described (`GET /metrics`).
//! * [`app`]: the application layer every adapter calls, one function per use case: its
//!   state, webhook ingest (claims and their caches), runs, workflow files, the check, Memory,
//!   settings and the token, the worker pool, recovery, no crash loops (a run in flight at
//!   two consecutive crashes is quarantined: [`app::quarantine`]), executions yielding to a
//!   burst at the door ([`app::door_first`]), schedules, errors as [`app::AppError`].
//! * [`server`]: `fluxo serve`'s HTTP adapter: routes (parse, one [`app`] call, render),
//!   problem+json, the door, SSE.
//! * [`sandbox`]: `fluxo sandbox`, a local destination honouring `Idempotency-Key`.
//! * [`settings`]: app settings in the data dir (env variables, retention, listener).
//! * [`connections`]: the accounts connector steps act as, their credentials and where they
//!   are kept ([`connections::file`]: encrypted in the data dir; [`connections::key`]: its
//!   key).
//! * [`secrets`]: what is secret, the mask (`••••1234`) applied to run records, owner-only
//!   file modes for the data dir.
//! * [`samples`]: workflow templates and real payloads compiled into the binary.
//! * [`check`]: `fluxo check`: the replay test of a workflow against the sandbox (same event
//!   twice, timeout after write, new event, forced failure with compensation, replay).
//! * [`cli`]: the `fluxo` command line.
//!
//! Layers: adapters ([`server`], `src-tauri`, [`cli`]) → [`app`] → engine ([`runtime`] →
//! [`workflow`] → [`steps`] → [`template`]) → [`store`]. Nothing imports upward and no two
//! modules import each other (`tests/architecture.rs`, `scripts/import-cycles.sh`).
pub mod app;
pub mod check;
pub mod cli;
pub mod clock;
pub mod connections;
pub mod connectors;
pub mod duration;
pub mod run;
pub mod runtime;
pub mod samples;
pub mod sandbox;
pub mod secrets;
pub mod server;
pub mod settings;
pub mod steps;
pub mod store;
pub mod telemetry;
pub mod template;
pub mod traces;
pub mod workflow;
