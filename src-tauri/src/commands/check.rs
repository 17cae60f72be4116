//! The re-run safety check ([`fluxo::check`]) of the saved workflow or of the unsaved canvas,
//! against a throw-away sandbox and store. Like `POST /api/v1/workflows/{id}/check`: the same
//! report (`{passed, checks: [{check, expected, seen, verdict}], env, id_paths, warnings,
//! notes, …}`) and the same error codes (`workflow_invalid` with `problems`, `invalid_check`
//! naming the bad input, `workflow_not_found`, `unavailable` when no sandbox could start).

use fluxo::app::{workflows, AppState};
use fluxo::check::CheckReport;
use serde_json::Value;
use tauri::State;

use crate::error::{IpcError, IpcResult};

/// Check `workflow` (the editor's canvas) or, without it, the saved workflow `id`, with
/// `event` (a real payload). `id_paths`: dot paths of the event's business ids (absent or
/// empty: `id`, plus `data.object.id` when the event has it).
#[tauri::command]
pub async fn check_workflow(
    state: State<'_, AppState>,
    id: String,
    event: Option<Value>,
    id_paths: Option<Vec<String>>,
    workflow: Option<Value>,
) -> IpcResult<CheckReport> {
    run_check(&state, &id, event, id_paths, workflow).await
}

/// The command without Tauri's `State` (what the tests call): the body's `event` is required
/// (`invalid_body`, as the HTTP route answers), then [`workflows::check`].
pub async fn run_check(
    state: &AppState,
    id: &str,
    event: Option<Value>,
    id_paths: Option<Vec<String>>,
    workflow: Option<Value>,
) -> IpcResult<CheckReport> {
    let event = event.ok_or_else(|| {
        IpcError::new(
            "invalid_body",
            "expected {\"event\": {...}, \"id_paths\"?: [..], \"workflow\"?: {...}}: missing field `event`",
        )
    })?;
    Ok(workflows::check(state, id, &event, id_paths.unwrap_or_default(), workflow).await?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use fluxo::check::Verdict;
    use serde_json::json;

    fn payload(name: &str) -> Value {
        let (_, text) = fluxo::samples::PAYLOADS
            .iter()
            .find(|(n, _)| *n == name)
            .expect("sample payload");
        serde_json::from_str(text).unwrap()
    }

    #[tokio::test]
    async fn checks_the_saved_workflow_and_the_unsaved_canvas_with_the_http_codes() {
        let dir = tempfile::tempdir().unwrap();
        let keys = crate::shell::KeyPlace::no_keyring();
        let shell = crate::shell::start(dir.path(), "127.0.0.1:0".parse().unwrap(), keys)
            .await
            .unwrap();
        let state = shell.state();
        let event = payload("stripe/invoice.paid.json");

        // The saved template is safe to re-run: every row passes.
        let report = run_check(state, "invoice-paid-once", Some(event.clone()), None, None)
            .await
            .unwrap();
        assert!(report.passed, "{report:#?}");
        assert!(report.checks.len() >= 6);
        assert!(report.checks.iter().all(|r| r.verdict == Verdict::Pass));

        // The canvas without the claim and the Idempotency-Key: a redelivery writes again.
        let mut wf = state
            .workflows()
            .get("invoice-paid-once")
            .unwrap()
            .value
            .clone()
            .unwrap();
        let gone = ["seen", "route", "skip"];
        let steps: Vec<Value> = wf["steps"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| !gone.contains(&s["id"].as_str().unwrap()))
            .cloned()
            .map(|mut s| {
                if s["id"] == "create" {
                    s["config"].as_object_mut().unwrap().remove("headers");
                }
                s
            })
            .collect();
        let mut edges: Vec<Value> = wf["edges"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| {
                !gone.contains(&e["from"].as_str().unwrap())
                    && !gone.contains(&e["to"].as_str().unwrap())
            })
            .cloned()
            .collect();
        edges.push(json!({"from": "hook", "to": "create"}));
        wf["steps"] = json!(steps);
        wf["edges"] = json!(edges);
        let report = run_check(
            state,
            "invoice-paid-once",
            Some(event.clone()),
            Some(vec![]),
            Some(wf),
        )
        .await
        .unwrap();
        assert!(!report.passed);
        let twice = report
            .checks
            .iter()
            .find(|r| r.check == "same event twice")
            .unwrap();
        assert_eq!(twice.verdict, Verdict::Fail, "{twice:?}");

        // Errors: the same codes as the HTTP route.
        let e = run_check(
            state,
            "x",
            Some(event.clone()),
            None,
            Some(json!({"id": "x"})),
        )
        .await
        .unwrap_err();
        assert_eq!(e.code, "workflow_invalid");
        assert!(e.problems.as_ref().is_some_and(|p| p.is_array()));
        let e = run_check(
            state,
            "invoice-paid-once",
            Some(event.clone()),
            Some(vec!["nope.x".into()]),
            None,
        )
        .await
        .unwrap_err();
        assert_eq!(e.code, "invalid_check");
        assert!(e.message.contains("nope.x"), "{}", e.message);
        let e = run_check(state, "no-such-flow", Some(event), None, None)
            .await
            .unwrap_err();
        assert_eq!(e.code, "workflow_not_found");
        let e = run_check(state, "invoice-paid-once", None, None, None)
            .await
            .unwrap_err();
        assert_eq!(e.code, "invalid_body");

        shell.server.shutdown().await;
    }
}
