//! The IPC commands the UI's `TauriApi` calls (`ui/src/api/tauri.ts`), one file per domain
//! (`app_info` is not used by the UI yet: it tells the listener's URL for webhook addresses).
//! Each is a short adapter over the library, doing what the matching HTTP route of
//! `fluxo::server` does, over the same [`fluxo::server::AppState`] as the local listener.
//! Errors cross as [`crate::error::IpcError`] (`{code, message, problems?}`).
//!
//! Every command is `async` so file and store work never runs on the window's main thread.

pub mod app;
pub mod catalog;
pub mod check;
pub mod memory;
pub mod runs;
pub mod schedules;
pub mod settings;
pub mod workflows;
