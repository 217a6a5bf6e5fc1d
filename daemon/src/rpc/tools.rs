//! `tools/*`: translation to the call pipeline ([`crate::calls`]).

use geminid_protocol::api::ToolsApiServer;
use geminid_protocol::tools::{
    CatalogParams, InstructionsResult, ToolsCallParams, ToolsCallResult, ToolsCancelParams,
    ToolsCancelResult, ToolsListParams, ToolsListResult, ToolsRefreshParams, ToolsRefreshResult,
};
use jsonrpsee::core::{RpcResult, async_trait};

use super::Handler;
use super::errors::call_error;
use super::errors::rpc_error;
use crate::calls::{CallRequest, Origin, Target};

#[async_trait]
impl ToolsApiServer for Handler {
    async fn tools_list(&self, p: ToolsListParams) -> RpcResult<ToolsListResult> {
        let st = self.services.catalog.session_tools(&p.session, true).await;
        let st = st.map_err(super::errors::catalog_error)?;
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
        let failed = |r: &Result<
            (crate::calls::Call, crate::calls::Outcome),
            crate::calls::CallError,
        >| match r {
            Ok((_, o)) if o.is_error => Some(("tool_error".to_owned(), o.display.clone())),
            Ok(_) => None,
            Err(e) => Some(("tool_error".to_owned(), e.to_string())),
        };
        // The session's id only when a span will carry it (no copy per call otherwise).
        let session = crate::telemetry::on().map(|_| request.session.clone()).unwrap_or_default();
        let call = self.services.calls.call(request);
        let done = crate::telemetry::served(&p.name, &session, call, failed).await;
        let (call, o) = done.map_err(call_error)?;
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
