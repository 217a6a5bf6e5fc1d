//! The layout of gemctl's sources, held: every file stays under 600 lines, the files use each
//! other without a circle (a file A that uses B while B, directly or through others, uses A),
//! and main.rs's map names every folder and file at the top. Read from the sources: the paths
//! each file names (`crate::a::b`, `super::`, `self::`, its own `mod` children, and the
//! `crate::{a, b::c}` groups), outside comments and its `mod tests`, each taken to the deepest
//! file it reaches.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every `.rs` file below `dir`.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
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

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Each file's module path: `main.rs` is the crate, `a/mod.rs` and `a.rs` are `a`.
fn modules() -> BTreeMap<Vec<String>, PathBuf> {
    let src = src();
    let mut out = BTreeMap::new();
    for file in rust_files(&src) {
        let rel = file.strip_prefix(&src).unwrap().with_extension("");
        let mut path: Vec<String> =
            rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
        if path.last().is_some_and(|l| l == "mod") || path == ["main"] {
            path.pop();
        }
        out.insert(path, file);
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The identifier at the start of `s`.
fn ident(s: &str) -> &str {
    &s[..s.find(|c: char| !is_ident(c)).unwrap_or(s.len())]
}

/// `a::b::c` at the start of `s`, as its names, and what follows it.
fn chain(s: &str) -> (Vec<&str>, &str) {
    let mut names = vec![ident(s)];
    let mut rest = &s[names[0].len()..];
    while let Some(after) = rest.strip_prefix("::") {
        let next = ident(after);
        if next.is_empty() {
            break;
        }
        names.push(next);
        rest = &after[next.len()..];
    }
    (names, rest)
}

/// The code of a file as the test reads it: without its `mod tests`, its comment lines, and
/// with `super::` inside an inline module (`mod unix { ... }`) read as the file itself.
fn code(text: &str) -> String {
    let text = text.split("#[cfg(test)]\nmod tests {").next().unwrap_or_default();
    let mut code: String = text
        .lines()
        .map(|l| if l.trim_start().starts_with("//") { "" } else { l })
        .collect::<Vec<_>>()
        .join("\n");
    let mut from = 0;
    while let Some(at) = code[from..].find("mod ").map(|i| i + from) {
        from = at + 4;
        let name = ident(&code[from..]);
        if name.is_empty() || !code[from + name.len()..].starts_with(" {") {
            continue;
        }
        let open = from + name.len() + 1;
        let mut depth = 0;
        let mut close = code.len();
        for (i, c) in code[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 1 => {
                    close = open + i;
                    break;
                }
                '}' => depth -= 1,
                _ => {}
            }
        }
        let inner = code[open..close].replace("super::", "self::");
        code.replace_range(open..close, &inner);
    }
    code
}

/// The module paths `text` (the file of module `at`) names, each in full.
fn named_paths(at: &[String], text: &str) -> Vec<Vec<String>> {
    let code = code(text);
    let children: BTreeSet<&str> = code
        .lines()
        .filter_map(|l| {
            let l = l.trim_start();
            let l = l.strip_prefix("pub ").or_else(|| l.strip_prefix("pub(crate) ")).unwrap_or(l);
            let name = ident(l.strip_prefix("mod ")?);
            l[4 + name.len()..].starts_with(';').then_some(name)
        })
        .collect();
    let mut out = Vec::new();
    for (i, _) in code.char_indices() {
        if code[..i].ends_with(|c: char| is_ident(c) || c == ':') {
            continue;
        }
        let (names, rest) = chain(&code[i..]);
        let base: Vec<String> = match names[0] {
            "crate" => vec![],
            "self" => at.to_vec(),
            "super" => at[..at.len().saturating_sub(1)].to_vec(),
            c if children.contains(c) => [at, &[c.to_owned()]].concat(),
            _ => continue,
        };
        let tail: Vec<String> = names[1..].iter().map(|n| (*n).to_owned()).collect();
        let Some(group) = rest.strip_prefix("::{") else {
            // A bare `crate` (`pub(crate)`) or `mod kid;` names no file of its own.
            if !tail.is_empty() {
                out.push([base, tail].concat());
            }
            continue;
        };
        // Each name at the group's own depth: `crate::{a, b::c}`.
        let mut depth = 1;
        let mut expect = true;
        for (j, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 1 => break,
                '}' => depth -= 1,
                ',' if depth == 1 => expect = true,
                c if depth == 1 && expect && is_ident(c) => {
                    let (more, _) = chain(&group[j..]);
                    let more: Vec<String> = more.iter().map(|n| (*n).to_owned()).collect();
                    out.push([base.clone(), tail.clone(), more].concat());
                    expect = false;
                }
                _ => {}
            }
        }
    }
    out
}

/// Which files each file uses (itself left out).
fn uses() -> BTreeMap<PathBuf, BTreeSet<PathBuf>> {
    let modules = modules();
    let mut out = BTreeMap::new();
    for (at, file) in &modules {
        let text = std::fs::read_to_string(file).unwrap();
        let mut used = BTreeSet::new();
        for path in named_paths(at, &text) {
            let deepest = (0..=path.len()).rev().find_map(|n| modules.get(&path[..n]));
            if let Some(target) = deepest.filter(|t| *t != file) {
                used.insert(target.clone());
            }
        }
        out.insert(file.clone(), used);
    }
    out
}

#[test]
fn no_file_reaches_600_lines() {
    let long: Vec<String> = modules()
        .values()
        .filter_map(|f| {
            let n = std::fs::read_to_string(f).unwrap().lines().count();
            (n >= 600).then(|| format!("{}: {n} lines", f.display()))
        })
        .collect();
    assert!(long.is_empty(), "split these by what they do:\n{}", long.join("\n"));
}

#[test]
fn files_use_each_other_without_a_circle() {
    let uses = uses();
    let src = src();
    let short = |p: &Path| p.strip_prefix(&src).unwrap_or(p).display().to_string();
    fn walk<'a>(
        f: &'a Path,
        uses: &'a BTreeMap<PathBuf, BTreeSet<PathBuf>>,
        path: &mut Vec<&'a Path>,
        done: &mut BTreeSet<&'a Path>,
    ) -> Option<Vec<&'a Path>> {
        if let Some(i) = path.iter().position(|p| *p == f) {
            return Some([&path[i..], &[f]].concat());
        }
        if !done.insert(f) {
            return None;
        }
        path.push(f);
        for next in uses.get(f).into_iter().flatten() {
            if let Some(circle) = walk(next, uses, path, done) {
                return Some(circle);
            }
        }
        path.pop();
        None
    }
    let mut done = BTreeSet::new();
    for f in uses.keys() {
        if let Some(circle) = walk(f, &uses, &mut Vec::new(), &mut done) {
            let names: Vec<String> = circle.iter().map(|p| short(p)).collect();
            panic!("files that use each other: {}", names.join(" -> "));
        }
    }
}

#[test]
fn main_rs_maps_every_folder_and_file() {
    let src = src();
    let main = std::fs::read_to_string(src.join("main.rs")).unwrap();
    let map: String =
        main.lines().filter_map(|l| l.strip_prefix("//!")).collect::<Vec<_>>().join("\n");
    let mut missing = Vec::new();
    for e in std::fs::read_dir(&src).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        let shown = if p.is_dir() { format!("`{name}/`") } else { format!("`{name}`") };
        if name != "main.rs" && !map.contains(&shown) {
            missing.push(shown);
        }
    }
    assert!(missing.is_empty(), "main.rs's module doc does not map {}", missing.join(", "));
}

#[test]
fn paths_are_read_in_every_form() {
    let at = vec!["top".to_owned(), "act".to_owned()];
    let text = "mod kid;\nuse crate::a::b;\n// crate::c\nuse crate::{d, e::{f, g}, h::i};\nuse super::state::Top;\nfn x() { self::y(); kid::z(); pub(crate) fn w() {} }\n#[cfg(test)]\nmod tests {\n    use crate::j;\n}\n";
    let got: Vec<String> = named_paths(&at, text).iter().map(|p| p.join("::")).collect();
    assert_eq!(
        got,
        ["a::b", "d", "e", "h::i", "top::state::Top", "top::act::y", "top::act::kid::z"]
    );
    let inline = "mod unix {\n    use super::Input;\n}\n";
    let got: Vec<String> = named_paths(&at, inline).iter().map(|p| p.join("::")).collect();
    assert_eq!(got, ["top::act::Input"]);
}
