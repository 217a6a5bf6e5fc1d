//! The one owner of every OAuth token: tokens handed to connections (refreshed before they
//! expire, and when a server answers 401 to one), sign-ins, and sign-outs.
//!
//! Refresh is single-flight per credential: callers that find the same expired (or rejected)
//! token queue on its lock, and all but the first find the new token already there. The store
//! is written by compare-and-swap ([`CredentialStore::swap`]): a refresh stores its result
//! only over the token it refreshed, and a refused refresh (`invalid_grant`) deletes only
//! that token. A network error or a 5xx is retried with backoff and deletes nothing.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use super::discovery;
use super::import::{self, Imported};
use super::store::{Credential, CredentialStore, Swapped};
use super::token::{self, TokenError};
use super::{AuthError, Target};
use crate::clock;
use crate::secrets::{Secret, SecretStore};

/// Tries of a refresh that fails for a reason that may pass (network, 5xx).
const REFRESH_TRIES: u32 = 3;

/// A refresh's span (`token refresh {server}`, a trace of its own) told how it ended: its
/// outcome (`geminid.oauth.refresh.outcome`: `refreshed`, `invalid_grant`, `rejected`,
/// `not_a_token`, `unreachable`, also `error.type`) and the tries it took. Never a token, nor
/// what the authorization server said.
fn traced(span: &crate::telemetry::Active, outcome: &Result<token::Token, TokenError>, tries: u32) {
    use opentelemetry::KeyValue;
    let error = match outcome {
        Ok(_) => None,
        Err(TokenError::InvalidGrant(_)) => Some("invalid_grant"),
        Err(TokenError::Rejected { .. }) => Some("rejected"),
        Err(TokenError::NotAToken { .. }) => Some("not_a_token"),
        Err(TokenError::Unreachable(_)) => Some("unreachable"),
    };
    span.set(KeyValue::new("geminid.oauth.refresh.outcome", error.unwrap_or("refreshed")));
    span.set(KeyValue::new("geminid.oauth.refresh.tries", i64::from(tries)));
    if let Some(e) = error {
        span.failed(e, e);
    }
}

#[derive(Debug, Default)]
enum Cached {
    /// Not read from the store yet.
    #[default]
    Unknown,
    /// Read: nothing stored.
    Absent,
    /// Read.
    Held(Arc<Credential>),
}

/// One credential's lock and what is known of it.
#[derive(Debug, Default)]
pub(super) struct Slot {
    pub(super) flight: tokio::sync::Mutex<()>,
    cached: Mutex<Cached>,
    /// Why the credentials were removed (a refused refresh), until the next sign-in.
    pub(super) gone: Mutex<Option<String>>,
    /// Scopes a server asked for beyond the token's (`insufficient_scope`), for the next
    /// sign-in.
    pub(super) wanted: Mutex<Vec<String>>,
    /// The `WWW-Authenticate` of the server's last 401, for the next sign-in's discovery.
    pub(super) challenge: Mutex<Option<String>>,
}

impl Slot {
    pub(super) fn held(&self) -> Option<Arc<Credential>> {
        match &*self.cached.lock() {
            Cached::Held(c) => Some(c.clone()),
            _ => None,
        }
    }

    pub(super) fn set(&self, c: Option<Arc<Credential>>) {
        *self.cached.lock() = match c {
            Some(c) => Cached::Held(c),
            None => Cached::Absent,
        };
    }
}

/// The marker that a server's Gemini CLI token was imported.
fn r_import_marker(server: &str) -> String {
    format!("oauth-imported/{server}")
}

/// Every server's OAuth credentials.
#[derive(Debug)]
pub(crate) struct Auth {
    store: CredentialStore,
    pub(super) http: reqwest::Client,
    slots: Mutex<HashMap<String, Arc<Slot>>>,
    /// Gemini CLI's token file, read once for import.
    gemini_tokens: PathBuf,
    imported: OnceLock<Result<Vec<Imported>, String>>,
    /// The first retry's delay (it quadruples).
    backoff: Duration,
    /// Tokens of the Google providers.
    pub google: super::google_seat::GoogleSeat,
}

impl Auth {
    /// Over the daemon's secrets; Gemini CLI's tokens are imported from `gemini_dir`.
    pub(crate) fn new(secrets: Arc<SecretStore>, gemini_dir: PathBuf) -> Self {
        Self {
            store: CredentialStore::new(secrets),
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(30))
                .redirect(reqwest::redirect::Policy::limited(5))
                .build()
                .unwrap_or_default(),
            slots: Mutex::default(),
            gemini_tokens: gemini_dir.join("mcp-oauth-tokens.json"),
            imported: OnceLock::new(),
            backoff: Duration::from_millis(250),
            google: super::google_seat::GoogleSeat::from_env(|k| std::env::var(k).ok()),
        }
    }

    /// Where tokens are kept, in words.
    pub(crate) fn storage(&self) -> String {
        self.store.backend()
    }

    pub(super) fn slot(&self, resource: &str) -> Arc<Slot> {
        self.slots.lock().entry(resource.to_owned()).or_default().clone()
    }

    pub(super) async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(CredentialStore) -> Result<T, crate::secrets::store::SecretsError>
        + Send
        + 'static,
    ) -> Result<T, AuthError> {
        let store = self.store.clone();
        match tokio::task::spawn_blocking(move || f(store)).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(AuthError::Unavailable(format!("the token store failed: {e}"))),
            Err(e) => Err(AuthError::Unavailable(format!("the token store failed: {e}"))),
        }
    }

    /// The server's credentials: cached, else stored, else imported from Gemini CLI.
    pub(crate) async fn credential(
        &self,
        t: &Target,
    ) -> Result<Option<Arc<Credential>>, AuthError> {
        let Some(resource) = t.resource() else { return Ok(None) };
        let slot = self.slot(&resource);
        match &*slot.cached.lock() {
            Cached::Held(c) => return Ok(Some(c.clone())),
            Cached::Absent => return Ok(None),
            Cached::Unknown => {}
        }
        let _flight = slot.flight.lock().await;
        if let Some(c) = slot.held() {
            return Ok(Some(c));
        }
        let r = resource.clone();
        let mut found = self.blocking(move |s| s.get(&r)).await?;
        let marker = r_import_marker(&t.name);
        let m = marker.clone();
        if found.is_none()
            && !self.blocking(move |s| s.has_marker(&m)).await?
            && let Some(c) = self.import(t, &resource)
        {
            // Once per server: signing out later does not bring Gemini CLI's token back.
            let kept = c.clone();
            self.blocking(move |s| {
                s.put(&kept)?;
                s.set_marker(&marker)
            })
            .await?;
            tracing::info!(server = %t.name, "imported Gemini CLI's OAuth token for it");
            found = Some(c);
        }
        let found = found.map(Arc::new);
        slot.set(found.clone());
        Ok(found)
    }

    /// Problems reading Gemini CLI's token file (nothing was imported from it).
    pub(crate) fn import_warnings(&self) -> Vec<String> {
        match self.imported_list() {
            Err(e) => vec![e.clone()],
            Ok(_) => Vec::new(),
        }
    }

    fn imported_list(&self) -> &Result<Vec<Imported>, String> {
        self.imported.get_or_init(|| {
            import::read(&self.gemini_tokens).map_err(|e| {
                tracing::warn!(error = %e, "Gemini CLI's OAuth tokens not imported");
                e.to_string()
            })
        })
    }

    fn import(&self, t: &Target, resource: &str) -> Option<Credential> {
        let list = self.imported_list().as_ref().ok()?;
        let i = list.iter().find(|i| {
            i.server == t.name
                && i.server_url
                    .as_deref()
                    .is_none_or(|u| discovery::resource_parameter(u).is_ok_and(|r| r == resource))
        })?;
        Some(Credential {
            resource: resource.to_owned(),
            token_resource: resource.to_owned(),
            issuer: None,
            client_id: i.client_id.clone().or_else(|| t.settings.client_id.clone())?,
            client_secret: None,
            client_auth: token::ClientAuth::None,
            token_url: i.token_url.clone().or_else(|| t.settings.token_url.clone())?,
            token: i.token.clone(),
            updated_at_ms: clock::now_ms(),
            origin: "imported".into(),
        })
    }

    /// The access token to send to the server, refreshed first if it has expired; `None`
    /// when there are no credentials (the request goes without, and a 401 says to sign in).
    pub(crate) async fn bearer(&self, t: &Target) -> Result<Option<Secret<String>>, AuthError> {
        if t.settings.provider != super::settings::Provider::Dynamic {
            return self.google.bearer(&self.http, t, None).await.map(Some);
        }
        let Some(c) = self.credential(t).await? else { return Ok(None) };
        if !c.token.is_expired(clock::now_ms()) {
            return Ok(Some(c.token.access.clone()));
        }
        Ok(Some(self.refresh(t, &c).await?.token.access.clone()))
    }

    /// The server answered 401 to `sent`: a token someone already replaced is answered with
    /// the new one; else the token is refreshed (once, however many callers ask).
    pub(crate) async fn rejected(
        &self,
        t: &Target,
        sent: &Secret<String>,
    ) -> Result<Secret<String>, AuthError> {
        if t.settings.provider != super::settings::Provider::Dynamic {
            return self.google.bearer(&self.http, t, Some(sent)).await;
        }
        let Some(c) = self.credential(t).await? else {
            return Err(AuthError::NeedsAuth(format!(
                "the server needs OAuth credentials: {}",
                t.sign_in_hint()
            )));
        };
        if &c.token.access != sent {
            return Ok(c.token.access.clone());
        }
        if c.token.refresh.is_none() {
            return Err(AuthError::NeedsAuth(format!(
                "the server rejected the stored OAuth token: {}",
                t.sign_in_hint()
            )));
        }
        Ok(self.refresh(t, &c).await?.token.access.clone())
    }

    /// The token endpoint asked for a refresh of `seen`, as the client its settings or its
    /// registration name; a failure that may pass is tried again (`REFRESH_TRIES` in all,
    /// the delay quadrupling). The outcome, and how many tries it took.
    async fn ask_refresh(
        &self,
        t: &Target,
        seen: &Credential,
    ) -> (Result<token::Token, TokenError>, u32) {
        let client_id = t.settings.client_id.clone().unwrap_or_else(|| seen.client_id.clone());
        let configured = t.settings.client_secret.expose().clone().map(Secret::new);
        let secret = configured.or_else(|| seen.client_secret.clone());
        let auth = match (&secret, seen.client_auth) {
            (Some(_), token::ClientAuth::None) => token::ClientAuth::Basic,
            (None, _) => token::ClientAuth::None,
            (Some(_), how) => how,
        };
        let client = token::Client {
            id: &client_id,
            secret: secret.as_ref(),
            auth,
            audiences: &t.settings.audiences,
            resource: Some(&seen.token_resource),
        };
        let mut delay = self.backoff;
        let mut tries = 0;
        loop {
            tries += 1;
            let r = token::refresh(
                &self.http,
                &seen.token_url,
                &client,
                &seen.token,
                &t.settings.scopes,
                clock::now_ms(),
            )
            .await;
            match r {
                Err(e) if e.is_transient() && tries < REFRESH_TRIES => {
                    tracing::info!(server = %t.name, error = %e, "token refresh failed; trying again");
                    tokio::time::sleep(delay).await;
                    delay *= 4;
                }
                other => break (other, tries),
            }
        }
    }

    /// Refresh `seen`, unless someone already has.
    async fn refresh(
        &self,
        t: &Target,
        seen: &Arc<Credential>,
    ) -> Result<Arc<Credential>, AuthError> {
        let slot = self.slot(&seen.resource);
        let _flight = slot.flight.lock().await;
        match slot.held() {
            Some(now) if !now.same_token(seen) => return Ok(now),
            None => {
                return Err(AuthError::NeedsAuth(format!(
                    "the OAuth credentials were removed: {}",
                    t.sign_in_hint()
                )));
            }
            Some(_) => {}
        }
        if seen.token.refresh.is_none() {
            return Err(AuthError::NeedsAuth(format!(
                "the OAuth token expired and there is no refresh token: {}",
                t.sign_in_hint()
            )));
        }
        let span = crate::telemetry::own(
            || format!("token refresh {}", t.name),
            || vec![opentelemetry::KeyValue::new("mcp.server.name", t.name.clone())],
        );
        let (outcome, tries) = self.ask_refresh(t, seen).await;
        if let Some(span) = span {
            traced(&span, &outcome, tries);
        }
        let fresh = match outcome {
            Ok(token) => token,
            Err(TokenError::InvalidGrant(why)) => {
                let e = TokenError::InvalidGrant(why);
                let expected = (**seen).clone();
                let swapped = self.blocking(move |s| s.swap(&expected, None)).await?;
                return match swapped {
                    Swapped::Changed(Some(other)) => {
                        // Someone stored new credentials meanwhile: those are good.
                        let other = Arc::new(*other);
                        slot.set(Some(other.clone()));
                        Ok(other)
                    }
                    _ => {
                        slot.set(None);
                        tracing::warn!(server = %t.name, "the stored refresh token was refused; removed it");
                        let why = format!(
                            "refreshing the OAuth token failed ({e}), so the stored token was \
                             removed: {}",
                            t.sign_in_hint()
                        );
                        *slot.gone.lock() = Some(why.clone());
                        Err(AuthError::NeedsAuth(why))
                    }
                };
            }
            Err(e) if e.is_transient() => {
                return Err(AuthError::Unavailable(format!(
                    "refreshing the OAuth token failed after {tries} tries ({e}); nothing was \
                     removed, it is tried again with the next attempt"
                )));
            }
            Err(e) => {
                return Err(AuthError::NeedsAuth(format!(
                    "refreshing the OAuth token failed ({e}); the stored token is kept: {}",
                    t.sign_in_hint()
                )));
            }
        };
        let new = Credential { token: fresh, updated_at_ms: clock::now_ms(), ..(**seen).clone() };
        let (expected, kept) = ((**seen).clone(), new.clone());
        let new = Arc::new(new);
        match self.blocking(move |s| s.swap(&expected, Some(&kept))).await {
            Ok(Swapped::Done) => {
                slot.set(Some(new.clone()));
                Ok(new)
            }
            Ok(Swapped::Changed(Some(other))) => {
                let other = Arc::new(*other);
                slot.set(Some(other.clone()));
                Ok(other)
            }
            Ok(Swapped::Changed(None)) => {
                slot.set(None);
                Err(AuthError::NeedsAuth(format!(
                    "signed out while the token was refreshed: {}",
                    t.sign_in_hint()
                )))
            }
            Err(e) => {
                // The new token works; it is used, and stored again with the next refresh.
                tracing::warn!(server = %t.name, error = %e, "the refreshed token could not be stored");
                slot.set(Some(new.clone()));
                Ok(new)
            }
        }
    }

    /// The server answered 401 with this challenge.
    pub(crate) fn challenged(&self, t: &Target, header: &str) {
        let Some(resource) = t.resource() else { return };
        let slot = self.slot(&resource);
        *slot.challenge.lock() = Some(header.to_owned());
    }

    /// The server refused the token for lack of `scope` (`403 insufficient_scope`): the next
    /// sign-in asks for it too, with what was granted before (step-up).
    pub(crate) fn step_up(&self, t: &Target, scope: &str) {
        let Some(resource) = t.resource() else { return };
        let slot = self.slot(&resource);
        let mut wanted = slot.wanted.lock();
        for s in scope.split_whitespace() {
            if !wanted.iter().any(|w| w == s) {
                wanted.push(s.to_owned());
            }
        }
        tracing::info!(server = %t.name, scope, "the server wants more scope; the next sign-in asks for it");
    }

    /// Why the server's credentials were removed, if a refused refresh removed them (until
    /// the next sign-in).
    pub(crate) fn why_gone(&self, t: &Target) -> Option<String> {
        let slot = self.slot(&t.resource()?);
        slot.gone.lock().clone()
    }

    /// Forget a server's credentials; whether there were any.
    pub(crate) async fn logout(&self, t: &Target) -> Result<bool, AuthError> {
        let Some(resource) = t.resource() else { return Ok(false) };
        let slot = self.slot(&resource);
        let _flight = slot.flight.lock().await;
        let r = resource.clone();
        let removed = self.blocking(move |s| s.delete(&r)).await?;
        slot.set(None);
        Ok(removed)
    }
}

#[cfg(test)]
mod tests;
