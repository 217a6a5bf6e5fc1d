//! The database directory's fences: the lock naming the daemon that holds it, and owner-only
//! permissions on what sled writes, and waiting out sled's own file lock when it is opened again.

use std::path::Path;

use super::StoreError;

/// Make the files sled wrote owner-only (it creates them with the process's umask, usually
/// 0644; the directory is 0700 already, this is the second fence). Best effort.
pub(super) fn owner_only(dir: &Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                let Ok(meta) = entry.metadata() else { continue };
                let mode = if meta.is_dir() { 0o700 } else { 0o600 };
                if meta.is_dir() {
                    stack.push(entry.path());
                }
                if meta.permissions().mode() & 0o777 != mode {
                    let _ = std::fs::set_permissions(
                        entry.path(),
                        std::fs::Permissions::from_mode(mode),
                    );
                }
            }
        }
    }
    #[cfg(not(unix))]
    let _ = dir;
}

/// The lock a daemon holds on its database directory for as long as its process lives
/// (`geminid.db.lock` in it, naming the holder): sled's own lock error names no one.
#[derive(Debug)]
pub(crate) struct DirLock {
    _file: std::fs::File,
}

/// Take the database directory's lock, or say which daemon holds it.
pub(crate) fn lock_dir(dir: &Path, socket: &Path) -> Result<DirLock, StoreError> {
    use std::io::{Read, Seek, Write};
    let path = dir.join("geminid.db.lock");
    let lock_err = |source| StoreError::Lock { path: dir.to_path_buf(), source };
    let mut opts = std::fs::OpenOptions::new();
    opts.read(true).write(true).create(true).truncate(false);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    let mut file = opts.open(&path).map_err(lock_err)?;
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            let holder = holder.trim();
            let holder = if holder.is_empty() { "its pid unknown" } else { holder };
            return Err(StoreError::InUse { path: dir.to_path_buf(), holder: holder.to_owned() });
        }
        Err(std::fs::TryLockError::Error(e)) => return Err(lock_err(e)),
    }
    let who = format!("pid {}, socket {}", std::process::id(), socket.display());
    let write = |f: &mut std::fs::File| -> std::io::Result<()> {
        f.set_len(0)?;
        f.rewind()?;
        writeln!(f, "{who}")?;
        f.flush()
    };
    write(&mut file).map_err(lock_err)?;
    Ok(DirLock { _file: file })
}

/// `open()` again while sled's file lock is busy (a handle's flusher letting go), for `within`.
pub(super) fn lock_waited<T>(
    within: std::time::Duration,
    mut open: impl FnMut() -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    let until = std::time::Instant::now() + within;
    loop {
        let opened = open();
        let busy = |e: &StoreError| e.to_string().contains("could not acquire lock");
        if !opened.as_ref().is_err_and(busy) || std::time::Instant::now() > until {
            return opened;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}
