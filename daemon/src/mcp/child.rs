//! stdio server processes: spawn in their own process group, pump stderr into the server's
//! log, keep stray (non-JSON) stdout lines out of the MCP stream, stop the whole group.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::Duration;

use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader, ReadBuf};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use super::log::ServerLog;
use crate::store::{ChildRecord, Store};

/// A running stdio child. Dropping it kills its whole process group.
#[derive(Debug)]
pub(crate) struct StdioChild {
    child: Child,
    /// Its pid (and process group id: it leads its own group).
    pub pid: u32,
    store: Option<Store>,
    done: bool,
    /// The mark its processes carry (`marked`).
    mark: String,
    stderr_closed: Option<tokio::sync::oneshot::Receiver<()>>,
}

/// The MCP side of a child: its stdout (tapped for stray lines) and its stdin.
pub(crate) type StdioPipes = (StdoutTap, ChildStdin);

/// Where a child is started and how it is recorded.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SpawnContext<'a> {
    /// The server's name (for records and messages).
    pub server: &'a str,
    /// Its identity (recorded, see `ChildRecord::identity`).
    pub identity: &'a str,
    /// Its log.
    pub log: &'a Arc<ServerLog>,
    /// Where its pid is recorded until it is reaped.
    pub store: Option<&'a Store>,
}

/// Spawn `command` with exactly `env`, in its own process group, and record its pid.
pub(crate) async fn spawn(
    command: &str,
    args: &[String],
    env: &BTreeMap<String, String>,
    cwd: Option<&PathBuf>,
    ctx: SpawnContext<'_>,
) -> Result<(StdioChild, StdioPipes), String> {
    let log = ctx.log;
    // Looked up on the server's own `PATH` here, so that the child is started with
    // `posix_spawn` rather than by forking the daemon (see `proc::resolve`).
    #[cfg(unix)]
    let program = crate::proc::resolve(
        command.as_ref(),
        env,
        cwd.map_or(std::path::Path::new(""), PathBuf::as_path),
    );
    #[cfg(not(unix))]
    let program = command;
    let mut cmd = Command::new(program);
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
    let mark = super::marked::new_mark();
    cmd.env(super::marked::MARK, &mark);
    #[cfg(unix)]
    {
        // Its argv[0] as written, as Gemini CLI's spawn gives it.
        cmd.arg0(command);
        cmd.process_group(0);
    }
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
    super::marked::lead(&mark, pid);
    if let Some(store) = ctx.store {
        let rec = ChildRecord {
            pid,
            start_time: start_time(pid),
            command: command.to_owned(),
            server: ctx.server.to_owned(),
            daemon_pid: std::process::id(),
            identity: Some(ctx.identity.to_owned()),
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
        mark,
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
    let tap = StdoutTap { inner: stdout, log: log.clone(), lines: LineFilter::new() };
    Ok((child, (tap, stdin)))
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

/// What the current stdout line is, as far as it has been read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Line {
    /// Only whitespace so far.
    Start,
    /// Starts with `{` or `[`: JSON-RPC for the MCP client.
    Json,
    /// Anything else: not JSON-RPC; kept for the log.
    Text,
}

/// The child's stdout as the MCP client reads it, unchanged and without an extra task or
/// copy; lines that cannot be JSON-RPC (not starting with `{` or `[`, like a start-up banner)
/// are also written to the server's log. rmcp skips them itself.
#[derive(Debug)]
pub(crate) struct StdoutTap {
    inner: ChildStdout,
    log: Arc<ServerLog>,
    lines: LineFilter,
}

/// Follows stdout line by line to find the lines that are not JSON-RPC.
#[derive(Debug)]
struct LineFilter {
    line: Line,
    text: Vec<u8>,
}

impl LineFilter {
    fn new() -> Self {
        Self { line: Line::Start, text: Vec::new() }
    }

    /// Look at the next bytes; a JSON-RPC line is skipped to its end at once (tool results
    /// can be megabytes), other lines are kept (up to the log's line limit) and logged.
    fn inspect(&mut self, mut bytes: &[u8], log: &ServerLog) {
        while let Some((&b, rest)) = bytes.split_first() {
            if self.line == Line::Json {
                match bytes.iter().position(|&b| b == b'\n') {
                    Some(end) => {
                        bytes = &bytes[end + 1..];
                        self.line = Line::Start;
                        continue;
                    }
                    None => return,
                }
            }
            bytes = rest;
            match (self.line, b) {
                (_, b'\n') => {
                    if self.line == Line::Text {
                        let text = String::from_utf8_lossy(&self.text);
                        log.push("stdout", &format!("not JSON-RPC, ignored: {}", text.trim_end()));
                    }
                    self.text.clear();
                    self.line = Line::Start;
                }
                (Line::Start, b'{' | b'[') => self.line = Line::Json,
                (Line::Start, b) if b.is_ascii_whitespace() => {}
                (Line::Start, b) => {
                    self.line = Line::Text;
                    self.text.push(b);
                }
                (Line::Text, b) if self.text.len() < super::log::LOG_MAX_LINE => self.text.push(b),
                _ => {}
            }
        }
    }
}

impl AsyncRead for StdoutTap {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let poll = Pin::new(&mut this.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = poll {
            this.lines.inspect(&buf.filled()[before..], &this.log);
        }
        poll
    }
}

/// How a child ended, in words.
pub(crate) fn describe_exit(status: ExitStatus) -> String {
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
    pub(crate) async fn wait(&mut self) -> String {
        match self.child.wait().await {
            Ok(status) => describe_exit(status),
            Err(e) => format!("could not be waited for: {e}"),
        }
    }

    /// Wait (up to `limit`) until everything the child wrote to stderr is in the log.
    pub(crate) async fn stderr_drained(&mut self, limit: Duration) {
        if let Some(rx) = self.stderr_closed.take() {
            let _ = tokio::time::timeout(limit, rx).await;
        }
    }

    /// Whether it has exited (without waiting), and how.
    pub(crate) fn try_exit(&mut self) -> Option<String> {
        self.child.try_wait().ok().flatten().map(describe_exit)
    }

    /// Stop the whole process group: SIGTERM, `grace`, SIGKILL; always reaped. Also run after
    /// the leader died by itself, for anything it left in its group.
    pub(crate) async fn stop(mut self, grace: Duration) -> String {
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
        // And those that left the group (setsid) but carry its mark.
        super::marked::stop(&self.mark, self.pid, grace).await;
        self.forget();
        how
    }

    fn forget(&mut self) {
        self.done = true;
        super::marked::forget(&self.mark);
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
            super::marked::kill_now(&self.mark, self.pid);
            let _ = self.child.start_kill();
            let _ = self.child.try_wait();
            self.forget();
        }
    }
}

/// The signals geminid sends.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Signal {
    /// Ask to stop.
    Term,
    /// Force.
    Kill,
}

/// Signal process group `pgid`.
#[cfg(unix)]
pub(crate) fn signal_group(pgid: u32, sig: Signal) {
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
pub(crate) fn group_alive(pgid: u32) -> bool {
    let Ok(raw) = i32::try_from(pgid) else { return false };
    raw > 1 && nix::sys::signal::killpg(nix::unistd::Pid::from_raw(raw), None).is_ok()
}

/// Windows has no process groups here; `kill_on_drop` and `start_kill` stop the child.
#[cfg(not(unix))]
pub(crate) fn signal_group(_pgid: u32, _sig: Signal) {}

/// See the Unix version.
#[cfg(not(unix))]
pub(crate) fn group_alive(_pgid: u32) -> bool {
    false
}

/// A process's start time (clock ticks since boot, `/proc/PID/stat` field 22): with the pid,
/// it tells a process apart from a later one that reused the pid.
pub(crate) fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may contain spaces and parentheses: skip past the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn stray_stdout_lines_are_logged_and_json_lines_skipped() {
        let log = ServerLog::default();
        let mut f = LineFilter::new();
        // Split mid-line, as reads are.
        for chunk in [
            "Server v1 sta",
            "rting\n{\"jsonrpc\":\"2.0\",\"x\":\"a\\nb\"",
            "}\n  \n",
            "  [1]\nbye\n",
        ] {
            f.inspect(chunk.as_bytes(), &log);
        }
        let (lines, _) = log.tail(None);
        let texts: Vec<&str> = lines.iter().map(|l| l.text.as_str()).collect();
        assert_eq!(
            texts,
            ["not JSON-RPC, ignored: Server v1 starting", "not JSON-RPC, ignored: bye"]
        );
    }

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
