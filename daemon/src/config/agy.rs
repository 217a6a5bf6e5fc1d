//! Antigravity CLI's server files (issue 69; the README's "Antigravity CLI (agy)"):
//! `~/.gemini/config/mcp_config.json` (the user's) and `<workspace>/.agents/mcp_config.json` (the workspace's, applied only in a
//! trusted folder, like the workspace's settings), read in place as two more settings layers.
//! Only their `mcpServers` is taken; each entry in Gemini CLI's form: `serverUrl` becomes `url`
//! (so its transport is decided as `url`'s is: Streamable HTTP with the SSE fallback, or what
//! `type` says), `disabledTools` joins `excludeTools`, and an entry with `"disabled": true` is
//! left out, as agy leaves it out.
//!
//! Precedence: at each level Gemini CLI's file is read after agy's, and geminid's own file
//! after agy's user file, so the order is agy's user file, geminid's own servers
//! (`~/.gemini/geminid/servers.json`), `~/.gemini/settings.json`, agy's workspace file, the
//! workspace's settings, the system settings. A server written the same in two files is one
//! server (shown from the later file); written differently, the later file's definition is
//! used and a warning at agy's entry says which file won.

use std::path::Path;

use geminid_protocol::config::{Diagnostic, Scope, Severity};
use serde_json::{Map, Value};

use super::env::{self, Env};
use super::files::{diagnostic, position};
use super::{Layer, Loader};

/// The check a `mcp_config.json` must pass to be used at all (agy refuses to start on it).
pub(super) fn check(v: &Value) -> Result<(), String> {
    match v.get("mcpServers") {
        None | Some(Value::Object(_) | Value::Null) => Ok(()),
        Some(_) => Err("\"mcpServers\" must be an object".into()),
    }
}

/// `v` (a whole `mcp_config.json`) as a settings value: its `mcpServers` alone, each entry in
/// Gemini CLI's form.
pub(crate) fn as_settings(v: &Value) -> Value {
    let mut servers = Map::new();
    if let Some(Value::Object(m)) = v.get("mcpServers") {
        for (name, entry) in m {
            if entry.get("disabled").and_then(Value::as_bool) == Some(true) {
                continue;
            }
            servers.insert(name.clone(), entry_as_gemini(entry));
        }
    }
    serde_json::json!({ "mcpServers": servers })
}

/// One agy entry in Gemini CLI's form.
pub(crate) fn entry_as_gemini(entry: &Value) -> Value {
    let Some(map) = entry.as_object() else { return entry.clone() };
    let mut out = map.clone();
    out.remove("disabled");
    if let Some(url) = out.remove("serverUrl") {
        // `serverUrl` wins over `url` as it does over `command`.
        out.insert("url".into(), url);
    }
    if let Some(Value::Array(tools)) = out.remove("disabledTools") {
        let excluded = out.entry("excludeTools").or_insert_with(|| Value::Array(Vec::new()));
        if let Value::Array(list) = excluded {
            list.extend(tools.into_iter().filter(|t| !list.contains(t)).collect::<Vec<_>>());
        }
    }
    Value::Object(out)
}

impl Loader {
    /// An agy `mcp_config.json` read as a layer of `scope`: the last good contents kept as a
    /// settings file's are, its problem said by `settle_layers` (it guards no call: while it
    /// gives nothing it is ignored).
    pub(super) fn agy_layer(&self, scope: Scope, path: &Path, env: &Env) -> Layer {
        let mut read = self.read_checked(path, check);
        let exists = read.exists;
        let (value, raw, text) = match read.content.take() {
            Some((whole, t)) => {
                let raw = as_settings(&whole);
                let mut v = raw.clone();
                env::expand_settings_value(&mut v, env);
                (Some(v), Some(raw), t)
            }
            None => (None, None, String::new()),
        };
        let path = path.to_path_buf();
        Layer { scope, applied: value.is_some(), path, exists, value, raw, text, read }
    }
}

/// Whether `scope` is one of agy's files.
pub(crate) fn is_agy(scope: Scope) -> bool {
    matches!(scope, Scope::Antigravity | Scope::AntigravityWorkspace)
}

/// A warning for each server an agy file defines that another listed file defines
/// differently, saying which definition is used. `listed` is in merge order.
pub(super) fn differing(listed: &[&Layer], diags: &mut Vec<Diagnostic>) {
    let servers = |l: &Layer| l.raw.as_ref()?.get("mcpServers")?.as_object().cloned();
    let all: Vec<Map<String, Value>> =
        listed.iter().map(|l| servers(l).unwrap_or_default()).collect();
    for (i, agy) in listed.iter().enumerate().filter(|(_, l)| is_agy(l.scope)) {
        for (name, entry) in &all[i] {
            let defining: Vec<usize> =
                (0..listed.len()).filter(|j| all[*j].contains_key(name)).collect();
            let winner = defining.last().copied().unwrap_or(i);
            if winner == i {
                for j in defining.into_iter().filter(|j| *j != i && all[*j][name] != *entry) {
                    diags.push(warn(agy, name, &listed[j].path, "this file's is used"));
                }
            } else if all[winner][name] != *entry {
                diags.push(warn(agy, name, &listed[winner].path, "that one is used"));
            }
        }
    }
}

fn warn(agy: &Layer, name: &str, other: &Path, which: &str) -> Diagnostic {
    diagnostic(
        Severity::Warning,
        &agy.path,
        position(&agy.text, &["mcpServers", name]),
        format!(
            "MCP server \"{name}\" is also defined in {} with a different definition; {which} \
             (at each level Gemini CLI's file and geminid's own servers.json win over Antigravity \
             CLI's, the workspace's over the user's); write it the same in both files, or in one",
            other.display()
        ),
    )
}

#[cfg(test)]
mod tests;
