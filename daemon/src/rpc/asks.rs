//! `asks/*`: translation to [`crate::asks`].

use std::collections::HashSet;

use geminid_protocol::api::{AsksApiServer, ElicitationApiServer, SamplingApiServer};
use geminid_protocol::asks::{
    AskKind, AskNotice, AsksListenParams, AsksPendingParams, AsksPendingResult, AsksRespondParams,
    AsksRespondResult,
};
use geminid_protocol::error::ErrorCode;
use geminid_protocol::mcp::{ServerAskRespondParams, ServerAskRespondResult};
use jsonrpsee::core::{RpcResult, SubscriptionResult, async_trait};
use jsonrpsee::types::ErrorObjectOwned;
use jsonrpsee::types::error::INVALID_PARAMS_CODE;
use jsonrpsee::{PendingSubscriptionSink, SubscriptionMessage};
use tokio::sync::broadcast::error::RecvError;

use super::Handler;
use super::errors::rpc_error;
use crate::session::ConnId;

fn invalid(message: String) -> ErrorObjectOwned {
    ErrorObjectOwned::owned(INVALID_PARAMS_CODE, message, None::<()>)
}

async fn send(sink: &jsonrpsee::SubscriptionSink, notice: &AskNotice) -> bool {
    match serde_json::value::to_raw_value(notice) {
        Ok(raw) => sink.send(SubscriptionMessage::from(raw)).await.is_ok(),
        Err(_) => false,
    }
}

#[async_trait]
impl AsksApiServer for Handler {
    async fn asks_listen(
        &self,
        pending: PendingSubscriptionSink,
        p: AsksListenParams,
    ) -> SubscriptionResult {
        let conn = ConnId(u32::try_from(pending.connection_id().0).unwrap_or(u32::MAX));
        if let Err(e) = self.services.sessions.record(&p.session) {
            pending.reject(rpc_error(e)).await;
            return Ok(());
        }
        if p.kinds.is_empty() {
            let kinds: Vec<&str> =
                AskKind::ALL.iter().map(|k| crate::asks::kind_name(*k)).collect();
            pending
                .reject(invalid(format!(
                    "name the kinds this client answers: one or more of {}",
                    kinds.join(", ")
                )))
                .await;
            return Ok(());
        }
        if !self.services.sessions.is_attached(conn, &p.session) {
            pending
                .reject(invalid(format!(
                    "this connection is not attached to session {}: only its clients answer its \
                     asks (`session/attach` first)",
                    p.session
                )))
                .await;
            return Ok(());
        }
        let mut listening = self.services.asks.listen(&p.session, conn, &p.kinds);
        let sink = pending.accept().await?;
        let mut sent: HashSet<String> = HashSet::new();
        for ask in std::mem::take(&mut listening.pending) {
            sent.insert(ask.id.clone());
            if !send(&sink, &AskNotice::Asked { ask }).await {
                return Ok(());
            }
        }
        loop {
            let notice = tokio::select! {
                _ = sink.closed() => return Ok(()),
                n = listening.notices.recv() => match n {
                    Ok(n) => n,
                    // Missed notices: send what is pending now and was not sent.
                    Err(RecvError::Lagged(_)) => {
                        for ask in self.services.asks.pending(&p.session) {
                            if p.kinds.contains(&ask.kind) && sent.insert(ask.id.clone())
                                && !send(&sink, &AskNotice::Asked { ask }).await
                            {
                                return Ok(());
                            }
                        }
                        continue;
                    }
                    Err(RecvError::Closed) => return Ok(()),
                },
            };
            if !listening.wants(&notice, &sent) {
                continue;
            }
            if !self.services.sessions.is_attached(conn, &p.session) {
                return Err(format!("the connection detached from session {}", p.session).into());
            }
            match &*notice {
                AskNotice::Asked { ask } => {
                    sent.insert(ask.id.clone());
                }
                AskNotice::Settled { id, .. } => {
                    sent.remove(id);
                }
            }
            if !send(&sink, &notice).await {
                return Ok(());
            }
        }
    }

    async fn asks_respond(&self, p: AsksRespondParams) -> RpcResult<AsksRespondResult> {
        self.services.sessions.record(&p.session).map_err(rpc_error)?;
        match self.services.asks.respond(&p.session, &p.id, p.answer) {
            Ok(accepted) => Ok(AsksRespondResult { accepted }),
            Err(e) => Err(ErrorCode::InvalidArguments.error(e.to_string())),
        }
    }

    async fn asks_pending(&self, p: AsksPendingParams) -> RpcResult<AsksPendingResult> {
        let Some(session) = &p.session else {
            return Ok(AsksPendingResult { asks: self.services.asks.pending_all() });
        };
        self.services.sessions.record(session).map_err(rpc_error)?;
        Ok(AsksPendingResult { asks: self.services.asks.pending(session) })
    }
}

impl Handler {
    /// `elicitation/respond`, `sampling/respond`: an answer by the ask's id, from any
    /// connection, refused when the ask is of another kind.
    fn server_ask_respond(
        &self,
        kind: AskKind,
        p: ServerAskRespondParams,
    ) -> RpcResult<ServerAskRespondResult> {
        if let Some(s) = &p.session {
            self.services.sessions.record(s).map_err(rpc_error)?;
        }
        let name = crate::asks::kind_name(kind);
        if let Some(found) = self.services.asks.kind_of(&p.id)
            && found != kind
        {
            let other = crate::asks::kind_name(found);
            return Err(ErrorCode::InvalidArguments.error(format!(
                "{} is a {other} ask, not {name} (answer it with {})",
                p.id,
                if found == AskKind::Confirmation {
                    "confirmation/respond".to_owned()
                } else {
                    format!("{other}/respond")
                }
            )));
        }
        match self.services.asks.respond_by_id(p.session.as_deref(), &p.id, p.result) {
            Ok(session) => Ok(ServerAskRespondResult { session }),
            Err(e) => Err(ErrorCode::InvalidArguments.error(e.to_string())),
        }
    }
}

#[async_trait]
impl ElicitationApiServer for Handler {
    async fn elicitation_respond(
        &self,
        p: ServerAskRespondParams,
    ) -> RpcResult<ServerAskRespondResult> {
        self.server_ask_respond(AskKind::Elicitation, p)
    }
}

#[async_trait]
impl SamplingApiServer for Handler {
    async fn sampling_respond(
        &self,
        p: ServerAskRespondParams,
    ) -> RpcResult<ServerAskRespondResult> {
        self.server_ask_respond(AskKind::Sampling, p)
    }
}
