//! The application's error: what went wrong, in words a user can act on, with a stable code.
//! Each adapter maps it: the HTTP adapter to an RFC 9457 problem document with the status of
//! its [`ErrorKind`] (`server::error`), the desktop's IPC to `{code, message, problems?}`, the
//! CLI to a message and an exit code. Never carries internals or secrets; the log gets the
//! detail.

use serde_json::Value;

/// What kind of failure, which each adapter turns into its own terms (HTTP: the status in
/// brackets).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The input is malformed or breaks a rule (400).
    Invalid,
    /// No or a wrong API token (401).
    Unauthorized,
    /// Understood and refused (403).
    Forbidden,
    /// The thing named does not exist (404).
    NotFound,
    /// The request conflicts with the current state (409).
    Conflict,
    /// Well formed but semantically unusable (422).
    Unprocessable,
    /// Not accepted now; the same request may succeed later (503, with a retry hint).
    Unavailable,
    /// A fault of this process (500).
    Internal,
}

/// An application error: kind, stable code, message, optional extra members (`problems` of an
/// invalid workflow, `resumed_by`, …) and a retry hint in seconds.
#[derive(Debug, Clone)]
pub struct AppError {
    pub kind: ErrorKind,
    /// Stable machine code (`workflow_not_found`, `idempotency_conflict`, …).
    pub code: &'static str,
    /// Human-readable explanation naming what and where.
    pub message: String,
    /// Extra members (an object), e.g. `problems`.
    pub extra: Option<Value>,
    /// Send again after this many seconds (set on [`ErrorKind::Unavailable`]).
    pub retry_after_s: Option<u64>,
}

/// Result alias of the application's use cases.
pub type AppResult<T> = Result<T, AppError>;

impl AppError {
    /// An error of `kind` with a code and message.
    pub fn new(kind: ErrorKind, code: &'static str, message: impl Into<String>) -> Self {
        AppError {
            kind,
            code,
            message: message.into(),
            extra: None,
            retry_after_s: None,
        }
    }
    /// [`ErrorKind::Invalid`].
    pub fn bad_request(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Invalid, code, message)
    }
    /// [`ErrorKind::NotFound`].
    pub fn not_found(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(ErrorKind::NotFound, code, message)
    }
    /// [`ErrorKind::Conflict`].
    pub fn conflict(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Conflict, code, message)
    }
    /// [`ErrorKind::Internal`].
    pub fn internal(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Internal, code, message)
    }
    /// [`ErrorKind::Unavailable`] with a retry hint: nothing was accepted, send it again.
    pub fn unavailable(message: impl Into<String>, retry_after_s: u64) -> Self {
        AppError {
            retry_after_s: Some(retry_after_s),
            ..Self::new(ErrorKind::Unavailable, "unavailable", message)
        }
    }
    /// A store failure: logged in full, answered as retryable; an input the store refused
    /// ([`crate::store::StoreError::Invalid`]) is the caller's `invalid_input` instead (a
    /// retry hint would make clients send it again forever). Use cases check their inputs
    /// before the store does, with more precise codes; this is the backstop.
    pub fn store(e: crate::store::StoreError) -> Self {
        if !e.is_transient() {
            return Self::bad_request("invalid_input", e.to_string());
        }
        tracing::error!(error = %e, "store failure");
        crate::telemetry::store_error();
        Self::unavailable("the store could not complete the request; retry later", 1)
    }
    /// A Memory namespace or key that breaks its rule (`invalid_namespace`, `empty_key`,
    /// `key_too_long`), naming where it came from.
    pub fn memory_name(where_: &str, e: crate::store::MemoryNameError) -> Self {
        Self::bad_request(e.code(), format!("{where_}: {e}"))
    }
    /// Attach extra members (an object).
    pub fn with_extra(mut self, extra: Value) -> Self {
        self.extra = Some(extra);
        self
    }
}

impl std::fmt::Display for AppError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for AppError {}
