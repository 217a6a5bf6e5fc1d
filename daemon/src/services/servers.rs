//! A session's servers (`mcp/listServers`, `mcp/start`), and the server `mcp/logs` and
//! `mcp/restart` mean, whether or not the session runs its servers now.

use std::sync::Arc;

use geminid_protocol::mcp::ListServersResult;

use crate::config::Effective;
use crate::mcp::server::Server;
use crate::mcp::{McpError, SessionView};
use crate::services::configs::Configs;
use crate::services::starter::SessionStarter;
use crate::session::SessionError;

/// Sessions' servers, listed and started.
#[derive(Debug)]
pub(crate) struct SessionServers {
    config: Arc<Configs>,
    /// Sessions.
    sessions: Arc<crate::session::Sessions>,
    /// The MCP servers.
    mcp: Arc<crate::mcp::Supervisor>,
    /// Each session's tools.
    catalog: Arc<crate::catalog::Catalog>,
    starter: Arc<SessionStarter>,
}

impl SessionServers {
    pub(crate) fn new(
        config: Arc<Configs>,
        sessions: Arc<crate::session::Sessions>,
        mcp: Arc<crate::mcp::Supervisor>,
        catalog: Arc<crate::catalog::Catalog>,
        starter: Arc<SessionStarter>,
    ) -> Self {
        Self { config, sessions, mcp, catalog, starter }
    }

    /// A session's servers as `mcp/listServers` shows them; starts nothing.
    pub(crate) fn list(&self, session: &str) -> Result<ListServersResult, SessionError> {
        let config = self.config.last_told(session)?;
        let env = self.config.session_env(session);
        let servers =
            self.mcp.status().list_session(SessionView { id: session, config: &config, env: &env });
        Ok(ListServersResult { servers, warnings: list_warnings(&config) })
    }

    /// `mcp/start`: the session needs its servers; with `wait`, until each has connected or
    /// failed its first attempt. Servers are needed while someone is attached: a start for a
    /// session nobody is attached to only lasts the linger period.
    pub(crate) async fn start(
        &self,
        session: &str,
        wait: bool,
    ) -> Result<ListServersResult, SessionError> {
        self.starter.start(session)?;
        if wait {
            self.mcp.lifecycle().settle(session).await;
        }
        let result = self.list(session)?;
        if self.sessions.get(session)?.attached_connections == 0 {
            self.mcp.lifecycle().release_session(session);
            self.catalog.forget(session);
        }
        Ok(result)
    }

    /// The server the session's entry `name` means: the one it runs, or, when the session
    /// runs none now (its clients left; the servers linger), the one its settings resolve
    /// to, running or stopped lately.
    pub(crate) fn server_of(&self, session: &str, name: &str) -> Result<Arc<Server>, McpError> {
        match self.mcp.find(Some(session), name) {
            Err(McpError::Unavailable(why)) if !self.mcp.is_active(session) => {
                let Ok(config) = self.config.last_told(session) else {
                    return Err(McpError::Unavailable(why));
                };
                let env = self.config.session_env(session);
                self.mcp
                    .status()
                    .find_planned(SessionView { id: session, config: &config, env: &env }, name)
            }
            other => other,
        }
    }
}

/// What `gemctl mcp list` says before the list: an untrusted folder (in Gemini CLI's words, and
/// how to trust it) and every settings error with its position.
fn list_warnings(config: &Effective) -> Vec<String> {
    use geminid_protocol::config::Severity;
    let mut out = Vec::new();
    let c = &config.public;
    if !c.trust.trusted && !c.mcp_servers.is_empty() {
        // Gemini CLI's two lines as it prints them; ours (why, and the fix) indented below.
        out.push(
            "Warning: MCP servers are configured but disabled because this folder is untrusted."
                .to_owned(),
        );
        out.push(
            "User-level servers are also suppressed in untrusted folders to prevent accidental \
             side-effects."
                .to_owned(),
        );
        let reason = &c.trust.reason;
        let fix = if reason.contains("gemctl trust") { "" } else { "; `gemctl trust` trusts it" };
        out.push(format!("    {}: {reason}{fix}", c.workspace));
    }
    let errors: Vec<String> = c
        .diagnostics
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .map(|d| {
            let pos = match (d.line, d.column) {
                (Some(l), Some(col)) => format!(":{l}:{col}"),
                (Some(l), None) => format!(":{l}"),
                _ => String::new(),
            };
            format!("{}{pos}: error: {}", d.file, d.message)
        })
        .collect();
    if !errors.is_empty() {
        out.extend(errors);
        out.push("`gemctl config check` lists every problem.".to_owned());
    }
    // A variable a server needs and the session lacks is why it will fail: said before it does.
    let runs = config.servers.values().filter(|s| s.blocked.is_none());
    out.extend(runs.flat_map(|s| s.unset.iter().map(|u| format!("Warning: {u}"))));
    out
}
