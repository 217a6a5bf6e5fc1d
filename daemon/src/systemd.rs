//! Running under systemd, without linking it: the socket systemd passes (`LISTEN_FDS`, socket
//! activation), and the service notifications (`NOTIFY_SOCKET`: `READY=1` once the socket
//! serves, `STATUS=` with the sessions and servers, `WATCHDOG=1` while the event loop turns,
//! `STOPPING=1`). Both follow `sd_listen_fds(3)` and `sd_notify(3)`: a datagram of
//! `KEY=value` lines to the path (or, with a leading `@`, the abstract name) in `NOTIFY_SOCKET`.
//! Outside systemd every call here is a no-op.

#[cfg(unix)]
use std::path::Path;
use std::time::Duration;

/// The variables systemd sets for the daemon alone: children must not inherit them (an MCP
/// server that sees `LISTEN_FDS` or `NOTIFY_SOCKET` could take them for its own).
pub(crate) const PRIVATE_VARS: &[&str] = &[
    "LISTEN_PID",
    "LISTEN_FDS",
    "LISTEN_FDNAMES",
    "NOTIFY_SOCKET",
    "WATCHDOG_PID",
    "WATCHDOG_USEC",
];

/// The first descriptor systemd passes.
#[cfg(unix)]
const LISTEN_FDS_START: i32 = 3;

/// The listening socket systemd passed this process, if it did (`LISTEN_PID` is ours and
/// `LISTEN_FDS` is at least 1; a second one is refused: geminid listens on one socket).
#[cfg(unix)]
pub(crate) fn listen_fd(
    var: impl Fn(&str) -> Option<String>,
) -> Result<Option<std::os::fd::OwnedFd>, String> {
    use std::os::fd::{FromRawFd, OwnedFd};
    let pid = var("LISTEN_PID").and_then(|p| p.trim().parse::<u32>().ok());
    if pid != Some(std::process::id()) {
        return Ok(None);
    }
    let count = var("LISTEN_FDS").and_then(|n| n.trim().parse::<i32>().ok()).unwrap_or(0);
    match count {
        0 => Ok(None),
        1 => {
            let fd = LISTEN_FDS_START;
            if !Path::new(&format!("/proc/self/fd/{fd}")).exists() && cfg!(target_os = "linux") {
                return Err(format!("systemd said it passed a socket, but fd {fd} is not open"));
            }
            // The one unsafe block of the daemon: taking ownership of an inherited descriptor
            // cannot be checked by the compiler.
            #[allow(unsafe_code, reason = "sd_listen_fds(3): fd 3 is handed to this process")]
            // SAFETY: LISTEN_PID names this process, so systemd (or systemd-socket-activate)
            // passed fd 3 open for it to own; while it is open no other descriptor gets its
            // number, nothing else in the daemon refers to it, and this runs once.
            let owned = unsafe { OwnedFd::from_raw_fd(fd) };
            // Ours from here on: not inherited by the servers the daemon starts.
            if let Ok(flags) = nix::fcntl::fcntl(&owned, nix::fcntl::FcntlArg::F_GETFD) {
                let mut flags = nix::fcntl::FdFlag::from_bits_truncate(flags);
                flags.insert(nix::fcntl::FdFlag::FD_CLOEXEC);
                let _ = nix::fcntl::fcntl(&owned, nix::fcntl::FcntlArg::F_SETFD(flags));
            }
            check_listener(&owned)?;
            Ok(Some(owned))
        }
        n => Err(format!(
            "systemd passed {n} sockets; geminid listens on one (one ListenStream= in \
             geminid.socket)"
        )),
    }
}

/// A passed socket must be a listening Unix stream socket.
#[cfg(unix)]
fn check_listener(fd: &std::os::fd::OwnedFd) -> Result<(), String> {
    use nix::sys::socket::{AddressFamily, SockType, SockaddrLike, UnixAddr, getsockname, sockopt};
    use std::os::fd::AsRawFd;
    let ty = nix::sys::socket::getsockopt(fd, sockopt::SockType)
        .map_err(|e| format!("the descriptor systemd passed is no socket: {e}"))?;
    let listening = nix::sys::socket::getsockopt(fd, sockopt::AcceptConn).unwrap_or(false);
    let family = getsockname::<UnixAddr>(fd.as_raw_fd()).ok().and_then(|a| a.family());
    if ty != SockType::Stream || family != Some(AddressFamily::Unix) || !listening {
        return Err("the socket systemd passed is not a listening Unix stream socket \
                    (geminid.socket needs ListenStream=%t/geminid/geminid.sock)"
            .to_owned());
    }
    Ok(())
}

/// The path a passed Unix socket is bound to, if it has one.
#[cfg(unix)]
pub(crate) fn socket_path(fd: &std::os::fd::OwnedFd) -> Option<std::path::PathBuf> {
    use nix::sys::socket::{UnixAddr, getsockname};
    use std::os::fd::AsRawFd;
    let addr = getsockname::<UnixAddr>(fd.as_raw_fd()).ok()?;
    addr.path().map(std::path::Path::to_path_buf)
}

/// Where service notifications go, if systemd asked for them.
#[derive(Debug, Clone)]
pub(crate) struct Notifier {
    #[cfg(unix)]
    target: Option<String>,
    watchdog: Option<Duration>,
}

impl Notifier {
    /// From the environment systemd gave the daemon.
    pub(crate) fn from_env(var: impl Fn(&str) -> Option<String>) -> Self {
        let mine = |pid: Option<String>| {
            pid.and_then(|p| p.trim().parse::<u32>().ok()).is_none_or(|p| p == std::process::id())
        };
        let watchdog = var("WATCHDOG_USEC")
            .and_then(|u| u.trim().parse::<u64>().ok())
            .filter(|u| *u > 0 && mine(var("WATCHDOG_PID")))
            .map(Duration::from_micros);
        Self {
            #[cfg(unix)]
            target: var("NOTIFY_SOCKET").filter(|s| !s.is_empty()),
            watchdog,
        }
    }

    /// Whether systemd listens.
    pub(crate) fn enabled(&self) -> bool {
        #[cfg(unix)]
        return self.target.is_some();
        #[cfg(not(unix))]
        false
    }

    /// How often to send `WATCHDOG=1` (half the interval systemd set), if it set one.
    pub(crate) fn watchdog_every(&self) -> Option<Duration> {
        self.watchdog.filter(|_| self.enabled()).map(|w| w / 2)
    }

    /// Send `state` (newline-separated `KEY=value` lines). Failures are logged, not fatal.
    pub(crate) fn notify(&self, state: &str) {
        #[cfg(unix)]
        if let Some(target) = &self.target
            && let Err(e) = send(target, state)
        {
            tracing::warn!(socket = %target, error = %e, "cannot notify systemd");
        }
        #[cfg(not(unix))]
        let _ = state;
    }
}

#[cfg(unix)]
fn send(target: &str, state: &str) -> std::io::Result<()> {
    use std::os::unix::net::{SocketAddr, UnixDatagram};
    let sock = UnixDatagram::unbound()?;
    let addr = match target.strip_prefix('@') {
        #[cfg(target_os = "linux")]
        Some(name) => {
            use std::os::linux::net::SocketAddrExt;
            SocketAddr::from_abstract_name(name.as_bytes())?
        }
        #[cfg(not(target_os = "linux"))]
        Some(_) => {
            return Err(std::io::Error::other("abstract sockets need Linux"));
        }
        None => SocketAddr::from_pathname(target)?,
    };
    sock.send_to_addr(state.as_bytes(), &addr)?;
    Ok(())
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn notifications_reach_a_path_socket_and_respect_watchdog_pid() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify");
        let listener = std::os::unix::net::UnixDatagram::bind(&path).unwrap();
        let p = path.display().to_string();
        let n = Notifier::from_env(|k| match k {
            "NOTIFY_SOCKET" => Some(p.clone()),
            "WATCHDOG_USEC" => Some("2000000".into()),
            _ => None,
        });
        assert_eq!(n.watchdog_every(), Some(Duration::from_secs(1)));
        n.notify("READY=1\nSTATUS=ok");
        let mut buf = [0u8; 64];
        let len = listener.recv(&mut buf).unwrap();
        assert_eq!(&buf[..len], b"READY=1\nSTATUS=ok");
        // Another process's watchdog is not ours.
        let other = Notifier::from_env(|k| match k {
            "NOTIFY_SOCKET" => Some(p.clone()),
            "WATCHDOG_USEC" => Some("2000000".into()),
            "WATCHDOG_PID" => Some("1".into()),
            _ => None,
        });
        assert_eq!(other.watchdog_every(), None);
        assert!(!Notifier::from_env(|_| None).enabled());
    }

    #[test]
    fn passed_sockets_are_ours_only() {
        let other_pid = |k: &str| match k {
            "LISTEN_PID" => Some("1".to_owned()),
            "LISTEN_FDS" => Some("1".to_owned()),
            _ => None,
        };
        assert!(listen_fd(other_pid).unwrap().is_none());
        let two = |k: &str| match k {
            "LISTEN_PID" => Some(std::process::id().to_string()),
            "LISTEN_FDS" => Some("2".to_owned()),
            _ => None,
        };
        assert!(listen_fd(two).unwrap_err().contains("one ListenStream="));
    }
}
