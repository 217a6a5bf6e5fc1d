//! Antigravity CLI's plugins (issue 69; the README's "Antigravity CLI (agy)"): each folder of
//! `~/.gemini/antigravity-cli/plugins/` with a `plugin.json` (the marker; its `name`, when
//! given, else the folder's name) contributes as an extension does: the servers of its
//! `mcp_config.json` (in Gemini CLI's form, as agy's own files are read) and its `skills/`.
//! Its `hooks.json` and `agents/` are agy's own formats (hooks grouped by name with other
//! events and another JSON contract; agents as `agent.json` + `config.yaml`), which Gemini CLI
//! does not read, so geminid runs neither.
//!
//! A plugin is a package: the extension rules hold (`extend::join_servers` applies them to
//! every contribution): it never trusts a server, never lowers `pinning` or sets `keepWarm:
//! "always"`, and a server it names as an extension's already is the extension's (written the
//! same: one server, silently; written differently: skipped, said). A name that could leave
//! its folder or pass for another's (`..`, a separator, anything but letters, digits, `-`,
//! `_` and `.`) makes the plugin skipped.

use std::path::{Path, PathBuf};

use geminid_protocol::config::{Diagnostic, Severity};
use serde_json::{Map, Value};

use super::env::{self, Env};
use super::extend::Contribution;
use super::files::{FileRead, diagnostic, position, read_object};
use crate::secrets::Secret;

/// Whether `name` can name a plugin.
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('.')
        && name.len() <= 128
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// The plugins under `root` (in folder name order) as contributions, for a session whose
/// environment is `env`; why one is skipped goes to `diags`.
pub(crate) fn contributions(
    root: &Path,
    env: &Env,
    diags: &mut Vec<Diagnostic>,
) -> Vec<Contribution> {
    let Ok(entries) = std::fs::read_dir(root) else { return Vec::new() };
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .collect();
    dirs.sort();
    dirs.iter().filter_map(|d| plugin(d, env, diags)).collect()
}

/// The files of the plugins under `root` a reload must see.
pub(crate) fn watched(root: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(root) else { return Vec::new() };
    entries
        .filter_map(Result::ok)
        .flat_map(|e| [e.path().join("plugin.json"), e.path().join("mcp_config.json")])
        .collect()
}

fn plugin(dir: &Path, env: &Env, diags: &mut Vec<Diagnostic>) -> Option<Contribution> {
    let marker = dir.join("plugin.json");
    let skip = |diags: &mut Vec<Diagnostic>, file: &Path, pos, why: String| {
        diags.push(diagnostic(
            Severity::Error,
            file,
            pos,
            format!("Antigravity plugin {} is skipped: {why}", dir.display()),
        ));
    };
    let manifest = match read_object(&marker) {
        FileRead::Missing => return None,
        FileRead::Failed(d) => {
            skip(diags, &marker, d.line.zip(d.column), d.message);
            return None;
        }
        FileRead::Parsed { value, .. } => value,
    };
    let folder = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let name = match manifest.get("name") {
        None | Some(Value::Null) => folder,
        Some(Value::String(n)) => n.clone(),
        Some(_) => {
            skip(diags, &marker, None, "\"name\" must be a string".into());
            return None;
        }
    };
    if !valid_name(&name) {
        skip(
            diags,
            &marker,
            None,
            format!(
                "its name {name:?} may hold only letters, digits, '-', '_' and '.', and not \
                 start with '.'"
            ),
        );
        return None;
    }
    let config = dir.join("mcp_config.json");
    let (mut servers, mut shown, mut text) = (Map::new(), Map::new(), String::new());
    match read_object(&config) {
        FileRead::Missing => {}
        FileRead::Failed(d) => {
            skip(diags, &config, d.line.zip(d.column), d.message);
            return None;
        }
        FileRead::Parsed { value, text: t } => {
            if let Err(why) = super::agy::check(&value) {
                skip(diags, &config, position(&t, &["mcpServers"]), why);
                return None;
            }
            let as_settings = super::agy::as_settings(&value);
            if let Some(Value::Object(m)) = as_settings.get("mcpServers") {
                for (server, entry) in m {
                    // A server name is part of its tools' names: one that is empty, could
                    // pass for a path or holds `__` (the server/tool separator) is skipped.
                    if !valid_name(server) || server.contains("__") {
                        diags.push(diagnostic(
                            Severity::Error,
                            &config,
                            position(&t, &["mcpServers", server]),
                            format!(
                                "MCP server {server:?} of Antigravity plugin {name} is skipped: a \
                                 plugin's server name may hold only letters, digits, '-', '_' \
                                 and '.', not \"__\", and not start with '.'"
                            ),
                        ));
                        continue;
                    }
                    let mut entry = entry.clone();
                    if let Some(obj) = entry.as_object_mut() {
                        obj.remove("trust");
                    }
                    shown.insert(server.clone(), entry.clone());
                    env::expand_settings_value(&mut entry, env);
                    servers.insert(server.clone(), entry);
                }
            }
            text = t;
        }
    }
    let skills = Some(dir.join("skills")).filter(|p| p.is_dir());
    Some(Contribution {
        name,
        manifest_path: config,
        manifest_text: text,
        servers: Secret::new(servers),
        servers_shown: shown,
        skills,
        plugin: true,
        ..Default::default()
    })
}
