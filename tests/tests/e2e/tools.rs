//! The tool catalog and the call path through the real daemon and the fixture server.

use std::time::Duration;

use geminid_protocol::api::{McpApiClient, PromptsApiClient, SessionApiClient, ToolsApiClient};
use geminid_protocol::client::Client;
use geminid_protocol::event::EventsSubscribeParams;
use geminid_protocol::event::{Event, EventBody};
use geminid_protocol::mcp::{ListServersParams, ServerState, StartParams};
use geminid_protocol::tools::{ToolsCallParams, ToolsCallResult, ToolsListParams, ToolsListResult};
use geminid_tests::mcp::{FAST, Setup, fixture, growing, logged, stdio, write_user_settings};
use geminid_tests::{Daemon, TestHome};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

async fn setup(servers: Value) -> anyhow::Result<Setup> {
    Setup::new(servers).await
}

/// Wait until the fixture's `cancelled` tool reports `n` cancelled calls.
async fn cancelled_reaches(t: &Setup, n: u32) -> anyhow::Result<String> {
    let seen = std::cell::RefCell::new(String::new());
    let failed = geminid_tests::poll(Duration::from_secs(5), || async {
        match call(&t.client, &t.session, "mcp_rich_cancelled", json!({})).await {
            Ok(r) if r.display == n.to_string() => Some(Ok(())),
            Ok(r) => {
                *seen.borrow_mut() = r.display;
                None
            }
            Err(e) => Some(Err(anyhow::Error::msg(e))),
        }
    })
    .await;
    match failed {
        Some(Ok(())) => Ok(n.to_string()),
        Some(Err(e)) => Err(e),
        None => Ok(seen.take()),
    }
}

async fn list(t: &Setup, raw: bool) -> anyhow::Result<ToolsListResult> {
    Ok(t.client.tools_list(ToolsListParams { session: t.session.clone(), raw, all: false }).await?)
}

async fn call(
    client: &Client,
    session: &str,
    name: &str,
    args: Value,
) -> Result<ToolsCallResult, String> {
    let p = ToolsCallParams {
        session: session.into(),
        name: name.into(),
        args: args.as_object().cloned(),
        call_id: None,
        confirmed: false,
    };
    client.tools_call(p).await.map_err(|e| match e {
        jsonrpsee::core::client::Error::Call(e) => format!("{}: {}", e.code(), e.message()),
        e => e.to_string(),
    })
}

/// The session's server `name`'s whole log.
async fn server_log(t: &Setup, name: &str) -> anyhow::Result<geminid_protocol::mcp::LogsResult> {
    let server =
        geminid_protocol::mcp::ServerParams { session: Some(t.session.clone()), name: name.into() };
    Ok(t.client.mcp_logs(geminid_protocol::mcp::LogsParams { server, lines: None }).await?)
}

fn decl(list: &ToolsListResult, name: &str) -> Value {
    let found = &list
        .tools
        .iter()
        .find(|t| t.name == name)
        .unwrap_or_else(|| panic!("no {name} in {list:#?}"))
        .declaration;
    serde_json::to_value(found).unwrap_or_default()
}

#[tokio::test]
async fn declarations_follow_gemini_cli() -> anyhow::Result<()> {
    let t = setup(json!({
        "rich": stdio(&["--rich"]),
        "some": { "command": fixture(), "includeTools": ["echo", "env"], "excludeTools": ["env"] },
    }))
    .await?;
    let l = list(&t, true).await?;
    let names: Vec<&str> = l.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "mcp_rich_echo",
            "mcp_rich_pid",
            "mcp_rich_crash",
            "mcp_rich_sleep",
            "mcp_rich_grow",
            "mcp_rich_env",
            "mcp_rich_content",
            "mcp_rich_typed",
            "mcp_rich_fail",
            "mcp_rich_badschema",
            "mcp_rich_wait",
            "mcp_rich_cancelled",
            "mcp_rich_progress",
            "mcp_some_echo",
        ],
        "servers by name, tools in server order, include/exclude applied"
    );
    let typed = &decl(&l, "mcp_rich_typed");
    assert_eq!(typed["name"], "mcp_rich_typed");
    let schema = &typed["parametersJsonSchema"];
    assert_eq!(schema["properties"]["label"], json!({"type": "string", "nullable": true}));
    assert_eq!(schema["properties"]["at"], json!({"$ref": "#/$defs/point"}));
    assert_eq!(schema["$defs"]["point"]["required"], json!(["x", "y"]));
    assert_eq!(schema["properties"]["wait_for_previous"]["type"], "boolean");
    let raw = l
        .tools
        .iter()
        .find(|t| t.name == "mcp_rich_typed")
        .and_then(|t| t.raw.as_ref().and_then(|r| serde_json::from_str::<Value>(r.get()).ok()))
        .unwrap_or_default();
    assert_eq!(
        raw["inputSchema"]["properties"]["label"]["type"],
        json!(["string", "null"]),
        "raw is untouched"
    );
    assert!(
        l.diagnostics.iter().any(|d| d.contains("'mcp_rich_badschema' cannot be compiled")),
        "{:#?}",
        l.diagnostics
    );
    Ok(())
}

#[tokio::test]
async fn calls_validate_convert_and_report_errors() -> anyhow::Result<()> {
    let t = setup(json!({ "rich": stdio(&["--rich"]) })).await?;
    let (c, s) = (&t.client, t.session.as_str());
    let r =
        call(c, s, "mcp_rich_echo", json!({"text": "hello"})).await.map_err(anyhow::Error::msg)?;
    assert_eq!((r.server.as_str(), r.tool.as_str(), r.is_error), ("rich", "echo", false));
    assert_eq!(r.parts, vec![json!({"text": "<untrusted_context>\nhello\n</untrusted_context>"})]);
    assert_eq!(
        r.function_response["functionResponse"]["response"]["output"],
        "<untrusted_context>\nhello\n</untrusted_context>"
    );
    assert_eq!(r.display, "hello");
    assert_eq!(r.result["content"][0]["text"], "hello");

    // Bad arguments never reach the server; the error names the failing path.
    let e = call(c, s, "mcp_rich_typed", json!({"at": {"x": 1}})).await.err().unwrap_or_default();
    assert!(e.starts_with("-31013: invalid arguments for tool 'mcp_rich_typed': /at: "), "{e}");
    assert!(e.contains("\"y\" is a required property"), "{e}");
    let e = call(c, s, "mcp_rich_echo", json!({"text": 5})).await.err().unwrap_or_default();
    assert!(e.contains("/text: 5 is not of type \"string\""), "{e}");
    // Every problem at once, so one retry can fix them all (it named only the first).
    let e = call(c, s, "mcp_rich_typed", json!({"at": {"x": "1"}})).await.err().unwrap_or_default();
    assert!(
        e.contains("\"y\" is a required property") && e.contains("/at/x: \"1\" is not of type"),
        "{e}"
    );
    let ok = call(
        c,
        s,
        "mcp_rich_typed",
        json!({"at": {"x": 1, "y": 2}, "label": null, "wait_for_previous": true}),
    )
    .await
    .map_err(anyhow::Error::msg)?;
    let echoed: Value = serde_json::from_str(r#"{"at":{"x":1,"y":2},"label":null}"#)?;
    assert_eq!(
        serde_json::from_str::<Value>(&ok.display)?,
        echoed,
        "wait_for_previous is the daemon's, not the server's"
    );
    // An uncompilable schema: the call goes through unvalidated.
    let r = call(c, s, "mcp_rich_badschema", json!({"x": "anything"}))
        .await
        .map_err(anyhow::Error::msg)?;
    assert_eq!(r.display, "ran without validation");
    let e = call(c, s, "mcp_rich_nope", json!({})).await.err().unwrap_or_default();
    assert_eq!(
        e,
        "-31012: MCP server 'rich' is connected but has no tool that is named 'mcp_rich_nope' in \
         this session; `gemctl mcp tools rich` lists its tools"
    );
    let e = call(c, s, "mcp_other_thing", json!({})).await.err().unwrap_or_default();
    assert_eq!(
        e,
        "-31012: no tool named 'mcp_other_thing' in this session (`gemctl mcp tools` lists them)"
    );

    // Every content type.
    let r = call(c, s, "mcp_rich_content", json!({})).await.map_err(anyhow::Error::msg)?;
    let texts: Vec<&str> = r.parts.iter().filter_map(|p| p["text"].as_str()).collect();
    assert_eq!(
        texts,
        [
            "<untrusted_context>\nplain text\n</untrusted_context>",
            "[Tool 'content' provided the following image data with mime-type: image/png]",
            "[Tool 'content' provided the following audio data with mime-type: audio/wav]",
            "<untrusted_context>\nembedded text\n</untrusted_context>",
            "[Tool 'content' provided the following embedded resource with mime-type: application/pdf]",
            "Resource Link: linked at file:///linked",
        ]
    );
    let fr = &r.function_response["functionResponse"];
    assert_eq!(fr["name"], "mcp_rich_content");
    assert_eq!(fr["parts"].as_array().map(Vec::len), Some(2), "image and pdf nested: {fr}");
    assert!(fr["response"]["output"].as_str().is_some_and(|o| o.starts_with(
        "[SYSTEM: Binary content (audio/wav) stripped from response due to protocol limitations.]\n"
    )));
    assert_eq!(
        r.display,
        "plain text\n[Image: image/png]\n[Audio: audio/wav]\nembedded text\n[Embedded Resource: application/pdf]\n[Link to linked: file:///linked]"
    );

    // A tool error.
    let r = call(c, s, "mcp_rich_fail", json!({})).await.map_err(anyhow::Error::msg)?;
    assert!(r.is_error);
    assert_eq!(r.display, "Error: MCP tool 'fail' reported an error.");
    // Gemini CLI's words: the server's tool name, the call as sent, the raw result.
    let message = format!(
        "MCP tool 'fail' reported tool error for function call: {{\"name\":\"fail\",\"args\":{{}}}} with response: [{{\"functionResponse\":{{\"name\":\"fail\",\"response\":{}}}}}]",
        r.result
    );
    assert_eq!(r.parts, vec![json!({ "text": message })]);
    assert_eq!(
        r.function_response,
        json!({"functionResponse": {"name": "mcp_rich_fail", "response": {"error": message}}})
    );
    Ok(())
}

#[tokio::test]
async fn results_that_break_the_schema_still_convert() -> anyhow::Result<()> {
    let t = setup(json!({ "raw": stdio(&["--raw"]) })).await?;
    let (c, s) = (&t.client, t.session.as_str());
    // An unknown content type is dropped from the parts, kept in the MCP result.
    let r = call(c, s, "mcp_raw_odd", json!({})).await.map_err(anyhow::Error::msg)?;
    assert!(!r.is_error);
    assert_eq!(
        r.parts,
        vec![
            json!({"text": "<untrusted_context>\nbefore\n</untrusted_context>"}),
            json!({"text": "<untrusted_context>\nafter\n</untrusted_context>"}),
        ]
    );
    assert_eq!(r.display, "before\n[Unknown content type: hologram]\nafter");
    assert_eq!(r.result["content"][1], json!({"type": "hologram", "data": "?"}));
    // A `content` that is not an array: Gemini CLI's parse-error part, and the raw result.
    let r = call(c, s, "mcp_raw_not_array", json!({})).await.map_err(anyhow::Error::msg)?;
    assert_eq!(r.parts, vec![json!({"text": "[Error: Could not parse tool response]"})]);
    assert_eq!(r.result["content"]["text"], "not in a list");
    assert_eq!(
        r.function_response["functionResponse"]["response"]["output"],
        "[Error: Could not parse tool response]"
    );
    assert!(r.display.starts_with("```json\n[\n  {\n    \"functionResponse\": {"), "{}", r.display);
    // The legacy `{"error": {"isError": "true"}}` form is an error, as in Gemini CLI.
    let r = call(c, s, "mcp_raw_legacy_error", json!({})).await.map_err(anyhow::Error::msg)?;
    assert!(r.is_error);
    assert_eq!(r.display, "Error: MCP tool 'legacy_error' reported an error.");
    // With a call id, the functionResponse carries it (Gemini matches responses to calls by it).
    let p = ToolsCallParams {
        session: s.into(),
        name: "mcp_raw_odd".into(),
        args: None,
        call_id: Some("call-7".into()),
        confirmed: false,
    };
    let r = c.tools_call(p).await?;
    assert_eq!(r.function_response["functionResponse"]["id"], "call-7");
    assert_eq!(r.function_response["functionResponse"]["name"], "mcp_raw_odd");
    // An empty prompt description is none (Gemini CLI: `description || "Invoke prompt …"`).
    let prompts =
        c.prompts_list(geminid_protocol::tools::CatalogParams { session: s.into() }).await?;
    assert_eq!(prompts.prompts[0].description, "Invoke prompt blank");
    // Neither broke the connection.
    let again = call(c, s, "mcp_raw_odd", json!({})).await.map_err(anyhow::Error::msg)?;
    assert_eq!(again.parts.len(), 2);
    Ok(())
}

/// Gemini CLI declares MCP tools by server name as JavaScript's `localeCompare` orders names
/// (its `ToolRegistry.sortTools`): `alpha`, `beta`, `Zeta`, not byte order's `Zeta` first.
#[tokio::test]
async fn servers_tools_come_in_gemini_clis_name_order() -> anyhow::Result<()> {
    let t = setup(json!({ "Zeta": stdio(&[]), "alpha": stdio(&[]), "beta": stdio(&[]) })).await?;
    let l = list(&t, false).await?;
    let servers: Vec<&str> =
        l.tools.iter().filter(|t| t.tool == "echo").map(|t| t.server.as_str()).collect();
    assert_eq!(servers, ["alpha", "beta", "Zeta"]);
    Ok(())
}

#[tokio::test]
async fn colliding_names_are_renamed_and_reported() -> anyhow::Result<()> {
    // "f x" and "f_x" sanitize to the same prefix: every tool collides.
    let t = setup(json!({ "f x": stdio(&[]), "f_x": stdio(&[]) })).await?;
    let l = list(&t, false).await?;
    let echo: Vec<(&str, &str)> = l
        .tools
        .iter()
        .filter(|t| t.tool == "echo")
        .map(|t| (t.name.as_str(), t.server.as_str()))
        .collect();
    assert_eq!(echo, [("mcp_f_x_echo", "f x"), ("mcp_f_x_echo__2", "f_x")]);
    assert!(
        l.diagnostics
            .iter()
            .any(|d| d.contains("tool 'echo' of MCP server 'f_x' would be named 'mcp_f_x_echo'")
                && d.contains("'mcp_f_x_echo__2'")),
        "{:#?}",
        l.diagnostics
    );
    // Each name reaches its own entry (the lookup never splits names).
    let a = call(&t.client, &t.session, "mcp_f_x_echo", json!({"text": "a"}))
        .await
        .map_err(anyhow::Error::msg)?;
    let b = call(&t.client, &t.session, "mcp_f_x_echo__2", json!({"text": "b"}))
        .await
        .map_err(anyhow::Error::msg)?;
    assert_eq!((a.server.as_str(), b.server.as_str()), ("f x", "f_x"));
    Ok(())
}

#[tokio::test]
async fn list_changed_refreshes_the_catalog_once() -> anyhow::Result<()> {
    let t = setup(json!({ "fx": growing(&[]) })).await?;
    assert_eq!(list(&t, false).await?.tools.len(), 6);
    let filter = EventsSubscribeParams {
        session: Some(t.session.clone()),
        kinds: Some(vec!["catalog/changed".into()]),
    };
    let mut events = t.client.subscribe_events(Some(filter)).await?;
    call(&t.client, &t.session, "mcp_fx_grow", json!({})).await.map_err(anyhow::Error::msg)?;
    let ev: Event = tokio::time::timeout(Duration::from_secs(5), events.next())
        .await?
        .ok_or_else(|| anyhow::anyhow!("no event"))??;
    let EventBody::CatalogChanged(c) = ev.body else { anyhow::bail!("unexpected {ev:?}") };
    assert_eq!((c.server.as_str(), c.tools), ("fx", 7));
    let l = list(&t, false).await?;
    assert!(l.tools.iter().any(|t| t.name == "mcp_fx_grown_1"), "{l:#?}");
    Ok(())
}

#[tokio::test]
async fn sessions_configured_alike_share_a_table_but_not_their_differences() -> anyhow::Result<()> {
    use geminid_protocol::api::McpApiClient;
    use geminid_protocol::config::McpEnableParams;
    let t = setup(json!({ "fx": growing(&[]), "gx": stdio(&[]) })).await?;
    let ws = t.home.root().join("other");
    std::fs::create_dir_all(&ws)?;
    let env = geminid_tests::mcp::shell_env(&t.home, &[]);
    let create = geminid_protocol::session::SessionCreateParams {
        workspace: ws.display().to_string(),
        env: Some(env),
        reuse_default: false,
        ..Default::default()
    };
    let other = t.client.create(create).await?.id;
    let names = |l: &ToolsListResult| l.tools.iter().map(|t| t.name.clone()).collect::<Vec<_>>();
    let mine = names(&list(&t, false).await?);
    let list_other =
        || t.client.tools_list(ToolsListParams { session: other.clone(), raw: false, all: false });
    assert_eq!(names(&list_other().await?), mine, "the same servers, the same table");
    assert_eq!(mine.len(), 12);

    // A session-only disable changes that session's table only.
    let disable = McpEnableParams { session: other.clone(), name: "gx".into(), session_only: true };
    t.client.mcp_disable(disable).await?;
    let theirs = names(&list_other().await?);
    assert!(theirs.iter().all(|n| n.starts_with("mcp_fx_")) && theirs.len() == 6, "{theirs:?}");
    assert_eq!(names(&list(&t, false).await?), mine);

    // A catalog change reaches every session using the server.
    call(&t.client, &t.session, "mcp_fx_grow", json!({})).await.map_err(anyhow::Error::msg)?;
    let grown = |l: Vec<String>| l.iter().any(|n| n == "mcp_fx_grown_1");
    let both = geminid_tests::eventually(Duration::from_secs(5), || async {
        let mine = list(&t, false).await.is_ok_and(|l| grown(names(&l)));
        mine && list_other().await.is_ok_and(|l| grown(names(&l)))
    })
    .await;
    assert!(both, "both sessions see the grown tool");
    Ok(())
}

#[tokio::test]
async fn a_caller_that_goes_away_cancels_the_call_on_the_server() -> anyhow::Result<()> {
    let t = setup(json!({ "rich": stdio(&["--rich"]) })).await?;
    list(&t, false).await?;
    // A second connection starts a long call and disconnects.
    let other = t.daemon.client().await?;
    other
        .attach(geminid_protocol::session::SessionAttachParams { id: t.session.clone(), env: None })
        .await?;
    let session = t.session.clone();
    let pending = tokio::spawn(async move {
        let _ = call(&other, &session, "mcp_rich_wait", json!({"ms": 30000})).await;
    });
    let running = logged(&t.client, None, "rich", "waiting 30000 ms", Duration::from_secs(10));
    assert!(running.await, "the call never reached the server");
    pending.abort();
    let _ = pending.await;
    assert_eq!(
        cancelled_reaches(&t, 1).await?,
        "1",
        "the server never saw notifications/cancelled"
    );
    Ok(())
}

#[tokio::test]
async fn many_clients_on_one_shared_server_never_cross() -> anyhow::Result<()> {
    const CLIENTS: usize = 32;
    const CALLS: usize = 500;
    let t = setup(json!({ "fx": stdio(&[]) })).await?;
    list(&t, false).await?;
    let mut tasks = Vec::new();
    for c in 0..CLIENTS {
        let client = t.daemon.client().await?;
        let session = t.session.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..CALLS {
                let text = format!("client {c} call {i}");
                let r = call(&client, &session, "mcp_fx_echo", json!({"text": text})).await?;
                if r.display != text {
                    return Err(format!("crossed: sent {text:?}, got {:?}", r.display));
                }
            }
            Ok::<_, String>(())
        }));
    }
    for task in tasks {
        task.await?.map_err(anyhow::Error::msg)?;
    }
    Ok(())
}

#[tokio::test]
async fn gemctl_tools_describe_and_call() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    write_user_settings(&home, json!({ "rich": stdio(&["--rich"]) }))?;
    let _daemon = Daemon::start(&home, FAST).await?;
    let run = |args: &[&str]| home.gemctl_run(args);
    // Untrusted, the folder's stdio servers are blocked: say where to look.
    for what in ["tools", "prompts", "resources"] {
        let (code, out, err) = run(&["mcp", what])?;
        assert_eq!(code, 0, "{err}");
        assert!(out.starts_with(&format!("No {what}. `gemctl mcp list` shows")), "{out}");
    }
    assert_eq!(run(&["trust"])?.0, 0);
    let (code, out, err) = run(&["mcp", "tools"])?;
    assert_eq!(code, 0, "{err}");
    assert!(out.lines().next().is_some_and(|l| l.starts_with("NAME")), "{out}");
    assert!(out.contains("mcp_rich_echo") && out.contains("Returns its text"), "{out}");
    assert!(
        err.contains("note: the input schema of 'mcp_rich_badschema' cannot be compiled"),
        "{err}"
    );
    let described = home.gemctl_json(&["mcp", "describe", "typed"])?;
    assert_eq!(described["name"], "mcp_rich_typed");
    assert_eq!(
        described["declaration"]["parametersJsonSchema"]["properties"]["label"]["nullable"],
        true
    );
    assert_eq!(described["raw"]["name"], "typed");
    let (code, _, err) = run(&["mcp", "describe", "nosuch"])?;
    assert_eq!(code, 1);
    assert!(err.contains("no tool named 'nosuch'"), "{err}");
    // As text, indented all the way down (the declaration is cached pre-serialized).
    let (code, text, err) = run(&["mcp", "describe", "mcp_rich_typed"])?;
    assert_eq!(code, 0, "{err}");
    assert!(text.contains("\n      \"$defs\": {\n"), "{text}");
    assert_eq!(serde_json::from_str::<serde_json::Value>(&text)?, described);

    let (code, out, err) = run(&["call", "mcp_rich_echo", r#"{"text": "from gemctl"}"#])?;
    assert_eq!((code, out.as_str()), (0, "from gemctl\n"), "{err}");
    // A name that names nothing gets the one likely meant, never called through it (audit
    // M3): a tool's own name for its full name, a typo, a server's name with a slip.
    for (given, want) in [
        (
            &["call", "echo", "{}"][..],
            "no tool named 'echo' in this session (`gemctl mcp tools` lists them; did you mean 'mcp_rich_echo'?)",
        ),
        (&["call", "mcp_rich_ehco", "{}"][..], "did you mean 'mcp_rich_echo'?"),
        (
            &["mcp", "describe", "mcp_rich_tpyed"][..],
            "no tool named 'mcp_rich_tpyed' (did you mean 'mcp_rich_typed'?)",
        ),
        (
            &["mcp", "tools", "rihc"][..],
            "no MCP server named 'rihc' in this session (did you mean 'rich'?)",
        ),
        (&["mcp", "logs", "Rich"][..], "did you mean 'rich'?"),
    ] {
        let (code, out, err) = run(given)?;
        assert_ne!(code, 0, "{given:?}: {out}");
        assert!(err.contains(want), "{given:?}: {err}");
    }
    // Progress on stderr when asked (by default only on a terminal).
    // The answer can overtake the last progress event on the socket: every step is shown all
    // the same (a race, so tried several times).
    let steps = r#"{"steps": 3}"#;
    for _ in 0..12 {
        let (code, out, err) = run(&["call", "--progress", "mcp_rich_progress", steps])?;
        assert_eq!((code, out.as_str()), (0, "3 steps\n"), "{err}");
        let shown: Vec<&str> = err.lines().filter(|l| l.starts_with("progress: ")).collect();
        let all = ["progress: 1/3 step 1", "progress: 2/3 step 2", "progress: 3/3 step 3"];
        assert_eq!(shown, all);
    }
    let (code, _, err) = run(&["call", "mcp_rich_progress", steps])?;
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("progress:"), "{err}");
    // On a terminal (a pty from `script`): one line redrawn with a bar, gone at the end (audit
    // M8).
    let line = r#"gemctl call mcp_rich_progress '{"steps": 3}'"#;
    let out = home.command("script", &["-qefc", line, "/dev/null"]).output()?;
    let tty = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{tty}");
    // Labelled with the tool's name (audit turn 4, P5: a bare bar said nothing of what).
    let bar = "\r\x1b[Kmcp_rich_progress [#######-------------] 1/3 step 1";
    assert!(tty.contains(bar), "{tty:?}");
    let end = "\r\x1b[Kmcp_rich_progress [####################] 3/3 step 3\r\x1b[K3 steps";
    assert!(tty.contains(end), "{tty:?}");
    // A reader that goes away (`gemctl … | head`) ends gemctl quietly.
    let mut child = home
        .gemctl_cmd(&["--json", "mcp", "tools"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()?;
    drop(child.stdout.take());
    let out = child.wait_with_output()?;
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    let args = home.root().join("args.json");
    std::fs::write(&args, r#"{"at": {"x": 1, "y": 2}}"#)?;
    let r =
        home.gemctl_json(&["call", "mcp_rich_typed", "--args-file", &args.display().to_string()])?;
    assert_eq!(r["isError"], false);
    assert_eq!(r["tool"], "typed");
    let (code, _, err) = run(&["call", "mcp_rich_fail"])?;
    assert_eq!(code, 1, "a tool error exits 1");
    assert!(
        err.contains("Error: MCP tool 'fail' reported an error.") && err.contains("it broke"),
        "{err}"
    );
    let (code, _, err) = run(&["call", "mcp_rich_echo", "{not json"])?;
    assert_eq!(code, 1);
    assert!(err.contains("the arguments are not JSON"), "{err}");
    let (code, _, err) = run(&["call", "mcp_rich_echo", "[1]"])?;
    assert_eq!(code, 1);
    assert!(err.contains("must be a JSON object"), "{err}");
    let (code, _, err) = run(&["call", "mcp_rich_echo", r#"{"text": 1}"#])?;
    assert_eq!(code, 1);
    assert!(err.contains("invalid arguments for tool 'mcp_rich_echo': /text"), "{err}");
    Ok(())
}

#[tokio::test]
async fn describe_by_a_short_name_that_two_servers_have_asks_for_the_full_one() -> anyhow::Result<()>
{
    let home = TestHome::new()?;
    write_user_settings(&home, json!({ "a": stdio(&[]), "b": stdio(&[]) }))?;
    let _daemon = Daemon::start(&home, FAST).await?;
    assert_eq!(home.gemctl_run(&["trust"])?.0, 0);
    let (code, _, err) = home.gemctl_run(&["mcp", "describe", "echo"])?;
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(
            "several servers have a tool 'echo': mcp_a_echo, mcp_b_echo; give its full name"
        ),
        "{err}"
    );
    assert_eq!(home.gemctl_json(&["mcp", "describe", "mcp_b_echo"])?["server"], "b");
    Ok(())
}

#[tokio::test]
async fn a_slow_tool_times_out_and_is_cancelled() -> anyhow::Result<()> {
    let t = setup(json!({ "rich": { "command": fixture(), "args": ["--rich"], "timeout": 300 } }))
        .await?;
    let e = call(&t.client, &t.session, "mcp_rich_wait", json!({"ms": 20000}))
        .await
        .err()
        .unwrap_or_default();
    assert_eq!(e, "-31011: MCP server 'rich' did not answer within 300ms");
    assert_eq!(
        cancelled_reaches(&t, 1).await?,
        "1",
        "the timed-out call was not cancelled on the server"
    );
    Ok(())
}

#[tokio::test]
async fn a_changed_timeout_applies_to_the_running_server() -> anyhow::Result<()> {
    // `timeout` is not part of what a server is (changing it restarts nothing): each
    // session's requests wait as long as its own configuration says, now.
    use geminid_protocol::api::McpApiClient;
    use geminid_protocol::config::McpReloadParams;
    let entry =
        |timeout: u64| json!({ "command": fixture(), "args": ["--rich"], "timeout": timeout });
    let t = setup(json!({ "rich": entry(20_000) })).await?;
    let pid =
        call(&t.client, &t.session, "mcp_rich_pid", json!({})).await.map_err(anyhow::Error::msg)?;
    let slept = call(&t.client, &t.session, "mcp_rich_sleep", json!({"ms": 700})).await;
    assert_eq!(slept.map_err(anyhow::Error::msg)?.display, "slept 700 ms");

    geminid_tests::mcp::write_user_settings(&t.home, json!({ "rich": entry(300) }))?;
    let reload = McpReloadParams { session: Some(t.session.clone()) };
    let changes = t.client.mcp_reload(Some(reload)).await?;
    assert!(changes.changes.iter().all(|c| c.servers_changed == ["rich"]), "{changes:?}");
    let e = call(&t.client, &t.session, "mcp_rich_sleep", json!({"ms": 700})).await.err();
    assert_eq!(e.as_deref(), Some("-31011: MCP server 'rich' did not answer within 300ms"));
    let same =
        call(&t.client, &t.session, "mcp_rich_pid", json!({})).await.map_err(anyhow::Error::msg)?;
    assert_eq!(same.display, pid.display, "the server was restarted");
    Ok(())
}

#[tokio::test]
async fn prompts_resources_and_instructions() -> anyhow::Result<()> {
    use geminid_protocol::api::{PromptsApiClient, ResourcesApiClient};
    use geminid_protocol::tools::{CatalogParams, PromptsGetParams, ResourcesReadParams};
    // Two servers offer the same prompts (renamed); lists come in pages of 2.
    let t = setup(json!({
        "a": stdio(&["--rich", "--page-size", "2"]),
        "b": { "command": fixture(), "args": ["--rich"], "env": { "OTHER": "1" } },
    }))
    .await?;
    let (c, s) = (&t.client, t.session.clone());
    let tools = list(&t, false).await?;
    assert_eq!(tools.tools.iter().filter(|t| t.server == "a").count(), 13, "every page of tools");
    let cp = || CatalogParams { session: s.clone() };
    let prompts = c.prompts_list(cp()).await?;
    let names: Vec<&str> = prompts.prompts.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "a.greet",
            "a.pair",
            "a.plain",
            "a.image-only",
            "b.greet",
            "b.pair",
            "b.plain",
            "b.image-only"
        ]
    );
    assert_eq!(prompts.prompts[2].description, "Invoke prompt plain");
    let get = |name: &str, args: &str| PromptsGetParams {
        session: s.clone(),
        name: name.into(),
        args: Some(args.into()),
        arguments: None,
    };
    let r = c.prompts_get(get("a.greet", "Ann Lee --style=\"warm\"")).await?;
    assert_eq!(
        r.arguments,
        json!({"name": "Ann Lee", "style": "warm"}).as_object().cloned().unwrap_or_default()
    );
    assert_eq!(
        r.submit, r#""greet {\"name\":\"Ann Lee\",\"style\":\"warm\"}""#,
        "JSON string literal of the text"
    );
    let e = c
        .prompts_get(get("b.pair", "only-one"))
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(e.contains("Missing required argument(s): --second"), "{e}");
    let e = c
        .prompts_get(get("a.image-only", ""))
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(e.contains("did not answer with text"), "{e}");
    let e = c.prompts_get(get("nope", "")).await.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(e.contains("no prompt named 'nope'"), "{e}");

    let res = c.resources_list(cp()).await?;
    assert_eq!(
        res.resources.iter().filter(|r| r.server == "a").count(),
        3,
        "every page of resources"
    );
    assert_eq!(res.resources[0].reference, "@a:file:///notes.txt");
    let read = |reference: &str| ResourcesReadParams {
        session: s.clone(),
        reference: Some(reference.into()),
        ..Default::default()
    };
    let r = c.resources_read(read("@a:file:///notes.txt")).await?;
    assert_eq!(
        r.parts,
        vec![
            json!({"text": "\nContent from @file:///notes.txt:\n"}),
            json!({"text": "remember the milk"})
        ]
    );
    let r = c.resources_read(read("@b:file:///logo.png")).await?;
    assert_eq!(r.parts[1], json!({"text": "[Binary resource content image/png, 11 bytes]"}));
    let e = c
        .resources_read(read("file:///notes.txt"))
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(e.contains("several servers list"), "{e}");
    // Only what a server offers is read: a URI it lists, or one its template matches.
    let e = c
        .resources_read(read("@a:file:///secret.txt"))
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(e.contains("MCP server 'a' lists no resource file:///secret.txt"), "{e}");
    let r = c.resources_read(read("@a:file:///logs/monday.log")).await?;
    assert_eq!(r.parts[1], json!({"text": "read file:///logs/monday.log"}));
    // A bare URI by `uri` alone, as documented, when one server lists it.
    let bare = ResourcesReadParams {
        session: s.clone(),
        uri: Some("file:///third.txt".into()),
        server: Some("b".into()),
        ..Default::default()
    };
    assert_eq!(c.resources_read(bare).await?.server, "b");
    let bare = ResourcesReadParams {
        session: s.clone(),
        uri: Some("file:///notes.txt".into()),
        ..Default::default()
    };
    let e = c.resources_read(bare).await.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(e.contains("several servers list file:///notes.txt"), "{e}");

    let i = c.tools_instructions(cp()).await?;
    assert_eq!(i.servers.len(), 2);
    assert!(i.system_prompt.starts_with("The following are instructions provided by the tool server 'a':\n---[start of server instructions]---\nThe geminid test fixture.\n---[end of server instructions]---\n\nThe following"), "{}", i.system_prompt);
    Ok(())
}

#[tokio::test]
async fn gemctl_prompts_and_resources() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    write_user_settings(&home, json!({ "rich": stdio(&["--rich"]) }))?;
    let _daemon = Daemon::start(&home, FAST).await?;
    let run = |args: &[&str]| home.gemctl_run(args);
    assert_eq!(run(&["trust"])?.0, 0);
    let (code, out, err) = run(&["mcp", "prompts"])?;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("/greet")
            && out.contains("--name [--style]")
            && out.contains("Greets someone"),
        "{out}"
    );
    let (code, out, err) = run(&["prompt", "/greet", "Ann", "--style=warm"])?;
    assert_eq!((code, out.as_str()), (0, "greet {\"name\":\"Ann\",\"style\":\"warm\"}\n"), "{err}");
    // The shell has already split (and unquoted) the words: values keep their spaces and quotes.
    let (code, out, err) = run(&["prompt", "greet", "--name=Ada Lovelace", r#"--style=a "b" \c"#])?;
    let expected = json!({"name": "Ada Lovelace", "style": r#"a "b" \c"#});
    assert_eq!((code, out.as_str()), (0, format!("greet {expected}\n").as_str()), "{err}");
    // `--first=` is unset (Gemini CLI: an empty value is no value): positionals fill both.
    let (code, out, err) = run(&["prompt", "pair", "one two", "--first=", "three"])?;
    let expected = json!({"first": "one two", "second": "three"});
    assert_eq!((code, out.as_str()), (0, format!("pair {expected}\n").as_str()), "{err}");
    let (code, _, err) = run(&["prompt", "pair", "one"])?;
    assert_eq!(code, 1);
    assert!(err.contains("Missing required argument(s): --second"), "{err}");
    // A name that names no prompt is answered with the one likely meant, which is not got
    // (new-user audit M7): the server's name before it, or a slip.
    for (given, meant) in [("rich:greet", "greet"), ("rich.pair", "pair"), ("gret", "greet")] {
        let (code, out, err) = run(&["prompt", given, "Ann"])?;
        assert_eq!((code, out.as_str()), (1, ""), "{given}: {err}");
        assert!(
            err.contains(&format!(
                "no prompt named '{given}' in this session (`gemctl mcp prompts` lists them; \
                 did you mean '{meant}'?)"
            )),
            "{given}: {err}"
        );
    }
    let (code, out, err) = run(&["mcp", "resources"])?;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("@rich:file:///logo.png") && out.contains("image/png"), "{out}");
    let (code, out, err) = run(&["read", "@rich:file:///notes.txt"])?;
    assert_eq!((code, out.as_str()), (0, "remember the milk\n"), "{err}");
    let (code, out, _) = run(&["read", "file:///logo.png"])?;
    assert_eq!((code, out.as_str()), (0, "[Binary resource content image/png, 11 bytes]\n"));
    Ok(())
}

/// A URI whose scheme is a server's name (`memory://graph` of the server `memory`) is that
/// URI, not the server `memory`'s `//graph`.
#[tokio::test]
async fn a_uri_whose_scheme_names_a_server_is_read_as_the_uri() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    write_user_settings(&home, json!({ "file": stdio(&["--rich"]) }))?;
    let _daemon = Daemon::start(&home, FAST).await?;
    assert!(home.gemctl(&["trust"])?.status.success());
    for reference in ["file:///notes.txt", "@file:file:///notes.txt"] {
        let (code, out, err) = home.gemctl_run(&["read", reference])?;
        assert_eq!((code, out.as_str()), (0, "remember the milk\n"), "{reference}: {err}");
    }
    let (code, _, err) = home.gemctl_run(&["read", "file:///nothing-here"])?;
    assert_eq!(code, 1);
    assert!(err.contains("lists no resource") || err.contains("no server lists"), "{err}");
    Ok(())
}

#[tokio::test]
async fn progress_arrives_as_events_and_calls_can_be_cancelled() -> anyhow::Result<()> {
    use geminid_protocol::tools::ToolsCancelParams;
    let t = setup(json!({ "rich": stdio(&["--rich"]) })).await?;
    list(&t, false).await?;
    let filter = EventsSubscribeParams {
        session: Some(t.session.clone()),
        kinds: Some(vec!["tools/progress".into()]),
    };
    let mut events = t.client.subscribe_events(Some(filter)).await?;
    let p = ToolsCallParams {
        session: t.session.clone(),
        name: "mcp_rich_progress".into(),
        args: json!({"steps": 3}).as_object().cloned(),
        call_id: Some("c-1".into()),
        confirmed: false,
    };
    let r = t.client.tools_call(p).await?;
    assert_eq!(r.display, "3 steps");
    let mut seen = Vec::new();
    let mut last = 0;
    for _ in 0..3 {
        let ev: Event = tokio::time::timeout(Duration::from_secs(5), events.next())
            .await?
            .ok_or_else(|| anyhow::anyhow!("no event"))??;
        last = ev.seq;
        let EventBody::ToolProgress(p) = ev.body else { anyhow::bail!("unexpected {ev:?}") };
        assert_eq!(
            (p.call_id.as_deref(), p.name.as_str(), p.total),
            (Some("c-1"), "mcp_rich_progress", Some(3.0))
        );
        seen.push((p.progress, p.message.unwrap_or_default()));
    }
    assert_eq!(seen, [(1.0, "step 1".into()), (2.0, "step 2".into()), (3.0, "step 3".into())]);
    // The answer names the last of them, which it may overtake on the socket.
    assert_eq!(r.last_progress, Some(last));

    // tools/cancel ends a call at once; the server sees notifications/cancelled.
    let other = t.daemon.client().await?;
    let session = t.session.clone();
    let long = tokio::spawn(async move {
        let p = ToolsCallParams {
            session,
            name: "mcp_rich_wait".into(),
            args: json!({"ms": 30000}).as_object().cloned(),
            call_id: Some("long".into()),
            confirmed: false,
        };
        other.tools_call(p).await
    });
    let running = logged(&t.client, None, "rich", "waiting 30000 ms", Duration::from_secs(10));
    assert!(running.await, "the call never reached the server");
    // An id names one call at a time: a second call with it is refused, and sends nothing.
    let twin = ToolsCallParams {
        session: t.session.clone(),
        name: "mcp_rich_echo".into(),
        args: json!({"text": "twin"}).as_object().cloned(),
        call_id: Some("long".into()),
        confirmed: false,
    };
    match t.client.tools_call(twin).await {
        Err(jsonrpsee::core::client::Error::Call(e)) => assert_eq!(
            (e.code(), e.message()),
            (-32602, "callId 'long' is already used by a call in progress in this session")
        ),
        other => anyhow::bail!("a second call with a running call's id: {other:?}"),
    }
    let c = t
        .client
        .tools_cancel(ToolsCancelParams { session: t.session.clone(), call_id: "long".into() })
        .await?;
    assert!(c.cancelled);
    let r = tokio::time::timeout(Duration::from_secs(2), long).await??;
    let e = r.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(e.contains("call 'long' to 'mcp_rich_wait' was cancelled"), "{e}");
    let again = t
        .client
        .tools_cancel(ToolsCancelParams { session: t.session.clone(), call_id: "long".into() })
        .await?;
    assert!(!again.cancelled, "an id that is not running is not cancelled");
    assert_eq!(cancelled_reaches(&t, 1).await?, "1");
    // Once that call has ended, its id can be used again.
    let reuse = ToolsCallParams {
        session: t.session.clone(),
        name: "mcp_rich_echo".into(),
        args: json!({"text": "again"}).as_object().cloned(),
        call_id: Some("long".into()),
        confirmed: false,
    };
    assert_eq!(t.client.tools_call(reuse).await?.display, "again");
    Ok(())
}

#[tokio::test]
async fn a_server_dying_mid_call_fails_the_call_at_once() -> anyhow::Result<()> {
    let t = setup(json!({ "fx": stdio(&[]) })).await?;
    list(&t, false).await?;
    let started = std::time::Instant::now();
    let e = call(&t.client, &t.session, "mcp_fx_crash", json!({"code": 7}))
        .await
        .err()
        .unwrap_or_default();
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(e, "-31010: MCP server 'fx' exited with status 7 during the call");
    Ok(())
}

#[tokio::test]
async fn a_list_changed_storm_is_coalesced() -> anyhow::Result<()> {
    let t = setup(json!({ "fx": growing(&[]) })).await?;
    list(&t, false).await?;
    let filter = EventsSubscribeParams {
        session: Some(t.session.clone()),
        kinds: Some(vec!["catalog/changed".into()]),
    };
    let mut events = t.client.subscribe_events(Some(filter)).await?;
    // Twenty grows at once: twenty tools/list_changed notifications.
    let calls: Vec<_> =
        (0..20).map(|_| call(&t.client, &t.session, "mcp_fx_grow", json!({}))).collect();
    for r in futures::future::join_all(calls).await {
        r.map_err(anyhow::Error::msg)?;
    }
    let mut events_seen = 0;
    let mut last = 0;
    while let Ok(Some(ev)) = tokio::time::timeout(Duration::from_millis(1500), events.next()).await
    {
        if let EventBody::CatalogChanged(c) = ev?.body {
            events_seen += 1;
            last = c.tools;
        }
    }
    assert_eq!(last, 26, "the final catalog has every grown tool");
    assert!(events_seen < 10, "{events_seen} events for one storm of 20 notifications");
    assert_eq!(list(&t, false).await?.tools.len(), 26);
    Ok(())
}

#[tokio::test]
async fn parallel_first_calls_all_wait_for_the_same_start() -> anyhow::Result<()> {
    // A fresh session's first turn: several calls at once, none preceded by mcp/start, to a
    // server that takes a moment to load. Every one must find its tool (Gemini sends parallel
    // function calls), and the slow server's start must not make the others fail.
    let t = setup(json!({
        "slow": stdio(&["--startup-delay-ms", "400"]),
        "quick": stdio(&[]),
    }))
    .await?;
    // A front-end that starts the servers without waiting (`mcp/start` with `wait: false`),
    // then sends its first turn's calls, staggered as separate processes arrive: two while
    // both servers start, two once the quick one is up and the slow one still starting.
    let start = StartParams { session: t.session.clone(), wait: false };
    t.client.mcp_start(start).await?;
    let quick_up = || async {
        let p = ListServersParams { session: None, usage: false };
        let listed = t.client.mcp_list_servers(Some(p)).await.map(|l| l.servers);
        listed
            .is_ok_and(|s| s.iter().any(|s| s.name == "quick" && s.state == ServerState::Connected))
    };
    let calls = (0..4u64).map(|i| {
        let name = if i % 2 == 0 { "mcp_slow_echo" } else { "mcp_quick_echo" };
        let (client, session) = (&t.client, &t.session);
        async move {
            if i >= 2 {
                geminid_tests::eventually(Duration::from_secs(10), quick_up).await;
            }
            call(client, session, name, json!({"text": format!("n{i}")})).await
        }
    });
    let answers: Vec<String> = futures::future::join_all(calls)
        .await
        .into_iter()
        .map(|r| r.map(|ok| ok.display).unwrap_or_else(|e| format!("failed: {e}")))
        .collect();
    assert_eq!(answers, ["n0", "n1", "n2", "n3"]);
    Ok(())
}

#[tokio::test]
async fn wait_for_previous_is_taken_by_the_daemon_not_the_server() -> anyhow::Result<()> {
    // A zod-style schema (`additionalProperties: false`): the declaration offers Gemini CLI's
    // `wait_for_previous`, so a call with it must pass, and the server must not get it.
    let t = setup(json!({ "raw": stdio(&["--raw"]) })).await?;
    let (c, s) = (&t.client, t.session.as_str());
    let listed = list(&t, false).await?;
    let d = decl(&listed, "mcp_raw_strict");
    assert_eq!(d["parametersJsonSchema"]["properties"]["wait_for_previous"]["type"], "boolean");
    assert_eq!(d["parametersJsonSchema"]["additionalProperties"], false);
    for wait in [true, false] {
        let r = call(c, s, "mcp_raw_strict", json!({"q": "x", "wait_for_previous": wait}))
            .await
            .map_err(anyhow::Error::msg)?;
        assert_eq!(r.display, r#"{"q":"x"}"#, "the server got only its own parameter");
    }
    let e = call(c, s, "mcp_raw_strict", json!({"q": "x", "wait_for_previous": "yes"}))
        .await
        .err()
        .unwrap_or_default();
    assert!(e.contains("wait_for_previous: must be a boolean"), "{e}");
    // Anything else the schema forbids is still refused.
    let e =
        call(c, s, "mcp_raw_strict", json!({"q": "x", "other": 1})).await.err().unwrap_or_default();
    assert!(e.contains("invalid arguments for tool 'mcp_raw_strict'"), "{e}");
    Ok(())
}

#[tokio::test]
async fn a_tool_of_a_server_that_is_not_running_says_why_and_what_helps() -> anyhow::Result<()> {
    let t = setup(json!({
        "off": stdio(&[]),
        "dead": { "command": "/nonexistent/mcp-server-xyz" },
        "ok": stdio(&[]),
    }))
    .await?;
    let enablement = t.home.root().join("home/.gemini/mcp-server-enablement.json");
    std::fs::write(&enablement, json!({ "off": { "enabled": false } }).to_string())?;
    let reload = geminid_protocol::config::McpReloadParams { session: None };
    t.client.mcp_reload(Some(reload)).await?;
    let (c, s) = (&t.client, t.session.as_str());
    assert_eq!(
        call(c, s, "mcp_ok_echo", json!({"text": "hi"})).await.map(|r| r.display),
        Ok("hi".into())
    );
    let e = call(c, s, "mcp_off_echo", json!({})).await.err().unwrap_or_default();
    assert_eq!(
        e,
        "-31010: MCP server 'off' is disabled (disabled in mcp-server-enablement.json); `gemctl \
         mcp enable off` enables it"
    );
    let e = call(c, s, "mcp_dead_echo", json!({})).await.err().unwrap_or_default();
    assert!(e.starts_with("-31010: MCP server 'dead' is "), "{e}");
    assert!(e.contains("/nonexistent/mcp-server-xyz"), "the cause is named: {e}");
    assert!(
        e.ends_with("`gemctl mcp logs dead` shows why, `gemctl mcp restart dead` starts it again"),
        "{e}"
    );
    Ok(())
}

/// `mcp-client.test.ts`'s discovery cases where geminid is deliberately more lenient: a
/// failing `prompts/list` keeps the server's tools (Gemini CLI drops the server), and a server
/// that offers nothing stays connected (Gemini CLI fails it); both are said in the
/// diagnostics and the server's log. Empty instructions are none, as in Gemini CLI.
#[tokio::test]
async fn discovery_keeps_what_works_and_says_what_did_not() -> anyhow::Result<()> {
    use geminid_protocol::tools::CatalogParams;
    let t = setup(json!({
        "broken": stdio(&["--raw", "--fail-prompts"]),
        "empty": stdio(&["--raw", "--empty"]),
    }))
    .await?;
    let listed = list(&t, false).await?;
    assert!(listed.tools.iter().any(|x| x.name == "mcp_broken_odd"), "{listed:#?}");
    assert!(
        listed
            .diagnostics
            .iter()
            .any(|d| d.starts_with("MCP server 'broken': listing its prompts failed (")
                && d.contains("prompts are broken")
                && d.ends_with("it is used without them")),
        "{:#?}",
        listed.diagnostics
    );
    assert!(
        listed
            .diagnostics
            .iter()
            .any(|d| d.starts_with("MCP server 'empty': it offers no tools, prompts or resources")),
        "{:#?}",
        listed.diagnostics
    );
    let logs = server_log(&t, "broken").await?;
    assert!(logs.lines.iter().any(|l| l.text.contains("listing its prompts failed")), "{logs:#?}");
    let i = t.client.tools_instructions(CatalogParams { session: t.session.clone() }).await?;
    assert_eq!(
        i.servers,
        vec![("broken".to_owned(), "Raw fixture.".to_owned())],
        "empty instructions are none"
    );
    Ok(())
}

/// One server's slow start never holds calls to another, and a server whose `tools/list`
/// never answers finishes its start within the start-up timeout, saying so.
#[tokio::test]
async fn a_server_that_never_lists_holds_up_nobody() -> anyhow::Result<()> {
    // A start-up timeout long enough that a busy machine's slow answer is not mistaken for
    // waiting on it.
    let mut hang = stdio(&["--hang-list"]);
    hang["timeout"] = json!(6000);
    let t = setup(json!({ "hang": hang, "quick": stdio(&[]) })).await?;
    let (c, s) = (&t.client, t.session.as_str());
    // The session's first call: quick answers while hang is still starting.
    let t0 = std::time::Instant::now();
    let r =
        call(c, s, "mcp_quick_echo", json!({"text": "now"})).await.map_err(anyhow::Error::msg)?;
    assert_eq!(r.display, "now");
    assert!(t0.elapsed() < Duration::from_secs(4), "waited {:?} for another server", t0.elapsed());
    // hang's start ends at its start-up timeout (6 s), connected without tools and saying why,
    // not `connecting` for the 10-minute request timeout.
    let listed = list(&t, false).await?;
    assert!(t0.elapsed() < Duration::from_secs(60), "{:?}", t0.elapsed());
    assert!(
        listed.diagnostics.iter().any(|d| d == "MCP server 'hang': listing its tools timed out; it is used without them"),
        "{:#?}",
        listed.diagnostics
    );
    let e = call(c, s, "mcp_hang_echo", json!({})).await.err().unwrap_or_default();
    assert!(e.contains("MCP server 'hang' is connected but has no tool"), "{e}");
    Ok(())
}

/// A server that lingered out is still stopping (it ignores SIGTERM) when its session comes
/// back: the call goes to a new copy, never to the one on its way out. The test waits for the
/// daemon to take the server out of service (it leaves `mcp/listServers`), not for a time, and
/// the stop grace is the default (3 s), so the call lands inside it on any machine.
#[tokio::test]
async fn a_call_after_the_linger_never_reaches_the_stopping_server() -> anyhow::Result<()> {
    use geminid_protocol::mcp::ListServersParams;
    use geminid_protocol::session::SessionIdParams;
    let home = TestHome::allowing_mcp()?;
    write_user_settings(
        &home,
        json!({ "slowstop": stdio(&["--ignore-sigterm", "--survive-stdin-eof"]) }),
    )?;
    // FAST without its short stop grace.
    let args: Vec<&str> = FAST
        .chunks(2)
        .filter(|kv| kv.first() != Some(&"--mcp-stop-grace"))
        .flatten()
        .copied()
        .collect();
    let daemon = Daemon::start(&home, &args).await?;
    let c = &daemon.client().await?;
    let s = geminid_tests::mcp::new_session(c, &home).await?;
    let first = call(c, &s, "mcp_slowstop_pid", json!({})).await.map_err(anyhow::Error::msg)?;
    let old: u32 = first.display.parse()?;
    c.detach(SessionIdParams { id: s.clone() }).await?;
    let out_of_service = || async {
        let all = ListServersParams { session: None, usage: false };
        c.mcp_list_servers(Some(all))
            .await
            .is_ok_and(|l| l.servers.iter().all(|x| x.name != "slowstop"))
    };
    assert!(
        geminid_tests::eventually(Duration::from_secs(10), out_of_service).await,
        "the server outlived its linger"
    );
    c.attach(geminid_protocol::session::SessionAttachParams { id: s.clone(), env: None }).await?;
    let second = call(c, &s, "mcp_slowstop_pid", json!({})).await.map_err(anyhow::Error::msg)?;
    assert_ne!(first.display, second.display, "a new process answers");
    let stopping = !geminid_tests::process_gone(old);
    assert!(stopping, "the old copy was still stopping when the call landed");
    // And the stop ends: SIGKILL after the grace.
    let gone = || async move { geminid_tests::process_gone(old) };
    assert!(
        geminid_tests::eventually(Duration::from_secs(15), gone).await,
        "{old} outlived its stop"
    );
    Ok(())
}

/// One malformed tool (no `inputSchema`, no name) costs the server only that tool: the good
/// one beside it is listed and callable, and each bad one is said in the diagnostics and the
/// server's log.
#[tokio::test]
async fn a_malformed_tool_costs_only_itself() -> anyhow::Result<()> {
    let t = setup(json!({ "mixed": stdio(&["--raw", "--bad-tool"]) })).await?;
    let listed = list(&t, false).await?;
    let names: Vec<&str> = listed.tools.iter().map(|x| x.name.as_str()).collect();
    assert_eq!(names, ["mcp_mixed_odd"], "{:#?}", listed.diagnostics);
    for want in [
        "MCP server 'mixed': its tool 'broken' is left out: it has no inputSchema",
        "MCP server 'mixed': its tool number 3 is left out: it has no name",
    ] {
        assert!(
            listed.diagnostics.iter().any(|d| d == want),
            "{want:?} in {:#?}",
            listed.diagnostics
        );
    }
    let r = call(&t.client, &t.session, "mcp_mixed_odd", json!({}))
        .await
        .map_err(anyhow::Error::msg)?;
    assert!(r.display.starts_with("before"), "{}", r.display);
    let logs = server_log(&t, "mixed").await?;
    assert!(
        logs.lines.iter().any(|l| l.text.contains("its tool 'broken' is left out")),
        "{logs:#?}"
    );
    // `mcp list` says it too, under the server.
    let params =
        geminid_protocol::mcp::ListServersParams { session: Some(t.session.clone()), usage: false };
    let servers = t.client.mcp_list_servers(Some(params)).await?.servers;
    let problems = servers.first().map(|s| s.problems.clone()).unwrap_or_default();
    assert!(problems.iter().any(|p| p.contains("its tool 'broken' is left out")), "{servers:#?}");
    let (_, text, _) = t.home.gemctl_run(&["--session", &t.session, "mcp", "list"])?;
    assert!(text.contains("    warning: its tool number 3 is left out: it has no name"), "{text}");
    Ok(())
}

/// The shapes of a tool the MCP schema refuses (Gemini CLI's SDK fails the whole listing for
/// one of them): `properties` that are a list, a `type` other than `"object"`, a `required`
/// that is not a list of strings, a property that is not a schema, a description that is not
/// text. Each is left out alone and said in `mcp list`; the good tool beside them is offered.
#[tokio::test]
async fn tools_the_mcp_schema_refuses_are_left_out_alone() -> anyhow::Result<()> {
    let listing = std::env::temp_dir().join(format!("geminid-listing-{}.json", std::process::id()));
    let object = |extra: Value| {
        let mut s = json!({ "type": "object" });
        if let (Some(o), Some(more)) = (s.as_object_mut(), extra.as_object()) {
            o.extend(more.clone());
        }
        s
    };
    let tools = json!([
        { "name": "good", "inputSchema": object(json!({ "properties": { "q": { "type": "string" } } })) },
        { "name": "props_list", "inputSchema": object(json!({ "properties": [{ "q": {} }] })) },
        { "name": "not_object", "inputSchema": { "type": "array" } },
        { "name": "untyped", "inputSchema": { "properties": {} } },
        { "name": "required_text", "inputSchema": object(json!({ "required": "q" })) },
        { "name": "prop_number", "inputSchema": object(json!({ "properties": { "q": 1 } })) },
        { "name": "described", "description": 7, "inputSchema": object(json!({})) }
    ]);
    std::fs::write(&listing, json!({ "tools": tools }).to_string())?;
    let path = listing.display().to_string();
    let t = setup(json!({ "odd": stdio(&["--raw", "--listing", &path]) })).await?;
    let listed = list(&t, false).await?;
    let names: Vec<&str> = listed.tools.iter().map(|x| x.name.as_str()).collect();
    assert_eq!(names, ["mcp_odd_good"], "{:#?}", listed.diagnostics);
    for want in [
        "its tool 'props_list' is left out: its inputSchema's properties are not an object",
        "its tool 'not_object' is left out: its inputSchema's type is \"array\", not \"object\"",
        "its tool 'untyped' is left out: its inputSchema has no type",
        "its tool 'required_text' is left out: its inputSchema's required is not a list of strings",
        "its tool 'prop_number' is left out: its inputSchema's property 'q' is not an object",
        "its tool 'described' is left out: its description is not a string",
    ] {
        assert!(
            listed.diagnostics.iter().any(|d| d.contains(want)),
            "{want:?} in {:#?}",
            listed.diagnostics
        );
    }
    let (_, text, _) = t.home.gemctl_run(&["--session", &t.session, "mcp", "list"])?;
    assert!(text.contains("warning: its tool 'props_list' is left out"), "{text}");
    let r = call(&t.client, &t.session, "mcp_odd_good", json!({ "q": "x" }))
        .await
        .map_err(anyhow::Error::msg)?;
    assert_eq!(r.display, r#"{"q":"x"}"#);
    let _ = std::fs::remove_file(&listing);
    Ok(())
}

/// What a refused call answers its caller (a model behind a client, the gateway): Gemini CLI's
/// text first (`Tool execution denied by policy.` and the rule's `denyMessage`; the headless
/// confirmation text), then the rule, its file from `~`: never the home folder's absolute path,
/// which names the user.
#[tokio::test]
async fn a_refused_call_says_gemini_clis_text_and_no_absolute_path() -> anyhow::Result<()> {
    let t = setup(json!({ "fx": stdio(&[]) })).await?;
    let dir = t.home.root().join("home/.gemini/policies");
    std::fs::create_dir_all(&dir)?;
    std::fs::write(
        dir.join("refuse.toml"),
        "[[rule]]\ntoolName = \"mcp_fx_echo\"\ndecision = \"deny\"\npriority = 900\n\
         denyMessage = \"No echoes.\"\nargsPattern = \"secret\"\n\n[[rule]]\n\
         toolName = \"mcp_fx_pid\"\ndecision = \"ask_user\"\npriority = 900\n\n[[rule]]\n\
         toolName = \"mcp_fx_env\"\ndecision = \"deny\"\npriority = 900\n",
    )?;
    let root = t.home.root().display().to_string();
    let want = "Tool execution denied by policy. No echoes. (geminid: the call to 'mcp_fx_echo' \
                is denied by the rule in ~/.gemini/policies/refuse.toml:1, user tier, priority 900)";
    let denied = || async {
        call(&t.client, &t.session, "mcp_fx_echo", json!({ "text": "secret" }))
            .await
            .is_err_and(|e| e.contains(want) && !e.contains(&root))
    };
    let said = call(&t.client, &t.session, "mcp_fx_echo", json!({ "text": "secret" })).await;
    assert!(geminid_tests::eventually(Duration::from_secs(10), denied).await, "{said:?}");
    let e = call(&t.client, &t.session, "mcp_fx_pid", json!({})).await.err().unwrap_or_default();
    assert!(
        e.contains(
            "Tool execution for \"mcp_fx_pid\" requires user confirmation, which is not \
             supported in non-interactive mode. (geminid: "
        ) && !e.contains(&root),
        "{e}"
    );
    // A tool the rule hides altogether.
    let e = call(&t.client, &t.session, "mcp_fx_env", json!({ "name": "HOME" }))
        .await
        .err()
        .unwrap_or_default();
    assert!(
        e.contains(
            "Tool execution denied by policy. (geminid: the tool is denied by the rule in \
                    ~/.gemini/policies/refuse.toml:"
        ) && !e.contains(&root),
        "{e}"
    );
    Ok(())
}

#[tokio::test]
async fn two_sessions_on_one_server_each_see_only_their_own_progress() -> anyhow::Result<()> {
    let t = setup(json!({ "rich": stdio(&["--rich"]) })).await?;
    // A second session on the same (shared) server, from another client.
    let ws2 = t.home.root().join("ws2");
    std::fs::create_dir_all(&ws2)?;
    let other = t.daemon.client().await?;
    let second = other
        .create(geminid_protocol::session::SessionCreateParams {
            workspace: ws2.display().to_string(),
            env: Some(geminid_tests::mcp::shell_env(&t.home, &[])),
            reuse_default: false,
            ..Default::default()
        })
        .await?
        .id;
    let filter = |session: &str| EventsSubscribeParams {
        session: Some(session.to_owned()),
        kinds: Some(vec!["tools/progress".into()]),
    };
    let mut first_events = t.client.subscribe_events(Some(filter(&t.session))).await?;
    let mut second_events = other.subscribe_events(Some(filter(&second))).await?;
    // The same call id in both, at the same time, with different step counts.
    let p = |session: &str, steps: u64| ToolsCallParams {
        session: session.to_owned(),
        name: "mcp_rich_progress".into(),
        args: json!({ "steps": steps }).as_object().cloned(),
        call_id: Some("same".into()),
        confirmed: false,
    };
    let (a, b) =
        tokio::join!(t.client.tools_call(p(&t.session, 3)), other.tools_call(p(&second, 5)));
    assert_eq!((a?.display, b?.display), ("3 steps".to_owned(), "5 steps".to_owned()));
    let first = progress_of(&mut first_events, 3).await?;
    assert!(first.iter().all(|(s, total)| *s == t.session && *total == Some(3.0)), "{first:?}");
    let second_seen = progress_of(&mut second_events, 5).await?;
    assert!(
        second_seen.iter().all(|(s, total)| *s == second && *total == Some(5.0)),
        "{second_seen:?}"
    );
    // Nothing more came to the first: the other session's five are not its.
    let extra = tokio::time::timeout(Duration::from_millis(300), first_events.next()).await;
    assert!(extra.is_err(), "{extra:?}");
    Ok(())
}

/// The next `n` progress events: each one's session and total.
async fn progress_of(
    events: &mut geminid_protocol::client::Subscription<Event>,
    n: usize,
) -> anyhow::Result<Vec<(String, Option<f64>)>> {
    let mut got = Vec::new();
    for _ in 0..n {
        let ev = tokio::time::timeout(Duration::from_secs(5), events.next())
            .await?
            .ok_or_else(|| anyhow::anyhow!("no event"))??;
        let EventBody::ToolProgress(p) = ev.body else { anyhow::bail!("{ev:?}") };
        got.push((p.session, p.total));
    }
    Ok(got)
}
