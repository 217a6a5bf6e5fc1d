//! The lock every writer of geminid's own `~/.gemini/geminid/servers.json` takes, the daemon
//! (`mcp/import`) and `gemctl clients connect|disconnect` alike, for the whole of its
//! read-modify-write of that file and of the client's own file: two writers at once would each
//! read the file before the other wrote it, and the later write would lose the earlier one's
//! servers. It is an advisory lock (`flock` on Unix, `LockFileEx` on Windows, through
//! [`std::fs::File::lock`]) on `~/.gemini/geminid/config.lock`, so a writer that dies lets go
//! of it with its last descriptor; the holder writes its process id in the file, for the
//! message of a writer that waited too long.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The lock file's name, in `~/.gemini/geminid/`.
pub const FILE: &str = "config.lock";

/// How long a writer waits for another before it gives up and says who holds the lock.
pub const WAIT: Duration = Duration::from_secs(15);

/// The lock, held until dropped.
#[derive(Debug)]
pub struct ConfigLock {
    _file: File,
}

/// Why the lock was not taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another writer held it for the whole wait.
    #[error(
        "another writer of geminid's servers.json ({holder}) held {} for {}s; nothing was \
         changed: run the command again when it is done",
        path.display(),
        WAIT.as_secs()
    )]
    Busy {
        /// The lock file.
        path: PathBuf,
        /// Who holds it, as its file says.
        holder: String,
    },
    /// The lock file could not be opened or locked.
    #[error("cannot lock {}: {source}", path.display())]
    Io {
        /// The lock file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

impl ConfigLock {
    /// The lock file of the folder holding geminid's servers.json (`~/.gemini/geminid`).
    pub fn path(geminid_dir: &Path) -> PathBuf {
        geminid_dir.join(FILE)
    }

    /// Take the lock if no one holds it: `None` when another writer does.
    pub fn try_take(geminid_dir: &Path) -> Result<Option<Self>, LockError> {
        let path = Self::path(geminid_dir);
        let io = |source| LockError::Io { path: path.clone(), source };
        std::fs::create_dir_all(geminid_dir).map_err(io)?;
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => return Ok(None),
            Err(TryLockError::Error(e)) => return Err(io(e)),
        }
        // Who holds it, for a waiter's message; the lock does not depend on it.
        let _ = file
            .set_len(0)
            .and_then(|()| file.rewind())
            .and_then(|()| write!(file, "pid {}", std::process::id()));
        Ok(Some(Self { _file: file }))
    }

    /// Take the lock, waiting up to [`WAIT`] for another writer (blocking the thread).
    pub fn take(geminid_dir: &Path) -> Result<Self, LockError> {
        let start = Instant::now();
        loop {
            if let Some(lock) = Self::try_take(geminid_dir)? {
                return Ok(lock);
            }
            if start.elapsed() >= WAIT {
                return Err(Self::busy(geminid_dir));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The error for a wait that ran out: the holder as the lock file names it.
    pub fn busy(geminid_dir: &Path) -> LockError {
        let path = Self::path(geminid_dir);
        let mut holder = String::new();
        let _ = File::open(&path).and_then(|mut f| f.read_to_string(&mut holder));
        let holder = match holder.trim() {
            h if h.starts_with("pid ") && h.len() < 32 => h.to_owned(),
            _ => "unknown process".to_owned(),
        };
        LockError::Busy { path, holder }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_taker_waits_for_the_first() -> Result<(), Box<dyn std::error::Error>> {
        let dir = std::env::temp_dir().join(format!("geminid-lock-{}", std::process::id()));
        let first = ConfigLock::try_take(&dir)?;
        assert!(first.is_some());
        // Another descriptor of the same file (as another process would have) is refused.
        assert!(ConfigLock::try_take(&dir)?.is_none());
        let busy = ConfigLock::busy(&dir).to_string();
        assert!(busy.contains(&format!("pid {}", std::process::id())), "{busy}");
        drop(first);
        assert!(ConfigLock::try_take(&dir)?.is_some());
        std::fs::remove_dir_all(&dir)?;
        Ok(())
    }
}
