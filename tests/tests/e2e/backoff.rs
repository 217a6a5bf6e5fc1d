//! A server restarting after a crash is waited for like a starting one: a tool listing made
//! while it waits out its backoff includes its tools once it is back, rather than leaving the
//! server out (Gemini CLI drops a server whose listing is empty for the whole run).

use std::time::{Duration, Instant};

use geminid_protocol::api::{McpApiClient, ToolsApiClient};
use geminid_protocol::event::{EventBody, EventsSubscribeParams};
use geminid_protocol::mcp::{CallToolParams, ServerState, StartParams};
use geminid_protocol::tools::ToolsListParams;
use geminid_tests::mcp::{new_session, stdio, write_user_settings};
use geminid_tests::{Daemon, TestHome};
use serde_json::json;

#[tokio::test]
async fn a_listing_during_a_restart_backoff_waits_for_the_server() -> anyhow::Result<()> {
    let home = TestHome::allowing_mcp()?;
    write_user_settings(&home, json!({ "fx": stdio(&[]) }))?;
    // A backoff long enough that the listing below is certainly made inside it, and well
    // within the settle wait (start-up timeout and stop grace).
    let flags = [
        "--mcp-backoff",
        "2s",
        "--mcp-stop-grace",
        "500ms",
        "--mcp-startup-timeout",
        "10s",
        "--mcp-linger",
        "300ms",
    ];
    let daemon = Daemon::start(&home, &flags).await?;
    let client = daemon.client().await?;
    let session = new_session(&client, &home).await?;
    let started = client.mcp_start(StartParams { session: session.clone(), wait: true }).await?;
    assert_eq!(started.servers[0].state, ServerState::Connected, "{started:#?}");

    let filter = EventsSubscribeParams {
        session: Some(session.clone()),
        kinds: Some(vec!["mcp/serverState".into()]),
    };
    let mut events = client.subscribe_events(Some(filter)).await?;
    // The server exits in the middle of a call: its task notices and backs off for 2 s.
    let crash = CallToolParams {
        session: session.clone(),
        server: "fx".into(),
        tool: "crash".into(),
        arguments: json!({ "code": 3 }).as_object().cloned(),
        confirmed: true,
    };
    let _ = client.mcp_call_tool(crash).await;
    loop {
        let ev = tokio::time::timeout(Duration::from_secs(10), events.next())
            .await?
            .ok_or_else(|| anyhow::anyhow!("the events ended"))??;
        if let EventBody::McpServerState(change) = ev.body
            && change.previous == ServerState::Connected
        {
            assert_eq!(change.server.state, ServerState::Disconnected, "{change:#?}");
            break;
        }
    }

    // Listed now, in its backoff: the listing waits until it is back.
    let t0 = Instant::now();
    let list = ToolsListParams { session: session.clone(), raw: false, all: true };
    let tools = client.tools_list(list).await?;
    let names: Vec<&str> = tools.tools.iter().map(|t| t.name.as_str()).collect();
    assert!(
        names.contains(&"mcp_fx_echo"),
        "a listing during the restart's backoff ({:?} after the crash was announced) left the \
         server out: {names:?} {:?}",
        t0.elapsed(),
        tools.diagnostics
    );
    Ok(())
}
