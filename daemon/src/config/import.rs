//! `mcp/import` and `mcp/unimport`: the user's Gemini CLI servers move behind the gateway, and
//! back. Import moves each entry of `~/.gemini/settings.json`'s `mcpServers` to geminid's own
//! servers file, which Gemini CLI does not read (so it stops starting them) and geminid does
//! (so nothing is lost), and puts in its place, under the same name, an entry running `gemctl
//! mcp serve --server NAME --confirm client`: that server's catalog under its own names. So
//! Gemini CLI sees the same tools under the same names (`mcp_<server>_<tool>`), confirms calls
//! itself as before (`--yolo` included), and what it reads of the entry (`trust`,
//! `includeTools`, `excludeTools`, `timeout`, `description`, copied onto it) keeps its meaning.
//! Every other server of geminid's file gets such an entry too, and an entry serving the whole
//! catalog (`gemctl mcp serve`, an earlier import's) is replaced by them. geminid reads a
//! gateway entry named as one of its own servers as that server (`yield_to_own`).
//!
//! Gemini CLI's file is copied first and otherwise kept as written; geminid's file is written
//! before it, so a server is never in neither. Unimport puts each entry back as the copy holds
//! it, byte for byte, when geminid's entry is still the one moved (`put_back`): an import and
//! its undo give back the file the user had, and what they edited since is kept.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use geminid_protocol::config::McpImportResult;
use serde_json::{Map, Value, json};

use super::ConfigPaths;
use super::ops::OpError;
use super::write::{atomic_write, edit_settings, read_text};

/// What Gemini CLI reads of an entry that is not about starting the server: copied onto the
/// gateway entry that replaces it.
const KEPT_FOR_THE_CLIENT: [&str; 5] =
    ["trust", "includeTools", "excludeTools", "timeout", "description"];

fn servers_of(path: &Path, text: &str) -> Result<Map<String, Value>, OpError> {
    if text.trim().is_empty() {
        return Ok(Map::new());
    }
    let v = super::files::parse_object(text).map_err(|(_, message)| {
        OpError::Write(super::write::WriteError::Unparsable { path: path.to_path_buf(), message })
    })?;
    Ok(v.get("mcpServers").and_then(Value::as_object).cloned().unwrap_or_default())
}

/// The server a gateway entry serves alone (`--server NAME`), `Some(None)` for one serving the
/// whole catalog, `None` for an entry that is no gateway.
fn gateway_of(v: &Value) -> Option<Option<String>> {
    let (config, _) = super::mcp::parse_server("x", v);
    let config = config.filter(|c| c.is_gateway())?;
    let args = config.args.unwrap_or_default();
    Some(args.windows(2).find(|w| w[0] == "--server").map(|w| w[1].clone()))
}

/// Gemini CLI's entry for one of geminid's servers: the gateway of that server alone.
fn entry_for(command: &str, name: &str, was: Option<&Value>) -> Value {
    let mut entry = json!({
        "command": command,
        "args": ["mcp", "serve", "--server", name, "--confirm", "client", "--hooks", "client"],
    });
    for key in KEPT_FOR_THE_CLIENT {
        if let Some(v) = was.and_then(|w| w.get(key)) {
            entry[key] = v.clone();
        }
    }
    entry
}

/// The names of a layer's servers.
pub(super) fn server_names(layer: Option<&Value>) -> BTreeSet<String> {
    let servers = layer.and_then(|v| v.get("mcpServers")).and_then(Value::as_object);
    servers.map(|m| m.keys().cloned().collect()).unwrap_or_default()
}

/// A client's gateway entry named as one of geminid's own servers or an extension's (`own`) is
/// that server to its client: it is left out of the `layers`, so geminid's entry (or the
/// extension's) stands.
pub(super) fn yield_to_own(own: &BTreeSet<String>, layers: &mut [super::Layer]) {
    for l in layers.iter_mut().filter(|l| l.scope != super::Scope::Geminid) {
        for v in [&mut l.value, &mut l.raw].into_iter().flatten() {
            if let Some(servers) = v.get_mut("mcpServers").and_then(Value::as_object_mut) {
                servers.retain(|name, entry| !(own.contains(name) && gateway_of(entry).is_some()));
            }
        }
    }
}

/// Copy `from` (whose text is `text`) aside under a name no earlier import took.
fn back_up(from: &Path, text: &str) -> Result<Option<String>, OpError> {
    if text.is_empty() {
        return Ok(None);
    }
    let mut backup = from.with_extension("json.before-geminid");
    let mut n = 1;
    while backup.exists() {
        n += 1;
        backup = from.with_extension(format!("json.before-geminid.{n}"));
    }
    atomic_write(&backup, text, None)?;
    Ok(Some(backup.display().to_string()))
}

/// The copies [`back_up`] made of `from`, newest first.
fn backups(from: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut backup = from.with_extension("json.before-geminid");
    let mut n = 1;
    while backup.exists() {
        // A copy that cannot be read now is only a copy the entries are not taken from.
        found.extend(read_text(&backup).ok());
        n += 1;
        backup = from.with_extension(format!("json.before-geminid.{n}"));
    }
    found.reverse();
    found
}

/// `text` with server `name`'s entry set to `entry`: as an earlier copy of the file wrote that
/// same entry, its bytes (comments, layout) where one did, else as [`edit_settings`] writes it.
fn put_back(
    path: &Path,
    text: &str,
    name: &str,
    entry: &Value,
    copies: &[String],
) -> Result<String, OpError> {
    let at = ["mcpServers", name];
    let written = copies.iter().find_map(|copy| {
        let v = super::files::parse_object(copy).ok()?;
        (v.get("mcpServers")?.get(name)? == entry).then_some(())?;
        copy.get(super::files::value_span(copy, &at)?)
    });
    match (written, super::files::value_span(text, &at)) {
        (Some(was), Some(now)) => Ok(format!("{}{was}{}", &text[..now.start], &text[now.end..])),
        _ => Ok(edit_settings(path, text, "mcpServers", name, Some(entry))?.0),
    }
}

/// The extensions' servers Gemini CLI can reach through the gateway instead of starting them:
/// those it starts (a remote one, its `url` kept by Gemini CLI's merge, stays with it).
fn through_the_gateway(extension: &Value) -> bool {
    ["url", "httpUrl", "tcp"].iter().all(|k| extension.get(k).is_none())
}

/// Gemini CLI's entry for an extension's server. Gemini CLI merges a settings entry over the
/// extension's of the same name (COMPAT §1.3): the command and arguments are the gateway's, the
/// rest (`timeout`, `includeTools`, ...) stays the extension's, and a `cwd` in the extension
/// (its own folder) gives way to the folder Gemini CLI runs in, whose session it is.
fn extension_entry(command: &str, name: &str, extension: &Value) -> Value {
    let mut entry = entry_for(command, name, None);
    if extension.get("cwd").is_some() {
        entry["cwd"] = json!(".");
    }
    entry
}

/// Move the servers (see the module); `command` is `gemctl`'s path, for the gateway entries;
/// `extensions` the extensions' servers (by name, as written).
pub(crate) fn mcp_import(
    paths: &ConfigPaths,
    command: &str,
    extensions: &BTreeMap<String, Value>,
    dry_run: bool,
) -> Result<McpImportResult, OpError> {
    let (from, to) = (&paths.user, &paths.geminid);
    let text = read_text(from)?;
    let theirs = servers_of(from, &text)?;
    let moving: Vec<(&String, &Value)> =
        theirs.iter().filter(|(_, v)| gateway_of(v).is_none()).collect();
    let own_text = read_text(to)?;
    let ours = servers_of(to, &own_text)?;
    let replaced: Vec<String> = moving
        .iter()
        .filter(|(n, v)| ours.get(*n).is_some_and(|o| o != *v))
        .map(|(n, _)| (*n).clone())
        .collect();
    // Each of geminid's servers, after the move, as Gemini CLI will reach it.
    let mut served: BTreeSet<&String> = ours.keys().collect();
    served.extend(moving.iter().map(|(n, _)| *n));
    let whole: Vec<&String> =
        theirs.iter().filter(|(_, v)| gateway_of(v) == Some(None)).map(|(n, _)| n).collect();
    let mut entries: Vec<(&String, Value)> = served
        .iter()
        .map(|n| (*n, entry_for(command, n, theirs.get(*n).or_else(|| ours.get(*n)))))
        .collect();
    // The extensions' servers that are not written in either file.
    let (gatewayed, kept): (Vec<_>, Vec<_>) = extensions
        .iter()
        .filter(|(n, _)| !served.contains(n))
        .partition(|(_, e)| through_the_gateway(e));
    entries.extend(gatewayed.iter().map(|(n, e)| (*n, extension_entry(command, n, e))));
    entries.retain(|(n, e)| theirs.get(*n) != Some(e));
    let result = |written: bool, backup: Option<String>| McpImportResult {
        from: from.display().to_string(),
        to: to.display().to_string(),
        moved: moving.iter().map(|(n, _)| (*n).clone()).collect(),
        replaced: replaced.clone(),
        gateway: format!("{command} mcp serve --server <name> --confirm client --hooks client"),
        extensions: gatewayed.iter().map(|(n, _)| (*n).clone()).collect(),
        kept: kept.iter().map(|(n, _)| (*n).clone()).collect(),
        backup,
        written,
    };
    if dry_run || (moving.is_empty() && entries.is_empty() && whole.is_empty()) {
        return Ok(result(false, None));
    }
    let mut own = own_text;
    for (n, v) in &moving {
        own = edit_settings(to, &own, "mcpServers", n, Some(v))?.0;
    }
    let mut mine = text.clone();
    for n in &whole {
        mine = edit_settings(from, &mine, "mcpServers", n, None)?.0;
    }
    for (n, entry) in &entries {
        mine = edit_settings(from, &mine, "mcpServers", n, Some(entry))?.0;
    }
    let backup = back_up(from, &text)?;
    if !moving.is_empty() {
        atomic_write(to, &own, Some(0o600))?;
    }
    atomic_write(from, &mine, None)?;
    Ok(result(true, backup))
}

/// Undo [`mcp_import`]: each gateway entry of one of geminid's servers in Gemini CLI's file is
/// replaced by the server's entry, which leaves geminid's file (Gemini CLI starts it itself
/// again), and the one of an extension's server (`extensions`) is taken out. Gemini CLI's file
/// first, so a server is never in neither. Returns what moved back.
pub(crate) fn mcp_unimport(
    paths: &ConfigPaths,
    extensions: &BTreeMap<String, Value>,
    dry_run: bool,
) -> Result<McpImportResult, OpError> {
    let (from, to) = (&paths.user, &paths.geminid);
    let text = read_text(from)?;
    let theirs = servers_of(from, &text)?;
    let own_text = read_text(to)?;
    let ours = servers_of(to, &own_text)?;
    let back: Vec<(&String, &Value)> = theirs
        .iter()
        .filter(|(n, v)| gateway_of(v).flatten().as_ref() == Some(*n))
        .filter_map(|(n, _)| ours.get(n).map(|o| (n, o)))
        .collect();
    let dropped: Vec<&String> = theirs
        .iter()
        .filter(|(n, v)| gateway_of(v).flatten().as_ref() == Some(*n))
        .filter(|(n, _)| !ours.contains_key(*n) && extensions.contains_key(*n))
        .map(|(n, _)| n)
        .collect();
    let result = |written: bool, backup: Option<String>| McpImportResult {
        from: from.display().to_string(),
        to: to.display().to_string(),
        moved: back.iter().map(|(n, _)| (*n).clone()).collect(),
        replaced: Vec::new(),
        gateway: String::new(),
        extensions: dropped.iter().map(|n| (*n).clone()).collect(),
        kept: Vec::new(),
        backup,
        written,
    };
    if dry_run || (back.is_empty() && dropped.is_empty()) {
        return Ok(result(false, None));
    }
    let mut mine = text.clone();
    let mut own = own_text.clone();
    let copies = backups(from);
    for (n, v) in &back {
        mine = put_back(from, &mine, n, v, &copies)?;
        own = edit_settings(to, &own, "mcpServers", n, None)?.0;
    }
    for n in &dropped {
        mine = edit_settings(from, &mine, "mcpServers", n, None)?.0;
    }
    let backup = back_up(from, &text)?;
    atomic_write(from, &mine, None)?;
    if own != own_text {
        atomic_write(to, &own, Some(0o600))?;
    }
    Ok(result(true, backup))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn paths(root: &Path) -> anyhow::Result<ConfigPaths> {
        std::fs::create_dir_all(root.join(".gemini"))?;
        Ok(ConfigPaths::from_env(|k| (k == "HOME").then(|| root.as_os_str().to_owned()))?)
    }

    /// Gemini CLI's own layout (`gemini mcp add`: arrays one item a line, no final newline), and
    /// a hand-written one with comments and one-line entries, imported once or twice, with an
    /// extension's server added and taken out again: unimport gives back the same bytes.
    #[test]
    fn unimport_gives_back_the_bytes_import_found() -> anyhow::Result<()> {
        let written_by_gemini = "{\n  \"security\": {\n    \"auth\": {\n      \"selectedType\": \"gemini-api-key\"\n    }\n  },\n  \"mcpServers\": {\n    \"everything\": {\n      \"command\": \"node\",\n      \"args\": [\n        \"/srv/index.js\",\n        \"stdio\"\n      ]\n    },\n    \"web\": {\n      \"httpUrl\": \"http://127.0.0.1:19499/mcp\"\n    }\n  }\n}";
        let by_hand = "{\n    // my settings\n    \"mcpServers\": {\n        // the reference server\n        \"everything\": { \"command\": \"node\", \"args\": [ \"/srv/index.js\", \"stdio\" ], \"trust\": false },\n        \"web\": { \"httpUrl\": \"http://127.0.0.1:19499/mcp\", \"timeout\": 30000 } // remote\n    }\n}\n";
        let extensions = BTreeMap::from([("xs".to_owned(), json!({"command": "x"}))]);
        for (text, imports) in [(written_by_gemini, 1), (by_hand, 1), (by_hand, 2)] {
            let dir = tempfile::tempdir()?;
            let paths = paths(dir.path())?;
            std::fs::write(&paths.user, text)?;
            for _ in 0..imports {
                mcp_import(&paths, "/bin/gemctl", &extensions, false)?;
            }
            assert_ne!(std::fs::read_to_string(&paths.user)?, text);
            let undone = mcp_unimport(&paths, &extensions, false)?;
            assert_eq!(undone.moved, ["everything", "web"]);
            assert_eq!(undone.extensions, ["xs"]);
            assert_eq!(std::fs::read_to_string(&paths.user)?, text, "imported {imports} time(s)");
        }
        Ok(())
    }
}
