//! One error type for every HTTP answer that is not a success: RFC 9457 problem details
//! (`application/problem+json`) with an extra `code` member. Clients get a clean message;
//! the log gets the detail. Never leaks internals or secrets.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

// The members `ApiError::body` writes, and the `Problem` schema of the OpenAPI document.
/// An RFC 9457 problem document (`application/problem+json`): the body of every error answer,
/// with an extra `code` member.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
#[schema(example = json!({
    "type": "https://fluxo.dev/problems/idempotency-conflict",
    "title": "Conflict",
    "status": 409,
    "detail": "Idempotency-Key `A` was already used with a different request (method, path or body)",
    "code": "idempotency_conflict"
}))]
pub struct Problem {
    /// URI of the problem type: `https://fluxo.dev/problems/<code with dashes>`.
    #[serde(rename = "type")]
    pub type_uri: String,
    /// The HTTP status's reason phrase.
    pub title: String,
    /// The HTTP status code.
    pub status: u16,
    /// Human-readable explanation naming what and where.
    pub detail: String,
    /// Stable machine code (`invalid_idempotency_key`, `idempotency_conflict`,
    /// `idempotency_in_progress`, `workflow_not_found`, `payload_too_large`, `unauthorized`, …).
    pub code: String,
    /// The validation problems, on `invalid_workflow` and `workflow_invalid` answers; the
    /// field problems (`{path, message}`) on `invalid_schedule`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false, value_type = Option<Vec<ProblemItem>>)]
    pub problems: Option<Vec<crate::workflow::Problem>>,
}

/// An API error, rendered as problem+json.
#[derive(Debug, Clone)]
pub struct ApiError {
    pub status: StatusCode,
    /// Stable machine code (`invalid_idempotency_key`, `idempotency_conflict`, …).
    pub code: &'static str,
    /// Human-readable explanation naming what and where.
    pub detail: String,
    /// Extra members (e.g. `problems` of an invalid workflow).
    pub extra: Option<Value>,
    /// `Retry-After` seconds, for 503/429.
    pub retry_after_s: Option<u64>,
    /// Answer with `Connection: close` (the request was not read to its end, e.g. a stalled
    /// body: the connection cannot carry another request).
    pub close: bool,
}

impl ApiError {
    /// A problem with a status, code and detail.
    pub fn new(status: StatusCode, code: &'static str, detail: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            detail: detail.into(),
            extra: None,
            retry_after_s: None,
            close: false,
        }
    }
    /// 400.
    pub fn bad_request(code: &'static str, detail: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code, detail)
    }
    /// 404.
    pub fn not_found(code: &'static str, detail: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, code, detail)
    }
    /// 409.
    pub fn conflict(code: &'static str, detail: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, code, detail)
    }
    /// 503 with `Retry-After`: the request was not accepted and can be sent again.
    pub fn unavailable(detail: impl Into<String>, retry_after_s: u64) -> Self {
        ApiError {
            retry_after_s: Some(retry_after_s),
            ..Self::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", detail)
        }
    }
    /// A store failure, by the application's rule ([`crate::app::AppError::store`]): a
    /// retryable 503, or `400 invalid_input` for an input the store refused.
    pub fn store(e: crate::store::StoreError) -> Self {
        crate::app::AppError::store(e).into()
    }
    /// Close the connection after this answer (`Connection: close`).
    pub fn closing(mut self) -> Self {
        self.close = true;
        self
    }
    /// Attach extra members.
    pub fn with_extra(mut self, extra: Value) -> Self {
        self.extra = Some(extra);
        self
    }
    /// The problem document.
    pub fn body(&self) -> Value {
        let problem = Problem {
            type_uri: format!("https://fluxo.dev/problems/{}", self.code.replace('_', "-")),
            title: self
                .status
                .canonical_reason()
                .unwrap_or("Error")
                .to_string(),
            status: self.status.as_u16(),
            detail: self.detail.clone(),
            code: self.code.to_string(),
            problems: None,
        };
        let mut v = serde_json::to_value(problem).unwrap_or(Value::Null);
        if let (Some(Value::Object(extra)), Value::Object(m)) = (&self.extra, &mut v) {
            for (k, x) in extra {
                m.insert(k.clone(), x.clone());
            }
        }
        v
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.status.as_u16(), self.code, self.detail)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::to_vec(&self.body()).unwrap_or_default();
        let mut resp = (self.status, body).into_response();
        resp.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        );
        if self.close {
            resp.headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        if let Some(s) = self.retry_after_s {
            if let Ok(v) = HeaderValue::from_str(&s.to_string()) {
                resp.headers_mut().insert(header::RETRY_AFTER, v);
            }
        }
        resp
    }
}

/// Result alias for handlers.
pub type ApiResult<T> = Result<T, ApiError>;

/// The HTTP status of an application error's kind.
pub fn status_of(kind: crate::app::ErrorKind) -> StatusCode {
    use crate::app::ErrorKind as K;
    match kind {
        K::Invalid => StatusCode::BAD_REQUEST,
        K::Unauthorized => StatusCode::UNAUTHORIZED,
        K::Forbidden => StatusCode::FORBIDDEN,
        K::NotFound => StatusCode::NOT_FOUND,
        K::Conflict => StatusCode::CONFLICT,
        K::Unprocessable => StatusCode::UNPROCESSABLE_ENTITY,
        K::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        K::Internal => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// An application error answered over HTTP: its kind's status, code, message as `detail`,
/// extra members, and `Retry-After`.
impl From<crate::app::AppError> for ApiError {
    fn from(e: crate::app::AppError) -> Self {
        ApiError {
            status: status_of(e.kind),
            code: e.code,
            detail: e.message,
            extra: e.extra,
            retry_after_s: e.retry_after_s,
            close: false,
        }
    }
}

/// A problem of a field of a request (`invalid_schedule`: `cron` or `timezone`).
#[derive(utoipa::ToSchema, serde::Serialize)]
pub struct FieldProblem {
    /// The field: `cron`, `timezone`.
    pub path: String,
    pub message: String,
}

/// One member of a problem's `problems`: a validation problem (`invalid_workflow`,
/// `workflow_invalid`, `invalid_json`) or a field problem (`invalid_schedule`).
#[derive(utoipa::ToSchema, serde::Serialize)]
#[serde(untagged)]
pub enum ProblemItem {
    Validation(crate::workflow::Problem),
    Field(FieldProblem),
}
