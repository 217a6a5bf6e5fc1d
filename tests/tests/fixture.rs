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
        let mut child = Command::new(bin("mcp-fixture"))
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
