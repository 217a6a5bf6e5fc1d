//! `@path` imports in context files, inlined as Gemini CLI's memory import processor does
//! (COMPAT: its "tree" format, the default, and `context.importFormat: "flat"`).
//!
//! An import is an `@` at the start of the text or after a space, tab or line break, followed
//! by a path that starts with `.`, `/` or a letter and runs to the next whitespace. One inside
//! a span of backticks (inline code or a fenced block) stays as written. The path is taken
//! against the folder of the file it is written in, and must stay inside the project root of
//! the context file the chain started from (the nearest folder above it with a boundary
//! marker, else its own folder; links resolved): one outside, or a `file://` or `http(s)://`
//! address, is `<!-- Import failed: PATH - Path traversal attempt -->`. A file already
//! inlined further up the same chain is `<!-- File already processed: PATH -->`; one that
//! cannot be read is `<!-- Import failed: PATH - REASON -->` with Node's wording of the error.
//! Imports are followed five deep; below that the text stays as written.

use std::collections::HashSet;
use std::io::ErrorKind;
use std::path::{Component, Path, PathBuf};

use geminid_protocol::config::{ContextImport, ContextImportState};

const MAX_DEPTH: usize = 5;

/// JavaScript's `String.prototype.trim`: Unicode white space and line terminators and the
/// byte order mark, but not U+0085 (Rust's `trim` takes it and leaves U+FEFF).
pub(super) fn js_trim(s: &str) -> &str {
    let ws = |c: char| (c.is_whitespace() && c != '\u{85}') || c == '\u{feff}';
    s.trim_matches(ws)
}

/// Node's `path.resolve` of an absolute path: `.` and `..` taken out without touching the file
/// system.
pub(super) fn lexical(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// `path.join(dir, name)` as Node does it: `name` appended even when it starts with `/`.
pub(super) fn join(dir: &Path, name: &str) -> PathBuf {
    lexical(&dir.join(name.trim_start_matches('/')))
}

/// The real path of `p`, or, for a path that does not exist, its nearest existing ancestor's
/// real path with the rest appended (a dangling link followed to its target).
fn real(p: &Path) -> PathBuf {
    if let Ok(r) = std::fs::canonicalize(p) {
        return r;
    }
    if let Ok(m) = std::fs::symlink_metadata(p)
        && m.file_type().is_symlink()
        && let Ok(target) = std::fs::read_link(p)
    {
        let parent = p.parent().unwrap_or(p);
        let next = lexical(&parent.join(target));
        if next != p {
            return real(&next);
        }
    }
    match (p.parent(), p.file_name()) {
        (Some(parent), Some(name)) => real(parent).join(name),
        _ => p.to_path_buf(),
    }
}

/// The root imports must stay in: the nearest folder at or above `start` holding one of
/// `markers`, else `start`.
fn import_root(start: &Path, markers: &[String]) -> PathBuf {
    let usable = |m: &&String| !Path::new(m.as_str()).is_absolute() && !m.contains("..");
    start
        .ancestors()
        .find(|d| markers.iter().filter(usable).any(|m| d.join(m).exists()))
        .unwrap_or(start)
        .to_path_buf()
}

fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

/// The imports in `text`: (byte offset of the `@`, end of the path, the path).
fn find(text: &str) -> Vec<(usize, usize, &str)> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(at) = text[i..].find('@').map(|k| k + i) {
        if at > 0 && !is_space(b[at - 1]) {
            i = at + 1;
            continue;
        }
        let mut j = at + 1;
        while j < b.len() && !is_space(b[j]) {
            j += 1;
        }
        let path = &text[at + 1..j];
        if path.starts_with(|c: char| c == '.' || c == '/' || c.is_ascii_alphabetic()) {
            out.push((at, j, path));
        }
        i = j + 1;
        if i >= b.len() {
            break;
        }
    }
    out
}

/// The spans of backticks: a run of backticks up to the first run as long (the longest
/// opening that closes at all, as `/(`+)([\s\S]*?)\1/g` matches).
fn code_spans(text: &str) -> Vec<(usize, usize)> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut s = 0;
    'outer: while s < b.len() {
        if b[s] != b'`' {
            s += 1;
            continue;
        }
        let run = b[s..].iter().take_while(|&&c| c == b'`').count();
        for n in (1..=run).rev() {
            let ticks = &text[s..s + n];
            if let Some(k) = text[s + n..].find(ticks) {
                let end = s + n + k + n;
                out.push((s, end));
                s = end;
                continue 'outer;
            }
        }
        s += 1;
    }
    out
}

/// Node's message for a failed `fs.access` (`syscall` `access`) or `readFile` of `path`.
fn node_error(e: &std::io::Error, syscall: &str, path: &Path) -> String {
    let (code, what) = match e.raw_os_error() {
        Some(libc::ENOENT) => ("ENOENT", "no such file or directory"),
        Some(libc::EACCES) => ("EACCES", "permission denied"),
        Some(libc::ENOTDIR) => ("ENOTDIR", "not a directory"),
        Some(libc::EISDIR) => return "EISDIR: illegal operation on a directory, read".to_owned(),
        Some(libc::ENAMETOOLONG) => ("ENAMETOOLONG", "name too long"),
        Some(libc::ELOOP) => ("ELOOP", "too many symbolic links encountered"),
        Some(libc::EPERM) => ("EPERM", "operation not permitted"),
        _ if e.kind() == ErrorKind::NotFound => ("ENOENT", "no such file or directory"),
        _ => return e.to_string(),
    };
    format!("{code}: {what}, {syscall} '{}'", path.display())
}

/// The text of `path` as Node reads it as UTF-8, or Node's message for why not.
fn read(path: &Path) -> Result<String, String> {
    if let Err(e) = std::fs::metadata(path) {
        return Err(node_error(&e, "access", path));
    }
    match std::fs::read(path) {
        Ok(bytes) => Ok(String::from_utf8_lossy(&bytes).into_owned()),
        Err(e) => Err(node_error(&e, "open", path)),
    }
}

/// One context file's imports being processed.
pub(super) struct Importer<'a> {
    real_root: PathBuf,
    /// The imports met, in order.
    pub(super) met: &'a mut Vec<ContextImport>,
}

impl<'a> Importer<'a> {
    /// For the context file `file`, whose project root is found with `markers`.
    pub(super) fn new(file: &Path, markers: &[String], met: &'a mut Vec<ContextImport>) -> Self {
        let dir = file.parent().unwrap_or(file);
        let root = if markers.is_empty() { dir.to_path_buf() } else { import_root(dir, markers) };
        Importer { real_root: real(&root), met }
    }

    fn allowed(&self, path: &str, base: &Path) -> bool {
        let address = ["file://", "http://", "https://"].iter().any(|p| path.starts_with(p));
        if address || path.contains('\0') {
            return false;
        }
        real(&lexical(&base.join(path))).starts_with(&self.real_root)
    }

    fn note(&mut self, path: &str, from: &Path, state: ContextImportState, error: Option<String>) {
        let from = from.display().to_string();
        self.met.push(ContextImport { path: path.to_owned(), from, state, error });
    }

    /// `text` of `file` with its imports inlined ("tree" format).
    pub(super) fn tree(&mut self, text: &str, file: &Path) -> String {
        self.tree_at(text, file, &HashSet::new(), 0)
    }

    fn tree_at(
        &mut self,
        text: &str,
        file: &Path,
        done: &HashSet<PathBuf>,
        depth: usize,
    ) -> String {
        if depth >= MAX_DEPTH {
            return text.to_owned();
        }
        let base = file.parent().unwrap_or(file).to_path_buf();
        let spans = code_spans(text);
        let mut out = String::with_capacity(text.len());
        let mut last = 0;
        for (at, end, path) in find(text) {
            out.push_str(&text[last..at]);
            last = end;
            if spans.iter().any(|&(s, e)| at >= s && at < e) {
                out.push('@');
                out.push_str(path);
                continue;
            }
            if !self.allowed(path, &base) {
                out.push_str(&format!("<!-- Import failed: {path} - Path traversal attempt -->"));
                let why = Some("Path traversal attempt".to_owned());
                self.note(path, file, ContextImportState::Failed, why);
                continue;
            }
            let full = lexical(&base.join(path));
            if done.contains(&full) {
                out.push_str(&format!("<!-- File already processed: {path} -->"));
                self.note(path, file, ContextImportState::Repeated, None);
                continue;
            }
            match read(&full) {
                Ok(inner) => {
                    self.note(path, file, ContextImportState::Inlined, None);
                    let mut next = done.clone();
                    next.insert(full.clone());
                    let inner = self.tree_at(&inner, &full, &next, depth + 1);
                    out.push_str(&format!(
                        "<!-- Imported from: {path} -->\n{inner}\n<!-- End of import from: {path} -->"
                    ));
                }
                Err(why) => {
                    out.push_str(&format!("<!-- Import failed: {path} - {why} -->"));
                    self.note(path, file, ContextImportState::Failed, Some(why));
                }
            }
        }
        out.push_str(&text[last..]);
        out
    }

    /// `text` of `file` and every file it imports, each once, one after the other ("flat"
    /// format: the file itself is named by its folder, as Gemini CLI names it; imports are
    /// taken last first, and one that fails is left out without a word).
    pub(super) fn flat(&mut self, text: &str, file: &Path) -> String {
        let dir = file.parent().unwrap_or(file).to_path_buf();
        let mut files: Vec<(PathBuf, String)> = Vec::new();
        let mut done: HashSet<PathBuf> = HashSet::new();
        self.flat_at(text, &dir, dir.clone(), file, &mut files, &mut done);
        files
            .iter()
            .map(|(p, t)| {
                let p = p.display();
                format!("--- File: {p} ---\n{}\n--- End of File: {p} ---", js_trim(t))
            })
            .collect::<Vec<_>>()
            .join("\n\n")
    }

    fn flat_at(
        &mut self,
        text: &str,
        base: &Path,
        name: PathBuf,
        file: &Path,
        files: &mut Vec<(PathBuf, String)>,
        done: &mut HashSet<PathBuf>,
    ) {
        if !done.insert(name.clone()) {
            return;
        }
        files.push((name, text.to_owned()));
        let spans = code_spans(text);
        for (at, _, path) in find(text).into_iter().rev() {
            if spans.iter().any(|&(s, e)| at >= s && at < e) || !self.allowed(path, base) {
                continue;
            }
            let full = lexical(&base.join(path));
            if done.contains(&full) {
                continue;
            }
            match read(&full) {
                Ok(inner) => {
                    self.note(path, file, ContextImportState::Inlined, None);
                    let dir = full.parent().unwrap_or(&full).to_path_buf();
                    self.flat_at(&inner, &dir, full.clone(), &full, files, done);
                }
                Err(why) => self.note(path, file, ContextImportState::Failed, Some(why)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn imports_are_found_as_gemini_cli_finds_them() {
        let t = "a @./x.md b@y.md @1 @/abs\n@Sub/z.md, `x @./code.md` `@./tick.md` ```\n@./fenced.md\n```";
        let found: Vec<&str> = find(t).iter().map(|f| f.2).collect();
        assert_eq!(found, ["./x.md", "/abs", "Sub/z.md,", "./code.md`", "./fenced.md"]);
        let spans = code_spans(t);
        let at = |p: &str| t.find(p).unwrap_or_default() - 1;
        let inside = |i: usize| spans.iter().any(|&(s, e)| i >= s && i < e);
        assert!(!inside(at("./x.md")) && inside(at("./code.md")) && inside(at("./fenced.md")));
        // An unclosed run of three closes with a shorter one, as the regex backtracks.
        assert_eq!(code_spans("```a``"), [(0, 6)]);
        assert_eq!(js_trim("\u{feff} x \u{85}"), "x \u{85}");
    }
}
