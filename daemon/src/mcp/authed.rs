//! Streamable HTTP with OAuth: rmcp's reqwest client, with the token resolved for every request
//! (so a token refreshed for one call serves the next) and a 401 to a token answered by
//! asking [`Auth`] for a new one (refreshed once, however many requests were refused) and
//! sending the request again, once.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;

use futures::stream::BoxStream;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use sse_stream::Sse;

use super::error::ConnectError;
use crate::auth::{Auth, AuthError, Target};
use crate::secrets::Secret;

type Error = StreamableHttpError<reqwest::Error>;

/// A reqwest client that sends the server's OAuth token (none when the entry sets its own
/// `Authorization` header).
#[derive(Clone)]
pub(crate) struct AuthedHttp {
    http: reqwest::Client,
    auth: Option<Arc<Auth>>,
    target: Arc<Target>,
    /// Why the last request went without a token (read when the connection fails).
    failure: Arc<Mutex<Option<AuthError>>>,
    /// Ends the connection once its credentials are gone for good (a refused refresh): the
    /// server then reconnects without, and waits in `needs-auth` for a sign-in.
    on_loss: Arc<Mutex<Option<rmcp::service::RunningServiceCancellationToken>>>,
}

impl std::fmt::Debug for AuthedHttp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthedHttp").field("target", &self.target.name).finish_non_exhaustive()
    }
}

impl AuthedHttp {
    /// For the server `target`, whose configured headers are `headers`.
    pub(crate) fn new(auth: Option<Arc<Auth>>, target: Target, headers: &HeaderMap) -> Self {
        let own = headers.contains_key(reqwest::header::AUTHORIZATION);
        Self {
            http: http_client(),
            auth: auth.filter(|_| !own),
            target: Arc::new(target),
            failure: Arc::default(),
            on_loss: Arc::default(),
        }
    }

    /// The configured headers, with `X-Goog-User-Project` for Google credentials that name a
    /// quota project (unless the entry sets it, in any case).
    pub(crate) fn with_google_headers(&self, mut headers: HeaderMap) -> HeaderMap {
        let google =
            self.target.settings.provider == crate::auth::settings::Provider::GoogleCredentials;
        if google
            && !headers.contains_key("x-goog-user-project")
            && let Some(project) = self.auth.as_ref().and_then(|a| a.google.quota_project())
            && let Ok(v) = HeaderValue::try_from(project)
        {
            headers.insert("x-goog-user-project", v);
        }
        headers
    }

    /// Close the connection of `token` when its credentials are gone.
    pub(crate) fn close_on_loss(&self, token: rmcp::service::RunningServiceCancellationToken) {
        *self.on_loss.lock() = Some(token);
    }

    /// Why a connection failed (with a 401, or a 403 for lack of scope, or otherwise), in the
    /// supervisor's terms.
    pub(crate) fn classify(&self, unauthorized: bool, scope: bool, msg: String) -> ConnectError {
        match self.failure() {
            Some(AuthError::NeedsAuth(m)) => ConnectError::NeedsAuth(m),
            Some(AuthError::Unavailable(m)) => ConnectError::Failed(m),
            // Only a sign-in that grants the scope helps.
            None if scope => ConnectError::NeedsAuth(msg),
            None if unauthorized
                && let Some(why) = self.auth.as_ref().and_then(|a| a.why_gone(&self.target)) =>
            {
                ConnectError::NeedsAuth(why)
            }
            None if unauthorized && self.auth.is_some() => ConnectError::NeedsAuth(format!(
                "the server answered 401 Unauthorized ({msg}): sign in with `gemctl mcp auth {}`",
                self.target.name
            )),
            None if unauthorized => ConnectError::NeedsAuth(format!(
                "the server answered 401 Unauthorized ({msg}): the configured Authorization \
                 header was refused"
            )),
            None => ConnectError::Failed(msg),
        }
    }

    /// The headers for a legacy SSE connection: the configured ones, with the token. After a
    /// 401 to `sent`, with the token to try again with (`None`: there is none to try).
    pub(crate) async fn sse_headers(
        &self,
        headers: &HeaderMap,
        sent: Option<&Secret<String>>,
    ) -> Option<(HeaderMap, Option<Secret<String>>)> {
        let token = match sent {
            None => self.token().await,
            Some(s) => Some(self.again(Some(s)).await?),
        };
        let mut h = headers.clone();
        if let Some(t) = &token
            && let Ok(v) = HeaderValue::try_from(format!("Bearer {}", t.expose()))
        {
            h.insert(reqwest::header::AUTHORIZATION, v);
        }
        Some((h, token))
    }

    /// Why the last request could not carry a token, if it could not.
    pub(crate) fn failure(&self) -> Option<AuthError> {
        self.failure.lock().clone()
    }

    fn note(&self, e: Option<AuthError>) {
        if matches!(e, Some(AuthError::NeedsAuth(_)))
            && let Some(close) = self.on_loss.lock().take()
        {
            close.cancel();
        }
        *self.failure.lock() = e;
    }

    async fn token(&self) -> Option<Secret<String>> {
        let auth = self.auth.as_ref()?;
        match auth.bearer(&self.target).await {
            Ok(t) => {
                self.note(None);
                t
            }
            Err(e) => {
                self.note(Some(e));
                None
            }
        }
    }

    /// After a 401 to `sent`: the token to try again with.
    async fn again(&self, sent: Option<&Secret<String>>) -> Option<Secret<String>> {
        let (sent, auth) = (sent?, self.auth.as_ref()?);
        match auth.rejected(&self.target, sent).await {
            Ok(t) => Some(t),
            Err(e) => {
                self.note(Some(e));
                None
            }
        }
    }
}

/// What a transport error means to the person, where OAuth explains it.
pub(crate) fn explain(e: &(dyn std::error::Error + 'static)) -> Option<String> {
    match e.downcast_ref::<Error>()? {
        StreamableHttpError::InsufficientScope(s) => {
            let scope = s.required_scope.clone().or_else(|| {
                crate::auth::discovery::challenge_param(&s.www_authenticate_header, "scope")
            });
            Some(format!(
                "the server refused the token for lack of scope{}: sign in again \
                 (`gemctl mcp auth`) to grant it",
                scope.map(|s| format!(" ({s})")).unwrap_or_default()
            ))
        }
        _ => None,
    }
}

fn unauthorized(e: &Error) -> bool {
    match e {
        StreamableHttpError::AuthRequired(_) => true,
        StreamableHttpError::HttpStatus(s) => s.status == 401,
        _ => false,
    }
}

fn bare(t: Option<&Secret<String>>) -> Option<String> {
    t.map(|t| t.expose().clone())
}

impl AuthedHttp {
    /// Send with the token; after a 401 to it, once more with the one [`Auth`] gives instead.
    async fn send<T, F>(&self, request: impl Fn(Option<String>) -> F) -> Result<T, Error>
    where
        F: Future<Output = Result<T, Error>>,
    {
        let token = self.token().await;
        let r = match request(bare(token.as_ref())).await {
            Err(e) if unauthorized(&e) => match self.again(token.as_ref()).await {
                Some(t) => request(bare(Some(&t))).await,
                None => Err(e),
            },
            other => other,
        };
        if let (Err(StreamableHttpError::AuthRequired(e)), Some(auth)) = (&r, &self.auth) {
            auth.challenged(&self.target, &e.www_authenticate_header);
        }
        if let (Err(StreamableHttpError::InsufficientScope(e)), Some(auth)) = (&r, &self.auth) {
            let scope = e.required_scope.clone().or_else(|| {
                crate::auth::discovery::challenge_param(&e.www_authenticate_header, "scope")
            });
            if let Some(scope) = scope {
                auth.step_up(&self.target, &scope);
            }
        }
        r
    }
}

impl StreamableHttpClient for AuthedHttp {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        _auth: Option<String>,
        headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, Error> {
        self.send(|auth| {
            let (u, m, s, h) = (uri.clone(), message.clone(), session_id.clone(), headers.clone());
            self.http.post_message(u, m, s, auth, h)
        })
        .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        _auth: Option<String>,
        headers: HashMap<HeaderName, HeaderValue>,
        max: usize,
    ) -> Result<StreamableHttpPostResponse, Error> {
        self.send(|auth| {
            let (u, m, s, h) = (uri.clone(), message.clone(), session_id.clone(), headers.clone());
            self.http.post_message_with_max_sse_event_size(u, m, s, auth, h, max)
        })
        .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        _auth: Option<String>,
        headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, Error> {
        self.send(|auth| {
            let (u, m, s, h) = (uri.clone(), message.clone(), session_id.clone(), headers.clone());
            self.http.post_message_with_response_limits(u, m, s, auth, h, limits)
        })
        .await
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        _auth: Option<String>,
        headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), Error> {
        self.send(|auth| {
            self.http.delete_session(uri.clone(), session_id.clone(), auth, headers.clone())
        })
        .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        _auth: Option<String>,
        headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, Error> {
        self.send(|auth| {
            let (u, s, l, h) =
                (uri.clone(), session_id.clone(), last_event_id.clone(), headers.clone());
            self.http.get_stream(u, s, l, auth, h)
        })
        .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        _auth: Option<String>,
        headers: HashMap<HeaderName, HeaderValue>,
        max: usize,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, Error> {
        self.send(|auth| {
            let (u, s, l, h) =
                (uri.clone(), session_id.clone(), last_event_id.clone(), headers.clone());
            self.http.get_stream_with_max_sse_event_size(u, s, l, auth, h, max)
        })
        .await
    }
}

/// The client rmcp's transport would make for itself: no idle connections kept (reusing one
/// whose last body was not read to the end stalls ~40 ms on Linux's delayed ACK, measured:
/// BENCHMARKS.md), and only same-origin 307/308 redirects followed (they keep the method and
/// body; others would drop the message or hand headers to another host).
fn http_client() -> reqwest::Client {
    let policy = reqwest::redirect::Policy::custom(|attempt| {
        let same_origin = attempt
            .previous()
            .first()
            .is_some_and(|first| first.origin() == attempt.url().origin());
        let keeps_body = matches!(attempt.status().as_u16(), 307 | 308);
        if attempt.previous().len() < 10 && same_origin && keeps_body {
            attempt.follow()
        } else {
            attempt.stop()
        }
    });
    reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .redirect(policy)
        .build()
        .unwrap_or_default()
}

/// A session's remote server: its name, its URL as shown, and what its tokens are for.
#[derive(Debug, Clone)]
pub(crate) struct Remote {
    /// The entry's name.
    pub name: String,
    /// Its URL as written (no expanded secrets).
    pub shown: String,
    /// Its token's target.
    pub target: Target,
    /// Its settings send an `Authorization` header of their own (a static token).
    pub header_auth: bool,
}

/// The session's remote servers (those it could run; a blocked one is left out).
pub(crate) fn remotes(view: super::entries::SessionView<'_>) -> Vec<Remote> {
    super::entries::resolve(view, Default::default())
        .into_iter()
        .filter_map(|(name, (_, launch))| {
            let (spec, _, shown) = launch?;
            let super::spec::LaunchSpec::Network { url, oauth, headers, .. } = spec else {
                return None;
            };
            let header_auth =
                headers.expose().keys().any(|k| k.eq_ignore_ascii_case("authorization"));
            let target = Target { name: name.clone(), url, settings: oauth };
            Some(Remote { name, shown, target, header_auth })
        })
        .collect()
}
