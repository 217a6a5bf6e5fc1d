//! Changing what is installed: install from a local folder (copied, then signed), link a
//! development folder, uninstall, accept a deliberate edit, enable and disable.
//!
//! An install is staged: the copy goes to a hidden folder next to the others, is checked
//! (manifest, name, no link leaving the folder), gets its install metadata and its records, and
//! only then is renamed into place, so a failure at any step leaves nothing half-installed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::enablement::{self, Enablement};
use super::fetch::Source;
use super::manifest::{self, Manifest};
use super::{ExtensionError, Extensions, Scan};
use crate::config::files::{FileRead, read_object};

/// What installing promises about the files.
const SIGNED: &str = "its files are signed now and checked every time extensions load.";
/// What linking promises instead.
const LINKED: &str = "a link is the folder itself: its files are not signed, and each change \
                      to them applies at the next load unchecked.";

/// What the person agrees to when an update brings more: only what is new since the installed
/// version (`before` and `after` are [`consent_text`] without its first line), each item under
/// its heading, then the closing line (audit turn 4, P3: an update that added a hook listed
/// everything the extension brings, under "Installing").
pub(crate) fn update_consent(
    name: &str,
    from: &str,
    to: &str,
    before: &str,
    after: &str,
) -> String {
    let mut out =
        vec![format!("Updating extension \"{name}\" {from} -> {to}. New in this version:")];
    let lines: Vec<&str> = after.lines().collect();
    let (body, last) = lines.split_at(lines.len().saturating_sub(1));
    out.extend(new_lines(before, body));
    out.extend(last.iter().map(|l| (*l).to_owned()));
    out.join("\n")
}

/// Whether `after` brings a line `before` did not (in its place: under the same headings).
pub(crate) fn brings_more(before: &str, after: &str) -> bool {
    !new_lines(before, &after.lines().collect::<Vec<_>>()).is_empty()
}

/// The lines of `body` that `before` lacks, a line counting as the same only under the same
/// headings (a server's `sets env` line is its server's), each with the headings above it.
fn new_lines(before: &str, body: &[&str]) -> Vec<String> {
    let depth = |l: &str| l.len() - l.trim_start().len();
    let keyed = |lines: &[&str]| -> Vec<(Vec<String>, String)> {
        let mut path: Vec<&str> = Vec::new();
        lines
            .iter()
            .map(|&l| {
                path.retain(|p| depth(p) < depth(l));
                let key = (path.iter().map(|p| (*p).to_owned()).collect(), l.to_owned());
                path.push(l);
                key
            })
            .collect()
    };
    let known: std::collections::HashSet<(Vec<String>, String)> =
        keyed(&before.lines().collect::<Vec<_>>()).into_iter().collect();
    let mut said: std::collections::HashSet<String> = std::collections::HashSet::new();
    let mut out = Vec::new();
    for (path, line) in keyed(body) {
        if known.contains(&(path.clone(), line.clone())) {
            continue;
        }
        for (i, heading) in path.iter().enumerate() {
            if said.insert(path[..=i].join("\n")) {
                out.push(heading.clone());
            }
        }
        let mut whole = path.clone();
        whole.push(line.clone());
        said.insert(whole.join("\n"));
        out.push(line);
    }
    out
}

/// What the person agrees to: everything the extension brings that can run or change what the
/// model sees.
pub(crate) fn consent_text(m: &Manifest, dir: &Path, hooks: Option<&Value>) -> String {
    let mut out = vec![format!("Installing extension \"{}\" {}.", m.name, m.version)];
    if let Some(Value::Object(servers)) = m.raw.get("mcpServers") {
        out.push("It runs these MCP servers:".into());
        for (name, s) in servers {
            let field = |k: &str| s.get(k).and_then(Value::as_str);
            let line = match (field("command"), field("httpUrl").or_else(|| field("url"))) {
                (Some(cmd), _) => {
                    let args: Vec<&str> = s
                        .get("args")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_str)
                        .collect();
                    format!("  * {name} (local): {cmd} {}", args.join(" ")).trim_end().to_owned()
                }
                (None, Some(url)) => format!("  * {name} (remote): {url}"),
                (None, None) => format!("  * {name}"),
            };
            out.push(line);
            out.extend(crate::config::extend::consent_lines(name, s));
        }
    }
    let context = manifest::existing_context_files(dir, m);
    if !context.is_empty() {
        let names: Vec<String> = context
            .iter()
            .filter_map(|p| p.strip_prefix(dir).ok())
            .map(|p| p.display().to_string())
            .collect();
        out.push(format!("It adds to the model's context: {}", names.join(", ")));
    }
    if !m.exclude_tools.is_empty() {
        out.push(format!("It excludes these tools: {}", m.exclude_tools.join(", ")));
    }
    if let Some(Value::Object(events)) = hooks {
        // Each hook's command, so an update that changes or adds one is said and asked again.
        out.push("It has hooks, which run commands on their own:".into());
        for (event, definitions) in events {
            for d in definitions.as_array().into_iter().flatten() {
                let matcher = d.get("matcher").and_then(Value::as_str).filter(|m| !m.is_empty());
                let on = matcher.map(|m| format!("{event} ({m})")).unwrap_or_else(|| event.clone());
                for h in d.get("hooks").and_then(Value::as_array).into_iter().flatten() {
                    let command = h.get("command").and_then(Value::as_str).unwrap_or("?");
                    out.push(format!("  * on {on}: {command}"));
                }
            }
        }
    }
    // Commands by the names one types (`/git:commit`), not their files (audit polish).
    let commands = command_names(&dir.join("commands"));
    if !commands.is_empty() {
        out.push(format!("It brings custom commands: {}", commands.join(", ")));
    }
    for (folder, what) in
        [("skills", "agent skills"), ("agents", "agent definitions"), ("policies", "policy rules")]
    {
        let entries = folder_entries(dir, folder);
        if !entries.is_empty() {
            out.push(format!("It brings {what}: {}", entries.join(", ")));
        }
    }
    out.push(format!(
        "Extensions run with your permissions. Install only what you trust: {SIGNED}"
    ));
    out.join("\n")
}

/// The commands a commands folder holds, as typed (`/git:commit`), sorted; at most the first
/// [`crate::commands::load::MAX_FILES`] files are looked at.
/// The names in `dir`'s `folder` (its skills, agents, policies), sorted, hidden ones left out.
pub(super) fn folder_entries(dir: &Path, folder: &str) -> Vec<String> {
    let mut entries: Vec<String> = std::fs::read_dir(dir.join(folder))
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('.'))
        .collect();
    entries.sort();
    entries
}

pub(super) fn command_names(base: &Path) -> Vec<String> {
    let mut names = Vec::new();
    let mut pending = vec![base.to_path_buf()];
    let mut seen = 0usize;
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            seen += 1;
            if seen > crate::commands::load::MAX_FILES {
                break;
            }
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "toml") {
                names.push(format!("/{}", crate::commands::load::name_of(base, &path)));
            }
        }
    }
    names.sort();
    names
}

/// The manifest of the extension at `dir`, or why it cannot be installed.
pub(super) fn checked_manifest(dir: &Path) -> Result<(Manifest, Option<Value>), ExtensionError> {
    let (m, _) = manifest::read(dir).map_err(|errors| {
        let lines: Vec<String> = errors
            .iter()
            .map(|d| match (d.line, d.column) {
                (Some(l), Some(c)) => format!("{}:{l}:{c}: {}", d.file, d.message),
                _ => format!("{}: {}", d.file, d.message),
            })
            .collect();
        ExtensionError::Refused(format!("not a valid extension: {}", lines.join("; ")))
    })?;
    let hooks = match read_object(&dir.join("hooks").join("hooks.json")) {
        FileRead::Parsed { value, .. } => value.get("hooks").cloned(),
        _ => None,
    };
    Ok((m, hooks))
}

/// What an install or link did, or would do without consent.
#[derive(Debug)]
pub(crate) struct Outcome {
    /// Installed (false: consent is needed).
    pub installed: bool,
    /// What the person agrees to.
    pub consent: String,
    /// The extension's name.
    pub name: String,
    /// The settings it declares.
    pub settings: Vec<super::manifest::SettingDecl>,
}

impl Extensions {
    fn taken(scan: &Scan, root: &Path, name: &str) -> Result<PathBuf, ExtensionError> {
        if let Some(e) = scan.find(name) {
            return Err(ExtensionError::Refused(format!(
                "extension \"{}\" is already installed (at {}): uninstall it first \
                 (`gemctl extensions uninstall {}`)",
                e.name,
                e.dir.display(),
                e.name
            )));
        }
        let dir = root.join(name);
        if dir.exists() {
            return Err(ExtensionError::Refused(format!(
                "a folder named {} already exists: remove it or pick another name",
                dir.display()
            )));
        }
        Ok(dir)
    }

    /// The manifest of the extension at `dir`, what to agree to, and the folder it would be
    /// installed in (refused when its name is taken).
    fn prepare(&self, dir: &Path) -> Result<(Manifest, String, PathBuf), ExtensionError> {
        let (m, hooks) = checked_manifest(dir)?;
        let text = consent_text(&m, dir, hooks.as_ref());
        let target = Self::taken(&self.rescan_locked(false), &self.root, &m.name)?;
        Ok((m, text, target))
    }

    /// A staging folder for `what` (hidden beside the extensions, so scans pass it by).
    pub(super) fn staging(&self, what: &str) -> Result<PathBuf, ExtensionError> {
        std::fs::create_dir_all(&self.root)
            .map_err(|e| ExtensionError::Io(format!("cannot make {}: {e}", self.root.display())))?;
        let dir = self.root.join(format!(".{what}-{}", uuid::Uuid::now_v7().simple()));
        Ok(dir)
    }

    /// Install the extension `source` names: fetched into a staging folder, checked, given its
    /// install metadata and signed, then renamed into place. Without `consent`, only says what
    /// it would bring (and installs nothing). `home` is where the user-scope enablement rule
    /// points; `progress` is told each step.
    pub(crate) fn install(
        &self,
        source: &Source,
        consent: bool,
        settings: &BTreeMap<String, String>,
        home: &Path,
        progress: &dyn Fn(&str),
    ) -> Result<Outcome, ExtensionError> {
        let _busy = self.busy.lock();
        let staging = self.staging("installing")?;
        let result = self.install_staged(source, &staging, consent, settings, home, progress);
        if staging.exists() {
            let _ = std::fs::remove_dir_all(&staging);
        }
        result
    }

    fn install_staged(
        &self,
        source: &Source,
        staging: &Path,
        consent: bool,
        settings: &BTreeMap<String, String>,
        home: &Path,
        progress: &dyn Fn(&str),
    ) -> Result<Outcome, ExtensionError> {
        source.fetch(staging, progress)?;
        let (m, consent_text, target) = self.prepare(staging)?;
        super::settings::check_given(&m, settings)?;
        if !consent {
            let decl = m.settings.clone();
            return Ok(Outcome {
                installed: false,
                consent: consent_text,
                name: m.name,
                settings: decl,
            });
        }
        progress("signing its files");
        let metadata = source.metadata();
        write_metadata(staging, &metadata)?;
        self.store_settings(&m, staging, Some(&metadata), settings)?;
        let moved = self.sign(&m.name, staging, Some(&metadata)).and_then(|()| {
            std::fs::rename(staging, &target).map_err(|e| {
                ExtensionError::Io(format!(
                    "cannot move the extension into {}: {e}",
                    target.display()
                ))
            })
        });
        if let Err(e) = moved {
            let _ = self.unsign(&m.name);
            return Err(e);
        }
        self.set_rule(&m.name, true, home)?;
        self.rescan_locked(false);
        progress("installed");
        let decl = m.settings.clone();
        Ok(Outcome { installed: true, consent: consent_text, name: m.name, settings: decl })
    }

    /// Link the development folder `source`: read in place, never verified.
    pub(crate) fn link(
        &self,
        source: &Path,
        consent: bool,
        home: &Path,
    ) -> Result<Outcome, ExtensionError> {
        let _busy = self.busy.lock();
        let source = std::fs::canonicalize(source).map_err(|e| {
            ExtensionError::Refused(format!("cannot link {}: {e}", source.display()))
        })?;
        let (m, consent_text, target) = self.prepare(&source)?;
        // A link is the folder itself, as it changes: nothing is signed or checked.
        let consent_text = consent_text.replace(SIGNED, LINKED);
        if !consent {
            return Ok(Outcome {
                installed: false,
                consent: consent_text,
                name: m.name,
                settings: m.settings,
            });
        }
        std::fs::create_dir_all(&target)
            .map_err(|e| ExtensionError::Io(format!("cannot make {}: {e}", target.display())))?;
        let metadata = json!({ "source": source.display().to_string(), "type": "link" });
        if let Err(e) = write_metadata(&target, &metadata) {
            let _ = std::fs::remove_dir_all(&target);
            return Err(e);
        }
        self.set_rule(&m.name, true, home)?;
        self.rescan_locked(false);
        Ok(Outcome { installed: true, consent: consent_text, name: m.name, settings: m.settings })
    }

    /// Uninstall `name`: its folder, its records and its enablement rules.
    pub(crate) fn uninstall(&self, name: &str) -> Result<(String, PathBuf), ExtensionError> {
        let _busy = self.busy.lock();
        let scan = self.rescan_locked(false);
        let e = scan.find(name).ok_or_else(|| ExtensionError::NotFound(name.to_owned()))?.clone();
        std::fs::remove_dir_all(&e.dir).map_err(|err| {
            ExtensionError::Io(format!("cannot remove {}: {err}", e.dir.display()))
        })?;
        self.unsign(&e.name)?;
        let mut rules = self.read_enablement()?;
        if rules.remove(&e.name) {
            self.write_enablement(&rules)?;
        }
        self.rescan_locked(false);
        Ok((e.name.clone(), e.dir.clone()))
    }

    /// Re-sign `name`'s files as they are (a deliberate local edit).
    pub(crate) fn accept(&self, name: &str) -> Result<(), ExtensionError> {
        let _busy = self.busy.lock();
        let scan = self.rescan_locked(false);
        let e = scan.find(name).ok_or_else(|| ExtensionError::NotFound(name.to_owned()))?.clone();
        if e.install_type() == Some("link") {
            return Err(ExtensionError::Refused(format!(
                "{} is linked: linked extensions are read in place and not verified",
                e.name
            )));
        }
        self.sign(&e.name, &e.dir, e.metadata.as_ref())?;
        tracing::info!(
            extension = e.name,
            "extension accepted as it is: its files are signed again"
        );
        self.rescan_locked(true);
        Ok(())
    }

    /// Enable or disable `name` at `scope` and below; returns the rule written.
    pub(crate) fn set_enabled(
        &self,
        name: &str,
        enabled: bool,
        scope: &Path,
    ) -> Result<(String, String), ExtensionError> {
        let _busy = self.busy.lock();
        let scan = self.rescan_locked(false);
        let e = scan.find(name).ok_or_else(|| ExtensionError::NotFound(name.to_owned()))?.clone();
        let rule = self.set_rule(&e.name, enabled, scope)?;
        self.rescan_locked(false);
        Ok((e.name.clone(), rule))
    }

    fn set_rule(&self, name: &str, enabled: bool, scope: &Path) -> Result<String, ExtensionError> {
        let mut rules = self.read_enablement()?;
        rules.set(name, enabled, true, scope);
        self.write_enablement(&rules)?;
        Ok(rules.rules(name).last().cloned().unwrap_or_default())
    }

    fn read_enablement(&self) -> Result<Enablement, ExtensionError> {
        let path = self.root.join(enablement::FILE);
        match read_object(&path) {
            FileRead::Parsed { value, .. } => Ok(Enablement::from_value(&value)),
            FileRead::Missing => Ok(Enablement::default()),
            FileRead::Failed(d) => Err(ExtensionError::Refused(format!(
                "{}: {}; it is not rewritten: fix it or delete it",
                d.file, d.message
            ))),
        }
    }

    fn write_enablement(&self, rules: &Enablement) -> Result<(), ExtensionError> {
        let path = self.root.join(enablement::FILE);
        let text = serde_json::to_string_pretty(&rules.to_value()).unwrap_or_default();
        write_atomic(&path, &text)
    }
}

pub(super) fn write_metadata(dir: &Path, metadata: &Value) -> Result<(), ExtensionError> {
    let text = serde_json::to_string_pretty(metadata).unwrap_or_default();
    write_atomic(&dir.join(manifest::INSTALL_FILE), &text)
}

fn write_atomic(path: &Path, text: &str) -> Result<(), ExtensionError> {
    crate::secrets::write_private(path, text.as_bytes())
        .map_err(|e| ExtensionError::Io(format!("cannot write {}: {e}", path.display())))
}
