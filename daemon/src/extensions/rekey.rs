//! When the keychain's integrity key is not the one geminid holds.
//!
//! geminid and Gemini CLI each make the key when they first need it and find none, and
//! neither can lock the keychain for the other: an extension Gemini CLI installs while
//! geminid's watcher looks at it can have both make one, and the keychain keeps the one
//! written last (Gemini CLI's FileKeychain is one file, rewritten whole). Gemini CLI signs its
//! store with the key it made; geminid went on with its own and found that store "cannot be
//! verified" (issue 41). Now, when a record does not verify under the key geminid holds, the
//! keychain is read again: a different key there is the key from then on, and every record
//! geminid signed with the one it held (its extension records, and the tool-definition pins
//! through [`SignsWithKey`]) is signed again with it. Records the held key did not sign stay
//! as they are, and show as they did.

use std::sync::{Arc, Weak};

use super::files::Record;
use super::{Extensions, key};
use crate::secrets::Secret;

/// Something else that signs with the integrity key, and re-signs when it is replaced.
pub(crate) trait SignsWithKey: Send + Sync + std::fmt::Debug {
    /// Sign again with `new` what verifies under `old`; how many records that was.
    fn resign(&self, old: &Secret<String>, new: &Secret<String>) -> usize;
}

impl Extensions {
    /// Have `signer`'s records signed again when the key is replaced (held weakly).
    pub(crate) fn also_signed_by(&self, signer: Weak<dyn SignsWithKey>) {
        self.signers.lock().push(signer);
    }

    /// Read the keychain's key again; if it is not the key held, take it and sign again with
    /// it what the held key signed. Whether the key was replaced.
    pub(super) fn adopt_keychain_key(&self) -> bool {
        let mut held = self.key.lock();
        let Some(old) = held.clone() else { return false };
        let new = match key::integrity_key(&self.secrets, &self.gemini_dir) {
            Ok(k) => k,
            Err(e) => {
                tracing::warn!(error = %e, "the extension integrity key cannot be read again");
                return false;
            }
        };
        if new.expose() == old.expose() {
            return false;
        }
        let mut resigned = 0;
        for name in self.store.extension_names() {
            let Some(record) = self
                .store
                .extension_record(&name)
                .and_then(|b| serde_json::from_slice::<Record>(&b).ok())
            else {
                continue;
            };
            if !record.is_signed(&name, &old) {
                continue;
            }
            let again = Record::new(&name, record.version.as_deref(), record.files, &new);
            match self.put_record(&name, &again) {
                Ok(()) => resigned += 1,
                Err(e) => {
                    tracing::warn!(extension = name, error = %e, "its record is not signed again")
                }
            }
        }
        let signers: Vec<Arc<dyn SignsWithKey>> =
            self.signers.lock().iter().filter_map(Weak::upgrade).collect();
        for signer in signers {
            resigned += signer.resign(&old, &new);
        }
        *held = Some(new);
        self.checked.lock().clear();
        tracing::info!(
            resigned,
            "the extension integrity key in the keychain is not the one geminid held (both \
             programs made one at the same moment): it is the key now, and geminid's own \
             records are signed again with it"
        );
        true
    }
}
