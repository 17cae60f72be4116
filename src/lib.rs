//! # Fluxo
//!
//! A workflow engine for automations that are safe to re-run. Senders deliver at least once;
//! Fluxo turns that into effects that happen once: webhook dedupe at the door, Memory claims
//! with TTL, outbound idempotency keys, safe retries inside a run deadline, dry runs and replay.
//!
//! # Layout
//!
//! * [`clock`]: UTC time and waits through a [`clock::Clock`] the tests control.
//! * [`run`]: the run record (runs, steps, attempts, statuses).
//! * [`store`]: storage traits (memory keys with TTL, runs, idempotency records) with the sled
//!   backend and an in-memory backend.
pub mod cli;
pub mod clock;
pub mod run;
pub mod runtime;
pub mod samples;
pub mod sandbox;
pub mod server;
pub mod steps;
pub mod store;
pub mod workflow;
