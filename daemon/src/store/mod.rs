//! The sled database: sessions now, server runtime records and approvals later.
//!
//! Every value is a versioned JSON record (`{"v": N, ...}`) so that a newer daemon can read what
//! an older one wrote, and an older one refuses clearly instead of misreading. Writes that a
//! client is told about are flushed before the reply, so a SIGKILL right after loses nothing
//! acknowledged. The environment a client sends is never stored here (it holds secrets).

mod audit;
mod extensions;
mod flush;
mod last_good;
mod lock;
mod marks;
mod pins;
mod recover;
pub(crate) mod tasks;

pub(crate) use last_good::LastGood;
pub(crate) use lock::lock_dir;
use lock::{lock_waited, owner_only};

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use geminid_protocol::common::SessionId;
use geminid_protocol::session::{Declares, SessionState};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// Version of the database layout; stored under `meta/schema`.
pub(crate) const SCHEMA_VERSION: u32 = 1;
/// Version of [`SessionRecord`] as written by this build.
pub(crate) const SESSION_RECORD_VERSION: u32 = 1;
/// sled's page cache; the database is small, and the daemon's idle memory matters more.
const CACHE_CAPACITY_BYTES: u64 = 4 * 1024 * 1024;

const SESSION_PREFIX: &[u8] = b"s/";
const DEFAULT_PREFIX: &[u8] = b"d/";

/// Storage errors.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// sled failed.
    #[error("{}", sled_message(path, source))]
    Sled {
        /// The database directory.
        path: PathBuf,
        /// What sled said.
        #[source]
        source: sled::Error,
    },
    /// A record could not be decoded.
    #[error("corrupt record {key:?}: {reason}")]
    Corrupt {
        /// Its key.
        key: String,
        /// Why.
        reason: String,
    },
    /// The database was written by a newer geminid.
    #[error(
        "the database at {path} has schema version {found}, newer than this geminid understands \
         ({SCHEMA_VERSION}); upgrade geminid or use another --data-dir"
    )]
    NewerSchema {
        /// The database directory.
        path: PathBuf,
        /// The version found.
        found: u32,
    },
    /// Another daemon has the database open.
    #[error(
        "the database in {} is in use by another geminid ({holder}); give this one a database \
         of its own with --data-dir DIR (or GEMINID_DATA_DIR)",
        path.display()
    )]
    InUse {
        /// The database directory.
        path: PathBuf,
        /// Who holds it, as its lock file says (`pid N, socket S`).
        holder: String,
    },
    /// The manifest (how many sessions the database holds) could not be written.
    #[error("cannot write the database manifest in {}: {source}", path.display())]
    Manifest {
        /// The database directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The damaged database could not be moved aside.
    #[error(
        "the database in {} is damaged ({what}) and could not be moved aside: {source}; move \
         it away by hand, or use another --data-dir",
        path.display()
    )]
    Damaged {
        /// The database directory.
        path: PathBuf,
        /// What is wrong with it.
        what: String,
        /// Why it could not be moved.
        #[source]
        source: std::io::Error,
    },
    /// The database's lock file could not be used.
    #[error("cannot lock the database in {}: {source}", path.display())]
    Lock {
        /// The database directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

fn sled_message(path: &Path, source: &sled::Error) -> String {
    match source {
        sled::Error::Io(io) if io.kind() == std::io::ErrorKind::StorageFull => format!(
            "the disk holding the database ({}) is full, so this was not saved; free some space \
             and try again (no restart needed)",
            path.display()
        ),
        other => format!("database error at {}: {other}", path.display()),
    }
}

/// A session as persisted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SessionRecord {
    /// Its id.
    pub id: SessionId,
    /// Canonical workspace path.
    pub workspace: String,
    /// Whether it is the workspace's default session.
    pub is_default: bool,
    /// Creation time, Unix ms.
    pub created_ms: u64,
    /// Last create/attach/detach, Unix ms.
    pub last_seen_ms: u64,
    /// Session-scoped state.
    #[serde(default)]
    pub state: SessionState,
}

#[derive(Serialize)]
struct Versioned<'a, T> {
    v: u32,
    #[serde(flatten)]
    record: &'a T,
}

#[derive(Deserialize)]
struct VersionOnly {
    v: u32,
}

/// Version of [`ChildRecord`].
pub(crate) const CHILD_RECORD_VERSION: u32 = 1;

/// A stdio server process the daemon started, so that a daemon killed before it could stop it
/// finds it on its next start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ChildRecord {
    /// Its pid, which is also its process group id.
    pub pid: u32,
    /// Its start time (`/proc/PID/stat`), to tell it apart from a later process with that pid.
    pub start_time: Option<u64>,
    /// The command, for logs.
    pub command: String,
    /// The server's name, for logs.
    pub server: String,
    /// The daemon that started it.
    pub daemon_pid: u32,
    /// The identity of the server it runs: a server of that identity starts only once this
    /// one is gone. Absent in records of older daemons (then every start waits).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<String>,
}

/// The open sled handles.
#[derive(Debug)]
struct Open {
    db: sled::Db,
    sessions: sled::Tree,
    children: sled::Tree,
    audit: sled::Tree,
}

impl Open {
    fn new(config: &sled::Config, path: &Path) -> Result<Self, StoreError> {
        let sled_err = |source| StoreError::Sled { path: path.to_path_buf(), source };
        let db = config.open().map_err(sled_err)?;
        let meta = db.open_tree("meta").map_err(sled_err)?;
        match meta.get("schema").map_err(sled_err)? {
            Some(v) => {
                let found = decode_u32(&v).ok_or_else(|| StoreError::Corrupt {
                    key: "meta/schema".into(),
                    reason: "not a 4-byte version".into(),
                })?;
                if found > SCHEMA_VERSION {
                    return Err(StoreError::NewerSchema { path: path.to_path_buf(), found });
                }
            }
            None => {
                meta.insert("schema", &SCHEMA_VERSION.to_be_bytes()).map_err(sled_err)?;
            }
        }
        let sessions = db.open_tree("sessions").map_err(sled_err)?;
        let children = db.open_tree("children").map_err(sled_err)?;
        let audit = db.open_tree("audit").map_err(sled_err)?;
        Ok(Self { db, sessions, children, audit })
    }
}

#[derive(Debug)]
struct Shared {
    path: PathBuf,
    config: sled::Config,
    /// Whether `path` is a directory on disk (not a temporary database).
    on_disk: bool,
    /// `None` only while a reopen failed; the next use tries again.
    open: parking_lot::RwLock<Option<Arc<Open>>>,
    /// Set when sled failed on I/O (a full disk): sled keeps failing after that until it is
    /// opened again, so the next use reopens it.
    broken: AtomicBool,
    /// Session records: what the manifest says after a flush.
    session_count: AtomicUsize,
    /// A session was added since the manifest was last written.
    manifest_behind: AtomicBool,
    /// A flush of unflushed writes is scheduled (`flush.rs`).
    flush_due: AtomicBool,
    /// What was found damaged when the database was opened.
    damage: Option<recover::Damage>,
}

/// The database handle; cheap to clone.
#[derive(Debug, Clone)]
pub struct Store {
    shared: Arc<Shared>,
}

impl Store {
    /// Open (or create) the database in `dir`. A database found damaged (its file gone, sled
    /// unable to open it, or fewer sessions than it last held) is moved aside into
    /// `damaged-<time>/`, what could still be read is carried over into a fresh one, and the
    /// loss is kept for `Store::damage`.
    pub fn open(dir: &Path) -> Result<Self, StoreError> {
        let config = sled::Config::new()
            .path(dir)
            .cache_capacity(CACHE_CAPACITY_BYTES)
            .flush_every_ms(Some(flush::GC_EVERY_MS));
        let (open, damage) = recover::open_checked(&config, dir)?;
        let store = Self::from_open(open, config, dir.to_path_buf(), true, damage);
        store.write_manifest()?;
        owner_only(dir);
        Ok(store)
    }

    /// Open the database again in the same process, as a restart would: sled's flusher may
    /// hold the file lock a moment after the last handle is dropped, so it is waited for (up
    /// to 10 s). A real restart is another process, whose predecessor has exited.
    #[cfg(test)]
    pub(crate) fn open_again(dir: &Path) -> Result<Self, StoreError> {
        lock_waited(std::time::Duration::from_secs(10), || Self::open(dir))
    }

    /// The database's directory (`None` for a temporary one); other files of the daemon's
    /// own live beside it (the audit log's).
    pub(crate) fn dir(&self) -> Option<&Path> {
        self.shared.on_disk.then_some(self.shared.path.as_path())
    }

    /// A throwaway in-memory database, for tests.
    pub fn temporary() -> Result<Self, StoreError> {
        let config = sled::Config::new().temporary(true);
        let path = PathBuf::from("<temporary>");
        let open = Open::new(&config, &path)?;
        Ok(Self::from_open(open, config, path, false, None))
    }

    fn from_open(
        open: Open,
        config: sled::Config,
        path: PathBuf,
        on_disk: bool,
        damage: Option<recover::Damage>,
    ) -> Self {
        let count = open.sessions.scan_prefix(SESSION_PREFIX).count();
        Self {
            shared: Arc::new(Shared {
                path,
                config,
                on_disk,
                open: parking_lot::RwLock::new(Some(Arc::new(open))),
                broken: AtomicBool::new(false),
                session_count: AtomicUsize::new(count),
                manifest_behind: AtomicBool::new(false),
                flush_due: AtomicBool::new(false),
                damage,
            }),
        }
    }

    /// What was found damaged when it was opened, if anything.
    pub(crate) fn damage(&self) -> Option<&recover::Damage> {
        self.shared.damage.as_ref()
    }

    /// What `daemon/status` should say about the database.
    pub(crate) fn warnings(&self) -> Vec<String> {
        let mut out: Vec<String> =
            self.damage().map(recover::Damage::message).into_iter().collect();
        if self.shared.broken.load(Ordering::Acquire) {
            out.push(format!(
                "the last write to the database in {} failed (is its disk full?); the next \
                 write tries again",
                self.shared.path.display()
            ));
        }
        out
    }

    /// The open handles, for reading: a database whose writes failed still serves reads.
    fn handles(&self) -> Result<Arc<Open>, StoreError> {
        if let Some(open) = self.shared.open.read().clone() {
            return Ok(open);
        }
        self.reopen()
    }

    /// Every key of `tree` that is UTF-8 (none when the database cannot be read).
    fn keys_of(&self, tree: &str) -> Vec<String> {
        let Ok(open) = self.handles() else { return vec![] };
        let Ok(tree) = open.db.open_tree(tree) else { return vec![] };
        tree.iter()
            .filter_map(|item| item.ok())
            .filter_map(|(k, _)| String::from_utf8(k.to_vec()).ok())
            .collect()
    }

    /// The open handles, for writing: after an I/O failure (sled keeps failing once one
    /// happened) sled is opened afresh first, so writes work again once the disk has room.
    fn handles_for_write(&self) -> Result<Arc<Open>, StoreError> {
        if self.shared.broken.load(Ordering::Acquire) && self.shared.on_disk {
            return self.reopen();
        }
        self.handles()
    }

    /// Close sled and open it again. Everything acknowledged was flushed, so nothing
    /// acknowledged is lost; what failed to be written is gone, as its caller was told.
    fn reopen(&self) -> Result<Arc<Open>, StoreError> {
        let mut slot = self.shared.open.write();
        if let Some(open) = slot.as_ref()
            && !self.shared.broken.load(Ordering::Acquire)
        {
            return Ok(open.clone()); // another caller reopened it meanwhile
        }
        // Opening writes; with no room it would fail, and the handles that still serve
        // reads would be gone for nothing.
        if !recover::has_room(&self.shared.path) {
            return Err(StoreError::Sled {
                path: self.shared.path.clone(),
                source: sled::Error::Io(std::io::ErrorKind::StorageFull.into()),
            });
        }
        // sled holds a lock on its file until every handle is gone, and its flusher thread a
        // moment after: waited for (a rare path; a busy machine failed the next write).
        drop(slot.take());
        let two = std::time::Duration::from_secs(2);
        match lock_waited(two, || Open::new(&self.shared.config, &self.shared.path)) {
            Ok(open) => {
                let count = open.sessions.scan_prefix(SESSION_PREFIX).count();
                self.shared.session_count.store(count, Ordering::Release);
                let open = Arc::new(open);
                *slot = Some(open.clone());
                self.shared.broken.store(false, Ordering::Release);
                tracing::info!(path = %self.shared.path.display(), "database reopened after a write failure");
                Ok(open)
            }
            Err(e) => {
                tracing::warn!(error = %e, "the database could not be reopened yet");
                Err(e)
            }
        }
    }

    fn err(&self, source: sled::Error) -> StoreError {
        if matches!(source, sled::Error::Io(_)) {
            self.shared.broken.store(true, Ordering::Release);
        }
        StoreError::Sled { path: self.shared.path.clone(), source }
    }

    /// Write the manifest: the number of sessions the database holds at least.
    fn write_manifest(&self) -> Result<(), StoreError> {
        if !self.shared.on_disk {
            return Ok(());
        }
        let count = self.shared.session_count.load(Ordering::Acquire);
        recover::write_manifest(&self.shared.path, count)
            .map_err(|source| StoreError::Manifest { path: self.shared.path.clone(), source })
    }

    /// One session.
    pub(crate) fn session(&self, id: &str) -> Result<Option<SessionRecord>, StoreError> {
        let key = session_key(id);
        match self.handles()?.sessions.get(&key).map_err(|e| self.err(e))? {
            Some(bytes) => decode(&key, &bytes, SESSION_RECORD_VERSION).map(Some),
            None => Ok(None),
        }
    }

    /// Sessions in id order (= creation order), starting after `after`. Records that cannot be
    /// decoded are skipped with a warning rather than failing the whole listing.
    pub(crate) fn sessions_after(
        &self,
        after: Option<&str>,
    ) -> impl Iterator<Item = Result<SessionRecord, StoreError>> + '_ {
        let start = match after {
            // The byte after the cursor's key: strictly greater than it.
            Some(id) => {
                let mut k = session_key(id);
                k.push(0);
                k
            }
            None => SESSION_PREFIX.to_vec(),
        };
        let mut end = SESSION_PREFIX.to_vec();
        if let Some(last) = end.last_mut() {
            *last += 1;
        }
        let (range, failed) = match self.handles() {
            Ok(open) => (Some(open.sessions.range(start..end)), None),
            Err(e) => (None, Some(Err(e))),
        };
        failed.into_iter().chain(range.into_iter().flatten().filter_map(move |item| {
            let (key, bytes) = match item {
                Ok(kv) => kv,
                Err(e) => return Some(Err(self.err(e))),
            };
            match decode(&key, &bytes, SESSION_RECORD_VERSION) {
                Ok(r) => Some(Ok(r)),
                Err(e) => {
                    tracing::warn!(error = %e, "skipping unreadable session record");
                    None
                }
            }
        }))
    }

    /// The number of session records.
    pub(crate) fn session_count(&self) -> usize {
        self.handles().map_or(0, |o| o.sessions.scan_prefix(SESSION_PREFIX).count())
    }

    /// The default session id of a workspace for clients of a kind (`SessionState::upstream`).
    pub(crate) fn default_session(
        &self,
        workspace: &str,
        kind: Option<Declares>,
    ) -> Result<Option<SessionId>, StoreError> {
        let v =
            self.handles()?.sessions.get(default_key(workspace, kind)).map_err(|e| self.err(e))?;
        Ok(v.map(|b| String::from_utf8_lossy(&b).into_owned()))
    }

    /// Write a session (and, for a default session, its workspace's pointer) atomically.
    pub(crate) fn put_session(&self, rec: &SessionRecord) -> Result<(), StoreError> {
        let open = self.handles_for_write()?;
        let key = session_key(&rec.id);
        let new = !open.sessions.contains_key(&key).map_err(|e| self.err(e))?;
        let mut batch = sled::Batch::default();
        batch.insert(key, encode(rec, SESSION_RECORD_VERSION));
        if rec.is_default {
            batch.insert(default_key(&rec.workspace, rec.state.upstream), rec.id.as_bytes());
        }
        open.sessions.apply_batch(batch).map_err(|e| self.err(e))?;
        if new {
            // The manifest follows at the next flush: it never counts a session that is
            // not on disk yet.
            self.shared.session_count.fetch_add(1, Ordering::AcqRel);
            self.shared.manifest_behind.store(true, Ordering::Release);
        }
        Ok(())
    }

    /// Delete a session and, if it is its workspace's default, the pointer to it.
    pub(crate) fn delete_session(&self, rec: &SessionRecord) -> Result<(), StoreError> {
        let open = self.handles_for_write()?;
        let key = session_key(&rec.id);
        if open.sessions.contains_key(&key).map_err(|e| self.err(e))? {
            // The manifest goes first: it never counts more sessions than the disk holds.
            let _ =
                self.shared.session_count.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                    Some(n.saturating_sub(1))
                });
            self.write_manifest()?;
        }
        let mut batch = sled::Batch::default();
        batch.remove(key);
        if self.default_session(&rec.workspace, rec.state.upstream)?.as_deref() == Some(&*rec.id) {
            batch.remove(default_key(&rec.workspace, rec.state.upstream));
        }
        open.sessions.apply_batch(batch).map_err(|e| self.err(e))?;
        self.written();
        Ok(())
    }

    /// Record a child process (flushed at once: it must survive a SIGKILL of the daemon).
    pub(crate) async fn put_child(&self, rec: &ChildRecord) -> Result<(), StoreError> {
        let open = self.handles_for_write()?;
        open.children
            .insert(rec.pid.to_be_bytes(), encode(rec, CHILD_RECORD_VERSION))
            .map_err(|e| self.err(e))?;
        let tree = open.children.clone();
        drop(open);
        self.flush_blocking(move || tree.flush()).await
    }

    /// Forget a child process (it was stopped and reaped).
    pub(crate) fn remove_child(&self, pid: u32) -> Result<(), StoreError> {
        self.handles_for_write()?.children.remove(pid.to_be_bytes()).map_err(|e| self.err(e))?;
        self.written();
        Ok(())
    }

    /// Every recorded child process; unreadable records are skipped with a warning.
    pub(crate) fn children(&self) -> Vec<ChildRecord> {
        let Ok(open) = self.handles() else { return Vec::new() };
        open.children
            .iter()
            .filter_map(|item| {
                let (k, v) = item.ok()?;
                decode(&k, &v, CHILD_RECORD_VERSION)
                    .inspect_err(|e| tracing::warn!(error = %e, "skipping a child record"))
                    .ok()
            })
            .collect()
    }

    #[cfg(test)]
    fn sessions_tree(&self) -> sled::Tree {
        self.handles().map(|o| o.sessions.clone()).expect("a temporary store stays open")
    }
}

fn session_key(id: &str) -> Vec<u8> {
    [SESSION_PREFIX, id.as_bytes()].concat()
}

fn default_key(workspace: &str, upstream: Option<Declares>) -> Vec<u8> {
    let kind = upstream.filter(|d| !d.is_all()).map(|d| format!("\0upstream={}", d.describe()));
    [DEFAULT_PREFIX, workspace.as_bytes(), kind.unwrap_or_default().as_bytes()].concat()
}

fn decode_u32(b: &[u8]) -> Option<u32> {
    Some(u32::from_be_bytes(b.try_into().ok()?))
}

fn encode<T: Serialize>(record: &T, v: u32) -> Vec<u8> {
    // Serializing these plain structs to JSON cannot fail (string keys, no custom impls).
    serde_json::to_vec(&Versioned { v, record }).unwrap_or_default()
}

fn decode<T: DeserializeOwned>(key: &[u8], bytes: &[u8], current: u32) -> Result<T, StoreError> {
    let corrupt = |reason: String| StoreError::Corrupt {
        key: String::from_utf8_lossy(key).into_owned(),
        reason,
    };
    let VersionOnly { v } = serde_json::from_slice(bytes).map_err(|e| corrupt(e.to_string()))?;
    if v > current {
        return Err(corrupt(format!("record version {v} is newer than this geminid ({current})")));
    }
    // Version 1 is the only one so far; older versions would be migrated here.
    serde_json::from_slice(bytes).map_err(|e| corrupt(e.to_string()))
}

#[cfg(test)]
mod tests;
