//! Issue 21: a call to a server that wants OAuth, with a valid cached token, costs no more than
//! the same call to the same fixture without auth. Two fixtures over streamable HTTP on
//! loopback (`--http`, and `--http --oauth`, signed in once through `auth/begin`), calls
//! interleaved.

use std::time::{Duration, Instant};

use geminid_protocol::api::{McpApiClient, SessionApiClient, ToolsApiClient};
use geminid_protocol::mcp::StartParams;
use geminid_protocol::session::SessionCreateParams;
use geminid_protocol::tools::ToolsCallParams;
use geminid_tests::mcp::{NetFixture, shell_env, write_user_settings};
use geminid_tests::{Daemon, TestHome};
use serde_json::json;

use crate::{ms, stats};

const ROUNDS: usize = 2_000;
const WARMUP: usize = 200;

fn echo(session: &str, server: &str) -> ToolsCallParams {
    ToolsCallParams {
        session: session.to_owned(),
        name: format!("mcp_{server}_echo"),
        args: json!({ "text": "hi" }).as_object().cloned(),
        call_id: None,
        confirmed: true,
    }
}

pub async fn bench() -> anyhow::Result<Vec<String>> {
    eprintln!("oauth: a call with a cached token against the same call without auth");
    let (plain, authed) =
        (NetFixture::start("--http", &[])?, NetFixture::start("--http", &["--oauth"])?);
    let home = TestHome::allowing_mcp()?;
    write_user_settings(
        &home,
        json!({ "plain": { "httpUrl": plain.url }, "authed": { "httpUrl": authed.url } }),
    )?;
    let daemon = Daemon::launch(&home).log(crate::BENCH_LOG).start().await?;
    let client = daemon.client().await?;
    let create = SessionCreateParams {
        workspace: home.workspace().display().to_string(),
        env: Some(shell_env(&home, &[])),
        reuse_default: true,
        ..Default::default()
    };
    let session = client.create(create).await?.id;
    client.mcp_start(StartParams { session: session.clone(), wait: true }).await?;
    geminid_tests::oauth::sign_in(&client, &session, "authed").await?;
    let (mut without, mut with): (Vec<Duration>, Vec<Duration>) = (Vec::new(), Vec::new());
    for round in 0..ROUNDS + WARMUP {
        for (server, into) in [("plain", &mut without), ("authed", &mut with)] {
            let t = Instant::now();
            let r = client.tools_call(echo(&session, server)).await?;
            let took = t.elapsed();
            anyhow::ensure!(r.display == "hi", "{server}: {}", r.display);
            if round >= WARMUP {
                into.push(took);
            }
        }
    }
    let (a, b) = (stats(without), stats(with));
    Ok(vec![
        format!(
            "| `echo` over streamable HTTP, no auth ({ROUNDS} calls) | {:.3} ms | {:.3} ms | baseline |",
            ms(a.median),
            ms(a.p99)
        ),
        format!(
            "| the same, OAuth with a valid cached token, interleaved | {:.3} ms | {:.3} ms | ≤ baseline ({:.2}×) |",
            ms(b.median),
            ms(b.p99),
            b.median.as_secs_f64() / a.median.as_secs_f64()
        ),
    ])
}
