//! Drafts and publishing (issue 14, item 2) over a real server (port 0, sled in a temp dir, a
//! data dir): Save keeps a draft that webhooks never see, Publish makes a valid draft live
//! (version bumped, draft gone, the next webhook run records the new version), an invalid one
//! cannot be published nor `PUT` live, a draft-only workflow has no webhook, a draft survives a
//! restart.

mod common;

use std::path::Path;

use reqwest::Method;
use serde_json::{json, Value};

use common::server::{hook_workflow, Setup, StoreKind, TestServer};
use fluxo::clock::Clock;

/// A sled-backed server whose data dir (drafts, settings) is `data`.
async fn server_on(data: tempfile::TempDir, workflows: Option<tempfile::TempDir>) -> TestServer {
    let path = data.path().to_path_buf();
    let mut setup = Setup::new()
        .store(StoreKind::Sled)
        .options(move |o| o.data_dir = Some(path))
        .data_dir(data);
    setup = match workflows {
        Some(w) => setup.workflows_dir(w),
        None => setup.workflow(hook_workflow("hooked", json!({}))),
    };
    setup.start().await
}

/// `hooked` with a different field (so a run shows which definition ran).
fn hooked_v2() -> Value {
    let mut wf = hook_workflow("hooked", json!({}));
    wf["name"] = json!("hooked, edited");
    wf["steps"][1]["config"]["fields"] = json!({"edited": "yes"});
    wf
}

/// `hooked` with an edge to a step that does not exist (a validation error).
fn hooked_invalid() -> Value {
    let mut wf = hooked_v2();
    wf["edges"]
        .as_array_mut()
        .unwrap()
        .push(json!({"from": "shape", "to": "ghost"}));
    wf
}

/// Deliver `{}` to `/hooks/{wf}` (202) and wait for its run: `(workflow_version, output of
/// the `shape` step)`.
async fn hook_run(s: &TestServer, wf: &str, key: &str) -> (u64, Value) {
    let a = s.hook(wf, Some(key), b"{}").await;
    assert_eq!(a.status.as_u16(), 202, "{}", a.text);
    let run_id = a.json()["run_id"].as_str().unwrap().to_string();
    let run = s.wait_final(&run_id).await;
    let run = serde_json::to_value(&run).unwrap();
    assert_eq!(run["status"], "succeeded", "{run:#}");
    let shape = run["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|st| st["step_id"] == "shape")
        .unwrap_or_else(|| panic!("no shape step: {run:#}"))
        .clone();
    (
        run["workflow_version"].as_u64().unwrap(),
        shape["output"].clone(),
    )
}

fn row<'a>(list: &'a Value, id: &str) -> Option<&'a Value> {
    list["workflows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["id"] == id)
}

#[cfg(unix)]
fn mode(p: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

fn live_text(s: &TestServer, id: &str) -> String {
    std::fs::read_to_string(s.workflows_dir.path().join(format!("{id}.json"))).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_draft_keeps_the_published_version_live_until_a_fixed_one_is_published() {
    let s = server_on(tempfile::tempdir().unwrap(), None).await;
    let drafts_dir = s.data_dir.path().join("drafts");
    let draft_file = drafts_dir.join("hooked.json");
    let list = s.get_json("/workflows").await;
    let r = row(&list, "hooked").unwrap();
    assert_eq!(
        (r["has_draft"].clone(), r["draft_only"].clone()),
        (json!(false), json!(false))
    );
    s.api(Method::GET, "/workflows/hooked/draft", &[], None)
        .await
        .problem(404, "draft_not_found");
    let (v, _) = hook_run(&s, "hooked", "before").await;
    assert_eq!(v, 1);
    let live_before = live_text(&s, "hooked");

    // An invalid draft is kept, with its problems; the live file does not change.
    let invalid = hooked_invalid();
    let a = s
        .api(
            Method::PUT,
            "/workflows/hooked/draft",
            &[],
            Some(&invalid.to_string()),
        )
        .await;
    assert_eq!(a.status.as_u16(), 200, "{}", a.text);
    let saved = a.json();
    assert_eq!(saved["valid"], false, "{saved}");
    assert_eq!(saved["based_on_version"], 1);
    assert_eq!(saved["saved_at"], s.clock.now_ms());
    let problems = saved["problems"].as_array().unwrap();
    assert!(
        problems.iter().any(
            |p| p["severity"] == "error" && p["path"].as_str().unwrap().starts_with("edges[1]")
        ),
        "the unknown step is named with its path: {problems:?}"
    );
    // Exactly what was sent, 0600 in a 0700 folder.
    let stored: Value =
        serde_json::from_str(&std::fs::read_to_string(&draft_file).unwrap()).unwrap();
    assert_eq!(stored["workflow"], invalid);
    assert_eq!(stored["based_on_version"], 1);
    #[cfg(unix)]
    {
        assert_eq!(mode(&draft_file), 0o600);
        assert_eq!(mode(&drafts_dir), 0o700);
    }
    assert_eq!(
        live_text(&s, "hooked"),
        live_before,
        "the live file is untouched"
    );
    let draft = s.get_json("/workflows/hooked/draft").await;
    assert_eq!(draft["workflow"], invalid);
    assert_eq!(draft["live_version"], 1);
    let list = s.get_json("/workflows").await;
    let r = row(&list, "hooked").unwrap();
    assert_eq!(r["has_draft"], true);
    assert_eq!(r["version"], 1);
    assert_eq!(r["valid"], true, "the row describes the live file");

    // Webhooks keep running the published version.
    let (v, out) = hook_run(&s, "hooked", "during-invalid-draft").await;
    assert_eq!(v, 1);
    assert_eq!(out, json!({"event": "none"}));

    // It cannot be published: 422 with the problems, the live file and the draft kept.
    let doc = s
        .api(Method::POST, "/workflows/hooked/publish", &[], None)
        .await
        .problem(422, "workflow_invalid");
    let codes: Vec<&str> = doc["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["code"].as_str().unwrap())
        .collect();
    assert!(codes.contains(&"unknown_step"), "{codes:?}");
    assert_eq!(live_text(&s, "hooked"), live_before);
    assert!(draft_file.exists());

    // Fixed and published: the version bumps, the draft is gone, the next run uses it.
    let fixed = hooked_v2();
    let saved = s
        .api(
            Method::PUT,
            "/workflows/hooked/draft",
            &[],
            Some(&fixed.to_string()),
        )
        .await
        .json();
    assert_eq!(saved["valid"], true, "{saved}");
    let a = s
        .api(Method::POST, "/workflows/hooked/publish", &[], None)
        .await;
    assert_eq!(a.status.as_u16(), 200, "{}", a.text);
    let published = a.json();
    assert_eq!(published["version"], 2, "{published}");
    assert_eq!(published["valid"], true);
    assert_eq!(published["workflow"]["name"], "hooked, edited");
    assert!(!draft_file.exists(), "the published draft is deleted");
    s.api(Method::GET, "/workflows/hooked/draft", &[], None)
        .await
        .problem(404, "draft_not_found");
    assert_eq!(s.get_json("/workflows/hooked").await["version"], 2);
    let (v, out) = hook_run(&s, "hooked", "after-publish").await;
    assert_eq!(v, 2, "the run records the published version");
    assert_eq!(out, json!({"edited": "yes"}));
    let r = row(&s.get_json("/workflows").await, "hooked")
        .cloned()
        .unwrap();
    assert_eq!(r["has_draft"], false);

    // Nothing left to publish.
    s.api(Method::POST, "/workflows/hooked/publish", &[], None)
        .await
        .problem(404, "draft_not_found");

    // Discard: the draft goes, the live version stays.
    s.api(
        Method::PUT,
        "/workflows/hooked/draft",
        &[],
        Some(&invalid.to_string()),
    )
    .await;
    assert!(draft_file.exists());
    let d = s
        .api(Method::DELETE, "/workflows/hooked/draft", &[], None)
        .await;
    assert_eq!(d.status.as_u16(), 204, "{}", d.text);
    assert!(!draft_file.exists());
    s.api(Method::DELETE, "/workflows/hooked/draft", &[], None)
        .await
        .problem(404, "draft_not_found");
    assert_eq!(s.get_json("/workflows/hooked").await["version"], 2);

    // Bad drafts are refused, naming what, and nothing is written.
    let mut other = fixed.clone();
    other["id"] = json!("other");
    let doc = s
        .api(
            Method::PUT,
            "/workflows/hooked/draft",
            &[],
            Some(&other.to_string()),
        )
        .await
        .problem(400, "invalid_workflow");
    assert!(
        doc["detail"].as_str().unwrap().contains("\"other\""),
        "{doc}"
    );
    let doc = s
        .api(Method::PUT, "/workflows/hooked/draft", &[], Some("[1, 2]"))
        .await
        .problem(400, "invalid_workflow");
    assert!(
        doc["detail"].as_str().unwrap().contains("JSON object"),
        "{doc}"
    );
    s.api(Method::PUT, "/workflows/Bad.Id/draft", &[], Some("{}"))
        .await
        .problem(400, "invalid_workflow");
    s.api(
        Method::PUT,
        "/workflows/hooked/draft",
        &[],
        Some("{not json"),
    )
    .await
    .problem(400, "invalid_json");
    assert_eq!(
        std::fs::read_dir(&drafts_dir).unwrap().count(),
        0,
        "no draft written"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draft_only_workflow_is_listed_and_has_no_webhook_until_published() {
    let s = server_on(tempfile::tempdir().unwrap(), None).await;
    // No `id` in the body: the path's.
    let mut fresh = hook_workflow("fresh", json!({}));
    fresh.as_object_mut().unwrap().remove("id");
    fresh["name"] = json!("Fresh one");
    let saved = s
        .api(
            Method::PUT,
            "/workflows/fresh/draft",
            &[],
            Some(&fresh.to_string()),
        )
        .await
        .json();
    assert_eq!(saved["valid"], true, "{saved}");
    assert_eq!(saved["based_on_version"], Value::Null);
    let list = s.get_json("/workflows").await;
    let ids: Vec<&str> = list["workflows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["fresh", "hooked"], "in id order");
    let r = row(&list, "fresh").unwrap();
    assert_eq!(r["draft_only"], true);
    assert_eq!(r["has_draft"], true);
    assert_eq!(r["version"], 0);
    assert_eq!(r["name"], "Fresh one");
    assert_eq!(r["trigger"], "webhook_trigger");
    s.api(Method::GET, "/workflows/fresh", &[], None)
        .await
        .problem(404, "workflow_not_found");
    let a = s.hook("fresh", None, b"{}").await;
    assert_eq!(a.status.as_u16(), 404, "a draft has no webhook: {}", a.text);
    assert!(s.runs_of("fresh").await.is_empty());
    assert!(!s.workflows_dir.path().join("fresh.json").exists());

    // Published: a live file, and its webhook answers.
    let published = s
        .api(Method::POST, "/workflows/fresh/publish", &[], None)
        .await
        .json();
    let version = published["version"].as_u64().unwrap();
    assert!(version >= 1, "{published}");
    assert_eq!(published["workflow"]["id"], "fresh");
    let (v, _) = hook_run(&s, "fresh", "first").await;
    assert_eq!(v, version);
    let r = row(&s.get_json("/workflows").await, "fresh")
        .cloned()
        .unwrap();
    assert_eq!(
        (r["draft_only"].clone(), r["has_draft"].clone()),
        (json!(false), json!(false))
    );

    // Deleting a workflow that only has a draft deletes the draft.
    s.api(Method::PUT, "/workflows/gone/draft", &[], Some("{}"))
        .await;
    let d = s.api(Method::DELETE, "/workflows/gone", &[], None).await;
    assert_eq!(d.status.as_u16(), 204, "{}", d.text);
    assert!(row(&s.get_json("/workflows").await, "gone").is_none());
    s.api(Method::DELETE, "/workflows/gone", &[], None)
        .await
        .problem(404, "workflow_not_found");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn put_refuses_a_workflow_with_validation_errors_and_writes_nothing() {
    let s = server_on(tempfile::tempdir().unwrap(), None).await;
    let before = live_text(&s, "hooked");
    let doc = s
        .api(
            Method::PUT,
            "/workflows/hooked",
            &[],
            Some(&hooked_invalid().to_string()),
        )
        .await
        .problem(422, "workflow_invalid");
    assert!(
        doc["problems"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["code"] == "unknown_step" && p["severity"] == "error"),
        "{doc}"
    );
    assert_eq!(live_text(&s, "hooked"), before, "nothing written");
    assert_eq!(s.get_json("/workflows/hooked").await["version"], 1);
    let (v, _) = hook_run(&s, "hooked", "still-v1").await;
    assert_eq!(v, 1);
    // A new id: no file at all.
    let mut new = hooked_invalid();
    new["id"] = json!("brand-new");
    s.api(
        Method::PUT,
        "/workflows/brand-new",
        &[],
        Some(&new.to_string()),
    )
    .await
    .problem(422, "workflow_invalid");
    assert!(!s.workflows_dir.path().join("brand-new.json").exists());
    // A valid one still saves and publishes at once.
    let a = s
        .api(
            Method::PUT,
            "/workflows/hooked",
            &[],
            Some(&hooked_v2().to_string()),
        )
        .await;
    assert_eq!(a.status.as_u16(), 200, "{}", a.text);
    assert_eq!(a.json()["version"], 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draft_survives_a_server_restart() {
    let s = server_on(tempfile::tempdir().unwrap(), None).await;
    let invalid = hooked_invalid();
    s.api(
        Method::PUT,
        "/workflows/hooked/draft",
        &[],
        Some(&invalid.to_string()),
    )
    .await;
    let before = s.get_json("/workflows/hooked/draft").await;
    let (data, workflows) = s.stop_keeping_folders().await;

    let s = server_on(data, Some(workflows)).await;
    let after = s.get_json("/workflows/hooked/draft").await;
    assert_eq!(after, before);
    assert_eq!(after["workflow"], invalid);
    let r = row(&s.get_json("/workflows").await, "hooked")
        .cloned()
        .unwrap();
    assert_eq!(r["has_draft"], true);
    assert_eq!(r["version"], 1);
    // Still not live after the restart.
    let (v, _) = hook_run(&s, "hooked", "after-restart").await;
    assert_eq!(v, 1);
}
