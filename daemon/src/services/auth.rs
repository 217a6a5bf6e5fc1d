//! Signing in to remote MCP servers (`auth/*`): the daemon runs the whole flow (discovery, the
//! loopback callback, the exchange, the reconnect) and a client follows its steps with
//! `auth/progress`; a browser is opened by the client, never by the daemon.
//!
//! A sign-in holds a loopback listener until the browser comes back, so there is one per server
//! at a time (a new `auth/begin` ends the one before, whose listener is closed before the new
//! one binds, so a fixed callback port is free again), and it lasts only as long as the client
//! connection that began it: Ctrl-C on `gemctl mcp auth` closes the listener.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use geminid_protocol::auth::{
    AuthBegun, AuthEntry, AuthProgress, AuthState, AuthStatusResult, AuthStep,
};
use geminid_protocol::mcp::{ServerState, ServerStatus};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::auth::Auth;
use crate::auth::discovery::DiscoveryError;
use crate::auth::sign_in::SignInError;
use crate::clock;
use crate::mcp::authed::{self, Remote};
use crate::mcp::{McpOptions, SessionView, Supervisor};
use crate::services::configs::Configs;
use crate::services::servers::SessionServers;
use crate::session::{ConnId, SessionError};

/// How long `auth/progress` waits for the next step before answering with the current one.
const PROGRESS_POLL: Duration = Duration::from_secs(30);

/// How long a finished sign-in's outcome stays readable.
const KEEP_DONE: Duration = Duration::from_secs(120);

/// Sign-ins: those under way (and finished lately), by attempt id; credentials shown and
/// forgotten.
#[derive(Debug)]
pub(crate) struct SignIns {
    auth: Arc<Auth>,
    config: Arc<Configs>,
    /// The servers a sign-in or sign-out restarts.
    mcp: Arc<Supervisor>,
    servers: Arc<SessionServers>,
    /// How long a sign-in waits for the browser.
    within: Duration,
    /// How long a server reconnecting with its new credentials may take to settle.
    settle_within: Duration,
    attempts: Mutex<HashMap<String, watch::Receiver<AuthProgress>>>,
    /// The sign-in under way for each server (by URL): one at a time.
    live: Mutex<HashMap<String, Live>>,
    /// Cancelled when the client connection goes; its sign-ins go with it.
    conns: Mutex<HashMap<ConnId, CancellationToken>>,
}

/// The sign-in under way for a server.
#[derive(Debug)]
struct Live {
    attempt: String,
    /// Cancelled when a newer sign-in to the server begins.
    replaced: CancellationToken,
    /// Held from the start of a sign-in until its listener is closed.
    gate: Arc<tokio::sync::Mutex<()>>,
}

const REPLACED: &str = "a newer sign-in to this server began, which replaced this one";
const CLIENT_GONE: &str = "the client that began this sign-in went away (run `gemctl mcp auth \
                           NAME` again to sign in)";

/// Why an `auth/*` request failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AuthFailure {
    /// The session is unknown.
    #[error(transparent)]
    Session(#[from] SessionError),
    /// No remote server of that name in the session.
    #[error("{0}")]
    NotFound(String),
    /// The sign-in could not start, or the store failed.
    #[error("{0}")]
    Failed(String),
}

fn step(tx: &watch::Sender<AuthProgress>, step: AuthStep, message: Option<String>) {
    tx.send_modify(|p| {
        p.seq += 1;
        p.step = step;
        p.message = message;
    });
}

impl SignIns {
    pub(crate) fn new(
        auth: Arc<Auth>,
        config: Arc<Configs>,
        mcp: Arc<Supervisor>,
        servers: Arc<SessionServers>,
        options: &McpOptions,
    ) -> Self {
        Self {
            auth,
            config,
            mcp,
            servers,
            within: options.oauth_timeout,
            settle_within: options.startup_timeout,
            attempts: Mutex::default(),
            live: Mutex::default(),
            conns: Mutex::default(),
        }
    }

    /// A client connection went away: its sign-ins end, and their listeners close.
    pub(crate) fn connection_closed(&self, conn: ConnId) {
        if let Some(gone) = self.conns.lock().remove(&conn) {
            gone.cancel();
        }
    }

    /// Make `attempt` the server's sign-in, ending the one before: what tells it it was
    /// replaced, and the gate it holds until its listener is closed.
    fn replace(
        &self,
        server: &str,
        attempt: &str,
    ) -> (CancellationToken, Arc<tokio::sync::Mutex<()>>) {
        let replaced = CancellationToken::new();
        let mut live = self.live.lock();
        let entry = live.entry(server.to_owned()).or_insert_with(|| Live {
            attempt: String::new(),
            replaced: CancellationToken::new(),
            gate: Arc::default(),
        });
        entry.replaced.cancel();
        entry.replaced = replaced.clone();
        attempt.clone_into(&mut entry.attempt);
        (replaced, entry.gate.clone())
    }

    /// `attempt`'s listener is closed: forget it, unless a newer one has taken its place.
    fn ended(&self, server: &str, attempt: &str) {
        let mut live = self.live.lock();
        if live.get(server).is_some_and(|l| l.attempt == attempt) {
            live.remove(server);
        }
    }

    /// The session's remote servers.
    fn remotes(&self, session: &str) -> Result<Vec<Remote>, SessionError> {
        let config = self.config.last_told(session)?;
        let env = self.config.session_env(session);
        Ok(authed::remotes(SessionView { id: session, config: &config, env: &env }))
    }

    fn remote(&self, session: &str, name: &str) -> Result<Remote, AuthFailure> {
        let key = crate::config::enablement::normalize(name);
        self.remotes(session)?
            .into_iter()
            .find(|r| crate::config::enablement::normalize(&r.name) == key)
            .ok_or_else(|| {
                AuthFailure::NotFound(format!(
                    "no remote MCP server named '{name}' in this session (OAuth is for servers \
                     with `url` or `httpUrl`; `gemctl mcp list` shows them)"
                ))
            })
    }

    /// Start signing in to a server; the daemon then waits for the browser.
    pub(crate) async fn begin(
        self: &Arc<Self>,
        conn: ConnId,
        session: &str,
        name: &str,
        callback_port: Option<u16>,
    ) -> Result<AuthBegun, AuthFailure> {
        let remote = self.remote(session, name)?;
        let attempt = uuid::Uuid::new_v4().simple().to_string();
        let server = remote.target.url.clone();
        let client_gone = self.conns.lock().entry(conn).or_default().clone();
        let (replaced, gate) = self.replace(&server, &attempt);
        let cancelled = |why: &str| AuthFailure::Failed(format!("signing in to '{name}': {why}"));
        let (held, begun) = {
            let stopped = async {
                tokio::select! {
                    () = replaced.cancelled() => REPLACED,
                    () = client_gone.cancelled() => CLIENT_GONE,
                }
            };
            tokio::pin!(stopped);
            // The sign-in before (if any) closes its listener first.
            let held = tokio::select! {
                held = gate.lock_owned() => held,
                why = &mut stopped => {
                    self.ended(&server, &attempt);
                    return Err(cancelled(why));
                }
            };
            let begun = tokio::select! {
                begun = self.auth.begin(&remote.target, callback_port) => begun,
                why = &mut stopped => {
                    self.ended(&server, &attempt);
                    return Err(cancelled(why));
                }
            };
            (held, begun)
        };
        let sign_in = begun.map_err(|e| {
            self.ended(&server, &attempt);
            // No OAuth here at all: say why that may be fine, or what to set (audit C14).
            if !matches!(e, SignInError::Discovery(DiscoveryError::NotFound(..))) {
                return AuthFailure::Failed(e.to_string());
            }
            let hint = if remote.header_auth {
                "; it sends the Authorization header its settings give, so there is nothing to \
                 sign in to"
            } else {
                "; a server whose OAuth endpoints are elsewhere names them in its entry's \
                 `oauth.authorizationUrl` and `oauth.tokenUrl`"
            };
            AuthFailure::Failed(format!("{e}{hint}"))
        })?;
        let begun = AuthBegun {
            attempt: attempt.clone(),
            url: sign_in.url.clone(),
            redirect_uri: sign_in.redirect_uri.clone(),
            issuer: sign_in.endpoints.issuer.clone(),
            client: sign_in.client.to_owned(),
            timeout_ms: u64::try_from(self.within.as_millis()).unwrap_or(u64::MAX),
        };
        let first =
            AuthProgress { seq: 1, step: AuthStep::WaitingForBrowser, message: None, server: None };
        let (tx, rx) = watch::channel(first);
        self.attempts.lock().insert(attempt.clone(), rx);
        tracing::info!(server = %remote.name, client = sign_in.client, "sign-in started; waiting for the browser");
        let (this, session) = (self.clone(), session.to_owned());
        let within = self.within;
        tokio::spawn(async move {
            let t = &remote.target;
            let finish =
                this.auth.finish(t, sign_in, within, || step(&tx, AuthStep::Exchanging, None));
            let done = tokio::select! {
                done = finish => done.map_err(|e| e.to_string()),
                () = replaced.cancelled() => Err(REPLACED.to_owned()),
                () = client_gone.cancelled() => Err(CLIENT_GONE.to_owned()),
            };
            // The listener is closed: the next sign-in to this server may bind.
            drop(held);
            this.ended(&server, &attempt);
            match done {
                Err(why) => {
                    tracing::warn!(server = %remote.name, reason = %why, "sign-in failed");
                    step(&tx, AuthStep::Failed, Some(why));
                }
                Ok(()) => {
                    tracing::info!(server = %remote.name, "signed in; reconnecting");
                    step(&tx, AuthStep::Reconnecting, None);
                    let status = this.reconnect(&session, &remote.name).await;
                    let (outcome, message) = match &status {
                        Some(s) if s.state == ServerState::Connected => (AuthStep::Connected, None),
                        Some(s) => {
                            (
                                AuthStep::Failed,
                                Some(s.last_error.clone().unwrap_or_else(|| {
                                    format!("the server is {}", s.state.phrase())
                                })),
                            )
                        }
                        None => (AuthStep::Failed, Some("the server did not start".into())),
                    };
                    tx.send_modify(|p| {
                        p.seq += 1;
                        p.step = outcome;
                        p.message = message;
                        p.server = status;
                    });
                }
            }
            tokio::time::sleep(KEEP_DONE).await;
            this.attempts.lock().remove(&attempt);
        });
        Ok(begun)
    }

    /// Restart a server with its new credentials (starting the session's servers if none
    /// runs it yet); its status once the attempt settled. The server is the one the session's
    /// entry resolves to whether or not the session runs its servers now: a one-shot `gemctl
    /// mcp start` leaves it warm in needs-auth with no session using it, and starting the
    /// session again would only share that parked server, stale error and all (audit B3).
    async fn reconnect(&self, session: &str, name: &str) -> Option<ServerStatus> {
        let first = match self.servers.server_of(session, name) {
            Ok(server) => self.mcp.lifecycle().restart(&server).await,
            Err(_) => {
                let started = self.servers.start(session, true).await.ok()?;
                started.servers.into_iter().find(|s| s.name == name)?
            }
        };
        // A server that took the token and then refused it (its connection closed for that)
        // settles in `needs-auth` on its next attempt: that is the answer, not the close.
        let settled = |s: &ServerStatus| {
            !matches!(s.state, ServerState::Disconnected | ServerState::Connecting)
        };
        let mut last = first;
        let until = tokio::time::Instant::now() + self.settle_within;
        while !settled(&last) && tokio::time::Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let now = self.servers.list(session).ok()?.servers.into_iter().find(|s| s.name == name);
            last = now?;
        }
        Some(last)
    }

    /// The sign-in's next step after `after` (or, after a while, its current one).
    pub(crate) async fn progress(
        &self,
        attempt: &str,
        after: u32,
    ) -> Result<AuthProgress, AuthFailure> {
        let rx = self.attempts.lock().get(attempt).cloned();
        let Some(mut rx) = rx else {
            return Err(AuthFailure::NotFound(format!(
                "no sign-in {attempt:?} (it ended more than {} ago, or never began)",
                humantime::format_duration(KEEP_DONE)
            )));
        };
        let _ = tokio::time::timeout(PROGRESS_POLL, rx.wait_for(|p| p.seq > after)).await;
        Ok(rx.borrow().clone())
    }

    /// Every remote server's credentials, as far as they may be shown.
    pub(crate) async fn status(&self, session: &str) -> Result<AuthStatusResult, AuthFailure> {
        let mut servers = Vec::new();
        // A server connected without a token needs none (audit C16: it said "not signed in").
        let listed = self.servers.list(session).map(|l| l.servers).unwrap_or_default();
        let connected =
            |name: &str| listed.iter().any(|s| s.name == name && s.state == ServerState::Connected);
        for r in self.remotes(session)? {
            if r.target.settings.provider != crate::auth::settings::Provider::Dynamic {
                servers.push(AuthEntry {
                    name: r.name,
                    url: r.shown,
                    state: AuthState::Google,
                    issuer: None,
                    expires_at_ms: None,
                    refreshable: true,
                    scope: (!r.target.settings.scopes.is_empty())
                        .then(|| r.target.settings.scopes.join(" ")),
                    origin: None,
                });
                continue;
            }
            let c = self
                .auth
                .credential(&r.target)
                .await
                .map_err(|e| AuthFailure::Failed(e.to_string()))?;
            let needs_none = connected(&r.name);
            let entry = match c {
                None => AuthEntry {
                    name: r.name,
                    url: r.shown,
                    state: if r.header_auth {
                        AuthState::Header
                    } else if needs_none {
                        AuthState::NotNeeded
                    } else {
                        AuthState::None
                    },
                    issuer: None,
                    expires_at_ms: None,
                    refreshable: false,
                    scope: None,
                    origin: None,
                },
                Some(c) => {
                    let refreshable = c.token.refresh.is_some();
                    let expired = c.token.is_expired(clock::now_ms());
                    AuthEntry {
                        name: r.name,
                        url: r.shown,
                        state: if expired && !refreshable {
                            AuthState::Expired
                        } else {
                            AuthState::SignedIn
                        },
                        issuer: c.issuer.clone(),
                        expires_at_ms: c.token.expires_at_ms,
                        refreshable,
                        scope: c.token.scope.clone(),
                        origin: Some(c.origin.clone()),
                    }
                }
            };
            servers.push(entry);
        }
        Ok(AuthStatusResult {
            storage: self.auth.storage(),
            servers,
            warnings: self.auth.import_warnings(),
        })
    }

    /// Forget a server's credentials, and restart it if it runs (it then needs a sign-in).
    pub(crate) async fn logout(&self, session: &str, name: &str) -> Result<bool, AuthFailure> {
        let remote = self.remote(session, name)?;
        let removed = self
            .auth
            .logout(&remote.target)
            .await
            .map_err(|e| AuthFailure::Failed(e.to_string()))?;
        tracing::info!(server = %remote.name, removed, "signed out");
        // Running for this session or kept warm after it: either way it holds the old token.
        // One stopped lately stays stopped.
        if let Ok(server) = self.servers.server_of(session, &remote.name)
            && self.mcp.runs(&server)
        {
            self.mcp.lifecycle().restart(&server).await;
        }
        Ok(removed)
    }
}
