//! Issue 5: the call path and the catalog, side by side with a direct rmcp client calling the
//! same fixture server in the same run.

use std::sync::Arc;
use std::time::{Duration, Instant};

use geminid_protocol::api::{McpApiClient, SessionApiClient, ToolsApiClient};
use geminid_protocol::client::Client;
use geminid_protocol::mcp::ListServersParams;
use geminid_protocol::session::SessionCreateParams;
use geminid_protocol::tools::{ToolsCallParams, ToolsListParams};
use geminid_tests::mcp::{fixture, shell_env, write_user_settings};
use geminid_tests::{Daemon, TestHome};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use serde_json::json;

use crate::{Cpu, cpu, ms, stats, us};

const CALLS: usize = 3_000;
/// Calls per block when the two paths alternate in blocks.
const BLOCK: usize = 50;
const CONCURRENT: usize = 32;
const PER_CALLER: usize = 300;
const CATALOG_SESSIONS: usize = 50;
const REBUILDS: usize = 20;

fn echo_args(text: &str) -> serde_json::Map<String, serde_json::Value> {
    json!({ "text": text }).as_object().cloned().unwrap_or_default()
}

async fn new_session(client: &Client, home: &TestHome, dir: &str) -> anyhow::Result<String> {
    let ws = home.root().join(dir);
    std::fs::create_dir_all(&ws)?;
    let workspace = ws.display().to_string();
    let env = shell_env(home, &[]);
    Ok(client
        .create(SessionCreateParams {
            workspace,
            env: Some(env),
            reuse_default: false,
            ..Default::default()
        })
        .await?
        .id)
}

pub(crate) async fn via_geminid(
    client: &Client,
    session: &str,
    tool: &str,
    text: &str,
) -> anyhow::Result<()> {
    let p = ToolsCallParams {
        session: session.to_owned(),
        name: tool.to_owned(),
        args: Some(echo_args(text)),
        call_id: None,
        confirmed: false,
    };
    let r = client.tools_call(p).await?;
    anyhow::ensure!(r.display == text, "crossed: {text} → {}", r.display);
    Ok(())
}

/// How the fixture server reads and writes its stdio in a run of the call-path figures.
#[derive(Clone, Copy)]
pub(crate) enum FixtureIo {
    /// Through its event loop (pipes registered with epoll), as Node's MCP servers do.
    EventLoop,
    /// Through rmcp's `stdio()`: tokio's stdin and stdout, a blocking thread per read and write
    /// (as rmcp servers do; Python's SDK reads stdin on a worker thread too).
    TokioStdio,
}

impl FixtureIo {
    /// Both, in the order the tables show them.
    pub(crate) const ALL: [Self; 2] = [Self::EventLoop, Self::TokioStdio];

    fn args(self) -> &'static [&'static str] {
        match self {
            Self::EventLoop => &[],
            Self::TokioStdio => &["--tokio-stdio"],
        }
    }

    pub(crate) fn server(self) -> &'static str {
        match self {
            Self::EventLoop => "fx",
            Self::TokioStdio => "fxt",
        }
    }

    /// Its echo tool's name in a session.
    pub(crate) fn tool(self) -> String {
        format!("mcp_{}_echo", self.server())
    }

    pub(crate) fn label(self) -> &'static str {
        match self {
            Self::EventLoop => "fixture on its event loop",
            Self::TokioStdio => "fixture on rmcp's `stdio()`",
        }
    }
}

/// A home whose user settings run the fixture in each of `modes`.
pub(crate) fn fixture_home(modes: &[FixtureIo]) -> anyhow::Result<TestHome> {
    let home = TestHome::allowing_mcp()?;
    let servers: serde_json::Map<String, serde_json::Value> = modes
        .iter()
        .map(|io| (io.server().to_owned(), json!({ "command": fixture(), "args": io.args() })))
        .collect();
    write_user_settings(&home, serde_json::Value::Object(servers))?;
    Ok(home)
}

/// A client, and a session of `home`'s workspace with its servers started.
pub(crate) async fn session(daemon: &Daemon, home: &TestHome) -> anyhow::Result<(Client, String)> {
    let client = daemon.client().await?;
    let session = new_session(&client, home, "ws").await?;
    client.tools_list(ToolsListParams { session: session.clone(), raw: false, all: false }).await?;
    Ok((client, session))
}

pub async fn bench() -> anyhow::Result<Vec<String>> {
    let mut rows = Vec::new();
    let home = fixture_home(&FixtureIo::ALL)?;
    let daemon = Daemon::launch(&home).log(crate::BENCH_LOG).start().await?;
    let (client, session) = session(&daemon, &home).await?;
    for io in FixtureIo::ALL {
        rows.extend(call_path(&daemon, &client, &session, io).await?);
    }
    rows.extend(catalog(&home, &daemon, &client).await?);
    drop(client);
    drop(daemon);
    Ok(rows)
}

/// Added latency and throughput of `tools/call`, side by side with rmcp's client calling a
/// second copy of the same fixture directly.
async fn call_path(
    daemon: &Daemon,
    client: &Client,
    session: &str,
    io: FixtureIo,
) -> anyhow::Result<Vec<String>> {
    let mut rows = Vec::new();
    let label = io.label();
    let tool = io.tool();
    let mut child = tokio::process::Command::new(fixture())
        .args(io.args())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()?;
    let (stdout, stdin) = (child.stdout.take(), child.stdin.take());
    let (Some(stdout), Some(stdin)) = (stdout, stdin) else { anyhow::bail!("no pipes") };
    let direct = ().serve((stdout, stdin)).await?;
    let peer = direct.peer().clone();
    let direct_call = move |text: String| {
        let peer = peer.clone();
        async move {
            let mut p = CallToolRequestParams::new("echo");
            p.arguments = Some(echo_args(&text));
            let r = peer.call_tool(p).await?;
            let got = serde_json::to_value(&r.content)?;
            anyhow::ensure!(got[0]["text"] == text.as_str(), "crossed");
            anyhow::Ok(())
        }
    };
    // Warm both paths (and start the server through geminid).
    for i in 0..100 {
        direct_call(format!("warm {i}")).await?;
        via_geminid(client, session, &tool, &format!("warm {i}")).await?;
    }
    // The floor: the same hops with a byte relay in the daemon's place.
    let (hops, _relay) = crate::relay::over_socket(io.args()).await?;
    let hops_call = |text: String| {
        let peer = hops.peer().clone();
        async move {
            let mut p = CallToolRequestParams::new("echo");
            p.arguments = Some(echo_args(&text));
            peer.call_tool(p).await?;
            anyhow::Ok(())
        }
    };
    for i in 0..100 {
        hops_call(format!("warm {i}")).await?;
    }
    let me = std::process::id();
    let via_fixture = server_pid(client, session, io.server()).await?;
    let direct_fixture = child.id().unwrap_or(0);

    // 1. Latency, sequential, interleaved call by call so both see the same machine.
    eprintln!("tools: latency, {label}");
    let (mut d, mut g, mut h, mut f) = (
        Vec::with_capacity(CALLS),
        Vec::with_capacity(CALLS),
        Vec::with_capacity(CALLS),
        Vec::with_capacity(CALLS),
    );
    let hello = || geminid_protocol::daemon::HelloParams {
        protocol_version: geminid_protocol::PROTOCOL_VERSION,
        client: None,
    };
    for i in 0..CALLS {
        let text = format!("call {i}");
        timed(&mut d, direct_call(text.clone())).await?;
        timed(&mut g, via_geminid(client, session, &tool, &text)).await?;
        let hello = async {
            geminid_protocol::api::DaemonApiClient::hello(client, hello()).await?;
            anyhow::Ok(())
        };
        timed(&mut h, hello).await?;
        timed(&mut f, hops_call(text)).await?;
    }
    let (d, g, h, f) = (stats(d), stats(g), stats(h), stats(f));
    // The same in alternating blocks: a direct call right after a call through geminid can
    // find the daemon's threads still settling on the two vCPUs, which slows the baseline.
    let (mut bd, mut bg) = (Vec::with_capacity(CALLS), Vec::with_capacity(CALLS));
    for block in 0..CALLS / BLOCK {
        for i in 0..BLOCK {
            timed(&mut bd, direct_call(format!("block {block}/{i}"))).await?;
        }
        for i in 0..BLOCK {
            timed(&mut bg, via_geminid(client, session, &tool, &format!("block {block}/{i}")))
                .await?;
        }
    }
    let (bd, bg) = (stats(bd), stats(bg));
    rows.push(format!(
        "| `tools/call` echo through geminid, {label} ({CALLS} calls) | {:.1} µs | {:.1} µs | |",
        us(g.median),
        us(g.p99)
    ));
    rows.push(format!(
        "| the same call with rmcp's client straight to the fixture, alongside | {:.1} µs | {:.1} µs | baseline |",
        us(d.median),
        us(d.p99)
    ));
    rows.push(format!(
        "| added latency per call, {label} (difference of medians) | {:.1} µs | | ≤ 150 µs |",
        us(g.median.saturating_sub(d.median))
    ));
    rows.push(format!(
        "| of which the socket round trip: `daemon/hello`, alongside | {:.1} µs | {:.1} µs | |",
        us(h.median),
        us(h.p99)
    ));
    rows.push(format!(
        "| the floor: the same hops by a byte relay in the daemon's place (client → socket → relay → server), alongside ({:.1} µs) | {:+.1} µs | | |",
        us(f.median),
        us(f.median) - us(d.median)
    ));
    rows.push(format!(
        "| so the daemon's work beyond the hops, {label} | {:+.1} µs | | |",
        us(g.median) - us(f.median)
    ));
    rows.push(format!(
        "| the same in alternating blocks of {BLOCK}: through geminid / direct ({:.1} / {:.1} µs) | {:.1} µs | | ≤ 150 µs |",
        us(bg.median),
        us(bd.median),
        us(bg.median.saturating_sub(bd.median))
    ));

    // CPU time of each process per call, sequential: where the time goes (work, or threads
    // being put to sleep and woken).
    let n = 1000;
    let per = |a: Cpu, b: Cpu| b.since(a, n);
    let (b0, d0, f0, t) = (cpu(me), cpu(daemon.pid()), cpu(via_fixture), Instant::now());
    for i in 0..n {
        via_geminid(client, session, &tool, &format!("cpu {i}")).await?;
    }
    let wall = us(t.elapsed()) / n as f64;
    let (b1, d1, f1) = (cpu(me), cpu(daemon.pid()), cpu(via_fixture));
    rows.push(format!(
        "| CPU per call through geminid, sequential: caller / daemon / server (wall {wall:.0} µs) | {} / {} / {} | | |",
        per(b0, b1),
        per(d0, d1),
        per(f0, f1),
    ));
    let (b0, f0, t) = (cpu(me), cpu(direct_fixture), Instant::now());
    for i in 0..n {
        direct_call(format!("cpu {i}")).await?;
    }
    let wall = us(t.elapsed()) / n as f64;
    let (b1, f1) = (cpu(me), cpu(direct_fixture));
    rows.push(format!(
        "| CPU per call direct, sequential: caller / server (wall {wall:.0} µs) | {} / {} | | |",
        per(b0, b1),
        per(f0, f1),
    ));

    // 2. Throughput with 32 concurrent callers: each its own connection through geminid,
    //    all sharing the one rmcp peer directly.
    eprintln!("tools: throughput, {label}");
    let mut clients = Vec::new();
    for _ in 0..CONCURRENT {
        let c = daemon.client().await?;
        c.attach(geminid_protocol::session::SessionAttachParams {
            id: session.to_owned(),
            env: None,
        })
        .await?;
        clients.push(Arc::new(c));
    }
    let calls = CONCURRENT * PER_CALLER;
    let (mut direct_rates, mut geminid_rates) = (Vec::new(), Vec::new());
    let (mut direct_cpu, mut geminid_cpu) = (Vec::new(), Vec::new());
    for _round in 0..3 {
        let (b0, f0, t) = (cpu(me), cpu(direct_fixture), Instant::now());
        let tasks: Vec<_> = (0..CONCURRENT)
            .map(|c| {
                let call = direct_call.clone();
                tokio::spawn(async move {
                    for i in 0..PER_CALLER {
                        call(format!("{c}/{i}")).await?;
                    }
                    anyhow::Ok(())
                })
            })
            .collect();
        for task in tasks {
            task.await??;
        }
        direct_rates.push(calls as f64 / t.elapsed().as_secs_f64());
        let (b1, f1) = (cpu(me), cpu(direct_fixture));
        direct_cpu.push(format!("{} / {}", b1.us_since(b0, calls), f1.us_since(f0, calls)));
        let (b0, d0, f0, t) = (cpu(me), cpu(daemon.pid()), cpu(via_fixture), Instant::now());
        let tasks: Vec<_> = clients
            .iter()
            .enumerate()
            .map(|(c, client)| {
                let (client, session, tool) = (client.clone(), session.to_owned(), tool.clone());
                tokio::spawn(async move {
                    for i in 0..PER_CALLER {
                        via_geminid(&client, &session, &tool, &format!("{c}/{i}")).await?;
                    }
                    anyhow::Ok(())
                })
            })
            .collect();
        for task in tasks {
            task.await??;
        }
        geminid_rates.push(calls as f64 / t.elapsed().as_secs_f64());
        let (b1, d1, f1) = (cpu(me), cpu(daemon.pid()), cpu(via_fixture));
        geminid_cpu.push(format!(
            "{} / {} / {}",
            b1.us_since(b0, calls),
            d1.us_since(d0, calls),
            f1.us_since(f0, calls)
        ));
    }
    let (dr, gr) = (median(&direct_rates), median(&geminid_rates));
    rows.push(format!(
        "| throughput, {label}, {CONCURRENT} concurrent callers × {PER_CALLER} calls, through geminid / direct ({gr:.0} / {dr:.0} calls/s, median of 3) | {:.0}% | | ≥ 70% |",
        gr / dr * 100.0
    ));
    rows.push(format!(
        "| CPU µs per call under that load, 3 rounds: through geminid caller / daemon / server; direct caller / server | {}; {} | | |",
        geminid_cpu.join(", "),
        direct_cpu.join(", ")
    ));
    drop(clients);
    let _ = direct.cancel().await;
    drop(child);
    Ok(rows)
}

/// Run one call and record how long it took.
async fn timed(
    samples: &mut Vec<Duration>,
    call: impl std::future::Future<Output = anyhow::Result<()>>,
) -> anyhow::Result<()> {
    let t = Instant::now();
    call.await?;
    samples.push(t.elapsed());
    Ok(())
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The pid of a running server, as `mcp/listServers` reports it.
async fn server_pid(client: &Client, session: &str, server: &str) -> anyhow::Result<u32> {
    let p = ListServersParams { session: Some(session.to_owned()), usage: false };
    let list = client.mcp_list_servers(Some(p)).await?;
    list.servers
        .iter()
        .find(|s| s.name == server)
        .and_then(|s| s.pid)
        .ok_or_else(|| anyhow::anyhow!("server {server} is not running"))
}

/// The catalog of 10 servers with 100 tools each, to a new session (servers running).
async fn catalog(home: &TestHome, daemon: &Daemon, client: &Client) -> anyhow::Result<Vec<String>> {
    let mut rows = Vec::new();
    eprintln!("tools: catalog");
    let servers: serde_json::Map<String, serde_json::Value> = (0..10)
        .map(|i| {
            // Trusted: pinned but not held, so the tool `grow` adds below is listed at once.
            let entry = json!({ "command": fixture(), "args": ["--tools", "94"], "env": { "N": i.to_string() }, "trust": true });
            (format!("s{i}"), entry)
        })
        .collect();
    write_user_settings(home, serde_json::Value::Object(servers))?;
    let warm = new_session(client, home, "warm").await?;
    tokio::time::sleep(Duration::from_millis(300)).await; // let the watcher see the new file
    let first = client
        .tools_list(ToolsListParams { session: warm.clone(), raw: false, all: false })
        .await?;
    anyhow::ensure!(first.tools.len() == 1000, "{} tools", first.tools.len());
    let mut samples = Vec::with_capacity(CATALOG_SESSIONS);
    for i in 0..CATALOG_SESSIONS {
        let s = new_session(client, home, &format!("cat-{i}")).await?;
        let t = Instant::now();
        let l = client.tools_list(ToolsListParams { session: s, raw: false, all: false }).await?;
        samples.push(t.elapsed());
        anyhow::ensure!(l.tools.len() == 1000);
    }
    let c = stats(samples);
    // The same for new sessions as plain HTTP requests, replies unparsed: the daemon's work
    // and the transfer, without the client's parse of 1,000 declarations.
    let mut fresh_plain = Vec::with_capacity(CATALOG_SESSIONS);
    for i in 0..CATALOG_SESSIONS {
        let s = new_session(client, home, &format!("plain-{i}")).await?;
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{{"session":"{s}"}}}}"#
        );
        let t = Instant::now();
        let (_, reply) = geminid_tests::http_post(daemon.socket(), &body).await?;
        fresh_plain.push(t.elapsed());
        anyhow::ensure!(reply.len() > 100_000, "a short reply: {} bytes", reply.len());
    }
    let fresh_plain = stats(fresh_plain);
    let mut again = Vec::with_capacity(CATALOG_SESSIONS);
    for _ in 0..CATALOG_SESSIONS {
        let t = Instant::now();
        client
            .tools_list(ToolsListParams { session: warm.clone(), raw: false, all: false })
            .await?;
        again.push(t.elapsed());
    }
    let again = stats(again);
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{{"session":"{warm}"}}}}"#
    );
    let mut plain = Vec::with_capacity(CATALOG_SESSIONS);
    let mut size = 0;
    for _ in 0..CATALOG_SESSIONS {
        let t = Instant::now();
        let (_, reply) = geminid_tests::http_post(daemon.socket(), &body).await?;
        plain.push(t.elapsed());
        size = reply.len();
    }
    let plain = stats(plain);
    // The same when no session has the table yet: a catalog change (a server's `grow` tool
    // adds one and sends list_changed) clears every table first.
    let filter = geminid_protocol::event::EventsSubscribeParams {
        session: Some(warm.clone()),
        kinds: Some(vec!["catalog/changed".into()]),
    };
    let mut changes = client.subscribe_events(Some(filter)).await?;
    let mut rebuilt = Vec::with_capacity(REBUILDS);
    for i in 0..REBUILDS {
        let grow = ToolsCallParams {
            session: warm.clone(),
            name: "mcp_s0_grow".into(),
            args: None,
            call_id: None,
            confirmed: false,
        };
        client.tools_call(grow).await?;
        tokio::time::timeout(Duration::from_secs(10), changes.next())
            .await?
            .ok_or_else(|| anyhow::anyhow!("the event stream ended"))??;
        let s = new_session(client, home, &format!("rebuilt-{i}")).await?;
        let t = Instant::now();
        let l = client.tools_list(ToolsListParams { session: s, raw: false, all: false }).await?;
        rebuilt.push(t.elapsed());
        anyhow::ensure!(l.tools.len() == 1001 + i, "{} tools", l.tools.len());
    }
    let rebuilt = stats(rebuilt);
    rows.push(format!(
        "| the same as one plain HTTP request, reply unparsed ({:.0} KB) | {:.2} ms | {:.2} ms | |",
        size as f64 / 1024.0,
        ms(plain.median),
        ms(plain.p99)
    ));
    rows.push(format!(
        "| `tools/list` again for a session that has it (the transfer of 1,000 declarations) | {:.2} ms | {:.2} ms | |",
        ms(again.median),
        ms(again.p99)
    ));
    rows.push(format!(
        "| `tools/list` for a new session: 10 running servers, 1,000 tools ({CATALOG_SESSIONS} sessions) | {:.2} ms | {:.2} ms | ≤ 5 ms |",
        ms(c.median),
        ms(c.p99)
    ));
    rows.push(format!(
        "| the same as plain HTTP requests, replies unparsed: the daemon's work and the transfer ({CATALOG_SESSIONS} new sessions) | {:.2} ms | {:.2} ms | |",
        ms(fresh_plain.median),
        ms(fresh_plain.p99)
    ));
    rows.push(format!(
        "| the same when its table must be built first (after a catalog change; {REBUILDS} sessions) | {:.2} ms | {:.2} ms | |",
        ms(rebuilt.median),
        ms(rebuilt.p99)
    ));
    drop(changes);
    Ok(rows)
}
