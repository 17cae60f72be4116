//! Running workflows: the executor's graph walk, safe retries, the HTTP transport and the
//! per-run side effects (live or dry).

pub mod effects;
pub mod executor;
pub mod http;
pub mod retry;

pub use executor::{Engine, RunEvent, RunRequest, VersionChoice};
