//! The supervisor: one [`Server`] per identity, shared by the sessions that need it.

use parking_lot::{Mutex, MutexGuard};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use geminid_protocol::event::EventBody;
use geminid_protocol::mcp::{ServerState, ServerStateChanged, ServerStatus};
use geminid_protocol::pins::PinMode;

use super::messages::ServerMessage;
use super::server::{self, Cmd, NewServer, Server};
use super::spec::{self, default_cwd, resolve};
use super::status::{block_text, config_target};
use super::{
    Binding, Callers, DEFAULT_REQUEST_TIMEOUT, Entry, Generation, Inner, McpError, McpOptions,
    Resolved, RunningEntry, SessionServers, SessionView, orphans, roots,
};
use crate::config::env::Redaction;
use crate::events::EventBus;
use crate::naming;
use crate::store::Store;

/// Owns every MCP server process and connection.
#[derive(Debug)]
pub(crate) struct Supervisor {
    pub(super) opts: McpOptions,
    pub(super) events: Arc<EventBus>,
    store: Store,
    inner: Mutex<Inner>,
    pub(super) me: Weak<Supervisor>,
    /// Where servers' progress notifications go, and who answers their requests.
    pub(super) callers: Arc<dyn Callers>,
    /// The owner of OAuth tokens, for remote servers' connections.
    pub(super) auth: Arc<crate::auth::Auth>,
    /// Closed while children of a killed daemon are being stopped: no server starts before
    /// they are gone (they may hold its files or ports), but everything else answers.
    start_gate: tokio::sync::watch::Sender<orphans::Held>,
    /// See [`Generation`].
    servers_generation: AtomicU64,
    sessions_generation: AtomicU64,
    /// Servers' log messages (`notifications/message`), for the gateway's clients.
    pub(super) messages: tokio::sync::broadcast::Sender<Arc<ServerMessage>>,
    /// Tool-definition pins.
    pub(super) pins: Arc<crate::pins::Pins>,
}

impl Supervisor {
    /// A supervisor; nothing runs until a session needs it.
    pub(crate) fn new(
        opts: McpOptions,
        events: Arc<EventBus>,
        store: Store,
        callers: Arc<dyn Callers>,
        auth: Arc<crate::auth::Auth>,
        pins: Arc<crate::pins::Pins>,
    ) -> Arc<Self> {
        let inner = Inner {
            asks_roots: store.marked(super::asked::ROOTS_SET),
            resume: store.open_tasks(),
            ..Inner::default()
        };
        Arc::new_cyclic(|me| Self {
            opts,
            events,
            store,
            inner: Mutex::new(inner),
            me: me.clone(),
            callers,
            auth,
            start_gate: tokio::sync::watch::Sender::new(orphans::Held::default()),
            servers_generation: AtomicU64::new(0),
            sessions_generation: AtomicU64::new(0),
            messages: tokio::sync::broadcast::channel(super::messages::KEPT).0,
            pins,
        })
    }

    pub(super) fn inner(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock()
    }

    /// What its server tasks report to: itself, through [`server::Observer`].
    pub(super) fn observer(&self) -> Weak<dyn server::Observer> {
        self.me.clone()
    }

    /// The database (for child pid records).
    pub(crate) fn store(&self) -> &Store {
        &self.store
    }

    /// Stop the children a killed daemon left behind, in the background and all at once; a
    /// server starts only once the orphan of its own identity is gone (every server waits
    /// for an orphan recorded without one).
    pub(crate) fn clean_orphans(&self, grace: Duration) {
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
    pub(crate) fn start_gate(&self) -> tokio::sync::watch::Receiver<orphans::Held> {
        self.start_gate.subscribe()
    }

    /// What each of a session's entries amounts to, resolving identities.
    pub(super) fn entries(view: SessionView<'_>, pinning: PinMode) -> Resolved {
        let eff = view.config;
        let workspace = Path::new(&eff.public.workspace);
        let trusted = eff.public.trust.trusted;
        let redaction = Redaction::from_settings(&eff.public.settings);
        let session_roots = roots::of(workspace, &eff.public.settings, view.env);
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
                    let l = l.telling(eff.upstream.unwrap_or_default());
                    let target = config_target(&spec.shown).1;
                    (Binding::Runs(l.identity()), Some((l, spec.config.timeout, target)))
                }
            };
            let base = match &binding {
                Binding::Runs(identity) => identity.clone(),
                Binding::NotRun { .. } => String::new(),
            };
            let entry = Entry {
                scope: spec.scope,
                binding,
                base,
                roots: session_roots.clone(),
                include: spec.config.include_tools.clone(),
                exclude: spec.config.exclude_tools.clone(),
                timeout: spec.config.timeout.map_or(DEFAULT_REQUEST_TIMEOUT, Duration::from_millis),
                keep: spec.config.keep_warm.unwrap_or_default(),
                pinning: match spec.config.pinning.unwrap_or(pinning) {
                    PinMode::Enforce if spec.config.trust == Some(true) => PinMode::Warn,
                    mode => mode,
                },
            };
            out.insert(name.clone(), (entry, launch));
        }
        out
    }

    /// The session needs its servers: start or share each one it may run, and stop what it
    /// no longer runs (a configuration change). `changed` names entries whose configuration
    /// changed; those parked in crash-loop or needs-auth with an unchanged identity get a
    /// fresh start.
    pub(crate) fn sync(&self, view: SessionView<'_>, changed: &[String]) {
        let resolved = Self::entries(view, self.pins.mode);
        let mut released = Vec::new();
        let mut kick = Vec::new();
        let mut roots_moved = Vec::new();
        let mut started = false;
        {
            let mut inner = self.inner();
            if inner.closed {
                return;
            }
            let mut entries = BTreeMap::new();
            let before = inner.sessions.get(view.id).cloned().unwrap_or_default();
            for (name, (mut entry, launch)) in resolved {
                if let Binding::Runs(base) = &entry.binding {
                    let identity = inner.identity_for(base, &entry.roots);
                    entry.binding = Binding::Runs(identity);
                }
                if let Binding::Runs(identity) = &entry.binding {
                    inner.idle.used(identity, entry.keep);
                }
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
                                pinning: entry.pinning,
                                log: None,
                            };
                            tracing::info!(server = %name, session = view.id, identity = &identity[..12], "starting MCP server");
                            let server = Server::start(new, self.observer(), self.opts);
                            inner.servers.insert(identity.clone(), server);
                            inner.started_for.insert(
                                identity.clone(),
                                (entry.roots.clone(), entry.base.clone()),
                            );
                            inner.retired.retain(|r| r.server.identity != *identity);
                            started = true;
                        }
                    }
                }
                if let (Some(old), Binding::Runs(identity)) = (before.get(&name), &entry.binding)
                    && matches!(&old.binding, Binding::Runs(i) if i == identity)
                    && old.roots != entry.roots
                    && let Some(server) = inner.servers.get(identity)
                {
                    roots_moved.push(server.clone());
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
                inner.started_for.remove(identity);
                inner.idle.forget(identity);
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
            self.servers_changed();
        } else {
            self.sessions_changed();
        }
        for server in kick {
            server.send(Cmd::Restart);
        }
        for server in roots_moved {
            Self::roots_changed(&server);
        }
    }

    /// Whether a session currently needs its servers.
    pub(crate) fn is_active(&self, session: &str) -> bool {
        self.inner().sessions.contains_key(session)
    }

    /// The session no longer needs its servers (its last connection went, or it closed).
    /// Servers nobody else uses stop after the linger period.
    pub(crate) fn release_session(&self, session: &str) {
        let mut inner = self.inner();
        let Some(entries) = inner.sessions.remove(session) else { return };
        self.sessions_changed();
        tracing::debug!(session, "session released its MCP servers");
        for entry in entries.into_values() {
            let Binding::Runs(identity) = entry.binding else { continue };
            if inner.users(&identity).is_empty() && inner.servers.contains_key(&identity) {
                self.went_idle(&mut inner, identity);
            }
        }
    }

    /// Announce a state change to every session using the server.
    pub(super) fn announce(&self, server: &Arc<Server>, previous: ServerState) {
        self.servers_changed();
        if server.snapshot().state == ServerState::Connected {
            self.resume_tasks(server);
        }
        let status = self.status_of(&self.inner(), server, &server.name, server.scope);
        tracing::info!(server = %server.name, from = ?previous, to = ?status.state, error = status.last_error.as_deref().unwrap_or(""), "MCP server state");
        self.events
            .emit(EventBody::McpServerState(ServerStateChanged { server: status, previous }));
    }

    /// Announce a new catalog to every session using the server.
    pub(super) fn catalog_changed(&self, server: &Arc<Server>) {
        self.servers_changed();
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

    /// How long `session` waits for an answer from `server`: the `timeout` of its entry that
    /// runs as that server (sessions sharing a server may set different ones), else the
    /// server's own.
    pub(crate) fn timeout_for(&self, session: &str, server: &Server) -> Duration {
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
    pub(crate) fn find(&self, session: Option<&str>, name: &str) -> Result<Arc<Server>, McpError> {
        let inner = self.inner();
        if let Some(id) = session {
            let entries = inner.sessions.get(id).ok_or_else(|| {
                McpError::Unavailable(format!(
                    "session {id} has not started its MCP servers (`gemctl mcp start --session {id}`)"
                ))
            })?;
            // Exactly the entry's name: a name that crosses the socket is resolved once, to
            // one server, before policy, hooks and audit see it ("A" or " a" is not "a").
            let entry = entries.get(name).ok_or_else(|| {
                let near =
                    geminid_protocol::suggest::closest(name, entries.keys().map(String::as_str));
                McpError::NotFound(match near {
                    Some(n) => format!(
                        "no MCP server named '{name}' in this session (names are exact: did you \
                         mean '{n}'?)"
                    ),
                    None => format!("no MCP server named '{name}' in this session"),
                })
            })?;
            return inner.bound(name, &entry.binding);
        }
        let matches: Vec<&Arc<Server>> =
            inner.servers.values().filter(|s| s.name == name).collect();
        match matches.as_slice() {
            [one] => Ok((*one).clone()),
            // Stopped lately: its last run (for its log, or to start it again).
            [] if let Some(r) = inner.retired.iter().find(|r| r.server.name == name) => {
                Ok(r.server.clone())
            }
            [] => {
                let known = inner
                    .servers
                    .values()
                    .map(|s| s.name.as_str())
                    .chain(inner.retired.iter().map(|r| r.server.name.as_str()));
                let near = geminid_protocol::suggest::did_you_mean(name, known);
                Err(McpError::NotFound(format!(
                    "no MCP server named '{name}' is running or ran lately{near} (`gemctl mcp \
                     list` shows this directory's servers)"
                )))
            }
            _ => Err(McpError::NotFound(format!(
                "{} different servers named '{name}' are running; name a session (`gemctl \
                 --session ID`; `gemctl mcp list --all` shows whose each is)",
                matches.len()
            ))),
        }
    }

    /// Restart a server and wait until its first attempt settles. A server that was stopped
    /// (see [`Supervisor::find`]) starts again, for as long as a session needs it or the
    /// linger period.
    pub(crate) async fn restart(&self, server: &Arc<Server>) -> ServerStatus {
        // Read before the restart is asked for: its attempt may end before this looks again.
        let before = server.snapshot().attempts;
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
                        pinning: server.pinning,
                        log: Some(server.log.clone()),
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
            self.servers_changed();
            {
                let mut inner = self.inner();
                if inner.users(&fresh.identity).is_empty() {
                    self.went_idle(&mut inner, fresh.identity.clone());
                }
            }
            let mut watch = fresh.watch();
            let wait = fresh.startup_timeout + self.opts.stop_grace;
            let _ = tokio::time::timeout(wait, watch.wait_for(server::Snapshot::settled)).await;
            return self.status(fresh);
        }
        let mut watch = server.watch();
        let wait = server.startup_timeout + self.opts.stop_grace * 2;
        let _ = tokio::time::timeout(
            wait,
            watch.wait_for(|s| s.attempts > before && s.state != ServerState::Connecting),
        )
        .await;
        self.status(server)
    }

    /// Wait (up to each one's start-up timeout) until the session's servers have settled: each
    /// has finished its first attempt, and none is on its way back from a lost connection (in
    /// its backoff, or the attempts after it; see [`server::Snapshot::settled`]), so a listing
    /// made while a server restarts has its tools.
    pub(crate) async fn settle(&self, session: &str) {
        self.settle_where(session, |_| true).await;
    }

    /// Wait until the servers that could have the tool `fqn` have settled (those whose names
    /// fit it; every one if none does), not the others.
    pub(crate) async fn settle_for_tool(&self, session: &str, fqn: &str) {
        let fits = |name: &str| naming::is_of_server(fqn, name);
        let any = self.inner().sessions.get(session).is_some_and(|e| e.keys().any(|n| fits(n)));
        self.settle_where(session, |name| !any || fits(name)).await;
    }

    /// Wait until the session's server of entry `name` has settled.
    pub(crate) async fn settle_server(&self, session: &str, name: &str) {
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

    /// A session's connected servers by name, and a note for each one that is not connected.
    pub(crate) fn session_servers(&self, session: &str) -> Result<SessionServers, McpError> {
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
                    state.phrase()
                )),
            }
        }
        Ok((servers, notes))
    }

    /// A session's entries changed: its tool table must be built again.
    fn sessions_changed(&self) {
        self.sessions_generation.fetch_add(1, Ordering::SeqCst);
    }

    /// A server started, stopped, or changed its state or catalog: every tool table built
    /// on it must be built again.
    pub(super) fn servers_changed(&self) {
        self.servers_generation.fetch_add(1, Ordering::SeqCst);
    }

    /// See [`Generation`]: read before what a table is built from.
    pub(crate) fn generation(&self) -> Generation {
        Generation {
            servers: self.servers_generation.load(Ordering::SeqCst),
            sessions: self.sessions_generation.load(Ordering::SeqCst),
        }
    }

    /// A session's entries that run as a server, in name order (what its tool table is built
    /// from).
    pub(crate) fn running_entries(&self, session: &str) -> Result<Vec<RunningEntry>, McpError> {
        let inner = self.inner();
        let entries = inner.sessions.get(session).ok_or_else(|| {
            McpError::Unavailable(format!("session {session} has not started its MCP servers"))
        })?;
        Ok(entries
            .iter()
            .filter_map(|(name, e)| match &e.binding {
                Binding::Runs(identity) => Some(RunningEntry {
                    name: name.clone(),
                    identity: identity.clone(),
                    server: inner.servers.get(identity).cloned(),
                    include: e.include.clone(),
                    exclude: e.exclude.clone(),
                    timeout: e.timeout,
                }),
                Binding::NotRun { .. } => None,
            })
            .collect())
    }

    /// Stop every server and wait for their processes to be gone. Nothing starts afterwards.
    pub(crate) async fn shutdown(&self) {
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
