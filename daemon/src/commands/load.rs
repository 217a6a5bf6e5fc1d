//! Custom commands from `.toml` files, as Gemini CLI's FileCommandLoader reads them: every
//! `**/*.toml` under a commands folder (hidden files too, links followed), `prompt` required,
//! `description` optional; the name is the path without `.toml`, each segment sanitized and
//! cut at 50 characters, joined by `:`. Each file is parsed again only when it changes.

use parking_lot::Mutex;
use std::collections::{HashMap, HashSet};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use geminid_protocol::common::{Diagnostic, Severity};

use crate::config::files::diagnostic;
use crate::policy::load::position;

/// The largest command file read.
pub(crate) const MAX_COMMAND_FILE: u64 = 1 << 20;
/// Files looked at in one commands folder at most (a folder of a million files, or a link to
/// `/`, stops here, said).
pub(crate) const MAX_FILES: usize = 10_000;

/// One command file as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileCommand {
    /// Its name (`git:commit`).
    pub name: String,
    /// Its description, as shown (sanitized, at most 100 characters).
    pub description: String,
    /// The prompt template.
    pub prompt: String,
    /// The file.
    pub file: PathBuf,
}

/// A segment of a command's name: `[^a-zA-Z0-9_\-.]` become `_`, over 50 characters it is cut
/// to 47 and `...`.
fn segment(s: &str) -> String {
    let clean: String = s
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') { c } else { '_' })
        .collect();
    if clean.chars().count() > 50 {
        let mut cut: String = clean.chars().take(47).collect();
        cut.push_str("...");
        cut
    } else {
        clean
    }
}

/// The command name of `file` under `base`.
pub(crate) fn name_of(base: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(base).unwrap_or(file);
    let mut parts: Vec<String> =
        rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
    if let Some(last) = parts.last_mut()
        && let Some(stem) = last.strip_suffix(".toml")
    {
        *last = stem.to_owned();
    }
    parts.iter().map(|p| segment(p)).collect::<Vec<_>>().join(":")
}

/// Text fit for one line of a list, as Gemini CLI shows descriptions: control and bidi
/// characters removed, whitespace runs made one space, at most `max` characters.
pub(crate) fn for_display(text: &str, max: usize) -> String {
    let unsafe_char = |c: char| {
        let u = c as u32;
        (u <= 0x08)
            || u == 0x0B
            || u == 0x0C
            || (0x0E..=0x1F).contains(&u)
            || (0x7F..=0x9F).contains(&u)
            || matches!(u, 0x200B | 0x200E | 0x200F | 0xFEFF)
            || (0x202A..=0x202E).contains(&u)
            || (0x2066..=0x2069).contains(&u)
    };
    let kept: String = strip_ansi(text).chars().filter(|c| !unsafe_char(*c)).collect();
    let mut out = kept.split_whitespace().collect::<Vec<_>>().join(" ");
    if kept.starts_with(char::is_whitespace) && !out.is_empty() {
        out.insert(0, ' ');
    }
    if kept.ends_with(char::is_whitespace) && !out.is_empty() {
        out.push(' ');
    }
    if out.chars().count() > max {
        let mut cut: String = out.chars().take(max.saturating_sub(3)).collect();
        cut.push_str("...");
        return cut;
    }
    out
}

/// ANSI escape sequences (CSI and OSC) removed.
fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\u{1b}' {
            out.push(c);
            continue;
        }
        match chars.peek() {
            Some('[') => {
                chars.next();
                for d in chars.by_ref() {
                    if ('@'..='~').contains(&d) {
                        break;
                    }
                }
            }
            Some(']') => {
                chars.next();
                while let Some(d) = chars.next() {
                    if d == '\u{7}' || (d == '\u{1b}' && chars.peek() == Some(&'\\')) {
                        if d == '\u{1b}' {
                            chars.next();
                        }
                        break;
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// Parse one command file's text.
pub(crate) fn parse(base: &Path, file: &Path, text: &str) -> Result<FileCommand, Diagnostic> {
    let error = |at: Option<std::ops::Range<usize>>, why: String| {
        let pos = at.map(|r| position(text, r.start));
        diagnostic(Severity::Error, file, pos, format!("{why}; the command is not loaded"))
    };
    let doc = toml_edit::Document::parse(text)
        .map_err(|e| error(e.span(), format!("not valid TOML: {}", e.message().trim())))?;
    let root = doc.as_table();
    let prompt = match root.get("prompt") {
        None => return Err(error(None, "the 'prompt' field is required".into())),
        Some(item) => match item.as_str() {
            Some(p) => p.to_owned(),
            None => {
                return Err(error(item.span(), "the 'prompt' field must be a string".into()));
            }
        },
    };
    let description = match root.get("description") {
        None => None,
        Some(item) => match item.as_str() {
            Some(d) => Some(d.to_owned()),
            None => {
                return Err(error(item.span(), "the 'description' field must be a string".into()));
            }
        },
    };
    if let Err(why) = super::check_braces(&prompt) {
        return Err(error(root.get("prompt").and_then(toml_edit::Item::span), why.to_string()));
    }
    let basename = file.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let description = description
        .filter(|d| !d.is_empty())
        .unwrap_or_else(|| format!("Custom command from {basename}"));
    Ok(FileCommand {
        name: name_of(base, file),
        description: for_display(&description, 100),
        prompt,
        file: file.to_path_buf(),
    })
}

type Parsed = Arc<Result<Arc<FileCommand>, Diagnostic>>;

/// What identifies a file's version without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp(u64, Option<std::time::SystemTime>, u64);

fn stamp(m: &std::fs::Metadata) -> Stamp {
    #[cfg(unix)]
    let ino = std::os::unix::fs::MetadataExt::ino(m);
    #[cfg(not(unix))]
    let ino = 0;
    Stamp(m.len(), m.modified().ok(), ino)
}

/// Parsed command files by path.
#[derive(Debug, Default)]
pub struct Cache {
    files: Mutex<HashMap<PathBuf, (Stamp, Parsed)>>,
    reads: AtomicU64,
}

/// One folder's commands.
#[derive(Debug, Default)]
pub struct Folder {
    /// Its commands, in path order.
    pub commands: Vec<Arc<FileCommand>>,
    /// Files that did not load.
    pub diagnostics: Vec<Diagnostic>,
}

impl Cache {
    /// How many files were read and parsed so far.
    pub fn reads(&self) -> u64 {
        self.reads.load(Ordering::Relaxed)
    }

    fn lock(&self) -> parking_lot::MutexGuard<'_, HashMap<PathBuf, (Stamp, Parsed)>> {
        self.files.lock()
    }

    /// The commands under `dir` (none if it does not exist).
    pub fn folder(&self, dir: &Path) -> Folder {
        let mut out = Folder::default();
        let mut files = Vec::new();
        let mut seen_dirs = HashSet::new();
        let mut pending = vec![dir.to_path_buf()];
        while let Some(d) = pending.pop() {
            // A link back up would walk forever: each real folder once.
            let real = std::fs::canonicalize(&d).unwrap_or_else(|_| d.clone());
            if !seen_dirs.insert(real) {
                continue;
            }
            let Ok(entries) = std::fs::read_dir(&d) else { continue };
            for entry in entries.filter_map(Result::ok) {
                let path = entry.path();
                let Ok(kind) = entry.file_type() else { continue };
                let meta = if kind.is_symlink() { std::fs::metadata(&path).ok() } else { None };
                let is_dir = meta.as_ref().map_or(kind.is_dir(), std::fs::Metadata::is_dir);
                if is_dir {
                    pending.push(path);
                } else if path.extension().is_some_and(|x| x == "toml") {
                    files.push(path);
                }
            }
            if files.len() > MAX_FILES {
                out.diagnostics.push(diagnostic(
                    Severity::Warning,
                    dir,
                    None,
                    format!("more than {MAX_FILES} command files; the rest are not read"),
                ));
                files.truncate(MAX_FILES);
                break;
            }
        }
        files.sort();
        for file in &files {
            match &*self.file(dir, file) {
                Ok(c) => out.commands.push(c.clone()),
                Err(d) => out.diagnostics.push(d.clone()),
            }
        }
        let kept: HashSet<&PathBuf> = files.iter().collect();
        self.lock().retain(|p, _| !p.starts_with(dir) || kept.contains(p));
        out
    }

    fn file(&self, base: &Path, file: &Path) -> Parsed {
        let meta = match std::fs::metadata(file) {
            Ok(m) => m,
            Err(e) => {
                let d = diagnostic(Severity::Error, file, None, format!("cannot be read: {e}"));
                return Arc::new(Err(d));
            }
        };
        let s = stamp(&meta);
        if let Some((old, parsed)) = self.lock().get(file)
            && *old == s
        {
            return parsed.clone();
        }
        self.reads.fetch_add(1, Ordering::Relaxed);
        let parsed: Parsed = Arc::new(read(base, file, &meta).map(Arc::new));
        self.lock().insert(file.to_path_buf(), (s, parsed.clone()));
        parsed
    }
}

fn read(base: &Path, file: &Path, meta: &std::fs::Metadata) -> Result<FileCommand, Diagnostic> {
    let refuse = |why: String| {
        diagnostic(Severity::Error, file, None, format!("{why}; the command is not loaded"))
    };
    if !meta.is_file() {
        return Err(refuse("not a regular file".into()));
    }
    if meta.len() > MAX_COMMAND_FILE {
        return Err(refuse(format!(
            "{} bytes, more than the {} MiB a command file may have",
            meta.len(),
            MAX_COMMAND_FILE >> 20
        )));
    }
    let mut text = String::new();
    std::fs::File::open(file)
        .and_then(|f| f.take(MAX_COMMAND_FILE + 1).read_to_string(&mut text))
        .map_err(|e| refuse(format!("cannot be read: {e}")))?;
    parse(base, file, &text)
}

/// The prompt of one command file, read now.
pub(crate) fn prompt_of(file: &Path) -> Result<String, Diagnostic> {
    let meta = std::fs::metadata(file)
        .map_err(|e| diagnostic(Severity::Error, file, None, format!("cannot be read: {e}")))?;
    read(file.parent().unwrap_or(file), file, &meta).map(|c| c.prompt)
}
