//! What servers ask of their client, answered for the session whose call caused it: an
//! elicitation or a sampling request goes to that session's clients (through [`Callers`](super::Callers)),
//! `roots/list` is answered with its roots. Where the transport cannot say which call caused
//! a request (stdio, SSE), it is the one session with calls in flight on the server; with
//! none, or several, an elicitation is declined and a sampling request refused at once, and
//! the server's log says why.

#![allow(
    deprecated,
    reason = "sampling and roots are SEP-2577-deprecated; servers of the eras before 2026-07-28 use them"
)]

use futures::FutureExt;
use futures::future::BoxFuture;
use rmcp::model::{
    CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams, ElicitResult,
    ElicitationAction, RequestId,
};

use super::callers::{Caller, Whose};
use super::entries::{Binding, Entry};
use super::roots::{self, ROOTS_SET, Roots};
use super::server::{NewServer, Server};
use super::supervisor::Supervisor;
use super::task;

/// How long a request that names no known call waits for its call to register.
const CALL_REGISTERS_WITHIN_MS: u64 = 200;

impl Supervisor {
    /// What its servers ask of their client, answered for the session whose call caused it.
    pub(super) fn asked(&self) -> Asked<'_> {
        Asked { sup: self }
    }
}

/// Answers to what servers ask (see the module).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Asked<'a> {
    sup: &'a Supervisor,
}

impl Asked<'_> {
    fn server_of(self, identity: &str) -> Option<std::sync::Arc<Server>> {
        self.sup.registry.lock().servers.get(identity).cloned()
    }

    /// The caller of a request from `identity`'s server, or why there is none (said in its
    /// log).
    async fn caller_of(
        &self,
        identity: &str,
        origin: Option<&RequestId>,
        what: &str,
    ) -> Option<(Caller, String)> {
        let server = self.server_of(identity)?;
        // A call is registered once its request is on its way, and a fast server can ask
        // before that: give it a moment.
        let mut whose = self.sup.callers.whose(identity, origin);
        for _ in 0..CALL_REGISTERS_WITHIN_MS / 5 {
            if whose != Whose::Nobody {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            whose = self.sup.callers.whose(identity, origin);
        }
        match whose {
            Whose::One(c) => {
                server.log.push(
                    "geminid",
                    &format!("{what} for session {}'s call to {}", c.session, c.name),
                );
                Some((c, server.name.clone()))
            }
            Whose::Nobody => {
                server.log.push(
                    "geminid",
                    &format!("{what} declined: no session's call is in flight on this server"),
                );
                None
            }
            Whose::Several(sessions) => {
                server.log.push(
                    "geminid",
                    &format!(
                        "{what} declined: sessions {} have calls in flight on this server, and its transport cannot say whose call asked",
                        sessions.join(", ")
                    ),
                );
                None
            }
        }
    }

    pub(super) fn elicit_for(
        &self,
        identity: &str,
        origin: Option<&RequestId>,
        params: ElicitRequestParams,
    ) -> BoxFuture<'static, ElicitResult> {
        let (me, identity, origin) = (self.sup.me.upgrade(), identity.to_owned(), origin.cloned());
        async move {
            let decline = ElicitResult::new(ElicitationAction::Decline);
            let Some(me) = me else { return decline };
            match me.asked().caller_of(&identity, origin.as_ref(), "an elicitation").await {
                Some((caller, server)) => me.callers.elicit(caller, server, params).await,
                None => decline,
            }
        }
        .boxed()
    }

    pub(super) fn sample_for(
        &self,
        identity: &str,
        origin: Option<&RequestId>,
        params: CreateMessageRequestParams,
    ) -> BoxFuture<'static, Result<CreateMessageResult, rmcp::ErrorData>> {
        let (me, identity, origin) = (self.sup.me.upgrade(), identity.to_owned(), origin.cloned());
        async move {
            let why = "no single session's call on this MCP server is in flight, so geminid cannot tell whose client should answer";
            let refused = Err(rmcp::ErrorData::new(rmcp::model::ErrorCode(-1), why, None));
            let Some(me) = me else { return refused };
            match me.asked().caller_of(&identity, origin.as_ref(), "a sampling request").await {
                Some((caller, server)) => me.callers.sample(caller, server, params).await,
                None => refused,
            }
        }
        .boxed()
    }

    /// `roots/list` from `identity`'s server: the calling session's roots (else those of the
    /// first session using it). The server is marked as asking for roots from now on, and
    /// sessions using it with other roots move to servers of their own.
    pub(super) fn roots_for(self, identity: &str, origin: Option<&RequestId>) -> Roots {
        let caller = match self.sup.callers.whose(identity, origin) {
            Whose::One(c) => Some(c.session),
            _ => None,
        };
        let mut moved: Vec<String> = Vec::new();
        let mut started = Vec::new();
        let (given, base, server) = {
            let mut inner = self.sup.registry.lock();
            let Some(server) = inner.servers.get(identity).cloned() else {
                return Roots::default();
            };
            let mut users: Vec<(&String, &Entry)> = inner
                .sessions
                .iter()
                .flat_map(|(s, entries)| entries.values().map(move |e| (s, e)))
                .filter(|(_, e)| matches!(&e.binding, Binding::Runs(i) if i == identity))
                .collect();
            users.sort_by(|a, b| a.0.cmp(b.0));
            // No session uses it now (it lingers after the command that started it): the roots
            // of the session it was started for.
            let chosen = caller
                .as_ref()
                .and_then(|c| users.iter().find(|(s, _)| *s == c))
                .or(users.first())
                .map(|(_, e)| (e.roots.clone(), e.base.clone()))
                .or_else(|| inner.started_for.get(identity).cloned());
            let Some((given, base)) = chosen else { return Roots::default() };
            inner.given_roots.insert(identity.to_owned(), given.clone());
            let newly = inner.asks_roots.insert(base.clone());
            if newly && let Err(e) = self.sup.store().mark(ROOTS_SET, &base) {
                tracing::warn!(server = %server.name, error = %e, "cannot record that the server asks for roots");
            }
            // Sessions with other roots: each set gets its own server.
            let ids: Vec<String> = inner.sessions.keys().cloned().collect();
            for session in ids {
                let Some(entries) = inner.sessions.get(&session) else { continue };
                let moving: Vec<(String, String)> = entries
                    .iter()
                    .filter(|(_, e)| {
                        matches!(&e.binding, Binding::Runs(i) if i == identity) && e.roots != given
                    })
                    .map(|(n, e)| (n.clone(), roots::split_identity(&e.base, &e.roots)))
                    .collect();
                for (name, to) in moving {
                    if !inner.servers.contains_key(&to) {
                        let new = NewServer::like(&server, to.clone(), name.clone(), None);
                        let s = task::start(new, self.sup.observer(), self.sup.opts);
                        inner.servers.insert(to.clone(), s.clone());
                        started.push(s);
                    }
                    if let Some(e) = inner.sessions.get_mut(&session).and_then(|m| m.get_mut(&name))
                    {
                        e.binding = Binding::Runs(to);
                    }
                    moved.push(session.clone());
                }
            }
            (given, base, server)
        };
        let uris: Vec<&str> = given.iter().map(|r| r.uri.as_str()).collect();
        server.log.push("geminid", &format!("roots/list answered: {}", uris.join(" ")));
        if !moved.is_empty() {
            moved.dedup();
            server.log.push(
                "geminid",
                &format!(
                    "it asks for roots, so it is shared only between sessions with equal roots: sessions {} run their own",
                    moved.join(", ")
                ),
            );
            tracing::info!(server = %server.name, identity = &base[..base.len().min(12)], sessions = ?moved, "a server asks for roots: split by roots");
            self.sup.registry.servers_changed();
        }
        drop(started);
        given
    }
}

/// Tell a server its roots changed (`notifications/roots/list_changed`).
pub(super) fn roots_changed(server: &Server) {
    let Some(peer) = server.peer() else { return };
    tokio::spawn(async move {
        #[allow(
            deprecated,
            reason = "roots are SEP-2577-deprecated; servers of the eras before 2026-07-28 use them"
        )]
        let n = rmcp::model::ClientNotification::RootsListChangedNotification(
            rmcp::model::RootsListChangedNotification::default(),
        );
        let _ = peer.send_notification(n).await;
    });
}
