//! Warm before it is asked: the workspaces whose sessions started servers lately are
//! remembered (with the part of the environment their servers were resolved in that they name,
//! which may hold a token: kept with the secrets, never in the database), and at the next
//! daemon start their servers are started in the background, one workspace at a time, as
//! servers kept warm for the next session.
//!
//! A session that arrives while they start shares them (the same launch spec is the same
//! server) and waits only for the ones it needs. A workspace is warmed only if it was used
//! within the idle period (`--mcp-linger`): what would still be running had the daemon not
//! stopped.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use geminid_protocol::mcp::KeepWarm;

use super::Core;
use crate::clock;
use crate::config::env::Env;
use crate::mcp::SessionView;
use crate::services::recent::{SECRET, Used, load};

/// A note is written this long after the last change (notes come with every call).
const WRITE_AFTER: Duration = Duration::from_secs(2);

impl Core {
    /// `gemctl doctor`'s word on servers kept warm: the trade (memory for start-up time), what
    /// is held now, and the knobs.
    pub(super) fn warm_finding(&self) -> geminid_protocol::daemon::Finding {
        use geminid_protocol::daemon::FindingStatus;
        let o = &self.info.mcp;
        // Counted as `gemctl status` counts them: a live process no session uses.
        let idle: Vec<_> = self
            .services
            .mcp
            .status()
            .list_all()
            .into_iter()
            .filter(geminid_protocol::mcp::ServerStatus::is_kept_warm)
            .collect();
        let held: u64 = idle.iter().filter_map(|s| s.rss_bytes).sum();
        let mib = |b: u64| format!("{:.0} MiB", b as f64 / f64::from(1 << 20));
        let budget = o.idle_memory.map_or_else(|| "no memory bound".to_owned(), mib);
        let warmed = match self.starter.recent.kept {
            0 => "none are started at the daemon's start (--mcp-warm-workspaces 0)".to_owned(),
            n => format!("the servers of up to {n} recent workspaces start with the daemon"),
        };
        let message = format!(
            "servers no session uses are kept warm for {} within {budget}, none used within {} \
             stopped for memory (now {} idle, {}); {warmed}: memory traded for each new \
             session's start-up time",
            humantime::format_duration(o.linger),
            humantime::format_duration(o.budget_min_idle),
            idle.len(),
            mib(held),
        );
        let tight = o.idle_memory.is_some_and(|b| held.saturating_mul(10) > b.saturating_mul(8));
        if tight {
            geminid_protocol::daemon::Finding {
                check: "warm".to_owned(),
                status: FindingStatus::Warning,
                message,
                fix: Some(
                    "idle servers are near --mcp-idle-memory and the least recently used stop \
                     first: raise it, or give seldom-used servers \"keepWarm\": \"never\" in \
                     ~/.gemini/geminid/servers.json"
                        .to_owned(),
                ),
            }
        } else {
            let status = FindingStatus::Ok;
            geminid_protocol::daemon::Finding {
                check: "warm".to_owned(),
                status,
                message,
                fix: None,
            }
        }
    }

    /// At start, in the background: start the servers of the workspaces used within the idle
    /// period, then keep the list written as it changes. With warming off, forget any list a
    /// previous run kept.
    pub(crate) fn warm_up(self: &Arc<Self>) {
        let core = self.clone();
        tokio::spawn(async move {
            let secrets = core.secrets.clone();
            if core.starter.recent.kept == 0 {
                let _ = tokio::task::spawn_blocking(move || secrets.delete(SECRET)).await;
                return;
            }
            core.starter.recent.merge_stored(load(secrets).await);
            let linger = u64::try_from(core.info.mcp.linger.as_millis()).unwrap_or(u64::MAX);
            let now = clock::now_ms();
            let due: Vec<Used> = core
                .starter
                .recent
                .list()
                .iter()
                .filter(|u| now.saturating_sub(u.at_ms) < linger)
                .cloned()
                .collect();
            // Reading the workspaces' settings happens off the event loop, and each start
            // yields to it: the socket's first answers come first.
            let planner = core.clone();
            let plans = tokio::task::spawn_blocking(move || {
                due.iter().filter_map(|u| planner.plan(u)).collect::<Vec<_>>()
            })
            .await
            .unwrap_or_default();
            // One workspace at a time, each once its servers have settled: eight workspaces'
            // servers started at once (20 processes on a 2-core laptop at login) made every
            // one of them slow to answer. A session that arrives meanwhile starts what it
            // needs itself, sharing what is already starting.
            for (n, (config, env)) in plans.iter().enumerate() {
                tokio::task::yield_now().await;
                let id = format!("warm-up-{n}");
                core.services.mcp.lifecycle().sync(SessionView { id: &id, config, env }, &[]);
                let stopping = tokio::select! {
                    () = core.services.mcp.lifecycle().settle(&id) => false,
                    () = core.services.shutdown.cancelled() => true,
                };
                core.services.mcp.lifecycle().release_session(&id);
                if stopping {
                    return;
                }
            }
            core.keep_written().await;
        });
    }

    /// What warming one remembered workspace starts: its configuration as its last session
    /// saw it, without what may not run or is never kept; none when nothing would start.
    fn plan(&self, used: &Used) -> Option<(crate::config::Effective, Env)> {
        let workspace = Path::new(&used.workspace);
        if !workspace.is_dir() {
            return None;
        }
        let env = used.env.clone().unwrap_or_else(|| self.config.daemon_env().as_ref().clone());
        let mut config = self.config.loader().effective_with(
            workspace,
            &env,
            &used.disabled,
            &*self.services.extensions.current(),
        );
        config
            .servers
            .retain(|_, s| s.blocked.is_none() && s.config.keep_warm != Some(KeepWarm::Never));
        if config.servers.is_empty() {
            return None;
        }
        tracing::info!(workspace = %used.workspace, servers = config.servers.len(), "warming the servers of a recent workspace");
        Some((config, env))
    }

    /// Write the list a moment after each change, until shutdown.
    async fn keep_written(&self) {
        loop {
            tokio::select! {
                _ = self.starter.recent.changed.notified() => {}
                _ = self.services.shutdown.cancelled() => return,
            }
            tokio::select! {
                _ = tokio::time::sleep(WRITE_AFTER) => {}
                _ = self.services.shutdown.cancelled() => return,
            }
            self.write_recent().await;
        }
    }

    /// At shutdown: write what was noted and not yet written.
    pub(crate) async fn flush_recent(&self) {
        let _ = tokio::time::timeout(Duration::from_secs(5), self.write_recent()).await;
    }

    async fn write_recent(&self) {
        if !self.starter.recent.dirty.swap(false, std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        let (secrets, value) = (self.secrets.clone(), self.starter.recent.encoded());
        match tokio::task::spawn_blocking(move || secrets.set(SECRET, &value)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "cannot keep the recent workspaces"),
            Err(e) => tracing::warn!(error = %e, "cannot keep the recent workspaces"),
        }
    }
}
