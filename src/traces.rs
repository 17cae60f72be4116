//! OpenTelemetry traces (issue 16; `--otlp-endpoint`): the run and step spans of the engine,
//! exported over OTLP/HTTP (protobuf, `POST <endpoint>/v1/traces`), and the W3C Trace Context
//! (`traceparent`, <https://www.w3.org/TR/trace-context/>) taken from webhook deliveries and
//! run API calls and sent on outbound HTTP calls.
//!
//! | span | where | fields |
//! |---|---|---|
//! | `run <workflow>` | a worker executing a run ([`crate::app`]) | `run_id`, `workflow_id` |
//! | `step <id>` | one execution of a step (its attempt; the executor) | `run_id`, `step_id`, `kind` |
//! | `attempt <n>` | one HTTP attempt of a step with retries (`steps::retry`) | `run_id`, `step_id`, `attempt`, `http.response.status_code` |
//!
//! A run's `traceparent` is stored with the run ([`crate::run::RunRecord::trace_parent`]), so
//! the run's span is a child of the caller's span even when another process executes it
//! (PostgreSQL scale-out) or it resumes after a crash; a fan-out's item runs take the
//! `fan_out` step's span as theirs. Without a `traceparent` a run starts its own trace.
//! Outbound calls carry the `attempt`/`step` span as their `traceparent` unless the step sets
//! that header itself. With traces off (the default) nothing is exported and no `traceparent`
//! is added to outbound calls (a received one is still stored with the run).
//!
//! This module is a leaf like [`crate::telemetry`] (metrics): the CLI installs it, and the
//! engine, the steps and the adapters call its functions; it calls nothing of theirs.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{TraceContextExt, TracerProvider as _};
use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// Set once the OTLP layer is installed: only then do outbound calls carry a `traceparent`.
static ENABLED: AtomicBool = AtomicBool::new(false);

/// Whether traces are exported (`--otlp-endpoint` given).
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// The installed exporter. [`TracesGuard::shutdown`] exports what is still buffered; call it
/// before the process exits (it blocks up to the export timeout, 10 s).
pub struct TracesGuard {
    provider: SdkTracerProvider,
}

impl TracesGuard {
    /// Export every buffered span and stop the exporter. Blocking: call it from a plain thread
    /// or `spawn_blocking`, never on an async worker (the export runs on the tokio runtime).
    pub fn shutdown(self) {
        if let Err(e) = self.provider.shutdown() {
            eprintln!("traces: the last spans could not be exported: {e}");
        }
    }
}

/// The OTLP/HTTP URL for traces: `endpoint` as given when it already names a path (e.g.
/// `http://collector:4318/v1/traces`), else with `/v1/traces` appended, as the OpenTelemetry
/// specification does for `OTEL_EXPORTER_OTLP_ENDPOINT`. Errors: not an http(s) URL.
pub fn traces_url(endpoint: &str) -> Result<String, String> {
    let url = reqwest::Url::parse(endpoint.trim())
        .map_err(|e| format!("--otlp-endpoint `{endpoint}` is not a URL: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!(
            "--otlp-endpoint `{endpoint}`: only http and https collectors are supported \
             (OTLP/HTTP, usually port 4318)"
        ));
    }
    let s = url.as_str().trim_end_matches('/').to_string();
    Ok(if url.path().trim_end_matches('/').is_empty() {
        format!("{s}/v1/traces")
    } else {
        s
    })
}

/// The tracing layer that exports Fluxo's spans to the collector at `endpoint` (see
/// [`traces_url`]) as service `fluxo` (or `$OTEL_SERVICE_NAME`), through a batch processor
/// (`$OTEL_BSP_SCHEDULE_DELAY` ms between exports, default 5,000). Only the spans of runs,
/// steps and attempts are exported, with warnings and errors inside them as span events;
/// `FLUXO_LOG` does not filter them. The exporter's HTTP calls run on `runtime`.
pub fn layer<S>(
    endpoint: &str,
    runtime: tokio::runtime::Handle,
) -> Result<(impl tracing_subscriber::Layer<S>, TracesGuard), String>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    use tracing_subscriber::Layer as _;
    let url = traces_url(endpoint)?;
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_http_client(TokioReqwest {
            client: reqwest::Client::new(),
            runtime,
        })
        .with_endpoint(url)
        .with_timeout(Duration::from_secs(10))
        .build()
        .map_err(|e| format!("the OTLP exporter cannot start: {e}"))?;
    let service = std::env::var("OTEL_SERVICE_NAME")
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "fluxo".into());
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(
            opentelemetry_sdk::Resource::builder()
                .with_service_name(service)
                .build(),
        )
        .build();
    let tracer = provider.tracer("fluxo");
    let layer = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_filter(tracing_subscriber::filter::filter_fn(|meta| {
            if meta.is_span() {
                meta.target().starts_with("fluxo")
                    && matches!(meta.name(), "run" | "step" | "attempt")
            } else {
                *meta.level() <= tracing::Level::WARN
            }
        }));
    ENABLED.store(true, Ordering::Relaxed);
    Ok((layer, TracesGuard { provider }))
}

/// The exporter's HTTP client: the crate's reqwest, its calls spawned on the tokio runtime
/// (the batch processor exports from a thread of its own, outside the runtime).
#[derive(Debug)]
struct TokioReqwest {
    client: reqwest::Client,
    runtime: tokio::runtime::Handle,
}

#[async_trait::async_trait]
impl HttpClient for TokioReqwest {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let client = self.client.clone();
        let (parts, body) = request.into_parts();
        let call = async move {
            let method = reqwest::Method::from_bytes(parts.method.as_str().as_bytes())?;
            let mut req = client
                .request(method, parts.uri.to_string())
                .timeout(Duration::from_secs(10))
                .body(body);
            for (name, value) in &parts.headers {
                req = req.header(name.as_str(), value.as_bytes());
            }
            let resp = req.send().await?;
            let status = resp.status().as_u16();
            let bytes = resp.bytes().await?;
            Ok::<_, HttpError>(
                Response::builder()
                    .status(status)
                    .body(Bytes::from(bytes.to_vec()))?,
            )
        };
        self.runtime.spawn(call).await?
    }
}

/// A valid W3C `traceparent` value (version `00`: `00-<32 hex trace id>-<16 hex parent id>-<2
/// hex flags>`, ids not all zero; a later version's first four fields), lowercased, or `None`
/// for anything else: an invalid header is ignored, as Trace Context §3.2.2 asks, and the run
/// starts its own trace.
pub fn parse_traceparent(value: &str) -> Option<String> {
    let v = value.trim();
    let parts: Vec<&str> = v.split('-').collect();
    let hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit());
    if parts.len() < 4 || !hex(parts[0], 2) || parts[0].eq_ignore_ascii_case("ff") {
        return None;
    }
    if parts[0] == "00" && parts.len() != 4 {
        return None;
    }
    let (trace, parent, flags) = (parts[1], parts[2], parts[3]);
    if !hex(trace, 32) || !hex(parent, 16) || !hex(flags, 2) {
        return None;
    }
    if trace.bytes().all(|b| b == b'0') || parent.bytes().all(|b| b == b'0') {
        return None;
    }
    Some(format!("00-{trace}-{parent}-{flags}").to_ascii_lowercase())
}

/// Make `span`'s parent the caller's span a stored `traceparent` names (no-op without one, or
/// with traces off).
pub fn set_parent(span: &tracing::Span, traceparent: Option<&str>) {
    let Some(tp) = traceparent.filter(|_| enabled()) else {
        return;
    };
    let carrier: HashMap<String, String> = HashMap::from([("traceparent".into(), tp.into())]);
    let cx = TraceContextPropagator::new().extract(&carrier);
    if cx.span().span_context().is_valid() {
        let _ = span.set_parent(cx);
    }
}

/// The `traceparent` of the current span (an outbound call's, a fan-out item run's parent),
/// or `None` with traces off or outside any exported span.
pub fn current_traceparent() -> Option<String> {
    if !enabled() {
        return None;
    }
    let cx = tracing::Span::current().context();
    if !cx.span().span_context().is_valid() {
        return None;
    }
    let mut carrier: HashMap<String, String> = HashMap::new();
    TraceContextPropagator::new().inject_context(&cx, &mut carrier);
    carrier.remove("traceparent")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparent_is_checked() {
        let ok = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        assert_eq!(parse_traceparent(ok).as_deref(), Some(ok));
        assert_eq!(
            parse_traceparent(&ok.to_uppercase()).as_deref(),
            Some(ok),
            "hex is read in either case"
        );
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-xyz92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ] {
            assert_eq!(parse_traceparent(bad), None, "{bad:?}");
        }
        // A later version keeps its first four fields (Trace Context §4.3).
        assert_eq!(
            parse_traceparent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what")
                .as_deref(),
            Some(ok)
        );
    }

    #[test]
    fn endpoint_gets_the_traces_path() {
        assert_eq!(
            traces_url("http://localhost:4318").unwrap(),
            "http://localhost:4318/v1/traces"
        );
        assert_eq!(
            traces_url("http://localhost:4318/").unwrap(),
            "http://localhost:4318/v1/traces"
        );
        assert_eq!(
            traces_url("https://c.example/otlp/v1/traces").unwrap(),
            "https://c.example/otlp/v1/traces"
        );
        assert!(traces_url("grpc://localhost:4317").is_err());
        assert!(traces_url("not a url").is_err());
    }
}
