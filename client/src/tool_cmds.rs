//! `gemctl mcp tools|describe` and `gemctl call`: a session's tools.

use std::io::Read;
use std::path::PathBuf;

use anyhow::Context;
use geminid_protocol::api::ToolsApiClient;
use geminid_protocol::client::Client;
use geminid_protocol::tools::{ToolsCallParams, ToolsListParams};
use serde_json::Value;

use crate::{call_error, output};

/// List the session's tools, optionally one server's.
pub async fn tools(
    client: &Client,
    session: String,
    server: Option<String>,
    json: bool,
) -> anyhow::Result<()> {
    let mut r = client
        .tools_list(ToolsListParams { session, raw: false })
        .await
        .map_err(call_error("tools/list"))?;
    if let Some(s) = &server {
        r.tools.retain(|t| &t.server == s);
    }
    if json {
        return output::json(&r);
    }
    let rows: Vec<Vec<String>> = r
        .tools
        .iter()
        .map(|t| {
            let d = t.declaration["description"].as_str().unwrap_or_default();
            let first = d.lines().next().unwrap_or_default();
            vec![t.name.clone(), t.server.clone(), first.to_owned()]
        })
        .collect();
    if rows.is_empty() {
        println!("No tools.");
    } else {
        output::table(&["NAME", "SERVER", "DESCRIPTION"], &rows);
    }
    for d in &r.diagnostics {
        eprintln!("note: {d}");
    }
    Ok(())
}

/// Show one tool's declaration and raw MCP object.
pub async fn describe(client: &Client, session: String, name: String) -> anyhow::Result<()> {
    let r = client
        .tools_list(ToolsListParams { session, raw: true })
        .await
        .map_err(call_error("tools/list"))?;
    let Some(t) = r.tools.into_iter().find(|t| t.name == name || t.tool == name) else {
        anyhow::bail!("no tool named '{name}' (gemctl mcp tools lists them)");
    };
    output::json(&t)
}

/// `gemctl call TOOL [JSON | --args-file F | -]`.
pub async fn call(
    client: &Client,
    session: String,
    name: String,
    args: Option<String>,
    args_file: Option<PathBuf>,
    json: bool,
) -> anyhow::Result<bool> {
    let text = match (args.as_deref(), args_file) {
        (_, Some(f)) => std::fs::read_to_string(&f)
            .with_context(|| format!("cannot read arguments from {}", f.display()))?,
        (Some("-"), None) => {
            let mut s = String::new();
            std::io::stdin().read_to_string(&mut s).context("cannot read arguments from stdin")?;
            s
        }
        (Some(a), None) => a.to_owned(),
        (None, None) => "{}".to_owned(),
    };
    let value: Value = serde_json::from_str(&text)
        .with_context(|| format!("the arguments are not JSON: {}", text.trim()))?;
    let Value::Object(map) = value else {
        anyhow::bail!("the arguments must be a JSON object, like {{\"key\": \"value\"}}");
    };
    let r = client
        .tools_call(ToolsCallParams { session, name, args: Some(map) })
        .await
        .map_err(call_error("tools/call"))?;
    if json {
        output::json(&r)?;
    } else if r.is_error {
        eprintln!("{}", r.display);
        for part in &r.result["content"].as_array().cloned().unwrap_or_default() {
            if let Some(t) = part["text"].as_str() {
                eprintln!("{t}");
            }
        }
    } else {
        println!("{}", r.display);
    }
    Ok(!r.is_error)
}
