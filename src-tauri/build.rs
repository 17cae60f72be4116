//! tauri-build: reads tauri.conf.json and capabilities/, and checks the icon.
//!
//! `tauri::generate_context!` embeds `frontendDist` (../ui/dist) and fails to compile when it
//! is missing. `make desktop` builds the UI first; for a bare `cargo build`/`cargo test
//! --workspace` on a fresh clone, a placeholder page is written so the crate still compiles
//! (the window then says to build the UI). A real `npm run build` replaces it.
use std::path::Path;

const PLACEHOLDER: &str = "<!doctype html><meta charset=\"utf-8\"><title>Fluxo</title>\
<body style=\"font:16px system-ui;padding:2em\"><h1>Fluxo</h1>\
<p>The editor UI was not built when this binary was compiled. Run <code>make desktop</code> \
(it builds <code>ui/</code> first).</p>\n";

fn main() {
    let dist = Path::new(env!("CARGO_MANIFEST_DIR")).join("../ui/dist");
    // Run again when the page goes or comes (the embedded assets themselves are tracked by the
    // `include_bytes!` that `generate_context!` emits).
    println!(
        "cargo:rerun-if-changed={}",
        dist.join("index.html").display()
    );
    if !dist.join("index.html").exists() {
        println!(
            "cargo:warning=ui/dist is not built: embedding a placeholder page (run `make desktop`)"
        );
        std::fs::create_dir_all(&dist).expect("create ui/dist");
        std::fs::write(dist.join("index.html"), PLACEHOLDER).expect("write ui/dist/index.html");
    }
    tauri_build::build()
}
