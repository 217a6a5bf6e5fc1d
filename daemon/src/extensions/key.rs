//! The integrity key (COMPAT §6.4): 32 random bytes, as 64 hex digits, in the OS keyring
//! under Gemini CLI's own names (service `gemini-cli-extension-integrity`, account
//! `secret-key`), so both programs sign and verify with one key; where no keyring works, in
//! Gemini CLI's FileKeychain (`~/.gemini/gemini-credentials.json`, where Gemini CLI looks
//! then); where that cannot be used either (it does not decrypt), `~/.gemini/integrity.key`
//! (0600), as Gemini CLI falls back to. A key file that is not 64
//! hex digits is refused with how to reset it; nothing overwrites it.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::secrets::{Secret, SecretStore};

/// Gemini CLI's keyring service for the key.
pub(crate) const KEYRING_SERVICE: &str = "gemini-cli-extension-integrity";
/// Gemini CLI's keyring account for the key.
pub(crate) const KEYRING_ACCOUNT: &str = "secret-key";
/// The fallback file in `~/.gemini`.
pub(crate) const KEY_FILE: &str = "integrity.key";

/// Why there is no key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum KeyError {
    /// The key file holds something else than a key.
    #[error(
        "{} is not an extension integrity key (64 hex digits): delete it and \
         {} to reset (a new key is made; then `gemctl extensions accept NAME` re-signs each \
         extension)", .0.display(), crate::extensions::integrity::STORE_FILE
    )]
    Corrupt(PathBuf),
    /// It cannot be read or made.
    #[error("cannot use the extension integrity key {}: {why}", .path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        why: String,
    },
}

fn valid(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A fresh key: 32 bytes from the OS's random source, hex.
fn fresh() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// The key: the keyring's, else the file's; made (and kept) on first use.
pub(crate) fn integrity_key(
    secrets: &SecretStore,
    gemini_dir: &Path,
) -> Result<Secret<String>, KeyError> {
    if secrets.uses_keyring() {
        match secrets.get_in(KEYRING_SERVICE, KEYRING_ACCOUNT) {
            Ok(Some(bytes)) => {
                let text = String::from_utf8_lossy(bytes.expose()).trim().to_owned();
                if valid(&text) {
                    return Ok(Secret::new(text));
                }
                tracing::warn!(
                    "the keyring's extension integrity key is not 64 hex digits; using the key file"
                );
            }
            Ok(None) => {
                let path = gemini_dir.join(KEY_FILE);
                let key = fresh()
                    .map_err(|e| KeyError::Io { path, why: format!("no random source: {e}") })?;
                match secrets.set_in(
                    KEYRING_SERVICE,
                    KEYRING_ACCOUNT,
                    &Secret::new(key.clone().into_bytes()),
                ) {
                    Ok(()) => return Ok(Secret::new(key)),
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot keep the extension integrity key in the keyring; using the key file")
                    }
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "the keyring failed; using the extension integrity key file")
            }
        }
    }
    // Where no keyring answers, Gemini CLI keeps its "keychain" in its FileKeychain: the key
    // must be the one Gemini CLI finds there, or neither program verifies the other's records.
    #[cfg(not(windows))]
    match in_file_keychain(secrets, gemini_dir) {
        Ok(key) => return Ok(key),
        Err(why) => {
            tracing::warn!(%why, "Gemini CLI's credentials file cannot hold the extension integrity key; using integrity.key, as Gemini CLI then does")
        }
    }
    from_file(&gemini_dir.join(KEY_FILE))
}

/// The name geminid keeps the FileKeychain's key under in its own secrets file.
#[cfg(not(windows))]
const CACHED: &str = "extension-integrity-key";

/// `gemini-credentials.json`'s size, modification time and inode: the cached key is the
/// file's only while these stay.
#[cfg(not(windows))]
fn stamp(path: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some(format!("{}:{}:{}:{}", m.len(), m.mtime(), m.mtime_nsec(), m.ino()))
}

/// Why Gemini CLI's FileKeychain gave no key.
#[cfg(not(windows))]
#[derive(Debug, thiserror::Error)]
enum FileKeyError {
    /// The file could not be opened, read or written.
    #[error(transparent)]
    File(#[from] crate::secrets::file_keychain::FileKeychainError),
    /// It holds no key, and none could be made.
    #[error("no random source: {0}")]
    Random(#[from] getrandom::Error),
}

/// The key in Gemini CLI's FileKeychain (`gemini-credentials.json`), made there if it has none.
/// Any string Gemini CLI stored is its key, as Gemini CLI uses it. Opening that file costs a
/// scrypt derivation (tens of milliseconds), so the key is also kept in geminid's own secrets
/// (0600, or the keyring), tagged with the file's stamp: a start whose file did not change
/// skips the derivation.
#[cfg(not(windows))]
fn in_file_keychain(
    secrets: &SecretStore,
    gemini_dir: &Path,
) -> Result<Secret<String>, FileKeyError> {
    use crate::secrets::file_keychain::{FILE, FileKeychain};
    let path = gemini_dir.join(FILE);
    if let (Some(now), Ok(Some(cached))) = (stamp(&path), secrets.get(CACHED)) {
        let text = String::from_utf8_lossy(cached.expose()).into_owned();
        if let Some((was, key)) = text.split_once('|')
            && was == now
            && !key.is_empty()
        {
            return Ok(Secret::new(key.to_owned()));
        }
    }
    let kc = FileKeychain::new(gemini_dir)?;
    let key = match kc.get(KEYRING_SERVICE, KEYRING_ACCOUNT)? {
        Some(key) if !key.expose().is_empty() => key,
        _ => {
            let key = Secret::new(fresh()?);
            kc.set(KEYRING_SERVICE, KEYRING_ACCOUNT, &key)?;
            key
        }
    };
    if let Some(now) = stamp(&path) {
        let entry = Secret::new(format!("{now}|{}", key.expose()).into_bytes());
        if let Err(e) = secrets.set(CACHED, &entry) {
            tracing::debug!(error = %e, "the extension integrity key is not cached");
        }
    }
    Ok(key)
}

/// The key file's key, made if there is none.
pub(crate) fn from_file(path: &Path) -> Result<Secret<String>, KeyError> {
    let io = |e: std::io::Error| KeyError::Io { path: path.to_owned(), why: e.to_string() };
    match std::fs::read_to_string(path) {
        Ok(text) => {
            let text = text.trim();
            if valid(text) {
                Ok(Secret::new(text.to_owned()))
            } else {
                Err(KeyError::Corrupt(path.to_owned()))
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir).map_err(io)?;
            }
            let key = fresh().map_err(|e| KeyError::Io {
                path: path.to_owned(),
                why: format!("no random source: {e}"),
            })?;
            let mut options = std::fs::OpenOptions::new();
            options.write(true).create_new(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
            match options.open(path) {
                Ok(mut f) => {
                    f.write_all(key.as_bytes()).map_err(io)?;
                    Ok(Secret::new(key))
                }
                // Another process made it first: that one is the key.
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => from_file(path),
                Err(e) => Err(io(e)),
            }
        }
        Err(e) => Err(io(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_lives_in_gemini_clis_file_keychain_then_in_the_key_file() {
        let dir = tempfile::tempdir().unwrap();
        let secrets = SecretStore::file_only(&dir.path().join("data"));
        let gemini = dir.path().join(".gemini");
        // No keyring: Gemini CLI's FileKeychain holds it, where Gemini CLI looks for it.
        let first = integrity_key(&secrets, &gemini).unwrap();
        assert!(valid(first.expose()));
        assert!(gemini.join(crate::secrets::file_keychain::FILE).is_file());
        assert!(!gemini.join(KEY_FILE).exists());
        assert_eq!(integrity_key(&secrets, &gemini).unwrap(), first, "kept");
        let kc = crate::secrets::file_keychain::FileKeychain::new(&gemini).unwrap();
        assert_eq!(kc.get(KEYRING_SERVICE, KEYRING_ACCOUNT).unwrap(), Some(first.clone()));
        // Kept in geminid's secrets with the file's stamp, so a start skips the scrypt: while
        // the file is unchanged the cached key is the one used.
        let cached =
            String::from_utf8(secrets.get(CACHED).unwrap().unwrap().expose().clone()).unwrap();
        let (was, key) = cached.split_once('|').unwrap();
        assert_eq!(key, first.expose());
        let planted = Secret::new(format!("{was}|{}", "cd".repeat(32)).into_bytes());
        secrets.set(CACHED, &planted).unwrap();
        assert_eq!(integrity_key(&secrets, &gemini).unwrap().expose(), &"cd".repeat(32));
        secrets.set(CACHED, &Secret::new(cached.into_bytes())).unwrap();

        // A credentials file that does not decrypt (another machine's): Gemini CLI's keychain
        // throws and it falls back to integrity.key; so does geminid, leaving the file alone.
        std::fs::write(gemini.join(crate::secrets::file_keychain::FILE), "00:00:00").unwrap();
        let key = integrity_key(&secrets, &gemini).unwrap();
        assert_ne!(key, first);
        assert!(valid(key.expose()));
        assert_eq!(integrity_key(&secrets, &gemini).unwrap(), key, "kept");
        assert_ne!(from_file(&dir.path().join("other.key")).unwrap(), key, "random");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(gemini.join(KEY_FILE)).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        // Gemini CLI writes the hex with no newline; one at the end is fine too.
        std::fs::write(gemini.join(KEY_FILE), format!("{}\n", key.expose())).unwrap();
        assert_eq!(integrity_key(&secrets, &gemini).unwrap(), key);
        std::fs::write(gemini.join(KEY_FILE), "not a key").unwrap();
        let e = integrity_key(&secrets, &gemini).unwrap_err();
        assert_eq!(e, KeyError::Corrupt(gemini.join(KEY_FILE)));
        assert!(
            e.to_string().contains("delete it")
                && e.to_string().contains("gemctl extensions accept"),
            "{e}"
        );
        assert_eq!(
            std::fs::read_to_string(gemini.join(KEY_FILE)).unwrap(),
            "not a key",
            "untouched"
        );
    }
}
