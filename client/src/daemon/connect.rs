//! Reaching the daemon: connect (with the hello handshake), and start it when none answers.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use geminid_protocol::client::Client;
use geminid_protocol::client::{ConnectError, ConnectOptions, connect};
use geminid_protocol::daemon::HelloResult;

/// How long `gemctl` waits for a daemon it started to answer.
pub const DAEMON_START_TIMEOUT: Duration = Duration::from_secs(10);
/// How long `gemctl daemon stop` waits for the daemon to exit.
pub const DAEMON_STOP_TIMEOUT: Duration = Duration::from_secs(15);
const POLL_INTERVAL: Duration = Duration::from_millis(20);

/// Environment variable naming the `geminid` binary to start.
pub const GEMINID_BIN_ENV: &str = "GEMINID_BIN";

pub fn options() -> ConnectOptions {
    ConnectOptions::new("gemctl", env!("CARGO_PKG_VERSION"))
}

/// Connect to a running daemon.
pub async fn connect_running(socket: &Path) -> Result<(Client, HelloResult), ConnectError> {
    connect(socket, &options()).await
}

/// Connect, starting the daemon first if none answers and `autostart` allows it.
pub async fn connect_or_start(
    socket: &Path,
    autostart: bool,
) -> anyhow::Result<(Client, HelloResult)> {
    match connect_running(socket).await {
        Ok(c) => Ok(c),
        Err(ConnectError::NotRunning { .. }) if autostart => {
            start(socket, Some(AUTOSTART_IDLE_EXIT)).await?;
            Ok(connect_running(socket).await?)
        }
        Err(e @ ConnectError::NotRunning { .. }) => {
            Err(anyhow::Error::new(e).context("not starting it because of --no-autostart"))
        }
        Err(e) => Err(e.into()),
    }
}

/// The `geminid` to start: `$GEMINID_BIN`, else the one next to this `gemctl`, else `PATH`.
pub fn geminid_binary() -> PathBuf {
    if let Some(p) = std::env::var_os(GEMINID_BIN_ENV).filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let name = format!("geminid{}", std::env::consts::EXE_SUFFIX);
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|d| d.join(&name)))
        .filter(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from(name))
}

/// Where a daemon started by gemctl writes its log: next to its socket.
pub fn log_path(socket: &Path) -> PathBuf {
    let mut p = socket.as_os_str().to_owned();
    p.push(".log");
    PathBuf::from(p)
}

/// How long a daemon a command started on its own stays with nothing to do (no client, no
/// attached session, no server running): it is started again when needed.
pub const AUTOSTART_IDLE_EXIT: Duration = Duration::from_secs(30 * 60);

/// Start `geminid` detached on `socket` and wait until it answers; with `idle_exit`, it leaves
/// after that long with nothing to do (`geminid --idle-exit`).
pub async fn start(socket: &Path, idle_exit: Option<Duration>) -> anyhow::Result<HelloResult> {
    // A daemon that no longer answers may still be shutting down (it gives up its socket
    // first, its lock last); one started before it exits would find the lock taken.
    if !wait_until(DAEMON_STOP_TIMEOUT, || !lock_held(socket)).await {
        bail!(
            "the previous geminid on {} is still shutting down after {:?}",
            socket.display(),
            DAEMON_STOP_TIMEOUT
        );
    }
    let bin = geminid_binary();
    // Absolute, since the daemon does not run in this folder.
    let socket = &std::path::absolute(socket)
        .with_context(|| format!("cannot resolve the socket path {}", socket.display()))?;
    let log = log_path(socket);
    if let Some(dir) = socket.parent().filter(|d| !d.as_os_str().is_empty() && !d.exists()) {
        let mut b = std::fs::DirBuilder::new();
        b.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut b, 0o700);
        b.create(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let mut opts = std::fs::OpenOptions::new();
    opts.create(true).append(true);
    // The log can hold what servers print on stderr: the owner's only.
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
    let log_file =
        opts.open(&log).with_context(|| format!("cannot open the daemon log {}", log.display()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let _ = log_file.set_permissions(std::fs::Permissions::from_mode(0o600));
    }
    // Where this run's lines begin: the file keeps earlier daemons' lines (audit C3).
    let start_at = log_file.metadata().map_or(0, |m| m.len());
    let mut cmd = std::process::Command::new(&bin);
    // Stderr to the log as well, for what is written before the daemon opens it (a bad flag).
    cmd.arg("--socket")
        .arg(socket)
        .arg("--log-file")
        .arg(&log)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log_file);
    if let Some(after) = idle_exit {
        cmd.arg("--idle-exit").arg(humantime::format_duration(after).to_string());
    }
    // A folder of its own, never the one this command runs in (a repository just cloned,
    // whose `.git/config` a git run there would read; issue 64, item 2): the socket's, which
    // is the user's alone (made 0700 above when missing).
    cmd.current_dir(socket.parent().filter(|d| d.is_dir()).unwrap_or(Path::new("/")));
    // Its own process group, so a Ctrl-C in this terminal does not reach it.
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let mut child = cmd.spawn().with_context(|| {
        format!("cannot start {} (set {GEMINID_BIN_ENV} to its path)", bin.display())
    })?;
    let deadline = Instant::now() + DAEMON_START_TIMEOUT;
    loop {
        match connect_running(socket).await {
            Ok((_, hello)) => return Ok(hello),
            Err(ConnectError::NotRunning { .. }) => {}
            // The socket a killed daemon left can still be held by a child it was forking
            // (until that child's exec closes it): a connection there is reset. The new daemon
            // replaces that socket once it has the lock, so wait for it, up to the deadline.
            Err(ConnectError::Handshake { .. } | ConnectError::Io { .. })
                if Instant::now() < deadline => {}
            Err(e) => return Err(e.into()),
        }
        if let Some(status) = child.try_wait()? {
            bail!("geminid exited ({status}) before it answered:\n{}", log_tail(&log, start_at));
        }
        if Instant::now() >= deadline {
            bail!(
                "geminid (pid {}) did not answer on {} within {:?}; its log is {}",
                child.id(),
                socket.display(),
                DAEMON_START_TIMEOUT,
                log.display()
            );
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

/// Whether a daemon's process, running or still shutting down, holds the lock of `socket`.
/// Always false on Windows, where the lock is in the daemon's data directory.
pub fn lock_held(socket: &Path) -> bool {
    #[cfg(unix)]
    {
        use geminid_protocol::socket::{lock_held, lock_path};
        lock_held(&lock_path(socket))
    }
    #[cfg(windows)]
    {
        let _ = socket;
        false
    }
}

/// Wait until the daemon on `socket` has gone: nothing answers there any more and its process
/// has exited (it releases the socket first, its database and lock last).
pub async fn wait_stopped(socket: &Path) -> anyhow::Result<()> {
    if !wait_until(DAEMON_STOP_TIMEOUT, || !socket.exists() && !lock_held(socket)).await {
        bail!("geminid is still running on {} after {:?}", socket.display(), DAEMON_STOP_TIMEOUT);
    }
    Ok(())
}

/// Poll `done` until it holds (true) or `limit` has passed (false).
async fn wait_until(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while !done() {
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
    true
}

/// The last lines this run wrote to the log (from byte `start_at`).
fn log_tail(log: &Path, start_at: u64) -> String {
    let bytes = std::fs::read(log).unwrap_or_default();
    // A file shorter than where this run began was rotated at its start: all of it is this run's.
    let from = usize::try_from(start_at).ok().filter(|&at| at <= bytes.len()).unwrap_or(0);
    let text = String::from_utf8_lossy(&bytes[from..]);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(10)..].join("\n")
}
