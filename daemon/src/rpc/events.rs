//! `events/subscribe`: forwards the event bus to one subscriber, filtered, and drops a
//! subscriber that cannot keep up instead of buffering without bound.

use geminid_protocol::api::EventsApiServer;
use geminid_protocol::error::ErrorCode;
use geminid_protocol::event::EventsSubscribeParams;
use geminid_protocol::event::{Event, EventBody};
use jsonrpsee::PendingSubscriptionSink;
use jsonrpsee::core::{SubscriptionResult, async_trait};
use jsonrpsee::server::TrySendError;
use tokio::sync::broadcast::error::RecvError;

use super::Handler;

fn wanted(filter: &EventsSubscribeParams, event: &Event) -> bool {
    let session_ok = filter.session.as_ref().is_none_or(|want| event.body.concerns(want));
    let kind_ok = filter.kinds.as_ref().is_none_or(|k| k.iter().any(|k| k == event.body.kind()));
    session_ok && kind_ok
}

#[async_trait]
impl EventsApiServer for Handler {
    async fn subscribe_events(
        &self,
        pending: PendingSubscriptionSink,
        params: Option<EventsSubscribeParams>,
    ) -> SubscriptionResult {
        let filter = params.unwrap_or_default();
        let unknown: Vec<&String> = filter
            .kinds
            .iter()
            .flatten()
            .filter(|k| !geminid_protocol::event::KINDS.contains(&k.as_str()))
            .collect();
        if !unknown.is_empty() {
            let message = format!(
                "no event kind {}; the kinds are {}",
                unknown.iter().map(|k| format!("'{k}'")).collect::<Vec<_>>().join(", "),
                geminid_protocol::event::KINDS.join(", ")
            );
            let e = jsonrpsee::types::ErrorObject::owned(
                jsonrpsee::types::error::INVALID_PARAMS_CODE,
                message,
                None::<()>,
            );
            pending.reject(e).await;
            return Ok(());
        }
        if let Some(id) = &filter.session
            && let Err(e) = self.services.sessions.get(id)
        {
            pending.reject(ErrorCode::SessionNotFound.error(e.to_string())).await;
            return Ok(());
        }
        // Subscribe before accepting so that nothing emitted after the reply is missed.
        let mut rx = self.services.events.subscribe();
        let mut sink = pending.accept().await?;
        let conn = sink.connection_id().0;
        let buffer = self.services.events.capacity();
        loop {
            let published = tokio::select! {
                _ = sink.closed() => return Ok(()),
                r = rx.recv() => match r {
                    Ok(p) => p,
                    Err(RecvError::Lagged(n)) => {
                        tracing::warn!(conn, missed = n, "dropping slow events subscriber");
                        return Err(format!(
                            "events subscription dropped: the subscriber fell {n} events behind \
                             (buffer {buffer}); read events faster or resubscribe"
                        ).into());
                    }
                    Err(RecvError::Closed) => return Err("event bus closed".into()),
                },
            };
            if !wanted(&filter, &published.event) {
                continue;
            }
            match sink.try_send(published.json.clone()) {
                Ok(()) => {}
                Err(TrySendError::Full(_)) => {
                    tracing::warn!(
                        conn,
                        "dropping slow events subscriber: its send buffer is full"
                    );
                    return Err("events subscription dropped: the subscriber's buffer is full; \
                                read events faster or resubscribe"
                        .into());
                }
                Err(TrySendError::Closed(_)) => return Ok(()),
            }
            if matches!(published.event.body, EventBody::DaemonShuttingDown(_)) {
                return Err("geminid is shutting down".into());
            }
        }
    }
}
