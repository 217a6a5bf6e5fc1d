//! Custom tools end to end, with real scripts: `tools.discoveryCommand` declares them beside an
//! MCP server's tools, `tools.callCommand` runs them through the pipeline (policy's default
//! asks in an interactive session and hides them in a headless one), parallel first calls run
//! one discovery, a settings edit and `tools/refresh` discover again, and every failure is said.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use geminid_protocol::api::{ConfirmationApiClient, SessionApiClient, ToolsApiClient};
use geminid_protocol::asks::{AskKind, AskNotice, AsksListenParams};
use geminid_protocol::error::ErrorCode;
use geminid_protocol::event::{EventBody, EventsSubscribeParams};
use geminid_protocol::policy::{ConfirmOutcome, ConfirmationRespondParams};
use geminid_protocol::session::SessionCreateParams;
use geminid_protocol::tools::{ToolKind, ToolsCallParams, ToolsListParams, ToolsRefreshParams};
use geminid_tests::mcp::{shell_env, stdio};
use geminid_tests::{Daemon, TestHome};
use jsonrpsee::core::client::Error as ClientError;
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(10);

/// Appends a line to `runs` and prints `decls.json` (both in the workspace, its directory).
const DISCOVER: &str = "echo run >> runs\ncat decls.json\n";
/// `echo` prints its name and input; `fail` writes to stderr; `slow` takes a while.
const CALL: &str = r#"case "$1" in
  echo) printf '%s:' "$1"; cat ;;
  fail) echo partial; echo "bad input" >&2 ;;
  slow) sleep 0.3; echo done ;;
esac
"#;

fn decls(names: &[&str]) -> String {
    let all: Vec<Value> = names
        .iter()
        .map(|n| {
            json!({
                "name": n,
                "description": format!("The {n} tool."),
                "parametersJsonSchema": {
                    "type": "object",
                    "properties": { "text": { "type": "string" } }
                }
            })
        })
        .collect();
    json!([{ "functionDeclarations": all }]).to_string()
}

fn script(path: &Path, body: &str) -> anyhow::Result<String> {
    std::fs::write(path, format!("#!/bin/sh\n{body}"))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))?;
    Ok(path.display().to_string())
}

/// User settings with the fixture server `fx` and `tools` as given.
fn settings(home: &TestHome, tools: Value) -> anyhow::Result<()> {
    let text = json!({ "mcpServers": { "fx": stdio(&[]) }, "tools": tools }).to_string();
    let path = home.root().join("home/.gemini/settings.json");
    std::fs::write(path.with_extension("tmp"), text)?;
    std::fs::rename(path.with_extension("tmp"), path)?;
    Ok(())
}

struct Scripts {
    discover: String,
    call: String,
}

fn scripts(home: &TestHome, names: &[&str]) -> anyhow::Result<Scripts> {
    let bin = home.root().join("bin");
    std::fs::create_dir_all(&bin)?;
    std::fs::write(home.workspace().join("decls.json"), decls(names))?;
    Ok(Scripts {
        discover: script(&bin.join("discover"), DISCOVER)?,
        call: script(&bin.join("call"), CALL)?,
    })
}

fn runs(home: &TestHome) -> usize {
    std::fs::read_to_string(home.workspace().join("runs")).unwrap_or_default().lines().count()
}

fn call(session: &str, name: &str, args: Value, confirmed: bool) -> ToolsCallParams {
    ToolsCallParams {
        session: session.to_owned(),
        name: name.to_owned(),
        args: args.as_object().cloned(),
        call_id: None,
        confirmed,
    }
}

fn code(r: Result<impl std::fmt::Debug, ClientError>) -> (i32, String) {
    match r {
        Err(ClientError::Call(e)) => (e.code(), e.message().to_owned()),
        other => (0, format!("not a call error: {other:?}")),
    }
}

#[tokio::test]
async fn custom_tools_beside_mcp_tools_through_the_pipeline() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let s = scripts(&home, &["echo", "fail", "slow"])?;
    settings(&home, json!({ "discoveryCommand": s.discover, "callCommand": s.call }))?;
    let daemon = Daemon::start(&home, &[]).await?;
    let client = Arc::new(daemon.client().await?);
    let session = client
        .create(SessionCreateParams {
            workspace: home.workspace().display().to_string(),
            env: Some(shell_env(&home, &[])),
            ..Default::default()
        })
        .await?
        .id;

    // Parallel first calls of a session that has not discovered yet: one discovery.
    let firsts = (0..4).map(|_| {
        let (client, session) = (client.clone(), session.clone());
        tokio::spawn(async move {
            client
                .tools_call(call(&session, "discovered_tool_echo", json!({"text": "x"}), true))
                .await
        })
    });
    for first in futures::future::join_all(firsts).await {
        let r = first??;
        assert_eq!(r.display, "echo:{\"text\":\"x\"}");
    }
    assert_eq!(runs(&home), 1);

    // Listed first, beside the server's tools, as Gemini CLI declares them; a headless
    // session's default (deny) hides them from the model's list.
    let all = client
        .tools_list(ToolsListParams { session: session.clone(), raw: false, all: true })
        .await?;
    // (`all` lists the tools policy hides after the others.)
    let names: Vec<&str> = all.tools.iter().map(|t| t.name.as_str()).collect();
    let custom: Vec<&str> =
        names.iter().copied().filter(|n| n.starts_with("discovered_tool_")).collect();
    assert_eq!(custom, ["discovered_tool_echo", "discovered_tool_fail", "discovered_tool_slow"]);
    assert!(names.iter().any(|n| n.starts_with("mcp_fx_")), "{names:?}");
    let echo = all.tools.iter().find(|t| t.name == "discovered_tool_echo").unwrap();
    assert_eq!(
        (echo.kind, echo.server.as_str(), echo.tool.as_str()),
        (ToolKind::Discovered, "", "echo")
    );
    assert!(echo.declaration.description.starts_with("The echo tool.\n\nThis tool was discovered"));
    assert!(
        echo.declaration.description.contains(&format!("execute the command `{} echo`", s.call)),
        "{}",
        echo.declaration.description
    );
    let schema: Value = serde_json::from_str(echo.declaration.parameters_json_schema.get())?;
    assert_eq!(schema["properties"]["wait_for_previous"]["type"], "boolean");
    assert!(
        echo.hidden.as_deref().is_some_and(|h| h.contains("policy rule can allow it")),
        "{:?}",
        echo.hidden
    );
    let shown = client
        .tools_list(ToolsListParams { session: session.clone(), raw: false, all: false })
        .await?;
    assert!(!shown.tools.iter().any(|t| t.kind == ToolKind::Discovered), "{:?}", shown.tools);
    let (c, m) =
        code(client.tools_call(call(&session, "discovered_tool_echo", json!({}), false)).await);
    assert_eq!(c, ErrorCode::PolicyDenied.code(), "{m}");

    // Arguments are checked against the declared schema (and `wait_for_previous` kept back).
    let (c, m) = code(
        client.tools_call(call(&session, "discovered_tool_echo", json!({"text": 5}), true)).await,
    );
    assert_eq!(c, ErrorCode::InvalidArguments.code(), "{m}");
    let r = client
        .tools_call(call(
            &session,
            "discovered_tool_echo",
            json!({"text": "a", "wait_for_previous": true}),
            true,
        ))
        .await?;
    assert_eq!((r.is_error, r.display.as_str()), (false, "echo:{\"text\":\"a\"}"));
    assert_eq!(
        r.function_response["functionResponse"]["response"]["output"],
        "echo:{\"text\":\"a\"}"
    );

    // Stderr makes it a failure, reported as Gemini CLI reports it.
    let r = client.tools_call(call(&session, "discovered_tool_fail", json!({}), true)).await?;
    assert!(r.is_error);
    assert_eq!(
        r.display,
        "Stdout: partial\n\nStderr: bad input\n\nError: (none)\nExit Code: 0\nSignal: (none)"
    );
    assert_eq!(r.function_response["functionResponse"]["response"]["error"], r.display);

    // Interactive (a client listens for confirmations): listed, and a call asks first.
    let mut asks = client
        .asks_listen(AsksListenParams {
            session: session.clone(),
            kinds: vec![AskKind::Confirmation],
        })
        .await?;
    let shown = client
        .tools_list(ToolsListParams { session: session.clone(), raw: false, all: false })
        .await?;
    assert_eq!(shown.tools[0].name, "discovered_tool_echo");
    let pending = {
        let (client, session) = (client.clone(), session.clone());
        tokio::spawn(async move {
            client.tools_call(call(&session, "discovered_tool_slow", json!({}), false)).await
        })
    };
    let ask = loop {
        match tokio::time::timeout(WAIT, asks.next()).await? {
            Some(Ok(AskNotice::Asked { ask })) => break ask,
            Some(Ok(AskNotice::Settled { .. })) => continue,
            other => anyhow::bail!("the listener ended: {other:?}"),
        }
    };
    assert_eq!(ask.detail["name"], "discovered_tool_slow");
    let answer = ConfirmationRespondParams {
        id: ask.id.clone(),
        outcome: ConfirmOutcome::Once,
        reason: None,
        session: None,
    };
    client.confirmation_respond(answer).await?;
    let r = tokio::time::timeout(WAIT, pending).await???;
    assert_eq!(r.display, "done\n");
    assert_eq!(runs(&home), 1, "nothing ran discovery again");
    Ok(())
}

#[tokio::test]
async fn an_edit_or_a_refresh_discovers_again_and_failures_are_said() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let s = scripts(&home, &["one"])?;
    settings(&home, json!({ "discoveryCommand": s.discover, "callCommand": s.call }))?;
    let daemon = Daemon::start(&home, &[]).await?;
    assert!(home.gemctl(&["trust"])?.status.success());
    let (code, out, err) = home.gemctl_run(&["tools", "list"])?;
    assert_eq!(code, 0, "{err}");
    let line = out.lines().find(|l| l.starts_with("discovered_tool_one")).unwrap_or_default();
    assert!(line.contains("(discovered)") && line.contains("[hidden by policy]"), "{out}");

    // The declarations change: `tools refresh` runs it again and says what it found.
    std::fs::write(home.workspace().join("decls.json"), decls(&["one", "two"]))?;
    let (code, out, err) = home.gemctl_run(&["tools", "refresh"])?;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("declared 2 tools") && out.contains("discovered_tool_two"), "{out}");

    // A settings edit that changes the command discovers again, announced as an event.
    let client = daemon.client().await?;
    let filter =
        EventsSubscribeParams { session: None, kinds: Some(vec!["tools/discovered".into()]) };
    let mut events = client.subscribe_events(Some(filter)).await?;
    let broken = script(&home.root().join("bin/broken"), "echo '{\"not\": \"a list\"}'\n")?;
    settings(&home, json!({ "discoveryCommand": broken, "callCommand": s.call }))?;
    assert!(home.gemctl(&["mcp", "reload"])?.status.success());
    let v = home.gemctl_json(&["tools", "list"])?;
    let said = v["diagnostics"].to_string();
    assert!(
        said.contains("did not print a JSON array") && said.contains("gemctl tools refresh"),
        "{said}"
    );
    assert!(!v["tools"].to_string().contains("discovered_tool_"), "{v}");
    let event = tokio::time::timeout(WAIT, events.next()).await?.unwrap()?;
    let EventBody::ToolsDiscovered(d) = event.body else { panic!("{event:?}") };
    assert!(d.discovery.error.is_some_and(|e| e.contains("an object")));

    // A failed refresh exits 1 with the reason; a session without the setting has none.
    let (code, _, err) = home.gemctl_run(&["tools", "refresh"])?;
    assert_eq!(code, 1);
    assert!(err.contains("did not print a JSON array of tools (it printed an object)"), "{err}");
    settings(&home, json!({}))?;
    assert!(home.gemctl(&["mcp", "reload"])?.status.success());
    let (code, out, _) = home.gemctl_run(&["tools", "refresh"])?;
    assert_eq!(code, 0);
    assert!(out.contains("No custom tools"), "{out}");
    let v = home.gemctl_json(&["tools", "refresh"])?;
    assert_eq!(v, json!({}));
    let session =
        home.gemctl_json(&["session", "show"])?["id"].as_str().unwrap_or_default().to_owned();
    let r = client.tools_refresh(ToolsRefreshParams { session }).await?;
    assert!(r.discovery.is_none());
    Ok(())
}
