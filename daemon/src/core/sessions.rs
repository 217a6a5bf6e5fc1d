//! A session's lifecycle as the core runs it: derived (`session/derive`, which reads the agent
//! definitions and the parent's tools), closed (with the sessions derived from it; everything
//! kept for it dropped through the registry of [`Forget`](crate::services::forget::Forget)
//! parts, in the order the core registered them), pruned when idle, and let go of its servers
//! when its last client detaches.

use std::time::Duration;

use geminid_protocol::session::{Session, SessionDeriveParams};

use super::Core;
use crate::session::SessionError;

impl Core {
    /// Close the default sessions idle for `max_idle` that hold nothing of their own (see
    /// [`Sessions::idle_defaults`]); returns how many.
    pub(crate) async fn prune_sessions(&self, max_idle: Duration) -> Result<usize, SessionError> {
        let ids = self.services.sessions.idle_defaults(max_idle)?;
        for id in &ids {
            match self.close_session(id).await {
                Ok(_) | Err(SessionError::NotFound(_)) => {}
                Err(e) => return Err(e),
            }
        }
        if !ids.is_empty() {
            tracing::info!(count = ids.len(), idle = %humantime::format_duration(max_idle), "closed idle default sessions");
        }
        Ok(ids.len())
    }

    /// Close a session and stop tracking its configuration; the sessions derived from it
    /// are closed first.
    pub(crate) async fn close_session(&self, id: &str) -> Result<Session, SessionError> {
        self.services.sessions.record(id)?;
        let order = self.with_descendants(id);
        let mut closed = None;
        for sid in order.iter().rev() {
            let s = match self.services.sessions.close(sid).await {
                Ok(s) => s,
                Err(SessionError::NotFound(_)) if sid != id => continue,
                Err(e) => return Err(e),
            };
            for part in &self.forget {
                part.forget(sid);
            }
            if sid == id {
                closed = Some(s);
            }
        }
        closed.ok_or_else(|| SessionError::NotFound(id.to_owned()))
    }

    /// These sessions lost their last connection: their servers may go (after the linger).
    pub(crate) fn sessions_unattached(&self, ids: &[String]) {
        // Connections close on their own during a shutdown; a session's servers must keep
        // serving the calls still running (of other connections) until the end of the grace,
        // when every server is stopped anyway.
        if self.services.shutdown.is_cancelled() {
            return;
        }
        for id in ids {
            // A derived session has no connection of its own: it lets its servers go with
            // its root's last client.
            for sid in self.with_descendants(id) {
                self.services.mcp.lifecycle().release_session(&sid);
                self.services.catalog.forget(&sid);
            }
        }
    }

    /// A session and every session derived from it, parents first.
    fn with_descendants(&self, id: &str) -> Vec<String> {
        let mut out = vec![id.to_owned()];
        let mut i = 0;
        while let Some(next) = out.get(i).cloned() {
            out.extend(self.services.sessions.children(&next).unwrap_or_default());
            i += 1;
        }
        out
    }

    /// `session/derive`.
    pub(crate) async fn derive_session(
        &self,
        p: SessionDeriveParams,
    ) -> Result<geminid_protocol::session::Session, SessionError> {
        let (mut name, mut tools) = (p.name, p.tools);
        if let Some(agent) = &p.agent {
            let (agents, _) = self.skills.agent_registry(&p.parent)?;
            let Some(def) = agents.get(agent) else {
                let known: Vec<&str> = agents.keys().map(String::as_str).collect();
                return Err(SessionError::InvalidDerive(format!(
                    "no agent definition named \"{agent}\" in the parent's folders (`gemctl agents \
                     list` shows them; known: {})",
                    if known.is_empty() { "none".to_owned() } else { known.join(", ") }
                )));
            };
            if name.is_empty() {
                name.clone_from(&def.info.name);
            }
            if tools.is_none() {
                tools.clone_from(&def.info.tools);
            }
        }
        if let Some(list) = &tools {
            self.check_derived_tools(&p.parent, list).await?;
        }
        let s = self.services.sessions.derive(&p.parent, &name, tools).await?;
        self.config.track(&s.id);
        Ok(s)
    }

    /// A subagent's tool list names its parent's tools: an MCP or custom tool the parent does
    /// not have is refused, with the one likely meant (it would leave the subagent without it,
    /// silently; audit C6). Names with `*`, and names a front-end owns (no `mcp_` or
    /// `discovered_tool_` prefix), are taken as given. The parent's servers are started to
    /// know, as the subagent's first call would.
    async fn check_derived_tools(&self, parent: &str, list: &[String]) -> Result<(), SessionError> {
        let ours = |n: &&String| {
            !n.contains('*') && (n.starts_with("mcp_") || n.starts_with("discovered_tool_"))
        };
        if !list.iter().any(|n| ours(&n)) {
            return Ok(());
        }
        // The parent's table, as complete as its servers make it; none: nothing to check by.
        let Ok(table) = self.services.catalog.session_tools(parent, true).await else {
            return Ok(());
        };
        let known: Vec<&str> = table
            .tools
            .iter()
            .chain(table.hidden.values().map(|(_, t)| t))
            .map(|t| t.fqn.as_str())
            .collect();
        let unknown: Vec<String> = list
            .iter()
            .filter(ours)
            .filter(|n| !known.contains(&n.as_str()))
            .map(|n| {
                format!(
                    "'{n}'{}",
                    geminid_protocol::suggest::did_you_mean(n, known.iter().copied())
                )
            })
            .collect();
        if unknown.is_empty() {
            return Ok(());
        }
        Err(SessionError::InvalidDerive(format!(
            "the parent session has no tool {}: a subagent's tools are its parent's (`gemctl mcp \
             tools` lists them) or a front-end's own",
            unknown.join(", ")
        )))
    }
}
