//! How a call fails, by kind: the RPC edge (`rpc/tools.rs`) maps each kind to its protocol
//! error code and formats the message once.

use geminid_protocol::mcp::ServerState;

use crate::catalog::CatalogError;
use crate::mcp::McpError;
use crate::session::SessionError;

/// Why a tool call did not produce a result.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CallError {
    /// The session is unknown, or its servers could not be started.
    #[error(transparent)]
    Session(#[from] SessionError),
    /// No tool of the session has that name; the message says why when a server would have
    /// had it.
    #[error("{0}")]
    ToolNotFound(String),
    /// The tool's server is not connected.
    #[error("{0}")]
    Unavailable(String),
    /// The arguments do not match the tool's input schema.
    #[error("invalid arguments for tool '{tool}': {why}")]
    InvalidArguments {
        /// The tool, as the caller named it.
        tool: String,
        /// The first failing path and what is wrong there.
        why: String,
    },
    /// The call id names a call already in progress in the session.
    #[error("callId '{0}' is already used by a call in progress in this session")]
    DuplicateCallId(String),
    /// `tools/cancel` reached it.
    #[error("call '{id}' to '{tool}' was cancelled")]
    Cancelled {
        /// The call id.
        id: String,
        /// The tool.
        tool: String,
    },
    /// A policy rule denied it.
    #[error("{0}")]
    PolicyDenied(String),
    /// Its definition differs from the one pinned for its server: held until accepted.
    #[error("{0}")]
    Held(String),
    /// A BeforeTool or AfterTool hook blocked it.
    #[error("{0}")]
    HookBlocked(super::seats::Verdict),
    /// A hook stopped the agent's turn.
    #[error("{0}")]
    Stopped(super::seats::Verdict),
    /// Nobody answered the confirmation in time.
    #[error("{0}")]
    ConfirmationTimedOut(String),
    /// The person asked said no.
    #[error("{0}")]
    Declined(String),
    /// The server failed the request (answered an error, did not answer in time, died).
    #[error(transparent)]
    Mcp(#[from] McpError),
    /// The session's catalog could not be had.
    #[error(transparent)]
    Catalog(#[from] CatalogError),
}

impl CallError {
    /// The hooks that blocked or stopped it, if hooks did.
    pub(crate) fn hooks(&self) -> &[String] {
        match self {
            Self::HookBlocked(v) | Self::Stopped(v) => &v.by,
            _ => &[],
        }
    }

    /// What the audit log keeps: the error, and the hooks that decided it.
    pub(super) fn audited(&self) -> String {
        match self.hooks() {
            [] => self.to_string(),
            by => format!(
                "{self} (by hook {})",
                by.iter().map(|h| format!("'{h}'")).collect::<Vec<_>>().join(", ")
            ),
        }
    }

    /// A tool that is not in the table, said by the state of the server that would have it.
    /// `near`: the session's tool `name` most likely meant, named and never called.
    pub(super) fn missing(
        explained: Option<(ServerState, String)>,
        name: &str,
        near: Option<&str>,
    ) -> Self {
        let near = near.map(|n| format!("; did you mean '{n}'?")).unwrap_or_default();
        match explained {
            Some((ServerState::Connected, why)) => Self::ToolNotFound(format!("{why}{near}")),
            Some((_, why)) => Self::Unavailable(why),
            None => Self::ToolNotFound(format!(
                "no tool named '{name}' in this session (`gemctl mcp tools` lists them{near})"
            )),
        }
    }
}
