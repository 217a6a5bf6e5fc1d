//! One shared server (one identity): its shared state, which its task (`task.rs`) changes as
//! it goes through the states of its life:
//!
//! ```text
//! held ─→ connecting ──ok──→ listing ─→ ready ──died──→ backoff ──delay──→ connecting
//!           │  ▲                          │                │
//!           │  └──────── restart ─────────┘                └ budget spent → crash-loop
//!           ├──401──→ needs-auth (until restart)                 (until restart or a
//!           └──failed──→ backoff                                 configuration change)
//! every state ──stop──→ stopped
//! ```
//!
//! Clients see `connecting` for held, connecting and listing, `connected` for ready and
//! `disconnected` for backoff; a server in backoff after a lost connection is `restarting`
//! (not settled: a listing waits for it).

use parking_lot::Mutex;
use std::collections::{BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use geminid_protocol::config::Scope;
use geminid_protocol::mcp::{ServerState, Transport as Wire};
use geminid_protocol::pins::DefinitionKind;
use rmcp::RoleClient;
use rmcp::service::Peer;
use tokio::sync::watch;

use super::catalog::Catalog;
use super::log::ServerLog;
use super::mailbox::{Cmd, Commands, Mailbox};
use super::orphans::Held;
use super::spec::{LaunchSpec, Network};
use crate::pins::Verdict;
use crate::store::Store;

/// What a server task tells, and asks of, whoever supervises it (the `Supervisor`): the
/// task knows this trait, not the supervisor.
#[allow(
    deprecated,
    reason = "sampling and roots are SEP-2577-deprecated; servers of the eras before 2026-07-28 use them"
)]
pub(crate) trait Observer: Send + Sync {
    /// Its state, pid or restart count changed; it was `previous`.
    fn state_changed(&self, server: &Arc<Server>, previous: ServerState);
    /// Its catalog changed (a `list_changed` refresh).
    fn catalog_changed(&self, server: &Arc<Server>);
    /// A progress notification arrived from the server of `identity`.
    fn progress(&self, identity: &str, params: &rmcp::model::ProgressNotificationParam);
    /// The server of `identity` said a resource it was subscribed to changed.
    fn resource_updated(&self, identity: &str, uri: &str);
    /// The server of `identity` sent a log message (`notifications/message`).
    fn message(&self, _identity: &str, _params: &rmcp::model::LoggingMessageNotificationParam) {}
    /// The server of `identity` asks its client to fill in a form or visit a URL, on the
    /// stream of request `origin` when the transport says (see `connect::origin`).
    fn elicit(
        &self,
        identity: &str,
        origin: Option<rmcp::model::RequestId>,
        params: rmcp::model::ElicitRequestParams,
    ) -> futures::future::BoxFuture<'static, rmcp::model::ElicitResult>;
    /// The server of `identity` asks for a model's answer.
    fn sample(
        &self,
        identity: &str,
        origin: Option<rmcp::model::RequestId>,
        params: rmcp::model::CreateMessageRequestParams,
    ) -> futures::future::BoxFuture<
        'static,
        Result<rmcp::model::CreateMessageResult, rmcp::ErrorData>,
    >;
    /// The server of `identity` asks for its client's roots.
    fn roots(
        &self,
        identity: &str,
        origin: Option<rmcp::model::RequestId>,
    ) -> Result<rmcp::model::ListRootsResult, rmcp::ErrorData>;
    /// Where child pids are recorded.
    fn store(&self) -> &Store;
    /// The owner of OAuth tokens.
    fn auth(&self) -> Arc<crate::auth::Auth>;
    /// What may not start yet (orphans of a killed daemon being stopped).
    fn start_gate(&self) -> watch::Receiver<Held>;
    /// The keeper of tool-definition pins.
    fn pins(&self) -> Arc<crate::pins::Pins>;
    /// What of the server differs from its pins changed; `fresh` is what differs newly.
    fn pins_changed(&self, server: &Arc<Server>, fresh: &[geminid_protocol::pins::HeldDefinition]);
}

/// A server's pins as of its last listing.
#[derive(Debug, Default)]
pub(crate) struct PinState {
    /// The last comparison.
    pub verdict: Option<Arc<Verdict>>,
    /// What it listed, when something of it is held (its catalog is then the rest).
    pub listed: Option<Arc<Catalog>>,
    /// Its pins were made by this daemon run (trust on first use).
    pub first_use: bool,
    /// What its last reviews (`mcp/review`) showed, by their digest, the newest last.
    pub reviews: VecDeque<(String, BTreeSet<Shown>)>,
    /// Its artifact pin as last checked (`artifact.rs`).
    pub artifact: Option<geminid_protocol::pins::ArtifactStatus>,
    /// What it resolved to when that differed from the record, with what `stat` said of
    /// the files hashed: what `mcp/accept` records.
    pub artifact_found:
        Option<(geminid_protocol::pins::Artifact, std::collections::BTreeMap<String, String>)>,
    /// The newest release `mcp/update` found (with its files' `stat`), until `mcp/accept`
    /// takes it; a restart keeps it.
    pub artifact_offer:
        Option<(geminid_protocol::pins::Artifact, std::collections::BTreeMap<String, String>)>,
}

/// One definition as a review showed it: its kind, name and the digest of its listed form.
pub(crate) type Shown = (DefinitionKind, String, String);

/// A server's runtime state.
#[derive(Debug, Clone)]
pub(crate) struct Snapshot {
    /// Its state.
    pub state: ServerState,
    /// The child's pid.
    pub pid: Option<u32>,
    /// When it connected.
    pub connected_at: Option<Instant>,
    /// Restarts after the first start.
    pub restarts: u32,
    /// The last failure.
    pub last_error: Option<String>,
    /// The transport in use (or to be tried first).
    pub transport: Wire,
    /// Finished connection attempts.
    pub attempts: u64,
    /// Since when it has not answered a ping (while connected; see `pinger`).
    pub unresponsive_since: Option<Instant>,
    /// It was connected, its connection ended, and its task is bringing it back by itself
    /// (through its backoff and the attempts after it), until it connects again, parks or
    /// stops: not settled, so a listing meanwhile waits for it as for a start.
    pub restarting: bool,
}

impl Snapshot {
    /// Whether the first attempt since the last (re)start has finished, and it is not on its
    /// way back from a lost connection (`restarting`).
    pub(crate) fn settled(&self) -> bool {
        self.attempts > 0 && self.state != ServerState::Connecting && !self.restarting
    }
}

/// One server process or connection, shared by every session whose spec has its identity.
#[derive(Debug)]
pub(crate) struct Server {
    /// The hash of its launch spec.
    pub identity: String,
    /// The name of the session entry that started it.
    pub name: String,
    /// That entry's scope.
    pub scope: Scope,
    /// What it runs.
    pub spec: LaunchSpec,
    /// What is shown of it: `command args` or the URL as written, user information redacted.
    pub target: String,
    /// The handshake must finish within this.
    pub startup_timeout: Duration,
    /// Its own requests (discovering its catalog) must be answered within this: the
    /// `timeout` of the entry that started it. Sessions' requests use their own
    /// (`Supervisor::timeout_for`).
    pub request_timeout: Duration,
    /// Its log.
    pub log: Arc<ServerLog>,
    /// What its tool-definition pins are kept under, and what it runs in words (see
    /// `crate::pins::canon::pin_key`).
    pub pin_key: (String, String),
    /// Its pinning: its entry's `pinning`, else the daemon's; `enforce` is `warn` for an
    /// entry with `trust: true`.
    pub pinning: geminid_protocol::pins::PinMode,
    /// Its artifact pinning: its entry's `artifactPinning`, else the daemon's; `enforce` is
    /// `warn` for an entry with `trust: true`.
    pub artifact_pinning: geminid_protocol::pins::PinMode,
    /// The tool calls sent to it.
    pub(crate) calls: super::usage::Calls,
    pub(super) pins: Mutex<PinState>,
    pub(super) status: watch::Sender<Snapshot>,
    peer: Mutex<Option<Peer<RoleClient>>>,
    catalog: Mutex<Option<Arc<Catalog>>>,
    cmds: watch::Sender<Mailbox>,
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// Its start under way as a span (`started.rs`).
    starts: super::started::Starts,
}

/// The transport listed for a spec before it connects.
pub(crate) fn planned_transport(spec: &LaunchSpec) -> Wire {
    match spec {
        LaunchSpec::Stdio { .. } => Wire::Stdio,
        LaunchSpec::Network { kind: Network::Sse, .. } => Wire::Sse,
        LaunchSpec::Network { .. } => Wire::Http,
    }
}

/// What it was started with.
#[derive(Debug)]
pub(crate) struct NewServer {
    /// See [`Server::identity`].
    pub identity: String,
    /// See [`Server::name`].
    pub name: String,
    /// See [`Server::scope`].
    pub scope: Scope,
    /// See [`Server::spec`].
    pub spec: LaunchSpec,
    /// See [`Server::target`].
    pub target: String,
    /// See [`Server::startup_timeout`].
    pub startup_timeout: Duration,
    /// See [`Server::request_timeout`].
    pub request_timeout: Duration,
    /// See [`Server::pinning`].
    pub pinning: geminid_protocol::pins::PinMode,
    /// See [`Server::artifact_pinning`].
    pub artifact_pinning: geminid_protocol::pins::PinMode,
    /// The log of its last run, to go on with (a stopped server started again), so that its
    /// followers and readers see one log.
    pub log: Option<Arc<ServerLog>>,
}

impl NewServer {
    /// A server run as `server` is (its spec, target and limits), under `identity` and `name`,
    /// going on with `log` if given.
    pub(super) fn like(
        server: &Server,
        identity: String,
        name: String,
        log: Option<Arc<ServerLog>>,
    ) -> Self {
        Self {
            identity,
            name,
            scope: server.scope,
            spec: server.spec.clone(),
            target: server.target.clone(),
            startup_timeout: server.startup_timeout,
            request_timeout: server.request_timeout,
            pinning: server.pinning,
            artifact_pinning: server.artifact_pinning,
            log,
        }
    }
}

impl Server {
    /// Create it, with the receiving end of its mailbox for its task (`task::start`).
    pub(super) fn create(new: NewServer) -> (Arc<Self>, Commands) {
        let (cmds, rx) = watch::channel(Mailbox::default());
        let rx = Commands::new(rx);
        let snapshot = Snapshot {
            state: ServerState::Connecting,
            pid: None,
            connected_at: None,
            restarts: 0,
            last_error: None,
            transport: planned_transport(&new.spec),
            attempts: 0,
            unresponsive_since: None,
            restarting: false,
        };
        let pin_key = crate::pins::canon::pin_key(&new.name, new.spec.pin_source());
        let server = Arc::new(Self {
            identity: new.identity,
            pin_key,
            pinning: new.pinning,
            artifact_pinning: new.artifact_pinning,
            calls: super::usage::Calls::default(),
            pins: Mutex::default(),
            name: new.name,
            scope: new.scope,
            spec: new.spec,
            target: new.target,
            startup_timeout: new.startup_timeout,
            request_timeout: new.request_timeout,
            log: new.log.unwrap_or_default(),
            status: watch::Sender::new(snapshot),
            peer: Mutex::default(),
            catalog: Mutex::default(),
            cmds,
            task: Mutex::default(),
            starts: super::started::Starts::default(),
        });
        (server, rx)
    }

    /// An attempt to start it begins, the `attempt`th in a row (its span, `started.rs`).
    pub(super) fn start_began(&self, attempt: u32) {
        let transport = match self.spec {
            LaunchSpec::Stdio { .. } => "pipe",
            LaunchSpec::Network { .. } => "tcp",
        };
        self.starts.begin(&self.name, transport, attempt);
    }

    /// The attempt to start it under way, if any, ended: connected (`None`) or failed with
    /// `error` (`error.type`).
    pub(super) fn start_ended(&self, error: Option<&'static str>) {
        self.starts.ended(error);
    }

    /// It is parked (needing a sign-in, held by its artifact pin, in crash-loop): the start
    /// under way, if any, failed so.
    pub(super) fn start_parked(&self) {
        let state = self.status.borrow().state;
        self.starts.ended(Some(super::started::parked_why(state)));
    }

    /// Keep its task's handle, for [`Server::stop`] to wait on.
    /// A connection to this server as an MCP client session (`mcp.client.session.duration`, when
    /// telemetry is on): the server's name, `network.transport`, the revision negotiated.
    pub(super) fn session_life(
        &self,
        peer: &rmcp::service::Peer<rmcp::RoleClient>,
    ) -> Option<crate::telemetry::Session> {
        use opentelemetry::KeyValue;
        crate::telemetry::Session::begin(crate::telemetry::Side::Client, || {
            let transport = match self.spec {
                super::spec::LaunchSpec::Stdio { .. } => "pipe",
                super::spec::LaunchSpec::Network { .. } => "tcp",
            };
            let mut attrs = vec![
                KeyValue::new("mcp.server.name", self.name.clone()),
                KeyValue::new("network.transport", transport),
            ];
            if let Some(info) = peer.peer_info() {
                attrs
                    .push(KeyValue::new("mcp.protocol.version", info.protocol_version.to_string()));
            }
            attrs
        })
    }

    pub(super) fn attach(&self, task: tokio::task::JoinHandle<()>) {
        *self.task.lock() = Some(task);
    }

    /// Its state now.
    pub(crate) fn snapshot(&self) -> Snapshot {
        self.status.borrow().clone()
    }

    /// Watch its state.
    pub(crate) fn watch(&self) -> watch::Receiver<Snapshot> {
        self.status.subscribe()
    }

    /// The connection, while connected.
    pub(crate) fn peer(&self) -> Option<Peer<RoleClient>> {
        self.peer.lock().clone()
    }

    /// Tell its task.
    pub(crate) fn send(&self, cmd: Cmd) {
        self.cmds.send_modify(|m| m.post(cmd));
    }

    /// Stop it and wait until its process is gone.
    pub(crate) async fn stop(&self) {
        self.send(Cmd::Stop);
        let task = self.task.lock().take();
        if let Some(task) = task {
            let _ = task.await;
        }
    }

    /// Its catalog as of its last discovery (empty before it first connected).
    pub(crate) fn catalog(&self) -> Arc<Catalog> {
        self.catalog.lock().clone().unwrap_or_default()
    }

    /// (tools, prompts, resources) of its last discovery; `None` before the first.
    pub(crate) fn counts(&self) -> Option<(u32, u32, u32)> {
        self.catalog.lock().as_ref().map(|c| c.counts())
    }

    pub(super) fn set_catalog(&self, catalog: Arc<Catalog>) {
        *self.catalog.lock() = Some(catalog);
    }

    pub(super) fn set_peer(&self, peer: Option<Peer<RoleClient>>) {
        *self.peer.lock() = peer;
    }
}
