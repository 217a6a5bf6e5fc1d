//! Artifact pins (issue 72): what a local server runs, recorded on its first start and signed
//! like definition pins (HMAC-SHA256 under the extension integrity key, in the store's `pins`
//! tree under `artifact:<pin key>`, so the manifest tells a record gone from one never
//! written). A record that fails its check is never taken as a first use.
//!
//! This module knows records; what a server resolves to, and holding it, is
//! `crate::mcp::artifact`'s.

use std::collections::BTreeMap;

use geminid_protocol::pins::Artifact;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::canon::hex;
use super::{KeepError, Pins};
use crate::extensions::integrity::{hmac_sha256, same, stable_stringify};
use crate::secrets::Secret;
use crate::store::StoreError;

/// Version of [`ArtifactRecord`] as written by this build.
const VERSION: u32 = 1;

/// Where a server's artifact record is kept in the `pins` tree.
pub(crate) fn store_key(pin_key: &str) -> String {
    format!("artifact:{pin_key}")
}

/// One server's artifact, as kept.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct ArtifactRecord {
    v: u32,
    server: String,
    /// When it was first recorded.
    pub since_ms: u64,
    /// What it runs.
    pub artifact: Artifact,
    /// Each hashed file's path → what `stat` said of it when it was hashed (device, inode,
    /// size, modification and change times): the same answer later means the same bytes
    /// without reading them again (a change time cannot be set back by its owner).
    #[serde(default)]
    pub stats: BTreeMap<String, String>,
    #[serde(default)]
    mac: String,
}

/// A record as read.
#[derive(Debug, Clone)]
pub(crate) enum Recorded {
    /// None was ever written.
    None,
    /// One that verifies.
    Verified(ArtifactRecord),
    /// One that failed its check, and why.
    Unverified(String),
}

fn signed_text(record: &ArtifactRecord, key: &str) -> String {
    let mut body = serde_json::to_value(record).unwrap_or_default();
    if let Some(m) = body.as_object_mut() {
        m.remove("mac");
    }
    stable_stringify(&json!({ "artifactKey": key, "record": body }))
}

fn mac_with(secret: &Secret<String>, record: &ArtifactRecord, key: &str) -> String {
    hex(&hmac_sha256(secret.expose().as_bytes(), signed_text(record, key).as_bytes()))
}

impl Pins {
    /// The artifact record of the server whose pins are kept under `pin_key` (blocking: the
    /// store, and the key). Verified records are kept in memory.
    pub(crate) fn artifact(&self, pin_key: &str) -> Recorded {
        let key = store_key(pin_key);
        if let Some(r) = self.artifacts.lock().get(&key) {
            return Recorded::Verified(r.clone());
        }
        let recorded = match self.store.pins_record(&key) {
            Ok(None) => Recorded::None,
            Err(StoreError::Corrupt { reason, .. }) => Recorded::Unverified(reason),
            Err(e) => Recorded::Unverified(format!("it cannot be read: {e}")),
            Ok(Some(bytes)) => match serde_json::from_slice::<ArtifactRecord>(&bytes) {
                Err(e) => Recorded::Unverified(format!("it is not a valid record: {e}")),
                Ok(r) if r.v > VERSION => {
                    Recorded::Unverified(format!("it is of a newer geminid (version {})", r.v))
                }
                Ok(r) => match (self.key)() {
                    Err(e) => Recorded::Unverified(format!("no integrity key: {e}")),
                    Ok(secret) if same(&mac_with(&secret, &r, &key), &r.mac) => {
                        Recorded::Verified(r)
                    }
                    Ok(_) => Recorded::Unverified(
                        "it does not verify under the integrity key: edited, damaged, or the \
                         key changed"
                            .to_owned(),
                    ),
                },
            },
        };
        if let Recorded::Verified(r) = &recorded {
            self.artifacts.lock().insert(key, r.clone());
        }
        recorded
    }

    /// The artifact record under `pin_key` if one verified earlier in this run (memory only:
    /// no store, no key).
    pub(crate) fn artifact_known(&self, pin_key: &str) -> Option<Recorded> {
        self.artifacts.lock().get(&store_key(pin_key)).cloned().map(Recorded::Verified)
    }

    /// Record `artifact` (with the `stats` of the files hashed) as what the server under
    /// `pin_key` runs, keeping when it was first recorded if it was.
    pub(crate) fn record_artifact(
        &self,
        pin_key: &str,
        server: &str,
        artifact: Artifact,
        stats: BTreeMap<String, String>,
    ) -> Result<ArtifactRecord, KeepError> {
        let key = store_key(pin_key);
        let since_ms = match self.artifact(pin_key) {
            Recorded::Verified(r) => r.since_ms,
            _ => crate::clock::now_ms(),
        };
        let mut record = ArtifactRecord {
            v: VERSION,
            server: server.to_owned(),
            since_ms,
            artifact,
            stats,
            mac: String::new(),
        };
        record.mac = mac_with(&(self.key)()?, &record, &key);
        self.store.put_pins_record(&key, &serde_json::to_vec(&record)?)?;
        self.artifacts.lock().insert(key, record.clone());
        Ok(record)
    }

    /// Every artifact record that verifies under `old`, signed with `new`.
    pub(super) fn resign_artifacts(&self, old: &Secret<String>, new: &Secret<String>) -> usize {
        let mut resigned = 0;
        for key in self.store.pins_keys().into_iter().filter(|k| k.starts_with("artifact:")) {
            let Ok(Some(bytes)) = self.store.pins_record(&key) else { continue };
            let Ok(mut record) = serde_json::from_slice::<ArtifactRecord>(&bytes) else {
                continue;
            };
            if !same(&mac_with(old, &record, &key), &record.mac) {
                continue;
            }
            record.mac = mac_with(new, &record, &key);
            let Ok(bytes) = serde_json::to_vec(&record) else { continue };
            match self.store.put_pins_record(&key, &bytes) {
                Ok(()) => resigned += 1,
                Err(e) => {
                    tracing::warn!(error = %e, "a server's artifact record is not signed again")
                }
            }
        }
        self.artifacts.lock().clear();
        resigned
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use geminid_protocol::pins::{ArtifactKind, PinMode};

    use super::*;
    use crate::store::Store;

    fn artifact(digest: &str) -> Artifact {
        Artifact {
            kind: ArtifactKind::Npm,
            name: "srv".into(),
            version: Some("1.0.0".into()),
            digest: digest.into(),
            published: None,
            interpreter: None,
        }
    }

    fn pins(store: Store, k: &'static str) -> Pins {
        Pins::new(store, Arc::new(move || Ok(Secret::new(k.repeat(32)))), PinMode::Enforce, None)
    }

    #[test]
    fn a_record_is_kept_signed_and_an_edited_or_gone_one_is_no_first_use() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = Store::open(dir.path()).unwrap();
            let p = pins(store, "ab");
            assert!(matches!(p.artifact("k"), Recorded::None));
            p.record_artifact("k", "srv", artifact("sha512-A"), BTreeMap::new()).unwrap();
        }
        let store = Store::open(dir.path()).unwrap();
        let Recorded::Verified(r) = pins(store.clone(), "ab").artifact("k") else {
            panic!("not kept")
        };
        assert_eq!(r.artifact.digest, "sha512-A");
        // Another key, or a record edited to name other bytes, does not verify.
        assert!(matches!(pins(store.clone(), "cd").artifact("k"), Recorded::Unverified(_)));
        let bytes = store.pins_record(&store_key("k")).unwrap().unwrap();
        let edited = String::from_utf8(bytes).unwrap().replace("sha512-A", "sha512-B");
        store.put_pins_record(&store_key("k"), edited.as_bytes()).unwrap();
        assert!(matches!(pins(store.clone(), "ab").artifact("k"), Recorded::Unverified(_)));
        // Definition pins of the same server are not confused with it.
        let p = pins(store, "ab");
        assert!(p.check("k", "srv", "srv", &[]).problem.is_none());
    }
}
