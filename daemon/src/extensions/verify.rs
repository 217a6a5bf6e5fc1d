//! Checking an installed extension's files, at every scan: Gemini CLI's record of its install
//! metadata (`extension_integrity.json`) and geminid's signed record of every file
//! ([`files::Record`], in the store). An extension seen for the first time (installed by Gemini
//! CLI) is recorded then; from then on any change to any file keeps it from loading until the
//! person accepts it or reinstalls, unless its signed install metadata names a source that
//! gives exactly those files now (Gemini CLI's `extensions update` of a local or git install).
//! Files are hashed again only when their fingerprint moved.

use std::path::Path;

use geminid_protocol::extensions::IntegrityState;
use serde_json::Value;

use super::files::{self, Changes, Fingerprint, Record};
use super::integrity::{ReferenceStore, Status, StoreError};
use super::{ExtensionError, Extensions};
use crate::secrets::Secret;

/// How long an extension's changed files must have been left alone to be judged.
const SETTLE: std::time::Duration = std::time::Duration::from_millis(250);
/// The longest a scan waits for them (a copy still going on then is judged as it is; its
/// later writes bring another scan).
pub(super) const SETTLE_MAX: std::time::Duration = std::time::Duration::from_secs(3);

/// How many scans found a copy under way and began waiting for it to settle: what a test
/// waits on to land the rest of a copy in the middle of such a wait.
#[cfg(test)]
pub(super) static SETTLING: (parking_lot::Mutex<u64>, parking_lot::Condvar) =
    (parking_lot::Mutex::new(0), parking_lot::Condvar::new());

/// What one check found.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Checked {
    /// The folder checked and its fingerprint then.
    at: (std::path::PathBuf, Fingerprint),
    pub state: IntegrityState,
    pub changes: Option<Changes>,
    /// Why it may not load.
    pub why: Option<String>,
    /// Its files were being written: the folder is to be read again.
    pub again: bool,
}

impl Checked {
    fn verified(at: (std::path::PathBuf, Fingerprint)) -> Self {
        Self { at, state: IntegrityState::Verified, changes: None, why: None, again: false }
    }

    fn bad(state: IntegrityState, why: String) -> Self {
        Self { at: Default::default(), state, changes: None, why: Some(why), again: false }
    }
}

impl Extensions {
    /// Check `name`'s files in `dir`; `force` hashes them whatever their fingerprint.
    pub(super) fn verify(
        &self,
        name: &str,
        version: Option<&str>,
        dir: &Path,
        metadata: Option<&Value>,
        force: bool,
        may_wait: bool,
    ) -> Checked {
        // The files first, the key after: on a machine without a keyring the key is derived
        // (scrypt) while the files are hashed (`Extensions::read_all` starts it).
        let listing = match files::list(dir) {
            Ok(l) => l,
            Err(e) => return Checked::bad(IntegrityState::Unverifiable, e.to_string()),
        };
        let at = (dir.to_path_buf(), listing.fingerprint());
        let cached = self.checked.lock().get(name).cloned();
        let cached = cached.filter(|c| !force && c.at == at);
        let hashes = match &cached {
            Some(_) => None,
            None => {
                self.hashed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                match files::hash_listed(&listing) {
                    Ok(h) => Some(h),
                    Err(e) => return Checked::bad(IntegrityState::Unverifiable, e.to_string()),
                }
            }
        };
        let record = || {
            self.store
                .extension_record(name)
                .and_then(|b| serde_json::from_slice::<Record>(&b).ok())
        };
        // Files that differ from their record, written a moment ago: a copy may be under way
        // (Gemini CLI's update writes file after file). They are judged once left alone, the
        // folder read again then (its manifest and install metadata too). A first sight is
        // recorded at once: the rest of a copy is then an update from its source.
        let differs = hashes
            .as_ref()
            .and_then(|h| record().map(|r| !files::compare(&r.files, h).is_empty()))
            .unwrap_or(false);
        if may_wait && differs && listing.quiet_for().is_some_and(|q| q < SETTLE) {
            #[cfg(test)]
            {
                *SETTLING.0.lock() += 1;
                SETTLING.1.notify_all();
            }
            std::thread::sleep(SETTLE);
            return Checked {
                again: true,
                ..Checked::bad(IntegrityState::Unverifiable, String::new())
            };
        }
        let key = match if metadata.is_some() { self.key_for_store() } else { self.key() } {
            Ok(k) => k,
            Err(e) => return Checked::bad(IntegrityState::Unverifiable, e.to_string()),
        };
        // Gemini CLI's store lives outside the folder: checked at every scan.
        let signed_metadata = match metadata.map(|m| self.check_metadata(name, m, &key)) {
            Some(Err(bad)) => return *bad,
            Some(Ok(signed)) => signed,
            None => None,
        };
        // Not hashed: unchanged since the last check, whose result stands.
        let Some(hashes) = hashes else {
            return cached
                .unwrap_or_else(|| Checked::bad(IntegrityState::Unverifiable, String::new()));
        };
        // Read after the key: taking the keychain's key signs the records again.
        let result = match record() {
            None => {
                // First sight (installed by Gemini CLI, or before geminid kept records).
                return self.first_sight(name, version, hashes, &key, at);
            }
            Some(r) if !r.is_signed(name, &key) => Checked {
                at,
                state: IntegrityState::Tampered,
                changes: None,
                again: false,
                why: Some(format!(
                    "geminid's integrity record of it is not signed with the current integrity \
                     key (the key was reset, or the record altered): check its files, then \
                     `gemctl extensions accept {name}`"
                )),
            },
            Some(r) => {
                let changes = files::compare(&r.files, &hashes);
                // The source folder is hashed only when the installed files changed.
                let source = || signed_metadata.and_then(|m| from_its_source(m, &hashes));
                if changes.is_empty() {
                    Checked::verified(at)
                } else if let Some(source) = source() {
                    // Gemini CLI's `extensions update` of a local or git install: legitimate.
                    let r = Record::new(name, version, hashes, &key);
                    if let Err(e) = self.put_record(name, &r) {
                        return Checked::bad(IntegrityState::Unverifiable, e.to_string());
                    }
                    tracing::info!(
                        extension = name,
                        source,
                        version,
                        changed = %changes.describe(),
                        "extension updated from its recorded source: its files are recorded"
                    );
                    Checked::verified(at)
                } else {
                    let why = changed_outside(name, r.version.as_deref(), version, &changes);
                    Checked {
                        at,
                        state: IntegrityState::Tampered,
                        again: false,
                        changes: Some(changes),
                        why: Some(why),
                    }
                }
            }
        };
        self.remember(name, &result);
        result
    }

    /// A first sight of `name`: its files recorded, signed with `key`.
    fn first_sight(
        &self,
        name: &str,
        version: Option<&str>,
        hashes: super::files::Hashes,
        key: &Secret<String>,
        at: (std::path::PathBuf, Fingerprint),
    ) -> Checked {
        let r = Record::new(name, version, hashes, key);
        if let Err(e) = self.put_record(name, &r) {
            return Checked::bad(IntegrityState::Unverifiable, e.to_string());
        }
        tracing::info!(
            extension = name,
            files = r.files.len(),
            "extension seen for the first time: its files are recorded"
        );
        let verified = Checked::verified(at);
        self.remember(name, &verified);
        Checked { state: IntegrityState::Recorded, ..verified }
    }

    /// `name`'s install metadata against Gemini CLI's store: the metadata when the store signs
    /// it, `None` when it has no record of it, or why the extension may not load.
    fn check_metadata<'m>(
        &self,
        name: &str,
        meta: &'m Value,
        key: &Secret<String>,
    ) -> Result<Option<&'m Value>, Box<Checked>> {
        let reference = ReferenceStore::new(&self.gemini_dir, key.clone());
        if let Err(e) = reference.load() {
            return Err(Box::new(Checked::bad(IntegrityState::Tampered, e.to_string())));
        }
        let status = reference.verify(name, Some(meta));
        if status == Status::Invalid {
            return Err(Box::new(Checked::bad(
                IntegrityState::Tampered,
                format!(
                    "its install metadata ({}) does not match its integrity record: \
                     reinstall it, or `gemctl extensions accept {name}` if the change was yours",
                    super::manifest::INSTALL_FILE
                ),
            )));
        }
        Ok((status == Status::Verified).then_some(meta))
    }

    /// The key to use with Gemini CLI's store: the one held, unless it cannot verify the
    /// store and the keychain now holds another (`rekey.rs`).
    fn key_for_store(&self) -> Result<Secret<String>, ExtensionError> {
        let key = self.key()?;
        let store = ReferenceStore::new(&self.gemini_dir, key.clone());
        if matches!(store.load(), Err(StoreError::Unverified(_))) && self.adopt_keychain_key() {
            return self.key();
        }
        Ok(key)
    }

    fn remember(&self, name: &str, c: &Checked) {
        self.checked.lock().insert(name.to_owned(), c.clone());
    }

    pub(super) fn put_record(&self, name: &str, r: &Record) -> Result<(), ExtensionError> {
        let bytes = serde_json::to_vec(r).map_err(|e| ExtensionError::Io(e.to_string()))?;
        self.store.put_extension_record(name, &bytes).map_err(|e| {
            ExtensionError::Integrity(format!("cannot keep the integrity record of {name}: {e}"))
        })
    }

    /// Record `name`'s files in `dir` as they are now, and its install metadata in Gemini
    /// CLI's store (install, update, accept).
    pub(super) fn sign(
        &self,
        name: &str,
        dir: &Path,
        metadata: Option<&Value>,
    ) -> Result<(), ExtensionError> {
        let key = if metadata.is_some() { self.key_for_store()? } else { self.key()? };
        let hashes = files::hash_all(dir).map_err(|e| ExtensionError::Io(e.to_string()))?;
        if let Some(meta) = metadata {
            ReferenceStore::new(&self.gemini_dir, key.clone())
                .record(name, meta)
                .map_err(|e| ExtensionError::Integrity(e.to_string()))?;
        }
        let version = super::manifest::read(dir).ok().map(|(m, _)| m.version);
        self.put_record(name, &Record::new(name, version.as_deref(), hashes, &key))?;
        self.checked.lock().remove(name);
        Ok(())
    }

    /// Forget geminid's records of extensions that are gone (Gemini CLI's uninstall leaves
    /// them behind): a later install under the name is then a first sight, not a mismatch with
    /// the departed one's files (an update by either tool would be refused). Only after a scan
    /// that named every folder by its manifest: a folder whose manifest cannot be read could be
    /// a recorded one, renamed.
    pub(super) fn forget_departed(&self, installed: &[super::Installed]) {
        if installed.iter().any(|e| e.manifest.is_none()) {
            return;
        }
        let present: std::collections::HashSet<&str> =
            installed.iter().map(|e| e.name.as_str()).collect();
        for name in self.store.extension_names() {
            if present.contains(name.as_str()) {
                continue;
            }
            self.checked.lock().remove(&name);
            match self.store.delete_extension_record(&name) {
                Ok(()) => tracing::info!(
                    extension = name,
                    "extension gone (uninstalled outside geminid): its integrity record is forgotten"
                ),
                Err(e) => {
                    tracing::warn!(extension = name, error = %e, "its integrity record stays")
                }
            }
        }
    }

    /// Forget `name`'s records (uninstall). Gemini CLI's store is left alone when it cannot be
    /// verified (its message says how to reset it).
    pub(super) fn unsign(&self, name: &str) -> Result<(), ExtensionError> {
        self.checked.lock().remove(name);
        self.store
            .delete_extension_record(name)
            .map_err(|e| ExtensionError::Integrity(e.to_string()))?;
        let key = self.key()?;
        if let Err(e) = ReferenceStore::new(&self.gemini_dir, key).forget(name) {
            tracing::warn!(extension = name, error = %e, "its record in Gemini CLI's integrity store stays");
        }
        Ok(())
    }
}

/// The source an extension's files were updated from, when that is its recorded install
/// source (named in install metadata that Gemini CLI's store signs): what Gemini CLI's
/// `extensions update` does. All a third party could do the same way is install what the
/// source's owner could have the next update install anyway.
fn from_its_source(metadata: &Value, installed: &files::Hashes) -> Option<String> {
    match metadata.get("type")?.as_str()? {
        "local" => from_its_folder(metadata, installed),
        "git" => from_its_repository(metadata, installed),
        _ => None,
    }
}

/// A `local` install whose source folder now holds exactly the installed files.
fn from_its_folder(metadata: &Value, installed: &files::Hashes) -> Option<String> {
    let source = Path::new(metadata.get("source")?.as_str()?);
    let theirs = files::hash_all(source).ok()?;
    let mut ours = installed.clone();
    ours.remove(super::manifest::INSTALL_FILE);
    (!theirs.is_empty() && theirs == ours).then(|| source.display().to_string())
}

/// How long each git step of cloning a repository to compare may take (a scan waits for it).
const COMPARE_CLONE_STEP: std::time::Duration = std::time::Duration::from_secs(20);

/// Files of `.git` each clone writes its own way (packs, index, logs, refs): git runs none of
/// them, and geminid reads none; the commit checked out is `HEAD`, which is compared, as are
/// `config`, `hooks/` and every other file.
fn per_clone(path: &str) -> bool {
    const DIRS: &[&str] = &[".git/objects/", ".git/logs/", ".git/refs/"];
    const FILES: &[&str] =
        &[".git/index", ".git/FETCH_HEAD", ".git/ORIG_HEAD", ".git/packed-refs", ".git/shallow"];
    DIRS.iter().any(|d| path.starts_with(d)) || FILES.contains(&path)
}

/// A `git` install whose repository, cloned again at its recorded ref the way Gemini CLI clones
/// it, gives exactly the installed files and commit: Gemini CLI's update copies its clone in
/// whole, `.git` included. Where Gemini CLI put a GitHub token in the remote's URL,
/// `.git/config` differs, and such an update stays "changed outside geminid".
fn from_its_repository(metadata: &Value, installed: &files::Hashes) -> Option<String> {
    let url = metadata.get("source")?.as_str()?;
    let reference = metadata.get("ref").and_then(Value::as_str);
    let tmp = tempfile::tempdir().ok()?;
    let into = tmp.path().join("clone");
    if let Err(e) = super::fetch::clone_as_gemini_cli(url, reference, &into, COMPARE_CLONE_STEP) {
        tracing::info!(source = url, error = %e, "an extension's repository cannot be cloned to compare with its changed files");
        return None;
    }
    let theirs = files::hash_all(&into).ok()?;
    let kept = |h: &files::Hashes| -> Vec<(String, String)> {
        h.iter()
            .filter(|(p, _)| !per_clone(p) && p.as_str() != super::manifest::INSTALL_FILE)
            .map(|(p, h)| (p.clone(), h.clone()))
            .collect()
    };
    let (ours, theirs) = (kept(installed), kept(&theirs));
    if ours.iter().any(|(p, _)| p == ".git/HEAD") && theirs == ours {
        return Some(url.to_owned());
    }
    let differ: Vec<&str> = ours
        .iter()
        .chain(&theirs)
        .filter(|item| !(ours.contains(item) && theirs.contains(item)))
        .map(|(p, _)| p.as_str())
        .collect();
    tracing::info!(source = url, differ = ?differ, "an extension's repository cloned again does not give its changed files");
    None
}

/// Why files that differ from their record keep `name` from loading: a version changed
/// outside geminid, or files changed.
fn changed_outside(
    name: &str,
    recorded: Option<&str>,
    version: Option<&str>,
    changes: &Changes,
) -> String {
    match (recorded, version) {
        (Some(was), Some(now)) if was != now => format!(
            "it was changed outside geminid, from version {was} to {now} (an \
             update by Gemini CLI?): check it ({}), then `gemctl extensions accept \
             {name}`, or reinstall it",
            changes.describe()
        ),
        _ => format!(
            "its files do not match their integrity record ({}): reinstall it, or \
             `gemctl extensions accept {name}` if the change was yours",
            changes.describe()
        ),
    }
}
