//! The IPC commands the UI's `TauriApi` calls (`ui/src/api/tauri.ts`), one file per domain
//! (`app_info` is not used by the UI yet: it tells the listener's URL for webhook addresses).
//! Each is a thin adapter: read the arguments, call the one [`fluxo::app`] function of its use
//! case (the one the matching HTTP route of `fluxo::server` calls), over the same
//! [`fluxo::app::AppState`] as the local listener, and answer.
//! Errors cross as [`crate::error::IpcError`] (`{code, message, problems?}`).
//!
//! Every command is `async` so file and store work never runs on the window's main thread.

pub mod app;
pub mod catalog;
pub mod check;
pub mod connections;
pub mod memory;
pub mod runs;
pub mod schedules;
pub mod settings;
pub mod workflows;
