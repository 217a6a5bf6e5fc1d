//! `policy/*`: translation to the core's policy queries.

use geminid_protocol::api::PolicyApiServer;
use geminid_protocol::policy::{
    PolicyCheckParams, PolicyCheckResult, PolicyListParams, PolicyListResult,
};
use jsonrpsee::core::{RpcResult, async_trait};

use super::Handler;
use super::session::rpc_error;

#[async_trait]
impl PolicyApiServer for Handler {
    async fn policy_check(&self, p: PolicyCheckParams) -> RpcResult<PolicyCheckResult> {
        self.core.policy_check(p).map_err(rpc_error)
    }

    async fn policy_list(&self, p: PolicyListParams) -> RpcResult<PolicyListResult> {
        self.core.policy_list(p).map_err(rpc_error)
    }
}
