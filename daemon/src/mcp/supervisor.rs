//! The supervisor: the owner of every MCP server process and connection, and of the registry
//! of servers ([`Registry`]: one [`Server`] per identity, shared by the sessions that need
//! it). What it answers itself is what the registry says (which server a name means, a
//! session's servers, the generations); each concern borrows it as a view of its own:
//! [`lifecycle`](Supervisor::lifecycle) (start, share, release, restart, settle, shut down),
//! [`idle`](Supervisor::idle) (kept warm, the memory budget, `mcp/stop`),
//! [`status`](Supervisor::status) (`mcp/listServers`, state events),
//! [`requests`](Supervisor::requests) (one request to a server),
//! [`long_calls`](Supervisor::long_calls) (calls that became tasks),
//! [`pinning`](Supervisor::pinning) (review, accept, reject) and `asked` (what servers ask of
//! their client). What server tasks report comes in through [`Observer`], in `observer`.

use std::sync::{Arc, Weak};
use std::time::Duration;

use geminid_protocol::mcp::ServerState;

use super::callers::Callers;
use super::entries::Binding;
use super::error::McpError;
use super::messages::{KEPT, ServerMessage};
use super::options::McpOptions;
use super::orphans;
use super::registry::{Generation, Inner, Registry};
use super::roots::ROOTS_SET;
use super::server::{Observer, Server};
use crate::events::EventBus;
use crate::store::Store;

/// A session's connected servers by name, and notes on the ones that are not connected.
pub(crate) type SessionServers = (Vec<(String, Arc<Server>)>, Vec<String>);

/// One of a session's entries that runs as a server, as the catalog reads it.
#[derive(Debug, Clone)]
pub(crate) struct RunningEntry {
    /// The entry's name in the session's settings.
    pub name: String,
    /// The identity it runs as.
    pub identity: String,
    /// The server, when it is running.
    pub server: Option<Arc<Server>>,
    /// `includeTools`.
    pub include: Option<Vec<String>>,
    /// `excludeTools`.
    pub exclude: Option<Vec<String>>,
    /// This session's `timeout` for requests to it.
    pub timeout: Duration,
}

/// Owns every MCP server process and connection.
#[derive(Debug)]
pub(crate) struct Supervisor {
    pub(super) opts: McpOptions,
    pub(super) events: Arc<EventBus>,
    store: Store,
    /// The servers, the sessions that use them, and the generations.
    pub(super) registry: Registry,
    pub(super) me: Weak<Supervisor>,
    /// Where servers' progress notifications go, and who answers their requests.
    pub(super) callers: Arc<dyn Callers>,
    /// The owner of OAuth tokens, for remote servers' connections.
    pub(super) auth: Arc<crate::auth::Auth>,
    /// Closed while children of a killed daemon are being stopped: no server starts before
    /// they are gone (they may hold its files or ports), but everything else answers.
    pub(super) start_gate: tokio::sync::watch::Sender<orphans::Held>,
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
            asks_roots: store.marked(ROOTS_SET),
            resume: store.open_tasks(),
            ..Inner::default()
        };
        Arc::new_cyclic(|me| Self {
            opts,
            events,
            store,
            registry: Registry::new(inner),
            me: me.clone(),
            callers,
            auth,
            start_gate: tokio::sync::watch::Sender::new(orphans::Held::default()),
            messages: tokio::sync::broadcast::channel(KEPT).0,
            pins,
        })
    }

    /// What its server tasks report to: itself, through [`Observer`].
    pub(super) fn observer(&self) -> Weak<dyn Observer> {
        self.me.clone()
    }

    /// The database (for child pid records).
    pub(crate) fn store(&self) -> &Store {
        &self.store
    }

    /// The running server an entry name means: the session's, or (without a session) the one
    /// running server of that name.
    pub(crate) fn find(&self, session: Option<&str>, name: &str) -> Result<Arc<Server>, McpError> {
        let inner = self.registry.lock();
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

    /// How long `session` waits for an answer from `server`: the `timeout` of its entry that
    /// runs as that server (sessions sharing a server may set different ones), else the
    /// server's own.
    pub(crate) fn timeout_for(&self, session: &str, server: &Server) -> Duration {
        let inner = self.registry.lock();
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

    /// A session's connected servers by name, and a note for each one that is not connected.
    pub(crate) fn session_servers(&self, session: &str) -> Result<SessionServers, McpError> {
        let inner = self.registry.lock();
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

    /// A session's entries that run as a server, in name order (what its tool table is built
    /// from).
    pub(crate) fn running_entries(&self, session: &str) -> Result<Vec<RunningEntry>, McpError> {
        let inner = self.registry.lock();
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

    /// Whether a session currently needs its servers.
    pub(crate) fn is_active(&self, session: &str) -> bool {
        self.registry.lock().sessions.contains_key(session)
    }

    /// See [`Generation`]: read before what a table is built from.
    pub(crate) fn generation(&self) -> Generation {
        self.registry.generation()
    }

    /// Whether `server` runs now (not stopped lately: see [`Supervisor::find`]).
    pub(crate) fn runs(&self, server: &Arc<Server>) -> bool {
        self.registry.lock().servers.get(&server.identity).is_some_and(|s| Arc::ptr_eq(s, server))
    }

    /// Servers' log messages from now on.
    pub(crate) fn messages(&self) -> tokio::sync::broadcast::Receiver<Arc<ServerMessage>> {
        self.messages.subscribe()
    }
}
