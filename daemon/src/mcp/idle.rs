//! Servers no session uses: kept warm for the next session, for the idle period
//! (`--mcp-linger`) and within the idle-memory budget (`--mcp-idle-memory`: past it, the least
//! recently used idle server stops first), as each entry's `keepWarm` allows. A server used
//! within the last minutes (`--mcp-idle-memory-after`) is never stopped for the budget: each
//! `gemctl` command lets go of its servers, and the next one would start them again.
//!
//! One sweeper task per supervisor, started with the first idle server, wakes at the nearest
//! deadline, when a server goes idle, and every [`MEASURE_EVERY`] while any is idle (resident
//! memory grows while a process sits). `mcp/stop` takes a server out of service the same way.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use geminid_protocol::mcp::{KeepWarm, ServerStatus};

use super::server::Server;
use super::{Binding, IDLE_MEMORY_FLOOR, IDLE_MEMORY_SHARE, Inner, SessionView, Supervisor};

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

/// The idle servers' bookkeeping, inside the supervisor's lock.
#[derive(Debug, Default)]
pub(super) struct IdleSet {
    /// Identity → when its last session let go.
    since: HashMap<String, Instant>,
    /// Identity → its entries' `keepWarm` (as of the last session that bound it).
    keep: HashMap<String, KeepWarm>,
    /// Identity → resident bytes of its process group, at the last measure.
    rss: HashMap<String, u64>,
    /// Wakes the sweeper; set once it runs.
    wake: Option<Arc<tokio::sync::Notify>>,
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
        let idle = since.elapsed();
        status.idle_secs = Some(idle.as_secs());
        status.stops_in_secs = match keep {
            KeepWarm::Always => None,
            KeepWarm::Never => Some(0),
            KeepWarm::Default => Some(linger.saturating_sub(idle).as_secs()),
        };
        status.rss_bytes = self.rss.get(identity).copied();
    }
}

impl Supervisor {
    /// No session uses the server any more: it is kept warm from now, as its `keepWarm` and
    /// the budget allow.
    pub(super) fn went_idle(&self, inner: &mut Inner, identity: String) {
        inner.idle.since.insert(identity, Instant::now());
        let wake = match &inner.idle.wake {
            Some(w) => w.clone(),
            None => {
                let wake = Arc::new(tokio::sync::Notify::new());
                inner.idle.wake = Some(wake.clone());
                tokio::spawn(sweeper(self.me.clone(), wake.clone()));
                wake
            }
        };
        wake.notify_one();
    }

    /// Stop what outlived its idle period, then, past the budget, the least recently used
    /// idle servers; how long until the next deadline or measure.
    fn sweep(&self) -> Option<Duration> {
        let now = Instant::now();
        let mut stop: Vec<(String, &'static str)> = Vec::new();
        let mut next: Option<Duration> = None;
        let mut groups: Vec<(String, Instant, u32)> = Vec::new();
        {
            let mut inner = self.inner();
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
                    KeepWarm::Default => self.opts.linger,
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
            let mut inner = self.inner();
            inner.idle.rss.clear();
            for (id, _, pid) in &groups {
                if let Some(held) = measured.get(pid) {
                    inner.idle.rss.insert(id.clone(), held.rss_bytes);
                }
            }
            if let Some(budget) = self.opts.idle_memory {
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
                    if idle < self.opts.budget_min_idle {
                        let wait = self.opts.budget_min_idle - idle;
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
            self.servers_changed();
        }
        if !groups.is_empty() {
            next = Some(next.map_or(MEASURE_EVERY, |n| n.min(MEASURE_EVERY)));
        }
        next
    }

    /// The servers (by the identity of their launch spec) a session's configuration runs:
    /// what [`Supervisor::sync`] would start for it.
    pub(crate) fn configured(&self, view: SessionView<'_>) -> HashSet<String> {
        Self::entries(view, self.pins.mode)
            .into_values()
            .filter_map(|(entry, _)| match entry.binding {
                Binding::Runs(base) => Some(base),
                Binding::NotRun { .. } => None,
            })
            .collect()
    }

    /// A reload left no configuration running these servers (identities of launch specs, as
    /// [`Supervisor::configured`] gives them): those no session uses stop now (a crash-looping
    /// one stops retrying), rather than kept warm for a session that cannot ask for them.
    pub(crate) fn unconfigured(&self, bases: &HashSet<String>) {
        let gone: Vec<(String, &'static str)> = {
            let mut inner = self.inner();
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
            self.servers_changed();
        }
    }

    /// `mcp/stop`: take a running server out of service and stop it now (its log stays, and
    /// `mcp/restart`, a session's start or a change of its configuration starts it again).
    /// Its status once stopped; `None` when it was not running.
    pub(crate) async fn stop_server(&self, server: &Arc<Server>) -> Option<ServerStatus> {
        {
            let mut inner = self.inner();
            inner.idle.forget(&server.identity);
            inner.started_for.remove(&server.identity);
            let running = inner.servers.remove(&server.identity)?;
            inner.retire(running, STOPPED);
        }
        tracing::info!(server = %server.name, "stopping an MCP server: `gemctl mcp stop`");
        server.log.push("geminid", "stopped by `gemctl mcp stop`");
        self.servers_changed();
        server.stop().await;
        Some(self.status(server))
    }

    /// Take idle servers out of service and stop them in the background.
    fn retire_idle(&self, inner: &mut Inner, which: &[(String, &'static str)]) {
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
            Some(sup) if !sup.inner().closed => sup.sweep(),
            _ => return,
        };
        match next {
            Some(d) => {
                let _ = tokio::time::timeout(d, wake.notified()).await;
            }
            None => wake.notified().await,
        }
    }
}

/// `--mcp-idle-memory` as a flag's value: the bytes, or no bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Budget(pub Option<u64>);

/// [`parse_budget`], for the flag.
pub(crate) fn budget_arg(text: &str) -> Result<Budget, String> {
    parse_budget(text).map(Budget)
}

/// The budget `auto` means: an eighth of the machine's memory (`MemTotal` in
/// `/proc/meminfo`), at least [`IDLE_MEMORY_FLOOR`] (also where the system does not say).
pub(crate) fn default_budget() -> u64 {
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    budget_of(&meminfo)
}

fn budget_of(meminfo: &str) -> u64 {
    let total = meminfo.lines().find_map(|l| {
        let kib = l.strip_prefix("MemTotal:")?.trim().strip_suffix("kB")?.trim();
        kib.parse::<u64>().ok()?.checked_mul(1024)
    });
    total.map_or(IDLE_MEMORY_FLOOR, |t| (t / IDLE_MEMORY_SHARE).max(IDLE_MEMORY_FLOOR))
}

/// `--mcp-idle-memory`: `512MiB`, `1GiB`, `300MB`, `2000000` (bytes), `auto` (see
/// [`default_budget`]) or `unlimited`.
pub(crate) fn parse_budget(text: &str) -> Result<Option<u64>, String> {
    let t = text.trim();
    if t.eq_ignore_ascii_case("unlimited") {
        return Ok(None);
    }
    if t.eq_ignore_ascii_case("auto") {
        return Ok(Some(default_budget()));
    }
    let split = t.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let n: f64 = number.parse().map_err(|_| format!("'{t}' is not a size like 512MiB"))?;
    let factor: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" => 1000,
        "kib" => 1 << 10,
        "m" | "mb" => 1_000_000,
        "mib" => 1 << 20,
        "g" | "gb" => 1_000_000_000,
        "gib" => 1 << 30,
        other => {
            return Err(format!(
                "unknown unit '{other}' (use B, KB, KiB, MB, MiB, GB, GiB, `auto` or `unlimited`)"
            ));
        }
    };
    let bytes = n * factor as f64;
    if !bytes.is_finite() || bytes < 0.0 || bytes > u64::MAX as f64 {
        return Err(format!("'{t}' is out of range"));
    }
    Ok(Some(bytes as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_parse() {
        assert_eq!(parse_budget("512MiB"), Ok(Some(512 << 20)));
        assert_eq!(parse_budget("1.5 GiB"), Ok(Some(3 << 29)));
        assert_eq!(parse_budget("300MB"), Ok(Some(300_000_000)));
        assert_eq!(parse_budget("4096"), Ok(Some(4096)));
        assert_eq!(parse_budget("Unlimited"), Ok(None));
        assert!(parse_budget("lots").is_err_and(|e| e.contains("like 512MiB")));
        assert!(parse_budget("5 parsecs").is_err_and(|e| e.contains("unknown unit 'parsecs'")));
        assert!(parse_budget("auto").is_ok_and(|b| b.is_some_and(|b| b >= IDLE_MEMORY_FLOOR)));
    }

    #[test]
    fn the_default_budget_is_a_share_of_memory_with_a_floor() {
        let kib = |gib: u64| format!("MemTotal:       {} kB\nMemFree: 1 kB\n", gib << 20);
        assert_eq!(budget_of(&kib(8)), IDLE_MEMORY_FLOOR, "an 8 GiB laptop: the floor");
        assert_eq!(budget_of(&kib(32)), 4 << 30, "32 GiB: an eighth");
        assert_eq!(budget_of(""), IDLE_MEMORY_FLOOR, "no /proc/meminfo");
    }
}
