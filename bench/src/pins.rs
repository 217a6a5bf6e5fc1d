//! Issue 44: what tool-definition pins cost. In process, comparing a listing of 1,000 tools
//! with its pins (canonical forms, hashes, the comparison), against what the daemon already does
//! with that listing (its schemas compiled, once per listing); then two daemons side by side,
//! one pinning (`enforce`, the default) and one not (`--tool-pinning off`): a server of 1,000
//! tools restarted and listed again, and a tool call, interleaved.

use std::time::{Duration, Instant};

use geminid::testing::{Pins, Store, canon};
use geminid_protocol::api::{McpApiClient, SessionApiClient, ToolsApiClient};
use geminid_protocol::client::Client;
use geminid_protocol::mcp::{ServerParams, StartParams};
use geminid_protocol::pins::PinMode;
use geminid_protocol::session::SessionCreateParams;
use geminid_protocol::tools::ToolsCallParams;
use geminid_tests::mcp::{shell_env, stdio, write_user_settings};
use geminid_tests::{Daemon, TestHome};
use serde_json::{Value, json};

use crate::{ms, stats, us};

const TOOLS: usize = 1_000;
const ROUNDS: usize = 30;
const RESTARTS: usize = 10;
const CALLS: usize = 2_000;

/// Tools as the fixture's `--tools N` lists them.
fn listing(n: usize) -> Vec<Value> {
    (0..n)
        .map(|i| {
            json!({"name": format!("t{i}"), "description": "A generated tool", "inputSchema": {"type": "object", "properties": {"text": {"type": "string", "description": "what to echo"}, "count": {"type": ["integer", "null"]}}, "required": ["text"]}})
        })
        .collect()
}

fn in_process() -> anyhow::Result<(Duration, Duration, Duration)> {
    let tools = listing(TOOLS);
    let refs: Vec<&Value> = tools.iter().collect();
    let pins = Pins::with_key_text(Store::temporary()?, &"ab".repeat(32), PinMode::Enforce);
    let t = Instant::now();
    let first = pins.check("k", "srv", "bench", &canon::items(&refs, &[], &[]));
    let first_use = t.elapsed();
    anyhow::ensure!(first.first_use, "not pinned: {:?}", first.problem);
    let (mut checks, mut compiles) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        let t = Instant::now();
        let v = pins.check("k", "srv", "bench", &canon::items(&refs, &[], &[]));
        checks.push(t.elapsed());
        anyhow::ensure!(v.differs.is_empty());
        let t = Instant::now();
        for tool in &tools {
            let _ = jsonschema::validator_for(&tool["inputSchema"]);
        }
        compiles.push(t.elapsed());
    }
    Ok((first_use, stats(checks).median, stats(compiles).median))
}

struct Side {
    _home: TestHome,
    daemon: Daemon,
    client: Client,
    session: String,
}

async fn side(pinning: &str) -> anyhow::Result<Side> {
    let home = TestHome::allowing_mcp()?;
    let n = TOOLS.to_string();
    write_user_settings(&home, json!({ "big": stdio(&["--tools", &n]) }))?;
    let daemon = Daemon::launch(&home)
        .args(&["--tool-pinning", pinning])
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

async fn restart(s: &Side) -> anyhow::Result<Duration> {
    let t = Instant::now();
    let p = ServerParams { session: Some(s.session.clone()), name: "big".into() };
    let st = s.client.mcp_restart(p).await?;
    anyhow::ensure!(st.tools == Some(TOOLS as u32 + 6), "{st:?}");
    Ok(t.elapsed())
}

async fn call(s: &Side) -> anyhow::Result<Duration> {
    let p = ToolsCallParams {
        session: s.session.clone(),
        name: "mcp_big_echo".into(),
        args: json!({"text": "x"}).as_object().cloned(),
        call_id: None,
        confirmed: false,
    };
    let t = Instant::now();
    s.client.tools_call(p).await?;
    Ok(t.elapsed())
}

pub(crate) async fn bench() -> anyhow::Result<Vec<String>> {
    eprintln!("pins: {TOOLS} tools compared in process, then two daemons side by side");
    let (first_use, check, compile) = in_process()?;
    let on = side("enforce").await?;
    let off = side("off").await?;
    let (mut r_on, mut r_off) = (Vec::new(), Vec::new());
    for _ in 0..RESTARTS {
        r_on.push(restart(&on).await?);
        r_off.push(restart(&off).await?);
    }
    let (mut c_on, mut c_off) = (Vec::new(), Vec::new());
    for _ in 0..CALLS / 50 {
        for _ in 0..50 {
            c_on.push(call(&on).await?);
        }
        for _ in 0..50 {
            c_off.push(call(&off).await?);
        }
    }
    let (r_on, r_off) = (stats(r_on).median, stats(r_off).median);
    let (c_on, c_off) = (stats(c_on).median, stats(c_off).median);
    let rows = vec![
        format!(
            "| pins, {TOOLS} tools: a listing compared with its pins, in process / its schemas compiled (median of {ROUNDS}) | {:.2} ms / {:.2} ms | {:.2}× | ≤ 5 ms added to a listing |",
            ms(check),
            ms(compile),
            check.as_secs_f64() / compile.as_secs_f64()
        ),
        format!(
            "| pins, {TOOLS} tools: pinned on first use (hashed, signed, written, flushed) | {:.2} ms | | once per server |",
            ms(first_use)
        ),
        format!(
            "| pins, {TOOLS} tools: the server restarted and listed, `enforce` / `off` (median of {RESTARTS}, interleaved) | {:.1} ms / {:.1} ms | {:+.1} ms | ≤ 5 ms |",
            ms(r_on),
            ms(r_off),
            ms(r_on) - ms(r_off)
        ),
        format!(
            "| pins: a tool call, `enforce` / `off` (median of {CALLS}, blocks of 50 interleaved) | {:.0} µs / {:.0} µs | {:+.0} µs | nothing added |",
            us(c_on),
            us(c_off),
            us(c_on) - us(c_off)
        ),
    ];
    drop((on.daemon, off.daemon));
    Ok(rows)
}
