//! Where long-lived secrets are kept (OAuth tokens, the extension integrity key): the OS
//! keyring, or, where there is none (a headless Linux machine without a Secret Service, a
//! platform without a keyring), a file only the user can read.
//!
//! The choice is made on first use, once per daemon: the keyring is tried with a read of an
//! entry that does not exist; if the keyring cannot be reached, `secrets.json` in the data
//! directory (0600, in a 0700 directory) is used instead, and that is logged once. A file that
//! does not parse is never overwritten: every write fails naming it, until it is fixed or moved
//! away.
//!
//! The calls block (the keyring is a D-Bus round trip, or a file): async callers run them
//! with `tokio::task::spawn_blocking`.

use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use super::Secret;

/// The keyring service every entry is stored under.
pub(crate) const SERVICE: &str = "geminid";

/// The fallback file's name in the data directory.
pub(crate) const FILE_NAME: &str = "secrets.json";

/// Why a secret could not be read or written.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SecretsError {
    /// The keyring failed (it was reachable when the daemon chose it).
    #[error("the OS keyring failed: {0}")]
    Keyring(String),
    /// The fallback file could not be read or written.
    #[error("cannot use {}: {why}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        why: String,
    },
}

/// Which store is in use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Backend {
    /// The OS keyring.
    Keyring,
    /// The 0600 file; `why` says why the keyring was not used.
    File {
        /// The file.
        path: PathBuf,
        /// Why not the keyring.
        why: String,
    },
}

impl std::fmt::Display for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Keyring => f.write_str("the OS keyring"),
            Self::File { path, .. } => write!(f, "{} (no OS keyring)", path.display()),
        }
    }
}

/// The secrets store.
#[derive(Debug)]
pub(crate) struct SecretStore {
    file: PathBuf,
    /// Chosen on first use.
    backend: OnceLock<Backend>,
    /// Serializes the file's read-modify-write.
    writing: Mutex<()>,
    /// Use the file even if a keyring is there (`--secrets file`, and tests).
    file_only: bool,
}

/// The file's contents: each secret's bytes, hex-encoded.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct FileForm {
    version: u32,
    secrets: BTreeMap<String, String>,
}

/// Bytes as lower-case hex.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Hex back to bytes; none for what is not hex.
pub(crate) fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok()).collect()
}

impl SecretStore {
    /// A store whose fallback file is in `data_dir`; the keyring is tried on first use.
    pub(crate) fn new(data_dir: &Path) -> Self {
        Self {
            file: data_dir.join(FILE_NAME),
            backend: OnceLock::new(),
            writing: Mutex::new(()),
            file_only: false,
        }
    }

    /// A store that only ever uses the file in `data_dir`.
    pub(crate) fn file_only(data_dir: &Path) -> Self {
        Self { file_only: true, ..Self::new(data_dir) }
    }

    /// The store in use (choosing it if nothing has yet).
    pub(crate) fn backend(&self) -> &Backend {
        self.backend.get_or_init(|| {
            let why = if self.file_only {
                "the file was asked for".to_owned()
            } else {
                match keyring::probe() {
                    Ok(()) => {
                        tracing::info!("secrets are kept in the OS keyring");
                        return Backend::Keyring;
                    }
                    Err(why) => why,
                }
            };
            tracing::warn!(file = %self.file.display(), reason = %why, "no OS keyring: secrets are kept in a file only this user can read");
            Backend::File { path: self.file.clone(), why }
        })
    }

    /// A secret by name.
    pub(crate) fn get(&self, name: &str) -> Result<Option<Secret<Vec<u8>>>, SecretsError> {
        match self.backend() {
            Backend::Keyring => keyring::get(name),
            Backend::File { .. } => {
                let form = self.read_file()?;
                let Some(text) = form.secrets.get(name) else { return Ok(None) };
                match unhex(text) {
                    Some(bytes) => Ok(Some(Secret::new(bytes))),
                    None => Err(self.file_error(format!("the value of '{name}' is not hex"))),
                }
            }
        }
    }

    /// Keep a secret under `name`, replacing what was there.
    pub(crate) fn set(&self, name: &str, value: &Secret<Vec<u8>>) -> Result<(), SecretsError> {
        match self.backend() {
            Backend::Keyring => keyring::set(name, value),
            Backend::File { .. } => self.edit(|form| {
                form.secrets.insert(name.to_owned(), hex(value.expose()));
            }),
        }
    }

    /// Forget a secret; whether there was one.
    pub(crate) fn delete(&self, name: &str) -> Result<bool, SecretsError> {
        match self.backend() {
            Backend::Keyring => keyring::delete(name),
            Backend::File { .. } => {
                let mut had = false;
                self.edit(|form| had = form.secrets.remove(name).is_some())?;
                Ok(had)
            }
        }
    }

    /// Whether the OS keyring is in use.
    pub(crate) fn uses_keyring(&self) -> bool {
        matches!(self.backend(), Backend::Keyring)
    }

    /// A secret another program keeps in the OS keyring, under its own `service` (the
    /// extension integrity key Gemini CLI shares); an error where the keyring is not in use.
    pub(crate) fn get_in(
        &self,
        service: &str,
        account: &str,
    ) -> Result<Option<Secret<Vec<u8>>>, SecretsError> {
        match self.backend() {
            Backend::Keyring => keyring::get_in(service, account),
            Backend::File { why, .. } => Err(SecretsError::Keyring(why.clone())),
        }
    }

    /// Keep a secret in the OS keyring under `service`; an error where it is not in use.
    pub(crate) fn set_in(
        &self,
        service: &str,
        account: &str,
        value: &Secret<Vec<u8>>,
    ) -> Result<(), SecretsError> {
        match self.backend() {
            Backend::Keyring => keyring::set_in(service, account, value),
            Backend::File { why, .. } => Err(SecretsError::Keyring(why.clone())),
        }
    }

    fn file_error(&self, why: impl Into<String>) -> SecretsError {
        SecretsError::File { path: self.file.clone(), why: why.into() }
    }

    fn read_file(&self) -> Result<FileForm, SecretsError> {
        let text = match std::fs::read_to_string(&self.file) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(FileForm::default()),
            Err(e) => return Err(self.file_error(e.to_string())),
        };
        serde_json::from_str(&text).map_err(|e| {
            self.file_error(format!(
                "it does not parse ({e}); it is left as it is: move it away to start afresh \
                 (the secrets in it are then lost)"
            ))
        })
    }

    /// Read, change and write the file back whole: a temporary file (0600) renamed over it.
    fn edit(&self, change: impl FnOnce(&mut FileForm)) -> Result<(), SecretsError> {
        let _one = self.writing.lock();
        let mut form = self.read_file()?;
        change(&mut form);
        form.version = 1;
        let dir = self.file.parent().unwrap_or(Path::new("."));
        crate::paths::create_private_dir(dir).map_err(|e| self.file_error(e.to_string()))?;
        let text = serde_json::to_vec_pretty(&form).map_err(|e| self.file_error(e.to_string()))?;
        let mut tmp =
            tempfile::NamedTempFile::new_in(dir).map_err(|e| self.file_error(e.to_string()))?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let private = std::fs::Permissions::from_mode(0o600);
            std::fs::set_permissions(tmp.path(), private)
                .map_err(|e| self.file_error(e.to_string()))?;
        }
        std::io::Write::write_all(&mut tmp, &text).map_err(|e| self.file_error(e.to_string()))?;
        tmp.as_file().sync_all().map_err(|e| self.file_error(e.to_string()))?;
        tmp.persist(&self.file).map_err(|e| self.file_error(e.error.to_string()))?;
        Ok(())
    }
}

#[cfg(any(target_os = "linux", target_os = "macos", windows))]
mod keyring {
    //! The OS keyring, through the `keyring` crate, on one thread of its own.
    //!
    //! On Linux the crate reaches the Secret Service through zbus, whose blocking calls run
    //! a runtime of their own: called from a thread inside geminid's tokio runtime (an event
    //! loop worker), that panics ("Cannot start a runtime from within a runtime"). So every
    //! keyring call runs on one owner thread that is in no runtime, the caller waits for its
    //! answer with a bound (a hung D-Bus must not hang a start or an RPC), and a panic inside
    //! the crate is an error, never the daemon's end.

    use parking_lot::Mutex;
    use std::sync::OnceLock;
    use std::sync::mpsc;
    use std::time::Duration;

    use super::{SERVICE, Secret, SecretsError};

    /// An entry name no one uses: reading it tells whether the keyring answers.
    const PROBE: &str = "geminid-probe";

    /// How long the first probe may take before the keyring counts as absent: a missing or
    /// hung D-Bus answers "no keyring" within this.
    pub(super) const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

    /// How long any other keyring call may take (an unlock prompt may be on screen).
    pub(super) const CALL_TIMEOUT: Duration = Duration::from_secs(20);

    type Job = Box<dyn FnOnce() + Send>;

    /// The owner thread's queue, started on first use.
    fn owner() -> Result<mpsc::Sender<Job>, SecretsError> {
        static OWNER: OnceLock<Mutex<Option<mpsc::Sender<Job>>>> = OnceLock::new();
        let slot = OWNER.get_or_init(|| {
            let (tx, rx) = mpsc::channel::<Job>();
            let started =
                std::thread::Builder::new().name("geminid-keyring".to_owned()).spawn(move || {
                    for job in rx {
                        job();
                    }
                });
            Mutex::new(started.ok().map(|_| tx))
        });
        slot.lock()
            .clone()
            .ok_or_else(|| SecretsError::Keyring("cannot start the keyring thread".to_owned()))
    }

    /// Run `f` on the owner thread and wait up to `bound` for its answer.
    fn on_owner<T: Send + 'static>(
        bound: Duration,
        f: impl FnOnce() -> Result<T, SecretsError> + Send + 'static,
    ) -> Result<T, SecretsError> {
        let (tx, rx) = mpsc::sync_channel(1);
        let job: Job = Box::new(move || {
            let answer =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|panic| {
                    let what = crate::panic_text(panic.as_ref());
                    Err(SecretsError::Keyring(format!("the keyring library panicked: {what}")))
                });
            let _ = tx.send(answer);
        });
        owner()?
            .send(job)
            .map_err(|_| SecretsError::Keyring("the keyring thread has stopped".to_owned()))?;
        match rx.recv_timeout(bound) {
            Ok(answer) => answer,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                Err(SecretsError::Keyring(format!("the keyring did not answer within {bound:?}")))
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                Err(SecretsError::Keyring("the keyring thread has stopped".to_owned()))
            }
        }
    }

    fn entry_in(service: &str, name: &str) -> Result<keyring::Entry, SecretsError> {
        keyring::Entry::new(service, name).map_err(|e| SecretsError::Keyring(e.to_string()))
    }

    pub(super) fn get_in(
        service: &str,
        name: &str,
    ) -> Result<Option<Secret<Vec<u8>>>, SecretsError> {
        let (service, name) = (service.to_owned(), name.to_owned());
        on_owner(CALL_TIMEOUT, move || match entry_in(&service, &name)?.get_secret() {
            Ok(bytes) => Ok(Some(Secret::new(bytes))),
            Err(keyring::Error::NoEntry) => Ok(None),
            Err(e) => Err(SecretsError::Keyring(e.to_string())),
        })
    }

    pub(super) fn set_in(
        service: &str,
        name: &str,
        value: &Secret<Vec<u8>>,
    ) -> Result<(), SecretsError> {
        let (service, name, value) = (service.to_owned(), name.to_owned(), value.clone());
        on_owner(CALL_TIMEOUT, move || {
            entry_in(&service, &name)?
                .set_secret(value.expose())
                .map_err(|e| SecretsError::Keyring(e.to_string()))
        })
    }

    /// `Ok` when the keyring answers within [`PROBE_TIMEOUT`].
    pub(super) fn probe() -> Result<(), String> {
        on_owner(PROBE_TIMEOUT, || match entry_in(SERVICE, PROBE)?.get_secret() {
            Ok(_) | Err(keyring::Error::NoEntry) => Ok(()),
            Err(e) => Err(SecretsError::Keyring(e.to_string())),
        })
        .map_err(|e| match e {
            SecretsError::Keyring(why) => why,
            other => other.to_string(),
        })
    }

    pub(super) fn get(name: &str) -> Result<Option<Secret<Vec<u8>>>, SecretsError> {
        get_in(SERVICE, name)
    }

    pub(super) fn set(name: &str, value: &Secret<Vec<u8>>) -> Result<(), SecretsError> {
        set_in(SERVICE, name, value)
    }

    pub(super) fn delete(name: &str) -> Result<bool, SecretsError> {
        let name = name.to_owned();
        on_owner(CALL_TIMEOUT, move || match entry_in(SERVICE, &name)?.delete_credential() {
            Ok(()) => Ok(true),
            Err(keyring::Error::NoEntry) => Ok(false),
            Err(e) => Err(SecretsError::Keyring(e.to_string())),
        })
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        /// The fault that crashed the daemon at start: the keyring asked from inside tokio's
        /// event loop. Every call must answer (or fail) there, never panic.
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn keyring_calls_from_inside_the_runtime_answer_and_never_panic() {
            for _ in 0..5 {
                let probed = probe();
                let got = get("geminid-test-absent");
                if probed.is_ok() {
                    assert!(got.is_ok(), "{got:?}");
                }
            }
            let on_worker = tokio::spawn(async { (probe(), get_in("x", "y").is_err()) });
            assert!(on_worker.await.is_ok(), "a keyring call on a worker panicked");
        }

        #[test]
        fn a_panic_or_a_hang_on_the_owner_thread_is_an_error() {
            let e = on_owner::<()>(Duration::from_secs(5), || panic!("boom")).unwrap_err();
            assert!(e.to_string().contains("panicked: boom"), "{e}");
            // The owner thread hangs until the caller has given up on it.
            let (release, hung) = std::sync::mpsc::channel::<()>();
            let e = on_owner::<()>(Duration::from_millis(50), move || {
                let _ = hung.recv();
                Ok(())
            })
            .unwrap_err();
            assert!(e.to_string().contains("did not answer within"), "{e}");
            drop(release);
            // The thread lives on after both.
            assert_eq!(on_owner(Duration::from_secs(5), || Ok(7)).unwrap(), 7);
        }
    }
}

#[cfg(not(any(target_os = "linux", target_os = "macos", windows)))]
mod keyring {
    //! No keyring on this platform: the file is always used.

    use super::{Secret, SecretsError};

    pub(super) fn probe() -> Result<(), String> {
        Err("this platform has no OS keyring geminid can use".to_owned())
    }

    pub(super) fn get(_: &str) -> Result<Option<Secret<Vec<u8>>>, SecretsError> {
        Err(SecretsError::Keyring("no keyring".to_owned()))
    }

    pub(super) fn set(_: &str, _: &Secret<Vec<u8>>) -> Result<(), SecretsError> {
        Err(SecretsError::Keyring("no keyring".to_owned()))
    }

    pub(super) fn delete(_: &str) -> Result<bool, SecretsError> {
        Err(SecretsError::Keyring("no keyring".to_owned()))
    }

    pub(super) fn get_in(_: &str, _: &str) -> Result<Option<Secret<Vec<u8>>>, SecretsError> {
        Err(SecretsError::Keyring("no keyring".to_owned()))
    }

    pub(super) fn set_in(_: &str, _: &str, _: &Secret<Vec<u8>>) -> Result<(), SecretsError> {
        Err(SecretsError::Keyring("no keyring".to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn secret(s: &str) -> Secret<Vec<u8>> {
        Secret::new(s.as_bytes().to_vec())
    }

    #[test]
    fn the_file_keeps_secrets_private_and_across_instances() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("geminid");
        let store = SecretStore::file_only(&data);
        assert!(matches!(store.backend(), Backend::File { .. }));
        assert_eq!(store.get("oauth/github").unwrap(), None);
        store.set("oauth/github", &secret("gho_token\u{0}binary")).unwrap();
        store.set("integrity-key", &secret("k")).unwrap();
        let path = data.join(FILE_NAME);
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!((mode(&path), mode(&data)), (0o600, 0o700));
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(!text.contains("gho_token"), "values are not stored as text: {text}");
        let again = SecretStore::file_only(&data);
        let got = again.get("oauth/github").unwrap().unwrap();
        assert_eq!(got.expose(), b"gho_token\x00binary");
        assert_eq!(format!("{got:?} {again:?}").matches("gho").count(), 0);
        assert!(again.delete("oauth/github").unwrap());
        assert!(!again.delete("oauth/github").unwrap());
        assert_eq!(store.get("oauth/github").unwrap(), None);
        assert_eq!(store.get("integrity-key").unwrap().unwrap().expose(), b"k");
    }

    #[test]
    fn a_file_that_does_not_parse_is_never_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(FILE_NAME), "{ not json").unwrap();
        let store = SecretStore::file_only(dir.path());
        let e = store.set("a", &secret("b")).unwrap_err().to_string();
        assert!(e.contains(FILE_NAME) && e.contains("move it away"), "{e}");
        let e = store.get("a").unwrap_err().to_string();
        assert!(e.contains("does not parse"), "{e}");
        let kept = std::fs::read_to_string(dir.path().join(FILE_NAME)).unwrap();
        assert_eq!(kept, "{ not json", "untouched");
    }

    /// On a machine without a Secret Service (this one, and CI), the store falls back to the
    /// file by itself, and works.
    #[test]
    fn without_a_keyring_the_store_falls_back_to_the_file() {
        let bus = std::env::var_os("DBUS_SESSION_BUS_ADDRESS");
        let runtime_bus = std::env::var_os("XDG_RUNTIME_DIR")
            .map(|d| Path::new(&d).join("bus"))
            .is_some_and(|p| p.exists());
        if bus.is_some() || runtime_bus || !cfg!(target_os = "linux") {
            eprintln!("skipped: this machine may have a keyring");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let store = SecretStore::new(dir.path());
        match store.backend() {
            Backend::File { path, why } => {
                assert_eq!(path, &dir.path().join(FILE_NAME));
                assert!(!why.is_empty());
            }
            Backend::Keyring => panic!("no D-Bus here, yet the keyring answered"),
        }
        store.set("k", &secret("v")).unwrap();
        assert_eq!(store.get("k").unwrap().unwrap().expose(), b"v");
        assert!(store.backend().to_string().contains("no OS keyring"));
    }

    #[test]
    fn hex_round_trips_and_refuses_what_is_not_hex() {
        let all: Vec<u8> = (0..=255).collect();
        assert_eq!(unhex(&hex(&all)).unwrap(), all);
        assert_eq!(unhex("abc"), None);
        assert_eq!(unhex("zz"), None);
    }
}
