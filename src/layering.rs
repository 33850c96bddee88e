//! The import rules between top-level modules, checked on the source text (issue 24).
//!
//! The test reads every file under `src/` at test time and collects the top-level modules
//! each module names through a `crate` path (a `use`, a path in code, or a doc link; test
//! code is left out: `tests.rs`, `testutil.rs`, files under a `tests/` directory, and a file
//! from its first `#[cfg(test)]` on). Then it holds:
//! - leaf modules import only leaf modules, and `store` and `config` import only leaf
//!   modules (`config` owns the types it parses; the subsystems import them from it);
//! - `api` is imported only by `daemon`, `daemon` only by `cli`, `cli` by none;
//! - there is no import loop (strongly connected group) between top-level modules.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Modules that import no subsystem: any module may import them.
const LEAVES: &[&str] = &[
    "clock",
    "components",
    "dns",
    "fsutil",
    "hostfs",
    "ids",
    "lograte",
    "model",
    "net",
    "queue",
    "sys",
    "text",
    "timefmt",
];

/// Who may import the top layers (`main.rs` is its own crate and is not read).
const ONLY_IMPORTED_BY: &[(&str, &[&str])] =
    &[("api", &["daemon"]), ("daemon", &["cli"]), ("cli", &[])];

/// Modules that import only leaves without being leaves themselves: the store and the
/// configuration, each owning the types it keeps or parses.
const IMPORT_ONLY_LEAVES: &[&str] = &["store", "config"];

type Graph = BTreeMap<String, BTreeSet<String>>;

/// Top-level module -> the top-level modules it names, outside test code.
fn graph() -> Graph {
    // Read at run time (cargo sets it) so the test binary can be pointed at another tree.
    let root = std::env::var("CARGO_MANIFEST_DIR");
    let src = Path::new(root.as_deref().unwrap_or(env!("CARGO_MANIFEST_DIR"))).join("src");
    let mut mods = BTreeSet::new();
    for e in std::fs::read_dir(&src).expect("read src/") {
        let e = e.expect("read src/ entry");
        let name = e.file_name().to_string_lossy().into_owned();
        let name = name.strip_suffix(".rs").map(str::to_owned).unwrap_or(name);
        if !["lib", "main", "layering"].contains(&name.as_str()) {
            mods.insert(name);
        }
    }
    let mut g: Graph = mods.iter().map(|m| (m.clone(), BTreeSet::new())).collect();
    let mut stack = vec![src.clone()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).expect("read dir") {
            let path = e.expect("dir entry").path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n != "tests") {
                    stack.push(path);
                }
                continue;
            }
            let rel = path.strip_prefix(&src).expect("under src/");
            let top = rel.components().next().expect("a component");
            let top = top.as_os_str().to_string_lossy();
            let top = top.strip_suffix(".rs").unwrap_or(&top).to_owned();
            let file = path.file_name().map(|n| n.to_string_lossy().into_owned());
            let file = file.unwrap_or_default();
            if !mods.contains(&top)
                || !file.ends_with(".rs")
                || file == "tests.rs"
                || file == "testutil.rs"
            {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("read source");
            let text = text.split("#[cfg(test)]").next().unwrap_or_default();
            for named in crate_paths(text) {
                if named != top && mods.contains(&named) {
                    g.entry(top.clone()).or_default().insert(named);
                }
            }
        }
    }
    g
}

/// The first segment of every `crate::a` path, and of each item of `crate::{a, b::c}`.
fn crate_paths(text: &str) -> Vec<String> {
    let ident = |s: &str| -> String {
        s.trim_start()
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut out = Vec::new();
    let prefix = concat!("crate", "::");
    for (i, _) in text.match_indices(prefix) {
        let rest = &text[i + prefix.len()..];
        if let Some(list) = rest.strip_prefix('{') {
            let mut depth = 0usize;
            let mut start = 0;
            for (j, c) in list.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        out.push(ident(&list[start..j]));
                        break;
                    }
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        out.push(ident(&list[start..j]));
                        start = j + 1;
                    }
                    _ => {}
                }
            }
        } else {
            out.push(ident(rest));
        }
    }
    out.retain(|s| !s.is_empty());
    out
}

/// Strongly connected groups of more than one module (Tarjan).
fn loops(g: &Graph) -> Vec<BTreeSet<String>> {
    struct T<'a> {
        g: &'a Graph,
        next: usize,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<BTreeSet<String>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a str) {
        t.index.insert(v, t.next);
        t.low.insert(v, t.next);
        t.next += 1;
        t.stack.push(v);
        t.on.insert(v);
        let g = t.g;
        for w in g.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !t.index.contains_key(w) {
                visit(t, w);
                let lw = t.low[w];
                let lv = t.low.get_mut(v).expect("visited");
                *lv = (*lv).min(lw);
            } else if t.on.contains(w) {
                let iw = t.index[w];
                let lv = t.low.get_mut(v).expect("visited");
                *lv = (*lv).min(iw);
            }
        }
        if t.low[v] == t.index[v] {
            let mut group = BTreeSet::new();
            while let Some(w) = t.stack.pop() {
                t.on.remove(w);
                group.insert(w.to_owned());
                if w == v {
                    break;
                }
            }
            if group.len() > 1 {
                t.out.push(group);
            }
        }
    }
    let mut t = T {
        g,
        next: 0,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in g.keys() {
        if !t.index.contains_key(v.as_str()) {
            visit(&mut t, v);
        }
    }
    t.out
}

#[test]
fn crate_paths_reads_single_and_grouped_paths() {
    let text = "use crate::a::b;\nuse crate::{c, d::{e, f}, g as h};\nx(crate::i::j());";
    assert_eq!(crate_paths(text), ["a", "c", "d", "g", "i"]);
}

#[test]
fn the_graph_is_read() {
    // Guards the rules below against passing on an empty graph.
    let g = graph();
    assert!(g.len() > 20, "top-level modules: {:?}", g.keys());
    assert!(g["daemon"].contains("api") && g["findings"].contains("store"));
}

#[test]
fn leaves_store_and_config_import_no_subsystem() {
    let g = graph();
    let mut bad = Vec::new();
    for m in LEAVES.iter().chain(IMPORT_ONLY_LEAVES) {
        assert!(g.contains_key(*m), "no module {m}");
        for t in &g[*m] {
            if !LEAVES.contains(&t.as_str()) {
                bad.push(format!("{m} -> {t}"));
            }
        }
    }
    assert!(bad.is_empty(), "imports of a subsystem: {bad:?}");
}

#[test]
fn top_layers_are_imported_only_from_above() {
    let g = graph();
    let mut bad = Vec::new();
    for (m, allowed) in ONLY_IMPORTED_BY {
        for (from, to) in &g {
            if to.contains(*m) && !allowed.contains(&from.as_str()) {
                bad.push(format!("{from} -> {m}"));
            }
        }
    }
    assert!(bad.is_empty(), "imports of a top layer: {bad:?}");
}

#[test]
fn there_is_no_import_loop() {
    // An arrow between two subsystems goes one way: a type both sides need lives in the
    // lower one (or in a leaf), a callback is a trait of the caller's.
    let groups = loops(&graph());
    assert!(groups.is_empty(), "import loops: {groups:?}");
}

#[test]
fn loops_finds_a_loop() {
    // Guards the rule above against a `loops` that finds nothing.
    let mut g = Graph::new();
    for (a, b) in [("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")] {
        g.entry(a.to_owned()).or_default().insert(b.to_owned());
        g.entry(b.to_owned()).or_default();
    }
    let want: BTreeSet<String> = ["a", "b", "c"].map(str::to_owned).into();
    assert_eq!(loops(&g), vec![want]);
}

#[test]
fn every_top_level_module_has_a_row_in_the_architecture_map() {
    // docs/architecture.md is the project's map: a module without a row is a map that
    // fell behind (rows name `name/` or `name.rs`, several to a row allowed).
    let root = std::env::var("CARGO_MANIFEST_DIR");
    let root = Path::new(root.as_deref().unwrap_or(env!("CARGO_MANIFEST_DIR")));
    let map = std::fs::read_to_string(root.join("docs/architecture.md")).expect("the map");
    let rows: Vec<&str> = map.lines().filter(|l| l.starts_with("| `")).collect();
    let mut missing = Vec::new();
    for e in std::fs::read_dir(root.join("src")).expect("read src/") {
        let e = e.expect("entry");
        let name = e.file_name().to_string_lossy().into_owned();
        let spelled = if e.path().is_dir() {
            format!("`{name}/`")
        } else {
            format!("`{name}`")
        };
        let first_cell = |row: &&str| {
            row.split(" | ")
                .next()
                .is_some_and(|c| c.contains(&spelled))
        };
        if name != "lib.rs" && !rows.iter().any(first_cell) {
            missing.push(spelled);
        }
    }
    assert!(
        missing.is_empty(),
        "docs/architecture.md has no row for {missing:?}"
    );
}
