//! The session's asks put to the gateway's client, by the capabilities it declared.
//!
//! - Elicitation: the session's confirmations, each asked as an elicitation (the question, no
//!   fields): accept allows the call once, decline or cancel denies it. While it listens the
//!   session is not headless, so tools that need a confirmation are served. And the
//!   elicitations of the session's servers, passed on as they were sent.
//! - Sampling: the sampling requests of the session's servers, passed on as they were sent.
//!
//! An ask someone else settles first (another client, `gemctl confirm`, its deadline) is
//! cancelled at this client; one this client cannot answer is left to the session's others.
//! A confirmation raised by another gateway client's call is that client's: it is never put
//! to this one (when that client goes, its call and the ask end with it). A JSON-RPC error in
//! answer to an elicitation is a refusal.

use std::collections::HashMap;

use geminid_protocol::asks::{Ask, AskKind, AskNotice};
use rmcp::RoleServer;
use rmcp::model::{ClientResult, ElicitRequestParams, ElicitationAction, Request, ServerRequest};
use rmcp::service::{Peer, PeerRequestOptions};
use serde_json::json;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::Gateway;
use crate::session::ConnId;

/// The request to send the client for an ask: a confirmation as an elicitation with no fields
/// to fill; a server's elicitation or sampling request as the server sent it.
#[allow(
    deprecated,
    reason = "sampling is SEP-2577-deprecated; clients of the eras before 2026-07-28 answer it"
)]
pub(super) fn request(ask: &Ask) -> Option<ServerRequest> {
    match ask.kind {
        AskKind::Confirmation => {
            let v = json!({
                "mode": "form",
                "message": ask.title,
                "requestedSchema": { "type": "object", "properties": {} },
            });
            let p: ElicitRequestParams = serde_json::from_value(v).ok()?;
            Some(ServerRequest::ElicitRequest(Request::new(p)))
        }
        AskKind::Elicitation => {
            let p: ElicitRequestParams =
                serde_json::from_value(ask.detail.get("request")?.clone()).ok()?;
            Some(ServerRequest::ElicitRequest(Request::new(p)))
        }
        AskKind::Sampling => {
            let p: rmcp::model::CreateMessageRequestParams =
                serde_json::from_value(ask.detail.get("request")?.clone()).ok()?;
            Some(ServerRequest::CreateMessageRequest(Request::new(p)))
        }
        AskKind::OpenUrl => None,
    }
}

/// Ask `ask` of the client until it answers or the ask is settled elsewhere (`settled`).
#[allow(
    deprecated,
    reason = "sampling is SEP-2577-deprecated; clients of the eras before 2026-07-28 answer it"
)]
async fn ask_client(gw: Gateway, peer: Peer<RoleServer>, ask: Ask, settled: oneshot::Receiver<()>) {
    let Some(request) = request(&ask) else { return };
    let mut handle =
        match peer.send_cancellable_request(request, PeerRequestOptions::no_options()).await {
            Ok(h) => h,
            Err(e) => {
                tracing::debug!(id = %ask.id, error = %e, "gateway: cannot send the elicitation");
                return;
            }
        };
    let answered = tokio::select! {
        r = &mut handle.rx => r,
        _ = settled => {
            let _ = handle.cancel(Some("answered elsewhere".into())).await;
            return;
        }
    };
    let client = peer.peer_info().map(|i| i.client_info.name.clone()).unwrap_or_default();
    let answer = match (ask.kind, answered) {
        (AskKind::Elicitation, Ok(Ok(ClientResult::ElicitResult(r)))) => {
            serde_json::to_value(r).unwrap_or_default()
        }
        (AskKind::Sampling, Ok(Ok(ClientResult::CreateMessageResult(r)))) => {
            serde_json::to_value(r).unwrap_or_default()
        }
        (AskKind::Confirmation, Ok(Ok(ClientResult::ElicitResult(r)))) => match r.action {
            ElicitationAction::Accept => json!({ "outcome": "once" }),
            ElicitationAction::Decline => {
                json!({ "outcome": "deny", "reason": format!("declined in {client}") })
            }
            _ => json!({ "outcome": "deny", "reason": format!("dismissed in {client}") }),
        },
        // A JSON-RPC error for an answer is a refusal: the call is declined at once rather
        // than waiting out its deadline.
        (AskKind::Confirmation, Ok(Err(rmcp::ServiceError::McpError(e)))) => json!({
            "outcome": "deny",
            "reason": format!("declined in {client} (it answered with an error: {})", e.message)
        }),
        (AskKind::Elicitation, Ok(Err(rmcp::ServiceError::McpError(_)))) => {
            json!({ "action": "decline" })
        }
        (_, other) => {
            // A client that cannot answer leaves the ask to the session's other clients.
            tracing::debug!(id = %ask.id, answer = ?other, "gateway: the elicitation was not answered");
            return;
        }
    };
    if let Err(e) = gw.services.asks.respond(&gw.session, &ask.id, answer) {
        tracing::debug!(id = %ask.id, error = %e, "gateway: the confirmation's answer was refused");
    }
}

/// The kinds of asks a client with these capabilities answers.
pub(super) fn kinds(caps: &rmcp::model::ClientCapabilities) -> Vec<AskKind> {
    let mut kinds = Vec::new();
    if caps.elicitation.is_some() {
        kinds.extend([AskKind::Confirmation, AskKind::Elicitation]);
    }
    #[allow(
        deprecated,
        reason = "sampling is SEP-2577-deprecated; clients of the eras before 2026-07-28 declare it"
    )]
    if caps.sampling.is_some() {
        kinds.push(AskKind::Sampling);
    }
    kinds
}

/// Answer the session's asks of `kinds` through `peer` until `gone`.
pub(super) async fn answer(
    gw: Gateway,
    peer: Peer<RoleServer>,
    conn: ConnId,
    kinds: Vec<AskKind>,
    gone: CancellationToken,
    ready: oneshot::Sender<()>,
) {
    let asks = gw.services.asks.clone();
    let scope = crate::asks::Scope::Gateway(gw.call_prefix());
    let mut listening = asks.listen_to(&gw.session, conn, &kinds, scope);
    let _ = ready.send(());
    // The session is interactive now, so its table shows what needs a person: a list the
    // client took before this began is announced as changed.
    gw.announce_changes(&super::notify::Announce::Peer(peer.clone())).await;
    let mut waiting: HashMap<String, oneshot::Sender<()>> = HashMap::new();
    let start = |ask: Ask, waiting: &mut HashMap<String, oneshot::Sender<()>>| {
        let (tx, rx) = oneshot::channel();
        waiting.insert(ask.id.clone(), tx);
        tokio::spawn(ask_client(gw.clone(), peer.clone(), ask, rx));
    };
    for ask in std::mem::take(&mut listening.pending) {
        start(ask, &mut waiting);
    }
    loop {
        let notice = tokio::select! {
            () = gone.cancelled() => break,
            n = listening.notices.recv() => match n {
                Ok(n) => n,
                Err(RecvError::Lagged(_)) => {
                    for ask in gw.services.asks.pending(&gw.session) {
                        if listening.takes(&ask) && !waiting.contains_key(&ask.id) {
                            start(ask, &mut waiting);
                        }
                    }
                    continue;
                }
                Err(RecvError::Closed) => break,
            },
        };
        let sent: std::collections::HashSet<String> = waiting.keys().cloned().collect();
        if !listening.wants(&notice, &sent) {
            continue;
        }
        match &*notice {
            AskNotice::Asked { ask } => start(ask.clone(), &mut waiting),
            AskNotice::Settled { id, .. } => {
                if let Some(tx) = waiting.remove(id) {
                    let _ = tx.send(());
                }
            }
        }
    }
}
