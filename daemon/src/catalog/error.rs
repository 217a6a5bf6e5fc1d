//! How a catalog request fails, by kind (mapped to protocol codes at the RPC edge).

use crate::mcp::McpError;
use crate::session::SessionError;

/// Why a list, a prompt or a resource could not be had.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CatalogError {
    /// The session is unknown, or its servers could not be started.
    #[error(transparent)]
    Session(#[from] SessionError),
    /// A server failed the request, or is not there.
    #[error(transparent)]
    Mcp(#[from] McpError),
    /// No prompt or resource of the session has that name or URI.
    #[error("{0}")]
    NotInCatalog(String),
    /// A prompt's required argument was not given (Gemini CLI's message).
    #[error("{0}")]
    MissingArguments(String),
    /// The server answered, but not with what Gemini CLI can use.
    #[error("{0}")]
    Unusable(String),
}
