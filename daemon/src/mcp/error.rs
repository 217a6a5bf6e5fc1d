//! How a request to an MCP server fails, in cases a caller can tell apart: no such server, a
//! server that is not connected (or went away during the request), an error answer with its
//! code, no answer in time, and a request the transport could not carry. The RPC edge maps
//! each to its protocol code (`rpc/mcp.rs`); the message is written once, here or where the
//! case is met.

use std::time::Duration;

/// Errors of the runtime methods.
#[derive(Debug, thiserror::Error)]
pub(crate) enum McpError {
    /// No entry has that name.
    #[error("{0}")]
    NotFound(String),
    /// It exists but is not connected, or it went away during the request.
    #[error("{0}")]
    Unavailable(String),
    /// The server answered the request with a JSON-RPC error.
    #[error("{message}")]
    Answered {
        /// The server's error code.
        code: i32,
        /// What it said, with the server's name and, for the codes that have one, the fix.
        message: String,
    },
    /// The server did not answer within the bound.
    #[error("MCP server '{server}' did not answer within {}", humantime::format_duration(*after))]
    TimedOut {
        /// The server's name.
        server: String,
        /// The bound (the calling session's `timeout`).
        after: Duration,
    },
    /// The request could not be sent, or its answer not read, while the server stayed
    /// connected.
    #[error("{0}")]
    Transport(String),
}

impl McpError {
    /// Server `name`'s error answer; the codes of the 2026-07-28 era say what to do.
    pub(crate) fn answered(name: &str, e: &rmcp::ErrorData) -> Self {
        use rmcp::model::ErrorCode;
        let message = &e.message;
        let message = match e.code {
            ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY => format!(
                "MCP server '{name}' needs a capability this call did not declare ({message}): \
                 a session declares elicitation or sampling while one of its clients answers \
                 them (`gemctl attach`, or an editor listening with `asks/listen`)"
            ),
            ErrorCode::UNSUPPORTED_PROTOCOL_VERSION => format!(
                "MCP server '{name}' does not speak the protocol revision it agreed to \
                 ({message}); `gemctl mcp restart {name}` connects afresh"
            ),
            ErrorCode::HEADER_MISMATCH => format!(
                "MCP server '{name}' refused the request's HTTP headers ({message}): a proxy in \
                 between may rewrite them"
            ),
            _ => format!("MCP server '{name}' answered: {message}"),
        };
        Self::Answered { code: e.code.0, message }
    }

    /// What rmcp reports for a request to server `name` that stayed connected: an error answer
    /// is [`Self::Answered`], rmcp's own timeout [`Self::TimedOut`], anything else
    /// [`Self::Transport`] (`chain`: the error in words, as the caller may show it).
    pub(crate) fn of_service(name: &str, e: &rmcp::ServiceError, chain: String) -> Self {
        match e {
            rmcp::ServiceError::McpError(e) => Self::answered(name, e),
            rmcp::ServiceError::Timeout { timeout } => {
                Self::TimedOut { server: name.to_owned(), after: *timeout }
            }
            _ => Self::Transport(format!("MCP server '{name}': {chain}")),
        }
    }
}

/// Why a connection attempt failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ConnectError {
    /// The server answered 401: retrying without new credentials is pointless.
    NeedsAuth(String),
    /// Anything else; worth another attempt later. The message does not name the server (the
    /// task does, once).
    Failed(String),
}

impl std::fmt::Display for ConnectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NeedsAuth(m) | Self::Failed(m) => f.write_str(m),
        }
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::ErrorCode;
    use rmcp::{ErrorData, ServiceError};

    use super::*;

    #[test]
    fn each_failure_is_its_own_case_with_its_words() {
        let answer = ErrorData::new(ErrorCode::INVALID_PARAMS, "no such city", None);
        let e = McpError::of_service("weather", &ServiceError::McpError(answer), String::new());
        assert!(matches!(e, McpError::Answered { code: -32602, .. }), "{e:?}");
        assert_eq!(e.to_string(), "MCP server 'weather' answered: no such city");

        let timeout = ServiceError::Timeout { timeout: Duration::from_millis(300) };
        let e = McpError::of_service("weather", &timeout, String::new());
        assert!(matches!(&e, McpError::TimedOut { server, .. } if server == "weather"), "{e:?}");
        assert_eq!(e.to_string(), "MCP server 'weather' did not answer within 300ms");

        let e = McpError::of_service(
            "weather",
            &ServiceError::UnexpectedResponse,
            "an answer of the wrong kind".into(),
        );
        assert!(matches!(e, McpError::Transport(_)), "{e:?}");
        assert_eq!(e.to_string(), "MCP server 'weather': an answer of the wrong kind");
    }

    #[test]
    fn the_new_eras_codes_name_their_fix() {
        let cases = [
            (ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY, "`gemctl attach`"),
            (ErrorCode::UNSUPPORTED_PROTOCOL_VERSION, "`gemctl mcp restart fx`"),
            (ErrorCode::HEADER_MISMATCH, "a proxy in between"),
        ];
        for (code, fix) in cases {
            let e = McpError::answered("fx", &ErrorData::new(code, "why", None));
            assert!(matches!(e, McpError::Answered { code: c, .. } if c == code.0), "{e:?}");
            let text = e.to_string();
            assert!(text.starts_with("MCP server 'fx'") && text.contains("(why)"), "{text}");
            assert!(text.contains(fix), "{code:?}: {text}");
        }
    }
}
