//! Prometheus `/metrics` (`--metrics-listen`), with OTLP export off: calls through the gateway
//! are the operation histograms with the conventions' labels and buckets, a gateway client that
//! left and a server restarted are the session histograms, and the daemon's gauges are there;
//! nothing secret of a server's entry is shown, only loopback addresses are bound and only
//! loopback host names answered.

use std::time::Duration;

use geminid_tests::mcp::stdio;
use geminid_tests::{Daemon, TestHome};
use rmcp::model::CallToolRequestParams;
use serde_json::json;

use super::gateway::{Heard, serve_as};

const SECRET: &str = "sk-live-0123456789abcdef";

/// A free loopback port's address.
fn free_addr() -> anyhow::Result<String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.to_string())
}

/// The endpoint's answer: status and body, `host` the Host header sent.
async fn scrape(addr: &str, host: &str) -> anyhow::Result<(u16, String)> {
    let res = reqwest::Client::new()
        .get(format!("http://{addr}/metrics"))
        .header("host", host)
        .send()
        .await?;
    Ok((res.status().as_u16(), res.text().await?))
}

/// The sample `line` starts with (name and labels), if the body has it: its value.
fn sample(body: &str, line: &str) -> Option<f64> {
    body.lines().find_map(|l| l.strip_prefix(line)?.strip_prefix(' ')?.parse().ok())
}

#[tokio::test]
async fn metrics_shows_the_histograms_and_gauges_and_no_secret() -> anyhow::Result<()> {
    let home = TestHome::allowing_mcp()?;
    let mut fx = stdio(&[]);
    fx["env"] = json!({ "FIXTURE_TOKEN": SECRET });
    let text = serde_json::to_string(&json!({ "mcpServers": { "fx": fx } }))?;
    std::fs::write(home.root().join("home/.gemini/settings.json"), text)?;
    let addr = free_addr()?;
    let _daemon = Daemon::start(&home, &["--metrics-listen", &addr]).await?;
    assert!(home.gemctl(&["trust"])?.status.success());
    let s = serve_as(&home, None, &[], Heard::default()).await?;
    for i in 0..3 {
        let mut p = CallToolRequestParams::new("fx__echo");
        p.arguments = json!({ "text": format!("n{i}") }).as_object().cloned();
        let r = s.client.call_tool(p).await?;
        anyhow::ensure!(r.is_error != Some(true), "{r:?}");
    }
    let (status, body) = scrape(&addr, &addr).await?;
    assert_eq!(status, 200, "{body}");
    let op = "gen_ai_operation_name=\"execute_tool\",gen_ai_tool_name=\"fx__echo\",mcp_method_name=\"tools/call\"";
    let served = format!("mcp_server_operation_duration_seconds_count{{{op}}}");
    assert_eq!(sample(&body, &served), Some(3.0), "{body}");
    let inf = format!("mcp_server_operation_duration_seconds_bucket{{{op},le=\"+Inf\"}}");
    assert_eq!(sample(&body, &inf), Some(3.0), "{body}");
    for le in ["0.01", "0.5", "300"] {
        let b = format!("mcp_server_operation_duration_seconds_bucket{{{op},le=\"{le}\"}}");
        assert!(sample(&body, &b).is_some(), "bucket {le}: {body}");
    }
    let upstream = "gen_ai_operation_name=\"execute_tool\",gen_ai_tool_name=\"echo\",mcp_method_name=\"tools/call\",mcp_server_name=\"fx\",network_transport=\"pipe\"";
    let sent = format!("mcp_client_operation_duration_seconds_count{{{upstream}}}");
    assert_eq!(sample(&body, &sent), Some(3.0), "{body}");
    let connected = "geminid_mcp_servers{geminid_mcp_server_state=\"connected\"}";
    assert_eq!(sample(&body, connected), Some(1.0), "{body}");
    let tools = "geminid_mcp_definitions{geminid_definition_kind=\"tool\"}";
    assert!(sample(&body, tools).is_some_and(|n| n >= 1.0), "{body}");
    assert_eq!(sample(&body, "geminid_asks_pending"), Some(0.0), "{body}");
    assert!(sample(&body, "geminid_mcp_idle_memory_bytes").is_some(), "{body}");
    assert!(body.contains("# TYPE mcp_server_operation_duration_seconds histogram"), "{body}");

    // The gateway client leaves, the server is restarted: each session's duration.
    drop(s);
    assert!(home.gemctl(&["mcp", "restart", "fx"])?.status.success());
    let ended = || async {
        let (_, body) = scrape(&addr, "localhost").await.ok()?;
        let server = "mcp_server_session_duration_seconds_count{network_transport=\"pipe\"}";
        let client = body.lines().any(|l| {
            l.starts_with("mcp_client_session_duration_seconds_count{")
                && l.contains("mcp_server_name=\"fx\"")
                && l.contains("mcp_protocol_version=")
        });
        (sample(&body, server).is_some() && client).then_some(body)
    };
    let body = geminid_tests::poll(Duration::from_secs(20), ended).await;
    let body = body.expect("both session histograms after the client left and the restart");
    assert!(!body.contains(SECRET) && !body.contains("FIXTURE_TOKEN"), "{body}");
    assert!(!body.contains("n0") && !body.contains("Bearer"), "{body}");
    Ok(())
}

/// A page of a name rebound to 127.0.0.1 sends its own Host: refused. Other paths and methods
/// are not served.
#[tokio::test]
async fn metrics_answers_only_get_metrics_for_a_loopback_host() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let addr = free_addr()?;
    let _daemon = Daemon::start(&home, &["--metrics-listen", &addr]).await?;
    assert_eq!(scrape(&addr, "evil.example:9464").await?.0, 403);
    assert_eq!(scrape(&addr, "127.0.0.1.evil.example").await?.0, 403);
    assert_eq!(scrape(&addr, "[::1]:80").await?.0, 200);
    let client = reqwest::Client::new();
    let other = client.get(format!("http://{addr}/")).send().await?;
    assert_eq!(other.status().as_u16(), 404);
    let post = client.post(format!("http://{addr}/metrics")).body("x").send().await?;
    assert_eq!(post.status().as_u16(), 405);
    Ok(())
}

/// An address that is not loopback is refused where the daemon starts, and nothing listens.
#[tokio::test]
async fn metrics_refuses_a_non_loopback_address() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    for addr in ["0.0.0.0:9464", "[::]:9464", "192.0.2.1:9464", "localhost:9464"] {
        let out = home
            .command(
                geminid_tests::bin("geminid").to_str().unwrap_or("geminid"),
                &["--metrics-listen", addr],
            )
            .output()?;
        assert!(!out.status.success(), "{addr} was taken");
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(said.contains("--metrics-listen"), "{addr}: {said}");
    }
    Ok(())
}
