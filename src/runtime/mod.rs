//! Running workflows: the executor's graph walk, safe retries, the HTTP transport and the
//! per-run side effects (live or dry), and resume planning.

pub mod children;
pub mod executor;
pub mod journal;
pub mod preview;
pub mod resume;

// What the step kinds touch lives with them (`crate::steps`); kept here under their old paths.
pub use crate::steps::{effects, http, outbound, retry};

pub use executor::{Engine, RunEvent, RunRequest, VersionChoice};
pub use resume::{RecoverPolicy, Recovery, ResumeFailure};
