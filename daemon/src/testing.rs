//! The library's surface for its own tests crate and bench, and nothing more: the binary needs
//! only [`crate::start::main`], and every other module is crate-private. What is here is either
//! a core to drive without a socket ([`Daemon`]) or a pure part a test or the bench measures on
//! its own (hook runs, the registries, the policy engine, pins, the store).

use std::sync::Arc;

use jsonrpsee::Methods;

pub use crate::config::ConfigPaths;
pub use crate::core::DaemonInfo;
pub use crate::discovered::Options as CustomTools;
pub use crate::mcp::McpOptions;
pub use crate::session::ConnId;
pub use crate::store::Store;

use crate::config::Loader;
use crate::core::Core;

/// The call pipeline's seats, for a test that puts its own in a [`Daemon`].
pub mod calls {
    pub use crate::calls::seats::{
        After, AfterTool, Audit, Before, BeforeTool, Decision, Ended, Hidden, Policy, PolicyNote,
        Seats, ToolFilter,
    };
    pub use crate::calls::{Call, Origin, Outcome};
}

/// A hook's run, a plan of hooks, and their registry.
pub mod hooks {
    pub use crate::hooks::exec::fire;
    pub use crate::hooks::plan::plan;
    pub use crate::hooks::registry::Registry;
    pub use crate::hooks::run::{Context, Format, MAX_OUTPUT, run};
    pub use crate::hooks::{HookCommand, HookEvent, HookSource};
}

/// Custom commands: their loading cache and name resolution.
pub mod commands {
    pub use crate::commands::load::Cache;
    pub use crate::commands::resolve::{Candidate, resolve};
}

/// Skills: their loading cache and registry.
pub mod skills {
    pub use crate::skills::load::Cache;
    pub use crate::skills::registry::{Registry, places};
}

/// The policy engine and its rule files.
pub mod policy {
    pub use crate::policy::engine::PolicySet;
    pub use crate::policy::load::load;
    pub use crate::policy::{Tier, ToolCall};
    pub use geminid_protocol::policy::ApprovalMode;
}

pub use crate::extensions::Extensions;
pub use crate::pins::{Pins, canon};

/// A core built as the daemon builds it, over a store and Gemini CLI's files, driven through
/// its JSON-RPC methods without a socket.
#[derive(Debug, Clone)]
pub struct Daemon(Arc<Core>);

impl Daemon {
    /// The daemon's own seats (policy, hooks, audit) when `seats` is `None`, else only those.
    pub fn new(
        store: Store,
        info: DaemonInfo,
        paths: ConfigPaths,
        seats: Option<calls::Seats>,
    ) -> Self {
        let config = Loader::new(paths);
        Self(match seats {
            Some(seats) => Core::with_seats(store, info, config, seats),
            None => Core::new(store, info, config),
        })
    }

    /// The daemon's JSON-RPC methods over this core.
    pub fn methods(&self) -> Result<Methods, jsonrpsee::core::RegisterMethodError> {
        crate::rpc::methods(self.0.clone())
    }

    /// A client connected on `conn` (requests carry it; a session attaches to it).
    pub fn connection_opened(&self, conn: ConnId) {
        self.0.services().sessions.connection_opened(conn);
    }

    /// Stop every MCP server and wait for their processes to be gone.
    pub async fn shutdown(&self) {
        self.0.services().mcp.lifecycle().shutdown().await;
    }
}
