//! stdio server processes: spawn in their own process group, pump stderr into the server's
//! log, keep stray (non-JSON) stdout lines out of the MCP stream, stop the whole group.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWriteExt, BufReader, DuplexStream};
use tokio::process::{Child, ChildStdin, Command};

use super::log::ServerLog;
use crate::store::{ChildRecord, Store};

/// Bytes buffered between the child's stdout and the MCP client.
const STDOUT_PIPE: usize = 256 * 1024;

/// A running stdio child. Dropping it kills its whole process group.
#[derive(Debug)]
pub struct StdioChild {
    child: Child,
    /// Its pid (and process group id: it leads its own group).
    pub pid: u32,
    store: Option<Store>,
    done: bool,
    stderr_closed: Option<tokio::sync::oneshot::Receiver<()>>,
}

/// The MCP side of a child: what it writes (JSON-RPC lines only) and its stdin.
pub type StdioPipes = (DuplexStream, ChildStdin);

/// Where a child is started and how it is recorded.
#[derive(Debug, Clone, Copy)]
pub struct SpawnContext<'a> {
    /// The server's name (for records and messages).
    pub server: &'a str,
    /// Its log.
    pub log: &'a Arc<ServerLog>,
    /// Where its pid is recorded until it is reaped.
    pub store: Option<&'a Store>,
}

/// Spawn `command` with exactly `env`, in its own process group, and record its pid.
pub async fn spawn(
    command: &str,
    args: &[String],
    env: &BTreeMap<String, String>,
    cwd: Option<&PathBuf>,
    ctx: SpawnContext<'_>,
) -> Result<(StdioChild, StdioPipes), String> {
    let log = ctx.log;
    let mut cmd = Command::new(command);
    cmd.args(args)
        .env_clear()
        .envs(env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if let Some(dir) = cwd {
        cmd.current_dir(dir);
    }
    #[cfg(unix)]
    cmd.process_group(0);
    let child = cmd.spawn().map_err(|e| match (e.kind(), cwd) {
        (std::io::ErrorKind::NotFound, Some(dir)) if !dir.is_dir() => {
            format!("cannot start '{command}': working directory {} does not exist", dir.display())
        }
        (std::io::ErrorKind::NotFound, _) => {
            format!("cannot start '{command}': command not found")
        }
        _ => format!("cannot start '{command}': {e}"),
    })?;
    let pid = child.id().unwrap_or_default();
    if let Some(store) = ctx.store {
        let rec = ChildRecord {
            pid,
            start_time: start_time(pid),
            command: command.to_owned(),
            server: ctx.server.to_owned(),
            daemon_pid: std::process::id(),
        };
        if let Err(e) = store.put_child(&rec).await {
            tracing::warn!(server = ctx.server, pid, error = %e, "could not record a child's pid");
        }
    }
    let (stderr_tx, stderr_rx) = tokio::sync::oneshot::channel();
    let mut child = StdioChild {
        child,
        pid,
        store: ctx.store.cloned(),
        done: false,
        stderr_closed: Some(stderr_rx),
    };
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.child.stdin.take(), child.child.stdout.take(), child.child.stderr.take())
    else {
        return Err(format!("cannot start '{command}': its pipes were not created"));
    };
    let pump_log = log.clone();
    tokio::spawn(async move {
        pump_stderr(stderr, pump_log).await;
        let _ = stderr_tx.send(());
    });
    let (mcp_side, filter_side) = tokio::io::duplex(STDOUT_PIPE);
    tokio::spawn(filter_stdout(stdout, filter_side, log.clone()));
    Ok((child, (mcp_side, stdin)))
}

async fn pump_stderr(stderr: impl AsyncRead + Unpin, log: Arc<ServerLog>) {
    let mut lines = BufReader::new(stderr);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match lines.read_until(b'\n', &mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(_) => log.push("stderr", &String::from_utf8_lossy(&buf)),
        }
    }
}

/// Forward the child's stdout line by line; lines that cannot be JSON-RPC (anything not
/// starting with `{` or `[`) go to the log instead of the MCP client, so a server that prints
/// a banner still works and the banner is not lost.
async fn filter_stdout(stdout: impl AsyncRead + Unpin, mut out: DuplexStream, log: Arc<ServerLog>) {
    let mut reader = BufReader::new(stdout);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match reader.read_until(b'\n', &mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let first = buf.iter().find(|b| !b.is_ascii_whitespace());
        match first {
            None => {}
            Some(b'{' | b'[') if out.write_all(&buf).await.is_err() => break,
            Some(b'{' | b'[') => {}
            Some(_) => log.push(
                "stdout",
                &format!("not JSON-RPC, ignored: {}", String::from_utf8_lossy(&buf).trim_end()),
            ),
        }
    }
    let _ = out.shutdown().await;
}

/// How a child ended, in words.
pub fn describe_exit(status: ExitStatus) -> String {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = status.signal() {
            let name = nix::sys::signal::Signal::try_from(sig).map_or("?", |s| s.as_str());
            return format!("killed by signal {sig} ({name})");
        }
    }
    match status.code() {
        Some(code) => format!("exited with status {code}"),
        None => format!("exited ({status})"),
    }
}

impl StdioChild {
    /// Wait for the child to exit.
    pub async fn wait(&mut self) -> String {
        match self.child.wait().await {
            Ok(status) => describe_exit(status),
            Err(e) => format!("could not be waited for: {e}"),
        }
    }

    /// Wait (up to `limit`) until everything the child wrote to stderr is in the log.
    pub async fn stderr_drained(&mut self, limit: Duration) {
        if let Some(rx) = self.stderr_closed.take() {
            let _ = tokio::time::timeout(limit, rx).await;
        }
    }

    /// Whether it has exited (without waiting), and how.
    pub fn try_exit(&mut self) -> Option<String> {
        self.child.try_wait().ok().flatten().map(describe_exit)
    }

    /// Stop the whole process group: SIGTERM, `grace`, SIGKILL; always reaped. Also run after
    /// the leader died by itself, for anything it left in its group.
    pub async fn stop(mut self, grace: Duration) -> String {
        let how = if let Some(done) = self.try_exit() {
            done
        } else {
            signal_group(self.pid, Signal::Term);
            match tokio::time::timeout(grace, self.child.wait()).await {
                Ok(Ok(status)) => describe_exit(status),
                _ => {
                    signal_group(self.pid, Signal::Kill);
                    let _ = self.child.start_kill();
                    self.wait().await
                }
            }
        };
        // Members of the group that outlived their leader.
        if group_alive(self.pid) {
            signal_group(self.pid, Signal::Term);
            let deadline = tokio::time::Instant::now() + grace;
            while group_alive(self.pid) && tokio::time::Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            signal_group(self.pid, Signal::Kill);
        }
        self.forget();
        how
    }

    fn forget(&mut self) {
        self.done = true;
        if let Some(store) = &self.store
            && let Err(e) = store.remove_child(self.pid)
        {
            tracing::warn!(pid = self.pid, error = %e, "could not forget a child's pid");
        }
    }
}

impl Drop for StdioChild {
    fn drop(&mut self) {
        if !self.done {
            // Dropped without `stop` (an attempt abandoned mid-way): no grace, but no orphans.
            signal_group(self.pid, Signal::Kill);
            let _ = self.child.start_kill();
            let _ = self.child.try_wait();
            self.forget();
        }
    }
}

/// The signals geminid sends.
#[derive(Debug, Clone, Copy)]
pub enum Signal {
    /// Ask to stop.
    Term,
    /// Force.
    Kill,
}

/// Signal process group `pgid`.
#[cfg(unix)]
pub fn signal_group(pgid: u32, sig: Signal) {
    use nix::sys::signal::{Signal as S, killpg};
    let Ok(raw) = i32::try_from(pgid) else { return };
    if raw <= 1 {
        return;
    }
    let sig = match sig {
        Signal::Term => S::SIGTERM,
        Signal::Kill => S::SIGKILL,
    };
    let _ = killpg(nix::unistd::Pid::from_raw(raw), sig);
}

/// Whether any process is left in group `pgid`.
#[cfg(unix)]
pub fn group_alive(pgid: u32) -> bool {
    let Ok(raw) = i32::try_from(pgid) else { return false };
    raw > 1 && nix::sys::signal::killpg(nix::unistd::Pid::from_raw(raw), None).is_ok()
}

/// Windows has no process groups here; `kill_on_drop` and `start_kill` stop the child.
#[cfg(not(unix))]
pub fn signal_group(_pgid: u32, _sig: Signal) {}

/// See the Unix version.
#[cfg(not(unix))]
pub fn group_alive(_pgid: u32) -> bool {
    false
}

/// A process's start time (clock ticks since boot, `/proc/PID/stat` field 22): with the pid,
/// it tells a process apart from a later one that reused the pid.
pub fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may contain spaces and parentheses: skip past the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_time_of_self_is_stable() {
        let me = std::process::id();
        if std::path::Path::new("/proc/self/stat").exists() {
            assert!(start_time(me).is_some());
            assert_eq!(start_time(me), start_time(me));
        }
        assert_eq!(start_time(u32::MAX), None);
    }
}
