//! Gemini CLI's extension integrity store (COMPAT §6.4), compatible both ways: Gemini CLI
//! verifies what geminid records, and geminid what Gemini CLI recorded.
//!
//! - A record per extension: `hash` = SHA-256 (hex) of the install metadata as
//!   `json-stable-stringify` writes it (keys sorted, no spaces), `signature` = HMAC-SHA256 of
//!   that hex string.
//! - The store, `~/.gemini/extension_integrity.json`: `{"store": {name: record}, "signature":
//!   HMAC of the stable form of "store"}`, pretty-printed, written to a temporary file (0600)
//!   renamed over it.
//! - The key is the 64-character hex text of 32 random bytes, used as the HMAC key *as text*
//!   (as Node's `createHmac('sha256', key)` does with a string).
//!
//! Comparisons of hashes and signatures take the same time whatever they hold.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::secrets::Secret;
use crate::secrets::store::hex;

/// The store's file name in `~/.gemini`.
pub(crate) const STORE_FILE: &str = "extension_integrity.json";

/// HMAC-SHA256 (RFC 2104), by the `hmac` crate.
pub(crate) fn hmac_sha256(key: &[u8], data: &[u8]) -> [u8; 32] {
    use hmac::{KeyInit, Mac};
    // HMAC takes a key of any length (a long one is hashed first), so this cannot fail; were
    // it to, the zero signature matches nothing a key signs: verification fails closed.
    let Ok(mut mac) = hmac::Hmac::<Sha256>::new_from_slice(key) else { return [0; 32] };
    mac.update(data);
    mac.finalize().into_bytes().into()
}

/// `json-stable-stringify`: object keys sorted (by UTF-16 code units, as JavaScript sorts),
/// no whitespace, strings and numbers as `JSON.stringify` writes them.
pub(crate) fn stable_stringify(v: &Value) -> String {
    match v {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort_by(|a, b| a.encode_utf16().cmp(b.encode_utf16()));
            let parts: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{}:{}", Value::String(k.clone()), stable_stringify(&map[k])))
                .collect();
            format!("{{{}}}", parts.join(","))
        }
        Value::Array(items) => {
            format!("[{}]", items.iter().map(stable_stringify).collect::<Vec<_>>().join(","))
        }
        other => other.to_string(),
    }
}

/// Equal byte strings, in time that does not depend on where they differ.
pub(crate) fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// One extension's record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Record {
    /// SHA-256 (hex) of the install metadata's stable form.
    pub hash: String,
    /// HMAC-SHA256 (hex) of `hash`.
    pub signature: String,
}

#[derive(Serialize, Deserialize)]
struct File {
    store: BTreeMap<String, Record>,
    signature: String,
}

/// What a verification found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Status {
    /// The record matches.
    Verified,
    /// No metadata, or no record of the extension.
    Missing,
    /// The record does not match, or the store cannot be trusted.
    Invalid,
}

/// Why the store cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum StoreError {
    /// It does not parse (Gemini CLI's words, without its stray brace).
    #[error("Failed to parse extension integrity store. Please delete {} to reset it.", .0.display())]
    Parse(PathBuf),
    /// Its signature is not the key's.
    #[error("Extension integrity store cannot be verified. Please delete {} to reset it.", .0.display())]
    Unverified(PathBuf),
    /// It cannot be read or written.
    #[error("cannot use {}: {why}", .path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        why: String,
    },
}

/// The store at `~/.gemini/extension_integrity.json`, under a key.
#[derive(Debug)]
pub(crate) struct ReferenceStore {
    path: PathBuf,
    key: Secret<String>,
}

impl ReferenceStore {
    /// The store in `gemini_dir`, signed with `key` (the hex text).
    pub(crate) fn new(gemini_dir: &Path, key: Secret<String>) -> Self {
        Self { path: gemini_dir.join(STORE_FILE), key }
    }

    fn sign(&self, data: &str) -> String {
        hex(&hmac_sha256(self.key.expose().as_bytes(), data.as_bytes()))
    }

    /// The record install metadata should have.
    pub(crate) fn record_for(&self, metadata: &Value) -> Record {
        let hash = hex(&Sha256::digest(stable_stringify(metadata).as_bytes()));
        let signature = self.sign(&hash);
        Record { hash, signature }
    }

    /// Every record, once the store's own signature checks out; none when there is no file.
    pub(crate) fn load(&self) -> Result<BTreeMap<String, Record>, StoreError> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
            Err(e) => {
                return Err(StoreError::Io { path: self.path.clone(), why: e.to_string() });
            }
        };
        let file: File =
            serde_json::from_str(&text).map_err(|_| StoreError::Parse(self.path.clone()))?;
        let content = stable_stringify(&serde_json::to_value(&file.store).unwrap_or_default());
        if !same(&self.sign(&content), &file.signature) {
            return Err(StoreError::Unverified(self.path.clone()));
        }
        Ok(file.store)
    }

    /// Whether `metadata` is what was recorded for `name`.
    pub(crate) fn verify(&self, name: &str, metadata: Option<&Value>) -> Status {
        let Some(metadata) = metadata else { return Status::Missing };
        let Ok(store) = self.load() else { return Status::Invalid };
        let Some(recorded) = store.get(name) else { return Status::Missing };
        let expected = self.record_for(metadata);
        if same(&expected.hash, &recorded.hash) && same(&expected.signature, &recorded.signature) {
            Status::Verified
        } else {
            Status::Invalid
        }
    }

    /// Record `metadata` for `name` (a store that cannot be verified is not overwritten).
    pub(crate) fn record(&self, name: &str, metadata: &Value) -> Result<(), StoreError> {
        let mut store = self.load()?;
        store.insert(name.to_owned(), self.record_for(metadata));
        self.save(store)
    }

    /// Drop `name`'s record (uninstall).
    pub(crate) fn forget(&self, name: &str) -> Result<(), StoreError> {
        let mut store = self.load()?;
        if store.remove(name).is_some() {
            self.save(store)?;
        }
        Ok(())
    }

    fn save(&self, store: BTreeMap<String, Record>) -> Result<(), StoreError> {
        let io = |e: std::io::Error| StoreError::Io { path: self.path.clone(), why: e.to_string() };
        let content = stable_stringify(&serde_json::to_value(&store).unwrap_or_default());
        let file = File { signature: self.sign(&content), store };
        let text = serde_json::to_string_pretty(&file).unwrap_or_default();
        crate::secrets::write_private(&self.path, text.as_bytes()).map_err(io)
    }
}

#[cfg(test)]
mod tests;
