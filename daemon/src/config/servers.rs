//! A session's servers from its merged settings (`Loader::effective_with`'s last steps): the
//! entries that apply (every written one in an untrusted folder, to be listed), the server
//! `mcp.serverCommand` adds, the extensions' servers joined under them, then each entry
//! parsed, said where it is wrong, blocked or not, and placed in the scope that wrote it.

use std::collections::BTreeMap;
use std::path::Path;

use geminid_protocol::config::{BlockReason, Diagnostic, McpServerEntry, Severity};
use serde_json::{Map, Value};

use super::enablement::Gate;
use super::env::Env;
use super::extend::{self, Contribution, Joined};
use super::files::{diagnostic, position};
use super::last_good::Read;
use super::mcp::{self, McpServerConfig};
use super::{Layer, ServerSpec, escape, unset};
use geminid_protocol::config::Scope;

/// What a session's servers are read from.
pub(super) struct Sources<'a> {
    /// Every settings layer, in merge order.
    pub(super) layers: &'a [Layer],
    /// The layers that apply.
    pub(super) applied: &'a [&'a Layer],
    pub(super) trusted: bool,
    pub(super) gate: &'a Gate,
    pub(super) contributions: &'a [Contribution],
    pub(super) env: &'a Env,
    /// The user's settings file, which a problem of no file is said in.
    pub(super) user: &'a Path,
}

/// The servers by name (valid ones) and every entry as `config/get` lists it.
pub(super) struct Servers {
    pub(super) specs: BTreeMap<String, ServerSpec>,
    pub(super) entries: Vec<McpServerEntry>,
}

/// The servers of `s`, with `mcpServers` taken out of `merged`.
pub(super) fn read(s: &Sources, merged: &mut Value, diags: &mut Vec<Diagnostic>) -> Servers {
    // In an untrusted folder nothing runs, but every configured server is listed, the
    // workspace's too (as Gemini CLI lists them: all disabled), so the user sees what
    // trusting the folder would start.
    let listed: Vec<&Layer> = if s.trusted {
        s.applied.to_vec()
    } else {
        s.layers.iter().filter(|l| l.value.is_some()).collect()
    };
    let mut raw = written(s, merged, &listed, diags);
    let from_command = server_command(&listed, merged, s.env, &mut raw, diags);
    let written_in = |name: &str| {
        listed.iter().rev().find_map(|l| {
            l.raw.as_ref()?.pointer(&format!("/mcpServers/{}", escape(name))).cloned()
        })
    };
    let joined = extend::join_servers(&mut raw, &written_in, s.contributions, diags);
    let ext_layers = extension_layers(&joined, s.contributions);
    let listed: Vec<&Layer> = ext_layers.iter().chain(listed.iter().copied()).collect();
    let mut out = Servers { specs: BTreeMap::new(), entries: Vec::new() };
    for (name, value) in &raw {
        // With the shallow merge, a server comes whole from the last scope defining it.
        let origin = if name == "mcp"
            && let Some(origin) = from_command
        {
            Some(origin)
        } else {
            listed.iter().rev().copied().find(|l| {
                l.value
                    .as_ref()
                    .and_then(|v| v.pointer(&format!("/mcpServers/{}", escape(name))))
                    .is_some()
            })
        };
        let Some(origin) = origin else { continue };
        out.add(s, name, value, origin, &joined, diags);
    }
    out
}

/// The `mcpServers` object the settings give: the applied layers' (taken out of `merged`), or
/// in an untrusted folder every listed layer's as if it were trusted.
fn written(
    s: &Sources,
    merged: &mut Value,
    listed: &[&Layer],
    diags: &mut Vec<Diagnostic>,
) -> Map<String, Value> {
    let applied_servers = merged.as_object_mut().and_then(|m| m.remove("mcpServers"));
    let servers_from = if s.trusted {
        applied_servers
    } else {
        let mut as_if_trusted =
            super::merge::merge_all(listed.iter().filter_map(|l| l.value.as_ref()));
        as_if_trusted.as_object_mut().and_then(|m| m.remove("mcpServers"))
    };
    match servers_from {
        Some(Value::Object(m)) => m,
        Some(_) => {
            diags.push(diagnostic(
                Severity::Error,
                s.user,
                None,
                "\"mcpServers\" must be an object".into(),
            ));
            Map::new()
        }
        None => Map::new(),
    }
}

/// `mcp.serverCommand`: one more server, named `mcp`, from a command line (Gemini CLI's
/// `populateMcpServerCommand`); not with an admin allowlist (`admin.mcp.config`). The layer
/// that wrote the line, when it added the server.
fn server_command<'a>(
    listed: &[&'a Layer],
    merged: &Value,
    env: &Env,
    raw: &mut Map<String, Value>,
    diags: &mut Vec<Diagnostic>,
) -> Option<&'a Layer> {
    let origin = listed
        .iter()
        .rev()
        .find(|l| l.value.as_ref().and_then(|v| v.pointer("/mcp/serverCommand")).is_some())?;
    let allowlisted = merged
        .pointer("/admin/mcp/config")
        .and_then(Value::as_object)
        .is_some_and(|m| !m.is_empty());
    let line = origin.value.as_ref().and_then(|v| v["mcp"]["serverCommand"].as_str())?;
    if allowlisted || line.trim().is_empty() {
        return None;
    }
    match mcp::server_command(line, env) {
        Ok(words) => {
            let (command, args) =
                words.split_first().map_or_else(Default::default, |(c, a)| (c.clone(), a.to_vec()));
            raw.insert("mcp".into(), serde_json::json!({ "command": command, "args": args }));
            Some(origin)
        }
        Err(why) => {
            diags.push(diagnostic(
                Severity::Error,
                &origin.path,
                position(&origin.text, &["mcp", "serverCommand"]),
                format!("failed to parse mcpServerCommand: {line} ({why})"),
            ));
            None
        }
    }
}

/// Each extension as a layer under every settings scope, holding the servers it alone gives
/// (a settings entry of the same name is where that server is written).
fn extension_layers(joined: &Joined, contributions: &[Contribution]) -> Vec<Layer> {
    joined
        .layers
        .iter()
        .map(|(i, own)| Layer {
            scope: Scope::Extension,
            path: contributions[*i].manifest_path.clone(),
            exists: true,
            applied: true,
            value: Some(serde_json::json!({ "mcpServers": own })),
            raw: None,
            text: contributions[*i].manifest_text.clone(),
            read: Read::given(),
        })
        .collect()
}

impl Servers {
    /// The entry `name` (`value`, expanded) written in `origin`: its problems said, why it is
    /// blocked, listed, and kept as a server when it parses.
    fn add(
        &mut self,
        s: &Sources,
        name: &String,
        value: &Value,
        origin: &Layer,
        joined: &Joined,
        diags: &mut Vec<Diagnostic>,
    ) {
        let extension = joined.from.get(name).map(|(e, _)| e.clone());
        let written = joined.from.get(name).map(|(_, v)| v.clone()).or_else(|| {
            origin.raw.as_ref()?.pointer(&format!("/mcpServers/{}", escape(name))).cloned()
        });
        let (config, mut problems) = mcp::parse_server(name, value);
        problems.extend(mcp::misplaced(name, origin.scope, origin.value.as_ref()));
        let unset = unset::in_entry(written.as_ref().unwrap_or(value), s.env);
        problems.extend(unset.iter().map(|u| mcp::Problem::warning(u.field, u.message(name))));
        for pr in problems {
            let mut path = vec!["mcpServers", name.as_str()];
            if let Some(f) = pr.field.as_deref() {
                path.push(f);
            }
            diags.push(diagnostic(
                pr.severity,
                &origin.path,
                position(&origin.text, &path),
                pr.message,
            ));
        }
        let blocked = blocked(s, name, config.as_ref());
        self.entries.push(McpServerEntry {
            name: name.clone(),
            scope: origin.scope,
            file: origin.path.display().to_string(),
            transport: config.as_ref().map_or("none", McpServerConfig::transport).to_owned(),
            // As written, not expanded: `"X": "$GITHUB_TOKEN"` shows as that, never as the
            // token (and what looks secret in it is redacted as well).
            config: mcp::redacted(written.as_ref().unwrap_or(value)),
            extension: extension.clone(),
            blocked,
        });
        if let Some(config) = config {
            let shown = written
                .as_ref()
                .and_then(|raw| mcp::parse_server(name, raw).0)
                .unwrap_or_else(|| config.clone());
            let unset = unset.iter().map(|u| u.message(name)).collect();
            let spec = ServerSpec { config, shown, scope: origin.scope, extension, blocked, unset };
            self.specs.insert(name.clone(), spec);
        }
    }
}

/// Why server `name` may not start. As Gemini CLI's `mcp list` has it, admin settings,
/// `mcp.allowed` and `mcp.excluded` block a server before an untrusted folder disables it.
fn blocked(s: &Sources, name: &str, config: Option<&McpServerConfig>) -> Option<BlockReason> {
    let listed_out = s.gate.blocked(name).filter(|b| {
        matches!(b, BlockReason::Admin | BlockReason::Allowlist | BlockReason::Excludelist)
    });
    if let Some(b) = listed_out {
        Some(b)
    } else if !s.trusted {
        Some(BlockReason::UntrustedFolder)
    } else if config.is_none() {
        Some(BlockReason::Invalid)
    } else if config.is_some_and(McpServerConfig::is_gateway) {
        Some(BlockReason::Gateway)
    } else {
        s.gate.blocked(name)
    }
}
