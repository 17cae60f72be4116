#!/usr/bin/env bash
# Import cycles among Fluxo's layers (the same rule as tests/architecture.rs).
#
# Edges are `crate::<mod>` and `super::<mod>` paths in code (comments are skipped; grouped
# `use crate::{a, b}` counts every member). Two graphs are checked:
#   * top-level modules: cli, server, app, runtime, steps, workflow, store;
#   * the files of src/server/ (mod.rs, the module's root, is left out: it wires its children).
# Prints every edge with the file that makes it, then every cycle; exits 1 if there is one.
# Usage: scripts/import-cycles.sh [--quiet] [src-dir]
set -euo pipefail
quiet=0
if [ "${1:-}" = "--quiet" ]; then quiet=1; shift; fi
src="${1:-$(dirname "$0")/../src}"
exec python3 - "$src" "$quiet" <<'PY'
import os, re, sys

src, quiet = sys.argv[1], sys.argv[2] == "1"
LAYERS = ["cli", "server", "app", "runtime", "steps", "workflow", "store"]

def strip_comments(text):
    out = []
    for line in text.splitlines():
        s = line.lstrip()
        if s.startswith("//"):
            continue
        # Trailing `// ...` comments (not inside a string, roughly: no quote after `//`).
        i = line.find("//")
        if i >= 0 and '"' not in line[i:] and '"' not in line[:i]:
            line = line[:i]
        out.append(line)
    return "\n".join(out)

def heads(text, root):
    """First segments after `root::`, expanding `root::{a, b::c}` groups."""
    found = []
    for m in re.finditer(r"(?<![A-Za-z0-9_:])" + root + r"::(\{|[A-Za-z_][A-Za-z0-9_]*)", text):
        if m.group(1) != "{":
            found.append(m.group(1))
            continue
        depth, i, item, items = 1, m.end(), "", []
        while i < len(text) and depth:
            c = text[i]
            if c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
            if depth == 1 and c == ",":
                items.append(item); item = ""
            elif depth >= 1 and not (depth == 1 and c in "{}"):
                item += c
            i += 1
        items.append(item)
        for it in items:
            w = re.match(r"\s*([A-Za-z_][A-Za-z0-9_]*)", it)
            if w:
                found.append(w.group(1))
    return found

files = []
for d, _, names in os.walk(src):
    for n in names:
        if n.endswith(".rs"):
            files.append(os.path.relpath(os.path.join(d, n), src))
files.sort()

top_edges, server_edges = {}, {}
for rel in files:
    parts = rel[:-3].split(os.sep)
    top = parts[0]
    text = strip_comments(open(os.path.join(src, rel), encoding="utf-8").read())
    # Top-level edges.
    for a in heads(text, "crate"):
        if a != top and top in LAYERS and a in LAYERS:
            top_edges.setdefault((top, a), set()).add(rel)
    # Files of server/.
    if top == "server" and len(parts) == 2 and parts[1] != "mod":
        me = parts[1]
        siblings = {f[:-3].split(os.sep)[1] for f in files
                    if f.startswith("server" + os.sep) and f.count(os.sep) == 1} - {"mod"}
        targets = set(heads(text, "super")) | set(heads(text, "crate::server"))
        for t in targets:
            if t in siblings and t != me:
                server_edges.setdefault((me, t), set()).add(rel)

def cycles(edges):
    graph = {}
    for (a, b) in edges:
        graph.setdefault(a, set()).add(b)
    found, seen = [], set()
    def dfs(path, node):
        for nxt in sorted(graph.get(node, ())):
            if nxt == path[0]:
                cyc = path[:]
                k = min(range(len(cyc)), key=lambda i: cyc[i])
                cyc = cyc[k:] + cyc[:k]
                if tuple(cyc) not in seen:
                    seen.add(tuple(cyc)); found.append(cyc)
            elif nxt not in path and nxt > path[0]:
                dfs(path + [nxt], nxt)
    for n in sorted(graph):
        dfs([n], n)
    return found

status = 0
for title, edges in (("top-level modules", top_edges), ("files of server/", server_edges)):
    if not quiet:
        print(f"## {title}: edges")
        for (a, b), why in sorted(edges.items()):
            print(f"  {a} -> {b}   ({', '.join(sorted(why))})")
    cs = cycles(edges)
    print(f"## {title}: {len(cs)} cycle(s)")
    for c in cs:
        print("  " + " -> ".join(c + [c[0]]))
        for a, b in zip(c, c[1:] + [c[0]]):
            print(f"      {a} -> {b}: {', '.join(sorted(edges[(a, b)]))}")
    if cs:
        status = 1
sys.exit(status)
PY
