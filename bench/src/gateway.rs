//! Issue 19: a tools/call through the gateway against the same call on the socket, in one run,
//! interleaved (target: within 2×), both as a client sees it through `gemctl mcp serve` and
//! on the upgraded connection itself; and 4 gateway clients × 5 servers running 5 upstream
//! processes, not 20. Issue 39: the same call through `gemctl mcp serve` against an rmcp
//! client on the server itself (≤ +150 µs), and 32 concurrent calls on each (≥ 0.8×).

use std::collections::{BTreeMap, BTreeSet};
use std::process::Stdio;
use std::time::Instant;

use geminid_protocol::api::SessionApiClient;
use geminid_protocol::gateway::{Names, open};
use geminid_protocol::session::SessionCreateParams;
use geminid_tests::mcp::{shell_env, stdio, write_user_settings};
use geminid_tests::{Daemon, TestHome};
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::{RoleClient, ServiceExt};
use serde_json::json;

use crate::{stats, us};

const WARMUP: usize = 200;
const CALLS: usize = 2_000;
/// Concurrent calls on one MCP client, and how many each makes, per throughput round.
const CALLERS: usize = 32;
const EACH: usize = 100;
const ROUNDS: usize = 3;

fn echo(name: &str) -> CallToolRequestParams {
    let mut p = CallToolRequestParams::new(name.to_owned());
    p.arguments = json!({ "text": "hi" }).as_object().cloned();
    p
}

/// An rmcp client on the stdin and stdout of `cmd`, started.
async fn client_on(
    mut cmd: tokio::process::Command,
) -> anyhow::Result<(RunningService<RoleClient, ()>, tokio::process::Child)> {
    let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).kill_on_drop(true).spawn()?;
    let (Some(out), Some(inp)) = (child.stdout.take(), child.stdin.take()) else {
        anyhow::bail!("{:?} without pipes", cmd.as_std().get_program());
    };
    Ok((().serve((out, inp)).await?, child))
}

/// `gemctl mcp serve` in `dir`: its stdin and stdout handed to the daemon (the default), or
/// relayed by it (`relay`).
async fn gemctl_serve(
    home: &TestHome,
    dir: &std::path::Path,
    relay: bool,
) -> anyhow::Result<(RunningService<RoleClient, ()>, tokio::process::Child)> {
    let args: &[&str] = if relay { &["mcp", "serve", "--relay"] } else { &["mcp", "serve"] };
    let mut cmd: tokio::process::Command = home.gemctl_cmd(args).into();
    cmd.current_dir(dir);
    client_on(cmd).await
}

/// An rmcp client on a fixture server of its own: what an MCP client configured with the
/// server itself has.
async fn fixture_direct(
    args: &[&str],
) -> anyhow::Result<(RunningService<RoleClient, ()>, tokio::process::Child)> {
    let mut cmd = tokio::process::Command::new(geminid_tests::mcp::fixture());
    cmd.args(args);
    client_on(cmd).await
}

/// Calls a second: [`CALLERS`] tasks making [`EACH`] calls each on one client.
async fn rate(peer: &rmcp::Peer<RoleClient>, tool: &str) -> anyhow::Result<f64> {
    let t = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..CALLERS {
        let (peer, tool) = (peer.clone(), tool.to_owned());
        tasks.spawn(async move {
            for _ in 0..EACH {
                peer.call_tool(echo(&tool)).await?;
            }
            anyhow::Ok(())
        });
    }
    while let Some(r) = tasks.join_next().await {
        r??;
    }
    Ok((CALLERS * EACH) as f64 / t.elapsed().as_secs_f64())
}

/// `server`'s echo through each of `paths` (a label and a client) against an rmcp client on a
/// fixture of its own started with `args` (`label`), and against the same hops made by two
/// byte relays (the floor): one call at a time, interleaved, then [`CALLERS`] at once.
async fn against_the_server(
    paths: &[(&str, &RunningService<RoleClient, ()>)],
    server: &str,
    label: &str,
    args: &[&str],
) -> anyhow::Result<Vec<String>> {
    eprintln!("gateway: through the gateway against the server itself, fixture {label}");
    let (own, _child) = fixture_direct(args).await?;
    let (hops, _relays) = crate::relay::through_two(args).await?;
    let via = format!("{server}__echo");
    for _ in 0..WARMUP {
        for (_, p) in paths {
            p.call_tool(echo(&via)).await?;
        }
        own.call_tool(echo("echo")).await?;
        hops.call_tool(echo("echo")).await?;
    }
    let mut through = vec![Vec::new(); paths.len()];
    let (mut alone, mut floor) = (Vec::new(), Vec::new());
    for _ in 0..CALLS {
        for (i, (_, p)) in paths.iter().enumerate() {
            let t = Instant::now();
            p.call_tool(echo(&via)).await?;
            through[i].push(t.elapsed());
        }
        let t = Instant::now();
        own.call_tool(echo("echo")).await?;
        alone.push(t.elapsed());
        let t = Instant::now();
        hops.call_tool(echo("echo")).await?;
        floor.push(t.elapsed());
    }
    let through: Vec<f64> = through.into_iter().map(|v| us(stats(v).median)).collect();
    let (a, f) = (us(stats(alone).median), us(stats(floor).median));
    let mut rates = vec![Vec::new(); paths.len()];
    let (mut alone, mut floor) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        for (i, (_, p)) in paths.iter().enumerate() {
            rates[i].push(rate(p.peer(), &via).await?);
        }
        alone.push(rate(own.peer(), "echo").await?);
        floor.push(rate(hops.peer(), "echo").await?);
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[ROUNDS / 2]
    };
    let (ra, rf) = (median(alone), median(floor));
    let load = crate::rest::load();
    let mut rows = Vec::new();
    for ((name, _), t) in paths.iter().zip(&through) {
        rows.push(format!(
            "| a call {name}, fixture {label}: through / on the server itself, interleaved ({t:.0} / {a:.0} µs; load {load}) | {:+.0} µs | | ≤ +100 µs |",
            t - a
        ));
    }
    rows.push(format!(
        "| the floor: the same hops by two byte relays (client → relay → socket → relay → server) / on the server itself ({f:.0} / {a:.0} µs) | {:+.0} µs | | |",
        f - a
    ));
    for ((name, _), r) in paths.iter().zip(rates) {
        let r = median(r);
        rows.push(format!(
            "| throughput, {CALLERS} concurrent calls on one client, fixture {label}: {name} / on the server itself ({r:.0} / {ra:.0} calls/s, median of {ROUNDS}; load {load}) | {:.2}× | | ≥ 0.8× |",
            r / ra
        ));
    }
    rows.push(format!(
        "| the same through the two byte relays / on the server itself ({rf:.0} / {ra:.0} calls/s) | {:.2}× | | |",
        rf / ra
    ));
    Ok(rows)
}

pub async fn bench() -> anyhow::Result<Vec<String>> {
    eprintln!("gateway: tools/call on the socket, through the upgraded connection, through gemctl");
    let home = TestHome::allowing_mcp()?;
    write_user_settings(&home, json!({ "fx": stdio(&[]), "fy": stdio(&["--tokio-stdio"]) }))?;
    let daemon = Daemon::launch(&home).log(crate::BENCH_LOG).start().await?;
    anyhow::ensure!(home.gemctl(&["trust"])?.status.success(), "gemctl trust failed");
    let client = daemon.client().await?;
    let session = client
        .create(SessionCreateParams {
            workspace: home.workspace().display().to_string(),
            env: Some(shell_env(&home, &[])),
            reuse_default: true,
            ..Default::default()
        })
        .await?
        .id;
    let direct = ().serve(open(daemon.socket(), &session, Names::Server).await?).await?;
    let (relayed, _child) = gemctl_serve(&home, &home.workspace(), true).await?;
    let (handed, _handed_child) = gemctl_serve(&home, &home.workspace(), false).await?;
    for _ in 0..WARMUP {
        crate::tools::via_geminid(&client, &session, "mcp_fx_echo", "hi").await?;
        direct.call_tool(echo("fx__echo")).await?;
        relayed.call_tool(echo("fx__echo")).await?;
    }
    let (mut socket, mut upgraded, mut gemctl) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..CALLS {
        let t = Instant::now();
        crate::tools::via_geminid(&client, &session, "mcp_fx_echo", "hi").await?;
        socket.push(t.elapsed());
        let t = Instant::now();
        direct.call_tool(echo("fx__echo")).await?;
        upgraded.push(t.elapsed());
        let t = Instant::now();
        relayed.call_tool(echo("fx__echo")).await?;
        gemctl.push(t.elapsed());
    }
    let (s, u, g) = (stats(socket), stats(upgraded), stats(gemctl));
    let ratio = |a: &crate::Stats| us(a.median) / us(s.median);
    let mut rows = vec![
        format!(
            "| tools/call on the socket (`tools/call`, typed client) | {:.0} µs | {:.0} µs | baseline |",
            us(s.median),
            us(s.p99)
        ),
        format!(
            "| the same call through the gateway, on its upgraded connection | {:.0} µs ({:.2}×) | {:.0} µs | ≤ 2× |",
            us(u.median),
            ratio(&u),
            us(u.p99)
        ),
        format!(
            "| the same call through `gemctl mcp serve --relay` (what an MCP client saw before) | {:.0} µs ({:.2}×) | {:.0} µs | ≤ 2× |",
            us(g.median),
            ratio(&g),
            us(g.p99)
        ),
    ];
    let paths = [
        ("through `gemctl mcp serve` (its stdin and stdout handed to the daemon)", &handed),
        ("through `gemctl mcp serve --relay`", &relayed),
        ("on the gateway's upgraded connection (no gemctl)", &direct),
    ];
    rows.extend(against_the_server(&paths, "fx", "on its event loop", &[]).await?);
    rows.extend(against_the_server(&paths, "fy", "on rmcp's `stdio()`", &["--tokio-stdio"]).await?);
    drop((direct, relayed, handed));

    eprintln!("gateway: 4 clients in 2 workspaces × 5 servers");
    // Five different servers (entries alike would be one server to geminid).
    let servers: BTreeMap<String, serde_json::Value> = (1..=5)
        .map(|i| {
            let mut entry = stdio(&[]);
            entry["env"] = json!({ "GEMINID_BENCH_SERVER": i.to_string() });
            (format!("s{i}"), entry)
        })
        .collect();
    write_user_settings(&home, json!(servers))?;
    let ws2 = home.root().join("ws2");
    std::fs::create_dir_all(&ws2)?;
    anyhow::ensure!(
        home.gemctl(&["trust", &ws2.display().to_string()])?.status.success(),
        "gemctl trust ws2 failed"
    );
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let mut clients = Vec::new();
    for dir in [home.workspace(), home.workspace(), ws2.clone(), ws2.clone()] {
        clients.push(gemctl_serve(&home, &dir, false).await?);
    }
    let mut pids = BTreeSet::new();
    let mut pairs = 0;
    for (c, _) in &clients {
        for i in 1..=5 {
            let r = c.call_tool(CallToolRequestParams::new(format!("s{i}__pid"))).await?;
            let v = serde_json::to_value(&r)?;
            pids.insert(v["content"][0]["text"].as_str().unwrap_or_default().to_owned());
            pairs += 1;
        }
    }
    rows.push(format!(
        "| upstream processes for 4 gateway clients (2 workspaces) × 5 servers | {} for {pairs} client–server pairs | | 5, not 20 |",
        pids.len()
    ));
    Ok(rows)
}
