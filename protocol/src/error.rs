//! The error-code table. JSON-RPC reserves -32768..=-32000 for the protocol itself; geminid's
//! application errors use -32000..=-32099 ("server error" range) and are stable across releases.

use jsonrpsee::types::ErrorObjectOwned;
use serde::Serialize;

/// Application error codes used by geminid. The numeric values are part of the protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorCode {
    /// The client's protocol version is not the daemon's.
    VersionMismatch,
    /// No session has the given id.
    SessionNotFound,
    /// The workspace directory does not exist or is not a directory.
    InvalidWorkspace,
    /// The daemon is shutting down and takes no new work.
    ShuttingDown,
    /// A bounded queue or limit is full; retry later.
    Overloaded,
    /// The daemon's own storage failed.
    Storage,
    /// A configuration request breaks a rule (invalid entry, wrong scope, blocked server).
    ConfigRefused,
    /// A configuration file could not be written (or does not parse, so it is not touched).
    ConfigWrite,
    /// No configured MCP server has that name.
    ServerNotFound,
    /// The MCP server is not connected (starting, failed, crashed, or died during the call);
    /// the message names it and the cause.
    ServerUnavailable,
    /// The MCP server answered the request with an error, or did not answer in time.
    ServerError,
    /// No tool of the session has that name.
    ToolNotFound,
    /// The arguments do not match the tool's input schema; the message names the path.
    InvalidArguments,
    /// No prompt or resource of the session has that name or URI.
    NotInCatalog,
    /// A prompt was called without a required argument (Gemini CLI's message).
    MissingArguments,
    /// The call was cancelled (`tools/cancel`).
    Cancelled,
    /// Anything else that went wrong inside the daemon.
    Internal,
}

impl ErrorCode {
    /// Every code, for documentation and tests.
    pub const ALL: [ErrorCode; 17] = [
        Self::VersionMismatch,
        Self::SessionNotFound,
        Self::InvalidWorkspace,
        Self::ShuttingDown,
        Self::Overloaded,
        Self::Storage,
        Self::ConfigRefused,
        Self::ConfigWrite,
        Self::ServerNotFound,
        Self::ServerUnavailable,
        Self::ServerError,
        Self::ToolNotFound,
        Self::InvalidArguments,
        Self::NotInCatalog,
        Self::MissingArguments,
        Self::Cancelled,
        Self::Internal,
    ];

    /// The numeric JSON-RPC error code.
    pub const fn code(self) -> i32 {
        match self {
            Self::VersionMismatch => -32001,
            Self::SessionNotFound => -32002,
            Self::InvalidWorkspace => -32003,
            Self::ShuttingDown => -32004,
            Self::Overloaded => -32005,
            Self::Storage => -32006,
            Self::ConfigRefused => -32007,
            Self::ConfigWrite => -32008,
            Self::ServerNotFound => -32009,
            Self::ServerUnavailable => -32010,
            Self::ServerError => -32011,
            Self::ToolNotFound => -32012,
            Self::InvalidArguments => -32013,
            Self::NotInCatalog => -32014,
            Self::MissingArguments => -32015,
            Self::Cancelled => -32016,
            Self::Internal => -32099,
        }
    }

    /// The code for a numeric value, if it is one of ours.
    pub fn from_code(code: i32) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.code() == code)
    }

    /// A short stable name, used in `gemctl --json` error output.
    pub const fn name(self) -> &'static str {
        match self {
            Self::VersionMismatch => "versionMismatch",
            Self::SessionNotFound => "sessionNotFound",
            Self::InvalidWorkspace => "invalidWorkspace",
            Self::ShuttingDown => "shuttingDown",
            Self::Overloaded => "overloaded",
            Self::Storage => "storage",
            Self::ConfigRefused => "configRefused",
            Self::ConfigWrite => "configWrite",
            Self::ServerNotFound => "serverNotFound",
            Self::ServerUnavailable => "serverUnavailable",
            Self::ServerError => "serverError",
            Self::ToolNotFound => "toolNotFound",
            Self::InvalidArguments => "invalidArguments",
            Self::NotInCatalog => "notInCatalog",
            Self::MissingArguments => "missingArguments",
            Self::Cancelled => "cancelled",
            Self::Internal => "internal",
        }
    }

    /// An error object with this code and a message.
    pub fn error(self, message: impl Into<String>) -> ErrorObjectOwned {
        ErrorObjectOwned::owned::<()>(self.code(), message.into(), None)
    }

    /// An error object with this code, a message and structured data.
    pub fn error_with<D: Serialize>(self, message: impl Into<String>, data: D) -> ErrorObjectOwned {
        ErrorObjectOwned::owned(self.code(), message.into(), Some(data))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_and_round_trip() {
        for c in ErrorCode::ALL {
            assert_eq!(ErrorCode::from_code(c.code()), Some(c));
            assert!((-32099..=-32000).contains(&c.code()), "{c:?} outside the server range");
        }
        let mut codes: Vec<_> = ErrorCode::ALL.iter().map(|c| c.code()).collect();
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), ErrorCode::ALL.len());
    }
}
