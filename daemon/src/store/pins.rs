//! Tool-definition pins (`crate::pins`): one signed record per server (by its pin key) in the
//! `pins` tree, flushed when written.
//!
//! A record that is gone must not read as one never written: that would pin whatever the
//! server lists next as "first use" (sled drops its log from a damaged byte on, and a damaged
//! database is started afresh with what could be read). So beside the database,
//! [`PINS_MANIFEST`] names every pin key a record was written for (added after the record is
//! flushed, so it never names one the disk does not hold); a key it names whose record is
//! missing is an error, as is an absent record when the manifest cannot be read.

use std::collections::BTreeSet;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::{Store, StoreError};

// Workspace policy acceptances: signed records too, kept beside (in their own tree).
#[path = "accepted.rs"]
mod accepted;

const TREE: &str = "pins";
/// The manifest's file name, in the database directory (not one of sled's files, so a
/// damaged database moved aside leaves it).
pub(super) const PINS_MANIFEST: &str = "geminid.pins.manifest";

/// Held while the manifest is read, added to and written: the first listings of servers
/// started together are pinned at once, and two writers unserialised both failed (one's
/// rename found the other's file gone: the pins "could not be pinned", and the server's next
/// listing, changed, was pinned as its first use) or dropped each other's key.
static MANIFEST_WRITE: parking_lot::Mutex<()> = parking_lot::const_mutex(());

#[derive(Serialize, Deserialize)]
struct PinsManifest {
    v: u32,
    keys: BTreeSet<String>,
}

impl Store {
    fn manifest_path(&self, name: &str) -> Option<PathBuf> {
        self.shared.on_disk.then(|| self.shared.path.join(name))
    }

    /// The keys the manifest names: none without a manifest (a database older than it, or
    /// a new one), an error when it is there but cannot be read.
    pub(super) fn pins_manifest(&self) -> Result<BTreeSet<String>, String> {
        self.manifest(PINS_MANIFEST)
    }

    /// The keys the manifest `name` names (as [`Store::pins_manifest`]).
    fn manifest(&self, name: &str) -> Result<BTreeSet<String>, String> {
        let Some(path) = self.manifest_path(name) else { return Ok(BTreeSet::new()) };
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice::<PinsManifest>(&bytes)
                .map(|m| m.keys)
                .map_err(|e| format!("{} is not valid ({e})", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(BTreeSet::new()),
            Err(e) => Err(format!("{} cannot be read ({e})", path.display())),
        }
    }

    /// The pins record kept under `key`, as written; none when none was ever written. An
    /// unreadable database is an error, and so is a record the manifest says was written
    /// that is gone, or an absent one when the manifest cannot be read (the pins cannot be
    /// told apart from none).
    pub fn pins_record(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let open = self.handles()?;
        let tree = open.db.open_tree(TREE).map_err(|e| self.err(e))?;
        if let Some(v) = tree.get(key.as_bytes()).map_err(|e| self.err(e))? {
            return Ok(Some(v.to_vec()));
        }
        match self.pins_manifest() {
            Ok(keys) if !keys.contains(key) => Ok(None),
            Ok(_) => Err(StoreError::Corrupt {
                key: format!("pins/{key}"),
                reason: "it was written, and is gone from the database: damaged, or edited"
                    .to_owned(),
            }),
            Err(why) => Err(StoreError::Corrupt {
                key: format!("pins/{key}"),
                reason: format!(
                    "there is none, and the manifest of the pins written ({why}) cannot tell \
                     whether there was one; remove it once every server's definitions were \
                     reviewed and accepted"
                ),
            }),
        }
    }

    /// Keep the pins record under `key` (durable before this returns), and name it in the
    /// manifest (left alone while it cannot be read: see [`Store::pins_record`]).
    pub fn put_pins_record(&self, key: &str, record: &[u8]) -> Result<(), StoreError> {
        let open = self.handles_for_write()?;
        let tree = open.db.open_tree(TREE).map_err(|e| self.err(e))?;
        tree.insert(key.as_bytes(), record).map_err(|e| self.err(e))?;
        tree.flush().map(drop).map_err(|e| self.err(e))?;
        self.manifest_add(PINS_MANIFEST, TREE, key)
    }

    /// Name `key`, whose record in `tree` was just flushed, in the manifest `name`.
    fn manifest_add(&self, name: &str, tree: &str, key: &str) -> Result<(), StoreError> {
        let Some(path) = self.manifest_path(name) else { return Ok(()) };
        let _serialised = MANIFEST_WRITE.lock();
        match self.manifest(name) {
            Ok(keys) if keys.contains(key) => Ok(()),
            Ok(mut keys) => {
                // A manifest made now (none before) names every record there is.
                keys.extend(self.keys_of(tree));
                keys.insert(key.to_owned());
                let body = serde_json::to_vec(&PinsManifest { v: 1, keys })
                    .map_err(|e| StoreError::Manifest { path: path.clone(), source: e.into() })?;
                super::recover::write_file(&path, &body)
                    .map_err(|source| StoreError::Manifest { path, source })
            }
            Err(why) => {
                tracing::warn!(%why, manifest = name, "a manifest of records is not updated");
                Ok(())
            }
        }
    }

    /// Every pins record's key.
    pub fn pins_keys(&self) -> Vec<String> {
        self.keys_of(TREE)
    }
}
