//! No import circle between the files of one top-level module (issue 66), read from the code
//! as `structure.rs` reads it (`code_only`). A file uses another file of its module through a
//! path that names it or an item in it: `crate::module::x`, `super::x`, `self::x`, or a child module's own name (`x::y` in the file
//! that declares `mod x`), in a `use` or in code. A path to an item that the named file only
//! re-exports (`pub use other::Item`) is followed to the file that defines it, and a re-export
//! is a use of its own file only where the file's code names the item too. The module's root
//! file (`mod.rs`) is left out: it declares its files and re-exports them, and they share the
//! types it defines; a circle is between the files below it. Test code is left out too (a test
//! module uses what it tests).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::structure::{code_only, line_of, shown, src};

/// Circles between files that may stay, each with the files of the circle and where the module
/// says why (at most two: issue 66).
const EXPLAINED: &[(&[&str], &str)] = &[];

/// A `use` item: the path it names (from the crate root where it starts with `crate`, `super`
/// or `self`, else as written), the name it binds (`None` for a glob), and whether it is
/// re-exported (`pub`).
#[derive(Debug, PartialEq)]
struct Use {
    path: Vec<String>,
    name: Option<String>,
    public: bool,
    line: usize,
}

/// The tokens of a `use` tree: names, `::`, `{`, `}`, `,` and `*`.
fn use_tokens(tree: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = tree.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_alphanumeric() || c == '_' {
            let mut word = c.to_string();
            while let Some(&n) = chars.peek().filter(|n| n.is_alphanumeric() || **n == '_') {
                word.push(n);
                chars.next();
            }
            out.push(word);
        } else if c == ':' {
            chars.next();
            out.push("::".to_owned());
        } else if !c.is_whitespace() {
            out.push(c.to_string());
        }
    }
    out
}

/// The items of one `use` tree from token `at`, each as (path, bound name).
fn expand(
    t: &[String],
    at: &mut usize,
    prefix: &[String],
    out: &mut Vec<(Vec<String>, Option<String>)>,
) {
    let mut path = prefix.to_vec();
    loop {
        match t.get(*at).map(String::as_str) {
            Some("{") => {
                *at += 1;
                while t.get(*at).is_some_and(|x| x != "}") {
                    expand(t, at, &path, out);
                    if t.get(*at).is_some_and(|x| x == ",") {
                        *at += 1;
                    }
                }
                *at += 1;
                return;
            }
            Some("*") => {
                *at += 1;
                out.push((path, None));
                return;
            }
            Some("self") if !path.is_empty() => {
                *at += 1;
                let name = path.last().cloned();
                out.push((path, name));
                return;
            }
            Some(word) if word != "," && word != "}" => {
                path.push(word.to_owned());
                *at += 1;
                if t.get(*at).is_some_and(|x| x == "::") {
                    *at += 1;
                    continue;
                }
                let mut name = path.last().cloned();
                if t.get(*at).is_some_and(|x| x == "as") {
                    name = t.get(*at + 1).cloned();
                    *at += 2;
                }
                out.push((path, name));
                return;
            }
            _ => return,
        }
    }
}

/// The module path of a file below `daemon/src`: `auth/flow.rs` is `[auth, flow]`,
/// `auth/mod.rs` is `[auth]`.
fn module_path(file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src()).unwrap_or(file).with_extension("");
    let mut path: Vec<String> =
        rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
    if path.last().is_some_and(|l| l == "mod") {
        path.pop();
    }
    path
}

/// `path` from the crate root, as `file` (at `module`) writes it; `None` when it starts
/// elsewhere (another crate, a local name).
fn absolute(
    path: &[String],
    module: &[String],
    children: &BTreeSet<String>,
) -> Option<Vec<String>> {
    let first = path.first()?;
    let (mut base, mut rest) = match first.as_str() {
        "crate" => (Vec::new(), &path[1..]),
        "self" => (module.to_vec(), &path[1..]),
        "super" => (module.to_vec(), path),
        child if children.contains(child) => (module.to_vec(), path),
        _ => return None,
    };
    while rest.first().is_some_and(|s| s == "super") {
        base.pop();
        rest = &rest[1..];
    }
    base.extend(rest.iter().cloned());
    Some(base)
}

/// What one file's code says: its uses, the paths in its code with their lines, and the words
/// outside its `use` statements.
struct Read {
    uses: Vec<Use>,
    paths: Vec<(Vec<String>, usize)>,
    words: BTreeSet<String>,
}

/// The code of `text` without its `#[cfg(test)]` modules.
fn without_tests(code: &str) -> String {
    let mut code = code.to_owned();
    while let Some(at) = code.find("#[cfg(test)]") {
        let after = &code[at..];
        let item_end = match (after.find('{'), after.find(';')) {
            (Some(open), semi) if semi.is_none_or(|s| open < s) => {
                let mut depth = 0;
                (at + open..code.len())
                    .find(|&i| {
                        match code.as_bytes()[i] {
                            b'{' => depth += 1,
                            b'}' => depth -= 1,
                            _ => {}
                        }
                        depth == 0
                    })
                    .map_or(code.len(), |i| i + 1)
            }
            (_, Some(semi)) => at + semi + 1,
            _ => code.len(),
        };
        let blank: String =
            code[at..item_end].chars().map(|c| if c == '\n' { '\n' } else { ' ' }).collect();
        code.replace_range(at..item_end, &blank);
    }
    code
}

fn read_code(code: &str, module: &[String], children: &BTreeSet<String>) -> Read {
    let code = without_tests(code);
    let b = code.as_bytes();
    let is_ident = |x: u8| x.is_ascii_alphanumeric() || x == b'_';
    let mut uses = Vec::new();
    let mut outside = code.clone();
    for (at, _) in code.match_indices("use") {
        if (at > 0 && is_ident(b[at - 1]))
            || !b.get(at + 3).is_some_and(|x| x.is_ascii_whitespace() || *x == b'{')
        {
            continue;
        }
        let Some(end) = code[at..].find(';').map(|e| at + e) else { continue };
        let line_start = code[..at].rfind('\n').map_or(0, |i| i + 1);
        let public = code[line_start..at].trim_start().starts_with("pub");
        let tokens = use_tokens(&code[at + 3..end]);
        let mut items = Vec::new();
        expand(&tokens, &mut 0, &[], &mut items);
        for (path, name) in items {
            if let Some(path) = absolute(&path, module, children) {
                uses.push(Use { path, name, public, line: line_of(&code, at) });
            }
        }
        let blank: String =
            code[at..end].chars().map(|c| if c == '\n' { '\n' } else { ' ' }).collect();
        outside.replace_range(at..end, &blank);
    }
    let mut paths = Vec::new();
    let ob = outside.as_bytes();
    let mut i = 0;
    while i < ob.len() {
        if !is_ident(ob[i]) || (i > 0 && (is_ident(ob[i - 1]) || ob[i - 1] == b':')) {
            i += 1;
            continue;
        }
        let start = i;
        let mut segments = Vec::new();
        loop {
            let word_end = (i..ob.len()).find(|&j| !is_ident(ob[j])).unwrap_or(ob.len());
            segments.push(outside[i..word_end].to_owned());
            i = word_end;
            if outside[i..].starts_with("::") && ob.get(i + 2).is_some_and(|&x| is_ident(x)) {
                i += 2;
            } else {
                break;
            }
        }
        if let Some(path) = absolute(&segments, module, children).filter(|_| segments.len() > 1) {
            paths.push((path, line_of(&outside, start)));
        }
    }
    let words = outside
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
        .map(str::to_owned)
        .collect();
    Read { uses, paths, words }
}

/// The files of the crate by module path, and what each one's code says.
struct Crate {
    files: BTreeMap<Vec<String>, PathBuf>,
    read: BTreeMap<Vec<String>, Read>,
}

impl Crate {
    fn load() -> Crate {
        let mut files = BTreeMap::new();
        for file in crate::layers::rust_files(src()) {
            let test = file.file_name().is_some_and(|n| n == "tests.rs")
                || file.components().any(|c| c.as_os_str() == "tests");
            if !test {
                files.insert(module_path(&file), file);
            }
        }
        let mut read = BTreeMap::new();
        for (module, file) in &files {
            let children: BTreeSet<String> = files
                .keys()
                .filter(|m| m.len() == module.len() + 1 && m.starts_with(module))
                .map(|m| m[module.len()].clone())
                .collect();
            let code = code_only(&std::fs::read_to_string(file).unwrap());
            read.insert(module.clone(), read_code(&code, module, &children));
        }
        Crate { files, read }
    }

    /// The module whose file defines what `path` names: the longest prefix that is a file,
    /// followed through that file's re-exports.
    fn defining(&self, path: &[String], hops: usize) -> Option<&Vec<String>> {
        let (module, _) = self.files.get_key_value(
            (1..=path.len()).rev().map(|n| &path[..n]).find(|p| self.files.contains_key(*p))?,
        )?;
        let rest = &path[module.len()..];
        if let (Some(item), true) = (rest.first(), hops < 8) {
            let export =
                self.read[module].uses.iter().find(|u| u.public && u.name.as_ref() == Some(item));
            if let Some(export) = export {
                let mut through = export.path.clone();
                through.extend(rest[1..].iter().cloned());
                return self.defining(&through, hops + 1).or(Some(module));
            }
        }
        Some(module)
    }

    /// Each file's uses of other files of its own top-level module, with the line of the first.
    fn edges(&self) -> BTreeMap<&Vec<String>, BTreeMap<&Vec<String>, usize>> {
        let mut out: BTreeMap<&Vec<String>, BTreeMap<&Vec<String>, usize>> = BTreeMap::new();
        for (module, read) in &self.read {
            let mut used = Vec::new();
            for u in &read.uses {
                let named = u.name.as_ref().is_none_or(|n| read.words.contains(n));
                if !u.public || (named && u.name.is_some()) {
                    used.push((&u.path, u.line));
                }
            }
            used.extend(read.paths.iter().map(|(p, l)| (p, *l)));
            for (path, line) in used {
                let Some(to) = self.defining(path, 0) else { continue };
                let root = |m: &Vec<String>| m.len() == 1;
                if to != module && to.first() == module.first() && !root(module) && !root(to) {
                    let first = out.entry(module).or_default().entry(to).or_insert(line);
                    *first = (*first).min(line);
                }
            }
        }
        out
    }
}

/// The files of `module` as the failure names them.
fn file_names(c: &Crate, modules: &[&Vec<String>]) -> Vec<String> {
    modules.iter().map(|m| shown(&c.files[*m])).collect()
}

#[test]
fn no_import_circle_between_the_files_of_a_module() {
    let c = Crate::load();
    let edges = c.edges();
    let reach = |from: &Vec<String>| {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from];
        while let Some(m) = stack.pop() {
            for next in edges.get(m).into_iter().flat_map(BTreeMap::keys) {
                if seen.insert(*next) {
                    stack.push(next);
                }
            }
        }
        seen
    };
    let reached: BTreeMap<&Vec<String>, BTreeSet<&Vec<String>>> =
        c.files.keys().map(|m| (m, reach(m))).collect();
    let mut circles: Vec<Vec<&Vec<String>>> = Vec::new();
    for (m, seen) in &reached {
        if !seen.contains(m) || circles.iter().any(|circle| circle.contains(m)) {
            continue;
        }
        circles.push(seen.iter().copied().filter(|n| reached[n].contains(m)).collect());
    }
    let mut found = Vec::new();
    for circle in circles {
        let names = file_names(&c, &circle);
        if EXPLAINED
            .iter()
            .any(|(files, _)| files.iter().copied().eq(names.iter().map(String::as_str)))
        {
            continue;
        }
        let mut lines = vec![format!("{} files: {}", circle.len(), names.join(", "))];
        for from in &circle {
            for (to, line) in &edges[from] {
                if circle.contains(to) {
                    lines.push(format!(
                        "  {}:{line} uses {}",
                        shown(&c.files[*from]),
                        shown(&c.files[*to])
                    ));
                }
            }
        }
        found.push(lines.join("\n"));
    }
    assert!(found.is_empty(), "files of one module that use each other:\n{}", found.join("\n"));
}

#[test]
fn explained_circles_say_where() {
    assert!(EXPLAINED.len() <= 2, "issue 66: at most two circles may stay");
    for (files, why) in EXPLAINED {
        let text =
            std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(why))
                .unwrap();
        assert!(text.contains("circle"), "{why} says why {files:?} use each other");
    }
}

#[test]
fn uses_are_read_in_every_form() {
    let module = vec!["m".to_owned(), "a".to_owned()];
    let children = BTreeSet::from(["kid".to_owned()]);
    let text = "use super::{b, c::{D as E, self}, *};\npub(crate) use crate::m::f::G;\nuse std::fmt;\nuse kid::H;\nfn x() { self::y::z(); super::super::n::P::new(); a::b(); }\n#[cfg(test)]\nmod tests {\n    use super::q;\n}\n";
    let r = read_code(&code_only(text), &module, &children);
    let path = |p: &str| p.split("::").map(str::to_owned).collect::<Vec<_>>();
    let uses: Vec<_> =
        r.uses.iter().map(|u| (u.path.clone(), u.name.clone(), u.public, u.line)).collect();
    assert_eq!(
        uses,
        [
            (path("m::b"), Some("b".to_owned()), false, 1),
            (path("m::c::D"), Some("E".to_owned()), false, 1),
            (path("m::c"), Some("c".to_owned()), false, 1),
            (path("m"), None, false, 1),
            (path("m::f::G"), Some("G".to_owned()), true, 2),
            (path("m::a::kid::H"), Some("H".to_owned()), false, 4),
        ]
    );
    assert_eq!(r.paths, [(path("m::a::y::z"), 5), (path("n::P::new"), 5)]);
    assert!(r.words.contains("x") && !r.words.contains("q"));
}
