//! The task behind each [`Server`]: the state machine the diagram in [`super::server`] draws
//! (connect, serve, reconnect with backoff, park), the pinger, and catalog refreshes.

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

/// Wait for a command that ends a parked state; `true` means restart.
async fn parked(cmds: &mut Commands) -> bool {
    matches!(cmds.recv().await, Some(Cmd::Restart))
}

pub(super) async fn run(
    server: Arc<Server>,
    sup: Weak<dyn Observer>,
    opts: McpOptions,
    mut cmds: Commands,
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
            if requested {
                s.restarting = false;
            } else {
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
                let catalog = Arc::new(catalog.compiled().await);
                let offered = match r.sup.upgrade() {
                    Some(sup) => super::pinned::offer(&server, &*sup, catalog).await,
                    None => catalog,
                };
                server.set_catalog(offered);
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
                    s.restarting = false;
                });
                let mut child = running.child.take();
                let pinging = (!opts.ping_every.is_zero()).then(|| {
                    let timeout = opts.ping_every.min(server.startup_timeout);
                    let r = Reporter { server: server.clone(), sup: r.sup.clone() };
                    tokio::spawn(pinger(r, running.peer.clone(), opts.ping_every, timeout))
                });
                let mut stale_at = stale_at(&server.catalog());
                let end = loop {
                    let stale = async {
                        match stale_at {
                            Some(at) => tokio::time::sleep_until(at).await,
                            None => std::future::pending().await,
                        }
                    };
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
                            refresh(&r, &running, &mut notice_rx, true).await;
                            stale_at = self::stale_at(&server.catalog());
                        }
                        () = stale => {
                            refresh(&r, &running, &mut notice_rx, false).await;
                            stale_at = self::stale_at(&server.catalog());
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
                            // Until it is back (or parks): a listing waits for it.
                            s.restarting = true;
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
                    s.restarting = false;
                });
                if parked(&mut cmds).await {
                    failures = 0;
                    requested = true;
                    continue 'attempts;
                }
                break 'attempts;
            }
            Err(ConnectError::Failed(msg)) => {
                let msg = format!("MCP server '{}': {msg}", server.name);
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
                s.restarting = false;
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
        s.restarting = false;
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
