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
//! Imports are followed five deep; below that the text stays as written. Each file is read
//! as `context_read.rs` reads it (regular files only, capped); past the number of imports or
//! the bytes a listing may read, the import met is failed with the limit named and the ones
//! after it stay as written.

use std::collections::HashSet;
use std::path::{Component, Path, PathBuf};

use geminid_protocol::config::{ContextImport, ContextImportState};

use super::context_read::{
    Budget, MAX_IMPORTS, MAX_IMPORTS_ALL, MAX_TOTAL, Unread, mib, read_within,
};

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
pub(super) fn real(p: &Path) -> PathBuf {
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
/// opening that closes at all, as `/(`+)([\s\S]*?)\1/g` matches), found in one pass: an
/// opening of `r` backticks closes as `n` of them right after itself when `2n <= r`, else
/// only at a later run at least `n` long, so the longest that closes is the longest later run
/// (at most `r`) or `r / 2`, whichever is more.
fn code_spans(text: &str) -> Vec<(usize, usize)> {
    let b = text.as_bytes();
    // The runs (start, length), and the longest from each one on.
    let mut runs: Vec<(usize, usize)> = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'`' {
            let len = b[i..].iter().take_while(|&&c| c == b'`').count();
            runs.push((i, len));
            i += len;
        } else {
            i += 1;
        }
    }
    let mut longest_after = vec![0; runs.len() + 1];
    for k in (0..runs.len()).rev() {
        longest_after[k] = longest_after[k + 1].max(runs[k].1);
    }
    let mut out = Vec::new();
    // The opening: its position, what is left of run `k` from there.
    let (mut k, mut s) = (0, runs.first().map_or(0, |r| r.0));
    while k < runs.len() {
        let r = runs[k].0 + runs[k].1 - s;
        let n = longest_after[k + 1].min(r).max(r / 2);
        if n == 0 {
            k += 1;
            s = runs.get(k).map_or(0, |r| r.0);
            continue;
        }
        if 2 * n <= r {
            out.push((s, s + 2 * n));
            s += 2 * n;
            if s == runs[k].0 + runs[k].1 {
                k += 1;
                s = runs.get(k).map_or(0, |r| r.0);
            }
            continue;
        }
        // The first later run at least `n` long; every run before it is inside the span.
        let mut j = k + 1;
        while runs[j].1 < n {
            j += 1;
        }
        out.push((s, runs[j].0 + n));
        (k, s) = (j, runs[j].0 + n);
        if n == runs[j].1 {
            k += 1;
            s = runs.get(k).map_or(0, |r| r.0);
        }
    }
    out
}

/// Whether `at` is inside one of `spans` (sorted, apart).
fn inside(spans: &[(usize, usize)], at: usize) -> bool {
    let k = spans.partition_point(|&(_, e)| e <= at);
    spans.get(k).is_some_and(|&(s, _)| s <= at)
}

/// One context file's imports being processed.
pub(super) struct Importer<'a> {
    real_root: PathBuf,
    /// The imports met, in order.
    pub(super) met: &'a mut Vec<ContextImport>,
    budget: &'a mut Budget,
    /// Imports this file may still follow.
    left: usize,
    /// A limit was reached: the imports after it stay as written.
    stopped: bool,
}

impl<'a> Importer<'a> {
    /// For the context file `file`, whose project root is found with `markers`.
    pub(super) fn new(
        file: &Path,
        markers: &[String],
        met: &'a mut Vec<ContextImport>,
        budget: &'a mut Budget,
    ) -> Self {
        let dir = file.parent().unwrap_or(file);
        let root = if markers.is_empty() { dir.to_path_buf() } else { import_root(dir, markers) };
        Importer { real_root: real(&root), met, budget, left: MAX_IMPORTS, stopped: false }
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
        self.budget.spend(path.len() + from.len() + error.as_ref().map_or(0, String::len));
        self.met.push(ContextImport { path: path.to_owned(), from, state, error });
    }

    /// Whether another import may be followed; the first one past a limit is failed with the
    /// limit named, and the ones after it are left as written.
    fn may_follow(&mut self, path: &str, file: &Path, out: &mut String) -> bool {
        if self.stopped {
            return false;
        }
        let why = if self.left == 0 {
            format!("more than {MAX_IMPORTS} imports from one context file")
        } else if self.budget.imports == 0 {
            format!("more than {MAX_IMPORTS_ALL} imports from all the context files")
        } else if self.budget.bytes == 0 {
            format!("the context files hold {} MiB together, the most read", mib(MAX_TOTAL))
        } else {
            self.left -= 1;
            self.budget.imports -= 1;
            return true;
        };
        let why = format!("{why}; it and the imports after it are not followed");
        self.mark(out, &format!("<!-- Import failed: {path} - {why} -->"));
        self.note(path, file, ContextImportState::Failed, Some(why));
        self.stopped = true;
        false
    }

    fn mark(&mut self, out: &mut String, text: &str) {
        self.budget.spend(text.len());
        out.push_str(text);
    }

    /// `path` read if it is inside the root and fits what is left, or why not.
    fn read(&mut self, full: &Path) -> Result<String, String> {
        let cap = self.budget.cap();
        let text = read_within(full, Some(&self.real_root), cap).map_err(|e| match e {
            Unread::Folder => "EISDIR: illegal operation on a directory, read".to_owned(),
            Unread::Io(why) => why,
            Unread::Special(what) => format!("{what}, not a regular file: not read"),
            Unread::Outside => "Path traversal attempt".to_owned(),
            Unread::TooBig => self.budget.too_big(cap),
        })?;
        self.budget.spend(text.len());
        Ok(text)
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
            let was_stopped = self.stopped;
            if inside(&spans, at) || !self.may_follow(path, file, &mut out) {
                // As written, but for the import the limit was met at, failed instead.
                if inside(&spans, at) || was_stopped {
                    out.push('@');
                    out.push_str(path);
                }
                continue;
            }
            if !self.allowed(path, &base) {
                self.mark(
                    &mut out,
                    &format!("<!-- Import failed: {path} - Path traversal attempt -->"),
                );
                let why = Some("Path traversal attempt".to_owned());
                self.note(path, file, ContextImportState::Failed, why);
                continue;
            }
            let full = lexical(&base.join(path));
            if done.contains(&full) {
                self.mark(&mut out, &format!("<!-- File already processed: {path} -->"));
                self.note(path, file, ContextImportState::Repeated, None);
                continue;
            }
            match self.read(&full) {
                Ok(inner) => {
                    self.note(path, file, ContextImportState::Inlined, None);
                    let mut next = done.clone();
                    next.insert(full.clone());
                    let inner = self.tree_at(&inner, &full, &next, depth + 1);
                    self.mark(&mut out, &format!("<!-- Imported from: {path} -->\n"));
                    out.push_str(&inner);
                    self.mark(&mut out, &format!("\n<!-- End of import from: {path} -->"));
                }
                Err(why) => {
                    self.mark(&mut out, &format!("<!-- Import failed: {path} - {why} -->"));
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
        self.budget.spend(2 * name.as_os_str().len() + 40);
        files.push((name, text.to_owned()));
        let spans = code_spans(text);
        for (at, _, path) in find(text).into_iter().rev() {
            if inside(&spans, at) || !self.allowed(path, base) {
                continue;
            }
            let full = lexical(&base.join(path));
            if done.contains(&full) || !self.may_follow(path, file, &mut String::new()) {
                continue;
            }
            match self.read(&full) {
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
        assert!(!inside(&spans, at("./x.md")) && inside(&spans, at("./code.md")));
        assert!(inside(&spans, at("./fenced.md")));
        // An unclosed run of three closes with a shorter one, as the regex backtracks.
        assert_eq!(code_spans("```a``"), [(0, 6)]);
        assert_eq!(js_trim("\u{feff} x \u{85}"), "x \u{85}");
    }

    /// The regex's way, one opening at a time (quadratic): what the one pass must give.
    fn code_spans_slowly(text: &str) -> Vec<(usize, usize)> {
        let b = text.as_bytes();
        let (mut out, mut s) = (Vec::new(), 0);
        'outer: while s < b.len() {
            if b[s] != b'`' {
                s += 1;
                continue;
            }
            let run = b[s..].iter().take_while(|&&c| c == b'`').count();
            for n in (1..=run).rev() {
                if let Some(k) = text[s + n..].find(&text[s..s + n]) {
                    out.push((s, s + 2 * n + k));
                    s += 2 * n + k;
                    continue 'outer;
                }
            }
            s += 1;
        }
        out
    }

    #[test]
    fn code_spans_in_one_pass_are_the_regex_spans() {
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..3000 {
            let len = (seed % 40) as usize;
            let text: String = (0..len)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    if seed.is_multiple_of(3) { 'x' } else { '`' }
                })
                .collect();
            assert_eq!(code_spans(&text), code_spans_slowly(&text), "{text:?}");
        }
    }
}
