//! Issue 20: an elicitation answered by an attached client completes the original call within
//! 5 ms of the answer. Measured from just before `asks/respond` is sent to the call's result,
//! for a server of each era (a server request over stdio; an `input_required` round), and a
//! plain call on the same server in the same run for scale.

use std::time::{Duration, Instant};

use geminid_protocol::api::{SessionApiClient, ToolsApiClient};
use geminid_protocol::asks::{AskKind, AskNotice, AsksListenParams, AsksRespondParams};
use geminid_protocol::session::SessionCreateParams;
use geminid_protocol::tools::ToolsCallParams;
use geminid_tests::mcp::{shell_env, stdio, write_user_settings};
use geminid_tests::{Daemon, TestHome};
use serde_json::json;

use crate::{ms, stats};

const ROUNDS: usize = 200;

fn call(session: &str, name: &str, args: serde_json::Value) -> ToolsCallParams {
    ToolsCallParams {
        session: session.to_owned(),
        name: name.to_owned(),
        args: args.as_object().cloned(),
        call_id: None,
        confirmed: true,
    }
}

pub async fn bench() -> anyhow::Result<Vec<String>> {
    eprintln!("elicit: an elicitation's answer to the call's result, both eras");
    let home = TestHome::allowing_mcp()?;
    write_user_settings(
        &home,
        json!({ "old": stdio(&["--asks"]), "new": stdio(&["--asks", "--modern"]) }),
    )?;
    let daemon = Daemon::launch(&home).log(crate::BENCH_LOG).start().await?;
    anyhow::ensure!(home.gemctl(&["trust"])?.status.success(), "gemctl trust failed");
    let person = daemon.client().await?;
    let create = SessionCreateParams {
        workspace: home.workspace().display().to_string(),
        env: Some(shell_env(&home, &[])),
        reuse_default: true,
        ..Default::default()
    };
    let session = person.create(create).await?.id;
    let kinds = vec![AskKind::Elicitation];
    let mut asks = person.asks_listen(AsksListenParams { session: session.clone(), kinds }).await?;
    let caller = std::sync::Arc::new(daemon.client().await?);
    let mut rows = Vec::new();
    let (mut answered, mut plain): (Vec<Vec<Duration>>, Vec<Duration>) =
        (vec![Vec::new(), Vec::new()], Vec::new());
    for round in 0..ROUNDS + 20 {
        for (i, server) in ["old", "new"].iter().enumerate() {
            let (c, p) = (caller.clone(), call(&session, &format!("mcp_{server}_ask"), json!({})));
            let running = tokio::spawn(async move { c.tools_call(p).await });
            let ask = loop {
                match asks.next().await {
                    Some(Ok(AskNotice::Asked { ask })) => break ask,
                    Some(Ok(_)) => continue,
                    other => anyhow::bail!("the listener ended: {other:?}"),
                }
            };
            let answer = json!({ "action": "accept", "content": { "name": "bench" } });
            let p = AsksRespondParams { session: session.clone(), id: ask.id, answer };
            let t = Instant::now();
            person.asks_respond(p).await?;
            let r = running.await??;
            let took = t.elapsed();
            anyhow::ensure!(r.display.contains("bench"), "{}", r.display);
            if round >= 20 {
                answered[i].push(took);
            }
        }
        let t = Instant::now();
        caller.tools_call(call(&session, "mcp_old_echo", json!({ "text": "hi" }))).await?;
        if round >= 20 {
            plain.push(t.elapsed());
        }
    }
    let [old, new] = [answered.remove(0), answered.remove(0)].map(stats);
    let plain = stats(plain);
    rows.push(format!(
        "| elicitation answered → the call's result, a server of 2025-11-25 over stdio ({ROUNDS} rounds) | {:.2} ms | {:.2} ms | ≤ 5 ms |",
        ms(old.median),
        ms(old.p99)
    ));
    rows.push(format!(
        "| the same, a server of 2026-07-28 (`input_required`, the call sent again) | {:.2} ms | {:.2} ms | ≤ 5 ms |",
        ms(new.median),
        ms(new.p99)
    ));
    rows.push(format!(
        "| a plain `echo` call on the same server, interleaved | {:.2} ms | {:.2} ms | for scale |",
        ms(plain.median),
        ms(plain.p99)
    ));
    Ok(rows)
}
