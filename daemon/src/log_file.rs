//! `--log-file`: the daemon's own log in a file that is bounded in size. Past `--log-max-size`
//! the file is renamed `FILE.1` (replacing the one before) and a new `FILE` begins, so at most
//! two files of about that size exist. Rotation happens between whole log lines: the log layer
//! writes each event with one call.
//!
//! Stderr is pointed at the current file too (Unix), so that a panic's message or anything
//! else written to stderr lands beside the log lines instead of in a file that was rotated away.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// The smallest size accepted: one log line with its fields must fit.
pub(crate) const MIN_MAX_SIZE: u64 = 4 << 10;

/// The log file, rotated by size. Wrap it in a `Mutex` to give it to the log layer.
#[derive(Debug)]
pub(crate) struct RotatingLog {
    path: PathBuf,
    /// `None`: never rotated.
    max: Option<u64>,
    file: File,
    len: u64,
    /// Point stderr at the current file (the daemon; not a test process).
    #[cfg_attr(not(unix), allow(dead_code, reason = "stderr is pointed at the file on Unix only"))]
    stderr: bool,
}

/// Where the previous file goes: `FILE.1`.
pub(crate) fn rotated_path(path: &Path) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(".1");
    PathBuf::from(p)
}

fn open_append(path: &Path) -> io::Result<File> {
    let mut opts = OpenOptions::new();
    opts.create(true).append(true);
    // The log names servers, sessions and workspaces: the owner's only.
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
    opts.open(path)
}

impl RotatingLog {
    /// Open (append to) `path`, rotating first when it is already past `max`, and point stderr
    /// at it.
    pub(crate) fn open(path: &Path, max: Option<u64>) -> io::Result<Self> {
        let file = open_append(path)?;
        let len = file.metadata()?.len();
        let mut log = Self { path: path.to_owned(), max, file, len, stderr: true };
        if log.is_full(1) {
            log.rotate()?;
        } else {
            log.point_stderr_here();
        }
        Ok(log)
    }

    fn is_full(&self, incoming: usize) -> bool {
        self.max.is_some_and(|max| self.len > 0 && self.len.saturating_add(incoming as u64) > max)
    }

    fn rotate(&mut self) -> io::Result<()> {
        std::fs::rename(&self.path, rotated_path(&self.path))?;
        self.file = open_append(&self.path)?;
        self.len = 0;
        self.point_stderr_here();
        Ok(())
    }

    fn point_stderr_here(&self) {
        #[cfg(unix)]
        if self.stderr
            && let Err(e) = nix::unistd::dup2_stderr(&self.file)
        {
            // Not fatal: the log lines still go to the file.
            let _ = writeln!(&self.file, "geminid: cannot point stderr at the log file: {e}");
        }
    }
}

impl Write for RotatingLog {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.is_full(buf.len())
            && let Err(e) = self.rotate()
        {
            // Keep writing to the full file rather than lose lines; say why once per line.
            let _ = writeln!(self.file, "geminid: cannot rotate {}: {e}", self.path.display());
            self.len = 0;
        }
        let n = self.file.write(buf)?;
        self.len += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn past_the_size_the_file_moves_to_dot_1_and_a_new_one_begins() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.log");
        std::fs::write(&path, "from an earlier run\n").unwrap();
        let file = open_append(&path).unwrap();
        let len = file.metadata().unwrap().len();
        let mut log = RotatingLog { path: path.clone(), max: Some(50), file, len, stderr: false };
        let line = b"0123456789012345678\n"; // 20 bytes
        log.write_all(line).unwrap(); // 40: fits
        assert!(!rotated_path(&path).exists());
        log.write_all(line).unwrap(); // 60 > 50: rotates first
        assert_eq!(std::fs::read(rotated_path(&path)).unwrap().len(), 40);
        assert_eq!(std::fs::read(&path).unwrap(), line);
        for _ in 0..5 {
            log.write_all(line).unwrap();
        }
        // Never more than two files, each at most the size (lines are not split).
        assert!(std::fs::read(&path).unwrap().len() <= 50);
        assert!(std::fs::read(rotated_path(&path)).unwrap().len() <= 50);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
    }

    #[test]
    fn unlimited_never_rotates() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.log");
        let file = open_append(&path).unwrap();
        let mut log = RotatingLog { path: path.clone(), max: None, file, len: 0, stderr: false };
        for _ in 0..100 {
            log.write_all(b"a line of the log\n").unwrap();
        }
        assert!(!rotated_path(&path).exists());
    }
}
