//! `tasks/*`: translation to `mcp::long_calls`; `calls/*`: to the call pipeline's registry.

use geminid_protocol::api::{CallsApiServer, TasksApiServer};
use geminid_protocol::calls::{
    CallsCancelParams, CallsCancelResult, CallsListParams, CallsListResult,
};
use geminid_protocol::error::ErrorCode;
use geminid_protocol::mcp::{
    TasksCancelParams, TasksCancelResult, TasksListParams, TasksListResult,
};
use jsonrpsee::core::{RpcResult, async_trait};

use super::Handler;
use super::errors::mcp_error;
use super::errors::rpc_error;
use crate::mcp::McpError;

#[async_trait]
impl TasksApiServer for Handler {
    async fn tasks_list(&self, p: TasksListParams) -> RpcResult<TasksListResult> {
        self.services.sessions.record(&p.session).map_err(rpc_error)?;
        Ok(TasksListResult { tasks: self.services.mcp.long_calls().tasks(&p.session) })
    }

    async fn tasks_cancel(&self, p: TasksCancelParams) -> RpcResult<TasksCancelResult> {
        self.services.sessions.record(&p.session).map_err(rpc_error)?;
        match self.services.mcp.long_calls().cancel_task(&p.session, &p.id).await {
            Ok(task) => Ok(TasksCancelResult { task }),
            Err(McpError::NotFound(why)) => Err(ErrorCode::InvalidArguments.error(why)),
            Err(e) => Err(mcp_error(e)),
        }
    }
}

#[async_trait]
impl CallsApiServer for Handler {
    async fn calls_list(&self, p: Option<CallsListParams>) -> RpcResult<CallsListResult> {
        let session = p.and_then(|p| p.session);
        if let Some(s) = &session {
            self.services.sessions.record(s).map_err(rpc_error)?;
        }
        Ok(CallsListResult { calls: self.services.calls.in_flight(session.as_deref()) })
    }

    async fn calls_cancel(&self, p: CallsCancelParams) -> RpcResult<CallsCancelResult> {
        Ok(CallsCancelResult { cancelled: self.services.calls.cancel_number(p.id) })
    }
}
