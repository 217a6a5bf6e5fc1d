//! A stdio MCP server with one tool, `echo` (its `text` back), built for any target: the Wine run
//! of `.ci/dist` starts it from the Windows `geminid.exe`, where the tests crate's fixture (Unix
//! only) does not build. Newline-delimited JSON-RPC on stdin/stdout, as MCP's stdio transport.

use std::io::{BufRead, Write};

use serde_json::{Value, json};

/// The answer to one request: its result, or a JSON-RPC error.
fn answer(method: &str, params: &Value) -> Result<Value, (i64, String)> {
    match method {
        "initialize" => Ok(json!({
            "protocolVersion": params.get("protocolVersion").cloned()
                .unwrap_or_else(|| json!("2025-06-18")),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "stdio-fixture", "version": env!("CARGO_PKG_VERSION")},
        })),
        "ping" => Ok(json!({})),
        "tools/list" => Ok(json!({"tools": [{
            "name": "echo",
            "description": "Returns its text.",
            "inputSchema": {
                "type": "object",
                "properties": {"text": {"type": "string"}},
                "required": ["text"],
            },
        }]})),
        "tools/call" => {
            let name = params.get("name").and_then(Value::as_str).unwrap_or_default();
            if name != "echo" {
                return Err((-32602, format!("no tool {name}")));
            }
            let text =
                params.pointer("/arguments/text").and_then(Value::as_str).unwrap_or_default();
            Ok(json!({"content": [{"type": "text", "text": text}]}))
        }
        other => Err((-32601, format!("no method {other}"))),
    }
}

fn main() -> std::io::Result<()> {
    let stdin = std::io::stdin();
    let mut stdout = std::io::stdout().lock();
    for line in stdin.lock().lines() {
        let line = line?;
        let Ok(message) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        // Notifications (no id) need no answer.
        let Some(id) = message.get("id").cloned() else {
            continue;
        };
        let method = message.get("method").and_then(Value::as_str).unwrap_or_default();
        let params = message.get("params").cloned().unwrap_or(Value::Null);
        let reply = match answer(method, &params) {
            Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
            Err((code, msg)) => {
                json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": msg}})
            }
        };
        writeln!(stdout, "{reply}")?;
        stdout.flush()?;
    }
    Ok(())
}
