//! The OpenAPI 3.1 document served at `/api/v1/openapi.json`.

use serde_json::{json, Value};

/// The document.
pub fn document() -> Value {
    json!({"openapi": "3.1.0", "info": {"title": "Fluxo API", "version": env!("CARGO_PKG_VERSION")}, "paths": {}})
}
