//! The runtime half of `mcp/*`: server states, start, restart, logs, raw tool calls.

use std::sync::Arc;

use geminid_protocol::api::McpLogsApiServer;
use geminid_protocol::error::ErrorCode;
use geminid_protocol::mcp::{
    CallToolParams, ListServersParams, ListServersResult, LogsParams, LogsResult, ServerParams,
    ServerStatus, StartParams,
};
use jsonrpsee::core::{RpcResult, SubscriptionResult, async_trait};
use jsonrpsee::types::ErrorObjectOwned;
use jsonrpsee::{PendingSubscriptionSink, SubscriptionMessage};
use tokio::sync::broadcast::error::RecvError;

use super::Handler;
use super::errors::rpc_error;
use super::errors::{call_error, mcp_error};
use crate::calls::{CallRequest, Origin, Target};
use crate::mcp::McpError;
use crate::mcp::server::Server;

fn review_error(e: crate::mcp::pinned::ReviewError) -> ErrorObjectOwned {
    use crate::mcp::pinned::ReviewError;
    use crate::pins::PinError;
    let code = match &e {
        ReviewError::NothingListed(_) => ErrorCode::ServerUnavailable,
        ReviewError::Unreviewed(_) => ErrorCode::ToolHeld,
        ReviewError::Pins(PinError::NotDiffering(_)) => ErrorCode::ToolNotFound,
        ReviewError::Pins(PinError::Keep(_)) => ErrorCode::IntegrityFailed,
    };
    code.error(e.to_string())
}

impl Handler {
    fn find_server(&self, p: &ServerParams) -> RpcResult<Arc<Server>> {
        if let Some(id) = &p.session {
            self.services.sessions.record(id).map_err(rpc_error)?;
            return self.servers.server_of(id, &p.name).map_err(mcp_error);
        }
        self.services.mcp.find(None, &p.name).map_err(mcp_error)
    }

    pub(super) async fn list_servers(
        &self,
        p: Option<ListServersParams>,
    ) -> RpcResult<ListServersResult> {
        let p = p.unwrap_or_default();
        match p.session {
            Some(id) => self.servers.list(&id).map_err(rpc_error),
            None if p.usage => Ok(ListServersResult {
                servers: self.services.mcp.status().list_all_with_usage(),
                warnings: vec![],
            }),
            None => Ok(ListServersResult {
                servers: self.services.mcp.status().list_all(),
                warnings: vec![],
            }),
        }
    }

    pub(super) async fn start(&self, p: StartParams) -> RpcResult<ListServersResult> {
        self.servers.start(&p.session, p.wait).await.map_err(rpc_error)
    }

    pub(super) async fn stop(&self, p: ServerParams) -> RpcResult<ServerStatus> {
        let server = self.find_server(&p)?;
        match self.services.mcp.idle().stop_server(&server).await {
            Some(status) => Ok(status),
            None => Err(ErrorCode::ServerUnavailable.error(format!(
                "MCP server '{}' is not running (`gemctl mcp restart {}` starts it)",
                p.name, p.name
            ))),
        }
    }

    pub(super) async fn restart(&self, p: ServerParams) -> RpcResult<ServerStatus> {
        if let Some(id) = &p.session {
            self.services.sessions.record(id).map_err(rpc_error)?;
            let configured = || {
                let config = self.config.effective(id).ok();
                config.and_then(|c| c.servers.get(&p.name).map(|s| s.blocked.is_none()))
            };
            // Configured here, may run, and not started since the daemon started: start it as
            // `mcp start` would (new-user audit C8: it was "not running or ran lately").
            if matches!(self.servers.server_of(id, &p.name), Err(McpError::Unavailable(_)))
                && configured() == Some(true)
            {
                tracing::info!(server = %p.name, "restart of a server not started yet: starting the session's servers");
                self.servers.start(id, true).await.map_err(rpc_error)?;
                let server = self.servers.server_of(id, &p.name).map_err(mcp_error)?;
                return Ok(self.services.mcp.status().of(&server));
            }
        }
        let server = self.find_server(&p)?;
        tracing::info!(server = %server.name, "restart requested");
        Ok(self.services.mcp.lifecycle().restart(&server).await)
    }

    pub(super) async fn logs(&self, p: LogsParams) -> RpcResult<LogsResult> {
        let server = self.find_server(&p.server)?;
        let (lines, dropped) =
            server.log.tail(p.lines.map(|n| usize::try_from(n).unwrap_or(usize::MAX)));
        Ok(LogsResult { name: server.name.clone(), lines, dropped })
    }

    pub(super) async fn follow_logs(
        &self,
        pending: PendingSubscriptionSink,
        p: ServerParams,
    ) -> SubscriptionResult {
        let server = match self.find_server(&p) {
            Ok(s) => s,
            Err(e) => {
                pending.reject(e).await;
                return Ok(());
            }
        };
        let mut rx = server.log.follow();
        let sink = pending.accept().await?;
        let mut state = server.watch();
        loop {
            tokio::select! {
                _ = sink.closed() => return Ok(()),
                // The server was stopped for good (removed): the stream ends.
                changed = state.changed() => if changed.is_err() { return Ok(()) },
                line = rx.recv() => match line {
                    Ok(line) => {
                        let msg = SubscriptionMessage::from(serde_json::value::to_raw_value(&line)?);
                        if sink.send(msg).await.is_err() {
                            return Ok(());
                        }
                    }
                    Err(RecvError::Lagged(n)) => {
                        return Err(format!("log stream dropped: {n} lines were missed").into());
                    }
                    Err(RecvError::Closed) => return Ok(()),
                },
            }
        }
    }

    pub(super) async fn review(
        &self,
        p: ServerParams,
    ) -> RpcResult<geminid_protocol::pins::ReviewResult> {
        let server = self.find_server(&p)?;
        self.services.mcp.pinning().review(&server).map_err(review_error)
    }

    pub(super) async fn settle_pins(
        &self,
        p: geminid_protocol::pins::PinsParams,
        accept: bool,
    ) -> RpcResult<geminid_protocol::pins::PinsResult> {
        let server = self.find_server(&p.server)?;
        let (names, digest) = (p.names, p.digest);
        self.services
            .mcp
            .pinning()
            .settle_pins(&server, names, digest, accept)
            .await
            .map_err(review_error)
    }

    pub(super) async fn update(
        &self,
        p: geminid_protocol::pins::UpdateParams,
    ) -> RpcResult<geminid_protocol::pins::UpdateResult> {
        use crate::mcp::update::UpdateError;
        let server = self.find_server(&p.server)?;
        self.services.mcp.update(&server, p.yes).await.map_err(|e| {
            let code = match &e {
                UpdateError::NotPinned(_) => ErrorCode::ConfigRefused,
                UpdateError::Unreachable(_) => ErrorCode::ServerUnavailable,
                UpdateError::Failed(_) => ErrorCode::ServerError,
            };
            code.error(e.to_string())
        })
    }

    pub(super) async fn call_tool(&self, p: CallToolParams) -> RpcResult<serde_json::Value> {
        let request = CallRequest {
            session: p.session,
            target: Target::Mcp { server: p.server, tool: p.tool },
            args: p.arguments,
            call_id: None,
            origin: Origin::McpCallTool,
            confirmed: p.confirmed,
            hooks_by_client: false,
            tail_of: None,
        };
        let (_, outcome) = self.services.calls.call(request).await.map_err(call_error)?;
        Ok(outcome.result)
    }
}

#[async_trait]
impl McpLogsApiServer for Handler {
    async fn mcp_follow_logs(
        &self,
        pending: PendingSubscriptionSink,
        p: ServerParams,
    ) -> SubscriptionResult {
        self.follow_logs(pending, p).await
    }
}
