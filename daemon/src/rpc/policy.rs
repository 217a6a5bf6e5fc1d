//! `policy/*`, `confirmation/*` and `audit/*`: translation to the core's policy.

use geminid_protocol::api::{AuditApiServer, ConfirmationApiServer, PolicyApiServer};
use geminid_protocol::error::ErrorCode;
use geminid_protocol::policy::{
    AuditListParams, AuditListResult, ConfirmationRespondParams, ConfirmationRespondResult,
    PolicyCheckParams, PolicyCheckResult, PolicyListParams, PolicyListResult, PolicyReviewParams,
    PolicyReviewResult,
};
use jsonrpsee::core::{RpcResult, async_trait};

use super::Handler;
use super::errors::rpc_error;

#[async_trait]
impl PolicyApiServer for Handler {
    async fn policy_check(&self, p: PolicyCheckParams) -> RpcResult<PolicyCheckResult> {
        if let Some(args) = &p.args
            && !args.is_object()
        {
            return Err(ErrorCode::InvalidArguments
                .error(format!("a call's arguments are a JSON object, not {args}")));
        }
        self.policy.check(p).map_err(rpc_error)
    }

    async fn policy_list(&self, p: PolicyListParams) -> RpcResult<PolicyListResult> {
        self.policy.list(p).map_err(rpc_error)
    }

    async fn policy_review(&self, p: PolicyReviewParams) -> RpcResult<PolicyReviewResult> {
        self.policy.review(p).map_err(rpc_error)
    }

    async fn policy_accept(&self, p: PolicyReviewParams) -> RpcResult<PolicyReviewResult> {
        self.policy
            .accept(p)
            .map_err(rpc_error)?
            .map_err(|why| ErrorCode::InvalidArguments.error(why))
    }
}

#[async_trait]
impl ConfirmationApiServer for Handler {
    async fn confirmation_respond(
        &self,
        p: ConfirmationRespondParams,
    ) -> RpcResult<ConfirmationRespondResult> {
        if let Some(s) = &p.session {
            self.services.sessions.record(s).map_err(rpc_error)?;
        }
        match self.policy.confirm(p) {
            Ok(session) => Ok(ConfirmationRespondResult { session }),
            Err(e) => Err(ErrorCode::InvalidArguments.error(e.to_string())),
        }
    }
}

#[async_trait]
impl AuditApiServer for Handler {
    async fn audit_list(&self, p: Option<AuditListParams>) -> RpcResult<AuditListResult> {
        let p = p.unwrap_or_default();
        if let Some(s) = &p.session {
            self.services.sessions.record(s).map_err(rpc_error)?;
        }
        Ok(self.services.audit.list(&p))
    }
}
