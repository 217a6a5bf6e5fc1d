//! Gemini CLI's configuration, read in place (COMPAT §0–§1): every settings scope and their
//! merge, env expansion and redaction, folder trust and MCP enablement.
//!
//! [`Loader::effective`] computes one session's view (its workspace, trust and environment).
//! The loader remembers each file's last good contents (in the store too, so across restarts),
//! so a file that stops parsing (an editor mid-save, a typo) keeps its previous contents in
//! effect while the error is reported; a file that guards calls with no good version known
//! refuses the session's calls instead (`last_good.rs`).

mod agy;
pub(crate) mod agy_plugins;
pub(crate) mod context;
mod context_import;
mod context_memory;
mod context_read;
pub(crate) mod diff;
pub(crate) mod enablement;
pub(crate) mod env;
pub(crate) mod extend;
pub(crate) mod files;
pub(crate) mod folders;
pub(crate) mod import;
mod last_good;
pub(crate) mod mcp;
pub(crate) mod merge;
pub(crate) mod ops;
mod servers;
pub(crate) mod trust;
pub(crate) mod unset;
pub(crate) mod write;

use parking_lot::Mutex;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use geminid_protocol::config::{
    BlockReason, Diagnostic, EffectiveConfig, Scope, SettingsFile, Severity,
};
use serde_json::Value;

use env::Env;
use files::diagnostic;
pub(crate) use last_good::located;
use last_good::{Kept, Read, Role};
use mcp::McpServerConfig;

/// Where Gemini CLI's files are (COMPAT §0).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigPaths {
    /// Home (`GEMINI_CLI_HOME`, else `HOME`).
    pub home: PathBuf,
    /// `~/.gemini/settings.json`.
    pub user: PathBuf,
    /// geminid's own servers (`~/.gemini/geminid/servers.json`, `gemctl mcp import`), merged
    /// before the user's settings; Gemini CLI does not read it.
    pub geminid: PathBuf,
    /// System settings (`GEMINI_CLI_SYSTEM_SETTINGS_PATH` or the platform path).
    pub system: PathBuf,
    /// System defaults (`GEMINI_CLI_SYSTEM_DEFAULTS_PATH`, else next to the system settings).
    pub system_defaults: PathBuf,
    /// `trustedFolders.json` (`GEMINI_CLI_TRUSTED_FOLDERS_PATH`).
    pub trusted_folders: PathBuf,
    /// `~/.gemini/mcp-server-enablement.json`.
    pub enablement: PathBuf,
}

/// No home directory to find the user's files in.
#[derive(Debug, thiserror::Error)]
#[error("cannot find the home directory: set HOME (or GEMINI_CLI_HOME)")]
pub struct NoHome;

impl ConfigPaths {
    /// Paths from the daemon's environment.
    pub fn from_env(var: impl Fn(&str) -> Option<OsString>) -> Result<Self, NoHome> {
        // Absolute: the daemon leaves the folder it was started in.
        let var = |k: &str| {
            var(k).filter(|v| !v.is_empty()).map(|v| std::path::absolute(&v).unwrap_or(v.into()))
        };
        let home = var("GEMINI_CLI_HOME")
            .or_else(|| var("HOME"))
            .or_else(|| var("USERPROFILE"))
            .ok_or(NoHome)?;
        let gemini = home.join(".gemini");
        let system = var("GEMINI_CLI_SYSTEM_SETTINGS_PATH").unwrap_or_else(|| {
            PathBuf::from(if cfg!(windows) {
                r"C:\ProgramData\gemini-cli\settings.json"
            } else if cfg!(target_os = "macos") {
                "/Library/Application Support/GeminiCli/settings.json"
            } else {
                "/etc/gemini-cli/settings.json"
            })
        });
        let system_defaults = var("GEMINI_CLI_SYSTEM_DEFAULTS_PATH").unwrap_or_else(|| {
            system.parent().map_or_else(
                || PathBuf::from("system-defaults.json"),
                |d| d.join("system-defaults.json"),
            )
        });
        Ok(Self {
            user: gemini.join("settings.json"),
            geminid: gemini.join("geminid").join("servers.json"),
            trusted_folders: var("GEMINI_CLI_TRUSTED_FOLDERS_PATH")
                .unwrap_or_else(|| gemini.join("trustedFolders.json")),
            enablement: gemini.join("mcp-server-enablement.json"),
            home,
            system,
            system_defaults,
        })
    }

    /// Antigravity CLI's user servers file (`~/.gemini/config/mcp_config.json`).
    pub(crate) fn agy_servers(&self) -> PathBuf {
        self.home.join(".gemini").join("config").join("mcp_config.json")
    }

    /// Antigravity CLI's workspace servers file (`<workspace>/.agents/mcp_config.json`).
    pub(crate) fn agy_workspace_servers(workspace: &Path) -> PathBuf {
        workspace.join(".agents").join("mcp_config.json")
    }

    /// Antigravity CLI's plugins folder (`~/.gemini/antigravity-cli/plugins`).
    pub(crate) fn agy_plugins(&self) -> PathBuf {
        self.home.join(".gemini").join("antigravity-cli").join("plugins")
    }

    /// geminid's servers file of a workspace (`<workspace>/.gemini/geminid/servers.json`,
    /// where `gemctl clients connect --project` moves a project file's servers; read for a
    /// trusted folder only); none when the workspace is the home directory.
    pub(crate) fn workspace_geminid(&self, workspace: &Path) -> Option<PathBuf> {
        let settings = self.workspace_settings(workspace)?;
        Some(settings.parent()?.join("geminid").join("servers.json"))
    }

    /// The workspace settings file; none when the workspace is the home directory.
    pub(crate) fn workspace_settings(&self, workspace: &Path) -> Option<PathBuf> {
        let same = |a: &Path, b: &Path| {
            std::fs::canonicalize(a)
                .ok()
                .zip(std::fs::canonicalize(b).ok())
                .is_some_and(|(a, b)| a == b)
        };
        (!same(workspace, &self.home)).then(|| workspace.join(".gemini").join("settings.json"))
    }
}

/// A configured server as the rest of the daemon sees it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ServerSpec {
    /// Its configuration (settings-expanded; spawn-time expansion happens at spawn).
    pub config: McpServerConfig,
    /// Its configuration as written (`$VAR` not expanded): what is shown of it (a target
    /// must never show the secret a variable holds).
    pub shown: McpServerConfig,
    /// The scope it came from.
    pub scope: Scope,
    /// The extension that gives it (a settings entry of its name may override it).
    pub extension: Option<String>,
    /// Why it may not start.
    pub blocked: Option<BlockReason>,
    /// A warning for each variable it uses that the session's environment leaves unset.
    pub unset: Vec<String>,
}

/// One session's effective configuration.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Effective {
    /// What `config/get` returns.
    pub public: EffectiveConfig,
    /// Valid servers by name (blocked ones included, with their reason).
    pub servers: BTreeMap<String, ServerSpec>,
    /// The merged settings as written, `$VAR` references unexpanded: what `config/get` shows
    /// (`public.settings` is what applies, and may hold an expanded secret).
    pub shown_settings: Value,
    /// The applied settings files that have `hooks`, in merge order (the hooks registry
    /// reads them file by file to say where a problem is).
    pub hook_files: Vec<HookFile>,
    /// What the extensions enabled in the workspace contribute, in name order.
    pub extensions: Vec<extend::Contribution>,
    /// The problems of the files that guard calls (the settings scopes that apply, the
    /// enablement file) and give nothing: they do not parse and no good version of them is
    /// known. While there is one, every tool call of the session is refused with it.
    pub refusing: Vec<Diagnostic>,
    /// What the session's servers are told its clients answer (its
    /// `SessionState::upstream`); `None`: everything.
    pub upstream: Option<geminid_protocol::session::Declares>,
}

/// One settings file's `hooks` (expanded) and its text.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct HookFile {
    /// Its scope.
    pub scope: Scope,
    /// The file.
    pub path: PathBuf,
    /// Its `hooks`.
    pub hooks: Value,
    /// Its text.
    pub text: String,
}

struct Layer {
    scope: Scope,
    path: PathBuf,
    exists: bool,
    applied: bool,
    /// Its contents with `$VAR` references expanded (what applies).
    value: Option<Value>,
    /// Its contents as written (what is shown: an expanded secret must not be).
    raw: Option<Value>,
    text: String,
    /// How reading it went (its problem is said once its role is known).
    read: Read,
}

/// Reads the files and remembers their last good contents.
#[derive(Debug)]
pub(crate) struct Loader {
    paths: ConfigPaths,
    last_good: Mutex<HashMap<PathBuf, Kept>>,
    /// Files seen missing that had contents, and since when: some editors save by deleting
    /// the file and writing it anew, and that gap must not stop its servers.
    vanished: Mutex<HashMap<PathBuf, std::time::Instant>>,
    /// Files whose last good contents were looked up in the store, each with why the copy
    /// kept there cannot be used, if it cannot.
    recalled: Mutex<HashMap<PathBuf, Option<String>>>,
    /// Each file that had a problem when it was last read, as `daemon/status` says it.
    broken: Mutex<BTreeMap<PathBuf, String>>,
    /// Where last good contents outlive the daemon; none in tests of the loader alone.
    store: Option<crate::store::Store>,
}

/// How long a file that disappeared keeps its last contents before it counts as deleted.
pub(crate) const VANISH_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

impl Loader {
    /// A loader for these paths.
    pub(crate) fn new(paths: ConfigPaths) -> Self {
        Self {
            paths,
            last_good: Mutex::default(),
            vanished: Mutex::default(),
            recalled: Mutex::default(),
            broken: Mutex::default(),
            store: None,
        }
    }

    /// The paths it reads.
    pub(crate) fn paths(&self) -> &ConfigPaths {
        &self.paths
    }

    /// The trust rules in effect, and a problem with their file.
    fn trust_rules(&self) -> (trust::TrustRules, Option<Diagnostic>) {
        let path = &self.paths.trusted_folders;
        let check = |v: &Value| trust::rules_from(v.clone()).map(|_| ());
        let (read, problem) = self.read_as(path, check, Role::Trust);
        let rules = read.content.and_then(|(v, _)| trust::rules_from(v).ok()).unwrap_or_default();
        (rules, problem)
    }

    /// A settings scope's file, read; its problem is said by [`Loader::settle_layers`].
    fn layer(&self, scope: Scope, path: PathBuf, env: &Env) -> Layer {
        let mut read = self.read_checked(&path, |_| Ok(()));
        let exists = read.exists;
        let (value, raw, text) = match read.content.take() {
            Some((raw, t)) => {
                let mut v = raw.clone();
                env::expand_settings_value(&mut v, env);
                (Some(v), Some(raw), t)
            }
            None => (None, None, String::new()),
        };
        Layer { scope, applied: value.is_some(), path, exists, value, raw, text, read }
    }

    /// Each settings layer's problem, said now that trust is known: a file that guards calls
    /// (every scope but geminid's own, the workspace's only in a trusted folder) and gives
    /// nothing refuses the session's calls.
    fn settle_layers(
        &self,
        layers: &[Layer],
        trusted: bool,
        diags: &mut Vec<Diagnostic>,
        refusing: &mut Vec<Diagnostic>,
    ) {
        for l in layers {
            let role = match l.scope {
                Scope::Geminid | Scope::Antigravity | Scope::AntigravityWorkspace => Role::Ignored,
                Scope::Workspace if !trusted => Role::Ignored,
                _ => Role::Guards,
            };
            let Some(d) = self.settle(&l.path, &l.read, role) else { continue };
            if l.read.unusable && role.refuses() {
                refusing.push(d.clone());
            }
            diags.push(d);
        }
    }

    /// The effective configuration for a session in `workspace` whose environment is `env`,
    /// with `session_disabled` servers disabled for it, and no extensions.
    pub(crate) fn effective(
        &self,
        workspace: &Path,
        env: &Env,
        session_disabled: &BTreeSet<String>,
    ) -> Effective {
        self.effective_with(workspace, env, session_disabled, &())
    }

    /// [`Loader::effective`] with the extensions of `extensions` that are enabled there.
    pub(crate) fn effective_with(
        &self,
        workspace: &Path,
        env: &Env,
        session_disabled: &BTreeSet<String>,
        extensions: &dyn extend::Extensions,
    ) -> Effective {
        let mut diags = Vec::new();
        let p = &self.paths;
        let mut refusing = Vec::new();
        let defaults = self.layer(Scope::SystemDefaults, p.system_defaults.clone(), env);
        let user = self.layer(Scope::User, p.user.clone(), env);
        let own = self.layer(Scope::Geminid, p.geminid.clone(), env);
        let agy_user = self.agy_layer(Scope::Antigravity, &p.agy_servers(), env);
        let system = self.layer(Scope::System, p.system.clone(), env);
        let mut contributions_diags = Vec::new();
        let plugins = agy_plugins::contributions(&p.agy_plugins(), env, &mut contributions_diags);
        // Gateway entries named as one of geminid's servers or an extension's yield to them.
        let mut own_servers = import::server_names(own.value.as_ref());
        own_servers.extend(extensions.server_names());
        own_servers.extend(plugins.iter().flat_map(|c| c.servers.expose().keys().cloned()));

        // Trust is decided from the scopes that do not depend on it.
        let base =
            merge::merge_all([&defaults, &user, &system].iter().filter_map(|l| l.value.as_ref()));
        let folder_trust = pointer_bool(&base, "/security/folderTrust/enabled").unwrap_or(true);
        let (rules, trust_problem) = self.trust_rules();
        diags.extend(trust_problem);
        let trust = trust::decide(&rules, workspace, folder_trust, Some(env));

        let mut contributions = extensions.contributions(workspace, trust.trusted, env);
        contributions.extend(plugins);
        diags.append(&mut contributions_diags);
        // geminid's own file (what `gemctl mcp import` writes, where pinning and keepWarm are
        // set) is the user's deliberate choice: above agy's user file.
        let mut layers = vec![defaults, agy_user, own, user];
        self.workspace_layers(
            workspace,
            env,
            trust.trusted,
            &mut layers,
            &mut own_servers,
            &mut diags,
        );
        layers.push(system);
        self.settle_layers(&layers, trust.trusted, &mut diags, &mut refusing);
        import::yield_to_own(&own_servers, &mut layers);
        let applied: Vec<&Layer> = layers.iter().filter(|l| l.applied).collect();
        let listed: Vec<&Layer> =
            layers.iter().filter(|l| l.value.is_some() && (l.applied || !trust.trusted)).collect();
        agy::differing(&listed, &mut diags);
        let mut merged = merge::merge_all(applied.iter().filter_map(|l| l.value.as_ref()));
        extend::exclude_tools(&mut merged, &contributions);
        let mut shown_settings = merge::merge_all(applied.iter().filter_map(|l| l.raw.as_ref()));
        extend::exclude_tools(&mut shown_settings, &contributions);
        if let Some(m) = shown_settings.as_object_mut() {
            m.remove("mcpServers");
        }

        let gate = self.gate(&merged, &applied, session_disabled, &mut diags, &mut refusing);
        let sources = servers::Sources {
            layers: &layers,
            applied: &applied,
            trusted: trust.trusted,
            gate: &gate,
            contributions: &contributions,
            env,
            user: &p.user,
        };
        let servers = servers::read(&sources, &mut merged, &mut diags);
        // `entries` keep the settings files' order (a later scope's entry in the place of the
        // earlier one it replaces), extensions' servers after them, as Gemini CLI lists them.
        diags.sort_by(|a, b| {
            b.severity.cmp(&a.severity).then_with(|| a.file.cmp(&b.file)).then(a.line.cmp(&b.line))
        });
        let hook_files = layers
            .iter()
            .filter(|l| l.applied || (!trust.trusted && l.value.is_some()))
            .filter_map(|l| {
                let hooks = l.value.as_ref()?.get("hooks")?.clone();
                Some(HookFile { scope: l.scope, path: l.path.clone(), hooks, text: l.text.clone() })
            })
            .collect();
        let files = layers
            .iter()
            .map(|l| SettingsFile {
                scope: l.scope,
                path: l.path.display().to_string(),
                exists: l.exists,
                applied: l.applied,
            })
            .collect();
        Effective {
            public: EffectiveConfig {
                workspace: workspace.display().to_string(),
                trust,
                files,
                mcp_servers: servers.entries,
                settings: merged,
                diagnostics: diags,
            },
            servers: servers.specs,
            shown_settings,
            hook_files,
            extensions: contributions,
            refusing,
            upstream: None,
        }
    }

    /// A workspace's layers (each applied in a trusted folder only): agy's workspace file,
    /// geminid's own servers of the workspace (`gemctl clients connect --project`; above agy's
    /// file and below Gemini CLI's settings, as the user's are, and its names added to
    /// `own`), and Gemini CLI's workspace settings.
    fn workspace_layers(
        &self,
        workspace: &Path,
        env: &Env,
        trusted: bool,
        layers: &mut Vec<Layer>,
        own: &mut BTreeSet<String>,
        diags: &mut Vec<Diagnostic>,
    ) {
        let p = &self.paths;
        let agy_path = ConfigPaths::agy_workspace_servers(workspace);
        if agy_path != p.agy_servers() {
            let mut ws = self.agy_layer(Scope::AntigravityWorkspace, &agy_path, env);
            ws.applied &= trusted;
            layers.push(ws);
        }
        if let Some(path) = p.workspace_geminid(workspace) {
            let mut own_ws = self.layer(Scope::Geminid, path, env);
            own_ws.applied &= trusted;
            if own_ws.applied {
                own.extend(import::server_names(own_ws.value.as_ref()));
            }
            layers.push(own_ws);
        }
        if let Some(path) = p.workspace_settings(workspace) {
            let mut ws = self.layer(Scope::Workspace, path, env);
            ws.applied &= trusted;
            if let Some(why) = merge::drop_policy_places(&mut ws.value, &mut ws.raw, ws.applied) {
                diags.push(diagnostic(Severity::Warning, &ws.path, None, why));
            }
            layers.push(ws);
        }
    }

    fn gate(
        &self,
        merged: &Value,
        applied: &[&Layer],
        session: &BTreeSet<String>,
        diags: &mut Vec<Diagnostic>,
        refusing: &mut Vec<Diagnostic>,
    ) -> enablement::Gate {
        let names = |v: &Value| -> BTreeSet<String> {
            v.as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(enablement::normalize)
                .collect()
        };
        let mut allowed: Option<BTreeSet<String>> = None;
        let mut excluded = BTreeSet::new();
        for layer in applied {
            let Some(v) = &layer.value else { continue };
            if let Some(list) = v.pointer("/mcp/allowed") {
                let list = names(list);
                allowed = Some(match allowed {
                    Some(prev) => prev.intersection(&list).cloned().collect(),
                    None => list,
                });
            }
            if let Some(list) = v.pointer("/mcp/excluded") {
                excluded.extend(names(list));
            }
        }
        let (read, problem) = self.read_as(&self.paths.enablement, |_| Ok(()), Role::Enablement);
        if read.unusable {
            refusing.extend(problem.clone());
        }
        diags.extend(problem);
        let file = read.content.map(|(v, _)| enablement::disabled_in(&v)).unwrap_or_default();
        enablement::Gate {
            admin_enabled: pointer_bool(merged, "/admin/mcp/enabled").unwrap_or(true),
            allowed,
            excluded,
            session: session.iter().map(|s| enablement::normalize(s)).collect(),
            file,
        }
    }
}

fn pointer_bool(v: &Value, pointer: &str) -> Option<bool> {
    v.pointer(pointer).and_then(Value::as_bool)
}

/// Escape a key for a JSON pointer.
fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests;
