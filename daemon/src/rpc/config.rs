//! `config/*`, `trust/*` and the configuration half of `mcp/*`.

use geminid_protocol::api::{ConfigApiServer, McpApiServer, TrustApiServer};
use geminid_protocol::config::{
    BlockReason, ConfigParams, DiagnosticsResult, EffectiveConfig, McpAddParams, McpAddResult,
    McpEnableParams, McpEnableResult, McpReloadParams, McpReloadResult, McpRemoveParams,
    McpRemoveResult, TrustGetParams, TrustGetResult, TrustSetParams, TrustSetResult,
};
use geminid_protocol::error::ErrorCode;
use geminid_protocol::mcp::{
    CallToolParams, ListServersParams, ListServersResult, LogsParams, LogsResult, ServerParams,
    ServerStatus, StartParams,
};
use jsonrpsee::core::{RpcResult, async_trait};
use jsonrpsee::types::ErrorObjectOwned;

use super::Handler;
use super::session::rpc_error;
use crate::config::ops::{self, OpError};
use crate::config::{enablement, write::WriteError};

fn op_error(e: OpError) -> ErrorObjectOwned {
    let code = match &e {
        OpError::Refused(_) | OpError::Write(WriteError::Unparsable { .. }) => {
            ErrorCode::ConfigRefused
        }
        OpError::Write(WriteError::Io { .. }) => ErrorCode::ConfigWrite,
    };
    code.error(e.to_string())
}

impl Handler {
    fn workspace(&self, session: &str) -> RpcResult<std::path::PathBuf> {
        Ok(self.core.sessions.record(session).map_err(rpc_error)?.workspace.into())
    }

    /// A settings or trust file was just written: apply it before answering, so that the
    /// caller's next request sees it (the watcher would only a moment later, and its reload
    /// then finds nothing new). A failure is logged, not returned: the write succeeded, and
    /// the watcher's reload comes anyway.
    async fn written(&self, session: Option<&str>, reason: &str) {
        if let Err(e) = self.core.reload_config(session, reason).await {
            tracing::warn!(reason, error = %e, "could not apply the written file at once");
        }
    }

    fn folder_trust_enabled(&self) -> bool {
        // Trust as the rules say, for `trust/get`: the daemon's settings decide whether the
        // feature is on (a session's environment can still override per session).
        let home = self.core.config.paths().home.clone();
        let e = self.core.config.effective(&home, &Default::default(), &Default::default());
        e.public
            .settings
            .pointer("/security/folderTrust/enabled")
            .and_then(serde_json::Value::as_bool)
            .unwrap_or(true)
    }

    async fn set_enabled(&self, p: McpEnableParams, enabled: bool) -> RpcResult<McpEnableResult> {
        let effective = self.core.effective(&p.session).map_err(rpc_error)?;
        let key = enablement::normalize(&p.name);
        let Some(entry) =
            effective.public.mcp_servers.iter().find(|s| enablement::normalize(&s.name) == key)
        else {
            return Err(ErrorCode::ServerNotFound.error(format!(
                "Server '{}' not found. `gemctl mcp list` shows the configured servers.",
                p.name
            )));
        };
        if enabled
            && matches!(entry.blocked, Some(BlockReason::Allowlist | BlockReason::Excludelist))
        {
            return Err(ErrorCode::ConfigRefused.error(format!(
                "Cannot enable '{}': it is blocked by the {} (mcp.{} in settings).",
                entry.name,
                if entry.blocked == Some(BlockReason::Allowlist) {
                    "allowlist"
                } else {
                    "excludelist"
                },
                if entry.blocked == Some(BlockReason::Allowlist) { "allowed" } else { "excluded" },
            )));
        }
        if p.session_only {
            self.core
                .sessions
                .set_server_disabled(&p.session, &entry.name, !enabled)
                .await
                .map_err(rpc_error)?;
        } else {
            ops::set_enabled(self.core.config.paths(), &entry.name, enabled).map_err(op_error)?;
            if enabled {
                // Enabling also clears a session-only disable, as `/mcp enable` does.
                self.core
                    .sessions
                    .set_server_disabled(&p.session, &entry.name, false)
                    .await
                    .map_err(rpc_error)?;
            }
        }
        // Announce it now (a session-only change touches no file the watcher could see).
        let reason = if enabled { "mcp/enable" } else { "mcp/disable" };
        self.core.reload_config(Some(&p.session), reason).await.map_err(rpc_error)?;
        Ok(McpEnableResult { name: entry.name.clone(), enabled, session_only: p.session_only })
    }
}

#[async_trait]
impl ConfigApiServer for Handler {
    async fn config_get(&self, p: ConfigParams) -> RpcResult<EffectiveConfig> {
        let e = self.core.effective(&p.session).map_err(rpc_error)?;
        if p.show_secrets {
            // Asked for by the user at their terminal: as used, nothing redacted.
            tracing::info!(session = %p.session, "config/get: secrets shown, as the client asked");
            let mut public = e.public;
            for entry in &mut public.mcp_servers {
                if let Some(used) = e.servers.get(&entry.name)
                    && let Ok(config) = serde_json::to_value(&used.config)
                {
                    entry.config = config;
                }
            }
            return Ok(public);
        }
        // Shown as written: an expanded `$TOKEN` never comes back to a client.
        Ok(EffectiveConfig { settings: e.shown_settings, ..e.public })
    }

    async fn config_diagnostics(&self, p: ConfigParams) -> RpcResult<DiagnosticsResult> {
        let diagnostics = self.core.effective(&p.session).map_err(rpc_error)?.public.diagnostics;
        Ok(DiagnosticsResult { diagnostics })
    }
}

#[async_trait]
impl TrustApiServer for Handler {
    async fn trust_get(&self, p: TrustGetParams) -> RpcResult<TrustGetResult> {
        ops::trust_get(self.core.config.paths(), &p.path, self.folder_trust_enabled())
            .map_err(op_error)
    }

    async fn trust_set(&self, p: TrustSetParams) -> RpcResult<TrustSetResult> {
        let r = ops::trust_set(self.core.config.paths(), &p.path, p.level).map_err(op_error)?;
        self.written(None, "trust/set").await;
        Ok(r)
    }
}

#[async_trait]
impl McpApiServer for Handler {
    async fn mcp_add(&self, p: McpAddParams) -> RpcResult<McpAddResult> {
        let ws = self.workspace(&p.session)?;
        let r = ops::mcp_add(self.core.config.paths(), &ws, p.scope, &p.name, &p.config)
            .map_err(op_error)?;
        self.written(Some(&p.session), "mcp/add").await;
        Ok(r)
    }

    async fn mcp_remove(&self, p: McpRemoveParams) -> RpcResult<McpRemoveResult> {
        let ws = self.workspace(&p.session)?;
        let r =
            ops::mcp_remove(self.core.config.paths(), &ws, p.scope, &p.name).map_err(op_error)?;
        self.written(Some(&p.session), "mcp/remove").await;
        Ok(r)
    }

    async fn mcp_enable(&self, p: McpEnableParams) -> RpcResult<McpEnableResult> {
        self.set_enabled(p, true).await
    }

    async fn mcp_disable(&self, p: McpEnableParams) -> RpcResult<McpEnableResult> {
        self.set_enabled(p, false).await
    }

    async fn mcp_reload(&self, p: Option<McpReloadParams>) -> RpcResult<McpReloadResult> {
        let session = p.and_then(|p| p.session);
        let changes =
            self.core.reload_config(session.as_deref(), "mcp/reload").await.map_err(rpc_error)?;
        Ok(McpReloadResult { changes })
    }

    async fn mcp_list_servers(&self, p: Option<ListServersParams>) -> RpcResult<ListServersResult> {
        self.list_servers(p).await
    }

    async fn mcp_start(&self, p: StartParams) -> RpcResult<ListServersResult> {
        self.start(p).await
    }

    async fn mcp_restart(&self, p: ServerParams) -> RpcResult<ServerStatus> {
        self.restart(p).await
    }

    async fn mcp_logs(&self, p: LogsParams) -> RpcResult<LogsResult> {
        self.logs(p).await
    }

    async fn mcp_call_tool(&self, p: CallToolParams) -> RpcResult<serde_json::Value> {
        self.call_tool(p).await
    }
}
