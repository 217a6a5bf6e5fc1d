//! One request to a server: fails at once when the server is not connected or dies meanwhile
//! (naming the cause), and after the calling session's `timeout`; a request whose caller
//! went away is cancelled on the server.

use std::sync::Arc;
use std::time::Duration;

use geminid_protocol::mcp::ServerState;

use super::server::{self, Server};
use super::{McpError, Supervisor, connect, spec};

/// Sends `notifications/cancelled` for a request whose caller went away.
struct CancelOnDrop {
    peer: Option<rmcp::service::Peer<rmcp::RoleClient>>,
    id: rmcp::model::RequestId,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let Some(peer) = self.peer.take() else { return };
        let id = self.id.clone();
        tokio::spawn(async move {
            let params = rmcp::model::CancelledNotificationParam::new(
                Some(id),
                Some("the caller went away".into()),
            );
            let n = rmcp::model::CancelledNotification::new(params);
            let _ = peer.send_notification(n.into()).await;
        });
    }
}

/// `tools/call` on the server, keeping the result as JSON (content types rmcp does not know,
/// or a `content` that is not an array, reach the converter instead of failing the call).
/// If this future is dropped before the answer (timeout, caller gone), the server is sent
/// `notifications/cancelled`. `sent` learns the request's progress token and id as soon as it is
/// on its way; what it returns is held until the answer.
async fn call_raw<G>(
    peer: &rmcp::service::Peer<rmcp::RoleClient>,
    params: rmcp::model::CallToolRequestParams,
    sent: impl FnOnce(&rmcp::model::ProgressToken, &rmcp::model::RequestId) -> G,
) -> Result<serde_json::Value, rmcp::ServiceError> {
    use rmcp::model::{ClientRequest, Request, ServerResult};
    let request = ClientRequest::CallToolRequest(Request::new(params));
    let handle = peer
        .send_cancellable_request(request, rmcp::service::PeerRequestOptions::no_options())
        .await?;
    let _held = sent(&handle.progress_token, &handle.id);
    let mut guard = CancelOnDrop { peer: Some(peer.clone()), id: handle.id.clone() };
    let response = handle.await_response().await;
    guard.peer = None;
    match response? {
        ServerResult::CallToolResult(r) => {
            serde_json::to_value(r).map_err(|_| rmcp::ServiceError::UnexpectedResponse)
        }
        ServerResult::CustomResult(c) => Ok(c.0),
        ServerResult::EmptyResult(_) => Ok(serde_json::json!({})),
        _ => Err(rmcp::ServiceError::UnexpectedResponse),
    }
}

impl Supervisor {
    /// Call a tool on a server; fails at once if the server dies meanwhile. `sent` is told
    /// the request's progress token once it is on its way (to route the server's progress
    /// notifications); what it returns is held until the answer.
    pub async fn call_tool<G>(
        &self,
        server: &Arc<Server>,
        timeout: Duration,
        tool: &str,
        arguments: Option<serde_json::Map<String, serde_json::Value>>,
        sent: impl FnOnce(&rmcp::model::ProgressToken, &rmcp::model::RequestId) -> G,
    ) -> Result<serde_json::Value, McpError> {
        let mut params = rmcp::model::CallToolRequestParams::new(tool.to_owned());
        params.arguments = arguments;
        let call = |peer| async move { call_raw(&peer, params, sent).await };
        self.request(server, timeout, call).await
    }

    /// One request to a server, as `send` makes it: fails at once if the server is not
    /// connected or dies meanwhile (naming the cause), and after `timeout` (the calling
    /// session's, see [`Supervisor::timeout_for`]).
    pub async fn request<T, Fut>(
        &self,
        server: &Arc<Server>,
        timeout: Duration,
        send: impl FnOnce(rmcp::service::Peer<rmcp::RoleClient>) -> Fut,
    ) -> Result<T, McpError>
    where
        Fut: Future<Output = Result<T, rmcp::ServiceError>>,
    {
        let name = &server.name;
        let mut watch = server.watch();
        // A server's last error always names it; without one, its state is the reason.
        let unavailable = |s: &server::Snapshot| match &s.last_error {
            Some(why) => why.clone(),
            None => {
                let state = match s.state {
                    // Connected but no connection: it is being stopped or restarted.
                    ServerState::Connected => "stopping".to_owned(),
                    other => other.label().to_lowercase(),
                };
                format!("MCP server '{name}' is {state}")
            }
        };
        let Some(peer) = server.peer() else {
            return Err(McpError::Unavailable(unavailable(&watch.borrow())));
        };
        let call = tokio::time::timeout(timeout, send(peer));
        let result = tokio::select! {
            result = call => result,
            died = watch.wait_for(|s| s.state != ServerState::Connected) => {
                let s = died.map(|s| s.clone()).unwrap_or_else(|_| server.snapshot());
                return Err(McpError::Unavailable(format!("{} during the call", unavailable(&s))));
            }
        };
        match result {
            Ok(Ok(r)) => Ok(r),
            Ok(Err(rmcp::ServiceError::McpError(e))) => {
                Err(McpError::Server(format!("MCP server '{name}' answered: {}", e.message)))
            }
            Ok(Err(e)) => {
                // The connection usually reports the end before the process's exit is seen:
                // give the supervisor a moment to learn the cause.
                let settled = tokio::time::timeout(Duration::from_millis(500), async {
                    watch.wait_for(|s| s.state != ServerState::Connected).await.map(|s| s.clone())
                })
                .await;
                match settled {
                    Ok(Ok(s)) => {
                        Err(McpError::Unavailable(format!("{} during the call", unavailable(&s))))
                    }
                    _ => Err(McpError::Unavailable(format!(
                        "MCP server '{name}': {}",
                        spec::scrub(&connect::error_chain(&e), &server.spec, &server.target)
                    ))),
                }
            }
            Err(_) => Err(McpError::Server(format!(
                "MCP server '{name}' did not answer within {}",
                humantime::format_duration(timeout)
            ))),
        }
    }
}
