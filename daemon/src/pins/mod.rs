//! Tool-definition pins: a defence against a server that changes what it tells the model
//! after it was approved (a "rug pull").
//!
//! The first time a server's catalog is listed, each tool's, prompt's and resource template's
//! canonical form ([`canon`]) is recorded, hashed, in one record per server signed with
//! HMAC-SHA256 under the extension integrity key (trust on first use). Every later listing is
//! compared: a definition that changed, or is new, differs; where the server's pinning is
//! `enforce` it is held (the MCP client leaves it out of the server's catalog, so no session or
//! gateway client sees it, and a call to it is refused) until [`Pins::accept`]. A record that
//! fails its check (its MAC, its parse, a read, or gone where the store says one was written)
//! is taken as tampering: nothing of that server counts as pinned, never as a first use.
//!
//! This module knows records and definitions; which server's catalog is filtered, and when, is
//! `crate::mcp::pinned`'s.

pub(crate) mod artifact;
pub mod canon;

use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use geminid_protocol::pins::{Change, PinMode};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use self::canon::{Def, Item, hex};
use crate::extensions::ExtensionError;
use crate::extensions::integrity::{hmac_sha256, same, stable_stringify};
use crate::secrets::Secret;
use crate::store::Store;
use crate::store::StoreError;

/// Version of [`Record`] as written by this build.
const RECORD_VERSION: u32 = 1;

/// Where the integrity key comes from (the extensions' key, shared).
pub(crate) type KeySource = Arc<dyn Fn() -> Result<Secret<String>, ExtensionError> + Send + Sync>;

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Pinned {
    sha256: String,
    def: Value,
}

/// One server's pins, as kept.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Record {
    v: u32,
    server: String,
    source: String,
    since_ms: u64,
    defs: BTreeMap<String, Pinned>,
    #[serde(default)]
    rejected: BTreeMap<String, String>,
    #[serde(default)]
    mac: String,
}

impl Record {
    fn signed_text(&self, pin_key: &str) -> String {
        let mut body = serde_json::to_value(self).unwrap_or_default();
        if let Some(m) = body.as_object_mut() {
            m.remove("mac");
        }
        stable_stringify(&json!({ "pinKey": pin_key, "record": body }))
    }
}

#[derive(Debug, Clone)]
enum Loaded {
    None,
    Verified(Arc<Record>),
    Unverified(String),
}

/// One definition that differs from its pin.
#[derive(Debug, Clone, PartialEq)]
pub struct Differ {
    /// As listed now.
    pub def: Def,
    /// How it differs.
    pub change: Change,
    /// The pinned canonical form, when there is one that verifies.
    pub pinned: Option<Value>,
    /// Marked rejected (`mcp/reject`) for exactly this listed form.
    pub rejected: bool,
}

/// What a listing amounts to against its server's pins.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Verdict {
    /// Definitions pinned.
    pub pinned: usize,
    /// When they were first pinned.
    pub since_ms: u64,
    /// They were pinned now, on first use.
    pub first_use: bool,
    /// What differs, in the listing's order.
    pub differs: Vec<Differ>,
    /// Why the pins could not be read or kept (the listing is then held whole where enforced:
    /// see [`Pins::check`]).
    pub problem: Option<String>,
}

/// Why an accept or a reject was refused.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PinError {
    /// A name given differs in nothing.
    #[error("{0}")]
    NotDiffering(String),
    /// The pins could not be signed or written.
    #[error(transparent)]
    Keep(#[from] KeepError),
}

/// Why pins could not be signed or written.
#[derive(Debug, thiserror::Error)]
pub(crate) enum KeepError {
    /// There is no integrity key to sign them with.
    #[error(transparent)]
    Key(#[from] ExtensionError),
    /// The record could not be written out as JSON.
    #[error(transparent)]
    Encode(#[from] serde_json::Error),
    /// The store refused them.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The work stopped before it was done (the daemon is shutting down).
    #[error("the pins were not written: {0}")]
    Stopped(#[from] tokio::task::JoinError),
}

fn mac_with(key: &Secret<String>, record: &Record, pin_key: &str) -> String {
    hex(&hmac_sha256(key.expose().as_bytes(), record.signed_text(pin_key).as_bytes()))
}

/// The pins of every server, over the daemon's store.
pub struct Pins {
    store: Store,
    key: KeySource,
    loaded: Mutex<HashMap<String, Loaded>>,
    /// Where held, accepted and rejected definitions are recorded.
    pub audit: Option<Arc<crate::audit::AuditLog>>,
    /// The daemon's pinning (`--tool-pinning`), for servers whose entry says nothing.
    pub mode: PinMode,
    /// The daemon's artifact pinning (`--artifact-pinning`), for servers whose entry says
    /// nothing.
    pub artifact_mode: PinMode,
    /// Artifact records that verified, by store key.
    artifacts: Mutex<HashMap<String, artifact::ArtifactRecord>>,
}

impl std::fmt::Debug for Pins {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pins").field("mode", &self.mode).finish_non_exhaustive()
    }
}

impl Pins {
    /// Pins in `store`, signed with the key `key` gives.
    pub(crate) fn new(
        store: Store,
        key: KeySource,
        mode: PinMode,
        audit: Option<Arc<crate::audit::AuditLog>>,
    ) -> Self {
        Self {
            store,
            key,
            loaded: Mutex::default(),
            audit,
            mode,
            artifact_mode: mode,
            artifacts: Mutex::default(),
        }
    }

    /// With `mode` as the daemon's artifact pinning (`--artifact-pinning`).
    pub(crate) fn with_artifact_mode(mut self, mode: PinMode) -> Self {
        self.artifact_mode = mode;
        self
    }

    /// Pins signed with `key` (hex text, as the integrity key is): for benchmarks and tests
    /// that run outside a daemon.
    pub fn with_key_text(store: Store, key: &str, mode: PinMode) -> Self {
        let key = key.to_owned();
        Self::new(store, Arc::new(move || Ok(Secret::new(key.clone()))), mode, None)
    }

    fn mac(&self, record: &Record, pin_key: &str) -> Result<String, ExtensionError> {
        Ok(mac_with(&(self.key)()?, record, pin_key))
    }

    fn load(&self, pin_key: &str) -> Loaded {
        if let Some(l) = self.loaded.lock().get(pin_key) {
            return l.clone();
        }
        // Each is why the record failed its check: anything but a record that verifies, or
        // one never written, holds the server's definitions (never a fresh "first use").
        let loaded = match self.store.pins_record(pin_key) {
            Ok(None) => Loaded::None,
            Err(StoreError::Corrupt { reason, .. }) => Loaded::Unverified(reason),
            Err(e) => return Loaded::Unverified(format!("it cannot be read: {e}")),
            Ok(Some(bytes)) => match serde_json::from_slice::<Record>(&bytes) {
                Err(e) => Loaded::Unverified(format!("it is not a valid record: {e}")),
                Ok(r) if r.v > RECORD_VERSION => {
                    return Loaded::Unverified(format!(
                        "it is of a newer geminid (version {})",
                        r.v
                    ));
                }
                Ok(r) => match self.mac(&r, pin_key) {
                    Err(e) => return Loaded::Unverified(format!("no integrity key: {e}")),
                    Ok(mac) if same(&mac, &r.mac) => Loaded::Verified(Arc::new(r)),
                    Ok(_) => Loaded::Unverified(
                        "its pins do not verify under the integrity key: edited, damaged, or \
                         the key changed"
                            .to_owned(),
                    ),
                },
            },
        };
        self.loaded.lock().insert(pin_key.to_owned(), loaded.clone());
        loaded
    }

    fn write(&self, pin_key: &str, mut record: Record) -> Result<(), KeepError> {
        record.mac = self.mac(&record, pin_key)?;
        let bytes = serde_json::to_vec(&record)?;
        self.store.put_pins_record(pin_key, &bytes)?;
        self.loaded.lock().insert(pin_key.to_owned(), Loaded::Verified(Arc::new(record)));
        Ok(())
    }

    /// Compare a listing with the pins kept under `pin_key` (blocking: the store, and the key
    /// on first need). Nothing pinned yet: the listing is pinned now (first use). Pins that do
    /// not verify: every definition differs (`unverified`). Only what differs is copied out of
    /// the listing.
    pub fn check(&self, pin_key: &str, server: &str, source: &str, items: &[Item<'_>]) -> Verdict {
        match self.load(pin_key) {
            Loaded::None => {
                let since_ms = crate::clock::now_ms();
                let defs = items.iter().map(|(kind, raw)| Def::of(*kind, raw));
                let record = Record {
                    v: RECORD_VERSION,
                    server: server.to_owned(),
                    source: source.to_owned(),
                    since_ms,
                    defs: defs
                        .map(|d| (d.key(), Pinned { sha256: d.sha256, def: d.canon }))
                        .collect(),
                    rejected: BTreeMap::new(),
                    mac: String::new(),
                };
                let pinned = record.defs.len();
                let problem = self.write(pin_key, record).err().map(|e| {
                    format!(
                        "its tool definitions could not be pinned ({e}); they are used unpinned"
                    )
                });
                Verdict { pinned, since_ms, first_use: problem.is_none(), differs: vec![], problem }
            }
            Loaded::Unverified(why) => Verdict {
                differs: items
                    .iter()
                    .map(|(kind, raw)| Differ {
                        def: Def::of(*kind, raw),
                        change: Change::Unverified,
                        pinned: None,
                        rejected: false,
                    })
                    .collect(),
                problem: Some(format!(
                    "the pin record for {server} failed its check ({why}), so every definition \
                     is held: `gemctl mcp review {server}` then `gemctl mcp accept {server}`"
                )),
                ..Verdict::default()
            },
            Loaded::Verified(record) => {
                let (mut buf, mut differs) = (Vec::with_capacity(1024), Vec::new());
                for (kind, raw) in items {
                    let key = canon::key_of(*kind, canon::name_of(*kind, raw));
                    let sha256 = canon::digest(*kind, raw, &mut buf);
                    let (change, pinned) = match record.defs.get(&key) {
                        Some(p) if p.sha256 == sha256 => continue,
                        Some(p) => (Change::Changed, Some(p.def.clone())),
                        None => (Change::New, None),
                    };
                    let rejected = record.rejected.get(&key) == Some(&sha256);
                    differs.push(Differ { def: Def::of(*kind, raw), change, pinned, rejected });
                }
                Verdict {
                    pinned: record.defs.len(),
                    since_ms: record.since_ms,
                    first_use: false,
                    differs,
                    problem: None,
                }
            }
        }
    }

    /// Pin these of `differs` (by name; all when `names` is empty) as listed now.
    pub(crate) fn accept(
        &self,
        pin_key: &str,
        server: &str,
        source: &str,
        differs: &[Differ],
        names: &[String],
    ) -> Result<Vec<String>, PinError> {
        let chosen = choose(differs, names)?;
        let mut record = match self.load(pin_key) {
            Loaded::Verified(r) => (*r).clone(),
            Loaded::None | Loaded::Unverified(_) => Record {
                v: RECORD_VERSION,
                server: server.to_owned(),
                source: source.to_owned(),
                since_ms: crate::clock::now_ms(),
                defs: BTreeMap::new(),
                rejected: BTreeMap::new(),
                mac: String::new(),
            },
        };
        for d in &chosen {
            let key = d.def.key();
            record.rejected.remove(&key);
            record
                .defs
                .insert(key, Pinned { sha256: d.def.sha256.clone(), def: d.def.canon.clone() });
        }
        self.write(pin_key, record)?;
        Ok(chosen.iter().map(|d| d.def.name.clone()).collect())
    }

    /// Mark these of `differs` rejected (they stay held).
    pub(crate) fn reject(
        &self,
        pin_key: &str,
        server: &str,
        differs: &[Differ],
        names: &[String],
    ) -> Result<Vec<String>, PinError> {
        let chosen = choose(differs, names)?;
        let Loaded::Verified(record) = self.load(pin_key) else {
            return Err(PinError::NotDiffering(format!(
                "MCP server '{server}' has no pins that verify, so there is nothing to keep a \
                 rejection in: its definitions stay held until `gemctl mcp accept {server}`"
            )));
        };
        let mut record = (*record).clone();
        for d in &chosen {
            record.rejected.insert(d.def.key(), d.def.sha256.clone());
        }
        self.write(pin_key, record)?;
        Ok(chosen.iter().map(|d| d.def.name.clone()).collect())
    }
}

fn choose<'a>(differs: &'a [Differ], names: &[String]) -> Result<Vec<&'a Differ>, PinError> {
    if let Some(missing) = names.iter().find(|n| !differs.iter().any(|d| d.def.name == **n)) {
        let listed: Vec<&str> = differs.iter().map(|d| d.def.name.as_str()).collect();
        return Err(PinError::NotDiffering(if listed.is_empty() {
            format!("'{missing}' does not differ from its pin: nothing of this server is held")
        } else {
            format!(
                "'{missing}' does not differ from its pin (what differs: {})",
                listed.join(", ")
            )
        }));
    }
    Ok(differs.iter().filter(|d| names.is_empty() || names.contains(&d.def.name)).collect())
}

impl crate::extensions::SignsWithKey for Pins {
    /// Every record that verifies under `old`, signed again with `new` (not through the key
    /// source: the extensions hold their key while they call this).
    fn resign(&self, old: &Secret<String>, new: &Secret<String>) -> usize {
        let mut resigned = 0;
        for pin_key in self.store.pins_keys().into_iter().filter(|k| !k.starts_with("artifact:")) {
            let Ok(Some(bytes)) = self.store.pins_record(&pin_key) else { continue };
            let Ok(mut record) = serde_json::from_slice::<Record>(&bytes) else { continue };
            if !same(&mac_with(old, &record, &pin_key), &record.mac) {
                continue;
            }
            record.mac = mac_with(new, &record, &pin_key);
            let Ok(bytes) = serde_json::to_vec(&record) else { continue };
            match self.store.put_pins_record(&pin_key, &bytes) {
                Ok(()) => resigned += 1,
                Err(e) => tracing::warn!(error = %e, "a server's pins are not signed again"),
            }
        }
        self.loaded.lock().clear();
        resigned + self.resign_artifacts(old, new)
    }
}

#[cfg(test)]
mod tests;
