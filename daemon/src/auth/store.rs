//! Stored credentials: one entry per server URL in the secrets store (the OS keyring, or the
//! 0600 file), named `oauth/<resource>`, holding the issuer they came from, the client they
//! were issued to, where to refresh them, and the token. Credentials of one issuer are never
//! used after discovery names another (issuer-keyed, as the MCP authorization spec asks).
//!
//! Writes that replace a token compare first ([`CredentialStore::swap`]): a refresh stores its
//! result only if what is stored is still the credential it refreshed, and a rejected refresh
//! deletes only that one. The calls block; async callers use `spawn_blocking`.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::token::{ClientAuth, Token};
use crate::secrets::store::SecretsError;
use crate::secrets::{Secret, SecretStore};

/// One server's credentials.
#[derive(Debug, Clone)]
pub(crate) struct Credential {
    /// The server URL without query or fragment: what the entry is named by.
    pub resource: String,
    /// The `resource` of its token requests: the one the server's metadata names (the server
    /// URL or a parent of it).
    pub token_resource: String,
    /// The authorization server's issuer, when discovery found one.
    pub issuer: Option<String>,
    /// The client the token was issued to.
    pub client_id: String,
    /// Its secret, when registration made a confidential client (a configured
    /// `oauth.clientSecret` is read from the settings instead).
    pub client_secret: Option<Secret<String>>,
    /// How the client authenticates at the token endpoint.
    pub client_auth: ClientAuth,
    /// Where to refresh it.
    pub token_url: String,
    /// The token.
    pub token: Token,
    /// When it was stored (milliseconds since the Unix epoch).
    pub updated_at_ms: u64,
    /// Where it came from: `signed-in`, or `imported` from Gemini CLI.
    pub origin: String,
}

impl Credential {
    /// Whether `other` holds the same token (access and refresh): what compare-and-swap
    /// compares.
    pub(crate) fn same_token(&self, other: &Credential) -> bool {
        self.token.access == other.token.access && self.token.refresh == other.token.refresh
    }
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Form {
    version: u32,
    resource: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    token_resource: String,
    issuer: Option<String>,
    client_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    client_secret: Option<String>,
    #[serde(default)]
    client_auth: String,
    token_url: String,
    access_token: String,
    refresh_token: Option<String>,
    expires_at: Option<u64>,
    token_type: String,
    scope: Option<String>,
    updated_at: u64,
    origin: String,
}

/// The entry name of a server URL's credentials.
pub(crate) fn entry_name(resource: &str) -> String {
    format!("oauth/{resource}")
}

/// Credentials in the secrets store.
#[derive(Debug, Clone)]
pub(crate) struct CredentialStore {
    secrets: Arc<SecretStore>,
}

impl CredentialStore {
    /// Over `secrets`.
    pub(crate) fn new(secrets: Arc<SecretStore>) -> Self {
        Self { secrets }
    }

    /// Where they are kept, in words.
    pub(crate) fn backend(&self) -> String {
        self.secrets.backend().to_string()
    }

    /// A server URL's credentials.
    pub(crate) fn get(&self, resource: &str) -> Result<Option<Credential>, SecretsError> {
        let Some(bytes) = self.secrets.get(&entry_name(resource))? else { return Ok(None) };
        let form: Form = match serde_json::from_slice(bytes.expose()) {
            Ok(f) => f,
            Err(e) => {
                // Not ours to interpret (a newer version, or damage): treated as none, and
                // replaced by the next sign-in.
                tracing::warn!(resource, error = %e, "stored OAuth credentials do not parse; ignored");
                return Ok(None);
            }
        };
        Ok(Some(Credential {
            token_resource: if form.token_resource.is_empty() {
                form.resource.clone()
            } else {
                form.token_resource
            },
            resource: form.resource,
            issuer: form.issuer,
            client_id: form.client_id,
            client_secret: form.client_secret.map(Secret::new),
            client_auth: ClientAuth::from_name(&form.client_auth),
            token_url: form.token_url,
            token: Token {
                access: Secret::new(form.access_token),
                refresh: form.refresh_token.map(Secret::new),
                expires_at_ms: form.expires_at,
                token_type: form.token_type,
                scope: form.scope,
            },
            updated_at_ms: form.updated_at,
            origin: form.origin,
        }))
    }

    /// Store `c`, replacing what was there.
    pub(crate) fn put(&self, c: &Credential) -> Result<(), SecretsError> {
        let form = Form {
            version: 1,
            resource: c.resource.clone(),
            token_resource: c.token_resource.clone(),
            issuer: c.issuer.clone(),
            client_id: c.client_id.clone(),
            client_secret: c.client_secret.as_ref().map(|s| s.expose().clone()),
            client_auth: c.client_auth.name().to_owned(),
            token_url: c.token_url.clone(),
            access_token: c.token.access.expose().clone(),
            refresh_token: c.token.refresh.as_ref().map(|r| r.expose().clone()),
            expires_at: c.token.expires_at_ms,
            token_type: c.token.token_type.clone(),
            scope: c.token.scope.clone(),
            updated_at: c.updated_at_ms,
            origin: c.origin.clone(),
        };
        let bytes = serde_json::to_vec(&form).unwrap_or_default();
        self.secrets.set(&entry_name(&c.resource), &Secret::new(bytes))
    }

    /// Replace `expected` by `new` (or delete it, with `None`) only if `expected` is still
    /// what is stored; what is stored now either way.
    pub(crate) fn swap(
        &self,
        expected: &Credential,
        new: Option<&Credential>,
    ) -> Result<Swapped, SecretsError> {
        // One daemon owns the tokens; the store's own lock serializes the file's writes, and
        // this read-compare-write runs under the credential's single-flight lock.
        let current = self.get(&expected.resource)?;
        match current {
            Some(now) if now.same_token(expected) => {
                match new {
                    Some(n) => self.put(n)?,
                    None => {
                        self.secrets.delete(&entry_name(&expected.resource))?;
                    }
                }
                Ok(Swapped::Done)
            }
            other => Ok(Swapped::Changed(other.map(Box::new))),
        }
    }

    /// Whether the marker `name` is set.
    pub(crate) fn has_marker(&self, name: &str) -> Result<bool, SecretsError> {
        Ok(self.secrets.get(name)?.is_some())
    }

    /// Set the marker `name`.
    pub(crate) fn set_marker(&self, name: &str) -> Result<(), SecretsError> {
        self.secrets.set(name, &Secret::new(b"1".to_vec()))
    }

    /// Forget a server URL's credentials; whether there were any.
    pub(crate) fn delete(&self, resource: &str) -> Result<bool, SecretsError> {
        self.secrets.delete(&entry_name(resource))
    }
}

/// What [`CredentialStore::swap`] did.
#[derive(Debug)]
pub(crate) enum Swapped {
    /// The expected credential was replaced (or deleted).
    Done,
    /// Something else is stored (or nothing): that, untouched.
    Changed(Option<Box<Credential>>),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cred(access: &str, refresh: &str) -> Credential {
        Credential {
            resource: "https://mcp.test/mcp".into(),
            token_resource: "https://mcp.test/mcp".into(),
            issuer: Some("https://auth.test".into()),
            client_id: "cid".into(),
            client_secret: None,
            client_auth: ClientAuth::None,
            token_url: "https://auth.test/token".into(),
            token: Token {
                access: Secret::new(access.into()),
                refresh: Some(Secret::new(refresh.into())),
                expires_at_ms: Some(10),
                token_type: "Bearer".into(),
                scope: None,
            },
            updated_at_ms: 1,
            origin: "signed-in".into(),
        }
    }

    #[test]
    fn swap_replaces_or_deletes_only_the_credential_expected() {
        let dir = tempfile::tempdir().unwrap();
        let store = CredentialStore::new(Arc::new(SecretStore::file_only(dir.path())));
        let (a, b, c) = (cred("A", "ra"), cred("B", "rb"), cred("C", "rc"));
        store.put(&a).unwrap();
        assert!(matches!(store.swap(&a, Some(&b)).unwrap(), Swapped::Done));
        // A second refresh of the old credential (another process's) does not clobber B.
        let Swapped::Changed(Some(now)) = store.swap(&a, Some(&c)).unwrap() else { panic!() };
        assert_eq!(now.token.access.expose(), "B");
        // Nor does a rejected refresh of the old one delete B.
        assert!(matches!(store.swap(&a, None).unwrap(), Swapped::Changed(Some(_))));
        assert!(matches!(store.swap(&b, None).unwrap(), Swapped::Done));
        assert!(store.get(&a.resource).unwrap().is_none());
        assert!(matches!(store.swap(&b, Some(&c)).unwrap(), Swapped::Changed(None)));
        let text = std::fs::read_to_string(dir.path().join("secrets.json")).unwrap();
        assert!(!text.contains("\"B\""), "values are hex in the file");
    }
}
