//! Confirmations as elicitations: a gateway whose client declared the elicitation capability
//! answers its session's confirmations, each asked of the client's user as an elicitation (the
//! question, no fields): accept allows the call once, decline or cancel denies it. While it
//! listens the session is not headless, so tools that need a confirmation are served. An ask
//! someone else settles first (another client, `gemctl confirm`, its deadline) is cancelled at
//! this client.

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

/// The question as an elicitation with no fields to fill.
fn params(ask: &Ask) -> Option<ElicitRequestParams> {
    let v = json!({
        "mode": "form",
        "message": ask.title,
        "requestedSchema": { "type": "object", "properties": {} },
    });
    serde_json::from_value(v).ok()
}

/// Ask `ask` of the client until it answers or the ask is settled elsewhere (`settled`).
async fn ask_client(gw: Gateway, peer: Peer<RoleServer>, ask: Ask, settled: oneshot::Receiver<()>) {
    let Some(p) = params(&ask) else { return };
    let request = ServerRequest::ElicitRequest(Request::new(p));
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
    let answer = match answered {
        Ok(Ok(ClientResult::ElicitResult(r))) => match r.action {
            ElicitationAction::Accept => json!({ "outcome": "once" }),
            ElicitationAction::Decline => {
                json!({ "outcome": "deny", "reason": format!("declined in {client}") })
            }
            _ => json!({ "outcome": "deny", "reason": format!("dismissed in {client}") }),
        },
        other => {
            // A client that cannot answer leaves the ask to the session's other clients.
            tracing::debug!(id = %ask.id, answer = ?other, "gateway: the elicitation was not answered");
            return;
        }
    };
    if let Err(e) = gw.core.asks.respond(&gw.session, &ask.id, answer) {
        tracing::debug!(id = %ask.id, error = %e, "gateway: the confirmation's answer was refused");
    }
}

/// Answer the session's confirmations through `peer` until `gone`.
pub(super) async fn confirmations(
    gw: Gateway,
    peer: Peer<RoleServer>,
    conn: ConnId,
    gone: CancellationToken,
) {
    let asks = gw.core.asks.clone();
    let mut listening = asks.listen(&gw.session, conn, &[AskKind::Confirmation]);
    // The session is interactive now, so its table shows what needs a person: a list the
    // client took before this began is announced as changed.
    gw.announce_changes(&peer).await;
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
                    for ask in gw.core.asks.pending(&gw.session) {
                        if ask.kind == AskKind::Confirmation && !waiting.contains_key(&ask.id) {
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
