//! The MCP gateway: one session's catalog, or one of its servers' (`server=<name>`), as one
//! MCP server, for any MCP client (`gemctl mcp serve`). Tools, prompts and resources are the
//! session's (policy's static filter applied); a tool call goes through the session's pipeline
//! (hooks, policy, confirmation, audit) and answers with the upstream server's own result,
//! plus what hooks added for the model. Who confirms what policy asks about is geminid (the
//! default) or the client (`confirm=client`: a client that confirms calls itself, as Gemini CLI
//! does). The lists' changes follow the session's catalog; progress, cancellation and the
//! servers' log messages pass through (`notify`). Both eras: a client of 2026-07-28 gets
//! `resultType` on every result and its changes on `subscriptions/listen` streams.
//!
//! The transport is the daemon's socket, upgraded (`route`), with MCP's stdio framing.

mod admit;
mod elicit;
mod forward;
#[cfg(unix)]
mod handed;
mod http;
mod lists;
mod mrtr;
pub(crate) mod names;
mod notify;
mod presence;
pub(crate) mod route;
mod traced;
mod wire;

use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use geminid_protocol::gateway::{Confirm, Hooks, Names};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock as Content,
    GetPromptRequestParams, GetPromptResponse, Implementation, InitializeResult, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    Prompt, ReadResourceRequestParams, ReadResourceResponse, ResultType, ServerCapabilities,
};
use rmcp::service::{Peer, RequestContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use tokio_util::sync::CancellationToken;

use crate::calls::{CallError, CallRequest, Origin, Target};
use crate::catalog::CatalogError;
use crate::services::Services;
use crate::session::ConnId;
use lists::{fingerprint, resources_fingerprint};

/// What a gateway serves of its session, and who confirms.
#[derive(Debug, Clone, Default)]
pub(crate) struct Serving {
    /// How tools and prompts are named.
    pub names: Names,
    /// Only this server (its entry name, checked exactly when the gateway opens).
    pub server: Option<String>,
    /// Who confirms the calls policy asks about.
    pub confirm: Confirm,
    /// Who runs the hooks the client reads too.
    pub hooks: Hooks,
    /// The calls of clients of 2026-07-28 waiting for their retry (every HTTP request of one
    /// listener shares them).
    pub(crate) rounds: Arc<mrtr::Rounds>,
    /// Fires when the client is gone (gemctl killed, its stdout closed): its calls are cut.
    pub(crate) gone: CancellationToken,
}

/// One downstream client's gateway over one session (cheap to clone: the handler rmcp serves
/// and the task following the session's events share it).
#[derive(Debug, Clone)]
pub(crate) struct Gateway(Arc<Inner>);

impl std::ops::Deref for Gateway {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.0
    }
}

/// What a gateway knows.
#[derive(Debug)]
pub(crate) struct Inner {
    services: Arc<Services>,
    session: String,
    serving: Serving,
    /// The lowest severity of the servers' log messages passed on (`logging/setLevel`).
    min_level: std::sync::atomic::AtomicU8,
    /// The daemon's connection the client comes through.
    conn: ConnId,
    /// What the client saw last of each list, to notify only real changes.
    seen: Mutex<Seen>,
    next_call: AtomicU64,
    /// This gateway's calls get ids `gw<id>-<n>`.
    id: u64,
    /// The resources the client subscribed to: (server identity's first 12 hex digits, URI).
    subscribed: Mutex<std::collections::HashSet<(String, String)>>,
    instructions: Option<String>,
    /// The client answers its own calls' confirmations (it declared elicitation): it is
    /// served the tools that need one, whoever else is connected.
    confirms_own: std::sync::atomic::AtomicBool,
    /// Started once, by whichever comes first: the client's `initialized`, or its first
    /// request (rmcp may handle that before the notification).
    started: tokio::sync::OnceCell<()>,
    /// The tools served, while the session's table is the one they were named from (with
    /// whether they include those only a confirmation allows).
    served: Mutex<Option<(bool, Arc<lists::Served>)>>,
    /// Its life, in `mcp.server.session.duration` when it ends (telemetry on).
    _life: Option<crate::telemetry::Session>,
}

#[derive(Debug, Default)]
struct Seen {
    tools: Option<u64>,
    prompts: Option<u64>,
    resources: Option<u64>,
}

static GATEWAYS: AtomicU64 = AtomicU64::new(0);

/// A number no gateway (nor a listener's multi round-trip calls) had: its calls' ids start
/// `gw<n>-`.
fn next_gateway_id() -> u64 {
    GATEWAYS.fetch_add(1, Ordering::Relaxed) + 1
}

fn catalog_error(e: CatalogError) -> McpError {
    match e {
        CatalogError::NotInCatalog(m) | CatalogError::MissingArguments(m) => {
            McpError::invalid_params(m, None)
        }
        other => McpError::internal_error(other.to_string(), None),
    }
}

impl Gateway {
    /// The session's servers' instructions, as the gateway's own; one server's as it gives
    /// them.
    pub(crate) async fn instructions(
        services: &Services,
        session: &str,
        server: Option<&str>,
    ) -> Option<String> {
        let i = services.catalog.instructions(session).await.ok()?;
        match server {
            Some(one) => i.servers.into_iter().find(|(n, _)| n == one).map(|(_, text)| text),
            None => Some(i.system_prompt).filter(|p| !p.is_empty()),
        }
    }

    /// Whether the gateway serves `server`'s items.
    fn serves(&self, server: &str) -> bool {
        self.serving.server.as_deref().is_none_or(|one| one == server)
    }

    fn min_level(&self) -> u8 {
        self.min_level.load(Ordering::Relaxed)
    }

    /// The start of the call ids of this client's calls (`gw{id}-`): the asks they raise are
    /// this client's to answer, and no other gateway client's.
    pub(super) fn call_prefix(&self) -> String {
        format!("gw{}-", self.id)
    }

    /// A gateway for `session`, serving it as `serving` says, for a client reached through
    /// the daemon's connection `conn` (the one attached to the session) over `transport`
    /// (`network.transport`: `pipe`, `tcp`).
    pub(crate) fn new(
        services: Arc<Services>,
        session: String,
        (serving, transport): (Serving, &'static str),
        conn: ConnId,
        instructions: Option<String>,
    ) -> Self {
        let attrs = || vec![opentelemetry::KeyValue::new("network.transport", transport)];
        Self(Arc::new(Inner {
            services,
            session,
            serving,
            min_level: std::sync::atomic::AtomicU8::new(0),
            conn,
            seen: Mutex::default(),
            next_call: AtomicU64::new(0),
            id: next_gateway_id(),
            subscribed: Mutex::default(),
            instructions,
            confirms_own: std::sync::atomic::AtomicBool::new(false),
            started: tokio::sync::OnceCell::new(),
            served: Mutex::default(),
            _life: crate::telemetry::Session::begin(crate::telemetry::Side::Server, attrs),
        }))
    }

    /// Whether the client is asked to confirm its calls: it confirms them itself
    /// (`confirm=client`), or it answers its calls' confirmations (it elicits). Then it is
    /// served the tools that only need a confirmation; a client that cannot be asked is not
    /// (their calls would wait for nobody).
    pub(super) fn asked_to_confirm(&self) -> bool {
        self.serving.confirm == Confirm::Client || self.confirms_own.load(Ordering::Relaxed)
    }

    /// Before a request is served: a client of the earlier eras is started (if its
    /// `initialized` has not been handled yet); a request of 2026-07-28 declares its client's
    /// capabilities itself (`kinds`), and whether it is asked to confirm follows the latest.
    async fn before_request(
        &self,
        context: &RequestContext<RoleServer>,
        kinds: &[geminid_protocol::asks::AskKind],
    ) {
        let modern = context
            .protocol_version()
            .is_some_and(|v| v >= rmcp::model::ProtocolVersion::V_2026_07_28);
        if modern {
            let asked = kinds.contains(&geminid_protocol::asks::AskKind::Confirmation);
            self.confirms_own.store(asked, Ordering::Relaxed);
        } else if context.peer.peer_info().is_some() {
            self.start(context.peer.clone()).await;
        }
    }

    /// Once the client is initialized: follow the session's events for it, and put the
    /// session's asks to it (confirmations and elicitations if it elicits, sampling if it
    /// samples), until its transport closes. Returns once it listens for them (a call made
    /// next is asked of it).
    async fn start(&self, peer: Peer<RoleServer>) {
        let this = self.clone();
        self.started.get_or_init(|| this.begin(peer)).await;
    }

    async fn begin(self, peer: Peer<RoleServer>) {
        let gone = CancellationToken::new();
        let watch = (peer.clone(), gone.clone());
        tokio::spawn(async move {
            let (peer, gone) = watch;
            // rmcp says a transport closed only when asked.
            while !peer.is_transport_closed() {
                tokio::time::sleep(std::time::Duration::from_millis(250)).await;
            }
            gone.cancel();
        });
        tokio::spawn(self.clone().follow(notify::Announce::Peer(peer.clone()), gone.clone()));
        tokio::spawn(self.clone().pass_logs(peer.clone(), gone.clone()));
        // A client of 2026-07-28 is not sent requests: its calls' asks go by multi round-trip.
        let kinds = peer
            .peer_info()
            .filter(|i| i.protocol_version < rmcp::model::ProtocolVersion::V_2026_07_28)
            .map(|i| elicit::kinds(&i.capabilities))
            .unwrap_or_default();
        if kinds.contains(&geminid_protocol::asks::AskKind::Confirmation) {
            self.confirms_own.store(true, Ordering::Relaxed);
        }
        if !kinds.is_empty() {
            let (ready, listening) = tokio::sync::oneshot::channel();
            tokio::spawn(elicit::answer(self.clone(), peer, self.conn, kinds, gone, ready));
            let _ = listening.await;
        }
    }

    /// Why a tool the client called is not served: one that needs a confirmation this client
    /// cannot give says so, with the ways to allow it; any other is not here.
    async fn not_served(&self, name: &str) -> McpError {
        let needs_asking = !self.asked_to_confirm()
            && self.tools_for(true).await.is_ok_and(|s| s.map.by_served.contains_key(name));
        let text = match needs_asking {
            true => format!(
                "the tool '{name}' needs a confirmation, and this client cannot be asked (it \
                 declared no elicitation), so it is not offered here. To allow it: `trust: true` \
                 on its server, a policy rule that allows it, `gemctl attach` in the workspace \
                 to confirm calls there, or `gemctl mcp serve --confirm client` for a client \
                 that confirms calls itself"
            ),
            false => format!("no tool named '{name}' here (tools/list shows them)"),
        };
        McpError::invalid_params(text, None)
    }

    fn subscribed(
        &self,
    ) -> parking_lot::MutexGuard<'_, std::collections::HashSet<(String, String)>> {
        self.subscribed.lock()
    }

    fn seen(&self) -> parking_lot::MutexGuard<'_, Seen> {
        self.seen.lock()
    }

    /// The answer to a call that ran: its result as the server gave it, with what hooks added
    /// for the model, or why it failed.
    fn complete(
        done: Result<(crate::calls::Call, crate::calls::Outcome), CallError>,
        fqn: &str,
        served: &str,
    ) -> Result<CallToolResponse, McpError> {
        let (_, outcome) = match done {
            Ok(d) => d,
            Err(e) => return Self::call_failed(e, fqn, served),
        };
        let mut result: CallToolResult = match serde_json::from_value(outcome.result) {
            Ok(r) => r,
            Err(e) => {
                return Err(McpError::internal_error(
                    format!("the upstream server's result does not parse: {e}"),
                    None,
                ));
            }
        };
        result.content.extend(outcome.notes.into_iter().map(Content::text));
        result.result_type = Some(ResultType::COMPLETE);
        Ok(CallToolResponse::Complete(result))
    }

    /// A call that failed: a protocol error for a call that could not be made as asked (the
    /// tool named as the client named it), else an error result the model reads.
    fn call_failed(e: CallError, fqn: &str, served: &str) -> Result<CallToolResponse, McpError> {
        match e {
            CallError::ToolNotFound(m) => Err(McpError::invalid_params(m, None)),
            CallError::InvalidArguments { tool, why } => {
                let tool = if tool == fqn { served.to_owned() } else { tool };
                let e = CallError::InvalidArguments { tool, why };
                Err(McpError::invalid_params(e.to_string(), None))
            }
            // What the model should read: the call did not happen, and why.
            other => Ok(CallToolResponse::Complete(CallToolResult::error(vec![Content::text(
                other.to_string(),
            )]))),
        }
    }
}

impl ServerHandler for Gateway {
    async fn on_initialized(&self, context: rmcp::service::NotificationContext<RoleServer>) {
        self.start(context.peer).await;
    }

    #[allow(
        deprecated,
        reason = "logging is SEP-2577-deprecated; clients of the earlier eras use it"
    )]
    fn get_info(&self) -> InitializeResult {
        let caps = ServerCapabilities::builder()
            .enable_logging()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_prompts()
            .enable_prompts_list_changed()
            .enable_resources()
            .enable_resources_list_changed()
            .enable_resources_subscribe()
            .build();
        let mut caps = caps;
        caps.completions = Some(Default::default());
        let mut info = InitializeResult::new(caps)
            .with_server_info(Implementation::new("geminid", env!("CARGO_PKG_VERSION")));
        if let Some(i) = &self.instructions {
            info = info.with_instructions(i.clone());
        }
        info
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        // A client of 2026-07-28 that elicits confirms by multi round-trip: listening now,
        // the tools that need a confirmation are served to it.
        let modern = mrtr::kinds(&context);
        self.before_request(&context, &modern).await;
        self.serving.rounds.listen(self, modern).await;
        let (served, print) = self.tool_list_fingerprinted().await?;
        let renamed = &served.map.notes;
        if !renamed.is_empty() {
            tracing::info!(session = %self.session, ?renamed, "gateway: tool names taken twice are renamed");
        }
        self.seen().tools = Some(print);
        Ok(ListToolsResult::with_all_items(served.listed().0.clone()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        // A client of 2026-07-28: what the call asks comes back as `input_required`.
        let modern = mrtr::kinds(&context);
        self.before_request(&context, &modern).await;
        self.serving.rounds.listen(self, modern.clone()).await;
        let served = self.tools().await?;
        let Some(&i) = served.map.by_served.get(request.name.as_ref()) else {
            return Err(self.not_served(&request.name).await);
        };
        let fqn = served.tool(i).fqn.clone();
        let identity = match &served.tool(i).source {
            crate::catalog::tools::Source::Mcp { server, .. } => Some(server.identity.clone()),
            crate::catalog::tools::Source::Discovered { .. } => None,
        };
        drop(served);
        if !modern.is_empty() || request.request_state.is_some() {
            let rounds = self.serving.rounds.clone();
            let (session, args) = (self.session.clone(), request.arguments.clone());
            let start = |call_id| CallRequest {
                session,
                target: Target::Tool(fqn.clone()),
                args,
                call_id: Some(call_id),
                origin: Origin::Gateway,
                confirmed: self.serving.confirm == Confirm::Client,
                hooks_by_client: self.serving.hooks == Hooks::Client,
                tail_of: None,
            };
            let (state, responses) = (request.request_state.clone(), request.input_responses);
            let turn = rounds.call(
                self,
                &request.name,
                identity,
                state,
                responses,
                start,
                &modern,
                &context,
            );
            let turn = traced::round(turn, &context, &request.name, &self.session).await?;
            return match turn {
                mrtr::Turn::Asks(r) => Ok(*r),
                mrtr::Turn::Done(done) => Self::complete(*done, &fqn, &request.name),
            };
        }
        let n = self.next_call.fetch_add(1, Ordering::Relaxed) + 1;
        let call_id = format!("{}{n}", self.call_prefix());
        // Progress for this call goes to the client under its own token, and the log messages
        // a client of 2026-07-28 asked for with the request, all of it before the result.
        let relay = notify::Relay::start(self, &context, &call_id, identity);
        let req = CallRequest {
            session: self.session.clone(),
            target: Target::Tool(fqn.clone()),
            args: request.arguments,
            call_id: Some(call_id.clone()),
            origin: Origin::Gateway,
            // A client that confirms calls itself has, by calling.
            confirmed: self.serving.confirm == Confirm::Client,
            hooks_by_client: self.serving.hooks == Hooks::Client,
            tail_of: None,
        };
        // Cancelled beside the call itself (no task of its own per call): the cancel reaches
        // the pipeline, whose call then ends as cancelled.
        let call = traced::call(&self.services.calls, req, &context, &request.name, &self.session);
        tokio::pin!(call);
        let cancelled = presence::cancelled(&context, &self.serving.gone, &self.session, &call_id);
        let done = tokio::select! {
            done = &mut call => done,
            () = cancelled => {
                self.services.calls.cancel(&self.session, &call_id);
                call.await
            }
        };
        relay.end().await;
        Self::complete(done, &fqn, &request.name)
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        let list = self.prompt_list().await?;
        self.seen().prompts = Some(fingerprint(&list));
        let prompts: Vec<Prompt> =
            list.into_iter().filter_map(|(_, _, _, p)| serde_json::from_value(p).ok()).collect();
        Ok(ListPromptsResult::with_all_items(prompts))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        let name = request.name.clone();
        let own = || vec![opentelemetry::KeyValue::new("gen_ai.prompt.name", name.clone())];
        let get = self.forward_prompt(request);
        traced::served("prompts/get", Some(&name), own, &context, &self.session, get).await
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let r = self.resources().await?;
        self.seen().resources = Some(resources_fingerprint(&r));
        // A URI two servers list is served once, by the first (servers by name).
        let mut seen = HashMap::new();
        let resources = r
            .resources
            .into_iter()
            .filter(|e| {
                let uri = e.resource["uri"].as_str().unwrap_or_default().to_owned();
                seen.insert(uri, ()).is_none()
            })
            .filter_map(|e| serde_json::from_value(e.resource).ok())
            .collect();
        Ok(ListResourcesResult::with_all_items(resources))
    }

    async fn complete(
        &self,
        request: rmcp::model::CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CompleteResult, McpError> {
        self.forward_complete(request).await
    }

    #[allow(
        deprecated,
        reason = "logging is SEP-2577-deprecated; clients of the earlier eras use it"
    )]
    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.min_level.store(notify::severity(request.level), Ordering::Relaxed);
        Ok(())
    }

    fn accepted_subscription_filter(
        &self,
        requested: &rmcp::model::SubscriptionFilter,
    ) -> Option<rmcp::model::SubscriptionFilter> {
        Some(notify::accept_filter(requested))
    }

    async fn listen(&self, context: rmcp::service::SubscriptionContext) -> Result<(), McpError> {
        self.listening(context).await;
        Ok(())
    }

    async fn subscribe(
        &self,
        request: rmcp::model::SubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.forward_subscribe(request.uri).await
    }

    async fn unsubscribe(
        &self,
        request: rmcp::model::UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.forward_unsubscribe(&request);
        Ok(())
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        let r = self.resources().await?;
        let templates = r
            .templates
            .into_iter()
            .filter_map(|t| serde_json::from_value(t["template"].clone()).ok())
            .collect();
        Ok(ListResourceTemplatesResult::with_all_items(templates))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let uri = request.uri.clone();
        let own = || vec![opentelemetry::KeyValue::new("mcp.resource.uri", uri.clone())];
        let read = self.forward_read(request);
        traced::served("resources/read", None, own, &context, &self.session, read).await
    }
}
