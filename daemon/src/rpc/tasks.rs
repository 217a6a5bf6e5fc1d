//! `tasks/*`: translation to `mcp::long_calls`.

use geminid_protocol::api::TasksApiServer;
use geminid_protocol::error::ErrorCode;
use geminid_protocol::mcp::{
    TasksCancelParams, TasksCancelResult, TasksListParams, TasksListResult,
};
use jsonrpsee::core::{RpcResult, async_trait};

use super::Handler;
use super::mcp::mcp_error;
use super::session::rpc_error;
use crate::mcp::McpError;

#[async_trait]
impl TasksApiServer for Handler {
    async fn tasks_list(&self, p: TasksListParams) -> RpcResult<TasksListResult> {
        self.core.sessions.record(&p.session).map_err(rpc_error)?;
        Ok(TasksListResult { tasks: self.core.mcp.tasks(&p.session) })
    }

    async fn tasks_cancel(&self, p: TasksCancelParams) -> RpcResult<TasksCancelResult> {
        self.core.sessions.record(&p.session).map_err(rpc_error)?;
        match self.core.mcp.cancel_task(&p.session, &p.id).await {
            Ok(task) => Ok(TasksCancelResult { task }),
            Err(McpError::NotFound(why)) => Err(ErrorCode::InvalidArguments.error(why)),
            Err(e) => Err(mcp_error(e)),
        }
    }
}
