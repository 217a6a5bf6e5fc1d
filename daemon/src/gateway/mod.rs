//! The MCP gateway: one session's catalog as one MCP server, for any MCP client (`gemctl mcp
//! serve`). Tools, prompts and resources are the session's (policy's static filter applied);
//! a tool call goes through the session's pipeline (hooks, policy, confirmation, audit) and
//! answers with the upstream server's own result, plus what hooks added for the model. The
//! lists' `list_changed` notifications follow the session's catalog; progress and cancellation
//! pass through.
//!
//! The transport is the daemon's socket, upgraded (`route`), with MCP's stdio framing.

mod elicit;
mod forward;
mod http;
pub mod names;
pub(crate) mod route;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use geminid_protocol::event::EventBody;
use geminid_protocol::gateway::Names;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock as Content,
    GetPromptRequestParams, GetPromptResponse, Implementation, InitializeResult, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ProgressNotificationParam, Prompt, ReadResourceRequestParams, ReadResourceResponse,
    ReadResourceResult, ServerCapabilities, Tool,
};
use rmcp::service::{Peer, RequestContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::calls::{CallError, CallRequest, Origin, Target};
use crate::catalog::CatalogError;
use crate::catalog::view::ResourceRef;
use crate::core::Core;
use crate::session::ConnId;
use names::{Item, NameMap};

/// Whether a call id is one the gateway gave a client's call (`gw{n}-{m}`).
fn is_gateway_call(id: &str) -> bool {
    id.strip_prefix("gw").and_then(|rest| rest.split_once('-')).is_some_and(|(n, m)| {
        !n.is_empty()
            && n.bytes().all(|b| b.is_ascii_digit())
            && !m.is_empty()
            && m.bytes().all(|b| b.is_ascii_digit())
    })
}

/// One downstream client's gateway over one session (cheap to clone: the handler rmcp serves
/// and the task following the session's events share it).
#[derive(Debug, Clone)]
pub struct Gateway(Arc<Inner>);

impl std::ops::Deref for Gateway {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.0
    }
}

/// What a gateway knows.
#[derive(Debug)]
pub struct Inner {
    core: Arc<Core>,
    session: String,
    mode: Names,
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
}

#[derive(Debug, Default)]
struct Seen {
    tools: Option<u64>,
    prompts: Option<u64>,
    resources: Option<u64>,
}

static GATEWAYS: AtomicU64 = AtomicU64::new(0);

fn fingerprint(v: &impl serde::Serialize) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    serde_json::to_string(v).unwrap_or_default().hash(&mut h);
    h.finish()
}

/// What a client sees of the session's resources: the resources and the templates.
fn resources_fingerprint(r: &geminid_protocol::tools::ResourcesListResult) -> u64 {
    fingerprint(&(r.resources.iter().map(|e| &e.resource).collect::<Vec<_>>(), &r.templates))
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
    /// The session's servers' instructions, as the gateway's own.
    pub async fn instructions(core: &Core, session: &str) -> Option<String> {
        let i = core.catalog.instructions(session).await.ok()?;
        Some(i.system_prompt).filter(|p| !p.is_empty())
    }

    /// The start of the call ids of this client's calls (`gw{id}-`): the asks they raise are
    /// this client's to answer, and no other gateway client's.
    pub(super) fn call_prefix(&self) -> String {
        format!("gw{}-", self.id)
    }

    /// Whether `ask` is this client's to answer: not one raised by another gateway client's
    /// call (which goes with that client), and any other of its session.
    pub(super) fn answers(&self, ask: &geminid_protocol::asks::Ask) -> bool {
        ask.call_id
            .as_deref()
            .is_none_or(|id| !is_gateway_call(id) || id.starts_with(&self.call_prefix()))
    }

    /// A gateway for `session`, naming tools and prompts by `mode`, for a client reached
    /// through the daemon's connection `conn` (the one attached to the session).
    pub fn new(
        core: Arc<Core>,
        session: String,
        mode: Names,
        conn: ConnId,
        instructions: Option<String>,
    ) -> Self {
        Self(Arc::new(Inner {
            core,
            session,
            mode,
            conn,
            seen: Mutex::default(),
            next_call: AtomicU64::new(0),
            id: GATEWAYS.fetch_add(1, Ordering::Relaxed) + 1,
            subscribed: Mutex::default(),
            instructions,
        }))
    }

    /// Once the client is initialized: follow the session's events for it, and put the
    /// session's asks to it (confirmations and elicitations if it elicits, sampling if it
    /// samples), until its transport closes.
    fn start(&self, peer: Peer<RoleServer>) {
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
        tokio::spawn(self.clone().follow(peer.clone(), gone.clone()));
        let kinds = peer.peer_info().map(|i| elicit::kinds(&i.capabilities)).unwrap_or_default();
        if !kinds.is_empty() {
            tokio::spawn(elicit::answer(self.clone(), peer, self.conn, kinds, gone));
        }
    }

    fn subscribed(&self) -> std::sync::MutexGuard<'_, std::collections::HashSet<(String, String)>> {
        self.subscribed.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn seen(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The session's tools and the names they are served under.
    async fn tools(&self) -> Result<(Arc<crate::catalog::tools::SessionTools>, NameMap), McpError> {
        let st =
            self.core.catalog.session_tools(&self.session, true).await.map_err(catalog_error)?;
        let items: Vec<Item<'_>> = st
            .tools
            .iter()
            .map(|t| Item { server: &t.server_name, own: &t.tool().name, fqn: &t.fqn })
            .collect();
        let map = names::build(&items, self.mode);
        drop(items);
        Ok((st, map))
    }

    /// The tools as served, and the renames of names taken twice.
    async fn tool_list(&self) -> Result<(Vec<Tool>, Vec<String>), McpError> {
        let (st, map) = self.tools().await?;
        let mut out = Vec::with_capacity(st.tools.len());
        for (t, name) in st.tools.iter().zip(&map.served) {
            let mut raw = t.tool().raw.clone();
            if let Some(o) = raw.as_object_mut() {
                o.insert("name".into(), Value::String(name.clone()));
                // MCP clients require an object schema: a custom tool declared without one
                // (`{}`) is served as `{"type": "object"}`.
                if let Some(schema) = o.get_mut("inputSchema").and_then(Value::as_object_mut)
                    && !schema.contains_key("type")
                {
                    schema.insert("type".into(), Value::String("object".into()));
                }
            }
            match serde_json::from_value::<Tool>(raw) {
                Ok(tool) => out.push(tool),
                Err(e) => {
                    tracing::warn!(tool = %t.fqn, error = %e, "gateway: a tool its client could not parse is left out")
                }
            }
        }
        Ok((out, map.notes))
    }

    /// Prompts: `(served name, server, own name, the prompt as listed)`.
    async fn prompt_list(&self) -> Result<Vec<(String, String, String, Value)>, McpError> {
        let (entries, _) = self.core.catalog.prompts(&self.session).await.map_err(catalog_error)?;
        let fqns: Vec<String> = entries.iter().map(|(e, _)| e.name.clone()).collect();
        let items: Vec<Item<'_>> = entries
            .iter()
            .zip(&fqns)
            .map(|((e, _), fqn)| Item { server: &e.server, own: &e.prompt, fqn })
            .collect();
        let map = names::build(&items, self.mode);
        Ok(entries
            .iter()
            .zip(map.served)
            .map(|((e, _), name)| {
                let prompt = serde_json::json!({
                    "name": name,
                    "description": e.description,
                    "arguments": e.arguments,
                });
                (name, e.server.clone(), e.prompt.clone(), prompt)
            })
            .collect())
    }

    /// Tell the client which of its lists changed since it last looked (called on catalog,
    /// server and configuration events).
    pub(crate) async fn announce_changes(&self, peer: &Peer<RoleServer>) {
        let tools = self.tool_list().await.ok().map(|(t, _)| fingerprint(&t));
        let prompts = self.prompt_list().await.ok().map(|p| fingerprint(&p));
        let resources = self
            .core
            .catalog
            .resources(&self.session)
            .await
            .ok()
            .map(|r| resources_fingerprint(&r));
        let (t, p, r) = {
            let mut seen = self.seen();
            let t = tools.is_some() && seen.tools.is_some() && seen.tools != tools;
            let p = prompts.is_some() && seen.prompts.is_some() && seen.prompts != prompts;
            let r = resources.is_some() && seen.resources.is_some() && seen.resources != resources;
            // A list the client never asked for is not announced, but is remembered.
            seen.tools = tools.or(seen.tools);
            seen.prompts = prompts.or(seen.prompts);
            seen.resources = resources.or(seen.resources);
            (t, p, r)
        };
        if t {
            let _ = peer.notify_tool_list_changed().await;
        }
        if p {
            let _ = peer.notify_prompt_list_changed().await;
        }
        if r {
            let _ = peer.notify_resource_list_changed().await;
        }
    }

    /// Follow the session's events for this client until it goes.
    async fn follow(self, peer: Peer<RoleServer>, gone: CancellationToken) {
        let mut events = self.core.events.subscribe();
        loop {
            let ev = tokio::select! {
                () = gone.cancelled() => return,
                ev = events.recv() => ev,
            };
            if let Ok(p) = &ev
                && let EventBody::ResourceUpdated(u) = &p.event.body
            {
                if self.subscribed().contains(&(u.identity.clone(), u.uri.clone())) {
                    let param = rmcp::model::ResourceUpdatedNotificationParam::new(u.uri.clone());
                    let _ = peer.notify_resource_updated(param).await;
                }
                continue;
            }
            let relevant = match ev {
                Ok(p) => match &p.event.body {
                    EventBody::CatalogChanged(c) => c.sessions.contains(&self.session),
                    EventBody::ConfigChanged(c) => c.session == self.session,
                    EventBody::ToolsDiscovered(d) => d.session == self.session,
                    EventBody::McpServerState(_) => true,
                    _ => false,
                },
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => true,
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
            };
            if relevant {
                // Let a burst settle (a server's restart is several events).
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                while let Ok(p) = events.try_recv() {
                    drop(p);
                }
                self.announce_changes(&peer).await;
            }
        }
    }

    fn call_failed(e: CallError) -> Result<CallToolResponse, McpError> {
        match e {
            CallError::ToolNotFound(m) => Err(McpError::invalid_params(m, None)),
            CallError::InvalidArguments { .. } => {
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
        self.start(context.peer);
    }

    fn get_info(&self) -> InitializeResult {
        let caps = ServerCapabilities::builder()
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
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let (tools, renamed) = self.tool_list().await?;
        if !renamed.is_empty() {
            tracing::info!(session = %self.session, ?renamed, "gateway: tool names taken twice are renamed");
        }
        self.seen().tools = Some(fingerprint(&tools));
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let (st, map) = self.tools().await?;
        let Some(&i) = map.by_served.get(request.name.as_ref()) else {
            return Err(McpError::invalid_params(
                format!("no tool named '{}' in this session (tools/list shows them)", request.name),
                None,
            ));
        };
        let fqn = st.tools[i].fqn.clone();
        drop(st);
        let n = self.next_call.fetch_add(1, Ordering::Relaxed) + 1;
        let call_id = format!("{}{n}", self.call_prefix());
        // Progress for this call goes to the client under its own token.
        let progress = context.meta.get_progress_token().map(|token| {
            let mut events = self.core.events.subscribe();
            let (peer, session, id) = (context.peer.clone(), self.session.clone(), call_id.clone());
            tokio::spawn(async move {
                while let Ok(p) = events.recv().await {
                    if let EventBody::ToolProgress(tp) = &p.event.body
                        && tp.session == session
                        && tp.call_id.as_deref() == Some(id.as_str())
                    {
                        let mut param = ProgressNotificationParam::new(token.clone(), tp.progress);
                        param.total = tp.total;
                        param.message = tp.message.clone();
                        let _ = peer.notify_progress(param).await;
                    }
                }
            })
        });
        let req = CallRequest {
            session: self.session.clone(),
            target: Target::Tool(fqn),
            args: request.arguments,
            call_id: Some(call_id.clone()),
            origin: Origin::Gateway,
            confirmed: false,
            tail_of: None,
        };
        let cancel = {
            let (ct, core, session, id) =
                (context.ct.clone(), self.core.clone(), self.session.clone(), call_id);
            tokio::spawn(async move {
                ct.cancelled().await;
                core.calls.cancel(&session, &id);
            })
        };
        let done = self.core.calls.call(req).await;
        cancel.abort();
        if let Some(p) = progress {
            p.abort();
        }
        let (_, outcome) = match done {
            Ok(d) => d,
            Err(e) => return Self::call_failed(e),
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
        Ok(CallToolResponse::Complete(result))
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
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        let list = self.prompt_list().await?;
        let Some((_, server, own, _)) = list.into_iter().find(|(n, ..)| *n == request.name) else {
            return Err(McpError::invalid_params(
                format!("no prompt named '{}' in this session", request.name),
                None,
            ));
        };
        let raw = self
            .core
            .catalog
            .get_prompt_raw(&self.session, &server, &own, request.arguments)
            .await
            .map_err(catalog_error)?;
        serde_json::from_value::<rmcp::model::GetPromptResult>(raw)
            .map(Into::into)
            .map_err(|e| McpError::internal_error(format!("the prompt does not parse: {e}"), None))
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let r = self.core.catalog.resources(&self.session).await.map_err(catalog_error)?;
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
        let r = self.core.catalog.resources(&self.session).await.map_err(catalog_error)?;
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
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        // The first server (by name) that offers the URI reads it, as the list shows it.
        let server = self.owner_of_uri(&request.uri).await?;
        let which =
            ResourceRef { server: Some(server), uri: Some(request.uri.clone()), reference: None };
        let read = self.core.catalog.read_resource(&self.session, which).await;
        let read = read.map_err(|e| match e {
            CatalogError::NotInCatalog(m) => McpError::resource_not_found(m, None),
            other => catalog_error(other),
        })?;
        let contents =
            read.contents.into_iter().filter_map(|c| serde_json::from_value(c).ok()).collect();
        Ok(ReadResourceResult::new(contents).into())
    }
}
