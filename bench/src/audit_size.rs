//! Issue 67, item 5: the audit database's size on disk as calls go by. One daemon with the
//! fixture's `echo`, calls on the socket with [`IN_FLIGHT`] at once, the data directory's size
//! (`du`: blocks allocated) at each checkpoint, [`SETTLE`] after its last call (so that sled's
//! segment cleaning has run), and after a clean stop. `audit-size OTHER` measures the `geminid`
//! binary OTHER the same way, after this build's.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use futures::StreamExt;
use geminid_protocol::api::ToolsApiClient;
use geminid_protocol::tools::ToolsCallParams;
use geminid_tests::mcp::{new_session, stdio, write_user_settings};
use geminid_tests::{Daemon, TestHome};
use nix::sys::signal::Signal;

const CHECKPOINTS: [usize; 3] = [10_000, 30_000, 100_000];
const IN_FLIGHT: usize = 32;
/// Longer than sled's segment cleaning interval (`store/flush.rs`, 10 s; 500 ms before).
const SETTLE: Duration = Duration::from_secs(12);

fn du_mib(dir: &Path) -> anyhow::Result<f64> {
    let out = Command::new("du").arg("-sk").arg(dir).output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let kib: f64 = text.split_whitespace().next().unwrap_or("0").parse()?;
    Ok(kib / 1024.0)
}

/// The sizes at each checkpoint and after the stop, and the calls per second.
async fn measure(binary: Option<&Path>) -> anyhow::Result<Vec<String>> {
    let home = TestHome::allowing_mcp()?;
    write_user_settings(&home, serde_json::json!({ "fx": stdio(&[]) }))?;
    let launch = Daemon::launch(&home).log(crate::BENCH_LOG);
    let launch = match binary {
        Some(b) => launch.binary(b),
        None => launch,
    };
    let mut daemon = launch.start().await?;
    let client = daemon.client().await?;
    let session = new_session(&client, &home).await?;
    let call = |i: usize| {
        let p = ToolsCallParams {
            session: session.clone(),
            name: "mcp_fx_echo".into(),
            args: serde_json::json!({ "text": i.to_string() }).as_object().cloned(),
            call_id: None,
            confirmed: false,
        };
        let client = &client;
        async move { client.tools_call(p).await }
    };
    let (mut done, mut out) = (0, Vec::new());
    for cp in CHECKPOINTS {
        let t = Instant::now();
        let mut calls = futures::stream::iter(done..cp).map(call).buffer_unordered(IN_FLIGHT);
        while let Some(r) = calls.next().await {
            r?;
        }
        let rate = (cp - done) as f64 / t.elapsed().as_secs_f64();
        done = cp;
        tokio::time::sleep(SETTLE).await;
        out.push(format!("{:.1} MiB ({rate:.0} calls/s)", du_mib(&home.data_dir())?));
    }
    drop(client);
    daemon.signal(Signal::SIGTERM)?;
    daemon.wait_exit(Duration::from_secs(30)).await?;
    out.push(format!("{:.1} MiB", du_mib(&home.data_dir())?));
    Ok(out)
}

pub async fn bench(other: Option<&Path>) -> anyhow::Result<Vec<String>> {
    eprintln!("audit-size: this build ({} calls)", CHECKPOINTS[2]);
    let this = measure(None).await?;
    let that = match other {
        Some(b) => {
            eprintln!("audit-size: {}", b.display());
            Some(measure(Some(b)).await?)
        }
        None => None,
    };
    let mut labels: Vec<String> = CHECKPOINTS
        .iter()
        .map(|n| format!("audit database on disk after {n} calls, {} s later", SETTLE.as_secs()))
        .collect();
    labels.push("… after a clean stop".to_owned());
    Ok(labels
        .iter()
        .enumerate()
        .map(|(i, label)| {
            let other = that.as_ref().map_or("", |t| t[i].as_str());
            format!("| {label} | {} | {other} | bounded |", this[i])
        })
        .collect())
}
