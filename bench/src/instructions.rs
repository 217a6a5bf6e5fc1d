//! The daemon's work per request in instructions, counted by callgrind. Unlike the timed
//! figures these do not depend on what else the machine is doing (the same binaries give the
//! same counts), so a change's effect on the daemon's own CPU shows even in a noisy phase.
//! User space only: the kernel's part of a request (system calls, wake-ups) is not counted.
//!
//! With `GEMINID_BENCH_CALLGRIND_DIR=DIR` set, the two dumps are copied there
//! (`status.callgrind`, `tools-call.callgrind`) for `callgrind_annotate --inclusive=yes`.

use std::path::Path;
use std::process::Command;

use geminid_protocol::api::DaemonApiClient;
use geminid_tests::Daemon;

use crate::tools::{FixtureIo, fixture_home, session, via_geminid};

const CALLS: u64 = 500;
const WARMUP: u64 = 100;

/// Instructions executed and first-level instruction-cache misses (of callgrind's simulated
/// cache), per request.
struct Counts {
    instructions: f64,
    i1_misses: f64,
}

pub async fn bench() -> anyhow::Result<Vec<String>> {
    if Command::new("valgrind").arg("--version").output().is_err() {
        return Ok(vec!["| instructions per request (skipped: no valgrind) | | | |".into()]);
    }
    let io = FixtureIo::EventLoop;
    let home = fixture_home(&[io])?;
    let out = home.root().join("callgrind.out");
    let out_arg = format!("--callgrind-out-file={}", out.display());
    let wrapper =
        ["valgrind", "--tool=callgrind", "--cache-sim=yes", "--instr-atstart=no", &out_arg];
    let daemon = Daemon::launch(&home).under(&wrapper).log(crate::BENCH_LOG).start().await?;
    let (client, session) = session(&daemon, &home).await?;
    let pid = daemon.pid();

    eprintln!("instructions: daemon/status");
    for _ in 0..WARMUP {
        client.status().await?;
    }
    control(pid, &["-i", "on"])?;
    for _ in 0..CALLS {
        client.status().await?;
    }
    let status = counts(pid, &out, 1)?;

    eprintln!("instructions: tools/call");
    let tool = io.tool();
    for i in 0..WARMUP {
        via_geminid(&client, &session, &tool, &format!("warm {i}")).await?;
    }
    control(pid, &["-i", "on"])?;
    for i in 0..CALLS {
        via_geminid(&client, &session, &tool, &format!("call {i}")).await?;
    }
    let tools_call = counts(pid, &out, 2)?;
    drop(client);
    drop(daemon);

    let row = |what: &str, c: &Counts| {
        format!(
            "| {what}: instructions in the daemon per request (callgrind, user space, {CALLS} requests) | {:.1}k | | I1 misses {:.2}k |",
            c.instructions / 1000.0,
            c.i1_misses / 1000.0
        )
    };
    Ok(vec![row("`daemon/status`", &status), row("`tools/call` echo", &tools_call)])
}

/// Run `callgrind_control` on the daemon.
fn control(pid: u32, args: &[&str]) -> anyhow::Result<()> {
    let status = Command::new("callgrind_control").args(args).arg(pid.to_string()).output()?;
    anyhow::ensure!(status.status.success(), "callgrind_control {args:?}: {status:?}");
    Ok(())
}

/// Stop counting, write the counts out (callgrind's `n`th dump, which also zeroes them) and
/// read them back per request.
fn counts(pid: u32, out: &Path, n: u32) -> anyhow::Result<Counts> {
    control(pid, &["-i", "off"])?;
    control(pid, &["-d"])?;
    let dump = out.with_extension(format!("out.{n}"));
    let text = std::fs::read_to_string(&dump)?;
    if let Some(dir) = std::env::var_os("GEMINID_BENCH_CALLGRIND_DIR") {
        let name = if n == 1 { "status.callgrind" } else { "tools-call.callgrind" };
        std::fs::create_dir_all(&dir)?;
        std::fs::copy(&dump, Path::new(&dir).join(name))?;
    }
    let field = |prefix: &str| text.lines().find_map(|l| l.strip_prefix(prefix));
    let (Some(events), Some(totals)) = (field("events: "), field("totals: ")) else {
        anyhow::bail!("no totals in {}", dump.display());
    };
    let total = |event: &str| -> anyhow::Result<f64> {
        let i = events
            .split_whitespace()
            .position(|e| e == event)
            .ok_or_else(|| anyhow::anyhow!("no {event} in {}", dump.display()))?;
        let v: u64 = totals.split_whitespace().nth(i).unwrap_or("0").parse()?;
        Ok(v as f64 / CALLS as f64)
    };
    Ok(Counts { instructions: total("Ir")?, i1_misses: total("I1mr")? })
}
