//! The fixture MCP server itself, driven over stdio with raw JSON-RPC, so the MCP tests built on
//! it can trust what it does.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::Duration;

use geminid_tests::bin;
use serde_json::{Value, json};

struct Peer {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
}

impl Peer {
    fn spawn(args: &[&str]) -> anyhow::Result<Self> {
        let mut child = geminid_tests::sealed(&mut Command::new(bin("mcp-fixture")))
            .args(args)
            .env("FIXTURE_PROBE", "probe-value")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let stdin = child.stdin.take().ok_or_else(|| anyhow::anyhow!("stdin"))?;
        let stdout = child.stdout.take().ok_or_else(|| anyhow::anyhow!("stdout"))?;
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Ok(Self { child, stdin, lines })
    }

    fn send(&mut self, v: Value) -> anyhow::Result<()> {
        writeln!(self.stdin, "{v}")?;
        Ok(())
    }

    fn line(&self, timeout: Duration) -> anyhow::Result<String> {
        Ok(self.lines.recv_timeout(timeout)?)
    }

    /// The response with `id`, collecting notifications seen on the way.
    fn response(&self, id: u64, notes: &mut Vec<Value>) -> anyhow::Result<Value> {
        loop {
            let v: Value = serde_json::from_str(&self.line(Duration::from_secs(10))?)?;
            if v["id"] == id {
                return Ok(v);
            }
            notes.push(v);
        }
    }

    fn initialize(&mut self) -> anyhow::Result<Value> {
        self.send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}))?;
        let r = self.response(1, &mut Vec::new())?;
        self.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))?;
        Ok(r)
    }

    fn call(
        &mut self,
        id: u64,
        name: &str,
        args: Value,
        notes: &mut Vec<Value>,
    ) -> anyhow::Result<Value> {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name, "arguments": args}}))?;
        self.response(id, notes)
    }

    fn tool_names(&mut self, id: u64) -> anyhow::Result<Vec<String>> {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"}))?;
        let r = self.response(id, &mut Vec::new())?;
        Ok(r["result"]["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["name"].as_str().map(str::to_owned))
            .collect())
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn text(r: &Value) -> String {
    r["result"]["content"][0]["text"].as_str().unwrap_or_default().to_owned()
}

#[test]
fn every_tool_does_what_it_says() -> anyhow::Result<()> {
    let mut p = Peer::spawn(&[])?;
    let init = p.initialize()?;
    assert_eq!(init["result"]["serverInfo"]["name"], "geminid-fixture");
    assert_eq!(init["result"]["capabilities"]["tools"]["listChanged"], true);
    assert_eq!(p.tool_names(2)?, ["echo", "pid", "crash", "sleep", "grow", "env"]);
    let mut notes = Vec::new();
    assert_eq!(text(&p.call(3, "echo", json!({"text": "hi"}), &mut notes)?), "hi");
    assert_eq!(text(&p.call(4, "pid", json!({}), &mut notes)?), p.child.id().to_string());
    assert_eq!(
        text(&p.call(5, "env", json!({"name": "FIXTURE_PROBE"}), &mut notes)?),
        "probe-value"
    );
    assert_eq!(
        text(&p.call(6, "env", json!({"name": "NOT_SET_ANYWHERE"}), &mut notes)?),
        "<unset>"
    );
    assert_eq!(text(&p.call(7, "sleep", json!({"ms": 20}), &mut notes)?), "slept 20 ms");
    // It says so first, as a log message.
    assert_eq!(notes.first().map(|n| n["method"].clone()), Some(json!("notifications/message")));
    assert_eq!(notes[0]["params"]["data"], "sleeping 20 ms");
    notes.clear();
    assert_eq!(text(&p.call(8, "grow", json!({}), &mut notes)?), "grown_1");
    while notes.is_empty() {
        notes.push(serde_json::from_str(&p.line(Duration::from_secs(5))?)?);
    }
    assert_eq!(notes[0]["method"], "notifications/tools/list_changed");
    assert_eq!(p.tool_names(9)?.last().map(String::as_str), Some("grown_1"));
    let unknown = p.call(10, "nope", json!({}), &mut Vec::new())?;
    assert!(
        unknown["error"]["message"].as_str().is_some_and(|m| m.contains("no tool named")),
        "{unknown}"
    );
    p.call_and_exit(11, 7)
}

impl Peer {
    fn call_and_exit(&mut self, id: u64, code: i32) -> anyhow::Result<()> {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "crash", "arguments": {"code": code}}}))?;
        let status = self.child.wait()?;
        assert_eq!(status.code(), Some(code));
        Ok(())
    }
}

#[test]
fn it_misbehaves_on_request() -> anyhow::Result<()> {
    let mut fail = Peer::spawn(&["--fail-initialize"])?;
    fail.send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}))?;
    let r: Value = serde_json::from_str(&fail.line(Duration::from_secs(10))?)?;
    assert!(
        r["error"]["message"].as_str().is_some_and(|m| m.contains("failing initialize on purpose")),
        "{r}"
    );

    let mut hang = Peer::spawn(&["--hang-initialize"])?;
    hang.send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}))?;
    assert!(hang.line(Duration::from_millis(500)).is_err(), "answered initialize");

    let mut early = Peer::spawn(&["--exit-before-initialize", "3"])?;
    assert_eq!(early.child.wait()?.code(), Some(3));

    let garbage = Peer::spawn(&["--garbage"])?;
    let first = garbage.line(Duration::from_secs(10))?;
    assert!(serde_json::from_str::<Value>(&first).is_err(), "{first}");
    Ok(())
}

/// One HTTP POST to `url` (`http://127.0.0.1:PORT/path`); returns (headers, body).
fn post(url: &str, session: Option<&str>, body: &Value) -> anyhow::Result<(String, String)> {
    use std::io::Read;
    let rest = url.strip_prefix("http://").ok_or_else(|| anyhow::anyhow!("bad url {url}"))?;
    let (host, path) =
        rest.split_once('/').map(|(h, p)| (h, format!("/{p}"))).unwrap_or((rest, "/".into()));
    let mut s = std::net::TcpStream::connect(host)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    let body = body.to_string();
    let session = session.map(|id| format!("mcp-session-id: {id}\r\n")).unwrap_or_default();
    write!(
        s,
        "POST {path} HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\n{session}content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )?;
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    let (head, body) = out.split_once("\r\n\r\n").unwrap_or((&out, ""));
    Ok((head.to_owned(), body.to_owned()))
}

/// The JSON-RPC message carried in an SSE (or plain JSON) body.
fn message(body: &str) -> Option<Value> {
    body.lines()
        .filter_map(|l| l.strip_prefix("data:").map(str::trim).or(Some(l.trim())))
        .find_map(|l| serde_json::from_str::<Value>(l).ok().filter(|v| v.get("jsonrpc").is_some()))
}

#[test]
fn it_speaks_streamable_http_on_loopback_only() -> anyhow::Result<()> {
    let p = Peer::spawn(&["--http", "127.0.0.1:0"])?;
    let first = p.line(Duration::from_secs(10))?;
    let url =
        first.strip_prefix("LISTENING ").ok_or_else(|| anyhow::anyhow!("{first}"))?.to_owned();
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}});
    let (head, body) = post(&url, None, &init)?;
    let session = head
        .lines()
        .find_map(|l| {
            l.split_once(':')
                .filter(|(k, _)| k.eq_ignore_ascii_case("mcp-session-id"))
                .map(|(_, v)| v.trim().to_owned())
        })
        .ok_or_else(|| anyhow::anyhow!("no session id in {head}"))?;
    assert_eq!(
        message(&body).map(|m| m["result"]["serverInfo"]["name"].clone()),
        Some(json!("geminid-fixture"))
    );
    post(&url, Some(&session), &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))?;
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "over http"}}});
    let (_, body) = post(&url, Some(&session), &call)?;
    assert_eq!(message(&body).map(|m| text(&m)), Some("over http".to_owned()), "{body}");

    let mut wide = Peer::spawn(&["--http", "0.0.0.0:0"])?;
    assert!(!wide.child.wait()?.success(), "the fixture bound a non-loopback address");
    Ok(())
}

#[test]
fn it_speaks_the_legacy_sse_transport() -> anyhow::Result<()> {
    let p = Peer::spawn(&["--sse", "127.0.0.1:0"])?;
    let first = p.line(Duration::from_secs(10))?;
    let url =
        first.strip_prefix("LISTENING ").ok_or_else(|| anyhow::anyhow!("{first}"))?.to_owned();
    let host = url.trim_start_matches("http://").trim_end_matches("/sse").to_owned();
    // Hold the event stream open on a thread and hand its `data:` lines over.
    let mut stream = std::net::TcpStream::connect(&host)?;
    write!(stream, "GET /sse HTTP/1.1\r\nhost: {host}\r\naccept: text/event-stream\r\n\r\n")?;
    let (tx, data) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines().map_while(Result::ok) {
            if let Some(d) = line.strip_prefix("data: ")
                && tx.send(d.to_owned()).is_err()
            {
                break;
            }
        }
    });
    let endpoint = data.recv_timeout(Duration::from_secs(10))?;
    assert!(endpoint.starts_with("/message?sessionId="), "{endpoint}");
    let post_url = format!("http://{host}{endpoint}");
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}});
    let (head, _) = post(&post_url, None, &init)?;
    assert!(head.starts_with("HTTP/1.1 202"), "{head}");
    let reply: Value = serde_json::from_str(&data.recv_timeout(Duration::from_secs(10))?)?;
    assert_eq!(reply["result"]["serverInfo"]["name"], "geminid-fixture");
    post(&post_url, None, &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))?;
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "over sse"}}});
    post(&post_url, None, &call)?;
    let reply: Value = serde_json::from_str(&data.recv_timeout(Duration::from_secs(10))?)?;
    assert_eq!(text(&reply), "over sse");
    let (head, _) = post(&format!("http://{host}/message?sessionId=nope"), None, &call)?;
    assert!(head.starts_with("HTTP/1.1 404"), "{head}");
    Ok(())
}
