//! Values that must never be printed: a child's environment, request headers (tokens and
//! keys come later). A [`Secret`] prints `[redacted]` in `Debug` and `Display`, and has no
//! `Serialize`: what must read it (spawning a child, sending a request, hashing an identity)
//! says so with [`Secret::expose`] or [`expose`].

use std::fmt;

#[cfg(not(windows))]
pub(crate) mod file_keychain;
pub(crate) mod store;

pub(crate) use store::{Backend, SecretStore};

/// Write `bytes` to `path` whole or not at all, readable by the owner only (0600 on Unix): a
/// temporary file beside it, renamed over it. Its folder is made if missing.
pub(crate) fn write_private(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(std::path::Path::new("."));
    std::fs::create_dir_all(dir)?;
    let tmp = tempfile::NamedTempFile::new_in(dir)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o600))?;
    }
    std::fs::write(tmp.path(), bytes)?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// A value that prints as `[redacted]`.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct Secret<T>(T);

impl<T> Secret<T> {
    /// Wrap `value`.
    pub(crate) fn new(value: T) -> Self {
        Self(value)
    }

    /// The value, for the one place that needs it.
    pub(crate) fn expose(&self) -> &T {
        &self.0
    }
}

impl<T> From<T> for Secret<T> {
    fn from(value: T) -> Self {
        Self(value)
    }
}

impl<T> fmt::Debug for Secret<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

impl<T> fmt::Display for Secret<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

/// Serialize a secret's value, for `#[serde(serialize_with = "expose")]` where a structure
/// is hashed (a server's identity) and never shown.
pub(crate) fn expose<T: serde::Serialize, S: serde::Serializer>(
    secret: &Secret<T>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    secret.0.serialize(serializer)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_prints_as_redacted_and_serializes_only_when_exposed() {
        let s = Secret::new(String::from("ghp_0123456789"));
        assert_eq!(format!("{s:?}"), "[redacted]");
        assert_eq!(format!("{s}"), "[redacted]");
        assert_eq!(format!("{:?}", Some(&s)), "Some([redacted])");
        assert_eq!(s.expose(), "ghp_0123456789");
        #[derive(serde::Serialize)]
        struct Hashed {
            #[serde(serialize_with = "expose")]
            token: Secret<String>,
        }
        let json = serde_json::to_string(&Hashed { token: s }).unwrap();
        assert_eq!(json, r#"{"token":"ghp_0123456789"}"#);
    }
}
