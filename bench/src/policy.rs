//! What policy costs: a decision against 1,000 rules and against none (the engine in
//! process); a whole `tools/call` over the socket in a session with 1,000 rules and in one
//! with one, interleaved in one run (the issue-17 target: ≤ 20 µs more); and how soon a call
//! that waits for a confirmation returns once a client on the socket answers it (≤ 1 ms).

use std::sync::Arc;
use std::time::Instant;

use geminid_protocol::api::{
    ConfirmationApiClient, PolicyApiClient, SessionApiClient, ToolsApiClient,
};
use geminid_protocol::asks::{AskKind, AskNotice, AsksListenParams};
use geminid_protocol::client::Client;
use geminid_protocol::policy::{ConfirmOutcome, ConfirmationRespondParams};
use geminid_protocol::session::SessionCreateParams;
use geminid_protocol::tools::ToolsCallParams;
use geminid_tests::mcp::{fixture, shell_env, write_user_settings};
use geminid_tests::{Daemon, TestHome};

use geminid::testing::policy::{ApprovalMode, PolicySet, Tier, ToolCall, load};
use serde_json::json;

use crate::{stats, us};

const ROUNDS: usize = 20_000;
/// Whole calls per session, in alternating blocks.
const CALLS: usize = 4_000;
const BLOCK: usize = 50;
/// Confirmed calls.
const CONFIRMS: usize = 300;

/// The one rule every measured session has: `fx`'s tools allowed (in the workspace tier, so
/// that the 1,000 rules above it are tried first).
pub(crate) const ALLOW_FX: &str =
    "[[rule]]\ntoolName = \"*\"\nmcpName = \"fx\"\ndecision = \"allow\"\npriority = 1\n";

/// 1,000 rules as users write them: exact names, server wildcards, argument patterns and
/// command prefixes, none of which matches the measured call (so every rule is tried).
fn thousand_rules() -> String {
    rules(1000)
}

/// `n` rules written as [`thousand_rules`] writes them.
pub(crate) fn rules(n: usize) -> String {
    let mut text = String::new();
    for i in 0..n {
        let body = match i % 4 {
            0 => format!("toolName = \"tool_{i}\""),
            1 => format!("mcpName = \"server_{i}\"\ntoolName = \"*\""),
            2 => format!(
                "toolName = \"write_file\"\nargsPattern = \"\\\"file_path\\\":\\\"/secret/{i}/\""
            ),
            _ => format!("toolName = \"run_shell_command\"\ncommandPrefix = \"deploy-{i}\""),
        };
        text.push_str(&format!(
            "[[rule]]\n{body}\ndecision = \"deny\"\npriority = {}\n\n",
            i % 999
        ));
    }
    text
}

/// Reading a policy file of `n` rules into a set, as a daemon's start or an edit does.
fn read_rules(text: &str, n: usize) -> anyhow::Result<std::time::Duration> {
    let t = Instant::now();
    let loaded = load("bench.toml", std::hint::black_box(text), Tier::User);
    anyhow::ensure!(loaded.rules.len() == n, "{:?}", loaded.problems.first());
    std::hint::black_box(PolicySet::new(loaded.rules));
    Ok(t.elapsed())
}

/// Files of 1,000 and 10,000 rules read, interleaved: time grows with the rules (issue 39:
/// it grew with their square, each rule's line counted from the file's start).
fn reading() -> anyhow::Result<Vec<String>> {
    eprintln!("policy: files of 1,000 and 10,000 rules read");
    let (small, large) = (rules(1000), rules(10_000));
    let (mut s, mut l) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        s.push(read_rules(&small, 1000)?);
        l.push(read_rules(&large, 10_000)?);
    }
    let (s, l) = (stats(s), stats(l));
    Ok(vec![
        format!(
            "| a policy file of 1,000 rules read (parsed, checked, set built; 5 rounds interleaved) | {:.2} ms | {:.2} ms | |",
            us(s.median) / 1000.0,
            us(s.p99) / 1000.0
        ),
        format!(
            "| a policy file of 10,000 rules read ({:.1}× the 1,000-rule file: linear is 10×) | {:.2} ms | {:.2} ms | linear in rules |",
            l.median.as_secs_f64() / s.median.as_secs_f64(),
            us(l.median) / 1000.0,
            us(l.p99) / 1000.0
        ),
    ])
}

pub async fn bench() -> anyhow::Result<Vec<String>> {
    let mut rows = reading()?;
    eprintln!("policy: a decision against 1,000 rules and against none");
    let loaded = load("bench.toml", &thousand_rules(), Tier::User);
    anyhow::ensure!(loaded.rules.len() == 1000, "{:?}", loaded.problems.first());
    let full = PolicySet::new(loaded.rules);
    let empty = PolicySet::new(vec![]);
    let args =
        json!({"path": "/work/src/main.rs", "content": "fn main() {}\n", "mode": "overwrite"});
    let call = ToolCall {
        name: "mcp_fs_write",
        server: Some("fs"),
        args: args.as_object(),
        annotations: None,
        subagent: None,
    };
    let (mut with, mut without) = (Vec::with_capacity(ROUNDS), Vec::with_capacity(ROUNDS));
    for _ in 0..ROUNDS {
        let t = Instant::now();
        std::hint::black_box(full.verdict(
            std::hint::black_box(&call),
            ApprovalMode::Default,
            true,
        ));
        with.push(t.elapsed());
        let t = Instant::now();
        std::hint::black_box(empty.verdict(
            std::hint::black_box(&call),
            ApprovalMode::Default,
            true,
        ));
        without.push(t.elapsed());
    }
    // The worst case for the name index: every rule is written for the called tool.
    let same: String = (0..1000)
        .map(|i| format!("[[rule]]\ntoolName = \"mcp_fs_write\"\nargsPattern = \"\\\"path\\\":\\\"/secret/{i}/\"\ndecision = \"deny\"\npriority = {}\n\n", i % 999))
        .collect();
    let loaded = load("same.toml", &same, Tier::User);
    anyhow::ensure!(loaded.rules.len() == 1000, "{:?}", loaded.problems.first());
    let same = PolicySet::new(loaded.rules);
    let mut worst = Vec::with_capacity(ROUNDS / 4);
    for _ in 0..ROUNDS / 4 {
        let t = Instant::now();
        std::hint::black_box(same.verdict(
            std::hint::black_box(&call),
            ApprovalMode::Default,
            true,
        ));
        worst.push(t.elapsed());
    }
    let (w, e, x) = (stats(with), stats(without), stats(worst));
    rows.extend(vec![
        format!(
            "| a decision against 1,000 rules, none matching ({ROUNDS} rounds, interleaved with an empty set) | {:.2} µs | {:.2} µs | ≤ 20 µs more per call |",
            us(w.median),
            us(w.p99)
        ),
        format!(
            "| the same call against no rules | {:.2} µs | {:.2} µs | |",
            us(e.median),
            us(e.p99)
        ),
        format!(
            "| the same call against 1,000 rules all written for its tool, none matching its arguments (the index cannot skip any) | {:.2} µs | {:.2} µs | |",
            us(x.median),
            us(x.p99)
        ),
    ]);
    rows.extend(whole_calls().await?);
    Ok(rows)
}

async fn session_in(
    client: &Client,
    home: &TestHome,
    dir: &str,
    rules: &str,
) -> anyhow::Result<String> {
    let ws = home.root().join(dir);
    std::fs::create_dir_all(ws.join(".gemini/policies"))?;
    std::fs::write(ws.join(".gemini/policies/rules.toml"), rules)?;
    let p = SessionCreateParams {
        workspace: ws.display().to_string(),
        env: Some(shell_env(home, &[])),
        ..Default::default()
    };
    Ok(client.create(p).await?.id)
}

pub(crate) fn echo(session: &str) -> ToolsCallParams {
    ToolsCallParams {
        session: session.to_owned(),
        name: "mcp_fx_echo".into(),
        args: json!({"text": "hi"}).as_object().cloned(),
        call_id: None,
        confirmed: false,
    }
}

/// Whole calls with 1,000 rules and with one; then confirmed calls.
async fn whole_calls() -> anyhow::Result<Vec<String>> {
    eprintln!("policy: whole calls against 1,000 rules and against one, then confirmations");
    let home = TestHome::new()?;
    write_user_settings(&home, json!({ "fx": { "command": fixture() } }))?;
    let daemon = Daemon::launch(&home).log(crate::BENCH_LOG).start().await?;
    let client = daemon.client().await?;
    let full =
        session_in(&client, &home, "full", &format!("{}{ALLOW_FX}", thousand_rules())).await?;
    let one = session_in(&client, &home, "one", ALLOW_FX).await?;
    for s in [&full, &one] {
        let listed = client
            .policy_list(geminid_protocol::policy::PolicyListParams {
                session: s.clone(),
                tier: Some("workspace".into()),
            })
            .await?;
        anyhow::ensure!(
            !listed.rules.is_empty(),
            "the workspace's rules are not read (is it trusted?)"
        );
        for _ in 0..200 {
            client.tools_call(echo(s)).await?;
        }
    }
    let (mut with, mut without) = (Vec::with_capacity(CALLS), Vec::with_capacity(CALLS));
    for _ in 0..CALLS / BLOCK {
        for (s, out) in [(&full, &mut with), (&one, &mut without)] {
            for _ in 0..BLOCK {
                let t = Instant::now();
                client.tools_call(echo(s)).await?;
                out.push(t.elapsed());
            }
        }
    }
    let (w, o) = (stats(with), stats(without));
    let mut rows = vec![
        format!(
            "| a whole tools/call in a session with 1,000 rules, none matching ({CALLS} calls, in blocks of {BLOCK} alternating with the next row) | {:.1} µs | {:.1} µs | ≤ 20 µs more than the next row: {:+.1} µs |",
            us(w.median),
            us(w.p99),
            us(w.median) - us(o.median)
        ),
        format!(
            "| the same call in a session with one rule | {:.1} µs | {:.1} µs | |",
            us(o.median),
            us(o.p99)
        ),
    ];
    rows.push(confirmations(&daemon, &home).await?);
    Ok(rows)
}

/// A call that waits for a confirmation: from the moment a client on the socket sends its
/// answer to the moment the call's result arrives.
async fn confirmations(daemon: &Daemon, home: &TestHome) -> anyhow::Result<String> {
    let listener = daemon.client().await?;
    let ask_rule =
        "[[rule]]\ntoolName = \"*\"\nmcpName = \"fx\"\ndecision = \"ask_user\"\npriority = 1\n";
    let session = session_in(&listener, home, "asks", ask_rule).await?;
    let p = AsksListenParams { session: session.clone(), kinds: vec![AskKind::Confirmation] };
    let mut asks = listener.asks_listen(p).await?;
    let caller = Arc::new(daemon.client().await?);
    let mut samples = Vec::with_capacity(CONFIRMS);
    for _ in 0..CONFIRMS {
        let call = {
            let (caller, p) = (caller.clone(), echo(&session));
            tokio::spawn(async move {
                let r = caller.tools_call(p).await;
                (r, Instant::now())
            })
        };
        let id = loop {
            match asks.next().await {
                Some(Ok(AskNotice::Asked { ask })) => break ask.id,
                Some(Ok(_)) => continue,
                other => anyhow::bail!("the listener ended: {other:?}"),
            }
        };
        let answered = Instant::now();
        let p = ConfirmationRespondParams {
            id,
            outcome: ConfirmOutcome::Once,
            reason: None,
            session: None,
        };
        listener.confirmation_respond(p).await?;
        let (result, done) = call.await?;
        result?;
        samples.push(done.saturating_duration_since(answered));
    }
    let s = stats(samples);
    Ok(format!(
        "| a confirmed call: from the answer sent by a client on the socket to the call's result ({CONFIRMS} calls) | {:.3} ms | {:.3} ms | ≤ 1 ms |",
        s.median.as_secs_f64() * 1000.0,
        s.p99.as_secs_f64() * 1000.0
    ))
}
