//! Policy at scale through the daemon (issue 39): a user policy file of 1,000 or 10,000 rules
//! against one of a single rule, each measured in the same run. The first call after a
//! daemon's start (the launch, a session, the fixture server's start and its first call),
//! the first call after the file is edited, `policy/list` and `policy/check`, and the
//! daemon's resident memory afterwards.

use std::time::{Duration, Instant};

use geminid_protocol::api::{PolicyApiClient, SessionApiClient, ToolsApiClient};
use geminid_protocol::policy::{PolicyCheckParams, PolicyListParams};
use geminid_protocol::session::SessionCreateParams;
use geminid_tests::mcp::{fixture, shell_env, write_user_settings};
use geminid_tests::{Daemon, TestHome};
use serde_json::json;

use crate::policy::{ALLOW_FX, echo, rules};
use crate::{rss_kib, stats};

/// Rounds of each measure (daemons started per size).
const ROUNDS: usize = 3;
/// `policy/list` and `policy/check` asked this many times per daemon.
const ASKS: usize = 20;

/// What one daemon with `n` rules (plus the one that allows the fixture) measured.
struct Round {
    first: Duration,
    after_edit: Duration,
    list: Vec<Duration>,
    check: Vec<Duration>,
    rss_kib: u64,
}

async fn round(n: usize) -> anyhow::Result<Round> {
    let home = TestHome::new()?;
    write_user_settings(&home, json!({ "fx": { "command": fixture() } }))?;
    let dir = home.root().join("home/.gemini/policies");
    std::fs::create_dir_all(&dir)?;
    let file = dir.join("rules.toml");
    let text = format!("{}{ALLOW_FX}", rules(n));
    std::fs::write(&file, &text)?;
    let ws = home.root().join("ws");
    std::fs::create_dir_all(&ws)?;
    let started = Instant::now();
    let daemon = Daemon::launch(&home).log(crate::BENCH_LOG).start().await?;
    let client = daemon.client().await?;
    let p = SessionCreateParams {
        workspace: ws.display().to_string(),
        env: Some(shell_env(&home, &[])),
        ..Default::default()
    };
    let session = client.create(p).await?.id;
    client.tools_call(echo(&session)).await?;
    let first = started.elapsed();
    let mut list = Vec::with_capacity(ASKS);
    let mut check = Vec::with_capacity(ASKS);
    for _ in 0..ASKS {
        let t = Instant::now();
        let listed = client
            .policy_list(PolicyListParams { session: session.clone(), tier: Some("user".into()) })
            .await?;
        list.push(t.elapsed());
        anyhow::ensure!(listed.rules.len() > n, "{} rules listed", listed.rules.len());
        let t = Instant::now();
        let checked = client
            .policy_check(PolicyCheckParams {
                session: session.clone(),
                tool: "mcp_fx_echo".into(),
                args: Some(json!({"text": "hi"})),
                ..Default::default()
            })
            .await?;
        check.push(t.elapsed());
        anyhow::ensure!(checked.rule.is_some(), "{checked:?}");
    }
    // An edit: one more rule at the end. The daemon takes the file once it has settled and
    // its watcher has seen it; the call measured is the first after that, which reads it.
    std::fs::write(
        &file,
        format!("{text}[[rule]]\ntoolName = \"edited\"\ndecision = \"deny\"\npriority = 5\n"),
    )?;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let t = Instant::now();
    client.tools_call(echo(&session)).await?;
    let after_edit = t.elapsed();
    let rss_kib = rss_kib(daemon.pid())?;
    Ok(Round { first, after_edit, list, check, rss_kib })
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

pub async fn bench() -> anyhow::Result<Vec<String>> {
    let mut rows = Vec::new();
    for n in [1_000, 10_000] {
        eprintln!("policy: a daemon with {n} rules against one with a single rule");
        let (mut big, mut small) = (Vec::new(), Vec::new());
        for _ in 0..ROUNDS {
            big.push(round(n).await?);
            small.push(round(0).await?);
        }
        let median = |rs: &[Round], f: &dyn Fn(&Round) -> Vec<Duration>| {
            stats(rs.iter().flat_map(f).collect()).median
        };
        let pair = |what: &str, goal: &str, f: &dyn Fn(&Round) -> Vec<Duration>| {
            let (b, s) = (median(&big, f), median(&small, f));
            format!(
                "| {what}, {n} rules | {:.1} ms | {:.1} ms | {:+.1} ms | {goal} |",
                ms(b),
                ms(s),
                ms(b) - ms(s)
            )
        };
        let big10k = n == 10_000;
        rows.push(pair(
            "the first call after a daemon's start (launch, session, server start, call)",
            if big10k { "≤ 300 ms" } else { "" },
            &|r| vec![r.first],
        ));
        rows.push(pair(
            "the first call after the policy file is edited",
            if big10k { "≤ 150 ms" } else { "" },
            &|r| vec![r.after_edit],
        ));
        rows.push(pair(
            "`policy/list` (user tier)",
            if big10k { "≤ 150 ms" } else { "" },
            &|r| r.list.clone(),
        ));
        rows.push(pair("`policy/check`", if big10k { "≤ 10 ms" } else { "" }, &|r| {
            r.check.clone()
        }));
        let rss = |rs: &[Round]| {
            let mut v: Vec<u64> = rs.iter().map(|r| r.rss_kib).collect();
            v.sort_unstable();
            v[v.len() / 2] as f64 / 1024.0
        };
        rows.push(format!(
            "| the daemon's resident memory after these, {n} rules | {:.1} MiB | {:.1} MiB | {:+.1} MiB | {} |",
            rss(&big),
            rss(&small),
            rss(&big) - rss(&small),
            if big10k { "≤ 50 MiB" } else { "" }
        ));
    }
    Ok(rows)
}
