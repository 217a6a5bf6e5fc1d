//! One request to a server: fails at once when the server is not connected or dies meanwhile
//! (naming the cause), and after the calling session's `timeout`; a request whose caller
//! went away is cancelled on the server.

use std::sync::Arc;
use std::time::Duration;

use geminid_protocol::mcp::ServerState;

use super::error::McpError;
use super::server::{self, Server};
use super::supervisor::Supervisor;
use super::{connect, spec};

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

/// Rounds of `input_required` one call may take (rmcp's own cap).
const MAX_INPUT_ROUNDS: usize = 10;

/// One `tools/call` request, cancelled on the server if this future is dropped before the
/// answer (timeout, caller gone). `sent` is told its progress token and id once it is on its
/// way.
async fn send_call(
    peer: &rmcp::service::Peer<rmcp::RoleClient>,
    params: rmcp::model::CallToolRequestParams,
    meta: Option<rmcp::model::RequestMetaObject>,
    sent: impl FnOnce(&rmcp::model::ProgressToken, &rmcp::model::RequestId),
) -> Result<rmcp::model::ServerResult, rmcp::ServiceError> {
    use rmcp::model::{ClientRequest, Request};
    let request = ClientRequest::CallToolRequest(Request::new(params));
    let mut options = rmcp::service::PeerRequestOptions::no_options();
    options.meta = meta;
    let handle = peer.send_cancellable_request(request, options).await?;
    sent(&handle.progress_token, &handle.id);
    let mut guard = CancelOnDrop { peer: Some(peer.clone()), id: handle.id.clone() };
    let response = handle.await_response().await;
    guard.peer = None;
    response
}

/// The stdio transport keeps a `tools/call` answer as JSON: one that is `input_required`, or a
/// task, is read as such.
fn input_required_as_such(
    r: rmcp::model::ServerResult,
) -> Result<rmcp::model::ServerResult, rmcp::ServiceError> {
    use rmcp::model::ServerResult;
    match r {
        ServerResult::CustomResult(c) => {
            let bad = |_| rmcp::ServiceError::UnexpectedResponse;
            match c.0.get("resultType").and_then(serde_json::Value::as_str) {
                Some("input_required") => {
                    serde_json::from_value(c.0).map(ServerResult::InputRequiredResult).map_err(bad)
                }
                Some("task") => {
                    serde_json::from_value(c.0).map(ServerResult::CreateTaskResult).map_err(bad)
                }
                _ => Ok(ServerResult::CustomResult(c)),
            }
        }
        other => Ok(other),
    }
}

/// `params` with the key the server gave them among its input requests in `_meta`
/// ([`super::callers::INPUT_KEY`]): the ask they become keeps it, for a gateway client of the same era to
/// be asked under the server's own key.
fn keyed<T: serde::Serialize + serde::de::DeserializeOwned>(params: T, key: &str) -> T {
    let Ok(mut v) = serde_json::to_value(&params) else { return params };
    let Some(obj) = v.as_object_mut() else { return params };
    let meta = obj.entry("_meta").or_insert_with(|| serde_json::json!({}));
    let Some(meta) = meta.as_object_mut() else { return params };
    meta.insert(super::callers::INPUT_KEY.to_owned(), serde_json::Value::String(key.to_owned()));
    serde_json::from_value(v).unwrap_or(params)
}

impl Supervisor {
    /// Requests to its servers.
    pub(crate) fn requests(&self) -> Requests<'_> {
        Requests { sup: self }
    }
}

/// One request to a server (see the module).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Requests<'a> {
    sup: &'a Supervisor,
}

impl Requests<'_> {
    /// `tools/call` on the server, keeping the result as JSON (content types rmcp does not
    /// know, or a `content` that is not an array, reach the converter instead of failing the
    /// call). A 2026-07-28 server's `input_required` answers are fulfilled for the call's own
    /// session (its elicitation, sampling and roots, as `asked` answers a server's requests)
    /// and the call sent again with the responses, up to [`MAX_INPUT_ROUNDS`]. `sent` learns
    /// the first request's progress token and id; what it returns is held until the answer.
    async fn call_raw<G>(
        &self,
        server: &Arc<Server>,
        session: &str,
        peer: &rmcp::service::Peer<rmcp::RoleClient>,
        mut params: rmcp::model::CallToolRequestParams,
        sent: impl FnOnce(&rmcp::model::ProgressToken, &rmcp::model::RequestId) -> G,
        op: Option<&crate::telemetry::Operation>,
    ) -> Result<serde_json::Value, rmcp::ServiceError> {
        use rmcp::model::ServerResult;
        let identity = server.identity.as_str();
        // The new era: each request says what its own client can do, and opts in to the
        // call's log messages (a server of that era sends none without it; those of the
        // earlier ones send theirs unasked): every level, as those do until a client sets
        // one, for the server's log and the gateway's clients (which filter by their own).
        let meta = connect::is_modern(peer).then(|| {
            let mut meta = rmcp::model::RequestMetaObject::new();
            meta.set_client_capabilities(self.sup.callers.capabilities(session));
            #[allow(deprecated, reason = "logging is SEP-2577-deprecated, and still the era's")]
            meta.set_log_level(rmcp::model::LoggingLevel::Debug);
            meta
        });
        // The CLIENT span's trace context goes to the server in `_meta` (SEP-414).
        let meta = match op {
            Some(op) => {
                let mut meta = meta.unwrap_or_default();
                crate::telemetry::inject(op.context(), &mut meta.0.0);
                Some(meta)
            }
            None => meta,
        };
        let mut held = None;
        let mut origin = None;
        let mut response = send_call(peer, params.clone(), meta.clone(), |token, id| {
            origin = Some(id.clone());
            held = Some(sent(token, id));
        })
        .await;
        let origin = origin.ok_or(rmcp::ServiceError::UnexpectedResponse)?;
        if let Some(op) = op {
            op.set(opentelemetry::KeyValue::new("jsonrpc.request.id", origin.to_string()));
        }
        for round in 0..MAX_INPUT_ROUNDS {
            match input_required_as_such(response?)? {
                ServerResult::CallToolResult(r) => {
                    return serde_json::to_value(r)
                        .map_err(|_| rmcp::ServiceError::UnexpectedResponse);
                }
                ServerResult::CustomResult(c) => return Ok(c.0),
                ServerResult::CreateTaskResult(t) => {
                    return self.sup.long_calls().follow_task(server, peer, &origin, t).await;
                }
                ServerResult::EmptyResult(_) => return Ok(serde_json::json!({})),
                ServerResult::InputRequiredResult(r) => {
                    let asked = r.input_requests.as_ref().is_some_and(|m| !m.is_empty());
                    if !asked && r.request_state.is_none() {
                        return Err(rmcp::ServiceError::UnexpectedResponse);
                    }
                    if !asked {
                        // Only state to carry: the server is still working; do not spin.
                        let pause = 50u64.saturating_mul(1 << round.min(5));
                        tokio::time::sleep(std::time::Duration::from_millis(pause)).await;
                    }
                    let responses = self.fulfil(identity, &origin, r.input_requests).await?;
                    params.input_responses = (!responses.is_empty()).then_some(responses);
                    params.request_state = r.request_state;
                    response = send_call(peer, params.clone(), meta.clone(), |_, _| {}).await;
                }
                _ => return Err(rmcp::ServiceError::UnexpectedResponse),
            }
        }
        drop(held);
        Err(rmcp::ServiceError::InputRequiredRoundsExceeded { max_rounds: MAX_INPUT_ROUNDS })
    }

    /// Answer a 2026-07-28 server's input requests for the call sent as `origin`.
    #[allow(
        deprecated,
        reason = "sampling and roots are SEP-2577-deprecated; input requests still carry them"
    )]
    pub(super) async fn fulfil(
        &self,
        identity: &str,
        origin: &rmcp::model::RequestId,
        requests: Option<rmcp::model::InputRequests>,
    ) -> Result<rmcp::model::InputResponses, rmcp::ServiceError> {
        use rmcp::model::InputRequest;
        let each = requests.unwrap_or_default().into_iter().map(|(key, request)| async move {
            let value = match request {
                InputRequest::Elicitation(r) => {
                    let params = keyed(r.params, &key);
                    let answer = self.sup.asked().elicit_for(identity, Some(origin), params).await;
                    serde_json::to_value(answer)
                }
                InputRequest::CreateMessage(r) => {
                    let answer = self
                        .sup
                        .asked()
                        .sample_for(identity, Some(origin), keyed(r.params, &key))
                        .await
                        .map_err(rmcp::ServiceError::McpError)?;
                    serde_json::to_value(answer)
                }
                InputRequest::ListRoots(_) => serde_json::to_value(super::roots::result(
                    &self.sup.asked().roots_for(identity, Some(origin)),
                )),
                other => {
                    let why = format!("geminid cannot answer this input request: {other:?}");
                    return Err(rmcp::ServiceError::McpError(rmcp::ErrorData::invalid_params(
                        why, None,
                    )));
                }
            };
            value.map(|v| (key, v)).map_err(|_| rmcp::ServiceError::UnexpectedResponse)
        });
        Ok(futures::future::try_join_all(each).await?.into_iter().collect())
    }

    /// Call a tool on a server for `session`; fails at once if the server dies meanwhile. `sent` is told
    /// the request's progress token once it is on its way (to route the server's progress
    /// notifications); what it returns is held until the answer.
    pub(crate) async fn call_tool<G>(
        &self,
        server: &Arc<Server>,
        session: &str,
        timeout: Duration,
        tool: &str,
        arguments: Option<serde_json::Map<String, serde_json::Value>>,
        sent: impl FnOnce(&rmcp::model::ProgressToken, &rmcp::model::RequestId) -> G,
    ) -> Result<serde_json::Value, McpError> {
        let op = crate::telemetry::Operation::tool_call(
            crate::telemetry::Side::Client,
            tool,
            opentelemetry::Context::current,
            || client_attributes(server),
        );
        let mut params = rmcp::model::CallToolRequestParams::new(tool.to_owned());
        params.arguments = arguments;
        let traced = op.as_ref();
        let call =
            |peer| async move { self.call_raw(server, session, &peer, params, sent, traced).await };
        let result = self.request(server, timeout, call).await;
        if let Some(op) = op {
            op.end(result.as_ref().err().map(|e| (error_type(e), e.to_string())));
        }
        result
    }

    /// One request to a server, as `send` makes it: fails at once if the server is not
    /// connected or dies meanwhile (naming the cause), and after `timeout` (the calling
    /// session's, see [`Supervisor::timeout_for`]).
    pub(crate) async fn request<T, Fut>(
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
        let unavailable = |s: &server::Snapshot| unavailable(name, s);
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
            Ok(Err(rmcp::ServiceError::McpError(e))) => Err(McpError::answered(name, &e)),
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
                        spec::scrub(&super::failure::error_chain(&e), &server.spec, &server.target)
                    ))),
                }
            }
            Err(_) => Err(McpError::TimedOut { server: name.clone(), after: timeout }),
        }
    }
}

/// Why `server` cannot take a request now; none while it is connected.
pub(crate) fn not_connected(server: &Server) -> Option<McpError> {
    server
        .peer()
        .is_none()
        .then(|| McpError::Unavailable(unavailable(&server.name, &server.snapshot())))
}

/// Why a server that is not connected cannot answer: its last error always names it; without
/// one, its state is the reason.
fn unavailable(name: &str, s: &server::Snapshot) -> String {
    match &s.last_error {
        Some(why) => why.clone(),
        None => {
            let state = match s.state {
                // Connected but no connection: it is being stopped or restarted.
                ServerState::Connected => "stopping".to_owned(),
                other => other.phrase().to_owned(),
            };
            format!("MCP server '{name}' is {state}")
        }
    }
}

/// The conventions' transport attributes of a request to `server`: `pipe` for a stdio child;
/// `tcp` and the host and port for a remote server.
fn client_attributes(server: &Server) -> Vec<opentelemetry::KeyValue> {
    use opentelemetry::KeyValue;
    let mut out = vec![KeyValue::new("mcp.server.name", server.name.clone())];
    match &server.spec {
        spec::LaunchSpec::Stdio { .. } => out.push(KeyValue::new("network.transport", "pipe")),
        spec::LaunchSpec::Network { url, .. } => {
            // Only the host and port of the (expanded) URL: never its path, query or user.
            out.push(KeyValue::new("network.transport", "tcp"));
            if let Ok(url) = reqwest::Url::parse(url)
                && let (Some(host), Some(port)) = (url.host_str(), url.port_or_known_default())
            {
                out.push(KeyValue::new("server.address", host.to_owned()));
                out.push(KeyValue::new("server.port", i64::from(port)));
            }
        }
    }
    out
}

/// `error.type` of a request that failed: the JSON-RPC error's code, else what kind of failure.
fn error_type(e: &McpError) -> String {
    match e {
        McpError::Answered { code, .. } => code.to_string(),
        McpError::TimedOut { .. } => "timeout".to_owned(),
        McpError::Unavailable(_) => "unavailable".to_owned(),
        McpError::Transport(_) => "transport".to_owned(),
        McpError::NotFound(_) => "not_found".to_owned(),
    }
}
