//! Concurrent saves of one workflow (issue 13, item 6): 40 parallel `PUT`s over real HTTP get
//! no 5xx and 40 distinct versions, each one more than the last; afterwards `GET` answers the
//! file's bytes exactly, no temporary file is left behind, and the file keeps a normal mode.

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;

use reqwest::Method;
use serde_json::{json, Value};

use common::server::{api_workflow, Setup};
use fluxo::steps::Registry;
use fluxo::workflow::dir::WorkflowDir;

const SAVES: usize = 40;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn forty_concurrent_puts_get_distinct_increasing_versions_and_get_serves_the_file() {
    let server = Arc::new(Setup::new().workflow(api_workflow("flow")).start().await);
    let before = server.get_json("/workflows/flow").await["version"]
        .as_u64()
        .unwrap();
    let mut tasks = Vec::new();
    for i in 0..SAVES {
        let s = server.clone();
        tasks.push(tokio::spawn(async move {
            let mut wf = api_workflow("flow");
            wf["name"] = json!(format!("save {i}"));
            let a = s
                .api(Method::PUT, "/workflows/flow", &[], Some(&wf.to_string()))
                .await;
            (i, a.status.as_u16(), a.text)
        }));
    }
    let mut versions = Vec::new();
    let mut names_by_version = std::collections::BTreeMap::new();
    for t in tasks {
        let (i, status, text) = t.await.unwrap();
        assert_eq!(status, 200, "save {i}: {status} {text}");
        let v: Value = serde_json::from_str(&text).unwrap();
        let version = v["version"].as_u64().unwrap();
        assert_eq!(v["workflow"]["version"], version, "{text}");
        versions.push(version);
        names_by_version.insert(version, format!("save {i}"));
    }
    let distinct: BTreeSet<u64> = versions.iter().copied().collect();
    assert_eq!(distinct.len(), SAVES, "versions {versions:?}");
    let expected: BTreeSet<u64> = (before + 1..=before + SAVES as u64).collect();
    assert_eq!(distinct, expected, "one more than the last, no gaps");

    // What is served is what is on disk: the last save's bytes.
    let path = server.workflows_dir.path().join("flow.json");
    let disk = std::fs::read_to_string(&path).unwrap();
    let served = server
        .api(Method::GET, "/workflows/flow", &[], None)
        .await
        .text;
    assert_eq!(served, disk, "GET answers the file exactly");
    let last = before + SAVES as u64;
    let file: Value = serde_json::from_str(&disk).unwrap();
    assert_eq!(file["version"], last);
    assert_eq!(file["name"], names_by_version[&last].as_str());
    let listed = server.get_json("/workflows").await;
    assert_eq!(listed["workflows"][0]["version"], last, "{listed}");

    // No temporary file is left, and the file is readable as workflow files are.
    let names: Vec<String> = std::fs::read_dir(server.workflows_dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec!["flow.json".to_string()], "{names:?}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode & 0o600, 0o600, "{mode:o}");
    }
}

#[test]
fn concurrent_saves_from_threads_and_a_file_edited_by_hand() {
    let dir = tempfile::tempdir().unwrap();
    let wd = Arc::new(WorkflowDir::load(dir.path(), Arc::new(Registry::builtin())).unwrap());
    let first = wd.save("flow", api_workflow("flow")).unwrap();
    assert_eq!(first.version(), 2, "one more than the body's 1");
    // Edited by hand to a higher version: the next save counts it.
    let mut edited = api_workflow("flow");
    edited["version"] = json!(10);
    std::fs::write(dir.path().join("flow.json"), edited.to_string()).unwrap();
    let threads: Vec<_> = (0..16)
        .map(|_| {
            let wd = wd.clone();
            std::thread::spawn(move || wd.save("flow", api_workflow("flow")).unwrap().version())
        })
        .collect();
    let versions: BTreeSet<u64> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    assert_eq!(versions, (11..=26).collect::<BTreeSet<u64>>());
    let disk = std::fs::read_to_string(dir.path().join("flow.json")).unwrap();
    assert_eq!(wd.get("flow").unwrap().text, disk);
    assert!(wd.delete("flow").unwrap());
    assert!(!dir.path().join("flow.json").exists());
}
