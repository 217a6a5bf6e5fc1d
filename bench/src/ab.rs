//! `geminid-bench ab OTHER`: this build's daemon against another `geminid` binary (an older
//! build, say), both running at once, each in its own home with its own copies of the fixture,
//! their calls interleaved call by call (the order swapped every call) so both see the same
//! machine. On these VMs a phase can move the timed figures by more than a change does; two
//! runs made minutes apart cannot tell such a change, this can.

use std::path::Path;
use std::time::{Duration, Instant};

use geminid_protocol::api::{DaemonApiClient, ToolsApiClient};
use geminid_protocol::client::Client;
use geminid_protocol::tools::{ToolsCallParams, ToolsListParams};
use geminid_protocol::types::HelloParams;
use geminid_tests::mcp::{fixture, write_user_settings};
use geminid_tests::{Daemon, TestHome, bin};
use serde_json::json;

use crate::tools::{echo_args, new_session};
use crate::{stats, us};

const CALLS: usize = 3_000;
const WARMUP: usize = 200;

/// One side of the comparison.
struct Side {
    _home: TestHome,
    _daemon: Daemon,
    client: Client,
    session: String,
}

async fn side(binary: &Path) -> anyhow::Result<Side> {
    let home = TestHome::new()?;
    let servers = json!({
        "fx": { "command": fixture() },
        "fxt": { "command": fixture(), "args": ["--tokio-stdio"] },
    });
    write_user_settings(&home, servers)?;
    let daemon = Daemon::start_binary(&home, binary, &[], crate::BENCH_LOG).await?;
    let client = daemon.client().await?;
    let session = new_session(&client, &home, "ws").await?;
    client.tools_list(ToolsListParams { session: session.clone(), raw: false }).await?;
    Ok(Side { _home: home, _daemon: daemon, client, session })
}

/// What each call is.
#[derive(Clone, Copy)]
enum Call {
    Hello,
    Echo(&'static str),
}

impl Call {
    fn label(self) -> &'static str {
        match self {
            Self::Hello => "`daemon/hello` round trip",
            Self::Echo("mcp_fx_echo") => "`tools/call` echo, fixture on its event loop",
            Self::Echo(_) => "`tools/call` echo, fixture on rmcp's `stdio()`",
        }
    }

    async fn run(self, s: &Side, i: usize) -> anyhow::Result<Duration> {
        let t = Instant::now();
        match self {
            Self::Hello => {
                let p = HelloParams {
                    protocol_version: geminid_protocol::PROTOCOL_VERSION,
                    client: None,
                };
                s.client.hello(p).await?;
            }
            Self::Echo(tool) => {
                let p = ToolsCallParams {
                    session: s.session.clone(),
                    name: tool.to_owned(),
                    args: Some(echo_args(&format!("ab {i}"))),
                    call_id: None,
                };
                s.client.tools_call(p).await?;
            }
        }
        Ok(t.elapsed())
    }
}

pub async fn bench(other: &Path) -> anyhow::Result<Vec<String>> {
    anyhow::ensure!(other.is_file(), "no geminid binary at {}", other.display());
    let this = side(&bin("geminid")).await?;
    let that = side(other).await?;
    let mut rows = Vec::new();
    for call in [Call::Hello, Call::Echo("mcp_fx_echo"), Call::Echo("mcp_fxt_echo")] {
        eprintln!("ab: {}", call.label());
        for i in 0..WARMUP {
            call.run(&this, i).await?;
            call.run(&that, i).await?;
        }
        let (mut a, mut b) = (Vec::with_capacity(CALLS), Vec::with_capacity(CALLS));
        for i in 0..CALLS {
            if i % 2 == 0 {
                a.push(call.run(&this, i).await?);
                b.push(call.run(&that, i).await?);
            } else {
                b.push(call.run(&that, i).await?);
                a.push(call.run(&this, i).await?);
            }
        }
        let (a, b) = (stats(a), stats(b));
        rows.push(format!(
            "| {}: this build / {} ({CALLS} calls each, interleaved) | {:.1} / {:.1} µs | {:.1} / {:.1} µs | {:+.1} µs |",
            call.label(),
            other.display(),
            us(a.median),
            us(b.median),
            us(a.p99),
            us(b.p99),
            us(a.median) - us(b.median),
        ));
    }
    Ok(rows)
}
