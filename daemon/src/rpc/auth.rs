//! `auth/*`: translation to `services::auth`.

use geminid_protocol::api::AuthApiServer;
use geminid_protocol::auth::{
    AuthBeginParams, AuthBegun, AuthLogoutParams, AuthLogoutResult, AuthProgress,
    AuthProgressParams, AuthStatusParams, AuthStatusResult,
};
use geminid_protocol::error::ErrorCode;
use jsonrpsee::Extensions;
use jsonrpsee::core::{RpcResult, async_trait};
use jsonrpsee::types::ErrorObjectOwned;

use super::errors::rpc_error;
use super::{Handler, conn_id};
use crate::services::auth::AuthFailure;

fn auth_error(e: AuthFailure) -> ErrorObjectOwned {
    match e {
        AuthFailure::Session(e) => rpc_error(e),
        AuthFailure::NotFound(m) => ErrorCode::ServerNotFound.error(m),
        AuthFailure::Failed(m) => ErrorCode::NeedsAuth.error(m),
    }
}

#[async_trait]
impl AuthApiServer for Handler {
    async fn auth_begin(&self, ext: &Extensions, p: AuthBeginParams) -> RpcResult<AuthBegun> {
        let conn = conn_id(ext);
        self.sign_ins.begin(conn, &p.session, &p.name, p.callback_port).await.map_err(auth_error)
    }

    async fn auth_progress(&self, p: AuthProgressParams) -> RpcResult<AuthProgress> {
        self.sign_ins.progress(&p.attempt, p.after).await.map_err(auth_error)
    }

    async fn auth_status(&self, p: AuthStatusParams) -> RpcResult<AuthStatusResult> {
        self.sign_ins.status(&p.session).await.map_err(auth_error)
    }

    async fn auth_logout(&self, p: AuthLogoutParams) -> RpcResult<AuthLogoutResult> {
        let removed = self.sign_ins.logout(&p.session, &p.name).await.map_err(auth_error)?;
        Ok(AuthLogoutResult { name: p.name, removed })
    }
}
