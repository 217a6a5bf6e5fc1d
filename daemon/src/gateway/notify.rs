//! What the gateway tells its client unasked: a call's progress (all of it before the call's
//! result), the log messages of the servers it serves (at or above the level the client set
//! with `logging/setLevel`; every level until it sets one, as a server tells its client
//! directly), and, to a client of the 2026-07-28 era, list changes and resource updates on
//! the `subscriptions/listen` streams it opened (the earlier eras get them as plain
//! notifications, see `Gateway::follow`).

use geminid_protocol::event::EventBody;
use rmcp::RoleServer;
use rmcp::model::{ProgressNotificationParam, ProgressToken, SubscriptionFilter};
use rmcp::service::{Peer, SubscriptionContext, SubscriptionSink};
use tokio::sync::broadcast::error::RecvError;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::Gateway;
use crate::events::Published;

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
