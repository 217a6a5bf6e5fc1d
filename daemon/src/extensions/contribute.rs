//! What the extensions enabled in a workspace give a session there: their MCP servers
//! (hydrated, `trust` removed), the tools they exclude, their hooks (hydrated, with the
//! extension's settings in each hook's environment) and their context files, in name order.
//!
//! An extension's settings come from its `.env` (user scope) and, in a trusted workspace, the
//! workspace's `.env` (Gemini CLI reads both whole, the workspace's winning); they hydrate
//! `$VAR` references before the session's environment does.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Map, Value};

use super::manifest::{self, Manifest};
use super::{Installed, Scan};
use crate::config::env::Env;
use crate::config::files::read_input;
use crate::secrets::Secret;

pub(crate) use crate::config::extend::Contribution;

/// `KEY=value` lines as dotenv reads them: `#` comments, an optional `export `, values in
/// single quotes as written, in double quotes with `\n` as a newline, bare ones trimmed and cut
/// at ` #`.
pub(crate) fn parse_dotenv(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let line = line.trim();
        let line = line.strip_prefix("export ").unwrap_or(line);
        if line.starts_with('#') {
            continue;
        }
        let Some((key, value)) = line.split_once('=') else { continue };
        let key = key.trim();
        if key.is_empty()
            || !key
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.' || b == b'-')
        {
            continue;
        }
        let value = value.trim();
        let value = if let Some(v) = value.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')) {
            v.to_owned()
        } else if let Some(v) = value.strip_prefix('"').and_then(|v| v.strip_suffix('"')) {
            v.replace("\\n", "\n")
        } else {
            value.split(" #").next().unwrap_or_default().trim().to_owned()
        };
        out.insert(key.to_owned(), value);
    }
    out
}

fn read_dotenv(path: &Path) -> BTreeMap<String, String> {
    match read_input(path) {
        Ok(Some(text)) => parse_dotenv(&text),
        _ => BTreeMap::new(),
    }
}

impl crate::config::extend::Extensions for Scan {
    fn server_names(&self) -> std::collections::BTreeSet<String> {
        self.servers().into_keys().collect()
    }

    fn contributions(&self, workspace: &Path, trusted: bool, env: &Env) -> Vec<Contribution> {
        for_workspace(self, workspace, trusted, env)
    }
}

/// The contributions of the extensions enabled in `workspace` that can load, for a session
/// whose environment is `env`.
pub(crate) fn for_workspace(
    scan: &Scan,
    workspace: &Path,
    trusted: bool,
    env: &Env,
) -> Vec<Contribution> {
    scan.installed
        .iter()
        .filter(|e| e.loadable() && scan.enablement.is_enabled(&e.name, workspace))
        .filter_map(|e| Some(contribution(e, e.manifest.as_ref()?, workspace, trusted, env)))
        .collect()
}

fn contribution(
    e: &Installed,
    m: &Manifest,
    workspace: &Path,
    trusted: bool,
    env: &Env,
) -> Contribution {
    let folder = |name: &str| Some(e.path.join(name)).filter(|p| p.is_dir());
    let mut settings = read_dotenv(&e.dir.join(".env"));
    settings.extend(e.secrets.iter().map(|(k, v)| (k.clone(), v.expose().clone())));
    if trusted {
        settings.extend(read_dotenv(&workspace.join(".env")));
    }
    let mut vars = manifest::variables(&e.path, workspace);
    let mut overlay = env.clone();
    overlay.extend(settings.clone());
    let (mut servers, mut servers_shown) = (Map::new(), Map::new());
    if let Some(Value::Object(declared)) = m.raw.get("mcpServers") {
        for (name, server) in declared {
            let mut applied = manifest::hydrate(server, &vars, &overlay);
            let mut shown = server.clone();
            manifest::hydrate_value(&mut shown, &vars);
            for v in [&mut applied, &mut shown] {
                if let Some(obj) = v.as_object_mut() {
                    obj.remove("trust");
                }
            }
            servers.insert(name.clone(), applied);
            servers_shown.insert(name.clone(), shown);
        }
    }
    // Hooks may also name the settings as `${VAR}` (Gemini CLI's hydration context has them),
    // but not the sensitive ones: a hook's command line is shown (`hooks/list`); those reach
    // the hook as environment variables only.
    vars.extend(
        settings
            .iter()
            .filter(|(k, _)| !e.secrets.contains_key(*k))
            .map(|(k, v)| (k.clone(), v.clone())),
    );
    let hooks = e.hooks.as_ref().map(|h| {
        let mut h = h.clone();
        manifest::hydrate_value(&mut h, &vars);
        h
    });
    Contribution {
        name: e.name.clone(),
        manifest_path: e.path.join(manifest::FILE),
        manifest_text: m.text.clone(),
        servers: Secret::new(servers),
        servers_shown,
        exclude_tools: m.exclude_tools.clone(),
        hooks,
        settings: Secret::new(settings),
        context_files: manifest::existing_context_files(&e.path, m),
        policies: folder("policies"),
        skills: folder("skills"),
        commands: folder("commands"),
        agents: folder("agents"),
        plugin: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dotenv_lines() {
        let text = "# comment\nA=1\nexport B = two \nC='x y'\nD=\"l1\\nl2\"\nE=v # note\nbad line\n=nokey\n";
        let got = parse_dotenv(text);
        let want: BTreeMap<String, String> =
            [("A", "1"), ("B", "two"), ("C", "x y"), ("D", "l1\nl2"), ("E", "v")]
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect();
        assert_eq!(got, want);
    }
}
