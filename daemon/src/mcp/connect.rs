//! Connecting to one server over its transport and doing the MCP handshake.

use std::sync::Arc;
use std::time::Duration;

use geminid_protocol::DAEMON_VERSION;
use geminid_protocol::mcp::Transport as Wire;
use geminid_protocol::session::Declares;
use rmcp::model::{ClientCapabilities, ClientConfig, Implementation};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt};
use rmcp::service::{
    InboundStreamOrigin, NotificationContext, Peer, RequestContext, RunningService,
    RunningServiceCancellationToken,
};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, RoleClient};
use tokio::sync::mpsc;

use super::authed::AuthedHttp;
use super::child::{self, StdioChild};
use super::error::ConnectError;
use super::failure::{chain, error_chain, is_unauthorized};
use super::log::ServerLog;
use super::order::Routed;
use super::spec::{LaunchSpec, Network};
use super::sse::{SseTransport, header_map};
use super::stdio::StdioTransport;
use crate::store::Store;

/// What the supervisor hears from a connected server besides answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Notice {
    /// tools, prompts or resources changed.
    ListChanged,
}

/// geminid's side of an MCP connection.
#[derive(Debug, Clone)]
pub(crate) struct Handler {
    notices: mpsc::Sender<Notice>,
    sup: std::sync::Weak<dyn super::server::Observer>,
    /// The server's identity: progress tokens are only unique per connection.
    identity: String,
    /// Where its `notifications/message` go (`mcp/logs`, `mcp/followLogs`).
    log: Arc<ServerLog>,
    /// What it is told its clients answer (its spec's).
    declares: Declares,
}

impl Handler {
    /// A list changed; a full channel means a refresh is due already.
    fn list_changed(&self) {
        let _ = self.notices.try_send(Notice::ListChanged);
    }
}

/// What geminid declares to every server: it routes each of these to the session whose call
/// caused the request (and declines at once when nobody there can answer), so servers that
/// only offer such tools to capable clients offer them; and it follows calls a server turns
/// into tasks (`long_calls`).
pub(crate) fn capabilities() -> ClientCapabilities {
    let declared = serde_json::json!({
        "elicitation": { "form": {}, "url": {} },
        "sampling": { "tools": {} },
        "roots": { "listChanged": true },
        "extensions": { "io.modelcontextprotocol/tasks": {} },
    });
    serde_json::from_value(declared).unwrap_or_default()
}

/// What a server whose clients answer `declares` is told ([`capabilities`] less what they do
/// not answer): a server that lists some tools only to clients that can elicit or sample
/// lists them only where such a client will use them.
pub(crate) fn capabilities_for(declares: Declares) -> ClientCapabilities {
    let mut caps = capabilities();
    if !declares.elicitation {
        caps.elicitation = None;
    }
    if !declares.sampling {
        caps.sampling = None;
    }
    caps
}

/// Both eras, chosen per server: `server/discover` first (2026-07-28: no handshake, each
/// request carries its own metadata), and the `initialize` handshake of the earlier ones when
/// the server answers that with an error, as servers of those eras do.
fn lifecycle() -> ClientLifecycleMode {
    ClientLifecycleMode::Auto {
        preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28],
        legacy_version: Some(rmcp::model::ProtocolVersion::LATEST_WITH_INITIALIZE),
    }
}

/// The request a server's request came on the stream of, when the transport can tell
/// (streamable HTTP: a POST's response stream; stdio and SSE cannot).
fn origin(ctx: &RequestContext<RoleClient>) -> Option<rmcp::model::RequestId> {
    match ctx.extensions.get::<InboundStreamOrigin>() {
        Some(InboundStreamOrigin::OutboundRequest(id)) => Some(id.clone()),
        _ => None,
    }
}

fn gone() -> rmcp::ErrorData {
    rmcp::ErrorData::internal_error("geminid is shutting down", None)
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            capabilities_for(self.declares),
            Implementation::new("geminid", DAEMON_VERSION),
        )
    }

    async fn create_elicitation(
        &self,
        params: rmcp::model::ElicitRequestParams,
        ctx: RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ElicitResult, rmcp::ErrorData> {
        let Some(sup) = self.sup.upgrade() else { return Err(gone()) };
        let answer = sup.elicit(&self.identity, origin(&ctx), params);
        drop(sup);
        tokio::select! {
            r = answer => Ok(r),
            () = ctx.ct.cancelled() => Ok(rmcp::model::ElicitResult::new(
                rmcp::model::ElicitationAction::Cancel,
            )),
        }
    }

    #[allow(
        deprecated,
        reason = "sampling is SEP-2577-deprecated; servers of the eras before 2026-07-28 use it"
    )]
    async fn create_message(
        &self,
        params: rmcp::model::CreateMessageRequestParams,
        ctx: RequestContext<RoleClient>,
    ) -> Result<rmcp::model::CreateMessageResult, rmcp::ErrorData> {
        let Some(sup) = self.sup.upgrade() else { return Err(gone()) };
        let answer = sup.sample(&self.identity, origin(&ctx), params);
        drop(sup);
        tokio::select! {
            r = answer => r,
            () = ctx.ct.cancelled() => Err(rmcp::ErrorData::internal_error("the server cancelled it", None)),
        }
    }

    #[allow(
        deprecated,
        reason = "roots are SEP-2577-deprecated; servers of the eras before 2026-07-28 use them"
    )]
    async fn list_roots(
        &self,
        ctx: RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ListRootsResult, rmcp::ErrorData> {
        let Some(sup) = self.sup.upgrade() else { return Err(gone()) };
        sup.roots(&self.identity, origin(&ctx))
    }

    async fn on_tool_list_changed(&self, _: NotificationContext<RoleClient>) {
        self.list_changed();
    }

    async fn on_prompt_list_changed(&self, _: NotificationContext<RoleClient>) {
        self.list_changed();
    }

    async fn on_resource_list_changed(&self, _: NotificationContext<RoleClient>) {
        self.list_changed();
    }

    async fn on_resource_updated(
        &self,
        params: rmcp::model::ResourceUpdatedNotificationParam,
        _: NotificationContext<RoleClient>,
    ) {
        if let Some(sup) = self.sup.upgrade() {
            sup.resource_updated(&self.identity, &params.uri);
        }
    }

    /// A server's log message (`notifications/message`): into its log, with its level and
    /// logger, as `mcp/logs` and `mcp/followLogs` show it (the gateway's clients got it as it
    /// came off the wire, `order`). (SEP-2577 deprecates logging for the 2026-07-28 era;
    /// servers of the earlier ones send it.)
    #[allow(deprecated)]
    async fn on_logging_message(
        &self,
        params: rmcp::model::LoggingMessageNotificationParam,
        _: NotificationContext<RoleClient>,
    ) {
        self.log.push("message", &super::log::message_line(&params));
    }

    async fn on_progress(
        &self,
        params: rmcp::model::ProgressNotificationParam,
        _: NotificationContext<RoleClient>,
    ) {
        if let Some(sup) = self.sup.upgrade() {
            sup.progress(&self.identity, &params);
        }
    }
}

/// A live connection.
pub(crate) struct Running {
    /// For requests.
    pub peer: Peer<RoleClient>,
    /// The transport that connected.
    pub transport: Wire,
    /// Ends when the connection closes.
    pub closed: tokio::task::JoinHandle<()>,
    /// Closes the connection.
    pub cancel: RunningServiceCancellationToken,
    /// The child process, for stdio.
    pub child: Option<StdioChild>,
}

/// One connection attempt.
#[derive(Debug, Clone)]
pub(crate) struct Attempt<'a> {
    /// The server's name.
    pub name: &'a str,
    /// Its identity.
    pub identity: &'a str,
    /// What to start or reach.
    pub spec: &'a LaunchSpec,
    /// What is shown of it (see [`super::spec::scrub`]).
    pub shown: &'a str,
    /// For the whole attempt, handshake included.
    pub timeout: Duration,
    /// Between SIGTERM and SIGKILL when a child must be stopped.
    pub grace: Duration,
    /// The server's log.
    pub log: &'a Arc<ServerLog>,
    /// Where child pids are recorded.
    pub store: Option<&'a Store>,
    /// Where progress notifications go.
    pub sup: std::sync::Weak<dyn super::server::Observer>,
}

/// Connect and complete the handshake within the attempt's timeout.
pub(crate) async fn connect(
    attempt: Attempt<'_>,
    notices: mpsc::Sender<Notice>,
) -> Result<Running, ConnectError> {
    let Attempt { name, identity, spec, shown, timeout, grace, log, store, sup } = attempt;
    let declares = spec.declares();
    let handler =
        Handler { notices, sup, identity: identity.to_owned(), log: log.clone(), declares };
    match spec {
        LaunchSpec::Stdio { command, args, cwd, env, .. } => {
            let ctx = child::SpawnContext { server: name, identity, log, store };
            let (proc, pipes) = child::spawn(command, args, env.expose(), cwd.as_ref(), ctx)
                .await
                .map_err(ConnectError::Failed)?;
            log.push("geminid", &format!("started {command} (pid {})", proc.pid));
            let (stdout, stdin) = pipes;
            let transport = StdioTransport::new(stdout, stdin).with_log(log.clone());
            let transport = Routed::new(transport, identity, handler.sup.clone());
            // The era probe and the handshake share the attempt's limit: a server slow to
            // answer its first message is waited for, in either era (`era`).
            let info = handler.get_info();
            let handshake = async {
                let (transport, lifecycle) =
                    super::era::probe(transport, &info, super::era::PATIENCE).await?;
                handler.serve_with_lifecycle(transport, lifecycle).await
            };
            match tokio::time::timeout(timeout, handshake).await {
                Ok(Ok(service)) => Ok(running(service, Wire::Stdio, Some(proc))),
                Ok(Err(e)) => Err(handshake_failed(proc, e, grace, log).await),
                Err(_) => {
                    let _ = proc.stop(grace).await;
                    Err(ConnectError::Failed(with_last_stderr(
                        format!(
                            "no answer to the MCP handshake within {} (stopped it)",
                            humantime::format_duration(timeout)
                        ),
                        log,
                    )))
                }
            }
        }
        LaunchSpec::Network { kind, url, headers, oauth, .. } => {
            let scheme_ok = reqwest::Url::parse(url)
                .is_ok_and(|u| matches!(u.scheme(), "http" | "https") && u.has_host());
            if !scheme_ok {
                return Err(ConnectError::Failed(format!(
                    "{url:?} is not an http:// or https:// URL"
                )));
            }
            let headers = header_map(headers.expose()).map_err(ConnectError::Failed)?;
            let target = crate::auth::Target {
                name: name.into(),
                url: url.clone(),
                settings: oauth.clone(),
            };
            let auth = handler.sup.upgrade().map(|s| s.auth());
            let client = AuthedHttp::new(auth, target, &headers);
            let headers = client.with_google_headers(headers);
            let attempt = async {
                match kind {
                    Network::StreamableHttp => http(url, &headers, handler, &client).await,
                    Network::Sse => sse(url, headers, handler, &client).await,
                    Network::HttpThenSse => match http(url, &headers, handler.clone(), &client)
                        .await
                    {
                        Err(ConnectError::Failed(first)) => {
                            let first = super::spec::scrub(&first, spec, shown);
                            log.push(
                                "geminid",
                                &format!("streamable HTTP failed ({first}); trying SSE"),
                            );
                            // As the reference does: if SSE fails too (other than with a
                            // 401), report the original HTTP error.
                            match sse(url, headers, handler, &client).await {
                                Err(ConnectError::Failed(_)) => Err(ConnectError::Failed(first)),
                                other => other,
                            }
                        }
                        other => other,
                    },
                }
            };
            let scrub = |m: String| super::spec::scrub(&m, spec, shown);
            match tokio::time::timeout(timeout, attempt).await {
                Ok(Err(ConnectError::Failed(m))) => Err(ConnectError::Failed(scrub(m))),
                Ok(Err(ConnectError::NeedsAuth(m))) => Err(ConnectError::NeedsAuth(scrub(m))),
                Ok(result) => result,
                Err(_) => Err(ConnectError::Failed(format!(
                    "no answer from {shown} within {}",
                    humantime::format_duration(timeout)
                ))),
            }
        }
    }
}

/// A stdio server's handshake failed with `e`: stop it, and say why in the words that fit,
/// by its answer or by how it went away (its exit status, given a moment, and its last
/// stderr line).
async fn handshake_failed(
    mut proc: StdioChild,
    e: rmcp::service::ClientInitializeError,
    grace: Duration,
    log: &ServerLog,
) -> ConnectError {
    // Give a dying child a moment so its exit status explains the failure.
    let exited = match proc.try_exit() {
        Some(how) => Some(how),
        None => tokio::time::timeout(Duration::from_millis(200), proc.wait()).await.ok(),
    };
    if exited.is_some() {
        proc.stderr_drained(Duration::from_millis(200)).await;
    }
    let how = proc.stop(grace).await;
    // A server that answered the handshake with an error, then exited as its
    // input closed, is told by its answer; one that went away, by how it went.
    let went_away = matches!(
        e,
        rmcp::service::ClientInitializeError::ConnectionClosed(_)
            | rmcp::service::ClientInitializeError::TransportError { .. }
    );
    let cause = match exited {
        Some(how) if went_away => {
            format!("{how} before completing the MCP handshake")
        }
        Some(how) => format!("MCP handshake failed: {e} (it then {how})"),
        None => format!("MCP handshake failed: {e} (process {how})"),
    };
    ConnectError::Failed(with_last_stderr(cause, log))
}

impl std::fmt::Debug for Running {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Running")
            .field("transport", &self.transport)
            .field("child", &self.child)
            .finish_non_exhaustive()
    }
}

fn with_last_stderr(cause: String, log: &ServerLog) -> String {
    match log.failure_line() {
        Some(line) => format!("{cause}; last stderr line: {line}"),
        None => cause,
    }
}

fn running(
    service: RunningService<RoleClient, Handler>,
    transport: Wire,
    child: Option<StdioChild>,
) -> Running {
    let peer = service.peer().clone();
    if is_modern(&peer) {
        tokio::spawn(listen(peer.clone(), service.service().clone()));
    }
    let cancel = service.cancellation_token();
    let closed = tokio::spawn(async move {
        let _ = service.waiting().await;
    });
    Running { peer, transport, closed, cancel, child }
}

/// Whether the connection speaks the 2026-07-28 era.
pub(crate) fn is_modern(peer: &Peer<RoleClient>) -> bool {
    peer.peer_info()
        .is_some_and(|i| i.protocol_version >= rmcp::model::ProtocolVersion::V_2026_07_28)
}

/// The 2026-07-28 era sends list changes only on a `subscriptions/listen` stream: open one
/// for what the server says can change, and pass its notifications on as the earlier eras'
/// arrive, until the connection ends.
async fn listen(peer: Peer<RoleClient>, handler: Handler) {
    use rmcp::model::{ServerNotification as N, SubscriptionFilter};
    let Some(caps) = peer.peer_info().map(|i| i.capabilities.clone()) else { return };
    let mut filter = SubscriptionFilter::builder();
    let mut any = false;
    if caps.tools.as_ref().is_some_and(|t| t.list_changed == Some(true)) {
        filter = filter.tools_list_changed();
        any = true;
    }
    if caps.prompts.as_ref().is_some_and(|p| p.list_changed == Some(true)) {
        filter = filter.prompts_list_changed();
        any = true;
    }
    if caps.resources.as_ref().is_some_and(|r| r.list_changed == Some(true)) {
        filter = filter.resources_list_changed();
        any = true;
    }
    if !any {
        return;
    }
    let mut sub = match peer.listen(filter.build()).await {
        Ok(sub) => sub,
        Err(e) => {
            handler
                .log
                .push("geminid", &format!("subscriptions/listen failed: {}", error_chain(&e)));
            return;
        }
    };
    while let Ok(Some(n)) = sub.next().await {
        match n {
            N::ToolListChangedNotification(_)
            | N::PromptListChangedNotification(_)
            | N::ResourceListChangedNotification(_) => handler.list_changed(),
            N::ResourceUpdatedNotification(u) => {
                if let Some(sup) = handler.sup.upgrade() {
                    sup.resource_updated(&handler.identity, &u.params.uri);
                }
            }
            _ => {}
        }
    }
}

async fn http(
    url: &str,
    headers: &reqwest::header::HeaderMap,
    handler: Handler,
    client: &AuthedHttp,
) -> Result<Running, ConnectError> {
    let (identity, sup) = (handler.identity.clone(), handler.sup.clone());
    let transport = || {
        let custom = headers.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        let config = StreamableHttpClientTransportConfig::with_uri(url).custom_headers(custom);
        let transport = StreamableHttpClientTransport::with_client(client.clone(), config);
        Routed::new(transport, &identity, sup.clone())
    };
    let mut served = handler.clone().serve_with_lifecycle(transport(), lifecycle()).await;
    if let Err(rmcp::service::ClientInitializeError::ExpectedInitResult(answer)) = &served {
        // A server that answers `server/discover` with something that is no discovery (an
        // empty result) is of the earlier eras all the same: connect again with their
        // handshake.
        tracing::debug!(url, ?answer, "server/discover answered oddly; using initialize");
        served = handler.serve_with_lifecycle(transport(), ClientLifecycleMode::Initialize).await;
    }
    match served {
        Ok(service) => {
            client.close_on_loss(service.cancellation_token());
            Ok(running(service, Wire::Http, None))
        }
        Err(e) => {
            let scope = chain(&e).into_iter().any(|x| super::authed::explain(x).is_some());
            Err(client.classify(is_unauthorized(&e), scope, error_chain(&e)))
        }
    }
}

async fn sse(
    url: &str,
    headers: reqwest::header::HeaderMap,
    handler: Handler,
    client: &AuthedHttp,
) -> Result<Running, ConnectError> {
    let mut sent = None;
    let transport = loop {
        let Some((with_token, token)) = client.sse_headers(&headers, sent.as_ref()).await else {
            return Err(client.classify(true, false, "SSE".into()));
        };
        match SseTransport::connect(reqwest::Client::new(), url, with_token).await {
            Ok(t) => break t,
            // Once more with a new token, if there was one to replace.
            Err(e) if e.is_unauthorized() && sent.is_none() && token.is_some() => sent = token,
            Err(e) if e.is_unauthorized() => {
                return Err(client.classify(true, false, e.to_string()));
            }
            Err(e) => return Err(client.classify(false, false, format!("SSE: {e}"))),
        }
    };
    let transport = Routed::new(transport, &handler.identity, handler.sup.clone());
    match handler.serve_with_lifecycle(transport, lifecycle()).await {
        Ok(service) => Ok(running(service, Wire::Sse, None)),
        Err(e) => Err(ConnectError::Failed(format!("SSE: {}", error_chain(&e)))),
    }
}
