//! `gemctl mcp serve` hands its stdin and stdout to the daemon (Unix): the daemon serves the
//! client's pipes itself while gemctl waits. A client's calls end, a cancel reaches the server,
//! and when gemctl or the daemon dies mid-call the client sees its pipes close and its call
//! end, as with the relay (`--relay`, run side by side here).

use std::time::Duration;

use geminid_tests::mcp::stdio;
use geminid_tests::{Daemon, TestHome, eventually};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use rmcp::model::{CallToolRequestParams, ClientRequest, Request};
use rmcp::service::{PeerRequestOptions, RequestHandle, RunningService};
use rmcp::{RoleClient, ServiceExt as _};
use serde_json::{Value, json};
use tokio::process::{Child, Command};

use super::gateway::settings;

const MODES: [&[&str]; 2] = [&[], &["--relay"]];

fn call(name: &str, args: Value) -> CallToolRequestParams {
    let mut p = CallToolRequestParams::new(name.to_owned());
    p.arguments = args.as_object().cloned();
    p
}

/// `gemctl mcp serve` (with `extra`) on pipes, and an rmcp client on them.
async fn serve(
    home: &TestHome,
    extra: &[&str],
) -> anyhow::Result<(RunningService<RoleClient, ()>, Child)> {
    let mut args = vec!["mcp", "serve"];
    args.extend_from_slice(extra);
    let mut cmd: Command = home.gemctl_cmd(&args).into();
    cmd.stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .kill_on_drop(true);
    let mut child = cmd.spawn()?;
    let (Some(out), Some(inp)) = (child.stdout.take(), child.stdin.take()) else {
        anyhow::bail!("no pipes");
    };
    Ok((().serve((out, inp)).await?, child))
}

/// How many calls the fixture server saw cancelled (asked on a client of its own).
pub(super) async fn cancelled(home: &TestHome) -> anyhow::Result<u64> {
    let (c, _child) = serve(home, &[]).await?;
    let r = serde_json::to_value(c.call_tool(call("fx__cancelled", json!({}))).await?)?;
    let n = r["content"][0]["text"].as_str().unwrap_or_default().trim().parse()?;
    c.cancel().await?;
    Ok(n)
}

/// A call that waits a minute upstream, sent.
async fn waiting(c: &RunningService<RoleClient, ()>) -> anyhow::Result<RequestHandle<RoleClient>> {
    let p = call("fx__wait", json!({ "ms": 60000 }));
    let handle = c
        .send_cancellable_request(
            ClientRequest::CallToolRequest(Request::new(p)),
            PeerRequestOptions::no_options(),
        )
        .await?;
    Ok(handle)
}

async fn echo(c: &RunningService<RoleClient, ()>, text: &str) -> anyhow::Result<()> {
    let r = serde_json::to_value(c.call_tool(call("fx__echo", json!({ "text": text }))).await?)?;
    anyhow::ensure!(r["content"][0]["text"] == text, "{r}");
    Ok(())
}

fn signal(child: &Child, sig: Signal) -> anyhow::Result<()> {
    let pid = child.id().ok_or_else(|| anyhow::anyhow!("gone already"))?;
    kill(Pid::from_raw(i32::try_from(pid)?), sig)?;
    Ok(())
}

/// Until the client's pipes close (its service ends), and (`before`: the server's count of
/// cancels before) the call waiting upstream is cancelled there.
async fn cleaned_up(
    home: &TestHome,
    client: RunningService<RoleClient, ()>,
    handle: RequestHandle<RoleClient>,
    before: Option<u64>,
) -> anyhow::Result<()> {
    let answer = tokio::time::timeout(Duration::from_secs(20), handle.await_response())
        .await
        .map_err(|_| anyhow::anyhow!("the call waiting upstream never ended"))?;
    anyhow::ensure!(answer.is_err(), "the call waiting upstream got an answer: {answer:?}");
    tokio::time::timeout(Duration::from_secs(20), client.waiting())
        .await
        .map_err(|_| anyhow::anyhow!("the client's pipes never closed"))??;
    let Some(before) = before else { return Ok(()) };
    let seen = || async { cancelled(home).await.is_ok_and(|n| n > before) };
    anyhow::ensure!(
        eventually(Duration::from_secs(20), seen).await,
        "the server never saw the cancel"
    );
    Ok(())
}

#[tokio::test]
async fn handed_over_the_daemon_serves_the_clients_pipes_and_calls_end_and_cancel()
-> anyhow::Result<()> {
    let home = TestHome::allowing_mcp()?;
    settings(&home, json!({ "fx": stdio(&["--rich"]) }))?;
    let _daemon = Daemon::start(&home, &[]).await?;
    assert!(home.gemctl(&["trust"])?.status.success());
    let (client, gemctl) = serve(&home, &[]).await?;
    echo(&client, "handed").await?;
    // gemctl is not in the path: stopped, its client's calls still end.
    signal(&gemctl, Signal::SIGSTOP)?;
    tokio::time::timeout(Duration::from_secs(20), echo(&client, "without gemctl"))
        .await
        .map_err(|_| anyhow::anyhow!("no answer while gemctl is stopped: it relays"))??;
    // A call the client cancels is cancelled upstream.
    let before = cancelled(&home).await?;
    let handle = waiting(&client).await?;
    echo(&client, "while one waits").await?;
    handle.cancel(Some("the user pressed Esc".into())).await?;
    let seen = || async { cancelled(&home).await.is_ok_and(|n| n > before) };
    assert!(eventually(Duration::from_secs(10), seen).await, "upstream never saw the cancel");
    signal(&gemctl, Signal::SIGCONT)?;
    // The client closes its end: the session ends, and so does gemctl, successfully.
    client.cancel().await?;
    let mut gemctl = gemctl;
    let status = tokio::time::timeout(Duration::from_secs(10), gemctl.wait()).await??;
    assert!(status.success(), "{status}");
    Ok(())
}

#[tokio::test]
async fn when_gemctl_dies_mid_call_the_client_sees_its_pipes_close_and_its_call_end()
-> anyhow::Result<()> {
    let home = TestHome::allowing_mcp()?;
    settings(&home, json!({ "fx": stdio(&["--rich"]) }))?;
    let _daemon = Daemon::start(&home, &[]).await?;
    assert!(home.gemctl(&["trust"])?.status.success());
    for mode in MODES {
        let (client, mut gemctl) = serve(&home, mode).await?;
        echo(&client, "before").await?;
        // The upstream cancel after gemctl goes is checked once the call is known to run
        // upstream, in gateway_handed_attack.rs (here the call may not have reached it).
        let before = None;
        let handle = waiting(&client).await?;
        gemctl.kill().await?;
        cleaned_up(&home, client, handle, before)
            .await
            .map_err(|e| e.context(format!("gemctl mcp serve {mode:?}")))?;
    }
    Ok(())
}

#[tokio::test]
async fn when_the_daemon_dies_mid_call_the_client_sees_its_pipes_close() -> anyhow::Result<()> {
    let home = TestHome::allowing_mcp()?;
    settings(&home, json!({ "fx": stdio(&["--rich"]) }))?;
    for mode in MODES {
        let mut daemon = Daemon::start(&home, &[]).await?;
        assert!(home.gemctl(&["trust"])?.status.success());
        let (client, mut gemctl) = serve(&home, mode).await?;
        echo(&client, "before").await?;
        let handle = waiting(&client).await?;
        daemon.kill9().await?;
        let answer = tokio::time::timeout(Duration::from_secs(20), handle.await_response()).await?;
        assert!(answer.is_err(), "{mode:?}: an answer from a dead daemon: {answer:?}");
        tokio::time::timeout(Duration::from_secs(20), client.waiting()).await??;
        tokio::time::timeout(Duration::from_secs(20), gemctl.wait()).await??;
    }
    Ok(())
}
