//! Issue 39's floor for the hops: the same processes and pipes as a call through geminid, with
//! byte relays that do nothing else in place of geminid.
//!
//! `geminid-bench relay back SOCKET PROGRAM [ARGS]` listens on SOCKET and, for the one
//! connection it takes, starts PROGRAM and copies bytes between the connection and the
//! program's stdin and stdout (the daemon's place). `geminid-bench relay front SOCKET` copies
//! bytes between its own stdin and stdout and SOCKET (`gemctl mcp serve`'s place). Each runs on
//! the bench's current-thread runtime and reads and writes on its reactor, the cheapest a relay
//! can be.

use std::os::fd::AsFd as _;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::Context as _;
use rmcp::service::RunningService;
use rmcp::{RoleClient, ServiceExt};
use tokio::io::AsyncWriteExt as _;
use tokio::net::unix::pipe;
use tokio::process::{Child, Command};

/// Copy `a`'s reads to `b` and `b`'s to `a` until either side ends.
async fn both_ways(
    (mut a_in, mut a_out): (impl tokio::io::AsyncRead + Unpin, impl tokio::io::AsyncWrite + Unpin),
    (mut b_in, mut b_out): (impl tokio::io::AsyncRead + Unpin, impl tokio::io::AsyncWrite + Unpin),
) -> anyhow::Result<()> {
    let up = async {
        tokio::io::copy(&mut a_in, &mut b_out).await?;
        b_out.shutdown().await
    };
    let down = tokio::io::copy(&mut b_in, &mut a_out);
    tokio::select! {
        r = up => r?,
        r = down => { r?; }
    }
    Ok(())
}

/// `geminid-bench relay …`: run one relay until its connection ends.
pub async fn run(args: &[String]) -> anyhow::Result<()> {
    const USAGE: &str =
        "usage: geminid-bench relay back SOCKET PROGRAM [ARGS] | relay front SOCKET";
    match args {
        [side, socket, program, rest @ ..] if side == "back" => {
            let listener = tokio::net::UnixListener::bind(socket)?;
            let (conn, _) = listener.accept().await?;
            // The one connection is taken: the socket's name is not needed any more.
            let _ = std::fs::remove_file(socket);
            let mut child = Command::new(program)
                .args(rest)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .kill_on_drop(true)
                .spawn()?;
            let (Some(out), Some(inp)) = (child.stdout.take(), child.stdin.take()) else {
                anyhow::bail!("{program} without pipes");
            };
            both_ways(conn.into_split(), (out, inp)).await
        }
        [side, socket] if side == "front" => {
            let conn = tokio::net::UnixStream::connect(socket).await?;
            let stdin =
                pipe::Receiver::from_owned_fd(std::io::stdin().as_fd().try_clone_to_owned()?)
                    .context("stdin is not a pipe")?;
            let stdout =
                pipe::Sender::from_owned_fd(std::io::stdout().as_fd().try_clone_to_owned()?)
                    .context("stdout is not a pipe")?;
            both_ways((stdin, stdout), conn.into_split()).await
        }
        _ => anyhow::bail!("{USAGE}"),
    }
}

fn relay(args: &[&str]) -> anyhow::Result<Command> {
    let mut cmd = Command::new(std::env::current_exe()?);
    cmd.arg("relay").args(args).kill_on_drop(true);
    Ok(cmd)
}

/// A back relay to a fixture server started with `fixture_args`, listening on a new socket in
/// the temporary directory; returned once the socket is there.
async fn back(fixture_args: &[&str]) -> anyhow::Result<(PathBuf, Child)> {
    static N: AtomicUsize = AtomicUsize::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let socket =
        std::env::temp_dir().join(format!("geminid-relay-{}-{n}.sock", std::process::id()));
    let _ = std::fs::remove_file(&socket);
    let fixture = geminid_tests::mcp::fixture();
    let mut args = vec!["back", socket.to_str().context("socket path")?];
    args.push(&fixture);
    args.extend(fixture_args);
    let child = relay(&args)?.stdin(Stdio::null()).spawn()?;
    for _ in 0..500 {
        if socket.exists() {
            return Ok((socket, child));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    anyhow::bail!("the relay did not listen on {}", socket.display())
}

/// An rmcp client on a socket to a back relay to the fixture: a call on the daemon's socket
/// without the daemon's work.
pub async fn over_socket(
    fixture_args: &[&str],
) -> anyhow::Result<(RunningService<RoleClient, ()>, Child)> {
    let (socket, child) = back(fixture_args).await?;
    let conn = tokio::net::UnixStream::connect(&socket).await?;
    Ok((().serve(conn).await?, child))
}

/// An rmcp client on a front relay's pipes, to a socket, to a back relay, to the fixture: a
/// call through `gemctl mcp serve` without gemctl's or the daemon's work.
pub async fn through_two(
    fixture_args: &[&str],
) -> anyhow::Result<(RunningService<RoleClient, ()>, [Child; 2])> {
    let (socket, back) = back(fixture_args).await?;
    let mut front = relay(&["front", socket.to_str().context("socket path")?])?
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()?;
    let (Some(out), Some(inp)) = (front.stdout.take(), front.stdin.take()) else {
        anyhow::bail!("the front relay without pipes");
    };
    Ok((().serve((out, inp)).await?, [front, back]))
}
