//! The settings service: Gemini CLI's files read (`config/get`, `context/*`) and changed
//! through the daemon (`config/*`, `trust/*`, `mcp/add`, `mcp/remove`, `mcp/enable`,
//! `mcp/disable`, `hooks/enable`, `hooks/migrate`): each change applied by a reload before it
//! is answered, so the caller's next request sees it.

use geminid_protocol::config::{
    BlockReason, EffectiveConfig, McpAddResult, McpEnableResult, McpRemoveResult, TrustGetResult,
    TrustLevel, TrustSetResult, WriteScope,
};
use serde_json::Value;

use std::sync::Arc;

use crate::config::enablement;
use crate::config::ops::{self, OpError};
use crate::services::configs::Configs;
use crate::services::reload::Reloader;
use crate::session::SessionError;

/// Why a change to the configuration was not made.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ChangeError {
    /// The session is unknown (or its record could not be read).
    #[error(transparent)]
    Session(#[from] SessionError),
    /// The change breaks a rule, or its file could not be written.
    #[error(transparent)]
    Op(#[from] OpError),
    /// No configured server has that name.
    #[error("{0}")]
    NoSuchServer(String),
}

/// Gemini CLI's settings, trust and enablement files, read and changed for a session.
#[derive(Debug)]
pub(crate) struct Settings {
    config: Arc<Configs>,
    /// Sessions.
    sessions: Arc<crate::session::Sessions>,
    /// Installed extensions.
    extensions: Arc<crate::extensions::Extensions>,
    /// Each change is applied by a reload.
    reloader: Arc<Reloader>,
}

impl Settings {
    pub(crate) fn new(
        config: Arc<Configs>,
        sessions: Arc<crate::session::Sessions>,
        extensions: Arc<crate::extensions::Extensions>,
        reloader: Arc<Reloader>,
    ) -> Self {
        Self { config, sessions, extensions, reloader }
    }

    fn workspace(&self, session: &str) -> Result<std::path::PathBuf, SessionError> {
        Ok(self.sessions.record(session)?.workspace.into())
    }

    /// A settings or trust file was just written: apply it before answering (the watcher's
    /// reload would come only a moment later, and comes anyway).
    async fn written(&self, session: Option<&str>, reason: &str) {
        if let Err(e) = self.reloader.reload(session, reason).await {
            tracing::warn!(reason, error = %e, "could not apply the written file at once");
        }
    }

    /// `config/get`: as written (an expanded `$TOKEN` never comes back to a client), or with
    /// `show_secrets`, as used, nothing redacted (asked for by the user at a terminal).
    pub(crate) fn config_view(
        &self,
        session: &str,
        show_secrets: bool,
    ) -> Result<EffectiveConfig, SessionError> {
        let e = self.config.effective(session)?;
        if !show_secrets {
            return Ok(EffectiveConfig { settings: e.shown_settings, ..e.public });
        }
        tracing::info!(session, "config/get: secrets shown, as the client asked");
        let mut public = e.public;
        for entry in &mut public.mcp_servers {
            if let Some(used) = e.servers.get(&entry.name)
                && let Ok(config) = serde_json::to_value(&used.config)
            {
                entry.config = config;
            }
        }
        Ok(public)
    }

    /// `context/files`.
    pub(crate) fn context_files(
        &self,
        session: &str,
    ) -> Result<geminid_protocol::config::ContextFilesResult, SessionError> {
        let e = self.config.effective(session)?;
        let env = self.config.session_env(session);
        let home = &self.config.paths().home;
        // Bounded reads (regular files only, opened without waiting, capped), off the loop.
        crate::config::files::off_loop(|| {
            Ok(geminid_protocol::config::ContextFilesResult {
                names: crate::config::context::names_used(&e),
                files: crate::config::context::files(&e, home, &env),
            })
        })
    }

    /// Whether folder trust is on, as the daemon's own settings say (a session's environment
    /// can still override it per session).
    fn folder_trust_enabled(&self) -> bool {
        let home = self.config.paths().home.clone();
        let e = self.config.loader().effective(&home, &Default::default(), &Default::default());
        e.public
            .settings
            .pointer("/security/folderTrust/enabled")
            .and_then(Value::as_bool)
            .unwrap_or(true)
    }

    /// `trust/get`.
    pub(crate) fn trust_get(&self, path: &str) -> Result<TrustGetResult, ChangeError> {
        Ok(ops::trust_get(self.config.paths(), path, self.folder_trust_enabled())?)
    }

    /// `trust/set`.
    pub(crate) async fn trust_set(
        &self,
        path: &str,
        level: Option<TrustLevel>,
    ) -> Result<TrustSetResult, ChangeError> {
        let r = ops::trust_set(self.config.paths(), path, level)?;
        self.written(None, "trust/set").await;
        Ok(r)
    }

    /// `mcp/add`.
    pub(crate) async fn mcp_add(
        &self,
        session: &str,
        scope: WriteScope,
        name: &str,
        config: &Value,
    ) -> Result<McpAddResult, ChangeError> {
        let ws = self.workspace(session)?;
        let r = ops::mcp_add(self.config.paths(), &ws, scope, name, config)?;
        self.written(Some(session), "mcp/add").await;
        Ok(r)
    }

    /// `hooks/enable` and `hooks/disable`.
    pub(crate) async fn set_hook_enabled(
        &self,
        session: &str,
        scope: WriteScope,
        name: &str,
        enabled: bool,
    ) -> Result<geminid_protocol::hooks::HooksEnableResult, ChangeError> {
        let ws = self.workspace(session)?;
        let (file, disabled, others) =
            ops::set_hook_enabled(self.config.paths(), &ws, scope, name, enabled)?;
        self.written(Some(session), if enabled { "hooks/enable" } else { "hooks/disable" }).await;
        Ok(geminid_protocol::hooks::HooksEnableResult {
            file: file.display().to_string(),
            disabled,
            still_disabled_in: others,
        })
    }

    /// `mcp/import`.
    pub(crate) async fn mcp_import(
        &self,
        session: &str,
        p: &geminid_protocol::config::McpImportParams,
    ) -> Result<geminid_protocol::config::McpImportResult, ChangeError> {
        self.workspace(session)?;
        let paths = self.config.paths();
        let extensions = self.extensions.current().servers();
        // Held across the read and both writes, as `gemctl clients connect` holds it.
        let _lock = config_lock(&paths.geminid).await?;
        let r = if p.undo {
            crate::config::import::mcp_unimport(paths, &extensions, p.dry_run)?
        } else {
            crate::config::import::mcp_import(paths, &p.command, &extensions, p.dry_run)?
        };
        if r.written {
            self.written(Some(session), "mcp/import").await;
        }
        Ok(r)
    }

    /// `hooks/migrate`.
    pub(crate) async fn hooks_migrate(
        &self,
        session: &str,
        dry_run: bool,
    ) -> Result<geminid_protocol::hooks::HooksMigrateResult, ChangeError> {
        let ws = self.workspace(session)?;
        let mut r = crate::hooks::migrate::into_workspace(self.config.paths(), &ws, dry_run)?;
        if r.written {
            self.written(Some(session), "hooks/migrate").await;
        }
        if !self.config.effective(session)?.public.trust.trusted && !r.changed.is_empty() {
            r.notes.push(
                "this folder is not trusted: its settings' hooks do not run until `gemctl trust`"
                    .to_owned(),
            );
        }
        Ok(r)
    }

    /// `mcp/remove`.
    pub(crate) async fn mcp_remove(
        &self,
        session: &str,
        scope: WriteScope,
        name: &str,
    ) -> Result<McpRemoveResult, ChangeError> {
        let ws = self.workspace(session)?;
        let r = ops::mcp_remove(self.config.paths(), &ws, scope, name)?;
        self.written(Some(session), "mcp/remove").await;
        Ok(r)
    }

    /// `mcp/enable` and `mcp/disable`: in `mcp-server-enablement.json`, or for the session
    /// only (stored with it). Enabling also clears a session-only disable, as `/mcp enable`
    /// does; a server the allowlist or excludelist blocks cannot be enabled.
    pub(crate) async fn set_enabled(
        &self,
        session: &str,
        name: &str,
        enabled: bool,
        session_only: bool,
    ) -> Result<McpEnableResult, ChangeError> {
        let effective = self.config.effective(session)?;
        let key = enablement::normalize(name);
        let Some(entry) =
            effective.public.mcp_servers.iter().find(|s| enablement::normalize(&s.name) == key)
        else {
            return Err(ChangeError::NoSuchServer(format!(
                "Server '{name}' not found. `gemctl mcp list` shows the configured servers."
            )));
        };
        if enabled
            && let Some(list @ (BlockReason::Allowlist | BlockReason::Excludelist)) = entry.blocked
        {
            let (what, key) = if list == BlockReason::Allowlist {
                ("allowlist", "allowed")
            } else {
                ("excludelist", "excluded")
            };
            return Err(ChangeError::Op(OpError::Refused(format!(
                "Cannot enable '{}': it is blocked by the {what} (mcp.{key} in settings).",
                entry.name
            ))));
        }
        if session_only {
            self.sessions.set_server_disabled(session, &entry.name, !enabled).await?;
        } else {
            ops::set_enabled(self.config.paths(), &entry.name, enabled)?;
            if enabled {
                self.sessions.set_server_disabled(session, &entry.name, false).await?;
            }
        }
        // Announce it now (a session-only change touches no file the watcher could see).
        let reason = if enabled { "mcp/enable" } else { "mcp/disable" };
        self.reloader.reload(Some(session), reason).await?;
        Ok(McpEnableResult { name: entry.name.clone(), enabled, session_only })
    }
}

/// Gemini CLI's settings as an input: every scope's file, the trusted folders and the
/// enablement file, and each known session's workspace settings. Reading them again is the
/// reload itself (`Reloader::reload`), so there is nothing to do before or after.
#[derive(Debug)]
pub(crate) struct SettingsInput(pub(crate) std::sync::Arc<crate::services::configs::Configs>);

impl crate::services::reload::Input for SettingsInput {
    fn name(&self) -> &'static str {
        "settings"
    }

    fn watch(
        &self,
        known: &[crate::config::Effective],
        into: &mut crate::services::reload::Watched,
    ) {
        let p = self.0.paths();
        into.files.extend(
            [&p.user, &p.geminid, &p.system, &p.system_defaults, &p.trusted_folders, &p.enablement]
                .into_iter()
                .cloned(),
        );
        // Antigravity CLI's files: its servers files and each plugin's.
        into.files.insert(p.agy_servers());
        into.dirs.insert(p.agy_plugins());
        into.files.extend(crate::config::agy_plugins::watched(&p.agy_plugins()));
        for e in known {
            let ws = std::path::Path::new(&e.public.workspace);
            into.files.extend(p.workspace_settings(ws));
            into.files.extend(p.workspace_geminid(ws));
            into.files.insert(crate::config::ConfigPaths::agy_workspace_servers(ws));
        }
    }
}

/// The lock on geminid's servers.json that `gemctl clients connect` takes too
/// ([`geminid_protocol::config_lock`]), waited for without holding a worker thread.
async fn config_lock(
    servers_json: &std::path::Path,
) -> Result<geminid_protocol::config_lock::ConfigLock, ChangeError> {
    use geminid_protocol::config_lock::{ConfigLock, LockError, WAIT};
    let dir = servers_json.parent().unwrap_or(std::path::Path::new("."));
    let refused = |e: LockError| ChangeError::Op(OpError::Refused(e.to_string()));
    let start = tokio::time::Instant::now();
    loop {
        if let Some(lock) = ConfigLock::try_take(dir).map_err(refused)? {
            return Ok(lock);
        }
        if start.elapsed() >= WAIT {
            return Err(refused(ConfigLock::busy(dir)));
        }
        // Poll: the lock is another process's; flock has no wake-up to wait on.
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}
