//! Connecting an app with OAuth 2 (issue 35) through a real `fluxo serve` and the fake OAuth
//! server of `fluxo sandbox`, over real HTTP: start → the authorize URL (followed by hand, no
//! redirects) → the callback on the server → the connection exists with an `oauth2`
//! credential, masked in the API; an unknown or reused state is refused; `access_denied` is
//! reported; a flow past its 10 minutes is refused; "Test connection" says ok with a good token
//! and that the app refused the credentials with a bad one, or that it could not reach it.

use std::sync::Arc;
use std::time::Duration;

use reqwest::header::LOCATION;
use reqwest::StatusCode;
use serde_json::{json, Value};

use fluxo::app::ServerOptions;
use fluxo::clock::Clock;
use fluxo::connections::{Connection, Credential, MemConnections};
use fluxo::runtime::Engine;
use fluxo::sandbox::{Sandbox, SandboxHandle};
use fluxo::server::{self, RunningServer};
use fluxo::store::{InMemoryStore, Store};
use fluxo::workflow::dir::WorkflowDir;

const TOKEN: &str = "connect-oauth-test-token-0123456789abcdef";

/// The real clock, moved forward by hand (`advance`); waits really wait (the server's
/// background loops sleep on it).
#[derive(Default)]
struct AheadClock(std::sync::atomic::AtomicI64);

impl AheadClock {
    fn advance(&self, d: Duration) {
        self.0
            .fetch_add(d.as_millis() as i64, std::sync::atomic::Ordering::SeqCst);
    }
}

#[async_trait::async_trait]
impl Clock for AheadClock {
    fn now_ms(&self) -> i64 {
        chrono::Utc::now().timestamp_millis() + self.0.load(std::sync::atomic::Ordering::SeqCst)
    }
    async fn sleep(&self, d: Duration) {
        tokio::time::sleep(d).await;
    }
}

struct World {
    sandbox: SandboxHandle,
    server: RunningServer,
    clock: Arc<AheadClock>,
    http: reqwest::Client,
    _workflows: tempfile::TempDir,
}

async fn world() -> World {
    let sandbox = Sandbox::start("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let clock = Arc::new(AheadClock::default());
    let engine = Engine::new(
        Arc::new(InMemoryStore::new()) as Arc<dyn Store>,
        clock.clone() as Arc<dyn Clock>,
    );
    engine.set_connections(Arc::new(MemConnections::default()));
    let workflows = tempfile::tempdir().unwrap();
    let dir = WorkflowDir::load(workflows.path(), engine.registry().clone()).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let server = server::start(
        listener,
        engine,
        dir,
        TOKEN.to_string(),
        ServerOptions::default(),
    )
    .await
    .unwrap();
    let http = reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap();
    World {
        sandbox,
        server,
        clock,
        http,
        _workflows: workflows,
    }
}

impl World {
    async fn api(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut rb = self
            .http
            .request(method, format!("{}/api/v1{path}", self.server.url()))
            .bearer_auth(TOKEN);
        if let Some(b) = body {
            rb = rb.json(&b);
        }
        let r = rb.send().await.unwrap();
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    async fn start(&self, id: &str) -> Value {
        let s = self.sandbox.url();
        let (status, v) = self
            .api(
                reqwest::Method::POST,
                "/connections/oauth/start",
                Some(json!({
                    "app": "hubspot", "id": id, "client_id": "fluxo-test",
                    "client_secret": "client-secret-0123456789",
                    "base_url": format!("{s}/hubspot"),
                    "authorize_url": format!("{s}/oauth/authorize"),
                    "token_url": format!("{s}/oauth/token"),
                })),
            )
            .await;
        assert_eq!(status, 200, "{v}");
        v
    }

    /// Follow the authorize URL by hand: the fake approves at once; its `Location` is the
    /// callback with `code` and `state`.
    async fn authorize(&self, url: &str) -> String {
        let r = self.http.get(url).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::FOUND, "{}", r.text().await.unwrap());
        r.headers()[LOCATION].to_str().unwrap().to_string()
    }

    /// GET the callback as a browser would (no API token, HTML accepted): its status and page.
    async fn callback(&self, url: &str) -> (u16, String) {
        let r = self
            .http
            .get(url)
            .header("accept", "text/html,application/xhtml+xml,*/*;q=0.8")
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.text().await.unwrap())
    }
}

#[tokio::test]
async fn connect_hubspot_through_the_fake_oauth_server() {
    let w = world().await;
    let started = w.start("crm").await;
    let authorize_url = started["authorize_url"].as_str().unwrap();
    let state = started["state"].as_str().unwrap();
    // The redirect URI is the server's own callback, on loopback.
    let redirect = format!("{}/api/v1/connections/oauth/callback", w.server.url());
    assert_eq!(started["redirect_uri"], json!(redirect));
    let u = reqwest::Url::parse(authorize_url).unwrap();
    let q: std::collections::HashMap<_, _> = u.query_pairs().into_owned().collect();
    assert_eq!(q["code_challenge_method"], "S256");
    assert_eq!(q["redirect_uri"], redirect);
    assert!(!authorize_url.contains("client-secret-0123456789"));
    // Pending until the browser comes back.
    let (_, flow) = w
        .api(
            reqwest::Method::GET,
            &format!("/connections/oauth/{state}"),
            None,
        )
        .await;
    assert_eq!(flow["state"], "pending", "{flow}");

    let callback = w.authorize(authorize_url).await;
    assert!(callback.starts_with(&redirect), "{callback}");
    let (status, page) = w.callback(&callback).await;
    assert_eq!(status, 200, "{page}");
    assert!(
        page.contains("Connected HubSpot as crm. You can close this window."),
        "{page}"
    );

    // Stored with an oauth2 credential: expires_at_ms from expires_in on the engine's clock.
    let stored = w
        .server
        .state
        .engine()
        .connections()
        .get("crm")
        .unwrap()
        .unwrap();
    let Credential::Oauth2 {
        access_token,
        refresh_token,
        expires_at_ms,
        token_url,
        client_id,
        client_secret,
    } = &stored.credential
    else {
        panic!("not oauth2: {:?}", stored.credential)
    };
    assert!(access_token.starts_with("sbx_at_"));
    assert!(refresh_token.as_deref().unwrap().starts_with("sbx_rt_"));
    let ttl_s = fluxo::sandbox::SandboxConfig::default()
        .access_token_ttl
        .as_secs() as i64;
    let expected = w.clock.now_ms() + ttl_s * 1000;
    let at = expires_at_ms.unwrap();
    assert!(
        (expected - 10_000..=expected).contains(&at),
        "{at} vs {expected}"
    );
    assert_eq!(token_url, &format!("{}/oauth/token", w.sandbox.url()));
    assert_eq!(client_id, "fluxo-test");
    assert_eq!(client_secret.as_deref(), Some("client-secret-0123456789"));
    assert_eq!(
        stored.base_url,
        Some(format!("{}/hubspot", w.sandbox.url()))
    );
    // Masked in the API, in the flow's status too.
    let (_, listed) = w.api(reqwest::Method::GET, "/connections", None).await;
    let text = listed.to_string();
    assert!(!text.contains(access_token.as_str()), "{text}");
    assert!(!text.contains("client-secret-0123456789"), "{text}");
    assert_eq!(listed["connections"][0]["credential"]["kind"], "oauth2");
    let (_, flow) = w
        .api(
            reqwest::Method::GET,
            &format!("/connections/oauth/{state}"),
            None,
        )
        .await;
    assert_eq!(flow["state"], "connected", "{flow}");
    assert_eq!(flow["connection"]["id"], "crm");
    assert!(!flow.to_string().contains(access_token.as_str()));

    // The same callback again: the state was used.
    let (status, page) = w.callback(&callback).await;
    assert_eq!(status, 404, "{page}");
    assert!(
        page.contains("no connect flow is waiting for this state"),
        "{page}"
    );

    // Test connection: ok with the OAuth token.
    let (status, t) = w
        .api(reqwest::Method::POST, "/connections/crm/test", None)
        .await;
    assert_eq!(status, 200, "{t}");
    assert_eq!(t["ok"], true, "{t}");
    assert_eq!(t["status"], 200);
    assert!(
        t["message"]
            .as_str()
            .unwrap()
            .starts_with("HubSpot accepted the credentials"),
        "{t}"
    );

    // Past the token's expiry on the engine's clock: the test refreshes it first, as a step
    // would, and sends the new token.
    let oauth = |w: &World| {
        let (c, u) = (
            w.http.clone(),
            format!("{}/_sandbox/oauth", w.sandbox.url()),
        );
        async move {
            c.get(u)
                .send()
                .await
                .unwrap()
                .json::<Value>()
                .await
                .unwrap()
        }
    };
    let before = oauth(&w).await["refreshes"].as_u64().unwrap();
    w.clock.advance(Duration::from_secs(ttl_s as u64 + 120));
    let (status, t) = w
        .api(reqwest::Method::POST, "/connections/crm/test", None)
        .await;
    assert_eq!(status, 200, "{t}");
    assert_eq!(t["ok"], true, "{t}");
    assert_eq!(oauth(&w).await["refreshes"].as_u64().unwrap(), before + 1);
}

#[tokio::test]
async fn wrong_state_denied_consent_and_expiry_are_refused() {
    let w = world().await;
    // A state nobody started.
    let (status, page) = w
        .callback(&format!(
            "{}/api/v1/connections/oauth/callback?state=forged&code=x",
            w.server.url()
        ))
        .await;
    assert_eq!(status, 404, "{page}");
    assert!(page.contains("no connect flow is waiting for this state"));
    let (status, _) = w
        .callback(&format!(
            "{}/api/v1/connections/oauth/callback?code=x",
            w.server.url()
        ))
        .await;
    assert_eq!(status, 400);

    // Consent denied at the app.
    let r = w
        .http
        .post(format!("{}/_sandbox/oauth", w.sandbox.url()))
        .json(&json!({"deny_authorization": true}))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
    let started = w.start("denied").await;
    let callback = w
        .authorize(started["authorize_url"].as_str().unwrap())
        .await;
    assert!(callback.contains("error=access_denied"), "{callback}");
    let (status, page) = w.callback(&callback).await;
    assert_eq!(status, 403, "{page}");
    assert!(page.contains("HubSpot answered access_denied"), "{page}");
    let (_, flow) = w
        .api(
            reqwest::Method::GET,
            &format!("/connections/oauth/{}", started["state"].as_str().unwrap()),
            None,
        )
        .await;
    assert_eq!(flow["state"], "failed", "{flow}");
    assert!(flow["message"].as_str().unwrap().contains("access_denied"));
    assert!(w
        .server
        .state
        .engine()
        .connections()
        .get("denied")
        .unwrap()
        .is_none());
    w.http
        .post(format!("{}/_sandbox/oauth", w.sandbox.url()))
        .json(&json!({"deny_authorization": false}))
        .send()
        .await
        .unwrap();

    // A flow whose browser comes back after 10 minutes.
    let started = w.start("late").await;
    let callback = w
        .authorize(started["authorize_url"].as_str().unwrap())
        .await;
    w.clock.advance(Duration::from_secs(601));
    let (status, page) = w.callback(&callback).await;
    assert_eq!(status, 400, "{page}");
    assert!(page.contains("this connect flow expired"), "{page}");

    // The token endpoint's refusal: a code the fake never issued.
    let started = w.start("refused").await;
    let state = started["state"].as_str().unwrap();
    let (status, page) = w
        .callback(&format!(
            "{}/api/v1/connections/oauth/callback?state={state}&code=sbx_code_forged",
            w.server.url()
        ))
        .await;
    assert_eq!(status, 422, "{page}");
    assert!(
        page.contains("token endpoint refused the authorization code: invalid_grant"),
        "{page}"
    );
    assert!(!page.contains("client-secret-0123456789"));

    // Bad input is named.
    let (status, v) = w
        .api(
            reqwest::Method::POST,
            "/connections/oauth/start",
            Some(json!({"app": "salesforce", "id": "s", "client_id": "c"})),
        )
        .await;
    assert_eq!(status, 400, "{v}");
    assert!(
        v["detail"]
            .as_str()
            .unwrap_or_default()
            .starts_with("app `salesforce`: no such connector (one of: google_sheets, hubspot"),
        "{v}"
    );
    let (status, v) = w
        .api(
            reqwest::Method::POST,
            "/connections/oauth/start",
            Some(json!({"app": "hubspot", "id": "Bad", "client_id": "c"})),
        )
        .await;
    assert_eq!(status, 400, "{v}");
    assert!(
        v["detail"]
            .as_str()
            .unwrap_or_default()
            .starts_with("id `Bad`"),
        "{v}"
    );
}

#[tokio::test]
async fn test_connection_ok_refused_and_unreachable() {
    let w = world().await;
    let store = w.server.state.engine().connections();
    let put = |id: &str, token: &str, base: String| {
        store
            .put(Connection {
                id: id.into(),
                app: "hubspot".into(),
                name: String::new(),
                credential: Credential::Bearer {
                    token: token.into(),
                },
                base_url: Some(base),
                values: Default::default(),
            })
            .unwrap();
    };
    let s = w.sandbox.url();
    put("good", "pat-sandbox-fluxo-0123", format!("{s}/hubspot"));
    put(
        "bad",
        "pat-na1-not-a-sandbox-token-4567",
        format!("{s}/hubspot"),
    );
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    put(
        "down",
        "pat-sandbox-fluxo-0123",
        format!("http://127.0.0.1:{port}/hubspot"),
    );

    let (_, t) = w
        .api(reqwest::Method::POST, "/connections/good/test", None)
        .await;
    assert_eq!(t["ok"], true, "{t}");
    let (status, t) = w
        .api(reqwest::Method::POST, "/connections/bad/test", None)
        .await;
    assert_eq!(status, 200);
    assert_eq!(
        (t["ok"].clone(), t["status"].clone()),
        (json!(false), json!(401)),
        "{t}"
    );
    assert!(
        t["message"]
            .as_str()
            .unwrap()
            .starts_with("HubSpot refused the credentials (401"),
        "{t}"
    );
    assert!(!t.to_string().contains("pat-na1-not-a-sandbox-token-4567"));
    let (_, t) = w
        .api(reqwest::Method::POST, "/connections/down/test", None)
        .await;
    assert_eq!(
        (t["ok"].clone(), t["status"].clone()),
        (json!(false), Value::Null),
        "{t}"
    );
    assert!(
        t["message"]
            .as_str()
            .unwrap()
            .starts_with(&format!("could not reach HubSpot at 127.0.0.1:{port}")),
        "{t}"
    );
    let (status, t) = w
        .api(reqwest::Method::POST, "/connections/nope/test", None)
        .await;
    assert_eq!(status, 404, "{t}");
}
