//! What the MCP gateway reaches: handles to the services it uses, and no methods. The gateway
//! is given these, not the [`Core`], so it cannot reach what it has no business with (reloads,
//! installs, policy files, sign-ins): everything it does goes through a session's catalog, the
//! call pipeline and the asks, as a client's would.

use std::path::PathBuf;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::Core;
use crate::asks::Asks;
use crate::calls::Pipeline;
use crate::catalog::Catalog;
use crate::events::EventBus;
use crate::extensions::Extensions;
use crate::mcp::Supervisor;
use crate::session::Sessions;

/// The gateway's services.
#[derive(Debug, Clone)]
pub(crate) struct Services {
    /// Sessions (a gateway connection attaches to one).
    pub(crate) sessions: Arc<Sessions>,
    /// The event bus (list changes, server state).
    pub(crate) events: Arc<EventBus>,
    /// The MCP servers (their logging and progress messages).
    pub(crate) mcp: Arc<Supervisor>,
    /// Each session's tools, prompts and resources.
    pub(crate) catalog: Arc<Catalog>,
    /// Questions pending for a person (elicitations, confirmations).
    pub(crate) asks: Arc<Asks>,
    /// The pipeline every tool call goes through.
    pub(crate) calls: Arc<Pipeline>,
    /// Installed extensions (whose servers a gateway may serve alone).
    pub(crate) extensions: Arc<Extensions>,
    /// Cancelled when the daemon begins to shut down.
    pub(crate) shutdown: CancellationToken,
    /// The daemon's data directory (the HTTP gateway's token file).
    pub(crate) data_dir: PathBuf,
}

impl Core {
    /// The gateway's services: handles to the same services the core holds.
    pub(crate) fn services(&self) -> Arc<Services> {
        Arc::new(Services {
            sessions: self.sessions.clone(),
            events: self.events.clone(),
            mcp: self.mcp.clone(),
            catalog: self.catalog.clone(),
            asks: self.asks.clone(),
            calls: self.calls.clone(),
            extensions: self.extensions.clone(),
            shutdown: self.shutdown_token().clone(),
            data_dir: self.data_dir(),
        })
    }
}
