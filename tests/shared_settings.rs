//! Settings and the API token on a shared database (SPEC §8 "Scale-out"): several processes
//! on one PostgreSQL database apply the same settings and accept the same token, whichever
//! process saved them. Each "process" here is an [`AppState`] over its own connection pool and
//! data dir, on one database of the test's own PostgreSQL server (`tests/common/pg.rs`). The
//! periodic pick-up ([`settings::refresh`], every `SHARED_POLL` in a server) is called
//! directly, so no test waits on time.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use serde_json::json;

mod common;

use common::pg::TestPg;
use fluxo::app::{settings, AppState, ServerOptions};
use fluxo::clock::{Clock, SystemClock};
use fluxo::runtime::Engine;
use fluxo::settings::AppSettings;
use fluxo::store::{PgStore, SharedSettings, Store};
use fluxo::workflow::dir::WorkflowDir;

/// A process: its app over a new pool on `url`, with data dir `dir` (holding `local` as its
/// `settings.json`) and `token` resolved locally (`given`: from `--token`).
async fn process(url: &str, dir: &Path, local: &AppSettings, token: &str, given: bool) -> AppState {
    let store = PgStore::connect(url).await.expect("connect");
    store.migrate().await.expect("migrate");
    let store: Arc<dyn Store> = Arc::new(store);
    let engine = Engine::new(store, Arc::new(SystemClock) as Arc<dyn Clock>);
    std::fs::create_dir_all(dir.join("workflows")).unwrap();
    let workflows = WorkflowDir::load(&dir.join("workflows"), engine.registry().clone()).unwrap();
    let data = dir.join("data");
    std::fs::create_dir_all(&data).unwrap();
    local.save(&data).unwrap();
    let options = ServerOptions {
        data_dir: Some(data),
        token_given: given,
        ..Default::default()
    };
    let addr: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let (state, _queue) = AppState::open(addr, engine, workflows, token.into(), options)
        .await
        .expect("the app opens");
    state
}

fn with_env(pairs: &[(&str, &str)]) -> AppSettings {
    AppSettings {
        env: pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..Default::default()
    }
}

fn token_file(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("data/token"))
        .unwrap_or_default()
        .trim()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_and_token_saved_through_one_process_apply_in_all() {
    let pg = TestPg::shared();
    let url = pg.fresh_db().await;
    let tmp = tempfile::tempdir().unwrap();
    let (da, db, dc) = (
        tmp.path().join("a"),
        tmp.path().join("b"),
        tmp.path().join("c"),
    );

    // The first process seeds the database with its settings and token; the next one finds
    // them and uses them instead of its own.
    let a = process(
        &url,
        &da,
        &with_env(&[("CRM", "http://a")]),
        "token-a",
        false,
    )
    .await;
    let b = process(
        &url,
        &db,
        &with_env(&[("CRM", "http://b")]),
        "token-b",
        false,
    )
    .await;
    assert_eq!(
        b.settings().env["CRM"],
        "http://a",
        "B runs with the shared settings"
    );
    assert_eq!(b.token(), "token-a", "B accepts the shared token");
    // A process whose token was given keeps it, and still shares the settings.
    let c = process(&url, &dc, &AppSettings::default(), "token-c", true).await;
    assert_eq!(c.token(), "token-c");
    assert_eq!(c.settings().env["CRM"], "http://a");

    // Settings saved through A, with a secret: B and C take them up at their next poll.
    let mut s = with_env(&[("CRM", "http://crm.internal"), ("API_KEY", "sk_live_1234")]);
    s.secret_env.insert("API_KEY".into());
    s.retention_runs = Some(500);
    settings::save(&a, s.clone()).await.expect("A saves");
    assert_eq!(b.settings().env["CRM"], "http://a", "not before B polls");
    settings::refresh(&b).await;
    settings::refresh(&c).await;
    for (name, p) in [("B", &b), ("C", &c)] {
        assert_eq!(p.settings(), s, "{name} applies the settings A saved");
        assert_eq!(p.retention().max_runs_per_workflow, Some(500), "{name}");
        // The engine's template env is the new one too (what runs see).
        let view = settings::view(p);
        assert_eq!(
            view["settings"]["env"]["CRM"], "http://crm.internal",
            "{name}"
        );
        assert_ne!(
            view["settings"]["env"]["API_KEY"], "sk_live_1234",
            "{name} shows the secret masked"
        );
    }
    // Saved to the database, not to A's settings file (the file is a start-up seed only).
    let on_disk = AppSettings::load(&da.join("data")).unwrap();
    assert_eq!(on_disk.env["CRM"], "http://a");

    // A token regenerated through B: A takes it up (and its token file holds it); C keeps
    // its given token.
    let t = settings::new_token(&b).await.expect("B regenerates");
    assert_eq!(b.token(), t);
    assert_eq!(a.token(), "token-a", "not before A polls");
    settings::refresh(&a).await;
    settings::refresh(&c).await;
    assert_eq!(a.token(), t);
    assert_eq!(
        token_file(&da),
        t,
        "A's token file holds the token in force"
    );
    assert_eq!(c.token(), "token-c");

    // A document this version cannot read (written by hand or a newer version) is skipped:
    // the settings in force stay.
    let raw = PgStore::connect(&url).await.unwrap();
    raw.put_document(
        settings::SHARED_SETTINGS,
        &json!({"env": {"not a name": "x"}}),
    )
    .await
    .unwrap();
    raw.put_document(settings::SHARED_TOKEN, &json!({"token": ""}))
        .await
        .unwrap();
    settings::refresh(&a).await;
    assert_eq!(
        a.settings(),
        s,
        "an invalid shared document changes nothing"
    );
    assert_eq!(a.token(), t);

    // A bad save through the API changes nothing anywhere.
    let err = settings::save(&a, with_env(&[("bad name", "x")]))
        .await
        .expect_err("an invalid name is refused");
    assert_eq!(err.code, "invalid_settings");
    let (_, doc) = raw
        .get_document(settings::SHARED_SETTINGS)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(doc, json!({"env": {"not a name": "x"}}), "nothing written");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_first_starts_agree_on_one_token_and_one_settings() {
    let pg = TestPg::shared();
    let url = pg.fresh_db().await;
    let tmp = tempfile::tempdir().unwrap();
    let starts = (0..4).map(|i| {
        let (url, dir) = (url.clone(), tmp.path().join(format!("p{i}")));
        tokio::spawn(async move {
            let crm = format!("http://p{i}");
            let token = format!("token-{i}");
            process(&url, &dir, &with_env(&[("CRM", &crm)]), &token, false).await
        })
    });
    let mut apps = Vec::new();
    for s in starts {
        apps.push(s.await.unwrap());
    }
    let token = apps[0].token();
    let crm = apps[0].settings().env["CRM"].clone();
    // Each document is some starter's own (not always the same starter's for both).
    assert!((0..4).any(|i| token == format!("token-{i}")), "{token}");
    assert!((0..4).any(|i| crm == format!("http://p{i}")), "{crm}");
    for app in &apps {
        assert_eq!(app.token(), token);
        assert_eq!(app.settings().env["CRM"], crm);
    }
}
