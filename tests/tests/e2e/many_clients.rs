//! Several MCP clients of different kinds behind one daemon session (issue 65): what a client is
//! shown, and whether its call can be confirmed, depends on that client alone; a client that
//! goes without a word takes its calls with it.

use std::time::{Duration, Instant};

use geminid_tests::{Daemon, TestHome};
use rmcp::model::ElicitationAction;
use serde_json::{Value, json};

use super::gateway::{Heard, http_gateway, lock, serve_as, settings};

/// The untrusted fixture server, calls written down in `calls.log`.
fn untrusted(home: &TestHome) -> anyhow::Result<std::path::PathBuf> {
    let log = home.root().join("calls.log");
    let fx = json!({ "command": geminid_tests::mcp::fixture(), "env": { "FIXTURE_CALL_LOG": log.display().to_string() } });
    settings(home, json!({ "fx": fx }))?;
    Ok(log)
}

/// A client that declares no elicitation is not shown the tools that need a confirmation, and
/// its call to one ends at once saying how to allow it, while another client that elicits is
/// connected and shown them. (Before: the other client made the whole session interactive, so
/// the first was shown all 5 tools and its call waited, with nobody asked, until it timed out.)
#[tokio::test]
async fn a_client_that_cannot_be_asked_is_not_offered_what_another_could_confirm()
-> anyhow::Result<()> {
    let home = TestHome::new()?;
    let log = untrusted(&home)?;
    let _daemon = Daemon::start(&home, &[]).await?;
    assert!(home.gemctl(&["trust"])?.status.success());
    let mut hang = Heard::default();
    (hang.answer, hang.hang) = (Some(ElicitationAction::Accept), true);
    let eliciting = serve_as(&home, None, &[], hang).await?;
    let has_echo = |tools: &[rmcp::model::Tool]| tools.iter().any(|t| t.name == "fx__echo");
    let shown = || async { eliciting.client.list_all_tools().await.is_ok_and(|t| has_echo(&t)) };
    assert!(
        geminid_tests::eventually(Duration::from_secs(30), shown).await,
        "the eliciting client sees fx's tools"
    );

    let plain = serve_as(&home, None, &[], Heard::default()).await?;
    let tools = plain.client.list_all_tools().await?;
    assert!(!has_echo(&tools), "shown to a client that cannot confirm: {:?}", names(&tools));
    let started = Instant::now();
    let mut p = rmcp::model::CallToolRequestParams::new("fx__echo");
    p.arguments = json!({"text": "for nobody"}).as_object().cloned();
    let called = tokio::time::timeout(Duration::from_secs(20), plain.client.call_tool(p)).await;
    let Ok(called) = called else { panic!("the call waited for nobody") };
    let e = format!("{:?}", called.expect_err("the call is refused"));
    assert!(e.contains("cannot be asked") && e.contains("trust: true"), "{e}");
    assert!(started.elapsed() < Duration::from_secs(20), "took {:?}", started.elapsed());
    assert!(
        lock(&eliciting.heard.asked).is_empty(),
        "the other client was asked: {:?}",
        lock(&eliciting.heard.asked)
    );
    let ran = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(!ran.contains("echo"), "the call ran: {ran}");
    Ok(())
}

fn names(tools: &[rmcp::model::Tool]) -> Vec<String> {
    tools.iter().map(|t| t.name.to_string()).collect()
}

/// A legacy streamable HTTP client, by hand: each request names its session.
struct Http {
    http: reqwest::Client,
    url: String,
    token: String,
    session: Option<String>,
}

impl Http {
    fn new(url: &str, token: &str) -> Self {
        Self { http: reqwest::Client::new(), url: url.into(), token: token.into(), session: None }
    }

    fn request(&self, method: reqwest::Method) -> reqwest::RequestBuilder {
        let mut r = self
            .http
            .request(method, &self.url)
            .bearer_auth(&self.token)
            .header("Accept", "application/json, text/event-stream");
        if let Some(s) = &self.session {
            r = r.header("Mcp-Session-Id", s);
        }
        r
    }

    /// Initialize with these capabilities, and say so.
    async fn initialize(&mut self, capabilities: Value) -> anyhow::Result<()> {
        let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": capabilities,
            "clientInfo": { "name": "by-hand", "version": "1" } } });
        let r = self.request(reqwest::Method::POST).json(&body).send().await?;
        let id = r.headers().get("mcp-session-id").and_then(|v| v.to_str().ok());
        self.session = id.map(str::to_owned);
        anyhow::ensure!(self.session.is_some(), "no session: {}", r.text().await?);
        drop(r.text().await?);
        let done = json!({ "jsonrpc": "2.0", "method": "notifications/initialized" });
        self.request(reqwest::Method::POST).json(&done).send().await?.text().await?;
        Ok(())
    }

    /// Start a request; its response (an event stream) is read as it comes.
    async fn start(
        &self,
        id: u64,
        method: &str,
        params: Value,
    ) -> anyhow::Result<reqwest::Response> {
        let body = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
        Ok(self.request(reqwest::Method::POST).json(&body).send().await?)
    }

    async fn call(&self, id: u64, method: &str, params: Value) -> anyhow::Result<String> {
        Ok(self.start(id, method, params).await?.text().await?)
    }
}

/// Read `r` until its text holds `want` (or it ends): what was read.
async fn read_until(r: &mut reqwest::Response, want: &str) -> anyhow::Result<String> {
    let mut seen = String::new();
    while !seen.contains(want) {
        match tokio::time::timeout(Duration::from_secs(60), r.chunk()).await?? {
            Some(c) => seen.push_str(&String::from_utf8_lossy(&c)),
            None => break,
        }
    }
    Ok(seen)
}

/// An HTTP client that declared elicitation, was asked to confirm its call, and then went
/// without a DELETE (its streams closed, as a killed client's do) has its call cancelled
/// within seconds, not at the 5-minute confirmation deadline; and it leaves no trace on what
/// a client that declares no elicitation is shown or how its calls end. (Issue 65, items 1
/// and 2: the call waited 300 s, and the other client was shown every tool and hung.)
#[tokio::test]
async fn an_http_client_gone_without_a_word_takes_its_call_and_nothing_else() -> anyhow::Result<()>
{
    let home = TestHome::new()?;
    let log = untrusted(&home)?;
    let _daemon = Daemon::start(&home, &[]).await?;
    assert!(home.gemctl(&["trust"])?.status.success());
    let (_gateway, url, token, _) = http_gateway(&home).await?;

    let mut a = Http::new(&url, &token);
    a.initialize(json!({ "elicitation": {} })).await?;
    let mut stream = a.request(reqwest::Method::GET).send().await?;
    anyhow::ensure!(stream.status().is_success(), "GET: {}", stream.status());
    let tools = a.call(2, "tools/list", json!({})).await?;
    assert!(tools.contains("fx__echo"), "the eliciting client is shown fx's tools: {tools}");
    let call = a
        .start(3, "tools/call", json!({ "name": "fx__echo", "arguments": { "text": "gone" } }))
        .await?;
    let asked = read_until(&mut stream, "elicitation/create").await?;
    assert!(asked.contains("elicitation/create"), "A was never asked: {asked}");
    // A goes: its streams close, no DELETE.
    let gone = Instant::now();
    drop((stream, call, a));

    let ended = || async {
        home.gemctl_json(&["audit", "-n", "1"]).is_ok_and(|r| {
            r["records"][0]["tool"] == "mcp_fx_echo" && r["records"][0]["ok"] == false
        })
    };
    assert!(geminid_tests::eventually(Duration::from_secs(60), ended).await, "A's call outlived A");
    let audit = home.gemctl_json(&["audit", "-n", "1"])?;
    let record = &audit["records"][0];
    assert!(record["error"].to_string().contains("cancelled"), "{audit}");
    assert!(gone.elapsed() < Duration::from_secs(60), "{:?}", gone.elapsed());
    let ran = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(!ran.contains("echo"), "A's call ran: {ran}");

    // B declares no elicitation: shown none of the untrusted server's tools, and its call ends
    // at once saying how to allow it.
    let mut b = Http::new(&url, &token);
    b.initialize(json!({})).await?;
    let tools = b.call(2, "tools/list", json!({})).await?;
    assert!(!tools.contains("fx__echo"), "shown to a client that cannot confirm: {tools}");
    let started = Instant::now();
    let called =
        b.call(3, "tools/call", json!({ "name": "fx__echo", "arguments": { "text": "b" } }));
    let answer = tokio::time::timeout(Duration::from_secs(20), called).await??;
    assert!(answer.contains("cannot be asked"), "{answer}");
    assert!(started.elapsed() < Duration::from_secs(20));
    // B closes its session: 204, which every client takes for success (the Python SDK warned
    // "Session termination failed: 202" on each close), and the session is gone.
    let deleted = b.request(reqwest::Method::DELETE).send().await?;
    assert_eq!(deleted.status(), reqwest::StatusCode::NO_CONTENT);
    let after = b.start(4, "tools/list", json!({})).await?;
    assert_eq!(after.status(), reqwest::StatusCode::NOT_FOUND, "the closed session is gone");
    Ok(())
}

/// Many sessions opened at once, each on its own connection with its gateway, all answer, and
/// the daemon still answers after them. (Before: each create flushed the database with sled's
/// `flush_async`, which runs on sled's own small I/O pool and there waits for buffer writes
/// queued on that same pool; with a few dozen at once every pool thread waited and the daemon
/// froze for good after 8 of 50 sessions.)
#[tokio::test]
async fn fifty_sessions_opened_at_once_all_answer() -> anyhow::Result<()> {
    use geminid_protocol::api::SessionApiClient;
    use geminid_protocol::gateway::{Names, open};
    use geminid_protocol::session::SessionCreateParams;
    use rmcp::ServiceExt;

    let home = TestHome::new()?;
    untrusted(&home)?;
    let daemon = Daemon::start(&home, &[]).await?;
    let env = geminid_tests::mcp::shell_env(&home, &[]);
    let mut set = tokio::task::JoinSet::new();
    for i in 0..50 {
        let (client, socket, env) =
            (daemon.client().await?, daemon.socket().to_path_buf(), env.clone());
        let ws = home.root().join(format!("ws{i}"));
        std::fs::create_dir_all(&ws)?;
        set.spawn(async move {
            let p = SessionCreateParams {
                workspace: ws.display().to_string(),
                env: Some(env),
                reuse_default: false,
                ..Default::default()
            };
            let session = client.create(p).await?.id;
            let mcp = ().serve(open(&socket, &session, Names::Server).await?).await?;
            mcp.list_all_tools().await?;
            anyhow::Ok(mcp)
        });
    }
    let all = async {
        let mut open = Vec::new();
        while let Some(r) = set.join_next().await {
            open.push(r??);
        }
        anyhow::Ok(open)
    };
    let open = tokio::time::timeout(Duration::from_secs(120), all)
        .await
        .map_err(|_| anyhow::anyhow!("sessions opened at once did not all answer"))??;
    assert_eq!(open.len(), 50);
    let status = home.gemctl(&["status"])?;
    assert!(status.status.success(), "{}", String::from_utf8_lossy(&status.stderr));
    Ok(())
}
