//! The JSON-RPC surface: one file per namespace, each translating calls into [`Core`] calls.
//! No logic lives here beyond argument plumbing and error mapping.

mod catalog;
mod config;
mod daemon;
mod events;
mod mcp;
mod params;
mod session;
mod tools;

use std::sync::Arc;

use geminid_protocol::api::{
    ConfigApiServer, DaemonApiServer, EventsApiServer, McpApiServer, McpLogsApiServer,
    PromptsApiServer, ResourcesApiServer, SessionApiServer, ToolsApiServer, TrustApiServer,
};
use jsonrpsee::{Extensions, Methods, RpcModule};

pub use params::NamedParams;

use crate::core::Core;
use crate::session::ConnId;

/// Implements every namespace's server trait over the core.
#[derive(Debug, Clone)]
pub struct Handler {
    core: Arc<Core>,
}

/// Every method the daemon serves.
pub fn methods(core: Arc<Core>) -> Result<Methods, jsonrpsee::core::RegisterMethodError> {
    let handler = Handler { core };
    let mut module = RpcModule::new(());
    module.merge(DaemonApiServer::into_rpc(handler.clone()))?;
    module.merge(SessionApiServer::into_rpc(handler.clone()))?;
    module.merge(EventsApiServer::into_rpc(handler.clone()))?;
    module.merge(ConfigApiServer::into_rpc(handler.clone()))?;
    module.merge(TrustApiServer::into_rpc(handler.clone()))?;
    module.merge(McpApiServer::into_rpc(handler.clone()))?;
    module.merge(McpLogsApiServer::into_rpc(handler.clone()))?;
    module.merge(ToolsApiServer::into_rpc(handler.clone()))?;
    module.merge(PromptsApiServer::into_rpc(handler.clone()))?;
    module.merge(ResourcesApiServer::into_rpc(handler))?;
    Ok(module.into())
}

/// The connection a call arrived on (set by the accept loop through jsonrpsee).
fn conn_id(ext: &Extensions) -> ConnId {
    let id = ext.get::<jsonrpsee::ConnectionId>().map_or(0, |c| c.0);
    ConnId(u32::try_from(id).unwrap_or(u32::MAX))
}
