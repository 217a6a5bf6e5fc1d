//! `session/*`.

use geminid_protocol::api::SessionApiServer;
use geminid_protocol::session::{
    Session, SessionAttachParams, SessionCreateParams, SessionDeriveParams, SessionIdParams,
    SessionListParams, SessionListResult, SessionUpdateParams,
};
use jsonrpsee::Extensions;
use jsonrpsee::core::{RpcResult, async_trait};

use super::errors::rpc_error;
use super::{Handler, conn_id};

#[async_trait]
impl SessionApiServer for Handler {
    async fn update(&self, params: SessionUpdateParams) -> RpcResult<Session> {
        self.policy.update_session(params).await.map_err(rpc_error)
    }

    async fn derive(&self, params: SessionDeriveParams) -> RpcResult<Session> {
        self.core.derive_session(params).await.map_err(rpc_error)
    }

    async fn create(&self, ext: &Extensions, params: SessionCreateParams) -> RpcResult<Session> {
        let s = self.services.sessions.create(conn_id(ext), params).await.map_err(rpc_error)?;
        self.config.track(&s.id);
        Ok(s)
    }

    async fn get(&self, params: SessionIdParams) -> RpcResult<Session> {
        let mut s = self.services.sessions.get(&params.id).map_err(rpc_error)?;
        let root = s.state.derived.as_ref().map_or(s.id.as_str(), |d| d.root.as_str());
        let kind = crate::asks::AskKind::Confirmation;
        s.listening = Some(self.services.asks.answers(root, kind));
        Ok(s)
    }

    async fn list(&self, params: Option<SessionListParams>) -> RpcResult<SessionListResult> {
        let params = params.unwrap_or_default();
        let max = geminid_protocol::session::SESSION_LIST_MAX_PAGE;
        if let Some(limit) = params.limit.filter(|l| *l == 0 || *l > max) {
            return Err(jsonrpsee::types::ErrorObject::owned(
                jsonrpsee::types::error::INVALID_PARAMS_CODE,
                format!("limit {limit} is out of range: a page holds 1 to {max} sessions"),
                None::<()>,
            ));
        }
        self.services.sessions.list(params).map_err(rpc_error)
    }

    async fn attach(&self, ext: &Extensions, params: SessionAttachParams) -> RpcResult<Session> {
        let conn = conn_id(ext);
        let s =
            self.services.sessions.attach(conn, &params.id, params.env).await.map_err(rpc_error)?;
        self.config.track(&s.id);
        Ok(s)
    }

    async fn detach(&self, ext: &Extensions, params: SessionIdParams) -> RpcResult<Session> {
        let s = self.services.sessions.detach(conn_id(ext), &params.id).await.map_err(rpc_error)?;
        if s.attached_connections == 0 {
            self.core.sessions_unattached(std::slice::from_ref(&s.id));
        }
        Ok(s)
    }

    async fn close(&self, params: SessionIdParams) -> RpcResult<Session> {
        self.core.close_session(&params.id).await.map_err(rpc_error)
    }
}
