//! OpenTelemetry's spans beyond a tool call (issue 70): a server's start and restart, and an
//! OAuth token's refresh, as traces of their own; `prompts/get` and `resources/read` through
//! the gateway as SERVER spans whose parent is the client's `_meta`; and each request of a
//! multi round-trip call as a SERVER span, the call's pipeline under the first. All against
//! the loopback OTLP receiver (`geminid_tests::otlp`).

use std::time::Duration;

use geminid_tests::mcp::{FAST, stdio};
use geminid_tests::otlp::{Receiver, Span};
use geminid_tests::{Daemon, TestHome};
use rmcp::model::RequestMetaObject;
use rmcp::model::{CallToolRequestParams, GetPromptRequestParams, ReadResourceRequestParams};
use serde_json::{Value, json};

use super::gateway::{Heard, serve_as};

const TRACE: &str = "0af7651916cd43dd8448eb211c80319c";
const WITHIN: Duration = Duration::from_secs(20);

/// User settings: `servers` and telemetry to `endpoint` over OTLP/HTTP.
pub(super) fn settings(home: &TestHome, servers: Value, endpoint: &str) -> anyhow::Result<()> {
    let text = serde_json::to_string(&json!({
        "mcpServers": servers,
        "telemetry": { "enabled": true, "otlpEndpoint": endpoint, "otlpProtocol": "http" },
    }))?;
    std::fs::write(home.root().join("home/.gemini/settings.json"), text)?;
    Ok(())
}

pub(super) fn named<'a>(spans: &'a [Span], name: &str) -> Vec<&'a Span> {
    spans.iter().filter(|s| s.name == name).collect()
}

fn attr<'a>(s: &'a Span, key: &str) -> Option<&'a str> {
    s.attributes.get(key).map(String::as_str)
}

/// `_meta` with a W3C parent in trace [`TRACE`].
fn parent(span_id: &str) -> RequestMetaObject {
    let mut meta = RequestMetaObject::new();
    let tp = format!("00-{TRACE}-{span_id}-01");
    meta.0.0.insert("traceparent".into(), Value::String(tp));
    meta
}

#[tokio::test]
async fn starts_restarts_prompts_and_resources_are_spans() -> anyhow::Result<()> {
    let receiver = Receiver::start().await?;
    let home = TestHome::allowing_mcp()?;
    let servers = json!({
        "fx": stdio(&["--rich"]),
        "broken": { "command": home.root().join("no-such-program").display().to_string() },
    });
    settings(&home, servers, &receiver.endpoint)?;
    let _daemon = Daemon::start(&home, FAST).await?;
    assert!(home.gemctl(&["trust"])?.status.success());
    let s = serve_as(&home, None, &[], Heard::default()).await?;

    let mut get = GetPromptRequestParams::new("fx__plain");
    get.meta = Some(parent("1111111111111111"));
    s.client.get_prompt(get).await?;
    let mut read = ReadResourceRequestParams::new("file:///notes.txt");
    read.meta = Some(parent("2222222222222222"));
    s.client.read_resource(read).await?;
    // A prompt nobody offers: the span says the JSON-RPC error.
    assert!(s.client.get_prompt(GetPromptRequestParams::new("fx__none")).await.is_err());

    let seen = |r: &Receiver| {
        let spans = r.spans();
        ["start fx", "start broken", "prompts/get fx__plain", "resources/read"]
            .iter()
            .all(|n| !named(&spans, n).is_empty())
            && !named(&spans, "prompts/get fx__none").is_empty()
    };
    assert!(receiver.until(WITHIN, seen).await, "{:#?}", receiver.spans());
    let spans = receiver.spans();

    let start = named(&spans, "start fx")[0];
    assert_eq!((start.kind.as_str(), start.parent.as_str()), ("SPAN_KIND_INTERNAL", ""));
    assert_eq!(attr(start, "mcp.server.name"), Some("fx"));
    assert_eq!(attr(start, "network.transport"), Some("pipe"));
    assert_eq!(attr(start, "geminid.mcp.server.attempt"), Some("1"));
    assert_eq!(attr(start, "geminid.mcp.server.start.outcome"), Some("connected"));
    assert!(!start.attributes.contains_key("error.type"), "{start:?}");
    let broken = named(&spans, "start broken")[0];
    assert_eq!(attr(broken, "error.type"), Some("failed"), "{broken:?}");
    assert_eq!(broken.status, "STATUS_CODE_ERROR");
    // Its environment, command line or error text is in none of them.
    assert!(!broken.attributes.values().any(|v| v.contains("no-such-program")), "{broken:?}");

    let prompt = named(&spans, "prompts/get fx__plain")[0];
    assert_eq!(prompt.kind, "SPAN_KIND_SERVER");
    assert_eq!((prompt.trace_id.as_str(), prompt.parent.as_str()), (TRACE, "1111111111111111"));
    assert_eq!(attr(prompt, "mcp.method.name"), Some("prompts/get"));
    assert_eq!(attr(prompt, "gen_ai.prompt.name"), Some("fx__plain"));
    assert!(prompt.attributes.contains_key("jsonrpc.request.id"), "{prompt:?}");
    assert_eq!(attr(prompt, "network.transport"), Some("pipe"));
    let resource = named(&spans, "resources/read")[0];
    assert_eq!(
        (resource.kind.as_str(), resource.parent.as_str()),
        ("SPAN_KIND_SERVER", "2222222222222222")
    );
    assert_eq!(attr(resource, "mcp.method.name"), Some("resources/read"));
    assert_eq!(attr(resource, "mcp.resource.uri"), Some("file:///notes.txt"));
    let none = named(&spans, "prompts/get fx__none")[0];
    assert_eq!(attr(none, "error.type"), Some("-32602"), "{none:?}");
    assert_eq!(attr(none, "rpc.response.status_code"), Some("-32602"), "{none:?}");

    // A restart of a server that was connected is a `restart` span.
    let (code, out, err) = home.gemctl_run(&["mcp", "restart", "fx"])?;
    assert_eq!(code, 0, "{out}{err}");
    let restarted = |r: &Receiver| !named(&r.spans(), "restart fx").is_empty();
    assert!(receiver.until(WITHIN, restarted).await, "{:#?}", receiver.spans());
    let spans = receiver.spans();
    let restart = named(&spans, "restart fx")[0];
    assert_eq!(attr(restart, "geminid.mcp.server.start.outcome"), Some("connected"));
    assert_eq!(attr(restart, "geminid.mcp.server.attempt"), Some("1"));
    Ok(())
}

/// A client of 2026-07-28 answers a confirmation by a second request: each request is a
/// SERVER span with its own `_meta` parent, and the call's pipeline (its confirmation, the
/// CLIENT span upstream) is under the first.
#[tokio::test]
async fn each_request_of_a_multi_round_trip_call_is_a_server_span() -> anyhow::Result<()> {
    use rmcp::model::CallToolResponse;
    use rmcp::service::ClientServiceExt as _;
    let receiver = Receiver::start().await?;
    // No policy of the user's: the call is confirmed, through the client.
    let home = TestHome::new()?;
    settings(&home, json!({ "fx": stdio(&[]) }), &receiver.endpoint)?;
    let _daemon = Daemon::start(&home, &[]).await?;
    assert!(home.gemctl(&["trust"])?.status.success());
    let modern = rmcp::service::ClientLifecycleMode::Discover {
        preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28],
    };
    let mut cmd: tokio::process::Command = home.gemctl_cmd(&["mcp", "serve"]).into();
    let mut child = cmd
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
        anyhow::bail!("no pipes");
    };
    let client = Heard::accepting().serve_with_lifecycle((stdout, stdin), modern).await?;
    let mut first = CallToolRequestParams::new("fx__echo");
    first.arguments = json!({ "text": "rounds" }).as_object().cloned();
    first.meta = Some(parent("3333333333333333"));
    let asked = client.call_tool_once(first.clone()).await?;
    let CallToolResponse::InputRequired(i) = asked else { anyhow::bail!("{asked:?}") };
    let key = i.input_requests.unwrap_or_default().into_keys().next().unwrap_or_default();
    let mut retry = first;
    retry.meta = Some(parent("4444444444444444"));
    retry.request_state = i.request_state;
    retry.input_responses = Some([(key, json!({"action": "accept"}))].into_iter().collect());
    let done = client.call_tool_once(retry).await?;
    assert!(matches!(done, CallToolResponse::Complete(_)), "{done:?}");

    let seen = |r: &Receiver| {
        let spans = r.spans();
        named(&spans, "tools/call fx__echo").len() == 2
            && !named(&spans, "tools/call echo").is_empty()
    };
    assert!(receiver.until(WITHIN, seen).await, "{:#?}", receiver.spans());
    let spans = receiver.spans();
    let rounds = named(&spans, "tools/call fx__echo");
    let by_parent = |p: &str| rounds.iter().find(|s| s.parent == p).copied();
    let one = by_parent("3333333333333333").ok_or_else(|| anyhow::anyhow!("{rounds:#?}"))?;
    let two = by_parent("4444444444444444").ok_or_else(|| anyhow::anyhow!("{rounds:#?}"))?;
    assert!([one, two].iter().all(|s| s.kind == "SPAN_KIND_SERVER" && s.trace_id == TRACE));
    let upstream = named(&spans, "tools/call echo")[0];
    assert_eq!(
        (upstream.kind.as_str(), upstream.parent.as_str()),
        ("SPAN_KIND_CLIENT", one.span_id.as_str())
    );
    let asked = named(&spans, "confirmation");
    assert!(asked.iter().any(|c| c.parent == one.span_id), "{spans:#?}");
    Ok(())
}

/// Gemini CLI's default protocol, gRPC, is not exported by this build: the daemon's log says
/// so at its start and `gemctl doctor` warns, both naming the fix.
#[tokio::test]
async fn otlp_over_grpc_says_it_is_not_exported_and_names_the_fix() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let text = json!({ "telemetry": { "enabled": true } }).to_string();
    std::fs::write(home.root().join("home/.gemini/settings.json"), text)?;
    let daemon = Daemon::start(&home, &[]).await?;
    let fix = r#"set telemetry.otlpProtocol to \"http\""#;
    assert!(daemon.log().contains("OTLP over HTTP only"), "{}", daemon.log());
    let doctor = home.gemctl_json(&["doctor"])?.to_string();
    assert!(doctor.contains("OTLP over HTTP only") && doctor.contains(fix), "{doctor}");
    Ok(())
}

/// A collector that takes connections and never answers (the worst a collector can do): calls
/// are not slowed, the daemon's memory stays within the export queue's bound (2048 spans,
/// then dropped) however many calls go, and the doctor says the export failed once the first
/// request's timeout (10 s) passes.
#[tokio::test]
async fn a_collector_that_never_answers_slows_no_call_and_holds_a_bounded_queue()
-> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let endpoint = format!("http://{}", listener.local_addr()?);
    let _held = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((c, _)) = listener.accept().await {
            held.push(c);
        }
    });
    let home = TestHome::allowing_mcp()?;
    settings(&home, json!({ "fx": stdio(&[]) }), &endpoint)?;
    let daemon = Daemon::start(&home, &[]).await?;
    assert!(home.gemctl(&["trust"])?.status.success());
    let s = serve_as(&home, None, &[], Heard::default()).await?;
    let rss = || -> anyhow::Result<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", daemon.pid()))?;
        let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap_or_default();
        Ok(line.split_whitespace().nth(1).and_then(|kb| kb.parse().ok()).unwrap_or(0))
    };
    let calls = |n: usize| {
        let s = &s;
        async move {
            let mut slowest = Duration::ZERO;
            for i in 0..n {
                let mut p = CallToolRequestParams::new("fx__echo");
                p.arguments = json!({ "text": format!("n{i}") }).as_object().cloned();
                let started = std::time::Instant::now();
                let r = s.client.call_tool(p).await?;
                anyhow::ensure!(r.is_error != Some(true), "{r:?}");
                slowest = slowest.max(started.elapsed());
            }
            anyhow::Ok(slowest)
        }
    };
    // Past the first batch (the queue's first 512 spans in the hung request).
    calls(200).await?;
    let before = rss()?;
    // 800 calls, 3 spans each: more than the queue holds.
    let slowest = calls(800).await?;
    let after = rss()?;
    eprintln!("RSS {before} kB after 200 calls, {after} kB after 1000; slowest call {slowest:?}");
    assert!(slowest < Duration::from_secs(2), "a call waited on the collector: {slowest:?}");
    assert!(after.saturating_sub(before) < 16 * 1024, "RSS {before} kB -> {after} kB");
    let said = || async {
        let doctor = home.gemctl_json(&["doctor"]).map(|d| d.to_string()).unwrap_or_default();
        doctor.contains("failed the last export")
    };
    assert!(geminid_tests::eventually(WITHIN, said).await, "{}", home.gemctl_json(&["doctor"])?);
    Ok(())
}
