//! The task behind each [`Server`]: its life as a state machine, the diagram in
//! [`super::server`] draws. [`State`] names where it is (held back by a killed daemon's copy,
//! connecting, listing its first catalog, ready, in backoff, parked needing authentication or
//! in crash-loop, stopped); each state's function on [`Life`] does that state's work and
//! returns the next, so what happens in a state (a late first answer is `Connecting`'s, a
//! crash `Ready`'s, a retry `Backoff`'s) has one place. Also the pinger and catalog refreshes.

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use geminid_protocol::mcp::ServerState;
use rmcp::RoleClient;
use rmcp::service::Peer;
use tokio::sync::mpsc;

use super::catalog::discover;
use super::connect::{Attempt, Notice, Running, connect};
use super::error::ConnectError;
use super::mailbox::{Cmd, Commands};
use super::options::McpOptions;
use super::server::{NewServer, Observer, Server, Snapshot};
use crate::store::Store;

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

/// How a connection ended.
enum End {
    /// The process exited or the connection closed; how.
    Died(String),
    /// A restart was asked for.
    Restart,
    /// A stop was asked for, or the server was dropped.
    Stop,
}

/// Start a server: create it and spawn its task, in a `server` tracing span, watched so that
/// a bug in the task does not leave the server looking alive.
pub(super) fn start(new: NewServer, sup: Weak<dyn Observer>, opts: McpOptions) -> Arc<Server> {
    let (server, rx) = Server::create(new);
    // Everything the task logs names its server.
    let span =
        tracing::info_span!("server", server = %server.name, identity = &server.identity[..12]);
    let inner =
        tokio::spawn(tracing::Instrument::instrument(run(server.clone(), sup, opts, rx), span));
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
                s.restarting = false;
                s.last_error = Some(format!(
                    "MCP server '{}': geminid's supervisor failed (a bug; see its log)",
                    watched.name
                ));
            });
        }
    });
    server.attach(task);
    server
}

/// Where a server's task is in its life. Each state has one function, which does what the
/// state does and returns the next state; `run` only walks them.
enum State {
    /// Waiting for the copy of it a killed daemon left behind to be stopped.
    Held,
    /// Spawning or reaching it, and the MCP handshake (including the era probe's late first
    /// answer, `era.rs`). `asked`: someone asked for this start (the first one, `gemctl mcp
    /// restart`, a configuration change): not counted as a restart, and past failures are
    /// forgotten.
    Connecting { asked: bool },
    /// Connected: its first catalog is listed (part of the start).
    Listing(Connection),
    /// Connected and listed, since the instant: serving until the connection ends, a restart
    /// is asked for, or a stop.
    Ready(Connection, Instant),
    /// Waiting `delay` before the next attempt, after `error`.
    Backoff { error: String, delay: Duration },
    /// Parked until a restart: it wants credentials.
    NeedsAuth(String),
    /// Parked until a restart: it failed more times in a row than the budget allows.
    CrashLoop(String),
    /// Parked until a restart: what it runs differs from what was recorded (`artifact.rs`).
    ArtifactHeld(String),
    /// Done: stopped, or its server was dropped.
    Stopped,
}

/// A live connection and where its list-changed notices arrive.
struct Connection {
    running: Running,
    notices: mpsc::Receiver<Notice>,
}

/// A server's task: its server and what it reports to, its commands, and what it counts
/// across states.
struct Life {
    r: Reporter,
    opts: McpOptions,
    cmds: Commands,
    store: Option<Store>,
    /// Failures in a row since the last start someone asked for (or the last connection that
    /// lasted `stable_after`).
    failures: u32,
}

pub(super) async fn run(
    server: Arc<Server>,
    sup: Weak<dyn Observer>,
    opts: McpOptions,
    cmds: Commands,
) {
    let r = Reporter { server, sup };
    let store = r.sup.upgrade().map(|s| s.store().clone());
    let mut life = Life { r, opts, cmds, store, failures: 0 };
    let mut state = State::Held;
    loop {
        state = match state {
            State::Held => life.held().await,
            State::Connecting { asked } => life.connecting(asked).await,
            State::Listing(connection) => life.listing(connection).await,
            State::Ready(connection, since) => life.ready(connection, since).await,
            State::Backoff { error, delay } => life.backoff(error, delay).await,
            State::NeedsAuth(msg) => life.needs_auth(msg).await,
            State::CrashLoop(error) => life.crash_loop(error).await,
            State::ArtifactHeld(msg) => life.artifact_held(msg).await,
            State::Stopped => break,
        };
    }
    life.stopped();
}

impl Life {
    /// Not before a killed daemon's child of this identity is gone (or a stop comes first).
    async fn held(&mut self) -> State {
        let start = State::Connecting { asked: true };
        let identity = &self.r.server.identity;
        let Some(mut gate) = self.r.sup.upgrade().map(|s| s.start_gate()) else { return start };
        if !gate.borrow().holds(identity) {
            return start;
        }
        self.r.log("waiting for its copy left by the previous daemon to be stopped");
        tokio::select! {
            _ = gate.wait_for(|held| !held.holds(identity)) => start,
            cmd = self.cmds.recv() => match cmd {
                Some(Cmd::Restart) => start,
                _ => State::Stopped,
            },
        }
    }

    /// One connection attempt, unless a command comes first.
    async fn connecting(&mut self, asked: bool) -> State {
        if asked {
            self.failures = 0;
        }
        self.r.server.start_began(self.failures + 1);
        self.r.update(|s| {
            if asked {
                s.restarting = false;
            } else {
                s.restarts += 1;
            }
            s.state = ServerState::Connecting;
            s.pid = None;
            s.connected_at = None;
        });
        let server = self.r.server.clone();
        let checked = match self.r.sup.upgrade() {
            Some(sup) => tokio::select! {
                start = super::artifact::check(&server, &*sup) => start,
                cmd = self.cmds.recv() => return match cmd {
                    Some(Cmd::Restart) => State::Connecting { asked: true },
                    _ => State::Stopped,
                },
            },
            None => super::artifact::Start::Run(None),
        };
        let spec = match checked {
            super::artifact::Start::Run(spec) => spec,
            super::artifact::Start::Held(msg) => return State::ArtifactHeld(msg),
            super::artifact::Start::Failed(msg) => {
                self.r.update(|s| s.attempts += 1);
                return self.failed(format!("MCP server '{}': {msg}", server.name));
            }
        };
        // One pending notice says all there is to say: a refresh is due.
        let (notices, notice_rx) = mpsc::channel(1);
        let attempt = Attempt {
            name: &server.name,
            identity: &server.identity,
            spec: spec.as_deref().unwrap_or(&server.spec),
            shown: &server.target,
            timeout: server.startup_timeout,
            grace: self.opts.stop_grace,
            log: &server.log,
            store: self.store.as_ref(),
            sup: self.r.sup.clone(),
        };
        let result = tokio::select! {
            result = connect(attempt, notices) => result,
            // The abandoned attempt's child (if any) is killed when it is dropped.
            cmd = self.cmds.recv() => return match cmd {
                Some(Cmd::Restart) => {
                    self.r.log("restart requested while starting");
                    State::Connecting { asked: true }
                }
                _ => State::Stopped,
            },
        };
        match result {
            Ok(running) => State::Listing(Connection { running, notices: notice_rx }),
            Err(ConnectError::NeedsAuth(msg)) => {
                State::NeedsAuth(format!("MCP server '{}': {msg}", server.name))
            }
            Err(ConnectError::Failed(msg)) => {
                self.r.update(|s| s.attempts += 1);
                self.failed(format!("MCP server '{}': {msg}", server.name))
            }
        }
    }

    /// List its first catalog and offer it against its pins, then say it is connected. Each
    /// list is bounded by the start-up timeout, so a server whose lists never answer is not
    /// `connecting` for the request timeout (10 min).
    async fn listing(&mut self, connection: Connection) -> State {
        let server = self.r.server.clone();
        let running = &connection.running;
        let limit = server.startup_timeout.min(server.request_timeout);
        let mut catalog = discover(&server.name, &running.peer, limit).await;
        for problem in &mut catalog.problems {
            *problem = super::spec::scrub(problem, &server.spec, &server.target);
        }
        for problem in &catalog.problems {
            self.r.log(problem);
        }
        let catalog = Arc::new(catalog.compiled().await);
        let offered = match self.r.sup.upgrade() {
            Some(sup) => super::pinned::offer(&server, &*sup, catalog).await,
            None => catalog,
        };
        server.set_catalog(offered);
        server.set_peer(Some(running.peer.clone()));
        let pid = running.child.as_ref().map(|c| c.pid);
        self.r.log(&format!(
            "connected over {}{}",
            running.transport.label(),
            pid.map(|p| format!(" (pid {p})")).unwrap_or_default()
        ));
        let since = Instant::now();
        self.r.update(|s| {
            s.state = ServerState::Connected;
            s.pid = pid;
            s.connected_at = Some(since);
            s.last_error = None;
            s.transport = running.transport;
            s.attempts += 1;
            s.restarting = false;
        });
        server.start_ended(None);
        State::Ready(connection, since)
    }

    /// Serve (pinged, its catalog refreshed) until the connection ends or a command comes;
    /// then close it.
    async fn ready(&mut self, mut connection: Connection, since: Instant) -> State {
        let server = self.r.server.clone();
        let mut life = server.session_life(&connection.running.peer);
        let mut child = connection.running.child.take();
        let pinging = (!self.opts.ping_every.is_zero()).then(|| {
            let timeout = self.opts.ping_every.min(server.startup_timeout);
            let r = Reporter { server: server.clone(), sup: self.r.sup.clone() };
            let peer = connection.running.peer.clone();
            tokio::spawn(pinger(r, peer, self.opts.ping_every, timeout))
        });
        let end = self.serve(&mut connection, &mut child).await;
        if let (Some(l), End::Died(_)) = (life.as_mut(), &end) {
            l.failed("connection_lost");
        }
        drop(life);
        if let Some(pinging) = pinging {
            pinging.abort();
        }
        self.r.update(|s| s.unresponsive_since = None);
        server.set_peer(None);
        let mut running = connection.running;
        running.child = child;
        let grace = self.opts.stop_grace;
        match end {
            End::Stop => {
                let how = shutdown(running, grace).await;
                self.r.log(&format!("stopped ({how})"));
                State::Stopped
            }
            End::Restart => {
                // Mark it first, so calls in flight fail at once.
                self.r.update(|s| s.state = ServerState::Connecting);
                let how = shutdown(running, grace).await;
                self.r.log(&format!("restart requested: stopped ({how}), starting again"));
                State::Connecting { asked: true }
            }
            End::Died(how) => {
                let msg = format!("MCP server '{}' {how}", server.name);
                self.r.update(|s| {
                    s.state = ServerState::Disconnected;
                    s.last_error = Some(msg.clone());
                    s.pid = None;
                    s.connected_at = None;
                    // Until it is back (or parks): a listing waits for it.
                    s.restarting = true;
                });
                let _ = shutdown(running, grace).await;
                if since.elapsed() >= self.opts.stable_after {
                    self.failures = 0;
                }
                self.failed(msg)
            }
        }
    }

    /// The connection's life: how it ended.
    async fn serve(
        &mut self,
        connection: &mut Connection,
        child: &mut Option<super::child::StdioChild>,
    ) -> End {
        let Connection { running, notices } = connection;
        let mut stale_at = stale_at(&self.r.server.catalog());
        loop {
            let stale = async {
                match stale_at {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                how = child_exit(child) => return End::Died(how),
                _ = &mut running.closed => {
                    let how = match child.as_mut() {
                        Some(c) => tokio::time::timeout(Duration::from_millis(300), c.wait())
                            .await
                            .unwrap_or_else(|_| "closed its connection".to_owned()),
                        None => "closed the connection".to_owned(),
                    };
                    return End::Died(how);
                }
                Some(Notice::ListChanged) = notices.recv() => {
                    refresh(&self.r, running, notices, true).await;
                    stale_at = self::stale_at(&self.r.server.catalog());
                }
                () = stale => {
                    refresh(&self.r, running, notices, false).await;
                    stale_at = self::stale_at(&self.r.server.catalog());
                }
                cmd = self.cmds.recv() => return match cmd {
                    Some(Cmd::Restart) => End::Restart,
                    _ => End::Stop,
                },
            }
        }
    }

    /// An attempt or a connection failed: counted, then tried again after a backoff, or
    /// parked in crash-loop once the failures in a row pass the budget.
    fn failed(&mut self, error: String) -> State {
        self.failures += 1;
        self.r.server.start_ended(Some("failed"));
        self.r.log(&error);
        if self.failures > self.opts.restart_budget {
            return State::CrashLoop(error);
        }
        State::Backoff { delay: self.opts.backoff(self.failures), error }
    }

    /// Wait out the delay before the next attempt; a restart asked for meanwhile starts at
    /// once.
    async fn backoff(&mut self, error: String, delay: Duration) -> State {
        self.r.log(&format!("next attempt in {}", humantime::format_duration(delay)));
        self.r.update(|s| {
            s.state = ServerState::Disconnected;
            s.last_error = Some(error);
            s.pid = None;
        });
        tokio::select! {
            () = crate::clock::sleep(delay) => State::Connecting { asked: false },
            cmd = self.cmds.recv() => match cmd {
                Some(Cmd::Restart) => State::Connecting { asked: true },
                _ => State::Stopped,
            },
        }
    }

    /// Parked: retrying without new credentials is pointless.
    async fn needs_auth(&mut self, msg: String) -> State {
        self.r.log(&msg);
        self.r.update(|s| {
            s.state = ServerState::NeedsAuth;
            s.last_error = Some(msg);
            s.attempts += 1;
            s.restarting = false;
        });
        self.parked().await
    }

    /// Parked: not started, what it runs differs from its record.
    async fn artifact_held(&mut self, msg: String) -> State {
        self.r.log(&msg);
        self.r.update(|s| {
            s.state = ServerState::Blocked;
            s.last_error = Some(msg);
            s.pid = None;
            s.attempts += 1;
            s.restarting = false;
        });
        self.parked().await
    }

    /// Parked: it failed too often in a row.
    async fn crash_loop(&mut self, error: String) -> State {
        self.r.log(&format!(
            "failed {} times in a row: parked in crash-loop until its configuration changes or \
             `gemctl mcp restart {}`",
            self.failures, self.r.server.name
        ));
        self.r.update(|s| {
            s.state = ServerState::CrashLoop;
            s.last_error = Some(error);
            s.pid = None;
            s.restarting = false;
        });
        self.parked().await
    }

    /// Wait for the command that ends a parked state.
    async fn parked(&mut self) -> State {
        self.r.server.start_parked();
        match self.cmds.recv().await {
            Some(Cmd::Restart) => State::Connecting { asked: true },
            _ => State::Stopped,
        }
    }

    /// Its task ends: nothing of the connection is left.
    fn stopped(&self) {
        self.r.server.start_ended(Some("stopped"));
        self.r.server.set_peer(None);
        self.r.update(|s| {
            s.state = ServerState::Disconnected;
            s.pid = None;
            s.connected_at = None;
            s.last_error = None;
            s.restarting = false;
        });
    }
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
        // The 2026-07-28 era has no ping: `server/discover` (uncached) is its cheapest request.
        let modern = peer
            .peer_info()
            .is_some_and(|i| i.protocol_version >= rmcp::model::ProtocolVersion::V_2026_07_28);
        let ping = if modern {
            let discover = rmcp::model::DiscoverRequestParams::default();
            rmcp::model::ClientRequest::DiscoverRequest(rmcp::model::Request::new(discover))
        } else {
            rmcp::model::ClientRequest::PingRequest(rmcp::model::PingRequest {
                method: Default::default(),
                extensions: Default::default(),
            })
        };
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

/// The shortest a list is kept before it is listed again, whatever the server says.
const LIST_TTL_MIN: Duration = Duration::from_secs(1);

/// When a catalog whose tools list has a `ttlMs` must be listed again.
fn stale_at(catalog: &super::catalog::Catalog) -> Option<tokio::time::Instant> {
    let ms = catalog.fresh_for_ms.filter(|ms| *ms > 0)?;
    Some(tokio::time::Instant::now() + Duration::from_millis(ms).max(LIST_TTL_MIN))
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
/// `announced`: a `list_changed` asked for it (else the list's `ttlMs` ran out, and the same
/// list is simply the answer).
async fn refresh(
    r: &Reporter,
    running: &Running,
    notices: &mut mpsc::Receiver<Notice>,
    announced: bool,
) {
    while notices.try_recv().is_ok() {}
    let server = &r.server;
    // Held definitions are not in the catalog the sessions see: compare with all it listed.
    let old = server.catalog_listed();
    let mut new = discover(&server.name, &running.peer, server.request_timeout).await;
    if announced && new.same_names(&old) {
        tokio::time::sleep(Duration::from_millis(500)).await;
        new = discover(&server.name, &running.peer, server.request_timeout).await;
    }
    if new == *old {
        return;
    }
    for problem in new.problems.iter().filter(|p| !old.problems.contains(p)) {
        r.log(problem);
    }
    let new = Arc::new(new.compiled().await);
    let Some(sup) = r.sup.upgrade() else { return };
    server.set_catalog(super::pinned::offer(server, &*sup, new).await);
    sup.catalog_changed(server);
}
