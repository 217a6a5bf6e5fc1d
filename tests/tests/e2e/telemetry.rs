//! OpenTelemetry export end to end: Gemini CLI's `telemetry` settings turn it on; a call
//! through the gateway arrives at a loopback OTLP receiver (the official protobufs) as a SERVER
//! span whose parent is the trace context in the client's `_meta`, with the pipeline's spans
//! (hook, policy) and the CLIENT span to the fixture server as its children, whose own context
//! reaches the fixture in its request's `_meta`; the operation histograms carry the
//! conventions' buckets. A collector that is down costs calls nothing.

use std::time::{Duration, Instant};

use geminid_tests::mcp::stdio;
use geminid_tests::otlp::{Receiver, Span};
use geminid_tests::{Daemon, TestHome};
use rmcp::model::{CallToolRequestParams, RequestMetaObject};
use serde_json::{Value, json};

use super::gateway::{Heard, serve_as};

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT: &str = "00f067aa0ba902b7";

/// User settings: the fixture (logging each request's `_meta` to `meta_log`), one BeforeTool
/// hook, and telemetry as Gemini CLI's settings say it.
fn settings(home: &TestHome, meta_log: &std::path::Path, endpoint: &str) -> anyhow::Result<()> {
    let mut fx = stdio(&[]);
    fx["env"] = json!({ "FIXTURE_META_LOG": meta_log.display().to_string() });
    let hook = json!({"type": "command", "command": "true"});
    let text = serde_json::to_string(&json!({
        "mcpServers": { "fx": fx },
        "hooks": { "BeforeTool": [{ "matcher": "mcp_fx_echo", "hooks": [hook] }] },
        "telemetry": { "enabled": true, "otlpEndpoint": endpoint, "otlpProtocol": "http" },
    }))?;
    std::fs::write(home.root().join("home/.gemini/settings.json"), text)?;
    Ok(())
}

async fn call(
    s: &super::gateway::Served,
    text: &str,
    traceparent: Option<&str>,
) -> anyhow::Result<()> {
    let mut p = CallToolRequestParams::new("fx__echo");
    p.arguments = json!({ "text": text }).as_object().cloned();
    if let Some(tp) = traceparent {
        let mut meta = RequestMetaObject::new();
        meta.0.0.insert("traceparent".into(), Value::String(tp.into()));
        meta.0.0.insert("baggage".into(), Value::String("user=alice".into()));
        p.meta = Some(meta);
    }
    let r = s.client.call_tool(p).await?;
    anyhow::ensure!(r.is_error != Some(true), "{r:?}");
    Ok(())
}

fn named<'a>(spans: &'a [Span], name: &str) -> Vec<&'a Span> {
    spans.iter().filter(|s| s.name == name).collect()
}

#[tokio::test]
async fn a_call_is_a_trace_from_the_clients_meta_to_the_servers() -> anyhow::Result<()> {
    let receiver = Receiver::start().await?;
    let home = TestHome::allowing_mcp()?;
    let meta_log = home.root().join("meta.log");
    settings(&home, &meta_log, &receiver.endpoint)?;
    let mut daemon = Daemon::start(&home, &[]).await?;
    assert!(home.gemctl(&["trust"])?.status.success());
    let s = serve_as(&home, None, &[], Heard::default()).await?;
    call(&s, "traced", Some(&format!("00-{TRACE}-{PARENT}-01"))).await?;

    let within = Duration::from_secs(20);
    let done = |r: &Receiver| {
        let spans = r.spans();
        ["hook", "policy"].iter().all(|n| !named(&spans, n).is_empty())
            && named(&spans, "tools/call fx__echo").len() == 1
            && named(&spans, "tools/call echo").len() == 1
    };
    assert!(receiver.until(within, done).await, "{:#?}", receiver.spans());
    let spans = receiver.spans();
    let server = named(&spans, "tools/call fx__echo")[0];
    assert_eq!((server.kind.as_str(), server.trace_id.as_str()), ("SPAN_KIND_SERVER", TRACE));
    assert_eq!(server.parent, PARENT, "the client's _meta is the parent");
    assert_eq!(server.service, "geminid");
    let a = &server.attributes;
    assert_eq!(a.get("mcp.method.name").map(String::as_str), Some("tools/call"));
    assert_eq!(a.get("gen_ai.tool.name").map(String::as_str), Some("fx__echo"));
    assert_eq!(a.get("gen_ai.operation.name").map(String::as_str), Some("execute_tool"));
    assert_eq!(a.get("network.transport").map(String::as_str), Some("pipe"));
    assert!(a.contains_key("jsonrpc.request.id") && a.contains_key("mcp.session.id"), "{a:?}");
    assert!(!a.contains_key("gen_ai.tool.call.arguments"), "arguments are opt-in: {a:?}");
    assert!(!a.contains_key("error.type"), "{a:?}");

    let client = named(&spans, "tools/call echo")[0];
    assert_eq!(client.kind, "SPAN_KIND_CLIENT");
    assert_eq!(
        (client.trace_id.as_str(), client.parent.as_str()),
        (TRACE, server.span_id.as_str())
    );
    assert_eq!(client.attributes.get("network.transport").map(String::as_str), Some("pipe"));
    for name in ["hook", "policy"] {
        let child = named(&spans, name)[0];
        assert_eq!(
            (child.trace_id.as_str(), child.parent.as_str()),
            (TRACE, server.span_id.as_str()),
            "{name}"
        );
    }
    let hook = named(&spans, "hook")[0];
    assert_eq!(hook.attributes.get("geminid.hook.name").map(String::as_str), Some("true"));
    assert_eq!(hook.attributes.get("process.exit.code").map(String::as_str), Some("0"));
    let policy = named(&spans, "policy")[0];
    assert_eq!(policy.attributes.get("geminid.policy.decision").map(String::as_str), Some("allow"));
    assert_eq!(policy.attributes.get("geminid.policy.rule.tier").map(String::as_str), Some("user"));

    // The fixture got the CLIENT span's context (and the client's baggage) in its `_meta`.
    let logged = std::fs::read_to_string(&meta_log)?;
    let line: Value = serde_json::from_str(logged.lines().last().unwrap_or("{}"))?;
    let tp = line["meta"]["traceparent"].as_str().unwrap_or_default();
    assert_eq!(tp, format!("00-{TRACE}-{}-01", client.span_id), "{line}");
    assert_eq!(line["meta"]["baggage"], "user=alice", "{line}");

    // A call without a parent starts a trace of its own.
    call(&s, "untraced", None).await?;
    let two = |r: &Receiver| named(&r.spans(), "tools/call fx__echo").len() == 2;
    assert!(receiver.until(within, two).await);
    let spans = receiver.spans();
    let own = named(&spans, "tools/call fx__echo").into_iter().find(|s| s.trace_id != TRACE);
    assert!(own.is_some_and(|s| s.parent.is_empty()), "{spans:#?}");

    // A call over the daemon's socket (`gemctl call`) is a SERVER span too, its pipeline's
    // spans under it.
    let (code, out, err) = home.gemctl_run(&["call", "mcp_fx_echo", r#"{"text": "socket"}"#])?;
    assert_eq!(code, 0, "{out}{err}");
    let socket = |r: &Receiver| named(&r.spans(), "tools/call mcp_fx_echo").len() == 1;
    assert!(receiver.until(within, socket).await, "{:#?}", receiver.spans());
    let spans = receiver.spans();
    let root = named(&spans, "tools/call mcp_fx_echo")[0];
    assert_eq!((root.kind.as_str(), root.parent.as_str()), ("SPAN_KIND_SERVER", ""));
    let under = |name: &str| named(&spans, name).iter().any(|s| s.parent == root.span_id);
    assert!(under("policy") && under("tools/call echo"), "{spans:#?}");

    // The histograms go out at the daemon's end at the latest, with the conventions' buckets.
    drop(s);
    daemon.signal(nix::sys::signal::Signal::SIGTERM)?;
    daemon.wait_exit(Duration::from_secs(20)).await?;
    let has = |r: &Receiver, name: &str| r.metrics().iter().any(|(n, _)| n == name);
    let both = |r: &Receiver| {
        has(r, "mcp.server.operation.duration") && has(r, "mcp.client.operation.duration")
    };
    assert!(receiver.until(within, both).await, "{:#?}", receiver.metrics());
    let metrics = receiver.metrics();
    let (_, point) =
        metrics.iter().find(|(n, _)| n == "mcp.server.operation.duration").unwrap_or(&metrics[0]);
    assert_eq!(
        point.get("_bounds").map(String::as_str),
        Some("[0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0]")
    );
    assert_eq!(point.get("mcp.method.name").map(String::as_str), Some("tools/call"));
    Ok(())
}

/// With the collector gone, calls go on as before and the doctor says it; nothing waits for
/// it. The receiver then comes back on its port and gets what is sent from then on.
#[tokio::test]
async fn a_collector_that_is_down_costs_calls_nothing_and_the_doctor_says_so() -> anyhow::Result<()>
{
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let endpoint = format!("http://{}", listener.local_addr()?);
    drop(listener);
    let home = TestHome::allowing_mcp()?;
    let meta_log = home.root().join("meta.log");
    settings(&home, &meta_log, &endpoint)?;
    let _daemon = Daemon::start(&home, &[]).await?;
    assert!(home.gemctl(&["trust"])?.status.success());
    let s = serve_as(&home, None, &[], Heard::default()).await?;
    let started = Instant::now();
    for i in 0..200 {
        call(&s, &format!("n{i}"), None).await?;
    }
    let took = started.elapsed();
    assert!(took < Duration::from_secs(30), "200 calls took {took:?}");
    let doctor = home.gemctl_json(&["doctor"])?;
    let said = doctor.to_string();
    assert!(said.contains("cannot be reached") && said.contains("telemetry"), "{doctor}");
    // Back on the same port: what is exported from now on arrives.
    let listener = tokio::net::TcpListener::bind(endpoint.trim_start_matches("http://")).await?;
    let receiver = Receiver::on(listener)?;
    call(&s, "back", None).await?;
    let got = |r: &Receiver| !named(&r.spans(), "tools/call fx__echo").is_empty();
    assert!(receiver.until(Duration::from_secs(20), got).await);
    Ok(())
}
