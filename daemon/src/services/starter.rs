//! What the catalog needs of the daemon ([`Starter`]): a session's servers started, and what
//! its custom tools come from, both read from its configuration. [`SessionStarter`] is built
//! before the catalog and handed to it, so the catalog holds no reference back into the core.

use std::sync::Arc;

use crate::catalog::Starter;
use crate::discovered::Spec;
use crate::mcp::{SessionView, Supervisor};
use crate::services::configs::Configs;
use crate::services::recent::Recent;
use crate::session::{SessionError, Sessions};

/// Starts sessions' servers, and remembers the workspaces used lately (warmed at the next
/// start).
#[derive(Debug)]
pub(crate) struct SessionStarter {
    config: Arc<Configs>,
    sessions: Arc<Sessions>,
    mcp: Arc<Supervisor>,
    /// Workspaces used lately.
    pub(crate) recent: Recent,
}

impl SessionStarter {
    pub(crate) fn new(
        config: Arc<Configs>,
        sessions: Arc<Sessions>,
        mcp: Arc<Supervisor>,
        recent: Recent,
    ) -> Self {
        Self { config, sessions, mcp, recent }
    }

    /// The session needs its MCP servers: start or share them, and note its workspace.
    pub(crate) fn start(&self, session: &str) -> Result<(), SessionError> {
        let config = self.config.effective(session)?;
        let env = self.config.session_env(session);
        self.mcp.lifecycle().sync(SessionView { id: session, config: &config, env: &env }, &[]);
        self.note_used(session, &config);
        Ok(())
    }

    /// A session started its servers: remember its workspace for the next daemon start, with
    /// only the variables its servers need of its environment.
    fn note_used(&self, session: &str, config: &crate::config::Effective) {
        if self.recent.kept == 0 {
            return;
        }
        let Ok(rec) = self.sessions.record(session) else { return };
        let env = self
            .sessions
            .client_env(session)
            .map(|e| crate::services::recent::kept_env(&e, config));
        let disabled = rec.state.disabled_servers.iter().cloned().collect();
        self.recent.note(&rec.workspace, env.as_ref(), disabled);
    }
}

impl Starter for SessionStarter {
    fn ensure_servers(&self, session: &str) -> Result<(), SessionError> {
        self.start(session)
    }

    fn discovery_spec(&self, session: &str) -> Option<Spec> {
        let (discovery, call, workspace) = {
            let known = self.config.baselines();
            let c = &known.get(session)?.public;
            let text = |key: &str| {
                c.settings.pointer(key).and_then(serde_json::Value::as_str).map(str::to_owned)
            };
            // An empty command is none (Gemini CLI's `if (!discoveryCmd)`).
            let discovery = text("/tools/discoveryCommand").filter(|d| !d.is_empty())?;
            (discovery, text("/tools/callCommand"), c.workspace.clone())
        };
        let env = self.config.session_env(session);
        Some(Spec { discovery, call, cwd: workspace.into(), env })
    }
}
