//! The registry of servers: which run (one per identity), which sessions use each and as
//! what, which stopped lately, and the idle ones' bookkeeping, behind one lock; and the
//! generations a session's tool table is stamped with. The supervisor owns it; the concerns
//! that borrow the supervisor (starting, idle, status, requests, ...) read and change it.

use parking_lot::{Mutex, MutexGuard};
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use geminid_protocol::mcp::{KeepWarm, ServerStatus};

use super::entries::{Binding, Entry};
use super::error::McpError;
use super::roots::{self, Roots};
use super::server::Server;

/// The registry's state and its generations.
#[derive(Debug, Default)]
pub(super) struct Registry {
    inner: Mutex<Inner>,
    /// See [`Generation`].
    servers_generation: AtomicU64,
    sessions_generation: AtomicU64,
}

impl Registry {
    /// A registry holding `inner`.
    pub(super) fn new(inner: Inner) -> Self {
        Self { inner: Mutex::new(inner), ..Self::default() }
    }

    /// Its state, locked.
    pub(super) fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock()
    }

    /// A session's entries changed: its tool table must be built again.
    pub(super) fn sessions_changed(&self) {
        self.sessions_generation.fetch_add(1, Ordering::SeqCst);
    }

    /// A server started, stopped, or changed its state or catalog: every tool table built
    /// on it must be built again.
    pub(super) fn servers_changed(&self) {
        self.servers_generation.fetch_add(1, Ordering::SeqCst);
    }

    /// See [`Generation`]: read before what a table is built from.
    pub(super) fn generation(&self) -> Generation {
        Generation {
            servers: self.servers_generation.load(Ordering::SeqCst),
            sessions: self.sessions_generation.load(Ordering::SeqCst),
        }
    }
}

/// Where the supervisor is, as far as a session's tool table is concerned: a table built at
/// one generation is stale once either number moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Generation {
    /// Moves when a server starts, stops, changes state or lists a new catalog.
    pub servers: u64,
    /// Moves when a session's entries change (it synced or was released).
    pub sessions: u64,
}

/// The registry's state, behind its lock.
#[derive(Debug, Default)]
pub(super) struct Inner {
    /// Running servers by identity.
    pub(super) servers: HashMap<String, Arc<Server>>,
    /// Sessions that need their servers, and what each of their entries runs as.
    pub(super) sessions: HashMap<String, BTreeMap<String, Entry>>,
    /// Set once shutdown began: nothing new starts.
    pub(super) closed: bool,
    /// Running servers no session uses, kept warm.
    pub(super) idle: IdleSet,
    /// Servers stopped lately, newest first (at most [`RETIRED_KEPT`], one per identity): their
    /// last run's log stays readable and `mcp/restart` starts them again.
    pub(super) retired: VecDeque<Retired>,
    /// Spec identities whose servers asked for roots (kept in the store): shared only between
    /// sessions with equal roots.
    pub(super) asks_roots: HashSet<String>,
    /// The roots each such running server was given.
    pub(super) given_roots: HashMap<String, Roots>,
    /// The roots (and spec identity) of the session each running server was started for: what
    /// a server asking for roots while no session uses it (lingering after a command that
    /// started it) is given.
    pub(super) started_for: HashMap<String, (Roots, String)>,
    /// Tasks the store had open at start, followed again when their server connects.
    pub(super) resume: Vec<crate::store::tasks::TaskRecord>,
}

/// How many stopped servers are remembered.
const RETIRED_KEPT: usize = 32;

/// A server that was stopped, why, and when.
#[derive(Debug)]
pub(super) struct Retired {
    pub(super) server: Arc<Server>,
    pub(super) why: &'static str,
    pub(super) at: Instant,
}

impl Inner {
    /// Remember a server that is being stopped.
    pub(super) fn retire(&mut self, server: Arc<Server>, why: &'static str) {
        self.retired.retain(|r| r.server.identity != server.identity);
        self.retired.push_front(Retired { server, why, at: Instant::now() });
        self.retired.truncate(RETIRED_KEPT);
    }

    pub(super) fn retired(&self, identity: &str) -> Option<&Retired> {
        self.retired.iter().find(|r| r.server.identity == identity)
    }

    /// The server the session's entry `name` is bound to: running, or stopped lately (for its
    /// log, or to start again); why not otherwise.
    pub(super) fn bound(&self, name: &str, binding: &Binding) -> Result<Arc<Server>, McpError> {
        match binding {
            Binding::Runs(identity) => self
                .servers
                .get(identity)
                .or_else(|| self.retired(identity).map(|r| &r.server))
                .cloned()
                .ok_or_else(|| {
                    McpError::Unavailable(format!(
                        "MCP server '{name}' has not been started (`gemctl mcp start` starts \
                         this directory's servers)"
                    ))
                }),
            Binding::NotRun { state, reason, .. } => Err(McpError::Unavailable(format!(
                "MCP server '{name}' is {}: {reason}",
                state.phrase()
            ))),
        }
    }

    pub(super) fn users(&self, identity: &str) -> Vec<String> {
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

    /// What an entry of spec identity `base` runs as for a session with `roots`: `base`
    /// itself, unless its server is known to ask for roots and was given other roots (see
    /// `roots`).
    /// An entry of a session that runs no servers now, bound as a start would bind it: a
    /// server that asked for roots may run under its roots' identity (one started after a
    /// daemon restart does), which is the one to show.
    pub(super) fn planned(&self, mut entry: Entry) -> Entry {
        if let Binding::Runs(base) = &entry.binding {
            entry.binding = Binding::Runs(self.identity_for(base, &entry.roots));
        }
        entry
    }

    pub(super) fn identity_for(&self, base: &str, roots: &Roots) -> String {
        if !self.asks_roots.contains(base) {
            return base.to_owned();
        }
        match (self.servers.contains_key(base), self.given_roots.get(base)) {
            (true, Some(given)) if given == roots => base.to_owned(),
            _ => roots::split_identity(base, roots),
        }
    }
}

/// The idle servers' bookkeeping, inside the supervisor's lock.
#[derive(Debug, Default)]
pub(super) struct IdleSet {
    /// Identity → when its last session let go.
    pub(super) since: HashMap<String, Instant>,
    /// Identity → its entries' `keepWarm` (as of the last session that bound it).
    pub(super) keep: HashMap<String, KeepWarm>,
    /// Identity → resident bytes of its process group, at the last measure.
    pub(super) rss: HashMap<String, u64>,
    /// Wakes the sweeper; set once it runs.
    pub(super) wake: Option<Arc<tokio::sync::Notify>>,
}

impl IdleSet {
    /// A session binds the server: it is in use, with this `keepWarm`.
    pub(super) fn used(&mut self, identity: &str, keep: KeepWarm) {
        self.since.remove(identity);
        self.rss.remove(identity);
        self.keep.insert(identity.to_owned(), keep);
    }

    /// The server stopped (or was never started): nothing to keep of it.
    pub(super) fn forget(&mut self, identity: &str) {
        self.since.remove(identity);
        self.rss.remove(identity);
        self.keep.remove(identity);
    }

    /// What a status says of its idleness.
    pub(super) fn describe(&self, identity: &str, linger: Duration, status: &mut ServerStatus) {
        let keep = self.keep.get(identity).copied().unwrap_or_default();
        status.keep_warm = (keep != KeepWarm::Default).then_some(keep);
        // A server that is not running (its command missing, failed, crash-looping) is not
        // "idle, kept warm": its state and error say what it is.
        if !status.is_live() {
            return;
        }
        let Some(since) = self.since.get(identity) else { return };
        let idle = crate::clock::now().saturating_duration_since(*since);
        status.idle_secs = Some(idle.as_secs());
        status.stops_in_secs = match keep {
            KeepWarm::Always => None,
            KeepWarm::Never => Some(0),
            KeepWarm::Default => Some(linger.saturating_sub(idle).as_secs()),
        };
        status.rss_bytes = self.rss.get(identity).copied();
    }
}
