//! What the gateway tells its client unasked: a call's progress (all of it before the call's
//! result), the log messages of the servers it serves, and, to a client of the 2026-07-28
//! era, list changes and resource updates on the `subscriptions/listen` streams it opened
//! (the earlier eras get them as plain notifications, see `Gateway::follow`).
//!
//! Log messages: a client of the earlier eras gets all its servers' (at or above the level it
//! set with `logging/setLevel`; every level until it sets one, as a server tells its client
//! directly). One of 2026-07-28 has no session to set a level on: it asks per request
//! (`io.modelcontextprotocol/logLevel` in a `tools/call`'s `_meta`) and gets that call's
//! messages at or above it on the request's own stream, before the result ([`Relay`]); none
//! when it asks for none. A message is the call's when the call is the only one in flight
//! on its server's connection (a log message names no request), or when it came before any
//! call there had registered (a server quick to log, `calls::progress`).

use geminid_protocol::event::EventBody;
use rmcp::RoleServer;
use rmcp::model::ProtocolVersion;
use rmcp::model::{ProgressNotificationParam, ProgressToken, SubscriptionFilter};
use rmcp::service::{Peer, RequestContext, SubscriptionContext, SubscriptionSink};
use tokio::sync::broadcast::error::RecvError;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::Gateway;
use crate::events::Published;
use crate::mcp::messages::ServerMessage;

/// A call's progress, passed on under the client's token until `ended` fires; then what was
/// queued already (all the progress the call's server sent before its answer, see
/// `mcp::order`) is passed on too, and the task ends.
pub(super) fn progress(
    gw: &Gateway,
    peer: Peer<RoleServer>,
    token: ProgressToken,
    call_id: String,
    mut ended: tokio::sync::oneshot::Receiver<()>,
) -> JoinHandle<()> {
    let mut events = gw.services.events.subscribe();
    let session = gw.session.clone();
    tokio::spawn(async move {
        let forward = async |p: &Published| {
            if let EventBody::ToolProgress(tp) = &p.event.body
                && tp.session == session
                && tp.call_id.as_deref() == Some(call_id.as_str())
            {
                let mut param = ProgressNotificationParam::new(token.clone(), tp.progress);
                param.total = tp.total;
                param.message = tp.message.clone();
                let _ = peer.notify_progress(param).await;
            }
        };
        loop {
            tokio::select! {
                biased;
                ev = events.recv() => match ev {
                    Ok(p) => forward(&p).await,
                    Err(RecvError::Lagged(_)) => {}
                    Err(RecvError::Closed) => return,
                },
                _ = &mut ended => break,
            }
        }
        while let Ok(p) = events.try_recv() {
            forward(&p).await;
        }
    })
}

/// What a call of one request tells its client while the request lasts: its progress under
/// the request's token, and the log messages a client of 2026-07-28 asked for with a level.
#[derive(Debug, Default)]
pub(super) struct Relay(Vec<(tokio::sync::oneshot::Sender<()>, JoinHandle<()>)>);

impl Relay {
    /// Start relaying call `call_id` (of the server of `identity`, none for a custom tool) to
    /// the client of the request of `context`.
    pub(super) fn start(
        gw: &Gateway,
        context: &RequestContext<RoleServer>,
        call_id: &str,
        identity: Option<String>,
    ) -> Self {
        let mut relay = Self::default();
        if let Some(token) = context.meta.get_progress_token() {
            let (finished, ended) = tokio::sync::oneshot::channel();
            let task = progress(gw, context.peer.clone(), token, call_id.to_owned(), ended);
            relay.0.push((finished, task));
        }
        let modern = context.protocol_version().is_some_and(|v| v >= ProtocolVersion::V_2026_07_28);
        if let Some(level) = context.meta.log_level().filter(|_| modern) {
            let (finished, ended) = tokio::sync::oneshot::channel();
            let of = Of { session: gw.session.clone(), call_id: call_id.to_owned(), identity };
            relay.0.push((finished, logs(gw, context.peer.clone(), severity(level), of, ended)));
        }
        relay
    }

    /// The call ended: what it sent before its answer is passed on, then the relay ends.
    pub(super) async fn end(self) {
        for (finished, task) in self.0 {
            drop(finished);
            let _ = task.await;
        }
    }
}

/// Which call a relay's log messages are of.
#[derive(Debug)]
struct Of {
    session: String,
    call_id: String,
    identity: Option<String>,
}

impl Of {
    /// Whether `m` is this call's: the only call in flight on its connection, or, before
    /// any had registered, a message of the call's server.
    fn owns(&self, m: &ServerMessage) -> bool {
        match m.calls.as_slice() {
            [one] => one.session == self.session && one.call_id.as_ref() == Some(&self.call_id),
            [] => self.identity.as_ref() == Some(&m.identity),
            _ => false,
        }
    }
}

/// A call's log messages at or above `min`, passed on until `ended` fires; then what was
/// queued already (what its server sent before its answer, see `mcp::order`), and the task
/// ends.
#[allow(
    deprecated,
    reason = "logging is SEP-2577-deprecated; a 2026-07-28 client asks per request"
)]
fn logs(
    gw: &Gateway,
    peer: Peer<RoleServer>,
    min: u8,
    of: Of,
    mut ended: tokio::sync::oneshot::Receiver<()>,
) -> JoinHandle<()> {
    let mut messages = gw.services.mcp.messages();
    tokio::spawn(async move {
        let forward = async |m: &ServerMessage| {
            if severity(m.params.level) >= min && of.owns(m) {
                let _ = peer.notify_logging_message(m.params.clone()).await;
            }
        };
        loop {
            tokio::select! {
                biased;
                m = messages.recv() => match m {
                    Ok(m) => forward(&m).await,
                    Err(RecvError::Lagged(n)) => {
                        tracing::debug!(missed = n, call = %of.call_id, "gateway: a call's client missed log messages");
                    }
                    Err(RecvError::Closed) => return,
                },
                _ = &mut ended => break,
            }
        }
        while let Ok(m) = messages.try_recv() {
            forward(&m).await;
        }
    })
}

/// Levels from the least to the most severe.
#[allow(deprecated, reason = "logging is SEP-2577-deprecated; clients of the earlier eras use it")]
pub(super) fn severity(level: rmcp::model::LoggingLevel) -> u8 {
    use rmcp::model::LoggingLevel as L;
    match level {
        L::Debug => 0,
        L::Info => 1,
        L::Notice => 2,
        L::Warning => 3,
        L::Error => 4,
        L::Critical => 5,
        L::Alert => 6,
        L::Emergency => 7,
    }
}

impl Gateway {
    /// Pass the served servers' log messages on to the client until it goes.
    #[allow(
        deprecated,
        reason = "logging is SEP-2577-deprecated; clients of the earlier eras use it"
    )]
    pub(super) async fn pass_logs(self, peer: Peer<RoleServer>, gone: CancellationToken) {
        let mut messages = self.services.mcp.messages();
        loop {
            let m = tokio::select! {
                () = gone.cancelled() => return,
                m = messages.recv() => match m {
                    Ok(m) => m,
                    Err(RecvError::Lagged(n)) => {
                        tracing::debug!(missed = n, "gateway: a client missed servers' log messages");
                        continue;
                    }
                    Err(RecvError::Closed) => return,
                },
            };
            if severity(m.params.level) < self.min_level()
                || !self.serves_identity(&m.identity).await
            {
                continue;
            }
            let _ = peer.notify_logging_message(m.params.clone()).await;
        }
    }

    /// Whether the server of `identity` is one this gateway serves.
    async fn serves_identity(&self, identity: &str) -> bool {
        let servers = self.services.catalog.identities(&self.session).await;
        servers.iter().any(|(name, id)| id == identity && self.serves(name))
    }

    /// A 2026-07-28 client's `subscriptions/listen` stream: its resources subscribed upstream,
    /// then told of changes until it closes.
    pub(super) async fn listening(&self, ctx: SubscriptionContext) {
        for uri in ctx.accepted().resource_subscriptions.iter().flatten() {
            if let Err(e) = self.forward_subscribe(uri.clone()).await {
                tracing::debug!(%uri, error = %e.message, "gateway: a resource subscription is not kept");
            }
        }
        // What the client has now is what later changes are told against (a stateless client
        // may never have listed through this gateway).
        self.mark_seen().await;
        let gone = CancellationToken::new();
        let follow = self.clone().follow(Announce::Sink(ctx.sink().clone()), gone.clone());
        tokio::select! {
            () = follow => {}
            () = ctx.cancelled() => {}
        }
        gone.cancel();
    }
}

/// What a subscription may ask for: the lists, and any resource (a URI no served server offers
/// gets no update).
pub(super) fn accept_filter(requested: &SubscriptionFilter) -> SubscriptionFilter {
    let mut accepted = SubscriptionFilter::new();
    accepted.tools_list_changed = Some(true);
    accepted.prompts_list_changed = Some(true);
    accepted.resources_list_changed = Some(true);
    accepted.resource_subscriptions = requested.resource_subscriptions.clone();
    accepted
}

/// Where changes are told: to a client of the earlier eras as plain notifications, to one of
/// 2026-07-28 on its subscription stream.
#[derive(Debug, Clone)]
pub(super) enum Announce {
    Peer(Peer<RoleServer>),
    Sink(SubscriptionSink),
}

impl Announce {
    pub(super) async fn tools(&self) {
        let _ = match self {
            Self::Peer(p) => p.notify_tool_list_changed().await.map_err(drop),
            Self::Sink(s) => s.notify_tool_list_changed().await.map_err(drop),
        };
    }

    pub(super) async fn prompts(&self) {
        let _ = match self {
            Self::Peer(p) => p.notify_prompt_list_changed().await.map_err(drop),
            Self::Sink(s) => s.notify_prompt_list_changed().await.map_err(drop),
        };
    }

    pub(super) async fn resources(&self) {
        let _ = match self {
            Self::Peer(p) => p.notify_resource_list_changed().await.map_err(drop),
            Self::Sink(s) => s.notify_resource_list_changed().await.map_err(drop),
        };
    }

    pub(super) async fn updated(&self, uri: &str) {
        let _ = match self {
            Self::Peer(p) => {
                let param = rmcp::model::ResourceUpdatedNotificationParam::new(uri.to_owned());
                p.notify_resource_updated(param).await.map_err(drop)
            }
            Self::Sink(s) => s.notify_resource_updated(uri).await.map_err(drop),
        };
    }
}
