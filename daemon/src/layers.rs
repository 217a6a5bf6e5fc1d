//! The layers of docs/ARCHITECTURE.md ("Layers"), held: each top-level module of the daemon is
//! in one layer, uses only modules of its layer or below, and the imports between modules have
//! no cycle. Read from the sources (`crate::x` paths outside comments and test modules), so a
//! new import that breaks a layer fails here with the file and line that made it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Each module's layer, from the table under "## Layers" in docs/ARCHITECTURE.md.
fn layers() -> BTreeMap<String, u32> {
    let doc = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/ARCHITECTURE.md");
    let text = std::fs::read_to_string(doc).unwrap();
    let table = text.split("\n## Layers").nth(1).expect("ARCHITECTURE.md has a Layers section");
    let mut out = BTreeMap::new();
    for row in table.lines().take_while(|l| !l.starts_with("## ")) {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let Some(layer) = cells.get(1).and_then(|c| c.parse::<u32>().ok()) else { continue };
        for module in cells[2].split(',').map(|m| m.trim().trim_matches('`')) {
            let before = out.insert(module.to_owned(), layer);
            assert!(before.is_none(), "ARCHITECTURE.md lists `{module}` in two layers");
        }
    }
    out
}

/// Every `.rs` file below `dir`.
pub(crate) fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                files.push(p);
            }
        }
    }
    files
}

/// The daemon's top-level modules, each with its files.
fn modules() -> BTreeMap<String, Vec<PathBuf>> {
    let src = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/src"));
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(src).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            out.insert(name, rust_files(&path));
        } else if path.extension().is_some_and(|x| x == "rs")
            && !["lib", "main", "layers", "structure", "circles"].contains(&name.as_str())
        {
            out.insert(name, vec![path]);
        }
    }
    out
}

/// The first names of the `crate::` paths in `text` (`crate::a::b` and `crate::{a, b::c}`),
/// each with its line: comments and a trailing `mod tests { ... }` left out.
fn crate_paths(text: &str) -> Vec<(String, usize)> {
    let text = text.split("#[cfg(test)]\nmod tests {").next().unwrap_or_default();
    let code: String = text
        .lines()
        .map(|l| if l.trim_start().starts_with("//") { "" } else { l })
        .collect::<Vec<_>>()
        .join("\n");
    let ident = |s: &str| -> String {
        s.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect()
    };
    let mut out = Vec::new();
    for (at, _) in code.match_indices("crate::") {
        let line = code[..at].matches('\n').count() + 1;
        let rest = &code[at + "crate::".len()..];
        let Some(group) = rest.strip_prefix('{') else {
            out.push((ident(rest), line));
            continue;
        };
        // The names at the group's own depth: after its `{` and after each of its commas.
        let (mut depth, mut expect) = (1, true);
        for (i, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 1 => break,
                '}' => depth -= 1,
                ',' if depth == 1 => expect = true,
                c if depth == 1 && expect && (c.is_alphanumeric() || c == '_') => {
                    out.push((ident(&group[i..]), line));
                    expect = false;
                }
                _ => {}
            }
        }
    }
    out
}

#[test]
fn every_module_uses_only_its_layer_and_below_without_cycles() {
    let layers = layers();
    let modules = modules();
    let listed: BTreeSet<&String> = layers.keys().collect();
    let present: BTreeSet<&String> = modules.keys().collect();
    assert_eq!(listed, present, "ARCHITECTURE.md's Layers table and daemon/src differ");

    let mut edges: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    let mut upward = Vec::new();
    for (module, files) in &modules {
        for file in files {
            if file.file_name().is_some_and(|n| n == "tests.rs")
                || file.components().any(|c| c.as_os_str() == "tests")
            {
                continue;
            }
            let text = std::fs::read_to_string(file).unwrap();
            for (used, line) in crate_paths(&text) {
                let Some((used, &layer)) = layers.get_key_value(&used) else { continue };
                if used == module {
                    continue;
                }
                edges.entry(module).or_default().insert(used);
                if layer > layers[module] {
                    let file = file.strip_prefix(env!("CARGO_MANIFEST_DIR")).unwrap_or(file);
                    upward.push(format!(
                        "daemon{}:{line}: `{module}` (layer {}) uses `{used}` (layer {layer})",
                        file.display(),
                        layers[module]
                    ));
                }
            }
        }
    }
    assert!(upward.is_empty(), "imports above their layer:\n{}", upward.join("\n"));

    // No cycle, even within a layer: a depth-first walk that meets a module on its own path.
    fn walk<'a>(
        m: &'a str,
        edges: &BTreeMap<&'a str, BTreeSet<&'a str>>,
        path: &mut Vec<&'a str>,
        done: &mut BTreeSet<&'a str>,
    ) {
        if let Some(i) = path.iter().position(|p| *p == m) {
            panic!("modules that use each other: {} -> {m}", path[i..].join(" -> "));
        }
        if !done.insert(m) {
            return;
        }
        path.push(m);
        for next in edges.get(m).into_iter().flatten() {
            walk(next, edges, path, done);
        }
        path.pop();
    }
    let mut done = BTreeSet::new();
    for m in edges.keys() {
        walk(m, &edges, &mut Vec::new(), &mut done);
    }
}

#[test]
fn paths_are_read_in_both_forms() {
    let text = "use crate::a::b;\n// crate::c\nuse crate::{d, e::{f, g}, h};\nfn x() { crate::i(); }\n#[cfg(test)]\nmod tests {\n    use crate::j;\n}\n";
    let names: Vec<String> = crate_paths(text).into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["a", "d", "e", "h", "i"]);
    assert_eq!(crate_paths(text)[1].1, 3, "the line of a group");
}
