//! The crate's top-level modules form one-way layers (SPEC §13): every `crate::` path in a
//! module's library code points to a module in a lower layer (or a sibling of its own layer),
//! and no chain of imports leads back to where it started.
//!
//! The check reads the sources as text: each `crate::module` path (also inside
//! `use crate::{a::X, b::Y}` groups) outside comments and outside the `#[cfg(test)] mod tests`
//! block at the end of a file is an edge from the file's top-level module to `module`. Test
//! code may reach up (a unit test of the town script uses prompts), library code may not.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers, lowest first. A module may import modules of lower layers and of its own layer
/// (as long as no cycle forms). A top-level module missing here fails the check: place it.
const LAYERS: &[&[&str]] = &[
    // The ground: tunables, the town, memories, time.
    &["settings", "files"],
    &["clock", "world", "memory"],
    // Talking to models (backends, the offline stand-in, the client), then the prompt pipeline.
    &["llm"],
    &["prompt"],
    // Personas and the loop that moves them.
    &["persona"],
    &["cognition"],
    // Talking to personas: the dialogue, its tools and the control API.
    &["dialogue"],
    // Group conversations with attention (SPEC §8) and stage scenes with actors (SPEC §9).
    &["group", "stage"],
    // Building apps, evaluating decisions.
    &["headless", "eval"],
    // What a run leaves behind, and saves.
    &["output", "persist"],
    // Steering the town: the director (its snapshot is a save held in memory).
    &["director"],
    // The window.
    &["render"],
    // Test and benchmark support sits on top; nothing in the library imports it.
    &["testing"],
];

/// An import edge `from → to` with the places that make it.
type Graph = BTreeMap<String, BTreeMap<String, Vec<String>>>;

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|layer| layer.contains(&module))
}

/// The library's top-level modules: the `mod` declarations of `src/lib.rs` (the binary's own
/// modules, declared in `src/main.rs`, are not the library's).
fn top_level_modules(src: &Path) -> BTreeSet<String> {
    let lib = std::fs::read_to_string(src.join("lib.rs")).expect("src/lib.rs is readable");
    lib.lines()
        .filter_map(|line| {
            let line = line.trim();
            let rest = line
                .strip_prefix("pub mod ")
                .or_else(|| line.strip_prefix("mod "))?;
            let name = rest.strip_suffix(';')?;
            name.chars()
                .all(|c| c.is_alphanumeric() || c == '_')
                .then(|| name.to_owned())
        })
        .collect()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("readable folder")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The library code of a file: without its trailing unit-test module, and without comments.
fn library_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let end = text.find("#[cfg(test)]\nmod tests").unwrap_or(text.len());
    text[..end]
        .lines()
        .enumerate()
        .map(|(i, line)| (i + 1, line.split("//").next().unwrap_or("")))
}

/// The top-level modules named by the `crate::` paths of `line` (`crate::a::X`, and each
/// `a` of `crate::{a::X, b}`).
fn crate_paths(line: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // Top-level items of the group, up to its closing brace (one line is enough for
            // rustfmt's output of the groups this crate writes; multi-line groups continue on
            // the next lines, whose first segments are caught below).
            let mut depth = 0usize;
            let mut start = true;
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => start = true,
                    c if start && (c.is_alphanumeric() || c == '_') => {
                        let ident: String = group[i..]
                            .chars()
                            .take_while(|c| c.is_alphanumeric() || *c == '_')
                            .collect();
                        found.push(ident);
                        start = false;
                    }
                    _ => {}
                }
            }
        } else {
            let ident: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            found.push(ident);
        }
    }
    found
}

/// The import graph between top-level modules of the crate at `root`.
fn import_graph(root: &Path) -> (BTreeSet<String>, Graph) {
    let src = root.join("src");
    let modules = top_level_modules(&src);
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut graph = Graph::new();
    for file in files {
        let rel = file.strip_prefix(&src).expect("under src");
        let Some(first) = rel.components().next() else {
            continue;
        };
        let first = first.as_os_str().to_string_lossy();
        let from = first.strip_suffix(".rs").unwrap_or(&first).to_owned();
        if !modules.contains(&from) {
            continue;
        }
        let text = std::fs::read_to_string(&file).expect("readable source");
        let mut in_group = false;
        for (number, line) in library_lines(&text) {
            let mut targets = crate_paths(line);
            // Continuation lines of a multi-line `use crate::{` group.
            if in_group {
                let trimmed = line.trim_start();
                let ident: String = trimmed
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if trimmed[ident.len()..].starts_with("::") {
                    targets.push(ident);
                }
            }
            if line.contains("crate::{") && !line.contains('}') {
                in_group = true;
            } else if in_group && line.contains("};") {
                in_group = false;
            }
            for to in targets {
                if to != from && modules.contains(&to) {
                    graph
                        .entry(from.clone())
                        .or_default()
                        .entry(to)
                        .or_default()
                        .push(format!("src/{}:{number}", rel.display()));
                }
            }
        }
    }
    (modules, graph)
}

/// A cycle of the graph, if it has one (depth-first search with colours).
fn find_cycle(graph: &Graph) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &Graph,
        done: &mut BTreeSet<String>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = stack.iter().position(|n| n == node) {
            let mut cycle = stack[at..].to_vec();
            cycle.push(node.to_owned());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        stack.push(node.to_owned());
        for next in graph.get(node).into_iter().flat_map(|edges| edges.keys()) {
            if let Some(cycle) = visit(next, graph, done, stack) {
                return Some(cycle);
            }
        }
        stack.pop();
        done.insert(node.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|node| visit(node, graph, &mut done, &mut Vec::new()))
}

/// Every problem of the graph: unplaced modules, imports that go up a layer, and a cycle.
fn problems(modules: &BTreeSet<String>, graph: &Graph) -> Vec<String> {
    let mut problems = Vec::new();
    for module in modules {
        if layer_of(module).is_none() {
            problems.push(format!(
                "module `{module}` is in no layer: add it to LAYERS in tests/layers.rs"
            ));
        }
    }
    for (from, edges) in graph {
        for (to, places) in edges {
            if let (Some(a), Some(b)) = (layer_of(from), layer_of(to))
                && b > a
            {
                problems.push(format!(
                    "`{from}` (layer {a}) imports `{to}` (layer {b}, above it) at {}",
                    places.join(", ")
                ));
            }
        }
    }
    if let Some(cycle) = find_cycle(graph) {
        let places: Vec<String> = cycle
            .windows(2)
            .map(|pair| {
                format!(
                    "{} → {}: {}",
                    pair[0], pair[1], graph[&pair[0]][&pair[1]][0]
                )
            })
            .collect();
        problems.push(format!(
            "import cycle {}  ({})",
            cycle.join(" → "),
            places.join("; ")
        ));
    }
    problems
}

#[test]
fn top_level_modules_form_one_way_layers() {
    let (modules, graph) = import_graph(Path::new(env!("CARGO_MANIFEST_DIR")));
    assert!(modules.contains("cognition") && modules.contains("llm"));
    assert!(
        graph
            .get("cognition")
            .is_some_and(|e| e.contains_key("memory")),
        "the reader found no imports at all: {graph:?}"
    );
    let problems = problems(&modules, &graph);
    assert!(
        problems.is_empty(),
        "the layers are broken:\n  {}",
        problems.join("\n  ")
    );
    // The graph, for anyone who runs this with --nocapture.
    for (from, edges) in &graph {
        let to: Vec<&str> = edges.keys().map(String::as_str).collect();
        println!("{from} → {}", to.join(", "));
    }
}

#[test]
fn a_cycle_or_an_upward_import_is_caught() {
    let modules: BTreeSet<String> = ["memory", "cognition", "persona"].map(String::from).into();
    fn edge(graph: &mut Graph, from: &str, to: &str) {
        graph
            .entry(from.into())
            .or_default()
            .insert(to.into(), vec![format!("src/{from}.rs:1")]);
    }
    let mut graph = Graph::new();
    edge(&mut graph, "cognition", "persona");
    edge(&mut graph, "persona", "memory");
    assert!(problems(&modules, &graph).is_empty());
    edge(&mut graph, "memory", "cognition");
    let found = problems(&modules, &graph).join("\n");
    assert!(
        found.contains("`memory` (layer 1) imports `cognition`"),
        "{found}"
    );
    assert!(
        found.contains("import cycle cognition → persona → memory → cognition"),
        "{found}"
    );
}

#[test]
fn paths_in_groups_and_comments() {
    assert_eq!(
        crate_paths("use crate::{clock::SimClock, llm::{LlmClient, Usage}, world};"),
        ["clock", "llm", "world"]
    );
    assert_eq!(
        crate_paths("let x = crate::memory::f(crate::world::g());"),
        ["memory", "world"]
    );
    let text = "use crate::a::X; // crate::b\n/// [`Y`](crate::c::Y)\n#[cfg(test)]\nmod tests { use crate::d; }";
    let lines: Vec<Vec<String>> = library_lines(text).map(|(_, l)| crate_paths(l)).collect();
    assert_eq!(lines, [vec!["a".to_owned()], vec![]]);
}
