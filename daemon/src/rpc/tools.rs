//! `tools/*`.

use geminid_protocol::api::ToolsApiServer;
use geminid_protocol::error::ErrorCode;
use geminid_protocol::mcp::ServerState;
use geminid_protocol::tools::{
    CatalogParams, InstructionsResult, ToolsCallParams, ToolsCallResult, ToolsCancelParams,
    ToolsCancelResult, ToolsListParams, ToolsListResult,
};
use std::sync::Arc;

use jsonrpsee::core::{RpcResult, async_trait};
use jsonrpsee::types::ErrorObject;
use jsonrpsee::types::error::INVALID_PARAMS_CODE;
use serde_json::Value;

use super::Handler;
use super::mcp::mcp_error;
use super::session::rpc_error;
use crate::mcp::catalog::check_args;
use crate::mcp::{SessionTools, tools};

impl Handler {
    /// The session's tools, starting its servers first if it had not. With `complete`, a
    /// server still in its first start is waited for (up to its start-up timeout), so a list,
    /// or a call whose tool is not there yet, sees the same catalog as the request that
    /// started the servers; without, the table as it is now (a call to a server that is up
    /// never waits for one that is still starting).
    async fn session_tools(&self, session: &str, complete: bool) -> RpcResult<Arc<SessionTools>> {
        self.ensure_servers(session).await?;
        let tools = self.core.mcp.session_tools(session).map_err(mcp_error)?;
        if !complete || !tools.pending {
            return Ok(tools);
        }
        self.core.mcp.settle(session).await;
        self.core.mcp.session_tools(session).map_err(mcp_error)
    }
}

#[async_trait]
impl ToolsApiServer for Handler {
    async fn tools_list(&self, p: ToolsListParams) -> RpcResult<ToolsListResult> {
        let st = self.session_tools(&p.session, true).await?;
        Ok(ToolsListResult { tools: st.entries(p.raw), diagnostics: st.diagnostics.clone() })
    }

    async fn tools_cancel(&self, p: ToolsCancelParams) -> RpcResult<ToolsCancelResult> {
        self.core.sessions.record(&p.session).map_err(rpc_error)?;
        Ok(ToolsCancelResult { cancelled: self.core.mcp.cancel_call(&p.session, &p.call_id) })
    }

    async fn tools_instructions(&self, p: CatalogParams) -> RpcResult<InstructionsResult> {
        self.instructions(p).await
    }

    async fn tools_call(&self, mut p: ToolsCallParams) -> RpcResult<ToolsCallResult> {
        let mut st = self.session_tools(&p.session, false).await?;
        if st.pending && st.get(&p.name).is_none() {
            // Not there yet: wait for the server that would have it, then look again.
            self.core.mcp.settle_for_tool(&p.session, &p.name).await;
            st = self.core.mcp.session_tools(&p.session).map_err(mcp_error)?;
        }
        let Some(t) = st.get(&p.name) else {
            return Err(match self.core.mcp.explain_missing_tool(&p.session, &p.name) {
                Some((ServerState::Connected, why)) => ErrorCode::ToolNotFound.error(why),
                Some((_, why)) => ErrorCode::ServerUnavailable.error(why),
                None => ErrorCode::ToolNotFound.error(format!(
                    "no tool named '{}' in this session (`gemctl mcp tools` lists them)",
                    p.name
                )),
            });
        };
        let tool = t.tool();
        let own = tool["name"].as_str().unwrap_or_default().to_owned();
        // `wait_for_previous` is Gemini CLI's parameter, added to the declaration the model
        // sees: it is checked here against that declaration and not sent on, because the
        // server never declared it (and a schema with `additionalProperties: false`, as
        // zod-based servers emit, forbids it). A server that declares it itself gets it.
        let wait = match p.args.as_mut() {
            Some(map) if tools::offers_wait_for_previous(tool.get("inputSchema")) => {
                map.remove(tools::WAIT_FOR_PREVIOUS_PARAM)
            }
            _ => None,
        };
        if wait.as_ref().is_some_and(|w| !w.is_boolean()) {
            return Err(ErrorCode::InvalidArguments.error(format!(
                "invalid arguments for tool '{}': /{}: must be a boolean",
                p.name,
                tools::WAIT_FOR_PREVIOUS_PARAM
            )));
        }
        let mut args = Value::Object(p.args.clone().unwrap_or_default());
        if let Some(Ok(v)) = t.catalog.validators.get(t.index).map(|v| &**v)
            && let Err(e) = check_args(v, &args)
        {
            return Err(ErrorCode::InvalidArguments
                .error(format!("invalid arguments for tool '{}': {e}", p.name)));
        }
        // What the model sent, for the error text (Gemini CLI quotes its call).
        if let (Some(w), Some(map)) = (wait, args.as_object_mut()) {
            map.insert(tools::WAIT_FOR_PREVIOUS_PARAM.to_owned(), w);
        }
        let target = crate::mcp::ProgressTarget {
            session: p.session.clone(),
            call_id: p.call_id.clone(),
            name: p.name.clone(),
        };
        // The server gets the arguments as sent (absent stays absent); `args` is the copy for
        // validation and for the error text.
        let call = self.core.mcp.call_tool(&t.server, t.timeout, &own, p.args, Some(target));
        let result = match &p.call_id {
            None => call.await,
            Some(id) => {
                let Some(mut guard) = self.core.mcp.register_call(&p.session, id) else {
                    return Err(ErrorObject::owned(
                        INVALID_PARAMS_CODE,
                        format!(
                            "callId '{id}' is already used by a call in progress in this session"
                        ),
                        None::<()>,
                    ));
                };
                tokio::select! {
                    r = call => r,
                    Ok(()) = &mut guard.cancelled => {
                        return Err(ErrorCode::Cancelled.error(format!(
                            "call '{id}' to '{}' was cancelled",
                            p.name
                        )));
                    }
                }
            }
        }
        .map_err(mcp_error)?;
        let is_error = tools::is_error(&result);
        let id = p.call_id.as_deref();
        let (parts, display, function_response) = if is_error {
            let message = tools::error_message(&own, &args, &result);
            let response = tools::error_response(&p.name, id, &message);
            let display = format!("Error: MCP tool '{own}' reported an error.");
            (vec![serde_json::json!({ "text": message })], display, response)
        } else {
            let (parts, display) = tools::parts(&own, &result);
            let response = tools::function_response(&p.name, id, &parts);
            (parts, display, response)
        };
        Ok(ToolsCallResult {
            name: p.name,
            server: t.server_name.clone(),
            tool: own,
            is_error,
            result,
            parts,
            function_response,
            display,
        })
    }
}
