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
//! * [`workflow`]: the file model, validation reporting every problem at once, templates
//!   (minijinja, strict), the idempotency/retry linter, compilation, a folder of workflow files.
//! * [`steps`]: the [`steps::StepKind`] contract, the one [`steps::Registry`], one file per kind.
//! * [`runtime`]: the executor (graph walk, error edges, handler modes, run deadline), safe
//!   retries, HTTP transports and the outbound rules ([`runtime::outbound`]: hosts from run
//!   data, redirects, response caps), live/dry side effects, resume planning and previews, the
//!   crash recovery rule ([`runtime::Engine::recover_running`]).
//! * [`store`]: storage traits (memory keys with TTL, runs, idempotency records), the sled
//!   backend and an in-memory backend.
//! * [`app`]: the application layer every adapter calls: its state, webhook ingest (claims
//!   and their caches), the worker pool, recovery, schedules, errors as [`app::AppError`].
//! * [`server`]: `fluxo serve`'s HTTP adapter: routes, problem+json, the door, SSE.
//! * [`sandbox`]: `fluxo sandbox`, a local destination honouring `Idempotency-Key`.
//! * [`settings`]: app settings in the data dir (env variables, retention, listener).
//! * [`secrets`]: what is secret, the mask (`••••1234`) applied to run records, owner-only
//!   file modes for the data dir.
//! * [`samples`]: workflow templates and real payloads compiled into the binary.
//! * [`check`]: `fluxo check`: the replay test of a workflow against the sandbox (same event
//!   twice, timeout after write, new event, forced failure with compensation, replay).
//! * [`cli`]: the `fluxo` command line.
pub mod app;
pub mod check;
pub mod cli;
pub mod clock;
pub mod run;
pub mod runtime;
pub mod samples;
pub mod sandbox;
pub mod secrets;
pub mod server;
pub mod settings;
pub mod steps;
pub mod store;
pub mod template;
pub mod workflow;
