//! What the edges reach: handles to the services a client's requests use, and no methods.
//! The core holds one set and shares it. The gateway is given these, not the [`Core`], so it
//! cannot reach what it has no business with (reloads, installs, policy files, sign-ins):
//! everything it does goes through a session's catalog, the call pipeline and the asks, as a
//! client's would. rpc uses them, and the feature services the core hands out below.

use std::path::PathBuf;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::Core;
use super::hooks::HookSeat;
use crate::asks::Asks;
use crate::audit::AuditLog;
use crate::calls::Pipeline;
use crate::catalog::Catalog;
use crate::events::EventBus;
use crate::extensions::Extensions;
use crate::mcp::Supervisor;
use crate::session::Sessions;

/// The services the edges reach.
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
    /// Hooks: the tool events in the pipeline, and the events front-ends fire.
    pub(crate) hooks: Arc<HookSeat>,
    /// The record of every call.
    pub(crate) audit: Arc<AuditLog>,
    /// Cancelled when the daemon begins to shut down.
    pub(crate) shutdown: CancellationToken,
    /// The daemon's data directory (the HTTP gateway's token file).
    pub(crate) data_dir: PathBuf,
}

impl Core {
    /// The services the edges reach: the ones the core holds, not copies.
    pub(crate) fn services(&self) -> &Arc<Services> {
        &self.services
    }

    /// Each session's effective configuration (read, and made known to reloads).
    pub(crate) fn configs(&self) -> &Arc<super::configs::Configs> {
        &self.config
    }

    /// The skills service (`skills/*`, `agents/*`).
    pub(crate) fn skills(&self) -> &Arc<super::skills::Skills> {
        &self.skills
    }

    /// The commands service (`commands/list`).
    pub(crate) fn commands(&self) -> &Arc<super::commands::Commands> {
        &self.commands
    }

    /// The policy service (`policy/*`, `confirmation/respond`, `session/update`).
    pub(crate) fn policy(&self) -> &Arc<super::policy::SessionPolicy> {
        &self.policy
    }

    /// The extensions service (`extensions/*`).
    pub(crate) fn extensions(&self) -> &Arc<super::extensions::ExtensionService> {
        &self.extensions
    }

    /// The settings service (`config/*`, `trust/*`, `mcp/add|remove|enable|disable`).
    pub(crate) fn settings(&self) -> &Arc<super::settings::Settings> {
        &self.settings
    }

    /// Sessions' servers (`mcp/listServers`, `mcp/start`, the server a name means).
    pub(crate) fn servers(&self) -> &Arc<super::servers::SessionServers> {
        &self.servers
    }

    /// Sign-ins (`auth/*`).
    pub(crate) fn sign_ins(&self) -> &Arc<super::auth::SignIns> {
        &self.sign_ins
    }

    /// The reloads (the watcher, `mcp/reload`).
    pub(crate) fn reloader(&self) -> &Arc<super::reload::Reloader> {
        &self.reloader
    }
}
