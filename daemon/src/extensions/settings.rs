//! Extension settings (COMPAT §6.2): the values of a manifest's `settings`, given at install.
//! A plain one goes to the extension's `.env` (`KEY=value`, quoted when it has a space, as
//! Gemini CLI writes it); a `sensitive` one to Gemini CLI's keychain (the OS keyring, else its
//! FileKeychain), service `Gemini CLI Extensions <name> <id>`, account `__secret__<ENVVAR>`,
//! where Gemini CLI reads it too. The extension's id is the SHA-256 of its GitHub URL, else of
//! its install source, else of its name.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::ExtensionError;
use super::manifest::Manifest;
use crate::secrets::store::hex;
use crate::secrets::{Secret, SecretStore};

/// The prefix of a secret's account.
pub(crate) const SECRET_PREFIX: &str = "__secret__";

/// `https://github.com/owner/repo` for a GitHub source.
fn github_url(source: &str) -> Option<String> {
    let rest = source
        .strip_prefix("https://github.com/")
        .or_else(|| source.strip_prefix("http://github.com/"))
        .or_else(|| source.strip_prefix("git@github.com:"))
        .or_else(|| source.strip_prefix("github:"))?;
    let mut parts = rest.trim_end_matches('/').splitn(3, '/');
    let (owner, repo) = (parts.next()?, parts.next()?);
    let repo = repo.strip_suffix(".git").unwrap_or(repo);
    (!owner.is_empty() && !repo.is_empty()).then(|| format!("https://github.com/{owner}/{repo}"))
}

/// The extension's id, as Gemini CLI computes it.
pub(crate) fn extension_id(name: &str, metadata: Option<&Value>) -> String {
    let source = metadata.and_then(|m| m.get("source")).and_then(Value::as_str);
    let remote = metadata
        .and_then(|m| m.get("type"))
        .and_then(Value::as_str)
        .is_some_and(|t| t == "git" || t == "github-release");
    let value = match source {
        Some(s) if remote => github_url(s).unwrap_or_else(|| s.to_owned()),
        Some(s) => s.to_owned(),
        None => name.to_owned(),
    };
    hex(&Sha256::digest(value.as_bytes()))
}

/// The keychain service of an extension's user-scope secrets.
pub(crate) fn keychain_service(name: &str, id: &str) -> String {
    format!("Gemini CLI Extensions {name} {id}")
}

/// `.env` text for these values, as Gemini CLI formats it.
pub(crate) fn format_env(values: &BTreeMap<String, String>) -> Result<String, ExtensionError> {
    let mut out = String::new();
    for (k, v) in values {
        if v.contains('\n') || v.contains('\r') {
            return Err(ExtensionError::Refused(format!(
                "the value of {k} has a line break; settings are one line"
            )));
        }
        let v = if v.contains(' ') {
            format!("\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\""))
        } else {
            v.clone()
        };
        out.push_str(&format!("{k}={v}\n"));
    }
    Ok(out)
}

/// Where Gemini CLI's keychain is: the OS keyring, else its FileKeychain.
pub(super) struct Keychain<'a> {
    pub(super) secrets: &'a SecretStore,
    #[cfg_attr(
        windows,
        allow(dead_code, reason = "Windows keeps Gemini CLI's keychain in the OS keyring only")
    )]
    pub(super) gemini_dir: &'a Path,
}

/// Why Gemini CLI's keychain could not be read or written.
#[derive(Debug, thiserror::Error)]
pub(super) enum KeychainError {
    /// The OS keyring failed.
    #[error(transparent)]
    Keyring(#[from] crate::secrets::store::SecretsError),
    /// Gemini CLI's FileKeychain (`gemini-credentials.json`) could not be opened or written.
    #[cfg(not(windows))]
    #[error(transparent)]
    File(#[from] crate::secrets::file_keychain::FileKeychainError),
    /// No keyring answers, and the FileKeychain is not used on Windows.
    #[cfg(windows)]
    #[error("no keyring answers, and Gemini CLI's FileKeychain is not read on Windows")]
    NoFile,
}

impl Keychain<'_> {
    /// `service`/`account`'s secret.
    pub(super) fn get(
        &self,
        service: &str,
        account: &str,
    ) -> Result<Option<Secret<String>>, KeychainError> {
        if self.secrets.uses_keyring() {
            let got = self.secrets.get_in(service, account)?;
            return Ok(got.map(|b| Secret::new(String::from_utf8_lossy(b.expose()).into_owned())));
        }
        #[cfg(not(windows))]
        return Ok(self.file()?.get(service, account)?);
        #[cfg(windows)]
        Err(KeychainError::NoFile)
    }

    /// Keep `value` as `service`/`account`.
    pub(super) fn set(
        &self,
        service: &str,
        account: &str,
        value: &Secret<String>,
    ) -> Result<(), KeychainError> {
        if self.secrets.uses_keyring() {
            let bytes = Secret::new(value.expose().clone().into_bytes());
            return Ok(self.secrets.set_in(service, account, &bytes)?);
        }
        #[cfg(not(windows))]
        return Ok(self.file()?.set(service, account, value)?);
        #[cfg(windows)]
        Err(KeychainError::NoFile)
    }

    #[cfg(not(windows))]
    fn file(&self) -> Result<crate::secrets::file_keychain::FileKeychain, KeychainError> {
        Ok(crate::secrets::file_keychain::FileKeychain::new(self.gemini_dir)?)
    }
}

/// Check `given` against the manifest's settings: each must be declared.
pub(crate) fn check_given(
    m: &Manifest,
    given: &BTreeMap<String, String>,
) -> Result<(), ExtensionError> {
    for k in given.keys() {
        if !m.settings.iter().any(|s| &s.env_var == k) {
            let known: Vec<&str> = m.settings.iter().map(|s| s.env_var.as_str()).collect();
            return Err(ExtensionError::Refused(format!(
                "{k} is not a setting of {} (its settings: {})",
                m.name,
                if known.is_empty() { "none".to_owned() } else { known.join(", ") }
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_env_text_as_gemini_cli_makes_them() -> anyhow::Result<()> {
        let hash = |s: &str| hex(&Sha256::digest(s.as_bytes()));
        let git = |s: &str| serde_json::json!({"type": "git", "source": s});
        for src in
            ["https://github.com/o/r", "https://github.com/o/r.git", "git@github.com:o/r.git"]
        {
            assert_eq!(extension_id("x", Some(&git(src))), hash("https://github.com/o/r"), "{src}");
        }
        assert_eq!(
            extension_id("x", Some(&git("https://gitlab.com/o/r"))),
            hash("https://gitlab.com/o/r")
        );
        let local = serde_json::json!({"type": "local", "source": "/src/ext"});
        assert_eq!(extension_id("x", Some(&local)), hash("/src/ext"));
        assert_eq!(extension_id("x", None), hash("x"));
        let values: BTreeMap<String, String> =
            [("A", "plain"), ("B", "two words"), ("C", r#"say "hi" \ there"#)]
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect();
        assert_eq!(
            format_env(&values).map_err(|e| anyhow::anyhow!("{e}"))?,
            "A=plain\nB=\"two words\"\nC=\"say \\\"hi\\\" \\\\ there\"\n"
        );
        let bad = BTreeMap::from([("A".to_owned(), "a\nb".to_owned())]);
        assert!(format_env(&bad).is_err());
        Ok(())
    }
}
