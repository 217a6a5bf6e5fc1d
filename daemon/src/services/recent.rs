//! The workspaces whose sessions started servers lately, newest first: what the core warms at
//! the next daemon start (`core/warm.rs`). Each is kept with the part of the environment its
//! servers were resolved in that they name, which may hold a token: kept with the secrets,
//! never in the database.

use parking_lot::Mutex;
use std::collections::BTreeSet;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::clock;
use crate::config::env::Env;
use crate::secrets::{Secret, SecretStore};

/// The secret the list is kept under.
pub(crate) const SECRET: &str = "recent-workspaces";
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
pub(crate) fn kept_env(env: &Env, config: &crate::config::Effective) -> Env {
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
pub(crate) struct Used {
    pub(crate) workspace: String,
    /// The session's environment; none when it was the daemon's own.
    pub(crate) env: Option<Env>,
    /// Servers that session had disabled.
    pub(crate) disabled: BTreeSet<String>,
    /// Unix ms.
    pub(crate) at_ms: u64,
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
    pub(crate) kept: usize,
    list: Mutex<Vec<Used>>,
    /// Noted since the last write.
    pub(crate) changed: tokio::sync::Notify,
    pub(crate) dirty: std::sync::atomic::AtomicBool,
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

    pub(crate) fn list(&self) -> parking_lot::MutexGuard<'_, Vec<Used>> {
        self.list.lock()
    }

    /// A session in `workspace` started its servers.
    pub(crate) fn note(&self, workspace: &str, env: Option<&Env>, disabled: BTreeSet<String>) {
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

    pub(crate) fn encoded(&self) -> Secret<Vec<u8>> {
        let stored = Stored { version: 1, used: self.list().clone() };
        Secret::new(serde_json::to_vec(&stored).unwrap_or_default())
    }

    /// What the store kept, under what was noted since the start.
    pub(crate) fn merge_stored(&self, stored: Vec<Used>) {
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
pub(crate) async fn load(secrets: Arc<SecretStore>) -> Vec<Used> {
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
