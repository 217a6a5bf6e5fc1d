//! Extensions' servers among the settings' (COMPAT §1.3): an extension's server joins the
//! session's servers; a settings entry of the same name overrides it field by field (scalars
//! and `env` keys from the settings, `includeTools` intersected, `excludeTools` united); a
//! second extension's server of a name already taken is skipped with a warning. An extension's
//! entry never lowers a protection the user holds (`pinning` below `enforce`, `keepWarm:
//! "always"`): those fields are ignored with a warning. The tools extensions exclude join
//! `tools.exclude`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use geminid_protocol::config::{Diagnostic, Severity};
use serde_json::{Map, Value};

use super::env::Env;
use super::files::{diagnostic, position};
use crate::secrets::Secret;

/// One enabled extension's share of a session.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Contribution {
    /// The extension.
    pub name: String,
    /// Its manifest file and text (where its servers are written).
    pub manifest_path: PathBuf,
    /// The manifest's text.
    pub manifest_text: String,
    /// Its MCP servers, hydrated for the workspace, without `trust` (they may hold a
    /// setting's secret).
    pub servers: Secret<Map<String, Value>>,
    /// The same with only the path variables hydrated: what is shown (an expanded `$TOKEN`
    /// must not be).
    pub servers_shown: Map<String, Value>,
    /// Tools it excludes everywhere.
    pub exclude_tools: Vec<String>,
    /// Its hooks, hydrated.
    pub hooks: Option<Value>,
    /// Its settings' values (each hook's environment gets them; sensitive ones among them).
    pub settings: Secret<BTreeMap<String, String>>,
    /// Its context files that exist.
    pub context_files: Vec<PathBuf>,
    /// Its `policies/` folder (tier 2), if it has one.
    pub policies: Option<PathBuf>,
    /// Its `skills/`, `commands/` and `agents/` folders that exist, for those registries.
    pub skills: Option<PathBuf>,
    /// Its `commands/` folder.
    pub commands: Option<PathBuf>,
    /// Its `agents/` folder.
    pub agents: Option<PathBuf>,
    /// An Antigravity CLI plugin (read in place, no consent step): a server of a name the
    /// settings already define is skipped, never merged under the user's entry.
    pub plugin: bool,
}

/// The installed extensions as the configuration sees them: `extensions::Scan` answers, so
/// this layer needs nothing of the extensions' own.
pub(crate) trait Extensions {
    /// The names of the servers the extensions declare: a gateway entry of geminid's own
    /// settings named as one of them yields to it.
    fn server_names(&self) -> BTreeSet<String>;
    /// The shares of the extensions enabled in `workspace` that can load, for a session whose
    /// environment is `env`.
    fn contributions(&self, workspace: &Path, trusted: bool, env: &Env) -> Vec<Contribution>;
}

/// No extensions.
impl Extensions for () {
    fn server_names(&self) -> BTreeSet<String> {
        BTreeSet::new()
    }

    fn contributions(&self, _: &Path, _: bool, _: &Env) -> Vec<Contribution> {
        Vec::new()
    }
}

/// `override_` over `base`, as Gemini CLI merges a settings entry over an extension's.
pub(crate) fn merge_server(base: &Value, override_: &Value) -> Value {
    let (Some(b), Some(o)) = (base.as_object(), override_.as_object()) else {
        return override_.clone();
    };
    let mut out = b.clone();
    for (k, v) in o {
        out.insert(k.clone(), v.clone());
    }
    let strings = |v: Option<&Value>| -> Option<Vec<Value>> { v?.as_array().cloned() };
    if let (Some(bi), Some(oi)) = (strings(b.get("includeTools")), strings(o.get("includeTools"))) {
        out.insert(
            "includeTools".into(),
            Value::Array(bi.into_iter().filter(|t| oi.contains(t)).collect()),
        );
    }
    if let (Some(mut be), Some(oe)) =
        (strings(b.get("excludeTools")), strings(o.get("excludeTools")))
    {
        for t in oe {
            if !be.contains(&t) {
                be.push(t);
            }
        }
        out.insert("excludeTools".into(), Value::Array(be));
    }
    if let (Some(Value::Object(be)), Some(Value::Object(oe))) = (b.get("env"), o.get("env")) {
        let mut env = be.clone();
        env.extend(oe.clone());
        out.insert("env".into(), Value::Object(env));
    }
    Value::Object(out)
}

/// The fields of an extension's server entry that would lower a protection the user holds,
/// with the values that would: `pinning` below `enforce` (a changed tool definition offered,
/// or never checked) and `keepWarm: "always"` (kept past the idle period and the idle-memory
/// budget). A package never lowers a protection; only the user's own files can, so these
/// fields are taken out of the entry (issue 64, item 8).
pub(crate) fn withheld(entry: &mut Value) -> Vec<(&'static str, String)> {
    let Some(map) = entry.as_object_mut() else { return Vec::new() };
    let mut out = Vec::new();
    for key in ["pinning", "artifactPinning"] {
        if map.get(key).is_some_and(|p| p.as_str() != Some("enforce")) {
            out.extend(map.remove(key).map(|v| (key, v.to_string())));
        }
    }
    if map.get("keepWarm").is_some_and(|k| k.as_str() == Some("always")) {
        out.extend(map.remove("keepWarm").map(|v| ("keepWarm", v.to_string())));
    }
    out
}

/// Fields of a server entry the consent text already says (what runs, where), or that change
/// nothing of what it does.
const SAID: &[&str] = &["command", "args", "url", "httpUrl", "type", "description"];

/// What an extension's server entry sets that differs from the defaults, one line each, as the
/// consent text says it: values that look secret redacted, what the extension may not set
/// said to be ignored and how the user sets it.
pub(crate) fn consent_lines(name: &str, entry: &Value) -> Vec<String> {
    let Some(map) = entry.as_object() else { return Vec::new() };
    let withheld = withheld(&mut entry.clone());
    let mut out = Vec::new();
    for (key, value) in map.iter().filter(|(k, _)| !SAID.contains(&k.as_str())) {
        let shown = match (key.as_str(), value) {
            ("env" | "headers", Value::Object(m)) => m
                .iter()
                .map(|(k, v)| {
                    let v = v.as_str().map_or_else(|| v.to_string(), str::to_owned);
                    format!("{k}={}", super::env::display_value(k, &v))
                })
                .collect::<Vec<_>>()
                .join(", "),
            ("oauth", Value::Object(m)) => {
                m.keys().map(String::as_str).collect::<Vec<_>>().join(", ")
            }
            ("pinning" | "artifactPinning", Value::String(p)) if p == "enforce" => continue,
            ("keepWarm", Value::String(k)) if k == "default" => continue,
            ("trust", Value::Bool(false)) => continue,
            _ => {
                let text = value.to_string();
                match text.char_indices().nth(120) {
                    Some((cut, _)) => format!("{}…", &text[..cut]),
                    None => text,
                }
            }
        };
        let ignored = if withheld.iter().any(|(k, _)| k == key) {
            format!(
                " (ignored: an extension never lowers a protection you hold; give \"{name}\": \
                 {{\"{key}\": {value}}} in ~/.gemini/geminid/servers.json to choose it yourself)"
            )
        } else if key == "trust" {
            " (ignored: only your own settings can trust a server)".to_owned()
        } else {
            String::new()
        };
        out.push(format!("    sets {key}: {shown}{ignored}"));
    }
    out
}

/// What the extensions add to a session's servers.
#[derive(Debug, Default)]
pub(crate) struct Joined {
    /// Each server name an extension gives, with the extension and its entry as shown
    /// (merged with the settings' entry of the same name, if any).
    pub from: BTreeMap<String, (String, Value)>,
    /// Per extension (in order): the servers it alone gives, as applied, for its layer.
    pub layers: Vec<(usize, Map<String, Value>)>,
}

/// Join the extensions' servers into `servers` (the settings' servers, expanded), with
/// `shown` the settings' entries as written. Problems go to `diags`.
pub(crate) fn join_servers(
    servers: &mut Map<String, Value>,
    shown: &dyn Fn(&str) -> Option<Value>,
    contributions: &[Contribution],
    diags: &mut Vec<Diagnostic>,
) -> Joined {
    let mut joined = Joined::default();
    for (i, c) in contributions.iter().enumerate() {
        let mut own = Map::new();
        for (name, server) in c.servers.expose() {
            if let Some((other, _)) = joined.from.get(name) {
                // Written the same (an extension and the Antigravity plugin made of it): one
                // server, nothing to say.
                let same = contributions[..i]
                    .iter()
                    .any(|e| e.name == *other && e.servers.expose().get(name) == Some(server));
                if same {
                    continue;
                }
                diags.push(diagnostic(
                    Severity::Warning,
                    &c.manifest_path,
                    position(&c.manifest_text, &["mcpServers", name]),
                    format!(
                        "MCP server \"{name}\" is skipped: extension \"{other}\" already gives a \
                         server of that name"
                    ),
                ));
                continue;
            }
            let mut as_written =
                c.servers_shown.get(name).cloned().unwrap_or_else(|| server.clone());
            let mut server = server.clone();
            let taken = withheld(&mut server);
            withheld(&mut as_written);
            for (key, value) in taken {
                diags.push(diagnostic(
                    Severity::Warning,
                    &c.manifest_path,
                    position(&c.manifest_text, &["mcpServers", name, key]),
                    format!(
                        "MCP server \"{name}\": extension \"{}\" sets \"{key}\": {value}, which is \
                         ignored: an extension never lowers a protection you hold; to choose it \
                         yourself, give \"{name}\": {{\"{key}\": {value}}} under \"mcpServers\" \
                         in ~/.gemini/geminid/servers.json",
                        c.name
                    ),
                ));
            }
            let server = &server;
            match servers.get(name) {
                Some(_) if c.plugin => {
                    // Merged field by field, the plugin's `url` would take the user's entry
                    // over, with the user's trust and headers (the extension rule, which
                    // Gemini CLI's consent text at least shows): the user's entry wins whole.
                    diags.push(diagnostic(
                        Severity::Warning,
                        &c.manifest_path,
                        position(&c.manifest_text, &["mcpServers", name]),
                        format!(
                            "MCP server \"{name}\" is skipped: your settings define a server of \
                             that name, and Antigravity plugin \"{}\" never changes a server you \
                             defined",
                            c.name
                        ),
                    ));
                }
                Some(settings) => {
                    let merged = merge_server(server, settings);
                    let shown = merge_server(&as_written, &shown(name).unwrap_or(settings.clone()));
                    servers.insert(name.clone(), merged);
                    joined.from.insert(name.clone(), (c.name.clone(), shown));
                }
                None => {
                    servers.insert(name.clone(), server.clone());
                    own.insert(name.clone(), server.clone());
                    joined.from.insert(name.clone(), (c.name.clone(), as_written));
                }
            }
        }
        joined.layers.push((i, own));
    }
    joined
}

/// The tools the extensions exclude, added to the settings' `tools.exclude`.
pub(crate) fn exclude_tools(settings: &mut Value, contributions: &[Contribution]) {
    let extra: Vec<&String> = contributions.iter().flat_map(|c| &c.exclude_tools).collect();
    if extra.is_empty() {
        return;
    }
    let Some(root) = settings.as_object_mut() else { return };
    let tools = root.entry("tools").or_insert_with(|| Value::Object(Map::new()));
    let Some(tools) = tools.as_object_mut() else { return };
    let list = tools.entry("exclude").or_insert_with(|| Value::Array(Vec::new()));
    let Some(list) = list.as_array_mut() else { return };
    for t in extra {
        let t = Value::String(t.clone());
        if !list.contains(&t) {
            list.push(t);
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_settings_entry_overrides_an_extensions_as_gemini_cli_merges() {
        // COMPAT §1.3, as Gemini CLI's mcp-client-manager tests state it.
        let ext = json!({
            "command": "node", "args": ["server.js"], "env": {"A": "1", "B": "2"},
            "includeTools": ["a", "b", "c"], "excludeTools": ["x"], "timeout": 100
        });
        let user = json!({
            "env": {"B": "user"}, "includeTools": ["b", "c", "d"], "excludeTools": ["y", "x"],
            "timeout": 5
        });
        assert_eq!(
            merge_server(&ext, &user),
            json!({
                "command": "node", "args": ["server.js"], "env": {"A": "1", "B": "user"},
                "includeTools": ["b", "c"], "excludeTools": ["x", "y"], "timeout": 5
            })
        );
        // Only one side lists includeTools: that list; an empty one means no tools.
        assert_eq!(
            merge_server(&json!({"command": "c"}), &json!({"includeTools": []}))["includeTools"],
            json!([])
        );
        assert_eq!(
            merge_server(&json!({"command": "c", "includeTools": ["a"]}), &json!({}))["includeTools"],
            json!(["a"])
        );
    }

    #[test]
    fn extension_exclusions_join_the_settings() {
        let c = Contribution { exclude_tools: vec!["b".into(), "c".into()], ..Default::default() };
        let mut s = json!({"tools": {"exclude": ["a", "b"]}});
        exclude_tools(&mut s, std::slice::from_ref(&c));
        assert_eq!(s, json!({"tools": {"exclude": ["a", "b", "c"]}}));
        let mut empty = json!({});
        exclude_tools(&mut empty, &[c]);
        assert_eq!(empty, json!({"tools": {"exclude": ["b", "c"]}}));
    }
}
