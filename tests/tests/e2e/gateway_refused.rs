//! A handover the daemon refuses (issue 67): gemctl is told why. Descriptors it cannot take
//! (its own limit on open files, a kind it does not serve) are relayed instead on the same
//! connection, so the user's client keeps working; an exchange it does not trust ends gemctl
//! with an error that names the cause and the fix. Refused descriptors are closed off the
//! event loop.

use std::os::fd::{AsRawFd as _, OwnedFd};
use std::process::Stdio;
use std::time::{Duration, Instant};

use geminid_protocol::gateway::HandRefused;
use geminid_tests::{Daemon, TestHome};
use nix::fcntl::OFlag;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::net::UnixStream;

use super::gateway_handed_attack::{asked, session, started};

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"refused","version":"1"}}}"#;

/// Hands `fds` with [`INITIALIZE`] as what was read ahead, as gemctl does; `between` runs
/// after the descriptors are sent and before the read-ahead is.
async fn hand(conn: &mut UnixStream, fds: &[i32], between: impl FnOnce()) -> anyhow::Result<()> {
    use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};
    let first = format!("{INITIALIZE}\n");
    let len = (first.len() as u64).to_le_bytes();
    let iov = [std::io::IoSlice::new(&len)];
    let rights = [ControlMessage::ScmRights(fds)];
    sendmsg::<()>(conn.as_raw_fd(), &iov, &rights, MsgFlags::empty(), None)?;
    between();
    conn.write_all(first.as_bytes()).await?;
    Ok(())
}

/// The daemon's line saying why it did not take them.
async fn told(conn: &mut BufReader<UnixStream>) -> anyhow::Result<HandRefused> {
    let mut line = String::new();
    let read = tokio::time::timeout(Duration::from_secs(20), conn.read_line(&mut line));
    anyhow::ensure!(read.await?? > 0, "the daemon closed the connection without a word");
    Ok(serde_json::from_str(&line)?)
}

/// The next message on the relayed connection.
async fn next(conn: &mut BufReader<UnixStream>) -> anyhow::Result<Value> {
    let mut line = String::new();
    let read = tokio::time::timeout(Duration::from_secs(20), conn.read_line(&mut line));
    anyhow::ensure!(read.await?? > 0, "the relayed connection closed");
    Ok(serde_json::from_str(&line)?)
}

/// Speak MCP on the relayed connection (the initialize was read ahead): initialized, then an
/// echo, answered.
async fn relayed_session_works(conn: &mut BufReader<UnixStream>) -> anyhow::Result<()> {
    let init = next(conn).await?;
    anyhow::ensure!(init["id"] == 1 && init["result"].is_object(), "{init}");
    let echo = json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/call",
                       "params": { "name": "fx__echo", "arguments": { "text": "relayed" } } });
    let initialized = json!({ "jsonrpc": "2.0", "method": "notifications/initialized" });
    conn.get_mut().write_all(format!("{initialized}\n{echo}\n").as_bytes()).await?;
    loop {
        let v = next(conn).await?;
        if v["id"] == 2 {
            anyhow::ensure!(v["result"]["content"][0]["text"] == "relayed", "{v}");
            return Ok(());
        }
    }
}

/// Two pipes, as a client's stdin and stdout: (stdin's read end, stdout's write end, and the
/// two other ends).
fn pipes() -> anyhow::Result<[OwnedFd; 4]> {
    let (in_r, in_w) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
    let (out_r, out_w) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
    Ok([in_r, out_w, in_w, out_r])
}

/// The lowest descriptor number the daemon has free: with its limit of open files there, it
/// can open none.
fn lowest_free(daemon: &Daemon) -> anyhow::Result<u64> {
    let open: std::collections::HashSet<u64> =
        std::fs::read_dir(format!("/proc/{}/fd", daemon.pid()))?
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .collect();
    Ok((0..).find(|n| !open.contains(n)).unwrap_or(0))
}

/// Set the daemon's soft limit of open files (`prlimit`, util-linux).
fn limit_files(daemon: &Daemon, soft: &str) -> anyhow::Result<()> {
    let pid = daemon.pid().to_string();
    let set = format!("--nofile={soft}:");
    let status = std::process::Command::new("prlimit").args(["--pid", &pid, &set]).status()?;
    anyhow::ensure!(status.success(), "prlimit {set}: {status}");
    Ok(())
}

/// The daemon at its limit of open files when the descriptors come (the kernel cuts them
/// short): it says so and relays the session on the connection instead, and the client is
/// served. Seen failing before: the connection was closed without a word ("not two
/// descriptors"), and gemctl ended as if the session had.
#[tokio::test]
async fn a_handover_past_the_daemons_open_file_limit_is_relayed_instead() -> anyhow::Result<()> {
    let home = TestHome::allowing_mcp()?;
    let daemon = started(&home).await?;
    let session = session(&home, &daemon).await?;
    let soft = std::fs::read_to_string(format!("/proc/{}/limits", daemon.pid()))?
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .and_then(|l| l.split_whitespace().nth(3).map(str::to_owned))
        .unwrap_or_else(|| "1024".into());
    let mut conn = asked(&daemon, &session).await?;
    let [stdin, stdout, _in_w, _out_r] = pipes()?;
    limit_files(&daemon, &lowest_free(&daemon)?.to_string())?;
    let handed = hand(&mut conn, &[stdin.as_raw_fd(), stdout.as_raw_fd()], || {}).await;
    let mut conn = BufReader::new(conn);
    let said = told(&mut conn).await;
    limit_files(&daemon, &soft)?;
    handed?;
    let said = said?;
    assert!(said.relay, "{said:?}");
    assert!(said.refused.contains("limit of open files"), "{said:?}");
    relayed_session_works(&mut conn).await
}

/// A named FIFO and a TCP socket (kinds the daemon does not serve) are relayed instead; the
/// TCP socket, lingering over data its peer never read, is closed off the event loop (its
/// close waits up to its linger time): the daemon answers meanwhile. Seen failing with the
/// refused descriptors closed where they were refused: the daemon did not answer for the
/// linger's 10 s.
#[tokio::test]
async fn kinds_not_served_are_relayed_and_closed_off_the_event_loop() -> anyhow::Result<()> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let home = TestHome::allowing_mcp()?;
    let daemon = started(&home).await?;
    let session = session(&home, &daemon).await?;
    let fifo = home.root().join("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU)?;
    let named = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(OFlag::O_NONBLOCK.bits())
        .open(&fifo)?;
    let mut conn = asked(&daemon, &session).await?;
    hand(&mut conn, &[named.as_raw_fd(); 2], || {}).await?;
    let mut conn = BufReader::new(conn);
    let said = told(&mut conn).await?;
    assert!(said.relay && said.refused.contains("neither an anonymous pipe"), "{said:?}");
    relayed_session_works(&mut conn).await?;
    drop(conn);

    // A TCP connection whose peer never reads, its buffers full, lingering 10 s on close.
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let tcp = std::net::TcpStream::connect(listener.local_addr()?)?;
    tcp.set_nonblocking(true)?;
    let chunk = vec![0u8; 1 << 16];
    while std::io::Write::write(&mut &tcp, &chunk).is_ok() {}
    let linger = nix::libc::linger { l_onoff: 1, l_linger: 10 };
    nix::sys::socket::setsockopt(&tcp, nix::sys::socket::sockopt::Linger, &linger)?;
    let mut conn = asked(&daemon, &session).await?;
    let fd = tcp.as_raw_fd();
    // This process's own copy is closed before the daemon looks at the ones it received, so
    // the daemon's close is the last, the one that lingers.
    let asked_at = Instant::now();
    hand(&mut conn, &[fd, fd], || drop(tcp)).await?;
    let mut conn = BufReader::new(conn);
    let said = told(&mut conn).await?;
    assert!(said.relay && said.refused.contains("Unix socket"), "{said:?}");
    let status = tokio::time::timeout(Duration::from_secs(20), async {
        use geminid_protocol::api::DaemonApiClient as _;
        daemon.client().await?.status().await.map_err(anyhow::Error::from)
    });
    status.await.map_err(|_| anyhow::anyhow!("the daemon does not answer"))??;
    let took = asked_at.elapsed();
    assert!(took < Duration::from_secs(5), "the refusal and an answer took {took:?}");
    relayed_session_works(&mut conn).await?;
    drop(listener);
    Ok(())
}

/// A real gemctl whose stdin is a connection to geminid itself (a loop the daemon does not
/// serve): gemctl exits with an error naming the cause and `--relay`. Seen failing before: it
/// exited 0 without a word.
#[tokio::test]
async fn a_handover_the_daemon_does_not_trust_ends_gemctl_with_the_cause() -> anyhow::Result<()> {
    let home = TestHome::allowing_mcp()?;
    let daemon = started(&home).await?;
    // gemctl's stdin: a connection to the daemon, whose first line (an HTTP status line) it
    // reads as its client's first message.
    let loopback = std::os::unix::net::UnixStream::connect(daemon.socket())?;
    std::io::Write::write_all(&mut &loopback, b"GET /nothing HTTP/1.1\r\nHost: x\r\n\r\n")?;
    let (out_r, out_w) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
    let mut cmd: tokio::process::Command = home.gemctl_cmd(&["mcp", "serve"]).into();
    cmd.stdin(Stdio::from(OwnedFd::from(loopback)))
        .stdout(Stdio::from(out_w))
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let gemctl = cmd.spawn()?;
    let out = tokio::time::timeout(Duration::from_secs(30), gemctl.wait_with_output())
        .await
        .map_err(|_| anyhow::anyhow!("gemctl did not end"))??;
    drop(out_r);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "gemctl exited {}: {stderr}", out.status);
    assert!(stderr.contains("a connection to geminid itself"), "{stderr}");
    assert!(stderr.contains("--relay"), "{stderr}");
    let _ = daemon;
    Ok(())
}
