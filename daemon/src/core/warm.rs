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

use parking_lot::Mutex;
use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use geminid_protocol::mcp::KeepWarm;
use serde::{Deserialize, Serialize};

use super::Core;
use crate::clock;
use crate::config::env::Env;
use crate::mcp::SessionView;
use crate::secrets::{Secret, SecretStore};

/// The secret the list is kept under.
const SECRET: &str = "recent-workspaces";
/// A note is written this long after the last change (notes come with every call).
const WRITE_AFTER: Duration = Duration::from_secs(2);
/// A workspace used again is noted again at most this often (its time of use).
const RENOTE_AFTER: u64 = 10 * 60 * 1000;

/// Variables kept for every remembered workspace whether its servers name them or not: what
/// starting a program needs (finding it, its home, user, shell, locale, temporary and XDG
/// folders; on Windows their equivalents), and what geminid itself reads of a session's
/// environment (trust, strict redaction, the settings' paths). `LC_*` and `XDG_*` by prefix.
const START_VARS: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "TMPDIR",
    "TMP",
    "TEMP",
    "PATHEXT",
    "SYSTEMROOT",
    "USERPROFILE",
    "GEMINI_CLI_HOME",
    "GEMINI_CLI_SYSTEM_SETTINGS_PATH",
    "GEMINI_CLI_TRUST_WORKSPACE",
    "GEMINI_RESTRICTED_MODE",
    "GITHUB_SHA",
    "SURFACE",
];

/// A variable's name after `$` or `${` (the `%NAME%` of Windows too).
static REFERENCE: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
    crate::literal::regex(r"\$\{?([A-Za-z_][A-Za-z0-9_.]*)|%([A-Za-z_][A-Za-z0-9_]*)%")
});

/// Of a session's environment, what warming its workspace needs: the variables its servers'
/// entries name (`$VAR`, `${VAR}`, `${VAR:-$OTHER}` in command, args, cwd, env values, url,
/// headers; and those the values kept name in turn, as expansion chains), those
/// `security.environmentVariableRedaction.allowed` lets servers have, and [`START_VARS`].
/// The rest of the shell (its other tokens above all) is not kept (issue 64, item 14). A
/// server's identity hashes only what its entry names, `PATH` and `HOME`
/// ([`crate::mcp::spec`]), so a warmed server is the one its session starts.
pub(super) fn kept_env(env: &Env, config: &crate::config::Effective) -> Env {
    let mut named: BTreeSet<String> = START_VARS.iter().map(|v| (*v).to_owned()).collect();
    let mut texts: Vec<String> = Vec::new();
    for spec in config.servers.values() {
        for c in [&spec.config, &spec.shown] {
            texts.extend(c.command.iter().chain(c.args.iter().flatten()).cloned());
            texts.extend(c.cwd.iter().chain(&c.url).chain(&c.http_url).cloned());
            texts.extend(c.env.iter().chain(&c.headers).flat_map(|m| m.values().cloned()));
        }
    }
    let allowed = config.public.settings.pointer("/security/environmentVariableRedaction/allowed");
    named.extend(
        allowed
            .and_then(serde_json::Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str().map(|v| v.trim().to_owned())),
    );
    while let Some(text) = texts.pop() {
        for c in REFERENCE.captures_iter(&text) {
            let Some(name) = c.get(1).or_else(|| c.get(2)) else { continue };
            if named.insert(name.as_str().to_owned())
                && let Some(value) = env.get(name.as_str())
            {
                texts.push(value.clone());
            }
        }
    }
    env.iter()
        .filter(|(k, _)| {
            named.contains(k.as_str())
                || named.iter().any(|n| n.eq_ignore_ascii_case(k))
                || k.starts_with("LC_")
                || k.starts_with("XDG_")
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// One workspace, as its last session started servers there.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
struct Used {
    workspace: String,
    /// The session's environment; none when it was the daemon's own.
    env: Option<Env>,
    /// Servers that session had disabled.
    disabled: BTreeSet<String>,
    /// Unix ms.
    at_ms: u64,
}

impl std::fmt::Debug for Used {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Used")
            .field("workspace", &self.workspace)
            .field("env", &self.env.as_ref().map(|_| Secret::new(())))
            .field("at_ms", &self.at_ms)
            .finish()
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Stored {
    version: u32,
    used: Vec<Used>,
}

/// The recently used workspaces, newest first.
#[derive(Debug)]
pub(crate) struct Recent {
    pub(super) kept: usize,
    list: Mutex<Vec<Used>>,
    /// Noted since the last write.
    changed: tokio::sync::Notify,
    dirty: std::sync::atomic::AtomicBool,
}

impl Recent {
    /// Up to `kept` workspaces (0: none, and nothing is kept).
    pub(crate) fn new(kept: usize) -> Self {
        Self {
            kept,
            list: Mutex::default(),
            changed: tokio::sync::Notify::new(),
            dirty: std::sync::atomic::AtomicBool::new(false),
        }
    }

    fn list(&self) -> parking_lot::MutexGuard<'_, Vec<Used>> {
        self.list.lock()
    }

    /// A session in `workspace` started its servers.
    pub(super) fn note(&self, workspace: &str, env: Option<&Env>, disabled: BTreeSet<String>) {
        if self.kept == 0 {
            return;
        }
        let now = clock::now_ms();
        let mut list = self.list();
        if let Some(first) = list.first()
            && first.workspace == workspace
            && first.env.as_ref() == env
            && first.disabled == disabled
            && now.saturating_sub(first.at_ms) < RENOTE_AFTER
        {
            return;
        }
        list.retain(|u| u.workspace != workspace);
        list.insert(
            0,
            Used { workspace: workspace.to_owned(), env: env.cloned(), disabled, at_ms: now },
        );
        list.truncate(self.kept);
        drop(list);
        self.dirty.store(true, std::sync::atomic::Ordering::SeqCst);
        self.changed.notify_one();
    }

    fn encoded(&self) -> Secret<Vec<u8>> {
        let stored = Stored { version: 1, used: self.list().clone() };
        Secret::new(serde_json::to_vec(&stored).unwrap_or_default())
    }

    /// What the store kept, under what was noted since the start.
    fn merge_stored(&self, stored: Vec<Used>) {
        let mut list = self.list();
        for u in stored {
            if !list.iter().any(|l| l.workspace == u.workspace) {
                list.push(u);
            }
        }
        list.sort_by_key(|u| std::cmp::Reverse(u.at_ms));
        list.truncate(self.kept);
    }
}

/// Read the kept list (off the event loop: the keyring blocks).
async fn load(secrets: Arc<SecretStore>) -> Vec<Used> {
    let read = tokio::task::spawn_blocking(move || secrets.get(SECRET)).await;
    match read {
        Ok(Ok(Some(bytes))) => match serde_json::from_slice::<Stored>(bytes.expose()) {
            Ok(s) if s.version == 1 => s.used,
            Ok(s) => {
                tracing::warn!(
                    version = s.version,
                    "recent workspaces kept by another version: not warmed"
                );
                Vec::new()
            }
            Err(e) => {
                tracing::warn!(error = %e, "the recent workspaces kept are unreadable: not warmed");
                Vec::new()
            }
        },
        Ok(Ok(None)) => Vec::new(),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "cannot read the recent workspaces: nothing warmed");
            Vec::new()
        }
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the recent workspaces: nothing warmed");
            Vec::new()
        }
    }
}

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
            super::doctor::finding(
                "warm",
                FindingStatus::Warning,
                message,
                Some(
                    "idle servers are near --mcp-idle-memory and the least recently used stop \
                     first: raise it, or give seldom-used servers \"keepWarm\": \"never\" in \
                     ~/.gemini/geminid/servers.json"
                        .to_owned(),
                ),
            )
        } else {
            super::doctor::finding("warm", FindingStatus::Ok, message, None)
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
                core.services.mcp.sync(SessionView { id: &id, config, env }, &[]);
                let stopping = tokio::select! {
                    () = core.services.mcp.settle(&id) => false,
                    () = core.services.shutdown.cancelled() => true,
                };
                core.services.mcp.release_session(&id);
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
