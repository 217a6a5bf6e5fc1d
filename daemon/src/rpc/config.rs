//! `config/*`, `trust/*` and the configuration half of `mcp/*`.

use geminid_protocol::api::{ConfigApiServer, ContextApiServer, McpApiServer, TrustApiServer};
use geminid_protocol::config::{
    ConfigParams, DiagnosticsResult, EffectiveConfig, McpAddParams, McpAddResult, McpEnableParams,
    McpEnableResult, McpImportParams, McpImportResult, McpReloadParams, McpReloadResult,
    McpRemoveParams, McpRemoveResult, TrustGetParams, TrustGetResult, TrustSetParams,
    TrustSetResult,
};
use geminid_protocol::error::ErrorCode;
use geminid_protocol::mcp::{
    CallToolParams, ListServersParams, ListServersResult, LogsParams, LogsResult, ServerParams,
    ServerStatus, StartParams,
};
use jsonrpsee::core::{RpcResult, async_trait};
use jsonrpsee::types::ErrorObjectOwned;

use super::Handler;
use super::errors::rpc_error;
use crate::config::ops::OpError;
use crate::config::write::WriteError;
use crate::services::settings::ChangeError;

pub(super) fn change_error(e: ChangeError) -> ErrorObjectOwned {
    let code = match e {
        ChangeError::Session(e) => return rpc_error(e),
        ChangeError::NoSuchServer(_) => ErrorCode::ServerNotFound,
        ChangeError::Op(OpError::Refused(_) | OpError::Write(WriteError::Unparsable { .. })) => {
            ErrorCode::ConfigRefused
        }
        ChangeError::Op(OpError::Write(WriteError::Io { .. })) => ErrorCode::ConfigWrite,
    };
    code.error(e.to_string())
}

#[async_trait]
impl ConfigApiServer for Handler {
    async fn config_get(&self, p: ConfigParams) -> RpcResult<EffectiveConfig> {
        self.settings.config_view(&p.session, p.show_secrets).map_err(rpc_error)
    }

    async fn config_diagnostics(&self, p: ConfigParams) -> RpcResult<DiagnosticsResult> {
        let effective = self.config.effective(&p.session).map_err(rpc_error)?;
        let mut diagnostics = effective.public.diagnostics.clone();
        diagnostics.extend(crate::config::context::diagnostics(&effective));
        // The policy files' problems too (a rule not loaded is a call decided otherwise than
        // the file says), errors first as the settings' are.
        let params = geminid_protocol::policy::PolicyListParams { session: p.session, tier: None };
        let policy = self.policy.list(params).map_err(rpc_error)?.diagnostics;
        diagnostics.extend(policy);
        diagnostics.sort_by_key(|d| d.severity != geminid_protocol::config::Severity::Error);
        Ok(DiagnosticsResult { diagnostics })
    }
}

#[async_trait]
impl ContextApiServer for Handler {
    async fn context_files(
        &self,
        p: geminid_protocol::config::ContextFilesParams,
    ) -> RpcResult<geminid_protocol::config::ContextFilesResult> {
        self.settings.context_files(&p.session).map_err(rpc_error)
    }
}

#[async_trait]
impl TrustApiServer for Handler {
    async fn trust_get(&self, p: TrustGetParams) -> RpcResult<TrustGetResult> {
        self.settings.trust_get(&p.path).map_err(change_error)
    }

    async fn trust_set(&self, p: TrustSetParams) -> RpcResult<TrustSetResult> {
        self.settings.trust_set(&p.path, p.level).await.map_err(change_error)
    }
}

#[async_trait]
impl McpApiServer for Handler {
    async fn mcp_add(&self, p: McpAddParams) -> RpcResult<McpAddResult> {
        let added = self.settings.mcp_add(&p.session, p.scope, &p.name, &p.config);
        added.await.map_err(change_error)
    }

    async fn mcp_import(&self, p: McpImportParams) -> RpcResult<McpImportResult> {
        self.settings.mcp_import(&p.session, &p).await.map_err(change_error)
    }

    async fn mcp_remove(&self, p: McpRemoveParams) -> RpcResult<McpRemoveResult> {
        self.settings.mcp_remove(&p.session, p.scope, &p.name).await.map_err(change_error)
    }

    async fn mcp_enable(&self, p: McpEnableParams) -> RpcResult<McpEnableResult> {
        let changed = self.settings.set_enabled(&p.session, &p.name, true, p.session_only);
        changed.await.map_err(change_error)
    }

    async fn mcp_disable(&self, p: McpEnableParams) -> RpcResult<McpEnableResult> {
        let changed = self.settings.set_enabled(&p.session, &p.name, false, p.session_only);
        changed.await.map_err(change_error)
    }

    async fn mcp_reload(&self, p: Option<McpReloadParams>) -> RpcResult<McpReloadResult> {
        let session = p.and_then(|p| p.session);
        let changes = self.reloader.requested(session.as_deref()).await.map_err(rpc_error)?;
        Ok(McpReloadResult { changes })
    }

    async fn mcp_list_servers(&self, p: Option<ListServersParams>) -> RpcResult<ListServersResult> {
        self.list_servers(p).await
    }

    async fn mcp_start(&self, p: StartParams) -> RpcResult<ListServersResult> {
        self.start(p).await
    }

    async fn mcp_stop(&self, p: ServerParams) -> RpcResult<ServerStatus> {
        self.stop(p).await
    }

    async fn mcp_restart(&self, p: ServerParams) -> RpcResult<ServerStatus> {
        self.restart(p).await
    }

    async fn mcp_logs(&self, p: LogsParams) -> RpcResult<LogsResult> {
        self.logs(p).await
    }

    async fn mcp_call_tool(&self, p: CallToolParams) -> RpcResult<serde_json::Value> {
        self.call_tool(p).await
    }

    async fn mcp_review(
        &self,
        p: geminid_protocol::mcp::ServerParams,
    ) -> RpcResult<geminid_protocol::pins::ReviewResult> {
        self.review(p).await
    }

    async fn mcp_accept(
        &self,
        p: geminid_protocol::pins::PinsParams,
    ) -> RpcResult<geminid_protocol::pins::PinsResult> {
        self.settle_pins(p, true).await
    }

    async fn mcp_reject(
        &self,
        p: geminid_protocol::pins::PinsParams,
    ) -> RpcResult<geminid_protocol::pins::PinsResult> {
        self.settle_pins(p, false).await
    }

    async fn mcp_update(
        &self,
        p: geminid_protocol::pins::UpdateParams,
    ) -> RpcResult<geminid_protocol::pins::UpdateResult> {
        self.update(p).await
    }
}
