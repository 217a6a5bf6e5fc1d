//! MCP servers: one owner for every server the sessions need (DESIGN "Shared servers").
//!
//! - [`spec`] resolves a session's entry into a launch spec and its identity;
//! - [`Supervisor`] keeps one [`server::Server`] per identity, reference-counted by the
//!   sessions that need it (started on `mcp/start` or a call, released when the session's last
//!   connection goes, stopped after a linger), and answers `mcp/listServers` from memory;
//! - [`server`] is the per-server task and state machine (backoff, crash-loop, needs-auth);
//! - [`connect`], [`child`] and [`sse`] are the transports; [`orphans`] cleans up after a
//!   daemon that was killed.

pub mod catalog;
pub mod child;
pub mod connect;
pub mod log;
pub mod orphans;
pub mod prompts;
pub mod server;
pub mod spec;
pub mod sse;
pub mod stdio;
pub mod tools;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use geminid_protocol::config::{BlockReason, Scope};
use geminid_protocol::event::EventBody;
use geminid_protocol::mcp::{ServerState, ServerStateChanged, ServerStatus, Transport as Wire};
use geminid_protocol::tools::{FunctionDeclaration, ToolEntry, ToolList};

use self::server::{Cmd, NewServer, Server, planned_transport};
use self::spec::{LaunchSpec, default_cwd, resolve};
use crate::config::Effective;
use crate::config::env::{Env, Redaction, redact_urls};
use crate::events::EventBus;
use crate::store::Store;

/// How long a server keeps running after the last session that needed it let go.
pub const DEFAULT_LINGER: Duration = Duration::from_secs(60);
/// First delay before restarting a failed server; doubles with each failure in a row.
pub const DEFAULT_BACKOFF_INITIAL: Duration = Duration::from_secs(1);
/// Longest delay between restarts.
pub const DEFAULT_BACKOFF_MAX: Duration = Duration::from_secs(60);
/// Failures in a row before a server is parked in `crash-loop`.
pub const DEFAULT_RESTART_BUDGET: u32 = 5;
/// A server connected this long has its failure count reset when it next fails.
pub const DEFAULT_STABLE_AFTER: Duration = Duration::from_secs(60);
/// Between SIGTERM and SIGKILL.
pub const DEFAULT_STOP_GRACE: Duration = Duration::from_secs(3);
/// Start-up (spawn or connect, and the MCP handshake) for servers without `timeout`.
pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
/// How often a connected server is pinged (see `server::pinger`).
pub const DEFAULT_PING_EVERY: Duration = Duration::from_secs(30);
/// Each request to a server without `timeout` (Gemini CLI's default, 10 minutes).
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(600);

/// Supervision settings (daemon flags).
#[derive(Debug, Clone, Copy)]
pub struct McpOptions {
    /// See [`DEFAULT_LINGER`].
    pub linger: Duration,
    /// See [`DEFAULT_BACKOFF_INITIAL`].
    pub backoff_initial: Duration,
    /// See [`DEFAULT_BACKOFF_MAX`].
    pub backoff_max: Duration,
    /// See [`DEFAULT_RESTART_BUDGET`].
    pub restart_budget: u32,
    /// See [`DEFAULT_STABLE_AFTER`].
    pub stable_after: Duration,
    /// See [`DEFAULT_STOP_GRACE`].
    pub stop_grace: Duration,
    /// See [`DEFAULT_STARTUP_TIMEOUT`].
    pub startup_timeout: Duration,
    /// See [`DEFAULT_PING_EVERY`]; zero turns pings off.
    pub ping_every: Duration,
}

impl Default for McpOptions {
    fn default() -> Self {
        Self {
            linger: DEFAULT_LINGER,
            backoff_initial: DEFAULT_BACKOFF_INITIAL,
            backoff_max: DEFAULT_BACKOFF_MAX,
            restart_budget: DEFAULT_RESTART_BUDGET,
            stable_after: DEFAULT_STABLE_AFTER,
            stop_grace: DEFAULT_STOP_GRACE,
            startup_timeout: DEFAULT_STARTUP_TIMEOUT,
            ping_every: DEFAULT_PING_EVERY,
        }
    }
}

impl McpOptions {
    /// The delay after the `failures`-th failure in a row (1-based).
    pub fn backoff(&self, failures: u32) -> Duration {
        let factor = 2u32.saturating_pow(failures.saturating_sub(1).min(20));
        self.backoff_initial.saturating_mul(factor).min(self.backoff_max)
    }
}

/// What a session's entry amounts to.
#[derive(Debug, Clone)]
enum Binding {
    /// It runs as (or shares) the server with this identity.
    Runs(String),
    /// It does not run: disabled, blocked, or its entry cannot be launched.
    NotRun { state: ServerState, reason: String, transport: Wire, target: String },
}

/// An entry, and for one that runs, its launch spec and configured `timeout`.
type Resolved = BTreeMap<String, (Entry, Option<(LaunchSpec, Option<u64>, String)>)>;

#[derive(Debug, Clone)]
struct Entry {
    scope: Scope,
    binding: Binding,
    include: Option<Vec<String>>,
    exclude: Option<Vec<String>>,
    /// This session's `timeout` for requests to the server (its calls, prompts, reads).
    timeout: Duration,
}

#[derive(Debug, Default)]
struct Inner {
    /// Running servers by identity.
    servers: HashMap<String, Arc<Server>>,
    /// Sessions that need their servers, and what each of their entries runs as.
    sessions: HashMap<String, BTreeMap<String, Entry>>,
    /// Set once shutdown began: nothing new starts.
    closed: bool,
    /// Servers stopped lately, newest first (at most [`RETIRED_KEPT`], one per identity): their
    /// last run's log stays readable and `mcp/restart` starts them again.
    retired: VecDeque<Retired>,
}

/// How many stopped servers are remembered.
const RETIRED_KEPT: usize = 32;

/// A server that was stopped, why, and when.
#[derive(Debug)]
struct Retired {
    server: Arc<Server>,
    why: &'static str,
    at: std::time::Instant,
}

impl Inner {
    /// Remember a server that is being stopped.
    fn retire(&mut self, server: Arc<Server>, why: &'static str) {
        self.retired.retain(|r| r.server.identity != server.identity);
        self.retired.push_front(Retired { server, why, at: std::time::Instant::now() });
        self.retired.truncate(RETIRED_KEPT);
    }

    fn retired(&self, identity: &str) -> Option<&Retired> {
        self.retired.iter().find(|r| r.server.identity == identity)
    }

    fn users(&self, identity: &str) -> Vec<String> {
        let mut ids: Vec<String> = self
            .sessions
            .iter()
            .filter(|(_, entries)| {
                entries.values().any(|e| matches!(&e.binding, Binding::Runs(i) if i == identity))
            })
            .map(|(id, _)| id.clone())
            .collect();
        ids.sort();
        ids
    }
}

/// Errors of the runtime methods.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    /// No entry has that name.
    #[error("{0}")]
    NotFound(String),
    /// It exists but is not connected.
    #[error("{0}")]
    Unavailable(String),
    /// The server answered with an error or not in time.
    #[error("{0}")]
    Server(String),
}

/// A session's connected servers by name, and notes on the ones that are not connected.
pub type SessionServers = (Vec<(String, Arc<Server>)>, Vec<String>);

/// One tool of a session.
#[derive(Debug, Clone)]
pub struct SessionTool {
    /// Its fully qualified name.
    pub fqn: String,
    /// Its server's name in the session's settings.
    pub server_name: String,
    /// The server.
    pub server: Arc<Server>,
    /// The catalog it is in (the tool is `catalog.tools[index]`).
    pub catalog: Arc<catalog::Catalog>,
    /// Its position.
    pub index: usize,
    /// The session's request timeout for its server.
    pub timeout: Duration,
}

impl SessionTool {
    /// The MCP tool object.
    pub fn tool(&self) -> &serde_json::Value {
        &self.catalog.tools[self.index]
    }
}

/// A session's tools and what to know about them. Shared by every session whose servers,
/// names and filters are the same.
#[derive(Debug, Clone, Default)]
pub struct SessionTools {
    /// In order.
    pub tools: Vec<SessionTool>,
    /// Collisions and missing servers.
    pub diagnostics: Vec<String>,
    /// Position in `tools` by fully qualified name.
    pub by_name: HashMap<String, usize>,
    /// Some server had not finished its first start when this was computed: the table is
    /// provisional, and a caller that must see every tool waits for [`Supervisor::settle`].
    pub pending: bool,
    /// The `tools/list` entries, built (and serialized) on first use.
    entries: std::sync::OnceLock<ToolList>,
}

impl SessionTools {
    /// A tool by its fully qualified name.
    pub fn get(&self, fqn: &str) -> Option<&SessionTool> {
        self.by_name.get(fqn).map(|i| &self.tools[*i])
    }

    /// The `tools/list` entries; with `raw`, each carries its MCP tool object too (built
    /// afresh: only the plain list is kept).
    pub fn entries(&self, raw: bool) -> ToolList {
        if !raw && let Some(built) = self.entries.get() {
            return built.clone();
        }
        let built: Arc<[ToolEntry]> = self
            .tools
            .iter()
            .map(|t| {
                let tool = t.tool();
                let own = tool["name"].as_str().unwrap_or_default();
                ToolEntry {
                    name: t.fqn.clone(),
                    server: t.server_name.clone(),
                    tool: own.to_owned(),
                    declaration: FunctionDeclaration {
                        name: t.fqn.clone(),
                        description: tool["description"].as_str().unwrap_or_default().to_owned(),
                        parameters_json_schema: t.catalog.schemas[t.index].clone(),
                    },
                    raw: if raw { serde_json::value::to_raw_value(tool).ok() } else { None },
                }
            })
            .collect();
        if raw {
            return ToolList::new(built);
        }
        let list = ToolList::serialized(built.clone()).unwrap_or_else(|e| {
            tracing::warn!(error = %e, "cannot serialize a tool list ahead; it will be serialized per call");
            ToolList::new(built)
        });
        self.entries.get_or_init(|| list).clone()
    }
}

/// What a session's tool table depends on, besides the servers' states and catalogs (a change
/// to those clears every table): for each entry that runs, its name, the server it runs as,
/// and its include/exclude lists.
type TableKey = Vec<(String, String, Option<Vec<String>>, Option<Vec<String>>, Duration)>;

fn table_key(entries: &BTreeMap<String, Entry>) -> TableKey {
    entries
        .iter()
        .filter_map(|(name, e)| match &e.binding {
            Binding::Runs(identity) => Some((
                name.clone(),
                identity.clone(),
                e.include.clone(),
                e.exclude.clone(),
                e.timeout,
            )),
            Binding::NotRun { .. } => None,
        })
        .collect()
}

/// `tools/call` on the server, keeping the result as JSON (content types rmcp does not know,
/// or a `content` that is not an array, reach the converter instead of failing the call).
/// If this future is dropped before the answer (timeout, caller gone), the server is sent
/// `notifications/cancelled`.
async fn call_raw(
    sup: &Supervisor,
    identity: &str,
    peer: &rmcp::service::Peer<rmcp::RoleClient>,
    params: rmcp::model::CallToolRequestParams,
    target: Option<ProgressTarget>,
) -> Result<serde_json::Value, rmcp::ServiceError> {
    use rmcp::model::{ClientRequest, Request, ServerResult};
    let request = ClientRequest::CallToolRequest(Request::new(params));
    let handle = peer
        .send_cancellable_request(request, rmcp::service::PeerRequestOptions::no_options())
        .await?;
    let _progress = target.map(|t| sup.track_progress(identity, &handle.progress_token, t));
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

/// Where progress notifications go, by server identity and progress token.
#[derive(Debug, Default)]
struct Progress {
    targets: HashMap<String, ProgressTarget>,
    /// Notifications that came before their call was registered: the request is on its way
    /// before rmcp tells the caller its token, and a fast server answers in that gap. Claimed
    /// when the call registers; the oldest go first past [`EARLY_PROGRESS_KEPT`].
    early: VecDeque<(String, rmcp::model::ProgressNotificationParam)>,
}

/// Early progress notifications kept for calls still registering.
const EARLY_PROGRESS_KEPT: usize = 64;

fn progress_key(identity: &str, token: &rmcp::model::ProgressToken) -> String {
    format!("{identity}/{}", serde_json::to_string(token).unwrap_or_default())
}

/// Stops routing a call's progress when dropped.
#[derive(Debug)]
struct ProgressGuard<'a> {
    sup: &'a Supervisor,
    key: String,
}

impl Drop for ProgressGuard<'_> {
    fn drop(&mut self) {
        self.sup.progress.lock().unwrap_or_else(|e| e.into_inner()).targets.remove(&self.key);
    }
}

/// A call that `tools/cancel` can cancel; unregistered when dropped.
#[derive(Debug)]
pub struct CallGuard<'a> {
    sup: &'a Supervisor,
    key: (String, String),
    /// Fires when the call is cancelled.
    pub cancelled: tokio::sync::oneshot::Receiver<()>,
}

impl Drop for CallGuard<'_> {
    fn drop(&mut self) {
        self.sup.cancels.lock().unwrap_or_else(|e| e.into_inner()).remove(&self.key);
    }
}

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

/// Whose call a progress notification belongs to.
#[derive(Debug, Clone)]
pub struct ProgressTarget {
    /// The session that called.
    pub session: String,
    /// The caller's call id.
    pub call_id: Option<String>,
    /// The tool's fully qualified name.
    pub name: String,
}

/// Owns every MCP server process and connection.
#[derive(Debug)]
pub struct Supervisor {
    opts: McpOptions,
    events: Arc<EventBus>,
    store: Store,
    inner: Mutex<Inner>,
    me: Weak<Supervisor>,
    /// Calls in flight that asked for progress, by progress token (as JSON).
    progress: Mutex<Progress>,
    /// Closed while children of a killed daemon are being stopped: no server starts before
    /// they are gone (they may hold its files or ports), but everything else answers.
    start_gate: tokio::sync::watch::Sender<orphans::Held>,
    /// Calls in flight with a call id, by (session, call id): firing cancels them.
    cancels: Mutex<HashMap<(String, String), tokio::sync::oneshot::Sender<()>>>,
    /// Each session's tools as last computed; dropped whenever a session's servers, a state
    /// or a catalog changes (`tools_generation` tells a computation that raced a change).
    tool_cache: Mutex<HashMap<String, Arc<SessionTools>>>,
    /// The same tables by what they were computed from, so a new session configured like
    /// another gets the table already built. Cleared with `tool_cache`.
    tool_tables: Mutex<HashMap<TableKey, Arc<SessionTools>>>,
    tools_generation: std::sync::atomic::AtomicU64,
}

/// `command args…` or the URL. As Gemini CLI prints it: a space after the command even with
/// no arguments (`gemini mcp list` shows `srv  (stdio)`).
fn stdio_target(command: &str, args: &[String]) -> String {
    format!("{command} {}", args.join(" "))
}

/// Transport and target of an entry as shown: pass the entry as written (`spec.shown`), so
/// a `$VAR` in its args or URL never shows the value it holds.
fn config_target(c: &crate::config::mcp::McpServerConfig) -> (Wire, String) {
    use crate::config::mcp::TransportType;
    match (&c.http_url, &c.url, &c.command) {
        (Some(u), _, _) => (Wire::Http, redact_urls(u).into_owned()),
        (None, Some(u), _) if c.transport_type == Some(TransportType::Sse) => {
            (Wire::Sse, redact_urls(u).into_owned())
        }
        (None, Some(u), _) => (Wire::Http, redact_urls(u).into_owned()),
        (None, None, Some(cmd)) => {
            (Wire::Stdio, stdio_target(cmd, c.args.as_deref().unwrap_or_default()))
        }
        (None, None, None) => (Wire::Stdio, String::new()),
    }
}

/// The status of an entry nothing runs for.
fn not_running(name: &str, scope: Scope, transport: Wire, target: String) -> ServerStatus {
    ServerStatus {
        name: name.to_owned(),
        scope,
        extension: None,
        transport,
        target,
        state: ServerState::Disconnected,
        last_error: None,
        identity: None,
        pid: None,
        uptime_secs: None,
        unresponsive_secs: None,
        restarts: 0,
        tools: None,
        prompts: None,
        resources: None,
        problems: vec![],
        sessions: vec![],
    }
}

fn block_text(reason: BlockReason) -> (ServerState, &'static str) {
    match reason {
        BlockReason::Session => (ServerState::Disabled, "disabled for this session"),
        BlockReason::Enablement => {
            (ServerState::Disabled, "disabled in mcp-server-enablement.json")
        }
        BlockReason::UntrustedFolder => {
            (ServerState::Disabled, "this folder is not trusted: `gemctl trust` trusts it")
        }
        BlockReason::Admin => {
            (ServerState::Blocked, "MCP servers are turned off by admin settings")
        }
        BlockReason::Allowlist => (ServerState::Blocked, "not in mcp.allowed"),
        BlockReason::Excludelist => (ServerState::Blocked, "listed in mcp.excluded"),
        BlockReason::Invalid => {
            (ServerState::Blocked, "its configuration is invalid (gemctl config check)")
        }
    }
}

/// A session's view of its configuration, as the supervisor needs it.
#[derive(Debug, Clone, Copy)]
pub struct SessionView<'a> {
    /// Its id.
    pub id: &'a str,
    /// Its effective configuration.
    pub config: &'a Effective,
    /// The environment its servers expand against and inherit.
    pub env: &'a Env,
}

impl Supervisor {
    /// A supervisor; nothing runs until a session needs it.
    pub fn new(opts: McpOptions, events: Arc<EventBus>, store: Store) -> Arc<Self> {
        Arc::new_cyclic(|me| Self {
            opts,
            events,
            store,
            inner: Mutex::default(),
            me: me.clone(),
            progress: Mutex::default(),
            start_gate: tokio::sync::watch::Sender::new(orphans::Held::default()),
            cancels: Mutex::default(),
            tool_cache: Mutex::default(),
            tool_tables: Mutex::default(),
            tools_generation: std::sync::atomic::AtomicU64::new(0),
        })
    }

    fn inner(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What its server tasks report to: itself, through [`server::Observer`].
    fn observer(&self) -> Weak<dyn server::Observer> {
        self.me.clone()
    }

    /// The database (for child pid records).
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Stop the children a killed daemon left behind, in the background and all at once; a
    /// server starts only once the orphan of its own identity is gone (every server waits
    /// for an orphan recorded without one).
    pub fn clean_orphans(&self, grace: Duration) {
        let left = orphans::left_behind(&self.store);
        if left.is_empty() {
            return;
        }
        self.start_gate.send_replace(orphans::Held::of(&left));
        let (gate, store) = (self.start_gate.clone(), self.store.clone());
        tokio::spawn(async move {
            let each = left.iter().map(|rec| {
                let (gate, store) = (&gate, &store);
                async move {
                    orphans::clean(store, rec, grace).await;
                    gate.send_modify(|held| held.release(rec));
                }
            });
            futures::future::join_all(each).await;
        });
    }

    /// What may not start yet (see [`Supervisor::clean_orphans`]).
    pub fn start_gate(&self) -> tokio::sync::watch::Receiver<orphans::Held> {
        self.start_gate.subscribe()
    }

    /// What each of a session's entries amounts to, resolving identities.
    fn entries(view: SessionView<'_>) -> Resolved {
        let eff = view.config;
        let workspace = Path::new(&eff.public.workspace);
        let trusted = eff.public.trust.trusted;
        let redaction = Redaction::from_settings(&eff.public.settings);
        let mut out = BTreeMap::new();
        for (name, spec) in &eff.servers {
            let launch = resolve(
                name,
                &spec.config,
                view.env,
                &redaction,
                workspace,
                trusted,
                default_cwd(spec.scope, workspace, view.env).as_deref(),
            );
            let (binding, launch) = match (spec.blocked, launch) {
                (Some(reason), launch) => {
                    let (state, text) = block_text(reason);
                    let (transport, target) = config_target(&spec.shown);
                    // A stdio entry in an untrusted folder says so in the reference's words.
                    let text = match launch {
                        Err(e @ spec::ResolveError::Untrusted(_)) => e.to_string(),
                        _ => text.to_owned(),
                    };
                    (Binding::NotRun { state, reason: text, transport, target }, None)
                }
                (None, Err(e)) => {
                    let (transport, target) = config_target(&spec.shown);
                    let state = ServerState::Disconnected;
                    (Binding::NotRun { state, reason: e.to_string(), transport, target }, None)
                }
                (None, Ok(l)) => {
                    let target = config_target(&spec.shown).1;
                    (Binding::Runs(l.identity()), Some((l, spec.config.timeout, target)))
                }
            };
            let entry = Entry {
                scope: spec.scope,
                binding,
                include: spec.config.include_tools.clone(),
                exclude: spec.config.exclude_tools.clone(),
                timeout: spec.config.timeout.map_or(DEFAULT_REQUEST_TIMEOUT, Duration::from_millis),
            };
            out.insert(name.clone(), (entry, launch));
        }
        out
    }

    /// The session needs its servers: start or share each one it may run, and stop what it
    /// no longer runs (a configuration change). `changed` names entries whose configuration
    /// changed; those parked in crash-loop or needs-auth with an unchanged identity get a
    /// fresh start.
    pub fn sync(&self, view: SessionView<'_>, changed: &[String]) {
        let resolved = Self::entries(view);
        let mut released = Vec::new();
        let mut kick = Vec::new();
        let mut started = false;
        {
            let mut inner = self.inner();
            if inner.closed {
                return;
            }
            let mut entries = BTreeMap::new();
            for (name, (entry, launch)) in resolved {
                if let (Binding::Runs(identity), Some((spec, timeout, target))) =
                    (&entry.binding, launch)
                {
                    match inner.servers.get(identity) {
                        Some(existing) => {
                            let state = existing.snapshot().state;
                            if changed.contains(&name)
                                && matches!(state, ServerState::CrashLoop | ServerState::NeedsAuth)
                            {
                                kick.push(existing.clone());
                            }
                        }
                        None => {
                            let new = NewServer {
                                identity: identity.clone(),
                                name: name.clone(),
                                scope: entry.scope,
                                spec,
                                target,
                                startup_timeout: timeout
                                    .map_or(self.opts.startup_timeout, Duration::from_millis),
                                request_timeout: entry.timeout,
                            };
                            tracing::info!(server = %name, session = view.id, identity = &identity[..12], "starting MCP server");
                            let server = Server::start(new, self.observer(), self.opts);
                            inner.servers.insert(identity.clone(), server);
                            inner.retired.retain(|r| r.server.identity != *identity);
                            started = true;
                        }
                    }
                }
                entries.insert(name, entry);
            }
            let old = inner.sessions.insert(view.id.to_owned(), entries);
            for entry in old.into_iter().flat_map(BTreeMap::into_values) {
                if let Binding::Runs(identity) = entry.binding
                    && inner.users(&identity).is_empty()
                {
                    released.push(identity);
                }
            }
            // A changed entry's old server goes at once; nobody else uses it.
            for identity in &released {
                if let Some(server) = inner.servers.remove(identity) {
                    inner.retire(server.clone(), "its configuration changed");
                    tracing::info!(server = %server.name, "configuration changed: stopping the old server");
                    tokio::spawn(async move { server.stop().await });
                }
            }
        }
        // A table built on a server that is gone (it may be the same identity as the new one)
        // must not be served again.
        if started || !released.is_empty() {
            self.invalidate_tools();
        } else {
            self.invalidate_session_tools(view.id);
        }
        for server in kick {
            server.send(Cmd::Restart);
        }
    }

    /// Whether a session currently needs its servers.
    pub fn is_active(&self, session: &str) -> bool {
        self.inner().sessions.contains_key(session)
    }

    /// The session no longer needs its servers (its last connection went, or it closed).
    /// Servers nobody else uses stop after the linger period.
    pub fn release_session(&self, session: &str) {
        let mut inner = self.inner();
        let Some(entries) = inner.sessions.remove(session) else { return };
        self.invalidate_session_tools(session);
        tracing::debug!(session, "session released its MCP servers");
        for entry in entries.into_values() {
            let Binding::Runs(identity) = entry.binding else { continue };
            if inner.users(&identity).is_empty() {
                self.linger(identity);
            }
        }
    }

    fn linger(&self, identity: String) {
        let me = self.me.clone();
        let linger = self.opts.linger;
        tokio::spawn(async move {
            tokio::time::sleep(linger).await;
            let Some(sup) = me.upgrade() else { return };
            let server = {
                let mut inner = sup.inner();
                if !inner.users(&identity).is_empty() {
                    return;
                }
                let server = inner.servers.remove(&identity);
                if let Some(server) = &server {
                    inner.retire(server.clone(), "no session needed it");
                }
                server
            };
            sup.invalidate_tools();
            if let Some(server) = server {
                tracing::info!(server = %server.name, "no session needs it any more: stopping");
                server.stop().await;
            }
        });
    }

    /// Announce a state change to every session using the server.
    fn announce(&self, server: &Arc<Server>, previous: ServerState) {
        self.invalidate_tools();
        let sessions = self.inner().users(&server.identity);
        let status = self.status_of(server, &server.name, server.scope, sessions);
        tracing::info!(server = %server.name, from = ?previous, to = ?status.state, error = status.last_error.as_deref().unwrap_or(""), "MCP server state");
        self.events
            .emit(EventBody::McpServerState(ServerStateChanged { server: status, previous }));
    }

    /// Announce a new catalog to every session using the server.
    fn catalog_changed(&self, server: &Arc<Server>) {
        self.invalidate_tools();
        let sessions = self.inner().users(&server.identity);
        let (tools, prompts, resources) = server.catalog().counts();
        tracing::info!(server = %server.name, tools, prompts, resources, "catalog changed");
        self.events.emit(EventBody::CatalogChanged(geminid_protocol::mcp::CatalogChanged {
            server: server.name.clone(),
            identity: server.identity[..12].to_owned(),
            sessions,
            tools,
            prompts,
            resources,
        }));
    }

    fn status_of(
        &self,
        server: &Server,
        name: &str,
        scope: Scope,
        sessions: Vec<String>,
    ) -> ServerStatus {
        let s = server.snapshot();
        let (tools, prompts, resources) = match server.counts() {
            Some((t, p, r)) => (Some(t), Some(p), Some(r)),
            None => (None, None, None),
        };
        ServerStatus {
            name: name.to_owned(),
            scope,
            extension: None,
            transport: s.transport,
            target: server.target.clone(),
            state: s.state,
            last_error: s.last_error.map(|e| redact_urls(&e).into_owned()),
            identity: Some(server.identity[..12].to_owned()),
            pid: s.pid,
            uptime_secs: s.connected_at.map(|t| t.elapsed().as_secs()),
            unresponsive_secs: s.unresponsive_since.map(|t| t.elapsed().as_secs()),
            restarts: s.restarts,
            tools,
            prompts,
            resources,
            problems: if s.state == ServerState::Connected {
                server.catalog().problems.clone()
            } else {
                Vec::new()
            },
            sessions,
        }
    }

    /// Every running server (for `mcp/listServers` without a session).
    pub fn list_all(&self) -> Vec<ServerStatus> {
        let inner = self.inner();
        let mut out: Vec<ServerStatus> = inner
            .servers
            .values()
            .map(|s| self.status_of(s, &s.name, s.scope, inner.users(&s.identity)))
            .collect();
        out.sort_by(|a, b| (a.scope, &a.name).cmp(&(b.scope, &b.name)));
        out
    }

    /// A session's entries and their state. Never starts anything: an entry of a session that
    /// has not asked for its servers shows the state of a server another session runs for the
    /// same identity, else `disconnected`.
    pub fn list_session(&self, view: SessionView<'_>) -> Vec<ServerStatus> {
        let inner = self.inner();
        let active = inner.sessions.get(view.id);
        let resolved = Self::entries(view);
        let mut out = Vec::new();
        for (name, (entry, launch)) in resolved {
            // A session that runs its servers reports what it runs (which may lag a config
            // edit by one reload); otherwise what the files say now.
            let entry = active.and_then(|a| a.get(&name)).cloned().unwrap_or(entry);
            let status = match &entry.binding {
                Binding::Runs(identity) => match inner.servers.get(identity) {
                    Some(server) => {
                        let mut s =
                            self.status_of(server, &name, entry.scope, inner.users(identity));
                        // The tools this entry exposes, after its include/exclude lists.
                        if s.tools.is_some() && (entry.include.is_some() || entry.exclude.is_some())
                        {
                            let n = server
                                .catalog()
                                .tools
                                .iter()
                                .filter(|t| {
                                    let own = t["name"].as_str().unwrap_or_default();
                                    tools::enabled(
                                        own,
                                        entry.include.as_deref(),
                                        entry.exclude.as_deref(),
                                    )
                                })
                                .count();
                            s.tools = Some(u32::try_from(n).unwrap_or(u32::MAX));
                        }
                        s
                    }
                    None => {
                        let (transport, tgt) = launch
                            .as_ref()
                            .map(|(l, _, shown)| (planned_transport(l), shown.clone()))
                            .unwrap_or((Wire::Stdio, String::new()));
                        let mut s = not_running(&name, entry.scope, transport, tgt);
                        s.identity = Some(identity[..12].to_owned());
                        s.last_error = Some(match inner.retired(identity) {
                            Some(r) => format!(
                                "stopped {} ago: {}",
                                humantime::format_duration(Duration::from_secs(
                                    r.at.elapsed().as_secs()
                                )),
                                r.why
                            ),
                            None => "not started yet: it starts with the session's first call \
                                     or `gemctl mcp start`"
                                .to_owned(),
                        });
                        s
                    }
                },
                Binding::NotRun { state, reason, transport, target } => {
                    let mut s = not_running(&name, entry.scope, *transport, target.clone());
                    s.state = *state;
                    s.last_error = Some(redact_urls(reason).into_owned());
                    s
                }
            };
            out.push(status);
        }
        out.sort_by(|a, b| (a.scope, &a.name).cmp(&(b.scope, &b.name)));
        out
    }

    /// How long `session` waits for an answer from `server`: the `timeout` of its entry that
    /// runs as that server (sessions sharing a server may set different ones), else the
    /// server's own.
    pub fn timeout_for(&self, session: &str, server: &Server) -> Duration {
        let inner = self.inner();
        inner
            .sessions
            .get(session)
            .and_then(|entries| {
                entries
                    .values()
                    .find(|e| matches!(&e.binding, Binding::Runs(id) if *id == server.identity))
            })
            .map_or(server.request_timeout, |e| e.timeout)
    }

    /// The running server an entry name means: the session's, or (without a session) the one
    /// running server of that name.
    pub fn find(&self, session: Option<&str>, name: &str) -> Result<Arc<Server>, McpError> {
        let inner = self.inner();
        if let Some(id) = session {
            let entries = inner.sessions.get(id).ok_or_else(|| {
                McpError::Unavailable(format!(
                    "session {id} has not started its MCP servers (`gemctl mcp start --session {id}`)"
                ))
            })?;
            let key = crate::config::enablement::normalize(name);
            let entry = entries
                .iter()
                .find(|(n, _)| crate::config::enablement::normalize(n) == key)
                .map(|(_, e)| e)
                .ok_or_else(|| {
                    McpError::NotFound(format!("no MCP server named '{name}' in this session"))
                })?;
            return match &entry.binding {
                Binding::Runs(identity) => inner
                    .servers
                    .get(identity)
                    .or_else(|| inner.retired(identity).map(|r| &r.server))
                    .cloned()
                    .ok_or_else(|| {
                        McpError::Unavailable(format!(
                            "MCP server '{name}' has not been started (`gemctl mcp start` starts \
                             this directory's servers)"
                        ))
                    }),
                Binding::NotRun { state, reason, .. } => Err(McpError::Unavailable(format!(
                    "MCP server '{name}' is {}: {reason}",
                    state.label().to_lowercase()
                ))),
            };
        }
        let matches: Vec<&Arc<Server>> =
            inner.servers.values().filter(|s| s.name == name).collect();
        match matches.as_slice() {
            [one] => Ok((*one).clone()),
            // Stopped lately: its last run (for its log, or to start it again).
            [] if let Some(r) = inner.retired.iter().find(|r| r.server.name == name) => {
                Ok(r.server.clone())
            }
            [] => Err(McpError::NotFound(format!(
                "no MCP server named '{name}' is running or ran lately (`gemctl mcp list` shows \
                 this directory's servers)"
            ))),
            _ => Err(McpError::NotFound(format!(
                "{} different servers named '{name}' are running; name a session",
                matches.len()
            ))),
        }
    }

    /// Restart a server and wait until its first attempt settles. A server that was stopped
    /// (see [`Supervisor::find`]) starts again, for as long as a session needs it or the
    /// linger period.
    pub async fn restart(&self, server: &Arc<Server>) -> ServerStatus {
        let revived = {
            let mut inner = self.inner();
            let running = inner.servers.get(&server.identity).cloned();
            match running {
                Some(running) => {
                    running.send(Cmd::Restart);
                    None
                }
                None if inner.closed => None,
                None => {
                    let new = NewServer {
                        identity: server.identity.clone(),
                        name: server.name.clone(),
                        scope: server.scope,
                        spec: server.spec.clone(),
                        target: server.target.clone(),
                        startup_timeout: server.startup_timeout,
                        request_timeout: server.request_timeout,
                    };
                    tracing::info!(server = %server.name, "starting a stopped MCP server again");
                    let fresh = Server::start(new, self.observer(), self.opts);
                    inner.servers.insert(fresh.identity.clone(), fresh.clone());
                    inner.retired.retain(|r| r.server.identity != fresh.identity);
                    Some(fresh)
                }
            }
        };
        if let Some(fresh) = &revived {
            self.invalidate_tools();
            if self.inner().users(&fresh.identity).is_empty() {
                self.linger(fresh.identity.clone());
            }
            let mut watch = fresh.watch();
            let wait = fresh.startup_timeout + self.opts.stop_grace;
            let _ = tokio::time::timeout(wait, watch.wait_for(server::Snapshot::settled)).await;
            return self.status(fresh);
        }
        let mut watch = server.watch();
        let before = watch.borrow().attempts;
        let wait = server.startup_timeout + self.opts.stop_grace * 2;
        let _ = tokio::time::timeout(
            wait,
            watch.wait_for(|s| s.attempts > before && s.state != ServerState::Connecting),
        )
        .await;
        self.status(server)
    }

    /// One server's status, named as it was started.
    pub fn status(&self, server: &Arc<Server>) -> ServerStatus {
        let users = self.inner().users(&server.identity);
        self.status_of(server, &server.name, server.scope, users)
    }

    /// Wait (up to each one's start-up timeout) until the session's servers have settled.
    pub async fn settle(&self, session: &str) {
        self.settle_where(session, |_| true).await;
    }

    /// Wait until the servers that could have the tool `fqn` have settled (those whose names
    /// fit it; every one if none does), not the others.
    pub async fn settle_for_tool(&self, session: &str, fqn: &str) {
        let fits = |name: &str| tools::is_of_server(fqn, name);
        let any = self.inner().sessions.get(session).is_some_and(|e| e.keys().any(|n| fits(n)));
        self.settle_where(session, |name| !any || fits(name)).await;
    }

    /// Wait until the session's server of entry `name` has settled.
    pub async fn settle_server(&self, session: &str, name: &str) {
        let key = crate::config::enablement::normalize(name);
        self.settle_where(session, |n| crate::config::enablement::normalize(n) == key).await;
    }

    async fn settle_where(&self, session: &str, wanted: impl Fn(&str) -> bool) {
        let servers: Vec<Arc<Server>> = {
            let inner = self.inner();
            let Some(entries) = inner.sessions.get(session) else { return };
            entries
                .iter()
                .filter(|(name, _)| wanted(name))
                .filter_map(|(_, e)| match &e.binding {
                    Binding::Runs(id) => inner.servers.get(id).cloned(),
                    Binding::NotRun { .. } => None,
                })
                .collect()
        };
        let waits = servers.into_iter().map(|s| async move {
            let mut w = s.watch();
            let limit = s.startup_timeout + self.opts.stop_grace;
            let _ = tokio::time::timeout(limit, w.wait_for(server::Snapshot::settled)).await;
        });
        futures::future::join_all(waits).await;
    }

    /// Call a tool on a server; fails at once if the server dies meanwhile.
    pub async fn call_tool(
        &self,
        server: &Arc<Server>,
        timeout: Duration,
        tool: &str,
        arguments: Option<serde_json::Map<String, serde_json::Value>>,
        target: Option<ProgressTarget>,
    ) -> Result<serde_json::Value, McpError> {
        let mut params = rmcp::model::CallToolRequestParams::new(tool.to_owned());
        params.arguments = arguments;
        let identity = server.identity.as_str();
        let call = |peer| async move { call_raw(self, identity, &peer, params, target).await };
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
        let unavailable = |s: &server::Snapshot| {
            let state = match s.state {
                // Connected but no connection: it is being stopped or restarted.
                ServerState::Connected => "stopping".to_owned(),
                other => other.label().to_lowercase(),
            };
            let why = s.last_error.clone().unwrap_or_else(|| format!("is {state}"));
            if why.starts_with("MCP server") { why } else { format!("MCP server '{name}' {why}") }
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

    /// Route progress notifications of `identity`'s connection with this token to `target`
    /// until the guard drops (and those that came already).
    fn track_progress(
        &self,
        identity: &str,
        token: &rmcp::model::ProgressToken,
        target: ProgressTarget,
    ) -> ProgressGuard<'_> {
        let key = progress_key(identity, token);
        let early: Vec<rmcp::model::ProgressNotificationParam> = {
            let mut p = self.progress.lock().unwrap_or_else(|e| e.into_inner());
            p.targets.insert(key.clone(), target.clone());
            if p.early.iter().any(|(k, _)| *k == key) {
                let (mine, rest): (Vec<_>, Vec<_>) =
                    p.early.drain(..).partition(|(k, _)| *k == key);
                p.early = rest.into();
                mine.into_iter().map(|(_, n)| n).collect()
            } else {
                Vec::new()
            }
        };
        for n in &early {
            self.emit_progress(&target, n);
        }
        ProgressGuard { sup: self, key }
    }

    /// A server reported progress: tell the calling session.
    fn on_progress(&self, identity: &str, n: &rmcp::model::ProgressNotificationParam) {
        let key = progress_key(identity, &n.progress_token);
        let target = {
            let mut p = self.progress.lock().unwrap_or_else(|e| e.into_inner());
            let target = p.targets.get(&key).cloned();
            if target.is_none() {
                if p.early.len() >= EARLY_PROGRESS_KEPT {
                    p.early.pop_front();
                }
                p.early.push_back((key, n.clone()));
            }
            target
        };
        if let Some(t) = target {
            self.emit_progress(&t, n);
        }
    }

    fn emit_progress(&self, t: &ProgressTarget, n: &rmcp::model::ProgressNotificationParam) {
        self.events.emit(EventBody::ToolProgress(geminid_protocol::tools::ToolProgress {
            session: t.session.clone(),
            call_id: t.call_id.clone(),
            name: t.name.clone(),
            progress: n.progress,
            total: n.total,
            message: n.message.clone(),
        }));
    }

    /// Make a call with an id cancellable: the receiver fires on `tools/cancel`.
    /// `None` when a call with that id is already in progress in the session: ids name one
    /// call at a time (a second would take the first one's `tools/cancel`, and the first
    /// one's end would unregister the second).
    pub fn register_call(&self, session: &str, call_id: &str) -> Option<CallGuard<'_>> {
        let key = (session.to_owned(), call_id.to_owned());
        let mut cancels = self.cancels.lock().unwrap_or_else(|e| e.into_inner());
        if cancels.contains_key(&key) {
            return None;
        }
        let (tx, rx) = tokio::sync::oneshot::channel();
        cancels.insert(key.clone(), tx);
        Some(CallGuard { sup: self, key, cancelled: rx })
    }

    /// `tools/cancel`: whether a call with that id was running.
    pub fn cancel_call(&self, session: &str, call_id: &str) -> bool {
        let key = (session.to_owned(), call_id.to_owned());
        let tx = self.cancels.lock().unwrap_or_else(|e| e.into_inner()).remove(&key);
        tx.is_some_and(|tx| tx.send(()).is_ok())
    }

    /// Why a session has no tool named `fqn`, when one of its servers would be the one to
    /// have it: the server's state and the `gemctl` command that helps. `None` when no entry's
    /// name fits the tool's.
    pub fn explain_missing_tool(&self, session: &str, fqn: &str) -> Option<(ServerState, String)> {
        let inner = self.inner();
        let entries = inner.sessions.get(session)?;
        // The longest fitting prefix wins: `mcp_a_b_x` is server `a_b`'s before server `a`'s.
        let (name, entry) = entries
            .iter()
            .filter(|(name, _)| tools::is_of_server(fqn, name))
            .max_by_key(|(name, _)| name.len())?;
        let (state, why) = match &entry.binding {
            Binding::NotRun { state, reason, .. } => (*state, Some(reason.clone())),
            Binding::Runs(identity) => match inner.servers.get(identity) {
                Some(server) => {
                    let snap = server.snapshot();
                    (snap.state, snap.last_error)
                }
                None => (ServerState::Disconnected, None),
            },
        };
        let what = state.label().to_lowercase();
        let why = why.map(|w| format!(" ({w})")).unwrap_or_default();
        let text = match state {
            ServerState::Connected => format!(
                "MCP server '{name}' is connected but has no tool that is named '{fqn}' in this \
                 session; `gemctl mcp tools {name}` lists its tools"
            ),
            ServerState::Disabled => {
                format!(
                    "MCP server '{name}' is disabled{why}; `gemctl mcp enable {name}` enables it"
                )
            }
            ServerState::Blocked => format!("MCP server '{name}' is blocked{why}"),
            ServerState::Connecting => format!(
                "MCP server '{name}' is still starting; try again in a moment (`gemctl mcp list` \
                 shows when it is connected)"
            ),
            ServerState::NeedsAuth => format!(
                "MCP server '{name}' needs authentication{why}; `gemctl mcp logs {name}` shows \
                 its answer, `gemctl mcp restart {name}` tries again"
            ),
            ServerState::Disconnected | ServerState::CrashLoop => format!(
                "MCP server '{name}' is {what}{why}; `gemctl mcp logs {name}` shows why, \
                 `gemctl mcp restart {name}` starts it again"
            ),
        };
        Some((state, text))
    }

    /// A session's connected servers by name, and a note for each one that is not connected.
    pub fn session_servers(&self, session: &str) -> Result<SessionServers, McpError> {
        let inner = self.inner();
        let entries = inner.sessions.get(session).ok_or_else(|| {
            McpError::Unavailable(format!("session {session} has not started its MCP servers"))
        })?;
        let mut servers = Vec::new();
        let mut notes = Vec::new();
        for (name, entry) in entries {
            let Binding::Runs(identity) = &entry.binding else { continue };
            let Some(server) = inner.servers.get(identity) else { continue };
            match server.snapshot().state {
                ServerState::Connected => servers.push((name.clone(), server.clone())),
                state => notes.push(format!(
                    "MCP server '{name}' is {}: its catalog is not listed",
                    state.label().to_lowercase()
                )),
            }
        }
        Ok((servers, notes))
    }

    /// A session's tools, by fully qualified name: servers in name order, each one's tools in
    /// its order, include/exclude applied. A name already taken gets `__2`, `__3`, ... (the
    /// first in that order keeps it), and the rename is reported in the diagnostics.
    pub fn session_tools(&self, session: &str) -> Result<Arc<SessionTools>, McpError> {
        use std::sync::atomic::Ordering;
        if let Some(hit) = self.tool_cache.lock().unwrap_or_else(|e| e.into_inner()).get(session) {
            return Ok(hit.clone());
        }
        let generation = self.tools_generation.load(Ordering::SeqCst);
        let (key, computed) = {
            let inner = self.inner();
            let entries = inner.sessions.get(session).ok_or_else(|| {
                McpError::Unavailable(format!("session {session} has not started its MCP servers"))
            })?;
            let key = table_key(entries);
            let shared =
                self.tool_tables.lock().unwrap_or_else(|e| e.into_inner()).get(&key).cloned();
            match shared {
                Some(table) => (None, table),
                None => (Some(key), Arc::new(compute_session_tools(&inner, entries))),
            }
        };
        let mut cache = self.tool_cache.lock().unwrap_or_else(|e| e.into_inner());
        if self.tools_generation.load(Ordering::SeqCst) == generation {
            cache.insert(session.to_owned(), computed.clone());
            if let Some(key) = key {
                let mut tables = self.tool_tables.lock().unwrap_or_else(|e| e.into_inner());
                tables.insert(key, computed.clone());
            }
        }
        Ok(computed)
    }

    /// Forget one session's table: its entries changed. Tables kept by what they were
    /// computed from stay valid (another session configured alike still uses its table).
    fn invalidate_session_tools(&self, session: &str) {
        self.tools_generation.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.tool_cache.lock().unwrap_or_else(|e| e.into_inner()).remove(session);
    }

    /// Forget every session's computed tools (a server's state or catalog changed).
    fn invalidate_tools(&self) {
        self.tools_generation.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.tool_cache.lock().unwrap_or_else(|e| e.into_inner()).clear();
        self.tool_tables.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }

    /// Stop every server and wait for their processes to be gone. Nothing starts afterwards.
    pub async fn shutdown(&self) {
        let servers: Vec<Arc<Server>> = {
            let mut inner = self.inner();
            inner.closed = true;
            inner.sessions.clear();
            inner.servers.drain().map(|(_, s)| s).collect()
        };
        let stops = servers.iter().map(|s| s.stop());
        futures::future::join_all(stops).await;
    }
}

/// Compute a session's tool table from its entries (see [`Supervisor::session_tools`]).
fn compute_session_tools(inner: &Inner, entries: &BTreeMap<String, Entry>) -> SessionTools {
    let mut out = SessionTools::default();
    let mut taken: HashMap<String, usize> = HashMap::new();
    for (name, entry) in entries {
        let Binding::Runs(identity) = &entry.binding else { continue };
        let Some(server) = inner.servers.get(identity) else { continue };
        let snapshot = server.snapshot();
        let state = snapshot.state;
        out.pending |= !snapshot.settled();
        if state != ServerState::Connected {
            out.diagnostics.push(format!(
                "MCP server '{name}' is {}: its tools are not listed",
                state.label().to_lowercase()
            ));
            continue;
        }
        let catalog = server.catalog();
        out.diagnostics
            .extend(catalog.problems.iter().map(|p| format!("MCP server '{name}': {p}")));
        for (index, tool) in catalog.tools.iter().enumerate() {
            let tool_name = tool["name"].as_str().unwrap_or_default();
            if !tools::enabled(tool_name, entry.include.as_deref(), entry.exclude.as_deref()) {
                continue;
            }
            let base = tools::fqn(name, tool_name);
            let seen = taken.entry(base.clone()).or_insert(0);
            *seen += 1;
            let fqn = if *seen == 1 {
                base.clone()
            } else {
                let renamed = tools::disambiguate(&base, *seen);
                out.diagnostics.push(format!(
                    "tool '{tool_name}' of MCP server '{name}' would be named '{base}', which \
                         an earlier tool already has: it is named '{renamed}'"
                ));
                renamed
            };
            if let Some(Err(e)) = catalog.validators.get(index).map(|v| &**v) {
                out.diagnostics.push(format!(
                    "the input schema of '{fqn}' cannot be compiled ({e}); its calls are not \
                         validated"
                ));
            }
            out.by_name.insert(fqn.clone(), out.tools.len());
            out.tools.push(SessionTool {
                fqn,
                server_name: name.clone(),
                server: server.clone(),
                catalog: catalog.clone(),
                index,
                timeout: entry.timeout,
            });
        }
    }
    out
}

impl server::Observer for Supervisor {
    fn state_changed(&self, server: &Arc<Server>, previous: ServerState) {
        self.announce(server, previous);
    }

    fn catalog_changed(&self, server: &Arc<Server>) {
        Supervisor::catalog_changed(self, server);
    }

    fn progress(&self, identity: &str, params: &rmcp::model::ProgressNotificationParam) {
        self.on_progress(identity, params);
    }

    fn store(&self) -> &Store {
        &self.store
    }

    fn start_gate(&self) -> tokio::sync::watch::Receiver<orphans::Held> {
        Supervisor::start_gate(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Progress that arrives before its call registered is delivered once it does, and a
    /// token is only matched on the connection it came from (every connection counts its
    /// tokens from the same start).
    #[tokio::test]
    async fn progress_is_routed_by_connection_and_kept_for_a_late_registration()
    -> anyhow::Result<()> {
        let events = Arc::new(EventBus::new(16));
        let sup = Supervisor::new(McpOptions::default(), events.clone(), Store::temporary()?);
        let mut rx = events.subscribe();
        let token = rmcp::model::ProgressToken(rmcp::model::NumberOrString::Number(1));
        let note = |p: f64| {
            let mut n = rmcp::model::ProgressNotificationParam::new(token.clone(), p);
            n.total = Some(3.0);
            n
        };
        let target = ProgressTarget {
            session: "s".into(),
            call_id: Some("c".into()),
            name: "mcp_a_t".into(),
        };
        sup.on_progress("server-a", &note(1.0));
        let _guard = sup.track_progress("server-a", &token, target);
        sup.on_progress("server-b", &note(9.0));
        sup.on_progress("server-a", &note(2.0));
        let mut seen = Vec::new();
        while let Ok(p) = rx.try_recv() {
            if let EventBody::ToolProgress(t) = &p.event.body {
                seen.push(t.progress);
            }
        }
        assert_eq!(seen, [1.0, 2.0], "the early one delivered, the other connection's not");
        Ok(())
    }

    #[test]
    fn backoff_doubles_and_caps() {
        let o = McpOptions {
            backoff_initial: Duration::from_millis(100),
            backoff_max: Duration::from_millis(1000),
            ..McpOptions::default()
        };
        let d: Vec<u128> = (1..=6).map(|n| o.backoff(n).as_millis()).collect();
        assert_eq!(d, [100, 200, 400, 800, 1000, 1000]);
        assert_eq!(o.backoff(u32::MAX), Duration::from_millis(1000));
    }
}
