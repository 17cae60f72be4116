//! # Fluxo desktop
//!
//! A thin Tauri 2 shell over the `fluxo` engine library. On launch it opens the engine (sled
//! in the app-data dir), seeds the workflows folder, starts the local listener so webhooks
//! reach flows while the app is open, forwards run progress to the window as `run-event`, and
//! answers the UI's IPC commands.
//!
//! # Layout
//!
//! * [`settings`]: the data dir (`FLUXO_DESKTOP_DATA_DIR` or the app-data dir) and the
//!   listener address (`listener_addr` of `settings.json`, default 127.0.0.1:8787;
//!   `FLUXO_DESKTOP_PORT`).
//! * [`shell`]: starts the engine, the workflows folder and the listener; window-independent.
//! * [`keyring`]: the OS keyring the connections key is kept in.
//! * [`commands`]: the IPC commands, one file per domain (workflows, runs, check, memory,
//!   settings, catalog, app).
//! * [`error`]: [`error::IpcError`], the `{code, message, problems?}` every command fails with.

pub mod commands;
pub mod error;
pub mod keyring;
pub mod settings;
pub mod shell;

use std::sync::Mutex;
use std::time::Duration;

use fluxo::server::RunningServer;
use tauri::{Emitter, Manager};
use tokio::sync::broadcast::error::RecvError;

/// The name of the event carrying [`fluxo::runtime::RunEvent`]s to the window (the same JSON as
/// the server's SSE `run` event).
pub const RUN_EVENT: &str = "run-event";

/// How long quitting waits for running runs to finish before the store is closed anyway.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(60);

/// The listener, kept to be shut down when the app exits.
struct Listener(Mutex<Option<RunningServer>>);

/// Start the app; returns when it exits.
pub fn run() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,tao=warn,wry=warn".into()),
        )
        .with_writer(std::io::stderr)
        .try_init();

    let app = tauri::Builder::default()
        .setup(|app| {
            let data_dir = settings::data_dir(|| app.path().app_data_dir().ok())
                .ok_or("no app-data dir: set FLUXO_DESKTOP_DATA_DIR")?;
            let addr = settings::listener_addr(&data_dir)?;
            // The connections key in the OS keyring, under the app identifier.
            let keys = shell::KeyPlace::os(&app.config().identifier);
            let shell = tauri::async_runtime::block_on(shell::start(&data_dir, addr, keys))?;
            forward_run_events(app.handle().clone(), shell.events);
            app.manage(commands::app::AppInfo {
                listener_url: shell.server.url(),
                data_dir: shell.data_dir.clone(),
                notices: shell.notices.clone(),
                sandbox: shell.sandbox,
                connections_key: shell.connections_key,
            });
            app.manage(shell.server.state.clone());
            app.manage(Listener(Mutex::new(Some(shell.server))));
            // The window last, so its first commands find the state above.
            open_main_window(app)?;
            Ok(())
        })
        .invoke_handler(tauri::generate_handler![
            commands::workflows::list_workflows,
            commands::workflows::get_workflow,
            commands::workflows::save_workflow,
            commands::workflows::delete_workflow,
            commands::workflows::validate_workflow,
            commands::workflows::get_draft,
            commands::workflows::save_draft,
            commands::workflows::discard_draft,
            commands::workflows::publish_workflow,
            commands::runs::dry_run,
            commands::runs::start_run,
            commands::runs::get_run,
            commands::runs::run_deliveries,
            commands::runs::list_runs,
            commands::runs::export_runs,
            commands::runs::run_stats,
            commands::runs::replay_run,
            commands::runs::preview_replay,
            commands::runs::resume_run,
            commands::runs::preview_resume,
            commands::runs::preview_bulk,
            commands::runs::start_bulk,
            commands::check::check_workflow,
            commands::schedules::list_schedules,
            commands::schedules::preview_schedule,
            commands::memory::memory_namespaces,
            commands::memory::memory_counts,
            commands::memory::memory_list,
            commands::memory::memory_get,
            commands::memory::memory_delete,
            commands::settings::get_settings,
            commands::settings::save_settings,
            commands::settings::get_token,
            commands::settings::regenerate_token,
            commands::catalog::step_kinds,
            commands::catalog::templates,
            commands::catalog::sample_payloads,
            commands::catalog::connectors,
            commands::connections::list_connections,
            commands::connections::put_connection,
            commands::connections::delete_connection,
            commands::connections::test_connection,
            commands::connections::start_oauth_connection,
            commands::connections::oauth_connection_status,
            commands::catalog::preview_template,
            commands::app::app_info,
        ])
        .build(tauri::generate_context!())
        .expect("cannot start the Fluxo window");

    app.run(|handle, event| {
        if let tauri::RunEvent::Exit = event {
            let server = handle
                .try_state::<Listener>()
                .and_then(|l| l.0.lock().ok()?.take());
            if let Some(server) = server {
                tracing::info!("quitting: finishing running runs");
                tauri::async_runtime::block_on(async {
                    if tokio::time::timeout(SHUTDOWN_WAIT, server.shutdown())
                        .await
                        .is_err()
                    {
                        tracing::warn!(
                            "runs still running after {SHUTDOWN_WAIT:?}; quitting anyway"
                        );
                    }
                });
            }
        }
    });
}

/// Runs in the page before its own scripts (see [`open_main_window`]). WebKitGTK up to at
/// least 2.50 derives `navigator.language` from `LC_CTYPE` and turns `C.UTF-8` (the default
/// locale of containers and CI machines) into `"C"`, which is not a language tag:
/// `new Intl.NumberFormat(navigator.language)` then throws (uPlot does it when loaded) and the
/// page stays blank. An invalid tag is replaced by `en-US`; a real one is left alone.
const LOCALE_FIX: &str = r#"(() => {
  const valid = (tag) => { try { return Intl.getCanonicalLocales(tag).length > 0; } catch { return false; } };
  if (!valid(navigator.language)) {
    Object.defineProperty(Navigator.prototype, 'language', { get: () => 'en-US', configurable: true });
    Object.defineProperty(Navigator.prototype, 'languages', { get: () => ['en-US'], configurable: true });
  }
})();"#;

/// The main window, as `tauri.conf.json` describes it (`create: false` there, so it opens
/// after the engine is up and with [`LOCALE_FIX`]).
fn open_main_window(app: &tauri::App) -> tauri::Result<()> {
    let config = app
        .config()
        .app
        .windows
        .iter()
        .find(|w| w.label == "main")
        .cloned()
        .unwrap_or_default();
    tauri::WebviewWindowBuilder::from_config(app.handle(), &config)?
        .initialization_script(LOCALE_FIX)
        .build()?;
    Ok(())
}

/// Every engine run event to every window, as [`RUN_EVENT`]. A slow window skips missed events
/// (it re-reads the run), as the SSE stream does.
fn forward_run_events(
    app: tauri::AppHandle,
    mut events: tokio::sync::broadcast::Receiver<fluxo::runtime::RunEvent>,
) {
    tauri::async_runtime::spawn(async move {
        loop {
            match events.recv().await {
                Ok(ev) => {
                    if let Err(e) = app.emit(RUN_EVENT, &ev) {
                        tracing::warn!(error = %e, "cannot send a run event to the window");
                    }
                }
                Err(RecvError::Lagged(n)) => tracing::warn!(skipped = n, "run events skipped"),
                Err(RecvError::Closed) => break,
            }
        }
    });
}
