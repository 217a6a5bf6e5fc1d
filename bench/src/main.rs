//! Benchmark harness. Measures geminid side by side with a baseline in the same run (these
//! machines are noisy, so only ratios and differences measured together mean anything) and
//! prints a Markdown table for BENCHMARKS.md.
//!
//! Run: `cargo build --release --workspace && ./target/release/geminid-bench
//! [--poll-idle] [mcp|tools|instructions|policy|hooks|gateway|elicit|oauth|extensions|skills|commands|ab OTHER]` (`mcp`: only the MCP supervision figures;
//! `policy`: a policy decision against 1,000 rules; `policy-scale`: a daemon with 1,000 and
//! 10,000 policy rules (start, edit, list, check, memory); `gateway`: a call through `gemctl mcp serve`
//! against the same call on the socket, and 4 clients × 5 servers; `elicit`: an elicitation's
//! answer to its call's result; `oauth`: a call with a cached OAuth token against one without;
//! `extensions`: 20 extensions of 200 files verified at start, and a reload after one file changed;
//! `skills`: 500 skills discovered cold, and again after one SKILL.md changed; `commands`:
//! `commands/list`'s work over 500 command files, cold and warm; `pins`: tool-definition pins
//! over 1,000 tools, in process and with a daemon pinning against one that does not, then
//! artifact pins (`artifact_pins.rs`): an unchanged server's start, `enforce` against `off`; `top`:
//! `gemctl top`'s CPU watching 20 servers, and the daemon's with and without it; `telemetry`: a
//! call's round trip and daemon CPU with telemetry off, OTLP export on to a loopback collector,
//! and only `/metrics` scraped, interleaved; `rest [OTHER]`:
//! the daemon's wake-ups at rest and per unrelated program started (and OTHER's, a `geminid`);
//! `audit-size [OTHER]`: the audit database's size on disk after 10,000 to 100,000 calls;
//! `tools`: only the call path and catalog; `sessions`: 32 calls in flight on the daemon's
//! upgraded connection against the fixture alone, and 1 to 500 sessions at once; `instructions`: only the daemon's instructions per
//! request, which needs valgrind; `ab OTHER`: this build's daemon against the `geminid` binary
//! OTHER, calls interleaved; `--poll-idle`: idle CPUs poll instead of halting for the run,
//! see `idle.rs`). `relay …` is not a section: the bench starts itself as the byte relays
//! that measure the floor of a call's hops (`relay.rs`).

mod ab;
mod artifact_pins;
mod audit_size;
mod commands;
mod custom_tools;
mod elicit;
mod extensions;
mod gateway;
mod hooks;
mod idle;
mod instructions;
mod load;
mod mcp;
mod oauth;
mod pins;
mod policy;
mod policy_scale;
mod relay;
mod rest;
mod sessions;
mod skills;
mod telemetry;
mod tools;
mod top;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;
use geminid_protocol::api::DaemonApiClient;
use geminid_tests::{Daemon, TestHome, bin};

/// The daemon's own default log filter: benchmarks measure it as users run it.
pub(crate) const BENCH_LOG: &str = "info";

/// The last column of every table: the 1-minute load average while its row was measured.
const LOAD: &str = "load (1 min, low–high)";

const RPC_WARMUP: usize = 1_000;
const RPC_CALLS: usize = 20_000;
const PROCESS_RUNS: usize = 300;

#[derive(Debug)]
struct Stats {
    median: Duration,
    p99: Duration,
}

pub(crate) fn stats(mut samples: Vec<Duration>) -> Stats {
    samples.sort_unstable();
    let at = |q: f64| samples[((samples.len() as f64 - 1.0) * q).round() as usize];
    Stats { median: at(0.5), p99: at(0.99) }
}

pub(crate) fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// Every file under `dir` read whole: the baseline a check of those files is measured against.
pub(crate) fn read_all(dir: &std::path::Path) -> anyhow::Result<usize> {
    let mut n = 0;
    for entry in std::fs::read_dir(dir)? {
        let p = entry?.path();
        n += if p.is_dir() { read_all(&p)? } else { std::fs::read(&p)?.len() };
    }
    Ok(n)
}

pub(crate) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

pub(crate) fn rss_kib(pid: u32) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).context("no VmRSS")?;
    Ok(line.split_whitespace().nth(1).context("bad VmRSS")?.parse()?)
}

fn run_once(cmd: &mut Command) -> anyhow::Result<Duration> {
    let t = Instant::now();
    let status = cmd.status()?;
    let elapsed = t.elapsed();
    anyhow::ensure!(status.success(), "{cmd:?} failed: {status}");
    Ok(elapsed)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    anyhow::ensure!(bin("geminid").is_file(), "build first: cargo build --release --workspace");
    const USAGE: &str = "usage: geminid-bench [--poll-idle] [mcp|tools|instructions|policy|policy-scale|hooks|gateway|elicit|oauth|extensions|skills|commands|custom-tools|sessions [OTHER]|pins|top|telemetry|rest [OTHER]|audit-size [OTHER]|config [OTHER]|ab OTHER]";
    let argv: Vec<String> = std::env::args().skip(1).collect();
    if argv.first().is_some_and(|a| a == "relay") {
        return relay::run(&argv[1..]).await;
    }
    let (flags, args): (Vec<String>, Vec<String>) =
        argv.into_iter().partition(|a| a.starts_with("--"));
    let mut poll_idle = None;
    for flag in &flags {
        anyhow::ensure!(flag == "--poll-idle", "unknown option {flag}\n{USAGE}");
        poll_idle = Some(idle::hold()?);
    }
    let idle_row = idle::row(poll_idle.is_some());
    load::start();
    if let Some(section) = args.first() {
        let rows = match section.as_str() {
            "mcp" => mcp::bench().await?,
            "tools" => tools::bench().await?,
            "sessions" => sessions::bench(args.get(1).map(std::path::Path::new)).await?,
            "instructions" => instructions::bench().await?,
            "policy" => policy::bench().await?,
            "policy-scale" => policy_scale::bench().await?,
            "hooks" => hooks::bench().await?,
            "gateway" => gateway::bench().await?,
            "elicit" => elicit::bench().await?,
            "oauth" => oauth::bench().await?,
            "extensions" => extensions::bench().await?,
            "skills" => skills::bench().await?,
            "commands" => commands::bench().await?,
            "custom-tools" => custom_tools::bench().await?,
            "pins" => {
                let mut rows = pins::bench().await?;
                rows.extend(artifact_pins::bench().await?);
                rows
            }
            "top" => top::bench().await?,
            "telemetry" => telemetry::bench().await?,
            "rest" => rest::bench(args.get(1).map(std::path::Path::new)).await?,
            "audit-size" => audit_size::bench(args.get(1).map(std::path::Path::new)).await?,
            "config" => {
                // `config OTHER`: the same against another build's daemon.
                let home = TestHome::allowing_mcp()?;
                let launch = Daemon::launch(&home).log(BENCH_LOG);
                let launch = match args.get(1) {
                    Some(other) => launch.binary(std::path::Path::new(other)),
                    None => launch,
                };
                let daemon = launch.start().await?;
                config_bench(&home, &daemon).await?
            }
            "ab" => {
                let other = args.get(1).context(USAGE)?;
                ab::bench(std::path::Path::new(other)).await?
            }
            other => anyhow::bail!("unknown section {other}\n{USAGE}"),
        };
        let load = load::take();
        if section == "rest" || section == "audit-size" {
            println!("| measure | this build | OTHER | goal | {LOAD} |");
        } else if section == "ab" {
            println!(
                "| measure | median, this / other | p99, this / other | difference | {LOAD} |"
            );
        } else if section == "policy-scale" {
            println!(
                "| measure | median, with the rules | median, with one rule | difference | goal | {LOAD} |"
            );
        } else {
            println!("| measure | median | p99 | target | {LOAD} |");
        }
        println!("|---|---|---|---|---|{}", if section == "policy-scale" { "---|" } else { "" });
        println!("{idle_row} |");
        for row in rows {
            println!("{row} {load} |");
        }
        return Ok(());
    }
    eprintln!("rpc round trips");
    let home = TestHome::allowing_mcp()?;
    let daemon = Daemon::launch(&home).log(BENCH_LOG).start().await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rss_idle = rss_kib(daemon.pid())?;

    // 1. One call round trip over the socket, in process.
    let client = daemon.client().await?;
    for _ in 0..RPC_WARMUP {
        client.status().await?;
    }
    let mut samples = Vec::with_capacity(RPC_CALLS);
    for _ in 0..RPC_CALLS {
        let t = Instant::now();
        client.status().await?;
        samples.push(t.elapsed());
    }
    let rpc = stats(samples);
    // The same for `daemon/hello`, which touches no storage: the transport's share.
    let hello_params = || geminid_protocol::daemon::HelloParams {
        protocol_version: geminid_protocol::PROTOCOL_VERSION,
        client: None,
    };
    let mut samples = Vec::with_capacity(RPC_CALLS);
    for _ in 0..RPC_CALLS {
        let t = Instant::now();
        client.hello(hello_params()).await?;
        samples.push(t.elapsed());
    }
    let hello = stats(samples);
    drop(client);
    // The same call over the bare WebSocket halves, without the typed client's machinery.
    let raw = {
        use jsonrpsee::core::client::{TransportReceiverT, TransportSenderT};
        let (mut tx, mut rx) =
            geminid_protocol::client::connect_raw(daemon.socket(), 1 << 20).await?;
        let msg =
            r#"{"jsonrpc":"2.0","id":1,"method":"daemon/hello","params":{"protocolVersion":2}}"#;
        let mut samples = Vec::with_capacity(RPC_CALLS);
        for _ in 0..RPC_CALLS {
            let t = Instant::now();
            tx.send(msg.to_owned()).await?;
            rx.receive().await?;
            samples.push(t.elapsed());
        }
        stats(samples)
    };

    // Floor: the same size of message echoed over a Unix socket by a plain thread.
    let floor = {
        use std::io::{Read, Write};
        let (mut a, mut b) = std::os::unix::net::UnixStream::pair()?;
        let echo = std::thread::spawn(move || {
            let mut buf = [0u8; 128];
            while let Ok(n) = b.read(&mut buf) {
                if n == 0 || b.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        });
        let msg = [b'x'; 90];
        let mut back = [0u8; 90];
        let mut samples = Vec::with_capacity(RPC_CALLS);
        for _ in 0..RPC_CALLS {
            let t = Instant::now();
            a.write_all(&msg)?;
            a.read_exact(&mut back)?;
            samples.push(t.elapsed());
        }
        drop(a);
        let _ = echo.join();
        stats(samples)
    };

    eprintln!("gemctl status processes");
    // 2. A whole `gemctl status` process versus spawning `true`, interleaved so that both see
    //    the same machine conditions.
    let mut gemctl = home.gemctl_cmd(&["--no-autostart", "status"]);
    gemctl.stdout(Stdio::null()).stderr(Stdio::null());
    let mut trivial = Command::new("true");
    let (mut g, mut t) = (Vec::new(), Vec::new());
    for _ in 0..PROCESS_RUNS {
        g.push(run_once(&mut gemctl)?);
        t.push(run_once(&mut trivial)?);
    }
    let (g, t) = (stats(g), stats(t));
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rss_after = rss_kib(daemon.pid())?;

    eprintln!("configuration reloads");
    let config_rows = config_bench(&home, &daemon).await?;

    println!("| measure | median | p99 | target | {LOAD} |");
    println!("|---|---|---|---|---|");
    println!("{idle_row} |");
    let mut spine = Vec::new();
    spine.push(format!(
        "| `daemon/status` round trip over the socket ({RPC_CALLS} calls) | {:.1} µs | {:.1} µs | median ≤ 100 µs |",
        us(rpc.median),
        us(rpc.p99)
    ));
    spine.push(format!(
        "| `daemon/hello` round trip (no storage; {RPC_CALLS} calls) | {:.1} µs | {:.1} µs | |",
        us(hello.median),
        us(hello.p99)
    ));
    spine.push(format!(
        "| `daemon/hello` over the bare WebSocket, no typed client | {:.1} µs | {:.1} µs | |",
        us(raw.median),
        us(raw.p99)
    ));
    spine.push(format!(
        "| floor: 90-byte echo over a Unix socket to a thread, alongside | {:.1} µs | {:.1} µs | baseline |",
        us(floor.median),
        us(floor.p99)
    ));
    spine.push(format!(
        "| whole `gemctl status` process ({PROCESS_RUNS} runs) | {:.2} ms | {:.2} ms | median ≤ 3 ms |",
        ms(g.median),
        ms(g.p99)
    ));
    spine.push(format!(
        "| spawning `true`, measured alongside | {:.2} ms | {:.2} ms | baseline |",
        ms(t.median),
        ms(t.p99)
    ));
    spine.push(format!(
        "| `gemctl status` minus `true` | {:.2} ms | | ≤ 2 ms |",
        ms(g.median.saturating_sub(t.median))
    ));
    spine.push(format!(
        "| `gemctl status` / `true` | {:.1}× | | |",
        g.median.as_secs_f64() / t.median.as_secs_f64()
    ));
    spine.push(format!(
        "| daemon RSS, idle after start | {:.1} MiB | | ≤ 15 MiB |",
        rss_idle as f64 / 1024.0
    ));
    spine.push(format!(
        "| daemon RSS, idle after the runs above | {:.1} MiB | | ≤ 15 MiB |",
        rss_after as f64 / 1024.0
    ));
    spine.extend(config_rows);
    load::print(spine);
    drop(daemon);
    drop(home);
    load::print(mcp::bench().await?);
    load::print(tools::bench().await?);
    load::print(instructions::bench().await?);
    Ok(())
}

const WRITES: usize = 100;
const RELOADS: usize = 200;

fn servers_json(n: usize, tag: usize) -> String {
    let entries: Vec<String> = (0..n)
        .map(|i| format!(r#""s{i}": {{"command": "server-{i}", "args": ["--tag", "{tag}"], "env": {{"DEBUG": "1"}}}}"#))
        .collect();
    format!(r#"{{"mcpServers": {{{}}}}}"#, entries.join(", "))
}

/// Issue 3: settings write → `config/changed` latency, and the cost of a reload with 50
/// servers beside one with none, in the same run.
async fn config_bench(home: &TestHome, daemon: &Daemon) -> anyhow::Result<Vec<String>> {
    use geminid_protocol::api::{McpApiClient, SessionApiClient};
    use geminid_protocol::config::McpReloadParams;
    use geminid_protocol::event::Event;
    use geminid_protocol::event::EventsSubscribeParams;
    use geminid_protocol::session::SessionCreateParams;

    let client = daemon.client().await?;
    let env = [("GEMINI_CLI_TRUST_WORKSPACE".to_owned(), "true".to_owned())].into();
    let workspace = home.workspace().display().to_string();
    let session = client
        .create(SessionCreateParams {
            workspace,
            env: Some(env),
            reuse_default: false,
            ..Default::default()
        })
        .await?
        .id;
    let filter = EventsSubscribeParams {
        session: Some(session.clone()),
        kinds: Some(vec!["config/changed".into()]),
    };
    let mut events = client.subscribe_events(Some(filter)).await?;
    let user = home.root().join("home/.gemini/settings.json");

    let mut latency = Vec::with_capacity(WRITES);
    for i in 0..WRITES {
        let t = Instant::now();
        std::fs::write(&user, servers_json(1, i))?;
        let ev: Event = tokio::time::timeout(Duration::from_secs(10), events.next())
            .await?
            .context("subscription ended")??;
        latency.push(t.elapsed());
        drop(ev);
    }
    let latency = stats(latency);

    let reload = |n: usize| {
        let (client, session, user) = (&client, session.clone(), user.clone());
        async move {
            std::fs::write(&user, servers_json(n, 0))?;
            let params = || Some(McpReloadParams { session: Some(session.clone()) });
            client.mcp_reload(params()).await?;
            tokio::time::sleep(Duration::from_millis(700)).await; // let the watcher settle
            let mut samples = Vec::with_capacity(RELOADS);
            for _ in 0..RELOADS {
                let t = Instant::now();
                client.mcp_reload(params()).await?;
                samples.push(t.elapsed());
            }
            anyhow::Ok(stats(samples))
        }
    };
    let with_none = reload(0).await?;
    let with_fifty = reload(50).await?;
    Ok(vec![
        format!(
            "| settings write → `config/changed` event ({WRITES} writes, 50 ms debounce) | {:.1} ms | {:.1} ms | median ≤ 150 ms |",
            ms(latency.median),
            ms(latency.p99)
        ),
        format!(
            "| `mcp/reload` round trip, no servers configured ({RELOADS} calls) | {:.2} ms | {:.2} ms | baseline |",
            ms(with_none.median),
            ms(with_none.p99)
        ),
        format!(
            "| `mcp/reload` round trip, 50 servers configured ({RELOADS} calls) | {:.2} ms | {:.2} ms | |",
            ms(with_fifty.median),
            ms(with_fifty.p99)
        ),
        format!(
            "| reload cost of 50 servers (difference of the two above) | {:.2} ms | | |",
            ms(with_fifty.median.saturating_sub(with_none.median))
        ),
    ])
}

/// CPU time used so far by every thread of a process, and how many times its threads were
/// put on a CPU (`/proc/PID/task/*/schedstat`: run time in ns, wait time, timeslices).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Cpu {
    ns: u64,
    runs: u64,
}

impl Cpu {
    /// `"CPU µs, runs"` per call over `n` calls since `before`.
    pub(crate) fn since(self, before: Cpu, n: usize) -> String {
        let runs = self.runs.saturating_sub(before.runs) as f64 / n as f64;
        format!("{} µs, {runs:.1} runs", self.us_since(before, n))
    }

    /// CPU µs per call over `n` calls since `before`.
    pub(crate) fn us_since(self, before: Cpu, n: usize) -> String {
        format!("{:.1}", self.ns.saturating_sub(before.ns) as f64 / n as f64 / 1e3)
    }
}

pub(crate) fn cpu(pid: u32) -> Cpu {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return Cpu::default() };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| {
            let mut f = s.split_whitespace();
            Some(Cpu { ns: f.next()?.parse().ok()?, runs: f.nth(1)?.parse().ok()? })
        })
        .fold(Cpu::default(), |a, b| Cpu { ns: a.ns + b.ns, runs: a.runs + b.runs })
}
