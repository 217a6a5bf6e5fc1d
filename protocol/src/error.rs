//! The error-code tables. JSON-RPC reserves -32768..=-32000 for the protocol and its
//! implementations, and jsonrpsee (the transport) uses -32000..=-32011 of it for its own errors
//! (an oversized request, a busy server, ...). geminid's application errors therefore live in a
//! range of their own, -31099..=-31000, and are stable across releases; [`transport_name`]
//! names every code the transport itself can send.

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
    /// The tool call was refused: by a policy rule, by the person asked to confirm it, or
    /// because no client of the session listens for confirmations.
    PolicyDenied,
    /// A BeforeTool or AfterTool hook blocked the tool call.
    HookBlocked,
    /// A BeforeTool hook stopped the agent's turn.
    Stopped,
    /// Nobody answered a confirmation in time.
    ConfirmationTimedOut,
    /// The MCP server needs an OAuth sign-in (`gemctl mcp auth NAME`), or a sign-in could not
    /// start; the message says why.
    NeedsAuth,
    /// An extension's files could not be verified or signed (no integrity key, an unreadable
    /// folder, a record that cannot be written); the message names the fix.
    IntegrityFailed,
    /// No installed extension has that name.
    ExtensionNotFound,
    /// No skill (or agent definition) the session sees has that name.
    SkillNotFound,
    /// The tool's definition differs from the one pinned for its server (changed, or new
    /// since the server was pinned): it is held until `gemctl mcp accept` (`mcp/accept`).
    ToolHeld,
    /// Anything else that went wrong inside the daemon.
    Internal,
}

impl ErrorCode {
    /// Every code, for documentation and tests.
    pub const ALL: [ErrorCode; 26] = [
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
        Self::PolicyDenied,
        Self::HookBlocked,
        Self::Stopped,
        Self::ConfirmationTimedOut,
        Self::NeedsAuth,
        Self::IntegrityFailed,
        Self::ExtensionNotFound,
        Self::SkillNotFound,
        Self::ToolHeld,
        Self::Internal,
    ];

    /// The numeric JSON-RPC error code.
    pub const fn code(self) -> i32 {
        match self {
            Self::VersionMismatch => -31001,
            Self::SessionNotFound => -31002,
            Self::InvalidWorkspace => -31003,
            Self::ShuttingDown => -31004,
            Self::Overloaded => -31005,
            Self::Storage => -31006,
            Self::ConfigRefused => -31007,
            Self::ConfigWrite => -31008,
            Self::ServerNotFound => -31009,
            Self::ServerUnavailable => -31010,
            Self::ServerError => -31011,
            Self::ToolNotFound => -31012,
            Self::InvalidArguments => -31013,
            Self::NotInCatalog => -31014,
            Self::MissingArguments => -31015,
            Self::Cancelled => -31016,
            Self::PolicyDenied => -31017,
            Self::HookBlocked => -31018,
            Self::Stopped => -31019,
            Self::ConfirmationTimedOut => -31020,
            Self::NeedsAuth => -31021,
            Self::IntegrityFailed => -31022,
            Self::ExtensionNotFound => -31023,
            Self::SkillNotFound => -31024,
            Self::ToolHeld => -31025,
            Self::Internal => -31099,
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
            Self::PolicyDenied => "policyDenied",
            Self::HookBlocked => "hookBlocked",
            Self::Stopped => "stopped",
            Self::ConfirmationTimedOut => "confirmationTimedOut",
            Self::NeedsAuth => "needsAuth",
            Self::IntegrityFailed => "integrityFailed",
            Self::ExtensionNotFound => "extensionNotFound",
            Self::SkillNotFound => "skillNotFound",
            Self::ToolHeld => "toolHeld",
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

/// The code protocol version 1 said `versionMismatch` with (before geminid's codes moved out
/// of jsonrpsee's range); a client still reads it as that in a hello answer.
pub const VERSION_MISMATCH_V1: i32 = -32001;

/// The JSON-RPC codes the transport (JSON-RPC itself, and jsonrpsee) can answer with, by the
/// stable name `gemctl --json` prints for them. None of them is one of [`ErrorCode`]'s.
pub const TRANSPORT_CODES: [(i32, &str); 14] = [
    (-32700, "parseError"),
    (-32600, "invalidRequest"),
    (-32601, "methodNotFound"),
    (-32602, "invalidParams"),
    (-32603, "internalError"),
    (-32000, "callFailed"),
    (-32001, "unknownError"),
    (-32005, "batchesNotSupported"),
    (-32006, "tooManySubscriptions"),
    (-32007, "requestTooLarge"),
    (-32008, "responseTooLarge"),
    (-32009, "serverBusy"),
    (-32010, "batchTooLarge"),
    (-32011, "batchResponseTooLarge"),
];

/// The name of a transport error code (see [`TRANSPORT_CODES`]).
pub fn transport_name(code: i32) -> Option<&'static str> {
    TRANSPORT_CODES.iter().find(|(c, _)| *c == code).map(|(_, n)| *n)
}

/// The stable name of any code a geminid connection can answer with: one of geminid's own,
/// or the transport's.
pub fn code_name(code: i32) -> Option<&'static str> {
    ErrorCode::from_code(code).map(ErrorCode::name).or_else(|| transport_name(code))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_a_connection_can_answer_has_a_name() {
        assert_eq!(code_name(-32007), Some("requestTooLarge"));
        assert_eq!(code_name(-32008), Some("responseTooLarge"));
        assert_eq!(code_name(-31008), Some("configWrite"));
        assert_eq!(code_name(-31010), Some("serverUnavailable"));
        assert_eq!(code_name(-1), None);
    }

    #[test]
    fn codes_are_unique_and_round_trip() {
        for c in ErrorCode::ALL {
            assert_eq!(ErrorCode::from_code(c.code()), Some(c));
            assert!((-31099..=-31000).contains(&c.code()), "{c:?} outside geminid's range");
            assert_eq!(transport_name(c.code()), None, "{c:?} collides with a transport code");
        }
        let mut codes: Vec<_> = ErrorCode::ALL.iter().map(|c| c.code()).collect();
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), ErrorCode::ALL.len());
    }
}
