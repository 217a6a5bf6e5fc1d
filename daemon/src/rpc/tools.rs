//! `tools/*`: translation to the call pipeline ([`crate::calls`]).

use geminid_protocol::api::ToolsApiServer;
use geminid_protocol::error::ErrorCode;
use geminid_protocol::tools::{
    CatalogParams, InstructionsResult, ToolsCallParams, ToolsCallResult, ToolsCancelParams,
    ToolsCancelResult, ToolsListParams, ToolsListResult, ToolsRefreshParams, ToolsRefreshResult,
};
use jsonrpsee::core::{RpcResult, async_trait};
use jsonrpsee::types::ErrorObjectOwned;
use jsonrpsee::types::error::INVALID_PARAMS_CODE;

use super::Handler;
use super::mcp::mcp_error;
use super::session::rpc_error;
use crate::calls::{CallError, CallRequest, Origin, Target};

/// A failed call as the protocol says it: its kind's code, its message.
pub(super) fn call_error(e: CallError) -> ErrorObjectOwned {
    let code = match e {
        CallError::Session(e) => return rpc_error(e),
        CallError::Mcp(e) => return mcp_error(e),
        CallError::Catalog(e) => return super::catalog::catalog_error(e),
        // A malformed request, as JSON-RPC names it.
        CallError::DuplicateCallId(_) => {
            return ErrorObjectOwned::owned(INVALID_PARAMS_CODE, e.to_string(), None::<()>);
        }
        CallError::ToolNotFound(_) => ErrorCode::ToolNotFound,
        CallError::Held(_) => ErrorCode::ToolHeld,
        CallError::Unavailable(_) => ErrorCode::ServerUnavailable,
        CallError::InvalidArguments { .. } => ErrorCode::InvalidArguments,
        CallError::Cancelled { .. } => ErrorCode::Cancelled,
        CallError::PolicyDenied(_) | CallError::Declined(_) => ErrorCode::PolicyDenied,
        CallError::HookBlocked(_) => ErrorCode::HookBlocked,
        CallError::Stopped(_) => ErrorCode::Stopped,
        CallError::ConfirmationTimedOut(_) => ErrorCode::ConfirmationTimedOut,
    };
    match e.hooks() {
        [] => code.error(e.to_string()),
        // Which hooks, for the caller (gemctl names them); the message stays the model's.
        by => code.error_with(e.to_string(), serde_json::json!({ "hooks": by })),
    }
}

#[async_trait]
impl ToolsApiServer for Handler {
    async fn tools_list(&self, p: ToolsListParams) -> RpcResult<ToolsListResult> {
        let st = self.services.catalog.session_tools(&p.session, true).await;
        let st = st.map_err(super::catalog::catalog_error)?;
        let tools = if p.all { st.entries_all(p.raw) } else { st.entries(p.raw) };
        let mut diagnostics = st.diagnostics.clone();
        // A client that lists before it listens sees the headless view: say what is left out.
        let waiting = st.hidden.values().filter(|(h, _)| h.by_default).count();
        if waiting > 0 && !p.all {
            diagnostics.push(format!(
                "{waiting} tool(s) that need a confirmation are left out: no client of this \
                 session answers confirmations (`asks/listen` first, then list again)"
            ));
        }
        Ok(ToolsListResult { tools, diagnostics })
    }

    async fn tools_cancel(&self, p: ToolsCancelParams) -> RpcResult<ToolsCancelResult> {
        self.services.sessions.record(&p.session).map_err(rpc_error)?;
        Ok(ToolsCancelResult { cancelled: self.services.calls.cancel(&p.session, &p.call_id) })
    }

    async fn tools_instructions(&self, p: CatalogParams) -> RpcResult<InstructionsResult> {
        self.instructions(p).await
    }

    async fn tools_refresh(&self, p: ToolsRefreshParams) -> RpcResult<ToolsRefreshResult> {
        self.services.sessions.record(&p.session).map_err(rpc_error)?;
        self.config.track(&p.session);
        let found = self.services.catalog.refresh_custom_tools(&p.session).await;
        Ok(ToolsRefreshResult { discovery: found.map(|d| d.summary()) })
    }

    async fn tools_call(&self, p: ToolsCallParams) -> RpcResult<ToolsCallResult> {
        let request = CallRequest {
            session: p.session,
            target: Target::Tool(p.name.clone()),
            args: p.args,
            call_id: p.call_id,
            origin: Origin::ToolsCall,
            confirmed: p.confirmed,
            hooks_by_client: false,
            tail_of: None,
        };
        let (call, o) = self.services.calls.call(request).await.map_err(call_error)?;
        Ok(ToolsCallResult {
            name: p.name,
            server: call.server,
            tool: call.tool,
            is_error: o.is_error,
            result: o.result,
            parts: o.parts,
            function_response: o.function_response,
            display: o.display,
            last_progress: o.last_progress,
        })
    }
}
