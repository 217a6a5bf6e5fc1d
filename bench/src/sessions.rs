//! Issue 67: the daemon's own per-call and per-session work, with no gemctl in the path.
//! `sessions`: (1) 32 calls in flight on one MCP client on the daemon's upgraded gateway
//! connection against the same 32 on an rmcp client of the fixture server itself, rounds
//! interleaved (goal ≥ 0.8×); (2) the curve for 1, 10, 50, 100 and 500 sessions at once, each
//! on its own upgraded connection in its own workspace: initialize, `tools/list`, then
//! [`CALLS_EACH`] calls of the shared server's echo, against the same number of callers on one
//! client of the fixture itself (goals at 100: `tools/list` p50 ≤ 20 ms, call p99 ≤ 20 ms beyond
//! the server's, ≤ 100 KiB of daemon RSS per session). The machine's load average is printed
//! beside each figure (these machines are shared).

use std::sync::Arc;
use std::time::{Duration, Instant};

use geminid_protocol::api::SessionApiClient;
use geminid_protocol::gateway::{Names, open};
use geminid_protocol::session::{SessionCreateParams, SessionIdParams};
use geminid_tests::mcp::{fixture, shell_env, write_user_settings};
use geminid_tests::{Daemon, TestHome};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::{Peer, RoleClient};
use serde_json::json;

use crate::{ms, rss_kib, stats};

const CALLERS: usize = 32;
const EACH: usize = 200;
const ROUNDS: usize = 5;
const CALLS_EACH: usize = 20;
const SIZES: [usize; 5] = [1, 10, 50, 100, 500];

/// The 1-minute load average, as `load 1.23`.
pub(crate) fn load() -> String {
    let l = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    format!("load {}", l.split_whitespace().next().unwrap_or("?"))
}

fn echo(name: &str, text: &str) -> CallToolRequestParams {
    let mut p = CallToolRequestParams::new(name.to_owned());
    p.arguments = json!({ "text": text }).as_object().cloned();
    p
}

async fn call(peer: &Peer<RoleClient>, tool: &str, text: &str) -> anyhow::Result<Duration> {
    let t = Instant::now();
    let r = peer.call_tool(echo(tool, text)).await?;
    let took = t.elapsed();
    let got = serde_json::to_value(&r.content)?;
    anyhow::ensure!(got[0]["text"] == text, "crossed: {text} → {got}");
    Ok(took)
}

/// Calls a second: [`CALLERS`] tasks on one client making [`EACH`] calls each.
async fn rate(peer: &Peer<RoleClient>, tool: &str) -> anyhow::Result<f64> {
    let t = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for c in 0..CALLERS {
        let (peer, tool) = (peer.clone(), tool.to_owned());
        tasks.spawn(async move {
            for i in 0..EACH {
                call(&peer, &tool, &format!("{c}/{i}")).await?;
            }
            anyhow::Ok(())
        });
    }
    while let Some(r) = tasks.join_next().await {
        r??;
    }
    Ok((CALLERS * EACH) as f64 / t.elapsed().as_secs_f64())
}

async fn fixture_client() -> anyhow::Result<(RunningService<RoleClient, ()>, tokio::process::Child)>
{
    let mut child = tokio::process::Command::new(fixture())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()?;
    let (Some(out), Some(inp)) = (child.stdout.take(), child.stdin.take()) else {
        anyhow::bail!("no pipes");
    };
    Ok((().serve((out, inp)).await?, child))
}

async fn new_session(daemon: &Daemon, home: &TestHome, dir: &str) -> anyhow::Result<String> {
    let client = daemon.client().await?;
    let ws = home.root().join(dir);
    std::fs::create_dir_all(&ws)?;
    let p = SessionCreateParams {
        workspace: ws.display().to_string(),
        env: Some(shell_env(home, &[])),
        reuse_default: false,
        ..Default::default()
    };
    Ok(client.create(p).await?.id)
}

/// One daemon measured: this build's, or OTHER's.
struct Side {
    label: String,
    home: TestHome,
    daemon: Daemon,
}

async fn side(
    label: &str,
    binary: Option<&std::path::Path>,
    args: &'static [&'static str],
) -> anyhow::Result<Side> {
    let home = TestHome::allowing_mcp()?;
    write_user_settings(&home, json!({ "fx": { "command": fixture(), "args": [] } }))?;
    let launch = Daemon::launch(&home).log(crate::BENCH_LOG).args(args);
    let launch = match binary {
        Some(b) => launch.binary(b),
        None => launch,
    };
    let daemon = launch.start().await?;
    Ok(Side { label: label.to_owned(), home, daemon })
}

/// `sessions [OTHER]`: this build's daemon, and OTHER's (another `geminid`) beside it in the
/// same run. The throughput rounds also run this build with a second event-loop thread
/// (`--worker-threads 2`), to show what the one thread of the default costs there.
pub async fn bench(other: Option<&std::path::Path>) -> anyhow::Result<Vec<String>> {
    let mut sides = vec![side("this build", None, &[]).await?];
    if let Some(o) = other {
        anyhow::ensure!(o.is_file(), "no geminid binary at {}", o.display());
        sides.push(side(&o.display().to_string(), Some(o), &[]).await?);
    }
    let two = side("this build, --worker-threads 2", None, &["--worker-threads", "2"]).await?;
    sides.push(two);
    let mut rows = throughput(&sides).await?;
    let two = sides.pop();
    drop(two);
    if std::env::var_os("GEMINID_BENCH_THROUGHPUT_ONLY").is_some() {
        return Ok(rows);
    }
    for s in &sides {
        rows.extend(curve(s).await?);
    }
    Ok(rows)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// 32 in flight on one client: each daemon's upgraded connection against the fixture alone,
/// round by round (the order rotated every round).
async fn throughput(sides: &[Side]) -> anyhow::Result<Vec<String>> {
    eprintln!("sessions: throughput, {CALLERS} in flight on one client");
    let (own, _child) = fixture_client().await?;
    let mut vias = Vec::new();
    for s in sides {
        let session = new_session(&s.daemon, &s.home, "ws").await?;
        let via = ().serve(open(s.daemon.socket(), &session, Names::Server).await?).await?;
        for i in 0..200 {
            call(via.peer(), "fx__echo", &format!("warm {i}")).await?;
        }
        vias.push(via);
    }
    for i in 0..200 {
        call(own.peer(), "echo", &format!("warm {i}")).await?;
    }
    let n = sides.len();
    let (mut through, mut alone, mut ratios) =
        (vec![Vec::new(); n], Vec::new(), vec![Vec::new(); n]);
    let load0 = load();
    for round in 0..ROUNDS {
        let mut got = vec![0.0; n + 1];
        for k in 0..=n {
            // Rotated: each path goes first in some rounds.
            let which = (k + round) % (n + 1);
            got[which] = if which == n {
                rate(own.peer(), "echo").await?
            } else {
                rate(vias[which].peer(), "fx__echo").await?
            };
        }
        alone.push(got[n]);
        for j in 0..n {
            through[j].push(got[j]);
            ratios[j].push(got[j] / got[n]);
        }
    }
    let a = median(alone);
    let load1 = load();
    let mut rows = Vec::new();
    for (j, s) in sides.iter().enumerate() {
        let mut r = ratios[j].clone();
        r.sort_by(f64::total_cmp);
        let spread = format!("{:.2}–{:.2}", r[0], r[r.len() - 1]);
        let t = median(through[j].clone());
        rows.push(format!(
            "| throughput, {CALLERS} in flight on one client, {}: the daemon's upgraded gateway connection / an rmcp client on the fixture itself ({t:.0} / {a:.0} calls/s, median of {ROUNDS} rounds interleaved; pairs {spread}; {load0} → {load1}) | {:.2}× | | ≥ 0.8× |",
            s.label,
            median(ratios[j].clone())
        ));
    }
    for via in vias {
        let _ = via.cancel().await;
    }
    Ok(rows)
}

/// One session of the curve: its connection, and how long its `tools/list` and calls took.
struct Seat {
    client: RunningService<RoleClient, ()>,
    session: String,
}

/// What opening a seat needs, owned, so that many open at once.
#[derive(Clone)]
struct Opener {
    client: Arc<geminid_protocol::client::Client>,
    socket: std::path::PathBuf,
    root: std::path::PathBuf,
    env: geminid_protocol::common::ClientEnv,
}

impl Opener {
    async fn seat(self, n: usize, i: usize) -> anyhow::Result<Seat> {
        let ws = self.root.join(format!("s{n}-{i}"));
        std::fs::create_dir_all(&ws)?;
        let p = SessionCreateParams {
            workspace: ws.display().to_string(),
            env: Some(self.env.clone()),
            reuse_default: false,
            ..Default::default()
        };
        let session = self.client.create(p).await?.id;
        let client = ().serve(open(&self.socket, &session, Names::Server).await?).await?;
        Ok(Seat { client, session })
    }
}

/// The curve: N sessions at once, each listing tools and calling.
async fn curve(side: &Side) -> anyhow::Result<Vec<String>> {
    let (daemon, home, label) = (&side.daemon, &side.home, &side.label);
    let mut rows = Vec::new();
    let (own, _child) = fixture_client().await?;
    let own = Arc::new(own);
    let opener = Opener {
        client: Arc::new(daemon.client().await?),
        socket: daemon.socket().to_path_buf(),
        root: home.root().to_path_buf(),
        env: shell_env(home, &[]),
    };
    for n in SIZES {
        eprintln!("sessions: {n} at once, {label}");
        tokio::time::sleep(Duration::from_millis(300)).await; // Pace: let the last size's detach settle
        let rss0 = rss_kib(daemon.pid())?;
        let cpu0 = crate::cpu(daemon.pid());
        let t = Instant::now();
        let mut set = tokio::task::JoinSet::new();
        for i in 0..n {
            set.spawn(opener.clone().seat(n, i));
        }
        let mut seats = Vec::with_capacity(n);
        while let Some(s) = set.join_next().await {
            seats.push(Arc::new(s??));
        }
        let opened = t.elapsed();
        let rss_opened = rss_kib(daemon.pid())?;
        // All listing at once, then all calling at once.
        let mut set = tokio::task::JoinSet::new();
        for s in &seats {
            let s = s.clone();
            set.spawn(async move {
                let t = Instant::now();
                let l = s.client.list_all_tools().await?;
                anyhow::ensure!(!l.is_empty(), "no tools");
                anyhow::Ok(t.elapsed())
            });
        }
        let mut lists = Vec::with_capacity(n);
        while let Some(r) = set.join_next().await {
            lists.push(r??);
        }
        let rss_listed = rss_kib(daemon.pid())?;
        let mut set = tokio::task::JoinSet::new();
        for (c, s) in seats.iter().enumerate() {
            let s = s.clone();
            set.spawn(async move {
                let mut took = Vec::with_capacity(CALLS_EACH);
                for i in 0..CALLS_EACH {
                    took.push(call(s.client.peer(), "fx__echo", &format!("{c}/{i}")).await?);
                }
                anyhow::Ok(took)
            });
        }
        let mut calls = Vec::with_capacity(n * CALLS_EACH);
        while let Some(r) = set.join_next().await {
            calls.extend(r??);
        }
        let rss1 = rss_kib(daemon.pid())?;
        let cpu1 = crate::cpu(daemon.pid());
        // The same callers on one client of the fixture itself: the server's share.
        let mut set = tokio::task::JoinSet::new();
        for c in 0..n {
            let own = own.clone();
            set.spawn(async move {
                let mut took = Vec::with_capacity(CALLS_EACH);
                for i in 0..CALLS_EACH {
                    took.push(call(own.peer(), "echo", &format!("{c}/{i}")).await?);
                }
                anyhow::Ok(took)
            });
        }
        let mut alone = Vec::with_capacity(n * CALLS_EACH);
        while let Some(r) = set.join_next().await {
            alone.extend(r??);
        }
        let (l, c, a) = (stats(lists), stats(calls), stats(alone));
        let per = (rss1 as f64 - rss0 as f64) / n as f64;
        let step = |a: u64, b: u64| (b as f64 - a as f64) / n as f64;
        let (per_open, per_list, per_call) =
            (step(rss0, rss_opened), step(rss_opened, rss_listed), step(rss_listed, rss1));
        let cpu_per_call = cpu1.us_since(cpu0, n * CALLS_EACH);
        rows.push(format!(
            "| {label}: {n} sessions at once (opened in {:.0} ms): `tools/list` p50 / p99 | {:.2} / {:.2} ms | | p50 ≤ 20 ms at 100 ({}) |",
            ms(opened),
            ms(l.median),
            ms(l.p99),
            load()
        ));
        rows.push(format!(
            "| {label}: {n} sessions: call p50 / p99 ({CALLS_EACH} each); the same callers on the fixture itself {:.2} / {:.2} ms | {:.2} / {:.2} ms | p99 {:+.2} ms beyond the server | ≤ +20 ms at 100 ({}) |",
            ms(a.median),
            ms(a.p99),
            ms(c.median),
            ms(c.p99),
            ms(c.p99) - ms(a.p99),
            load()
        ));
        rows.push(format!(
            "| {label}: {n} sessions: daemon RSS {:.1} → {:.1} MiB, per session (opening {per_open:.0}, listing {per_list:.0}, calling {per_call:.0} KiB); daemon CPU per call (whole run) {cpu_per_call} µs | {per:.0} KiB | | ≤ 100 KiB at 100 |",
            rss0 as f64 / 1024.0,
            rss1 as f64 / 1024.0,
        ));
        // Close them: the next size starts from none.
        for s in seats {
            let Ok(s) = Arc::try_unwrap(s) else { anyhow::bail!("a seat is still shared") };
            let _ = s.client.cancel().await;
            opener.client.close(SessionIdParams { id: s.session }).await?;
        }
    }
    Ok(rows)
}
