//! The handed gateway under attack (Linux; `../shared/findings/handed-gateway-attack.md`):
//! another process sharing the client's pipe turns blocking on, a hostile `fds=1` connection
//! sends too many descriptors or none, the client closes its stdout, gemctl is killed mid-call.
//! The daemon never blocks on a descriptor it was handed, never keeps one it did not take,
//! and a client that goes has its calls cancelled upstream at once.

use std::os::fd::{AsRawFd as _, OwnedFd};
use std::process::Stdio;
use std::time::{Duration, Instant};

use geminid_protocol::gateway::{Options, open_handing};
use geminid_protocol::session::SessionCreateParams;
use geminid_tests::mcp::stdio;
use geminid_tests::{Daemon, TestHome, eventually};
use nix::fcntl::{FcntlArg, OFlag, fcntl};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncRead, AsyncReadExt as _, AsyncWrite};
use tokio::io::{AsyncWriteExt as _, BufReader};
use tokio::process::{Child, Command};

use super::gateway::settings;
use super::gateway_handed::cancelled;

#[derive(Debug, Clone, Copy)]
pub(super) enum Kind {
    /// Python's `subprocess`.
    Pipes,
    /// Node's `child_process` (Gemini CLI).
    Sockets,
    /// Named FIFOs (a shell's `<fifo >fifo`): relayed, never handed over.
    Fifo,
}

/// `gemctl mcp serve` (with `extra`) on pipes or socket pairs, spoken to line by line.
pub(super) struct Served {
    pub(super) gemctl: Child,
    pub(super) to: Box<dyn AsyncWrite + Unpin + Send>,
    pub(super) from: BufReader<Box<dyn AsyncRead + Unpin + Send>>,
    /// gemctl's own stdin and stdout, held by this process too (as a sibling would).
    pub(super) shared: Vec<OwnedFd>,
    pub(super) next: u64,
}

impl Served {
    pub(super) async fn start(home: &TestHome, kind: Kind, extra: &[&str]) -> anyhow::Result<Self> {
        let mut args = vec!["mcp", "serve"];
        args.extend_from_slice(extra);
        let mut cmd: Command = home.gemctl_cmd(&args).into();
        type Ends = (OwnedFd, OwnedFd, Box<dyn AsyncWrite + Unpin + Send>);
        let (stdin, stdout, to, from): (OwnedFd, OwnedFd, _, Box<dyn AsyncRead + Unpin + Send>) =
            match kind {
                Kind::Pipes => {
                    let (in_r, in_w) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
                    let (out_r, out_w) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
                    let to = tokio::net::unix::pipe::Sender::from_owned_fd(in_w)?;
                    let from = tokio::net::unix::pipe::Receiver::from_owned_fd(out_r)?;
                    let ends: Ends = (in_r, out_w, Box::new(to));
                    (ends.0, ends.1, ends.2, Box::new(from))
                }
                Kind::Sockets => {
                    let (ours_in, theirs_in) = std::os::unix::net::UnixStream::pair()?;
                    let (ours_out, theirs_out) = std::os::unix::net::UnixStream::pair()?;
                    ours_in.set_nonblocking(true)?;
                    ours_out.set_nonblocking(true)?;
                    let to = tokio::net::UnixStream::from_std(ours_in)?;
                    let from = tokio::net::UnixStream::from_std(ours_out)?;
                    (theirs_in.into(), theirs_out.into(), Box::new(to), Box::new(from))
                }
                Kind::Fifo => {
                    use tokio::net::unix::pipe::OpenOptions;
                    let (fifo_in, fifo_out) = (home.root().join("in"), home.root().join("out"));
                    for f in [&fifo_in, &fifo_out] {
                        nix::unistd::mkfifo(f, nix::sys::stat::Mode::S_IRWXU)?;
                    }
                    let to = OpenOptions::new().read_write(true).open_sender(&fifo_in)?;
                    let from = OpenOptions::new().read_write(true).open_receiver(&fifo_out)?;
                    let rw = || std::fs::OpenOptions::new().read(true).write(true).clone();
                    let (stdin, stdout) = (rw().open(&fifo_in)?, rw().open(&fifo_out)?);
                    (stdin.into(), stdout.into(), Box::new(to), Box::new(from))
                }
            };
        let shared = vec![stdin.try_clone()?, stdout.try_clone()?];
        cmd.stdin(Stdio::from(stdin))
            .stdout(Stdio::from(stdout))
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        let gemctl = cmd.spawn()?;
        let mut s = Self { gemctl, to, from: BufReader::new(from), shared, next: 1 };
        let init = json!({ "protocolVersion": "2025-06-18", "capabilities": {},
                           "clientInfo": { "name": "attack", "version": "1" } });
        s.request("initialize", init).await?;
        s.send(json!({ "jsonrpc": "2.0", "method": "notifications/initialized" })).await?;
        // The servers' log messages come through: the wait tool says when it starts.
        s.request("logging/setLevel", json!({ "level": "debug" })).await?;
        Ok(s)
    }

    pub(super) async fn send(&mut self, message: Value) -> anyhow::Result<()> {
        self.to.write_all(format!("{message}\n").as_bytes()).await?;
        Ok(())
    }

    /// Send a request; its id.
    pub(super) async fn ask(&mut self, method: &str, params: Value) -> anyhow::Result<u64> {
        let id = self.next;
        self.next += 1;
        self.send(json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }))
            .await?;
        Ok(id)
    }

    /// The first message that `is` (others skipped), or why none came within 20 s.
    pub(super) async fn until(&mut self, is: impl Fn(&Value) -> bool) -> anyhow::Result<Value> {
        let read = async {
            let mut line = String::new();
            loop {
                line.clear();
                anyhow::ensure!(self.from.read_line(&mut line).await? > 0, "stdout closed");
                let v: Value = serde_json::from_str(&line)?;
                if is(&v) {
                    return Ok(v);
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(20), read)
            .await
            .map_err(|_| anyhow::anyhow!("nothing came within 20 s"))?
    }

    pub(super) async fn request(&mut self, method: &str, params: Value) -> anyhow::Result<Value> {
        let id = self.ask(method, params).await?;
        self.until(|v| v["id"] == id).await
    }

    pub(super) async fn echo(&mut self, text: &str) -> anyhow::Result<()> {
        let params = json!({ "name": "fx__echo", "arguments": { "text": text } });
        let r = self.request("tools/call", params).await?;
        anyhow::ensure!(r["result"]["content"][0]["text"] == text, "{r}");
        Ok(())
    }

    /// Start a call that waits a minute upstream, and return once the server runs it.
    async fn waiting(&mut self) -> anyhow::Result<()> {
        let params = json!({ "name": "fx__wait", "arguments": { "ms": 60000 } });
        self.ask("tools/call", params).await?;
        self.until(|v| {
            v["method"] == "notifications/message"
                && v["params"]["data"].as_str().is_some_and(|d| d.contains("waiting"))
        })
        .await?;
        Ok(())
    }
}

pub(super) async fn started(home: &TestHome) -> anyhow::Result<Daemon> {
    settings(home, json!({ "fx": stdio(&["--rich"]) }))?;
    let daemon = Daemon::start(home, &[]).await?;
    assert!(home.gemctl(&["trust"])?.status.success());
    Ok(daemon)
}

fn set_blocking(fd: &OwnedFd) -> anyhow::Result<()> {
    let flags = OFlag::from_bits_truncate(fcntl(fd, FcntlArg::F_GETFL)?);
    fcntl(fd, FcntlArg::F_SETFL(flags - OFlag::O_NONBLOCK))?;
    Ok(())
}

/// F1: a process sharing the client's pipe (or socket) clears `O_NONBLOCK` on it mid-session.
/// The daemon (one event-loop thread by default) read that very open file, so its next read
/// blocked the thread and every request, `daemon stop` and SIGTERM with it. Seen failing with
/// the descriptors served as received: no answer on the session, and the daemon's status
/// never answered.
#[tokio::test]
async fn a_process_sharing_the_clients_pipe_cannot_block_the_daemon() -> anyhow::Result<()> {
    let home = TestHome::allowing_mcp()?;
    let mut daemon = started(&home).await?;
    for kind in [Kind::Pipes, Kind::Sockets] {
        let mut s = Served::start(&home, kind, &[]).await?;
        s.echo("handed").await?;
        for fd in &s.shared {
            set_blocking(fd)?;
        }
        // The daemon reads the client's stdin after this message, and writes its stdout.
        s.echo("after the flags changed").await.map_err(|e| e.context(format!("{kind:?}")))?;
        let status = tokio::time::timeout(Duration::from_secs(10), async {
            use geminid_protocol::api::DaemonApiClient as _;
            daemon.client().await?.status().await.map_err(anyhow::Error::from)
        });
        status.await.map_err(|_| anyhow::anyhow!("{kind:?}: the daemon does not answer"))??;
        s.echo("still").await?;
    }
    let stop = Instant::now();
    assert!(home.gemctl(&["daemon", "stop"])?.status.success());
    daemon.wait_exit(Duration::from_secs(10)).await?;
    assert!(stop.elapsed() < Duration::from_secs(10));
    Ok(())
}

/// How many descriptors the daemon has open.
pub(super) fn open_fds(daemon: &Daemon) -> usize {
    std::fs::read_dir(format!("/proc/{}/fd", daemon.pid())).map(Iterator::count).unwrap_or(0)
}

pub(super) async fn session(home: &TestHome, daemon: &Daemon) -> anyhow::Result<String> {
    use geminid_protocol::api::SessionApiClient as _;
    let workspace = home.workspace().display().to_string();
    let client = daemon.client().await?;
    Ok(client.create(SessionCreateParams { workspace, ..Default::default() }).await?.id)
}

/// A connection that asked to hand over descriptors, told to send them.
pub(super) async fn asked(
    daemon: &Daemon,
    session: &str,
) -> anyhow::Result<tokio::net::UnixStream> {
    let (mut conn, taken) = open_handing(daemon.socket(), session, &Options::default()).await?;
    anyhow::ensure!(taken, "the daemon did not take the offer");
    let mut ready = [0u8; 1];
    conn.read_exact(&mut ready).await?;
    Ok(conn)
}

/// Until the daemon closes `conn`.
async fn closed_by_daemon(conn: &mut tokio::net::UnixStream) -> anyhow::Result<()> {
    let mut rest = [0u8; 64];
    while conn.read(&mut rest).await? != 0 {}
    Ok(())
}

/// F2: three descriptors where two are taken. The two the kernel had room for were received
/// but never owned, and stayed open in the daemon for good. Seen failing with the old room for
/// two: 2 more descriptors open in the daemon per attempt.
#[tokio::test]
async fn more_descriptors_than_two_leave_none_open_in_the_daemon() -> anyhow::Result<()> {
    let home = TestHome::allowing_mcp()?;
    let daemon = started(&home).await?;
    let session = session(&home, &daemon).await?;
    let before = open_fds(&daemon);
    let devnull = std::fs::File::open("/dev/null")?;
    for n in [3, 64, 253, 1] {
        refused(&daemon, &session, |_| vec![devnull.as_raw_fd(); n]).await?;
    }
    let settled = || async { open_fds(&daemon) <= before };
    assert!(
        eventually(Duration::from_secs(10), settled).await,
        "the daemon had {before} descriptors open and has {} now",
        open_fds(&daemon)
    );
    Ok(())
}

/// F4: a connection that asks to hand over descriptors and never sends them is closed after a
/// few seconds, and does not hold `daemon stop` up. Seen failing without the bound: the
/// connection stayed open (and the daemon's stop waited for it).
#[tokio::test]
async fn a_handover_that_never_comes_is_bounded_and_does_not_hold_the_stop() -> anyhow::Result<()> {
    let home = TestHome::allowing_mcp()?;
    let mut daemon = started(&home).await?;
    let session = session(&home, &daemon).await?;
    let mut silent = asked(&daemon, &session).await?;
    tokio::time::timeout(Duration::from_secs(15), closed_by_daemon(&mut silent))
        .await
        .map_err(|_| anyhow::anyhow!("a handover that never came is still waited for"))??;
    let _silent = asked(&daemon, &session).await?;
    let stop = Instant::now();
    assert!(home.gemctl(&["daemon", "stop"])?.status.success());
    daemon.wait_exit(Duration::from_secs(10)).await?;
    // Less than the 5 s the handover is waited for.
    assert!(stop.elapsed() < Duration::from_secs(4), "the stop took {:?}", stop.elapsed());
    Ok(())
}

/// F3: the client closes its stdout (and keeps its stdin open) while a call waits upstream:
/// the session ends as it did with the relay, and the call is cancelled upstream. Seen failing
/// without the watch of the client's stdout: gemctl never exited and the call ran on.
#[tokio::test]
async fn a_client_closing_its_stdout_ends_the_session_and_cancels_its_call() -> anyhow::Result<()> {
    let home = TestHome::allowing_mcp()?;
    let _daemon = started(&home).await?;
    for kind in [Kind::Pipes, Kind::Sockets] {
        let before = cancelled(&home).await?;
        let mut s = Served::start(&home, kind, &[]).await?;
        s.shared.clear();
        s.waiting().await?;
        let Served { mut gemctl, to, from, .. } = s;
        drop(from);
        let status = tokio::time::timeout(Duration::from_secs(20), gemctl.wait())
            .await
            .map_err(|_| anyhow::anyhow!("{kind:?}: the session did not end"))??;
        assert!(status.success(), "{kind:?}: {status}");
        let seen = || async { cancelled(&home).await.is_ok_and(|n| n > before) };
        assert!(eventually(Duration::from_secs(10), seen).await, "{kind:?}: never cancelled");
        drop(to);
    }
    Ok(())
}

/// F5: gemctl killed mid-call, handed over and relaying: the call is cancelled upstream at
/// once, not after rmcp's 5 s wait for answers that cannot be delivered (and sometimes never:
/// the session was gone by then). Seen failing without the gateway's own token for the
/// client going: the cancel came after 5 s or not at all.
#[tokio::test]
async fn when_gemctl_is_killed_mid_call_its_call_is_cancelled_upstream_at_once()
-> anyhow::Result<()> {
    let home = TestHome::allowing_mcp()?;
    let _daemon = started(&home).await?;
    for mode in [&[][..], &["--relay"][..]] {
        let before = cancelled(&home).await?;
        let mut s = Served::start(&home, Kind::Pipes, mode).await?;
        s.shared.clear();
        s.waiting().await?;
        let killed = Instant::now();
        s.gemctl.kill().await?;
        let seen = || async { cancelled(&home).await.is_ok_and(|n| n > before) };
        assert!(eventually(Duration::from_secs(20), seen).await, "{mode:?}: never cancelled");
        // rmcp waits 5 s for the answers of a client whose input ended.
        let took = killed.elapsed();
        assert!(took < Duration::from_millis(4500), "{mode:?}: cancelled after {took:?}");
        // The client sees its stdout close.
        let end = s.until(|_| false).await.expect_err("stdout stays open");
        assert!(end.to_string().contains("stdout closed"), "{mode:?}: {end}");
    }
    Ok(())
}

/// Sends `fds` with nothing read ahead, as a handover.
fn send_fds(conn: &tokio::net::UnixStream, fds: &[i32]) -> anyhow::Result<()> {
    use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};
    let len = 0u64.to_le_bytes();
    let iov = [std::io::IoSlice::new(&len)];
    sendmsg::<()>(
        conn.as_raw_fd(),
        &iov,
        &[ControlMessage::ScmRights(fds)],
        MsgFlags::empty(),
        None,
    )?;
    Ok(())
}

/// Hands `fds` (stdin and stdout, or any number) on a connection that asked to hand over, and
/// waits until the daemon closes it: refused.
async fn refused(
    daemon: &Daemon,
    session: &str,
    fds: impl Fn(&tokio::net::UnixStream) -> Vec<i32>,
) -> anyhow::Result<()> {
    let mut conn = asked(daemon, session).await?;
    let fds = fds(&conn);
    send_fds(&conn, &fds)?;
    tokio::time::timeout(Duration::from_secs(20), closed_by_daemon(&mut conn))
        .await
        .map_err(|_| anyhow::anyhow!("the daemon took what it was handed"))??;
    Ok(())
}

/// The second attack: a named FIFO (whose open may wait on a FUSE server of the sender's,
/// holding a daemon worker) and the connection's own end handed back to the daemon (which
/// then holds both ends, so the session, its descriptors and its connection slot outlive the
/// sender) are refused, and nothing of them stays open. Seen failing without the checks: the
/// daemon served both. (The FIFO is relayed instead since issue 67: `gateway_refused`.)
#[tokio::test]
async fn a_named_fifo_or_a_connection_to_the_daemon_itself_is_refused() -> anyhow::Result<()> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let home = TestHome::allowing_mcp()?;
    let daemon = started(&home).await?;
    let session = session(&home, &daemon).await?;
    let fifo = home.root().join("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU)?;
    // Read and write, so that neither open waits for the other end.
    let named = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(OFlag::O_NONBLOCK.bits())
        .open(&fifo)?;
    // The relayed session started the session's server (its pipes and pidfd): what must be
    // gone is the FIFO and the connections.
    let held = || {
        let links = std::fs::read_dir(format!("/proc/{}/fd", daemon.pid()))
            .map(|d| d.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok()).collect::<Vec<_>>());
        let links = links.unwrap_or_default();
        let sockets = links.iter().filter(|l| l.to_string_lossy().starts_with("socket:")).count();
        (sockets, links.contains(&fifo))
    };
    let before = held();
    let mut relayed = asked(&daemon, &session).await?;
    send_fds(&relayed, &[named.as_raw_fd(); 2])?;
    let mut said = [0u8; 1];
    relayed.read_exact(&mut said).await?;
    drop(relayed);
    refused(&daemon, &session, |conn| vec![conn.as_raw_fd(); 2]).await?;
    let settled = || async { held().0 <= before.0 && !held().1 };
    assert!(
        eventually(Duration::from_secs(10), settled).await,
        "the daemon had {before:?} sockets (and the FIFO) open and has {:?} now",
        held()
    );
    // gemctl relays a named FIFO instead of handing it over: its client is still served.
    let mut client = Served::start(&home, Kind::Fifo, &[]).await?;
    client.echo("through a FIFO").await?;
    Ok(())
}
