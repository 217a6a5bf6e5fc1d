//! Servers no session uses: kept warm for the next session, for the idle period
//! (`--mcp-linger`) and within the idle-memory budget (`--mcp-idle-memory`: past it, the least
//! recently used idle server stops first), as each entry's `keepWarm` allows. A server used
//! within the last minutes (`--mcp-idle-memory-after`) is never stopped for the budget: each
//! `gemctl` command lets go of its servers, and the next one would start them again.
//!
//! One sweeper task per supervisor, started with the first idle server, wakes at the nearest
//! deadline, when a server goes idle, and every [`MEASURE_EVERY`] while any is idle (resident
//! memory grows while a process sits). `mcp/stop` takes a server out of service the same way.

use std::collections::HashSet;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use geminid_protocol::mcp::{KeepWarm, ServerStatus};

use super::entries::{Binding, SessionView, resolve};
use super::registry::Inner;
use super::server::Server;
use super::supervisor::Supervisor;
use crate::clock;

/// How often idle servers' memory is measured against the budget.
pub(crate) const MEASURE_EVERY: Duration = Duration::from_secs(30);

/// Why a server that outlived its idle period stopped.
const EXPIRED: &str =
    "no session needed it for the idle period (--mcp-linger); it starts again on next use";
/// Why a server stopped for the budget.
const OVER_BUDGET: &str = "idle servers were over the memory budget (--mcp-idle-memory); it was \
                           the least recently used; it starts again on next use";
/// Why a `keepWarm: "never"` server stopped.
const NOT_KEPT: &str = "no session needed it (keepWarm: never); it starts again on next use";
/// Why a server no configuration has any more stopped.
const UNCONFIGURED: &str = "no configuration uses it any more (its entry was removed, or changed \
                            into another server)";
/// Why a server stopped on request.
const STOPPED: &str = "stopped by `gemctl mcp stop` (`gemctl mcp restart` starts it again)";

impl Supervisor {
    /// Its idle servers: kept warm, stopped past their idle period or the memory budget, or on request.
    pub(crate) fn idle(&self) -> Idle<'_> {
        Idle { sup: self }
    }
}

/// The idle servers' keeping (see the module).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Idle<'a> {
    sup: &'a Supervisor,
}

impl Idle<'_> {
    /// The idle servers' resident memory as last measured, in bytes, and the budget
    /// (`--mcp-idle-memory`) unless unlimited.
    pub(crate) fn memory(self) -> (u64, Option<u64>) {
        let inner = self.sup.registry.lock();
        let held = inner.idle.since.keys().filter_map(|id| inner.idle.rss.get(id)).sum();
        (held, self.sup.opts.idle_memory)
    }

    /// No session uses the server any more: it is kept warm from now, as its `keepWarm` and
    /// the budget allow.
    pub(super) fn went_idle(self, inner: &mut Inner, identity: String) {
        inner.idle.since.insert(identity, clock::now());
        let wake = match &inner.idle.wake {
            Some(w) => w.clone(),
            None => {
                let wake = Arc::new(tokio::sync::Notify::new());
                inner.idle.wake = Some(wake.clone());
                tokio::spawn(sweeper(self.sup.me.clone(), wake.clone()));
                wake
            }
        };
        wake.notify_one();
    }

    /// Stop what outlived its idle period, then, past the budget, the least recently used
    /// idle servers; how long until the next deadline or measure.
    fn sweep(self) -> Option<Duration> {
        let now = clock::now();
        let mut stop: Vec<(String, &'static str)> = Vec::new();
        let mut next: Option<Duration> = None;
        let mut groups: Vec<(String, Instant, u32)> = Vec::new();
        {
            let mut inner = self.sup.registry.lock();
            if inner.closed {
                return None;
            }
            let idle: Vec<(String, Instant)> =
                inner.idle.since.iter().map(|(id, at)| (id.clone(), *at)).collect();
            for (id, since) in idle {
                let server = inner.servers.get(&id).cloned();
                if server.is_none() || !inner.users(&id).is_empty() {
                    inner.idle.since.remove(&id);
                    continue;
                }
                let keep = inner.idle.keep.get(&id).copied().unwrap_or_default();
                let limit = match keep {
                    KeepWarm::Never => Duration::ZERO,
                    KeepWarm::Default => self.sup.opts.linger,
                    KeepWarm::Always => Duration::MAX,
                };
                let Some(at) = since.checked_add(limit) else {
                    groups.extend(server.and_then(|s| s.snapshot().pid).map(|p| (id, since, p)));
                    continue;
                };
                if at <= now {
                    stop.push((id, if keep == KeepWarm::Never { NOT_KEPT } else { EXPIRED }));
                    continue;
                }
                next = Some(next.map_or(at - now, |n| n.min(at - now)));
                groups.extend(server.and_then(|s| s.snapshot().pid).map(|p| (id, since, p)));
            }
            self.retire_idle(&mut inner, &stop);
        }
        let measured = super::usage::of_groups(groups.iter().map(|(_, _, pid)| *pid));
        let mut over = Vec::new();
        {
            let mut inner = self.sup.registry.lock();
            inner.idle.rss.clear();
            for (id, _, pid) in &groups {
                if let Some(held) = measured.get(pid) {
                    inner.idle.rss.insert(id.clone(), held.rss_bytes);
                }
            }
            if let Some(budget) = self.sup.opts.idle_memory {
                // Only servers kept by default count; `always` is the user's explicit choice.
                let mut counted: Vec<&(String, Instant, u32)> = groups
                    .iter()
                    .filter(|(id, _, _)| {
                        inner.idle.keep.get(id).copied().unwrap_or_default() == KeepWarm::Default
                    })
                    .collect();
                counted.sort_by_key(|(_, since, _)| *since);
                let mut total: u64 =
                    counted.iter().filter_map(|(id, _, _)| inner.idle.rss.get(id)).sum();
                for (id, since, _) in counted {
                    if total <= budget {
                        break;
                    }
                    // Used lately: kept, and looked at again once it may go (the rest are
                    // younger still).
                    let idle = now.saturating_duration_since(*since);
                    if idle < self.sup.opts.budget_min_idle {
                        let wait = self.sup.opts.budget_min_idle - idle;
                        next = Some(next.map_or(wait, |n| n.min(wait)));
                        break;
                    }
                    if inner.idle.since.contains_key(id) && inner.users(id).is_empty() {
                        total = total.saturating_sub(inner.idle.rss.get(id).copied().unwrap_or(0));
                        over.push((id.clone(), OVER_BUDGET));
                    }
                }
                self.retire_idle(&mut inner, &over);
            }
        }
        if !stop.is_empty() || !over.is_empty() {
            self.sup.registry.servers_changed();
        }
        if !groups.is_empty() {
            next = Some(next.map_or(MEASURE_EVERY, |n| n.min(MEASURE_EVERY)));
        }
        next
    }

    /// The servers (by the identity of their launch spec) a session's configuration runs:
    /// what `Lifecycle::sync` would start for it.
    pub(crate) fn configured(self, view: SessionView<'_>) -> HashSet<String> {
        resolve(view, (self.sup.pins.mode, self.sup.pins.artifact_mode))
            .into_values()
            .filter_map(|(entry, _)| match entry.binding {
                Binding::Runs(base) => Some(base),
                Binding::NotRun { .. } => None,
            })
            .collect()
    }

    /// A reload left no configuration running these servers (identities of launch specs, as
    /// [`Idle::configured`] gives them): those no session uses stop now (a crash-looping
    /// one stops retrying), rather than kept warm for a session that cannot ask for them.
    pub(crate) fn unconfigured(self, bases: &HashSet<String>) {
        let gone: Vec<(String, &'static str)> = {
            let mut inner = self.sup.registry.lock();
            let gone: Vec<(String, &'static str)> = inner
                .servers
                .keys()
                .filter(|id| {
                    // A copy split by roots runs under an identity of its own.
                    let base = inner.started_for.get(*id).map_or(id.as_str(), |(_, b)| b.as_str());
                    bases.contains(base) && inner.users(id).is_empty()
                })
                .map(|id| (id.clone(), UNCONFIGURED))
                .collect();
            self.retire_idle(&mut inner, &gone);
            gone
        };
        if !gone.is_empty() {
            self.sup.registry.servers_changed();
        }
    }

    /// `mcp/stop`: take a running server out of service and stop it now (its log stays, and
    /// `mcp/restart`, a session's start or a change of its configuration starts it again).
    /// Its status once stopped; `None` when it was not running.
    pub(crate) async fn stop_server(self, server: &Arc<Server>) -> Option<ServerStatus> {
        {
            let mut inner = self.sup.registry.lock();
            inner.idle.forget(&server.identity);
            inner.started_for.remove(&server.identity);
            let running = inner.servers.remove(&server.identity)?;
            inner.retire(running, STOPPED);
        }
        tracing::info!(server = %server.name, "stopping an MCP server: `gemctl mcp stop`");
        server.log.push("geminid", "stopped by `gemctl mcp stop`");
        self.sup.registry.servers_changed();
        server.stop().await;
        Some(self.sup.status().of(server))
    }

    /// Take idle servers out of service and stop them in the background.
    fn retire_idle(self, inner: &mut Inner, which: &[(String, &'static str)]) {
        for (id, why) in which {
            inner.idle.forget(id);
            inner.started_for.remove(id);
            let Some(server) = inner.servers.remove(id) else { continue };
            inner.retire(server.clone(), why);
            tracing::info!(server = %server.name, reason = why, "stopping an idle MCP server");
            tokio::spawn(async move { server.stop().await });
        }
    }
}

/// The sweeper: runs while its supervisor does.
async fn sweeper(me: Weak<Supervisor>, wake: Arc<tokio::sync::Notify>) {
    loop {
        let next = match me.upgrade() {
            Some(sup) if !sup.registry.lock().closed => sup.idle().sweep(),
            _ => return,
        };
        match next {
            Some(d) => {
                tokio::select! {
                    () = clock::sleep(d) => {}
                    () = wake.notified() => {}
                }
            }
            None => wake.notified().await,
        }
    }
}
