//! The servers' lifecycle as sessions need them: started or shared when a session syncs its
//! entries, released when it lets go, restarted on request, waited for until they settle,
//! stopped at shutdown, and held back while a killed daemon's children are being stopped.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use geminid_protocol::mcp::{ServerState, ServerStatus};

use super::asked::roots_changed;
use super::entries::{Binding, SessionView, resolve};
use super::mailbox::Cmd;
use super::server::{self, NewServer, Server};
use super::supervisor::Supervisor;
use super::{orphans, task};
use crate::naming;

impl Supervisor {
    /// Its servers' lifecycle: start, share, release, restart, settle, shut down.
    pub(crate) fn lifecycle(&self) -> Lifecycle<'_> {
        Lifecycle { sup: self }
    }
}

/// Starting and stopping the servers as the sessions need them (see the module).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Lifecycle<'a> {
    sup: &'a Supervisor,
}

impl Lifecycle<'_> {
    /// The session needs its servers: start or share each one it may run, and stop what it
    /// no longer runs (a configuration change). `changed` names entries whose configuration
    /// changed; those parked in crash-loop or needs-auth with an unchanged identity get a
    /// fresh start.
    pub(crate) fn sync(self, view: SessionView<'_>, changed: &[String]) {
        let resolved = resolve(view, (self.sup.pins.mode, self.sup.pins.artifact_mode));
        let mut released = Vec::new();
        let mut kick = Vec::new();
        let mut roots_moved = Vec::new();
        let mut started = false;
        {
            let mut inner = self.sup.registry.lock();
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
                                    .map_or(self.sup.opts.startup_timeout, Duration::from_millis),
                                request_timeout: entry.timeout,
                                pinning: entry.pinning,
                                artifact_pinning: entry.artifact_pinning,
                                log: None,
                            };
                            tracing::info!(server = %name, session = view.id, identity = &identity[..12], "starting MCP server");
                            let server = task::start(new, self.sup.observer(), self.sup.opts);
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
            self.sup.registry.servers_changed();
        } else {
            self.sup.registry.sessions_changed();
        }
        for server in kick {
            server.send(Cmd::Restart);
        }
        for server in roots_moved {
            roots_changed(&server);
        }
    }

    /// The session no longer needs its servers (its last connection went, or it closed).
    /// Servers nobody else uses stop after the linger period.
    pub(crate) fn release_session(self, session: &str) {
        let mut inner = self.sup.registry.lock();
        let Some(entries) = inner.sessions.remove(session) else { return };
        self.sup.registry.sessions_changed();
        tracing::debug!(session, "session released its MCP servers");
        for entry in entries.into_values() {
            let Binding::Runs(identity) = entry.binding else { continue };
            if inner.users(&identity).is_empty() && inner.servers.contains_key(&identity) {
                self.sup.idle().went_idle(&mut inner, identity);
            }
        }
    }

    /// Restart a server and wait until its first attempt settles. A server that was stopped
    /// (see [`Supervisor::find`]) starts again, for as long as a session needs it or the
    /// linger period.
    pub(crate) async fn restart(self, server: &Arc<Server>) -> ServerStatus {
        // Read before the restart is asked for: its attempt may end before this looks again.
        let before = server.snapshot().attempts;
        let revived = {
            let mut inner = self.sup.registry.lock();
            let running = inner.servers.get(&server.identity).cloned();
            match running {
                Some(running) => {
                    running.send(Cmd::Restart);
                    None
                }
                None if inner.closed => None,
                None => {
                    let new = NewServer::like(
                        server,
                        server.identity.clone(),
                        server.name.clone(),
                        Some(server.log.clone()),
                    );
                    tracing::info!(server = %server.name, "starting a stopped MCP server again");
                    let fresh = task::start(new, self.sup.observer(), self.sup.opts);
                    inner.servers.insert(fresh.identity.clone(), fresh.clone());
                    inner.retired.retain(|r| r.server.identity != fresh.identity);
                    Some(fresh)
                }
            }
        };
        if let Some(fresh) = &revived {
            self.sup.registry.servers_changed();
            {
                let mut inner = self.sup.registry.lock();
                if inner.users(&fresh.identity).is_empty() {
                    self.sup.idle().went_idle(&mut inner, fresh.identity.clone());
                }
            }
            let mut watch = fresh.watch();
            let wait = fresh.startup_timeout + self.sup.opts.stop_grace;
            let _ = tokio::time::timeout(wait, watch.wait_for(server::Snapshot::settled)).await;
            return self.sup.status().of(fresh);
        }
        let mut watch = server.watch();
        let wait = server.startup_timeout + self.sup.opts.stop_grace * 2;
        let _ = tokio::time::timeout(
            wait,
            watch.wait_for(|s| s.attempts > before && s.state != ServerState::Connecting),
        )
        .await;
        self.sup.status().of(server)
    }

    /// Wait (up to each one's start-up timeout) until the session's servers have settled: each
    /// has finished its first attempt, and none is on its way back from a lost connection (in
    /// its backoff, or the attempts after it; see [`server::Snapshot::settled`]), so a listing
    /// made while a server restarts has its tools.
    pub(crate) async fn settle(self, session: &str) {
        self.settle_where(session, |_| true).await;
    }

    /// Wait until the servers that could have the tool `fqn` have settled (those whose names
    /// fit it; every one if none does), not the others.
    pub(crate) async fn settle_for_tool(self, session: &str, fqn: &str) {
        let fits = |name: &str| naming::is_of_server(fqn, name);
        let any = self
            .sup
            .registry
            .lock()
            .sessions
            .get(session)
            .is_some_and(|e| e.keys().any(|n| fits(n)));
        self.settle_where(session, |name| !any || fits(name)).await;
    }

    /// Wait until the session's server of entry `name` has settled.
    pub(crate) async fn settle_server(self, session: &str, name: &str) {
        let key = crate::config::enablement::normalize(name);
        self.settle_where(session, |n| crate::config::enablement::normalize(n) == key).await;
    }

    async fn settle_where(self, session: &str, wanted: impl Fn(&str) -> bool) {
        let servers: Vec<Arc<Server>> = {
            let inner = self.sup.registry.lock();
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
            let limit = s.startup_timeout + self.sup.opts.stop_grace;
            let _ = tokio::time::timeout(limit, w.wait_for(server::Snapshot::settled)).await;
        });
        futures::future::join_all(waits).await;
    }

    /// Stop every server and wait for their processes to be gone. Nothing starts afterwards.
    pub(crate) async fn shutdown(self) {
        let servers: Vec<Arc<Server>> = {
            let mut inner = self.sup.registry.lock();
            inner.closed = true;
            inner.sessions.clear();
            inner.servers.drain().map(|(_, s)| s).collect()
        };
        let stops = servers.iter().map(|s| s.stop());
        futures::future::join_all(stops).await;
    }

    /// Stop the children a killed daemon left behind, in the background and all at once; a
    /// server starts only once the orphan of its own identity is gone (every server waits
    /// for an orphan recorded without one).
    pub(crate) fn clean_orphans(self, grace: Duration) {
        let left = orphans::left_behind(self.sup.store());
        if left.is_empty() {
            return;
        }
        self.sup.start_gate.send_replace(orphans::Held::of(&left));
        let (gate, store) = (self.sup.start_gate.clone(), self.sup.store().clone());
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
}
