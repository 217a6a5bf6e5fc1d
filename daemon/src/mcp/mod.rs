//! The MCP client: one owner for every server the sessions need (DESIGN "Shared servers").
//!
//! - `spec` resolves a session's entry into a launch spec and its identity;
//! - [`Supervisor`] (`supervisor`) keeps one `server::Server` per identity,
//!   reference-counted by the sessions that need it (started on `mcp/start` or a call,
//!   released when the session's last connection goes, stopped after a linger);
//! - `status` answers `mcp/listServers` from memory;
//! - `request` makes one request to a server (a tool call, a prompt, a read), failing at once
//!   when the server dies meanwhile;
//! - `server` is a server's shared state, and `task` the state machine behind it (backoff,
//!   crash-loop, needs-auth), reporting up through `server::Observer`; `catalog` is what a
//!   server listed;
//! - `long_calls` follows the tool calls a server turns into tasks;
//! - `asked` answers what servers ask of their client (elicitation, sampling, roots) for the
//!   session whose call caused it, and `roots` is what a session's roots are;
//! - `connect`, `child`, `stdio` and `sse` are the transports, and `era` finds which protocol
//!   era a stdio server speaks however long it takes to answer; `orphans` cleans up after a
//!   daemon that was killed; `log` keeps each server's stderr and events.
//!
//! What a session sees of the servers (names, filters, the tool table) is `crate::catalog`'s;
//! how a call goes through policy and hooks is [`crate::calls`]'s.

pub(crate) mod asked;
pub(crate) mod authed;
pub(crate) mod catalog;
pub(crate) mod child;
pub(crate) mod connect;
pub(crate) mod era;
pub(crate) mod error;
pub(crate) mod failure;
pub(crate) mod idle;
mod listing;
pub(crate) mod log;
pub(crate) mod long_calls;
pub(crate) mod marked;
pub(crate) mod messages;
pub(crate) mod order;
pub(crate) mod orphans;
pub(crate) mod pinned;
pub(crate) mod request;
pub(crate) mod roots;
pub(crate) mod server;
mod shape;
pub(crate) mod spec;
pub(crate) mod sse;
pub(crate) mod status;
pub(crate) mod stdio;
pub(crate) mod supervisor;
pub(crate) mod task;
pub(crate) mod usage;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use geminid_protocol::config::Scope;
use geminid_protocol::mcp::{ServerState, Transport as Wire};

use self::server::Server;
use self::spec::LaunchSpec;
use crate::config::Effective;
use crate::config::env::Env;

pub(crate) use error::McpError;
pub(crate) use idle::{Budget, budget_arg, parse_budget};
pub(crate) use supervisor::Supervisor;

/// Where a request a 2026-07-28 server made as an input request carries the server's key for
/// it on its way to an ask (`_meta`; the ask keeps it as `detail.inputKey`).
pub(crate) const INPUT_KEY: &str = "dev.geminid/inputKey";

/// How long a server keeps running after the last session that needed it let go: a working
/// day's gaps (lunch, meetings, an afternoon on something else), so the next Gemini CLI of the
/// day finds its servers running; not overnight. An idle server costs memory, not CPU (a
/// ping every 30 s); its start costs each new session seconds (see README, "Kept warm").
pub(crate) const DEFAULT_LINGER: Duration = Duration::from_secs(8 * 3600);
/// The least the idle-memory budget is by default: an ordinary set-up's six to eight Node or
/// Python servers (55-160 MiB each) fit; 512 MiB did not, and they were stopped seconds after
/// use and started again (2-3 s) by the next command.
pub(crate) const IDLE_MEMORY_FLOOR: u64 = 2 << 30;
/// The share of the machine's memory the idle-memory budget is by default (above the floor).
pub(crate) const IDLE_MEMORY_SHARE: u64 = 8;
/// A server idle for less than this is never stopped for the idle-memory budget: `gemctl`
/// lets go of its servers after each command, so without it use-then-use-again thrashed.
pub(crate) const DEFAULT_BUDGET_MIN_IDLE: Duration = Duration::from_secs(5 * 60);
/// First delay before restarting a failed server; doubles with each failure in a row.
pub(crate) const DEFAULT_BACKOFF_INITIAL: Duration = Duration::from_secs(1);
/// Longest delay between restarts.
pub(crate) const DEFAULT_BACKOFF_MAX: Duration = Duration::from_secs(60);
/// Failures in a row before a server is parked in `crash-loop`.
pub(crate) const DEFAULT_RESTART_BUDGET: u32 = 5;
/// A server connected this long has its failure count reset when it next fails.
pub(crate) const DEFAULT_STABLE_AFTER: Duration = Duration::from_secs(60);
/// Between SIGTERM and SIGKILL.
pub(crate) const DEFAULT_STOP_GRACE: Duration = Duration::from_secs(3);
/// Start-up (spawn or connect, and the MCP handshake) for servers without `timeout`.
pub(crate) const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
/// How often a connected server is pinged (see `server::pinger`).
pub(crate) const DEFAULT_PING_EVERY: Duration = Duration::from_secs(30);
/// Each request to a server without `timeout` (Gemini CLI's default, 10 minutes).
pub(crate) const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(600);

/// Supervision settings (daemon flags).
#[derive(Debug, Clone, Copy)]
pub struct McpOptions {
    /// How long a server keeps running after no session needs it (`DEFAULT_LINGER`).
    pub linger: Duration,
    /// Resident memory idle servers may hold together (`idle::default_budget`); `None`: no
    /// bound.
    pub idle_memory: Option<u64>,
    /// How long a server is idle before the budget may stop it (`DEFAULT_BUDGET_MIN_IDLE`).
    pub budget_min_idle: Duration,
    /// First delay before restarting a failed server (`DEFAULT_BACKOFF_INITIAL`).
    pub backoff_initial: Duration,
    /// Longest delay between restarts (`DEFAULT_BACKOFF_MAX`).
    pub backoff_max: Duration,
    /// Failures in a row before a server is parked (`DEFAULT_RESTART_BUDGET`).
    pub restart_budget: u32,
    /// Connected this long, a server's failures count afresh (`DEFAULT_STABLE_AFTER`).
    pub stable_after: Duration,
    /// Between SIGTERM and SIGKILL (`DEFAULT_STOP_GRACE`).
    pub stop_grace: Duration,
    /// Start-up limit for servers without `timeout` (`DEFAULT_STARTUP_TIMEOUT`).
    pub startup_timeout: Duration,
    /// How often a connected server is pinged (`DEFAULT_PING_EVERY`); zero turns pings off.
    pub ping_every: Duration,
    /// How long a sign-in waits for the browser (`crate::auth::flow::CALLBACK_TIMEOUT`).
    pub oauth_timeout: Duration,
}

impl Default for McpOptions {
    fn default() -> Self {
        Self {
            linger: DEFAULT_LINGER,
            idle_memory: Some(IDLE_MEMORY_FLOOR),
            budget_min_idle: DEFAULT_BUDGET_MIN_IDLE,
            backoff_initial: DEFAULT_BACKOFF_INITIAL,
            backoff_max: DEFAULT_BACKOFF_MAX,
            restart_budget: DEFAULT_RESTART_BUDGET,
            stable_after: DEFAULT_STABLE_AFTER,
            stop_grace: DEFAULT_STOP_GRACE,
            startup_timeout: DEFAULT_STARTUP_TIMEOUT,
            ping_every: DEFAULT_PING_EVERY,
            oauth_timeout: crate::auth::flow::CALLBACK_TIMEOUT,
        }
    }
}

impl McpOptions {
    /// The delay after the `failures`-th failure in a row (1-based).
    pub(crate) fn backoff(&self, failures: u32) -> Duration {
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
    /// The identity of its launch spec (what `binding` runs as, unless the server asks for
    /// roots: see `roots`); empty when it does not run.
    base: String,
    /// The session's roots (see `roots::of`).
    roots: roots::Roots,
    include: Option<Vec<String>>,
    exclude: Option<Vec<String>>,
    /// This session's `timeout` for requests to the server (its calls, prompts, reads).
    timeout: Duration,
    /// Its `keepWarm`.
    keep: geminid_protocol::mcp::KeepWarm,
    /// Its pinning (see `Server::pinning`).
    pinning: geminid_protocol::pins::PinMode,
}

#[derive(Debug, Default)]
struct Inner {
    /// Running servers by identity.
    servers: HashMap<String, Arc<Server>>,
    /// Sessions that need their servers, and what each of their entries runs as.
    sessions: HashMap<String, BTreeMap<String, Entry>>,
    /// Set once shutdown began: nothing new starts.
    closed: bool,
    /// Running servers no session uses, kept warm.
    idle: idle::IdleSet,
    /// Servers stopped lately, newest first (at most [`RETIRED_KEPT`], one per identity): their
    /// last run's log stays readable and `mcp/restart` starts them again.
    retired: VecDeque<Retired>,
    /// Spec identities whose servers asked for roots (kept in the store): shared only between
    /// sessions with equal roots.
    asks_roots: std::collections::HashSet<String>,
    /// The roots each such running server was given.
    given_roots: HashMap<String, roots::Roots>,
    /// The roots (and spec identity) of the session each running server was started for: what
    /// a server asking for roots while no session uses it (lingering after a command that
    /// started it) is given.
    started_for: HashMap<String, (roots::Roots, String)>,
    /// Tasks the store had open at start, followed again when their server connects.
    resume: Vec<crate::store::tasks::TaskRecord>,
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

    /// The server the session's entry `name` is bound to: running, or stopped lately (for its
    /// log, or to start again); why not otherwise.
    fn bound(&self, name: &str, binding: &Binding) -> Result<Arc<Server>, McpError> {
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

/// A session's connected servers by name, and notes on the ones that are not connected.
pub(crate) type SessionServers = (Vec<(String, Arc<Server>)>, Vec<String>);

/// A session's view of its configuration, as the supervisor needs it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SessionView<'a> {
    /// Its id.
    pub id: &'a str,
    /// Its effective configuration.
    pub config: &'a Effective,
    /// The environment its servers expand against and inherit.
    pub env: &'a Env,
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

/// The call behind something a server sent: its progress notifications and its requests
/// (elicitation, sampling, roots) belong to the session whose call caused them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Caller {
    /// The session that called.
    pub session: String,
    /// The caller's call id.
    pub call_id: Option<String>,
    /// The tool's fully qualified name.
    pub name: String,
}

/// Whose call a server's request belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Whose {
    /// This call's (by the stream it came on, or as the one session with calls in flight).
    One(Caller),
    /// No call of any session is in flight on that server.
    Nobody,
    /// The transport cannot say which call caused it, and these sessions have calls in
    /// flight on it.
    Several(Vec<String>),
}

/// What the supervisor needs from the sessions above it: where a server's progress goes, and
/// who answers what it asks (the call pipeline knows which calls are in flight, see
/// `calls::progress`, and the asks seat who can answer).
#[allow(
    deprecated,
    reason = "sampling and roots are SEP-2577-deprecated; servers of the eras before 2026-07-28 use them"
)]
pub(crate) trait Callers: Send + Sync + std::fmt::Debug {
    /// A progress notification arrived from the server of `identity`.
    fn progress(&self, identity: &str, params: &rmcp::model::ProgressNotificationParam);
    /// What a call of `session` declares to a server of the 2026-07-28 era in its own
    /// `_meta`: elicitation and sampling only while a client of the session answers them.
    fn capabilities(&self, session: &str) -> rmcp::model::ClientCapabilities;
    /// The call a request of `identity`'s server belongs to: the one that sent request
    /// `origin` when the transport says (streamable HTTP), else the only session with calls
    /// in flight there.
    fn whose(&self, identity: &str, origin: Option<&rmcp::model::RequestId>) -> Whose;
    /// The calls in flight on `identity`'s connection.
    fn in_flight(&self, identity: &str) -> Vec<Caller>;
    /// Ask the caller's clients to fill in a server's elicitation: the protocol's decline
    /// when none of them can, or nobody answers in time.
    fn elicit(
        &self,
        caller: Caller,
        server: String,
        params: rmcp::model::ElicitRequestParams,
    ) -> futures::future::BoxFuture<'static, rmcp::model::ElicitResult>;
    /// Ask the caller's clients for a sampling answer (geminid never calls a model itself):
    /// an error when none of them declared sampling, or nobody answers in time.
    fn sample(
        &self,
        caller: Caller,
        server: String,
        params: rmcp::model::CreateMessageRequestParams,
    ) -> futures::future::BoxFuture<
        'static,
        Result<rmcp::model::CreateMessageResult, rmcp::ErrorData>,
    >;
}

#[cfg(test)]
mod tests {
    use super::*;

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
