//! The layers' import rule (README "Source map", `src/app/mod.rs`): no import circles among the
//! top-level modules `cli`, `server`, `app`, `runtime`, `steps`, `workflow` and `store`, nor
//! among the files of `src/server/`; and the application layer (`src/app/`) knows no HTTP.
//! The same check as `scripts/import-cycles.sh`.
//!
//! Edges are the `crate::<mod>` and `super::<mod>` paths in code (comment lines are skipped; a
//! grouped `use crate::{a, b}` counts every member). `src/server/mod.rs` is the module's root,
//! which wires its children: it is left out of the file graph.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const LAYERS: [&str; 7] = [
    "cli", "server", "app", "runtime", "steps", "workflow", "store",
];

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every `.rs` file under `dir`, as paths relative to it.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).expect("read src dir") {
            let p = e.expect("dir entry").path();
            if p.is_dir() {
                walk(root, &p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p.strip_prefix(root).unwrap().to_path_buf());
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// The code of a file without its comment lines and trailing `// …` comments (those with no
/// quote around them).
fn strip_comments(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        if line.trim_start().starts_with("//") {
            continue;
        }
        let line = match line.find("//") {
            Some(i) if !line[i..].contains('"') && !line[..i].contains('"') => &line[..i],
            _ => line,
        };
        out.push_str(line);
        out.push('\n');
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

fn ident_at(s: &str) -> Option<String> {
    let s = s.trim_start();
    let id: String = s.chars().take_while(|c| is_ident(*c)).collect();
    (!id.is_empty() && !id.starts_with(|c: char| c.is_ascii_digit())).then_some(id)
}

/// The first segments after `root::` (`root` not preceded by an identifier or `:`), with a
/// group `root::{a, b::c}` giving each member's first segment (`a`, `b`).
fn heads(text: &str, root: &str) -> Vec<String> {
    let pat = format!("{root}::");
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(i) = text[from..].find(&pat) {
        let start = from + i;
        from = start + pat.len();
        if text[..start]
            .chars()
            .next_back()
            .is_some_and(|c| is_ident(c) || c == ':')
        {
            continue;
        }
        let rest = &text[from..];
        if let Some(group) = rest.strip_prefix('{') {
            let (mut depth, mut item) = (1, String::new());
            let mut items = Vec::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    _ => {}
                }
                if depth == 0 {
                    break;
                }
                if depth == 1 && c == ',' {
                    items.push(std::mem::take(&mut item));
                } else {
                    item.push(c);
                }
            }
            items.push(item);
            found.extend(items.iter().filter_map(|it| ident_at(it)));
        } else if let Some(id) = ident_at(rest).filter(|_| rest.starts_with(is_ident)) {
            found.push(id);
        }
    }
    found
}

type Edges = BTreeMap<(String, String), BTreeSet<String>>;

/// The top-level module edges among [`LAYERS`] and the file edges within `src/server/`.
fn edges(src: &Path) -> (Edges, Edges) {
    let files = rust_files(src);
    let siblings: BTreeSet<String> = files
        .iter()
        .filter(|f| f.starts_with("server") && f.components().count() == 2)
        .map(|f| f.file_stem().unwrap().to_string_lossy().into_owned())
        .filter(|s| s != "mod")
        .collect();
    let (mut top, mut server) = (Edges::new(), Edges::new());
    for rel in &files {
        let parts: Vec<String> = rel
            .with_extension("")
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        let me = &parts[0];
        let text = strip_comments(&std::fs::read_to_string(src.join(rel)).expect("read file"));
        let name = rel.to_string_lossy().into_owned();
        for to in heads(&text, "crate") {
            if &to != me && LAYERS.contains(&me.as_str()) && LAYERS.contains(&to.as_str()) {
                top.entry((me.clone(), to))
                    .or_default()
                    .insert(name.clone());
            }
        }
        if me == "server" && parts.len() == 2 && parts[1] != "mod" {
            let file = &parts[1];
            let mut targets: BTreeSet<String> = heads(&text, "super").into_iter().collect();
            targets.extend(heads(&text, "crate::server"));
            for t in targets {
                if siblings.contains(&t) && &t != file {
                    server
                        .entry((file.clone(), t))
                        .or_default()
                        .insert(name.clone());
                }
            }
        }
    }
    (top, server)
}

/// Every elementary cycle, each listed once (rotated to start at its smallest node).
fn cycles(edges: &Edges) -> Vec<Vec<String>> {
    let mut graph: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (a, b) in edges.keys() {
        graph.entry(a).or_default().insert(b);
    }
    fn dfs<'a>(
        graph: &BTreeMap<&'a str, BTreeSet<&'a str>>,
        path: &mut Vec<&'a str>,
        found: &mut Vec<Vec<String>>,
    ) {
        let node = *path.last().unwrap();
        for &next in graph.get(node).into_iter().flatten() {
            if next == path[0] {
                found.push(path.iter().map(|s| s.to_string()).collect());
            } else if !path.contains(&next) && next > path[0] {
                path.push(next);
                dfs(graph, path, found);
                path.pop();
            }
        }
    }
    let mut found = Vec::new();
    for &n in graph.keys() {
        dfs(&graph, &mut vec![n], &mut found);
    }
    found
}

fn describe(cs: &[Vec<String>], edges: &Edges) -> String {
    let mut out = String::new();
    for c in cs {
        out.push_str(&format!("{} -> {}\n", c.join(" -> "), c[0]));
        for (i, a) in c.iter().enumerate() {
            let b = &c[(i + 1) % c.len()];
            let why = &edges[&(a.clone(), b.clone())];
            out.push_str(&format!(
                "    {a} -> {b}: {}\n",
                why.iter().cloned().collect::<Vec<_>>().join(", ")
            ));
        }
    }
    out
}

#[test]
fn the_paths_are_read_as_the_script_reads_them() {
    let text = strip_comments(
        "use crate::{app::AppState, store::{self, Store}};\n\
         // use crate::cli;\n\
         let x = crate::runtime::Engine::new(); // crate::server\n\
         use super::{error::ApiError, body};\n\
         fn f() -> my_crate::steps::X {}\n",
    );
    assert_eq!(heads(&text, "crate"), ["app", "store", "runtime"]);
    assert_eq!(heads(&text, "super"), ["error", "body"]);
}

#[test]
fn no_import_cycles_among_the_layers() {
    let (top, _) = edges(&src_dir());
    assert!(
        top.keys().any(|(a, b)| a == "server" && b == "app"),
        "the check sees no edges: is it reading src/?"
    );
    let cs = cycles(&top);
    assert!(
        cs.is_empty(),
        "import cycles among the top-level modules (see scripts/import-cycles.sh):\n{}",
        describe(&cs, &top)
    );
}

#[test]
fn no_import_cycles_among_the_files_of_server() {
    let (_, server) = edges(&src_dir());
    let cs = cycles(&server);
    assert!(
        cs.is_empty(),
        "import cycles among the files of src/server/ (see scripts/import-cycles.sh):\n{}",
        describe(&cs, &server)
    );
}

#[test]
fn the_app_layer_knows_no_http() {
    let src = src_dir();
    let mut offenders = Vec::new();
    for rel in rust_files(&src).iter().filter(|f| f.starts_with("app")) {
        let text = strip_comments(&std::fs::read_to_string(src.join(rel)).unwrap());
        for word in ["axum", "StatusCode"] {
            if text.contains(word) {
                offenders.push(format!("{} mentions `{word}`", rel.display()));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "src/app/ is the application layer: HTTP belongs to src/server/\n{}",
        offenders.join("\n")
    );
}
