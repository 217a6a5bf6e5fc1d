//! Extensions (COMPAT §6): what is installed in `~/.gemini/extensions`, whether each one's
//! files are still the ones recorded, where it is enabled, and what it contributes to a session
//! (servers, excluded tools, hooks, context files).
//!
//! [`Extensions`] keeps one [`Scan`] of the folder: every extension's manifest read and
//! validated, and its files checked against geminid's signed record and Gemini CLI's integrity
//! store (`verify`). A scan runs at start, on every reload (the watcher sees the folder) and
//! after each change made through the daemon; a session's view ([`contribute`]) is computed
//! from the last scan without touching the disk beyond a context file's existence.

pub(crate) mod contribute;
pub(crate) mod enablement;
pub(crate) mod fetch;
pub(crate) mod files;
mod git;
pub(crate) mod install;
pub(crate) mod integrity;
pub(crate) mod key;
pub(crate) mod manifest;
mod rekey;
pub(crate) mod settings;
pub(crate) mod update;
mod verify;

pub(crate) use rekey::SignsWithKey;

use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use geminid_protocol::config::{Diagnostic, Severity};
use geminid_protocol::extensions::{ExtensionInfo, FileChanges, IntegrityState};
use serde_json::Value;

use crate::config::files::{FileRead, diagnostic, read_object};
use crate::events::EventBus;
use crate::secrets::{Secret, SecretStore};
use crate::store::Store;
use enablement::Enablement;
use manifest::Manifest;

/// One installed extension, as the last scan found it.
#[derive(Debug, Clone, PartialEq)]
pub struct Installed {
    /// Its manifest's name (its folder's when the manifest cannot be read).
    pub name: String,
    /// Its folder in `~/.gemini/extensions`.
    pub dir: PathBuf,
    /// Where its files are: the folder, or a linked extension's source.
    pub path: PathBuf,
    /// `.gemini-extension-install.json`.
    pub metadata: Option<Value>,
    /// Its manifest, when it is valid.
    pub manifest: Option<Manifest>,
    /// Its `hooks/hooks.json` `hooks` object, as written.
    pub hooks: Option<Value>,
    /// What the integrity check found.
    pub integrity: IntegrityState,
    /// The files that differ from the record.
    pub changes: Option<files::Changes>,
    /// Why it cannot be loaded anywhere, in words that name the fix.
    pub why_not: Option<String>,
    /// Problems with its files.
    pub diagnostics: Vec<Diagnostic>,
    /// Its sensitive settings' values, from Gemini CLI's keychain (user scope).
    pub secrets: BTreeMap<String, Secret<String>>,
}

impl Installed {
    /// The install metadata's `type`.
    pub(crate) fn install_type(&self) -> Option<&str> {
        self.metadata.as_ref()?.get("type")?.as_str()
    }

    /// Readable, verified (or linked) and not shadowed by another of its name.
    pub(crate) fn loadable(&self) -> bool {
        self.why_not.is_none() && self.manifest.is_some()
    }
}

/// The folder as last scanned.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Scan {
    /// Every extension folder, by name.
    pub installed: Vec<Arc<Installed>>,
    /// `extension-enablement.json`.
    pub enablement: Enablement,
    /// Problems with the folder as a whole.
    pub diagnostics: Vec<Diagnostic>,
}

impl Scan {
    /// The extension named `name`, compared case-insensitively (as Gemini CLI finds one).
    pub(crate) fn find(&self, name: &str) -> Option<&Arc<Installed>> {
        self.installed.iter().find(|e| e.name.eq_ignore_ascii_case(name))
    }

    /// The MCP servers the extensions that can load declare, by name, as written (the first
    /// extension's where two declare one name, as Gemini CLI keeps it).
    pub(crate) fn servers(&self) -> BTreeMap<String, Value> {
        let mut out = BTreeMap::new();
        for e in self.installed.iter().filter(|e| e.loadable()) {
            let declared = e.manifest.as_ref().and_then(|m| m.raw.get("mcpServers"));
            for (name, entry) in declared.and_then(Value::as_object).into_iter().flatten() {
                out.entry(name.clone()).or_insert_with(|| entry.clone());
            }
        }
        out
    }
}

/// Why an extension operation failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ExtensionError {
    /// No installed extension has that name.
    #[error("no extension named \"{0}\" is installed (`gemctl extensions list` shows them)")]
    NotFound(String),
    /// The request breaks a rule (a bad manifest, a name taken, a path outside the folder).
    #[error("{0}")]
    Refused(String),
    /// The integrity key or records could not be used.
    #[error("{0}")]
    Integrity(String),
    /// A file or folder could not be written.
    #[error("{0}")]
    Io(String),
}

/// The installed extensions and everything that checks them.
#[derive(Debug)]
pub struct Extensions {
    /// `~/.gemini`.
    gemini_dir: PathBuf,
    /// `~/.gemini/extensions`.
    root: PathBuf,
    secrets: Arc<SecretStore>,
    store: Store,
    events: Arc<EventBus>,
    /// The integrity key, once read (it is made on first use; replaced by the keychain's
    /// when that differs, see `rekey.rs`).
    key: Mutex<Option<Secret<String>>>,
    /// What else signs with the key.
    signers: Mutex<Vec<std::sync::Weak<dyn SignsWithKey>>>,
    /// Each extension's fingerprint when its files were last hashed, and what that found.
    checked: Mutex<HashMap<String, verify::Checked>>,
    scan: Mutex<Arc<Scan>>,
    /// Serializes scans and changes (install, accept, uninstall).
    busy: Mutex<()>,
    /// How many times an extension's files were hashed (for tests and benchmarks: a reload
    /// after one file changed hashes one extension).
    hashed: std::sync::atomic::AtomicU64,
}

impl Extensions {
    /// The extensions of the home whose `.gemini` is `gemini_dir` (not scanned yet).
    pub(crate) fn new(
        gemini_dir: PathBuf,
        secrets: Arc<SecretStore>,
        store: Store,
        events: Arc<EventBus>,
    ) -> Self {
        Self {
            root: gemini_dir.join("extensions"),
            gemini_dir,
            secrets,
            store,
            events,
            key: Mutex::default(),
            signers: Mutex::default(),
            checked: Mutex::default(),
            scan: Mutex::default(),
            busy: Mutex::new(()),
            hashed: Default::default(),
        }
    }

    /// Extensions whose integrity key lives in `~/.gemini/integrity.key` (never the keyring),
    /// with a store of their own: for benchmarks and tests outside the daemon.
    pub fn with_key_file(gemini_dir: PathBuf, data_dir: &Path, store: Store) -> Self {
        let secrets = Arc::new(SecretStore::file_only(data_dir));
        Self::new(gemini_dir, secrets, store, Arc::new(EventBus::new(16)))
    }

    /// How many times an extension's files have been hashed.
    pub fn hashed_count(&self) -> u64 {
        self.hashed.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The last scan.
    pub(crate) fn current(&self) -> Arc<Scan> {
        self.scan.lock().clone()
    }

    /// The integrity key (made on first need), which tool-definition pins are signed with too.
    pub(crate) fn integrity_key(&self) -> Result<Secret<String>, ExtensionError> {
        self.key()
    }

    fn key(&self) -> Result<Secret<String>, ExtensionError> {
        let mut held = self.key.lock();
        if let Some(k) = held.as_ref() {
            return Ok(k.clone());
        }
        let k = key::integrity_key(&self.secrets, &self.gemini_dir)
            .map_err(|e| ExtensionError::Integrity(e.to_string()))?;
        *held = Some(k.clone());
        Ok(k)
    }

    /// Scan the folder again (blocking: hashing may read many files); `force` hashes every
    /// extension whatever its fingerprint. Announces each extension newly found tampered.
    pub fn rescan(&self, force: bool) -> Arc<Scan> {
        let _busy = self.busy.lock();
        self.rescan_locked(force)
    }

    fn rescan_locked(&self, force: bool) -> Arc<Scan> {
        let before = self.current();
        let scan = Arc::new(self.read_all(force));
        for e in &scan.installed {
            let was = before.find(&e.name).map(|b| (b.integrity, b.changes.clone()));
            if e.integrity == IntegrityState::Tampered
                && was != Some((IntegrityState::Tampered, e.changes.clone()))
            {
                let changes = e.changes.clone().unwrap_or_default();
                tracing::warn!(extension = e.name, changed = ?changes.changed, added = ?changes.added, removed = ?changes.removed, "extension tampered with: not loaded");
                self.events.emit(geminid_protocol::event::EventBody::ExtensionTampered(
                    geminid_protocol::extensions::ExtensionTampered {
                        name: e.name.clone(),
                        changes: wire_changes(&changes),
                        message: e.why_not.clone().unwrap_or_default(),
                    },
                ));
            }
        }
        *self.scan.lock() = scan.clone();
        scan
    }

    fn read_all(&self, force: bool) -> Scan {
        let mut diagnostics = Vec::new();
        let enablement_path = self.root.join(enablement::FILE);
        let enablement = match read_object(&enablement_path) {
            FileRead::Parsed { value, .. } => Enablement::from_value(&value),
            FileRead::Missing => Enablement::default(),
            FileRead::Failed(mut d) => {
                d.message.push_str("; every extension counts as enabled until it is fixed");
                diagnostics.push(d);
                Enablement::default()
            }
        };
        let mut listed = true;
        let mut dirs: Vec<PathBuf> = match std::fs::read_dir(&self.root) {
            Ok(entries) => entries
                .filter_map(Result::ok)
                .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .collect(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => {
                listed = false;
                diagnostics.push(diagnostic(
                    Severity::Error,
                    &self.root,
                    None,
                    format!("cannot read the extensions folder: {e}"),
                ));
                Vec::new()
            }
        };
        dirs.sort();
        // The key (derived with scrypt where there is no keyring) while the files are hashed.
        let unlocked = self.key.lock().is_some();
        let mut installed = std::thread::scope(|scope| {
            if !unlocked && !dirs.is_empty() {
                scope.spawn(|| self.key().map(drop));
            }
            self.read_each(&dirs, force)
        });
        // Two folders with one name: neither is loaded, as Gemini CLI refuses to load both.
        let mut by_name: BTreeMap<String, Vec<usize>> = BTreeMap::new();
        for (i, e) in installed.iter().enumerate() {
            by_name.entry(e.name.to_lowercase()).or_default().push(i);
        }
        for indices in by_name.values().filter(|v| v.len() > 1) {
            let folders: Vec<String> =
                indices.iter().map(|&i| installed[i].dir.display().to_string()).collect();
            for &i in indices {
                installed[i].why_not = Some(format!(
                    "the name \"{}\" is used by more than one extension ({}): uninstall or rename \
                     all but one",
                    installed[i].name,
                    folders.join(", ")
                ));
            }
        }
        installed.sort_by(|a, b| a.name.cmp(&b.name).then(a.dir.cmp(&b.dir)));
        if listed {
            self.forget_departed(&installed);
        }
        Scan { installed: installed.into_iter().map(Arc::new).collect(), enablement, diagnostics }
    }

    /// Read every folder, spread over the machine's cores (hashing is most of a start's work).
    fn read_each(&self, dirs: &[PathBuf], force: bool) -> Vec<Installed> {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(8);
        if threads < 2 || dirs.len() < 2 {
            return dirs.iter().map(|d| self.read_one(d, force)).collect();
        }
        let chunk = dirs.len().div_ceil(threads);
        std::thread::scope(|scope| {
            let workers: Vec<_> = dirs
                .chunks(chunk)
                .map(|part| {
                    scope.spawn(move || {
                        part.iter().map(|d| self.read_one(d, force)).collect::<Vec<_>>()
                    })
                })
                .collect();
            workers.into_iter().flat_map(|w| w.join().unwrap_or_default()).collect()
        })
    }

    /// Read one extension's folder; again while its files are being written (for a while).
    fn read_one(&self, dir: &Path, force: bool) -> Installed {
        let started = std::time::Instant::now();
        loop {
            let (e, again) = self.read_once(dir, force, started.elapsed() < verify::SETTLE_MAX);
            if !again {
                return e;
            }
        }
    }

    fn read_once(&self, dir: &Path, force: bool, may_wait: bool) -> (Installed, bool) {
        let folder_name =
            dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let mut diagnostics = Vec::new();
        let metadata_path = dir.join(manifest::INSTALL_FILE);
        let metadata = match read_object(&metadata_path) {
            FileRead::Parsed { value, .. } => Some(value),
            FileRead::Missing => None,
            FileRead::Failed(d) => {
                diagnostics.push(d);
                None
            }
        };
        let linked =
            metadata.as_ref().and_then(|m| m.get("type")).and_then(Value::as_str) == Some("link");
        let path = match metadata.as_ref().and_then(|m| m.get("source")).and_then(Value::as_str) {
            Some(source) if linked => PathBuf::from(source),
            _ => dir.to_path_buf(),
        };
        let (manifest, why_not) = match manifest::read(&path) {
            Ok((m, warnings)) => {
                diagnostics.extend(warnings);
                (Some(m), None)
            }
            Err(errors) => {
                let first = errors.first().map(|d| d.message.clone()).unwrap_or_default();
                diagnostics.extend(errors);
                (None, Some(format!("its manifest cannot be used: {first}")))
            }
        };
        let hooks = read_hooks(&path, &mut diagnostics);
        let name = manifest.as_ref().map_or(folder_name, |m| m.name.clone());
        let mut e = Installed {
            name,
            dir: dir.to_path_buf(),
            path,
            metadata,
            manifest,
            hooks,
            integrity: IntegrityState::Linked,
            changes: None,
            why_not,
            diagnostics,
            secrets: BTreeMap::new(),
        };
        e.secrets = self.read_secrets(&e);
        if !linked {
            let version = e.manifest.as_ref().map(|m| m.version.clone());
            let meta = e.metadata.as_ref();
            let checked = self.verify(&e.name, version.as_deref(), dir, meta, force, may_wait);
            if checked.again {
                return (e, true);
            }
            e.integrity = checked.state;
            e.changes = checked.changes;
            if e.why_not.is_none() {
                e.why_not = checked.why;
            }
        }
        (e, false)
    }

    fn keychain(&self) -> settings::Keychain<'_> {
        settings::Keychain { secrets: &self.secrets, gemini_dir: &self.gemini_dir }
    }

    /// The values of `e`'s sensitive settings kept in Gemini CLI's keychain.
    fn read_secrets(&self, e: &Installed) -> BTreeMap<String, Secret<String>> {
        let Some(m) = &e.manifest else { return BTreeMap::new() };
        let sensitive: Vec<&str> =
            m.settings.iter().filter(|s| s.sensitive).map(|s| s.env_var.as_str()).collect();
        if sensitive.is_empty() {
            return BTreeMap::new();
        }
        let service = settings::keychain_service(
            &e.name,
            &settings::extension_id(&e.name, e.metadata.as_ref()),
        );
        let keychain = self.keychain();
        let mut out = BTreeMap::new();
        for var in sensitive {
            match keychain.get(&service, &format!("{}{var}", settings::SECRET_PREFIX)) {
                Ok(Some(v)) => {
                    out.insert(var.to_owned(), v);
                }
                Ok(None) => {}
                Err(why) => {
                    tracing::warn!(extension = e.name, setting = var, %why, "cannot read a sensitive setting");
                }
            }
        }
        out
    }

    /// Keep `values` of `m`'s settings for the extension installed at `dir` (plain ones in its
    /// `.env`, sensitive ones in the keychain).
    pub(super) fn store_settings(
        &self,
        m: &Manifest,
        dir: &Path,
        metadata: Option<&Value>,
        values: &BTreeMap<String, String>,
    ) -> Result<(), ExtensionError> {
        if values.is_empty() {
            return Ok(());
        }
        let sensitive = |k: &str| m.settings.iter().any(|s| s.env_var == k && s.sensitive);
        let plain: BTreeMap<String, String> = values
            .iter()
            .filter(|(k, _)| !sensitive(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if !plain.is_empty() {
            let text = settings::format_env(&plain)?;
            std::fs::write(dir.join(".env"), text).map_err(|e| {
                ExtensionError::Io(format!("cannot write {}: {e}", dir.join(".env").display()))
            })?;
        }
        let service =
            settings::keychain_service(&m.name, &settings::extension_id(&m.name, metadata));
        for (k, v) in values.iter().filter(|(k, _)| sensitive(k)) {
            let account = format!("{}{k}", settings::SECRET_PREFIX);
            self.keychain().set(&service, &account, &Secret::new(v.clone())).map_err(|why| {
                ExtensionError::Integrity(format!(
                    "cannot keep the setting {k} in the keychain: {why}"
                ))
            })?;
        }
        Ok(())
    }

    /// What a session sees of `e`: `enabled` for its workspace, `active` if also loaded.
    pub(crate) fn info(e: &Installed, enabled: bool) -> ExtensionInfo {
        let m = e.manifest.as_ref();
        let servers = m
            .and_then(|m| m.raw.get("mcpServers"))
            .and_then(Value::as_object)
            .map(|s| s.keys().cloned().collect())
            .unwrap_or_default();
        let context_files = m
            .map(|m| manifest::existing_context_files(&e.path, m))
            .unwrap_or_default()
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        let hooks = e
            .hooks
            .as_ref()
            .and_then(Value::as_object)
            .map(|events| {
                events
                    .values()
                    .filter_map(Value::as_array)
                    .flatten()
                    .filter_map(|d| d.get("hooks").and_then(Value::as_array))
                    .map(Vec::len)
                    .sum::<usize>()
            })
            .unwrap_or(0);
        let active = enabled && e.loadable();
        let why_inactive = if active {
            None
        } else if let Some(why) = &e.why_not {
            Some(why.clone())
        } else {
            Some(format!(
                "disabled for this workspace (`gemctl extensions enable {}` enables it)",
                e.name
            ))
        };
        ExtensionInfo {
            name: e.name.clone(),
            version: m.map(|m| m.version.clone()),
            description: m.and_then(|m| m.description.clone()),
            path: e.dir.display().to_string(),
            source: e
                .metadata
                .as_ref()
                .and_then(|v| v.get("source"))
                .and_then(Value::as_str)
                .map(str::to_owned),
            install_type: e.install_type().map(str::to_owned),
            enabled,
            active,
            integrity: e.integrity,
            changes: e.changes.as_ref().map(wire_changes),
            why_inactive,
            servers,
            context_files,
            exclude_tools: m.map(|m| m.exclude_tools.clone()).unwrap_or_default(),
            hooks: u32::try_from(hooks).unwrap_or(u32::MAX),
            skills: install::folder_entries(&e.path, "skills"),
            commands: install::command_names(&e.path.join("commands")),
            reference: e.metadata.as_ref().and_then(|v| v.get("ref")?.as_str().map(Into::into)),
            diagnostics: e.diagnostics.clone(),
        }
    }

    /// Every directory whose entries can change an extension: the folder, each extension's
    /// folders (and a linked one's source), so the watcher sees an edit anywhere in them.
    pub(crate) fn watched_dirs(&self) -> Vec<PathBuf> {
        let mut dirs = vec![self.root.clone()];
        for e in &self.current().installed {
            dirs.push(e.dir.clone());
            let mut pending = vec![e.path.clone()];
            while let Some(d) = pending.pop() {
                if dirs.len() > 4096 {
                    break;
                }
                let Ok(entries) = std::fs::read_dir(&d) else { continue };
                for entry in entries.filter_map(Result::ok) {
                    if entry.file_type().is_ok_and(|t| t.is_dir()) {
                        pending.push(entry.path());
                    }
                }
                dirs.push(d);
            }
        }
        dirs
    }
}

/// `hooks/hooks.json`'s `hooks` object, if the extension has one.
fn read_hooks(path: &Path, diagnostics: &mut Vec<Diagnostic>) -> Option<Value> {
    let file = path.join("hooks").join("hooks.json");
    match read_object(&file) {
        FileRead::Missing => None,
        FileRead::Failed(d) => {
            diagnostics.push(d);
            None
        }
        FileRead::Parsed { value, .. } => match value.get("hooks") {
            Some(h @ Value::Object(_)) => Some(h.clone()),
            _ => {
                diagnostics.push(diagnostic(
                    Severity::Warning,
                    &file,
                    None,
                    "\"hooks\" must be an object; its hooks are ignored".into(),
                ));
                None
            }
        },
    }
}

fn wire_changes(c: &files::Changes) -> FileChanges {
    FileChanges { changed: c.changed.clone(), added: c.added.clone(), removed: c.removed.clone() }
}

#[cfg(test)]
mod tests;
