//! Signing in to a server: discovery (unless `authorizationUrl` and `tokenUrl` are
//! configured), the client's identity, the loopback listener and the URL ([`Auth::begin`]);
//! then the browser's return, the exchange and the store ([`Auth::finish`]).

use std::sync::Arc;
use std::time::Duration;

use super::discovery::{self, DiscoveryError, OAuthEndpoints};
use super::flow::{self, Callback, CallbackError, Expect};
use super::service::Auth;
use super::store::Credential;
use super::token::{self, Token, TokenError};
use super::{AuthError, Target};
use crate::clock;
use crate::secrets::Secret;

/// Why a sign-in could not start or did not end with a token kept.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SignInError {
    /// The server uses Google's credentials, which are renewed elsewhere.
    #[error(
        "'{0}' uses Google credentials (authProviderType), not a sign-in: \
         `gcloud auth application-default login` renews them"
    )]
    Google(String),
    /// Discovery found no endpoints (or endpoints it must refuse).
    #[error(transparent)]
    Discovery(#[from] DiscoveryError),
    /// No client identity: no `clientId`, and the server registers none.
    #[error(
        "the authorization server offers no dynamic client registration: set \
         `oauth.clientId` for '{0}' in settings.json"
    )]
    NoRegistration(String),
    /// Dynamic client registration failed.
    #[error("client registration failed: {0}")]
    Registration(#[source] TokenError),
    /// The authorization endpoint is not a URL.
    #[error(transparent)]
    BadEndpoint(#[from] flow::BadEndpoint),
    /// The loopback callback could not listen, or brought no code.
    #[error(transparent)]
    Callback(#[from] CallbackError),
    /// The code could not be exchanged for a token.
    #[error("exchanging the code failed: {0}")]
    Exchange(#[source] TokenError),
    /// The token could not be kept.
    #[error(transparent)]
    Store(#[from] AuthError),
}

/// A sign-in between `begin` and the browser's return.
#[derive(Debug)]
pub(crate) struct SignIn {
    /// The URL to open.
    pub url: String,
    /// Where the browser comes back.
    pub redirect_uri: String,
    /// `configured`, `metadata-document` or `registered`.
    pub client: &'static str,
    /// What discovery found.
    pub endpoints: OAuthEndpoints,
    client_id: String,
    client_secret: Option<Secret<String>>,
    client_auth: token::ClientAuth,
    attempt: flow::Attempt,
    callback: Callback,
}

impl Auth {
    /// Start a sign-in: discovery (unless `authorizationUrl` and `tokenUrl` are configured),
    /// the callback listener, the client's identity, and the URL to open.
    pub(crate) async fn begin(&self, t: &Target, port: Option<u16>) -> Result<SignIn, SignInError> {
        let s = &t.settings;
        if s.provider != super::settings::Provider::Dynamic {
            return Err(SignInError::Google(t.name.clone()));
        }
        let resource = discovery::resource_parameter(&t.url)?;
        let mut endpoints = match (&s.authorization_url, &s.token_url) {
            (Some(a), Some(tk)) => OAuthEndpoints {
                authorization_url: a.clone(),
                token_url: tk.clone(),
                registration_url: s.registration_url.clone(),
                issuer: None,
                scopes: Vec::new(),
                iss_supported: false,
                cimd_supported: false,
                auth_methods: Vec::new(),
                resource,
            },
            _ => {
                let seen = t.resource().and_then(|r| self.slot(&r).challenge.lock().clone());
                let challenge = match seen {
                    Some(c) => Some(c),
                    None => self.challenge(&t.url).await,
                };
                discovery::discover(&self.http, &t.url, challenge.as_deref()).await?
            }
        };
        if !s.scopes.is_empty() {
            endpoints.scopes.clone_from(&s.scopes);
        }
        // Step-up: what the server asked for since, with what was granted (a union, as the
        // 2026-07-28 authorization spec asks).
        if let Some(resource) = t.resource() {
            let slot = self.slot(&resource);
            let wanted = slot.wanted.lock().clone();
            if !wanted.is_empty() {
                let granted = slot.held().and_then(|c| c.token.scope.clone()).unwrap_or_default();
                let all = granted.split_whitespace().map(str::to_owned).chain(wanted);
                for scope in all {
                    if !endpoints.scopes.contains(&scope) {
                        endpoints.scopes.push(scope);
                    }
                }
            }
        }
        if endpoints.registration_url.is_none() {
            endpoints.registration_url.clone_from(&s.registration_url);
        }
        let port = port.or_else(|| s.redirect_port()).unwrap_or(0);
        let callback = Callback::bind(port).await?;
        let redirect_uri = s.redirect_uri.clone().unwrap_or_else(|| callback.redirect_uri());
        let configured = s.client_secret.expose().clone().map(Secret::new);
        let methods = &endpoints.auth_methods;
        let (client_id, client_secret, client_auth, client) =
            match (&s.client_id, &s.client_metadata_url) {
                (Some(id), _) => {
                    let how = token::ClientAuth::choose(methods, configured.is_some());
                    (id.clone(), configured, how, "configured")
                }
                (None, Some(doc)) if endpoints.cimd_supported => {
                    (doc.clone(), None, token::ClientAuth::None, "metadata-document")
                }
                (None, _) => {
                    let Some(reg) = &endpoints.registration_url else {
                        return Err(SignInError::NoRegistration(t.name.clone()));
                    };
                    let r =
                        token::register(&self.http, reg, &redirect_uri, &endpoints.scopes, methods)
                            .await
                            .map_err(SignInError::Registration)?;
                    (r.id, r.secret, r.auth, "registered")
                }
            };
        let attempt = flow::Attempt::new();
        let url =
            flow::authorization_url(&endpoints, &client_id, &redirect_uri, &attempt, &s.audiences)?;
        Ok(SignIn {
            url,
            redirect_uri,
            client,
            endpoints,
            client_id,
            client_secret,
            client_auth,
            attempt,
            callback,
        })
    }

    /// The server's `WWW-Authenticate`, from an unauthenticated request.
    async fn challenge(&self, url: &str) -> Option<String> {
        let probe = serde_json::json!({
            "jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "geminid", "version": geminid_protocol::DAEMON_VERSION}}
        });
        let header = |r: &reqwest::Response| {
            r.headers()
                .get(reqwest::header::WWW_AUTHENTICATE)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let post = self
            .http
            .post(url)
            .header(reqwest::header::ACCEPT, "application/json, text/event-stream")
            .json(&probe)
            .timeout(Duration::from_secs(5))
            .send()
            .await;
        if let Ok(r) = &post
            && let Some(h) = header(r)
        {
            return Some(h);
        }
        let get = self
            .http
            .get(url)
            .header(reqwest::header::ACCEPT, "text/event-stream")
            .timeout(Duration::from_secs(5))
            .send()
            .await
            .ok()?;
        header(&get)
    }

    /// Wait for the browser, exchange the code, and store the token. `exchanging` is called
    /// once the code has come.
    pub(crate) async fn finish(
        &self,
        t: &Target,
        sign_in: SignIn,
        within: Duration,
        exchanging: impl FnOnce(),
    ) -> Result<(), SignInError> {
        let SignIn {
            redirect_uri,
            endpoints,
            client_id,
            client_secret,
            client_auth,
            attempt,
            callback,
            ..
        } = sign_in;
        let expect = Expect {
            state: attempt.state.clone(),
            issuer: endpoints.issuer.clone(),
            iss_required: endpoints.iss_supported,
        };
        let code = callback.code(&expect, within).await?;
        exchanging();
        let client = token::Client {
            id: &client_id,
            secret: client_secret.as_ref(),
            auth: client_auth,
            audiences: &t.settings.audiences,
            resource: Some(&endpoints.resource),
        };
        let token: Token = token::exchange_code(
            &self.http,
            &endpoints.token_url,
            &client,
            &code,
            &attempt.verifier,
            &redirect_uri,
            clock::now_ms(),
        )
        .await
        .map_err(SignInError::Exchange)
        .map(|mut token| {
            // Granted as asked, when the answer does not say (what a step-up adds to).
            if token.scope.is_none() && !endpoints.scopes.is_empty() {
                token.scope = Some(endpoints.scopes.join(" "));
            }
            token
        })?;
        let c = Credential {
            resource: t.resource().unwrap_or_else(|| endpoints.resource.clone()),
            token_resource: endpoints.resource.clone(),
            issuer: endpoints.issuer.clone(),
            client_id,
            // A configured secret is read from the settings each time; a registered one is kept.
            client_secret: client_secret.filter(|_| t.settings.client_secret.expose().is_none()),
            client_auth,
            token_url: endpoints.token_url.clone(),
            token,
            updated_at_ms: clock::now_ms(),
            origin: "signed-in".into(),
        };
        let slot = self.slot(&c.resource);
        let _flight = slot.flight.lock().await;
        let kept = c.clone();
        self.blocking(move |s| s.put(&kept)).await?;
        slot.set(Some(Arc::new(c)));
        *slot.gone.lock() = None;
        slot.wanted.lock().clear();
        Ok(())
    }
}
