//! Issue 72: what artifact pinning costs the start of an unchanged server. Two daemons side by
//! side, one with `--artifact-pinning enforce` and one with `off`, each running the fixture as
//! a stdio server (an executable: its record is checked by a `stat` against the recorded one);
//! each restarted `RESTARTS` times, interleaved. Two figures per restart: from the daemon's
//! "starting again" to its "started … (pid N)" in the server's log (1 ms resolution: the check
//! lies between the two), and `mcp/restart`'s round trip (the whole restart, handshake and
//! listing included).

use std::time::{Duration, Instant};

use geminid_protocol::api::{McpApiClient, SessionApiClient};
use geminid_protocol::client::Client;
use geminid_protocol::mcp::{LogsParams, ServerParams, ServerState, StartParams};
use geminid_protocol::session::SessionCreateParams;
use geminid_tests::mcp::{fixture, shell_env, write_user_settings};
use geminid_tests::{Daemon, TestHome};
use serde_json::json;

use crate::{ms, stats};

const RESTARTS: usize = 60;

struct Side {
    _home: TestHome,
    daemon: Daemon,
    client: Client,
    session: String,
}

async fn side(mode: &str) -> anyhow::Result<Side> {
    let home = TestHome::allowing_mcp()?;
    // A copy of its own: a rebuild of the fixture meanwhile would be a changed executable.
    let own = home.root().join("mcp-fixture");
    std::fs::copy(fixture(), &own)?;
    write_user_settings(&home, json!({ "srv": {"command": own.display().to_string()} }))?;
    let daemon = Daemon::launch(&home)
        .args(&["--artifact-pinning", mode])
        .log(crate::BENCH_LOG)
        .start()
        .await?;
    let client = daemon.client().await?;
    let session = client
        .create(SessionCreateParams {
            workspace: home.workspace().display().to_string(),
            env: Some(shell_env(&home, &[])),
            reuse_default: false,
            ..Default::default()
        })
        .await?
        .id;
    client.mcp_start(StartParams { session: session.clone(), wait: true }).await?;
    Ok(Side { _home: home, daemon, client, session })
}

/// Milliseconds into the day of an RFC 3339 time the daemon wrote (`…T01:02:03.456Z`).
fn at_ms(at: &str) -> anyhow::Result<i64> {
    let time = at.split('T').nth(1).unwrap_or_default().trim_end_matches('Z');
    let mut parts = time.split(':');
    let mut next = || -> anyhow::Result<f64> {
        Ok(parts.next().ok_or_else(|| anyhow::anyhow!("not a time: {at}"))?.parse()?)
    };
    let (h, m, s) = (next()?, next()?, next()?);
    Ok(((h * 3600.0 + m * 60.0 + s) * 1000.0).round() as i64)
}

/// One restart: (from "starting again" to the spawn, the round trip).
async fn restart(s: &Side) -> anyhow::Result<(Duration, Duration)> {
    let server = ServerParams { session: Some(s.session.clone()), name: "srv".into() };
    let t = Instant::now();
    let st = s.client.mcp_restart(server.clone()).await?;
    let trip = t.elapsed();
    anyhow::ensure!(st.state == ServerState::Connected, "{st:?}");
    let log = s.client.mcp_logs(LogsParams { server, lines: Some(20) }).await?.lines;
    let again = log
        .iter()
        .rposition(|l| l.text.ends_with("starting again"))
        .ok_or_else(|| anyhow::anyhow!("no restart in the log: {log:?}"))?;
    let spawn = log[again..]
        .iter()
        .find(|l| l.text.starts_with("started ") && l.text.contains("(pid "))
        .ok_or_else(|| anyhow::anyhow!("no spawn after the restart: {log:?}"))?;
    // Across midnight, a day later.
    let gap = (at_ms(&spawn.at)? - at_ms(&log[again].at)?).rem_euclid(86_400_000);
    Ok((Duration::from_millis(u64::try_from(gap)?), trip))
}

/// The rows of `geminid-bench pins` for artifact pinning.
pub(crate) async fn bench() -> anyhow::Result<Vec<String>> {
    eprintln!("artifact pins: an unchanged executable restarted {RESTARTS} times, enforce / off");
    let on = side("enforce").await?;
    let off = side("off").await?;
    let st = on.client.mcp_list_servers(None).await?;
    anyhow::ensure!(
        st.servers.iter().any(|s| s.artifact.as_ref().is_some_and(|a| a.pinned.is_some())),
        "enforce recorded nothing: {st:?}"
    );
    let (mut g_on, mut g_off, mut t_on, mut t_off) = (vec![], vec![], vec![], vec![]);
    for _ in 0..RESTARTS {
        let (g, t) = restart(&on).await?;
        g_on.push(g);
        t_on.push(t);
        let (g, t) = restart(&off).await?;
        g_off.push(g);
        t_off.push(t);
    }
    let (g_on, g_off) = (stats(g_on).median, stats(g_off).median);
    let (t_on, t_off) = (stats(t_on).median, stats(t_off).median);
    let rows = vec![
        format!(
            "| artifact pins: an unchanged executable, \"starting again\" → spawned, `enforce` / `off` (median of {RESTARTS}, interleaved, 1 ms resolution) | {:.0} ms / {:.0} ms | {:+.0} ms | ≤ +20 ms |",
            ms(g_on),
            ms(g_off),
            ms(g_on) - ms(g_off)
        ),
        format!(
            "| artifact pins: the same restarts' `mcp/restart` round trip, `enforce` / `off` | {:.1} ms / {:.1} ms | {:+.1} ms | ≤ +20 ms |",
            ms(t_on),
            ms(t_off),
            ms(t_on) - ms(t_off)
        ),
    ];
    drop((on.daemon, off.daemon));
    Ok(rows)
}
