//! Claiming the control socket: a private directory, a lock file that makes this daemon the only
//! one for the socket, and removal of a socket left behind by a daemon that was killed.
//!
//! Never `try_overwrite` a live socket: the lock decides who owns it, and a connect probe guards
//! against a daemon from a release that did not take the lock.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, Write};
use std::path::{Path, PathBuf};

use interprocess::local_socket::tokio::Listener;
use interprocess::local_socket::{GenericFilePath, ListenerOptions, ToFsName};

/// Why the socket could not be claimed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ListenError {
    /// Another daemon owns the socket.
    #[error("geminid is already running{} on {}; stop it with `gemctl daemon stop`", match pid { Some(p) => format!(" (pid {p})"), None => String::new() }, socket.display())]
    AlreadyRunning {
        /// Its pid, when the lock file names it.
        pid: Option<u32>,
        /// The socket.
        socket: PathBuf,
    },
    /// The socket's directory is not private to this user.
    #[cfg(unix)]
    #[error("refusing to listen: the socket directory {} {problem}; {fix}", dir.display())]
    UnsafeDir {
        /// The directory.
        dir: PathBuf,
        /// What is wrong.
        problem: String,
        /// How to fix it.
        fix: String,
    },
    /// The socket systemd passed lets others connect.
    #[cfg(unix)]
    #[error("refusing the socket systemd passed: {} has mode {mode:o}, which lets other users connect; set SocketMode=0600 in geminid.socket", path.display())]
    OpenSocket {
        /// The socket.
        path: PathBuf,
        /// Its mode bits.
        mode: u32,
    },
    /// Something that is not a socket sits at the socket path.
    #[cfg(unix)]
    #[error("refusing to listen: {} exists and is not a socket; remove it or choose another --socket", .0.display())]
    NotASocket(PathBuf),
    /// An OS call failed.
    #[error("{op} {}: {source}", path.display())]
    Io {
        /// What was being done.
        op: &'static str,
        /// On what.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
}

fn io_err<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> ListenError + 'a {
    move |source| ListenError::Io { op, path: path.to_path_buf(), source }
}

/// A claimed socket: the listener and the lock that keeps it ours. Dropping it removes the
/// socket file (interprocess reclaims the name) and releases the lock.
#[derive(Debug)]
pub(crate) struct Bound {
    /// The listener.
    pub listener: Listener,
    /// The socket path.
    pub socket: PathBuf,
    pub(super) lock: File,
}

/// The lock file that guards `socket` (held until the daemon's process exits).
pub(crate) fn lock_path(socket: &Path, data_dir: &Path) -> PathBuf {
    #[cfg(unix)]
    {
        let _ = data_dir;
        geminid_protocol::socket::lock_path(socket)
    }
    #[cfg(windows)]
    {
        let _ = socket;
        data_dir.join("geminid.lock")
    }
}

/// Claim `socket`, guarded by the lock file at `lock`.
pub(crate) fn bind(socket: &Path, lock: &Path) -> Result<Bound, ListenError> {
    #[cfg(unix)]
    if let Some(dir) = socket.parent().filter(|d| !d.as_os_str().is_empty()) {
        unix::private_dir(dir)?;
    }
    let lock_file = take_lock(lock, socket)?;
    #[cfg(unix)]
    unix::remove_stale(socket)?;
    let name =
        socket.to_fs_name::<GenericFilePath>().map_err(io_err("invalid socket name", socket))?;
    let opts = ListenerOptions::new().name(name).reclaim_name(true);
    #[cfg(unix)]
    let opts = {
        use interprocess::os::unix::local_socket::ListenerOptionsExt;
        opts.mode(0o600)
    };
    let listener = opts.create_tokio().map_err(io_err("cannot listen on", socket))?;
    tracing::info!(socket = %socket.display(), "listening");
    Ok(Bound { listener, socket: socket.to_path_buf(), lock: lock_file })
}

/// Serve the socket systemd passed (socket activation) as a claimed one: its directory must be
/// private and the socket itself closed to other users (the checks a socket of geminid's own
/// making passes), and the lock is taken, so no second daemon serves the same path. Dropping it
/// leaves the socket file to systemd.
#[cfg(unix)]
pub(crate) fn adopt(
    fd: std::os::fd::OwnedFd,
    socket: &Path,
    lock: &Path,
) -> Result<Bound, ListenError> {
    use std::os::unix::fs::PermissionsExt;
    if let Some(dir) = socket.parent().filter(|d| !d.as_os_str().is_empty()) {
        unix::private_dir(dir)?;
    }
    let meta =
        std::fs::metadata(socket).map_err(io_err("cannot read the passed socket", socket))?;
    let mode = meta.permissions().mode() & 0o777;
    // Connecting takes write permission on the socket file.
    if mode & 0o022 != 0 {
        return Err(ListenError::OpenSocket { path: socket.to_path_buf(), mode });
    }
    let lock_file = take_lock(lock, socket)?;
    let listener = interprocess::os::unix::uds_local_socket::tokio::Listener::try_from(fd)
        .map_err(io_err("cannot listen on the passed socket", socket))?;
    tracing::info!(socket = %socket.display(), "listening on the socket systemd passed");
    Ok(Bound { listener: Listener::from(listener), socket: socket.to_path_buf(), lock: lock_file })
}

/// How long a start waits for a lock whose daemon is gone (see [`take_lock`]).
const ORPHANED_LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

/// Whether process `pid` exists (a zombie counts: its parent has not reaped it yet).
#[cfg(unix)]
fn alive(pid: u32) -> bool {
    let Ok(pid) = i32::try_from(pid) else { return false };
    // EPERM: it exists, as another user's process.
    !matches!(
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None),
        Err(nix::errno::Errno::ESRCH)
    )
}

#[cfg(not(unix))]
fn alive(_pid: u32) -> bool {
    true
}

/// Take the exclusive lock and write our pid into it; if another process holds it, report its pid.
fn take_lock(lock: &Path, socket: &Path) -> Result<File, ListenError> {
    let mut opts = OpenOptions::new();
    opts.read(true).write(true).create(true).truncate(false);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    let mut file = opts.open(lock).map_err(io_err("cannot open lock file", lock))?;
    let started = std::time::Instant::now();
    loop {
        match file.try_lock() {
            Ok(()) => break,
            Err(std::fs::TryLockError::WouldBlock) => {
                let mut text = String::new();
                let _ = file.rewind();
                let _ = file.read_to_string(&mut text);
                let pid: Option<u32> = text.trim().parse().ok();
                // A daemon killed while it was starting a server leaves the lock (and its
                // socket) with the child it had just forked, until that child's exec closes
                // them: a moment, which a start right after the kill must wait out. A daemon
                // that is alive holds it for good.
                if pid.is_some_and(|p| !alive(p)) && started.elapsed() < ORPHANED_LOCK_WAIT {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                    continue;
                }
                return Err(ListenError::AlreadyRunning { pid, socket: socket.to_path_buf() });
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(io_err("cannot lock", lock)(e)),
        }
    }
    let write_pid = |f: &mut File| -> io::Result<()> {
        f.set_len(0)?;
        f.rewind()?;
        writeln!(f, "{}", std::process::id())?;
        f.flush()
    };
    write_pid(&mut file).map_err(io_err("cannot write lock file", lock))?;
    Ok(file)
}

#[cfg(unix)]
mod unix {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    use std::path::Path;

    use super::{ListenError, io_err};

    /// Create `dir` (0700) if missing; refuse one that others can reach or that is not ours.
    pub(super) fn private_dir(dir: &Path) -> Result<(), ListenError> {
        if !dir.exists() {
            crate::paths::create_private_dir(dir)
                .map_err(io_err("cannot create socket directory", dir))?;
        }
        let meta = std::fs::metadata(dir).map_err(io_err("cannot read socket directory", dir))?;
        let me = nix::unistd::geteuid().as_raw();
        if meta.uid() != me {
            return Err(ListenError::UnsafeDir {
                dir: dir.to_path_buf(),
                problem: format!("belongs to uid {}, not to you (uid {me})", meta.uid()),
                fix: "choose a directory of your own with --socket or GEMINID_SOCKET".into(),
            });
        }
        let mode = meta.mode() & 0o7777;
        if mode & 0o077 != 0 {
            return Err(ListenError::UnsafeDir {
                dir: dir.to_path_buf(),
                problem: format!("is open to other users (mode {mode:04o})"),
                fix: format!("run `chmod 700 {}` or choose another --socket", dir.display()),
            });
        }
        Ok(())
    }

    /// We hold the lock, so a socket file here belongs to a daemon that is gone, unless a
    /// daemon that never took the lock answers on it.
    pub(super) fn remove_stale(socket: &Path) -> Result<(), ListenError> {
        let meta = match std::fs::symlink_metadata(socket) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(io_err("cannot inspect", socket)(e)),
        };
        if !meta.file_type().is_socket() {
            return Err(ListenError::NotASocket(socket.to_path_buf()));
        }
        if std::os::unix::net::UnixStream::connect(socket).is_ok() {
            return Err(ListenError::AlreadyRunning { pid: None, socket: socket.to_path_buf() });
        }
        std::fs::remove_file(socket).map_err(io_err("cannot remove stale socket", socket))?;
        tracing::info!(socket = %socket.display(), "removed a stale socket left by a previous daemon");
        Ok(())
    }
}
