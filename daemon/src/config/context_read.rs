//! Reading a context file or an import, bounded: each file is opened once, without waiting
//! (`O_NONBLOCK`), and only a regular file is read (a FIFO or a device never is: one may wait
//! forever, another never end); what was opened must be inside the folder it may be read
//! from (its real path, the descriptor's, so a link swapped meanwhile cannot lead out); and
//! no more than [`MAX_FILE`] is read of one file, nor [`MAX_TOTAL`] of all a listing's
//! files, imports included, nor more than [`MAX_IMPORTS`] imports followed from one file.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

/// Node's message for a failed `fs.access` (`syscall` `access`) or `readFile` of `path`.
fn node_error(e: &std::io::Error, syscall: &str, path: &Path) -> String {
    match code(e) {
        Some(("EISDIR", _)) => "EISDIR: illegal operation on a directory, read".to_owned(),
        Some((code, what)) => format!("{code}: {what}, {syscall} '{}'", path.display()),
        None => e.to_string(),
    }
}

/// Node's code for an error, and its words.
#[cfg(unix)]
fn code(e: &std::io::Error) -> Option<(&'static str, &'static str)> {
    use nix::libc;
    Some(match e.raw_os_error() {
        Some(libc::ENOENT) => ("ENOENT", "no such file or directory"),
        Some(libc::EACCES) => ("EACCES", "permission denied"),
        Some(libc::ENOTDIR) => ("ENOTDIR", "not a directory"),
        Some(libc::EISDIR) => ("EISDIR", ""),
        Some(libc::ENAMETOOLONG) => ("ENAMETOOLONG", "name too long"),
        Some(libc::ELOOP) => ("ELOOP", "too many symbolic links encountered"),
        Some(libc::EPERM) => ("EPERM", "operation not permitted"),
        _ if e.kind() == ErrorKind::NotFound => ("ENOENT", "no such file or directory"),
        _ => return None,
    })
}

#[cfg(not(unix))]
fn code(e: &std::io::Error) -> Option<(&'static str, &'static str)> {
    Some(match e.kind() {
        ErrorKind::NotFound => ("ENOENT", "no such file or directory"),
        ErrorKind::PermissionDenied => ("EACCES", "permission denied"),
        _ => return None,
    })
}

/// The most of one file read (Gemini CLI reads any size; a shared daemon does not).
pub(super) const MAX_FILE: u64 = 4 << 20;
/// The most text all the context files of a listing hold together, imports and their marks
/// included.
pub(super) const MAX_TOTAL: u64 = 8 << 20;
/// The most imports followed from one context file, and from all of a listing's.
pub(super) const MAX_IMPORTS: usize = 500;
pub(super) const MAX_IMPORTS_ALL: usize = 2000;

pub(super) fn mib(n: u64) -> u64 {
    n >> 20
}

/// What a listing may still read, shared by all its context files.
pub(super) struct Budget {
    pub(super) bytes: u64,
    pub(super) imports: usize,
}

impl Default for Budget {
    fn default() -> Self {
        Budget { bytes: MAX_TOTAL, imports: MAX_IMPORTS_ALL }
    }
}

impl Budget {
    pub(super) fn spend(&mut self, n: usize) {
        self.bytes = self.bytes.saturating_sub(n as u64);
    }

    /// Why a file of more than `cap` bytes (the least of the per-file cap and what is left)
    /// is not read.
    pub(super) fn too_big(&self, cap: u64) -> String {
        if cap >= MAX_FILE {
            format!("larger than {} MiB, the most read of one context file", mib(MAX_FILE))
        } else {
            format!(
                "more than is left of the {} MiB all context files may hold together",
                mib(MAX_TOTAL)
            )
        }
    }

    pub(super) fn cap(&self) -> u64 {
        MAX_FILE.min(self.bytes)
    }
}

/// Why a file was not read.
pub(super) enum Unread {
    /// A folder (Gemini CLI skips one named as a context file without a word).
    Folder,
    /// Gone, or could not be opened or read: Node's message.
    Io(String),
    /// Not a regular file (a FIFO, a device, a socket): never opened or read, as reading one
    /// may wait forever or never end.
    Special(&'static str),
    /// It (a link's target) is outside `root`.
    Outside,
    /// Larger than the cap it was read with.
    TooBig,
}

fn special(t: std::fs::FileType) -> Option<&'static str> {
    if t.is_file() || t.is_dir() {
        return None;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return Some("a FIFO");
        } else if t.is_char_device() || t.is_block_device() {
            return Some("a device");
        } else if t.is_socket() {
            return Some("a socket");
        }
    }
    Some("not a regular file")
}

/// Where the open `file` (opened as `path`) is: the kernel's name for its descriptor, or
/// else `path`'s real path when that is still the same file.
#[cfg(unix)]
fn opened_at(file: &std::fs::File, meta: &std::fs::Metadata, path: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    use std::os::unix::io::AsRawFd;
    if let Ok(p) = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())) {
        return Some(p);
    }
    let real = std::fs::canonicalize(path).ok()?;
    let now = std::fs::metadata(&real).ok()?;
    (now.dev() == meta.dev() && now.ino() == meta.ino()).then_some(real)
}

/// Where `path` is, on a system without descriptors' names: its real path.
#[cfg(not(unix))]
fn opened_at(_file: &std::fs::File, _meta: &std::fs::Metadata, path: &Path) -> Option<PathBuf> {
    std::fs::canonicalize(path).ok()
}

/// Opened without waiting on a FIFO's writer (`O_NONBLOCK`) or taking a terminal.
#[cfg(unix)]
fn open(path: &Path) -> std::io::Result<std::fs::File> {
    use nix::libc;
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
}

#[cfg(not(unix))]
fn open(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::File::open(path)
}

/// The text of `path` as Node reads it as UTF-8, when it is a regular file whose real path is
/// inside `root` (already real; `None`: anywhere, for the user's own files) and it holds at
/// most `cap` bytes. The file is opened once,
/// without waiting (`O_NONBLOCK`), and what was opened is checked: its type, where it is, its
/// size; a link changed meanwhile cannot lead elsewhere.
pub(super) fn read_within(path: &Path, root: Option<&Path>, cap: u64) -> Result<String, Unread> {
    use std::io::Read;
    let before = std::fs::metadata(path).map_err(|e| Unread::Io(node_error(&e, "access", path)))?;
    if before.is_dir() {
        return Err(Unread::Folder);
    }
    if let Some(what) = special(before.file_type()) {
        return Err(Unread::Special(what));
    }
    let file = open(path).map_err(|e| Unread::Io(node_error(&e, "open", path)))?;
    let meta = file.metadata().map_err(|e| Unread::Io(node_error(&e, "open", path)))?;
    if meta.is_dir() {
        return Err(Unread::Folder);
    }
    if let Some(what) = special(meta.file_type()) {
        return Err(Unread::Special(what));
    }
    if let Some(root) = root
        && !opened_at(&file, &meta, path).is_some_and(|p| p.starts_with(root))
    {
        return Err(Unread::Outside);
    }
    if meta.len() > cap {
        return Err(Unread::TooBig);
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    (&file)
        .take(cap + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Unread::Io(node_error(&e, "read", path)))?;
    if bytes.len() as u64 > cap {
        return Err(Unread::TooBig);
    }
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}
