//! The client the MCP conformance suite drives (`conformance client --command ...`): a fresh
//! geminid in a temporary home whose one server is the suite's URL (the last argument), and
//! whose session does what the scenario (`MCP_CONFORMANCE_SCENARIO`) asks of a client, the way
//! the suite's own reference client does it: list the tools and call the first with
//! `{a: 2, b: 3}`, call the scenario's named tool, or round-trip a schema.
//!
//! It plays the person too: every elicitation is accepted with no content (geminid fills in
//! the schema's defaults, which `elicitation-defaults` checks) and every sampling request
//! answered with a fixed message. Calls are made as the person (`confirmed`), so policy does
//! not ask. Exits 0 when the scenario's steps all succeeded, else 1 with why on stderr; the
//! daemon's log is printed on failure.

use std::time::Duration;

use geminid_protocol::api::{McpApiClient, SessionApiClient, ToolsApiClient};
use geminid_protocol::asks::{AskKind, AskNotice, AsksListenParams, AsksRespondParams};
use geminid_protocol::mcp::ServerState;
use geminid_protocol::mcp::{CallToolParams, StartParams};
use geminid_protocol::session::SessionCreateParams;
use geminid_protocol::tools::ToolsListParams;
use geminid_tests::mcp::{shell_env, write_user_settings};
use geminid_tests::{Daemon, TestHome, oauth};
use serde_json::{Value, json};

const SERVER: &str = "conformance";
/// How long a server may take to settle after a start or a sign-in.
const SETTLE: Duration = Duration::from_secs(10);

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let url = std::env::args().next_back().unwrap_or_default();
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
    match run(&url, &scenario).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("conformance-client: {scenario}: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// The client id geminid presents where the authorization server takes Client ID Metadata
/// Documents (the reference client's).
const CIMD_URL: &str = "https://conformance-test.local/client-metadata.json";

async fn run(url: &str, scenario: &str) -> anyhow::Result<()> {
    let home = TestHome::allowing_mcp()?;
    let context: Value = std::env::var("MCP_CONFORMANCE_CONTEXT")
        .ok()
        .and_then(|c| serde_json::from_str(&c).ok())
        .unwrap_or_default();
    let mut oauth = json!({ "clientMetadataUrl": CIMD_URL });
    if let Some(id) = context["client_id"].as_str() {
        oauth["clientId"] = json!(id);
    }
    if let Some(secret) = context["client_secret"].as_str() {
        oauth["clientSecret"] = json!(secret);
    }
    write_user_settings(&home, json!({ SERVER: { "httpUrl": url, "oauth": oauth } }))?;
    let daemon =
        Daemon::launch(&home).args(&["--mcp-ping-every", "0s"]).log("info").start().await?;
    let result = steps(&home, &daemon, scenario).await;
    if result.is_err() {
        eprintln!("--- geminid's log ---\n{}", daemon.log());
    }
    result
}

/// Answer the session's elicitations and sampling requests as the person would (listening
/// before this returns).
async fn play_the_person(
    client: geminid_protocol::client::Client,
    session: String,
) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    let attach = geminid_protocol::session::SessionAttachParams { id: session.clone(), env: None };
    client.attach(attach).await?;
    let kinds = vec![AskKind::Elicitation, AskKind::Sampling];
    let mut asks = client.asks_listen(AsksListenParams { session: session.clone(), kinds }).await?;
    Ok(tokio::spawn(async move {
        while let Some(Ok(notice)) = asks.next().await {
            let AskNotice::Asked { ask } = notice else { continue };
            let answer = match ask.kind {
                AskKind::Sampling => json!({
                    "role": "assistant",
                    "content": { "type": "text", "text": "geminid conformance" },
                    "model": "geminid-conformance",
                    "stopReason": "endTurn",
                }),
                _ => {
                    json!({ "action": "accept", "content": fill(&ask.detail["request"]["requestedSchema"]) })
                }
            };
            let p = AsksRespondParams { session: session.clone(), id: ask.id.clone(), answer };
            let _ = client.asks_respond(p).await;
        }
    }))
}

/// The calls the scenario's context names (`MCP_CONFORMANCE_CONTEXT`: `{toolCalls: [{name,
/// arguments}]}`).
fn context_calls() -> Vec<(String, Value)> {
    let context: Value = std::env::var("MCP_CONFORMANCE_CONTEXT")
        .ok()
        .and_then(|c| serde_json::from_str(&c).ok())
        .unwrap_or_default();
    context["toolCalls"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| Some((c["name"].as_str()?.to_owned(), c["arguments"].clone())))
        .collect()
}

/// What the person types into a form: a value for each field without a default (geminid fills
/// in the defaults).
fn fill(schema: &Value) -> Value {
    let mut content = serde_json::Map::new();
    for (name, p) in schema["properties"].as_object().into_iter().flatten() {
        if p.get("default").is_some() {
            continue;
        }
        let value = match (p["type"].as_str(), p["enum"].as_array().and_then(|e| e.first())) {
            (_, Some(first)) => first.clone(),
            (Some("boolean"), _) => json!(true),
            (Some("integer" | "number"), _) => json!(1),
            _ => json!("geminid"),
        };
        content.insert(name.clone(), value);
    }
    Value::Object(content)
}

/// Sign in the way a person with a browser would (`geminid_tests::oauth::sign_in`), then wait
/// for the server to settle: a server may take the new token, then refuse it mid-session (a
/// migrated authorization server, too little scope) and want another sign-in, three in all at
/// most (the spec's retry limit).
async fn sign_in(client: &geminid_protocol::client::Client, session: &str) -> anyhow::Result<()> {
    for tries in 1..=3 {
        match oauth::sign_in(client, session, SERVER).await {
            Err(e) if tries < 3 && e.to_string().contains("gemctl mcp auth") => {
                eprintln!("conformance-client: {e:#}; signing in again");
                continue;
            }
            other => other?,
        }
        let status = oauth::settled(client, session, SERVER, SETTLE).await?;
        if status.state != ServerState::NeedsAuth {
            return Ok(());
        }
        eprintln!("conformance-client: wants a sign-in again: {:?}", status.last_error);
    }
    Ok(())
}

/// A call; when the server wants a new sign-in (more scope, a refused token), signed in again
/// and called again, three times at most (the spec's retry limit).
async fn call_signing_in(
    client: &geminid_protocol::client::Client,
    session: &str,
    params: CallToolParams,
) -> anyhow::Result<Value> {
    let mut tries = 0;
    loop {
        match client.mcp_call_tool(params.clone()).await {
            Err(e) if tries < 3 && e.to_string().contains("gemctl mcp auth") => {
                eprintln!("conformance-client: {e}; signing in again");
                tries += 1;
                sign_in(client, session).await?;
            }
            other => return Ok(other?),
        }
    }
}

async fn steps(home: &TestHome, daemon: &Daemon, scenario: &str) -> anyhow::Result<()> {
    let client = daemon.client().await?;
    let create = SessionCreateParams {
        workspace: home.workspace().display().to_string(),
        env: Some(shell_env(home, &[])),
        reuse_default: false,
        ..Default::default()
    };
    let session = client.create(create).await?.id;
    let person = play_the_person(daemon.client().await?, session.clone()).await?;
    client.mcp_start(StartParams { session: session.clone(), wait: true }).await?;
    // Settled before judged: a server closing its connection after a 401 is `disconnected` for
    // a moment on its way to `needs-auth`.
    let mut status = oauth::settled(&client, &session, SERVER, SETTLE).await?;
    if status.state == ServerState::NeedsAuth {
        sign_in(&client, &session).await?;
        status = oauth::settled(&client, &session, SERVER, SETTLE).await?;
    }
    if status.state != ServerState::Connected {
        anyhow::bail!("the server did not connect ({:?}): {:?}", status.state, status.last_error);
    }
    let listed = client
        .tools_list(ToolsListParams { session: session.clone(), raw: true, all: false })
        .await?;
    let tools: Vec<(String, Value)> = listed
        .tools
        .iter()
        .filter(|t| t.server == SERVER)
        .map(|t| {
            let raw = t.raw.as_ref().and_then(|r| serde_json::from_str(r.get()).ok());
            (t.tool.clone(), raw.unwrap_or(Value::Null))
        })
        .collect();
    let call = |tool: String, arguments: Value| CallToolParams {
        session: session.clone(),
        server: SERVER.to_owned(),
        tool,
        arguments: arguments.as_object().cloned(),
        confirmed: true,
    };
    match scenario {
        "json-schema-ref-no-deref" => {}
        "json-schema-2020-12-preservation" => {
            let focal =
                tools.iter().find(|(n, _)| n == "json_schema_2020_12_tool").ok_or_else(|| {
                    anyhow::anyhow!("json_schema_2020_12_tool is not listed: {tools:?}")
                })?;
            let schema = focal.1.get("inputSchema").cloned().unwrap_or(Value::Null);
            client
                .mcp_call_tool(call("json_schema_echo".into(), json!({ "schema": schema })))
                .await?;
        }
        "elicitation-defaults" | "elicitation-sep1034-client-defaults" => {
            client
                .mcp_call_tool(call("test_client_elicitation_defaults".into(), json!({})))
                .await?;
        }
        "sep-2322-client-request-state" => {
            // The reference client's order: a call whose input is required, an unrelated call
            // meanwhile, then the others.
            let (a, b) = tokio::join!(
                client.mcp_call_tool(call("test_mrtr_echo_state".into(), json!({}))),
                client.mcp_call_tool(call("test_mrtr_unrelated".into(), json!({}))),
            );
            a?;
            b?;
            client.mcp_call_tool(call("test_mrtr_no_state".into(), json!({}))).await?;
            client.mcp_call_tool(call("test_mrtr_no_result_type".into(), json!({}))).await?;
        }
        "http-invalid-tool-headers" => {
            client
                .mcp_call_tool(call("valid_tool".into(), json!({ "region": "us-west1" })))
                .await?;
        }
        _ if !context_calls().is_empty() => {
            for (tool, arguments) in context_calls() {
                call_signing_in(&client, &session, call(tool, arguments)).await?;
            }
        }
        _ => {
            if let Some((first, _)) = tools.first() {
                let r = tokio::time::timeout(
                    Duration::from_secs(20),
                    call_signing_in(
                        &client,
                        &session,
                        call(first.clone(), json!({ "a": 2, "b": 3 })),
                    ),
                )
                .await??;
                eprintln!("conformance-client: {first}: {r}");
            }
        }
    }
    person.abort();
    // What geminid said about the server (how it connected, whose call each request was).
    let server =
        geminid_protocol::mcp::ServerParams { session: Some(session.clone()), name: SERVER.into() };
    if let Ok(logs) =
        client.mcp_logs(geminid_protocol::mcp::LogsParams { server, lines: None }).await
    {
        for l in logs.lines.iter().filter(|l| l.stream == "geminid") {
            eprintln!("conformance-client: server log: {}", l.text);
        }
    }
    Ok(())
}
