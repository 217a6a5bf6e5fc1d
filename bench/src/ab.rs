//! `geminid-bench ab OTHER`: this build's daemon against another `geminid` binary (an older
//! build, say), both running at once, each in its own home with its own copies of the fixture,
//! their calls interleaved call by call (the order swapped every call) so both see the same
//! machine. On these VMs a phase can move the timed figures by more than a change does; two
//! runs made minutes apart cannot tell such a change, this can.

use std::path::Path;
use std::time::{Duration, Instant};

use geminid_protocol::api::DaemonApiClient;
use geminid_protocol::client::Client;
use geminid_protocol::daemon::HelloParams;
use geminid_tests::{Daemon, TestHome, bin};

use crate::tools::{FixtureIo, fixture_home, session, via_geminid};
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
    let home = fixture_home(&FixtureIo::ALL)?;
    let daemon = Daemon::launch(&home).binary(binary).log(crate::BENCH_LOG).start().await?;
    let (client, session) = session(&daemon, &home).await?;
    Ok(Side { _home: home, _daemon: daemon, client, session })
}

/// What each call is.
#[derive(Clone, Copy)]
enum Call {
    Hello,
    Echo(FixtureIo),
}

impl Call {
    fn label(self) -> String {
        match self {
            Self::Hello => "`daemon/hello` round trip".to_owned(),
            Self::Echo(io) => format!("`tools/call` echo, {}", io.label()),
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
            Self::Echo(io) => {
                via_geminid(&s.client, &s.session, &io.tool(), &format!("ab {i}")).await?
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
    let calls = [Call::Hello, Call::Echo(FixtureIo::EventLoop), Call::Echo(FixtureIo::TokioStdio)];
    for call in calls {
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
