//! What the app starts, independent of the window: the engine over sled in the data dir, the
//! workflows folder (seeded with the templates on first launch), and the local listener
//! (`fluxo::server::start`) so webhooks reach flows while the app is open.
//!
//! The listener's [`AppState`] owns the one [`fluxo::workflow::dir::WorkflowDir`] and the
//! engine; the IPC commands use the same state, so a save in the app is what the next webhook
//! runs.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use fluxo::app::settings::resolve_token;
use fluxo::app::{AppState, ServerOptions};
use fluxo::clock::{Clock, SystemClock};
use fluxo::connections::file::{FileConnections, FILE as CONNECTIONS_FILE};
use fluxo::connections::key::{
    resolve_with_keyring, KeyChoice, Keyring, KeyringEntry, KEYRING_USER, KEY_FILE_ENV,
};
use fluxo::runtime::{Engine, RunEvent};
use fluxo::server::{self, RunningServer};
use fluxo::settings::AppSettings;
use fluxo::store::sled_store::{SledConfig, SledStore};
use fluxo::store::Store;
use fluxo::workflow::dir::WorkflowDir;
use tokio::net::TcpListener;
use tokio::sync::broadcast;

use crate::keyring::OsKeyring;

/// The started engine and listener.
pub struct Shell {
    pub server: RunningServer,
    /// Run events, subscribed before the listener started (so recovered runs are seen too).
    pub events: broadcast::Receiver<RunEvent>,
    pub data_dir: PathBuf,
    /// What the user should know about this launch, in plain words (also logged): on the
    /// first launch, that the seeded webhook templates have no signing secret.
    pub notices: Vec<String>,
    /// The sandbox destination, when the settings turn it on (stopped with the app).
    pub sandbox: Option<fluxo::sandbox::SandboxHandle>,
    /// Where the connections key lives, in words ("the key in the OS keyring (service …)",
    /// or the key file and why the keyring was not used).
    pub connections_key: String,
}

impl Shell {
    /// What the commands share with the listener.
    pub fn state(&self) -> &AppState {
        &self.server.state
    }
}

/// Where the connections key is kept: `entry` of `keyring` (the app's: [`OsKeyring`] and the
/// app identifier; tests give a fake).
pub struct KeyPlace<'a> {
    pub keyring: &'a (dyn Keyring + Sync),
    pub entry: KeyringEntry,
}

impl KeyPlace<'static> {
    /// The OS keyring's entry `connections-key` of `service` (the app identifier).
    pub fn os(service: &str) -> Self {
        KeyPlace {
            keyring: &OsKeyring,
            entry: KeyringEntry::new(service, KEYRING_USER),
        }
    }

    /// No keyring (tests that must not touch the user's): the key goes to the data dir's
    /// `connections.key`, as when the OS keyring is unavailable.
    pub fn no_keyring() -> Self {
        KeyPlace {
            keyring: &NoKeyring,
            entry: KeyringEntry::new("dev.fluxo.none", KEYRING_USER),
        }
    }
}

/// A keyring that is never available ([`KeyPlace::no_keyring`]).
struct NoKeyring;

impl Keyring for NoKeyring {
    fn get(&self, _: &KeyringEntry) -> Result<Option<String>, String> {
        Err("no keyring was given".into())
    }
    fn set(&self, _: &KeyringEntry, _: &str) -> Result<(), String> {
        Err("no keyring was given".into())
    }
    fn delete(&self, _: &KeyringEntry) -> Result<(), String> {
        Ok(())
    }
}

/// Start everything in `data_dir` (created if missing), the listener on `addr` (or, if that
/// is busy, any free port on the same interface), the connections key from `keys` (else
/// `FLUXO_CONNECTIONS_KEY`, `FLUXO_CONNECTIONS_KEY_FILE`, or `connections.key`). Must run
/// inside a tokio runtime.
pub async fn start(data_dir: &Path, addr: SocketAddr, keys: KeyPlace<'_>) -> Result<Shell, String> {
    // 0700 from the start (SPEC §5), so the first launch has nothing to tighten.
    fluxo::secrets::secure_dir(data_dir)
        .map_err(|e| format!("cannot create the data dir {}: {e}", data_dir.display()))?;

    let store = SledStore::open(&SledConfig::new(data_dir.join("store"))).map_err(|e| {
        format!(
            "cannot open the store in {}: {e} (is another Fluxo window or `fluxo serve` using \
             this data dir?)",
            data_dir.display()
        )
    })?;
    let engine = Engine::new(
        Arc::new(store) as Arc<dyn Store>,
        Arc::new(SystemClock) as Arc<dyn Clock>,
    );
    let events = engine.subscribe();
    // The connections store, its key in the OS keyring (`keys.entry`), else, with a warning,
    // in `connections.key` next to it (see `resolve_with_keyring`). A store whose key is
    // nowhere, a wrong key or a damaged file stops the launch with the reason; the file is
    // left as it is.
    let choice = KeyChoice::from_env(std::env::var_os(KEY_FILE_ENV).map(PathBuf::from));
    let (key, source) = resolve_with_keyring(&choice, data_dir, keys.keyring, &keys.entry)
        .map_err(|e| format!("cannot open the connections: {e}"))?;
    let connections_key = source.to_string();
    tracing::info!(key_id = %key.id_hex(), "connections key: {connections_key}");
    let connections = FileConnections::open(data_dir.join(CONNECTIONS_FILE), key, source)
        .map_err(|e| format!("cannot open the connections: {e}"))?;
    engine.set_connections(Arc::new(connections));

    let folder = data_dir.join("workflows");
    let first_launch = !folder.exists();
    if first_launch {
        let n = fluxo::samples::seed_templates(&folder)
            .map_err(|e| format!("cannot seed {}: {e}", folder.display()))?;
        tracing::info!(folder = %folder.display(), templates = n, "first launch: workflows folder seeded");
    }
    let workflows = WorkflowDir::load(&folder, engine.registry().clone())
        .map_err(|e| format!("cannot read the workflows folder {}: {e}", folder.display()))?;
    let sandbox = start_sandbox(data_dir, first_launch, &engine, &workflows).await?;
    // The seeded templates keep no signing secret (their senders, Stripe and GitHub, sign
    // with their own headers, which Fluxo does not verify; a generated Fluxo secret would
    // only make them refuse their real senders): say so plainly once they are listening.
    let unsigned = if first_launch {
        fluxo::steps::webhook_trigger::unsigned_webhooks(&workflows)
    } else {
        Vec::new()
    };

    let (token, _) = resolve_token(None, data_dir)
        .map_err(|e| format!("cannot write the API token in {}: {e}", data_dir.display()))?;
    let listener = bind(addr).await?;
    // With the data dir, the server loads `settings.json` (env variables, retention) itself.
    let options = ServerOptions {
        data_dir: Some(data_dir.to_path_buf()),
        ..ServerOptions::default()
    };
    let server = server::start(listener, engine, workflows, token, options)
        .await
        .map_err(|e| format!("cannot start the engine: {e}"))?;
    tracing::info!(
        url = %server.url(),
        data_dir = %data_dir.display(),
        "listening: webhooks at POST {}/hooks/<workflow_id>, API token in {}",
        server.url(),
        data_dir.join("token").display()
    );
    let notices: Vec<String> =
        fluxo::steps::webhook_trigger::unsigned_notice(&unsigned, &server.url())
            .map(|n| {
                format!(
                    "First launch: the templates were copied to {}; {n}",
                    folder.display()
                )
            })
            .into_iter()
            .collect();
    for n in &notices {
        tracing::warn!("{n}");
    }
    Ok(Shell {
        server,
        events,
        data_dir: data_dir.to_path_buf(),
        notices,
        sandbox,
        connections_key,
    })
}

/// The sandbox destination when the settings say so (`sandbox`; turned on and saved at the
/// first launch): started on a free loopback port, with every `env.NAME` the workflows use
/// pointed at it through the embedder's layer of `env`, so a variable set in Settings (or
/// `FLUXO_ENV_*`) still wins, and every connection an app step names that nobody added pointed
/// at its app's fake (a connection added in Settings still wins).
async fn start_sandbox(
    data_dir: &Path,
    first_launch: bool,
    engine: &Engine,
    workflows: &WorkflowDir,
) -> Result<Option<fluxo::sandbox::SandboxHandle>, String> {
    let mut settings = AppSettings::load(data_dir).map_err(|e| e.to_string())?;
    if first_launch && settings.sandbox.is_none() {
        settings.sandbox = Some(true);
        settings
            .save(data_dir)
            .map_err(|e| format!("cannot save the settings: {e}"))?;
    }
    if settings.sandbox != Some(true) {
        return Ok(None);
    }
    let handle = fluxo::sandbox::Sandbox::start(SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .map_err(|e| format!("cannot start the sandbox: {e}"))?;
    let names: std::collections::BTreeSet<String> = workflows
        .list()
        .iter()
        .filter_map(|e| e.compiled.as_ref())
        .flat_map(|c| fluxo::workflow::env::env_names(&c.workflow))
        .collect();
    engine.set_env(names.iter().map(|n| (n.clone(), handle.url())).collect());
    // Connections likewise: one a workflow names that nobody added goes to its app's fake.
    engine.set_connections(Arc::new(fluxo::sandbox::vendors::SandboxFallback::new(
        engine.connections(),
        handle.url(),
    )));
    tracing::info!(url = %handle.url(), variables = ?names, "sandbox destination running");
    Ok(Some(handle))
}

/// `addr`; if that fails (busy), any free port on the same interface, said in the log.
async fn bind(addr: SocketAddr) -> Result<TcpListener, String> {
    match TcpListener::bind(addr).await {
        Ok(l) => Ok(l),
        Err(e) if addr.port() != 0 => {
            let l = TcpListener::bind(SocketAddr::new(addr.ip(), 0))
                .await
                .map_err(|e| format!("cannot listen on {}: {e}", addr.ip()))?;
            tracing::warn!(
                "{addr} is not available ({e}); listening on {} instead",
                l.local_addr().map(|a| a.to_string()).unwrap_or_default()
            );
            Ok(l)
        }
        Err(e) => Err(format!("cannot listen on {addr}: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A keyring of one entry, in memory.
    #[derive(Default)]
    struct MemKeyring(std::sync::Mutex<Option<String>>);

    impl Keyring for MemKeyring {
        fn get(&self, _: &KeyringEntry) -> Result<Option<String>, String> {
            Ok(self.0.lock().unwrap().clone())
        }
        fn set(&self, _: &KeyringEntry, secret: &str) -> Result<(), String> {
            *self.0.lock().unwrap() = Some(secret.to_string());
            Ok(())
        }
        fn delete(&self, _: &KeyringEntry) -> Result<(), String> {
            *self.0.lock().unwrap() = None;
            Ok(())
        }
    }

    async fn post(addr: std::net::SocketAddr, path: &str, key: &str, body: &str) -> String {
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        let req = format!(
            "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
             Idempotency-Key: {key}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        s.write_all(req.as_bytes()).await.unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        out
    }

    #[tokio::test]
    async fn seeds_once_falls_back_from_a_busy_port_and_shares_the_folder() {
        let dir = tempfile::tempdir().unwrap();
        let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let busy = busy.local_addr().unwrap();
        let ring = MemKeyring::default();
        let keys = || KeyPlace {
            keyring: &ring,
            entry: KeyringEntry::new("dev.fluxo.test", KEYRING_USER),
        };
        let shell = start(dir.path(), busy, keys()).await.unwrap();
        // The connections key went into the keyring, not into a file next to the data.
        assert_eq!(
            shell.connections_key,
            "the key in the OS keyring (service dev.fluxo.test, user connections-key)"
        );
        assert!(ring.0.lock().unwrap().is_some());
        assert!(!dir.path().join("connections.key").exists());
        assert_ne!(
            shell.server.addr.port(),
            busy.port(),
            "fell back to a free port"
        );
        let ids: Vec<String> = shell
            .state()
            .workflows()
            .list()
            .iter()
            .map(|e| e.id.clone())
            .collect();
        assert_eq!(ids.len(), fluxo::samples::TEMPLATES.len());
        assert!(ids.contains(&"invoice-paid-once".to_string()));
        assert!(dir.path().join("token").exists());
        // The first launch says plainly that the seeded webhooks are unsigned.
        assert_eq!(shell.notices.len(), 1, "{:?}", shell.notices);
        let notice = &shell.notices[0];
        for id in [
            "ai-enrichment-relay",
            "github-issue-to-ticket",
            "invoice-paid-once",
            "stripe-to-ledger",
        ] {
            assert!(notice.contains(id), "{notice}");
        }
        assert!(!notice.contains("polling-sync"), "not a webhook: {notice}");
        assert!(notice.contains(&shell.server.url()), "{notice}");
        assert!(notice.contains("signing_secret"), "{notice}");

        // The first launch turns the sandbox destination on (saved), and the templates'
        // variables point at it: a live run of invoice-paid-once creates its deal there.
        let saved = fluxo::settings::AppSettings::load(dir.path()).unwrap();
        assert_eq!(saved.sandbox, Some(true));
        let sandbox = shell.sandbox.as_ref().expect("the sandbox runs");
        let env = shell.state().engine().env();
        for name in ["CRM_URL", "AI_URL", "OUTPUT_URL", "LEDGER_URL"] {
            assert_eq!(env.get(name), Some(&sandbox.url()), "{name}: {env:?}");
        }
        let wf = shell.state().workflows().get("invoice-paid-once").unwrap();
        let event: serde_json::Value = serde_json::from_str(include_str!(
            "../../tests/fixtures/payloads/stripe/invoice.paid.json"
        ))
        .unwrap();
        let run = shell
            .state()
            .engine()
            .run(
                wf.compiled.as_ref().unwrap(),
                fluxo::runtime::RunRequest::new(
                    event,
                    fluxo::run::Trigger::Manual,
                    fluxo::run::Mode::Live,
                ),
            )
            .await
            .unwrap();
        assert_eq!(
            run.status,
            fluxo::run::RunStatus::Succeeded,
            "{:?}",
            run.error
        );
        assert_eq!(sandbox.state().records("deals").len(), 1);

        // A workflow saved through the shared folder (what `save_workflow` does) is what the
        // listener's webhook route runs.
        let mut events = shell.events.resubscribe();
        let wf = serde_json::json!({
            "id": "desk-hook", "name": "d", "version": 0,
            "steps": [{"id": "hook", "kind": "webhook_trigger", "config": {}}],
            "edges": []
        });
        shell.state().workflows().save("desk-hook", wf).unwrap();
        let resp = post(shell.server.addr, "/hooks/desk-hook", "k1", "{}").await;
        assert!(resp.starts_with("HTTP/1.1 202"), "{resp}");
        let ev = tokio::time::timeout(std::time::Duration::from_secs(10), events.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(ev.workflow_id, "desk-hook");
        shell.server.shutdown().await;

        // Second launch: a deleted template is not seeded again. (sled's lock goes with the
        // last handle of the store, which the stopped server's tasks drop soon after.)
        std::fs::remove_file(dir.path().join("workflows/invoice-paid-once.json")).unwrap();
        let any_port: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let mut tries = 0;
        let shell = loop {
            match start(dir.path(), any_port, keys()).await {
                Ok(s) => break s,
                Err(e) if e.contains("lock") && tries < 100 => tries += 1,
                Err(e) => panic!("{e}"),
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        };
        assert!(shell.state().workflows().get("invoice-paid-once").is_none());
        assert!(shell.state().workflows().get("desk-hook").is_some());
        // Still on (saved); a variable set in Settings wins over the sandbox's.
        assert!(shell.sandbox.is_some());
        assert!(
            shell.notices.is_empty(),
            "only the first launch: {:?}",
            shell.notices
        );
        shell.server.shutdown().await;
    }
}
