//! `mcp/import`: the user's Gemini CLI servers move behind the gateway. Each entry of
//! `~/.gemini/settings.json`'s `mcpServers` moves to geminid's own servers file, which Gemini
//! CLI does not read (so it stops starting them) and geminid does (so nothing is lost); one
//! entry running `gemctl mcp serve` takes their place. Gemini CLI's file is copied first and
//! otherwise kept as written; geminid's file is written before it, so the servers are never in
//! neither.

use std::path::Path;

use geminid_protocol::config::McpImportResult;
use serde_json::{Value, json};

use super::ConfigPaths;
use super::ops::OpError;
use super::write::{atomic_write, edit_settings, read_text};

fn servers_of(path: &Path, text: &str) -> Result<serde_json::Map<String, Value>, OpError> {
    if text.trim().is_empty() {
        return Ok(serde_json::Map::new());
    }
    let v = super::files::parse_object(text).map_err(|(_, message)| {
        OpError::Write(super::write::WriteError::Unparsable { path: path.to_path_buf(), message })
    })?;
    Ok(v.get("mcpServers").and_then(Value::as_object).cloned().unwrap_or_default())
}

/// Move the servers (see the module); `command` is the gateway entry's.
pub(crate) fn mcp_import(
    paths: &ConfigPaths,
    command: &str,
    name: &str,
    dry_run: bool,
) -> Result<McpImportResult, OpError> {
    if name.trim().is_empty() {
        return Err(OpError::Refused("the gateway entry's name must not be empty".into()));
    }
    let from = &paths.user;
    let to = &paths.geminid;
    let text = read_text(from)?;
    let theirs = servers_of(from, &text)?;
    let is_gateway = |v: &Value| super::mcp::parse_server("x", v).0.is_some_and(|c| c.is_gateway());
    if let Some(v) = theirs.get(name)
        && !is_gateway(v)
    {
        return Err(OpError::Refused(format!(
            "{} already has a server named '{name}' that is not the gateway; --name picks another",
            from.display()
        )));
    }
    let moving: Vec<(&String, &Value)> = theirs.iter().filter(|(_, v)| !is_gateway(v)).collect();
    let own_text = read_text(to)?;
    let ours = servers_of(to, &own_text)?;
    let replaced: Vec<String> = moving
        .iter()
        .filter(|(n, v)| ours.get(*n).is_some_and(|o| o != *v))
        .map(|(n, _)| (*n).clone())
        .collect();
    let gateway = json!({ "command": command, "args": ["mcp", "serve"] });
    let result = |written: bool, backup: Option<String>| McpImportResult {
        from: from.display().to_string(),
        to: to.display().to_string(),
        moved: moving.iter().map(|(n, _)| (*n).clone()).collect(),
        replaced: replaced.clone(),
        gateway: name.to_owned(),
        backup,
        written,
    };
    let has_gateway = theirs.values().any(is_gateway);
    if dry_run || (moving.is_empty() && has_gateway) {
        return Ok(result(false, None));
    }
    let mut own = own_text;
    for (n, v) in &moving {
        own = edit_settings(to, &own, "mcpServers", n, Some(v))?.0;
    }
    let mut mine = text.clone();
    for (n, _) in &moving {
        mine = edit_settings(from, &mine, "mcpServers", n, None)?.0;
    }
    mine = edit_settings(from, &mine, "mcpServers", name, Some(&gateway))?.0;
    // The copy first, under a name no earlier import took.
    let mut backup = from.with_extension("json.before-geminid");
    let mut n = 1;
    while backup.exists() {
        n += 1;
        backup = from.with_extension(format!("json.before-geminid.{n}"));
    }
    if !text.is_empty() {
        atomic_write(&backup, &text, None)?;
    }
    if !moving.is_empty() {
        atomic_write(to, &own, Some(0o600))?;
    }
    atomic_write(from, &mine, None)?;
    Ok(result(true, (!text.is_empty()).then(|| backup.display().to_string())))
}
