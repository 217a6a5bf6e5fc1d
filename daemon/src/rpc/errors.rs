//! Each error kind a service returns, as the protocol says it: its code and message, each in
//! one place (a call's error holds a session's, a server's or a catalog's, which it maps the
//! same way).

use geminid_protocol::error::ErrorCode;
use jsonrpsee::types::ErrorObjectOwned;
use jsonrpsee::types::error::INVALID_PARAMS_CODE;

use crate::calls::CallError;
use crate::catalog::CatalogError;
use crate::mcp::McpError;
use crate::session::SessionError;

/// The JSON-RPC error for a session error.
pub(super) fn rpc_error(e: SessionError) -> ErrorObjectOwned {
    let code = match &e {
        SessionError::NotFound(_) => ErrorCode::SessionNotFound,
        SessionError::InvalidWorkspace { .. } => ErrorCode::InvalidWorkspace,
        SessionError::InvalidDerive(_) => ErrorCode::InvalidArguments,
        SessionError::Store(_) => {
            tracing::error!(error = %e, "session storage failed");
            ErrorCode::Storage
        }
    };
    code.error(e.to_string())
}

/// A failed request to a server as the protocol says it.
pub(super) fn mcp_error(e: McpError) -> ErrorObjectOwned {
    let code = match &e {
        McpError::NotFound(_) => ErrorCode::ServerNotFound,
        McpError::Unavailable(_) => ErrorCode::ServerUnavailable,
        // An error answer, no answer in time, or a transport fault: the message says which.
        McpError::Answered { .. } | McpError::TimedOut { .. } | McpError::Transport(_) => {
            ErrorCode::ServerError
        }
    };
    code.error(e.to_string())
}

/// A failed catalog request as the protocol says it.
pub(super) fn catalog_error(e: CatalogError) -> ErrorObjectOwned {
    let code = match e {
        CatalogError::Session(e) => return rpc_error(e),
        CatalogError::Mcp(e) => return mcp_error(e),
        CatalogError::NotInCatalog(_) => ErrorCode::NotInCatalog,
        CatalogError::MissingArguments(_) => ErrorCode::MissingArguments,
        CatalogError::Unusable(_) => ErrorCode::ServerError,
    };
    code.error(e.to_string())
}

/// A failed call as the protocol says it: its kind's code, its message.
pub(super) fn call_error(e: CallError) -> ErrorObjectOwned {
    let code = match e {
        CallError::Session(e) => return rpc_error(e),
        CallError::Mcp(e) => return mcp_error(e),
        CallError::Catalog(e) => return catalog_error(e),
        // A malformed request, as JSON-RPC names it.
        CallError::DuplicateCallId(_) => {
            return ErrorObjectOwned::owned(INVALID_PARAMS_CODE, e.to_string(), None::<()>);
        }
        CallError::ToolNotFound(_) => ErrorCode::ToolNotFound,
        CallError::Held(_) => ErrorCode::ToolHeld,
        CallError::Unavailable(_) => ErrorCode::ServerUnavailable,
        CallError::InvalidArguments { .. } => ErrorCode::InvalidArguments,
        CallError::Cancelled { .. } => ErrorCode::Cancelled,
        CallError::PolicyDenied(_) | CallError::Declined(_) => ErrorCode::PolicyDenied,
        CallError::HookBlocked(_) => ErrorCode::HookBlocked,
        CallError::Stopped(_) => ErrorCode::Stopped,
        CallError::ConfirmationTimedOut(_) => ErrorCode::ConfirmationTimedOut,
    };
    match e.hooks() {
        [] => code.error(e.to_string()),
        // Which hooks, for the caller (gemctl names them); the message stays the model's.
        by => code.error_with(e.to_string(), serde_json::json!({ "hooks": by })),
    }
}
