//! Issue 43: what `gemctl top` costs. A daemon with 20 stdio servers held by a session; windows
//! of [`WINDOW`] alternate between nobody watching and one `gemctl top` watching (its default
//! 1 s poll, on a real terminal: tmux). Top's own CPU, and the daemon's CPU in both kinds of
//! window, whose difference is what watching costs the daemon.

use std::time::Duration;

use geminid_protocol::api::McpApiClient;
use geminid_protocol::mcp::StartParams;
use geminid_tests::mcp::{new_session, stdio, write_user_settings};
use geminid_tests::tmux::Tmux;
use geminid_tests::{Daemon, TestHome};
use serde_json::{Map, Value};

use crate::cpu;

const SERVERS: usize = 20;
const WINDOW: Duration = Duration::from_secs(20);
const ROUNDS: usize = 3;

/// Percent of one core used over `window`.
fn percent(ns: u64, window: Duration) -> f64 {
    ns as f64 / window.as_nanos() as f64 * 100.0
}

pub async fn bench() -> anyhow::Result<Vec<String>> {
    let home = TestHome::new()?;
    // Twenty launch specs (the same spec would be one shared process).
    let mut servers = Map::new();
    for i in 0..SERVERS {
        let n = (i + 1).to_string();
        servers.insert(format!("s{i:02}"), stdio(&["--tools", &n]));
    }
    write_user_settings(&home, Value::Object(servers))?;
    let daemon = Daemon::launch(&home).log(crate::BENCH_LOG).start().await?;
    let client = daemon.client().await?;
    let session = new_session(&client, &home).await?;
    let started = client.mcp_start(StartParams { session, wait: true }).await?;
    anyhow::ensure!(started.servers.len() == SERVERS, "{} servers started", started.servers.len());
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (mut alone, mut watched, mut own) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        eprintln!("top: round {} of {ROUNDS}", round + 1);
        let before = cpu(daemon.pid());
        tokio::time::sleep(WINDOW).await;
        alone.push(percent(cpu(daemon.pid()).ns.saturating_sub(before.ns), WINDOW));

        let tmux = Tmux::gemctl(&home, &["top"], (120, 40), &[])?;
        tmux.until(Duration::from_secs(10), "the servers", |s| s.contains("Servers (20)")).await?;
        // Its start (a connection, a subscription) is not what is measured: its steady state.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let pid = tmux.program_pid().ok_or_else(|| anyhow::anyhow!("no gemctl top process"))?;
        let (top0, daemon0) = (cpu(pid), cpu(daemon.pid()));
        tokio::time::sleep(WINDOW).await;
        own.push(percent(cpu(pid).ns.saturating_sub(top0.ns), WINDOW));
        watched.push(percent(cpu(daemon.pid()).ns.saturating_sub(daemon0.ns), WINDOW));
        drop(tmux);
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let list = |v: &[f64]| v.iter().map(|p| format!("{p:.2}")).collect::<Vec<_>>().join(", ");
    let rows = vec![
        format!(
            "| `gemctl top` watching {SERVERS} servers (1 s poll), its own CPU, {ROUNDS} windows of {} s | {:.2}% of a core ({}) | | ≤ 1% |",
            WINDOW.as_secs(),
            median(own.clone()),
            list(&own)
        ),
        format!(
            "| the daemon while one `top` watches, minus while none does | {:+.2}% of a core ({:.2}% against {:.2}%) | | ≤ 1% |",
            median(watched.clone()) - median(alone.clone()),
            median(watched.clone()),
            median(alone.clone())
        ),
    ];
    Ok(rows)
}
