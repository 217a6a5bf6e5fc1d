//! Issue 4: MCP supervision figures, each measured side by side in one run.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use anyhow::Context;
use geminid_protocol::api::{McpApiClient, SessionApiClient};
use geminid_protocol::client::Client;
use geminid_protocol::event::EventsSubscribeParams;
use geminid_protocol::event::{Event, EventBody};
use geminid_protocol::mcp::{ListServersParams, ServerState, StartParams};
use geminid_protocol::session::{SessionCreateParams, SessionIdParams};
use geminid_tests::{Daemon, TestHome, bin};
use serde_json::{Value, json};

use crate::{ms, rss_kib, stats};

const ROUNDS: usize = 10;
const CRASHES: usize = 20;

fn write_servers(home: &TestHome, servers: Value) -> anyhow::Result<()> {
    let path = home.root().join("home/.gemini/settings.json");
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, serde_json::to_vec(&json!({ "mcpServers": servers }))?)?;
    std::fs::rename(tmp, path)?;
    Ok(())
}

/// `n` fixture entries that differ by an env variable (so each is its own process), tagged
/// with `round` so every round starts new processes.
fn fixtures(n: usize, round: usize, extra_args: &[&str]) -> Value {
    let fixture = bin("mcp-fixture").display().to_string();
    let mut map = serde_json::Map::new();
    for i in 0..n {
        let entry = json!({
            "command": fixture,
            "args": extra_args,
            "env": { "BENCH_SERVER": i.to_string(), "BENCH_ROUND": round.to_string() },
        });
        map.insert(format!("s{i}"), entry);
    }
    Value::Object(map)
}

fn env(home: &TestHome) -> geminid_protocol::common::ClientEnv {
    [
        ("PATH".to_owned(), std::env::var("PATH").unwrap_or_default()),
        ("HOME".to_owned(), home.root().join("home").display().to_string()),
        ("GEMINI_CLI_TRUST_WORKSPACE".to_owned(), "true".to_owned()),
    ]
    .into()
}

async fn new_session(client: &Client, home: &TestHome, dir: &str) -> anyhow::Result<String> {
    let ws = home.root().join(dir);
    std::fs::create_dir_all(&ws)?;
    let workspace = ws.display().to_string();
    let params = SessionCreateParams {
        workspace,
        env: Some(env(home)),
        reuse_default: false,
        ..Default::default()
    };
    Ok(client.create(params).await?.id)
}

async fn running(client: &Client) -> anyhow::Result<usize> {
    let p = ListServersParams { session: None, usage: false };
    Ok(client.mcp_list_servers(Some(p)).await?.servers.len())
}

/// Time `mcp/start` (waiting until all connect) of `n` new servers; the session is closed and
/// its servers gone before returning.
async fn timed_start(
    client: &Client,
    home: &TestHome,
    n: usize,
    round: usize,
    extra_args: &[&str],
) -> anyhow::Result<Duration> {
    write_servers(home, fixtures(n, round, extra_args))?;
    let session = new_session(client, home, &format!("ws-{n}-{round}")).await?;
    let t = Instant::now();
    let r = client.mcp_start(StartParams { session: session.clone(), wait: true }).await?;
    let took = t.elapsed();
    let connected = r.servers.iter().filter(|s| s.state == ServerState::Connected).count();
    anyhow::ensure!(connected == n, "only {connected} of {n} connected: {:?}", r.servers);
    client.close(SessionIdParams { id: session }).await?;
    while running(client).await? > 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Ok(took)
}

/// The floor for start-up: spawn `n` fixtures directly and read each one's answer to
/// `initialize` (no geminid, no MCP library), all at once.
fn direct_start(n: usize, extra_args: &[&str]) -> anyhow::Result<Duration> {
    use std::io::{BufRead, BufReader, Write};
    use std::process::{Command, Stdio};
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"0"}}}"#;
    let t = Instant::now();
    let mut children = Vec::new();
    for _ in 0..n {
        let mut child = Command::new(bin("mcp-fixture"))
            .args(extra_args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let mut stdin = child.stdin.take().context("stdin")?;
        writeln!(stdin, "{init}")?;
        children.push((child, stdin));
    }
    let readers: Vec<_> = children
        .iter_mut()
        .map(|(child, _)| {
            let out = child.stdout.take();
            std::thread::spawn(move || {
                let mut line = String::new();
                if let Some(out) = out {
                    let _ = BufReader::new(out).read_line(&mut line);
                }
                line
            })
        })
        .collect();
    for r in readers {
        let line = r.join().map_err(|_| anyhow::anyhow!("reader panicked"))?;
        anyhow::ensure!(line.contains("\"result\""), "no initialize result: {line}");
    }
    let took = t.elapsed();
    for (mut child, stdin) in children {
        drop(stdin);
        let _ = child.kill();
        let _ = child.wait();
    }
    Ok(took)
}

/// Children of `pid` (direct), from /proc.
fn children(pid: u32) -> BTreeSet<u32> {
    let mut out = BTreeSet::new();
    let Ok(entries) = std::fs::read_dir("/proc") else { return out };
    for e in entries.flatten() {
        let Some(child) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else { continue };
        let ppid = stat
            .rsplit(')')
            .next()
            .and_then(|r| r.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if ppid == Some(pid) {
            out.insert(child);
        }
    }
    out
}

pub async fn bench() -> anyhow::Result<Vec<String>> {
    let home = TestHome::allowing_mcp()?;
    let flags = [
        "--mcp-linger",
        "0s",
        "--mcp-backoff",
        "10ms",
        "--mcp-backoff-max",
        "10ms",
        "--mcp-restart-budget",
        "1000",
    ];
    let daemon = Daemon::launch(&home).args(&flags).log(crate::BENCH_LOG).start().await?;
    let client = daemon.client().await?;
    let mut rows = Vec::new();

    // 1. Start-up: 10 at once versus 1, interleaved rounds. Twice: the bare fixture (start-up
    //    is all CPU: exec, runtime, handshake) and with 300 ms of simulated loading, like a
    //    real server (start-up is mostly waiting).
    for (label, extra) in [
        ("bare fixture", &[][..]),
        ("fixture with 300 ms simulated loading", &["--startup-delay-ms", "300"][..]),
    ] {
        eprintln!("mcp: start-up, {label}");
        let (mut one, mut ten, mut d1, mut d10) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for round in 0..ROUNDS {
            one.push(timed_start(&client, &home, 1, round, extra).await?);
            ten.push(timed_start(&client, &home, 10, round, extra).await?);
            d1.push(direct_start(1, extra)?);
            d10.push(direct_start(10, extra)?);
        }
        let (one, ten, d1, d10) = (stats(one), stats(ten), stats(d1), stats(d10));
        rows.push(format!(
            "| start-up of 10 stdio servers at once / of 1, through geminid ({label}; {:.1} ms / {:.1} ms, {ROUNDS} rounds) | {:.2}× | | ≤ 1.5× |",
            ms(ten.median),
            ms(one.median),
            ten.median.as_secs_f64() / one.median.as_secs_f64()
        ));
        rows.push(format!(
            "| the same, spawned directly and answering `initialize`, alongside ({:.1} ms / {:.1} ms) | {:.2}× | | floor |",
            ms(d10.median),
            ms(d1.median),
            d10.median.as_secs_f64() / d1.median.as_secs_f64()
        ));
    }

    eprintln!("mcp: sharing");
    // 2. 10 sessions in 10 workspaces × the same 5 servers: processes spawned.
    write_servers(&home, fixtures(5, 999, &[]))?;
    let mut sessions = Vec::new();
    for i in 0..10 {
        sessions.push(new_session(&client, &home, &format!("shared-{i}")).await?);
    }
    let starts =
        sessions.iter().map(|s| client.mcp_start(StartParams { session: s.clone(), wait: true }));
    for r in futures::future::join_all(starts).await {
        r?;
    }
    let spawned = children(daemon.pid()).len();
    rows.push(format!(
        "| processes for 10 sessions × 5 servers (same spec, 10 workspaces) | {spawned} | | 5 |"
    ));
    for s in sessions {
        client.close(SessionIdParams { id: s }).await?;
    }
    while running(&client).await? > 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }

    eprintln!("mcp: RSS");
    // 3. RSS with 20 connected servers, beside the same daemon with none.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let rss_none = rss_kib(daemon.pid())?;
    write_servers(&home, fixtures(20, 1000, &[]))?;
    let session = new_session(&client, &home, "rss").await?;
    client.mcp_start(StartParams { session: session.clone(), wait: true }).await?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let rss_twenty = rss_kib(daemon.pid())?;
    rows.push(format!(
        "| daemon RSS with 20 connected stdio servers (with none: {:.1} MiB) | {:.1} MiB | | |",
        rss_none as f64 / 1024.0,
        rss_twenty as f64 / 1024.0
    ));
    client.close(SessionIdParams { id: session }).await?;
    while running(&client).await? > 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }

    eprintln!("mcp: crash → event");
    // 4. Crash → state event: SIGKILL a connected server, time until subscribers hear of it.
    write_servers(&home, fixtures(1, 2000, &[]))?;
    let session = new_session(&client, &home, "crash").await?;
    let filter = EventsSubscribeParams {
        session: Some(session.clone()),
        kinds: Some(vec!["mcp/serverState".into()]),
    };
    let mut events = client.subscribe_events(Some(filter)).await?;
    client.mcp_start(StartParams { session: session.clone(), wait: true }).await?;
    let mut samples = Vec::with_capacity(CRASHES);
    for _ in 0..CRASHES {
        let pid = loop {
            let p = ListServersParams { session: Some(session.clone()), usage: false };
            let list = client.mcp_list_servers(Some(p)).await?;
            match list.servers.first() {
                Some(s) if s.state == ServerState::Connected => break s.pid.context("no pid")?,
                _ => tokio::time::sleep(Duration::from_millis(2)).await,
            }
        };
        // Drain events of the previous restart.
        while let Ok(Some(_)) = tokio::time::timeout(Duration::from_millis(20), events.next()).await
        {
        }
        let t = Instant::now();
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(i32::try_from(pid)?),
            nix::sys::signal::Signal::SIGKILL,
        )?;
        loop {
            let ev: Event = tokio::time::timeout(Duration::from_secs(5), events.next())
                .await?
                .context("subscription ended")??;
            if let EventBody::McpServerState(c) = ev.body
                && c.server.state == ServerState::Disconnected
            {
                samples.push(t.elapsed());
                break;
            }
        }
    }
    let crash = stats(samples);
    rows.push(format!(
        "| server SIGKILL → `mcp/serverState` disconnected event ({CRASHES} crashes) | {:.2} ms | {:.2} ms | |",
        ms(crash.median),
        ms(crash.p99)
    ));
    client.close(SessionIdParams { id: session }).await?;
    drop(client);
    drop(daemon);
    Ok(rows)
}
