//! Issue 67, item 2: what a daemon at rest costs the machine. Its threads' wake-ups (times put
//! on a CPU, `/proc/PID/task/*/schedstat`) per second over [`WINDOW`] with no server and with
//! [`SERVERS`] idle fixture servers kept warm (their keep-alive pings included), and the
//! wake-ups caused by [`STARTS`] unrelated programs started elsewhere on the machine (each opens
//! `/etc/ld.so.cache`). The daemon reads the system settings from Gemini CLI's default path
//! (`/etc/gemini-cli/settings.json`), as a user's does; on a machine without that folder its
//! watcher watches `/etc`. Each figure has the 1-minute load average beside it: wake-ups of an
//! idle process depend little on load, but the machine's own process starts are counted too.
//! `rest OTHER` measures the `geminid` binary OTHER the same way, after this build's.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use geminid_protocol::api::McpApiClient;
use geminid_protocol::mcp::StartParams;
use geminid_tests::mcp::{new_session, stdio, write_user_settings};
use geminid_tests::{Daemon, TestHome};
use serde_json::{Map, Value};

const WINDOW: Duration = Duration::from_secs(20);
const SERVERS: usize = 5;
const STARTS: usize = 2_000;
const SYSTEM_SETTINGS: &str = "GEMINI_CLI_SYSTEM_SETTINGS_PATH=/etc/gemini-cli/settings.json";

/// The machine's load (1-minute average), printed beside figures measured on it.
pub(crate) fn load() -> String {
    let l = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    l.split_whitespace().next().unwrap_or("?").to_owned()
}

/// Each thread of `pid` by id: its name (numbers dropped: sled-io-3), the times it was put on
/// a CPU and its CPU time in ns.
fn threads(pid: u32) -> BTreeMap<String, (String, u64, u64)> {
    let mut out = BTreeMap::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return out };
    for t in tasks.flatten() {
        let name = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        let name = name.trim().trim_end_matches(|c: char| c.is_ascii_digit()).to_owned();
        let stat = std::fs::read_to_string(t.path().join("schedstat")).unwrap_or_default();
        let f: Vec<u64> = stat.split_whitespace().filter_map(|x| x.parse().ok()).collect();
        let tid = t.file_name().to_string_lossy().into_owned();
        out.insert(tid, (name, f.get(2).copied().unwrap_or(0), f.first().copied().unwrap_or(0)));
    }
    out
}

/// Wake-ups and CPU ns between two counts, over the threads in both (a thread that ended
/// meanwhile, such as an idle blocking-pool thread, would otherwise subtract its whole life),
/// and the wake-ups by thread name.
fn since(
    before: &BTreeMap<String, (String, u64, u64)>,
    after: &BTreeMap<String, (String, u64, u64)>,
) -> (u64, u64, BTreeMap<String, u64>) {
    let (mut runs, mut ns, mut by_name) = (0, 0, BTreeMap::new());
    for (tid, (name, r1, n1)) in after {
        let (r0, n0) = before.get(tid).map_or((0, 0), |(_, r, n)| (*r, *n));
        runs += r1 - r0.min(*r1);
        ns += n1 - n0.min(*n1);
        *by_name.entry(name.clone()).or_default() += r1 - r0.min(*r1);
    }
    (runs, ns, by_name)
}

/// The threads that woke most: `name n/s`.
fn top_threads(by_name: &BTreeMap<String, u64>, secs: f64) -> String {
    let mut d: Vec<(u64, &String)> = by_name.iter().map(|(k, v)| (*v, k)).collect();
    d.sort_unstable_by(|a, b| b.cmp(a));
    let parts: Vec<String> = d
        .iter()
        .take(3)
        .filter(|(n, _)| *n > 0)
        .map(|(n, k)| format!("{k} {:.1}/s", *n as f64 / secs))
        .collect();
    parts.join(", ")
}

/// Wake-ups per second of `daemon` over [`WINDOW`], and which threads.
async fn at_rest(daemon: &Daemon) -> String {
    let (l0, t0) = (load(), threads(daemon.pid()));
    tokio::time::sleep(WINDOW).await;
    let (runs, ns, by_name) = since(&t0, &threads(daemon.pid()));
    let secs = WINDOW.as_secs_f64();
    format!(
        "{:.1}/s, {:.0} µs CPU/s (load {l0}–{}; {})",
        runs as f64 / secs,
        ns as f64 / secs / 1e3,
        load(),
        top_threads(&by_name, secs)
    )
}

/// Wake-ups of `daemon` per unrelated program started ([`STARTS`] `/bin/true`, one after the
/// other), less its rate at rest over the same time (`rest_per_s`).
fn per_start(daemon: &Daemon, rest_per_s: f64) -> anyhow::Result<String> {
    let (l0, t0) = (load(), threads(daemon.pid()));
    let t = Instant::now();
    for _ in 0..STARTS {
        let status = Command::new("/bin/true").stdin(Stdio::null()).status()?;
        anyhow::ensure!(status.success(), "/bin/true failed");
    }
    let took = t.elapsed().as_secs_f64();
    let (runs, ns, _) = since(&t0, &threads(daemon.pid()));
    let woken = runs as f64 - rest_per_s * took;
    Ok(format!(
        "{:.3} per start ({:.0} in all, {:.1} µs CPU per start; load {l0}–{})",
        woken.max(0.0) / STARTS as f64,
        woken.max(0.0),
        ns as f64 / STARTS as f64 / 1e3,
        load()
    ))
}

fn rate(cell: &str) -> f64 {
    cell.split('/').next().and_then(|r| r.parse().ok()).unwrap_or(0.0)
}

/// The three figures for one binary (`None`: this build's).
async fn measure(binary: Option<&Path>) -> anyhow::Result<[String; 3]> {
    let home = TestHome::new()?;
    let launch = Daemon::launch(&home).log(crate::BENCH_LOG).under(&["env", SYSTEM_SETTINGS]);
    let launch = match binary {
        Some(b) => launch.binary(b),
        None => launch,
    };
    let daemon = launch.start().await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let none = at_rest(&daemon).await;
    let starts = per_start(&daemon, rate(&none))?;

    let mut servers = Map::new();
    for i in 0..SERVERS {
        let n = (i + 1).to_string();
        servers.insert(format!("s{i}"), stdio(&["--tools", &n]));
    }
    write_user_settings(&home, Value::Object(servers))?;
    let client = daemon.client().await?;
    let session = new_session(&client, &home).await?;
    let started = client.mcp_start(StartParams { session, wait: true }).await?;
    anyhow::ensure!(started.servers.len() == SERVERS, "{} servers started", started.servers.len());
    drop(client); // the session's client goes; the servers are kept warm
    tokio::time::sleep(Duration::from_secs(2)).await;
    let five = at_rest(&daemon).await;
    Ok([none, five, starts])
}

pub async fn bench(other: Option<&Path>) -> anyhow::Result<Vec<String>> {
    eprintln!("rest: this build ({} s twice, {STARTS} process starts)", WINDOW.as_secs());
    let this = measure(None).await?;
    let that = match other {
        Some(b) => {
            eprintln!("rest: {}", b.display());
            Some(measure(Some(b)).await?)
        }
        None => None,
    };
    let labels = [
        "daemon wake-ups at rest, no server".to_owned(),
        format!("daemon wake-ups at rest, {SERVERS} idle servers kept warm"),
        format!("daemon wake-ups per unrelated program started ({STARTS} `/bin/true`)"),
    ];
    Ok(labels
        .iter()
        .enumerate()
        .map(|(i, label)| {
            let other = that.as_ref().map_or("", |t| t[i].as_str());
            format!("| {label} | {} | {other} | ≤ 1/s beyond pings; 0 per start |", this[i])
        })
        .collect())
}
