//! `geminid-bench telemetry`: what telemetry costs a call (issue 70: off adds nothing
//! measurable, on at most 20 µs of daemon CPU per call). Three daemons at once, each in its own
//! home with its own fixture, their calls interleaved call by call (the order turned every
//! call) so all three see the same machine: telemetry off; OTLP/HTTP export on to a loopback
//! collector (the tests' receiver, decoding every request, in this process); and only
//! Prometheus `/metrics` (`--metrics-listen`), scraped once a second as Prometheus would.
//! Per call: its round trip's median and p99, and the daemon's CPU (all its threads, the
//! exporter's included) over the whole run divided by the calls.

use std::time::{Duration, Instant};

use geminid_protocol::client::Client;
use geminid_tests::otlp::Receiver;
use geminid_tests::{Daemon, TestHome};

use crate::tools::{FixtureIo, fixture_home, session, via_geminid};
use crate::{cpu, stats, us};

const CALLS: usize = 3_000;
const WARMUP: usize = 300;
const IO: FixtureIo = FixtureIo::EventLoop;

/// One daemon of the comparison.
struct Side {
    label: &'static str,
    home: TestHome,
    daemon: Daemon,
    client: Client,
    session: String,
    samples: Vec<Duration>,
}

async fn side(
    label: &'static str,
    otlp: Option<&str>,
    metrics: Option<&str>,
) -> anyhow::Result<Side> {
    let home = fixture_home(&[IO])?;
    if let Some(endpoint) = otlp {
        let path = home.root().join("home/.gemini/settings.json");
        let mut settings: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path)?)?;
        settings["telemetry"] = serde_json::json!({ "enabled": true, "otlpEndpoint": endpoint, "otlpProtocol": "http" });
        std::fs::write(&path, serde_json::to_string(&settings)?)?;
    }
    let args: Vec<&str> = metrics.map(|a| vec!["--metrics-listen", a]).unwrap_or_default();
    let daemon = Daemon::launch(&home).args(&args).log(crate::BENCH_LOG).start().await?;
    let (client, session) = session(&daemon, &home).await?;
    Ok(Side { label, home, daemon, client, session, samples: Vec::with_capacity(CALLS) })
}

pub async fn bench() -> anyhow::Result<Vec<String>> {
    let collector = Receiver::start().await?;
    let metrics = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.to_string();
    let mut sides = vec![
        side("telemetry off", None, None).await?,
        side("OTLP/HTTP export on (loopback collector)", Some(&collector.endpoint), None).await?,
        side("Prometheus `/metrics` only, scraped each second", None, Some(&metrics)).await?,
    ];
    let scraper = tokio::spawn(scrape(metrics));
    eprintln!("telemetry: {WARMUP} warm-up calls, then {CALLS} on each daemon, interleaved");
    for i in 0..WARMUP {
        for s in &sides {
            via_geminid(&s.client, &s.session, &IO.tool(), &format!("w{i}")).await?;
        }
    }
    let before: Vec<_> = sides.iter().map(|s| cpu(s.daemon.pid())).collect();
    for i in 0..CALLS {
        let n = sides.len();
        for k in 0..n {
            let s = &mut sides[(i + k) % n];
            let t = Instant::now();
            via_geminid(&s.client, &s.session, &IO.tool(), &format!("c{i}")).await?;
            s.samples.push(t.elapsed());
        }
    }
    let after: Vec<_> = sides.iter().map(|s| cpu(s.daemon.pid())).collect();
    scraper.abort();
    let mut rows = Vec::new();
    for ((s, b), a) in sides.iter_mut().zip(&before).zip(&after) {
        let st = stats(std::mem::take(&mut s.samples));
        rows.push(format!(
            "| `tools/call` echo, {}: round trip | {:.1} µs | {:.1} µs | |",
            s.label,
            us(st.median),
            us(st.p99)
        ));
        let target = if s.label == "telemetry off" { "" } else { "≤ off + 20 µs" };
        rows.push(format!(
            "| `tools/call` echo, {}: daemon CPU per call | {} | | {target} |",
            s.label,
            a.since(*b, CALLS)
        ));
        let _ = &s.home;
    }
    Ok(rows)
}

/// GET `/metrics` at `addr` each second, as Prometheus' default scrape would (a little more
/// often).
async fn scrape(addr: String) {
    let client = reqwest::Client::new();
    loop {
        let _ = client.get(format!("http://{addr}/metrics")).send().await;
        // Pace: Prometheus' scrape interval.
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}
