//! The session's view of what it can use, above the sources that offer it: tools, prompts
//! and resources by the names Gemini CLI gives them.
//!
//! - [`Catalog`]: the service (a session's tool table, its prompts and resources; its servers
//!   are started on first use through [`Starter`]);
//! - `crate::naming`: fully qualified tool names, include/exclude, the schema transforms;
//! - [`tools`]: a session's tool table, built from its sources (its custom tools, discovered
//!   through [`crate::discovered`], and its MCP servers) and shared by every session
//!   configured alike;
//! - [`prompts`]: prompt command names, command-line arguments, resource references;
//! - [`view`]: prompts, resources and instructions as `prompts/*`, `resources/*` and
//!   `tools/instructions` answer them.
//!
//! Policy's static filter ([`ToolFilter`]: tools a rule denies outright are not listed, and
//! a call to one is refused with the rule's reason) applies where every table is built.

pub(crate) mod error;
pub(crate) mod prompts;
pub(crate) mod tools;
pub(crate) mod view;

use std::sync::Arc;

pub(crate) use error::CatalogError;
pub use tools::{Hidden, ToolFilter};
pub(crate) use tools::{SessionTools, Tables};
pub(crate) use view::ResourceRef;

use crate::discovered::{Discovery, Registry, Spec};
use crate::mcp::Supervisor;
use crate::naming;
use crate::session::SessionError;

/// What the catalog needs of the daemon that owns it: starting a session's servers and what its
/// custom tools come from (both read the session's configuration).
pub(crate) trait Starter: Send + Sync {
    /// Start the session's servers unless it has them.
    fn ensure_servers(&self, session: &str) -> Result<(), SessionError>;

    /// The session's `tools.discoveryCommand` and what goes with it, if it has one.
    fn discovery_spec(&self, session: &str) -> Option<Spec>;
}

/// A session's tools, prompts and resources.
pub(crate) struct Catalog {
    mcp: Arc<Supervisor>,
    tables: Tables,
    starter: Arc<dyn Starter>,
    filter: Option<Arc<dyn ToolFilter>>,
    discovered: Arc<Registry>,
}

impl std::fmt::Debug for Catalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Catalog").field("tables", &self.tables).finish_non_exhaustive()
    }
}

impl Catalog {
    /// A catalog over the supervisor's servers and the custom tools `discovered` finds;
    /// `starter` starts a session's servers, `filter` is policy's static filter.
    pub(crate) fn new(
        mcp: Arc<Supervisor>,
        discovered: Arc<Registry>,
        starter: Arc<dyn Starter>,
        filter: Option<Arc<dyn ToolFilter>>,
    ) -> Self {
        Self { mcp, tables: Tables::default(), starter, filter, discovered }
    }

    /// Why policy's static filter hides a server's tool from the session, if it does.
    pub(crate) fn hides(
        &self,
        session: &str,
        server: &str,
        tool: &str,
        annotations: Option<&serde_json::Map<String, serde_json::Value>>,
    ) -> Option<Hidden> {
        let name = naming::fqn(server, tool);
        self.filter.as_ref().and_then(|f| f.hides(session, &name, Some(server), annotations))
    }

    fn discovery_spec(&self, session: &str) -> Option<Spec> {
        self.starter.discovery_spec(session)
    }

    /// The session's custom tools, discovered first if they have not been for its current
    /// settings.
    pub(crate) async fn custom_tools(&self, session: &str) -> Option<Arc<Discovery>> {
        self.discovered.ensure(session, self.discovery_spec(session)).await
    }

    /// `tools/refresh`: run the session's discovery command again.
    pub(crate) async fn refresh_custom_tools(&self, session: &str) -> Option<Arc<Discovery>> {
        self.discovered.refresh(session, self.discovery_spec(session)).await
    }

    /// The session's servers, started if it had not.
    pub(crate) fn ensure_servers(&self, session: &str) -> Result<(), SessionError> {
        if self.mcp.is_active(session) {
            return Ok(());
        }
        self.starter.ensure_servers(session)
    }

    /// The session's tool table as it is now (its servers must have been started).
    pub(crate) fn tools_now(&self, session: &str) -> Result<Arc<SessionTools>, CatalogError> {
        let custom = self.discovered.current(session);
        Ok(self.tables.session(&self.mcp, session, self.filter.as_deref(), custom)?)
    }

    /// The session's tools, starting its servers first if it had not. With `complete`, a
    /// server still in its first start is waited for (up to its start-up timeout), so a list,
    /// or a call whose tool is not there yet, sees the same catalog as the request that
    /// started the servers; without, the table as it is now (a call to a server that is up
    /// never waits for one that is still starting).
    pub(crate) async fn session_tools(
        &self,
        session: &str,
        complete: bool,
    ) -> Result<Arc<SessionTools>, CatalogError> {
        self.ensure_servers(session)?;
        self.custom_tools(session).await;
        let tools = self.tools_now(session)?;
        if !complete || !tools.pending {
            return Ok(tools);
        }
        self.mcp.lifecycle().settle(session).await;
        self.tools_now(session)
    }

    /// The session let its servers go (it closed, or its last client detached): its table is
    /// not kept.
    pub(crate) fn forget(&self, session: &str) {
        self.tables.forget(session);
        self.discovered.forget(session);
    }
}
