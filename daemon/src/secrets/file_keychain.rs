//! Gemini CLI's `FileKeychain` (COMPAT §3.4): where Gemini CLI keeps "keychain" secrets when
//! no OS keyring answers, `~/.gemini/gemini-credentials.json`, `ivHex:tagHex:cipherHex` of
//! AES-256-GCM over the JSON `{service: {account: secret}}`, under the key
//! `scrypt("gemini-cli-oauth", "<hostname>-<username>-gemini-cli", 32)` (N 16384, r 8, p 1).
//! Reading and writing it lets geminid and Gemini CLI share secrets on a machine without a
//! keyring, the extension integrity key first of all.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use aws_lc_rs::aead::{AES_256_GCM, Aad, LessSafeKey, Nonce, UnboundKey};

use super::Secret;
use super::store::{hex, unhex};

/// The file's name in `~/.gemini`.
pub(crate) const FILE: &str = "gemini-credentials.json";

/// Why the file cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum FileKeychainError {
    /// It does not decrypt (another machine's or user's, or damaged): Gemini CLI's words.
    #[error("Corrupted credentials file detected at: {}. Please delete or rename this file to resolve the issue.", .0.display())]
    Corrupt(PathBuf),
    /// It cannot be read or written, or the key cannot be made.
    #[error("cannot use {}: {why}", .path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        why: String,
    },
}

/// The file and its key.
pub(crate) struct FileKeychain {
    path: PathBuf,
    key: Secret<[u8; 32]>,
}

impl std::fmt::Debug for FileKeychain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileKeychain").field("path", &self.path).field("key", &self.key).finish()
    }
}

type Data = BTreeMap<String, BTreeMap<String, String>>;

/// The key Gemini CLI derives for this host and user.
pub(crate) fn derive_key(hostname: &str, username: &str) -> Result<[u8; 32], String> {
    let salt = format!("{hostname}-{username}-gemini-cli");
    let params = scrypt::Params::new(14, 8, 1).map_err(|e| e.to_string())?;
    let mut out = [0u8; 32];
    scrypt::scrypt(b"gemini-cli-oauth", salt.as_bytes(), &params, &mut out)
        .map_err(|e| e.to_string())?;
    Ok(out)
}

/// This machine's host name and this user's name, as Node's `os.hostname()` and
/// `os.userInfo().username` give them.
fn host_and_user() -> Result<(String, String), String> {
    #[cfg(unix)]
    {
        let host = nix::unistd::gethostname().map_err(|e| e.to_string())?;
        let user = nix::unistd::User::from_uid(nix::unistd::getuid())
            .map_err(|e| e.to_string())?
            .ok_or("this user has no name in the password database")?;
        Ok((host.to_string_lossy().into_owned(), user.name))
    }
    #[cfg(not(unix))]
    {
        Err("no FileKeychain on this platform".to_owned())
    }
}

impl FileKeychain {
    /// The file in `gemini_dir`, under this machine's and user's key.
    pub(crate) fn new(gemini_dir: &Path) -> Result<Self, FileKeychainError> {
        let path = gemini_dir.join(FILE);
        let io = |why: String| FileKeychainError::Io { path: path.clone(), why };
        let (host, user) = host_and_user().map_err(io)?;
        let key = derive_key(&host, &user).map_err(io)?;
        Ok(Self::with_key(path, key))
    }

    /// The file at `path` under `key`.
    pub(crate) fn with_key(path: PathBuf, key: [u8; 32]) -> Self {
        Self { path, key: Secret::new(key) }
    }

    fn aead(&self) -> Result<LessSafeKey, FileKeychainError> {
        UnboundKey::new(&AES_256_GCM, self.key.expose())
            .map(LessSafeKey::new)
            .map_err(|_| FileKeychainError::Corrupt(self.path.clone()))
    }

    fn load(&self) -> Result<Data, FileKeychainError> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Data::new()),
            Err(e) => {
                return Err(FileKeychainError::Io { path: self.path.clone(), why: e.to_string() });
            }
        };
        self.decrypt(text.trim()).ok_or_else(|| FileKeychainError::Corrupt(self.path.clone()))
    }

    fn decrypt(&self, text: &str) -> Option<Data> {
        let mut parts = text.split(':');
        let (iv, tag, body) = (parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some() {
            return None;
        }
        let (iv, tag, mut body) = (unhex(iv)?, unhex(tag)?, unhex(body)?);
        // Node also takes 16-byte IVs; AES-GCM here takes the standard 12.
        let nonce = Nonce::try_assume_unique_for_key(&iv).ok()?;
        if tag.len() != 16 {
            return None;
        }
        body.extend_from_slice(&tag);
        let plain = self.aead().ok()?.open_in_place(nonce, Aad::empty(), &mut body).ok()?;
        serde_json::from_slice(plain).ok()
    }

    fn encrypt(&self, data: &Data, iv: [u8; 12]) -> Result<String, FileKeychainError> {
        let json = serde_json::to_string_pretty(data).unwrap_or_default();
        let mut body = json.into_bytes();
        let tag = self
            .aead()?
            .seal_in_place_separate_tag(Nonce::assume_unique_for_key(iv), Aad::empty(), &mut body)
            .map_err(|_| FileKeychainError::Corrupt(self.path.clone()))?;
        Ok(format!("{}:{}:{}", hex(&iv), hex(tag.as_ref()), hex(&body)))
    }

    fn save(&self, data: &Data) -> Result<(), FileKeychainError> {
        let io = |e: std::io::Error| FileKeychainError::Io {
            path: self.path.clone(),
            why: e.to_string(),
        };
        let mut iv = [0u8; 12];
        getrandom::fill(&mut iv).map_err(|e| FileKeychainError::Io {
            path: self.path.clone(),
            why: format!("no random source: {e}"),
        })?;
        let text = self.encrypt(data, iv)?;
        super::write_private(&self.path, text.as_bytes()).map_err(io)
    }

    /// `service`/`account`'s secret, if the file has one.
    pub(crate) fn get(
        &self,
        service: &str,
        account: &str,
    ) -> Result<Option<Secret<String>>, FileKeychainError> {
        Ok(self.load()?.get(service).and_then(|a| a.get(account)).cloned().map(Secret::new))
    }

    /// Keep `secret` as `service`/`account` (the file's other entries kept).
    pub(crate) fn set(
        &self,
        service: &str,
        account: &str,
        secret: &Secret<String>,
    ) -> Result<(), FileKeychainError> {
        let mut data = self.load()?;
        data.entry(service.to_owned())
            .or_default()
            .insert(account.to_owned(), secret.expose().clone());
        self.save(&data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Computed with Node's `crypto` as Gemini CLI calls it (host `ci-host`, user `alice`).
    const NODE_KEY: &str = "eccb1e6687c2964218b14a43536fbb88b84821d882e88188505a6a1034420ca9";
    const NODE_FILE: &str = "000102030405060708090a0b:2d3155e9889b6aed1a260bd31d571a2a:8e2b1136b5d61376a3cb54534e4ebe34846e83caa34f2111e36572a6af6c50123a59dc08662e221ee829624aa30956cb747664e8ed42b3afc81e63da330ad18e69c60043989922fdf2dad6e84a840feb951a3d5418a97b0230036d13ecf550cd4a120b149fbf0a726bbdf23c02b622acb6745717f85586a89850f0c4f5826723fd24";

    fn node_keychain(dir: &Path) -> anyhow::Result<FileKeychain> {
        let key = derive_key("ci-host", "alice").map_err(anyhow::Error::msg)?;
        assert_eq!(hex(&key), NODE_KEY, "scrypt as Node computes it");
        Ok(FileKeychain::with_key(dir.join(FILE), key))
    }

    #[test]
    fn reads_and_writes_what_gemini_cli_reads_and_writes() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let kc = node_keychain(dir.path())?;
        std::fs::write(dir.path().join(FILE), NODE_FILE)?;
        let got = kc.get("gemini-cli-extension-integrity", "secret-key")?;
        assert_eq!(got.map(|s| s.expose().clone()), Some("ab".repeat(32)));
        assert_eq!(kc.get("other", "x")?, None);
        // The same data and IV give Node's bytes exactly.
        let data = kc.load()?;
        assert_eq!(kc.encrypt(&data, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11])?, NODE_FILE);
        kc.set("svc", "acct", &Secret::new("v".into()))?;
        assert_eq!(kc.get("svc", "acct")?.map(|s| s.expose().clone()), Some("v".into()));
        assert_eq!(
            kc.get("gemini-cli-extension-integrity", "secret-key")?.map(|s| s.expose().len()),
            Some(64),
            "kept"
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.path().join(FILE))?.permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        Ok(())
    }

    #[test]
    fn another_machines_file_is_corrupt_and_left_alone() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        std::fs::write(dir.path().join(FILE), NODE_FILE)?;
        let other = FileKeychain::with_key(dir.path().join(FILE), [7u8; 32]);
        let e = other.get("gemini-cli-extension-integrity", "secret-key").err();
        assert_eq!(e, Some(FileKeychainError::Corrupt(dir.path().join(FILE))));
        assert!(other.set("a", "b", &Secret::new("c".into())).is_err());
        assert_eq!(std::fs::read_to_string(dir.path().join(FILE))?, NODE_FILE, "untouched");
        for bad in ["", "zz:zz:zz", "00:00", "not hex at all"] {
            std::fs::write(dir.path().join(FILE), bad)?;
            assert!(node_keychain(dir.path())?.get("a", "b").is_err(), "{bad:?}");
        }
        Ok(())
    }
}
