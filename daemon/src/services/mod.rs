//! The feature services: each joins a feature (its files, its rules: layer 2) to the session's
//! configuration and to the catalog and call pipeline (layer 4), and is built by the core with
//! only the handles it uses. No service holds the core, nor the edges' set of handles below.
//!
//! - `configs.rs`: each session's effective configuration and the reload baselines; everything
//!   here reads a session's configuration through it.
//! - `reload.rs`: the `Reloader` and the `Input` trait each part that owns input files
//!   implements in its own file.
//! - `forget.rs`: the `Forget` trait, what a closed session's state is dropped through.
//! - `policy/`: a tool call's decision (`tool_calls.rs`) and the policy requests outside a call
//!   (`requests.rs`); `hooks.rs`: the hook seat; `prepared.rs`: what both seats prepare once
//!   per session.
//! - `skills/`, `commands.rs`, `extensions.rs`, `settings.rs`, `auth.rs` (sign-ins),
//!   `servers.rs` (sessions' servers listed and started), `starter.rs` (the catalog's
//!   `Starter`), `recent.rs` (the workspaces used lately, which the core warms).
//!
//! [`Services`] is what the edges (rpc, the gateway) are given: one set of handles, no
//! methods.

pub(crate) mod auth;
pub(crate) mod commands;
pub(crate) mod configs;
pub(crate) mod extensions;
pub(crate) mod forget;
pub(crate) mod hooks;
pub(crate) mod policy;
pub(crate) mod prepared;
pub(crate) mod recent;
pub(crate) mod reload;
pub(crate) mod servers;
pub(crate) mod settings;
pub(crate) mod skills;
pub(crate) mod starter;

use std::path::PathBuf;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use self::hooks::HookSeat;
use crate::asks::Asks;
use crate::audit::AuditLog;
use crate::calls::Pipeline;
use crate::catalog::Catalog;
use crate::events::EventBus;
use crate::extensions::Extensions;
use crate::mcp::Supervisor;
use crate::session::Sessions;

/// What the edges reach: handles to the services a client's requests use, and no methods.
/// The core builds one set and shares it with rpc and the gateway. The gateway is given
/// these, not the core, so it cannot reach what it has no business with (reloads, installs,
/// policy files, sign-ins): everything it does goes through a session's catalog, the call
/// pipeline and the asks, as a client's would. No service is given this set.
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
