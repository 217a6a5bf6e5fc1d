//! One shared server (one identity): its supervisor task and state machine.
//!
//! ```text
//!            ┌──────── restart ────────┐
//!            ▼                         │
//! start → connecting ──ok──→ connected ──died──→ disconnected ──backoff──→ connecting
//!            │  └──401──→ needs-auth (until restart)            │
//!            └──failed──→ disconnected ── budget spent ──→ crash-loop (until restart
//!                                                           or a configuration change)
//! ```

use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use geminid_protocol::config::Scope;
use geminid_protocol::mcp::{ServerState, Transport as Wire};
use rmcp::RoleClient;
use rmcp::service::Peer;
use tokio::sync::{mpsc, watch};

use super::McpOptions;
use super::catalog::{Catalog, discover};
use super::connect::{Attempt, ConnectError, Notice, Running, connect};
use super::log::ServerLog;
use super::orphans::Held;
use super::spec::{LaunchSpec, Network};
use crate::store::Store;

/// What the task is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cmd {
    /// Stop and start again, forgetting past failures.
    Restart,
    /// Stop for good.
    Stop,
}

/// What a server task tells, and asks of, whoever supervises it (the `Supervisor`): the
/// task knows this trait, not the supervisor.
pub trait Observer: Send + Sync {
    /// Its state, pid or restart count changed; it was `previous`.
    fn state_changed(&self, server: &Arc<Server>, previous: ServerState);
    /// Its catalog changed (a `list_changed` refresh).
    fn catalog_changed(&self, server: &Arc<Server>);
    /// A progress notification arrived from the server of `identity`.
    fn progress(&self, identity: &str, params: &rmcp::model::ProgressNotificationParam);
    /// Where child pids are recorded.
    fn store(&self) -> &Store;
    /// What may not start yet (orphans of a killed daemon being stopped).
    fn start_gate(&self) -> watch::Receiver<Held>;
}

/// A server's runtime state.
#[derive(Debug, Clone)]
pub struct Snapshot {
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
    /// Since when it has not answered a ping (while connected; see [`pinger`]).
    pub unresponsive_since: Option<Instant>,
}

impl Snapshot {
    /// Whether the first attempt since the last (re)start has finished.
    pub fn settled(&self) -> bool {
        self.attempts > 0 && self.state != ServerState::Connecting
    }
}

/// One server process or connection, shared by every session whose spec has its identity.
#[derive(Debug)]
pub struct Server {
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
    status: watch::Sender<Snapshot>,
    peer: Mutex<Option<Peer<RoleClient>>>,
    catalog: Mutex<Option<Arc<Catalog>>>,
    cmds: mpsc::UnboundedSender<Cmd>,
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

/// The transport listed for a spec before it connects.
pub fn planned_transport(spec: &LaunchSpec) -> Wire {
    match spec {
        LaunchSpec::Stdio { .. } => Wire::Stdio,
        LaunchSpec::Network { kind: Network::Sse, .. } => Wire::Sse,
        LaunchSpec::Network { .. } => Wire::Http,
    }
}

/// What it was started with.
#[derive(Debug)]
pub struct NewServer {
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
}

impl Server {
    /// Create it and start its task.
    pub fn start(new: NewServer, sup: Weak<dyn Observer>, opts: McpOptions) -> Arc<Self> {
        let (cmds, rx) = mpsc::unbounded_channel();
        let snapshot = Snapshot {
            state: ServerState::Connecting,
            pid: None,
            connected_at: None,
            restarts: 0,
            last_error: None,
            transport: planned_transport(&new.spec),
            attempts: 0,
            unresponsive_since: None,
        };
        let server = Arc::new(Self {
            identity: new.identity,
            name: new.name,
            scope: new.scope,
            spec: new.spec,
            target: new.target,
            startup_timeout: new.startup_timeout,
            request_timeout: new.request_timeout,
            log: Arc::default(),
            status: watch::Sender::new(snapshot),
            peer: Mutex::default(),
            catalog: Mutex::default(),
            cmds,
            task: Mutex::default(),
        });
        let inner = tokio::spawn(run(server.clone(), sup, opts, rx));
        let watched = server.clone();
        // A bug in the task must not leave the server looking alive.
        let task = tokio::spawn(async move {
            if let Err(e) = inner.await
                && e.is_panic()
            {
                tracing::error!(server = %watched.name, "MCP server supervisor task panicked");
                watched.set_peer(None);
                watched.status.send_modify(|s| {
                    s.state = ServerState::Disconnected;
                    s.pid = None;
                    s.last_error = Some(format!(
                        "MCP server '{}': geminid's supervisor failed (a bug; see its log)",
                        watched.name
                    ));
                });
            }
        });
        *server.task.lock().unwrap_or_else(|e| e.into_inner()) = Some(task);
        server
    }

    /// Its state now.
    pub fn snapshot(&self) -> Snapshot {
        self.status.borrow().clone()
    }

    /// Watch its state.
    pub fn watch(&self) -> watch::Receiver<Snapshot> {
        self.status.subscribe()
    }

    /// The connection, while connected.
    pub fn peer(&self) -> Option<Peer<RoleClient>> {
        self.peer.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Tell its task.
    pub fn send(&self, cmd: Cmd) {
        let _ = self.cmds.send(cmd);
    }

    /// Stop it and wait until its process is gone.
    pub async fn stop(&self) {
        self.send(Cmd::Stop);
        let task = self.task.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(task) = task {
            let _ = task.await;
        }
    }

    /// Its catalog as of its last discovery (empty before it first connected).
    pub fn catalog(&self) -> Arc<Catalog> {
        self.catalog.lock().unwrap_or_else(|e| e.into_inner()).clone().unwrap_or_default()
    }

    /// (tools, prompts, resources) of its last discovery; `None` before the first.
    pub fn counts(&self) -> Option<(u32, u32, u32)> {
        self.catalog.lock().unwrap_or_else(|e| e.into_inner()).as_ref().map(|c| c.counts())
    }

    fn set_catalog(&self, catalog: Catalog) {
        *self.catalog.lock().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(catalog));
    }

    fn set_peer(&self, peer: Option<Peer<RoleClient>>) {
        *self.peer.lock().unwrap_or_else(|e| e.into_inner()) = peer;
    }
}

/// Changes the snapshot and, when the state or pid changed, announces it.
struct Reporter {
    server: Arc<Server>,
    sup: Weak<dyn Observer>,
}

impl Reporter {
    fn update(&self, f: impl FnOnce(&mut Snapshot)) {
        let mut previous = None;
        self.server.status.send_modify(|s| {
            let before = (s.state, s.pid, s.restarts);
            f(s);
            if before != (s.state, s.pid, s.restarts) {
                previous = Some(before.0);
            }
        });
        if let (Some(previous), Some(sup)) = (previous, self.sup.upgrade()) {
            sup.state_changed(&self.server, previous);
        }
    }

    fn log(&self, text: &str) {
        self.server.log.push("geminid", text);
    }
}

enum End {
    Died(String),
    Restart,
    Stop,
}

/// Wait for a command that ends a parked state; `true` means restart.
async fn parked(cmds: &mut mpsc::UnboundedReceiver<Cmd>) -> bool {
    matches!(cmds.recv().await, Some(Cmd::Restart))
}

async fn run(
    server: Arc<Server>,
    sup: Weak<dyn Observer>,
    opts: McpOptions,
    mut cmds: mpsc::UnboundedReceiver<Cmd>,
) {
    let r = Reporter { server: server.clone(), sup };
    let store = r.sup.upgrade().map(|s| s.store().clone());
    // Not before a killed daemon's child of this identity is gone (or a stop comes first).
    let gate = r.sup.upgrade().map(|s| s.start_gate());
    if let Some(mut gate) = gate
        && gate.borrow().holds(&server.identity)
    {
        r.log("waiting for its copy left by the previous daemon to be stopped");
        tokio::select! {
            _ = gate.wait_for(|held| !held.holds(&server.identity)) => {}
            cmd = cmds.recv() => if cmd != Some(Cmd::Restart) {
                r.update(|s| s.state = ServerState::Disconnected);
                return;
            },
        }
    }
    let mut failures: u32 = 0;
    // `restarts` counts the restarts after a failure; a start someone asked for (the first
    // one, `gemctl mcp restart`, a configuration change) is not one.
    let mut requested = true;
    'attempts: loop {
        r.update(|s| {
            if !requested {
                s.restarts += 1;
            }
            s.state = ServerState::Connecting;
            s.pid = None;
            s.connected_at = None;
        });
        requested = false;
        // One pending notice says all there is to say: a refresh is due.
        let (notices, mut notice_rx) = mpsc::channel(1);
        let attempt = Attempt {
            name: &server.name,
            identity: &server.identity,
            spec: &server.spec,
            shown: &server.target,
            timeout: server.startup_timeout,
            grace: opts.stop_grace,
            log: &server.log,
            store: store.as_ref(),
            sup: r.sup.clone(),
        };
        let result = tokio::select! {
            result = connect(attempt, notices) => result,
            cmd = cmds.recv() => {
                // The abandoned attempt's child (if any) is killed when it is dropped.
                if cmd == Some(Cmd::Restart) {
                    r.log("restart requested while starting");
                    failures = 0;
                    requested = true;
                    continue 'attempts;
                }
                break 'attempts;
            }
        };
        let error = match result {
            Ok(mut running) => {
                // Part of the start: each list is bounded by the start-up timeout, so a server
                // whose lists never answer is not `connecting` for the request timeout (10 min).
                let limit = server.startup_timeout.min(server.request_timeout);
                let mut catalog = discover(&server.name, &running.peer, limit).await;
                for problem in &mut catalog.problems {
                    *problem = super::spec::scrub(problem, &server.spec, &server.target);
                }
                for problem in &catalog.problems {
                    r.log(problem);
                }
                server.set_catalog(catalog.compiled().await);
                server.set_peer(Some(running.peer.clone()));
                let pid = running.child.as_ref().map(|c| c.pid);
                r.log(&format!(
                    "connected over {}{}",
                    running.transport.label(),
                    pid.map(|p| format!(" (pid {p})")).unwrap_or_default()
                ));
                let since = Instant::now();
                r.update(|s| {
                    s.state = ServerState::Connected;
                    s.pid = pid;
                    s.connected_at = Some(since);
                    s.last_error = None;
                    s.transport = running.transport;
                    s.attempts += 1;
                });
                let mut child = running.child.take();
                let pinging = (!opts.ping_every.is_zero()).then(|| {
                    let timeout = opts.ping_every.min(server.startup_timeout);
                    let r = Reporter { server: server.clone(), sup: r.sup.clone() };
                    tokio::spawn(pinger(r, running.peer.clone(), opts.ping_every, timeout))
                });
                let end = loop {
                    tokio::select! {
                        how = child_exit(&mut child) => break End::Died(how),
                        _ = &mut running.closed => {
                            let how = match child.as_mut() {
                                Some(c) => tokio::time::timeout(Duration::from_millis(300), c.wait())
                                    .await
                                    .unwrap_or_else(|_| "closed its connection".to_owned()),
                                None => "closed the connection".to_owned(),
                            };
                            break End::Died(how);
                        }
                        Some(Notice::ListChanged) = notice_rx.recv() => {
                            refresh(&r, &running, &mut notice_rx).await;
                        }
                        cmd = cmds.recv() => break match cmd {
                            Some(Cmd::Restart) => End::Restart,
                            _ => End::Stop,
                        },
                    }
                };
                if let Some(pinging) = pinging {
                    pinging.abort();
                }
                r.update(|s| s.unresponsive_since = None);
                server.set_peer(None);
                running.child = child;
                match end {
                    End::Stop => {
                        let how = shutdown(running, opts.stop_grace).await;
                        r.log(&format!("stopped ({how})"));
                        break 'attempts;
                    }
                    End::Restart => {
                        // Mark it first, so calls in flight fail at once.
                        r.update(|s| s.state = ServerState::Connecting);
                        let how = shutdown(running, opts.stop_grace).await;
                        r.log(&format!("restart requested: stopped ({how}), starting again"));
                        failures = 0;
                        requested = true;
                        continue 'attempts;
                    }
                    End::Died(how) => {
                        let msg = format!("MCP server '{}' {how}", server.name);
                        r.update(|s| {
                            s.state = ServerState::Disconnected;
                            s.last_error = Some(msg.clone());
                            s.pid = None;
                            s.connected_at = None;
                        });
                        let _ = shutdown(running, opts.stop_grace).await;
                        if since.elapsed() >= opts.stable_after {
                            failures = 0;
                        }
                        msg
                    }
                }
            }
            Err(ConnectError::NeedsAuth(msg)) => {
                let msg = format!("MCP server '{}': {msg}", server.name);
                r.log(&msg);
                r.update(|s| {
                    s.state = ServerState::NeedsAuth;
                    s.last_error = Some(msg);
                    s.attempts += 1;
                });
                if parked(&mut cmds).await {
                    failures = 0;
                    requested = true;
                    continue 'attempts;
                }
                break 'attempts;
            }
            Err(ConnectError::Failed(msg)) => {
                let msg = if msg.starts_with("MCP server '") {
                    msg
                } else {
                    format!("MCP server '{}': {msg}", server.name)
                };
                r.update(|s| s.attempts += 1);
                msg
            }
        };
        failures += 1;
        r.log(&error);
        if failures > opts.restart_budget {
            r.log(&format!(
                "failed {failures} times in a row: parked in crash-loop until its configuration \
                 changes or `gemctl mcp restart {}`",
                server.name
            ));
            r.update(|s| {
                s.state = ServerState::CrashLoop;
                s.last_error = Some(error);
                s.pid = None;
            });
            if parked(&mut cmds).await {
                failures = 0;
                requested = true;
                continue 'attempts;
            }
            break 'attempts;
        }
        let delay = opts.backoff(failures);
        r.log(&format!("next attempt in {}", humantime::format_duration(delay)));
        r.update(|s| {
            s.state = ServerState::Disconnected;
            s.last_error = Some(error);
            s.pid = None;
        });
        tokio::select! {
            () = tokio::time::sleep(delay) => {}
            cmd = cmds.recv() => {
                if cmd != Some(Cmd::Restart) {
                    break 'attempts;
                }
                failures = 0;
                requested = true;
            }
        }
    }
    server.set_peer(None);
    r.update(|s| {
        s.state = ServerState::Disconnected;
        s.pid = None;
        s.connected_at = None;
        s.last_error = None;
    });
}

/// Ping a connected server every `every`; one that does not answer within `timeout` is
/// marked unresponsive (shown in `mcp list`, said in its log) until it answers again. A
/// stopped process (SIGSTOP) or a wedged event loop stays connected otherwise.
async fn pinger(r: Reporter, peer: Peer<RoleClient>, every: Duration, timeout: Duration) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await; // the first tick is at once; the handshake just answered
    loop {
        tick.tick().await;
        let ping = rmcp::model::ClientRequest::PingRequest(rmcp::model::PingRequest {
            method: Default::default(),
            extensions: Default::default(),
        });
        let answered = match tokio::time::timeout(timeout, peer.send_request(ping)).await {
            Ok(Ok(_)) => Ok(()),
            // An error answer is an answer: the server is alive, it just does not ping.
            Ok(Err(rmcp::ServiceError::McpError(_))) => Ok(()),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err(format!("no answer within {}", humantime::format_duration(timeout))),
        };
        let was = r.server.snapshot().unresponsive_since;
        match (answered, was) {
            (Ok(()), Some(since)) => {
                r.log(&format!(
                    "answers pings again (after {})",
                    humantime::format_duration(Duration::from_secs(since.elapsed().as_secs()))
                ));
                r.update(|s| s.unresponsive_since = None);
            }
            (Err(why), None) => {
                r.log(&format!("unresponsive: a ping got {why}"));
                r.update(|s| s.unresponsive_since = Some(Instant::now()));
            }
            _ => {}
        }
    }
}

async fn child_exit(child: &mut Option<super::child::StdioChild>) -> String {
    match child.as_mut() {
        Some(c) => c.wait().await,
        None => std::future::pending().await,
    }
}

/// Close the connection and stop the child's process group; returns how the child ended.
async fn shutdown(running: Running, grace: Duration) -> String {
    let Running { cancel, closed, child, .. } = running;
    cancel.cancel();
    // It may have finished (and been polled to completion) already.
    if !closed.is_finished() {
        let _ = tokio::time::timeout(grace, closed).await;
    }
    match child {
        Some(c) => c.stop(grace).await,
        None => "connection closed".to_owned(),
    }
}

/// A list changed: read the catalog again and swap it in. Notices that arrived before it
/// began are folded into it; one that arrives while it lists waits (the channel holds one:
/// a storm costs a refresh or two, and one event) and brings another, so no change is lost.
/// As Gemini CLI does, a refresh that finds the same names tries once more after 500 ms
/// (the server may announce before its list reflects the change).
async fn refresh(r: &Reporter, running: &Running, notices: &mut mpsc::Receiver<Notice>) {
    while notices.try_recv().is_ok() {}
    let server = &r.server;
    let old = server.catalog();
    let mut new = discover(&server.name, &running.peer, server.request_timeout).await;
    if new.same_names(&old) {
        tokio::time::sleep(Duration::from_millis(500)).await;
        new = discover(&server.name, &running.peer, server.request_timeout).await;
    }
    if new == *old {
        return;
    }
    for problem in new.problems.iter().filter(|p| !old.problems.contains(p)) {
        r.log(problem);
    }
    server.set_catalog(new.compiled().await);
    if let Some(sup) = r.sup.upgrade() {
        sup.catalog_changed(server);
    }
}
