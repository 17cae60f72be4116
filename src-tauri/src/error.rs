//! The one error type that crosses the IPC boundary: `{code, message, problems?, …}` (with the
//! problem's other extra members, e.g. `resumed_by`): a [`fluxo::app::AppError`] with the same
//! stable codes as the HTTP API's problem+json (`workflow_not_found`, `workflow_invalid`, …).
//! The UI's `TauriApi` turns it into its `ApiError`.

use fluxo::app::AppError;
use serde::Serialize;
use serde_json::Value;

/// An error answered to the window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IpcError {
    /// Stable machine code.
    pub code: String,
    /// Human-readable, naming what and where; never internals.
    pub message: String,
    /// Validation problems, when the error is about a workflow's content.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problems: Option<Value>,
    /// The problem's other extra members (e.g. `resumed_by` of `already_resumed`).
    #[serde(flatten, skip_serializing_if = "serde_json::Map::is_empty")]
    pub extra: serde_json::Map<String, Value>,
}

/// What every command answers.
pub type IpcResult<T> = Result<T, IpcError>;

impl IpcError {
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Self {
        IpcError {
            code: code.into(),
            message: message.into(),
            problems: None,
            extra: serde_json::Map::new(),
        }
    }

    /// A task of the async runtime failed (panicked or was cancelled).
    pub fn internal(what: &str) -> Self {
        tracing::error!("{what} failed");
        IpcError::new("internal", format!("{what} failed"))
    }
}

/// Store failures are logged in full and answered as retryable, like the HTTP API's 503.
impl From<fluxo::store::StoreError> for IpcError {
    fn from(e: fluxo::store::StoreError) -> Self {
        AppError::store(e).into()
    }
}

impl std::fmt::Display for IpcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for IpcError {}

/// The application's errors cross as `{code, message, problems?, …}`: the same codes and
/// messages the HTTP API answers as problem+json.
impl From<AppError> for IpcError {
    fn from(e: AppError) -> Self {
        let mut extra = match e.extra {
            Some(Value::Object(m)) => m,
            _ => serde_json::Map::new(),
        };
        IpcError {
            code: e.code.to_string(),
            message: e.message,
            problems: extra.remove("problems"),
            extra,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn app_errors_keep_code_message_and_problems() {
        let e: IpcError = AppError::conflict("workflow_invalid", "fix it")
            .with_extra(json!({"problems": [{"code": "x"}]}))
            .into();
        assert_eq!(
            serde_json::to_value(&e).unwrap(),
            json!({"code": "workflow_invalid", "message": "fix it", "problems": [{"code": "x"}]})
        );
        let e: IpcError = AppError::conflict("already_resumed", "resumed by r2")
            .with_extra(json!({"resumed_by": "r2"}))
            .into();
        assert_eq!(
            serde_json::to_value(&e).unwrap(),
            json!({"code": "already_resumed", "message": "resumed by r2", "resumed_by": "r2"})
        );
        let e: IpcError = AppError::not_found("run_not_found", "no run `r`").into();
        assert_eq!(
            serde_json::to_value(&e).unwrap(),
            json!({"code": "run_not_found", "message": "no run `r`"})
        );
    }
}
