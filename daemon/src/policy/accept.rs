//! A trusted workspace's policy files (`<workspace>/.gemini/policies/*.toml`) are loaded only
//! once the user accepted them, exactly as they are: a cloned repository's policy file must
//! not allow, silently, what Gemini CLI refuses (issue 68, B). Gemini CLI 0.61 has the same
//! design written and switched off (`PolicyIntegrityManager`: a SHA-256 of the folder's
//! files, each name, NUL, text, NUL, kept per workspace, asked about when new or changed);
//! geminid's is on, and its record is signed with HMAC-SHA256 under the extension integrity
//! key, as the pins are, so that an edited or damaged record loads nothing. Its digest is not
//! Gemini CLI's form, which is ambiguous (a file's text may hold `NUL b.toml NUL …`, and two
//! files then digest as one): each name is length-prefixed and each text hashed on its own,
//! and the record's list of files and their hashes must match too (issue 68, F3). A record of
//! the earlier form reads as not accepted ("accept again").
//!
//! Nothing of an unaccepted folder is loaded, its deny rules neither: what is loaded is then
//! always exactly what the user read in `gemctl policy review`. A file added, changed or
//! removed after the acceptance makes the whole folder unaccepted again. A file that is a
//! link resolving out of the folder, or the folder itself a link out of the workspace, is
//! never read.

use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use geminid_protocol::common::{Diagnostic, Severity};
use geminid_protocol::policy::{WorkspacePolicyFile, WorkspacePolicyState as State};
use hmac::{KeyInit, Mac};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::config::files::{InputError, read_input};
use crate::secrets::Secret;
use crate::store::Store;

/// Where the integrity key comes from (the extensions' key, shared with the pins).
pub(crate) type KeySource = Arc<dyn Fn() -> Result<Secret<String>, String> + Send + Sync>;

/// Version of [`Record`] as written by this build.
const RECORD_VERSION: u32 = 2;

/// The command that says what a folder would add, and the one that loads it.
pub(crate) const REVIEW: &str =
    "`gemctl policy review` shows what they would add; `gemctl policy accept` loads them";

/// A workspace's policy folder as read now.
#[derive(Debug, Default)]
pub(crate) struct Snapshot {
    /// The folder.
    pub folder: PathBuf,
    /// Each `*.toml` file read: its name, path and text, by name.
    pub files: Vec<(String, PathBuf, String)>,
    /// Files not read (a link out of the folder, a file that cannot be read).
    pub refused: Vec<Diagnostic>,
    /// SHA-256 (hex) over a header, then each file's name length (8 bytes, big-endian), name
    /// and the SHA-256 of its text ([`folder_digest`]).
    pub digest: String,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn sha256(text: &str) -> String {
    hex(&Sha256::digest(text.as_bytes()))
}

/// Read `workspace`'s policy folder: its `*.toml` files (not recursively), each read once.
pub(crate) fn snapshot(workspace: &Path) -> Snapshot {
    let folder = workspace.join(".gemini").join("policies");
    let mut out = Snapshot { folder: folder.clone(), ..Snapshot::default() };
    let real_folder = match (folder.canonicalize(), workspace.canonicalize()) {
        (Ok(f), Ok(w)) if f.starts_with(&w) => Some(f),
        (Ok(f), _) => {
            out.refused.push(Diagnostic::error(
                &folder,
                format!(
                    "it leads out of the workspace (to {}), so the workspace's policies are not read",
                    f.display()
                ),
            ));
            None
        }
        _ => None,
    };
    let mut names: Vec<(String, PathBuf)> = real_folder
        .as_ref()
        .and_then(|_| std::fs::read_dir(&folder).ok())
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
        .filter(|(n, _)| n.ends_with(".toml"))
        .collect();
    names.sort();
    for (name, path) in names {
        let inside = path
            .canonicalize()
            .ok()
            .zip(real_folder.as_ref())
            .is_some_and(|(p, f)| p.starts_with(f));
        if !inside {
            out.refused.push(Diagnostic::error(
                &path,
                "it is a link that leads out of the workspace's policy folder: it is never read"
                    .to_owned(),
            ));
            continue;
        }
        let text = match read_input(&path) {
            Ok(Some(t)) => t,
            Ok(None) => continue,
            Err(InputError::Refused(why) | InputError::Changing(why)) => {
                out.refused.push(Diagnostic::error(&path, why));
                continue;
            }
            Err(InputError::Io(e)) => {
                out.refused.push(Diagnostic::error(&path, format!("it cannot be read: {e}")));
                continue;
            }
        };
        out.files.push((name, path, text));
    }
    out.digest = folder_digest(out.files.iter().map(|(n, _, t)| (n.as_str(), t.as_str())));
    out
}

/// The digest of a folder's files (name, text), in name order: unambiguous, as each name is
/// length-prefixed and each text stands for its fixed-length hash.
pub(crate) fn folder_digest<'a>(files: impl Iterator<Item = (&'a str, &'a str)>) -> String {
    let mut hash = Sha256::new();
    hash.update(b"geminid workspace policy folder 2\0");
    for (name, text) in files {
        hash.update((name.len() as u64).to_be_bytes());
        hash.update(name.as_bytes());
        hash.update(Sha256::digest(text.as_bytes()));
    }
    hex(&hash.finalize())
}

/// One workspace's acceptance, as kept.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Record {
    v: u32,
    workspace: String,
    digest: String,
    /// Each file's SHA-256, by name: to say which changed.
    files: BTreeMap<String, String>,
    accepted_ms: u64,
    #[serde(default)]
    mac: String,
}

impl Record {
    fn signed_text(&self) -> String {
        let files: Vec<String> = self.files.iter().map(|(n, h)| format!("{n}\0{h}")).collect();
        format!(
            "geminid workspace policy acceptance\0{}\0{}\0{}\0{}\0{}",
            self.v,
            self.workspace,
            self.digest,
            self.accepted_ms,
            files.join("\0")
        )
    }
}

#[derive(Debug, Clone)]
enum Loaded {
    None,
    Verified(Arc<Record>),
    Unverified(String),
}

/// Where a folder stands, and why, in words.
#[derive(Debug, Clone)]
pub(crate) struct Standing {
    pub state: State,
    pub reason: String,
    pub files: Vec<WorkspacePolicyFile>,
}

impl Standing {
    /// Its files may be loaded.
    pub(crate) fn loads(&self) -> bool {
        self.state == State::Accepted
    }
}

/// The acceptances of every workspace, over the daemon's store.
pub(crate) struct Acceptances {
    store: Store,
    key: KeySource,
    loaded: Mutex<HashMap<String, Loaded>>,
}

impl std::fmt::Debug for Acceptances {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Acceptances").finish_non_exhaustive()
    }
}

impl Acceptances {
    /// Acceptances in `store`, signed with the key `key` gives.
    pub(crate) fn new(store: Store, key: KeySource) -> Self {
        Self { store, key, loaded: Mutex::default() }
    }

    fn mac(&self, record: &Record) -> Result<String, String> {
        let key = (self.key)()?;
        let mut mac = hmac::Hmac::<Sha256>::new_from_slice(key.expose().as_bytes())
            .map_err(|e| e.to_string())?;
        mac.update(record.signed_text().as_bytes());
        Ok(hex(&mac.finalize().into_bytes()))
    }

    fn load(&self, workspace: &str) -> Loaded {
        if let Some(l) = self.loaded.lock().get(workspace) {
            return l.clone();
        }
        let loaded = match self.store.policy_accepted_record(workspace) {
            Ok(None) => Loaded::None,
            Err(e) => return Loaded::Unverified(format!("it cannot be read: {e}")),
            Ok(Some(bytes)) => match serde_json::from_slice::<Record>(&bytes) {
                Err(e) => Loaded::Unverified(format!("it is not a valid record: {e}")),
                Ok(r) if r.v > RECORD_VERSION => {
                    Loaded::Unverified(format!("it is of a newer geminid (version {})", r.v))
                }
                Ok(r) if r.workspace != workspace => {
                    Loaded::Unverified("it is another workspace's".to_owned())
                }
                Ok(r) => match self.mac(&r) {
                    Err(e) => return Loaded::Unverified(format!("no integrity key: {e}")),
                    Ok(mac) if same(&mac, &r.mac) => Loaded::Verified(Arc::new(r)),
                    Ok(_) => Loaded::Unverified(
                        "it does not verify under the integrity key: edited, damaged, or the \
                         key changed"
                            .to_owned(),
                    ),
                },
            },
        };
        self.loaded.lock().insert(workspace.to_owned(), loaded.clone());
        loaded
    }

    /// Where `snap`, `workspace`'s folder as read now, stands against its acceptance.
    pub(crate) fn standing(&self, workspace: &str, snap: &Snapshot) -> Standing {
        let file = |name: &str, change: &str| WorkspacePolicyFile {
            name: name.to_owned(),
            change: change.to_owned(),
        };
        let loaded = self.load(workspace);
        if snap.files.is_empty() && !matches!(loaded, Loaded::Verified(_)) {
            return Standing {
                state: State::None,
                reason: "no policy files".to_owned(),
                files: vec![],
            };
        }
        let (state, reason, files) = match loaded {
            Loaded::None => (
                State::New,
                "they were never accepted".to_owned(),
                snap.files.iter().map(|(n, ..)| file(n, "new")).collect(),
            ),
            Loaded::Unverified(why) => (
                State::Unverified,
                format!(
                    "the record of their acceptance is damaged (accept again): it fails its \
                     check ({why})"
                ),
                snap.files.iter().map(|(n, ..)| file(n, "new")).collect(),
            ),
            Loaded::Verified(r) => {
                let mut files: Vec<WorkspacePolicyFile> = snap
                    .files
                    .iter()
                    .map(|(n, _, text)| match r.files.get(n) {
                        Some(h) if *h == sha256(text) => file(n, "same"),
                        Some(_) => file(n, "changed"),
                        None => file(n, "new"),
                    })
                    .collect();
                let now: Vec<&str> = snap.files.iter().map(|(n, ..)| n.as_str()).collect();
                files.extend(
                    r.files
                        .keys()
                        .filter(|n| !now.contains(&n.as_str()))
                        .map(|n| file(n, "removed")),
                );
                let same_files =
                    r.files.len() == snap.files.len() && files.iter().all(|f| f.change == "same");
                if r.v < RECORD_VERSION && !snap.files.is_empty() {
                    (
                        State::Changed,
                        "they were accepted by an earlier geminid, whose record of it is no \
                         longer trusted (accept again)"
                            .to_owned(),
                        files,
                    )
                } else if r.digest == snap.digest && same_files {
                    let at = crate::clock::rfc3339(r.accepted_ms);
                    (State::Accepted, format!("accepted at {at}"), files)
                } else if snap.files.is_empty() {
                    (State::None, "no policy files (those accepted were removed)".to_owned(), files)
                } else {
                    let changed: Vec<String> = files
                        .iter()
                        .filter(|f| f.change != "same")
                        .map(|f| format!("{} {}", f.name, f.change))
                        .collect();
                    (
                        State::Changed,
                        format!("they changed since accepted ({})", changed.join(", ")),
                        files,
                    )
                }
            }
        };
        Standing { state, reason, files }
    }

    /// Accept `snap` as `workspace`'s folder.
    pub(crate) fn accept(&self, workspace: &str, snap: &Snapshot) -> Result<(), String> {
        let mut record = Record {
            v: RECORD_VERSION,
            workspace: workspace.to_owned(),
            digest: snap.digest.clone(),
            files: snap.files.iter().map(|(n, _, t)| (n.clone(), sha256(t))).collect(),
            accepted_ms: crate::clock::now_ms(),
            mac: String::new(),
        };
        record.mac = self.mac(&record)?;
        let bytes = serde_json::to_vec(&record).map_err(|e| e.to_string())?;
        self.store.put_policy_accepted_record(workspace, &bytes).map_err(|e| e.to_string())?;
        self.loaded.lock().insert(workspace.to_owned(), Loaded::Verified(Arc::new(record)));
        Ok(())
    }

    /// Forget what was read of the records (the store was written by another hand).
    #[cfg(test)]
    pub(crate) fn forget(&self) {
        self.loaded.lock().clear();
    }
}

/// Equal, in a time that does not depend on where they differ.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The warning a folder not loaded gives, on the folder.
pub(crate) fn not_loaded(snap: &Snapshot, standing: &Standing) -> Diagnostic {
    Diagnostic {
        severity: Severity::Warning,
        file: snap.folder.display().to_string(),
        line: None,
        column: None,
        message: format!(
            "the workspace's policy files are not loaded: {}; {REVIEW}",
            standing.reason
        ),
    }
}

#[cfg(test)]
mod tests;
