//! Running workflows: the executor's graph walk, safe retries, the HTTP transport and the
//! per-run side effects (live or dry), and resume planning.

pub mod children;
pub mod effects;
pub mod executor;
pub mod http;
pub mod outbound;
pub mod preview;
pub mod resume;
pub mod retry;

pub use executor::{Engine, RunEvent, RunRequest, VersionChoice};
pub use resume::{RecoverPolicy, Recovery, ResumeFailure};
